"""Which installed Triton can compile for a target, and honest errors when none can."""

from __future__ import annotations

import os
from typing import Any


def triton_backend_for(target: Any) -> str | None:
    """Name of the installed Triton backend whose compiler supports ``target``, if any."""
    try:
        from triton.backends import backends
    except Exception:  # noqa: BLE001 - a Triton without backends compiles nothing
        return None
    for name, backend in backends.items():
        try:
            if backend.compiler.supports_target(target):
                return name
        except Exception:  # noqa: BLE001, S112 - a broken backend does not support it
            continue
    return None


def require_triton_backend(target: Any, needed: str, backend_name: str) -> None:
    """Raise a clear error when no installed Triton compiles for ``target``.

    ``needed`` names the Triton that would (e.g. "Moore Threads' Triton (FlagTree
    mthreads backend)"); the message says so instead of a bare KeyError from Triton.
    """
    if triton_backend_for(target) is None:
        raise RuntimeError(f"no installed Triton compiles for {target}: the {backend_name} backend needs {needed}")


def arch_override(backend_name: str) -> str | None:
    """``TRITONJIT_<NAME>_ARCH``: the architecture to compile for when the vendor's
    torch (which would report the device's) is absent."""
    return os.environ.get(f"TRITONJIT_{backend_name.upper()}_ARCH") or None
