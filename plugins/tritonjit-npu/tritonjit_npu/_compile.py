"""Compile side of the NPU backend: the target description and the vendor compiler.

NPU binaries come from Huawei's Triton fork, Triton-Ascend (or FlagTree built for
Ascend), whose ``npu`` compiler backend lowers through AscendNPU-IR and
``bishengir-compile`` (CANN toolkit) to a ``.npubin`` kernel ELF. Upstream Triton has
no such backend; without it ``compile`` raises one clear error instead of a traceback
from deep inside Triton.
"""

from __future__ import annotations

from typing import Any

from tritonjit.pluginkit import compile_with_vendor_triton

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


def compile_for_npu(src: Any, target: Any, options: dict) -> Any:
    """Compile with the vendor's Triton, or pluginkit's error naming what to install."""
    return compile_with_vendor_triton(src, target, options, needed=COMPILER, backend_name="npu",
                                      binary_ext=BINARY_EXT)
