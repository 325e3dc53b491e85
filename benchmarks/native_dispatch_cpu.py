"""CPU cost of the native dispatcher (tritonjit._native) per ``f[grid](...)`` call.

No accelerator needed: a test backend whose launcher is ``_dispatch.Recorder(keep=False)``
(a C launch entry that only counts calls; it simulates no vendor) lets the whole
native path run: bind, key, memo, lookup, C launch entry. Kernels with 4, 8 and 16
parameters, most of them tensors, with two kinds of tensor:

* ``torch``: real CPU torch tensors (exact ``torch.Tensor``), with
  ``torch.Tensor.get_device`` replaced in this process by one answering 0, so the
  native path takes them; ``data_ptr()`` and ``.dtype`` are torch's own C code, as on a
  GPU (a Tensor subclass would not do: torch looks up ``__torch_function__`` on every
  ``data_ptr()`` of a subclass);
* ``fake``: tritonjit.testing.FakeTensor (Python methods), the slowest kind of argument.

Prints ns per call (best of R) and, as the anchor measured in the same run, the cost
of an empty Python call with the same arguments. For instruction counts run it under
``valgrind --tool=callgrind`` with ``--only N`` and divide by ``--calls``.

    python benchmarks/native_dispatch_cpu.py [--calls N] [--reps R] [--only 4|8|16] [--kind torch|fake]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch
import triton
import triton.language as tl
import tritonjit
from tritonjit import _native
from tritonjit.testing import FakeTensor, RecordingBackend


@triton.jit
def args4(X, Y, Out, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def args8(X, Y, Z, W, Out, n, a, b, BLOCK: tl.constexpr):
    pass


@triton.jit
def args16(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, Out, n, a, b, c, d, BLOCK: tl.constexpr):
    pass


def cases(kind: str) -> dict[int, tuple[Any, tuple]]:
    if kind == "torch":
        torch.Tensor.get_device = lambda self: 0  # this benchmark process only (see docstring)
        ts = [torch.empty(64) for _ in range(11)]
    else:
        ts = [FakeTensor(1 << (20 + i)) for i in range(11)]
    return {4: (args4, (*ts[:3], 1024)), 8: (args8, (*ts[:5], 1024, 3, 5)),
            16: (args16, (*ts[:11], 1024, 2, 3, 4, 5))}


def per_call(fn: Any, calls: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(calls)
        best = min(best, (time.perf_counter() - t0) / calls * 1e9)
    return best


def loop(src: str, ns: dict) -> Any:
    code = f"def run(n):\n    for _ in range(n):\n        {src}\n"
    exec(code, ns)  # noqa: S102 - our own source text
    return ns["run"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", type=int, choices=(4, 8, 16))
    ap.add_argument("--kind", choices=("torch", "fake"), default="torch")
    ap.add_argument("--path", choices=("all", "launch", "key"), default="all",
                    help="time one path only (for callgrind: run twice with different --calls, subtract)")
    a = ap.parse_args(argv)
    if not _native.available():
        print(f"native dispatcher: {_native.reason}", file=sys.stderr)
        return 1
    tritonjit.register_backend(RecordingBackend("counting", keep=False, devices=1))
    tritonjit.set_backend("counting")
    print(f"torch tensor reader in use: {_native.install_tensor_reader(wait=True)}", file=sys.stderr)
    print(f"kind={a.kind}: ns per call, best of {a.reps} x {a.calls}")
    print("| args | f[grid] | key only | empty py call | f[grid] - empty |")
    print("| --- | --- | --- | --- | --- |")
    for nargs, (kernel, args) in cases(a.kind).items():
        if a.only and nargs != a.only:
            continue
        f = tritonjit.function(kernel)
        grid = (4,)
        f[grid](*args, BLOCK=256)
        f[grid](*args, BLOCK=256)
        assert f._dispatcher.stats()["native"] >= 1, f._dispatcher.stats()
        names = ", ".join(f"a{i}" for i in range(len(args)))
        ns: dict = {f"a{i}": v for i, v in enumerate(args)}

        def empty(*args: Any, **kw: Any) -> None:
            pass

        ns.update(f=f, grid=grid, key=f._dispatcher.key, empty=empty)
        if a.path != "all":
            src = f"f[grid]({names}, BLOCK=256)" if a.path == "launch" else f"key({names}, BLOCK=256)"
            loop(src, ns)(a.calls)
            continue
        t_launch = per_call(loop(f"f[grid]({names}, BLOCK=256)", ns), a.calls, a.reps)
        t_key = per_call(loop(f"key({names}, BLOCK=256)", ns), a.calls, a.reps)
        t_empty = per_call(loop(f"empty({names}, BLOCK=256)", ns), a.calls, a.reps)
        stats = f._dispatcher.stats()
        assert stats["python"] == 0, stats
        print(f"| {nargs} | {t_launch:.0f} | {t_key:.0f} | {t_empty:.0f} | {t_launch - t_empty:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
