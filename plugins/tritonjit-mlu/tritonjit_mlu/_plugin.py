"""The MLU backend's hook implementations (the contract: tritonjit/_hookspecs.py).

Launch rules are FlagTree's Cambricon launcher and libtriton_jit's ``MluBackend``:
``gridX`` is multiplied by ``num_warps``; the kernel class (``KernelClass``) is
``num_warps`` (BLOCK = 1, UNION1 = 4 ...), promoted to a whole cluster
(``core_num_per_cluster``) when ``num_warps == 1``, ``gridX`` is a multiple of it and
the kernel either promotes shared memory or fits on the device's cores; grid
dimensions are checked against the device's task-dimension limits. Parameters are a
``void*[]`` of pointers to each value (``cnInvokeKernel``'s kernelParams): pointers
8 bytes, ``i1``/``u1`` widened to 4, fp16/bf16 scalars passed as fp32. Devices and
streams are pluginkit's :class:`TorchDevices` over torch_mlu's ``torch.mlu``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonjit import BackendError, BackendInfo, CompiledVariant, GridError, hookimpl
from tritonjit.pluginkit import ArgLayout, PackedArgs, TorchDevices

from . import _driver as d
from ._compile import BINARY_EXT, TARGET_BACKEND, compile_for_mlu, make_target

_ABI_TYPES = {"i1": "i32", "u1": "u32", "fp16": "fp32", "bf16": "fp32"}  # FlagTree's ty_to_cpp


@dataclass(frozen=True)
class MluKernel:
    module: int
    kernel: int
    name: str


@dataclass
class MluLaunchState:
    name: str
    kernel: int
    layout: ArgLayout
    num_warps: int
    promote_shared: bool
    max_grid: tuple[int, int, int]
    core_per_cluster: int
    total_cores: int
    driver: d.CnDriver


class MluBackend(TorchDevices):
    """Hook implementations of the Cambricon MLU backend."""

    info = BackendInfo(name="mlu", priority=50, triton_backend=TARGET_BACKEND, binary_ext=BINARY_EXT,
                       warp_size=1, dispatch_key="PrivateUse1", device_type="mlu",
                       description="Cambricon MLU through CNDrv (cnModuleLoadFatBinary, cnInvokeKernel)")
    stream_attr = "mlu_stream"

    def __init__(self, library: str | None = None) -> None:
        self._explicit = library

    def driver(self) -> d.CnDriver:
        drv, search = d.open_driver(self._explicit)
        if drv is None:
            raise BackendError(f"backend 'mlu': CNDrv unavailable: {search.reason()}")
        return drv

    def find_torch_module(self) -> Any:
        try:
            import torch
            import torch_mlu  # noqa: F401  (registers torch.mlu)

            return torch.mlu
        except Exception:  # noqa: BLE001
            return None

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return self.info

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        drv, search = d.open_driver(self._explicit)
        if drv is None:
            return False, f"CNDrv library not found: {search.reason()}"
        n = drv.device_count()
        if n <= 0:
            return False, f"{search.reason()} loaded, but it reports no MLU device"
        return True, f"{n} MLU device(s) through the {search.reason()}"

    @hookimpl
    def device_count(self) -> int:
        drv, _ = d.open_driver(self._explicit)
        return 0 if drv is None else drv.device_count()

    @hookimpl
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        if arch is None:
            mlu = self.torch_device_module()
            if mlu is None:
                raise BackendError("backend 'mlu': without torch_mlu the device's ISA version is unknown; "
                                   "name the target, e.g. mlu:592")
            props = mlu.get_device_properties(device or 0)
            arch = str(getattr(props, "isa_version", "") or getattr(props, "major", 0) * 100)
        return make_target(arch)

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        return compile_for_mlu(src, target, options)

    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> MluKernel:
        image = kernel.binary
        if image is None and kernel.binary_path(BINARY_EXT):
            with open(kernel.binary_path(BINARY_EXT), "rb") as f:  # type: ignore[arg-type]
                image = f.read()
        if not image:
            raise BackendError(f"kernel '{kernel.name}': the compiled variant has no .{BINARY_EXT} fat binary")
        drv = self.driver()
        drv.make_current(device)
        buf = d.ctypes.create_string_buffer(bytes(image), len(image))
        mod, fn = d.c_void_p(), d.c_void_p()
        drv.check(drv.cnModuleLoadFatBinary(buf, d.ctypes.byref(mod)), "cnModuleLoadFatBinary", kernel.name)
        drv.check(drv.cnModuleGetKernel(mod, kernel.name.encode(), d.ctypes.byref(fn)), "cnModuleGetKernel",
                  kernel.name)
        return MluKernel(int(mod.value or 0), int(fn.value or 0), kernel.name)

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: MluKernel, device: int) -> MluLaunchState:
        drv = self.driver()
        a = drv.attribute
        return MluLaunchState(
            name=kernel.name, kernel=handle.kernel, layout=ArgLayout.for_variant(kernel, abi_types=_ABI_TYPES),
            num_warps=kernel.num_warps, promote_shared=bool(kernel.metadata.get("promote_shared", False)),
            max_grid=(a(d.ATTR_MAX_BLOCK_TASK_DIM_X, device), a(d.ATTR_MAX_BLOCK_TASK_DIM_Y, device),
                      a(d.ATTR_MAX_BLOCK_TASK_DIM_Z, device)),
            core_per_cluster=a(d.ATTR_MAX_CORE_COUNT_PER_CLUSTER, device),
            total_cores=a(d.ATTR_MAX_CLUSTER_COUNT, device) * a(d.ATTR_MAX_CORE_COUNT_PER_CLUSTER, device),
            driver=drv,
        )

    @hookimpl
    def pack_args(self, state: MluLaunchState, args: Sequence[Any]) -> PackedArgs:
        packed = PackedArgs(state.layout)
        state.layout.pack_into(packed.buffer, args)
        return packed

    @hookimpl
    def launch(self, state: MluLaunchState, grid: tuple[int, int, int], stream: int, packed: PackedArgs) -> None:
        gx, gy, gz = grid[0] * state.num_warps, grid[1], grid[2]
        for axis, g, limit in zip("xyz", (gx, gy, gz), state.max_grid):
            if g > limit:
                raise GridError(state.name, f"grid {grid} (x scaled by num_warps={state.num_warps}): "
                                f"{axis} = {g} is over the MLU's limit of {limit}")
        cpc = state.core_per_cluster
        union = (state.num_warps == 1 and cpc > 0 and gx % cpc == 0
                 and (state.promote_shared or gx * gy * gz <= state.total_cores))
        kernel_class = cpc if union else state.num_warps
        rc = state.driver.cnInvokeKernel(state.kernel, gx, gy, gz, kernel_class, 0, stream, packed.params_ptr, None)
        if rc:
            state.driver.check(rc, "cnInvokeKernel", state.name)

    @hookimpl
    def make_launcher(self, state: MluLaunchState) -> Any:
        """pack + launch over one reused buffer, serialised by a lock."""
        packed, lock, launch = PackedArgs(state.layout), threading.Lock(), self.launch
        pack_into = state.layout.pack_into

        def launcher(grid: tuple[int, int, int], stream: int, args: Sequence[Any]) -> None:
            with lock:
                pack_into(packed.buffer, args)
                launch(state, grid, stream, packed)

        return launcher


plugin = MluBackend()
