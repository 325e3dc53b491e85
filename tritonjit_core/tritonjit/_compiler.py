"""The compile bridge: a variant (slots + options) -> Triton's compiler -> artifact.

Compilation is Triton's own ``triton.compile(ASTSource, target, options)``; artifacts
land in Triton's persistent cache (``TRITON_CACHE_DIR`` honoured). A backend whose
compiler is not Triton's plugs in through its ``compile`` hook. The same code serves
in-process compiles, ``f.compile(...)`` cross-compiles and the standalone compiler
process (``tritonjit compile``).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Sequence

from ._backend import Backend, CompiledVariant
from ._errors import BackendError, CompilationError, format_source_location
from ._signature import Param, Slot, render

log = logging.getLogger("tritonjit")

# warp size of Triton's own GPU target families, for targets named without a plugin
_TRITON_WARP = {"cuda": 32, "hip": 64}


@functools.lru_cache(maxsize=None)
def known_options() -> frozenset[str]:
    """Names of the compile options Triton's backends accept (num_warps, ...)."""
    names = {"num_warps", "num_stages", "num_ctas", "maxnreg", "debug", "enable_fp_fusion",
             "launch_cooperative_grid", "launch_pdl"}
    for mod, cls in (("triton.backends.nvidia.compiler", "CUDAOptions"),
                     ("triton.backends.amd.compiler", "HIPOptions")):
        try:
            module = __import__(mod, fromlist=[cls])
            names.update(getattr(module, cls).__dataclass_fields__)
        except Exception:  # a Triton build without that backend
            pass
    return frozenset(names)


def parse_target(text: str, registry_get: Any = None) -> tuple[str, Any]:
    """``"cuda:90"`` / ``"hip:gfx942"`` / ``"<plugin>:<arch>"`` -> (backend name, GPUTarget).

    Triton's own families work without any plugin installed, so CI can cross-compile
    for CUDA and AMD on a CPU machine.
    """
    name, sep, arch = text.partition(":")
    if not sep or not arch:
        raise ValueError(f"target '{text}' must look like BACKEND:ARCH, e.g. cuda:90 or hip:gfx942")
    if registry_get is not None:
        try:
            backend: Backend = registry_get(name)
        except BackendError:
            backend = None
        if backend is not None:
            return name, backend.compile_target(None, arch)
    if name in _TRITON_WARP:
        from triton.backends.compiler import GPUTarget

        return name, GPUTarget(name, int(arch) if arch.isdigit() else arch, _TRITON_WARP[name])
    raise ValueError(f"unknown target backend '{name}' in '{text}' (Triton's: cuda, hip; or an installed plugin)")


def build_source(jit_fn: Any, params: Sequence[Param], slots: Sequence[Slot]) -> Any:
    """Triton's ``ASTSource`` for one variant."""
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for p, s in zip(params, slots):
        if s.is_constant:
            signature[p.name] = "constexpr"
            constexprs[(p.index,)] = s.value
        else:
            signature[p.name] = s.type
            if s.hint == 16:
                attrs[(p.index,)] = [["tt.divisibility", 16]]
    return ASTSource(jit_fn, signature, constexprs, attrs)


def compile_variant(
    jit_fn: Any,
    params: Sequence[Param],
    slots: Sequence[Slot],
    target: Any,
    options: dict[str, Any],
    kernel: str,
    backend: Backend | None = None,
) -> CompiledVariant:
    """Compile one variant; errors carry Triton's message and the kernel's location."""
    signature = render(slots)
    src = build_source(jit_fn, params, slots)
    compile_hook = backend.compile if backend is not None and backend.compile is not None else None
    try:
        if compile_hook is not None:
            out = compile_hook(src, target, dict(options))
        else:
            import triton

            out = triton.compile(src, target=target, options=dict(options))
    except Exception as exc:
        where = format_source_location(getattr(jit_fn, "fn", jit_fn))
        cause = f"{type(exc).__name__}: {exc}\n(kernel defined at {where})"
        raise CompilationError(kernel, signature, target, RuntimeError(cause)) from exc
    if isinstance(out, CompiledVariant):
        if not out.signature:
            out.signature = signature
        return out
    return from_triton(out, signature)


def from_triton(ck: Any, signature: str) -> CompiledVariant:
    """Wrap Triton's ``CompiledKernel`` (already in Triton's cache)."""
    md = ck.metadata._asdict()
    tgt = md.get("target")
    cache_dir = None
    group = getattr(ck, "metadata_group", None) or {}
    for path in group.values():
        cache_dir = os.path.dirname(path)
        break
    return CompiledVariant(
        name=ck.name,
        signature=signature,
        target=tgt,
        binary=ck.kernel if isinstance(ck.kernel, (bytes, bytearray)) else None,
        metadata=md,
        asm=dict(ck.asm),
        hash=ck.hash,
        cache_dir=cache_dir,
        artifact=ck,
        binary_ext=next((k for k, v in ck.asm.items() if isinstance(v, (bytes, bytearray))), ""),
    )
