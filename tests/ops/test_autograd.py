"""Gradients on every path: the direct entries (``tritonjit_ops.rms_norm``), the
``torch.ops.tritonjit`` operators and aten's operators under ``enable()`` give eager's
gradients; aten's backward operators are routed to tritonjit's backward kernels; an op
without a backward raises a clear error when differentiated, never a silent None.

On a machine without a GPU everything runs through Triton's interpreter on CPU tensors;
the tests marked gpu repeat the per-op cases on CUDA and run the models benchmark's
training step in bf16 (``pytest -q -m gpu tests/ops/test_autograd.py``).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from typing import Any, Callable, Iterator

import pytest
import torch
import tritonjit_ops as T
from _util import bench_module
from tritonjit_ops import _native_ops, autograd

F = torch.nn.functional
tj = torch.ops.tritonjit


class Case:
    """Float inputs (made to require grad), the op through the direct entry and through
    torch.ops.tritonjit, and the eager reference (which enable() routes)."""

    def __init__(self, inputs: Callable[[str], tuple], direct: Callable, ops: Callable | None, ref: Callable):
        self.inputs, self.direct, self.ops, self.ref = inputs, direct, ops, ref


def _r(dev: str, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, device=dev)


_IDX = [[0, 2, 2], [5, 1, 0]]
_TARGET = [1, -100, 3, 0]
_SEL = [0, 3, 3]
_GATHER = [[0, 3], [1, 1], [7, 2], [4, 4]]


def _cases() -> dict[str, Case]:
    ln = (40,)
    c: dict[str, Case] = {
        "rms_norm": Case(lambda d: (_r(d, 3, 40), _r(d, 40)), lambda x, w: T.rms_norm(x, ln, w, 1e-6),
                         lambda x, w: tj.rms_norm(x, list(ln), w, 1e-6), lambda x, w: F.rms_norm(x, ln, w, 1e-6)),
        "rms_norm no weight, default eps": Case(lambda d: (_r(d, 2, 3, 8),), lambda x: T.rms_norm(x, (8,)),
                                                lambda x: tj.rms_norm(x, [8]), lambda x: F.rms_norm(x, (8,))),
        "layer_norm": Case(lambda d: (_r(d, 4, 40), _r(d, 40), _r(d, 40)), lambda x, w, b: T.layer_norm(x, ln, w, b),
                           lambda x, w, b: tj.layer_norm(x, list(ln), w, b), lambda x, w, b: F.layer_norm(x, ln, w, b)),
        "layer_norm long rows": Case(lambda d: (_r(d, 2, 2500), _r(d, 2500)),
                                     lambda x, w: T.layer_norm(x, (2500,), w), None,
                                     lambda x, w: F.layer_norm(x, (2500,), w)),
        # more rows than programs: each program sums several rows' weight gradients, the last one partly masked
        "layer_norm many rows": Case(lambda d: (_r(d, 37, 24), _r(d, 24), _r(d, 24)),
                                     lambda x, w, b: T.layer_norm(x, (24,), w, b),
                                     lambda x, w, b: tj.layer_norm(x, [24], w, b),
                                     lambda x, w, b: F.layer_norm(x, (24,), w, b)),
        "fused_add_rms_norm many rows": Case(lambda d: (_r(d, 37, 24), _r(d, 37, 24), _r(d, 24)),
                                             lambda x, r, w: T.fused_add_rms_norm(x, r, w, 1e-6),
                                             lambda x, r, w: tj.fused_add_rms_norm(x, r, w, 1e-6),
                                             lambda x, r, w: (F.rms_norm(x + r, (24,), w, 1e-6), x + r)),
        # rows past the one-pass limits (2048 / 1024 on CPU, 8192 / 16384 on a GPU): the looping kernels
        "rms_norm long rows": Case(lambda d: (_r(d, 19, 9000), _r(d, 9000)), lambda x, w: T.rms_norm(x, (9000,), w),
                                   lambda x, w: tj.rms_norm(x, [9000], w), lambda x, w: F.rms_norm(x, (9000,), w)),
        "log_softmax long rows": Case(lambda d: (_r(d, 2, 17000),), lambda x: T.log_softmax(x, -1),
                                      lambda x: tj.log_softmax(x, -1), lambda x: torch.log_softmax(x, -1)),
        "fused_add_rms_norm": Case(lambda d: (_r(d, 3, 16), _r(d, 3, 16), _r(d, 16)),
                                   lambda x, r, w: T.fused_add_rms_norm(x, r, w, 1e-6),
                                   lambda x, r, w: tj.fused_add_rms_norm(x, r, w, 1e-6),
                                   lambda x, r, w: (F.rms_norm(x + r, (16,), w, 1e-6), x + r)),
        "group_norm": Case(lambda d: (_r(d, 2, 4, 3), _r(d, 4), _r(d, 4)), lambda x, w, b: T.group_norm(x, 2, w, b),
                           lambda x, w, b: tj.group_norm(x, 2, w, b), lambda x, w, b: F.group_norm(x, 2, w, b)),
        "softmax": Case(lambda d: (_r(d, 3, 5, 6),), lambda x: T.softmax(x, 1), lambda x: tj.softmax(x, 1),
                        lambda x: torch.softmax(x, 1)),
        "log_softmax": Case(lambda d: (_r(d, 4, 9),), lambda x: T.log_softmax(x, -1), lambda x: tj.log_softmax(x, -1),
                            lambda x: torch.log_softmax(x, -1)),
        "cross_entropy": Case(lambda d: (_r(d, 4, 11),),
                              lambda x: T.cross_entropy(x, torch.tensor(_TARGET, device=x.device)),
                              lambda x: tj.cross_entropy(x, torch.tensor(_TARGET, device=x.device)),
                              lambda x: F.cross_entropy(x, torch.tensor(_TARGET, device=x.device))),
        "cross_entropy sum": Case(lambda d: (_r(d, 4, 11),),
                                  lambda x: T.cross_entropy(x, torch.tensor(_TARGET, device=x.device), -100, "sum"),
                                  lambda x: tj.cross_entropy(x, torch.tensor(_TARGET, device=x.device), -100, "sum"),
                                  lambda x: F.cross_entropy(x, torch.tensor(_TARGET, device=x.device),
                                                            reduction="sum")),
        "silu_and_mul split": Case(lambda d: (_r(d, 3, 2, 10),), lambda g: T.silu_and_mul(g),
                                   lambda g: tj.silu_and_mul(g), lambda g: F.silu(g[..., :5]) * g[..., 5:]),
        "silu_and_mul pair": Case(lambda d: (_r(d, 3, 7), _r(d, 3, 7)), T.silu_and_mul, tj.silu_and_mul,
                                  lambda g, u: F.silu(g) * u),
        "rotary_embedding": Case(lambda d: (_r(d, 2, 3, 2, 8),),
                                 lambda x: T.rotary_embedding(x, *_cos_sin(x)),
                                 lambda x: tj.rotary_embedding(x, *_cos_sin(x)), lambda x: _rotary_ref(x)),
        "gelu": Case(lambda d: (_r(d, 5, 6),), T.gelu, tj.gelu, F.gelu),
        "gelu tanh": Case(lambda d: (_r(d, 5, 6),), lambda x: T.gelu(x, "tanh"),
                          lambda x: tj.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
        "silu": Case(lambda d: (_r(d, 5, 6),), T.silu, tj.silu, F.silu),
        "sigmoid": Case(lambda d: (_r(d, 5, 6),), T.sigmoid, tj.sigmoid, torch.sigmoid),
        "tanh": Case(lambda d: (_r(d, 5, 6),), T.tanh, tj.tanh, torch.tanh),
        "relu": Case(lambda d: (_r(d, 5, 6),), T.relu, tj.relu, torch.relu),
        "embedding": Case(lambda d: (_r(d, 6, 4),), lambda w: T.embedding(w, torch.tensor(_IDX, device=w.device)),
                          lambda w: tj.embedding(w, torch.tensor(_IDX, device=w.device)),
                          lambda w: F.embedding(torch.tensor(_IDX, device=w.device), w)),
        "embedding padding_idx": Case(lambda d: (_r(d, 6, 4),),
                                      lambda w: T.embedding(w, torch.tensor(_IDX, device=w.device), 2), None,
                                      lambda w: F.embedding(torch.tensor(_IDX, device=w.device), w, padding_idx=2)),
        "mm": Case(lambda d: (_r(d, 3, 5), _r(d, 5, 4)), T.mm, tj.mm, torch.mm),
        "bmm": Case(lambda d: (_r(d, 2, 3, 5), _r(d, 2, 5, 4)), T.bmm, tj.bmm, torch.bmm),
        "addmm": Case(lambda d: (_r(d, 4), _r(d, 3, 5), _r(d, 5, 4)),
                      lambda c, a, b: T.addmm(c, a, b, beta=0.5, alpha=2),
                      lambda c, a, b: tj.addmm(c, a, b, beta=0.5, alpha=2),
                      lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2)),
        "baddbmm": Case(lambda d: (_r(d, 2, 1, 4), _r(d, 2, 3, 5), _r(d, 2, 5, 4)),
                        lambda c, a, b: T.baddbmm(c, a, b, beta=0.5, alpha=2),
                        lambda c, a, b: tj.baddbmm(c, a, b, beta=0.5, alpha=2),
                        lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2)),
        "add broadcast alpha": Case(lambda d: (_r(d, 3, 4), _r(d, 4)), lambda x, y: T.add(x, y, alpha=2),
                                    lambda x, y: tj.add(x, y, alpha=2), lambda x, y: torch.add(x, y, alpha=2)),
        "sub": Case(lambda d: (_r(d, 3, 4), _r(d, 3, 4)), T.sub, tj.sub, torch.sub),
        "mul": Case(lambda d: (_r(d, 3, 4), _r(d, 1, 4)), T.mul, tj.mul, torch.mul),
        "div": Case(lambda d: (_r(d, 3, 4), _r(d, 3, 4).abs() + 0.5), T.div, tj.div, torch.div),
        "maximum": Case(lambda d: (_r(d, 3, 4), _r(d, 3, 4)), T.maximum, tj.maximum, torch.maximum),
        "pow": Case(lambda d: (_r(d, 3, 4).abs() + 0.5, _r(d, 3, 4)), T.pow, tj.pow, torch.pow),
        "exp log sqrt rsqrt": Case(lambda d: (_r(d, 3, 4).abs() + 0.5,),
                                   lambda x: T.exp(x) + T.log(x) + T.sqrt(x) + T.rsqrt(x) - T.neg(T.abs(x)),
                                   lambda x: tj.exp(x) + tj.log(x) + tj.sqrt(x) + tj.rsqrt(x) - tj.neg(tj.abs(x)),
                                   lambda x: x.exp() + x.log() + x.sqrt() + x.rsqrt() + x.abs()),
        "where": Case(lambda d: (_r(d, 3, 4), _r(d, 3, 4)), lambda x, y: T.where(x > 0, x, y),
                      lambda x, y: tj.where(x > 0, x, y), lambda x, y: torch.where(x > 0, x, y)),
        "sum mean": Case(lambda d: (_r(d, 3, 4, 5),), lambda x: T.sum(x, [1]) + T.mean(x, [1]),
                         lambda x: tj.sum(x, [1]) + tj.mean(x, [1]), lambda x: x.sum(1) + x.mean(1)),
        "amax amin": Case(lambda d: (_r(d, 3, 4),), lambda x: T.amax(x, [1]) + T.amin(x, [0]).sum(),
                          lambda x: tj.amax(x, [1]) + tj.amin(x, [0]).sum(),
                          lambda x: x.amax(1) + x.amin(0).sum()),
        "index_select": Case(lambda d: (_r(d, 3, 8),), lambda x: T.index_select(x, 1, torch.tensor(_SEL, device=x.device)),
                             lambda x: tj.index_select(x, 1, torch.tensor(_SEL, device=x.device)),
                             lambda x: torch.index_select(x, 1, torch.tensor(_SEL, device=x.device))),
        "gather": Case(lambda d: (_r(d, 4, 8),), lambda x: T.gather(x, 1, torch.tensor(_GATHER, device=x.device)),
                       lambda x: tj.gather(x, 1, torch.tensor(_GATHER, device=x.device)),
                       lambda x: torch.gather(x, 1, torch.tensor(_GATHER, device=x.device))),
    }
    return c


def _cos_sin(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ang = torch.rand(x.shape[-3], 3, generator=g).to(x.device) * 6
    return ang.cos(), ang.sin()  # rotary over 6 of 8 features: the tail passes through


def _rotary_ref(x: torch.Tensor) -> torch.Tensor:
    cos, sin = _cos_sin(x)
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2, tail = x[..., 0:3], x[..., 3:6], x[..., 6:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, tail], -1)


CASES = _cases()


def _grads(fn: Callable, inputs: tuple) -> tuple[Any, list[torch.Tensor]]:
    xs = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    g = torch.Generator().manual_seed(7)
    loss = sum((o.float() * torch.randn(o.shape, generator=g).to(o.device)).sum() for o in outs)
    return out, list(torch.autograd.grad(loss, xs))


def _check(name: str, path: str, dev: str) -> None:
    case = CASES[name]
    torch.manual_seed(0)
    inputs = case.inputs(dev)
    ref_out, ref = _grads(case.ref, inputs)
    if path == "direct":
        out, got = _grads(case.direct, inputs)
    elif path == "ops":
        if case.ops is None:
            pytest.skip(f"{name}: no torch.ops.tritonjit form")
        out, got = _grads(case.ops, inputs)
    else:
        with T.enable(include="all", wait_native=True):
            out, got = _grads(case.ref, inputs)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.requires_grad for o in outs), f"{name} via {path}: the output does not require grad"
    tol = dict(rtol=1e-4, atol=1e-4) if dev == "cpu" else dict(rtol=2e-3, atol=2e-3)  # mm may use TF32 on a GPU
    for k, (a, b) in enumerate(zip(got, ref)):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, k=k: f"{name} via {path}, input {k}: {m}")


@pytest.mark.parametrize("path", ["direct", "ops", "enable"])
@pytest.mark.parametrize("name", list(CASES))
def test_gradients_agree_with_eager(name: str, path: str) -> None:
    _check(name, path, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["direct", "ops", "enable"])
@pytest.mark.parametrize("name", list(CASES))
def test_gradients_agree_with_eager_gpu(name: str, path: str) -> None:
    _check(name, path, "cuda")


def test_float64_gradcheck_of_the_fused_backward_kernels() -> None:
    """The Triton backward kernels against finite differences (fp64 inputs; the kernels
    compute in fp32, hence the step and tolerance)."""
    d = torch.float64
    x, w = torch.randn(3, 8, dtype=d, requires_grad=True), torch.randn(8, dtype=d, requires_grad=True)
    kw = dict(eps=1e-3, atol=3e-3, rtol=3e-3)
    assert torch.autograd.gradcheck(lambda x, w: tj.rms_norm(x, [8], w, 1e-6), (x, w), **kw)
    assert torch.autograd.gradcheck(lambda x, w: T.layer_norm(x, (8,), w, w), (x, w), **kw)
    assert torch.autograd.gradcheck(lambda x: T.log_softmax(x, 0), (x,), **kw)
    assert torch.autograd.gradcheck(lambda x: tj.silu_and_mul(x), (x,), **kw)
    assert torch.autograd.gradcheck(lambda x: T.cross_entropy(x, torch.tensor([1, -100, 7])), (x,), **kw)


def test_no_grad_calls_stay_off_autograd() -> None:
    x, w = torch.randn(2, 8, requires_grad=True), torch.randn(8)
    assert not T.rms_norm(x.detach(), (8,), w).requires_grad
    with torch.no_grad():
        assert not T.rms_norm(x, (8,), w).requires_grad
    assert T.rms_norm(x, (8,), w).requires_grad
    assert T.rms_norm(x.detach(), (8,), weight=w.requires_grad_()).requires_grad  # a keyword input counts too


# ------------------------------------------------------------------ aten's backward ops under enable()
def _aten_calls(dev: str) -> dict[str, tuple[Callable, tuple]]:
    """aten backward overload -> (the op, arguments as aten's autograd passes them)."""
    g = torch.Generator().manual_seed(1)

    def r(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=g).to(dev)

    x, dy, w, b = r(4, 24), r(4, 24), r(24), r(24)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [24], w, b, 1e-5)
    rms_rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    a = torch.ops.aten
    idx = torch.tensor([[1, 2, 1], [0, 4, 2]], device=dev)
    return {
        "_softmax_backward_data": (a._softmax_backward_data, (dy, torch.softmax(x, 1), 1, torch.float32)),
        "_log_softmax_backward_data": (a._log_softmax_backward_data, (dy, torch.log_softmax(x, 0), 0, torch.float32)),
        "native_layer_norm_backward": (a.native_layer_norm_backward, (dy, x, [24], mean, rstd, w, b, [True] * 3)),
        "native_layer_norm_backward (mask)": (a.native_layer_norm_backward,
                                              (dy, x, [24], mean, rstd, w, b, [True, False, True])),
        "_fused_rms_norm_backward": (a._fused_rms_norm_backward, (dy, x, [24], rms_rstd, w, [True, True])),
        "embedding_dense_backward": (a.embedding_dense_backward, (r(2, 3, 5), idx, 6, 2, False)),
        "embedding_dense_backward (freq)": (a.embedding_dense_backward, (r(2, 3, 5), idx, 6, -1, True)),
        "silu_backward": (a.silu_backward, (dy, x)),
        "gelu_backward": (a.gelu_backward, (dy, x)),
        "sigmoid_backward": (a.sigmoid_backward, (dy, x.sigmoid())),
        "tanh_backward": (a.tanh_backward, (dy, x.tanh())),
        "threshold_backward": (a.threshold_backward, (dy, x, 0.25)),
        # inputs at both bounds (zero there, as aten); NaN inputs are left out: aten's CPU kernel
        # zeroes them in its vector lanes and passes the gradient in its scalar tail (CUDA passes it)
        "hardtanh_backward": (a.hardtanh_backward, (dy, x.clamp(-1, 1).index_fill(
            1, torch.tensor([0, 5], device=dev), 1.0).index_fill(1, torch.tensor([3], device=dev), -1.0), -1.0, 1.0)),
        # beta 2, threshold 1.5: x * beta on both sides of the threshold, and at it (dy passes
        # only above it, as aten's kernel)
        "native_group_norm_backward": (a.native_group_norm_backward, _group_norm_backward_args(r)),
        "log_sigmoid_backward": (a.log_sigmoid_backward, (dy, x, a.log_sigmoid_forward(x)[1])),
        "native_group_norm_backward (mask)": (a.native_group_norm_backward,
                                              _group_norm_backward_args(r, [True, False, True])),
        "softplus_backward": (a.softplus_backward, (dy, (x * 4).index_fill(1, torch.tensor([2], device=dev), 0.75),
                                                    2.0, 1.5)),
    }


def _group_norm_backward_args(r: Callable[..., torch.Tensor], mask: list[bool] | None = None) -> tuple:
    """(dy, x, mean, rstd, weight, N, C, HxW, group, mask) of a group norm over [3, 6, 5] in 3 groups."""
    x, w, b = r(3, 6, 5), r(6), r(6)
    _, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, 3, 6, 5, 3, 1e-5)
    return (r(3, 6, 5), x, mean, rstd, w, 3, 6, 5, 3, mask or [True, True, True])


def _aten_reference(name: str, op: Callable, args: tuple) -> Any:
    if name == "_fused_rms_norm_backward" and args[1].is_cpu:  # aten has no CPU kernel: autograd's answer
        dy, x, ns, _, w, _ = args
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        return torch.autograd.grad(F.rms_norm(xs, ns, ws, 1e-6), (xs, ws), dy)
    return op(*args)


def _same(got: Any, ref: Any, what: str) -> None:
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(got) == len(ref), what
    for a, b in zip(got, ref):
        assert (a is None) == (b is None), f"{what}: {a} vs {b}"
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("name", list(_aten_calls("cpu")))
def test_aten_backward_ops_are_routed_and_agree(name: str) -> None:
    op, args = _aten_calls("cpu")[name]
    ref = _aten_reference(name.split(" ")[0], op, args)
    # the Python implementation (enable()'s kernels until the C++ path is built)
    _same(autograd.ATEN_BACKWARD[name.split(" ")[0]](*args), ref, f"{name} (Python)")
    if _native_ops.module(wait=True) is None:
        pytest.skip(f"C++ operator path: {_native_ops.native().reason}")
    before = _native_ops.stats()
    with T.enable(include="all", wait_native=True):
        assert name.split(" ")[0] in T.enabled_ops()
        got = op(*args)
    after = _native_ops.stats()
    served = (after["plan_hits"] + after["python_calls"]) - (before["plan_hits"] + before["python_calls"])
    # at least the op itself; a Python implementation may call other routed ops (zeros, index_add)
    assert served >= 1 and after["aten_calls"] == before["aten_calls"], (name, before, after)
    _same(got, ref, f"{name} (C++ path)")


def test_routed_fused_rms_norm_brings_its_cpu_backward() -> None:
    """aten has no CPU kernel of _fused_rms_norm_backward: routing the forward alone would
    make rms_norm's gradient fail, so enable() routes the backward with it on CPU."""
    x, w = torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    ref = torch.autograd.grad(F.rms_norm(x, (8,), w, 1e-6).sum(), (x, w))
    with T.enable(include=["_fused_rms_norm"]):
        assert "_fused_rms_norm_backward" in T.enabled_ops()
        got = torch.autograd.grad(F.rms_norm(x, (8,), w, 1e-6).sum(), (x, w))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ no backward: a clear error
def test_an_op_without_backward_raises_naming_it() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    lib = torch.library.Library("tritonjit_test_nobwd", "DEF")
    lib.define("double(Tensor x) -> Tensor")
    lib.impl("double", lambda t: t * 2, "CPU")
    autograd.register_grads(lib, [("double", "(Tensor x) -> Tensor")])
    with pytest.raises(NotImplementedError, match="tritonjit_test_nobwd::double has no backward"):
        torch.ops.tritonjit_test_nobwd.double(x).sum().backward()

    ns: dict[str, Any] = {"double": lambda t: t * 2}
    autograd.wrap_public(ns, ["double"])
    with pytest.raises(NotImplementedError, match="tritonjit_ops.double has no backward"):
        ns["double"](x).sum().backward()


def test_rotary_refuses_gradients_of_cos_and_sin() -> None:
    x = torch.randn(1, 2, 2, 4, requires_grad=True)
    cos, sin = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2)
    with pytest.raises(NotImplementedError, match="rotary_embedding has no gradient for cos and sin"):
        T.rotary_embedding(x, cos, sin).sum().backward()


def test_out_argument_with_grad_is_refused() -> None:
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="out= does not support automatic differentiation"):
        T.exp(x, out=torch.empty(4))


# ------------------------------------------------------------------ enable() is quiet
@pytest.mark.parametrize("native", ["0", "1"])
def test_enable_prints_no_override_warning(native: str) -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        import tritonjit_ops as T
        with T.enable(include="all", wait_native=True):
            pass
        T.enable(include="all")
        T.disable()
    """)
    env = {**os.environ, "TRITONJIT_OPS_NATIVE": native}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "Overriding a previously registered kernel" not in p.stderr + p.stdout


# ------------------------------------------------------------------ the models benchmark's training step
@pytest.mark.gpu
@pytest.mark.parametrize("model", ["llama", "qwen2", "gpt2", "bert"])
def test_models_training_step_bf16_gpu(model: str) -> None:
    """One training step of the benchmark's model (its GPU size, bf16, 4x256) under enable():
    eager's loss and gradients within bf16 tolerance, with most covered calls (backward ones
    included) on tritonjit kernels: the rest are the calls enable()'s measured policies give
    to aten's kernel where it is faster (large mm, TRITONJIT_OPS_MM_ATEN; SDPA,
    TRITONJIT_OPS_SDPA), which the models benchmark and the audit list."""
    pytest.importorskip("transformers")
    M = bench_module("models")
    row = M.run_case(model, "train", False, "cuda", torch.bfloat16, rounds=1, timed=False)
    assert "error" not in row, row
    assert row["loss_diff"] <= 2e-2, row
    assert row["grad_cos"] >= 0.995 and row["grad_rel"] <= 5e-2, row
    print(f"{model}: {row['covered_routed_calls']}/{row['covered_calls']} covered calls on tritonjit kernels")
    # every default-routed call ran a tritonjit kernel, except those a measured policy gave to
    # aten's kernel (mm family, SDPA: aten measured faster on that call), which the row counts
    default = set(T.default_ops())
    unexpected = {op: n - row["policy"].get(op, 0) for op, n in row["not_routed"].items()
                  if op.removeprefix("aten::") in default and n > row["policy"].get(op, 0)}
    assert not unexpected, (unexpected, row)


# ------------------------------------------------------------------ torch.compile traces the backward
def test_torch_compile_traces_the_backward_ops() -> None:
    """AOTAutograd traces the register_autograd formulas: setup_context and the
    tritonjit::*_backward ops (their fakes) are traceable, and the compiled backward agrees."""
    torch._dynamo.reset()

    def f(x, w):
        h = tj.rms_norm(x, [16], w, 1e-6)
        return tj.cross_entropy(tj.log_softmax(tj.silu_and_mul(h), -1), torch.tensor([1, 0, 7, -100]))

    x, w = torch.randn(4, 16, requires_grad=True), torch.randn(16, requires_grad=True)
    ref = torch.autograd.grad(f(x, w), (x, w))
    got = torch.autograd.grad(torch.compile(f, backend="aot_eager", fullgraph=True)(x, w), (x, w))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()


# ------------------------------------------------------------------ the C++ autograd gates
def _gates_or_skip() -> Any:
    """The C++ operator path with the tritonjit:: ops' autograd gates registered."""
    from _util import native_ops_or_skip
    from tritonjit_ops import _registry

    native_ops_or_skip()
    assert _registry._TritonjitOps.gates is not None, "C++ path ready but no autograd gates registered"
    return _registry


def _autograd_python_calls() -> int:
    return _native_ops.stats()["autograd_python_calls"]


@contextlib.contextmanager
def _python_autograd_only() -> Iterator[None]:
    """The ops' autograd as before the gates: torch.library's Python kernel on every call."""
    ops = _gates_or_skip()._TritonjitOps
    _native_ops.release(ops.gates)
    ops.gates = None
    try:
        yield
    finally:
        ops.register(_native_ops.module())


_GATED: dict[str, tuple[Callable[[], tuple], Callable, Callable]] = {
    # name: (inputs, the op, eager)
    "add": (lambda: (torch.randn(3, 8), torch.randn(3, 8)), lambda x, y: tj.add(x, y, alpha=2),
            lambda x, y: torch.add(x, y, alpha=2)),
    "rms_norm": (lambda: (torch.randn(3, 16), torch.randn(16)), lambda x, w: tj.rms_norm(x, [16], w, 1e-6),
                 lambda x, w: F.rms_norm(x, (16,), w, 1e-6)),
    "softmax": (lambda: (torch.randn(2, 3, 8),), lambda x: tj.softmax(x, -1), lambda x: torch.softmax(x, -1)),
}


def test_autograd_gates_sit_at_the_backends_autograd_key() -> None:
    registry = _gates_or_skip()
    key = registry.autograd_key(registry._KEY)
    assert key == f"Autograd{registry._KEY}"
    for op in ("add.Tensor", "rms_norm", "softmax", "silu_backward", "flash_attention"):
        table = torch._C._dispatch_dump(f"tritonjit::{op}")
        line = next(ln for ln in table.splitlines() if ln.startswith(f"{key}:"))
        assert "_native_ops.cpp" in line, (op, table)


@pytest.mark.parametrize("name", list(_GATED))
def test_autograd_gate_calls_no_python_without_grad(name: str) -> None:
    _gates_or_skip()
    inputs, op, ref = _GATED[name]
    args = inputs()
    before = _autograd_python_calls()
    out = op(*args)  # grad mode on, no input requires grad
    assert _autograd_python_calls() == before
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, ref(*args), rtol=1e-5, atol=1e-5)
    grads = tuple(a.clone().requires_grad_() for a in args)
    with torch.no_grad():  # inputs requiring grad, grad mode off
        out = op(*grads)
    assert _autograd_python_calls() == before
    assert not out.requires_grad
    torch.testing.assert_close(out, ref(*args), rtol=1e-5, atol=1e-5)
    with torch.inference_mode():
        op(*args)
    assert _autograd_python_calls() == before


@pytest.mark.parametrize("name", list(_GATED))
def test_autograd_gate_runs_the_python_kernel_with_grad(name: str) -> None:
    _gates_or_skip()
    inputs, op, ref = _GATED[name]
    args = inputs()

    def grads(fn: Callable, calls: int | None) -> tuple[torch.Tensor, ...]:
        xs = tuple(a.clone().requires_grad_() for a in args)
        before = _autograd_python_calls()
        out = fn(*xs)
        if calls is not None:
            assert _autograd_python_calls() - before == calls
        assert out.grad_fn is not None
        return torch.autograd.grad((out * torch.linspace(-1, 1, out.shape[-1])).sum(), xs)

    got = grads(op, 1)
    for a, b in zip(got, grads(ref, None)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with _python_autograd_only():
        before_gate = grads(op, 0)
    for a, b in zip(got, before_gate):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    if len(args) > 1:  # one input requiring grad is enough, in any position
        before = _autograd_python_calls()
        assert op(args[0], *(a.clone().requires_grad_() for a in args[1:])).requires_grad
        assert _autograd_python_calls() - before == 1


def test_autograd_gate_looks_into_tensor_lists() -> None:
    _gates_or_skip()
    lib = torch.library.Library("tritonjit_test_gate", "DEF")
    lib.define("first(Tensor[] xs) -> Tensor")
    lib.impl("first", lambda xs: xs[0] + xs[1], "CPU")
    autograd.register_autograd(lib, "tritonjit_test_gate::first", lambda ctx, g: [g, g],
                               lambda ctx, inputs, output: None)
    gates = _native_ops.register_gates(
        "tritonjit_test_gate", "AutogradCPU", [("first", autograd.AUTOGRAD_KERNELS["tritonjit_test_gate::first"])])
    try:
        x, y = torch.randn(4), torch.randn(4, requires_grad=True)
        before = _autograd_python_calls()
        torch.testing.assert_close(torch.ops.tritonjit_test_gate.first([x, y.detach()]), x + y.detach())
        assert _autograd_python_calls() == before
        out = torch.ops.tritonjit_test_gate.first([x, y])  # the second tensor of the list requires grad
        assert _autograd_python_calls() - before == 1
        (gy,) = torch.autograd.grad(out.sum(), y)
        torch.testing.assert_close(gy, torch.ones(4))
    finally:
        _native_ops.release(gates)
        lib._destroy()


def test_autograd_gate_gives_backward_ops_their_own_gradient() -> None:
    _gates_or_skip()
    x = torch.randn(3, 4, requires_grad=True)
    before = _autograd_python_calls()
    y = tj.silu_backward(torch.ones(3, 4), x)
    assert _autograd_python_calls() - before == 1 and y.requires_grad
    y.sum().backward()  # double backward: the vjp of double_backward.py's reference
    xe = x.detach().clone().requires_grad_(True)
    torch.autograd.grad(F.silu(xe).sum(), xe, create_graph=True)[0].sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    before = _autograd_python_calls()
    assert not tj.silu_backward(torch.ones(3, 4), x.detach()).requires_grad
    assert _autograd_python_calls() == before


def _forward_ad(fn: Callable, args: tuple, tangent: torch.Tensor) -> tuple:
    """What forward-mode AD through ``fn`` gives: (primal, tangent or None), or the error."""
    import torch.autograd.forward_ad as fwAD

    try:
        with fwAD.dual_level():
            out = fwAD.unpack_dual(fn(fwAD.make_dual(args[0], tangent), *args[1:]))
            return "result", out.primal.clone(), None if out.tangent is None else out.tangent.clone()
    except Exception as e:  # whatever the Python kernel does, the gate must do the same
        return "error", type(e), str(e)


@pytest.mark.parametrize("name", list(_GATED))
def test_autograd_gate_leaves_forward_ad_to_the_python_kernel(name: str) -> None:
    _gates_or_skip()
    inputs, op, _ = _GATED[name]
    args = inputs()
    tangent = torch.randn_like(args[0])
    before = _autograd_python_calls()
    got = _forward_ad(op, args, tangent)
    assert _autograd_python_calls() - before == 1  # a dual tensor, though nothing requires grad
    with _python_autograd_only():
        ref = _forward_ad(op, args, tangent)
    assert got[0] == ref[0] and len(got) == len(ref), (got, ref)
    for a, b in zip(got[1:], ref[1:]):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        else:
            assert a == b, (got, ref)


def test_torch_compile_traces_the_backward_ops_through_the_gates() -> None:
    _gates_or_skip()
    before = _autograd_python_calls()
    test_torch_compile_traces_the_backward_ops()
    assert _autograd_python_calls() > before  # the traced calls required grad: the Python kernel ran
