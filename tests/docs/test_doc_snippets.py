"""Every ```python block of the README and docs/*.md runs as written.

Each block runs as a script in a fresh process, in an empty folder, on the interpreter
backend (``TRITONJIT_BACKEND=interpreter``: CPU tensors, no accelerator). Markers are
HTML comments on the line before a block (blank lines between are allowed):

- ``<!-- skip: REASON -->``: the block is not run (it needs a GPU, a model, a build);
  the test reports it skipped with REASON;
- ``<!-- continued -->``: the block runs after the python blocks before it in the same
  file (the whole chain as one script), for a guide that builds one program in steps.

An unmarked block that raises fails the test, naming the file and line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(\s*)```python\s*$")
MARKER = re.compile(r"^\s*<!--\s*(skip:\s*(?P<why>\S.*?)|(?P<cont>continued))\s*-->\s*$")


@dataclass
class Snippet:
    """One script: a block, or a chain of continued blocks."""

    where: str  # README.md:10 (+ the lines of continued blocks)
    code: str
    skip: str | None = None
    lines: list[int] = field(default_factory=list)


def blocks(path: Path) -> list[tuple[int, str, str | None, bool]]:
    """(line, code, skip reason, continued) of each python block of ``path``."""
    lines = path.read_text().splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        marker = MARKER.match(lines[j]) if j >= 0 else None
        if j >= 0 and lines[j].strip().startswith("<!--") and marker is None:
            raise ValueError(f"{path.name}:{j + 1}: unknown marker {lines[j].strip()!r}; "
                             "expected <!-- skip: REASON --> or <!-- continued -->")
        why = marker.group("why") if marker else None
        out.append((start + 1, textwrap.dedent("\n".join(body)) + "\n", why, bool(marker and marker.group("cont"))))
        i += 1
    return out


def snippets() -> list[Snippet]:
    found: list[Snippet] = []
    for path in FILES:
        name = str(path.relative_to(ROOT))
        for line, code, skip, continued in blocks(path):
            if continued:
                if not found or not found[-1].where.startswith(name + ":") or found[-1].skip:
                    raise ValueError(f"{name}:{line}: <!-- continued --> follows no runnable block of the file")
                prev = found[-1]
                prev.code += f"\n# ---- {name}:{line}\n" + code
                prev.lines.append(line)
                prev.where = f"{name}:{'+'.join(map(str, prev.lines))}"
            else:
                found.append(Snippet(f"{name}:{line}", code, skip, [line]))
    return found


ALL = snippets()


def test_the_docs_have_snippets():
    assert len(ALL) >= 10 and any(s.where.startswith("README.md:") for s in ALL)


@pytest.mark.parametrize("snippet", ALL, ids=[s.where for s in ALL])
def test_snippet_runs_as_written(snippet: Snippet, tmp_path: Path):
    if snippet.skip:
        pytest.skip(f"{snippet.where}: {snippet.skip}")
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code)
    env = {k: v for k, v in os.environ.items() if k != "TRITONJIT_RECORD"}
    env["TRITONJIT_BACKEND"] = "interpreter"
    # -X faulthandler: a crash of the snippet's process (a signal) leaves the threads' stacks
    p = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"{snippet.where} failed (exit {p.returncode}):\n{p.stderr[-6000:]}"


def test_markers(tmp_path: Path):
    doc = tmp_path / "d.md"
    doc.write_text("<!-- skip: needs a GPU -->\n\n```python\nx = 1\n```\n<!-- continued -->\n```python\n  y = 2\n```\n")
    assert blocks(doc) == [(3, "x = 1\n", "needs a GPU", False), (7, "y = 2\n", None, True)]
    doc.write_text("<!-- skip -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="unknown marker"):
        blocks(doc)
