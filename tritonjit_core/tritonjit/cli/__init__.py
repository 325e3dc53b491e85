"""The ``tritonjit`` command: one entry point, one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)`` and ``run(args) -> int``;
every subcommand accepts ``--json`` for machine-readable output.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .. import __version__

SUBCOMMANDS = ("info", "compile", "demo", "warmup", "cache", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tritonjit",
        description="A fast, pluggable runtime for Triton JIT kernels.",
        epilog="Run 'tritonjit SUBCOMMAND --help' for the options of one subcommand.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"tritonjit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from .._errors import TritonJITError

        if isinstance(exc, (TritonJITError, ValueError, OSError)) and args.verbose == 0:
            print(f"tritonjit {args.command}: error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
