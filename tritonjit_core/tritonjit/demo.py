"""``tritonjit demo`` / ``python -m tritonjit.demo``: a few kernels on this machine's
default backend, checked against torch.

The kernels: an elementwise add, a two-pass sum (partial sums per block, then a
second kernel over the partials) and a 2-D scale with an optional bias pointer
(launched with None and with a tensor: two variants of one kernel). Tensors live on
the backend's torch device (``BackendInfo.device_type``): CPU under the interpreter,
the GPU under a GPU backend.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def partial_sum_kernel(x, partial, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(partial + pid, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def final_sum_kernel(partial, out, m, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out, tl.sum(tl.load(partial + offs, mask=offs < m, other=0.0), axis=0))


@triton.jit
def scale_bias_2d_kernel(x, bias, out, rows, cols, stride_row, scale,
                         BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, HAS_BIAS: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (r < rows) & (c < cols)
    v = tl.load(x + r * stride_row + c, mask=mask) * scale
    if HAS_BIAS:
        v += tl.load(bias + c, mask=c < cols)
    tl.store(out + r * stride_row + c, v, mask=mask)


@dataclass
class DemoResult:
    name: str
    shape: str
    signature: str
    max_abs_err: float
    ok: bool
    ms: float


def _add(torch: Any, dev: str) -> tuple[Any, Any, str, str]:
    import tritonjit

    n = 10_000
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    out = torch.empty_like(x)
    f = tritonjit.function(add_kernel)
    f[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=1024)
    return out, x + y, f.signature(x, y, out, n, BLOCK=1024), f"({n},)"


def _two_pass_sum(torch: Any, dev: str) -> tuple[Any, Any, str, str]:
    import tritonjit

    n, block = 100_000, 1024
    x = torch.randn(n, device=dev)
    blocks = triton.cdiv(n, block)
    partial = torch.empty(blocks, device=dev)
    out = torch.empty(1, device=dev)
    tritonjit.function(partial_sum_kernel)[(blocks,)](x, partial, n, BLOCK=block)
    final = tritonjit.function(final_sum_kernel)
    final[(1,)](partial, out, blocks, BLOCK=triton.next_power_of_2(blocks))
    sig = final.signature(partial, out, blocks, BLOCK=triton.next_power_of_2(blocks))
    return out[0], x.sum(), sig, f"({n},) -> {blocks} partials -> 1"


def _scale_bias_2d(torch: Any, dev: str, with_bias: bool) -> tuple[Any, Any, str, str]:
    import tritonjit

    rows, cols, scale = 300, 200, 0.5
    x = torch.randn(rows, cols, device=dev)
    bias = torch.randn(cols, device=dev) if with_bias else None
    out = torch.empty_like(x)
    f = tritonjit.function(scale_bias_2d_kernel)
    args = (x, bias, out, rows, cols, x.stride(0), scale)
    meta = dict(BLOCK_R=32, BLOCK_C=64, HAS_BIAS=with_bias)
    f[(triton.cdiv(rows, 32), triton.cdiv(cols, 64))](*args, **meta)
    expected = x * scale + (bias if with_bias else 0)
    return out, expected, f.signature(*args, **meta), f"({rows}, {cols})"


CASES: dict[str, Callable[..., tuple]] = {
    "add": _add,
    "two-pass sum": _two_pass_sum,
    "2-D scale, bias=None": lambda torch, dev: _scale_bias_2d(torch, dev, False),
    "2-D scale + bias": lambda torch, dev: _scale_bias_2d(torch, dev, True),
}


def run_demo() -> dict[str, Any]:
    """Run every case on the current backend; the results and where they ran."""
    import torch

    import tritonjit

    backend = tritonjit.current_backend()
    dev = backend.info.device_type or "cpu"
    torch.manual_seed(0)
    results = []
    for name, case in CASES.items():
        t0 = time.perf_counter()
        got, expected, sig, shape = case(torch, dev)
        ms = (time.perf_counter() - t0) * 1e3
        err = float((got.float() - expected.float()).abs().max().cpu())
        tol = 1e-3 * max(1.0, float(expected.float().abs().max().cpu()))
        results.append(DemoResult(name, shape, sig, err, err <= tol, round(ms, 2)))
    return {
        "backend": backend.name,
        "device": dev,
        "triton": triton.__version__,
        "tritonjit": tritonjit.__version__,
        "results": [asdict(r) for r in results],
        "ok": all(r.ok for r in results),
    }


def print_report(report: dict[str, Any]) -> None:
    from .cli._output import table

    print(f"tritonjit {report['tritonjit']} demo on backend '{report['backend']}' "
          f"(torch device '{report['device']}', triton {report['triton']})\n")
    rows = [[r["name"], r["shape"], r["signature"], f"{r['max_abs_err']:.2e}", "ok" if r["ok"] else "FAIL",
             r["ms"]] for r in report["results"]]
    print(table(rows, ["kernel", "shape", "signature", "max |err| vs torch", "check", "ms (incl. compile)"]))
    print("\nall results match torch" if report["ok"] else "\nSOME RESULTS DIFFER FROM TORCH")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonjit.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    report = run_demo()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
