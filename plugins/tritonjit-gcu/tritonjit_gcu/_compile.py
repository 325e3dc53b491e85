"""Compile side of the GCU backend: the target description and the vendor compiler.

GCU kernels come from Enflame's Triton backend (triton_gcu), which lowers Triton IR
through its own MLIR pipeline and ``topscc`` (TopsPlatform, ``$CAPS_PATH``) to a
``.fatbin``. Upstream Triton has no such backend; without it ``compile`` raises one
clear error.
"""

from __future__ import annotations

import re
from typing import Any

from tritonjit.pluginkit import compile_with_vendor_triton

TARGET_BACKEND = "gcu"
BINARY_EXT = "fatbin"
COMPILER = ("Enflame's triton_gcu (Enflame's Triton backend for GCU, shipped with TopsPlatform); "
            "it compiles through topscc from $CAPS_PATH (default /opt/tops)")


def make_target(arch: str) -> Any:
    """Triton's GPUTarget for a GCU architecture name (gcu300, gcu400, gcu410)."""
    from triton.backends.compiler import GPUTarget

    if not re.fullmatch(r"gcu\d{3}", arch):
        raise ValueError(f"gcu target arch '{arch}' is not a GCU architecture; expected e.g. "
                         f"gcu:gcu300, gcu:gcu400 or gcu:gcu410")
    # warp size 1: the launch's blockDim.x is num_warps itself (libtriton_jit's GcuBackend)
    return GPUTarget(TARGET_BACKEND, arch, 1)


def compile_for_gcu(src: Any, target: Any, options: dict) -> Any:
    """Compile with triton_gcu, or pluginkit's error naming what to install."""
    return compile_with_vendor_triton(src, target, options, needed=COMPILER, backend_name="gcu",
                                      binary_ext=BINARY_EXT)
