"""Fused AdamW: tritonjit_ops.AdamW / adamw_step against torch.optim.AdamW over a few
steps, and torch.optim.AdamW(fused=True) under enable() reaching the Triton kernel."""
from __future__ import annotations

import warnings

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _native_ops
from tritonjit_ops.optim import Unsupported

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _params(dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(300,), (17, 5), (3,), (1,), (2049,)]  # 2049: more than one block of a tensor
    return [torch.randn(s, generator=g).to(device=device, dtype=dtype) for s in shapes]


def _run(make_opt, params, steps=4, seed=1):
    ps = [p.clone().requires_grad_() for p in params]
    opt = make_opt(ps)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g).to(p.device, p.dtype)
        opt.step()
    return ps, opt


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, maximize=True), dict(betas=(0.0, 0.5), eps=1e-3)],
                         ids=["default", "wd-maximize", "betas"])
def test_adamw_matches_torch(kw):
    params = _params(torch.float32)
    ref, ropt = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=False, **kw), params)
    got, gopt = _run(lambda ps: T.AdamW(ps, lr=1e-2, **kw), params)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[torch.float32])
    for p, q in zip(got, ref):  # the same state layout as torch's
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(gopt.state[p][name], ropt.state[q][name], **TOL[torch.float32])
        assert float(gopt.state[p]["step"]) == float(ropt.state[q]["step"]) == 4


def test_mixed_dtypes_and_tensor_lr():
    """bf16 and fp32 parameters in one group (two launches), lr as a tensor."""
    params = _params(torch.float32)[:3] + _params(torch.bfloat16, seed=3)[:2]
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01, fused=True), params)
    got, _ = _run(lambda ps: T.AdamW(ps, lr=torch.tensor(1e-2), weight_decay=0.01), params)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[a.dtype])


def test_fused_adamw_under_enable_is_routed():
    params = _params(torch.float32)
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True), params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.enable(wait_native=True):
            before = _native_ops.stats().get("python_calls", 0)
            got, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True), params)
            calls = _native_ops.stats().get("python_calls", 0) - before
    if _native_ops.module() is None:
        pytest.skip("the C++ operator path is off here: no call counter")
    assert calls >= 4  # one _fused_adamw_ per step (plus the step counters' foreach add, if routed)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[torch.float32])


def test_amsgrad_under_enable_falls_back_to_aten():
    params = _params(torch.float32)
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, fused=True), params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.enable(wait_native=True):
            got, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, fused=True), params)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[torch.float32])


def test_refusals():
    p = [torch.zeros(4)]
    with pytest.raises(Unsupported, match="amsgrad"):
        T.optim.fused_adamw_(p, p, p, p, [], [torch.ones(())], lr=1.0, beta1=0.9, beta2=0.9, weight_decay=0.0,
                             eps=1e-8, amsgrad=True, maximize=False)
    with pytest.raises(ValueError, match="lengths"):
        T.adamw_step(p, [], p, p, [torch.ones(())], lr=1.0, beta1=0.9, beta2=0.9, weight_decay=0.0, eps=1e-8)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gpu_against_torch_fused(dtype):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    params = _params(dtype, device="cuda")
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True), params)
    got, _ = _run(lambda ps: T.AdamW(ps, lr=1e-2, weight_decay=0.1), params)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[dtype])


@pytest.mark.parametrize("dtypes", [(torch.float32,) * 4, (torch.bfloat16,) * 4], ids=["fp32", "bf16"])
def test_kernel_cross_compiles_for_sm90(dtypes):
    """The pointer-table kernel (int64 addresses cast to typed pointers) compiles for sm_90."""
    import tritonjit
    from tritonjit_ops import optim

    f = tritonjit.function(optim._adamw_kernel)
    i64, i32, step = torch.empty(8, dtype=torch.int64), torch.empty(8, dtype=torch.int32), torch.empty(1)
    ts = [torch.empty(8, dtype=d) for d in dtypes]
    sig = f.signature(i64, i64, i32, i64, *ts, step, step, 1e-3, 0.9, 0.999, -0.15, -0.0014, 0.01, 1e-8, 75,
                      MAXIMIZE=False, LR_PTR=False, BLOCK=optim._BLOCK_GPU)
    assert f.compile(sig, target="cuda:90", num_warps=4).binary


def test_amsgrad_on_the_python_registrations(monkeypatch):
    """Without the C++ operator path, enable() replaces aten's kernel: amsgrad (which the
    kernel refuses) runs the torch-ops fallback and matches torch's fused step."""
    monkeypatch.setattr(_native_ops, "module", lambda wait=False: None)
    monkeypatch.setattr(_native_ops, "on_ready", lambda callback: None)
    params = _params(torch.float32)
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, weight_decay=0.1, fused=True), params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.enable():
            assert T._registry.native_path().startswith("Python")
            got, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, weight_decay=0.1, fused=True),
                          params)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL[torch.float32])
