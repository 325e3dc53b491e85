"""The kernels of the launch benchmark (launch_overhead.py), in a file of their own.

Both Python (``tritonjit.function(path, name)``) and C++
(``tritonjit::Function::get_instance(path, name)``) reach a kernel by this file's
path, so both drive the same runtime object. Each kernel is tiny (one program of
BLOCK elements) and writes what its arguments add up to, so one launch of it can be
checked; the number in a name is the count of runtime (non-constexpr) arguments.

No integer argument of the benchmark equals 1: Triton turns such an int into a
constant, and the kernel would then take one device parameter less than it seems.
"""

import triton
import triton.language as tl


@triton.jit
def args0():
    pass


@triton.jit
def args4(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def args8(X, Y, Z, W, Out, n, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m) + tl.load(Z + offs, mask=m) + tl.load(W + offs, mask=m)
    tl.store(Out + offs, v + a + b, mask=m)


@triton.jit
def args16(X0, X1, X2, X3, X4, X5, X6, Out, n, a, b, c, d, e, f, g, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X0 + offs, mask=m) + tl.load(X1 + offs, mask=m) + tl.load(X2 + offs, mask=m)
    v += tl.load(X3 + offs, mask=m) + tl.load(X4 + offs, mask=m) + tl.load(X5 + offs, mask=m)
    v += tl.load(X6 + offs, mask=m)
    tl.store(Out + offs, v + (a + b + c + d + e + f + g), mask=m)


@triton.jit
def args19(X0, X1, X2, X3, Out, n, i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X0 + offs, mask=m) + tl.load(X1 + offs, mask=m) + tl.load(X2 + offs, mask=m)
    v += tl.load(X3 + offs, mask=m)
    s = i0 + i1 + i2 + i3 + i4 + i5 + i6 + i7 + i8 + i9 + i10 + i11 + i12
    tl.store(Out + offs, v + s, mask=m)


@triton.jit
def args58(X0, X1, X2, X3, X4, X5, X6, Out, n,
           i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12, i13, i14, i15, i16, i17, i18, i19, i20, i21, i22,
           i23, i24,
           f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
           f23,
           BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X0 + offs, mask=m) + tl.load(X1 + offs, mask=m) + tl.load(X2 + offs, mask=m)
    v += tl.load(X3 + offs, mask=m) + tl.load(X4 + offs, mask=m) + tl.load(X5 + offs, mask=m)
    v += tl.load(X6 + offs, mask=m)
    si = i0 + i1 + i2 + i3 + i4 + i5 + i6 + i7 + i8 + i9 + i10 + i11 + i12 + i13 + i14 + i15 + i16 + i17 + i18 + i19
    si += i20 + i21 + i22 + i23 + i24
    sf = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8 + f9 + f10 + f11 + f12 + f13 + f14 + f15 + f16 + f17 + f18 + f19
    sf += f20 + f21 + f22 + f23
    tl.store(Out + offs, v + si + sf, mask=m)


@triton.jit
def mixed(Xh, Xb, Xf, Out, Opt, n, alpha, k, big, flag, BLOCK: tl.constexpr):
    """fp16, bf16 and fp32 pointers, a None, an i32, an i64, a float and a bool, a constexpr."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(Xh + offs, mask=m).to(tl.float32) * alpha + tl.load(Xb + offs, mask=m).to(tl.float32)
    v += tl.load(Xf + offs, mask=m) + (big >> 32).to(tl.float32)
    if flag:
        v += k
    if Opt is not None:
        v += tl.load(Opt + offs, mask=m)
    tl.store(Out + offs, v, mask=m)


@triton.jit
def tuples(XY, Out, n, coef, BLOCK: tl.constexpr):
    """Tuple arguments: two pointers in one, a float and an int in another (the device
    receives their elements, so the floor launches 6 parameters)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(XY[0] + offs, mask=m) * coef[0] + tl.load(XY[1] + offs, mask=m) + coef[1]
    tl.store(Out + offs, v, mask=m)
