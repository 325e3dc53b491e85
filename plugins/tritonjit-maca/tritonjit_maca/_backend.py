"""The MetaX MACA policy: the MACA runtime's module API, warp size 64.

``libmcruntime.so`` (under ``$MACA_PATH/lib``) exports a HIP-like runtime with the
``mc`` prefix: mcGetDeviceCount, mcModuleLoadData, mcModuleGetFunction,
mcModuleLaunchKernel, and contexts (mcCtxGetCurrent, mcDevicePrimaryCtxRetain,
mcCtxSetCurrent) as FlagTree's metax driver uses them. Binaries are ``.mcfatbin``
from MetaX's Triton (FlagTree ``metax`` backend), target ``GPUTarget("maca",
capability, 64)``. MetaX's torch drives its GPUs as "cuda" devices.
"""

from __future__ import annotations

from typing import Any

from tritonjit import BackendInfo
from tritonjit.pluginkit import DriverBackend, DriverSpec

WARP_SIZE = 64
MAX_SHARED_PER_BLOCK = 64 * 1024  # C500, per FlagTree's metax driver; the enum to query it is not public


class MacaBackend(DriverBackend):
    info = BackendInfo(
        name="maca", priority=55, triton_backend="maca", binary_ext="mcfatbin", warp_size=WARP_SIZE,
        dispatch_key="CUDA", device_type="cuda",
        description="MetaX MACA (libmcruntime module API, warp size 64)",
    )
    driver_spec = DriverSpec(
        vendor="MACA", prefix="mc", libraries=("libmcruntime.so",),
        env_var="TRITONJIT_MACA_DRIVER_LIB", flavor="runtime", contexts=True,
        sdk_env=("MACA_PATH",), sdk_dirs=("/opt/maca",),
        attr_max_shared=None, static_shared=MAX_SHARED_PER_BLOCK, default_max_shared=MAX_SHARED_PER_BLOCK,
    )
    torch_module = "cuda"
    arch_example = "a capability number like 80"
    vendor_triton = "MetaX's Triton (FlagTree metax backend)"

    def is_vendor_torch(self, torch: Any) -> bool:
        return getattr(torch.version, "hip", None) is None and self.availability()[0]
