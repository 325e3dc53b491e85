"""Plans of the C++ operator path for the small ops transformers models call every step:
``zeros_like``/``ones_like``/``full_like``, ``fill_.Scalar``/``zero_`` (in place: the plan
returns ``self``), ``cumsum`` and ``all``/``any``. Each agrees with eager under
``enable(include=[...])`` and, where planned, runs in C++: plan_hits grows and no call
goes to the Python implementation (its ~20-50 us of host time per call is what these
plans save on a GPU)."""
from __future__ import annotations

from typing import Any

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_disabled, needs_cxx, routed, stats_delta
from tritonjit_ops import _native_ops, _plan, copy, reduction, rowwise

pytestmark = needs_cxx


@pytest.fixture(scope="module", autouse=True)
def native():
    yield from native_ops_disabled()


def _assert_planned(d: dict) -> None:
    assert d["plan_hits"] >= 1 and d["python_calls"] == 0 and d["plans_made"] == 0, d


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -4, 5, shape, generator=g).to(dtype)


def _layouts(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Inputs of each layout a plan must take: contiguous, strided (every other column of a
    wider tensor: not dense, so aten's outputs are contiguous), 0-dim, empty."""
    return {"contiguous": _tensor((3, 5), dtype), "strided": _tensor((3, 10), dtype, 1)[:, ::2],
            "0-dim": _tensor((), dtype, 2), "empty": _tensor((0, 4), dtype)}


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool]
LAYOUTS = ["contiguous", "strided", "0-dim", "empty"]


# ----------------------------------------------------------------- zeros_like / ones_like / full_like
def _full_value(dtype: torch.dtype) -> Any:
    return 2.5 if dtype.is_floating_point else True if dtype == torch.bool else 7 if dtype == torch.int64 else 1


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "full_like"])
def test_like_is_planned(op, dtype, layout):
    x = _layouts(dtype)[layout]
    args = (x, _full_value(dtype)) if op == "full_like" else (x,)
    want = getattr(torch, op)(*args)
    got, d = routed(lambda: getattr(torch, op)(*args), [op])
    close(got, want)
    assert got.stride() == want.stride() or got.numel() == 0
    _assert_planned(d)


@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "full_like"])
def test_like_with_dtype_and_memory_format(op):
    x = _tensor((4, 6), torch.float32).t()  # dense, not contiguous
    extra = (3,) if op == "full_like" else ()
    for kw in (dict(dtype=torch.bfloat16, memory_format=torch.contiguous_format),
               dict(dtype=torch.int64, memory_format=torch.contiguous_format)):
        want = getattr(torch, op)(x, *extra, **kw)
        got, d = routed(lambda kw=kw: getattr(torch, op)(x, *extra, **kw), [op])
        close(got, want)
        assert got.is_contiguous()
        _assert_planned(d)


@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "full_like"])
def test_like_keeping_the_inputs_strides_is_planned(op):
    """preserve_format on a dense non-contiguous input (a transposed state, RecurrentGemma's
    ``zeros_like`` of a transposed convolution input): aten's output takes its strides, and so
    does the plan's buffer; likewise channels_last asked for."""
    x = _tensor((4, 6), torch.float32).t()
    x3 = _tensor((2, 32, 8), torch.bfloat16).transpose(1, 2)
    x4 = _tensor((2, 3, 4, 5), torch.float32)
    extra = (3.0,) if op == "full_like" else ()
    for fn in (lambda: getattr(torch, op)(x, *extra), lambda: getattr(torch, op)(x3, *extra),
               lambda: getattr(torch, op)(x4, *extra, memory_format=torch.channels_last)):
        want = fn()
        got, d = routed(fn, [op])
        close(got, want)
        assert got.stride() == want.stride() and not got.is_contiguous()
        _assert_planned(d)


def test_full_like_value_is_a_runtime_argument():
    x, xi = _tensor((8,), torch.float32), _tensor((8,), torch.int64)
    values = [2.5, -3.25, 1e-3, float("inf")]
    with T.enable(include=["full_like"], wait_native=True):
        torch.full_like(x, 0.5), torch.full_like(xi, 5)  # the keys: a float and an int, neither 0 nor 1
        before = _native_ops.stats()
        got = [torch.full_like(x, v) for v in values] + [torch.full_like(xi, v) for v in (-9, 2**40)]
        d = stats_delta(before, _native_ops.stats())
    assert d["plans_made"] == 0 and d["plan_hits"] == 6 and d["python_calls"] == 0
    want = [torch.full_like(x, v) for v in values] + [torch.full_like(xi, v) for v in (-9, 2**40)]
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("dtype, value", [(torch.int32, 7), (torch.int64, 2.5), (torch.int8, 300),
                                          (torch.float64, 0.1), (torch.float16, 70000)], ids=str)
def test_full_like_values_checked_per_call_or_not_planned(dtype, value):
    """An int into a narrow type is planned and its range checked per call (Plan.fits: one
    that overflows raises aten's error); a fraction into an integer (aten truncates) and a
    float into float64 (the kernel's fp32 scalar would round it) are not planned: the
    Python implementation serves them."""
    x = _tensor((6,), dtype)
    try:
        want = torch.full_like(x, value)
    except RuntimeError as e:
        with T.enable(include=["full_like"], wait_native=True), pytest.raises(RuntimeError, match="overflow"):
            torch.full_like(x, value)
        assert "overflow" in str(e)
        return
    got, d = routed(lambda: torch.full_like(x, value), ["full_like"])
    close(got, want)
    planned = not (isinstance(value, float) and (dtype == torch.float64 or not dtype.is_floating_point))
    assert d["plan_hits"] == (1 if planned else 0) and d["python_calls"] == (0 if planned else 1), d


def test_like_on_another_device_or_pinned_is_not_planned():
    x = _tensor((3,), torch.float32)
    assert copy._like_planner(0)(x, device=torch.device("meta")) is None
    assert copy._like_planner(1)(x, pin_memory=True) is None
    assert copy._like_planner(None)(x, 2.0, layout=torch.sparse_coo) is None
    assert copy._like_planner(0)(x, dtype=torch.complex64) is None


# ----------------------------------------------------------------- fill_ / zero_
def _fresh(dtype: torch.dtype, layout: str) -> torch.Tensor:
    """A new tensor of ``layout`` (aten's clone under include=[fill_/zero_]: not counted)."""
    base = _layouts(dtype)[layout]
    if layout == "strided":
        wide = torch.zeros(3, 10, dtype=dtype)
        wide[:, ::2] = base
        return wide[:, ::2]
    return base.clone()


@pytest.mark.parametrize("layout", LAYOUTS + ["transposed"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["fill_.Scalar", "zero_"])
def test_inplace_fill_is_planned_and_returns_self(op, dtype, layout):
    value = _full_value(dtype)

    def make() -> torch.Tensor:
        return _fresh(dtype, "contiguous").t() if layout == "transposed" else _fresh(dtype, layout)

    def call(t: torch.Tensor) -> torch.Tensor:
        return t.fill_(value) if op == "fill_.Scalar" else t.zero_()

    want = call(make())
    seen: list[torch.Tensor] = []

    def fn() -> torch.Tensor:
        t = make()
        seen.append(t)
        return call(t)

    got, d = routed(fn, [op])
    assert got is seen[-1]  # self itself, not a new buffer
    close(got, want)
    assert got.stride() == want.stride()
    if layout == "strided":  # the columns between stay as they were
        assert torch.equal(got._base[:, 1::2], torch.zeros(3, 5, dtype=dtype))
    _assert_planned(d)


def test_fill_value_is_a_runtime_argument_and_grads_zero():
    x = _tensor((5, 3), torch.float32)
    with T.enable(include=["fill_.Scalar", "zero_"], wait_native=True):
        x.fill_(0.5)
        before = _native_ops.stats()
        vals = []
        for v in (2.0, -1.5, 3):
            vals.append(x.fill_(v).clone() if isinstance(v, float) else x.fill_(v).clone())
        d = stats_delta(before, _native_ops.stats())
    assert d["python_calls"] == 0 and d["plan_hits"] == 3
    assert d["plans_made"] == 1  # the int Scalar is another key than the float
    for g, v in zip(vals, (2.0, -1.5, 3)):
        assert torch.equal(g, torch.full((5, 3), float(v)))
    # an optimizer's zero_grad(set_to_none=False): zero_ on each .grad
    lin = torch.nn.Linear(4, 3)
    lin(torch.randn(2, 4)).sum().backward()
    with T.enable(include=["zero_"], wait_native=True):
        before = _native_ops.stats()
        torch.optim.SGD(lin.parameters(), lr=0.1).zero_grad(set_to_none=False)
        d = stats_delta(before, _native_ops.stats())
    assert d["plan_hits"] == 2 and d["python_calls"] == 0
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in lin.parameters())


def test_fill_of_a_narrow_integer_checks_each_value():
    """fill_ of an int8 tensor: one plan serves every int value in range (the key holds the
    type); a value out of range raises aten's error and leaves the tensor as it was."""
    x = torch.zeros(4, dtype=torch.int8)
    with T.enable(include=["fill_.Scalar"], wait_native=True):
        x.fill_(5)
        assert torch.equal(x, torch.full((4,), 5, dtype=torch.int8))
        before = _native_ops.stats()
        x.fill_(-7)
        d = stats_delta(before, _native_ops.stats())
        assert torch.equal(x, torch.full((4,), -7, dtype=torch.int8))
        assert d["plan_hits"] == 1 and d["python_calls"] == 0, d
        with pytest.raises(RuntimeError, match="overflow"):
            x.fill_(300)
        assert torch.equal(x, torch.full((4,), -7, dtype=torch.int8))
        before = _native_ops.stats()
        x.fill_(1)  # 0 and 1 are in the call key: planned, with the value baked in
        assert stats_delta(before, _native_ops.stats())["plan_hits"] == 1
        assert torch.equal(x, torch.ones(4, dtype=torch.int8))


def test_python_executor_returns_the_input_itself():
    x = torch.zeros(3, 4)[:, ::2]
    p = copy._plan_fill_(x, 2.0)
    assert p is not None and p.result == (_plan.In(0),) and p.outputs == ()
    assert _plan.run(p, [x, 2.0]) is x
    assert torch.equal(x, torch.full((3, 2), 2.0))
    p = copy._plan_zero_(x)
    assert _plan.run(p, [x]) is x and torch.equal(x, torch.zeros(3, 2))
    # an output and an input in one result
    p2 = p._replace(outputs=(_plan.Buffer((2,), torch.float32),), result=(0, _plan.In(0)))
    out, same = _plan.run(p2, [x])
    assert out.shape == (2,) and same is x


# ----------------------------------------------------------------- cumsum
CUMSUM_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool]


@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("dtype", CUMSUM_DTYPES, ids=str)
def test_cumsum_is_planned(dtype, layout, dim):
    x = _tensor((4, 6, 5), dtype)
    x = {"contiguous": x, "strided": _tensor((4, 6, 10), dtype, 3)[..., ::2], "transposed": x.transpose(0, 2)}[layout]
    want = torch.cumsum(x, dim)
    got, d = routed(lambda: torch.cumsum(x, dim), ["cumsum"])
    tol = dict(rtol=2e-2, atol=5e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    close(got, want, **tol)
    assert got.dtype == (dtype if dtype.is_floating_point else torch.int64)
    _assert_planned(d)


@pytest.mark.parametrize("case", ["0-dim", "0-dim int8", "empty", "empty dim", "dtype f64", "dtype i32",
                                  "float to int", "bool mask position ids", "long row"])
def test_cumsum_edge_cases(case):
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(2, 9, generator=g) > 0.3
    x, dim, kw = {
        "0-dim": (torch.tensor(2.5), 0, {}),
        "0-dim int8": (torch.tensor(3, dtype=torch.int8), -1, {}),
        "empty": (torch.zeros(0, 3), 1, {}),
        "empty dim": (torch.zeros(3, 0, 2), 1, {}),
        "dtype f64": (torch.randn(3, 7, generator=g), 0, dict(dtype=torch.float64)),
        "dtype i32": (torch.randint(-3, 3, (3, 7), generator=g), 1, dict(dtype=torch.int32)),
        "float to int": (torch.randn(3, 7, generator=g) * 4, -1, dict(dtype=torch.int64)),
        "bool mask position ids": (mask, -1, {}),
        "long row": (torch.randint(0, 3, (2, 3000), generator=g), -1, {}),
    }[case]
    want = torch.cumsum(x, dim, **kw)
    got, d = routed(lambda: torch.cumsum(x, dim, **kw), ["cumsum"])
    close(got, want)
    _assert_planned(d)


def test_cumsum_the_kernel_does_not_take_is_atens_plan():
    """What the implementation would hand to aten on every call is aten's plan, decided by the
    key, so the C++ path skips the Python refusal: a dim out of range and a bool dtype (aten's
    errors), rows past MAX_N (top-p sampling's cumsum over a vocabulary)."""
    x = torch.randn(3, 4)
    assert rowwise._plan_cumsum(x, 2).aten
    assert rowwise._plan_cumsum(x, 0, dtype=torch.bool).aten
    long = torch.rand(2, rowwise.MAX_N + 1)
    assert rowwise._plan_cumsum(long, -1).aten
    with T.enable(include=["cumsum"], wait_native=True), pytest.raises(IndexError, match="out of range"):
        torch.cumsum(x, 2)
    want = torch.cumsum(long, -1)
    got, d = routed(lambda: torch.cumsum(long, -1), ["cumsum"])
    close(got, want)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


# ----------------------------------------------------------------- all / any
LOGIC_DTYPES = [torch.bool, torch.float32, torch.bfloat16, torch.uint8, torch.int64]


def _logic_inputs(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    base = (torch.rand(4, 6, 5, generator=g) > 0.1).to(dtype)
    ones = torch.ones(3, 7, dtype=dtype)
    return {"contiguous": base, "all ones": ones, "strided": base[:, ::2], "transposed": base.transpose(0, 2),
            "0-dim": torch.tensor(0, dtype=dtype), "0-dim one": torch.tensor(1, dtype=dtype),
            "empty": torch.zeros(0, 3, dtype=dtype)}


@pytest.mark.parametrize("layout", ["contiguous", "all ones", "strided", "transposed", "0-dim", "0-dim one", "empty"])
@pytest.mark.parametrize("dtype", LOGIC_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["all", "any"])
def test_full_logic_reduction_is_planned(op, dtype, layout):
    x = _logic_inputs(dtype)[layout]
    want = getattr(torch, op)(x)
    got, d = routed(lambda: getattr(torch, op)(x), [op])
    close(got, want)
    assert got.dim() == 0 and got.dtype == (torch.uint8 if dtype == torch.uint8 else torch.bool)
    _assert_planned(d)


@pytest.mark.parametrize("call", ["dim 0", "dim -1 keepdim", "dim 1", "dims (1, 2)", "dims None keepdim",
                                  "dim of 0-dim", "empty dim", "empty kept"])
@pytest.mark.parametrize("op", ["all", "any"])
def test_logic_reduction_over_dims_is_planned(op, call):
    x = _logic_inputs(torch.bool)["contiguous"]
    f = getattr(torch, op)
    fn = {
        "dim 0": lambda: f(x, 0),
        "dim -1 keepdim": lambda: f(x, -1, keepdim=True),
        "dim 1": lambda: f(x[:, ::2], 1),
        "dims (1, 2)": lambda: f(x, dim=(1, 2)),
        "dims None keepdim": lambda: torch.ops.aten.__getattr__(op).dims(x, None, True),
        "dim of 0-dim": lambda: f(torch.tensor(True), 0),
        "empty dim": lambda: f(torch.zeros(3, 0, 2, dtype=torch.bool), 1),
        "empty kept": lambda: f(torch.zeros(0, 4), 1),
    }[call]
    want = fn()
    ops = [op, f"{op}.dim", f"{op}.dims"]
    got, d = routed(fn, ops)
    close(got, want)
    _assert_planned(d)


def test_large_logic_reductions_split():
    x = torch.ones(70000, dtype=torch.bool)
    x[54321] = False
    y = torch.zeros(3, 70000)
    y[1, 7] = 1.0
    none = torch.zeros(70000, dtype=torch.bool)
    fn = [lambda: x.all(), lambda: x.any(), lambda: y.any(1), lambda: none.any(), lambda: y.all()]
    for f in fn:
        want = f()
        got, d = routed(f, ["all", "any", "any.dim"])
        close(got, want)
        _assert_planned(d)


def test_logic_reductions_not_planned():
    x = torch.ones(2, 3, 4, dtype=torch.bool)
    assert reduction.plan_logic("all", x, (0, 2)) is None  # not one block of dims: the Python implementation
    assert reduction.plan_logic("any", x, ()).aten  # aten reduces nothing: its kernel, planned as such
    assert reduction.plan_logic("any", x, 5).aten  # aten's IndexError
    assert reduction.plan_logic("any", torch.tensor([1j])) is None
    want = torch.any(x, dim=())
    got, d = routed(lambda: torch.any(x, dim=()), ["any.dims"])
    close(got, want)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


# ----------------------------------------------------------------- the H200's kernels
def test_new_kernel_variants_compile_for_sm90():
    """The variants these plans launch compile for the H200 (cross-compiled; no GPU needed)."""
    from tritonjit_ops import elementwise

    ints = "i32," * 16
    nest = "i32:1,i32:1,i32:16,i32:16"  # the reduction kernel's (S1, S2, T1, T2) of a flat axis
    sigs = [
        (rowwise._scan_k, "*i1:16,*i64:16,i32,i32,'i64',8,512"),
        (rowwise._scan_k, "*bf16:16,*bf16:16,i32,i32,'fp32',16,256"),
        (rowwise._row, "*i1:16,*i64:16,*i64:16,i32,fp32,i32:1,i32:1,i32:16,i32:16,i32:16,i32:1,'cumsum','i64',1024,False,False"),
        (reduction._reduce, "*i1:16,*i1:16,*i1:16,*i1:16,i32,i32,i32,i32,i32,i32," + nest + ",fp32,'all',64,64,False,True,False,"
                            "False"),
        (reduction._reduce, "*bf16:16,*bf16:16,*bf16:16,*bf16:16,i32,i32,i32,i32,i32,i32," + nest + ",fp32,'any',1,4096,False,"
                            "False,False,False"),
        (reduction._reduce, "*bf16:16,*i1:16,*bf16:16,*i1:16,i32,i32,i32,i32,i32,i32," + nest + ",fp32,'any',32,128,False,"
                            "True,True,False"),
        # a mean over the last dim of an attention head's strided view (rows in three dims)
        (reduction._reduce, "*bf16:16,*bf16:16,*bf16:16,*bf16:16,i32,i32,i32,i32,i32,i32:1,i32,i32,i32,i32:16,fp32,"
                            "'mean',64,8,False,True,True,True"),
        (elementwise._ew, "fp32,i32,i32,*bf16:16,i32,i32,i32,i32,i32,i32,i32," + ints
         + "'copy',1,'fp32',True,True,True,True,1024,False,True,False,nullopt,nullopt"),
        (elementwise._ew, "i1,i32,i32,*i64:16,i32,i32,i32,i32,i32,i32,i32," + ints
         + "'copy',1,'i64',False,True,True,True,1024,False,True,False,nullopt,nullopt"),
    ]
    for fn, sig in sigs:
        k = fn.compile(sig, target="cuda:90")
        assert k.binary, sig


# ----------------------------------------------------------------- generate()'s checks: ~, max/min
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "0-dim"])
def test_bitwise_not_planned(dtype, layout):
    """~x (generate's ``~is_done``: a bool [1]; an int mask): planned, in aten's layout,
    logical for bool, bitwise for the integers; its in-place form too."""
    x = _layouts(dtype)[layout]
    got, d = routed(lambda: torch.bitwise_not(x), ["bitwise_not"])
    want = torch.bitwise_not(x)
    assert got.dtype == want.dtype and got.stride() == want.stride() and torch.equal(got, want)
    _assert_planned(d)
    y, z = x.clone(), x.clone()
    routed(lambda: y.bitwise_not_().bitwise_not_(), ["bitwise_not_"])
    assert torch.equal(y, z)


def test_bitwise_not_of_a_float_goes_to_aten():
    with T.enable(include=["bitwise_not"], wait_native=True), pytest.raises(RuntimeError, match="bitwise_not"):
        torch.bitwise_not(torch.ones(3))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_max_min_of_a_whole_tensor_planned(op, dtype, layout):
    """torch.max(x) / torch.min(x) with no dim (generate's ``cache_position.max()``; a mask's
    largest position): amax/amin over every dim, a 0-dim result of x's dtype."""
    x = _layouts(dtype)[layout]
    fn = getattr(torch, op)
    got, d = routed(lambda: fn(x), [op])
    want = fn(x)
    assert got.dim() == 0 and got.dtype == want.dtype and torch.equal(got, want)
    _assert_planned(d)


def test_max_propagates_nan_and_refuses_empty_and_0_dim_as_aten():
    x = torch.tensor([1.0, float("nan"), 3.0])
    got, _ = routed(lambda: torch.max(x), ["max"])
    assert torch.isnan(got)
    with T.enable(include=["max"], wait_native=True):
        with pytest.raises(RuntimeError, match="max"):
            torch.max(torch.empty(0, 3))
        assert torch.max(torch.tensor(2.5)).item() == 2.5  # 0-dim: aten's plan


#: (ops routed, call): reductions whose result is the input itself, an identity or aten's error
DEGENERATE = {
    "sum 0-dim": (["sum"], lambda: torch.tensor(3.5).sum()),
    "sum 0-dim to f64": (["sum"], lambda: torch.tensor(3.5).sum(dtype=torch.float64)),
    "mean 0-dim": (["mean"], lambda: torch.tensor(-2.0).mean()),
    "sum dim of 0-dim": (["sum.dim_IntList"], lambda: torch.tensor(3.5).sum(0, keepdim=True)),
    "mean dim of 0-dim": (["mean.dim"], lambda: torch.tensor(3.5).mean(-1)),
    "amax 0-dim": (["amax"], lambda: torch.tensor(7, dtype=torch.int32).amax()),
    "argmax 0-dim": (["argmax"], lambda: torch.tensor(3.5).argmax()),
    "softmax 0-dim": (["_softmax"], lambda: torch.tensor(3.5).softmax(0)),
    "log_softmax 0-dim": (["_log_softmax"], lambda: torch.tensor(3.5).log_softmax(-1)),
    "sum over an empty dim": (["sum.dim_IntList"], lambda: torch.ones(3, 0, 2).sum(1)),
    "mean over an empty dim": (["mean.dim"], lambda: torch.ones(3, 0, 2).mean(1)),
}


@pytest.mark.parametrize("case", list(DEGENERATE))
def test_degenerate_reductions_are_atens_without_python(case):
    """A 0-dim input or an empty reduction: aten's kernel, decided once per call key (the key
    holds the dims and sizes), not the Python implementation on every call."""
    ops, fn = DEGENERATE[case]
    want = fn()
    got, d = routed(fn, ops)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert d["python_calls"] == 0 and d["aten_calls"] >= 1 and d["plan_hits"] >= 1, d


@pytest.mark.parametrize("op, fn", [("argmax", lambda: torch.empty(2, 0).argmax()),
                                    ("amax", lambda: torch.empty(0, 3).amax(0))])
def test_empty_reductions_raise_atens_error(op, fn):
    with pytest.raises(Exception) as eager:
        fn()
    with T.enable(include=[op], wait_native=True):
        for _ in range(2):
            with pytest.raises(type(eager.value), match=op):
                fn()


def test_max_of_a_large_tensor_on_a_device_is_left_to_aten():
    """On a device, max()/min() of more than 64K elements is aten's (measured faster there); up
    to that size, and on the interpreter, it is planned (meta stands in for a device here)."""
    big, small = torch.empty(reduction._EXTREME_ATEN_NUMEL + 1, device="meta"), torch.empty(1000, device="meta")
    for op in ("max", "min"):
        assert reduction.PLANNERS[op](big).aten
        p = reduction.PLANNERS[op](small)
        assert not p.aten and p.launches and p.outputs[0].shape == ()
        assert not reduction.PLANNERS[op](torch.empty(reduction._EXTREME_ATEN_NUMEL + 1)).aten


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.bool])
def test_bitwise_not_kernel_cross_compiles_for_sm90(dtype):
    """The H200's variant of ~x (unsigned lanes as max - x, the others as ~x) compiles."""
    from tritonjit_ops import elementwise as E

    x = _tensor((5, 7), dtype)
    (L,) = E.PLANNERS["bitwise_not"](x).launches
    out = torch.empty(x.shape, dtype=dtype)
    args = [x if isinstance(a, _plan.In) else out if isinstance(a, _plan.Out) else a for a in L.args]
    assert L.fn.compile(L.fn.signature(*args), target="cuda:90").binary
