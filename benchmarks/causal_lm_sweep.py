"""Every architecture of a transformers task (causal LM by default): one training step, eager against enable().

For each entry of transformers' auto mapping of the task (``--task``: causal-lm,
masked-lm, seq2seq-lm, sequence-classification, token-classification,
image-classification, image-text-to-text: vision-language models, joined and fed by
``vlm_inputs.py``): its config's defaults shrunk to a tiny model (the usual size
attributes set to small values where the config has them, special token ids moved inside
the small vocabulary, 32 x 32 images in patches of 4, dropout off; every sub-config the
same way), random weights, one training step (the task's loss from labels) in fp32 or
``--dtype``, on the device of the machine's backend (CPU tensors on the interpreter: every
op routed; CUDA tensors with tritonjit-cuda: the device default routed; TF32 off). Each
step draws the same random numbers.

Each row: the logits' relative error, the gradients' relative error and cosine, the
tritonjit launches of the step under enable(), and a status:

- ``ok``: within fp32 rounding of eager; or beyond it, but no further from the same step
  in fp64 than eager's fp32 step (a model that amplifies rounding; the row says so). In a
  half type (``--dtype bf16``, fp16) fp64 alone judges (fp32 for a model with an op that
  has no fp64 or whose own fp64 step is not finite): enable()'s step at most twice as far
  from it as eager's, plus an ulp's worth (HALF_TOL: one ulp flips a tiny model's ReLU
  signs and top-k choices); with neither reference, within that ulp's worth of eager.
- ``MISMATCH``: beyond that; ``ERROR``: a failure under enable() only.
- ``unstable``: eager's step does not repeat itself, so a comparison would mean nothing.
- ``skip``: the shrunk config does not build or run in eager (a limit of this generic
  shrinking, not of tritonjit); ``slow``: not finished within ``--timeout`` seconds, eager
  and enable() together.

``--time CALLS`` also times each agreeing step, eager against enable() (median of five
interleaved rounds of CALLS steps), adds it to the row and ends with a summary line: a
shrunk model's step is hundreds of small calls, so the ratio is the host cost per op of
each path over the model's own mix of shapes and layouts, not a large model's figure.

Exit status 1 if any row is a MISMATCH or an ERROR. Slow on the interpreter (1-5 s an
architecture, some far more); a few configs still allocate GBs, so cap the process's
memory (``ulimit -v``) on a small machine.

    python benchmarks/causal_lm_sweep.py [--task masked-lm] [--models llama,gpt2] [--timeout 300]
        [--device cuda] [--dtype bf16] [--time CALLS] [--list]
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402  (its path setup and agreement rule)
import tritonjit_ops as T  # noqa: E402
import vlm_inputs  # noqa: E402
from architectures import device_lost, no_dropout, sub_configs  # noqa: E402

R = TypeVar("R")

#: config attributes set where a config has them (as ints): a model of 1 layer, hidden 32
SMALL = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
    vocab_size=96, n_embd=32, n_layer=1, n_head=4, d_model=32, num_layers=1, num_heads=4, ffn_dim=64, head_dim=8,
    n_positions=64, max_position_embeddings=64, moe_intermediate_size=32, num_experts=4, num_local_experts=4,
    num_experts_per_tok=2, kv_lora_rank=16, q_lora_rank=16, v_head_dim=8,
    n_routed_experts=4, first_k_dense_replace=0, n_shared_experts=1, rotary_dim=4, shared_expert_intermediate_size=32,
    expert_intermediate_size=32, decoder_layers=1, encoder_layers=1, attention_heads=4, encoder_attention_heads=4,
    decoder_attention_heads=4, decoder_ffn_dim=64, encoder_ffn_dim=64, n_inner=64, ffn_hidden_size=64, num_decoder_layers=1,
    image_size=32, patch_size=4, window_size=4, num_labels=2, n_group=1, topk_group=1,
    # state-space layers (Mamba-2, Bamba, Falcon-H1, Zamba, NemotronH): heads x head dim = 2 x 32
    n_groups=1, state_size=16, mamba_n_heads=4, mamba_d_head=16, mamba_d_ssm=64, mamba_d_state=16, mamba_n_groups=1,
    mamba_ngroups=1, n_mamba_heads=4, mamba_headdim=16, mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16,
    mamba_dt_rank=4, attention_hidden_size=64, attention_head_dim=16, num_kv_shared_layers=0,
    vocab_size_per_layer_input=96, hidden_size_per_layer_input=8,
    # widths some configs keep beside hidden_size (DeBERTa's pooler, MobileBERT's bottleneck, Marian's decoder vocabulary)
    pooler_hidden_size=32, embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32, decoder_vocab_size=96,
    # latent attention's query and key halves, 8 wide each: a half 4 bf16 wide leaves the rotary
    # half 8 bytes off alignment, which CUDA eager's fused attention faults on (a model's are 128 and 64)
    qk_rope_head_dim=8, qk_nope_head_dim=8,
    # sparse attention's indexer (DeepSeek-V3.2, GLM-MoE-DSA)
    index_head_dim=8, index_n_heads=4, index_topk=4)
#: SMALL's values also set where a config leaves them None for its model to derive (Nemotron's
#: key-value heads, ESM's vocabulary, DeepSeek-V2's and dots1's experts)
_FROM_NONE = ("num_key_value_heads", "vocab_size", "num_experts_per_tok", "n_routed_experts", "n_shared_experts")
TOL = dict(logits_rel=1e-4, grad_rel=1e-3, grad_cos=0.9999)
#: how far eager's step may move when repeated (atomics' order on a GPU) before it is ``unstable``
REPEAT_TOL = dict(TOL)
#: a half type's: one ulp of difference flips a discrete decision (a ReLU's sign, a top-k
#: choice) of a tiny model, and the gradients downstream of it (OPT's fc1 moved 28% on the
#: interpreter, SDPA's output an ulp off aten's); the floor of _judge for those types
HALF_TOL = dict(logits_rel=1e-2, grad_rel=1e-1, grad_cos=0.999)
#: how far a half-type eager step may move when repeated (HALF_TOL's values, its own copy as REPEAT_TOL)
REPEAT_HALF_TOL = dict(HALF_TOL)
#: the step's dtypes (``--dtype``); a half type is judged against fp64 alone (see _judge)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


#: task -> the name of its auto mapping in transformers.models.auto.modeling_auto
TASKS = {
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "token-classification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "image-text-to-text": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
}
#: tasks whose model is built on the whole config, never on a composite's text config alone
_WHOLE = ("image-classification", "image-text-to-text")


def architectures(task: str = "causal-lm") -> dict[str, tuple[str, str]]:
    """model type -> (config class, model class of ``task``), for those the installed
    transformers exports."""
    import transformers as tf
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    out = {}
    for name, cls in sorted(getattr(modeling_auto, TASKS[task]).items()):
        cls = cls if isinstance(cls, str) else cls[0]
        cfg = CONFIG_MAPPING_NAMES.get(name)
        if cfg and hasattr(tf, cfg) and hasattr(tf, cls):
            out[name] = (cfg, cls)
    return out


#: special token ids a shrunk vocabulary must still hold (the inputs use ids 3 and up)
_SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)


#: what a staged model's config derives from its stage lists, left as it is
_STAGED_KEEP = ("hidden_size", "num_hidden_layers", "num_layers", "num_attention_heads", "num_heads")


def _shrink(cfg: Any, by_kind: bool = True) -> None:
    """SMALL's values set on ``cfg`` where it has them as ints (a read-only property or a
    config that refuses one is left alone), special token ids moved inside the shrunk
    vocabulary, what the config derives from them made consistent, dropout off; the same
    for each sub-config it declares and a ``text_config`` or ``vision_config``. A hybrid
    keeps one layer of each kind (``by_kind``) or its first layer alone."""
    layers = getattr(cfg, "num_hidden_layers", None)
    # its lists of one entry per layer (kinds, a sparsity per layer), not token ids that happen
    # to be as many
    per_layer = {k: list(v) for k, v in vars(cfg).items()
                 if isinstance(layers, int) and isinstance(v, list) and len(v) == layers and not k.endswith("_id")}
    # the kinds of a list the config derives from its layer count (a read-only property)
    derived = {n: set(getattr(cfg, n)) for n in _LAYER_LISTS
               if isinstance(getattr(type(cfg), n, None), property) and isinstance(getattr(cfg, n, None), list)}
    # a staged (convolutional, windowed) model keeps its stages and widths, one block a stage
    depths = getattr(cfg, "depths", None)
    staged = isinstance(depths, (list, tuple)) and all(isinstance(d, int) for d in depths)
    for k, v in SMALL.items():
        if staged and k in _STAGED_KEEP:
            continue
        if isinstance(getattr(cfg, k, None), int) or (k in _FROM_NONE and hasattr(cfg, k) and getattr(cfg, k) is None):
            try:
                setattr(cfg, k, v)
            except (AttributeError, NotImplementedError):
                pass
    vocab = getattr(cfg, "vocab_size", None)
    if isinstance(vocab, int):
        for k, v in _SPECIAL.items():
            t = getattr(cfg, k, None)
            if isinstance(t, int) and t >= vocab:
                setattr(cfg, k, v)
            elif isinstance(t, list) and any(isinstance(i, int) and i >= vocab for i in t):
                setattr(cfg, k, [v])
        if hasattr(cfg, "pad_token_id") and cfg.pad_token_id is None:
            cfg.pad_token_id = _SPECIAL["pad_token_id"]  # a classifier's last-token pooling of a batch needs one
    if staged:
        cfg.depths = [1] * len(cfg.depths)
    if isinstance(getattr(cfg, "qk_rope_head_dim", None), int) and isinstance(getattr(cfg, "head_dim", None), int):
        cfg.head_dim = cfg.qk_rope_head_dim  # latent attention: its rotary part (DeepSeek-V2/V3's config)
        if isinstance(getattr(cfg, "qk_head_dim", None), int):
            cfg.qk_head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if isinstance(getattr(cfg, "kv_lora_rank", None), int) and isinstance(getattr(cfg, "num_key_value_heads", None), int):
            cfg.num_key_value_heads = cfg.num_attention_heads  # one key per head (DeepSeek-V3.2's indexer mask)
    heads, width = getattr(cfg, "num_attention_heads", None), getattr(cfg, "hidden_size", None)
    if all(isinstance(getattr(cfg, k, None), int) for k in ("expand", "num_heads", "head_dim", "state_size")) \
            and isinstance(width, int):
        cfg.head_dim = cfg.expand * width // cfg.num_heads  # Mamba-2's heads span its expanded width
    if hasattr(cfg, "head_dim") and cfg.head_dim is None and isinstance(heads, int) and isinstance(width, int):
        cfg.head_dim = width // heads  # a default the config leaves to its model (Ministral, Hunyuan)
    no_dropout(cfg)
    if by_kind:
        _one_layer_of_each_kind(cfg, layers, per_layer, derived)
    else:
        for name, values in per_layer.items():
            try:
                setattr(cfg, name, values[:cfg.num_hidden_layers])
            except AttributeError:  # a read-only property, derived from the layer count
                pass
    for sub in sub_configs(cfg):
        _shrink(sub, by_kind)


#: per-layer kind lists a config may hold (a hybrid model's attention and recurrent layers)
_LAYER_LISTS = ("layer_types", "layers_block_type")


def _one_layer_of_each_kind(cfg: Any, layers: int | None, per_layer: dict[str, list[Any]],
                            derived: dict[str, set[Any]]) -> None:
    """A hybrid model (Qwen3-Next, Zamba, Gemma 3n) shrunk to one layer of each kind its layer
    list names, the first of each: one layer alone would drop its attention layers, which its
    cache and masks expect. ``per_layer`` holds the config's lists of ``layers`` entries
    before shrinking (the kinds, Gemma 3n's sparsity per layer): each keeps the chosen layers'
    entries. A kind list the config derives from the layer count (a read-only property:
    Jamba's, from an attention period) gets layers until it names every kind ``derived``
    says it named."""
    kinds = next((per_layer[n] for n in _LAYER_LISTS if n in per_layer), None)
    if layers is None or not isinstance(cfg.num_hidden_layers, int):
        return
    if kinds is not None:
        chosen = [kinds.index(k) for k in dict.fromkeys(kinds)]
        for name, values in per_layer.items():
            setattr(cfg, name, [values[i] for i in chosen])
        # the layer indices a config derived from its kinds (Zamba2's)
        if isinstance(getattr(cfg, "hybrid_layer_ids", None), list):
            cfg.hybrid_layer_ids = [chosen.index(i) for i in cfg.hybrid_layer_ids if i in chosen]
        cfg.num_hidden_layers = len(chosen)
        return
    for name, want in derived.items():
        while set(getattr(cfg, name)) != want and cfg.num_hidden_layers < layers:
            cfg.num_hidden_layers += 1


def _configs(cfg_cls: str, task: str) -> Iterator[Any]:
    """The shrunk configs to build ``task``'s model from, the likeliest first: a hybrid model
    with one layer of each kind, then (where its model refuses that, as Zamba's weight tying
    does) its first layer alone; a composite config (text and vision or audio) as its text
    model, which a causal LM is built on, then whole, which a task head such as Gemma 3's
    classifier reads. A one-layer config that fails is tried again with two layers (RWKV's
    initialization divides by the layer count - 1): a config after the first is asked for
    only when the one before it did not build."""
    import transformers as tf

    for by_kind in (True, False):
        cfg = getattr(tf, cfg_cls)()
        _shrink(cfg, by_kind)
        if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "decoder_start_token_id", None) is None:
            cfg.decoder_start_token_id = getattr(cfg, "pad_token_id", None) or 0  # T5's: the pad token
        if task == "image-text-to-text":
            vlm_inputs.shrink_multimodal(cfg)
        text = getattr(cfg, "text_config", None)
        composite = task not in _WHOLE and not hasattr(cfg, "vocab_size") and hasattr(text, "vocab_size")
        for c in (text, cfg) if composite else (cfg,):
            yield c
            if getattr(c, "num_hidden_layers", None) == 1:
                c.num_hidden_layers = 2
                yield c


def _tiny(cfg_cls: str, cls: str, device: str, task: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    import transformers as tf

    err: Exception | None = None
    for c in _configs(cfg_cls, task):
        torch.manual_seed(0)
        try:
            model = getattr(tf, cls)(c)
            break
        except Exception as e:  # noqa: BLE001  (the next config may fit)
            err = err or e  # the first failure says most
    else:
        assert err is not None
        raise err
    _no_zero_matrices(model)
    model = model.to(device=device, dtype=dtype)
    languages = getattr(model.config, "languages", None)
    if hasattr(model, "set_default_language") and languages:
        model.set_default_language(languages[0])  # X-MOD's adapters: one language
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model


def _no_zero_matrices(model: torch.nn.Module) -> None:
    """Small random values (seeded) in each weight matrix the model's init left all zero: a
    router initialized to zero (AFMoE's) scores every expert alike, and top-k then picks by
    its tie order, which torch leaves to each implementation (aten's CPU and CUDA kernels
    pick different experts): eager and enable() would compare tie orders, not kernels. A
    trained model has no such ties."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and p.numel() and not p.any():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.02)


class _OutOfTime(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` in a model's code
    (or below) swallows it."""


def check_within(seconds: int, name: str, cfg_cls: str, cls: str, device: str,
                 task: str = "causal-lm", dtype: torch.dtype = torch.float32) -> tuple[str, str]:
    """check(), or ``slow`` where it runs past ``seconds`` (0: no limit)."""
    return row_within(seconds, lambda: check(name, cfg_cls, cls, device, task, dtype))


def row_within(seconds: int, row: Callable[[], tuple[str, str]]) -> tuple[str, str]:
    """``row()``, or a ``slow`` row where it runs past ``seconds`` (0: no limit)."""
    done = _in_time(seconds, row)
    return done if done is not None else ("slow", f"did not finish within {seconds} s")


def _in_time(seconds: int, fn: Callable[[], R]) -> R | None:
    """``fn()``, or None where it runs past ``seconds`` (0: no limit). The alarm fires
    between Python bytecodes, so a single long native call finishes first; where it fires
    inside a backward, autograd's engine re-raises it as a RuntimeError (an ``ERROR`` row
    that is in fact ``slow``), hence the flag."""
    if seconds <= 0:
        return fn()
    fired = []

    def alarm(signum: int, frame: object) -> None:
        fired.append(True)
        raise _OutOfTime

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        out = fn()
    except _OutOfTime:
        fired.append(True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return None if fired else out


def time_step(cfg_cls: str, cls: str, device: str, task: str, dtype: torch.dtype,
              calls: int, rounds: int = 5) -> tuple[float, float]:
    """(eager, enable()) microseconds of one training step of the shrunk model: the median of
    ``rounds`` interleaved rounds of ``calls`` steps each. A shrunk model's step is a few
    hundred small calls, so this is the host cost of each path per op, which is what a
    model's small and odd-shaped calls (broadcast, strided, scalar) cost under enable()."""
    model = _tiny(cfg_cls, cls, device, task, dtype)
    inputs = _inputs(task, model, device, dtype)
    _, med = M.eager_vs_enabled(lambda: _train_step(model, inputs), M._sync(device), calls, rounds, warmup=2)
    return med["eager"], med["tritonjit"]


def _time_summary(times: dict[str, tuple[float, float]], what: str = "step time") -> str:
    """One line: the geometric mean, median and worst of enable()'s ``what`` (a step's time by
    default) over eager's, and the architectures above 1.0x, slowest first."""
    ratios = {n: tj / eager for n, (eager, tj) in times.items()}
    geo = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    worst = sorted(ratios.items(), key=lambda kv: -kv[1])
    over = [f"{n} {r:.2f}x" for n, r in worst if r > 1.0]
    return (f"{what}, enable() over eager, {len(ratios)} architectures: geomean {geo:.2f}x, "
            f"median {statistics.median(ratios.values()):.2f}x, worst {worst[0][1]:.2f}x ({worst[0][0]}); "
            f"above 1.0x: {len(over)}{': ' + ', '.join(over) if over else ''}")


def _inputs(task: str, model: torch.nn.Module, device: str, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The step's keyword arguments: a batch of 2 (8 tokens, or 32 x 32 images) and the
    task's labels, the same every call (a fixed seed)."""
    if task == "image-text-to-text":
        return vlm_inputs.inputs(model, device, dtype)
    g = torch.Generator().manual_seed(1)
    cfg = model.config
    if task == "image-classification":
        channels = getattr(cfg, "num_channels", 3)
        size = getattr(cfg, "image_size", 32)
        size = size if isinstance(size, int) else 32
        kw: dict[str, Any] = dict(pixel_values=torch.randn(2, channels, size, size, generator=g).to(dtype),
                                  labels=torch.tensor([0, 1]))
    else:
        vocab = getattr(cfg, "vocab_size", None) or 96
        ids = torch.randint(3, min(vocab, 96), (2, 8), generator=g)
        kw = dict(input_ids=ids)
        if task == "sequence-classification":
            kw["labels"] = torch.tensor([0, 1])
            eos = getattr(cfg, "eos_token_id", None)
            if isinstance(eos, int) and eos < vocab:
                ids[:, -1] = eos  # an encoder-decoder classifier pools each example's last <eos>
        elif task == "token-classification":
            kw["labels"] = torch.randint(0, 2, (2, 8), generator=g)
        else:
            kw["labels"] = ids
        if task in ("causal-lm", "seq2seq-lm"):
            kw["use_cache"] = False
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


def check(name: str, cfg_cls: str, cls: str, device: str = "cpu", task: str = "causal-lm",
          dtype: torch.dtype = torch.float32) -> tuple[str, str]:
    """(status, detail) of architecture ``name`` for ``task``, its model and inputs on ``device``
    in ``dtype``."""
    from tritonjit_ops._audit import _count_launches

    t0 = time.perf_counter()
    try:
        model = _tiny(cfg_cls, cls, device, task, dtype)
        inputs = _inputs(task, model, device, dtype)

        def step() -> tuple[torch.Tensor, torch.Tensor]:
            return _train_step(model, inputs)

        ref = step()
        ref_grads = M._grads(model)
        again = M.agreement(ref, step(), ref_grads, M._grads(model))
    except Exception as e:  # noqa: BLE001  (the generic shrinking does not fit every config)
        return "skip", f"eager: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    # a step that changes the model (running state updated in forward)
    if not _within(again, REPEAT_TOL if dtype == torch.float32 else REPEAT_HALF_TOL):
        return "unstable", f"eager against eager: {_describe(again)}"
    try:
        # the C++ operator path, as a model runs once it is built
        with T.enable(wait_native=True), _count_launches() as launches:
            got = step()
        got_grads = M._grads(model)
        a = M.agreement(ref, got, ref_grads, got_grads)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc(limit=-3)
        return "ERROR", f"under enable(): {type(e).__name__}: {str(e)[:200]}"
    detail = f"{_describe(a)}, {launches[0]} launches ({time.perf_counter() - t0:.1f} s)"
    if dtype == torch.float32 and _within(a):
        return "ok", detail
    # the arbiter: the same step in fp64. In fp32, where eager's step is as far from it as
    # enable()'s, the model amplifies rounding (a shrunk vision model's vanishing
    # activations, normalized again): no fp32 implementation can agree closer. In a half
    # type two correct implementations differ by far more than fp32 rounding: fp64 alone judges
    exact, wide, tried = _reference(model, inputs, dtype)
    if exact is None:
        why = f"no wider reference ({'; '.join(tried)})"
        if dtype != torch.float32 and _within(a, HALF_TOL):
            return "ok", f"{why}: within a half type's rounding of eager; {detail}"
        return "MISMATCH", f"{detail}; {why}"
    e_eager = M.agreement(exact[0], ref, exact[1], ref_grads)
    e_tj = M.agreement(exact[0], got, exact[1], got_grads)
    versus = f"against {_NAMES[wide]}: {_describe(e_tj)} (eager {_describe(e_eager)})"
    if not _judge(e_tj, e_eager, TOL if dtype == torch.float32 else HALF_TOL):
        return "MISMATCH", f"{detail}; {versus}"
    if dtype == torch.float32:
        return "ok", f"ill-conditioned in fp32, as far from fp64 as eager: {versus}; against eager {detail}"
    return "ok", f"{versus}; against eager {detail}"


_NAMES = {torch.float64: "fp64", torch.float32: "fp32"}

Step = tuple[tuple[torch.Tensor, torch.Tensor], list[torch.Tensor]]


def _reference(model: torch.nn.Module, inputs: dict[str, Any],
               dtype: torch.dtype) -> tuple[Step | None, torch.dtype | None, list[str]]:
    """(the step in the widest dtype that runs it and gives finite results, that dtype, why
    each wider one did not): fp64, and for a half type fp32 after it. Some models give no
    reference: an op without fp64 (MoE's grouped products), a model whose own fp64 step is
    not finite (Longformer's and LED's masks, Canine's loss)."""
    tried = []
    for wide in (torch.float64,) if dtype == torch.float32 else (torch.float64, torch.float32):
        try:
            exact = _wide_step(model, inputs, wide)
        except Exception as e:  # noqa: BLE001
            tried.append(f"{_NAMES[wide]}: {type(e).__name__}")
            continue
        (logits, loss), grads = exact
        if not all(bool(torch.isfinite(t).all()) for t in (logits, loss, *grads)):
            tried.append(f"{_NAMES[wide]}: not finite in eager")
            continue
        return exact, wide, tried
    return None, None, tried


def _judge(e_tj: dict[str, float], e_eager: dict[str, float], floor: dict[str, float] | None = None) -> bool:
    """enable()'s step no more than twice as far from fp64 as eager's, plus ``floor`` (fp32's
    tolerance by default: a well-conditioned model's eager step may be exact to its
    rounding; HALF_TOL for a half type), by each measure."""
    f = TOL if floor is None else floor
    return (all(e_tj[k] <= 2 * e_eager[k] + f[k] for k in ("logits_rel", "grad_rel"))
            and 1 - e_tj["grad_cos"] <= 2 * (1 - e_eager["grad_cos"]) + (1 - f["grad_cos"]))


def _wide_step(model: torch.nn.Module, inputs: dict[str, Any], wide: torch.dtype) -> Step:
    """((logits, loss), gradients) of the step on a copy of ``model`` in ``wide`` (fp64; fp32
    for a half-type step whose model has an op without fp64), eager, the outputs in fp32 for
    the comparison."""
    m64 = copy_model(model).to(wide)
    x64 = {k: v.to(wide) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in inputs.items()}
    logits, loss = _train_step(m64, x64)
    return (logits.float(), loss.float()), M._grads(m64)


def copy_model(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` with its weights (the reference's model): a deep copy, or where a
    module holds a tensor its forward computed (RecurrentGemma's state, which deepcopy
    refuses), a new model from its config on the same device with its state loaded."""
    try:
        return copy.deepcopy(model)
    except RuntimeError:
        m = type(model)(model.config).to(next(model.parameters()).device)
        m.load_state_dict(model.state_dict())
        return m


def _train_step(model: torch.nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step's (logits, loss), its gradients left in ``model``; each step draws
    the same random numbers (stochastic depth, router jitter), so that steps compare."""
    torch.manual_seed(2)
    model.train()
    model.zero_grad(set_to_none=True)
    out = model(**inputs)
    out.loss.backward()
    return out.logits.detach(), out.loss.detach()


def _within(a: dict[str, float], tol: dict[str, float] | None = None) -> bool:
    t = TOL if tol is None else tol
    return a["logits_rel"] <= t["logits_rel"] and a["grad_rel"] <= t["grad_rel"] and a["grad_cos"] >= t["grad_cos"]


def _describe(a: dict[str, float]) -> str:
    return f"logits {a['logits_rel']:.1e}, grads {a['grad_rel']:.1e}, cos {a['grad_cos']:.7f}"


@contextmanager
def _fp32_exact(device: str) -> Iterator[None]:
    """TF32 off for CUDA's matrix products and cuDNN's convolutions while the sweep runs: an
    fp32 reference whose convolutions round their inputs to 10 mantissa bits (cuDNN's
    default) is no fp32 reference. cuDNN's through its ``flags`` context (a process may have
    frozen the global flags: torch's test utilities do)."""
    if not device.startswith("cuda"):
        yield
        return
    cudnn = torch.backends.cudnn
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, benchmark_limit=cudnn.benchmark_limit,
                         deterministic=cudnn.deterministic, allow_tf32=False):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=tuple(TASKS), default="causal-lm", help="the auto mapping swept")
    ap.add_argument("--models", default="", help="model types (transformers' names), comma-separated; default: all")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds an architecture may take, eager and enable() together (0: no limit)")
    ap.add_argument("--device", default=M.backend_device(),
                    help="device of the models and inputs (default: the active backend's device type)")
    ap.add_argument("--dtype", choices=tuple(DTYPES), default="fp32",
                    help="the models' dtype; a half type is judged against the step in fp64 (slower)")
    ap.add_argument("--time", type=int, default=0, metavar="CALLS",
                    help="time each agreeing architecture's step, eager against enable(), in rounds of "
                         "CALLS steps (0: no timing); a summary line follows the table")
    ap.add_argument("--list", action="store_true", help="print the model types and exit")
    ap.add_argument("--resume", default="", help=argparse.SUPPRESS)  # _go_on's: the counts and times so far
    a = ap.parse_args(argv)
    archs = architectures(a.task)
    if (names := model_names(ap, a, archs)) is None:
        return 0
    dtype = DTYPES[a.dtype]
    return run_rows(names, a.device, a.timeout, a.resume,
                    lambda n: check_within(a.timeout, n, *archs[n], a.device, a.task, dtype),
                    (lambda n: time_step(*archs[n], a.device, a.task, dtype, a.time)) if a.time > 0 else None)


def model_names(ap: argparse.ArgumentParser, a: argparse.Namespace, archs: dict[str, Any]) -> list[str] | None:
    """The architectures ``--models`` names (all of ``archs`` by default; an unknown one is
    ``ap``'s usage error), or None where ``--list`` printed them instead; the warnings that
    repeat on every row silenced."""
    if a.list:
        print("\n".join(archs))
        return None
    names = [n for n in a.models.split(",") if n] or list(archs)
    if unknown := [n for n in names if n not in archs]:
        ap.error(f"unknown model types {unknown}; --list shows them")
    warnings.filterwarnings("ignore")
    M.quiet()
    return names


def run_rows(names: list[str], device: str, timeout: int, resume: str, row: Callable[[str], tuple[str, str]],
             timed: Callable[[str], tuple[float, float]] | None = None, what: str = "step") -> int:
    """The sweep's table: ``row(name)`` -> (status, detail) for each architecture, and for an
    ``ok`` row ``timed(name)`` -> (eager, enable()) microseconds; the counts, the timing
    summary, and the exit status (1 on a MISMATCH or an ERROR). A row that leaves the
    device's context lost (a CUDA fault is sticky: every later call fails, eager's too)
    ends this process: the rest of the table is run by a new one (``_go_on``), which
    ``resume`` hands the counts and times so far."""
    state = json.loads(resume) if resume else {"counts": {}, "times": {}}
    counts: dict[str, int] = state["counts"]
    times: dict[str, tuple[float, float]] = {k: tuple(v) for k, v in state["times"].items()}
    if not resume:
        print("| model type | status | detail |\n| --- | --- | --- |")
    for i, n in enumerate(names):
        with _fp32_exact(device):
            status, detail = row(n)
            if status == "ok" and timed is not None:
                t = _in_time(timeout, lambda: timed(n))
                if t is None:
                    detail += f"; {what} not timed within {timeout} s"
                else:
                    times[n] = t
                    detail += f"; {what}: eager {t[0]:.0f} us, enable() {t[1]:.0f} us, {t[1] / t[0]:.2f}x"
        lost = status != "ok" and device_lost(device)
        if lost:
            detail += "; the device's context is lost (a fault), the rows after it run in a new process"
        counts[status] = counts.get(status, 0) + 1
        print(f"| {n} | {status} | {detail} |", flush=True)
        if lost and i + 1 < len(names):
            _go_on(names[i + 1:], counts, times)
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    if times:
        print(_time_summary(times, f"{what} time"))
    return 1 if counts.get("MISMATCH") or counts.get("ERROR") else 0


def _go_on(rest: list[str], counts: dict[str, int], times: dict[str, tuple[float, float]]) -> None:
    """Replace this process by the same command line for the architectures ``rest``, with
    the counts and times so far (``--resume``): never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    state = json.dumps({"counts": counts, "times": times})
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:], "--models", ",".join(rest), "--resume", state])

if __name__ == "__main__":
    sys.exit(main())
