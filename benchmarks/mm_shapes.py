"""mm at the shapes models produce: tritonjit against cuBLAS (torch), on one GPU.

    python benchmarks/mm_shapes.py [--json FILE] [--only REGEX] [--sweep] [--tma] [--jobs N]
    tritonjit bench mm [--json FILE] [ARGS...]

Cases, bf16: Llama-like projections through nn.Linear (mm(x, W.t()), W (N, K)
contiguous; hidden 1024, intermediate 2816, vocab 32000) at M = 1, 4, 16, 32, 64, 128
and 8192; their backward at 8192 tokens (grad_W = grad_out.t() @ x: a transposed;
grad_x = grad_out @ W); GPT-2's Conv1D (addmm(bias, x, W), W (K, N)); BERT's linear
with bias (addmm(bias, x, W.t())).

Default mode, per case: tritonjit's result is checked against torch's first (bf16
tolerance, printed); then device time with triton.testing.do_bench (L2 flushed each
call), torch and tritonjit in interleaved rounds, each keeping its best: TFLOP/s, the
ratio (target >= 0.95x) and the plan matmul.choose() made. For M <= 64 also the
host-inclusive time per call of a loop of 200 calls: torch eager, tritonjit's direct
entry (T.mm / T.addmm), and the model's own call (F.linear, or addmm) under
tritonjit_ops.enable(). Every variant the run may launch (each config the tuner will
time included) is compiled first by tritonjit's parallel warm-up; tuning then runs
once per key (stored on disk, so a second run skips it).

--sweep: per case, a wider grid of configs (tiles, stages, split-K; TMA descriptors
where the operands allow) is checked and timed, beside torch and choose()'s plan, so
one run says which configs to keep. The TMA candidates of every case run after all
the others (a faulting one ends the process; the JSON written so far stays).

--tma: let the tuner try the TMA configs (TRITONJIT_MM_TMA=1) in the default mode.
--smoke: tiny shapes on the CPU interpreter (checks the script, times nothing useful).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

_ROOT = Path(__file__).resolve().parents[1]
for _sub in ("operators", "tritonjit_core"):
    if str(_ROOT / _sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / _sub))
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

F = torch.nn.functional
DTYPE = torch.bfloat16
LOOP_CALLS = 200


# ---- the cases ----------------------------------------------------------------------------------
@dataclass
class Case:
    """One model call. kind: linear (mm(x, W.t())), linear_bias (addmm(bias, x, W.t())),
    conv1d (addmm(bias, x, W), W (K, N)), grad_w (mm(g.t(), x)), grad_x (mm(g, W)).
    rows/out/inner: tokens, output and input features of the layer."""

    name: str
    group: str
    kind: str
    rows: int
    out: int
    inner: int

    @property
    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of the mm problem c = a @ b."""
        if self.kind == "grad_w":
            return self.out, self.inner, self.rows
        if self.kind == "grad_x":
            return self.rows, self.inner, self.out
        return self.rows, self.out, self.inner


def cases(smoke: bool = False) -> list[Case]:
    if smoke:
        return [Case(f"smoke.{kind} M={m}", "smoke", kind, m, 24 if m == 8 else 40, 600 if m == 8 else 48)
                for kind, m in (("linear", 1), ("linear", 8), ("linear", 40), ("linear_bias", 16),
                                ("conv1d", 16), ("grad_w", 40), ("grad_x", 40))]
    out: list[Case] = []
    llama = (("qkvo", 1024, 1024), ("up", 2816, 1024), ("down", 1024, 2816), ("head", 32000, 1024))
    for m in (1, 4, 16, 32, 64, 128, 8192):
        group = "decode" if m <= 64 else "prefill"
        out += [Case(f"llama.{p} M={m}", group, "linear", m, n, k) for p, n, k in llama]
    for p, n, k in llama:
        out.append(Case(f"llama.{p} grad_W", "backward", "grad_w", 8192, n, k))
        out.append(Case(f"llama.{p} grad_x", "backward", "grad_x", 8192, n, k))
    gpt2 = (("c_attn", 2304, 768), ("attn.c_proj", 768, 768), ("c_fc", 3072, 768), ("mlp.c_proj", 768, 3072))
    for m in (16, 8192):
        out += [Case(f"gpt2.{p} M={m}", "gpt2", "conv1d", m, n, k) for p, n, k in gpt2]
    out += [Case(f"gpt2-medium.{p} M=8192", "gpt2", "conv1d", 8192, n, k)
            for p, n, k in (("c_fc", 4096, 1024), ("mlp.c_proj", 1024, 4096))]
    bert = (("attn", 768, 768), ("intermediate", 3072, 768), ("output", 768, 3072))
    for m in (128, 8192):
        out += [Case(f"bert.{p} M={m}", "bert", "linear_bias", m, n, k) for p, n, k in bert]
    return out


@dataclass
class Built:
    """A case's tensors and calls; a, b, c, bias: the operands as mm/addmm launch them
    (bias expanded to (M, N))."""

    torch_fn: Callable[[], Any]
    tj_fn: Callable[[], Any]
    model_fn: Callable[[], Any]  # the model's own call (F.linear / addmm / mm), run eager or under enable()
    a: Any
    b: Any
    c: Any
    bias: Any
    keep: list = field(default_factory=list)


def build(case: Case, dev: str) -> Built:
    import tritonjit_ops as T

    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale).to(DTYPE)

    rows, out, inner = case.rows, case.out, case.inner
    if case.kind in ("linear", "linear_bias"):
        x, w = randn(rows, inner), randn(out, inner, scale=inner ** -0.5)
        bias = randn(out) if case.kind == "linear_bias" else None
        a, b = x, w.t()
        if bias is None:
            fns = (lambda: torch.mm(x, w.t()), lambda: T.mm(x, w.t()), lambda: F.linear(x, w))
        else:
            fns = (lambda: torch.addmm(bias, x, w.t()), lambda: T.addmm(bias, x, w.t()), lambda: F.linear(x, w, bias))
    elif case.kind == "conv1d":
        x, w, bias = randn(rows, inner), randn(inner, out, scale=inner ** -0.5), randn(out)
        a, b = x, w
        fns = (lambda: torch.addmm(bias, x, w), lambda: T.addmm(bias, x, w), lambda: torch.addmm(bias, x, w))
    elif case.kind == "grad_w":
        gr, x, bias = randn(rows, out, scale=rows ** -0.5), randn(rows, inner), None
        a, b = gr.t(), x
        fns = (lambda: torch.mm(gr.t(), x), lambda: T.mm(gr.t(), x), lambda: torch.mm(gr.t(), x))
    elif case.kind == "grad_x":
        gr, w, bias = randn(rows, out), randn(out, inner, scale=out ** -0.5), None
        a, b = gr, w
        fns = (lambda: torch.mm(gr, w), lambda: T.mm(gr, w), lambda: torch.mm(gr, w))
    else:
        raise ValueError(case.kind)
    m, n, _ = case.mnk
    c = torch.empty(m, n, device=dev, dtype=DTYPE)
    return Built(*fns, a, b, c, bias.expand(m, n) if bias is not None else None, keep=[bias])


def layout(b: Built) -> str:
    return ("N" if b.a.stride(1) == 1 else "T") + ("N" if b.b.stride(1) == 1 else "T")


# ---- checking and timing -----------------------------------------------------------------------
def check(got: torch.Tensor, ref: torch.Tensor) -> tuple[bool, float]:
    """bf16 tolerance: max |got - ref| within 2% of max |ref| (one bf16 rounding each side
    is 0.4%), no NaN."""
    got, ref = got.float(), ref.float()
    err = float((got - ref).abs().max()) / max(float(ref.abs().max()), 1e-6)
    return bool(torch.isfinite(got).all()) and err <= 2e-2, err


def device_ms(fn: Callable[[], Any], dev: str, rep: int = 40, warmup: int = 10) -> float:
    if dev == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def interleaved(fns: dict[str, Callable[[], Any]], dev: str, rounds: int, rep: int = 40) -> dict[str, float]:
    """Best (lowest) device ms of each path over `rounds` interleaved rounds."""
    best = {k: math.inf for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            best[k] = min(best[k], device_ms(fn, dev, rep=rep))
    return best


def host_loop(b: Built, dev: str, rounds: int) -> dict[str, float]:
    """us per call of LOOP_CALLS back-to-back calls plus one synchronize (host-inclusive)."""
    import tritonjit_ops as T
    from _timing import Rounds

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    calls = LOOP_CALLS if dev == "cuda" else 2
    r = Rounds(calls, rounds, sync)
    r.add("torch", b.model_fn)
    r.add("direct", b.tj_fn)

    def under_enable(n: int) -> float:
        with T.enable():
            t0 = time.perf_counter()
            for _ in range(n):
                b.model_fn()
            sync()
            return (time.perf_counter() - t0) / n * 1e6

    r.add_timed("enable", under_enable)
    return r.run(warmup=calls)


# ---- warm-up -------------------------------------------------------------------------------------
def warm(plan_sets: list[tuple[list, Built]], jobs: int, target: str | None) -> dict[str, Any]:
    """Compile every variant of the given plans in `jobs` worker processes for `target`
    (e.g. "cuda:90"; None: nothing to do, the interpreter compiles nothing)."""
    from tritonjit._manifest import ManifestEntry
    from tritonjit._warmup import warmup
    from tritonjit_ops import matmul

    if target is None:
        return {"variants": 0, "seconds": 0.0}
    entries: dict[ManifestEntry, None] = {}
    for plans, b in plan_sets:
        for plan in plans:
            for fn, sig, opts in matmul.signatures(plan, b.a, b.b, b.c, b.bias):
                entries[ManifestEntry(kernel=fn.name, file=matmul.__file__, signature=sig,
                                      options=tuple(sorted(opts.items())), module="tritonjit_ops.matmul")] = None
    t0 = time.perf_counter()
    report = warmup(list(entries), jobs=jobs, target=target, progress=False)
    failed = [r for r in report.results if not r.ok]
    for r in failed[:5]:
        print(f"  warm-up: {r.entry.describe()} {r.status}: {(r.error or '')[:200]}", file=sys.stderr)
    return {"variants": len(entries), "seconds": round(time.perf_counter() - t0, 1), "failed": len(failed),
            "jobs": jobs, "target": target}


# ---- the default mode ------------------------------------------------------------------------------
def tflops(case: Case, ms: float) -> float:
    m, n, k = case.mnk
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def plan_of(b: Built) -> Any:
    """The plan tritonjit's call took (choose() is cached: this is a lookup)."""
    from tritonjit_ops import matmul

    a, w = b.a, b.b
    aligned = (a.data_ptr() | w.data_ptr()) & 15 == 0
    return matmul.choose(a.shape[0], w.shape[1], a.shape[1], 1, a.dtype, a.stride(), w.stride(), b.bias is not None,
                         a.device, aligned=aligned)


def run_default(all_cases: list[Case], dev: str, args: argparse.Namespace, out: dict) -> list[dict]:
    from tritonjit_ops import matmul

    built = {c.name: build(c, dev) for c in all_cases}
    t0 = time.perf_counter()
    out["warmup"] = warm([(matmul.candidates(b.a, b.b, b.c, b.bias), b) for b in built.values()], args.jobs,
                         _target(dev))
    print(f"warm-up: {out['warmup']}", file=sys.stderr)
    t1 = time.perf_counter()
    for c in all_cases:  # tunes each key not yet stored (once per device)
        built[c.name].tj_fn()
    _sync(dev)
    out["tune_seconds"] = round(time.perf_counter() - t1, 1)
    print(f"tuning: {out['tune_seconds']} s (warm-up {t1 - t0:.1f} s)", file=sys.stderr)
    rows: list[dict] = []
    out["rows"] = rows
    hdr = (f"{'case':28s} {'M':>5s} {'N':>6s} {'K':>6s} {'lay':3s} {'torch TF/s':>10s} {'tj TF/s':>8s} "
           f"{'ratio':>6s}  {'check':9s} {'plan':34s} loop us (torch/direct/enable)")
    print(hdr)
    for c in all_cases:
        b = built[c.name]
        ref = b.torch_fn()
        ok, err = check(b.tj_fn(), ref)
        import tritonjit_ops as T

        with T.enable():
            ok_e, err_e = check(b.model_fn(), ref)
        t = interleaved({"torch": b.torch_fn, "tritonjit": b.tj_fn}, dev, args.rounds)
        plan = plan_of(b)
        m, n, k = c.mnk
        row = dict(case=c.name, group=c.group, kind=c.kind, m=m, n=n, k=k, layout=layout(b),
                   torch_ms=t["torch"], tritonjit_ms=t["tritonjit"], torch_tflops=tflops(c, t["torch"]),
                   tritonjit_tflops=tflops(c, t["tritonjit"]), ratio=t["torch"] / t["tritonjit"],
                   check=ok, err=err, check_enable=ok_e, err_enable=err_e, plan=plan.describe(),
                   plan_detail=plan.to_dict())
        if c.rows <= 64 and c.kind != "grad_w":
            row["loop_us"] = host_loop(b, dev, args.rounds)
        rows.append(row)
        loop = row.get("loop_us")
        loop_s = "" if loop is None else f"{loop['torch']:.1f}/{loop['direct']:.1f}/{loop['enable']:.1f}"
        chk = ("ok" if ok and ok_e else "FAIL") + f" {max(err, err_e):.0e}"
        print(f"{c.name:28s} {m:5d} {n:6d} {k:6d} {row['layout']:3s} {row['torch_tflops']:10.1f} "
              f"{row['tritonjit_tflops']:8.1f} {row['ratio']:5.2f}x  {chk:9s} {plan.describe():34s} {loop_s}",
              flush=True)
        _save(args.json, out)
    bad = [r for r in rows if not (r["check"] and r["check_enable"])]
    below = [r for r in rows if r["ratio"] < 0.95]
    print(f"\n{len(rows)} cases: {len(bad)} failed the check; {len(below)} below 0.95x torch "
          f"(geomean ratio {math.exp(sum(math.log(r['ratio']) for r in rows) / len(rows)):.3f})")
    for r in below:
        print(f"  below: {r['case']} {r['ratio']:.2f}x ({r['plan']})")
    return rows


# ---- the sweep ---------------------------------------------------------------------------------------
def sweep_configs(m: int, n: int, k: int, tma_possible: bool) -> list[tuple[tuple, int]]:
    """(config, split_k) candidates of a problem; config = (BM, BN, BK, warps, stages, TMA, PERSISTENT)."""
    from tritonjit_ops import matmul

    budget = matmul.SMEM_BUDGET
    out: list[tuple[tuple, int]] = []

    def fits(bm: int, bn: int, bk: int, stages: int) -> bool:
        return (bm + bn) * bk * 2 * stages <= budget

    if m <= 256:
        skinny = m <= matmul.SKINNY_M
        bms = (matmul._skinny_bm(m),) if skinny else (64, 128)
        splits = (1, 2, 4) if skinny else (1, 2)
        bns = (16, 32, 64, 128) if skinny else (32, 64, 128)
        bks = (128, 256) if skinny else (64, 128)
        for bm, bn, bk, stages in itertools.product(bms, bns, bks, (3, 5)):
            if not fits(bm, bn, bk, stages):
                continue
            for split in splits:
                if split == 1 or k // split >= max(bk, 256):
                    out.append(((bm, bn, bk, 4 if bm * bn <= 64 * 128 else 8, stages, False, False), split))
        return out
    large = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (256, 128, 64, 8, 4),
             (128, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 8, 5),
             (64, 256, 64, 4, 3), (64, 256, 64, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4),
             (64, 64, 64, 4, 4), (128, 128, 128, 8, 3), (128, 256, 128, 8, 2)]
    persistent = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4),
                  (128, 128, 64, 8, 3), (64, 256, 64, 4, 3)]
    for tma in (False, True) if tma_possible else (False,):
        out += [(cfg + (tma, False), 1) for cfg in large if fits(cfg[0], cfg[1], cfg[2], cfg[4])]
        out += [(cfg + (tma, True), 1) for cfg in persistent]
    return out


def run_sweep(all_cases: list[Case], dev: str, args: argparse.Namespace, out: dict) -> list[dict]:
    from tritonjit_ops import matmul

    built = {c.name: build(c, dev) for c in all_cases}
    grids: dict[str, list] = {}
    for c in all_cases:
        b = built[c.name]
        m, n, k = c.mnk
        tma_possible = matmul.tma_ok(2, b.a.stride(), b.b.stride(), m, n, k, True)
        grid = sweep_configs(m, n, k, tma_possible)
        if args.smoke:
            grid = ([g for g in grid if not g[0][5]][:4] + [((16, 16, 16, 1, 1, False, True), 1)]
                    + [((16, 16, 16, 1, 1, True, True), 1)] * tma_possible)
        grids[c.name] = [(cfg, split, matmul.make_plan(m, n, k, 1, DTYPE, b.a.stride(), b.b.stride(),
                                                       b.bias is not None, dev, cfg, split))
                         for cfg, split in grid]
    plan_sets = [([p for _, _, p in grids[c.name]] + matmul.candidates(b.a, b.b, b.c, b.bias), b)
                 for c in all_cases for b in (built[c.name],)]
    out["warmup"] = warm(plan_sets, args.jobs, _target(dev))
    print(f"warm-up: {out['warmup']}", file=sys.stderr)
    rows: dict[str, dict] = {}
    out["sweep"] = []
    for phase in ("pointer", "tma"):
        for c in all_cases:
            b = built[c.name]
            ref = b.torch_fn()
            row = rows.setdefault(c.name, dict(case=c.name, group=c.group, m=c.mnk[0], n=c.mnk[1], k=c.mnk[2],
                                               layout=layout(b), configs=[]))
            if phase == "pointer":
                ok, _ = check(b.tj_fn(), ref)
                t = interleaved({"torch": b.torch_fn, "tritonjit": b.tj_fn}, dev, args.rounds)
                row.update(torch_ms=t["torch"], choose_ms=t["tritonjit"], choose_plan=plan_of(b).describe(),
                           choose_check=ok)
            for cfg, split, plan in grids[c.name]:
                if cfg[5] != (phase == "tma"):
                    continue
                out_c = torch.empty_like(b.c)

                def call(plan: Any = plan, out_c: torch.Tensor = out_c) -> Any:
                    return matmul.run(plan, b.a, b.b, out_c, b.bias, 1.0, 1.0)

                ok, err = check(call(), ref)
                ms = device_ms(call, dev, rep=20, warmup=5) if ok else math.inf
                row["configs"].append(dict(config=list(cfg), split_k=split, ms=ms, check=ok, err=err,
                                           ratio=row["torch_ms"] / ms if ok else 0.0))
            out["sweep"] = list(rows.values())
            _save(args.json, out)
            if phase == "tma" and not any(x["config"][5] for x in row["configs"]):
                continue
            _print_sweep(row, phase)
    return list(rows.values())


def _print_sweep(row: dict, phase: str) -> None:
    confs = sorted((x for x in row["configs"] if x["check"] and (phase == "tma") == x["config"][5]),
                   key=lambda x: x["ms"])
    bad = [x for x in row["configs"] if not x["check"]]
    one = next((x for x in confs if x["split_k"] == 1), None)
    print(f"{row['case']:28s} {row['layout']} torch {row['torch_ms'] * 1e3:8.1f} us | choose "
          f"{row['choose_ms'] * 1e3:8.1f} us ({row['torch_ms'] / row['choose_ms']:.2f}x) {row['choose_plan']} "
          f"[{phase}, {len(row['configs'])} configs, {len(bad)} failed]")
    for x in confs[:4]:
        print(f"    {x['ms'] * 1e3:8.1f} us {x['ratio']:5.2f}x  {x['config']} split_k={x['split_k']}")
    if one is not None and one not in confs[:4]:
        print(f"    best single launch: {one['ms'] * 1e3:8.1f} us {one['ratio']:5.2f}x  {one['config']}")


# ---- main -----------------------------------------------------------------------------------------
def _target(dev: str) -> str | None:
    if dev != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"cuda:{major}{minor}"


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _save(path: str | None, out: dict, **extra: Any) -> None:
    if path:
        Path(path).write_text(json.dumps(dict(out, **extra), indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tritonjit bench mm", description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON (rewritten after each case)")
    p.add_argument("--only", metavar="REGEX", help="only the cases whose name matches")
    p.add_argument("--sweep", action="store_true", help="time a wide grid of configs per case")
    p.add_argument("--tma", action="store_true", help="let the tuner try TMA configs (TRITONJIT_MM_TMA=1)")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="warm-up compile workers")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU interpreter (a script check)")
    args = p.parse_args(argv)
    if args.tma:
        os.environ["TRITONJIT_MM_TMA"] = "1"
    dev = "cpu" if args.smoke else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("tritonjit bench mm needs a GPU (or --smoke for a CPU check of the script)", file=sys.stderr)
        return 2
    if args.smoke:
        args.rounds = 1
    selected = [c for c in cases(args.smoke) if not args.only or re.search(args.only, c.name)]
    import triton

    out: dict[str, Any] = {"meta": {
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (interpreter)",
        "torch": torch.__version__, "triton": triton.__version__, "mode": "sweep" if args.sweep else "default",
        "tma": os.environ.get("TRITONJIT_MM_TMA", "0"), "split_k": os.environ.get("TRITONJIT_MM_SPLIT_K", "1"),
        "cases": len(selected), "started": time.strftime("%Y-%m-%d %H:%M:%S")}}
    t0 = time.perf_counter()
    if args.sweep:
        run_sweep(selected, dev, args, out)
    else:
        run_default(selected, dev, args, out)
    out["meta"]["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"total {out['meta']['seconds']} s", file=sys.stderr)
    if args.json:
        _save(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
