"""TRITONJIT_RECORD manifests and the parallel warm-up (cross-compiled for cuda:90, no device)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cache_support import SIG, TARGET
from tritonjit import _function, _manifest
from tritonjit._disk_cache import index
from tritonjit._manifest import ManifestEntry
from tritonjit._warmup import warmup
from tritonjit.cli import main as cli_main

torch = pytest.importorskip("torch")


def test_record_env_appends_each_variant_once(caches, kernel_file, tmp_path):
    path = kernel_file()
    manifest = tmp_path / "run.jsonl"
    script = textwrap.dedent(f"""
        import torch, tritonjit
        tritonjit.set_backend("interpreter")
        f = tritonjit.function({path!r}, "axpy")
        x, y, o = torch.randn(100), torch.randn(100), torch.empty(100)
        for block in (64, 128, 64):
            f[(2,)](x, y, o, 100, 1.5, BLOCK=block, num_warps=2)
    """)
    env = {**__import__("os").environ, "TRITONJIT_RECORD": str(manifest)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [ln["signature"] for ln in lines] == ["*fp32:16,*fp32:16,*fp32:16,i32,fp32,64",
                                                 "*fp32:16,*fp32:16,*fp32:16,i32,fp32,128"]
    assert all(ln["kernel"] == "axpy" and ln["file"] == path and ln["options"] == {"num_warps": 2} for ln in lines)
    assert lines[0]["target"] == "interpreter:cpu"
    assert [e.signature for e in _manifest.read(str(manifest))] == [ln["signature"] for ln in lines]


def test_read_skips_malformed_lines_and_duplicates(tmp_path, caplog):
    m = tmp_path / "m.jsonl"
    good = json.dumps({"kernel": "k", "file": "/x.py", "signature": "i32"})
    m.write_text(f"{good}\n\nnot json\n{{\"kernel\": \"k\"}}\n{good}\n")
    entries = _manifest.read(str(m))
    assert entries == [ManifestEntry(kernel="k", file="/x.py", signature="i32")]
    assert "m.jsonl:3" in caplog.text and "m.jsonl:4" in caplog.text
    with pytest.raises(FileNotFoundError, match="TRITONJIT_RECORD"):
        _manifest.read(str(tmp_path / "absent.jsonl"))


def test_recorder_hook_in_process(caches, kernel_file, tmp_path, monkeypatch):
    import tritonjit

    manifest = tmp_path / "m.jsonl"
    monkeypatch.setattr(_function, "_recorder", _manifest.ManifestWriter(str(manifest)))
    tritonjit.set_backend("interpreter")
    try:
        f = tritonjit.function(kernel_file(), "axpy")
        x = torch.randn(32)
        f[(1,)](x, x, torch.empty(32), 32, 1.0, BLOCK=32)
        f[(1,)](x, x, torch.empty(32), 32, 1.0, BLOCK=32)
    finally:
        tritonjit.set_backend(None)
    assert len(manifest.read_text().splitlines()) == 1


BROKEN = """
import triton
import triton.language as tl


@triton.jit
def axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), undefined_name)
"""

# a simulated compiler crash: the worker process dies (SIGSEGV) while handling this variant
CRASHING = """
import os
import signal

os.kill(os.getpid(), signal.SIGSEGV)
"""

SLEEPING = """
import time

time.sleep(120)
"""


def _entry(path: str, sig: str = SIG, **options) -> ManifestEntry:
    return ManifestEntry(kernel="axpy", file=path, signature=sig, options=tuple(sorted(options.items())))


def test_warmup_compiles_in_workers_and_survives_failures(caches, kernel_file, tmp_path):
    path = kernel_file()
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "crash.py").write_text(CRASHING)
    entries = [
        _entry(path), _entry(str(tmp_path / "crash.py")), _entry(path, SIG.replace("128", "256")),
        _entry(str(tmp_path / "broken.py")), _entry(path, num_warps=8),
    ]
    report = warmup(entries, jobs=2, target=TARGET, progress=False)
    status = {(r.entry.file, r.entry.signature, r.entry.options): r.status for r in report.results}
    assert [r.status for r in report.results] == ["compiled", "crashed", "compiled", "failed", "compiled"], status
    crashed = report.results[1]
    assert "signal 11" in crashed.error
    assert "undefined_name" in report.results[3].error and "axpy" in report.results[3].error
    assert len(index.keys()) == 3 and not report.ok
    again = warmup([entries[0], entries[2], entries[4]], jobs=2, target=TARGET, progress=False)
    assert [r.status for r in again.results] == ["cached"] * 3 and again.ok


def test_warmup_timeout_kills_only_that_variant(caches, kernel_file, tmp_path):
    (tmp_path / "sleep.py").write_text(SLEEPING)
    path = kernel_file()
    report = warmup([_entry(str(tmp_path / "sleep.py")), _entry(path)], jobs=1, target=TARGET, progress=False,
                    timeout=4.0)
    assert [r.status for r in report.results] == ["timeout", "compiled"]


def test_cli_warmup_json(caches, kernel_file, tmp_path, capsys):
    path = kernel_file()
    m = tmp_path / "m.jsonl"
    _manifest.append(str(m), [_entry(path), _entry(path, SIG.replace("128", "64"))])
    rc = cli_main(["warmup", str(m), "-j", "2", "--target", TARGET, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["compiled"] == 2 and out["jobs"] == 2
    assert {r["target"] for r in out["results"]} == {TARGET}
    rc = cli_main(["warmup", str(m), "-j", "1", "--target", "recorded", "--json"])  # recorded: none -> local
    assert rc in (0, 1)
    capsys.readouterr()
    assert cli_main(["warmup"]) == 1  # neither a manifest nor --native
    assert "nothing to do" in capsys.readouterr().err
    assert cli_main(["warmup", str(Path(tmp_path) / "nope.jsonl")]) == 1


@pytest.mark.skipif(not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="no C++ compiler")
def test_cli_warmup_native_builds_the_helpers(caches, capsys):
    """--native leaves the torch-linked helpers built (and loaded here), so no later
    process starts on the Python reads while they compile in the background."""
    rc = cli_main(["warmup", "--native", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert set(out["native"]) == {"tritonjit._native._torch_tensor", "tritonjit_ops._prologue_native",
                                  "tritonjit_ops._native_ops"}
    assert all(why.startswith("in use (") for why in out["native"].values()), out
