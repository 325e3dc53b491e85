"""Normalization backward: layer_norm, rms_norm and the fused residual-add rms_norm.

One row kernel gives the input gradient of a row in one read of ``grad`` and ``x``
(plus the residual branch's gradient, for fused_add_rms_norm), and per-program partial
sums of the weight and bias gradients over its rows; a column kernel adds those
partials up. A call of up to SMALL_ROWS rows with the forward's statistics is one launch
instead: dx programs and column programs side by side (_norm_bwd_small_kernel).
Statistics come from the forward (aten's mean/rstd) or are recomputed in the kernel (the
tritonjit ops and direct entries, whose forward does not return them).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit, next_pow2, opmath
from ._layout import contiguous_rows, row_offset, rows_layout
from ._plan import Buffer, In, Launch, Out, Plan, Tmp, launch, run

#: a row's layout for the kernels: (S1, S2, T0, T1, T2, TC) of _layout.rows_layout
Rows = tuple[int, int, int, int, int, int]

Tensor = torch.Tensor


@triton.jit
def _xhat_of_stats(xv, m, rows, rm, mean_in, rstd_in, ACC: tl.constexpr, RMS: tl.constexpr):
    """A row block's xhat from the forward's statistics (``m`` its mask, ``rm`` its rows'),
    and the rows' rstd."""
    rstd = tl.load(rstd_in + rows, mask=rm, other=0.0).to(ACC)
    if RMS:
        xhat = tl.where(m, xv * rstd[:, None], 0.0)
    else:
        mu = tl.load(mean_in + rows, mask=rm, other=0.0).to(ACC)
        xhat = tl.where(m, (xv - mu[:, None]) * rstd[:, None], 0.0)
    return xhat, rstd


@triton.jit
def _row_offsets(rows, cols, S1, S2, T0, T1, T2, TC):
    """[rows, cols] element offsets of a strided view's rows read in place (the layout of
    _layout.rows_layout, as the forward's norm kernel reads x); a contiguous input's (1, 1, N,
    0, 0, 1) folds to ``rows * N + cols``."""
    return row_offset(rows.to(tl.int64), S1, S2, T0, T1, T2)[:, None] + cols[None, :] * TC


@triton.jit
def _norm_bwd_rows_kernel(
    dy, x, w, mean_in, rstd_in, dres, dx, part, M, N, eps: tl.float64, G,
    XS1, XS2, XT0, XT1, XT2, XTC, GS1, GS2, GT0, GT1, GT2, GTC,
    RMS: tl.constexpr, HAS_W: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
    HAS_STATS: tl.constexpr, HAS_DRES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Rows that fit in registers, BLOCK_M of them per step (their reductions run side by
    side, not one after another): dx of row blocks pid, pid + G, ...; part[0, pid] and
    part[1, pid] (part[0, pid] without a weight) = their sums of dy * xhat and of dy. x's
    and dy's rows are read in their layouts (X*, G*: _layout.rows_layout); dx is contiguous."""
    _rows_body(dy, x, w, mean_in, rstd_in, dres, dx, part, M, N, eps, G, tl.program_id(0),
               XS1, XS2, XT0, XT1, XT2, XTC, GS1, GS2, GT0, GT1, GT2, GTC, RMS, HAS_W, NEED_W, NEED_B,
               HAS_STATS, HAS_DRES, BLOCK_M, BLOCK_N)


@triton.jit
def _rows_body(dy, x, w, mean_in, rstd_in, dres, dx, part, M, N, eps, G, pid,
               XS1, XS2, XT0, XT1, XT2, XTC, GS1, GS2, GT0, GT1, GT2, GTC, RMS: tl.constexpr,
               HAS_W: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr, HAS_STATS: tl.constexpr,
               HAS_DRES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """_norm_bwd_rows_kernel's work as program ``pid`` of ``G``; also the dx programs of
    _norm_bwd_small_kernel (statistics given, no partial sums)."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    cols = tl.arange(0, BLOCK_N)
    cm = cols < N
    if HAS_W:
        wv = tl.load(w + cols, mask=cm, other=0.0).to(ACC)
    # per-row accumulators, summed over the rows once after the loop: a sum across the block's
    # rows on every step (shuffles and shared memory between warps) made the loop latency-bound
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    for blk in range(pid, tl.cdiv(M, BLOCK_M), G):
        rows = blk * BLOCK_M + tl.arange(0, BLOCK_M)
        rm = rows < M
        m = rm[:, None] & cm[None, :]
        offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
        xv = tl.load(x + _row_offsets(rows, cols, XS1, XS2, XT0, XT1, XT2, XTC), mask=m, other=0.0).to(ACC)
        g = tl.load(dy + _row_offsets(rows, cols, GS1, GS2, GT0, GT1, GT2, GTC), mask=m, other=0.0).to(ACC)
        if HAS_STATS:
            xhat, rstd = _xhat_of_stats(xv, m, rows, rm, mean_in, rstd_in, ACC, RMS)
        else:
            if RMS:
                rstd = 1.0 / tl.sqrt(tl.sum(xv * xv, 1) / N + tl.full([], eps, ACC))
                xhat = tl.where(m, xv * rstd[:, None], 0.0)
            else:
                mu = tl.sum(xv, 1) / N
                d = tl.where(m, xv - mu[:, None], 0.0)
                rstd = 1.0 / tl.sqrt(tl.sum(d * d, 1) / N + tl.full([], eps, ACC))
                xhat = d * rstd[:, None]
        if HAS_W:
            wg = g * wv[None, :]
        else:
            wg = g
        c1 = tl.sum(xhat * wg, 1) / N
        if RMS:
            dxv = (wg - xhat * c1[:, None]) * rstd[:, None]
        else:
            c2 = tl.sum(wg, 1) / N
            dxv = (wg - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]
        if HAS_DRES:
            dxv += tl.load(dres + offs, mask=m, other=0.0).to(ACC)
        tl.store(dx + offs, dxv.to(dx.dtype.element_ty), mask=m)
        if NEED_W:
            dw_acc += g * xhat
        if NEED_B:
            db_acc += g
    if NEED_W:
        tl.store(part + pid * N + cols, tl.sum(dw_acc, 0), mask=cm)
    if NEED_B:
        tl.store(part + (G * N if NEED_W else 0) + pid * N + cols, tl.sum(db_acc, 0), mask=cm)


@triton.jit
def _norm_bwd_wide_kernel(
    dy, x, w, mean_in, rstd_in, dres, dx, part, M, N, eps: tl.float64, ROWS, G,
    RMS: tl.constexpr, HAS_W: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
    HAS_STATS: tl.constexpr, HAS_DRES: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Rows too long for registers, in column chunks: dx of rows [pid * ROWS, (pid + 1) *
    ROWS); the partial sums as in _norm_bwd_rows_kernel."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    pid = tl.program_id(0)
    dw_part = part + pid * N
    db_part = part + (G * N if NEED_W else 0) + pid * N
    for i in range(0, ROWS):
        row = pid * ROWS + i
        ok = row < M
        base = row.to(tl.int64) * N
        if HAS_STATS:
            rstd = tl.load(rstd_in + row, mask=ok, other=0.0).to(ACC)
            if RMS:
                mu = 0.0
            else:
                mu = tl.load(mean_in + row, mask=ok, other=0.0).to(ACC)
        else:
            acc = tl.zeros([BLOCK_N], ACC)
            for c0 in range(0, N, BLOCK_N):
                cols = c0 + tl.arange(0, BLOCK_N)
                m = (cols < N) & ok
                xv = tl.load(x + base + cols, mask=m, other=0.0).to(ACC)
                if RMS:
                    acc += xv * xv
                else:
                    acc += xv
            if RMS:
                mu = 0.0
                var = tl.sum(acc, 0) / N
            else:
                mu = tl.sum(acc, 0) / N
                acc = tl.zeros([BLOCK_N], ACC)
                for c0 in range(0, N, BLOCK_N):
                    cols = c0 + tl.arange(0, BLOCK_N)
                    m = (cols < N) & ok
                    xv = tl.load(x + base + cols, mask=m, other=0.0).to(ACC)
                    d = tl.where(m, xv - mu, 0.0)
                    acc += d * d
                var = tl.sum(acc, 0) / N
            rstd = 1.0 / tl.sqrt(var + tl.full([], eps, ACC))
        a1 = tl.zeros([BLOCK_N], ACC)
        a2 = tl.zeros([BLOCK_N], ACC)
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = (cols < N) & ok
            xv = tl.load(x + base + cols, mask=m, other=0.0).to(ACC)
            g = tl.load(dy + base + cols, mask=m, other=0.0).to(ACC)
            if HAS_W:
                g = g * tl.load(w + cols, mask=cols < N, other=0.0).to(ACC)
            a1 += tl.where(m, (xv - mu) * rstd, 0.0) * g
            a2 += g
        c1 = tl.sum(a1, 0) / N
        c2 = tl.sum(a2, 0) / N
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            cm = cols < N
            m = cm & ok
            xv = tl.load(x + base + cols, mask=m, other=0.0).to(ACC)
            g = tl.load(dy + base + cols, mask=m, other=0.0).to(ACC)
            xhat = tl.where(m, (xv - mu) * rstd, 0.0)
            if HAS_W:
                wg = g * tl.load(w + cols, mask=cm, other=0.0).to(ACC)
            else:
                wg = g
            if RMS:
                dxv = (wg - xhat * c1) * rstd
            else:
                dxv = (wg - xhat * c1 - c2) * rstd
            if HAS_DRES:
                dxv += tl.load(dres + base + cols, mask=m, other=0.0).to(ACC)
            tl.store(dx + base + cols, dxv.to(dx.dtype.element_ty), mask=m)
            first = i > 0  # the partial row of this program starts at zero
            if NEED_W:
                prev = tl.load(dw_part + cols, mask=cm & first, other=0.0)
                tl.store(dw_part + cols, prev + g * xhat, mask=cm)
            if NEED_B:
                prev = tl.load(db_part + cols, mask=cm & first, other=0.0)
                tl.store(db_part + cols, prev + g, mask=cm)


@triton.jit
def _col_sum_kernel(part, dw, db, G, N, NEED_W: tl.constexpr, NEED_B: tl.constexpr, BLOCK_G: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    """dw[n] / db[n] = sum over g of part[k, g, n] (fp32, or fp64), stored in their dtype; program
    axis 1 picks the gradient (k): both in one launch."""
    ACC: tl.constexpr = tl.float64 if part.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    k = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = cols < N
    src = part + k.to(tl.int64) * G * N
    acc = tl.zeros([BLOCK_G, BLOCK_N], ACC)
    for g0 in range(0, G, BLOCK_G):
        gs = g0 + tl.arange(0, BLOCK_G)
        m = (gs < G)[:, None] & cm[None, :]
        acc += tl.load(src + gs[:, None].to(tl.int64) * N + cols[None, :], mask=m, other=0.0)
    total = tl.sum(acc, 0)
    if NEED_W:
        if k == 0:
            tl.store(dw + cols, total.to(dw.dtype.element_ty), mask=cm)
    if NEED_B:
        if k == (1 if NEED_W else 0):
            tl.store(db + cols, total.to(db.dtype.element_ty), mask=cm)


@triton.jit
def _small_dw_columns(dy, x, mean_in, rstd_in, dw, db, M, N, cb, XS1, XS2, XT0, XT1, XT2, XTC, GS1, GS2, GT0, GT1,
                      GT2, GTC, ACC: tl.constexpr, RMS: tl.constexpr,
                      NEED_W: tl.constexpr, NEED_B: tl.constexpr, ROWS_C: tl.constexpr, BLOCK_C: tl.constexpr):
    """_norm_bwd_small_kernel's weight and bias gradients of column block ``cb``, summed over
    all M rows, ROWS_C rows a step."""
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cm = cols < N
    dw_acc = tl.zeros([ROWS_C, BLOCK_C], ACC)
    db_acc = tl.zeros([ROWS_C, BLOCK_C], ACC)
    for r0 in range(0, M, ROWS_C):
        rows = r0 + tl.arange(0, ROWS_C)
        rm = rows < M
        m = rm[:, None] & cm[None, :]
        g = tl.load(dy + _row_offsets(rows, cols, GS1, GS2, GT0, GT1, GT2, GTC), mask=m, other=0.0).to(ACC)
        if NEED_W:
            xv = tl.load(x + _row_offsets(rows, cols, XS1, XS2, XT0, XT1, XT2, XTC), mask=m, other=0.0).to(ACC)
            xhat, _ = _xhat_of_stats(xv, m, rows, rm, mean_in, rstd_in, ACC, RMS)
            dw_acc += g * xhat
        if NEED_B:
            db_acc += g
    if NEED_W:
        tl.store(dw + cols, tl.sum(dw_acc, 0).to(dw.dtype.element_ty), mask=cm)
    if NEED_B:
        tl.store(db + cols, tl.sum(db_acc, 0).to(db.dtype.element_ty), mask=cm)


@triton.jit
def _norm_bwd_small_kernel(
    dy, x, w, mean_in, rstd_in, dx, dw, db, M, N, R,
    XS1, XS2, XT0, XT1, XT2, XTC, GS1, GS2, GT0, GT1, GT2, GTC,
    RMS: tl.constexpr, HAS_W: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROWS_C: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """A few rows with the forward's statistics, in one launch: programs [0, R) give dx of
    their row blocks (_rows_body, without partial sums); each program after them sums dw
    and db of its BLOCK_C columns over all M rows and stores them. No partial rows and no
    second launch: at a few hundred rows those cost more than the rows themselves."""
    ACC: tl.constexpr = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    pid = tl.program_id(0)
    if pid < R:
        _rows_body(dy, x, w, mean_in, rstd_in, x, dx, dx, M, N, 0.0, R, pid, XS1, XS2, XT0, XT1, XT2, XTC,
                   GS1, GS2, GT0, GT1, GT2, GTC, RMS, HAS_W, False, False, True, False, BLOCK_M, BLOCK_N)
    else:
        _small_dw_columns(dy, x, mean_in, rstd_in, dw, db, M, N, pid - R, XS1, XS2, XT0, XT1, XT2, XTC,
                          GS1, GS2, GT0, GT1, GT2, GTC, ACC, RMS, NEED_W, NEED_B, ROWS_C, BLOCK_C)


_norm_bwd_rows = jit(_norm_bwd_rows_kernel)
_norm_bwd_small = jit(_norm_bwd_small_kernel)
_norm_bwd_wide = jit(_norm_bwd_wide_kernel)
_col_sum = jit(_col_sum_kernel)

#: elements of a row block in registers (BLOCK_M * BLOCK_N) of the row kernel, on a GPU
TILE_ELEMS = 4096
#: row-kernel programs per SM: enough to hide latency, few partial rows to add up
PROGRAMS_PER_SM = 2
#: up to this many rows (with the forward's statistics and a row in registers), one launch:
#: _norm_bwd_small_kernel (H200, bf16, device time against aten's: layer norm 0.67-0.86x at
#: 256-1024 x 1024 rows, 0.81-0.96x at 512-1024 x 4096; rms norm 0.54-0.71x; the two launches
#: read 0.91-1.14x; docs/benchmarks.md)
SMALL_ROWS = 1024
#: ... and up to this many elements (rows x n): the largest call measured (1024 x 4096, 0.96x)
SMALL_ELEMS = 4 << 20
#: up to this many elements (rows x n), one program per SM: a small call's partial rows cost
#: more than the latency a second program hides (H200, bf16 layer norm backward against
#: aten, 2 and 1 per SM: 256x4096 1.32x and 1.11x, 512x1024 1.09x and 1.03x, 2048x1024 0.99x
#: and 0.80x, 16384x256 0.30x and 0.24x; above it 2 wins: 8192x1024 0.50x and 0.55x,
#: 2048x4096 0.93x and 1.11x)
ONE_PER_SM_ELEMS = 4 << 20


def _one_pass(on_gpu: bool, n: int) -> bool:
    """Whether a row and its weight fit in registers (more live vectors than the forward's):
    the row kernels, which read strided rows in place; longer rows take the wide kernel."""
    return n <= (8192 if on_gpu else 2048)


def _sms(on_gpu: bool, device: Any) -> int:
    if not on_gpu:
        return 8
    from .matmul import _sms as sms

    return sms(device)


def norm_backward_plan(device: Any, refs: dict[str, Any], shapes: dict[str, Any], m: int, n: int, eps: float,
                       rms: bool, need: Sequence[bool], contiguous: tuple[int, ...] = (),
                       layouts: tuple[Rows, Rows] | None = None) -> Plan:
    """The plan of a row-norm backward. ``refs``: plan references (or None) of dy, x, w,
    mean, rstd, dres; ``shapes``: (shape, dtype) of the outputs dx, dw, db; ``need``:
    which of dx, dw, db the call returns (an output not needed is returned as None);
    ``layouts``: the layouts of x's and dy's rows (:func:`_in_place`), read in place by the row
    kernels (contiguous where None; a caller passes others only where :func:`_one_pass`).
    Two launches at most: the rows (dx and per-program partial sums), then one column
    kernel for both dw and db; one, where the call has few rows and the forward's
    statistics (_norm_bwd_small_kernel)."""
    on_gpu = device.type != "cpu"
    one_pass = _one_pass(on_gpu, n)
    xl, gl = layouts or (contiguous_rows(n), contiguous_rows(n))
    block_n = next_pow2(n) if one_pass else (4096 if on_gpu else 1024)
    need_w = bool(need[1]) and refs["w"] is not None
    need_b = bool(need[2])
    programs = (1 if m * n <= ONE_PER_SM_ELEMS else PROGRAMS_PER_SM) * _sms(on_gpu, device)
    if one_pass:
        # rows a step: a tile's worth, or one row where a tile's worth would leave programs
        # without a row block (H200, bf16, 264 programs: 1024x1024 4 rows a step 1.32x
        # aten's time, 1 row 0.97x; 512x1024 1.19x and 1.14x; 4096x1024 and up keep 4)
        block_m = max(1, min(16, (TILE_ELEMS if on_gpu else 2048) // block_n))
        if m // programs < block_m:
            block_m = 1
        blocks = cdiv(m, block_m)
        g = max(1, min(blocks, programs))
    else:
        block_m = 1
        g = max(1, min(m, programs))
        rows = cdiv(m, g) if m else 0
        g = cdiv(m, rows) if rows else 1
    outs = [Buffer(*shapes["dx"])]
    kinds = int(need_w) + int(need_b)
    temps = (Buffer((kinds, g, n), opmath(shapes["dx"][1])),) if kinds else ()
    dw_out = Out(1) if need_w else Out(0)
    db_out = Out(2 if need_w else 1) if need_b else Out(0)
    if need_w:
        outs.append(Buffer(*shapes["dw"]))
    if need_b:
        outs.append(Buffer(*shapes["db"]))
    result = (0 if need[0] else -1, 1 if need_w else -1, (2 if need_w else 1) if need_b else -1)
    launches: list[Launch] = []
    x = refs["x"]
    tile = block_m * block_n
    warps = 4 if not on_gpu else (16 if tile >= 8192 else 8 if tile >= 2048 else 4)
    block_c = min(next_pow2(n), (64 if n >= 4096 else 32) if on_gpu else 256)  # many column programs
    if (m and n and one_pass and kinds and refs["rstd"] is not None and refs["dres"] is None and m <= SMALL_ROWS
            and m * n <= SMALL_ELEMS):
        r = max(1, min(cdiv(m, block_m), _sms(on_gpu, device)))
        rows_c = max(1, min(next_pow2(m), (TILE_ELEMS if on_gpu else 2048) // block_c))
        launches.append(launch(
            _norm_bwd_small, (r + cdiv(n, block_c),), refs["dy"], x, refs["w"] if refs["w"] is not None else x,
            refs["mean"] if refs["mean"] is not None else x, refs["rstd"], Out(0), dw_out, db_out, m, n, r, *xl, *gl,
            RMS=rms, HAS_W=refs["w"] is not None, NEED_W=need_w, NEED_B=need_b, BLOCK_M=block_m, BLOCK_N=block_n,
            ROWS_C=rows_c, BLOCK_C=block_c, num_warps=warps))
        return Plan(tuple(outs), tuple(launches), result=result, contiguous=contiguous)
    if m and n:
        common = (refs["dy"], x, refs["w"] if refs["w"] is not None else x,
                  refs["mean"] if refs["mean"] is not None else x, refs["rstd"] if refs["rstd"] is not None else x,
                  refs["dres"] if refs["dres"] is not None else x, Out(0), Tmp(0) if kinds else Out(0), m, n,
                  float(eps))
        flags = dict(RMS=rms, HAS_W=refs["w"] is not None, NEED_W=need_w, NEED_B=need_b,
                     HAS_STATS=refs["rstd"] is not None, HAS_DRES=refs["dres"] is not None, BLOCK_N=block_n)
        if one_pass:
            launches.append(launch(_norm_bwd_rows, (g,), *common, g, *xl, *gl, BLOCK_M=block_m, num_warps=warps,
                                   **flags))
        else:
            launches.append(launch(_norm_bwd_wide, (g,), *common, rows, g, num_warps=warps, **flags))
        if kinds:
            launches.append(launch(_col_sum, (cdiv(n, block_c), kinds), Tmp(0), dw_out, db_out, g, n, NEED_W=need_w,
                                   NEED_B=need_b, BLOCK_G=min(next_pow2(g), 64 if on_gpu else 8), BLOCK_N=block_c))
    elif m == 0 and n:  # no rows: zero weight/bias gradients
        for k, want in enumerate((need_w, need_b)):
            if want:
                launches.append(launch(_fill, (cdiv(n, 1024),), Out(1 + k if need_w else 1), n, 0.0, BLOCK=1024))
    return Plan(tuple(outs), tuple(launches), result=result, temps=temps, contiguous=contiguous)


@triton.jit
def _fill_kernel(out, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, value - tl.zeros([BLOCK], tl.float32).to(out.dtype.element_ty), mask=offs < n)  # -0.0 kept


_fill = jit(_fill_kernel)


def _normalized(x: Any, normalized_shape: Any) -> tuple[int, int] | None:
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
        return None
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not ns or x.dim() < len(ns) or tuple(x.shape[x.dim() - len(ns):]) != ns:
        return None
    n = 1
    for s in ns:
        n *= s
    return (x.numel() // n if n else 0), n


def _ok(t: Any, x: Tensor, numel: int | None = None) -> bool:
    return (isinstance(t, Tensor) and t.device == x.device and t.dtype in FLOAT_DTYPES
            and (numel is None or t.numel() == numel))


def _contig(*items: tuple[int, Any]) -> tuple[int, ...]:
    return tuple(i for i, t in items if isinstance(t, Tensor) and not t.is_contiguous())


def _in_place(dy: Tensor, x: Tensor, n: int, dims: int) -> tuple[tuple[Rows, Rows] | None, tuple[int, ...]]:
    """(the rows' layouts of x and dy, arguments 1 and 0, for the row kernels; the ones of
    those two to copy contiguous first): a strided view over the last ``dims`` dims (a
    transposed [B, C, HW] conv output under a layer norm; an attention head's view under a
    q/k norm) is read in place where its rows have a layout (_layout.rows_layout) and fit
    the row kernels (:func:`_one_pass`), as the forward reads them; aten's backward copies
    both first."""
    if x.is_contiguous() and dy.is_contiguous():
        return None, ()
    norm = range(x.dim() - dims, x.dim())
    xl = contiguous_rows(n) if x.is_contiguous() else rows_layout(x, norm)
    gl = contiguous_rows(n) if dy.is_contiguous() else rows_layout(dy, norm)
    if not _one_pass(x.device.type != "cpu", n) or xl is None and gl is None:
        return None, _contig((0, dy), (1, x))
    copied = tuple(i for i, layout in ((0, gl), (1, xl)) if layout is None)
    return (xl or contiguous_rows(n), gl or contiguous_rows(n)), copied


# ------------------------------------------------------------------ aten's backward ops
def plan_native_layer_norm_backward(grad_out: Any, x: Any, normalized_shape: Any, mean: Any, rstd: Any,
                                    weight: Any, bias: Any, output_mask: Any) -> Plan | None:
    """aten.native_layer_norm_backward: (dx, dweight, dbias), each only where output_mask asks."""
    mn = _normalized(x, normalized_shape)
    if mn is None or not _ok(grad_out, x) or grad_out.shape != x.shape:
        return None
    m, n = mn
    if not (_ok(mean, x, m) and _ok(rstd, x, m)) or any(p is not None and not _ok(p, x, n) for p in (weight, bias)):
        return None
    need = (bool(output_mask[0]), bool(output_mask[1]) and weight is not None,
            bool(output_mask[2]) and bias is not None)
    refs = dict(dy=In(0), x=In(1), w=In(5) if weight is not None else None, mean=In(3), rstd=In(4), dres=None)
    shapes = dict(dx=(tuple(x.shape), x.dtype), dw=(tuple(weight.shape), weight.dtype) if weight is not None else None,
                  db=(tuple(bias.shape), bias.dtype) if bias is not None else None)
    layouts, copied = _in_place(grad_out, x, n, 1 if isinstance(normalized_shape, int) else len(normalized_shape))
    return norm_backward_plan(x.device, refs, shapes, m, n, 0.0, False, need,
                              copied + _contig((3, mean), (4, rstd), (5, weight)), layouts)


def plan_fused_rms_norm_backward(grad_out: Any, x: Any, normalized_shape: Any, rstd: Any, weight: Any,
                                 output_mask: Any) -> Plan | None:
    """aten._fused_rms_norm_backward: (dx, dweight)."""
    mn = _normalized(x, normalized_shape)
    if mn is None or not _ok(grad_out, x) or grad_out.shape != x.shape:
        return None
    m, n = mn
    if not _ok(rstd, x, m) or (weight is not None and not _ok(weight, x, n)):
        return None
    need = (bool(output_mask[0]), bool(output_mask[1]) and weight is not None, False)
    refs = dict(dy=In(0), x=In(1), w=In(4) if weight is not None else None, mean=None, rstd=In(3), dres=None)
    shapes = dict(dx=(tuple(x.shape), x.dtype), dw=(tuple(weight.shape), weight.dtype) if weight is not None else None,
                  db=None)
    layouts, copied = _in_place(grad_out, x, n, 1 if isinstance(normalized_shape, int) else len(normalized_shape))
    p = norm_backward_plan(x.device, refs, shapes, m, n, 0.0, True, need,
                           copied + _contig((3, rstd), (4, weight)), layouts)
    return p._replace(result=p.result[:2])


def _run(plan: Plan | None, args: tuple, op: str) -> Any:
    if plan is None:
        raise NotImplementedError(f"tritonjit {op}: no kernel for these arguments")
    return run(plan, args)


def native_layer_norm_backward(grad_out: Tensor, x: Tensor, normalized_shape: Sequence[int], mean: Tensor,
                               rstd: Tensor, weight: Tensor | None, bias: Tensor | None, output_mask: Sequence[bool]
                               ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    args = (grad_out, x, normalized_shape, mean, rstd, weight, bias, output_mask)
    return _run(plan_native_layer_norm_backward(*args), args, "native_layer_norm_backward")


def fused_rms_norm_backward(grad_out: Tensor, x: Tensor, normalized_shape: Sequence[int], rstd: Tensor,
                            weight: Tensor | None, output_mask: Sequence[bool]) -> tuple[Tensor | None, Tensor | None]:
    args = (grad_out, x, normalized_shape, rstd, weight, output_mask)
    return _run(plan_fused_rms_norm_backward(*args), args, "_fused_rms_norm_backward")


# ------------------------------------------------------------------ tritonjit's backward op
def plan_norm_backward(grad_out: Any, x: Any, weight: Any, dres: Any, n: int, eps: float, rms: bool,
                       need_bias: bool) -> Plan | None:
    """tritonjit::norm_backward: (dx, dweight, dbias) of layer_norm (rms=False) or rms_norm over
    the trailing ``n`` elements, statistics recomputed; ``dres`` (or None) is added to dx (the
    residual output's gradient of fused_add_rms_norm). dweight/dbias are empty where absent."""
    if (not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or not _ok(grad_out, x) or grad_out.shape != x.shape
            or n <= 0 or x.numel() % n or (weight is not None and not _ok(weight, x, n))
            or (dres is not None and (not _ok(dres, x) or dres.shape != x.shape))):
        return None
    m = x.numel() // n
    wdt = weight.dtype if weight is not None else x.dtype
    refs = dict(dy=In(0), x=In(1), w=In(2) if weight is not None else None, mean=None, rstd=None,
                dres=In(3) if dres is not None else None)
    shapes = dict(dx=(tuple(x.shape), x.dtype), dw=((n,), wdt), db=((n,), wdt))
    p = norm_backward_plan(x.device, refs, shapes, m, n, eps, rms, (True, weight is not None, need_bias),
                           _contig((0, grad_out), (1, x), (2, weight), (3, dres)))
    # absent gradients come back as empty tensors (an op's Tensor outputs are never None)
    outs = list(p.outputs)
    result = list(p.result)
    for k in (1, 2):
        if result[k] == -1:
            outs.append(Buffer((0,), wdt))
            result[k] = len(outs) - 1
    return p._replace(outputs=tuple(outs), result=tuple(result))


def norm_backward(grad_out: Tensor, x: Tensor, weight: Tensor | None, dres: Tensor | None, n: int, eps: float,
                  rms: bool, need_bias: bool) -> tuple[Tensor, Tensor, Tensor]:
    args = (grad_out, x, weight, dres, n, eps, rms, need_bias)
    return _run(plan_norm_backward(*args), args, "norm_backward")


PLANNERS: dict[str, Any] = {
    "native_layer_norm_backward": plan_native_layer_norm_backward,
    "_fused_rms_norm_backward": plan_fused_rms_norm_backward,
}
