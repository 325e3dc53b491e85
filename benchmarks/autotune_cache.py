"""Autotuning across processes: the first process tunes, the next one does not.

An ``@triton.autotune``-wrapped matmul with 6 configs runs through
``tritonjit.function`` in two fresh processes sharing one cache directory. Each
prints the time of its first call (imports excluded) and the config chosen; the
second must choose the same config without benchmarking any (tritonjit keeps the
best config per key on disk, keyed by device name, Triton version and kernel
source). Needs a GPU; on a CPU machine (interpreter) tuning is skipped by design.

    python benchmarks/autotune_cache.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

KERNEL = '''
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
           for bm, bn, bk, w, s in [(64, 64, 32, 4, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
                                    (128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3)]]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def tuned_mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0) // tl.cdiv(N, BN)
    pn = tl.program_id(0) % tl.cdiv(N, BN)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k0 + rk)[None, :] * sak, mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0)
        y = tl.load(b + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn, mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
'''

PROBE = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import torch, triton, tritonjit
from tuned_kernel import tuned_mm
M = N = K = 4096
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16); b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
f = tritonjit.function(tuned_mm)
grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
torch.cuda.synchronize()
t0 = time.perf_counter()
v = f[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
torch.cuda.synchronize()
dt = time.perf_counter() - t0
ok = torch.allclose(c.float(), (a.float() @ b.float()), atol=1.0, rtol=5e-2)
print(json.dumps({"first_call_s": dt, "variant": v.signature if v is not None else None, "correct": bool(ok)}))
'''


def _run(folder: str, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE, folder], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"probe failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tritonjit bench autotune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    try:
        import torch

        if not torch.cuda.is_available():
            print("no GPU: autotuning is skipped on the interpreter by design; nothing to measure")
            return 0
    except ImportError:
        print("torch is not installed")
        return 0
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "tuned_kernel.py"), "w") as f:
            f.write(KERNEL)
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(d, "cache"))
        env.pop("TRITONJIT_AUTOTUNE", None)
        first = _run(d, env)  # compiles and tunes 6 configs
        second = _run(d, env)  # same cache: stored config, one compiled variant loaded
        off = _run(d, dict(env, TRITONJIT_AUTOTUNE="0"))  # never tunes: uses the stored config
    print("autotune across processes (4096^3 bf16 matmul, 6 configs), first call after imports")
    print("| process | first call ms | variant | correct |")
    print("| --- | --- | --- | --- |")
    for name, r in (("1st (tunes)", first), ("2nd (stored config)", second), ("TRITONJIT_AUTOTUNE=0", off)):
        print(f"| {name} | {r['first_call_s'] * 1e3:.1f} | {r['variant']} | {r['correct']} |")
    same = first["variant"] == second["variant"] == off["variant"]
    print(f"same config in all three: {same}; tuning saved {first['first_call_s'] / second['first_call_s']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"first": first, "second": second, "autotune_off": off, "same_config": same}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
