"""The Moore Threads MUSA policy: the MUSA driver API, torch_musa's PrivateUse1 device.

``libmusa.so`` mirrors CUDA's driver API with the ``mu`` prefix (muInit,
muModuleLoadData, muModuleGetFunction, muLaunchKernel, contexts). Binaries are
``.mubin`` from Moore Threads' Triton (FlagTree ``mthreads`` backend), target
``GPUTarget("musa", capability, warp)``: warp 128 before MTT S4000 (capability < 30),
32 from capability 3.x. torch_musa registers the "musa" device (dispatch key
PrivateUse1); its current stream's raw handle is ``.musa_stream``.
"""

from __future__ import annotations

from tritonjit import BackendInfo
from tritonjit.pluginkit import DriverBackend, DriverSpec

# assumed to follow CUDA's numbering, as MUSA's driver API does elsewhere
MU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
MU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def warp_size_of(capability: int) -> int:
    """MUSA's warp: 128 on MP 2.x (MTT S80/S3000), 32 from MP 3.x (MTT S4000)."""
    return 128 if capability < 30 else 32


class MusaBackend(DriverBackend):
    info = BackendInfo(
        name="musa", priority=55, triton_backend="musa", binary_ext="mubin", warp_size=32,
        dispatch_key="PrivateUse1", device_type="musa",
        description="Moore Threads MUSA (libmusa driver API; torch_musa)",
    )
    driver_spec = DriverSpec(
        vendor="MUSA", prefix="mu", libraries=("libmusa.so", "libmusa.so.1"),
        env_var="TRITONJIT_MUSA_DRIVER_LIB", flavor="driver", contexts=True,
        sdk_env=("MUSA_HOME", "MUSA_PATH"), sdk_dirs=("/usr/local/musa",),
        attr_max_shared=MU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        func_attr_max_dynamic_shared=MU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    )
    torch_module = "musa"
    torch_extension = "torch_musa"
    stream_attr = "musa_stream"
    arch_example = "an MP capability like 22 or 31"
    vendor_triton = "Moore Threads' Triton (FlagTree mthreads backend)"

    def warp_size_of(self, capability: int) -> int:
        return warp_size_of(capability)
