"""pluginkit's TorchDevices: the device hooks written once, over a vendor's torch module
(a fake one here), with the fallbacks where that module is absent; and the in-repo
plugins take their device hooks from it instead of writing their own."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
from tritonjit import BackendInfo
from tritonjit._registry import Registry
from tritonjit.interpreter import InterpreterBackend
from tritonjit.pluginkit import TorchDevices

DEVICE_HOOKS = ("device_of", "current_device", "current_stream", "device_guard")


class FakeTorchModule:
    """What a vendor's torch device module (torch.cuda, torch.npu...) offers."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def current_device(self) -> int:
        return 2

    def current_stream(self, device: int) -> SimpleNamespace:
        return SimpleNamespace(fake_stream=0x100 + device)

    def device(self, device: int) -> contextlib.AbstractContextManager:
        self.calls.append(("device", device))
        return contextlib.nullcontext(device)

    def synchronize(self, device: int | None = None) -> None:
        self.calls.append(("synchronize", device))

    def get_device_name(self, device: int) -> str:
        return f"Fake Accelerator {device}"


class FakeDevices(TorchDevices):
    info = BackendInfo(name="fakedev", triton_backend="interpreter", device_type="fakedev")
    stream_attr = "fake_stream"

    def __init__(self, module: FakeTorchModule | None = None) -> None:
        self.module, self.lookups = module, 0

    def find_torch_module(self) -> FakeTorchModule | None:
        self.lookups += 1
        return self.module


def _tensor(kind: str, index: int | None) -> SimpleNamespace:
    return SimpleNamespace(device=SimpleNamespace(type=kind, index=index))


def test_device_of_takes_the_backends_tensors_only():
    dev = FakeDevices()
    assert dev.device_of(_tensor("fakedev", 3)) == 3 and dev.device_of(_tensor("fakedev", None)) == 0
    with pytest.raises(ValueError, match=r"fakedev backend takes FAKEDEV tensors \(device type 'fakedev'\).*cpu"):
        dev.device_of(_tensor("cpu", None))
    with pytest.raises(ValueError, match="got a tensor on 'None'"):
        dev.device_of(object())


def test_without_the_vendor_torch_the_fallbacks():
    dev = FakeDevices(None)
    assert dev.current_device() == 0 and dev.current_stream(1) == 0
    assert isinstance(dev.device_guard(1), contextlib.nullcontext)
    dev.synchronize(1)  # nothing to wait for
    assert dev.device_name(1) == ""
    assert dev.benchmarker()(lambda: None) >= 0.0
    assert dev.lookups == 1, "the module is looked up once"


def test_with_the_vendor_torch_every_hook_asks_it():
    mod = FakeTorchModule()
    dev = FakeDevices(mod)
    assert dev.current_device() == 2
    assert dev.current_stream(3) == 0x103  # through stream_attr
    with dev.device_guard(1) as entered:
        assert entered == 1
    dev.synchronize(4)
    assert dev.device_name(5) == "Fake Accelerator 5"
    calls = []
    ms = dev.benchmarker()(lambda: calls.append(1))
    assert ms >= 0.0 and calls
    assert mod.calls[:2] == [("device", 1), ("synchronize", 4)]
    # the benchmarker synchronizes the current device (the core makes the tuned one current)
    assert set(mod.calls[2:]) == {("synchronize", None)}
    assert dev.lookups == 1


def test_a_test_may_set_the_module():
    dev = FakeDevices(None)
    assert dev.current_stream(0) == 0
    dev._torch = FakeTorchModule()
    assert dev.current_stream(2) == 0x102


def test_registered_its_hooks_resolve_to_the_mixin():
    class Full(FakeDevices, InterpreterBackend):
        pass

    backend = Registry().register(Full(FakeTorchModule()))
    for hook in (*DEVICE_HOOKS, "synchronize", "device_name", "benchmarker"):
        assert getattr(backend, hook).__func__ is getattr(TorchDevices, hook), hook
    assert backend.device_name(0) == "Fake Accelerator 0"


@pytest.mark.parametrize("package", ["tritonjit_cuda", "tritonjit_npu", "tritonjit_mlu", "tritonjit_gcu",
                                     "tritonjit_hcu", "tritonjit_ix", "tritonjit_maca", "tritonjit_musa"])
def test_the_plugins_take_their_device_hooks_from_the_mixin(package):
    plugin = pytest.importorskip(package).plugin
    assert isinstance(plugin, TorchDevices)
    for hook in DEVICE_HOOKS:
        assert getattr(type(plugin), hook) is getattr(TorchDevices, hook), f"{package} writes its own {hook}"
    assert plugin.device_of(_tensor(plugin.info.device_type, 1)) == 1
