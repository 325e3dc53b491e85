"""benchmarks/generate_sweep.py: greedy generate() of every causal-LM and seq2seq
architecture with its own cache, eager against enable() through the interpreter; and the
sweeps' table runner (benchmarks/causal_lm_sweep.run_rows), which goes on in a new process
when a row leaves the device's context lost."""
import json
import re

import pytest
from _util import bench_module

pytest.importorskip("transformers")

G = bench_module("generate_sweep")
S = G.S  # the module generate_sweep reads (bench_module would load a second copy)


def test_generate_sweep_agrees_and_fails_on_a_mismatch(capsys, monkeypatch):
    """A decoder's greedy tokens and every step's logits agree under enable() (exit 0, the
    step's tritonjit launches counted); with a tolerance no run can meet, the row is judged
    against fp64 and is a MISMATCH (exit 1)."""
    assert "gpt2" in G.S.architectures("causal-lm")
    assert G.main(["--models", "gpt2", "--tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| gpt2 \| ok \| logits \S+, tokens same 100%, [1-9]\d* launches \(", out), out
    monkeypatch.setitem(S.TOL, "logits_rel", -1.0)
    assert G.main(["--models", "gpt2", "--tokens", "4"]) == 1
    assert re.search(r"\| gpt2 \| MISMATCH \| .*; against fp64: logits", capsys.readouterr().out)


def test_generate_sweep_runs_an_encoder_decoder_with_its_cache(capsys):
    """seq2seq-lm: T5 generates from its decoder start with an encoder mask, its cache one
    layer per decoder layer (the shrinking cuts ``num_decoder_layers`` too: a decoder of the
    default 6 layers overran a cache made for ``num_layers``), and agrees under enable()."""
    model = S._tiny(*S.architectures("seq2seq-lm")["t5"], "cpu", "seq2seq-lm")
    assert model.config.num_decoder_layers == model.config.num_layers == 1
    assert G.main(["--task", "seq2seq-lm", "--models", "t5", "--tokens", "3"]) == 0
    assert re.search(r"\| t5 \| ok \| logits \S+, tokens same 100%, [1-9]\d* launches", capsys.readouterr().out)


def test_generate_forced_takes_the_given_tokens_and_keeps_the_logits():
    """The fp64 arbiter decodes eager's tokens: forced to the greedy tokens, generate()
    returns the same tokens and logits; forced to other tokens it returns those, and its
    first step's logits (same prompt) are unchanged."""
    import torch

    model = S._tiny(*S.architectures()["gpt2"], "cpu", "causal-lm")
    prompts = G._prompts(model, "cpu")
    assert prompts["attention_mask"][0, :G.PAD].eq(0).all() and prompts["attention_mask"][1].eq(1).all()
    free = G.generate(model, prompts, 4)
    same = G.generate(model, prompts, 4, forced=free.tokens)
    assert torch.equal(same.tokens, free.tokens) and torch.allclose(same.logits, free.logits)
    other = (free.tokens + 1) % model.config.vocab_size
    forced = G.generate(model, prompts, 4, forced=other)
    assert torch.equal(forced.tokens, other)
    assert torch.allclose(forced.logits[0], free.logits[0]) and not torch.allclose(forced.logits[1:], free.logits[1:])


def test_run_rows_goes_on_in_a_new_process_after_a_lost_device(capsys, monkeypatch):
    """A row after which the device's context is lost (a CUDA fault) says so and hands the
    rest of the table to a new process: the same command line with ``--models`` the rows
    left and ``--resume`` the counts and times so far; that process prints no second
    header, and its counts and summary include the first process's rows."""
    assert S.device_lost("cpu") is False
    execs = []

    class Replaced(Exception):
        pass

    def execv(exe, argv):
        execs.append(argv)
        raise Replaced

    monkeypatch.setattr(S.os, "execv", execv)
    monkeypatch.setattr(S, "device_lost", lambda device: True)
    rows = {"a": ("ok", "fine"), "b": ("skip", "eager: AcceleratorError"), "c": ("ok", "fine")}
    with pytest.raises(Replaced):
        S.run_rows(list(rows), "cuda", 0, "", lambda n: rows[n], lambda n: (100.0, 90.0), "generate()")
    out = capsys.readouterr().out
    assert out.startswith("| model type | status | detail |")
    assert "| a | ok | fine; generate(): eager 100 us, enable() 90 us, 0.90x |" in out
    assert "| b | skip | eager: AcceleratorError; the device's context is lost" in out
    argv = execs[0]
    assert argv[-4:-1] == ["--models", "c", "--resume"]
    state = json.loads(argv[-1])
    assert state == {"counts": {"ok": 1, "skip": 1}, "times": {"a": [100.0, 90.0]}}
    monkeypatch.setattr(S, "device_lost", lambda device: False)
    assert S.run_rows(["c"], "cuda", 0, argv[-1], lambda n: rows[n], lambda n: (100.0, 110.0), "generate()") == 0
    out = capsys.readouterr().out
    assert "| model type |" not in out and "| c | ok |" in out
    assert "ok: 2, skip: 1" in out and "generate() time, enable() over eager, 2 architectures" in out


def test_shrunk_models_have_no_all_zero_weight_matrix():
    """A router initialized to zero (AFMoE's) scores every expert alike, and top-k then picks
    by its tie order, which differs between implementations (aten's CPU kernel and
    tritonjit's did): the sweeps give such a matrix small random values, the same each
    build, and leave zero vectors (biases) alone."""
    import torch

    lin = torch.nn.Linear(4, 3)
    torch.nn.init.zeros_(lin.weight)
    torch.nn.init.zeros_(lin.bias)
    S._no_zero_matrices(lin)
    assert lin.weight.any() and not lin.bias.any() and lin.weight.abs().max() < 0.2
    again = torch.nn.Linear(4, 3)
    torch.nn.init.zeros_(again.weight)
    S._no_zero_matrices(again)
    assert torch.equal(again.weight, lin.weight)
    model = S._tiny(*S.architectures()["afmoe"], "cpu", "causal-lm")
    assert all(p.any() for p in model.parameters() if p.dim() >= 2 and p.numel())


def test_fp32_exact_turns_tf32_off_even_with_frozen_global_flags(monkeypatch):
    """The sweeps' TF32-off block on CUDA (``cuda`` or ``cuda:N``) works in a process whose
    global backend flags are frozen (torch's test utilities freeze them: the suite's run of
    the continuation test first failed so), and restores both flags after it."""
    import torch

    # torch.backends' own global (disable_global_flags' flag), restored at the test's end
    monkeypatch.setitem(torch.backends.flags_frozen.__globals__, "__allow_nonbracketed_mutation_flag", False)
    assert torch.backends.flags_frozen()
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    for device in ("cuda", "cuda:0"):
        with S._fp32_exact(device):
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before

