"""benchmarks/models.py --smoke: tiny transformers models (a Llama, a Qwen2, a GPT-2 and
a BERT), decode-like, prefill, a training step and (the decoders) greedy generation with
the KV cache, eager against enable() through the interpreter: logits, gradients and
generated tokens agree, and tritonjit kernels run the covered calls."""
import json
import re

import pytest
from _util import bench_module

pytest.importorskip("transformers")

M = bench_module("models")


@pytest.mark.parametrize("model", M.MODELS)
def test_models_smoke(model, tmp_path):
    out = tmp_path / "models.json"
    rc = M.main(["--smoke", "--models", model, "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["shape"] for r in rows] == [s for s in M.SHAPES if s != "generate" or M.kind(model) in M.GENERATIVE]
    for r in rows:
        assert "error" not in r, r
        assert r["logits_rel"] <= M.SMOKE_TOL["logits_rel"], r
        if r["shape"] == "generate":
            assert r["tokens_same"] == 1.0 and r["new_tokens"] == M.NEW_TOKENS["smoke"], r
        if r["shape"] == "train":
            assert r["grad_rel"] <= M.SMOKE_TOL["grad_rel"] and r["grad_cos"] >= M.SMOKE_TOL["grad_cos"], r
        assert 0 < r["covered_calls"] <= r["kernel_calls"], r
        assert r["covered_routed_calls"] == r["covered_calls"], r  # every covered call launched a tritonjit kernel
        assert r["policy_calls"] == 0 and r["policy"] == {}, r  # the measured policies measure on a device only
    assert rc == 0


def test_models_smoke_under_autocast(tmp_path):
    """--amp: fp32 parameters, every call under autocast to bf16 (the mixed-precision step
    most models train with): the products come out in bf16 on both paths, which agree within
    bf16's rounding, and tritonjit kernels run the covered calls (the mixed-dtype adds of an
    fp32 residual stream and a bf16 linear output, autocast's casts, the fp32 norms)."""
    out = tmp_path / "amp.json"
    rc = M.main(["--smoke", "--amp", "bf16", "--models", "llama", "--shapes", "train,decode", "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["meta"]["dtype"] == "fp32 parameters, autocast to bf16"
    assert data["smoke_tolerance"] == M.SMOKE_TOL_AMP
    for r in data["rows"]:
        assert "error" not in r, r
        assert r["logits_dtype"] == "bfloat16", r  # autocast ran the lm head in bf16
        assert r["logits_rel"] <= M.SMOKE_TOL_AMP["logits_rel"], r
        if r["shape"] == "train":
            assert r["grad_rel"] <= M.SMOKE_TOL_AMP["grad_rel"] and r["grad_cos"] >= M.SMOKE_TOL_AMP["grad_cos"], r
        assert r["covered_routed_calls"] == r["covered_calls"] > 0, r
    assert rc == 0


def test_amp_and_dtype_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        M.main(["--smoke", "--amp", "bf16", "--dtype", "fp16"])
    assert "--amp and --dtype exclude each other" in capsys.readouterr().err


def test_table_counts_and_marks_the_calls_aten_measured_faster_on():
    row = dict(model="llama", shape="train", batch=4, tokens=256, calls=600, kernel_calls=497, covered_calls=479,
               routed_calls=436, covered_routed_calls=419, policy_calls=41, logits_max_abs=0.0, logits_rel=0.0,
               not_routed={"aten::mm": 21, "aten::bmm": 24, "aten::flip": 17, "aten::add.Tensor": 1},
               policy={"aten::mm": 21, "aten::bmm": 20})
    text = M.table([row])
    assert "| 419/479, 436/497 (88%) | 460/479 (96%) |" in text
    assert ("llama/train: calls without a tritonjit kernel: aten::mm 21 (aten measured faster), "
            "aten::bmm 24 (20 aten measured faster), aten::flip 17, aten::add.Tensor 1") in text


def test_model_groups_expand_in_order_each_once():
    assert M.expand_models("llama,more") == ["llama", *M.MORE_MODELS]
    assert M.expand_models("zoo,falcon,bert") == [*M.ZOO, "bert"]
    assert M.expand_models("all") == list(M.ALL_MODELS)
    assert len(set(M.ALL_MODELS)) == len(M.ALL_MODELS)


@pytest.mark.parametrize("name", list(M.ZOO))
def test_zoo_models_build_at_both_sizes(name):
    """Every zoo architecture's config is valid for the installed transformers at the smoke
    size and at the GPU size (built on the meta device: no memory, no compute), and its
    inputs are what the model takes."""
    import torch

    model = M.build_model(name, True, "cpu", torch.float32)
    inputs = M.make_inputs(name, model, 2, 8, "cpu")
    assert set(inputs) == ({"pixel_values", "labels"} if M.kind(name) == "image" else {"input_ids", "labels"})
    with torch.device("meta"):
        big = M.build_model(name, False, "meta", torch.bfloat16)
    assert sum(p.numel() for p in big.parameters()) > 10 * sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", ["vit", "modernbert"])
def test_zoo_smoke_image_and_masked_lm(name, tmp_path):
    """The zoo's image and masked-LM inputs through the whole smoke run (the training step
    of every zoo architecture is compared call for call in test_models_wider.py)."""
    out = tmp_path / "models.json"
    rc = M.main(["--smoke", "--models", name, "--shapes", "decode,train", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert rc == 0 and [r["shape"] for r in rows] == ["decode", "train"]
    assert all("error" not in r and r["covered_routed_calls"] == r["covered_calls"] > 0 for r in rows), rows


def test_generate_agreement_compares_the_steps_up_to_the_first_other_token():
    """A step after the first differing token reads other tokens: its logits are not
    compared; the step that chose the other token is (its inputs were the same)."""
    import torch

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 2, 11, generator=g)
    tokens = logits.argmax(-1).T.contiguous()  # [batch, steps]
    got_logits, got_tokens = logits.clone(), tokens.clone()
    got_tokens[1, 3] += 1  # row 1 picks another token at step 3
    got_logits[4] += 100.0  # so step 4 reads another history: far off, and not compared
    got_logits[3, 0, 0] += 0.5  # step 3 itself is compared
    ref, got = M.GenerateResult(logits, tokens), M.GenerateResult(got_logits, got_tokens)
    a = M.agreement(ref, got)
    assert a["tokens_same"] == 3 / 5
    assert a["logits_max_abs"] == pytest.approx(0.5)
    same = M.agreement(ref, M.GenerateResult(logits.clone(), tokens.clone()))
    assert same["tokens_same"] == 1.0 and same["logits_max_abs"] == 0.0
    assert M.smoke_ok({"shape": "generate", "logits_rel": 0.0, "tokens_same": 0.6}) is False


def test_generate_refuses_a_model_that_does_not_generate():
    import torch

    model = M.build_model("bert", True, "cpu", torch.float32)
    with pytest.raises(ValueError, match="bert does not generate"):
        M.step_fn("bert", model, "generate", M.make_inputs("bert", model, 1, 4, "cpu"))


def test_agreement_counts_the_rows_off():
    """A flipped routing decision moves a few positions' logits; the share of rows off by more
    than 5% of the largest logit tells it from an operator that is wrong everywhere."""
    import torch

    ref = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(0))
    one = ref.clone()
    one[0, 1, 3] += 10
    a = M.agreement(ref, one)
    assert a["logits_rows_off"] == pytest.approx(0.1) and a["logits_rel"] > 1
    assert M.agreement(ref, ref * 1.5)["logits_rows_off"] > 0.5
    assert M.agreement(ref, ref + 1e-4)["logits_rows_off"] == 0


def test_agreement_of_gradients_reads_identical_zero_ones_as_agreeing():
    """A one-token causal LM has no target: its gradients are all zero on both paths; that
    agrees (cosine 1), where zero against nonzero gradients does not."""
    import torch

    zero, some = [torch.zeros(3, 2), torch.zeros(4)], [torch.zeros(3, 2), torch.ones(4)]
    logits = torch.randn(2, 3)
    assert M.agreement(logits, logits, zero, [z.clone() for z in zero])["grad_cos"] == 1.0
    assert M.agreement(logits, logits, zero, some)["grad_cos"] == 0.0
    assert M.agreement(logits, logits, some, [s * 2 for s in some])["grad_cos"] == pytest.approx(1.0)
    assert M.agreement(logits, logits, some, [-s for s in some])["grad_cos"] == pytest.approx(-1.0)


def test_architectures_script_runs_a_model_and_a_generate_mode(capsys):
    """benchmarks/architectures.py on the interpreter: a BLOOM's forward and training step and a
    beam search, every covered call on a tritonjit kernel (beam search and some transformers
    versions' padding masks index with several index tensors), exit status 0."""
    A = bench_module("architectures")
    assert A.main(["--models", "bloom", "--generate", "beam"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| bloom") or r.startswith("| generate")]
    assert len(rows) == 3 and all("error" not in r for r in rows), rows
    assert "tokens same 100%" in rows[2]
    for r in rows:
        routed, covered = (int(n) for n in r.split(" | ")[5].split("/"))
        assert routed == covered, r


def test_architectures_script_takes_sizes_and_dtype(capsys):
    """--hidden/--layers/--tokens/--batch/--vocab and fp16 reach the models it builds: a wider
    Llama (heads follow the width) and a ResNet at the image side asked for run and agree."""
    A = bench_module("architectures")
    assert A.main(["--models", "llama,resnet", "--generate", "", "--hidden", "128", "--layers", "2", "--tokens", "6",
                   "--batch", "1", "--image", "16", "--vocab", "300", "--dtype", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "sizes: hidden 128, layers 2, heads 4, batch 1, tokens 6, image 16, vocab 300, fp16" in out
    assert A.cases(A.Sizes(False, vocab=300))["llama"][4]["vocab_size"] == 300
    z = A.Sizes(False, hidden=512, layers=3)
    cfg = A.cases(z)["llama"][4]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (512, 3, 8)
    rows = [r for r in out.splitlines() if r.startswith("| llama") or r.startswith("| resnet")]
    assert len(rows) == 4 and all("error" not in r for r in rows), rows


def test_architectures_script_groups_the_more_cases(capsys, monkeypatch):
    """--models more runs the twenty extra architectures (not in the default list), 'all' every
    case; names that are neither a case nor a group are refused before anything runs."""
    A = bench_module("architectures")
    more = list(A.more_cases(A.Sizes(False)))
    assert len(more) == 20 and "wav2vec2" in more and set(more) <= set(A.cases(A.Sizes(False)))
    ran: list[str] = []
    monkeypatch.setattr(A, "run_model", lambda name, *a: ran.append(name) or [f"| {name} | ok |"])
    assert A.main(["--models", "more", "--generate", ""]) == 0
    assert ran == more
    ran.clear()
    assert A.main(["--generate", ""]) == 0
    assert "bloom" in ran and not set(more) & set(ran)
    ran.clear()
    assert A.main(["--models", "all", "--generate", ""]) == 0
    assert ran == list(A.cases(A.Sizes(False)))
    with pytest.raises(SystemExit):
        A.main(["--models", "more,nosuch", "--generate", ""])
    err = capsys.readouterr().err
    assert "nosuch" in err and "wav2vec2" not in err


def test_architectures_script_runs_the_steps_asked_and_refuses_graphs_without_cuda(capsys):
    """--steps train runs only the training step; an unknown step, and --graph on a backend
    that does not run on CUDA (this interpreter), are refused with what was expected."""
    A = bench_module("architectures")
    assert A.main(["--models", "llama", "--generate", "", "--steps", "train"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| llama")]
    assert [r.split(" | ")[1] for r in rows] == ["train"], rows
    with pytest.raises(SystemExit):
        A.main(["--models", "llama", "--steps", "forward,backward"])
    assert "unknown steps ['backward']; of forward,train" in capsys.readouterr().err
    if A.M.backend_device() != "cuda":
        with pytest.raises(SystemExit):
            A.main(["--models", "llama", "--graph"])
        assert "--graph captures CUDA graphs; this machine's backend runs on 'cpu'" in capsys.readouterr().err


def test_architectures_decode_step_reads_a_static_cache_and_repeats(capsys):
    """--steps decode: one token a row against a static KV cache agrees under enable()
    (Gemma 2's prompt cut inside its sliding window, so the step repeats); the step runs
    the same twice and reads one more position after the move; a model that keeps a cache
    of its own (Mamba) and an encoder are skips that say so."""
    import torch

    A = bench_module("architectures")
    assert A.main(["--models", "llama,gemma2,mamba,roberta", "--generate", "", "--steps", "decode"]) == 0
    rows = {r.split(" | ")[0][2:]: r for r in capsys.readouterr().out.splitlines() if "| decode |" in r}
    for name in ("llama", "gemma2"):
        err = float(rows[name].split(" | ")[4].split()[0])
        assert err < 1e-5, rows[name]
    assert "skip: no static-cache decoding: ValueError: the prompt left the static cache empty" in rows["mamba"]
    assert "skip: no static-cache decoding: TypeError: not a decoder-only language model" in rows["roberta"]
    z = A.Sizes(False)
    cls, cfg_cls, attn, kind, kw = A.cases(z)["gemma2"]
    model = A._build(cls, cfg_cls, attn, "cpu", torch.float32, **kw)
    ids = A._inputs(kind, model, z, "cpu", torch.float32)[0]["input_ids"]
    decode, advance = A._decode_step(model, ids, z.vocab)
    first = decode()
    assert torch.equal(first, decode())
    advance()
    assert not torch.equal(first, decode())


def test_graph_replay_error_reads_logits_loss_and_gradients():
    """The --graph check of a replay against the uncaptured call: 0 bit for bit; a moved
    logit, loss or gradient each shows."""
    import torch

    A = bench_module("architectures")
    logits, loss, grads = torch.randn(2, 3, 5), torch.tensor(2.0), [torch.randn(4), torch.randn(3, 2)]
    step = (logits, loss, grads)
    assert A._replay_error(step, (logits.clone(), loss.clone(), [g.clone() for g in grads])) == 0.0
    assert A._replay_error(logits, logits + 0.5 * logits.abs().max()) == pytest.approx(0.5)
    assert A._replay_error(step, (logits, loss * 1.25, grads)) == pytest.approx(0.25)
    assert A._replay_error(step, (logits, loss, [grads[0], -grads[1]])) > 0.1


def test_causal_lm_sweep_checks_architectures_and_fails_on_a_mismatch(capsys, monkeypatch):
    """benchmarks/causal_lm_sweep.py: two architectures agree under enable() (exit 0); with a
    tolerance no fp32 run can meet, the same rows are MISMATCHes and the exit status is 1."""
    S = bench_module("causal_lm_sweep")
    assert "llama" in S.architectures() and "gpt2" in S.architectures()
    assert S.main(["--models", "llama,gpt2"]) == 0
    out = capsys.readouterr().out
    assert "| llama | ok |" in out and "| gpt2 | ok |" in out and "ok: 2" in out
    # each row counts the tritonjit launches of its step (the interpreter routes every op)
    launches = re.findall(r"\| (llama|gpt2) \| ok \| .*, (\d+) launches \(", out)
    assert len(launches) == 2 and all(int(n) > 0 for _, n in launches), out
    monkeypatch.setitem(S.TOL, "logits_rel", -1.0)
    assert S.main(["--models", "gpt2"]) == 1
    assert "| gpt2 | MISMATCH |" in capsys.readouterr().out


@pytest.mark.parametrize("task,model", [("masked-lm", "bert"), ("seq2seq-lm", "bart"),
                                        ("sequence-classification", "gpt2"), ("token-classification", "bert"),
                                        ("image-classification", "vit")])
def test_causal_lm_sweep_checks_the_other_tasks(capsys, task, model):
    """--task: another auto mapping swept with its own inputs and labels (a GPT-2 classifier
    pools the last non-pad token, so the shrunk config is given a pad token); the model's
    step agrees under enable() and runs tritonjit kernels."""
    S = bench_module("causal_lm_sweep")
    assert model in S.architectures(task)
    assert S.main(["--task", task, "--models", model]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"\| {model} \| ok \| .*, [1-9]\d* launches \(", out), out


def test_causal_lm_sweep_asks_fp64_beyond_rounding_and_marks_an_unrepeatable_step(capsys, monkeypatch):
    """A row beyond the tolerance against eager is judged against the step in fp64 (its
    detail says how far each path is from it); a model whose eager step does not repeat
    itself (here: a forward that scales a weight) is ``unstable``, not compared."""
    S = bench_module("causal_lm_sweep")
    monkeypatch.setitem(S.TOL, "logits_rel", 0.0)  # every fp32 difference is beyond it
    monkeypatch.setitem(S.TOL, "grad_rel", 0.0)
    S.main(["--models", "gpt2"])
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| gpt2 |"))
    assert "fp64" in row and ("| ok | ill-conditioned" in row or "| MISMATCH |" in row), row
    monkeypatch.undo()
    real = S._tiny

    def drifting(*a):
        model = real(*a)

        def drift(mod, args):
            mod.lm_head.weight.data.mul_(1.5)

        model.register_forward_pre_hook(drift)
        return model

    monkeypatch.setattr(S, "_tiny", drifting)
    assert S.main(["--models", "gpt2"]) == 0
    assert "| gpt2 | unstable | eager against eager: logits" in capsys.readouterr().out


def test_causal_lm_sweep_judges_a_bf16_step_against_a_wider_one(capsys):
    """--dtype bf16: every row is judged against the step in fp64 (a bf16 step differs from
    eager's by far more than fp32 rounding); a model with an op that has no fp64 (Mixtral's
    grouped expert products) against fp32. Both agree under enable()."""
    S = bench_module("causal_lm_sweep")
    assert S.main(["--dtype", "bf16", "--models", "gpt2,mixtral"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| gpt2 \| ok \| against fp64: logits", out), out
    assert re.search(r"\| mixtral \| ok \| against fp32: logits", out), out
    # the judge itself: twice eager's distance passes, more does not
    e = dict(logits_rel=1e-2, grad_rel=1e-2, grad_cos=0.999)
    assert S._judge(dict(logits_rel=2e-2, grad_rel=1e-2, grad_cos=0.998), e)
    assert not S._judge(dict(logits_rel=3e-2, grad_rel=1e-2, grad_cos=0.999), e)
    assert not S._judge(dict(logits_rel=1e-2, grad_rel=1e-2, grad_cos=0.99), e)
    # a half type's floor: an ulp-flipped ReLU moves a tiny model's gradients by a few percent
    flipped = dict(logits_rel=5e-3, grad_rel=4e-2, grad_cos=0.99975)
    close = dict(logits_rel=5e-3, grad_rel=7e-3, grad_cos=0.99998)
    assert S._judge(flipped, close, S.HALF_TOL) and not S._judge(flipped, close)
    assert not S._judge(dict(logits_rel=5e-3, grad_rel=0.3, grad_cos=0.99), close, S.HALF_TOL)


def test_causal_lm_sweep_marks_an_architecture_past_its_time_as_slow(capsys, monkeypatch):
    """--timeout: an architecture still running when its time is up is a ``slow`` row (not an
    error, exit 0) and the sweep goes on to the next."""
    import time

    S = bench_module("causal_lm_sweep")
    real = S.check

    def check(name, *rest):
        if name == "gpt2":
            time.sleep(60)  # the alarm interrupts this
        return real(name, *rest)

    monkeypatch.setattr(S, "check", check)
    t0 = time.perf_counter()
    assert S.main(["--models", "gpt2,llama", "--timeout", "8"]) == 0
    out = capsys.readouterr().out
    assert "| gpt2 | slow | did not finish within 8 s |" in out and "| llama | ok |" in out, out
    assert time.perf_counter() - t0 < 50


def test_eager_vs_enabled_times_each_path_in_interleaved_rounds():
    """models.eager_vs_enabled (the timing of models.py and architectures.py): each path runs
    its warm-up and then one round of ``calls`` calls per rep, eager outside enable() and the
    tritonjit path inside it, with the include list given; best and median per path."""
    import tritonjit_ops as T

    seen: list[tuple[str, ...]] = []
    syncs = []

    def fn():
        seen.append(tuple(T.enabled_ops()))

    best, med = M.eager_vs_enabled(fn, lambda: syncs.append(1), calls=3, rounds=2, include=["mm"], warmup=1)
    assert set(best) == set(med) == {"eager", "tritonjit"}
    assert all(v > 0 for v in [*best.values(), *med.values()])
    # warm-up (1 call each), then 2 reps of 3 calls: eager, tritonjit, eager, tritonjit
    assert seen == [()] + [("mm",)] + [()] * 3 + [("mm",)] * 3 + [()] * 3 + [("mm",)] * 3
    assert len(syncs) == 6 and T.enabled_ops() == []


def test_causal_lm_sweep_times_agreeing_steps_and_sums_them_up(capsys, monkeypatch):
    """--time CALLS: each ``ok`` row gets its step's eager and enable() times and their ratio
    (only ``ok`` rows: a MISMATCH's time would mean nothing), and a summary line follows the
    counts; time_step itself times the real step, eager outside and kernels inside enable()."""
    from tritonjit_ops._audit import _count_launches

    S = bench_module("causal_lm_sweep")
    with _count_launches() as launches:
        eager, tj = S.time_step(*S.architectures()["llama"], "cpu", "causal-lm", S.torch.float32, calls=1, rounds=1)
    assert eager > 0 and tj > 0 and launches[0] > 0
    asked = []

    def fake(cfg, cls, device, task, dtype, calls):
        asked.append((cls, calls))
        return {"LlamaForCausalLM": (100.0, 80.0), "GPT2LMHeadModel": (100.0, 125.0)}[cls]

    monkeypatch.setattr(S, "time_step", fake)
    assert S.main(["--models", "llama,gpt2", "--time", "3"]) == 0
    out = capsys.readouterr().out
    assert asked == [("LlamaForCausalLM", 3), ("GPT2LMHeadModel", 3)]
    assert "| llama | ok |" in out and "step: eager 100 us, enable() 80 us, 0.80x |" in out
    assert "step: eager 100 us, enable() 125 us, 1.25x |" in out
    assert ("geomean 1.00x, median 1.02x, worst 1.25x (gpt2); above 1.0x: 1: gpt2 1.25x" in out.splitlines()[-1]), out
    monkeypatch.setitem(S.TOL, "logits_rel", -1.0)  # MISMATCH rows are not timed
    asked.clear()
    assert S.main(["--models", "gpt2", "--time", "3"]) == 1
    assert asked == [] and "step time" not in capsys.readouterr().out


def test_causal_lm_sweep_reference_skips_a_wide_step_that_is_not_finite_or_cannot_run(capsys, monkeypatch):
    """The fp64 arbiter of a half-type row: a model whose own fp64 step is not finite
    (Longformer's masks, Canine's loss) is judged against fp32 instead, the row saying why;
    with no wider reference at all, a step within a half type's rounding of eager is ``ok``
    and says so, one beyond it a MISMATCH that names why each reference failed."""
    S = bench_module("causal_lm_sweep")
    real = S._wide_step

    def nan_in_fp64(model, inputs, wide):
        (logits, loss), grads = real(model, inputs, wide)
        if wide == S.torch.float64:
            grads[0] = grads[0] * float("nan")
        return (logits, loss), grads

    monkeypatch.setattr(S, "_wide_step", nan_in_fp64)
    assert S.main(["--dtype", "bf16", "--models", "gpt2"]) == 0
    assert "| gpt2 | ok | against fp32: logits" in capsys.readouterr().out

    def fails(model, inputs, wide):
        raise TypeError("no kernel for this dtype")

    monkeypatch.setattr(S, "_wide_step", fails)
    assert S.main(["--dtype", "bf16", "--models", "gpt2"]) == 0
    out = capsys.readouterr().out
    assert ("| gpt2 | ok | no wider reference (fp64: TypeError; fp32: TypeError): within a half type's rounding "
            "of eager; logits") in out, out
    monkeypatch.setitem(S.HALF_TOL, "logits_rel", -1.0)
    assert S.main(["--dtype", "bf16", "--models", "gpt2"]) == 1
    assert re.search(r"\| gpt2 \| MISMATCH \| logits .*; no wider reference \(fp64: TypeError; fp32: TypeError\) \|",
                     capsys.readouterr().out)


def test_causal_lm_sweep_wide_step_rebuilds_a_model_that_cannot_be_copied():
    """A model holding a tensor its forward computed (RecurrentGemma keeps its recurrent
    state) cannot be deep-copied after a step: the fp64 step rebuilds it from its config
    and state instead, on the model's device, with the same weights."""
    S = bench_module("causal_lm_sweep")
    model = S._tiny(*S.architectures()["llama"], "cpu", "causal-lm")
    inputs = S._inputs("causal-lm", model, "cpu")
    logits, _ = S._train_step(model, inputs)
    first = next(model.parameters())
    model.state = first * 2  # a non-leaf tensor: deepcopy refuses the module now
    with pytest.raises(RuntimeError):
        import copy

        copy.deepcopy(model)
    (wide_logits, _), grads = S._wide_step(model, inputs, S.torch.float64)
    assert len(grads) == len(M._grads(model))
    assert S.torch.allclose(wide_logits, logits, rtol=1e-4, atol=1e-5)


def test_causal_lm_sweep_shrinks_a_hybrid_model_to_one_layer_of_each_kind():
    """A hybrid config's layer kinds: one layer of each, the first of each kind, with every
    per-layer list cut to those layers (one layer alone drops the attention layers its cache
    expects); a kind list the config derives from its layer count gets layers until it names
    each kind again; a field the config leaves None for its model to derive gets SMALL's."""
    S = bench_module("causal_lm_sweep")

    class Hybrid:
        def __init__(self):
            self.num_hidden_layers = 6
            self.layer_types = ["linear", "linear", "full", "linear", "moe", "full"]
            self.sparsity = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
            self.num_key_value_heads = None

    cfg = Hybrid()
    S._shrink(cfg)
    assert cfg.layer_types == ["linear", "full", "moe"] and cfg.num_hidden_layers == 3
    assert cfg.sparsity == [0.9, 0.7, 0.5] and cfg.num_key_value_heads == S.SMALL["num_key_value_heads"]
    cfg = Hybrid()
    S._shrink(cfg, by_kind=False)  # the fallback: the first layers alone
    assert cfg.layer_types == ["linear"] and cfg.sparsity == [0.9] and cfg.num_hidden_layers == 1

    class Periodic:  # attention every fourth layer from the third, as Jamba's
        def __init__(self):
            self.num_hidden_layers = 8

        @property
        def layer_types(self):
            return ["attention" if i % 4 == 2 else "mamba" for i in range(self.num_hidden_layers)]

    cfg = Periodic()
    S._shrink(cfg)
    assert cfg.num_hidden_layers == 3 and set(cfg.layer_types) == {"attention", "mamba"}


@pytest.mark.parametrize("task,model", [("causal-lm", "qwen3_next"), ("causal-lm", "mamba2"),
                                        ("sequence-classification", "deberta"), ("causal-lm", "rwkv")])
def test_causal_lm_sweep_builds_the_models_its_shrinking_used_to_skip(task, model):
    """Configs the generic shrinking once broke build and run a training step in eager:
    Qwen3-Next keeps a linear-attention and a full-attention layer, Mamba-2's heads span its
    expanded width, DeBERTa's pooler is shrunk with the model, RWKV (whose initialization
    divides by the layer count - 1) gets two layers."""
    S = bench_module("causal_lm_sweep")
    archs = S.architectures(task)
    if model not in archs:
        pytest.skip(f"{model} is not in this transformers")
    m = S._tiny(*archs[model], "cpu", task)
    logits, loss = S._train_step(m, S._inputs(task, m, "cpu"))
    assert S.torch.isfinite(loss) and M._grads(m)[0].abs().sum() > 0
    if model == "qwen3_next":
        assert sorted(set(m.config.layer_types)) == ["full_attention", "linear_attention"]
    if model == "rwkv":
        assert m.config.num_hidden_layers == 2


def test_agreement_leaves_out_parameters_without_elements():
    """A shrunk model may hold a parameter of no elements (MobileBERT's bottleneck when the
    widths coincide): its gradient has nothing to compare, and ``agreement`` must not fail on
    it (``max()`` of an empty tensor) or count it."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 0), torch.nn.Linear(0, 4), torch.nn.Linear(4, 3))
    x = torch.randn(2, 4)
    model(x).sum().backward()
    grads = M._grads(model)
    assert [tuple(g.shape) for g in grads] == [(4,), (3, 4), (3,)]  # the empty weights left out
    a = M.agreement(model(x).detach(), model(x).detach(), grads, [g.clone() for g in grads])
    assert a["grad_rel"] == 0.0 and a["grad_cos"] == 1.0


def test_causal_lm_sweep_shrinks_latent_attention_to_aligned_halves():
    """DeepSeek-V2's latent attention, shrunk: the query and key halves (no rotary, rotary)
    each span a multiple of 16 bytes in bf16, so the rotary half of a row starts aligned.
    Halves of 4 elements left it 8 bytes off, and CUDA eager's fused attention faulted on
    them (misaligned address), taking the process's context with it."""
    S = bench_module("causal_lm_sweep")
    archs = S.architectures("causal-lm")
    if "deepseek_v2" not in archs:
        pytest.skip("deepseek_v2 is not in this transformers")
    m = S._tiny(*archs["deepseek_v2"], "cpu", "causal-lm")
    cfg = m.config
    for width in (cfg.qk_nope_head_dim, cfg.qk_rope_head_dim):
        assert width * 2 % 16 == 0, (cfg.qk_nope_head_dim, cfg.qk_rope_head_dim)
    assert cfg.qk_head_dim == cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    logits, loss = S._train_step(m, S._inputs("causal-lm", m, "cpu"))
    assert S.torch.isfinite(loss)
