"""The Iluvatar CoreX policy: a CUDA-compatible driver API with warp size 64.

CoreX ships its own ``libcuda.so.1`` (cuModuleLoadData / cuModuleGetFunction /
cuLaunchKernel, CUDA's enum numbering) and a torch build that drives its GPUs as
"cuda" devices (``torch.corex`` is True). Binaries are ``.cubin`` files from
Iluvatar's Triton (FlagTree ``iluvatar`` backend), which targets
``GPUTarget("cuda", capability, 64)``. Because NVIDIA's libcuda exports the same
symbols, a libcuda is accepted as CoreX's only when torch says corex or the library
lives under a CoreX installation; otherwise this plugin stays inert and leaves the
GPU to the cuda plugin.
"""

from __future__ import annotations

import os
from typing import Any

from tritonjit import BackendInfo, hookimpl
from tritonjit.pluginkit import DriverBackend, DriverSpec

WARP_SIZE = 64
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def _torch_is_corex() -> bool:
    try:
        import torch

        return getattr(torch, "corex", False) is True
    except Exception:  # noqa: BLE001 - no torch: not corex
        return False


class IxBackend(DriverBackend):
    info = BackendInfo(
        name="ix", priority=55, triton_backend="cuda", binary_ext="cubin", warp_size=WARP_SIZE,
        dispatch_key="CUDA", device_type="cuda",
        description="Iluvatar CoreX (CUDA-compatible driver, warp size 64)",
    )
    driver_spec = DriverSpec(
        vendor="CoreX CUDA", prefix="cu", libraries=("libcuda.so.1", "libcuda.so"),
        env_var="TRITONJIT_IX_DRIVER_LIB", flavor="driver", contexts=True,
        sdk_env=("COREX_HOME",), sdk_dirs=("/usr/local/corex",),
        attr_max_shared=CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        func_attr_max_dynamic_shared=CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    )
    torch_module = "cuda"
    arch_example = "a CoreX compute capability like 70 or 71"
    # upstream Triton's NVIDIA backend would accept GPUTarget("cuda", ...) and emit
    # NVIDIA PTX/cubin: wrong for CoreX. Only Iluvatar's Triton may compile here.
    vendor_triton = "Iluvatar's Triton (FlagTree iluvatar backend, triton.backends.iluvatar)"
    vendor_triton_backend = "iluvatar"

    def is_vendor_torch(self, torch: Any) -> bool:
        return getattr(torch, "corex", False) is True

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        ok, reason = super().availability()
        _, search = self._open()
        pinned = self._explicit or os.environ.get(self.driver_spec.env_var)
        if ok and not pinned and not search.simulated:
            real = os.path.realpath(search.path or "")
            if not _torch_is_corex() and "corex" not in real.lower():
                return False, (f"{search.path} is a CUDA driver, but not Iluvatar CoreX's (torch.corex is not set "
                               f"and it is not under a corex directory); set {self.driver_spec.env_var} to CoreX's "
                               "libcuda.so.1")
        return ok, reason
