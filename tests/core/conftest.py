"""Fixtures shared by the core tests."""

from __future__ import annotations

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
