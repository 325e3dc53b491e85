"""``tritonjit warmup [MANIFEST] [-j N] [--target T] [--native]``: compile ahead of time.

Record a manifest with ``TRITONJIT_RECORD=FILE`` (every variant a run uses), then
compile it here in N worker processes -- for this machine's device, for each entry's
recorded target (``--target recorded``), or for a named one such as ``cuda:90``
(no device needed). A kernel that a script defined (``python train.py``) is compiled
from its definition and what it uses, never by running the script again. A variant
that fails or crashes its compiler is reported; the others still compile.
``--native`` also builds the C++ helpers that are otherwise built in the background
on first use (the torch tensor reader; tritonjit_ops' call prologues where
installed), so that no later process starts without them; it also retries a helper
whose build failed before (failures are otherwise remembered per torch and compiler,
see torch_build). Exit status 1 when any variant or helper failed.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from ._output import emit_json, table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("warmup", help="compile a recorded manifest (TRITONJIT_RECORD) in parallel worker processes")
    p.add_argument("manifest", nargs="?", help="JSON-lines manifest written by a run with TRITONJIT_RECORD=FILE")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: the number of CPUs)")
    p.add_argument("--target", "-t", default=None,
                   help="BACKEND:ARCH such as cuda:90 (no device needed), 'recorded' for each entry's own target; "
                        "default: this machine's device")
    p.add_argument("--timeout", type=positive_seconds, default=None,
                   help="seconds one variant may take before it is abandoned (a number > 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--native", action="store_true",
                   help="also build the torch-linked C++ helpers (tensor reader, operator prologues) now")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def positive_seconds(text: str) -> float:
    """``--timeout``'s type: a finite number of seconds > 0 (argparse reports anything else)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got '{text}'") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def _native_helpers() -> list[Any]:
    """The AsyncModules --native builds: the core's reader, tritonjit_ops' prologues and its
    C++ operator path."""
    import torch  # noqa: F401 - the helpers are built against it

    from .._native import torch_reader

    mods = [torch_reader._module]
    try:
        from tritonjit_ops import _native_ops, _prologue
    except ImportError:  # the operator library is not installed
        return mods
    return mods + [m for m in (_prologue.native(), _native_ops.native()) if m is not None]


def run(args: argparse.Namespace) -> int:
    from .._manifest import read
    from .._warmup import warmup

    if args.jobs < 1:
        raise ValueError(f"-j/--jobs must be at least 1, got {args.jobs}")
    if args.manifest is None and not args.native:
        raise ValueError("nothing to do: give a MANIFEST (written with TRITONJIT_RECORD=FILE), --native, or both")
    helpers = _native_helpers() if args.native else []
    for h in helpers:  # they build on their own threads while the variants compile; a failure
        h.start(retry=True)  # remembered from an earlier process is tried again here
    report = None
    if args.manifest is not None:
        report = warmup(read(args.manifest), jobs=args.jobs, target=args.target,
                        progress=not (args.no_progress or args.json), timeout=args.timeout)
    for h in helpers:
        h.start(wait=True)
    native = {h.name: h.reason for h in helpers}
    native_ok = all(h.module is not None for h in helpers)
    ok = native_ok and (report is None or report.ok)
    if args.json:
        out = report.to_json() if report is not None else {}
        if helpers:
            out["native"] = native
        emit_json(out)
        return 0 if ok else 1
    if report is not None:
        bad = [r for r in report.results if not r.ok]
        print(f"{len(report.results)} variants in {report.seconds:.2f} s with {report.jobs} workers: "
              f"{report.count('compiled')} compiled, {report.count('cached')} already cached, {len(bad)} failed")
        if bad:
            rows = [[r.entry.kernel, r.entry.signature, r.status, (r.error or "").splitlines()[0][:100]] for r in bad]
            print(table(rows, ["kernel", "signature", "status", "error"]))
    for name, why in native.items():
        print(f"native helper {name}: {why}")
    return 0 if ok else 1
