"""The layout aten gives the new output of a pointwise op: TensorIterator's.

aten allocates a pointwise result in the memory order of its operands: ``x.t().exp()``
is stored as ``x`` is (strides (1, n)), ``q.transpose(1, 2) * s`` keeps the (B, S, H, D)
storage order of ``q``, a broadcast operand does not count where another one decides.
A result that is contiguous instead has the right values but not aten's strides, which
a later ``view`` or ``stride()`` can tell, and it makes a transposed input read against
the grain.

The rule is TensorIterator's (aten/src/ATen/TensorIterator.cpp: ``fast_set_up``, then
``compute_strides``, ``reorder_dimensions`` and ``allocate_or_resize_outputs``), written
out here because aten's meta kernels do not run it: their Python stride rule gives other
strides to size-1 dimensions. The tests hold this copy to aten's CPU results over random
layouts.

It also holds the rows layout that lets a row kernel read a strided view in place
(:func:`rows_layout` on the host, :func:`row_offset` in the kernels).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl  # noqa: F401 - Triton requires it visible to the @triton.jit helper below

Tensor = torch.Tensor


def dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """c10's is_non_overlapping_and_dense: the dimensions of size 2 or more, by stride,
    are contiguous."""
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    expect = 1
    for d in dims:
        if strides[d] != expect:
            return False
        expect *= shape[d]
    return True


def extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """How many elements a view of ``shape`` and ``strides`` spans from its first to its last
    (0 when empty): what a kernel's offsets into it reach, and so whether they need int64."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(shape, strides))


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """The strides torch.empty gives ``shape`` (row-major)."""
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return st


def flat_stride(shape: Sequence[int], strides: Sequence[int]) -> int | None:
    """The stride of ``shape``'s dims seen as one flat dim, as ``reshape`` would view them
    without a copy (1 where there are none): the dims of size 2 or more nest in order. None
    where they do not (a transposed or gapped view a plan reads contiguous instead)."""
    dims = [(n, st) for n, st in zip(shape, strides) if n != 1]
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1] if dims else 1


def _canonical(t: Tensor) -> bool:
    """Whether ``t`` has exactly the strides torch.empty gives its shape."""
    acc = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        if stride != acc:
            return False
        acc *= size
    return True


def bstrides(t: Any, shape: Sequence[int]) -> list[int]:
    """An operand's strides broadcast to ``shape`` (TensorIterator's compute_strides): 0 where
    it broadcasts; a scalar is all 0."""
    nd = len(shape)
    if not isinstance(t, Tensor):
        return [0] * nd
    off = nd - t.dim()
    st = [0] * nd
    for i in range(t.dim()):
        st[off + i] = 0 if t.shape[i] == 1 and shape[off + i] != 1 else t.stride(i)
    return st


def iter_strides(shape: Sequence[int], operands: Sequence[Any]) -> tuple[int, ...] | None:
    """Strides of the output aten allocates for a pointwise op of ``operands`` (tensors or
    scalars, in aten's operand order) broadcast to ``shape``; None where they are the
    contiguous ones."""
    shape = tuple(shape)
    nd = len(shape)
    if nd <= 1 or 0 in shape:
        return None
    ts = [t for t in operands if isinstance(t, Tensor)]
    if all(_canonical(t) for t in ts):
        # every tensor C-contiguous, size-1 dimensions included (most calls, scalars or
        # broadcasts beside them): strides that are equal across dimensions only span
        # size-1 dimensions of the result, so the sort below never swaps
        return None
    if len(ts) == len(operands) and all(tuple(t.shape) == shape for t in ts):  # all_ops_same_shape_: fast set-up
        if all(t.is_contiguous() for t in ts):
            return None
        if nd == 4 and all(t.is_contiguous(memory_format=torch.channels_last) for t in ts):
            return tuple(torch.empty(shape, device="meta", memory_format=torch.channels_last).stride())
        first = tuple(ts[0].stride())
        if all(dense(shape, t.stride()) and tuple(t.stride()) == first for t in ts):
            return first
    strides = [bstrides(t, shape) for t in operands]

    def should_swap(d0: int, d1: int) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue  # a broadcast dimension of this operand: the next one decides
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:  # equal strides: the larger dimension goes outside
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))  # perm[0]: the innermost dimension
    for i in range(1, nd):  # insertion sort with ambiguous comparisons, as aten's
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    if perm == list(range(nd - 1, -1, -1)):
        return None
    out = [0] * nd
    acc = 1
    for d in perm:
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


#: How aten lays out a pointwise op's new output (``aten_layout`` of the elementwise kernels'
#: run and plan): True, TensorIterator over the operands as given, a Python number among them
#: being a wrapped-number operand (``x * 1.5``, ``x == 0``, ``torch.where(m, x, 0.0)``: aten wraps
#: the Scalar of a ``.Tensor`` or ``.Scalar`` binary overload into a 0-dim tensor); "scalar_args",
#: TensorIterator over the tensors only, the numbers being Scalar arguments of the op
#: (``clamp(x, -1, 1)``, ``x.pow(2)``, ``lerp(x, y, 0.5)``: a unary or binary iterator, whose
#: fast set-up keeps a dense input's strides, size-1 dimensions' included); "like",
#: ``torch.empty_like(operands[0])`` (``hardtanh``, ``nan_to_num``: aten allocates their output
#: so, then iterates into it); "with_scalar", TensorIterator over the operands, then over that
#: result and a wrapped number (``isinf``, which aten computes as ``x.abs() == inf``).
Layout = Any  # bool | str


def out_strides(shape: Sequence[int], operands: Sequence[Any], layout: Layout = True) -> tuple[int, ...] | None:
    """The strides of the new output aten allocates for a pointwise op of ``operands`` laid out
    as ``layout`` says (see Layout); None where they are the contiguous ones."""
    if layout == "like":
        x = operands[0]
        if tuple(x.shape) != tuple(shape) or x.numel() == 0 or _canonical(x):
            return None
        st = tuple(x.stride()) if dense(x.shape, x.stride()) else tuple(torch.empty_like(x, device="meta").stride())
        return None if st == tuple(contiguous_strides(shape)) else st
    if layout == "scalar_args":
        operands = [t for t in operands if isinstance(t, Tensor)]
    elif layout == "with_scalar":  # the op's own layout, then a binary one with a wrapped number
        st = iter_strides(shape, operands) or tuple(contiguous_strides(shape))
        operands = [torch.empty_strided(tuple(shape), st, device="meta"), 0]
    return iter_strides(shape, operands)


def new_output(shape: Sequence[int], dtype: torch.dtype, device: Any, operands: Sequence[Any],
               layout: Layout = True) -> Tensor:
    """A new output of ``shape`` in aten's layout for a pointwise op of ``operands`` (``layout``:
    see Layout)."""
    strides = out_strides(shape, operands, layout)
    if strides is None:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    return torch.empty_strided(tuple(shape), strides, dtype=dtype, device=device)


def memory_order(strides: Sequence[int]) -> list[int]:
    """The dimensions of a dense layout from the outermost to the innermost (ties, which
    only size-1 dimensions have, in index order): a tensor of these strides permuted so
    is contiguous."""
    return sorted(range(len(strides)), key=lambda d: (-strides[d], d))


#: a view whose rows' elements lie a stride apart (TC > 1: a transposed matrix's rows) is read
#: in place up to this many elements: each element then loads a memory sector of its own,
#: which costs nothing next to the launch while the host is the cost; a larger one is copied
#: first (a copy reads and writes in wide transactions)
STRIDED_ROWS_MAX_NUMEL = 1 << 16


def contiguous_rows(n: int) -> tuple[int, int, int, int, int, int]:
    """The :func:`rows_layout` of a contiguous input of rows of ``n`` elements: (1, 1, n, 0, 0,
    1), which Triton's specialization of 1s folds back to ``row*n + j``."""
    return 1, 1, n, 0, 0, 1


@triton.jit
def row_offset(r, S1, S2, T0, T1, T2):
    """Where row ``r`` (an int64 scalar or block) of a :func:`rows_layout` starts:
    ``r = (r0*S1 + r1)*S2 + r2`` at ``r0*T0 + r1*T1 + r2*T2``; the kernels that read rows in
    place (rowwise's ``_row``, the reduction, norm and norm-backward kernels) share it. A
    contiguous layout's S1 = S2 = 1 folds it to ``r*T0``."""
    return (r // (S1 * S2)) * T0 + ((r // S2) % S1) * T1 + (r % S2) * T2


def rows_layout(x: Tensor, dims: Sequence[int]) -> tuple[int, int, int, int, int, int] | None:
    """(S1, S2, T0, T1, T2, TC): how a kernel reads x's rows along ``dims`` in place, row
    ``r = (r0*S1 + r1)*S2 + r2`` at ``r0*T0 + r1*T1 + r2*T2`` and its elements TC apart
    (rowwise's ``_row``, the reduction kernel's last-dim case, the norm kernel): the dims
    along must merge into one of stride TC, the others into at most three (outermost first: a
    [B, H, L, D] view of a [B, L, H, D] tensor is three), whose row-major order is the
    output's. None: x needs a contiguous copy first (also a large one whose rows are strided: STRIDED_ROWS_MAX_NUMEL).
    Size-1 dims are dropped; a stride-0 (expanded) dim is read as such.
    A contiguous (M, N) input gives :func:`contiguous_rows` (N), which a kernel's compiler folds."""
    nd = x.dim()
    shape, stride = x.shape, x.stride()
    tc = flat_stride([shape[d] for d in dims], [stride[d] for d in dims])
    if tc is None or (tc != 1 and x.numel() > STRIDED_ROWS_MAX_NUMEL):
        return None
    kept: list[tuple[int, int]] = []
    for d in range(nd):
        if d in dims or shape[d] == 1:
            continue
        if kept and kept[-1][1] == stride[d] * shape[d]:
            kept[-1] = (kept[-1][0] * shape[d], stride[d])
        else:
            kept.append((shape[d], stride[d]))
    if len(kept) > 3:
        return None
    kept += [(1, 0)] * (3 - len(kept))
    (_, t0), (s1, t1), (s2, t2) = kept
    return s1, s2, t0, t1, t2, tc
