"""Per-call launch cost of tritonjit against the driver floor, measured in one run.

For kernels with 4, 8 and 16 runtime arguments: a C loop of ``cuLaunchKernel`` on
Triton's cubin (the floor, built here at run time), tritonjit's ``f[grid](...)`` and
bound launcher, Triton's ``kernel[grid](...)`` and ``CompiledKernel.run``, and
``torch.add(x, y, out=o)``. Each: N calls back to back, one synchronize, best of
R repetitions, microseconds per call, and as a multiple of the floor. Every path
launches on a non-blocking stream, as the floor does (torch's current stream is set
to one). Rows starting "diag:" split tritonjit's cost: the native key alone (no
launch), the plugin's C launcher called directly with the runtime arguments, torch's
current-stream query f[grid] makes per call, and the launcher with that query.

    python benchmarks/launch_overhead.py [--calls N] [--reps R] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


@triton.jit
def args4(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def args8(X, Y, Z, W, Out, n, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m) + tl.load(Z + offs, mask=m) + tl.load(W + offs, mask=m)
    tl.store(Out + offs, v + a + b, mask=m)


@triton.jit
def args16(X0, X1, X2, X3, X4, X5, X6, Out, n, a, b, c, d, e, f, g, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X0 + offs, mask=m) + tl.load(X1 + offs, mask=m) + tl.load(X2 + offs, mask=m)
    v += tl.load(X3 + offs, mask=m) + tl.load(X4 + offs, mask=m) + tl.load(X5 + offs, mask=m)
    v += tl.load(X6 + offs, mask=m)
    tl.store(Out + offs, v + (a + b + c + d + e + f + g), mask=m)


def per_call(fn: Callable[[], Any], calls: int, reps: int) -> float:
    import torch

    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def build_floor(tmp: str) -> str | None:
    """Compile launch_floor_cuda.c against Triton's bundled cuda.h and the system libcuda."""
    from triton.backends.nvidia import driver as nv

    exe = os.path.join(tmp, "launch_floor")
    inc = os.path.join(os.path.dirname(nv.__file__), "include")
    libs = [f"-L{d}" for d in nv.libcuda_dirs()]
    cmd = ["gcc", "-O2", os.path.join(HERE, "launch_floor_cuda.c"), "-I", inc, *libs, "-lcuda", "-o", exe]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("floor: gcc failed:", p.stderr[-2000:], file=sys.stderr)
        return None
    return exe


def run_floor(exe: str, ck: Any, spec: str, tmp: str, calls: int, reps: int) -> float | None:
    cubin = os.path.join(tmp, f"{ck.name}.cubin")
    with open(cubin, "wb") as fh:
        fh.write(ck.asm["cubin"])
    p = subprocess.run([exe, cubin, ck.name, str(ck.metadata.shared), str(ck.metadata.num_warps), spec,
                        str(calls), str(reps)], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT"):
            return float(line.split()[1])
    print("floor failed:", p.stdout[-1000:], p.stderr[-1000:], file=sys.stderr)
    return None


def measure(calls: int, reps: int) -> dict[str, dict[str, float | None]]:
    import torch
    import tritonjit

    tritonjit.set_backend("cuda")
    n = 1024
    grid = (1,)
    ptrs = [torch.randn(n, device="cuda") for _ in range(8)]
    out = torch.empty(n, device="cuda")
    cases = {
        4: (args4, (ptrs[0], ptrs[1], out, n), "pppi"),
        8: (args8, (*ptrs[:4], out, n, 3, 5), "pppppiii"),
        16: (args16, (*ptrs[:7], out, n, 2, 3, 4, 5, 6, 7, 8), "pppppppp" + "iiiiiiii"),
    }
    side = torch.cuda.Stream()  # non-blocking, like the floor's stream
    results: dict[str, dict[str, float | None]] = {}
    with tempfile.TemporaryDirectory() as tmp, torch.cuda.stream(side):
        stream = side.cuda_stream
        exe = build_floor(tmp)
        for nargs, (kernel, args, spec) in cases.items():
            row: dict[str, float | None] = {}
            ck = kernel[grid](*args, BLOCK=1024)
            f = tritonjit.function(kernel)
            f[grid](*args, BLOCK=1024)
            bound = f.bind(grid, *args, BLOCK=1024)
            run = ck.run
            fn_handle, meta = ck.function, ck.packed_metadata
            row["floor"] = run_floor(exe, ck, spec + "ss", tmp, calls, reps) if exe else None
            # the calls are written out (no *args), as user code writes them
            ns = {f"a{i}": a for i, a in enumerate(args)}
            ns.update(f=f, grid=grid, bound=bound, kernel=kernel, run=run, stream=stream, fh=fn_handle, meta=meta)
            names = ", ".join(f"a{i}" for i in range(len(args)))

            def call(src: str) -> Callable[[], Any]:
                return eval(f"lambda: {src}", ns)  # noqa: S307 - our own source text

            row["tritonjit f[grid]"] = per_call(call(f"f[grid]({names}, BLOCK=1024)"), calls, reps)
            row["tritonjit bound"] = per_call(call(f"bound({names})"), calls, reps)
            row["triton kernel[grid]"] = per_call(call(f"kernel[grid]({names}, BLOCK=1024)"), calls, reps)
            row["triton CompiledKernel.run"] = per_call(
                call(f"run(1, 1, 1, stream, fh, meta, None, None, None, {names}, 1024)"), calls, reps)
            if f._dispatcher is not None:
                ns["key"] = f._dispatcher.key
                row["diag: native key only"] = per_call(call(f"key({names}, BLOCK=1024)"), calls, reps)
                stats = f._dispatcher.stats()
                print(f"{nargs} args: dispatcher calls {stats}", file=sys.stderr)
                row["diag: python fallbacks"] = float(stats["python"])
            (variant,) = f.variants()
            launcher, rt, g3 = variant.launcher, variant.runtime_args((*args, 1024)), (1, 1, 1)
            row["diag: C launcher call"] = per_call(lambda: launcher(g3, stream, rt), calls, reps)
            # what f[grid] adds to the row above on every call: torch's current stream
            raw, dev = getattr(torch._C, "_cuda_getCurrentRawStream", None), torch.cuda.current_device()
            if raw is not None:
                row["diag: current stream (torch)"] = per_call(lambda: raw(dev), calls, reps)
                row["diag: C launcher + current stream"] = per_call(lambda: launcher(g3, raw(dev), rt), calls, reps)
            if nargs == 4:
                x, y = ptrs[0], ptrs[1]
                row["torch.add(out=)"] = per_call(lambda: torch.add(x, y, out=out), calls, reps)
            results[str(nargs)] = row
        torch.testing.assert_close(out, sum(ptrs[:7]) + 35)  # the last kernel ran
    return results


def table(results: dict[str, dict[str, float | None]]) -> str:
    keys = list(results)
    paths = list(dict.fromkeys(p for r in results.values() for p in r))
    head = "| path | " + " | ".join(f"{k} args us/call | x floor" for k in keys) + " |"
    lines = [head, "|" + " --- |" * (1 + 2 * len(keys))]
    for p in paths:
        cells = []
        for k in keys:
            v, floor = results[k].get(p), results[k].get("floor")
            cells.append("-" if v is None else f"{v:.2f}" if not p.endswith("fallbacks") else f"{v:.0f}")
            cells.append("-" if v is None or not floor or p.endswith("fallbacks") else f"{v / floor:.2f}")
        name = "C cuLaunchKernel loop (floor)" if p == "floor" else p
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("launch_overhead: needs a CUDA device", file=sys.stderr)
        return 1
    import tritonjit
    from tritonjit import _native

    results = measure(a.calls, a.reps)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"tritonjit {tritonjit.__version__}, native dispatcher: {_native.reason}")
    print(table(results))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "native": _native.reason, "calls": a.calls,
                       "reps": a.reps, "us_per_call": results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
