"""Elementwise operators: binary (with broadcasting, scalars, type promotion), unary, where.

Two launch shapes: a flat kernel for the common case (same-shape contiguous
operands, 5-6 arguments, the cheapest launch), and a rank-4 strided kernel for
broadcasting and non-contiguous operands after dims are coalesced.
"""
from __future__ import annotations

from numbers import Number
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl

from . import _prologue
from ._common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    LOW_PRECISION,
    cdiv,
    check_out,
    check_same_device,
    coalesce,
    fp32_exact,
    is_cuda_like,
    jit,
    unravel4,
)
from ._layout import bstrides, dense, extent, iter_strides, memory_order, new_output
from ._math import activation, div_rn, pow_scalar, pow_tensor
from ._plan import Arg, Buffer, In, Launch, Out, Plan, aten_plan, execute, launch, scalar_fits
from .elementwise import (
    _INT32_MAX,
    _bool_operand,
    _divisor_op,
    _exponent_in,
    _round_tensor,
    _to_out,
    on_interpreter,
    rounding_type,
)
from .elementwise import _ct as _ew_ct
from .elementwise import _launch as _ew_launch

Tensor = torch.Tensor


# --------------------------------------------------------------------- kernels
@triton.jit
def _binary_op(a, b, alpha, OP: tl.constexpr):
    if OP == "add":
        r = a + b * alpha
    elif OP == "sub":
        r = a - b * alpha
    elif OP == "mul":
        r = a * b
    elif OP == "div_recip":  # a Scalar divisor on a device (elementwise._divisor_op)
        r = a * div_rn(tl.zeros_like(b) + 1.0, b)
    elif OP == "div":
        r = div_rn(a, b)
    elif OP == "maximum":
        if a.dtype.is_floating():
            r = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
        else:
            r = tl.maximum(a, b)
    elif OP == "minimum":
        if a.dtype.is_floating():
            r = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
        else:
            r = tl.minimum(a, b)
    else:  # "pow", floating point only: a tensor exponent (a scalar one: _math.pow_scalar)
        r = pow_tensor(a, b)
    return r


@triton.jit
def _binary_flat_kernel(x, y, out, n, alpha, OP: tl.constexpr, BLOCK: tl.constexpr,
                        X_SCALAR: tl.constexpr = False, Y_SCALAR: tl.constexpr = False,
                        UPCAST: tl.constexpr = False, RT: tl.constexpr = None, RTNE: tl.constexpr = False):
    # RT: a tensor operand of another type is rounded to the 16-bit common type first, as
    # aten's (elementwise._round_tensor); RTNE: in integer steps (the interpreter's cast truncates)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    CT: tl.constexpr = tl.float32 if UPCAST else out.dtype.element_ty
    if X_SCALAR:
        a = (x - tl.zeros([BLOCK], CT)).to(CT)  # minus: -0.0 + 0 would be +0.0
    else:
        a = _round_tensor(tl.load(x + offs, mask=mask), RT, RTNE).to(CT)
    if Y_SCALAR:
        b = (y - tl.zeros([BLOCK], CT)).to(CT)
    else:
        b = _round_tensor(tl.load(y + offs, mask=mask), RT, RTNE).to(CT)
    if OP == "pow" and Y_SCALAR:  # the exponent in the base's type, as aten's (_exponent_in)
        e = _exponent_in(y, out.dtype.element_ty)
        r = pow_scalar(a, e, (e - tl.zeros([BLOCK], CT)).to(CT))
    else:
        r = _binary_op(a, b, alpha, OP)
    tl.store(out + offs, _to_out(r, out.dtype.element_ty, RTNE), mask=mask)


@triton.jit
def _unary_flat_kernel(x, out, n, OP: tl.constexpr, BLOCK: tl.constexpr, UPCAST: tl.constexpr = False):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    CT: tl.constexpr = tl.float32 if UPCAST else out.dtype.element_ty
    a = tl.load(x + offs, mask=mask).to(CT)
    tl.store(out + offs, activation(a, OP).to(out.dtype.element_ty), mask=mask)


@triton.jit
def _nd_offset(i0, i1, i2, i3, s0, s1, s2, s3):
    return i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3


@triton.jit
def _pointwise_nd_kernel(
    x, y, z, out, n, alpha,
    d1, d2, d3,
    xs0, xs1, xs2, xs3,
    ys0, ys1, ys2, ys3,
    zs0, zs1, zs2, zs3,
    OP: tl.constexpr, NIN: tl.constexpr, BLOCK: tl.constexpr,
    X_SCALAR: tl.constexpr, Y_SCALAR: tl.constexpr, Z_SCALAR: tl.constexpr,
    UPCAST: tl.constexpr, IDX64: tl.constexpr, RT: tl.constexpr = None, RTNE: tl.constexpr = False,
):
    """Rank-4 strided elementwise kernel; the output is contiguous, operands are not. RT, RTNE:
    as _binary_flat_kernel's."""
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    CT: tl.constexpr = tl.float32 if UPCAST else out.dtype.element_ty
    if X_SCALAR:
        a = x - tl.zeros([BLOCK], CT)  # minus: -0.0 + 0 would be +0.0
    else:
        a = _round_tensor(tl.load(x + _nd_offset(i0, i1, i2, i3, xs0, xs1, xs2, xs3), mask=mask), RT, RTNE)
    if NIN >= 2:
        if Y_SCALAR:
            b = y - tl.zeros([BLOCK], CT)
        else:
            b = _round_tensor(tl.load(y + _nd_offset(i0, i1, i2, i3, ys0, ys1, ys2, ys3), mask=mask), RT, RTNE)
    if NIN == 1:
        r = activation(a.to(CT), OP)
    elif NIN == 2:
        if OP == "pow" and Y_SCALAR:  # the exponent in the base's type, as aten's (_exponent_in)
            e = _exponent_in(y, out.dtype.element_ty)
            r = pow_scalar(a.to(CT), e, (e - tl.zeros([BLOCK], CT)).to(CT))
        else:
            r = _binary_op(a.to(CT), b.to(CT), alpha, OP)
    else:  # where(x=cond, y, z)
        if Z_SCALAR:
            c = z - tl.zeros([BLOCK], CT)
        else:
            c = tl.load(z + _nd_offset(i0, i1, i2, i3, zs0, zs1, zs2, zs3), mask=mask)
        r = tl.where(a != 0, b.to(CT), c.to(CT))
    tl.store(out + offs, _to_out(r, out.dtype.element_ty, RTNE), mask=mask)


_binary_flat = jit(_binary_flat_kernel)
_unary_flat = jit(_unary_flat_kernel)
_pointwise_nd = jit(_pointwise_nd_kernel)

_BLOCK = 1024  # the hot paths below inline it: BLOCK=1024, grid (n + 1023) >> 10


# ----------------------------------------------------------------- host side
_ARITH_DTYPES = FLOAT_DTYPES + INT_DTYPES
_ALLOWED = {
    "add": _ARITH_DTYPES, "sub": _ARITH_DTYPES, "mul": _ARITH_DTYPES, "div": FLOAT_DTYPES,
    "maximum": _ARITH_DTYPES, "minimum": _ARITH_DTYPES, "pow": FLOAT_DTYPES,
}
_FLOAT_UNARY = {"exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh"}


def _unsupported(op: str, dtype: torch.dtype) -> TypeError:
    return TypeError(f"tritonjit.{op}: unsupported dtype {dtype}")


def _broadcast_shape(a: tuple, b: tuple) -> list[int]:
    """torch.broadcast_shapes with aten's own error message."""
    n = max(len(a), len(b))
    out = []
    for i in range(n):
        da = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
        db = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
        if da != db and da != 1 and db != 1:
            raise RuntimeError(
                f"The size of tensor a ({da}) must match the size of tensor b ({db}) "
                f"at non-singleton dimension {i}"
            )
        out.append(db if da == 1 else da)
    return out


def _elementwise(op: str, nin: int, operands: Sequence, refs: Sequence, shape: list[int], out_ref: Any, alpha: Any,
                 upcast: bool, rt: str | None = None) -> Launch | None:
    """The launch of an elementwise op over ``operands`` (tensors or Python scalars) into a
    contiguous output of ``shape``: the flat kernel where every tensor operand is contiguous
    and of the output's shape, else the rank-4 strided kernel after coalescing dims; None
    beyond rank 4. ``refs`` are what the launch passes for each operand and ``out_ref`` for
    the output: the objects themselves (run now) or plan references (In, Arg, Out). ``rt``:
    the 16-bit type tensor operands of another type are rounded to first
    (elementwise.rounding_type)."""
    n = 1
    for d in shape:
        n *= d
    grid = ((n + _BLOCK - 1) // _BLOCK,)
    scalar = [not isinstance(t, Tensor) for t in operands]
    op = _divisor_op(op, operands)
    rounding: dict[str, Any] = {}
    if rt is not None:
        rounding["RT"] = rt
        rounding["RTNE"] = on_interpreter(operands)
    flat = n <= _INT32_MAX and all(s or (t.is_contiguous() and list(t.shape) == shape) for t, s in zip(operands, scalar))
    if flat and nin == 2:
        return launch(_binary_flat, grid, refs[0], refs[1], out_ref, n, alpha, OP=op, BLOCK=_BLOCK,
                      X_SCALAR=scalar[0], Y_SCALAR=scalar[1], UPCAST=upcast, **rounding)
    if flat and nin == 1:
        return launch(_unary_flat, grid, refs[0], out_ref, n, OP=op, BLOCK=_BLOCK, UPCAST=upcast)
    dims, strides = coalesce(shape, [bstrides(t, shape) for t in operands])
    if len(dims) > 4:
        return None
    pad = 4 - len(dims)
    dims = [1] * pad + dims
    strides = [[0] * pad + st for st in strides]
    refs, scalar = list(refs), list(scalar)
    while len(refs) < 3:
        refs.append(0)
        scalar.append(True)
        strides.append([0, 0, 0, 0])
    # int64 offsets where an operand's elements lie 2**31 or more apart, not only where there
    # are that many (``x[:, 7]`` of 16400 x 131072: 16400 elements spanning 2**31)
    span = max([n] + [extent(dims, st) for st in strides])
    return launch(_pointwise_nd, grid, refs[0], refs[1], refs[2], out_ref, n, alpha, dims[1], dims[2], dims[3],
                  *strides[0], *strides[1], *strides[2], OP=op, NIN=nin, BLOCK=_BLOCK, X_SCALAR=scalar[0],
                  Y_SCALAR=scalar[1], Z_SCALAR=scalar[2], UPCAST=upcast, IDX64=span > _INT32_MAX, **rounding)


def _in_memory_order(operands: Sequence, shape: list[int], strides: Sequence[int]) -> tuple[list, list[int], list[int]]:
    """The operands (broadcast to ``shape``) and the shape permuted into the memory order of
    a dense output of ``strides``, and that order: the kernels, which write their output
    contiguously, then write it in that layout (a transposed input read along its rows)."""
    order = memory_order(strides)
    ops = [t.expand(shape).permute(order) if isinstance(t, Tensor) else t for t in operands]
    return ops, [shape[d] for d in order], order


def _launch_elementwise(op: str, nin: int, operands: list, out: Tensor, alpha, upcast: bool,
                        rt: str | None = None) -> Tensor:
    """Run the elementwise op now into ``out`` (any strides: a dense one in its memory order,
    any other through a contiguous temporary and a copy)."""
    if out.numel() == 0:
        return out
    shape = list(out.shape)
    temporary = False
    if out.is_contiguous():
        target = out
    elif dense(shape, out.stride()):  # TensorIterator keeps a dense output's strides
        operands, shape, order = _in_memory_order(operands, shape, out.stride())
        target = out.permute(order)
    else:
        target, temporary = torch.empty(out.shape, dtype=out.dtype, device=out.device), True
    L = _elementwise(op, nin, operands, operands, shape, target, alpha, upcast, rt)
    if L is None:  # beyond rank 4 after coalescing: materialize the broadcast views once
        operands = [t.expand(shape).contiguous() if isinstance(t, Tensor) else t for t in operands]
        L = _elementwise(op, nin, operands, operands, shape, target, alpha, upcast, rt)
        assert L is not None  # contiguous operands: the flat kernel takes any rank
    execute(L)
    if temporary:
        out.copy_(target)
    return out


def _as_operand(op: str, v):
    """A Tensor, or a real Python scalar (a bool included: ``x * True``, a wrapped number
    the dispatcher passes as a plain bool; it takes part in the type promotion as a bool,
    see :func:`_kernel_scalar`)."""
    if isinstance(v, Tensor):
        return v
    if not isinstance(v, Number) or isinstance(v, complex):
        raise TypeError(f"tritonjit.{op}: expected a Tensor or a real scalar, got {type(v).__name__}")
    return v


def _kernel_scalar(v):
    """A scalar operand as the kernels take it: a bool as the integer 0/1 (the result dtype
    is already promoted with the bool)."""
    return int(v) if isinstance(v, bool) else v


def _exact_scalar(v, device: torch.device):
    """A float operand of a float64 computation that float32 does not hold exactly, as a
    0-dim float64 tensor on ``device`` (a fill launch, no copy): kernels take float scalars
    as float32 arguments. Other operands unchanged."""
    if isinstance(v, float) and not fp32_exact(v):
        return torch.full((), v, dtype=torch.float64, device=device)
    return v


def _pow_layout(op: str, x: Any, y: Any) -> list | None:
    """The operands aten lays pow's output out by: the base alone where a Python number is the
    exponent (pow.Tensor_Scalar is a unary iterator, whose fast set-up keeps a dense input's
    strides, size-1 dims' included), none where it is the base (pow.Scalar allocates its
    output contiguous); None (all of them) for the other ops and for two tensors, a 0-dim one
    included (a binary iterator)."""
    if op != "pow" or (isinstance(x, Tensor) and isinstance(y, Tensor)):
        return None
    return [x] if isinstance(x, Tensor) else []


def _binary(op: str, x, y, alpha=1, out: Tensor | None = None) -> Tensor:
    x = _as_operand(op, x)
    y = _as_operand(op, y)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"tritonjit.{op}: at least one argument must be a Tensor")
    layout = _pow_layout(op, x, y)
    # A 0-dim CPU tensor next to an accelerator tensor is a scalar, as in aten.
    if isinstance(x, Tensor) and isinstance(y, Tensor) and x.device != y.device:
        if x.dim() == 0 and x.device.type == "cpu":
            x = x.item()
        elif y.dim() == 0 and y.device.type == "cpu":
            y = y.item()
        else:
            check_same_device(op, x, y)
    rdtype = torch.result_type(x, y)
    if op == "sub" and _bool_operand(x, y):
        raise _unsupported(op, torch.bool)  # aten raises its own error for a bool operand
    if rdtype == torch.bool and op in ("add", "mul", "maximum", "minimum") and out is None:
        # logical or/and on bytes: nonzero <=> True, as aten's bool arithmetic
        u8 = [v.to(torch.uint8) if isinstance(v, Tensor) else int(v) for v in (x, y)]
        return _binary(op, u8[0], u8[1], alpha, None).to(torch.bool)
    x, y = _kernel_scalar(x), _kernel_scalar(y)
    rt = rounding_type(op, rdtype, (x, y))  # read as aten reads them: rounded to the common dtype first
    if op == "div" and not rdtype.is_floating_point:
        rdtype = torch.get_default_dtype()
    if rdtype not in _ALLOWED[op]:
        raise _unsupported(op, rdtype)
    if alpha != 1:
        if op not in ("add", "sub"):
            raise TypeError(f"tritonjit.{op}: alpha is not supported")
        if not rdtype.is_floating_point and not isinstance(alpha, int):
            raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
        if not scalar_fits(alpha, rdtype):  # aten's CPU kernel converts alpha to the dtype, checked
            raise RuntimeError(f"tritonjit.{op}: alpha={alpha!r} cannot be converted to {rdtype} without overflow")
    dev = x.device if isinstance(x, Tensor) else y.device
    if rdtype == torch.float64:
        x, y = _exact_scalar(x, dev), _exact_scalar(y, dev)
        if isinstance(alpha, float) and not fp32_exact(alpha):
            y, alpha = _binary("mul", y, _exact_scalar(alpha, dev)), 1
    xs = x.shape if isinstance(x, Tensor) else ()
    ys = y.shape if isinstance(y, Tensor) else ()
    shape = list(xs) if xs == ys else _broadcast_shape(tuple(xs), tuple(ys))
    if out is None:
        out = new_output(shape, rdtype, dev, [x, y] if layout is None else layout)
    else:
        check_out(op, out, shape, rdtype, dev)
    return _launch_elementwise(op, 2, [x, y], out, alpha, rdtype in LOW_PRECISION, rt)


# Hot paths: same float dtype (fp32/fp16/bf16), same shape, contiguous, no out=. The
# checks and the output allocation are one call (_prologue: C++ once built, Python
# until then); the kernel gets positional runtime arguments and literal constexprs,
# the cheapest call for the native dispatcher. Where the launch fails (tensors on two
# devices: the Python prologue does not compare devices) the message is torch's.
_FAST_UPCAST = _prologue.UPCAST
_fast_upcast = _FAST_UPCAST.get


def _make_binary(op: str, doc: str, alpha: bool = False):
    """The entry of a binary op; ``alpha``: it takes aten's ``alpha=`` (add, sub)."""
    def with_alpha(x, y, *, alpha=1, out: Tensor | None = None) -> Tensor:
        if out is None and alpha == 1:
            p = _prologue.binary(x, y)
            if p is not None:
                return _flat_binary(op, x, y, *p)
        return _binary(op, x, y, alpha, out)

    def without_alpha(x, y, *, out: Tensor | None = None) -> Tensor:
        if out is None:
            p = _prologue.binary(x, y)
            if p is not None:
                return _flat_binary(op, x, y, *p)
        return _binary(op, x, y, 1, out)

    fn: Callable[..., Tensor] = with_alpha if alpha else without_alpha
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


def _flat_binary(op: str, x: Tensor, y: Tensor, o: Tensor, n: int, up: bool) -> Tensor:
    if n > _INT32_MAX:  # the flat kernel's offsets are int32: the general path indexes in int64
        return _binary(op, x, y, 1, None)
    if n:
        try:
            _binary_flat[((n + 1023) >> 10,)](x, y, o, n, 1, OP=op, BLOCK=1024, UPCAST=up)
        except Exception:
            check_same_device(op, x, y)  # torch's message where the devices differ
            raise
    else:
        check_same_device(op, x, y)
    return o


add = _make_binary("add", "x + alpha * y with broadcasting and aten's type promotion.", alpha=True)
sub = _make_binary("sub", "x - alpha * y with broadcasting and aten's type promotion.", alpha=True)
mul = _make_binary("mul", "x * y with broadcasting and aten's type promotion.")
div = _make_binary("div", "True division x / y; integer inputs give the default float dtype.")
maximum = _make_binary("maximum", "Elementwise max; NaN propagates as in torch.maximum.")
minimum = _make_binary("minimum", "Elementwise min; NaN propagates as in torch.minimum.")
pow = _make_binary("pow", "x ** y for floating point results (tensor or scalar base/exponent).")


def _unary(op: str, x: Tensor, out: Tensor | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.{op}: expected a Tensor, got {type(x).__name__}")
    dt = x.dtype
    kop = op
    if op in _FLOAT_UNARY:
        if dt in INT_DTYPES:
            dt = torch.get_default_dtype()
        elif dt not in FLOAT_DTYPES:
            raise _unsupported(op, dt)
    elif dt not in _ARITH_DTYPES or (op == "neg" and dt == torch.uint8):
        raise _unsupported(op, dt)
    if op == "abs" and dt == torch.uint8:
        kop = "relu"  # identity on unsigned values
    if out is None:
        if type(x) is Tensor and x.is_contiguous() and dt == x.dtype and dt in _FAST_UPCAST:
            o = _prologue.like(x)  # contiguous format: aten's iterator keeps no size-1 dim's odd stride
            n = x.numel()
            if n > _INT32_MAX:  # the flat kernel's offsets are int32
                return _launch_elementwise(kop, 1, [x], o, 1, dt in LOW_PRECISION)
            if n:
                _unary_flat[(cdiv(n, _BLOCK),)](x, o, n, OP=kop, BLOCK=_BLOCK, UPCAST=_FAST_UPCAST[dt])
            return o
        out = new_output(list(x.shape), dt, x.device, [x])
    else:
        check_out(op, out, x.shape, dt, x.device)
    return _launch_elementwise(kop, 1, [x], out, 1, dt in LOW_PRECISION)


def _make_unary(op: str, doc: str):
    def fn(x: Tensor, *, out: Tensor | None = None) -> Tensor:
        # hot path: fp32/fp16/bf16 (valid for every unary op), contiguous, no out=
        if out is None and x.__class__ is Tensor:
            up = _fast_upcast(x.dtype)
            if up is not None and x.is_contiguous():
                o = _prologue.like(x)
                n = x.numel()
                if 0 < n <= _INT32_MAX:  # the flat kernel's offsets are int32: past them, _unary's path
                    _unary_flat[((n + 1023) >> 10,)](x, o, n, OP=op, BLOCK=1024, UPCAST=up)
                    return o
                if not n:
                    return o
        return _unary(op, x, out)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


neg = _make_unary("neg", "-x.")
abs = _make_unary("abs", "|x|.")
exp = _make_unary("exp", "e**x, computed in fp32 for half inputs.")
log = _make_unary("log", "Natural log, computed in fp32 for half inputs.")
sqrt = _make_unary("sqrt", "Square root.")
rsqrt = _make_unary("rsqrt", "1 / sqrt(x).")
sigmoid = _make_unary("sigmoid", "1 / (1 + e**-x).")
tanh = _make_unary("tanh", "Hyperbolic tangent (exp-based, so it runs on every backend).")
relu = _make_unary("relu", "max(x, 0); NaN stays NaN.")
silu = _make_unary("silu", "x * sigmoid(x).")


_gelu_erf = _make_unary("gelu", "GELU, erf form.")
_gelu_tanh = _make_unary("gelu_tanh", "GELU, tanh approximation.")


def gelu(x: Tensor, approximate: str = "none", *, out: Tensor | None = None) -> Tensor:
    """GELU with aten's two approximations: 'none' (erf) and 'tanh'."""
    if approximate == "none":
        return _gelu_erf(x, out=out)
    if approximate == "tanh":
        return _gelu_tanh(x, out=out)
    raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")


def where(condition: Tensor, x, y, *, out: Tensor | None = None) -> Tensor:
    """condition ? x : y with three-way broadcasting; x and y may be scalars."""
    if not isinstance(condition, Tensor) or condition.dtype != torch.bool:
        raise TypeError("tritonjit.where: condition must be a bool Tensor")
    x = _as_operand("where", x)
    y = _as_operand("where", y)
    check_same_device("where", condition, x, y)
    rdtype = torch.result_type(x, y)
    if rdtype not in _ARITH_DTYPES:
        raise _unsupported("where", rdtype)
    x, y = _kernel_scalar(x), _kernel_scalar(y)
    if rdtype == torch.float64:
        x, y = _exact_scalar(x, condition.device), _exact_scalar(y, condition.device)
    shape = list(condition.shape)
    for t in (x, y):
        if isinstance(t, Tensor):
            shape = _broadcast_shape(tuple(shape), tuple(t.shape))
    if out is None:
        out = new_output(shape, rdtype, condition.device, [condition, x, y])
    else:
        check_out("where", out, shape, rdtype, condition.device)
    return _launch_elementwise("where", 3, [condition, x, y], out, 1, rdtype in LOW_PRECISION)


# ----------------------------------------------------------------- plans
# Planners of the aten overloads (arguments in aten's order): the C++ operator path
# caches their plans per call key (see _plan.py); None sends a call to the Python
# implementation, which validates and raises aten's errors.
def _is_scalar(v: Any) -> bool:
    return not isinstance(v, Tensor) and isinstance(v, Number) and not isinstance(v, (bool, complex))


def plan_binary(op: str, x: Any, y: Any, alpha: Any = 1) -> Plan | None:
    """x (op) y for tensors or Scalars; a 0-dim CPU tensor beside a device tensor is a
    scalar, as in aten. ``alpha`` (add, sub) is passed at run time, never baked in."""
    xt, yt = isinstance(x, Tensor), isinstance(y, Tensor)
    if not (xt or _is_scalar(x)) or not (yt or _is_scalar(y)) or not (xt or yt):
        return None
    xs, ys = not xt, not yt  # operands the kernel takes as scalars
    if xt and yt and x.device != y.device:
        if x.dim() == 0 and x.is_cpu:
            xs = True
        elif y.dim() == 0 and y.is_cpu:
            ys = True
        else:
            return None
    if op == "sub" and _bool_operand(x, y):
        return None  # aten's error for a bool operand of sub (the implementation raises it)
    rdtype = torch.result_type(x, y)
    if rdtype.is_complex:  # complex RoPE (view_as_complex(q) * freqs): aten's kernel, no Python per call
        return aten_plan()
    # aten rounds a tensor operand to the common dtype first (x_bf16 + int64 tensor); not a lifted scalar
    rt = rounding_type(op, rdtype, [t for t, lifted in ((x, xs), (y, ys)) if not lifted])
    if op == "div" and not rdtype.is_floating_point:
        rdtype = torch.get_default_dtype()
    if rdtype == torch.bool and op in _BOOL_OPS and isinstance(x, Tensor) and isinstance(y, Tensor) and not (xs or ys):
        # aten's bool arithmetic is logic: add/maximum = or, mul/minimum = and (alpha ignored)
        refs: list[In | Arg] = [In(0), In(1)]
        shape = list(x.shape) if x.shape == y.shape else _broadcast_shape(tuple(x.shape), tuple(y.shape))
        return _plan_of(_BOOL_OPS[op], 2, [x, y], refs, shape, torch.bool, 1)
    if rdtype not in _ALLOWED[op]:
        return None
    if op in ("add", "sub"):
        if not _is_scalar(alpha) or (isinstance(alpha, float) and not rdtype.is_floating_point):
            return None
        alpha_ref: Any = Arg(2)
    else:
        alpha_ref = 1
    operands = [0 if xs else x, 0 if ys else y]
    refs = [Arg(0) if xs else In(0), Arg(1) if ys else In(1)]
    shapes = [tuple(t.shape) for t in operands if isinstance(t, Tensor)]
    shape = list(shapes[0]) if len(shapes) == 1 or shapes[0] == shapes[1] else _broadcast_shape(*shapes)
    p = _plan_of(op, 2, operands, refs, shape, rdtype, alpha_ref, rt, _pow_layout(op, x, y))
    if p is None or alpha_ref == 1:
        return p
    return p._replace(fits=((2, rdtype),))  # alpha's range, per call (an fp16 alpha of 1e8 is aten's error)


#: the logical op of aten's arithmetic on two bool tensors
_BOOL_OPS = {"add": "maximum", "maximum": "maximum", "mul": "minimum", "minimum": "minimum"}


#: a call of at least this many elements where an operand is read across the output's rows
#: goes to aten's kernel (H200, 2026-12-03: T5's f32[8,16,1024,1024] + a bf16 position bias
#: laid out heads-innermost ran at 1.47x aten's time; TensorIterator tiles such reads)
_ATEN_STRIDED_NUMEL = 1 << 22


def _reads_across(operands: Sequence, shape: list[int]) -> bool:
    """Whether a tensor operand, in the output's memory order, steps through memory along
    the output's innermost dim (a stride other than 0 or 1 there): each of the kernel's
    loads then touches another cache line. On a device only (the interpreter runs ours)."""
    tensors = [t for t in operands if isinstance(t, Tensor) and t.dim()]
    if not shape or shape[-1] == 1 or not tensors or not is_cuda_like(tensors[0]):
        return False
    return any(bstrides(t, shape)[-1] not in (0, 1) for t in tensors)


def _plan_of(op: str, nin: int, operands: list, refs: list, shape: list[int], rdtype: torch.dtype,
             alpha: Any, rt: str | None = None, layout: list | None = None) -> Plan | None:
    """The plan of one launch into a new output in aten's layout (see _layout.py; ``layout``:
    the operands it follows, where not all of them): a non-contiguous one is written in its
    memory order."""
    n = 1
    for d in shape:
        n *= d
    strides = iter_strides(shape, operands if layout is None else layout) if n else None
    out = (Buffer(tuple(shape), rdtype, strides),)
    if n == 0:
        return Plan(out, ())
    if strides is not None:
        operands, shape, _ = _in_memory_order(operands, shape, strides)
    if n >= _ATEN_STRIDED_NUMEL and _reads_across(operands, shape):
        return aten_plan()
    L = _elementwise(op, nin, operands, refs, shape, Out(0), alpha, rdtype in LOW_PRECISION, rt)
    if L is None:  # rank 5 or 6 after coalescing (repeat_kv's views): the elementwise module's rank-6 kernel
        try:
            ct = _ew_ct(op, rdtype)
        except NotImplementedError:
            return None
        L = _ew_launch(op, operands, refs, Buffer(tuple(shape), rdtype), Out(0), shape, ct,
                       [alpha] if op in ("add", "sub") else [], rt=rt)
    return None if L is None else Plan(out, (L,))


def plan_unary(op: str, x: Any) -> Plan | None:
    if not isinstance(x, Tensor):
        return None
    if x.is_complex():  # aten's kernel (the key holds the dtype): no Python per call
        return aten_plan()
    dt = x.dtype
    kop = op
    if op in _FLOAT_UNARY:
        if dt in INT_DTYPES:
            dt = torch.get_default_dtype()
        elif dt not in FLOAT_DTYPES:
            return None
    elif dt not in _ARITH_DTYPES or (op == "neg" and dt == torch.uint8):
        return None
    if op == "abs" and dt == torch.uint8:
        kop = "relu"
    return _plan_of(kop, 1, [x], [In(0)], list(x.shape), dt, 1)


def plan_gelu(x: Any, approximate: str = "none") -> Plan | None:
    if approximate not in ("none", "tanh"):
        return None
    return plan_unary("gelu" if approximate == "none" else "gelu_tanh", x)


def plan_where(condition: Any, x: Any, y: Any) -> Plan | None:
    if not all(isinstance(t, Tensor) for t in (condition, x, y)) or condition.dtype != torch.bool:
        return None
    if not (condition.device == x.device == y.device):
        return None
    rdtype = torch.result_type(x, y)
    if rdtype.is_complex:
        return aten_plan()
    if rdtype not in _ARITH_DTYPES:
        return None
    shape = list(condition.shape)
    for t in (x, y):
        shape = _broadcast_shape(tuple(shape), tuple(t.shape))
    return _plan_of("where", 3, [condition, x, y], [In(0), In(1), In(2)], shape, rdtype, 1)


def _binary_planner(op: str, alpha: bool = False):
    if alpha:
        return lambda x, y, alpha=1: plan_binary(op, x, y, alpha)
    return lambda x, y: plan_binary(op, x, y)


#: aten overload -> planner
PLANNERS: dict[str, Any] = {
    "add.Tensor": _binary_planner("add", True), "add.Scalar": _binary_planner("add", True),
    "sub.Tensor": _binary_planner("sub", True), "sub.Scalar": _binary_planner("sub", True),
    "mul.Tensor": _binary_planner("mul"), "mul.Scalar": _binary_planner("mul"),
    "div.Tensor": _binary_planner("div"), "div.Scalar": _binary_planner("div"),
    "maximum": _binary_planner("maximum"), "minimum": _binary_planner("minimum"),
    "pow.Tensor_Tensor": _binary_planner("pow"), "pow.Tensor_Scalar": _binary_planner("pow"),
    "pow.Scalar": _binary_planner("pow"),
    "gelu": plan_gelu, "where.self": plan_where,
}
for _op in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "silu"):
    PLANNERS[_op] = (lambda op: lambda x: plan_unary(op, x))(_op)
