"""tritonjit-core and tritonjit-ops ship a ``py.typed`` marker (PEP 561), so a user's type
checker reads their annotations; the marker is package data of each distribution."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("folder", "package"), [("tritonjit_core", "tritonjit"), ("operators", "tritonjit_ops")])
def test_py_typed_is_shipped(folder, package):
    assert (ROOT / folder / package / "py.typed").is_file()
    pyproject = (ROOT / folder / "pyproject.toml").read_text()
    data = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    line = next(ln for ln in data.splitlines() if ln.split("=")[0].strip().strip('"') == package)
    assert '"py.typed"' in line, line
