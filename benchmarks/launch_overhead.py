"""Per-call launch cost of tritonjit against the driver floor, measured in one run.

For kernels with 4, 8 and 16 runtime arguments: a C loop of ``cuLaunchKernel`` on
Triton's cubin (the floor, built here at run time and called in this process),
tritonjit's ``f[grid](...)`` and bound launcher, Triton's ``kernel[grid](...)`` and
``CompiledKernel.run``, and ``torch.add(x, y, out=o)``. Each: N calls back to back,
one synchronize, microseconds per call, and as a multiple of the floor; the paths
are timed in R interleaved rounds and each keeps its best. Every path launches on
the same non-blocking stream (torch's current stream is set to it). Rows starting
"diag:" split tritonjit's cost: the native key alone (no launch), f[grid] with the
torch tensor reader switched off (tensors read by Python calls), and the plugin's C
launcher called directly with the runtime arguments (it reads tensors through Python).

    python benchmarks/launch_overhead.py [--calls N] [--reps R] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Callable

import triton
import triton.language as tl
from _timing import Rounds

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


def build_floor(tmp: str) -> Any:
    """launch_floor_cuda.c as a shared library (Triton's bundled cuda.h, the system
    libcuda), loaded into this process; None where it cannot be built."""
    import ctypes

    from triton.backends.nvidia import driver as nv

    lib = os.path.join(tmp, "launch_floor.so")
    inc = os.path.join(os.path.dirname(nv.__file__), "include")
    libs = [f"-L{d}" for d in nv.libcuda_dirs()]
    cmd = ["gcc", "-O2", "-shared", "-fPIC", os.path.join(HERE, "launch_floor_cuda.c"), "-I", inc, *libs, "-lcuda",
           "-o", lib]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("floor: gcc failed:", p.stderr[-2000:], file=sys.stderr)
        return None
    so = ctypes.CDLL(lib)
    so.floor_setup.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_uint, ctypes.c_int,
                               ctypes.c_char_p]
    so.floor_run.argtypes = [ctypes.c_void_p, ctypes.c_int]
    so.floor_run.restype = ctypes.c_double
    return so


def floor_path(so: Any, ck: Any, spec: str, stream: int) -> Callable[[int], float] | None:
    """The C loop of cuLaunchKernel on ``ck``'s cubin, on ``stream``."""
    image = ck.asm["cubin"]
    rc = so.floor_setup(image, len(image), ck.name.encode(), ck.metadata.shared, ck.metadata.num_warps, spec.encode())
    if rc != 0:
        print(f"floor: setup failed with CUresult {rc}", file=sys.stderr)
        return None

    def timed(n: int) -> float:
        us = so.floor_run(stream, n)
        if us < 0:
            raise RuntimeError(f"floor: cuLaunchKernel failed with CUresult {-us:.0f}")
        return us

    return timed


def measure(calls: int, reps: int) -> dict[str, dict[str, float | None]]:
    import torch
    import tritonjit
    from tritonjit import _native

    tritonjit.set_backend("cuda")
    _native.install_tensor_reader(wait=True)  # built in the background otherwise; measure it in use
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
        so = build_floor(tmp)
        for nargs, (kernel, args, spec) in cases.items():
            rounds = Rounds(calls, reps, torch.cuda.synchronize)
            ck = kernel[grid](*args, BLOCK=1024)
            f = tritonjit.function(kernel)
            f[grid](*args, BLOCK=1024)
            bound = f.bind(grid, *args, BLOCK=1024)
            run = ck.run
            fn_handle, meta = ck.function, ck.packed_metadata
            floor = floor_path(so, ck, spec + "ss", stream) if so is not None else None
            if floor is not None:
                rounds.add_timed("floor", floor)
            # the calls are written out (no *args), as user code writes them, and the
            # arguments are local variables, as in an operator's wrapper function
            ns = {f"a{i}": a for i, a in enumerate(args)}
            ns.update(f=f, grid=grid, bound=bound, kernel=kernel, run=run, stream=stream, fh=fn_handle, meta=meta)
            names = ", ".join(f"a{i}" for i in range(len(args)))

            def call(src: str) -> Callable[[], Any]:
                local = ", ".join(f"{k}={k}" for k in ns if k in src)
                return eval(f"lambda {local}: {src}", ns)  # noqa: S307 - our own source text

            rounds.add("tritonjit f[grid]", call(f"f[grid]({names}, BLOCK=1024)"))
            rounds.add("tritonjit bound", call(f"bound({names})"))
            rounds.add("triton kernel[grid]", call(f"kernel[grid]({names}, BLOCK=1024)"))
            rounds.add("triton CompiledKernel.run", call(f"run(1, 1, 1, stream, fh, meta, None, None, None, {names}, 1024)"))
            dispatch = _native.dispatch
            if f._dispatcher is not None:
                ns["key"] = f._dispatcher.key
                rounds.add("diag: native key only", call(f"key({names}, BLOCK=1024)"))
                reader = dispatch.tensor_reader()
                if reader is not None:
                    fgrid = rounds.paths["tritonjit f[grid]"]

                    def python_reads(n: int, fgrid: Callable[[int], float] = fgrid, reader: Any = reader) -> float:
                        dispatch.set_tensor_reader(None)
                        try:
                            return fgrid(n)
                        finally:
                            dispatch.set_tensor_reader(reader)

                    rounds.add_timed("diag: f[grid], tensors read through Python", python_reads)
            (variant,) = f.variants()
            launcher, rt, g3 = variant.launcher, variant.runtime_args((*args, 1024)), (1, 1, 1)
            rounds.add("diag: C launcher call", lambda launcher=launcher, rt=rt: launcher(g3, stream, rt))
            if nargs == 4:
                x, y = ptrs[0], ptrs[1]
                rounds.add("torch.add(out=)", lambda: torch.add(x, y, out=out))
            row: dict[str, float | None] = dict(rounds.run())
            row.setdefault("floor", None)
            if f._dispatcher is not None:
                stats = f._dispatcher.stats()
                print(f"{nargs} args: dispatcher calls {stats}", file=sys.stderr)
                row["diag: python fallbacks"] = float(stats["python"])
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
    from tritonjit._native import torch_reader

    results = measure(a.calls, a.reps)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"tritonjit {tritonjit.__version__}, native dispatcher: {_native.reason}, "
          f"torch tensor reader: {torch_reader.reason()}")
    print(table(results))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "native": _native.reason,
                       "torch_reader": torch_reader.reason(), "calls": a.calls,
                       "reps": a.reps, "us_per_call": results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
