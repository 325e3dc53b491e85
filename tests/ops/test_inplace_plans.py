"""In-place pointwise ops (``x.add_(y)``, ``x.clamp_(max=7)``, ``x.masked_fill_(m, 0)``, ...) on
the C++ operator path: planned once per call key, written into ``self`` in its own strides,
and sent to the Python implementation where another argument shares self's memory in
another view (aten refuses a partial overlap; the key holds no addresses)."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import bench_module, close, index_checks_as_on_a_device, launch_arg, native_ops_enabled, needs_cxx, stats_delta
from tritonjit_ops import _plan, elementwise

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    yield from native_ops_enabled()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return {
        "x": torch.randn(6, 8, generator=g),
        "y": torch.randn(6, 8, generator=g),
        "row": torch.randn(8, generator=g),
        "col": torch.randn(6, 1, generator=g),
        "xt": torch.randn(8, 6, generator=g).t(),  # a transposed self
        "wide": torch.randn(6, 16, generator=g),  # its [:, ::2] is a strided self
        "h": torch.randn(6, 8, generator=g).to(torch.bfloat16),
        "i": torch.randint(-20, 20, (16,), generator=g),
        "mask": torch.randn(6, 1, generator=g) > 0,
        "pos": torch.rand(6, 8, generator=g) + 0.5,
    }


# name -> (the call, mutating its inputs; what it returns)
CASES = {
    "add_ tensor": lambda a: a["x"].add_(a["y"]),
    "add_ broadcast row, alpha": lambda a: a["x"].add_(a["row"], alpha=0.5),
    "sub_ scalar": lambda a: a["x"].sub_(1.25),
    "mul_ broadcast column": lambda a: a["x"].mul_(a["col"]),
    "mul_ transposed self": lambda a: a["xt"].mul_(a["y"]),
    "div_ strided self": lambda a: a["wide"][:, ::2].div_(a["pos"]),
    "div_ MoE's weight normalisation": lambda a: a["pos"].div_(a["pos"].sum(-1, keepdim=True)),
    "mul_ bf16 self by fp32 (computed in fp32, stored bf16)": lambda a: a["h"].mul_(a["y"]),
    "mul_ bf16 by a python float": lambda a: a["h"].mul_(0.125),
    "add_ same view (x += x)": lambda a: a["x"].add_(a["x"]),
    "clamp_ max (MoE's expert ids)": lambda a: a["i"].clamp_(max=7),
    "clamp_ min and max": lambda a: a["x"].clamp_(-0.5, 0.5),
    "clamp_min_": lambda a: a["x"].clamp_min_(0.0),
    "masked_fill_ broadcast mask": lambda a: a["x"].masked_fill_(a["mask"], 0.0),
    "exp_": lambda a: a["x"].exp_(),
    "neg_ transposed": lambda a: a["xt"].neg_(),
    "relu_": lambda a: a["x"].relu_(),
    "sigmoid_ bf16": lambda a: a["h"].sigmoid_(),
    "gelu_ tanh": lambda a: torch.ops.aten.gelu_(a["x"], approximate="tanh"),
    "pow_ scalar": lambda a: a["pos"].pow_(2),
    "floor_divide_ float by tensor": lambda a: a["x"].floor_divide_(a["pos"]),
    "lt_ into float self": lambda a: a["x"].lt_(a["y"]),
    "leaky_relu_": lambda a: torch.nn.functional.leaky_relu_(a["x"], 0.2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inplace_matches_eager_and_runs_in_cpp(native, case):
    T.disable()
    ref_args = _inputs()
    ref = CASES[case](ref_args)
    T.enable(wait_native=True)
    args = _inputs()
    versions = {k: v._version for k, v in args.items()}
    before = native.stats()
    got = CASES[case](args)
    first = stats_delta(before, native.stats())
    args2 = _inputs()
    before = native.stats()
    again = CASES[case](args2)
    second = stats_delta(before, native.stats())
    close(got, ref)
    close(again, ref)
    for k in ref_args:  # every input mutated as eager mutates it, and none other
        close(args[k], ref_args[k])
    assert got.dtype == ref.dtype and got.shape == ref.shape and got.stride() == ref.stride()
    assert any(got.data_ptr() == v.data_ptr() for v in args.values()), "the result is not self"
    assert any(args[k]._version > versions[k] for k in args), "no version counter moved"
    assert first["python_calls"] == second["python_calls"] == 0, f"{case}: a call went to the Python implementation"
    assert second["plans_made"] == 0 and second["plan_hits"] >= 1


def test_partial_overlap_on_a_cached_key_is_refused_as_aten_does(native):
    buf = torch.randn(10)
    a, b = torch.randn(8), torch.randn(8)
    a.add_(b)  # plans the key of two (8,) tensors of stride 1
    before = native.stats()
    with pytest.raises(RuntimeError, match="single memory location|overlap"):
        buf[:8].add_(buf[1:9])  # the same key, but b overlaps self partially
    assert stats_delta(before, native.stats())["python_calls"] >= 1
    T.disable()
    with pytest.raises(RuntimeError, match="single memory location|overlap"):
        buf[:8].add_(buf[1:9])
    T.enable(wait_native=True)


def test_disjoint_views_of_one_storage_are_computed_right(native):
    buf = torch.randn(16)
    want = buf[:8] + buf[8:] * 2
    torch.randn(8).add_(torch.randn(8), alpha=2)  # the key planned
    got = buf[:8].add_(buf[8:], alpha=2)  # one storage, no overlap: the implementation serves it
    close(got, want)
    close(buf[:8], want)


@pytest.mark.parametrize("call, match", [
    (lambda: torch.randn(1, 4).add_(torch.randn(3, 4)), "doesn't match the broadcast shape"),
    (lambda: torch.zeros(4, dtype=torch.int64).add_(torch.randn(4)), "can't be cast"),
    (lambda: torch.zeros(4, dtype=torch.int64).div_(2), "can't be cast"),
    (lambda: torch.randn(1, 4).expand(3, 4).mul_(2.0), "single memory location|overlap"),
])
def test_inplace_errors_are_atens(native, call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_inplace_gradients_match_eager(native):
    def step(a, b):
        y = a * 2
        y.mul_(b).add_(1.0)
        y.masked_fill_(b > 1.0, 0.0)
        return y.sum()

    g = torch.Generator().manual_seed(3)
    a0, b0 = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g) + 0.5
    T.disable()
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    step(a, b).backward()
    want = (a.grad, b.grad)
    T.enable(wait_native=True)
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    step(a, b).backward()
    close(a.grad, want[0])
    close(b.grad, want[1])


def test_planners_refuse_what_aten_refuses():
    x = torch.randn(1, 4)
    assert elementwise.PLANNERS["mul_.Tensor"](x, torch.randn(3, 4)) is None  # broadcasts past self
    assert elementwise.PLANNERS["add_.Tensor"](torch.zeros(4, dtype=torch.int64), torch.randn(4)) is None
    assert elementwise.PLANNERS["mul_.Scalar"](x.expand(3, 4), 2.0) is None  # internal overlap
    assert elementwise.PLANNERS["floor_divide"](torch.arange(4), 0) is None  # aten raises per value
    p = elementwise.PLANNERS["mul_.Tensor"](x, torch.randn(1, 4))
    assert p.result == (_plan.In(0),) and p.writes == (0,) and p.outputs == ()


def test_python_executor_checks_writes_as_cpp_does():
    x = torch.randn(8)
    p = elementwise.PLANNERS["add_.Tensor"](x, torch.randn(8))
    buf = torch.randn(10)
    assert _plan.serves_writes([buf[:8], buf[:8]], 0)  # the same view
    assert not _plan.serves_writes([buf[:8], buf[1:9]], 0)
    with pytest.raises(NotImplementedError, match="shares memory"):
        _plan.run(p, [buf[:8], buf[1:9], 1])
    y = torch.randn(8)
    want = x + y
    assert _plan.run(p, [x, y, 1]) is x
    close(x, want)


@pytest.mark.gpu
def test_inplace_plans_on_gpu():
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 256, device="cuda", generator=g, dtype=torch.bfloat16)
    w = torch.rand(8192, 2, device="cuda", generator=g)
    ids = torch.randint(0, 10, (16384,), device="cuda", generator=g)
    mask = torch.rand(64, 1, device="cuda", generator=g) > 0.5

    def calls(x, w, ids):
        x = x.clone()
        w = w.clone()
        ids = ids.clone()
        x.t().mul_(0.5)
        x[1:].add_(x[0])  # another view of the same storage, not overlapping
        x.masked_fill_(mask, 0.0)
        w.div_(w.sum(-1, keepdim=True))
        ids.clamp_(max=7)
        return x, w, ids, ids // 2

    want = calls(x, w, ids)
    with T.enable(include=["mul_.Scalar", "add_.Tensor", "masked_fill_.Scalar", "div_.Tensor", "clamp_", "sum.dim_IntList",
                           "floor_divide"], wait_native=True):
        got = calls(x, w, ids)
    for a, b in zip(got, want):
        close(a, b, a.dtype)


@pytest.mark.parametrize("call", [
    lambda p: p // 2,  # MoE routing: the token of each sorted (token, expert) pair
    lambda p: torch.div(p, -3, rounding_mode="floor"),
    lambda p: torch.div(p, 4, rounding_mode="trunc"),
    lambda p: torch.div(p.float(), 0.75, rounding_mode="floor"),
    lambda p: torch.div(p, 2),
])
def test_rounding_divisions_are_planned(native, call):
    p = torch.arange(-17, 23)
    T.disable()
    want = call(p)
    T.enable(wait_native=True)
    call(p)
    before = native.stats()
    got = call(p)
    d = stats_delta(before, native.stats())
    assert torch.equal(got, want) and got.dtype == want.dtype
    assert d["python_calls"] == 0 and d["plan_hits"] >= 1


def test_the_benchmark_sweep_covers_every_inplace_plan_and_each_call_matches_eager(native):
    """The calls ``bench ops --inplace-sweep`` times (by which enable()'s default takes in-place
    overloads) are each served by a C++ plan on their second call and agree with eager."""
    calls_of = bench_module("ops").inplace_sweep_calls
    shape = (2, 3, 8)
    T.disable()
    want = [(name, fn()) for name, fn in calls_of("cpu", shape)]
    T.enable(wait_native=True)
    planned = {n for n in T._registry._PLANNERS if n.split(".")[0].endswith("_") and n in elementwise.PLANNERS}
    assert len(planned) >= 87
    assert {n for n, _ in want} == planned
    calls = calls_of("cpu", shape)
    for (name, fn), (_, ref) in zip(calls, want):
        got = fn().clone()  # the call mutates self: its value now, before the second call
        before = native.stats()
        fn()  # the key is planned now
        assert stats_delta(before, native.stats())["python_calls"] == 0, f"{name}: went to the Python implementation"
        assert got.shape == ref.shape and got.dtype == ref.dtype, name
        close(got, ref)
    T.enable(wait_native=True)  # as the module's fixture left it


def test_one_dim_calls_take_the_flat_index():
    """The strided kernel indexes a call whose operands coalesce to one dim by the flat offset
    (FLAT, no division per element) and unravels the rest; both give aten's values."""
    from tritonjit_ops import _plan
    from tritonjit_ops import elementwise as E

    x = torch.randn(30, 100)
    cases = {  # name: (operands, FLAT expected)
        "contiguous": ([x, -0.5, 0.5], True),
        "a row broadcast": ([x, torch.zeros(100), torch.full((30, 1), 0.5)], False),
        "transposed": ([x.t(), -0.5, 0.5], False),
        "every other element": ([x.view(-1)[::2], -0.5, 0.5], True),
    }
    for name, (ops, flat) in cases.items():
        shape = list(ops[0].shape)
        out = torch.empty(shape)
        L = E._launch("clamp", ops, ops, out, out, shape, "fp32", [])
        assert launch_arg(L, "FLAT") is flat, name
        _plan.execute(L)
        torch.testing.assert_close(out, torch.clamp(ops[0], ops[1], ops[2]), msg=name)


def test_the_index_space_follows_the_outputs_memory_order():
    """A permuted output (aten's layout of a transposed input's result, an in-place op on a
    permuted view) is indexed in its memory order: with inputs of its layout the call is one
    flat run (FLAT), where the logical order wrote one element per memory sector; a broadcast
    operand still lands on the right elements."""
    from tritonjit_ops import _plan
    from tritonjit_ops import elementwise as E

    x = torch.randn(4, 16, 8).transpose(1, 2)  # strides (128, 1, 8)
    p = torch.randn(5, 6, 7).permute(2, 0, 1)
    row = torch.randn(6)  # broadcast along p's last dim
    cases = {  # name: (operands, output, FLAT expected, reference)
        "transposed in, aten's layout out": ([x, -0.5, 0.5], torch.empty_like(x), True, torch.clamp(x, -0.5, 0.5)),
        "in place on a permuted view": ([p, -0.5, 0.5], p.clone(), True, torch.clamp(p, -0.5, 0.5)),
        "a broadcast row into a permuted output": ([p, row.view(1, 1, 6), 0.5], torch.empty_like(p), False,
                                                   torch.clamp(p, row.view(1, 1, 6), torch.tensor(0.5))),
        "transposed in, contiguous out": ([x, -0.5, 0.5], torch.empty(x.shape), False, torch.clamp(x, -0.5, 0.5)),
    }
    for name, (ops, out, flat, want) in cases.items():
        shape = list(want.shape)
        L = E._launch("clamp", ops, ops, out, out, shape, "fp32", [])
        assert launch_arg(L, "FLAT") is flat, name
        _plan.execute(L)
        torch.testing.assert_close(out, want, msg=name)
    got = E.run("log_sigmoid", [x], x.dtype, "fp32", aten_layout=True)
    assert got.stride() == x.stride()
    torch.testing.assert_close(got, torch.nn.functional.logsigmoid(x))


def test_the_benchmark_opt_in_calls_are_planned_and_match_eager(native, monkeypatch):
    """The calls ``bench ops --opt-in`` times (by which an opt-in overload joins enable()'s
    device default) each route one overload with a C++ plan, are served by it on their second
    call, and agree with eager; those measured on 2026-12-06 are in the default (all but div's rounding modes)."""
    from tritonjit_ops import _registry

    calls = bench_module("ops").opt_in_calls("cpu", small=True)
    checks = index_checks_as_on_a_device(monkeypatch)  # the scatters plan as on a device
    next(checks)
    T.disable()
    want = [fn().clone() for _, fn, _ in calls]
    for (name, fn, ops), ref in zip(calls, want):
        (op,) = ops
        assert op in _registry._PLANNERS, (name, op)
        joined = {"softplus", "tril", "sign", "logical_and_", "fill_.Tensor", "reciprocal", "erf", "floor", "triu",
                  "scatter_.value", "scatter_.src", "scatter_add_", "index_add_"}
        assert (op in _registry.DEVICE_DEFAULT) == (op in joined), (name, op)
        with T.enable(include=ops, wait_native=True):
            got = fn().clone()
            before = native.stats()
            fn()
            assert stats_delta(before, native.stats())["python_calls"] == 0, f"{name}: went to the Python implementation"
        assert got.shape == ref.shape and got.dtype == ref.dtype, name
        close(got, ref)
    next(checks, None)
    T.enable(wait_native=True)  # as the module's fixture left it


_BOOL_SUBS = {
    "x.sub_(mask)": lambda: torch.ones(3).sub_(torch.tensor([True, False, True])),
    "ids.sub_(mask)": lambda: torch.ones(3, dtype=torch.long).sub_(torch.tensor([True, False, True])),
    "x.sub_(True)": lambda: torch.ones(3).sub_(True),
    "x.sub_(0-dim bool)": lambda: torch.ones(3).sub_(torch.tensor(True)),
    "1 - mask (rsub)": lambda: 1 - torch.tensor([True, False]),
    "rsub(x, True)": lambda: torch.ops.aten.rsub.Scalar(torch.ones(2), True),
    "sub_.Scalar(x, True)": lambda: torch.ops.aten.sub_.Scalar(torch.ones(2), True),
}


@pytest.mark.parametrize("case", list(_BOOL_SUBS))
def test_sub_of_a_bool_operand_raises_atens_error(native, case):
    """aten's sub and rsub refuse a bool operand (a tensor or a Python bool, either side); the
    in-place and rsub paths computed one. The plan of an int Scalar's key does not serve a bool
    one (the key tells them apart)."""
    torch.ones(3).sub_(1)  # a plan for an int Scalar
    torch.ops.aten.rsub.Scalar(torch.ones(2), 1)
    for _ in range(2):  # the first call and the plan's
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
            _BOOL_SUBS[case]()
    assert torch.equal(torch.ones(2).add_(True), torch.full((2,), 2.0))  # add takes a bool


def test_neg_of_uint8_wraps_as_atens(native):
    """aten negates uint8 by wrapping (-1 is 255); the in-place path sent it to the elementwise
    kernel, which the interpreter cannot run on an unsigned value: it is aten's now, as the
    out-of-place neg of uint8 already was."""
    for x in (torch.tensor([1, 2, 0], dtype=torch.uint8), torch.tensor([1, 2, 3, 4], dtype=torch.uint8)[::2]):
        want = x.clone().neg_()
        for _ in range(2):
            assert torch.equal(x.clone().neg_(), want)
