"""The gated linear unit: aten's ``glu(self, dim)`` and ``glu_backward(grad, self, dim)``.

``glu`` halves ``self`` along ``dim`` into ``a`` and ``b`` and gives ``a * sigmoid(b)``: the
convolution module of every conformer (Wav2Vec2-Conformer, Wav2Vec2-BERT, Parakeet,
Seamless) and the front end of Speech2Text. Seen as ``[outer, 2, half * inner]`` (a
contiguous ``self``), a row of the output is ``a``'s row times the sigmoid of ``b``'s, which
lies ``half * inner`` elements further: one launch over (rows, column tiles), computed in
the opmath type with aten's formula (``1 / (1 + exp(-b))``, divided rounded to nearest as
aten's CUDA kernel does). The backward writes both halves of ``self``'s gradient in the same
pass (a strided gradient is read from a contiguous copy). A strided ``self`` goes to aten,
whose result follows its memory order (ours are contiguous, as aten's for a contiguous
``self``), as do an odd halving dimension, a 0-dim or a non-float ``self``.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit
from ._math import div_rn
from ._plan import Buffer, In, Out, Plan, launch, run
from .fused import gated_tiles

Tensor = torch.Tensor


@triton.jit
def _glu_kernel(x, out, D, BLOCK: tl.constexpr):
    """out[r, c] = x[r, c] * sigmoid(x[r, D + c]) over rows of 2 * D."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    a = tl.load(x + row * 2 * D + cols, mask=m).to(ACC)
    b = tl.load(x + row * 2 * D + D + cols, mask=m).to(ACC)
    sig = div_rn(tl.zeros_like(b) + 1.0, 1.0 + tl.exp(-b))
    tl.store(out + row * D + cols, (a * sig).to(out.dtype.element_ty), mask=m)


@triton.jit
def _glu_bwd_kernel(dy, x, dx, D, BLOCK: tl.constexpr):
    """dx[r, c] = dy * sigmoid(b), dx[r, D + c] = dy * a * sigmoid(b) * (1 - sigmoid(b))."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    g = tl.load(dy + row * D + cols, mask=m).to(ACC)
    a = tl.load(x + row * 2 * D + cols, mask=m).to(ACC)
    b = tl.load(x + row * 2 * D + D + cols, mask=m).to(ACC)
    sig = div_rn(tl.zeros_like(b) + 1.0, 1.0 + tl.exp(-b))
    tl.store(dx + row * 2 * D + cols, (g * sig).to(dx.dtype.element_ty), mask=m)
    tl.store(dx + row * 2 * D + D + cols, ((1.0 - sig) * sig * g * a).to(dx.dtype.element_ty), mask=m)


_glu = jit(_glu_kernel)
_glu_bwd = jit(_glu_bwd_kernel)


def _geometry(x: Any, dim: Any) -> tuple[int, int, int] | None:
    """(dim, rows, D) of a glu over ``x``: rows of ``2 * D`` elements once ``x`` is
    contiguous; None where aten must serve (or reject) the call."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or x.dim() == 0 or isinstance(dim, bool):
        return None
    if not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        return None
    dim %= x.dim()
    if x.shape[dim] % 2:
        return None  # aten's "Halving dimension must be even"
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    rows = 1
    for s in x.shape[:dim]:
        rows *= s
    return dim, rows, x.shape[dim] // 2 * inner


def plan_glu(x: Any, dim: Any = -1) -> Plan | None:
    g = _geometry(x, dim)
    if g is None or not x.is_contiguous():
        return None  # aten lays a strided input's result out in its memory order
    d, rows, D = g
    shape = list(x.shape)
    shape[d] //= 2
    out = (Buffer(tuple(shape), x.dtype),)
    if rows * D == 0:
        return Plan(out, ())
    block, warps = gated_tiles(D, x.is_cpu)
    return Plan(out, (launch(_glu, (rows, cdiv(D, block)), In(0), Out(0), D, BLOCK=block, num_warps=warps),))


def plan_glu_backward(grad: Any, x: Any, dim: Any) -> Plan | None:
    g = _geometry(x, dim)
    if (g is None or not x.is_contiguous() or not isinstance(grad, Tensor) or grad.dtype != x.dtype
            or grad.device != x.device):
        return None  # aten lays a strided input's gradient out as the input
    d, rows, D = g
    half = list(x.shape)
    half[d] //= 2
    if list(grad.shape) != half:
        return None
    out = (Buffer(tuple(x.shape), x.dtype),)
    contiguous = () if grad.is_contiguous() else (0,)
    if rows * D == 0:
        return Plan(out, (), contiguous=contiguous)
    block, warps = gated_tiles(D, x.is_cpu)
    L = launch(_glu_bwd, (rows, cdiv(D, block)), In(0), In(1), Out(0), D, BLOCK=block, num_warps=warps)
    return Plan(out, (L,), contiguous=contiguous)


def _refuse(op: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops.{op}: a contiguous float tensor of rank >= 1 halved along an even dim "
                               "(and a gradient of the half's shape and dtype) expected; aten's kernel serves this "
                               "call")


def glu(x: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` of the halves of ``x`` along ``dim``."""
    p = plan_glu(x, dim)
    if p is None:
        raise _refuse("glu")
    return run(p, (x, dim))


def glu_backward(grad_output: Tensor, x: Tensor, dim: int) -> Tensor:
    """The gradient of ``glu`` with respect to ``x`` (both halves)."""
    p = plan_glu_backward(grad_output, x, dim)
    if p is None:
        raise _refuse("glu_backward")
    return run(p, (grad_output, x, dim))


#: aten overload -> Python implementation (enable()'s table; the backward's through autograd.py)
ATEN: dict[str, Any] = {"glu": glu}
BACKWARD: dict[str, Any] = {"glu_backward": glu_backward}
#: aten overload -> planner of the C++ operator path
PLANNERS: dict[str, Any] = {"glu": plan_glu}
BACKWARD_PLANNERS: dict[str, Any] = {"glu_backward": plan_glu_backward}
