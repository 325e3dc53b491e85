"""log_sigmoid_forward and log_sigmoid_backward (log_sigmoid.py) under enable(): aten's
values at the extremes, each device's buffer (the CPU's read by aten's own backward where only
the forward is routed), any layout of the gradient, one launch each, autograd."""
import pytest
import torch
import tritonjit_ops as T
from _util import TOL, routed
from tritonjit_ops import log_sigmoid

F = torch.nn.functional
aten = torch.ops.aten


def _x(dtype, device="cpu"):
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 30
    x[0, :6] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1e-8, -200.0], dtype=torch.float64)
    return x.to(device, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("route", [["log_sigmoid_forward", "log_sigmoid_backward"], ["log_sigmoid_forward"],
                                   ["log_sigmoid_backward"]])
def test_forward_and_backward_agree_with_aten_routed_together_or_apart(dtype, route):
    """Routed alone, the forward's CPU buffer is what aten's CPU backward reads, and aten's
    CPU buffer is what tritonjit's backward is handed (and does not need)."""
    x = _x(dtype)
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    want_y, want_buf = aten.log_sigmoid_forward(x)
    want_dx = aten.log_sigmoid_backward(dy, x, want_buf)
    with T.enable(include=route, wait_native=True):
        y, buf = aten.log_sigmoid_forward(x)
        dx = aten.log_sigmoid_backward(dy, x, buf)
    assert buf.shape == want_buf.shape and buf.dtype == want_buf.dtype
    torch.testing.assert_close(y, want_y, **TOL[dtype])
    torch.testing.assert_close(buf, want_buf, **TOL[dtype])
    torch.testing.assert_close(dx, want_dx, **TOL[dtype])


def test_backward_reads_any_layout_and_autograd_routes_both():
    x = _x(torch.float32)
    for dy in (torch.ones(1, 1).expand(6, 9), torch.randn(9, 6).t(), torch.randn(6, 18)[:, ::2]):
        buf = aten.log_sigmoid_forward(x)[1]
        with T.enable(wait_native=True):
            got = aten.log_sigmoid_backward(dy, x, buf)
        want = aten.log_sigmoid_backward(dy, x, buf)
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride()
    xs = x.clone().requires_grad_()
    (got,), delta = routed(lambda: torch.autograd.grad(F.logsigmoid(xs).sum(), xs),
                           ["log_sigmoid_forward", "log_sigmoid_backward"])
    assert delta["aten_calls"] == 0 and delta["python_calls"] == 0, delta
    torch.testing.assert_close(got, torch.autograd.grad(F.logsigmoid(xs).sum(), xs)[0])


def test_one_launch_each_and_what_aten_keeps():
    x, dy = _x(torch.float32), torch.randn(6, 9)
    buf = aten.log_sigmoid_forward(x)[1]
    _, delta = routed(lambda: (aten.log_sigmoid_forward(x), aten.log_sigmoid_backward(dy, x, buf)),
                      ["log_sigmoid_forward", "log_sigmoid_backward"])
    assert delta["launches"] == 2 and delta["aten_calls"] == 0, delta
    assert log_sigmoid.plan_log_sigmoid_forward(x.t()) is None  # aten keeps a strided input's layout
    assert log_sigmoid.plan_log_sigmoid_forward(x.int()) is None
    with pytest.raises(NotImplementedError, match="log_sigmoid_forward"):
        log_sigmoid.log_sigmoid_forward(x.t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_device_paths_elementwise_formula_in_any_layout(dtype):
    """The formula a device's forward runs (the elementwise kernel's ``log_sigmoid``), on the
    interpreter: aten's values at the extremes, and aten's layout for a transposed input."""
    from tritonjit_ops import elementwise

    x = _x(dtype)
    for v in (x, x.t(), x[:, ::2]):
        got = elementwise.run("log_sigmoid", [v], dtype, "fp32", aten_layout=True)
        want = aten.log_sigmoid_forward(v)[0]
        torch.testing.assert_close(got, want, **TOL[dtype])
        assert got.stride() == torch.empty_like(v).stride()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "large"])
def test_on_gpu_the_buffer_is_empty_and_values_are_atens(dtype, layout):
    x = _x(dtype, "cuda")
    if layout == "transposed":
        x = x.t()
    elif layout == "large":  # the vector blocks of the elementwise kernel, and a tail
        x = (torch.randn(1 << 20 | 77, device="cuda") * 30).to(dtype)
    dy = torch.randn(x.shape, device="cuda", dtype=dtype)
    want_y, want_buf = aten.log_sigmoid_forward(x)
    _, delta = routed(lambda: aten.log_sigmoid_forward(x), ["log_sigmoid_forward"])
    assert delta["launches"] == 1 and delta["aten_calls"] == 0, delta
    with T.enable(include=["log_sigmoid_forward", "log_sigmoid_backward"], wait_native=True):
        y, buf = aten.log_sigmoid_forward(x)
        dx = aten.log_sigmoid_backward(dy, x, buf)
    assert buf.numel() == 0 == want_buf.numel() and buf.dtype == want_buf.dtype
    assert y.stride() == want_y.stride()
    torch.testing.assert_close(y, want_y, **TOL[dtype])
    torch.testing.assert_close(dx, aten.log_sigmoid_backward(dy, x, want_buf), **TOL[dtype])
