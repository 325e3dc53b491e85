"""The Triton kernel of the C++ example operator (add_op.cpp launches it by path)."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=mask) + tl.load(Y + offs, mask=mask), mask=mask)
