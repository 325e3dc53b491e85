"""load -> prepare -> pack_args -> launch against the SIMULATED CNDrv, plus the
plugin's availability, targets and compile hook."""

from __future__ import annotations

import struct
import threading

import pytest
import torch
import triton
import triton.language as tl
import tritonjit
from mlu_simdriver import fatbin
from tritonjit._variant import (
    make_variant,  # the core's load -> prepare -> launcher path
)
from tritonjit.testing import assert_installed_backend, assert_vendor_compiler_missing, fresh_backend
from tritonjit_mlu import MluBackend


@triton.jit
def mlu_kernel(x, out, n, scale, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if flag:
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * scale, mask=offs < n)


SIG = "*fp32:16,*fp32:16,i32,fp16,u1,256"


def variant(mlu, cn_sim, num_warps=4, promote_shared=False, binary=None):
    fn = tritonjit.function(mlu_kernel)
    compiled = tritonjit.CompiledVariant(
        name="mlu_kernel", signature=SIG, target=mlu.compile_target(None, "592"),
        binary=binary or fatbin("other", "mlu_kernel"),
        metadata={"name": "mlu_kernel", "num_warps": num_warps, "promote_shared": promote_shared, "shared": 0},
        hash=f"mlu-{num_warps}-{promote_shared}-{id(binary)}")
    cn_sim.expect_params("mlu_kernel", [8, 8, 4, 4, 4])  # CNaddr, CNaddr, int32_t, float, uint32_t
    return make_variant(fresh_backend(mlu), compiled, fn.parse_signature(SIG), 0)


def test_params_by_flagtree_types_and_grid_scaled_by_num_warps(mlu, cn_sim):
    x, out = torch.ones(8), torch.zeros(8)
    variant(mlu, cn_sim, num_warps=4).launcher((3, 2, 1), 0xABC, (x, out, 77, 0.5, True))
    (rec,) = cn_sim.launches()
    assert rec["params"] == (struct.pack("<Q", x.data_ptr()), struct.pack("<Q", out.data_ptr()),
                             struct.pack("<i", 77), struct.pack("<f", 0.5), struct.pack("<I", 1))
    assert rec["grid"] == (12, 2, 1) and rec["class"] == 4 and rec["stream"] == 0xABC
    assert rec["kernel"] == "mlu_kernel"


@pytest.mark.parametrize("grid,promote,expected_class", [
    ((8, 1, 1), False, 4),    # num_warps=1, gridX multiple of 4 cores, fits 32 cores: UNION1
    ((9, 1, 1), False, 1),    # not a multiple of core_num_per_cluster: BLOCK
    ((64, 1, 1), False, 1),   # more tasks than cores and no shared promotion: BLOCK
    ((64, 1, 1), True, 4),    # ... unless the kernel promotes shared memory
])
def test_kernel_class_rule(mlu, cn_sim, grid, promote, expected_class):
    x, out = torch.ones(8), torch.zeros(8)
    variant(mlu, cn_sim, num_warps=1, promote_shared=promote).launcher(grid, 0, (x, out, 8, 1.0, False))
    assert cn_sim.launches()[-1]["class"] == expected_class


def test_grid_limit_after_scaling(mlu, cn_sim):
    v = variant(mlu, cn_sim, num_warps=4)
    with pytest.raises(tritonjit.GridError, match="over the MLU's limit of 4096"):
        v.launcher((1025, 1, 1), 0, (torch.ones(1), torch.ones(1), 1, 1.0, True))
    v.launcher((1024, 1, 1), 0, (torch.ones(1), torch.ones(1), 1, 1.0, True))
    assert len(cn_sim.launches()) == 1


def test_kernel_missing_from_the_binary_is_a_clear_error(mlu, cn_sim):
    with pytest.raises(tritonjit.BackendError, match="cnModuleGetKernel failed for kernel 'mlu_kernel'.*NOT_FOUND"):
        variant(mlu, cn_sim, binary=fatbin("something_else"))


def test_corrupt_binary_is_refused(mlu, cn_sim):
    with pytest.raises(tritonjit.BackendError, match="cnModuleLoadFatBinary.*INVALID_IMAGE"):
        variant(mlu, cn_sim, binary=b"\x7fELF" + bytes(64))


def test_driver_failure_then_recovery(mlu, cn_sim):
    v = variant(mlu, cn_sim)
    args = (torch.ones(1), torch.ones(1), 1, 1.0, True)
    cn_sim.lib.sim_fail_next(b"cnInvokeKernel", 1)
    with pytest.raises(tritonjit.BackendError, match="cnInvokeKernel failed for kernel 'mlu_kernel'"):
        v.launcher((1, 1, 1), 0, args)
    v.launcher((1, 1, 1), 0, args)
    assert len(cn_sim.launches()) == 1


def test_bad_argument_names_the_parameter(mlu, cn_sim):
    v = variant(mlu, cn_sim)
    with pytest.raises(tritonjit.ArgumentError, match="n"):
        v.launcher((1, 1, 1), 0, (torch.ones(1), torch.ones(1), "seven", 1.0, True))


def test_threads_launch_at_once(mlu, cn_sim):
    v = variant(mlu, cn_sim)
    x, out = torch.ones(4), torch.zeros(4)

    def work(i):
        for _ in range(20):
            v.launcher((i + 1, 1, 1), i, (x, out, i, float(i), True))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    launches = cn_sim.launches()
    assert len(launches) == 120
    for rec in launches:  # every record is one consistent launch: no torn buffers
        i = rec["stream"]
        assert rec["grid"][0] == (i + 1) * 4 and rec["params"][2] == struct.pack("<i", i)
        assert rec["params"][3] == struct.pack("<f", float(i))


def test_available_on_the_simulated_driver_and_inert_without_it(mlu, tmp_path):
    ok, why = mlu.availability()
    assert ok and "SIMULATED" in why
    absent = MluBackend(library=str(tmp_path / "libcndrv.so"))
    ok, why = absent.availability()
    assert not ok and "libcndrv.so" in why and absent.device_count() == 0


def test_stream_from_torch_mlu(mlu):
    class FakeTorchMlu:
        def current_stream(self, device):
            return type("S", (), {"mlu_stream": 0x4400 + device})()

    assert mlu.current_stream(0) == 0
    mlu._torch = FakeTorchMlu()
    assert mlu.current_stream(2) == 0x4402


def test_cross_compile_without_flagtree_is_a_clear_error():
    assert_vendor_compiler_missing(mlu_kernel, SIG, "mlu:592", "FlagTree", "cnas")
    with pytest.raises(ValueError, match="ISA version"):
        tritonjit.function(mlu_kernel).compile(SIG, target="mlu:sm90")


def test_facts():
    backend = assert_installed_backend("mlu", "tritonjit-mlu", dispatch_key="PrivateUse1", device_type="mlu",
                                       binary_ext="cnbin")
    assert backend.compile_target(None, "mtp_592").arch == 592
