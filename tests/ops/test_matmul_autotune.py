"""The autotuned GPU path of mm/bmm/addmm, checked on CPU.

Every config cross-compiles for sm_90 (bf16; fp32 for the fp32 configs) and fits an
A100's shared memory; the prune rules keep few configs for small problems; and the
tuned kernel (callable grid, EVEN_K heuristic, log2 key buckets) gives torch's results
on the interpreter, with tuning forced on and a fake timer (nothing is timed for real).
"""
from __future__ import annotations

import pytest
import torch
import triton
import tritonjit
import tritonjit_ops as T
from _util import close
from tritonjit import _autotune
from tritonjit_ops import matmul

SMEM_A100 = 166912  # bytes of shared memory a block may opt in to on sm_80 (sm_90: 232448)


def _shape(c: triton.Config) -> tuple:
    return c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    d = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(d))
    monkeypatch.delenv("TRITONJIT_CACHE_DIR", raising=False)
    monkeypatch.delitem(triton.knobs.cache.__dict__, "dir", raising=False)
    return d


def test_configs_include_the_defaults():
    got = [_shape(c) for c in matmul.MM_CONFIGS]
    for default in [(128, 256, 64, 8, 3), (64, 64, 64, 4, 4), (128, 128, 32, 8, 3)]:
        assert default in got
    assert len(set(got)) == len(got)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_every_config_cross_compiles_for_sm90(dtype, fresh_cache):
    f = tritonjit.function(matmul._mm_kernel)
    a = torch.empty(1, 64, 64, dtype=dtype)
    args = (a, a, a, a, 4096, 4096, 4096) + (4096 * 4096, 4096, 1) * 3 + (4096, 1, 1.0, 0.0)
    configs = [c for c in matmul.MM_CONFIGS if dtype != torch.float32 or c.kwargs["BLOCK_K"] == 32]
    for cfg in configs:
        sig = f.signature(*args, HAS_BIAS=True, SCALE=True, EVEN_K=True, PRECISION="tf32", DOT_F32=False,
                          **cfg.kwargs)
        compiled = f.compile(sig, target="cuda:90", num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        assert compiled.binary and compiled.shared <= SMEM_A100, (_shape(cfg), compiled.shared)


@pytest.mark.parametrize("dtype,mnk,expected", [
    (torch.bfloat16, (256, 256, 256), [(64, 64), (64, 128), (128, 64)]),
    (torch.float16, (16, 8192, 8192), [(64, 64), (64, 128)]),
    (torch.bfloat16, (8192, 8192, 8192), [(128, 256), (64, 64), (128, 128), (256, 128), (64, 128), (128, 64)]),
    (torch.float32, (256, 256, 256), [(64, 128), (64, 64)]),
    (torch.float32, (8192, 16, 8192), [(64, 64)]),
    (torch.float32, (4096, 4096, 4096), [(128, 128), (64, 128), (64, 64)]),
])
def test_prune_keeps_configs_of_the_dtype_that_fit_the_problem(dtype, mnk, expected):
    m, n, k = mnk
    kept = matmul._prune(matmul.MM_CONFIGS, {"a": torch.empty(1, dtype=dtype), "M": m, "N": n, "K": k})
    assert [_shape(c)[:2] for c in kept] == expected
    assert {c.kwargs["BLOCK_K"] for c in kept} == {128 // torch.empty(0, dtype=dtype).element_size()}


def test_small_problems_and_the_interpreter_do_not_take_the_tuned_path():
    cpu = torch.empty(1)
    assert not matmul._tuned(cpu, 1 << 40)
    gpu_like = torch.empty(1, device="meta")
    assert not matmul._tuned(gpu_like, matmul.TUNE_MIN_WORK - 1) and matmul._tuned(gpu_like, matmul.TUNE_MIN_WORK)


@pytest.fixture
def tuned_on_cpu(fresh_cache, monkeypatch):
    """mm/bmm/addmm through _mm_tuned on the interpreter, tuning forced on, a fake timer
    that prefers the wide 64x128 tile (so the grid must follow the chosen BLOCK_M/N)."""
    monkeypatch.setattr(matmul, "_tuned", lambda a, work: True)
    monkeypatch.setattr(_autotune, "tunes_on", lambda backend: True)
    _autotune._tuners.pop(id(matmul._mm_tuned), None)
    timed = []

    def timer(call, cfg):
        call()
        timed.append(_shape(cfg))
        return 1.0 if _shape(cfg)[:2] == (64, 128) else 2.0

    with _autotune.use_timer(timer):
        yield timed
    _autotune._tuners.pop(id(matmul._mm_tuned), None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tuned_path_matches_torch_and_tunes_once_per_bucket(tuned_on_cpu, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    a, b = torch.randn(100, 100, dtype=dtype), torch.randn(100, 100, dtype=dtype)
    close(T.mm(a, b), torch.mm(a, b), **tol)  # K=100: masked K loop
    (chosen,) = _autotune.tuner_of(matmul._mm_tuned).chosen.values()
    assert _shape(chosen)[:2] == (64, 128)
    tried = len(tuned_on_cpu)
    assert tried == (2 if dtype == torch.float32 else 3) and (64, 128) in [s[:2] for s in tuned_on_cpu]
    a2, b2 = torch.randn(120, 96, dtype=dtype), torch.randn(96, 90, dtype=dtype)
    close(T.mm(a2, b2), torch.mm(a2, b2), **tol)  # the same (128, 128, 128) bucket: not tuned again; EVEN_K
    bias = torch.randn(90, dtype=dtype)
    close(T.addmm(bias, a2, b2, beta=0.5, alpha=2.0), torch.addmm(bias, a2, b2, beta=0.5, alpha=2.0), **tol)
    x, y = torch.randn(3, 70, 80, dtype=dtype), torch.randn(3, 80, 110, dtype=dtype)
    close(T.bmm(x, y), torch.bmm(x, y), **tol)
    assert len(tuned_on_cpu) == tried
    a3 = torch.randn(300, 100, dtype=dtype)
    close(T.mm(a3, b), torch.mm(a3, b), **tol)  # M in the 512 bucket: tuned again
    assert len(tuned_on_cpu) > tried
