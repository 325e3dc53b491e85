"""Cache bundles and cache housekeeping: export/import, list, stats, clear.

A bundle is a tar.gz holding ``tritonjit-bundle.json`` (the index entries and the
sha256 of every file; its first member) and the artifact directories those entries
point at, under ``artifacts/<dir>/<file>``. A bundle comes from another machine, so
import trusts nothing in it before it has checked all of it, writing nothing:

- the manifest, at most ``MAX_MANIFEST_BYTES``, checked whole first
  (``_bundle_manifest``): its structure, and every entry field that becomes a path
  (key, artifact, stem, binary extension, file names) kept inside the caches;
- each member's tar header before its data: a regular file, listed, present once,
  within ``MAX_MEMBER_BYTES`` (``MAX_TOTAL_BYTES`` for all), so a small bundle that
  inflates to gigabytes is refused unread;
- each member's data against its sha256, read in chunks.

Any failure refuses the whole bundle (BundleError naming the bundle, the entry and
the field). Only then are the files staged beside their places and renamed in,
with a failure part way (a full disk) taking back all of it: import is all or
nothing. The bundle's own digest (sha256 of its manifest, which pins every file) is
printed on export and can be required on import (``--sha256``), which also catches a
manifest edited to match tampered files.

Artifacts are installed into the local Triton cache, with Triton's group files
rewritten to point at their new location, so Triton's own launcher finds them too;
entries only hit on a machine with the same Triton build, backend and target (that is
in their key).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ._bundle_manifest import (
    FORMAT,
    MANIFEST,
    BundleError,
    Manifest,
    member_dir,
    member_name_problem,
    parse_manifest,
    refuse,
)
from ._disk_cache import (
    atomic_write,
    cache_root,
    entry_problem,
    index,
    remove_all,
    remove_tree,
    sha256_bytes,
    triton_cache_dir,
    triton_fingerprint,
)

__all__ = ["FORMAT", "MANIFEST", "BundleError", "ExportResult", "ImportResult", "clear", "export_bundle",
           "import_bundle", "list_entries", "stats", "verify_bundle"]

#: bounds on what a bundle may make tritonjit read, checked from the tar headers first
MAX_MANIFEST_BYTES = 16 << 20  # the manifest, and each of Triton's group files
MAX_MEMBER_BYTES = 256 << 20  # one artifact file
MAX_TOTAL_BYTES = 4 << 30  # all of a bundle's files
_CHUNK = 1 << 20


@dataclass
class ExportResult:
    path: str
    entries: int
    files: int
    bytes: int
    sha256: str
    skipped: list[str]


@dataclass(frozen=True)
class VerifiedBundle:
    """What :func:`verify_bundle` read: the checked manifest, its digest, each member's size."""

    manifest: Manifest
    digest: str
    sizes: dict[str, int]


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
        unportable = _unportable(entry)
        if unportable:
            skipped.append(f"{entry.get('kernel')}[{entry.get('signature')}]: {unportable}")
            continue
        chosen.append(entry)
    return chosen, skipped


def _unportable(entry: dict[str, Any]) -> str | None:
    """Why import would refuse this entry (export writes only what import takes), else None."""
    problem = entry_problem({k: v for k, v in entry.items() if k != "checksum"}, portable=True)
    if problem is not None:
        return f"field '{problem[0]}' {problem[1]}"
    for name in entry["files"]:
        problem_name = member_name_problem(f"artifacts/{entry['artifact']}/{name}")
        if problem_name is not None:
            return problem_name
    return None


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
    _write_bundle(path, buf.getvalue())
    return ExportResult(path, len(entries), len(blobs), len(buf.getvalue()), sha256_bytes(raw), skipped)


def _write_bundle(path: str, data: bytes) -> None:
    """Write the bundle atomically; an error names ``path`` as the user gave it, not the
    temporary file beside it that the write goes through."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory; expected the path of the bundle file to write", path)
    try:
        atomic_write(os.path.abspath(path), data)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the bundle: {exc.strerror or exc}", path) from None


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def verify_bundle(path: str, expect_sha256: str | None = None) -> VerifiedBundle:
    """Read the bundle at ``path`` through once and write nothing: the manifest
    checked whole first, then each member's header (listed, once, within the size
    limits) before its data, then its data against its sha256. Raises BundleError."""
    with _reading(path) as tar:
        raw = _read_manifest(path, tar)
        digest = sha256_bytes(raw)
        if expect_sha256 and digest != expect_sha256.lower():
            raise refuse(path, f"its digest is {digest}, expected {expect_sha256}")
        manifest = parse_manifest(path, raw)
        sizes: dict[str, int] = {}
        while (info := _next(path, tar)) is not None:
            _check_header(path, info, manifest, sizes)
            data = _hash_member(path, tar, info, manifest.files[info.name])
            if data is not None:
                _group_children(path, info.name, data, manifest)
    missing = sorted(set(manifest.files) - set(sizes))
    if missing:
        raise refuse(path, f"'{missing[0]}' is listed in its manifest but missing")
    return VerifiedBundle(manifest, digest, sizes)


@contextlib.contextmanager
def _reading(path: str) -> Iterator[tarfile.TarFile]:
    """The bundle as a tar stream, read front to back with nothing kept. A missing file
    stays FileNotFoundError; a damaged one raises BundleError (here and in ``_next``
    and ``_chunks``, so that an error writing the cache is never taken for one)."""
    with open(path, "rb") as f:
        try:
            tar = tarfile.open(fileobj=f, mode="r|*")
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from None
        with tar:
            yield tar


_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


def _unreadable(path: str, exc: BaseException) -> BundleError:
    return refuse(path, f"it is not a readable tar.gz ({type(exc).__name__}: {exc}); truncated or not a "
                        "tritonjit bundle")


def _next(path: str, tar: tarfile.TarFile) -> tarfile.TarInfo | None:
    """The next member's header (its data skipped unread if it was not read)."""
    try:
        return tar.next()
    except _READ_ERRORS as exc:
        raise _unreadable(path, exc) from None


def _read_manifest(path: str, tar: tarfile.TarFile) -> bytes:
    info = _next(path, tar)
    if info is None or info.name != MANIFEST:
        raise refuse(path, f"its first member must be {MANIFEST}, got {info.name if info else 'no member'!r}; "
                           "not a tritonjit bundle")
    if not info.isfile():
        raise refuse(path, f"member '{MANIFEST}' is not a regular file")
    if info.size > MAX_MANIFEST_BYTES:
        raise refuse(path, f"{MANIFEST} is {info.size} bytes; a manifest may be at most {MAX_MANIFEST_BYTES} bytes")
    return b"".join(_chunks(path, tar, info))


def _check_header(path: str, info: tarfile.TarInfo, manifest: Manifest, sizes: dict[str, int]) -> None:
    """A member's tar header, before any of its data is read."""
    name = info.name
    if name in sizes or name == MANIFEST:
        raise refuse(path, f"it holds '{name}' twice")
    if not info.isfile():
        raise refuse(path, f"member '{name}' is not a regular file")
    if name not in manifest.files:
        raise refuse(path, f"it holds a file its manifest does not list: '{name}'")
    limit = min(MAX_MEMBER_BYTES, MAX_MANIFEST_BYTES) if _is_group(name) else MAX_MEMBER_BYTES
    if info.size > limit:
        raise refuse(path, f"member '{name}' is {info.size} bytes; a member may be at most {limit} bytes")
    sizes[name] = info.size
    total = sum(sizes.values())
    if total > MAX_TOTAL_BYTES:
        raise refuse(path, f"its members hold more than {MAX_TOTAL_BYTES} bytes (at least {total})")


def _chunks(path: str, tar: tarfile.TarFile, info: tarfile.TarInfo) -> Iterator[bytes]:
    """The data of the current member, in chunks of at most ``_CHUNK`` bytes."""
    try:
        f = tar.extractfile(info)
        if f is None:
            raise refuse(path, f"member '{info.name}' cannot be read")
        while chunk := f.read(_CHUNK):
            yield chunk
    except _READ_ERRORS as exc:
        raise _unreadable(path, exc) from None


def _hash_member(path: str, tar: tarfile.TarFile, info: tarfile.TarInfo, expected: str) -> bytes | None:
    """Check a member against its sha256, reading it in chunks; a group file's data back."""
    h = hashlib.sha256()
    kept: list[bytes] | None = [] if _is_group(info.name) else None
    for chunk in _chunks(path, tar, info):
        h.update(chunk)
        if kept is not None:
            kept.append(chunk)
    if h.hexdigest() != expected:
        raise refuse(path, f"'{info.name}' does not match its sha256 (tampered or corrupt)")
    return None if kept is None else b"".join(kept)


def _is_group(member: str) -> bool:
    name = member.rsplit("/", 1)[-1]
    return name.startswith("__grp__") and name.endswith(".json")


def _group_children(path: str, member: str, data: bytes, manifest: Manifest) -> dict[str, str]:
    """Triton's group file ({"child_paths": {child: path}}), every child a file of its
    own directory in the bundle; raises BundleError."""
    prefix = member.rsplit("/", 1)[0] + "/"
    try:
        children = json.loads(data)["child_paths"]
        ok = isinstance(children, dict) and all(
            isinstance(c, str) and isinstance(p, str) and prefix + os.path.basename(p) in manifest.files
            for c, p in children.items())
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise refuse(path, f"'{member}' is not a Triton group file whose children are files of its own directory")
    return children


def import_bundle(path: str, expect_sha256: str | None = None) -> ImportResult:
    """Verify the bundle at ``path`` whole, then install its artifacts and entries,
    all or nothing: a refused bundle, or a failure while installing, leaves the caches
    exactly as they were."""
    verified = verify_bundle(path, expect_sha256)
    manifest = verified.manifest
    install = _Install()
    try:
        with _reading(path) as tar:
            if sha256_bytes(_read_manifest(path, tar)) != verified.digest:
                raise refuse(path, "it changed while it was being imported")
            names = []
            relocated: dict[str, str] = {}  # group files rewritten for this machine: their new sha256
            while (info := _next(path, tar)) is not None:
                names.append(info.name)
                digest = _stage_member(path, tar, info, verified, install)
                if digest is not None:
                    relocated[info.name] = digest
        if sorted(names) != sorted(verified.sizes):
            raise refuse(path, "it changed while it was being imported")
        for entry in manifest.entries:
            files = {name: relocated.get(f"artifacts/{entry['artifact']}/{name}", digest)
                     for name, digest in entry["files"].items()}
            install.stage(index.entry_path(entry["key"]), [index.entry_bytes(dict(entry, files=files))])
        install.commit()
    except BaseException:
        install.rollback()
        raise
    return ImportResult(len(manifest.entries), len(verified.sizes), verified.digest,
                        manifest.triton == triton_fingerprint(), manifest.triton)


def _stage_member(path: str, tar: tarfile.TarFile, info: tarfile.TarInfo, verified: VerifiedBundle,
                  install: _Install) -> str | None:
    """Write one member beside its place in Triton's cache, checked again as it is written.
    Returns the sha256 of a group file as rewritten for this machine (its paths are
    local), which the installed entry lists so that the artifact verifies here; else None."""
    if verified.sizes.get(info.name) != info.size or not info.isfile():
        raise refuse(path, "it changed while it was being imported")
    target_dir = os.path.join(triton_cache_dir(), member_dir(info.name))
    final = os.path.join(target_dir, info.name.rsplit("/", 1)[1])
    expected = verified.manifest.files[info.name]
    if _is_group(info.name):
        data = b"".join(_chunks(path, tar, info))
        if sha256_bytes(data) != expected:
            raise refuse(path, "it changed while it was being imported")
        children = _group_children(path, info.name, data, verified.manifest)
        relocated = {c: os.path.join(target_dir, os.path.basename(p)) for c, p in children.items()}
        return install.stage(final, [json.dumps({**json.loads(data), "child_paths": relocated}).encode()])
    if install.stage(final, _chunks(path, tar, info)) != expected:
        raise refuse(path, "it changed while it was being imported")
    return None


class _Install:
    """The files one import writes, all or nothing. Each is staged as a temporary file
    beside its place, then all are renamed into place; a file it replaces is kept
    (hard-linked) until the end, so ``rollback`` can put back exactly what was there."""

    def __init__(self) -> None:
        self.staged: list[tuple[str, str]] = []  # (temporary, final)
        self.placed: list[tuple[str, str | None]] = []  # (final, the replaced file's keeper or None)
        self.dirs: list[str] = []  # directories this import created, parents first

    def stage(self, final: str, chunks: Iterable[bytes]) -> str:
        """Write ``chunks`` to a temporary file beside ``final``; their sha256."""
        self._makedirs(os.path.dirname(final))
        tmp = f"{final}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        self.staged.append((tmp, final))
        h = hashlib.sha256()
        with open(tmp, "wb") as f:
            for chunk in chunks:
                h.update(chunk)
                f.write(chunk)
        return h.hexdigest()

    def _makedirs(self, d: str) -> None:
        missing = []
        while d and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        for m in reversed(missing):
            os.mkdir(m)
            self.dirs.append(m)

    def commit(self) -> None:
        """Rename every staged file into place; replaced files are kept until all are."""
        while self.staged:
            tmp, final = self.staged[0]
            keeper = None
            if os.path.exists(final):
                keeper = f"{final}.keep.{os.getpid()}.{uuid.uuid4().hex[:8]}"
                _keep(final, keeper)
            self.placed.append((final, keeper))
            os.replace(tmp, final)
            self.staged.pop(0)
        for _, keeper in self.placed:
            if keeper is not None:
                with contextlib.suppress(OSError):
                    os.unlink(keeper)
        self.placed.clear()

    def rollback(self) -> None:
        """Take back everything this import wrote (best effort: never masks the error)."""
        for tmp, _ in self.staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for final, keeper in reversed(self.placed):
            with contextlib.suppress(OSError):
                if keeper is None:
                    os.unlink(final)
                else:
                    os.replace(keeper, final)
        for d in reversed(self.dirs):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        self.staged, self.placed, self.dirs = [], [], []


def _keep(path: str, keeper: str) -> None:
    """A second name for ``path``'s current content (a hard link, else a copy)."""
    try:
        os.link(path, keeper)
    except OSError:
        shutil.copy2(path, keeper)


# ---- list / stats / clear ---------------------------------------------------------------------------
def list_entries() -> list[dict[str, Any]]:
    """Every index entry, with its artifact's size and whether it verifies."""
    rows: list[dict[str, Any]] = []
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
        "by_target": by_target, "autotune_files": len(tuned), "remote": remote_stats(),
    }


def remote_stats() -> dict[str, Any] | None:
    """The shared remote cache's fleet-wide counters (hits, misses, stores, compiles,
    rejected) and whether it answers; None when ``TRITONJIT_REMOTE_CACHE`` is unset."""
    from . import _remote_cache

    try:
        remote = _remote_cache.active()
    except ValueError as exc:  # a malformed URL or timeout
        return {"url": "", "reachable": False, "error": str(exc)}
    return None if remote is None else remote.server_stats()


def clear(artifacts: bool = True) -> dict[str, Any]:
    """Remove the index, the locks and the autotune store; with ``artifacts``, the
    Triton cache directories the index points at as well.

    Counts only what is gone afterwards; what read-only storage kept is listed under
    ``not_removed`` ({"path", "error"} each), so the caller can say so and fail."""
    failed: list[tuple[str, str]] = []
    removed_artifacts = 0
    if artifacts:
        dirs = {index.artifact_dir(entry) for _, entry, _ in index.entries() if entry is not None}
        for d in sorted(dirs):
            if os.path.isdir(d):
                failed += remove_tree(d)
                if not os.path.isdir(d):
                    removed_artifacts += 1
    entries = len(index.keys())
    root = cache_root()
    for sub in ("index", "locks", "autotune"):
        failed += remove_all(os.path.join(root, sub))
    entries -= len(index.keys())
    return {"entries": entries, "artifact_dirs": removed_artifacts,
            "not_removed": [{"path": p, "error": e} for p, e in failed]}
