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

The names are imported on first use (PEP 562): a plugin that needs one piece (the CUDA
plugin needs only :class:`TorchDevices`) does not pay for the rest at every process's
discovery, which is part of a warm start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: every public name -> the module that defines it (a test holds it, ``__all__`` and the
#: TYPE_CHECKING imports below equal)
_WHERE: dict[str, str] = {
    "SCALAR_CODES": "._args",
    "ArgLayout": "._args",
    "ArgSlot": "._args",
    "PackedArgs": "._args",
    "param_names": "._args",
    "runtime_types": "._args",
    "scratch_params": "._args",
    "DriverBackend": "._backend",
    "LaunchState": "._backend",
    "LoadedKernel": "._backend",
    "VendorCompilerMissing": "._compile",
    "arch_override": "._compile",
    "compile_with_vendor_triton": "._compile",
    "require_triton_backend": "._compile",
    "triton_backend_for": "._compile",
    "TorchDevices": "._devices",
    "CudaLikeDriver": "._driver",
    "DriverError": "._driver",
    "DriverSpec": "._driver",
    "c_int_arg": "._driver",
    "check_launch": "._driver",
    "LibraryNotFound": "._library",
    "LibrarySearch": "._library",
    "LibrarySet": "._library",
    "find_libraries": "._library",
    "find_library": "._library",
    "sdk_lib_dirs": "._library",
    "CompilerMissing": "._simdriver",
    "LaunchRecord": "._simdriver",
    "SimulatedDriver": "._simdriver",
    "build_simulated_driver": "._simdriver",
    "make_stub_elf": "._simdriver",
    "stand_in_variant": "._simdriver",
    "wall_clock_bench": ".._timing",
}

__all__ = [
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
    "SCALAR_CODES",
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


def __getattr__(name: str) -> Any:
    try:
        where = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names for type checkers and editors
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
