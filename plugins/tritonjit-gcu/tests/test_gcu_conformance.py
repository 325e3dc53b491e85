"""tritonjit's backend conformance suite, run by the gcu plugin against the SIMULATED TopsRT."""

from __future__ import annotations

import pytest
from tritonjit.pluginkit import stand_in_variant
from tritonjit.testing import BackendConformance, simulated_target
from tritonjit_gcu import GcuBackend

MAX_SHARED = 64 * 1024 * 1024  # what conftest configures the simulated device with


class TestGcuConformance(BackendConformance):
    @pytest.fixture
    def conformance(self, gcu, tops_sim):
        def variant(fn, signature, options):
            # stands in for Enflame's triton_gcu, which is not installable here
            return stand_in_variant(fn.name, signature, gcu.compile_target(None, "gcu300"), tops_sim.elf,
                                    num_warps=options.get("num_warps", 4))

        return simulated_target(
            gcu, tops_sim, "gcu", variant, launch_symbol="topsModuleLaunchKernel", entry_point="gcu", arch="gcu300",
            unavailable_plugin=lambda: GcuBackend(library="/nonexistent/libtopsrt.so"),
            missing_library="libtopsrt.so", max_shared=MAX_SHARED,
        )
