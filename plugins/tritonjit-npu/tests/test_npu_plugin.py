"""Discovery, availability, targets and the compile hook of the npu plugin."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl
import tritonjit
import tritonjit_npu
from tritonjit.testing import assert_installed_backend, assert_vendor_compiler_missing


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def test_discovered_through_the_entry_point():
    backend = assert_installed_backend("npu", "tritonjit-npu", dispatch_key="PrivateUse1", device_type="npu",
                                       binary_ext="npubin", triton_backend="npu")
    assert backend.specialization_rules() == tritonjit.SpecializationRules(equal_to_1=False)


def test_absent_runtime_leaves_the_plugin_inert(monkeypatch, tmp_path):
    monkeypatch.delenv(tritonjit_npu.ENV_DRIVER, raising=False)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    tritonjit_npu.reset_driver()
    try:
        ok, why = tritonjit_npu.plugin.availability()
        assert not ok
        assert "libascendcl.so" in why and str(tmp_path) in why
        assert tritonjit_npu.plugin.device_count() == 0
        assert tritonjit.get_backend("interpreter").available  # the others are untouched
    finally:
        tritonjit_npu.reset_driver()


def test_named_library_that_does_not_exist(monkeypatch, tmp_path):
    missing = str(tmp_path / "libnothing.so")
    monkeypatch.setenv(tritonjit_npu.ENV_DRIVER, missing)
    tritonjit_npu.reset_driver()
    try:
        ok, why = tritonjit_npu.plugin.availability()
        assert not ok and missing in why
    finally:
        tritonjit_npu.reset_driver()


def test_available_on_the_simulated_runtime_and_says_so(npu_sim):
    ok, why = tritonjit.get_backend("npu").is_available()
    assert ok and "SIMULATED" in why
    assert tritonjit_npu.plugin.device_count() == 1
    assert tritonjit_npu.plugin.compile_target(0, None).arch == "Ascend910B3"


def test_no_device_is_unavailable(npu_sim):
    npu_sim.lib.sim_set_device_count(0)
    ok, why = tritonjit_npu.plugin.availability()
    assert not ok and "no NPU device" in why


def test_cross_compile_without_triton_ascend_is_a_clear_error():
    assert_vendor_compiler_missing(copy_kernel, "*fp32:16,*fp32:16,i32,1024", "npu:Ascend910B3",
                                   "Triton-Ascend", "npu", "bishengir-compile")


def test_target_names_an_ascend_soc():
    target = tritonjit_npu.plugin.compile_target(None, "Ascend910B3")
    assert (target.backend, target.arch, target.warp_size) == ("npu", "Ascend910B3", 0)
    with pytest.raises(ValueError, match="Ascend SoC name"):
        tritonjit.function(copy_kernel).compile("*fp32:16,*fp32:16,i32,1024", target="npu:sm90")
