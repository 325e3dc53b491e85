"""Tiny random-weight transformers architectures beyond the models benchmark's four (and
test_models_cpp_path.py's five) under enable(): forward logits and one training step's loss and
parameter gradients agree with eager in fp32; greedy decode with a KV cache picks eager's
tokens; padding masks, SDPA, and a bf16 forward. Each architecture exercises other op
mixes: sliding windows and GQA (Mistral), soft-capping and sandwich norms (Gemma2), fused
qkv and partial rotary (Phi-3, GPT-NeoX), ALiBi and baddbmm (BLOOM), MoE routing with
topk/one_hot/index_add (Qwen2-MoE, whose generate() multiplies a bool tensor by a Python
bool), relative positions with gather (DeBERTa-v2), an encoder (RoBERTa, DistilBERT),
a selective scan (Mamba) and Whisper's conv encoder and decoder.

A model class missing from the installed transformers skips its case."""
from __future__ import annotations

import warnings

import pytest
import torch
import tritonjit_ops as T
from _util import tiny_model

tf = pytest.importorskip("transformers")

V = 97
C = dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
NO_DROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _configs() -> dict:
    """name -> (model class name, config class name, config kwargs, kind)."""
    return {
        "mistral": ("MistralForCausalLM", "MistralConfig", dict(**C, num_key_value_heads=2, sliding_window=4), "lm"),
        "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(**C, num_key_value_heads=2, pad_token_id=0, eos_token_id=2,
                                                       bos_token_id=1), "lm"),
        "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(**C, num_key_value_heads=2, head_dim=8,
                                                             sliding_window=4), "lm"),
        "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(**C, hidden_dropout=0.0, attention_dropout=0.0,
                                                                 rotary_pct=0.5), "lm"),
        "bloom": ("BloomForCausalLM", "BloomConfig", dict(vocab_size=V, hidden_size=32, n_layer=1, n_head=4,
                                                          hidden_dropout=0.0, attention_dropout=0.0), "lm"),
        "qwen2_moe": ("Qwen2MoeForCausalLM", "Qwen2MoeConfig", dict(**C, num_key_value_heads=2, num_experts=4,
                                                                   num_experts_per_tok=2, moe_intermediate_size=32,
                                                                   shared_expert_intermediate_size=32), "lm"),
        "roberta": ("RobertaForMaskedLM", "RobertaConfig", dict(**C, **NO_DROP), "mlm"),
        "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig", dict(vocab_size=V, dim=32, n_layers=1, n_heads=4,
                                                                        hidden_dim=64, dropout=0.0,
                                                                        attention_dropout=0.0), "mlm"),
        "deberta_v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", dict(**C, **NO_DROP, relative_attention=True,
                                                                       pos_att_type=["p2c", "c2p"],
                                                                       max_relative_positions=16,
                                                                       position_buckets=8), "mlm"),
        "mamba": ("MambaForCausalLM", "MambaConfig", dict(vocab_size=V, hidden_size=32, state_size=4,
                                                          num_hidden_layers=1, expand=2, conv_kernel=4,
                                                          use_mambapy=False), "ssm"),
        "whisper": ("WhisperForConditionalGeneration", "WhisperConfig", dict(
            vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=8,
            max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0), "speech"),
    }


def _build(name: str, attn: str = "eager", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    model_cls, cfg_cls, kw, _ = _configs()[name]
    return tiny_model(model_cls, cfg_cls, kw, attn).to(dtype)


def _inputs(name: str, pad: bool = False) -> tuple[dict, dict]:
    """(model inputs, training labels); ``pad``: an attention mask with padded positions
    (left padding for a decoder, right padding for an encoder)."""
    g = torch.Generator().manual_seed(1)
    kind = _configs()[name][3]
    if kind == "speech":
        return (dict(input_features=torch.randn(2, 8, 16, generator=g),
                     decoder_input_ids=torch.randint(3, V, (2, 5), generator=g)),
                dict(labels=torch.randint(3, V, (2, 5), generator=g)))
    ids = torch.randint(3, V, (2, 7), generator=g)
    kw: dict = dict(input_ids=ids)
    if pad:
        mask = torch.ones(2, 7, dtype=torch.long)
        if kind == "mlm":
            mask[0, -3:] = 0
        else:
            mask[0, :3] = 0
        kw["attention_mask"] = mask
    return kw, dict(labels=ids)


def _logits(out) -> torch.Tensor:
    return out.logits.float()


def _forward(model: torch.nn.Module, kw: dict) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return _logits(model(**kw))


def _train_step(model: torch.nn.Module, kw: dict, labels: dict) -> tuple:
    model.train()
    model.zero_grad(set_to_none=True)
    out = model(**kw, **labels)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return _logits(out).detach(), out.loss.detach(), grads


def _close_grads(got: dict, ref: dict) -> None:
    assert got.keys() == ref.keys()
    scale = max(float(g.abs().max()) for g in ref.values())
    for n in ref:  # gradients that are zero in exact arithmetic are noise on both paths
        torch.testing.assert_close(got[n], ref[n], rtol=1e-3, atol=1e-5 * max(scale, 1.0), msg=lambda m, n=n: f"{n}: {m}")


FAST = ["mistral", "phi3", "gemma2", "gpt_neox", "bloom", "qwen2_moe", "roberta", "distilbert"]
SLOW = ["deberta_v2", "mamba", "whisper"]


def _train_case(name: str, attn: str) -> None:
    model = _build(name, attn)
    kw, labels = _inputs(name)
    ref_logits, ref_loss, ref_grads = _train_step(model, kw, labels)
    with T.enable():
        logits, loss, grads = _train_step(model, kw, labels)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-5)
    _close_grads(grads, ref_grads)


@pytest.mark.parametrize("name", FAST)
def test_training_step_agrees_with_eager(name):
    _train_case(name, "eager")


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_training_step_agrees_with_eager_slow(name):
    _train_case(name, "eager")


@pytest.mark.parametrize("name", ["mistral", "qwen2_moe", "roberta"])
def test_sdpa_padding_mask_agrees_with_eager(name):
    """SDPA attention with a padding mask: logits at the positions that are not padding."""
    model = _build(name, "sdpa")
    kw, _ = _inputs(name, pad=True)
    ref = _forward(model, kw)
    with T.enable():
        got = _forward(model, kw)
    keep = kw["attention_mask"].bool()
    torch.testing.assert_close(got[keep], ref[keep], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["qwen2_moe", "gemma2"])
def test_greedy_decode_with_kv_cache(name):
    """generate() with a KV cache: the same tokens (Qwen2-MoE's config has no EOS token, so
    generate() computes ``is_pad_token_in_inputs * True``: a Python bool in a Tensor argument)."""
    model = _build(name).eval()
    ids = _inputs(name)[0]["input_ids"]
    kw = dict(max_new_tokens=3, do_sample=False, use_cache=True, pad_token_id=0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = model.generate(ids, **kw)
        with T.enable():
            got = model.generate(ids, **kw)
    assert torch.equal(got, ref)


def test_bf16_forward_as_close_to_fp32_as_eager():
    """A bf16 forward: as far from the fp32 logits as eager's bf16 forward is (within 1.5x),
    so no kernel rounds worse than aten's (the interpreter's truncating bf16 casts did)."""
    name = "gpt_neox"
    kw, _ = _inputs(name)
    ref32 = _forward(_build(name), kw)
    model = _build(name, dtype=torch.bfloat16)
    eager = _forward(model, kw)
    with T.enable():
        got = _forward(model, kw)
    err_eager = float((eager - ref32).abs().max())
    err_got = float((got - ref32).abs().max())
    assert err_got <= 1.5 * err_eager + 1e-3, (err_got, err_eager)
