"""Kernels the C++ API tests launch by path (tritonjit::Function::get_instance)."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def mixed_kernel(P, Q, i, u, f, b, j, OP: tl.constexpr):
    pass


@triton.jit
def narrow_kernel(X, n: tl.int32, scale: tl.float32, BLOCK: tl.constexpr):
    """Annotated scalars: the variant takes an i32 and an fp32 whatever the call passes."""
    pass


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def tuned_kernel(X, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def tuple_axpby(ptrs, n, coef, BLOCK: tl.constexpr):
    """out = coef[0] * x + coef[1] * y with ptrs = (x, (y, out))."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(ptrs[0] + offs, mask=m)
    y = tl.load(ptrs[1][0] + offs, mask=m)
    tl.store(ptrs[1][1] + offs, coef[0] * x + coef[1] * y, mask=m)


@triton.jit
def desc_scale(src, pair, BM: tl.constexpr, BN: tl.constexpr):
    """pair = (alpha, dst): dst = src * alpha, tile by tile, through host tensor descriptors."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    dst = pair[1]
    dst.store([m, n], (src.load([m, n]) * pair[0]).to(dst.dtype))
