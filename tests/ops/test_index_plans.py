"""``x[idx]`` (aten::index.Tensor with one integer index tensor) on the C++ operator path: its
``Tensor?[]`` indices are a key the C++ path describes (None, or a tensor's words, per item),
and the plan reads ``x`` in its own strides where they nest. On a device the kernel checks the
index range itself; here (the interpreter) ``host_check_allowed`` answers as on a device, so
the plans are the device's, and Triton's interpreter honours their device asserts."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_enabled, needs_cxx, stats_delta
from tritonjit_ops import _common, scatter

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    yield from native_ops_enabled()


@pytest.fixture
def device_rules(monkeypatch):
    """Plans as on a device: no host check of the index values, the kernel's assert compiled in
    (honoured by the interpreter)."""
    import triton.runtime.interpreter as interp

    monkeypatch.setattr(scatter, "host_check_allowed", lambda t: False)
    monkeypatch.setattr(interp.interpreter_builder, "options", interp.InterpreterOptions(**_common.DEVICE_ASSERT))


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
    "transposed x (copied first)": lambda: (torch.randn(70, 10, generator=_g()).t(), [_ids(8, 10)]),
    "row-strided x (nests)": lambda: (torch.randn(20, 80, generator=_g())[::2], [_ids(8, 10)]),
    "column-strided x, middle index": lambda: (torch.randn(4, 6, 10, generator=_g())[:, :, ::2], [None, _ids(5, 6)]),
    "bf16 rows": lambda: (torch.randn(16, 128, generator=_g()).to(torch.bfloat16), [_ids(9, 16)]),
    "bool x": lambda: (torch.randn(10, 3, generator=_g()) > 0, [_ids(4, 10)]),
    "int64 x (MoE's token ids)": lambda: (torch.arange(50), [_ids(33, 50)]),
    "empty index": lambda: (torch.randn(10, 3, generator=_g()), [torch.zeros(0, dtype=torch.int64)]),
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
    assert d["plans_made"] == 0 and d["plan_hits"] == 1


def test_getitem_under_enable_is_planned(native, device_rules):
    x, ids = torch.randn(12, 96, generator=_g()), _ids(20, 12)
    want = x.clone()[ids]
    x[ids]
    before = native.stats()
    got = x[ids]
    assert stats_delta(before, native.stats())["plan_hits"] == 1
    close(got, want)


@pytest.mark.parametrize("indices", [
    lambda: [torch.tensor([0, 1]), torch.tensor([1, 0])],  # two index tensors: aten broadcasts them
    lambda: [torch.tensor([True, False, True, False])],  # a mask: its result size needs a sync
    lambda: [torch.tensor([[0, 1], [2, 3]]).t()],  # an index that is not flat in memory
])
def test_other_index_forms_are_eagers(native, device_rules, indices):
    x = torch.randn(4, 4, generator=_g())
    idx = indices()
    T.disable()
    ref = x[tuple(idx)] if len(idx) > 1 else x[idx[0]]
    T.enable(wait_native=True)
    close(torch.ops.aten.index.Tensor(x, idx), ref)


@pytest.mark.parametrize("bad", [10, -11, 2**40])
@pytest.mark.parametrize("width", [3, 96])  # the flat kernel and the rows kernel
def test_out_of_range_index_is_asserted_by_the_kernel(native, device_rules, bad, width):
    x = torch.randn(10, width, generator=_g())
    with pytest.raises(Exception, match="tritonjit index: index out of range"):
        torch.ops.aten.index.Tensor(x, [torch.tensor([0, bad, 1])])


def test_out_of_range_index_on_the_host_path_is_atens_error(native):
    x = torch.randn(10, 3)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([0, 10])]


def test_index_gradient_matches_eager(native, device_rules):
    x0, ids = torch.randn(12, 96, generator=_g()), _ids(30, 12)
    T.disable()
    x = x0.clone().requires_grad_()
    (x[ids] * 2).sum().backward()
    want = x.grad
    T.enable(wait_native=True)
    x = x0.clone().requires_grad_()
    (x[ids] * 2).sum().backward()
    close(x.grad, want)


@pytest.mark.gpu
def test_gpu_index_rows_and_flat():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from tritonjit_ops import _native_ops

    g = torch.Generator(device="cuda").manual_seed(0)
    h = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.rand(16384, device="cuda", generator=g)
    ids = torch.randint(-8192, 8192, (16384,), device="cuda", generator=g)
    want_h, want_w = h[ids], w[ids.clamp(min=0)]
    with T.enable(include=["index.Tensor"], wait_native=True):
        h[ids], w[ids.clamp(min=0)]
        before = _native_ops.stats()
        got_h, got_w = h[ids], w[ids.clamp(min=0)]
        d = stats_delta(before, _native_ops.stats())
    assert torch.equal(got_h, want_h) and torch.equal(got_w, want_w)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 2
