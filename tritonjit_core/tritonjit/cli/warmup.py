"""``tritonjit warmup MANIFEST [-j N] [--target T]``: compile a recorded manifest ahead of time.

Record a manifest with ``TRITONJIT_RECORD=FILE`` (every variant a run uses), then
compile it here in N worker processes -- for this machine's device, for each entry's
recorded target (``--target recorded``), or for a named one such as ``cuda:90``
(no device needed). A variant that fails or crashes its compiler is reported; the
others still compile. Exit status 1 when any variant failed.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._output import emit_json, table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("warmup", help="compile a recorded manifest (TRITONJIT_RECORD) in parallel worker processes")
    p.add_argument("manifest", help="JSON-lines manifest written by a run with TRITONJIT_RECORD=FILE")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: the number of CPUs)")
    p.add_argument("--target", "-t", default=None,
                   help="BACKEND:ARCH such as cuda:90 (no device needed), 'recorded' for each entry's own target; "
                        "default: this machine's device")
    p.add_argument("--timeout", type=float, default=None, help="seconds one variant may take before it is abandoned")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._manifest import read
    from .._warmup import warmup

    if args.jobs < 1:
        raise ValueError(f"-j/--jobs must be at least 1, got {args.jobs}")
    entries = read(args.manifest)
    report = warmup(entries, jobs=args.jobs, target=args.target, progress=not (args.no_progress or args.json),
                    timeout=args.timeout)
    if args.json:
        emit_json(report.to_json())
        return 0 if report.ok else 1
    bad = [r for r in report.results if not r.ok]
    print(f"{len(report.results)} variants in {report.seconds:.2f} s with {report.jobs} workers: "
          f"{report.count('compiled')} compiled, {report.count('cached')} already cached, {len(bad)} failed")
    if bad:
        rows = [[r.entry.kernel, r.entry.signature, r.status, (r.error or "").splitlines()[0][:100]] for r in bad]
        print(table(rows, ["kernel", "signature", "status", "error"]))
    return 0 if not bad else 1
