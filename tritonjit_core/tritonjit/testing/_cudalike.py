"""The test suite of a CUDA-like driver plugin run on the SIMULATED driver with a stand-in binary.

For vendors whose Triton is not installable here (Iluvatar CoreX, MetaX MACA, Moore
Threads MUSA, ...): the plugin is a :class:`tritonjit.pluginkit.DriverBackend`, the
driver is pluginkit's simulated one built with the vendor's symbol names, and each
variant carries a stand-in binary (a gcc-built host ELF exporting the kernel names,
NOT a device binary). Nothing run by this suite touches vendor hardware.

A plugin's test module states only its vendor's facts::

    class TestMusaOnSimulatedDriver(CudaLikeSimulatedSuite):
        plugin_class = MusaBackend
        arch = "31"
        warp_size = 32
        max_shared = 72 * 1024
        device_attributes = {97: 72 * 1024}  # MU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        opt_in_attribute = 8
        vendor = "Moore Threads MUSA"
        vendor_triton = "Moore Threads"
        library = "libmusa.so"
        launch_symbol = "muLaunchKernel"

and inherits the conformance suite (:class:`BackendConformance`) plus the checks every
such plugin owes: the block is ``num_warps x warp size`` and the argument bytes are
Triton's layout; a value that the driver's fixed-width C types would truncate (a
grid dimension of 2**32 + 3, a stream past 64 bits) is refused, not launched; a
kernel missing from the binary is named; the user path without the
vendor's Triton is a :class:`tritonjit.CompilationError` saying what to install and
caches nothing; a missing library leaves the plugin inert and says how to point at it.
The facts are stated by the test, independently of the plugin's own ``DriverSpec``,
so a wrong symbol, warp size or library name in the plugin fails here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from .._errors import BackendError, CompilationError, GridError
from ..pluginkit import (
    CompilerMissing,
    DriverBackend,
    DriverError,
    SimulatedDriver,
    build_simulated_driver,
    make_stub_elf,
    stand_in_variant,
)
from ._install import installed_as_current
from ._kernels import CONFORMANCE_SIGNATURE
from ._suite import BackendConformance
from ._target import ConformanceTarget, HostBackedTensor, expected_params, simulated_target

#: kernels the stand-in ELF exports: the conformance kernel and the user-path kernel
STAND_IN_KERNELS = ("conformance_axpy", "stand_in_scale")


class CudaLikeSimulatedSuite(BackendConformance):
    """Subclass as ``Test<Vendor>...`` and set the vendor's facts below."""

    plugin_class: ClassVar[type[DriverBackend]]  # the DriverBackend subclass under test
    arch: ClassVar[str]  # an architecture its compile_target accepts with no device
    warp_size: ClassVar[int]  # the block is num_warps x this
    max_shared: ClassVar[int]  # shared memory a block may use on the simulated device
    static_shared: ClassVar[int] = 48 * 1024  # usable without opting in
    opt_in_attribute: ClassVar[int] = -1  # function attribute that opts in to more (-1: none)
    device_attributes: ClassVar[dict[int, int]] = {}  # what xDeviceGetAttribute answers
    vendor: ClassVar[str]  # display name: "Iluvatar CoreX"
    vendor_triton: ClassVar[str]  # the missing-compiler error must name this ("Iluvatar")
    library: ClassVar[str]  # the driver library's file name the plugin looks for
    launch_symbol: ClassVar[str]  # the driver's launch entry ("cuLaunchKernel")

    # ---- fixtures: the simulated driver, built once per vendor ---------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def sim_path(cls, tmp_path_factory: pytest.TempPathFactory) -> str:
        try:
            return build_simulated_driver(cls.plugin_class.driver_spec,
                                          tmp_path_factory.mktemp(f"sim{cls.backend_name()}"))
        except CompilerMissing as exc:
            pytest.skip(str(exc))

    @pytest.fixture(scope="class")
    @classmethod
    def stand_in_elf(cls, sim_path: str) -> bytes:
        """A gcc-built host ELF exporting the kernel names: NOT a device binary of the vendor."""
        return make_stub_elf(STAND_IN_KERNELS)

    @pytest.fixture
    def sim(self, sim_path: str) -> SimulatedDriver:
        s = SimulatedDriver(sim_path)
        s.configure(devices=1, warp_size=self.warp_size, max_threads=1024, static_shared=self.static_shared,
                    max_shared=self.max_shared, dynamic_shared_attr=self.opt_in_attribute)
        for attr, value in self.device_attributes.items():
            s.set_attribute(attr, value)
        s.reset()
        return s

    @pytest.fixture
    def conformance(self, sim: SimulatedDriver, sim_path: str, stand_in_elf: bytes) -> ConformanceTarget:
        plugin = self.plugin_class(library=sim_path)
        name = self.backend_name()
        return simulated_target(
            plugin, sim, name, self.stand_in(plugin, stand_in_elf), launch_symbol=self.launch_symbol,
            entry_point=name, arch=self.arch, unavailable_plugin=self.absent_plugin,
            missing_library=self.library, max_shared=self.max_shared,
        )

    # ---- helpers ---------------------------------------------------------------------------------
    @classmethod
    def backend_name(cls) -> str:
        return cls.plugin_class.info.name

    @classmethod
    def absent_plugin(cls) -> Any:
        """The plugin pointed at a library path that does not exist."""
        return cls.plugin_class(library=f"/nonexistent/{cls.library}")

    def stand_in(self, plugin: Any, elf: bytes) -> Any:
        """The conformance target's ``variant``: the stand-in ELF with Triton's metadata."""
        def variant(fn: Any, sig: str, opts: dict) -> Any:
            return stand_in_variant(fn.name, sig, plugin.compile_target(None, self.arch), elf,
                                    num_warps=opts["num_warps"])
        return variant

    # ---- what every CUDA-like plugin owes, beyond the conformance suite ------------------------
    def test_block_is_num_warps_times_warp_size(self, sim: SimulatedDriver, sim_path: str,
                                                stand_in_elf: bytes) -> None:
        torch = pytest.importorskip("torch")
        plugin = self.plugin_class(library=sim_path)
        compiled = stand_in_variant("conformance_axpy", CONFORMANCE_SIGNATURE, plugin.compile_target(None, self.arch),
                                    stand_in_elf, num_warps=8)
        sim.expect_params("conformance_axpy", [8, 8, 8, 4, 4])
        state = plugin.prepare(compiled, plugin.load(compiled, 0), 0)
        x, y, out = torch.zeros(4), torch.zeros(4), torch.zeros(4)
        plugin.launch(state, (2, 3, 1), 7, plugin.pack_args(state, (x, y, out, 4, 0.5)))
        rec = sim.launches()[-1]
        assert rec.block == (8 * self.warp_size, 1, 1) and rec.grid == (2, 3, 1) and rec.stream == 7
        assert rec.params == expected_params(compiled, (x, y, out, 4, 0.5))

    def test_values_the_driver_would_truncate_are_refused(self, sim: SimulatedDriver, sim_path: str,
                                                          stand_in_elf: bytes) -> None:
        """Below the core's grid check: ctypes passes 2**32 + 3 as an unsigned int 3, so
        the fused launcher, the launch hook and the device queries refuse such values."""
        torch = pytest.importorskip("torch")
        plugin = self.plugin_class(library=sim_path)
        compiled = stand_in_variant("conformance_axpy", CONFORMANCE_SIGNATURE, plugin.compile_target(None, self.arch),
                                    stand_in_elf, num_warps=4)
        sim.expect_params("conformance_axpy", [8, 8, 8, 4, 4])
        state = plugin.prepare(compiled, plugin.load(compiled, 0), 0)
        launcher = plugin.make_launcher(state)
        args = (torch.zeros(4), torch.zeros(4), torch.zeros(4), 4, 0.5)
        bad_grids: list[Any] = [(2**32 + 3, 1, 1), (1, 2**32, 1), (1, 1, 2**33 + 1), (0, 1, 1), (-1, 1, 1),
                                (float("nan"), 1, 1)]  # a float too: what a caller might pass
        for grid in bad_grids:
            with pytest.raises(GridError, match=f"conformance_axpy.*{self.launch_symbol}"):
                launcher(grid, 7, args)
            with pytest.raises(GridError, match="refused rather than truncated"):
                plugin.launch(state, grid, 7, plugin.pack_args(state, args))
        for stream in (2**64, 2**64 + 7, -1):
            with pytest.raises(BackendError, match="stream handle"):
                launcher((1, 1, 1), stream, args)
            with pytest.raises(BackendError, match="stream handle"):
                plugin.launch(state, (1, 1, 1), stream, plugin.pack_args(state, args))
        with pytest.raises(BackendError, match="device"):
            plugin.driver().device_attribute(1, 2**32)
        assert sim.launches() == [], "nothing may reach the driver"
        launcher((2**31 - 1, 65535, 3), 2**64 - 1, args)  # the largest grid the (simulated) device takes
        rec = sim.launches()[-1]
        assert rec.grid == (2**31 - 1, 65535, 3) and rec.stream == 2**64 - 1

    def test_kernel_missing_from_binary_names_it(self, sim: SimulatedDriver, sim_path: str,
                                                 stand_in_elf: bytes) -> None:
        plugin = self.plugin_class(library=sim_path)
        compiled = stand_in_variant("not_in_the_binary", CONFORMANCE_SIGNATURE,
                                    plugin.compile_target(None, self.arch), stand_in_elf)
        with pytest.raises(DriverError, match="not_in_the_binary"):
            plugin.load(compiled, 0)

    def test_user_path_without_vendor_triton_says_what_to_install(self, sim_path: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        torch = pytest.importorskip("torch")
        import triton
        import triton.language as tl

        from .._function import function

        @triton.jit
        def stand_in_scale(x, out, n, s, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out + offs, tl.load(x + offs, mask=offs < n) * s, mask=offs < n)

        name = self.backend_name()
        device_type = self.plugin_class.info.device_type
        monkeypatch.setenv(f"TRITONJIT_{name.upper()}_ARCH", self.arch)
        with installed_as_current(self.plugin_class(library=sim_path)):
            f = function(stand_in_scale)
            with pytest.raises(CompilationError, match=self.vendor_triton):
                f[(1,)](HostBackedTensor(torch.ones(8), device_type), HostBackedTensor(torch.empty(8), device_type),
                        8, 2.0, BLOCK=128)
            assert f.variants() == []  # nothing half-built was cached

    def test_info_reports_missing_library_and_stays_inert(self) -> None:
        assert self.library in self.plugin_class.driver_spec.libraries
        ok, reason = self.absent_plugin().availability()
        assert not ok and self.library in reason, f"{self.vendor} plugin without its library: {reason}"
        assert f"TRITONJIT_{self.backend_name().upper()}_DRIVER_LIB" in reason, reason
        assert self.absent_plugin().device_count() == 0
