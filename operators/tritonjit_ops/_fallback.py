"""aten's own kernel behind an implementation that refuses a call, on both paths of enable().

On the C++ operator path a raising implementation hands the call to aten's kernel below
BackendSelect. On the Python path (before that path is built, or with it turned off)
enable() registers the implementations at the backend's own dispatch key, over aten's
kernel there, so a refusal would reach the caller as an error: ``.cpu()`` of a device
tensor (``_to_copy`` to another device), a complex ``cat``. :func:`with_aten_fallback`
wraps each implementation so that any exception sends the call to aten's kernel for the
backend key, captured when the module is imported, before enable() replaces it; aten then
computes it, or raises its own error, as in eager.

A Python number in a Tensor argument (``x * True``, ``torch.where(c, x, 0.5)``: the
dispatcher hands the Python kernel a wrapped-number tensor as a plain number) is passed
to aten's kernel as a 0-dim CPU tensor of the dtype that number takes in the call's type
promotion (a boxed kernel call does not take numbers for Tensor arguments).
"""
from __future__ import annotations

import sys
from numbers import Number
from typing import Any, Callable

import torch
import tritonjit

#: overload -> (aten's kernel for the backend key, that key's set, the Tensor slots), as
#: with_aten_fallback captured them
_KERNELS: dict[str, tuple[Any, Any, tuple[tuple[int, str], ...]]] = {}


def with_aten_fallback(table: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """``table`` (aten overload -> implementation) with each implementation falling back to
    aten's own kernel for the active backend's dispatch key."""
    key = tritonjit.current_backend().dispatch_key
    keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
    out: dict[str, Callable[..., Any]] = {}
    for name, impl in table.items():
        base, _, overload = name.partition(".")
        try:
            kernel = torch.library.get_kernel(f"aten::{base}.{overload}" if overload else f"aten::{base}", key)
        except Exception:  # no kernel for that key (nothing to fall back to): the implementation alone
            out[name] = impl
            continue
        _KERNELS[name] = (kernel, keyset, _tensor_slots(base, overload or "default"))
        out[name] = _wrap(impl, kernel, keyset, _KERNELS[name][2])
    return out


def aten_kernel(name: str) -> Callable[..., Any] | None:
    """aten's own kernel of overload ``name`` for the backend's key, as captured before enable()
    replaced it (what a measured policy times against tritonjit's kernel), or None where it
    has none."""
    entry = _KERNELS.get(name)
    if entry is None:
        return None
    kernel, keyset, slots = entry
    return lambda *args, **kwargs: kernel.call_boxed(keyset, *_unwrapped(args, slots), **kwargs)


def _tensor_slots(base: str, overload: str) -> tuple[tuple[int, str], ...]:
    """(position, name) of the schema's Tensor arguments that are not keyword-only."""
    try:
        schema = getattr(getattr(torch.ops.aten, base), overload)._schema
    except (AttributeError, RuntimeError):
        return ()
    tensor = torch._C.TensorType.get()
    return tuple((i, a.name) for i, a in enumerate(schema.arguments)
                 if not a.kwarg_only and a.type == tensor)


def _unwrapped(args: tuple, slots: tuple[tuple[int, str], ...]) -> tuple:
    """``args`` with each Python number in a Tensor argument as a 0-dim CPU tensor of the
    dtype aten's promotion gives that wrapped number beside the call's first tensor (a 0-dim
    tensor of that dtype promotes with the other operands as the wrapped number would); a
    bool stays bool (the bottom of the promotion order, and the ops that refuse bool
    operands, ``sub``, refuse it as in eager)."""
    numbers = [i for i, _ in slots if i < len(args) and isinstance(args[i], Number)]
    if not numbers:
        return args
    ref = next((a for a in args if isinstance(a, torch.Tensor)), None)
    out = list(args)
    for i in numbers:
        v = args[i]
        dtype = torch.result_type(ref, v) if ref is not None and not isinstance(v, bool) else torch.tensor(v).dtype
        out[i] = torch.tensor(v, dtype=dtype)
    return tuple(out)


def _on_python_path() -> bool:
    """Whether enable()'s operators are the Python kernels (the C++ path, once registered,
    passes a refused call on to aten itself, and counts it)."""
    registry = sys.modules.get("tritonjit_ops._registry")
    return registry is None or registry._State.native is None


def final(exc: Exception) -> Exception:
    """``exc`` marked as the call's answer: the Python path raises it instead of handing the
    call to aten's kernel, where aten would fail worse (torch before 2.13 divides by zero in
    an int64 arange whose step truncates to 0 and kills the process)."""
    exc._tritonjit_final = True  # type: ignore[attr-defined]
    return exc


def _wrap(impl: Callable[..., Any], kernel: Any, keyset: Any,
          slots: tuple[tuple[int, str], ...] = ()) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return impl(*args, **kwargs)
        except Exception as e:
            if not _on_python_path() or getattr(e, "_tritonjit_final", False):
                raise
            return kernel.call_boxed(keyset, *_unwrapped(args, slots), **kwargs)

    call.__name__ = call.__qualname__ = getattr(impl, "__name__", "impl")
    call.__doc__ = impl.__doc__
    return call
