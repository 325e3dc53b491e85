"""The CUDA plugin without a GPU: discovery, cross-compiles, the argument ABI."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
import torch
import tritonjit
from cuda_test_kernels import add_kernel, mm_kernel
from tritonjit_cuda import _types
from tritonjit_cuda._backend import _driver


def test_plugin_is_discovered_and_says_why_unavailable():
    backend = tritonjit.get_backend("cuda")
    info = backend.info
    assert (info.priority, info.triton_backend, info.binary_ext, info.warp_size) == (100, "cuda", "cubin", 32)
    assert (info.dispatch_key, info.device_type) == ("CUDA", "cuda")
    assert backend.dist == "tritonjit-cuda"
    ok, reason = backend.is_available()
    if not torch.cuda.is_available():
        assert not ok and ("libcuda" in reason or "torch" in reason or "device" in reason)
    assert backend.make_launcher is not None


@pytest.mark.parametrize("arch", ["80", "90"])
def test_cross_compiles_for_sm80_and_sm90(arch):
    f = tritonjit.function(add_kernel)
    v = f.compile("*fp32:16,*fp32:16,*fp32:16,i32,1024", target=f"cuda:{arch}", num_warps=4)
    assert v.asm["cubin"][:4] == b"\x7fELF"
    assert f".target sm_{arch}" in v.asm["ptx"]
    assert v.metadata["num_warps"] == 4
    types, index = _types.type_codes(v.signature)
    assert list(types) == [0, 0, 0, 4] and index == (0, 1, 2, 3)
    assert _types.scratch_layout(v.metadata)[0] == 2  # Triton 3.5+: global and profile scratch


def test_shared_memory_of_big_variants_is_known_before_any_gpu():
    f = tritonjit.function(mm_kernel)
    big = f.compile("*fp16:16,*fp16:16,*fp32:16,i32:16,i32:16,i32:16,128,128,64", target="cuda:90",
                    num_warps=8, num_stages=3)
    huge = f.compile("*fp16:16,*fp16:16,*fp32:16,i32:16,i32:16,i32:16,256,256,128", target="cuda:90",
                     num_warps=8, num_stages=4)
    assert big.metadata["shared"] > 48 * 1024  # needs the dynamic shared memory opt-in
    assert huge.metadata["shared"] > 228 * 1024  # more than an H100/H200 has per block


def test_runtime_params_skip_constants():
    sig = "*fp32:16,i32:1,nullopt,i64:16,fp32,u1,*kbf16,'a,b',1024,tl.float16,u64"
    assert _types.runtime_params(sig) == [(0, "*fp32"), (3, "i64"), (4, "fp32"), (5, "u1"), (6, "*kbf16"),
                                          (10, "u64")]


needs_ext = pytest.mark.skipif(_driver is None, reason="C extension not built")


@needs_ext
@pytest.mark.parametrize("token,value,expected", [
    ("*", 0x7F0012345678, struct.pack("<Q", 0x7F0012345678)),
    ("*", None, struct.pack("<Q", 0)),
    ("i1", True, b"\x01"), ("u1", False, b"\x00"),
    ("i8", -5, struct.pack("<b", -5)), ("u8", 255, b"\xff"),
    ("i16", -300, struct.pack("<h", -300)), ("u16", 65535, struct.pack("<H", 65535)),
    ("i32", -(2**31), struct.pack("<i", -(2**31))), ("i32", 7, struct.pack("<i", 7)),
    ("u32", 2**32 - 1, struct.pack("<I", 2**32 - 1)),
    ("i64", -(2**63), struct.pack("<q", -(2**63))), ("i64", 2**40 + 3, struct.pack("<q", 2**40 + 3)),
    ("u64", 2**64 - 1, struct.pack("<Q", 2**64 - 1)), ("u64", 2**63, struct.pack("<Q", 2**63)),
    ("fp16", 1.5, struct.pack("<e", 1.5)), ("fp16", -0.0999, struct.pack("<e", -0.0999)),
    ("bf16", 1.0, b"\x80\x3f"), ("bf16", -2.0, b"\x00\xc0"),
    ("fp32", 3.25, struct.pack("<f", 3.25)), ("fp32", 2, struct.pack("<f", 2.0)),
    ("fp64", math.pi, struct.pack("<d", math.pi)), ("fp64", True, struct.pack("<d", 1.0)),
])
def test_packs_every_scalar_type_as_the_driver_expects(token, value, expected):
    code = _types.type_code(token)
    (packed,) = _driver.pack(bytes([code]), [value])
    assert packed == expected
    assert len(packed) == _types.TYPE_SIZES[token]


@needs_ext
def test_packs_tensor_pointers_from_data_ptr():
    t = torch.arange(8, dtype=torch.float32)
    (packed,) = _driver.pack(bytes([0]), [t])
    assert struct.unpack("<Q", packed)[0] == t.data_ptr()


@needs_ext
@pytest.mark.parametrize("token,value", [("i32", 2**31), ("i8", 200), ("u32", -1), ("i32", 1.5), ("u64", 2**64),
                                         ("fp32", "x"), ("*", 1.5), ("i16", "3")])
def test_packing_rejects_what_does_not_fit(token, value):
    with pytest.raises((TypeError, OverflowError), match=token if token != "*" else "pointer"):
        _driver.pack(bytes([_types.type_code(token)]), [value])


@needs_ext
def test_type_codes_agree_between_python_and_c():
    assert _driver.TYPE_SIZES == tuple(_types.TYPE_SIZES[t] for t in _types.TYPE_CODES)
    assert _driver.TYPE_NAMES[1:] == tuple(_types.TYPE_CODES)[1:]


@pytest.mark.parametrize("header", ["tritonjit_launch.h", "tritonjit_tensor.h"])
def test_abi_headers_match_the_core(header):
    """The plugin builds without the core installed, so it carries copies of the core's
    ABI headers; a copy that drifted would break the capsule contract silently."""
    import tritonjit._native
    import tritonjit_cuda

    core = Path(tritonjit._native.__file__).with_name(header)
    mine = Path(tritonjit_cuda.__file__).with_name(header)
    assert mine.read_bytes() == core.read_bytes()
