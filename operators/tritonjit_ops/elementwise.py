"""More elementwise aten ops: math, comparisons, logic, clamps, activations; with their
in-place (``exp_``) and ``out=`` variants.

One strided kernel serves them all: up to three operands (each a tensor of any
strides, broadcast, or a scalar), up to three Scalar parameters, and an output of any
strides, so an in-place op writes straight into a non-contiguous ``self`` and ``out=``
into the tensor given. It indexes rank 4 after coalescing; its rank-6 twin (more
parameters, so a dearer launch) takes the rest, attention's 5-D head views among them.
The compute type is a constexpr string (fp32 for 16-bit floats).

Calls this module does not take (complex dtypes, ranks beyond 6 after coalescing, an
output that overlaps an input partially, an ``out=`` to resize) raise
``NotImplementedError``; under ``enable()`` they then run on aten's own kernel, as in
eager. The transcendental functions without a Triton builtin that runs everywhere
(atan, asin, acos, erfinv, ...) are float32-accurate polynomials: float64 calls of
those go to aten.
"""
from __future__ import annotations

from numbers import Number
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from ._common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    coalesce,
    is_cuda_like,
    jit,
    rounded_to_common,
    unravel4,
)
from ._fallback import with_aten_fallback
from ._layout import Layout, bstrides, contiguous_strides, extent, memory_order, new_output, out_strides
from ._math import (
    activation_backward,
    atan2,
    div_rn,
    erf,
    erfinv,
    expm1,
    floor_div,
    log1p,
    negate,
    pow_scalar,
    pow_tensor,
    signbit,
    tanh_exp,
    trunc,
)
from ._plan import Arg, Buffer, In, Out, Plan, aten_plan, execute, launch, scalar_fits, zero_divisor

Tensor = torch.Tensor
_INT32_MAX = 2**31 - 1
_BLOCK = 1024


# --------------------------------------------------------------------- kernels
@triton.jit
def _cast(x, CT: tl.constexpr):
    if CT == "fp32":
        r = x.to(tl.float32)
    elif CT == "fp64":
        r = x.to(tl.float64)
    elif CT == "i64":
        r = x.to(tl.int64)
    elif CT == "i32":
        r = x.to(tl.int32)
    elif CT == "i16":
        r = x.to(tl.int16)
    elif CT == "i8":
        r = x.to(tl.int8)
    elif CT == "u8":
        r = x.to(tl.uint8)
    else:  # "i1"
        r = x != 0
    return r


@triton.jit
def _ew_op(a, b, c, s0, s1, s2, OP: tl.constexpr, IS_FLOAT: tl.constexpr):
    # ---- unary
    if OP == "copy":
        r = a
    elif OP == "neg":
        r = negate(a)
    elif OP == "abs":
        r = tl.abs(a)  # not where(a < 0, -a, a): abs(-0.0) is +0.0
    elif OP == "exp":
        r = tl.exp(a)
    elif OP == "log":
        r = tl.log(a)
    elif OP == "sqrt":
        r = tl.sqrt(a)
    elif OP == "rsqrt":
        r = 1.0 / tl.sqrt(a)
    elif OP == "sigmoid":
        r = 1.0 / (1.0 + tl.exp(-a))
    elif OP == "tanh":
        r = tanh_exp(a)
    elif OP == "relu":
        r = tl.where(a > 0, a, 0).to(a.dtype)
        r = tl.where(a != a, a, r)
    elif OP == "silu":
        r = a / (1.0 + tl.exp(-a))
    elif OP == "gelu":
        r = 0.5 * a * (1.0 + erf(a * 0.7071067811865476))
    elif OP == "gelu_tanh":
        r = 0.5 * a * (1.0 + tanh_exp(0.7978845608028654 * (a + 0.044715 * a * a * a)))
    elif OP == "exp2":
        r = tl.exp2(a)
    elif OP == "expm1":
        r = expm1(a)
    elif OP == "log1p":
        r = log1p(a)
    elif OP == "log2":
        r = tl.log2(a)
    elif OP == "log10":
        r = tl.log(a) * 0.4342944819032518
    elif OP == "sin":
        r = tl.sin(a)
    elif OP == "cos":
        r = tl.cos(a)
    elif OP == "tan":
        r = tl.sin(a) / tl.cos(a)
    elif OP == "atan":
        r = atan2(a, tl.full(a.shape, 1.0, a.dtype))
    elif OP == "asin":
        r = atan2(a, tl.sqrt((1.0 - a) * (1.0 + a)))
        r = tl.where(tl.abs(a) > 1.0, float("nan"), r)
    elif OP == "acos":
        r = atan2(tl.sqrt((1.0 - a) * (1.0 + a)), a)
        r = tl.where(tl.abs(a) > 1.0, float("nan"), r)
    elif OP == "sinh":  # past |a| = 20, exp(|a| - ln 2): exp(-|a|) is below an ulp, and exp(|a|) / 2 would overflow first
        e = expm1(tl.abs(a))
        r = tl.where(tl.abs(a) > 20.0, tl.exp(tl.abs(a) - 0.6931471805599453), 0.5 * (e + e / (e + 1.0)))
        r = tl.where(signbit(a), negate(r), r)  # sinh(-0.0) is -0.0
    elif OP == "cosh":
        e = tl.exp(tl.abs(a))
        r = tl.where(tl.abs(a) > 20.0, tl.exp(tl.abs(a) - 0.6931471805599453), 0.5 * (e + 1.0 / e))
    elif OP == "asinh":
        x = tl.abs(a)
        r = log1p(x + x * x / (1.0 + tl.sqrt(1.0 + x * x)))
        r = tl.where(x > 1e10, tl.log(x) + 0.6931471805599453, r)
        r = tl.where(signbit(a), negate(r), r)
    elif OP == "atanh":
        r = 0.5 * log1p(2.0 * a / (1.0 - a))
    elif OP == "erf":
        r = erf(a)
    elif OP == "erfc":
        r = 1.0 - erf(a)
    elif OP == "erfinv":
        r = erfinv(a)
    elif OP == "reciprocal":
        r = 1.0 / a
    elif OP == "floor":
        r = tl.floor(a)
    elif OP == "ceil":
        r = tl.ceil(a)
    elif OP == "trunc":
        r = trunc(a)
    elif OP == "frac":
        r = a - trunc(a)
    elif OP == "round":  # half to even
        f = tl.floor(a)
        d = a - f
        even = (f * 0.5) == tl.floor(f * 0.5)
        r = tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))
    elif OP == "sign":
        if IS_FLOAT:
            # float constants: an integer -1/0 select converted to float folds into
            # sitofp(i1), which LLVM's NVPTX backend lowers as +1 for a bf16 result (sm_90:
            # every negative bf16 input gave 1; tests/ops/test_pointwise.py checks the PTX)
            r = tl.where(a > 0, 1.0, tl.where(a < 0, -1.0, 0.0)).to(a.dtype)
        else:
            r = tl.where(a > 0, 1, tl.where(a < 0, -1, 0)).to(a.dtype)
    elif OP == "isnan":
        r = a != a
    elif OP == "isinf":
        r = tl.abs(a) == float("inf")
    elif OP == "logical_not":
        r = a == 0
    elif OP == "bitwise_not":
        if a.dtype.is_int_unsigned():  # max - a: the interpreter's ~ of an unsigned lane overflows
            r = (a.dtype.get_int_max_value() - a).to(a.dtype)
        else:
            r = ~a
    elif OP == "nan_to_num":
        r = tl.where(a != a, s0, tl.where(a == float("inf"), s1, tl.where(a == -float("inf"), s2, a)))
    elif OP == "hardtanh":  # aten's clamp: a NaN bound gives NaN
        r = tl.where(a < s0, s0, tl.where(a > s1, s1, a))
        r = tl.where(s0 != s0, s0, tl.where(s1 != s1, s1, r))
    elif OP == "leaky_relu":
        r = tl.where(a > 0, a, a * s0)
    elif OP == "elu":  # s0 alpha, s1 scale, s2 input_scale
        r = tl.where(a > 0, a * s1, s0 * s1 * expm1(a * s2))
    elif OP == "softplus":  # s0 beta, s1 threshold
        r = tl.where(a * s0 > s1, a, log1p(tl.exp(a * s0)) / s0)
    elif OP == "log_sigmoid":  # aten's CUDA formula (log_sigmoid.py's device path)
        r = tl.minimum(a, 0.0) - log1p(tl.exp(-tl.abs(a)))
    elif OP == "hardsigmoid":
        r = tl.minimum(tl.maximum(a / 6.0 + 0.5, 0.0), 1.0)
    elif OP == "hardswish":
        r = a * tl.minimum(tl.maximum(a + 3.0, 0.0), 6.0) / 6.0
    elif OP == "mish":
        sp = tl.where(a > 20.0, a, log1p(tl.exp(a)))
        r = a * tanh_exp(sp)
    # ---- binary
    elif OP == "add":
        r = a + b * s0
    elif OP == "sub":
        r = a - b * s0
    elif OP == "mul":
        r = a * b
    elif OP == "div_recip":  # a Scalar divisor on a device (see _divisor_op)
        r = a * div_rn(tl.zeros_like(b) + 1.0, b)
    elif OP == "div":
        r = div_rn(a, b)
    elif OP == "div_trunc":
        if IS_FLOAT:
            r = trunc(div_rn(a, b))
        else:
            r = a // b
    elif OP == "div_floor":
        r = floor_div(a, b, IS_FLOAT)
    elif OP == "remainder":
        m = a % b
        r = tl.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)
    elif OP == "fmod":
        r = a % b
    elif OP == "pow":
        r = pow_tensor(a, b)
    elif OP == "maximum":
        r = tl.where((a > b) | (a != a), a, b)
    elif OP == "minimum":
        r = tl.where((a < b) | (a != a), a, b)
    elif OP == "atan2":
        r = atan2(a, b)
    elif OP == "eq":
        r = a == b
    elif OP == "ne":
        r = a != b
    elif OP == "lt":
        r = a < b
    elif OP == "le":
        r = a <= b
    elif OP == "gt":
        r = a > b
    elif OP == "ge":
        r = a >= b
    elif OP == "logical_and":
        r = (a != 0) & (b != 0)
    elif OP == "logical_or":
        r = (a != 0) | (b != 0)
    elif OP == "logical_xor":
        r = (a != 0) != (b != 0)
    elif OP == "bitwise_and":
        r = a & b
    elif OP == "bitwise_or":
        r = a | b
    elif OP == "bitwise_xor":
        r = a ^ b
    # ---- activation backwards (pointwise_backward.py's, for operands of any strides): a the
    # gradient, b the input (sigmoid and tanh: the output), s0 threshold's threshold
    elif OP == "silu_backward":
        r = activation_backward(a, b, s0, "silu")
    elif OP == "gelu_backward":
        r = activation_backward(a, b, s0, "gelu")
    elif OP == "gelu_tanh_backward":
        r = activation_backward(a, b, s0, "gelu_tanh")
    elif OP == "sigmoid_backward":
        r = activation_backward(a, b, s0, "sigmoid")
    elif OP == "tanh_backward":
        r = activation_backward(a, b, s0, "tanh")
    elif OP == "threshold_backward":
        r = activation_backward(a, b, s0, "threshold")
    elif OP == "hardtanh_backward":  # s0 min_val, s1 max_val: aten's zero at and beyond both bounds
        r = tl.where((b <= s0) | (b >= s1), 0.0, a)
    elif OP == "log_sigmoid_backward":  # aten's CUDA formula, from the input (not the CPU's buffer)
        z = tl.exp(-tl.abs(b))
        r = a * (tl.where(b < 0, 1.0, 0.0) - tl.where(b < 0, 1.0, -1.0) * div_rn(z, 1.0 + z))
    elif OP == "softplus_backward":  # s0 beta, s1 threshold: aten's dy * z / (z + 1), z = exp(x * beta)
        z = tl.exp(b * s0)
        r = tl.where(b * s0 > s1, a, div_rn(a * z, z + 1.0))
    # ---- ternary
    elif OP == "clamp":  # b min, c max (NaN stays NaN; a NaN bound gives NaN, as aten on every device)
        r = tl.where(a < b, b, a)
        r = tl.where(r > c, c, r)
        r = tl.where(b != b, b, tl.where(c != c, c, r))
    elif OP == "clamp_min":  # a NaN bound is ignored, as in aten's CUDA kernel (its CPU kernel gives NaN)
        r = tl.where(a < b, b, a)
    elif OP == "clamp_max":
        r = tl.where(a > b, b, a)
    elif OP == "masked_fill":  # b mask, c value
        r = tl.where(b != 0, c, a)
    elif OP == "where":  # a cond
        r = tl.where(a != 0, b, c)
    elif OP == "lerp":  # c weight
        d = b - a
        r = tl.where(tl.abs(c) < 0.5, a + c * d, b - d * (1.0 - c))
    elif OP == "mask_scale":  # dropout's backward: b the keep mask, s0 the scale
        r = tl.where(b != 0, a * s0, 0.0)
    elif OP == "addcmul":
        r = a + s0 * b * c
    else:  # "addcdiv"
        r = a + s0 * (b / c)
    return r


@triton.jit
def _to_out(r, OT: tl.constexpr, RTNE: tl.constexpr):
    """r in the output's dtype. With RTNE, bfloat16 rounds to nearest even from the fp32 bits,
    as aten's casts do: Triton's interpreter truncates an fp32 -> bf16 cast, and its "rtne"
    mode does not carry into the exponent. Compiled backends' own cast already rounds to
    nearest even (sm_80+: one cvt.rn.bf16.f32), cheaper than these integer steps."""
    if RTNE and OT == tl.bfloat16 and r.dtype != tl.bfloat16:
        f = r.to(tl.float32)
        u = f.to(tl.uint32, bitcast=True)
        u = u + (((u >> 16) & 1) + 0x7FFF)
        h = tl.where(f != f, 0x7FC0, (u >> 16).to(tl.int32))
        v = h.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        v = r.to(OT)
    return v


@triton.jit
def _exponent_in(e, T: tl.constexpr):
    """A Scalar exponent ``e`` (in fp32) as aten takes it for a ``T`` base: rounded to nearest
    even in a 16-bit float type (bf16(1.3) = 1.296875: ``x ** 1.3`` is ``x ** 1.296875`` there;
    _to_out's integer steps, since the interpreter's cast truncates), as it is otherwise."""
    e = e.to(tl.float32)  # an int exponent (x ** 2) too
    if T == tl.bfloat16 or T == tl.float16:
        r = _to_out(e, T, True).to(tl.float32)
    else:
        r = e
    return r


@triton.jit
def _in_type(v, OT: tl.constexpr, RTNE: tl.constexpr):
    """An operand's block ``v`` converted to the op's 16-bit float type ``OT`` ("bf16", "fp16";
    None: ``v`` as it is), as aten converts every operand to the common dtype before its
    kernel runs on them (see _ew_apply)."""
    if OT == "bf16":
        r = _to_out(v, tl.bfloat16, RTNE)
    elif OT == "fp16":
        r = _to_out(v, tl.float16, RTNE)
    else:
        r = v
    return r


@triton.jit
def _round_tensor(v, RT: tl.constexpr, RTNE: tl.constexpr):
    """A tensor operand's block rounded to an arithmetic op's 16-bit common type ``RT``
    ("bf16", "fp16"; None: ``v`` as it is) where it is of another type, through fp32 as c10's
    Half and BFloat16 take a float: aten's TensorIterator casts each tensor operand to the
    common dtype before an opmath kernel reads it in fp32 (``x_bf16 * i`` for an int64 tensor
    multiplies by bf16(i): 257 is 256), which _common.rounded_to_common tells. A Scalar is not
    rounded: aten's kernels read it in opmath."""
    if RT == "bf16":
        if v.dtype.is_int():  # in integer steps: a compiled int -> fp32 -> bf16 folds to one rounding
            r = _to_out(v.to(tl.float32), tl.bfloat16, True)
        elif v.dtype != tl.bfloat16:
            r = _to_out(v.to(tl.float32), tl.bfloat16, RTNE)
        else:
            r = v
    elif RT == "fp16":
        if v.dtype != tl.float16:
            r = _to_out(v.to(tl.float32), tl.float16, RTNE)
        else:
            r = v
    else:
        r = v
    return r


@triton.jit
def _ew_apply(a, b, c, out, oa, ob, oc, oo, mask, s0, s1, s2, OP: tl.constexpr, NIN: tl.constexpr, CT: tl.constexpr,
              IS_FLOAT: tl.constexpr, A_SCALAR: tl.constexpr, B_SCALAR: tl.constexpr, C_SCALAR: tl.constexpr,
              BLOCK: tl.constexpr, RTNE: tl.constexpr, OT: tl.constexpr, RT: tl.constexpr):
    """The op on the operands at offsets oa, ob, oc, stored at oo: the body both ranks share.

    OT: the 16-bit float type ("bf16", "fp16") aten converts the operands to before an op
    whose kernel takes them in that type (its gpu_kernel_with_scalars on scalar_t: the
    comparisons, remainder, fmod, atan2, the logical ops), set where an operand is of another
    type: a bf16 ``x > 0.3`` compares with bf16(0.3) = 0.30078125, ``x == 257`` with 256, and
    a 0-dim fp32 operand is rounded the same way. Arithmetic (add, mul, div, ...) keeps a
    Scalar in fp32, as aten's opmath kernels do: OT is None there, and RT (_round_tensor)
    rounds its tensor operands of another type to the 16-bit common type."""
    # a Scalar operand becomes a block as ``s - zero``, not ``s + zero``: -0.0 + 0 is +0.0
    # (``x * -0.0`` would lose its sign), and s - 0 is s for every s
    zero = tl.zeros([BLOCK], tl.int32)
    if NIN >= 1:
        if A_SCALAR:
            x = _cast(_in_type(a - zero, OT, RTNE), CT)
        else:
            x = _cast(_in_type(_round_tensor(tl.load(a + oa, mask=mask), RT, RTNE), OT, RTNE), CT)
    else:
        x = _cast(zero, CT)
    if NIN >= 2:
        if B_SCALAR:
            y = _cast(_in_type(b - zero, OT, RTNE), CT)
        else:
            y = _cast(_in_type(_round_tensor(tl.load(b + ob, mask=mask), RT, RTNE), OT, RTNE), CT)
    else:
        y = x
    if NIN >= 3:
        if C_SCALAR:
            z = _cast(c - zero, CT)
        else:
            z = _cast(_round_tensor(tl.load(c + oc, mask=mask), RT, RTNE), CT)
    else:
        z = y
    if OP == "pow" and B_SCALAR:  # one uniform branch on the exponent (see _math.pow_scalar)
        if IS_FLOAT:  # the exponent in the base's type, as aten's (_exponent_in)
            e = _exponent_in(b, out.dtype.element_ty)
            r = pow_scalar(x, e, _cast(e - zero, CT))
        else:
            r = pow_scalar(x, b, y)
    elif (OP == "div_trunc" and IS_FLOAT and not B_SCALAR
          and (out.dtype.element_ty == tl.float16 or out.dtype.element_ty == tl.bfloat16)):
        # aten divides two half tensors in their own type, so the quotient rounds before it is
        # truncated (2.9995 -> 3.0 -> 3); a Scalar divisor's quotient does not round
        r = trunc(_to_out(div_rn(x, y), out.dtype.element_ty, RTNE).to(tl.float32))
    else:
        r = _ew_op(x, y, z, s0, s1, s2, OP, IS_FLOAT)
    tl.store(out + oo, _to_out(r, out.dtype.element_ty, RTNE), mask=mask)


@triton.jit
def _ew_kernel(
    a, b, c, out, n, s0, s1, s2,
    d1, d2, d3,
    as0, as1, as2, as3, bs0, bs1, bs2, bs3, cs0, cs1, cs2, cs3, os0, os1, os2, os3,
    OP: tl.constexpr, NIN: tl.constexpr, CT: tl.constexpr, IS_FLOAT: tl.constexpr,
    A_SCALAR: tl.constexpr, B_SCALAR: tl.constexpr, C_SCALAR: tl.constexpr,
    BLOCK: tl.constexpr, IDX64: tl.constexpr, FLAT: tl.constexpr = False, RTNE: tl.constexpr = False,
    OT: tl.constexpr = None, RT: tl.constexpr = None,
):
    # FLAT: one dim after coalescing (contiguous operands, most calls), indexed by the flat
    # offset itself: no integer division per element, which bf16 ops heavier than a copy
    # felt at 4M+ elements (a clamp 1.12x aten's time with it, 1.06x without; H200)
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if FLAT:
        i0 = 0
        i1 = 0
        i2 = 0
        i3 = offs
    else:
        i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    _ew_apply(a, b, c, out, i0 * as0 + i1 * as1 + i2 * as2 + i3 * as3, i0 * bs0 + i1 * bs1 + i2 * bs2 + i3 * bs3,
              i0 * cs0 + i1 * cs1 + i2 * cs2 + i3 * cs3, i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3, offs < n,
              s0, s1, s2, OP, NIN, CT, IS_FLOAT, A_SCALAR, B_SCALAR, C_SCALAR, BLOCK, RTNE, OT, RT)


@triton.jit
def _ew6_kernel(
    a, b, c, out, n, s0, s1, s2, obase,
    d1, d2, d3, d4, d5,
    as0, as1, as2, as3, as4, as5, bs0, bs1, bs2, bs3, bs4, bs5, cs0, cs1, cs2, cs3, cs4, cs5,
    os0, os1, os2, os3, os4, os5,
    OP: tl.constexpr, NIN: tl.constexpr, CT: tl.constexpr, IS_FLOAT: tl.constexpr,
    A_SCALAR: tl.constexpr, B_SCALAR: tl.constexpr, C_SCALAR: tl.constexpr,
    BLOCK: tl.constexpr, IDX64: tl.constexpr, RTNE: tl.constexpr = False, OT: tl.constexpr = None,
    RT: tl.constexpr = None,
):
    # rank 5 and 6 (attention's (B, KV heads, repeats, S, D) views of (B, S, H, D) storage),
    # and an output that starts obase elements into its buffer (a cat's slice)
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    i5 = offs % d5
    t = offs // d5
    i4 = t % d4
    t = t // d4
    i0, i1, i2, i3 = unravel4(t, d1, d2, d3)
    _ew_apply(a, b, c, out, i0 * as0 + i1 * as1 + i2 * as2 + i3 * as3 + i4 * as4 + i5 * as5,
              i0 * bs0 + i1 * bs1 + i2 * bs2 + i3 * bs3 + i4 * bs4 + i5 * bs5,
              i0 * cs0 + i1 * cs1 + i2 * cs2 + i3 * cs3 + i4 * cs4 + i5 * cs5,
              obase + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3 + i4 * os4 + i5 * os5, offs < n,
              s0, s1, s2, OP, NIN, CT, IS_FLOAT, A_SCALAR, B_SCALAR, C_SCALAR, BLOCK, RTNE, OT, RT)


_ew = jit(_ew_kernel)
_ew6 = jit(_ew6_kernel)


# ----------------------------------------------------------------- dtype rules
_CT = {torch.float32: "fp32", torch.float16: "fp32", torch.bfloat16: "fp32", torch.float64: "fp64",
       torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
       torch.bool: "i1"}
_REAL = FLOAT_DTYPES + INT_DTYPES + (torch.bool,)
#: ops computed by float32-accurate formulas: float64 calls go to aten
_APPROX = {"atan", "asin", "acos", "atan2", "erfinv", "sinh", "asinh", "atanh", "tan", "expm1", "log1p", "softplus",
           "mish", "elu", "log_sigmoid"}


def _refuse(op: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops.{op}: {why}; aten's kernel serves this call")


def _is_scalar(v: Any) -> bool:
    return not isinstance(v, Tensor) and isinstance(v, Number) and not isinstance(v, complex)


_INT_DIVISIONS = ("remainder", "fmod", "div_floor", "div_trunc")


def _zero_divisor(rd: torch.dtype, y: Any) -> bool:
    """Whether an integer division's divisor holds a zero that aten raises ZeroDivisionError
    for: a Scalar that is 0 in ``rd`` (65536 wraps to 0 in int16, as aten converts it), or a
    CPU tensor with a zero in ``rd`` (aten's CPU kernels check it; its CUDA kernels do not, nor
    ours)."""
    if rd.is_floating_point or rd == torch.bool:
        return False
    if isinstance(y, Tensor):
        return y.device.type == "cpu" and bool((y.to(rd) == 0).any())
    return zero_divisor(y, rd)


def _integer_divisor_checked(rd: torch.dtype, y: Any) -> bool:
    """Whether an integer division's call goes to the implementation, which checks its divisor
    for zeros (_zero_divisor): a zero Scalar, or a CPU tensor (read per call on the host)."""
    if rd.is_floating_point or rd == torch.bool:
        return False
    return y.device.type == "cpu" if isinstance(y, Tensor) else zero_divisor(y, rd)


def _divisor_check(p: Plan | None, rd: torch.dtype, y: Any) -> Plan | None:
    """``p`` with the per-call check of an integer division's Scalar divisor (Plan.divisors)."""
    if p is None or isinstance(y, Tensor) or rd.is_floating_point or rd == torch.bool:
        return p
    return p._replace(divisors=((1, rd),))


def _float_of(dt: torch.dtype) -> torch.dtype:
    return dt if dt.is_floating_point else torch.get_default_dtype()


def _ct(op: str, dt: torch.dtype) -> str:
    if dt not in _CT:
        raise _refuse(op, f"dtype {dt}")
    if dt == torch.float64 and op in _APPROX:
        raise _refuse(op, "float64 (its formula is float32-accurate)")
    return _CT[dt]


# ----------------------------------------------------------------- host side
def _bshape(shapes: Sequence[Sequence[int]]) -> list[int]:
    return list(torch.broadcast_shapes(*[tuple(s) for s in shapes])) if shapes else []


def _soft_bf16(out: Tensor | Buffer, operands: Sequence[Any]) -> bool:
    """Whether a bf16 output rounds in the kernel's integer steps (_to_out's RTNE): on the
    interpreter (CPU tensors), whose cast truncates, and where no tensor tells the device."""
    if out.dtype != torch.bfloat16:
        return False
    t = out if isinstance(out, Tensor) else next((o for o in operands if isinstance(o, Tensor)), None)
    return t is None or t.device.type == "cpu"


def on_interpreter(operands: Sequence[Any]) -> bool:
    """Whether a launch over ``operands`` runs on the interpreter (a CPU tensor among them), whose
    cast to bf16 truncates: the kernels then round operands and results to bf16 in integer steps
    (_to_out's RTNE)."""
    return any(isinstance(t, Tensor) and t.device.type == "cpu" for t in operands)


def _launch(op: str, operands: Sequence[Any], refs: Sequence[Any], out: Tensor | Buffer, out_ref: Any,
            shape: Sequence[int], ct: str, scalars: Sequence[Any], obase: int = 0, ot: str | None = None,
            rt: str | None = None) -> Any:
    """The Launch of ``op`` over ``operands`` (tensors, scalars) into ``out`` of ``shape``
    (a tensor of any strides, or a plan Buffer, dense), its elements from ``obase`` on
    (an offset into the output's buffer); None beyond rank 6. Rank 4 and no offset, which
    is most calls, take the kernel of fewer parameters (a cheaper launch). ``ot``: the 16-bit
    float type the operands are converted to first (_ew_apply's OT; see _operand_type); ``rt``:
    the one an arithmetic op's tensor operands are rounded to first (_round_tensor; see
    rounding_type)."""
    n = 1
    for d in shape:
        n *= d
    given = out.stride() if isinstance(out, Tensor) else out.strides
    ostr = list(given) if given is not None else contiguous_strides(shape)  # a plan buffer's: contiguous
    strides = [bstrides(t, shape) for t in operands] + [ostr]
    # the index space in the output's memory order (TensorIterator's reorder): a permuted
    # output (aten's layout of a transposed input's result, an in-place op on a permuted
    # view) is then written along its memory and coalesces with inputs of the same layout,
    # where the logical order wrote one element per memory sector (a transposed 8M bf16
    # log_sigmoid took 13.9x eager's time on an H100)
    order = memory_order(ostr)
    if order != sorted(order):
        shape = [shape[d] for d in order]
        strides = [[st[d] for d in order] for st in strides]
    dims, cstr = coalesce(list(shape), strides)
    if len(dims) > 6:
        return None
    rank = 4 if len(dims) <= 4 and not obase else 6
    flat = rank == 4 and len(dims) <= 1
    pad = rank - len(dims)
    dims = [1] * pad + dims
    cstr = [[0] * pad + s for s in cstr]
    ostr_r = cstr.pop()
    refs = list(refs)
    scalar = [not isinstance(t, Tensor) for t in operands]
    nin = len(operands)
    op = _divisor_op(op, operands)
    while len(refs) < 3:
        refs.append(0)
        scalar.append(True)
        cstr.append([0] * rank)
    sc = list(scalars) + [0] * (3 - len(scalars))
    span = max([n] + [extent(dims, st) for st in cstr + [ostr_r]]) + obase
    cx: dict[str, Any] = dict(OP=op, NIN=nin, CT=ct, IS_FLOAT=ct in ("fp32", "fp64"), A_SCALAR=scalar[0], B_SCALAR=scalar[1],
              C_SCALAR=scalar[2], BLOCK=_BLOCK, IDX64=span > _INT32_MAX)
    if flat:
        cx["FLAT"] = True
    if _soft_bf16(out, operands):
        cx["RTNE"] = True
    if ot is not None:
        cx["OT"] = ot
    if rt is not None:
        cx["RT"] = rt
    if (ot is not None or rt is not None) and on_interpreter(operands):
        cx["RTNE"] = True  # the interpreter's cast to bf16 truncates (see _to_out)
    grid = ((n + _BLOCK - 1) // _BLOCK,)
    if rank == 4:
        return launch(_ew, grid, refs[0], refs[1], refs[2], out_ref, n, sc[0], sc[1], sc[2], dims[1], dims[2], dims[3],
                      *cstr[0], *cstr[1], *cstr[2], *ostr_r, **cx)
    return launch(_ew6, grid, refs[0], refs[1], refs[2], out_ref, n, sc[0], sc[1], sc[2], obase, *dims[1:],
                  *cstr[0], *cstr[1], *cstr[2], *ostr_r, **cx)


def _divisor_op(op: str, operands: Sequence[Any]) -> str:
    """``op`` as the kernel computes it: a true division by a Scalar (a Python number or a CPU
    0-dim tensor) of a device tensor is ``div_recip``, a product with the divisor's fp32
    reciprocal, as aten's CUDA kernel computes it (``258 / 0.3`` in fp32 is 860.0 there, not
    859.99994); aten's CPU kernel divides, as the interpreter's plans do."""
    if op == "div" and len(operands) == 2 and not isinstance(operands[1], Tensor) and \
            isinstance(operands[0], Tensor) and operands[0].device.type != "cpu":
        return "div_recip"
    return op


def _operands(op: str, operands: Sequence[Any], out: Tensor | None = None) -> tuple[list[Any], torch.device]:
    """Checked operands: a 0-dim CPU tensor next to device tensors becomes its value."""
    dev = None if out is None else out.device
    for t in operands:
        if isinstance(t, Tensor) and not (t.dim() == 0 and t.is_cpu):
            if dev is not None and t.device != dev:
                raise _refuse(op, "tensors on two devices")
            dev = t.device
    res = []
    for t in operands:
        if isinstance(t, Tensor):
            if t.dtype not in _REAL or t.layout != torch.strided:
                raise _refuse(op, f"dtype {t.dtype} / layout {t.layout}")
            if dev is not None and t.device != dev:
                t = t.item()
            elif t.is_neg() or t.is_conj():
                t = t.resolve_neg().resolve_conj()
        elif not _is_scalar(t):
            raise _refuse(op, f"operand of type {type(t).__name__}")
        res.append(t)
    if dev is None:
        dev = next((t.device for t in operands if isinstance(t, Tensor)), None)
        if dev is None:
            raise _refuse(op, "no tensor operand")
    return res, dev


def _overlaps(out: Tensor, operands: Sequence[Any]) -> bool:
    """Whether writing ``out`` could clobber an operand before it is read (partial overlap)."""
    if torch._debug_has_internal_overlap(out) == 1:  # 2 ("too hard") passes, as in aten
        return True
    for t in operands:
        if isinstance(t, Tensor) and t.numel() and out.numel():
            if t.untyped_storage().data_ptr() != out.untyped_storage().data_ptr():
                continue
            if not (t.data_ptr() == out.data_ptr() and t.shape == out.shape and t.stride() == out.stride()
                    and t.dtype == out.dtype):
                return True
    return False


def _fp32_exact(v: Any) -> bool:
    """Whether the scalar ``v`` survives the trip through a kernel's fp32 scalar argument."""
    return not isinstance(v, float) or v != v or abs(v) == float("inf") or float(torch.tensor(v, dtype=torch.float32)) == v


def run(op: str, operands: Sequence[Any], rdtype: torch.dtype, ct: str, scalars: Sequence[Any] = (),
        out: Tensor | None = None, inplace: bool = False, aten_layout: Layout = False, ot: str | None = None) -> Tensor:
    """Compute ``op`` now. ``out``: write there (any strides): with ``inplace`` the operands
    broadcast to its shape; otherwise an empty ``out`` is resized as aten does. A new output
    is contiguous, or with ``aten_layout`` laid out as aten lays out that op's (the operands'
    memory order, as TensorIterator: see _layout.Layout)."""
    ops, dev = _operands(op, operands, out)
    if ct == "fp64" and not all(_fp32_exact(v) for v in [*scalars, *(t for t in ops if not isinstance(t, Tensor))]):
        raise _refuse(op, "a float64 computation with a scalar that fp32 does not hold exactly")
    shapes = [t.shape for t in ops if isinstance(t, Tensor)]
    shape = _bshape(shapes + ([out.shape] if inplace and out is not None else []))
    if out is None:
        out = new_output(shape, rdtype, dev, ops, aten_layout) if aten_layout else torch.empty(shape, dtype=rdtype, device=dev)
    else:
        if out.device != dev or out.dtype not in _REAL:
            raise _refuse(op, "out= on another device or of an unsupported dtype")
        if not torch.can_cast(rdtype, out.dtype):
            raise _refuse(op, f"result type {rdtype} can't be cast to {out.dtype}")
        if list(out.shape) != shape:
            # aten resizes an empty out=, but not one that is also an input (x.logical_and_(y)
            # reaches here as logical_and.out(x, y, out=x))
            if inplace or out.numel() != 0 or any(t is out for t in ops):
                raise _refuse(op, f"output of shape {list(out.shape)} for a result of shape {shape}")
            out.resize_(shape)
        if _overlaps(out, ops):
            raise _refuse(op, "the output overlaps an input")
    if out.numel() == 0:
        return out
    L = _launch(op, ops, ops, out, out, shape, ct, scalars, ot=ot, rt=rounding_type(op, rdtype, ops, ot))
    if L is None:
        raise _refuse(op, "rank beyond 4 after coalescing dims")
    execute(L)
    return out


def plan(op: str, operands: Sequence[Any], rdtype: torch.dtype, ct: str, scalar_refs: Sequence[Any] = (),
         refs: Sequence[Any] | None = None, aten_layout: Layout = False, inplace: bool = False,
         ot: str | None = None) -> Plan | None:
    """The C++ path's plan of a functional call (a new output: contiguous, or with
    ``aten_layout`` in TensorIterator's layout, as run's); None where the Python
    implementation must run. ``refs``: what the launch passes for each operand (default:
    In(i) for tensors; Scalar operands must be given as Arg(i)). ``inplace``: the call's
    ``self`` (operands[0], In(0)) is the output instead (see :func:`_inplace_plan`)."""
    if inplace and not _writable(operands[0]):
        return None
    try:
        ops, dev = _operands(op, operands)
    except NotImplementedError:
        return None
    if refs is None:
        refs = [In(i) for i in range(len(ops))]
    if ct == "fp64" and (any(isinstance(r, Arg) for r in [*refs, *scalar_refs])
                         or not all(_fp32_exact(v) for v in scalar_refs)):
        return None  # a float Scalar's value must be checked per call (run)
    if any(not isinstance(t, Tensor) and not isinstance(r, Arg) for t, r in zip(ops, refs)):
        return None  # a value the key does not hold: the Python implementation
    if any(isinstance(a, Tensor) and not isinstance(b, Tensor) for a, b in zip(operands, ops)):
        return None  # a 0-dim CPU tensor became a scalar: no Arg() for it here
    rt = rounding_type(op, rdtype, ops, ot)
    shape = _bshape([t.shape for t in ops if isinstance(t, Tensor)])
    if inplace:
        return _inplace_plan(op, ops, refs, shape, rdtype, ct, scalar_refs, ot, rt)
    buf = Buffer(tuple(shape), rdtype, out_strides(shape, ops, aten_layout) if aten_layout else None)
    if 0 in shape:
        return Plan((buf,), ())
    L = _launch(op, ops, refs, buf, Out(0), shape, ct, scalar_refs, ot=ot, rt=rt)
    return None if L is None else Plan((buf,), (L,))


def _writable(x: Any) -> bool:
    """Whether an in-place plan may write ``x`` as it lies: a strided tensor of a dtype the
    kernel stores, not a lazily negated or conjugated view, without internal overlap (an
    expanded ``self``, which aten refuses; its "too hard to tell" answer passes, as in aten)."""
    return (isinstance(x, Tensor) and x.layout == torch.strided and x.dtype in _REAL and not x.is_neg()
            and not x.is_conj() and torch._debug_has_internal_overlap(x) != 1)


def _inplace_plan(op: str, ops: Sequence[Any], refs: Sequence[Any], shape: list[int], rdtype: torch.dtype, ct: str,
                  scalar_refs: Sequence[Any], ot: str | None = None, rt: str | None = None) -> Plan | None:
    """The launch writing ``op`` over ``ops`` into ``self`` (ops[0]) in its own strides, the
    result computed in ``rdtype`` and converted to self's dtype, as aten's TensorIterator
    does; the plan returns ``self``. None where aten raises (the operands broadcast past
    self's shape, or a result type that can't be cast to self's dtype), for the Python
    implementation to raise. The plan's ``writes`` has the executor send a call whose other
    tensors share self's memory in another view (a partial overlap) to the implementation."""
    x = ops[0]
    if list(x.shape) != shape or not torch.can_cast(rdtype, x.dtype):
        return None
    if x.numel() == 0:
        return Plan((), (), (In(0),), writes=(0,))
    L = _launch(op, ops, refs, x, In(0), shape, ct, scalar_refs, ot=ot, rt=rt)
    return None if L is None else Plan((), (L,), (In(0),), writes=(0,))


# ----------------------------------------------------------------- op families
def _result_binary(x: Any, y: Any) -> torch.dtype:
    return torch.result_type(x, y)


#: ops whose aten kernel takes its operands in the common dtype itself (gpu_kernel_with_scalars
#: on scalar_t), not in fp32 as the arithmetic's opmath kernels do
_IN_COMMON_TYPE = {"eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "atan2", "logical_and", "logical_or",
                   "logical_xor"}
_OT = {torch.bfloat16: "bf16", torch.float16: "fp16"}
#: ops that compute with two or more operands in opmath (fp32), each tensor operand of which
#: aten rounds to the common dtype first (_common.rounded_to_common); a copy or a selection
#: (where, masked_fill) rounds once either way
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "div_floor", "div_trunc", "div_recip", "maximum", "minimum",
                         "pow", "addcmul", "lerp"})


def rounding_type(op: str, common: torch.dtype, operands: Sequence[Any], ot: str | None = None) -> str | None:
    """The 16-bit float type ("bf16", "fp16") an arithmetic op's kernel rounds its tensor
    operands of another type to before computing in fp32 (_round_tensor's RT), where aten
    rounds them (_common.rounded_to_common: an integer tensor, a 0-dim wider float tensor);
    None where it reads every operand as it is (most calls: the variant's key is unchanged)."""
    if ot is not None or op not in _ARITHMETIC or not rounded_to_common(common, operands):
        return None
    return _OT[common]


def _operand_type(op: str, common: torch.dtype, operands: Sequence[Any]) -> str | None:
    """The 16-bit float type an _IN_COMMON_TYPE op converts its operands to before computing
    (_ew_apply's OT), where one is not of it already: a Scalar (``x_bf16 > 0.3``) or a 0-dim
    tensor of another float type (which does not promote a dimensioned one); None otherwise."""
    ot = _OT.get(common)
    if ot is None or op not in _IN_COMMON_TYPE:
        return None
    return ot if any(not isinstance(t, Tensor) or t.dtype != common for t in operands) else None


def _float_unary_dtype(op: str, x: Tensor) -> tuple[torch.dtype, str]:
    rd = _float_of(x.dtype)
    return rd, _ct(op, rd)


def _with_variants(table: dict[str, Callable], planners: dict[str, Callable], name: str, fn: Callable,
                   planner: Callable | None, inplace: str | None = None, out: str | None = None) -> None:
    """Register ``name`` (functional), ``inplace`` and ``out`` overloads of one op, where
    ``fn(*args, out=None, inplace=False)`` computes it and ``planner(*args, inplace=False)``
    plans the first two."""
    table[name] = lambda *a, **k: fn(*a, **k)
    if planner is not None:
        planners[name] = planner
    if inplace:
        table[inplace] = lambda self, *a, **k: fn(self, *a, out=self, inplace=True, **k)
        if planner is not None:
            planners[inplace] = _inplace_of(planner)
    if out:
        table[out] = lambda *a, out, **k: fn(*a, out=out, **k)


def _inplace_of(planner: Callable) -> Callable:
    """The planner of an op's in-place overload, from its functional planner's (which takes
    ``inplace=True`` and writes ``self``)."""
    return lambda *a, **k: planner(*a, inplace=True, **k)


ATEN: dict[str, Callable] = {}
PLANNERS: dict[str, Callable] = {}


def _check_tensor(op: str, x: Any) -> None:
    if not isinstance(x, Tensor):
        raise _refuse(op, f"self of type {type(x).__name__}")


# unary, float result (integers compute in the default float dtype)
_FLOAT_UNARY = ["exp2", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                "asinh", "atanh", "erf", "erfc", "erfinv", "reciprocal"]
# ops that already have a functional overload in pointwise.py: their in-place and out variants
_EXISTING_FLOAT_UNARY = ["exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "silu"]


def _float_unary(op: str) -> tuple[Callable, Callable]:
    def fn(x, out=None, inplace=False):
        _check_tensor(op, x)
        rd, ct = _float_unary_dtype(op, x)
        return run(op, [x], rd, ct, out=out, inplace=inplace, aten_layout=True)

    def planner(x, inplace=False):
        if not isinstance(x, Tensor) or x.dtype not in _REAL:
            return None
        rd = _float_of(x.dtype)
        if rd == torch.float64 and op in _APPROX:
            return None
        return plan(op, [x], rd, _CT[rd], aten_layout=True, inplace=inplace)

    return fn, planner


for _op in _FLOAT_UNARY:
    _fn, _pl = _float_unary(_op)
    _with_variants(ATEN, PLANNERS, _op, _fn, _pl, f"{_op}_", f"{_op}.out")
for _op in _EXISTING_FLOAT_UNARY:
    _fn, _pl = _float_unary(_op)
    ATEN[f"{_op}_"] = (lambda f: lambda self: f(self, out=self, inplace=True))(_fn)
    PLANNERS[f"{_op}_"] = _inplace_of(_pl)
    ATEN[f"{_op}.out"] = (lambda f: lambda self, *, out: f(self, out=out))(_fn)


def _gelu(x, approximate="none", out=None, inplace=False):
    _check_tensor("gelu", x)
    if approximate not in ("none", "tanh"):
        raise _refuse("gelu", f"approximate={approximate!r}")
    if not x.dtype.is_floating_point:
        raise _refuse("gelu", f"dtype {x.dtype}")
    return run("gelu" if approximate == "none" else "gelu_tanh", [x], x.dtype, _ct("gelu", x.dtype), out=out,
               inplace=inplace, aten_layout=True)


ATEN["gelu_"] = lambda self, *, approximate="none": _gelu(self, approximate, out=self, inplace=True)


def _plan_gelu_(x, approximate="none"):
    if not isinstance(x, Tensor) or approximate not in ("none", "tanh") or not x.dtype.is_floating_point:
        return None
    return plan("gelu" if approximate == "none" else "gelu_tanh", [x], x.dtype, _CT[x.dtype], inplace=True)


PLANNERS["gelu_"] = _plan_gelu_
ATEN["gelu.out"] = lambda self, *, approximate="none", out: _gelu(self, approximate, out=out)


# unary, same dtype: rounding (identity on integers), sign, neg, abs, relu
def _same_unary(op: str, floats_only: bool = False, no_bool: bool = True) -> tuple[Callable, Callable]:
    def kop(dt: torch.dtype) -> str:
        if op in ("floor", "ceil", "round", "trunc") and not dt.is_floating_point:
            return "copy"
        if op == "abs" and dt in (torch.uint8, torch.bool):
            return "copy"
        if op == "sign" and dt == torch.bool:
            return "copy"
        return op

    def ok(dt: torch.dtype) -> bool:
        if dt not in _REAL or (floats_only and not dt.is_floating_point):
            return False
        if op == "neg" and dt == torch.uint8:
            return False  # aten's wraps (-1 is 255); the interpreter cannot negate an unsigned value
        # abs and sign of bool: aten's CUDA kernels take it (identity; its CPU abs refuses bool)
        return not (no_bool and dt == torch.bool and op not in ("sign", "abs"))

    def fn(x, out=None, inplace=False):
        _check_tensor(op, x)
        if not ok(x.dtype):
            raise _refuse(op, f"dtype {x.dtype}")
        return run(kop(x.dtype), [x], x.dtype, _ct(op, x.dtype), out=out, inplace=inplace, aten_layout=True)

    def planner(x, inplace=False):
        if not isinstance(x, Tensor) or not ok(x.dtype):
            return None
        return plan(kop(x.dtype), [x], x.dtype, _CT[x.dtype], aten_layout=True, inplace=inplace)

    return fn, planner


for _op in ("floor", "ceil", "round", "trunc", "sign"):
    _fn, _pl = _same_unary(_op)
    _with_variants(ATEN, PLANNERS, _op, _fn, _pl, f"{_op}_", f"{_op}.out")
_fn, _pl = _same_unary("sign")  # sgn: sign for real dtypes (complex ones, which it divides by |z|, are aten's)
_with_variants(ATEN, PLANNERS, "sgn", _fn, _pl, "sgn_", "sgn.out")
_fn, _pl = _same_unary("frac", floats_only=True)
_with_variants(ATEN, PLANNERS, "frac", _fn, _pl, "frac_", "frac.out")
for _op in ("neg", "abs"):
    _fn, _pl = _same_unary(_op)
    ATEN[f"{_op}_"] = (lambda f: lambda self: f(self, out=self, inplace=True))(_fn)
    ATEN[f"{_op}.out"] = (lambda f: lambda self, *, out: f(self, out=out))(_fn)
    PLANNERS[f"{_op}_"] = _inplace_of(_pl)
_fn, _pl = _same_unary("relu")
ATEN["relu_"] = (lambda f: lambda self: f(self, out=self, inplace=True))(_fn)
PLANNERS["relu_"] = _inplace_of(_pl)


# predicates -> bool
def _pred(op: str, ints: bool = True) -> tuple[Callable, Callable]:
    layout = "with_scalar" if op == "isinf" else True  # aten's isinf: x.abs() == inf

    def fn(x, out=None, inplace=False):
        _check_tensor(op, x)
        dt = x.dtype
        if dt not in _REAL:
            raise _refuse(op, f"dtype {dt}")
        rd = torch.bool
        if op in ("isnan", "isinf") and not dt.is_floating_point:
            res = torch.empty(x.shape, dtype=torch.bool, device=x.device)
            return run("copy", [False], torch.bool, "i1", out=res) if res.numel() else res
        return run(op, [x], rd, _CT[dt], out=out, inplace=inplace, aten_layout=layout)

    def planner(x, inplace=False):
        if not isinstance(x, Tensor) or x.dtype not in _REAL:
            return None
        if op in ("isnan", "isinf") and not x.dtype.is_floating_point:
            return None
        return plan(op, [x], torch.bool, _CT[x.dtype], aten_layout=layout, inplace=inplace)

    return fn, planner


for _op in ("isnan", "isinf"):
    _fn, _pl = _pred(_op)
    ATEN[_op], PLANNERS[_op] = _fn, _pl
_fn, _pl = _pred("logical_not")
_with_variants(ATEN, PLANNERS, "logical_not", _fn, _pl, "logical_not_", "logical_not.out")


def _bitwise_not_op(x: Any) -> str | None:
    """The kernel op of ~x: logical for bool, bitwise for the integers; None for other dtypes."""
    if not isinstance(x, Tensor) or x.dtype not in INT_DTYPES + (torch.bool,):
        return None
    return "logical_not" if x.dtype == torch.bool else "bitwise_not"


def _bitwise_not(x, out=None, inplace=False):
    _check_tensor("bitwise_not", x)
    op = _bitwise_not_op(x)
    if op is None:
        raise _refuse("bitwise_not", f"dtype {x.dtype}")
    return run(op, [x], x.dtype, _CT[x.dtype], out=out, inplace=inplace, aten_layout=True)


def _plan_bitwise_not(x: Any, inplace: bool = False) -> Plan | None:
    op = _bitwise_not_op(x)
    return None if op is None else plan(op, [x], x.dtype, _CT[x.dtype], aten_layout=True, inplace=inplace)


_with_variants(ATEN, PLANNERS, "bitwise_not", _bitwise_not, _plan_bitwise_not, "bitwise_not_", "bitwise_not.out")


# binary
def _binary(op: str, kind: str) -> tuple[Callable, Callable]:
    """kind: "arith" (result_type), "float" (integers -> default float), "cmp" (-> bool),
    "logic" (-> bool, any dtypes), "int" (integers and bool only)."""
    def types(x: Any, y: Any, kop: str) -> tuple[torch.dtype, str, str | None]:
        """(result dtype, compute type, _ew_apply's OT) of a call."""
        common = _result_binary(x, y)
        ct_dt = _float_of(common) if kind == "float" else common
        rd = torch.bool if kind in ("cmp", "logic") else ct_dt
        if kind == "int" and ct_dt.is_floating_point:
            raise _refuse(op, f"dtype {ct_dt}")
        ot = _operand_type(kop, common, (x, y))
        if kind == "logic" and ct_dt == torch.bool:
            return rd, "i1", ot
        if ct_dt == torch.bool and kind == "arith" and kop in ("remainder", "fmod", "atan2", "div_floor", "div_trunc"):
            raise _refuse(op, "bool operands")
        return rd, _ct(kop, ct_dt), ot

    def kop_of(x: Any, y: Any) -> str:
        if kind == "int" and _result_binary(x, y) == torch.bool:
            return {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}[op]
        return op

    def fn(x, y, out=None, inplace=False):
        if not isinstance(x, Tensor):
            raise _refuse(op, "a Scalar self")
        k = kop_of(x, y)
        rd, ct, ot = types(x, y, k)
        if k in _INT_DIVISIONS and _zero_divisor(rd, y):
            raise _refuse(op, "integer division by zero")  # aten raises ZeroDivisionError
        return run(k, [x, y], rd, ct, out=out, inplace=inplace, aten_layout=True, ot=ot)

    def planner(x, y, inplace=False):
        if not isinstance(x, Tensor) or not (isinstance(y, Tensor) or _is_scalar(y)):
            return None
        try:
            k = kop_of(x, y)
            rd, ct, ot = types(x, y, k)
        except NotImplementedError:
            return None
        if k in _INT_DIVISIONS and _integer_divisor_checked(rd, y):
            return None  # a zero divisor aten raises for, or a CPU tensor the implementation checks per call
        p = plan(k, [x, y], rd, ct, refs=[In(0), In(1) if isinstance(y, Tensor) else Arg(1)], aten_layout=True,
                 inplace=inplace, ot=ot)
        return _divisor_check(p, rd, y) if k in _INT_DIVISIONS else p

    return fn, planner


def _binary_family(op: str, kind: str, overloads: Sequence[tuple[str, str | None, str | None]]) -> None:
    fn, planner = _binary(op, kind)
    for name, inplace, out in overloads:
        _with_variants(ATEN, PLANNERS, name, fn, planner, inplace, out)


for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    _binary_family(_op, "cmp", [(f"{_op}.Tensor", f"{_op}_.Tensor", f"{_op}.Tensor_out"),
                                (f"{_op}.Scalar", f"{_op}_.Scalar", f"{_op}.Scalar_out")])
for _op in ("logical_and", "logical_or", "logical_xor"):
    _binary_family(_op, "logic", [(_op, f"{_op}_", f"{_op}.out")])
for _op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _binary_family(_op, "int", [(f"{_op}.Tensor", f"{_op}_.Tensor", f"{_op}.Tensor_out"),
                                (f"{_op}.Scalar", f"{_op}_.Scalar", None)])
for _op in ("remainder", "fmod"):
    _binary_family(_op, "arith", [(f"{_op}.Tensor", f"{_op}_.Tensor", f"{_op}.Tensor_out"),
                                  (f"{_op}.Scalar", f"{_op}_.Scalar", None)])
_binary_family("atan2", "float", [("atan2", "atan2_", "atan2.out")])
for _op in ("mul", "div"):
    _f, _pl = _binary(_op, "float" if _op == "div" else "arith")
    for _ov in ("Tensor", "Scalar"):
        ATEN[f"{_op}_.{_ov}"] = (lambda f: lambda self, other: f(self, other, out=self, inplace=True))(_f)
        PLANNERS[f"{_op}_.{_ov}"] = _inplace_of(_pl)
    ATEN[f"{_op}.out"] = (lambda f: lambda self, other, *, out: f(self, other, out=out))(_f)
for _op in ("maximum", "minimum"):
    _f, _ = _binary(_op, "arith")
    ATEN[f"{_op}.out"] = (lambda f: lambda self, other, *, out: f(self, other, out=out))(_f)
_pow_fn, _pow_plan = _binary("pow", "float")


def _pow_checked(x, e, out=None, inplace=False):
    if not torch.result_type(x, e).is_floating_point:
        raise _refuse("pow", "integer powers")  # pointwise.pow's kernel is float-only as well
    return _pow_fn(x, e, out=out, inplace=inplace)


ATEN["pow_.Tensor"] = lambda self, e: _pow_checked(self, e, out=self, inplace=True)
ATEN["pow_.Scalar"] = lambda self, e: _pow_checked(self, e, out=self, inplace=True)
ATEN["pow.Tensor_Tensor_out"] = lambda self, e, *, out: _pow_checked(self, e, out=out)


def _plan_pow_(x: Any, e: Any) -> Plan | None:
    if not isinstance(x, Tensor) or not (isinstance(e, Tensor) or _is_scalar(e)):
        return None
    if not torch.result_type(x, e).is_floating_point:
        return None
    return _pow_plan(x, e, inplace=True)


PLANNERS["pow_.Tensor"] = PLANNERS["pow_.Scalar"] = _plan_pow_
ATEN["pow.Tensor_Scalar_out"] = lambda self, e, *, out: _pow_checked(self, e, out=out)


def _bool_operand(*operands: Any) -> bool:
    """Whether an operand is a bool tensor or a Python bool: aten's sub and rsub raise their
    error for either (``x - mask``: "use the ~ or logical_not() operator instead")."""
    return any(v.dtype == torch.bool if isinstance(v, Tensor) else isinstance(v, bool) for v in operands)


def _add_sub(op: str) -> Callable:
    def fn(x, y, alpha=1, out=None, inplace=False):
        _check_tensor(op, x)
        if not (isinstance(y, Tensor) or _is_scalar(y)) or not _is_scalar(alpha):
            raise _refuse(op, "operands")
        if op == "sub" and _bool_operand(x, y):
            raise _refuse(op, "a bool operand")  # aten's error
        rd = torch.result_type(x, y)
        if rd == torch.bool:
            raise _refuse(op, "bool operands")
        if isinstance(alpha, float) and not rd.is_floating_point:
            raise _refuse(op, "a float alpha for integers")
        if not scalar_fits(alpha, rd):
            raise _refuse(op, f"alpha {alpha!r} for {rd}")  # aten's overflow error
        return run(op, [x, y], rd, _ct(op, rd), [alpha], out=out, inplace=inplace, aten_layout=True)

    return fn


def _plan_add_sub_(op: str) -> Callable:
    """add_/sub_ (alpha passed at run time, never baked in)."""
    def planner(x, y, alpha=1):
        if not isinstance(x, Tensor) or not (isinstance(y, Tensor) or _is_scalar(y)) or not _is_scalar(alpha):
            return None
        if op == "sub" and _bool_operand(x, y):
            return None  # aten's error, from the implementation
        rd = torch.result_type(x, y)
        if rd == torch.bool or rd not in _CT or (isinstance(alpha, float) and not rd.is_floating_point):
            return None
        p = plan(op, [x, y], rd, _CT[rd], [Arg(2)], refs=[In(0), In(1) if isinstance(y, Tensor) else Arg(1)],
                 inplace=True)
        return p if p is None else p._replace(fits=((2, rd),))  # alpha's range, per call

    return planner


for _op in ("add", "sub"):
    _f = _add_sub(_op)
    for _ov in ("Tensor", "Scalar"):
        ATEN[f"{_op}_.{_ov}"] = (lambda f: lambda self, other, *, alpha=1: f(self, other, alpha, out=self,
                                                                                inplace=True))(_f)
        PLANNERS[f"{_op}_.{_ov}"] = _plan_add_sub_(_op)
    ATEN[f"{_op}.out"] = (lambda f: lambda self, other, *, alpha=1, out: f(self, other, alpha, out=out))(_f)


def _rsub(x, other, alpha=1):
    """other - alpha * x (aten's rsub: ``1.0 - mask`` in attention masks)."""
    _check_tensor("rsub", x)
    if not (isinstance(other, Tensor) or _is_scalar(other)) or not _is_scalar(alpha):
        raise _refuse("rsub", "operands")
    if _bool_operand(x, other):
        raise _refuse("rsub", "a bool operand")  # aten's error
    rd = torch.result_type(x, other)
    if rd == torch.bool:
        raise _refuse("rsub", "bool operands")
    if isinstance(alpha, float) and not rd.is_floating_point:
        raise _refuse("rsub", "a float alpha for integers")
    if not scalar_fits(alpha, rd):
        raise _refuse("rsub", f"alpha {alpha!r} for {rd}")  # aten's overflow error
    return run("sub", [other, x], rd, _ct("sub", rd), [alpha], aten_layout=True)


ATEN["rsub.Tensor"] = lambda self, other, *, alpha=1: _rsub(self, other, alpha)
ATEN["rsub.Scalar"] = lambda self, other, alpha=1: _rsub(self, other, alpha)


def _plan_rsub(x: Any, other: Any, alpha: Any = 1) -> Plan | None:
    if not isinstance(x, Tensor) or not (isinstance(other, Tensor) or _is_scalar(other)) or not _is_scalar(alpha):
        return None
    if _bool_operand(x, other):
        return None  # aten's error, from the implementation
    rd = torch.result_type(x, other)
    if rd == torch.bool or rd not in _CT or (isinstance(alpha, float) and not rd.is_floating_point):
        return None
    if rd == torch.float64:
        return None  # Scalars through fp32 arguments: the Python implementation checks their values
    p = plan("sub", [other, x], rd, _CT[rd], [Arg(2)], refs=[In(1) if isinstance(other, Tensor) else Arg(1), In(0)],
             aten_layout=True)
    return p if p is None else p._replace(fits=((2, rd),))  # alpha's range, per call


PLANNERS["rsub.Tensor"] = lambda self, other, *, alpha=1: _plan_rsub(self, other, alpha)
PLANNERS["rsub.Scalar"] = lambda self, other, alpha=1: _plan_rsub(self, other, alpha)


def _div_mode(x, y, rounding_mode=None, out=None, inplace=False):
    _check_tensor("div", x)
    rd = torch.result_type(x, y)
    if rounding_mode is None:
        rd = _float_of(rd)
        op = "div"
    elif rounding_mode in ("trunc", "floor"):
        op = "div_" + rounding_mode
        if rd == torch.bool:
            raise _refuse("div", "bool operands")
    else:
        raise _refuse("div", f"rounding_mode={rounding_mode!r}")
    if op != "div" and _zero_divisor(rd, y):
        raise _refuse("div", "integer division by zero")  # aten raises ZeroDivisionError
    return run(op, [x, y], rd, _ct(op, rd), out=out, inplace=inplace, aten_layout=True)


ATEN["div.Tensor_mode"] = lambda self, other, *, rounding_mode=None: _div_mode(self, other, rounding_mode)
ATEN["div.Scalar_mode"] = lambda self, other, *, rounding_mode=None: _div_mode(self, other, rounding_mode)
ATEN["div_.Tensor_mode"] = lambda self, other, *, rounding_mode=None: _div_mode(self, other, rounding_mode,
                                                                               out=self, inplace=True)
ATEN["div.out_mode"] = lambda self, other, *, rounding_mode=None, out: _div_mode(self, other, rounding_mode, out=out)
ATEN["floor_divide"] = lambda self, other: _div_mode(self, other, "floor")
ATEN["floor_divide_.Tensor"] = lambda self, other: _div_mode(self, other, "floor", out=self, inplace=True)


def _plan_div_mode(x: Any, y: Any, rounding_mode: Any = None, inplace: bool = False) -> Plan | None:
    """div with a rounding mode, and floor_divide (MoE routing's ``perm // top_k``). An integer
    division by a Scalar that is 0 in the dtype, or by a CPU tensor (which aten checks for
    zeros, and raises), goes to the implementation (_zero_divisor, Plan.divisors)."""
    if not isinstance(x, Tensor) or not (isinstance(y, Tensor) or _is_scalar(y)):
        return None
    rd = torch.result_type(x, y)
    if rounding_mode is None:
        rd, op = _float_of(rd), "div"
    elif rounding_mode in ("trunc", "floor") and rd != torch.bool:
        op = "div_" + rounding_mode
    else:
        return None
    if op != "div" and _integer_divisor_checked(rd, y):
        return None
    if rd not in _CT:
        return None
    p = plan(op, [x, y], rd, _CT[rd], refs=[In(0), In(1) if isinstance(y, Tensor) else Arg(1)], aten_layout=True,
             inplace=inplace)
    return _divisor_check(p, rd, y) if op != "div" else p


PLANNERS["div.Tensor_mode"] = PLANNERS["div.Scalar_mode"] = (
    lambda self, other, *, rounding_mode=None: _plan_div_mode(self, other, rounding_mode))
PLANNERS["div_.Tensor_mode"] = lambda self, other, *, rounding_mode=None: _plan_div_mode(self, other, rounding_mode,
                                                                                         inplace=True)
PLANNERS["floor_divide"] = lambda self, other: _plan_div_mode(self, other, "floor")
PLANNERS["floor_divide_.Tensor"] = lambda self, other: _plan_div_mode(self, other, "floor", inplace=True)


# clamp family
def _promote(a: torch.dtype | None, b: torch.dtype | None) -> torch.dtype | None:
    return b if a is None else a if b is None else torch.promote_types(a, b)


def _complex_of(dt: torch.dtype) -> torch.dtype:
    """aten's toComplexType of a floating dtype."""
    return {torch.float64: torch.complex128, torch.float16: torch.complex32}.get(dt, torch.complex64)


def _number_dtype(v: Any) -> torch.dtype:
    """The dtype a Python number takes in aten's type promotion (a wrapped number)."""
    if isinstance(v, bool):
        return torch.bool
    if isinstance(v, int):
        return torch.int64
    return torch.get_default_dtype() if isinstance(v, float) else _complex_of(torch.get_default_dtype())


def _combine_categories(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    """aten's combine_categories: a lower-priority category's dtype counts only where it is of a
    higher kind (bool < integer < floating < complex) than the higher-priority one's."""
    if higher is None:
        return lower
    if higher.is_complex:
        return higher
    if lower is not None and lower.is_complex:
        return _complex_of(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher == torch.bool or (lower is not None and lower.is_floating_point):
        return _promote(higher, lower)
    return higher


def _result_type(*operands: Any) -> torch.dtype:
    """aten's result type of several operands (torch.result_type takes two): tensors of one or
    more dims first, then 0-dim tensors, then Python numbers (a float as the default dtype),
    each category counting only where it is of a higher kind (``clamp(h_fp16, min=tensor(1.0))``
    is fp16; ``clamp(arange(5), 1.5, 3)`` float32). None operands are skipped."""
    dim = zero = wrapped = None
    for o in operands:
        if o is None:
            continue
        if isinstance(o, Tensor):
            if o.dim() > 0:
                dim = _promote(dim, o.dtype)
            else:
                zero = _promote(zero, o.dtype)
        else:
            wrapped = _promote(wrapped, _number_dtype(o))
    rd = _combine_categories(dim, _combine_categories(zero, wrapped))
    if rd is None:
        raise TypeError("tritonjit_ops: a result type of no operands")
    return rd


def _clamp2(x, lo=None, hi=None, out=None, inplace=False):
    _check_tensor("clamp", x)
    if lo is None and hi is None:
        raise _refuse("clamp", "neither min nor max")
    if any(isinstance(v, Tensor) and v.device != x.device for v in (lo, hi)):
        raise _refuse("clamp", "a bound on another device")  # aten's error (no CPU scalars here)
    rd = _result_type(x, lo, hi)
    if rd == torch.bool or (inplace and not torch.can_cast(rd, x.dtype)):
        raise _refuse("clamp", f"dtype {rd}")
    for v in (lo, hi):
        if v is not None and not isinstance(v, Tensor) and not scalar_fits(v, rd):
            raise _refuse("clamp", f"bound {v!r} for {rd}")  # aten's overflow error
    ct = _ct("clamp", rd)
    od = rd
    if lo is None:
        return run("clamp_max", [x, hi], od, ct, out=out, inplace=inplace, aten_layout="scalar_args")
    if hi is None:
        return run("clamp_min", [x, lo], od, ct, out=out, inplace=inplace, aten_layout="scalar_args")
    return run("clamp", [x, lo, hi], od, ct, out=out, inplace=inplace, aten_layout="scalar_args")


#: clamp and hardtanh calls of at least this many elements are aten's on a device (H200,
#: 2026-12-03, contiguous bf16: 0.94-0.98x aten's time at 1M elements, 1.05-1.10x at 16M;
#: fp32 1.00x at 16M): our kernel's 1024-element programs fall behind at that size
_ATEN_CLAMP_NUMEL = 1 << 22


def _clamp_is_atens(x: Tensor) -> bool:
    """Whether a clamp-like call on ``x`` is large enough to leave to aten (a device only:
    on the interpreter ours runs)."""
    return x.numel() >= _ATEN_CLAMP_NUMEL and is_cuda_like(x)


def _plan_clamp(x, lo=None, hi=None, pos=(1, 2), inplace=False):
    if not isinstance(x, Tensor) or (lo is None and hi is None):
        return None
    if any(isinstance(v, Tensor) and v.device != x.device for v in (lo, hi)):
        return None  # aten's error, from the implementation
    if _clamp_is_atens(x):
        return aten_plan()
    try:
        rd = _result_type(x, lo, hi)
        ct = _ct("clamp", rd)
    except (NotImplementedError, TypeError, RuntimeError):
        return None
    if rd == torch.bool:
        return None
    ref = [In(0)]
    args = [x]
    op = "clamp" if lo is not None and hi is not None else "clamp_min" if lo is not None else "clamp_max"
    for i, v in zip(pos, (lo, hi)):
        if v is not None:
            args.append(v)
            ref.append(In(i) if isinstance(v, Tensor) else Arg(i))
    p = plan(op, args, rd, ct, refs=ref, aten_layout="scalar_args", inplace=inplace)
    fits = tuple((r.i, rd) for r in ref if isinstance(r, Arg))  # aten's overflow check of the bounds, per call
    return p if p is None or not fits else p._replace(fits=fits)


ATEN["clamp"] = lambda self, min=None, max=None: _clamp2(self, min, max)
ATEN["clamp.Tensor"] = lambda self, min=None, max=None: _clamp2(self, min, max)
ATEN["clamp_"] = lambda self, min=None, max=None: _clamp2(self, min, max, out=self, inplace=True)
ATEN["clamp_.Tensor"] = lambda self, min=None, max=None: _clamp2(self, min, max, out=self, inplace=True)
ATEN["clamp.out"] = lambda self, min=None, max=None, *, out: _clamp2(self, min, max, out=out)
ATEN["clamp_min"] = lambda self, min: _clamp2(self, min, None)
ATEN["clamp_min.Tensor"] = lambda self, min: _clamp2(self, min, None)
ATEN["clamp_max"] = lambda self, max: _clamp2(self, None, max)
ATEN["clamp_max.Tensor"] = lambda self, max: _clamp2(self, None, max)
ATEN["clamp_min_"] = lambda self, min: _clamp2(self, min, None, out=self, inplace=True)
ATEN["clamp_max_"] = lambda self, max: _clamp2(self, None, max, out=self, inplace=True)
PLANNERS["clamp"] = _plan_clamp
PLANNERS["clamp.Tensor"] = _plan_clamp
PLANNERS["clamp_min"] = lambda x, lo: _plan_clamp(x, lo, None)
PLANNERS["clamp_min.Tensor"] = lambda x, lo: _plan_clamp(x, lo, None)
PLANNERS["clamp_max"] = lambda x, hi: _plan_clamp(x, None, hi, (0, 1))
PLANNERS["clamp_max.Tensor"] = lambda x, hi: _plan_clamp(x, None, hi, (0, 1))
PLANNERS["clamp_"] = PLANNERS["clamp_.Tensor"] = lambda x, lo=None, hi=None: _plan_clamp(x, lo, hi, inplace=True)
PLANNERS["clamp_min_"] = lambda x, lo: _plan_clamp(x, lo, None, inplace=True)
PLANNERS["clamp_max_"] = lambda x, hi: _plan_clamp(x, None, hi, (0, 1), inplace=True)


# masked_fill: value Scalar or 0-dim Tensor; the result keeps self's dtype and is contiguous
# (aten's masked_fill is a contiguous clone then masked_fill_, not a TensorIterator op)
def _masked_fill(x, mask, value, out=None, inplace=False):
    _check_tensor("masked_fill", x)
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise _refuse("masked_fill", "a mask that is not a bool tensor")
    if isinstance(value, Tensor) and value.dim() != 0:
        raise _refuse("masked_fill", "a value tensor with dimensions")
    if x.dtype not in _REAL:
        raise _refuse("masked_fill", f"dtype {x.dtype}")
    if isinstance(value, Tensor):
        if value.device != x.device and not value.is_cpu:
            raise _refuse("masked_fill", "value on another device")
        if value.is_cpu and not scalar_fits(value.item(), x.dtype):
            raise _refuse("masked_fill", f"value {value.item()!r} for {x.dtype}")  # aten's overflow error
    elif isinstance(value, float) and not x.dtype.is_floating_point:
        raise _refuse("masked_fill", "a float value for an integer tensor")
    elif not scalar_fits(value, x.dtype):
        raise _refuse("masked_fill", f"value {value!r} for {x.dtype}")  # aten's overflow error
    if inplace and list(torch.broadcast_shapes(x.shape, mask.shape)) != list(x.shape):
        raise _refuse("masked_fill", "a mask that does not broadcast to self")
    return run("masked_fill", [x, mask, value], x.dtype, _CT[x.dtype], out=out, inplace=inplace)


def _plan_masked_fill(x, mask, value, inplace=False):
    if not isinstance(x, Tensor) or not isinstance(mask, Tensor) or mask.dtype != torch.bool or x.dtype not in _REAL:
        return None
    if isinstance(value, Tensor):
        if value.dim() != 0 or (value.is_cpu and not x.is_cpu):
            return None
        ref: Any = In(2)
    else:
        if not _is_scalar(value) or (isinstance(value, float) and not x.dtype.is_floating_point):
            return None
        ref = Arg(2)
    p = plan("masked_fill", [x, mask, value], x.dtype, _CT[x.dtype], refs=[In(0), In(1), ref], inplace=inplace)
    # the value's range, per call: a Scalar, or a 0-dim CPU tensor (read on the host, as aten's
    # masked_fill reads it; a device value is not checked, as aten's is not without a sync)
    checked = isinstance(ref, Arg) or value.is_cpu
    return p if p is None or not checked else p._replace(fits=((2, x.dtype),))


for _ov in ("Scalar", "Tensor"):
    ATEN[f"masked_fill.{_ov}"] = _masked_fill
    ATEN[f"masked_fill_.{_ov}"] = lambda self, mask, value: _masked_fill(self, mask, value, out=self, inplace=True)
    PLANNERS[f"masked_fill.{_ov}"] = _plan_masked_fill
    PLANNERS[f"masked_fill_.{_ov}"] = _inplace_of(_plan_masked_fill)


# lerp, addcmul, addcdiv
def _lerp(x, end, weight, out=None, inplace=False):
    _check_tensor("lerp", x)
    if not x.dtype.is_floating_point or not isinstance(end, Tensor) or end.dtype != x.dtype:
        raise _refuse("lerp", "operands")
    if isinstance(weight, Tensor) and weight.dtype != x.dtype:
        raise _refuse("lerp", "weight dtype")
    return run("lerp", [x, end, weight], x.dtype, _ct("lerp", x.dtype), out=out, inplace=inplace,
               aten_layout="scalar_args")


for _ov in ("Scalar", "Tensor"):
    ATEN[f"lerp.{_ov}"] = _lerp
    ATEN[f"lerp_.{_ov}"] = lambda self, end, weight: _lerp(self, end, weight, out=self, inplace=True)


def _addc(op: str) -> Callable:
    def fn(x, t1, t2, value=1, out=None, inplace=False):
        _check_tensor(op, x)
        if not all(isinstance(t, Tensor) for t in (t1, t2)) or not _is_scalar(value):
            raise _refuse(op, "operands")
        if t1.device != x.device or t2.device != x.device:
            raise _refuse(op, "tensors on two devices")  # aten's error (no CPU scalars here)
        rd = _result_type(x, t1, t2)  # aten's: a 0-dim operand does not promote a dimensioned one of its kind
        if not rd.is_floating_point:
            raise _refuse(op, f"dtype {rd}")
        return run(op, [x, t1, t2], rd, _ct(op, rd), [value], out=out, inplace=inplace, aten_layout=True)

    return fn


for _op in ("addcmul", "addcdiv"):
    _f = _addc(_op)
    ATEN[_op] = (lambda f: lambda self, t1, t2, *, value=1: f(self, t1, t2, value))(_f)
    ATEN[f"{_op}_"] = (lambda f: lambda self, t1, t2, *, value=1: f(self, t1, t2, value, out=self, inplace=True))(_f)


# activations with Scalar parameters
def _act(op: str, defaults: Sequence[Any], inplace_name: str | None, clamp_rules: bool = False) -> None:
    """The overloads of a pointwise activation with Scalar parameters (``defaults`` where a
    call omits them); ``clamp_rules``: clamp's rules apply (its size rule, _clamp_is_atens,
    and aten's overflow check of the bounds in x's dtype) and aten's output layout, which for
    hardtanh is ``torch.empty_like(x)`` (a dense x's strides, size-1 dimensions' included)."""
    layout = "like" if op == "hardtanh" else True
    def fn(x, *params, out=None, inplace=False):
        _check_tensor(op, x)
        if not x.dtype.is_floating_point:
            raise _refuse(op, f"dtype {x.dtype}")
        vals = list(params) + list(defaults[len(params):])
        if not all(_is_scalar(v) for v in vals):
            raise _refuse(op, "parameters")
        if clamp_rules and not all(scalar_fits(v, x.dtype) for v in vals):
            raise _refuse(op, f"bounds {vals} for {x.dtype}")  # aten's overflow error
        return run(op, [x], x.dtype, _ct(op, x.dtype), vals, out=out, inplace=inplace, aten_layout=layout)

    def planner(x, *params, inplace=False):
        if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
            return None
        if x.dtype == torch.float64 and op in _APPROX:
            return None
        vals = list(params) + list(defaults[len(params):])
        if not all(_is_scalar(v) for v in vals):
            return None
        if clamp_rules and _clamp_is_atens(x):
            return aten_plan()
        refs = [Arg(1 + i) for i in range(len(params))] + list(defaults[len(params):])
        p = plan(op, [x], x.dtype, _CT[x.dtype], scalar_refs=refs, aten_layout=layout, inplace=inplace)
        fits = tuple((1 + i, x.dtype) for i in range(len(params))) if clamp_rules else ()
        return p if p is None or not fits else p._replace(fits=fits)

    ATEN[op] = fn
    PLANNERS[op] = planner
    if inplace_name:
        ATEN[inplace_name] = lambda self, *params: fn(self, *params, out=self, inplace=True)
        PLANNERS[inplace_name] = _inplace_of(planner)


_act("hardtanh", (-1.0, 1.0), "hardtanh_", clamp_rules=True)
_act("leaky_relu", (0.01,), "leaky_relu_")
_act("elu", (1.0, 1.0, 1.0), "elu_")
_act("softplus", (1.0, 20.0), None)
_act("hardsigmoid", (), "hardsigmoid_")
_act("hardswish", (), "hardswish_")
_act("mish", (), "mish_")


def _nan_to_num(x, nan=None, posinf=None, neginf=None, out=None, inplace=False):
    _check_tensor("nan_to_num", x)
    if x.dtype not in _REAL:
        raise _refuse("nan_to_num", f"dtype {x.dtype}")
    if not x.dtype.is_floating_point:
        return run("copy", [x], x.dtype, _CT[x.dtype], out=out, inplace=inplace)
    fi = torch.finfo(x.dtype)
    vals = [0.0 if nan is None else nan, fi.max if posinf is None else posinf, fi.min if neginf is None else neginf]
    if x.dtype != torch.float64:  # the fp32 scalar argument must not overflow to inf
        f32 = torch.finfo(torch.float32)
        vals = [min(max(v, f32.min), f32.max) for v in vals]
    return run("nan_to_num", [x], x.dtype, _ct("nan_to_num", x.dtype), vals, out=out, inplace=inplace,
               aten_layout="like")  # aten's output: torch.empty_like(x)


ATEN["nan_to_num"] = _nan_to_num
ATEN["nan_to_num_"] = lambda self, nan=None, posinf=None, neginf=None: _nan_to_num(self, nan, posinf, neginf,
                                                                                  out=self, inplace=True)
ATEN["nan_to_num.out"] = lambda self, nan=None, posinf=None, neginf=None, *, out: _nan_to_num(self, nan, posinf,
                                                                                             neginf, out=out)

del _op, _fn, _pl, _f, _ov
ATEN = with_aten_fallback(ATEN)
