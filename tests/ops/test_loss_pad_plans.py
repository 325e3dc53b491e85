"""nll_loss_forward / nll_loss_backward / constant_pad_nd / slice_backward / select_backward
under enable(): against eager, on the
C++ operator path (a second call is a plan hit with no Python call), and sm_90 cross-compiles.

On CPU the nll planners refuse (the Python path checks the targets' range on the host, as
documented in loss.py), so the plan-hit tests make ``host_check_allowed`` answer as on a device."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from _util import index_checks_as_on_a_device, native_ops_or_skip, needs_cxx, routed, stats_delta
from tritonjit_ops import copy, loss, loss_backward

pytestmark = needs_cxx
NLL = ["nll_loss_forward", "nll_loss_backward"]
RED = {"none": 0, "mean": 1, "sum": 2}


@pytest.fixture(scope="module")
def native():
    return native_ops_or_skip()


@pytest.fixture
def device_like(monkeypatch):
    yield from index_checks_as_on_a_device(monkeypatch)


def _tol(dt):
    return dict(rtol=2e-2, atol=2e-2) if dt == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)


def _nll_inputs(dt, shape, weighted):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g).log_softmax(-1).to(dt)
    c = shape[-1]
    t = torch.tensor([1, -100, c - 1, 0, 3, -100]) if len(shape) == 2 else torch.tensor(c - 2)
    w = torch.rand(c, generator=g).to(dt) if weighted else None
    return x, t, w


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("red", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(6, 9), (9,)])
@pytest.mark.parametrize("path", ["plan", "python"])
def test_nll_forward_backward(native, request, dt, red, weighted, shape, path):
    if path == "plan":
        request.getfixturevalue("device_like")
    x, t, w = _nll_inputs(dt, shape, weighted)
    ref = torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
    xr = x.clone().requires_grad_()
    lr = F.nll_loss(xr, t, w, reduction=red)
    gout = torch.randn(lr.shape, generator=torch.Generator().manual_seed(1)).to(dt)
    lr.backward(gout)
    xg = x.clone().requires_grad_()
    with T.enable(include=NLL, wait_native=True):
        got = torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
        lg = F.nll_loss(xg, t, w, reduction=red)
        lg.backward(gout)
        s0 = native.stats()
        torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
        torch.ops.aten.nll_loss_backward(gout, x, t, w, RED[red], -100, ref[1])
        d = stats_delta(s0, native.stats())
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, equal_nan=True, **_tol(dt))
    torch.testing.assert_close(lg, lr, equal_nan=True, **_tol(dt))
    torch.testing.assert_close(xg.grad, xr.grad, equal_nan=True, **_tol(dt))
    if path == "plan":
        assert d["python_calls"] == 0 and d["plan_hits"] == 2 and d["launches"] == 2
    else:  # the Python implementations themselves (a cached plan may serve the routed calls)
        for a, b in zip(loss.nll_loss_forward(x, t, w, RED[red], -100), ref):
            assert a.dtype == b.dtype and a.shape == b.shape
            torch.testing.assert_close(a, b, equal_nan=True, **_tol(dt))
        gi = loss_backward.nll_loss_backward(gout, x, t, w, RED[red], -100, ref[1])
        torch.testing.assert_close(gi, torch.ops.aten.nll_loss_backward(gout, x, t, w, RED[red], -100, ref[1]),
                                   equal_nan=True, **_tol(dt))


@pytest.mark.parametrize("n", [129, loss.SPLIT_ROWS, loss.SPLIT_ROWS + 1, 3 * loss.SPLIT_ROWS + 5])
@pytest.mark.parametrize("red", ["mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_reduction_of_many_rows(native, device_like, n, red, weighted):
    """Up to SPLIT_ROWS rows one program reads them all; more split over programs whose partial
    sums a second launch adds: both agree with aten, ignored targets and weights included."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 7, generator=g).log_softmax(-1)
    t = torch.randint(0, 7, (n,), generator=g)
    t[torch.rand(n, generator=g) < 0.3] = -100
    w = torch.rand(7, generator=g) if weighted else None
    ref = torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
    with T.enable(include=NLL, wait_native=True):
        torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
        s0 = native.stats()
        got = torch.ops.aten.nll_loss_forward(x, t, w, RED[red], -100)
        d = stats_delta(s0, native.stats())
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], ref[1], rtol=1e-6, atol=0)
    assert d["python_calls"] == 0 and d["launches"] == (2 if n > loss.SPLIT_ROWS else 1)
    py = loss.nll_loss_forward(x, t, w, RED[red], -100)  # the Python executor of the same plan
    torch.testing.assert_close(py[0], ref[0], rtol=1e-5, atol=1e-5)


def test_nll_strided_self_and_cross_entropy(native, device_like):
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(16, 40, generator=g).bfloat16()
    x = logits.t().contiguous().t()  # strided (column-major) self
    t = torch.randint(0, 40, (16,), generator=g)
    t[3] = -100
    ref = torch.ops.aten.nll_loss_forward(x.log_softmax(-1), t, None, 1, -100)
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    F.cross_entropy(a, t).backward()
    with T.enable(include=[*NLL, "_log_softmax", "_log_softmax_backward_data"], wait_native=True):
        got = torch.ops.aten.nll_loss_forward(x.log_softmax(-1), t, None, 1, -100)
        s0 = native.stats()
        got2 = torch.ops.aten.nll_loss_forward(x.log_softmax(-1).t().contiguous().t(), t, None, 1, -100)
        d = stats_delta(s0, native.stats())
        F.cross_entropy(b, t).backward()
    for r in (got, got2):
        torch.testing.assert_close(r[0], ref[0], **_tol(torch.bfloat16))
        assert torch.equal(r[1], ref[1])
    assert d["python_calls"] == 0
    torch.testing.assert_close(b.grad, a.grad, **_tol(torch.bfloat16))


def test_nll_bad_target_raises_aten_error_on_cpu(native):
    x = torch.randn(3, 5).log_softmax(-1)
    with T.enable(include=NLL, wait_native=True):
        with pytest.raises(IndexError, match="out of bounds"):
            torch.ops.aten.nll_loss_forward(x, torch.tensor([0, 7, 1]), None, 1, -100)
        with pytest.raises(IndexError, match="out of bounds"):
            torch.ops.aten.nll_loss_backward(torch.tensor(1.0), x, torch.tensor([0, 7, 1]), None, 1, -100,
                                             torch.tensor(3.0))


_BASE = torch.randn(3, 4, 5, 6, generator=torch.Generator().manual_seed(3))
PAD_CASES = {
    "last dim": (lambda: torch.randn(4, 5), (1, 2), 0.0),
    "crop and grow": (lambda: torch.randn(4, 5), (-1, 2, 0, 3), 1.5),
    "zero pads": (lambda: torch.randn(4, 5), (0, 0), 0.0),
    "4d mixed": (lambda: _BASE, (1, -2, 0, 1, 2, 0, 1, 1), -3.0),
    "transposed": (lambda: _BASE.transpose(1, 3), (2, 1), 2.0),
    "sliced crop": (lambda: _BASE[:, ::2], (0, -1, 0, -1), 0.0),
    "5d merged": (lambda: torch.randn(2, 3, 4, 5, 6), (1, 1, 0, 0, 0, 0, 1, 0), 7.0),
    "int64 label shift": (lambda: torch.randint(0, 100, (2, 7)), (0, 1), -100),
    "int64 labels, float pad": (lambda: torch.randint(0, 100, (4, 256)), (0, 1), -100.0),  # transformers' shift
    "int8 in range": (lambda: torch.randint(-5, 5, (3, 4), dtype=torch.int8), (1, 0), 60),
    "bf16": (lambda: torch.randn(3, 4).bfloat16(), (2, 0, 1, 1), 0.5),
    "bool": (lambda: torch.tensor([True, False]), (1, 1), True),
    "empty input": (lambda: torch.randn(0, 3), (1, 1, 1, 1), 4.0),
}


@pytest.mark.parametrize("case", sorted(PAD_CASES))
def test_constant_pad_nd(native, case):
    make, pad, value = PAD_CASES[case]
    x = make()
    ref = torch.constant_pad_nd(x, pad, value)
    assert torch.equal(copy.constant_pad_nd(x, list(pad), value), ref)  # the Python implementation
    value2 = value * 2 if not isinstance(value, bool) else value
    with T.enable(include=["constant_pad_nd"], wait_native=True):
        got = torch.constant_pad_nd(x, pad, value)
        s0 = native.stats()
        again = torch.constant_pad_nd(x, pad, value2)  # keyed by value: its own plan
        twice = torch.constant_pad_nd(x, pad, value2)
        d = stats_delta(s0, native.stats())
    ref2 = torch.constant_pad_nd(x, pad, value2)
    assert got.dtype == ref.dtype and got.shape == ref.shape and got.stride() == ref.stride()
    assert torch.equal(got, ref) and torch.equal(again, ref2) and torch.equal(twice, ref2)
    assert d["python_calls"] == 0 and d["plan_hits"] == 2


@pytest.mark.parametrize("x, pad, value", [
    (torch.randint(0, 5, (3, 4), dtype=torch.int8), (1, 1), 300),  # aten: the value overflows int8
    (torch.randint(0, 5, (3, 4), dtype=torch.int8), (1, 1), 300.0),
    (torch.randn(3, 4), (-3, -2), 0.0),  # aten: a negative size
])
def test_constant_pad_nd_errors_are_atens(native, x, pad, value):
    with pytest.raises(RuntimeError) as eager:
        torch.constant_pad_nd(x, pad, value)
    with T.enable(include=["constant_pad_nd"], wait_native=True):
        with pytest.raises(RuntimeError) as routed:
            torch.constant_pad_nd(x, pad, value)
    assert str(routed.value) == str(eager.value)


# (grad, input_sizes, dim, start, end): the gradients of slices models take
SLICE_CASES = {
    "rotate_half's first half": (lambda: torch.randn(2, 4, 8, 3), [2, 4, 8, 6], 3, 0, 3),
    "rotate_half's second half, bf16": (lambda: torch.randn(2, 4, 8, 3).bfloat16(), [2, 4, 8, 6], 3, 3, 2**63 - 1),
    "Falcon's query heads, transposed grad": (lambda: torch.randn(2, 16, 5, 4).transpose(1, 2), [2, 5, 18, 4], 2, 0, -2),
    "a strided (sliced) grad": (lambda: torch.randn(4, 10, 3)[:, ::2], [4, 9, 3], 1, -5, 9),
    "leading dim, 5-d": (lambda: torch.randn(2, 3, 2, 2, 3), [6, 3, 2, 2, 3], 0, 1, 3),
    "int64": (lambda: torch.randint(0, 9, (3, 2)), [3, 5], 1, 1, 3),
    "an empty slice": (lambda: torch.randn(3, 0), [3, 4], 1, 2, 2),
    # narrow rows, many of them: a program writes 128 rows of 8 (then 8 rows of 3 columns at the end)
    "a scan step's state, 8 columns": (lambda: torch.randn(3, 5, 1, 8), [3, 5, 70, 8], 2, 41, 42),
    "3 columns, rows not a multiple of a program's": (lambda: torch.randn(7, 1, 3), [7, 45, 3], 1, 44, 45),
}


@pytest.mark.parametrize("case", sorted(SLICE_CASES))
def test_slice_backward_is_one_plan(native, case):
    """slice_backward (zeros, then a copy into the slice, in aten) is one launch over the output:
    eager's values, dtype and (contiguous) strides, the second call a plan hit; the gradient of a
    slice under enable() is eager's."""
    make, sizes, dim, start, end = SLICE_CASES[case]
    g = make()
    ref = torch.ops.aten.slice_backward(g, sizes, dim, start, end, 1)
    assert torch.equal(copy.slice_backward(g, sizes, dim, start, end, 1), ref)  # the Python implementation
    with T.enable(include=["slice_backward"], wait_native=True):
        torch.ops.aten.slice_backward(g, sizes, dim, start, end, 1)
        s0 = native.stats()
        got = torch.ops.aten.slice_backward(g, sizes, dim, start, end, 1)
        d = stats_delta(s0, native.stats())
    assert torch.equal(got, ref) and got.stride() == ref.stride() and got.dtype == ref.dtype
    assert d["python_calls"] == 0 and d["aten_calls"] == 0 and d["plan_hits"] == 1, d


# (grad, input_sizes, dim, start, end, step): stepped slices' gradients, as models make them
STEP_CASES = {
    # GLM / GPT-J / CodeGen / Cohere's interleaved rotary halves, x[..., ::2] and x[..., 1::2],
    # the gradient arriving transposed from the attention's (B, S, H, D) layout
    "every other column, transposed grad": (lambda: torch.randn(2, 5, 4, 3).transpose(1, 2), [2, 4, 5, 6], 3, 1,
                                            2**63 - 1, 2),
    "every other column, bf16": (lambda: torch.randn(2, 4, 8, 4).bfloat16(), [2, 4, 8, 8], 3, 0, 2**63 - 1, 2),
    # Swin's patch merging, x[:, 0::2, 1::2, :]: a stepped dim in the middle
    "every other row": (lambda: torch.randn(2, 4, 8, 6), [2, 8, 8, 6], 1, 1, 2**63 - 1, 2),
    "step 3, a bounded end, negative start": (lambda: torch.randn(3, 4, 2), [3, 12, 2], 1, -11, 11, 3),
    "step past the end": (lambda: torch.randn(5, 1), [5, 3], 1, 1, 2**63 - 1, 7),
    "an empty stepped slice": (lambda: torch.randn(3, 0), [3, 4], 1, 4, 9, 2),
    # a permuted gradient of more dims than the kernel's four: made contiguous, then one launch
    "5-d permuted grad": (lambda: torch.randn(2, 2, 5, 4, 3).permute(0, 1, 2, 4, 3), [2, 3, 5, 3, 4], 1, 0, -1, 1),
}


@pytest.mark.parametrize("case", sorted(STEP_CASES))
def test_stepped_slice_backward_is_one_plan(native, case):
    """slice_backward of any step is a plan (before, each call ran the Python implementation to be
    refused there, then aten's kernel): eager's values and strides, no Python call."""
    make, sizes, dim, start, end, step = STEP_CASES[case]
    g = make()
    ref = torch.ops.aten.slice_backward(g, sizes, dim, start, end, step)
    assert torch.equal(copy.slice_backward(g, sizes, dim, start, end, step), ref)  # the Python implementation
    with T.enable(include=["slice_backward"], wait_native=True):
        torch.ops.aten.slice_backward(g, sizes, dim, start, end, step)
        s0 = native.stats()
        got = torch.ops.aten.slice_backward(g, sizes, dim, start, end, step)
        d = stats_delta(s0, native.stats())
    assert torch.equal(got, ref) and got.stride() == ref.stride() and got.dtype == ref.dtype
    assert d["python_calls"] == 0 and d["aten_calls"] == 0 and d["plan_hits"] == 1, d


def test_unplanned_slice_backward_is_atens_without_python(native):
    """A gradient aten broadcasts into the slice, and one of another shape (aten's error): aten's
    kernel, decided by the plan once per call key, with aten's result or error."""
    g = torch.randn(3, 1)
    ref = torch.ops.aten.slice_backward(g, [3, 8], 1, 0, 8, 2)  # broadcast over the 4 positions
    bad = torch.randn(3, 5)
    with pytest.raises(RuntimeError) as eager:
        torch.ops.aten.slice_backward(bad, [3, 8], 1, 0, 8, 2)
    with T.enable(include=["slice_backward"], wait_native=True):
        torch.ops.aten.slice_backward(g, [3, 8], 1, 0, 8, 2)
        s0 = native.stats()
        got = torch.ops.aten.slice_backward(g, [3, 8], 1, 0, 8, 2)
        d = stats_delta(s0, native.stats())
        with pytest.raises(RuntimeError) as routed:
            torch.ops.aten.slice_backward(bad, [3, 8], 1, 0, 8, 2)
    assert torch.equal(got, ref) and str(routed.value) == str(eager.value)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1 and d["plan_hits"] == 1, d


def test_select_backward_of_a_permuted_5d_grad(native):
    """BLOOM's fused QKV, ``qkv.view(b, s, h, 3, d)[..., 0, :]``: select_backward into 5 dims of a
    gradient that arrives permuted; one plan (the gradient made contiguous first)."""
    g = torch.randn(2, 4, 8, 8).transpose(1, 2)  # (b, s, h, d) from a (b, h, s, d) gradient
    sizes = [2, 8, 4, 3, 8]
    for index in (0, 2):
        ref = torch.ops.aten.select_backward(g, sizes, 3, index)
        with T.enable(include=["select_backward"], wait_native=True):
            torch.ops.aten.select_backward(g, sizes, 3, index)
            s0 = native.stats()
            got = torch.ops.aten.select_backward(g, sizes, 3, index)
            d = stats_delta(s0, native.stats())
        assert torch.equal(got, ref) and got.stride() == ref.stride()
        assert d["python_calls"] == 0 and d["aten_calls"] == 0 and d["plan_hits"] == 1, d


def test_slice_and_select_backward_through_autograd(native):
    """x[..., :h] / x[..., h:] (rotate_half), x[..., ::2] / x[..., 1::2] (interleaved rotary) and
    x[:, 0] (a first-token pool) under enable(): their backwards run the plans; gradients are
    eager's."""
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    gy = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(2))
    g0 = torch.randn(2, 8, generator=torch.Generator().manual_seed(3))

    def grads():
        xr = x.clone().requires_grad_()
        y = torch.cat((-xr[..., 4:], xr[..., :4]), -1)[..., :4] * gy
        z = torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2)[..., :4] * gy
        return torch.autograd.grad(y.sum() + z.sum() + (xr[:, 0] * g0).sum(), xr)[0]

    want = grads()
    with T.enable(include=["slice_backward", "select_backward"], wait_native=True):
        grads()
        s0 = native.stats()
        got = grads()
        d = stats_delta(s0, native.stats())
        assert torch.equal(torch.ops.aten.slice_backward(gy[..., :2], [2, 3, 4], 2, 0, 4, 2),
                           torch.zeros(2, 3, 4).index_copy_(2, torch.tensor([0, 2]), gy[..., :2]))
    assert torch.equal(got, want)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 5, d
    ref = torch.ops.aten.select_backward(g0, [2, 3, 8], 1, -3)
    assert torch.equal(copy.select_backward(g0, [2, 3, 8], 1, -3), ref)


@pytest.mark.parametrize("x, pad, value", [
    (torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), (1, 1), 0.0),
    # Mamba2's chunked scan: a zero pad of a transposed tensor (aten: a clone keeping its strides)
    (torch.randn(2, 8, 8, 8).transpose(1, 3), (0, 0, 0, 0), 0.0),
    # RecurrentGemma's convolution state: a crop of a transposed tensor
    (torch.randn(2, 8, 32).transpose(1, 2), (-5, 0), 0.0),
    (torch.randn(3, 4, dtype=torch.float64), (1, 1), 0.1),  # a value fp32 would round
], ids=["channels_last", "zero pad, transposed", "crop, transposed", "float64 value"])
def test_layouts_aten_keeps_go_to_aten_without_python(native, x, pad, value):
    """Calls whose output layout aten keeps (or whose value the kernel's fp32 argument would
    round): aten's kernel, decided once per call key, with no Python call per call."""
    ref = torch.constant_pad_nd(x, pad, value)
    with T.enable(include=["constant_pad_nd"], wait_native=True):
        torch.constant_pad_nd(x, pad, value)
        s0 = native.stats()
        got = torch.constant_pad_nd(x, pad, value)
        d = stats_delta(s0, native.stats())
    assert torch.equal(got, ref) and got.stride() == ref.stride()
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


def test_sm90_cross_compiles():
    loss._nll.compile("*bf16:16,*i64:16,*bf16:16,*bf16:16,*bf16:16,i32,i32,i32,i32,i32,False,True,True,True,1024",
                      target="cuda:90")
    loss._nll.compile("*fp32:16,*i64:16,*fp32:16,*fp32:16,*fp32:16,i32,i32,i32,i32,i32,True,False,False,True,1024",
                      target="cuda:90")
    loss._nll.compile("*fp32:16,*i64:16,*fp32:16,*fp32:16,*fp32:16,i32,i32,i32,i32,i32,False,True,True,True,4096",
                      target="cuda:90", num_warps=16)
    loss._nll_partial.compile("*bf16:16,*i64:16,*bf16:16,*fp32:16,i32,i32,i32,i32,i32,True,True,1024",
                              target="cuda:90", num_warps=8)
    loss._nll_finish.compile("*fp32:16,*bf16:16,*bf16:16,i32,True,32", target="cuda:90")
    loss_backward._nll_backward.compile("*bf16:16,*i64:16,*bf16:16,*bf16:16,*bf16:16,i32,i32,i32,False,True,True,"
                                        "4096", target="cuda:90")
    copy._pad_k.compile("*bf16:16,*bf16:16," + "i32," * 16 + "fp32,i32,True,1,1024,1,1,1,1", target="cuda:90")
    copy._pad_k.compile("*fp32:16,*fp32:16," + "i32," * 16 + "fp32,i32,False,128,8,1,1,1,1", target="cuda:90")
    # a stepped slice's gradient: every other column (interleaved rotary), every other row
    copy._pad_k.compile("*bf16:16,*bf16:16," + "i32," * 16 + "fp32,i32,True,8,128,1,1,1,2", target="cuda:90")
    copy._pad_k.compile("*fp32:16,*fp32:16," + "i32," * 16 + "fp32,i32,False,1,1024,1,2,1,1", target="cuda:90")


def test_a_one_dim_mean_on_a_device_goes_to_aten():
    """aten's CPU and CUDA kernels disagree for a (C,) input averaged with its target ignored
    (NaN against 0): tritonjit computes the CPU result, so off the CPU that call is aten's."""
    from tritonjit_ops import loss

    x, t = torch.empty(5, device="meta"), torch.empty((), dtype=torch.int64, device="meta")
    assert isinstance(loss._shapes(x, t, None, 1), str)
    assert loss._shapes(x, t, None, 2) == (1, 5)
    assert loss._shapes(torch.empty(5), torch.tensor(1), None, 1) == (1, 5)


@pytest.mark.parametrize("shape,pad", [((1, 5), [-1, -1]), ((3, 1, 5), [-1, -1]), ((1, 4, 5), [-1, 0, -1, -1])])
def test_a_crop_only_pad_keeps_the_crops_strides(shape, pad):
    """A crop-only pad is aten's clone of the cropped view (preserve_format): where that view
    is contiguous its strides are kept, a size-1 dim's included (the plan had given torch.empty's)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    want = torch.nn.functional.pad(x, pad)
    (got,), delta = routed(lambda: (torch.nn.functional.pad(x, pad),), ["constant_pad_nd"])
    assert got.stride() == want.stride() and torch.equal(got, want)
    assert delta["python_calls"] == 0, delta
