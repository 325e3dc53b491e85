"""The tritonjit index: warm hits skip triton.compile; nothing stale is ever reused;
corruption is detected, reported once and rebuilt; concurrent compiles leave one artifact."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import warnings
from pathlib import Path

import pytest
import tritonjit
from cache_support import SIG, TARGET, artifact_dirs
from tritonjit import _disk_cache
from tritonjit._disk_cache import CacheCorruptionWarning, index


def _entries() -> list[dict]:
    return [e for _, e, _ in index.entries() if e is not None]


def test_hit_loads_without_triton_compile(caches, kernel_file, compile_counter):
    path = kernel_file()
    cold = tritonjit.function(path, "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 1 and cold.artifact is not None
    assert len(_entries()) == 1
    # a fresh JITFunction of the same source, as in a new process: served by the index
    warm = tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 1, "the index hit must not call triton.compile"
    assert warm.artifact is None  # rebuilt from files, not Triton's CompiledKernel
    assert warm.binary == cold.binary and warm.hash == cold.hash and warm.binary_ext == "cubin"
    assert warm.metadata["num_warps"] == cold.metadata["num_warps"]
    assert warm.metadata["shared"] == cold.metadata["shared"]
    assert warm.target == cold.target and warm.signature == SIG
    assert warm.asm["ptx"].lstrip().startswith("//")  # other IRs read on demand


@pytest.mark.parametrize("change", ["source", "callee"])
def test_changed_source_or_callee_never_reuses(caches, kernel_file, compile_counter, change):
    base = tritonjit.function(kernel_file(factor=2), "axpy").compile(SIG, target=TARGET)
    changed_path = kernel_file(factor=2, body="helper(v) + 1.0") if change == "source" else kernel_file(factor=3)
    changed = tritonjit.function(changed_path, "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 2
    assert changed.hash != base.hash and changed.binary != base.binary
    assert len(_entries()) == 2


def test_changed_triton_version_never_reuses(caches, kernel_file, compile_counter, monkeypatch):
    path = kernel_file()
    tritonjit.function(path, "axpy").compile(SIG, target=TARGET)
    monkeypatch.setattr(_disk_cache, "_fingerprint", "99.0.0+other-build")
    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 2, "an entry of another Triton was reused"
    assert "99.0.0+other-build" in {e["triton"] for e in _entries()} and len(_entries()) == 2


def test_changed_option_never_reuses(caches, kernel_file, compile_counter):
    path = kernel_file()
    f = tritonjit.function(path, "axpy")
    a = f.compile(SIG, target=TARGET, num_warps=4)
    b = f.compile(SIG, target=TARGET, num_warps=8)
    c = f.compile(SIG, target=TARGET, num_warps=4)
    assert len(compile_counter) == 2
    assert a.metadata["num_warps"] == 4 and b.metadata["num_warps"] == 8 and c.hash == a.hash
    assert f.compile(SIG, target="cuda:80").target.arch == 80  # another target: another variant
    assert len(compile_counter) == 3


def test_corrupt_entry_warns_once_and_rebuilds(caches, kernel_file, compile_counter):
    path = kernel_file()
    tritonjit.function(path, "axpy").compile(SIG, target=TARGET)
    (key,) = index.keys()
    entry_path = Path(index.entry_path(key))
    entry_path.write_bytes(entry_path.read_bytes()[:40])  # truncated
    with pytest.warns(CacheCorruptionWarning, match="index entry of kernel 'axpy'"):
        v = tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 2 and v.binary
    assert index.read_entry(key) is not None  # rewritten, verifies again
    # a checksum-valid JSON with an edited field is caught too
    data = json.loads(entry_path.read_text())
    data["signature"] = "forged"
    entry_path.write_text(json.dumps(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert not any(issubclass(w.category, CacheCorruptionWarning) for w in caught), "reported once per variant"
    assert len(compile_counter) == 3


def test_corrupt_artifact_warns_and_recompiles(caches, kernel_file, compile_counter):
    path = kernel_file()
    good = tritonjit.function(path, "axpy").compile(SIG, target=TARGET)
    cubin = Path(good.cache_dir) / f"{good.name}.cubin"
    cubin.write_bytes(cubin.read_bytes()[: len(good.binary) // 2])  # truncated binary
    with pytest.warns(CacheCorruptionWarning, match="cached artifact of kernel 'axpy'.*cubin"):
        again = tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 2, "the corrupt artifact must be recompiled, not taken from Triton's cache"
    assert len(again.binary) == len(good.binary)  # the rebuilt one is whole
    (entry,) = _entries()
    assert index.verify(entry) is None


def test_missing_artifact_is_a_plain_miss(caches, kernel_file, compile_counter):
    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    for d in artifact_dirs(caches):
        _disk_cache.remove_tree(str(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheCorruptionWarning)
        tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert len(compile_counter) == 2


def test_index_off(caches, kernel_file, compile_counter, monkeypatch):
    monkeypatch.setenv("TRITONJIT_DISK_CACHE", "0")
    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert index.keys() == []


def test_interpreter_variants_are_not_indexed(caches, kernel_file):
    torch = pytest.importorskip("torch")
    tritonjit.set_backend("interpreter")
    try:
        f = tritonjit.function(kernel_file(), "axpy")
        x, y, out = torch.randn(100), torch.randn(100), torch.empty(100)
        f[(1,)](x, y, out, 100, 2.0, BLOCK=128)
        torch.testing.assert_close(out, x * 2.0 * 2 + y * 2)
    finally:
        tritonjit.set_backend(None)
    assert index.keys() == []


def test_concurrent_processes_leave_one_artifact(caches, kernel_file):
    path = kernel_file()
    ctx = mp.get_context("spawn")
    n = 3
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_compile_once, args=(path, SIG, TARGET, barrier, out)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len({h for _, h in results}) == 1
    assert sum(c for c, _ in results) == 1, f"the compile lock let {results} compile"
    (entry,) = _entries()
    assert index.verify(entry) is None
    dirs = artifact_dirs(caches)
    assert len(dirs) == 1 and not [f for f in os.listdir(dirs[0]) if "tmp" in f]


def _compile_once(*args):
    from _workers import compile_once

    compile_once(*args)
