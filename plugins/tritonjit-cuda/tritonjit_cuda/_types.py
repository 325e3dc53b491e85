"""Kernel signature -> the device ABI of its parameters (pure Python, no GPU needed).

A variant's signature string (libtriton_jit's format) says which parameters reach
the device: a type token without the ``:1`` hint. Constexprs, ints equal to 1 and
None are constants compiled into the kernel and are not passed. Triton 3.3+ kernels
take trailing scratch pointers after the user's arguments (global, then profile).

A tuple argument reaches the device as its non-constant elements, depth first
(tritonjit._flatten). A host TensorDescriptor expands as Triton's CUDA launcher
expands it (``make_tensordesc_arg`` in triton/backends/nvidia/driver.py): where the
compiler lowered it to TMA (``tensordesc_meta`` in the metadata, sm_90+) into a
128-byte CUtensorMap filled on the host at each launch, then the shape (i32) and the
strides (i64); else into the base pointer, shape and strides (i64), the padding flag
(i1), then the shape (i32) and strides (i64) again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tritonjit._flatten import flattener, runtime_plan
from tritonjit._signature import TENSORDESC, parse_tensordesc

# type codes understood by the C packer (_driver.c, enum ty); order matters
TYPE_CODES = {
    "*": 0, "i1": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "u1": 6, "u8": 7, "u16": 8,
    "u32": 9, "u64": 10, "fp16": 11, "bf16": 12, "fp32": 13, "fp64": 14, "nvTmaDesc": 15,
}
TYPE_SIZES = {"*": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u1": 1, "u8": 1, "u16": 2,
              "u32": 4, "u64": 8, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "nvTmaDesc": 128}

# The TMA element-type enum differs between the device (the compiler's metadata) and
# the host API; Triton's driver.py maps it the same way.
TMA_DTYPE_DEVICE_TO_HOST = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}


def runtime_params(signature: str) -> list[tuple[int, str]]:
    """(parameter index, type token) of every leaf the device receives (a tuple's
    elements share their parameter's index; a descriptor is one leaf, unexpanded)."""
    return [(p.index, ty) for p in runtime_plan(signature) for _, ty in p.leaves]


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


@dataclass(frozen=True)
class DeviceAbi:
    """The device arguments of one variant: their type codes, the kernel parameter of
    each, and ``expand`` (the launcher's arguments -> the device's), None where every
    argument already is one device argument (the C launcher takes them as they are).

    ``paths``: where each device argument sits inside its parameter's tuple (``()`` for
    the parameter itself), for the C launch entry, which reads tuples element by element
    (TJ_ARG_TUPLE); None where a descriptor needs the host (``expand``) on every launch."""

    codes: bytes
    param_index: tuple[int, ...]
    expand: Callable[[Sequence[Any]], list[Any]] | None
    paths: tuple[tuple[int, ...], ...] | None = None


def device_abi(signature: str, metadata: dict[str, Any], runtime: Sequence[int] | None = None,
               fill_tma: Callable[..., bytes] | None = None) -> DeviceAbi:
    """The device ABI of a variant (``runtime``: CompiledVariant.runtime_params).
    ``fill_tma(address, swizzle, elem_size, elem_type, block, shape, strides, padding)``
    makes a CUtensorMap (the driver's fill_tma_descriptor)."""
    plan = runtime_plan(signature, runtime)
    flat = flattener(plan)
    metas = list(metadata.get("tensordesc_meta") or [])
    codes: list[int] = []
    index: list[int] = []
    paths: list[tuple[int, ...]] = []
    expanders: list[Callable[[Any], list[Any]] | None] = []
    for p in plan:
        for path, ty in p.leaves:
            if ty.startswith(TENSORDESC):
                meta = metas.pop(0) if metas else None
                dcodes, expander = _descriptor_abi(ty, meta, fill_tma)
                codes += dcodes
                index += [p.index] * len(dcodes)
                expanders.append(expander)
            else:
                codes.append(type_code(ty))
                index.append(p.index)
                paths.append(path)
                expanders.append(None)
    if flat is None:
        return DeviceAbi(bytes(codes), tuple(index), None, tuple(paths))
    by_host = any(expanders)
    return DeviceAbi(bytes(codes), tuple(index), _expander(flat, expanders), None if by_host else tuple(paths))


def _expander(flat: Callable[[Sequence[Any]], list[Any]],
              expanders: list[Callable[[Any], list[Any]] | None]) -> Callable[[Sequence[Any]], list[Any]]:
    if not any(expanders):
        return flat

    def expand(args: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for v, e in zip(flat(args), expanders):
            if e is None:
                out.append(v)
            else:
                out += e(v)
        return out

    return expand


def _descriptor_abi(ty: str, meta: dict[str, Any] | None,
                    fill_tma: Callable[..., bytes] | None) -> tuple[list[int], Callable[[Any], list[Any]]]:
    """Type codes and expansion of one descriptor argument (Triton's make_tensordesc_arg)."""
    _, block = parse_tensordesc(ty)
    n = len(block)
    i1, i32, i64 = TYPE_CODES["i1"], TYPE_CODES["i32"], TYPE_CODES["i64"]
    if meta is None:
        def plain(d: Any) -> list[Any]:
            shape, strides = list(d.shape), list(d.strides)
            return [d.base, *shape, *strides, d.padding == "nan", *shape, *strides]
        return [TYPE_CODES["*"], *[i64] * (2 * n), i1, *[i32] * n, *[i64] * n], plain

    swizzle, elem_size = int(meta["swizzle"]), int(meta["elem_size"])
    elem_type = TMA_DTYPE_DEVICE_TO_HOST[int(meta["elem_type"])]
    box, fp4_padded = list(meta["block_size"]), bool(meta.get("fp4_padded", False))

    def tma(d: Any) -> list[Any]:
        if fill_tma is None:
            raise RuntimeError("no TMA descriptor filler (the CUDA driver extension is missing)")
        shape, strides = [int(x) for x in d.shape], [int(x) for x in d.strides]
        if fp4_padded:
            shape[-1] *= 2
        cmap = fill_tma(d.base.data_ptr(), swizzle, elem_size, elem_type, box, shape, strides,
                        1 if d.padding == "nan" else 0)
        return [cmap, *shape, *strides]
    return [TYPE_CODES["nvTmaDesc"], *[i32] * n, *[i64] * n], tma


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
