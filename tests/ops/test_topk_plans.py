"""topk of short rows with a small k (an MoE router's (tokens, experts) scores) on the C++
operator path: one launch that takes the k best of each row in turn, against torch.topk."""

from __future__ import annotations

import re

import pytest
import torch
import tritonjit_ops as T
from _util import native_ops_enabled, needs_cxx, routed, stats_delta
from tritonjit_ops import rowwise

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    yield from native_ops_enabled()


def _g():
    return torch.Generator().manual_seed(0)


def _same(got, want, x):
    """Values equal to torch's (NaN where torch has NaN); indices that pick those values (ties may
    be ordered either way by torch)."""
    (v, i), (rv, _) = got, want
    assert v.shape == rv.shape and v.dtype == rv.dtype and i.dtype == torch.int64
    assert v.is_contiguous() and i.is_contiguous()
    assert torch.equal(v.float().nan_to_num(7e4), rv.float().nan_to_num(7e4))
    assert torch.equal(torch.gather(x, -1, i).float().nan_to_num(7e4), v.float().nan_to_num(7e4))


def _special():
    x = torch.randn(6, 8, generator=_g())
    x[0, 3] = float("nan")
    x[1] = 0.0
    x[1, 2] = -0.0
    x[2, 1], x[2, 5] = float("inf"), float("nan")
    x[3, :4] = float("-inf")
    return x


CASES = {  # name -> (x, k, largest)
    "router f32 [64, 8], k=2": lambda: (torch.randn(64, 8, generator=_g()).softmax(-1), 2, True),
    "router bf16 [3, 5, 60], k=8": lambda: (torch.randn(3, 5, 60, generator=_g()).to(torch.bfloat16), 8, True),
    "smallest, fp16": lambda: (torch.randn(33, 17, generator=_g()).half(), 4, False),
    "k = n": lambda: (torch.randn(9, 8, generator=_g()), 8, True),
    "k = 0": lambda: (torch.randn(9, 8, generator=_g()), 0, True),
    "NaN, inf, -0.0 and ties": lambda: (_special(), 5, True),
    "NaN, smallest": lambda: (_special(), 5, False),
    "int32 with ties": lambda: (torch.randint(-3, 3, (20, 11), generator=_g(), dtype=torch.int32), 6, True),
    "row-strided view": lambda: (torch.randn(4, 12, 10, generator=_g())[:, ::3, :], 3, True),
    "transposed (column stride)": lambda: (torch.randn(10, 7, generator=_g()).t(), 2, True),
    "leading dims that do not nest": lambda: (torch.randn(2, 3, 5, generator=_g()).transpose(0, 1), 2, True),
    "a row of 1000": lambda: (torch.randn(5, 1000, generator=_g()), 16, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_topk_matches_torch_and_is_planned(native, case):
    x, k, largest = CASES[case]()
    T.disable()
    want = torch.topk(x, k, -1, largest)
    T.enable(wait_native=True)
    got = torch.topk(x, k, -1, largest)
    before = native.stats()
    again = torch.topk(x, k, -1, largest)
    d = stats_delta(before, native.stats())
    _same(got, want, x)
    _same(again, want, x)
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] >= 1, d  # (a copy first: 2)


@pytest.mark.parametrize("x, k, dim, aten", [
    (torch.randn(4, 2000), 3, -1, False),  # a row past the kernel's bound
    (torch.randn(4, 30), 20, -1, False),  # k past it
    (torch.randn(6, 4), 2, 0, False),  # another dim
    (torch.randn(4, 8, dtype=torch.float64), 2, -1, True),  # 64-bit keys
    (torch.randn(3, 8000), 50, -1, True),  # top-k sampling over a vocabulary: rows past MAX_SORT
    (torch.randn(0, 8), 2, -1, True),  # empty
])
def test_other_topk_calls_sort_whole_rows_or_go_to_aten(native, x, k, dim, aten):
    """Calls the kernel does not take: what the implementation would hand to aten anyway is
    aten's plan, decided by the key, so the C++ path skips the Python refusal (a sampling
    step's topk over the vocabulary); on a device (meta stands in) the rest too, whose whole-row
    sort after the Python host time costs more than aten's kernel; the interpreter sorts them."""
    p = rowwise._plan_topk(x, k, dim)
    assert (p is not None and p.aten) if aten else p is None
    m = torch.empty(x.shape, dtype=x.dtype, device="meta")
    assert rowwise._plan_topk(m, k, dim).aten
    T.disable()
    want = torch.topk(x, k, dim)
    T.enable(wait_native=True)
    before = native.stats()
    got = torch.topk(x, k, dim)
    d = stats_delta(before, native.stats())
    assert torch.equal(got[0], want[0]) and torch.equal(torch.gather(x, dim, got[1]), want[0])
    assert d["python_calls"] == (0 if aten else 1) and d["aten_calls"] == (1 if aten else 0), d


def test_topk_errors_are_atens(native):
    """A k or dim out of range: aten's plan, so aten raises its own error."""
    x = torch.randn(3, 8)
    for k, dim in ((9, -1), (-1, -1), (2, 2)):
        T.disable()
        with pytest.raises((RuntimeError, IndexError)) as eager:
            torch.topk(x, k, dim)
        T.enable(wait_native=True)
        for _ in range(2):
            with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
                torch.topk(x, k, dim)


def test_topk_of_bool_is_atens_error(native):
    with pytest.raises(RuntimeError, match="bool"):
        torch.topk(torch.ones(3, 4, dtype=torch.bool), 2)


def test_topk_gradient_matches_eager(native):
    x0 = torch.randn(16, 8, generator=_g())
    T.disable()
    x = x0.clone().requires_grad_()
    (torch.topk(x, 2).values * torch.arange(2.0)).sum().backward()
    want = x.grad
    T.enable(wait_native=True)
    x = x0.clone().requires_grad_()
    (torch.topk(x, 2).values * torch.arange(2.0)).sum().backward()
    assert torch.equal(x.grad, want)


@pytest.mark.gpu
def test_gpu_router_topk():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    for dt, n, k in ((torch.float32, 8, 2), (torch.bfloat16, 128, 8), (torch.float32, 64, 6)):
        x = torch.randn(8192, n, device="cuda", generator=g).softmax(-1).to(dt)
        want = torch.topk(x, k)
        got, d = routed(lambda x=x, k=k: torch.topk(x, k), ["topk"])
        _same(got, want, x)
        assert d["python_calls"] == 0 and d["plan_hits"] >= 1
    # top-k sampling over a vocabulary, and a middle dim: aten's kernel, no Python
    for x, k, dim in ((torch.randn(3, 32000, device="cuda"), 50, -1), (torch.randn(4, 64, 8, device="cuda"), 4, 1)):
        want = torch.topk(x, k, dim)
        got, d = routed(lambda x=x, k=k, dim=dim: torch.topk(x, k, dim), ["topk"])
        assert torch.equal(got[0], want[0]), (x.shape, k, dim)
        assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


@pytest.mark.parametrize("x", [
    torch.randint(0, 8, (64,), dtype=torch.int64),  # an MoE router's expert ids
    torch.randn(3, 20, dtype=torch.float64),
    torch.randn(2, 5000),  # rows past the kernel's bound
])
def test_sorts_the_kernel_does_not_take_go_straight_to_aten(native, x):
    """Decided by dtype and shape, so the C++ path hands them to aten's kernel without the
    Python implementation's refusal (which cost 2-3x aten's time)."""
    T.disable()
    want = torch.sort(x, stable=True)
    T.enable(wait_native=True)
    torch.sort(x, stable=True)
    before = native.stats()
    got = torch.sort(x, stable=True)
    d = stats_delta(before, native.stats())
    assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


def test_sorts_the_kernel_takes_stay_on_it(native):
    assert rowwise._plan_sort(torch.randn(4, 30), -1) is None
    x = torch.randn(4, 30)
    T.disable()
    want = torch.sort(x, descending=True)
    T.enable(wait_native=True)
    got = torch.sort(x, descending=True)
    assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)


@pytest.mark.gpu
def test_gpu_topk_takes_tied_values_as_atens_kernel_does():
    """Which of equal values top-k returns is unspecified, and a model's dynamic mask (Doge's,
    over scores that round to ties in bf16) depends on it: on a GPU, the indices chosen among
    ties are aten's CUDA kernel's (the lowest), sorted or not."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randint(0, 3, (512, 8), device="cuda", generator=g).to(torch.bfloat16)  # ties in every row
    for k, srt in ((2, True), (3, False), (4, False)):
        want = torch.topk(x, k, sorted=srt)
        got, d = routed(lambda k=k, srt=srt: torch.topk(x, k, sorted=srt), ["topk"])
        assert d["plan_hits"] >= 1
        assert torch.equal(got.indices.sort(-1).values, want.indices.sort(-1).values), (k, srt)


@pytest.mark.parametrize("dim", [0, 1])
def test_topk_and_sort_along_a_size_1_dim_give_atens_strides(dim):
    """The implementation's results (sorted rows, permuted back) are contiguous with torch.empty's
    strides, as aten's: ``.contiguous()`` had kept the permuted view's stride on a size-1 dim."""
    x = torch.randn(1, 2, 5, generator=torch.Generator().manual_seed(0))
    T.disable()
    want_v, want_i = torch.topk(x, 1, dim)
    want_s = torch.sort(x, dim)[0]
    with T.enable(include=["topk", "sort"]):
        got_v, got_i = torch.topk(x, 1, dim)
        got_s = torch.sort(x, dim)[0]
    assert got_v.stride() == want_v.stride() and got_i.stride() == want_i.stride() and got_s.stride() == want_s.stride()
    assert torch.equal(got_v, want_v) and torch.equal(got_i, want_i) and torch.equal(got_s, want_s)
