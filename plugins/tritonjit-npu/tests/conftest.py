"""Fixtures: the SIMULATED Ascend runtime (built here with gcc) and an 'npu' backend
running against it. No NPU hardware is involved anywhere in these tests."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tritonjit
import tritonjit_npu
from npu_simdriver import SimAscend, build, build_kernel_elf
from tritonjit_npu import _plugin

_TORCH_NPU = _plugin.torch_npu  # the cached lookup, before any test replaces it
KERNEL_NAMES = ("add_kernel", "scale_kernel", "mixed_kernel")


def _refresh(backend: tritonjit.Backend) -> None:
    tritonjit_npu.reset_driver()
    backend.refresh_availability()  # availability is remembered per process; the driver changed


@pytest.fixture(scope="session")
def npu_sim_build(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the simulated Ascend runtime")
    out = str(tmp_path_factory.mktemp("ascend_sim"))
    return SimpleNamespace(lib=build(out), elf=build_kernel_elf(out, *KERNEL_NAMES))


@pytest.fixture
def npu_sim(npu_sim_build: SimpleNamespace, monkeypatch: pytest.MonkeyPatch):
    """The simulated runtime, installed as the plugin's driver; the 'npu' backend is current."""
    monkeypatch.setenv(tritonjit_npu.ENV_DRIVER, npu_sim_build.lib)
    backend = tritonjit.get_backend("npu")
    _refresh(backend)
    s = SimAscend(npu_sim_build.lib)
    s.reset()
    s.elf = npu_sim_build.elf
    tritonjit.set_backend("npu")
    yield s
    tritonjit.set_backend(None)
    monkeypatch.delenv(tritonjit_npu.ENV_DRIVER)
    _refresh(backend)
    _TORCH_NPU.cache_clear()


@pytest.fixture
def npu_compiler(npu_sim, monkeypatch: pytest.MonkeyPatch):
    """Stands in for Triton-Ascend (not installable here): 'compiles' any variant to the
    test's ELF with the metadata Triton-Ascend would write. Returns the metadata dict
    the next compile will use, for the test to adjust."""
    meta: dict = {"mix_mode": "aiv"}
    compiled: list = []

    def compile_hook(src, target, options):
        name = src.fn.fn.__name__
        cv = tritonjit.CompiledVariant(
            name=name, signature="", target=target, binary=npu_sim.elf,
            metadata={"name": name, "shared": 0, "num_warps": options.get("num_warps", 4), **meta},
            hash=uuid.uuid4().hex, artifact=SimpleNamespace(src=src),
        )
        compiled.append(cv)
        return cv

    backend = tritonjit.get_backend("npu")
    monkeypatch.setattr(backend, "compile", compile_hook)
    return SimpleNamespace(meta=meta, compiled=compiled)
