"""GPU tests skip where torch sees no CUDA device, also when these tests run from the
plugin's sdist, away from the repository's conftest.py (which does the same there)."""

from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a GPU of the backend under test (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        if torch.cuda.is_available():
            return
    except Exception:  # no usable torch: nothing of CUDA can run
        pass
    skip = pytest.mark.skip(reason="needs a GPU (none on this machine)")
    for item in items:
        if "gpu" in item.keywords and str(item.path).startswith(HERE):
            item.add_marker(skip)
