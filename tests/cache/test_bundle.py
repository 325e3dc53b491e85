"""Bundles move compiled variants between machines, verified by hashes; list/stats/clear."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import tritonjit
from cache_support import SIG, TARGET, artifact_dirs
from tritonjit._bundle import BundleError, export_bundle, import_bundle
from tritonjit._disk_cache import index
from tritonjit.cli import main as cli_main


@pytest.fixture
def populated(caches, kernel_file):
    f = tritonjit.function(kernel_file(), "axpy")
    a = f.compile(SIG, target=TARGET)
    b = f.compile(SIG, target=TARGET, num_warps=8)
    return caches, (a, b)


def _move_to_fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "other-machine") -> Path:
    root = tmp_path / name
    monkeypatch.setenv("TRITON_CACHE_DIR", str(root))
    return root


def _rewrite(src: Path, dst: Path, edit) -> None:
    with tarfile.open(src) as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin:
            data = tin.extractfile(m).read()
            name, data = edit(m.name, data)
            if name is None:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


def test_export_import_roundtrip_serves_warm_hits(populated, tmp_path, monkeypatch, kernel_file, compile_counter):
    _, (a, b) = populated
    bundle = tmp_path / "variants.tgz"
    res = export_bundle(str(bundle))
    assert res.entries == 2 and res.files > 2 and not res.skipped
    root = _move_to_fresh_cache(tmp_path, monkeypatch)
    imp = import_bundle(str(bundle), expect_sha256=res.sha256)
    assert imp.entries == 2 and imp.triton_matches
    assert len(index.keys()) == 2 and len(artifact_dirs(root)) == 2
    n = len(compile_counter)
    f = tritonjit.function(kernel_file(), "axpy")
    a2, b2 = f.compile(SIG, target=TARGET), f.compile(SIG, target=TARGET, num_warps=8)
    assert len(compile_counter) == n, "imported variants must be served without compiling"
    assert (a2.binary, b2.binary) == (a.binary, b.binary)
    assert a2.cache_dir.startswith(str(root))
    # Triton's own group files were relocated, so Triton finds the artifacts too
    grp = next(Path(a2.cache_dir).glob("__grp__*.json"))
    assert all(p.startswith(str(root)) for p in json.loads(grp.read_text())["child_paths"].values())


@pytest.mark.parametrize("tamper", ["flip_binary", "extra_member", "drop_member", "path_escape", "truncate"])
def test_tampered_bundle_is_refused_whole(populated, tmp_path, monkeypatch, tamper):
    bundle, bad = tmp_path / "ok.tgz", tmp_path / "bad.tgz"
    export_bundle(str(bundle))
    if tamper == "truncate":
        bad.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    else:
        state = {"done": False}

        def edit(name, data):
            if tamper == "flip_binary" and name.endswith(".cubin") and not state["done"]:
                state["done"] = True
                return name, data[:-1] + bytes([data[-1] ^ 0xFF])
            if tamper == "drop_member" and name.endswith(".ptx") and not state["done"]:
                state["done"] = True
                return None, data
            return name, data

        _rewrite(bundle, bad, edit)
        if tamper in ("extra_member", "path_escape"):
            with tarfile.open(bad) as t:
                members = [(m, t.extractfile(m).read()) for m in t]
            extra = "artifacts/XYZ/evil.cubin" if tamper == "extra_member" else "../../escape.txt"
            with tarfile.open(bad, "w:gz") as t:
                for m, data in members + [(tarfile.TarInfo(extra), b"evil")]:
                    m.size = len(data)
                    t.addfile(m, io.BytesIO(data))
            if tamper == "path_escape":  # listed in the manifest, with its true hash: still refused
                _list_member(bad, extra, b"evil")
    root = _move_to_fresh_cache(tmp_path, monkeypatch)
    with pytest.raises(BundleError, match="refus|truncated|not a readable"):
        import_bundle(str(bad))
    assert index.keys() == [] and artifact_dirs(root) == [], "nothing may be installed from a refused bundle"


def _list_member(path: Path, member: str, data: bytes) -> None:
    import hashlib

    with tarfile.open(path) as t:
        members = {m.name: t.extractfile(m).read() for m in t}
    manifest = json.loads(members["tritonjit-bundle.json"])
    manifest["files"][member] = hashlib.sha256(data).hexdigest()
    members["tritonjit-bundle.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w:gz") as t:
        for name, d in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(d)
            t.addfile(info, io.BytesIO(d))


def test_expected_digest_catches_a_rewritten_manifest(populated, tmp_path, monkeypatch):
    bundle = tmp_path / "b.tgz"
    export_bundle(str(bundle))
    _move_to_fresh_cache(tmp_path, monkeypatch)
    with pytest.raises(BundleError, match="digest"):
        import_bundle(str(bundle), expect_sha256="0" * 64)


def test_cli_list_stats_export_import_clear(populated, tmp_path, monkeypatch, capsys):
    root, (a, _) = populated
    assert cli_main(["cache", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["kernel"], r["signature"], r["target"], r["problem"]) for r in rows} == {("axpy", SIG, TARGET, None)}
    assert sorted(r["options"].get("num_warps", 4) for r in rows) == [4, 8]
    assert cli_main(["cache", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entries"] == 2 and stats["kernels"] == 1 and stats["by_target"] == {TARGET: 2} and stats["bytes"] > 0
    bundle = tmp_path / "cli.tgz"
    assert cli_main(["cache", "export", str(bundle), "--json"]) == 0
    digest = json.loads(capsys.readouterr().out)["sha256"]
    assert cli_main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"entries": 2, "artifact_dirs": 2, "not_removed": []}
    assert index.keys() == [] and artifact_dirs(root) == []
    assert cli_main(["cache", "import", str(bundle), "--sha256", digest, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 2
    assert len(index.keys()) == 2
    assert cli_main(["cache", "list"]) == 0 and "axpy" in capsys.readouterr().out
    assert cli_main(["cache", "import", str(bundle), "--sha256", "f" * 64]) == 1  # clear error, exit 1
    assert "digest" in capsys.readouterr().err
