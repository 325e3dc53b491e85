"""The CUDA plugin without a GPU: discovery, cross-compiles, the argument ABI."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
import torch
import tritonjit
from cuda_test_kernels import (
    add_kernel,
    desc_copy_kernel,
    desc_tuple_scale_kernel,
    mixed_scalars_kernel,
    mm_kernel,
    tuple_axpby_kernel,
)
from triton.tools.tensor_descriptor import TensorDescriptor
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


@needs_ext
def test_launch_releases_the_gil_only_where_another_thread_may_want_it():
    """A launch blocks in the driver while the launch queue is full: it must let other Python
    threads run then. Alone in the process, releasing and retaking the GIL only costs time."""
    import subprocess
    import sys
    import threading

    alone = subprocess.run([sys.executable, "-c", "from tritonjit_cuda._backend import _driver; "
                            "print(_driver.launch_releases_gil())"], capture_output=True, text=True, check=True)
    assert alone.stdout.strip() == "False", alone.stderr
    started, release = threading.Event(), threading.Event()

    def waiter() -> None:
        started.set()
        release.wait()

    t = threading.Thread(target=waiter)
    t.start()
    try:
        started.wait()
        assert _driver.launch_releases_gil() is True
    finally:
        release.set()
        t.join()


@pytest.mark.parametrize("header", ["tritonjit_launch.h", "tritonjit_tensor.h"])
def test_abi_headers_match_the_core(header):
    """The plugin builds without the core installed, so it carries copies of the core's
    ABI headers; a copy that drifted would break the capsule contract silently."""
    import tritonjit._native
    import tritonjit_cuda

    core = Path(tritonjit._native.__file__).with_name(header)
    mine = Path(tritonjit_cuda.__file__).with_name(header)
    assert mine.read_bytes() == core.read_bytes()


@needs_ext
def test_declares_the_launch_abi_its_extension_was_built_for():
    """The core refuses a plugin of another launch ABI at registration (tests/core/test_launch_abi.py);
    this plugin declares the ABI of the header its C extension was compiled with."""
    import tritonjit_cuda
    from tritonjit import _launch_abi

    assert tritonjit_cuda.LAUNCH_ABI == _driver.LAUNCH_ABI == _launch_abi.LAUNCH_ABI
    assert _driver.LAUNCH_CAPSULE == _launch_abi.LAUNCH_CAPSULE
    assert tritonjit_cuda.plugin.tritonjit_launch_abi == _driver.LAUNCH_ABI
    assert tritonjit.get_backend("cuda").plugin is tritonjit_cuda.plugin  # so it was accepted


# ---- tuples and tensor descriptors: the device ABI, checked against the compiled PTX ----------
_PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


def _ptx_params(ptx: str, name: str) -> list[tuple[int, bool]]:
    """(size in bytes, is a pointer) of each parameter of the kernel's PTX entry."""
    import re

    entry = ptx[ptx.index(f".entry {name}("):]
    decls = re.findall(r"\.param\s+([^,)\n]*?)\s+" + name + r"_param_\d+(\[\d+\])?", entry[: entry.index(")")])
    out = []
    for ty, array in decls:
        size = int(array[1:-1]) if array else _PTX_SIZES[re.search(r"\.[busf](\d+)", ty).group(1)]
        out.append((size, ".ptr" in ty))
    return out


def _abi_sizes(abi: _types.DeviceAbi) -> list[tuple[int, bool]]:
    sizes = [(_types.TYPE_SIZES[t], t == "*") for t in (tuple(_types.TYPE_CODES)[c] for c in abi.codes)]
    return sizes + [(8, True), (8, True)]  # global and profile scratch


def _abi_of(kernel, args, kwargs, arch):
    f = tritonjit.function(kernel)
    v = f.compile(f.signature(*args, **kwargs), target=f"cuda:{arch}", num_warps=4)
    return v, _types.device_abi(v.signature, v.metadata, v.runtime_params, _fake_fill)


def _fake_fill(address, swizzle, elem_size, elem_type, box, shape, strides, padding):
    _fake_fill.calls.append((address, swizzle, elem_size, elem_type, list(box), list(shape), list(strides), padding))
    return bytes(range(128))


_fake_fill.calls = []


def _descs(dtype=torch.float16, block=(64, 64), padding="zero"):
    t = torch.zeros(128, 192, dtype=dtype)
    return TensorDescriptor.from_tensor(t, list(block), padding)


@pytest.fixture
def interpreter():
    tritonjit.set_backend("interpreter")
    yield
    tritonjit.set_backend(None)


@pytest.mark.parametrize("arch", [80, 90])
def test_tuple_abi_matches_the_ptx(arch, interpreter):
    x = torch.empty(64)
    v, abi = _abi_of(tuple_axpby_kernel, ((x, (x, x[1:])), 64, (2.0, 1)), {"BLOCK": 64}, arch)
    assert v.signature == "(*fp32:16,(*fp32:16,*fp32)),i32:16,(fp32,i32:1),64"
    assert _abi_sizes(abi) == _ptx_params(v.asm["ptx"], v.name)
    assert abi.param_index == (0, 0, 0, 1, 2)
    assert abi.paths == ((0,), (1, 0), (1, 1), (), (0,))  # where the C entry reads each leaf (TJ_ARG_TUPLE)
    args = abi.expand([(x, (x, x[1:])), 64, (2.0, 1)])  # the launcher's arguments: one per runtime parameter
    assert args[0] is x and args[2] is not x and args[3:] == [64, 2.0]


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_descriptor_abi_matches_the_ptx_and_tritons_expansion(arch, padding, interpreter, monkeypatch):
    import triton
    from triton.backends.nvidia import driver as nv

    src, dst = _descs(padding=padding), _descs()
    v, abi = _abi_of(desc_copy_kernel, (src, dst), {"BM": 64, "BN": 64}, arch)
    assert _abi_sizes(abi) == _ptx_params(v.asm["ptx"], v.name)
    # Triton's own launcher expansion of the same descriptors (make_tensordesc_arg), its
    # TMA filler recorded the same way
    metas = v.metadata.get("tensordesc_meta") or [None, None]
    theirs_calls: list = []

    def theirs_fill(*a):
        theirs_calls.append((*a[:4], list(a[4]), list(a[5]), list(a[6]), a[7]))
        return bytes(range(128))

    fake = type("D", (), {"active": type("A", (), {"utils": type("U", (), {"fill_tma_descriptor": staticmethod(
        theirs_fill)})})})
    monkeypatch.setattr(triton.runtime, "driver", fake)
    theirs = [*nv.make_tensordesc_arg(src, metas[0]), *nv.make_tensordesc_arg(dst, metas[1])]
    _fake_fill.calls.clear()
    ours = abi.expand([src, dst])
    assert abi.paths is None  # the host expands descriptors on every launch: no C entry reads them
    assert [a.data_ptr() if torch.is_tensor(a) else a for a in ours] == \
        [a.data_ptr() if torch.is_tensor(a) else a for a in theirs]
    assert _fake_fill.calls == theirs_calls
    assert (arch == 90) == bool(theirs_calls)  # TMA on sm_90 only
    if arch == 90 and _driver is not None:
        (packed,) = _driver.pack(abi.codes[:1], ours[:1])
        assert packed == bytes(range(128))  # the CUtensorMap travels by value


def test_descriptors_inside_tuples_follow_the_same_abi(interpreter):
    pair = (_descs(block=(32, 64)), (_descs(block=(32, 64)), None))
    v, abi = _abi_of(desc_tuple_scale_kernel, (pair, 2.0, 128), {"BM": 32, "BN": 64}, 90)
    assert v.signature.startswith("(tensordesc<fp16[32, 64]>,(tensordesc<fp16[32, 64]>,nullopt)),fp32,")
    assert _abi_sizes(abi) == _ptx_params(v.asm["ptx"], v.name)
    _fake_fill.calls.clear()
    out = abi.expand([pair, 2.0, 128])
    assert len(_fake_fill.calls) == 2 and out[-2:] == [2.0, 128]
    assert abi.paths is None


def _ptx_layout(ptx: str, name: str) -> tuple[list[int], int]:
    """Each parameter's offset in the kernel's parameter space, and its size, from the PTX
    entry's declarations: every parameter at the next multiple of its alignment (its
    size, or an array's ``.align``), as the driver lays them out."""
    import re

    entry = ptx[ptx.index(f".entry {name}("):]
    decls = re.findall(r"\.param\s+([^,)\n]*?)\s+" + name + r"_param_\d+(\[\d+\])?", entry[: entry.index(")")])
    offsets, at = [], 0
    for ty, array in decls:
        size = int(array[1:-1]) if array else _PTX_SIZES[re.search(r"\.[busf](\d+)", ty).group(1)]
        align = int(re.search(r"\.align (\d+)", ty).group(1)) if array else size
        at = -(-at // align) * align
        offsets.append(at)
        at += size
    return offsets, at


def _layout_cases():
    x, h, t = torch.empty(64), torch.empty(64, dtype=torch.float16), torch.empty(64)
    yield mixed_scalars_kernel, (True, x, 3, 2**40, 0.5, h, 1.5, 2**63, -2.0, -7, t), {"BLOCK": 64}, \
        "i1,*fp32:16,i32,i64,fp32,*fp16:16,fp16,u64,bf16,i8,*fp32:16,64"
    yield add_kernel, (x, x, t, 64), {"BLOCK": 64}, None
    yield tuple_axpby_kernel, ((x, (x, x[1:])), 64, (2.0, 3)), {"BLOCK": 64}, None
    yield desc_copy_kernel, (_descs(), _descs()), {"BM": 64, "BN": 64}, None


@needs_ext
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("case", range(4))
def test_parameter_buffer_layout_matches_the_ptx(arch, case, interpreter):
    """A launch packs every parameter into one buffer at the offsets the kernel's
    parameter space has (the driver takes it whole where cuFuncGetParamInfo agrees, on
    the GPU): pointers after a bool, i64s after an i32, two-byte halves, 64-aligned
    CUtensorMaps (sm_90) and the scratch pointers all land where the PTX puts them."""
    kernel, args, kwargs, sig = list(_layout_cases())[case]
    f = tritonjit.function(kernel)
    v = f.compile(sig or f.signature(*args, **kwargs), target=f"cuda:{arch}", num_warps=4)
    abi = _types.device_abi(v.signature, v.metadata, v.runtime_params, _fake_fill)
    n_scratch = _types.scratch_layout(v.metadata)[0]
    offsets, size = _driver.param_layout(abi.codes, n_scratch)
    assert (list(offsets), size) == _ptx_layout(v.asm["ptx"], v.name)
    if kernel is mixed_scalars_kernel:  # padding really happens: not every offset is the last one's end
        assert offsets[:4] == (0, 8, 16, 24) and offsets[6:10] == (48, 56, 64, 66)


@needs_ext
def test_parameter_layout_refuses_bad_input():
    with pytest.raises(ValueError, match="n_scratch"):
        _driver.param_layout(bytes([0]), 3)
    with pytest.raises(ValueError, match="unknown argument type code"):
        _driver.param_layout(bytes([200]), 0)
    assert _driver.param_layout(b"", 0) == ((), 0)
    assert _driver.param_buffer() is True and _driver.param_buffer(True) is True  # the default: on


@needs_ext
def test_tma_descriptor_argument_is_128_bytes_by_value():
    code = _types.type_code("nvTmaDesc")
    (packed,) = _driver.pack(bytes([code]), [bytes(range(128))])
    assert packed == bytes(range(128))
    with pytest.raises(TypeError, match="128 bytes of a CUtensorMap"):
        _driver.pack(bytes([code]), [b"short"])
    with pytest.raises(TypeError, match="128 bytes of a CUtensorMap"):
        _driver.pack(bytes([code]), [3])


def test_device_facts_for_the_autotuner_come_from_torch_cuda_and_triton(monkeypatch):
    """synchronize / device_name / benchmarker are hooks (the core never branches on
    'cuda'); without a GPU, torch's and Triton's entry points are stand-ins here."""
    import triton.testing
    from tritonjit_cuda import plugin

    backend = tritonjit.get_backend("cuda")
    assert backend.synchronize is not None and backend.device_name is not None and backend.benchmarker is not None
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"NVIDIA Stand-in {device}")
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, quantiles=None: (fn(), [0.5, 0.4, 0.6])[1])
    backend.synchronize(1)
    assert synced == [1] and backend.device_name(1) == "NVIDIA Stand-in 1"
    calls = []
    assert backend.benchmarker()(lambda: calls.append(1)) == 0.5 and calls == [1]
    # streams through torch's C reader of the raw stream, devices from torch.cuda
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0xC0DE + device, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert plugin.current_stream(2) == 0xC0DE + 2 and plugin.current_device() == 1
    with pytest.raises(ValueError, match=r"CUDA tensor.*cpu"):
        plugin.device_of(torch.zeros(1))


class _IntSubclass(int):
    pass


@needs_ext
def test_launcher_digests_arguments_as_the_core_dispatcher_does():
    """One digestion (tritonjit_launch.h's tj_digest_scalar) serves the core's dispatcher and
    this launcher: a value packed by a direct launcher call is read exactly as the
    dispatcher reads it on the native path, at every boundary of int64 and uint64."""
    import numpy as np
    import torch
    from tritonjit._native import dispatch

    if dispatch is None:
        pytest.skip("the core's native dispatcher is not built")
    values = [None, True, False, 0, 1, -1, 2**31 - 1, 2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**63,
              2**64 - 1, 2**64, -2**63 - 1, 0.0, -1.5, float("inf"), float("nan")]
    for v in values:
        core, mine = dispatch.digest_scalar(v), _driver.digest(v)
        assert core is not None, v
        if isinstance(v, float) and v != v:
            assert core[0] == mine[0] and mine[1] != mine[1]
        else:
            assert core == mine, v
    # kinds (tritonjit_launch.h): NONE 0, PTR 1, INT 2, UINT 3, FLOAT 4, BOOL 5, OTHER 7
    assert _driver.digest(2**64)[0] == _driver.digest(-2**63 - 1)[0] == 7
    assert _driver.digest(2**63) == (3, 2**63) and _driver.digest(-2**63) == (2, -2**63)
    # not scalars for the dispatcher (it reads them as tensors or leaves them to Python)
    t = torch.arange(4)
    for v in (t, _IntSubclass(3), np.int64(3), "x"):
        assert dispatch.digest_scalar(v) is None
    assert _driver.digest(t) == (1, t.data_ptr())
    assert _driver.digest("x") == (7, "x")


def test_the_native_dispatcher_reads_the_current_device_in_c(monkeypatch):
    """A kernel without tensor arguments asks for the current device on every call: the
    dispatcher gets torch's C reader (torch._C._cuda_getDevice, lazily initializing as
    torch.cuda.current_device() does) instead of the Python hook; a plugin whose torch
    module is another (a test's stand-in) or that offers none keeps the hook."""
    from tritonjit._native import _current_device_fn
    from tritonjit_cuda._backend import CudaBackend

    read = lambda: 3  # noqa: E731
    monkeypatch.setattr(torch._C, "_cuda_getDevice", read, raising=False)
    plugin = CudaBackend()
    assert plugin.current_device_reader() is read
    stand_in = CudaBackend()
    stand_in._torch = object()  # another torch module: its hook
    assert stand_in.current_device_reader() == stand_in.current_device

    class Resolved:  # what the core resolves: the plugin object and its hooks
        def __init__(self, plugin, hook):
            self.plugin, self.current_device = plugin, hook

    assert _current_device_fn(Resolved(plugin, plugin.current_device)) is read
    assert _current_device_fn(Resolved(stand_in, stand_in.current_device)) == stand_in.current_device
    hook = lambda: 0  # noqa: E731
    assert _current_device_fn(Resolved(object(), hook)) is hook  # no reader offered: the hook
