"""``tritonjit bench audit``: tritonjit_ops.audit() on the models of benchmarks/models.py.

    python benchmarks/audit.py [--models llama,qwen2,gpt2,bert] [--shapes decode,prefill,train,generate]
                               [--limit N] [--views] [--json FILE] [--smoke]

For each model and shape, one step is captured call by call and each distinct aten
call replayed eager and under enable() (see tritonjit_ops/_audit.py): the table lists
them costliest gap first (``routed``: ``aten (measured)`` where a measured policy gave
the call to aten's faster kernel), then the share of calls that ran tritonjit kernels,
those that went to aten by a measured choice, and the costliest calls that ran none.
This is where the next slow path of a model shows up.
--smoke (automatic without a GPU): the tiny fp32 configs through the interpreter.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch


def _load_models():
    """benchmarks/models.py under a name of its own (``models`` is too common a name)."""
    spec = importlib.util.spec_from_file_location("tritonjit_bench_models", Path(__file__).resolve().parent / "models.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


M = _load_models()
import tritonjit_ops as T  # noqa: E402  (after models.py put the source tree on sys.path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tritonjit bench audit", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(M.MODELS),
                   help=f"comma-separated, of {', '.join(M.ALL_MODELS)}, or the groups {', '.join(M.GROUPS)} "
                   f"(default: {', '.join(M.MODELS)})")
    p.add_argument("--shapes", default=",".join(M.SHAPES), help=f"comma-separated, of {', '.join(M.SHAPES)}")
    p.add_argument("--limit", type=int, default=40, help="rows per table (0: all)")
    p.add_argument("--views", action="store_true", help="list views and allocations too")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per call and path")
    p.add_argument("--smoke", action="store_true", help="tiny fp32 configs (default without a GPU)")
    p.add_argument("--include", default=None, help="enable()'s include: comma-separated overloads, or 'all' "
                   "(default: the backend's default set; 'all' shows what the opt-in families would cost)")
    p.add_argument("--exclude", default="", help="enable()'s exclude: comma-separated overloads")
    p.add_argument("--json", metavar="FILE", help="also write every row as JSON")
    args = p.parse_args(argv)
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install transformers", file=sys.stderr)
        return 2
    M.quiet()
    device = M.backend_device()
    smoke = args.smoke or device == "cpu"
    dtype = torch.float32 if smoke else torch.bfloat16
    shapes = M.SMOKE_SHAPES if smoke else M.SHAPES
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)  # built in the background on first use: audit it in use, as models.py measures
    if not smoke:
        from tritonjit import _native
        from tritonjit_ops import _prologue

        _native.install_tensor_reader(wait=True)
        _prologue.start(wait=True)
    print(f"audit on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, {dtype}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}" + (" - smoke mode (interpreter times mean nothing)" if smoke else ""))
    out = []
    for m in M.expand_models(args.models):
        for s in [x for x in args.shapes.split(",") if x]:
            if (why := M.not_applicable(m, s)) is not None:
                print(f"\n## {m} / {s}: skipped: {m} {why}")
                continue
            batch, tokens = shapes[s]
            model = M.build_model(m, smoke, device, dtype)
            fn = M.step_fn(m, model, s, M.make_inputs(m, model, batch, tokens, device), smoke)
            fn()  # first call outside the audit: lazy initialization in transformers and torch
            t0 = time.perf_counter()
            rows = T.audit(fn, rounds=args.rounds, include=M.routing(args.include),
                           exclude=tuple(x for x in args.exclude.split(",") if x))
            print(f"\n## {m} / {s} ({batch}x{tokens}), audited in {time.perf_counter() - t0:.1f} s\n")
            print(rows.table(limit=args.limit or None, views=args.views))
            out.append(dict(model=m, shape=s, batch=batch, tokens=tokens, summary=rows.summary(),
                            rows=[dataclasses.asdict(r) for r in rows]))
            del model, fn, rows
            if device == "cuda":
                torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=device, dtype=str(dtype), audits=out), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
