"""load -> prepare -> pack_args -> launch on the Ascend runtime.

Follows libtriton_jit's ``NpuBackend``: the binary is registered with
``rtDevBinaryRegister`` (magic by mix mode) and bound to a unique function stub with
``rtFunctionRegister``; a launch builds the packed argument buffer (see ``_abi``),
allocates the per-block workspace with ``rtMalloc`` when the kernel declares one,
calls ``rtKernelLaunch(stub, blockNum, buffer, size, NULL, stream)`` and frees the
workspace after the kernel through ``aclrtLaunchCallback``. Differences from
libtriton_jit, both additive: the FFTS address is read once per kernel and device
(prepare) rather than per launch, and a kernel whose metadata declares
``lock_num > 0`` (Triton-Ascend's sync-block lock) gets its lock array allocated and
initialised as Triton-Ascend's launcher does, instead of a null pointer.
"""

from __future__ import annotations

import ctypes
import itertools
import struct
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonjit import ArgumentError, BackendError, CompiledVariant, GridError
from tritonjit._flatten import has_compound, runtime_plan

from ._abi import ArgBufferLayout, abi_of, layout_from_metadata, runtime_types
from ._compile import BINARY_EXT
from ._driver import (
    ACL_CALLBACK_BLOCK,
    RT_DEV_BINARY_MAGIC_ELF,
    RT_DEV_BINARY_MAGIC_ELF_AIVEC,
    RT_MEMCPY_HOST_TO_DEVICE,
    AscendDriver,
    NpuDriverError,
    RtDevBinary,
)

_FALLBACK_EXTS = (BINARY_EXT, "o", "ttadapter", "bin")  # libtriton_jit's search order
_stub_ids = itertools.count()
_stub_lock = threading.Lock()
I32_MAX = 2**31 - 1


@dataclass
class NpuModule:
    """A registered kernel binary and its function stub (what ``load`` returns)."""

    bin_handle: int
    stub: ctypes.c_size_t  # its address is the function's identity for rtKernelLaunch
    stub_name: str
    device: int
    _keep: list = field(default_factory=list, repr=False)  # buffers the runtime points into

    @property
    def stub_address(self) -> int:
        return ctypes.addressof(self.stub)


@dataclass
class NpuLaunchState:
    """Per kernel and device: everything a launch needs, computed once (``prepare``)."""

    kernel: str
    driver: AscendDriver
    module: NpuModule
    device: int
    layout: ArgBufferLayout
    converters: list[Callable[[Any], Any]]
    codes: list[str]
    arg_names: list[str]
    ffts: int
    workspace_size: int = 0
    lock_num: int = 0
    lock_init: bytes = b""


def read_binary(kernel: CompiledVariant) -> bytes:
    if kernel.binary:
        return bytes(kernel.binary)
    for ext in _FALLBACK_EXTS:
        path = kernel.binary_path(ext)
        if path is not None:
            with open(path, "rb") as f:
                data = f.read()
            if data:
                return data
    raise BackendError(f"kernel '{kernel.name}': the compiled variant has no NPU binary "
                       f"(.{BINARY_EXT}, .o, .ttadapter or .bin) to load")


def load(driver: AscendDriver, kernel: CompiledVariant, device: int) -> NpuModule:
    data = read_binary(kernel)
    mix_mode = str(kernel.metadata.get("mix_mode", "mix"))
    driver.check(driver.rtSetDevice(device), f"rtSetDevice({device})")
    image = ctypes.create_string_buffer(data, len(data))
    desc = RtDevBinary(RT_DEV_BINARY_MAGIC_ELF_AIVEC if mix_mode == "aiv" else RT_DEV_BINARY_MAGIC_ELF,
                       0, ctypes.addressof(image), len(data))
    handle = ctypes.c_void_p(0)
    driver.check(driver.rtDevBinaryRegister(ctypes.byref(desc), ctypes.byref(handle)),
                 f"rtDevBinaryRegister of kernel '{kernel.name}'")
    dev_func = str(kernel.metadata.get("kernel_name") or kernel.metadata.get("name") or kernel.name).encode()
    with _stub_lock:
        stub_name = f"{kernel.name}_{next(_stub_ids)}"
    module = NpuModule(handle.value or 0, ctypes.c_size_t(0), stub_name, device,
                       [image, ctypes.create_string_buffer(dev_func)])
    driver.check(driver.rtFunctionRegister(handle, module.stub_address, stub_name.encode(),
                                           module._keep[1], 0),
                 f"rtFunctionRegister of kernel '{kernel.name}'")
    return module


def prepare(driver: AscendDriver, kernel: CompiledVariant, module: NpuModule, device: int,
            device_type: str) -> NpuLaunchState:
    if has_compound(runtime_plan(kernel.signature, kernel.runtime_params)):
        raise ArgumentError(kernel.name, f"variant '{kernel.signature}' takes a tuple or a tensor descriptor, "
                            "which the NPU argument buffer (libtriton_jit's layout) cannot hold yet; pass the "
                            "tensors and scalars as separate parameters")
    types = runtime_types(kernel.signature)
    if types:
        abi = [abi_of(t) for t in types]
    else:  # a variant known only by its metadata (libtriton_jit's arg_layout)
        abi = layout_from_metadata(kernel.metadata.get("arg_layout") or [])
        types = ["*" if t.name == "POINTER" else t.name.lower() for t, _ in abi]
    names = param_names(kernel)
    if len(names) != len(types):
        names = [f"runtime argument {i} ({t})" for i, t in enumerate(types)]
    converters = [
        _pointer(kernel.name, n, device_type, device) if t.startswith("*") else _scalar
        for n, t in zip(names, types)
    ]
    lock_num = int(kernel.metadata.get("lock_num") or 0)
    lock_init = int(kernel.metadata.get("lock_init_value") or 0)
    return NpuLaunchState(
        kernel=kernel.name, driver=driver, module=module, device=device,
        layout=ArgBufferLayout(abi), converters=converters, codes=[c for _, c in abi], arg_names=names,
        ffts=driver.ffts_address(),
        workspace_size=int(kernel.metadata.get("workspace_size") or 0),
        lock_num=max(lock_num, 0), lock_init=struct.pack(f"<{max(lock_num, 0)}q", *[lock_init] * max(lock_num, 0)),
    )


def param_names(kernel: CompiledVariant) -> list[str]:
    """Runtime parameter names, from the compiler's source object when at hand
    (Triton's CompiledKernel keeps its ASTSource), for error messages."""
    sig = getattr(getattr(kernel.artifact, "src", None), "signature", None)
    if isinstance(sig, dict):
        return [name for name, ty in sig.items() if ty != "constexpr"]
    return list(kernel.metadata.get("arg_names") or [])


def _scalar(a: Any) -> Any:
    return a


def _pointer(kernel: str, name: str, device_type: str, device: int) -> Callable[[Any], int]:
    def convert(a: Any) -> int:
        try:
            dev = a.device
            ptr = a.data_ptr()
        except AttributeError:
            raise ArgumentError(kernel, f"expected a tensor on an '{device_type}' device, "
                                f"got {type(a).__name__}", name) from None
        if dev.type != device_type or (dev.index is not None and dev.index != device):
            raise ArgumentError(kernel, f"tensor is on device '{dev}', the kernel launches on "
                                f"'{device_type}:{device}'; move it there first", name)
        return ptr
    return convert


def pack_args(state: NpuLaunchState, args: Sequence[Any]) -> list[Any]:
    if len(args) != len(state.converters):
        raise ArgumentError(state.kernel, f"{len(args)} runtime arguments given, the variant takes "
                            f"{len(state.converters)}")
    return [c(a) for c, a in zip(state.converters, args)]


def launch(state: NpuLaunchState, grid: tuple[int, int, int], stream: int, values: list[Any]) -> None:
    gx, gy, gz = grid
    block_num = gx * gy * gz
    if gx > I32_MAX or gy > I32_MAX or gz > I32_MAX or block_num > 0xFFFFFFFF:
        raise GridError(state.kernel, f"grid {grid} is too large for the NPU: each dimension is an int32 "
                        f"and their product (the block count, {block_num}) a uint32")
    drv = state.driver
    try:
        buffer = state.layout.pack(state.ffts, 0, 0, values, gx, gy, gz)
    except struct.error:
        raise _bad_value(state, values) from None
    scratch = []
    try:
        workspace = lock = 0
        if state.workspace_size:
            workspace = drv.malloc(state.workspace_size * block_num)
            scratch.append(workspace)
        if state.lock_num:
            lock = drv.malloc(len(state.lock_init))
            scratch.append(lock)
            drv.check(drv.rtMemcpy(lock, len(state.lock_init), state.lock_init, len(state.lock_init),
                                   RT_MEMCPY_HOST_TO_DEVICE), "rtMemcpy of the sync-block lock")
        if scratch:
            buffer = state.layout.pack(state.ffts, lock, workspace, values, gx, gy, gz)
        err = drv.rtKernelLaunch(state.module.stub_address, block_num, buffer, len(buffer), None, stream)
        if err:
            raise NpuDriverError(f"rtKernelLaunch of kernel '{state.kernel}' failed with error {err} "
                                 f"(grid {grid}, {len(buffer)}-byte argument buffer; driver: {drv.where})")
    except BaseException:
        for ptr in scratch:
            drv.rtFree(ptr)
        raise
    for ptr in scratch:  # freed once the kernel is done, in stream order
        if drv.aclrtLaunchCallback(drv.free_callback, ptr, ACL_CALLBACK_BLOCK, stream):
            warnings.warn(f"kernel '{state.kernel}': aclrtLaunchCallback failed; "
                          f"a {state.workspace_size}-byte-per-block workspace may leak", RuntimeWarning, stacklevel=2)


def _bad_value(state: NpuLaunchState, values: list[Any]) -> ArgumentError:
    """Name the argument that does not fit its ABI slot."""
    for name, code, v in zip(state.arg_names, state.codes, values):
        try:
            struct.pack("<" + code, v)
        except struct.error as exc:
            return ArgumentError(state.kernel, f"value {v!r} does not fit its {struct.calcsize(code)}-byte "
                                 f"slot of the NPU argument buffer ({exc})", name)
    return ArgumentError(state.kernel, "an argument does not fit the NPU argument buffer")
