"""``x[idx]`` and ``x[i, j]`` (aten::index.Tensor with integer index tensors at adjacent dims,
broadcast together) on the C++ operator path: its
``Tensor?[]`` indices are a key the C++ path describes (None, or a tensor's words, per item),
and the plan reads ``x`` in its own strides where they nest. On a device the kernel checks the
index range itself; here (the interpreter) ``host_check_allowed`` answers as on a device, so
the plans are the device's, and Triton's interpreter honours their device asserts."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import tritonjit_ops as T
from _util import close, index_checks_as_on_a_device, native_ops_enabled, native_ops_or_skip, needs_cxx, routed, stats_delta
from tritonjit_ops import _common, scatter

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    yield from native_ops_enabled()


@pytest.fixture
def device_rules(monkeypatch):
    """Plans as on a device: no host check of the index values, the kernel's assert compiled in
    (honoured by the interpreter)."""
    yield from index_checks_as_on_a_device(monkeypatch, kernel_asserts=True)


def _g():
    return torch.Generator().manual_seed(0)


def _ids(n: int, size: int, shape=None, dtype=torch.int64):
    ids = torch.randint(-size, size, (n,), generator=_g()).to(dtype)
    return ids.reshape(shape) if shape is not None else ids


# name -> (x, indices): what a model's indexing hands aten::index.Tensor
CASES = {
    "MoE rows x[ids] (rows kernel)": lambda: (torch.randn(12, 96, generator=_g()), [_ids(20, 12)]),
    "1-D x[ids] (flat kernel)": lambda: (torch.randn(30, generator=_g()), [_ids(40, 30)]),
    "x[:, ids] middle dim": lambda: (torch.randn(3, 10, 5, generator=_g()), [None, _ids(7, 10)]),
    "x[..., ids] last dim": lambda: (torch.randn(4, 9, generator=_g()), [None, _ids(6, 9)]),
    "2-D index": lambda: (torch.randn(10, 70, generator=_g()), [_ids(6, 10, (2, 3))]),
    "0-dim index": lambda: (torch.randn(10, 4, generator=_g()), [torch.tensor(-3)]),
    "int32 index": lambda: (torch.randn(10, 4, generator=_g()), [_ids(5, 10, dtype=torch.int32)]),
    "transposed x (read in its strides)": lambda: (torch.randn(70, 10, generator=_g()).t(), [_ids(8, 10)]),
    "row-strided x (nests)": lambda: (torch.randn(20, 80, generator=_g())[::2], [_ids(8, 10)]),
    "column-strided x, middle index": lambda: (torch.randn(4, 6, 10, generator=_g())[:, :, ::2], [None, _ids(5, 6)]),
    "bf16 rows": lambda: (torch.randn(16, 128, generator=_g()).to(torch.bfloat16), [_ids(9, 16)]),
    "bool x": lambda: (torch.randn(10, 3, generator=_g()) > 0, [_ids(4, 10)]),
    "int64 x (MoE's token ids)": lambda: (torch.arange(50), [_ids(33, 50)]),
    "empty index": lambda: (torch.randn(10, 3, generator=_g()), [torch.zeros(0, dtype=torch.int64)]),
    # several index tensors at adjacent dims, broadcast together
    "mask[batch_idx, kv_idx] (a transformers padding mask)": lambda: (
        torch.randn(2, 8, generator=_g()) > 0, [torch.arange(2).view(2, 1, 1, 1), torch.arange(8).view(1, 1, 1, 8)]),
    "x[arange, last] rows kernel": lambda: (torch.randn(4, 6, 96, generator=_g()), [torch.arange(4), _ids(4, 6)]),
    "x[arange, last] flat kernel": lambda: (torch.randn(4, 6, 5, generator=_g()), [torch.arange(4), _ids(4, 6)]),
    "x[:, i, j] middle pair": lambda: (torch.randn(3, 10, 5, 4, generator=_g()), [None, _ids(6, 10), _ids(6, 5)]),
    "three broadcast indices": lambda: (torch.randn(5, 6, 7, 3, generator=_g()),
                                        [_ids(2, 5, (2, 1)), _ids(3, 6, (1, 3)), _ids(3, 7)]),
    "four indices, int32 and int64": lambda: (torch.randn(3, 4, 5, 6, generator=_g()),
                                              [_ids(5, 3), _ids(5, 4, dtype=torch.int32), _ids(5, 5), _ids(5, 6)]),
    "pair after a transposed pre (copied first)": lambda: (torch.randn(4, 5, 6, 7, generator=_g()).permute(1, 0, 2, 3),
                                                            [None, None, _ids(3, 6), _ids(3, 7)]),
    "expanded (stride 0) and transposed indices": lambda: (
        torch.randn(6, 7, 2, generator=_g()), [_ids(3, 6).expand(4, 3), _ids(12, 7, (3, 4)).t()]),
    "pair, bf16 rows": lambda: (torch.randn(3, 4, 128, generator=_g()).to(torch.bfloat16), [_ids(5, 3), _ids(5, 4)]),
    "pair, empty broadcast": lambda: (torch.randn(3, 4, generator=_g()), [_ids(0, 3), _ids(1, 4)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_index_matches_eager_and_is_planned(native, device_rules, case):
    x, indices = CASES[case]()
    T.disable()
    ref = x[tuple(slice(None) if i is None else i for i in indices)]
    T.enable(wait_native=True)
    got = torch.ops.aten.index.Tensor(x, indices)
    before = native.stats()
    again = torch.ops.aten.index.Tensor(x, indices)
    d = stats_delta(before, native.stats())
    close(got, ref)
    close(again, ref)
    assert got.is_contiguous()
    assert d["python_calls"] == 0, f"{case}: the call went to the Python implementation"
    assert d["plans_made"] == 0 and d["plan_hits"] == (2 if "copied first" in case else 1)  # + the copy's plan


def test_getitem_under_enable_is_planned(native, device_rules):
    x, ids = torch.randn(12, 96, generator=_g()), _ids(20, 12)
    want = x.clone()[ids]
    x[ids]
    before = native.stats()
    got = x[ids]
    assert stats_delta(before, native.stats())["plan_hits"] == 1
    close(got, want)


@pytest.mark.parametrize("indices", [
    lambda: [torch.tensor([True, False, True, False])],  # a mask: its result size needs a sync
    lambda: [torch.tensor([0, 1]), None, torch.tensor([1, 0])],  # a None between: aten moves B first
    lambda: [torch.tensor([0, 1]).view(2, 1, 1, 1, 1), torch.tensor([1, 0])],  # broadcast to rank 5
], ids=["mask", "none-between", "rank-5-broadcast"])
def test_other_index_forms_are_eagers(native, device_rules, indices):
    x = torch.randn(4, 4, 4, generator=_g())
    idx = indices()
    T.disable()
    ref = x[tuple(slice(None) if i is None else i for i in idx)]
    T.enable(include=["index.Tensor"], wait_native=True)
    try:
        close(torch.ops.aten.index.Tensor(x, idx), ref)
        before = native.stats()
        close(torch.ops.aten.index.Tensor(x, idx), ref)
        d = stats_delta(before, native.stats())
    finally:  # the module's selection again: a later test's nested enable() keeps the active one
        T.disable()
        T.enable(wait_native=True)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d  # the key's plan: aten's kernel


@pytest.mark.parametrize("bad", [10, -11, 2**40])
@pytest.mark.parametrize("width", [3, 96])  # the flat kernel and the rows kernel
@pytest.mark.parametrize("pair", [False, True], ids=["one index", "second of two"])
def test_out_of_range_index_is_asserted_by_the_kernel(native, device_rules, bad, width, pair):
    x = torch.randn(2, 10, width, generator=_g()) if pair else torch.randn(10, width, generator=_g())
    idx = [torch.tensor([0, bad, 1])]
    with pytest.raises(Exception, match="tritonjit index: index out of range"):
        torch.ops.aten.index.Tensor(x, [torch.tensor([1, 0, 1])] + idx if pair else idx)


@pytest.mark.parametrize("pair", [False, True], ids=["one index", "second of two"])
def test_out_of_range_index_on_the_host_path_is_atens_error(native, pair):
    x = torch.randn(2, 10, 3)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([0, 1]), torch.tensor([0, 10])] if pair else x[torch.tensor([0, 10])]


def test_several_indices_on_the_host_path_match_eager(monkeypatch):
    """The Python implementation (the CPU: index values checked on the host) serves the
    broadcast forms too, through the several-index kernel, with aten's values."""
    x = torch.randn(5, 6, 7, generator=_g())
    idx = (_ids(4, 5, (4, 1)), _ids(3, 6))
    ref = x[idx]
    plans = []
    real = scatter._take_n_plan
    monkeypatch.setattr(scatter, "_take_n_plan", lambda *a: plans.append(a[1]) or real(*a))
    with T.enable(include=["index.Tensor"]):
        got = x[idx]
    close(got, ref)
    assert plans == [0]


@pytest.mark.parametrize("pair", [False, True], ids=["one index", "two indices"])
def test_index_gradient_matches_eager(native, device_rules, pair):
    x0, ids = torch.randn(12, 96, generator=_g()), _ids(30, 12)
    idx = (ids, _ids(30, 96)) if pair else ids
    w = torch.randn(30, generator=_g()) if pair else torch.randn(30, 96, generator=_g())
    T.disable()
    x = x0.clone().requires_grad_()
    (x[idx] * w).sum().backward()
    want = x.grad
    T.enable(wait_native=True)
    x = x0.clone().requires_grad_()
    (x[idx] * w).sum().backward()
    close(x.grad, want)


@pytest.mark.gpu
def test_gpu_index_rows_and_flat():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    h = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.rand(16384, device="cuda", generator=g)
    ids = torch.randint(-8192, 8192, (16384,), device="cuda", generator=g)
    want_h, want_w = h[ids], w[ids.clamp(min=0)]
    (got_h, got_w), d = routed(lambda: (h[ids], w[ids.clamp(min=0)]), ["index.Tensor"])
    assert torch.equal(got_h, want_h) and torch.equal(got_w, want_w)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 2


@pytest.mark.gpu
def test_gpu_several_indices_planned():
    """A padding mask's ``mask[batch_idx, kv_idx]`` and ``hidden[arange, last]`` on the device:
    planned (no Python call), eager's values."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    mask = torch.rand(4, 512, device="cuda", generator=g) > 0.2
    b, kv = torch.arange(4, device="cuda").view(4, 1, 1, 1), torch.arange(512, device="cuda").view(1, 1, 1, 512)
    h = torch.randn(4, 300, 2048, device="cuda", dtype=torch.bfloat16, generator=g)
    last = torch.randint(-300, 300, (4,), device="cuda", generator=g)
    want_m, want_h = mask[b, kv], h[torch.arange(4, device="cuda"), last]
    (got_m, got_h), d = routed(lambda: (mask[b, kv], h[torch.arange(4, device="cuda"), last]), ["index.Tensor"])
    assert torch.equal(got_m, want_m) and torch.equal(got_h, want_h)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 2


# ---- x[idx] = v (aten::index_put_, one 1-D index over the leading dim) --------------------------
PUT_CASES = {
    "MoE's inverse permutation inv[perm] = arange": lambda: (torch.zeros(16, dtype=torch.int64),
                                                           [torch.randperm(16, generator=_g())], torch.arange(16)),
    "rows x[ids] = v": lambda: (torch.zeros(10, 6), [torch.tensor([3, -1, 0])], torch.randn(3, 6, generator=_g())),
    "broadcast value row": lambda: (torch.zeros(10, 6), [torch.tensor([2, 5])], torch.randn(6, generator=_g())),
    "0-dim value": lambda: (torch.zeros(10, 6), [torch.tensor([2, 5])], torch.tensor(1.5)),
    "transposed self": lambda: (torch.zeros(6, 10).t(), [torch.tensor([1, 7])], torch.randn(2, 6, generator=_g())),
    "accumulate, repeated index": lambda: (torch.zeros(5, 4), [torch.tensor([1, 1, 3, 1])],
                                           torch.randn(4, 4, generator=_g()), True),
    "bf16 rows": lambda: (torch.zeros(8, 64, dtype=torch.bfloat16), [torch.tensor([0, 7])],
                          torch.randn(2, 64, generator=_g()).to(torch.bfloat16)),
    "x[:, ids] = v, middle dim": lambda: (torch.randn(3, 7, 5, generator=_g()), [None, torch.tensor([0, -3])],
                                          torch.randn(3, 2, 5, generator=_g())),
    "x[:, ids] += v, repeated index (ordered sums)": lambda: (
        torch.randn(3, 7, 5, generator=_g()), [None, torch.tensor([1, 6, 1, -1, 1])],
        torch.randn(3, 5, 5, generator=_g()), True),
    "x[..., [-2], :] += g, bf16 (Falcon's multi-query backward)": lambda: (
        torch.zeros(2, 3, 6, 4, dtype=torch.bfloat16), [None, None, torch.tensor([-2])],
        torch.randn(2, 3, 1, 4, generator=_g()).to(torch.bfloat16), True),
    "bf16 rows +=, a pair of repeats": lambda: (
        torch.zeros(6, 8, dtype=torch.bfloat16), [torch.tensor([1, 4, 1])],
        torch.randn(3, 8, generator=_g()).to(torch.bfloat16), True),
    "int64 +=, last dim, transposed self": lambda: (
        torch.zeros(5, 4, dtype=torch.int64).t(), [None, torch.tensor([4, 0, 4])],
        torch.randint(-9, 9, (4, 3), generator=_g()), True),
}


@pytest.mark.parametrize("case", sorted(PUT_CASES))
def test_index_put_matches_eager_and_is_planned(native, device_rules, case):
    def call(args):
        x, idx, v, *acc = args
        return torch.ops.aten.index_put_(x, idx, v, *acc)

    T.disable()
    want = call(PUT_CASES[case]())
    T.enable(wait_native=True)
    args = PUT_CASES[case]()
    version = args[0]._version
    got = call(args)
    args2 = PUT_CASES[case]()
    before = native.stats()
    again = call(args2)
    d = stats_delta(before, native.stats())
    close(got, want)
    close(again, want)
    assert got is args[0] and args[0]._version > version, "the result is not self, written in place"
    assert got.stride() == want.stride()
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] == 1, d


@pytest.mark.parametrize("op", ["index_put_", "_index_put_impl_"])
def test_accumulating_short_index_sums_in_order_in_one_plan(native, device_rules, op):
    """An accumulating write through a short index is one kernel that adds each target's values in
    the index's order in fp32, as aten's sorted algorithm does, in any dtype (bf16: no atomics),
    at any dim; a long one in an atomic dtype takes the atomic kernel; a long one in bf16, aten."""
    from tritonjit_ops import scatter

    g = _g()
    idx = torch.tensor([2, 0, 2, -1, 2, 0])
    x = torch.randn(4, 5, 3, generator=g).to(torch.bfloat16)
    v = torch.randn(4, 6, 3, generator=g).to(torch.bfloat16)
    want = torch.ops.aten.index_put_(x.float(), [None, idx], v.float(), True).to(torch.bfloat16)  # fp32 sums
    aten_op = getattr(torch.ops.aten, op)
    with T.enable(include=[op], wait_native=True):
        self_ = x.clone()
        before = native.stats()
        got = aten_op(self_, [None, idx], v, True)
        d = stats_delta(before, native.stats())
    assert torch.equal(got, want)
    assert d["python_calls"] == 0 and d["aten_calls"] == 0 and d["plan_hits"] == 1, d
    assert scatter._ordered(True, idx) and not scatter._ordered(True, torch.zeros(scatter._SUM_MAX_INDEX + 1))
    long_idx = torch.arange(scatter._SUM_MAX_INDEX + 1) % 4
    long_v = torch.randn(len(long_idx), 3, generator=g)
    with T.enable(include=[op], wait_native=True):
        self_, self16 = torch.zeros(4, 3), torch.zeros(4, 3, dtype=torch.bfloat16)
        before = native.stats()
        got = aten_op(self_, [long_idx], long_v, True)
        assert stats_delta(before, native.stats())["aten_calls"] == 0
        close(got, torch.zeros(4, 3).index_put_([long_idx], long_v, accumulate=True))
        aten_op(self16.clone(), [long_idx], long_v.to(torch.bfloat16), True)  # the plan: aten's
        before = native.stats()
        got16 = aten_op(self16, [long_idx], long_v.to(torch.bfloat16), True)
        d = stats_delta(before, native.stats())
    close(got16, torch.zeros(4, 3, dtype=torch.bfloat16).index_put_([long_idx], long_v.to(torch.bfloat16),
                                                                     accumulate=True))
    # no bf16 atomics: aten's kernel, planned as such (before, the Python implementation refused
    # it on every call: an MoE layer's token gather, backward, in bf16)
    assert d["aten_calls"] >= 1 and d["python_calls"] == 0, d


def test_backward_of_a_listed_index_is_planned(native, device_rules):
    """``x[..., [i], :]`` (Falcon's multi-query split of its fused QKV): its backward is
    aten::_index_put_impl_ with accumulate into zeros, planned; the gradient is eager's."""
    g = _g()
    x = torch.randn(2, 3, 6, 4, generator=g).to(torch.bfloat16)
    gy = torch.randn(2, 3, 1, 4, generator=g).to(torch.bfloat16)

    def grad():
        xr = x.clone().requires_grad_()
        (gx,) = torch.autograd.grad(xr[..., [-2], :], xr, gy)
        return gx

    want = grad()
    with T.enable(include=["_index_put_impl_", "index.Tensor"], wait_native=True):
        grad()
        before = native.stats()
        got = grad()
        d = stats_delta(before, native.stats())
    assert torch.equal(got, want)
    assert d["python_calls"] == 0 and d["aten_calls"] == 0 and d["plan_hits"] >= 2, d


def test_index_put_sharing_self_goes_to_aten(native, device_rules):
    x = torch.arange(8.0)
    torch.ops.aten.index_put_(torch.zeros(8), [torch.tensor([0, 1, 2, 3])], torch.ones(4))  # the key, planned
    before = native.stats()
    with pytest.raises(RuntimeError, match="single memory location|overlap"):
        x.index_put_([torch.tensor([0, 1, 2, 3])], x[4:])  # the same key; values are a view of x
    # not the plan: the implementation refuses, and so does aten's _index_put_impl_'s route
    assert stats_delta(before, native.stats())["python_calls"] >= 1
    z = torch.arange(4.0)  # the very same view as values: served by an in-place pointwise plan, not by this one
    torch.ops.aten.index_put_(torch.zeros(4), [torch.tensor([3, 2, 1, 0])], torch.ones(4))
    before = native.stats()
    with pytest.raises(RuntimeError, match="single memory location|overlap"):
        z.index_put_([torch.tensor([3, 2, 1, 0])], z)
    assert stats_delta(before, native.stats())["python_calls"] >= 1
    y = torch.arange(8.0)
    got = y.index_put_([torch.tensor([0, 1, 2, 3])], y[4:].clone())
    assert torch.equal(got, torch.tensor([4.0, 5, 6, 7, 4, 5, 6, 7]))


def test_index_put_out_of_range_is_asserted_by_the_kernel(native, device_rules):
    with pytest.raises(Exception, match="tritonjit scatter/index_put: index out of range"):
        torch.ops.aten.index_put_(torch.zeros(10, 3), [torch.tensor([0, 10])], torch.ones(2, 3))


@pytest.mark.gpu
def test_gpu_deterministic_mode_index_writes_repeat_bitwise():
    """On the GPU, where tritonjit's kernels sum by atomics in a varying order: under
    torch.use_deterministic_algorithms(True) the accumulating writes through an index, with
    400 writes to each row, give eager's deterministic result bit for bit, call after call."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.zeros(50, 64, device="cuda")
    idx = torch.randint(0, 50, (20000,), device="cuda", generator=g)
    v = torch.randn(20000, 64, device="cuda", generator=g)
    calls = {
        "index_add_": lambda: x.clone().index_add_(0, idx, v),
        "index_put_": lambda: x.clone().index_put_((idx,), v, accumulate=True),
        "scatter_add": lambda: x.scatter_add(0, idx[:, None].expand(-1, 64), v),
    }
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        want = {n: fn() for n, fn in calls.items()}
        with T.enable(include=["index_put_", "index_add_", "scatter_add"], wait_native=True):
            for _ in range(3):
                for name, fn in calls.items():
                    assert torch.equal(fn(), want[name]), name
    finally:
        torch.use_deterministic_algorithms(before)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_gpu_accumulating_short_index_sums_in_fp32(dim):
    """On the GPU, 16 indices hitting 3 targets (negative ones too) at every dim, in bf16, fp16
    and fp32: each target's sum is within a rounding of the exact (float64) sum, no further from
    it than eager's (aten's sorted kernel rounds some partial sums), and the same bits on every
    call; without repeated indices (the backward of ``x[..., [i], :]``) it is eager's bit for bit."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(dim)
    shape = [5, 6, 7, 8]
    idx = torch.tensor([1, -1, 1, 0, 1, shape[dim] - 1] * 2 + [0, 1, -1, 0], device="cuda")
    for dt, ulp in ((torch.bfloat16, 2.0**-8), (torch.float16, 2.0**-11), (torch.float32, 2.0**-24)):
        x = torch.randn(shape, device="cuda", generator=g).to(dt)
        vshape = list(shape)
        vshape[dim] = len(idx)
        v = torch.randn(vshape, device="cuda", generator=g).to(dt)
        indices = [None] * dim + [idx]
        exact = torch.ops.aten.index_put_(x.double(), indices, v.double(), True)
        want = torch.ops.aten.index_put_(x.clone(), indices, v, True)
        got, d = routed(lambda x=x, indices=indices, v=v: torch.ops.aten.index_put_(x.clone(), indices, v, True),
                        ["index_put_"])
        # a rounding of the result, plus fp32 accumulation's error over the magnitudes summed
        mag = torch.ops.aten.index_put_(x.double().abs(), indices, v.double().abs(), True)
        err = (got.double() - exact).abs()
        assert (err <= exact.abs() * ulp + mag * len(idx) * 2.0**-24).all(), (dt, err.max())
        assert err.sum() <= (want.double() - exact).abs().sum() * 1.01 + 1e-12, dt
        assert d["python_calls"] == 0 and d["plan_hits"] >= 1, d
        one = [None] * dim + [torch.tensor([-2], device="cuda")]
        v1 = v.narrow(dim, 0, 1).contiguous()
        want1 = torch.ops.aten.index_put_(torch.zeros_like(x), one, v1, True)
        got1, _ = routed(lambda x=x, one=one, v1=v1: torch.ops.aten.index_put_(torch.zeros_like(x), one, v1, True),
                         ["index_put_"])
        assert torch.equal(got1, want1), dt
        with T.enable(include=["index_put_"], wait_native=True):
            again = [torch.ops.aten.index_put_(x.clone(), indices, v, True) for _ in range(3)]
        assert all(torch.equal(a, got) for a in again), dt


@pytest.mark.gpu
def test_gpu_index_put_inverse_permutation():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    perm = torch.randperm(16384, device="cuda", generator=g)
    ar = torch.arange(16384, device="cuda")
    want = torch.empty_like(perm).index_put_([perm], ar)
    got, d = routed(lambda: torch.empty_like(perm).index_put_([perm], ar), ["index_put_"])
    assert torch.equal(got, want)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("tokens", [(1, 2), (2, 20), (3, 50)])
def test_embedding_backward_of_few_tokens_is_two_launches_on_the_cxx_path(native, device_rules, dtype, tokens):
    """A model's embedding gradient at a few tokens (decode, a short prompt) on the C++ path as
    on a device: the zeroing and the few-indices kernel (two launches, as aten's), the
    gradient of every repeated token summed; past FEW_INDICES (150 tokens) the accumulator's
    kernels. An index out of range trips the kernel's assert."""
    from tritonjit_ops import indexing_backward as ib

    F = torch.nn.functional
    g = torch.Generator().manual_seed(sum(tokens))
    ids = torch.randint(0, 30, tokens, generator=g)
    ids.view(-1)[-1] = ids.view(-1)[0]  # a repeated token
    w = torch.randn(30, 64, generator=g).to(dtype).requires_grad_()
    up = torch.randn(*tokens, 64, generator=g).to(dtype)
    exact = torch.ops.aten.embedding_dense_backward(up.double(), ids, 30, -1, False)

    def grad() -> torch.Tensor:
        return torch.autograd.grad(F.embedding(ids, w), w, up)[0]

    got, d = routed(grad, ["embedding", "embedding_dense_backward"])
    assert d["python_calls"] == 0 and d["plan_hits"] >= 2, d  # the embedding and its gradient
    tol = 1e-6 if dtype == torch.float32 else 8e-3 * float(exact.abs().max())
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=tol)
    p = ib.plan_embedding_dense_backward(up, ids, 30, -1, False)
    assert [L.fn for L in p.launches] == ([ib._zero, ib._embed_bwd_few] if ids.numel() <= ib.FEW_INDICES
                                          else [ib._zero, ib._index_rows, ib._embed_bwd, ib._index_rows]
                                          if dtype == torch.bfloat16 else [ib._zero, ib._embed_bwd])
    bad = ids.clone()
    bad.view(-1)[0] = 30
    with T.enable(include=["embedding_dense_backward"], wait_native=True), \
            pytest.raises(Exception, match="embedding_backward: index out of range"):
        torch.ops.aten.embedding_dense_backward(up, bad, 30, -1, False)


def test_deterministic_mode_hands_index_writes_to_aten():
    """Under torch.use_deterministic_algorithms(True) the ops that write through an index (sums
    by atomics, a last writer that varies) are aten's, as in eager: index_put_ with accumulate
    through a long index, index_add_, scatter_add and embedding's backward, on enable()'s path
    and the direct entry's gradient; x[idx] (a read) and the accumulating index_put_ through a
    short index (ordered sums, deterministic: the backward of ``x[..., [i], :]``) stay on
    tritonjit's kernels."""

    native = native_ops_or_skip()
    F = torch.nn.functional
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 4, generator=g)
    idx = torch.tensor([0, 2, 2, 5])
    v = torch.randn(4, 4, generator=g)
    long_idx = torch.tensor([0, 2, 2, 5] * 5)  # past scatter._SUM_MAX_INDEX
    long_v = torch.randn(20, 4, generator=g)
    w = torch.randn(6, 3, generator=g, requires_grad=True)
    calls = {
        "index_put_": lambda: x.clone().index_put_((long_idx,), long_v, accumulate=True),
        "index_add_": lambda: x.clone().index_add_(0, idx, v),
        "scatter_add": lambda: x.scatter_add(0, idx[:, None].expand(4, 4), v),
        "embedding_dense_backward": lambda: torch.autograd.grad(F.embedding(idx, w).sum(), w)[0],
    }
    refs = {n: fn() for n, fn in calls.items()}
    short_ref = x.clone().index_put_((idx,), v, accumulate=True)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        with T.enable(include=["index_put_", "index_add_", "scatter_add", "embedding", "embedding_dense_backward",
                               "index.Tensor"], wait_native=True):
            for name, fn in calls.items():
                s0 = native.stats()
                got = fn()
                d = stats_delta(s0, native.stats())
                assert torch.equal(got, refs[name]), name
                assert d["aten_calls"] >= 1, (name, str(d))  # the write through the index: aten's kernel
            s0 = native.stats()
            assert torch.equal(x[idx], x.index_select(0, idx))
            assert stats_delta(s0, native.stats())["aten_calls"] == 0  # the read: tritonjit's kernel
            s0 = native.stats()
            got = x.clone().index_put_((idx,), v, accumulate=True)
            d = stats_delta(s0, native.stats())
            assert d["aten_calls"] == 0 and d["plan_hits"] + d["plans_made"] >= 1, d  # ordered sums
            assert torch.equal(got, short_ref)
        # the direct entry's gradient (tritonjit::embedding_backward): aten's kernel, same values
        wd = w.detach().clone().requires_grad_()
        (gd,) = torch.autograd.grad(T.embedding(wd, idx).sum(), wd)
        assert torch.equal(gd, refs["embedding_dense_backward"])
    finally:
        torch.use_deterministic_algorithms(before)


def test_index_write_kernels_cross_compile_for_sm90():
    """The ordered-sum kernel (bf16, at dim 2, a loop over the index) and the atomic one compile
    for an H100/H200 target here, with no GPU."""
    from tritonjit_ops import scatter

    for dim in (0, 2, 3):
        scatter._put_sum.compile("*bf16:16,*i64:16,*bf16:16," + "i32," * 17 + f"{dim},True,512", target="cuda:90")
    scatter._index.compile("*fp32:16,*i64:16,*fp32:16," + "i32," * 18 + "i32,1,True,False,True,True,True,512",
                           target="cuda:90")
    # index_add_ and scatter_add_ in 16 bits (alpha rounded to the dtype): sm_90's atom.add.noftz,
    # and for bf16 on sm_80 a compare-and-swap loop
    for t, alpha, target in (("bf16", "fp32", "cuda:90"), ("fp16", "i32", "cuda:90"), ("bf16", "i32:1", "cuda:80")):
        scatter._index.compile(f"*{t}:16,*i64:16,*{t}:16," + "i32," * 18 + f"{alpha},0,True,False,True,False,True,512",
                               target=target)
    # scatter_ of a Scalar (no wrap, index of self's rank): into bool (the value's truth) and bf16
    for out, value in (("*i1", "i1"), ("*bf16", "fp32"), ("*i64", "i32")):
        scatter._index.compile(f"{out}:16,*i64:16,{value}," + "i32," * 18 + "i32,1,False,True,False,False,True,512",
                               target="cuda:90")


def test_several_index_kernels_cross_compile_for_sm90():
    """The several-index reads (flat and rows, two int64 index tensors and two int32 ones) with
    their device asserts compile for an H100/H200 target here, with no GPU."""
    idx = "*i64:16," + "i32," * 6
    idx32 = "*i32:16," + "i32," * 6
    for nidx, tail in ((2, idx * 2 + idx32 * 2), (4, idx * 2 + idx32 * 2)):
        scatter._take_n.compile("*bf16:16,*bf16:16," + "i32," * 8 + tail + f"{nidx},True,512", target="cuda:90",
                                **_common.DEVICE_ASSERT)
        scatter._take_n_rows.compile("*bf16:16,*bf16:16," + "i32," * 7 + tail + f"{nidx},True,1024",
                                     target="cuda:90", **_common.DEVICE_ASSERT)


def test_an_error_raised_in_atens_place_reaches_the_caller(native, monkeypatch):
    """On the C++ path a Python implementation's error sends the call to aten's kernel, except
    one marked ``_fallback.final`` (raised where aten would fail worse): the caller gets it."""
    from tritonjit_ops._fallback import final

    x, ids = torch.randn(6, 3, generator=_g()), torch.tensor([0, 2])
    want = x[ids]

    def raise_(exc: Exception) -> Any:
        def take(*args: Any, **kwargs: Any) -> Any:
            raise exc
        return take

    with T.enable(include=["index.Tensor"], wait_native=True):
        monkeypatch.setattr(scatter, "_take_plan", raise_(final(ValueError("tritonjit test: in aten's place"))))
        with pytest.raises(ValueError, match="in aten's place"):
            x[ids]
        monkeypatch.setattr(scatter, "_take_plan", raise_(ValueError("tritonjit test: a plain error")))
        assert torch.equal(x[ids], want)  # aten's kernel served it


# ---- x.scatter_(dim, index, src or value), x.scatter_add_ (an MoE router's masks) -------------
SCATTER_CASES = {
    "one-hot mask.scatter_(1, topk, 1) (DeepSeek-V3's group mask)": lambda: (
        torch.zeros(6, 8), 1, torch.randint(0, 8, (6, 2), generator=_g()), 1),
    "bool mask, value True": lambda: (torch.zeros(5, 16, dtype=torch.bool), 1,
                                      torch.randint(0, 16, (5, 3), generator=_g()), True),
    "bf16 weights, float value, dim 0": lambda: (torch.zeros(7, 4, dtype=torch.bfloat16), 0,
                                                 torch.randint(0, 7, (2, 4), generator=_g()), -0.0),
    "src rows, index smaller than src": lambda: (
        torch.zeros(4, 10), 1, torch.stack([torch.randperm(10, generator=_g())[:3] for _ in range(4)]),
        torch.randn(4, 5, generator=_g())),
    "int32 index, transposed self, rank 3": lambda: (
        torch.zeros(5, 6, 3).transpose(0, 2), 2,
        torch.stack([torch.stack([torch.randperm(5, generator=_g())[:2] for _ in range(6)]) for _ in range(3)]).int(),
        torch.randn(3, 6, 2, generator=_g())),
    "int64 self, int value": lambda: (torch.full((3, 9), -1, dtype=torch.int64), 1,
                                      torch.randint(0, 9, (3, 4), generator=_g()), 7),
    "scatter_add_ fp32, repeated index": lambda: (
        torch.randn(4, 6, generator=_g()), 1, torch.tensor([[0, 0, 5], [1, 1, 1], [2, 3, 2], [5, 4, 5]]),
        torch.randn(4, 3, generator=_g()), "add"),
    "scatter_add_ int32 over dim 0": lambda: (
        torch.zeros(3, 4, dtype=torch.int32), 0, torch.randint(0, 3, (5, 4), generator=_g()),
        torch.randint(-5, 5, (5, 4), generator=_g()).int(), "add"),
}


def _scatter_call(args):
    x, dim, index, src, *add = args
    return x.scatter_add_(dim, index, src) if add else x.scatter_(dim, index, src)


@pytest.mark.parametrize("case", sorted(SCATTER_CASES))
def test_scatter_matches_eager_and_is_planned(native, device_rules, case):
    T.disable()
    want = _scatter_call(SCATTER_CASES[case]())
    T.enable(wait_native=True)
    args = SCATTER_CASES[case]()
    got = _scatter_call(args)
    args2 = SCATTER_CASES[case]()
    before = native.stats()
    again = _scatter_call(args2)
    d = stats_delta(before, native.stats())
    assert got is args[0] and got.stride() == want.stride()
    # no duplicate targets in the non-accumulating cases, so the write order does not matter
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(again, want)
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] == 1 and d["aten_calls"] == 0, d


def test_scatter_value_out_of_range_for_self_goes_to_atens_error(native, device_rules):
    """A Scalar that does not fit self's dtype: the plan's per-call check (Plan.fits) sends the
    call to the implementation, which hands it to aten for its error; the plan of the same key
    still serves a value that fits."""
    x, idx = torch.zeros(2, 4, dtype=torch.int8), torch.tensor([[0], [3]])
    x.scatter_(1, idx, 5)  # the key, planned
    with pytest.raises(RuntimeError, match="out of bounds|overflow"):
        x.scatter_(1, idx, 300)
    y = torch.zeros(2, 4, dtype=torch.int8)
    before = native.stats()
    got = y.scatter_(1, idx, 6)
    assert stats_delta(before, native.stats())["plan_hits"] == 1
    assert got.tolist() == [[6, 0, 0, 0], [0, 0, 0, 6]]


def test_scatter_sharing_self_goes_to_aten(native, device_rules):
    """A src in self's storage is not the plan's (exclusive): the implementation hands the call
    to aten, which writes it where the memory does not overlap and raises where it does."""
    idx = torch.tensor([[0, 1]])
    torch.zeros(1, 4).scatter_(1, idx, torch.ones(1, 4))  # the key, planned
    x = torch.arange(8.0).view(2, 4)
    head, tail = x[:1], x[1:]
    before = native.stats()
    head.scatter_(1, idx, tail)  # another part of self's storage
    assert stats_delta(before, native.stats())["python_calls"] >= 1
    assert x.tolist() == [[4.0, 5.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    y = torch.arange(4.0).view(1, 4)
    with pytest.raises(RuntimeError, match="overlap|single memory location"):
        y.scatter_(1, idx, y)  # the same memory: aten's error


def test_scatter_out_of_range_is_asserted_by_the_kernel(native, device_rules):
    with pytest.raises(Exception, match="tritonjit scatter/index_put: index out of range"):
        torch.zeros(2, 4).scatter_(1, torch.tensor([[0], [4]]), 1.0)
    with pytest.raises(Exception, match="tritonjit scatter/index_put: index out of range"):
        torch.zeros(2, 4).scatter_(1, torch.tensor([[0], [-1]]), 1.0)  # aten's scatter does not wrap


def test_scatter_calls_the_kernel_does_not_take_are_atens(native, device_rules):
    """An accumulation in bf16 (no 16-bit atomics on the interpreter) and deterministic mode plan aten's kernel from
    C++ (no Python implementation on the way); a float value fp32 does not hold, for a float64
    or int64 self (the kernel reads a float Scalar in fp32), is aten's through the
    implementation."""
    idx = torch.tensor([[0, 0, 2]])
    x64 = torch.zeros(1, 4, dtype=torch.float64)
    got = x64.clone().scatter_(1, idx, 0.1)  # the implementation hands it to aten
    assert got[0, 0].item() == 0.1  # the double, not fp32's 0.10000000149
    assert x64.clone().scatter_(1, idx, 0.5)[0, 0].item() == 0.5
    i64 = torch.zeros(1, 4, dtype=torch.int64)
    assert i64.clone().scatter_(1, idx, 2.0**40 + 1)[0, 0].item() == 2**40 + 1
    x16, src16 = torch.zeros(1, 4, dtype=torch.bfloat16), torch.ones(1, 3, dtype=torch.bfloat16)
    got, delta = routed(lambda: x16.clone().scatter_add_(1, idx, src16), ["scatter_add_"])
    assert delta["python_calls"] == 0 and delta["aten_calls"] >= 1, delta
    assert got.tolist() == [[2.0, 0.0, 1.0, 0.0]]
    torch.use_deterministic_algorithms(True)
    try:
        x, i13 = torch.zeros(1, 4), torch.tensor([[1, 3]])
        got, delta = routed(lambda: x.clone().scatter_(1, i13, 2.0), ["scatter_.value"])
        assert delta["aten_calls"] >= 1 and delta["python_calls"] == 0, delta
        assert got.tolist() == [[0.0, 2.0, 0.0, 2.0]]
    finally:
        torch.use_deterministic_algorithms(False)


# ---- x.index_add_(dim, index, source, alpha=...) (an MoE layer's combine, once per expert) -----
INDEX_ADD_CASES = {
    "MoE combine out.index_add_(0, token_ids, expert_out)": lambda: (
        torch.zeros(10, 16), 0, torch.tensor([7, 0, 3, 9]), torch.randn(4, 16, generator=_g()), 1),
    "repeated index, alpha 2.5": lambda: (
        torch.randn(6, 5, generator=_g()), 0, torch.tensor([1, 1, 4, 1]), torch.randn(4, 5, generator=_g()), 2.5),
    "dim 1 of a transposed self, int32 index": lambda: (
        torch.zeros(8, 3).t(), 1, torch.tensor([5, 2, 2], dtype=torch.int32), torch.randn(3, 3, generator=_g()), 1),
    "int64 self, int alpha, rank 3, middle dim": lambda: (
        torch.arange(24).view(2, 4, 3), 1, torch.tensor([3, 0]), torch.arange(12).view(2, 2, 3), -2),
    "empty index": lambda: (torch.ones(4, 2), 0, torch.zeros(0, dtype=torch.int64), torch.zeros(0, 2), 1),
}


@pytest.mark.parametrize("case", sorted(INDEX_ADD_CASES))
def test_index_add_matches_eager_and_is_planned(native, device_rules, case):
    T.disable()
    x, dim, index, source, alpha = INDEX_ADD_CASES[case]()
    want = x.index_add_(dim, index, source, alpha=alpha)
    T.enable(wait_native=True)
    x, dim, index, source, alpha = INDEX_ADD_CASES[case]()
    got = x.index_add_(dim, index, source, alpha=alpha)
    x2, dim, index, source, alpha = INDEX_ADD_CASES[case]()
    before = native.stats()
    again = x2.index_add_(dim, index, source, alpha=alpha)
    d = stats_delta(before, native.stats())
    assert got is x and got.stride() == want.stride()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(again, want)
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] == 1 and d["aten_calls"] == 0, d


def test_index_add_alpha_is_passed_per_call_and_checked(native, device_rules):
    """alpha is a run-time argument of the plan (another value reuses it) whose range for self's
    dtype is checked per call: one that int8 does not hold goes to aten's overflow error; a float
    alpha for an integer self goes to the implementation (aten truncates it)."""
    x, idx, src = torch.zeros(2, 3, dtype=torch.int8), torch.tensor([1]), torch.ones(1, 3, dtype=torch.int8)
    x.clone().index_add_(0, idx, src, alpha=2)  # the key, planned
    y = x.clone()
    before = native.stats()
    got = y.index_add_(0, idx, src, alpha=5)
    assert stats_delta(before, native.stats())["plan_hits"] == 1
    assert got.tolist() == [[0, 0, 0], [5, 5, 5]]
    with pytest.raises(RuntimeError, match="overflow"):
        x.clone().index_add_(0, idx, src, alpha=300)
    i64 = torch.zeros(2, 3, dtype=torch.int64)
    assert i64.index_add_(0, idx, src.long(), alpha=1.5).tolist() == [[0, 0, 0], [1, 1, 1]]


def test_index_add_sharing_self_goes_to_atens_error(native, device_rules):
    x = torch.arange(4.0)
    x.clone()[:2].index_add_(0, torch.tensor([0, 1]), torch.ones(2))  # the key, planned
    with pytest.raises(RuntimeError, match="overlap|single memory location"):
        x[:2].index_add_(0, torch.tensor([0, 1]), x[1:3])


def test_index_add_out_of_range_is_asserted_by_the_kernel(native, device_rules):
    with pytest.raises(Exception, match="tritonjit scatter/index_put: index out of range"):
        torch.zeros(3, 2).index_add_(0, torch.tensor([0, 3]), torch.ones(2, 2))


def test_index_add_calls_the_kernel_does_not_take_are_atens(native, device_rules):
    """bf16 on the interpreter (no 16-bit atomics there) and deterministic mode plan aten's
    kernel from C++; a 0-dim index goes to the implementation."""
    idx = torch.tensor([2, 0])
    x16, src16 = torch.zeros(3, 2, dtype=torch.bfloat16), torch.ones(2, 2, dtype=torch.bfloat16)
    got, delta = routed(lambda: x16.clone().index_add_(0, idx, src16), ["index_add_"])
    assert delta["python_calls"] == 0 and delta["aten_calls"] >= 1, delta
    assert got.tolist() == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    got, delta = routed(lambda: torch.zeros(3).index_add_(0, torch.tensor(1), torch.ones(1)), ["index_add_"])
    assert delta["python_calls"] == 1 and got.tolist() == [0.0, 1.0, 0.0], delta
    torch.use_deterministic_algorithms(True)
    try:
        got, delta = routed(lambda: torch.zeros(3, 2).index_add_(0, idx, torch.ones(2, 2)), ["index_add_"])
        assert delta["aten_calls"] >= 1 and delta["python_calls"] == 0, delta
        assert got.tolist() == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_16bit_index_add_and_scatter_add_by_atomics(dtype):
    """On an NVIDIA GPU the accumulating writes add bf16 and fp16 by atomics, as aten's kernels
    do: planned on the C++ path, one launch; without repeated targets eager's values bit for bit
    (alpha rounded to the dtype first, as aten does); with 64 adds into each row within a
    rounding of each add of eager's."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(0)
    out = torch.zeros(1024, 256, device="cuda", dtype=dtype)
    ids = torch.randperm(1024, device="cuda", generator=g)[:300]
    src = torch.randn(300, 256, device="cuda", generator=g).to(dtype)
    for alpha in (1, 0.1):
        want = out.clone().index_add_(0, ids, src, alpha=alpha)
        got, delta = routed(lambda alpha=alpha: out.clone().index_add_(0, ids, src, alpha=alpha), ["index_add_"])
        assert torch.equal(got, want), alpha
        assert delta["plan_hits"] == 1 and delta["launches"] == 1 and delta["python_calls"] == 0, delta
    topk = torch.rand(512, 64, device="cuda", generator=g).topk(8, dim=1).indices
    w = torch.rand(512, 8, device="cuda", generator=g).to(dtype)
    want = torch.zeros(512, 64, device="cuda", dtype=dtype).scatter_add_(1, topk, w)
    got, delta = routed(lambda: torch.zeros(512, 64, device="cuda", dtype=dtype).scatter_add_(1, topk, w),
                        ["scatter_add_"])
    assert torch.equal(got, want) and delta["plan_hits"] >= 1 and delta["python_calls"] == 0, delta
    rep = torch.randint(0, 16, (1024,), device="cuda", generator=g)
    v = torch.randn(1024, 32, device="cuda", generator=g).to(dtype)
    want = torch.zeros(16, 32, device="cuda").index_add_(0, rep, v.float())
    got, _ = routed(lambda: torch.zeros(16, 32, device="cuda", dtype=dtype).index_add_(0, rep, v), ["index_add_"])
    eps = torch.finfo(dtype).eps
    assert ((got.float() - want).abs() <= 64 * eps * want.abs().max()).all()
