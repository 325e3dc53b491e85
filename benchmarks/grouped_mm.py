"""aten::_grouped_mm (MoE experts) at the shapes MoE layers produce: tritonjit's kernel
against aten's, on one GPU.

    python benchmarks/grouped_mm.py [--json FILE] [--smoke]

Cases, bf16, tokens routed to experts with uneven group sizes (a skewed router, one
expert empty): the experts' forward products as transformers 5.x calls them (2D tokens
x 3D transposed weights, split by the groups' ends), the input gradient (the same form)
and the weight gradient (2D x 2D, split along the tokens), for a Mixtral-like layer (8
experts, top 2) and a Qwen3-MoE-like one (128 small experts, top 8). Per case: the
result is checked against aten's first (bf16 tolerance), then the device time of each
with triton.testing.do_bench (L2 flushed each call), and the ratio (tritonjit / aten);
the same layers at decode size (8 tokens) as well. Under enable() a device call is served
by whichever kernel measured faster on its layout (grouped_mm.aten_serves, timed from
COMPARE_MIN_WORK multiply-adds or COMPARE_MIN_OUT outputs; smaller calls take tritonjit's
kernel untimed): the last column says which the policy picks in this process.

--smoke: tiny shapes on the CPU interpreter (checks the script, times nothing useful).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
for _sub in ("operators", "tritonjit_core"):
    if str(_ROOT / _sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / _sub))

import torch  # noqa: E402

#: name -> (experts, top-k, hidden, intermediate, tokens)
LAYERS = {"mixtral-like": (8, 2, 4096, 14336, 4096), "qwen3-moe-like": (128, 8, 2048, 768, 4096),
          "mixtral-like decode": (8, 2, 4096, 14336, 8), "qwen3-moe-like decode": (128, 8, 2048, 768, 8)}
SMOKE = {"tiny": (4, 2, 32, 48, 16)}


def _offs(experts: int, rows: int, dev: str, g: torch.Generator) -> torch.Tensor:
    """Cumulative group ends of ``rows`` routed rows: a skewed router, expert 1 empty."""
    weights = torch.rand(experts, generator=g) ** 3 + 0.05
    weights[min(1, experts - 1)] = 0
    counts = torch.multinomial(weights, rows, replacement=True, generator=g).bincount(minlength=experts)
    return counts.cumsum(0).to(torch.int32).to(dev)


def cases(layers: dict, dev: str) -> list[tuple[str, tuple]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for name, (experts, top, hidden, inter, tokens) in layers.items():
        rows = tokens * top
        offs = _offs(experts, rows, dev, g)

        def r(*shape: int) -> torch.Tensor:
            return (torch.randn(*shape, generator=g) * 0.05).to(dev, torch.bfloat16)

        x, w_up = r(rows, hidden), r(experts, 2 * inter, hidden)  # transformers' gate_up_proj (E, 2I, H)
        h, w_down = r(rows, inter), r(experts, hidden, inter)
        dy = r(rows, hidden)
        out += [(f"{name} gate_up forward", (x, w_up.transpose(-2, -1), offs)),
                (f"{name} down forward", (h, w_down.transpose(-2, -1), offs)),
                (f"{name} down input gradient", (dy, w_down, offs)),
                (f"{name} down weight gradient", (dy.t(), h, offs))]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU interpreter")
    args = ap.parse_args()
    from tritonjit_ops import grouped_mm as gm
    from tritonjit_ops.grouped_mm import grouped_mm

    dev = "cpu" if args.smoke else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA GPU (or --smoke)")
        return 2
    rows = []
    print("| case | aten us | tritonjit us | x aten | max abs error | enable() serves |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, call in cases(SMOKE if args.smoke else LAYERS, dev):
        want, got = torch._grouped_mm(*call), grouped_mm(*call)
        err = (got.float() - want.float()).abs().max().item()
        ok = torch.allclose(got.float(), want.float(), rtol=2e-2, atol=5e-2)
        if args.smoke:
            aten_us = ours_us = float("nan")
        else:
            from triton.testing import do_bench

            aten_us = do_bench(lambda: torch._grouped_mm(*call), rep=200) * 1e3
            ours_us = do_bench(lambda: grouped_mm(*call), rep=200) * 1e3
        a, b, offs = (*call, None)[:3]
        form = gm._check(a, b, offs, None, None)
        if args.smoke or not gm.timed(form, a.dtype):
            serves = "tritonjit (untimed: under the bound)"
        else:
            serves = "aten" if gm.aten_serves(form, a, b, offs) else "tritonjit"
        rows.append(dict(case=name, aten_us=aten_us, tritonjit_us=ours_us, max_abs_error=err, ok=ok, serves=serves))
        print(f"| {name} | {aten_us:.1f} | {ours_us:.1f} | {ours_us / aten_us:.2f} | {err:.1e}{'' if ok else ' WRONG'} "
              f"| {serves} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
