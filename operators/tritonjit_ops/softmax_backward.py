"""softmax and log_softmax backward over any dim, from the forward's output.

softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy). Same
(O, R, K) tiling as the forward (softmax.py): a row that fits one tile is read once.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, jit
from ._plan import Buffer, In, Out, Plan, launch, run
from .softmax import geometry

Tensor = torch.Tensor


@triton.jit
def _softmax_bwd_kernel(dy, y, dx, K, R, sO, sK, sR, LOG: tl.constexpr, ONE_PASS: tl.constexpr,
                        BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if dy.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    nkb = tl.cdiv(K, BLOCK_K)  # one grid axis of (o, k tile) pairs, as _softmax_kernel
    pid = tl.program_id(0)
    o = (pid // nkb).to(tl.int64)
    ks = (pid % nkb) * BLOCK_K + tl.arange(0, BLOCK_K)
    kmask = ks < K
    kofs = o * sO + ks[:, None].to(tl.int64) * sK
    if ONE_PASS:
        rs = tl.arange(0, BLOCK_R)
        m = kmask[:, None] & (rs < R)[None, :]
        offs = kofs + rs[None, :].to(tl.int64) * sR
        g = tl.load(dy + offs, mask=m, other=0.0).to(ACC)
        v = tl.load(y + offs, mask=m, other=0.0).to(ACC)
        if LOG:
            r = g - tl.exp(v) * tl.sum(g, 1)[:, None]
        else:
            r = v * (g - tl.sum(g * v, 1)[:, None])
        tl.store(dx + offs, r.to(dx.dtype.element_ty), mask=m)
    else:
        s = tl.zeros([BLOCK_K, BLOCK_R], ACC)
        for r0 in range(0, R, BLOCK_R):
            rs = r0 + tl.arange(0, BLOCK_R)
            m = kmask[:, None] & (rs < R)[None, :]
            offs = kofs + rs[None, :].to(tl.int64) * sR
            g = tl.load(dy + offs, mask=m, other=0.0).to(ACC)
            if LOG:
                s += g
            else:
                s += g * tl.load(y + offs, mask=m, other=0.0).to(ACC)
        t = tl.sum(s, 1)[:, None]
        for r0 in range(0, R, BLOCK_R):
            rs = r0 + tl.arange(0, BLOCK_R)
            m = kmask[:, None] & (rs < R)[None, :]
            offs = kofs + rs[None, :].to(tl.int64) * sR
            g = tl.load(dy + offs, mask=m, other=0.0).to(ACC)
            v = tl.load(y + offs, mask=m, other=0.0).to(ACC)
            if LOG:
                r = g - tl.exp(v) * t
            else:
                r = v * (g - t)
            tl.store(dx + offs, r.to(dx.dtype.element_ty), mask=m)


_softmax_bwd = jit(_softmax_bwd_kernel)


def plan_softmax_backward(log: bool, grad: Any, out: Any, dim: int, input_dtype: Any) -> Plan | None:
    """aten._softmax_backward_data / _log_softmax_backward_data: the input's gradient, in input_dtype."""
    if (not isinstance(grad, Tensor) or not isinstance(out, Tensor) or grad.shape != out.shape
            or grad.device != out.device or grad.dtype not in FLOAT_DTYPES or out.dtype not in FLOAT_DTYPES
            or input_dtype not in FLOAT_DTYPES or out.dim() == 0 or not -out.dim() <= dim < out.dim()):
        return None
    if out.device.type != "cpu" and not grad.dtype == out.dtype == input_dtype:
        return None  # aten's device kernels refuse mixed dtypes ("expected scalar type ..."): theirs raises
    res = (Buffer(tuple(out.shape), input_dtype),)
    contiguous = tuple(i for i, t in ((0, grad), (1, out)) if not t.is_contiguous())
    if out.numel() == 0:
        return Plan(res, (), contiguous=contiguous)
    grid, (k, r, sO, sK, sR), one_pass, block_k, block_r, warps = geometry(out.shape, dim % out.dim(),
                                                                           out.device.type != "cpu")
    L = launch(_softmax_bwd, grid, In(0), In(1), Out(0), k, r, sO, sK, sR, LOG=log, ONE_PASS=one_pass,
               BLOCK_K=block_k, BLOCK_R=block_r, num_warps=warps)
    return Plan(res, (L,), contiguous=contiguous)


def _make(log: bool, name: str):
    def fn(grad_output: Tensor, output: Tensor, dim: int, input_dtype: torch.dtype) -> Tensor:
        p = plan_softmax_backward(log, grad_output, output, dim, input_dtype)
        if p is None:
            raise NotImplementedError(f"tritonjit {name}: no kernel for grad {getattr(grad_output, 'dtype', None)}, "
                                      f"output {getattr(output, 'dtype', None)}, dim {dim}, dtype {input_dtype}")
        return run(p, (grad_output, output, dim, input_dtype))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"aten.{name}: the gradient of the {'log_' if log else ''}softmax input, from its output."
    return fn


softmax_backward = _make(False, "_softmax_backward_data")
log_softmax_backward = _make(True, "_log_softmax_backward_data")

PLANNERS: dict[str, Any] = {
    "_softmax_backward_data": lambda g, y, dim, dt: plan_softmax_backward(False, g, y, dim, dt),
    "_log_softmax_backward_data": lambda g, y, dim, dt: plan_softmax_backward(True, g, y, dim, dt),
}
