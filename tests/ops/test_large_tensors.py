"""GPU: tensors of 2**31 elements or more under enable() give eager's results.

A logits tensor of 16k tokens by a 128k vocabulary, the scores of a long-context eager
attention, a causal mask of 64k positions: offsets past 2**31 overflow int32 index math
(an illegal address, or silently another element), and a grid of (rows, tiles) meets the
y limit of 65535. Each case was wrong or faulted before its fix (2026-12-05, on an H100).

Each test holds 5-15 GiB: they take a file lock, so the shards of the GPU suite run them one
at a time, and skip on a device with less than 40 GiB. Every test needs a CUDA GPU (skipped
without one).

    pytest -q -m gpu tests/ops/test_large_tensors.py
"""
from __future__ import annotations

import fcntl
import gc
import os
import tempfile

import pytest
import torch
import tritonjit_ops as T

pytestmark = pytest.mark.gpu
DEV = "cuda"
F = torch.nn.functional
BF = torch.bfloat16
R, C = 16400, 131072  # 2_149_580_800 elements
ROWS = 524288  # rows of 4096: 2**31 elements


@pytest.fixture(autouse=True)
def _one_at_a_time():
    """The shards of the GPU suite share one device: a large test runs alone."""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU of 40 GiB or more")
    path = os.path.join(tempfile.gettempdir(), "tritonjit-large-tensor-tests.lock")
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            gc.collect()
            torch.cuda.empty_cache()
            fcntl.flock(lock, fcntl.LOCK_UN)


def _randn(*shape, dtype=BF):
    g = torch.Generator(device=DEV).manual_seed(0)
    return torch.randn(shape, device=DEV, dtype=dtype, generator=g)


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-2) -> None:
    """Every element within rtol * (1 + |want|), compared in slices (no fp32 copy of it all)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    g, w = got.reshape(-1), want.reshape(-1)
    step = 1 << 28
    for s in range(0, g.numel(), step):
        a, b = g[s:s + step].float(), w[s:s + step].float()
        bad = ((a - b).abs() > rtol * (1 + b.abs())) & ~(a.isnan() & b.isnan()) & (a != b)
        assert not bool(bad.any()), f"first mismatch at {s + int(bad.nonzero()[0])}"


def _both(fn):
    want = fn()
    with T.enable():
        got = fn()
    return got, want


def test_softmax_over_dim_0_of_a_large_matrix():
    """Was a GridError (65536 column tiles on grid y), then offsets of rows past 2**31."""
    x = _randn(R, C)
    got, want = _both(lambda: torch.softmax(x, 0))
    _close(got, want)


def test_softmax_of_many_rows_and_its_gradient():
    """The scores of a 4k-context eager attention: 524288 rows of 4096 took 65536 tiles on
    grid y (the limit is 65535)."""
    x = _randn(ROWS, 4096)
    dy = _randn(ROWS, 4096)

    def step():
        xx = x.detach().requires_grad_()
        y = torch.softmax(xx, -1)
        y.backward(dy)
        return y.detach(), xx.grad

    (y, dx), (y_ref, dx_ref) = _both(step)
    _close(y, y_ref)
    _close(dx, dx_ref, rtol=2e-2)


@pytest.mark.parametrize("op", ["sum", "argmax"])
def test_full_reduction_past_int32(op):
    """The split reduction's chunk offsets were int32: an illegal address."""
    x = _randn(R, C)
    got, want = _both(lambda: x.float().sum() if op == "sum" else x.argmax())
    if op == "sum":
        assert abs(got.item() - want.item()) <= 1e-3 * (1 + abs(want.item())) + 1.0
    else:
        assert x.reshape(-1)[got] == x.reshape(-1)[want]


@pytest.mark.parametrize("case", ["mm", "addmm", "a_transposed"])
def test_matmul_operand_past_int32(case):
    """A logits matmul of 16400 tokens by 131072 classes writes 2**31 elements; its
    gradient reads one transposed (an illegal address before IDX64)."""
    a, b = _randn(R, 64), _randn(64, C)
    if case == "mm":
        got, want = _both(lambda: a @ b)
    elif case == "addmm":
        bias = _randn(C)
        got, want = _both(lambda: torch.addmm(bias, a, b))
    else:
        big = _randn(R, C)
        got, want = _both(lambda: big.t() @ a)
    _close(got, want, rtol=2e-2)


def test_arange_past_int32():
    n = 2**31 + 1000
    got, want = _both(lambda: torch.arange(n, device=DEV, dtype=torch.float32)[-4:].clone())
    assert torch.equal(got, want)


def test_direct_entries_past_int32():
    """The flat fast paths of the direct entries (int32 offsets) hand such calls to the
    general kernel."""
    x = _randn(R, C)
    y = _randn(R, C)
    torch.testing.assert_close(T.gelu(x)[-1, -8:], F.gelu(x[-1, -8:]))
    assert torch.equal(T.add(x, y)[-1, -8:], (x[-1, -8:] + y[-1, -8:]))
