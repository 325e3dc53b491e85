"""mm, bmm and addmm in fp16, bf16 and fp32 with fp32 accumulation.

One batched kernel with grouped tile order (for L2 reuse). M/N edges wrap with
a modulo instead of masking the loads, and the K loop is unmasked when
BLOCK_K divides K, which keeps the inner loop identical to the dense case.
fp32 inputs use IEEE products unless torch allows TF32, matching torch.mm.

On a GPU, problems of at least ``TUNE_MIN_WORK`` multiply-adds are autotuned per
device through tritonjit (``_mm_tuned``): the key is (M, N, K) rounded up to powers
of two, the precision and the dtypes, so nearby shapes share one tuned config, and
the choice is stored on disk. ``_prune`` leaves only the configs that fit the dtype
and the problem. Smaller problems (tuning would cost more than it saves) and the CPU
interpreter use the hand-picked config of ``_config`` and the untuned ``_mm``.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, check_same_device, jit, next_pow2

Tensor = torch.Tensor
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _mm_kernel(
    a, b, c, bias, M, N, K,
    s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn, s_im, s_in,
    alpha, beta,
    HAS_BIAS: tl.constexpr, SCALE: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr,
    DOT_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    pa = a + batch * s_ab + ram[:, None] * s_am + rk[None, :] * s_ak
    pb = b + batch * s_bb + rk[:, None] * s_bk + rbn[None, :] * s_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            xa = tl.load(pa)
            xb = tl.load(pb)
        else:
            kk = k * BLOCK_K + rk
            xa = tl.load(pa, mask=(kk < K)[None, :], other=0.0)
            xb = tl.load(pb, mask=(kk < K)[:, None], other=0.0)
        if DOT_F32:  # Triton's interpreter multiplies bf16 tiles wrongly; fp32 is exact for them
            xa = xa.to(tl.float32)
            xb = xb.to(tl.float32)
        acc = tl.dot(xa, xb, acc, input_precision=PRECISION)
        pa += BLOCK_K * s_ak
        pb += BLOCK_K * s_bk
    if SCALE:
        acc = acc * alpha
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    if HAS_BIAS:
        bv = tl.load(bias + rm[:, None] * s_im + rn[None, :] * s_in, mask=mask, other=0.0).to(tl.float32)
        acc = acc + beta * bv
    pc = c + batch * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(pc, acc.to(c.dtype.element_ty), mask=mask)


_mm = jit(_mm_kernel)

#: problems with fewer multiply-adds (batch * M * N * K) than this are not tuned
TUNE_MIN_WORK = 1 << 24


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                         num_warps=warps, num_stages=stages)


#: Hopper/Ampere tiles, _config's hand-picked defaults among them. BLOCK_K * element size
#: is 128 bytes: BLOCK_K 64 for fp16/bf16 (the first six), 32 for fp32 (the last three)
MM_CONFIGS = [
    _cfg(128, 256, 64, 8, 3), _cfg(64, 64, 64, 4, 4), _cfg(128, 128, 64, 4, 4), _cfg(256, 128, 64, 8, 3),
    _cfg(64, 128, 64, 4, 4), _cfg(128, 64, 64, 4, 4),
    _cfg(128, 128, 32, 8, 3), _cfg(64, 128, 32, 4, 4), _cfg(64, 64, 32, 4, 4),
]


def _prune(configs: list, nargs: dict, **kwargs) -> list:
    """early_config_prune of _mm_tuned: keep the configs

    - made for the dtype: BLOCK_K * element size == 128 bytes;
    - whose tile is not much larger than the problem: BLOCK_M <= next_pow2(M) and
      BLOCK_N <= next_pow2(N) (the smallest tile always passes);
    - that make enough programs: at least half of min(most tiles any config makes, 128),
      so a problem that fills few SMs does not try the big tiles.

    A problem just above TUNE_MIN_WORK keeps 1-3 configs; 8192^3 keeps all 6 of its dtype.
    """
    m, n = nargs["M"], nargs["N"]
    size = nargs["a"].element_size()
    mine = [c for c in configs if c.kwargs["BLOCK_K"] * size == 128] or list(configs)
    min_m = min(c.kwargs["BLOCK_M"] for c in mine)
    min_n = min(c.kwargs["BLOCK_N"] for c in mine)
    fits = [c for c in mine if c.kwargs["BLOCK_M"] <= max(min_m, next_pow2(m))
            and c.kwargs["BLOCK_N"] <= max(min_n, next_pow2(n))] or mine[-1:]

    def tiles(c: triton.Config) -> int:
        return cdiv(m, c.kwargs["BLOCK_M"]) * cdiv(n, c.kwargs["BLOCK_N"])

    enough = min(max(tiles(c) for c in fits), 128) / 2
    return [c for c in fits if tiles(c) >= enough]


_mm_tuned = jit(
    triton.autotune(configs=MM_CONFIGS, key=["M", "N", "K", "PRECISION"],
                    prune_configs_by={"early_config_prune": _prune})(
        triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})(_mm_kernel)),
    key_buckets={"M": "log2", "N": "log2", "K": "log2"},
)


def _config(on_gpu: bool, dtype: torch.dtype, m: int, n: int, k: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of the untuned path (CPU, small problems)."""
    if not on_gpu:
        return 16, 16, 16, 1, 1
    if dtype == torch.float32:
        return 128, 128, 32, 8, 3
    if m >= 1024 and n >= 1024:
        return 128, 256, 64, 8, 3
    return 64, 64, 64, 4, 4


def _precision(dtype: torch.dtype) -> str:
    if dtype != torch.float32:
        return "tf32"  # ignored for 16-bit inputs
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"


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


def _launch(a: Tensor, b: Tensor, c: Tensor, bias: Tensor | None, alpha, beta, scale: bool) -> Tensor:
    bsz, m, k = a.shape
    n = b.shape[2]
    if c.numel() == 0:
        return c
    if k == 0:
        c.zero_() if bias is None else c.copy_(bias.expand_as(c) * beta)
        return c
    on_gpu = a.device.type != "cpu"
    si = (bias.stride(-2), bias.stride(-1)) if bias is not None else (0, 0)
    args = (a, b, c, bias if bias is not None else c, m, n, k,
            a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
            c.stride(0), c.stride(1), c.stride(2), si[0], si[1], alpha, beta)
    dot_f32 = not on_gpu and a.dtype == torch.bfloat16
    if _tuned(a, bsz * m * n * k):  # config tuned per device; EVEN_K follows the chosen BLOCK_K
        _mm_tuned[lambda meta: (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]), bsz)](
            *args, HAS_BIAS=bias is not None, SCALE=scale, PRECISION=_precision(a.dtype), DOT_F32=dot_f32)
        return c
    bm, bn, bk, warps, stages = _config(on_gpu, a.dtype, m, n, k)
    if not on_gpu:  # small tiles keep the interpreter fast; don't over-pad tiny problems
        bm, bn, bk = (max(16, min(x, next_pow2(d))) for x, d in ((32, m), (32, n), (32, k)))
    grid = (cdiv(m, bm) * cdiv(n, bn), bsz)
    _mm[grid](*args, HAS_BIAS=bias is not None, SCALE=scale, EVEN_K=k % bk == 0, PRECISION=_precision(a.dtype),
              DOT_F32=dot_f32, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


def _tuned(a: Tensor, work: int) -> bool:
    """Whether a launch takes the autotuned kernel: on a device, with at least TUNE_MIN_WORK
    multiply-adds (the interpreter never does: its tiles stay small and it never tunes)."""
    return a.device.type != "cpu" and work >= TUNE_MIN_WORK


def mm(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for 2-D a (M, K) and b (K, N); any strides."""
    _check("mm", a, b, 2)
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    _launch(a.unsqueeze(0), b.unsqueeze(0), c.unsqueeze(0), None, 1.0, 0.0, False)
    return c


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
    use_bias = beta != 0
    _launch(a.unsqueeze(0), b.unsqueeze(0), c.unsqueeze(0), bias2 if use_bias else None,
            float(alpha), float(beta), alpha != 1)
    return c
