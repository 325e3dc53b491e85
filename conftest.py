"""Repository-wide pytest setup: the markers, and GPU tests skip cleanly where no GPU is present.

The CPU tests expect the built-in interpreter to be the active backend (the operator
library registers its kernels for the backend active when it is imported), and the GPU
tests expect the device's. On a machine with a GPU they therefore run in two processes:
``pytest -m gpu`` runs the GPU tests on the device; any other selection runs the CPU tests
on the interpreter, as CI does, and skips the GPU tests with that advice. A
``TRITONJIT_BACKEND`` set by the user is left as it is.

This file also travels in the core's and the operators' sdists (their setup.py copy
it), so the tests run from an unpacked sdist the same way."""

from __future__ import annotations

import itertools
import os
import re

import pytest

#: why a GPU test is skipped in a run of the CPU tests on a machine with a GPU
GPU_PROCESS = ("GPU tests run in a process of their own on a GPU machine (pytest -m gpu): this run's CPU "
               "tests use the interpreter backend")
#: set with TRITONJIT_BACKEND by this file, so that pytest-xdist's workers (which inherit
#: both) know the backend is this file's choice and not the user's
CPU_RUN_ENV = "TRITONJIT_TESTS_CPU_RUN"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a GPU of the backend under test (skipped without one)")
    config.addinivalue_line("markers", "slow: slow tests (deselect with -m 'not slow')")
    gpu = config._tritonjit_gpu = _cuda_available()  # type: ignore[attr-defined]
    cpu_run = os.environ.get(CPU_RUN_ENV) == "1"
    if not cpu_run and gpu and _selects_cpu_tests(config.getoption("markexpr", "") or "") and \
            "TRITONJIT_BACKEND" not in os.environ:
        os.environ["TRITONJIT_BACKEND"] = "interpreter"  # before any test module imports tritonjit_ops
        os.environ[CPU_RUN_ENV] = "1"
        cpu_run = True
    config._tritonjit_cpu_run = cpu_run  # type: ignore[attr-defined]


def _selects_cpu_tests(markexpr: str) -> bool:
    """Whether ``-m markexpr`` selects any test without the gpu mark (no expression: all):
    it matches some set of the other marks it names."""
    if not markexpr.strip():
        return True
    names = sorted(set(re.findall(r"[A-Za-z_][\w.]*", markexpr)) - {"and", "or", "not", "gpu"})
    try:
        from _pytest.mark.expression import Expression

        expr = Expression.compile(markexpr)
        return any(expr.evaluate(lambda name, s=set(marks), **kw: name in s)
                   for k in range(len(names) + 1) for marks in itertools.combinations(names, k))
    except Exception:  # another pytest: the plain forms
        return markexpr.strip() != "gpu" and not markexpr.strip().startswith("gpu and ")


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = config._tritonjit_gpu  # type: ignore[attr-defined]
    if gpu and not config._tritonjit_cpu_run:  # type: ignore[attr-defined]
        return
    reason = GPU_PROCESS if gpu else "needs a GPU (none on this machine)"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the mark, not a keyword (a parameter id "gpu")
            item.add_marker(skip)
