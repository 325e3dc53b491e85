"""Repository-wide pytest setup: the markers, and GPU tests skip cleanly where no GPU is present.

This file also travels in the core's and the operators' sdists (their setup.py copy
it), so the tests run from an unpacked sdist the same way."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a GPU of the backend under test (skipped without one)")
    config.addinivalue_line("markers", "slow: slow tests (deselect with -m 'not slow')")


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a GPU (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
