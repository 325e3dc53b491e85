"""Output helpers shared by the subcommands: JSON or aligned text."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

MIN_TEXT_COLUMN = 40  # narrower than this, a table's free-text column goes under each row


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def terminal_width() -> int:
    """Columns to lay text out in: the terminal's, ``$COLUMNS``, else 100."""
    return shutil.get_terminal_size((100, 24)).columns


def table(rows: Sequence[Sequence[Any]], header: Sequence[str], width: int | None = None) -> str:
    """Rows under a header, columns aligned. With ``width``, no line runs past it (except
    a single word longer than the line, such as a path): the last column, free text such
    as a reason, is wrapped within its column, or -- where that column would be narrower
    than MIN_TEXT_COLUMN -- printed under its row, indented, across the whole width."""
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    if width is None or not header:
        return _lines(cells, widths, lambda text: [text])
    room = width - sum(w + 2 for w in widths[:-1])
    if widths[-1] <= room:
        return _lines(cells, widths, lambda text: [text])
    if room >= MIN_TEXT_COLUMN:
        widths[-1] = room
        return _lines(cells, widths, lambda text: _wrap(text, room))
    out = _lines([r[:-1] for r in cells], widths[:-1], lambda text: [text]).splitlines()
    body = out[:2]
    for r, line in zip(cells[1:], out[2:]):
        body.append(line)
        body += [f"    {part}" for part in _wrap(r[-1], max(width - 4, MIN_TEXT_COLUMN))]
    return "\n".join(body)


def paragraph(text: str, width: int) -> str:
    """``text`` wrapped to ``width``, its continuation lines indented."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=False,
                                   break_on_hyphens=False))


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _lines(cells: list[list[str]], widths: list[int], wrap: Any) -> str:
    lines = []
    for n, r in enumerate(cells):
        for i, part in enumerate(wrap(r[-1]) if n else [r[-1]]):
            row = r[:-1] if i == 0 else [""] * (len(r) - 1)
            lines.append("  ".join(c.ljust(w) for c, w in zip([*row, part], widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
