"""One training step of 33 more transformers architectures under enable(): logits, loss
and every parameter's gradient agree with eager in fp32 (tiny random configs, on the
backend of the machine: the interpreter on a CPU). Beside test_models_more.py's models,
these bring other op mixes: multi-query and parallel attention (Falcon, GPT-BigCode),
MoE routing (Mixtral, Qwen3-MoE), partial rotary (GPT-J, CodeGen, StableLM), ALiBi
(MPT), QK norms and clamps (OLMo 2, Cohere, Gemma 3), factorized embeddings (ALBERT,
ELECTRA), local/global attention (ModernBERT), encoder-decoders (BART, mBART), vision
transformers and convolutions (ViT, Swin, ConvNeXt, ResNet), CLIP's text tower, ALiBi
through baddbmm (BLOOM), disentangled attention (DeBERTa-v2), local attention (GPT-Neo),
soft-capped scores (Gemma 2), a speech encoder (Whisper) and a state-space scan (Mamba).

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
ND = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
GPT = dict(vocab_size=V, n_embd=32, n_layer=1, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
SEQ2SEQ = dict(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0, attention_dropout=0.0,
               activation_dropout=0.0)

#: name -> (model class, config class, config kwargs, inputs kind, attention implementation)
CASES = {
    "falcon": ("FalconForCausalLM", "FalconConfig", dict(vocab_size=V, hidden_size=32, num_hidden_layers=1,
                                                         num_attention_heads=4, hidden_dropout=0.0,
                                                         attention_dropout=0.0), "lm", "sdpa"),
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(**GPT, rotary_dim=4), "lm", "eager"),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig", dict(**C, num_key_value_heads=2, num_local_experts=4,
                                                            num_experts_per_tok=2), "lm", "sdpa"),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", dict(**C, num_key_value_heads=2), "lm", "sdpa"),
    "olmo": ("OlmoForCausalLM", "OlmoConfig", dict(**C, num_key_value_heads=2), "lm", "sdpa"),
    "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", dict(**C, num_key_value_heads=2), "lm", "sdpa"),
    "granite": ("GraniteForCausalLM", "GraniteConfig", dict(**C, num_key_value_heads=2), "lm", "sdpa"),
    "cohere": ("CohereForCausalLM", "CohereConfig", dict(**C, num_key_value_heads=2), "lm", "sdpa"),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", dict(GPT), "lm", "sdpa"),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", dict(**C, num_key_value_heads=2, residual_dropout=0.0,
                                                                     embedding_dropout=0.0), "lm", "sdpa"),
    "codegen": ("CodeGenForCausalLM", "CodeGenConfig", dict(**GPT, rotary_dim=4), "lm", "eager"),
    "mpt": ("MptForCausalLM", "MptConfig", dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4), "lm", "eager"),
    "biogpt": ("BioGptForCausalLM", "BioGptConfig", dict(**C, **ND), "lm", "sdpa"),
    "xglm": ("XGLMForCausalLM", "XGLMConfig", dict(vocab_size=V, d_model=32, num_layers=1, attention_heads=4,
                                                   ffn_dim=64, dropout=0.0, attention_dropout=0.0,
                                                   activation_dropout=0.0), "lm", "eager"),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", dict(**C, num_key_value_heads=2, num_experts=4,
                                                                num_experts_per_tok=2, moe_intermediate_size=32,
                                                                head_dim=8), "lm", "sdpa"),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", dict(**C, num_key_value_heads=2, head_dim=8,
                                                             sliding_window=4), "lm", "sdpa"),
    "electra": ("ElectraForMaskedLM", "ElectraConfig", dict(**C, **ND, embedding_size=16), "lm", "sdpa"),
    "albert": ("AlbertForMaskedLM", "AlbertConfig", dict(**C, **ND, embedding_size=16), "lm", "sdpa"),
    "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, global_attn_every_n_layers=2,
        local_attention=4), "lm", "sdpa"),
    "xlm_roberta": ("XLMRobertaForMaskedLM", "XLMRobertaConfig", dict(**C, **ND), "lm", "sdpa"),
    "bart": ("BartForConditionalGeneration", "BartConfig", dict(SEQ2SEQ), "lm", "sdpa"),
    "mbart": ("MBartForConditionalGeneration", "MBartConfig", dict(SEQ2SEQ), "lm", "sdpa"),
    "vit": ("ViTForImageClassification", "ViTConfig", dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                                           intermediate_size=64, image_size=16, patch_size=4,
                                                           num_labels=5, **ND), "image", "sdpa"),
    "clip_text": ("CLIPTextModelWithProjection", "CLIPTextConfig", dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        projection_dim=16, bos_token_id=1, eos_token_id=2, pad_token_id=0), "embed", "sdpa"),
    "swin": ("SwinForImageClassification", "SwinConfig", dict(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=5,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0), "image", "sdpa"),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig", dict(
        num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, num_labels=5, drop_path_rate=0.0),
        "image", "eager"),
    "resnet": ("ResNetForImageClassification", "ResNetConfig", dict(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5), "image", "eager"),
    # ALiBi added by baddbmm, GELU written out (BLOOM); disentangled relative attention: gathers of
    # position scores (DeBERTa-v2); local attention (GPT-Neo); tanh soft-capped scores (Gemma 2);
    # a speech encoder's convolutions (Whisper); a selective state-space scan, no attention (Mamba)
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(vocab_size=V, hidden_size=32, n_layer=1, n_head=4,
                                                      hidden_dropout=0.0, attention_dropout=0.0), "lm", "eager"),
    "deberta_v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", dict(
        **C, **ND, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8, max_relative_positions=16,
        position_biased_input=False), "lm", "eager"),
    "gpt_neo": ("GPTNeoForCausalLM", "GPTNeoConfig", dict(
        vocab_size=V, hidden_size=32, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
        window_size=4, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0), "lm", "eager"),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(**C, num_key_value_heads=2, head_dim=8, sliding_window=4),
               "lm", "eager"),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig", dict(
        **SEQ2SEQ, num_mel_bins=8, max_source_positions=8, max_target_positions=16, pad_token_id=0,
        decoder_start_token_id=1, bos_token_id=1, eos_token_id=2, begin_suppress_tokens=None, suppress_tokens=None),
        "audio", "sdpa"),
    "mamba": ("MambaForCausalLM", "MambaConfig", dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, state_size=4,
                                                      expand=2, conv_kernel=4), "lm", "eager"),
}
#: about 40 s (ConvNeXt: its depthwise convolutions' neighbours) and 30 s (Mamba: the scan's
#: step-by-step loop) on the interpreter
SLOW = {"convnext", "mamba"}


def _build(name: str) -> tuple[torch.nn.Module, dict, dict]:
    model_cls, cfg_cls, kw, kind, attn = CASES[name]
    model = tiny_model(model_cls, cfg_cls, kw, attn)
    cfg = model.config
    g = torch.Generator().manual_seed(1)
    if kind == "image":
        size = getattr(cfg, "image_size", 32)
        return model, dict(pixel_values=torch.randn(2, 3, size, size, generator=g)), dict(
            labels=torch.randint(0, 5, (2,), generator=g))
    ids = torch.randint(3, V, (2, 7), generator=g)
    if kind == "audio":  # log-mel frames: twice the encoder's positions
        feats = torch.randn(2, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
        return model, dict(input_features=feats), dict(labels=ids)
    return model, dict(input_ids=ids), ({} if kind == "embed" else dict(labels=ids))


def _step(model: torch.nn.Module, kw: dict, labels: dict) -> tuple:
    model.train()
    model.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model(**kw, **labels)
    main = out.logits if labels else out.text_embeds
    loss = out.loss if labels else main.square().sum()
    loss.backward()
    return main.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_training_step_agrees_with_eager(name):
    model, kw, labels = _build(name)
    ref_main, ref_loss, ref_grads = _step(model, kw, labels)
    with T.enable():
        main, loss, grads = _step(model, kw, labels)
    torch.testing.assert_close(main, ref_main, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-5)
    assert grads.keys() == ref_grads.keys()
    scale = max(float(g.abs().max()) for g in ref_grads.values())
    for n in ref_grads:  # gradients that are zero in exact arithmetic are noise on both paths
        torch.testing.assert_close(grads[n], ref_grads[n], rtol=1e-3, atol=1e-5 * max(scale, 1.0),
                                   msg=lambda m, n=n: f"{n}: {m}")
