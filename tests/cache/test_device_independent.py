"""Keys and artifacts do not depend on the device index: a variant compiled for device 0
is what device 1 of the same model loads (rank 1 on cuda:1 hits what rank 0 compiled on
cuda:0), in the index, in the tuned-config store and on the remote cache alike.

A stand-in backend with two devices of one model (cuda:90) compiles through Triton's
own cross-compiler and launches nothing; benchmarks/distributed.py checks the same under
torchrun on two GPUs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cache_support import SIG
from tritonjit._backend import BackendInfo
from tritonjit._hookspecs import hookimpl
from tritonjit.testing import FakeTensor, RecordingBackend


class TwoH200(RecordingBackend):
    """Two devices of one model; Triton compiles for it (no ``compile`` hook)."""

    compile = None  # type: ignore[assignment]  # not a hook here: triton.compile serves it

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name=self.name, priority=-1000, device_type="recdev", binary_ext="cubin",
                           triton_backend="cuda")

    @hookimpl
    def compile_target(self, device: Any, arch: Any) -> Any:
        from triton.backends.compiler import GPUTarget

        assert device in (0, 1, None)
        return GPUTarget("cuda", 90, 32)  # what the device is, never which one

    @hookimpl
    def device_name(self, device: int) -> str:
        return "NVIDIA H200"


@pytest.fixture
def two_devices(caches: Path) -> Iterator[TwoH200]:
    import tritonjit

    backend = TwoH200(name="two-h200")
    tritonjit.register_backend(backend)
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("two-h200")
    try:
        yield backend
    finally:
        tritonjit._registry.registry._current = previous
        tritonjit.unregister_backend("two-h200")


def test_device_1_loads_what_device_0_compiled(two_devices: TwoH200, kernel_file: Callable[..., str],
                                               compile_counter: list[Any]) -> None:
    import tritonjit
    from tritonjit._disk_cache import index

    f = tritonjit.function(kernel_file(), "axpy")
    for device in (0, 1):
        x, y, out = (FakeTensor(1 << 20, device=device) for _ in range(3))
        f[(1,)](x, y, out, 100, 2.0, BLOCK=128)
    variants = sorted(f.variants(), key=lambda v: v.device)
    assert [v.device for v in variants] == [0, 1]
    assert [v.compiled.cache_source for v in variants] == ["compiled", "local"]
    assert len(compile_counter) == 1 and len(index.keys()) == 1
    assert variants[0].compiled.hash == variants[1].compiled.hash
    assert variants[1].compiled.signature == SIG
    entry = index.read_entry(index.keys()[0])
    assert entry is not None and entry["target"] == "cuda:90"
    assert "device" not in entry["options"] and entry["artifact"] == Path(variants[0].compiled.cache_dir).name


def test_tuned_configs_are_stored_by_device_model_not_index(two_devices: TwoH200) -> None:
    import triton
    from tritonjit._autotune import ConfigStore, device_name
    from tritonjit._registry import registry

    backend = registry.get("two-h200")
    names = {device_name(backend, d) for d in (0, 1)}
    assert names == {"two-h200/cuda:90/NVIDIA H200"}
    at = type("AT", (), {"configs": [triton.Config({"B": 32}), triton.Config({"B": 64})], "keys": ["n"]})()
    jit = type("J", (), {"cache_key": "k" * 64})()
    stores = [ConfigStore("tuned", jit, at, device_name(backend, d)) for d in (0, 1)]
    assert stores[0].path == stores[1].path
    stores[0].put((1024,), 1, {0: 2.0, 1: 1.0})
    assert stores[1].get((1024,)) is at.configs[1]
