"""``nll_loss_backward``: the gradient of :mod:`loss`'s ``nll_loss_forward``, for (N, C) and
(C,) inputs: zeros, except ``-w[t] * g`` at each row's target column (``g`` the row's
``grad_output``, or the reduced loss's, divided by ``total_weight`` for ``reduction="mean"``);
rows whose target is ``ignore_index`` stay zero. One launch writes the whole (contiguous,
like aten's) ``grad_input``: a program per (row, block of columns).

Targets out of range are handled as in :mod:`loss`: the Python implementation checks them on
the host where that is allowed (CPU) and hands such calls to aten, which raises; the planner
returns None there. On a device the kernel asserts their range (``CHECK`` with
``DEVICE_ASSERT``), with no host read.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import DEVICE_ASSERT, FLOAT_DTYPES, cdiv, host_check_allowed, jit, next_pow2
from ._plan import Buffer, In, Out, Plan, launch, run
from .elementwise import _refuse
from .loss import _shapes, check_targets_on_host

Tensor = torch.Tensor


@triton.jit
def _nll_backward_kernel(grad, target, weight, total, out, C, sg, ignore, HAS_W: tl.constexpr, MEAN: tl.constexpr,
                         CHECK: tl.constexpr, BLOCK: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    t = tl.load(target + row).to(tl.int64)
    if CHECK:
        tl.device_assert((t == ignore) | ((t >= 0) & (t < C)), "nll_loss_backward: target out of bounds")
    g = tl.load(grad + row * sg).to(ACC)
    if MEAN:
        g = g / tl.load(total).to(ACC)
    ok = (t != ignore) & (t >= 0) & (t < C)
    if HAS_W:
        w = tl.load(weight + t, mask=ok, other=0.0).to(ACC)
    else:
        w = 1.0
    v = tl.where((cols == t) & ok, -(g * w), 0.0)
    tl.store(out + row * C + cols, v.to(out.dtype.element_ty), mask=cols < C)


_nll_backward = jit(_nll_backward_kernel)


def _check(grad: Any, x: Any, target: Any, weight: Any, reduction: Any, total: Any) -> tuple[int, int] | str:
    nc = _shapes(x, target, weight, reduction)
    if isinstance(nc, str):
        return nc
    if not isinstance(grad, Tensor) or grad.dtype not in FLOAT_DTYPES or grad.device != x.device:
        return "grad_output"
    if not isinstance(total, Tensor) or total.numel() != 1 or total.device != x.device:
        return "total_weight"
    n = nc[0]
    if reduction == 0 and x.dim() == 2:
        if grad.dim() != 1 or grad.shape[0] != n:
            return "grad_output's shape"
    elif grad.numel() != 1:
        return "grad_output's shape"
    return nc


def _plan(grad: Tensor, x: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int,
          n: int, c: int, check: bool) -> Plan:
    """Arguments: grad_output 0, self 1, target 2, weight 3, total_weight 6."""
    out = (Buffer(tuple(x.shape), x.dtype),)
    if n * c == 0:
        return Plan(out, ())
    contiguous = tuple(i for i, t in ((2, target), (3, weight)) if t is not None and not t.is_contiguous())
    sg = grad.stride(0) if reduction == 0 and x.dim() == 2 else 0
    block = min(next_pow2(c), 4096)
    L = launch(_nll_backward, (n, cdiv(c, block)), In(0), In(2), In(3) if weight is not None else In(0), In(6),
               Out(0), c, sg, ignore_index, HAS_W=weight is not None, MEAN=reduction == 1, CHECK=check, BLOCK=block,
               num_warps=4 if block >= 1024 else 1, **(DEVICE_ASSERT if check else {}))
    return Plan(out, (L,), contiguous=contiguous)


def nll_loss_backward(grad: Tensor, x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                      ignore_index: int, total_weight: Tensor) -> Tensor:
    """aten::nll_loss_backward for (N, C) or (C,) inputs."""
    nc = _check(grad, x, target, weight, reduction, total_weight)
    if isinstance(nc, str):
        raise _refuse("nll_loss_backward", nc)
    n, c = nc
    host = check_targets_on_host("nll_loss_backward", target, ignore_index, c)
    return run(_plan(grad, x, target, weight, reduction, ignore_index, n, c, not host),
               [grad, x, target, weight, reduction, ignore_index, total_weight])


def plan_nll_loss_backward(grad: Any, x: Any, target: Any, weight: Any, reduction: Any, ignore_index: Any,
                           total_weight: Any) -> Plan | None:
    """One launch, no host read of the targets; None where the host checks them (CPU)."""
    nc = _check(grad, x, target, weight, reduction, total_weight)
    if isinstance(nc, str) or host_check_allowed(target):
        return None
    return _plan(grad, x, target, weight, reduction, ignore_index, *nc, True)


PLANNERS: dict[str, Callable[..., Any]] = {"nll_loss_backward": plan_nll_loss_backward}
