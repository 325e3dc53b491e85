"""The CUDA backend passes the backend conformance suite on a real GPU (skipped without one)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

torch = pytest.importorskip("torch")

from tritonjit.testing import BackendConformance, ConformanceTarget, LaunchCheck  # noqa: E402
from tritonjit_cuda import CudaBackend  # noqa: E402

pytestmark = pytest.mark.gpu


def _verify(checks: Sequence[LaunchCheck]) -> None:
    # the GPU really ran the kernel: out = x * alpha + y over n elements
    torch.cuda.synchronize()
    for c in checks:
        x, y, out, n, alpha = c.args
        torch.testing.assert_close(out[:n], x[:n] * alpha + y[:n])


def _variant(fn, sig: str, opts: dict):
    major, minor = torch.cuda.get_device_capability()
    return fn.compile(sig, target=f"cuda:{major * 10 + minor}", **opts)


class TestCudaConformance(BackendConformance):
    @pytest.fixture
    def conformance(self) -> ConformanceTarget:
        props = torch.cuda.get_device_properties(0)
        return ConformanceTarget(
            plugin=CudaBackend(),
            name="cuda",
            entry_point="cuda",
            arch="90",
            variant=_variant,
            verify=_verify,
            make_args=lambda n: (torch.randn(n, device="cuda"), torch.randn(n, device="cuda"),
                                 torch.zeros(n, device="cuda")),
            max_shared=getattr(props, "shared_memory_per_block_optin", None),
            stream=torch.cuda.current_stream().cuda_stream,
        )
