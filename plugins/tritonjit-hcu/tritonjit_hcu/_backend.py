"""The Hygon DCU policy: HIP's module API, wavefront 64, torch's CUDA key (ROCm torch).

Binaries are hsaco code objects from a Triton AMD backend: upstream Triton's for the
CDNA targets it knows (gfx90a, gfx942, ...), the DTK's Triton (FlagTree ``hcu``) for
Hygon's own (gfx906, gfx926, gfx928, gfx936). Loading, argument packing and launch
are pluginkit's CUDA-like driver path over hipModuleLoadDataEx / hipModuleGetFunction
/ hipModuleLaunchKernel.
"""

from __future__ import annotations

from typing import Any

from tritonjit import BackendInfo, hookimpl
from tritonjit.pluginkit import DriverBackend, DriverSpec

WAVEFRONT = 64
HIP_ATTR_MAX_SHARED_PER_BLOCK = 74  # hipDeviceAttributeMaxSharedMemoryPerBlock (ROCm >= 5 numbering)
HYGON_ARCHS = ("gfx906", "gfx926", "gfx928", "gfx936")


class HcuBackend(DriverBackend):
    info = BackendInfo(
        name="hcu", priority=60, triton_backend="hip", binary_ext="hsaco", warp_size=WAVEFRONT,
        dispatch_key="CUDA", device_type="cuda",
        description="Hygon DCU through HIP (DTK); hsaco from Triton's AMD backend",
    )
    driver_spec = DriverSpec(
        vendor="HIP", prefix="hip", libraries=("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"),
        env_var="TRITONJIT_HCU_DRIVER_LIB", flavor="runtime", load_ex=True,
        sdk_env=("ROCM_PATH", "DTK_HOME"), sdk_dirs=("/opt/dtk", "/opt/rocm"),
        attr_max_shared=HIP_ATTR_MAX_SHARED_PER_BLOCK, static_shared=64 * 1024, default_max_shared=64 * 1024,
    )
    torch_module = "cuda"  # ROCm torch drives DCUs as "cuda" devices
    stream_attr = "cuda_stream"

    def is_vendor_torch(self, torch: Any) -> bool:
        return getattr(torch.version, "hip", None) is not None

    def target(self, arch: str) -> Any:
        from triton.backends.compiler import GPUTarget

        arch = str(arch).split(":")[0]
        if not arch.startswith("gfx"):
            raise ValueError(f"hcu architecture must look like gfx928 or gfx942, got '{arch}'")
        return GPUTarget("hip", arch, WAVEFRONT)

    def device_arch(self, device: int) -> str:
        mod = self.torch_device_module()
        if mod is not None:
            return mod.get_device_properties(device).gcnArchName.split(":")[0]
        return super().device_arch(device)

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        import triton

        try:
            return triton.compile(src, target=target, options=options)
        except Exception as exc:
            if target.arch in HYGON_ARCHS:
                raise RuntimeError(f"{exc}\nhint: {target.arch} is a Hygon DCU architecture; upstream Triton's AMD "
                                   "backend does not know it. Install the DTK's Triton (FlagTree hcu backend).") from exc
            raise
