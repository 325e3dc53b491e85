"""Triton's own specialization, as the reference the engine is compared with.

Tolerant of Triton versions: it uses the binder Triton builds for its launcher
(``create_function_from_signature``, which calls ``native_specialize_impl``) and maps
its ``(type, attr)`` pairs to signature tokens; compile references rebuild the
``ASTSource`` with Triton's own ``JITFunction._pack_args`` where it exists.
"""

from __future__ import annotations

import inspect
from typing import Any

import triton
from triton.backends.compiler import GPUTarget

TRITON_VERSION = tuple(int(x) for x in triton.__version__.split(".")[:2])


class Unsupported(Exception):
    """Triton refused the arguments (the engine must refuse them too)."""


def make_backend(target: GPUTarget | None = None) -> Any:
    return triton.compiler.make_backend(target or GPUTarget("cuda", 90, 32))


def binder(jit_fn: Any, backend: Any) -> Any:
    from triton.runtime.jit import create_function_from_signature

    params = inspect.signature(create_function_from_signature).parameters
    if len(params) == 3:
        return create_function_from_signature(jit_fn.signature, jit_fn.params, backend)
    # a later Triton that added (keyword) arguments: pass what we know by name
    known = {"sig": jit_fn.signature, "kparams": jit_fn.params, "backend": backend}
    return create_function_from_signature(**{k: known[k] for k in params if k in known})


def specialize(jit_fn: Any, backend: Any, args: tuple, kwargs: dict) -> tuple[dict, list, dict]:
    """Triton's (bound args, specialization, options); Unsupported when it refuses."""
    try:
        bound, spec, options = binder(jit_fn, backend)(*args, **kwargs)
    except (TypeError, KeyError, ValueError, OverflowError) as exc:
        raise Unsupported(f"{type(exc).__name__}: {exc}") from exc
    if TRITON_VERSION < (3, 6):
        _refused_at_launch(jit_fn, dict(bound))
    return dict(bound), list(spec), dict(options)


def _refused_at_launch(jit_fn: Any, bound: dict) -> None:
    """Triton 3.5's binder types an int outside [-2**63, 2**64) as i64 and only its
    launcher refuses it (an OverflowError at the launch); 3.6 refuses it in the binder,
    as tritonjit does. Report the 3.6 behaviour, so both versions are held to one rule."""
    def out_of_range(value: Any) -> bool:
        if isinstance(value, tuple):
            return any(out_of_range(v) for v in value)
        return type(value) is int and not -(2**63) <= value < 2**64

    for kp in jit_fn.params:
        if not kp.is_constexpr and out_of_range(bound.get(kp.name)):
            raise Unsupported(f"OverflowError: parameter {kp.name}: an int out of range (refused at launch)")


def tokens(jit_fn: Any, spec: list) -> list[tuple[str, Any]]:
    """One entry per parameter: ("const", value) for a constant, ("type", token) else.

    attr 'D' -> hint 16; ('constexpr', 1) of a non-constexpr parameter -> "i32:1";
    ('constexpr', None) -> "nullopt"; any other attr (None, '', 1 of an annotated int)
    -> no hint. A tuple's (types, attrs) -> its element tokens in parentheses.
    """
    out: list[tuple[str, Any]] = []
    for kp, (ty, attr) in zip(jit_fn.params, spec, strict=False):
        if kp.is_constexpr:
            out.append(("const", attr))
        else:
            out.append(("type", runtime_token(kp.name, ty, attr)))
    return out


def runtime_token(name: str, ty: Any, attr: Any) -> str:
    """The signature token of one runtime (type, attr) pair of Triton's binder."""
    if isinstance(ty, tuple):
        return "(" + ",".join(runtime_token(name, t, a) for t, a in zip(ty, attr, strict=True)) + ")"
    if ty == "constexpr":
        if attr is None:
            return "nullopt"
        if attr == 1 and type(attr) is int:
            return "i32:1"
        raise AssertionError(f"unknown constant specialization {attr!r} of {name}")  # pragma: no cover
    hint = ":16" if isinstance(attr, str) and "D" in attr else ""
    return f"{ty}{hint}"


def pack_like_triton(jit_fn: Any, args: tuple, kwargs: dict, target: GPUTarget | None = None) -> tuple:
    """Triton's (signature, constexprs, attrs) of the ASTSource its launcher would build."""
    backend = make_backend(target)
    bound, spec, opts = specialize(jit_fn, backend, args, kwargs)
    _, signature, constexprs, attrs = type(jit_fn)._pack_args(jit_fn, backend, opts, bound, spec, opts)
    return signature, constexprs, attrs


def compile_like_triton(jit_fn: Any, args: tuple, kwargs: dict, target: GPUTarget, **options: Any) -> Any:
    """What ``jit_fn[grid](*args, **kwargs, **options)`` would compile on ``target``."""
    from triton.compiler import ASTSource

    backend = make_backend(target)
    kw = dict(kwargs, **options)
    bound, spec, opts = specialize(jit_fn, backend, args, kw)
    pack = getattr(type(jit_fn), "_pack_args", None)
    if pack is not None:
        parsed, signature, constexprs, attrs = pack(jit_fn, backend, opts, bound, spec, opts)
    else:  # pragma: no cover - a Triton without _pack_args: the same steps by hand
        names = [p.name for p in jit_fn.params]
        signature = {n: s[0] for n, s in zip(names, spec, strict=False)}
        pairs = enumerate(zip(bound.values(), spec, strict=False))
        constexprs = {(i,): v for i, (v, s) in pairs if s[0] == "constexpr"}
        attrs = {(i,): backend.parse_attr(s[1]) for i, s in enumerate(spec)
                 if isinstance(s[1], str) or (TRITON_VERSION >= (3, 7) and s[0] == "constexpr")}
        parsed = backend.parse_options(opts)
    src = ASTSource(jit_fn, signature, constexprs, attrs)
    return triton.compile(src, target=target, options=parsed.__dict__)
