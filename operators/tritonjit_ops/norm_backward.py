"""Normalization backward: layer_norm, rms_norm and the fused residual-add rms_norm.

One row kernel gives the input gradient of a row in one read of ``grad`` and ``x``
(plus the residual branch's gradient, for fused_add_rms_norm), and per-program partial
sums of the weight and bias gradients over its rows; a column kernel adds those
partials up. Statistics come from the forward (aten's mean/rstd) or are recomputed in
the kernel (the tritonjit ops and direct entries, whose forward does not return them).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, cdiv, jit, next_pow2
from ._plan import Buffer, In, Launch, Out, Plan, Tmp, launch, run

Tensor = torch.Tensor


@triton.jit
def _norm_bwd_kernel(
    dy, x, w, mean_in, rstd_in, dres, dx, dw_part, db_part, M, N, eps, ROWS,
    RMS: tl.constexpr, HAS_W: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
    HAS_STATS: tl.constexpr, HAS_DRES: tl.constexpr, ONE_PASS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """dx of rows [pid * ROWS, (pid + 1) * ROWS); dw_part/db_part[pid] = their sums of dy * xhat / dy."""
    pid = tl.program_id(0)
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        cm = cols < N
        if HAS_W:
            wv = tl.load(w + cols, mask=cm, other=0.0).to(tl.float32)
        dw_acc = tl.zeros([BLOCK_N], tl.float32)
        db_acc = tl.zeros([BLOCK_N], tl.float32)
        for i in range(0, ROWS):
            row = pid * ROWS + i
            ok = row < M
            m = cm & ok
            base = row.to(tl.int64) * N
            xv = tl.load(x + base + cols, mask=m, other=0.0).to(tl.float32)
            g = tl.load(dy + base + cols, mask=m, other=0.0).to(tl.float32)
            if HAS_STATS:
                rstd = tl.load(rstd_in + row, mask=ok, other=0.0).to(tl.float32)
                if RMS:
                    mu = 0.0
                else:
                    mu = tl.load(mean_in + row, mask=ok, other=0.0).to(tl.float32)
            else:
                if RMS:
                    mu = 0.0
                    var = tl.sum(xv * xv, 0) / N
                else:
                    mu = tl.sum(xv, 0) / N
                    d = tl.where(m, xv - mu, 0.0)
                    var = tl.sum(d * d, 0) / N
                rstd = 1.0 / tl.sqrt(var + eps)
            xhat = tl.where(m, (xv - mu) * rstd, 0.0)
            if HAS_W:
                wg = g * wv
            else:
                wg = g
            c1 = tl.sum(xhat * wg, 0) / N
            if RMS:
                dxv = (wg - xhat * c1) * rstd
            else:
                c2 = tl.sum(wg, 0) / N
                dxv = (wg - xhat * c1 - c2) * rstd
            if HAS_DRES:
                dxv += tl.load(dres + base + cols, mask=m, other=0.0).to(tl.float32)
            tl.store(dx + base + cols, dxv.to(dx.dtype.element_ty), mask=m)
            if NEED_W:
                dw_acc += g * xhat
            if NEED_B:
                db_acc += g
        if NEED_W:
            tl.store(dw_part + pid * N + cols, dw_acc, mask=cm)
        if NEED_B:
            tl.store(db_part + pid * N + cols, db_acc, mask=cm)
    else:
        for i in range(0, ROWS):
            row = pid * ROWS + i
            ok = row < M
            base = row.to(tl.int64) * N
            if HAS_STATS:
                rstd = tl.load(rstd_in + row, mask=ok, other=0.0).to(tl.float32)
                if RMS:
                    mu = 0.0
                else:
                    mu = tl.load(mean_in + row, mask=ok, other=0.0).to(tl.float32)
            else:
                acc = tl.zeros([BLOCK_N], tl.float32)
                for c0 in range(0, N, BLOCK_N):
                    cols = c0 + tl.arange(0, BLOCK_N)
                    m = (cols < N) & ok
                    xv = tl.load(x + base + cols, mask=m, other=0.0).to(tl.float32)
                    if RMS:
                        acc += xv * xv
                    else:
                        acc += xv
                if RMS:
                    mu = 0.0
                    var = tl.sum(acc, 0) / N
                else:
                    mu = tl.sum(acc, 0) / N
                    acc = tl.zeros([BLOCK_N], tl.float32)
                    for c0 in range(0, N, BLOCK_N):
                        cols = c0 + tl.arange(0, BLOCK_N)
                        m = (cols < N) & ok
                        xv = tl.load(x + base + cols, mask=m, other=0.0).to(tl.float32)
                        d = tl.where(m, xv - mu, 0.0)
                        acc += d * d
                    var = tl.sum(acc, 0) / N
                rstd = 1.0 / tl.sqrt(var + eps)
            a1 = tl.zeros([BLOCK_N], tl.float32)
            a2 = tl.zeros([BLOCK_N], tl.float32)
            for c0 in range(0, N, BLOCK_N):
                cols = c0 + tl.arange(0, BLOCK_N)
                m = (cols < N) & ok
                xv = tl.load(x + base + cols, mask=m, other=0.0).to(tl.float32)
                g = tl.load(dy + base + cols, mask=m, other=0.0).to(tl.float32)
                if HAS_W:
                    g = g * tl.load(w + cols, mask=cols < N, other=0.0).to(tl.float32)
                a1 += tl.where(m, (xv - mu) * rstd, 0.0) * g
                a2 += g
            c1 = tl.sum(a1, 0) / N
            c2 = tl.sum(a2, 0) / N
            for c0 in range(0, N, BLOCK_N):
                cols = c0 + tl.arange(0, BLOCK_N)
                cm = cols < N
                m = cm & ok
                xv = tl.load(x + base + cols, mask=m, other=0.0).to(tl.float32)
                g = tl.load(dy + base + cols, mask=m, other=0.0).to(tl.float32)
                xhat = tl.where(m, (xv - mu) * rstd, 0.0)
                if HAS_W:
                    wg = g * tl.load(w + cols, mask=cm, other=0.0).to(tl.float32)
                else:
                    wg = g
                if RMS:
                    dxv = (wg - xhat * c1) * rstd
                else:
                    dxv = (wg - xhat * c1 - c2) * rstd
                if HAS_DRES:
                    dxv += tl.load(dres + base + cols, mask=m, other=0.0).to(tl.float32)
                tl.store(dx + base + cols, dxv.to(dx.dtype.element_ty), mask=m)
                first = i > 0  # the partial row of this program starts at zero
                if NEED_W:
                    prev = tl.load(dw_part + pid * N + cols, mask=cm & first, other=0.0)
                    tl.store(dw_part + pid * N + cols, prev + g * xhat, mask=cm)
                if NEED_B:
                    prev = tl.load(db_part + pid * N + cols, mask=cm & first, other=0.0)
                    tl.store(db_part + pid * N + cols, prev + g, mask=cm)


@triton.jit
def _col_sum_kernel(part, out, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[n] = sum over g of part[g, n] (fp32), stored in out's dtype."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = cols < N
    acc = tl.zeros([BLOCK_G, BLOCK_N], tl.float32)
    for g0 in range(0, G, BLOCK_G):
        gs = g0 + tl.arange(0, BLOCK_G)
        m = (gs < G)[:, None] & cm[None, :]
        acc += tl.load(part + gs[:, None].to(tl.int64) * N + cols[None, :], mask=m, other=0.0)
    tl.store(out + cols, tl.sum(acc, 0).to(out.dtype.element_ty), mask=cm)


_norm_bwd = jit(_norm_bwd_kernel)
_col_sum = jit(_col_sum_kernel)


def _sms(on_gpu: bool, device: Any) -> int:
    if not on_gpu:
        return 8
    from .matmul import _sms as sms

    return sms(device)


def norm_backward_plan(device: Any, refs: dict[str, Any], shapes: dict[str, Any], m: int, n: int, eps: float,
                       rms: bool, need: Sequence[bool], contiguous: tuple[int, ...] = ()) -> Plan:
    """The plan of a row-norm backward. ``refs``: plan references (or None) of dy, x, w,
    mean, rstd, dres; ``shapes``: (shape, dtype) of the outputs dx, dw, db; ``need``:
    which of dx, dw, db the call returns (an output not needed is returned as None)."""
    on_gpu = device.type != "cpu"
    one_pass = n <= (8192 if on_gpu else 2048)  # a row and its weight in registers (more live vectors than forward)
    block_n = next_pow2(n) if one_pass else (4096 if on_gpu else 1024)
    need_w = bool(need[1]) and refs["w"] is not None
    need_b = bool(need[2])
    g = max(1, min(m, 2 * _sms(on_gpu, device)))  # programs: enough to fill the GPU, few partial rows
    rows = cdiv(m, g) if m else 0
    g = cdiv(m, rows) if rows else 0
    outs = [Buffer(*shapes["dx"])]
    temps: list[Buffer] = []
    dw_ref = db_ref = None
    if need_w:
        outs.append(Buffer(*shapes["dw"]))
        temps.append(Buffer((max(g, 1), n), torch.float32))
        dw_ref = Tmp(len(temps) - 1)
    if need_b:
        outs.append(Buffer(*shapes["db"]))
        temps.append(Buffer((max(g, 1), n), torch.float32))
        db_ref = Tmp(len(temps) - 1)
    result = (0 if need[0] else -1, 1 if need_w else -1, (2 if need_w else 1) if need_b else -1)
    launches: list[Launch] = []
    if m and n:
        x = refs["x"]
        warps = 4 if not on_gpu else (16 if block_n >= 8192 else 8 if block_n >= 2048 else 4)
        launches.append(launch(
            _norm_bwd, (g,), refs["dy"], x, refs["w"] if refs["w"] is not None else x,
            refs["mean"] if refs["mean"] is not None else x, refs["rstd"] if refs["rstd"] is not None else x,
            refs["dres"] if refs["dres"] is not None else x, Out(0),
            dw_ref if dw_ref is not None else Out(0), db_ref if db_ref is not None else Out(0),
            m, n, float(eps), rows, RMS=rms, HAS_W=refs["w"] is not None, NEED_W=need_w, NEED_B=need_b,
            HAS_STATS=refs["rstd"] is not None, HAS_DRES=refs["dres"] is not None, ONE_PASS=one_pass,
            BLOCK_N=block_n, num_warps=warps))
        bn = min(next_pow2(n), 64 if on_gpu else 256)  # many column programs: the partials are [g, n]
        for k, (ref, want) in enumerate(((dw_ref, need_w), (db_ref, need_b))):
            if want:
                launches.append(launch(_col_sum, (cdiv(n, bn),), ref, Out(1 + k if need_w else 1), g, n,
                                       BLOCK_G=min(next_pow2(g), 64 if on_gpu else 8), BLOCK_N=bn))
    elif m == 0 and n:  # no rows: zero weight/bias gradients
        for k, want in enumerate((need_w, need_b)):
            if want:
                launches.append(launch(_fill, (cdiv(n, 1024),), Out(1 + k if need_w else 1), n, 0.0, BLOCK=1024))
    return Plan(tuple(outs), tuple(launches), result=result, temps=tuple(temps), contiguous=contiguous)


@triton.jit
def _fill_kernel(out, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.zeros([BLOCK], tl.float32).to(out.dtype.element_ty) + value, mask=offs < n)


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
    return norm_backward_plan(x.device, refs, shapes, m, n, 0.0, False, need,
                              _contig((0, grad_out), (1, x), (3, mean), (4, rstd), (5, weight)))


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
    p = norm_backward_plan(x.device, refs, shapes, m, n, 0.0, True, need,
                           _contig((0, grad_out), (1, x), (3, rstd), (4, weight)))
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
    if isinstance(x, Tensor) and x.dtype == torch.float64:
        return _rms_norm_backward_f64(*args)
    return _run(plan_fused_rms_norm_backward(*args), args, "_fused_rms_norm_backward")


def _rms_norm_backward_f64(grad_out: Tensor, x: Tensor, normalized_shape: Sequence[int], rstd: Tensor,
                           weight: Tensor | None, output_mask: Sequence[bool]) -> tuple[Tensor | None, Tensor | None]:
    """float64, which the kernel computes in float32 and aten has no CPU kernel of (enable()
    gives the planner's float64 calls to this Python implementation):
    the gradient from tensor ops in float64 (dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w;
    dw = sum(dy * xhat) over the leading dims)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = 1
    for d in ns:
        n *= d
    x2 = x.reshape(-1, n)
    dy = grad_out.reshape(-1, n)
    r = rstd.reshape(-1, 1).to(x.dtype)
    xhat = x2 * r
    g = dy * weight.reshape(1, n) if weight is not None else dy
    dx = (r * (g - xhat * (g * xhat).mean(-1, keepdim=True))).reshape(x.shape) if output_mask[0] else None
    dw = None
    if weight is not None and output_mask[1]:
        dw = (dy * xhat).sum(0).reshape(weight.shape).to(weight.dtype)
    return dx, dw


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
