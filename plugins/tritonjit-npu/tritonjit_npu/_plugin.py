"""The NPU backend's hook implementations (the contract: tritonjit/_hookspecs.py).

Devices and streams come from torch_npu when it is installed (``torch.npu``: the
current device, ``torch.npu.current_stream(d).npu_stream``); without it the ACL
runtime answers (``aclrtGetDevice``/``aclrtSetDevice``) and launches go to the
default stream 0 (pluginkit's :class:`TorchDevices`, with those fallbacks). Nothing
here imports torch_npu or opens the driver at import time, so an absent runtime
leaves the plugin inert and never breaks discovery.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

from tritonjit import (
    BackendError,
    BackendInfo,
    CompiledVariant,
    SpecializationRules,
    hookimpl,
)
from tritonjit.pluginkit import TorchDevices

from . import _launch
from ._compile import BINARY_EXT, TARGET_BACKEND, compile_for_npu, make_target
from ._driver import LibraryNotFound, load_driver

DEVICE_TYPE = "npu"


@functools.lru_cache(maxsize=1)
def torch_npu() -> Any:
    """``torch.npu`` when torch_npu is installed, else None."""
    try:
        import torch
        import torch_npu  # noqa: F401  (registers torch.npu)

        return torch.npu
    except Exception:  # noqa: BLE001
        return None


class NpuBackend(TorchDevices):
    """Hook implementations of the Ascend NPU backend."""

    info = BackendInfo(
        name="npu", priority=50, triton_backend=TARGET_BACKEND, binary_ext=BINARY_EXT, warp_size=1,
        dispatch_key="PrivateUse1", device_type=DEVICE_TYPE,
        description="Huawei Ascend NPU through CANN's ACL/rt runtime (rtKernelLaunch, packed argument buffer)",
        # every dimension travels as an int32; _launch checks their product, the block count
        max_grid=(_launch.I32_MAX, _launch.I32_MAX, _launch.I32_MAX),
    )
    stream_attr = "npu_stream"

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return self.info

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        try:
            driver = load_driver()
        except (LibraryNotFound, OSError) as exc:
            return False, f"Ascend runtime not found: {exc}"
        try:
            n = driver.device_count()
        except Exception as exc:  # noqa: BLE001
            return False, f"Ascend runtime loaded from {driver.where}, but rtGetDeviceCount failed: {exc}"
        if n <= 0:
            return False, f"Ascend runtime loaded from {driver.where}, but it reports no NPU device"
        return True, f"{n} NPU device(s) through {driver.where}"

    @hookimpl
    def specialization_rules(self) -> SpecializationRules:
        # Triton-Ascend does not specialize integers equal to 1 (libtriton_jit's NPU rule)
        return SpecializationRules(equal_to_1=False)

    # ---- devices and streams ---------------------------------------------------------
    @hookimpl
    def device_count(self) -> int:
        try:
            return load_driver().device_count()
        except Exception:  # noqa: BLE001
            return 0

    # the other device hooks: TorchDevices over torch.npu, with ACL where torch_npu is absent
    def torch_device_module(self) -> Any:
        return torch_npu()  # cached by the function (tests replace it)

    def fallback_device(self) -> int:
        return load_driver().get_device()

    def fallback_guard(self, device: int) -> contextlib.AbstractContextManager[None]:
        return _acl_device(device)

    # ---- compilation -----------------------------------------------------------------
    @hookimpl
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        if arch is None:
            npu = self.torch_device_module()
            arch = npu.get_device_name(device) if npu is not None else load_driver().soc_name()
            if not arch:
                raise BackendError("the Ascend runtime reports no SoC name (aclrtGetSocName); "
                                   "name the target explicitly, e.g. npu:Ascend910B3")
        return make_target(arch)

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        return compile_for_npu(src, target, options)

    # ---- the kernel lifecycle ----------------------------------------------------------
    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> Any:
        return _launch.load(load_driver(), kernel, device)

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> Any:
        return _launch.prepare(load_driver(), kernel, handle, device, DEVICE_TYPE)

    @hookimpl
    def pack_args(self, state: Any, args: Sequence[Any]) -> Any:
        return _launch.pack_args(state, args)

    @hookimpl
    def launch(self, state: Any, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        _launch.launch(state, grid, stream, packed)


@contextlib.contextmanager
def _acl_device(device: int) -> Iterator[None]:
    driver = load_driver()
    previous = driver.get_device()
    if previous != device:
        driver.check(driver.aclrtSetDevice(device), f"aclrtSetDevice({device})")
    try:
        yield
    finally:
        if previous != device:
            driver.aclrtSetDevice(previous)


plugin = NpuBackend()
