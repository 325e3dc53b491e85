"""softmax and log_softmax over any dim.

Same (O, R, K) mapping as the reductions: the softmax dim is R, tiles are
[BLOCK_K kept positions, BLOCK_R]. Rows that fit in one tile are read once
(the memory-bound optimum: one read, one write); longer rows use an online
max/sum pass followed by a normalizing pass.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from . import _prologue
from ._common import FLOAT_DTYPES, cdiv, check_dtype, jit, next_pow2, normalize_dims
from ._plan import Buffer, In, Out, Plan, aten_plan, launch

Tensor = torch.Tensor


@triton.jit
def _softmax_kernel(x, out, K, R, sO, sK, sR, LOG: tl.constexpr, ONE_PASS: tl.constexpr,
                    BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    # one grid axis of (o, k tile) pairs: a y axis of k tiles stops at 65535 (the rows of a
    # long-context attention's scores: 131072 rows of 4096 take 65536 tiles of 2)
    nkb = tl.cdiv(K, BLOCK_K)
    pid = tl.program_id(0)
    o = (pid // nkb).to(tl.int64)
    ks = (pid % nkb) * BLOCK_K + tl.arange(0, BLOCK_K)
    kmask = ks < K
    xb = x + o * sO
    ob = out + o * sO
    kofs = ks[:, None].to(tl.int64) * sK
    if ONE_PASS:
        rs = tl.arange(0, BLOCK_R)
        m = kmask[:, None] & (rs < R)[None, :]
        offs = kofs + rs[None, :].to(tl.int64) * sR
        v = tl.load(xb + offs, mask=m, other=float("-inf")).to(ACC)
        mx = tl.max(v, 1)
        e = tl.exp(v - mx[:, None])
        s = tl.sum(e, 1)
        if LOG:
            y = v - mx[:, None] - tl.log(s)[:, None]
        else:
            y = e / s[:, None]
        tl.store(ob + offs, y.to(out.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_K], float("-inf"), ACC)
        s = tl.zeros([BLOCK_K], ACC)
        for r0 in range(0, R, BLOCK_R):
            rs = r0 + tl.arange(0, BLOCK_R)
            m = kmask[:, None] & (rs < R)[None, :]
            v = tl.load(xb + kofs + rs[None, :].to(tl.int64) * sR, mask=m, other=float("-inf")).to(ACC)
            nm = tl.maximum(mx, tl.max(v, 1))
            # a row whose blocks so far are all -inf (top-k sampling's masked logits) keeps
            # s = 0: subtracting a -inf max would give exp(-inf + inf) = NaN
            sm = tl.where(nm == float("-inf"), 0.0, nm)
            s = s * tl.exp(mx - sm) + tl.sum(tl.exp(v - sm[:, None]), 1)
            mx = nm
        for r0 in range(0, R, BLOCK_R):
            rs = r0 + tl.arange(0, BLOCK_R)
            m = kmask[:, None] & (rs < R)[None, :]
            offs = kofs + rs[None, :].to(tl.int64) * sR
            v = tl.load(xb + offs, mask=m, other=float("-inf")).to(ACC)
            if LOG:
                y = v - mx[:, None] - tl.log(s)[:, None]
            else:
                y = tl.exp(v - mx[:, None]) / s[:, None]
            tl.store(ob + offs, y.to(out.dtype.element_ty), mask=m)


_softmax = jit(_softmax_kernel)

# Per (device kind, R, K==1) launch parameters, computed once: the hot path is a dict hit.
# Bounded like fused._silu_plans: a model meets a handful of sizes, a sweep over sizes must
# not grow it forever; when full it is cleared (a plan is a few arithmetic operations).
_PLANS_MAX = 4096
_plans: dict[tuple, tuple] = {}


def _plan(on_gpu: bool, r: int, rows: bool) -> tuple:
    key = (on_gpu, r, rows)
    p = _plans.get(key)
    if p is None:
        max_r = 16384 if on_gpu else 1024
        one_pass = r <= max_r
        block_r = next_pow2(r) if one_pass else (4096 if on_gpu else 512)
        tile = 8192 if on_gpu else 2048
        block_k = max(1, min(tile // block_r, 64))
        warps = 4 if not on_gpu else (16 if block_r >= 8192 else 8 if block_r >= 2048 else 4)
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        p = _plans[key] = (one_pass, block_r, block_k, warps)
    return p


def geometry(shape: Any, d: int, on_gpu: bool) -> tuple:
    """The launch of a softmax (or its gradient) over dim ``d`` of a contiguous, non-empty
    ``shape``: (grid, (K, R, sO, sK, sR), ONE_PASS, BLOCK_K, BLOCK_R, num_warps). Rows (the
    softmax dim last) become the tile's kept axis; the grid is one axis of (o, k tile) pairs."""
    r = shape[d]
    k = 1
    for s in shape[d + 1:]:
        k *= s
    o = 1
    for s in shape[:d]:
        o *= s
    rows = k == 1
    one_pass, block_r, block_k, warps = _plan(on_gpu, r, rows)
    if rows:  # rows become the tile's kept axis
        o, k, sO, sK, sR = 1, o, 0, r, 1
    else:
        sO, sK, sR = r * k, 1, k
        block_k = min(block_k, next_pow2(k))
    return (o * cdiv(k, block_k),), (k, r, sO, sK, sR), one_pass, block_k, block_r, warps


def _run(x: Tensor, dim: int, dtype: torch.dtype | None, log: bool, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.{name}: expected a Tensor, got {type(x).__name__}")
    check_dtype(name, x, FLOAT_DTYPES)
    odt = x.dtype if dtype is None else dtype
    if odt not in FLOAT_DTYPES:
        raise TypeError(f"tritonjit.{name}: unsupported dtype {odt}")
    nd = x.dim()
    (d,) = normalize_dims(name, dim, nd) if nd else (0,)
    if not x.is_contiguous():
        x = x.contiguous()
    out = torch.empty_like(x, dtype=odt)  # x is contiguous here, so is out
    if x.numel() == 0:
        return out
    if nd == 0:
        return out.fill_(0.0 if log else 1.0)
    grid, (k, r, sO, sK, sR), one_pass, block_k, block_r, warps = geometry(x.shape, d, x.device.type != "cpu")
    _softmax[grid](x, out, k, r, sO, sK, sR, LOG=log, ONE_PASS=one_pass, BLOCK_K=block_k, BLOCK_R=block_r,
                   num_warps=warps)
    return out


# Hot path: (shape, dim, dtype, on CPU) -> the whole launch (grid, runtime scalars,
# constexprs, warps), built once by _fast_plan; a call is one dict hit, one
# empty_like and the launch. Only contiguous floating inputs with numel > 0 and
# ndim >= 1 and an int dim in range get a plan; everything else takes _run (validation, errors, edge cases).
_FAST_MAX = 4096
_fast: dict[tuple, tuple] = {}
_fast_get = _fast.get


def _fast_plan(key: tuple) -> tuple | None:
    shape, dim, dtype, on_cpu = key
    nd = len(shape)
    if dtype not in FLOAT_DTYPES or nd == 0 or not -nd <= dim < nd:
        return None
    if 0 in shape:
        return None
    if len(_fast) >= _FAST_MAX:
        _fast.clear()
    p = _fast[key] = geometry(shape, dim % nd, not on_cpu)
    return p


def _make(log: bool, name: str, doc: str):
    def fn(x: Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> Tensor:
        if dtype is None and dim.__class__ is int and x.__class__ is Tensor and x.is_contiguous():
            key = (x.shape, dim, x.dtype, x.is_cpu)
            p = _fast_get(key) or _fast_plan(key)
            if p is not None:
                grid, (k, r, sO, sK, sR), one_pass, block_k, block_r, warps = p
                out = _prologue.like(x)
                _softmax[grid](x, out, k, r, sO, sK, sR, log, one_pass, block_k, block_r, num_warps=warps)
                return out
        return _run(x, dim, dtype, log, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


softmax = _make(False, "softmax", "exp(x - max) / sum, in fp32; ``dtype`` sets the output dtype (aten's semantics).")
log_softmax = _make(True, "log_softmax", "x - max - log(sum(exp(x - max))), in fp32.")


# ----------------------------------------------------------------- plans
def plan_softmax(log: bool, x: Any, dim: int, dtype: Any = None) -> Plan | None:
    """softmax / log_softmax into ``dtype`` (None: x's) for the C++ operator path (see _plan.py)."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
        return None
    odt = x.dtype if dtype is None else dtype
    if odt not in FLOAT_DTYPES:
        return None
    if x.dim() == 0:  # one value (1, or 0 for log_softmax): aten's kernel, decided by the key
        return aten_plan()
    out = (Buffer(tuple(x.shape), odt),)
    contiguous = () if x.is_contiguous() else (0,)
    if x.numel() == 0:
        return Plan(out, (), contiguous=contiguous)
    grid, (k, r, sO, sK, sR), one_pass, block_k, block_r, warps = geometry(x.shape, dim % x.dim(), x.device.type != "cpu")
    L = launch(_softmax, grid, In(0), Out(0), k, r, sO, sK, sR, LOG=log, ONE_PASS=one_pass, BLOCK_K=block_k,
               BLOCK_R=block_r, num_warps=warps)
    return Plan(out, (L,), contiguous=contiguous)


PLANNERS: dict[str, Any] = {
    "_softmax": lambda x, dim, half_to_float: plan_softmax(False, x, dim, torch.float32 if half_to_float else None),
    "_log_softmax": lambda x, dim, half_to_float: plan_softmax(True, x, dim, torch.float32 if half_to_float else None),
}
