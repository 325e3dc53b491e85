"""The built-in interpreter backend passes the backend conformance suite."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

torch = pytest.importorskip("torch")

from tritonjit.interpreter import InterpreterBackend
from tritonjit.testing import BackendConformance, ConformanceTarget, LaunchCheck


def _verify(checks: Sequence[LaunchCheck]) -> None:
    # the interpreter really runs the kernel: out = x * alpha + y over n elements
    for c in checks:
        x, y, out, n, alpha = c.args
        torch.testing.assert_close(out[:n], x[:n] * alpha + y[:n])


class TestInterpreterConformance(BackendConformance):
    @pytest.fixture
    def conformance(self) -> ConformanceTarget:
        return ConformanceTarget(
            plugin=InterpreterBackend(),
            name="interpreter",
            entry_point="interpreter",
            arch="cpu",
            variant=lambda fn, sig, opts: fn.compile(sig, target="interpreter:cpu", **opts),
            verify=_verify,
            make_args=lambda n: (torch.randn(n), torch.randn(n), torch.zeros(n)),
            corrupt_binary_fails=False,
        )
