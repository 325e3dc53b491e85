"""Fixtures shared by the core tests."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.fixture(scope="module")
def interpreter_backend():
    """Make the interpreter the active backend for a test module (its rules are
    Triton's own), and put the previous selection back afterwards."""
    import tritonjit

    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("interpreter")
    yield
    tritonjit._registry.registry._current = previous


@pytest.fixture
def plugin_modules(tmp_path):
    """Write importable modules for fake entry points (removed from sys.modules after).

    The path is put on sys.path by hand: monkeypatch.syspath_prepend imports
    pkg_resources, whose namespace fix-ups break later imports of setuptools in this
    process (torch's C++ extension builder, which the native helpers' builds use)."""
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    made: list[str] = []

    def make(module: str, text: str) -> None:
        (tmp_path / f"{module}.py").write_text(text)
        made.append(module)

    yield make
    sys.path.remove(str(tmp_path))
    for m in made:
        sys.modules.pop(m, None)
