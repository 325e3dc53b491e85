"""The C++ API (include/tritonjit/function.h) from a C++ extension built in the test.

On CPU two backends run it: the interpreter (no C launch entry: C++ launches through
Python, kernels really run on CPU tensors) and the recording test backend (a C launch
entry with a GIL-free path that records what reached it), so the C++ hot path,
digest -> key -> variant -> launch_nogil, runs end to end without a device.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch
import tritonjit
from tritonjit import _native
from tritonjit.testing import FakeTensor, RecordingBackend, installed_as_current

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "cpp_kernels.py")


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    from torch.utils.cpp_extension import load

    build = tmp_path_factory.mktemp("cpp_api_ext")
    return load("tritonjit_cpp_api_test", [os.path.join(HERE, "cpp_api_ext.cpp")], build_directory=str(build),
                extra_include_paths=[tritonjit.get_include()], extra_cflags=["-O1"], verbose=False)


@pytest.fixture
def kernel():
    return tritonjit.function(KERNELS, "add_kernel")


@pytest.fixture
def interpreter():
    """Triton's interpreter as the backend, as on a machine without an accelerator: the
    tests that launch CPU tensors then pass on a GPU machine too (where CUDA is the default)."""
    tritonjit.set_backend("interpreter")
    yield
    tritonjit.set_backend(None)


@pytest.fixture
def recording():
    if not _native.available():
        pytest.skip(f"native dispatcher: {_native.reason}")
    backend = RecordingBackend()
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording")
    yield backend
    tritonjit.set_backend(None)
    tritonjit.unregister_backend("recording")


def _recorder_calls(f: tritonjit.KernelFunction) -> list:
    return [c for v in f.variants() for c in v.launcher.calls]


def test_include_and_cmake_dirs_hold_the_api():
    assert os.path.isfile(os.path.join(tritonjit.get_include(), "tritonjit", "function.h"))
    assert os.path.isfile(os.path.join(tritonjit.get_cmake_dir(), "tritonjitConfig.cmake"))


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cmake_find_package(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX)\n"
        "find_package(tritonjit 0.1 REQUIRED)\n"
        "get_target_property(inc tritonjit::tritonjit INTERFACE_INCLUDE_DIRECTORIES)\n"
        'message(STATUS "TRITONJIT_INC=${inc}")\n')
    out = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"),
                          f"-Dtritonjit_DIR={tritonjit.get_cmake_dir()}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"TRITONJIT_INC={tritonjit.get_include()}" in out.stdout


def test_interpreter_launch_matches_torch_and_shares_variants(ext, kernel, interpreter):
    x, y = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(ext.add(KERNELS, x, y, 128), x + y)
    assert [v.signature for v in kernel.variants()] == ["*fp32:16,*fp32:16,*fp32:16,i32,128"]
    # the variant C++ compiled is the one Python's f[grid] finds: no second variant
    o = torch.empty(1000)
    kernel[(8,)](x, y, o, 1000, BLOCK=128, num_warps=4, num_stages=1)
    assert len(kernel.variants()) == 1
    torch.testing.assert_close(o, x + y)


def test_recording_backend_hits_stay_in_cpp(ext, kernel, recording):
    # compiled from Python first: C++ finds the same variant, compiles nothing
    x, y, o = FakeTensor(1 << 20), FakeTensor(1 << 21), FakeTensor(1 << 22)
    for _ in range(2):  # a miss (the Python path), then a hit of the C dispatcher
        kernel[(4,)](x, y, o, 1000, BLOCK=256, num_warps=4, num_stages=1, stream=5)
    assert len(kernel.variants()) == 1
    for _ in range(3):
        ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 5, 4)
    assert len(kernel.variants()) == 1, "C++ compiled a second variant of the same call"
    calls = _recorder_calls(kernel)
    assert [c[0] for c in calls] == ["python", "native", "nogil", "nogil", "nogil"]
    dispatcher, cpp = calls[1], calls[2]
    assert cpp[1] == dispatcher[1] == (4, 1, 1) and cpp[2] == dispatcher[2] == 5
    # pointers and the int digested alike; the constexpr is no device argument (TJ_ARG_CONST: 6)
    assert cpp[3][:4] == dispatcher[3][:4]
    assert cpp[3][4][0] == dispatcher[3][4][0] == 6


def test_recording_backend_new_specializations_get_new_variants(ext, kernel, recording):
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 0, 4)   # aligned pointers
    ext.add_ptrs(KERNELS, (1 << 20) + 4, 1 << 21, 1 << 22, 1000, 256, 0, 4)  # x unaligned
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)   # n divisible by 16
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1, 256, 0, 4)      # n == 1
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 0, 8)   # num_warps
    sigs = sorted(v.signature for v in kernel.variants())
    assert len(kernel.variants()) == 5
    assert "*fp32,*fp32:16,*fp32:16,i32,256" in sigs and "*fp32:16,*fp32:16,*fp32:16,i32:16,256" in sigs
    assert "*fp32:16,*fp32:16,*fp32:16,i32:1,256" in sigs
    # stream 0: the backend's current stream (the recording backend answers 1000 + device)
    assert {c[2] for c in _recorder_calls(kernel)} == {1000}


def test_switching_backends_between_cpp_hits_launches_on_the_new_one(ext, kernel, recording):
    """C++ remembers the variant each thread launched last: a backend switch must forget it
    (the switch gives the kernel new variants, loaded on the new backend)."""
    backends = {"recording": recording, "recording2": RecordingBackend("recording2")}
    tritonjit.register_backend(backends["recording2"])
    try:
        for name in ("recording", "recording2", "recording", "recording2"):
            tritonjit.set_backend(name)
            loads = backends[name].loads
            for _ in range(2):  # the second call is a hit of the thread's last variant
                ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 5, 4)
            assert backends[name].loads == loads + 1, name
            assert [v.launcher.count for v in kernel.variants()] == [2], name
    finally:
        tritonjit.set_backend("recording")
        tritonjit.unregister_backend("recording2")


def test_every_cpp_argument_kind(ext, recording):
    f = tritonjit.function(KERNELS, "mixed_kernel")
    ext.mixed(KERNELS, 1 << 24, 9)
    (variant,) = f.variants()
    assert variant.signature == "*bf16:16,nullopt,i32,u64:16,fp32,u1,i32:16,'sum'"
    (call,) = _recorder_calls(f)
    assert call[0] == "nogil" and call[1] == (2, 3, 1) and call[2] == 9
    kinds = [a[0] for a in call[3]]
    assert kinds == [1, 0, 2, 3, 4, 5, 2, 6]  # ptr, none, int, uint, float, bool, int, const
    assert call[3][3][1] == 1 << 63 and call[3][4][1] == 2.5 and call[3][6][1] == 16


def test_options_object(ext, kernel, recording):
    ext.add_ptrs_options(KERNELS, 1 << 20, 1 << 22, 64, 3)
    (variant,) = kernel.variants()
    assert variant.signature == "*fp16:16,*fp16:16,*fp16:16,i32:16,64"
    assert variant.compiled.metadata["maxnreg"] == 128 and variant.compiled.metadata["num_warps"] == 2


def test_eight_cpp_threads_at_once(ext, kernel, recording):
    assert ext.hammer(KERNELS, 8, 500, 1 << 20) == 4000
    assert len(kernel.variants()) == 1  # each thread's pointer is 64-aligned: one variant
    assert sum(v.launcher.count for v in kernel.variants()) == 4000


def test_frozen_raises_from_cpp(ext, kernel, recording):
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 0, 4)
    tritonjit.freeze()
    try:
        ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 0, 4)  # compiled: launches
        with pytest.raises(RuntimeError, match=r"FrozenError: kernel 'add_kernel': variant '\*fp32:16,\*fp32:16,"
                                               r"\*fp32:16,i32:16,256'.* frozen"):
            ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)
    finally:
        tritonjit.unfreeze()
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)
    assert len(kernel.variants()) == 2


def test_frozen_raises_from_python(kernel, interpreter):
    x = torch.randn(64)
    kernel[(1,)](x, x, x, 64, BLOCK=64)
    tritonjit.freeze()
    try:
        kernel[(1,)](x, x, x, 64, BLOCK=64)
        with pytest.raises(tritonjit.FrozenError, match="add_kernel.*i32,64"):
            kernel[(1,)](x, x, x, 63, BLOCK=64)
    finally:
        tritonjit.unfreeze()


def test_errors_are_cpp_exceptions_with_the_python_message(ext, interpreter):
    assert "kernel 'add_kernel' takes 5 arguments (X, Y, Out, n, BLOCK), got 4" in ext.error_of(KERNELS, "count")
    msg = ext.error_of(KERNELS, "constexpr")
    assert "parameter 'BLOCK' of kernel 'add_kernel' is a tl.constexpr" in msg
    assert "every dimension must be >= 1" in ext.error_of(KERNELS, "grid")
    msg = ext.error_of(KERNELS, "grid_y")  # past the core's limits: the Python path's GridError
    assert "GridError" in msg and "add_kernel" in msg
    assert "KernelNotFoundError" in ext.error_of(KERNELS, "missing") and "no_such_kernel" in ext.error_of(
        KERNELS, "missing")
    assert "ArgumentError" in ext.error_of(KERNELS, "autotuned") and "autotuned" in ext.error_of(KERNELS, "autotuned")


def _interrupt(exc: BaseException):
    def raiser(*args, **kwargs):
        raise exc
    return raiser


def test_an_interruption_in_a_cpp_miss_stays_itself(ext, kernel, recording, monkeypatch):
    """Ctrl-C while a miss from C++ compiles is a KeyboardInterrupt in Python, not the
    RuntimeError every error of the call becomes; the caches stay as they were."""
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1000, 256, 0, 4)
    monkeypatch.setattr(tritonjit.KernelFunction, "variant_for", _interrupt(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)  # i32:16: a new variant
    monkeypatch.setattr(tritonjit.KernelFunction, "variant_for", _interrupt(ValueError("broken")))
    with pytest.raises(RuntimeError, match="kernel 'add_kernel': ValueError: broken"):  # an error of the call
        ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)
    monkeypatch.undo()
    assert len(kernel.variants()) == 1
    ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, 1024, 256, 0, 4)
    assert len(kernel.variants()) == 2


def test_an_interruption_in_a_launch_through_python_stays_itself(ext, kernel, interpreter, monkeypatch):
    x = torch.randn(100)
    monkeypatch.setattr(tritonjit.KernelFunction, "_run", _interrupt(SystemExit(3)))
    with pytest.raises(SystemExit) as info:
        ext.add(KERNELS, x, x, 64)
    assert info.value.code == 3
    monkeypatch.undo()
    torch.testing.assert_close(ext.add(KERNELS, x, x, 64), x + x)


# ---- on the GPU: the same extension through the CUDA plugin's GIL-free launch ----------------
gpu = pytest.mark.gpu


@pytest.fixture
def cuda_backend():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    tritonjit.set_backend("cuda")
    yield
    tritonjit.set_backend(None)


@gpu
def test_cuda_matches_torch_and_shares_variants(ext, kernel, cuda_backend):
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    torch.testing.assert_close(ext.add(KERNELS, x, y, 256), x + y)
    o = torch.empty_like(x)
    kernel[(20,)](x, y, o, 5000, BLOCK=256, num_warps=4, num_stages=1)
    assert len(kernel.variants()) == 1
    (variant,) = kernel.variants()
    assert variant.native is not None  # the CUDA launcher's C entry, which C++ calls without the GIL


@gpu
def test_cuda_side_stream(ext, kernel, cuda_backend):
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # 0: the current stream, which is s here
        out = ext.add_on(KERNELS, x, y, 1024, 0)
    explicit = ext.add_on(KERNELS, x, y, 1024, s.cuda_stream)
    s.synchronize()
    torch.testing.assert_close(out, x + y)
    torch.testing.assert_close(explicit, x + y)


@gpu
def test_cuda_graph_capture_and_replay(ext, kernel, cuda_backend):
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    ext.add(KERNELS, x, y, 256)  # compile outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ext.add(KERNELS, x, y, 256)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)


@gpu
def test_cuda_eight_cpp_threads(ext, kernel, cuda_backend):
    x, y = torch.randn(10000, device="cuda"), torch.randn(10000, device="cuda")
    outs = [torch.zeros_like(x) for _ in range(8)]
    before = len(kernel.variants())
    ext.hammer_tensors(KERNELS, x, y, outs, 200)
    torch.cuda.synchronize()
    for o in outs:
        torch.testing.assert_close(o, x + y)
    assert len(kernel.variants()) <= before + 1  # one variant for all threads (none new if an earlier test made it)


@gpu
def test_cuda_errors(ext, cuda_backend):
    x = torch.randn(16, device="cuda")
    with pytest.raises(RuntimeError, match="on one device|cuda"):
        ext.add(KERNELS, x, torch.randn(16), 16)  # a CPU tensor beside a CUDA one
@pytest.fixture
def backend_named(request):
    tritonjit.set_backend(request.param)
    yield request.param
    tritonjit.set_backend(None)


@pytest.mark.parametrize("backend_named", ["interpreter"], indirect=True)
def test_tuple_arguments_launch_through_python(ext, backend_named):
    x, y = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(ext.tuple_axpby(KERNELS, x, y, 2.0, 3), 2.0 * x + 3 * y)
    torch.testing.assert_close(ext.tuple_axpby(KERNELS, x, y, 0.5, 1), 0.5 * x + y)
    f = tritonjit.function(KERNELS, "tuple_axpby")
    assert sorted(v.signature for v in f.variants()) == [
        "(*fp32:16,(*fp32:16,*fp32:16)),i32,(fp32,i32),128", "(*fp32:16,(*fp32:16,*fp32:16)),i32,(fp32,i32:1),128"]
    msg = ext.tuple_error(KERNELS, x)
    assert "parameter 'ptrs' of kernel 'tuple_axpby': element [1][1]" in msg and "got str" in msg


@pytest.mark.gpu
@pytest.mark.parametrize("backend_named", ["cuda"], indirect=True)
def test_tuple_arguments_on_cuda(ext, backend_named):
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    torch.testing.assert_close(ext.tuple_axpby(KERNELS, x, y, 2.0, 3), 2.0 * x + 3 * y)
    torch.testing.assert_close(ext.tuple_axpby(KERNELS, x, y, 0.5, 1), 0.5 * x + y)


@pytest.mark.parametrize("backend_named", ["interpreter"], indirect=True)
def test_tensor_descriptors_launch_through_python(ext, backend_named):
    x = torch.randn(64, 128)
    torch.testing.assert_close(ext.desc_scale(KERNELS, x, 2.0, 32, 64, "zero"), 2.0 * x)
    torch.testing.assert_close(ext.desc_scale(KERNELS, x, 0.5, 32, 32, "nan"), 0.5 * x)
    f = tritonjit.function(KERNELS, "desc_scale")
    assert sorted(v.signature for v in f.variants()) == [
        "tensordesc<fp32[32, 32]>,(fp32,tensordesc<fp32[32, 32]>),32,32",
        "tensordesc<fp32[32, 64]>,(fp32,tensordesc<fp32[32, 64]>),32,64"]
    msg = ext.desc_error(KERNELS, torch.randn(32, 33))
    assert "kernel 'desc_scale': TensorDescriptor" in msg and "16-byte aligned" in msg


@pytest.mark.gpu
@pytest.mark.parametrize("backend_named", ["cuda"], indirect=True)
def test_tensor_descriptors_on_cuda(ext, backend_named):
    x = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ext.desc_scale(KERNELS, x, 2.0, 64, 64, "zero"), 2.0 * x)
    torch.testing.assert_close(ext.desc_scale(KERNELS, x, 0.5, 32, 64, "nan"), 0.5 * x)


@pytest.fixture
def recording_packed():
    """The recording backend with launchers that take buffers their callers pack."""
    if not _native.available():
        pytest.skip(f"native dispatcher: {_native.reason}")
    backend = RecordingBackend("rec-packed", packed=True)
    with installed_as_current(backend):
        yield backend


def _packed_values(call: list, variant) -> list:
    """A "nogil" record's tj_args as the recorder's layout packs them (see the packed records)."""
    layout = tritonjit.testing.pack_layout(variant.signature, variant.compiled.runtime_params)
    out = []
    for (_, code), (_, v) in zip(layout, call):
        out.append(None if code == 0 else (code, float(torch.tensor(v, dtype=torch.float32)) if code == 5 else
                                           int(v)))
    return out


def test_cpp_packs_while_it_digests(ext, kernel, recording_packed):
    """A call that repeats the thread's last variant is packed by that variant's layout as
    its arguments are digested and launched as one buffer (TJ_LAUNCH_F_PACKED): the same
    device values as the tj_args a miss hands over, new values included."""
    ns = (1000, 1000, 1003, 2002)  # one variant: none divisible by 16
    for n in ns:
        ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, n, 256, 5, 4)
    (variant,) = kernel.variants()
    calls = variant.launcher.calls
    assert [c[0] for c in calls] == ["nogil", "packed", "packed", "packed"]
    assert [c[1] for c in calls] == [((n + 255) // 256, 1, 1) for n in ns] and {c[2] for c in calls} == {5}
    assert [c[3] for c in calls[1:]] == [_packed_values(calls[0][3], variant)[:3] + [(2, n), None] for n in ns[1:]]

    f = tritonjit.function(KERNELS, "mixed_kernel")
    for _ in range(2):
        ext.mixed(KERNELS, 1 << 24, 9)
    (variant,) = f.variants()
    first, second = variant.launcher.calls
    assert (first[0], second[0]) == ("nogil", "packed") and second[1:3] == first[1:3] == ((2, 3, 1), 9)
    assert second[3] == _packed_values(first[3], variant)
    assert second[3] == [(1, 1 << 24), None, (2, 7), (4, 1 << 63), (5, 2.5), (7, 1), (2, 16), None]


def test_cpp_packing_leaves_values_that_do_not_fit_to_the_launcher(ext, recording_packed):
    """An annotation (n: tl.int32, scale: tl.float32) fixes the variant whatever the value:
    an int past i32, or an int for the float, reaches the same variant with another C++
    key. Such a value must reach the launcher as a tj_arg (which converts it, or raises
    its precise error), never be truncated or reinterpreted into the buffer; a value that
    fits launches packed."""
    f = tritonjit.function(KERNELS, "narrow_kernel")
    ext.narrow(KERNELS, 1 << 20, 100, 0.5)
    ext.narrow(KERNELS, 1 << 20, 101, 0.5)
    ext.narrow(KERNELS, 1 << 20, (1 << 40) + 3, 0.5)
    ext.narrow(KERNELS, 1 << 20, (1 << 40) + 3, 0.5)
    ext.narrow_int(KERNELS, 1 << 20, 102, 3)
    ext.narrow_int(KERNELS, 1 << 20, 102, 3)
    ext.narrow(KERNELS, 1 << 20, 103, 0.5)
    (variant,) = f.variants()
    calls = variant.launcher.calls
    assert [c[0] for c in calls] == ["nogil", "packed", "nogil", "nogil", "nogil", "nogil", "packed"]
    assert calls[2][3][1] == calls[3][3][1] == (2, (1 << 40) + 3)  # TJ_ARG_INT, whole
    assert calls[4][3][2] == (2, 3)  # the int, for the launcher to convert
    assert calls[1][3][1:3] == [(2, 101), (5, 0.5)] and calls[6][3][1] == (2, 103)


def test_cpp_never_packs_by_a_bad_layout(ext, kernel):
    """C++ checks a launcher's layout once (tj_pack_layout_ok) before it writes by it: a slot
    past its buffer makes every call hand over tj_args."""
    if not _native.available():
        pytest.skip(f"native dispatcher: {_native.reason}")

    def layout(signature, runtime_params):
        return ((4000, 1), *tritonjit.testing.pack_layout(signature, runtime_params)[1:])

    with installed_as_current(RecordingBackend("rec-bad-layout", layout=layout)):
        for n in (1000, 1001, 1002):
            ext.add_ptrs(KERNELS, 1 << 20, 1 << 21, 1 << 22, n, 256, 5, 4)
        (variant,) = kernel.variants()
        calls = variant.launcher.calls
        assert [c[0] for c in calls] == ["nogil"] * 3 and calls[-1][3][3] == (2, 1002)
