"""A complete backend for CUDA-like vendor drivers: a plugin is this class plus its facts.

:class:`DriverBackend` implements every hook of the contract (``tritonjit._hookspecs``)
over a :class:`CudaLikeDriver`. A vendor plugin subclasses it, sets ``info`` and
``driver_spec``, and overrides only what is truly its own: the compile target, a
compile hook where its Triton is not upstream's, how its torch extension exposes
devices and streams (``torch_module``, ``stream_attr``; the device hooks themselves
are :class:`TorchDevices`'). Facts with a default here: the argument ABI
(``abi_types``, ``bf16``), architectures as capability numbers (``target``), and a
``compile`` hook that says which vendor Triton to install when it is missing
(``vendor_triton``). The core's ModuleCache keeps what ``load`` returns, so nothing
here caches modules.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._backend import BackendInfo, CompiledVariant
from .._errors import BackendError
from .._hookspecs import hookimpl
from ._args import ArgLayout, Bf16Rounding, PackedArgs
from ._compile import arch_override, compile_with_vendor_triton
from ._devices import TorchDevices
from ._driver import PTR_MAX, U32_MAX, CudaLikeDriver, DriverSpec, check_launch
from ._library import LibrarySearch

MAX_THREADS_PER_BLOCK = 1024


@dataclass
class LoadedKernel:
    """What ``load`` returns (and the core's ModuleCache keeps): module + function."""

    module: int
    function: int
    name: str


@dataclass
class LaunchState:
    """What ``prepare`` returns: everything a launch needs, computed once."""

    name: str
    function: int
    layout: ArgLayout
    block_x: int
    shared: int
    device: int
    driver: CudaLikeDriver


class DriverBackend(TorchDevices):
    """Hook implementations shared by every CUDA-like vendor plugin."""

    info: BackendInfo
    driver_spec: DriverSpec
    #: the torch attribute or extension module of the vendor's device ("cuda", "torch_musa")
    torch_module: str | None = None
    #: extension imported first to register the device with torch ("torch_musa")
    torch_extension: str | None = None
    #: Triton type -> the type the vendor's launcher passes it as ({"i1": "i32"})
    abi_types: Mapping[str, str] = {}
    #: how bf16 scalars are made from Python floats (the vendor launcher's way)
    bf16: Bf16Rounding = "nearest_even"
    #: the Triton to install for this vendor ("Moore Threads' Triton (FlagTree mthreads backend)");
    #: None: the installed Triton compiles for the target as it is
    vendor_triton: str | None = None
    #: insist on the Triton backend of this name (where another would accept the target)
    vendor_triton_backend: str | None = None
    #: what an architecture looks like, for the error on a bad one
    arch_example: str = "a capability number like 80"

    def __init__(self, library: str | None = None) -> None:
        """``library``: an explicit driver library path (tests pass the simulated one)."""
        self._explicit = library
        self._driver: CudaLikeDriver | None = None
        self._search: LibrarySearch | None = None
        self._lock = threading.Lock()

    # ---- the driver, opened lazily and once -------------------------------------------------
    def _open(self) -> tuple[CudaLikeDriver | None, LibrarySearch]:
        if self._search is None:
            with self._lock:
                if self._search is None:
                    self._driver, self._search = CudaLikeDriver.open(self.driver_spec, self._explicit)
        return self._driver, self._search

    def driver(self) -> CudaLikeDriver:
        drv, search = self._open()
        if drv is None:
            raise BackendError(f"backend '{self.info.name}': {self.driver_spec.vendor} runtime unavailable: "
                               f"{search.reason()}")
        return drv

    # ---- the vendor's torch extension (devices, streams), when present ------------------------
    def find_torch_module(self) -> Any:
        """The vendor's torch device module (``torch.cuda`` on ROCm, ``torch.musa``...),
        or None when torch or the vendor's build of it is absent."""
        if self.torch_module is None:
            return None
        try:
            import torch

            if self.torch_extension:
                importlib.import_module(self.torch_extension)
            mod = getattr(torch, self.torch_module, None)
            if mod is None:
                mod = importlib.import_module(self.torch_module)
            if not mod.is_available() or not self.is_vendor_torch(torch):
                return None
            return mod
        except Exception:  # noqa: BLE001 - a broken vendor torch means "absent"
            return None

    def is_vendor_torch(self, torch: Any) -> bool:
        """Whether this torch build drives this vendor's devices (override per vendor)."""
        return True

    # ---- identity and availability ------------------------------------------------------------
    @hookimpl
    def backend_info(self) -> BackendInfo:
        return self.info

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        drv, search = self._open()
        vendor = self.driver_spec.vendor
        if drv is None:
            return False, f"{vendor} runtime library not found: {search.reason()}"
        n = drv.device_count()
        if n <= 0:
            return False, f"{search.reason()} loaded, but it reports no {vendor} device"
        return True, f"{n} {vendor} device(s) through the {search.reason()}"

    @hookimpl
    def device_count(self) -> int:
        drv, _ = self._open()
        return 0 if drv is None else drv.device_count()

    # ---- compilation ----------------------------------------------------------------------------
    @hookimpl
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        if arch is None:
            arch = self.device_arch(0 if device is None else device)
        return self.target(arch)

    def target(self, arch: str) -> Any:
        """Triton ``GPUTarget`` for a named architecture: by default a capability
        number, ``GPUTarget(info.triton_backend, capability, warp_size_of(capability))``."""
        from triton.backends.compiler import GPUTarget

        if not str(arch).isdigit():
            raise ValueError(f"{self.info.name} architecture is {self.arch_example}, got '{arch}'")
        capability = int(arch)
        return GPUTarget(self.info.triton_backend, capability, self.warp_size_of(capability))

    def warp_size_of(self, capability: int) -> int:
        """Warp size of an architecture (override where it differs by generation)."""
        return self.info.warp_size

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        """The vendor's Triton compiles; without it, an error saying what to install."""
        if self.vendor_triton is None:
            import triton

            return triton.compile(src, target=target, options=options)
        return compile_with_vendor_triton(src, target, options, needed=self.vendor_triton,
                                          backend_name=self.info.name, binary_ext=self.info.binary_ext,
                                          only=self.vendor_triton_backend)

    def device_arch(self, device: int) -> str:
        """Architecture of a device of this machine (from the vendor's torch)."""
        override = arch_override(self.info.name)
        if override:
            return override
        mod = self.torch_device_module()
        if mod is None:
            raise BackendError(f"backend '{self.info.name}': cannot tell the architecture of device {device} "
                               f"without the vendor's torch; set TRITONJIT_{self.info.name.upper()}_ARCH or pass a "
                               f"target such as '{self.info.name}:<arch>'")
        major, minor = mod.get_device_capability(device)
        return f"{major * 10 + minor}"

    # ---- the kernel lifecycle ---------------------------------------------------------------------
    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> LoadedKernel:
        drv = self.driver()
        ext = self.info.binary_ext
        image = kernel.binary
        if image is None:
            path = kernel.binary_path(ext)
            if path is not None:
                with open(path, "rb") as f:
                    image = f.read()
        if not image:
            raise BackendError(f"kernel '{kernel.name}': the compiled variant has no .{ext} binary for the "
                               f"{self.info.name} backend (target {kernel.target})")
        drv.ensure_context(device)
        module = drv.load_module(image, kernel.name)
        try:
            function = drv.get_function(module, kernel.name)
        except Exception:
            drv.unload(module)
            raise
        return LoadedKernel(module, function, kernel.name)

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: LoadedKernel, device: int) -> LaunchState:
        drv = self.driver()
        name = kernel.name
        for key in ("global_scratch_size", "profile_scratch_size"):
            if int(kernel.metadata.get(key) or 0) > 0:
                raise BackendError(f"kernel '{name}' needs {kernel.metadata[key]} bytes of {key[:-5]} per program; "
                                   f"the {self.info.name} backend does not allocate it yet")
        warp = int(kernel.metadata.get("warp_size") or getattr(kernel.target, "warp_size", 0) or self.info.warp_size)
        block_x = kernel.num_warps * warp
        if block_x > MAX_THREADS_PER_BLOCK:
            raise BackendError(f"kernel '{name}': num_warps={kernel.num_warps} x warp size {warp} = {block_x} threads "
                               f"per block, over the {MAX_THREADS_PER_BLOCK} a block may have")
        shared = kernel.shared
        limit = drv.max_shared(device)
        if shared > limit:
            raise BackendError(f"kernel '{name}' needs {shared} bytes of shared memory per block; "
                               f"{self.driver_spec.vendor} device {device} allows {limit} "
                               f"(use fewer stages or a smaller block)")
        if shared > self.driver_spec.static_shared:
            drv.opt_in_shared(handle.function, shared, name)
        layout = ArgLayout.for_variant(kernel, abi_types=self.abi_types, bf16=self.bf16)
        return LaunchState(name, handle.function, layout, block_x, shared, device, drv)

    @hookimpl
    def pack_args(self, state: LaunchState, args: Sequence[Any]) -> PackedArgs:
        packed = PackedArgs(state.layout)
        state.layout.pack_into(packed.buffer, args)
        return packed

    @hookimpl
    def launch(self, state: LaunchState, grid: tuple[int, int, int], stream: int, packed: PackedArgs) -> None:
        state.driver.launch(state.function, grid, state.block_x, state.shared, stream, packed.params_ptr, state.name)

    @hookimpl
    def make_launcher(self, state: LaunchState) -> Any:
        """pack + launch fused over one reused buffer (a lock keeps threads apart,
        since ctypes releases the GIL during the driver call)."""
        packed = PackedArgs(state.layout)
        buf, params = packed.buffer, packed.params_ptr
        pack_into, fn, lock = state.layout.pack_into, state.driver.launch_fn, threading.Lock()
        function, block_x, shared, name, drv = state.function, state.block_x, state.shared, state.name, state.driver
        symbol = drv.spec.launch_symbol
        check_launch(symbol, name, (1, 1, 1), block_x, shared, None)  # fixed per variant: checked once

        def launcher(grid: tuple[int, int, int], stream: int, args: Sequence[Any], _keep: PackedArgs = packed) -> None:
            # _keep: the buffer and the void** array must live as long as the launcher
            gx, gy, gz = grid
            if not (0 < gx <= U32_MAX and 0 < gy <= U32_MAX and 0 < gz <= U32_MAX
                    and (stream is None or 0 <= stream <= PTR_MAX)):
                check_launch(symbol, name, grid, block_x, shared, stream)  # says which value, and raises
            with lock:
                pack_into(buf, args)
                rc = fn(function, grid[0], grid[1], grid[2], block_x, 1, 1, shared, stream, params, None)
            if rc:
                drv.check(rc, drv.spec.launch_symbol, name, f"grid {grid}, block ({block_x}, 1, 1), shared {shared}")

        return launcher
