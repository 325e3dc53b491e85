"""Writes through an index: ``scatter`` (src and value), ``scatter_add``, ``index_add``,
``index_copy``, ``index_put`` (one 1-D index tensor at one dim, the others None: the form of
``x[idx] = v``, ``x[:, idx] += v`` and of the backward of ``x[..., [i], :]``), each with its
in-place variant; and the read through an index, ``x[idx]`` (``index.Tensor``: integer index
tensors at adjacent dims, broadcast together, as ``mask[batch_idx, kv_idx]``).

One kernel walks the iteration space (the index's shape for scatter, the source's for
index_add/index_copy, self's with the indexed dim replaced by the index's for index_put; rank
<= 4), reads the index, and stores (or atomically adds, for the accumulating ops) into the
output at that position with the indexed dim replaced. An index out of range is a device-side
assert on an accelerator, as in aten's kernels; on the CPU the values are checked first
and such calls go to aten, which raises its error. Accumulation is by atomics, in float32, float64,
int32 and int64, and for scatter_add and index_add in bf16 and fp16 on an NVIDIA GPU (each add
rounded to the dtype, as aten's CUDA kernels add them; other dtypes and devices go to aten):
float sums may differ from eager's in the last bits, in an order that varies from run to run,
as aten's CUDA kernels do. The exception
is index_put with accumulate through a short index (at most _SUM_MAX_INDEX entries): one
kernel adds each target's values in the index's order in fp32 and rounds once, in every dtype
(bf16 included) and deterministically. With repeated indices this
can differ from aten's CUDA result in the last bit or two of a 16-bit value (its sorted kernel
rounds some partial sums), never by more than a rounding of the exact sum; without repeats (the
backward of ``x[..., [i], :]``) it is eager's bit for bit.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import DEVICE_ASSERT, cdiv, deterministic, fp32_exact, host_check_allowed, jit, next_pow2, unravel4
from ._fallback import with_aten_fallback
from ._layout import contiguous_strides, flat_stride
from ._plan import Arg, Buffer, In, InItem, Launch, Out, Plan, aten_plan, execute, launch, run, scalar_fits, serves_writes
from .elementwise import _REAL, _is_scalar, _refuse

Tensor = torch.Tensor
_ATOMIC = (torch.float32, torch.float64, torch.int32, torch.int64)
_ATOMIC16 = (torch.bfloat16, torch.float16)
_BLOCK = 512


def _accumulates(x: Tensor) -> bool:
    """Whether the kernel's atomics add into ``x``'s dtype: the 32- and 64-bit ones anywhere;
    bf16 and fp16 on an NVIDIA GPU (Triton's ``atom.add.noftz`` on sm_90, a compare-and-swap
    loop for bf16 before it), each add rounded to the dtype as in aten's CUDA kernels. Triton's
    interpreter and the other backends add no 16-bit values: those calls are aten's."""
    return x.dtype in _ATOMIC or (x.dtype in _ATOMIC16 and x.device.type == "cuda" and torch.version.hip is None)


@triton.jit
def _at_dim(i0, i1, i2, i3, DIM: tl.constexpr):
    """The coordinate along dim DIM of a rank-4 (padded) position."""
    if DIM == 0:
        return i0
    elif DIM == 1:
        return i1
    elif DIM == 2:
        return i2
    else:
        return i3


@triton.jit
def _index_kernel(out, index, src, n, d1, d2, d3, size,
                  is0, is1, is2, is3, ss0, ss1, ss2, ss3, os0, os1, os2, os3, osd, alpha,
                  DIM: tl.constexpr, ADD: tl.constexpr, SRC_SCALAR: tl.constexpr, INDEX_1D: tl.constexpr,
                  WRAP: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """CHECK: assert every index is in range on the device (compiled in by DEVICE_ASSERT), as aten's
    kernels do; without it (CPU tensors, checked on the host first) such a position is not written."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    pd = _at_dim(i0, i1, i2, i3, DIM)
    if INDEX_1D:
        idx = tl.load(index + pd * is0, mask=mask, other=0).to(tl.int64)
    else:
        idx = tl.load(index + (i0 * is0 + i1 * is1 + i2 * is2 + i3 * is3), mask=mask, other=0).to(tl.int64)
    if WRAP:
        idx = tl.where(idx < 0, idx + size, idx)
    ok = mask & (idx >= 0) & (idx < size)
    if CHECK:
        tl.device_assert(ok | ~mask, "tritonjit scatter/index_put: index out of range")
    tgt = i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3 + idx * osd  # os[DIM] is 0: the index picks it
    if SRC_SCALAR:
        if out.dtype.element_ty == tl.int1:  # a bool self: the value's truth (no subtraction of bools)
            v = tl.zeros([BLOCK], tl.int1) | (src != 0)
        else:
            v = src - tl.zeros([BLOCK], out.dtype.element_ty)  # minus: -0.0 + 0 would be +0.0
    else:
        v = tl.load(src + (i0 * ss0 + i1 * ss1 + i2 * ss2 + i3 * ss3), mask=ok)
    if ADD:
        xt: tl.constexpr = out.dtype.element_ty
        if xt == tl.bfloat16 or xt == tl.float16:  # aten's: alpha in the dtype, the product rounded once
            a = (tl.zeros([BLOCK], tl.float32) + alpha).to(xt).to(tl.float32)
            tl.atomic_add(out + tgt, (v.to(tl.float32) * a).to(xt), mask=ok)
        else:
            tl.atomic_add(out + tgt, (v * alpha).to(xt), mask=ok)
    else:
        tl.store(out + tgt, v.to(out.dtype.element_ty), mask=ok)


_index = jit(_index_kernel)


@triton.jit
def _put_sum_kernel(out, index, src, n, d1, d2, d3, size, L, si, ss0, ss1, ss2, ss3, ssd, os0, os1, os2, os3, osd,
                    DIM: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """out[.., index[j], ..] += src[.., j, ..] for every j of a short 1-D index, duplicates summed
    in j's order in fp32 (fp64, int64) and rounded once, each target written once: by the element
    at its index's first occurrence, which adds up all of them. No atomics (any dtype) and one
    order (deterministic). The work is O(L) a element: for short indices only. ss[DIM], os[DIM]
    are 0."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    pd = _at_dim(i0, i1, i2, i3, DIM)
    t = tl.load(index + pd * si, mask=mask, other=0).to(tl.int64)
    t = tl.where(t < 0, t + size, t)
    ok = mask & (t >= 0) & (t < size)
    if CHECK:
        tl.device_assert(ok | ~mask, "tritonjit scatter/index_put: index out of range")
    tgt = i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3 + t * osd
    sbase = i0 * ss0 + i1 * ss1 + i2 * ss2 + i3 * ss3
    xt: tl.constexpr = out.dtype.element_ty
    AT: tl.constexpr = (tl.float64 if xt == tl.float64 else tl.float32) if xt.is_floating() else tl.int64
    acc = tl.load(out + tgt, mask=ok, other=0).to(AT)
    first = ok
    for j in range(0, L):
        u = tl.load(index + j * si).to(tl.int64)
        u = tl.where(u < 0, u + size, u)
        hit = ok & (u == t)
        first = first & ~(hit & (j < pd))
        acc += tl.load(src + sbase + j * ssd, mask=hit, other=0).to(AT)
    tl.store(out + tgt, acc.to(xt), mask=first)


_put_sum = jit(_put_sum_kernel)
_SUM_MAX_INDEX = 16  # an accumulating index_put with at most this many indices: _put_sum (exact, ordered)


def _pad4(shape: list[int], strides: list[int]) -> tuple[list[int], list[int]]:
    pad = 4 - len(shape)
    return [1] * pad + list(shape), [0] * pad + list(strides)


def _write_launch(out: Tensor, dim: int, index: Tensor, src: Any, space: list[int], index_1d: bool,
                  add: bool, alpha: Any, wrap: bool, refs: tuple[Any, Any, Any], check: bool) -> Launch:
    """The launch that writes ``src`` (a tensor shaped like ``space``, or a scalar) into ``out``
    through ``index``, its tensors passed as ``refs`` (the tensors themselves, or a plan's
    references to them); ``n`` of ``space`` is not 0."""
    n = math.prod(space)
    pad = 4 - len(space)
    dims, _ = _pad4(space, [0] * len(space))
    if index_1d:
        ist = [index.stride(0), 0, 0, 0]
    else:
        _, ist = _pad4(list(index.shape), list(index.stride()))
    scalar = not isinstance(src, Tensor)
    sst = [0, 0, 0, 0] if scalar else _pad4(list(src.shape), list(src.stride()))[1]
    _, ost = _pad4(list(out.shape), list(out.stride()))
    osd = ost[pad + dim]
    ost[pad + dim] = 0
    return launch(_index, (cdiv(n, _BLOCK),), *refs, n, dims[1], dims[2], dims[3], out.shape[dim], *ist, *sst, *ost,
                  osd, alpha, DIM=pad + dim, ADD=add, SRC_SCALAR=scalar, INDEX_1D=index_1d, WRAP=wrap, CHECK=check,
                  BLOCK=_BLOCK, **(DEVICE_ASSERT if check else {}))


def _launch(op: str, out: Tensor, dim: int, index: Tensor, src: Any, space: list[int], index_1d: bool, add: bool,
            alpha: Any = 1, wrap: bool = False) -> Tensor:
    """Write ``src`` (a tensor shaped like ``space``, or a scalar) into ``out`` through ``index``."""
    nd = len(space)
    if nd > 4 or out.dim() != nd:
        raise _refuse(op, "a rank above 4")
    if math.prod(space) == 0:
        return out
    size = out.shape[dim]
    check = not host_check_allowed(index)
    if not check and index.numel():
        lo = -size if wrap else 0
        if bool((index < lo).any()) or bool((index >= size).any()):
            raise _refuse(op, "an index out of range")  # aten's error
    if add and not out.dtype.is_floating_point and isinstance(alpha, float):
        raise _refuse(op, "a float alpha for integers")
    execute(_write_launch(out, dim, index, src, space, index_1d, add, alpha, wrap, (out, index, src), check))
    return out


def _check(op: str, x: Any, index: Any, add: bool) -> None:
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.layout != torch.strided:
        raise _refuse(op, "self")
    if not isinstance(index, Tensor) or index.dtype not in (torch.int64, torch.int32) or index.device != x.device:
        raise _refuse(op, "an index that is not an integer tensor on self's device")
    if add and not _accumulates(x):
        raise _refuse(op, f"accumulating into {x.dtype} on {x.device.type}")
    if torch._debug_has_internal_overlap(x) == 1:
        raise _refuse(op, "a self with internal overlap")


def _dim(op: str, x: Tensor, dim: int) -> int:
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd or x.dim() == 0:
        raise _refuse(op, f"dim {dim} for a tensor of rank {x.dim()}")
    return dim % nd


def _scatter_dim(op: str, x: Any, dim: int, index: Any, src: Any, add: bool) -> int:
    """The dim of a scatter call that this module's kernel takes (self, index and src checked as
    aten does, src a tensor or a Scalar); raises _refuse for any other call. A Scalar's range
    for self's dtype is checked apart (per call on the C++ path: Plan.fits)."""
    _check(op, x, index, add)
    d = _dim(op, x, dim)
    if isinstance(src, Tensor):
        if src.dtype != x.dtype or src.device != x.device or src.dim() != x.dim():
            raise _refuse(op, "src of another dtype, device or rank")
        if any(index.shape[k] > src.shape[k] for k in range(index.dim())):
            raise _refuse(op, "an index larger than src")
    elif not _is_scalar(src):
        raise _refuse(op, "value")
    if index.dim() != x.dim() or any(index.shape[k] > x.shape[k] for k in range(x.dim()) if k != d):
        raise _refuse(op, "an index of another rank or larger than self")
    if x.dim() > 4:
        raise _refuse(op, "a rank above 4")
    return d


def _scatter(op: str, add: bool, inplace: bool) -> Callable:
    def fn(x: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
        d = _scatter_dim(op, x, dim, index, src, add)
        if not isinstance(src, Tensor) and not scalar_fits(src, x.dtype):
            raise _refuse(op, f"value {src!r} for {x.dtype}")  # aten's overflow error
        if _float_value_inexact(x, src):
            raise _refuse(op, f"a float value fp32 does not hold for {x.dtype} (the kernel reads it in fp32)")
        if inplace and not serves_writes([x, index, src], 0, exclusive=True):
            raise _refuse(op, "an index or src sharing self's memory")  # aten's overlap error
        out = x if inplace else x.clone()
        return _launch(op, out, d, index, src, list(index.shape), False, add)

    return fn


def _float_value_inexact(x: Tensor, src: Any) -> bool:
    """Whether a float Scalar written into a 64-bit self would lose bits in the kernel, which
    reads a float Scalar in fp32 (0.1 into float64; 2**40 + 1.0 into int64)."""
    return isinstance(src, float) and x.dtype in (torch.float64, torch.int64) and not fp32_exact(src)


def _plan_scatter_(add: bool) -> Callable[..., Plan | None]:
    def plan(x: Any, dim: int, index: Any, src: Any) -> Plan | None:
        """``x.scatter_(dim, index, src)`` (``scatter_add_`` with ``add``), src a tensor or a Scalar
        (an MoE router's one-hot ``mask.scatter_(1, topk_idx, 1)``), on a device: one launch
        over the index's shape writing into x in its strides, the index range asserted by the
        kernel (no wrap: aten's scatter takes no negative index). An exclusive in-place plan:
        a call whose index or src shares x's memory goes to the implementation (aten's overlap
        error); a Scalar is checked against x's dtype per call (Plan.fits). Deterministic mode,
        and a call the kernel does not take (an accumulation in a 16-bit dtype anywhere but on
        an NVIDIA GPU: _accumulates; src of another dtype; a rank above 4), are aten's: each is
        a property of the call key."""
        op = "scatter_add_" if add else "scatter_"
        try:
            d = _scatter_dim(op, x, dim, index, src, add)
        except NotImplementedError:
            return aten_plan()
        if deterministic():
            return aten_plan()
        if host_check_allowed(index):
            return None  # CPU tensors: the implementation checks the index on the host
        scalar = not isinstance(src, Tensor)
        if isinstance(src, float) and x.dtype == torch.int64:
            return None  # the implementation checks the value (_float_value_inexact); float64's
            # float Scalars never reach here (the registry's _plan_float64_scalars)
        launches: tuple[Launch, ...] = ()
        if index.numel():
            refs = (In(0), In(2), Arg(3) if scalar else In(3))
            launches = (_write_launch(x, d, index, src, list(index.shape), False, add, 1, False, refs, True),)
        return Plan((), launches, (In(0),), writes=(0,), exclusive=True, fits=((3, x.dtype),) if scalar else ())

    return plan


plan_scatter_ = _plan_scatter_(False)
plan_scatter_add_ = _plan_scatter_(True)


def _index_add(op: str, inplace: bool, copy: bool = False) -> Callable:
    def fn(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
        _check(op, x, index, not copy)
        d = _dim(op, x, dim)
        _check_source(op, x, d, index, source)
        if inplace and not serves_writes([x, index, source], 0, exclusive=True):
            raise _refuse(op, "an index or source sharing self's memory")  # aten's overlap error
        out = x if inplace else x.clone()
        return _launch(op, out, d, index.reshape(-1), source, list(source.shape), True, not copy, alpha)

    return fn


def _check_source(op: str, x: Tensor, d: int, index: Tensor, source: Any) -> None:
    """Raises _refuse unless ``source`` is a tensor of x's dtype and device shaped as ``x`` with
    dim ``d`` of the index's length (aten's rules for index_add and index_copy) and the index
    has at most one dim."""
    if not isinstance(source, Tensor) or source.dtype != x.dtype or source.device != x.device:
        raise _refuse(op, "source of another dtype or device")
    if index.dim() > 1 or source.dim() != x.dim() or source.shape[d] != index.numel() or any(
            source.shape[k] != x.shape[k] for k in range(x.dim()) if k != d):
        raise _refuse(op, "shapes")


def plan_index_add_(x: Any, dim: int, index: Any, source: Any, alpha: Any = 1) -> Plan | None:
    """``x.index_add_(dim, index, source, alpha=alpha)`` on a device (an MoE layer's combine,
    ``out.index_add_(0, token_ids, expert_out)``, once per expert): one launch over the source's
    shape adding into x in its strides by atomics (bf16 and fp16 on an NVIDIA GPU included, as
    aten's kernel adds them), the index range asserted by the kernel, alpha passed per call (its
    range checked per call: Plan.fits). An exclusive in-place plan. Deterministic mode and the
    calls the kernel does not take (an accumulation in a dtype without atomics here, a rank
    above 4) are aten's; a 0-dim index, a float alpha for an integer self and CPU tensors go to
    the implementation."""
    op = "index_add_"
    try:
        _check(op, x, index, True)
        d = _dim(op, x, dim)
        _check_source(op, x, d, index, source)
        if x.dim() > 4:
            raise _refuse(op, "a rank above 4")
    except NotImplementedError:
        return aten_plan()
    if deterministic():
        return aten_plan()
    if host_check_allowed(index) or index.dim() != 1 or not _is_scalar(alpha) or (
            isinstance(alpha, float) and not x.dtype.is_floating_point):
        return None
    launches: tuple[Launch, ...] = ()
    if source.numel():
        launches = (_write_launch(x, d, index, source, list(source.shape), True, True, Arg(4), False,
                                  (In(0), In(2), In(3)), True),)
    return Plan((), launches, (In(0),), writes=(0,), exclusive=True, fits=((4, x.dtype),))


def _put_space(op: str, x: Any, indices: Any, values: Any, accumulate: bool
               ) -> tuple[int, Tensor, list[int], Tensor]:
    """(k, index, the iteration space, values expanded to it) of ``x[(:,) * k + (index,)] = values``
    (``+=`` with accumulate): one 1-D integer index at dim k, the other indices None or left out
    (``x[idx]``, ``x[:, idx]``, ``x[..., [i], :]``, whose backward is this with accumulate);
    raises _refuse for any other form."""
    idx_list = list(indices)
    pos = [j for j, t in enumerate(idx_list) if t is not None]
    if len(pos) != 1 or not isinstance(x, Tensor) or len(idx_list) > x.dim():
        raise _refuse(op, "indices other than one index tensor (the others None)")
    k = pos[0]
    index = idx_list[k]
    _check(op, x, index, False)
    if accumulate and (x.dtype == torch.bool or (x.dtype not in _ATOMIC and index.dim() == 1
                                                 and index.shape[0] > _SUM_MAX_INDEX)):
        raise _refuse(op, f"accumulating into {x.dtype} through {index.numel()} indices")
    if index.dim() != 1 or x.dim() > 4:
        raise _refuse(op, "an index of rank other than 1, or a self of rank above 4")
    if not isinstance(values, Tensor) or values.device != x.device or values.dtype != x.dtype:
        raise _refuse(op, "values of another dtype or device")
    space = [*x.shape[:k], index.shape[0], *x.shape[k + 1:]]
    try:
        v = values.expand(space)
    except RuntimeError as e:
        raise _refuse(op, "values that do not broadcast") from e
    return k, index, space, v


def _ordered(accumulate: bool, index: Tensor) -> bool:
    """Whether the write is _put_sum's (an accumulation through a short index: fp32 sums rounded
    once, deterministic); the others are _index's, by atomics or stores in a varying order."""
    return accumulate and index.shape[0] <= _SUM_MAX_INDEX


def _put_launch(x: Tensor, k: int, index: Tensor, v: Tensor, space: list[int], accumulate: bool,
                refs: tuple[Any, Any, Any], check: bool) -> Launch:
    """The launch of ``x[(:,) * k + (index,)] = v`` (``+=`` with accumulate) into x in its strides."""
    if not _ordered(accumulate, index):
        return _write_launch(x, k, index, v, space, True, accumulate, 1, True, refs, check)
    n = math.prod(space)
    pad = 4 - len(space)
    dims, _ = _pad4(space, [0] * len(space))
    _, sst = _pad4(list(v.shape), list(v.stride()))
    _, ost = _pad4(list(x.shape), list(x.stride()))
    ssd, osd = sst[pad + k], ost[pad + k]
    sst[pad + k] = ost[pad + k] = 0
    return launch(_put_sum, (cdiv(n, _BLOCK),), *refs, n, dims[1], dims[2], dims[3], x.shape[k], index.shape[0],
                  index.stride(0), *sst, ssd, *ost, osd, DIM=pad + k, CHECK=check, BLOCK=_BLOCK,
                  **(DEVICE_ASSERT if check else {}))


def _index_put(op: str, inplace: bool) -> Callable:
    def fn(x: Tensor, indices: list[Tensor | None], values: Tensor, accumulate: bool = False,
           unsafe: bool = False) -> Tensor:
        k, index, space, v = _put_space(op, x, indices, values, accumulate)
        if deterministic() and not _ordered(accumulate, index):
            raise _refuse(op, "torch.use_deterministic_algorithms(True) (aten's deterministic algorithm)")
        if inplace and not serves_writes([x, [index], values], 0, exclusive=True):
            raise _refuse(op, "an index or values sharing self's memory")  # aten's overlap rules
        out = x if inplace else x.clone()
        if not math.prod(space):
            return out
        size = x.shape[k]
        check = not host_check_allowed(index)
        if not check and index.numel() and (bool((index < -size).any()) or bool((index >= size).any())):
            raise _refuse(op, "an index out of range")  # aten's error
        execute(_put_launch(out, k, index, v, space, accumulate, (out, index, v), check))
        return out

    return fn


def plan_index_put_(x: Any, indices: Any, values: Any, accumulate: bool = False, unsafe: bool = False) -> Plan | None:
    """``x[idx] = values`` (``x[idx] += values`` with accumulate) on a device, one 1-D integer
    index at one dim (index_put_, and _index_put_impl_, which autograd's backward of ``x[idx]``
    calls): written into x in its own strides, the index range asserted by the kernel. An
    exclusive in-place plan: a call whose index or values share x's memory goes to the
    implementation (aten's overlap rules). Deterministic mode: _put_sum's ordered sums (a short
    index), else aten's kernel. A call no kernel here takes (a 16-bit accumulation through more
    than _SUM_MAX_INDEX indices: an MoE layer's token gather, backward, in bf16; several index
    tensors; values of another dtype) is aten's: each reason is a property of the call key, so
    the plan decides once what the Python implementation refused on every call."""
    try:
        k, index, space, v = _put_space("index_put_", x, indices, values, accumulate)
    except NotImplementedError:
        return aten_plan()
    if deterministic() and not _ordered(accumulate, index):
        return aten_plan()
    if host_check_allowed(index):
        return None
    launches: tuple[Launch, ...] = ()
    if math.prod(space):
        launches = (_put_launch(x, k, index, v, space, accumulate, (In(0), InItem(1, k), In(2)), True),)
    return Plan((), launches, (In(0),), writes=(0,), exclusive=True)


@triton.jit
def _take_kernel(x, index, out, n, L, Q, size, sxp, sxk, sxq, si, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """out[p, l, q] = x[p, index[l], q], element by element (a short q: few elements a row).
    Negative indices wrap, as aten's indexing does; CHECK: assert the index is in range on the
    device (compiled in by DEVICE_ASSERT), else such a position reads nothing."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    q = offs % Q
    t = offs // Q
    lpos = t % L
    p = t // L
    idx = tl.load(index + lpos * si, mask=mask, other=0).to(tl.int64)
    idx = tl.where(idx < 0, idx + size, idx)
    ok = mask & (idx >= 0) & (idx < size)
    if CHECK:
        tl.device_assert(ok | ~mask, "tritonjit index: index out of range")
    v = tl.load(x + p * sxp + idx * sxk + q * sxq, mask=ok)
    tl.store(out + offs, v, mask=mask)


@triton.jit
def _take_rows_kernel(x, index, out, L, Q, size, sxp, sxk, sxq, si, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """out[p, l, :] = x[p, index[l], :], a row of Q elements per program row (grid (P * L,
    cdiv(Q, BLOCK))): one index read a row, the row's columns loaded side by side."""
    row = tl.program_id(0).to(tl.int64)
    p = row // L
    idx = tl.load(index + (row % L) * si).to(tl.int64)
    idx = tl.where(idx < 0, idx + size, idx)
    if CHECK:
        tl.device_assert((idx >= 0) & (idx < size), "tritonjit index: index out of range")
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = (cols < Q) & (idx >= 0) & (idx < size)
    v = tl.load(x + p * sxp + idx * sxk + cols * sxq, mask=m)
    tl.store(out + row * Q + cols, v, mask=cols < Q)


_take = jit(_take_kernel)
_take_rows = jit(_take_rows_kernel)
_ROWS_FROM = 64  # a row of at least this many elements: one program row per index (_take_rows)


def _take_plan(x: Tensor, k: int, index: Tensor, xref: Any, iref: Any, check: bool) -> Plan:
    """The plan of ``x[(slice(None),) * k + (index,)]``: x viewed (P, size, Q) in its own strides
    where they nest (else made contiguous first), the index read flat."""
    pre, post = list(x.shape[:k]), list(x.shape[k + 1:])
    size = x.shape[k]
    P, Q, L = math.prod(pre), math.prod(post), index.numel()
    out = (Buffer((*pre, *index.shape, *post), x.dtype),)
    if P * L * Q == 0:
        return Plan(out, ())
    sp, sq = flat_stride(pre, x.stride()[:k]), flat_stride(post, x.stride()[k + 1:])
    contiguous: tuple[int, ...] = ()
    if sp is None or sq is None:
        contiguous, sp, sq = (0,), Q * size, 1
    sk = x.stride(k) if not contiguous else Q
    si = flat_stride(list(index.shape), list(index.stride()))
    assert si is not None, "an index that is not flat in memory (_one_index refuses it)"
    opts = DEVICE_ASSERT if check else {}
    if Q >= _ROWS_FROM:
        block = min(next_pow2(Q), 1024)
        L1 = launch(_take_rows, (P * L, cdiv(Q, block)), xref, iref, Out(0), L, Q, size, sp, sk, sq, si, CHECK=check,
                    BLOCK=block, num_warps=4 if block >= 512 else 1, **opts)
    else:
        n = P * L * Q
        L1 = launch(_take, (cdiv(n, _BLOCK),), xref, iref, Out(0), n, L, Q, size, sp, sk, sq, si, CHECK=check,
                    BLOCK=_BLOCK, **opts)
    return Plan(out, (L1,), contiguous=contiguous)


@triton.jit
def _index_term(index, l0, l1, l2, l3, s0, s1, s2, s3, size, mask):
    """One index tensor's value at the broadcast position (l0..l3) (stride 0 where it is
    broadcast), wrapped as aten wraps a negative index, and whether it lies in range."""
    i = tl.load(index + l0 * s0 + l1 * s1 + l2 * s2 + l3 * s3, mask=mask, other=0).to(tl.int64)
    i = tl.where(i < 0, i + size, i)
    return i, (i >= 0) & (i < size)


@triton.jit
def _take_n_offset(lpos, mask, b1, b2, b3,
                   p0, z0, k0, s00, s01, s02, s03, p1, z1, k1, s10, s11, s12, s13,
                   p2, z2, k2, s20, s21, s22, s23, p3, z3, k3, s30, s31, s32, s33, NIDX: tl.constexpr):
    """x's offset for broadcast position ``lpos`` of NIDX index tensors (pointer, x's size and
    stride at its dim, 4 strides over the broadcast shape (.., b1, b2, b3)), and whether every
    index lies in range."""
    l0, l1, l2, l3 = unravel4(lpos, b1, b2, b3)
    i, ok = _index_term(p0, l0, l1, l2, l3, s00, s01, s02, s03, z0, mask)
    off = i * k0
    if NIDX > 1:
        i, o = _index_term(p1, l0, l1, l2, l3, s10, s11, s12, s13, z1, mask)
        off += i * k1
        ok = ok & o
    if NIDX > 2:
        i, o = _index_term(p2, l0, l1, l2, l3, s20, s21, s22, s23, z2, mask)
        off += i * k2
        ok = ok & o
    if NIDX > 3:
        i, o = _index_term(p3, l0, l1, l2, l3, s30, s31, s32, s33, z3, mask)
        off += i * k3
        ok = ok & o
    return off, ok


@triton.jit
def _take_n_kernel(x, out, n, L, Q, sxp, sxq, b1, b2, b3,
                   p0, z0, k0, s00, s01, s02, s03, p1, z1, k1, s10, s11, s12, s13,
                   p2, z2, k2, s20, s21, s22, s23, p3, z3, k3, s30, s31, s32, s33,
                   NIDX: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """out[p, l, q] = x[p, index_0[l], .., index_{NIDX-1}[l], q] element by element, the index
    tensors broadcast to one shape of L positions (``mask[batch_idx, kv_idx]``)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    q = offs % Q
    t = offs // Q
    off, ok = _take_n_offset(t % L, mask, b1, b2, b3, p0, z0, k0, s00, s01, s02, s03, p1, z1, k1, s10, s11, s12, s13,
                             p2, z2, k2, s20, s21, s22, s23, p3, z3, k3, s30, s31, s32, s33, NIDX)
    if CHECK:
        tl.device_assert(ok | ~mask, "tritonjit index: index out of range")
    v = tl.load(x + (t // L) * sxp + off + q * sxq, mask=mask & ok)
    tl.store(out + offs, v, mask=mask)


@triton.jit
def _take_n_rows_kernel(x, out, L, Q, sxp, sxq, b1, b2, b3,
                        p0, z0, k0, s00, s01, s02, s03, p1, z1, k1, s10, s11, s12, s13,
                        p2, z2, k2, s20, s21, s22, s23, p3, z3, k3, s30, s31, s32, s33,
                        NIDX: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    """_take_n_kernel a row of Q elements per program row (grid (P * L, cdiv(Q, BLOCK))): the
    indices read once a row (``hidden[batch_idx, last_idx]`` with hidden's rows of H)."""
    row = tl.program_id(0).to(tl.int64)
    off, ok = _take_n_offset(row % L, row >= 0, b1, b2, b3, p0, z0, k0, s00, s01, s02, s03, p1, z1, k1, s10, s11,
                             s12, s13, p2, z2, k2, s20, s21, s22, s23, p3, z3, k3, s30, s31, s32, s33, NIDX)
    if CHECK:
        tl.device_assert(ok, "tritonjit index: index out of range")
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + (row // L) * sxp + off + cols * sxq, mask=(cols < Q) & ok)
    tl.store(out + row * Q + cols, v, mask=cols < Q)


_take_n = jit(_take_n_kernel)
_take_n_rows = jit(_take_n_rows_kernel)
_MAX_INDICES = 4  # index tensors a _take_n launch reads (their broadcast shape: rank <= 4)


def _take_n_plan(x: Tensor, k: int, indices: list[Tensor], xref: Any, irefs: list[Any], check: bool) -> Plan:
    """The plan of ``x[(slice(None),) * k + tuple(indices)]``, adjacent index tensors that
    broadcast to one shape B (rank <= 4): out (pre, B, post), x viewed (P, .., Q) in its own
    strides where pre and post nest (else made contiguous first)."""
    m = len(indices)
    B = list(torch.broadcast_shapes(*(t.shape for t in indices)))
    pre, post = list(x.shape[:k]), list(x.shape[k + m:])
    P, Q, L = math.prod(pre), math.prod(post), math.prod(B)
    out = (Buffer((*pre, *B, *post), x.dtype),)
    if P * L * Q == 0:
        return Plan(out, ())
    xs = list(x.stride())
    sp, sq = flat_stride(pre, xs[:k]), flat_stride(post, xs[k + m:])
    contiguous: tuple[int, ...] = ()
    if sp is None or sq is None:
        contiguous, xs = (0,), contiguous_strides(x.shape)
        sp, sq = flat_stride(pre, xs[:k]), flat_stride(post, xs[k + m:])
    Bp = [1] * (4 - len(B)) + B
    args: list[Any] = []
    for j, (t, ref) in enumerate(zip(indices, irefs)):
        st = [0] * (4 - len(B)) + list(t.expand(B).stride())
        st = [s if n > 1 else 0 for s, n in zip(st, Bp)]  # a size-1 dim's stride never counts
        args += [ref, x.shape[k + j], xs[k + j], *st]
    args += [irefs[0], 1, 0, 0, 0, 0, 0] * (_MAX_INDICES - m)  # the unused slots (NIDX skips them)
    opts = DEVICE_ASSERT if check else {}
    if Q >= _ROWS_FROM:
        block = min(next_pow2(Q), 1024)
        L1 = launch(_take_n_rows, (P * L, cdiv(Q, block)), xref, Out(0), L, Q, sp, sq, *Bp[1:], *args, NIDX=m,
                    CHECK=check, BLOCK=block, num_warps=4 if block >= 512 else 1, **opts)
    else:
        n = P * L * Q
        L1 = launch(_take_n, (cdiv(n, _BLOCK),), xref, Out(0), n, L, Q, sp, sq, *Bp[1:], *args, NIDX=m, CHECK=check,
                    BLOCK=_BLOCK, **opts)
    return Plan(out, (L1,), contiguous=contiguous)


def _adjacent_indices(x: Any, indices: Any) -> tuple[int, list[Tensor]] | None:
    """(k, index tensors) where ``indices`` holds 1 to 4 integer index tensors on x's device at
    adjacent dims from k (the others None), broadcasting to a shape of rank <= 4: the form of
    ``mask[batch_idx, kv_idx]`` and ``logits[arange, last]``; None for any other (boolean masks,
    index tensors with a None between them: aten moves their dims first)."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.dim() == 0 or x.layout != torch.strided:
        return None
    idx = list(indices)
    pos = [k for k, t in enumerate(idx) if t is not None]
    if not pos or len(pos) > _MAX_INDICES or len(idx) > x.dim() or pos != list(range(pos[0], pos[0] + len(pos))):
        return None
    ts = [idx[k] for k in pos]
    if any(not isinstance(t, Tensor) or t.dtype not in (torch.int64, torch.int32) or t.device != x.device
           for t in ts):
        return None
    try:
        if len(torch.broadcast_shapes(*(t.shape for t in ts))) > 4:
            return None
    except RuntimeError:  # shapes that do not broadcast: aten's error
        return None
    return pos[0], ts


def _one_index(x: Any, indices: Any) -> tuple[int, Tensor] | None:
    """(k, index) where ``indices`` is one integer index tensor on x's device at dim k (the
    others None): the form of ``x[idx]`` and ``x[:, idx]``; None for any other."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL or x.dim() == 0 or x.layout != torch.strided:
        return None
    idx = list(indices)
    pos = [k for k, t in enumerate(idx) if t is not None]
    if len(pos) != 1 or len(idx) > x.dim():
        return None
    k = pos[0]
    index = idx[k]
    if (not isinstance(index, Tensor) or index.dtype not in (torch.int64, torch.int32) or index.device != x.device
            or flat_stride(list(index.shape), list(index.stride())) is None):
        return None
    return k, index


def plan_index_tensor(x: Any, indices: Any) -> Plan | None:
    """aten::index.Tensor's plan on a device: one integer index tensor, range-checked by the
    kernel (the C++ key describes the Tensor?[] list: None or a tensor's words per item)."""
    one = _one_index(x, indices)
    if one is not None:
        if host_check_allowed(one[1]):
            return None
        k, index = one
        return _take_plan(x, k, index, In(0), InItem(1, k), True)
    several = _adjacent_indices(x, indices)
    if several is None:
        # what the key fixes (a mask's dtype, a None between index tensors, ranks, devices):
        # every call of it goes straight to aten's kernel, with no Python refusal on the way
        return aten_plan() if isinstance(x, Tensor) and not host_check_allowed(x) else None
    if host_check_allowed(several[1][0]):
        return None
    k, ts = several
    return _take_n_plan(x, k, ts, In(0), [InItem(1, k + j) for j in range(len(ts))], True)


def index_tensor(x: Tensor, indices: list[Tensor | None]) -> Tensor:
    """aten::index.Tensor with integer index tensors at adjacent dims: ``x[:, idx]``,
    ``mask[batch_idx, kv_idx]`` (up to 4, broadcast together to a rank of at most 4). Boolean
    masks (their result size needs a device sync) and index tensors with a None between them
    go to aten."""
    one = _one_index(x, indices)
    several = None if one is not None else _adjacent_indices(x, indices)
    if one is None and several is None:
        raise _refuse("index", "indices other than integer index tensors on self's device at adjacent dims")
    k, ts = (one[0], [one[1]]) if one is not None else several  # type: ignore[misc]
    check = not host_check_allowed(ts[0])
    for j, t in enumerate(ts):
        size = x.shape[k + j]
        if not check and t.numel() and bool(torch.any((t < -size) | (t >= size))):
            raise _refuse("index", "an index out of range")  # aten's error
    if one is not None:
        return run(_take_plan(x, k, ts[0], In(0), InItem(1, k), check), [x, list(indices)])
    return run(_take_n_plan(x, k, ts, In(0), [InItem(1, k + j) for j in range(len(ts))], check), [x, list(indices)])


PLANNERS: dict[str, Callable] = {"index.Tensor": plan_index_tensor, "index_put_": plan_index_put_,
                                 "_index_put_impl_": plan_index_put_, "scatter_.src": plan_scatter_,
                                 "scatter_.value": plan_scatter_, "scatter_add_": plan_scatter_add_,
                                 "index_add_": plan_index_add_}


ATEN: dict[str, Callable] = {
    "index.Tensor": index_tensor,
    "scatter.src": _scatter("scatter", False, False), "scatter.value": _scatter("scatter", False, False),
    "scatter_.src": _scatter("scatter_", False, True), "scatter_.value": _scatter("scatter_", False, True),
    "scatter_add": _scatter("scatter_add", True, False), "scatter_add_": _scatter("scatter_add_", True, True),
    "index_add": _index_add("index_add", False), "index_add_": _index_add("index_add_", True),
    "index_copy": _index_add("index_copy", False, copy=True), "index_copy_": _index_add("index_copy_", True, copy=True),
    "index_put": _index_put("index_put", False), "index_put_": _index_put("index_put_", True),
    "_index_put_impl_": _index_put("_index_put_impl_", True),
}


def _unless_deterministic(op: str, fn: Callable) -> Callable:
    """``fn`` refusing every call in deterministic mode (aten's kernel serves it): its writes sum
    by atomics or let the last of several writers to one place win, in an order that varies."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if deterministic():
            raise _refuse(op, "torch.use_deterministic_algorithms(True) (aten's deterministic algorithm)")
        return fn(*args, **kwargs)

    return call


# (index_put and its in-place forms decide themselves: a short accumulating index is summed in order)
ATEN = {n: f if n == "index.Tensor" or "index_put" in n else _unless_deterministic(n, f) for n, f in ATEN.items()}
ATEN = with_aten_fallback(ATEN)
