"""Kernel signature -> the device ABI of its parameters (pure Python, no GPU needed).

A variant's signature string (libtriton_jit's format) says which parameters reach
the device: a type token without the ``:1`` hint. Constexprs, ints equal to 1 and
None are constants compiled into the kernel and are not passed. Triton 3.3+ kernels
take trailing scratch pointers after the user's arguments (global, then profile).
"""

from __future__ import annotations

from typing import Any

from tritonjit._signature import NULLOPT, SCALAR_TYPES, _split

# type codes understood by the C packer (_driver.c, enum ty); order matters
TYPE_CODES = {
    "*": 0, "i1": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "u1": 6, "u8": 7, "u16": 8,
    "u32": 9, "u64": 10, "fp16": 11, "bf16": 12, "fp32": 13, "fp64": 14,
}
TYPE_SIZES = {"*": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u1": 1, "u8": 1, "u16": 2,
              "u32": 4, "u64": 8, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}


def runtime_params(signature: str) -> list[tuple[int, str]]:
    """(parameter index, type token) of every parameter the device receives."""
    out = []
    for i, tok in enumerate(t.strip() for t in _split(signature)):
        if tok == NULLOPT:
            continue
        ty, _, hint = tok.partition(":")
        if hint == "1":
            continue  # an int equal to 1: a constant of the variant
        base = ty[1:] if ty.startswith("*") else ty
        if ty.startswith("*k"):
            base = ty[2:]
        if base in SCALAR_TYPES and (ty.startswith("*") or ty in TYPE_CODES):
            out.append((i, ty))
    return out


def type_code(token: str) -> int:
    """The C packer's code of a type token (``*fp32`` -> pointer)."""
    if token.startswith("*"):
        return TYPE_CODES["*"]
    try:
        return TYPE_CODES[token]
    except KeyError:
        raise ValueError(f"the CUDA backend cannot pass a parameter of type '{token}'") from None


def type_codes(signature: str) -> tuple[bytes, tuple[int, ...]]:
    """(type codes as bytes, parameter index of each) of a variant's runtime params."""
    rt = runtime_params(signature)
    return bytes(type_code(t) for _, t in rt), tuple(i for i, _ in rt)


def scratch_layout(metadata: dict[str, Any]) -> tuple[int, tuple[int, int, int, int]]:
    """How many scratch pointers the kernel takes, and (size, align) of each.

    Triton 3.3 added the global scratch pointer, 3.5 the profile scratch pointer; a
    kernel compiled by a Triton that knows them takes both, even when their size is 0.
    """
    n = 0
    if "global_scratch_size" in metadata:
        n = 1
    if "profile_scratch_size" in metadata:
        n = 2
    gs = int(metadata.get("global_scratch_size", 0) or 0)
    ga = int(metadata.get("global_scratch_align", 1) or 1)
    ps = int(metadata.get("profile_scratch_size", 0) or 0)
    pa = int(metadata.get("profile_scratch_align", 1) or 1)
    return n, (gs, ga, ps, pa)
