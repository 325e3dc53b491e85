"""Caches that heal and tell the truth: an artifact that lost its binary is rebuilt
(not a failure forever); a read-only tritonjit cache costs the next warm start, never
a compile; ``cache clear`` on read-only storage says what it could not remove."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import tritonjit
from cache_support import SIG, TARGET, artifact_dirs
from tritonjit._disk_cache import CacheCorruptionWarning, CacheWriteWarning, index
from tritonjit.cli import main as cli_main


def _binaries(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.cubin"))


def _compile(kernel_file, sig: str = SIG):
    """Compile from a fresh JITFunction of the same source, as a new process would."""
    return tritonjit.function(kernel_file(), "axpy").compile(sig, target=TARGET)


# ---- (a) an artifact directory missing its binary ---------------------------------------------------------
def test_artifact_missing_its_binary_is_rebuilt_once(caches, kernel_file, compile_counter):
    good = _compile(kernel_file)
    (cubin,) = _binaries(caches)
    cubin.unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = _compile(kernel_file)
    reports = [w for w in caught if issubclass(w.category, CacheCorruptionWarning)]
    assert len(reports) == 1, [str(w.message) for w in caught]
    assert "kernel 'axpy'" in str(reports[0].message) and "axpy.cubin is missing" in str(reports[0].message)
    assert len(compile_counter) == 2 and again.hash == good.hash and len(again.binary) == len(good.binary)
    (entry,) = [e for _, e, _ in index.entries() if e is not None]
    assert index.verify(entry) is None, "the entry was not rewritten over a whole artifact"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheCorruptionWarning)
        _compile(kernel_file)  # healed: a plain hit
    assert len(compile_counter) == 2


@pytest.mark.parametrize("how", ["index off", "entry lost"])
def test_triton_artifact_missing_its_binary_heals_without_the_index(caches, kernel_file, monkeypatch, how):
    """Triton's own lookup fails on such a directory (KeyError: 'cubin') at every
    compile; with no index entry to find it first, the compile bridge rebuilds it."""
    if how == "index off":
        monkeypatch.setenv("TRITONJIT_DISK_CACHE", "0")
    good = _compile(kernel_file)
    if how == "entry lost":
        for key in index.keys():
            os.unlink(index.entry_path(key))
    (cubin,) = _binaries(caches)
    cubin.unlink()
    with pytest.warns(CacheCorruptionWarning, match=r"kernel 'axpy'.*cubin"):
        again = _compile(kernel_file)
    assert again.hash == good.hash and len(again.binary) == len(good.binary) and cubin.exists()
    assert len(index.keys()) == (0 if how == "index off" else 1)
    from triton import knobs

    assert not knobs.compilation.always_compile and "TRITON_ALWAYS_COMPILE" not in os.environ
    _compile(kernel_file)  # and stays healed


def test_cache_clear_removes_an_artifact_missing_its_binary(caches, kernel_file, capsys):
    _compile(kernel_file)
    (cubin,) = _binaries(caches)
    cubin.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheCorruptionWarning)
        _compile(kernel_file)  # used to drop the entry and keep the broken directory
    _binaries(caches)[0].unlink()
    assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"entries": 1, "artifact_dirs": 1, "not_removed": []}
    assert artifact_dirs(caches) == [] and index.keys() == []


# ---- (b) a read-only TRITONJIT_CACHE_DIR ------------------------------------------------------------------
@pytest.fixture
def own_index_dir(caches: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tritonjit's cache apart from Triton's, so that only it can be made read-only."""
    root = tmp_path / "tritonjit-cache"
    monkeypatch.setenv("TRITONJIT_CACHE_DIR", str(root))
    return root


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_read_only_index_dir_compiles_with_one_warning(own_index_dir, kernel_file, compile_counter, read_only):
    how = read_only(own_index_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = _compile(kernel_file)
        b = _compile(kernel_file, SIG.replace(",128", ",256"))
    writes = [w for w in caught if issubclass(w.category, CacheWriteWarning)]
    assert len(writes) == 1, f"{how}: {[str(w.message) for w in caught]}"
    assert str(own_index_dir) in str(writes[0].message) and "kernel 'axpy'" in str(writes[0].message)
    assert a.binary and b.binary and len(compile_counter) == 2
    assert _files(own_index_dir) == [], "something was written to the read-only cache"
    _compile(kernel_file)  # no index: compiled again, still no failure
    assert len(compile_counter) == 3


def test_read_only_index_dir_still_serves_hits(own_index_dir, kernel_file, compile_counter, read_only):
    _compile(kernel_file)
    read_only(own_index_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWriteWarning)
        warm = _compile(kernel_file)
    assert warm.artifact is None and len(compile_counter) == 1  # an index hit, no lock needed


# ---- (c) cache clear on read-only storage -----------------------------------------------------------------
@pytest.mark.parametrize("what", ["everything", "the index only"])
def test_cache_clear_reports_what_it_could_not_remove(own_index_dir, caches, kernel_file, capsys, read_only, what):
    _compile(kernel_file)
    read_only(own_index_dir)
    if what == "everything":
        read_only(caches)
    kept_before = _files(own_index_dir)
    assert cli_main(["cache", "clear", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["entries"] == 0 and out["artifact_dirs"] == (0 if what == "everything" else 1)
    assert out["not_removed"] and all(r["path"] and r["error"] for r in out["not_removed"])
    assert _files(own_index_dir) == kept_before, "the index must still be all there"
    assert len(artifact_dirs(caches)) == (1 if what == "everything" else 0)
    assert cli_main(["cache", "clear"]) == 1
    printed = capsys.readouterr()
    assert "removed 0 index entries and 0 artifact directories" in printed.out
    assert "could not remove" in printed.err and str(own_index_dir) in printed.err
