"""Compile side of the NPU backend: the target description and the vendor compiler.

NPU binaries come from Huawei's Triton fork, Triton-Ascend (or FlagTree built for
Ascend), whose ``npu`` compiler backend lowers through AscendNPU-IR and
``bishengir-compile`` (CANN toolkit) to a ``.npubin`` kernel ELF. Upstream Triton has
no such backend; without it ``compile`` raises one clear error instead of a traceback
from deep inside Triton.
"""

from __future__ import annotations

from typing import Any

TARGET_BACKEND = "npu"
BINARY_EXT = "npubin"
COMPILER = ("Triton-Ascend (Huawei's Triton fork: pip install triton-ascend), or FlagTree built for Ascend; "
            "its 'npu' compiler backend needs the CANN toolkit's bishengir-compile")


def make_target(arch: str) -> Any:
    """Triton's GPUTarget for an Ascend SoC name (what aclrtGetSocName reports)."""
    from triton.backends.compiler import GPUTarget

    if not arch.startswith("Ascend"):
        raise ValueError(f"npu target arch '{arch}' is not an Ascend SoC name; expected the name "
                         f"aclrtGetSocName reports, e.g. npu:Ascend910B3 or npu:Ascend310P3")
    return GPUTarget(TARGET_BACKEND, arch, 0)  # Triton-Ascend's own target has warp size 0


def vendor_compiler(target: Any) -> str | None:
    """Name of an installed Triton compiler backend that supports ``target``, if any."""
    from triton.backends import backends

    for name, backend in backends.items():
        try:
            if backend.compiler.supports_target(target):
                return name
        except Exception:  # noqa: BLE001, S112 (a broken third-party backend must not hide the answer)
            continue
    return None


def compile_for_npu(src: Any, target: Any, options: dict) -> Any:
    """Compile with the vendor's Triton, or explain what is missing."""
    import triton
    from triton.backends import backends

    if vendor_compiler(target) is None:
        raise RuntimeError(
            f"no installed Triton compiler backend supports target {target}: "
            f"the npu backend's kernels (.{BINARY_EXT}) are compiled by {COMPILER}. "
            f"The installed triton {triton.__version__} has compiler backends: "
            f"{', '.join(sorted(backends)) or 'none'}."
        )
    return triton.compile(src, target=target, options=options)
