"""``tritonjit demo``: example kernels on the default backend, checked against torch."""

from __future__ import annotations

import argparse
from typing import Any

from ._output import emit_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="launch example kernels on the default backend and check them against torch")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import print_report, run_demo

    report = run_demo()
    if args.json:
        emit_json(report)
    else:
        print_report(report)
    return 0 if report["ok"] else 1
