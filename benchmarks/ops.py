"""Operator benchmark: tritonjit_ops against torch eager, measured in the same run.

    python benchmarks/ops.py [--json FILE] [--quick]

small: host-bound latency of tiny calls, us/call (N back-to-back calls, one
synchronize; torch eager, the direct entry and torch.ops timed in interleaved
rounds, each keeping its best).
large: device throughput via triton.testing.do_bench, GB/s of bytes that must
move, beside the copy bandwidth of the same run (the ceiling); mm in TFLOP/s.
Targets (H200): small <= 1.0x eager, large >= 95% of copy, mm >= 0.95x torch.mm.
Needs an accelerator; on a CPU-only machine it runs only the small cases, tiny,
through the interpreter, as a smoke test.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

_ROOT = Path(__file__).resolve().parents[1]
for sub in ("operators", "tritonjit_core"):
    if str(_ROOT / sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / sub))

import tritonjit_ops as T  # noqa: E402
from _timing import Rounds  # noqa: E402

F = torch.nn.functional


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def small_cases(dev: str, n: int, reps: int) -> list[dict]:
    xs, ys = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    xr = torch.randn(4, 1024, device=dev, dtype=torch.bfloat16)
    wr = torch.ones(1024, device=dev, dtype=torch.bfloat16)
    cases = [
        ("add 1024 fp32", lambda: torch.add(xs, ys), lambda: T.add(xs, ys),
         lambda: torch.ops.tritonjit.add(xs, ys)),
        ("rms_norm 4x1024 bf16", lambda: F.rms_norm(xr, (1024,), wr, 1e-6), lambda: T.rms_norm(xr, (1024,), wr, 1e-6),
         lambda: torch.ops.tritonjit.rms_norm(xr, [1024], wr, 1e-6)),
        ("softmax 4x1024 bf16", lambda: torch.softmax(xr, -1), lambda: T.softmax(xr, -1),
         lambda: torch.ops.tritonjit.softmax(xr, -1)),
    ]
    rows = []
    for name, eager, direct, op in cases:
        rounds = Rounds(n, reps, lambda: _sync(dev))
        rounds.add("eager", eager)
        rounds.add("direct", direct)
        rounds.add("ops", op)
        t = rounds.run(warmup=min(n, 100))
        te, td, to = t["eager"], t["direct"], t["ops"]
        rows.append(dict(case=name, unit="us/call", torch=te, direct=td, torch_ops=to,
                         ratio_direct=td / te, ratio_torch_ops=to / te))
    return rows


def large_cases(dev: str) -> list[dict]:
    from triton.testing import do_bench

    def gbps(fn, nbytes):
        return nbytes / do_bench(fn) / 1e6

    rows = []
    n = 1 << 27
    a, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
    copy = gbps(lambda: a.copy_(b), 2 * n * 4)
    rows.append(dict(case="copy 2^27 fp32 (ceiling)", unit="GB/s", torch=copy, tritonjit=copy))
    rows.append(dict(case="add 2^27 fp32", unit="GB/s", torch=gbps(lambda: torch.add(a, b), 3 * n * 4),
                     tritonjit=gbps(lambda: T.add(a, b), 3 * n * 4)))
    a = b = None  # free the memory before the next case (the closures ran already)
    m, k = 32768, 4096
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.ones(k, device=dev, dtype=torch.bfloat16)
    nb = 2 * m * k * 2
    rows.append(dict(case="rms_norm 32768x4096 bf16", unit="GB/s",
                     torch=gbps(lambda: F.rms_norm(x, (k,), w, 1e-6), nb),
                     tritonjit=gbps(lambda: T.rms_norm(x, (k,), w, 1e-6), nb)))
    rows.append(dict(case="softmax 32768x4096 bf16", unit="GB/s", torch=gbps(lambda: torch.softmax(x, -1), nb),
                     tritonjit=gbps(lambda: T.softmax(x, -1), nb)))
    rows.append(dict(case="sum last dim 32768x4096 bf16", unit="GB/s", torch=gbps(lambda: torch.sum(x, -1), nb // 2),
                     tritonjit=gbps(lambda: T.sum(x, -1), nb // 2)))
    g, u = torch.randn_like(x), torch.randn_like(x)
    rows.append(dict(case="silu_and_mul 32768x4096 bf16", unit="GB/s",
                     torch=gbps(lambda: F.silu(g) * u, 3 * m * k * 2),
                     tritonjit=gbps(lambda: T.silu_and_mul(g, u), 3 * m * k * 2)))
    for r in rows:
        r["ratio"] = r["tritonjit"] / r["torch"]
        r["of_copy"] = r["tritonjit"] / copy
    x = g = u = None  # likewise
    s = 8192
    A = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    B = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    fl = 2 * s**3
    T.mm(A, B)  # tunes (or finds the stored config) before anything is timed
    # compute-bound: the clock drifts with the card's temperature, so the two are timed
    # in alternating rounds and each keeps its best
    tt = tj = 0.0
    for _ in range(3):
        tt = max(tt, fl / do_bench(lambda: torch.mm(A, B), rep=200) / 1e9)
        tj = max(tj, fl / do_bench(lambda: T.mm(A, B), rep=200) / 1e9)
    rows.append(dict(case="mm 8192^3 bf16", unit="TFLOP/s", torch=tt, tritonjit=tj, ratio=tj / tt))
    return rows


def table(small: list[dict], large: list[dict]) -> str:
    out = ["| case | unit | torch eager | tritonjit direct | tritonjit torch.ops | ratio (direct, ops) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in small:
        out.append(f"| {r['case']} | {r['unit']} | {r['torch']:.2f} | {r['direct']:.2f} | {r['torch_ops']:.2f} | "
                   f"{r['ratio_direct']:.2f}x, {r['ratio_torch_ops']:.2f}x |")
    if large:
        out += ["", "| case | unit | torch eager | tritonjit | ratio | of copy |", "| --- | --- | --- | --- | --- | --- |"]
        for r in large:
            oc = f"{r['of_copy']:.0%}" if "of_copy" in r else "-"
            out.append(f"| {r['case']} | {r['unit']} | {r['torch']:.1f} | {r['tritonjit']:.1f} | "
                       f"{r['ratio']:.2f}x | {oc} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--quick", action="store_true", help="fewer calls per measurement")
    args = p.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    from tritonjit import _native
    from tritonjit_ops import _prologue

    # both are built in the background on first use: measure them in use
    print(f"torch tensor reader in use: {_native.install_tensor_reader(wait=True)}; "
          f"C++ call prologues in use: {_prologue.start(wait=True)}")
    if dev == "cpu":
        print("no CUDA device: small cases only, through the interpreter (a smoke test, not a measurement)")
        small = small_cases(dev, n=5, reps=1)
        large: list[dict] = []
    else:
        small = small_cases(dev, n=2000 if args.quick else 10000, reps=3 if args.quick else 5)
        large = large_cases(dev)
    import tritonjit

    meta = dict(device=torch.cuda.get_device_name() if dev == "cuda" else "cpu", torch=torch.__version__,
                backend=tritonjit.current_backend().name)
    print(table(small, large))
    if dev == "cuda":  # calls the native dispatcher served, and those it left to the Python path
        import importlib

        mods = {m: importlib.import_module(f"tritonjit_ops.{m}") for m in ("pointwise", "norm", "softmax")}
        for name, f in (("add", mods["pointwise"]._binary_flat), ("rms_norm", mods["norm"]._norm),
                        ("softmax", mods["softmax"]._softmax)):
            d = getattr(f, "_dispatcher", None)
            print(f"dispatcher {name}: {d.stats() if d is not None else 'none (Python path)'}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(meta=meta, small=small, large=large), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
