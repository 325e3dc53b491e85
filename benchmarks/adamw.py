"""Fused AdamW: tritonjit's multi-tensor Triton step against torch.optim.AdamW (fused, foreach).

    python benchmarks/adamw.py [--json FILE] [--layers N] [--reps N] [--smoke]
    tritonjit bench adamw [--json FILE] [ARGS...]

The parameter list of a Llama-like model (hidden 2048, intermediate 5632, 32/8 heads,
vocab 32000, --layers decoder layers: about 540M parameters at 8), in fp32 and in
bf16. Per dtype, one optimizer step (state already initialized) of:
  fused     torch.optim.AdamW(fused=True)
  foreach   torch.optim.AdamW(foreach=True)
  tj        tritonjit_ops.AdamW
  enable    torch.optim.AdamW(fused=True) under tritonjit_ops.enable() (its _fused_adamw_ routed)
device time (CUDA events, median of --reps), the ratios fused/tj and fused/enable (>= 1.0:
tritonjit faster) and the bandwidth tj reaches (28 bytes per fp32 parameter: 4 loads,
3 stores). Before timing, the parameters of tj after 3 steps are compared with fused's.

--smoke: a tiny list on the CPU interpreter (a check of the script).
"""
from __future__ import annotations

import argparse
import contextlib
import json
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


def llama_shapes(layers: int, hidden: int = 2048, inter: int = 5632, heads: int = 32, kv: int = 8,
                 vocab: int = 32000) -> list[tuple[int, ...]]:
    d = hidden // heads
    layer = [(hidden, hidden), (kv * d, hidden), (kv * d, hidden), (hidden, hidden),
             (inter, hidden), (inter, hidden), (hidden, inter), (hidden,), (hidden,)]
    return [(vocab, hidden)] + layer * layers + [(hidden,), (vocab, hidden)]


def _time(fn: Callable[[], Any], reps: int, dev: str) -> float:
    return device_ms(fn, reps, dev, warmup=1)


def run(shapes: list[tuple[int, ...]], dtype: torch.dtype, dev: str, reps: int) -> dict[str, Any]:
    import tritonjit_ops as T

    g = torch.Generator(device=dev).manual_seed(0)
    base = [torch.randn(s, device=dev, dtype=dtype, generator=g) for s in shapes]
    grads = [torch.randn(s, device=dev, dtype=dtype, generator=g) * 1e-2 for s in shapes]
    opts = {
        "fused": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, fused=True),
        "foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, foreach=True),
        "tj": lambda ps: T.AdamW(ps, lr=1e-3, weight_decay=0.1),
        "enable": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, fused=True),
    }
    if dev == "cpu":
        opts.pop("foreach")
    numel = sum(p.numel() for p in base)
    row: dict[str, Any] = {"dtype": str(dtype), "params": numel, "tensors": len(base)}
    finals = {}
    for name, make in opts.items():
        ps = [p.clone().requires_grad_() for p in base]
        for p, gr in zip(ps, grads):
            p.grad = gr
        opt = make(ps)
        with T.enable(wait_native=True) if name == "enable" else contextlib.nullcontext():
            for _ in range(3):
                opt.step()
            finals[name] = [p.detach().clone() for p in ps[:4]]
            row[f"{name}_ms"] = _time(opt.step, reps, dev)
        del ps, opt
    row["max_diff_vs_fused"] = max((a.float() - b.float()).abs().max().item()
                                   for a, b in zip(finals["tj"], finals["fused"]))
    row["tj_vs_fused"] = row["fused_ms"] / row["tj_ms"]
    row["enable_vs_fused"] = row["fused_ms"] / row["enable_ms"]
    if "foreach_ms" in row:
        row["tj_vs_foreach"] = row["foreach_ms"] / row["tj_ms"]
    row["tj_gbps"] = numel * 7 * base[0].element_size() / (row["tj_ms"] * 1e-3) / 1e9
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tritonjit bench adamw", description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--layers", type=int, default=8, help="decoder layers of the parameter list")
    p.add_argument("--reps", type=int, default=10, help="timed steps per optimizer (median)")
    p.add_argument("--smoke", action="store_true", help="a tiny list on the CPU interpreter")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
    dev = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    shapes = llama_shapes(args.layers) if dev == "cuda" else llama_shapes(1, 64, 96, 4, 2, 100)
    t0 = time.perf_counter()
    rows = [run(shapes, dt, dev, args.reps if dev == "cuda" else 1) for dt in (torch.float32, torch.bfloat16)]
    print(f"AdamW step, {len(shapes)} tensors, {rows[0]['params'] / 1e6:.1f}M parameters, "
          f"{torch.cuda.get_device_name() if dev == 'cuda' else 'cpu (interpreter)'}")
    print(f"{'dtype':16s} {'fused ms':>9s} {'foreach ms':>10s} {'tj ms':>8s} {'enable ms':>9s} "
          f"{'x fused':>8s} {'x foreach':>9s} {'enable x':>8s} {'tj GB/s':>8s} {'max diff':>9s}")
    for r in rows:
        print(f"{r['dtype']:16s} {r['fused_ms']:9.3f} {r.get('foreach_ms', float('nan')):10.3f} {r['tj_ms']:8.3f} "
              f"{r['enable_ms']:9.3f} {r['tj_vs_fused']:7.2f}x {r.get('tj_vs_foreach', float('nan')):8.2f}x "
              f"{r['enable_vs_fused']:7.2f}x {r['tj_gbps']:8.0f} {r['max_diff_vs_fused']:9.1e}")
    print("x fused / x foreach: torch's time / tritonjit's (>= 1.0: tritonjit faster); enable x: fused's time / "
          "fused under enable()")
    if args.json:
        meta = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
                "seconds": round(time.perf_counter() - t0, 1)}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
