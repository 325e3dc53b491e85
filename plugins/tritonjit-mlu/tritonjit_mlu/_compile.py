"""Compile side of the MLU backend: the target description and the vendor compiler.

MLU kernels come from FlagTree built for Cambricon (its ``mlu`` compiler backend,
third_party/cambricon), which lowers through Linalg and MLISA to a ``cnbin`` fat
binary with the Neuware toolkit's ``cnas``/``cnlink`` ($NEUWARE_HOME). Upstream
Triton has no such backend; without it ``compile`` raises one clear error.
"""

from __future__ import annotations

import re
from typing import Any

from tritonjit.pluginkit import compile_with_vendor_triton

TARGET_BACKEND = "mlu"
BINARY_EXT = "cnbin"
COMPILER = ("FlagTree built for Cambricon (its 'mlu' compiler backend); it needs the Neuware toolkit's "
            "cnas and cnlink under $NEUWARE_HOME (default /usr/local/neuware)")


def make_target(arch: str) -> Any:
    """GPUTarget("mlu", <ISA version>, 0), as FlagTree's driver builds it."""
    from triton.backends.compiler import GPUTarget

    m = re.fullmatch(r"(?:mtp_)?(\d{3})", arch)
    if m is None:
        raise ValueError(f"mlu target arch '{arch}' is not an MLU ISA version; expected e.g. mlu:592 or mlu:mtp_592")
    return GPUTarget(TARGET_BACKEND, int(m.group(1)), 0)


def compile_for_mlu(src: Any, target: Any, options: dict) -> Any:
    """Compile with FlagTree's mlu backend, or pluginkit's error naming what to install."""
    return compile_with_vendor_triton(src, target, options, needed=COMPILER, backend_name="mlu",
                                      binary_ext=BINARY_EXT)
