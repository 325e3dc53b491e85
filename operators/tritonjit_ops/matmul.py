"""mm, bmm, addmm and baddbmm in fp16, bf16 and fp32 with fp32 accumulation.

One batched kernel, ``_mm_kernel``, with grouped tile order (for L2 reuse), and two
ways to read the operands, chosen per launch by the constexpr ``TMA``:

- pointers (every layout): M/N edges wrap with a modulo instead of masking the loads
  (rows/columns past the edge read real elements and are never stored), the K loop is
  unmasked when BLOCK_K divides K. A stride equal to 1 is specialized to the constant
  1, so loads vectorize along whichever axis is contiguous: checked on sm_90 for a
  (M, K) and (K, M)-major and b (K, N) and (N, K)-major alike (16-byte cp.async);
- TMA descriptors (``tl.make_tensor_descriptor``; sm_90+, 16-bit dtypes, one unit
  stride per operand and 16-byte aligned rows): an operand whose M or N axis is the
  contiguous one is described transposed and its tile read back with ``.T``
  (``A_KC`` / ``B_KC`` say which axis of a / b has stride 1). Out-of-range tiles are
  zero-filled by the hardware, so no load is masked.

``PERSISTENT`` launches min(tiles, SMs) programs that walk the output tiles in one
loop that Triton flattens with the K loop (``tl.range(..., flatten=True)``), so the next
tile's loads overlap this tile's epilogue (checked in the sm_90 TTGIR: one pipelined loop).

``SPLIT_K`` > 1 splits the K loop over the grid's third axis: each split writes its
fp32 partial tile to a workspace, and ``_splitk_reduce_kernel`` sums the partials in
split order (deterministic: no atomics), scales, adds the bias and casts. It is for
skinny problems whose output tiles are too few to fill the device.

fp32 inputs use IEEE products unless torch allows TF32, matching torch.mm.

Which kernel, tile, warps, stages, grid and split a call gets is decided in one place,
:func:`choose`, which returns a :class:`Plan` (cached per exact problem, in a bounded
dict) that ``mm``/``bmm``/``(b)addmm`` launch and a C++ host path can reuse. On a GPU,
problems of at least ``TUNE_MIN_WORK`` multiply-adds, and skinny ones with a weight of
at least ``SKINNY_TUNE_MIN_NK`` elements, are autotuned through tritonjit
(``_mm_tuned``, once per key, the choice stored on disk): the key is (M, N, K)
rounded up to powers of two, the precision, which axis of a and b is contiguous
(``A_KC``, ``B_KC``), whether it is batched (a bmm's tiles times its batch fill the device
sooner) and the dtypes. ``_prune`` leaves the configs of the problem's
regime: skinny (M <= 64: BLOCK_M 16/32/64 matched to M, narrow N tiles, long K
tiles) or large (the Hopper tiles, two persistent; TMA configs when
``TRITONJIT_MM_TMA=1``, which the key also records). Smaller problems use
``_default_config`` untuned; the CPU interpreter uses small tiles. ``candidates`` and
``signatures`` list the variants a call may launch, for a warm-up to compile first.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import torch
import triton
import triton.language as tl

from . import _plan as P
from . import _policy
from ._common import capturing, cdiv, check_same_device, jit, next_pow2
from ._layout import extent

Tensor = torch.Tensor
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_F32 = torch.float32


@triton.jit
def _tile_of(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of a tile index in grouped order (GROUP_M row tiles share B in L2)."""
    group = GROUP_M * num_n
    first_m = (tile // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + ((tile % group) % size_m), (tile % group) // size_m


@triton.jit
def _mainloop(a, b, a_desc, b_desc, M, N, K, s_am, s_ak, s_bk, s_bn, pid_m, pid_n, k_lo, k_hi,
              EVEN_K: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr, A_KC: tl.constexpr,
              B_KC: tl.constexpr, TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, IDX64: tl.constexpr = False):
    """fp32 sum over K tiles [k_lo, k_hi) of one output tile; a, b point at this batch.
    IDX64: an operand spans 2**31 elements or more, so offsets are computed in int64."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if TMA:
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for kt in range(k_lo, k_hi):
            off_k = kt * BLOCK_K
            if A_KC:
                xa = a_desc.load([off_m, off_k])
            else:
                xa = a_desc.load([off_k, off_m]).T
            if B_KC:
                xb = b_desc.load([off_n, off_k]).T
            else:
                xb = b_desc.load([off_k, off_n])
            if DOT_F32:
                xa = xa.to(tl.float32)
                xb = xb.to(tl.float32)
            acc = tl.dot(xa, xb, acc, input_precision=PRECISION)
    else:
        # rows/columns past the edge wrap: they read real elements and are masked at the store
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
        rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
        rk = k_lo * BLOCK_K + tl.arange(0, BLOCK_K)
        if IDX64:
            ram64 = ram.to(tl.int64)
            rk64 = rk.to(tl.int64)
            pa = a + ram64[:, None] * s_am + rk64[None, :] * s_ak
            pb = b + rk64[:, None] * s_bk + rbn.to(tl.int64)[None, :] * s_bn
            step_a = tl.cast(s_ak, tl.int64) * BLOCK_K  # s_ak may be the constexpr 1
            step_b = tl.cast(s_bk, tl.int64) * BLOCK_K
        else:
            pa = a + ram[:, None] * s_am + rk[None, :] * s_ak
            pb = b + rk[:, None] * s_bk + rbn[None, :] * s_bn
            step_a = BLOCK_K * s_ak
            step_b = BLOCK_K * s_bk
        for kt in range(k_lo, k_hi):
            if EVEN_K:
                xa = tl.load(pa)
                xb = tl.load(pb)
            else:
                kk = kt * BLOCK_K + tl.arange(0, BLOCK_K)
                xa = tl.load(pa, mask=(kk < K)[None, :], other=0.0)
                xb = tl.load(pb, mask=(kk < K)[:, None], other=0.0)
            if DOT_F32:  # Triton's interpreter multiplies bf16 tiles wrongly; fp32 is exact for them
                xa = xa.to(tl.float32)
                xb = xb.to(tl.float32)
            acc = tl.dot(xa, xb, acc, input_precision=PRECISION)
            pa += step_a
            pb += step_b
    return acc


@triton.jit
def _epilogue(acc, c, bias, M, N, s_cm, s_cn, s_im, s_in, alpha, beta, pid_m, pid_n,
              HAS_BIAS: tl.constexpr, SCALE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              IDX64: tl.constexpr = False):
    """c = alpha * acc (+ beta * bias), cast to c's dtype; c points at this batch (or split)."""
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    if IDX64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    if SCALE:
        acc = acc * alpha
    if HAS_BIAS:  # in int64: the bias's strides are no part of a plan's key (a view of a larger tensor)
        bo = rm.to(tl.int64)[:, None] * s_im + rn.to(tl.int64)[None, :] * s_in
        bv = tl.load(bias + bo, mask=mask, other=0.0).to(tl.float32)
        acc = acc + beta * bv
    tl.store(c + rm[:, None] * s_cm + rn[None, :] * s_cn, acc.to(c.dtype.element_ty), mask=mask)


@triton.jit
def _descriptors(a, b, M, N, K, s_am, s_ak, s_bk, s_bn, TMA: tl.constexpr, A_KC: tl.constexpr,
                 B_KC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """TMA descriptors of a and b (``TMA``; the hardware zero-fills the tiles past their
    edges; ``A_KC``/``B_KC``: the axis of unit stride), or the pointers themselves."""
    if TMA:
        if A_KC:
            a_desc = tl.make_tensor_descriptor(a, [M, K], [s_am, 1], [BLOCK_M, BLOCK_K])
        else:
            a_desc = tl.make_tensor_descriptor(a, [K, M], [s_ak, 1], [BLOCK_K, BLOCK_M])
        if B_KC:
            b_desc = tl.make_tensor_descriptor(b, [N, K], [s_bn, 1], [BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b, [K, N], [s_bk, 1], [BLOCK_K, BLOCK_N])
    else:
        a_desc = a
        b_desc = b
    return a_desc, b_desc


@triton.jit
def _mm_kernel(
    a, b, c, bias, M, N, K,
    s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn, s_ib, s_im, s_in,
    alpha, beta,
    HAS_BIAS: tl.constexpr, SCALE: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr,
    DOT_F32: tl.constexpr, A_KC: tl.constexpr, B_KC: tl.constexpr, TMA: tl.constexpr, SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr, IDX64: tl.constexpr = False,
):
    batch = tl.program_id(1).to(tl.int64)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    a += batch * s_ab
    b += batch * s_bb
    if HAS_BIAS:  # baddbmm's input: a bias per batch (s_ib 0: one for all, as addmm's)
        bias += batch * s_ib
    a_desc, b_desc = _descriptors(a, b, M, N, K, s_am, s_ak, s_bk, s_bn, TMA, A_KC, B_KC, BLOCK_M, BLOCK_N, BLOCK_K)
    if PERSISTENT:  # grid: at most one program per SM, each walks tiles; the tile loops flattened
        c += batch * s_cb
        for tile in tl.range(tl.program_id(0), num_m * num_n, tl.num_programs(0), flatten=True):
            pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
            acc = _mainloop(a, b, a_desc, b_desc, M, N, K, s_am, s_ak, s_bk, s_bn, pid_m, pid_n, 0, k_tiles,
                            EVEN_K, PRECISION, DOT_F32, A_KC, B_KC, TMA, BLOCK_M, BLOCK_N, BLOCK_K, IDX64)
            _epilogue(acc, c, bias, M, N, s_cm, s_cn, s_im, s_in, alpha, beta, pid_m, pid_n,
                      HAS_BIAS, SCALE, BLOCK_M, BLOCK_N, IDX64)
    else:
        pid_m, pid_n = _tile_of(tl.program_id(0), num_m, num_n, GROUP_M)
        if SPLIT_K == 1:
            k_lo = 0
            k_hi = k_tiles
            c += batch * s_cb
        else:  # this split's share of the K tiles, its fp32 partial to slice (batch, split) of c
            per = tl.cdiv(k_tiles, SPLIT_K)
            k_lo = tl.minimum(tl.program_id(2) * per, k_tiles)
            k_hi = tl.minimum(k_lo + per, k_tiles)
            c += (batch * SPLIT_K + tl.program_id(2)) * s_cb
        acc = _mainloop(a, b, a_desc, b_desc, M, N, K, s_am, s_ak, s_bk, s_bn, pid_m, pid_n, k_lo, k_hi,
                        EVEN_K, PRECISION, DOT_F32, A_KC, B_KC, TMA, BLOCK_M, BLOCK_N, BLOCK_K, IDX64)
        _epilogue(acc, c, bias, M, N, s_cm, s_cn, s_im, s_in, alpha, beta, pid_m, pid_n,
                  HAS_BIAS, SCALE, BLOCK_M, BLOCK_N, IDX64)


@triton.jit
def _splitk_reduce_kernel(
    ws, c, bias, M, N, s_cb, s_cm, s_cn, s_ib, s_im, s_in, alpha, beta,
    HAS_BIAS: tl.constexpr, SCALE: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
):
    """c[b] = alpha * sum_s ws[b, s] (+ beta * bias), the splits summed in order."""
    batch = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mn = M * N
    mask = offs < mn
    base = ws + batch * SPLIT_K * mn + offs
    acc = tl.load(base, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(base + s * mn, mask=mask, other=0.0)
    m = offs // N
    n = offs % N
    if SCALE:
        acc = acc * alpha
    if HAS_BIAS:
        acc += beta * tl.load(bias + batch * s_ib + m * s_im + n * s_in, mask=mask, other=0.0).to(tl.float32)
    tl.store(c + batch * s_cb + m * s_cm + n * s_cn, acc.to(c.dtype.element_ty), mask=mask)


_mm = jit(_mm_kernel)
_splitk_reduce = jit(_splitk_reduce_kernel)

#: problems with fewer multiply-adds (batch * M * N * K) than this are not tuned...
TUNE_MIN_WORK = 1 << 24
#: ...unless skinny with a b operand of at least this many elements (1024 x 1024)
SKINNY_TUNE_MIN_NK = 1 << 20
#: skinny: M at most this takes the skinny configs (BLOCK_M 16..64, narrow N tiles, long K tiles)
SKINNY_M = 64
#: medium: M at most this also tries the skinny BLOCK_M 64 configs beside the large ones
MEDIUM_M = 256
#: split-K (skinny problems only): when fewer output tiles than SMS_FRACTION of the SMs, and
#: K at least SPLIT_MIN_K, K is split so each split keeps at least SPLIT_MIN_CHUNK of it (a
#: split costs a second launch and a workspace: at K = 1024 one launch is likely as fast)
SPLIT_MIN_K = 2048
SPLIT_MIN_CHUNK = 256
SPLIT_MAX = 8
SMS_FRACTION = 0.5
#: elements per program of the split-K reduce kernel
REDUCE_BLOCK = 1024
#: bounded plan cache (cleared when full; a model uses a few dozen shapes)
PLAN_CACHE_SIZE = 4096


def _env_on(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in ("0", "false", "no", "off", "")


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, tma: bool = False,
         persistent: bool = False) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "TMA": tma,
                          "PERSISTENT": persistent}, num_warps=warps, num_stages=stages)


# ---- the tuned configs, by regime and dtype (16-bit: fp16/bf16; 32: fp32) ---------------------
#: large problems (M > SKINNY_M), 16-bit: BLOCK_K 64 (128 bytes); _default_config's first. The
#: persistent ones launch at most one program per SM, each walking tiles in one flattened loop
#: (the next tile's loads overlap this one's epilogue: pays where K is short, e.g. 1024)
LARGE_16 = [
    _cfg(128, 256, 64, 8, 3), _cfg(64, 64, 64, 4, 4), _cfg(128, 128, 64, 4, 4), _cfg(256, 128, 64, 8, 3),
    _cfg(64, 128, 64, 4, 4), _cfg(128, 64, 64, 4, 4), _cfg(128, 128, 64, 8, 4), _cfg(64, 256, 64, 4, 4),
    _cfg(128, 256, 64, 8, 3, persistent=True), _cfg(128, 128, 64, 8, 4, persistent=True),
]
#: TMA-descriptor variants of the large 16-bit tiles (only with TRITONJIT_MM_TMA=1)
LARGE_16_TMA = [
    _cfg(128, 256, 64, 8, 3, True), _cfg(256, 128, 64, 8, 3, True), _cfg(128, 128, 64, 8, 4, True),
    _cfg(128, 128, 64, 4, 4, True), _cfg(64, 128, 64, 4, 4, True),
    _cfg(128, 256, 64, 8, 3, True, True), _cfg(128, 128, 64, 8, 4, True, True),
]
#: large problems, fp32: BLOCK_K 32 (128 bytes)
LARGE_32 = [_cfg(128, 128, 32, 8, 3), _cfg(64, 128, 32, 4, 4), _cfg(64, 64, 32, 4, 4), _cfg(128, 64, 32, 4, 4)]
#: skinny (BLOCK_N, BLOCK_K bytes, warps, stages): long K tiles keep many loads in flight
_SKINNY_SHAPES = [(64, 256, 4, 4), (32, 512, 4, 4), (64, 512, 4, 3), (128, 256, 4, 3), (32, 256, 4, 6),
                  (128, 128, 4, 4), (16, 512, 4, 4)]
SKINNY_16 = [_cfg(bm, bn, nbytes // 2, w, s) for bm in (16, 32, 64) for bn, nbytes, w, s in _SKINNY_SHAPES]
SKINNY_32 = [_cfg(bm, bn, nbytes // 4, w, s) for bm in (16, 32, 64) for bn, nbytes, w, s in _SKINNY_SHAPES]
MM_CONFIGS = LARGE_16 + LARGE_16_TMA + LARGE_32 + SKINNY_16 + SKINNY_32
_FAMILY = {}
for _name, _family in (("large16", LARGE_16), ("tma16", LARGE_16_TMA), ("large32", LARGE_32),
                       ("skinny16", SKINNY_16), ("skinny32", SKINNY_32)):
    for _c in _family:
        _FAMILY[id(_c)] = _name


#: shared memory the pipelined tiles may use (sm_90 allows 227 KB a block; leave room for the epilogue)
SMEM_BUDGET = 200 * 1024


def _stages(bm: int, bn: int, bk: int, size: int, most: int) -> int:
    """num_stages: at most `most`, as many as SMEM_BUDGET holds (at least 2)."""
    return max(2, min(most, SMEM_BUDGET // ((bm + bn) * bk * size)))


def _skinny_bm(m: int) -> int:
    return min(max(16, next_pow2(m)), SKINNY_M)


def _sms(device: Any) -> int:
    """Streaming multiprocessors (or the backend's compute units) of a device; 132 (an
    H100/H200) where torch cannot tell."""
    n = _SMS.get(device)
    if n is None:
        n = 132
        try:
            mod = getattr(torch, torch.device(device).type, None)
            props = mod.get_device_properties(device) if mod is not None else None
            n = int(getattr(props, "multi_processor_count", 0) or 132)
        except Exception:
            pass
        _SMS[device] = n
    return n


_SMS: dict = {}


def tma_enabled() -> bool:
    """TMA-descriptor configs take part in tuning only with TRITONJIT_MM_TMA=1 (until the
    H200 figures say they pay)."""
    return _env_on("TRITONJIT_MM_TMA", "0")


def _prune(configs: list, nargs: dict, **kwargs) -> list:
    """early_config_prune of _mm_tuned: keep the configs of the problem's regime and dtype.

    - skinny (M <= SKINNY_M): the skinny configs of the dtype with BLOCK_M = M rounded up
      to a power of two (16..64), in the order of _SKINNY_SHAPES;
    - large: the large configs of the dtype (TMA ones only with TRITONJIT_MM_TMA=1 and a
      layout TMA can read), plus the skinny BLOCK_M 64 ones when M <= MEDIUM_M and the
      large tiles make fewer programs than the SMs, whose tile is not much larger than the problem (BLOCK_M <=
      next_pow2(M), BLOCK_N <= next_pow2(N); the smallest tile always passes) and that make
      at least half of min(most programs any config makes, 128) programs.

    Programs are tiles times the batch (a bmm's grid): 64 attention heads of 256 x 256 scores
    fill the device with the large tiles, where one matrix's 4 tiles would not (counting
    tiles alone left only 64 x 32 tiles with K tiles of 256, 1.69x eager at K = 64 on an H100).

    The first config kept is the one used untuned (TRITONJIT_AUTOTUNE=0, the interpreter).
    """
    m, n = nargs["M"], nargs["N"]
    size = nargs["a"].element_size()
    wide = size < 4
    batch = nargs["a"].shape[0] if nargs["a"].dim() == 3 else 1

    def programs(c: triton.Config) -> int:
        return _tiles(c, m, n) * batch

    if m <= SKINNY_M:
        fam = "skinny16" if wide else "skinny32"
        bm = _skinny_bm(m)
        mine = [c for c in configs if _FAMILY.get(id(c)) == fam and c.kwargs["BLOCK_M"] == bm]
        if mine:
            return mine
    fams = {"large16"} if wide else {"large32"}
    if wide and tma_enabled() and _tma_layout_ok(nargs, kwargs):
        fams.add("tma16")
    mine = [c for c in configs if _FAMILY.get(id(c)) in fams]
    if m <= MEDIUM_M and max(programs(c) for c in mine) < _sms(nargs["a"].device):
        # too few tiles to fill the device: the skinny BLOCK_M 64 tiles make more programs
        skinny = "skinny16" if wide else "skinny32"
        seen = {_shape_key(c) for c in mine}
        mine += [c for c in configs if _FAMILY.get(id(c)) == skinny and c.kwargs["BLOCK_M"] == SKINNY_M
                 and _shape_key(c) not in seen]
    mine = mine or list(configs)
    min_m = min(c.kwargs["BLOCK_M"] for c in mine)
    min_n = min(c.kwargs["BLOCK_N"] for c in mine)
    fits = [c for c in mine if c.kwargs["BLOCK_M"] <= max(min_m, next_pow2(m))
            and c.kwargs["BLOCK_N"] <= max(min_n, next_pow2(n))] or mine[-1:]

    enough = min(max(programs(c) for c in fits), 128) / 2
    return [c for c in fits if programs(c) >= enough]


def _tiles(c: triton.Config, m: int, n: int) -> int:
    return cdiv(m, c.kwargs["BLOCK_M"]) * cdiv(n, c.kwargs["BLOCK_N"])


def _shape_key(c: triton.Config) -> tuple:
    return tuple(sorted(c.kwargs.items())) + (c.num_warps, c.num_stages)


def _tma_layout_ok(nargs: dict, kwargs: dict) -> bool:
    """Whether the tuned problem's operands can be read through TMA descriptors."""
    a, b = nargs["a"], nargs["b"]
    sa = (nargs["s_ab"], nargs["s_am"], nargs["s_ak"])
    sb = (nargs["s_bb"], nargs["s_bk"], nargs["s_bn"])
    aligned = a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    return tma_ok(a.element_size(), sa, sb, nargs["M"], nargs["N"], nargs["K"], aligned)


def tma_ok(size: int, sa: Sequence[int], sb: Sequence[int], m: int, n: int, k: int, aligned: bool) -> bool:
    """TMA descriptors can read a (strides sa = [batch,] M, K) and b (sb = [batch,] K, N):
    16-bit elements, base pointers 16-byte aligned, one unit stride per operand, and the
    other strides (batch included) multiples of 16 bytes."""
    if size != 2 or not aligned:
        return False
    sa, sb = _strides3(sa, m, k), _strides3(sb, k, n)

    def ok(s_batch: int, s_x: int, s_k: int) -> bool:
        if s_k == 1:
            lead = s_x
        elif s_x == 1:
            lead = s_k
        else:
            return False
        return lead * size % 16 == 0 and lead > 0 and s_batch * size % 16 == 0

    return ok(sa[0], sa[1], sa[2]) and ok(sb[0], sb[2], sb[1])


def _even_k(a: dict) -> bool:
    return a["K"] % a["BLOCK_K"] == 0


def _precision_key(precision: str) -> tuple:
    """PRECISION in the tuning key, with whether TMA configs are candidates: a choice made
    without them is not reused when they are (TRITONJIT_MM_TMA=1), nor the other way."""
    return precision, "tma" if tma_enabled() else ""


def _batched_key(s_cb: int) -> int:
    """Whether the output has a batch stride (a bmm or baddbmm): _prune counts a batched
    problem's programs over its batch, so an mm and a bmm of one (M, N, K) are tuned apart."""
    return int(s_cb != 0)


_mm_tuned = jit(
    triton.autotune(configs=MM_CONFIGS, key=["M", "N", "K", "PRECISION", "A_KC", "B_KC", "s_cb"],
                    prune_configs_by={"early_config_prune": _prune})(
        triton.heuristics({"EVEN_K": _even_k})(_mm_kernel)),
    # M (the tokens) varies per call and is bucketed; N and K are a model's weight shapes, few
    # and fixed: tuned exactly (a config tuned for 8192x1024x4096 lost 15% on 8192x768x3072)
    key_buckets={"M": "log2", "PRECISION": _precision_key, "s_cb": _batched_key},
)


# ---- plans ------------------------------------------------------------------------------------
class Plan:
    """How one problem is launched: ``kernel[grid](*args, **meta)`` (``meta`` holds every
    constexpr and num_warps/num_stages), and, when ``split_k`` > 1, a workspace of
    ``workspace`` fp32 elements (``batch * split_k`` slices of M x N, contiguous) that the
    kernel writes in place of c, then ``reduce_kernel[reduce_grid](..., **reduce_meta)``.

    ``source`` says where the config came from: "tuned", "default", "interpreter",
    "split" or "explicit" (``make_plan``)."""

    __slots__ = ("kernel", "grid", "meta", "split_k", "workspace", "reduce_kernel", "reduce_grid",
                 "reduce_meta", "source")

    def __init__(self, kernel: Any, grid: tuple, meta: dict, split_k: int = 1, workspace: int = 0,
                 reduce_kernel: Any = None, reduce_grid: tuple = (), reduce_meta: dict | None = None,
                 source: str = "") -> None:
        self.kernel, self.grid, self.meta = kernel, grid, meta
        self.split_k, self.workspace = split_k, workspace
        self.reduce_kernel, self.reduce_grid = reduce_kernel, reduce_grid
        self.reduce_meta: dict = reduce_meta if reduce_meta is not None else {}
        self.source = source

    @property
    def config(self) -> tuple:
        """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, TMA, PERSISTENT, SPLIT_K)"""
        m = self.meta
        return (m["BLOCK_M"], m["BLOCK_N"], m["BLOCK_K"], m["num_warps"], m["num_stages"], m["TMA"],
                m["PERSISTENT"], self.split_k)

    def describe(self) -> str:
        bm, bn, bk, w, s, tma, persistent, sk = self.config
        text = f"{bm}x{bn}x{bk} w{w} s{s}"
        if tma:
            text += " tma"
        if persistent:
            text += " persistent"
        if sk > 1:
            text += f" splitk{sk}"
        return f"{text} ({self.source})"

    def to_dict(self) -> dict:
        """Plain data for another host path (C++): kernel names and every launch value."""
        out = {"kernel": self.kernel.name, "grid": list(self.grid), "meta": dict(self.meta),
               "split_k": self.split_k, "workspace": self.workspace, "source": self.source}
        if self.reduce_kernel is not None:
            out["reduce"] = {"kernel": self.reduce_kernel.name, "grid": list(self.reduce_grid),
                             "meta": dict(self.reduce_meta)}
        return out

    def __repr__(self) -> str:
        return f"<matmul.Plan {self.describe()} grid={self.grid}>"


_plans: dict[tuple, Plan] = {}


def clear_plans() -> None:
    """Forget every cached plan, here and on the C++ path (the tuned configs stay stored; the
    next call asks again), and the audit's record of the calls _aten_is_faster gave to aten
    (see _policy.py)."""
    from . import _native_ops

    _plans.clear()
    _native_ops.clear_plans(PLANNERS)
    _policy.clear(PLANNERS)


def dot_f32(device: Any, dtype: torch.dtype) -> bool:
    """DOT_F32 of the product kernels: Triton's interpreter (the CPU) multiplies bf16 tiles
    wrongly, so they are multiplied as fp32 there (exact for bf16 values)."""
    return torch.device(device).type == "cpu" and dtype == torch.bfloat16


def _precision(dtype: torch.dtype) -> str:
    if dtype != torch.float32:
        return "tf32"  # ignored for 16-bit inputs
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"


def _strides3(s: Sequence[int], rows: int, cols: int) -> tuple[int, int, int]:
    """(batch, row, col) strides from 2 (one matrix: batch stride 0) or 3 given."""
    if len(s) == 3:
        return int(s[0]), int(s[1]), int(s[2])
    return 0, int(s[0]), int(s[1])


def _idx64(m: int, n: int, k: int, sa: Sequence[int], sb: Sequence[int]) -> bool:
    """Whether one matrix of a, b or c (contiguous m x n) spans 2**31 elements or more from its
    base: the kernel's offsets are then int64 (IDX64; a logits matmul of 16k tokens by a 128k
    vocabulary writes 2**31 elements). Batch offsets are int64 always."""
    return max(extent((m, k), sa[-2:]), extent((k, n), sb[-2:]), m * n) > 2**31 - 1


def _tuned(device: Any, work: int, weight: int = 0, skinny: bool = False) -> bool:
    """Whether a problem is autotuned: on a device, with at least TUNE_MIN_WORK
    multiply-adds, or skinny (M <= SKINNY_M) with a b operand (``weight`` = batch * K * N
    elements) of at least SKINNY_TUNE_MIN_NK: decode calls it at every step. The
    interpreter never tunes (its tiles stay small)."""
    if torch.device(device).type == "cpu":
        return False
    return work >= TUNE_MIN_WORK or (skinny and weight >= SKINNY_TUNE_MIN_NK)


def choose(m: int, n: int, k: int, batch: int, dtype: torch.dtype, a_strides: Sequence[int],
           b_strides: Sequence[int], has_bias: bool, device: Any, *, scale: bool = False, aligned: bool = True,
           operands: tuple | None = None) -> Plan:
    """The launch plan of ``c[batch, m, n] = a[batch, m, k] @ b[batch, k, n]`` (+ bias).

    ``a_strides``/``b_strides``: (row, col) or (batch, row, col) element strides;
    ``has_bias``: an addmm bias is added; ``scale``: alpha != 1; ``aligned``: every base
    pointer is 16-byte aligned (TMA descriptors need it); ``device``: a torch.device (or
    its string). Cached per exact problem; a problem that is tuned and not yet tuned on
    this device is tuned now (on ``operands`` = (a, b, c, bias) when given, else on
    scratch tensors of the given strides), once, and the choice stored on disk.
    """
    key = (m, n, k, batch, dtype, tuple(a_strides), tuple(b_strides), has_bias, scale, aligned, device,
           _precision(dtype))
    plan = _plans.get(key)
    if plan is not None:
        return plan
    p = _Problem(m, n, k, batch, dtype, a_strides, b_strides, has_bias, device, scale, aligned)
    cfg, split, source = p.untuned()
    if cfg is None and capturing(p.dev):  # tuning launches and synchronizes: not inside a CUDA graph
        cfg, source = _default_config(dtype, m, n, k, batch, _sms(p.dev)), "default (first met in a capture)"
        return p.plan(cfg, split, source)  # not cached: the next call outside a capture tunes
    if cfg is None:
        cfg, source = _tuned_config(m, n, k, batch, dtype, p.sa, p.sb, p.dev, p.base, operands), "tuned"
    plan = p.plan(cfg, split, source)
    if len(_plans) >= PLAN_CACHE_SIZE:
        _plans.clear()
    _plans[key] = plan
    return plan


class _Problem:
    """One problem's facts, and the decisions that need no tuning."""

    def __init__(self, m: int, n: int, k: int, batch: int, dtype: torch.dtype, a_strides: Sequence[int],
                 b_strides: Sequence[int], has_bias: bool, device: Any, scale: bool, aligned: bool) -> None:
        self.m, self.n, self.k, self.batch, self.dtype, self.aligned = m, n, k, batch, dtype, aligned
        self.sa = _strides3(a_strides, m, k)
        self.sb = _strides3(b_strides, k, n)
        self.dev = torch.device(device)
        self.base = dict(HAS_BIAS=has_bias, SCALE=scale, PRECISION=_precision(dtype),
                         DOT_F32=dot_f32(self.dev, dtype),
                         A_KC=self.sa[2] == 1, B_KC=self.sb[1] == 1)
        if _idx64(m, n, k, self.sa, self.sb):  # only then: every other variant keeps its signature
            self.base["IDX64"] = True

    def untuned(self) -> tuple[tuple | None, int, str]:
        """(config, split, source) where no tuning is needed; config None where the tuner decides."""
        m, n, k, batch, dev = self.m, self.n, self.k, self.batch, self.dev
        work = batch * m * n * k
        tuned = _tuned(dev, work, batch * n * k, m <= SKINNY_M)
        if dev.type == "cpu" and not tuned:  # the interpreter: small tiles, no tuning
            bm, bn, bk = (max(16, min(32, next_pow2(d))) for d in (m, n, k))
            split = _split_k(cdiv(m, bm) * cdiv(n, bn) * batch, k, bk, 4, cpu=True)
            return (bm, bn, bk, 1, 1, False, False), split, "interpreter"
        cfg = _default_config(self.dtype, m, n, k, batch, _sms(dev))
        if m <= SKINNY_M and _env_on("TRITONJIT_MM_SPLIT_K", "1"):
            split = _split_k(cdiv(m, cfg[0]) * cdiv(n, cfg[1]) * batch, k, cfg[2], _sms(dev))
            if split > 1:
                return cfg, split, "split"
        if tuned:
            return None, 1, "tuned"
        return cfg, 1, "default"

    def plan(self, cfg: tuple, split: int, source: str) -> Plan:
        if cfg[5] and not tma_ok(self.dtype.itemsize, self.sa, self.sb, self.m, self.n, self.k, self.aligned):
            cfg = cfg[:5] + (False,) + cfg[6:]  # tuned on an operand TMA could read; this one it cannot
        sms = _sms(self.dev) if self.dev.type != "cpu" else 4
        return _make(self.m, self.n, self.k, self.batch, self.base, cfg, split, source, sms)


def candidates(a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None = None, scale: bool = False) -> list[Plan]:
    """The plans a launch on operands a (M, K), b (K, N), c (M, N), or batched (B, M, K) ...,
    may take: the one chosen without tuning, or one per config the tuner would time (what
    a warm-up compiles; see :func:`signatures`)."""
    bsz, m, k, n = _dims(a, b)
    aligned = (a.data_ptr() | b.data_ptr()) & 15 == 0
    p = _Problem(m, n, k, bsz, a.dtype, a.stride(), b.stride(), bias is not None, a.device, scale, aligned)
    cfg, split, source = p.untuned()
    if cfg is not None:
        return [p.plan(cfg, split, source)]
    nargs = dict(zip(_mm_kernel.arg_names, _args(a, b, c, bias, m, n, k, 1.0, 0.0)))
    configs = _prune(MM_CONFIGS, nargs, **p.base, SPLIT_K=1)
    return [p.plan(_config_tuple(cf), 1, "tuned") for cf in configs]


def _config_tuple(c: triton.Config) -> tuple:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, TMA, PERSISTENT) of a config."""
    kw = c.kwargs
    return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], c.num_warps, c.num_stages, bool(kw["TMA"]),
            bool(kw["PERSISTENT"]))


def signatures(plan: Plan, a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None = None) -> list[tuple]:
    """(kernel, signature, options) of each launch of ``plan`` on these operands (2-D or
    3-D, as mm/addmm or bmm pass them): what a warm-up compiles."""
    bsz, m, k, n = _dims(a, b)
    meta = dict(plan.meta)
    opts = {"num_warps": meta.pop("num_warps"), "num_stages": meta.pop("num_stages")}
    if plan.split_k == 1:
        return [(_mm, _mm.signature(*_args(a, b, c, bias, m, n, k, 1.0, 1.0), **meta), opts)]
    ws = torch.empty((bsz * plan.split_k, m, n), dtype=torch.float32, device=a.device)
    rmeta = dict(plan.reduce_meta)
    ropts = {"num_warps": rmeta.pop("num_warps")}
    return [(_mm, _mm.signature(*_args(a, b, ws, None, m, n, k, 1.0, 1.0), **meta), opts),
            (_splitk_reduce, _splitk_reduce.signature(*_reduce_args(ws, c, bias, m, n, 1.0, 1.0), **rmeta), ropts)]


def _split_k(tiles: int, k: int, bk: int, sms: int, cpu: bool = False) -> int:
    """How many ways to split K: enough to give about `sms` programs when the output tiles
    fill less than SMS_FRACTION of them, each split keeping SPLIT_MIN_CHUNK of K."""
    min_k, chunk = (512, 128) if cpu else (SPLIT_MIN_K, SPLIT_MIN_CHUNK)
    if k < min_k or tiles >= sms * SMS_FRACTION:
        return 1
    s = min(SPLIT_MAX, max(2, sms // max(tiles, 1)), k // max(chunk, bk))
    if s <= 1:
        return 1
    k_tiles = cdiv(k, bk)
    return cdiv(k_tiles, cdiv(k_tiles, s))  # as many splits as get K tiles (no empty split)


def _default_config(dtype: torch.dtype, m: int, n: int, k: int, batch: int, sms: int) -> tuple:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, TMA, PERSISTENT) of the untuned path on a GPU."""
    size = dtype.itemsize
    if m <= SKINNY_M:
        bm = _skinny_bm(m)
        bn = 64 if cdiv(n, 64) * cdiv(m, bm) * batch >= sms else 32
        bk = min(512 // size, max(16, next_pow2(k)))
        return bm, bn, bk, 4, _stages(bm, bn, bk, size, 4), False, False
    if dtype == torch.float32:
        return 128, 128, 32, 8, 3, False, False
    if m >= 1024 and n >= 1024:
        return 128, 256, 64, 8, 3, False, False
    return 64, 64, 64, 4, 4, False, False


def _tuned_config(m: int, n: int, k: int, batch: int, dtype: torch.dtype, sa: tuple, sb: tuple, dev: torch.device,
                  base: dict, operands: tuple | None) -> tuple:
    """The tritonjit autotuner's config for the problem's key (tuned now if not stored)."""
    from tritonjit import _autotune

    if operands is None:  # scratch operands of the problem's strides
        a = torch.empty_strided((batch, m, k), sa, dtype=dtype, device=dev).normal_()
        b = torch.empty_strided((batch, k, n), sb, dtype=dtype, device=dev).normal_()
        c = torch.empty((batch, m, n), dtype=dtype, device=dev)
        bias = torch.zeros((m, n), dtype=dtype, device=dev) if base["HAS_BIAS"] else None
        if batch == 1 and sa[0] == 0 and sb[0] == 0:  # as mm passes them
            a, b, c = a[0], b[0], c[0]
    else:
        a, b, c, bias = operands
    args = _args(a, b, c, bias, m, n, k, 1.0, 0.0)
    sms = _sms(dev)

    def grid(meta: dict) -> tuple:
        tiles = cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"])
        return min(tiles, sms) if meta["PERSISTENT"] else tiles, batch, 1

    _mm_tuned._make_state()  # the tuner reads the backend from it (a launch would make it first)
    kw = _autotune.meta_kwargs(_mm_tuned, args, dict(base, SPLIT_K=1), grid)
    return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["num_warps"], kw["num_stages"], bool(kw["TMA"]),
            bool(kw["PERSISTENT"]))


def make_plan(m: int, n: int, k: int, batch: int, dtype: torch.dtype, a_strides: Sequence[int],
              b_strides: Sequence[int], has_bias: bool, device: Any, config: Sequence, split_k: int = 1, *,
              scale: bool = False) -> Plan:
    """A plan with an explicit config (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages[, TMA[,
    PERSISTENT]]): for sweeps and tests. Not cached; the caller checks that a TMA config can read
    the operands."""
    sa = _strides3(a_strides, m, k)
    sb = _strides3(b_strides, k, n)
    base = dict(HAS_BIAS=has_bias, SCALE=scale, PRECISION=_precision(dtype),
                DOT_F32=dot_f32(device, dtype),
                A_KC=sa[2] == 1, B_KC=sb[1] == 1)
    if _idx64(m, n, k, sa, sb):
        base["IDX64"] = True
    cfg = tuple(config) + (False,) * (7 - len(config))
    dev = torch.device(device)
    return _make(m, n, k, batch, base, cfg, split_k, "explicit", _sms(dev) if dev.type != "cpu" else 4)


def _make(m: int, n: int, k: int, batch: int, base: dict, cfg: tuple, split: int, source: str, sms: int) -> Plan:
    bm, bn, bk, warps, stages, tma, persistent = cfg
    persistent = bool(persistent) and split == 1
    meta = dict(base, EVEN_K=k % bk == 0, TMA=bool(tma), SPLIT_K=split, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                GROUP_M=8, PERSISTENT=persistent, num_warps=warps, num_stages=stages)
    tiles = cdiv(m, bm) * cdiv(n, bn)
    grid = (min(tiles, sms) if persistent else tiles, batch, split)
    if split == 1:
        return Plan(_mm, grid, meta, source=source)
    meta.update(HAS_BIAS=False, SCALE=False)
    rmeta = dict(HAS_BIAS=base["HAS_BIAS"], SCALE=base["SCALE"], SPLIT_K=split, BLOCK=REDUCE_BLOCK, num_warps=4)
    return Plan(_mm, grid, meta, split, batch * split * m * n, _splitk_reduce,
                (cdiv(m * n, REDUCE_BLOCK), batch), rmeta, source)


# ---- launching --------------------------------------------------------------------------------
def _dims(a: Tensor, b: Tensor) -> tuple[int, int, int, int]:
    """(batch, M, K, N) of 2-D (one matrix) or 3-D operands."""
    if a.dim() == 2:
        m, k = a.shape
        return 1, m, k, b.shape[1]
    bsz, m, k = a.shape
    return bsz, m, k, b.shape[2]


def _s3(t: Tensor) -> tuple:
    """(batch, row, col) strides of a 2-D (batch stride 0) or 3-D tensor."""
    s = t.stride()
    return s if len(s) == 3 else (0,) + s


def _bias_strides(bias: Tensor | None) -> tuple:
    """(batch, row, col) strides of an addmm bias (2-D: batch stride 0), a baddbmm input (3-D) or none."""
    return _s3(bias) if bias is not None else (0, 0, 0)


def _args(a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None, m: int, n: int, k: int, alpha, beta) -> tuple:
    sa, sb, sc, si = _s3(a), _s3(b), _s3(c), _bias_strides(bias)
    return (a, b, c, bias if bias is not None else c, m, n, k,
            sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], sc[0], sc[1], sc[2], si[0], si[1], si[2], alpha, beta)


def _reduce_args(ws: Tensor, c: Tensor, bias: Tensor | None, m: int, n: int, alpha, beta) -> tuple:
    sc, si = _s3(c), _bias_strides(bias)
    return (ws, c, bias if bias is not None else c, m, n, sc[0], sc[1], sc[2], si[0], si[1], si[2], alpha, beta)


def run(plan: Plan, a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None, alpha=1.0, beta=0.0) -> Tensor:
    """Launch ``plan`` on a (M, K), b (K, N) into c (M, N), or batched (B, M, K) ...; bias
    (M, N) (any strides, e.g. expanded) or None."""
    bsz, m, k, n = _dims(a, b)
    if plan.split_k == 1:
        _mm[plan.grid](*_args(a, b, c, bias, m, n, k, alpha, beta), **plan.meta)
        return c
    ws = torch.empty((bsz * plan.split_k, m, n), dtype=torch.float32, device=a.device)
    _mm[plan.grid](*_args(a, b, ws, None, m, n, k, alpha, beta), **plan.meta)
    _splitk_reduce[plan.reduce_grid](*_reduce_args(ws, c, bias, m, n, alpha, beta), **plan.reduce_meta)
    return c


def _launch(a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None, alpha, beta, scale: bool) -> Tensor:
    """c = alpha * a @ b (+ beta * bias) for 2-D (mm, addmm) or 3-D (bmm) operands."""
    sa, sb, dtype = a.stride(), b.stride(), a.dtype
    if len(sa) == 2:
        bsz, (m, k), n = 1, a.shape, b.shape[1]
    else:
        (bsz, m, k), n = a.shape, b.shape[2]
    if c.numel() == 0:
        return c
    if k == 0:
        c.zero_() if bias is None else c.copy_(bias.expand_as(c) * beta)
        return c
    aligned = (a.data_ptr() | b.data_ptr()) & 15 == 0
    # choose()'s cache key, built here to skip the call on a hit
    key = (m, n, k, bsz, dtype, sa, sb, bias is not None, scale, aligned, a.device,
           "tf32" if dtype is not _F32 else _precision(dtype))
    plan = _plans.get(key)
    if plan is None:
        plan = choose(m, n, k, bsz, dtype, sa, sb, bias is not None, a.device, scale=scale, aligned=aligned,
                      operands=(a, b, c, bias))
    if plan.split_k == 1 and bsz == 1 and len(sa) == 2:  # mm/addmm: the launch, unrolled
        si = (bias.stride(0), bias.stride(1)) if bias is not None else (0, 0)
        sc = c.stride()
        _mm[plan.grid](a, b, c, bias if bias is not None else c, m, n, k, 0, sa[0], sa[1], 0, sb[0], sb[1],
                       0, sc[0], sc[1], 0, si[0], si[1], alpha, beta, **plan.meta)
        return c
    return run(plan, a, b, c, bias, alpha, beta)


def _check(name: str, a: Tensor, b: Tensor, rank: int) -> None:
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"tritonjit.{name}: expected Tensors")
    check_same_device(name, a, b)
    if a.dim() != rank or b.dim() != rank:
        what = "2D" if rank == 2 else "3D"
        raise RuntimeError(f"{'self' if a.dim() != rank else 'mat2'} must be a {what} tensor")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
    if a.dtype not in _DTYPES:
        raise TypeError(f"tritonjit.{name}: unsupported dtype {a.dtype}; expected float16, bfloat16 or float32")


def mm(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for 2-D a (M, K) and b (K, N); any strides."""
    _check("mm", a, b, 2)
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    return _launch(a, b, c, None, 1.0, 0.0, False)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched a @ b for (B, M, K) and (B, K, N)."""
    _check("bmm", a, b, 3)
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    c = torch.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype, device=a.device)
    return _launch(a, b, c, None, 1.0, 0.0, False)


def addmm(bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """beta * bias + alpha * (a @ b); bias broadcasts to (M, N); beta == 0 ignores bias (NaN too)."""
    _check("addmm", a, b, 2)
    check_same_device("addmm", bias, a)
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    m, n = a.shape[0], b.shape[1]
    if bias.dtype != a.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {bias.dtype} and {a.dtype}")
    try:
        bias2 = bias.expand(m, n)
    except RuntimeError:
        raise RuntimeError(f"The size of tensor a ({list(bias.shape)}) must match the size of tensor b "
                           f"([{m}, {n}]) for addmm") from None
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    return _launch(a, b, c, bias2 if beta != 0 else None, float(alpha), float(beta), alpha != 1)


def baddbmm(bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """beta * bias + alpha * (a @ b) for (B, M, K) and (B, K, N); bias broadcasts to (B, M, N)
    (BLOOM's ALiBi scores: (B, 1, N)); beta == 0 ignores bias (NaN too). One launch: the bias
    is read in the epilogue at its own (broadcast) strides."""
    if not isinstance(bias, Tensor):
        raise TypeError(f"tritonjit.baddbmm: expected a Tensor for self, got {type(bias).__name__}")
    if isinstance(a, Tensor) and isinstance(b, Tensor) and not bias.dtype == a.dtype == b.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {bias.dtype}, batch1: {a.dtype}, "
                           f"batch2: {b.dtype}")
    _check("baddbmm", a, b, 3)
    check_same_device("baddbmm", bias, a)
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    shape = (a.shape[0], a.shape[1], b.shape[2])
    bias3 = bias.expand(shape)  # aten's own message where it does not broadcast
    c = torch.empty(shape, dtype=a.dtype, device=a.device)
    return _launch(a, b, c, bias3 if beta != 0 else None, float(alpha), float(beta), alpha != 1)


# ---- plans of the C++ operator path (see _plan.py) ---------------------------------------------
def _matmul_plan(a: Tensor, b: Tensor, bias: Tensor | None, refs: tuple, alpha: Any, beta: Any, scale: bool,
                 out_shape: tuple, call: tuple) -> P.Plan | None:
    """The launches of c = alpha * a @ b (+ beta * bias) into a new contiguous c, from
    :func:`choose`; ``refs`` = (a, b, bias) references of the call. TMA configs are left
    out (they need 16-byte aligned base pointers, which a plan cannot know)."""
    bsz, m, k, n = _dims(a, b)
    out = (P.Buffer(out_shape, a.dtype),)
    if m * n * bsz == 0:
        return P.Plan(out, ())
    if k == 0:
        return P.aten_plan()  # a fill (beta * bias for addmm): aten's kernel, decided by the shapes
    c = torch.empty(out_shape, dtype=a.dtype, device=a.device)  # only for tuning, on a plan miss
    plan = choose(m, n, k, bsz, a.dtype, a.stride(), b.stride(), bias is not None, a.device, scale=scale,
                  aligned=False, operands=(a, b, c, bias))
    if _aten_is_faster(plan, a, b, c, bias, m, n, k, bsz, call):
        if _aten_mode() == "auto":  # measured, not forced: the audit shows it as such
            _policy.note_aten(call[0], call[1:])
        return P.aten_plan()
    sa, sb, sc = _s3(a), _s3(b), _s3(c)
    si = _bias_strides(bias)
    a_ref, b_ref, bias_ref = refs
    meta = dict(plan.meta)
    warps, stages = meta.pop("num_warps"), meta.pop("num_stages")
    if plan.split_k == 1:
        L = P.launch(_mm, plan.grid, a_ref, b_ref, P.Out(0), bias_ref if bias is not None else P.Out(0), m, n, k,
                     *sa, *sb, *sc, *si, alpha, beta, num_warps=warps, num_stages=stages, **meta)
        return P.Plan(out, (L,))
    ws = (P.Buffer((bsz * plan.split_k, m, n), torch.float32),)
    sw = (m * n, n, 1)
    first = P.launch(_mm, plan.grid, a_ref, b_ref, P.Tmp(0), P.Tmp(0), m, n, k, *sa, *sb, *sw, 0, 0, 0, alpha, beta,
                     num_warps=warps, num_stages=stages, **meta)
    rmeta = dict(plan.reduce_meta)
    rwarps = rmeta.pop("num_warps")
    second = P.launch(_splitk_reduce, plan.reduce_grid, P.Tmp(0), P.Out(0),
                      bias_ref if bias is not None else P.Out(0), m, n, *sc, *si, alpha, beta, num_warps=rwarps,
                      **rmeta)
    return P.Plan(out, (first, second), temps=ws)


#: problems of at least this many multiply-adds are timed against aten's own kernel (cuBLAS)
#: when planned; smaller ones are launch-bound, where tritonjit's host path is the cheaper one
ATEN_COMPARE_MIN_WORK = 1 << 30
#: the same for fp32, whose multiply-adds cost 15-60x a 16-bit one's (IEEE fp32 has no tensor
#: cores; TF32 runs at half bf16's rate), so a problem stops being launch-bound 64x sooner.
#: The H200 audit of T5's training step found fp32 attention bmms of 2^28 multiply-adds,
#: below the 16-bit bound, at 2.4-5x cuBLAS's time (and others faster than it): measured now
ATEN_COMPARE_MIN_WORK_FP32 = 1 << 24
#: a long reduction into a small output (a weight gradient: (384, 12544) @ (12544, 96) in
#: ConvNeXt's training step) is not launch-bound well below those bounds: few output tiles,
#: each looping over all of K, ran at 1.3-1.6x cuBLAS's time (split-K) in the H200 audit.
#: Problems of this many multiply-adds whose K is LONG_K_RATIO times their larger output dim
#: are timed too
ATEN_COMPARE_MIN_WORK_LONG_K = 1 << 26
LONG_K_RATIO = 4
#: aten's kernel is taken where tritonjit's takes longer than this multiple of its time. 1.0:
#: the faster kernel serves each large call (it was 1.10, keeping close calls on tritonjit's
#: kernel: up to 10% of a GPU-bound prefill's mm time lost for kernel coverage; the H200 showed
#: BERT's 8x1024 prefill at 1.01x eager with it). The audit lists the calls aten serves.
ATEN_MARGIN = 1.0


def _aten_mode() -> str:
    """TRITONJIT_OPS_MM_ATEN: "auto" (default: measure), "never" (always tritonjit's kernel),
    "always" (aten's; for tests)."""
    return _policy.env_mode("TRITONJIT_OPS_MM_ATEN", ("auto", "never", "always"))


def compare_bound(dtype: torch.dtype, m: int, n: int, k: int) -> int:
    """The multiply-adds from which a planned (m, n, k) problem is timed against aten's kernel."""
    bound = ATEN_COMPARE_MIN_WORK if dtype in (torch.float16, torch.bfloat16) else ATEN_COMPARE_MIN_WORK_FP32
    if k >= LONG_K_RATIO * max(m, n):
        bound = min(bound, ATEN_COMPARE_MIN_WORK_LONG_K)
    return bound


def _aten_is_faster(plan: Plan, a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None, m: int, n: int, k: int,
                    bsz: int, call: tuple) -> bool:
    """Whether a planned call goes to aten's own kernel instead: where it measured faster than
    tritonjit's plan by more than ATEN_MARGIN (once per call key, on the call's operands;
    ``call`` = (op, *arguments) as the call gave them: addmm's bias unexpanded, which is
    what lets cuBLASLt add it in its epilogue), for problems of ATEN_COMPARE_MIN_WORK (16-bit)
    or ATEN_COMPARE_MIN_WORK_FP32 (fp32) or more on a device, ATEN_COMPARE_MIN_WORK_LONG_K
    where K is long (compare_bound). The audit shows such calls as
    not routed, aten measured faster (_matmul_plan notes them in _policy)."""
    mode = _aten_mode()
    if mode != "auto":
        return mode == "always"
    if a.device.type == "cpu" or bsz * m * n * k < compare_bound(a.dtype, m, n, k) or capturing(a.device):
        return False
    from . import _native_ops

    mod = _native_ops.module()
    if mod is None:
        return False
    import triton.testing

    ours = triton.testing.do_bench(lambda: run(plan, a, b, c, bias, 1.0, 1.0), rep=50)
    theirs = triton.testing.do_bench(lambda: mod.aten(*call), rep=50)
    return ours > theirs * ATEN_MARGIN


def _mm_ok(a: Any, b: Any, rank: int) -> bool:
    return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.dim() == rank and b.dim() == rank
            and a.dtype == b.dtype and a.dtype in _DTYPES and a.device == b.device)


def _atens_dtype(*ts: Any) -> bool:
    """Tensors of one dtype no kernel here multiplies (integers, float64): aten's kernel, planned
    as such once per call key instead of a Python refusal on every call."""
    return (all(isinstance(t, Tensor) for t in ts) and len({t.dtype for t in ts}) == 1
            and ts[0].dtype not in _DTYPES and not ts[0].is_complex())


@P.tf32_keyed
def plan_mm(a: Any, b: Any) -> P.Plan | None:
    if _atens_dtype(a, b):
        return P.aten_plan()
    if not _mm_ok(a, b, 2) or a.shape[1] != b.shape[0]:
        return None
    return _matmul_plan(a, b, None, (P.In(0), P.In(1), None), 1.0, 0.0, False, (a.shape[0], b.shape[1]),
                        ("mm", a, b))


@P.tf32_keyed
def plan_bmm(a: Any, b: Any) -> P.Plan | None:
    if _atens_dtype(a, b):
        return P.aten_plan()
    if not _mm_ok(a, b, 3) or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        return None
    return _matmul_plan(a, b, None, (P.In(0), P.In(1), None), 1.0, 0.0, False, (a.shape[0], a.shape[1], b.shape[2]),
                        ("bmm", a, b))


def _plan_with_bias(op: str, rank: int, bias: Any, a: Any, b: Any, beta: Any, alpha: Any) -> P.Plan | None:
    """addmm (rank 2) and baddbmm (rank 3): the bias (``self``) broadcast to the output at its
    own strides; beta and alpha are passed at run time, and the key says whether beta is 0
    (the bias is ignored, NaN too) and alpha 1 (no scaling)."""
    if _atens_dtype(bias, a, b):
        return P.aten_plan()
    if not _mm_ok(a, b, rank) or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        return None
    if not isinstance(bias, Tensor) or bias.dtype != a.dtype or bias.device != a.device:
        return None
    if isinstance(beta, complex) or isinstance(alpha, complex):
        return None
    shape = (*a.shape[:-1], b.shape[-1])
    try:
        expanded = bias.expand(shape)
    except RuntimeError:
        return None
    return _matmul_plan(a, b, expanded if beta != 0 else None, (P.In(1), P.In(2), P.In(0)), P.Arg(4), P.Arg(3),
                        alpha != 1, shape, (op, bias, a, b, beta, alpha))


@P.tf32_keyed
def plan_addmm(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> P.Plan | None:
    return _plan_with_bias("addmm", 2, bias, a, b, beta, alpha)


@P.tf32_keyed
def plan_baddbmm(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> P.Plan | None:
    return _plan_with_bias("baddbmm", 3, bias, a, b, beta, alpha)


PLANNERS: dict[str, Any] = {"mm": plan_mm, "bmm": plan_bmm, "addmm": plan_addmm, "baddbmm": plan_baddbmm}
