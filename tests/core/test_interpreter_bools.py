"""Python bools as runtime arguments run on the interpreter (Triton 3.6's own
interpreter refuses them: an int1 scalar held in an int32 array)."""

from __future__ import annotations

from collections import namedtuple

import pytest
import triton
import triton.language as tl
import tritonjit

torch = pytest.importorskip("torch")

Scale = namedtuple("Scale", ["on", "factor"])


@triton.jit
def _pick(x, y, out, n, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.where(flag, tl.load(x + offs, mask=m), tl.load(y + offs, mask=m)), mask=m)


@triton.jit
def _bump_if(x, out, n, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    if flag:
        v = v + 1.0
    tl.store(out + offs, v, mask=m)


@triton.jit
def _scale_if(x, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    if scale[0]:
        v = v * scale[1]
    tl.store(out + offs, v, mask=m)


N = 300


@pytest.fixture
def data() -> tuple:
    return torch.randn(N), torch.randn(N), torch.full((N,), float("nan"))


def _grid(block: int = 128) -> tuple[int]:
    return (triton.cdiv(N, block),)


@pytest.mark.parametrize("flag", [True, False])
def test_bool_in_where(interpreter_backend, data, flag):
    x, y, out = data
    f = tritonjit.function(_pick)
    assert f.signature(x, y, out, N, flag, BLOCK=128).split(",")[4] == "u1"
    f[_grid()](x, y, out, N, flag, BLOCK=128)
    torch.testing.assert_close(out, x if flag else y)


@pytest.mark.parametrize("flag", [True, False])
def test_bool_in_if(interpreter_backend, data, flag):
    x, _, out = data
    tritonjit.function(_bump_if)[_grid()](x, out, N, flag, BLOCK=128)
    torch.testing.assert_close(out, x + 1.0 if flag else x)


@pytest.mark.parametrize("make", [tuple, Scale], ids=["tuple", "namedtuple"])
@pytest.mark.parametrize("flag", [True, False])
def test_bool_inside_a_tuple(interpreter_backend, data, flag, make):
    x, _, out = data
    scale = make([flag, 3.0]) if make is tuple else make(flag, 3.0)
    tritonjit.function(_scale_if)[_grid()](x, out, N, scale, BLOCK=128)
    torch.testing.assert_close(out, x * 3.0 if flag else x)


def test_both_values_reuse_one_variant(interpreter_backend, data):
    x, y, out = data
    f = tritonjit.function(_pick)
    assert f.signature(x, y, out, N, True, BLOCK=128) == f.signature(x, y, out, N, False, BLOCK=128)
    f[_grid()](x, y, out, N, True, BLOCK=128)
    f[_grid()](x, y, out, N, False, BLOCK=128)
    torch.testing.assert_close(out, y)


def test_triton_interpreter_is_left_as_it_was(interpreter_backend, data):
    import triton.runtime.interpreter as interp

    before = interp._implicit_cvt
    x, y, out = data
    tritonjit.function(_pick)[_grid()](x, y, out, N, True, BLOCK=128)
    assert interp._implicit_cvt is before
