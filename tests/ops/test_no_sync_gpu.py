"""GPU: no operator synchronizes the host on its normal path; an out-of-range index
trips a device-side assertion; a whole transformers model captures into a CUDA graph
under enable(). Every test needs a CUDA GPU (skipped without one).

    pytest -q tests/ops/test_no_sync_gpu.py

Each case runs once before the check: compiling a variant, loading its module and
autotuning mm (which times configs and so synchronizes) happen on a variant's first
call only, as they must before a CUDA graph is captured.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import tritonjit_ops as T
from _sync_cases import aten_cases, close, direct_cases
from _util import bench_module

pytestmark = pytest.mark.gpu
DTYPES = [torch.float32, torch.bfloat16]
DEV = "cuda"


@pytest.fixture(autouse=True)
def _sdpa_on_tritonjit(monkeypatch):
    """tritonjit's SDPA kernels under enable() ("auto" may give a call to aten's kernel where
    it measured faster), so that these checks always cover them."""
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    T.clear_policies()
    yield
    T.clear_policies()  # (monkeypatch restores the variable after this)


def _cases(path: str, dtype: torch.dtype):
    return direct_cases(DEV, dtype) if path == "direct" else aten_cases(DEV, dtype)


def _ctx(path: str):
    return T.enable(include="all") if path == "enable" else contextlib.nullcontext()


def _refs(path: str, cases):
    """Eager results: the reference of a direct case, the same aten call without enable()."""
    return [c.ref() if c.ref is not None else (c.call() if path == "enable" else None) for c in cases]


@contextlib.contextmanager
def _sync_is_an_error():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_sync_debug_mode_catches_a_sync():
    """The check below is not vacuous: a host read of a CUDA tensor raises under it."""
    x = torch.ones(3, device=DEV)
    with _sync_is_an_error(), pytest.raises(RuntimeError, match="synchroniz"):
        x.sum().item()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("path", ["direct", "enable"])
def test_no_operator_synchronizes(path, dtype):
    cases = _cases(path, dtype)
    refs = _refs(path, cases)
    with _ctx(path):
        for c in cases:  # warm-up: compile, load, autotune
            c.call()
    got, errors = [], {}
    with _ctx(path), _sync_is_an_error():
        for c in cases:
            try:
                got.append(c.call())
            except Exception as exc:  # collect them all: one report names every op that syncs
                errors[c.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                got.append(None)
    assert not errors, f"operators that synchronized the host ({path}, {dtype}): {errors}"
    torch.cuda.synchronize()
    for c, g, r in zip(cases, got, refs):
        if r is not None:
            close(g, r, dtype, c.name)


@pytest.mark.parametrize("path", ["direct", "enable"])
def test_every_operator_captures_into_a_cuda_graph(path):
    """Capture fails on any synchronization, torch's or the launcher's own (the sync
    debug mode sees only torch's); replay recomputes the captured output."""
    dtype = torch.bfloat16
    cases = _cases(path, dtype)
    refs = _refs(path, cases)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), _ctx(path):
        for c in cases:
            c.call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    errors, graphs = {}, []
    for c, r in zip(cases, refs):
        g = torch.cuda.CUDAGraph()
        try:
            with _ctx(path), torch.cuda.graph(g):
                out = c.call()
        except Exception as exc:
            errors[c.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            continue
        graphs.append((c, g, out, r))
    assert not errors, f"operators that could not be captured ({path}): {errors}"
    for c, g, out, r in graphs:
        g.replay()
        torch.cuda.synchronize()
        if r is None:  # no eager reference (rotary_embedding): the same call, not captured
            with _ctx(path):
                r = c.call()
        close(out, r, dtype, c.name)


_ASSERT_SCRIPT = textwrap.dedent("""
    import sys, torch, torch.nn.functional as F, tritonjit_ops as T
    op, d = sys.argv[1], "cuda"
    w, x = torch.randn(5, 8, device=d), torch.randn(4, 6, device=d)
    calls = {  # op: (call, in-range index, out-of-range index); same shapes, so the same variant
        "embedding": (lambda i: T.embedding(w, i), [1, 4], [1, 7]),
        "embedding_negative": (lambda i: T.embedding(w, i), [1, 4], [-1, 4]),
        "index_select": (lambda i: T.index_select(x, 1, i), [0, 5], [0, 6]),
        "gather": (lambda i: T.gather(x, 1, i), [[0, 5]], [[0, 6]]),
        "cross_entropy": (lambda i: T.cross_entropy(x, i, reduction="none"), [0, -100, 5, 1], [0, -100, 6, 1]),
        "enable_embedding": (lambda i: F.embedding(i, w), [1, 4], [1, 5]),
    }
    call, good, bad = calls[op]
    good, bad = torch.tensor(good, device=d), torch.tensor(bad, device=d)  # (a host-to-device copy syncs)
    with T.enable():
        call(good)
        torch.cuda.synchronize()
        print("IN RANGE OK", flush=True)
        torch.cuda.set_sync_debug_mode("error")  # the failing call must not synchronize either
        call(bad)
        torch.cuda.set_sync_debug_mode(0)
        print("LAUNCHED", flush=True)
        torch.cuda.synchronize()
    print("NO ASSERT", flush=True)
""")


@pytest.mark.parametrize("op", ["embedding", "embedding_negative", "index_select", "gather", "cross_entropy",
                                "enable_embedding"])
def test_out_of_range_index_trips_a_device_assert(op, tmp_path):
    """As aten's CUDA kernels: the launch returns at once (no sync) and the error surfaces
    at the next synchronization as a device-side assert. In a subprocess, since a device
    assert leaves the CUDA context unusable."""
    script = tmp_path / "assert_probe.py"
    script.write_text(_ASSERT_SCRIPT)
    p = subprocess.run([sys.executable, str(script), op], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    out = p.stdout + p.stderr
    assert "IN RANGE OK" in p.stdout, out[-4000:]
    assert "LAUNCHED" in p.stdout, out[-4000:]
    assert "NO ASSERT" not in p.stdout and p.returncode != 0, out[-4000:]
    assert "device-side assert" in p.stderr.lower(), p.stderr[-4000:]
    assert "out of range" in out, out[-4000:]  # the kernel's own message, printed by the device


def test_llama_forward_captures_into_a_cuda_graph_under_enable():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg).to(DEV, torch.bfloat16).eval()
    assert model.config._attn_implementation == "sdpa"
    ids = torch.randint(0, 256, (2, 32), device=DEV)
    other = torch.randint(0, 256, (2, 32), device=DEV)
    static = ids.clone()

    def forward():
        return model(input_ids=static, use_cache=False).logits

    def capture():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up: compile, load, autotune (outside the capture)
                forward()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = forward()
        return g, out

    with torch.no_grad():
        ref, ref_other = (model(input_ids=t, use_cache=False).logits for t in (ids, other))
        try:  # transformers' own forward must capture, else this test has nothing to say
            capture()
        except Exception as exc:
            pytest.skip(f"transformers {transformers.__version__}: the eager forward does not capture: {exc}")
        with T.enable():
            eager = forward()
            g, out = capture()
            g.replay()
            torch.cuda.synchronize()
            first = out.clone()
            static.copy_(other)
            g.replay()
            torch.cuda.synchronize()
            second = out.clone()
    tol = dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(eager, ref, **tol)  # enable() matches eager
    torch.testing.assert_close(first, eager, rtol=1e-2, atol=1e-2)  # replay = the same kernels
    torch.testing.assert_close(first, ref, **tol)
    torch.testing.assert_close(second, ref_other, **tol)  # replay recomputes from the new input


def test_architectures_graph_mode_replays_what_the_uncaptured_step_computes(capsys):
    """benchmarks/architectures.py --graph: a Llama's and a GPT-2's forward and training step
    captured under enable() (as eager's are), replayed on changed inputs, give what enable()
    computes uncaptured; every row says so, none is an error."""
    A = bench_module("architectures")
    assert A.main(["--models", "llama,gpt2", "--graph", "--generate", "", "--hidden", "128", "--tokens", "32"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if "(graph)" in r]
    assert len(rows) == 4, rows
    assert all("replay ok" in r and "error" not in r for r in rows), rows
