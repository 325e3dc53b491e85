"""Kernels shared by the CUDA plugin's CPU and GPU tests."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(X, Y, Out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def mm_kernel(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(C + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def tuple_axpby_kernel(ptrs, n, coef, BLOCK: tl.constexpr):
    """out = coef[0] * x + coef[1] * y, with ptrs = (x, (y, out)) and coef = (a, b)."""
    x_ptr = ptrs[0]
    y_ptr = ptrs[1][0]
    out_ptr = ptrs[1][1]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, coef[0] * tl.load(x_ptr + offs, mask=m) + coef[1] * tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def desc_copy_kernel(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    """dst = src tile by tile through two host tensor descriptors (TMA on sm_90+)."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]))


@triton.jit
def desc_load_padded_kernel(src, Out, ld, BM: tl.constexpr, BN: tl.constexpr):
    """Out[BM, BN] (row stride ld) = the tile of src at (0, 0) past its bounds: shows the padding."""
    tile = src.load([0, 0])
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    tl.store(Out + rm[:, None] * ld + rn[None, :], tile)


@triton.jit
def desc_tuple_scale_kernel(pair, alpha, n_rows, BM: tl.constexpr, BN: tl.constexpr):
    """pair = (src descriptor, (dst descriptor, unused None)): dst = src * alpha."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    src = pair[0]
    dst = pair[1][0]
    if m < n_rows:
        dst.store([m, n], (src.load([m, n]) * alpha).to(dst.dtype))


@triton.jit
def mixed_scalars_kernel(flag, X, k, big, alpha, H, half, ubig, bhalf, small, Out, BLOCK: tl.constexpr):
    """Parameters of every size in an order that pads (a bool before a pointer, an i64
    after an i32, two-byte halves between u64s): the launchers' parameter layout."""
    offs = tl.arange(0, BLOCK)
    v = tl.load(X + offs) * alpha + k + big + (ubig >> 40) + half + bhalf + small + tl.load(H + offs).to(tl.float32)
    tl.store(Out + offs, tl.where(flag, v, 0.0))
