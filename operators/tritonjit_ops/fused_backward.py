"""Backward of the fused model kernels: silu_and_mul and cross_entropy (rotary's backward is
its forward with -sin: the inverse rotation; see autograd.py).

silu_and_mul: one pass gives both input gradients. cross_entropy: one program per row
recomputes the row's logsumexp and writes (softmax - one_hot(target)) * scale, so the
softmax of the logits never goes to memory.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, check_same_device, jit, next_pow2, opmath

Tensor = torch.Tensor


@triton.jit
def _silu_mul_bwd_kernel(dy, g, u, dg, du, D, s_g, s_u, s_d, BLOCK: tl.constexpr, SPLIT: tl.constexpr):
    """dg = dy * u * silu'(g), du = dy * silu(g); SPLIT: u and du are the second halves of g's
    and dg's rows (rows of 2 * D)."""
    ACC: tl.constexpr = tl.float64 if g.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    a = tl.load(g + row * s_g + cols, mask=m, other=0.0).to(ACC)
    if SPLIT:
        b = tl.load(g + row * s_g + D + cols, mask=m, other=0.0).to(ACC)
    else:
        b = tl.load(u + row * s_u + cols, mask=m, other=0.0).to(ACC)
    gy = tl.load(dy + row * D + cols, mask=m, other=0.0).to(ACC)
    s = 1.0 / (1.0 + tl.exp(-a))
    da = gy * b * s * (1.0 + a * (1.0 - s))
    db = gy * a * s
    tl.store(dg + row * s_d + cols, da.to(dg.dtype.element_ty), mask=m)
    if SPLIT:
        tl.store(dg + row * s_d + D + cols, db.to(dg.dtype.element_ty), mask=m)
    else:
        tl.store(du + row * s_d + cols, db.to(du.dtype.element_ty), mask=m)


@triton.jit
def _ce_bwd_kernel(logits, target, dlogits, scale, C, s_row, s_scale, ignore_index, BLOCK_C: tl.constexpr):
    """dlogits[r] = (softmax(logits[r]) - one_hot(target[r])) * scale[r * s_scale]; 0 for ignored rows."""
    ACC: tl.constexpr = tl.float64 if logits.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    row = tl.program_id(0).to(tl.int64)
    base = logits + row * s_row
    mx = tl.full([BLOCK_C], float("-inf"), ACC)
    s = tl.zeros([BLOCK_C], ACC)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        v = tl.load(base + cols, mask=cols < C, other=float("-inf")).to(ACC)
        nm = tl.maximum(mx, v)
        s = tl.where(nm == float("-inf"), 0.0, s * tl.exp(mx - nm) + tl.exp(v - nm))
        mx = nm
    gm = tl.max(mx, 0)
    lse = gm + tl.log(tl.sum(s * tl.exp(mx - gm), 0))
    t = tl.load(target + row)
    k = tl.load(scale + row * s_scale).to(ACC)
    k = tl.where(t != ignore_index, k, 0.0)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        cm = cols < C
        v = tl.load(base + cols, mask=cm, other=0.0).to(ACC)
        p = tl.exp(v - lse) - tl.where(cols == t, 1.0, 0.0)
        tl.store(dlogits + row * C + cols, (p * k).to(dlogits.dtype.element_ty), mask=cm)


_silu_mul_bwd = jit(_silu_mul_bwd_kernel)
_ce_bwd = jit(_ce_bwd_kernel)


def silu_and_mul_backward(grad: Tensor, gate: Tensor, up: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(d_gate, d_up) of silu_and_mul; with ``up`` None, d_gate is the [..., 2d] gradient of the
    split input and d_up is empty."""
    if not isinstance(gate, Tensor) or gate.dtype not in FLOAT_DTYPES or gate.dim() == 0:
        raise TypeError("tritonjit silu_and_mul_backward: gate must be a floating Tensor of rank >= 1")
    check_same_device("silu_and_mul_backward", grad, gate, up)
    split = up is None
    d = gate.shape[-1] // 2 if split else gate.shape[-1]
    out_shape = (*gate.shape[:-1], d)
    if tuple(grad.shape) != out_shape:
        raise RuntimeError(f"tritonjit silu_and_mul_backward: grad has shape {list(grad.shape)}, "
                           f"expected {list(out_shape)}")
    g = gate.contiguous()
    u = g if up is None else up.contiguous()
    dy = grad.contiguous()
    dg = torch.empty(g.shape, dtype=gate.dtype, device=gate.device)
    du = torch.empty((0,) if split else u.shape, dtype=u.dtype, device=gate.device)
    rows = g.numel() // g.shape[-1] if g.shape[-1] else 0
    if rows and d:
        on_cpu = gate.device.type == "cpu"
        block = min(next_pow2(d), 1024 if on_cpu else 4096)
        row = 2 * d if split else d
        _silu_mul_bwd[(rows, cdiv(d, block))](dy, g, u, dg, dg if split else du, d, row, row, row, BLOCK=block,
                                              SPLIT=split, num_warps=8 if block >= 2048 and not on_cpu else 4)
    return dg, du


def cross_entropy_backward(grad: Tensor, logits: Tensor, target: Tensor, ignore_index: int = -100,
                           reduction: str = "mean") -> Tensor:
    """d logits of cross_entropy(logits, target, ignore_index, reduction) for the loss gradient ``grad``
    (a scalar, or [N] for reduction='none')."""
    if not isinstance(logits, Tensor) or logits.dim() != 2 or logits.dtype not in FLOAT_DTYPES:
        raise RuntimeError("tritonjit cross_entropy_backward: logits must be a floating [N, C] Tensor")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"tritonjit cross_entropy_backward: {reduction} is not a valid value for reduction")
    check_same_device("cross_entropy_backward", grad, logits, target)
    n, c = logits.shape
    lg = logits if logits.stride(1) == 1 else logits.contiguous()
    target = target.contiguous()
    if reduction == "none":
        scale, s_scale = grad.reshape(n).contiguous(), 1
    elif reduction == "sum":
        scale, s_scale = grad.reshape(1), 0
    else:  # mean over the rows not ignored: no host read of the count (no device sync)
        scale, s_scale = (grad.to(opmath(logits.dtype)) / (target != ignore_index).sum()).reshape(1), 0
    out = torch.empty((n, c), dtype=logits.dtype, device=logits.device)
    if n and c:
        block = min(next_pow2(c), 4096 if logits.device.type != "cpu" else 1024)
        _ce_bwd[(n,)](lg, target, out, scale, c, lg.stride(0), s_scale, ignore_index, BLOCK_C=block,
                      num_warps=8 if block >= 2048 else 4)
    return out
