"""The compile bridge: a variant (slots + options) -> Triton's compiler -> artifact.

Compilation is Triton's own ``triton.compile(ASTSource, target, options)``; artifacts
land in Triton's persistent cache (``TRITON_CACHE_DIR`` honoured). A backend whose
compiler is not Triton's plugs in through its ``compile`` hook. The same code serves
in-process compiles, ``f.compile(...)`` cross-compiles and the standalone compiler
process (``tritonjit compile``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Any, Sequence

from . import _disk_cache, _lang_lock
from ._backend import Backend, CompiledVariant
from ._errors import BackendError, CompilationError, FrozenError, format_source_location
from ._signature import Param, Slot, leaves, render
from ._specialize import param_rule

log = logging.getLogger(__name__)

# warp size of Triton's own GPU target families, for targets named without a plugin
_TRITON_WARP = {"cuda": 32, "hip": 64}


@functools.cache
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
        backend: Backend | None
        try:
            backend = registry_get(name)
        except BackendError:
            backend = None
        if backend is not None:
            return name, backend.compile_target(None, arch)
    if name in _TRITON_WARP:
        from triton.backends.compiler import GPUTarget

        return name, GPUTarget(name, int(arch) if arch.isdigit() else arch, _TRITON_WARP[name])
    raise ValueError(f"unknown target backend '{name}' in '{text}' (Triton's: cuda, hip; or an installed plugin)")


@functools.cache
def _constant_attrs() -> tuple[bool, bool]:
    """Does this Triton give constant slots an empty attribute list: (a constexpr
    parameter, a constant element of a tuple)?

    Triton >= 3.7 does for constexprs (``attrs[(i,)] = []``), 3.6 does not; the
    attributes enter ``ASTSource.hash``, so matching them keeps our artifacts the ones
    Triton's own launcher builds and finds in the cache. Probed on Triton's own code.
    """
    from types import SimpleNamespace

    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import JITFunction

    try:
        probe = SimpleNamespace(params=[SimpleNamespace(name="a"), SimpleNamespace(name="b")])
        shim = SimpleNamespace(parse_options=lambda kw: SimpleNamespace(), parse_attr=BaseBackend.parse_attr)
        spec = [("constexpr", 3), (("constexpr", "fp32"), (1, None))]
        attrs = JITFunction._pack_args(probe, shim, {}, {"a": 3, "b": (1, 2.0)}, spec, {})[3]
        return (0,) in attrs, (1, 0) in attrs
    except Exception:  # a Triton whose _pack_args changed shape: decide by version
        import triton

        major, minor = (int(x) for x in triton.__version__.split(".")[:2])
        return (major, minor) >= (3, 7), False


def _triton_attr_is_empty_string(p: Param, s: Slot) -> bool:
    """Triton's specializer returns '' (-> an empty attribute list) for an int or pointer
    argument that was specialized but got no hint; None for floats, bools and
    unspecialized arguments (which get no attribute entry). The parameter's ParamRule
    says which it is."""
    rule = param_rule(p)
    if not rule.specialize or rule.fixed or s.type is None:
        return False
    return s.type.startswith("*") or (s.type[0] in "iu" and s.type != "u1")


def build_source(jit_fn: Any, params: Sequence[Param], slots: Sequence[Slot]) -> Any:
    """Triton's ``ASTSource`` for one variant, with the attributes Triton itself would
    give it (so ``src.hash()`` and the cache entry are Triton's own)."""
    from triton.compiler import ASTSource

    signature: dict[str, Any] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    constant_attrs, element_attrs = _constant_attrs()
    for p, s in zip(params, slots):
        if s.items is not None:
            signature[p.name] = _tuple_signature(s)
            _tuple_constants_and_attrs(s, (p.index,), constexprs, attrs, element_attrs)
        elif s.is_constant:
            signature[p.name] = "constexpr"
            constexprs[(p.index,)] = s.value
            if constant_attrs:
                attrs[(p.index,)] = []
            elif isinstance(s.value, str):  # Triton <= 3.6 parses a str constexpr as an attribute
                attrs[(p.index,)] = [["tt.divisibility", 16]] if "D" in s.value else []
        else:
            signature[p.name] = s.type
            if s.hint == 16:
                attrs[(p.index,)] = [["tt.divisibility", 16]]
            elif _triton_attr_is_empty_string(p, s):
                attrs[(p.index,)] = []
    return _lang_lock.reading_source(ASTSource(jit_fn, signature, constexprs, attrs))


def _tuple_signature(s: Slot) -> Any:
    """A tuple's signature type as Triton's binder makes it: element types, "constexpr"
    for constants, nested; a namedtuple keeps its class (its fields reach the compiler)."""
    types = [_tuple_signature(i) if i.items is not None else "constexpr" if i.is_constant else i.type
             for i in s.items or ()]
    return s.cls(*types) if s.cls is not None else tuple(types)


def _tuple_constants_and_attrs(s: Slot, path: tuple[int, ...], constexprs: dict, attrs: dict,
                               element_attrs: bool) -> None:
    """A tuple's constants and attributes by path, depth first (Triton's order). Every
    element is specialized, so each int and pointer has an attribute ('' -> [])."""
    for sub, leaf in leaves(s, path):
        if leaf.is_constant:
            constexprs[sub] = leaf.value
            if element_attrs:
                attrs[sub] = []
        elif leaf.hint == 16:
            attrs[sub] = [["tt.divisibility", 16]]
        elif leaf.type is not None and (leaf.type.startswith("*") or (leaf.type[0] in "iu" and leaf.type != "u1")):
            attrs[sub] = []


def compile_variant(
    jit_fn: Any,
    params: Sequence[Param],
    slots: Sequence[Slot],
    target: Any,
    options: dict[str, Any],
    kernel: str,
    backend: Backend | None = None,
    frozen: bool = False,
) -> CompiledVariant:
    """Compile one variant; errors carry Triton's message and the kernel's location.

    ``frozen``: load it from tritonjit's index or raise FrozenError, never compile."""
    out = _compile_variant(jit_fn, params, slots, target, options, kernel, backend, frozen)
    out.runtime_params = tuple(p.index for p, s in zip(params, slots) if not s.is_constant)
    return out


def _compile_variant(jit_fn: Any, params: Sequence[Param], slots: Sequence[Slot], target: Any,
                     options: dict[str, Any], kernel: str, backend: Backend | None, frozen: bool) -> CompiledVariant:
    signature = render(slots)
    src = build_source(jit_fn, params, slots)
    # the tritonjit index: a hit loads the artifact without triton.compile (no triton_key)
    key = None
    if backend is None or backend.info.binary_ext:
        backend_name = backend.name if backend is not None else str(getattr(target, "backend", target))
        key = _disk_cache.indexed(src, backend_name, target, options, signature)
    if key is None:
        if frozen:
            raise FrozenError(kernel, signature, target)
        return _compile(jit_fn, src, target, options, kernel, signature, backend)
    hit = _disk_cache.index.load(key, kernel)
    if hit is not None:
        hit.cache_source = "local"
        return hit
    from . import _remote_cache

    remote = _remote_cache.active()  # asked only on a local miss; a remote hit fills the local cache
    if remote is not None and remote.fetch(key, kernel):
        hit = _disk_cache.index.load(key, kernel)
        if hit is not None:
            hit.cache_source = "remote"
            return hit
    if frozen:
        raise FrozenError(kernel, signature, target)
    with _disk_cache.index.compiling(key, kernel) as writable:  # one compile per variant across processes
        hit = _disk_cache.index.load(key, kernel) if writable else None
        if hit is not None:
            hit.cache_source = "local"
            return hit
        if remote is None or not writable:
            return _compile_and_index(jit_fn, src, target, options, kernel, signature, backend, key, backend_name,
                                      writable, None)
        with remote.acquire(key, lambda: remote.fetch(key, kernel, count_miss=False)) as lease:  # one per fleet
            if lease.fetched:
                hit = _disk_cache.index.load(key, kernel)
                if hit is not None:
                    hit.cache_source = "remote"
                    return hit
            return _compile_and_index(jit_fn, src, target, options, kernel, signature, backend, key, backend_name,
                                      writable, remote)


def _compile_and_index(jit_fn: Any, src: Any, target: Any, options: dict[str, Any], kernel: str, signature: str,
                       backend: Backend | None, key: str, backend_name: str, writable: bool,
                       remote: Any) -> CompiledVariant:
    """Compile, record the variant in the local index and, with a remote cache, publish it."""
    out = _compile(jit_fn, src, target, options, kernel, signature, backend)
    if remote is not None:
        remote.compiled()
    if writable:
        try:
            entry = _disk_cache.index.store(key, out, backend_name, target, options)
        except OSError as exc:  # a read-only or full disk costs the next warm start, nothing else
            _disk_cache.index.report_unwritable(kernel, exc)
            entry = None
        if entry is not None and remote is not None:
            remote.publish(key, entry)
    return out


def _compile(jit_fn: Any, src: Any, target: Any, options: dict[str, Any], kernel: str, signature: str,
             backend: Backend | None) -> CompiledVariant:
    compile_hook = backend.compile if backend is not None and backend.compile is not None else None
    try:
        if compile_hook is not None:
            with _lang_lock.language.reading():  # a plugin's compiler may read triton.language anywhere
                out = compile_hook(src, target, dict(options))
        else:
            out = _triton_compile(src, target, options, kernel, signature)
    except Exception as exc:
        where = format_source_location(getattr(jit_fn, "fn", jit_fn))
        line = _error_line(jit_fn, exc)
        at = f"error at {line}, " if line else ""
        cause = f"{type(exc).__name__}: {exc}\n({at}kernel defined at {where})"
        raise CompilationError(kernel, signature, target, RuntimeError(cause)) from exc
    if isinstance(out, CompiledVariant):
        if not out.signature:
            out.signature = signature
        return out
    return from_triton(out, signature)


def _triton_compile(src: Any, target: Any, options: dict[str, Any], kernel: str, signature: str) -> Any:
    """``triton.compile``; once more past Triton's cache when its cached artifact lost a file.

    Triton finds an artifact by its group file and, when a file the group names was
    deleted (the ``.cubin``), fails with ``KeyError: 'cubin'`` at every compile of
    that variant. Compiling with ``always_compile`` rewrites the artifact in place."""
    import triton

    try:
        return triton.compile(src, target=target, options=dict(options))
    except KeyError as exc:
        first = exc
    try:
        with _always_compile():
            out = triton.compile(src, target=target, options=dict(options))
    except Exception:
        raise first from None
    warnings.warn(f"tritonjit: Triton's cached artifact of kernel '{kernel}' (variant '{signature}') lacks a file "
                  f"(KeyError: {first}); it was recompiled and rewritten", _disk_cache.CacheCorruptionWarning,
                  stacklevel=5)
    return out


@contextlib.contextmanager
def _always_compile() -> Iterator[None]:
    """Triton's ``always_compile`` knob on, then back to what it was. Written to the
    knob's own storage: setting the attribute also exports ``TRITON_ALWAYS_COMPILE``,
    which would outlive the knob and reach compiler subprocesses."""
    from triton import knobs

    store = vars(knobs.compilation)
    saved = store.get("always_compile", _UNSET)
    store["always_compile"] = True
    try:
        yield
    finally:
        if saved is _UNSET:
            store.pop("always_compile", None)
        else:
            store["always_compile"] = saved


_UNSET = object()


def _error_line(jit_fn: Any, exc: BaseException) -> str | None:
    """``file:line`` of a Triton CompilationError inside the kernel itself (Triton
    reports lines relative to the ``def``; a callee's errors keep Triton's text)."""
    node, src = getattr(exc, "node", None), getattr(exc, "src", None)
    lineno = getattr(node, "lineno", None)
    raw, first = getattr(jit_fn, "raw_src", None), getattr(jit_fn, "starting_line_number", None)
    if lineno is None or src is None or raw is None or first is None or src != getattr(jit_fn, "src", None):
        return None
    def_offset = next((i for i, text in enumerate(raw) if text.lstrip().startswith("def ")), 0)
    return f"{jit_fn.fn.__code__.co_filename}:{first + def_offset + lineno - 1}"


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
        binary=bytes(ck.kernel) if isinstance(ck.kernel, (bytes, bytearray)) else None,
        metadata=md,
        asm=dict(ck.asm),
        hash=ck.hash,
        cache_dir=cache_dir,
        artifact=ck,
        binary_ext=next((k for k, v in ck.asm.items() if isinstance(v, (bytes, bytearray))), ""),
    )
