"""A fused AdamW step: every parameter of a group updated by one multi-tensor launch.

``adamw_step`` groups the tensors by dtypes and launches ``_adamw_kernel`` once per
group over a block table: program ``j`` updates block ``j`` of the group's flattened
tensor list, finding its tensor's addresses in a device table of pointers (built once
per tensor list and cached by address, so a training loop uploads nothing after its
first step). Bias corrections are computed in the kernel from each parameter's step
tensor: no host synchronization, and the launch captures into a CUDA graph.

Math (torch's fused AdamW, fp32 opmath; params/grads/states of any float dtype):
p -= lr*wd*p; m = beta1 m + (1-beta1) g; v = beta2 v + (1-beta2) g^2;
p -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps).

Not supported (raise :class:`Unsupported`; under ``enable()`` aten's own kernel then
runs, or a torch-ops fallback where enable() runs on Python registrations): amsgrad,
grad_scale / found_inf (AMP's GradScaler), tensors on several devices, sparse or
complex tensors.

Entry points: :func:`adamw_step`, :class:`AdamW` (a ``torch.optim.AdamW`` whose step is
this kernel; its state is torch's) and :data:`ATEN` (``_fused_adamw_``, what
``torch.optim.AdamW(fused=True)`` calls).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from ._common import cdiv, jit, opmath

Tensor = torch.Tensor

__all__ = ["adamw_step", "AdamW", "Unsupported", "ATEN"]


class Unsupported(NotImplementedError):
    """An AdamW call the kernel does not take (aten's kernel serves it under enable())."""


@triton.jit
def _bf16_rne(x):
    """x rounded to bf16's precision, to nearest even (Triton's interpreter truncates when
    it converts fp32 to bf16; rounded first, its conversion is exact)."""
    b = x.to(tl.uint32, bitcast=True)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _adamw_kernel(ADDR, NUMEL, BLK_T, BLK_S, P0, G0, M0, V0, S0, LR, lr, beta1, beta2, log2_beta1, log2_beta2,
                  weight_decay, eps, T,
                  MAXIMIZE: tl.constexpr, LR_PTR: tl.constexpr, BLOCK: tl.constexpr,
                  RNE_P: tl.constexpr = False, RNE_M: tl.constexpr = False, RNE_V: tl.constexpr = False):
    """One BLOCK of one tensor of the list; ADDR holds 5 rows of T addresses (param, grad,
    exp_avg, exp_avg_sq, step); P0..S0 give the element types of those rows."""
    j = tl.program_id(0)
    t = tl.load(BLK_T + j)
    start = tl.load(BLK_S + j)
    n = tl.load(NUMEL + t)
    p_ptr = tl.load(ADDR + t).to(P0.dtype, bitcast=True)
    g_ptr = tl.load(ADDR + T + t).to(G0.dtype, bitcast=True)
    m_ptr = tl.load(ADDR + 2 * T + t).to(M0.dtype, bitcast=True)
    v_ptr = tl.load(ADDR + 3 * T + t).to(V0.dtype, bitcast=True)
    s_ptr = tl.load(ADDR + 4 * T + t).to(S0.dtype, bitcast=True)
    step = tl.load(s_ptr).to(tl.float32)
    if LR_PTR:
        lr = tl.load(LR).to(tl.float32)
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask).to(tl.float32)
    v = tl.load(v_ptr + offs, mask=mask).to(tl.float32)
    if MAXIMIZE:
        g = -g
    p = p - lr * weight_decay * p  # the operation order of torch's CUDA fused kernel, IEEE sqrt and division
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    bc1 = 1.0 - tl.math.exp2(step * log2_beta1)
    bc2 = 1.0 - tl.math.exp2(step * log2_beta2)
    denom = tl.div_rn(tl.sqrt_rn(v), tl.sqrt_rn(bc2)) + eps
    p = p - tl.div_rn(tl.div_rn(lr, bc1) * m, denom)
    if RNE_P:
        p = _bf16_rne(p)
    if RNE_M:
        m = _bf16_rne(m)
    if RNE_V:
        v = _bf16_rne(v)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)
    tl.store(m_ptr + offs, m.to(m_ptr.dtype.element_ty), mask=mask)
    tl.store(v_ptr + offs, v.to(v_ptr.dtype.element_ty), mask=mask)


_kernel = jit(_adamw_kernel)
_BLOCK_GPU, _BLOCK_CPU = 2048, 256
_PLANS: dict[tuple, list[tuple]] = {}  # address key -> the launches of a tensor list
_MAX_PLANS = 64


def _tables(lists: Sequence[Sequence[Tensor]], block: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(addresses [5*T], numels [T], block -> tensor [NB], block -> start [NB]) on the device."""
    dev = lists[0][0].device
    addr = torch.tensor([t.data_ptr() for ts in lists for t in ts], dtype=torch.int64)
    numel = torch.tensor([t.numel() for t in lists[0]], dtype=torch.int64)
    counts = [cdiv(t.numel(), block) for t in lists[0]]
    blk_t = torch.repeat_interleave(torch.arange(len(counts), dtype=torch.int32), torch.tensor(counts))
    blk_s = torch.cat([torch.arange(c, dtype=torch.int64) * block for c in counts])
    pin = dev.type == "cuda"
    return tuple(x.pin_memory().to(dev, non_blocking=True) if pin else x.to(dev)  # type: ignore[return-value]
                 for x in (addr, numel, blk_t, blk_s))


def _validate(lists: Sequence[Sequence[Tensor]]) -> None:
    n = len(lists[0])
    if any(len(ts) != n for ts in lists):
        raise ValueError(f"tritonjit.adamw_step: lists of lengths {[len(ts) for ts in lists]}; expected equal")
    dev = lists[0][0].device
    for name, ts in zip(("params", "grads", "exp_avgs", "exp_avg_sqs", "state_steps"), lists):
        for t in ts:
            if not isinstance(t, Tensor) or t.device != dev or t.layout != torch.strided or not t.is_floating_point():
                raise Unsupported(f"tritonjit.adamw_step: {name} must be dense floating tensors on {dev}")
            if name != "state_steps" and not t.is_contiguous():
                raise Unsupported(f"tritonjit.adamw_step: {name} must be contiguous")
    for p, g, m, v in zip(*lists[:4]):
        if not (p.numel() == g.numel() == m.numel() == v.numel()):
            raise ValueError("tritonjit.adamw_step: a parameter, its gradient and its states differ in size")


def _plan(lists: Sequence[Sequence[Tensor]]) -> list[tuple]:
    """Per group of equal dtypes: (its tables, the index of its first tensor (whose element
    types the launch passes), its size, extra constexprs). Built and validated once per
    tensor list: the key is every address, size and dtype, so a list whose tensors moved
    or changed gets a new plan (gradients set to None and reallocated at other addresses
    cost a new table). The plans hold no tensors: a cached plan keeps no memory alive."""
    key = (*(t.data_ptr() for ts in lists for t in ts), *(t.numel() for t in lists[0]),
           *(t.dtype for ts in lists for t in ts))
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    _validate(lists)
    dev = lists[0][0].device
    block = _BLOCK_CPU if dev.type == "cpu" else _BLOCK_GPU
    groups: dict[tuple, list[int]] = {}
    for i in range(len(lists[0])):
        if lists[0][i].numel():
            groups.setdefault(tuple(ts[i].dtype for ts in lists), []).append(i)
    plan = []
    for idx in groups.values():
        sub = [[ts[i] for i in idx] for ts in lists]
        extra = {"BLOCK": block}
        if dev.type == "cpu":
            extra.update({f"RNE_{x}": sub[i][0].dtype == torch.bfloat16 for i, x in ((0, "P"), (2, "M"), (3, "V"))})
        plan.append((_tables(sub, block), idx[0], len(idx), extra))
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[key] = plan
    return plan


def _log2(beta: float) -> float:
    return math.log2(beta) if beta > 0 else float("-inf")


def adamw_step(params: Sequence[Tensor], grads: Sequence[Tensor], exp_avgs: Sequence[Tensor],
               exp_avg_sqs: Sequence[Tensor], state_steps: Sequence[Tensor], *, lr: float | Tensor,
               beta1: float, beta2: float, weight_decay: float, eps: float, maximize: bool = False) -> None:
    """One AdamW step in place over the lists (steps already incremented, as torch's
    ``_fused_adamw_`` expects): one launch per group of tensors of equal dtypes."""
    lists = (params, grads, exp_avgs, exp_avg_sqs, state_steps)
    if any(len(ts) != len(params) for ts in lists):
        raise ValueError(f"tritonjit.adamw_step: lists of lengths {[len(ts) for ts in lists]}; expected equal")
    if not params:
        return
    wide = [p.dtype == torch.float64 for p in params]
    if any(wide):
        # float64 in float64, as aten's fused kernel does: the Triton kernel computes in fp32 and takes
        # the hyperparameters as fp32 scalars (0.999 is 1 + 1.3e-8 there), so these go through torch ops
        p64, g64, m64, v64, s64 = ([t for t, w in zip(ts, wide) if w] for ts in lists)
        _torch_fused_adamw(p64, g64, m64, v64, [], s64, lr, beta1, beta2, weight_decay, eps, False, maximize,
                           None, None)
        params, grads, exp_avgs, exp_avg_sqs, state_steps = ([t for t, w in zip(ts, wide) if not w] for ts in lists)
        lists = (params, grads, exp_avgs, exp_avg_sqs, state_steps)
        if not params:
            return
    on_device = params[0].device.type != "cpu"
    if isinstance(lr, Tensor) and on_device and lr.device.type == "cpu" and lr.numel() == 1:
        lr = float(lr)  # a CPU scalar for device tensors: its value, read without waiting for the device
    lr_ptr = isinstance(lr, Tensor)
    if lr_ptr and (lr.device != params[0].device or lr.numel() != 1):  # type: ignore[union-attr]
        raise Unsupported(f"tritonjit.adamw_step: a tensor lr must be one element on {params[0].device}")
    plan = _plan(lists)
    lr_val = 0.0 if lr_ptr else float(lr)
    consts = (float(beta1), float(beta2), _log2(beta1), _log2(beta2), float(weight_decay), float(eps))
    for (addr, numel, blk_t, blk_s), first, count, extra in plan:
        firsts = [ts[first] for ts in lists]
        _kernel[(blk_t.numel(), 1, 1)](addr, numel, blk_t, blk_s, *firsts, lr if lr_ptr else firsts[0], lr_val,
                                       *consts, count, MAXIMIZE=bool(maximize), LR_PTR=lr_ptr, num_warps=4,
                                       **extra)


def fused_adamw_(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor],
                 max_exp_avg_sqs: list[Tensor], state_steps: list[Tensor], *, lr: float | Tensor, beta1: float,
                 beta2: float, weight_decay: float, eps: float, amsgrad: bool, maximize: bool,
                 grad_scale: Tensor | None = None, found_inf: Tensor | None = None) -> None:
    """aten::_fused_adamw_ (both overloads: ``lr`` a float or a tensor). What the kernel does
    not take raises Unsupported (aten's kernel runs it); on enable()'s Python registrations,
    which replace aten's kernel, :func:`_torch_fused_adamw` computes it instead."""
    why = None
    if amsgrad:
        why = "amsgrad=True"
    elif grad_scale is not None or found_inf is not None:
        why = "grad_scale/found_inf (GradScaler)"
    elif any(p.dtype == torch.float64 for p in params):
        why = "float64 parameters (the kernel computes in float32)"
    elif params and params[0].device.type != "cpu" and any(p.dtype != torch.float32 for p in params):
        # measured on the H200: the step is memory-bound and aten's fused kernel moved 16-bit
        # states faster (tritonjit 0.74x of it in bf16, 1.00x in fp32); adamw_step and
        # tritonjit_ops.AdamW still take them
        why = "16-bit parameters (aten's fused kernel is faster for them)"
    if why is not None:
        from . import _registry

        if _registry._State.native is None and _registry._State.lib is not None:
            return _torch_fused_adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                                      beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf)
        raise Unsupported(f"tritonjit._fused_adamw_: {why}")
    adamw_step(params, grads, exp_avgs, exp_avg_sqs, state_steps, lr=lr, beta1=beta1, beta2=beta2,
               weight_decay=weight_decay, eps=eps, maximize=maximize)


def _torch_fused_adamw(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
                       exp_avg_sqs: list[Tensor], max_exp_avg_sqs: list[Tensor], state_steps: list[Tensor],
                       lr: float | Tensor, beta1: float, beta2: float, weight_decay: float, eps: float,
                       amsgrad: bool, maximize: bool, grad_scale: Tensor | None, found_inf: Tensor | None) -> None:
    """torch's fused AdamW step in torch ops, in its math type (fp32; fp64 for fp64), no host
    synchronization (amsgrad; a GradScaler's grad_scale unscales the gradients in place,
    found_inf skips the step)."""
    for i, p in enumerate(params):
        acc = opmath(p.dtype)
        g = grads[i].to(acc)
        if grad_scale is not None:
            g = g / grad_scale
            grads[i].copy_(g)
        if maximize:
            g = -g
        step = state_steps[i].to(acc)
        pa = p.to(acc)
        pa = pa - lr * weight_decay * pa
        m = beta1 * exp_avgs[i].to(acc) + (1 - beta1) * g
        v = beta2 * exp_avg_sqs[i].to(acc) + (1 - beta2) * g * g
        if amsgrad:
            v_max = torch.maximum(max_exp_avg_sqs[i].to(acc), v)
        bc1 = 1 - torch.pow(beta1, step)
        bc2 = 1 - torch.pow(beta2, step)
        denom = (v_max if amsgrad else v).sqrt() / bc2.sqrt() + eps
        pa = pa - (lr / bc1) * m / denom
        pairs = [(p, pa), (exp_avgs[i], m), (exp_avg_sqs[i], v)] + ([(max_exp_avg_sqs[i], v_max)] if amsgrad else [])
        for dst, new in pairs:
            dst.copy_(new if found_inf is None else torch.where(found_inf == 0, new, dst.to(acc)))


class AdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` (same arguments, same state) whose step is :func:`adamw_step`.

    amsgrad, capturable-specific and differentiable options are refused at construction."""

    def __init__(self, params: Any, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, *, maximize: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=False,
                         maximize=maximize, foreach=False, fused=False)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise Unsupported("tritonjit.AdamW: sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                elif state["step"].device != p.device:  # loaded from a non-fused torch AdamW (CPU steps)
                    state["step"] = state["step"].to(device=p.device, dtype=torch.float32)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue
            torch._foreach_add_(steps, 1)
            beta1, beta2 = group["betas"]
            adamw_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr=group["lr"], beta1=beta1, beta2=beta2,
                       weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"])
        return loss


#: aten overload -> implementation, for enable()
ATEN: dict[str, Any] = {"_fused_adamw_": fused_adamw_, "_fused_adamw_.tensor_lr": fused_adamw_}
