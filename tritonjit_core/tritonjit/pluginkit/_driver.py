"""One ctypes binding for every CUDA-like vendor driver, parameterized by symbol prefix.

CUDA, HIP, MUSA, MACA and CoreX all expose the same module-load -> get-function ->
launch shape; they differ in the prefix, in whether the API is a driver API
(``xInit``, contexts, ``xLaunchKernel``) or a runtime API (``xGetDeviceCount``,
``xModuleLaunchKernel``), in the load entry (HIP's ``hipModuleLoadDataEx``) and in
enum values. :class:`DriverSpec` names those differences; :class:`CudaLikeDriver`
binds the symbols once and turns every non-zero result into a :class:`DriverError`
that names the symbol, the kernel and the vendor's own error string.

ctypes converts a Python int to a fixed-width C type by truncation: 2**32 + 3 passed
as an ``unsigned int`` grid dimension arrives as 3, so a kernel would silently run
on another grid. Every value this module hands the driver as a fixed-width type
(grid and block dims, shared-memory bytes, the stream, device indices and
attributes) is checked first (:func:`check_launch`, :func:`c_int_arg`) and refused
with an error that names it; the core's own grid check (``_function.py``) comes
before this one, which is defence in depth for plugins that call the driver
themselves.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import BackendError, GridError
from ._library import LibrarySearch, find_library, sdk_lib_dirs

_u = ctypes.c_uint
_vp = ctypes.c_void_p
_int = ctypes.c_int

#: ranges of the C types the driver entry points take, which ctypes would wrap into
U32_MAX = 2**32 - 1  # unsigned int: grid and block dims, shared-memory bytes
PTR_MAX = 2**64 - 1  # void*: the stream
I32_MIN, I32_MAX = -(2**31), 2**31 - 1  # int: device indices, attributes, byte counts


def _fits(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def check_launch(symbol: str, kernel: str, grid: Any, block_x: Any, shared: Any, stream: Any) -> None:
    """Refuse (GridError for the grid, BackendError for the rest) any launch value that
    the C types of ``symbol`` would truncate, instead of launching something else."""
    if not (isinstance(grid, tuple) and len(grid) == 3 and all(_fits(g, 1, U32_MAX) for g in grid)):
        raise GridError(kernel, f"grid {grid!r} does not fit {symbol}: expected 3 ints from 1 to {U32_MAX} "
                        "(the driver's unsigned int dims); refused rather than truncated")
    for what, v, lo, hi in (("block size", block_x, 1, U32_MAX), ("shared memory bytes", shared, 0, U32_MAX)):
        if not _fits(v, lo, hi):
            raise BackendError(f"{symbol} for kernel '{kernel}': {what} {v!r} does not fit its unsigned int "
                               f"({lo} to {hi}); refused rather than truncated")
    if stream is not None and not _fits(stream, 0, PTR_MAX):
        raise BackendError(f"{symbol} for kernel '{kernel}': stream handle {stream!r} is not a pointer value "
                           f"(an int from 0 to {PTR_MAX}, or None); refused rather than truncated")


def c_int_arg(symbol: str, what: str, v: Any) -> int:
    """``v`` when it fits the C ``int`` that ``symbol`` takes, else BackendError naming it."""
    if not _fits(v, I32_MIN, I32_MAX):
        raise BackendError(f"{symbol}: {what} {v!r} does not fit its int ({I32_MIN} to {I32_MAX}); "
                           "refused rather than truncated")
    return v


class DriverError(BackendError):
    """A driver call returned an error; carries the symbol, the code and the kernel."""

    def __init__(self, vendor: str, symbol: str, code: int, message: str, kernel: str | None = None,
                 detail: str = "") -> None:
        self.vendor, self.symbol, self.code, self.kernel = vendor, symbol, code, kernel
        where = f" for kernel '{kernel}'" if kernel else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(f"{vendor} {symbol} failed{where}: error {code}: {message}{extra}")


@dataclass(frozen=True)
class DriverSpec:
    """What distinguishes one CUDA-like driver from another."""

    vendor: str  # shown in messages: "HIP", "MUSA", ...
    prefix: str  # symbol prefix: "hip", "mu", "mc", "cu"
    libraries: tuple[str, ...]  # file names to look for, first that opens wins
    env_var: str  # TRITONJIT_<VENDOR>_DRIVER_LIB: an explicit library path
    flavor: Literal["driver", "runtime"] = "driver"
    load_ex: bool = False  # xModuleLoadDataEx(module, image, nopts, opts, values)
    contexts: bool = False  # needs a current context before loading (xCtxGetCurrent ...)
    sdk_env: tuple[str, ...] = ()  # env vars naming SDK roots; <root>/lib is searched
    sdk_dirs: tuple[str, ...] = ()  # default SDK roots (/opt/dtk, /usr/local/musa, ...)
    attr_max_shared: int | None = None  # device attribute: max shared memory per block (opt-in)
    func_attr_max_dynamic_shared: int | None = None  # function attribute to opt in to more
    static_shared: int = 48 * 1024  # usable without opting in
    default_max_shared: int = 64 * 1024  # limit used when the attribute is not queried

    def symbol(self, name: str) -> str:
        return self.prefix + name

    @property
    def load_symbol(self) -> str:
        return self.symbol("ModuleLoadDataEx" if self.load_ex else "ModuleLoadData")

    @property
    def launch_symbol(self) -> str:
        return self.symbol("LaunchKernel" if self.flavor == "driver" else "ModuleLaunchKernel")

    @property
    def count_symbol(self) -> str:
        return self.symbol("DeviceGetCount" if self.flavor == "driver" else "GetDeviceCount")

    def search_dirs(self) -> list[str]:
        return sdk_lib_dirs(self.sdk_env, self.sdk_dirs)

    def find(self, explicit: str | None = None) -> LibrarySearch:
        return find_library(self.libraries, self.env_var, self.search_dirs(), explicit)


class CudaLikeDriver:
    """The bound driver. Handles are plain ints; ``launch_fn`` is the raw ctypes entry
    the launch path calls directly."""

    def __init__(self, spec: DriverSpec, lib: ctypes.CDLL, path: str | None = None) -> None:
        self.spec, self.lib, self.path = spec, lib, path
        self._lock = threading.Lock()
        self._initialized = False
        s = spec.symbol
        self._load = self._bind(spec.load_symbol, [_vp, _vp, _u, _vp, _vp] if spec.load_ex else [_vp, _vp])
        self._get_function = self._bind(s("ModuleGetFunction"), [_vp, _vp, ctypes.c_char_p])
        self._unload = self._bind(s("ModuleUnload"), [_vp], required=False)
        self.launch_fn = self._bind(spec.launch_symbol, [_vp, _u, _u, _u, _u, _u, _u, _u, _vp, _vp, _vp])
        self._count = self._bind(spec.count_symbol, [ctypes.POINTER(_int)])
        self._dev_attr = self._bind(s("DeviceGetAttribute"), [ctypes.POINTER(_int), _int, _int], required=False)
        if spec.flavor == "driver":
            self._init = self._bind(s("Init"), [_u])
            self._err = self._bind(s("GetErrorString"), [_int, ctypes.POINTER(ctypes.c_char_p)], required=False)
            self._func_attr = self._bind(s("FuncSetAttribute"), [_vp, _int, _int], required=False)
        else:
            self._init = None
            self._err = self._bind(s("GetErrorString"), [_int], restype=ctypes.c_char_p, required=False)
            self._func_attr = None
        if spec.contexts:
            self._ctx_get = self._bind(s("CtxGetCurrent"), [ctypes.POINTER(_vp)])
            self._ctx_retain = self._bind(s("DevicePrimaryCtxRetain"), [ctypes.POINTER(_vp), _int])
            self._ctx_set = self._bind(s("CtxSetCurrent"), [_vp])

    @classmethod
    def open(cls, spec: DriverSpec, explicit: str | None = None) -> tuple[CudaLikeDriver | None, LibrarySearch]:
        """Find and bind the library; (None, search) when it is absent or lacks symbols."""
        search = spec.find(explicit)
        if search.handle is None:
            return None, search
        try:
            return cls(spec, search.handle, search.path), search
        except DriverError as exc:
            search.handle, search.error = None, str(exc)
            return None, search

    def _bind(self, name: str, argtypes: list, restype: Any = _int, required: bool = True) -> Any:
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            if required:
                raise DriverError(self.spec.vendor, name, -1, f"library {self.path} does not export {name}") from None
            return None
        fn.argtypes, fn.restype = argtypes, restype
        return fn

    # ---- errors ------------------------------------------------------------------------
    def error_string(self, code: int) -> str:
        if self._err is None:
            return "(no error string function)"
        try:
            if self.spec.flavor == "driver":
                out = ctypes.c_char_p()
                if self._err(code, ctypes.byref(out)) != 0 or not out.value:
                    return "unknown error"
                return out.value.decode(errors="replace")
            text = self._err(code)
            return text.decode(errors="replace") if text else "unknown error"
        except Exception:  # noqa: BLE001 - never let error formatting hide the original error
            return "unknown error"

    def check(self, code: int, symbol: str, kernel: str | None = None, detail: str = "") -> None:
        if code != 0:
            raise DriverError(self.spec.vendor, symbol, code, self.error_string(code), kernel, detail)

    # ---- devices -------------------------------------------------------------------------
    def init(self) -> None:
        if self._initialized:
            return
        with self._lock:
            if not self._initialized and self._init is not None:
                self.check(self._init(0), self.spec.symbol("Init"))
            self._initialized = True

    def device_count(self) -> int:
        """Number of devices; 0 when the driver reports none or fails."""
        try:
            self.init()
        except DriverError:
            return 0
        n = _int(0)
        return n.value if self._count(ctypes.byref(n)) == 0 else 0

    def device_attribute(self, attr: int, device: int) -> int:
        symbol = self.spec.symbol("DeviceGetAttribute")
        if self._dev_attr is None:
            raise DriverError(self.spec.vendor, symbol, -1, "not exported")
        v = _int(0)
        rc = self._dev_attr(ctypes.byref(v), c_int_arg(symbol, "attribute", attr), c_int_arg(symbol, "device", device))
        self.check(rc, symbol, detail=f"attribute {attr}, device {device}")
        return v.value

    def max_shared(self, device: int) -> int:
        """Shared memory a block may use on ``device`` (after opting in)."""
        if self.spec.attr_max_shared is None or self._dev_attr is None:
            return self.spec.default_max_shared
        return self.device_attribute(self.spec.attr_max_shared, device)

    def ensure_context(self, device: int) -> None:
        """Make the device's primary context current if no context is (driver APIs)."""
        self.init()
        if not self.spec.contexts:
            return
        ctx = _vp()
        self.check(self._ctx_get(ctypes.byref(ctx)), self.spec.symbol("CtxGetCurrent"))
        if not ctx.value:
            retain = self.spec.symbol("DevicePrimaryCtxRetain")
            self.check(self._ctx_retain(ctypes.byref(ctx), c_int_arg(retain, "device", device)), retain)
            self.check(self._ctx_set(ctx), self.spec.symbol("CtxSetCurrent"))

    # ---- modules and functions -----------------------------------------------------------
    def load_module(self, image: bytes, kernel: str) -> int:
        mod = _vp()
        buf = ctypes.create_string_buffer(bytes(image), len(image))
        if self.spec.load_ex:
            rc = self._load(ctypes.byref(mod), buf, 0, None, None)
        else:
            rc = self._load(ctypes.byref(mod), buf)
        self.check(rc, self.spec.load_symbol, kernel, f"{len(image)}-byte image")
        return int(mod.value or 0)

    def get_function(self, module: int, name: str) -> int:
        fn = _vp()
        self.check(self._get_function(ctypes.byref(fn), module, name.encode()),
                   self.spec.symbol("ModuleGetFunction"), name)
        return int(fn.value or 0)

    def unload(self, module: int) -> None:
        if self._unload is not None:
            self._unload(module)

    def opt_in_shared(self, function: int, nbytes: int, kernel: str) -> None:
        """Raise a function's dynamic shared-memory limit (CUDA-like driver APIs)."""
        if self._func_attr is None or self.spec.func_attr_max_dynamic_shared is None:
            return
        symbol = self.spec.symbol("FuncSetAttribute")
        self.check(self._func_attr(function, self.spec.func_attr_max_dynamic_shared,
                                   c_int_arg(symbol, "shared memory bytes", nbytes)),
                   symbol, kernel, f"{nbytes} bytes of shared memory")

    def launch(self, function: int, grid: tuple[int, int, int], block_x: int, shared: int, stream: int,
               params: int, kernel: str) -> None:
        check_launch(self.spec.launch_symbol, kernel, grid, block_x, shared, stream)
        rc = self.launch_fn(function, grid[0], grid[1], grid[2], block_x, 1, 1, shared, stream, params, None)
        if rc:
            self.check(rc, self.spec.launch_symbol, kernel, f"grid {grid}, block ({block_x}, 1, 1), shared {shared}")
