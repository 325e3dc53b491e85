"""Compile side of the MLU backend: the target description and the vendor compiler.

MLU kernels come from FlagTree built for Cambricon (its ``mlu`` compiler backend,
third_party/cambricon), which lowers through Linalg and MLISA to a ``cnbin`` fat
binary with the Neuware toolkit's ``cnas``/``cnlink`` ($NEUWARE_HOME). Upstream
Triton has no such backend; without it ``compile`` raises one clear error.
"""

from __future__ import annotations

import re
from typing import Any

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
    import triton
    from triton.backends import backends

    def supports(backend: Any) -> bool:
        try:
            return bool(backend.compiler.supports_target(target))
        except Exception:  # noqa: BLE001 (a broken third-party backend must not hide the answer)
            return False

    if any(supports(b) for b in backends.values()):
        return triton.compile(src, target=target, options=options)
    raise RuntimeError(
        f"no installed Triton compiler backend supports target {target}: the mlu backend's kernels "
        f"(.{BINARY_EXT}) are compiled by {COMPILER}. The installed triton {triton.__version__} has "
        f"compiler backends: {', '.join(sorted(backends)) or 'none'}."
    )
