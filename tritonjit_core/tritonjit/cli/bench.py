"""``tritonjit bench NAME [ARGS...]``: run one of the repository's benchmarks.

The benchmarks live in the source repository's ``benchmarks/`` folder (they compare
against torch, Triton and a C floor, and need the plugins and operators installed);
this finds that folder (``--dir``, ``$TRITONJIT_BENCHMARKS``, ./benchmarks, or beside
an editable install) and calls the script's ``main(argv)``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = {
    "launch": ("launch_overhead.py", "per-call launch cost against the C cuLaunchKernel floor (GPU)"),
    "ops": ("ops.py", "operators against torch eager and the copy bandwidth"),
    "warmstart": ("warmstart.py", "first launch of a cached variant in a fresh process, tritonjit vs Triton"),
    "warmup": ("warmup_parallel.py", "parallel warm-up compile: j workers against one"),
    "autotune": ("autotune_cache.py", "autotuning in a first process, the stored config in the next"),
    "models": ("models.py", "transformers models (decode, prefill, a training step): eager against enable()"),
    "audit": ("audit.py", "tritonjit_ops.audit() of the benchmark models: per aten call, routed or not, and its cost"),
    "remote": ("remote_cache.py", "a variant another process published to the remote cache, first use in a fresh "
               "process; single flight"),
    "mm": ("mm_shapes.py", "mm/addmm at model shapes against cuBLAS; --sweep times config grids (GPU)"),
    "attention": ("attention.py", "flash attention forward/backward against torch's flash kernel and SDPA"),
    "adamw": ("adamw.py", "the fused AdamW step against torch.optim.AdamW (fused, foreach)"),
}


def add_parser(sub: Any) -> None:
    lines = "\n".join(f"  {k:10s} {v[1]}" for k, v in BENCHMARKS.items())
    p = sub.add_parser("bench", help=f"run a benchmark ({', '.join(BENCHMARKS)})",
                       description=f"benchmarks:\n{lines}", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=sorted(BENCHMARKS), help="which benchmark")
    p.add_argument("--dir", default=None, help="the benchmarks folder (default: found automatically)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the figures as JSON to FILE")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed on to the benchmark")
    p.set_defaults(func=run)


def find_dir(explicit: str | None) -> Path:
    """The benchmarks folder: --dir, else $TRITONJIT_BENCHMARKS, else ./benchmarks or the
    checkout an editable install points into. A folder named explicitly must be one."""
    named = [("--dir", explicit), ("TRITONJIT_BENCHMARKS", os.environ.get("TRITONJIT_BENCHMARKS"))]
    for how, c in named:
        if c:
            if (Path(c) / "ops.py").exists():
                return Path(c)
            raise FileNotFoundError(f"{how}={c} is not tritonjit's benchmarks folder (it has no ops.py); "
                                    "point it at the benchmarks/ folder of a tritonjit source checkout")
    for c in ("benchmarks", str(Path(__file__).resolve().parents[3] / "benchmarks")):
        if (Path(c) / "ops.py").exists():
            return Path(c)
    raise FileNotFoundError(
        "the benchmarks are not part of the installed packages: they live in the benchmarks/ folder of "
        "tritonjit's source repository. Run this from the root of a source checkout, or point at one with "
        "--dir /path/to/checkout/benchmarks or TRITONJIT_BENCHMARKS=/path/to/checkout/benchmarks")


def run(args: argparse.Namespace) -> int:
    folder = find_dir(args.dir)
    script = folder / BENCHMARKS[args.name][0]
    if not script.exists():
        raise FileNotFoundError(f"benchmark script {script} is missing")
    argv = list(args.args)
    if args.json:
        argv += ["--json", args.json]
    sys.path.insert(0, str(folder))
    ns = runpy.run_path(str(script), run_name="tritonjit_bench")
    main = ns.get("main")
    if main is None:
        raise RuntimeError(f"{script} has no main(argv)")
    return int(main(argv) or 0)
