"""The C++ operator path (``_native_ops.cpp``): its build and its registrations.

torch's headers are not there when tritonjit-ops is built under build isolation, so
the module comes prebuilt in a wheel built for this torch (``_prebuilt/``, see
tritonjit._native.torch_prebuilt), else it is compiled on first use against the
installed torch by tritonjit's torch_build, on a background thread, once per torch
version (``tritonjit warmup --native`` builds it ahead of time). Until it is ready,
and wherever no C++ compiler exists, the operators are registered as Python kernels
instead (except enable()'s default selection on a device while the build runs: aten's
kernels serve it, see _registry.enable). ``TRITONJIT_OPS_NATIVE=0`` (or
``TRITONJIT_NO_NATIVE=1``) keeps the Python kernels.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable, Sequence

from . import _plan, _prologue

HERE = os.path.dirname(os.path.abspath(__file__))
_native: Any = None


def native() -> Any:
    """The build of the C++ operator path (a torch_build.AsyncModule), or None where it is off."""
    global _native
    if _native is None and _prologue._enabled():
        import tritonjit
        from tritonjit._native.torch_build import AsyncModule

        inc = tritonjit.get_include()
        headers = [os.path.join(inc, "tritonjit", "function.h"),
                   os.path.join(os.path.dirname(inc), "_native", "tritonjit_launch.h")]
        _native = AsyncModule("tritonjit_ops._native_ops", os.path.join(HERE, "_native_ops.cpp"), headers, [inc],
                              prebuilt=_prologue.PREBUILT)
        _native.on_ready(lambda mod: mod.init(_plan.In, _plan.Out, _plan.Tmp, _plan.Arg, _plan.InItem,
                                                    _plan.Const))
    return _native


def module(wait: bool = False) -> Any:
    """The loaded module (starting its build once); None until it is ready (``wait``: block)."""
    nat = native()
    return None if nat is None else nat.start(wait)


def load_if_ready() -> Any:
    """Load the C++ prologues and operator path now where they are built already (a
    prebuilt wheel, an earlier process, ``tritonjit warmup --native``): a few ms, so that
    names imported from the package are the direct entries from the start. Builds nothing."""
    pro = _prologue.native()
    if pro is not None:
        pro.load_if_ready()  # its ready callback rebinds _prologue.binary and like
    nat = native()
    return None if nat is None else nat.load_if_ready()


def on_ready(callback: Callable[[Any], None]) -> None:
    nat = native()
    if nat is not None:
        nat.on_ready(callback)


def register(namespace: str, dispatch_key: str, entries: Sequence[tuple[str, Any, Callable]], *,
             redispatch: bool = False, device_type: str = "cpu") -> Any:
    """Register C++ kernels for ``entries`` (overload, planner or None, Python implementation);
    the registrations last until :func:`release` of the returned handle. None where the
    module is not ready.

    ``redispatch``: the kernels sit at BackendSelect, above aten's own kernels of every
    backend, and pass on to those what they do not serve: tensors of another device type
    than ``device_type`` (the active backend's), calls a plan gives to aten (measured
    faster), calls the Python implementation cannot take (aten then answers, or raises
    its own error, as in eager)."""
    mod = module()
    if mod is None:
        return None
    with warnings.catch_warnings():  # replacing the kernels of an op is the point
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        return mod.register(namespace, dispatch_key, list(entries), redispatch, device_type)


def register_gates(namespace: str, dispatch_key: str, entries: Sequence[tuple[str, Callable]]) -> Any:
    """Register C++ autograd gates for ``entries`` (overload, torch.library's Python autograd
    kernel of it) at ``dispatch_key``, a backend's Autograd key: a call runs that Python kernel
    only where autograd has work (grad mode on and an input requiring grad, or forward-mode
    gradients); the others go below autograd without Python. Released as :func:`register`'s
    handle is; None where the module is not ready."""
    mod = module()
    if mod is None:
        return None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        try:
            return mod.register_gates(namespace, dispatch_key, list(entries))
        except RuntimeError as e:  # torch's DispatchKeySet binding not reachable from this module
            warnings.warn(f"tritonjit_ops: no C++ autograd gates ({e}); torch.library's Python autograd "
                          "kernels serve every call", RuntimeWarning, stacklevel=2)
            return None


def release(handle: Any) -> None:
    module().release(handle)


def clear_plans(ops: Iterable[str] | None = None) -> None:
    """Forget the C++ path's cached plans of ``ops`` (overload names as enable() takes
    them: "mm", "add.Tensor"), those of aten's operators under enable() and those of the
    ``tritonjit::`` operators of the same names (their torch.ops kernels and direct
    entries), or of every operator: their next call asks the planner again. For a policy
    whose decisions were reset (attention.clear_routes())."""
    mod = _native.module if _native is not None else None
    if mod is not None:
        names = None if ops is None else list(ops)
        for namespace in ("aten", "tritonjit"):
            mod.clear_plans(namespace, names)


def stats() -> dict[str, int]:
    """Counters of the C++ path: plan_hits (calls served in C++), plans_made, python_calls
    (calls sent to the Python implementation), launches, aten_calls (calls passed on to
    aten's own kernel: another device type, a plan that measured aten faster, a call the
    Python implementation could not take), autograd_python_calls (calls the autograd gates
    of the tritonjit:: ops sent to torch.library's Python autograd kernel). Empty where it is
    not in use."""
    mod = _native.module if _native is not None else None
    return mod.stats() if mod is not None else {}
