"""Kernels whose parameter lists exercise every specialization rule (bodies are trivial
where only the binder matters; ``add``, ``scale_opt`` and the tuple and descriptor
kernels at the end really compile)."""

from collections import namedtuple

import triton
import triton.language as tl

Pair = namedtuple("Pair", ["x", "scale"])


@triton.jit
def plain5(a, b, c, d, e):
    pass


@triton.jit
def with_constexprs(x, n, BLOCK: tl.constexpr, FLAG: tl.constexpr = 3, MODE: tl.constexpr = None, z=7):
    pass


@triton.jit(do_not_specialize=["n", 3], do_not_specialize_on_alignment=[0, "q"])
def no_spec(p, q, n, m, r):
    pass


@triton.jit
def annotated(x: tl.const, n: tl.int64, u: tl.uint32, f: tl.float32, h: tl.bfloat16, i8: tl.int8,
              p: tl.pointer_type(tl.float16), B: tl.constexpr = 16):
    pass


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def scale_opt(x, bias, out, n, alpha, k: tl.int64, BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask) * alpha + k
    if HAS_BIAS:
        v += tl.load(bias + offs, mask=mask)
    tl.store(out + offs, v, mask=mask)


# ---- tuple and tensor-descriptor arguments -------------------------------------------------
@triton.jit
def with_tuple(a, t, b, BLOCK: tl.constexpr = 4):
    pass


@triton.jit(do_not_specialize=["t"], do_not_specialize_on_alignment=["u"])
def tuple_no_spec(t, u):
    pass


@triton.jit
def tuple_axpby(ptrs, n, coef, BLOCK: tl.constexpr):
    """out = coef[0] * x + coef[1] * y with ptrs = (x, (y, out)); coef[1] may be an int 1."""
    x_ptr = ptrs[0]
    y_ptr = ptrs[1][0]
    out_ptr = ptrs[1][1]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, coef[0] * x + coef[1] * y, mask=mask)


@triton.jit
def named_scale(p, out, n, BLOCK: tl.constexpr):
    """out = p.x * p.scale with p a namedtuple (the field names reach the compiler)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(p.x + offs, mask=mask) * p.scale, mask=mask)


@triton.jit
def desc_copy(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    """dst = src tile by tile, through two host tensor descriptors (TMA on sm_90)."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]))


@triton.jit
def desc_tuple_scale(descs, alpha, BM: tl.constexpr, BN: tl.constexpr):
    """descs = (src, dst) descriptors in one tuple argument: dst = src * alpha."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    descs[1].store([m, n], (descs[0].load([m, n]) * alpha).to(descs[1].dtype))
