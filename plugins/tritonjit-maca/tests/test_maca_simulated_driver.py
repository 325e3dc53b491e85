"""maca against the simulated driver (a SIMULATED MetaX libmcruntime.so): nothing here ran on MetaX MACA hardware.

MetaX's Triton (FlagTree metax backend) is not installable here, so the variants carry a stand-in binary: a host ELF
built by gcc that exports the kernel's name. The plugin's real load -> prepare -> pack_args -> launch code runs
against the simulated libmcruntime.so, which checks the ELF and the kernel symbol, the launch geometry
(block = num_warps x warp 64) and the argument buffer byte by byte. The tests are tritonjit.testing's
CudaLikeSimulatedSuite; this module states MACA's facts.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tritonjit.testing import CudaLikeSimulatedSuite
from tritonjit_maca import MacaBackend


class TestMacaOnSimulatedDriver(CudaLikeSimulatedSuite):
    plugin_class = MacaBackend
    arch = "80"
    warp_size = 64
    max_shared = 64 * 1024  # C500; no public attribute to query it, so no opt-in either
    static_shared = 64 * 1024
    vendor = "MetaX MACA"
    vendor_triton = "MetaX"
    library = "libmcruntime.so"
    launch_symbol = "mcModuleLaunchKernel"
