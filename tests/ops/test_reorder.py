"""flip and roll (reorder.py) under enable(): every merge of dims, negative and oversized
shifts, dtypes, one launch on the C++ path, the calls aten keeps, and the gradients through
aten's formulas (Swin's shifted windows, cumsum's backward)."""
import pytest
import torch
import tritonjit_ops as T
from _util import routed
from tritonjit_ops import reorder

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]

FLIPS = [((5,), [0]), ((3, 4), [0]), ((3, 4), [1]), ((3, 4), [0, 1]), ((2, 3, 4, 5), [1, 3]), ((2, 1, 4), [1]),
         ((2, 3, 4, 5), [0, 1]), ((4, 5), [-1]), ((0, 3), [1]), ((), []), ((3, 4), [])]
ROLLS = [((5,), 2, ()), ((5,), -7, ()), ((3, 4), 5, ()), ((3, 4), 1, 0), ((3, 4), (1, -1), (0, 1)),
         ((2, 7, 7, 3), (-3, -3), (1, 2)), ((2, 7, 7, 3), (3, 3), (1, 2)), ((4, 5), 0, 1), ((4, 5), 10, 1),
         ((0, 3), 1, 1), ((2, 3, 4), 2, -1), ((2, 3, 4, 5), (1, 2), (0, 2))]


def _values(shape, dtype):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 5).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dims", FLIPS)
def test_flip_matches_aten(shape, dims, dtype):
    x = _values(shape, dtype)
    with T.enable():
        got = torch.flip(x, dims)
    want = torch.flip(x, dims)
    assert torch.equal(got, want) and got.stride() == want.stride()


@pytest.mark.parametrize("dtype", DTYPES[:2] + [torch.int32])
@pytest.mark.parametrize("shape,shifts,dims", ROLLS)
def test_roll_matches_aten(shape, shifts, dims, dtype):
    x = _values(shape, dtype)
    with T.enable():
        got = torch.roll(x, shifts, dims)
    want = torch.roll(x, shifts, dims)
    assert torch.equal(got, want) and got.stride() == want.stride()


def test_merged_dims_and_what_aten_keeps():
    """Dims remapped alike merge into at most four (a rolled dim takes the unshifted dims inside
    it); five groups, a strided input and a complex one are aten's."""
    assert reorder._merged((2, 3, 4, 5), [(0, 0), (1, 0), (1, 0), (0, 0)]) == [
        (1, 1, 0), (2, 1, 0), (12, -1, 11), (5, 1, 0)]
    assert reorder._merged((2, 7, 7, 3), [(0, 0), (2, 4), (2, 4), (0, 0)]) == [
        (1, 1, 0), (2, 1, 0), (7, 1, -4), (21, 1, -12)]
    assert reorder.plan_flip(torch.ones(2, 3, 4, 5, 6), [0, 2, 4]) is None
    assert reorder.plan_flip(torch.ones(3, 6)[:, :4], [0]) is None  # gaps: aten's
    assert reorder.plan_roll(torch.ones(3, 4).t(), 1, 0) is None  # roll: contiguous inputs only
    assert reorder.plan_flip(torch.ones(3, 4, dtype=torch.complex64), [0]) is None
    assert reorder.plan_flip(torch.ones(3, 4), [0, 0]) is None  # aten's error, aten raises it
    assert reorder.plan_roll(torch.ones(3, 4), [1, 2], [0]) is None
    with T.enable():
        torch.testing.assert_close(torch.flip(torch.arange(12.).reshape(3, 4).t(), [0]),
                                   torch.arange(12.).reshape(3, 4).t().flip(0))
        with pytest.raises(RuntimeError, match="dims"):
            torch.flip(torch.ones(3, 4), [0, 0])


@pytest.mark.parametrize("perm", [(1, 0, 2), (0, 2, 1), (2, 0, 1), (2, 1, 0)])
@pytest.mark.parametrize("dims", [[0], [1], [2], [0, 2], [0, 1, 2]])
def test_flip_of_a_permuted_view_keeps_its_strides(perm, dims):
    """A dense permuted view (Mamba-2's gradient flips one) is flipped in its memory order into
    an output with its strides, as aten's flip allocates it."""
    x = torch.arange(2 * 3 * 4.).reshape(2, 3, 4).permute(perm)
    assert reorder.plan_flip(x, dims) is not None
    with T.enable():
        got = torch.flip(x, dims)
    want = torch.flip(x, dims)
    assert torch.equal(got, want) and got.stride() == want.stride() == x.stride()
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert reorder.plan_flip(cl, dims) is not None
    with T.enable():
        got = torch.flip(cl, dims)
    assert torch.equal(got, torch.flip(cl, dims)) and got.stride() == cl.stride()


def test_one_launch_on_the_cpp_path():
    x = torch.randn(2, 7, 7, 3)
    (f, r), delta = routed(lambda: (torch.flip(x, [1]), torch.roll(x, (-3, -3), (1, 2))), ["flip", "roll"])
    assert delta["launches"] == 2 and delta["aten_calls"] == 0 and delta["python_calls"] == 0, delta
    assert torch.equal(f, x.flip(1)) and torch.equal(r, x.roll((-3, -3), (1, 2)))


def test_gradients_through_atens_formulas():
    """roll's gradient is a roll back, cumsum's a flip, cumsum and flip: both routed."""
    x = torch.randn(2, 6, 6, 4, requires_grad=True)
    c = torch.randn(3, 9, requires_grad=True)

    def step():
        return torch.autograd.grad(torch.roll(x, (2, -2), (1, 2)).pow(2).sum() + c.cumsum(1).pow(2).sum(), (x, c))

    with T.enable(include=["flip", "roll", "cumsum"], wait_native=True):
        got = step()
    for g, w in zip(got, step()):
        torch.testing.assert_close(g, w)


def test_flip_keeps_a_size_1_dims_stride():
    """torch.empty_like(x) keeps a contiguous x's size-1 dims' strides, whatever they are, and
    so does the flip's output (its plan had made them torch.empty's)."""
    x = torch.as_strided(torch.arange(8.0), (1, 8), (3, 1))
    (got,), delta = routed(lambda: (torch.flip(x, [1]),), ["flip"])
    assert got.stride() == torch.flip(x, [1]).stride() == (3, 1) and torch.equal(got, x.flip(1))
    assert delta["python_calls"] == 0, delta
