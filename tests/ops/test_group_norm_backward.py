"""native_group_norm_backward (group_norm_backward.py): the input, weight and bias gradients
against a float64 reference, the output mask, layouts, the C++ path's launches, and the
backward of tritonjit's own group_norm."""
import pytest
import torch
import tritonjit_ops as T
from _util import routed
from tritonjit_ops import group_norm_backward as GB

F = torch.nn.functional
aten = torch.ops.aten

#: (N, C, spatial, groups): groups of several channels; one channel a group and one long
#: spatial dim (wav2vec2's feature extractor); one group; HxW 1; a spatial dim longer than
#: a block (the sums' loop runs several times); a 4-D image
SHAPES = [(2, 6, (5,), 3), (3, 8, (300,), 8), (2, 6, (5,), 1), (4, 4, (), 2), (1, 4, (2500,), 2), (2, 8, (3, 5), 4)]


def _problem(n, c, spatial, g, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, *spatial, generator=gen, dtype=torch.float64)
    dy = torch.randn(n, c, *spatial, generator=gen, dtype=torch.float64)
    w, b = torch.randn(c, generator=gen, dtype=torch.float64), torch.randn(c, generator=gen, dtype=torch.float64)
    return (t.to(dtype) for t in (x, dy, w, b))


def _err(got, want):
    return float((got.double() - want).abs().max() / want.abs().max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("n,c,spatial,g", SHAPES)
def test_gradients_agree_with_float64_as_closely_as_atens(n, c, spatial, g, dtype):
    """Each gradient within the error of aten's own kernel against a float64 reference (two
    roundings of the output dtype's at most: aten's CPU kernel and this one order the sums
    differently). float64's reference is aten's own float64 kernel: a bound of its own for it,
    as loose as the ill-conditioned HxW-1 case needs (a group of two values)."""
    x, dy, w, b = _problem(n, c, spatial, g, dtype)
    hw = x[0, 0].numel()
    _, mean, rstd = aten.native_group_norm(x, w, b, n, c, hw, g, 1e-5)
    mask = [True, True, True]
    ref64 = aten.native_group_norm_backward(dy.double(), x.double(), mean.double(), rstd.double(), w.double(),
                                            n, c, hw, g, mask)
    theirs = aten.native_group_norm_backward(dy, x, mean, rstd, w, n, c, hw, g, mask)
    ours = GB.native_group_norm_backward(dy, x, mean, rstd, w, n, c, hw, g, mask)
    eps = {torch.float32: 2.4e-7, torch.bfloat16: 1.6e-2, torch.float64: 1e-11}[dtype]
    for name, o, t, r in zip(("dx", "dweight", "dbias"), ours, theirs, ref64):
        assert o.shape == t.shape and o.dtype == t.dtype and o.is_contiguous(), name
        assert _err(o, r) <= 2 * _err(t, r) + 2 * eps, (name, _err(o, r), _err(t, r))


def test_output_mask_and_layouts():
    """Only what the mask asks is computed (None elsewhere); a channels-last gradient and
    strided statistics are read through contiguous copies; dx is contiguous, as aten's for a
    contiguous input. A channels-last input is aten's (its CPU kernel gives a channels-last dx)."""
    x, dy, w, b = _problem(2, 8, (3, 5), 4, torch.float32)
    _, mean, rstd = aten.native_group_norm(x, w, b, 2, 8, 15, 4, 1e-5)
    for mask in ([True, False, False], [False, True, False], [False, False, True], [True, False, True]):
        got = GB.native_group_norm_backward(dy, x, mean, rstd, w, 2, 8, 15, 4, mask)
        want = aten.native_group_norm_backward(dy, x, mean, rstd, w, 2, 8, 15, 4, mask)
        for o, t in zip(got, want):
            assert (o is None) == (t is None), mask
            if o is not None:
                torch.testing.assert_close(o, t)
    dyl = dy.to(memory_format=torch.channels_last)
    mean_t = mean.t().contiguous().t()  # same values, column-major
    got = GB.native_group_norm_backward(dyl, x, mean_t, rstd, w, 2, 8, 15, 4, [True] * 3)
    want = aten.native_group_norm_backward(dy, x, mean, rstd, w, 2, 8, 15, 4, [True] * 3)
    assert got[0].is_contiguous()
    for o, t in zip(got, want):
        torch.testing.assert_close(o, t)
    xl = x.to(memory_format=torch.channels_last)
    assert GB.plan_native_group_norm_backward(dy, xl, mean, rstd, w, 2, 8, 15, 4, [True] * 3) is None
    with T.enable(include=["native_group_norm_backward"]):
        got = aten.native_group_norm_backward(dy, xl, mean, rstd, w, 2, 8, 15, 4, [True] * 3)
    assert got[0].stride() == aten.native_group_norm_backward(dy, xl, mean, rstd, w, 2, 8, 15, 4, [True] * 3)[0].stride()


def test_calls_it_declines_are_atens():
    x, dy, w, _ = _problem(2, 6, (5,), 3, torch.float32)
    mean = rstd = torch.ones(2, 3)
    assert GB.plan_native_group_norm_backward(dy, x, mean, rstd, w, 2, 6, 5, 4, [True] * 3) is None  # 6 % 4
    assert GB.plan_native_group_norm_backward(dy, x, mean, rstd, w.double(), 2, 6, 5, 3, [True] * 3) is None
    assert GB.plan_native_group_norm_backward(dy, x, torch.ones(5), rstd, w, 2, 6, 5, 3, [True] * 3) is None
    empty = torch.empty(0, 6, 5)
    assert GB.plan_native_group_norm_backward(empty, empty, torch.ones(0, 3), torch.ones(0, 3), w, 0, 6, 5, 3,
                                              [True] * 3) is None
    with pytest.raises(NotImplementedError, match="native_group_norm_backward"):
        GB.native_group_norm_backward(dy, x, mean, rstd, w, 2, 6, 5, 4, [True] * 3)


def test_routed_under_enable_in_three_launches_and_in_training():
    x, dy, w, b = _problem(2, 8, (3, 5), 4, torch.float32)
    _, mean, rstd = aten.native_group_norm(x, w, b, 2, 8, 15, 4, 1e-5)
    got, delta = routed(lambda: aten.native_group_norm_backward(dy, x, mean, rstd, w, 2, 8, 15, 4, [True] * 3),
                        ["native_group_norm_backward"])
    assert delta["launches"] == 3 and delta["aten_calls"] == 0 and delta["python_calls"] == 0, delta
    _, delta = routed(lambda: aten.native_group_norm_backward(dy, x, mean, rstd, w, 2, 8, 15, 4,
                                                              [True, False, False]), ["native_group_norm_backward"])
    assert delta["launches"] == 2, delta  # the sums and dx: no parameter pass
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    with T.enable(include=["native_group_norm", "native_group_norm_backward"], wait_native=True):
        grads = torch.autograd.grad(F.group_norm(xs, 4, ws, bs), (xs, ws, bs), dy)
    for o, t in zip(grads, torch.autograd.grad(F.group_norm(xs, 4, ws, bs), (xs, ws, bs), dy)):
        torch.testing.assert_close(o, t)


@pytest.mark.parametrize("has_w,has_b", [(True, True), (False, True), (True, False), (False, False)])
def test_tritonjit_group_norm_backward(has_w, has_b):
    """The direct entry's gradients, the bias's included where there is no weight (aten's own
    backward cannot give that one: it allocates dbias like the weight)."""
    x, dy, w, b = _problem(2, 6, (5,), 3, torch.float32)
    xs = x.clone().requires_grad_()
    ws = w.clone().requires_grad_() if has_w else None
    bs = b.clone().requires_grad_() if has_b else None
    T.group_norm(xs, 3, ws, bs).backward(dy)
    x64 = x.double().requires_grad_()
    w64 = w.double().requires_grad_() if has_w else None
    F.group_norm(x64, 3, w64, None).backward(dy.double())
    torch.testing.assert_close(xs.grad, x64.grad.float())
    if has_w:
        torch.testing.assert_close(ws.grad, w64.grad.float())
    if has_b:
        torch.testing.assert_close(bs.grad, dy.sum((0, 2)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n,c,spatial,g", [(8, 512, (3200,), 512), (4, 320, (32, 32), 32), (16, 64, (7, 7), 8)])
def test_gpu_gradients_agree_with_float64(n, c, spatial, g):
    """bf16 on the device (wav2vec2's feature extractor, a UNet block, a small conv net): each
    gradient within twice aten's own error against float64, plus two bf16 roundings."""
    x, dy, w, b = (t.cuda() for t in _problem(n, c, spatial, g, torch.bfloat16))
    hw = x[0, 0].numel()
    _, mean, rstd = aten.native_group_norm(x, w, b, n, c, hw, g, 1e-5)
    ref64 = aten.native_group_norm_backward(dy.double(), x.double(), mean.double(), rstd.double(), w.double(),
                                            n, c, hw, g, [True] * 3)
    theirs = aten.native_group_norm_backward(dy, x, mean, rstd, w, n, c, hw, g, [True] * 3)
    with T.enable(include=["native_group_norm_backward"], wait_native=True):
        ours = aten.native_group_norm_backward(dy, x, mean, rstd, w, n, c, hw, g, [True] * 3)
    for o, t, r in zip(ours, theirs, ref64):
        assert _err(o, r) <= 2 * _err(t, r) + 3.2e-2
