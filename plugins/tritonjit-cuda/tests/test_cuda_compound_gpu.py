"""Tuple and host TensorDescriptor arguments launched on a GPU, against torch and Triton.

Tuples reach the kernel as their non-constant elements, depth first (read by the C
launch entry from the dispatcher's TJ_ARG_TUPLE arguments); descriptors as Triton's CUDA
launcher passes them (a host-made TMA CUtensorMap on sm_90+, through Python). Where
Triton's own ``kernel[grid]`` can launch the same call, its result must be the same
bits as tritonjit's.
"""

from __future__ import annotations

import pytest
import torch
import triton
import tritonjit
from cuda_test_kernels import (
    desc_copy_kernel,
    desc_load_padded_kernel,
    desc_tuple_scale_kernel,
    tuple_axpby_kernel,
)
from triton.tools.tensor_descriptor import TensorDescriptor

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def cuda_backend():
    tritonjit.set_backend("cuda")
    yield
    tritonjit.set_backend(None)


def _sm() -> int:
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def _axpby(ptrs, n, coef, block=256):
    tritonjit.function(tuple_axpby_kernel)[(triton.cdiv(n, block),)](ptrs, n, coef, BLOCK=block)


@pytest.mark.parametrize("coef", [(2.0, 1), (0.5, -3.0), (1, 2.5)])
@pytest.mark.parametrize("offset", [0, 1])
def test_tuple_kernel_matches_torch(coef, offset):
    n = 10_000
    x = torch.randn(n + offset, device="cuda")[offset:]
    y = torch.randn(n, device="cuda")
    out = torch.empty(n + 1, device="cuda")[1:]  # an unaligned pointer inside the tuple
    for _ in range(2):  # a miss (the Python path), then the C entry reading the tuples
        out.zero_()
        _axpby((x, (y, out)), n, coef)
        torch.testing.assert_close(out, coef[0] * x + coef[1] * y)
    ours = out.clone()
    tuple_axpby_kernel[(triton.cdiv(n, 256),)]((x, (y, out)), n, coef, BLOCK=256)  # Triton's own launcher
    assert torch.equal(out, ours)


def test_tuple_variants_launch_through_the_c_entry():
    f = tritonjit.function(tuple_axpby_kernel)
    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    _axpby((x, (x, out)), 4096, (1.5, 2.5))
    before = f._dispatcher.stats()["native"]
    for k in range(3):  # new tensors and values each time, the same variant
        y = torch.randn(4096, device="cuda")
        _axpby((y, (x, out)), 4096, (1.5 + k, 2.5))
        torch.testing.assert_close(out, (1.5 + k) * y + 2.5 * x)
    assert f._dispatcher.stats()["native"] == before + 3
    sig = "(*fp32:16,(*fp32:16,*fp32:16)),i32:16,(fp32,fp32),256"
    (variant,) = [v for v in f.variants() if v.signature == sig]
    assert variant.native is not None


def test_tuple_launch_goes_to_the_current_stream():
    # a side stream whose work a launch on the default stream would race
    n = 1 << 22
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    _axpby((x, (y, out)), n, (2.0, 3.0))
    _axpby((x, (y, out)), n, (2.0, 3.0))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        big = torch.randn(n, device="cuda")
        for _ in range(20):
            big.mul_(1.0001)
        x.copy_(big)
        _axpby((x, (y, out)), n, (2.0, 3.0))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + 3.0 * y)


def test_descriptor_variants_keep_to_the_python_path():
    src = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    f = tritonjit.function(desc_copy_kernel)
    for _ in range(2):
        f[(2, 2)](TensorDescriptor.from_tensor(src, [64, 64]), TensorDescriptor.from_tensor(dst, [64, 64]),
                  BM=64, BN=64)
    assert all(v.native is None for v in f.variants())  # the host fills their descriptors per launch
    torch.testing.assert_close(dst, src, atol=0, rtol=0)


def test_cpu_tensor_inside_a_tuple_is_refused():
    x = torch.randn(1024, device="cuda")
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 'ptrs\[1\]\[0\]' of kernel 'tuple_axpby_kernel'"):
        _axpby((x, (torch.randn(1024), x)), 1024, (1.0, 1.0))


def test_tuple_kernel_in_a_cuda_graph():
    x, y = torch.randn(8192, device="cuda"), torch.randn(8192, device="cuda")
    out = torch.empty_like(x)
    _axpby((x, (y, out)), 8192, (2.0, 3.0))  # compiled and loaded before the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _axpby((x, (y, out)), 8192, (2.0, 3.0))
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + 3.0 * y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(256, 512), (100, 136)])  # the second is not a multiple of the block
def test_descriptor_copy_matches_torch(dtype, shape):
    src = torch.randn(shape, device="cuda").to(dtype)
    dst = torch.zeros_like(src)
    bm, bn = 64, 64
    grid = (triton.cdiv(shape[0], bm), triton.cdiv(shape[1], bn))
    f = tritonjit.function(desc_copy_kernel)
    f[grid](TensorDescriptor.from_tensor(src, [bm, bn]), TensorDescriptor.from_tensor(dst, [bm, bn]), BM=bm, BN=bn)
    torch.testing.assert_close(dst, src, atol=0, rtol=0)
    if _sm() >= 90:
        assert all(v.compiled.metadata.get("tensordesc_meta") for v in f.variants()), "expected TMA descriptors"


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_descriptor_padding_reaches_the_device(padding):
    src = torch.randn(40, 40, device="cuda")
    out = torch.full((64, 64), 7.0, device="cuda")
    desc = TensorDescriptor.from_tensor(src, [64, 64], padding)
    tritonjit.function(desc_load_padded_kernel)[(1,)](desc, out, 64, BM=64, BN=64)
    torch.cuda.synchronize()
    torch.testing.assert_close(out[:40, :40], src)
    rest = torch.cat([out[40:].flatten(), out[:40, 40:].flatten()])
    assert (rest.isnan().all() if padding == "nan" else (rest == 0).all()), rest[:8]
    theirs = torch.full_like(out, 7.0)
    desc_load_padded_kernel[(1,)](desc, theirs, 64, BM=64, BN=64)  # Triton's own launcher
    assert torch.equal(out.nan_to_num(1.5), theirs.nan_to_num(1.5))


def test_descriptors_inside_a_tuple():
    # Triton 3.6's own launcher cannot pass a descriptor inside a tuple; the compiler's
    # ABI is the same as for top-level descriptors, which is what tritonjit passes
    src = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    dst = torch.zeros_like(src)
    pair = (TensorDescriptor.from_tensor(src, [32, 64]), (TensorDescriptor.from_tensor(dst, [32, 64]), None))
    tritonjit.function(desc_tuple_scale_kernel)[(4, 3)](pair, 2.0, 128, BM=32, BN=64)
    torch.testing.assert_close(dst, (src.float() * 2.0).half())


def test_descriptor_launches_repeat_with_new_tensors():
    # the TMA descriptor is made per launch from the descriptor's base: new tensors, new maps
    f = tritonjit.function(desc_copy_kernel)
    for _ in range(3):
        src = torch.randn(128, 128, device="cuda", dtype=torch.float16)
        dst = torch.empty_like(src)
        f[(2, 2)](TensorDescriptor.from_tensor(src, [64, 64]), TensorDescriptor.from_tensor(dst, [64, 64]),
                  BM=64, BN=64)
        torch.testing.assert_close(dst, src, atol=0, rtol=0)
