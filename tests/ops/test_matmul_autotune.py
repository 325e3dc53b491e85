"""The GPU path of mm/bmm/addmm, checked on CPU: configs, pruning, plans, the tuned path.

Every config cross-compiles for sm_90 (16-bit and fp32, each in one of the four
layouts, the split-K variant and its reduce kernel too) within sm_90's shared memory;
the prune rules keep the configs of the problem's regime; ``choose`` gives skinny
problems skinny tiles (and split-K where the tiles cannot fill the device), tunes the
rest, and never hands a TMA config to operands TMA cannot read; and the tuned kernel
(callable grid, EVEN_K heuristic, log2 key buckets) gives torch's results on the
interpreter, with tuning forced on and a fake timer (nothing is timed for real).
"""
from __future__ import annotations

import pytest
import torch
import triton
import tritonjit
import tritonjit_ops as T
from _util import close
from tritonjit import _autotune
from tritonjit_ops import _policy, matmul

SMEM_SM90 = 232448  # bytes of shared memory a block may opt in to on sm_90
LAYOUTS = {  # (a strides, b strides) of a (M, K) and b (K, N), M = N = K = 4096
    "NN": ((4096, 1), (4096, 1)), "NT": ((4096, 1), (1, 4096)),  # NT: b = W.t() (nn.Linear)
    "TN": ((1, 4096), (4096, 1)), "TT": ((1, 4096), (1, 4096)),  # TN: a = x.t() (grad_W)
}


def _shape(c: triton.Config) -> tuple:
    return c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages


def _full(c: triton.Config) -> tuple:
    """_shape, TMA, PERSISTENT: what make_plan takes."""
    return _shape(c) + (c.kwargs["TMA"], c.kwargs["PERSISTENT"])


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    d = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(d))
    monkeypatch.delenv("TRITONJIT_CACHE_DIR", raising=False)
    monkeypatch.delitem(triton.knobs.cache.__dict__, "dir", raising=False)
    return d


def test_configs_include_the_defaults_and_are_distinct_per_family():
    got = [_shape(c) for c in matmul.MM_CONFIGS]
    for default in [(128, 256, 64, 8, 3), (64, 64, 64, 4, 4), (128, 128, 32, 8, 3), (16, 64, 128, 4, 4),
                    (16, 16, 256, 4, 4)]:
        assert default in got
    for family in (matmul.LARGE_16, matmul.LARGE_16_TMA, matmul.LARGE_32, matmul.SKINNY_16, matmul.SKINNY_32):
        shapes = [_full(c) for c in family]
        assert len(set(shapes)) == len(shapes)
    assert not any(c.kwargs["PERSISTENT"] for c in matmul.SKINNY_16 + matmul.SKINNY_32)
    assert all(c.kwargs["TMA"] for c in matmul.LARGE_16_TMA)
    assert not any(c.kwargs["TMA"] for c in matmul.MM_CONFIGS if c not in matmul.LARGE_16_TMA)


def _signature(f, dtype, layout: str, cfg: tuple, split: int = 1):
    m = n = k = 4096
    sa, sb = LAYOUTS[layout]
    plan = matmul.make_plan(m, n, k, 1, dtype, sa, sb, True, "cuda", cfg, split, scale=True)
    meta = dict(plan.meta)
    warps, stages = meta.pop("num_warps"), meta.pop("num_stages")
    t = torch.empty(1, 64, 64, dtype=dtype)
    c = torch.empty(1, 64, 64, dtype=torch.float32 if split > 1 else dtype)
    args = (t, t, c, t, m, n, k, m * k, *sa, k * n, *sb, m * n, n, 1, 0, n, 1, 1.0, 0.0)
    return f.signature(*args, **meta), warps, stages


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_every_config_cross_compiles_for_sm90(dtype, fresh_cache):
    """Each config of the dtype once, the layouts taken in turn (all four covered)."""
    f = tritonjit.function(matmul._mm_kernel)
    families = (matmul.LARGE_16 + matmul.LARGE_16_TMA + matmul.SKINNY_16 if dtype != torch.float32
                else matmul.LARGE_32 + matmul.SKINNY_32)
    for i, c in enumerate(families):
        cfg = _full(c)
        layout = list(LAYOUTS)[i % 4]
        sig, warps, stages = _signature(f, dtype, layout, cfg)
        compiled = f.compile(sig, target="cuda:90", num_warps=warps, num_stages=stages)
        assert compiled.binary and compiled.shared <= SMEM_SM90, (cfg, layout, compiled.shared)
        if c.kwargs["TMA"]:
            assert "cp.async.bulk.tensor" in compiled.asm["ptx"], (cfg, layout)


def test_split_k_and_reduce_cross_compile_for_sm90(fresh_cache):
    f = tritonjit.function(matmul._mm_kernel)
    sig, warps, stages = _signature(f, torch.bfloat16, "NT", (16, 32, 256, 4, 4), split=4)
    assert f.compile(sig, target="cuda:90", num_warps=warps, num_stages=stages).binary
    plan = matmul.make_plan(16, 1024, 1024, 1, torch.bfloat16, (1024, 1), (1, 1024), True, "cuda",
                            (16, 32, 256, 4, 4), 4)
    r = tritonjit.function(matmul._splitk_reduce_kernel)
    ws, c = torch.empty(4, 16, 1024), torch.empty(16, 1024, dtype=torch.bfloat16)
    meta = dict(plan.reduce_meta)
    warps = meta.pop("num_warps")
    sig = r.signature(ws, c, c, 16, 1024, 16 * 1024, 1024, 1, 0, 0, 1, 1.0, 1.0, **meta)
    assert r.compile(sig, target="cuda:90", num_warps=warps).binary


def _prune(dtype, m, n, k):
    return matmul._prune(matmul.MM_CONFIGS, {"a": torch.empty(1, dtype=dtype), "M": m, "N": n, "K": k})


@pytest.mark.parametrize("dtype,mnk,expected", [
    (torch.bfloat16, (8192, 8192, 8192), [(128, 256), (64, 64), (128, 128), (256, 128), (64, 128), (128, 64),
                                          (128, 128), (64, 256), (128, 256), (128, 128)]),
    (torch.bfloat16, (8192, 1024, 1024), [(128, 256), (64, 64), (128, 128), (256, 128), (64, 128), (128, 64),
                                          (128, 128), (64, 256), (128, 256), (128, 128)]),
    (torch.float32, (8192, 16, 8192), [(64, 64), (128, 64)]),
    (torch.float32, (4096, 4096, 4096), [(128, 128), (64, 128), (64, 64), (128, 64)]),
    (torch.bfloat16, (128, 32000, 1024), [(128, 256), (64, 64), (128, 128), (64, 128), (128, 64), (128, 128),
                                          (64, 256), (128, 256), (128, 128)]),
])
def test_prune_large_keeps_tiles_that_fit_the_problem(dtype, mnk, expected):
    kept = _prune(dtype, *mnk)
    assert [_shape(c)[:2] for c in kept] == expected
    assert {c.kwargs["BLOCK_K"] for c in kept} == {128 // dtype.itemsize}
    assert not any(c.kwargs["TMA"] for c in kept)  # TMA configs only with TRITONJIT_MM_TMA=1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("m,bm", [(1, 16), (4, 16), (16, 16), (17, 32), (32, 32), (40, 64), (64, 64)])
def test_prune_skinny_matches_block_m_to_m(dtype, m, bm):
    kept = _prune(dtype, m, 4096, 4096)
    assert {c.kwargs["BLOCK_M"] for c in kept} == {bm}
    assert [_shape(c)[1:] for c in kept] == [_shape(c)[1:] for c in matmul.SKINNY_16 if c.kwargs["BLOCK_M"] == 16] \
        if dtype != torch.float32 else [_shape(c)[1:] for c in matmul.SKINNY_32 if c.kwargs["BLOCK_M"] == 16]
    assert all(c.kwargs["BLOCK_K"] * dtype.itemsize >= 128 and c.kwargs["BLOCK_N"] <= 128 for c in kept)


def test_prune_medium_adds_skinny_tiles_when_the_large_ones_are_too_few():
    kept = _prune(torch.bfloat16, 128, 1024, 1024)  # 128x1024: at most 32 large tiles; then those making >= 64
    assert [_shape(c)[:3] for c in kept] == [(64, 32, 256), (64, 32, 128), (64, 16, 256)]


def test_prune_counts_a_bmms_programs_over_its_batch():
    """64 attention heads of 256 x 256 scores (K = 64): their tiles times the batch fill the
    device, so the large tiles stay (one matrix's 4 tiles alone took the 64 x 32 tiles with K
    tiles of 256: 1.69x eager on an H100); one such matrix still takes the small tiles."""
    batched = matmul._prune(matmul.MM_CONFIGS, {"a": torch.empty(64, 256, 64, dtype=torch.bfloat16), "M": 256,
                                                "N": 256, "K": 64})
    single = matmul._prune(matmul.MM_CONFIGS, {"a": torch.empty(256, 64, dtype=torch.bfloat16), "M": 256,
                                               "N": 256, "K": 64})
    assert {c.kwargs["BLOCK_K"] for c in batched} == {64} and (128, 128) in [_shape(c)[:2] for c in batched]
    assert [_shape(c)[:3] for c in single] == [(64, 32, 256), (64, 32, 128), (64, 16, 256)]


def test_an_mm_and_a_bmm_of_one_shape_are_tuned_apart():
    from tritonjit._autotune import layers_of, tuning_key

    (_, at), _ = layers_of(matmul._mm_tuned.wrapped)
    kw = dict(HAS_BIAS=False, SCALE=False, PRECISION="tf32", DOT_F32=False, A_KC=True, B_KC=False, SPLIT_K=1)
    a2, a3 = torch.empty(256, 64, dtype=torch.bfloat16), torch.empty(64, 256, 64, dtype=torch.bfloat16)
    c2, c3 = torch.empty(256, 256, dtype=torch.bfloat16), torch.empty(64, 256, 256, dtype=torch.bfloat16)
    mm = tuning_key(at, matmul._args(a2, a2.t(), c2, None, 256, 256, 64, 1.0, 0.0), kw, matmul._mm_tuned.key_buckets)
    bmm = tuning_key(at, matmul._args(a3, a3.transpose(1, 2), c3, None, 256, 256, 64, 1.0, 0.0), kw,
                     matmul._mm_tuned.key_buckets)
    assert mm != bmm and mm[:3] == bmm[:3] == (256, 256, 64)


def test_prune_offers_tma_configs_only_when_enabled_and_readable(monkeypatch):
    a = torch.empty(64, 64, dtype=torch.bfloat16)
    nargs = {"a": a, "b": a, "M": 4096, "N": 4096, "K": 4096, "s_ab": 4096 * 4096, "s_am": 4096, "s_ak": 1,
             "s_bb": 4096 * 4096, "s_bk": 1, "s_bn": 4096}
    assert not any(c.kwargs["TMA"] for c in matmul._prune(matmul.MM_CONFIGS, nargs))
    monkeypatch.setenv("TRITONJIT_MM_TMA", "1")
    assert sum(c.kwargs["TMA"] for c in matmul._prune(matmul.MM_CONFIGS, nargs)) == len(matmul.LARGE_16_TMA)
    odd = dict(nargs, s_am=4095)  # rows not 16-byte aligned: no descriptor can describe a
    assert not any(c.kwargs["TMA"] for c in matmul._prune(matmul.MM_CONFIGS, odd))


def test_tma_ok():
    ok = matmul.tma_ok
    assert ok(2, (0, 1024, 1), (0, 1, 1024), 16, 1024, 1024, True)  # x @ W.t()
    assert ok(2, (0, 1, 8192), (0, 1024, 1), 1024, 1024, 8192, True)  # grad_out.t() @ x
    assert not ok(2, (0, 1024, 1), (0, 1, 1024), 16, 1024, 1024, False)  # a base pointer not 16-byte aligned
    assert not ok(4, (0, 1024, 1), (0, 1, 1024), 16, 1024, 1024, True)  # fp32
    assert not ok(2, (0, 770, 1), (0, 1, 770), 16, 770, 770, True)  # rows of 1540 bytes
    assert not ok(2, (0, 2048, 2), (0, 1, 1024), 16, 1024, 1024, True)  # no unit stride in a
    assert not ok(2, (1028, 1024, 1), (0, 1, 1024), 16, 1024, 1024, True)  # batch stride of 2056 bytes


def test_small_problems_and_the_interpreter_are_not_tuned():
    assert not matmul._tuned(torch.device("cpu"), 1 << 40)
    assert not matmul._tuned("cuda", matmul.TUNE_MIN_WORK - 1) and matmul._tuned("cuda", matmul.TUNE_MIN_WORK)
    # skinny: a weight of SKINNY_TUNE_MIN_NK elements is tuned at any M (decode runs it at every step)
    assert matmul._tuned("cuda", 1 << 20, 1 << 20, skinny=True)
    assert not matmul._tuned("cuda", 1 << 19, 1 << 19, skinny=True)
    assert not matmul._tuned("cuda", 1 << 20, 1 << 20)


# ---- choose() ---------------------------------------------------------------------------------
@pytest.fixture
def gpu_like(monkeypatch):
    """choose() for a "cuda" device on this CPU machine: 132 SMs, the tuner replaced by a
    stand-in that records the problems it is asked about and answers TUNED."""
    asked = []

    def tuned_config(m, n, k, batch, dtype, sa, sb, dev, base, operands):
        asked.append((m, n, k, base["A_KC"], base["B_KC"]))
        return TUNED

    monkeypatch.setattr(matmul, "_tuned_config", tuned_config)
    monkeypatch.setitem(matmul._SMS, torch.device("cuda"), 132)
    monkeypatch.delenv("TRITONJIT_MM_SPLIT_K", raising=False)
    matmul.clear_plans()
    yield asked
    matmul.clear_plans()


TUNED = (128, 128, 64, 8, 4, True, False)
BF16 = torch.bfloat16


def _linear(m, n, k, **kw):
    """The plan of nn.Linear's mm(x[m, k], W.t()), W (n, k) contiguous, in bf16."""
    return matmul.choose(m, n, k, 1, BF16, (k, 1), (1, k), False, torch.device("cuda"), **kw)


@pytest.mark.parametrize("m", [1, 4, 16])
def test_choose_splits_k_of_skinny_problems_with_few_tiles_and_long_k(gpu_like, m):
    plan = _linear(m, 1024, 2816)  # the down projection: 32 tiles of 16x32 on 132 SMs, K 2816: split in 4
    bm, bn, bk, warps, stages, tma, persistent, split = plan.config
    assert (bm, bn, split) == (16, 32, 4) and bk * 2 >= 256 and not tma and plan.source == "split"
    assert plan.grid == (32, 1, 4) and plan.workspace == 4 * m * 1024
    assert plan.reduce_grid == (matmul.cdiv(m * 1024, matmul.REDUCE_BLOCK), 1)
    assert plan.meta["SPLIT_K"] == 4 and plan.reduce_meta["SPLIT_K"] == 4
    assert plan.meta["B_KC"] and plan.meta["A_KC"] and plan.meta["EVEN_K"] == (2816 % bk == 0)
    assert matmul.choose(m, 768, 3072, 1, BF16, (3072, 1), (768, 1), True, "cuda").split_k == 4  # GPT-2 mlp.c_proj
    assert gpu_like == []  # split plans are not tuned
    short = _linear(m, 1024, 1024)  # K 1024: one launch, tuned (a 1024x1024 weight is worth tuning at any M)
    assert short.split_k == 1 and short.source == "tuned" and short.reduce_kernel is None
    assert gpu_like == [(m, 1024, 1024, True, True)]


def test_split_k_gives_every_split_k_tiles():
    assert matmul._split_k(32, 2816, 256, 132) == 4  # 11 K tiles: 3, 3, 3, 2
    assert matmul._split_k(24, 3072, 256, 132) == 4  # 5 asked, 12 K tiles: 3 each in 4 splits
    assert matmul._split_k(64, 2816, 256, 132) == 2
    assert matmul._split_k(66, 8192, 256, 132) == 1  # tiles fill half the SMs
    assert matmul._split_k(8, 1024, 256, 132) == 1  # K too short


def test_choose_tunes_skinny_problems_that_fill_the_device(gpu_like):
    for n in (2816, 32000):
        plan = _linear(16, n, 1024)
        assert plan.split_k == 1 and plan.source == "tuned" and plan.config[:7] == TUNED
    assert gpu_like == [(16, 2816, 1024, True, True), (16, 32000, 1024, True, True)]


def test_choose_split_k_can_be_switched_off(gpu_like, monkeypatch):
    monkeypatch.setenv("TRITONJIT_MM_SPLIT_K", "0")
    assert _linear(16, 1024, 1024).split_k == 1


def test_choose_untuned_small_problems_get_skinny_tiles(gpu_like):
    plan = _linear(8, 256, 512)  # 1M multiply-adds: not tuned
    assert plan.source == "default" and plan.config[:3] == (16, 32, 256) and plan.split_k == 1
    plan = matmul.choose(96, 64, 64, 1, BF16, (64, 1), (64, 1), False, "cuda")
    assert plan.source == "default" and plan.config[:2] == (64, 64)
    assert gpu_like == []


def test_choose_layouts_and_the_tuned_prefill(gpu_like):
    dev = torch.device("cuda")
    prefill = _linear(8192, 1024, 1024)
    assert prefill.source == "tuned" and prefill.config == TUNED + (1,) and prefill.grid == (64 * 8, 1, 1)
    grad_w = matmul.choose(1024, 1024, 8192, 1, BF16, (1, 1024), (1024, 1), False, dev)  # grad_out.t() @ x
    assert grad_w.meta["A_KC"] is False and grad_w.meta["B_KC"] is False and grad_w.meta["TMA"]
    conv1d = matmul.choose(8192, 2304, 768, 1, BF16, (768, 1), (2304, 1), True, dev)  # addmm(bias, x, W)
    assert conv1d.meta["HAS_BIAS"] and conv1d.meta["A_KC"] and not conv1d.meta["B_KC"]
    assert gpu_like[1:] == [(1024, 1024, 8192, False, False), (8192, 2304, 768, True, False)]


def test_persistent_plans_launch_at_most_one_program_per_sm(gpu_like, monkeypatch):
    plan = matmul.make_plan(8192, 1024, 1024, 1, BF16, (1024, 1), (1, 1024), False, "cuda",
                            (128, 256, 64, 8, 3, False, True))
    assert plan.grid == (132, 1, 1) and plan.meta["PERSISTENT"] and "persistent" in plan.describe()
    small = matmul.make_plan(256, 256, 1024, 1, BF16, (1024, 1), (1, 1024), False, "cuda",
                             (128, 128, 64, 8, 4, False, True))
    assert small.grid == (4, 1, 1)  # fewer tiles than SMs: one program per tile
    split = matmul.make_plan(16, 1024, 4096, 1, BF16, (4096, 1), (1, 4096), False, "cuda",
                             (16, 32, 256, 4, 4, False, True), 4)
    assert not split.meta["PERSISTENT"] and split.grid == (32, 1, 4)  # split-K plans are never persistent


def test_choose_never_gives_tma_to_operands_it_cannot_read(gpu_like):
    dev = torch.device("cuda")
    assert _linear(8192, 1024, 1024).meta["TMA"]
    assert not _linear(8192, 1024, 1024, aligned=False).meta["TMA"]
    assert not matmul.choose(8192, 1024, 1020, 1, BF16, (1020, 1), (1, 1020), False, dev).meta["TMA"]
    assert not matmul.choose(8192, 1024, 1024, 1, torch.float32, (1024, 1), (1, 1024), False, dev).meta["TMA"]


def test_choose_caches_plans_per_problem_in_a_bounded_dict(gpu_like, monkeypatch):
    p = _linear(8192, 1024, 1024)
    assert _linear(8192, 1024, 1024) is p and len(gpu_like) == 1
    assert _linear(8192, 1024, 1024, scale=True) is not p
    monkeypatch.setattr(matmul, "PLAN_CACHE_SIZE", 2)
    _linear(8000, 1024, 1024)  # the dict is full: cleared first
    assert list(matmul._plans) == [next(iter(matmul._plans))] and len(matmul._plans) == 1


def test_choose_on_the_interpreter(monkeypatch):
    matmul.clear_plans()
    plan = matmul.choose(16, 16, 16, 1, torch.float32, (16, 1), (16, 1), False, torch.device("cpu"))
    assert plan.source == "interpreter" and plan.config == (16, 16, 16, 1, 1, False, False, 1)
    plan = matmul.choose(8, 24, 600, 1, BF16, (600, 1), (1, 600), True, "cpu", scale=True)
    assert plan.split_k == 4 and plan.meta["DOT_F32"] and plan.meta["SCALE"] is False
    assert plan.reduce_meta["HAS_BIAS"] and plan.reduce_meta["SCALE"]
    d = plan.to_dict()
    assert d["kernel"] == "_mm_kernel" and d["reduce"]["kernel"] == "_splitk_reduce_kernel"
    assert d["grid"] == [1, 1, 4] and d["workspace"] == 4 * 8 * 24 and d["meta"]["BLOCK_M"] == 16


# ---- the tuned path on the interpreter -----------------------------------------------------------
@pytest.fixture
def tuned_on_cpu(fresh_cache, monkeypatch):
    """mm/bmm/addmm through _mm_tuned on the interpreter, tuning forced on, a fake timer
    that prefers the 64x32 tile (so the grid must follow the chosen BLOCK_M/N)."""
    monkeypatch.setattr(matmul, "_tuned", lambda *args: True)
    monkeypatch.setattr(_autotune, "tunes_on", lambda backend: True)
    _autotune._tuners.pop(id(matmul._mm_tuned), None)
    matmul.clear_plans()
    timed = []

    def timer(call, cfg):
        call()
        timed.append(_shape(cfg))
        return 1.0 if _shape(cfg)[:2] == (64, 32) else 2.0

    with _autotune.use_timer(timer):
        yield timed
    _autotune._tuners.pop(id(matmul._mm_tuned), None)
    matmul.clear_plans()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tuned_path_matches_torch_and_tunes_once_per_key(tuned_on_cpu, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    a, b = torch.randn(100, 100, dtype=dtype), torch.randn(100, 100, dtype=dtype)
    close(T.mm(a, b), torch.mm(a, b), **tol)  # K=100: masked K loop
    (chosen,) = _autotune.tuner_of(matmul._mm_tuned).chosen.values()
    assert _shape(chosen)[:2] == (64, 32)
    tried = len(tuned_on_cpu)
    assert tried == 3 and (64, 32) in [s[:2] for s in tuned_on_cpu]
    # M is bucketed (log2), N and K are exact (a model's weight shapes): another M of the
    # same bucket and the same N and K is not tuned again
    a2, b2 = torch.randn(120, 100, dtype=dtype), torch.randn(100, 100, dtype=dtype)
    close(T.mm(a2, b2), torch.mm(a2, b2), **tol)
    bias = torch.randn(100, dtype=dtype)
    close(T.addmm(bias, a2, b2, beta=0.5, alpha=2.0), torch.addmm(bias, a2, b2, beta=0.5, alpha=2.0), **tol)
    assert len(tuned_on_cpu) == tried
    # a bmm of the same M bucket, N and K is tuned apart from the mm (its programs count its
    # batch), once for any batch
    x, y = torch.randn(3, 70, 100, dtype=dtype), torch.randn(3, 100, 100, dtype=dtype)
    close(T.bmm(x, y), torch.bmm(x, y), **tol)
    assert len(tuned_on_cpu) > tried
    tried = len(tuned_on_cpu)
    x, y = torch.randn(5, 80, 100, dtype=dtype), torch.randn(5, 100, 100, dtype=dtype)
    close(T.bmm(x, y), torch.bmm(x, y), **tol)
    assert len(tuned_on_cpu) == tried
    b3 = torch.randn(100, 90, dtype=dtype)
    close(T.mm(a, b3), torch.mm(a, b3), **tol)  # another N: tuned again
    assert len(tuned_on_cpu) > tried
    tried = len(tuned_on_cpu)
    close(T.mm(b.t(), a), torch.mm(b.t(), a), **tol)  # a (M, K) transposed: another layout, tuned again
    assert len(tuned_on_cpu) > tried
    tried = len(tuned_on_cpu)
    a3 = torch.randn(300, 100, dtype=dtype)
    close(T.mm(a3, b), torch.mm(a3, b), **tol)  # M in the 512 bucket: tuned again
    assert len(tuned_on_cpu) > tried


def test_tuned_skinny_path_matches_torch(tuned_on_cpu):
    x, w = torch.randn(5, 40), torch.randn(24, 40)
    close(T.mm(x, w.t()), torch.mm(x, w.t()), rtol=1e-4, atol=1e-4)  # BLOCK_M 16 skinny configs, untimed first
    assert {s[0] for s in tuned_on_cpu} == {16} and len(tuned_on_cpu) == len(matmul._SKINNY_SHAPES)


def test_launch_finds_the_plan_choose_cached():
    """mm builds choose()'s cache key itself: a repeated call adds no plan, and choose()
    answers the call's problem with the very plan the call used."""
    matmul.clear_plans()
    x, w = torch.randn(5, 40), torch.randn(24, 40)
    matmul.mm(x, w.t())  # the Python implementation (T.mm may be the C++ path's direct entry)
    (plan,) = matmul._plans.values()
    matmul.mm(x, w.t())
    assert len(matmul._plans) == 1
    assert matmul.choose(5, 24, 40, 1, x.dtype, x.stride(), w.t().stride(), False, x.device) is plan
    assert plan.to_dict()["grid"] == [1, 1, 1]
    matmul.clear_plans()


def test_clear_plans_forgets_the_matmul_calls_given_to_aten(monkeypatch):
    """The audit's record of the calls _aten_is_faster gave to aten goes with the plans (the
    next call measures again); the SDPA ops' records stay."""
    monkeypatch.setattr(_policy, "_chosen", {})
    x, w = torch.empty(4, 8), torch.empty(8, 2)
    q = torch.empty(1, 1, 4, 8)
    for op in ("mm", "bmm"):
        _policy.note_aten(op, (x, w))
    _policy.note_aten("addmm", (w[0], x, w))
    _policy.note_aten("_scaled_dot_product_flash_attention", (q, q))
    matmul.clear_plans()
    assert not any(_policy.chose_aten(op, (x, w)) for op in ("mm", "bmm")) and not _policy.chose_aten("addmm", (w[0], x, w))
    assert _policy.chose_aten("_scaled_dot_product_flash_attention", (q, q, q))


def test_tuning_key_says_whether_tma_configs_were_candidates(monkeypatch):
    """A choice tuned without the TMA configs is not reused once they are candidates."""
    from tritonjit._autotune import layers_of, tuning_key

    (_, at), _ = layers_of(matmul._mm_tuned.wrapped)
    a = torch.empty(64, 64, dtype=torch.bfloat16)
    args = matmul._args(a, a, a, None, 4096, 4096, 4096, 1.0, 0.0)
    kw = dict(HAS_BIAS=False, SCALE=False, PRECISION="tf32", DOT_F32=False, A_KC=True, B_KC=False, SPLIT_K=1)
    monkeypatch.delenv("TRITONJIT_MM_TMA", raising=False)
    plain = tuning_key(at, args, kw, matmul._mm_tuned.key_buckets)
    monkeypatch.setenv("TRITONJIT_MM_TMA", "1")
    with_tma = tuning_key(at, args, kw, matmul._mm_tuned.key_buckets)
    assert plain != with_tma and plain[:3] == with_tma[:3] == (4096, 4096, 4096)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("cfg,split", [
    ((16, 32, 256, 4, 4), 1), ((16, 16, 256, 4, 4), 1), ((32, 64, 128, 4, 4), 1), ((64, 32, 256, 4, 4), 1),
    ((16, 32, 256, 4, 4), 4), ((128, 256, 64, 8, 3), 1), ((128, 256, 64, 8, 3, False, True), 1),
    ((128, 128, 64, 8, 4, True), 1), ((128, 256, 64, 8, 3, True, True), 1), ((64, 128, 64, 4, 4, True), 2),
])
def test_gpu_every_plan_kind_matches_torch(layout, cfg, split):
    """Skinny tiles, split-K, persistent and TMA plans on the device, in every layout, with
    ragged M and N edges, a bias and alpha/beta."""
    dev = "cuda"
    m, n, k = (5 if cfg[0] <= 32 else 304), 1000, 2048  # ragged edges; 304 rows: 16-byte aligned for TMA
    a = torch.randn(m, k, device=dev).to(BF16) if layout[0] == "N" else torch.randn(k, m, device=dev).to(BF16).t()
    b = (torch.randn(k, n, device=dev) / 45).to(BF16) if layout[1] == "N" \
        else (torch.randn(n, k, device=dev) / 45).to(BF16).t()
    bias = torch.randn(n, device=dev).to(BF16).expand(m, n)
    if len(cfg) > 5 and cfg[5]:
        assert matmul.tma_ok(2, a.stride(), b.stride(), m, n, k, True)
    plan = matmul.make_plan(m, n, k, 1, BF16, a.stride(), b.stride(), True, dev, cfg, split, scale=True)
    c = torch.empty(m, n, device=dev, dtype=BF16)
    matmul.run(plan, a, b, c, bias, 0.5, 2.0)
    ref = 0.5 * (a.float() @ b.float()) + 2.0 * bias.float()
    close(c, ref.to(BF16), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16, 64, 128, 1000])
def test_gpu_linear_shapes_through_choose(m):
    """mm/addmm as nn.Linear, GPT-2's Conv1D and a backward call them, tuned or split."""
    dev = "cuda"
    x = torch.randn(m, 2816, device=dev).to(BF16)
    w = (torch.randn(1024, 2816, device=dev) / 53).to(BF16)
    bias = torch.randn(1024, device=dev).to(BF16)
    for got, ref in ((T.mm(x, w.t()), x.float() @ w.float().t()),
                     (T.addmm(bias, x, w.t()), torch.addmm(bias.float(), x.float(), w.float().t())),
                     (T.mm(x.t(), x[:, :1024]), x.float().t() @ x[:, :1024].float())):
        close(got, ref.to(BF16), rtol=2e-2, atol=0.25 if got.shape[0] == 2816 else 5e-2)


@pytest.mark.parametrize("dtype, shape, timed", [
    (torch.float32, (64, 256, 64, 256), True),  # T5's fp32 attention bmm: 2^28 multiply-adds
    (torch.bfloat16, (64, 256, 64, 256), False),  # the same in bf16: launch-bound, not timed
    (torch.bfloat16, (1, 1024, 1024, 1024), True),
    (torch.float32, (1, 64, 64, 64), False),  # 2^18: launch-bound in fp32 too
    (torch.bfloat16, (1, 384, 12544, 96), True),  # a weight gradient: 2^28.8, K 33x the output's side
    (torch.bfloat16, (1, 96, 12544, 384), True),
    (torch.bfloat16, (1, 2048, 2048, 64), False),  # 2^28 but K no longer than the output's side
    (torch.bfloat16, (1, 64, 1024, 64), False),  # a long K but 2^22: launch-bound
])
def test_which_problems_are_timed_against_aten(monkeypatch, dtype, shape, timed):
    """_aten_is_faster times a device problem against aten's kernel from 2^30 multiply-adds in
    16 bits and from 2^24 in fp32, and from 2^26 where K is 4x the output's larger side or
    more (here on meta tensors, with the timer replaced: no GPU)."""
    import triton.testing
    from tritonjit_ops import _native_ops

    bsz, m, k, n = shape
    a = torch.empty(bsz, m, k, dtype=dtype, device="meta")
    b = torch.empty(bsz, k, n, dtype=dtype, device="meta")
    times = iter([2.0, 1.0])  # tritonjit's, then aten's
    benched = []
    monkeypatch.setenv("TRITONJIT_OPS_MM_ATEN", "auto")
    monkeypatch.setattr(_native_ops, "module", lambda *a, **k: object())
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, rep=None: benched.append(rep) or next(times))
    got = matmul._aten_is_faster(None, a, b, None, None, m, n, k, bsz, ("bmm", a, b))
    assert got is timed and len(benched) == (2 if timed else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("m,k,n,layout", [
    (1024, 256, 688, "NT"),    # a small model's MLP: x @ W^T (batch 4 x 256 tokens, hidden 256)
    (1024, 256, 8000, "NT"),   # its LM head
    (1024, 8000, 256, "NN"),   # the head's input gradient: dy @ W
    (8000, 1024, 256, "TN"),   # the head's weight gradient: dy^T @ x
    (688, 1024, 256, "TN"),
])
def test_gpu_every_tuner_candidate_matches_torch(m, k, n, layout):
    """Every config the tuner may pick for a training step's products computes the product:
    which config wins depends on timings (a busy GPU changes them), so a config that computes
    wrongly would corrupt a run only now and then."""
    dev = "cuda"
    torch.manual_seed(0)
    a = torch.randn(m, k, device=dev).to(BF16) if layout[0] == "N" else torch.randn(k, m, device=dev).to(BF16).t()
    b = (torch.randn(k, n, device=dev) / 16).to(BF16) if layout[1] == "N" \
        else (torch.randn(n, k, device=dev) / 16).to(BF16).t()
    ref = (a.float() @ b.float()).to(BF16)
    plans = matmul.candidates(a, b, torch.empty(m, n, device=dev, dtype=BF16))
    assert plans
    for plan in plans:
        c = torch.full((m, n), float("nan"), device=dev, dtype=BF16)
        matmul.run(plan, a, b, c, None)
        close(c, ref, rtol=2e-2, atol=0.25 if k >= 4096 else 5e-2, msg=lambda s, p=plan: f"{p}: {s}")


@pytest.mark.parametrize("family", ["LARGE_16", "LARGE_32", "SKINNY_16", "SKINNY_32"])
def test_every_tuner_config_on_the_interpreter(family):
    """Each config of a tuned family (which one wins on a GPU depends on timings, which a busy
    GPU changes) computes the product, plain and persistent, with ragged edges and K tail and
    a transposed operand, on the interpreter (the TMA family needs a GPU: see the GPU tests)."""
    dtype = BF16 if family.endswith("16") else torch.float32
    m, n, k = 70, 150, 100
    g = torch.Generator().manual_seed(0)
    a = torch.randn(k, m, generator=g).to(dtype).t()  # a weight gradient's transposed operand
    b = (torch.randn(k, n, generator=g) / 10).to(dtype)
    ref = (a.double() @ b.double())
    for cfg in getattr(matmul, family):
        plan = matmul.make_plan(m, n, k, 1, dtype, a.stride(), b.stride(), False, "cpu", _full(cfg))
        c = torch.full((m, n), float("nan"), dtype=dtype)
        matmul.run(plan, a, b, c, None)
        close(c, ref.to(dtype), rtol=2e-2 if dtype == BF16 else 1e-4, atol=3e-2 if dtype == BF16 else 1e-4,
              msg=lambda s, cfg=cfg: f"{cfg}: {s}")
