"""``nll_loss_forward``: the loss half of cross-entropy in a training loop (log_softmax, then
this). Output and ``total_weight`` as aten computes them: per row ``-w[t] * x[i, t]`` (0 where
``t == ignore_index``), summed, or divided by the summed weights of the rows that count.
``total_weight`` is that sum of weights (of the non-ignored targets) for mean and sum, 0 for
``reduction="none"`` over (N, C); a (C,) input with ``reduction="none"`` is its sum (a 0-dim
output, ``total_weight`` the target's weight), as aten's kernels compute it.

A reduction runs as one program looping over the rows (one launch, no atomics, the same
order every run); ``reduction="none"`` is one program per block of rows (program 0 also
writes the zero ``total_weight``). Targets out of range: where the host may read them
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

from ._common import DEVICE_ASSERT, FLOAT_DTYPES, host_check_allowed, jit
from ._fallback import with_aten_fallback
from ._plan import Buffer, In, Launch, Out, Plan, launch, run
from .elementwise import _refuse

Tensor = torch.Tensor
_BLOCK = 1024


@triton.jit
def _nll_kernel(x, target, weight, out, total, N, C, sx0, sx1, ignore, HAS_W: tl.constexpr, REDUCE: tl.constexpr,
                MEAN: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    if REDUCE:
        acc = tl.zeros([BLOCK], ACC)
        wacc = tl.zeros([BLOCK], ACC)
        for start in range(0, N, BLOCK):
            rows = start + tl.arange(0, BLOCK)
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
            acc += tl.where(ok, -v * w, 0.0)
            wacc += tl.where(ok, w, 0.0)
        s = tl.sum(acc, 0)
        tw = tl.sum(wacc, 0)
        if MEAN:
            s = s / tw
        tl.store(out, s.to(out.dtype.element_ty))
        tl.store(total, tw.to(total.dtype.element_ty))
    else:
        pid = tl.program_id(0)
        rows = pid * BLOCK + tl.arange(0, BLOCK)
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
        tl.store(out + rows, tl.where(ok, -v * w, 0.0).to(out.dtype.element_ty), mask=m)
        if pid == 0:
            tl.store(total, tl.zeros([], ACC).to(total.dtype.element_ty))


_nll = jit(_nll_kernel)


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
    else:  # a reduction, or a (C,) input (its "none" is the sum of one row)
        out = Buffer((), x.dtype)
        L = launch(_nll, (1,), In(0), In(1), w, Out(0), Out(1), n, c, sx0, sx1, ignore_index,
                   HAS_W=weight is not None, REDUCE=True, MEAN=reduction == 1, CHECK=check, BLOCK=_BLOCK, **opts)
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
