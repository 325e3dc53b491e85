"""End-to-end benchmark: transformers models, eager against tritonjit_ops.enable().

    python benchmarks/models.py [--models llama,qwen2,gpt2,bert|more|zoo|all] [--shapes decode,prefill,train,generate]
                                [--rounds R] [--include all|OPS] [--exclude OPS] [--dtype D | --amp bf16|fp16]
                                [--json FILE] [--smoke [--timed]]

The real-model measure of the operator library. Each model is built from a config
with random weights (no download): a Llama decoder, a Qwen2 decoder (biased q/k/v), a
GPT-2 decoder and a BERT encoder by default; ``--models`` adds Mistral, Gemma, Phi-3,
Qwen3, GPT-NeoX, OPT and T5 (encoder-decoder) (``more``), and the zoo (``zoo``): 15
architectures with other op mixes, built from transformers' classes by name (ZOO:
multi-query and parallel attention, MoE routing, partial rotary, ALiBi, QK norms,
local/global attention, an encoder-decoder, a vision transformer and a convolutional
network). 4 layers of hidden 1024 (the vision models at 224x224), bf16 on the GPU, sdpa
attention where the architecture has it. Shapes: decode (a forward of 1x16 tokens),
prefill (a forward of 8x1024), train (one forward + backward at 4x256 with the
model's LM/MLM loss) and generate (greedy ``model.generate`` of 32 tokens after a
1x128 prompt with the model's KV cache: a prefill, then 31 one-token forwards that read
and extend the cache; decoder and encoder-decoder models only). Eager and enable() run the same inputs in one process: one call
each to compare (tritonjit compiles and tunes here), warm-up calls, then rounds that
time each path in turn (benchmarks/_timing.py); the table shows the best round, the
JSON the median too. ``--amp`` keeps the parameters in fp32 and runs every call under
``torch.autocast`` to bf16 or fp16, as mixed-precision training does.

Agreement: the logits under enable() against eager (max abs diff, that relative to
max |eager|, and the share of positions off by more than 5% of it: a few where an MoE
router's top-k flips on a near tie in bf16, most where an operator is wrong); for the
training step the parameter gradients (max abs diff relative to the largest eager
gradient, and the cosine similarity of all gradients). tritonjit calls: of the step's
aten calls that enable() covers, and of all its calls that launch a kernel (not views or
allocations), those that ran tritonjit kernels under enable().
The column "covered: kernel or measured aten": the share of covered calls that ran
tritonjit kernels or that a measured policy (mm, SDPA) gave to aten's kernel because it
measured faster on their shape (allowed; an ordinary fallback counts against it).
``tritonjit bench audit`` lists them call by call.

--smoke (automatic without a GPU): tiny fp32 configs through Triton's interpreter, each
model and shape run once eager and once enabled, agreement checked; a test, not a
measurement. Exit status 1 when a smoke case disagrees.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

_ROOT = Path(__file__).resolve().parents[1]
for sub in ("operators", "tritonjit_core"):
    if str(_ROOT / sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / sub))
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import tritonjit  # noqa: E402
import tritonjit_ops as T  # noqa: E402
from _timing import Rounds  # noqa: E402
from tritonjit_ops import _audit  # noqa: E402


def backend_device() -> str:
    """The torch device type of the active backend's tensors: where the model must live for
    enable() to route its calls (the interpreter's are on the CPU, also on a GPU machine)."""
    return tritonjit.current_backend().info.device_type or "cpu"


MODELS = ("llama", "qwen2", "gpt2", "bert")
#: further architectures, measured on request (--models): sliding-window attention
#: (Mistral), GeGLU with tanh GELU, a scaled embedding and (1 + w) RMSNorm (Gemma), fused
#: QKV and gate-up projections (Phi-3)
MORE_MODELS = ("mistral", "gemma", "phi3", "qwen3", "gptneox", "opt", "t5")
#: shape -> (batch, tokens), on the GPU and in the smoke mode
SHAPES = {"decode": (1, 16), "prefill": (8, 1024), "train": (4, 256), "generate": (1, 128)}
SMOKE_SHAPES = {"decode": (1, 4), "prefill": (2, 8), "train": (2, 8), "generate": (1, 4)}
#: tokens that the generate shape adds to its prompt (greedy, KV cache), on the GPU and in the smoke mode
NEW_TOKENS = {"gpu": 32, "smoke": 3}
#: the input kinds that generate() applies to (a masked-LM encoder and an image classifier do not generate)
GENERATIVE = ("lm", "seq2seq")
#: --dtype's choices
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
#: smoke-mode agreement bounds (fp32): relative logits / gradient error, gradient cosine
SMOKE_TOL = {"logits_rel": 1e-4, "grad_rel": 1e-3, "grad_cos": 0.9999}
#: the same under --amp: each autocast product is rounded to 8 (bf16) or 11 (fp16) bits, and
#: the two paths round in another order (tests/ops/test_autocast.py's bounds)
SMOKE_TOL_AMP = {"logits_rel": 3e-2, "grad_rel": 5e-2, "grad_cos": 0.999}


# ------------------------------------------------------------------ models
@dataclass(frozen=True)
class Size:
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    positions: int


GPU_SIZE = Size(vocab=32000, hidden=1024, intermediate=2816, layers=4, heads=16, kv_heads=4, positions=1024)
SMOKE_SIZE = Size(vocab=96, hidden=32, intermediate=64, layers=1, heads=4, kv_heads=2, positions=64)


# the zoo: name -> (model class, config class, inputs kind, attention, config kwargs at size z).
# Inputs: "lm" token ids with the ids as labels (a decoder shifts them; an encoder-decoder
# reads them as its targets), "mlm" 15% of positions as labels, "image" pixels and a class.
def _llama_like(z: Size, **kw: Any) -> dict[str, Any]:
    return dict(vocab_size=z.vocab, hidden_size=z.hidden, intermediate_size=z.intermediate,
                num_hidden_layers=z.layers, num_attention_heads=z.heads, num_key_value_heads=z.kv_heads,
                max_position_embeddings=z.positions, **kw)


def _gpt_like(z: Size, **kw: Any) -> dict[str, Any]:
    return dict(vocab_size=z.vocab, n_embd=z.hidden, n_layer=z.layers, n_head=z.heads, n_positions=z.positions,
                n_inner=4 * z.hidden, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **kw)


def _image_size(z: Size) -> int:
    return 224 if z is GPU_SIZE else 32


ZOO: dict[str, tuple[str, str, str, str, Callable[[Size], dict[str, Any]]]] = {
    "falcon": ("FalconForCausalLM", "FalconConfig", "lm", "sdpa", lambda z: dict(  # multi-query, parallel attention
        vocab_size=z.vocab, hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads,
        hidden_dropout=0.0, attention_dropout=0.0)),
    "gptj": ("GPTJForCausalLM", "GPTJConfig", "lm", "eager", lambda z: _gpt_like(z, rotary_dim=z.hidden // z.heads // 2)),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig", "lm", "sdpa", lambda z: _llama_like(  # MoE routing
        z, num_local_experts=8, num_experts_per_tok=2, tie_word_embeddings=False)),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", "lm", "sdpa", lambda z: _llama_like(
        z, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=z.intermediate // 4,
        head_dim=z.hidden // z.heads, tie_word_embeddings=False)),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", "lm", "sdpa", lambda z: _llama_like(z)),  # partial rotary
    "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", "lm", "sdpa", lambda z: _llama_like(z)),  # QK norms, post-norms
    "cohere": ("CohereForCausalLM", "CohereConfig", "lm", "sdpa", lambda z: _llama_like(z)),  # parallel, LayerNorm
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", "lm", "sdpa", lambda z: _llama_like(
        z, head_dim=z.hidden // z.heads, sliding_window=z.positions // 4)),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", "lm", "sdpa", lambda z: _gpt_like(z)),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", "lm", "sdpa", lambda z: _llama_like(
        z, residual_dropout=0.0, embedding_dropout=0.0)),
    "mpt": ("MptForCausalLM", "MptConfig", "lm", "eager", lambda z: dict(  # ALiBi
        vocab_size=z.vocab, d_model=z.hidden, n_layers=z.layers, n_heads=z.heads, max_seq_len=z.positions)),
    "bart": ("BartForConditionalGeneration", "BartConfig", "lm", "sdpa", lambda z: dict(
        vocab_size=z.vocab, d_model=z.hidden, encoder_layers=z.layers // 2 or 1, decoder_layers=z.layers // 2 or 1,
        encoder_attention_heads=z.heads, decoder_attention_heads=z.heads, encoder_ffn_dim=4 * z.hidden,
        decoder_ffn_dim=4 * z.hidden, max_position_embeddings=z.positions, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0)),
    "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", "mlm", "sdpa", lambda z: dict(  # local/global
        vocab_size=z.vocab, hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads,
        intermediate_size=z.intermediate, max_position_embeddings=z.positions, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2, global_attn_every_n_layers=2, local_attention=z.positions // 8)),
    "vit": ("ViTForImageClassification", "ViTConfig", "image", "sdpa", lambda z: dict(
        hidden_size=z.hidden, num_hidden_layers=z.layers, num_attention_heads=z.heads, intermediate_size=4 * z.hidden,
        image_size=_image_size(z), patch_size=16 if z is GPU_SIZE else 4, num_labels=10, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig", "image", "eager", lambda z: dict(
        hidden_sizes=[96, 192, 384, 768] if z is GPU_SIZE else [8, 16], depths=[3, 3, 9, 3] if z is GPU_SIZE else [1, 1],
        num_stages=4 if z is GPU_SIZE else 2, image_size=_image_size(z), num_labels=10, drop_path_rate=0.0)),
}
ALL_MODELS = MODELS + MORE_MODELS + tuple(ZOO)
#: --models groups
GROUPS = {"more": MORE_MODELS, "zoo": tuple(ZOO), "all": ALL_MODELS}


def kind(name: str) -> str:
    """The inputs a model takes: "lm", "mlm", "seq2seq" (T5: its decoder reads the
    tokens too) or "image"."""
    return ZOO[name][2] if name in ZOO else {"bert": "mlm", "t5": "seq2seq"}.get(name, "lm")


def _config(name: str, z: Size) -> Any:
    """A transformers config of ``name`` at size ``z``: no dropout (the training step is
    compared call for call), sdpa attention, no download."""
    import transformers as tf

    common = dict(vocab_size=z.vocab, attn_implementation="sdpa")
    if name in ("llama", "qwen2"):
        cls = tf.LlamaConfig if name == "llama" else tf.Qwen2Config
        return cls(hidden_size=z.hidden, intermediate_size=z.intermediate, num_hidden_layers=z.layers,
                   num_attention_heads=z.heads, num_key_value_heads=z.kv_heads,
                   max_position_embeddings=z.positions, tie_word_embeddings=False, **common)
    if name == "mistral":
        return tf.MistralConfig(hidden_size=z.hidden, intermediate_size=z.intermediate, num_hidden_layers=z.layers,
                                num_attention_heads=z.heads, num_key_value_heads=z.kv_heads,
                                max_position_embeddings=z.positions, sliding_window=z.positions // 2,
                                tie_word_embeddings=False, **common)
    if name == "gemma":
        return tf.GemmaConfig(hidden_size=z.hidden, intermediate_size=z.intermediate, num_hidden_layers=z.layers,
                              num_attention_heads=z.heads, num_key_value_heads=z.kv_heads, head_dim=z.hidden // z.heads,
                              max_position_embeddings=z.positions, hidden_activation="gelu_pytorch_tanh", **common)
    if name == "phi3":
        return tf.Phi3Config(hidden_size=z.hidden, intermediate_size=z.intermediate, num_hidden_layers=z.layers,
                             num_attention_heads=z.heads, num_key_value_heads=z.kv_heads,
                             max_position_embeddings=z.positions, original_max_position_embeddings=z.positions,
                             resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, pad_token_id=0,
                             tie_word_embeddings=False, **common)
    if name == "qwen3":  # RMS norms of the queries and keys per head: many skinny rows
        return tf.Qwen3Config(hidden_size=z.hidden, intermediate_size=z.intermediate, num_hidden_layers=z.layers,
                              num_attention_heads=z.heads, num_key_value_heads=z.kv_heads,
                              head_dim=z.hidden // z.heads, max_position_embeddings=z.positions,
                              tie_word_embeddings=False, **common)
    if name == "gptneox":  # partial rotary, parallel attention and MLP, LayerNorm, GELU
        return tf.GPTNeoXConfig(hidden_size=z.hidden, intermediate_size=4 * z.hidden, num_hidden_layers=z.layers,
                                num_attention_heads=z.heads, max_position_embeddings=z.positions, rotary_pct=0.25,
                                use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
                                tie_word_embeddings=False, **common)
    if name == "opt":  # learned positions, ReLU, LayerNorm before each block
        return tf.OPTConfig(hidden_size=z.hidden, ffn_dim=4 * z.hidden, num_hidden_layers=z.layers,
                            num_attention_heads=z.heads, max_position_embeddings=z.positions, word_embed_proj_dim=z.hidden,
                            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0, **common)
    if name == "t5":  # encoder-decoder: relative position bias, RMS-style norm, ReLU, cross-attention
        return tf.T5Config(d_model=z.hidden, d_kv=z.hidden // z.heads, d_ff=z.intermediate, num_layers=z.layers,
                           num_decoder_layers=z.layers, num_heads=z.heads, dropout_rate=0.0,
                           decoder_start_token_id=0, pad_token_id=0, **common)
    if name == "gpt2":
        return tf.GPT2Config(n_embd=z.hidden, n_inner=4 * z.hidden, n_layer=z.layers, n_head=z.heads,
                             n_positions=z.positions, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                             bos_token_id=0, eos_token_id=0, **common)
    if name == "bert":
        return tf.BertConfig(hidden_size=z.hidden, intermediate_size=4 * z.hidden, num_hidden_layers=z.layers,
                             num_attention_heads=z.heads, max_position_embeddings=z.positions,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **common)
    raise ValueError(f"unknown model {name!r}; expected one of {', '.join(ALL_MODELS)}")


def build_model(name: str, smoke: bool, device: str, dtype: torch.dtype, seed: int = 0) -> torch.nn.Module:
    """``name`` with random weights (seeded), on ``device`` in ``dtype``."""
    import transformers as tf

    if name in ZOO:
        model_cls, cfg_cls, _, attn, kw = ZOO[name]
        if not hasattr(tf, model_cls):
            raise ValueError(f"transformers {tf.__version__} has no {model_cls}")
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = getattr(tf, cfg_cls)(**kw(SMOKE_SIZE if smoke else GPU_SIZE))
            cfg._attn_implementation = attn
            model = getattr(tf, model_cls)(cfg)
        return model.to(device=device, dtype=dtype)
    cls = {"llama": tf.LlamaForCausalLM, "qwen2": tf.Qwen2ForCausalLM, "gpt2": tf.GPT2LMHeadModel,
           "bert": tf.BertForMaskedLM, "mistral": tf.MistralForCausalLM, "gemma": tf.GemmaForCausalLM,
           "phi3": tf.Phi3ForCausalLM, "qwen3": tf.Qwen3ForCausalLM, "gptneox": tf.GPTNeoXForCausalLM,
           "opt": tf.OPTForCausalLM, "t5": tf.T5ForConditionalGeneration}[name]
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(_config(name, SMOKE_SIZE if smoke else GPU_SIZE))
    return model.to(device=device, dtype=dtype)


def make_inputs(name: str, model: torch.nn.Module, batch: int, tokens: int, device: str,
                seed: int = 1) -> dict[str, torch.Tensor]:
    """Token ids and labels: the ids themselves for a decoder (it shifts them), 15% of
    positions for a masked-LM loss (-100 elsewhere); an image model's ``batch`` images
    (``tokens`` unused) and a class each."""
    g = torch.Generator().manual_seed(seed)
    if kind(name) == "image":
        size = model.config.image_size
        return {"pixel_values": torch.randn(batch, 3, size, size, generator=g).to(device, model.dtype),
                "labels": torch.randint(0, model.config.num_labels, (batch,), generator=g).to(device)}
    ids = torch.randint(3, model.config.vocab_size, (batch, tokens), generator=g)  # no pad, bos or eos id
    labels = ids.clone()
    if kind(name) == "mlm":
        keep = torch.rand(batch, tokens, generator=g) < 0.15
        keep[:, 0] = True
        labels = torch.where(keep, ids, torch.full_like(ids, -100))
    return {"input_ids": ids.to(device), "labels": labels.to(device)}


def step_fn(name: str, model: torch.nn.Module, shape: str, inputs: dict[str, torch.Tensor],
            smoke: bool = False) -> Callable[[], Any]:
    """The call a case times: a forward without grad (decode, prefill; logits), or one
    training step (train: loss.backward(); logits and loss)."""
    k = kind(name)
    kw: dict[str, Any] = {} if k in ("mlm", "image") else {"use_cache": False}
    key = "pixel_values" if k == "image" else "input_ids"
    x, labels = inputs[key], inputs["labels"]
    if shape == "generate":
        return _generate_fn(name, model, x, NEW_TOKENS["smoke" if smoke else "gpu"])
    if shape != "train":
        model.eval()
        # an encoder-decoder's decoder reads the same tokens (BART makes its own from the ids)
        fkw = dict(kw, decoder_input_ids=x) if k == "seq2seq" else kw

        def forward() -> torch.Tensor:
            with torch.no_grad():
                return model(**{key: x}, **fkw).logits

        return forward
    model.train()

    def train() -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        out = model(**{key: x}, labels=labels, **kw)
        out.loss.backward()
        return out.logits.detach(), out.loss.detach()

    return train


def _generate_fn(name: str, model: torch.nn.Module, ids: torch.Tensor, n: int) -> Callable[[], Any]:
    """Greedy ``model.generate`` of a fixed number of tokens with the model's KV cache: a
    prefill of the prompt, then one forward of one token per new token (what serving a
    single request costs, host syncs of generate's stopping checks included). Returns
    the logits of every step and the generated tokens."""
    if (why := not_applicable(name, "generate")) is not None:
        raise ValueError(f"{name} {why}; the generate shape takes {' or '.join(GENERATIVE)} models")
    import transformers as tf

    cfg = tf.GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True, num_beams=1,
                              eos_token_id=None, pad_token_id=0, bos_token_id=0, decoder_start_token_id=0,
                              output_logits=True, return_dict_in_generate=True)
    model.eval()

    def generate() -> GenerateResult:
        with torch.no_grad():
            out = model.generate(ids, generation_config=cfg)
        return GenerateResult(torch.stack(out.logits), out.sequences[:, -n:])

    return generate


def not_applicable(name: str, shape: str) -> str | None:
    """Why model ``name`` has no ``shape`` case (None: it has one): a masked-LM encoder and an
    image classifier do not generate."""
    if shape == "generate" and kind(name) not in GENERATIVE:
        return f"does not generate (a {kind(name)} model)"
    return None


@dataclass(frozen=True)
class GenerateResult:
    """What a generate step returns: logits [steps, batch, vocab] and the new tokens [batch, steps]."""

    logits: torch.Tensor
    tokens: torch.Tensor


# ------------------------------------------------------------------ agreement
def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    """Copies of ``model``'s gradients in fp32; a parameter with no elements (a shrunk
    MobileBERT's) has nothing to compare."""
    return [p.grad.detach().float().clone() for p in model.parameters() if p.grad is not None and p.numel()]


def first_differing(ref: GenerateResult, got: GenerateResult) -> int:
    """The first step whose new token differs in some row (the step count where none does)."""
    same = (ref.tokens == got.tokens).all(0).tolist()
    return same.index(False) if False in same else len(same)


def agreement(ref: Any, got: Any, ref_grads: list[torch.Tensor] | None = None,
              got_grads: list[torch.Tensor] | None = None) -> dict[str, float]:
    """Logits (and loss, gradients) of enable() against eager. For generate, the logits of
    the steps up to and including the first one whose token differs (a later step reads
    other tokens), and ``tokens_same``: the share of steps before it."""
    if isinstance(ref, GenerateResult):
        first = first_differing(ref, got)
        out = agreement(ref.logits[:first + 1], got.logits[:first + 1])
        return {**out, "tokens_same": first / max(ref.tokens.shape[1], 1)}
    r = (ref[0] if isinstance(ref, tuple) else ref).float()
    g = (got[0] if isinstance(got, tuple) else got).float()
    diff = (r - g).abs()
    d, scale = float(diff.max()), max(float(r.abs().max()), 1e-30)
    # the share of positions (rows of the last dim) off by more than 5% of the largest logit:
    # a routing decision that flipped on a near tie (MoE top-k in bf16) moves a few rows; an
    # operator that computes wrongly moves most
    rows = diff.reshape(-1, diff.shape[-1]).amax(-1) if diff.dim() else diff.reshape(1)
    out = {"logits_max_abs": d, "logits_rel": d / scale,
           "logits_rows_off": float((rows > 0.05 * scale).float().mean())}
    if isinstance(ref, tuple):
        out["loss_diff"] = abs(float(ref[1]) - float(got[1]))
    if ref_grads is not None and got_grads is not None:
        if len(ref_grads) != len(got_grads):
            return {**out, "grad_rel": math.inf, "grad_cos": -1.0}
        scale = max(float(x.abs().max()) for x in ref_grads)
        out["grad_rel"] = max(float((x - y).abs().max()) for x, y in zip(ref_grads, got_grads)) / max(scale, 1e-30)
        a = torch.cat([x.flatten() for x in ref_grads]).double()
        b = torch.cat([y.flatten() for y in got_grads]).double()
        # identical gradients agree, zero ones included (a one-token causal LM has no target:
        # its gradients are all zero on both paths, and a cosine of two zero vectors reads 0)
        same = torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
        # scaled first: the cosine's eps (1e-8 on the norms' product) reads 0 for gradients
        # of 1e-28, a shrunk model's scale (a vision model's logits of 1e-30)
        norm = max(float(a.abs().nan_to_num().max()), float(b.abs().nan_to_num().max()), 1e-300)
        out["grad_cos"] = 1.0 if same else float(torch.nn.functional.cosine_similarity(a / norm, b / norm, dim=0))
    return out


# ------------------------------------------------------------------ one case
def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def _seconds_per_call(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    """Eager seconds per call once warm (the first call pays for lazy initialization)."""
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return max(best, 1e-6)


def eager_vs_enabled(fn: Callable[[], Any], sync: Callable[[], None], calls: int, rounds: int,
                     include: str | list[str] | None = None, exclude: tuple[str, ...] = (),
                     warmup: int = 3) -> tuple[dict[str, float], dict[str, float]]:
    """us per call of ``fn`` eager and inside one ``enable()``: (best, median) of ``rounds``
    interleaved rounds of ``calls`` calls, keyed "eager" and "tritonjit". One ``enable()``
    spans each tritonjit round, so its entry and exit cost is not in the per-call figure."""
    timer = Rounds(calls=calls, reps=rounds, sync=sync)
    timer.add("eager", fn)

    def enabled(n: int) -> float:
        with T.enable(include, exclude):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            return (time.perf_counter() - t) / n * 1e6

    timer.add_timed("tritonjit", enabled)
    best = timer.run(warmup=warmup)
    return best, {k: statistics.median(v) for k, v in timer.samples.items()}


def autocast_fn(fn: Callable[[], Any], device: str, amp: torch.dtype) -> Callable[[], Any]:
    """``fn`` under ``torch.autocast(device, amp)``: fp32 parameters, the products in ``amp``
    (mixed-precision training and inference as most models run them). The residual stream
    stays fp32 while the linears return ``amp``: the mixed-dtype adds, the casts and the
    fp32 norms and softmaxes that autocast makes are what such a step costs."""
    def under_autocast() -> Any:
        with torch.autocast(device_type=device, dtype=amp):
            return fn()

    return under_autocast


def run_case(name: str, shape: str, smoke: bool, device: str, dtype: torch.dtype, rounds: int,
             timed: bool = True, include: str | list[str] | None = None, exclude: tuple[str, ...] = (),
             amp: torch.dtype | None = None) -> dict[str, Any]:
    """One model and shape: agreement, coverage and (``timed``) eager against
    ``enable(include, exclude)`` in interleaved rounds. With ``amp``, the model's parameters
    are fp32 (``dtype`` is ignored) and every call runs under autocast to ``amp``."""
    batch, tokens = (SMOKE_SHAPES if smoke else SHAPES)[shape]
    model = build_model(name, smoke, device, torch.float32 if amp is not None else dtype)
    inputs = make_inputs(name, model, batch, tokens, device)
    fn = step_fn(name, model, shape, inputs, smoke)
    if amp is not None:
        fn = autocast_fn(fn, device, amp)
    sync = _sync(device)
    train = shape == "train"
    row: dict[str, Any] = {"model": name, "shape": shape, "batch": batch, "tokens": tokens}

    ref = fn()
    if isinstance(ref, GenerateResult):
        row["new_tokens"] = ref.tokens.shape[1]
    logits = ref.logits if isinstance(ref, GenerateResult) else ref[0] if isinstance(ref, tuple) else ref
    row["logits_dtype"] = str(logits.dtype).replace("torch.", "")  # the lm head's: autocast's dtype under --amp
    ref_grads = _grads(model) if train else None
    t0 = time.perf_counter()
    with T.enable(include, exclude):
        fn()  # the first enabled call: compiles, tunes, and the measured policies (mm, SDPA) decide
    sync()
    row["first_enabled_s"] = time.perf_counter() - t0  # compile (and tune) included
    # counted on the next call: a policy's first call of a shape times tritonjit's kernel
    # against aten's, which launched tritonjit kernels for a call that aten serves from then on
    got, cov = _audit.coverage(fn, include=include, exclude=exclude)
    row.update(agreement(ref, got, ref_grads, _grads(model) if train else None))
    del ref, got, ref_grads
    row.update({k: cov[k] for k in ("calls", "kernel_calls", "covered_calls", "routed_calls", "covered_routed_calls",
                                    "policy_calls", "other_device_calls")})
    row["not_routed"], row["policy"] = cov["not_routed"], cov["policy"]
    if not timed:
        return row

    calls = max(1, min(50, int(0.2 / _seconds_per_call(fn, sync))))  # about 0.2 s a round
    best, med = eager_vs_enabled(fn, sync, calls, rounds, include, exclude)
    row.update(calls_per_round=calls, rounds=rounds, eager_ms=best["eager"] / 1e3, tritonjit_ms=best["tritonjit"] / 1e3,
               ratio=best["tritonjit"] / best["eager"], eager_median_ms=med["eager"] / 1e3,
               tritonjit_median_ms=med["tritonjit"] / 1e3, ratio_median=med["tritonjit"] / med["eager"])
    return row


def smoke_ok(row: dict[str, Any], tol: dict[str, float] = SMOKE_TOL) -> bool:
    """The smoke mode's agreement check (fp32 through the interpreter; ``tol``
    SMOKE_TOL_AMP under autocast)."""
    if "error" in row or row["logits_rel"] > tol["logits_rel"]:
        return False
    if row["shape"] == "generate":
        return row["tokens_same"] == 1.0
    if row["shape"] == "train":
        return row["grad_rel"] <= tol["grad_rel"] and row["grad_cos"] >= tol["grad_cos"]
    return True


def quiet() -> None:
    """Silence the warnings that repeat on every case: enable() overriding aten's kernels
    (intended), the interpreter's numpy warnings on masked lanes, transformers' config notes."""
    warnings.filterwarnings("ignore", message="Warning only once for all operators")
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.*")
    try:
        from transformers.utils import logging as tf_logging

        tf_logging.set_verbosity_error()
    except ImportError:
        pass


# ------------------------------------------------------------------ output
def _e(v: Any) -> str:
    return "-" if v is None else f"{v:.1e}"


def _tokens(r: dict[str, Any]) -> str:
    """generate's token agreement: the share of new tokens before the first that differs."""
    return f" ({100 * r['tokens_same']:.0f}% tokens same)" if "tokens_same" in r else ""


def _cos(v: float | None) -> str:
    return "-" if v is None else f"{v:.6f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = "| model | shape | tokens | eager ms | tritonjit ms | ratio | ratio (median) | logits err (abs / rel / rows off) " \
           "| grad err (rel) | grad cos | tritonjit calls: of covered, of all | covered: kernel or measured aten |"
    out = [head, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['shape']} | {r['batch']}x{r['tokens']} | error: {r['error']} |"
                       " | | | | | | | |")
            continue
        routed = (f"{r['covered_routed_calls']}/{r['covered_calls']}, "
                  f"{r['routed_calls']}/{r['kernel_calls']} ({100 * r['routed_calls'] / max(r['kernel_calls'], 1):.0f}%)")
        ok = r["covered_routed_calls"] + r.get("policy_calls", 0)
        either = f"{ok}/{r['covered_calls']} ({100 * ok / max(r['covered_calls'], 1):.0f}%)"
        timed = "ratio" in r
        timing = (f"{r['tritonjit_ms']:.3f}", f"{r['ratio']:.2f}x", f"{r['ratio_median']:.2f}x") if timed \
            else ("(not timed)", "-", "-")
        eager = f"{r['eager_ms']:.3f}" if timed else "-"
        size = f"{r['batch']}x{r['tokens']}" + (f"+{r['new_tokens']}" if "new_tokens" in r else "")
        out.append(f"| {r['model']} | {r['shape']} | {size} | {eager} | {timing[0]} | {timing[1]} | "
                   f"{timing[2]} | {_e(r['logits_max_abs'])} / {_e(r['logits_rel'])} / "
                   f"{100 * r.get('logits_rows_off', 0):.1f}%{_tokens(r)} | {_e(r.get('grad_rel'))} | "
                   f"{_cos(r.get('grad_cos'))} | {routed} | {either} |")
    lines = ["\n".join(out), ""]
    for r in rows:
        if r.get("not_routed"):
            top = ", ".join(f"{op} {n}{_measured(n, r.get('policy', {}).get(op, 0))}"
                            for op, n in list(r["not_routed"].items())[:6])
            lines.append(f"{r['model']}/{r['shape']}: calls without a tritonjit kernel: {top}")
    return "\n".join(lines)


def _measured(calls: int, policy: int) -> str:
    """The mark of an op's calls without a tritonjit kernel that a measured policy gave to aten."""
    if not policy:
        return ""
    return " (aten measured faster)" if policy == calls else f" ({policy} aten measured faster)"


def routing(include: str | None) -> str | list[str] | None:
    """``--include``'s value as enable() takes it: None, "all", or a list of overloads."""
    if include is None or include == "all":
        return include
    return [x for x in include.split(",") if x]


def expand_models(spec: str) -> list[str]:
    """``--models``' value: names and groups (GROUPS), in order, each model once."""
    out: list[str] = []
    for m in (x for x in spec.split(",") if x):
        out += [n for n in GROUPS.get(m, (m,)) if n not in out]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tritonjit bench models", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of {', '.join(ALL_MODELS)}, or the groups {', '.join(GROUPS)} "
                        f"(default: {', '.join(MODELS)})")
    p.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    p.add_argument("--rounds", type=int, default=7, help="timed rounds per path (GPU)")
    p.add_argument("--smoke", action="store_true", help="tiny fp32 configs, agreement only (default without a GPU)")
    p.add_argument("--timed", action="store_true", help="time the smoke configs too (exercises the timing code; "
                   "interpreter figures mean nothing)")
    p.add_argument("--include", default=None, help="enable()'s include: comma-separated overloads, or 'all' "
                   "(default: the backend's default set)")
    p.add_argument("--exclude", default="", help="enable()'s exclude: comma-separated overloads")
    p.add_argument("--dtype", choices=tuple(DTYPES), default=None,
                   help="the models' dtype on a GPU (default bf16; the smoke mode runs fp32)")
    p.add_argument("--amp", choices=("bf16", "fp16"), default=None,
                   help="mixed precision: fp32 parameters, every call under torch.autocast to this dtype "
                        "(replaces --dtype; also in the smoke mode)")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = p.parse_args(argv)
    if args.amp and args.dtype:
        p.error("--amp and --dtype exclude each other: --amp keeps the parameters in fp32")
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install transformers", file=sys.stderr)
        return 2
    quiet()
    device = backend_device()
    smoke = args.smoke or device == "cpu"
    dtype = torch.float32 if smoke else DTYPES[args.dtype or "bf16"]
    amp = DTYPES[args.amp] if args.amp else None
    tol = SMOKE_TOL_AMP if amp is not None else SMOKE_TOL
    models = expand_models(args.models)
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            p.error(f"unknown shape {s!r}; expected one of {', '.join(SHAPES)}")
    for m in models:
        if m not in ALL_MODELS:
            p.error(f"unknown model {m!r}; expected one of {', '.join(ALL_MODELS)}")
    import tritonjit

    meta = dict(device=torch.cuda.get_device_name() if device == "cuda" else "cpu", torch=torch.__version__,
                transformers=transformers.__version__, backend=tritonjit.current_backend().name,
                dtype="fp32 parameters, autocast to " + args.amp if amp is not None else str(dtype).replace("torch.", ""),
                smoke=smoke, include=args.include, exclude=args.exclude)
    from tritonjit_ops import _native_ops

    # the C++ operator path is built in the background on first use: measure it in use
    meta["cpp_operator_path"] = _native_ops.module(wait=True) is not None
    if not smoke:  # so are these
        from tritonjit import _native
        from tritonjit_ops import _prologue

        meta.update(tensor_reader=_native.install_tensor_reader(wait=True), cpp_prologues=_prologue.start(wait=True))
    print(f"models on {meta['device']} ({meta['backend']} backend), {meta['dtype']}, torch {meta['torch']}, "
          f"transformers {meta['transformers']}, C++ operator path {meta['cpp_operator_path']}"
          + (" - smoke mode: tiny configs, agreement only" if smoke else
             f"; tensor reader {meta['tensor_reader']}, C++ prologues {meta['cpp_prologues']}"))
    rows = []
    for m in models:
        for s in shapes:
            if (why := not_applicable(m, s)) is not None:
                print(f"  {m}/{s}: skipped: {m} {why}")
                continue
            t0 = time.perf_counter()
            try:
                row = run_case(m, s, smoke, device, dtype, args.rounds, timed=not smoke or args.timed,
                               include=routing(args.include), exclude=tuple(x for x in args.exclude.split(",") if x),
                               amp=amp)
            except Exception as exc:  # one broken case must not hide the others
                traceback.print_exc()
                b, n = (SMOKE_SHAPES if smoke else SHAPES)[s]
                row = {"model": m, "shape": s, "batch": b, "tokens": n,
                       "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
            row["wall_s"] = time.perf_counter() - t0
            if device == "cuda":
                torch.cuda.empty_cache()  # the case's model and activations are gone: give their memory back
            rows.append(row)
            ratio = (f", ratio {row['tritonjit_ms'] / row['eager_ms']:.2f}x" if row.get("eager_ms") and
                     row.get("tritonjit_ms") else "")
            print(f"  {m}/{s}: {row['wall_s']:.1f} s{ratio}" + (f" ERROR {row['error']}" if "error" in row else ""),
                  flush=True)
            if args.json:  # after every case: a run cut short still leaves the rows it finished
                Path(args.json).write_text(json.dumps(dict(meta=meta, rows=rows, smoke_tolerance=tol), indent=2))
    print(table(rows))
    failed = [f"{r['model']}/{r['shape']}" for r in rows if smoke and not smoke_ok(r, tol)]
    if failed:
        print(f"smoke: disagreement or error in {', '.join(failed)} (bounds {tol})")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(meta=meta, rows=rows, smoke_tolerance=tol), indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
