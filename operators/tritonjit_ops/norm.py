"""Normalization forward: layer_norm, rms_norm, group_norm, and the fused residual-add rms_norm.

One row kernel serves all four: a row is a normalized slice (the trailing
``normalized_shape`` for layer/rms norm, one (sample, group) for group norm).
Short rows are normalized from registers after one read; long rows loop. A strided x
(an attention head's [B, H, L, D] view for a q/k norm, a slice) is read in place where its
rows have a layout (``_layout.rows_layout``); the output is contiguous, as aten's is.
Statistics are in aten's opmath type: fp32, or fp64 for fp64 inputs (which compute in fp64).
"""
from __future__ import annotations

from typing import Any, Sequence, overload

import torch
import triton
import triton.language as tl

from . import _prologue
from ._common import FLOAT_DTYPES, cdiv, check_dtype, check_same_device, jit, next_pow2, opmath
from ._layout import contiguous_rows, row_offset, rows_layout
from ._plan import Buffer, In, Launch, Out, Plan, execute, launch

Tensor = torch.Tensor


@triton.jit
def _norm_kernel(
    x, res, w, b, out, res_out, mean_out, rstd_out, M, N, eps: tl.float64, CPG, HW, G, S1, S2, T0, T1, T2, TC,
    RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_RES: tl.constexpr,
    GROUP: tl.constexpr, STATS: tl.constexpr, ONE_PASS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    ACC: tl.constexpr = tl.float64 if out.dtype.element_ty == tl.float64 else tl.float32  # aten's opmath type
    # eps is an fp64 parameter (a Python float would be passed as fp32), read in the math type
    # by tl.full: the compiler's value is an fp64 scalar, the interpreter's a Python float
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    r64 = rows.to(tl.int64)
    base = r64[:, None] * N  # the outputs' rows (and a residual's): contiguous
    # x's rows, read in place from a strided view (_layout.rows_layout: an attention head's
    # [B, H, L, D] view); for a contiguous x, S1 = S2 = TC = 1 and T0 = N fold to ``base``
    xbase = row_offset(r64, S1, S2, T0, T1, T2)[:, None]
    if HAS_RES:
        sbase = base  # later passes read the sum, stored contiguous in res_out
        SC = 1
    else:
        sbase = xbase
        SC = TC
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        m = rmask[:, None] & (cols < N)[None, :]
        v = tl.load(x + xbase + cols[None, :] * TC, mask=m, other=0.0).to(ACC)
        if HAS_RES:
            v += tl.load(res + base + cols[None, :], mask=m, other=0.0).to(ACC)
            tl.store(res_out + base + cols[None, :], v.to(res_out.dtype.element_ty), mask=m)
            v = tl.load(res_out + base + cols[None, :], mask=m, other=0.0).to(ACC)
        if RMS:
            mean = tl.zeros([BLOCK_M], ACC)
            var = tl.sum(v * v, 1) / N
        else:
            mean = tl.sum(v, 1) / N
            d = tl.where(m, v - mean[:, None], 0.0)
            var = tl.sum(d * d, 1) / N
        rstd = 1.0 / tl.sqrt(var + tl.full([], eps, ACC))
        y = (v - mean[:, None]) * rstd[:, None]
        if GROUP:
            ch = (rows % G)[:, None] * CPG + cols[None, :] // HW
        else:
            ch = cols[None, :] + tl.zeros([BLOCK_M, BLOCK_N], tl.int32)
        if HAS_W:
            y = y * tl.load(w + ch, mask=m, other=0.0).to(ACC)
        if HAS_B:
            y = y + tl.load(b + ch, mask=m, other=0.0).to(ACC)
        tl.store(out + base + cols[None, :], y.to(out.dtype.element_ty), mask=m)
    else:
        src = res_out if HAS_RES else x
        acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = rmask[:, None] & (cols < N)[None, :]
            v = tl.load(x + xbase + cols[None, :] * TC, mask=m, other=0.0).to(ACC)
            if HAS_RES:
                v += tl.load(res + base + cols[None, :], mask=m, other=0.0).to(ACC)
                tl.store(res_out + base + cols[None, :], v.to(res_out.dtype.element_ty), mask=m)
                v = tl.load(res_out + base + cols[None, :], mask=m, other=0.0).to(ACC)
            if RMS:
                acc += v * v
            else:
                acc += v
        if RMS:
            mean = tl.zeros([BLOCK_M], ACC)
            var = tl.sum(acc, 1) / N
        else:
            mean = tl.sum(acc, 1) / N
            acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
            for c0 in range(0, N, BLOCK_N):
                cols = c0 + tl.arange(0, BLOCK_N)
                m = rmask[:, None] & (cols < N)[None, :]
                v = tl.load(src + sbase + cols[None, :] * SC, mask=m, other=0.0).to(ACC)
                d = tl.where(m, v - mean[:, None], 0.0)
                acc += d * d
            var = tl.sum(acc, 1) / N
        rstd = 1.0 / tl.sqrt(var + tl.full([], eps, ACC))
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = rmask[:, None] & (cols < N)[None, :]
            v = tl.load(src + sbase + cols[None, :] * SC, mask=m, other=0.0).to(ACC)
            y = (v - mean[:, None]) * rstd[:, None]
            if GROUP:
                ch = (rows % G)[:, None] * CPG + cols[None, :] // HW
            else:
                ch = cols[None, :] + tl.zeros([BLOCK_M, BLOCK_N], tl.int32)
            if HAS_W:
                y = y * tl.load(w + ch, mask=m, other=0.0).to(ACC)
            if HAS_B:
                y = y + tl.load(b + ch, mask=m, other=0.0).to(ACC)
            tl.store(out + base + cols[None, :], y.to(out.dtype.element_ty), mask=m)
    if STATS:
        tl.store(mean_out + rows, mean, mask=rmask)
        tl.store(rstd_out + rows, rstd, mask=rmask)


_norm = jit(_norm_kernel)

# Per (device kind, N) launch parameters, bounded like fused._silu_plans: cleared when full.
_PLANS_MAX = 4096
_plans: dict[tuple, tuple] = {}


def _plan(on_gpu: bool, n: int) -> tuple:
    key = (on_gpu, n)
    p = _plans.get(key)
    if p is None:
        max_n = 16384 if on_gpu else 2048
        one_pass = n <= max_n
        block_n = next_pow2(n) if one_pass else (4096 if on_gpu else 1024)
        block_m = max(1, min((2048 if on_gpu else 1024) // block_n, 16))
        warps = 4 if not on_gpu else (16 if block_n >= 8192 else 8 if block_n >= 2048 else 4)
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        p = _plans[key] = (one_pass, block_n, block_m, warps)
    return p


# Hot path of layer_norm / rms_norm over the last dim: (shape, on CPU) -> n, grid, the rows' layout
# and the tile constexprs, built once by _row_plan, so a call is one dict hit,
# a few C attribute reads, one empty_like and the launch. Shapes with nothing to
# launch (0-dim, numel 0) get no plan and take the checked path.
_ROWS_MAX = 4096
_rows: dict[tuple, tuple] = {}
_rows_get = _rows.get
#: rms_norm's default eps: the epsilon of the math type (fp32 for fp16/bf16), which aten's
#: kernels add (torch's docs say the input dtype's; fp16's would move outputs by 2-3 ulp)
_EPS = {dt: float(torch.finfo(opmath(dt)).eps) for dt in FLOAT_DTYPES}
_eps_get = _EPS.get


def default_rms_eps(dtype: torch.dtype) -> float:
    """The eps rms_norm adds when none is given: the epsilon of its math type (fp32 for
    half types), as aten's kernels do."""
    return _EPS.get(dtype) or float(torch.finfo(opmath(dtype)).eps)


def _row_plan(key: tuple) -> tuple | None:
    shape, on_cpu = key
    if len(shape) == 0:
        return None
    n = shape[-1]
    m = 1
    for s in shape[:-1]:
        m *= s
    if n == 0 or m == 0:
        return None
    one_pass, block_n, block_m, warps = _plan(not on_cpu, n)
    if len(_rows) >= _ROWS_MAX:
        _rows.clear()
    p = _rows[key] = (n, (n,), m, (cdiv(m, block_m),), one_pass, block_m, block_n, warps, contiguous_rows(n))
    return p


def _launch(x, res, w, b, out, res_out, mean, rstd, m, n, eps, rms, group=(1, 1, 1)) -> None:
    if m == 0:
        return
    execute(_norm_launch(x.device.type != "cpu", x, res, w, b, out, res_out, mean, rstd, m, n, eps, rms, group))


def _norm_launch(on_gpu: bool, x, res, w, b, out, res_out, mean, rstd, m, n, eps, rms, group=(1, 1, 1),
                 rows: tuple[int, int, int, int, int, int] | None = None) -> Launch:
    """The row kernel's launch; the tensor arguments are tensors or plan references, None
    where absent (any valid pointer takes their place). ``rows``: a strided x's layout
    (_layout.rows_layout), read in place; None: x is contiguous."""
    one_pass, block_n, block_m, warps = _plan(on_gpu, n)
    cpg, hw, g = group
    return launch(
        _norm, (cdiv(m, block_m),),
        x, res if res is not None else x, w if w is not None else x, b if b is not None else x,
        out, res_out if res_out is not None else out, mean if mean is not None else out,
        rstd if rstd is not None else out, m, n, eps, cpg, hw, g, *(rows or contiguous_rows(n)),
        RMS=rms, HAS_W=w is not None, HAS_B=b is not None, HAS_RES=res is not None,
        GROUP=g > 1 or hw > 1, STATS=mean is not None, ONE_PASS=one_pass,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
    )


def _check_normalized(name: str, x: Tensor, normalized_shape: Sequence[int], *params: Tensor | None) -> int:
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.{name}: expected a Tensor, got {type(x).__name__}")
    check_dtype(name, x, FLOAT_DTYPES)
    check_same_device(name, x, *params)
    ns = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
    if len(ns) == 0 or tuple(x.shape[x.dim() - len(ns):]) != ns or x.dim() < len(ns):
        raise RuntimeError(
            f"Given normalized_shape={list(ns)}, expected input with shape [*, {', '.join(map(str, ns))}], "
            f"but got input of size{list(x.shape)}"
        )
    for p, what in zip(params, ("weight", "bias")):
        if p is not None and tuple(p.shape) != ns:
            raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape "
                               f"{list(p.shape)} and normalized_shape = {list(ns)}")
    n = 1
    for s in ns:
        n *= s
    return n


@overload
def _c(t: Tensor) -> Tensor: ...
@overload
def _c(t: Tensor | None) -> Tensor | None: ...
def _c(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


def native_layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
                      bias: Tensor | None = None, eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """layer_norm plus the mean and rstd (fp32; fp64 for fp64) (shape [*, 1, ..., 1]), like aten.native_layer_norm."""
    n = _check_normalized("layer_norm", x, normalized_shape, weight, bias)
    x = _c(x)
    m = x.numel() // n if n else 0
    out = torch.empty_like(x)  # x is contiguous here
    stat_shape = list(x.shape[: x.dim() - len(tuple(normalized_shape) if not isinstance(normalized_shape, int) else (1,))])
    stat_shape += [1] * (x.dim() - len(stat_shape))
    mean = torch.empty(stat_shape, dtype=opmath(x.dtype), device=x.device)
    rstd = torch.empty(stat_shape, dtype=opmath(x.dtype), device=x.device)
    if n:
        _launch(x, None, _c(weight), _c(bias), out, None, mean, rstd, m, n, float(eps), False)
    return out, mean, rstd


def layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape."""
    if (x.__class__ is Tensor and x.dtype in _EPS and x.is_contiguous()
            and (weight is None or (weight.__class__ is Tensor and weight.is_contiguous() and weight.dim() == 1
                                    and weight.device == x.device))
            and (bias is None or (bias.__class__ is Tensor and bias.is_contiguous() and bias.dim() == 1
                                  and bias.device == x.device))):
        key = (x.shape, x.is_cpu)
        p = _rows_get(key) or _row_plan(key)
        if (p is not None and (normalized_shape == p[1] or normalized_shape == [p[0]])
                and (weight is None or weight.numel() == p[0]) and (bias is None or bias.numel() == p[0])):
            n, _, m, grid, one_pass, block_m, block_n, warps, rows = p
            out = _prologue.like(x)
            _norm[grid](x, x, x if weight is None else weight, x if bias is None else bias, out, out, out, out,
                        m, n, float(eps), 1, 1, 1, *rows, False, weight is not None, bias is not None, False, False,
                        False, one_pass, block_m, block_n, num_warps=warps)
            return out
    n = _check_normalized("layer_norm", x, normalized_shape, weight, bias)
    x = _c(x)
    out = torch.empty_like(x)  # x is contiguous here
    if n:
        _launch(x, None, _c(weight), _c(bias), out, None, None, None, x.numel() // n, n, float(eps), False)
    return out


def rms_norm(x: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight; eps defaults to aten's (``default_rms_eps``)."""
    if x.__class__ is Tensor:
        # hot path: one plan lookup, one allocation, one launch
        deps = _eps_get(x.dtype)
        if (deps is not None and x.is_contiguous()
                and (weight is None or (weight.__class__ is Tensor and weight.is_contiguous() and weight.dim() == 1
                                        and weight.device == x.device))):
            key = (x.shape, x.is_cpu)
            p = _rows_get(key) or _row_plan(key)
            if (p is not None and (normalized_shape == p[1] or normalized_shape == [p[0]])
                    and (weight is None or weight.numel() == p[0])):
                n, _, m, grid, one_pass, block_m, block_n, warps, rows = p
                out = _prologue.like(x)
                _norm[grid](x, x, x if weight is None else weight, x, out, out, out, out, m, n,
                            deps if eps is None else eps, 1, 1, 1, *rows, True, weight is not None, False, False, False,
                            False, one_pass, block_m, block_n, num_warps=warps)
                return out
    n = _check_normalized("rms_norm", x, normalized_shape, weight)
    x = _c(x)
    if eps is None:
        eps = default_rms_eps(x.dtype)
    out = torch.empty_like(x)  # x is contiguous here
    if n:
        _launch(x, None, _c(weight), None, out, None, None, None, x.numel() // n, n, float(eps), True)
    return out


def fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor | None, eps: float = 1e-6
                       ) -> tuple[Tensor, Tensor]:
    """h = x + residual; returns (rms_norm(h) * weight, h) in one read of each input.

    Functional form of vLLM's in-place kernel; h is rounded to the residual dtype
    before normalizing, as the unfused sequence does.
    """
    n = _check_normalized("fused_add_rms_norm", x, (x.shape[-1],) if x.dim() else (), weight)
    if not isinstance(residual, Tensor) or residual.shape != x.shape:
        raise RuntimeError(f"tritonjit.fused_add_rms_norm: residual must have the shape of x {list(x.shape)}, "
                           f"got {list(residual.shape) if isinstance(residual, Tensor) else type(residual).__name__}")
    check_same_device("fused_add_rms_norm", x, residual)
    if residual.dtype != x.dtype:
        raise TypeError(f"tritonjit.fused_add_rms_norm: residual dtype {residual.dtype} != x dtype {x.dtype}")
    x, residual = _c(x), _c(residual)
    out = torch.empty_like(x)  # x is contiguous here
    h = torch.empty_like(x)
    if n:
        _launch(x, residual, _c(weight), None, out, h, None, None, x.numel() // n, n, float(eps), True)
    return out, h


def native_group_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int,
                      group: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """group_norm plus the mean and rstd (fp32; fp64 for fp64) of shape (N, group), like aten.native_group_norm."""
    if not isinstance(x, Tensor):
        raise TypeError(f"tritonjit.group_norm: expected a Tensor, got {type(x).__name__}")
    check_dtype("group_norm", x, FLOAT_DTYPES)
    check_same_device("group_norm", x, weight, bias)
    if group <= 0 or C % group != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(x.shape)} and num_groups={group}")
    for p, what in ((weight, "weight"), (bias, "bias")):
        if p is not None and (p.dim() != 1 or p.numel() != C):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of channels in input, "
                               f"but got {what} of shape {list(p.shape)} and input of shape {list(x.shape)}")
    x = _c(x)
    out = torch.empty_like(x)  # x is contiguous here
    mean = torch.empty((N, group), dtype=opmath(x.dtype), device=x.device)
    rstd = torch.empty((N, group), dtype=opmath(x.dtype), device=x.device)
    cpg = C // group
    if N * group and cpg * HxW:
        _launch(x, None, _c(weight), _c(bias), out, None, mean, rstd, N * group, cpg * HxW, float(eps), False,
                group=(cpg, HxW, group))
    return out, mean, rstd


def param_stats_dtype(x: Tensor, *params: Tensor | None) -> torch.dtype:
    """The dtype of the statistics aten's group norm returns on every device, and its layer norm
    on the CPU: float32 where the first given weight/bias has another dtype than x (a bf16 or
    fp16 x with fp32 parameters: aten's mixed type, as under CPU autocast), else x's. aten's
    backward reads them in that dtype and refuses any other."""
    p = next((t for t in params if t is not None), None)
    return torch.float32 if p is not None and p.dtype != x.dtype else x.dtype


def group_norm(x: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize each (sample, group of C/num_groups channels) slice, then a per-channel affine."""
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{x.dim() if isinstance(x, Tensor) else type(x).__name__}")
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // (n * c) if n * c else 1
    return native_group_norm(x, weight, bias, n, c, hw, num_groups, eps)[0]


def fused_rms_norm_with_rstd(x: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
                             eps: float | None = None) -> tuple[Tensor, Tensor]:
    """rms_norm plus the rstd (fp32; fp64 for fp64) of shape [*, 1, ..., 1], like aten._fused_rms_norm."""
    n = _check_normalized("rms_norm", x, normalized_shape, weight)
    x = _c(x)
    if eps is None:
        eps = default_rms_eps(x.dtype)
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    stat_shape = list(x.shape[: x.dim() - nd]) + [1] * nd
    out = torch.empty_like(x)  # x is contiguous here
    rstd = torch.empty(stat_shape, dtype=opmath(x.dtype), device=x.device)
    mean = torch.empty(stat_shape, dtype=opmath(x.dtype), device=x.device)
    if n:
        _launch(x, None, _c(weight), None, out, None, mean, rstd, x.numel() // n, n, float(eps), True)
    return out, rstd


# ----------------------------------------------------------------- plans
# Planners of the aten overloads for the C++ operator path (see _plan.py). layer_norm's and
# rms_norm's statistics are fp32, or fp64 for fp64 (aten's CUDA kernels); aten's CPU kernels give them in
# the input dtype, so CPU calls of 16-bit inputs take the Python implementation.
# group_norm's are in the input dtype everywhere.
def _norm_inputs(x: Any, normalized_shape: Any, *params: Any) -> int | None:
    """n (the normalized size) where a plan can serve the call, else None."""
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or (x.is_cpu and x.dtype != torch.float32):
        return None
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not ns or x.dim() < len(ns) or tuple(x.shape[x.dim() - len(ns):]) != ns:
        return None
    for p in params:
        if p is not None and (not isinstance(p, Tensor) or tuple(p.shape) != ns or p.dtype != x.dtype
                              or p.device != x.device):
            return None
    n = 1
    for d in ns:
        n *= d
    return n


def _contiguous(*tensors: tuple[int, Any]) -> tuple[int, ...]:
    return tuple(i for i, t in tensors if t is not None and not t.is_contiguous())


def _row_norm_plan(x: Any, normalized_shape: Any, weight: Any, bias: Any, eps: Any, rms: bool, stats: bool
                   ) -> Plan | None:
    """The plan of a layer norm (``rms``: an RMS norm, no bias, whose eps None means the
    dtype's) over the trailing ``normalized_shape``: its output, and with ``stats`` the opmath
    statistics aten's overloads return (mean and rstd; an RMS norm returns rstd alone)."""
    n = _norm_inputs(x, normalized_shape, weight, bias)
    if n is None:
        return None
    outs = [Buffer(tuple(x.shape), x.dtype)]
    mean = rstd = None
    if stats:
        nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
        stat = tuple(x.shape[: x.dim() - nd]) + (1,) * nd
        outs += [Buffer(stat, opmath(x.dtype)), Buffer(stat, opmath(x.dtype))]
        mean, rstd = (Out(2), Out(1)) if rms else (Out(1), Out(2))
    m = x.numel() // n if n else 0
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    # a strided x (an attention head's view, a slice) is read in place where its rows allow
    rows = None if x.is_contiguous() else rows_layout(x, range(x.dim() - nd, x.dim()))
    launches = () if m == 0 or n == 0 else (_norm_launch(
        not x.is_cpu, In(0), None, In(2) if weight is not None else None, In(3) if bias is not None else None,
        Out(0), None, mean, rstd, m, n, float(default_rms_eps(x.dtype) if rms and eps is None else eps), rms,
        rows=rows),)
    result = (0,) if not stats else (0, 1) if rms else (0, 1, 2)
    copied = _contiguous((0, x if rows is None else None), (2, weight), (3, bias))
    return Plan(tuple(outs), launches, result=result, contiguous=copied)


def plan_native_layer_norm(x: Any, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> Plan | None:
    return _row_norm_plan(x, normalized_shape, weight, bias, eps, rms=False, stats=True)


def plan_fused_rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> Plan | None:
    return _row_norm_plan(x, normalized_shape, weight, None, eps, rms=True, stats=True)


def plan_layer_norm(x: Any, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5
                    ) -> Plan | None:
    """tritonjit::layer_norm: the output alone (the kernel stores no statistics)."""
    return _row_norm_plan(x, normalized_shape, weight, bias, eps, rms=False, stats=False)


def plan_rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> Plan | None:
    """tritonjit::rms_norm: the output alone (the kernel stores no statistics)."""
    return _row_norm_plan(x, normalized_shape, weight, None, eps, rms=True, stats=False)


def plan_native_group_norm(x: Any, weight: Any, bias: Any, N: int, C: int, HxW: int, group: int, eps: float
                           ) -> Plan | None:
    if (not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES or (x.is_cpu and x.dtype != torch.float32)
            or group <= 0 or C % group or x.numel() != N * C * HxW):
        return None
    for p in (weight, bias):
        if p is not None and (not isinstance(p, Tensor) or p.dim() != 1 or p.numel() != C or p.dtype != x.dtype
                              or p.device != x.device):
            return None
    # aten's group_norm gives its statistics in the input dtype (the kernel stores its fp32 ones converted)
    outs = (Buffer(tuple(x.shape), x.dtype), Buffer((N, group), x.dtype), Buffer((N, group), x.dtype))
    cpg = C // group
    launches = () if not (N * group and cpg * HxW) else (_norm_launch(
        not x.is_cpu, In(0), None, In(1) if weight is not None else None, In(2) if bias is not None else None,
        Out(0), None, Out(1), Out(2), N * group, cpg * HxW, float(eps), False, (cpg, HxW, group)),)
    return Plan(outs, launches, result=(0, 1, 2), contiguous=_contiguous((0, x), (1, weight), (2, bias)))


def plan_fused_add_rms_norm(x: Any, residual: Any, weight: Any, eps: float = 1e-6) -> Plan | None:
    """tritonjit::fused_add_rms_norm: (rms_norm(x + residual) * weight, x + residual)."""
    if not isinstance(x, Tensor) or x.dim() == 0 or not isinstance(residual, Tensor) or residual.shape != x.shape:
        return None
    n = _norm_inputs(x, (x.shape[-1],), weight)
    if n is None or residual.dtype != x.dtype or residual.device != x.device:
        return None
    outs = (Buffer(tuple(x.shape), x.dtype), Buffer(tuple(x.shape), x.dtype))
    m = x.numel() // n if n else 0
    launches = () if m == 0 or n == 0 else (_norm_launch(
        not x.is_cpu, In(0), In(1), In(2) if weight is not None else None, None, Out(0), Out(1), None, None,
        m, n, float(eps), True),)
    return Plan(outs, launches, result=(0, 1), contiguous=_contiguous((0, x), (1, residual), (2, weight)))


PLANNERS: dict[str, Any] = {
    "native_layer_norm": plan_native_layer_norm,
    "_fused_rms_norm": plan_fused_rms_norm,
    "native_group_norm": plan_native_group_norm,
}
