"""Shared mechanics for backend plugin authors.

A CUDA-like vendor plugin is a :class:`DriverBackend` subclass with its facts
(``info``, ``driver_spec``) and its compile target; everything else is here once:

- :class:`DriverSpec` / :class:`CudaLikeDriver`: a ctypes binding of a CUDA-like
  driver API, parameterized by symbol prefix, flavor and library names, with
  :class:`DriverError` naming the symbol, the kernel and the vendor's error string;
  :func:`check_launch` / :func:`c_int_arg` refuse a value its fixed-width C types
  would truncate (ctypes passes 2**32 + 3 as an unsigned int 3).
- :class:`TorchDevices`: the device hooks (``device_of``, ``current_device``,
  ``current_stream``, ``device_guard``) and the autotuner's device facts
  (``synchronize``, ``device_name``, ``benchmarker``) over the vendor's torch device
  module, for every plugin, CUDA-like or not; :func:`wall_clock_bench`, the timer
  they fall back to.
- :func:`compile_with_vendor_triton` / :class:`VendorCompilerMissing`: compiling with
  the vendor's Triton, or one clear error naming what to install.
- :func:`find_library` / :func:`find_libraries`: locating the runtime library (or the
  several a runtime is split over) and saying what was looked for.
- :class:`ArgLayout` / :class:`PackedArgs`: argument packing by Triton type with
  natural alignment (per-vendor type remaps, bf16 rounding or truncation), plus the
  ``void**`` kernel-params array.
- :func:`build_simulated_driver` / :class:`SimulatedDriver` / :func:`make_stub_elf` /
  :func:`stand_in_variant`: the SIMULATED driver for tests on machines without the
  hardware.

Plugins whose driver is not CUDA-like (NPU, MLU, GCU) still use the device mixin,
argument layout, library search, error type and the simulated-driver tooling.
"""

from .._timing import wall_clock_bench
from ._args import (
    SCALAR_CODES,
    ArgLayout,
    ArgSlot,
    PackedArgs,
    param_names,
    runtime_types,
    scratch_params,
)
from ._backend import DriverBackend, LaunchState, LoadedKernel
from ._compile import (
    VendorCompilerMissing,
    arch_override,
    compile_with_vendor_triton,
    require_triton_backend,
    triton_backend_for,
)
from ._devices import TorchDevices
from ._driver import CudaLikeDriver, DriverError, DriverSpec, c_int_arg, check_launch
from ._library import LibraryNotFound, LibrarySearch, LibrarySet, find_libraries, find_library, sdk_lib_dirs
from ._simdriver import (
    CompilerMissing,
    LaunchRecord,
    SimulatedDriver,
    build_simulated_driver,
    make_stub_elf,
    stand_in_variant,
)

__all__ = [
    "SCALAR_CODES",
    "ArgLayout",
    "ArgSlot",
    "CompilerMissing",
    "CudaLikeDriver",
    "DriverBackend",
    "DriverError",
    "DriverSpec",
    "LaunchRecord",
    "LaunchState",
    "LibraryNotFound",
    "LibrarySearch",
    "LibrarySet",
    "LoadedKernel",
    "PackedArgs",
    "SimulatedDriver",
    "TorchDevices",
    "VendorCompilerMissing",
    "arch_override",
    "build_simulated_driver",
    "c_int_arg",
    "check_launch",
    "compile_with_vendor_triton",
    "find_libraries",
    "find_library",
    "make_stub_elf",
    "param_names",
    "require_triton_backend",
    "runtime_types",
    "scratch_params",
    "sdk_lib_dirs",
    "stand_in_variant",
    "triton_backend_for",
    "wall_clock_bench",
]
