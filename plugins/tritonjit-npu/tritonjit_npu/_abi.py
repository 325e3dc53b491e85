"""The NPU kernel argument buffer, byte for byte as libtriton_jit's ``NpuArgBuffer``.

One contiguous little-endian block handed to ``rtKernelLaunch``::

    [0, 8)    ffts_addr        system argument (rtGetC2cCtrlAddr)
    [8, 16)   syncBlockLock    system argument
    [16, 24)  workspace_addr   system argument
    [24, ...) user arguments   each at its natural alignment, in parameter order
    [..., +12) gridX, gridY, gridZ  int32 each, 4-aligned

The buffer's size is the end of gridZ (no tail padding). The user argument types follow
libtriton_jit's ``parse_signature`` (npu_arg_buffer.h) exactly: pointers 8 bytes,
``i32``/``u32`` 4, ``i64``/``u64`` 8, ``fp32`` 4, ``fp16``/``bf16`` widened to a 4-byte
float, ``fp64`` 8, and any other type (``i1``, ``u1``, ``i8``, ``i16``, ...) falls to
its default, an 8-byte integer. Constants (constexprs, ``nullopt``, ``i32:1``) take
no bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum

SYSTEM_ARGS_SIZE = 24  # three void*


class NpuArgType(IntEnum):
    """npu_types.h ``NpuArgType``."""

    POINTER = 0
    I32 = 1
    I64 = 2
    F32 = 3
    F64 = 4


SIZE = {NpuArgType.POINTER: 8, NpuArgType.I32: 4, NpuArgType.I64: 8, NpuArgType.F32: 4, NpuArgType.F64: 8}

# scalar type token -> (ABI type, struct code); unsigned ones keep their bytes
_SCALARS = {
    "i32": (NpuArgType.I32, "i"), "u32": (NpuArgType.I32, "I"),
    "i64": (NpuArgType.I64, "q"), "u64": (NpuArgType.I64, "Q"),
    "fp32": (NpuArgType.F32, "f"), "fp16": (NpuArgType.F32, "f"), "bf16": (NpuArgType.F32, "f"),
    "fp64": (NpuArgType.F64, "d"),
}
_DEFAULT = (NpuArgType.I64, "q")  # libtriton_jit: "Unknown type ..., defaulting to i64"
_SCALAR_NAMES = frozenset(
    "i1 i8 i16 i32 i64 u1 u8 u16 u32 u64 fp16 bf16 fp32 fp64 fp8e4nv fp8e5 fp8e4b8 fp8e5b16 fp8e4b15".split()
)


def split_signature(signature: str) -> list[str]:
    """Split a signature string on the commas outside quoted string constants."""
    out, cur, quote = [], [], ""
    for ch in signature:
        if quote:
            cur.append(ch)
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == ",":
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def runtime_types(signature: str) -> list[str]:
    """Types of the runtime (non-constant) parameters of a variant's signature string:
    ``"*fp32:16,i32,1024,nullopt"`` -> ``["*fp32", "i32"]``."""
    out = []
    for token in split_signature(signature):
        ty, _, hint = token.partition(":")
        if hint == "1":
            continue  # an int equal to 1 is compiled in as a constant
        if ty.startswith("*") or ty in _SCALAR_NAMES:
            out.append(ty)
    return out


def abi_of(ty: str) -> tuple[NpuArgType, str]:
    """ABI type and struct code of one runtime parameter type."""
    if ty.startswith("*"):
        return NpuArgType.POINTER, "Q"
    return _SCALARS.get(ty, _DEFAULT)


def layout_from_metadata(arg_layout: Sequence[dict]) -> list[tuple[NpuArgType, str]]:
    """Read libtriton_jit's ``arg_layout`` metadata (kernel_metadata.cpp rules)."""
    names = {"ptr": "*", "pointer": "*", "i64": "i64", "u64": "u64", "i32": "i32", "u32": "u32",
             "fp64": "fp64", "f64": "fp64", "fp32": "fp32", "f32": "fp32"}
    out = []
    for entry in arg_layout:
        kind = entry.get("type")
        if kind is None or kind == "constexpr":
            continue
        ty = names.get(kind)
        out.append(abi_of(ty) if ty is not None else _DEFAULT)
    return out


class ArgBufferLayout:
    """The byte layout of one kernel's argument buffer, computed once per variant.

    ``pack(ffts, lock, workspace, values, gx, gy, gz)`` is one ``struct.pack``.
    """

    def __init__(self, abi: Sequence[tuple[NpuArgType, str]]) -> None:
        self.types = [t for t, _ in abi]
        fmt = ["<QQQ"]
        offsets = []
        cursor = SYSTEM_ARGS_SIZE
        for t, code in abi:
            size = SIZE[t]
            aligned = (cursor + size - 1) & ~(size - 1)
            if aligned > cursor:
                fmt.append(f"{aligned - cursor}x")
            offsets.append(aligned)
            fmt.append(code)
            cursor = aligned + size
        aligned = (cursor + 3) & ~3
        if aligned > cursor:
            fmt.append(f"{aligned - cursor}x")
        self.grid_offset = aligned
        fmt.append("iii")
        self.offsets = offsets
        self.struct = struct.Struct("".join(fmt))
        self.size = self.struct.size
        assert self.size == aligned + 12

    def pack(self, ffts: int, lock: int, workspace: int, values: Sequence[object],
             gx: int, gy: int, gz: int) -> bytes:
        return self.struct.pack(ffts, lock, workspace, *values, gx, gy, gz)
