"""glu and glu_backward (gated.py) under enable(): aten's formula over both halves along any
dim, one launch on the C++ path, autograd through aten's derivative, aten's errors."""
import pytest
import torch
import tritonjit_ops as T
from _util import TOL, native_ops_or_skip, routed
from tritonjit_ops import gated

F = torch.nn.functional

CASES = [((2, 8, 5), 1), ((3, 6), -1), ((4, 2), 0), ((2, 4, 6, 2), 2), ((2, 3, 4), -3), ((0, 4), 1)]


def _sigmoid(b: torch.Tensor) -> torch.Tensor:
    return 1 / (1 + torch.exp(-b))


def _reference(x: torch.Tensor, dim: int, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """aten's CUDA formulas in float64, rounded once to x's dtype: ``a * sig(b)`` and the two
    halves of the gradient, ``sig(b) * dy`` and ``(1 - sig(b)) * sig(b) * dy * a``."""
    a, b = x.double().chunk(2, dim)
    s, g = _sigmoid(b), dy.double()
    return (a * s).to(x.dtype), torch.cat([s * g, (1 - s) * s * g * a], dim).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("shape,dim", CASES)
def test_glu_and_its_backward_agree_with_atens_formula(shape, dim, dtype):
    """Every dim, empty inputs, a strided gradient: the forward and the backward within one
    rounding of the formula aten's CUDA kernel computes (aten's CPU kernel rounds 16-bit
    intermediates of the backward, so it is not the reference here). A strided input is
    aten's, its result laid out in the input's memory order."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    half = list(shape)
    half[dim % len(shape)] //= 2
    dy = torch.randn(half, generator=g, dtype=torch.float64).to(dtype)
    want_y, want_dx = _reference(x, dim, dy)
    strided_dy = dy.transpose(0, -1).contiguous().transpose(0, -1)  # same values, other strides
    with T.enable():
        y, dx = F.glu(x, dim), torch.ops.aten.glu_backward(dy, x, dim)
        dxs = torch.ops.aten.glu_backward(strided_dy, x, dim)
    tol = TOL[dtype]
    assert y.shape == want_y.shape and y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, want_y, **tol)
    for got in (dx, dxs):
        assert got.shape == x.shape and got.dtype == dtype and got.is_contiguous()
        torch.testing.assert_close(got, want_dx, **tol)
    torch.testing.assert_close(y, F.glu(x, dim), **tol)  # and aten's own forward
    strided = x.transpose(0, -1).contiguous().transpose(0, -1)
    assert gated.plan_glu(strided, dim) is None or strided.is_contiguous()
    with T.enable():
        ys = F.glu(strided, dim)
    assert ys.stride() == F.glu(strided, dim).stride()


def test_glu_is_one_launch_on_the_cpp_path_and_its_gradient_is_routed_too():
    native_ops_or_skip()
    x = torch.randn(2, 12, 5)
    (y, dx), delta = routed(lambda: (F.glu(x, 1), torch.ops.aten.glu_backward(torch.ones(2, 6, 5), x, 1)),
                            ["glu", "glu_backward"])
    assert delta["launches"] == 2 and delta["aten_calls"] == 0 and delta["python_calls"] == 0, delta
    torch.testing.assert_close(y, F.glu(x, 1))
    xs = x.clone().requires_grad_()
    with T.enable(include=["glu", "glu_backward"], wait_native=True):
        (got,) = torch.autograd.grad(F.glu(xs, 1).pow(2).sum(), xs)
    (want,) = torch.autograd.grad(F.glu(xs, 1).pow(2).sum(), xs)
    torch.testing.assert_close(got, want)


def test_calls_the_kernel_does_not_serve_are_atens():
    """An odd halving dim raises aten's own error; an integer tensor is aten's to refuse; the
    planners decline both, and the direct implementations say what they expected."""
    with T.enable():
        with pytest.raises(RuntimeError, match="Halving dimension must be even"):
            F.glu(torch.randn(3, 5), -1)
        with pytest.raises(RuntimeError):
            F.glu(torch.ones(2, 4, dtype=torch.int64), -1)
    assert gated.plan_glu(torch.randn(3, 5), -1) is None
    assert gated.plan_glu(torch.randn(3, 4), 2) is None
    assert gated.plan_glu_backward(torch.randn(3, 3), torch.randn(3, 4), 1) is None  # not the half's shape
    with pytest.raises(NotImplementedError, match="glu_backward: .*even dim"):
        gated.glu_backward(torch.randn(3, 3), torch.randn(3, 4), 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,dim", [((4, 512, 99), 1), ((8, 7, 2048), -1)])
def test_glu_on_gpu_matches_atens_kernel(shape, dim):
    """bf16 on the device: a conformer's convolution module (channels halved) and a wide last
    dim; the same formula as aten's CUDA kernel, so the results agree to one bf16 rounding."""
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    half = list(shape)
    half[dim % len(shape)] //= 2
    dy = torch.randn(half, device="cuda", dtype=torch.bfloat16)
    want = F.glu(x, dim), torch.ops.aten.glu_backward(dy, x, dim)
    with T.enable(include=["glu", "glu_backward"], wait_native=True):
        got = F.glu(x, dim), torch.ops.aten.glu_backward(dy, x, dim)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-2, rtol=8e-3)
