"""More architectures and ``generate()`` modes under ``enable()``, eager against tritonjit.

``models.py`` times four models (and a zoo) at one size; this script checks the op mixes
those do not make, at a small size where host cost dominates: ALiBi through ``baddbmm``
(BLOOM), local attention (GPT-Neo), partial rotary (CodeGen, Phi), soft-capped scores
(Gemma 2), scaled residuals (Granite), a state-space scan (Mamba), disentangled attention
(DeBERTa-v2), encoders (RoBERTa, DistilBERT, ALBERT, ELECTRA), windowed vision attention
(Swin), convolutions with batch norm (ResNet, MobileNet-v2), a speech encoder (Whisper),
MoE routing (Mixtral, Qwen3-MoE), multi-query parallel attention (Falcon), parallel
residuals (GPT-NeoX, GPT-J), QK norms (Gemma 3, OLMo 2), encoder-decoders (BART, T5),
patch embeddings (ViT), depthwise convolutions (ConvNeXt) and more decoders (Qwen2, GPT-2,
OPT, Starcoder2); then ``generate()`` of a Llama with a left-padded batch: greedy, top-k/top-p and min-p
sampling, beam search, repetition and n-gram penalties.

Per case: agreement (logits; loss and gradients for the training step; tokens for
generate), the covered calls that ran tritonjit kernels, and on a GPU the wall time of
each path: best of 3 interleaved rounds of ``--calls`` calls, eager against one
``enable()`` (the device default), CUDA-synchronized. ``--hidden``, ``--layers``,
``--batch``, ``--tokens`` and ``--image`` run the same cases at sizes where the device,
not the host, is the cost. ``--audit model:fwd`` prints the
per-call audit of a case. On a CPU (the interpreter) the configs are tiny and untimed.

``--graph`` (CUDA) captures each step into a CUDA graph, eager's and ``enable()``'s, as a
server captures its decode step: the inputs then change in place, each replay must give what
its path computes uncaptured on them, and the replays are timed. A replay has no host cost,
so its time is the kernels' own: where ``enable()``'s kernels are slower on the device than
aten's, or launch more of them, this shows it and the wall-time rows do not. ``--steps``
picks the steps: ``forward``, ``train`` and ``decode`` (decoder-only models: one token a row
against a static KV cache after the prompt, the step a server captures once and replays).

    python benchmarks/architectures.py [--models bloom,mamba] [--generate greedy,beam] [--dtype fp32]
    python benchmarks/architectures.py --models more --generate ""   # twenty more, run once to look for gaps
    python benchmarks/architectures.py --models wider --generate ""  # twenty-five beyond those
    python benchmarks/architectures.py --models beyond --generate ""  # thirty-four further
    python benchmarks/architectures.py --models further --generate ""  # thirty-six past those
    python benchmarks/architectures.py --hidden 1024 --layers 4 --batch 8 --tokens 512 --image 128
    python benchmarks/architectures.py --models all --graph --generate "" --steps forward,train,decode
    python benchmarks/architectures.py --models all --graph --generate "" --batch 1 --steps decode  # serving
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402  (its path setup and agreement rule)
import tritonjit_ops as T  # noqa: E402
from tritonjit_ops import _audit  # noqa: E402


class Sizes:
    """Config and input sizes: small on a GPU (host-bound), tiny on the interpreter.

    ``--hidden``, ``--layers``, ``--batch``, ``--tokens`` and ``--image`` override them, so
    the same op mixes can be checked at sizes where the device, not the host, is the cost.
    Attention heads follow the width (one per 64 channels, at least 4).
    """

    def __init__(self, gpu: bool, hidden: int = 0, layers: int = 0, batch: int = 0, tokens: int = 0,
                 image: int = 0, vocab: int = 0) -> None:
        self.hidden, self.layers, self.vocab = (256, 2, 8000) if gpu else (32, 1, 96)
        self.batch, self.tokens, self.image = (4, 256, 64) if gpu else (2, 8, 32)
        self.new_tokens = 16 if gpu else 4
        self.hidden, self.layers = hidden or self.hidden, layers or self.layers
        self.batch, self.tokens, self.image = batch or self.batch, tokens or self.tokens, image or self.image
        self.vocab = vocab or self.vocab
        self.heads = max(4, self.hidden // 64)


def no_dropout(cfg: Any) -> Any:
    """``cfg`` with every float dropout setting at 0 (a step compared call for call with eager)."""
    for k, v in list(vars(cfg).items()):
        if isinstance(v, float) and ("drop" in k or k.endswith("_pdrop")):
            setattr(cfg, k, 0.0)
    return cfg


def sub_configs(cfg: Any) -> list[Any]:
    """The configs ``cfg`` holds: its declared sub-configs (an encoder-decoder's halves, a byte
    model's patcher) and a composite's text and vision configs."""
    parts = dict.fromkeys([*getattr(type(cfg), "sub_configs", {}), "text_config", "vision_config"])
    return [s for s in (getattr(cfg, p, None) for p in parts) if s is not None and s is not cfg and hasattr(s, "to_dict")]


def _build(cls: str, cfg_cls: str, attn: str | None, device: str, dtype: torch.dtype, **kw: Any) -> torch.nn.Module:
    import transformers as tf

    torch.manual_seed(0)
    cfg = no_dropout(getattr(tf, cfg_cls)(**kw))
    if attn:
        cfg._attn_implementation = attn
    return getattr(tf, cls)(cfg).to(device, dtype)


def _encoder(z: Sizes) -> dict[str, Any]:
    """The config kwargs of a BERT-like encoder at ``z``'s sizes."""
    return dict(vocab_size=z.vocab, hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads,
                intermediate_size=2 * z.hidden,
                max_position_embeddings=max(512, z.tokens + 2))  # RoBERTa's positions start at pad + 1


def _decoder(z: Sizes) -> dict[str, Any]:
    """The config kwargs of a Llama-like decoder with two key/value heads at ``z``'s sizes (the
    ``more`` and ``wider`` cases; the first cases' own ``llama`` halves the heads instead)."""
    return dict(vocab_size=z.vocab, hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads,
                num_key_value_heads=2, intermediate_size=2 * z.hidden, max_position_embeddings=max(512, z.tokens))


def _wave(z: Sizes) -> dict[str, Any]:
    """The config kwargs of a small speech encoder over raw audio (two feature convolutions,
    grouped positional convolution; CTC head) at ``z``'s sizes."""
    return dict(vocab_size=z.vocab, hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads,
                intermediate_size=2 * z.hidden, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.0)


def cases(z: Sizes) -> dict[str, tuple[str, str, str | None, str, dict[str, Any]]]:
    """name -> (model class, config class, attention, inputs kind, config kwargs)."""
    H, L, V, NH = z.hidden, z.layers, z.vocab, z.heads
    pos = max(2048, 2 * z.tokens)
    llama = dict(vocab_size=V, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=L, num_attention_heads=NH,
                 num_key_value_heads=NH // 2, max_position_embeddings=pos, pad_token_id=0)
    enc = _encoder(z)
    return {
        "bloom": ("BloomForCausalLM", "BloomConfig", "eager", "lm", dict(vocab_size=V, hidden_size=H, n_layer=L,
                                                                         n_head=NH)),
        "gpt_neo": ("GPTNeoForCausalLM", "GPTNeoConfig", "eager", "lm", dict(
            vocab_size=V, hidden_size=H, num_layers=2 * max(1, L // 2), num_heads=NH,
            attention_types=[[["global", "local"], max(1, L // 2)]], window_size=z.tokens // 2,
            max_position_embeddings=pos)),
        "codegen": ("CodeGenForCausalLM", "CodeGenConfig", "eager", "lm", dict(
            vocab_size=V, n_embd=H, n_layer=L, n_head=NH, rotary_dim=H // (2 * NH), n_positions=pos)),
        "phi": ("PhiForCausalLM", "PhiConfig", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=L, num_attention_heads=NH,
            partial_rotary_factor=0.5, max_position_embeddings=pos)),
        "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", "eager", "lm", dict(
            llama, head_dim=H // NH, sliding_window=z.tokens // 2)),
        "granite": ("GraniteForCausalLM", "GraniteConfig", "sdpa", "lm", dict(
            llama, embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0, attention_multiplier=0.01)),
        "mamba": ("MambaForCausalLM", "MambaConfig", None, "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, state_size=8, expand=2, conv_kernel=4)),
        "llama": ("LlamaForCausalLM", "LlamaConfig", "sdpa", "lm", llama),
        "deberta_v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", "eager", "mlm", dict(
            enc, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=32, max_relative_positions=64,
            position_biased_input=False)),
        "roberta": ("RobertaForMaskedLM", "RobertaConfig", "sdpa", "mlm", dict(enc, pad_token_id=1)),
        "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig", "sdpa", "mlm", dict(
            vocab_size=V, dim=H, n_layers=L, n_heads=NH, hidden_dim=2 * H,
            max_position_embeddings=max(512, z.tokens))),
        "albert": ("AlbertForMaskedLM", "AlbertConfig", "eager", "mlm", dict(enc, embedding_size=H // 2)),
        "electra": ("ElectraForMaskedLM", "ElectraConfig", "sdpa", "mlm", dict(enc, embedding_size=H // 2)),
        "swin": ("SwinForImageClassification", "SwinConfig", "sdpa", "image", dict(
            image_size=z.image, patch_size=4, embed_dim=max(8, H // 8), depths=[2, 2], num_heads=[2, 4],
            window_size=4, num_labels=10)),
        "resnet": ("ResNetForImageClassification", "ResNetConfig", None, "image", dict(
            embedding_size=max(16, H // 16), hidden_sizes=[max(16, H // 16), max(32, H // 8)], depths=[1, 1],
            layer_type="basic", num_labels=10)),
        "mobilenet_v2": ("MobileNetV2ForImageClassification", "MobileNetV2Config", None, "image", dict(
            image_size=z.image, depth_multiplier=0.35, num_labels=10)),
        "whisper": ("WhisperForConditionalGeneration", "WhisperConfig", "sdpa", "audio", dict(
            vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH,
            decoder_attention_heads=NH, encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H, num_mel_bins=80,
            max_source_positions=z.tokens // 2, max_target_positions=448, pad_token_id=0, decoder_start_token_id=1,
            bos_token_id=1, eos_token_id=2, begin_suppress_tokens=None, suppress_tokens=None)),
        # ---- MoE routing (Mixtral, Qwen3-MoE), biased QKV (Qwen2), multi-query parallel attention
        # (Falcon), Conv1D through addmm (GPT-2), parallel residuals (GPT-NeoX, GPT-J), ReLU MLPs and
        # learned positions (OPT), QK norms (Gemma 3, OLMo 2), encoder-decoders (BART, T5's relative
        # position buckets), patch embeddings (ViT), depthwise convolutions (ConvNeXt)
        "mixtral": ("MixtralForCausalLM", "MixtralConfig", "sdpa", "lm", dict(
            llama, num_local_experts=8, num_experts_per_tok=2)),
        "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", "sdpa", "lm", dict(
            llama, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=H // 2, head_dim=H // NH)),
        "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", "sdpa", "lm", llama),
        "falcon": ("FalconForCausalLM", "FalconConfig", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, multi_query=True,
            parallel_attn=True, max_position_embeddings=pos)),
        "gpt2": ("GPT2LMHeadModel", "GPT2Config", "sdpa", "lm", dict(
            vocab_size=V, n_embd=H, n_layer=L, n_head=NH, n_positions=pos)),
        "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H,
            rotary_pct=0.25, max_position_embeddings=pos)),
        "opt": ("OPTForCausalLM", "OPTConfig", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, ffn_dim=2 * H,
            word_embed_proj_dim=H, max_position_embeddings=pos, pad_token_id=1)),
        "gptj": ("GPTJForCausalLM", "GPTJConfig", "eager", "lm", dict(
            vocab_size=V, n_embd=H, n_layer=L, n_head=NH, rotary_dim=H // (2 * NH), n_positions=pos)),
        "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", "sdpa", "lm", dict(
            llama, head_dim=H // NH, sliding_window=z.tokens // 2)),
        "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", "sdpa", "lm", llama),
        "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", "sdpa", "lm", dict(
            llama, sliding_window=z.tokens // 2)),
        "bart": ("BartForConditionalGeneration", "BartConfig", "sdpa", "lm", dict(
            vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH,
            decoder_attention_heads=NH, encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H, max_position_embeddings=pos)),
        "t5": ("T5ForConditionalGeneration", "T5Config", "eager", "s2s", dict(
            vocab_size=V, d_model=H, d_kv=H // NH, d_ff=2 * H, num_layers=L, num_heads=NH,
            feed_forward_proj="gated-gelu", decoder_start_token_id=0)),
        "vit": ("ViTForImageClassification", "ViTConfig", "sdpa", "image", dict(
            hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H, image_size=z.image,
            patch_size=16 if z.image >= 128 else 4, num_labels=10)),
        "convnext": ("ConvNextForImageClassification", "ConvNextConfig", None, "image", dict(
            hidden_sizes=[max(16, H // 16), max(32, H // 8)], depths=[1, 1], num_stages=2, num_labels=10,
            image_size=z.image)),
        **more_cases(z),
        **wider_cases(z),
        **beyond_cases(z),
        **further_cases(z),
    }


def more_cases(z: Sizes) -> dict[str, tuple[str, str, str | None, str, dict[str, Any]]]:
    """``--models more``: twenty architectures run once to look for what the cases above miss
    (docs/benchmarks.md, 2026-12-04): speech, vision and segmentation encoders, relative and
    sparse attention, pooled queries, bottlenecked layers, MoE, recurrences and scans."""
    H, L, V, NH = z.hidden, z.layers, z.vocab, z.heads
    enc = _encoder(z)
    llama = _decoder(z)
    patch = 8 if z.image >= 32 else 4
    return {
        "wav2vec2": ("Wav2Vec2ForCTC", "Wav2Vec2Config", None, "wave", dict(_wave(z), feat_extract_norm="group")),
        "dinov2": ("Dinov2ForImageClassification", "Dinov2Config", None, "image", dict(
            hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, image_size=z.image, patch_size=patch,
            num_labels=10, mlp_ratio=2)),
        "beit": ("BeitForImageClassification", "BeitConfig", None, "image", dict(
            hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H, image_size=z.image,
            patch_size=patch, num_labels=10, use_relative_position_bias=True)),
        "segformer": ("SegformerForImageClassification", "SegformerConfig", None, "image", dict(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=10, decoder_hidden_size=32)),
        "mt5": ("MT5ForConditionalGeneration", "MT5Config", None, "s2s", dict(
            vocab_size=V, d_model=H, d_kv=H // NH, d_ff=2 * H, num_layers=L, num_heads=NH, decoder_start_token_id=0)),
        "pegasus": ("PegasusForConditionalGeneration", "PegasusConfig", None, "s2s", dict(
            vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH,
            decoder_attention_heads=NH, encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H,
            max_position_embeddings=max(512, z.tokens))),
        "xlnet": ("XLNetLMHeadModel", "XLNetConfig", None, "lm", dict(vocab_size=V, d_model=H, n_layer=L, n_head=NH,
                                                                       d_inner=2 * H)),
        "funnel": ("FunnelForMaskedLM", "FunnelConfig", None, "mlm", dict(
            vocab_size=V, d_model=H, n_head=NH, d_head=H // NH, d_inner=2 * H, block_sizes=[1, 1],
            num_decoder_layers=1)),
        "mobilebert": ("MobileBertForMaskedLM", "MobileBertConfig", None, "mlm", dict(
            enc, embedding_size=16, intra_bottleneck_size=H, true_hidden_size=H)),
        "big_bird": ("BigBirdForMaskedLM", "BigBirdConfig", None, "mlm", dict(enc, attention_type="original_full")),
        "nemotron": ("NemotronForCausalLM", "NemotronConfig", "sdpa", "lm", llama),
        "persimmon": ("PersimmonForCausalLM", "PersimmonConfig", "eager", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H)),
        "olmoe": ("OlmoeForCausalLM", "OlmoeConfig", "sdpa", "lm", dict(llama, num_experts=4, num_experts_per_tok=2)),
        "granitemoe": ("GraniteMoeForCausalLM", "GraniteMoeConfig", "sdpa", "lm", dict(
            llama, num_local_experts=4, num_experts_per_tok=2)),
        "mamba2": ("Mamba2ForCausalLM", "Mamba2Config", None, "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=L, state_size=8, num_heads=8, head_dim=2 * H // 8,
            expand=2, n_groups=1, chunk_size=4)),
        "recurrent_gemma": ("RecurrentGemmaForCausalLM", "RecurrentGemmaConfig", None, "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=NH, num_key_value_heads=1,
            intermediate_size=2 * H, lru_width=H, attention_window_size=8, block_types=["recurrent", "attention"])),
        "xglm": ("XGLMForCausalLM", "XGLMConfig", None, "lm", dict(vocab_size=V, d_model=H, num_layers=L,
                                                                   attention_heads=NH, ffn_dim=2 * H)),
        "biogpt": ("BioGptForCausalLM", "BioGptConfig", None, "lm", enc),
        "helium": ("HeliumForCausalLM", "HeliumConfig", "sdpa", "lm", dict(llama, head_dim=H // NH)),
        "glm": ("GlmForCausalLM", "GlmConfig", "sdpa", "lm", dict(llama, head_dim=H // NH, pad_token_id=0)),
    }


def wider_cases(z: Sizes) -> dict[str, tuple[str, str, str | None, str, dict[str, Any]]]:
    """``--models wider``: twenty-five more (2026-12-04), run on the interpreter to look for the
    general paths the cases above miss: multi-head latent attention with grouped expert routing
    (DeepSeek-V3; V2's rotary in complex numbers), unpadded local/global attention (ModernBERT), interleaved rotary halves
    (Cohere, GLM-4), ALiBi (MPT), hybrids of attention, state-space scans, MoE and short
    convolutions (Jamba, Bamba, LFM2, Qwen3-Next's gated delta rule), attention sinks (GPT-OSS),
    speech and vision encoders (HuBERT, RegNet, EfficientNet, Swin-v2) and more."""
    H, L, V, NH = z.hidden, z.layers, z.vocab, z.heads
    hd = H // NH
    ll = _decoder(z)
    enc = _encoder(z)
    img = dict(num_labels=10)
    return {
        "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", "sdpa", "mlm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=NH, intermediate_size=2 * H,
            local_attention=4, global_attn_every_n_layers=2, pad_token_id=0)),
        "deepseek_v3": ("DeepseekV3ForCausalLM", "DeepseekV3Config", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=NH, num_key_value_heads=NH,
            intermediate_size=2 * H, moe_intermediate_size=H, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
            topk_group=1, first_k_dense_replace=1, q_lora_rank=H // 2, kv_lora_rank=H // 2, qk_rope_head_dim=hd // 2,
            qk_nope_head_dim=hd // 2, v_head_dim=hd, max_position_embeddings=512, rope_scaling=None)),
        "deepseek_v2": ("DeepseekV2ForCausalLM", "DeepseekV2Config", "sdpa", "lm", dict(
            vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=NH, num_key_value_heads=NH,
            intermediate_size=2 * H, moe_intermediate_size=H, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
            topk_group=1, first_k_dense_replace=1, q_lora_rank=H // 2, kv_lora_rank=H // 2, qk_rope_head_dim=hd // 2,
            qk_nope_head_dim=hd // 2, v_head_dim=hd, max_position_embeddings=512)),
        "phi3": ("Phi3ForCausalLM", "Phi3Config", "sdpa", "lm", dict(ll, pad_token_id=0)),
        "cohere": ("CohereForCausalLM", "CohereConfig", "sdpa", "lm", dict(ll, use_qk_norm=True, pad_token_id=0)),
        "stablelm": ("StableLmForCausalLM", "StableLmConfig", "sdpa", "lm", dict(ll, partial_rotary_factor=0.25,
                                                                              qk_layernorm=True, use_qkv_bias=True)),
        "mpt": ("MptForCausalLM", "MptConfig", None, "lm", dict(vocab_size=V, d_model=H, n_heads=NH, n_layers=L,
                                                                expansion_ratio=2)),
        "jamba": ("JambaForCausalLM", "JambaConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2, attn_layer_period=2,
            attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, num_experts=4, mamba_d_state=8,
            mamba_dt_rank=8)),
        "esm": ("EsmForMaskedLM", "EsmConfig", None, "mlm", dict(enc, position_embedding_type="rotary", pad_token_id=1,
                                                                  mask_token_id=2)),
        "hubert": ("HubertForCTC", "HubertConfig", None, "wave", _wave(z)),
        "gemma": ("GemmaForCausalLM", "GemmaConfig", "sdpa", "lm", dict(ll, head_dim=hd)),
        "phimoe": ("PhimoeForCausalLM", "PhimoeConfig", "sdpa", "lm", dict(ll, num_local_experts=4, num_experts_per_tok=2)),
        "qwen2_moe": ("Qwen2MoeForCausalLM", "Qwen2MoeConfig", "sdpa", "lm", dict(ll, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=H, shared_expert_intermediate_size=H)),
        "glm4": ("Glm4ForCausalLM", "Glm4Config", "sdpa", "lm", dict(ll, head_dim=hd, pad_token_id=0)),
        "falcon_mamba": ("FalconMambaForCausalLM", "FalconMambaConfig", None, "lm", dict(vocab_size=V, hidden_size=H,
            num_hidden_layers=L, state_size=8, expand=2, conv_kernel=4, use_mambapy=True)),
        "marian": ("MarianMTModel", "MarianConfig", None, "s2s", dict(vocab_size=V, d_model=H, encoder_layers=L,
            decoder_layers=L, encoder_attention_heads=NH, decoder_attention_heads=NH, encoder_ffn_dim=2 * H,
            decoder_ffn_dim=2 * H, pad_token_id=0, decoder_start_token_id=0)),
        "convbert": ("ConvBertForMaskedLM", "ConvBertConfig", None, "mlm", dict(enc, embedding_size=H)),
        "roformer": ("RoFormerForMaskedLM", "RoFormerConfig", None, "mlm", dict(enc, embedding_size=H)),
        "regnet": ("RegNetForImageClassification", "RegNetConfig", None, "image", dict(embedding_size=16,
            hidden_sizes=[16, 32], depths=[1, 1], groups_width=8, **img)),
        "efficientnet": ("EfficientNetForImageClassification", "EfficientNetConfig", None, "image", dict(
            image_size=z.image, width_coefficient=0.25, depth_coefficient=0.2, hidden_dim=320, **img)),
        "swinv2": ("Swinv2ForImageClassification", "Swinv2Config", None, "image", dict(image_size=z.image, patch_size=4,
            embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4, **img)),
        "gpt_oss": ("GptOssForCausalLM", "GptOssConfig", "eager", "lm", dict(ll, num_local_experts=4, num_experts_per_tok=2,
            head_dim=hd, sliding_window=z.tokens // 2, layer_types=(["sliding_attention", "full_attention"] * L)[:L])),
        "lfm2": ("Lfm2ForCausalLM", "Lfm2Config", "sdpa", "lm", dict(vocab_size=V, hidden_size=H, num_hidden_layers=2,
            num_attention_heads=NH, num_key_value_heads=2, intermediate_size=2 * H, full_attn_idxs=[1])),
        "bamba": ("BambaForCausalLM", "BambaConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2, attn_layer_indices=[1],
            mamba_n_heads=4, mamba_d_head=H // 2, mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=4)),
        "qwen3_next": ("Qwen3NextForCausalLM", "Qwen3NextConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            head_dim=hd, layer_types=["linear_attention", "full_attention"], num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=H, shared_expert_intermediate_size=H, linear_num_value_heads=2, linear_num_key_heads=2,
            linear_key_head_dim=hd, linear_value_head_dim=hd)),
    }


def beyond_cases(z: Sizes) -> dict[str, tuple[str, str, str | None, str, dict[str, Any]]]:
    """``--models beyond``: thirty-four more (2026-12-05), run on the interpreter to look for the
    general paths the cases above miss: chunked attention with sigmoid-routed experts (Llama 4),
    per-layer embeddings, AltUp and sparse activations (Gemma 3n), hybrids of scans and shared
    attention (Zamba2, Falcon-H1, Granite-MoE-hybrid), lightning attention (MiniMax), clipped
    QKV (DBRX, OLMo), mixtures of attention heads (JetMoE), differential attention (DiffLlama),
    sliding-chunk attention over strided views (Longformer, LED), grouped 1x1 convolutions
    (SqueezeBERT), n-gram streams (ProphetNet), top-1 expert capacity (Switch Transformers),
    attention biases gathered by index (LeViT), mask units (Hiera), weight standardization (BiT),
    global response norms (ConvNeXt-v2), focal modulation, unfolded patches (MobileViT),
    gated relative positions (WavLM) and conformer blocks."""
    H, L, V, NH = z.hidden, z.layers, z.vocab, z.heads
    hd = H // NH
    ll, enc, wave = _decoder(z), _encoder(z), _wave(z)
    img = dict(num_labels=10)
    return {
        "llama4": ("Llama4ForCausalLM", "Llama4TextConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2, head_dim=hd,
            intermediate_size_mlp=2 * H, num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
            attention_chunk_size=max(4, z.tokens // 2), no_rope_layers=[1, 0], use_qk_norm=True,
            attn_temperature_tuning=True, floor_scale=4)),
        "gemma3n": ("Gemma3nForCausalLM", "Gemma3nTextConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2, head_dim=hd,
            intermediate_size=[2 * H] * 2, vocab_size_per_layer_input=V, hidden_size_per_layer_input=8,
            layer_types=["sliding_attention", "full_attention"], sliding_window=max(4, z.tokens // 2),
            num_kv_shared_layers=0, laurel_rank=8, activation_sparsity_pattern=[0.95, 0.0], altup_num_inputs=2,
            final_logit_softcapping=30.0)),
        "zamba2": ("Zamba2ForCausalLM", "Zamba2Config", "sdpa", "lm", dict(vocab_size=V, hidden_size=H,
            num_hidden_layers=2, layers_block_type=["mamba", "hybrid"], mamba_d_state=8, n_mamba_heads=4,
            mamba_ngroups=1, chunk_size=4, num_attention_heads=NH, num_key_value_heads=NH, intermediate_size=2 * H,
            use_mem_rope=True, use_shared_attention_adapter=True, adapter_rank=8, num_mem_blocks=1,
            use_mamba_kernels=False)),
        "falcon_h1": ("FalconH1ForCausalLM", "FalconH1Config", "sdpa", "lm", dict(ll, mamba_n_heads=4, mamba_d_head=hd,
            mamba_n_groups=1, mamba_d_state=8, mamba_chunk_size=4, mamba_d_ssm=4 * hd, embedding_multiplier=2.0,
            lm_head_multiplier=0.5, key_multiplier=0.7, mamba_rms_norm=True)),
        "granitemoehybrid": ("GraniteMoeHybridForCausalLM", "GraniteMoeHybridConfig", "sdpa", "lm", dict(ll,
            num_hidden_layers=2, layer_types=["mamba", "attention"], num_local_experts=4, num_experts_per_tok=2,
            shared_intermediate_size=H, mamba_n_heads=4, mamba_d_head=2 * H // 4, mamba_n_groups=1, mamba_d_state=8,
            mamba_chunk_size=4, embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0,
            attention_multiplier=0.01, position_embedding_type="rope")),
        "minimax": ("MiniMaxForCausalLM", "MiniMaxConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2, head_dim=hd,
            num_local_experts=4, num_experts_per_tok=2, layer_types=["linear_attention", "full_attention"],
            block_size=4)),
        "dbrx": ("DbrxForCausalLM", "DbrxConfig", "sdpa", "lm", dict(d_model=H, n_heads=NH, n_layers=L,
            max_seq_len=max(512, z.tokens), vocab_size=V, attn_config=dict(kv_n_heads=2, clip_qkv=8.0, rope_theta=10000.0),
            ffn_config=dict(ffn_hidden_size=2 * H, moe_num_experts=4, moe_top_k=2))),
        "olmo": ("OlmoForCausalLM", "OlmoConfig", "sdpa", "lm", dict(ll, clip_qkv=8.0)),
        "jetmoe": ("JetMoeForCausalLM", "JetMoeConfig", "eager", "lm", dict(vocab_size=V, hidden_size=H,
            num_hidden_layers=L, num_key_value_heads=2, kv_channels=hd, intermediate_size=2 * H,
            num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=max(512, z.tokens))),
        "ernie4_5_moe": ("Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            moe_intermediate_size=H, moe_k=2, moe_num_experts=4, moe_num_shared_experts=1, moe_layer_start_index=1)),
        "diffllama": ("DiffLlamaForCausalLM", "DiffLlamaConfig", "sdpa", "lm", dict(ll, head_dim=hd)),
        "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", "sdpa", "lm", dict(ll, head_dim=hd)),
        "ctrl": ("CTRLLMHeadModel", "CTRLConfig", None, "lm", dict(vocab_size=V, n_embd=H, n_layer=L, n_head=NH,
            dff=2 * H, n_positions=max(512, z.tokens))),
        "longformer": ("LongformerForMaskedLM", "LongformerConfig", None, "mlm", dict(enc, attention_window=4,
            pad_token_id=1)),
        "mpnet": ("MPNetForMaskedLM", "MPNetConfig", None, "mlm", dict(enc, pad_token_id=1)),
        "squeezebert": ("SqueezeBertForMaskedLM", "SqueezeBertConfig", None, "mlm", dict(enc, embedding_size=H,
            q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2)),
        "layoutlm": ("LayoutLMForMaskedLM", "LayoutLMConfig", None, "mlm", enc),
        "xlm_roberta_xl": ("XLMRobertaXLForMaskedLM", "XLMRobertaXLConfig", None, "mlm", dict(enc, pad_token_id=1)),
        "switch_transformers": ("SwitchTransformersForConditionalGeneration", "SwitchTransformersConfig", None, "s2s",
            dict(vocab_size=V, d_model=H, d_kv=hd, d_ff=2 * H, num_layers=2, num_decoder_layers=2, num_heads=NH,
                 num_experts=4, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1, expert_capacity=64,
                 router_jitter_noise=0.0, decoder_start_token_id=0)),
        "prophetnet": ("ProphetNetForConditionalGeneration", "ProphetNetConfig", None, "s2s", dict(vocab_size=V,
            hidden_size=H, encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H, num_encoder_layers=L, num_decoder_layers=L,
            num_encoder_attention_heads=NH, num_decoder_attention_heads=NH, ngram=2, num_buckets=8,
            relative_max_distance=16, max_position_embeddings=max(512, z.tokens), decoder_start_token_id=0)),
        "led": ("LEDForConditionalGeneration", "LEDConfig", None, "s2s", dict(vocab_size=V, d_model=H,
            encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH, decoder_attention_heads=NH,
            encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H, attention_window=4, max_encoder_position_embeddings=512,
            max_decoder_position_embeddings=512, decoder_start_token_id=2)),
        "deit": ("DeiTForImageClassification", "DeiTConfig", None, "image", dict(hidden_size=H,
            num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H, image_size=z.image,
            patch_size=8 if z.image >= 32 else 4, **img)),
        "levit": ("LevitForImageClassification", "LevitConfig", None, "image", dict(image_size=z.image,
            hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1], key_dim=[8, 8, 8],
            patch_size=16, **img)),
        "pvt_v2": ("PvtV2ForImageClassification", "PvtV2Config", None, "image", dict(image_size=z.image,
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], **img)),
        "poolformer": ("PoolFormerForImageClassification", "PoolFormerConfig", None, "image", dict(
            hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2],
            padding=[2, 1], **img)),
        "mobilevit": ("MobileViTForImageClassification", "MobileViTConfig", None, "image", dict(image_size=z.image,
            hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_attention_heads=2,
            patch_size=2, **img)),
        "convnextv2": ("ConvNextV2ForImageClassification", "ConvNextV2Config", None, "image", dict(
            hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=z.image, **img)),
        "bit": ("BitForImageClassification", "BitConfig", None, "image", dict(embedding_size=16, hidden_sizes=[16, 32],
            depths=[1, 1], layer_type="preactivation", global_padding="SAME", num_groups=4, **img)),
        "hiera": ("HieraForImageClassification", "HieraConfig", None, "image", dict(image_size=[z.image, z.image],
            embed_dim=16, depths=[1, 1], num_heads=[1, 2], patch_stride=[4, 4], patch_size=[7, 7],
            patch_padding=[3, 3], masked_unit_size=[2, 2], query_stride=[2, 2], num_query_pool=1, **img)),
        "focalnet": ("FocalNetForImageClassification", "FocalNetConfig", None, "image", dict(image_size=z.image,
            embed_dim=16, depths=[1, 1], hidden_sizes=[16, 32], focal_levels=[2, 2], focal_windows=[3, 3], **img)),
        "cvt": ("CvtForImageClassification", "CvtConfig", None, "image", dict(embed_dim=[16, 32], num_heads=[1, 2],
            depth=[1, 2], patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], mlp_ratio=[2.0, 2.0],
            attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0], qkv_bias=[True, True],
            cls_token=[False, True], qkv_projection_method=["dw_bn", "dw_bn"], kernel_qkv=[3, 3], padding_kv=[1, 1],
            stride_kv=[2, 2], padding_q=[1, 1], stride_q=[1, 1], **img)),
        "wavlm": ("WavLMForCTC", "WavLMConfig", None, "wave", dict(wave, num_buckets=32, max_bucket_distance=64)),
        "wav2vec2_conformer": ("Wav2Vec2ConformerForCTC", "Wav2Vec2ConformerConfig", None, "wave", dict(wave,
            position_embeddings_type="rotary", conv_depthwise_kernel_size=3)),
        "sew_d": ("SEWDForCTC", "SEWDConfig", None, "wave", dict(wave, squeeze_factor=2, position_buckets=16,
            max_position_embeddings=64)),
    }


def further_cases(z: Sizes) -> dict[str, tuple[str, str, str | None, str, dict[str, Any]]]:
    """``--models further``: thirty-six more (2026-12-05, thirty-fourth session), run on the
    interpreter to look for the general paths the cases above miss: squared-ReLU and xIELU MLPs
    (Arcee, NanoChat, Apertus), ternary weight quantization (BitNet), matrix-memory LSTMs
    (xLSTM), the RWKV time-mix scan, zero-computation experts (LongCat-Flash), sigmoid routing
    with group limits (GLM-4.5-MoE, dots.llm1), dynamic mask attention (Doge), soft-capped
    attention logits (VaultGemma), no-rope layers (SmolLM3), multi-query attention
    (GPTBigCode), transient global attention (LongT5), expert capacity with padding masks
    (NLLB-MoE), block-sparse attention (BigBird-Pegasus), Fourier mixing (FNet), Nyström
    landmarks with a pseudo-inverse, LSH and axial positions (Reformer), conformer encoders
    over log-mel features (Wav2Vec2-BERT, Parakeet), a strided-convolution front end
    (Speech2Text), separable self-attention (MobileViT-v2), efficient additive attention
    (SwiftFormer), spatial-reduction attention (PVT) and registers (DINOv2)."""
    H, L, V, NH = z.hidden, z.layers, z.vocab, z.heads
    hd = H // NH
    ll, enc, wave = _decoder(z), _encoder(z), _wave(z)
    img = dict(num_labels=10)
    s2s = dict(vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH,
               decoder_attention_heads=NH, encoder_ffn_dim=2 * H, decoder_ffn_dim=2 * H,
               max_position_embeddings=max(512, z.tokens))
    return {
        "mistral": ("MistralForCausalLM", "MistralConfig", "sdpa", "lm", dict(ll, sliding_window=z.tokens // 2)),
        "smollm3": ("SmolLM3ForCausalLM", "SmolLM3Config", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            no_rope_layer_interval=2, pad_token_id=0)),
        "cohere2": ("Cohere2ForCausalLM", "Cohere2Config", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            sliding_window=max(4, z.tokens // 2), layer_types=["sliding_attention", "full_attention"])),
        "exaone4": ("Exaone4ForCausalLM", "Exaone4Config", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            sliding_window=max(4, z.tokens // 2), layer_types=["sliding_attention", "full_attention"])),
        "arcee": ("ArceeForCausalLM", "ArceeConfig", "sdpa", "lm", ll),
        "apertus": ("ApertusForCausalLM", "ApertusConfig", "sdpa", "lm", dict(ll, pad_token_id=0)),
        "nanochat": ("NanoChatForCausalLM", "NanoChatConfig", "sdpa", "lm", ll),
        "bitnet": ("BitNetForCausalLM", "BitNetConfig", "sdpa", "lm", ll),
        "vaultgemma": ("VaultGemmaForCausalLM", "VaultGemmaConfig", "eager", "lm", dict(ll, num_hidden_layers=2,
            head_dim=hd, query_pre_attn_scalar=hd, sliding_window=max(4, z.tokens // 2),
            layer_types=["sliding_attention", "full_attention"])),
        "glm4_moe": ("Glm4MoeForCausalLM", "Glm4MoeConfig", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            moe_intermediate_size=H, n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
            first_k_dense_replace=1, use_qk_norm=True, partial_rotary_factor=0.5)),
        "dots1": ("Dots1ForCausalLM", "Dots1Config", "sdpa", "lm", dict(ll, num_hidden_layers=2,
            moe_intermediate_size=H, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
            first_k_dense_replace=1, norm_topk_prob=True)),
        "hunyuan_moe": ("HunYuanMoEV1ForCausalLM", "HunYuanMoEV1Config", "sdpa", "lm", dict(ll, num_experts=4,
            moe_topk=2, head_dim=hd)),
        "lfm2_moe": ("Lfm2MoeForCausalLM", "Lfm2MoeConfig", "sdpa", "lm", dict(vocab_size=V, hidden_size=H,
            num_hidden_layers=2, num_attention_heads=NH, num_key_value_heads=2, intermediate_size=2 * H,
            moe_intermediate_size=H, num_dense_layers=1, num_experts=4, num_experts_per_tok=2,
            layer_types=["conv", "full_attention"])),
        "minimax_m2": ("MiniMaxM2ForCausalLM", "MiniMaxM2Config", "sdpa", "lm", dict(ll, head_dim=hd,
            num_local_experts=4, num_experts_per_tok=2)),
        "longcat_flash": ("LongcatFlashForCausalLM", "LongcatFlashConfig", "sdpa", "lm", dict(vocab_size=V,
            hidden_size=H, num_layers=1, num_attention_heads=NH, ffn_hidden_size=2 * H, q_lora_rank=H // 2,
            kv_lora_rank=H // 2, qk_nope_head_dim=hd, qk_rope_head_dim=hd, head_dim=hd, v_head_dim=hd, moe_topk=2,
            n_routed_experts=4, zero_expert_num=2, expert_ffn_hidden_size=H, max_position_embeddings=512)),
        "doge": ("DogeForCausalLM", "DogeConfig", "eager", "lm", dict(ll, keep_window_size=max(4, z.tokens // 2),
            is_moe=True, num_experts=16, num_experts_per_tok=2)),
        "xlstm": ("xLSTMForCausalLM", "xLSTMConfig", None, "lm", dict(vocab_size=V, hidden_size=H, num_hidden_layers=L,
            num_heads=2, chunk_size=4, ffn_round_up_to_multiple_of=16,
            use_cache=False)),  # its cache's states are sized for other dims
        "rwkv": ("RwkvForCausalLM", "RwkvConfig", None, "lm", dict(vocab_size=V, hidden_size=H, num_hidden_layers=2,
            context_length=max(64, z.tokens), attention_hidden_size=H, intermediate_size=2 * H)),
        "gpt_bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", "sdpa", "lm", dict(vocab_size=V, n_embd=H,
            n_layer=L, n_head=NH, multi_query=True, n_positions=max(512, z.tokens))),
        "openai_gpt": ("OpenAIGPTLMHeadModel", "OpenAIGPTConfig", None, "lm", dict(vocab_size=V, n_embd=H, n_layer=L,
            n_head=NH, n_positions=max(512, z.tokens))),
        "imagegpt": ("ImageGPTForCausalImageModeling", "ImageGPTConfig", "eager", "lm", dict(vocab_size=V + 1,
            n_embd=H, n_layer=L, n_head=NH, n_positions=max(512, z.tokens))),
        "longt5": ("LongT5ForConditionalGeneration", "LongT5Config", None, "s2s", dict(vocab_size=V, d_model=H,
            d_kv=hd, d_ff=2 * H, num_layers=L, num_heads=NH, local_radius=2, global_block_size=2,
            encoder_attention_type="transient-global", feed_forward_proj="gated-gelu", decoder_start_token_id=0)),
        "umt5": ("UMT5ForConditionalGeneration", "UMT5Config", None, "s2s", dict(vocab_size=V, d_model=H, d_kv=hd,
            d_ff=2 * H, num_layers=L, num_heads=NH, feed_forward_proj="gated-gelu", decoder_start_token_id=0)),
        "mbart": ("MBartForConditionalGeneration", "MBartConfig", "sdpa", "lm", s2s),
        "nllb_moe": ("NllbMoeForConditionalGeneration", "NllbMoeConfig", "eager", "s2s", dict(s2s, num_experts=4,
            expert_capacity=8, encoder_sparse_step=1, decoder_sparse_step=1, router_jitter_noise=0.0)),
        "bigbird_pegasus": ("BigBirdPegasusForConditionalGeneration", "BigBirdPegasusConfig", None, "lm", dict(s2s,
            attention_type="block_sparse", block_size=2, num_random_blocks=1)),
        "nystromformer": ("NystromformerForMaskedLM", "NystromformerConfig", None, "lm", dict(enc,
            num_landmarks=4, segment_means_seq_len=z.tokens, conv_kernel_size=3)),
        "fnet": ("FNetForMaskedLM", "FNetConfig", None, "mlm", dict(enc)),
        "reformer": ("ReformerModelWithLMHead", "ReformerConfig", None, "lm", dict(vocab_size=V, hidden_size=H,
            attention_head_size=hd, num_attention_heads=NH, attn_layers=["local", "lsh"], is_decoder=True,
            axial_pos_shape=(2, max(4, z.tokens // 2)), axial_pos_embds_dim=(H // 2, H // 2), feed_forward_size=2 * H,
            local_attn_chunk_length=4, lsh_attn_chunk_length=4, num_buckets=2, hash_seed=0,
            max_position_embeddings=max(8, z.tokens), pad_token_id=0)),
        "rembert": ("RemBertForMaskedLM", "RemBertConfig", None, "mlm", dict(enc, input_embedding_size=H // 2,
            output_embedding_size=H)),
        "mobilenet_v1": ("MobileNetV1ForImageClassification", "MobileNetV1Config", None, "image", dict(
            image_size=z.image, depth_multiplier=0.25, **img)),
        "pvt": ("PvtForImageClassification", "PvtConfig", None, "image", dict(image_size=z.image,
            num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1], hidden_sizes=[16, 32],
            patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], **img)),
        "mobilevitv2": ("MobileViTV2ForImageClassification", "MobileViTV2Config", None, "image", dict(
            image_size=max(64, z.image), width_multiplier=0.25, n_attn_blocks=[1, 1, 1], **img)),  # 5 halvings
        "swiftformer": ("SwiftFormerForImageClassification", "SwiftFormerConfig", None, "image", dict(
            image_size=z.image, depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32], **img)),
        "dinov2_registers": ("Dinov2WithRegistersForImageClassification", "Dinov2WithRegistersConfig", "sdpa",
            "image", dict(hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, image_size=z.image,
            patch_size=8 if z.image >= 32 else 4, num_register_tokens=2, layerscale_value=1.0, **img)),
        "data2vec_audio": ("Data2VecAudioForCTC", "Data2VecAudioConfig", None, "wave", dict(wave,
            conv_pos_kernel_size=5, num_conv_pos_embeddings=2)),
        "wav2vec2_bert": ("Wav2Vec2BertForCTC", "Wav2Vec2BertConfig", None, "features", dict(vocab_size=V,
            hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=2 * H,
            feature_projection_input_dim=80, conv_depthwise_kernel_size=3, mask_time_prob=0.0, layerdrop=0.0,
            pad_token_id=0, add_adapter=False)),
        "speech_to_text": ("Speech2TextForConditionalGeneration", "Speech2TextConfig", None, "features", dict(s2s,
            conv_channels=H, input_feat_per_channel=80, max_source_positions=max(64, z.tokens),
            max_target_positions=64)),
    }


#: parameters drawn from a normal distribution after the model's own init: a constant init
#: (Doge's ``A`` is zeros) makes every score its top-k chooses among equal, and which of equal
#: scores top-k returns is unspecified, in aten as in tritonjit
RANDOM_INIT: dict[str, tuple[str, ...]] = {"doge": ("A",)}

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

#: generate() modes: name -> GenerationConfig kwargs beyond the common ones
MODES: dict[str, dict[str, Any]] = {
    "greedy": dict(do_sample=False),
    "top_k_top_p": dict(do_sample=True, top_k=20, top_p=0.9, temperature=0.7),
    "beam": dict(do_sample=False, num_beams=3),
    "penalties": dict(do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=2),
    "min_p": dict(do_sample=True, min_p=0.05, temperature=1.3),
}


def _inputs(kind: str, model: torch.nn.Module, z: Sizes, device: str, dtype: torch.dtype
            ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(forward inputs, training-step inputs: the same plus labels)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, z.vocab, (z.batch, z.tokens), generator=g).to(device)
    if kind == "image":
        size = getattr(model.config, "image_size", z.image)
        h, w = (size, size) if isinstance(size, int) else size  # Hiera, PVT-v2: (height, width)
        x = {"pixel_values": torch.randn(z.batch, 3, h, w, generator=g).to(device, dtype)}
        return x, {**x, "labels": torch.randint(0, 10, (z.batch,), generator=g).to(device)}
    if kind == "wave":  # raw audio samples; CTC targets
        x = {"input_values": torch.randn(z.batch, 800, generator=g).to(device, dtype)}
        return x, {**x, "labels": torch.randint(1, z.vocab, (z.batch, 5), generator=g).to(device)}
    if kind == "audio":  # log-mel frames, twice the encoder's positions; decoder tokens
        feats = torch.randn(z.batch, 80, z.tokens, generator=g).to(device, dtype)
        dec = ids[:, :16]
        return {"input_features": feats, "decoder_input_ids": dec}, {"input_features": feats, "labels": dec}
    if kind == "features":  # log-mel frames, (batch, frames, 80); CTC targets or decoder tokens
        feats = torch.randn(z.batch, 2 * z.tokens, 80, generator=g).to(device, dtype)
        if model.config.is_encoder_decoder:
            dec = ids[:, :max(4, z.tokens // 2)].contiguous()
            return {"input_features": feats, "decoder_input_ids": dec}, {"input_features": feats, "labels": dec}
        x = {"input_features": feats}
        return x, {**x, "labels": torch.randint(1, z.vocab, (z.batch, 5), generator=g).to(device)}
    if kind == "mlm":
        labels = ids.masked_fill(torch.rand(ids.shape, generator=g).to(device) > 0.15, -100)
        mask = torch.ones_like(ids)
        mask[0, -2:] = 0  # a padded row
        return {"input_ids": ids, "attention_mask": mask}, {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if kind == "s2s":  # an encoder-decoder that does not shift input_ids into decoder inputs itself
        dec = ids[:, :max(4, z.tokens // 4)].contiguous()  # T5 views its labels
        return {"input_ids": ids, "decoder_input_ids": dec}, {"input_ids": ids, "labels": dec}
    return {"input_ids": ids}, {"input_ids": ids, "labels": ids}


#: what enable() routes here: None (the device default) or that plus --include's overloads
INCLUDE: list[str] | None = None
#: --graph: each case captured into a CUDA graph, eager's and enable()'s, their replays compared and timed
GRAPH = False
#: --steps: which of the forward, the training step and a cached decoding step each case runs
STEPS = ("forward", "train")


def _timed(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """Best ms per call, eager and inside one enable(), of 3 interleaved rounds."""
    best, _ = M.eager_vs_enabled(fn, torch.cuda.synchronize, calls, rounds=3, warmup=1, include=INCLUDE)
    return best["eager"] / 1e3, best["tritonjit"] / 1e3


def _coverage(fn: Callable[[], Any]) -> str:
    _, cov = _audit.coverage(fn, include=INCLUDE)
    ok = cov["covered_routed_calls"] + cov.get("policy_calls", 0)
    top = ",".join(f"{k}:{v}" for k, v in list(cov["not_routed"].items())[:6])
    host = f" (+{cov['other_device_calls']} on host tensors)" if cov.get("other_device_calls") else ""
    return f"{ok}/{cov['covered_calls']}{host} | {top or '-'}"


def _nodes(graph: torch.cuda.CUDAGraph) -> int | None:
    """The node count (kernels, copies, memsets) of a graph captured with ``keep_graph``:
    the driver's ``cuGraphGetNodes``; None where this torch or driver cannot say."""
    import ctypes

    try:
        count = ctypes.c_size_t(0)
        rc = ctypes.CDLL("libcuda.so.1").cuGraphGetNodes(ctypes.c_void_p(graph.raw_cuda_graph()), None,
                                                        ctypes.byref(count))
        return int(count.value) if rc == 0 else None
    except Exception:  # noqa: BLE001  (a count is a detail of the row, not its result)
        return None


def _capture(fn: Callable[[], Any], enabled: bool) -> tuple[torch.cuda.CUDAGraph, Any, int | None]:
    """``fn`` captured into a CUDA graph (inside ``enable()`` where ``enabled``), as a user
    captures a model: three warm-up calls on a side stream first, where kernels compile, load
    and autotune and measured policies measure, then the capture on the default stream (a
    host synchronization in any call fails it). (graph, output, node count); the output's
    tensors are the graph's."""
    with T.enable(INCLUDE) if enabled else contextlib.nullcontext():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        try:
            graph, kept = torch.cuda.CUDAGraph(keep_graph=True), True
        except TypeError:  # a torch before keep_graph: no node count
            graph, kept = torch.cuda.CUDAGraph(), False
        with torch.cuda.graph(graph):
            out = fn()
    nodes = None
    if kept:
        nodes = _nodes(graph)
        graph.instantiate()
    return graph, out, nodes


def _replay_error(ref: Any, got: Any) -> float:
    """The largest relative difference of a replay's output from the uncaptured call's on the
    same inputs: logits, loss and gradients (1 - cosine for gradients; 0 where bit for bit)."""
    if not (isinstance(ref, tuple) and len(ref) == 3):  # a forward's logits
        return M.agreement(ref, got)["logits_rel"]
    a = M.agreement(ref[:2], got[:2], [g.float() for g in ref[2]], [g.float() for g in got[2]])
    return max(a["logits_rel"], a["loss_diff"] / max(abs(float(ref[1])), 1e-30), 1.0 - a["grad_cos"])


def _decode_step(model: torch.nn.Module, ids: torch.Tensor, vocab: int
                 ) -> tuple[Callable[[], torch.Tensor], Callable[[], None]]:
    """(one greedy decoding step, a move to the next position): the prompt ``ids`` (cut to fit
    the shortest sliding window, with room for the step) prefilled into a static KV cache,
    then one token a row attending to it, its position a device tensor (the step a server
    captures once and replays at each position). The step writes the cache at that position
    each time it runs (where the cache keeps write counters of its own, transformers 5.2x's,
    the step sets them first: the device's to the position, a sliding layer's host count to
    the prompt's), so it can run again; the move writes a new token and advances the position
    in place, so a replay after it must read the cache one longer."""
    import transformers as tf

    model.eval()
    n, room = ids.shape[1], 2  # the step's position and the next one (the move's)
    cache = tf.StaticCache(config=model.config, max_cache_len=n + room)
    # a full sliding-window layer shifts its whole buffer at each step (no step is then run
    # twice alike): the prompt is cut to leave the step room inside the shortest window
    window = min((layer.max_cache_len for layer in getattr(cache, "layers", ()) if getattr(layer, "is_sliding", False)),
                 default=n + room)
    if window < n + room:
        if window <= room:
            raise ValueError(f"a sliding window of {window} tokens leaves no room for a prompt")
        n, ids = window - room, ids[:, :window - room]
        cache = tf.StaticCache(config=model.config, max_cache_len=n + room)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, use_cache=True, cache_position=torch.arange(n, device=ids.device))
    layers = list(getattr(cache, "layers", ()))
    counters = [c for layer in layers if isinstance(c := getattr(layer, "cumulative_length", None), torch.Tensor)]
    sliding = [layer for layer in layers if hasattr(layer, "cumulative_length_int")]
    start = torch.tensor(n, device=ids.device)
    token, position = ids[:, -1:].clone(), start.view(1)
    draw = torch.Generator().manual_seed(5)

    def decode() -> torch.Tensor:
        for c in counters:
            c.copy_(start)
        for layer in sliding:  # its host-side count (whether the window is full) as after the prompt
            layer.cumulative_length_int = n
        with torch.no_grad():
            return model(input_ids=token, past_key_values=cache, use_cache=True, cache_position=position).logits

    def advance() -> None:
        token.copy_(torch.randint(3, vocab, token.shape, generator=draw))
        start.add_(1)

    if not any(getattr(layer, "is_initialized", False) for layer in layers):
        raise ValueError("the prompt left the static cache empty (the model keeps a cache of its own)")
    if not torch.equal(decode(), decode()):
        raise ValueError("the step does not repeat (the model keeps state of its own beside the static cache)")
    return decode, advance


def _graph_row(name: str, label: str, fn: Callable[[], Any], change: Callable[[], None], calls: int) -> str:
    """One case under CUDA graphs: eager's and enable()'s captures, then the inputs changed in
    place (``change``: rolled, or the next decoding position) and both graphs replayed. A
    replay must give what the same path computes uncaptured on the new inputs (a value read on
    the host while capturing would be stale); enable()'s replay is compared with eager's uncaptured call as
    the other rows are; the replays are timed in interleaved rounds (device time: what a server
    that replays a captured decode step pays)."""
    try:
        eager_graph, eager_out, eager_nodes = _capture(fn, False)
    except Exception as e:  # noqa: BLE001  (eager's own forward does not capture: nothing to compare)
        torch.cuda.synchronize()
        return f"| {name} | {label} (graph) | skip: eager does not capture: {_one_line(e)} | | |"
    try:
        ours_graph, ours_out, ours_nodes = _capture(fn, True)
    except Exception as e:  # noqa: BLE001
        torch.cuda.synchronize()
        traceback.print_exc(limit=-3)
        return f"| {name} | {label} (graph) | error: enable() does not capture (eager does): {_one_line(e)} | | |"
    change()
    torch.manual_seed(7)
    eager = fn()
    torch.manual_seed(7)
    with T.enable(INCLUDE):
        ours = fn()
    eager_graph.replay()
    ours_graph.replay()
    torch.cuda.synchronize()
    e_err, t_err = _replay_error(eager, eager_out), _replay_error(ours, ours_out)
    vs = _replay_error(eager, ours_out)
    # a replay is faithful where it is as close to its uncaptured call as eager's is to its own
    # (bit for bit, or within atomics' and sampling's run-to-run differences)
    status = "ok" if t_err <= max(2 * e_err, 1e-3) else "REPLAY DIFFERS"
    timer = M.Rounds(calls=calls, reps=5, sync=torch.cuda.synchronize)
    timer.add("eager", eager_graph.replay)
    timer.add("tritonjit", ours_graph.replay)
    best = timer.run(warmup=3)
    e_ms, t_ms = best["eager"] / 1e3, best["tritonjit"] / 1e3
    return (f"| {name} | {label} (graph) | {e_ms:.3f} | {t_ms / e_ms:.2f}x | {vs:.1e} vs eager; replay {status}: "
            f"{t_err:.1e} (eager's {e_err:.1e}) | {ours_nodes or '?'} graph nodes (eager's {eager_nodes or '?'}) | |")


def device_lost(device: str) -> bool:
    """Whether ``device``'s context is unusable after a failure (a CUDA fault: an illegal or
    misaligned address or a device-side assertion, in eager's kernels or tritonjit's): a tiny
    op and a synchronize fail."""
    if not device.startswith("cuda"):
        return False
    try:
        torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001  (whatever the fault, the context is gone)
        return True
    return False


def _one_line(e: Exception) -> str:
    """An error as a table cell: its type and the first 120 characters of its message on one line."""
    return f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"


def run_model(name: str, z: Sizes, device: str, dtype: torch.dtype, calls: int, audit: set[str]) -> list[str]:
    """The forward and training-step rows of model ``name``."""
    cls, cfg_cls, attn, kind, kw = cases(z)[name]
    try:
        model = _build(cls, cfg_cls, attn, device, dtype, **kw)
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.rsplit(".", 1)[-1] in RANDOM_INIT.get(name, ()):
                    p.normal_(generator=torch.Generator(p.device).manual_seed(3))
        fwd_in, train_in = _inputs(kind, model, z, device, dtype)
    except Exception as e:  # noqa: BLE001  (a config the model refuses at these sizes: its rows say so)
        rows = [f"| {name} | {label} | error: {_one_line(e)} | | |" for label in ("forward", "train")]
        print(*rows, sep="\n", flush=True)
        return rows

    def fwd() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            return model(**fwd_in).logits

    def train() -> tuple[torch.Tensor, torch.Tensor]:
        model.train()
        model.zero_grad(set_to_none=True)
        out = model(**train_in)
        out.loss.backward()
        return out.logits.detach(), out.loss.detach()

    def train_graph() -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The step, and its gradients as tensors a graph's replay writes."""
        return (*train(), [p.grad for p in model.parameters() if p.grad is not None and p.numel()])

    def roll() -> None:  # new inputs in place: each tensor rolled by one along its last dim
        for t in {id(t): t for t in [*fwd_in.values(), *train_in.values()]}.values():
            t.copy_(t.roll(1, -1))

    # label -> (step, the step a graph captures, gradients compared, new inputs in place)
    steps: dict[str, tuple[Callable[[], Any], Callable[[], Any], bool, Callable[[], None]]] = {
        "forward": (fwd, fwd, False, roll), "train": (train, train_graph, True, roll)}
    rows: list[str] = []
    if "decode" in STEPS:
        try:
            if kind != "lm" or getattr(model.config, "is_encoder_decoder", False):
                raise TypeError("not a decoder-only language model")
            decode, advance = _decode_step(model, fwd_in["input_ids"], z.vocab)
            steps["decode"] = (decode, decode, False, advance)
        except Exception as e:  # noqa: BLE001  (a model without a static cache: the row says so)
            rows.append(f"| {name} | decode | skip: no static-cache decoding: {_one_line(e)} | | |")
            print(rows[-1], flush=True)
    for label, (fn, graph_fn, grads, change) in steps.items():
        if label not in STEPS:
            continue
        if GRAPH:
            try:
                rows.append(_graph_row(name, label, graph_fn, change, calls))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc(limit=-3)
                rows.append(f"| {name} | {label} (graph) | error: {_one_line(e)} | | |")
            print(rows[-1], flush=True)
            continue
        try:
            torch.manual_seed(7)  # the same draws on both paths (PhiMoE's router samples in training)
            ref = fn()
            ref_grads = M._grads(model) if grads else None
            torch.manual_seed(7)
            with T.enable(INCLUDE):
                got = fn()
            a = M.agreement(ref, got, ref_grads, M._grads(model) if grads else None)
            # rows off: the share of positions whose logits moved by more than 5% of the largest
            # (a routing choice flipped at a near tie moves a few; a wrong kernel moves most)
            moved = f" ({a['logits_rows_off']:.2%} rows off)" if a["logits_rows_off"] else ""
            err = f"{a['logits_rel']:.1e}{moved}" + (f" / cos {a['grad_cos']:.6f}" if grads else "")
            timing = "- | -"
            if device == "cuda":
                e, t = _timed(fn, calls)
                timing = f"{e:.2f} | {t / e:.2f}x"
            rows.append(f"| {name} | {label} | {timing} | {err} | {_coverage(fn)} |")
            if f"{name}:{label}" in audit:
                print(T.audit_table(T.audit(fn, rounds=2, include=INCLUDE), limit=12), flush=True)
        except Exception as e:  # noqa: BLE001  (a row per failure; the others still run)
            traceback.print_exc(limit=-3)
            rows.append(f"| {name} | {label} | error: {_one_line(e)} | | |")
        print(rows[-1], flush=True)
    return rows


def run_generate(modes: list[str], z: Sizes, device: str, dtype: torch.dtype) -> list[str]:
    """generate() of a Llama over 3 prompts, two left-padded, in each mode: tokens and scores."""
    import transformers as tf

    cls, cfg_cls, attn, _, kw = cases(z)["llama"]
    model = _build(cls, cfg_cls, attn, device, dtype, **kw).eval()
    n = z.new_tokens
    ids = torch.randint(3, z.vocab, (3, max(z.tokens // 2, 6)), generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    mask[2, :2] = 0
    ids = ids.masked_fill(mask == 0, 0)
    rows = []
    for mode in modes:
        cfg = tf.GenerationConfig(max_new_tokens=n, min_new_tokens=n, pad_token_id=0, eos_token_id=None,
                                  bos_token_id=1, output_logits=True, return_dict_in_generate=True, **MODES[mode])

        def go() -> tuple[torch.Tensor, torch.Tensor]:
            torch.manual_seed(7)  # the sampling modes: the same draws on both paths
            with torch.no_grad():
                out = model.generate(ids, attention_mask=mask, generation_config=cfg)
            return out.sequences[:, -n:], torch.stack(out.logits)

        try:
            ref_tokens, ref_logits = go()
            with T.enable(INCLUDE):
                tokens, logits = go()
            same = (ref_tokens == tokens).all(0).tolist()
            first = same.index(False) if False in same else len(same)
            err = M.agreement(ref_logits[:first + 1], logits[:first + 1])["logits_rel"]
            timing = "- | -"
            if device == "cuda":
                e, t = _timed(go, 2)
                timing = f"{e:.2f} | {t / e:.2f}x"
            rows.append(f"| generate | {mode} | {timing} | {err:.1e}, tokens same {first / len(same):.0%} | "
                        f"{_coverage(go)} |")
        except Exception as e:  # noqa: BLE001
            traceback.print_exc(limit=-3)
            rows.append(f"| generate | {mode} | error: {_one_line(e)} | | |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    gpu = M.backend_device() != "cpu"
    names = list(cases(Sizes(gpu)))
    more, wider, beyond, further = (list(f(Sizes(gpu))) for f in (more_cases, wider_cases, beyond_cases,
                                                                  further_cases))
    base = [n for n in names if n not in more + wider + beyond + further]
    ap.add_argument("--models", default=",".join(base),
                    help=f"of {','.join(names)}; 'more' for {len(more)} more, 'wider' for {len(wider)} beyond those, "
                         f"'beyond' for {len(beyond)} further, 'further' for {len(further)} past those, "
                         "'all' for every one; empty: none")
    ap.add_argument("--generate", default=",".join(MODES), help=f"generate() modes, of {','.join(MODES)}; empty: none")
    ap.add_argument("--dtype", choices=tuple(DTYPES), default="bf16" if gpu else "fp32")
    ap.add_argument("--calls", type=int, default=5, help="calls a timed round (GPU)")
    for knob, what in (("hidden", "model width"), ("layers", "layers"), ("batch", "batch"),
                       ("tokens", "tokens a sequence"), ("image", "image side, pixels"),
                       ("vocab", "vocabulary (a real one, 32000 or more, takes the softmax's long-row path)")):
        ap.add_argument(f"--{knob}", type=int, default=0, help=f"{what} (default: the size of this device's table)")
    ap.add_argument("--audit", default="", help="cases to audit per call: model:forward or model:train, comma-separated")
    ap.add_argument("--steps", default="forward,train",
                    help="of forward,train,decode: the steps each case runs (decode: one token a row after the "
                         "prompt, from a static KV cache; decoder-only models)")
    ap.add_argument("--graph", action="store_true",
                    help="capture each step into a CUDA graph, eager's and enable()'s; check that a replay on "
                         "changed inputs gives what the uncaptured call gives, and time the replays (device time, "
                         "no host cost: a server replaying a captured step); CUDA only; generate() is not captured")
    ap.add_argument("--include", default="", help="aten overloads routed on top of the device default, "
                    "comma-separated (opt-in ones such as _grouped_mm)")
    ap.add_argument("--errors-before", action="store_true", help=argparse.SUPPRESS)  # a continuation's
    a = ap.parse_args(argv)
    groups = {"more": more, "wider": wider, "beyond": beyond, "further": further, "all": names}
    models = [n for m in a.models.split(",") if m for n in groups.get(m, [m])]
    modes = [m for m in a.generate.split(",") if m]
    if bad := [m for m in models if m not in names] + [m for m in modes if m not in MODES]:
        ap.error(f"unknown models or modes: {bad}")
    device, dtype = M.backend_device(), DTYPES[a.dtype]
    global INCLUDE, GRAPH, STEPS
    STEPS = tuple(x for x in a.steps.split(",") if x)
    if bad := sorted(set(STEPS) - {"forward", "train", "decode"}):
        ap.error(f"--steps: unknown steps {bad}; of forward,train,decode")
    if a.graph and device != "cuda":
        ap.error(f"--graph captures CUDA graphs; this machine's backend runs on {device!r}")
    GRAPH = a.graph
    if extra := [n for n in a.include.split(",") if n]:
        if bad := sorted(set(extra) - set(T.default_ops("CPU"))):  # the CPU default is the whole table
            ap.error(f"--include: no tritonjit implementation for {bad}")
        INCLUDE = sorted(set(T.default_ops()) | set(extra))
    warnings.filterwarnings("ignore")
    M.quiet()
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)  # the C++ operator path, built before anything is timed
    z = Sizes(gpu, a.hidden, a.layers, a.batch, a.tokens, a.image, a.vocab)
    print(f"sizes: hidden {z.hidden}, layers {z.layers}, heads {z.heads}, batch {z.batch}, tokens {z.tokens}, "
          f"image {z.image}, vocab {z.vocab}, {a.dtype}")
    if GRAPH:
        print("| case | step | eager replay ms | x eager | error vs eager; replay vs the uncaptured call | graph nodes | |")
    else:
        print("| case | step | eager ms | x eager | logits err (rel) | covered calls on tritonjit | not routed |")
    print("| --- | --- | ---: | ---: | --- | --- | --- |")
    rows: list[str] = []
    for i, name in enumerate(models):
        rows += run_model(name, z, device, dtype, a.calls, set(a.audit.split(",")))
        if (rest := models[i + 1:]) and device_lost(device):
            # a fault (eager's or tritonjit's) leaves the context unusable: the rest in a new process
            print(f"(the device's context is lost after {name}: the remaining {len(rest)} run in a new process)",
                  flush=True)
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:], "--models", ",".join(rest),
                                      "--errors-before"])
    if modes and not GRAPH:  # generate() decides on the host between steps: not one graph
        rows += run_generate(modes, z, device, dtype)
    return 1 if a.errors_before or any("error:" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
