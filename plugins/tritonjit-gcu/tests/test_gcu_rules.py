"""What is Enflame's own, checked against the SIMULATED TopsRT: argument widths,
blockDim = num_warps, grid limits, streams from torch_gcu, the compiler requirement."""

from __future__ import annotations

import struct

import pytest
import torch
import triton
import triton.language as tl
import tritonjit
from tritonjit._variant import (
    make_variant,  # the core's load -> prepare -> launcher path
)
from tritonjit.pluginkit import stand_in_variant
from tritonjit.testing import assert_installed_backend, assert_vendor_compiler_missing, fresh_backend


@triton.jit
def flag_kernel(x, flag, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if flag:
        tl.store(x + offs, 1.0, mask=offs < n)


SIG = "*fp32:16,u1,i32,64"


def _variant(gcu, tops_sim, num_warps=4):
    fn = tritonjit.function(flag_kernel)
    compiled = stand_in_variant("flag_kernel", SIG, gcu.compile_target(None, "gcu400"), tops_sim.elf, num_warps=num_warps)
    tops_sim.expect_params("flag_kernel", [8, 4, 4])  # what triton_gcu's launcher passes: void*, uint32_t, int32_t
    return make_variant(fresh_backend(gcu), compiled, fn.parse_signature(SIG), 0)


def test_bool_travels_as_uint32_and_block_is_num_warps(gcu, tops_sim):
    x = torch.zeros(64)
    _variant(gcu, tops_sim, num_warps=8).launcher((2, 3, 1), 0x51, (x, True, 64))
    (rec,) = tops_sim.launches()
    assert rec.params == (struct.pack("<Q", x.data_ptr()), struct.pack("<I", 1), struct.pack("<i", 64))
    assert rec.block == (8, 1, 1) and rec.grid == (2, 3, 1) and rec.stream == 0x51


def test_bf16_scalar_is_truncated_like_triton_gcu(gcu, tops_sim):
    # 0x3F80C000 is 1.00586 in fp32: truncation keeps 0x3F80, round-to-nearest-even would give 0x3F81
    value = struct.unpack("<f", struct.pack("<I", 0x3F80C000))[0]
    compiled = stand_in_variant("flag_kernel", "*fp32:16,bf16,i1,64", gcu.compile_target(None, "gcu300"),
                                tops_sim.elf)
    tops_sim.expect_params("flag_kernel", [8, 2, 4])
    state = gcu.prepare(compiled, gcu.load(compiled, 0), 0)
    x = torch.zeros(4)
    gcu.launch(state, (1, 1, 1), 0, gcu.pack_args(state, (x, value, True)))
    (rec,) = tops_sim.launches()
    assert rec.params == (struct.pack("<Q", x.data_ptr()), struct.pack("<H", 0x3F80), struct.pack("<i", 1))


@pytest.mark.parametrize("grid,axis", [((65536, 1, 1), "x"), ((1, 256, 1), "y"), ((1, 1, 256), "z")])
def test_grid_limits_of_triton_gcu(gcu, tops_sim, grid, axis):
    v = _variant(gcu, tops_sim)
    with pytest.raises(tritonjit.GridError, match=f"grid.{axis}"):
        v.launcher(grid, 0, (torch.zeros(4), False, 4))
    v.launcher((65535, 255, 255), 0, (torch.zeros(4), False, 4))
    assert len(tops_sim.launches()) == 1


def test_values_topsrt_would_truncate_are_refused(gcu, tops_sim):
    """The fused launcher calls topsModuleLaunchKernel through ctypes, which would pass a
    stream of 2**64 as 0 (the default stream): refused, like a grid dimension below 1."""
    v = _variant(gcu, tops_sim)
    with pytest.raises(tritonjit.BackendError, match="stream handle"):
        v.launcher((1, 1, 1), 2**64, (torch.zeros(4), False, 4))
    with pytest.raises(tritonjit.GridError, match="refused rather than truncated"):
        v.launcher((0, 1, 1), 0, (torch.zeros(4), False, 4))
    assert tops_sim.launches() == []


def test_stream_and_device_from_torch_gcu(gcu):
    class FakeTorchGcu:  # what torch_gcu's torch.gcu offers
        def current_device(self):
            return 1

        def current_stream(self, device):
            return type("S", (), {"gcu_stream": 0x9000 + device})()

    gcu._torch = FakeTorchGcu()
    assert gcu.current_stream(1) == 0x9001 and gcu.current_device() == 1


def test_without_torch_gcu_the_default_stream(gcu):
    assert gcu.current_stream(0) == 0


def test_cross_compile_without_triton_gcu_is_a_clear_error():
    assert_vendor_compiler_missing(flag_kernel, SIG, "gcu:gcu300", "triton_gcu", "topscc")
    with pytest.raises(ValueError, match="not a GCU architecture"):
        tritonjit.function(flag_kernel).compile(SIG, target="gcu:sm90")


def test_facts():
    assert_installed_backend("gcu", "tritonjit-gcu", dispatch_key="PrivateUse1", device_type="gcu",
                             binary_ext="fatbin")
