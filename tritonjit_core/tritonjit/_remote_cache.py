"""The shared remote cache: one compile (and one autotune) per variant for a whole fleet.

``TRITONJIT_REMOTE_CACHE=redis://host:port/db`` names a Redis server (the store
Triton's and Inductor's remote caches use) that holds, beside every machine's local
cache, the index entries, the artifact files and the tuned configs. The compile
bridge asks it only after a local miss (a launch hit never reaches it): a remote hit
is installed into the local caches (the artifact into Triton's cache, the entry into
tritonjit's index), so the next process of that machine is a local warm start.

Keys, under the prefix ``tritonjit:<FORMAT>:``::

    entry:<variant key>        the index entry (JSON, checksummed, as on disk)
    blob:<sha256>              one artifact file, by the sha256 of its content
    lease:<name>               a single-flight lease (SET NX PX, refreshed while held)
    tune:<store digest>        a hash: tuning key -> the chosen config (as the local store)
    stats                      a hash of fleet-wide counters: hits, misses, stores, compiles, rejected

Trust: what is fetched is checked as a bundle is (``_bundle_manifest``): the entry by
the index's rules for a portable entry (every field that becomes a path kept inside
the caches), each file name as a bundle member's, each file against its sha256 (a
blob's key is its hash), Triton's group file against its own directory. A value that
fails is reported once (:class:`CacheCorruptionWarning`), deleted from the server and
the variant recompiled and published again.

Single flight: a process that misses takes ``lease:<key>`` (``SET NX PX``, refreshed
by a heartbeat while it compiles); the others poll for the entry and fetch it when it
appears, take the lease over if its holder died (it expires), and compile locally
after ``TRITONJIT_REMOTE_WAIT`` seconds at most.

Failures: every socket operation is bounded by ``TRITONJIT_REMOTE_TIMEOUT`` seconds;
a server that cannot be reached, or stops answering, costs one
:class:`RemoteCacheWarning` per process and URL, after which the process compiles
locally (and keeps its local cache) and asks the server again only after a back-off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from ._disk_cache import (
    FORMAT,
    CacheCorruptionWarning,
    _checksum,
    atomic_write,
    entry_problem,
    index,
    sha256_bytes,
    triton_cache_dir,
    triton_fingerprint,
)
from ._resp import Connection, RedisReplyError, RemoteUnavailable, parse_url

log = logging.getLogger(__name__)

ENV_URL = "TRITONJIT_REMOTE_CACHE"
ENV_TIMEOUT = "TRITONJIT_REMOTE_TIMEOUT"
ENV_WAIT = "TRITONJIT_REMOTE_WAIT"

#: seconds a process leaves a failed server alone before asking it again
BACKOFF_S = 30.0
#: a lease's time to live; its holder refreshes it every third of that
LEASE_TTL_MS = 15_000
#: how often a waiter looks for the entry another process is compiling
POLL_S = 0.02
MAX_ENTRY_BYTES = 1 << 20
MAX_FILE_BYTES = 256 << 20  # as a bundle member
MAX_TOTAL_BYTES = 1 << 30

_RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
            "else return 0 end")
_REFRESH = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
            "else return 0 end")


class RemoteCacheWarning(UserWarning):
    """The remote cache cannot be reached or stopped answering: this process compiles
    locally (its local cache still works) and tries the server again later."""


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a number of seconds") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: expected a positive number of seconds")
    return value


class RemoteCache:
    """A client of one remote cache server, shared by the threads of a process."""

    def __init__(self, url: str) -> None:
        self.url = parse_url(url)
        self.timeout = _seconds(ENV_TIMEOUT, 2.0)
        self.wait_s = _seconds(ENV_WAIT, 600.0)
        self.prefix = f"tritonjit:{FORMAT}:"
        self.conn = Connection(self.url, self.timeout)
        self._down_until = 0.0
        self._warned = False
        self._reported: set[str] = set()
        self._lock = threading.Lock()
        #: this process's counters (the server keeps the fleet's under ``stats``)
        self.counts = {"hits": 0, "misses": 0, "stores": 0, "compiles": 0, "rejected": 0, "waits": 0, "errors": 0}

    # ---- transport ----------------------------------------------------------------------------
    def up(self) -> bool:
        """False while backing off after a failure."""
        return time.monotonic() >= self._down_until

    def _run(self, commands: list[list[Any]]) -> list[Any] | None:
        """The replies, or None when the server is down (warned once, then backed off)."""
        if not self.up():
            return None
        try:
            return self.conn.pipeline(commands)
        except (RemoteUnavailable, RedisReplyError) as exc:
            self._failed(exc)
            return None

    def _failed(self, exc: BaseException) -> None:
        self.counts["errors"] += 1
        self._down_until = time.monotonic() + BACKOFF_S
        with self._lock:
            first = not self._warned
            self._warned = True
        if first:
            warnings.warn(f"tritonjit: the remote cache {self.url.display} is not answering ({exc}); compiling "
                          f"locally (the local cache keeps working) and asking it again in {BACKOFF_S:.0f} s",
                          RemoteCacheWarning, stacklevel=6)
        else:
            log.debug("remote cache %s: %s", self.url.display, exc)

    def ping(self) -> tuple[bool, str]:
        """(answers, why not) -- asked now, past any back-off (``tritonjit info``)."""
        try:
            reply = self.conn.call("PING")
        except (RemoteUnavailable, RedisReplyError) as exc:
            return False, str(exc)
        return reply == "PONG", "" if reply == "PONG" else f"unexpected reply {reply!r}"

    def _count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n
        self._run([["HINCRBY", self.prefix + "stats", name, n]])

    def server_stats(self) -> dict[str, Any]:
        """The fleet's counters kept by the server, and whether it answered."""
        ok, why = self.ping()
        out: dict[str, Any] = {"url": self.url.display, "reachable": ok}
        if not ok:
            out["error"] = why
            return out
        try:
            raw = self.conn.call("HGETALL", self.prefix + "stats") or []
        except (RemoteUnavailable, RedisReplyError) as exc:
            return {"url": self.url.display, "reachable": False, "error": str(exc)}
        values = {raw[i].decode(): int(raw[i + 1]) for i in range(0, len(raw) - 1, 2)}
        for name in ("hits", "misses", "stores", "compiles", "rejected"):
            out[name] = values.get(name, 0)
        return out

    # ---- fetch --------------------------------------------------------------------------------
    def fetch(self, key: str, kernel: str, count_miss: bool = True) -> bool:
        """Install the remote entry of ``key`` and its artifact into the local caches.

        True when installed (the caller loads it from the index); False on a miss, a
        server that is down, or a value that fails verification (reported, deleted).
        ``count_miss=False``: a look while waiting for another process's compile, whose
        miss was counted once already."""
        if not self.up():
            return False
        got = self._run([["GET", self.prefix + "entry:" + key]])
        if got is None:
            return False
        raw = got[0]
        if raw is None:
            if count_miss:
                self._count("misses")
            return False
        entry = self._checked_entry(key, kernel, raw)
        if entry is None:
            return False
        blobs = self._blobs(key, kernel, entry)
        if blobs is None:
            return False
        try:
            _install(entry, blobs)
        except _Rejected as exc:
            self._reject(key, kernel, entry, str(exc), [])
            self._run([["HINCRBY", self.prefix + "stats", "hits", -1]])
            return False
        except OSError as exc:  # a local cache that cannot be written: compile instead
            index.report_unwritable(kernel, exc)
            self._run([["HINCRBY", self.prefix + "stats", "hits", -1]])
            return False
        self.counts["hits"] += 1
        return True

    def _checked_entry(self, key: str, kernel: str, raw: bytes) -> dict[str, Any] | None:
        if len(raw) > MAX_ENTRY_BYTES:
            self._reject(key, kernel, None, f"the entry is {len(raw)} bytes (at most {MAX_ENTRY_BYTES})", [])
            return None
        try:
            entry = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            self._reject(key, kernel, None, f"the entry is not valid JSON ({exc}); {len(raw)} bytes", [])
            return None
        if not isinstance(entry, dict) or entry.get("checksum") != _checksum(entry):
            self._reject(key, kernel, None, "the entry's checksum does not match", [])
            return None
        body = {k: v for k, v in entry.items() if k != "checksum"}
        problem = entry_problem(body, portable=True)
        if problem is None and entry["key"] != key:
            problem = ("key", f"is {entry['key'][:16]}..., expected the key it is stored under ({key[:16]}...)")
        if problem is None:
            from ._bundle_manifest import member_name_problem

            for name in entry["files"]:
                why = member_name_problem(f"artifacts/{entry['artifact']}/{name}")
                if why is not None:
                    problem = ("files", why)
                    break
        if problem is not None:
            self._reject(key, kernel, body, f"field '{problem[0]}' {problem[1]}", [])
            return None
        if entry["triton"] != triton_fingerprint():  # in the key too; never reuse another Triton's
            self._count("misses")
            return None
        return body

    def _blobs(self, key: str, kernel: str, entry: dict[str, Any]) -> dict[str, bytes] | None:
        names = sorted(entry["files"])
        digests = [entry["files"][n] for n in names]
        sizes = self._run([["STRLEN", self.prefix + "blob:" + d] for d in digests])
        if sizes is None:
            return None
        missing = [n for n, s in zip(names, sizes) if not s]
        if missing:  # published part way (its publisher died), or evicted: a miss
            self._count("misses")
            return None
        big = [(n, s) for n, s in zip(names, sizes) if s > MAX_FILE_BYTES]
        if big or sum(sizes) > MAX_TOTAL_BYTES:
            what = f"{big[0][0]} is {big[0][1]} bytes" if big else f"its files are {sum(sizes)} bytes together"
            self._reject(key, kernel, entry, what, [])
            return None
        # counted as a hit in the same round trip; taken back below if it is not one
        got = self._run([["MGET", *(self.prefix + "blob:" + d for d in digests)],
                         ["HINCRBY", self.prefix + "stats", "hits", 1]])
        if got is None:
            return None
        out: dict[str, bytes] = {}
        for name, digest, data in zip(names, digests, got[0]):
            problem = None
            if not isinstance(data, bytes):
                problem = "misses"
            elif sha256_bytes(data) != digest:
                self._reject(key, kernel, entry, f"{name} does not match its sha256 ({len(data)} bytes)", [digest])
                problem = "rejected"
            if problem is not None:
                self._run([["HINCRBY", self.prefix + "stats", "hits", -1]] +
                          ([["HINCRBY", self.prefix + "stats", "misses", 1]] if problem == "misses" else []))
                if problem == "misses":
                    self.counts["misses"] += 1
                return None
            out[name] = data
        return out

    def _reject(self, key: str, kernel: str, entry: dict[str, Any] | None, why: str, blobs: list[str]) -> None:
        """Report a remote value that failed verification once, and delete it (and the
        bad blobs), so the recompiled variant is published in its place."""
        self.counts["rejected"] += 1
        with self._lock:
            first = key not in self._reported
            self._reported.add(key)
        name = kernel or (entry or {}).get("kernel", "?")
        sig = (entry or {}).get("signature", "?")
        if first:
            warnings.warn(f"tritonjit: the remote cache {self.url.display} holds a corrupt or tampered value for "
                          f"kernel '{name}' (variant '{sig}'): {why}; it is rejected and the variant recompiled",
                          CacheCorruptionWarning, stacklevel=5)
        self._run([["DEL", self.prefix + "entry:" + key, *(self.prefix + "blob:" + d for d in blobs)],
                   ["HINCRBY", self.prefix + "stats", "rejected", 1]])

    # ---- publish ------------------------------------------------------------------------------
    def publish(self, key: str, entry: dict[str, Any]) -> bool:
        """Upload a locally indexed variant (its files, then its entry: an entry that can
        be seen has its files). Entries that point outside Triton's cache stay local."""
        body = {k: v for k, v in entry.items() if k != "checksum"}
        if entry_problem(body, portable=True) is not None or not self.up():
            return False
        directory = index.artifact_dir(body)
        blobs: dict[str, bytes] = {}
        for name, digest in body["files"].items():
            try:
                with open(os.path.join(directory, name), "rb") as f:
                    data = f.read()
            except OSError:
                return False
            if sha256_bytes(data) != digest:  # changed since it was indexed: publish nothing
                return False
            blobs[digest] = data
        body["checksum"] = _checksum(body)
        commands: list[list[Any]] = [["SET", self.prefix + "blob:" + d, data, "NX"] for d, data in blobs.items()]
        commands.append(["SET", self.prefix + "entry:" + key, json.dumps(body, sort_keys=True)])
        commands.append(["HINCRBY", self.prefix + "stats", "stores", 1])
        if self._run(commands) is None:
            return False
        self.counts["stores"] += 1
        return True

    def compiled(self) -> None:
        """Count a compile made by this process while the remote cache was in use."""
        self._count("compiles")

    # ---- single flight ------------------------------------------------------------------------
    def acquire(self, name: str, fetch: Callable[[], bool]) -> Lease:
        """The right to produce ``name`` (a variant key, a tuning key) for the fleet.

        Returns a held :class:`Lease` (the caller produces, publishes and releases), or
        one whose ``fetched`` is True: another process produced it meanwhile and
        ``fetch()`` installed it. A lease that is neither (the server down, or the wait
        bound reached) lets the caller produce locally without holding anything."""
        lease = Lease(self, self.prefix + "lease:" + name)
        deadline = time.monotonic() + self.wait_s
        waited = False
        while True:
            got = self._run([["SET", lease.key, lease.token, "NX", "PX", LEASE_TTL_MS]])
            if got is None:
                return lease
            if got[0] == "OK":
                # published since this process's first look (its compiler has let go): fetch it
                if fetch():
                    lease.release()
                    lease.fetched = True
                    return lease
                lease.hold()
                return lease
            if not waited:
                waited = True
                self.counts["waits"] += 1
            while True:  # another process holds it: wait for its entry, or for the lease to go
                if fetch():
                    lease.fetched = True
                    return lease
                if time.monotonic() >= deadline:
                    log.warning("waited %.0f s for another process to compile %s; compiling here", self.wait_s, name)
                    return lease
                time.sleep(POLL_S)
                held = self._run([["EXISTS", lease.key]])
                if held is None:
                    return lease
                if not held[0]:
                    break

    # ---- tuned configs ------------------------------------------------------------------------
    def tuned_get(self, store: str, field: str) -> dict[str, Any] | None:
        got = self._run([["HGET", self.prefix + "tune:" + store, field]])
        if not got or got[0] is None:
            return None
        try:
            rec = json.loads(got[0])
        except (ValueError, UnicodeDecodeError):
            return None
        return rec if isinstance(rec, dict) else None

    def tuned_put(self, store: str, field: str, record: dict[str, Any]) -> None:
        self._run([["HSET", self.prefix + "tune:" + store, field, json.dumps(record, sort_keys=True)]])


class Lease:
    """A single-flight lease; refreshed by a heartbeat thread while held."""

    def __init__(self, remote: RemoteCache, key: str) -> None:
        self.remote = remote
        self.key = key
        self.token = os.urandom(16).hex()
        self.held = False
        self.fetched = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self) -> None:
        self.held = True
        self._thread = threading.Thread(target=self._beat, name="tritonjit-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(LEASE_TTL_MS / 3000):
            if self.remote._run([["EVAL", _REFRESH, 1, self.key, self.token, LEASE_TTL_MS]]) is None:
                return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self.held or self.token:
            self.remote._run([["EVAL", _RELEASE, 1, self.key, self.token]])
        self.held = False

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.held:
            self.release()


# ---- installing a fetched variant ---------------------------------------------------------------
class _Rejected(Exception):
    pass


def _install(entry: dict[str, Any], blobs: dict[str, bytes]) -> None:
    """Write the artifact's files into Triton's cache, then the entry into the index.

    Each file is written atomically (temporary file + rename); Triton's group file,
    checked to name only files of its own artifact and rewritten to point at their new
    place, comes after the files it names, and the entry last, so neither Triton nor
    tritonjit can find a half-installed artifact. A failure part way removes the files
    this call added. (Not the bundle importer's staging: that module's imports alone
    cost a remote hit more than its fetch.)"""
    target_dir = os.path.join(triton_cache_dir(), entry["artifact"])
    groups = sorted(n for n in blobs if n.startswith("__grp__") and n.endswith(".json"))
    ordered = [n for n in sorted(blobs) if n not in groups] + groups
    payload = {n: _relocated_group(n, blobs[n], target_dir, set(blobs)) if n in groups else blobs[n]
               for n in ordered}
    # the local entry lists the relocated group file's own hash, so that it verifies here
    entry = dict(entry, files={**entry["files"], **{n: sha256_bytes(payload[n]) for n in groups}})
    added: list[str] = []
    try:
        for name in ordered:
            path = os.path.join(target_dir, name)
            if not os.path.exists(path):
                added.append(path)
            atomic_write(path, payload[name])
        atomic_write(index.entry_path(entry["key"]), index.entry_bytes(entry))
    except BaseException:
        for path in reversed(added):
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _relocated_group(name: str, data: bytes, target_dir: str, names: set[str]) -> bytes:
    try:
        group = json.loads(data)
        children = group["child_paths"]
        ok = isinstance(children, dict) and all(
            isinstance(c, str) and isinstance(p, str) and os.path.basename(p) in names for c, p in children.items())
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise _Rejected(f"{name} is not a Triton group file whose children are files of its own artifact")
    group["child_paths"] = {c: os.path.join(target_dir, os.path.basename(p)) for c, p in children.items()}
    return json.dumps(group).encode()


# ---- the process's client ---------------------------------------------------------------------
_clients: dict[str, RemoteCache] = {}
_clients_lock = threading.Lock()


def active() -> RemoteCache | None:
    """The client of ``TRITONJIT_REMOTE_CACHE`` (None when unset). Asked only on a local miss."""
    url = os.environ.get(ENV_URL, "").strip()
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        with _clients_lock:
            client = _clients.get(url)
            if client is None:
                try:
                    client = _clients[url] = RemoteCache(url)
                except ValueError as exc:
                    raise ValueError(f"{ENV_URL}: {exc}") from None
    return client


def process_counts() -> dict[str, int]:
    """This process's remote-cache counters, summed over the URLs it used."""
    out: dict[str, int] = {}
    for client in list(_clients.values()):
        for k, v in client.counts.items():
            out[k] = out.get(k, 0) + v
    return out
