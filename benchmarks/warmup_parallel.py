"""Parallel warm-up: j worker processes against one, cross-compiling for cuda:90 (no device).

A manifest of N distinct matmul variants (dtype, block sizes, warps, stages; at most
144) is compiled by
``tritonjit._warmup.warmup`` into an empty cache, once per worker count, wall clock
including the workers' start-up. Printed: seconds per j, speedup over j=1, and the
speedup as a fraction of j (target: >= 0.7).

    python benchmarks/warmup_parallel.py [--jobs 1,2] [--variants N] [--target cuda:90]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def bench_mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))
'''


def manifest(path: str, n: int) -> list:
    from tritonjit._manifest import ManifestEntry

    shapes = itertools.product(("fp16", "bf16"), (32, 64, 128), (32, 64, 128), (32, 64), (4, 8), (2, 3))
    entries = []
    for dt, bm, bn, bk, warps, stages in itertools.islice(shapes, n):
        sig = f"*{dt}:16,*{dt}:16,*fp16:16,i32,i32,i32,i32,i32:1,i32,i32:1,i32,i32:1,{bm},{bn},{bk}"
        entries.append(ManifestEntry(kernel="bench_mm", file=path, signature=sig,
                                     options=(("num_stages", stages), ("num_warps", warps))))
    return entries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tritonjit bench warmup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="1,2", help="comma-separated worker counts; the first is the baseline")
    ap.add_argument("--variants", type=int, default=24)
    ap.add_argument("--target", default="cuda:90")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from tritonjit._warmup import warmup

    jobs = [int(j) for j in args.jobs.split(",")]
    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="tritonjit-warmup-bench-") as work:
        path = os.path.join(work, "bench_mm.py")
        with open(path, "w") as f:
            f.write(KERNEL)
        entries = manifest(path, args.variants)
        for j in jobs:
            os.environ["TRITON_CACHE_DIR"] = os.path.join(work, f"cache-j{j}")  # empty: every variant compiles
            os.environ.pop("TRITONJIT_CACHE_DIR", None)
            rep = warmup(entries, jobs=j, target=args.target, progress=False)
            if not rep.ok:
                bad = next(r for r in rep.results if not r.ok)
                raise SystemExit(f"warm-up failed: {bad.entry.describe()}: {bad.error}")
            times[j] = rep.seconds
    base_j = jobs[0]
    print(f"parallel warm-up: {len(entries)} variants for {args.target}, {os.cpu_count()} CPUs")
    print(f"{'jobs':>4} {'seconds':>8} {'speedup':>8} {'speedup/j':>9}")
    rows = {}
    for j in jobs:
        speedup = times[base_j] / times[j] * base_j
        rows[j] = {"seconds": times[j], "speedup": speedup, "efficiency": speedup / j}
        print(f"{j:>4} {times[j]:8.2f} {speedup:8.2f} {speedup / j:9.2f}")
    met = all(r["efficiency"] >= 0.7 for r in rows.values())
    print("target: speedup/j >= 0.70 -> " + ("met" if met else "NOT met"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"variants": len(entries), "target": args.target, "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
