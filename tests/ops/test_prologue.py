"""The small-call prologues (tritonjit_ops/_prologue.py): the C++ build answers what
the Python reference answers, for the cases the fast paths take and the ones they leave."""

from __future__ import annotations

import shutil

import pytest
import torch
from tritonjit_ops import _prologue

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="no C++ compiler")


@pytest.fixture(scope="module")
def native():
    assert _prologue.start(wait=True), _prologue.native().reason
    return _prologue.native().module


def _cases():
    f32, f16, bf16 = (torch.randn(4, 6, dtype=d) for d in (torch.float32, torch.float16, torch.bfloat16))

    class Sub(torch.Tensor):
        pass

    yield f32, f32.clone()
    yield f16, f16 + 1
    yield bf16, bf16.clone()
    yield torch.empty(0), torch.empty(0)
    yield f32, f16                      # two dtypes
    yield f32, f32.t().contiguous()     # two shapes
    yield f32, f32[:, :3]
    yield f32.t(), f32.t()              # not contiguous
    yield f32[:, ::2], f32[:, ::2]
    yield f32, 2.0                      # a scalar
    yield 2, f32
    yield f32.double(), f32.double()    # not a flat float dtype
    yield f32.int(), f32.int()
    yield f32.as_subclass(Sub), f32
    yield torch.nn.Parameter(f32), f32  # a Parameter is a plain tensor to torch's C++ API


@pytest.mark.parametrize("case", range(15))
def test_binary_agrees_with_python(native, case):
    x, y = list(_cases())[case]
    want = _prologue.binary_py(x, y)
    got = native.binary(x, y)
    if isinstance(x, torch.nn.Parameter):  # Python's check is `__class__ is Tensor`: it declines
        assert want is None and got is not None
        want = _prologue.binary_py(x.data, y)
    if want is None:
        assert got is None
        return
    o, n, up = got
    assert (n, up) == want[1:] and n == x.numel()
    assert o.shape == x.shape and o.dtype == x.dtype and o.is_contiguous() and o.device == x.device
    assert o.data_ptr() != x.data_ptr() or n == 0


def test_binary_declines_two_devices_and_views(native):
    x = torch.randn(3)
    assert native.binary(x, torch.randn(3, device="meta")) is None
    assert native.binary(x, torch._neg_view(x)) is None  # a neg-bit view: raw memory is not its value


def test_like(native):
    x = torch.randn(5, 7, dtype=torch.bfloat16)
    o = native.like(x)
    assert o.shape == x.shape and o.dtype == x.dtype and o.is_contiguous() and o.data_ptr() != x.data_ptr()

    class Mode(torch.overrides.TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Mode.calls += 1
            return func(*args, **(kwargs or {}))

    with Mode():  # torch.empty_like through Python, which the mode sees
        o = native.like(x)
    assert Mode.calls == 1 and o.shape == x.shape


def test_ops_use_the_native_prologue(native):
    import tritonjit_ops as T

    assert _prologue.binary is native.binary and _prologue.like is native.like
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(T.add(x, y), x + y)
    torch.testing.assert_close(T.mul(x, y), x * y)
    torch.testing.assert_close(T.softmax(x.view(10, 10), -1), torch.softmax(x.view(10, 10), -1))
