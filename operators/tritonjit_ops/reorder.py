"""Copies that reorder elements along dims: aten's ``flip(self, dims)`` and ``roll(self, shifts,
dims)``.

Both read a contiguous input at an index remapped per dim: ``d - 1 - i`` where flipped,
``(i - shift) mod d`` where rolled (Swin's shifted windows and their gradient, the gradient
of ``cumsum``, which aten writes as flip, cumsum, flip). Neighbouring dims that are remapped
alike merge (reversing two dims is reversing their flat index; so is rolling a dim with the
unshifted dims inside it, by the shift times their size), size-1 dims drop, and what is left
is at most four dims: one launch writes the contiguous output, as aten's kernels give for a
contiguous input. flip reads any dense layout (a permuted view, channels-last) in its memory
order into an output of the same strides, as aten allocates flip's; roll, whose output aten
allocates contiguous on a device, takes contiguous inputs. Others (gaps, overlaps), more than
four dims after merging, and complex dtypes go to aten.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from ._common import cdiv, jit, unravel4
from ._plan import Buffer, In, Out, Plan, launch, run
from .copy import _idx64

Tensor = torch.Tensor

_BLOCK = 1024


@triton.jit
def _remap_kernel(x, out, n, d1, d2, d3, r0, r1, r2, r3, c0, c1, c2, c3, BLOCK: tl.constexpr,
                  IDX64: tl.constexpr = False):
    """out[i0, i1, i2, i3] = x[j0, j1, j2, j3] with j = (c - i) mod d where the dim is flipped
    (r = -1, c = d - 1) and (i - s) mod d where rolled by s (r = 1, c = -s): j = c + r * i,
    brought into [0, d). d0 is implied by n."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if IDX64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i0, i1, i2, i3 = unravel4(offs, d1, d2, d3)
    d0 = n // (d1 * d2 * d3)
    j0 = c0 + r0 * i0
    j1 = c1 + r1 * i1
    j2 = c2 + r2 * i2
    j3 = c3 + r3 * i3
    j0 = tl.where(j0 < 0, j0 + d0, j0)
    j1 = tl.where(j1 < 0, j1 + d1, j1)
    j2 = tl.where(j2 < 0, j2 + d2, j2)
    j3 = tl.where(j3 < 0, j3 + d3, j3)
    src = ((j0 * d1 + j1) * d2 + j2) * d3 + j3
    tl.store(out + offs, tl.load(x + src, mask=m), mask=m)


_remap = jit(_remap_kernel)

#: one dim of a remap: (size, step r, constant c): j = c + r * i, brought into [0, size)
_Dim = tuple[int, int, int]


def _dims(x: Any, dims: Any) -> list[int] | None:
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return None
    nd = max(x.dim(), 1)
    if not all(-nd <= d < nd for d in dims):
        return None  # aten's error
    out = [d % nd for d in dims]
    return out if len(set(out)) == len(out) else None  # aten's "dim appears multiple times"


def _merged(shape: Sequence[int], kinds: list[tuple[int, int]]) -> list[_Dim] | None:
    """The remap's dims after merging: ``kinds[d]`` = (0, 0) kept, (1, 0) flipped, (2, s)
    rolled by s (0 < s < size). None beyond four dims."""
    groups: list[list[int]] = []  # [size, kind, shift]
    for size, (kind, shift) in zip(shape, kinds):
        if size == 1:
            continue
        if groups:
            last = groups[-1]
            if kind == last[1] == 0 or kind == last[1] == 1:
                last[0] *= size
                continue
            if kind == 0 and last[1] == 2:  # rolling a dim with the unshifted dims inside it
                last[0] *= size
                last[2] *= size
                continue
        groups.append([size, kind, shift])
    if len(groups) > 4:
        return None
    dims = [(size, -1, size - 1) if kind == 1 else (size, 1, -shift) if kind == 2 else (size, 1, 0)
            for size, kind, shift in groups]
    return [(1, 1, 0)] * (4 - len(dims)) + dims


def _memory_order(x: Tensor) -> list[int] | None:
    """The dims of a dense ``x`` from its outermost in memory to its innermost (the permutation
    that makes it contiguous); None where it is not dense (gaps or overlaps)."""
    buf = Buffer.like(x)
    if buf is None:
        return None
    strides, shape = x.stride(), x.shape
    order = sorted(range(x.dim()), key=lambda d: (-strides[d], -shape[d]))
    return order if x.permute(order).is_contiguous() else None


def _plan(x: Tensor, kinds: list[tuple[int, int]], preserve: bool = False) -> Plan | None:
    """The remap of ``x`` (contiguous; with ``preserve`` any dense layout, read and written in its
    memory order, the output taking its strides: aten's flip allocates it so)."""
    if x.is_complex():
        return None
    if x.is_contiguous():
        # flip's output is torch.empty_like(x): a size-1 dim keeps its stride, whatever it is
        like = Buffer.like(x) if preserve else None
        out = (like or Buffer(tuple(x.shape), x.dtype),)
        shape = tuple(x.shape)
    else:
        order = _memory_order(x) if preserve else None
        if order is None:
            return None
        out = (Buffer(tuple(x.shape), x.dtype, tuple(x.stride())),)
        shape, kinds = tuple(x.shape[d] for d in order), [kinds[d] for d in order]
    n = x.numel()
    if n == 0:
        return Plan(out, ())
    g = _merged(shape, kinds)
    if g is None:
        return None
    (_, r0, c0), (d1, r1, c1), (d2, r2, c2), (d3, r3, c3) = g
    L = launch(_remap, (cdiv(n, _BLOCK),), In(0), Out(0), n, d1, d2, d3, r0, r1, r2, r3, c0, c1, c2, c3,
               BLOCK=_BLOCK, **_idx64(n))
    return Plan(out, (L,))


def plan_flip(x: Any, dims: Any) -> Plan | None:
    if not isinstance(x, Tensor):
        return None
    ds = _dims(x, dims)
    if ds is None:
        return None
    return _plan(x, [(1, 0) if d in ds else (0, 0) for d in range(x.dim())], preserve=True)


def plan_roll(x: Any, shifts: Any, dims: Any = ()) -> Plan | None:
    if not isinstance(x, Tensor) or x.dim() == 0:
        return None
    shifts = [shifts] if isinstance(shifts, int) else shifts
    dims = [dims] if isinstance(dims, int) else dims
    if not isinstance(shifts, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool)
                                                         for s in shifts):
        return None
    if not dims:  # roll of the flattened tensor, then restored to its shape
        return _flat_roll(x, shifts[0]) if len(shifts) == 1 else None
    ds = _dims(x, dims)
    if ds is None or len(ds) != len(shifts):
        return None
    kinds = [(0, 0)] * x.dim()
    for d, s in zip(ds, shifts):
        size = x.shape[d]
        s = s % size if size else 0
        kinds[d] = (2, s) if s else (0, 0)
    return _plan(x, kinds)


def _flat_roll(x: Tensor, shift: int) -> Plan | None:
    """A roll without dims: the flat index rolled (the launch reads the contiguous input flat)."""
    if not x.is_contiguous():
        return None
    n = x.numel()
    s = shift % n if n else 0
    p = _plan(x.reshape(-1), [(2, s) if s else (0, 0)])
    return None if p is None else p._replace(outputs=(Buffer(tuple(x.shape), x.dtype),))


def _refuse(op: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops.{op}: a dense (roll: contiguous), non-complex tensor and dims that "
                               "merge into at most four expected; aten's kernel serves this call")


def flip(x: Tensor, dims: list[int]) -> Tensor:
    """``x`` reversed along ``dims``."""
    p = plan_flip(x, dims)
    if p is None:
        raise _refuse("flip")
    return run(p, (x, dims))


def roll(x: Tensor, shifts: list[int], dims: list[int] = ()) -> Tensor:  # type: ignore[assignment]
    """``x`` rolled by ``shifts`` along ``dims`` (the flattened tensor where dims is empty)."""
    p = plan_roll(x, shifts, dims)
    if p is None:
        raise _refuse("roll")
    return run(p, (x, shifts, dims))


#: aten overload -> Python implementation (enable()'s table)
ATEN: dict[str, Any] = {"flip": flip, "roll": roll}
#: aten overload -> planner of the C++ operator path
PLANNERS: dict[str, Any] = {"flip": plan_flip, "roll": plan_roll}
