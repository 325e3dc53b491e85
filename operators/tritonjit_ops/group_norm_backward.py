"""Group norm backward: aten's ``native_group_norm_backward(dy, x, mean, rstd, weight, N, C,
HxW, group, output_mask)``, and the backward of tritonjit's own group_norm.

Three launches, as aten's CUDA kernels split it. Per (sample, channel): ``ds = sum(dy * x)``
and ``db = sum(dy)`` over its HxW elements, in the opmath type, into a temporary. Per (sample,
group), each program a tile of the group's D * HxW elements: the group's sums weighted by
the weight (``sum1``, ``sum2``), then ``dx = rstd * w[c] * dy + c2 * x + c3`` with aten's
``c2 = (sum2 * mean - sum1) * rstd**3 / (D * HxW)`` and ``c3 = -c2 * mean - sum2 * rstd /
(D * HxW)``. Per channel block, over the samples: ``dweight = sum((ds - db * mean) * rstd)``
and ``dbias = sum(db)``. ``x`` is contiguous (aten lays dx out as x, channels-last on the
CPU: other layouts are aten's); the gradient, statistics and weight are read contiguous (the
plan's ``contiguous`` step copies others). dx is contiguous.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit, next_pow2, opmath
from ._plan import Buffer, In, Launch, Out, Plan, Tmp, launch, run

Tensor = torch.Tensor


@triton.jit
def _gn_sums_kernel(dy, x, sums, HW, BLOCK: tl.constexpr):
    """sums[nc, 0] = sum(dy * x), sums[nc, 1] = sum(dy) over the HW elements of (n, c)."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32
    nc = tl.program_id(0).to(tl.int64)
    base = nc * HW
    ds = tl.zeros([BLOCK], ACC)
    db = tl.zeros([BLOCK], ACC)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < HW
        g = tl.load(dy + base + offs, mask=m, other=0.0).to(ACC)
        ds += g * tl.load(x + base + offs, mask=m, other=0.0).to(ACC)
        db += g
    tl.store(sums + nc * 2, tl.sum(ds, 0))
    tl.store(sums + nc * 2 + 1, tl.sum(db, 0))


@triton.jit
def _gn_dx_kernel(dy, x, w, mean, rstd, sums, dx, C, G, HW, D, HAS_W: tl.constexpr, BLOCK_D: tl.constexpr,
                  BLOCK: tl.constexpr):
    """dx over one tile of the D * HW elements of group (n, g) (program (n * G + g, tile))."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32
    ng = tl.program_id(0).to(tl.int64)
    n = ng // G
    c0 = (ng % G) * D
    cs = tl.arange(0, BLOCK_D)
    cm = cs < D
    ds = tl.load(sums + (n * C + c0 + cs) * 2, mask=cm, other=0.0)
    db = tl.load(sums + (n * C + c0 + cs) * 2 + 1, mask=cm, other=0.0)
    if HAS_W:
        gam = tl.load(w + c0 + cs, mask=cm, other=0.0).to(ACC)
        ds = ds * gam
        db = db * gam
    sum1 = tl.sum(ds, 0)
    sum2 = tl.sum(db, 0)
    mu = tl.load(mean + ng).to(ACC)
    r = tl.load(rstd + ng).to(ACC)
    s = tl.full([], 1.0, ACC) / (D * HW)  # D or HW may be a constexpr 1 (Triton's specialization)
    c2 = (sum2 * mu - sum1) * r * r * r * s
    c3 = -c2 * mu - sum2 * r * s
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < D * HW
    base = ng * D * HW
    if HAS_W:
        c1 = r * tl.load(w + c0 + offs // HW, mask=m, other=0.0).to(ACC)
    else:
        c1 = r
    g = tl.load(dy + base + offs, mask=m, other=0.0).to(ACC)
    xv = tl.load(x + base + offs, mask=m, other=0.0).to(ACC)
    tl.store(dx + base + offs, (c1 * g + c2 * xv + c3).to(dx.dtype.element_ty), mask=m)


@triton.jit
def _gn_params_kernel(sums, mean, rstd, dw, db, N, C, G, D, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    """dw[c] = sum_n (ds - db * mean) * rstd and db[c] = sum_n db for a block of channels."""
    ACC: tl.constexpr = sums.dtype.element_ty
    cs = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cm = cs < C
    grp = cs // D
    accw = tl.zeros([BLOCK_C], ACC)
    accb = tl.zeros([BLOCK_C], ACC)
    cs64 = cs.to(tl.int64)
    for n in range(0, N):
        row = cs64 + n * C
        ds = tl.load(sums + row * 2, mask=cm, other=0.0)
        dbv = tl.load(sums + row * 2 + 1, mask=cm, other=0.0)
        if NEED_W:
            mu = tl.load(mean + (grp + n * G), mask=cm, other=0.0).to(ACC)
            r = tl.load(rstd + (grp + n * G), mask=cm, other=0.0).to(ACC)
            accw += (ds - dbv * mu) * r
        accb += dbv
    if NEED_W:
        tl.store(dw + cs, accw.to(dw.dtype.element_ty), mask=cm)
    if NEED_B:
        tl.store(db + cs, accb.to(db.dtype.element_ty), mask=cm)


_gn_sums = jit(_gn_sums_kernel)
_gn_dx = jit(_gn_dx_kernel)
_gn_params = jit(_gn_params_kernel)


def _ints(*vs: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in vs)


def group_norm_backward_plan(dy: Any, x: Any, mean: Any, rstd: Any, weight: Any, N: Any, C: Any, HxW: Any,
                             group: Any, need: Sequence[bool], refs: tuple[Any, ...]) -> Plan | None:
    """The plan of (dx, dweight, dbias), each only where ``need`` asks (dweight only with a
    weight); ``refs`` = plan references of dy, x, mean, rstd, weight. None where aten serves
    the call: another layout of the statistics, dtypes that differ, an empty input."""
    if not (isinstance(x, Tensor) and x.dtype in FLOAT_DTYPES and isinstance(dy, Tensor) and dy.shape == x.shape
            and dy.dtype == x.dtype and dy.device == x.device and _ints(N, C, HxW, group)):
        return None
    if group <= 0 or C <= 0 or C % group or N * C * HxW != x.numel() or x.numel() == 0:
        return None
    if not x.is_contiguous():
        return None  # aten lays dx out as x (a channels-last x's on the CPU)
    for t in (mean, rstd):
        if not (isinstance(t, Tensor) and t.numel() == N * group and t.dtype in FLOAT_DTYPES and t.device == x.device):
            return None
    if weight is not None and not (isinstance(weight, Tensor) and weight.numel() == C and weight.dtype == x.dtype
                                   and weight.device == x.device):
        return None
    # dbias needs no weight (aten's own backward fails without one: its dbias is allocated like
    # the weight); it takes the weight's dtype where there is one, else the input's
    need_x, need_w, need_b = bool(need[0]), bool(need[1]) and weight is not None, bool(need[2])
    pdt = weight.dtype if weight is not None else x.dtype
    on_cpu = x.device.type == "cpu"
    D = C // group
    acc = opmath(x.dtype)
    outs = [Buffer(tuple(x.shape), x.dtype)]
    if need_w:
        outs.append(Buffer((C,), pdt))
    if need_b:
        outs.append(Buffer((C,), pdt))
    result = (0 if need_x else -1, 1 if need_w else -1, (2 if need_w else 1) if need_b else -1)
    dyr, xr, meanr, rstdr, wr = refs
    block = min(next_pow2(HxW), 1024 if on_cpu else 2048)
    launches: list[Launch] = [launch(_gn_sums, (N * C,), dyr, xr, Tmp(0), HxW, BLOCK=block,
                                     num_warps=4 if block <= 1024 else 8)]
    if need_x:
        tile = min(next_pow2(D * HxW), 1024 if on_cpu else 2048)
        launches.append(launch(_gn_dx, (N * group, cdiv(D * HxW, tile)), dyr, xr, wr if wr is not None else xr,
                               meanr, rstdr, Tmp(0), Out(0), C, group, HxW, D, HAS_W=wr is not None,
                               BLOCK_D=next_pow2(D), BLOCK=tile, num_warps=4 if tile <= 1024 else 8))
    if need_w or need_b:
        block_c = min(next_pow2(C), 256)
        launches.append(launch(_gn_params, (cdiv(C, block_c),), Tmp(0), meanr, rstdr, Out(1) if need_w else Out(0),
                               Out(2 if need_w else 1) if need_b else Out(0), N, C, group, D, NEED_W=need_w,
                               NEED_B=need_b, BLOCK_C=block_c))
    contiguous = tuple(i for i, t in zip((0, 2, 3, 4), (dy, mean, rstd, weight))
                       if isinstance(t, Tensor) and not t.is_contiguous())
    return Plan(tuple(outs), tuple(launches), result=result, temps=(Buffer((N * C, 2), acc),),
                contiguous=contiguous)


def plan_native_group_norm_backward(grad_out: Any, x: Any, mean: Any, rstd: Any, weight: Any, N: Any, C: Any,
                                    HxW: Any, group: Any, output_mask: Any) -> Plan | None:
    """aten.native_group_norm_backward: (dx, dweight, dbias), each only where output_mask asks."""
    return group_norm_backward_plan(grad_out, x, mean, rstd, weight, N, C, HxW, group, output_mask,
                                    (In(0), In(1), In(2), In(3), In(4) if weight is not None else None))


def native_group_norm_backward(grad_out: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor | None,
                               N: int, C: int, HxW: int, group: int, output_mask: Sequence[bool]
                               ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    args = (grad_out, x, mean, rstd, weight, N, C, HxW, group, output_mask)
    plan = plan_native_group_norm_backward(*args)
    if plan is None:
        raise NotImplementedError("tritonjit native_group_norm_backward: no kernel for these arguments (float "
                                  "tensors of one dtype, statistics of N x group elements, a non-empty input "
                                  "expected)")
    return run(plan, args)


PLANNERS: dict[str, Any] = {"native_group_norm_backward": plan_native_group_norm_backward}
