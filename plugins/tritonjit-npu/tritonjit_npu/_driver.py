"""ctypes bindings of the Ascend runtime calls the plugin makes (CANN ``acl`` + ``rt``).

The symbols and signatures are CANN's public headers (``acl/acl_rt.h``,
``runtime/rt.h``), the same calls libtriton_jit's ``NpuBackend`` makes. The libraries
are ``libascendcl.so`` (acl*) and ``libruntime.so`` (rt*), found under
``$ASCEND_HOME_PATH`` / ``$ASCEND_TOOLKIT_HOME`` / ``/usr/local/Ascend/ascend-toolkit/latest``
or the loader's path. ``TRITONJIT_NPU_DRIVER_LIB`` names one library exporting both sets
instead (the tests point it at their simulated driver).
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_char_p, c_int32, c_uint16, c_uint32, c_uint64, c_void_p

from tritonjit import BackendError
from tritonjit.pluginkit import LibraryNotFound, LibrarySet, find_libraries, sdk_lib_dirs

ENV_DRIVER = "TRITONJIT_NPU_DRIVER_LIB"
LIBRARIES = ("libascendcl.so", "libruntime.so")
_ENV_DIRS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
_DEFAULT_DIRS = ("/usr/local/Ascend/ascend-toolkit/latest",)

RT_ERROR_NONE = 0
RT_MEMORY_HBM = 0x2
RT_MEMCPY_HOST_TO_DEVICE = 1
ACL_CALLBACK_BLOCK = 1
# rtDevBinary_t.magic by the kernel's mix mode (runtime/rt.h)
RT_DEV_BINARY_MAGIC_ELF = 0x43554245
RT_DEV_BINARY_MAGIC_ELF_AIVEC = 0x41415246


class RtDevBinary(ctypes.Structure):
    """``rtDevBinary_t``: the kernel binary handed to rtDevBinaryRegister."""

    _fields_ = [("magic", c_uint32), ("version", c_uint32), ("data", c_void_p), ("length", c_uint64)]


ACL_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p)


class NpuDriverError(BackendError):
    """An ACL / rt call returned an error code."""


class AscendDriver:
    """The bound runtime functions, resolved once; ``where`` says what was loaded."""

    def __init__(self, libs: LibrarySet) -> None:
        self.simulated = libs.simulated
        self.where = libs.reason()
        self._libs = libs  # keep the libraries open
        b = libs.bind
        self.rtGetDeviceCount = b("rtGetDeviceCount", c_int32, [POINTER(c_int32)])
        self.rtSetDevice = b("rtSetDevice", c_int32, [c_int32])
        self.aclrtGetDevice = b("aclrtGetDevice", c_int32, [POINTER(c_int32)])
        self.aclrtSetDevice = b("aclrtSetDevice", c_int32, [c_int32])
        self.aclrtGetSocName = b("aclrtGetSocName", c_char_p, [])
        self.rtDevBinaryRegister = b("rtDevBinaryRegister", c_int32, [POINTER(RtDevBinary), POINTER(c_void_p)])
        self.rtFunctionRegister = b("rtFunctionRegister", c_int32,
                                    [c_void_p, c_void_p, c_char_p, c_void_p, c_uint32])
        self.rtGetC2cCtrlAddr = b("rtGetC2cCtrlAddr", c_int32, [POINTER(c_uint64), POINTER(c_uint32)])
        self.rtMalloc = b("rtMalloc", c_int32, [POINTER(c_void_p), c_uint64, c_uint32, c_uint16])
        self.rtFree = b("rtFree", c_int32, [c_void_p])
        self.rtMemcpy = b("rtMemcpy", c_int32, [c_void_p, c_uint64, c_void_p, c_uint64, c_uint32])
        self.rtKernelLaunch = b("rtKernelLaunch", c_int32,
                                [c_void_p, c_uint32, c_void_p, c_uint32, c_void_p, c_void_p])
        self.aclrtLaunchCallback = b("aclrtLaunchCallback", c_int32, [ACL_CALLBACK, c_void_p, c_uint32, c_void_p])
        # frees a workspace once the kernels queued before it on the stream are done
        self.free_callback = ACL_CALLBACK(self._free_after_kernel)

    def _free_after_kernel(self, ptr: int | None) -> None:
        if ptr:
            self.rtFree(ptr)

    # ---- small wrappers ---------------------------------------------------------------
    def check(self, code: int, call: str) -> None:
        if code != RT_ERROR_NONE:
            raise NpuDriverError(f"{call} failed with error {code} (driver: {self.where})")

    def device_count(self) -> int:
        n = c_int32(0)
        self.check(self.rtGetDeviceCount(ctypes.byref(n)), "rtGetDeviceCount")
        return n.value

    def get_device(self) -> int:
        d = c_int32(0)
        return d.value if self.aclrtGetDevice(ctypes.byref(d)) == 0 else 0

    def soc_name(self) -> str:
        name = self.aclrtGetSocName()
        return name.decode() if name else ""

    def ffts_address(self) -> int:
        addr, length = c_uint64(0), c_uint32(0)
        self.check(self.rtGetC2cCtrlAddr(ctypes.byref(addr), ctypes.byref(length)), "rtGetC2cCtrlAddr")
        return addr.value

    def malloc(self, size: int) -> int:
        ptr = c_void_p(0)
        self.check(self.rtMalloc(ctypes.byref(ptr), size, RT_MEMORY_HBM, 0), f"rtMalloc({size} bytes)")
        return ptr.value or 0


_lock = threading.Lock()
_driver: AscendDriver | None = None


def load_driver() -> AscendDriver:
    """The process's driver bindings (opened once); raises LibraryNotFound saying
    which libraries were looked for."""
    global _driver
    if _driver is None:
        with _lock:
            if _driver is None:
                # RTLD_GLOBAL: libruntime.so resolves symbols of libascendcl.so
                libs = find_libraries([(name,) for name in LIBRARIES], ENV_DRIVER,
                                      sdk_lib_dirs(_ENV_DIRS, _DEFAULT_DIRS, subdirs=("lib64", "lib")),
                                      mode=ctypes.RTLD_GLOBAL).require()
                _driver = AscendDriver(libs)
    return _driver


def reset_driver() -> None:
    """Forget the opened driver (tests switch between driver libraries)."""
    global _driver
    with _lock:
        _driver = None


__all__ = ["AscendDriver", "LibraryNotFound", "NpuDriverError", "load_driver", "reset_driver"]
