"""More transformers architectures than the models benchmark's four, under enable() on the
C++ operator path (the interpreter on CPU): an encoder-decoder (T5), a vision model
(ViT), a mixture of experts (Mixtral), OPT and Falcon; and op mixes that no benchmark
makes: a speech encoder's strided convolutions, group norm and weight-normed positional
convolution (Wav2Vec2), relative position bias gathered by an index (BEiT), two-stream
relative attention (XLNet), pooled queries (Funnel), a gated linear recurrence
(RecurrentGemma), a chunked state-space scan (Mamba2) and six more (see MORE). Logits and gradients agree with
eager: the operators' general paths (other argument layouts, other op mixes) are right,
not only those of the four benchmarked models."""
from __future__ import annotations

from typing import Any

import pytest
import torch
import tritonjit_ops as T
from _util import bench_module
from tritonjit_ops import _native_ops

tf = pytest.importorskip("transformers")


#: op mixes of ``benchmarks/architectures.py --models more`` and ``--models beyond``, built by
#: that script at its interpreter sizes (every dropout 0); of the second: sliding-chunk
#: attention over strided views (Longformer), chunked attention with sigmoid-routed experts
#: and complex rotary (Llama 4), AltUp, per-layer embeddings and sparse activations (Gemma 3n),
#: a scan beside shared attention with adapters (Zamba2), mask-unit attention (Hiera), gated
#: relative position buckets embedded from a small table (WavLM). (LeViT agrees too, but its
#: batch norms over 8 samples make eager's own fp32 gradients 1e-3 off float64's: no test
#: tolerance tells a defect from that.)
MORE = ("wav2vec2", "beit", "xlnet", "funnel", "recurrent_gemma", "mamba2",
        "longformer", "llama4", "gemma3n", "zamba2", "hiera", "wavlm")


def _more(name: str) -> tuple[Any, Any, tuple]:
    """(the architectures script, its sizes, the case) of ``name`` in MORE."""
    A = bench_module("architectures")
    z = A.Sizes(False)
    return A, z, A.cases(z)[name]


def _tiny(name: str) -> torch.nn.Module:
    if name in MORE:
        A, _, (cls, cfg_cls, attn, _, kw) = _more(name)
        return A._build(cls, cfg_cls, attn, "cpu", torch.float32, **kw)
    common = dict(vocab_size=97, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    if name == "t5":
        return tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=97, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                                         num_heads=4, dropout_rate=0.0))
    if name == "vit":
        return tf.ViTForImageClassification(tf.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                                         intermediate_size=64, image_size=16, patch_size=4,
                                                         num_labels=5))
    if name == "mixtral":
        return tf.MixtralForCausalLM(tf.MixtralConfig(**common, num_key_value_heads=2, num_local_experts=4,
                                                      num_experts_per_tok=2))
    if name == "opt":
        return tf.OPTForCausalLM(tf.OPTConfig(vocab_size=97, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                              ffn_dim=64, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0))
    return tf.FalconForCausalLM(tf.FalconConfig(vocab_size=97, hidden_size=32, num_hidden_layers=1,
                                                num_attention_heads=4))


def _inputs(name: str, model: torch.nn.Module) -> dict:
    if name in MORE:
        A, z, (_, _, _, kind, _) = _more(name)
        return A._inputs(kind, model, z, "cpu", torch.float32)[0]
    g = torch.Generator().manual_seed(0)
    if name == "vit":
        return dict(pixel_values=torch.randn(2, 3, 16, 16, generator=g))
    ids = torch.randint(1, 97, (2, 7), generator=g)
    if name == "t5":
        return dict(input_ids=ids, decoder_input_ids=torch.randint(1, 97, (2, 5), generator=g))
    return dict(input_ids=ids)


def _step(model: torch.nn.Module, kw: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    torch.manual_seed(1)  # any dropout draws the same masks on both paths
    logits = model(**kw).logits.float()
    logits.square().mean().backward()
    return logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("name", ["t5", "vit", "mixtral", "opt", "falcon", *MORE])
def test_architecture_agrees_with_eager(name):
    if _native_ops.module(wait=True) is None:
        pytest.skip(f"C++ operator path: {_native_ops.native().reason}")
    torch.manual_seed(0)
    model = _tiny(name).float().train()
    kw = _inputs(name, model)
    ref, ref_grads = _step(model, kw)
    before = _native_ops.stats()
    with T.enable(wait_native=True):
        got, grads = _step(model, kw)
    launched = _native_ops.stats()["launches"] - before["launches"]
    assert launched > 0
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    assert len(grads) == len(ref_grads)
    for g, r in zip(grads, ref_grads):
        # gradients that are zero in exact arithmetic (a key projection's bias under softmax)
        # are noise of 1e-12 on both paths: compare against the model's gradient scale
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
