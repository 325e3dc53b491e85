"""aten's own kernel behind an implementation that refuses a call, on both paths of enable().

On the C++ operator path a raising implementation hands the call to aten's kernel below
BackendSelect. On the Python path (before that path is built, or with it turned off)
enable() registers the implementations at the backend's own dispatch key, over aten's
kernel there, so a refusal would reach the caller as an error: ``.cpu()`` of a device
tensor (``_to_copy`` to another device), a complex ``cat``. :func:`with_aten_fallback`
wraps each implementation so that any exception sends the call to aten's kernel for the
backend key, captured when the module is imported, before enable() replaces it; aten then
computes it, or raises its own error, as in eager.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import torch
import tritonjit


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
        out[name] = _wrap(impl, kernel, keyset)
    return out


def _on_python_path() -> bool:
    """Whether enable()'s operators are the Python kernels (the C++ path, once registered,
    passes a refused call on to aten itself, and counts it)."""
    registry = sys.modules.get("tritonjit_ops._registry")
    return registry is None or registry._State.native is None


def _wrap(impl: Callable[..., Any], kernel: Any, keyset: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return impl(*args, **kwargs)
        except Exception:
            if not _on_python_path():
                raise
            return kernel.call_boxed(keyset, *args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(impl, "__name__", "impl")
    call.__doc__ = impl.__doc__
    return call
