"""Every causal-LM, seq2seq or vision-language architecture of transformers: greedy generate(), eager against enable().

The training-step sweep (``causal_lm_sweep.py``) never decodes: no KV cache is read or
extended, no one-token forward runs, none of generate's own per-step work (its masks, its
position bookkeeping, its stopping checks) is routed. This sweep runs what serving a
request runs. For each architecture of the task (``--task causal-lm``, ``seq2seq-lm`` or
``image-text-to-text``),
shrunk as ``causal_lm_sweep.py`` shrinks it (hidden 32, one layer of each kind, random
weights), in ``--dtype`` on the backend's device: greedy ``model.generate`` of
``--tokens`` new tokens after a batch of two 8-token prompts, the first left-padded by 3
(a decoder's attention mask; an encoder-decoder's encoder mask; a vision-language model's
prompts hold an image each, as ``vlm_inputs`` builds them), the model's default cache, no
early stop, eager against ``enable()``.

Each row compares the new tokens and the logits of every step up to and including the
first one whose token differs (a later step reads other tokens), and a status:

- ``ok``: the logits within fp32 rounding of eager (``logits_rel`` 1e-4); or beyond it but
  no further than twice eager's distance, plus a half type's ulp (HALF_TOL) in a half type,
  from the same decoding in fp64 (the fp64 copy of the model forced to eager's tokens, so
  its logits are those of the same prefixes). A step whose token differs is a near tie:
  both tokens are their own logits' argmax, and the logits agree.
- ``MISMATCH``: beyond that; ``ERROR``: a failure under enable() only.
- ``unstable``: eager's generate does not repeat itself; ``skip``: eager does not run it
  (the shrunk config, or a model that does not generate); ``slow``: past ``--timeout``.

``--time CALLS`` times each agreeing architecture's ``generate()``, eager against
enable() (median of five interleaved rounds of CALLS calls): a prefill and ``--tokens`` - 1
one-token forwards with generate's host syncs, the host-bound decode loop of serving.

Exit status 1 if any row is a MISMATCH or an ERROR.

    python benchmarks/generate_sweep.py [--task seq2seq-lm] [--models llama,gpt2] [--tokens 8]
        [--device cuda] [--dtype bf16] [--time CALLS] [--timeout 300] [--list]
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import causal_lm_sweep as S  # noqa: E402  (its shrinking, timeout and summary)
import models as M  # noqa: E402  (GenerateResult and its agreement rule)
import tritonjit_ops as T  # noqa: E402
import vlm_inputs  # noqa: E402

TASKS = ("causal-lm", "seq2seq-lm", "image-text-to-text")
#: left padding of the first prompt (a decoder reads it through its attention mask)
PAD = 3


def _prompts(model: torch.nn.Module, device: str, task: str = "causal-lm",
             dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Two prompts of 8 tokens, the first left-padded by PAD, and their attention mask; a
    VLM's: an image each, its image tokens amid the text (vlm_inputs)."""
    if task == "image-text-to-text":
        kw = vlm_inputs.inputs(model, device, dtype, pad=PAD)
        del kw["labels"]
        return kw
    g = torch.Generator().manual_seed(1)
    vocab = getattr(model.config, "vocab_size", None) or 96
    ids = torch.randint(3, min(vocab, 96), (2, 8), generator=g)
    mask = torch.ones_like(ids)
    ids[0, :PAD], mask[0, :PAD] = _pad_id(model), 0
    return dict(input_ids=ids.to(device), attention_mask=mask.to(device))


def _pad_id(model: torch.nn.Module) -> int:
    pad = getattr(model.config.get_text_config(), "pad_token_id", None)
    return pad if isinstance(pad, int) else 0


def _config(model: torch.nn.Module, new: int) -> Any:
    """The model's generation config, greedy, ``new`` tokens with no early stop, with the
    logits of every step."""
    cfg = copy.deepcopy(model.generation_config)
    cfg.update(max_new_tokens=new, min_new_tokens=None, do_sample=False, num_beams=1, use_cache=True,
               eos_token_id=None, pad_token_id=_pad_id(model), output_logits=True, return_dict_in_generate=True)
    if getattr(model.config, "is_encoder_decoder", False) and cfg.decoder_start_token_id is None:
        cfg.decoder_start_token_id = getattr(model.config, "decoder_start_token_id", None) or 0
    return cfg


def generate(model: torch.nn.Module, prompts: dict[str, Any], new: int,
             forced: torch.Tensor | None = None) -> M.GenerateResult:
    """Greedy ``new`` tokens; with ``forced`` ([batch, new]) each step takes the forced token
    instead (the fp64 reference's decoding of eager's tokens), its logits unchanged."""
    cfg = _config(model, new)
    kw: dict[str, Any] = {}
    if forced is not None:
        start = prompts["input_ids"].shape[1] if not model.config.is_encoder_decoder else 1
        vocab = model.config.get_text_config().vocab_size

        def allowed(batch: int, ids: torch.Tensor) -> list[int]:
            step = ids.shape[-1] - start
            return [int(forced[batch, step])] if step < forced.shape[1] else list(range(vocab))

        kw["prefix_allowed_tokens_fn"] = allowed
    torch.manual_seed(2)
    model.eval()
    with torch.no_grad():
        out = model.generate(**prompts, generation_config=cfg, **kw)
    return M.GenerateResult(torch.stack(out.logits).float(), out.sequences[:, -new:])


def check(name: str, cfg_cls: str, cls: str, device: str = "cpu", task: str = "causal-lm",
          dtype: torch.dtype = torch.float32, new: int = 8) -> tuple[str, str]:
    """(status, detail) of ``generate()`` of architecture ``name``, eager against enable()."""
    from tritonjit_ops._audit import _count_launches

    t0 = time.perf_counter()
    try:
        model = S._tiny(cfg_cls, cls, device, task, dtype)
        prompts = _prompts(model, device, task, dtype)
        ref = generate(model, prompts, new)
        again = generate(model, prompts, new)
    except Exception as e:  # noqa: BLE001  (a config the generic shrinking does not fit)
        return "skip", f"eager: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    half = dtype != torch.float32
    repeat = M.agreement(ref, again)
    if repeat["tokens_same"] < 1 or repeat["logits_rel"] > (S.REPEAT_HALF_TOL if half else S.REPEAT_TOL)["logits_rel"]:
        return "unstable", f"eager against eager: logits {repeat['logits_rel']:.1e}, tokens same {repeat['tokens_same']:.0%}"
    try:
        with T.enable(wait_native=True), _count_launches() as launches:
            got = generate(model, prompts, new)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc(limit=-3)
        return "ERROR", f"under enable(): {type(e).__name__}: {str(e)[:200]}"
    a = M.agreement(ref, got)
    first = M.first_differing(ref, got)
    detail = (f"logits {a['logits_rel']:.1e}, tokens same {a['tokens_same']:.0%}, "
              f"{launches[0]} launches ({time.perf_counter() - t0:.1f} s)")
    if a["logits_rel"] <= S.TOL["logits_rel"]:
        return "ok", detail
    # the arbiter: the same decoding in fp64, forced to eager's tokens (enable()'s equal them
    # up to ``first``), judged over the steps both compare
    steps = min(first + 1, new)
    try:
        wide = S.copy_model(model).to(torch.float64)
        exact = generate(wide, prompts, new, forced=ref.tokens).logits[:steps]
    except Exception as e:  # noqa: BLE001  (an op without fp64)
        why = f"no fp64 reference ({type(e).__name__})"
        if half and a["logits_rel"] <= S.HALF_TOL["logits_rel"]:
            return "ok", f"{why}: within a half type's rounding of eager; {detail}"
        return "MISMATCH", f"{detail}; {why}"
    e_eager = M.agreement(exact, ref.logits[:steps])["logits_rel"]
    e_tj = M.agreement(exact, got.logits[:steps])["logits_rel"]
    versus = f"against fp64: logits {e_tj:.1e} (eager {e_eager:.1e})"
    if e_tj > 2 * e_eager + (S.HALF_TOL if half else S.TOL)["logits_rel"]:
        return "MISMATCH", f"{detail}; {versus}"
    return "ok", f"{versus}; against eager {detail}"


def check_within(seconds: int, *args: Any, **kw: Any) -> tuple[str, str]:
    """check(), or ``slow`` where it runs past ``seconds`` (0: no limit)."""
    return S.row_within(seconds, lambda: check(*args, **kw))


def time_generate(cfg_cls: str, cls: str, device: str, task: str, dtype: torch.dtype, new: int,
                  calls: int, rounds: int = 5) -> tuple[float, float]:
    """(eager, enable()) microseconds of one ``generate()`` of the shrunk model: the median of
    ``rounds`` interleaved rounds of ``calls`` calls."""
    model = S._tiny(cfg_cls, cls, device, task, dtype)
    prompts = _prompts(model, device, task, dtype)
    _, med = M.eager_vs_enabled(lambda: generate(model, prompts, new), M._sync(device), calls, rounds, warmup=2)
    return med["eager"], med["tritonjit"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=TASKS, default="causal-lm", help="the auto mapping swept")
    ap.add_argument("--models", default="", help="model types (transformers' names), comma-separated; default: all")
    ap.add_argument("--tokens", type=int, default=8, help="new tokens a generate() call (default 8)")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds an architecture may take, eager and enable() together (0: no limit)")
    ap.add_argument("--device", default=M.backend_device(),
                    help="device of the models and inputs (default: the active backend's device type)")
    ap.add_argument("--dtype", choices=tuple(S.DTYPES), default="fp32",
                    help="the models' dtype; a half type's logits beyond fp32 rounding are judged against fp64")
    ap.add_argument("--time", type=int, default=0, metavar="CALLS",
                    help="time each agreeing architecture's generate(), eager against enable(), in rounds of "
                         "CALLS calls (0: no timing); a summary line follows the table")
    ap.add_argument("--list", action="store_true", help="print the model types and exit")
    ap.add_argument("--resume", default="", help=argparse.SUPPRESS)  # run_rows's: the counts and times so far
    a = ap.parse_args(argv)
    if a.tokens < 1:
        ap.error(f"--tokens must be at least 1, got {a.tokens}")
    archs = S.architectures(a.task)
    if (names := S.model_names(ap, a, archs)) is None:
        return 0
    dtype = S.DTYPES[a.dtype]
    return S.run_rows(names, a.device, a.timeout, a.resume,
                      lambda n: check_within(a.timeout, n, *archs[n], a.device, a.task, dtype, a.tokens),
                      (lambda n: time_generate(*archs[n], a.device, a.task, dtype, a.tokens, a.time))
                      if a.time > 0 else None, "generate()")

if __name__ == "__main__":
    sys.exit(main())
