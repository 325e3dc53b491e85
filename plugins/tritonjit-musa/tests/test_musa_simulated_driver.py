"""musa against the simulated driver (a SIMULATED Moore Threads libmusa.so): nothing here ran on Moore Threads MUSA
hardware.

Moore Threads' Triton (FlagTree mthreads backend) is not installable here, so the variants carry a stand-in binary: a
host ELF built by gcc that exports the kernel's name. The plugin's real load -> prepare -> pack_args -> launch code
runs against the simulated libmusa.so, which checks the ELF and the kernel symbol, the launch geometry
(block = num_warps x warp 32 from MP 3.x) and the argument buffer byte by byte. The tests are tritonjit.testing's
CudaLikeSimulatedSuite; this module states MUSA's facts.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tritonjit.testing import CudaLikeSimulatedSuite
from tritonjit_musa import MusaBackend
from tritonjit_musa._backend import warp_size_of


class TestMusaOnSimulatedDriver(CudaLikeSimulatedSuite):
    plugin_class = MusaBackend
    arch = "31"  # MTT S4000
    warp_size = 32
    max_shared = 72 * 1024
    opt_in_attribute = 8  # MU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (CUDA's numbering)
    device_attributes = {97: 72 * 1024}  # MU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    vendor = "Moore Threads MUSA"
    vendor_triton = "Moore Threads"
    library = "libmusa.so"
    launch_symbol = "muLaunchKernel"


@pytest.mark.parametrize("capability,warp", [(21, 128), (22, 128), (30, 32), (31, 32)])
def test_warp_is_128_before_mp3_and_32_from_it(capability, warp):
    assert warp_size_of(capability) == warp
    assert MusaBackend().compile_target(None, str(capability)).warp_size == warp
