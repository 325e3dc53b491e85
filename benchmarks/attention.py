"""Flash attention: tritonjit's Triton kernels against torch's flash kernel and its default SDPA.

    python benchmarks/attention.py [--json FILE] [--only REGEX] [--reps N] [--smoke]
    tritonjit bench attention [--json FILE] [ARGS...]

Cases (bf16, GPU): LLM shapes with grouped-query heads (B x H/KV x S x D: 4 x 32/8 x
1024..4096 x 128, 8 x 32/8 x 1024 x 64), causal and not, and an MHA encoder shape.
Every variant the cases may launch is compiled first, in parallel (``--jobs``), by
tritonjit's warm-up. Per case, forward and forward+backward, device time (CUDA events around each call,
median of --reps after warm-up; the first calls compile and tune):
  flash    torch's own flash kernel (sdpa_kernel(SDPBackend.FLASH_ATTENTION))
  sdpa     torch's default SDPA choice
  tj       tritonjit_ops.attention (direct entry)
  enable   F.scaled_dot_product_attention under tritonjit_ops.enable()
and the ratios flash/tj and sdpa/enable (speed relative to torch: >= 1.0 is faster;
the target is >= 0.9x flash). Each case first checks tritonjit's output and gradients
against torch's (max abs difference, printed). TFLOP/s counts 4*B*H*S*S*D per forward
(halved when causal) and 2.5x that per backward.

--smoke: tiny shapes on the CPU interpreter (a check of the script; times nothing useful).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

_ROOT = Path(__file__).resolve().parents[1]
for _sub in ("operators", "tritonjit_core"):
    if str(_ROOT / _sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / _sub))

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _timing import device_ms  # noqa: E402

F = torch.nn.functional

#: name, batch, heads, kv heads, seq, head_dim, causal
CASES = [
    ("llama-s1024-d128-causal", 4, 32, 8, 1024, 128, True),
    ("llama-s2048-d128-causal", 4, 32, 8, 2048, 128, True),
    ("llama-s4096-d128-causal", 2, 32, 8, 4096, 128, True),
    ("llama-s2048-d128", 4, 32, 8, 2048, 128, False),
    ("gqa-s1024-d64-causal", 8, 32, 8, 1024, 64, True),
    ("gqa-s1024-d64", 8, 32, 8, 1024, 64, False),
    ("mha-s512-d64", 8, 16, 16, 512, 64, False),
]
SMOKE_CASES = [("smoke-causal", 1, 4, 2, 40, 16, True), ("smoke", 1, 2, 2, 24, 32, False)]


def _time(fn: Callable[[], Any], reps: int, dev: str) -> float:
    return device_ms(fn, reps, dev, warmup=2 if dev == "cpu" else 3)


def warm(cases: list[tuple], dev: str, dtype: torch.dtype, jobs: int, target: str | None = None) -> dict[str, Any]:
    """Compile every variant the cases may launch (each tuned config of the three kernels)
    in ``jobs`` worker processes, so that the tuner's first calls find them compiled."""
    from tritonjit._manifest import ManifestEntry
    from tritonjit._warmup import warmup

    attention = sys.modules["tritonjit_ops.attention"]
    if target is None and dev == "cuda":
        major, minor = torch.cuda.get_device_capability()
        target = f"cuda:{major}{minor}"
    if target is None:
        return {"variants": 0, "seconds": 0.0}
    entries: dict[ManifestEntry, None] = {}
    for _, b, h, hk, s, d, causal in cases:
        q, k = (torch.empty(b, hh, s, d, device=dev, dtype=dtype) for hh in (h, hk))
        for fn, sig, opts in attention.signatures(q, k, k, causal=causal):
            entries[ManifestEntry(kernel=fn.name, file=attention.__file__, signature=sig,
                                  options=tuple(sorted(opts.items())), module="tritonjit_ops.attention")] = None
    t0 = time.perf_counter()
    report = warmup(list(entries), jobs=jobs, target=target, progress=False)
    failed = [r for r in report.results if not r.ok]
    for r in failed[:5]:
        print(f"  warm-up: {r.entry.describe()} {r.status}: {(r.error or '')[:300]}", file=sys.stderr)
    return {"variants": len(entries), "seconds": round(time.perf_counter() - t0, 1), "failed": len(failed),
            "target": target}


def run_case(case: tuple, dev: str, dtype: torch.dtype, reps: int) -> dict[str, Any]:
    import tritonjit_ops as T
    from torch.nn.attention import SDPBackend, sdpa_kernel

    name, b, h, hk, s, d, causal = case
    gqa = h != hk
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(b, hh, s, d, device=dev, dtype=dtype, generator=g).requires_grad_()
               for hh in (h, hk, hk))
    do = torch.randn(b, h, s, d, device=dev, dtype=dtype, generator=g)

    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def flash() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa()

    def tj() -> torch.Tensor:
        return T.attention(q, k, v, causal=causal)

    def fwd_bwd(f: Callable[[], torch.Tensor]) -> Callable[[], Any]:
        def step() -> Any:
            return torch.autograd.grad(f(), (q, k, v), do)
        return step

    paths = {"flash": flash, "sdpa": sdpa, "tj": tj, "enable": sdpa}  # "enable": timed under enable()
    if dev == "cpu":
        paths.pop("flash")  # torch's flash kernel is CUDA's
    ref = paths["sdpa"]()
    ref_g = fwd_bwd(paths["sdpa"])()
    got = tj()
    got_g = fwd_bwd(tj)()
    row: dict[str, Any] = {"case": name, "shape": [b, h, hk, s, d], "causal": causal,
                           "max_diff_out": (got.float() - ref.float()).abs().max().item(),
                           "max_diff_grad": max((x.float() - y.float()).abs().max().item()
                                                for x, y in zip(got_g, ref_g))}
    for pname, f in paths.items():
        with T.enable(wait_native=True) if pname == "enable" else contextlib.nullcontext():
            with torch.no_grad():
                row[f"fwd_{pname}_ms"] = _time(f, reps, dev)
            row[f"fwdbwd_{pname}_ms"] = _time(fwd_bwd(f), reps, dev)
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    for kind, mult in (("fwd", 1.0), ("fwdbwd", 3.5)):
        row[f"{kind}_tj_tflops"] = flops * mult / (row[f"{kind}_tj_ms"] * 1e-3) / 1e12
        if "flash" in paths:
            row[f"{kind}_vs_flash"] = row[f"{kind}_flash_ms"] / row[f"{kind}_tj_ms"]
        row[f"{kind}_enable_vs_sdpa"] = row[f"{kind}_sdpa_ms"] / row[f"{kind}_enable_ms"]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'case':26s} {'fwd ms flash/sdpa/tj':>24s} {'TF/s':>6s} {'x flash':>8s} {'enable':>7s} | "
            f"{'fwd+bwd ms flash/sdpa/tj':>26s} {'TF/s':>6s} {'x flash':>8s} {'enable':>7s} {'diff o/g':>14s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for kind in ("fwd", "fwdbwd"):
            ms = "/".join(f"{r.get(f'{kind}_{p}_ms', float('nan')):.3f}" for p in ("flash", "sdpa", "tj"))
            cells.append(f"{ms:>{24 if kind == 'fwd' else 26}s} {r[f'{kind}_tj_tflops']:6.0f} "
                         f"{r.get(f'{kind}_vs_flash', float('nan')):7.2f}x {r[f'{kind}_enable_vs_sdpa']:6.2f}x")
        lines.append(f"{r['case']:26s} {cells[0]} | {cells[1]} {r['max_diff_out']:6.1e}/{r['max_diff_grad']:6.1e}")
    lines.append("x flash: torch flash time / tritonjit time (>= 0.9 is the target); enable: default SDPA time / "
                 "SDPA under enable()")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tritonjit bench attention", description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--only", metavar="REGEX", help="only the cases whose name matches")
    p.add_argument("--reps", type=int, default=20, help="timed calls per path (median)")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU interpreter (a script check)")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="warm-up compile workers")
    p.add_argument("--warm-target", default=None, help=argparse.SUPPRESS)  # tests: cross-compile, e.g. cuda:90
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
    dev = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    cases = SMOKE_CASES if dev == "cpu" else CASES
    cases = [c for c in cases if not args.only or re.search(args.only, c[0])]
    dtype = torch.float32 if dev == "cpu" else getattr(torch, args.dtype)
    t0 = time.perf_counter()
    import tritonjit_ops  # noqa: F401 - registers the operators (and imports the attention module)

    warmed = warm(cases, dev, dtype, args.jobs, args.warm_target)
    print(f"warm-up: {warmed}", file=sys.stderr, flush=True)
    rows = []
    for c in cases:
        rows.append(run_case(c, dev, dtype, 1 if dev == "cpu" else args.reps))
        print(f"{c[0]}: done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    print(f"attention, {dtype}, {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu (interpreter)'}")
    print(table(rows))
    if args.json:
        meta = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
                "dtype": str(dtype), "seconds": round(time.perf_counter() - t0, 1), "warmup": warmed}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
