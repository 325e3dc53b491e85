"""aten::_grouped_mm: one matrix product per group (a mixture-of-experts layer's experts in
transformers 5.x), in one launch and without a host sync.

aten's four forms, by the operands' ranks (``offs``: int32 cumulative ends, one per group):

| self | mat2 | offs split | out |
| --- | --- | --- | --- |
| 2D (M, K) | 3D (G, K, N) | rows of self and out | (M, N) |
| 3D (G, M, K) | 2D (K, N) | columns of mat2 and out | (M, N) |
| 2D (M, K) | 2D (K, N) | K (the weight gradient's form) | (G, M, N) |
| 3D (G, M, K) | 3D (G, K, N) | - (a batched product) | (G, M, N) |

The group boundaries stay on the device: where groups split rows (or columns), each tile
walks the groups and computes the product of every group that overlaps it, masked to that
group's rows. A tile that straddles a boundary computes one product per group it touches;
there are at most G such tiles. Rows (or columns) past the last offset are not written, as
in aten. A bias, another output dtype and float64 go to aten's kernel.
"""
from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ._common import cdiv, jit
from .matmul import _precision

Tensor = torch.Tensor

#: the forms, by (self rank, mat2 rank)
_ROWS, _COLS, _KSPLIT, _BATCHED = 0, 1, 2, 3
_MODES = {(2, 3): _ROWS, (3, 2): _COLS, (2, 2): _KSPLIT, (3, 3): _BATCHED}
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _group_tile(a, b, out, rm, rn, row_lo, row_hi, col_lo, col_hi, k_lo, k_hi, s_am, s_ak, s_bk, s_bn, s_om, s_on,
                PRECISION: tl.constexpr, DOT_F32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """out[rm, rn] = a[rm, k_lo:k_hi] @ b[k_lo:k_hi, rn] for the rows in [row_lo, row_hi) and
    the columns in [col_lo, col_hi); the others are neither read nor written."""
    rows = (rm >= row_lo) & (rm < row_hi)
    cols = (rn >= col_lo) & (rn < col_hi)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        ks = rk < k_hi
        xa = tl.load(a + rm[:, None] * s_am + rk[None, :] * s_ak, mask=rows[:, None] & ks[None, :], other=0.0)
        xb = tl.load(b + rk[:, None] * s_bk + rn[None, :] * s_bn, mask=ks[:, None] & cols[None, :], other=0.0)
        if DOT_F32:  # Triton's interpreter multiplies bf16 tiles wrongly; fp32 is exact for them
            xa = xa.to(tl.float32)
            xb = xb.to(tl.float32)
        acc = tl.dot(xa, xb, acc, input_precision=PRECISION)
    tl.store(out + rm[:, None] * s_om + rn[None, :] * s_on, acc.to(out.dtype.element_ty),
             mask=rows[:, None] & cols[None, :])


@triton.jit
def _grouped_mm_kernel(a, b, out, offs, G, M, N, K, s_ag, s_am, s_ak, s_bg, s_bk, s_bn, s_og, s_om, s_on,
                       MODE: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    if MODE == 0 or MODE == 1:  # groups split the rows (or the columns): walk those that overlap
        if MODE == 0:
            lo = pid_m * BLOCK_M
            hi = lo + BLOCK_M
        else:
            lo = pid_n * BLOCK_N
            hi = lo + BLOCK_N
        for g in range(0, G):
            start = tl.load(offs + g - 1, mask=g > 0, other=0)
            end = tl.load(offs + g)
            if (start < hi) & (end > lo) & (start < end):
                if MODE == 0:
                    _group_tile(a, b + tl.cast(g, tl.int64) * s_bg, out, rm, rn, start, tl.minimum(end, M), 0, N, 0, K,
                                s_am, s_ak, s_bk, s_bn, s_om, s_on, PRECISION, DOT_F32, BLOCK_M, BLOCK_N, BLOCK_K)
                else:
                    _group_tile(a + tl.cast(g, tl.int64) * s_ag, b, out, rm, rn, 0, M, start, tl.minimum(end, N), 0, K,
                                s_am, s_ak, s_bk, s_bn, s_om, s_on, PRECISION, DOT_F32, BLOCK_M, BLOCK_N, BLOCK_K)
    else:  # one group a program: its slice of K (MODE 2), or its own matrices (MODE 3)
        g = tl.program_id(2)
        k_lo = 0
        k_hi = K
        if MODE == 2:
            k_lo = tl.load(offs + g - 1, mask=g > 0, other=0)
            k_hi = tl.minimum(tl.load(offs + g), K)
            ga = a
            gb = b
        else:
            ga = a + tl.cast(g, tl.int64) * s_ag
            gb = b + tl.cast(g, tl.int64) * s_bg
        _group_tile(ga, gb, out + tl.cast(g, tl.int64) * s_og, rm, rn, 0, M, 0, N, k_lo, k_hi,
                    s_am, s_ak, s_bk, s_bn, s_om, s_on, PRECISION, DOT_F32, BLOCK_M, BLOCK_N, BLOCK_K)


_grouped_mm = jit(_grouped_mm_kernel)


def _refuse(why: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops._grouped_mm: {why}; aten's kernel serves this call")


def _check(a: Any, b: Any, offs: Any, bias: Any, out_dtype: Any) -> int:
    """The form of a call (see the module's table), or NotImplementedError for aten's kernel;
    RuntimeError with aten's words where aten raises too."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise _refuse("non-tensor operands")
    mode = _MODES.get((a.dim(), b.dim()))
    if mode is None:
        raise RuntimeError(f"_grouped_mm: self must be 2D or 3D and mat2 2D or 3D, got {a.dim()}D and {b.dim()}D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"_grouped_mm: expected self and mat2 of one dtype, got {a.dtype} and {b.dtype}")
    if a.dtype not in _DTYPES:
        raise _refuse(f"dtype {a.dtype}")
    if bias is not None:
        raise _refuse("a bias")
    if out_dtype is not None and out_dtype != a.dtype:
        raise _refuse(f"out_dtype {out_dtype}")
    if a.device != b.device:
        raise _refuse("operands on different devices")
    if a.device.type == "meta":
        raise _refuse("meta tensors")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"_grouped_mm: contraction dims differ: self {tuple(a.shape)}, mat2 {tuple(b.shape)}")
    if mode == _BATCHED:
        if offs is not None:
            raise _refuse("offs with two 3D operands")
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"_grouped_mm: batch sizes differ: self {tuple(a.shape)}, mat2 {tuple(b.shape)}")
    else:
        if not isinstance(offs, Tensor) or offs.dim() != 1 or offs.device != a.device:
            raise _refuse("offs is not a 1D tensor on the operands' device")
        if offs.dtype != torch.int32:
            raise RuntimeError(f"_grouped_mm: offs must be int32, got {offs.dtype}")
        groups = {_ROWS: b.shape[0], _COLS: a.shape[0]}.get(mode)
        if groups is not None and offs.shape[0] != groups:
            raise RuntimeError(f"_grouped_mm: offs has {offs.shape[0]} groups, the 3D operand {groups}")
    return mode


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor | None = None, bias: Tensor | None = None,
               out_dtype: torch.dtype | None = None) -> Tensor:
    """aten::_grouped_mm (see the module's table of forms)."""
    mode = _check(a, b, offs, bias, out_dtype)
    on_gpu = a.device.type != "cpu"
    if mode == _ROWS:
        groups, m, n = b.shape[0], a.shape[0], b.shape[2]
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    elif mode == _COLS:
        groups, m, n = a.shape[0], a.shape[1], b.shape[1]
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    else:
        groups = offs.shape[0] if mode == _KSPLIT and offs is not None else a.shape[0]
        m, n = a.shape[-2], b.shape[-1]
        out = torch.empty((groups, m, n), dtype=a.dtype, device=a.device)
    k = a.shape[-1]
    if out.numel() == 0:
        return out
    if mode == _KSPLIT and k == 0:
        return out.zero_()
    sa = (a.stride(0) if a.dim() == 3 else 0, a.stride(-2), a.stride(-1))
    sb = (b.stride(0) if b.dim() == 3 else 0, b.stride(-2), b.stride(-1))
    so = (out.stride(0) if out.dim() == 3 else 0, out.stride(-2), out.stride(-1))
    bm, bn, bk = (128, 128, 32) if on_gpu else (32, 32, 16)
    bm = min(bm, max(16, triton.next_power_of_2(m)))
    bn = min(bn, max(16, triton.next_power_of_2(n)))
    grid = (cdiv(m, bm), cdiv(n, bn), groups if mode in (_KSPLIT, _BATCHED) else 1)
    _grouped_mm[grid](a, b, out, offs if offs is not None else a, groups, m, n, k, *sa, *sb, *so, MODE=mode,
                      PRECISION=_precision(a.dtype), DOT_F32=not on_gpu and a.dtype == torch.bfloat16,
                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8 if on_gpu and bm * bn >= 128 * 128 else 4,
                      num_stages=3 if on_gpu else 1)
    return out


ATEN: dict[str, Any] = {"_grouped_mm": grouped_mm}
