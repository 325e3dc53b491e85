"""Reductions: sum, mean, amax, amin, argmax, argmin over all dims or any list of dims.

Every problem is mapped onto one kernel over a contiguous (O, R, K) view: O and K
are the kept dims before and after the reduced block R. A dense input in another order
(channels_last, a transposed matrix) is read in place in its memory order where the
reduced dims are one block there; a strided view reduced over its last dims (an attention
head's [B, H, L, D] view) is read in place through its rows' layout; other layouts are
copied first, or on a device left to aten's one strided kernel. A tile is [BLOCK_K kept
positions, BLOCK_R reduced elements]; stride-1 specialization tells the compiler
which axis is contiguous, so the same kernel serves the last-dim case (K := rows)
and the middle-dim case (K contiguous). Where the kept dims give few programs, a column sum
of a few row tiles narrows its K tiles for more programs in one launch; a longer R (a large
full reduction, a column sum of a tall matrix) is split over programs in a first launch and
finished by a second one.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, INT_DTYPES, cdiv, check_out, check_same_device, is_cuda_like, jit, next_pow2, normalize_dims
from ._layout import row_offset, rows_layout
from ._plan import Buffer, In, Launch, Out, Plan, Tmp, aten_plan, execute, launch
from .elementwise import _launch as _ew_launch

Tensor = torch.Tensor


@triton.jit
def _reduce_kernel(
    x, out, idx_in, idx_out, K, R, CHUNK, sO, sK, sR, S1, S2, T1, T2, divisor,
    OP: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
    HAS_IDX_IN: tl.constexpr, FINAL: tl.constexpr, EVEN: tl.constexpr = False, ONE_TILE: tl.constexpr = False,
):
    """OP in sum/mean/amax/amin/argmax/argmin/any/all. Writes out[(o*nsplit + z)*K + k].

    EVEN: the tiles cover K and R exactly in one split, so loads need no mask (wide,
    unpredicated loads: what a bandwidth-bound row reduction needs). The input is
    read once, so its loads are marked evict_first: on an H200 that took the
    last-dim sum of 32768x4096 bf16 from 91% to 97% of the copy bandwidth.
    ONE_TILE: one BLOCK_R tile covers all of R (one split): the loop gets constant
    bounds and folds away. Kept position k sits at ``(k // (S1*S2))*sK + ((k // S2) % S1)*T1 +
    (k % S2)*T2``: a strided view's rows read in place (_layout.rows_layout); S1 = S2 = 1
    otherwise, which the compiler folds to ``k*sK``."""
    o = tl.program_id(0).to(tl.int64)
    kb = tl.program_id(1)
    z = tl.program_id(2)
    nz = tl.num_programs(2)
    ks = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    kmask = ks < K
    k64 = ks.to(tl.int64)
    kofs = row_offset(k64, S1, S2, sK, T1, T2)
    base = x + o * sO
    if ONE_TILE:
        r_lo = 0
        r_end = BLOCK_R
    else:
        r_lo = z.to(tl.int64) * CHUNK  # past 2**31 elements (a full sum of 2**31 bf16) in int64
        r_end = r_lo + CHUNK
    xt: tl.constexpr = x.dtype.element_ty
    if OP == "sum" or OP == "mean":
        # one binding of each constexpr, so that a type checker can read the kernel as Python
        AT: tl.constexpr = (tl.float64 if xt == tl.float64 else tl.float32) if xt.is_floating() else tl.int64
        acc = tl.zeros([BLOCK_K, BLOCK_R], AT)
    elif OP == "any" or OP == "all":  # max (any) or min (all) of x != 0, as int32
        acc = tl.full([BLOCK_K, BLOCK_R], 0 if OP == "any" else 1, tl.int32)
    else:
        IDENT: tl.constexpr = ((float("-inf") if (OP == "amax" or OP == "argmax") else float("inf")) if xt.is_floating()
                               else xt.get_int_min_value() if (OP == "amax" or OP == "argmax") else xt.get_int_max_value())
        # 16-bit floats are compared in fp32 (exact); this also avoids bf16 constants.
        MT: tl.constexpr = tl.float32 if (xt == tl.float16 or xt == tl.bfloat16) else xt
        acc = tl.full([BLOCK_K, BLOCK_R], IDENT, MT)
        nan = tl.zeros([BLOCK_K, BLOCK_R], tl.int1)
        if OP == "argmax" or OP == "argmin":
            acc_i = tl.full([BLOCK_K, BLOCK_R], -1, tl.int64)
    for r0 in range(r_lo, r_end, BLOCK_R):
        rs = r0 + tl.arange(0, BLOCK_R)
        m = kmask[:, None] & ((rs < R) & (rs < r_end))[None, :]
        offs = kofs[:, None] + rs[None, :].to(tl.int64) * sR
        if OP == "sum" or OP == "mean":
            if EVEN:
                v = tl.load(base + offs, eviction_policy="evict_first")
            else:
                v = tl.load(base + offs, mask=m, other=0, eviction_policy="evict_first")
            acc += v.to(AT)
        elif OP == "any" or OP == "all":
            if EVEN:
                hit = (tl.load(base + offs, eviction_policy="evict_first") != 0).to(tl.int32)
            else:
                hit = tl.where(m, (tl.load(base + offs, mask=m, other=0, eviction_policy="evict_first") != 0)
                               .to(tl.int32), 0 if OP == "any" else 1)
            if OP == "any":
                acc = tl.maximum(acc, hit)
            else:
                acc = tl.minimum(acc, hit)
        else:
            if EVEN:
                v = tl.load(base + offs, eviction_policy="evict_first").to(MT)
            else:
                v = tl.where(m, tl.load(base + offs, mask=m, eviction_policy="evict_first").to(MT), IDENT)
            if OP == "amax":
                acc = tl.maximum(acc, v)
                nan = nan | (v != v)
            elif OP == "amin":
                acc = tl.minimum(acc, v)
                nan = nan | (v != v)
            else:
                if HAS_IDX_IN:
                    vi = tl.load(idx_in + o * sO + offs, mask=m, other=-1)
                else:
                    vi = tl.zeros([BLOCK_K, BLOCK_R], tl.int64) + rs[None, :]
                if OP == "argmax":
                    better = v > acc
                else:
                    better = v < acc
                take = m & (better | (acc_i < 0) | ((v != v) & (acc == acc)))
                acc = tl.where(take, v, acc)
                acc_i = tl.where(take, vi, acc_i)
    oidx = (o * nz + z) * K + ks
    if OP == "sum" or OP == "mean":
        r = tl.sum(acc, 1)
        if FINAL and OP == "mean":
            r = r / divisor
        tl.store(out + oidx, r.to(out.dtype.element_ty), mask=kmask)
    elif OP == "any" or OP == "all":
        if OP == "any":
            r = tl.max(acc, 1)
        else:
            r = tl.min(acc, 1)
        tl.store(out + oidx, r.to(out.dtype.element_ty), mask=kmask)
    elif OP == "amax" or OP == "amin":
        if OP == "amax":
            r = tl.max(acc, 1)
        else:
            r = tl.min(acc, 1)
        has_nan = tl.max(nan.to(tl.int32), 1) > 0
        if xt.is_floating():
            r = tl.where(has_nan, float("nan"), r)
        tl.store(out + oidx, r.to(out.dtype.element_ty), mask=kmask)
    else:
        valid = acc_i >= 0
        isn = (acc != acc) & valid
        any_nan = tl.max(isn.to(tl.int32), 1) > 0
        if OP == "argmax":
            best = tl.max(tl.where(valid, acc, IDENT), 1)
        else:
            best = tl.min(tl.where(valid, acc, IDENT), 1)
        cand = tl.where(any_nan[:, None], isn, valid & (acc == best[:, None]))
        i = tl.min(tl.where(cand, acc_i, 9223372036854775807), 1)
        i = tl.where(i == 9223372036854775807, -1, i)
        if not FINAL:
            v_out = tl.where(any_nan, float("nan"), best) if xt.is_floating() else best
            tl.store(out + oidx, v_out.to(out.dtype.element_ty), mask=kmask)
        tl.store(idx_out + oidx, i, mask=kmask)


_reduce = jit(_reduce_kernel)

_SPLIT_MIN_R = 1 << 16  # split the reduced range across programs past this size
_FEW_PROGRAMS = 256  # below this many programs, a reduced axis of _SPLIT_MIN_TILES tiles or more is split
_SPLIT_MIN_TILES = 4
# A column sum with fewer programs than _NARROW_PROGRAMS narrows its K tiles (to _NARROW_MIN_K
# columns at least) until it has that many, where each program then loops over at most
# _NARROW_MAX_TILES tiles of R: one launch, where the split takes two (H200, bf16 column sums of
# 196..4096 rows: 0.42-0.78x aten's wall time a call, 0.87-1.15x split; 12544 rows stay split)
_NARROW_PROGRAMS = 96
_NARROW_MIN_K = 8
_NARROW_MAX_TILES = 8


def _memory_view(x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, int, int, int] | None:
    """(x's dims in memory order, O, R, K) where x is dense in another order than its own
    (channels_last, a transposed matrix) and, in memory order, the reduced dims are one block
    and the kept dims keep their order: the kernel then reads x's memory in place, no copy
    (a conv's bias gradient: the sum over (N, H, W) of a channels_last (N, C, H, W) is a
    column sum of an (N*H*W, C) matrix). None otherwise. Size-1 dims may sit anywhere."""
    if not dims:
        return None
    strides = x.stride()
    order = sorted(range(x.dim()), key=lambda d: (-strides[d], d))
    xp = x.permute(order)
    if not xp.is_contiguous():
        return None
    live = [d for d in order if x.shape[d] != 1]
    red = [i for i, d in enumerate(live) if d in dims]
    kept = [d for d in live if d not in dims]
    if not red or red != list(range(red[0], red[0] + len(red))) or kept != sorted(kept):
        return None
    o = r = k = 1
    for i, d in enumerate(live):
        if i < red[0]:
            o *= x.shape[d]
        elif i <= red[-1]:
            r *= x.shape[d]
        else:
            k *= x.shape[d]
    return xp, o, r, k


def _one_block(dims: tuple[int, ...]) -> bool:
    """Whether ``dims`` (sorted) are adjacent: one block R of the (O, R, K) view."""
    return not dims or dims == tuple(range(dims[0], dims[0] + len(dims)))


def _outer_inner(x: Tensor, first: int, last: int) -> tuple[int, int]:
    """(O, K): the numbers of elements of x's dims before ``first`` and after ``last``."""
    o = k = 1
    for s in x.shape[:first]:
        o *= s
    for s in x.shape[last + 1:]:
        k *= s
    return o, k


def _plan(x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, int, int, int] | None:
    """(source, O, R, K) for ``dims`` that are one block in x's own order or in its memory
    order (_memory_view); None for other dims, which _staged_launches serves."""
    if x.dim() == 0:
        return x.reshape(1), 1, 1, 1
    block = _one_block(dims)
    if not (block and x.is_contiguous()):
        mv = _memory_view(x, dims)
        if mv is not None:
            return mv
    if not block:
        return None
    x = x.contiguous()
    o, k = _outer_inner(x, dims[0], dims[-1])
    r = 1
    for s in x.shape[dims[0]: dims[-1] + 1]:
        r *= s
    return x, o, r, k


def _scratch(device: torch.device) -> Callable[[tuple, torch.dtype], Tensor]:
    """The ``temp`` of launches run now: an empty tensor on ``device``."""
    return lambda shape, dtype: torch.empty(shape, dtype=dtype, device=device)


def _launch(op: str, x: Tensor, o: int, r: int, k: int, out: Tensor, idx_out: Tensor | None) -> None:
    """Reduce contiguous x viewed as (O, R, K) into out (O*K,), in one or two launches."""
    for L in _reduce_launches(op, x, o, r, k, x, out, idx_out, _scratch(x.device)):
        execute(L)


#: the reduction kernel's (S1, S2, T1, T2) for kept positions on one flat axis of stride sK
_FLAT = (1, 1, 0, 0)


def _reduce_launches(op: str, x: Tensor, o: int, r: int, k: int, x_ref: Any, out_ref: Any, idx_ref: Any,
                     temp: Callable[[tuple, torch.dtype], Any],
                     rows: tuple[int, int, int, int, int, int] | None = None) -> list[Launch]:
    """The launches reducing contiguous x (O, R, K) into out (O*K,): one, or a split over R
    and a second pass. ``*_ref`` are what the launches pass (tensors, or plan references);
    ``temp(shape, dtype)`` gives a scratch buffer (a tensor, or a plan's Tmp). ``rows``: with
    K = 1, a strided x's layout (_layout.rows_layout) its O rows are read in place by."""
    on_gpu = x.device.type != "cpu"
    narrow = False  # K tiles narrowed for programs: one launch, no split
    nest = _FLAT
    if k == 1:  # last-dim reduction: the O rows become the K (kept, tile-row) axis
        o, k, sO, sK, sR = 1, o, 0, r, 1
        if rows is not None:
            s1, s2, sK, t1, t2, sR = rows
            nest = (s1, s2, t1, t2)
    else:
        sO, sK, sR = r * k, 1, k
    if sK == 1:  # contiguous kept axis: wide K tiles
        tile_max = 4096 if on_gpu else 512
        block_k = min(next_pow2(k), 64 if on_gpu else 32)
        block_r = min(next_pow2(r), max(1, tile_max // block_k))
        # a short reduced axis (MoE's top-k combine: (tokens, 2, hidden) summed over the 2)
        # leaves the tile mostly empty: widen K to fill it, or each program moves a few
        # hundred bytes and the launch is 2x aten's time (H200, (8192, 2, 1024) fp32)
        block_k = min(next_pow2(k), max(block_k, tile_max // block_r))
        if on_gpu and o * cdiv(k, block_k) < _NARROW_PROGRAMS:
            bk = block_k
            while bk > _NARROW_MIN_K and o * cdiv(k, bk) < _NARROW_PROGRAMS:
                bk //= 2
            br = min(next_pow2(r), tile_max // bk)
            if cdiv(r, br) <= _NARROW_MAX_TILES:
                block_k, block_r, narrow = bk, br, True
    else:  # contiguous reduced axis: wide R tiles, two rows per program on a GPU
        block_r = min(next_pow2(r), 4096 if on_gpu else 512)
        block_k = min(next_pow2(k), max(1, (8192 if on_gpu else 512) // block_r))
    nk = cdiv(k, block_k)
    split = 1
    if r >= _SPLIT_MIN_R and o * nk < 64 and not narrow:
        split = min(cdiv(r, block_r * 8), 1024)
    # the fewest tiles of R one program loops over before the axis is split: from
    # _NARROW_PROGRAMS programs up, a short loop in one launch costs less than a second
    # launch (a bias gradient of (316, 8000): 2 launches at 1.37x aten's wall time)
    min_tiles = _SPLIT_MIN_TILES if o * nk < _NARROW_PROGRAMS or not on_gpu else _NARROW_MAX_TILES + 1
    if o * nk < _FEW_PROGRAMS and r >= min_tiles * block_r and not narrow:
        # few programs for a long reduced axis (a bias gradient: a column sum of (12544, 96)
        # was 2 programs looping over all rows, 2.8x aten's time on the H200): split it so
        # that about _FEW_PROGRAMS programs share it, each _SPLIT_MIN_TILES tiles or more
        split = max(split, min(cdiv(r, _SPLIT_MIN_TILES * block_r), cdiv(_FEW_PROGRAMS, o * nk)))
    tile = block_k * block_r
    warps = (16 if tile >= 8192 else 8 if tile >= 4096 else 4) if on_gpu else 4
    is_arg = op in ("argmax", "argmin")
    divisor = float(r)
    idx = idx_ref if is_arg else out_ref
    if split == 1:
        even = k % block_k == 0 and r % block_r == 0
        return [launch(_reduce, (o, nk, 1), x_ref, out_ref, x_ref, idx, k, r, r, sO, sK, sR, *nest, divisor,
                       OP=op, BLOCK_K=block_k, BLOCK_R=block_r, HAS_IDX_IN=False, FINAL=True,
                       EVEN=even, ONE_TILE=r == block_r, num_warps=warps)]
    chunk = cdiv(cdiv(r, split), block_r) * block_r
    split = cdiv(r, chunk)
    if op in ("sum", "mean"):
        wdt = torch.float64 if x.dtype == torch.float64 else (torch.int64 if not x.dtype.is_floating_point else torch.float32)
    else:
        wdt = x.dtype
    part = temp((o, split, k), wdt)
    part_i = temp((o, split, k), torch.int64) if is_arg else part
    first = launch(_reduce, (o, nk, split), x_ref, part, x_ref, part_i, k, r, chunk, sO, sK, sR, *nest, 1.0,
                   OP=op, BLOCK_K=block_k, BLOCK_R=block_r, HAS_IDX_IN=False, FINAL=False, num_warps=warps)
    # Second stage: (o, split, k) -> (o, k), always with the kept axis contiguous... or rows.
    if k == 1:
        s_o, s_k, s_r, kk, oo = 0, split, 1, o, 1
    else:
        s_o, s_k, s_r, kk, oo = split * k, 1, k, k, o
    bk = min(next_pow2(kk), 32)
    br = min(next_pow2(split), 1024)
    second = launch(_reduce, (oo, cdiv(kk, bk), 1), part, out_ref, part_i, idx, kk, split, split,
                    s_o, s_k, s_r, *_FLAT, divisor, OP=op, BLOCK_K=bk, BLOCK_R=br,
                    HAS_IDX_IN=is_arg, FINAL=True, num_warps=4)
    return [first, second]


def _runs(dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """``dims`` (sorted) as runs of adjacent dims, (first, last) each: (0, 2, 3) -> [(0, 0), (2, 3)]."""
    runs: list[tuple[int, int]] = []
    for d in dims:
        if runs and runs[-1][1] == d - 1:
            runs[-1] = (runs[-1][0], d)
        else:
            runs.append((d, d))
    return runs


def _stage_dtype(op: str, dt: torch.dtype) -> torch.dtype:
    """The dtype a staged reduction keeps between its stages: what the kernel accumulates in
    (fp32 for 16-bit float sums and means, int64 for integer sums), so staging rounds no more
    than one pass does; amax/amin are exact in the input's own dtype."""
    if op in ("sum", "mean"):
        if dt in (torch.float16, torch.bfloat16):
            return torch.float32
        if not dt.is_floating_point:
            return torch.int64
    return dt


def _staged_launches(op: str, x: Tensor, dims: tuple[int, ...], x_ref: Any, out_ref: Any,
                     temp: Callable[[tuple, torch.dtype], Any]) -> list[Launch]:
    """The launches reducing contiguous ``x`` over ``dims`` that are not one block (Mamba's
    sum over (batch, sequence) of a (B, D, L, N) state gradient): one (O, R, K) reduction per
    run of adjacent dims, the innermost first, each reading the last one's output in place.
    A permuted contiguous copy first (what the one-block path needs) moves the whole input
    twice more: 6.4x aten's time on a (8, 2048, 512, 8) fp32 tensor on the H200. A mean
    stays exact in shape: every element of a stage averages the same count."""
    cur = list(x.shape)
    wdt = _stage_dtype(op, x.dtype)
    staged = torch.empty(0, dtype=wdt, device=x.device)  # what later stages read: its device and dtype
    src = x_ref
    launches: list[Launch] = []
    runs = _runs(dims)[::-1]
    for i, (a, b) in enumerate(runs):
        o, r, k = math.prod(cur[:a]), math.prod(cur[a:b + 1]), math.prod(cur[b + 1:])
        cur[a:b + 1] = [1] * (b + 1 - a)
        dst = out_ref if i == len(runs) - 1 else temp(tuple(cur), wdt)
        launches += _reduce_launches(op, x if i == 0 else staged, o, r, k, src, dst, dst, temp)
        src = dst
    return launches


def _out_shape(x: Tensor, dims: tuple[int, ...], keepdim: bool) -> list[int]:
    if keepdim:
        return [1 if i in dims else s for i, s in enumerate(x.shape)]
    return [s for i, s in enumerate(x.shape) if i not in dims]


def _reduce_op(op: str, x: Tensor, dim, keepdim: bool, dtype: torch.dtype | None, out: Tensor | None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.{op}: expected a Tensor, got {type(x).__name__}")
    check_same_device(op, x, out)
    if dtype is not None and dtype != x.dtype:
        if dtype not in FLOAT_DTYPES + INT_DTYPES and not (dtype == torch.bool and op == "sum"):
            raise TypeError(f"tritonjit.{op}: unsupported dtype {dtype}")
        x = x.to(dtype)
    if x.dtype == torch.bool and op == "sum":
        x = x.to(torch.int64)
    if x.dtype not in FLOAT_DTYPES + INT_DTYPES:
        raise TypeError(f"tritonjit.{op}: unsupported dtype {x.dtype}")
    if op == "mean" and not x.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {str(x.dtype).replace('torch.', '').capitalize()}"
        )
    if x.dim() > 64:
        raise RuntimeError("only tensors with up to 64 dims are supported")  # aten's dim mask
    if op in ("amax", "amin") and isinstance(dim, (list, tuple)) and len(dim) == 0 and x.dim() > 0:
        dims = tuple(range(x.dim()))
    else:
        dims = normalize_dims(op, dim, x.dim())
    if x.dim() == 0:
        dims = ()
    if op == "sum":  # dtype= is the result's dtype (an int32 sum stays int32), as in aten
        odt = dtype if dtype is not None else x.dtype if x.dtype.is_floating_point else torch.int64
    else:
        odt = x.dtype
    shape = _out_shape(x, dims, keepdim)
    if out is None:
        out = torch.empty(shape, dtype=odt, device=x.device)
    else:
        check_out(op, out, shape, odt, x.device)
    if out.numel() == 0:
        return out
    r = 1
    for d in dims:
        r *= x.shape[d]
    if r == 0:
        if op in ("amax", "amin"):
            raise IndexError(
                f"{op}(): Expected reduction dim {dims[0]} to have non-zero size."
            )
        out.fill_(0 if op == "sum" else float("nan"))
        return out
    if x.dim() == 0:
        out.copy_(x.reshape(shape))
        return out
    res = out if out.is_contiguous() else torch.empty(shape, dtype=odt, device=x.device)
    p = _plan(x, dims)
    if p is None:
        src = x.contiguous()
        for L in _staged_launches(op, src, dims, src, res, _scratch(x.device)):
            execute(L)
    else:
        _launch(op, *p, res, None)
    if res is not out:
        out.copy_(res)
    return out


def sum(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
        dtype: torch.dtype | None = None, out: Tensor | None = None) -> Tensor:
    """Sum with an fp32 (fp64, int64) accumulator; integer inputs give int64, as in aten."""
    return _reduce_op("sum", x, dim, keepdim, dtype, out)


def mean(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
         dtype: torch.dtype | None = None, out: Tensor | None = None) -> Tensor:
    """Mean with an fp32 accumulator; floating point only, as in aten."""
    return _reduce_op("mean", x, dim, keepdim, dtype, out)


def amax(x: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False, *, out: Tensor | None = None) -> Tensor:
    """Max over dims (all dims for an empty list, as aten); NaN propagates."""
    return _reduce_op("amax", x, dim, keepdim, None, out)


def amin(x: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False, *, out: Tensor | None = None) -> Tensor:
    """Min over dims (all dims for an empty list, as aten); NaN propagates."""
    return _reduce_op("amin", x, dim, keepdim, None, out)


def _arg(op: str, x: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.{op}: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES + INT_DTYPES:
        raise TypeError(f"tritonjit.{op}: unsupported dtype {x.dtype}")
    if dim is None:
        if x.numel() == 0:
            raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        shape = [1] * x.dim() if keepdim else []
        res = torch.empty(shape, dtype=torch.int64, device=x.device)
        src = x.contiguous().reshape(1, x.numel())
        _launch(op, src, 1, x.numel(), 1, res.reshape(1), res.reshape(1))
        return res
    dims = normalize_dims(op, dim, x.dim())
    shape = _out_shape(x, dims, keepdim) if x.dim() else []
    res = torch.empty(shape, dtype=torch.int64, device=x.device)
    if x.dim() == 0:
        return res.zero_()
    d = dims[0]  # one dim: an int was given
    if x.shape[d] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    if res.numel() == 0:
        return res
    p = _plan(x, (d,))
    assert p is not None  # one dim is one block
    _launch(op, *p, res, res)
    return res


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (NaN counts as the maximum), as int64."""
    return _arg("argmax", x, dim, keepdim)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum (NaN counts as the minimum), as int64."""
    return _arg("argmin", x, dim, keepdim)


# ----------------------------------------------------------------- plans
# Planners of the aten overloads for the C++ operator path (see _plan.py); None: the
# Python implementation runs (dtype conversions, reductions over dims that are not
# one block, empty reductions, 0-dim inputs).
class _Temps:
    """A plan's temporary buffers, handed out as Tmp references."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    def __call__(self, shape: tuple, dtype: torch.dtype) -> Tmp:
        self.buffers.append(Buffer(tuple(shape), dtype))
        return Tmp(len(self.buffers) - 1)


def _planned_dtype(op: str, xdt: torch.dtype, dtype: Any) -> torch.dtype | None:
    """The output dtype of a planned sum/mean/amax/amin of ``xdt`` with ``dtype=``, where the
    kernel computes what aten does (it accumulates in fp32 for 16- and 32-bit floats, fp64
    for fp64, int64 for integers and bool); None where it would not: aten casts the input
    to ``dtype`` first (the Python implementation does), or refuses the call.

    Taken: no dtype, or the input's own (the result's dtype then); a bool sum (int64:
    counting a mask); a 16-bit float summed or averaged with dtype=float32 (fp32
    accumulation either way); an integer or bool sum with dtype=int64 (int64 accumulation
    either way)."""
    if xdt not in FLOAT_DTYPES + INT_DTYPES and not (xdt == torch.bool and op == "sum"):
        return None
    natural = torch.int64 if op == "sum" and not xdt.is_floating_point else xdt
    if op == "mean" and not xdt.is_floating_point:
        return None  # aten's error, from the Python implementation
    if dtype is None:
        return natural
    if dtype == xdt:  # an int32 sum with dtype=int32 stays int32 (its low bits are the same)
        return xdt
    if op == "sum" and not xdt.is_floating_point and dtype == torch.int64:
        return torch.int64
    if op in ("sum", "mean") and xdt in (torch.float16, torch.bfloat16) and dtype == torch.float32:
        return torch.float32
    return None


def _layout(x: Tensor, dims: tuple[int, ...], mv: Any = None
            ) -> tuple[tuple[int, int, int, int, int, int] | None, tuple[int, ...]]:
    """(rows, contiguous) of a plan over ``dims`` (one block, or read in memory order): a strided x reduced over its
    last dims is read in place where _layout.rows_layout finds its rows (an attention head's
    [B, H, L, D] view: gemma3's q/k norms, a mean over -1); x in memory order (``mv``) or
    contiguous needs nothing; any other x is made contiguous first."""
    if x.is_contiguous() or mv is not None:
        return None, ()
    if x.dim() and _outer_inner(x, dims[0], dims[-1])[1] == 1:
        rows = rows_layout(x, dims)
        if rows is not None:
            return rows, ()
    return None, (0,)


def plan_reduce(op: str, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Plan | None:
    """sum/mean/amax/amin over dims. aten's plan (decided by the key: ndim and shape) for a 0-dim
    input (the value itself, cast) and an empty reduction (an identity, NaN or aten's error)."""
    if not isinstance(x, Tensor) or x.dim() > 64:
        return None  # past 64 dims: the implementation raises aten's error
    if x.dim() == 0:
        return aten_plan()
    odt = _planned_dtype(op, x.dtype, dtype)
    if odt is None:
        return None
    if op in ("amax", "amin") and isinstance(dim, (list, tuple)) and len(dim) == 0:
        dims = tuple(range(x.dim()))
    else:
        dims = normalize_dims(op, dim, x.dim())
    # a dense layout in another order (channels_last) whose reduced dims are one block in
    # memory: read in place (the key holds the strides); otherwise one block of dims of a
    # contiguous copy
    is_block = _one_block(dims)
    mv = None if (is_block and x.is_contiguous()) or x.numel() == 0 else _memory_view(x, dims)
    r = 1
    for d in dims:
        r *= x.shape[d]
    out = (Buffer(tuple(_out_shape(x, dims, keepdim)), odt),)
    if r == 0:
        return aten_plan()
    n_out = 1
    for s in out[0].shape:
        n_out *= s
    rows, contiguous = _layout(x, dims, mv) if is_block or mv is not None else (None, () if x.is_contiguous() else (0,))
    if n_out == 0:
        return Plan(out, (), contiguous=contiguous)
    if contiguous and is_cuda_like(x):
        return aten_plan()  # aten's one strided kernel, where ours would follow a copy kernel
    temps = _Temps()
    if mv is None and not is_block:  # runs of dims, one stage each (of a contiguous copy where x is not)
        launches = _staged_launches(op, x, dims, In(0), Out(0), temps)
        return Plan(out, tuple(launches), temps=tuple(temps.buffers), contiguous=contiguous)
    o, k = (mv[1], mv[3]) if mv is not None else _outer_inner(x, dims[0], dims[-1])
    launches = _reduce_launches(op, x, o, r, k, In(0), Out(0), Out(0), temps, rows)
    return Plan(out, tuple(launches), temps=tuple(temps.buffers), contiguous=contiguous)


def plan_arg(op: str, x: Any, dim: Any = None, keepdim: bool = False) -> Plan | None:
    """argmax/argmin; aten's plan for a 0-dim input (index 0) and an empty one (aten's error)."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES + INT_DTYPES:
        return None
    if x.dim() == 0 or x.numel() == 0:
        return aten_plan()
    temps = _Temps()
    contiguous: tuple[int, ...]
    if dim is None:
        contiguous = () if x.is_contiguous() else (0,)
        shape = tuple([1] * x.dim() if keepdim else [])
        launches = _reduce_launches(op, x, 1, x.numel(), 1, In(0), Out(0), Out(0), temps)
    else:
        (d,) = normalize_dims(op, dim, x.dim())
        rows, contiguous = _layout(x, (d,))
        shape = tuple(_out_shape(x, (d,), keepdim))
        o, k = _outer_inner(x, d, d)
        launches = _reduce_launches(op, x, o, x.shape[d], k, In(0), Out(0), Out(0), temps, rows)
    if contiguous and is_cuda_like(x):
        return aten_plan()  # aten's one strided kernel, where ours would follow a copy kernel
    return Plan((Buffer(shape, torch.int64),), tuple(launches), temps=tuple(temps.buffers), contiguous=contiguous)


def plan_logic(op: str, x: Any, dim: Any = None, keepdim: bool = False) -> Plan | None:
    """any/all over all dims (``dim`` None) or one block of dims: the reduction kernel's
    any/all (max/min of x != 0), to bool (uint8 for a uint8 input, as aten). A 0-dim input
    is one element; an empty reduction writes its identity (False/True). aten's plan: an empty
    dim list (aten reduces nothing) and a dim out of range (aten's error), which the key holds;
    None (the Python implementation): dims that are not one block."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES + INT_DTYPES + (torch.bool,):
        return None
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return aten_plan()
    try:
        dims = normalize_dims(op, dim, x.dim())
    except (IndexError, RuntimeError):
        return aten_plan()
    if x.dim() == 0:
        dims = ()
    elif not _one_block(dims):
        return None
    odt = torch.uint8 if x.dtype == torch.uint8 else torch.bool
    shape = tuple(_out_shape(x, dims, keepdim)) if x.dim() else ()
    out = (Buffer(shape, odt),)
    n_out = 1
    for s in shape:
        n_out *= s
    if n_out == 0:
        return Plan(out, ())
    r = 1
    for d in dims:
        r *= x.shape[d]
    if r == 0:  # nothing reduced: the identity
        L = _ew_launch("copy", [op == "all"], [op == "all"], out[0], Out(0), list(shape), "i1", [])
        return None if L is None else Plan(out, (L,))
    o, k = _outer_inner(x, dims[0], dims[-1]) if x.dim() else (1, 1)
    rows, contiguous = _layout(x, dims) if x.dim() else (None, ())
    if contiguous and is_cuda_like(x):
        return aten_plan()  # aten's one strided kernel, where ours would follow a copy kernel
    temps = _Temps()
    launches = _reduce_launches(op, x, o, r, k, In(0), Out(0), Out(0), temps, rows)
    return Plan(out, tuple(launches), temps=tuple(temps.buffers), contiguous=contiguous)


#: max()/min() of a whole tensor above this many elements goes to aten's kernel (H200,
#: 2026-12-03: ours 0.73-0.83x eager on 16 elements, 1.10-1.54x on 8M fp32)
_EXTREME_ATEN_NUMEL = 1 << 16


def _plan_extreme(op: str, x: Any) -> Plan | None:
    """max()/min() with no dim (``cache_position.max()``): amax/amin over every dim, or of
    a bool tensor any/all; aten's kernel for a large input (_EXTREME_ATEN_NUMEL); None for
    an empty input (aten's error) and a 0-dim one."""
    if not isinstance(x, Tensor) or x.numel() == 0:
        return None
    if x.numel() > _EXTREME_ATEN_NUMEL and is_cuda_like(x):
        return aten_plan()
    if x.dtype == torch.bool:
        return plan_logic("any" if op == "amax" else "all", x)
    return plan_reduce(op, x, ())


PLANNERS: dict[str, Any] = {
    "any": lambda x: plan_logic("any", x), "all": lambda x: plan_logic("all", x),
    "any.dim": lambda x, dim, keepdim=False: plan_logic("any", x, dim, keepdim),
    "all.dim": lambda x, dim, keepdim=False: plan_logic("all", x, dim, keepdim),
    "any.dims": lambda x, dim=None, keepdim=False: plan_logic("any", x, dim, keepdim),
    "all.dims": lambda x, dim=None, keepdim=False: plan_logic("all", x, dim, keepdim),
    "sum": lambda x, *, dtype=None: plan_reduce("sum", x, None, False, dtype),
    "mean": lambda x, *, dtype=None: plan_reduce("mean", x, None, False, dtype),
    "sum.dim_IntList": lambda x, dim=None, keepdim=False, *, dtype=None: plan_reduce("sum", x, dim, keepdim, dtype),
    "mean.dim": lambda x, dim=None, keepdim=False, *, dtype=None: plan_reduce("mean", x, dim, keepdim, dtype),
    "amax": lambda x, dim=(), keepdim=False: plan_reduce("amax", x, dim, keepdim),
    "amin": lambda x, dim=(), keepdim=False: plan_reduce("amin", x, dim, keepdim),
    # max()/min() of a whole tensor: amax/amin over every dim; any/all of a bool one
    "max": lambda x: _plan_extreme("amax", x), "min": lambda x: _plan_extreme("amin", x),
    "argmax": lambda x, dim=None, keepdim=False: plan_arg("argmax", x, dim, keepdim),
    "argmin": lambda x, dim=None, keepdim=False: plan_arg("argmin", x, dim, keepdim),
}
