"""Property test of the direct entries' C++ path: random shapes, broadcasts, views,
dtypes and Python scalars through tritonjit_ops' entries agree with their Python
implementations and with torch, whichever path serves each call (on the interpreter)."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_or_skip, needs_cxx

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = needs_cxx
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.float16: dict(rtol=2e-3, atol=2e-3), torch.int32: dict(rtol=0, atol=0), torch.int64: dict(rtol=0, atol=0)}


@pytest.fixture(scope="module")
def native():
    mod = native_ops_or_skip()
    _START.update(mod.stats())
    return mod


_START: dict = {}


@st.composite
def operand(draw, shape, dtype):
    """A tensor of ``shape`` as a model may pass it: contiguous, a transposed copy seen
    through .t()-like permutation, or a strided slice of a larger tensor."""
    kind = draw(st.sampled_from(["contiguous", "permuted", "sliced"]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))

    def make(s):
        t = torch.randn(s, generator=g) * 4
        return t.to(dtype) if dtype.is_floating_point else t.round().to(dtype)

    if kind == "permuted" and len(shape) >= 2:
        return make(tuple(reversed(shape))).permute(*reversed(range(len(shape))))
    if kind == "sliced" and len(shape) >= 1:
        return make(shape[:-1] + (2 * shape[-1],))[..., ::2]
    return make(shape)


@st.composite
def binary_call(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    op = draw(st.sampled_from(["add", "sub", "mul", "maximum", "minimum", "div"]))
    dtype = draw(st.sampled_from(FLOATS + ([torch.int32, torch.int64] if op != "div" else [])))
    x = draw(operand(shape, dtype))
    other = draw(st.sampled_from(["same", "broadcast", "scalar", "cpu0d"]))
    if other == "scalar" and op not in ("maximum", "minimum"):
        y = draw(st.sampled_from([2, -3, 0.5, 1.0]))
    elif other == "cpu0d" and op not in ("maximum", "minimum"):
        y = torch.tensor(draw(st.sampled_from([2.0, -1.5])))
    elif other == "broadcast":
        bshape = tuple(1 if draw(st.booleans()) else s for s in shape)[draw(st.integers(0, ndim - 1)):]
        y = draw(operand(bshape, dtype))
    else:
        y = draw(operand(shape, dtype))
    if dtype in (torch.int32, torch.int64) and not isinstance(y, torch.Tensor):
        y = int(y) if float(y).is_integer() else y
    return op, x, y


@SETTINGS
@given(call=binary_call())
def test_binary_entries_agree_with_python_and_torch(native, call):
    op, x, y = call
    ref = getattr(torch, op)(x, y)
    for path in (getattr(T, op), getattr(T, op).__wrapped__):
        got = path(x, y)
        close(got, ref, **TOL.get(ref.dtype, {}))


@st.composite
def reduction_call(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from(FLOATS))
    x = draw(operand(shape, dtype))
    op = draw(st.sampled_from(["sum", "mean", "amax", "softmax", "log_softmax"]))
    dim = draw(st.integers(-ndim, ndim - 1))
    keepdim = draw(st.booleans())
    return op, x, dim, keepdim


@SETTINGS
@given(call=reduction_call())
def test_reduction_and_softmax_entries_agree_with_python_and_torch(native, call):
    op, x, dim, keepdim = call
    if op in ("softmax", "log_softmax"):
        ref = getattr(torch, op)(x.float(), dim).to(x.dtype)
        paths = [lambda f: f(x, dim)]
    else:
        ref = getattr(torch, op)(x.float(), [dim], keepdim).to(x.dtype)
        paths = [lambda f: f(x, [dim], keepdim), lambda f: f(x, dim, keepdim=keepdim)]
    for call_with in paths:
        for entry in (getattr(T, op), getattr(T, op).__wrapped__):
            close(call_with(entry), ref, **TOL[x.dtype])


def test_most_of_those_calls_ran_on_the_cpp_path(native):
    """(runs after the two above, in file order) the direct entries served the bulk of
    their calls in C++: the agreement above is the C++ path's, not only the Python one's."""
    now = native.stats()
    hits = now["direct_hits"] - _START["direct_hits"]
    handed = now["direct_python_calls"] - _START["direct_python_calls"]
    assert hits >= 60 and hits >= 4 * handed, (hits, handed)
