"""CPU cost of the native dispatcher (tritonjit._native) per ``f[grid](...)`` call.

No accelerator needed: a test backend whose launcher is ``_dispatch.Recorder(keep=False)``
(a C launch entry that only counts calls, and answers the current stream in C as the CUDA
launcher does; it simulates no vendor) lets the whole native path run: ``f[grid]``
(``__getitem__``), bind, key, memo, lookup, stream, C launch entry. The kernels and
calls are those of the launch benchmark (launch_kernels.py, ``launch_overhead.make_cases``):
0, 4, 8, 16, 19 and 58 runtime arguments and the mixed one (fp16, bf16 and fp32 pointers,
None, ints, a float, a bool, a constexpr), with two kinds of tensor:

* ``torch``: real CPU torch tensors (exact ``torch.Tensor``), with
  ``torch.Tensor.get_device`` replaced in this process by one answering 0, so the
  native path takes them; ``data_ptr()`` and ``.dtype`` are torch's own C code, as on a
  GPU (a Tensor subclass would not do: torch looks up ``__torch_function__`` on every
  ``data_ptr()`` of a subclass);
* ``fake``: tritonjit.testing.FakeTensor (Python methods), the slowest kind of argument.

Prints ns per call (best of R interleaved rounds: each round times every path of every
kernel once, so a busy second of a noisy host lands on all of them alike) and, as the
anchor measured in the same run, the cost of the same Python call of a C function
that does nothing (``_dispatch.call_floor``); then what the dispatcher costs over that
anchor, per call and per runtime argument, and the marginal cost of one argument over
the 0-argument kernel. For instruction counts run it under ``valgrind --tool=callgrind``
with ``--only K --path launch`` twice, with two values of ``--calls``, and divide the
difference.

``--cpp`` adds the C++ API's cost (``tritonjit::Function``, the launch benchmark's C++
extension: ``f(stream, 1, 1, 1, 4, 3, args...)`` in a C++ loop, no Python per call; torch
tensors only), timed after the Python paths on a second recording backend that names its
devices "cpu", so that the C++ path answers the current device and stream in C++, as it
does for CUDA, instead of asking the backend in Python.

    python benchmarks/native_dispatch_cpu.py [--calls N] [--reps R] [--only 0,4,mixed] [--kind torch|fake] [--cpp]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any

import torch
import tritonjit
from launch_overhead import KERNEL_KEYS, KERNELS, build_cpp, cpp_call, make_cases
from tritonjit import _native
from tritonjit.testing import FakeTensor, RecordingBackend


def fake(v: Any) -> Any:
    """The FakeTensor stand-in of a torch tensor (same address and dtype), else ``v``."""
    return FakeTensor(v.data_ptr(), v.dtype) if isinstance(v, torch.Tensor) else v


def make_loop(src: str, ns: dict) -> Any:
    """``run(n)``: ``src`` n times in a loop of its own; returns ns per call."""
    g = {**ns, "perf_counter": time.perf_counter}
    exec(f"def run(n):\n    t0 = perf_counter()\n    for _ in range(n):\n        {src}\n"  # noqa: S102
         "    return (perf_counter() - t0) / n * 1e9\n", g)
    return g["run"]


def time_cpp(ext: Any, cases: dict, best: dict, calls: int, reps: int) -> None:
    """best[k]["cpp"]: ns per call of the C++ API's loop for each of ``cases`` (those the
    extension was built for), on a recording backend of "cpu" devices (see the docstring)."""
    tritonjit.register_backend(RecordingBackend("counting-cpp", keep=False, devices=1, packed=True,
                                                device_type="cpu"))
    tritonjit.set_backend("counting-cpp")
    runs = {}
    for key, case in cases.items():
        tritonjit.function(KERNELS, case.kernel)[(4,)](*case.args, **case.constexprs)  # compiles here
        runs[key] = cpp_call(ext, case, 0)
        runs[key](min(calls, 2000))  # the C++ API's miss, then hits
        best[key]["cpp"] = float("inf")
    for _ in range(reps):
        for key, run in runs.items():
            t0 = time.perf_counter()
            run(calls)
            best[key]["cpp"] = min(best[key]["cpp"], (time.perf_counter() - t0) / calls * 1e9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default=",".join(KERNEL_KEYS), help=f"kernels, of {','.join(KERNEL_KEYS)}")
    ap.add_argument("--kind", choices=("torch", "fake"), default="torch")
    ap.add_argument("--path", choices=("all", "launch", "key"), default="all",
                    help="run one path only, once, untimed (for callgrind: run twice with different --calls, "
                         "subtract; the collector's heap is frozen first)")
    ap.add_argument("--cpp", action="store_true",
                    help="also time the C++ API (builds the launch benchmark's extension; torch tensors only)")
    a = ap.parse_args(argv)
    if a.cpp and (a.kind != "torch" or a.path != "all"):
        ap.error("--cpp times torch tensors on every path: use it without --kind fake and --path")
    keys = tuple(k for k in a.only.split(",") if k)
    if unknown := [k for k in keys if k not in KERNEL_KEYS]:
        ap.error(f"unknown kernels {unknown}; choose from {','.join(KERNEL_KEYS)}")
    if not _native.available():
        print(f"native dispatcher: {_native.reason}", file=sys.stderr)
        return 1
    # packed: the launch entry takes the buffer its callers pack, as the CUDA plugin's does
    tritonjit.register_backend(RecordingBackend("counting", keep=False, devices=1, packed=True))
    tritonjit.set_backend("counting")
    print(f"torch tensor reader in use: {_native.install_tensor_reader(wait=True)}", file=sys.stderr)
    torch.Tensor.get_device = lambda self: 0  # this benchmark process only (see docstring)

    # the anchor: the same call of a C function that does nothing (a Python function taking
    # *args, **kw would also build a tuple and a dict, which a call of f[grid] does not)
    noop = _native.dispatch.call_floor

    loops: dict[str, dict[str, Any]] = {}
    cases = make_cases("cpu", keys)
    # the C++ API's cases: tuples take its Python path, which this does not time
    cpp_cases = {k: c for k, c in cases.items() if not c.has_tuples}
    ext = build_cpp(cpp_cases) if a.cpp else None
    for key, case in cases.items():
        args = tuple(fake(v) for v in case.args) if a.kind == "fake" else case.args
        f = tritonjit.function(KERNELS, case.kernel)
        grid = (4,)
        names = [f"a{i}" for i in range(len(args))] + [f"{k}={k}" for k in case.constexprs]
        call = ", ".join(names)
        ns: dict = {f"a{i}": v for i, v in enumerate(args)}
        ns.update(case.constexprs)
        for _ in range(2):  # compiles (the recording backend's stand-in), then takes the native path
            f[grid](*args, **case.constexprs)
        ns.update(f=f, grid=grid, key=f._dispatcher.key, noop=noop)
        assert f._dispatcher.stats()["native"] >= 1, (key, f._dispatcher.stats())
        if a.path != "all":
            src = f"f[grid]({call})" if a.path == "launch" else f"key({call})"
            g = {**ns}
            exec(f"def run(n):\n    for _ in range(n):\n        {src}\n", g)  # noqa: S102
            # the heap (torch's objects) out of the collector's reach: a full collection
            # during one of the two runs would add hundreds of instructions per call
            gc.collect()
            gc.freeze()
            g["run"](a.calls)
            continue
        loops[key] = {"n": len(args), "f": f,
                      "launch": make_loop(f"f[grid]({call})", ns),
                      "key": make_loop(f"key({call})", ns),
                      "noop": make_loop(f"noop({call})", ns)}
    if a.path != "all":
        return 0
    paths = ("launch", "key", "noop")
    best = {k: {p: float("inf") for p in paths} for k in loops}
    for lp in loops.values():  # warm up
        for p in paths:
            lp[p](min(a.calls, 2000))
    for _ in range(a.reps):
        for k, lp in loops.items():
            for p in paths:
                best[k][p] = min(best[k][p], lp[p](a.calls))
    for k, lp in loops.items():
        stats = lp["f"]._dispatcher.stats()
        assert stats["python"] == 0, (k, stats)
    if ext is not None:
        time_cpp(ext, cpp_cases, best, a.calls, a.reps)
    print(f"kind={a.kind}: ns per call, best of {a.reps} interleaved rounds x {a.calls} calls "
          f"(pid {os.getpid()})")
    cpp_col = ext is not None
    print("| kernel | args | f[grid] | key only | C no-op call | f[grid] - no-op | per arg | marginal per arg vs 0 |"
          + (" C++ |" if cpp_col else ""))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if cpp_col else ""))
    base = best["0"]["launch"] - best["0"]["noop"] if "0" in best else None
    for k, b in best.items():
        n = loops[k]["n"]
        over = b["launch"] - b["noop"]
        per = f"{over / n:.1f}" if n else "-"
        marg = f"{(over - base) / n:.1f}" if n and base is not None else "-"
        cpp = (f" {b['cpp']:.0f} |" if "cpp" in b else " - |") if cpp_col else ""
        print(f"| {k} | {n} | {b['launch']:.0f} | {b['key']:.0f} | {b['noop']:.0f} | {over:.0f} | {per} | {marg} |{cpp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
