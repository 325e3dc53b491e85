"""aten::_grouped_mm: one matrix product per group (a mixture-of-experts layer's experts in
transformers 5.x), in one launch and without a host sync.

aten's four forms, by the operands' ranks (``offs``: int32 cumulative ends, one per group):

| self | mat2 | offs split | out |
| --- | --- | --- | --- |
| 2D (M, K) | 3D (G, K, N) | rows of self and out | (M, N) |
| 3D (G, M, K) | 2D (K, N) | columns of mat2 and out | (M, N) |
| 2D (M, K) | 2D (K, N) | K (the weight gradient's form) | (G, M, N) |
| 3D (G, M, K) | 3D (G, K, N) | - (a batched product) | (G, M, N) |

The group boundaries stay on the device, and each program computes one tile of one group
as a plain product (``matmul``'s main loop and epilogue, with the group's operands):

- where groups split rows (or columns), the grid covers every group's tiles (at most
  ``cdiv(M, BLOCK_M) + G`` row tiles, times the column tiles); each program reads ``offs``,
  counts the tiles of the groups before it (a cumulative sum of G values) and finds its own;
  the programs past the last group's tiles return at once. A group's last tile wraps its
  row (or column) index inside the group, so it reads only the group's own elements, and
  stores only its own rows;
- the K split and the batched form: a grid axis per group, the K loop over the group's slice.

``Tiles.tma`` reads a group's operands through TMA descriptors made by the program (where
the groups do not split a contiguous axis); measured, not the default (see :func:`config`).
Tiles of a group are walked in grouped order (``GROUP_M`` row tiles share the weight's
columns in L2). Rows (or columns) past the last offset are not written, as in aten. A
bias, another output dtype and float64 go to aten's kernel.

Under enable() a device call takes the C++ operator path (:func:`plan_grouped_mm`) and a
measured policy, as mm's does (:func:`aten_serves`): a call over the bounds of :func:`timed`
is timed once per layout against aten's kernel (a CUTLASS kernel on Hopper), and the faster
one serves that layout from then on.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import triton
import triton.language as tl

from . import _fallback, _policy
from . import _plan as P
from ._common import capturing, cdiv, jit, next_pow2
from .matmul import _descriptors, _epilogue, _mainloop, _precision, _strides3, _tile_of, dot_f32
from .matmul import tma_ok as tma_ok_mm

Tensor = torch.Tensor

#: the forms, by (self rank, mat2 rank)
_ROWS, _COLS, _KSPLIT, _BATCHED = 0, 1, 2, 3
_MODES = {(2, 3): _ROWS, (3, 2): _COLS, (2, 2): _KSPLIT, (3, 3): _BATCHED}
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _grouped_mm_kernel(a, b, out, offs, G, M, N, K, s_ag, s_am, s_ak, s_bg, s_bk, s_bn, s_og, s_om, s_on,
                       MODE: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr,
                       TMA: tl.constexpr, A_KC: tl.constexpr, B_KC: tl.constexpr, G_POW2: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    if MODE == 0 or MODE == 1:  # groups split the rows (MODE 0) or the columns (MODE 1)
        tile = tl.program_id(0)
        gi = tl.arange(0, G_POW2)
        length = M if MODE == 0 else N
        ends = tl.minimum(tl.load(offs + gi, mask=gi < G, other=0), length)
        starts = tl.minimum(tl.load(offs + gi - 1, mask=(gi > 0) & (gi < G), other=0), length)
        sizes = tl.maximum(ends - starts, 0)
        if MODE == 0:
            tiles = tl.cdiv(sizes, BLOCK_M) * num_n
        else:
            tiles = tl.cdiv(sizes, BLOCK_N) * num_m
        cum = tl.cumsum(tiles, 0)
        if tile < tl.sum(tiles, 0):
            g = tl.sum((cum <= tile).to(tl.int32), 0)  # the first group whose tiles reach past this one
            local = tile - tl.sum(tl.where(gi < g, tiles, 0), 0)
            start = tl.sum(tl.where(gi == g, starts, 0), 0).to(tl.int64)
            size = tl.sum(tl.where(gi == g, sizes, 0), 0)
            if MODE == 0:
                pid_m, pid_n = _tile_of(local, tl.cdiv(size, BLOCK_M), num_n, GROUP_M)
                ga = a + start * s_am
                gb = b + g.to(tl.int64) * s_bg
                go = out + start * s_om
                gm = size
                gn = N
            else:
                pid_m, pid_n = _tile_of(local, num_m, tl.cdiv(size, BLOCK_N), GROUP_M)
                ga = a + g.to(tl.int64) * s_ag
                gb = b + start * s_bn
                go = out + start * s_on
                gm = M
                gn = size
            a_desc, b_desc = _descriptors(ga, gb, gm, gn, K, s_am, s_ak, s_bk, s_bn, TMA, A_KC, B_KC,
                                          BLOCK_M, BLOCK_N, BLOCK_K)
            acc = _mainloop(ga, gb, a_desc, b_desc, gm, gn, K, s_am, s_ak, s_bk, s_bn, pid_m, pid_n, 0,
                            tl.cdiv(K, BLOCK_K), EVEN_K, PRECISION, DOT_F32, A_KC, B_KC, TMA,
                            BLOCK_M, BLOCK_N, BLOCK_K)
            _epilogue(acc, go, go, gm, gn, s_om, s_on, 0, 0, 1.0, 0.0, pid_m, pid_n, False, False, BLOCK_M, BLOCK_N)
    else:  # one grid row a group: its slice of K (MODE 2), or its own matrices (MODE 3)
        g = tl.program_id(1).to(tl.int64)
        pid_m, pid_n = _tile_of(tl.program_id(0), num_m, num_n, GROUP_M)
        if MODE == 2:
            k_lo = tl.load(offs + g - 1, mask=g > 0, other=0)
            k_hi = tl.minimum(tl.load(offs + g), K)
            gk = tl.maximum(k_hi - k_lo, 0)
            ga = a + k_lo.to(tl.int64) * s_ak
            gb = b + k_lo.to(tl.int64) * s_bk
        else:
            gk = K
            ga = a + g * s_ag
            gb = b + g * s_bg
        go = out + g * s_og
        a_desc, b_desc = _descriptors(ga, gb, M, N, gk, s_am, s_ak, s_bk, s_bn, TMA, A_KC, B_KC,
                                      BLOCK_M, BLOCK_N, BLOCK_K)
        acc = _mainloop(ga, gb, a_desc, b_desc, M, N, gk, s_am, s_ak, s_bk, s_bn, pid_m, pid_n, 0,
                        tl.cdiv(gk, BLOCK_K), EVEN_K, PRECISION, DOT_F32, A_KC, B_KC, TMA, BLOCK_M, BLOCK_N, BLOCK_K)
        _epilogue(acc, go, go, M, N, s_om, s_on, 0, 0, 1.0, 0.0, pid_m, pid_n, False, False, BLOCK_M, BLOCK_N)


_grouped_mm = jit(_grouped_mm_kernel)


def _refuse(why: str) -> NotImplementedError:
    return NotImplementedError(f"tritonjit_ops._grouped_mm: {why}; aten's kernel serves this call")


class _Form(NamedTuple):
    """A call's form (see the module's table), its group count and its product's M, N, K."""
    mode: int
    groups: int
    m: int
    n: int
    k: int


def _check(a: Any, b: Any, offs: Any, bias: Any, out_dtype: Any) -> _Form:
    """The form of a call, or NotImplementedError for aten's kernel; RuntimeError with aten's
    words where aten raises too."""
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
    m, n, k = a.shape[-2], b.shape[-1], a.shape[-1]
    if mode == _BATCHED:
        if offs is not None:
            raise _refuse("offs with two 3D operands")
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"_grouped_mm: batch sizes differ: self {tuple(a.shape)}, mat2 {tuple(b.shape)}")
        return _Form(mode, a.shape[0], m, n, k)
    if not isinstance(offs, Tensor) or offs.dim() != 1 or offs.device != a.device:
        raise _refuse("offs is not a 1D tensor on the operands' device")
    if offs.dtype != torch.int32:
        raise RuntimeError(f"_grouped_mm: offs must be int32, got {offs.dtype}")
    groups = {_ROWS: b.shape[0], _COLS: a.shape[0]}.get(mode, offs.shape[0])
    if offs.shape[0] != groups:
        raise RuntimeError(f"_grouped_mm: offs has {offs.shape[0]} groups, the 3D operand {groups}")
    return _Form(mode, groups, m, n, k)


class Tiles(NamedTuple):
    """A launch's tile: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, and
    whether the operands are read through TMA descriptors (where :func:`tma_ok`)."""
    bm: int
    bn: int
    bk: int
    group_m: int
    warps: int
    stages: int
    tma: bool = False


def tma_ok(form: _Form, a: Tensor, b: Tensor, sa: tuple[int, int, int], sb: tuple[int, int, int]) -> bool:
    """Whether TMA descriptors can read every group's operands (strides sa, sb: group, row,
    column): matmul's rule for the whole operands, and the axis the groups split is not the
    contiguous one (a group's first element is then 16-byte aligned too)."""
    aligned = a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    if not tma_ok_mm(a.element_size(), sa, sb, form.m, form.n, form.k, aligned):
        return False
    split_unit = {_ROWS: sa[1] == 1, _COLS: sb[2] == 1, _KSPLIT: sa[2] == 1 or sb[1] == 1}.get(form.mode, False)
    return not split_unit


def config(form: _Form, dtype: torch.dtype, on_gpu: bool) -> Tiles:
    """The tile of a call: on a GPU 128x256 (fp32: 128x128) with 128-byte K slices, 8 warps,
    3 stages, 8 row tiles in L2 order, narrowed to the problem; small tiles on the
    interpreter. On the H200 (bf16, Mixtral- and Qwen3-MoE-sized layers) this tile won
    against 6 others, other L2 orders and stage counts, and TMA reads (``tma``: faster in 3
    cases of 8, slower in the rest), so no call takes TMA by default."""
    if not on_gpu:
        return Tiles(32, 32, 16, 8, 4, 1)
    bk = 128 // dtype.itemsize
    bm, bn, warps, stages = (128, 256, 8, 3) if dtype.itemsize == 2 else (128, 128, 8, 3)
    bm = min(bm, max(16, next_pow2(form.m)))
    bn = min(bn, max(16, next_pow2(form.n)))
    return Tiles(bm, bn, bk, 8, warps if bm * bn >= 128 * 128 else 4, stages)


def launch_args(a: Tensor, b: Tensor, offs: Tensor | None, out: Tensor, form: _Form,
                on_gpu: bool) -> tuple[tuple[int, ...], tuple, dict[str, Any]]:
    """(grid, arguments, keyword arguments) of the kernel's launch for a call of ``form``."""
    mode, groups, m, n, k = form
    t = config(form, a.dtype, on_gpu)
    sa, sb, so = (_strides3(x.stride(), 0, 0) for x in (a, b, out))  # a 2D operand: group stride 0
    if mode == _ROWS:  # every group's row tiles (a group's last may be partial), times the column tiles
        grid: tuple[int, ...] = ((cdiv(m, t.bm) + groups) * cdiv(n, t.bn),)
    elif mode == _COLS:
        grid = ((cdiv(n, t.bn) + groups) * cdiv(m, t.bm),)
    else:
        grid = (cdiv(m, t.bm) * cdiv(n, t.bn), groups)
    args = (a, b, out, offs if offs is not None else a, groups, m, n, k, *sa, *sb, *so)
    tma = t.tma and on_gpu and tma_ok(form, a, b, sa, sb)
    meta = dict(MODE=mode, EVEN_K=mode != _KSPLIT and k % t.bk == 0, PRECISION=_precision(a.dtype),
                DOT_F32=dot_f32(a.device, a.dtype), TMA=tma, A_KC=sa[2] == 1, B_KC=sb[1] == 1,
                G_POW2=max(16, next_pow2(groups)),
                BLOCK_M=t.bm, BLOCK_N=t.bn, BLOCK_K=t.bk, GROUP_M=t.group_m, num_warps=t.warps,
                num_stages=t.stages)
    return grid, args, meta


def _out_shape(form: _Form) -> tuple[int, ...]:
    return (form.m, form.n) if form.mode in (_ROWS, _COLS) else (form.groups, form.m, form.n)


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor | None = None, bias: Tensor | None = None,
               out_dtype: torch.dtype | None = None) -> Tensor:
    """aten::_grouped_mm (see the module's table of forms), always on tritonjit's kernel (the
    direct entry; enable()'s route is :func:`routed`)."""
    form = _check(a, b, offs, bias, out_dtype)
    out = torch.empty(_out_shape(form), dtype=a.dtype, device=a.device)
    if out.numel() == 0:
        return out
    if form.mode == _KSPLIT and form.k == 0:
        return out.zero_()
    grid, args, meta = launch_args(a, b, offs, out, form, a.device.type != "cpu")
    _grouped_mm[grid](*args, **meta)
    return out


# ---- the measured policy: tritonjit's kernel or aten's, per layout ---------------------------------
#: On the H200 (bf16) tritonjit's kernel measured 0.88-1.01x aten's time on Qwen3-MoE-like
#: layers (128 small experts) and 0.95-1.21x on Mixtral-like ones (8 large experts): neither
#: kernel is faster everywhere, so each layout is timed, as mm's calls are against cuBLAS.
#: Products of at least this many multiply-adds are timed (16-bit; fp32 from
#: COMPARE_MIN_WORK_FP32, which has no tensor-core rate), and so are those with an output of
#: COMPARE_MIN_OUT elements or more (a weight gradient of a few tokens: a short K loop, the
#: stores are the cost; Mixtral-like at 8 tokens, 8 x 4096 x 14336 outputs, measured 1.29x
#: aten's time); the others are launch-bound and take tritonjit's kernel, with no timing in
#: the call (at 8 tokens, 0.57-1.02x aten's time in the forms that are not weight gradients)
COMPARE_MIN_WORK = 1 << 30
COMPARE_MIN_WORK_FP32 = 1 << 24
COMPARE_MIN_OUT = 1 << 24
#: tritonjit's kernel serves a layout where it took at most this multiple of aten's time
ATEN_MARGIN = 1.0
#: layouts decided, at most this many (the oldest are forgotten first)
MAX_DECISIONS = 1024
#: layout key -> whether aten's kernel serves it
_decided: dict[tuple, bool] = {}


def _aten_mode() -> str:
    """TRITONJIT_OPS_GROUPED_MM_ATEN: "auto" (default: measure), "never" (always tritonjit's
    kernel), "always" (aten's; for tests)."""
    return _policy.env_mode("TRITONJIT_OPS_GROUPED_MM_ATEN", ("auto", "never", "always"))


def work(form: _Form) -> int:
    """The multiply-adds of a call: each row (or column, or K slice) belongs to one group."""
    return form.m * form.n * form.k * (form.groups if form.mode == _BATCHED else 1)


def timed(form: _Form, dtype: torch.dtype) -> bool:
    """Whether a device call of this form is timed against aten's kernel (see COMPARE_MIN_WORK)."""
    bound = COMPARE_MIN_WORK if dtype in (torch.float16, torch.bfloat16) else COMPARE_MIN_WORK_FP32
    return work(form) >= bound or math.prod(_out_shape(form)) >= COMPARE_MIN_OUT


def _aten_takes(form: _Form, a: Tensor, b: Tensor, offs: Tensor | None) -> bool:
    """Whether aten's kernel can be timed on this call. Where the groups split an axis that is
    contiguous in an operand or in the output (the columns of the 3D x 2D form; K where an
    operand is K-contiguous; rows of a column-major self), it needs every group boundary on
    16 bytes and asserts on the device otherwise, which would end the process: there the
    boundaries are checked first (one sync, as the timing makes anyway)."""
    split_contiguous = {_ROWS: a.stride(-2) == 1, _COLS: True,
                        _KSPLIT: a.stride(-1) == 1 or b.stride(-2) == 1}.get(form.mode, False)
    if not split_contiguous or offs is None:
        return True
    return bool((offs % (16 // a.element_size()) == 0).all())


def _time(fn: Any) -> float:
    from triton.testing import do_bench

    return do_bench(fn, rep=50)


def aten_serves(form: _Form, a: Tensor, b: Tensor, offs: Tensor | None) -> bool:
    """Whether aten's kernel serves this call instead of tritonjit's (see ATEN_MARGIN): decided
    once per layout (device, dtype, form, dims, the operands' strides; not the group sizes,
    which vary per batch) by timing both on the call's own operands. Never on the CPU, never
    for a call under the bounds (:func:`timed`). Where the call cannot be timed (inside a
    CUDA graph capture; group boundaries aten's kernel does not take, see :func:`_aten_takes`)
    tritonjit's kernel serves it without a decision: the Python path asks again on the
    layout's next call, the C++ path keeps the plan it made (one launch of tritonjit's kernel)
    until ``tritonjit_ops.clear_policies()``, as it does for mm's calls planned in a capture."""
    mode = _aten_mode()
    if mode != "auto":
        return mode == "always"
    if a.device.type == "cpu":
        return False
    if not timed(form, a.dtype):
        return False
    key = (a.device, a.dtype, form, tuple(a.stride()), tuple(b.stride()))
    hit = _decided.get(key)
    if hit is not None:
        return hit
    aten = _fallback.aten_kernel("_grouped_mm")
    if aten is None or capturing(a.device) or not _aten_takes(form, a, b, offs):
        return False  # tritonjit's kernel, no decision (see the docstring)
    ours = _time(lambda: grouped_mm(a, b, offs))
    theirs = _time(lambda: aten(a, b, offs))
    if len(_decided) >= MAX_DECISIONS:
        del _decided[next(iter(_decided))]
    _decided[key] = ours > theirs * ATEN_MARGIN
    return _decided[key]


def clear_decisions() -> None:
    """Forget every layout's decision, the C++ path's plans made from them and the audit's
    record of the calls given to aten (tritonjit_ops.clear_policies calls this)."""
    from . import _native_ops

    _decided.clear()
    _native_ops.clear_plans(PLANNERS)
    _policy.clear(PLANNERS)


def routed(a: Tensor, b: Tensor, offs: Tensor | None = None, bias: Tensor | None = None,
           out_dtype: torch.dtype | None = None) -> Tensor:
    """enable()'s aten::_grouped_mm on the Python path: tritonjit's kernel, or a refusal (aten's
    kernel serves the call) where the measured policy chose aten's."""
    form = _check(a, b, offs, bias, out_dtype)
    if aten_serves(form, a, b, offs):
        _policy.note_aten("_grouped_mm", (a, b, offs))
        raise _refuse("aten's kernel measured faster on this layout")
    return grouped_mm(a, b, offs)


def plan_grouped_mm(a: Any, b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> P.Plan | None:
    """The C++ operator path's plan of a call: one launch into a new output, or aten's kernel
    where the measured policy chose it. None (the Python implementation decides, and raises
    aten's errors or refuses) for anything :func:`_check` does not pass, or an empty K split
    (a fill)."""
    try:
        form = _check(a, b, offs, bias, out_dtype)
    except (NotImplementedError, RuntimeError):
        return None
    shape = _out_shape(form)
    out = (P.Buffer(shape, a.dtype),)
    if math.prod(shape) == 0:
        return P.Plan(out, ())
    if form.mode == _KSPLIT and form.k == 0:
        return None
    if aten_serves(form, a, b, offs):
        _policy.note_aten("_grouped_mm", (a, b, offs))
        return P.aten_plan()
    # the launch of a contiguous output of that shape (the plan's buffer), its strides baked in
    grid, args, meta = launch_args(a, b, offs, torch.empty(shape, dtype=a.dtype, device="meta"), form,
                                   a.device.type != "cpu")
    refs = (P.In(0), P.In(1), P.Out(0), P.In(2) if offs is not None else P.In(0))
    warps, stages = meta.pop("num_warps"), meta.pop("num_stages")
    launch = P.launch(_grouped_mm, grid, *refs, *args[4:], num_warps=warps, num_stages=stages, **meta)
    return P.Plan(out, (launch,))


ATEN: dict[str, Any] = {"_grouped_mm": routed}
PLANNERS: dict[str, Any] = {"_grouped_mm": plan_grouped_mm}
