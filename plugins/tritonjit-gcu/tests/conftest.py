"""Fixtures: tritonjit.pluginkit's SIMULATED driver built with TopsRT's symbols
(topsModuleLoadData, topsModuleGetFunction, topsModuleLaunchKernel, ...) and a gcu
plugin instance bound to it. No GCU hardware is involved anywhere in these tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tritonjit.pluginkit import (
    CompilerMissing,
    SimulatedDriver,
    build_simulated_driver,
    make_stub_elf,
)
from tritonjit_gcu import GcuBackend

KERNELS = ("conformance_axpy", "flag_kernel")
MAX_SHARED = 64 * 1024 * 1024


@pytest.fixture(scope="session")
def tops_sim_build(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    out = tmp_path_factory.mktemp("tops_sim")
    try:
        lib = build_simulated_driver(GcuBackend.driver_spec, out)
        elf = make_stub_elf(KERNELS, out)
    except CompilerMissing as exc:
        pytest.skip(str(exc))
    return SimpleNamespace(lib=lib, elf=elf)


@pytest.fixture
def tops_sim(tops_sim_build: SimpleNamespace) -> SimulatedDriver:
    s = SimulatedDriver(tops_sim_build.lib)
    s.reset()
    # blockDim.x is num_warps on GCU: any positive block is a whole number of "warps"
    s.configure(devices=1, warp_size=1, max_threads=1024, static_shared=MAX_SHARED, max_shared=MAX_SHARED)
    s.elf = tops_sim_build.elf
    return s


@pytest.fixture
def gcu(tops_sim: SimulatedDriver) -> GcuBackend:
    return GcuBackend(library=tops_sim.path)
