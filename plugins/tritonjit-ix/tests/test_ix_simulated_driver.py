"""ix against the simulated driver (a SIMULATED Iluvatar CoreX libcuda.so.1): nothing here ran on Iluvatar CoreX
hardware.

Iluvatar's Triton (FlagTree iluvatar backend) is not installable here, so the variants carry a stand-in binary: a host
ELF built by gcc that exports the kernel's name. The plugin's real load -> prepare -> pack_args -> launch code runs
against the simulated libcuda.so.1, which checks the ELF and the kernel symbol, the launch geometry
(block = num_warps x warp 64) and the argument buffer byte by byte. The tests are tritonjit.testing's
CudaLikeSimulatedSuite; this module states CoreX's facts.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tritonjit.testing import CudaLikeSimulatedSuite
from tritonjit_ix import IxBackend


class TestIxOnSimulatedDriver(CudaLikeSimulatedSuite):
    plugin_class = IxBackend
    arch = "71"
    warp_size = 64
    max_shared = 96 * 1024
    opt_in_attribute = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    device_attributes = {97: 96 * 1024}  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    vendor = "Iluvatar CoreX"
    vendor_triton = "Iluvatar"
    library = "libcuda.so.1"
    launch_symbol = "cuLaunchKernel"
