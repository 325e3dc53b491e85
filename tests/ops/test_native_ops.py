"""The C++ operator path (_native_ops.cpp) under enable(): plans made once per call key,
executed in C++ (here on the interpreter, whose launches go through Python)."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_enabled, native_ops_or_skip, needs_cxx, stats_delta
from tritonjit_ops import _native_ops, _plan, pointwise

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    yield from native_ops_enabled()



CASES = {
    "broadcast mul [1,16,32]*[1,16,1]": lambda a: a[0] * a[1][..., :1],
    "transposed mul": lambda a: a[2].t() * a[2].t(),
    "strided rotary-like add": lambda a: a[0][..., :16] + a[0][..., 16:],
    "neg of a strided slice": lambda a: -a[0][..., ::2],
    "tensor + python float": lambda a: a[0] + 1e-6,
    "tensor * python int": lambda a: a[0] * 3,
    "scalar - tensor": lambda a: 2.0 - a[0],
    "div by 0-dim tensor": lambda a: a[0] / a[3],
    "pow scalar exponent": lambda a: a[0].pow(2),
    "rsqrt": lambda a: torch.rsqrt(a[0].abs() + 1),
    "silu": lambda a: torch.nn.functional.silu(a[0]),
    "gelu tanh": lambda a: torch.nn.functional.gelu(a[0], approximate="tanh"),
    "where": lambda a: torch.where(a[0] > 0, a[0], a[1]),
    "maximum broadcast": lambda a: torch.maximum(a[0], a[1][:, :1, :]),
    "int tensor + int": lambda a: a[4] + 7,
    "bf16 * fp32 promotes": lambda a: a[0].to(torch.bfloat16) * a[1],
    "mean keepdim (RMSNorm's)": lambda a: a[0].pow(2).mean(-1, keepdim=True),
    "sum over a middle dim": lambda a: a[0].sum(1),
    "sum of a transposed view": lambda a: a[2].t().sum(-1),
    "full mean": lambda a: a[2].mean(),
    "amax": lambda a: torch.amax(a[0], dim=(1, 2)),
    "argmax": lambda a: torch.argmax(a[2], dim=0),
    "argmin full": lambda a: torch.argmin(a[2]),
    "softmax": lambda a: torch.softmax(a[0], dim=-1),
    "log_softmax over dim 1": lambda a: torch.log_softmax(a[0], dim=1),
    "layer_norm": lambda a: torch.nn.functional.layer_norm(a[0], (32,), a[1][0, 0], a[1][0, 1]),
    "group_norm": lambda a: torch.nn.functional.group_norm(a[0].transpose(1, 2), 4),
    "linear (mm, transposed weight)": lambda a: torch.nn.functional.linear(a[0], a[2][:, :8].t().contiguous().t()[:4]
                                                                          .repeat(1, 4)),
    "linear with bias (addmm)": lambda a: torch.nn.functional.linear(a[0][0], a[1][0, :8], a[1][0, 8, :8]),
    "addmm beta 0 alpha 2": lambda a: torch.addmm(a[1][0, 0, :8], a[0][0], a[1][0].t()[:, :8], beta=0, alpha=2),
    "baddbmm (ALiBi scores)": lambda a: torch.baddbmm(a[2][:4, :4].unsqueeze(1), a[0].view(4, 4, 32),
                                                     a[1].view(4, 4, 32).transpose(1, 2), alpha=0.125),
    "bmm": lambda a: torch.bmm(a[0].transpose(0, 1)[:4], a[1].transpose(0, 1)[:4].transpose(1, 2)),
    "split-K mm": lambda a: torch.mm(a[0][0, :4].repeat(1, 32), a[1].reshape(-1).repeat(32).reshape(1024, 16)),
}


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 16, 32, generator=g), torch.randn(1, 16, 32, generator=g), torch.randn(8, 12, generator=g),
            torch.tensor(3.0), torch.randint(-5, 5, (4, 6), generator=g))


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_eager_and_runs_in_cpp(native, case):
    args = _inputs()
    T.disable()
    ref = CASES[case](args)
    T.enable(wait_native=True)
    before = native.stats()
    got = CASES[case](args)
    first = stats_delta(before, native.stats())
    before = native.stats()
    again = CASES[case](args)
    second = stats_delta(before, native.stats())
    close(got, ref)
    close(again, ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert first["python_calls"] == second["python_calls"] == 0, f"{case}: a call went to the Python implementation"
    assert second["plans_made"] == 0 and second["plan_hits"] == first["plan_hits"] >= 1


def test_scalar_values_are_runtime_arguments(native):
    x, y = torch.randn(64), torch.randn(64)
    # the call keys, planned once (a Scalar's key says whether it is 0 or 1, nothing more)
    x * 2.0, torch.add(x, y, alpha=5), torch.add(x, y, alpha=1)
    before = native.stats()
    got = [torch.add(x, y, alpha=alpha) for alpha in (1, 2, 3)] + [x * c for c in (0.5, 1.5, -2.0)]
    d = stats_delta(before, native.stats())
    assert d["plans_made"] == 0 and d["plan_hits"] == 6  # the values are not part of the key
    T.disable()
    want = [x + alpha * y for alpha in (1, 2, 3)] + [x * c for c in (0.5, 1.5, -2.0)]
    T.enable(wait_native=True)
    for g, w in zip(got, want):
        close(g, w)


def test_calls_tritonjit_cannot_take_go_on_to_aten_as_in_eager(native):
    """Under enable() a model keeps working where eager works: a call no plan and no Python
    implementation of tritonjit takes (complex numbers, neg of uint8) gets aten's own
    kernel, below enable()'s. (Not exp of bools: aten's kernel casts them to float with
    _to_copy, which tritonjit routes.)"""
    z, b = torch.tensor([1 + 2j, 3 - 1j]), torch.tensor([1, 200], dtype=torch.uint8)
    T.disable()
    want = [z + z, torch.neg(b)]
    T.enable(wait_native=True)
    before = native.stats()
    got = [z + z, torch.neg(b)]
    d = stats_delta(before, native.stats())
    assert d["aten_calls"] == 2 and d["launches"] == 0
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "minimum"])
def test_bool_arithmetic_is_logic(native, op):
    a = torch.tensor([[True, False, True, False]])
    b = torch.tensor([[True], [False]])
    T.disable()
    want = getattr(torch, op)(a, b)
    T.enable(wait_native=True)
    before = native.stats()
    got = getattr(torch, op)(a, b)
    assert stats_delta(before, native.stats())["python_calls"] == 0
    assert got.dtype == torch.bool and torch.equal(got, want)


def test_errors_are_eagers(native):
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        torch.randn(3, 4) + torch.randn(5)
    with pytest.raises(IndexError, match="index out of range"):  # CPU indices: checked on the host
        torch.nn.functional.embedding(torch.tensor([[0, 9]]), torch.randn(4, 3))


def test_autograd_through_the_cpp_path(native):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    (torch.sigmoid(x * w) + x).sum().backward()
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    T.disable()
    (torch.sigmoid(xr * wr) + xr).sum().backward()
    T.enable(wait_native=True)
    close(x.grad, xr.grad)
    close(w.grad, wr.grad)


def test_python_executor_runs_the_same_plans():
    x, y = torch.randn(2, 3, 4), torch.randn(4)
    p = pointwise.plan_binary("sub", x.transpose(0, 1), y, 2)
    close(_plan.run(p, [x.transpose(0, 1), y, 2]), x.transpose(0, 1) - 2 * y)
    assert pointwise.plan_binary("add", torch.tensor([1 + 1j]), torch.tensor([2j])).aten  # complex: aten's kernel


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_matches_eager_and_runs_in_cpp(case, dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native_ops_or_skip()
    if case.startswith("arg") and dtype == torch.bfloat16:
        pytest.skip("bf16 rounding makes ties, whose index aten does not define")
    args = [a.to("cuda") if a.dim() else a for a in _inputs()]  # the 0-dim stays a CPU scalar
    args = [a.to(dtype) if a.is_floating_point() and a.dim() else a for a in args]
    ref = CASES[case](args)
    with T.enable(wait_native=True):
        CASES[case](args)  # plans made, variants compiled
        before = _native_ops.stats()
        got = CASES[case](args)
        d = stats_delta(before, _native_ops.stats())
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    close(got, ref, **tol)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] >= 1


TJ_CASES = {
    "add": (lambda a: torch.ops.tritonjit.add(a[0], a[1][..., :1], alpha=2), lambda a: a[0] + 2 * a[1][..., :1]),
    "softmax": (lambda a: torch.ops.tritonjit.softmax(a[0], -1), lambda a: torch.softmax(a[0], -1)),
    "log_softmax fp64 out": (lambda a: torch.ops.tritonjit.log_softmax(a[0], 1, torch.float64),
                             lambda a: torch.log_softmax(a[0].double(), 1)),
    "rms_norm": (lambda a: torch.ops.tritonjit.rms_norm(a[0], [32], a[1][0, 0], 1e-6),
                 lambda a: torch.nn.functional.rms_norm(a[0], (32,), a[1][0, 0], 1e-6)),
    "layer_norm": (lambda a: torch.ops.tritonjit.layer_norm(a[0], [32], a[1][0, 0], a[1][0, 1], 1e-5),
                   lambda a: torch.nn.functional.layer_norm(a[0], (32,), a[1][0, 0], a[1][0, 1], 1e-5)),
    "group_norm": (lambda a: torch.ops.tritonjit.group_norm(a[0].transpose(1, 2), 4),
                   lambda a: torch.nn.functional.group_norm(a[0].transpose(1, 2), 4)),
    "sum keepdim": (lambda a: torch.ops.tritonjit.sum(a[0], [1], True), lambda a: a[0].sum(1, keepdim=True)),
    "where": (lambda a: torch.ops.tritonjit.where(a[0] > 0, a[0], a[1]), lambda a: torch.where(a[0] > 0, a[0], a[1])),
    "silu_and_mul halves": (lambda a: torch.ops.tritonjit.silu_and_mul(a[0]),
                            lambda a: torch.nn.functional.silu(a[0][..., :16]) * a[0][..., 16:]),
    "silu_and_mul strided": (lambda a: torch.ops.tritonjit.silu_and_mul(a[0][..., :16], a[1][..., ::2]),
                             lambda a: torch.nn.functional.silu(a[0][..., :16]) * a[1][..., ::2]),
    "fused_add_rms_norm": (lambda a: torch.ops.tritonjit.fused_add_rms_norm(a[0], a[1], a[1][0, 2], 1e-6),
                           lambda a: (torch.nn.functional.rms_norm(a[0] + a[1], (32,), a[1][0, 2], 1e-6), a[0] + a[1])),
    "rotary": (lambda a: torch.ops.tritonjit.rotary_embedding(a[0].view(1, 16, 2, 16), a[2][:, :4].repeat(2, 1),
                                                              a[2][:, 4:8].repeat(2, 1)),
               lambda a: _rotary_ref(a[0].view(1, 16, 2, 16), a[2][:, :4].repeat(2, 1), a[2][:, 4:8].repeat(2, 1))),
}


def _rotary_ref(x, cos, sin):
    r2 = cos.shape[1]
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2, rest = x[..., :r2], x[..., r2:2 * r2], x[..., 2 * r2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], -1)


@pytest.mark.parametrize("case", sorted(TJ_CASES))
def test_tritonjit_namespace_ops_run_in_cpp(case):
    native_ops_or_skip()
    from tritonjit_ops import _registry

    assert _registry._TritonjitOps.handle is not None
    op, ref = TJ_CASES[case]
    args = _inputs()
    want = ref(args)
    op(args)
    before = _native_ops.stats()
    got = op(args)
    d = stats_delta(before, _native_ops.stats())
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        close(g, w, rtol=1e-5, atol=1e-5)
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] >= 1


def test_cleared_plans_are_planned_again(native, monkeypatch):
    """clear_plans(ops) forgets those operators' cached plans and no others; matmul.clear_plans()
    forgets mm's (a measured choice of aten's kernel is decided again, not kept in C++)."""
    x, y = torch.randn(5, 9), torch.randn(5, 9)
    a, b = torch.randn(6, 10), torch.randn(10, 3)

    def planned(fn):
        before = native.stats()
        fn()
        return stats_delta(before, native.stats())["plans_made"]

    planned(lambda: torch.sub(x, y))
    assert planned(lambda: torch.sub(x, y)) == 0
    _native_ops.clear_plans(["mul.Tensor"])
    assert planned(lambda: torch.sub(x, y)) == 0
    _native_ops.clear_plans(["sub.Tensor"])
    assert planned(lambda: torch.sub(x, y)) == 1
    _native_ops.clear_plans()
    assert planned(lambda: torch.sub(x, y)) == 1

    from tritonjit_ops import matmul

    monkeypatch.setenv("TRITONJIT_OPS_MM_ATEN", "always")
    before = native.stats()
    torch.mm(a, b)
    assert stats_delta(before, native.stats())["aten_calls"] == 1
    monkeypatch.setenv("TRITONJIT_OPS_MM_ATEN", "never")
    before = native.stats()
    torch.mm(a, b)
    assert stats_delta(before, native.stats())["aten_calls"] == 1  # the cached plan: still aten's
    T.clear_policies()  # the public form: mm's plans and SDPA's routes
    before = native.stats()
    got = torch.mm(a, b)
    d = stats_delta(before, native.stats())
    assert d["aten_calls"] == 0 and d["launches"] >= 1 and d["plans_made"] == 1
    close(got, (a.double() @ b.double()).float(), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("TRITONJIT_OPS_MM_ATEN", "always")
    matmul.clear_plans()
    before = native.stats()
    torch.mm(a, b)
    assert stats_delta(before, native.stats())["aten_calls"] == 1


def test_aten_plans_call_atens_own_kernel(native, monkeypatch):
    """A plan may give a call to aten's own kernel (where it measured faster): the C++ path
    calls it directly, although enable() holds the dispatcher's entry."""
    monkeypatch.setenv("TRITONJIT_OPS_MM_ATEN", "always")
    g = torch.Generator().manual_seed(3)
    a, b, bias = torch.randn(7, 13, generator=g), torch.randn(13, 5, generator=g), torch.randn(5, generator=g)
    x, y = torch.randn(3, 7, 13, generator=g), torch.randn(3, 13, 5, generator=g)
    before = native.stats()
    got = [torch.mm(a, b), torch.addmm(bias, a, b, beta=0.5, alpha=2), torch.bmm(x, y),
           torch.baddbmm(bias, x, y, alpha=0.5)]
    d = stats_delta(before, native.stats())
    assert d["aten_calls"] == 4 and d["launches"] == 0 and d["python_calls"] == 0
    T.disable()
    want = [torch.mm(a, b), torch.addmm(bias, a, b, beta=0.5, alpha=2), torch.bmm(x, y),
            torch.baddbmm(bias, x, y, alpha=0.5)]
    T.enable(wait_native=True)
    for gt, w in zip(got, want):
        close(gt, w, rtol=1e-5, atol=1e-5)
    # what a planner times its launches against: aten's kernel below enable()'s, the
    # arguments in schema order (beta, alpha after the tensors)
    close(native.module().aten("baddbmm", bias, x, y, 1.0, 0.5), want[3], rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="times mm, bmm, addmm and baddbmm, not mv"):
        native.module().aten("mv", a, b[:, 0])
    with pytest.raises(RuntimeError, match="C\\+\\+ operator path only"):
        _plan.run(_plan.aten_plan(), [a, b])


def test_an_fp32_mm_plan_follows_allow_tf32(native):
    """An fp32 mm's plan bakes in the input precision that torch.backends.cuda.matmul.allow_tf32
    selects (tf32 or ieee): the C++ key holds the flag (_plan.tf32_keyed), so a plan made before
    the flag changed does not serve after it; a 16-bit mm's key holds it too, harmlessly."""
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    flag = torch.backends.cuda.matmul.allow_tf32
    try:
        made = []
        for allow in (False, True, False, True):
            torch.backends.cuda.matmul.allow_tf32 = allow
            before = native.stats()
            got = torch.mm(a, b)
            made.append(stats_delta(before, native.stats())["plans_made"])
            close(got, a @ b)
        assert made[:2] == [1, 1] or made[:2] == [0, 1], made  # the first may exist from another test
        assert made[2:] == [0, 0], made  # each flag's plan made once, then found
    finally:
        torch.backends.cuda.matmul.allow_tf32 = flag
