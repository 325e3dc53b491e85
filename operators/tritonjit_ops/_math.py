"""Device functions shared by the elementwise kernels (pointwise.py, elementwise.py and
pointwise_backward.py): one copy of each formula.

The transcendental helpers are written with ``tl.exp``/``tl.log`` so that they run in
Triton's interpreter as well as on every compiled backend (no libdevice); they are
float32-accurate. Calls are inlined when a kernel compiles: sharing them changes no
generated code.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tanh_exp(x):
    """tanh through exp, so that it also runs in the interpreter; |x| keeps exp from overflowing.
    Below |x| = 0.1 its Taylor series to x^11 (4e-16 relative there: float64's precision),
    where 1 - exp(-2|x|) cancels (1e-4 was 3e-5 off, 1e-6 a few percent)."""
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    r = tl.where(x < 0, -r, r)
    x2 = x * x
    small = x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * (-0.05396825396825397 + x2 * (
        0.021869488536155203 + x2 * -0.008863235529902197)))))
    return tl.where(tl.abs(x) < 0.1, small, r)


@triton.jit
def log1p(x):
    u = 1.0 + x
    d = u - 1.0
    r = tl.where(d == 0, x, tl.log(u) * (x / tl.where(d == 0, 1.0, d)))
    return tl.where(u == float("inf"), u, r)  # the correction is inf / inf there


@triton.jit
def expm1(x):
    u = tl.exp(x)
    d = u - 1.0
    lu = tl.log(u)
    r = tl.where(u == 1.0, x, tl.where(d == -1.0, -1.0, d * x / tl.where(lu == 0, 1.0, lu)))
    return tl.where(x > 80.0, u, r)


@triton.jit
def negate(x):
    """-x, the sign of zero included: Triton's unary minus is 0 - x, which keeps +0.0 (aten's
    neg gives -0.0, and 1 / -x then -inf)."""
    return x * -1


@triton.jit
def signbit(x):
    """Whether x is negative, -0.0 included (1 / -0.0 is -inf); false for NaN."""
    return (x < 0) | (1.0 / x < 0)


@triton.jit
def atan_unit(t):
    """atan(t) for t in [0, 1] (Cephes atanf: float32 accuracy)."""
    big = t > 0.41421356237309503
    z = tl.where(big, (t - 1.0) / (t + 1.0), t)
    zz = z * z
    p = (((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz - 3.33329491539e-1) * zz * z + z
    return tl.where(big, 0.7853981633974483 + p, p)


@triton.jit
def atan2(y, x):
    ax = tl.abs(x)
    ay = tl.abs(y)
    mx = tl.maximum(ax, ay)
    mn = tl.minimum(ax, ay)
    t = tl.where(mx == 0, 0.0, mn / tl.where(mx == 0, 1.0, mx))
    r = atan_unit(t)
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)
    r = tl.where(signbit(x), 3.141592653589793 - r, r)  # atan2(0, -0.0) is pi, as in C
    r = tl.where(signbit(y), negate(r), r)  # atan2(-0.0, x > 0) is -0.0
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def trunc(x):
    """x rounded toward zero (trunc, frac and the truncating divisions share it)."""
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def erf(x):
    """erf without a branch: both of CUDA's float erff polynomials (|x| below and above
    0.9277, under 1 ulp each) evaluated and one selected. libdevice's erff branches on |x|,
    which diverges inside a warp on real activations (H200, bf16 gelu at 8M elements:
    1.09x aten's time with it, 0.94x like this). float64 keeps the double erf."""
    if x.dtype == tl.float64:
        r = tl.erf(x)
    else:
        t = tl.abs(x)
        s = x * x
        p = -1.72853470e-5 * t + 3.83197126e-4
        p = p * s + (-3.88396438e-3 * t + 2.42546219e-2)
        p = p * t - 1.06777877e-1
        p = p * t - 6.34846687e-1
        p = p * t - 1.28717512e-1
        p = p * t - t
        big = 1.0 - tl.exp(p)
        big = tl.where(x < 0, -big, big)
        q = -5.96761703e-4 * s + 4.99119423e-3
        q = q * s - 2.67681349e-2
        q = q * s + 1.12819925e-1
        q = q * s - 3.76125336e-1
        q = q * s + 1.28379166e-1
        r = tl.where(t > 0.927734375, big, q * x + x)
    return r


@triton.jit
def erfinv(x):
    """Giles' single-precision approximation of erfinv."""
    w = -tl.log((1.0 - x) * (1.0 + x))
    ws = w - 2.5
    p1 = 2.81022636e-08
    p1 = 3.43273939e-07 + p1 * ws
    p1 = -3.5233877e-06 + p1 * ws
    p1 = -4.39150654e-06 + p1 * ws
    p1 = 0.00021858087 + p1 * ws
    p1 = -0.00125372503 + p1 * ws
    p1 = -0.00417768164 + p1 * ws
    p1 = 0.246640727 + p1 * ws
    p1 = 1.50140941 + p1 * ws
    wl = tl.sqrt(tl.where(w < 5.0, 5.0, w)) - 3.0
    p2 = -0.000200214257
    p2 = 0.000100950558 + p2 * wl
    p2 = 0.00134934322 + p2 * wl
    p2 = -0.00367342844 + p2 * wl
    p2 = 0.00573950773 + p2 * wl
    p2 = -0.0076224613 + p2 * wl
    p2 = 0.00943887047 + p2 * wl
    p2 = 1.00167406 + p2 * wl
    p2 = 2.83297682 + p2 * wl
    r = tl.where(w < 5.0, p1, p2) * x
    r = tl.where(tl.abs(x) == 1.0, x * float("inf"), r)
    return tl.where(tl.abs(x) > 1.0, float("nan"), r)


@triton.jit
def div_rn(a, b):
    """a / b rounded to nearest, as aten divides: Triton's fp32 ``/`` is the approximate
    division on NVIDIA GPUs (up to 2 ulp), which floor/trunc turn into off-by-one quotients."""
    if a.dtype == tl.float32:
        r = tl.div_rn(a, b)
    else:
        r = a / b
    return r


@triton.jit
def pow_general(a, b):
    """|a|^b through exp2/log2, then the sign and the special cases aten has. In fp32 the
    error grows with |b * log2(a)|: up to 2.6e-6 relative (about 20 ulp) for a in (0, 9],
    b in [0, 9], against aten's half ulp; fp16 and bf16 results round it away."""
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = b == tl.floor(b)
    b_odd = b_int & ((tl.abs(b) % 2.0) == 1.0)
    r = tl.where(signbit(a) & b_odd, negate(mag), mag)  # (-0.0) ** 3 is -0.0, (-inf) ** -3 -0.0
    r = tl.where((a < 0) & (a != float("-inf")) & ~b_int, float("nan"), r)  # (-inf) ** 0.5 is inf, as C's pow
    r = tl.where((a == -1.0) & (tl.abs(b) == float("inf")), 1.0, r)
    r = tl.where(b == 0, 1.0, r)
    return tl.where(a == 1.0, 1.0, r)


@triton.jit
def pow_tensor(a, b):
    """a ** b elementwise, with the exponents aten computes exactly (its pow_tensor_scalar
    forms: x*x, x*x*x, sqrt, 1/sqrt, 1/x, 1/(x*x)) taken where b holds them."""
    r = pow_general(a, b)
    r = tl.where(b == 2.0, a * a, r)
    r = tl.where(b == 3.0, a * a * a, r)
    # C's pow at -0.0 and -inf, as aten's pow of a tensor exponent (its Scalar 0.5 is sqrt,
    # pow_scalar's): (-0.0) ** 0.5 is +0.0, (-inf) ** 0.5 inf, (-inf) ** -0.5 +0.0
    r = tl.where(b == 0.5, tl.where(a == float("-inf"), float("inf"), tl.sqrt(a) + 0.0), r)
    r = tl.where(b == -0.5, tl.where(a == float("-inf"), 0.0, 1.0 / (tl.sqrt(a) + 0.0)), r)
    r = tl.where(b == -1.0, 1.0 / a, r)
    return tl.where(b == -2.0, 1.0 / (a * a), r)


@triton.jit
def pow_scalar(a, e, b):
    """a ** e for a scalar exponent ``e`` (``b``: e broadcast to a's block). The branch is
    uniform, so only the chosen form is computed: the tensor-exponent chain evaluates every
    exact form per element, which made bf16 x**3 SFU-bound (2.6x aten's time on an H200)."""
    if e == 2.0:
        r = a * a
    elif e == 3.0:
        r = a * a * a
    elif e == 0.5:
        r = tl.sqrt(a)
    elif e == -0.5:
        r = 1.0 / tl.sqrt(a)
    elif e == -1.0:
        r = 1.0 / a
    elif e == -2.0:
        r = 1.0 / (a * a)
    else:
        r = pow_general(a, b)
    return r


@triton.jit
def floor_div(a, b, IS_FLOAT: tl.constexpr):
    """a // b as aten's div_floor: for floats Python's rule through fmod; floor(a / b) is one
    off where a / b rounds onto an integer (-0.3 / 0.1 in fp32)."""
    if IS_FLOAT:
        q = div_rn(a, b)
        mod = a % b
        d = div_rn(a - mod, b)
        d = tl.where((mod != 0) & ((b < 0) != (mod < 0)), d - 1.0, d)
        f = tl.floor(d)
        f = tl.where(d - f > 0.5, f + 1.0, f)
        r = tl.where(d != 0, f, q * 0.0)  # a zero takes a / b's sign (q is finite here)
        r = tl.where(b == 0, q, r)
    else:
        q = a // b
        r = tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)
    return r


@triton.jit
def activation(x, OP: tl.constexpr):
    """The unary ops of the flat and strided pointwise kernels (``OP``: neg, abs, relu, exp, log,
    sqrt, rsqrt, sigmoid, tanh, silu, gelu, gelu_tanh)."""
    if OP == "neg":
        r = negate(x)
    elif OP == "abs":
        r = tl.abs(x)
    elif OP == "relu":
        r = tl.where(x > 0, x, 0).to(x.dtype)
        r = tl.where(x != x, x, r)
    elif OP == "exp":
        r = tl.exp(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "sqrt":
        r = tl.sqrt(x)
    elif OP == "rsqrt":
        r = 1.0 / tl.sqrt(x)
    elif OP == "sigmoid":
        r = 1.0 / (1.0 + tl.exp(-x))
    elif OP == "tanh":
        r = tanh_exp(x)
    elif OP == "silu":
        r = x / (1.0 + tl.exp(-x))
    elif OP == "gelu":
        r = 0.5 * x * (1.0 + erf(x * 0.7071067811865476))
    else:  # "gelu_tanh"
        r = 0.5 * x * (1.0 + tanh_exp(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    return r


@triton.jit
def activation_backward(g, v, threshold, OP: tl.constexpr):
    """dy * f'(x) of the activations' backwards (``OP``: silu, gelu, gelu_tanh, sigmoid, tanh,
    threshold): ``g`` the gradient, ``v`` the input (sigmoid and tanh: their output)."""
    if OP == "silu":
        s = 1.0 / (1.0 + tl.exp(-v))
        r = g * s * (1.0 + v * (1.0 - s))
    elif OP == "gelu":
        cdf = 0.5 * (1.0 + erf(v * 0.7071067811865476))
        pdf = tl.exp(-0.5 * v * v) * 0.3989422804014327
        r = g * (cdf + v * pdf)
    elif OP == "gelu_tanh":
        k: tl.constexpr = 0.7978845608028654  # a constexpr: an assigned float literal would be an fp32 tensor
        t = tanh_exp(k * (v + 0.044715 * v * v * v))
        r = g * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v))
    elif OP == "sigmoid":
        r = g * v * (1.0 - v)
    elif OP == "tanh":
        r = g * (1.0 - v * v)
    else:  # "threshold"
        r = tl.where(v <= threshold, 0.0, g)
    return r
