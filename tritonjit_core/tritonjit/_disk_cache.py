"""The tritonjit index: a cheap key -> an artifact already in Triton's cache.

Triton's own cache lookup first hashes Triton's sources and its backend
(``triton_key()``, about 0.5 s in a fresh process) before it can even look for an
artifact. The index skips that: its key is computed from what is at hand in a few
microseconds (the kernel's source hash, which covers its callees and the constexpr
globals it reads, the Triton version and build, backend, target, options, signature
and Triton's cache-invalidating environment variables), and it points at the
artifact directory that ``triton.compile`` wrote. A hit rebuilds the
:class:`CompiledVariant` straight from the metadata JSON and the binary, without
``triton.compile`` and without ``triton_key``.

Safety: entries and artifacts are written atomically (temp file + ``os.replace``);
each entry carries a checksum of itself and sha256 hashes of the artifact's files,
so a truncated or corrupt entry or artifact (or one that lost a file) is detected,
reported once as a :class:`CacheCorruptionWarning` and rebuilt; compiles of one
variant by several processes are serialized by a file lock so they leave one
artifact. A cache directory that cannot be written is read as usual and costs only
the entries it cannot take (one :class:`CacheWriteWarning`), never a compile.

Layout, under ``$TRITONJIT_CACHE_DIR`` (default: ``<Triton cache dir>/tritonjit``)::

    index/<k[:2]>/<key>.json     one entry per variant
    locks/<key[:16]>.lock        compile locks
    autotune/<name>-<h>.json     best autotune configs (see _autotune.py)

``TRITONJIT_DISK_CACHE=0`` turns the index off (Triton's cache still works).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

from ._backend import CompiledVariant

log = logging.getLogger(__name__)

#: bump when the entry layout or the key recipe changes: old entries are then ignored
FORMAT = 1


class CacheCorruptionWarning(UserWarning):
    """An index entry or a cached artifact failed its hash check, or lost a file, and is rebuilt."""


class CacheWriteWarning(UserWarning):
    """tritonjit's cache directory cannot be written: compiles go on without the index
    (and its compile lock), so the next process compiles those variants again."""


# ---- where things live ------------------------------------------------------------------------
def triton_cache_dir() -> str:
    """Triton's persistent cache directory (``TRITON_CACHE_DIR`` honoured)."""
    try:
        from triton import knobs

        d = knobs.cache.dir
        if d:
            return str(d)
    except Exception:  # a Triton without knobs
        pass
    return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


def cache_root() -> str:
    """tritonjit's own cache directory: the index, the locks and the autotune store."""
    return os.environ.get("TRITONJIT_CACHE_DIR") or os.path.join(triton_cache_dir(), "tritonjit")


def enabled() -> bool:
    return os.environ.get("TRITONJIT_DISK_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


# ---- the key ----------------------------------------------------------------------------------
_fingerprint: str | None = None


def triton_fingerprint() -> str:
    """The installed Triton, cheaply: its version string plus the identity of its
    compiled library -- the sha256 the wheel's RECORD lists for it (the same on every
    machine with that wheel, so bundles travel), else its size and mtime (a source
    build). Replaces ``triton_key()``, which hashes every Triton source file."""
    global _fingerprint
    if _fingerprint is None:
        triton = sys.modules.get("triton")
        version = getattr(triton, "__version__", None)
        if version is None:
            from importlib.metadata import version as dist_version

            version = dist_version("triton")
        build = ""
        init = getattr(triton, "__file__", None)
        try:
            if init:
                pkg = os.path.dirname(init)
                build = _record_hash(pkg, str(version)) or _stat_id(os.path.join(pkg, "_C"))
        except Exception:  # nothing found: the version alone
            pass
        _fingerprint = f"{version}+{build}" if build else str(version)
    return _fingerprint


def _record_hash(pkg: str, version: str) -> str:
    record = os.path.join(os.path.dirname(pkg), f"triton-{version}.dist-info", "RECORD")
    try:
        with open(record, encoding="utf-8") as f:
            for line in f:
                if line.startswith("triton/_C/libtriton.") and ",sha256=" in line:
                    return line.split(",")[1]
    except OSError:
        pass
    return ""


def _stat_id(lib_dir: str) -> str:
    for entry in sorted(os.listdir(lib_dir)):
        if entry.startswith("libtriton"):
            st = os.stat(os.path.join(lib_dir, entry))
            return f"{st.st_size}:{st.st_mtime_ns}"
    return ""


def target_str(target: Any) -> str:
    """``cuda:90``-style name of a target (GPUTarget or anything with backend/arch)."""
    backend = getattr(target, "backend", None)
    if backend is None:
        return str(target)
    return f"{backend}:{getattr(target, 'arch', '')}"


def _target_key(target: Any) -> list[Any]:
    if hasattr(target, "backend"):
        return [target.backend, str(target.arch), getattr(target, "warp_size", None)]
    return [str(target)]


def _env_vars() -> list[tuple[str, str]]:
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars

        return sorted(get_cache_invalidating_env_vars().items())
    except Exception:
        return []


def variant_key(src: Any, backend: str, target: Any, options: dict[str, Any], signature: str) -> str:
    """The index key of one variant.

    ``src.hash()`` (Triton's ASTSource) covers the kernel's ``cache_key`` -- its
    source, the cache keys of every @triton.jit function it calls, the constexpr
    globals it reads -- plus the argument types, constants and alignment hints.
    """
    parts = {
        "format": FORMAT,
        "source": src.hash() if hasattr(src, "hash") else repr(src),
        "triton": triton_fingerprint(),
        "backend": backend,
        "target": _target_key(target),
        "options": sorted((k, repr(v)) for k, v in options.items()),
        "signature": signature,
        "env": _env_vars(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


# ---- small file helpers -----------------------------------------------------------------------
def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """An exclusive inter-process lock (flock; released by the OS if the holder dies).
    Where flock does not exist, a no-op: Triton's own writes stay atomic anyway."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _checksum(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "checksum"}
    return sha256_bytes(json.dumps(body, sort_keys=True).encode())


class _LazyAsm(dict):
    """``CompiledVariant.asm`` of an index hit: the binary now, other IRs read on demand."""

    def __init__(self, directory: str, stem: str, initial: dict[str, Any]) -> None:
        super().__init__(initial)
        self._directory = directory
        self._stem = stem

    def __missing__(self, ext: str) -> Any:
        path = os.path.join(self._directory, f"{self._stem}.{ext}")
        try:
            with open(path) as f:
                value = f.read()
        except (OSError, UnicodeDecodeError):
            raise KeyError(ext) from None
        self[ext] = value
        return value


# ---- what an entry may hold ---------------------------------------------------------------------
_HEX64 = re.compile(r"[0-9a-f]{64}")
_EXT = re.compile(r"[A-Za-z0-9_]{1,32}")
_SCALARS = (int, float, str, bool, type(None))
ENTRY_FIELDS = ("format", "key", "kernel", "signature", "backend", "target", "options", "triton", "artifact",
                "stem", "binary_ext", "hash", "files", "created")


def is_plain_name(v: Any) -> bool:
    """One file or directory name: joined to a directory, it stays in that directory."""
    return (isinstance(v, str) and 0 < len(v) <= 255 and v not in (".", "..")
            and not any(c in v for c in ("/", "\\", "\0", os.sep)))


def _is_sha256(v: Any) -> bool:
    return isinstance(v, str) and _HEX64.fullmatch(v) is not None


def _field_problem(entry: dict[str, Any], field: str, portable: bool) -> str | None:
    """What is wrong with one field of an entry, and what it should be (None: nothing)."""
    v = entry[field]
    if field == "format":
        return None if v == FORMAT and type(v) is int else _want(f"{FORMAT} (this tritonjit's index format)", v)
    if field == "key":
        return None if _is_sha256(v) else _want("a variant key: a sha256 digest, 64 lowercase hex digits", v)
    if field in ("artifact", "stem"):
        if is_plain_name(v) or (field == "artifact" and not portable and isinstance(v, str) and os.path.isabs(v)):
            return None
        where = "a directory name inside Triton's cache" if field == "artifact" else "a file name"
        return _want(f"{where} (no '/', '\\', '.' or '..')", v)
    if field == "binary_ext":
        return None if isinstance(v, str) and _EXT.fullmatch(v) else _want("a file extension: letters, digits, '_'", v)
    if field == "files":
        if not isinstance(v, dict):
            return _want("an object of file names to sha256 digests", v)
        for name, digest in v.items():
            if not is_plain_name(name) or not _is_sha256(digest):
                return (f"holds {_short(name)}: {_short(digest)}; each must be a file name (no '/', '\\', '.' or "
                        "'..') with its sha256 digest (64 lowercase hex digits)")
        return None
    if field == "options":
        ok = isinstance(v, dict) and all(isinstance(k, str) and isinstance(o, _SCALARS) for k, o in v.items())
        return None if ok else _want("an object of option names to numbers, strings, booleans or null", v)
    if field == "created":
        return None if isinstance(v, (int, float)) and not isinstance(v, bool) else _want("a number (a time stamp)", v)
    return None if isinstance(v, str) else _want("a string", v)


def _want(expected: str, got: Any) -> str:
    return f"must be {expected}, got {_short(got)}"


def entry_problem(entry: Any, portable: bool = False) -> tuple[str, str] | None:
    """(field, what is wrong with it) for the first bad field of an index entry, else None.

    Every field that becomes a path (key, artifact, stem, binary_ext, the names in
    files) must keep that path inside the caches, and the metadata and binary the
    entry points at must be among its hashed files. ``portable`` (a bundle's entries,
    from another machine) also requires the artifact to be a directory name inside
    Triton's cache and refuses unknown fields; an entry this machine wrote may hold
    the absolute path of an artifact written outside Triton's cache.
    """
    if not isinstance(entry, dict):
        return "", "must be a JSON object"
    for field in ENTRY_FIELDS:
        if field not in entry:
            return field, "is missing"
        problem = _field_problem(entry, field, portable)
        if problem is not None:
            return field, problem
    for field, ext in (("stem", "json"), ("binary_ext", entry["binary_ext"])):
        name = f"{entry['stem']}.{ext}"
        if name not in entry["files"]:
            return field, f"names '{name}', which is not among the entry's files {sorted(entry['files'])[:4]}"
    if portable:
        unknown = sorted(set(entry) - set(ENTRY_FIELDS) - {"checksum"})
        if unknown:
            return unknown[0], f"is an unknown field (an entry has {', '.join(ENTRY_FIELDS)})"
    return None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


class _Corrupt(Exception):
    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        self.detail = detail
        super().__init__(f"{what}: {detail}")


# ---- the index --------------------------------------------------------------------------------
class Index:
    """Entries ``key -> artifact`` under :func:`cache_root`. Stateless apart from the
    set of corruptions already reported, so environment changes take effect at once."""

    def __init__(self) -> None:
        self._reported: set[str] = set()
        self._unwritable: set[str] = set()  # cache roots already reported as not writable
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    # paths
    def root(self) -> str:
        return cache_root()

    def entry_path(self, key: str) -> str:
        return os.path.join(cache_root(), "index", key[:2], f"{key}.json")

    def lock_path(self, key: str) -> str:
        return os.path.join(cache_root(), "locks", f"{key[:16]}.lock")

    def lock(self, key: str) -> contextlib.AbstractContextManager[None]:
        """The lock that serializes compiles of one variant across processes."""
        return file_lock(self.lock_path(key))

    @contextlib.contextmanager
    def compiling(self, key: str, kernel: str) -> Iterator[bool]:
        """Hold the compile lock of ``key``; yields whether the entry may be written.

        Where the lock cannot be taken (a read-only or full cache directory) the compile
        goes on unlocked and unrecorded, with one warning: such a cache costs the next
        warm start, never a compile."""
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self.lock(key))
            writable = True
        except OSError as exc:
            self.report_unwritable(kernel, exc)
            writable = False
        with stack:
            yield writable

    def report_unwritable(self, kernel: str, exc: OSError) -> None:
        """Warn once per cache directory and process that the index cannot be written."""
        root = cache_root()
        with self._lock:
            first = root not in self._unwritable
            self._unwritable.add(root)
        if first:
            warnings.warn(f"tritonjit: cannot write the cache directory {root} ({exc}); kernel '{kernel}' and "
                          "the variants compiled after it are not indexed, so the next process compiles them "
                          "again", CacheWriteWarning, stacklevel=5)
        else:
            log.debug("not indexing a variant of kernel '%s': %s", kernel, exc)

    # reading
    def read_entry(self, key: str) -> dict[str, Any] | None:
        """The verified entry of ``key``; None when absent. Raises _Corrupt."""
        try:
            with open(self.entry_path(key), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(raw)
        except ValueError as exc:
            raise _Corrupt("index entry", f"not valid JSON ({exc}); {len(raw)} bytes") from None
        if not isinstance(entry, dict) or entry.get("checksum") != _checksum(entry):
            raise _Corrupt("index entry", "checksum mismatch")
        if entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        problem = entry_problem(entry)
        if problem is not None:  # e.g. imported by a tritonjit that did not check bundles
            raise _Corrupt("index entry", f"field '{problem[0]}' {problem[1]}")
        return entry

    def artifact_dir(self, entry: dict[str, Any]) -> str:
        art = entry["artifact"]
        return art if os.path.isabs(art) else os.path.join(triton_cache_dir(), art)

    def load(self, key: str, kernel: str = "") -> CompiledVariant | None:
        """The compiled variant of ``key`` rebuilt from disk, or None (absent, stale or
        corrupt: a corrupt entry or artifact is removed and reported once)."""
        if not enabled():
            return None
        entry: dict[str, Any] | None = None
        try:
            entry = self.read_entry(key)
            if entry is None:
                self.misses += 1
                return None
            compiled = self._rebuild(entry)
        except _Corrupt as exc:
            self._report(key, kernel, entry, exc)
            self.misses += 1
            return None
        except FileNotFoundError:  # the artifact's directory is gone (Triton's cache cleared): a plain miss
            self._remove_entry(key)
            self.misses += 1
            return None
        if compiled is None:
            self.misses += 1
            return None
        self.hits += 1
        return compiled

    def _rebuild(self, entry: dict[str, Any]) -> CompiledVariant | None:
        directory = self.artifact_dir(entry)
        stem, ext = entry["stem"], entry["binary_ext"]
        files = entry["files"]
        md_name, bin_name = f"{stem}.json", f"{stem}.{ext}"
        if not os.path.isdir(directory):
            raise FileNotFoundError(directory)
        md_raw = _artifact_file(directory, md_name)
        binary = _artifact_file(directory, bin_name)
        if sha256_bytes(md_raw) != files.get(md_name):
            raise _Corrupt("cached artifact", f"{md_name} does not match its recorded sha256 ({len(md_raw)} bytes)")
        if sha256_bytes(binary) != files.get(bin_name):
            raise _Corrupt("cached artifact", f"{bin_name} does not match its recorded sha256 ({len(binary)} bytes)")
        metadata = json.loads(md_raw)
        tgt = metadata.get("target")
        if isinstance(tgt, dict):
            from triton.backends.compiler import GPUTarget

            metadata["target"] = GPUTarget(tgt["backend"], tgt["arch"], tgt["warp_size"])
        version = metadata.get("triton_version")
        if version is not None and not triton_fingerprint().startswith(f"{version}+") \
                and triton_fingerprint() != version:
            return None  # written by another Triton: never reuse
        return CompiledVariant(
            name=metadata.get("name", stem), signature=entry["signature"], target=metadata.get("target"),
            binary=binary, metadata=metadata, asm=_LazyAsm(directory, stem, {ext: binary}),
            hash=metadata.get("hash", ""), cache_dir=directory, artifact=None, binary_ext=ext,
        )

    def _report(self, key: str, kernel: str, entry: dict[str, Any] | None, exc: _Corrupt) -> None:
        """Warn once per variant, then drop the entry (and a corrupt artifact, so that
        Triton's own cache does not hand it back): the caller recompiles."""
        with self._lock:
            first = key not in self._reported
            self._reported.add(key)
        name = kernel or (entry or {}).get("kernel", "?")
        sig = (entry or {}).get("signature", "?")
        if first:
            warnings.warn(f"tritonjit: the {exc.what} of kernel '{name}' (variant '{sig}') is corrupt: {exc.detail}; "
                          f"it is removed and the variant recompiled", CacheCorruptionWarning, stacklevel=4)
        self._remove_entry(key)
        if exc.what == "cached artifact" and entry is not None:
            remove_tree(self.artifact_dir(entry))

    def _remove_entry(self, key: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.entry_path(key))

    # writing
    def store(self, key: str, compiled: CompiledVariant, backend: str, target: Any,
              options: dict[str, Any]) -> dict[str, Any] | None:
        """Record ``compiled`` (an artifact in Triton's cache) under ``key``; None when
        it has no artifact on disk (interpreter, a plugin's own compiler)."""
        if not enabled() or not compiled.cache_dir or not compiled.binary_ext:
            return None
        directory = compiled.cache_dir
        stem = _artifact_stem(compiled)
        files: dict[str, str] = {}
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not os.path.isfile(path) or ".tmp." in name or name == "lock" or name.startswith("tmp."):
                continue
            with open(path, "rb") as f:
                files[name] = sha256_bytes(f.read())
        if f"{stem}.json" not in files or f"{stem}.{compiled.binary_ext}" not in files:
            return None
        root = triton_cache_dir()
        rel = os.path.relpath(directory, root)
        artifact = directory if rel.startswith("..") else rel
        entry: dict[str, Any] = {
            "format": FORMAT, "key": key, "kernel": compiled.name, "signature": compiled.signature,
            "backend": backend, "target": target_str(target), "options": {k: _jsonable(v) for k, v in options.items()},
            "triton": triton_fingerprint(), "artifact": artifact, "stem": stem, "binary_ext": compiled.binary_ext,
            "hash": compiled.hash, "files": files, "created": time.time(),
        }
        entry["checksum"] = _checksum(entry)
        atomic_write(self.entry_path(key), json.dumps(entry, sort_keys=True).encode())
        return entry

    def write_entry(self, entry: dict[str, Any]) -> None:
        """Install an entry as is; its checksum is recomputed."""
        atomic_write(self.entry_path(entry["key"]), self.entry_bytes(entry))

    def entry_bytes(self, entry: dict[str, Any]) -> bytes:
        """The file content of an entry, its checksum recomputed (bundle import stages it)."""
        entry = dict(entry)
        entry["checksum"] = _checksum(entry)
        return json.dumps(entry, sort_keys=True).encode()

    # listing
    def keys(self) -> list[str]:
        base = os.path.join(cache_root(), "index")
        out: list[str] = []
        if not os.path.isdir(base):
            return out
        for sub in sorted(os.listdir(base)):
            d = os.path.join(base, sub)
            if os.path.isdir(d):
                out += [n[:-5] for n in sorted(os.listdir(d)) if n.endswith(".json") and ".tmp." not in n]
        return out

    def entries(self) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
        """(key, entry or None, problem or None) for every entry on disk."""
        for key in self.keys():
            try:
                entry = self.read_entry(key)
                yield key, entry, None if entry is not None else "stale format"
            except _Corrupt as exc:
                yield key, None, str(exc)

    def verify(self, entry: dict[str, Any]) -> str | None:
        """None when every file of the entry's artifact matches its hash, else why not."""
        directory = self.artifact_dir(entry)
        for name, digest in entry["files"].items():
            try:
                with open(os.path.join(directory, name), "rb") as f:
                    if sha256_bytes(f.read()) != digest:
                        return f"{name} does not match its sha256"
            except OSError:
                return f"{name} is missing"
        return None


def _artifact_file(directory: str, name: str) -> bytes:
    """A file of an artifact whose directory exists. Missing, it makes the artifact
    corrupt rather than absent: Triton finds the directory by its group file and fails
    on the missing binary (``KeyError: 'cubin'``) at every compile until it is removed."""
    try:
        with open(os.path.join(directory, name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        if not os.path.isdir(directory):  # removed whole meanwhile (another process's clear): a miss
            raise
        raise _Corrupt("cached artifact", f"{name} is missing from {directory}") from None


def _artifact_stem(compiled: CompiledVariant) -> str:
    art = compiled.artifact
    group = getattr(art, "metadata_group", None) or {}
    for name in group:
        if name.endswith(".json") and not name.startswith("__grp__"):
            return name[:-5]
    return compiled.name[:150]


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


def remove_tree(path: str) -> list[tuple[str, str]]:
    """Remove a directory so that no reader sees it half removed: rename, then delete.

    Returns (path, why) for what is still there (read-only storage); [] when it is gone."""
    if not os.path.isdir(path):
        return []
    trash = f"{path}.trash.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, trash)
    except OSError:
        trash = path
    return remove_all(trash)


def remove_all(path: str) -> list[tuple[str, str]]:
    """``shutil.rmtree`` that says what it could not remove, (path, why) each."""
    failed: list[tuple[str, str]] = []

    def record(_fn: Any, where: str, exc: Any) -> None:
        exc = exc[1] if isinstance(exc, tuple) else exc  # onerror passes exc_info, onexc the exception
        if not isinstance(exc, FileNotFoundError):  # removed by someone else meanwhile
            failed.append((where, getattr(exc, "strerror", None) or str(exc)))

    if os.path.lexists(path):
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=record)
        else:
            shutil.rmtree(path, onerror=record)
    return failed


index = Index()


# ---- the compile bridge's entry point ---------------------------------------------------------
def indexed(src: Any, backend: str, target: Any, options: dict[str, Any], signature: str) -> str | None:
    """The index key to use for this compile, or None when the index is off."""
    if not enabled():
        return None
    return variant_key(src, backend, target, options, signature)
