"""ctypes bindings of the Cambricon CNDrv calls the plugin makes (``cn_api.h``).

The calls are FlagTree's Cambricon driver's (third_party/cambricon/backend/driver.c):
``cnSharedContextAcquire``/``cnCtxSetCurrent`` for a per-thread context,
``cnModuleLoadFatBinary``, ``cnModuleGetKernel``, ``cnInvokeKernel``. The library is
``libcndrv.so`` under ``$NEUWARE_HOME/lib64`` (default /usr/local/neuware) or the
loader's path; ``TRITONJIT_MLU_DRIVER_LIB`` names one explicitly (the tests' simulated
driver).

ASSUMED (cn_api.h is not public): the numeric values of the ``CNdevice_attribute``
enumerators below. They are read only to choose the kernel class and check grid
limits; the README lists them.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_uint, c_void_p

from tritonjit import BackendError
from tritonjit.pluginkit import LibrarySearch, find_library

ENV_DRIVER = "TRITONJIT_MLU_DRIVER_LIB"
LIBRARIES = ("libcndrv.so",)

# CNdevice_attribute (ASSUMED values, see the module docstring)
ATTR_MAX_BLOCK_TASK_DIM_X = 0x01
ATTR_MAX_BLOCK_TASK_DIM_Y = 0x02
ATTR_MAX_BLOCK_TASK_DIM_Z = 0x03
ATTR_MAX_CLUSTER_COUNT = 0x04
ATTR_MAX_CORE_COUNT_PER_CLUSTER = 0x05


class MluDriverError(BackendError):
    """A CNDrv call returned an error; names the call, the code and CNDrv's string."""


class CnDriver:
    """The bound CNDrv functions, resolved once."""

    def __init__(self, search: LibrarySearch) -> None:
        self.search = search
        self.where = search.reason()
        lib = search.handle

        def b(name: str, restype: object, argtypes: list) -> object:
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
            return fn

        self.cnInit = b("cnInit", c_int, [c_uint])
        self.cnDeviceGetCount = b("cnDeviceGetCount", c_int, [POINTER(c_int)])
        self.cnDeviceGetAttribute = b("cnDeviceGetAttribute", c_int, [POINTER(c_int), c_int, c_int])
        self.cnSharedContextAcquire = b("cnSharedContextAcquire", c_int, [POINTER(c_void_p), c_int])
        self.cnCtxSetCurrent = b("cnCtxSetCurrent", c_int, [c_void_p])
        self.cnModuleLoadFatBinary = b("cnModuleLoadFatBinary", c_int, [c_void_p, POINTER(c_void_p)])
        self.cnModuleGetKernel = b("cnModuleGetKernel", c_int, [c_void_p, c_char_p, POINTER(c_void_p)])
        self.cnInvokeKernel = b("cnInvokeKernel", c_int,
                                [c_void_p, c_uint, c_uint, c_uint, c_int, c_uint, c_void_p, c_void_p, c_void_p])
        self.cnGetErrorString = b("cnGetErrorString", c_int, [c_int, POINTER(c_char_p)])
        self.check(self.cnInit(0), "cnInit")

    def check(self, code: int, call: str, kernel: str | None = None) -> None:
        if code:
            text = c_char_p()
            msg = text.value.decode() if self.cnGetErrorString(code, ctypes.byref(text)) == 0 and text.value else "?"
            where = f" for kernel '{kernel}'" if kernel else ""
            raise MluDriverError(f"CNDrv {call} failed{where}: error {code}: {msg} ({self.where})")

    def device_count(self) -> int:
        n = c_int(0)
        return n.value if self.cnDeviceGetCount(ctypes.byref(n)) == 0 else 0

    def attribute(self, attr: int, device: int) -> int:
        v = c_int(0)
        self.check(self.cnDeviceGetAttribute(ctypes.byref(v), attr, device), f"cnDeviceGetAttribute({attr})")
        return v.value

    def make_current(self, device: int) -> None:
        """CNDrv has no legacy default context: acquire the device's shared one."""
        ctx = c_void_p()
        self.check(self.cnSharedContextAcquire(ctypes.byref(ctx), device), "cnSharedContextAcquire")
        self.check(self.cnCtxSetCurrent(ctx), "cnCtxSetCurrent")


_lock = threading.Lock()
_cache: dict[str | None, tuple[CnDriver | None, LibrarySearch]] = {}


def open_driver(explicit: str | None = None) -> tuple[CnDriver | None, LibrarySearch]:
    """(driver, search) once per library choice; driver None when absent."""
    key = explicit or os.environ.get(ENV_DRIVER)
    if key not in _cache:
        with _lock:
            if key not in _cache:
                home = os.environ.get("NEUWARE_HOME", "/usr/local/neuware")
                search = find_library(LIBRARIES, ENV_DRIVER, [os.path.join(home, "lib64")], explicit)
                drv = None
                if search.found:
                    try:
                        drv = CnDriver(search)
                    except (AttributeError, MluDriverError) as exc:
                        search.error, search.handle = f"unusable: {exc}", None
                _cache[key] = (drv, search)
    return _cache[key]
