"""Python objects the C++ API (include/tritonjit/function.h) hands to the runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Device:
    """What the plugins' ``device_of`` reads of a tensor's ``.device`` (torch.device's
    two fields; not a NamedTuple, whose ``index`` is tuple's method)."""

    type: str
    index: int

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"


class Pointer:
    """A raw device address with a dtype (tritonjit::DevicePtr) on the device the C++
    call runs on: the binder specializes it as a tensor of that dtype, the plugins
    read its device, the launchers its ``data_ptr()``."""

    __slots__ = ("address", "dtype", "device")

    def __init__(self, address: int, dtype: Any, device_type: str = "cpu", index: int = 0) -> None:
        self.address = address
        self.dtype = dtype
        self.device = Device(device_type, index)

    def data_ptr(self) -> int:
        return self.address

    def get_device(self) -> int:
        return -1 if self.device.type == "cpu" else self.device.index

    def __repr__(self) -> str:
        return f"tritonjit.Pointer(0x{self.address:x}, {self.dtype}, {self.device})"
