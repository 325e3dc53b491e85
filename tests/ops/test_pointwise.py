import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from _util import FLOATS, close, strided

BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", BINARY + ["pow"])
def test_binary_same_shape(op, dtype):
    x = torch.randn(3, 37).to(dtype)
    y = torch.randn(3, 37).to(dtype)
    if op == "pow":
        x = x.abs() + 0.5
    close(getattr(T, op)(x, y), getattr(torch, op)(x, y))


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", [((4, 1, 5), (3, 1)), ((5,), (2, 3, 5)), ((2, 1, 3, 1, 2), (1, 4, 1, 5, 1))])
def test_binary_broadcast(op, shapes):
    x, y = torch.randn(shapes[0]), torch.randn(shapes[1])
    close(getattr(T, op)(x, y), getattr(torch, op)(x, y))


@pytest.mark.parametrize("op", BINARY)
def test_binary_strided(op):
    x = torch.randn(6, 5).t()
    y = strided(torch.randn(5, 6))
    close(getattr(T, op)(x, y), getattr(torch, op)(x, y))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize("scalar", [2, -1.5, 0.5])
@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_scalar(op, scalar, dtype):
    x = torch.rand(4, 9).to(dtype) + 0.1
    close(getattr(T, op)(x, scalar), getattr(torch, op)(x, scalar))
    if op != "pow":
        close(getattr(T, op)(scalar, x), getattr(torch, op)(scalar, x))


def test_pow_special_values():
    x = torch.tensor([-2.0, -2.0, 0.0, 0.0, 1.0, -1.0, 3.0, -0.5])
    y = torch.tensor([3.0, 2.0, 0.0, -1.0, float("nan"), 0.5, -2.0, 2.0])
    close(T.pow(x, y), torch.pow(x, y))
    close(T.pow(2.0, y), torch.pow(2.0, y))


_POW_VALUES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
               2.5, -2.5, 1e-30, -1e-30, 1e30, -1e30]


def _same_as_aten(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per element: equal to 2e-6 relative with the same sign bit (signed zeros and
    infinities included), or both NaN."""
    near = (got == ref) | ((got - ref).abs() <= 2e-6 * ref.abs())
    return (near & (torch.signbit(got) == torch.signbit(ref))) | (got.isnan() & ref.isnan())


def test_pow_of_every_pair_of_special_values_is_atens():
    """C's pow at the edges, as aten's pow of a tensor exponent: (-inf) ** 0.5 is inf,
    (-0.0) ** 3 is -0.0, (-1) ** inf is 1, (-0.0) ** -0.5 inf; a Scalar exponent as aten's
    (0.5 and -0.5 are sqrt and rsqrt there: (-0.0) ** 0.5 is -0.0)."""
    a, b = (torch.tensor(v) for v in zip(*[(p, q) for p in _POW_VALUES for q in _POW_VALUES]))
    ok = _same_as_aten(T.pow(a, b), torch.pow(a, b))
    assert ok.all(), [(a[i].item(), b[i].item()) for i in (~ok).nonzero().flatten().tolist()]
    x = torch.tensor(_POW_VALUES)
    for e in _POW_VALUES:
        ok = _same_as_aten(T.pow(x, e), torch.pow(x, e))
        assert ok.all(), [(x[i].item(), e) for i in (~ok).nonzero().flatten().tolist()]


@pytest.mark.parametrize("alpha", [2, 0.5])
def test_alpha(alpha):
    x, y = torch.randn(7), torch.randn(3, 7)
    close(T.add(x, y, alpha=alpha), torch.add(x, y, alpha=alpha))
    close(T.sub(x, y, alpha=alpha), torch.sub(x, y, alpha=alpha))


@pytest.mark.parametrize("a,b", [(torch.float16, torch.float32), (torch.bfloat16, torch.float16),
                                 (torch.int32, torch.float16), (torch.int64, torch.int32)])
def test_type_promotion(a, b):
    x = (torch.randn(10) * 5).to(a)
    y = (torch.randn(10) * 5).to(b)
    for op in ("add", "mul", "maximum"):
        close(getattr(T, op)(x, y), getattr(torch, op)(x, y))
    close(T.div(x, y.abs() + 1 if b.is_floating_point else y.abs() + 1), torch.div(x, y.abs() + 1))


def test_integer_ops():
    x = torch.randint(-50, 50, (5, 6))
    y = torch.randint(-50, 50, (6,))
    for op in ("add", "sub", "mul", "maximum", "minimum"):
        close(getattr(T, op)(x, y), getattr(torch, op)(x, y))
    close(T.add(x, 3, alpha=2), torch.add(x, 3, alpha=2))
    close(T.div(x, 7), torch.div(x, 7))
    close(T.neg(x), torch.neg(x))
    close(T.abs(x), torch.abs(x))


def test_bool_arithmetic():
    a, b = torch.rand(9) > 0.5, torch.rand(9) > 0.5
    for op in ("add", "mul", "maximum", "minimum"):
        close(getattr(T, op)(a, b), getattr(torch, op)(a, b))


def test_zero_dim_and_empty():
    x = torch.randn(3, 4)
    s = torch.tensor(2.5)
    close(T.mul(x, s), torch.mul(x, s))
    close(T.add(s, s), torch.add(s, s))
    e = torch.randn(0, 4)
    close(T.add(e, x[:1]), torch.add(e, x[:1]))
    close(T.exp(e), torch.exp(e))


def test_nan_propagation():
    x = torch.tensor([1.0, float("nan"), 3.0])
    y = torch.tensor([float("nan"), 2.0, 1.0])
    close(T.maximum(x, y), torch.maximum(x, y))
    close(T.minimum(x, y), torch.minimum(x, y))
    close(T.relu(x), torch.relu(x))


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu, "silu": F.silu,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op, dtype):
    x = torch.randn(5, 41).to(dtype) * 3
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 0.01
    close(getattr(T, op)(x), UNARY[op](x))
    close(getattr(T, op)(x.t()), UNARY[op](x.t()))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu(approximate, dtype):
    x = (torch.randn(3, 50) * 4).to(dtype)
    close(T.gelu(x, approximate), F.gelu(x, approximate=approximate))


def test_unary_int_to_float():
    x = torch.arange(1, 8)
    close(T.exp(x), torch.exp(x))
    close(T.sqrt(x), torch.sqrt(x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_where(dtype):
    c = torch.randn(4, 1, 6) > 0
    x = torch.randn(5, 6).to(dtype)
    y = torch.randn(4, 5, 1).to(dtype)
    close(T.where(c, x, y), torch.where(c, x, y))
    close(T.where(c, x, 0.5), torch.where(c, x, 0.5))
    close(T.where(c, -1.0, x.t().t()), torch.where(c, -1.0, x))


def test_high_rank_broadcast_falls_back_to_materialized_views():
    x = torch.randn(2, 1, 3, 1, 2, 1)
    y = torch.randn(1, 2, 1, 3, 1, 2)
    close(T.add(x, y), x + y)


def test_out_argument():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = torch.empty(3, 4)
    assert T.add(x, y, out=out) is out
    close(out, x + y)
    out_nc = torch.empty(4, 3).t()
    T.mul(x, y, out=out_nc)
    close(out_nc, x * y)


# ------------------------------------------------------------------ bad input
def test_bad_broadcast():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) "
                                           r"at non-singleton dimension 1"):
        T.add(torch.randn(2, 3), torch.randn(2, 4))


def test_bad_dtype():
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.add(torch.ones(3, dtype=torch.complex64), torch.ones(3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.exp(torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError):
        T.add(torch.ones(3), "a")


def test_bad_out():
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="shape"):
        T.add(x, x, out=torch.empty(4, 3))
    with pytest.raises(RuntimeError, match="dtype"):
        T.add(x, x, out=torch.empty(3, 4, dtype=torch.float16))


def test_bad_device():
    x = torch.randn(3)
    y = torch.randn(3, device="meta")
    with pytest.raises(RuntimeError, match="same device"):
        T.mul(x[None].expand(2, 3), y)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum"])
def test_bad_device_on_the_fast_path(op):
    """Same shape, dtype and contiguity (the hot path, which does not compare devices up
    front): still torch's message, also for empty operands."""
    for n in (3, 0):
        x, y = torch.randn(n), torch.randn(n, device="meta")
        with pytest.raises(RuntimeError, match="same device"):
            getattr(T, op)(x, y)


def test_bad_gelu_approximate():
    with pytest.raises(RuntimeError, match="approximate"):
        T.gelu(torch.randn(3), "fast")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_gpu_pointwise(dtype):
    x = torch.randn(1 << 20, device="cuda", dtype=dtype)
    y = torch.randn(1024, 1 << 10, device="cuda", dtype=dtype)
    for op in BINARY:
        close(getattr(T, op)(x.view(1024, -1), y), getattr(torch, op)(x.view(1024, -1), y))
        close(getattr(T, op)(x.view(1024, -1).t(), y[0]), getattr(torch, op)(x.view(1024, -1).t(), y[0]))
    for op, ref in UNARY.items():
        v = x.abs() + 0.01 if op in ("log", "sqrt", "rsqrt") else x
        close(getattr(T, op)(v), ref(v))


@pytest.mark.gpu
def test_gpu_bad_device_on_the_fast_path():
    x = torch.randn(1024, device="cuda")
    for y in (torch.randn(1024), x.new_empty(0).cpu()):
        x_ = x if y.numel() else x[:0]
        with pytest.raises(RuntimeError, match="same device"):
            T.add(x_, y)
        with pytest.raises(RuntimeError, match="same device"):
            T.mul(y, x_)
    if torch.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="same device"):
            T.add(x, x.to("cuda:1"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_abs_of_negative_zero_is_positive_zero_on_every_path(dtype):
    """abs(-0.0) is +0.0 (the sign bit cleared), through the direct entry, the strided
    kernel (a transposed view), the in-place and out= forms under enable()."""
    x = torch.tensor([[-0.0, 0.0], [-2.5, 3.0]], dtype=dtype)
    want = torch.abs(x)
    assert not torch.signbit(T.abs(x)).any()
    T.enable(include="all")
    try:
        got = [torch.abs(x), torch.abs(x.t()).t(), x.clone().abs_(), torch.abs(x, out=torch.empty_like(x))]
    finally:
        T.disable()
    for g in got:
        assert torch.equal(g, want) and not torch.signbit(g).any()


@pytest.mark.parametrize("exponent", [2, 3, -0.5, -1, -2])
def test_pow_exact_exponents_match_aten(exponent):
    """aten computes x**2, x**3, x**-0.5, x**-1 and x**-2 by multiplication, rsqrt and division;
    exp2(b * log2(x)) missed them by up to 30 fp32 ulps (relative 2e-6, and 2e-5 on OpInfo's
    large values), so these exponents take the exact forms: bit-identical results in fp32."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g) * 3
    x[:4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")])
    ref = torch.pow(x, exponent)
    torch.testing.assert_close(T.pow(x, exponent), ref, rtol=0, atol=0, equal_nan=True)
    got = T.pow(x, torch.full_like(x, exponent))
    torch.testing.assert_close(got[4:], ref[4:], rtol=0, atol=0, equal_nan=True)
    # the special values as aten's pow of a tensor exponent (C's pow): (-0.0) ** -0.5 is inf
    # there, where its Scalar exponent's rsqrt gives -inf
    special = torch.pow(x[:4], torch.full_like(x[:4], exponent))
    torch.testing.assert_close(got[:4], special, rtol=0, atol=0, equal_nan=True)
    with T.enable(include=["pow.Tensor_Scalar"]):
        got = torch.pow(x, exponent)
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)


def test_div_rounds_to_nearest_on_the_gpu():
    """fp32 division compiles to the IEEE divide (div.rn), as aten's: Triton's '/' is the
    approximate one on NVIDIA GPUs (2 ulp), which floor/trunc division turned into quotients
    one off from aten's (cross-compiled for sm_90; no GPU needed)."""
    from tritonjit_ops import elementwise, pointwise

    k = pointwise._binary_flat.compile("*fp32:16,*fp32:16,*fp32:16,i32,fp32,'div',1024,False,False,False,nullopt,False",
                                       target="cuda:90")
    assert "div.rn.f32" in k.asm["ptx"] and "div.full.f32" not in k.asm["ptx"]
    # unravelled, indexed by the flat offset, and that with 64-bit offsets
    for idx64, flat in (("False", "False"), ("False", "True"), ("True", "True")):
        sig = ("*fp32:16,*fp32:16,i32,*fp32:16,i32,fp32,fp32,fp32,i32,i32,i32," + "i32," * 16
               + f"'div_floor',2,'fp32',True,False,False,True,1024,{idx64},{flat},False,nullopt,nullopt")
        k = elementwise._ew.compile(sig, target="cuda:90")
        assert "div.rn.f32" in k.asm["ptx"] and "div.full.f32" not in k.asm["ptx"]


@pytest.mark.parametrize("op", ["logical_and_", "logical_or_", "logical_xor_", "add_", "mul_"])
def test_inplace_broadcast_to_a_larger_shape_raises_as_aten(op):
    """x.op_(y) where y broadcasts x to a larger (here empty) shape: aten refuses to resize self,
    also on the path that reaches the out= overload with out=self."""
    x, y = torch.empty(0, 1, 3), torch.empty(0, 10, 3)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(x.clone(), op)(y)
    with T.enable(include="all"), pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(x.clone(), op)(y)


def test_floor_and_trunc_division_match_aten_at_integer_quotients():
    g = torch.Generator().manual_seed(0)
    special = [6.0, -6.0, 0.3, -0.3, 7.0, 1e-3, -4.0938, 2.8750, -0.0, 0.0, 1.0, float("inf"), -5.0, 0.0]
    divisors = [3.0, 3.0, 0.1, 0.1, -3.5, 1e-3, 2.0469, -0.8125, 2.0, -2.0, 0.0, 2.0, float("inf"), 0.0]
    a = torch.cat([torch.tensor(special), (torch.randn(4000, generator=g) * 8).round(decimals=2)])
    b = torch.cat([torch.tensor(divisors), (torch.randn(4000, generator=g) * 2).round(decimals=1)])
    with T.enable(include="all"):
        got = [torch.div(a, b, rounding_mode=m) for m in ("floor", "trunc")] + [torch.remainder(a, b), a / b]
    ref = [torch.div(a, b, rounding_mode=m) for m in ("floor", "trunc")] + [torch.remainder(a, b), a / b]
    for x, r in zip(got, ref):
        torch.testing.assert_close(x, r, rtol=0, atol=0, equal_nan=True)
        num = ~torch.isnan(r)
        assert torch.equal(torch.signbit(x[num]), torch.signbit(r[num]))


@pytest.mark.parametrize("e", [2, 3, 0.5, -0.5, -1, -2, 2.5])
def test_pow_in_place_and_out_take_the_exact_forms(e):
    """x.pow_(e) and pow(x, e, out=) (the strided elementwise kernel) give aten's exact forms
    as x.pow(e) does (the pointwise kernel): one definition, _math.pow_scalar/pow_tensor."""
    x = torch.rand(257, dtype=torch.float32, generator=torch.Generator().manual_seed(21)) * 3 + 0.1
    # exact products and quotients; square roots differ by an ulp between libraries (aten's CPU
    # sqrt is not always correctly rounded); other exponents go through exp2/log2
    tol = {0.5: dict(rtol=1.2e-7, atol=0), -0.5: dict(rtol=1.2e-7, atol=0), 2.5: dict(rtol=4e-6, atol=0)}.get(
        e, dict(rtol=0, atol=0))
    with T.enable(include="all"):
        got_inplace = x.clone().pow_(e)
        out = torch.empty_like(x)
        torch.pow(x, e, out=out)
        got_tensor = x.pow(torch.full_like(x, float(e)))
    torch.testing.assert_close(got_inplace, x.pow(e), **tol)
    torch.testing.assert_close(out, x.pow(e), **tol)
    torch.testing.assert_close(got_tensor, x.pow(e), **tol)


def test_pow_scalar_exponent_kernels_compile_for_sm90():
    from tritonjit_ops import elementwise, pointwise

    pointwise._binary_flat.compile("*bf16:16,fp32,*bf16:16,i32,fp32,'pow',1024,False,True,True,nullopt,False", target="cuda:90")
    sig = ("*fp32:16,fp32,i32,*fp32:16,i32,fp32,fp32,fp32,i32,i32,i32," + "i32," * 16
           + "'pow',2,'fp32',True,False,True,True,1024,False,")
    for flat in ("False", "True"):
        elementwise._ew.compile(sig + flat + ",False,nullopt,nullopt", target="cuda:90")


def _bf16_ties(device: str) -> torch.Tensor:
    """fp32 values whose bf16 rounding is a tie (both parities), near-ties, and specials."""
    g = torch.Generator().manual_seed(3)
    base = (torch.randn(4096, generator=g) * 100).to(torch.bfloat16).float()
    bits = base.view(torch.int32)
    ties = (bits | 0x8000).view(torch.float32)  # exactly halfway to the next bf16
    near = (bits | 0x7FFF).view(torch.float32)  # just below halfway
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 3.4e38, -3.4e38, 1e-40, float("nan")])
    return torch.cat([base, ties, near, special]).to(device)


def _same_bits(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal bf16 bits (signed zeros apart), NaN where aten has NaN (its payload aside)."""
    nan = want.isnan()
    return got.dtype == want.dtype and torch.equal(got.isnan(), nan) and torch.equal(
        got[~nan].view(torch.int16), want[~nan].view(torch.int16))


def test_bf16_outputs_round_in_the_kernel_only_on_the_interpreter():
    """The strided kernel's fp32 -> bf16 store: on the interpreter (whose cast truncates) in
    integer steps to the nearest even; compiled for a device, the hardware's round-to-nearest
    cast (sm_90: cvt.rn.bf16.f32) without the integer steps. Both give aten's values."""
    from tritonjit_ops import elementwise as E

    x = _bf16_ties("cpu")
    with T.enable(include="all", wait_native=True):
        got = [x.to(torch.bfloat16), x.view(2, -1).t().to(torch.bfloat16)]
    assert _same_bits(got[0], x.to(torch.bfloat16))
    assert _same_bits(got[1], x.view(2, -1).t().to(torch.bfloat16))
    out = torch.empty(4, dtype=torch.bfloat16)
    assert E._soft_bf16(out, [torch.ones(4)]) and not E._soft_bf16(torch.empty(4), [out])
    assert not E._soft_bf16(torch.empty(4, dtype=torch.bfloat16, device="meta"), [])
    sig = ("*fp32:16,i32,i32,*bf16:16,i32,fp32,fp32,fp32,i32,i32,i32," + "i32," * 16
           + "'copy',1,'fp32',True,False,True,True,1024,False,True,")
    ptx = {rtne: E._ew.compile(sig + rtne + ",nullopt,nullopt", target="cuda:90").asm["ptx"] for rtne in ("False", "True")}
    assert "cvt.rn.bf16.f32" in ptx["False"] and "32767" not in ptx["False"]
    assert "32767" in ptx["True"]
    # AMD targets (the hcu plugin's) have no such instruction: Triton's own cast rounds to
    # nearest even there in integer steps, the same as ours
    llir = E._ew.compile(sig + "False,nullopt,nullopt", target="hip:gfx90a").asm["llir"]
    assert ", 32767" in llir


@pytest.mark.gpu
def test_gpu_bf16_outputs_round_as_aten():
    """Device casts and ops into bf16 (the hardware's rounding): aten's bits, ties included."""
    x = _bf16_ties("cuda")
    y = torch.randn_like(x)
    with T.enable(wait_native=True):
        got = [x.to(torch.bfloat16), x.view(2, -1).t().to(torch.bfloat16),
               torch.add(x.to(torch.bfloat16), y.to(torch.bfloat16))]
        z = torch.empty(x.shape, dtype=torch.bfloat16, device="cuda")
        z.copy_(x)
    want = [x.to(torch.bfloat16), x.view(2, -1).t().to(torch.bfloat16),
            torch.add(x.to(torch.bfloat16), y.to(torch.bfloat16))]
    for g, w in zip(got + [z], want + [want[0]]):
        assert _same_bits(g, w)


def _erf_points(device: str) -> torch.Tensor:
    """Both sides of erf's two polynomials (|x| = 0.9277), its tails, zeros and specials."""
    x = torch.cat([torch.linspace(-7, 7, 20001), torch.linspace(0.92, 0.935, 1001), -torch.linspace(0.92, 0.935, 1001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, float("inf"), float("-inf"), float("nan")])])
    return x.to(device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erf_and_gelu_are_accurate_to_float64(dtype):
    """erf without a branch (both float polynomials evaluated, one selected), and the gelu
    forward and backward built on it: within 2 ulp of 1 of float64's values over the whole
    line, both sides of the switch at |x| = 0.9277 included; float64 keeps the double erf."""
    x = _erf_points("cpu").to(dtype)
    xd = x.double()
    with T.enable(include="all"):
        got = {"erf": torch.erf(x), "erfc": torch.erfc(x), "gelu": F.gelu(x),
               "gelu_backward": torch.ops.aten.gelu_backward(torch.ones_like(x), x)}
    cdf = 0.5 * (1 + torch.erf(xd * 0.7071067811865476))
    want = {"erf": torch.erf(xd), "erfc": torch.erfc(xd), "gelu": xd * cdf,
            "gelu_backward": cdf + xd * torch.exp(-0.5 * xd * xd) * 0.3989422804014327}
    ulp = 2.0 ** -23 if dtype == torch.float32 else 2.0 ** -52
    finite = x.isfinite()
    for k, v in got.items():
        assert v.dtype == dtype
        err = (v.double() - want[k]).abs() / xd.abs().clamp(min=1)
        assert err[finite].max().item() <= 2 * ulp, (k, err[finite].max().item())
        assert torch.equal(v[~finite].isnan(), want[k][~finite].isnan()), k
    assert got["erf"][-3:-1].tolist() == [1.0, -1.0]
    assert torch.equal(got["erf"][-7:-5].signbit(), torch.tensor([False, True]))  # erf(-0.0) is -0.0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_gpu_erf_and_gelu_match_aten(dtype):
    """On the device: erf, erfc, gelu and its backward agree with aten's (libdevice) values."""
    x = _erf_points("cuda").to(dtype)
    x = torch.cat([x, torch.randn(1 << 20, device="cuda").mul(3).to(dtype)])
    dy = torch.randn_like(x)
    want = [torch.erf(x), torch.erfc(x), F.gelu(x), torch.ops.aten.gelu_backward(dy, x)]
    with T.enable(include="all"):
        got = [torch.erf(x), torch.erfc(x), F.gelu(x), torch.ops.aten.gelu_backward(dy, x)]
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_trunc_division_rounds_the_quotient_first_as_aten(dtype):
    """aten divides two half tensors in their own type, so the quotient rounds before it is
    truncated (2.9995 -> 3.0 -> 3, not 2); a Scalar divisor's quotient does not round. Same
    values as aten on every layout, in place, and in fmod's gradient (which divides so)."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(40000, generator=g) * 8).to(dtype)
    b = (torch.randn(40000, generator=g) * 3).to(dtype)
    assert not torch.equal(torch.trunc(a.float() / b.float()).to(dtype), torch.div(a, b, rounding_mode="trunc"))
    with T.enable(include="all"):
        got = [torch.div(a, b, rounding_mode="trunc"),
               torch.div(a.view(200, 200).t(), b.view(200, 200).t(), rounding_mode="trunc"),
               a.clone().div_(b, rounding_mode="trunc"), torch.div(a, 0.7, rounding_mode="trunc")]
    want = [torch.div(a, b, rounding_mode="trunc"),
            torch.div(a.view(200, 200).t(), b.view(200, 200).t(), rounding_mode="trunc"),
            a.clone().div_(b, rounding_mode="trunc"), torch.div(a, 0.7, rounding_mode="trunc")]
    for x, y in zip(got, want):
        assert torch.equal(x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_half_trunc_division_matches_aten(dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.randn(1 << 20, device="cuda", generator=g) * 8).to(dtype)
    b = (torch.randn(1 << 20, device="cuda", generator=g) * 3).to(dtype)
    with T.enable(include="all"):
        got = torch.div(a, b, rounding_mode="trunc")
    assert torch.equal(got, torch.div(a, b, rounding_mode="trunc"))


@pytest.mark.parametrize("dtype,minus_one", [(torch.bfloat16, "0xBF80"), (torch.float16, "0xBC00")])
def test_sign_of_half_compiles_to_minus_one_for_sm90(dtype, minus_one):
    """sign's integer -1/0 select, converted to float, folded into sitofp(i1), which LLVM's
    NVPTX backend lowered as +1 for a bf16 result: every negative input gave 1 on the H200
    (PyTorch's OpInfo samples found it). The kernel selects float constants: its sm_90 PTX
    selects -1.0 itself and converts no integer to the half type."""
    from tritonjit_ops import elementwise as E

    x, out = torch.empty(400, dtype=dtype), torch.empty(400, dtype=dtype)
    launch = E.plan("sign", [torch.empty(20, 20, dtype=dtype)], dtype, "fp32", aten_layout=True).launches[0]
    args = [x if type(a).__name__ == "In" else out if type(a).__name__ == "Out" else a for a in launch.args]
    args[[p.name for p in launch.fn.params].index("RTNE")] = False  # a device's store (cast in hardware)
    ptx = launch.fn.compile(launch.fn.signature(*args), target="cuda:90").asm["ptx"]
    assert minus_one in ptx
    assert ".s32" not in "".join(line for line in ptx.splitlines() if "cvt.rn.bf16" in line or "cvt.rn.f16" in line)
    with T.enable(include=["sign"]):
        got = torch.sign(torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan")], dtype=dtype))
    assert torch.equal(got, torch.sign(torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan")], dtype=dtype)))


@pytest.mark.parametrize("call", ["mul", "add", "rotary", "where", "exp", "neg", "mul by a real tensor"])
def test_complex_calls_run_atens_kernel_without_python(call):
    """Complex operands (the complex RoPE some models write as view_as_complex(q) * freqs_cis)
    are planned as aten's on the C++ path: aten's result, and no trip through the Python
    implementation per call, which refused them each time (about twice eager's cost)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 4, 16, generator=g)
    z = torch.view_as_complex(q.reshape(2, 8, 4, 8, 2))
    freqs = torch.polar(torch.ones(8, 1, 8), torch.randn(8, 1, 8, generator=g))
    fn = {"mul": lambda: z * freqs, "add": lambda: z + z, "exp": lambda: torch.exp(z), "neg": lambda: -z,
          "rotary": lambda: torch.view_as_real(torch.view_as_complex(q.reshape(2, 8, 4, 8, 2)) * freqs).flatten(3),
          "where": lambda: torch.where(q[..., :8] > 0, z, freqs), "mul by a real tensor": lambda: z * q[..., :8]}[call]
    ref = fn()
    with T.enable(include=["mul.Tensor", "add.Tensor", "exp", "neg", "where.self"], wait_native=True):
        fn()  # the first call makes the plans
        before = native.stats()
        got = fn()
        delta = stats_delta(before, native.stats())
    assert got.dtype == ref.dtype and torch.equal(got, ref)
    assert delta["python_calls"] == 0 and delta["aten_calls"] >= 1, delta


_Z = {"z": lambda: torch.view_as_complex(torch.randn(4, 8, 2, generator=torch.Generator().manual_seed(1))),
      "w": lambda: torch.view_as_complex(torch.randn(4, 8, 2, generator=torch.Generator().manual_seed(2)))}
COMPLEX_CALLS = {
    "cat": lambda z, w: torch.cat([z, w]), "stack": lambda z, w: torch.stack([z, w]),
    "zeros_like": lambda z, w: torch.zeros_like(z), "ones_like": lambda z, w: torch.ones_like(z),
    "any": lambda z, w: z.any(), "mul by a float": lambda z, w: z * 2.5, "mul by a complex": lambda z, w: z * 1j,
    "eq": lambda z, w: z == w, "masked_fill": lambda z, w: z.masked_fill(z.real > 0, 0),
    "repeat": lambda z, w: z.repeat(2, 1), "pad": lambda z, w: torch.nn.functional.pad(z, (1, 1)),
    "index_select": lambda z, w: z.index_select(0, torch.tensor([1, 0])), "zero_": lambda z, w: z.clone().zero_(),
    "fill_": lambda z, w: z.clone().fill_(1.0), "cumsum": lambda z, w: z.cumsum(0), "mm": lambda z, w: z @ w.t(),
    "reciprocal": lambda z, w: z.reciprocal(), "gather": lambda z, w: z.gather(1, torch.zeros(4, 2, dtype=torch.long)),
    "to a complex dtype": lambda z, w: z.real.to(torch.complex64),
    # lazily conjugated and negated views (autograd's complex mul backward multiplies by
    # ``other.conj()``; ``z.conj().imag`` is a real tensor with the negative bit): no call key
    # describes them, and the C++ path hands them to aten's kernel itself
    "clone of a conjugate view": lambda z, w: z.conj().clone(), "mul by a conjugate": lambda z, w: z * w.conj(),
    "clone of a negative view": lambda z, w: z.conj().imag.clone(),
    "cat of negative views": lambda z, w: torch.cat([z.conj().imag, w.conj().imag]),
}


@pytest.mark.parametrize("call", sorted(COMPLEX_CALLS))
def test_complex_calls_of_every_planned_op_run_atens_kernel_without_python(call):
    """Every planned overload (cat, fills, comparisons, index ops, mm, ...) plans a call that
    involves a complex dtype as aten's kernel on the C++ path: aten's result, and no trip
    through the Python implementation per call (which refused it each time)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    z, w = _Z["z"](), _Z["w"]()
    fn = COMPLEX_CALLS[call]
    ref = fn(z, w)
    with T.enable(include="all", wait_native=True):
        fn(z, w)  # the first call makes the plans
        before = native.stats()
        got = fn(z, w)
        delta = stats_delta(before, native.stats())
    assert got.dtype == ref.dtype and torch.equal(got, ref)
    assert delta["python_calls"] == 0 and delta["aten_calls"] >= 1, delta


_EXTREMES = [float("inf"), -float("inf"), float("nan"), 501.0, -501.0, 89.0, -89.0, 30.0, -30.0, 20.5, 19.5, 1.0,
             -1.0, 0.999, 1e30, -1e30, 0.5, 1e-4, -1e-4, 0.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", ["log1p", "expm1", "atanh", "asinh", "sinh", "cosh", "tanh", "exp", "erf"])
def test_unary_at_extreme_values_under_enable(name: str, dtype: torch.dtype) -> None:
    """Infinities, NaN and the edges of the range (OpInfo's reference inputs found these:
    log1p(inf) and atanh(1) gave NaN, sinh NaN past |x| = 80, cosh(89) inf where it is finite)."""
    x = torch.tensor(_EXTREMES).to(dtype)
    fn = getattr(torch, name)
    ref = fn(x)
    with T.enable(include="all"):
        got = fn(x)
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=2e-6 if dtype != torch.bfloat16 else 1e-2, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_isnan_isinf_of_empty_integer_tensors_keep_their_shape(dtype: torch.dtype) -> None:
    z = torch.empty(0, 3, dtype=dtype)
    with T.enable(include="all"):
        got = (torch.isnan(z), torch.isinf(z), torch.isinf(torch.zeros(2, 3, dtype=dtype)))
    assert [tuple(g.shape) for g in got] == [(0, 3), (0, 3), (2, 3)]
    assert not got[2].any()
