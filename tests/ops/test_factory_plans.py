"""Plans of the C++ operator path for factory calls (no tensor arguments: ``arange``, ``zeros``,
``ones``, ``full``, ``scalar_tensor``) and for ``new_zeros``/``new_ones``/``new_full``.

A factory call whose ``device`` names the active backend's device type (on the CPU
interpreter: None or a CPU device) takes a plan whose buffers are allocated on that device;
arange's planner is value-keyed (``_plan.value_keyed``: the C++ key holds the values of
start, end and step, so a plan bakes in the size). Each call agrees with eager (values,
dtype, shape, device) under ``enable(include=[...])``, and its second call is a plan hit
with no call to the Python implementation. A call for another device (``meta`` here) goes
to aten's kernel, as before."""
from __future__ import annotations

import math
from typing import Callable

import pytest
import torch
import tritonjit_ops as T
from _util import aten_arange, native_ops_disabled, needs_cxx, routed, stats_delta
from tritonjit_ops import _native_ops, _plan, copy

pytestmark = needs_cxx

ARANGE = ["arange", "arange.start", "arange.start_step"]


@pytest.fixture(scope="module", autouse=True)
def native():
    yield from native_ops_disabled()


def _assert_planned(d: dict) -> None:
    assert d["plan_hits"] >= 1 and d["python_calls"] == 0 and d["plans_made"] == 0 and d["aten_calls"] == 0, d


def _same(got: torch.Tensor, ref: torch.Tensor, exact: bool = True) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape and got.device == ref.device, (got, ref)
    assert got.is_contiguous()
    if exact:
        assert torch.equal(got, ref), (got, ref)
    else:
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------- arange
ARANGE_CASES = [
    ((16,), {}), ((0,), {}), ((1,), {}), ((5,), {"dtype": torch.float32}), ((7,), {"device": "cpu"}),
    ((0, 1024), {}), ((-3, 4), {"dtype": torch.int32}), ((4, 4), {}), ((2, 11, 3), {}), ((10, 0, -3), {}),
    ((10, 0, -1), {"dtype": torch.int16}), ((0, 5, 10), {}), ((5, 0, -10), {}),
    ((0.1, 2.0, 0.3), {}), ((1.0, -1.0, -0.25), {}), ((0.5, 3, 0.25), {"dtype": torch.float64}),
    ((0, 1, 0.1), {}), ((2.0, 2.0, 0.5), {}), ((3.0, 1.0, -0.5), {"dtype": torch.bfloat16}),
    ((0, 3, 0.25), {"dtype": torch.float16}), ((-1e6, 1e6, 123456.5), {}), ((1.5, 9.5), {}),
    # int64 with float bounds: aten truncates start, end and step before the size
    ((0.0, -8.000001, -4.0), {"dtype": torch.int64}), ((1.0, 5.000001, 2.0), {"dtype": torch.int64}),
    ((-0.9, 2.1, 2.0), {"dtype": torch.int64}), ((2.5, -3.5, -1.5), {"dtype": torch.int64}),
    ((0.0, -8.000001, -4.0), {"dtype": torch.int32}), ((0, 5, 0.5), {"dtype": torch.int32}),
]


@pytest.mark.parametrize("args,kwargs", ARANGE_CASES)
def test_arange_planned(args, kwargs):
    ref = torch.arange(*args, **kwargs)
    got, d = routed(lambda: torch.arange(*args, **kwargs), ARANGE)
    _same(got, ref, exact=not ref.dtype.is_floating_point)
    _assert_planned(d)
    assert d["launches"] == (1 if ref.numel() else 0), d


def test_arange_value_keyed():
    """Calls that differ only in the values of their Scalars get a plan each (their sizes
    differ); the key holds the values, so each value's second call is a hit."""
    with T.enable(include=ARANGE, wait_native=True):
        for n in (3, 5, 3, 9):
            assert torch.arange(n).tolist() == list(range(n))
        got = [torch.arange(s, e) for s, e in ((0, 4), (2, 4), (0, 6), (0, 4))]
        before = _native_ops.stats()
        again = [torch.arange(s, e) for s, e in ((0, 4), (2, 4), (0, 6))]
        d = stats_delta(before, _native_ops.stats())
    assert [g.tolist() for g in got] == [[0, 1, 2, 3], [2, 3], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3]]
    assert [g.tolist() for g in again] == [[0, 1, 2, 3], [2, 3], [0, 1, 2, 3, 4, 5]]
    assert d["plan_hits"] == 3 and d["plans_made"] == 0 and d["python_calls"] == 0, d
    assert getattr(copy.PLANNERS["arange"], "value_keyed_scalars", False)


def test_default_dtype_is_in_the_key():
    """dtype=None means the default dtype, which the key of a factory call holds."""
    old = torch.get_default_dtype()
    try:
        with T.enable(include=ARANGE + ["zeros", "full"], wait_native=True):
            a = torch.arange(0.0, 3.0)
            z = torch.zeros(2)
            f = torch.full((2,), 0.5)
            torch.set_default_dtype(torch.float64)
            a64, z64, f64 = torch.arange(0.0, 3.0), torch.zeros(2), torch.full((2,), 0.5)
    finally:
        torch.set_default_dtype(old)
    assert (a.dtype, z.dtype, f.dtype) == (torch.float32,) * 3
    assert (a64.dtype, z64.dtype, f64.dtype) == (torch.float64,) * 3
    assert a64.tolist() == [0.0, 1.0, 2.0] and f64.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("args", [(0, 5, -1), (5, 0, 1), (0.0, 1.0, 0.0), (0.0, 1.0, 0.5)])
def test_arange_refusals_raise_atens_errors(args):
    """What the planner refuses (a step of the wrong sign, a zero step, int64 whose step
    truncates to 0) goes to the Python implementation and from there to aten: its error."""
    kw = {"dtype": torch.int64} if args == (0.0, 1.0, 0.5) else {}
    with pytest.raises((RuntimeError, ValueError)) as want:
        aten_arange(*args, **kw)
    with T.enable(include=ARANGE, wait_native=True):
        with pytest.raises(type(want.value), match=str(want.value)[:20]):
            torch.arange(*args, **kw)


# ----------------------------------------------------------------- zeros / ones / full / scalar_tensor
FACTORY_CASES: dict[str, tuple[list[str], Callable[[], torch.Tensor]]] = {
    "zeros": (["zeros"], lambda: torch.zeros(3, 4)),
    "zeros int64 1-d": (["zeros"], lambda: torch.zeros(5, dtype=torch.int64, device="cpu")),
    "zeros empty": (["zeros"], lambda: torch.zeros(0, 3)),
    "zeros 0-dim": (["zeros"], lambda: torch.zeros(())),
    "zeros rank 6": (["zeros"], lambda: torch.zeros(2, 1, 3, 1, 2, 2, dtype=torch.bfloat16)),
    "ones": (["ones"], lambda: torch.ones(2, 3, dtype=torch.int32)),
    "ones bool": (["ones"], lambda: torch.ones(4, dtype=torch.bool)),
    "ones float16": (["ones"], lambda: torch.ones(4, 5, dtype=torch.float16)),
    "full float": (["full"], lambda: torch.full((3, 4), 2.5)),
    "full int": (["full"], lambda: torch.full((3,), 7)),
    "full bool": (["full"], lambda: torch.full((3,), True)),
    "full -inf bf16 (a mask)": (["full"], lambda: torch.full((2, 8), float("-inf"), dtype=torch.bfloat16)),
    "full 0 into int8": (["full"], lambda: torch.full((4,), 0.0, dtype=torch.int8)),
    "full int into float64": (["full"], lambda: torch.full((4,), 3, dtype=torch.float64)),
    "scalar_tensor": (["scalar_tensor"], lambda: torch.scalar_tensor(3.5)),
    "scalar_tensor int64": (["scalar_tensor"], lambda: torch.scalar_tensor(-4, dtype=torch.int64)),
}


@pytest.mark.parametrize("case", list(FACTORY_CASES))
def test_factories_planned(case):
    ops, fn = FACTORY_CASES[case]
    ref = fn()
    got, d = routed(fn, ops)
    _same(got, ref)
    _assert_planned(d)


def _x(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(2, 3).to(dtype)


NEW_CASES: dict[str, tuple[list[str], Callable[[torch.Tensor], torch.Tensor]]] = {
    "new_zeros": (["new_zeros"], lambda x: x.new_zeros(4, 5)),
    "new_zeros dtype": (["new_zeros"], lambda x: x.new_zeros((3,), dtype=torch.int64)),
    "new_zeros same device": (["new_zeros"], lambda x: x.new_zeros((3,), device="cpu")),
    "new_ones": (["new_ones"], lambda x: x.new_ones((2, 2))),
    "new_ones empty": (["new_ones"], lambda x: x.new_ones((0,))),
    "new_full": (["new_full"], lambda x: x.new_full((5,), 1.25)),
    "new_full int64 self": (["new_full"], lambda x: x.to(torch.int64).new_full((5,), 9)),
    "new_full 1 into int8": (["new_full"], lambda x: x.new_full((3,), 1, dtype=torch.int8)),
}


@pytest.mark.parametrize("case", list(NEW_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_new_factories_planned(case, dtype):
    ops, fn = NEW_CASES[case]
    x = _x(dtype)
    ref = fn(x)
    got, d = routed(lambda: fn(x), ops)
    _same(got, ref)
    _assert_planned(d)


@pytest.mark.parametrize("fn", [lambda: torch.full((3,), 2.5, dtype=torch.float64),
                                lambda: torch.full((3,), 2.5, dtype=torch.int32),
                                lambda: torch.zeros(2).new_full((3,), 0.5, dtype=torch.int64)])
def test_full_values_no_plan_takes(fn):
    """full's values that no plan takes: a fractional float into an integer (aten truncates)
    and a float that the kernel's fp32 argument would round into float64: they reach the
    Python implementation, which hands them to aten."""
    ops = ["full", "new_full"]
    try:
        ref = fn()
    except RuntimeError as e:
        with T.enable(include=ops, wait_native=True):
            with pytest.raises(RuntimeError, match="overflow"):
                fn()
        assert "overflow" in str(e)
        return
    got, d = routed(fn, ops)
    _same(got, ref)
    assert d["plan_hits"] == 0 and d["python_calls"] == 1, d


# op, call of a value, a value in range, a value out of the dtype's range (aten raises its overflow
# error, except scalar_tensor into float16, which writes inf)
CHECKED: dict[str, tuple[str, Callable[[object], torch.Tensor], object, object]] = {
    "full int8": ("full", lambda v: torch.full((3,), v, dtype=torch.int8), 5, 300),
    "full uint8 (a negative wraps)": ("full", lambda v: torch.full((3,), v, dtype=torch.uint8), -1, -256),
    "full int32": ("full", lambda v: torch.full((3,), v, dtype=torch.int32), -9, 2**40),
    "full float16": ("full", lambda v: torch.full((3,), v, dtype=torch.float16), 3.5, 1e10),
    "full int into float16": ("full", lambda v: torch.full((3,), v, dtype=torch.float16), 7, 70000),
    "full bfloat16": ("full", lambda v: torch.full((3,), v, dtype=torch.bfloat16), -2.5, 1e39),
    "full float32": ("full", lambda v: torch.full((3,), v), 2.5, -1e39),
    "new_full int32": ("new_full", lambda v: torch.zeros(2).new_full((3,), v, dtype=torch.int32), 9, -2**35),
    "full_like int16": ("full_like", lambda v: torch.full_like(torch.zeros(2, dtype=torch.int16), v), 12, 40000),
    "fill_ int8": ("fill_.Scalar", lambda v: torch.zeros(4, dtype=torch.int8).fill_(v), -3, 200),
    "scalar_tensor float16": ("scalar_tensor", lambda v: torch.scalar_tensor(v, dtype=torch.float16), 1.5, -1e6),
}


def test_a_first_value_out_of_range_keeps_the_plan_for_the_next():
    """A plan is made for the key even where the call that made it overflows (that call goes
    to aten and raises); the next value of the same type in range is a plan hit."""
    with T.enable(include=["full"], wait_native=True):
        with pytest.raises(RuntimeError, match="overflow"):
            torch.full((5,), 1e10, dtype=torch.float16)
        before = _native_ops.stats()
        got = torch.full((5,), -6.5, dtype=torch.float16)
        d = stats_delta(before, _native_ops.stats())
    _same(got, torch.full((5,), -6.5, dtype=torch.float16))
    _assert_planned(d)


@pytest.mark.parametrize("case", list(CHECKED))
def test_fill_values_checked_per_call(case):
    """A fill's plan takes its value at run time (the key holds the Scalar's type, not its
    value) and checks it per call against the dtype's range (Plan.fits): a value in range is
    a plan hit; one out of range goes to aten, which raises its error (no inf, no wrapped
    integer from the plan) or gives its own result; the plan still serves the next value in
    range."""
    op, fn, ok, bad = CHECKED[case]
    ref = fn(ok)
    try:
        ref_bad, error = fn(bad), None
    except RuntimeError as e:
        ref_bad, error = None, e
    with T.enable(include=[op], wait_native=True):
        fn(ok)
        before = _native_ops.stats()
        got = fn(ok)
        d = stats_delta(before, _native_ops.stats())
        if error is not None:
            assert "overflow" in str(error)
            with pytest.raises(RuntimeError, match="overflow"):
                fn(bad)
        else:
            _same(fn(bad), ref_bad)
        before = _native_ops.stats()
        again = fn(ok)
        d2 = stats_delta(before, _native_ops.stats())
    _same(got, ref)
    _same(again, ref)
    _assert_planned(d)
    _assert_planned(d2)


def test_scalar_fits_is_never_looser_than_aten():
    """_plan.scalar_fits (the Python copy of the C++ executor's rule) passes only values that
    aten converts without its overflow error, at the edges of each dtype's range. It may be
    stricter: aten's own check differs by path (a one-element float16 fill writes inf where
    a longer one raises); a value it refuses goes to aten, whatever aten then does. Inside a
    floating dtype's finite range and an integer dtype's range, it passes every value."""
    values = [0, 1, -1, -255, -256, 127, 128, -128, -129, 255, 256, 32767, 32768, 2**31 - 1, 2**31, -2**31 - 1,
              2**63 - 1, 65504, 65505, 65520.0, 1e38, 3.4e38, 3.5e38, 1e39, float("inf"), float("-inf"),
              float("nan"), 2.5, -0.5, True]
    for dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
               torch.float32, torch.float64, torch.bool):
        for v in values:
            if isinstance(v, float) and not dt.is_floating_point and dt != torch.bool and math.isfinite(v):
                continue  # a finite float into an integer: plans do not take fractional floats (_fill_ref)
            raised = []
            for shape in ((1,), (3,)):
                try:
                    torch.full(shape, v, dtype=dt)
                except RuntimeError as e:
                    assert "overflow" in str(e)
                    raised.append(shape)
            if _plan.scalar_fits(v, dt):
                assert not raised, (v, dt, raised)
            in_range = (not isinstance(v, bool) and dt != torch.bool and (
                abs(v) <= torch.finfo(dt).max if dt.is_floating_point and math.isfinite(v) else
                dt.is_floating_point or (-255 if dt == torch.uint8 else torch.iinfo(dt).min) <= v
                <= torch.iinfo(dt).max))
            if in_range or dt == torch.bool or isinstance(v, bool):
                assert _plan.scalar_fits(v, dt), (v, dt)


def test_scalar_fits_floats_into_integers_as_aten():
    """A float into an integer dtype fits where c10::overflows says so, its range [lowest, max]
    (-3.0 into uint8 is aten's error where -3 wraps to 253): scalar_fits answers as aten's fill
    does, and a masked_fill from a 0-dim float tensor (read on the host per call) raises
    aten's error from the plan too."""
    for dt in (torch.uint8, torch.int8, torch.int16):
        for v in (-3.0, -0.5, 0.5, 2.5, 255.0, 255.5, 256.0, -128.0, -128.5, -129.0, 32767.0, 32768.0):
            try:
                torch.full((3,), v, dtype=dt)
                ok = True
            except RuntimeError:
                ok = False
            assert _plan.scalar_fits(v, dt) == ok, (v, dt)
    x, m = torch.tensor([1, 2, 3], dtype=torch.uint8), torch.tensor([True, False, True])
    with T.enable(include=["masked_fill.Tensor"], wait_native=True):
        assert x.masked_fill(m, torch.tensor(0.5)).tolist() == [0, 2, 0]  # the plan
        for _ in range(2):
            with pytest.raises(RuntimeError, match="overflow"):
                x.masked_fill(m, torch.tensor(-3.0))
        assert x.masked_fill(m, torch.tensor(-3)).tolist() == [253, 2, 253]


# ----------------------------------------------------------------- another device
@pytest.mark.parametrize("ops,fn", [
    (ARANGE, lambda: torch.arange(5, device="meta")),
    (ARANGE, lambda: torch.arange(0.0, 2.0, 0.5, device="meta")),
    (["zeros"], lambda: torch.zeros(2, 3, device="meta")),
    (["full"], lambda: torch.full((2,), 1.5, device="meta")),
])
def test_another_device_goes_to_aten(ops, fn):
    """On the interpreter the active device type is CPU: a ``meta`` factory call is another
    device's, which aten's kernel serves (no plan, no Python implementation), as before."""
    ref = fn()
    got, d = routed(fn, ops)
    assert got.device.type == "meta" and got.shape == ref.shape and got.dtype == ref.dtype
    # (aten's meta arange calls arange.start_step: through enable()'s kernel, to aten again)
    assert d["plan_hits"] == 0 and d["python_calls"] == 0 and d["aten_calls"] >= 1, d


def test_new_zeros_onto_another_device():
    """new_zeros of a CPU tensor onto ``meta``: the planner refuses (its plan's buffers take
    self's device); the call goes where it went before."""
    x = _x()
    ref = x.new_zeros((2, 3), device="meta")
    got, d = routed(lambda: x.new_zeros((2, 3), device="meta"), ["new_zeros"])
    assert got.device.type == "meta" and got.shape == ref.shape and got.dtype == ref.dtype
    assert d["plan_hits"] == 0, d


def test_python_run_takes_a_factory_device():
    """_plan.run executes a factory plan given its device (no tensor argument names one)."""
    p = copy.PLANNERS["arange.start_step"](2, 11, 3)
    got = _plan.run(p, (2, 11, 3), device="cpu")
    assert got.tolist() == [2, 5, 8]


# ----------------------------------------------------------------- the H200's kernels
def test_arange_kernel_compiles_for_sm90():
    """The arange variants these plans launch compile for the H200 (cross-compiled; no GPU)."""
    sigs = ["*i64:16,i32,i32,i32,i32,i32,False,1024", "*i64:16,i32,i64,i32,i64,i32,False,1024",
            "*fp32:16,i32,fp32,fp32,fp32,fp32,True,1024", "*bf16:16,i32,fp32,fp32,fp32,fp32,True,1024",
            "*fp16:16,i32,fp32,fp32,fp32,fp32,True,1024", "*i32:16,i32,i32,i32,i32,i32,False,1024"]
    for sig in sigs:
        k = copy._arange_k.compile(sig, target="cuda:90")
        assert k.binary, sig
