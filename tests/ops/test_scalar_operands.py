"""Python bool scalars in Tensor arguments (a wrapped number: ``mask * True``, as
transformers' generate() computes ``is_pad_token_in_inputs * True``), the Python
path's fallback to aten for a refused call with a number in a Tensor argument, and
Scalar values at the edges of their dtype (a whole float into an integer tensor, a bound
past float16's range, a NaN bound, an integer divisor that wraps to 0, a -0.0) under enable(),
on the Python and the C++ path."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _native_ops, _registry

DTYPES = [torch.bool, torch.int64, torch.int32, torch.float32, torch.bfloat16]


@pytest.mark.parametrize("op", ["add", "mul", "div"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("first", [True, False])
def test_bool_scalar_operand(op, dtype, scalar, first):
    x = torch.tensor([0, 1, 3], dtype=torch.int64).to(dtype)
    args = (x, scalar) if first else (scalar, x)
    ref = getattr(torch, op)(*args)
    got = getattr(T, op)(*args)
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got, ref, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bool_scalar_where(dtype):
    c = torch.tensor([True, False, True])
    x = torch.tensor([0, 1, 3], dtype=torch.int64).to(dtype)
    for a, b in ((x, True), (False, x)):
        ref = torch.where(c, a, b)
        entries = [_registry._ATEN["where.self"]]  # enable()'s Python path: aten where refused
        if dtype != torch.bool:
            entries.append(T.where)
        for where in entries:
            got = where(c, a, b)
            assert got.dtype == ref.dtype
            torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
@pytest.mark.parametrize("args", ["bool tensor - int", "int - bool tensor", "float - 0-dim bool", "bool - bool"])
def test_sub_of_a_bool_tensor_raises_as_aten(args: str, native: bool) -> None:
    """aten refuses sub with a bool operand; the C++ path's plan took it (a bool tensor minus an
    int tensor gave int results)."""
    b, i, f = torch.tensor([True, False, True]), torch.tensor([1, 2, 3], dtype=torch.int32), torch.ones(3)
    x, y = {"bool tensor - int": (b, i), "int - bool tensor": (i, b), "float - 0-dim bool": (f, torch.tensor(True)),
            "bool - bool": (b, b)}[args]
    ref, got = _both_paths(lambda: torch.sub(x, y), native)
    assert ref == "RuntimeError" and got == ref


def test_bool_scalar_sub_raises_as_aten():
    for args in ((torch.tensor([1, 2]), True), (True, torch.tensor([1.0]))):
        with pytest.raises(RuntimeError):
            torch.sub(*args)
        with pytest.raises(TypeError, match="unsupported dtype torch.bool"):
            T.sub(*args)  # a refusal: enable() gives the call to aten, which raises its error


# enable()'s Python path (before the C++ path is built, or with it off): its entries are
# _registry._ATEN's; a call one refuses goes to aten's kernel, numbers in Tensor arguments too.
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
def test_python_path_bool_scalar(dtype):
    x = torch.tensor([0, 1, 3]).to(dtype)
    for name, fn in (("mul.Tensor", torch.mul), ("add.Tensor", torch.add), ("div.Tensor", torch.div)):
        got = _registry._ATEN[name](x, True)
        ref = fn(x, True)
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, equal_nan=True)
    with pytest.raises(RuntimeError, match="Subtraction"):
        _registry._ATEN["sub.Tensor"](x, True)


@pytest.mark.parametrize("x,v", [(torch.tensor([1 + 2j, 3j]), 2.5), (torch.tensor(1 + 2j), 2),
                                 (torch.tensor([1 + 2j], dtype=torch.complex128), True)])
def test_python_path_fallback_takes_a_number_in_a_tensor_argument(x, v):
    for name, fn in (("mul.Tensor", torch.mul), ("add.Tensor", torch.add)):
        for args in ((x, v), (v, x)):
            got = _registry._ATEN[name](*args)  # complex: refused, aten's kernel answers
            ref = fn(*args)
            assert got.dtype == ref.dtype and got.shape == ref.shape
            torch.testing.assert_close(got, ref)


def _both_paths(fn, native: bool):
    """(eager's result or error type, enable()'s) of ``fn``."""
    def call():
        try:
            return fn()
        except Exception as e:  # compared: both sides must raise alike
            return type(e).__name__
    ref = call()
    if native and _native_ops.module(wait=True) is None:
        pytest.skip("no C++ operator path here")
    with T.enable(include="all", wait_native=native):
        got = call()
    return ref, got


_EDGE_CASES = {
    # a whole float into an integer dtype: not through the kernel's fp32 scalar argument
    "fill_ int32 2**31-1": lambda: torch.empty(3, dtype=torch.int32).fill_(2147483647.0),
    "full int64 2**24+1": lambda: torch.full((3,), 16777217.0, dtype=torch.int64),
    "full_like int32": lambda: torch.full_like(torch.empty(3, dtype=torch.int32), 123456789.0),
    "new_full int64": lambda: torch.empty(3, dtype=torch.int64).new_full((2,), 2147483647.0),
    "scalar_tensor int64": lambda: torch.scalar_tensor(16777217.0, dtype=torch.int64),
    # aten's amin of a 0-dim int32 fills its identity, 2147483647.0, with fill_ (routed too)
    "amin int32 0-dim": lambda: torch.amin(torch.tensor(-8, dtype=torch.int32)),
    # values past float16's range: aten's overflow error
    "masked_fill fp16 1e8": lambda: torch.zeros(3, dtype=torch.float16).masked_fill(torch.tensor([True, False, True]),
                                                                                   1e8),
    "masked_fill_ fp16 70000": lambda: torch.zeros(3, dtype=torch.float16).masked_fill_(torch.tensor([True] * 3),
                                                                                       70000),
    "clamp fp16 min 1e8": lambda: torch.zeros(3, dtype=torch.float16).clamp(min=1e8),
    "hardtanh fp16 1e8": lambda: torch.nn.functional.hardtanh(torch.zeros(3, dtype=torch.float16), -1e8, 1e8),
    # a 0-dim tensor's value, alpha and scatter's value checked as aten checks them
    "masked_fill.Tensor fp16 1e8": lambda: torch.zeros(3, dtype=torch.float16).masked_fill(
        torch.tensor([True, False, True]), torch.tensor(1e8)),
    "masked_fill_.Tensor int8 300": lambda: torch.zeros(3, dtype=torch.int8).masked_fill_(
        torch.tensor([True, False, True]), torch.tensor(300)),
    "add alpha fp16 1e8": lambda: torch.add(torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float16),
                                            alpha=1e8),
    "sub_ alpha fp16 1e8": lambda: torch.ones(3, dtype=torch.float16).sub_(torch.ones(3, dtype=torch.float16),
                                                                           alpha=1e8),
    "rsub alpha fp16 1e8": lambda: torch.rsub(torch.ones(3, dtype=torch.float16), 1.0, alpha=1e8),
    "scatter value int8 300": lambda: torch.zeros(4, dtype=torch.int8).scatter(0, torch.tensor([1]), 300),
    # the result type of several operands: a 0-dim tensor bound does not promote a dimensioned
    # tensor of its kind (fp16 stays fp16); a float bound beside an int one makes an int tensor float
    "clamp fp16 by 0-dim fp32 tensors": lambda: torch.linspace(-2, 2, 5, dtype=torch.float16).clamp(
        torch.tensor(-1.0), torch.tensor(1.0, dtype=torch.float64)),
    "clamp int by 1.5 and 3": lambda: torch.arange(5).clamp(1.5, 3),
    "addcmul fp16 by 0-dim fp32 tensors": lambda: torch.addcmul(torch.ones(3, dtype=torch.float16),
                                                                 torch.tensor(2.0), torch.tensor(3.0)),
    "addcdiv 0-dim fp64 self, fp16 tensors": lambda: torch.addcdiv(torch.tensor(1.0, dtype=torch.float64),
                                                                    torch.ones(3, dtype=torch.float16),
                                                                    torch.full((3,), 4.0, dtype=torch.float16)),
    "clamp int by 1 and 3.5": lambda: torch.arange(5).clamp(1, 3.5),
    # a NaN bound of a two-sided clamp makes every element NaN, as aten's clamp on every device
    # (a one-sided NaN bound gives NaN in aten's CPU kernel and is ignored in its CUDA kernel,
    # as in ours: not checked here)
    "clamp nan min": lambda: torch.linspace(-2, 2, 5).clamp(float("nan"), 1.0),
    "clamp nan max": lambda: torch.linspace(-2, 2, 5).clamp(-1.0, float("nan")),
    "hardtanh nan": lambda: torch.nn.functional.hardtanh(torch.linspace(-2, 2, 5), float("nan"), 1.0),
}


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
@pytest.mark.parametrize("case", list(_EDGE_CASES))
def test_scalar_values_at_the_edges_of_their_dtype_are_atens(case: str, native: bool) -> None:
    ref, got = _both_paths(_EDGE_CASES[case], native)
    if isinstance(ref, str):
        assert got == ref, f"{case}: eager raised {ref}, enable() gave {got}"
        return
    assert not isinstance(got, str), f"{case}: enable() raised {got}"
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=0, atol=0)
    for _ in range(2):  # a cached plan serves the next call with the same check
        assert torch.equal(_both_paths(_EDGE_CASES[case], native)[1].nan_to_num(0.5), ref.nan_to_num(0.5))


_INT_DIVISIONS = {
    "remainder": lambda x, v: x % v,
    "remainder_": lambda x, v: x.clone().remainder_(v),
    "fmod": torch.fmod,
    "floor_divide": lambda x, v: x // v,
    "div floor": lambda x, v: torch.div(x, v, rounding_mode="floor"),
    "div_ trunc": lambda x, v: x.clone().div_(v, rounding_mode="trunc"),
}


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
@pytest.mark.parametrize("op", list(_INT_DIVISIONS))
@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.int32])
def test_integer_division_by_a_scalar_that_wraps_to_zero_raises_as_aten(op: str, dtype: torch.dtype,
                                                                        native: bool) -> None:
    """aten converts an integer division's Scalar divisor to the tensor's dtype, wrapping it
    (65536 is 0 in int16, 65539 is 3), and its CPU kernels raise ZeroDivisionError for a 0.
    A plan made for a divisor of 3 must not serve 65536 (the key holds the Scalar's type and
    whether it is 0, not its value); 65539 is served with the wrapped value."""
    x = torch.arange(-3, 4).to(dtype) if dtype != torch.uint8 else torch.arange(0, 7, dtype=dtype)
    bits = torch.iinfo(dtype).bits
    fn = _INT_DIVISIONS[op]
    for v in (3, 1 << bits, (1 << bits) + 3, 0, 3, -(1 << bits) if dtype != torch.uint8 else 3):
        ref, got = _both_paths(lambda v=v: fn(x, v), native)
        if isinstance(ref, str):
            assert got == ref, f"{op} {dtype} by {v}: eager raised {ref}, enable() gave {got}"
            continue
        assert not isinstance(got, str), f"{op} {dtype} by {v}: enable() raised {got}"
        assert got.dtype == ref.dtype and torch.equal(got, ref), (op, dtype, v, got, ref)


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
def test_integer_division_by_a_cpu_tensor_with_a_zero_raises_as_aten(native: bool) -> None:
    x = torch.arange(-3, 4, dtype=torch.int32)
    ok, zero = torch.full((7,), 2, dtype=torch.int32), torch.tensor([1, 2, 0, 1, 1, 1, 1], dtype=torch.int32)
    wraps = torch.tensor(65536)  # a 0-dim int64 tensor: int16's result dtype, where it is 0
    for fn in (torch.remainder, torch.fmod, torch.floor_divide):
        for a, b in ((x, ok), (x, zero), (x, ok), (x.to(torch.int16), wraps)):
            ref, got = _both_paths(lambda fn=fn, a=a, b=b: fn(a, b), native)
            if isinstance(ref, str):
                assert got == ref
            else:
                assert not isinstance(got, str) and torch.equal(got, ref)


def _nz(*shape: int) -> torch.Tensor:
    return torch.full(shape, -0.0)


# where aten's result has a signed zero (1 / result is -inf or inf): -0.0 as a Scalar operand
# (it was added to a block of zeros, which made it +0.0), Triton's unary minus (0 - x: -(+0.0)
# was +0.0) and the odd functions' sign (x < 0 is false for -0.0)
_SIGNED_ZEROS = {
    "mul by -0.0": lambda: torch.linspace(-2, 2, 5) * -0.0,
    "div by -0.0": lambda: torch.linspace(-2, 2, 5) / -0.0,
    "floor_divide by -0.0": lambda: torch.floor_divide(torch.linspace(-2, 2, 5), -0.0),
    "add -0.0": lambda: _nz(3) + -0.0,
    "rsub -0.0": lambda: torch.rsub(_nz(3), -0.0),
    "fill -0.0": lambda: torch.full((3,), -0.0),
    "masked_fill -0.0": lambda: torch.zeros(3).masked_fill(torch.tensor([True, False, True]), -0.0),
    "where -0.0": lambda: torch.where(torch.tensor([True, False]), -0.0, torch.zeros(2)),
    "addcmul value -0.0": lambda: torch.addcmul(_nz(3), torch.ones(3), torch.ones(3), value=-0.0),
    "add alpha -0.0": lambda: torch.add(_nz(3), torch.ones(3), alpha=-0.0),
    "neg": lambda: torch.zeros(3).neg(),
    "neg bf16": lambda: torch.zeros(3, dtype=torch.bfloat16).neg(),
    "neg_": lambda: torch.zeros(3).neg_(),
    "atan2(0, -0.0)": lambda: torch.atan2(torch.zeros(3), _nz(3)),
    "atan2(-0.0, -0.0)": lambda: torch.atan2(_nz(3), _nz(3)),
    "atan2(-0.0, 1)": lambda: torch.atan2(_nz(3), torch.ones(3)),
    "atan": lambda: _nz(3).atan(), "asin": lambda: _nz(3).asin(), "sinh": lambda: _nz(3).sinh(),
    "asinh": lambda: _nz(3).asinh(),
    "pow(-0.0, tensor)": lambda: torch.pow(_nz(5), torch.tensor([1.0, 0.5, 3.0, -1.0, -0.5])),
}


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
@pytest.mark.parametrize("case", list(_SIGNED_ZEROS))
def test_signed_zeros_are_atens(case: str, native: bool) -> None:
    ref, got = _both_paths(_SIGNED_ZEROS[case], native)
    assert not isinstance(got, str), f"{case}: enable() raised {got}"
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(torch.signbit(got), torch.signbit(ref)), f"{case}: {got.tolist()} against aten's {ref.tolist()}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["clamp", "clamp_min", "addcmul", "addcdiv"])
def test_a_cpu_0dim_operand_of_clamp_or_addcmul_raises_as_aten(case: str) -> None:
    """aten's clamp with tensor bounds and addcmul/addcdiv take no CPU scalars beside device
    tensors (they raise); ours computed them, reading the CPU value on the host."""
    x = torch.ones(3, dtype=torch.float16, device="cuda")
    fn = {"clamp": lambda: x.clamp(torch.tensor(-1.0), torch.tensor(0.5)),
          "clamp_min": lambda: x.clamp(min=torch.tensor(2.0)),
          "addcmul": lambda: torch.addcmul(x, torch.tensor(2.0), torch.tensor(3.0)),
          "addcdiv": lambda: torch.addcdiv(x, x, torch.tensor(3.0))}[case]
    ref, got = _both_paths(fn, True)
    assert ref == "RuntimeError" and got == ref


def _ints(dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Integers a 16-bit float does not hold (257, 1025, ...): aten rounds them to it first."""
    return (torch.arange(-12, 12) * 257 + 3).to(dtype)


def _halves(dtype: torch.dtype) -> torch.Tensor:
    return torch.linspace(-40, 40, 24).to(dtype)


_MIXES = {
    "bf16 + int64": lambda: _halves(torch.bfloat16) + _ints(),
    "int64 - bf16": lambda: _ints() - _halves(torch.bfloat16),
    "bf16 * int32": lambda: _halves(torch.bfloat16) * _ints(torch.int32),
    "fp16 / int64": lambda: _halves(torch.float16) / (_ints() * 3 + 1),
    # alpha 2: alpha * bf16(i) is exact in bf16, where CPU aten rounds it before adding (its
    # CUDA kernel, as ours, adds in fp32 and rounds once)
    "bf16 add alpha int16": lambda: torch.add(_halves(torch.bfloat16), _ints(torch.int16), alpha=2),
    "bf16 add_ int64": lambda: _halves(torch.bfloat16).add_(_ints()),
    "bf16 maximum int64": lambda: torch.maximum(_halves(torch.bfloat16) * 64, _ints()),
    "bf16 floor_divide int64": lambda: torch.floor_divide(_ints(), _halves(torch.bfloat16).abs() + 1),
    "bf16 rsub int64": lambda: torch.rsub(_halves(torch.bfloat16), _ints()),
    "bf16 + 0-dim fp32": lambda: _halves(torch.bfloat16) - torch.tensor(0.3),
    "bf16 + int8 (exact)": lambda: _halves(torch.bfloat16) + _ints(torch.int8),
    "bf16 + int64 past 2**24": lambda: _halves(torch.bfloat16) + (torch.arange(24) * 8421505 + 16777217),
    "bf16 addcmul int64": lambda: torch.addcmul(_halves(torch.bfloat16), _ints(), _halves(torch.bfloat16), value=0.5),
    "bf16 * int64 mask, broadcast": lambda: _halves(torch.bfloat16).view(4, 6) * (_ints().view(4, 6)[:, :1] > 0).long(),
}


@pytest.mark.parametrize("native", [False, True], ids=["python", "cxx"])
@pytest.mark.parametrize("case", list(_MIXES))
def test_a_tensor_operand_is_rounded_to_a_16_bit_common_dtype_as_aten(case: str, native: bool) -> None:
    """aten casts each tensor operand to the common dtype before it computes (``x_bf16 + i``
    adds bf16(257) = 256): every path gives aten's bits."""
    ref, got = _both_paths(_MIXES[case], native)
    assert not isinstance(ref, str) and not isinstance(got, str), (ref, got)
    assert got.dtype == ref.dtype and torch.equal(got, ref), (case, (got.double() - ref.double()).abs().max())


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum"])
def test_direct_entries_round_a_tensor_operand_to_the_common_dtype(op: str) -> None:
    x, i = _halves(torch.bfloat16), _ints() * 2 + 1
    ref = getattr(torch, op)(x, i)
    for got in (getattr(T, op)(x, i), getattr(torch.ops.tritonjit, op)(x, i)):
        assert got.dtype == ref.dtype and torch.equal(got, ref)


_PLANNED_MIXES = {
    "mul.Tensor": lambda: (_halves(torch.bfloat16), _ints()),  # a padding mask multiplied in
    "add.Tensor": lambda: (_halves(torch.float16), _ints(torch.int32).view(4, 6)[:, :1]),  # broadcast
    "sub.Tensor": lambda: (_halves(torch.bfloat16), torch.tensor(0.3)),  # a 0-dim fp32 tensor
    "maximum": lambda: (_halves(torch.bfloat16), _ints()),
    "div.Tensor": lambda: (_halves(torch.bfloat16).view(4, 6).t(), _ints().view(6, 4) * 3 + 1),  # transposed
    "mul_.Tensor": lambda: (_halves(torch.bfloat16), _ints()),  # in place
}


def _rt(launch) -> str | None:
    return dict(zip(launch.fn._param_names, launch.args)).get("RT")


@pytest.mark.parametrize("op", list(_PLANNED_MIXES))
def test_operands_rounded_to_the_common_dtype_run_on_tritonjit_kernels(op: str) -> None:
    """Such calls are planned on tritonjit's kernels, which round the operand themselves
    (elementwise.rounding_type: the launch's RT), not handed to aten's kernel: an int64 mask
    multiplied into bf16 activations stays covered."""
    args = _PLANNED_MIXES[op]()
    plan = _registry._PLANNERS[op](*args)
    assert plan is not None and not plan.aten, op
    assert any(_rt(L) in ("bf16", "fp16") for L in plan.launches), plan.launches
    # and a call whose operands aten does not round keeps the variant of before (no RT)
    same = _registry._PLANNERS[op](*[a.to(args[0].dtype) if isinstance(a, torch.Tensor) else a for a in args])
    assert same is not None and all(_rt(L) is None for L in same.launches), op


def test_rounding_kernels_compile_for_sm90() -> None:
    """The kernels that round an int64 operand to bf16 compile for a GPU: int64 -> fp32, then
    bf16 in integer steps (c10's BFloat16 rounds a float: Triton folds a compiled int -> fp32 ->
    bf16 cast into one cvt.rn.bf16.s64, which rounds once, not twice, past 2**24)."""
    from tritonjit_ops import elementwise, pointwise

    ptx = pointwise._binary_flat.compile("*bf16:16,*i64:16,*bf16:16,i32,fp32,'mul',1024,False,False,True,'bf16',False",
                                         target="cuda:90").asm["ptx"]
    assert "cvt.rn.f32.s64" in ptx and "cvt.rn.bf16.s64" not in ptx and "32767" in ptx
    sig = ("*bf16:16,*i64:16,*bf16:16,*bf16:16,i32,fp32,fp32,fp32,i32,i32,i32," + "i32," * 16
           + "'addcmul',3,'fp32',True,False,False,False,1024,False,True,False,nullopt,'bf16'")
    ptx = elementwise._ew.compile(sig, target="cuda:90").asm["ptx"]
    assert "cvt.rn.f32.s64" in ptx and "cvt.rn.bf16.s64" not in ptx and "32767" in ptx
