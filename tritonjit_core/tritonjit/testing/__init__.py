"""``tritonjit.testing``: the conformance suite every backend plugin runs against itself.

    from tritonjit.testing import BackendConformance, ConformanceTarget

    class TestMyBackendConformance(BackendConformance):
        @pytest.fixture
        def conformance(self):
            return ConformanceTarget(plugin=MyBackend(), name="mine", variant=..., verify=...)

It checks discovery, ``backend_info``, availability (and staying inert when the
runtime is absent), compile targets with no device, the load -> prepare ->
pack_args -> launch round trip through the core's module cache, concurrent
launches, and the error paths (argument count and type, corrupt binary, shared
memory over the limit, a failing driver call). :func:`simulated_target` wires a
:class:`tritonjit.pluginkit.SimulatedDriver` in for backends without hardware here.
:class:`CudaLikeSimulatedSuite` is the whole suite of a CUDA-like driver plugin
tested with a stand-in binary on the simulated driver: subclass it with the vendor's
facts. :func:`assert_vendor_compiler_missing` and :func:`assert_installed_backend` are
the checks every out-of-tree plugin's tests make. :class:`RecordingBackend` (with
:class:`FakeTensor`) runs the core's launch path with no device at all; with
``packed=True`` its launcher takes buffers its callers pack (:func:`pack_layout`).
Requires pytest (and torch for the default host-tensor arguments).
"""

from ._checks import assert_installed_backend, assert_vendor_compiler_missing
from ._cudalike import CudaLikeSimulatedSuite
from ._install import installed_as_current
from ._kernels import BLOCK, CONFORMANCE_SIGNATURE, conformance_axpy
from ._recording import FakeTensor, RecordingBackend, pack_layout
from ._suite import BackendConformance, fresh_backend
from ._target import (
    ConformanceTarget,
    HostBackedTensor,
    LaunchCheck,
    default_args,
    expected_params,
    simulated_target,
)

__all__ = [
    "BLOCK",
    "CONFORMANCE_SIGNATURE",
    "BackendConformance",
    "ConformanceTarget",
    "CudaLikeSimulatedSuite",
    "FakeTensor",
    "HostBackedTensor",
    "LaunchCheck",
    "RecordingBackend",
    "assert_installed_backend",
    "assert_vendor_compiler_missing",
    "conformance_axpy",
    "default_args",
    "expected_params",
    "fresh_backend",
    "installed_as_current",
    "pack_layout",
    "simulated_target",
]
