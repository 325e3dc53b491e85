"""enable() under torch.autocast: a mixed-precision training step, the way most models are
trained, agrees with eager under the same autocast, and tritonjit kernels serve the covered
calls.

Autocast sits above the backend's dispatch key: it casts a linear's operands to bf16 (and a
norm's or a softmax's to fp32) and passes the call on, so enable()'s kernels receive the
casted operands, whatever dtype the model's parameters hold. The step runs on the backend
of the machine (the interpreter and CPU autocast on a CPU, CUDA autocast with tritonjit-cuda
on a GPU): a decoder (RMS norm, SiLU, rotary embedding, SDPA), a vision transformer (patch
convolution, layer norm, GELU) and a mixture of experts (router top-k, grouped products).
"""
from __future__ import annotations

import warnings

import pytest
import torch
import tritonjit
import tritonjit_ops as T
from _util import tiny_model
from tritonjit_ops import _audit

pytest.importorskip("transformers")

C = dict(vocab_size=97, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
CASES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(C, num_key_value_heads=2), "lm"),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig", dict(C, num_key_value_heads=2, num_local_experts=4,
                                                            num_experts_per_tok=2), "lm"),
    "vit": ("ViTForImageClassification", "ViTConfig", dict(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, image_size=16,
        patch_size=4, num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), "image"),
}
#: bf16 rounds to 8 bits: both paths round each autocast product once, in another order
LOGITS_REL, LOSS_REL, GRAD_REL = 3e-2, 1e-2, 5e-2
#: parameters whose gradient is this small against the largest are zero in exact arithmetic
#: (an attention key's bias shifts every score of a row alike): bf16 noise on both paths
NOISE = 1e-3


def _device() -> str:
    return tritonjit.current_backend().info.device_type


def _inputs(kind: str, device: str) -> tuple[dict, dict]:
    g = torch.Generator().manual_seed(1)
    if kind == "image":
        return (dict(pixel_values=torch.randn(2, 3, 16, 16, generator=g).to(device)),
                dict(labels=torch.randint(0, 5, (2,), generator=g).to(device)))
    ids = torch.randint(3, 97, (2, 7), generator=g).to(device)
    return dict(input_ids=ids), dict(labels=ids)


@pytest.mark.parametrize("name", list(CASES))
def test_autocast_training_step_agrees_with_eager(name):
    model_cls, cfg_cls, kw, kind = CASES[name]
    device = _device()
    model = tiny_model(model_cls, cfg_cls, kw, "sdpa").to(device)
    inputs, labels = _inputs(kind, device)

    def step() -> tuple:
        model.train()
        model.zero_grad(set_to_none=True)
        with warnings.catch_warnings(), torch.autocast(device, dtype=torch.bfloat16):
            warnings.simplefilter("ignore")
            out = model(**inputs, **labels)
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return out.logits.detach(), out.loss.detach(), grads

    ref_logits, ref_loss, ref_grads = step()
    assert ref_logits.dtype == torch.bfloat16  # autocast ran the head's product in bf16
    with T.enable():
        step()  # the first enabled step: on a device the measured policies (mm, SDPA) decide here
    (logits, loss, grads), cov = _audit.coverage(step)
    assert logits.dtype == ref_logits.dtype and loss.dtype == ref_loss.dtype

    scale = float(ref_logits.float().abs().max())
    assert float((logits.float() - ref_logits.float()).abs().max()) <= LOGITS_REL * scale
    assert abs(float(loss) - float(ref_loss)) <= LOSS_REL * abs(float(ref_loss))
    assert grads.keys() == ref_grads.keys()
    largest = max(float(g.float().norm()) for g in ref_grads.values())
    for n, ref in ref_grads.items():
        assert grads[n].dtype == ref.dtype, n  # fp32 master weights: fp32 gradients on both paths
        norm = float(ref.float().norm())
        if norm < NOISE * largest:
            continue
        err = float((grads[n].float() - ref.float()).norm()) / norm
        assert err <= GRAD_REL, f"{n}: gradient off by {err:.3g} (norm-relative)"
    # the covered calls launched tritonjit kernels (or a measured policy gave them to aten): all
    # of them on the interpreter, where enable() routes its whole table; on a device, whose
    # default leaves some overloads opt-in (nll_loss_forward) and whose attention kernels refuse
    # tiny heads, at least the 90% the models are held to
    done = cov["covered_routed_calls"] + cov["policy_calls"]
    assert cov["covered_calls"] > 0, cov
    if device == "cpu":
        assert done == cov["covered_calls"], cov["not_routed"]
    else:
        assert done >= 0.9 * cov["covered_calls"], cov["not_routed"]


def test_norm_statistics_of_mixed_dtypes_are_atens():
    """A bf16 input with fp32 weight and bias (aten's "mixed type": CPU autocast leaves group
    and layer norms of a bf16 convolution's output so, as WavLM's feature encoder makes them):
    native_group_norm's statistics are fp32 on every device, and native_layer_norm's on the
    CPU, as aten's; non-mixed calls keep the input's dtype. aten's backward reads them in that
    dtype: with bf16 statistics, the group norm's backward raised "expected scalar type
    BFloat16 but found Float". The training step through both norms agrees with eager."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 24, generator=g).bfloat16()
    w, b = torch.randn(8, generator=g), torch.randn(8, generator=g)
    calls = {
        "group mixed": lambda: torch.ops.aten.native_group_norm(x, w, b, 2, 8, 24, 4, 1e-5),
        "group bf16": lambda: torch.ops.aten.native_group_norm(x, w.bfloat16(), b.bfloat16(), 2, 8, 24, 4, 1e-5),
        "group, no affine": lambda: torch.ops.aten.native_group_norm(x, None, None, 2, 8, 24, 4, 1e-5),
        "layer mixed": lambda: torch.ops.aten.native_layer_norm(x.transpose(1, 2), [8], w, b, 1e-5),
        "layer bf16": lambda: torch.ops.aten.native_layer_norm(x.transpose(1, 2), [8], w.bfloat16(), None, 1e-5),
    }
    for name, fn in calls.items():
        want = fn()
        with T.enable():
            got = fn()
        assert [t.dtype for t in got] == [t.dtype for t in want], name
        for a, e in zip(got, want):
            torch.testing.assert_close(a.float(), e.float(), rtol=2e-2, atol=2e-2, msg=lambda m, n=name: f"{n}: {m}")

    conv = torch.nn.Conv1d(4, 8, 3)
    gn, ln = torch.nn.GroupNorm(8, 8), torch.nn.LayerNorm(8)
    wave = torch.randn(2, 4, 26, generator=g)

    def step():
        for m in (conv, gn, ln):
            m.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = gn(conv(wave))  # a bf16 convolution's output, normed with fp32 parameters
            y = ln(h.transpose(1, 2))
        y.float().square().mean().backward()
        return [p.grad.clone() for m in (conv, gn, ln) for p in m.parameters()]

    want = step()
    with T.enable():
        got = step()
    scale = max(float(e.abs().max()) for e in want)  # the conv bias's gradient is zero in exact arithmetic
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=GRAD_REL, atol=NOISE * scale)
