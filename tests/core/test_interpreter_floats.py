"""Float arguments on the interpreter reach the kernel as a compiled kernel receives them: an
fp32 scalar (or the annotated type), not a Python float. Triton 3.6's interpreter passes the
Python float on, which the kernel's code takes for a constant: ``-0.0`` became +0.0 (a
constant 0 is made with no sign) and a constant is weakly typed (``x_fp16 * v`` stayed fp16
where the compiled kernel's fp32 argument promotes to fp32)."""

from __future__ import annotations

import math

import pytest
import triton
import triton.language as tl
import tritonjit

torch = pytest.importorskip("torch")


@triton.jit
def _store_scalars(out, v, eps: tl.float64, h: tl.float16):
    tl.store(out, v)
    tl.store(out + 1, eps)
    tl.store(out + 2, h)


@triton.jit
def _scale(x, out, n, v, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    r = tl.load(x + offs, mask=m) * v
    tl.store(out + offs, r.to(tl.float64), mask=m)  # the product's own precision, kept


def test_a_float_argument_has_its_parameter_type(interpreter_backend):
    out = torch.zeros(3, dtype=torch.float64)
    tritonjit.function(_store_scalars)[(1,)](out, 1e-10, 1e-10, 0.1)
    assert out[0].item() == float(torch.tensor(1e-10, dtype=torch.float32))  # fp32, as compiled
    assert out[1].item() == 1e-10  # annotated tl.float64: the double itself
    assert out[2].item() == float(torch.tensor(0.1, dtype=torch.float16))  # annotated tl.float16


@pytest.mark.parametrize("v", [-0.0, 0.0, float("-inf"), 1e39])
def test_signed_zero_and_range_pass_as_fp32(interpreter_backend, v):
    out = torch.zeros(3, dtype=torch.float64)
    tritonjit.function(_store_scalars)[(1,)](out, v, v, v)
    want = float(torch.tensor(v, dtype=torch.float32))  # 1e39 is inf in fp32, as a cast gives
    assert out[0].item() == want and math.copysign(1.0, out[0].item()) == math.copysign(1.0, v)
    assert math.copysign(1.0, out[1].item()) == math.copysign(1.0, v)


def test_a_float_argument_promotes_a_half_tensor_as_compiled(interpreter_backend):
    x = torch.tensor([1.0009765625, 3.0, -0.0], dtype=torch.float16)  # 1 + 2**-10: an fp16 value
    out = torch.zeros(3, dtype=torch.float64)
    tritonjit.function(_scale)[(1,)](x, out, 3, 1.0001, BLOCK=4)
    want = (x.float() * torch.tensor(1.0001, dtype=torch.float32)).double()  # fp32 products
    assert want[0] != float(torch.tensor(want[0].item(), dtype=torch.float16))  # fp16 would round it
    assert torch.equal(out, want)
    assert math.copysign(1.0, out[2].item()) == -1.0
