"""Gradients of the ``tritonjit::*_backward`` ops: second and further derivatives.

``torch.autograd.grad(..., create_graph=True)`` (gradient penalties, Hessian-vector
products, MAML) differentiates the backward itself. Each backward op has here a
*reference*: the same function written with torch's differentiable operators, in the op's
own dtypes. The op's autograd is the vector-Jacobian product of its reference through
``torch.func.vjp``, which keeps the graph of the saved inputs, so every further order is
differentiable as well, with no Triton kernel of its own. These calls are rare and run at
aten's speed; a first backward (grad mode off) never reaches them.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from ._common import opmath

Tensor = torch.Tensor


def vjp(fn: Callable[..., Any], primals: tuple[Tensor, ...], cotangents: Any) -> tuple[Tensor, ...]:
    """The gradients of ``fn``'s outputs (weighted by ``cotangents``) w.r.t. ``primals``, as a
    function of them that autograd can differentiate again."""
    pull = torch.func.vjp(fn, *primals)[1]
    return pull(cotangents)


def _some(*tensors: Tensor | None) -> tuple[Tensor, ...]:
    return tuple(t for t in tensors if t is not None)


def _norm(g: Tensor, x: Tensor, w: Tensor | None, dres: Tensor | None, n: int, eps: float, rms: bool,
          need_bias: bool) -> tuple[Tensor, Tensor, Tensor]:
    """norm_backward: the layer (or RMS) norm over x's last ``n`` elements, differentiated in
    the opmath type."""
    dt = opmath(x.dtype)
    wdt = w.dtype if w is not None else x.dtype
    rows, ww = x.reshape(-1, n).to(dt), None if w is None else w.reshape(n).to(dt)
    bias = x.new_zeros((n,), dtype=dt) if need_bias else None

    def forward(*p: Tensor) -> Tensor:
        it = iter(p)
        xx, wp = next(it), next(it) if ww is not None else None
        bp = next(it) if bias is not None else None
        return F.rms_norm(xx, (n,), wp, eps) if rms else F.layer_norm(xx, (n,), wp, bp, eps)

    got = iter(vjp(forward, (rows, *_some(ww, bias)), g.reshape(-1, n).to(dt)))
    dx = next(got).reshape(x.shape).to(x.dtype)
    dw = next(got).to(wdt) if ww is not None else x.new_empty((0,), dtype=wdt)
    db = next(got).to(wdt) if bias is not None else x.new_empty((0,), dtype=wdt)
    return (dx if dres is None else dx + dres), dw, db


def _softmax(g: Tensor, y: Tensor, dim: int, input_dtype: torch.dtype) -> Tensor:
    dt = opmath(y.dtype)
    gf, yf = g.to(dt), y.to(dt)
    return (yf * (gf - (gf * yf).sum(dim, keepdim=True))).to(input_dtype)


def _log_softmax(g: Tensor, y: Tensor, dim: int, input_dtype: torch.dtype) -> Tensor:
    dt = opmath(y.dtype)
    gf = g.to(dt)
    return (gf - y.to(dt).exp() * gf.sum(dim, keepdim=True)).to(input_dtype)


def _promoted(g: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    dt = torch.promote_types(g.dtype, v.dtype)
    return g.to(dt), v.to(dt)


def _of_input(forward: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """An activation's backward from its input: the vjp of ``forward`` at x."""
    def reference(g: Tensor, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        gp, xp = _promoted(g, x)
        return vjp(lambda v: forward(v, *args, **kwargs), (xp,), gp)[0]

    return reference


def _sigmoid(g: Tensor, y: Tensor) -> Tensor:
    gp, yp = _promoted(g, y)
    return gp * yp * (1 - yp)


def _tanh(g: Tensor, y: Tensor) -> Tensor:
    gp, yp = _promoted(g, y)
    return gp * (1 - yp * yp)


def _threshold(g: Tensor, x: Tensor, threshold: Any) -> Tensor:
    gp, xp = _promoted(g, x)
    return torch.where(xp <= threshold, torch.zeros_like(gp), gp)


def _hardtanh(g: Tensor, x: Tensor, min_val: Any, max_val: Any) -> Tensor:
    gp, xp = _promoted(g, x)
    return torch.where((xp <= min_val) | (xp >= max_val), torch.zeros_like(gp), gp)


def _silu_and_mul(g: Tensor, gate: Tensor, up: Tensor | None = None) -> tuple[Tensor, Tensor]:
    dt = opmath(gate.dtype)
    if up is None:
        d = gate.shape[-1] // 2
        dx = vjp(lambda x: F.silu(x[..., :d]) * x[..., d:], (gate.to(dt),), g.to(dt))[0]
        return dx.to(gate.dtype), gate.new_empty((0,))
    dg, du = vjp(lambda a, b: F.silu(a) * b, (gate.to(dt), up.to(dt)), g.to(dt))
    return dg.to(gate.dtype), du.to(up.dtype)


def _cross_entropy(g: Tensor, logits: Tensor, target: Tensor, ignore_index: int = -100,
                   reduction: str = "mean") -> Tensor:
    dt = opmath(logits.dtype)
    def loss(lg: Tensor) -> Tensor:
        return F.cross_entropy(lg, target, ignore_index=ignore_index, reduction=reduction)

    return vjp(loss, (logits.to(dt),), g.to(dt).reshape(-1) if reduction == "none" else g.to(dt).reshape(()))[0] \
        .to(logits.dtype)


def _embedding(g: Tensor, indices: Tensor, num_weights: int, padding_idx: int = -1,
               scale_grad_by_freq: bool = False) -> Tensor:
    # aten's own backward op, with its derivative (embedding_dense_double_backward)
    return torch.ops.aten.embedding_dense_backward(g, indices, num_weights, padding_idx, scale_grad_by_freq)


#: backward op name -> its reference (same arguments, same outputs)
REFERENCES: dict[str, Callable[..., Any]] = {
    "norm_backward": _norm,
    "softmax_backward": _softmax,
    "log_softmax_backward": _log_softmax,
    "silu_backward": _of_input(F.silu),
    "gelu_backward": _of_input(F.gelu),
    "sigmoid_backward": _sigmoid,
    "tanh_backward": _tanh,
    "threshold_backward": _threshold,
    "hardtanh_backward": _hardtanh,
    "softplus_backward": _of_input(F.softplus),
    "silu_and_mul_backward": _silu_and_mul,
    "cross_entropy_backward": _cross_entropy,
    "embedding_backward": _embedding,
}


def grad_of(reference: Callable[..., Any]) -> tuple[Callable[..., None], Callable[..., tuple]]:
    """(setup, backward) for autograd.Grad of a backward op whose reference is ``reference``:
    the vjp of it w.r.t. the tensor arguments that need a gradient."""

    def setup(ctx: Any, args: tuple, kw: dict, out: Any) -> None:
        where = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(args[i] for i in where))
        ctx.where, ctx.kw = where, kw
        ctx.rest = tuple(None if isinstance(a, Tensor) else a for a in args)

    def backward(ctx: Any, *grads: Tensor | None) -> tuple:
        args = list(ctx.rest)
        for i, t in zip(ctx.where, ctx.saved_tensors):
            args[i] = t
        live = [i for i in ctx.where if ctx.needs_input_grad[i]]

        def fn(*primals: Tensor) -> Any:
            a = list(args)
            for i, p in zip(live, primals):
                a[i] = p
            return reference(*a, **ctx.kw)

        out, pull = torch.func.vjp(fn, *(args[i] for i in live))[:2]
        outs = out if isinstance(out, tuple) else (out,)
        cot = tuple(torch.zeros_like(o) if g is None else g for o, g in zip(outs, grads))
        got = pull(cot if isinstance(out, tuple) else cot[0])
        result: list[Any] = [None] * len(args)
        for i, gi in zip(live, got):
            result[i] = gi
        return tuple(result)

    return setup, backward
