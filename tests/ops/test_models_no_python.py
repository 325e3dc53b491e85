"""Training steps of architectures whose calls took general paths no benchmark measured, under
the device default selection: after the first steps made the plans, a step runs every routed
call from C++ (a plan of tritonjit kernels, or aten's kernel where the plan says so) and none
through the Python implementations, whose 20-50 us of host time per call (H200) is what a
model's wall time pays for each.

The calls that did (a CPU probe of 58 architectures, 2026-12-04): stepped slice gradients
(GLM's interleaved rotary halves, ``x[..., ::2]``), a fused QKV's permuted select gradient into
five dims (BLOOM), zero and crop pads of transposed tensors and a 5-d slice gradient (Mamba2),
``zeros_like`` of a transposed input (RecurrentGemma), the complex rotary's conjugate views in
backward (DeepSeek-V2), bf16 accumulating ``index_put`` through many indices (Mixtral's
experts, backward). Index checks are made as on a device (by the kernels, not the host), so
the index ops plan as they do there; SDPA's CPU overloads are left to aten (a device has its
own). Logits, loss and gradients agree with eager."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import bench_module, index_checks_as_on_a_device, native_ops_or_skip, needs_cxx, stats_delta
from tritonjit_ops import _registry

pytest.importorskip("transformers")
pytestmark = needs_cxx

#: (architecture, dtype): Mixtral in bf16 for its experts' token gather, whose backward is an
#: accumulating index_put through many indices (bf16 has no atomics: aten's plan)
CASES = [("glm", torch.float32), ("bloom", torch.float32), ("mamba2", torch.float32),
         ("recurrent_gemma", torch.float32), ("deepseek_v2", torch.float32), ("mixtral", torch.bfloat16)]


@pytest.fixture
def device_like(monkeypatch):
    yield from index_checks_as_on_a_device(monkeypatch)


def _device_default() -> list[str]:
    return [op for op in T.default_ops("CUDA") if "_for_cpu" not in op]


@pytest.mark.parametrize("name, dtype", CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in CASES])
def test_training_step_takes_no_python_path(device_like, monkeypatch, name, dtype):
    native = native_ops_or_skip()
    A = bench_module("architectures")
    M = bench_module("models")
    z = A.Sizes(False)
    cls, cfg_cls, attn, kind, kw = A.cases(z)[name]
    model = A._build(cls, cfg_cls, attn, "cpu", dtype, **kw).train()
    _, inputs = A._inputs(kind, model, z, "cpu", dtype)

    def step():
        model.zero_grad(set_to_none=True)
        out = model(**inputs)
        out.loss.backward()
        return out.logits.detach(), out.loss.detach()

    ref = step()
    ref_grads = M._grads(model)
    python: list[str] = []  # the overloads whose Python implementation ran, for the message

    def counted(name, impl):
        def call(*args, **kwargs):
            python.append(name)
            return impl(*args, **kwargs)
        return call

    for name in _registry._ATEN:
        monkeypatch.setitem(_registry._ATEN, name, counted(name, _registry._ATEN[name]))
    with T.enable(_device_default(), wait_native=True):
        step()
        before = native.stats()
        python.clear()
        got = step()
        d = stats_delta(before, native.stats())
    assert d["python_calls"] == 0 and d["plan_hits"] > 100, (python, d)
    a = M.agreement(ref, got, ref_grads, M._grads(model))
    fp32 = dtype == torch.float32
    assert a["logits_rel"] < (1e-5 if fp32 else 2e-2) and a["grad_cos"] > (0.99999 if fp32 else 0.999), a
