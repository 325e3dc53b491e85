"""The GCU backend: Enflame's TopsRT through tritonjit.pluginkit's CUDA-like driver.

TopsRT is a HIP-shaped runtime API (``topsGetDeviceCount``, ``topsModuleLoadData``,
``topsModuleGetFunction``, ``topsModuleLaunchKernel``), so the shared
:class:`~tritonjit.pluginkit.DriverBackend` does load/prepare/pack/launch; this class
adds what is Enflame's own (from Enflame's public triton_gcu ``driver.py`` and
libtriton_jit's ``gcu_backend.h``):

- blockDim.x is ``num_warps`` itself (warp size 1), blockDim.y = z = 1;
- scalar ``i1``/``u1`` arguments travel as 4-byte ``int32_t``/``uint32_t``, fp16 and
  bf16 scalars as their 2-byte storage, bf16 truncated from fp32 (``u32 >> 16``, as
  triton_gcu's launcher makes it) rather than rounded;
- grid limits x <= 65535, y <= 255, z <= 255 (triton_gcu's launcher raises past them);
- devices and streams from torch_gcu (``torch.gcu.current_stream(d).gcu_stream``),
  else device 0 and the default stream 0.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any

from tritonjit import BackendInfo, CompiledVariant, GridError, hookimpl
from tritonjit.pluginkit import (
    DriverBackend,
    DriverSpec,
    LaunchState,
    PackedArgs,
    check_launch,
)

from ._compile import BINARY_EXT, TARGET_BACKEND, compile_for_gcu, make_target

ENV_DRIVER = "TRITONJIT_GCU_DRIVER_LIB"
GRID_LIMITS = (65535, 255, 255)


class GcuBackend(DriverBackend):
    """Hook implementations of the Enflame GCU backend."""

    info = BackendInfo(
        name="gcu", priority=50, triton_backend=TARGET_BACKEND, binary_ext=BINARY_EXT, warp_size=1,
        dispatch_key="PrivateUse1", device_type="gcu",
        description="Enflame GCU through TopsRT (topsModuleLoadData, topsModuleLaunchKernel)",
    )
    driver_spec = DriverSpec(
        vendor="TOPS", prefix="tops", libraries=("libtopsrt.so",), env_var=ENV_DRIVER, flavor="runtime",
        sdk_env=("CAPS_PATH",), static_shared=2**62, default_max_shared=64 * 1024 * 1024,
    )
    torch_module = "gcu"
    stream_attr = "gcu_stream"
    abi_types = {"i1": "i32", "u1": "u32"}  # triton_gcu's ty_to_cpp widens booleans
    bf16 = "truncate"

    def find_torch_module(self) -> Any:
        try:
            import torch

            importlib.import_module("torch_gcu")  # registers torch.gcu
            mod = torch.gcu
            return mod if mod.is_available() else None
        except Exception:  # noqa: BLE001
            return None

    def target(self, arch: str) -> Any:
        return make_target(arch)

    def device_arch(self, device: int) -> str:
        mod = self.torch_device_module()
        if mod is not None and hasattr(mod, "get_device_properties"):
            name = str(getattr(mod.get_device_properties(device), "name", ""))
            for arch in ("gcu410", "gcu400", "gcu300"):
                if arch in name.lower():
                    return arch
        return "gcu300"

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        return compile_for_gcu(src, target, options)

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> LaunchState:
        state = super().prepare(kernel, handle, device)
        state.block_x = kernel.num_warps
        return state

    @hookimpl
    def launch(self, state: LaunchState, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        _check_grid(state.name, grid)
        super().launch(state, grid, stream, packed)

    @hookimpl
    def make_launcher(self, state: LaunchState) -> Any:
        """pack + launch fused over one reused buffer; a lock keeps threads apart
        (ctypes releases the GIL during the driver call)."""
        packed = PackedArgs(state.layout)  # the closure keeps it (buffer and params array) alive
        pack_into, fn, lock = state.layout.pack_into, state.driver.launch_fn, threading.Lock()
        function, block_x, shared, name, drv = state.function, state.block_x, state.shared, state.name, state.driver
        gx_max, gy_max, gz_max = GRID_LIMITS

        def launcher(grid: tuple[int, int, int], stream: int, args: Sequence[Any]) -> None:
            gx, gy, gz = grid
            if not (0 < gx <= gx_max and 0 < gy <= gy_max and 0 < gz <= gz_max
                    and (stream is None or 0 <= stream < 1 << 64)):
                _check_grid(name, grid)  # over the GCU's limits
                check_launch(drv.spec.launch_symbol, name, grid, block_x, shared, stream)  # what ctypes would truncate
            with lock:
                pack_into(packed.buffer, args)
                rc = fn(function, grid[0], grid[1], grid[2], block_x, 1, 1, shared, stream, packed.params_ptr, None)
            if rc:
                drv.check(rc, drv.spec.launch_symbol, name, f"grid {grid}, block ({block_x}, 1, 1), shared {shared}")

        return launcher


def _check_grid(kernel: str, grid: tuple[int, int, int]) -> None:
    for axis, g, limit in zip("xyz", grid, GRID_LIMITS):
        if g > limit:
            raise GridError(kernel, f"grid {grid}: grid.{axis} = {g} is over the GCU limit of {limit}")


plugin = GcuBackend()
