"""The kernel every backend runs in the conformance suite."""

import triton
import triton.language as tl

#: runtime parameters: three fp32 pointers, an i32 and an fp32 scalar; BLOCK constexpr
CONFORMANCE_SIGNATURE = "*fp32:16,*fp32:16,*fp32:16,i32,fp32,128"
BLOCK = 128


@triton.jit
def conformance_axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * alpha + tl.load(y + offs, mask=mask), mask=mask)
