"""The CUDA backend on a GPU: kernels against torch, graphs, streams, devices, errors."""

from __future__ import annotations

import threading

import pytest
import torch
import triton
import triton.language as tl
import tritonjit
from cuda_test_kernels import add_kernel, mm_kernel

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def cuda_backend():
    tritonjit.set_backend("cuda")
    yield
    tritonjit.set_backend(None)


@triton.jit
def axpb_kernel(X, Out, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) * a + b, mask=m)


@triton.jit
def scalars_kernel(Out, a_i32, b_i64, c_fp32, d_u1, e_u64, f_h: tl.float16, g_bf: tl.bfloat16, h_i8: tl.int8):
    tl.store(Out + 0, a_i32.to(tl.float64))
    tl.store(Out + 1, b_i64.to(tl.float64))
    tl.store(Out + 2, c_fp32.to(tl.float64))
    tl.store(Out + 3, d_u1.to(tl.float64))
    tl.store(Out + 4, (e_u64 >> 40).to(tl.float64))
    tl.store(Out + 5, f_h.to(tl.float64))
    tl.store(Out + 6, g_bf.to(tl.float64))
    tl.store(Out + 7, h_i8.to(tl.float64))


@triton.jit
def softmax_kernel(X, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(Out + row * n_cols + offs, e / tl.sum(e, 0), mask=offs < n_cols)


def _add(x, y, out=None, **kw):
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    tritonjit.function(add_kernel)[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, **kw)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 1000, 4096, 100_003])
def test_add_matches_torch(dtype, n):
    x = torch.randn(n, device="cuda", dtype=dtype)
    y = torch.randn(n, device="cuda", dtype=dtype)
    torch.testing.assert_close(_add(x, y), x + y)


def test_unaligned_views_and_int_one_select_other_variants():
    base = torch.randn(4097, device="cuda")
    x, y = base[1:], torch.randn(4096, device="cuda")
    torch.testing.assert_close(_add(x, y), x + y)
    a, b = torch.randn(1, device="cuda"), torch.randn(1, device="cuda")
    torch.testing.assert_close(_add(a, b), a + b)  # n == 1: an i32:1 constant
    sigs = {v.signature for v in tritonjit.function(add_kernel).variants()}
    assert "*fp32,*fp32:16,*fp32:16,i32:16,1024" in sigs and "*fp32:16,*fp32:16,*fp32:16,i32:1,1024" in sigs


def test_scalars_reach_the_kernel():
    x = torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    tritonjit.function(axpb_kernel)[(5,)](x, out, 2.5, -1.0, 5000, BLOCK=1024)
    torch.testing.assert_close(out, x * 2.5 - 1.0)
    o = torch.zeros(8, device="cuda", dtype=torch.float64)
    tritonjit.function(scalars_kernel)[(1,)](o, -123456, 2**40 + 5, 0.75, True, 2**63 + 2**41, 1.5, -2.0, -7)
    assert o.tolist() == [-123456.0, float(2**40 + 5), 0.75, 1.0, float((2**63 + 2**41) >> 40), 1.5, -2.0, -7.0]


@pytest.mark.parametrize("whole", [True, False])
def test_parameters_reach_the_kernel_in_one_buffer_or_by_pointer(whole):
    """The launcher packs the parameters into one buffer laid out as the kernel's parameter
    space; it hands the driver the buffer whole where the driver's layout
    (cuFuncGetParamInfo) agrees (an H200's driver does), else one pointer per parameter.
    Both give the kernel every scalar size, padding included, through f[grid], the bound
    launcher and the C++-facing entry alike (the native dispatcher's launch)."""
    from tritonjit_cuda._backend import _driver

    was = _driver.param_buffer(whole)
    try:
        f = tritonjit.function(triton.jit(scalars_kernel.fn))  # a new runtime object: its launcher is made now
        args = (-123456, 2**40 + 5, 0.75, True, 2**63 + 2**41, 1.5, -2.0, -7)
        want = [-123456.0, float(2**40 + 5), 0.75, 1.0, float((2**63 + 2**41) >> 40), 1.5, -2.0, -7.0]
        for _ in range(3):  # the first call compiles, the next ones take the native path
            o = torch.zeros(8, device="cuda", dtype=torch.float64)
            f[(1,)](o, *args)
            assert o.tolist() == want
        o.zero_()
        f.bind((1,), o, *args)(o, *args)
        assert o.tolist() == want
        (variant,) = f.variants()
        assert variant.launcher.info["param_buffer"] is whole
        # Out 0, i32 8, i64 16, fp32 24, u1 28, u64 32, fp16 40, bf16 42, i8 44, two scratch pointers 48 and 56
        assert variant.launcher.info["param_bytes"] == 64
    finally:
        _driver.param_buffer(was)


@triton.jit
def packable_kernel(Out, a_i32, b_i64, c_fp32, d_u1, e_u64, X):
    tl.store(Out + 0, a_i32.to(tl.float64))
    tl.store(Out + 1, b_i64.to(tl.float64))
    tl.store(Out + 2, c_fp32.to(tl.float64))
    tl.store(Out + 3, d_u1.to(tl.float64))
    tl.store(Out + 4, (e_u64 >> 40).to(tl.float64))
    tl.store(Out + 5, tl.load(X).to(tl.float64))


def test_packed_launches_reach_the_kernel():
    """A call that repeats the last launch's key is packed while the dispatcher keys it and
    launched as that buffer (TJ_LAUNCH_F_PACKED): every value of each such call, not the
    first call's, reaches the kernel."""
    f = tritonjit.function(triton.jit(packable_kernel.fn))
    xs = [torch.full((4,), float(k), device="cuda") for k in range(3)]
    calls = [(-123, 2**40 + 5, 0.75, True, 2**63 + 2**41, xs[0]), (77, 2**40 + 7, -1.5, False, 2**63 + 2**42, xs[1]),
             (5, 2**41 + 3, 1e-3, True, 2**63 + 2**43, xs[2]), (-123, 2**40 + 5, 0.75, True, 2**63 + 2**41, xs[0])]
    for args in calls * 2:
        o = torch.zeros(6, device="cuda", dtype=torch.float64)
        f[(1,)](o, *args)
        a, b, c, d, e, x = args
        want = [float(a), float(b), float(torch.tensor(c, dtype=torch.float32)), float(d), float(e >> 40), x[0].item()]
        assert o.tolist() == want, args
    (variant,) = f.variants()
    assert variant.launcher.info["packed"] is True
    assert f._dispatcher.stats()["native"] == len(calls) * 2 - 1


@triton.jit
def annotated_kernel(Out, a: tl.int64, s: tl.float32, q: tl.int32):
    tl.store(Out + 0, a.to(tl.float64))
    tl.store(Out + 1, s.to(tl.float64))
    tl.store(Out + 2, q.to(tl.float64))


def test_annotated_kernels_launch_packed_with_every_value():
    """Annotated parameters are checked value by value against their packed slots: a float
    for ``s: tl.float32`` packs, an int for it goes to the launcher (converted there). An
    int past i32 for ``q: tl.int32`` is the launcher's ArgumentError naming the kernel, on
    a hit (native path) as on a miss (Python path), and the caches keep their variant."""
    f = tritonjit.function(annotated_kernel)
    calls = [(3, 0.5, 7), (3, 0.5, 7), (2**40 + 3, -2.25, -9), (5, 4, 11), (5, 4, 11), (6, 1.5, 2**31 - 1)]
    for a, s, q in calls * 2:
        o = torch.zeros(3, device="cuda", dtype=torch.float64)
        f[(1,)](o, a, s, q)
        assert o.tolist() == [float(a), float(s), float(q)], (a, s, q)
    (variant,) = f.variants()
    assert variant.launcher.info["packed"] is True
    o = torch.zeros(3, device="cuda", dtype=torch.float64)
    with pytest.raises(tritonjit.ArgumentError, match=r"kernel 'annotated_kernel'.*out of range"):
        f[(1,)](o, 3, 0.5, 2**40 + 3)  # keyed i32 (not divisible by 16): this variant, a hit
    assert f.variants() == [variant]
    fresh = tritonjit.function(triton.jit(annotated_kernel.fn))
    with pytest.raises(tritonjit.ArgumentError, match=r"kernel 'annotated_kernel'.*out of range"):
        fresh[(1,)](o, 3, 0.5, 2**40 + 3)  # a miss: the Python path launches it


def test_softmax_matches_torch():
    x = torch.randn(64, 1000, device="cuda")
    out = torch.empty_like(x)
    tritonjit.function(softmax_kernel)[(64,)](x, out, 1000, BLOCK=1024)
    torch.testing.assert_close(out, torch.softmax(x, -1))


def test_matmul_with_shared_memory_above_48k():
    M = N = K = 512
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    f = tritonjit.function(mm_kernel)
    variant = f[(M // 128, N // 128)](a, b, c, M, N, K, BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    assert variant.compiled.metadata["shared"] > 48 * 1024
    torch.testing.assert_close(c, (a.float() @ b.float()), atol=1e-2, rtol=1e-2)


def test_shared_memory_over_the_device_limit_is_a_clear_error():
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 512, device="cuda", dtype=torch.float32)
    f = tritonjit.function(mm_kernel)
    before = len(f.variants())
    with pytest.raises(tritonjit.BackendError, match=r"mm_kernel.*out of resources.*shared memory"):
        f[(2, 2)](a, a, c, 512, 512, 512, BM=256, BN=256, BK=128, num_warps=8, num_stages=4)
    assert len(f.variants()) == before


def test_bound_launcher_matches_torch():
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    out = torch.empty_like(x)
    launch = tritonjit.function(add_kernel).bind((3,), x, y, out, 3000, BLOCK=1024)
    for _ in range(3):
        x.add_(1)
        launch(x, y, out, 3000)
        torch.testing.assert_close(out, x + y)


def test_cuda_graph_capture_and_replay():
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    f = tritonjit.function(add_kernel)
    launch = f.bind((4,), x, y, out, 4096, BLOCK=1024)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _add(x, y, out)  # compile and load before capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _add(x, y, out)
        launch(out, y, out, 4096)
    for k in range(3):
        x.copy_(torch.full_like(x, float(k)))
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + 2 * y)


def test_first_launch_of_a_variant_inside_a_capture_compiles_loads_and_is_captured():
    """A variant first met inside torch.cuda.graph (a model whose captured forward takes a
    path its warm-up did not) is compiled and loaded there (the load in relaxed capture
    mode, which global capture mode would refuse) and its launch is part of the graph."""
    x = torch.randn(1024, device="cuda", dtype=torch.float64)
    out = torch.zeros_like(x)
    f = tritonjit.function(add_kernel)
    before = len(f.variants())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        f[(1,)](x, x, out, 1024, BLOCK=1024)
    assert len(f.variants()) == before + 1
    torch.cuda.synchronize()
    assert not out.any()  # captured, not run
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * x)


def test_non_default_stream_is_used():
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    _add(x, y, out)
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # keeps s busy; a launch elsewhere would run first
        x.fill_(3.0)
        _add(x, y, out)
    s.synchronize()
    torch.testing.assert_close(out, 3.0 + y)
    torch.cuda._sleep(50_000_000)
    x.fill_(5.0)
    _add(x, y, out, stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 5.0 + y)


_EX_OPTS = {"cooperative": dict(launch_cooperative_grid=True), "pdl": dict(launch_pdl=True), "cluster": dict(num_ctas=2)}

# "alone" runs in a fresh process: a test process holds threads of earlier tests (pools,
# builds), and with any other thread state the launcher rightly releases the GIL; the
# process waits for the background builds its first launch may start (the tensor reader)
_ALONE = """
import sys, threading, torch, triton, tritonjit
sys.path.insert(0, sys.argv[1])
from cuda_test_kernels import add_kernel
from tritonjit_cuda import _driver
tritonjit.set_backend("cuda")
opts = eval(sys.argv[2])
x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")

def launch(a, b):
    out = torch.empty_like(a)
    tritonjit.function(add_kernel)[(triton.cdiv(5000, 1024),)](a, b, out, 5000, BLOCK=1024, **opts)
    torch.testing.assert_close(out, a + b)

launch(x, y)  # compiles; a first launch may start tritonjit's background builds (their threads end)
for t in threading.enumerate():
    if t is not threading.main_thread():
        t.join(timeout=240)
assert threading.active_count() == 1, threading.enumerate()
assert _driver.launch_releases_gil() is False
launch(y, y)  # a hit, the GIL kept
launch(x, x)
print("ok")
"""


@pytest.mark.parametrize("threaded", [False, True], ids=["alone", "beside-a-thread"])
@pytest.mark.parametrize("kind", list(_EX_OPTS))
def test_launches_through_cuLaunchKernelEx(kind, threaded):
    """Cooperative, PDL and cluster launches take cuLaunchKernelEx: alone (a process of one
    thread), with the GIL kept around the driver call, and beside another Python thread,
    with it released."""
    import os
    import subprocess
    import sys

    opts = _EX_OPTS[kind]
    if torch.cuda.get_device_capability()[0] < 9 and kind != "cooperative":
        pytest.skip("PDL and thread block clusters need sm_90 or newer")
    from tritonjit_cuda import _driver

    if not threaded:
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.run([sys.executable, "-c", _ALONE, here, repr(opts)], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
        return
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert _driver.launch_releases_gil() is True
        x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
        torch.testing.assert_close(_add(x, y, **opts), x + y)
        torch.testing.assert_close(_add(y, y, **opts), y + y)  # the variant's second launch: a hit
    finally:
        stop.set()
        other.join()


def test_cpu_tensor_is_refused():
    x = torch.randn(1024, device="cuda")
    _add(x, x)
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 'Y' of kernel 'add_kernel'.*CUDA tensor.*cpu"):
        _add(x, torch.randn(1024))


def test_grid_over_the_driver_limit():
    x = torch.randn(1024, device="cuda")
    f = tritonjit.function(add_kernel)
    with pytest.raises(tritonjit.GridError, match=r"add_kernel.*exceeds the limits"):
        f[(1, 70000)](x, x, x, 1024, BLOCK=1024)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device_launches_on_the_tensors_device():
    x = torch.randn(4096, device="cuda:1")
    y = torch.randn(4096, device="cuda:1")
    assert torch.cuda.current_device() == 0
    torch.testing.assert_close(_add(x, y), x + y)
    torch.testing.assert_close(_add(x, y), x + y)  # native path
    with pytest.raises(tritonjit.ArgumentError, match="device 1 but 'X' is on device 0"):
        _add(torch.randn(4096, device="cuda:0"), y)


def test_native_and_python_paths_agree_on_variants():
    from tritonjit import _native

    if not _native.available():
        pytest.skip(_native.reason)
    f = tritonjit.function(add_kernel)
    x = torch.randn(2048, device="cuda")
    _add(x, x)
    assert f._dispatcher is not None
    key = f._dispatcher.key(x, x, x, 2048, BLOCK=1024)
    assert key[0] == f._state.binder(x, x, x, 2048, BLOCK=1024)[0] and key[1] == 0
