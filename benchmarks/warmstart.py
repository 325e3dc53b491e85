"""Warm start: the first launch of an already-compiled variant in a fresh process.

Each measurement is a fresh subprocess with its own cache directory, populated once
by an earlier subprocess of the same run; the clock starts after the imports (torch,
triton, tritonjit, the kernel) and the input tensors exist, and stops when the first
launch has finished (device synchronized). Reported: tritonjit against Triton's own
``kernel[grid]``, both warm (populated cache) and cold (empty cache), median of R runs,
and the ratios.

On a machine without a GPU the launch cannot happen; then the same run measures the
step a warm start is made of for a cross-compiled ``cuda:90`` variant -- tritonjit's
``f.compile`` served by its index against ``triton.compile`` served by Triton's cache
-- plus the interpreter's first launch.

    python benchmarks/warmstart.py [--reps R] [--json FILE] [--mode auto|gpu|cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def warm_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)
'''

SIG = "*fp32:16,*fp32:16,*fp32:16,i32,1024"

# one probe per path; each prints the seconds of the measured step as JSON
PROBE = rf'''
import json, sys, time
path, how = sys.argv[1], sys.argv[2]
import torch, triton
import tritonjit
sys.path.insert(0, __import__("os").path.dirname(path))
from warm_kernel import warm_add
n = 4096
if how in ("tritonjit", "triton"):
    x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); o = torch.empty(n, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if how == "tritonjit":
        tritonjit.function(warm_add)[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    else:
        warm_add[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    assert torch.allclose(o, x + y)
elif how == "tritonjit-load":
    f = tritonjit.function(warm_add)
    t0 = time.perf_counter()
    v = f.compile("{SIG}", target="cuda:90")
    dt = time.perf_counter() - t0
elif how == "triton-load":
    from tritonjit._compiler import build_source
    from triton.backends.compiler import GPUTarget
    f = tritonjit.function(warm_add)
    src = build_source(warm_add, f.params, f.parse_signature("{SIG}"))
    t0 = time.perf_counter()
    triton.compile(src, target=GPUTarget("cuda", 90, 32), options={{}})
    dt = time.perf_counter() - t0
elif how == "interpreter":
    tritonjit.set_backend("interpreter")
    x = torch.randn(n); y = torch.randn(n); o = torch.empty(n)
    t0 = time.perf_counter()
    tritonjit.function(warm_add)[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    dt = time.perf_counter() - t0
print(json.dumps({{"seconds": dt}}))
'''


def _run_probe(workdir: str, how: str, cache: str) -> float:
    env = dict(os.environ, TRITON_CACHE_DIR=cache)
    # PYTHONDONTWRITEBYTECODE: an installed package has its bytecode (pip compiles it);
    # without it each probe would time compiling tritonjit's own sources
    for name in ("TRITONJIT_CACHE_DIR", "TRITONJIT_RECORD", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, os.path.join(workdir, "probe.py"), os.path.join(workdir, "warm_kernel.py"),
                          how], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"probe '{how}' failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def measure(paths: list[str], reps: int) -> dict[str, dict[str, float]]:
    """{path: {"cold": s, "warm": median s}}: cold = empty cache, then warm in the populated one."""
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tritonjit-warmstart-") as workdir:
        with open(os.path.join(workdir, "warm_kernel.py"), "w") as f:
            f.write(KERNEL)
        with open(os.path.join(workdir, "probe.py"), "w") as f:
            f.write(PROBE)
        for how in paths:
            cache = os.path.join(workdir, f"cache-{how}")
            cold = _run_probe(workdir, how, cache)
            warm = [_run_probe(workdir, how, cache) for _ in range(reps)]
            results[how] = {"cold": cold, "warm": statistics.median(warm), "warm_min": min(warm)}
    return results


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tritonjit bench warmstart", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="fresh processes per warm measurement (median)")
    ap.add_argument("--mode", choices=("auto", "gpu", "cpu"), default="auto")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    gpu = _has_gpu() if args.mode == "auto" else args.mode == "gpu"
    if gpu:
        pairs = [("tritonjit", "triton")]
        title = "first launch after imports (GPU, fresh process)"
    else:
        pairs = [("tritonjit-load", "triton-load")]
        title = "loading a cached cuda:90 variant after imports (CPU, no launch)"
    res = measure([p for pair in pairs for p in pair] + ([] if gpu else ["interpreter"]), args.reps)
    print(f"warm start: {title}; median of {args.reps} fresh processes")
    print(f"{'path':<16} {'warm ms':>9} {'cold ms':>9}")
    for how, r in res.items():
        print(f"{how:<16} {r['warm'] * 1e3:9.1f} {r['cold'] * 1e3:9.1f}")
    ours, theirs = pairs[0]
    ratio = res[ours]["warm"] / res[theirs]["warm"]
    print(f"ratio tritonjit/triton, warm: {ratio:.3f}  (Triton takes {1 / ratio:.1f}x as long)")
    print(f"ratio tritonjit/triton, cold: {res[ours]['cold'] / res[theirs]['cold']:.3f}")
    if gpu:
        print(f"target: warm first launch <= 50 ms -> {'met' if res[ours]['warm'] <= 0.050 else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mode": "gpu" if gpu else "cpu", "reps": args.reps, "results": res, "ratio_warm": ratio}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
