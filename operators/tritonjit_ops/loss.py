"""``nll_loss_forward``: the loss half of cross-entropy in a training loop (log_softmax, then
this). Output and ``total_weight`` as aten computes them: per row ``-w[t] * x[i, t]`` (0 where
``t == ignore_index``), summed, or divided by the summed weights of the rows that count.

A reduction runs as one program looping over the rows (one launch, no atomics, the same
order every run); ``reduction="none"`` is one program per block of rows. Targets out of
range go to aten (which raises) where the host may read them (CPU); on a device they
are not read (a row with such a target contributes nothing).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, host_check_allowed, jit
from ._fallback import with_aten_fallback
from ._plan import execute, launch
from .elementwise import _refuse

Tensor = torch.Tensor
_BLOCK = 1024


@triton.jit
def _nll_kernel(x, target, weight, out, total, N, C, sx0, sx1, ignore, HAS_W: tl.constexpr, REDUCE: tl.constexpr,
                MEAN: tl.constexpr, BLOCK: tl.constexpr):
    if REDUCE:
        acc = tl.zeros([BLOCK], tl.float32)
        wacc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            rows = start + tl.arange(0, BLOCK)
            m = rows < N
            t = tl.load(target + rows, mask=m, other=ignore).to(tl.int64)
            ok = m & (t != ignore) & (t >= 0) & (t < C)
            v = tl.load(x + rows.to(tl.int64) * sx0 + t * sx1, mask=ok, other=0.0).to(tl.float32)
            if HAS_W:
                w = tl.load(weight + t, mask=ok, other=0.0).to(tl.float32)
            else:
                w = ok.to(tl.float32)
            acc += tl.where(ok, -v * w, 0.0)
            wacc += tl.where(ok, w, 0.0)
        s = tl.sum(acc, 0)
        tw = tl.sum(wacc, 0)
        if MEAN:
            s = s / tw
        tl.store(out, s.to(out.dtype.element_ty))
        tl.store(total, tw.to(total.dtype.element_ty))
    else:
        rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = rows < N
        t = tl.load(target + rows, mask=m, other=ignore).to(tl.int64)
        ok = m & (t != ignore) & (t >= 0) & (t < C)
        v = tl.load(x + rows.to(tl.int64) * sx0 + t * sx1, mask=ok, other=0.0).to(tl.float32)
        if HAS_W:
            w = tl.load(weight + t, mask=ok, other=0.0).to(tl.float32)
        else:
            w = ok.to(tl.float32)
        tl.store(out + rows, tl.where(ok, -v * w, 0.0).to(out.dtype.element_ty), mask=m)


_nll = jit(_nll_kernel)


def nll_loss_forward(x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                     ignore_index: int) -> tuple[Tensor, Tensor]:
    """aten::nll_loss_forward for (N, C) or (C,) inputs."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or x.dim() not in (1, 2):
        raise _refuse("nll_loss_forward", "self other than a (N, C) or (C,) float tensor")
    if not isinstance(target, Tensor) or target.dtype not in (torch.int64, torch.int32) or target.dim() != x.dim() - 1:
        raise _refuse("nll_loss_forward", "target")
    if reduction not in (0, 1, 2):
        raise _refuse("nll_loss_forward", f"reduction {reduction}")
    x2 = x if x.dim() == 2 else x.unsqueeze(0)
    t = target.reshape(-1).contiguous()
    n, c = x2.shape
    if t.numel() != n or (weight is not None and (weight.numel() != c or weight.dtype != x.dtype)):
        raise _refuse("nll_loss_forward", "shapes")
    if any(a.device != x.device for a in (target, weight) if a is not None):
        raise _refuse("nll_loss_forward", "tensors on two devices")
    if host_check_allowed(t) and n:
        bad = (t != ignore_index) & ((t < 0) | (t >= c))
        if bool(bad.any()):
            raise _refuse("nll_loss_forward", "a target out of range")  # aten's error
    w = weight.contiguous() if weight is not None else x2
    total = torch.empty((), dtype=x.dtype, device=x.device)
    if reduction == 0:
        out = torch.empty(target.shape, dtype=x.dtype, device=x.device)
        if n:
            execute(launch(_nll, ((n + _BLOCK - 1) // _BLOCK,), x2, t, w, out, total, n, c, x2.stride(0),
                           x2.stride(1), ignore_index, HAS_W=weight is not None, REDUCE=False, MEAN=False,
                           BLOCK=_BLOCK))
        total.zero_()
        return out, total
    out = torch.empty((), dtype=x.dtype, device=x.device)
    execute(launch(_nll, (1,), x2, t, w, out, total, n, c, x2.stride(0), x2.stride(1), ignore_index,
                   HAS_W=weight is not None, REDUCE=True, MEAN=reduction == 1, BLOCK=_BLOCK))
    return out, total


ATEN: dict[str, Callable[..., Any]] = {"nll_loss_forward": nll_loss_forward}
ATEN = with_aten_fallback(ATEN)
