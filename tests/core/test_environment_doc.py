"""docs/environment.md documents every ``TRITONJIT_*`` variable the code reads, and only those.

The sources are the shipped packages (the core, the operators, each plugin; Python, C,
C++ and CMake files; their tests excluded). A variable is any ``TRITONJIT_...`` name in
a Python string (an f-string's replacement fields count as ``<...>``: ``TRITONJIT_<X>_ARCH``)
or in a C/C++/CMake string or ``getenv``; C header guards are no strings, so they
do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "environment.md"
NAME = re.compile(r"TRITONJIT_(?:[A-Z0-9_]|<[A-Z]+>)*[A-Z0-9>]")
PLACEHOLDER = re.compile(r"<[A-Z]+>")


def _source_files() -> list[Path]:
    roots = [ROOT / "tritonjit_core" / "tritonjit", ROOT / "operators" / "tritonjit_ops",
             *(p for p in (ROOT / "plugins").glob("tritonjit-*/tritonjit_*") if p.is_dir())]
    exts = {".py", ".c", ".cpp", ".h", ".cmake"}
    return [p for r in roots for p in r.rglob("*") if p.suffix in exts and "tests" not in p.parts]


def _python_strings(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "<X>" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def _c_strings(path: Path) -> list[str]:
    return re.findall(r'"((?:[^"\\\n]|\\.)*)"', path.read_text(errors="replace"))


def read_by_code() -> dict[str, set[str]]:
    """name (placeholders as <X>) -> the files that mention it."""
    found: dict[str, set[str]] = {}
    for path in _source_files():
        strings = _python_strings(path) if path.suffix == ".py" else _c_strings(path)
        for s in strings:
            for name in NAME.findall(s):
                found.setdefault(PLACEHOLDER.sub("<X>", name), set()).add(str(path.relative_to(ROOT)))
    return found


def documented() -> set[str]:
    """The names in the first column of the doc's tables."""
    names = set()
    for line in DOC.read_text().splitlines():
        cells = line.split("|")
        if len(cells) > 2:
            names.update(PLACEHOLDER.sub("<X>", n) for n in re.findall(r"`(TRITONJIT_[^`]+)`", cells[1]))
    return names


def test_every_variable_the_code_reads_is_documented():
    code, doc = read_by_code(), documented()
    missing = {n: sorted(files) for n, files in code.items() if n not in doc}
    assert not missing, f"add these to docs/environment.md: {missing}"
    assert "TRITONJIT_DISABLE_PLUGINS" in doc and "TRITONJIT_<X>_ARCH" in code  # the test sees f-strings


def test_every_documented_variable_is_read():
    stale = documented() - set(read_by_code())
    assert not stale, f"docs/environment.md documents variables no code reads: {sorted(stale)}"


def test_readme_links_the_table():
    assert "(docs/environment.md)" in (ROOT / "README.md").read_text()
