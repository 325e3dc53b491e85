"""``tritonjit.function(path, name)``'s loader: a kernel file imported by path, once."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from ._errors import KernelNotFoundError

__all__ = ["load_kernel"]


_modules: dict[str, Any] = {}


def load_kernel(path: str, name: str) -> Any:
    """Import ``path`` as a module (once) and return its attribute ``name``."""
    if not os.path.isfile(path):
        raise KernelNotFoundError(f"kernel file '{path}' does not exist (looking for kernel '{name}')")
    mod = _modules.get(path)
    if mod is None:
        modname = "tritonjit_kernels_" + "".join(c if c.isalnum() else "_" for c in path)
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise KernelNotFoundError(f"'{path}' is not an importable Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod  # Triton resolves globals through the module
        try:
            spec.loader.exec_module(mod)
        except Exception:
            sys.modules.pop(modname, None)
            raise
        _modules[path] = mod
    found = ", ".join(sorted(k for k, v in vars(mod).items() if _looks_like_kernel(v))) or "none"
    if not hasattr(mod, name):
        raise KernelNotFoundError(f"'{path}' has no kernel named '{name}' (kernels in it: {found})")
    obj = getattr(mod, name)
    if not _looks_like_kernel(obj):
        raise KernelNotFoundError(f"'{path}': '{name}' is of type {type(obj).__name__}, not a @triton.jit kernel "
                                  f"(kernels in it: {found})")
    return obj


def _looks_like_kernel(obj: Any) -> bool:
    from triton.runtime.jit import KernelInterface

    return isinstance(obj, KernelInterface)
