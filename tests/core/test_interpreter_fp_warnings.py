"""The interpreter computes as a GPU does: IEEE results for masked lanes (-inf - -inf,
x / 0) without numpy's RuntimeWarnings, which a user would otherwise see on every
softmax of a row shorter than its block."""

from __future__ import annotations

import warnings

import pytest
import triton
import triton.language as tl
import tritonjit

torch = pytest.importorskip("torch")


@triton.jit
def _row_softmax(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m, other=float("-inf"))
    e = tl.exp(v - tl.max(v, axis=0))  # the masked lanes compute -inf - max, and -inf - -inf below
    z = v - v
    tl.store(out + offs, e / tl.sum(e, axis=0) + tl.where(m, 0.0, z), mask=m)


def test_masked_lanes_raise_no_numpy_warnings(interpreter_backend):  # the interpreter's, on a GPU machine too
    x = torch.randn(5)
    out = torch.empty(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        tritonjit.function(_row_softmax)[(1,)](x, out, 5, BLOCK=8)
    torch.testing.assert_close(out, torch.softmax(x, 0))
