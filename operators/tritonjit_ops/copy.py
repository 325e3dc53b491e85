"""Copies, casts, fills and shape ops that launch kernels: ``_to_copy``, ``copy_``, ``clone``,
``cat``, ``stack``, ``fill_``, ``zero_``, ``zeros_like``/``ones_like``/``full_like``,
``repeat``, ``triu``/``tril``, ``constant_pad_nd``.

The copies are elementwise.py's strided kernel with op "copy" (any source and
destination strides, broadcasting, dtype casts); ``cat``'s Python implementation is one
such copy per input into its slice of the output, its planner (the C++ path) one launch
of a cat kernel that reads up to four inputs, each with its own strides. Outputs keep
aten's layout: ``_to_copy``/``clone``/``*_like`` allocate with ``torch.empty_like``
(``preserve_format``: the input's strides where it is dense). What they do not take
(another device, complex dtypes, a sparse layout) raises NotImplementedError, which
under ``enable()`` hands the call to aten's own kernel.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from ._common import backend_device_type, cdiv, is_cuda_like, jit, next_pow2, row_tile, unravel4
from ._fallback import final, with_aten_fallback
from ._layout import contiguous_strides, memory_order
from ._plan import Arg, Buffer, In, InItem, Out, Plan, aten_plan, execute, launch, list_limit, scalar_fits, value_keyed
from ._plan import run as _run_plan
from .elementwise import _BLOCK, _CT, _INT32_MAX, _REAL, _is_scalar, _launch, _operands, _refuse, _to_out, _writable, plan, run
from .pointwise import _ATEN_STRIDED_NUMEL, _in_memory_order, _reads_across

Tensor = torch.Tensor


#: c10::MemoryFormat and c10::Layout values: the C++ path passes these arguments as ints
_MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
                   3: torch.channels_last_3d}
_LAYOUTS = {0: torch.strided}


def _mf(v: Any) -> Any:
    """A memory_format argument as torch's object (None: preserve)."""
    if v is None:
        return torch.preserve_format
    return _MEMORY_FORMATS.get(v, v) if isinstance(v, int) else v


def _strided(layout: Any) -> bool:
    return layout is None or layout is torch.strided or (isinstance(layout, int) and _LAYOUTS.get(layout) is torch.strided)


def _check(op: str, x: Any) -> None:
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.layout != torch.strided:
        raise _refuse(op, f"an argument of type {type(x).__name__} / dtype {getattr(x, 'dtype', None)}")


def _elsewhere(x: Tensor, device: Any) -> bool:
    """Whether a ``device`` argument names another device than x's (None: x's own)."""
    if device is None:
        return False
    d = torch.device(device)
    return d.type != x.device.type or (d.index is not None and d != x.device)


def _same_device(op: str, x: Tensor, device: Any) -> None:
    if _elsewhere(x, device):
        raise _refuse(op, f"a copy to {torch.device(device)}")


def _copy_into(op: str, src: Any, dst: Tensor) -> Tensor:
    """dst[...] = src (broadcast, cast to dst's dtype). A whole float value into an integer
    dtype is passed as the integer: a float scalar argument is fp32 in the kernel, which
    would round 16777217.0 (or aten's own 2147483647.0, amin's identity) on its way."""
    if isinstance(src, float) and not dst.dtype.is_floating_point and math.isfinite(src) and src == int(src):
        src = int(src)
    ct = _CT[src.dtype] if isinstance(src, Tensor) else _CT[dst.dtype]
    return run("copy", [src], dst.dtype, ct, out=dst, inplace=True)


def to_copy(x: Tensor, *, dtype: torch.dtype | None = None, layout: Any = None, device: Any = None,
            pin_memory: bool | None = None, non_blocking: bool = False,
            memory_format: torch.memory_format | None = None) -> Tensor:
    """aten::_to_copy on one device: a cast and/or copy with aten's layout rules."""
    _check("_to_copy", x)
    _same_device("_to_copy", x, device)
    if not _strided(layout) or pin_memory:
        raise _refuse("_to_copy", "a layout or pinned memory")
    dt = x.dtype if dtype is None else dtype
    if dt not in _REAL:
        raise _refuse("_to_copy", f"dtype {dt}")
    out = torch.empty_like(x, dtype=dt, memory_format=_mf(memory_format))
    return _copy_into("_to_copy", x, out) if x.numel() else out


def _plan_to_copy(x: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
                  non_blocking: bool = False, memory_format: Any = None) -> Plan | None:
    """The copy kernel's plan; aten's for what ``to_copy`` refuses (a copy to another device,
    such as a model's lengths moved to the host for CTC loss, a complex dtype, another layout,
    pinned memory), which the key holds: no trip through the Python implementation per call
    (it cost 1.7x aten's time on the H200)."""
    if not isinstance(x, Tensor):
        return None
    dt = x.dtype if dtype is None else dtype
    if x.dtype not in _REAL or dt not in _REAL or not _strided(layout) or pin_memory or _elsewhere(x, device):
        return aten_plan()
    return _plan_copy_as(x, dt, _mf(memory_format))


def clone(x: Tensor, *, memory_format: torch.memory_format | None = None) -> Tensor:
    _check("clone", x)
    out = torch.empty_like(x, memory_format=_mf(memory_format))
    return _copy_into("clone", x, out) if x.numel() else out


def _plan_clone(x: Any, *, memory_format: Any = None) -> Plan | None:
    if not isinstance(x, Tensor):
        return None
    if x.dtype not in _REAL:  # complex: aten's kernel
        return aten_plan()
    return _plan_copy_as(x, x.dtype, _mf(memory_format))


def _plan_copy_as(x: Tensor, dt: torch.dtype, mf: Any) -> Plan | None:
    """The plan of ``x`` copied (cast to ``dt``) into the layout ``torch.empty_like(x,
    memory_format=mf)`` gives, which is aten's: contiguous, or for ``preserve_format`` a
    dense input's own strides (attention's (B, H, S, D) views of (B, S, H, D) storage, a
    transposed weight), or channels-last. A non-contiguous result is copied in its memory
    order (the dimensions sorted by its strides), so that a dense input with the same
    strides coalesces into one flat run instead of 4-D index arithmetic."""
    try:
        # asked of x itself: empty_like of a meta copy of x keeps no size-1 dim's stride (it gives
        # (4, 4, 1) for a dense (2, 1, 4) of strides (4, 1, 1)), where aten's clone keeps them all
        like = torch.empty_like(x, dtype=dt, memory_format=mf, device="meta")
    except RuntimeError:
        return None  # a memory format the rank does not have: aten's error, from Python
    buf = Buffer.like(like)
    if buf is None:
        return None
    if buf.strides is None:
        return plan("copy", [x], dt, _CT[x.dtype])
    try:
        _operands("copy", [x])
    except NotImplementedError:
        return None
    if x.numel() == 0:
        return Plan((buf,), ())
    order = memory_order(like.stride())
    L = _launch("copy", [x.permute(order)], [In(0)], like.permute(order), Out(0), [x.shape[d] for d in order],
                _CT[x.dtype], [])
    return None if L is None else Plan((buf,), (L,))


def copy_(dst: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """aten::copy_ within one device: any strides on both sides, src broadcast, cast."""
    _check("copy_", dst)
    _check("copy_", src)
    if src.device != dst.device and not (src.dim() == 0 and src.is_cpu):
        raise _refuse("copy_", f"a copy from {src.device} to {dst.device}")
    if src is dst or (src.data_ptr() == dst.data_ptr() and src.stride() == dst.stride() and src.shape == dst.shape
                      and src.dtype == dst.dtype):
        return dst
    return _copy_into("copy_", src, dst) if dst.numel() else dst


def _plan_copy_(dst: Any, src: Any, non_blocking: Any = False) -> Plan | None:
    """``dst.copy_(src)`` on one device: one launch writing ``dst`` in its own strides, ``src``
    broadcast and cast (a KV-cache write into a slice, a cast into a preallocated buffer).
    A call whose ``src`` shares ``dst``'s memory in another view goes to the implementation,
    as other in-place plans' calls do (``Plan.writes``). The rest is aten's copy_, planned so
    (no trip through the Python implementation): a ``src`` on another device (a host-to-device
    transfer, a 0-dim CPU value), complex or lazily negated tensors, a ``dst`` aten refuses to
    write or a ``src`` that does not broadcast to it (aten's error), more than 6 dims that do
    not coalesce, and a large copy that reads or writes across rows in ``dst``'s memory order
    (a transpose of 4M+ elements: 1.04-1.08x aten's time on the H200, 2026-12-03; pointwise's
    rule)."""
    if not isinstance(src, Tensor) or not isinstance(dst, Tensor):
        return None
    if (src.device != dst.device or not _writable(dst) or src.dtype not in _REAL or src.layout != torch.strided
            or src.is_neg() or src.is_conj()):
        return aten_plan()
    try:
        if list(torch.broadcast_shapes(src.shape, dst.shape)) != list(dst.shape):
            return aten_plan()
    except RuntimeError:
        return aten_plan()
    if dst.numel() == 0:
        return Plan((), (), (In(0),), writes=(0,))
    if dst.numel() >= _ATEN_STRIDED_NUMEL:
        ops, shape, _ = _in_memory_order([src, dst], list(dst.shape), dst.stride())
        if _reads_across(ops, shape):
            return aten_plan()
    L = _launch("copy", [src], [In(1)], dst, In(0), list(dst.shape), _CT[src.dtype], [])
    return aten_plan() if L is None else Plan((), (L,), (In(0),), writes=(0,))


def fill_scalar(x: Tensor, value: Any) -> Tensor:
    _check("fill_", x)
    if not _is_scalar(value) or (isinstance(value, float) and not x.dtype.is_floating_point and value != int(value)):
        raise _refuse("fill_", f"value {value!r}")
    if not scalar_fits(value, x.dtype):
        raise _refuse("fill_", f"value {value!r} for {x.dtype}")
    return _copy_into("fill_", value, x) if x.numel() else x


def fill_tensor(x: Tensor, value: Tensor) -> Tensor:
    _check("fill_", x)
    if not isinstance(value, Tensor) or value.dim() != 0:
        raise _refuse("fill_", "a value tensor with dimensions")
    return _copy_into("fill_", value, x) if x.numel() else x


def zero_(x: Tensor) -> Tensor:
    _check("zero_", x)
    return _copy_into("zero_", 0, x) if x.numel() else x


# ----------------------------------------------------------------- fill plans
def _fill_ref(value: Any, i: int, dt: torch.dtype) -> Any:
    """What a fill launch passes for Scalar argument ``i`` (now ``value``) written into dtype
    ``dt``: ``Arg(i)`` (the value at run time; the plan checks its range per call, see
    _fill_fits), a literal where the call key pins the value (0 or 1), or None where the
    Python implementation must decide: a fractional float into an integer dtype (aten
    truncates), a float into float64 (the kernel's fp32 scalar argument would round it)."""
    if not _is_scalar(value):
        return None
    pinned = value == 0 or value == 1  # the key holds this: a plan made for 0 serves only 0
    if isinstance(value, bool):
        return Arg(i)
    if isinstance(value, float) and dt == torch.float64:
        return None
    if isinstance(value, float) and not dt.is_floating_point:  # into an integer or bool: only 0.0 and 1.0 plainly
        return int(value) if pinned else None
    return Arg(i)


def _fill_fits(ref: Any, dt: torch.dtype) -> tuple[tuple[int, torch.dtype], ...]:
    """Plan.fits of a fill passing ``ref``: a run-time value (Arg) is checked per call against
    ``dt``'s range, where aten raises its overflow error (the key holds only the Scalar's type)."""
    return ((ref.i, dt),) if isinstance(ref, Arg) and dt != torch.bool else ()


def _plan_fill(x: Tensor, value: Any, ref: Any, dt: torch.dtype, out: Tensor | Buffer, out_ref: Any) -> Any:
    """The launch writing ``value`` (passed as ``ref``) into every element of ``out``; None
    beyond rank 4 (after coalescing its dims)."""
    return _launch("copy", [value], [ref], out, out_ref, list(x.shape), _CT[dt], [])


def _plan_fill_(x: Any, value: Any) -> Plan | None:
    """fill_.Scalar: in place, into ``self`` of any strides; the plan returns ``self``."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL:
        return None
    ref = _fill_ref(value, 1, x.dtype)
    if ref is None:
        return None
    if x.numel() == 0:
        return Plan((), (), (In(0),), fits=_fill_fits(ref, x.dtype))
    L = _plan_fill(x, value, ref, x.dtype, x, In(0))
    return None if L is None else Plan((), (L,), (In(0),), fits=_fill_fits(ref, x.dtype))


def _plan_fill_tensor_(x: Any, value: Any) -> Plan | None:
    """fill_.Tensor: what aten does, ``x.copy_(value)`` for a 0-dim value on ``x``'s device
    (one broadcast launch; a value that is a view of ``x`` goes to aten per call, as copy_'s
    overlap does); aten's kernel for a value on the host (aten reads it there) and for one
    with dimensions (aten's error). Before, every call ran the Python implementation."""
    if not isinstance(x, Tensor) or not isinstance(value, Tensor):
        return None
    if value.dim() != 0:
        return aten_plan()
    return _plan_copy_(x, value)


def _plan_zero_(x: Any) -> Plan | None:
    """zero_: fill_ with a literal 0."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL:
        return None
    if x.numel() == 0:
        return Plan((), (), (In(0),))
    L = _plan_fill(x, 0, 0, x.dtype, x, In(0))
    return None if L is None else Plan((), (L,), (In(0),))


def _plan_like(x: Any, value: Any, ref: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any,
               memory_format: Any) -> Plan | None:
    """zeros_like/ones_like/full_like: a new buffer, filled, laid out by ``empty_like``'s rule
    (asked on the meta device, once per call key): ``preserve_format`` keeps a dense input's
    strides (a transposed or channels_last one), a plan buffer with them."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL or not _strided(layout) or pin_memory:
        return None
    if _elsewhere(x, device):
        return None
    dt = x.dtype if dtype is None else dtype
    if dt not in _REAL:
        return None
    if ref is None:
        ref = _fill_ref(value, 1, dt)
        if ref is None:
            return None
    try:
        like = torch.empty_like(x, dtype=dt, memory_format=_mf(memory_format), device="meta")
    except RuntimeError:
        return None  # (a memory format of another rank: aten's error, from the Python implementation)
    buf = Buffer.like(like)  # contiguous, or a dense input's strides (preserve_format)
    if buf is None:
        return None
    if x.numel() == 0:
        return Plan((buf,), (), fits=_fill_fits(ref, dt))
    L = _plan_fill(x, value, ref, dt, buf, Out(0))
    return None if L is None else Plan((buf,), (L,), fits=_fill_fits(ref, dt))


def _like_planner(value: Any) -> Callable:
    """The planner of zeros_like (``value`` 0), ones_like (1) or full_like (None: its Scalar
    argument 1, passed as Arg(1))."""
    if value is None:
        def full(x: Any, fill_value: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: Any = None, memory_format: Any = None) -> Plan | None:
            return _plan_like(x, fill_value, None, dtype, layout, device, pin_memory, memory_format)

        return full

    def const(x: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
              memory_format: Any = None) -> Plan | None:
        return _plan_like(x, value, value, dtype, layout, device, pin_memory, memory_format)

    return const


def _like(op: str, value: Any) -> Callable:
    def fn(x: Tensor, *args: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
           memory_format: Any = None) -> Tensor:
        _check(op, x)
        v = args[0] if value is None else value
        if not _is_scalar(v) or not _strided(layout) or pin_memory:
            raise _refuse(op, "arguments")
        _same_device(op, x, device)
        out = torch.empty_like(x, dtype=dtype, memory_format=_mf(memory_format))
        if out.dtype not in _REAL:
            raise _refuse(op, f"dtype {out.dtype}")
        if isinstance(v, float) and not out.dtype.is_floating_point and v != int(v) or not scalar_fits(v, out.dtype):
            raise _refuse(op, f"value {v!r} for {out.dtype}")
        return _copy_into(op, v, out) if out.numel() else out

    return fn


def _factory(op: str, value: Any, like: bool = False) -> Callable:
    """zeros/ones/full/scalar_tensor (``like``: new_zeros/new_ones/new_full, whose dtype and
    device default to self's): an allocation and one fill."""
    def fn(*args: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Tensor:
        args_ = list(args)
        self_ = args_.pop(0) if like else None
        if op == "scalar_tensor":
            size, v = [], args_[0]
        else:
            size = list(args_[0])
            v = args_[1] if value is None else value
        if not _is_scalar(v) or not _strided(layout) or pin_memory:
            raise _refuse(op, "arguments")
        if self_ is not None:
            _check(op, self_)
            dt = self_.dtype if dtype is None else dtype
            dev = self_.device if device is None else device
        else:
            dt = dtype if dtype is not None else (
                torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) and value is None
                and op != "scalar_tensor" else torch.get_default_dtype())
            dev = device
        if dt not in _REAL:
            raise _refuse(op, f"dtype {dt}")
        if isinstance(v, float) and not dt.is_floating_point and v == v and v != int(v) or not scalar_fits(v, dt):
            raise _refuse(op, f"value {v!r} for {dt}")  # aten: its truncation, or its overflow error
        out = torch.empty(size, dtype=dt, device=dev)
        return _copy_into(op, v, out) if out.numel() else out

    return fn


def cat(tensors: list[Tensor], dim: int = 0) -> Tensor:
    """aten::cat: one strided copy per input into its slice of the output."""
    ts = list(tensors)
    if not ts:
        raise _refuse("cat", "an empty list")
    for t in ts:
        _check("cat", t)
    _refuse_long("cat", ts)
    live = [t for t in ts if not (t.dim() == 1 and t.numel() == 0)]  # aten's legacy rule: skipped
    if not live:
        return torch.empty(0, dtype=_promote(ts), device=ts[0].device)
    ref = live[0]
    nd = ref.dim()
    if nd == 0 or not -nd <= dim < nd:
        raise _refuse("cat", "a zero-dim tensor or dim out of range")
    dim %= nd
    dev = ref.device
    for t in live:
        if t.dim() != nd or t.device != dev or any(t.shape[d] != ref.shape[d] for d in range(nd) if d != dim):
            raise _refuse("cat", "inputs whose shapes or devices disagree")
    shape = list(ref.shape)
    shape[dim] = sum(t.shape[dim] for t in live)
    out = torch.empty(shape, dtype=_promote(ts), device=dev, memory_format=_cat_format(ts))
    off = 0
    for t in live:
        n = t.shape[dim]
        if n and t.numel():
            _copy_into("cat", t, out.narrow(dim, off, n))
        off += n
    return out


def _refuse_long(op: str, ts: list[Tensor]) -> None:
    """cat/stack's Python implementations: more than _CAT_MAX_INPUTS inputs are aten's (as on
    the C++ path, through _plan.list_limit)."""
    if len(ts) > _CAT_MAX_INPUTS:
        raise _refuse(op, f"{len(ts)} inputs (more than {_CAT_MAX_INPUTS}: aten's kernel copies up to 64 a launch)")


def _suggested_format(t: Tensor) -> torch.memory_format:
    """aten's suggest_memory_format: channels-last where the strides look like it (c10's
    is_channels_last_strides_2d/3d, ambiguous cases contiguous), else contiguous."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(t.dim())
    if order is None or t.layout != torch.strided:
        return torch.contiguous_format
    sizes, strides = t.shape, t.stride()
    if strides[1] == 0:
        return torch.contiguous_format
    low = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return torch.contiguous_format
        low = strides[d] * (sizes[d] if sizes[d] > 1 else 1)
    return torch.channels_last if t.dim() == 4 else torch.channels_last_3d


def _cat_format(ts: list[Tensor]) -> torch.memory_format:
    """aten's cat_compute_output_memory_format, over all inputs (skipped ones included):
    contiguous where one input suggests it or two disagree, else the inputs' format."""
    formats = {_suggested_format(t) for t in ts}
    return formats.pop() if len(formats) == 1 else torch.contiguous_format


def _promote(ts: list[Tensor]) -> torch.dtype:
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = torch.promote_types(dt, t.dtype)
    return dt


def stack(tensors: list[Tensor], dim: int = 0) -> Tensor:
    ts = list(tensors)
    if not ts:
        raise _refuse("stack", "an empty list")
    _refuse_long("stack", ts)
    nd = ts[0].dim() + 1
    if not -nd <= dim < nd or any(t.shape != ts[0].shape for t in ts):
        raise _refuse("stack", "shapes or dim")
    d = dim % nd
    if d < nd - 1:  # as aten: the cat of the inputs themselves, viewed (their layout is the output's)
        return cat(ts, d).view(*ts[0].shape[:d], len(ts), *ts[0].shape[d:])
    return cat([t.unsqueeze(d) for t in ts], d)


# ----------------------------------------------------------------- cat / stack planners
@triton.jit
def _cat_kernel(
    x0, x1, x2, x3, out, n, d1, d2, d3, b1, b2, b3, h0, h1, h2, h3,
    s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33,
    os0, os1, os2, os3, obase,
    NIN: tl.constexpr, CAT: tl.constexpr, BLOCK: tl.constexpr, IDX64: tl.constexpr,
):
    # the index space is the output's (a slice of it: obase), rank 4 with the cat dim at CAT;
    # input k holds cat coordinates [b_k, b_k+1) (b0 = 0) and is read at its own strides, its
    # offset shifted back by h_k = b_k * (its cat stride)
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    if CAT == 0:
        ic = i0
    elif CAT == 1:
        ic = i1
    elif CAT == 2:
        ic = i2
    else:
        ic = i3
    m = mask
    if NIN >= 2:
        m = mask & (ic < b1)
    v = _to_out(tl.load(x0 + (i0 * s00 + i1 * s01 + i2 * s02 + i3 * s03 - h0), mask=m), out.dtype.element_ty, True)
    if NIN >= 2:
        m = mask & (ic >= b1)
        if NIN >= 3:
            m = m & (ic < b2)
        v1 = tl.load(x1 + (i0 * s10 + i1 * s11 + i2 * s12 + i3 * s13 - h1), mask=m)
        v = tl.where(ic >= b1, _to_out(v1, out.dtype.element_ty, True), v)
    if NIN >= 3:
        m = mask & (ic >= b2)
        if NIN >= 4:
            m = m & (ic < b3)
        v2 = tl.load(x2 + (i0 * s20 + i1 * s21 + i2 * s22 + i3 * s23 - h2), mask=m)
        v = tl.where(ic >= b2, _to_out(v2, out.dtype.element_ty, True), v)
    if NIN >= 4:
        v3 = tl.load(x3 + (i0 * s30 + i1 * s31 + i2 * s32 + i3 * s33 - h3), mask=mask & (ic >= b3))
        v = tl.where(ic >= b3, _to_out(v3, out.dtype.element_ty, True), v)
    tl.store(out + (obase + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3), v, mask=mask)


_cat_k = jit(_cat_kernel)
#: inputs one launch of the cat kernel reads (its pointer parameters); more take several launches
_CAT_NIN = 4
#: cat/stack calls of more inputs go to aten's kernel (_plan.list_limit; the Python
#: implementation refuses them too): ours launches once per _CAT_NIN inputs where aten's
#: copies up to 64 in one launch. On the H200, 2 to 4 inputs: 0.85-0.94x aten's time per
#: call; 8 to 16 (two to four launches): 1.18-2.07x. A Mamba scan's stack of 256 per-step
#: states overflowed the key and took 256 copies from Python, 113x aten's time.
_CAT_MAX_INPUTS = _CAT_NIN

#: an input of a cat launch: its plan reference, sizes and strides (a stack input's with the new dim)
_CatItem = tuple[Any, tuple[int, ...], tuple[int, ...]]


def _cat_launch(items: list[_CatItem], d: int, shape: tuple[int, ...], base: int) -> Any:
    """The launch writing ``items`` (at most _CAT_NIN, each non-empty along ``d``) into the
    contiguous output of ``shape`` from cat coordinate ``base`` on; None beyond rank 4.

    Dims merge where every input and the output are contiguous across them (size-1 dims
    drop); the cat dim merges with its inner neighbour only (its boundaries then scale by
    that size), never with an outer one, whose stride depends on the input's extent."""
    sizes = [s[d] for _, s, _ in items]
    space = list(shape)
    space[d] = sum(sizes)
    ostr = contiguous_strides(shape)
    keep = [i for i in range(len(space)) if i == d or space[i] != 1]
    strs = [[st[i] for i in keep] for _, _, st in items] + [[ostr[i] for i in keep]]
    groups: list[tuple[int, list[int], bool]] = []  # (size, stride of each operand, holds the cat dim), inner first
    scale = 1
    for j in range(len(keep) - 1, -1, -1):
        i, is_cat = keep[j], keep[j] == d
        if groups and not groups[-1][2] and all(s[j] == g * groups[-1][0] for s, g in zip(strs, groups[-1][1])):
            size, gs, _ = groups[-1]
            if is_cat:
                scale = size
            groups[-1] = (size * space[i], gs, is_cat)
        else:
            groups.append((space[i], [s[j] for s in strs], is_cat))
    if len(groups) > 4:
        return None
    groups += [(1, [0] * len(strs), False)] * (4 - len(groups))
    groups.reverse()
    dims = [g[0] for g in groups]
    cat = next(k for k, g in enumerate(groups) if g[2])
    starts, acc = [], 0
    for sz in sizes:
        starts.append(acc * scale)
        acc += sz
    nin = len(items)
    bounds = starts[1:] + [dims[cat]] * (4 - nin)  # b1..b3: unused ones past the end
    istr = [[g[1][k] for g in groups] for k in range(nin)]
    shifts = [b * st[cat] for b, st in zip(starts, istr)]
    n = math.prod(dims)
    extent = max([math.prod(shape)] + [sum(abs(s) * z for s, z in zip(st, dims)) for st in istr])
    refs = [r for r, _, _ in items]
    refs += [refs[0]] * (4 - nin)
    istr += [[0] * 4] * (4 - nin)
    shifts += [0] * (4 - nin)
    return launch(_cat_k, ((n + _BLOCK - 1) // _BLOCK,), *refs, Out(0), n, dims[1], dims[2], dims[3], *bounds[:3],
                  *shifts, *istr[0], *istr[1], *istr[2], *istr[3], *[g[1][-1] for g in groups],
                  base * math.prod(shape[d + 1:]), NIN=nin, CAT=cat, BLOCK=_BLOCK, IDX64=extent > _INT32_MAX)


def _slice_copies(items: list[_CatItem], dtypes: list[torch.dtype], d: int, shape: tuple[int, ...],
                  base: int) -> list[Any] | None:
    """One copy launch per input into its slice of the contiguous output (elementwise.py's
    kernel, its output offset the slice's start): where the inputs' dims do not merge into
    the cat kernel's rank 4 (a stack at the last dim of (B, H, S, D) attention views is
    rank 5). None beyond that kernel's rank."""
    ostr = contiguous_strides(shape)
    out = []
    for (ref, sh, st), dt in zip(items, dtypes):
        src = torch.empty_strided(sh, st, dtype=dt, device="meta")
        dst = torch.empty_strided(sh, ostr, dtype=dt, device="meta")
        L = _launch("copy", [src], [ref], dst, Out(0), sh, _CT[dt], [], obase=base * ostr[d])
        if L is None:
            return None
        out.append(L)
        base += sh[d]
    return out


def _cat_plan(items: list[_CatItem], d: int, shape: tuple[int, ...], dtype: torch.dtype,
              dtypes: list[torch.dtype]) -> Plan | None:
    """One launch per _CAT_NIN inputs, each writing its slice of the contiguous output (or
    one per input where their dims do not merge into rank 4); ``dtypes`` are the items'."""
    buf = Buffer(tuple(shape), dtype)
    live = [k for k, it in enumerate(items) if it[1][d]]  # nothing to copy from inputs empty along d
    if math.prod(shape) == 0 or not live:
        return Plan((buf,), ())
    items, dtypes = [items[k] for k in live], [dtypes[k] for k in live]
    launches: list[Any] = []
    base = 0
    for c in range(0, len(items), _CAT_NIN):
        chunk = items[c:c + _CAT_NIN]
        L = _cat_launch(chunk, d, tuple(shape), base)
        if L is None:
            more = _slice_copies(chunk, dtypes[c:c + _CAT_NIN], d, tuple(shape), base)
            if more is None:
                return None
            launches += more
        else:
            launches.append(L)
        base += sum(s[d] for _, s, _ in chunk)
    return Plan((buf,), tuple(launches))


def _cat_inputs(tensors: Any) -> list[Tensor] | None:
    """cat/stack's inputs when the cat kernel takes them: real dtypes, strided, no lazy
    negation, one device (aten's own errors otherwise, from the Python implementation)."""
    ts = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if not ts or not all(isinstance(t, Tensor) and t.dtype in _REAL and t.layout == torch.strided
                         and not (t.is_neg() or t.is_conj()) for t in ts):
        return None
    if any(t.device != ts[0].device for t in ts):
        return None
    return ts


@list_limit(_CAT_MAX_INPUTS)
def _plan_cat(tensors: Any, dim: int = 0) -> Plan | None:
    """aten::cat: one launch for up to four inputs (more: aten's plan), each read at its own
    strides, cast to the promoted dtype; None where aten's output would be channels-last."""
    ts = _cat_inputs(tensors)
    if ts is None or any(t.dim() == 0 for t in ts):
        return None
    if len(ts) > _CAT_MAX_INPUTS:  # the C++ path sends them to aten before planning (list_limit)
        return aten_plan()
    dt = _promote(ts)  # over all inputs, skipped ones included, as aten's result_type
    live = [k for k, t in enumerate(ts) if not (t.dim() == 1 and t.numel() == 0)]  # aten's legacy rule: skipped
    if not live:
        return Plan((Buffer((0,), dt),), ())
    ref = ts[live[0]]
    nd = ref.dim()
    if not -nd <= dim < nd:
        return None
    d = dim % nd
    if any(ts[k].dim() != nd or any(ts[k].shape[i] != ref.shape[i] for i in range(nd) if i != d) for k in live):
        return None
    if _cat_format(ts) is not torch.contiguous_format:
        return None
    shape = list(ref.shape)
    shape[d] = sum(ts[k].shape[d] for k in live)
    return _cat_plan([(InItem(0, k), tuple(ts[k].shape), tuple(ts[k].stride())) for k in live], d, tuple(shape), dt,
                     [ts[k].dtype for k in live])


@list_limit(_CAT_MAX_INPUTS)
def _plan_stack(tensors: Any, dim: int = 0) -> Plan | None:
    """aten::stack: a cat of the inputs unsqueezed at ``dim``, through the same launches. The
    output's layout is aten's: below the last dim aten cats the inputs themselves and views
    the result, so their layout decides it; at the last dim, the unsqueezed inputs'."""
    ts = _cat_inputs(tensors)
    if ts is None or any(t.shape != ts[0].shape for t in ts):
        return None
    if len(ts) > _CAT_MAX_INPUTS:
        return aten_plan()
    nd = ts[0].dim() + 1
    if not -nd <= dim < nd:
        return None
    d = dim % nd
    views = [t.unsqueeze(d) for t in ts]
    if _cat_format(ts if d < nd - 1 else views) is not torch.contiguous_format:
        return None
    shape = (*ts[0].shape[:d], len(ts), *ts[0].shape[d:])
    items = [(InItem(0, k), tuple(v.shape), tuple(v.stride())) for k, v in enumerate(views)]
    return _cat_plan(items, d, shape, _promote(ts), [t.dtype for t in ts])


def _interleaved(x: Tensor, rank: int) -> Tensor:
    """x viewed as (1, s0, 1, s1, ...) over ``rank`` dims (leading 1s padded): views only."""
    v = x
    for _ in range(rank - x.dim()):
        v = v.unsqueeze(0)
    for i in range(rank):
        v = v.unsqueeze(2 * i)
    return v


def repeat(x: Tensor, repeats: list[int]) -> Tensor:
    """aten::repeat: the input, broadcast over interleaved repeat dims, copied once."""
    _check("repeat", x)
    reps = list(repeats)
    if len(reps) < x.dim() or any(r < 0 for r in reps):
        raise _refuse("repeat", "repeats")
    shape = [1] * (len(reps) - x.dim()) + list(x.shape)
    inter = [d for r, s in zip(reps, shape) for d in (r, s)]
    src = _interleaved(x, len(reps)).expand(inter)
    out = torch.empty(inter, dtype=x.dtype, device=x.device)
    if out.numel():
        _copy_into("repeat", src, out)
    return out.reshape([r * s for r, s in zip(reps, shape)])


def _plan_repeat(x: Any, repeats: Any) -> Plan | None:
    if not isinstance(x, Tensor) or x.dtype not in _REAL:
        return None
    reps = list(repeats)
    if len(reps) < x.dim() or any(r < 0 for r in reps):
        return None
    shape = [1] * (len(reps) - x.dim()) + list(x.shape)
    inter = [d for r, s in zip(reps, shape) for d in (r, s)]
    src = _interleaved(x, len(reps)).expand(inter)  # a view at In(0)'s address
    final = tuple(r * s for r, s in zip(reps, shape))
    buf = Buffer(final, x.dtype)
    if 0 in inter:
        return Plan((buf,), ())
    L = _launch("copy", [src], [In(0)], Buffer(tuple(inter), x.dtype), Out(0), inter, _CT[x.dtype], [])
    return None if L is None else Plan((buf,), (L,))


# ----------------------------------------------------------------- triu / tril
@triton.jit
def _tri_kernel(x, out, n, M, N, diag, UPPER: tl.constexpr, BLOCK: tl.constexpr, IDX64: tl.constexpr = False):
    # IDX64: 2**31 elements or more (a causal mask of 64k x 64k), indexed in int64; int32
    # otherwise, whose division per element is the cheaper
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    j = offs % N
    i = (offs // N) % M
    if UPPER:
        keep = (j - i) >= diag
    else:
        keep = (j - i) <= diag
    v = tl.load(x + offs, mask=mask)
    tl.store(out + offs, tl.where(keep, v, tl.zeros_like(v)), mask=mask)


_tri_k = jit(_tri_kernel)


def _idx64(n: int) -> dict[str, bool]:
    """The IDX64 constexpr of a launch over ``n`` elements: given only where needed, so every
    other launch keeps its variant."""
    return {"IDX64": True} if n > _INT32_MAX else {}


def _tri_plan(upper: bool, x: Any, diagonal: int = 0) -> Plan | None:
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.dim() < 2 or not x.is_contiguous():
        return None
    n = x.numel()
    buf = Buffer(tuple(x.shape), x.dtype)
    if n == 0:
        return Plan((buf,), ())
    M, N = x.shape[-2], x.shape[-1]
    return Plan((buf,), (launch(_tri_k, ((n + 1023) // 1024,), In(0), Out(0), n, M, N, diagonal, UPPER=upper,
                                BLOCK=1024, **_idx64(n)),))


def _tri(upper: bool) -> tuple[Callable, Callable]:
    op = "triu" if upper else "tril"

    def fn(x: Tensor, diagonal: int = 0) -> Tensor:
        _check(op, x)
        if x.dim() < 2:
            raise _refuse(op, "a tensor of rank < 2")
        xc = x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        if n:
            execute(launch(_tri_k, ((n + 1023) // 1024,), xc, out, n, x.shape[-2], x.shape[-1], diagonal,
                           UPPER=upper, BLOCK=1024, **_idx64(n)))
        return out

    def fn_(x: Tensor, diagonal: int = 0) -> Tensor:
        _check(op, x)
        if x.dim() < 2 or not x.is_contiguous():
            raise _refuse(op + "_", "a non-contiguous self")
        n = x.numel()
        if n:
            execute(launch(_tri_k, ((n + 1023) // 1024,), x, x, n, x.shape[-2], x.shape[-1], diagonal,
                           UPPER=upper, BLOCK=1024, **_idx64(n)))
        return x

    return fn, fn_


_triu, _triu_ = _tri(True)
_tril, _tril_ = _tri(False)

# ----------------------------------------------------------------- arange
@triton.jit
def _arange_kernel(out, n, s_hi, s_lo, d_hi, d_lo, IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    # float start/step arrive as fp32 pairs (hi + lo): about 48 bits of each, summed in fp64
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # past 2**31 elements too
    mask = offs < n
    if IS_FLOAT:
        z = tl.zeros([BLOCK], tl.float64)
        v = (z + s_hi + s_lo) + offs.to(tl.float64) * (z + d_hi + d_lo)
    else:
        z = tl.zeros([BLOCK], tl.int64)
        v = (z + s_hi) + offs.to(tl.int64) * (z + d_hi)
    tl.store(out + offs, _to_out(v, out.dtype.element_ty, True), mask=mask)


_arange_k = jit(_arange_kernel)


def _split(v: float) -> tuple[float, float]:
    hi = float(torch.tensor(v, dtype=torch.float32))
    return hi, float(torch.tensor(v - hi, dtype=torch.float32))


#: torch before 2.13 divides by zero in int64 arange's size when the step truncates to 0
#: (SIGFPE on x86, pytorch issue 175761); from 2.13 it raises ValueError("step must be nonzero")
_ARANGE_DIVIDES_BY_ZERO = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


def _arange_spec(start: Any, end: Any, step: Any, dtype: Any) -> tuple[Any, int, tuple]:
    """arange's dtype, size and kernel arguments (start and step: hi/lo fp32 pairs for a float
    dtype), as aten computes them; raises _refuse where aten raises or we do not serve it."""
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if not all(_is_scalar(v) for v in vals):
        raise _refuse("arange", "arguments")
    start, end, step = vals
    if not all(math.isfinite(v) for v in vals):
        raise _refuse("arange", "a bound or step that is not finite")  # aten's "unsupported range"
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in vals) else torch.get_default_dtype()
    if dtype not in _REAL or dtype == torch.bool:
        raise _refuse("arange", f"dtype {dtype}")
    if step == 0 or (end - start) * step < 0 and end != start:
        raise _refuse("arange", "a step of the wrong sign")  # aten's error
    if any(abs(v) > 2**53 for v in vals if isinstance(v, int)):
        raise _refuse("arange", "integers beyond float64's exact range")
    if dtype == torch.int64 and not all(isinstance(v, int) for v in vals):
        # aten's int64 size: start, end and step truncated to integers first, then
        # (end - start + step - sign(step)) / step in C's truncating division
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            if _ARANGE_DIVIDES_BY_ZERO:  # aten would kill the process (SIGFPE): raise what later versions raise
                raise final(ValueError("step must be nonzero"))
            raise _refuse("arange", "a step that truncates to 0")  # aten's "step must be nonzero"
        num = end - start + step - (1 if step > 0 else -1)
        size = abs(num) // abs(step) * (1 if (num >= 0) == (step > 0) else -1)
        if size < 0:
            raise _refuse("arange", "a negative size")  # aten's error
    else:
        size = max(0, math.ceil((end - start) / step)) if dtype.is_floating_point or not all(
            isinstance(v, int) for v in vals) else max(0, -((start - end) // step))
    if dtype.is_floating_point:
        (sh, sl), (dh, dl) = _split(float(start)), _split(float(step))
    else:
        sh, sl, dh, dl = int(start), 0, int(step), 0
    return dtype, size, (sh, sl, dh, dl)


def _arange_launch(dtype: torch.dtype, size: int, kargs: tuple, out: Any) -> Any:
    return launch(_arange_k, ((size + 1023) // 1024,), out, size, *kargs, IS_FLOAT=dtype.is_floating_point,
                  BLOCK=1024)


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None) -> Tensor:
    """aten::arange (all three overloads): size and values as aten computes them."""
    if end is None:
        start, end = 0, start
    if not _strided(layout) or pin_memory:
        raise _refuse("arange", "arguments")
    dtype, size, kargs = _arange_spec(start, end, step, dtype)
    out = torch.empty(size, dtype=dtype, device=device)
    if size:
        execute(_arange_launch(dtype, size, kargs, out))
    return out


# ----------------------------------------------------------------- constant_pad_nd
@triton.jit
def _pad_kernel(x, out, nrows, d1, d2, d3, s0, s1, s2, s3, n0, n1, n2, n3, b0, b1, b2, b3, value, COL_BLOCKS,
                UPCAST: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr, K0: tl.constexpr = 1,
                K1: tl.constexpr = 1, K2: tl.constexpr = 1, K3: tl.constexpr = 1):
    """out (contiguous, rank 4 padded, nrows rows of d3) = x at (i - b) / K where that lies
    inside x's (n0..n3) at a multiple of K, else value. K is 1 for a pad (the code then the
    same as without it) and the step of a stepped slice's gradient (``x[..., ::2]``:
    interleaved rotary embeddings, patch merging). A program writes BLOCK columns of ROWS
    output rows: each row's index is split once (integer division per element is what a flat
    kernel would pay), and narrow rows come ROWS to a program (the gradient of ``x[:, :, i, :]``
    over 8 state columns: one program per 8 elements ran 12x aten's time)."""
    pid = tl.program_id(0)
    rows = (pid // COL_BLOCKS) * ROWS + tl.arange(0, ROWS)
    cols = (pid % COL_BLOCKS) * BLOCK + tl.arange(0, BLOCK)
    i2 = rows % d2
    t = rows // d2
    r0, r1, r2 = t // d1 - b0, t % d1 - b1, i2 - b2  # positions past the pad before
    rm = rows < nrows
    row_in = rm & (r0 >= 0) & (r0 < n0 * K0) & (r1 >= 0) & (r1 < n1 * K1) & (r2 >= 0) & (r2 < n2 * K2)
    if K0 > 1:  # a stepped slice's gradient: only every K-th position holds an input element
        row_in = row_in & (r0 % K0 == 0)
    if K1 > 1:
        row_in = row_in & (r1 % K1 == 0)
    if K2 > 1:
        row_in = row_in & (r2 % K2 == 0)
    j0, j1, j2 = r0 // K0, r1 // K1, r2 // K2
    r3 = cols - b3
    cm = cols < d3
    col_in = (r3 >= 0) & (r3 < n3 * K3)
    if K3 > 1:
        col_in = col_in & (r3 % K3 == 0)
    j3 = r3 // K3
    inside = row_in[:, None] & col_in[None, :]
    base = j0.to(tl.int64) * s0 + j1.to(tl.int64) * s1 + j2.to(tl.int64) * s2
    v = tl.load(x + base[:, None] + (j3.to(tl.int64) * s3)[None, :], mask=cm[None, :] & inside)
    if UPCAST:  # 16-bit floats meet the fp32 value in fp32 (exact both ways)
        v = v.to(tl.float32)
    tl.store(out + rows.to(tl.int64)[:, None] * d3 + cols[None, :],
             tl.where(inside, v, value).to(out.dtype.element_ty), mask=rm[:, None] & cm[None, :])


_pad_k = jit(_pad_kernel)
_PAD_TILE = 1024  # elements a program of the pad kernel writes (fewer where the output is smaller)


#: one dim of the pad kernel: (output size, input stride, input size, pad before, step)
_PadDim = tuple[int, int, int, int, int]


def _pad_geometry(shape: Sequence[int], strides: Sequence[int], pad: Any, steps: Sequence[int] | None = None
                  ) -> tuple[list[int], list[_PadDim]] | None:
    """aten's output shape for an input of ``shape`` and ``strides``, and per dim (after merging
    unpadded dims the strides allow and padding to rank 4) (output size, input stride, input
    size, pad before, step); None beyond. ``steps`` (per input dim, default 1): the input's
    elements sit every step positions of the output (a stepped slice's gradient)."""
    pad = [int(p) for p in pad]
    nd = len(shape)
    ks = [1] * nd if steps is None else [int(k) for k in steps]
    if len(pad) % 2 or len(pad) // 2 > nd:
        return None
    before = [0] * nd
    after = [0] * nd
    for k in range(len(pad) // 2):
        before[nd - 1 - k], after[nd - 1 - k] = pad[2 * k], pad[2 * k + 1]
    out = [((s - 1) * k + 1 if s else 0) + b + a for s, k, b, a in zip(shape, ks, before, after)]
    if any(s < 0 for s in out):
        return None  # aten's error
    dims: list[_PadDim] = []
    for d in range(nd):
        o, st, sz, b, k = out[d], strides[d], shape[d], before[d], ks[d]
        if sz == 1 and o == 1 and b == 0:
            continue
        if dims and b == 0 and o == sz and k == 1:
            po, pst, psz, pb, pk = dims[-1]
            if pb == 0 and po == psz and pk == 1 and pst == st * sz:
                dims[-1] = (po * o, st, psz * sz, 0, 1)
                continue
        dims.append((o, st, sz, b, k))
    if len(dims) > 4:
        return None
    geo = [(1, 0, 1, 0, 1)] * (4 - len(dims)) + dims
    d3 = geo[3][0]
    if math.prod(g[0] for g in geo[:3]) * cdiv(d3, min(_PAD_TILE, next_pow2(max(d3, 1)))) >= 2**31:
        return None  # more row programs than a launch grid holds
    return out, geo


def _pad_layout_ok(x: Tensor, pad: Any) -> bool:
    """Whether aten's output is contiguous (asked on the meta device: a channels_last input,
    or an all-crop/zero pad, which aten serves with a clone keeping a dense input's strides,
    can give other strides)."""
    try:
        m = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        return torch.ops.aten.constant_pad_nd(m, list(pad), 0).is_contiguous()
    except RuntimeError:
        return False


def _pad_launch(x_ref: Any, dt: torch.dtype, geo: list[_PadDim], n: int, value: Any) -> Any:
    (d0, s0, n0, b0, k0), (d1, s1, n1, b1, k1), (d2, s2, n2, b2, k2), (d3, s3, n3, b3, k3) = geo
    nrows = d0 * d1 * d2
    block, rows = row_tile(d3, nrows, _PAD_TILE)
    col_blocks = cdiv(d3, block)
    steps = {f"K{i}": k for i, k in enumerate((k0, k1, k2, k3)) if k != 1}  # a pad's variants keep their key
    return launch(_pad_k, (cdiv(nrows, rows) * col_blocks,), x_ref, Out(0), nrows, d1, d2, d3, s0, s1, s2, s3, n0, n1,
                  n2, n3, b0, b1, b2, b3, value, col_blocks, UPCAST=dt in (torch.float16, torch.bfloat16), ROWS=rows,
                  BLOCK=block, **steps)


def constant_pad_nd(x: Tensor, pad: list[int], value: Any = 0) -> Tensor:
    """aten::constant_pad_nd: one launch over the output (negative pads crop)."""
    _check("constant_pad_nd", x)
    ref = _keyed_value(value, x.dtype)  # the value is known per call here, as in a value-keyed plan
    if ref is None:
        raise _refuse("constant_pad_nd", f"value {value!r} for {x.dtype}")
    g = _pad_geometry(x.shape, x.stride(), pad)
    if g is None or not _pad_layout_ok(x, pad):
        raise _refuse("constant_pad_nd", "a pad, rank or layout")
    shape, geo = g
    n = math.prod(shape)
    buf = Buffer(tuple(shape), x.dtype)
    launches = (_pad_launch(In(0), x.dtype, geo, n, ref),) if n else ()
    return _run_plan(Plan((buf,), launches), [x, pad, value])


def _slice_pad(g: Any, input_sizes: Any, dim: int, start: int, end: int, step: int
               ) -> tuple[list[int], list[int]] | None:
    """slice_backward as a pad: (the pad list, the steps per dim) that put ``g`` at
    [start, end) every ``step`` positions of dim ``dim`` of a zero tensor of ``input_sizes``
    (start and end normalized as aten's slice does); None for a ``g`` of another shape than
    that slice (aten broadcasts it)."""
    if not isinstance(g, Tensor) or g.dtype not in _REAL or g.layout != torch.strided or step < 1:
        return None
    sizes = [int(s) for s in input_sizes]
    nd = len(sizes)
    if nd == 0 or g.dim() != nd or not -nd <= dim < nd:
        return None
    dim %= nd
    size = sizes[dim]
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    n = cdiv(end - start, step)
    if list(g.shape) != sizes[:dim] + [n] + sizes[dim + 1:]:
        return None
    span = (n - 1) * step + 1 if n else 0
    steps = [1] * nd
    steps[dim] = step if n else 1
    return [0, 0] * (nd - 1 - dim) + [start, size - start - span], steps


#: outputs of this many elements or more take aten's slice and select backward on a device
#: (a zero fill, then a copy of the slice): the pad kernel's one pass ran 3.3x aten's time on
#: Mamba's f32[8,2048,512,8] state (H200, 2026-12-03), where it ran 0.83x on f32[4,512,256,8]
_ATEN_SLICE_BACKWARD_NUMEL = 1 << 23


def _slice_backward_plan(g: Any, input_sizes: Any, dim: int, start: int, end: int, step: int) -> Plan | None:
    """aten::slice_backward (the gradient of ``x[..., a:b]``: rotate_half's halves, a fused QKV's
    split; of ``x[..., ::2]``: interleaved rotary embeddings, patch merging): zeros with ``g``
    written at the slice, in one launch over the output where aten fills and then copies; the
    output contiguous, as aten's ``zeros(input_sizes)``. A ``g`` whose strides leave more than
    the kernel's four dims is made contiguous first (a fused QKV's permuted gradient); aten's
    kernel serves what no plan does (a broadcast ``g``, a large output), decided once per call
    key rather than by the Python implementation on every call."""
    if not isinstance(g, Tensor):
        return None
    spec = _slice_pad(g, input_sizes, dim, start, end, step)
    if spec is None:
        return aten_plan()
    pad, steps = spec
    contiguous: tuple[int, ...] = ()
    geo = _pad_geometry(g.shape, g.stride(), pad, steps)
    if geo is None and not g.is_contiguous():
        contiguous = (0,)
        geo = _pad_geometry(g.shape, contiguous_strides(g.shape), pad, steps)
    if geo is None:
        return aten_plan()
    shape, dims = geo
    n = math.prod(shape)
    if n >= _ATEN_SLICE_BACKWARD_NUMEL and is_cuda_like(g):
        return aten_plan()
    launches = (_pad_launch(In(0), g.dtype, dims, n, 0),) if n else ()
    return Plan((Buffer(tuple(shape), g.dtype),), launches, contiguous=contiguous if n else ())


def _run_backward(op: str, plan_: Plan | None, args: list[Any], unplanned: str) -> Tensor:
    """The slice/select backward ``plan_`` run for ``args``; aten's kernel (a refusal) where
    there is none or where it is aten's (``unplanned`` says which calls)."""
    if plan_ is None or plan_.aten:
        raise _refuse(op, unplanned)
    return _run_plan(plan_, args)


def slice_backward(g: Tensor, input_sizes: list[int], dim: int, start: int, end: int, step: int) -> Tensor:
    """aten::slice_backward, any step: one launch (two for a ``g`` of many strided dims)."""
    return _run_backward("slice_backward", _slice_backward_plan(g, input_sizes, dim, start, end, step),
                         [g, input_sizes, dim, start, end, step],
                         "a gradient of another shape than the slice, or an output this large")


def _select_backward_plan(g: Any, input_sizes: Any, dim: int, index: int) -> Plan | None:
    """aten::select_backward (the gradient of ``x[:, i]``: a pooled first token): ``g`` with the
    selected dim put back, as slice_backward of [index, index + 1)."""
    nd = len(input_sizes)
    if not isinstance(g, Tensor) or not -nd <= dim < nd or g.dim() != nd - 1:
        return None
    dim %= nd
    size = int(input_sizes[dim])
    if not -size <= index < size:
        return None  # aten's error
    index %= size
    return _slice_backward_plan(g.unsqueeze(dim), input_sizes, dim, index, index + 1, 1)


def select_backward(g: Tensor, input_sizes: list[int], dim: int, index: int) -> Tensor:
    """aten::select_backward: one launch."""
    return _run_backward("select_backward", _select_backward_plan(g, input_sizes, dim, index),
                         [g, input_sizes, dim, index],
                         "a gradient of another shape, an index out of range, or an output this large")


def _keyed_value(value: Any, dt: torch.dtype) -> Any:
    """The literal a value-keyed plan bakes in for Scalar ``value`` written into ``dt`` (the
    call key holds the value, so it is checked once per value, as aten checks it per call):
    None where aten raises (overflow, NaN into an integer), for a fractional float into an
    integer dtype, and for a float into float64 (the kernel's fp32 argument would round it)."""
    if not _is_scalar(value) or not scalar_fits(value, dt):
        return None
    if dt == torch.bool or isinstance(value, bool):
        return value
    if dt.is_floating_point:
        return None if dt == torch.float64 and isinstance(value, float) else value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return int(value)


@value_keyed
def _plan_constant_pad_nd(x: Any, pad: Any, value: Any = 0) -> Plan | None:
    """Keyed by the pad value (pads are a few constants: 0, -100 for labels, -inf for
    masks), so an integral float into an integer tensor is planned too."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.layout != torch.strided:
        return None
    ref = _keyed_value(value, x.dtype)
    g = None if ref is None else _pad_geometry(x.shape, x.stride(), pad)
    if g is None or not _pad_layout_ok(x, pad):
        # aten's kernel, decided once per key (which holds the value) instead of by a Python
        # call each time: a value the kernel's argument cannot carry (a float64 pad value) or
        # that aten refuses, a layout aten keeps (channels_last; a strided input's zero or
        # crop-only pad, which aten serves as a clone), more than four dims after merging, or
        # aten's error
        return aten_plan()
    shape, geo = g
    n = math.prod(shape)
    buf = Buffer(tuple(shape), x.dtype, _crop_strides(x, pad))
    return Plan((buf,), (_pad_launch(In(0), x.dtype, geo, n, ref),) if n else ())


def _crop_strides(x: Tensor, pad: Any) -> tuple[int, ...] | None:
    """The strides of aten's result where it is a clone of x cropped (every pad <= 0) and that
    crop is contiguous: the crop's own (preserve_format), which differ from torch.empty's only
    on size-1 dims; None (torch.empty's) otherwise, _pad_layout_ok having checked the rest."""
    if any(p > 0 for p in pad):
        return None
    v = x
    for i in range(len(pad) // 2):
        d = x.dim() - 1 - i
        lo, hi = -pad[2 * i], -pad[2 * i + 1]
        v = v.narrow(d, lo, max(v.shape[d] - lo - hi, 0))
    if v.numel() == 0 or not v.is_contiguous() or v.stride() == tuple(contiguous_strides(v.shape)):
        return None
    return tuple(v.stride())


@value_keyed
def _plan_arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, layout: Any = None,
                 device: Any = None, pin_memory: Any = None) -> Plan | None:
    """arange (all three overloads), on the C++ path: keyed by the values of start, end and
    step (value-keyed scalars), so the plan bakes in its size and kernel arguments."""
    if end is None:
        start, end = 0, start
    if not _strided(layout) or pin_memory:
        return None
    try:
        dtype, size, kargs = _arange_spec(start, end, step, dtype)
    except NotImplementedError:
        return None  # the Python implementation, then aten: its errors
    buf = Buffer((size,), dtype)
    return Plan((buf,), (_arange_launch(dtype, size, kargs, Out(0)),) if size else ())


def _plan_factory(op: str, value: Any, like: bool = False) -> Callable:
    """The planner of zeros/ones/full/scalar_tensor (``value``: 0, 1, or None: the Scalar
    argument, passed as Arg) and of new_zeros/new_ones/new_full (``like``: dtype and device
    default to self's; another device than self's goes to the Python implementation)."""
    def plan(*args: Any, dtype: Any = None, layout: Any = None, device: Any = None,
             pin_memory: Any = None) -> Plan | None:
        args_ = list(args)
        self_ = args_.pop(0) if like else None
        if op == "scalar_tensor":
            size, v = [], args_[0]
        else:
            size = list(args_[0])
            v = args_[1] if value is None else value
        if not _is_scalar(v) or not _strided(layout) or pin_memory or any(d < 0 for d in size):
            return None
        if self_ is not None:
            if not isinstance(self_, Tensor) or self_.dtype not in _REAL or self_.layout != torch.strided:
                return None
            if _elsewhere(self_, device):
                return None
            dt = self_.dtype if dtype is None else dtype
        else:
            dt = dtype if dtype is not None else (
                torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) and value is None
                and op != "scalar_tensor" else torch.get_default_dtype())
        if dt not in _REAL:  # (a value out of dt's range: Plan.fits sends that call, not the key, to aten)
            return None
        ref = value if value is not None else _fill_ref(v, len(args) - 1, dt)
        if ref is None:
            return None
        buf = Buffer(tuple(size), dt)
        if math.prod(size) == 0:
            return Plan((buf,), (), fits=_fill_fits(ref, dt))
        L = _launch("copy", [v], [ref], buf, Out(0), size, _CT[dt], [])
        return None if L is None else Plan((buf,), (L,), fits=_fill_fits(ref, dt))

    return plan


ATEN: dict[str, Callable] = {
    "arange": lambda end, *, dtype=None, layout=None, device=None, pin_memory=None: arange(
        end, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory),
    "arange.start": lambda start, end, *, dtype=None, layout=None, device=None, pin_memory=None: arange(
        start, end, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory),
    "arange.start_step": lambda start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None: arange(
        start, end, step, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory),
    "_to_copy": to_copy, "clone": clone, "copy_": copy_,
    "fill_.Scalar": fill_scalar, "fill_.Tensor": fill_tensor, "zero_": zero_,
    "zeros_like": _like("zeros_like", 0), "ones_like": _like("ones_like", 1), "full_like": _like("full_like", None),
    "cat": cat, "stack": stack, "repeat": repeat,
    "zeros": _factory("zeros", 0), "ones": _factory("ones", 1), "full": _factory("full", None),
    "scalar_tensor": _factory("scalar_tensor", None),
    "new_zeros": _factory("new_zeros", 0, like=True), "new_ones": _factory("new_ones", 1, like=True),
    "new_full": _factory("new_full", None, like=True),
    "triu": _triu, "tril": _tril, "triu_": _triu_, "tril_": _tril_,
    "constant_pad_nd": constant_pad_nd,
}
if backend_device_type() == "cpu":
    # Triton's interpreter writes every kernel argument back with copy_ after a launch (a
    # storage onto itself): routed, each launch would pay two Python calls of copy_.
    del ATEN["copy_"]
PLANNERS: dict[str, Callable] = {
    "_to_copy": _plan_to_copy, "clone": _plan_clone, "repeat": _plan_repeat, "cat": _plan_cat, "stack": _plan_stack,
    "fill_.Scalar": _plan_fill_, "fill_.Tensor": _plan_fill_tensor_, "zero_": _plan_zero_, "copy_": _plan_copy_,
    "arange": _plan_arange, "arange.start": _plan_arange, "arange.start_step": _plan_arange,
    "zeros": _plan_factory("zeros", 0), "ones": _plan_factory("ones", 1), "full": _plan_factory("full", None),
    "scalar_tensor": _plan_factory("scalar_tensor", None),
    "new_zeros": _plan_factory("new_zeros", 0, like=True), "new_ones": _plan_factory("new_ones", 1, like=True),
    "new_full": _plan_factory("new_full", None, like=True),
    "zeros_like": _like_planner(0), "ones_like": _like_planner(1), "full_like": _like_planner(None),
    "triu": lambda x, diagonal=0: _tri_plan(True, x, diagonal),
    "tril": lambda x, diagonal=0: _tri_plan(False, x, diagonal),
    "constant_pad_nd": _plan_constant_pad_nd,
}
#: the gradients of slices and selects (autograd.py lists them with aten's other backward ops)
BACKWARD: dict[str, Callable] = {"slice_backward": slice_backward, "select_backward": select_backward}
BACKWARD_PLANNERS: dict[str, Callable] = {"slice_backward": _slice_backward_plan,
                                          "select_backward": _select_backward_plan}
ATEN = with_aten_fallback(ATEN)
