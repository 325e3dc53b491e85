"""Fused model kernels: silu_and_mul, rotary embedding, cross_entropy (fused_add_rms_norm is in norm.py).

Each replaces a chain of eager ops with one pass over memory.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from . import _prologue
from ._common import (
    DEVICE_ASSERT,
    FLOAT_DTYPES,
    assert_options,
    cdiv,
    check_dtype,
    check_same_device,
    host_check_allowed,
    jit,
    next_pow2,
    opmath,
)
from ._plan import Buffer, In, Out, Plan, Tmp, launch

Tensor = torch.Tensor


@triton.jit
def _silu_mul_kernel(g, u, out, D, s_g, s_u, BLOCK: tl.constexpr, SPLIT: tl.constexpr = False):
    """out[r, :] = silu(g[r, :]) * u[r, :]; g/u rows may be strided (halves of one tensor).

    SPLIT: u is the second half of each row of g (u is not read), so the host passes
    the [..., 2d] tensor itself instead of building two views."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    ACC: tl.constexpr = tl.float64 if g.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    a = tl.load(g + row * s_g + cols, mask=m).to(ACC)
    if SPLIT:
        b = tl.load(g + row * s_g + D + cols, mask=m).to(ACC)
    else:
        b = tl.load(u + row * s_u + cols, mask=m).to(ACC)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(out + row * D + cols, y.to(out.dtype.element_ty), mask=m)


@triton.jit
def _rotary_kernel(x, cos, sin, out, S, H, D, R2, s_cs,
                   INTERLEAVED: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
                   BLOCK_T: tl.constexpr):
    """Rotate the first 2*R2 features of every head of one token; copy the rest."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    tok = tl.program_id(0).to(tl.int64)
    s = tok % S
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = hs < H
    j = tl.arange(0, BLOCK_R)
    jm = j < R2
    c = tl.load(cos + s * s_cs + j, mask=jm, other=0.0).to(ACC)[None, :]
    sn = tl.load(sin + s * s_cs + j, mask=jm, other=0.0).to(ACC)[None, :]
    base = tok * H * D + hs[:, None].to(tl.int64) * D
    m = hm[:, None] & jm[None, :]
    if INTERLEAVED:
        i1 = 2 * j
        i2 = 2 * j + 1
    else:
        i1 = j
        i2 = j + R2
    x1 = tl.load(x + base + i1[None, :], mask=m, other=0.0).to(ACC)
    x2 = tl.load(x + base + i2[None, :], mask=m, other=0.0).to(ACC)
    tl.store(out + base + i1[None, :], (x1 * c - x2 * sn).to(out.dtype.element_ty), mask=m)
    tl.store(out + base + i2[None, :], (x2 * c + x1 * sn).to(out.dtype.element_ty), mask=m)
    if BLOCK_T > 0:  # pass-through tail when rotary_dim < head_dim
        t = 2 * R2 + tl.arange(0, BLOCK_T)
        tm = hm[:, None] & (t < D)[None, :]
        tl.store(out + base + t[None, :], tl.load(x + base + t[None, :], mask=tm), mask=tm)


@triton.jit
def _ce_rows_kernel(logits, target, loss, C, s_row, ignore_index, BLOCK_C: tl.constexpr,
                    CHECK: tl.constexpr):
    """loss[r] = logsumexp(logits[r]) - logits[r, target[r]] (0 where target == ignore_index).

    CHECK: assert 0 <= target[r] < C (or == ignore_index) on the device."""
    ACC: tl.constexpr = tl.float64 if logits.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    row = tl.program_id(0).to(tl.int64)
    base = logits + row * s_row
    mx = tl.full([BLOCK_C], float("-inf"), ACC)
    s = tl.zeros([BLOCK_C], ACC)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        v = tl.load(base + cols, mask=cols < C, other=float("-inf")).to(ACC)
        nm = tl.maximum(mx, v)
        # lanes that have only seen -inf (padding) keep s == 0 instead of exp(-inf + inf) = nan
        s = tl.where(nm == float("-inf"), 0.0, s * tl.exp(mx - nm) + tl.exp(v - nm))
        mx = nm
    gm = tl.max(mx, 0)
    total = tl.sum(s * tl.exp(mx - gm), 0)
    lse = gm + tl.log(total)
    t = tl.load(target + row)
    valid = t != ignore_index
    if CHECK:
        tl.device_assert(~valid | (t.to(tl.uint64, bitcast=True) < C), "tritonjit cross_entropy: target out of range")
    tv = tl.load(base + tl.where(valid, t, 0)).to(ACC)
    tl.store(loss + row, tl.where(valid, lse - tv, 0.0))


@triton.jit
def _ce_reduce_kernel(loss, target, out, N, ignore_index, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if loss.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    acc = tl.zeros([BLOCK], ACC)
    cnt = tl.zeros([BLOCK], ACC)
    for i0 in range(0, N, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        m = i < N
        acc += tl.load(loss + i, mask=m, other=0.0)
        cnt += (m & (tl.load(target + i, mask=m, other=ignore_index) != ignore_index)).to(ACC)
    r = tl.sum(acc, 0)
    if MEAN:
        r = r / tl.sum(cnt, 0)
    tl.store(out, r.to(out.dtype.element_ty))


_silu_mul = jit(_silu_mul_kernel)
_rotary = jit(_rotary_kernel)
_ce_rows = jit(_ce_rows_kernel)
_ce_reduce = jit(_ce_reduce_kernel)


# Hot path: (shape, on CPU, split) -> out shape, d, grid, BLOCK, warps, built once by
# _silu_plan; contiguous floating inputs with numel > 0 only.
_PLANS_MAX = 4096
_silu_plans: dict[tuple, tuple] = {}
_silu_get = _silu_plans.get
_FLOATS = frozenset(FLOAT_DTYPES)


def gated_tiles(d: int, on_cpu: bool) -> tuple[int, int]:
    """(BLOCK, num_warps) of a gated kernel's program over ``d`` columns of a row (silu_and_mul
    here, glu in gated.py): a row's columns in tiles of up to 1024 (CPU) or 4096 elements."""
    block = min(next_pow2(d), 1024 if on_cpu else 4096)
    return block, 8 if block >= 2048 and not on_cpu else 4


def _silu_plan(key: tuple) -> tuple | None:
    shape, on_cpu, split = key
    if len(shape) == 0:
        return None
    d = shape[-1]
    if split:
        if d % 2:
            return None
        d //= 2
    rows = 1
    for s in shape[:-1]:
        rows *= s
    if rows == 0 or d == 0:
        return None
    block, warps = gated_tiles(d, on_cpu)
    if len(_silu_plans) >= _PLANS_MAX:
        _silu_plans.clear()
    p = _silu_plans[key] = ((*shape[:-1], d), d, 2 * d if split else d, (rows, cdiv(d, block)), block, warps)
    return p


def silu_and_mul(gate: Tensor, up: Tensor | None = None) -> Tensor:
    """silu(gate) * up. With ``up`` None, gate is [..., 2d] split into halves (vLLM's layout)."""
    if gate.__class__ is Tensor and gate.dtype in _FLOATS and gate.is_contiguous():
        if up is None:
            key = (gate.shape, gate.is_cpu, True)
            p = _silu_get(key) or _silu_plan(key)
            if p is not None:
                shape, d, row, grid, block, warps = p
                out = gate.new_empty(shape)
                _silu_mul[grid](gate, gate, out, d, row, row, block, True, num_warps=warps)
                return out
        else:
            q = _prologue.binary(gate, up)  # one float dtype, one shape, both contiguous
            key = (gate.shape, gate.is_cpu, False)
            p = (_silu_get(key) or _silu_plan(key)) if q is not None else None
            if p is not None and q is not None:
                _, d, row, grid, block, warps = p
                out = q[0]
                try:
                    _silu_mul[grid](gate, up, out, d, row, row, block, False, num_warps=warps)
                except Exception:
                    check_same_device("silu_and_mul", gate, up)  # torch's message where the devices differ
                    raise
                return out
    if not isinstance(gate, Tensor):
        raise TypeError(f"tritonjit.silu_and_mul: expected a Tensor, got {type(gate).__name__}")
    check_dtype("silu_and_mul", gate, FLOAT_DTYPES)
    if up is None:
        if gate.dim() == 0 or gate.shape[-1] % 2:
            raise RuntimeError(f"tritonjit.silu_and_mul: last dim must be even, got shape {list(gate.shape)}")
        d = gate.shape[-1] // 2
        x = gate.reshape(-1, 2 * d) if gate.is_contiguous() else gate.contiguous().reshape(-1, 2 * d)
        g, u, shape = x[:, :d], x[:, d:], (*gate.shape[:-1], d)
    else:
        check_same_device("silu_and_mul", gate, up)
        if up.shape != gate.shape:
            raise RuntimeError(f"tritonjit.silu_and_mul: gate {list(gate.shape)} and up {list(up.shape)} "
                               f"must have the same shape")
        if up.dtype != gate.dtype:
            raise TypeError(f"tritonjit.silu_and_mul: gate dtype {gate.dtype} != up dtype {up.dtype}")
        d = gate.shape[-1] if gate.dim() else 1
        g = gate.contiguous().reshape(-1, d)
        u = up.contiguous().reshape(-1, d)
        shape = gate.shape
    out = torch.empty(shape, dtype=gate.dtype, device=gate.device)
    rows = g.shape[0]
    if out.numel() == 0:
        return out
    block = min(next_pow2(d), 4096 if gate.device.type != "cpu" else 1024)
    warps = 8 if block >= 2048 and gate.device.type != "cpu" else 4
    _silu_mul[(rows, cdiv(d, block))](g, u, out, d, g.stride(0), u.stride(0), BLOCK=block, num_warps=warps)
    return out


def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotary position embedding of x [..., S, H, D] with cos/sin [S, R/2], R <= D even.

    interleaved=False is GPT-NeoX (rotate halves), True is GPT-J (rotate pairs).
    Features past R pass through unchanged.
    """
    if not isinstance(x, Tensor) or x.dim() < 3:
        raise RuntimeError("tritonjit.rotary_embedding: x must be [..., seq, heads, head_dim]")
    check_dtype("rotary_embedding", x, FLOAT_DTYPES)
    check_same_device("rotary_embedding", x, cos, sin)
    S, H, D = x.shape[-3:]
    if cos.shape != sin.shape or cos.dim() != 2 or cos.shape[0] != S or 2 * cos.shape[1] > D:
        raise RuntimeError(f"tritonjit.rotary_embedding: cos/sin must be [seq={S}, rotary_dim/2 <= {D // 2}], "
                           f"got {list(cos.shape)} and {list(sin.shape)}")
    x = x.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    out = torch.empty_like(x)
    r2 = cos.shape[1]
    if x.numel() == 0:
        return out
    tokens = x.numel() // (H * D)
    block_h = min(next_pow2(H), 16)
    tail = D - 2 * r2
    _rotary[(tokens, cdiv(H, block_h))](
        x, cos, sin, out, S, H, D, r2, cos.stride(0), INTERLEAVED=bool(interleaved), BLOCK_H=block_h,
        BLOCK_R=next_pow2(r2), BLOCK_T=next_pow2(tail) if tail else 0)
    return out


def cross_entropy(logits: Tensor, target: Tensor, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Cross entropy of [N, C] logits against int64 class indices [N], in fp32 (float64 in float64)."""
    if not isinstance(logits, Tensor) or logits.dim() != 2:
        raise RuntimeError("tritonjit.cross_entropy: logits must be [N, C]")
    check_dtype("cross_entropy", logits, FLOAT_DTYPES)
    check_same_device("cross_entropy", logits, target)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    n, c = logits.shape
    if not isinstance(target, Tensor) or target.dtype != torch.int64 or tuple(target.shape) != (n,):
        raise RuntimeError(f"tritonjit.cross_entropy: target must be int64 of shape [{n}]")
    check = not host_check_allowed(target)  # else checked here; on a device, by the kernel
    if not check and n:
        bad = (target < 0) | (target >= c)
        bad &= target != ignore_index
        if bad.any():
            raise IndexError(f"tritonjit.cross_entropy: target {int(target[bad][0])} is out of bounds for "
                             f"{c} classes (ignore_index={ignore_index})")
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    target = target.contiguous()
    loss = torch.empty(n, dtype=opmath(logits.dtype), device=logits.device)
    if n:
        block = min(next_pow2(c), 4096 if logits.device.type != "cpu" else 1024)
        _ce_rows[(n,)](logits, target, loss, c, logits.stride(0), ignore_index, BLOCK_C=block, CHECK=check,
                       **assert_options(check))
    if reduction == "none":
        return loss.to(logits.dtype)
    out = torch.empty((), dtype=logits.dtype, device=logits.device)
    if n == 0:
        return out.fill_(float("nan") if reduction == "mean" else 0.0)
    _ce_reduce[(1,)](loss, target, out, n, ignore_index, MEAN=reduction == "mean", BLOCK=1024)
    return out


# ----------------------------------------------------------------- plans
# Planners of the tritonjit:: ops for the C++ operator path (see _plan.py).
def plan_silu_and_mul(gate: Any, up: Any = None) -> Plan | None:
    if not isinstance(gate, Tensor) or gate.dtype not in _FLOATS or gate.dim() == 0:
        return None
    if up is None:
        if gate.shape[-1] % 2:
            return None
        d = gate.shape[-1] // 2
        shape = (*gate.shape[:-1], d)
        row = 2 * d
    else:
        if not isinstance(up, Tensor) or up.shape != gate.shape or up.dtype != gate.dtype or up.device != gate.device:
            return None
        d = gate.shape[-1]
        shape = tuple(gate.shape)
        row = d
    contiguous = tuple(i for i, t in ((0, gate), (1, up)) if t is not None and not t.is_contiguous())
    out = (Buffer(shape, gate.dtype),)
    rows = gate.numel() // (2 * d if up is None else d) if d else 0
    if rows == 0 or d == 0:
        return Plan(out, (), contiguous=contiguous)
    on_cpu = gate.is_cpu
    block, warps = gated_tiles(d, on_cpu)
    L = launch(_silu_mul, (rows, cdiv(d, block)), In(0), In(0) if up is None else In(1), Out(0), d, row, row,
               BLOCK=block, SPLIT=up is None, num_warps=warps)
    return Plan(out, (L,), contiguous=contiguous)


def plan_rotary_embedding(x: Any, cos: Any, sin: Any, interleaved: bool = False) -> Plan | None:
    if not all(isinstance(t, Tensor) for t in (x, cos, sin)) or x.dim() < 3 or x.dtype not in _FLOATS:
        return None
    S, H, D = x.shape[-3:]
    if (cos.shape != sin.shape or cos.dim() != 2 or cos.shape[0] != S or 2 * cos.shape[1] > D
            or not (x.device == cos.device == sin.device)):
        return None
    contiguous = tuple(i for i, t in ((0, x), (1, cos), (2, sin)) if not t.is_contiguous())
    out = (Buffer(tuple(x.shape), x.dtype),)
    if x.numel() == 0:
        return Plan(out, (), contiguous=contiguous)
    r2 = cos.shape[1]
    block_h = min(next_pow2(H), 16)
    tail = D - 2 * r2
    L = launch(_rotary, (x.numel() // (H * D), cdiv(H, block_h)), In(0), In(1), In(2), Out(0), S, H, D, r2, r2,
               INTERLEAVED=bool(interleaved), BLOCK_H=block_h, BLOCK_R=next_pow2(r2),
               BLOCK_T=next_pow2(tail) if tail else 0)
    return Plan(out, (L,), contiguous=contiguous)


def plan_cross_entropy(logits: Any, target: Any, ignore_index: int = -100, reduction: str = "mean") -> Plan | None:
    if (not isinstance(logits, Tensor) or logits.dim() != 2 or logits.dtype not in _FLOATS
            or not isinstance(target, Tensor) or target.dtype != torch.int64 or target.dim() != 1
            or target.shape[0] != logits.shape[0] or target.device != logits.device
            or reduction not in ("mean", "sum", "none") or host_check_allowed(target)):
        return None  # CPU targets: the Python implementation checks their values on the host
    n, c = logits.shape
    if n == 0 or reduction == "none":
        return None  # a fill, or a dtype conversion of the per-row losses
    contiguous = tuple(i for i, ok in ((0, logits.stride(1) == 1), (1, target.is_contiguous())) if not ok)
    block = min(next_pow2(c), 4096)
    s_row = logits.stride(0) if logits.stride(1) == 1 else c
    rows = launch(_ce_rows, (n,), In(0), In(1), Tmp(0), c, s_row, ignore_index, BLOCK_C=block, CHECK=True,
                  **DEVICE_ASSERT)
    red = launch(_ce_reduce, (1,), Tmp(0), In(1), Out(0), n, ignore_index, MEAN=reduction == "mean", BLOCK=1024)
    return Plan((Buffer((), logits.dtype),), (rows, red), temps=(Buffer((n,), opmath(logits.dtype)),), contiguous=contiguous)


PLANNERS: dict[str, Any] = {
    "silu_and_mul": plan_silu_and_mul,
    "rotary_embedding": plan_rotary_embedding,
    "cross_entropy": plan_cross_entropy,
}
