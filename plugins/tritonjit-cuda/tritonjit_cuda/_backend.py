"""The CUDA backend's hook implementations: load -> prepare -> pack_args -> launch.

The driver calls live in the C extension ``_driver`` (libcuda opened with dlopen, no
CUDA headers needed to build it). The hot path never comes back here: the launcher
made by ``make_launcher`` is a C object the core's dispatcher calls through a capsule.
Devices and streams are pluginkit's :class:`TorchDevices` over ``torch.cuda``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tritonjit import ArgumentError, BackendError, BackendInfo, CompiledVariant, GridError, hookimpl
from tritonjit.pluginkit import TorchDevices

from . import _torch_glue
from ._types import device_abi, scratch_layout

try:
    from . import _driver
    _IMPORT_ERROR: str | None = None
except ImportError as exc:  # the extension was not built
    _driver = None  # type: ignore[assignment]
    _IMPORT_ERROR = f"the C extension tritonjit_cuda._driver is missing ({exc}); reinstall tritonjit-cuda"

#: the native launch ABI (TJ_LAUNCH_ABI of this plugin's copy of tritonjit_launch.h) the C
#: extension was built for; None without the extension (then nothing of it is ever launched)
LAUNCH_ABI: int | None = _driver.LAUNCH_ABI if _driver is not None else None


class OutOfResources(BackendError):
    """A variant needs more of a per-block resource than the device has."""

    def __init__(self, kernel: str, signature: str, what: str) -> None:
        self.kernel = kernel
        self.signature = signature
        super().__init__(f"kernel '{kernel}' (variant '{signature}') is out of resources: {what}")


@dataclass(frozen=True)
class LoadedModule:
    """What ``load`` returns: driver handles of one variant on one device."""

    module: int
    function: int
    context: int
    n_regs: int
    n_spills: int
    max_threads: int
    static_shared: int


@dataclass
class LaunchState:
    """What ``prepare`` returns: the C launcher plus the facts it was built from."""

    launcher: Any
    kernel: str
    signature: str
    device: int
    types: bytes
    param_index: tuple[int, ...]
    #: tuples and tensor descriptors: the launcher's arguments -> the device's (else None)
    expand: Callable[[Sequence[Any]], list[Any]] | None = None
    #: the C launch entry reads tuple arguments itself (no descriptor among them)
    c_tuples: bool = True


_hooks_ready = False
_hooks_lock = threading.Lock()
_props: dict[int, dict[str, int]] = {}


def _driver_or_raise() -> Any:
    if _driver is None:
        raise BackendError(f"CUDA backend unavailable: {_IMPORT_ERROR}")
    global _hooks_ready
    if not _hooks_ready:
        with _hooks_lock:
            if not _hooks_ready:
                _driver.set_hooks(GridError, ArgumentError, _torch_glue.raw_stream_fn())
                _hooks_ready = True
    return _driver


def device_props(device: int) -> dict[str, int]:
    """The device's limits (cached): compute capability, shared memory, grid."""
    props = _props.get(device)
    if props is None:
        props = _props[device] = _driver_or_raise().device_props(device)
    return props


def _arch_of(target: Any) -> int:
    arch = getattr(target, "arch", target)
    if isinstance(arch, str):
        arch = int("".join(c for c in arch if c.isdigit()) or 0)
    return int(arch)


class CudaBackend(TorchDevices):
    """Hook implementations of the ``cuda`` backend."""

    #: read by the core at registration: a core of another launch ABI refuses this plugin
    tritonjit_launch_abi = LAUNCH_ABI

    info = BackendInfo(
        name="cuda", priority=100, triton_backend="cuda", binary_ext="cubin", warp_size=32,
        dispatch_key="CUDA", device_type="cuda",
        description="NVIDIA GPUs through the CUDA driver API (cuModuleLoadData, cuLaunchKernelEx)",
    )

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return self.info

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        try:
            if _driver is None:
                return False, str(_IMPORT_ERROR)
            ok, reason = _driver.probe()
            if not ok:
                return False, reason
            try:
                import torch
            except Exception as exc:
                return False, f"{reason}, but torch failed to import ({exc}); the CUDA backend launches torch tensors"
            if not torch.cuda.is_available():
                return False, f"{reason}, but torch.cuda.is_available() is False (torch {torch.__version__})"
            return True, reason
        except Exception as exc:  # never raise from availability
            return False, f"probing CUDA raised {type(exc).__name__}: {exc}"

    @hookimpl
    def device_count(self) -> int:
        try:
            import torch

            return torch.cuda.device_count()
        except Exception:
            return 0

    # ---- devices and streams: TorchDevices over torch.cuda ------------------------------------
    def find_torch_module(self) -> Any:
        try:
            import torch
        except ImportError:  # the backend is unavailable then (availability says why)
            return None
        return torch.cuda

    def current_device_reader(self) -> Any:
        """torch's C-level reader of the current CUDA device (``torch.cuda.current_device()``
        is ``_lazy_init()`` plus this call, which initializes lazily itself); the hook where
        the torch module is another (a test's)."""
        mod = self.torch_device_module()
        if mod is None:
            return self.current_device
        import torch

        read = getattr(torch._C, "_cuda_getDevice", None) if mod is torch.cuda else None
        return read if read is not None else self.current_device

    def raw_stream(self, mod: Any, device: int) -> int:
        """torch's C reader of the raw stream: no stream object per call."""
        return _torch_glue.raw_stream_fn()(device)

    @hookimpl
    def benchmarker(self) -> Callable[[Callable[[], Any]], float]:
        """``triton.testing.do_bench``: CUDA events on torch's current stream (the one
        launches go to), its median."""
        import triton.testing

        def bench(fn: Callable[[], Any]) -> float:
            return float(triton.testing.do_bench(fn, quantiles=(0.5, 0.2, 0.8))[0])

        return bench

    @hookimpl
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        from triton.backends.compiler import GPUTarget

        if arch is not None:
            digits = "".join(c for c in str(arch) if c.isdigit())
            if not digits:
                raise ValueError(f"CUDA architecture '{arch}' must look like 80, 90 or sm_90")
            return GPUTarget("cuda", int(digits), 32)
        props = device_props(0 if device is None else device)
        return GPUTarget("cuda", props["major"] * 10 + props["minor"], 32)

    # ---- load -> prepare -> pack -> launch ------------------------------------------------
    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> LoadedModule:
        drv = _driver_or_raise()
        arch = _arch_of(kernel.target)
        props = device_props(device)
        have = props["major"] * 10 + props["minor"]
        if arch // 10 != props["major"] or arch % 10 > props["minor"]:
            raise BackendError(
                f"kernel '{kernel.name}' (variant '{kernel.signature}') was compiled for sm_{arch}, which cannot run "
                f"on CUDA device {device} ({props['name']}, sm_{have}); compile it for cuda:{have}")
        binary = kernel.binary if kernel.binary is not None else kernel.asm.get("cubin")
        if binary is None:
            raise BackendError(f"kernel '{kernel.name}' (variant '{kernel.signature}') has no cubin to load")
        name = kernel.metadata.get("name", kernel.name)
        try:
            return LoadedModule(*drv.load_binary(name, bytes(binary), device))
        except RuntimeError as exc:  # the driver refused the image (corrupt, truncated, wrong arch)
            raise BackendError(f"kernel '{kernel.name}' (variant '{kernel.signature}'): loading its cubin on CUDA "
                               f"device {device} failed: {exc}") from exc

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: LoadedModule, device: int) -> LaunchState:
        drv = _driver_or_raise()
        md = kernel.metadata
        props = device_props(device)
        num_warps = int(md.get("num_warps", 4))
        num_ctas = int(md.get("num_ctas", 1) or 1)
        shared = int(md.get("shared", 0) or 0)
        threads = 32 * num_warps
        if threads > handle.max_threads:
            raise OutOfResources(
                kernel.name, kernel.signature,
                f"{threads} threads per block ({num_warps} warps) requested, but with {handle.n_regs} registers per "
                f"thread at most {handle.max_threads} fit on device {device} "
                f"({props['max_registers_per_block']} registers per block); use fewer warps or smaller blocks")
        if shared > props["max_shared_optin"]:
            raise OutOfResources(
                kernel.name, kernel.signature,
                f"needs {shared} bytes of shared memory per block, device {device} ({props['name']}) allows at most "
                f"{props['max_shared_optin']}; use smaller block sizes or fewer num_stages")
        if shared > 49152:
            drv.set_dynamic_shared(handle.function, device, props["max_shared_optin"] - handle.static_shared)
        if num_ctas == 16:
            drv.allow_nonportable_cluster(handle.function, device)
        abi = device_abi(kernel.signature, md, kernel.runtime_params, drv.fill_tma_descriptor)
        types, index = abi.codes, abi.param_index
        n_scratch, scratch = scratch_layout(md)
        _torch_glue.share_stream_reader(drv)
        launcher = drv.Launcher(
            name=kernel.name, function=handle.function, context=handle.context, device=device,
            num_warps=num_warps, shared=shared, num_ctas=num_ctas,
            cooperative=bool(md.get("launch_cooperative_grid", False)), pdl=bool(md.get("launch_pdl", False)),
            types=types, param_index=index, n_scratch=n_scratch, scratch=scratch,
            max_grid=(props["max_grid_x"], props["max_grid_y"], props["max_grid_z"]),
            scratch_alloc=_torch_glue.scratch_alloc, scratch_free=_torch_glue.scratch_free, paths=abi.paths,
        )
        return LaunchState(launcher, kernel.name, kernel.signature, device, types, index, abi.expand,
                           abi.paths is not None)

    @hookimpl
    def pack_args(self, state: LaunchState, args: Sequence[Any]) -> list[bytes]:
        return _driver_or_raise().pack(state.types, args if state.expand is None else state.expand(args))

    @hookimpl
    def launch(self, state: LaunchState, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        state.launcher.launch_packed(tuple(grid), stream, packed)

    @hookimpl
    def make_launcher(self, state: LaunchState) -> Any:
        if state.expand is None:
            return state.launcher
        # tuples and descriptors: a Python call is expanded here (host TMA descriptors are
        # made per launch, as Triton's launcher makes them), then the same C launcher.
        # Without descriptors, the C launch entry reads the tuples itself (TJ_ARG_TUPLE),
        # so the native dispatcher launches these variants as it launches plain ones.
        launch, expand = state.launcher, state.expand

        def launcher(grid: tuple[int, int, int], stream: int, args: Sequence[Any]) -> None:
            launch(grid, stream, expand(args))

        if state.c_tuples:
            launcher.tritonjit_launch = launch.tritonjit_launch  # type: ignore[attr-defined]
        return launcher


plugin = CudaBackend()
