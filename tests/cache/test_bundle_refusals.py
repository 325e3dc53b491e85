"""Hostile and malformed bundles: refused whole, before anything is written or read in bulk.

Each test builds a bundle whose member hashes are all correct (so only the check under
test can refuse it), snapshots every file under the test's directory, imports, and
checks that the error names the bundle, the entry and the field, and that not one
file changed: no index entry, no artifact, nothing outside the cache either.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tritonjit
from cache_support import SIG, TARGET
from tritonjit import _bundle
from tritonjit._bundle import BundleError, export_bundle, import_bundle
from tritonjit._disk_cache import CacheCorruptionWarning, index
from tritonjit.cli import main as cli_main

MANIFEST = "tritonjit-bundle.json"


@pytest.fixture
def bundle(caches: Path, kernel_file: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid one-variant bundle, and an empty cache of another machine to import it into."""
    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    path = tmp_path / "good.tgz"
    export_bundle(str(path))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "other-machine"))
    return path


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def _write(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _edited(src: Path, dst: Path, edit: Callable[[dict[str, Any], dict[str, bytes]], Any]) -> Path:
    """``src`` with its manifest (and members) edited; added members are listed with their
    true hashes, so the bundle's own hashes stay consistent."""
    members = _members(src)
    manifest = json.loads(members.pop(MANIFEST))
    manifest = edit(manifest, members) or manifest
    files = manifest.get("files") if isinstance(manifest, dict) else None
    for name, data in members.items():
        if isinstance(files, dict):
            files.setdefault(name, hashlib.sha256(data).hexdigest())
    return _write(dst, {MANIFEST: json.dumps(manifest).encode(), **members})


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and directory under ``root`` (bundles excluded), with its content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.join(dirpath, d)] = "dir"
        for f in filenames:
            if not f.endswith(".tgz"):
                out[os.path.join(dirpath, f)] = hashlib.sha256(Path(dirpath, f).read_bytes()).hexdigest()
    return out


def _entry(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["entries"][0]


def _set(field: str, value: Any) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    return lambda m, _: _entry(m).__setitem__(field, value)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory outside every cache that a hostile bundle aims at."""
    d = tmp_path / "victim"
    d.mkdir()
    (d / "precious.txt").write_text("do not delete")
    return d


# ---- item 1: fields that become paths ------------------------------------------------------------
PATH_ATTACKS = {
    "artifact_absolute": lambda v: _set_all(artifact=str(v), files={}),
    "artifact_dotdot": lambda v: _set_all(artifact="../victim", files={}),
    "key_dotdot": lambda v: _set_all(key="../../../victim/evil"),
    "key_not_hex": lambda v: _set_all(key="zz" + "0" * 62),
    "stem_dotdot": lambda v: _set_all(stem="../../victim/precious"),
    "binary_ext_slash": lambda v: _set_all(binary_ext="cubin/../../x"),
    "file_name_dotdot": lambda v: _rename_file("axpy.ptx", "../axpy.ptx"),
}


def _set_all(**fields: Any) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    return lambda m, _: _entry(m).update(fields)


def _rename_file(old: str, new: str) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    def edit(m: dict[str, Any], _: dict[str, bytes]) -> None:
        files = _entry(m)["files"]
        files[new] = files.pop(old)
    return edit


@pytest.mark.parametrize("attack", sorted(PATH_ATTACKS))
def test_entry_fields_that_become_paths_are_refused(bundle, tmp_path, victim, attack, capsys):
    bad = _edited(bundle, tmp_path / "bad.tgz", PATH_ATTACKS[attack](victim))
    field = attack.split("_")[0] if not attack.startswith("binary") else "binary_ext"
    field = "files" if attack.startswith("file_name") else field
    before = _snapshot(tmp_path)
    with pytest.raises(BundleError) as err:
        import_bundle(str(bad))
    msg = str(err.value)
    assert str(bad) in msg and "entry 0" in msg and f"'{field}'" in msg, msg
    assert _snapshot(tmp_path) == before, "a refused bundle must leave every file as it was"
    # what the old code let happen next: `cache clear` deleting the directory the entry named
    assert cli_main(["cache", "clear", "--json"]) == 0
    capsys.readouterr()
    assert (victim / "precious.txt").read_text() == "do not delete"
    assert not (tmp_path / "victim" / "evil.json").exists()


def test_an_absolute_artifact_cannot_get_a_directory_deleted_by_a_compile(bundle, tmp_path, victim, kernel_file):
    """The old path to deletion without `cache clear`: import the entry under the key a real
    compile computes, then compile: the corrupt 'artifact' was removed as a cache cleanup."""
    tritonjit_fn = tritonjit.function(kernel_file(), "axpy")
    evil = _edited(bundle, tmp_path / "evil.tgz", _set_all(artifact=str(victim), files={}))
    (victim / "axpy.json").write_text("{}")
    (victim / "axpy.cubin").write_bytes(b"x")
    with pytest.raises(BundleError, match="'artifact'"):
        import_bundle(str(evil))
    tritonjit_fn.compile(SIG, target=TARGET)
    assert (victim / "precious.txt").exists()


def test_an_entry_an_unchecked_import_left_cannot_get_a_directory_deleted(caches, victim, kernel_file, capsys):
    """Defence in depth for caches that an older tritonjit filled from a bundle: an index
    entry whose metadata and binary are not among its hashed files is corrupt, so neither
    a compile of its variant nor `cache clear` acts on the directory it names."""
    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    (key,) = index.keys()
    entry = index.read_entry(key)
    (victim / "axpy.json").write_text("{}")
    (victim / "axpy.cubin").write_bytes(b"x")
    index.write_entry({**entry, "artifact": str(victim), "files": {}})
    with pytest.warns(CacheCorruptionWarning, match="index entry .* field 'stem'"):
        tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    assert (victim / "precious.txt").exists()
    index.write_entry({**entry, "artifact": str(victim), "files": {}})
    assert cli_main(["cache", "clear", "--json"]) == 0
    capsys.readouterr()
    assert (victim / "precious.txt").exists()


# ---- item 2: structure, all-or-nothing, bounded reads ----------------------------------------------
def _drop(field: str) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    return lambda m, _: _entry(m).pop(field) and None


MALFORMED = {
    # case: (edit, words the message must contain)
    "entry_without_key": (_drop("key"), ["entry 0", "'key'", "missing"]),
    "entry_without_files": (_drop("files"), ["entry 0", "'files'", "missing"]),
    "entries_not_a_list": (lambda m, _: m.__setitem__("entries", {"a": 1}), ["'entries'", "list"]),
    "entry_not_an_object": (lambda m, _: m["entries"].append(7), ["entry 1", "object"]),
    "files_not_an_object": (lambda m, _: m.__setitem__("files", []), ["'files'", "object"]),
    "manifest_not_an_object": (lambda m, _: [m], ["object"]),
    "manifest_without_format": (lambda m, _: m.pop("format") and None, ["'format'", "missing"]),
    "kernel_not_a_string": (_set("kernel", ["axpy"]), ["entry 0", "'kernel'", "string"]),
    "options_not_an_object": (_set("options", "num_warps=4"), ["entry 0", "'options'", "object"]),
    "unknown_field": (_set("exec", "rm -rf /"), ["entry 0", "'exec'", "unknown"]),
    "wrong_entry_format": (_set("format", 99), ["entry 0", "'format'"]),
    "duplicate_key": (lambda m, _: m["entries"].append(dict(_entry(m))), ["entry 1", "'key'", "entry 0"]),
    "binary_not_in_files": (_set("binary_ext", "hsaco"), ["entry 0", "'binary_ext'", "axpy.hsaco"]),
    "unused_member": (lambda m, mem: mem.__setitem__(f"artifacts/{_entry(m)['artifact']}/extra.bin", b"x"),
                      ["extra.bin", "no entry"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_manifest_is_refused_with_a_clear_error_and_nothing_written(bundle, tmp_path, case):
    edit, words = MALFORMED[case]
    import_bundle(str(bundle))  # a cache that already holds something: it must stay exactly so
    bad = _edited(bundle, tmp_path / "bad.tgz", edit)
    before = _snapshot(tmp_path)
    with pytest.raises(BundleError) as err:
        import_bundle(str(bad))
    msg = str(err.value)
    assert str(bad) in msg and all(w in msg for w in words), msg
    assert _snapshot(tmp_path) == before


def test_cli_prints_the_refusal_without_a_traceback(bundle, tmp_path, capsys):
    bad = _edited(bundle, tmp_path / "bad.tgz", _drop("key"))
    before = _snapshot(tmp_path)
    assert cli_main(["cache", "import", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(bad) in err and "'key'" in err, err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("fails", ["mkdir", "replace"])
def test_a_failure_while_installing_leaves_the_cache_as_it_was(bundle, tmp_path, monkeypatch, fails):
    """Verified, then the disk fails part way (creating a directory while staging, or
    renaming the files into place): what was written is taken back, and the error is
    the disk's, not a bundle refusal."""
    import_bundle(str(bundle))
    other = _edited(bundle, tmp_path / "second.tgz", _moved_to("B" * 52, key="ab" * 32))
    before = _snapshot(tmp_path)
    real, calls = getattr(os, fails), []

    def failing(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        if len(calls) == (4 if fails == "replace" else 1):
            raise OSError(28, "No space left on device")
        real(*args, **kwargs)

    monkeypatch.setattr(os, fails, failing)
    with pytest.raises(OSError, match="No space") as err:
        import_bundle(str(other))
    monkeypatch.setattr(os, fails, real)
    assert not isinstance(err.value, BundleError)
    assert _snapshot(tmp_path) == before


def test_manifest_and_members_are_bounded_before_they_are_read(bundle, tmp_path, monkeypatch):
    """Sizes come from the tar headers: an oversized member is refused unread."""
    big = [n for n, data in _members(bundle).items() if n != MANIFEST and len(data) > 1000]
    monkeypatch.setattr(_bundle, "MAX_MEMBER_BYTES", 1000)
    reads = []
    real = tarfile.TarFile.extractfile
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda self, m: reads.append(m.name) or real(self, m))
    with pytest.raises(BundleError) as err:
        import_bundle(str(bundle))
    msg = str(err.value)
    assert str(bundle) in msg and "bytes" in msg and "at most 1000" in msg, msg
    assert big and not set(big) & set(reads), "an oversized member must not be read"
    monkeypatch.setattr(_bundle, "MAX_MANIFEST_BYTES", 100)
    with pytest.raises(BundleError, match=f"{MANIFEST}.*at most 100"):
        import_bundle(str(bundle))


def _moved_to(artifact: str, **fields: Any) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    """Another variant: its artifact under another directory name, other entry fields."""
    def edit(m: dict[str, Any], members: dict[str, bytes]) -> None:
        old = _entry(m)["artifact"]
        for name in [n for n in members if n.startswith(f"artifacts/{old}/")]:
            new = name.replace(f"/{old}/", f"/{artifact}/")
            members[new] = members.pop(name)
            m["files"][new] = m["files"].pop(name)
        _entry(m).update(artifact=artifact, **fields)
    return edit


class _Zeros(io.RawIOBase):
    def __init__(self, n: int) -> None:
        self.n = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        k = min(len(b), self.n)
        b[:k] = bytes(k)
        self.n -= k
        return k


def test_a_small_bundle_with_a_1gib_member_is_refused_in_little_memory(bundle, tmp_path):
    """The issue's case: a few-MB bundle whose member inflates to 1 GiB, listed with its
    true hash. Refused from its tar header, not after reading it into memory."""
    members = _members(bundle)
    manifest = json.loads(members[MANIFEST])
    artifact = _entry(manifest)["artifact"]
    name, size = f"artifacts/{artifact}/axpy.cubin", 1 << 30
    zeros = hashlib.sha256()
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        zeros.update(chunk)
    manifest["files"][name] = _entry(manifest)["files"]["axpy.cubin"] = zeros.hexdigest()
    members[MANIFEST] = json.dumps(manifest).encode()
    path = tmp_path / "inflating.tgz"
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz, \
            tarfile.open(fileobj=gz, mode="w|") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = size if member == name else len(data)
            tar.addfile(info, _Zeros(size) if member == name else io.BytesIO(data))
    assert path.stat().st_size < 8 << 20
    before = _snapshot(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(BundleError) as err:
            import_bundle(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "axpy.cubin" in str(err.value) and str(path) in str(err.value)
    assert peak < 64 << 20, f"peak {peak} bytes while refusing"
    assert _snapshot(tmp_path) == before


def test_the_manifest_must_come_first_and_members_must_not_repeat(bundle, tmp_path):
    members = _members(bundle)
    reordered = dict(reversed(list(members.items())))
    with pytest.raises(BundleError, match=f"first member.*{MANIFEST}"):
        import_bundle(str(_write(tmp_path / "late.tgz", reordered)))
    dup = tmp_path / "dup.tgz"
    with tarfile.open(dup, "w:gz") as tar:
        for name, data in [*members.items(), next((n, d) for n, d in members.items() if n.endswith(".ptx"))]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match="twice"):
        import_bundle(str(dup))
    assert index.keys() == []


def test_a_valid_bundle_still_imports(bundle, tmp_path):
    res = import_bundle(str(bundle))
    assert res.entries == 1 and res.files == 8 and len(index.keys()) == 1
    again = import_bundle(str(bundle))  # importing twice is harmless
    assert again.entries == 1 and len(index.keys()) == 1
