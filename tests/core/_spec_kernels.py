"""Kernels whose parameter lists exercise every specialization rule (bodies are trivial
where only the binder matters; ``add`` and ``scale_opt`` really compile)."""

import triton
import triton.language as tl


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
