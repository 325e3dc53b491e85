"""Devices and streams from the vendor's torch: the device hooks, written once.

Every accelerator plugin answers ``device_of``, ``current_device``, ``current_stream``
and ``device_guard`` the same way, from the vendor's torch device module
(``torch.cuda``, ``torch.npu``, ``torch.musa``...), with a fallback where that module
is absent (device 0, the default stream 0, no guard). The autotuner's device facts
(``synchronize``, ``device_name``, ``benchmarker``) come from the same module, so the
core never looks a device up by its type.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from .._backend import BackendInfo
from .._hookspecs import hookimpl
from .._timing import wall_clock_bench


class TorchDevices:
    """Mixin: the device hooks over the vendor's torch device module.

    A plugin sets ``info`` (tensors of ``info.device_type`` are its own) and
    ``stream_attr``, and says where its torch module is in :meth:`find_torch_module`
    (asked once; a test may set ``_torch``). Where a runtime answers without torch,
    it overrides :meth:`fallback_device` / :meth:`fallback_guard`; where torch has a
    faster stream reader than a stream object, :meth:`raw_stream`.
    """

    info: BackendInfo
    #: attribute of the vendor's torch stream object holding the raw handle
    stream_attr: str = "cuda_stream"
    #: the torch device module once looked up (None: absent; False: not looked up yet)
    _torch: Any = False

    # ---- the vendor's torch device module ---------------------------------------------------
    def find_torch_module(self) -> Any:
        """The vendor's torch device module, or None where torch or its vendor build
        is absent (override per plugin; must not raise for an absent runtime)."""
        return None

    def torch_device_module(self) -> Any:
        """:meth:`find_torch_module`'s answer, looked up once."""
        mod = self._torch
        if mod is False:
            mod = self._torch = self.find_torch_module()
        return mod

    def raw_stream(self, mod: Any, device: int) -> int:
        """The raw handle of ``device``'s current stream, from the torch module ``mod``."""
        return int(getattr(mod.current_stream(device), self.stream_attr))

    def fallback_device(self) -> int:
        """The current device without the vendor's torch."""
        return 0

    def fallback_guard(self, device: int) -> contextlib.AbstractContextManager[None]:
        """Making ``device`` current without the vendor's torch."""
        return contextlib.nullcontext()

    # ---- devices and streams ------------------------------------------------------------------
    @hookimpl
    def current_device(self) -> int:
        mod = self.torch_device_module()
        return int(mod.current_device()) if mod is not None else self.fallback_device()

    def current_device_reader(self) -> Callable[[], int]:
        """What the native dispatcher calls for the current device (a kernel without tensor
        arguments, on every call): the hook by default. A plugin whose torch module has a
        C-level reader that initializes lazily as ``current_device()`` does returns it (a
        few Python calls fewer per launch)."""
        return self.current_device

    @hookimpl
    def device_of(self, tensor: Any) -> int:
        dev = getattr(tensor, "device", None)
        kind = self.info.device_type
        if getattr(dev, "type", None) != kind:
            raise ValueError(f"the {self.info.name} backend takes {kind.upper()} tensors (device type '{kind}'), "
                             f"got a tensor on '{dev}'")
        return int(getattr(dev, "index", None) or 0)

    @hookimpl
    def current_stream(self, device: int) -> int:
        mod = self.torch_device_module()
        return self.raw_stream(mod, device) if mod is not None else 0  # 0: the default stream

    @hookimpl
    def device_guard(self, device: int) -> contextlib.AbstractContextManager[None]:
        mod = self.torch_device_module()
        return mod.device(device) if mod is not None else self.fallback_guard(device)

    # ---- device facts for the autotuner ---------------------------------------------------------
    @hookimpl
    def synchronize(self, device: int) -> None:
        mod = self.torch_device_module()
        if mod is not None:
            mod.synchronize(device)

    @hookimpl
    def device_name(self, device: int) -> str:
        mod = self.torch_device_module()
        if mod is None or not hasattr(mod, "get_device_name"):
            return ""
        return str(mod.get_device_name(device))

    @hookimpl
    def benchmarker(self) -> Callable[[Callable[[], Any]], float]:
        """Wall clock around the current device's synchronize: every vendor torch has
        that (a plugin with device event timing overrides this)."""
        def sync() -> None:
            mod = self.torch_device_module()
            if mod is not None:
                mod.synchronize()  # the current device: the core makes the tuned one current

        return lambda fn: wall_clock_bench(fn, sync)
