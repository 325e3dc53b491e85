"""Second and further derivatives (``create_graph=True``: gradient penalties, Hessian-vector
products, MAML) on every path: the direct entries and ``torch.ops.tritonjit`` (whose
backward ops differentiate through double_backward.py's references), aten's operators
under ``enable()`` (aten's own formulas), and flash attention, whose logsumexp output has a
gradient too. Checked against finite differences in float64 and against eager.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable

import pytest
import torch
import tritonjit_ops as T

F = torch.nn.functional
tj = torch.ops.tritonjit
attention = importlib.import_module("tritonjit_ops.attention")
D = torch.float64
GPU = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                       reason="needs a CUDA GPU")])


def _r(*shape: int, dev: str = "cpu") -> torch.Tensor:
    return torch.randn(*shape, dtype=D, device=dev, requires_grad=True)


def _cases() -> dict[str, tuple[Callable, Callable, Callable[[], tuple]]]:
    """name -> (direct entry, torch.ops.tritonjit, inputs): ops whose backward runs a
    tritonjit backward op (or aten's where none pays)."""
    idx = torch.tensor([[1, 2], [0, 0], [7, 3]])
    rows = torch.tensor([2, 0, 2])
    return {
        "tanh": (T.tanh, tj.tanh, lambda: (_r(3, 8),)),
        "sigmoid": (T.sigmoid, tj.sigmoid, lambda: (_r(3, 8),)),
        "gelu": (T.gelu, tj.gelu, lambda: (_r(3, 8),)),
        "gelu_tanh": (lambda x: T.gelu(x, approximate="tanh"), lambda x: tj.gelu(x, approximate="tanh"),
                      lambda: (_r(3, 8),)),
        "silu": (T.silu, tj.silu, lambda: (_r(3, 8),)),
        "relu": (T.relu, tj.relu, lambda: (_r(3, 8),)),
        "softmax": (lambda x: T.softmax(x, -1), lambda x: tj.softmax(x, -1), lambda: (_r(3, 8),)),
        "log_softmax": (lambda x: T.log_softmax(x, 0), lambda x: tj.log_softmax(x, 0), lambda: (_r(3, 8),)),
        "layer_norm": (lambda x, w, b: T.layer_norm(x, (2, 4), w, b), lambda x, w, b: tj.layer_norm(x, [2, 4], w, b),
                       lambda: (_r(3, 2, 4), _r(2, 4), _r(2, 4))),
        "rms_norm": (lambda x, w: T.rms_norm(x, (8,), w), lambda x, w: tj.rms_norm(x, [8], w, 1e-6),
                     lambda: (_r(3, 8), _r(8))),
        "fused_add_rms_norm": (lambda x, r, w: T.fused_add_rms_norm(x, r, w),
                               lambda x, r, w: tj.fused_add_rms_norm(x, r, w), lambda: (_r(3, 8), _r(3, 8), _r(8))),
        "group_norm": (lambda x, w, b: T.group_norm(x, 2, w, b), lambda x, w, b: tj.group_norm(x, 2, w, b),
                       lambda: (_r(3, 4, 2), _r(4), _r(4))),
        "silu_and_mul": (T.silu_and_mul, tj.silu_and_mul, lambda: (_r(3, 8),)),
        "silu_and_mul_two": (T.silu_and_mul, tj.silu_and_mul, lambda: (_r(3, 4), _r(3, 4))),
        "cross_entropy": (lambda x: T.cross_entropy(x, torch.tensor([1, -100, 3])),
                          lambda x: tj.cross_entropy(x, torch.tensor([1, -100, 3])), lambda: (_r(3, 8),)),
        "cross_entropy_none": (lambda x: T.cross_entropy(x, torch.tensor([1, 2, 3]), reduction="none"),
                               lambda x: tj.cross_entropy(x, torch.tensor([1, 2, 3]), reduction="none"),
                               lambda: (_r(3, 8),)),
        "embedding": (lambda w: T.embedding(w, torch.tensor([1, 2, 1])), lambda w: tj.embedding(w, torch.tensor([1, 2, 1])),
                      lambda: (_r(5, 4),)),
        "gather": (lambda x: T.gather(x, 1, idx), lambda x: tj.gather(x, 1, idx), lambda: (_r(3, 8),)),
        "index_select": (lambda x: T.index_select(x, 0, rows), lambda x: tj.index_select(x, 0, rows),
                         lambda: (_r(3, 8),)),
    }


CASES = _cases()


@pytest.mark.parametrize("path", ["direct", "ops"])
@pytest.mark.parametrize("name", list(CASES))
def test_second_derivatives_agree_with_finite_differences(name: str, path: str) -> None:
    direct, op, inputs = CASES[name]
    fn = direct if path == "direct" else op
    assert torch.autograd.gradgradcheck(fn, inputs(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name,call,inputs", [
    ("threshold_backward", lambda g, x: tj.threshold_backward(g, x, 0.25), lambda: (_r(3, 8), _r(3, 8))),
    ("hardtanh_backward", lambda g, x: tj.hardtanh_backward(g, x, -0.5, 0.5), lambda: (_r(3, 8), _r(3, 8))),
    ("softplus_backward", lambda g, x: tj.softplus_backward(g, x, 2.0, 1.5), lambda: (_r(3, 8), _r(3, 8))),
    ("silu_backward", tj.silu_backward, lambda: (_r(3, 8), _r(3, 8))),
    ("norm_backward", lambda g, x, w, r: tj.norm_backward(g, x, w, r, 8, 1e-5, False, True),
     lambda: (_r(3, 8), _r(3, 8), _r(8), _r(3, 8))),
    ("embedding_backward", lambda g: tj.embedding_backward(g, torch.tensor([1, 3, 1]), 5, 3),
     lambda: (_r(3, 4),)),
])
def test_backward_ops_are_differentiable(name: str, call: Callable, inputs: Callable[[], tuple]) -> None:
    """The backward ops' own gradients (their references' vjp) against finite differences."""
    assert torch.autograd.gradcheck(call, inputs(), atol=1e-5, rtol=1e-4)


def test_third_derivatives_agree_with_eager() -> None:
    """torch.func.vjp keeps the saved inputs' graph: a third derivative is not cut off."""
    def third(f: Callable[[torch.Tensor], torch.Tensor], x0: torch.Tensor) -> list[torch.Tensor]:
        x = x0.clone().requires_grad_(True)
        out, grads = f(x).sum(), []
        for _ in range(3):
            (out,) = torch.autograd.grad(out, x, create_graph=True)
            grads.append(out)
            out = out.sum()
        return grads

    x0 = torch.randn(3, 8, dtype=D)
    for ours, eager in [(T.tanh, torch.tanh), (lambda x: T.softmax(x, -1) * x, lambda x: torch.softmax(x, -1) * x),
                        (lambda x: T.layer_norm(x, (8,)) * x, lambda x: F.layer_norm(x, (8,)) * x)]:
        for a, b in zip(third(ours, x0), third(eager, x0)):
            torch.testing.assert_close(a, b)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.l1 = torch.nn.Embedding(50, 24), torch.nn.Linear(24, 32)
        self.ln, self.rms, self.gn = torch.nn.LayerNorm(32), torch.nn.RMSNorm(32), torch.nn.GroupNorm(4, 32)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.ln(self.l1(x + self.emb(idx))))
        h = self.rms(F.silu(h) * torch.sigmoid(h)) + torch.tanh(h)
        h = self.gn(h.reshape(-1, 32, 1)).reshape(h.shape)
        return (torch.softmax(h, -1) * h).sum(-1).mean() + F.cross_entropy(h, idx % 32) + F.log_softmax(h, -1).mean()


def _penalty_step(model: torch.nn.Module, x: torch.Tensor, idx: torch.Tensor, ctx: Any) -> list[torch.Tensor]:
    """A WGAN-GP-style step: the input gradient's norm penalized, so every op's backward is
    differentiated once more."""
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    with ctx:
        out = model(x, idx)
        (g,) = torch.autograd.grad(out, x, create_graph=True)
        (out + (g.norm(2, dim=-1) - 1).pow(2).mean()).backward()
    return [g.detach(), x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_gradient_penalty_under_enable_agrees_with_eager(dev: str) -> None:
    torch.manual_seed(0)
    model = _Net().to(dev)
    x, idx = torch.randn(6, 24, device=dev), torch.randint(0, 50, (6,), device=dev)
    ref = _penalty_step(model, x, idx, contextlib.nullcontext())
    got = _penalty_step(model, x, idx, T.enable())
    for a, b in zip(got, ref):
        assert a is not None
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention and its logsumexp in fp32 torch ops, key heads shared by query-head groups."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _qkv(dev: str) -> list[torch.Tensor]:
    """q, k, v of 4 query heads sharing 2 key heads; head dim 16 on the interpreter, 64 on a GPU
    (the kernels' smallest there)."""
    torch.manual_seed(0)
    d = 16 if dev == "cpu" else 64
    return [torch.randn(1, h, 8, d, device=dev) for h in (4, 2, 2)]


@pytest.mark.parametrize("dev", ["cpu", GPU])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_logsumexp_has_a_gradient(dev: str, causal: bool) -> None:
    """tritonjit::flash_attention's second output is differentiable (its gradient enters
    the kernels through delta), not silently dropped."""
    base = _qkv(dev)
    q, k, v = (t.bfloat16().requires_grad_(True) for t in base)
    o, lse = tj.flash_attention(q, k, v, causal)
    w = torch.randn(lse.shape, device=dev)
    (o.float().sum() + (lse * w).sum()).backward()
    qf, kf, vf = (t.clone().requires_grad_(True) for t in base)
    of, lf = _math(qf, kf, vf, causal)
    (of.sum() + (lf * w).sum()).backward()
    for a, b in zip((q, k, v), (qf, kf, vf)):
        assert a.grad is not None and b.grad is not None
        torch.testing.assert_close(a.grad.float(), b.grad, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_attention_second_derivatives_agree_with_the_math(dev: str) -> None:
    """Double backward of the direct entry and of tritonjit::flash_attention (eager's own
    SDPA kernels raise here: their backward ops have no derivative)."""
    def grads(att: Callable, dtype: torch.dtype) -> list[torch.Tensor]:
        q, k, v = (t.to(dtype).requires_grad_(True) for t in _qkv(dev))
        o = att(q, k, v)
        (gq,) = torch.autograd.grad(o.float().pow(2).sum(), q, create_graph=True)
        second = torch.autograd.grad(gq.float().pow(2).sum(), (q, k, v))
        return [gq.float(), *(t.float() for t in second)]

    ref = grads(lambda q, k, v: _math(q, k, v, True)[0], torch.float32)
    for att in (lambda q, k, v: T.attention(q, k, v, causal=True),
                lambda q, k, v: tj.flash_attention(q, k, v, True)[0]):
        for a, b in zip(grads(att, torch.bfloat16), ref):
            torch.testing.assert_close(a, b, rtol=3e-2, atol=3e-2 * float(b.abs().max()))


def test_flash_attention_backward_reference_is_the_kernels_formula() -> None:
    """The reference that differentiates flash_attention_backward gives the math's gradients
    (grouped key heads, causal mask, a logsumexp gradient), and the op's own gradient runs."""
    q, k, v = _qkv("cpu")
    o, lse = attention._math_attention(q, k, v, True, None, None)
    do, dlse = torch.randn_like(o), torch.randn_like(lse)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    of, lf = _math(*leaves, causal=True)
    want = torch.autograd.grad((of * do).sum() + (lf * dlse).sum(), leaves)
    for a, b in zip(attention._backward_reference(do, q, k, v, o, lse, True, None, dlse), want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    qb, kb, vb = (t.bfloat16().requires_grad_(True) for t in (q, k, v))
    ob, lb = tj.flash_attention(qb, kb, vb, True)
    dq, dk, dv = tj.flash_attention_backward(do.bfloat16(), qb, kb, vb, ob, lb, True, None, dlse)
    assert dq.requires_grad
    (dq.float().sum() + dk.float().pow(2).sum() + dv.float().sum()).backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (qb, kb, vb))
