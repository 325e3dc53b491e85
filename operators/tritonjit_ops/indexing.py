"""index_select, gather and embedding.

An out-of-range index fails loudly, never reads out of bounds, and is never checked
by synchronizing with the device (see ``_common.host_check_allowed``): CPU tensors
(the interpreter backend) are checked on the host with a clear IndexError; on an
accelerator the kernel asserts ``0 <= index < size`` itself (``CHECK`` on, launched
with ``DEVICE_ASSERT``), as aten's CUDA kernels do.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import (
    DEVICE_ASSERT,
    FLOAT_DTYPES,
    INT_DTYPES,
    assert_options,
    cdiv,
    check_same_device,
    host_check_allowed,
    jit,
    row_tile,
    unravel4,
)
from ._plan import Buffer, In, Out, Plan, launch

Tensor = torch.Tensor
_DATA = FLOAT_DTYPES + INT_DTYPES + (torch.bool,)


@triton.jit
def _select_rows_kernel(x, idx, out, L, D, K, N, ROWS: tl.constexpr, BLOCK: tl.constexpr, CHECK: tl.constexpr):
    """out[o, j, :] = x[o, idx[j], :] for contiguous x (O, D, K) and out (O, L, K), N = O * L rows;
    a program copies BLOCK columns of ROWS rows (several at once where rows are narrow).

    CHECK: assert 0 <= idx[j] < D on the device (compiled in by DEVICE_ASSERT)."""
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rm = row < N
    o = row // L
    j = row % L
    src = tl.load(idx + j, mask=rm, other=0).to(tl.int64)
    if CHECK:
        tl.device_assert((src.to(tl.uint64, bitcast=True) < D) | ~rm,
                         "tritonjit index_select/embedding: index out of range")
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = rm[:, None] & (cols < K)[None, :]
    v = tl.load(x + ((o * D + src) * K)[:, None] + cols[None, :], mask=m)
    tl.store(out + (row * K)[:, None] + cols[None, :], v, mask=m)


@triton.jit
def _gather_kernel(x, idx, out, n, d1, d2, d3, xs0, xs1, xs2, xs3, is0, is1, is2, is3, size,
                   DIM: tl.constexpr, BLOCK: tl.constexpr, CHECK: tl.constexpr):
    """out[i] = x[i with i[DIM] := idx[i]] over a rank-4 (padded) index shape.

    CHECK: assert 0 <= idx[i] < size (x's extent along DIM) on the device."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    j = tl.load(idx + i0 * is0 + i1 * is1 + i2 * is2 + i3 * is3, mask=m, other=0).to(tl.int64)
    if CHECK:
        tl.device_assert(j.to(tl.uint64, bitcast=True) < size, "tritonjit gather: index out of range", mask=m)
    if DIM == 0:
        i0 = j
    elif DIM == 1:
        i1 = j
    elif DIM == 2:
        i2 = j
    else:
        i3 = j
    v = tl.load(x + i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3, mask=m)
    tl.store(out + offs, v, mask=m)


_select_rows = jit(_select_rows_kernel)
_gather = jit(_gather_kernel)


def _check_index(name: str, index: Tensor, size: int, dim: int | None = None) -> bool:
    """Check the index's dtype, and its values where that needs no device sync.

    Returns the kernel's CHECK flag: False when the values were checked here (CPU
    tensors), True when the kernel must assert ``0 <= index < size`` on the device.
    ``dim`` is the indexed dimension (None: the rows of an embedding table).
    """
    if not isinstance(index, Tensor) or index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"tritonjit.{name}: Expected dtype int32/int64 for index")
    if not host_check_allowed(index):
        return True
    if index.numel():
        lo, hi = (int(v) for v in torch.aminmax(index))
        if lo < 0 or hi >= size:
            what = f"a table of {size} rows" if dim is None else f"dimension {dim} of size {size}"
            raise IndexError(f"tritonjit.{name}: index {lo if lo < 0 else hi} is out of range for {what}")
    return False


def _rows(x: Tensor, o: int, d: int, k: int, index: Tensor, out_shape, check: bool) -> Tensor:
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    L = index.numel()
    if out.numel() == 0:
        return out
    block, rows = row_tile(k, o * L)
    _select_rows[(cdiv(o * L, rows), cdiv(k, block))](x, index, out, L, d, k, o * L, ROWS=rows, BLOCK=block,
                                                      CHECK=check, num_warps=4 if block * rows >= 512 else 1,
                                                      **assert_options(check))
    return out


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Rows of x along ``dim`` picked by a 1-D index."""
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.index_select: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in _DATA:
        raise TypeError(f"tritonjit.index_select: unsupported dtype {x.dtype}")
    check_same_device("index_select", x, index)
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dim %= nd
    xs = x.reshape(1) if x.dim() == 0 else x
    check = _check_index("index_select", index, xs.shape[dim], dim)
    xs = xs.contiguous()
    index = index.reshape(-1).contiguous()
    o = 1
    for s in xs.shape[:dim]:
        o *= s
    k = 1
    for s in xs.shape[dim + 1:]:
        k *= s
    shape = list(xs.shape)
    shape[dim] = index.numel()
    out = _rows(xs, o, xs.shape[dim], k, index, shape, check)
    return out.reshape(()) if x.dim() == 0 else out


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1) -> Tensor:
    """weight[indices] for a 2-D weight; padding_idx only matters for the backward."""
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if weight.dtype not in _DATA:
        raise TypeError(f"tritonjit.embedding: unsupported dtype {weight.dtype}")
    check_same_device("embedding", weight, indices)
    check = _check_index("embedding", indices, weight.shape[0])
    w = weight.contiguous()
    flat = indices.reshape(-1).contiguous()
    out = _rows(w, 1, w.shape[0], w.shape[1], flat, (flat.numel(), w.shape[1]), check)
    return out.reshape(*indices.shape, w.shape[1])


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` (for dim 0), index no larger than x off ``dim``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.gather: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in _DATA:
        raise TypeError(f"tritonjit.gather: unsupported dtype {x.dtype}")
    check_same_device("gather", x, index)
    if not isinstance(index, Tensor) or index.dtype != torch.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dim %= nd
    if max(index.dim(), 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    xs = x.reshape(1) if x.dim() == 0 else x
    ix = index.reshape(1) if index.dim() == 0 else index
    for d in range(nd):
        if d != dim and ix.shape[d] > xs.shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index.shape)} to be "
                               f"smaller than self {list(x.shape)} apart from dimension {dim}")
    check = _check_index("gather", ix, xs.shape[dim], dim)
    out = torch.empty(index.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    if n == 0:
        return out
    if nd > 4:
        raise NotImplementedError("tritonjit.gather supports up to 4 dimensions")
    pad = 4 - nd
    dims = [1] * pad + list(ix.shape)
    xst = [0] * pad + list(xs.stride())
    ist = [0] * pad + list(ix.stride())
    block = 1024
    _gather[(cdiv(n, block),)](xs, ix, out, n, dims[1], dims[2], dims[3], *xst, *ist, xs.shape[dim],
                               DIM=dim + pad, BLOCK=block, CHECK=check, **assert_options(check))
    return out


# ----------------------------------------------------------------- plans
# Planners of the aten overloads for the C++ operator path (see _plan.py). Index
# values are checked by the kernel on an accelerator; on CPU tensors the Python
# implementation checks them on the host, so CPU calls get no plan.
def _rows_plan(x: Tensor, o: int, d: int, k: int, L: int, out_shape: list[int], refs: tuple, contiguous: tuple
               ) -> Plan:
    out = (Buffer(tuple(out_shape), x.dtype),)
    if L * o * k == 0:
        return Plan(out, (), contiguous=contiguous)
    block, rows = row_tile(k, o * L)
    Lc = launch(_select_rows, (cdiv(o * L, rows), cdiv(k, block)), refs[0], refs[1], Out(0), L, d, k, o * L,
                ROWS=rows, BLOCK=block, CHECK=True, num_warps=4 if block * rows >= 512 else 1, **DEVICE_ASSERT)
    return Plan(out, (Lc,), contiguous=contiguous)


def _index_ok(x: Any, index: Any) -> bool:
    return (isinstance(x, Tensor) and isinstance(index, Tensor) and x.dtype in _DATA and x.device == index.device
            and index.dtype in (torch.int32, torch.int64) and not host_check_allowed(index))


def plan_embedding(weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
                   sparse: bool = False) -> Plan | None:
    if not _index_ok(weight, indices) or weight.dim() != 2:
        return None
    contiguous = tuple(i for i, t in ((0, weight), (1, indices)) if not t.is_contiguous())
    n, d = weight.shape
    return _rows_plan(weight, 1, n, d, indices.numel(), [*indices.shape, d], (In(0), In(1)), contiguous)


def plan_index_select(x: Any, dim: int, index: Any) -> Plan | None:
    if not _index_ok(x, index) or x.dim() == 0 or index.dim() > 1 or not -x.dim() <= dim < x.dim():
        return None
    dim %= x.dim()
    contiguous = tuple(i for i, t in ((0, x), (2, index)) if not t.is_contiguous())
    o = 1
    for s in x.shape[:dim]:
        o *= s
    k = 1
    for s in x.shape[dim + 1:]:
        k *= s
    shape = list(x.shape)
    shape[dim] = index.numel()
    return _rows_plan(x, o, x.shape[dim], k, index.numel(), shape, (In(0), In(2)), contiguous)


def plan_gather(x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Plan | None:
    if (not _index_ok(x, index) or index.dtype != torch.int64 or x.dim() == 0 or x.dim() > 4
            or index.dim() != x.dim() or not -x.dim() <= dim < x.dim()):
        return None
    nd = x.dim()
    dim %= nd
    if any(d != dim and index.shape[d] > x.shape[d] for d in range(nd)):
        return None
    out = (Buffer(tuple(index.shape), x.dtype),)
    n = index.numel()
    if n == 0:
        return Plan(out, ())
    pad = 4 - nd
    dims = [1] * pad + list(index.shape)
    xst = [0] * pad + list(x.stride())
    ist = [0] * pad + list(index.stride())
    L = launch(_gather, (cdiv(n, 1024),), In(0), In(2), Out(0), n, dims[1], dims[2], dims[3], *xst, *ist,
               x.shape[dim], DIM=dim + pad, BLOCK=1024, CHECK=True, **DEVICE_ASSERT)
    return Plan(out, (L,))


PLANNERS: dict[str, Any] = {"embedding": plan_embedding, "index_select": plan_index_select, "gather": plan_gather}
