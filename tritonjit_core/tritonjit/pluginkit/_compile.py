"""Which installed Triton can compile for a target, and one honest error when none can.

Vendor kernels come from the vendor's Triton (FlagTree backends, Triton-Ascend,
triton_gcu ...), which upstream Triton does not include. Every plugin raises the same
:class:`VendorCompilerMissing` naming what to install; the core turns it into a
:class:`tritonjit.CompilationError` naming the kernel and caches nothing.
"""

from __future__ import annotations

import os
from typing import Any


class VendorCompilerMissing(RuntimeError):
    """No installed Triton compiles for the target; the message says what would."""


def _installed_backends() -> dict[str, Any]:
    try:
        from triton.backends import backends
    except Exception:  # noqa: BLE001 - a Triton without backends compiles nothing
        return {}
    return dict(backends)


def triton_backend_for(target: Any, only: str | None = None) -> str | None:
    """Name of the installed Triton backend whose compiler supports ``target``, if any
    (``only``: accept just the backend of that name, e.g. "iluvatar")."""
    for name, backend in _installed_backends().items():
        if only is not None and name != only:
            continue
        try:
            if backend.compiler.supports_target(target):
                return name
        except Exception:  # noqa: BLE001, S112 - a broken backend does not support it
            continue
    return None


def require_triton_backend(target: Any, needed: str, backend_name: str, *, binary_ext: str | None = None,
                           only: str | None = None) -> str:
    """The Triton backend that compiles ``target``, or :class:`VendorCompilerMissing`.

    ``needed`` names the Triton that would (e.g. "Moore Threads' Triton (FlagTree
    mthreads backend)"); ``only`` insists on one backend by name where another installed
    one would accept the target but build the wrong code (upstream NVIDIA for CoreX).
    """
    name = triton_backend_for(target, only)
    if name is not None:
        return name
    import triton

    which = f" with its '{only}' backend" if only else ""
    kernels = f"kernels (.{binary_ext})" if binary_ext else "kernels"
    installed = ", ".join(sorted(_installed_backends())) or "none"
    raise VendorCompilerMissing(
        f"no installed Triton compiles for target {target}{which}: the {backend_name} backend's {kernels} are "
        f"compiled by {needed}. The installed triton {triton.__version__} has compiler backends: {installed}.")


def compile_with_vendor_triton(src: Any, target: Any, options: dict, *, needed: str, backend_name: str,
                               binary_ext: str | None = None, only: str | None = None) -> Any:
    """``triton.compile`` once the vendor's Triton is known to be installed (a plugin's
    ``compile`` hook); otherwise the clear :class:`VendorCompilerMissing`."""
    require_triton_backend(target, needed, backend_name, binary_ext=binary_ext, only=only)
    import triton

    return triton.compile(src, target=target, options=options)


def arch_override(backend_name: str) -> str | None:
    """``TRITONJIT_<NAME>_ARCH``: the architecture to compile for when the vendor's
    torch (which would report the device's) is absent."""
    return os.environ.get(f"TRITONJIT_{backend_name.upper()}_ARCH") or None
