"""``nll_loss_forward``: the loss half of cross-entropy in a training loop (log_softmax, then
this). Output and ``total_weight`` as aten computes them: per row ``-w[t] * x[i, t]`` (0 where
``t == ignore_index``), summed, or divided by the summed weights of the rows that count.
``total_weight`` is that sum of weights (of the non-ignored targets) for mean and sum, 0 for
``reduction="none"`` over (N, C); a (C,) input with ``reduction="none"`` is its sum (a 0-dim
output, ``total_weight`` the target's weight), as aten's kernels compute it.

A reduction of up to ``SPLIT_ROWS`` rows runs as one program (one launch) over blocks of up
to 4096 rows; more rows split over programs of ``_BLOCK`` rows, whose partial sums a second
one-program launch adds in order (no atomics: the same result every run). One program
looping over many rows is latency-bound: on the H200, with blocks of 1024 rows and 4 warps,
it read 1.3-1.9x aten's device time from 8k rows, where the split reads a fraction of it.
``reduction="none"`` is one program per block of rows (program 0 also writes the zero
``total_weight``). Targets out of range: where the host may read them
(CPU: the interpreter backend) the Python implementation checks them and hands such calls
to aten, which raises its error, and the planner returns None (so CPU calls run the
Python implementation, which does that check). On a device nothing reads them on the host
(no synchronization): the kernel asserts ``0 <= t < C`` itself (``CHECK``, compiled in by
``DEVICE_ASSERT``), as aten's CUDA kernel does, so a bad target surfaces as a device-side
assert at the next synchronization.

aten's kernels differ on one case: a (C,) input with ``reduction="mean"`` and an ignored
target gives ``0 / 0`` (NaN) on CPU and 0 on CUDA. The kernel computes the CPU result, so on
a device such calls go to aten's kernel.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import DEVICE_ASSERT, FLOAT_DTYPES, cdiv, host_check_allowed, jit, next_pow2, opmath
from ._fallback import with_aten_fallback
from ._plan import Buffer, In, Launch, Out, Plan, Tmp, launch, run
from .elementwise import _refuse

Tensor = torch.Tensor
#: rows a program of ``reduction="none"`` or of a split reduction reads
_BLOCK = 1024
#: the most rows a reduction reads in one program (one launch): a block of the rows rounded up
#: to a power of two (from 128, at most _ONE_BLOCK: 8k rows take two), 4-16 warps. Above it,
#: the split (two launches and a buffer of partial sums: about 5 us more host time a call on
#: the H200, which a one-program loop costs in device time from about 8k rows). H200, bf16 and
#: fp32 log-probs of 32k classes, device time x aten's: one program 0.3-0.4x to 2k rows, 0.6x
#: at 4k, 0.86x at 8k; the split 0.4x at 4k-8k rows, 0.26x at 16k, 0.15x at 32k, 0.05x at 128k
SPLIT_ROWS = 8192
_ONE_BLOCK = 4096


@triton.jit
def _row_terms(x, target, weight, rows, N, C, sx0, sx1, ignore, ACC: tl.constexpr, HAS_W: tl.constexpr,
               CHECK: tl.constexpr):
    """The rows' loss terms ``-w[t] * x[row, t]`` and weights ``w[t]`` in ACC, 0 where a row is
    past N or its target is ignored (the one gather every program of this file makes)."""
    m = rows < N
    t = tl.load(target + rows, mask=m, other=ignore).to(tl.int64)
    if CHECK:
        tl.device_assert((t == ignore) | ((t >= 0) & (t < C)), "nll_loss: target out of bounds")
    ok = m & (t != ignore) & (t >= 0) & (t < C)
    v = tl.load(x + rows.to(tl.int64) * sx0 + t * sx1, mask=ok, other=0.0).to(ACC)
    if HAS_W:
        w = tl.load(weight + t, mask=ok, other=0.0).to(ACC)
    else:
        w = ok.to(ACC)
    return tl.where(ok, -v * w, 0.0), tl.where(ok, w, 0.0)


@triton.jit
def _store_reduced(acc, wacc, out, total, MEAN: tl.constexpr):
    """The loss terms' sum (divided by the weights' sum for a mean) into ``out``, the weights'
    sum into ``total``: the last step of every reduction of this file."""
    s = tl.sum(acc, 0)
    tw = tl.sum(wacc, 0)
    if MEAN:
        s = s / tw
    tl.store(out, s.to(out.dtype.element_ty))
    tl.store(total, tw.to(total.dtype.element_ty))


@triton.jit
def _nll_kernel(x, target, weight, out, total, N, C, sx0, sx1, ignore, HAS_W: tl.constexpr, REDUCE: tl.constexpr,
                MEAN: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    if REDUCE:
        acc = tl.zeros([BLOCK], ACC)
        wacc = tl.zeros([BLOCK], ACC)
        for start in range(0, N, BLOCK):
            loss, w = _row_terms(x, target, weight, start + tl.arange(0, BLOCK), N, C, sx0, sx1, ignore, ACC, HAS_W,
                                 CHECK)
            acc += loss
            wacc += w
        _store_reduced(acc, wacc, out, total, MEAN)
    else:
        pid = tl.program_id(0)
        rows = pid * BLOCK + tl.arange(0, BLOCK)
        loss, w = _row_terms(x, target, weight, rows, N, C, sx0, sx1, ignore, ACC, HAS_W, CHECK)
        tl.store(out + rows, loss.to(out.dtype.element_ty), mask=rows < N)
        if pid == 0:
            tl.store(total, tl.zeros([], ACC).to(total.dtype.element_ty))


_nll = jit(_nll_kernel)


@triton.jit
def _nll_partial_kernel(x, target, weight, part, N, C, sx0, sx1, ignore, HAS_W: tl.constexpr, CHECK: tl.constexpr,
                        BLOCK: tl.constexpr):
    """Program p: the loss and weight sums of rows [p * BLOCK, (p + 1) * BLOCK) into part[p] and
    part[P + p] (part in the opmath type)."""
    ACC: tl.constexpr = part.dtype.element_ty
    pid = tl.program_id(0)
    loss, w = _row_terms(x, target, weight, pid * BLOCK + tl.arange(0, BLOCK), N, C, sx0, sx1, ignore, ACC, HAS_W,
                         CHECK)
    tl.store(part + pid, tl.sum(loss, 0))
    tl.store(part + tl.num_programs(0) + pid, tl.sum(w, 0))


@triton.jit
def _nll_finish_kernel(part, out, total, P, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    """One program: the P partial sums of _nll_partial_kernel added in order, then divided by
    the summed weights for a mean."""
    ACC: tl.constexpr = part.dtype.element_ty
    acc = tl.zeros([BLOCK], ACC)
    wacc = tl.zeros([BLOCK], ACC)
    for start in range(0, P, BLOCK):
        i = start + tl.arange(0, BLOCK)
        m = i < P
        acc += tl.load(part + i, mask=m, other=0.0)
        wacc += tl.load(part + P + i, mask=m, other=0.0)
    _store_reduced(acc, wacc, out, total, MEAN)


_nll_partial = jit(_nll_partial_kernel)
_nll_finish = jit(_nll_finish_kernel)


def _shapes(x: Any, target: Any, weight: Any, reduction: Any) -> tuple[int, int] | str:
    """(N, C) of a call the kernel takes, else why not."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or x.dim() not in (1, 2):
        return "self other than a (N, C) or (C,) float tensor"
    if not isinstance(target, Tensor) or target.dtype not in (torch.int64, torch.int32) or target.dim() != x.dim() - 1:
        return "target"
    if reduction not in (0, 1, 2):
        return f"reduction {reduction}"
    n, c = (1, x.shape[0]) if x.dim() == 1 else tuple(x.shape)
    if target.numel() != n or (weight is not None and (not isinstance(weight, Tensor) or weight.numel() != c
                                                       or weight.dim() != 1 or weight.dtype != x.dtype)):
        return "shapes"
    if any(a.device != x.device for a in (target, weight) if a is not None):
        return "tensors on two devices"
    if x.dim() == 1 and reduction == 1 and x.device.type != "cpu":
        return "a (C,) input averaged on a device (aten's device kernel gives 0 for an ignored target)"
    return n, c


def _plan(x: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int, n: int, c: int,
          check: bool) -> Plan:
    """The plan of a validated call (arguments: self 0, target 1, weight 2)."""
    sx0, sx1 = (0, x.stride(0)) if x.dim() == 1 else x.stride()
    contiguous = tuple(i for i, t in ((1, target), (2, weight)) if t is not None and not t.is_contiguous())
    w = In(2) if weight is not None else In(0)
    opts = DEVICE_ASSERT if check else {}
    if reduction == 0 and x.dim() == 2:
        out = Buffer((n,), x.dtype)
        grid = (max(1, (n + _BLOCK - 1) // _BLOCK),)
        L: Launch = launch(_nll, grid, In(0), In(1), w, Out(0), Out(1), n, c, sx0, sx1, ignore_index,
                           HAS_W=weight is not None, REDUCE=False, MEAN=False, CHECK=check, BLOCK=_BLOCK, **opts)
    elif n > SPLIT_ROWS:  # a reduction of many rows: partial sums, then their sum in order
        p = cdiv(n, _BLOCK)
        part = Buffer((2 * p,), opmath(x.dtype))
        parts = launch(_nll_partial, (p,), In(0), In(1), w, Tmp(0), n, c, sx0, sx1, ignore_index,
                       HAS_W=weight is not None, CHECK=check, BLOCK=_BLOCK, num_warps=8, **opts)
        finish = launch(_nll_finish, (1,), Tmp(0), Out(0), Out(1), p, MEAN=reduction == 1,
                        BLOCK=min(next_pow2(p), 1024), num_warps=4)
        outs = (Buffer((), x.dtype), Buffer((), x.dtype))
        return Plan(outs, (parts, finish), (0, 1), temps=(part,), contiguous=contiguous)
    else:  # a reduction, or a (C,) input (its "none" is the sum of one row): one block of the rows
        out = Buffer((), x.dtype)
        block = min(max(next_pow2(n), 128), _ONE_BLOCK)
        L = launch(_nll, (1,), In(0), In(1), w, Out(0), Out(1), n, c, sx0, sx1, ignore_index,
                   HAS_W=weight is not None, REDUCE=True, MEAN=reduction == 1, CHECK=check, BLOCK=block,
                   num_warps=min(max(block // 256, 4), 16), **opts)
    return Plan((out, Buffer((), x.dtype)), (L,), (0, 1), contiguous=contiguous)


def check_targets_on_host(op: str, target: Tensor, ignore_index: int, c: int) -> bool:
    """Where the host may read the targets (CPU), refuse a call with one out of [0, c) (aten's
    kernel then raises its error); True there. False on a device: the kernel asserts instead."""
    if not host_check_allowed(target):
        return False
    t = target.reshape(-1)
    if t.numel() and bool(((t != ignore_index) & ((t < 0) | (t >= c))).any()):
        raise _refuse(op, "a target out of range")  # aten's error
    return True


def nll_loss_forward(x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                     ignore_index: int) -> tuple[Tensor, Tensor]:
    """aten::nll_loss_forward for (N, C) or (C,) inputs."""
    nc = _shapes(x, target, weight, reduction)
    if isinstance(nc, str):
        raise _refuse("nll_loss_forward", nc)
    n, c = nc
    host = check_targets_on_host("nll_loss_forward", target, ignore_index, c)
    return run(_plan(x, target, weight, reduction, ignore_index, n, c, not host),
               [x, target, weight, reduction, ignore_index])


def plan_nll_loss_forward(x: Any, target: Any, weight: Any, reduction: Any, ignore_index: Any) -> Plan | None:
    """The C++ path's plan: one launch, no host read of the targets (the kernel asserts their
    range). None where the host checks them (CPU): the Python implementation does that."""
    nc = _shapes(x, target, weight, reduction)
    if isinstance(nc, str) or host_check_allowed(target):
        return None
    return _plan(x, target, weight, reduction, ignore_index, *nc, True)


ATEN: dict[str, Callable[..., Any]] = {"nll_loss_forward": nll_loss_forward}
ATEN = with_aten_fallback(ATEN)
PLANNERS: dict[str, Callable[..., Any]] = {"nll_loss_forward": plan_nll_loss_forward}
