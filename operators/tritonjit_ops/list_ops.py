"""What ``enable()`` routes and how each operator differentiates, as markdown tables.

``python -m tritonjit_ops.list_ops`` prints them; ``--write docs/enable.md`` replaces
the generated part of that page (between its ``<!-- list_ops: begin -->`` and
``<!-- list_ops: end -->`` markers), so the page follows the tables in the code
(``_registry._ATEN``, ``_registry._PLANNERS``, ``autograd.GRADS``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import _registry, autograd

BEGIN, END = "<!-- list_ops: begin -->", "<!-- list_ops: end -->"


def aten_table() -> str:
    """One row per aten overload enable() can route: the pass it serves and its C++ path."""
    rows = ["| aten overload | pass | C++ operator path | device default |", "| --- | --- | --- | --- |"]
    backward = set(autograd.ATEN_BACKWARD)
    for name in sorted(_registry._ATEN, key=lambda n: (n in backward, n.lstrip("_"))):
        kind = "backward" if name in backward else "forward"
        plan = "planned" if name in _registry._PLANNERS else "Python implementation"
        default = "yes" if name in _registry.DEVICE_DEFAULT else "opt-in"
        rows.append(f"| `{name}` | {kind} | {plan} | {default} |")
    return "\n".join(rows)


def tritonjit_table() -> str:
    """One row per ``torch.ops.tritonjit`` op: how its backward is computed (the same on its
    direct entry ``tritonjit_ops.<name>``)."""
    rows = ["| torch.ops.tritonjit op | backward |", "| --- | --- |"]
    for name, *_ in _registry._OPS:
        base = name.partition(".")[0]
        if base in autograd.NOT_DIFFERENTIABLE:
            how = "not differentiable (integer result)"
        elif base in autograd.FUSED:
            how = "Triton backward kernels"
        elif base in autograd.GRADS:
            how = "torch operators (routed too under enable())"
        else:
            how = "none: raises NotImplementedError when differentiated"
        rows.append(f"| `{name}` | {how} |")
    return "\n".join(rows)


def markdown() -> str:
    return (f"{BEGIN}\n\n### Routed by `enable()`\n\n{aten_table()}\n\n"
            f"### Backward of the `tritonjit` operators and direct entries\n\n{tritonjit_table()}\n\n{END}")


def write(path: Path) -> None:
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"list_ops: {path} has no {BEGIN} ... {END} section to replace")
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + markdown() + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritonjit_ops.list_ops", description=__doc__.splitlines()[0])
    p.add_argument("--write", metavar="MD", help="replace the generated section of this markdown file")
    args = p.parse_args(argv)
    if args.write:
        write(Path(args.write))
    else:
        sys.stdout.write(markdown() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
