"""The launch benchmark (benchmarks/launch_overhead.py) where no GPU is: its CPU smoke
mode through ``tritonjit bench launch``, the floor's parameter packing against the PTX
Triton compiles for sm_90, its report, and the C++ loops it generates, built and run on
the interpreter. The figures themselves need a GPU (run_gpu_suite.sh)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(ROOT, "tests", "core"))

import _triton_reference as ref  # noqa: E402
import launch_overhead as L  # noqa: E402
import tritonjit  # noqa: E402


@pytest.fixture
def interpreter():
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("interpreter")
    yield
    tritonjit._registry.registry._current = previous


def test_smoke_mode_through_the_cli(tmp_path):
    out = tmp_path / "launch.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the smoke mode, even on a GPU machine
    p = subprocess.run([sys.executable, "-m", "tritonjit", "bench", "--dir", BENCH, "launch", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "smoke test (no figures without a GPU): ok" in p.stdout
    res = json.loads(out.read_text())
    assert res["smoke"] and res["failed"] == 0 and res["floor_c"] == "compiles"
    assert list(res["kernels"]) == list(L.KERNEL_KEYS)
    for key, k in res["kernels"].items():
        assert k["ok"] and k["signature"] == k["triton_signature"], key
        assert k["interpreted"].startswith("ok"), key
    # runtime arguments (+ BLOCK) and the device parameters the floor packs (+ 2 scratch pointers)
    assert res["kernels"]["58"]["signature"].count(",") == 58 and len(res["kernels"]["58"]["floor_param_sizes"]) == 60
    assert res["kernels"]["0"]["signature"] == "" and res["kernels"]["0"]["floor_param_sizes"] == [8, 8]
    assert res["kernels"]["mixed"]["signature"] == "*fp16:16,*bf16:16,*fp32:16,*fp32:16,nullopt,i32:16,fp32,i32,i64:16,u1,1024"


def test_kernels_subset_and_bad_names():
    res = L.smoke(("0", "mixed"))
    assert list(res["kernels"]) == ["0", "mixed"] and res["failed"] == 0
    with pytest.raises(SystemExit):
        L.main(["--smoke", "--kernels", "4,nine"])


_PTX_BYTES = {"u64": 8, "b64": 8, "s64": 8, "f64": 8, "u32": 4, "b32": 4, "s32": 4, "f32": 4, "u16": 2, "b16": 2,
              "s16": 2, "f16": 2, "u8": 1, "b8": 1, "s8": 1}


@pytest.mark.parametrize("key", L.KERNEL_KEYS)
def test_floor_packs_the_parameters_of_the_cubin(key, interpreter):
    """What the floor passes to cuLaunchKernel: one value per .param of the kernel Triton
    compiles for the same call (cross-compiled for sm_90), of its size."""
    from triton.backends.compiler import GPUTarget

    case = L.make_cases("cpu", (key,))[key]
    jit = tritonjit.function(L.KERNELS, case.kernel).wrapped
    ck = ref.compile_like_triton(jit, case.args, case.constexprs, GPUTarget("cuda", 90, 32))
    entry = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ck.asm["ptx"], re.S)
    ptx_sizes = [_PTX_BYTES[t] for t in re.findall(r"\.param\s+\.(\w+)", entry.group(1) if entry else "")]
    packed = L.floor_params(list(ck.src.signature.values()), case.full_args, ck.metadata)
    assert [s for _, s in packed] == ptx_sizes
    # values: the tensors' addresses, the ints, the floats' fp32 bits, the bool, null scratch
    def leaves(vs):  # a tuple argument's elements, depth first, as the device receives them
        return [leaf for v in vs for leaf in (leaves(v) if isinstance(v, tuple) else [v])]

    tensors = [a for a in leaves(case.args) if hasattr(a, "data_ptr")]
    assert [v for v, s in packed[: len(tensors)]] == [t.data_ptr() for t in tensors]
    assert packed[-2:] == [(0, 8), (0, 8)]
    if key == "58":
        assert packed[8] == (1024, 4) and packed[9] == (2, 4) and packed[34] == (0x3E800000, 4)  # n, i0, f0 == 0.25
    if key == "mixed":  # None is no parameter; n, alpha, k, big, flag follow the 4 pointers
        assert packed[4:9] == [(1024, 4), (0x3F000000, 4), (3, 4), (3 << 32, 8), (1, 1)]


def test_report_lines():
    res = {"labels": {"0": "0 args", "mixed": "mixed (10 args)"},
           "us_per_call": {"0": {L.FLOOR: 2.0, L.FGRID: 2.1, L.BOUND: 2.3, L.CPP: 2.04, L.FALLBACKS: 1.0},
                           "mixed": {L.FLOOR: None, L.FGRID: 3.0, L.FALLBACKS: 1.0}},
           "checks": {"0": {L.FLOOR: "ok", L.CPP: "FAILED: RuntimeError: boom"}, "mixed": {L.FGRID: "ok"}},
           "notes": {"0": {"signature": "", "floor": "2 parameters"}, "mixed": {"signature": "x", "floor": "n/a"}}}
    res["x_floor"] = {"0": {k: (v / 2.0 if k != L.FALLBACKS else None) for k, v in res["us_per_call"]["0"].items()},
                      "mixed": {k: None for k in res["us_per_call"]["mixed"]}}
    text = L.table(res)
    assert "| tritonjit f[grid] | <= 1.10x | 2.10 (1.05x) | 3.00 |" in text
    assert text.splitlines()[-1].startswith(f"| {L.FALLBACKS} |")
    verdicts = L.verdicts(res)
    assert "met at 0 args 1.05x; missed at mixed (10 args) (no figure)" in verdicts[0]
    assert "missed at 0 args 1.15x" in verdicts[1]
    assert "met at 0 args 1.02x" in verdicts[2]
    lines = L.check_lines(res)
    assert "ok on floor; tritonjit C++: FAILED: RuntimeError: boom" in lines[0]
    assert L.python_share(res) is None  # no row of Python's own call: no line
    res["us_per_call"]["0"][L.PYCALL] = 0.06
    res["us_per_call"]["mixed"][L.PYCALL] = 0.1  # no floor there: left out
    assert L.python_share(res) == ("f[grid] less Python's own call of the same arguments (the floor's multiple): "
                                   "0 args 1.02x")


@pytest.mark.slow
def test_generated_cpp_loops_on_the_interpreter(tmp_path_factory, interpreter):
    """The extension the GPU run builds, built here: each kernel launched once from its
    C++ loop through tritonjit::Function, on CPU tensors, its output checked, and the
    variant found by the same runtime object Python's tritonjit.function returns."""
    cases = {k: c for k, c in L.make_cases("cpu").items() if not c.has_tuples}  # as the GPU run builds it
    assert "tuple" not in cases and "58" in cases
    ext = L.build_cpp(cases, str(tmp_path_factory.mktemp("launch_cpp")))
    for key, case in cases.items():
        ran = L.interpret_once(case, lambda args, case=case: L.cpp_call(ext, case, 0)(1))
        if key == "mixed":  # C++ passes the bool as a bool: Triton's interpreter refuses it
            assert ran.startswith("FAILED") and "int1" in ran or ran.startswith("ok"), ran
            continue
        assert ran.startswith("ok"), (key, ran)
        f = tritonjit.function(L.KERNELS, case.kernel)
        assert f.signature(*case.args, **case.constexprs) in {v.signature for v in f.variants()}, key


_SHIM = "int cuStreamSynchronize(void *stream) { (void)stream; return 0; }\n"


def _real_cuda_driver_loaded() -> bool:
    """Whether this process has a libcuda.so mapped (the CUDA plugin opened the real driver)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libcuda.so" in line for line in maps)
    except OSError:
        return False


@pytest.fixture(scope="module")
def simulated_floor(tmp_path_factory):
    """The floor library linked against tritonjit's SIMULATED CUDA driver (one instance
    per process: the floor's DT_NEEDED would bind a second build to the first anyway)."""
    import ctypes
    import shutil

    from triton.backends.nvidia import driver as nv
    from tritonjit.pluginkit import DriverSpec, SimulatedDriver, build_simulated_driver

    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    if _real_cuda_driver_loaded():
        pytest.skip("the real CUDA driver is loaded in this process (a GPU machine): the floor's libcuda.so.1 "
                    "would bind to it, not to the simulated one; the GPU run measures the real floor")
    tmp = tmp_path_factory.mktemp("sim_floor")
    spec = DriverSpec(vendor="CUDA (simulated)", prefix="cu", libraries=("libcuda.so.1",), env_var="UNUSED",
                      contexts=True)
    sim_path = build_simulated_driver(spec, tmp)
    sim = SimulatedDriver(sim_path)
    sim.configure()
    ctx = ctypes.c_void_p()
    assert sim.lib.cuInit(0) == 0 and sim.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    sim.lib.cuCtxSetCurrent(ctx)
    (tmp / "shim.c").write_text(_SHIM)
    lib = str(tmp / "floor.so")
    inc = os.path.join(os.path.dirname(nv.__file__), "include")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", os.path.join(BENCH, "launch_floor_cuda.c"), str(tmp / "shim.c"),
                    "-I", inc, "-I", sysconfig.get_paths()["include"], "-L", str(tmp),
                    f"-l:{os.path.basename(sim_path)}", f"-Wl,-rpath,{tmp}", "-ldl", "-o", lib],
                   check=True, capture_output=True)
    return sim, L.load_floor(lib)


@pytest.mark.parametrize("key", ["0", "58", "mixed"])
def test_floor_on_the_simulated_driver(key, simulated_floor, interpreter):
    """The floor on the simulated driver (it records each cuLaunchKernel's parameter
    bytes; no GPU): the bytes it passes are the packed values, one launch per
    iteration, on the stream given, grid (1, 1, 1), the kernel's block."""
    from triton.backends.compiler import GPUTarget

    sim, so = simulated_floor
    case = L.make_cases("cpu", (key,))[key]
    jit = tritonjit.function(L.KERNELS, case.kernel).wrapped
    ck = ref.compile_like_triton(jit, case.args, case.constexprs, GPUTarget("cuda", 90, 32))
    params = L.floor_params(list(ck.src.signature.values()), case.full_args, ck.metadata)
    sim.expect_params(ck.name, [s for _, s in params])
    timed, note = L.floor_path(so, ck, params, 77)
    assert timed is not None, note
    assert "no cuFuncGetParamInfo" in note  # the simulated driver has none: the sizes go unchecked here
    sim.reset()
    assert timed(3) >= 0, sim.last_error
    launches = sim.launches()
    assert len(launches) == 3, sim.records()
    want = tuple(v.to_bytes(s, "little") for v, s in params)
    for rec in launches:
        assert rec.kernel == ck.name and rec.grid == (1, 1, 1) and rec.stream == 77
        assert rec.block == (32 * ck.metadata.num_warps, 1, 1) and rec.params == want
    # the floor called from Python: one launch of the same bytes per call, whatever the call's
    # arguments, through vectorcall and through tp_call
    sim.reset()
    for pyfloor in (timed.python, timed.python_ex):
        assert pyfloor() is None and pyfloor(*range(3), BLOCK=4) is None and pyfloor(*range(40), a=1) is None
    # and with a launcher's steps added (the context check, the GIL test, the tensor reads
    # through tritonjit's reader, torch's current stream; the buffer form is the driver's
    # offsets, which the simulated driver cannot give: the pointer form then)
    stepped = timed.python_steps(15)
    assert stepped(*case.args) is None
    launches = sim.launches()
    assert len(launches) == 7, sim.records()
    assert all(rec.params == want and rec.stream == 77 for rec in launches)
