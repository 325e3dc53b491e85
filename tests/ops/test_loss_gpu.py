"""GPU: nll_loss_forward's plans on CUDA at the row counts models produce: one program up to
loss.SPLIT_ROWS rows, partial sums plus an in-order finish above; values against aten's
kernel, a second call a plan hit with no Python call, and the split inside a CUDA graph.
Skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import native_ops_or_skip, stats_delta
from tritonjit_ops import loss

pytestmark = pytest.mark.gpu
NLL = ["nll_loss_forward", "nll_loss_backward"]


@pytest.fixture(scope="module")
def native():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import tritonjit

    tritonjit.set_backend("cuda")
    return native_ops_or_skip()


def _inputs(n: int, c: int, dt: torch.dtype, ignored: float, weighted: bool):
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(n, c, device="cuda", generator=g).log_softmax(-1).to(dt)
    t = torch.randint(0, c, (n,), device="cuda", generator=g)
    t[torch.rand(n, device="cuda", generator=g) < ignored] = -100
    w = torch.rand(c, device="cuda", generator=g).to(dt) if weighted else None
    return x, t, w


@pytest.mark.parametrize("n", [1, 300, loss.SPLIT_ROWS, loss.SPLIT_ROWS + 1, 20000])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("red", [1, 2])
def test_nll_reductions_on_cuda(native, n, dt, red):
    x, t, w = _inputs(n, 32000, dt, 0.1, weighted=n == 300)
    ref = torch.ops.aten.nll_loss_forward(x, t, w, red, -100)
    with T.enable(include=NLL, wait_native=True):
        torch.ops.aten.nll_loss_forward(x, t, w, red, -100)
        s0 = native.stats()
        got = torch.ops.aten.nll_loss_forward(x, t, w, red, -100)
        d = stats_delta(s0, native.stats())
    tol = dict(rtol=1e-2, atol=1e-2) if dt == torch.bfloat16 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(got[0], ref[0], **tol)
    torch.testing.assert_close(got[1], ref[1], **tol)
    assert d["python_calls"] == 0 and d["launches"] == (2 if n > loss.SPLIT_ROWS else 1)


def test_nll_split_in_a_cuda_graph(native):
    x, t, _ = _inputs(3 * loss.SPLIT_ROWS, 1000, torch.float32, 0.2, weighted=False)
    ref = torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)
    with T.enable(include=NLL, wait_native=True):
        torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)  # the plan, before capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)
    x.copy_(torch.randn_like(x).log_softmax(-1))  # new inputs, replayed
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out[0], torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)[0], rtol=1e-5, atol=1e-5)
    assert not torch.equal(out[0], ref[0])
