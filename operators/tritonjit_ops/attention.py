"""Flash attention (forward and backward) in Triton, behind ``scaled_dot_product_attention``.

The forward is FlashAttention-2: one program per (query block, batch x head) streams
the key/value blocks with an online softmax in the exp2 domain and writes the output
and the row log-sum-exp (natural log, fp32: the layout aten's own kernels save). The
backward follows Triton's fused-attention tutorial: ``_bwd_preprocess`` computes
delta = rowsum(o * do); ``_bwd_dkdv`` keeps one key/value block in registers and
streams the query blocks of every query head that shares it (grouped-query
attention: dk and dv are summed over the group in the kernel, no atomics);
``_bwd_dq`` keeps one query block and streams the key/value blocks.

Supported: fp16 and bf16 (fp32 on the interpreter only), head dims 64 and 128 on a GPU
(powers of two from 8 to 128 on the interpreter), any sequence lengths (the tail block is masked),
causal (top-left aligned, as torch: only with equal query and key lengths) or not, a
``scale``, grouped-query heads (key heads dividing query heads) and an additive
attention bias of any broadcast shape (bert's padding mask). A call outside that
raises :class:`Unsupported`; under ``enable()`` the C++ operator path then hands the
call to aten's own kernel, as in eager (and where enable() runs on Python registrations,
which replace aten's kernel, a torch-ops fallback computes it).

Entry points: :func:`attention` (autograd), ``torch.ops.tritonjit.flash_attention``
(returns output and log-sum-exp; autograd registered), and :data:`ATEN`, the aten
overloads that ``enable()`` routes: the flash, efficient, cuDNN and CPU flash kernels of
``scaled_dot_product_attention`` and their backwards (which one SDPA picks depends on
the device, the call and the torch version; each keeps aten's output layouts).
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from . import _plan as P
from . import _policy, double_backward
from . import autograd as _autograd
from ._common import capturing, cdiv, jit

Tensor = torch.Tensor

__all__ = ["attention", "attention_forward", "attention_backward", "Unsupported", "ATEN"]

_LOG2E = 1.4426950408889634


class Unsupported(NotImplementedError):
    """A call the Triton kernels do not take (aten's kernel serves it under enable())."""


# ---- forward -----------------------------------------------------------------------------------
@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d, lo, hi,
               M, N, qk_scale,
               MASK_N: tl.constexpr, DIAG: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Online softmax over key blocks [lo, hi): returns the updated (acc, l_i, m_i)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_n0
        if MASK_N:
            kt = tl.load(k_ptr + offs_n[None, :] * s_kn + offs_d[:, None], mask=offs_n[None, :] < N, other=0.0)
        else:
            kt = tl.load(k_ptr + offs_n[None, :] * s_kn + offs_d[:, None])
        qk = tl.dot(q, kt) * qk_scale
        if HAS_BIAS:
            bias = tl.load(b_ptr + offs_m[:, None] * s_bm + offs_n[None, :] * s_bn,
                           mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), other=0.0)
            qk += bias.to(tl.float32) * 1.4426950408889634
        if DIAG:
            qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, float("-inf"))
        if MASK_N:
            qk = tl.where(offs_n[None, :] < N, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        if HAS_BIAS:  # a row masked out so far: keep exp2 finite
            m_ij = tl.where(m_ij == float("-inf"), 0.0, m_ij)
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASK_N:
            v = tl.load(v_ptr + offs_n[:, None] * s_vn + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)
        else:
            v = tl.load(v_ptr + offs_n[:, None] * s_vn + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, B, Out, LSE, qk_scale,
              s_qz, s_qh, s_qm, s_kz, s_kh, s_kn, s_vz, s_vh, s_vn,
              s_bz, s_bh, s_bm, s_bn, s_oz, s_oh, s_om, s_lz, s_lh, s_lm,
              H, GROUP, M, N,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
              EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """O = softmax(Q K^T * scale + B) V for one query block of one (batch, head); LSE per row."""
    if CAUSAL:  # the longest rows first: they finish last otherwise
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    z = (off_hz // H).to(tl.int64)
    h = off_hz % H
    hk = (h // GROUP).to(tl.int64)
    h = h.to(tl.int64)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptr = Q + z * s_qz + h * s_qh
    k_ptr = K + z * s_kz + hk * s_kh
    v_ptr = V + z * s_vz + hk * s_vh
    b_ptr = B + z * s_bz + h * s_bh
    if EVEN_M:
        q = tl.load(q_ptr + offs_m[:, None] * s_qm + offs_d[None, :])
    else:
        q = tl.load(q_ptr + offs_m[:, None] * s_qm + offs_d[None, :], mask=offs_m[:, None] < M, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:  # blocks left of the diagonal unmasked, then the diagonal band (M == N)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0,
                                   offs_d, 0, start_m, M, N, qk_scale, False, False, HAS_BIAS, BLOCK_N)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0,
                                   offs_d, start_m, tl.minimum(start_m + BLOCK_M, N), M, N, qk_scale,
                                   not EVEN_N, True, HAS_BIAS, BLOCK_N)
    else:
        n_full = (N // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0,
                                   offs_d, 0, n_full, M, N, qk_scale, False, False, HAS_BIAS, BLOCK_N)
        if not EVEN_N:
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m,
                                       offs_n0, offs_d, n_full, N, M, N, qk_scale, True, False, HAS_BIAS, BLOCK_N)
    if HAS_BIAS:  # a row that is masked out entirely gives 0 (and lse -inf)
        acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    else:
        acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    o_ptr = Out + z * s_oz + h * s_oh + offs_m[:, None] * s_om + offs_d[None, :]
    l_ptr = LSE + z * s_lz + h * s_lh + offs_m * s_lm
    if EVEN_M:
        tl.store(o_ptr, acc.to(Out.dtype.element_ty))
        tl.store(l_ptr, lse)
    else:
        tl.store(o_ptr, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < M)
        tl.store(l_ptr, lse, mask=offs_m < M)


# ---- backward ----------------------------------------------------------------------------------
@triton.jit
def _bwd_preprocess(Out, DO, DELTA, s_oz, s_oh, s_om, s_dz, s_dh, s_dm, H, M,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta[z, h, m] = sum_d o * do (fp32), contiguous (Z, H, M)."""
    off_hz = tl.program_id(1)
    z = (off_hz // H).to(tl.int64)
    h = (off_hz % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    mask = offs_m[:, None] < M
    o = tl.load(Out + z * s_oz + h * s_oh + offs_m[:, None] * s_om + offs_d[None, :], mask=mask, other=0.0)
    do = tl.load(DO + z * s_dz + h * s_dh + offs_m[:, None] * s_dm + offs_d[None, :], mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + off_hz.to(tl.int64) * M + offs_m, delta, mask=offs_m < M)


@triton.jit
def _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm, s_bn,
                offs_n, offs_m0, offs_d, lo, hi, M, N, qk_scale,
                MASK_M: tl.constexpr, DIAG: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr):
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + offs_m0
        if MASK_M:
            qt = tl.load(q_ptr + offs_m[None, :] * s_qm + offs_d[:, None], mask=offs_m[None, :] < M, other=0.0)
            do = tl.load(do_ptr + offs_m[:, None] * s_dm + offs_d[None, :], mask=offs_m[:, None] < M, other=0.0)
            lse = tl.load(l_ptr + offs_m * s_lm, mask=offs_m < M, other=0.0)
            di = tl.load(d_ptr + offs_m, mask=offs_m < M, other=0.0)
        else:
            qt = tl.load(q_ptr + offs_m[None, :] * s_qm + offs_d[:, None])
            do = tl.load(do_ptr + offs_m[:, None] * s_dm + offs_d[None, :])
            lse = tl.load(l_ptr + offs_m * s_lm)
            di = tl.load(d_ptr + offs_m)
        m2 = lse * 1.4426950408889634
        qkt = tl.dot(k, qt) * qk_scale
        if HAS_BIAS:
            bias = tl.load(b_ptr + offs_m[None, :] * s_bm + offs_n[:, None] * s_bn,
                           mask=(offs_m[None, :] < M) & (offs_n[:, None] < N), other=0.0)
            qkt += bias.to(tl.float32) * 1.4426950408889634
            m2 = tl.where(m2 == float("-inf"), float("inf"), m2)
        pt = tl.math.exp2(qkt - m2[None, :])
        if DIAG:
            pt = tl.where(offs_m[None, :] >= offs_n[:, None], pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv)
        dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - di[None, :])
        dk = tl.dot(dst.to(qt.dtype), tl.trans(qt), dk)
    return dk, dv


@triton.jit
def _bwd_dkdv(Q, K, V, B, DO, LSE, DELTA, DK, DV, qk_scale, sm_scale,
              s_qz, s_qh, s_qm, s_kz, s_kh, s_kn, s_vz, s_vh, s_vn,
              s_bz, s_bh, s_bm, s_bn, s_dz, s_dh, s_dm, s_lz, s_lh, s_lm,
              s_dkz, s_dkh, s_dkn, s_dvz, s_dvh, s_dvn,
              H, HK, GROUP, M, N,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
              EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dk, dv of one key block of one (batch, key head), summed over the query heads of its group."""
    start_n = tl.program_id(0) * BLOCK_N
    off_hz = tl.program_id(1)
    z = (off_hz // HK).to(tl.int64)
    hk = (off_hz % HK).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    k_off = z * s_kz + hk * s_kh + offs_n[:, None] * s_kn + offs_d[None, :]
    v_off = z * s_vz + hk * s_vh + offs_n[:, None] * s_vn + offs_d[None, :]
    if EVEN_N:
        k = tl.load(K + k_off)
        v = tl.load(V + v_off)
    else:
        k = tl.load(K + k_off, mask=offs_n[:, None] < N, other=0.0)
        v = tl.load(V + v_off, mask=offs_n[:, None] < N, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    for g in range(0, GROUP):
        h = hk * GROUP + g
        q_ptr = Q + z * s_qz + h * s_qh
        do_ptr = DO + z * s_dz + h * s_dh
        l_ptr = LSE + z * s_lz + h * s_lh
        d_ptr = DELTA + (z * H + h) * M
        b_ptr = B + z * s_bz + h * s_bh
        if CAUSAL:  # the diagonal band (masked), then the query blocks below it
            hi_diag = tl.minimum(start_n + BLOCK_N, M)
            dk, dv = _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm, s_bn,
                                 offs_n, offs_m0, offs_d, start_n, hi_diag, M, N, qk_scale,
                                 not EVEN_M, True, HAS_BIAS, BLOCK_M)
            m_full = start_n + BLOCK_N + ((M - start_n - BLOCK_N) // BLOCK_M) * BLOCK_M
            dk, dv = _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm, s_bn,
                                 offs_n, offs_m0, offs_d, start_n + BLOCK_N, m_full, M, N, qk_scale,
                                 False, False, HAS_BIAS, BLOCK_M)
            if not EVEN_M:
                dk, dv = _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm,
                                     s_bn, offs_n, offs_m0, offs_d, tl.maximum(m_full, start_n + BLOCK_N), M, M,
                                     N, qk_scale, True, False, HAS_BIAS, BLOCK_M)
        else:
            m_full = (M // BLOCK_M) * BLOCK_M
            dk, dv = _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm, s_bn,
                                 offs_n, offs_m0, offs_d, 0, m_full, M, N, qk_scale, False, False, HAS_BIAS, BLOCK_M)
            if not EVEN_M:
                dk, dv = _dkdv_inner(dk, dv, k, v, q_ptr, do_ptr, l_ptr, d_ptr, b_ptr, s_qm, s_dm, s_lm, s_bm,
                                     s_bn, offs_n, offs_m0, offs_d, m_full, M, M, N, qk_scale,
                                     True, False, HAS_BIAS, BLOCK_M)
    dk = dk * sm_scale
    dk_ptr = DK + z * s_dkz + hk * s_dkh + offs_n[:, None] * s_dkn + offs_d[None, :]
    dv_ptr = DV + z * s_dvz + hk * s_dvh + offs_n[:, None] * s_dvn + offs_d[None, :]
    if EVEN_N:
        tl.store(dk_ptr, dk.to(DK.dtype.element_ty))
        tl.store(dv_ptr, dv.to(DV.dtype.element_ty))
    else:
        tl.store(dk_ptr, dk.to(DK.dtype.element_ty), mask=offs_n[:, None] < N)
        tl.store(dv_ptr, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < N)


@triton.jit
def _dq_inner(dq, q, do, m2, di, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d, lo, hi,
              M, N, qk_scale,
              MASK_N: tl.constexpr, DIAG: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_n0
        if MASK_N:
            kt = tl.load(k_ptr + offs_n[None, :] * s_kn + offs_d[:, None], mask=offs_n[None, :] < N, other=0.0)
            vt = tl.load(v_ptr + offs_n[None, :] * s_vn + offs_d[:, None], mask=offs_n[None, :] < N, other=0.0)
        else:
            kt = tl.load(k_ptr + offs_n[None, :] * s_kn + offs_d[:, None])
            vt = tl.load(v_ptr + offs_n[None, :] * s_vn + offs_d[:, None])
        qk = tl.dot(q, kt) * qk_scale
        if HAS_BIAS:
            bias = tl.load(b_ptr + offs_m[:, None] * s_bm + offs_n[None, :] * s_bn,
                           mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), other=0.0)
            qk += bias.to(tl.float32) * 1.4426950408889634
        p = tl.math.exp2(qk - m2[:, None])
        if DIAG:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        if MASK_N:
            p = tl.where(offs_n[None, :] < N, p, 0.0)
        dp = tl.dot(do, vt)
        ds = p * (dp - di[:, None])
        dq = tl.dot(ds.to(kt.dtype), tl.trans(kt), dq)
    return dq


@triton.jit
def _bwd_dq(Q, K, V, B, DO, LSE, DELTA, DQ, qk_scale, sm_scale,
            s_qz, s_qh, s_qm, s_kz, s_kh, s_kn, s_vz, s_vh, s_vn,
            s_bz, s_bh, s_bm, s_bn, s_dz, s_dh, s_dm, s_lz, s_lh, s_lm, s_dqz, s_dqh, s_dqm,
            H, GROUP, M, N,
            HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
            EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dq of one query block of one (batch, head)."""
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    z = (off_hz // H).to(tl.int64)
    h = off_hz % H
    hk = (h // GROUP).to(tl.int64)
    h = h.to(tl.int64)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_off = z * s_qz + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :]
    do_off = z * s_dz + h * s_dh + offs_m[:, None] * s_dm + offs_d[None, :]
    l_off = z * s_lz + h * s_lh + offs_m * s_lm
    d_off = off_hz.to(tl.int64) * M + offs_m
    if EVEN_M:
        q = tl.load(Q + q_off)
        do = tl.load(DO + do_off)
        lse = tl.load(LSE + l_off)
        di = tl.load(DELTA + d_off)
    else:
        q = tl.load(Q + q_off, mask=offs_m[:, None] < M, other=0.0)
        do = tl.load(DO + do_off, mask=offs_m[:, None] < M, other=0.0)
        lse = tl.load(LSE + l_off, mask=offs_m < M, other=0.0)
        di = tl.load(DELTA + d_off, mask=offs_m < M, other=0.0)
    m2 = lse * 1.4426950408889634
    if HAS_BIAS:
        m2 = tl.where(m2 == float("-inf"), float("inf"), m2)
    k_ptr = K + z * s_kz + hk * s_kh
    v_ptr = V + z * s_vz + hk * s_vh
    b_ptr = B + z * s_bz + h * s_bh
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        dq = _dq_inner(dq, q, do, m2, di, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d,
                       0, start_m, M, N, qk_scale, False, False, HAS_BIAS, BLOCK_N)
        dq = _dq_inner(dq, q, do, m2, di, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d,
                       start_m, tl.minimum(start_m + BLOCK_M, N), M, N, qk_scale, not EVEN_N, True, HAS_BIAS,
                       BLOCK_N)
    else:
        n_full = (N // BLOCK_N) * BLOCK_N
        dq = _dq_inner(dq, q, do, m2, di, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d,
                       0, n_full, M, N, qk_scale, False, False, HAS_BIAS, BLOCK_N)
        if not EVEN_N:
            dq = _dq_inner(dq, q, do, m2, di, k_ptr, v_ptr, b_ptr, s_kn, s_vn, s_bm, s_bn, offs_m, offs_n0, offs_d,
                           n_full, N, M, N, qk_scale, True, False, HAS_BIAS, BLOCK_N)
    dq = dq * sm_scale
    dq_ptr = DQ + z * s_dqz + h * s_dqh + offs_m[:, None] * s_dqm + offs_d[None, :]
    if EVEN_M:
        tl.store(dq_ptr, dq.to(DQ.dtype.element_ty))
    else:
        tl.store(dq_ptr, dq.to(DQ.dtype.element_ty), mask=offs_m[:, None] < M)


# ---- configs -----------------------------------------------------------------------------------
def _cfg(bm: int, bn: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)


#: Hopper tiles (FlashAttention-2 style: wide query blocks in the forward and dq, wide key
#: blocks in dk/dv); causal needs one block size to divide the other, which every pair does.
#: The forward's third: a sweep of 25 configs on an H200 (bf16, 2026-12-01) found 64x64, 4 warps,
#: 3 stages fastest at causal S1024 (d64 and d128: 1.39-1.41x flash) and within 1% elsewhere
_FWD_CONFIGS = [_cfg(128, 64, 8, 3), _cfg(128, 128, 8, 3), _cfg(64, 64, 4, 3)]
_DKDV_CONFIGS = [_cfg(32, 128, 8, 3), _cfg(64, 128, 8, 2), _cfg(32, 64, 4, 3)]
_DQ_CONFIGS = [_cfg(128, 32, 8, 3), _cfg(128, 64, 8, 2), _cfg(64, 64, 4, 3)]
_KEY = ["HEAD_DIM", "CAUSAL", "HAS_BIAS", "N"]
_BUCKETS = {"N": "log2"}  # the key length, rounded up to a power of two
#: whether the config's blocks divide the lengths (the loads of the tail are masked otherwise)
_EVEN = {"EVEN_M": lambda a: a["M"] % a["BLOCK_M"] == 0, "EVEN_N": lambda a: a["N"] % a["BLOCK_N"] == 0}


def _fixed(consts: dict, blocks: dict, m: int, n: int) -> dict:
    """The keywords of a launch with the given blocks (no tuner): the constexprs, the blocks
    and the values of the _EVEN heuristics for lengths ``m`` and ``n``."""
    nargs = {"M": m, "N": n, **blocks}
    return {**consts, **blocks, **{name: rule(nargs) for name, rule in _EVEN.items()}}


#: key lengths up to this run one small-tile config, untuned (decode and short training
#: sequences: the big tiles would mostly compute padding, and tuning costs compiles)
SHORT_N = 256


def _prune(configs: list, nargs: dict, **kwargs: Any) -> list:
    """The configs a call may use: for a short key length, its one small-tile config."""
    if nargs["N"] <= SHORT_N:
        small = [c for c in configs if c.kwargs["BLOCK_M"] <= 64 and c.kwargs["BLOCK_N"] <= 64]
        return small[:1] or configs[:1]
    return configs


def _tuned(kernel: Any, configs: list) -> Any:
    return jit(triton.autotune(configs=configs, key=_KEY, prune_configs_by={"early_config_prune": _prune})(
        triton.heuristics(_EVEN)(kernel)), key_buckets=_BUCKETS)


_fwd = jit(_attn_fwd)
_dkdv = jit(_bwd_dkdv)
_dq = jit(_bwd_dq)
_pre = jit(_bwd_preprocess)
_fwd_tuned = _tuned(_attn_fwd, _FWD_CONFIGS)
_dkdv_tuned = _tuned(_bwd_dkdv, _DKDV_CONFIGS)
_dq_tuned = _tuned(_bwd_dq, _DQ_CONFIGS)
#: the interpreter (CPU): small blocks, so that short test sequences span several blocks
_CPU_FWD = {"BLOCK_M": 16, "BLOCK_N": 16}
_CPU_DKDV = {"BLOCK_M": 16, "BLOCK_N": 32}
_CPU_DQ = {"BLOCK_M": 32, "BLOCK_N": 16}

#: tests: launch the tuned kernels on the interpreter too (their first config: the GPU tiles)
TUNED_ON_CPU = False
_GPU_DTYPES = (torch.float16, torch.bfloat16)
_GPU_HEAD_DIMS = (64, 128)
_CPU_HEAD_DIMS = (8, 16, 32, 64, 128)


# ---- host side ---------------------------------------------------------------------------------
def _unit_last(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def check(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, causal: bool = False,
          dropout_p: float = 0.0) -> str | None:
    """Why the kernels cannot take this call (None: they can)."""
    if not all(isinstance(t, Tensor) for t in (q, k, v)) or not (q.dim() == k.dim() == v.dim() == 4):
        return "query, key and value must be 4-D (batch, heads, sequence, head_dim) tensors"
    if not (q.device == k.device == v.device):
        return "query, key and value are on different devices"
    cpu = q.device.type == "cpu"
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (_GPU_DTYPES + ((torch.float32,) if cpu else ())):
        return f"dtype {q.dtype} (key {k.dtype}, value {v.dtype}); expected float16 or bfloat16 for all three"
    d = q.shape[-1]
    if k.shape[-1] != d or v.shape[-1] != d or d not in (_CPU_HEAD_DIMS if cpu else _GPU_HEAD_DIMS):
        return f"head_dim {d} (value {v.shape[-1]}); expected one of {_CPU_HEAD_DIMS if cpu else _GPU_HEAD_DIMS}"
    b, h, m, _ = q.shape
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or k.shape[1] == 0 or h % k.shape[1]:
        return f"key/value shapes {tuple(k.shape)}/{tuple(v.shape)} do not fit query {tuple(q.shape)}"
    n = k.shape[2]
    if m == 0 or n == 0 or b * h == 0:
        return "an empty sequence or batch"
    if causal and m != n:
        return f"causal with query length {m} != key length {n}"
    if dropout_p:
        return f"dropout_p={dropout_p}; expected 0"
    if bias is not None:
        if not isinstance(bias, Tensor) or bias.device != q.device:
            return "attn_mask on another device"
        if not (bias.is_floating_point() or bias.dtype == torch.bool) or bias.dim() > 4:
            return f"attn_mask of dtype {bias.dtype} and {bias.dim()} dims"
        try:
            torch.broadcast_shapes(bias.shape, (b, h, m, n))
        except RuntimeError:
            return f"attn_mask of shape {tuple(bias.shape)} does not broadcast to {(b, h, m, n)}"
    return None


def _refuse(op: str, q: Any, k: Any, v: Any, bias: Any = None, causal: bool = False, dropout_p: float = 0.0) -> None:
    why = check(q, k, v, bias, causal, dropout_p)
    if why is not None:
        raise Unsupported(f"tritonjit.{op}: {why}")


def _bias_args(bias: Tensor | None, q: Tensor, n: int) -> tuple[Any, tuple[int, int, int, int]]:
    if bias is None:
        return q, (0, 0, 0, 0)  # never read (HAS_BIAS off): any pointer
    if bias.dtype == torch.bool:
        bias = torch.zeros(bias.shape, dtype=q.dtype, device=q.device).masked_fill_(~bias, float("-inf"))
    b, h, m, _ = q.shape
    full = bias.expand(b, h, m, n)
    return full, tuple(full.stride())  # type: ignore[return-value]


def _interpreted_bf16(q: Tensor) -> bool:
    """Triton's interpreter multiplies bf16 tiles wrongly (see matmul.py): on CPU, bf16 runs in fp32."""
    return q.device.type == "cpu" and q.dtype == torch.bfloat16


def _scale(scale: float | None, d: int) -> float:
    return float(scale) if scale is not None else 1.0 / math.sqrt(d)


def _fwd_args(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, o: Tensor, lse: Tensor, causal: bool,
              scale: float | None) -> tuple[tuple, dict]:
    """(arguments, constexprs) of _attn_fwd, blocks and tails aside."""
    b, h, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    bt, sb = _bias_args(bias, q, n)
    args = (q, k, v, bt, o, lse, _scale(scale, d) * _LOG2E, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
            *sb, *o.stride()[:3], *lse.stride()[:3], h, h // hk, m, n)
    return args, {"HEAD_DIM": d, "CAUSAL": bool(causal), "HAS_BIAS": bias is not None}


def _bwd_args(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, delta: Tensor, dq: Tensor,
              dk: Tensor, dv: Tensor, causal: bool, scale: float | None,
              bias: Tensor | None) -> tuple[tuple, tuple, tuple, dict]:
    """(arguments of _bwd_preprocess, of _bwd_dkdv, of _bwd_dq, their constexprs)."""
    b, h, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    sm_scale = _scale(scale, d)
    bt, sb = _bias_args(bias, q, n)
    common = (q, k, v, bt, do, lse, delta)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *sb, *do.stride()[:3], *lse.stride()[:3])
    kv_args = (*common, dk, dv, sm_scale * _LOG2E, sm_scale, *strides, *dk.stride()[:3], *dv.stride()[:3],
               h, hk, h // hk, m, n)
    q_args = (*common, dq, sm_scale * _LOG2E, sm_scale, *strides, *dq.stride()[:3], h, h // hk, m, n)
    pre_args = (o, do, delta, *o.stride()[:3], *do.stride()[:3], h, m)
    return pre_args, kv_args, q_args, {"HEAD_DIM": d, "CAUSAL": bool(causal), "HAS_BIAS": bias is not None}


def signatures(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False,
               bias: Tensor | None = None) -> list[tuple[Any, str, dict]]:
    """(kernel, signature, options) of every variant that the forward and backward of such
    a call may launch on a GPU (each tuned config): what a warm-up compiles, in parallel,
    before the tuner times them (contiguous outputs and gradients assumed)."""
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    b, h, m, d = q.shape
    n = k.shape[2]
    o = torch.empty_like(q)
    lse = torch.empty((b, h, m), dtype=torch.float32, device=q.device)
    fwd_args, consts = _fwd_args(q, k, v, bias, o, lse, causal, None)
    pre_args, kv_args, q_args, _ = _bwd_args(o, q, k, v, o, lse, lse, o, torch.empty_like(k), torch.empty_like(v),
                                             causal, None, bias)
    out: list[tuple[Any, str, dict]] = [(_pre, _pre.signature(*pre_args, HEAD_DIM=d, BLOCK_M=64), {})]
    for fn, configs, args in ((_fwd, _FWD_CONFIGS, fwd_args), (_dkdv, _DKDV_CONFIGS, kv_args),
                              (_dq, _DQ_CONFIGS, q_args)):
        for c in _prune(configs, {"N": n}):
            sig = fn.signature(*args, **_fixed(consts, c.kwargs, m, n))
            out.append((fn, sig, {"num_warps": c.num_warps, "num_stages": c.num_stages}))
    return out


def attention_forward(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: float | None = None,
                      bias: Tensor | None = None, out: Tensor | None = None,
                      lse: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(output, logsumexp) of softmax(q k^T * scale + bias) v; logsumexp in fp32, natural log.

    ``out`` / ``lse``: buffers to write (any strides; lse of shape (B, H, >=M)), else an
    output laid out like ``q`` and a contiguous (B, H, M) logsumexp."""
    _refuse("attention", q, k, v, bias, causal)
    return _forward(q, k, v, causal, scale, bias, out, lse)


def _forward(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None, bias: Tensor | None,
             out: Tensor | None, lse: Tensor | None) -> tuple[Tensor, Tensor]:
    """attention_forward of a call check() accepted."""
    if _interpreted_bf16(q):
        o32, lse = _forward(q.float(), k.float(), v.float(), causal, scale, bias, None, lse)
        return (o32.to(q.dtype) if out is None else out.copy_(o32)), lse
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    b, h, m, d = q.shape
    n = k.shape[2]
    o = _empty(torch.empty_like(q)) if out is None else out
    lse = _empty(torch.empty((b, h, m), dtype=torch.float32, device=q.device)) if lse is None else lse
    args, consts = _fwd_args(q, k, v, bias, o, lse, causal, scale)
    if q.device.type == "cpu" and not TUNED_ON_CPU:
        cfg = _CPU_FWD
        _run(_fwd, (cdiv(m, cfg["BLOCK_M"]), b * h, 1), args, _fixed(consts, cfg, m, n))
    else:
        _launch_tuned(_fwd_tuned, _fwd, lambda meta: (cdiv(m, meta["BLOCK_M"]), b * h, 1), args, consts, q, bias, m, n)
    return o, lse


def attention_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, *,
                       causal: bool = False, scale: float | None = None, bias: Tensor | None = None,
                       dlse: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of :func:`attention_forward`, from its output and logsumexp; each laid
    out like its input; dk and dv summed over the query heads that share a key head.
    ``dlse``: the gradient of the logsumexp output (B, H, M), where it has one."""
    _refuse("attention_backward", q, k, v, bias, causal)
    return _backward(do, q, k, v, o, lse, causal, scale, bias, dlse=dlse)


#: (kernel, dtypes, device, constexprs, M, N) -> the tuned kernel's full keyword set for such
#: a call (its config and the EVEN_* heuristics), which the plain kernel then launches with
_CHOSEN: dict[tuple, dict] = {}
_CHOSEN_MAX = 4096


def _launch_tuned(tuned: Any, plain: Any, grid: Callable[[dict], tuple], args: tuple, consts: dict, q: Tensor,
                  bias: Tensor | None, m: int, n: int) -> None:
    """Launch ``plain`` with the config ``tuned`` (its autotuned form) chose for this call.

    An autotuned kernel's launch evaluates the tuning key and the heuristics in Python on
    every call (tens of microseconds for these 30-40 arguments, more than the kernel itself
    at short sequences); the plain kernel with a fixed config takes the native launch path.
    The tuner is asked once per call key: everything its choice depends on (the key's
    HEAD_DIM, CAUSAL, HAS_BIAS and N, the tensors' dtypes, EVEN_M/EVEN_N's M and N). Inside
    a CUDA graph capture the tuner cannot time configs, so its answer there is not kept."""
    key = (plain.name, q.dtype, None if bias is None else bias.dtype, q.device, tuple(consts.items()), m, n)
    meta = _CHOSEN.get(key)
    if meta is None:
        meta = tuned.launch_kwargs(grid, *args, **consts)
        if not capturing(q.device):
            if len(_CHOSEN) >= _CHOSEN_MAX:
                _CHOSEN.clear()
            _CHOSEN[key] = meta
    _run(plain, grid(meta), args, meta)


def _empty(t: Tensor) -> Tensor:
    """``t``, a buffer just allocated and not yet written: while a planner runs the
    implementation, noted as one that a plan may allocate afresh (an output or a
    temporary; see :func:`_recorded_plan`). Returns ``t``."""
    noted = getattr(_planning, "empty", None)
    if noted is not None:
        noted[id(t)] = t
    return t


def _run(fn: Any, grid: tuple, args: tuple, meta: dict) -> None:
    """``fn[grid](*args, **meta)``, or while a planner records (see :func:`_planner`), its
    record instead of the launch."""
    rec = getattr(_planning, "rec", None)
    if rec is not None:
        rec.append((fn, grid, args, meta))
    else:
        fn[grid](*args, **meta)


def _grad_like(t: Tensor, bshd: bool) -> Tensor:
    if bshd:  # laid out (B, S, H, D), as aten's efficient and CPU flash backwards return them
        return _empty(torch.empty_permuted(t.shape, (0, 2, 1, 3), dtype=t.dtype, device=t.device))
    return _empty(torch.empty_like(t))


def _backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
              scale: float | None, bias: Tensor | None, bshd: bool = False,
              dlse: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """attention_backward of a call check() accepted; ``bshd``: gradients laid out (B, S, H, D).
    The logsumexp's gradient enters through delta: d lse / d scores is P, so the scores'
    gradient P * (dP - delta) + P * dlse is the kernels' formula with delta - dlse."""
    if _interpreted_bf16(q):
        grads = _backward(do.float(), q.float(), k.float(), v.float(), o.float(), lse, causal, scale, bias,
                          dlse=dlse)
        return tuple(_grad_like(t, bshd).copy_(g) for t, g in zip((q, k, v), grads))  # type: ignore[return-value]
    q, k, v, o, do = _unit_last(q), _unit_last(k), _unit_last(v), _unit_last(o), _unit_last(do)
    b, h, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    dq, dk, dv = _grad_like(q, bshd), _grad_like(k, bshd), _grad_like(v, bshd)
    delta = _empty(torch.empty((b, h, m), dtype=torch.float32, device=q.device))
    cpu = q.device.type == "cpu"
    pre_args, kv_args, q_args, consts = _bwd_args(do, q, k, v, o, lse, delta, dq, dk, dv, causal, scale, bias)
    _run(_pre, (cdiv(m, 64 if not cpu else 16), b * h, 1), pre_args, {"HEAD_DIM": d, "BLOCK_M": 64 if not cpu else 16})
    if dlse is not None:  # only from tritonjit::flash_attention's autograd, never inside a plan
        delta.sub_(dlse.reshape(delta.shape))
    if cpu and not TUNED_ON_CPU:
        c1, c2 = _CPU_DKDV, _CPU_DQ
        _run(_dkdv, (cdiv(n, c1["BLOCK_N"]), b * hk, 1), kv_args, _fixed(consts, c1, m, n))
        _run(_dq, (cdiv(m, c2["BLOCK_M"]), b * h, 1), q_args, _fixed(consts, c2, m, n))
    else:
        _launch_tuned(_dkdv_tuned, _dkdv, lambda meta: (cdiv(n, meta["BLOCK_N"]), b * hk, 1), kv_args, consts, q,
                      bias, m, n)
        _launch_tuned(_dq_tuned, _dq, lambda meta: (cdiv(m, meta["BLOCK_M"]), b * h, 1), q_args, consts, q, bias,
                      m, n)
    return dq, dk, dv


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None,
                bias: Tensor | None) -> Tensor:
        o, lse = attention_forward(q, k, v, causal=causal, scale=scale, bias=bias)
        ctx.save_for_backward(q, k, v, o, lse, bias)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    def backward(ctx: Any, do: Tensor) -> tuple:
        q, k, v, o, lse, bias = ctx.saved_tensors
        if bias is not None and bias.requires_grad:
            raise Unsupported("tritonjit.attention: no gradient for attn_mask; pass it without requires_grad")
        if torch.is_grad_enabled():  # create_graph: the formula in torch ops, differentiable again
            def out(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
                return _math_attention(a, b, c, ctx.causal, ctx.scale, bias)[0]

            return (*double_backward.vjp(out, (q, k, v), do), None, None, None)
        dq, dk, dv = attention_backward(do, q, k, v, o, lse, causal=ctx.causal, scale=ctx.scale, bias=bias)
        return dq, dk, dv, None, None, None


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: float | None = None,
              attn_mask: Tensor | None = None) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=causal, scale=scale,
    enable_gqa=True)`` on the Triton kernels, with autograd (no dropout). Raises
    :class:`Unsupported` for what the kernels do not take (see :func:`check`)."""
    return _Attention.apply(q, k, v, causal, scale, attn_mask)


# ---- tritonjit:: ops ---------------------------------------------------------------------------
def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                    scale: float | None = None) -> tuple[Tensor, Tensor]:
    return attention_forward(q, k, v, causal=causal, scale=scale)


def flash_attention_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                             causal: bool = False, scale: float | None = None,
                             grad_lse: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    return attention_backward(do, q, k, v, o, lse, causal=causal, scale=scale, dlse=grad_lse)


def _ref_forward(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None) -> tuple:
    b, h, m, _ = q.shape
    return torch.empty_like(q), q.new_empty((b, h, m), dtype=torch.float32)


def _ref_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool = False,
                  scale: float | None = None, grad_lse: Tensor | None = None) -> tuple:
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


#: name, schema, implementation, eager reference (for the fake): for _registry's _OPS
OPS: list[tuple[str, str, Callable, Callable]] = [
    ("flash_attention", "(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> (Tensor, Tensor)",
     flash_attention, _ref_forward),
    ("flash_attention_backward", "(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
     "bool causal=False, float? scale=None, Tensor? grad_lse=None) -> (Tensor, Tensor, Tensor)",
     flash_attention_backward, _ref_backward),
]


def register_autograd(lib: Any) -> None:
    """Autograd of ``tritonjit::flash_attention`` (its backward is ``flash_attention_backward``)."""

    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        q, k, v, causal, scale = inputs
        ctx.save_for_backward(q, k, v, output[0], output[1])
        ctx.causal, ctx.scale = causal, scale
        ctx.set_materialize_grads(False)  # an unused output's gradient is None, not zeros to read

    def backward(ctx: Any, do: Tensor | None, dlse: Tensor | None) -> tuple:
        q, k, v, o, lse = ctx.saved_tensors
        do = torch.zeros_like(o) if do is None else do
        if torch.is_grad_enabled():  # create_graph: the formula in torch ops, differentiable again
            def both(a: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
                return _math_attention(a, b, c, ctx.causal, ctx.scale, None)

            cot = (do, torch.zeros_like(lse) if dlse is None else dlse)
            return (*double_backward.vjp(both, (q, k, v), cot), None, None)
        dq, dk, dv = torch.ops.tritonjit.flash_attention_backward(do, q, k, v, o, lse, ctx.causal, ctx.scale, dlse)
        return dq, dk, dv, None, None

    _autograd.register_autograd(lib, "tritonjit::flash_attention", backward, setup_context)
    _autograd.register_grad(lib, "tritonjit::flash_attention_backward", OPS[1][1],
                            _autograd.Grad(*double_backward.grad_of(_backward_reference)))


# ---- aten routing (enable()) -------------------------------------------------------------------
def _acc(q: Tensor) -> torch.dtype:
    """The torch-ops fallback's compute dtype: fp32, float64 for float64 inputs (as aten's)."""
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _math_scores(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None,
                 bias: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Scores (B, H, M, N) in fp32 (float64 for float64 inputs), and key and value repeated
    over the query heads' groups."""
    h, m, n = q.shape[1], q.shape[2], k.shape[2]
    acc = _acc(q)
    kk = k.to(acc).repeat_interleave(h // k.shape[1], 1)
    vv = v.to(acc).repeat_interleave(h // k.shape[1], 1)
    sc = torch.matmul(q.to(acc), kk.transpose(-1, -2)) * _scale(scale, q.shape[-1])
    if bias is not None:
        sc = sc.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else sc + bias.to(acc)
    if causal:
        sc = sc.masked_fill(torch.ones(m, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return sc, kk, vv


def _math_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None,
                    bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """(output, logsumexp) in torch ops, differentiable at every order: what gradients
    under ``create_graph=True`` differentiate (the kernels' backward is not differentiable).
    Rows that every key is masked from give zeros, as the kernels do, with finite gradients."""
    sc, _, vv = _math_scores(q, k, v, causal, scale, bias)
    dead = torch.isneginf(sc).all(-1, keepdim=True)
    sc = sc.masked_fill(dead, 0.0)
    rows = torch.logsumexp(sc, -1, keepdim=True)
    p = torch.exp(sc - rows).masked_fill(dead, 0.0)
    lse = rows.masked_fill(dead, float("-inf")).squeeze(-1).to(torch.float32)
    return torch.matmul(p, vv).to(q.dtype), lse


def _backward_reference(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool = False,
                        scale: float | None = None, grad_lse: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """flash_attention_backward in torch ops: the kernels' formula from the given output and
    logsumexp, differentiable in every input (the gradient of the backward op itself)."""
    b, h, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    sc, kk, vv = _math_scores(q, k, v, causal, scale, None)
    rows = lse.to(sc.dtype)
    p = torch.exp(sc - rows.masked_fill(torch.isneginf(rows), 0.0)[..., None])
    dof = do.to(sc.dtype)
    delta = (dof * o.to(sc.dtype)).sum(-1)
    if grad_lse is not None:
        delta = delta - grad_lse.to(sc.dtype)
    ds = p * (torch.matmul(dof, vv.transpose(-1, -2)) - delta[..., None]) * _scale(scale, d)
    dk = torch.matmul(ds.transpose(-1, -2), q.to(sc.dtype)).view(b, hk, h // hk, n, d).sum(2)
    dv = torch.matmul(p.transpose(-1, -2), dof).view(b, hk, h // hk, n, d).sum(2)
    return torch.matmul(ds, kk).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _lse_rows(lse: Tensor, m: int) -> Tensor:
    """The (B, H, M) view of a logsumexp buffer in any of aten's layouts."""
    return lse[..., 0] if lse.dim() == 4 else lse[..., :m]


def _math_forward(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None, bias: Tensor | None,
                  out: Tensor | None, lse: Tensor | None) -> tuple[Tensor, Tensor]:
    """_forward in torch ops (fp32; float64 inputs in float64): for calls the kernels refuse where aten's kernel cannot
    take over (enable()'s Python registration replaces it)."""
    sc, _, vv = _math_scores(q, k, v, causal, scale, bias)
    rows = torch.logsumexp(sc, -1)
    o = torch.matmul(torch.exp(sc - rows[..., None]).nan_to_num(0.0), vv)
    out = torch.empty_like(q) if out is None else out
    out.copy_(o)
    if lse is None:
        return out, rows
    _lse_rows(lse, q.shape[2]).copy_(rows)
    return out, lse


def _math_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
                   scale: float | None, bias: Tensor | None, bshd: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """_backward in torch ops (fp32; float64 inputs in float64), from the saved logsumexp."""
    b, h, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    sc, kk, vv = _math_scores(q, k, v, causal, scale, bias)
    p = torch.exp(sc - _lse_rows(lse, m)[..., None]).nan_to_num(0.0)
    acc = _acc(q)
    do32 = do.to(acc)
    dv = torch.matmul(p.transpose(-1, -2), do32)
    dp = torch.matmul(do32, vv.transpose(-1, -2))
    ds = p * (dp - (do32 * o.to(acc)).sum(-1, keepdim=True)) * _scale(scale, d)
    dq = torch.matmul(ds, kk)
    dk = torch.matmul(ds.transpose(-1, -2), q.to(acc))
    if hk != h:
        dk, dv = (t.view(b, hk, h // hk, n, d).sum(2) for t in (dk, dv))
    return tuple(_grad_like(t, bshd).copy_(g) for t, g in zip((q, k, v), (dq, dk, dv)))  # type: ignore[return-value]


def _paths(op: str, q: Any, k: Any, v: Any, bias: Any, causal: bool, dropout_p: float) -> tuple[Any, Any]:
    """(forward, backward) for an aten call: the Triton kernels where check() accepts it.
    Otherwise Unsupported, so that the C++ operator path hands the call to aten's kernel;
    where enable() runs on Python registrations instead (aten's kernel replaced: the C++
    path not built yet, or turned off), the torch-ops fallback of a call it can compute."""
    why = check(q, k, v, bias, causal, dropout_p)
    if why is None:
        return _forward, _backward
    from . import _registry

    if _registry._State.native is None and _registry._State.lib is not None and not dropout_p and \
            all(isinstance(t, Tensor) and t.dim() == 4 and t.is_floating_point() for t in (q, k, v)):
        return _math_forward, _math_backward
    raise Unsupported(f"tritonjit.{op}: {why}")


#: a GPU call goes to tritonjit's kernels where they take at most this multiple of aten's time
ATTN_MARGIN = 1.10
#: call key -> whether tritonjit's kernels serve it (TRITONJIT_OPS_SDPA=auto), decided by the
#: forward, read by the backward (so a backward always matches the forward that saved its inputs)
_ROUTE: dict[tuple, bool] = {}
_ROUTE_MAX = 4096


def clear_routes() -> None:
    """Forget every SDPA route decision (the next forward of a call key measures again), the
    C++ path's plans made from them (see :func:`_planner`), and the audit's record of those
    that went to aten (see _policy.py). Call it after changing TRITONJIT_OPS_SDPA in a process
    that already ran SDPA under enable() (or tritonjit_ops.clear_policies(), which does this and
    resets mm's policy too): the C++ path reads the mode once per call shape."""
    _ROUTE.clear()
    from . import _native_ops

    _native_ops.clear_plans(PLANNERS)
    _policy.clear(op for op in ATEN if not op.endswith("_backward"))


def sdpa_mode() -> str:
    """TRITONJIT_OPS_SDPA: "auto" (default): on a device, each distinct SDPA call (shapes,
    dtype, causal, mask) is timed once against aten's own kernel, and the faster serves it;
    "tritonjit": tritonjit's kernels wherever they apply; "aten": aten's kernels."""
    return _policy.env_mode("TRITONJIT_OPS_SDPA", ("auto", "tritonjit", "aten"))


def _route_key(op: str, q: Tensor, k: Tensor, bias: Tensor | None, causal: bool) -> tuple:
    family = op.removesuffix("_backward")
    return (family, tuple(q.shape), tuple(k.shape), q.dtype, q.device, bool(causal),
            None if bias is None else (tuple(bias.shape), bias.dtype))


#: a planner's state (see :func:`_planner`): ``on`` while it runs an implementation; ``rec``
#: the launches recorded (instead of run) after the route decision chose tritonjit's kernels
_planning = threading.local()


def _route(op: str, q: Tensor, k: Tensor, bias: Tensor | None, causal: bool,
           ours: Callable[[], Any] | None = None, theirs: Callable[[], Any] | None = None) -> None:
    """:func:`_decide`; where a planner asks and tritonjit's kernels serve the call, the
    implementation's launches from here on are recorded for its plan instead of run."""
    _decide(op, q, k, bias, causal, ours, theirs)
    if getattr(_planning, "on", False):
        _planning.rec = []


def _decide(op: str, q: Tensor, k: Tensor, bias: Tensor | None, causal: bool,
            ours: Callable[[], Any] | None = None, theirs: Callable[[], Any] | None = None) -> None:
    """Raise Unsupported (aten's kernel serves the call) where sdpa_mode() says aten's kernel
    is the faster one. A forward (``ours``/``theirs`` given) decides once per call key, timing
    both outside graph capture; a backward follows its forward's decision (aten's where none
    was made under enable()). On the interpreter, and on enable()'s Python registrations
    (aten's kernel replaced, nothing to compare with), the kernels serve every call."""
    mode = sdpa_mode()
    if mode != "auto":
        if mode == "aten":
            raise Unsupported(f"tritonjit.{op}: TRITONJIT_OPS_SDPA=aten")
        return
    from . import _registry

    if q.device.type == "cpu" or _registry._State.native is None:
        return
    key = _route_key(op, q, k, bias, causal)
    use = _ROUTE.get(key)
    if use is None:
        if ours is None or theirs is None:
            use = False
        elif capturing(q.device) or (q.device.type == "cuda" and torch.cuda.get_sync_debug_mode() != 0):
            use = True  # no timing (it synchronizes) in a capture or under sync-debug: the kernels
        else:
            import triton.testing

            t_ours = triton.testing.do_bench(ours, rep=25)
            try:
                use = t_ours <= triton.testing.do_bench(theirs, rep=25) * ATTN_MARGIN
            except Exception:  # aten's kernel refuses this call (a layout it does not take): ours
                use = True
        if ours is not None and len(_ROUTE) < _ROUTE_MAX:
            _ROUTE[key] = use
    if not use:
        if ours is not None:  # a forward's measured choice (its backward finds it by family)
            _policy.note_aten(op, (q, k))
        raise Unsupported(f"tritonjit.{op}: aten's kernel measured faster for this call (TRITONJIT_OPS_SDPA=auto)")


def _aten_kernel(op: str, q: Tensor) -> Callable[..., Any]:
    """aten's own kernel of ``op`` for q's backend, below enable()'s BackendSelect registration."""
    key = torch._C.DispatchKey.CUDA if q.device.type == "cuda" else torch._C.DispatchKey.PrivateUse1
    overload = getattr(torch.ops.aten, op).default
    keyset = torch._C.DispatchKeySet(key)
    return lambda *a, **kw: overload.redispatch(keyset, *a, **kw)


def _seed_offset(q: Tensor, dtype: torch.dtype, seed_shape: tuple) -> tuple[Tensor, Tensor]:
    return (_empty(torch.empty(seed_shape, dtype=dtype, device=q.device)),
            _empty(torch.empty((), dtype=dtype, device=q.device)))


def _bshd(q: Tensor, d: int) -> Tensor:
    """An output (B, H, M, d) laid out (B, M, H, d), as aten's fused kernels allocate it."""
    b, h, m, _ = q.shape
    return _empty(torch.empty((b, m, h, d), dtype=q.dtype, device=q.device).transpose(1, 2))


def sdpa_flash(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, is_causal: bool = False,
               return_debug_mask: bool = False, *, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_flash_attention (CUDA's flash path of SDPA)."""
    if return_debug_mask:
        raise Unsupported("tritonjit._scaled_dot_product_flash_attention: return_debug_mask=True")
    op = "_scaled_dot_product_flash_attention"
    fwd, _ = _paths(op, q, k, v, None, is_causal, dropout_p)
    _route(op, q, k, None, is_causal, lambda: fwd(q, k, v, is_causal, scale, None, torch.empty_like(q), None),
           lambda: _aten_kernel(op, q)(q, k, v, dropout_p, is_causal, False, scale=scale))
    o, lse = fwd(q, k, v, is_causal, scale, None, _empty(torch.empty_like(q)), None)
    seed, offset = _seed_offset(q, torch.uint64, (2,))
    return (o, lse, None, None, q.shape[2], k.shape[2], seed, offset,
            torch.empty(0, dtype=q.dtype, device=q.device))


def sdpa_flash_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, cum_q: Any,
                        cum_k: Any, max_q: int, max_k: int, dropout_p: float, is_causal: bool, seed: Any,
                        offset: Any, *, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_flash_attention_backward."""
    _, bwd = _paths("_scaled_dot_product_flash_attention_backward", q, k, v, None, is_causal, dropout_p)
    _route("_scaled_dot_product_flash_attention_backward", q, k, None, is_causal)
    return bwd(do, q, k, v, o, lse, is_causal, scale, None)


def sdpa_flash_cpu(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, is_causal: bool = False, *,
                   attn_mask: Tensor | None = None, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_flash_attention_for_cpu (the interpreter backend's SDPA path)."""
    fwd, _ = _paths("_scaled_dot_product_flash_attention_for_cpu", q, k, v, attn_mask, is_causal, dropout_p)
    b, h, m, _ = q.shape
    # aten's logsumexp is in the op-math dtype: fp32, float64 for float64 inputs
    lse = torch.empty((b, m, h), dtype=_acc(q), device=q.device).transpose(1, 2)
    return fwd(q, k, v, is_causal, scale, attn_mask, torch.empty_like(q), lse)


def sdpa_flash_cpu_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, dropout_p: float,
                            is_causal: bool, *, attn_mask: Tensor | None = None,
                            scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_flash_attention_for_cpu_backward."""
    _, bwd = _paths("_scaled_dot_product_flash_attention_for_cpu_backward", q, k, v, attn_mask, is_causal,
                    dropout_p)
    return bwd(do, q, k, v, o, lse, is_causal, scale, attn_mask, True)


def sdpa_efficient(q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None, compute_log_sumexp: bool,
                   dropout_p: float = 0.0, is_causal: bool = False, *, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_efficient_attention (SDPA with an attention mask on CUDA:
    bert's padding mask); its logsumexp is (B, H, M rounded up to 32), as aten's."""
    op = "_scaled_dot_product_efficient_attention"
    fwd, _ = _paths(op, q, k, v, attn_bias, is_causal, dropout_p)
    b, h, m, d = q.shape
    rows = cdiv(m, 32) * 32
    lse = _empty(torch.empty((b, h, rows), dtype=torch.float32, device=q.device))
    _route(op, q, k, attn_bias, is_causal, lambda: fwd(q, k, v, is_causal, scale, attn_bias, _bshd(q, d), lse),
           lambda: _aten_kernel(op, q)(q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale=scale))
    o, _ = fwd(q, k, v, is_causal, scale, attn_bias, _bshd(q, d), lse)
    seed, offset = _seed_offset(q, torch.int64, ())
    return o, lse if compute_log_sumexp else lse[:, :, :0], seed, offset


def sdpa_efficient_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None, o: Tensor,
                            lse: Tensor, seed: Any, offset: Any, dropout_p: float, grad_input_mask: list[bool],
                            is_causal: bool = False, *, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_efficient_attention_backward (no gradient of the bias)."""
    if attn_bias is not None and len(grad_input_mask) > 3 and grad_input_mask[3]:
        raise Unsupported("tritonjit._scaled_dot_product_efficient_attention_backward: a gradient of attn_bias")
    _, bwd = _paths("_scaled_dot_product_efficient_attention_backward", q, k, v, attn_bias, is_causal, dropout_p)
    if lse.shape[-1] < q.shape[2]:
        raise Unsupported("tritonjit._scaled_dot_product_efficient_attention_backward: no logsumexp saved")
    _route("_scaled_dot_product_efficient_attention_backward", q, k, attn_bias, is_causal)
    dq, dk, dv = bwd(do, q, k, v, o, lse, is_causal, scale, attn_bias, True)
    return dq, dk, dv, None


def sdpa_cudnn(q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None, compute_log_sumexp: bool,
               dropout_p: float = 0.0, is_causal: bool = False, return_debug_mask: bool = False, *,
               scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_cudnn_attention (where torch prefers cuDNN's kernel); its
    logsumexp is (B, H, M, 1), as aten's."""
    if return_debug_mask:
        raise Unsupported("tritonjit._scaled_dot_product_cudnn_attention: return_debug_mask=True")
    op = "_scaled_dot_product_cudnn_attention"
    fwd, _ = _paths(op, q, k, v, attn_bias, is_causal, dropout_p)
    b, h, m, _ = q.shape
    lse = _empty(torch.empty((b, h, m, 1), dtype=torch.float32, device=q.device))
    _route(op, q, k, attn_bias, is_causal, lambda: fwd(q, k, v, is_causal, scale, attn_bias, torch.empty_like(q), lse),
           lambda: _aten_kernel(op, q)(q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, False,
                                       scale=scale))
    o, _ = fwd(q, k, v, is_causal, scale, attn_bias, _empty(torch.empty_like(q)), lse)
    seed, offset = _seed_offset(q, torch.int64, ())
    return o, lse, None, None, m, k.shape[2], seed, offset, None


def sdpa_cudnn_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, seed: Any, offset: Any,
                        attn_bias: Tensor | None, cum_q: Any, cum_k: Any, max_q: int, max_k: int, dropout_p: float,
                        is_causal: bool, *, scale: float | None = None) -> tuple:
    """aten::_scaled_dot_product_cudnn_attention_backward."""
    _, bwd = _paths("_scaled_dot_product_cudnn_attention_backward", q, k, v, attn_bias, is_causal, dropout_p)
    _route("_scaled_dot_product_cudnn_attention_backward", q, k, attn_bias, is_causal)
    return bwd(do, q, k, v, o, lse, is_causal, scale, attn_bias)


def _planner(op: str) -> Callable[..., P.Plan | None]:
    """The C++ path's planner of an SDPA overload on a device. Without one, every call ran its
    Python implementation: checks, allocations, the launch configuration and an exception
    where aten's kernel serves it, tens of microseconds of host time per call.

    It runs the implementation once per call shape. Up to the route decision (:func:`_route`,
    which times a new forward call key once) the implementation runs as usual; where aten's
    kernel serves the call shape (check() refuses it, TRITONJIT_OPS_SDPA=aten, or aten measured
    faster) the plan is aten's, and later calls go from C++ to aten's kernel. Where
    tritonjit's kernels serve it, the launches after the decision are recorded instead of run,
    and :func:`_recorded_plan` makes them the call shape's plan: later calls allocate and launch
    in C++. None (each call runs the Python implementation) where the recording cannot be a
    plan, where it was made inside a CUDA graph capture (the configs it holds were not tuned,
    and :func:`_launch_tuned` keeps none made there), or where the implementation raised
    anything else (bad input: it raises again, and aten's own error follows, as before)."""
    impl = ATEN[op]

    def plan(*args: Any, **kwargs: Any) -> P.Plan | None:
        _planning.on, _planning.rec, _planning.empty = True, None, {}
        try:
            result = impl(*args, **kwargs)
            rec, empty = _planning.rec, _planning.empty
        except Unsupported:
            return P.aten_plan()
        except Exception:  # bad input
            return None
        finally:
            _planning.on, _planning.rec, _planning.empty = False, None, None
        if rec is None:
            return None
        if isinstance(args[0], Tensor) and capturing(args[0].device):  # args[0]: q, or the gradient
            return None  # inside a CUDA graph capture the tuner could not time: no config to keep
        return _recorded_plan(args, rec, result, empty)

    plan.__name__ = plan.__qualname__ = f"plan_{op}"
    return plan


def _recorded_plan(call: tuple, rec: list, result: Any, empty: dict[int, Tensor]) -> P.Plan | None:
    """The plan of a call whose launches ``rec`` recorded (kernel, grid, arguments, keywords)
    and that returned ``result``: the call's tensor arguments become In(i) (a view at one's
    address, the expanded attention mask, that tensor too), the returned tensors outputs laid
    out as they were, the returned ints constants (the key fixes the shapes they come from),
    and other tensors the launches got (the backward's delta) temporaries.

    An output or a temporary must be a buffer the implementation allocated empty
    (:func:`_empty`, noted in ``empty``) that nothing but the recorded launches wrote (its
    version counter untouched), or hold no element: a plan allocates it afresh, so a tensor
    holding data computed outside the launches (a copy made contiguous, a converted bool
    mask) cannot be one. None where anything would not hold for every call of the key: such
    a tensor, two arguments at one address (the plan could not tell them apart), a buffer
    that is not dense."""
    inputs = [(i, t) for i, t in enumerate(call) if isinstance(t, Tensor)]
    at_address: dict[int, int] = {}
    for i, t in inputs:
        if t.numel():
            if t.data_ptr() in at_address:
                return None
            at_address[t.data_ptr()] = i
    refs: dict[int, Any] = {id(t): P.In(i) for i, t in inputs}
    taken = {t.untyped_storage().data_ptr() for _, t in inputs if t.numel()}
    outputs: list[P.Buffer] = []
    temps: list[P.Buffer] = []  # (every tensor whose id refs holds is alive: in call, result or rec)

    def fresh(t: Tensor, into: list[P.Buffer], ref: Callable[[int], Any]) -> Any:
        if t.numel() and (empty.get(id(t)) is not t or t._version != 0):
            return None  # data made outside the recorded launches
        buf = P.Buffer.like(t)
        if buf is None or id(t) in refs or (t.numel() and t.untyped_storage().data_ptr() in taken):
            return None
        if t.numel():
            taken.add(t.untyped_storage().data_ptr())
        refs[id(t)] = r = ref(len(into))
        into.append(buf)
        return r

    res: list[Any] = []
    for r in result if isinstance(result, tuple) else (result,):
        if r is None:
            res.append(-1)
        elif isinstance(r, Tensor):
            if fresh(r, outputs, P.Out) is None:
                return None
            res.append(len(outputs) - 1)
        elif isinstance(r, int):
            res.append(P.Const(r))
        else:
            return None
    launches = []
    for fn, grid, args, meta in rec:
        conv = []
        for a in args:
            if isinstance(a, Tensor):
                ref = refs.get(id(a))
                if ref is None and a.numel() and a.data_ptr() in at_address:
                    ref = P.In(at_address[a.data_ptr()])
                if ref is None:
                    ref = fresh(a, temps, P.Tmp)
                if ref is None:
                    return None
                conv.append(ref)
            elif a is None or isinstance(a, (bool, int, float)):
                conv.append(a)
            else:
                return None
        meta = dict(meta)
        launches.append(P.launch(fn, grid, *conv, num_warps=meta.pop("num_warps", None),
                                 num_stages=meta.pop("num_stages", None), **meta))
    return P.Plan(tuple(outputs), tuple(launches), tuple(res), tuple(temps))


#: aten overload -> implementation, for enable() (calls they refuse go to aten's kernel)
ATEN: dict[str, Any] = {
    "_scaled_dot_product_flash_attention": sdpa_flash,
    "_scaled_dot_product_flash_attention_backward": sdpa_flash_backward,
    "_scaled_dot_product_flash_attention_for_cpu": sdpa_flash_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": sdpa_flash_cpu_backward,
    "_scaled_dot_product_efficient_attention": sdpa_efficient,
    "_scaled_dot_product_efficient_attention_backward": sdpa_efficient_backward,
    "_scaled_dot_product_cudnn_attention": sdpa_cudnn,
    "_scaled_dot_product_cudnn_attention_backward": sdpa_cudnn_backward,
}

#: aten overload -> planner of the C++ operator path: the device paths, whose calls ask
#: :func:`_route` (the CPU flash path has no route decision: its calls are all tritonjit's)
PLANNERS: dict[str, Callable[..., P.Plan | None]] = {op: _planner(op) for op in ATEN if "_for_cpu" not in op}
