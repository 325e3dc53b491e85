"""Cache bundles and cache housekeeping: export/import, list, stats, clear.

A bundle is a tar.gz holding ``tritonjit-bundle.json`` (the index entries and the
sha256 of every file) and the artifact directories those entries point at, under
``artifacts/<dir>/<file>``. Import checks every member against its hash, the member
names against path tricks, and nothing is written unless all of it verifies: a
tampered or truncated bundle is refused whole. The bundle's own digest (sha256 of
its manifest, which pins every file) is printed on export and can be required on
import (``--sha256``), which also catches a manifest edited to match tampered files.

Artifacts are installed into the local Triton cache, with Triton's group files
rewritten to point at their new location, so Triton's own launcher finds them too;
entries only hit on a machine with the same Triton build, backend and target (that is
in their key).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tarfile
import time
from dataclasses import dataclass
from typing import Any

from ._disk_cache import (
    atomic_write,
    cache_root,
    index,
    remove_tree,
    sha256_bytes,
    triton_cache_dir,
    triton_fingerprint,
)

FORMAT = 1
MANIFEST = "tritonjit-bundle.json"
_SAFE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class BundleError(ValueError):
    """A bundle that cannot be imported: tampered, truncated or malformed."""


@dataclass
class ExportResult:
    path: str
    entries: int
    files: int
    bytes: int
    sha256: str
    skipped: list[str]


@dataclass
class ImportResult:
    entries: int
    files: int
    sha256: str
    triton_matches: bool
    bundle_triton: str


def _select(kernel: str | None = None, target: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    chosen, skipped = [], []
    for key, entry, problem in index.entries():
        if entry is None:
            skipped.append(f"{key[:12]}: {problem}")
            continue
        if kernel and entry.get("kernel") != kernel:
            continue
        if target and entry.get("target") != target:
            continue
        bad = index.verify(entry)
        if bad:
            skipped.append(f"{entry.get('kernel')}[{entry.get('signature')}]: {bad}")
            continue
        if os.path.isabs(entry["artifact"]):
            skipped.append(f"{entry.get('kernel')}[{entry.get('signature')}]: artifact outside Triton's cache")
            continue
        chosen.append(entry)
    return chosen, skipped


def export_bundle(path: str, kernel: str | None = None, target: str | None = None) -> ExportResult:
    """Write the (verified) index entries and their artifacts to a bundle at ``path``."""
    entries, skipped = _select(kernel, target)
    files: dict[str, str] = {}
    blobs: dict[str, bytes] = {}
    for entry in entries:
        directory = index.artifact_dir(entry)
        for name in entry["files"]:
            member = f"artifacts/{entry['artifact']}/{name}"
            if member in blobs:
                continue
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
            blobs[member] = data
            files[member] = sha256_bytes(data)
    manifest = {
        "format": FORMAT, "created": time.time(), "triton": triton_fingerprint(),
        "entries": [{k: v for k, v in e.items() if k != "checksum"} for e in entries], "files": files,
    }
    raw = json.dumps(manifest, sort_keys=True, indent=1).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        _add(tar, MANIFEST, raw)
        for member in sorted(blobs):
            _add(tar, member, blobs[member])
    atomic_write(os.path.abspath(path), buf.getvalue())
    return ExportResult(path, len(entries), len(blobs), len(buf.getvalue()), sha256_bytes(raw), skipped)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def read_bundle(path: str, expect_sha256: str | None = None) -> tuple[dict[str, Any], dict[str, bytes], str]:
    """(manifest, {member: data}, digest) of a bundle, every file verified; raises BundleError."""
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members: dict[str, bytes] = {}
            for info in tar:
                if not info.isfile():
                    raise BundleError(f"bundle '{path}': member '{info.name}' is not a regular file")
                f = tar.extractfile(info)
                if f is None:
                    raise BundleError(f"bundle '{path}': member '{info.name}' cannot be read")
                members[info.name] = f.read()
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, BundleError):
            raise
        if isinstance(exc, FileNotFoundError):
            raise
        raise BundleError(f"bundle '{path}' is not a readable tar.gz ({type(exc).__name__}: {exc}); "
                          "truncated or not a tritonjit bundle") from None
    raw = members.pop(MANIFEST, None)
    if raw is None:
        raise BundleError(f"bundle '{path}' has no {MANIFEST}; not a tritonjit bundle")
    digest = sha256_bytes(raw)
    if expect_sha256 and digest != expect_sha256.lower():
        raise BundleError(f"bundle '{path}': its digest is {digest}, expected {expect_sha256}; refusing it")
    try:
        manifest = json.loads(raw)
        files = manifest["files"]
        entries = manifest["entries"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"bundle '{path}': malformed {MANIFEST} ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise BundleError(f"bundle '{path}' has format {manifest.get('format')}, this tritonjit reads {FORMAT}")
    extra = set(members) - set(files)
    if extra:
        raise BundleError(f"bundle '{path}' holds files its manifest does not list: {sorted(extra)[:3]}; refusing it")
    for member, digest_f in files.items():
        _check_member_name(path, member)
        data = members.get(member)
        if data is None:
            raise BundleError(f"bundle '{path}': '{member}' is listed but missing; refusing it")
        if sha256_bytes(data) != digest_f:
            raise BundleError(f"bundle '{path}': '{member}' does not match its sha256 (tampered or corrupt); "
                              "refusing the whole bundle")
    for entry in entries:
        for name, d in entry.get("files", {}).items():
            if files.get(f"artifacts/{entry.get('artifact')}/{name}") != d:
                raise BundleError(f"bundle '{path}': entry {entry.get('kernel')} lists '{name}' with another "
                                  "hash than the bundle holds; refusing it")
    return manifest, members, digest


def _check_member_name(path: str, member: str) -> None:
    parts = member.split("/")
    if len(parts) != 3 or parts[0] != "artifacts" or not all(_SAFE.match(p) and p not in (".", "..")
                                                             for p in parts[1:]):
        raise BundleError(f"bundle '{path}': unsafe or unexpected member name '{member}'; refusing it")


def import_bundle(path: str, expect_sha256: str | None = None) -> ImportResult:
    """Verify the bundle at ``path`` whole, then install its artifacts and entries."""
    manifest, members, digest = read_bundle(path, expect_sha256)
    root = triton_cache_dir()
    written = 0
    for member, data in sorted(members.items()):
        _, directory, name = member.split("/")
        target_dir = os.path.join(root, directory)
        if name.startswith("__grp__") and name.endswith(".json"):
            data = _relocate_group(data, target_dir)
        atomic_write(os.path.join(target_dir, name), data)
        written += 1
    for entry in manifest["entries"]:
        index.write_entry(entry)
    here = triton_fingerprint()
    return ImportResult(len(manifest["entries"]), written, digest, manifest.get("triton") == here,
                        str(manifest.get("triton")))


def _relocate_group(data: bytes, target_dir: str) -> bytes:
    """Triton's group file lists absolute child paths: point them at ``target_dir``."""
    try:
        grp = json.loads(data)
        children = grp.get("child_paths", {})
        grp["child_paths"] = {c: os.path.join(target_dir, os.path.basename(p)) for c, p in children.items()}
        return json.dumps(grp).encode()
    except (ValueError, AttributeError):
        return data


# ---- list / stats / clear ---------------------------------------------------------------------------
def list_entries() -> list[dict[str, Any]]:
    """Every index entry, with its artifact's size and whether it verifies."""
    rows = []
    for key, entry, problem in index.entries():
        if entry is None:
            rows.append({"key": key, "problem": problem})
            continue
        directory = index.artifact_dir(entry)
        size = 0
        for name in entry["files"]:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(directory, name))
        rows.append({
            "key": key, "kernel": entry.get("kernel"), "signature": entry.get("signature"),
            "target": entry.get("target"), "backend": entry.get("backend"), "options": entry.get("options"),
            "bytes": size, "created": entry.get("created"), "artifact": entry.get("artifact"),
            "problem": index.verify(entry),
        })
    return rows


def stats() -> dict[str, Any]:
    rows = list_entries()
    by_target: dict[str, int] = {}
    for r in rows:
        if r.get("target"):
            by_target[r["target"]] = by_target.get(r["target"], 0) + 1
    tune_dir = os.path.join(cache_root(), "autotune")
    tuned = [n for n in os.listdir(tune_dir) if n.endswith(".json")] if os.path.isdir(tune_dir) else []
    return {
        "index_dir": cache_root(), "triton_cache_dir": triton_cache_dir(), "triton": triton_fingerprint(),
        "entries": sum(1 for r in rows if "kernel" in r), "broken": sum(1 for r in rows if r.get("problem")),
        "kernels": len({r["kernel"] for r in rows if r.get("kernel")}), "bytes": sum(r.get("bytes", 0) for r in rows),
        "by_target": by_target, "autotune_files": len(tuned),
    }


def clear(artifacts: bool = True) -> dict[str, int]:
    """Remove the index, the locks and the autotune store; with ``artifacts``, the
    Triton cache directories the index points at as well."""
    removed_artifacts = 0
    entries = 0
    if artifacts:
        dirs: set[str] = set()
        for _, entry, _ in index.entries():
            if entry is not None:
                dirs.add(index.artifact_dir(entry))
        for d in dirs:
            if os.path.isdir(d):
                remove_tree(d)
                removed_artifacts += 1
    entries = len(index.keys())
    root = cache_root()
    for sub in ("index", "locks", "autotune"):
        path = os.path.join(root, sub)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
    return {"entries": entries, "artifact_dirs": removed_artifacts}

