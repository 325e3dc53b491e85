"""musa against a SIMULATED Moore Threads MUSA driver: nothing here ran on Moore Threads MUSA hardware.

Moore Threads' Triton (FlagTree mthreads backend) is not installable here, so the variants carry a stand-in binary: a host
ELF built by gcc that exports the kernel's name. The plugin's real load -> prepare
-> pack_args -> launch code runs against the simulated libmusa.so, which checks the ELF
and the kernel symbol, the launch geometry (block = num_warps x warp 32) and the
argument buffer byte by byte.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import triton
import triton.language as tl
import tritonjit
from tritonjit import CompilationError
from tritonjit.pluginkit import (
    CompilerMissing,
    DriverError,
    SimulatedDriver,
    build_simulated_driver,
    make_stub_elf,
    stand_in_variant,
)
from tritonjit.testing import (
    CONFORMANCE_SIGNATURE,
    BackendConformance,
    ConformanceTarget,
    HostBackedTensor,
    expected_params,
    installed_as_current,
    simulated_target,
)
from tritonjit_musa import MusaBackend

ARCH = "31"
MAX_SHARED = 72 * 1024


@pytest.fixture(scope="session")
def sim_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        return build_simulated_driver(MusaBackend.driver_spec, tmp_path_factory.mktemp("simmusa"))
    except CompilerMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def stand_in_elf(sim_path: str) -> bytes:
    """A gcc-built host ELF exporting the kernel names: NOT a Moore Threads MUSA device binary."""
    return make_stub_elf(["conformance_axpy", "musa_scale"])


@pytest.fixture
def sim(sim_path: str) -> SimulatedDriver:
    s = SimulatedDriver(sim_path)
    s.configure(devices=1, warp_size=32, max_threads=1024, static_shared=48 * 1024, max_shared=MAX_SHARED, dynamic_shared_attr=8)
    s.set_attribute(97, MAX_SHARED)
    s.reset()
    return s



def stand_in(plugin, elf):
    def variant(fn, sig, opts):
        return stand_in_variant(fn.name, sig, plugin.compile_target(None, ARCH), elf, num_warps=opts["num_warps"])
    return variant


class TestMusaBackendConformanceSimulatedDriver(BackendConformance):
    @pytest.fixture
    def conformance(self, sim, sim_path, stand_in_elf) -> ConformanceTarget:
        plugin = MusaBackend(library=sim_path)
        return simulated_target(
            plugin, sim, "musa", stand_in(plugin, stand_in_elf), launch_symbol="muLaunchKernel",
            entry_point="musa", arch=ARCH,
            unavailable_plugin=lambda: MusaBackend(library="/nonexistent/libmusa.so"),
            missing_library="libmusa.so", max_shared=MAX_SHARED,
        )


def test_block_is_num_warps_times_warp_32(sim, sim_path, stand_in_elf):
    plugin = MusaBackend(library=sim_path)
    compiled = stand_in_variant("conformance_axpy", CONFORMANCE_SIGNATURE, plugin.compile_target(None, ARCH),
                                stand_in_elf, num_warps=8)
    sim.expect_params("conformance_axpy", [8, 8, 8, 4, 4])
    state = plugin.prepare(compiled, plugin.load(compiled, 0), 0)
    x, y, out = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    plugin.launch(state, (2, 3, 1), 7, plugin.pack_args(state, (x, y, out, 4, 0.5)))
    rec = sim.launches()[-1]
    assert rec.block == (8 * 32, 1, 1) and rec.grid == (2, 3, 1) and rec.stream == 7
    assert rec.params == expected_params(compiled, (x, y, out, 4, 0.5))


def test_kernel_missing_from_binary_names_it(sim, sim_path, stand_in_elf):
    plugin = MusaBackend(library=sim_path)
    compiled = stand_in_variant("not_in_the_binary", CONFORMANCE_SIGNATURE, plugin.compile_target(None, ARCH),
                                stand_in_elf)
    with pytest.raises(DriverError, match="not_in_the_binary"):
        plugin.load(compiled, 0)


def test_user_path_without_vendor_triton_says_what_to_install(sim_path, monkeypatch):
    @triton.jit
    def musa_scale(x, out, n, s, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * s, mask=offs < n)

    monkeypatch.setenv("TRITONJIT_MUSA_ARCH", ARCH)
    with installed_as_current(MusaBackend(library=sim_path)):
        f = tritonjit.function(musa_scale)
        with pytest.raises(CompilationError, match="Moore Threads"):
            f[(1,)](HostBackedTensor(torch.ones(8), "musa"), HostBackedTensor(torch.empty(8), "musa"), 8, 2.0,
                    BLOCK=128)
        assert f.variants() == []  # nothing half-built was cached


def test_info_reports_missing_library_and_stays_inert():
    ok, reason = MusaBackend(library="/nonexistent/libmusa.so").availability()
    assert not ok and "libmusa.so" in reason and "TRITONJIT_MUSA_DRIVER_LIB" in reason
    assert MusaBackend(library="/nonexistent/libmusa.so").device_count() == 0
