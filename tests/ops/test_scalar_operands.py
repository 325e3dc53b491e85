"""Python bool scalars in Tensor arguments (a wrapped number: ``mask * True``, as
transformers' generate() computes ``is_pad_token_in_inputs * True``), and the Python
path's fallback to aten for a refused call with a number in a Tensor argument."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _registry

DTYPES = [torch.bool, torch.int64, torch.int32, torch.float32, torch.bfloat16]


@pytest.mark.parametrize("op", ["add", "mul", "div"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("first", [True, False])
def test_bool_scalar_operand(op, dtype, scalar, first):
    x = torch.tensor([0, 1, 3], dtype=torch.int64).to(dtype)
    args = (x, scalar) if first else (scalar, x)
    ref = getattr(torch, op)(*args)
    got = getattr(T, op)(*args)
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got, ref, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bool_scalar_where(dtype):
    c = torch.tensor([True, False, True])
    x = torch.tensor([0, 1, 3], dtype=torch.int64).to(dtype)
    for a, b in ((x, True), (False, x)):
        ref = torch.where(c, a, b)
        entries = [_registry._ATEN["where.self"]]  # enable()'s Python path: aten where refused
        if dtype != torch.bool:
            entries.append(T.where)
        for where in entries:
            got = where(c, a, b)
            assert got.dtype == ref.dtype
            torch.testing.assert_close(got, ref)


def test_bool_scalar_sub_raises_as_aten():
    for args in ((torch.tensor([1, 2]), True), (True, torch.tensor([1.0]))):
        with pytest.raises(RuntimeError):
            torch.sub(*args)
        with pytest.raises(TypeError, match="unsupported dtype torch.bool"):
            T.sub(*args)  # a refusal: enable() gives the call to aten, which raises its error


# enable()'s Python path (before the C++ path is built, or with it off): its entries are
# _registry._ATEN's; a call one refuses goes to aten's kernel, numbers in Tensor arguments too.
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
def test_python_path_bool_scalar(dtype):
    x = torch.tensor([0, 1, 3]).to(dtype)
    for name, fn in (("mul.Tensor", torch.mul), ("add.Tensor", torch.add), ("div.Tensor", torch.div)):
        got = _registry._ATEN[name](x, True)
        ref = fn(x, True)
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, equal_nan=True)
    with pytest.raises(RuntimeError, match="Subtraction"):
        _registry._ATEN["sub.Tensor"](x, True)


@pytest.mark.parametrize("x,v", [(torch.tensor([1 + 2j, 3j]), 2.5), (torch.tensor(1 + 2j), 2),
                                 (torch.tensor([1 + 2j], dtype=torch.complex128), True)])
def test_python_path_fallback_takes_a_number_in_a_tensor_argument(x, v):
    for name, fn in (("mul.Tensor", torch.mul), ("add.Tensor", torch.add)):
        for args in ((x, v), (v, x)):
            got = _registry._ATEN[name](*args)  # complex: refused, aten's kernel answers
            ref = fn(*args)
            assert got.dtype == ref.dtype and got.shape == ref.shape
            torch.testing.assert_close(got, ref)
