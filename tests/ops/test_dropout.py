"""native_dropout and the random fills (bernoulli_, uniform_, normal_) under enable():
reproducible under torch.manual_seed, fresh masks on successive calls, the keep
probability and the 1/(1-p) scale, and a backward that uses the forward's mask. (The
mask is not eager's bit for bit: aten's Philox layout differs.)"""
import pytest
import torch
import tritonjit_ops as T

aten = torch.ops.aten


def _dropout_checks(dev: str, n: int) -> None:
    x = torch.randn(n, device=dev, requires_grad=True)
    p = 0.3
    with T.enable(include="all", wait_native=True):
        assert "native_dropout" in T.enabled_ops()
        torch.manual_seed(1)
        out1, m1 = aten.native_dropout(x, p, True)
        out1b, m1b = aten.native_dropout(x, p, True)
        torch.manual_seed(1)
        out2, m2 = aten.native_dropout(x, p, True)
        assert m1.dtype == torch.bool and m1.shape == x.shape
        assert torch.equal(m1, m2) and torch.equal(out1, out2)  # reproducible
        assert not torch.equal(m1, m1b)  # the generator advanced
        keep = m1.float().mean().item()
        assert abs(keep - (1 - p)) < 4 * ((p * (1 - p) / n) ** 0.5), keep
        torch.testing.assert_close(out1, torch.where(m1, x / (1 - p), torch.zeros_like(x)))
        g = torch.randn(n, device=dev)
        (gx,) = torch.autograd.grad(out1, x, g)
        torch.testing.assert_close(gx, torch.where(m1, g / (1 - p), torch.zeros_like(g)))
        torch.testing.assert_close(aten.native_dropout_backward(g, m1, 2.0), torch.where(m1, 2 * g, 0 * g))
        out, m = aten.native_dropout(x, p, False)  # eval: a copy and an all-true mask
        assert torch.equal(out, x) and bool(m.all())


def test_dropout_cpu():
    _dropout_checks("cpu", 4096)


@pytest.mark.gpu
def test_dropout_gpu_reproducible_and_no_sync():
    _dropout_checks("cuda", 1 << 20)
    x = torch.randn(1 << 16, device="cuda")
    with T.enable(include="all", wait_native=True):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = torch.nn.functional.dropout(x.requires_grad_(), 0.5, training=True)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert out.shape == x.shape


def _fill_checks(dev: str, n: int) -> None:
    with T.enable(include="all", wait_native=True):
        torch.manual_seed(3)
        a = torch.empty(n, device=dev).normal_(1.0, 2.0)
        u = torch.empty(n, device=dev).uniform_(-1.0, 3.0)
        b = torch.empty(n, device=dev).bernoulli_(0.25)
        torch.manual_seed(3)
        a2 = torch.empty(n, device=dev).normal_(1.0, 2.0)
        s = torch.empty(8, 16, device=dev).t().uniform_(2.0, 5.0)  # a strided self
    assert torch.equal(a, a2) and not torch.equal(a, torch.empty(n, device=dev).normal_(1.0, 2.0))
    tol = 6 / n ** 0.5
    assert abs(a.mean().item() - 1.0) < 2 * tol and abs(a.std().item() - 2.0) < 2 * tol
    assert -1.0 <= u.min().item() and u.max().item() <= 3.0 and abs(u.mean().item() - 1.0) < 2 * tol
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean().item() - 0.25) < tol
    assert 2.0 <= s.min().item() and s.max().item() <= 5.0 and s.std().item() > 0.5


def test_random_fills_cpu():
    _fill_checks("cpu", 1 << 14)


@pytest.mark.gpu
def test_random_fills_gpu():
    _fill_checks("cuda", 1 << 20)


@pytest.mark.gpu
def test_dropout_in_a_cuda_graph_draws_a_fresh_mask_each_replay():
    """Inside a capture the calls are aten's (graph-safe Philox offsets): a seed read on the
    host would be frozen into the graph and every replay would drop the same elements."""
    x = torch.ones(1 << 14, device="cuda")
    with T.enable(include="all", wait_native=True):
        torch.nn.functional.dropout(x, 0.5, training=True)  # warm-up outside the capture
        torch.empty(16, device="cuda").uniform_()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch.nn.functional.dropout(x, 0.5, training=True)
            fill = torch.empty(1 << 14, device="cuda").uniform_()
        masks, fills = [], []
        for _ in range(2):
            graph.replay()
            torch.cuda.synchronize()
            masks.append(out != 0)
            fills.append(fill.clone())
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(fills[0], fills[1])
    assert abs(masks[0].float().mean().item() - 0.5) < 0.05
