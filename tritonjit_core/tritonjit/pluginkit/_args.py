"""Argument layout and packing by Triton type: the device ABI of CUDA-like drivers.

A compiled variant's runtime parameters (its signature string without the
constants) plus the trailing scratch pointers Triton appends are laid out in one
little-endian buffer, each at its natural alignment, exactly as a kernel's
argument segment is (the AMD compiler's ``.args`` metadata gives the same offsets).
``kernel_params`` is the ``void**`` array of pointers into that buffer that
``cuLaunchKernel``-style calls take.

Vendors whose launchers pass some types differently say so once: ``abi_types`` maps
a Triton type to the one it travels as (Enflame and Cambricon widen ``i1`` to a
4-byte int; Cambricon passes fp16/bf16 scalars as fp32), and ``bf16`` chooses how an
fp32 value becomes bf16 bits (round to nearest even, as torch does, or truncate, as
Enflame's triton_gcu launcher does).

A tuple argument is laid out as its non-constant elements, depth first, as Triton's
launchers pass it (``tritonjit._flatten``); tensor descriptors have no layout here
(their expansion is a backend's own ABI) and are refused with a clear error.
"""

from __future__ import annotations

import ctypes
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import ArgumentError
from .._flatten import flattener, runtime_plan
from .._signature import TENSORDESC

# Triton scalar type -> (struct code, size); alignment is the size (natural).
SCALAR_CODES: dict[str, tuple[str, int]] = {
    "i1": ("b", 1), "i8": ("b", 1), "i16": ("h", 2), "i32": ("i", 4), "i64": ("q", 8),
    "u1": ("B", 1), "u8": ("B", 1), "u16": ("H", 2), "u32": ("I", 4), "u64": ("Q", 8),
    "fp16": ("e", 2), "bf16": ("H", 2), "fp32": ("f", 4), "fp64": ("d", 8),
}
POINTER_SIZE = 8
Bf16Rounding = Literal["nearest_even", "truncate"]


@dataclass(frozen=True)
class ArgSlot:
    """One kernel parameter in the argument buffer."""

    name: str  # parameter name, or "global_scratch"/"profile_scratch", or "arg<i>"
    type: str  # Triton type: "*fp32", "i32", "fp16", ...
    offset: int
    size: int
    code: str  # struct code


def runtime_types(signature: str, runtime_params: Sequence[int] | None = None) -> list[str]:
    """Runtime parameter types of a libtriton_jit signature string, in order.

    Constants (constexpr values, ``i32:1``, ``nullopt``) are not kernel parameters;
    a token is a runtime type exactly when it is a Triton type with an optional
    ``:16`` hint (string constexprs are quoted, so they never look like types). A tuple
    contributes its non-constant elements, depth first; ``runtime_params`` (a
    CompiledVariant's) says which parameters are runtime ones where the string alone
    cannot.
    """
    out = []
    for p in runtime_plan(signature, runtime_params):
        for _, ty in p.leaves:
            out.append("*" + ty[2:] if ty.startswith("*k") else ty)
    return out


def scratch_params(metadata: dict[str, Any]) -> list[str]:
    """Trailing pointer parameters Triton's code generator appended to the kernel.

    Read from the metadata the compiler wrote: a Triton that reports a profile
    scratch also passes a global scratch pointer before it (3.5 and newer, both
    NVIDIA and AMD); one that reports only a global scratch passes just that.
    Vendor forks on older Triton report neither and take none.
    """
    if "profile_scratch_size" in metadata:
        return ["global_scratch", "profile_scratch"]
    if "global_scratch_size" in metadata:
        return ["global_scratch"]
    return []


def param_names(kernel: Any) -> list[str] | None:
    """Names of the runtime parameters when the compiler's own source object is at hand."""
    src = getattr(getattr(kernel, "artifact", None), "src", None)
    sig = getattr(src, "signature", None)
    if not isinstance(sig, dict):
        return None
    return [name for name, ty in sig.items() if ty != "constexpr"]


class ArgLayout:
    """The packed layout of one variant's parameters, computed once in ``prepare``.

    ``types`` are the Triton types of the runtime parameters; ``abi_types`` remaps
    some of them to the type the vendor's launcher passes them as (size and encoding).
    """

    def __init__(self, kernel: str, types: Sequence[str], names: Sequence[str] | None = None,
                 trailing: Sequence[str] = (), *, abi_types: Mapping[str, str] | None = None,
                 bf16: Bf16Rounding = "nearest_even",
                 flatten: Callable[[Sequence[Any]], list[Any]] | None = None) -> None:
        self.kernel = kernel
        self._flatten = flatten  # tuple arguments -> their leaves (None: none)
        if abi_types:
            types = [abi_types.get(t, t) for t in types]
        if names is None or len(names) != len(types):
            names = [f"arg{i}" for i in range(len(types))]
        slots: list[ArgSlot] = []
        offset = 0
        for name, ty in [*zip(names, types), *((t, "*i8") for t in trailing)]:
            if ty.startswith("*"):
                code, size = "Q", POINTER_SIZE
            elif ty.startswith(TENSORDESC):
                raise ArgumentError(kernel, f"takes a tensor descriptor ({ty}), which this backend cannot pass yet; "
                                    "pass the tensor and its shape and strides instead", name)
            else:
                try:
                    code, size = SCALAR_CODES[ty]
                except KeyError:
                    raise ArgumentError(kernel, f"type '{ty}' has no device ABI here", name) from None
            offset = _align(offset, size)
            slots.append(ArgSlot(name, ty, offset, size, code))
            offset += size
        self.slots: tuple[ArgSlot, ...] = tuple(slots)
        self.num_user = len(types)
        max_align = max((s.size for s in slots), default=1)
        self.size = _align(offset, max_align)
        fmt, pos = "<", 0
        for s in slots:
            if s.offset > pos:
                fmt += f"{s.offset - pos}x"
            fmt += s.code
            pos = s.offset + s.size
        if self.size > pos:
            fmt += f"{self.size - pos}x"
        self.struct = struct.Struct(fmt)
        if bf16 not in ("nearest_even", "truncate"):
            raise ValueError(f"bf16 rounding must be 'nearest_even' or 'truncate', got {bf16!r}")
        self._convert: list[Callable[[Any], Any]] = [_converter(s.type, bf16) for s in slots[: self.num_user]]
        self._trailing_zeros = (0,) * (len(slots) - self.num_user)

    @classmethod
    def for_variant(cls, kernel: Any, *, abi_types: Mapping[str, str] | None = None,
                    bf16: Bf16Rounding = "nearest_even") -> ArgLayout:
        """Layout of a :class:`tritonjit.CompiledVariant` (signature + metadata)."""
        runtime = getattr(kernel, "runtime_params", None)
        types = runtime_types(kernel.signature, runtime)
        flatten = flattener(runtime_plan(kernel.signature, runtime))
        names = param_names(kernel) if flatten is None else None
        return cls(kernel.name, types, names, scratch_params(kernel.metadata), abi_types=abi_types,
                   bf16=bf16, flatten=flatten)

    @property
    def sizes(self) -> list[int]:
        return [s.size for s in self.slots]

    @property
    def offsets(self) -> list[int]:
        return [s.offset for s in self.slots]

    def values(self, args: Sequence[Any], scratch: Sequence[int] | None = None) -> tuple:
        """Python arguments -> the numbers that go into the buffer."""
        if self._flatten is not None:
            args = self._flatten(args)
        if len(args) != self.num_user:
            raise ArgumentError(self.kernel, f"expected {self.num_user} runtime arguments "
                                f"({', '.join(s.name for s in self.slots[: self.num_user])}), got {len(args)}")
        try:
            vals = tuple(c(a) for c, a in zip(self._convert, args))
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            for s, c, a in zip(self.slots, self._convert, args):
                try:
                    c(a)
                except Exception:  # noqa: BLE001 - find which argument failed
                    raise ArgumentError(self.kernel, f"cannot pass {type(a).__name__} {a!r} as {s.type}: {exc}",
                                        s.name) from None
            raise
        return vals + (tuple(scratch) if scratch is not None else self._trailing_zeros)

    def pack_into(self, buffer: Any, args: Sequence[Any], scratch: Sequence[int] | None = None) -> None:
        vals = self.values(args, scratch)
        try:
            self.struct.pack_into(buffer, 0, *vals)
        except (struct.error, OverflowError) as exc:
            for s, v in zip(self.slots, vals):
                try:
                    struct.pack("<" + s.code, v)
                except (struct.error, OverflowError):
                    raise ArgumentError(self.kernel, f"value {v!r} does not fit {s.type}", s.name) from None
            raise ArgumentError(self.kernel, str(exc)) from None

    def pack(self, args: Sequence[Any], scratch: Sequence[int] | None = None) -> bytes:
        """The argument buffer as bytes (what the device would read)."""
        buf = bytearray(self.size)
        self.pack_into(buf, args, scratch)
        return bytes(buf)

    def describe(self) -> str:
        return ", ".join(f"{s.name}:{s.type}@{s.offset}" for s in self.slots)


class PackedArgs:
    """An argument buffer plus its ``void**`` kernel-params array (owns both)."""

    __slots__ = ("buffer", "params", "size")

    def __init__(self, layout: ArgLayout) -> None:
        self.size = layout.size
        self.buffer = ctypes.create_string_buffer(max(layout.size, 1))
        base = ctypes.addressof(self.buffer)
        n = len(layout.slots)
        self.params = (ctypes.c_void_p * max(n, 1))(*[base + s.offset for s in layout.slots])

    @property
    def params_ptr(self) -> int:
        return ctypes.addressof(self.params)

    def bytes(self) -> bytes:
        return self.buffer.raw[: self.size]


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


def _pointer_value(a: Any) -> int:
    if a is None:
        return 0
    data_ptr = getattr(a, "data_ptr", None)
    if data_ptr is not None:
        return data_ptr()
    if isinstance(a, int):
        return a
    raise TypeError("expected a tensor (an object with data_ptr()) or an int address")


def _bf16_bits(x: Any) -> int:
    f = float(x)
    if math.isnan(f):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest even


def _bf16_bits_truncated(x: Any) -> int:
    f = float(x)
    if math.isnan(f):
        return 0x7FC0
    return struct.unpack("<I", struct.pack("<f", f))[0] >> 16  # the fp32's high half


def _converter(ty: str, bf16: Bf16Rounding = "nearest_even") -> Callable[[Any], Any]:
    if ty.startswith("*"):
        return _pointer_value
    if ty == "bf16":
        return _bf16_bits_truncated if bf16 == "truncate" else _bf16_bits
    if ty.startswith("fp"):
        return float
    return int
