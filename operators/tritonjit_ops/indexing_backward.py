"""Embedding backward: the dense weight gradient, with padding_idx and scale_grad_by_freq.

Each (index, column block) program adds its gradient row into an fp32 accumulator with
atomics (rows of padding_idx add nothing); for a 16-bit gradient only the rows the
indices touch are zeroed in, and converted out of, that accumulator. A small table read
by many indices (T5's relative position buckets: 65536 indices into 32 rows) takes
another kernel: there, one atomic per index and column would queue thousands deep on
each of a few hundred addresses, so each program sums a chunk of indices into a copy of
the whole table in registers first and adds that copy once: up to 256 rows read by 128
indices a row or more (wav2vec2-BERT's 73 distances, 262144 indices) as one-hot times rows
on the tensor cores (exact: fp32 as three bf16 parts), else up to 64 rows on the vector
units. A few indices (decode, a short
prompt: up to FEW_INDICES) take a third: each index's program sums the rows of its
duplicates itself and the first of them writes the sum, so the gradient is the zeroing and
one launch in any dtype, as aten's kernel for few indices is. As
in the forward (indexing.py), index values are checked on the host for CPU tensors and
by a device assert on an accelerator, so an out-of-range index never writes out of bounds.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, assert_options, cdiv, deterministic, host_check_allowed, jit, next_pow2
from ._plan import Buffer, In, Out, Plan, Tmp, aten_plan, launch, run
from .matmul import dot_f32

Tensor = torch.Tensor


@triton.jit
def _zero_kernel(out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.zeros([BLOCK], tl.float32).to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def _embed_bwd_kernel(g, idx, acc, counts, W, D, padding_idx, BLOCK: tl.constexpr, FREQ: tl.constexpr,
                      CHECK: tl.constexpr):
    """acc[idx[i]] += g[i] (divided by the index's count with FREQ); rows of padding_idx add nothing."""
    i = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    j = tl.load(idx + i).to(tl.int64)
    if CHECK:
        tl.device_assert(j.to(tl.uint64, bitcast=True) < W, "tritonjit embedding_backward: index out of range")
    m = (cols < D) & (j != padding_idx) & (j >= 0) & (j < W)
    v = tl.load(g + i * D + cols, mask=m, other=0.0).to(acc.dtype.element_ty)  # float64 stays float64
    if FREQ:
        v = v / tl.load(counts + j, mask=(j >= 0) & (j < W), other=1).to(acc.dtype.element_ty)
    tl.atomic_add(acc + j * D + cols, v, mask=m)


@triton.jit
def _index_rows_kernel(src, dst, idx, W, D, COPY: tl.constexpr, BLOCK: tl.constexpr):
    """dst[idx[i]] = src[idx[i]] (COPY, with a dtype conversion) or 0: only the rows the indices
    touch, so a 16-bit table's fp32 accumulator is never written whole."""
    i = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    j = tl.load(idx + i).to(tl.int64)
    m = (cols < D) & (j >= 0) & (j < W)
    if COPY:
        v = tl.load(src + j * D + cols, mask=m, other=0.0)
    else:
        v = tl.zeros([BLOCK], tl.float32)
    tl.store(dst + j * D + cols, v.to(dst.dtype.element_ty), mask=m)


@triton.jit
def _hot_dot(hot, x, table, AS_F32: tl.constexpr):
    """table + hot @ x for a boolean one-hot ``hot`` and 16-bit ``x``, on the tensor cores
    (AS_F32: as fp32, exact, where Triton's interpreter multiplies bf16 tiles wrongly)."""
    if AS_F32:
        return tl.dot(hot.to(tl.float32), x.to(tl.float32), table, input_precision="ieee")
    return tl.dot(hot.to(x.dtype), x, table)


@triton.jit
def _embed_bwd_small_kernel(g, idx, acc, counts, L, W, D, padding_idx, CHUNK: tl.constexpr, WP: tl.constexpr,
                            SUB: tl.constexpr, BLOCK: tl.constexpr, FREQ: tl.constexpr, DOT: tl.constexpr,
                            DOT_F32: tl.constexpr, CHECK: tl.constexpr):
    """acc += the rows of g[CHUNK indices] summed by index, for a table of W <= WP rows: a
    one-hot [WP, SUB] times [SUB, BLOCK] per step into a [WP, BLOCK] table, added once. DOT
    (fp16, bf16 or fp32 gradients): on the tensor cores, exact (the one-hot is 0 or 1, products
    are summed in fp32; an fp32 gradient as three bf16 parts; DOT_F32: see _hot_dot); else in
    the accumulator's dtype on the vector units."""
    start = tl.program_id(0).to(tl.int64) * CHUNK
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, WP)
    table = tl.zeros([WP, BLOCK], acc.dtype.element_ty)
    for s in range(0, CHUNK, SUB):
        i = start + s + tl.arange(0, SUB)
        mi = i < L
        j = tl.load(idx + i, mask=mi, other=0).to(tl.int64)
        if CHECK:
            tl.device_assert((j.to(tl.uint64, bitcast=True) < W) | ~mi, "tritonjit embedding_backward: index out of range")
        ok = mi & (j != padding_idx) & (j >= 0) & (j < W)
        m = ok[:, None] & (cols < D)[None, :]
        v = tl.load(g + i[:, None] * D + cols[None, :], mask=m, other=0.0)
        hot = rows[:, None] == tl.where(ok, j, -1)[None, :]
        if DOT:
            # a product with the one-hot's zeros would spread an inf or a NaN over every row:
            # those values go to their own row by atomics (rare: a scaler's overflow probe)
            odd = m & ~(tl.abs(v.to(tl.float32)) < float("inf"))
            if tl.max(odd.to(tl.int32)) > 0:
                tl.atomic_add(acc + j[:, None] * D + cols[None, :], v.to(acc.dtype.element_ty), mask=odd)
                v = tl.where(odd, 0.0, v).to(v.dtype)
        if DOT and g.dtype.element_ty == tl.float32:
            # fp32 as the sum of three bf16 parts (truncated, so exact): each product with the
            # one-hot is exact, as fp32's sum is
            hi = v.to(tl.bfloat16, fp_downcast_rounding="rtz")
            r = v - hi.to(tl.float32)
            mid = r.to(tl.bfloat16, fp_downcast_rounding="rtz")
            lo = (r - mid.to(tl.float32)).to(tl.bfloat16, fp_downcast_rounding="rtz")
            table = _hot_dot(hot, hi, table, DOT_F32)
            table = _hot_dot(hot, mid, table, DOT_F32)
            table = _hot_dot(hot, lo, table, DOT_F32)
        elif DOT:
            table = _hot_dot(hot, v, table, DOT_F32)
        else:
            v = v.to(acc.dtype.element_ty)
            if FREQ:
                v = v / tl.load(counts + j, mask=ok, other=1).to(acc.dtype.element_ty)[:, None]
            table += tl.sum(tl.where(hot[:, :, None], v[None, :, :], 0.0), axis=1)  # an inf stays in its row
    tl.atomic_add(acc + rows[:, None] * D + cols[None, :], table, mask=(rows < W)[:, None] & (cols < D)[None, :])


@triton.jit
def _embed_bwd_few_kernel(g, idx, out, L, W, D, padding_idx, SUB: tl.constexpr, BLOCK: tl.constexpr,
                          CHECK: tl.constexpr):
    """out[idx[i]] = the sum of g[k] over every k with idx[k] == idx[i], written by the first
    such i only: a few indices (decode, a short prompt) in one launch after the zeroing, in the
    gradient's dtype, summed in fp32 (float64 stays float64) in index order, without atomics."""
    i = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    j = tl.load(idx + i).to(tl.int64)
    if CHECK:
        tl.device_assert(j.to(tl.uint64, bitcast=True) < W, "tritonjit embedding_backward: index out of range")
    acc_ty = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32
    total = tl.zeros([BLOCK], acc_ty)
    earlier = tl.zeros([SUB], tl.int32)
    for s in range(0, L, SUB):
        k = s + tl.arange(0, SUB)
        same = (k < L) & (tl.load(idx + k, mask=k < L, other=-1).to(tl.int64) == j)
        earlier += (same & (k < i)).to(tl.int32)
        v = tl.load(g + k[:, None] * D + cols[None, :], mask=same[:, None] & (cols < D)[None, :], other=0.0)
        total += tl.sum(v.to(acc_ty), axis=0)
    first = tl.sum(earlier, axis=0) == 0
    m = (cols < D) & first & (j != padding_idx) & (j >= 0) & (j < W)
    tl.store(out + j * D + cols, total.to(out.dtype.element_ty), mask=m)


@triton.jit
def _cast_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m).to(dst.dtype.element_ty), mask=m)


#: the small-table kernel: tables of at most this many rows, read by at least this many indices;
#: on the tensor cores (fp32, fp16, bf16): up to SMALL_TABLE_ROWS_DOT rows, by 128 indices a row
SMALL_TABLE_ROWS, SMALL_TABLE_ROWS_DOT, SMALL_TABLE_MIN_INDICES = 64, 256, 1024
#: at most this many indices: one program per index sums its duplicates itself (two launches in
#: all, as aten's kernel for few indices, against four for a 16-bit table through the accumulator)
FEW_INDICES = 128

_zero = jit(_zero_kernel)
_embed_bwd_small = jit(_embed_bwd_small_kernel)
_cast = jit(_cast_kernel)
_embed_bwd = jit(_embed_bwd_kernel)
_embed_bwd_few = jit(_embed_bwd_few_kernel)
_index_rows = jit(_index_rows_kernel)


def _plan(grad: Any, indices: Any, num_weights: int, padding_idx: int, freq: bool, check: bool) -> Plan | None:
    if (not isinstance(grad, Tensor) or not isinstance(indices, Tensor) or grad.dtype not in FLOAT_DTYPES
            or indices.dtype not in (torch.int32, torch.int64) or grad.device != indices.device or grad.dim() < 1
            or tuple(grad.shape[:-1]) != tuple(indices.shape)):
        return None
    d = grad.shape[-1]
    L = indices.numel()
    direct = grad.dtype in (torch.float32, torch.float64)  # accumulated in place
    outs = (Buffer((num_weights, d), grad.dtype),)
    temps = () if direct else (Buffer((num_weights, d), torch.float32),)
    acc = Out(0) if direct else Tmp(0)
    contiguous = tuple(i for i, t in ((0, grad), (1, indices)) if not t.is_contiguous())
    total = num_weights * d
    if total == 0:
        return Plan(outs, (), temps=temps, contiguous=contiguous)
    # the tensor cores' table: a chunk of indices per program (about L / 128) at least as long
    # as its table, whose atomics then number no more than the chunk's own would
    dot_rows = max(next_pow2(num_weights), 16)  # tl.dot's operands: 16 rows at least
    dot = (grad.dtype != torch.float64 and not freq and num_weights <= SMALL_TABLE_ROWS_DOT and d
           and L >= 128 * dot_rows)
    if dot or (L >= SMALL_TABLE_MIN_INDICES and num_weights <= SMALL_TABLE_ROWS and d):
        if dot:  # [wp, block] fp32 in registers, at most 64 a thread at 4 warps
            wp = dot_rows
            block = max(16, min(next_pow2(d), 8192 // wp, 128))
            sub = 64 if wp * block <= 4096 else 32
        else:
            wp = max(next_pow2(num_weights), 2)
            block = min(next_pow2(d), max(16, 2048 // wp))
            sub = max(2, min(64, 8192 // (wp * block)))
        chunk = min(max(next_pow2(cdiv(L, 128)), sub), 4096)  # about 128 programs per column block
        # Triton's interpreter multiplies bf16 tiles (bf16's, and fp32's three parts) wrongly
        interpreted = dot and grad.dtype != torch.float16 and dot_f32(grad.device, torch.bfloat16)
        # the whole (small) accumulator zeroed; a separate one is converted whole into the
        # gradient afterwards, so the gradient itself needs no zeroing then
        launches = [launch(_zero, (cdiv(total, 1024),), acc, total, BLOCK=1024)]
        launches.append(launch(_embed_bwd_small, (cdiv(L, chunk), cdiv(d, block)), In(0), In(1), acc,
                               In(4) if freq else In(0), L, num_weights, d, padding_idx, CHUNK=chunk, WP=wp, SUB=sub,
                               BLOCK=block, FREQ=freq, DOT=dot, DOT_F32=interpreted,
                               CHECK=check, num_warps=4, **assert_options(check)))
        if not direct:
            launches.append(launch(_cast, (cdiv(total, 1024),), acc, Out(0), total, BLOCK=1024))
        return Plan(outs, tuple(launches), temps=temps, contiguous=contiguous)
    launches = [launch(_zero, (cdiv(total, 1024),), Out(0), total, BLOCK=1024)]
    if L and d and L <= FEW_INDICES and not freq:
        sub = min(max(next_pow2(L), 2), 32)
        block = min(next_pow2(d), max(32, 4096 // sub))
        launches.append(launch(_embed_bwd_few, (L, cdiv(d, block)), In(0), In(1), Out(0), L, num_weights, d,
                               padding_idx, SUB=sub, BLOCK=block, CHECK=check, num_warps=4 if block >= 256 else 2,
                               **assert_options(check)))
        return Plan(outs, tuple(launches), contiguous=contiguous)
    if L and d:
        block = min(next_pow2(d), 1024)
        grid = (L, cdiv(d, block))
        warps = 4 if block >= 512 else 1
        if not direct:  # zero the accumulator's rows that the indices touch
            launches.append(launch(_index_rows, grid, acc, acc, In(1), num_weights, d, COPY=False, BLOCK=block,
                                   num_warps=warps))
        launches.append(launch(_embed_bwd, grid, In(0), In(1), acc, In(4) if freq else In(0),
                               num_weights, d, padding_idx, BLOCK=block, FREQ=freq, CHECK=check,
                               num_warps=warps, **assert_options(check)))
        if not direct:  # those rows, converted into the gradient's dtype
            launches.append(launch(_index_rows, grid, acc, Out(0), In(1), num_weights, d, COPY=True, BLOCK=block,
                                   num_warps=warps))
    return Plan(outs, tuple(launches), temps=temps, contiguous=contiguous)


def plan_embedding_dense_backward(grad: Any, indices: Any, num_weights: int, padding_idx: int,
                                  scale_grad_by_freq: bool) -> Plan | None:
    """aten.embedding_dense_backward on an accelerator (CPU indices are checked on the host,
    and scale_grad_by_freq needs the counts: both take the Python implementation). Deterministic
    mode: aten's kernel (this one sums by atomics)."""
    if deterministic():
        return aten_plan()
    if scale_grad_by_freq or not isinstance(indices, Tensor) or host_check_allowed(indices):
        return None
    return _plan(grad, indices, num_weights, padding_idx, False, True)


def embedding_dense_backward(grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int = -1,
                             scale_grad_by_freq: bool = False) -> Tensor:
    """The [num_weights, D] gradient of embedding's weight for the output gradient ``grad``
    (aten.embedding_dense_backward under enable(); deterministic mode: refused, aten's kernel)."""
    if deterministic():
        raise NotImplementedError("tritonjit embedding_dense_backward: torch.use_deterministic_algorithms(True) "
                                  "(its kernel sums by atomics); aten's kernel serves this call")
    if not isinstance(indices, Tensor) or indices.dtype not in (torch.int32, torch.int64):
        raise TypeError("tritonjit embedding_dense_backward: indices must be an int32/int64 Tensor")
    check = not host_check_allowed(indices)
    if not check and indices.numel():
        lo, hi = (int(v) for v in torch.aminmax(indices))
        if lo < 0 or hi >= num_weights:
            raise IndexError(f"tritonjit embedding_dense_backward: index {lo if lo < 0 else hi} is out of range "
                             f"for a table of {num_weights} rows")
    grad = grad.reshape(*indices.shape, grad.shape[-1]) if isinstance(grad, Tensor) and grad.dim() else grad
    p = _plan(grad, indices, num_weights, padding_idx, bool(scale_grad_by_freq), check)
    if p is None:
        raise NotImplementedError(f"tritonjit embedding_dense_backward: no kernel for grad "
                                  f"{getattr(grad, 'dtype', None)} {list(getattr(grad, 'shape', []))} and indices "
                                  f"{list(indices.shape)}")
    counts = torch.bincount(indices.reshape(-1), minlength=num_weights) if scale_grad_by_freq else indices
    return run(p, (grad, indices, num_weights, padding_idx, counts))


def embedding_backward(grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int = -1,
                       scale_grad_by_freq: bool = False) -> Tensor:
    """tritonjit::embedding_backward, the direct entry's gradient: :func:`embedding_dense_backward`,
    or in deterministic mode aten's operator (aten's deterministic kernel, also under enable(),
    whose implementation refuses the call then)."""
    if deterministic():
        return torch.ops.aten.embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)
    return embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)


PLANNERS: dict[str, Any] = {"embedding_dense_backward": plan_embedding_dense_backward}
