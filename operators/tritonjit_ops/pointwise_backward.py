"""Backward of the activations: silu, gelu (erf and tanh), sigmoid, tanh, relu (threshold),
hardtanh (ReLU6's), softplus.

One flat kernel, ``dx = dy * f'(x)``, computed in fp32; aten's overloads are
``silu_backward(grad, self)``, ``gelu_backward(grad, self, approximate)``,
``sigmoid_backward(grad, output)``, ``tanh_backward(grad, output)`` and
``threshold_backward(grad, self, threshold)`` (relu's, with threshold 0).
``hardtanh_backward(grad, self, min_val, max_val)`` and ``softplus_backward(grad, self, beta,
threshold)`` take the strided elementwise kernel (its flat index serves dense operands as the
flat kernel would).
"""
from __future__ import annotations

from numbers import Number
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit
from ._layout import iter_strides
from ._math import activation_backward
from ._plan import Arg, Buffer, In, Out, Plan, launch, run
from .elementwise import _CT, _refuse
from .elementwise import _launch as _ew_launch
from .elementwise import plan as _ew_plan
from .elementwise import run as _ew_run

Tensor = torch.Tensor


@triton.jit
def _act_bwd_kernel(dy, x, dx, n, threshold, OP: tl.constexpr, BLOCK: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = tl.load(dy + offs, mask=m, other=0.0).to(ACC)
    v = tl.load(x + offs, mask=m, other=0.0).to(ACC)
    r = activation_backward(g, v, threshold, OP)
    tl.store(dx + offs, r.to(dx.dtype.element_ty), mask=m)


_act_bwd = jit(_act_bwd_kernel)
_BLOCK = 1024


def plan_activation_backward(op: str, grad: Any, x: Any, threshold: Any = 0) -> Plan | None:
    """dy * f'(x) for two floating tensors of one shape, dtype and device (the gradient's dtype)."""
    if (not isinstance(grad, Tensor) or not isinstance(x, Tensor) or grad.shape != x.shape
            or grad.dtype != x.dtype or grad.dtype not in FLOAT_DTYPES or grad.device != x.device):
        return None
    if op == "threshold" and (not isinstance(threshold, Number) or isinstance(threshold, complex)):
        return None
    shape = list(x.shape)
    # aten's layout of the result (threshold_backward's TensorIterator takes the input first)
    strides = iter_strides(shape, [x, grad] if op == "threshold" else [grad, x])
    out = (Buffer(tuple(shape), grad.dtype, strides),)
    n = x.numel()
    if n == 0:
        return Plan(out, ())
    threshold_ref = Arg(2) if op == "threshold" else 0.0
    if strides is None and grad.is_contiguous() and x.is_contiguous() or (
            strides is not None and tuple(grad.stride()) == tuple(x.stride()) == strides):
        # one dense layout for all three (contiguous, or attention's transposed views): the
        # flat kernel runs over the memory as it lies
        return Plan(out, (launch(_act_bwd, (cdiv(n, _BLOCK),), In(0), In(1), Out(0), n, threshold_ref, OP=op,
                                 BLOCK=_BLOCK),))
    # layouts that differ (or are not dense): the strided elementwise kernel, no copies
    L = _ew_launch(f"{op}_backward", [grad, x], [In(0), In(1)], out[0], Out(0), shape, _CT[grad.dtype],
                   [threshold_ref] if op == "threshold" else [])
    return None if L is None else Plan(out, (L,))


def _make(op: str, aten: str, doc: str) -> Callable[..., Tensor]:
    def fn(grad_output: Tensor, x: Tensor, threshold: Any = 0) -> Tensor:
        p = plan_activation_backward(op, grad_output, x, threshold)
        if p is None:
            raise NotImplementedError(f"tritonjit {aten}: no kernel for grad {getattr(grad_output, 'dtype', None)} "
                                      f"and input {getattr(x, 'dtype', None)} (same shape, float dtype expected)")
        return run(p, (grad_output, x, threshold))

    fn.__name__ = fn.__qualname__ = aten
    fn.__doc__ = doc
    return fn


silu_backward = _make("silu", "silu_backward", "dy * sigmoid(x) * (1 + x * (1 - sigmoid(x))).")
sigmoid_backward = _make("sigmoid", "sigmoid_backward", "dy * y * (1 - y), from the output y.")
tanh_backward = _make("tanh", "tanh_backward", "dy * (1 - y**2), from the output y.")
threshold_backward = _make("threshold", "threshold_backward", "dy where x > threshold, else 0 (relu's backward).")
_gelu_erf = _make("gelu", "gelu_backward", "GELU's derivative, erf form.")
_gelu_tanh = _make("gelu_tanh", "gelu_backward", "GELU's derivative, tanh approximation.")


def gelu_backward(grad_output: Tensor, x: Tensor, *, approximate: str = "none") -> Tensor:
    """dy * GELU'(x) for aten's two approximations."""
    if approximate == "none":
        return _gelu_erf(grad_output, x)
    if approximate == "tanh":
        return _gelu_tanh(grad_output, x)
    raise RuntimeError(f"tritonjit gelu_backward: approximate must be 'none' or 'tanh', got {approximate!r}")


def _gelu_planner(grad: Any, x: Any, *, approximate: str = "none") -> Plan | None:
    if approximate not in ("none", "tanh"):
        return None
    return plan_activation_backward("gelu" if approximate == "none" else "gelu_tanh", grad, x)


def _pair_and_scalars(grad: Any, x: Any, s0: Any, s1: Any) -> bool:
    """Whether hardtanh_backward's (bounds) or softplus_backward's (beta, threshold) operands
    are ours: float tensors of one shape, dtype and device, two real Scalars."""
    return (isinstance(grad, Tensor) and isinstance(x, Tensor) and grad.shape == x.shape and grad.dtype == x.dtype
            and grad.dtype in FLOAT_DTYPES and grad.device == x.device
            and all(isinstance(v, Number) and not isinstance(v, (complex, bool)) for v in (s0, s1)))


def plan_hardtanh_backward(grad: Any, x: Any, min_val: Any, max_val: Any) -> Plan | None:
    """dy where min_val < x < max_val, else 0 (aten's: zero at the bounds), in aten's layout
    of the result (its TensorIterator takes the gradient first). The elementwise planner
    leaves float64 to the Python implementation, which checks that fp32 holds the bounds."""
    if not _pair_and_scalars(grad, x, min_val, max_val):
        return None
    return _ew_plan("hardtanh_backward", [grad, x], grad.dtype, _CT[grad.dtype], [Arg(2), Arg(3)], aten_layout=True)


def hardtanh_backward(grad_output: Tensor, x: Tensor, min_val: Any, max_val: Any) -> Tensor:
    """dy where min_val < x < max_val, else 0: hardtanh's (and ReLU6's) backward."""
    if not _pair_and_scalars(grad_output, x, min_val, max_val):
        raise _refuse("hardtanh_backward", "operands (float tensors of one shape, dtype and device, and real bounds "
                                           "expected)")
    return _ew_run("hardtanh_backward", [grad_output, x], x.dtype, _CT[x.dtype], [min_val, max_val],
                   aten_layout=True)


def plan_softplus_backward(grad: Any, x: Any, beta: Any, threshold: Any) -> Plan | None:
    """dy * z / (z + 1) with z = exp(x * beta), or dy where x * beta > threshold (aten's
    formula), in aten's layout of the result; float64 as hardtanh_backward's."""
    if not _pair_and_scalars(grad, x, beta, threshold):
        return None
    return _ew_plan("softplus_backward", [grad, x], grad.dtype, _CT[grad.dtype], [Arg(2), Arg(3)], aten_layout=True)


def softplus_backward(grad_output: Tensor, x: Tensor, beta: Any, threshold: Any) -> Tensor:
    """dy * sigmoid(x * beta) (below ``threshold``; dy above it): softplus's backward, the
    time-step gradient of every Mamba-style scan."""
    if not _pair_and_scalars(grad_output, x, beta, threshold):
        raise _refuse("softplus_backward", "operands (float tensors of one shape, dtype and device, and real beta "
                                           "and threshold expected)")
    return _ew_run("softplus_backward", [grad_output, x], x.dtype, _CT[x.dtype], [beta, threshold],
                   aten_layout=True)


PLANNERS: dict[str, Any] = {
    "silu_backward": lambda g, x: plan_activation_backward("silu", g, x),
    "sigmoid_backward": lambda g, y: plan_activation_backward("sigmoid", g, y),
    "tanh_backward": lambda g, y: plan_activation_backward("tanh", g, y),
    "threshold_backward": lambda g, x, threshold: plan_activation_backward("threshold", g, x, threshold),
    "gelu_backward": _gelu_planner,
    "hardtanh_backward": plan_hardtanh_backward,
    "softplus_backward": plan_softplus_backward,
}
