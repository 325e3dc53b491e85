"""``log(sigmoid(x))``: aten's ``log_sigmoid_forward(self) -> (output, buffer)`` and
``log_sigmoid_backward(grad_output, self, buffer)`` (``F.logsigmoid``: DPO-style preference
losses, xLSTM's gates).

The forward is aten's CUDA formula, ``min(x, 0) - log1p(exp(-|x|))``, in the opmath type. Its
``buffer`` is where aten's devices differ: empty on CUDA, whose backward recomputes from ``x``,
and ``exp(-|x|)`` on the CPU, whose backward reads it. The plan gives each device its
own, so either backward (tritonjit's, or aten's where only the forward is routed) finds what
it reads. The backward is aten's CUDA formula, ``dy * (1[x<0] - s * z / (1 + z))`` with
``z = exp(-|x|)`` and ``s`` the sign of ``-x``, on the strided elementwise kernel (any layouts:
autograd hands it an expanded gradient), and ignores the buffer. On a device the forward is the
elementwise kernel's ``log_sigmoid`` (any layout, aten's layout of the result); on the CPU, and
in float64, this module's kernel takes contiguous inputs (others go to aten) into a contiguous
output, as aten's for them.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit
from ._math import log1p
from ._plan import Buffer, In, Out, Plan, launch, run
from .copy import _idx64
from .elementwise import _CT
from .elementwise import plan as _ew_plan
from .elementwise import run as _ew_run

Tensor = torch.Tensor

_BLOCK = 1024


@triton.jit
def _log_sigmoid_kernel(x, out, buf, n, CPU_BUFFER: tl.constexpr, BLOCK: tl.constexpr, IDX64: tl.constexpr = False):
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if IDX64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m, other=0.0).to(ACC)
    z = tl.exp(-tl.abs(v))
    tl.store(out + offs, (tl.minimum(v, 0.0) - log1p(z)).to(out.dtype.element_ty), mask=m)
    if CPU_BUFFER:
        tl.store(buf + offs, z.to(buf.dtype.element_ty), mask=m)


_fwd = jit(_log_sigmoid_kernel)


def plan_log_sigmoid_forward(x: Any) -> Plan | None:
    """On a device (16- and 32-bit floats): the elementwise kernel's ``log_sigmoid`` in aten's
    layout of the result, any input layout, and an empty buffer. On an H100 against eager it
    measured 0.88-1.01x up to 4M elements and in fp32 up to 16M, 1.21-1.26x in bf16 at 8M-16M
    elements, where this module's kernel (one program per 1024 elements) had measured
    1.10-1.20x at 4M-16M; the overload stays opt-in for that. Otherwise (the CPU's buffer,
    float64) this module's kernel over a contiguous input."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
        return None
    cpu = x.device.type == "cpu"
    if not cpu and x.dtype != torch.float64:
        p = _ew_plan("log_sigmoid", [x], x.dtype, _CT[x.dtype], aten_layout=True)
        if p is None or p.aten:
            return p
        return p._replace(outputs=(*p.outputs, Buffer((0,), x.dtype)), result=(0, 1))
    if not x.is_contiguous():
        return None
    n = x.numel()
    out = (Buffer(tuple(x.shape), x.dtype), Buffer(tuple(x.shape) if cpu else (0,), x.dtype))
    if n == 0:
        return Plan(out, (), result=(0, 1))
    L = launch(_fwd, (cdiv(n, _BLOCK),), In(0), Out(0), Out(1), n, CPU_BUFFER=cpu, BLOCK=_BLOCK, **_idx64(n))
    return Plan(out, (L,), result=(0, 1))


def plan_log_sigmoid_backward(grad: Any, x: Any, buffer: Any) -> Plan | None:
    """The strided elementwise kernel over the gradient and the input (any layouts: autograd
    hands an expanded gradient), in aten's layout of the result."""
    if not (isinstance(x, Tensor) and isinstance(grad, Tensor) and grad.shape == x.shape and grad.dtype == x.dtype
            and x.dtype in FLOAT_DTYPES and grad.device == x.device):
        return None
    return _ew_plan("log_sigmoid_backward", [grad, x], x.dtype, _CT[x.dtype], aten_layout=True)


def _refuse(op: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops.{op}: float tensors (on the CPU and in float64, a contiguous input "
                               "to the forward; a gradient of the input's shape and dtype) expected; aten's kernel "
                               "serves this call")


def log_sigmoid_forward(x: Tensor) -> tuple[Tensor, Tensor]:
    """(log(sigmoid(x)), the device's buffer: empty, or ``exp(-|x|)`` on the CPU)."""
    p = plan_log_sigmoid_forward(x)
    if p is None:
        raise _refuse("log_sigmoid_forward")
    return run(p, (x,))


def log_sigmoid_backward(grad_output: Tensor, x: Tensor, buffer: Tensor) -> Tensor:
    """The gradient of log(sigmoid(x)), from ``x`` (the buffer is not read)."""
    if plan_log_sigmoid_backward(grad_output, x, buffer) is None:
        raise _refuse("log_sigmoid_backward")
    return _ew_run("log_sigmoid_backward", [grad_output, x], x.dtype, _CT[x.dtype], aten_layout=True)


#: aten overload -> Python implementation (enable()'s table; the backward's through autograd.py)
ATEN: dict[str, Any] = {"log_sigmoid_forward": log_sigmoid_forward}
BACKWARD: dict[str, Any] = {"log_sigmoid_backward": log_sigmoid_backward}
#: aten overload -> planner of the C++ operator path
PLANNERS: dict[str, Any] = {"log_sigmoid_forward": plan_log_sigmoid_forward}
BACKWARD_PLANNERS: dict[str, Any] = {"log_sigmoid_backward": plan_log_sigmoid_backward}
