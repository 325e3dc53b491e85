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


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def tuned_kernel(X, n, BLOCK: tl.constexpr):
    pass
