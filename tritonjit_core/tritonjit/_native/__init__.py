"""The optional native launch path: ``f[grid](...)`` bound, keyed and launched in C.

``_dispatch`` (C, built at install time when a compiler is present) holds the hot
path; this module only decides whether it is used and translates a kernel's static
signature and its backend's SpecializationRules into the dispatcher's tables. The
pure-Python path in ``_function.py`` stays the reference: every call the C code does
not handle with certainty (cache miss, unusual argument, any error) goes there.

Tensor arguments are read through the torch tensor reader (``torch_reader.py``, a
small C++ module built against torch on first use) where it is available, else
through Python calls.

``TRITONJIT_NO_NATIVE=1`` turns the native path off.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any

from .._signature import NULLOPT, Param, TupleToken
from .._specialize import _constexpr_key, element_rule, param_rule, triton_dtype_name

#: why the native dispatcher is missing when tritonjit-core was installed without it
NOT_BUILT = ("not built: the optional native dispatcher (tritonjit._native._dispatch) was not compiled when "
             "tritonjit-core was installed (no C compiler then?); the Python launch path is used "
             "(reinstall tritonjit-core with a C compiler, or from a wheel, to get it)")


def _load_dispatch() -> tuple[Any, str]:
    """The C dispatcher module and why it is or is not used.

    Where the extension was never built, ``from . import _dispatch`` inside this
    package's own import says "cannot import name ... (most likely due to a circular
    import)", which misleads: the module is simply absent, and that is said instead.
    """
    if os.environ.get("TRITONJIT_NO_NATIVE", "").strip().lower() in ("1", "true", "yes", "on"):  # as tritonjit_ops reads it
        return None, "disabled by TRITONJIT_NO_NATIVE"
    if importlib.util.find_spec(f"{__name__}._dispatch") is None:
        return None, NOT_BUILT
    try:
        from . import _dispatch  # type: ignore[attr-defined]  # a C extension, no stub
    except ImportError as exc:  # present but unloadable: a broken or foreign build
        return None, f"not loadable ({exc}); the Python launch path is used"
    return _dispatch, "available"


dispatch: Any  # the C extension module (untyped), or None
reason: str
dispatch, reason = _load_dispatch()

#: base class of KernelFunction: the C type whose __getitem__ enters the dispatcher. The
#: checker sees ``object``: KernelFunction declares what the C type adds (``__getitem__``
#: through ``_py_getitem``, ``_dispatcher``) itself.
if TYPE_CHECKING:
    KernelBase = object
else:
    KernelBase = dispatch.KernelBase if dispatch is not None else object

_NO_DEFAULT = object()


def available() -> bool:
    return dispatch is not None


def make_dispatcher(fn: Any, state: Any) -> Any:
    """A native dispatcher for ``fn`` on ``state.backend``, or None where the Python
    path must run every call (native path off, heuristics/autotune wrappers, a
    backend without devices, too many parameters)."""
    if dispatch is None or fn._heuristics is not None or fn._autotune_configs is not None:
        return None
    backend = state.backend
    if backend.make_launcher is None or len(fn.params) > dispatch.MAXP:
        return None
    device_mode = backend.info.device_type not in ("", "cpu")
    if not device_mode:
        return None
    rules = backend.specialization_rules()
    div = int(rules.divisibility)
    params = tuple(_param_entry(p, rules) for p in fn.params)
    tokens = tuple(sys.intern(t) for t in (
        "i32", f"i32:{div}", "i64", f"i64:{div}", "u64", f"u64:{div}", "i32:1", "fp32", "u1", NULLOPT))

    def annotate(index: int, token: str, _params: list[Param] = fn.params) -> str:
        ann = _params[index].annotation_type
        _, _, hint = token.partition(":")
        return sys.intern(f"{ann}:{hint}" if hint and hint != "1" else ann)

    from .._registry import registry

    elem = element_rule(rules)  # a tuple argument's elements are keyed by it
    elem_flags = (dispatch.F_ALIGN if elem.align else 0) | (dispatch.F_EQ1 if elem.equal_to_1 else 0)
    install_tensor_reader()
    return dispatch.Dispatcher(
        fn._run, state.caches, params, div, tokens, _pointer_tokens, _constexpr_key, annotate,
        _current_device_fn(backend), backend.current_stream, registry.current_cell, backend, device_mode, _NO_DEFAULT,
        elem_flags, TupleToken,
    )


def _current_device_fn(backend: Any) -> Any:
    """The plugin's cheaper current-device reader where it offers one
    (``TorchDevices.current_device_reader``), else the ``current_device`` hook."""
    reader = getattr(backend.plugin, "current_device_reader", None)
    fn = reader() if callable(reader) else None
    return fn if callable(fn) else backend.current_device


def install_tensor_reader(wait: bool = False) -> bool:
    """Hand the torch tensor reader to the dispatcher once it is built (see
    torch_reader.py: on a background thread, once per torch version); ``wait`` blocks
    until then. True where the dispatcher now reads tensors through it."""
    if dispatch is None:
        return False
    if dispatch.tensor_reader() is None:
        from . import torch_reader

        global _reader_hooked
        if not _reader_hooked and torch_reader.enabled():
            _reader_hooked = True
            torch_reader.on_ready(_use_reader)
        torch_reader.start(wait)
    return dispatch.tensor_reader() is not None


_reader_hooked = False


def _use_reader(capsule: Any) -> None:
    """The reader for the dispatcher, with its batch companion (one torch-function-mode
    check per launch instead of one per tensor) where the module has one."""
    from . import torch_reader

    dispatch.register_tensor_reader_batch(torch_reader.batch())
    dispatch.set_tensor_reader(capsule)


def _pointer_tokens(dtype: Any, const: bool) -> tuple[str, str] | None:
    """(aligned, unaligned) pointer tokens of a dtype, as _specialize._PointerTokens."""
    name = triton_dtype_name(dtype)
    if name is None:
        return None
    prefix = "*k" if const else "*"
    return sys.intern(f"{prefix}{name}:16"), sys.intern(f"{prefix}{name}")


def _param_entry(p: Param, rules: Any) -> tuple[str, int, Any, Any]:
    """(name, flags, default, forced token) of one parameter: its ParamRule as the C
    dispatcher's flags (the decision itself is _specialize.param_rule's)."""
    d = dispatch
    default = p.default if p.has_default else _NO_DEFAULT
    if p.is_constexpr:
        return p.name, d.F_CONSTEXPR, default, None
    rule = param_rule(p, rules)
    flags = (d.F_ALIGN if rule.align else 0) | (d.F_EQ1 if rule.equal_to_1 else 0)
    flags |= d.F_CONST_PTR if rule.const_pointer else 0
    flags |= d.F_ANN_FIXED if rule.fixed else d.F_ANN_REMAP if rule.remap else 0
    return p.name, flags, default, sys.intern(rule.annotation) if rule.fixed else None
