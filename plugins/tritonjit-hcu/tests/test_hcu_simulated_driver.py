"""hcu against a SIMULATED HIP driver, with REAL hsaco from Triton's AMD backend.

Nothing here ran on a Hygon DCU. Triton's AMD backend really compiles the kernels
for gfx942 on this machine; the simulated libamdhip64 checks that the image is an
ELF holding the kernel symbol, the launch geometry, and the argument bytes against
the kernarg layout the AMD compiler wrote into the code object's metadata.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

import triton
import triton.language as tl
import tritonjit
from tritonjit import CompilationError
from tritonjit.pluginkit import (
    ArgLayout,
    CompilerMissing,
    SimulatedDriver,
    build_simulated_driver,
)
from tritonjit.testing import (
    CONFORMANCE_SIGNATURE,
    BackendConformance,
    ConformanceTarget,
    HostBackedTensor,
    conformance_axpy,
    expected_params,
    installed_as_current,
    simulated_target,
)
from tritonjit_hcu import HcuBackend
from tritonjit_hcu._backend import HIP_ATTR_MAX_SHARED_PER_BLOCK

MAX_SHARED = 64 * 1024  # what the simulated device reports (see conftest)

ARCH = "gfx942"  # a CDNA target upstream Triton compiles; Hygon's own need the DTK Triton


@pytest.fixture(scope="session")
def sim_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        return build_simulated_driver(HcuBackend.driver_spec, tmp_path_factory.mktemp("simhip"))
    except CompilerMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture
def sim(sim_path: str) -> SimulatedDriver:
    s = SimulatedDriver(sim_path)
    s.configure(devices=1, warp_size=64, max_threads=1024, static_shared=MAX_SHARED, max_shared=MAX_SHARED)
    s.set_attribute(HIP_ATTR_MAX_SHARED_PER_BLOCK, MAX_SHARED)
    s.reset()
    return s



def kernarg_args(compiled) -> list[tuple[int, int]]:
    """(offset, size) of each kernel argument, from the AMD compiler's metadata."""
    text = compiled.asm["amdgcn"]
    block = text[text.index(".args:"): text.index(".group_segment_fixed_size")]
    offsets = [int(v) for v in re.findall(r"\.offset:\s+(\d+)", block)]
    sizes = [int(v) for v in re.findall(r"\.size:\s+(\d+)", block)]
    return list(zip(offsets, sizes))


def compile_hsaco(fn, sig, opts):
    return fn.compile(sig, target=f"hcu:{ARCH}", **opts)


class TestHcuConformanceSimulatedDriver(BackendConformance):
    @pytest.fixture
    def conformance(self, sim, sim_path) -> ConformanceTarget:
        return simulated_target(
            HcuBackend(library=sim_path), sim, "hcu", compile_hsaco,
            param_sizes=lambda c: [s for _, s in kernarg_args(c)] if "amdgcn" in c.asm else
            [len(b) for b in expected_params(c, [0, 0, 0, 0, 0.0])],
            launch_symbol="hipModuleLaunchKernel", entry_point="hcu", arch=ARCH,
            unavailable_plugin=lambda: HcuBackend(library="/nonexistent/dtk/lib/libamdhip64.so"),
            missing_library="libamdhip64.so", max_shared=MAX_SHARED,
        )


def test_real_hsaco_kernarg_layout_matches_pluginkit_packing():
    compiled = tritonjit.function(conformance_axpy).compile(CONFORMANCE_SIGNATURE, target=f"hcu:{ARCH}")
    assert compiled.binary[:4] == b"\x7fELF"
    assert compiled.metadata["warp_size"] == 64
    layout = ArgLayout.for_variant(compiled)
    assert [(s.offset, s.size) for s in layout.slots] == kernarg_args(compiled)
    seg = int(re.search(r"\.kernarg_segment_size:\s+(\d+)", compiled.asm["amdgcn"]).group(1))
    assert layout.size == seg


def test_simulated_hipModuleLoadDataEx_receives_the_real_code_object(sim, sim_path):
    compiled = tritonjit.function(conformance_axpy).compile(CONFORMANCE_SIGNATURE, target=f"hcu:{ARCH}")
    plugin = HcuBackend(library=sim_path)
    handle = plugin.load(compiled, 0)
    assert handle.function != 0
    loads = [r for r in sim.records() if r.startswith("load ")]
    assert loads[-1].startswith("load symbol=hipModuleLoadDataEx") and f"bytes={len(compiled.binary)}" in loads[-1]
    assert sim.records()[-1] == "get_function name=conformance_axpy"


def test_user_path_launch_through_simulated_driver(sim, sim_path, monkeypatch):
    @triton.jit
    def hcu_scale(x, out, n, s, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * s, mask=offs < n)

    monkeypatch.setenv("TRITONJIT_HCU_ARCH", ARCH)
    x, out = HostBackedTensor(torch.ones(1000), "cuda"), HostBackedTensor(torch.empty(1000), "cuda")
    with installed_as_current(HcuBackend(library=sim_path)):
        f = tritonjit.function(hcu_scale)
        sim.expect_params("hcu_scale", [8, 8, 4, 4, 8, 8])
        variant = f[(8,)](x, out, 1000, 3.0, BLOCK=128, num_warps=2)
    rec = sim.launches()[-1]
    assert rec.kernel == "hcu_scale" and rec.grid == (8, 1, 1) and rec.block == (128, 1, 1)
    assert rec.params == expected_params(variant.compiled, (x, out, 1000, 3.0))
    assert tritonjit.get_backend("hcu").dist != "tritonjit.testing"  # the installed plugin is back


def test_hygon_arch_without_dtk_triton_says_what_to_install():
    with pytest.raises(CompilationError, match="DTK"):
        tritonjit.function(conformance_axpy).compile(CONFORMANCE_SIGNATURE, target="hcu:gfx928")


def test_info_reports_missing_library_and_stays_inert():
    ok, reason = HcuBackend(library="/nonexistent/libamdhip64.so").availability()
    assert not ok and "libamdhip64.so" in reason and "TRITONJIT_HCU_DRIVER_LIB" in reason


@triton.jit
def tuple_mix_kernel(ptrs, scal, n, BLOCK: tl.constexpr):
    """A tuple of pointers and a tuple of mixed scalars (an i8-wide bool, an i64, a float)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(ptrs[0] + offs, mask=m)
    v = x * scal[2] + scal[1].to(tl.float32) + scal[0].to(tl.float32)
    tl.store(ptrs[1][0] + offs, v, mask=m)


def test_tuple_arguments_lay_out_as_the_amd_compiler_expects():
    # pluginkit's layout of a tuple variant (its elements depth first, constants left out)
    # against the kernarg offsets the real AMD compiler wrote
    f = tritonjit.function(tuple_mix_kernel)
    sig = "(*fp32:16,(*fp32:16,nullopt)),(u1,i64,fp32),i32,64"
    compiled = f.compile(sig, target=f"hcu:{ARCH}")
    layout = ArgLayout.for_variant(compiled)
    assert [s.type for s in layout.slots[:6]] == ["*fp32", "*fp32", "u1", "i64", "fp32", "i32"]
    assert [(s.offset, s.size) for s in layout.slots] == kernarg_args(compiled)
    x, out = torch.zeros(4), torch.zeros(4)
    buf = layout.pack([(x, (out, None)), (True, 2**40, 0.5), 7])
    assert buf[:16] == x.data_ptr().to_bytes(8, "little") + out.data_ptr().to_bytes(8, "little")
    i64_at = layout.slots[3].offset
    assert buf[i64_at:i64_at + 8] == (2**40).to_bytes(8, "little")
