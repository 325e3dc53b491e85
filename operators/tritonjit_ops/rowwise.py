"""Operators along one dim (or a few), one row per program: sort, argsort (aten's is
``sort.stable``), topk, cumsum, cumprod, max/min with indices, prod, any, all, logsumexp,
var/std (and their means).

The dims an op works along are moved last and the input made contiguous, so a row of N
elements is one block of ``next_pow2(N)`` lanes; the plans of cumsum and of the reductions
over trailing dims read a strided view in place instead (``_row``'s layout arguments).
Bounds (larger rows go to aten's kernel): N <= 16384 for the scans and reductions, N <= 4096
for sort and topk. Sorting packs each
element's order-preserving 32-bit key and its index into one int64 and sorts those
(``tl.sort``): stable, NaN last as in aten; for dtypes of at most 32 bits (float64 and
int64 sort on aten's kernel).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, INT_DTYPES, is_cuda_like, jit, next_pow2
from ._fallback import with_aten_fallback
from ._layout import contiguous_rows, contiguous_strides, flat_stride, row_offset, rows_layout
from ._plan import Buffer, In, Out, Plan, aten_plan, execute, launch, run, value_keyed
from .elementwise import _CT, _cast, _refuse, _to_out, plan

Tensor = torch.Tensor
MAX_N = 16384
MAX_SORT = 4096


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _order_key(v, IS_FLOAT: tl.constexpr):
    """An int32 key per value that orders as the values do (sort and topk): floats through
    float32's bits with the negative ones flipped, one NaN above every value, -0.0 == 0.0;
    integers of at most 32 bits as themselves."""
    if IS_FLOAT:
        f = v.to(tl.float32)
        f = tl.where(f != f, float("nan"), f + 0.0)  # one NaN, and -0.0 == 0.0
        bits = f.to(tl.int32, bitcast=True)
        return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    else:
        return v.to(tl.int32)


@triton.jit
def _row_kernel(x, out, out2, N, corr, S1, S2, T0, T1, T2, TC, OP: tl.constexpr, CT: tl.constexpr,
                BLOCK: tl.constexpr, DESC: tl.constexpr = False, IS_FLOAT: tl.constexpr = True):
    """Row ``row`` of x is ``N`` elements ``TC`` apart from ``x + r0*T0 + r1*T1 + r2*T2``, where
    ``row = (r0*S1 + r1)*S2 + r2`` (:func:`~._layout.rows_layout`; a contiguous (M, N) input:
    S1 = S2 = TC = 1, T0 = N, which the compiler folds). Outputs are contiguous, a row after another."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    base = x + row_offset(row, S1, S2, T0, T1, T2)
    if OP == "cumsum":
        v = _cast(tl.load(base + cols * TC, mask=m, other=0), CT)
        tl.store(out + row * N + cols, tl.cumsum(v, 0).to(out.dtype.element_ty), mask=m)
    elif OP == "cumprod":
        v = _cast(tl.load(base + cols * TC, mask=m, other=0), CT)
        v = tl.where(m, v, 1)  # (not other=1: Triton's interpreter reads a bf16 `other` as raw bits)
        tl.store(out + row * N + cols, tl.cumprod(v, 0).to(out.dtype.element_ty), mask=m)
    elif OP == "sort":
        key = _order_key(tl.load(base + cols * TC, mask=m), IS_FLOAT)
        if DESC:
            key = ~key
        key = tl.where(m, key, 2147483647)
        packed = (key.to(tl.int64) << 32) | cols.to(tl.int64)
        packed = tl.sort(packed, 0)
        idx = (packed - ((packed >> 32) << 32)).to(tl.int32)  # the low word: the index
        vals = tl.load(base + idx * TC, mask=m)
        tl.store(out + row * N + cols, vals, mask=m)
        tl.store(out2 + row * N + cols, idx.to(tl.int64), mask=m)
    elif OP == "max" or OP == "min":
        v = _cast(tl.load(base + cols * TC, mask=m), CT)
        if IS_FLOAT:
            lo = -float("inf")
            hi = float("inf")
        else:
            lo = v.dtype.get_int_min_value()
            hi = v.dtype.get_int_max_value()
        if OP == "max":
            v = tl.where(m, v, lo)
            best, bi = tl.max(v, 0, return_indices=True, return_indices_tie_break_left=True)
        else:
            v = tl.where(m, v, hi)
            best, bi = tl.min(v, 0, return_indices=True, return_indices_tie_break_left=True)
        if IS_FLOAT:
            nan_i = tl.min(tl.where((v != v) & m, cols, BLOCK), 0)
            best = tl.where(nan_i < BLOCK, float("nan"), best)
            bi = tl.where(nan_i < BLOCK, nan_i, bi)
        tl.store(out + row, best.to(out.dtype.element_ty))
        tl.store(out2 + row, bi.to(tl.int64))
    elif OP == "prod":
        v = tl.where(m, _cast(tl.load(base + cols * TC, mask=m, other=0), CT), 1)
        tl.store(out + row, tl.reduce(v, 0, _mul).to(out.dtype.element_ty))
    elif OP == "any":
        nz = (tl.load(base + cols * TC, mask=m, other=0) != 0).to(tl.int32)
        tl.store(out + row, tl.max(nz, 0).to(out.dtype.element_ty))
    elif OP == "all":
        nz = tl.where(m, tl.load(base + cols * TC, mask=m, other=0) != 0, 1).to(tl.int32)
        tl.store(out + row, tl.min(nz, 0).to(out.dtype.element_ty))
    elif OP == "logsumexp":
        v = tl.where(m, _cast(tl.load(base + cols * TC, mask=m, other=0), CT), -float("inf"))
        mx = tl.max(v, 0)
        ms = tl.where(tl.abs(mx) == float("inf"), 0.0, mx)
        s = tl.sum(tl.where(m, tl.exp(v - ms), 0.0), 0)
        tl.store(out + row, (ms + tl.log(s)).to(out.dtype.element_ty))
    elif OP == "norm2" or OP == "norm1" or OP == "norminf" or OP == "normninf" or OP == "norm0" or OP == "normp":
        v = tl.abs(_cast(tl.load(base + cols * TC, mask=m, other=0), CT))
        if OP == "norm2":
            r = tl.sqrt(tl.sum(v * v, 0))
        elif OP == "norm1":
            r = tl.sum(v, 0)
        elif OP == "norminf":
            r = tl.max(tl.where(m, v, 0.0), 0)
            r = tl.where(tl.max(tl.where(m & (v != v), 1, 0), 0) > 0, float("nan"), r)
        elif OP == "normninf":
            r = tl.min(tl.where(m, v, float("inf")), 0)
            r = tl.where(tl.max(tl.where(m & (v != v), 1, 0), 0) > 0, float("nan"), r)
        elif OP == "norm0":
            r = tl.sum(tl.where(m & (v != 0), 1.0, 0.0), 0)
        else:  # |x|^p summed, to the 1/p (corr holds p)
            r = tl.exp2(tl.log2(tl.sum(tl.where(m & (v != 0), tl.exp2(corr * tl.log2(v)), 0.0), 0)) / corr)
        tl.store(out + row, r.to(out.dtype.element_ty))
    else:  # "var_mean": out = var (std with OP "std_mean"), out2 = mean
        v = _cast(tl.load(base + cols * TC, mask=m, other=0), CT)
        mean = tl.sum(v, 0) / N
        d = tl.where(m, v - mean, 0.0)
        var = tl.sum(d * d, 0) / tl.maximum(N - corr, 0.0)
        if OP == "std_mean":
            var = tl.sqrt(var)
        tl.store(out + row, var.to(out.dtype.element_ty))
        tl.store(out2 + row, mean.to(out2.dtype.element_ty))


_row = jit(_row_kernel)
_REAL = FLOAT_DTYPES + INT_DTYPES + (torch.bool,)


@triton.jit
def _scan_k_kernel(x, out, N, K, CT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """cumsum along the middle axis of a contiguous (O, N, K) view with K > 1 (a dim that is
    not the last): a [BLOCK_N, BLOCK_K] tile per program, the K axis contiguous in memory, so
    the scan needs no transposed copy of the input or the output."""
    o = tl.program_id(0).to(tl.int64)
    ns = tl.arange(0, BLOCK_N)
    ks = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    m = (ns[:, None] < N) & (ks[None, :] < K)
    offs = o * N * K + ns[:, None].to(tl.int64) * K + ks[None, :]
    v = _cast(tl.load(x + offs, mask=m, other=0), CT)
    tl.store(out + offs, _to_out(tl.cumsum(v, 0), out.dtype.element_ty, True), mask=m)


_scan_k = jit(_scan_k_kernel)


def _num_warps(block: int) -> int:
    return 4 if block <= 2048 else 8 if block <= 8192 else 16


def _dims(op: str, x: Tensor, dim: Any) -> list[int]:
    nd = max(x.dim(), 1)
    if dim is None:
        return list(range(x.dim()))
    ds = [dim] if isinstance(dim, int) else list(dim)
    if not ds:
        return list(range(x.dim()))
    out = []
    for d in ds:
        if not -nd <= d < nd:
            raise _refuse(op, f"dim {d} out of range")
        out.append(d % nd if x.dim() else 0)
    if len(set(out)) != len(out):
        raise _refuse(op, "a repeated dim")
    return sorted(set(out)) if x.dim() else []


def _rows(op: str, x: Tensor, dims: Sequence[int], bound: int) -> tuple[Tensor, int, int, list[int]]:
    """x with ``dims`` moved last, contiguous, as (M, N); and the shape of the kept dims."""
    if x.dtype not in _REAL or x.layout != torch.strided:
        raise _refuse(op, f"dtype {x.dtype}")
    keep = [d for d in range(x.dim()) if d not in dims]
    kept_shape = [x.shape[d] for d in keep]
    n = 1
    for d in dims:
        n *= x.shape[d]
    if n > bound or n == 0:
        raise _refuse(op, f"{n} elements along the dims (tritonjit takes 1 to {bound})")
    xt = x.permute(*keep, *dims) if x.dim() else x.reshape(1)
    xt = xt.contiguous()
    m = xt.numel() // n
    return xt.reshape(m, n), m, n, kept_shape


def _keep(shape: list[int], x: Tensor, dims: Sequence[int], keepdim: bool) -> list[int]:
    if not keepdim:
        return shape
    return [1 if d in dims else x.shape[d] for d in range(x.dim())]


def _run(op: str, rows: Tensor, m: int, n: int, out: Tensor, out2: Tensor | None, ct: str, corr: float = 0.0,
         desc: bool = False, is_float: bool = True) -> None:
    if m == 0:
        return
    block = next_pow2(n)
    execute(launch(_row, (m,), rows, out, out if out2 is None else out2, n, float(corr), *contiguous_rows(n), OP=op,
                   CT=ct, BLOCK=block, DESC=desc, IS_FLOAT=is_float, num_warps=_num_warps(block)))



def _ct_of(op: str, dt: torch.dtype) -> str:
    if dt not in _CT:
        raise _refuse(op, f"dtype {dt}")
    return _CT[dt]


# ----------------------------------------------------------------- scans
def _scan(op: str) -> Callable:
    def fn(x: Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
        if not isinstance(x, Tensor):
            raise _refuse(op, "self")
        rd = dtype or (torch.int64 if not x.dtype.is_floating_point else x.dtype)
        if rd not in _REAL or rd == torch.bool:
            raise _refuse(op, f"dtype {rd}")
        (d,) = _dims(op, x, dim) or [0]
        if x.dim() == 0:
            return x.to(rd).clone()
        if x.numel() == 0:
            return torch.empty(x.shape, dtype=rd, device=x.device)
        rows, m, n, _ = _rows(op, x, [d], MAX_N)
        out = torch.empty(m, n, dtype=rd, device=x.device)
        _run(op, rows, m, n, out, None, _ct_of(op, rd), is_float=rd.is_floating_point)
        perm = [i for i in range(x.dim()) if i != d] + [d]
        inv = [perm.index(i) for i in range(x.dim())]
        return out.reshape([x.shape[i] for i in perm]).permute(*inv).contiguous()

    return fn


def _plan_cumsum(x: Any, dim: Any, *, dtype: Any = None) -> Plan | None:
    """cumsum's plan: along the last dim, one row per program (``_row``); along another, (O, N,
    K) tiles (``_scan_k``). Integer and bool inputs accumulate to int64 unless ``dtype`` is
    given, as in aten; a strided input is read in place where its rows allow, else made
    contiguous first. aten's plan, decided by the key, for what the implementation would hand
    to aten on every call: a dim out of range or a bool ``dtype`` (aten's errors), more than
    MAX_N elements along the dim (top-p sampling's cumsum over a vocabulary)."""
    if not isinstance(x, Tensor) or x.dtype not in _REAL or not isinstance(dim, int):
        return None
    rd = dtype if dtype is not None else (x.dtype if x.dtype.is_floating_point else torch.int64)
    if not isinstance(rd, torch.dtype) or rd not in _REAL or rd == torch.bool:
        return aten_plan()
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        return aten_plan()
    if x.dim() == 0:  # the value itself, cast
        return plan("copy", [x], rd, _CT[x.dtype])
    d = dim % nd
    buf = Buffer(tuple(x.shape), rd)
    if x.numel() == 0:
        return Plan((buf,), ())
    n = x.shape[d]
    if n > MAX_N:
        return aten_plan()
    o = k = 1
    for s in x.shape[:d]:
        o *= s
    for s in x.shape[d + 1:]:
        k *= s
    contiguous = () if x.is_contiguous() else (0,)
    ct = _CT[rd]
    block_n = next_pow2(n)
    if k == 1:
        layout = rows_layout(x, [d])
        contiguous = () if layout is not None else contiguous
        L = launch(_row, (o,), In(0), Out(0), Out(0), n, 0.0, *(layout or contiguous_rows(n)), OP="cumsum", CT=ct,
                   BLOCK=block_n, IS_FLOAT=rd.is_floating_point, num_warps=_num_warps(block_n))
    else:
        block_k = max(1, min(next_pow2(k), 4096 // block_n))
        L = launch(_scan_k, (o, (k + block_k - 1) // block_k), In(0), Out(0), n, k, CT=ct, BLOCK_N=block_n,
                   BLOCK_K=block_k, num_warps=_num_warps(block_n * block_k))
    return Plan((buf,), (L,), contiguous=contiguous)


# ----------------------------------------------------------------- sort, topk
def _sort_rows(op: str, x: Tensor, dim: int, descending: bool) -> tuple[Tensor, Tensor, list[int], int]:
    if not isinstance(x, Tensor) or x.dtype in (torch.float64, torch.int64):
        raise _refuse(op, f"dtype {getattr(x, 'dtype', None)} (64-bit keys)")
    (d,) = _dims(op, x, dim) or [0]
    rows, m, n, _ = _rows(op, x, [d], MAX_SORT)
    vals = torch.empty(m, n, dtype=x.dtype, device=x.device)
    idx = torch.empty(m, n, dtype=torch.int64, device=x.device)
    _run("sort", rows, m, n, vals, idx, "fp32", desc=descending, is_float=x.dtype.is_floating_point)
    return vals, idx, [i for i in range(x.dim()) if i != d] + [d], n


def _plan_sort(x: Any, dim: Any = -1, descending: bool = False, *, stable: Any = None) -> Plan | None:
    """sort's C++ plan: aten's kernel (``aten_plan``) for the calls the implementation would hand
    it anyway, decided by dtype and shape alone: 64-bit keys (an MoE router's int64 expert ids),
    rows past MAX_SORT. So those calls skip the Python refusal (2-3x aten's time on the H200).
    None (the implementation) for the rest."""
    if not isinstance(x, Tensor) or not isinstance(dim, int) or x.dim() == 0 or not -x.dim() <= dim < x.dim():
        return None
    if x.dtype in (torch.float64, torch.int64) or x.shape[dim] > MAX_SORT:
        return aten_plan()
    return None


def _unrows(t: Tensor, x: Tensor, perm: list[int], last: int) -> Tensor:
    shape = [x.shape[i] for i in perm[:-1]] + [last]
    inv = [perm.index(i) for i in range(x.dim())]
    v = t.reshape(shape).permute(*inv)
    # contiguous as aten returns it: torch.empty's strides (.contiguous() keeps a size-1 dim's odd one)
    if v.stride() == tuple(contiguous_strides(v.shape)):
        return v
    return torch.empty(v.shape, dtype=v.dtype, device=v.device).copy_(v)


def sort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool | None = None) -> tuple[Tensor, Tensor]:
    """A stable sort along ``dim`` (aten's unstable sort may order ties either way)."""
    if isinstance(x, Tensor) and (x.dim() == 0 or x.numel() == 0):
        return x.clone(), torch.zeros(x.shape, dtype=torch.int64, device=x.device)
    vals, idx, perm, n = _sort_rows("sort", x, dim, descending)
    return _unrows(vals, x, perm, n), _unrows(idx, x, perm, n)


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    p = _plan_topk(x, k, dim, largest, sorted)
    if p is not None and not p.aten:  # a short row and a small k: one launch
        return run(p, [x, k, dim, largest, sorted])
    if not isinstance(x, Tensor) or x.dim() == 0 or x.numel() == 0:
        raise _refuse("topk", "a 0-dim or empty self")
    if x.dtype == torch.bool:
        raise _refuse("topk", "bool (aten has no topk of bool: its error)")
    d = dim % x.dim()
    if not 0 <= k <= x.shape[d]:
        raise _refuse("topk", f"k={k}")
    vals, idx, perm, n = _sort_rows("topk", x, dim, largest)
    return _unrows(vals[:, :k], x, perm, k), _unrows(idx[:, :k], x, perm, k)


@triton.jit
def _topk_rows_kernel(x, vals, idx, M, N, sr, sc, K: tl.constexpr, LARGEST: tl.constexpr, IS_FLOAT: tl.constexpr,
                      BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    """The K largest (smallest) of each row of N elements, in order, for a short row and a small K
    (an MoE router's (tokens, experts) scores): BLOCK_R rows a program, K rounds of an argmax over
    order-preserving int64 keys (NaN above every value, -0.0 == 0.0, ties to the lower index),
    each round's pick taken out of the next. x is read through its row and column strides."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    rm = rows < M
    m = rm[:, None] & (cols[None, :] < N)
    base = x + rows * sr
    key = _order_key(tl.load(base[:, None] + cols[None, :].to(tl.int64) * sc, mask=m), IS_FLOAT).to(tl.int64)
    if not LARGEST:
        key = -key - 1  # order reversed, no overflow: the keys fit in 32 bits
    low = -9223372036854775807 - 1
    key = tl.where(m, key, low)
    for j in tl.static_range(K):
        _, bi = tl.max(key, 1, return_indices=True, return_indices_tie_break_left=True)
        tl.store(vals + rows * K + j, tl.load(base + bi.to(tl.int64) * sc, mask=rm), mask=rm)
        tl.store(idx + rows * K + j, bi.to(tl.int64), mask=rm)
        key = tl.where(cols[None, :] == bi[:, None], low, key)


_topk_rows = jit(_topk_rows_kernel)
TOPK_MAX_N, TOPK_MAX_K = 1024, 16  # the row kernel's bounds; other calls sort whole rows


def _plan_topk(x: Any, k: Any, dim: Any = -1, largest: bool = True, sorted: bool = True) -> Plan | None:
    """topk along the last dim of a row of at most TOPK_MAX_N elements, k <= TOPK_MAX_K: one launch
    (``_topk_rows``), values and int64 indices contiguous as aten returns them, sorted whatever
    ``sorted`` says (aten leaves that order unspecified). x in its own strides where its leading
    dims nest. aten's plan, decided by the key: what the implementation hands to aten anyway
    (64-bit or bool dtypes, a 0-dim or empty x, rows past MAX_SORT: top-k sampling over a
    vocabulary, a dim or k out of range: aten's error), and on a device every other call the
    kernel does not take (another dim, longer rows, a larger k), where the implementation's
    host time and whole-row sort cost more than aten's kernel. None (the implementation, which
    sorts whole rows): those on the interpreter."""
    if (not isinstance(x, Tensor) or x.layout != torch.strided or not isinstance(k, int) or isinstance(k, bool)
            or not isinstance(dim, int)):
        return None
    if (x.dim() == 0 or x.numel() == 0 or x.dtype in (torch.float64, torch.int64, torch.bool) or x.dtype not in _REAL
            or not -x.dim() <= dim < x.dim() or not 0 <= k <= x.shape[dim] or x.shape[dim] > MAX_SORT):
        return aten_plan()
    n = x.shape[-1]
    if dim % x.dim() != x.dim() - 1 or k > TOPK_MAX_K or n > TOPK_MAX_N:
        return aten_plan() if is_cuda_like(x) else None
    shape = (*x.shape[:-1], k)
    outs = (Buffer(shape, x.dtype), Buffer(shape, torch.int64))
    m = x.numel() // n if n else 0
    if m == 0 or k == 0:
        return Plan(outs, (), (0, 1))
    lead = flat_stride(x.shape[:-1], x.stride()[:-1])  # the rows' stride, where x's leading dims nest
    contiguous = () if lead is not None else (0,)
    sr, sc = (lead, x.stride(-1)) if lead is not None else (n, 1)
    block_n = next_pow2(n)
    block_r = max(1, min(next_pow2(m), 1024 // block_n, 64))
    L = launch(_topk_rows, (triton.cdiv(m, block_r),), In(0), Out(0), Out(1), m, n, sr, sc, K=k, LARGEST=bool(largest),
               IS_FLOAT=x.dtype.is_floating_point, BLOCK_R=block_r, BLOCK_N=block_n,
               num_warps=4 if block_r * block_n >= 1024 else 1)
    return Plan(outs, (L,), (0, 1), contiguous=contiguous)


# ----------------------------------------------------------------- reductions
def _reduce(op: str, x: Tensor, dim: Any, keepdim: bool, rd: torch.dtype, ct: str, corr: float = 0.0,
            two: torch.dtype | None = None) -> Any:
    if not isinstance(x, Tensor):
        raise _refuse(op, "self")
    dims = _dims(op, x, dim)
    rows, m, n, kept = _rows(op, x, dims, MAX_N)
    shape = _keep(kept, x, dims, keepdim)
    out = torch.empty(shape, dtype=rd, device=x.device)
    out2 = None if two is None else torch.empty(shape, dtype=two, device=x.device)
    _run(op, rows, m, n, out, out2, ct, corr, is_float=ct in ("fp32", "fp64"))
    return out if out2 is None else (out, out2)


def _minmax(op: str) -> tuple[Callable, Callable]:
    def dim_fn(x: Tensor, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]:
        if not isinstance(x, Tensor) or x.dtype == torch.bool:
            raise _refuse(op, "a bool self")
        return _reduce(op, x, [dim], keepdim, x.dtype, _ct_of(op, x.dtype), two=torch.int64)

    def full_fn(x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.dtype == torch.bool:
            raise _refuse(op, "a bool self")
        return _reduce(op, x, None, False, x.dtype, _ct_of(op, x.dtype), two=torch.int64)[0]

    return dim_fn, full_fn


def _prod_dtype(x: Tensor, dtype: Any) -> torch.dtype:
    return dtype or (torch.int64 if not x.dtype.is_floating_point else x.dtype)


def prod_dim(x: Tensor, dim: int, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> Tensor:
    rd = _prod_dtype(x, dtype)
    return _reduce("prod", x, [dim], keepdim, rd, _ct_of("prod", rd))


def prod(x: Tensor, *, dtype: torch.dtype | None = None) -> Tensor:
    rd = _prod_dtype(x, dtype)
    return _reduce("prod", x, None, False, rd, _ct_of("prod", rd))


def _logic(op: str) -> tuple[Callable, Callable]:
    def rd(x: Tensor) -> torch.dtype:
        return torch.uint8 if x.dtype == torch.uint8 else torch.bool

    def dim_fn(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        if isinstance(dim, (list, tuple)) and len(dim) == 0:
            raise _refuse(op, "an empty dim list (aten reduces nothing)")
        return _reduce(op, x, dim, keepdim, rd(x), "i1")

    def full_fn(x: Tensor) -> Tensor:
        return _reduce(op, x, None, False, rd(x), "i1")

    return dim_fn, full_fn


def logsumexp(x: Tensor, dim: Sequence[int], keepdim: bool = False) -> Tensor:
    if not isinstance(x, Tensor):
        raise _refuse("logsumexp", "self")
    rd = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    return _reduce("logsumexp", x, dim, keepdim, rd, _ct_of("logsumexp", rd))


def _moments(op: str, which: str) -> Callable:
    """var/std (which "var"/"std") and var_mean/std_mean ("var_mean"/"std_mean")."""
    def fn(x: Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
        if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
            raise _refuse(op, f"dtype {getattr(x, 'dtype', None)}")
        corr = 1.0 if correction is None else float(correction)
        kop = "std_mean" if which.startswith("std") else "var_mean"
        var, mean = _reduce(kop, x, dim, keepdim, x.dtype, _ct_of(op, x.dtype), corr, two=x.dtype)
        return (var, mean) if which.endswith("_mean") else var

    return fn


def linalg_vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                       dtype: torch.dtype | None = None) -> Tensor:
    """The vector p-norm over ``dim`` (all dims when None): p = 2, 1, inf, -inf, 0 or another
    positive p."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or (dtype is not None and dtype not in FLOAT_DTYPES):
        raise _refuse("linalg_vector_norm", "a non-float self or dtype")
    rd = dtype or x.dtype
    p = float(ord)
    kop = {2.0: "norm2", 1.0: "norm1", float("inf"): "norminf", float("-inf"): "normninf", 0.0: "norm0"}.get(p, "normp")
    if kop == "normp" and not p > 0:
        raise _refuse("linalg_vector_norm", f"ord={ord}")
    if kop in ("norminf", "normninf") and x.numel() == 0:
        raise _refuse("linalg_vector_norm", "an empty input with ord=inf")  # aten's error
    return _reduce(kop, x, dim, keepdim, rd, _ct_of("linalg_vector_norm", rd), p if kop == "normp" else 0.0)


_max_dim, _max_full = _minmax("max")
_min_dim, _min_full = _minmax("min")
_any_dim, _any_full = _logic("any")
_all_dim, _all_full = _logic("all")

ATEN: dict[str, Callable] = {
    "cumsum": _scan("cumsum"), "cumprod": _scan("cumprod"),
    "sort": lambda self, dim=-1, descending=False: sort(self, dim, descending),
    "sort.stable": lambda self, *, stable=None, dim=-1, descending=False: sort(self, dim, descending),
    "topk": topk,
    "max.dim": _max_dim, "min.dim": _min_dim, "max": _max_full, "min": _min_full,
    "prod": prod, "prod.dim_int": prod_dim,
    "any": _any_full, "any.dim": _any_dim, "any.dims": _any_dim,
    "all": _all_full, "all.dim": _all_dim, "all.dims": _all_dim,
    "logsumexp": logsumexp, "linalg_vector_norm": linalg_vector_norm,
    "var.correction": _moments("var", "var"), "std.correction": _moments("std", "std"),
    "var_mean.correction": _moments("var_mean", "var_mean"), "std_mean.correction": _moments("std_mean", "std_mean"),
}
# ----------------------------------------------------------------- plans of the row reductions
#: max/min and the norms on a device: aten's kernel for many short rows (a program per row of a
#: few dozen elements idles most of its lanes) and for long rows (H200, 2026-12-05, device time
#: against aten's: 16384 rows of 32 or 64 bf16 1.59-1.63x, 8192 rows of 3200 bf16 1.25x; 1024
#: rows of 16 to 128 0.70-0.80x, 4096 fp32 rows of 1024 0.86x). logsumexp (aten's is composite:
#: 0.08-0.16x) and var/std (0.48-0.67x) take the kernel at every size
_ATEN_SHORT_ROWS = (4096, 128)  # more rows than this, of fewer elements than that
_ATEN_LONG_ROW = 2048


def _aten_one_kernel(op: str, x: Tensor) -> bool:
    """max/min and the norms on a device, where aten's kernel is one strided reduction
    (logsumexp and var/std are several kernels in aten)."""
    return is_cuda_like(x) and (op in ("max", "min") or op.startswith("norm"))


def _aten_serves(op: str, x: Tensor, m: int, n: int) -> bool:
    return _aten_one_kernel(op, x) and ((m > _ATEN_SHORT_ROWS[0] and n < _ATEN_SHORT_ROWS[1]) or n > _ATEN_LONG_ROW)


def _aten_copies_less(op: str, x: Tensor) -> bool:
    """A layout ``_row`` cannot read in place costs a copy kernel first: on a device, aten's
    one strided kernel for max/min and the norms is then the cheaper (a copy and our kernel
    measured 1.34x aten's norm, Swin-v2's cosine attention, H200 2026-12-05); logsumexp and
    var/std keep the copy and ours."""
    return _aten_one_kernel(op, x)


def _plan_rows(op: str, x: Any, dim: Any, keepdim: Any, rd: torch.dtype, ct: str, corr: float = 0.0,
               two: torch.dtype | None = None) -> Plan | None:
    """One ``_row`` launch, a program per row, for a reduction over the trailing dims:
    ``x.max(-1)``, ``F.normalize``'s norm (on an attention head's transposed view too), a
    router's ``logsumexp``. The rows are read in place where :func:`~._layout.rows_layout` finds
    a layout (any view whose reduced dims merge into one and whose other dims into at most
    three); other inputs are made contiguous first, or on a device go to aten
    (:func:`_aten_copies_less`).
    aten's plan, decided by the key's sizes: a 0-dim input, an empty reduction, rows past MAX_N
    (the implementation hands those to aten on every call), and on a device the row counts and
    lengths where aten's kernel measured faster (:func:`_aten_serves`) and other dims than the
    trailing ones. None (the Python implementation, which moves the dims last): other dims on
    the interpreter."""
    if not isinstance(keepdim, bool):
        return None
    if x.dim() == 0:
        return aten_plan()
    nd = x.dim()
    try:
        dims = _dims(op, x, dim)
    except NotImplementedError:  # a dim out of range or repeated: aten's error
        return aten_plan()
    if dims != list(range(nd - len(dims), nd)):
        # other dims: the implementation's transposed copy and a launch, after 20-50 us of Python,
        # cost more than aten's one kernel on a device (sentence embeddings' max over tokens)
        return aten_plan() if is_cuda_like(x) else None
    n = 1
    for d in dims:
        n *= x.shape[d]
    if n == 0 or n > MAX_N:
        return aten_plan()
    shape = tuple(_keep([x.shape[d] for d in range(nd) if d not in dims], x, dims, keepdim))
    outs = (Buffer(shape, rd),) + (() if two is None else (Buffer(shape, two),))
    result = (0,) if two is None else (0, 1)
    m = x.numel() // n
    if m == 0:
        return Plan(outs, (), result)
    if _aten_serves(op, x, m, n):
        return aten_plan()
    layout = rows_layout(x, dims)
    if layout is None and _aten_copies_less(op, x):
        return aten_plan()
    block = next_pow2(n)
    L = launch(_row, (m,), In(0), Out(0), Out(0) if two is None else Out(1), n, float(corr),
               *(layout or contiguous_rows(n)), OP=op, CT=ct, BLOCK=block, DESC=False,
               IS_FLOAT=ct in ("fp32", "fp64"), num_warps=_num_warps(block))
    return Plan(outs, (L,), result, contiguous=() if layout is not None else (0,))


def _plan_minmax(op: str) -> Callable:
    def planner(x: Any, dim: Any, keepdim: Any = False) -> Plan | None:
        """max.dim/min.dim: values and int64 indices (the first of equal ones, NaN first)."""
        if not isinstance(x, Tensor) or x.dtype not in _REAL or x.dtype == torch.bool or not isinstance(dim, int):
            return None
        return _plan_rows(op, x, dim, keepdim, x.dtype, _CT.get(x.dtype, ""), two=torch.int64)

    return planner


def _plan_logsumexp(x: Any, dim: Any, keepdim: Any = False) -> Plan | None:
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
        return None
    return _plan_rows("logsumexp", x, dim, keepdim, x.dtype, _CT[x.dtype])


@value_keyed  # ord and dtype pick the kernel: baked into the plan
def _plan_vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: Any = False, *, dtype: Any = None) -> Plan | None:
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or (dtype is not None and dtype not in FLOAT_DTYPES):
        return None
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        return None
    p = float(ord)
    kop = {2.0: "norm2", 1.0: "norm1", float("inf"): "norminf", float("-inf"): "normninf", 0.0: "norm0"}.get(p, "normp")
    if kop == "normp" and not p > 0:
        return None
    rd = dtype or x.dtype
    return _plan_rows(kop, x, dim, keepdim, rd, _CT[rd], p if kop == "normp" else 0.0)


def _plan_moments(which: str) -> Callable:
    @value_keyed  # the correction is baked into the plan
    def planner(x: Any, dim: Any = None, *, correction: Any = None, keepdim: Any = False) -> Plan | None:
        """var/std (and with their means) over the trailing dims."""
        if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
            return None
        if correction is not None and (isinstance(correction, bool) or not isinstance(correction, (int, float))):
            return None
        corr = 1.0 if correction is None else float(correction)
        kop = "std_mean" if which.startswith("std") else "var_mean"
        p = _plan_rows(kop, x, dim, keepdim, x.dtype, _CT[x.dtype], corr, two=x.dtype)
        if p is None or p.aten or which.endswith("_mean"):
            return p
        return p._replace(result=(0,))  # var/std alone: the mean is a scratch output

    return planner


PLANNERS: dict[str, Callable] = {
    "cumsum": _plan_cumsum, "topk": _plan_topk,
    "max.dim": _plan_minmax("max"), "min.dim": _plan_minmax("min"), "logsumexp": _plan_logsumexp,
    "linalg_vector_norm": _plan_vector_norm,
    "var.correction": _plan_moments("var"), "std.correction": _plan_moments("std"),
    "var_mean.correction": _plan_moments("var_mean"), "std_mean.correction": _plan_moments("std_mean"),
    "sort": lambda self, dim=-1, descending=False: _plan_sort(self, dim, descending),
    "sort.stable": lambda self, *, stable=None, dim=-1, descending=False: _plan_sort(self, dim, descending),
}
ATEN = with_aten_fallback(ATEN)
