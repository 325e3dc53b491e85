"""The torch tensor reader (tritonjit/_native/torch_reader.py, _torch_tensor.cpp).

It must read exactly what ``t.data_ptr()``, ``t.dtype`` and ``t.get_device()`` return,
decline everything it cannot answer with certainty, and give the dispatcher the same
keys as the Python binder. Built here with the system C++ compiler against the torch
under test (as on a user's machine on first use).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
import tritonjit
from tritonjit import _native
from tritonjit.testing import FakeTensor, RecordingBackend

pytestmark = [
    pytest.mark.skipif(not _native.available(), reason=f"native dispatcher: {_native.reason}"),
    pytest.mark.skipif(not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="no C++ compiler"),
]

_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.fixture(scope="module")
def reader() -> Any:
    assert _native.install_tensor_reader(wait=True), _native.torch_reader.reason()
    return _native.dispatch


def _python_reads(t: torch.Tensor) -> tuple[int, torch.dtype, int]:
    return t.data_ptr(), t.dtype, t.get_device()


@pytest.mark.parametrize("dtype", _DTYPES)
def test_reads_what_python_reads(reader, dtype):
    base = torch.zeros(64, 8, dtype=dtype)
    for t in (base, base[3:], base[:, 1], base.t(), base[5:5], torch.empty(0, dtype=dtype), base.view(-1)[7:],
              torch.nn.Parameter(base, requires_grad=False), base.detach(), torch.empty(2, 3, device="meta", dtype=dtype)):
        got = reader.read_tensor(t)
        assert got is not None
        assert got == _python_reads(t)
        assert got[1] is t.dtype  # the very dtype object: the dispatcher's caches compare identity


def test_declines_what_it_cannot_answer(reader):
    class Sub(torch.Tensor):
        pass

    x = torch.ones(4)
    for v in (x.as_subclass(Sub), FakeTensor(1024, torch.float32), 3, None, "x", object()):
        assert reader.read_tensor(v) is None

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():  # a mode sees every Python-level call to data_ptr(): leave them to Python
        assert reader.read_tensor(x) is None
    assert reader.read_tensor(x) is not None


@triton.jit
def _four(P, Q, R, n, BLOCK: tl.constexpr):
    pass


@triton.jit(do_not_specialize_on_alignment=["Q"])
def _mixed(P, Q: tl.const, R, a, b, S: tl.pointer_type(tl.float16), BLOCK: tl.constexpr):
    pass


@pytest.fixture
def device_zero(monkeypatch):
    """Real CPU tensors through a device backend: get_device() answers 0 (CPU tensors
    would otherwise be refused before a key is made), torch's own C code for the rest."""
    backend = RecordingBackend(name="recording_reader")
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording_reader")
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    yield
    tritonjit.set_backend(None)
    tritonjit.unregister_backend("recording_reader")


def test_keys_equal_with_and_without_the_reader(reader, device_zero):
    rng = random.Random(7)
    pool = [torch.empty(256, dtype=dt) for dt in _DTYPES]
    checked = 0
    for kernel in (_four, _mixed):
        f = tritonjit.KernelFunction(kernel)
        f._make_state()
        d = f._dispatcher
        n_ptr = sum(1 for p in f.params if not p.is_constexpr)
        for _ in range(300):
            args = []
            for p in f.params:
                if p.is_constexpr:
                    continue
                if len(args) < n_ptr and (p.name.isupper() or rng.random() < 0.3):
                    base = rng.choice(pool)
                    args.append(base[rng.choice([0, 1, 2, 8, 16, 32]):])
                else:
                    args.append(rng.choice([1, 16, 17, -3, 2**40]))
            cap = reader.tensor_reader()
            with_reader = d.key(*args, BLOCK=64)
            reader.set_tensor_reader(None)
            try:
                without = d.key(*args, BLOCK=64)
            finally:
                reader.set_tensor_reader(cap)
            try:
                want = f._bind(f._state, tuple(args), {"BLOCK": 64})[0]
            except Exception:
                want = None
            assert with_reader == without
            if want is None:
                assert with_reader is None
            else:
                assert with_reader is not None and with_reader[0] == want
                checked += 1
    assert checked > 300


def test_reader_launch_digests_the_same_pointers(reader, device_zero):
    f = tritonjit.KernelFunction(_four)
    x, y, out = torch.empty(64), torch.empty(64, dtype=torch.float16)[1:], torch.empty(64)
    f[(1,)](x, y, out, 64, BLOCK=64)  # compiles (the Python path), then the native path
    f[(1,)](x, y, out, 64, BLOCK=64)
    (variant,) = f.variants()
    kinds = [c[0] for c in variant.launcher.calls]
    assert kinds == ["python", "native"]
    assert variant.launcher.calls[1][3][:3] == [(1, x.data_ptr()), (1, y.data_ptr()), (1, out.data_ptr())]
    assert variant.signature == "*fp32:16,*fp16,*fp32:16,i32:16,64"


class _SeesDataPtr(torch.overrides.TorchFunctionMode):
    """Counts the Python-level ``data_ptr()`` calls it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.data_ptr:
            self.seen.append(out)
        return out


def test_batch_companion_follows_the_reader(reader):
    """The dispatcher reads tensors through the reader's batch companion (one mode check
    per launch) exactly while that reader is set."""
    assert reader.tensor_reader_batch() is not None
    cap = reader.tensor_reader()
    reader.set_tensor_reader(None)
    try:
        assert reader.tensor_reader_batch() is None
    finally:
        reader.set_tensor_reader(cap)
    assert reader.tensor_reader_batch() is not None
    with pytest.raises(ValueError):  # a reader's capsule is no batch companion
        reader.register_tensor_reader_batch(cap)


def test_a_mode_sees_every_tensor_of_a_launch(reader, device_zero):
    """With a torch-function mode active, the launch reads each tensor through Python
    (the mode sees its data_ptr()); without one, none; and a mode entered by Python code
    that runs in the middle of a launch (here another argument's data_ptr()) sees the
    tensors after it, as on the Python path."""
    f = tritonjit.KernelFunction(_four)
    x, y, out = torch.empty(64), torch.empty(64), torch.empty(64)
    f[(1,)](x, y, out, 64, BLOCK=64)  # compiles (the Python path)
    mode = _SeesDataPtr()
    with mode:
        f[(1,)](x, y, out, 64, BLOCK=64)
    assert sorted(mode.seen) == sorted([x.data_ptr(), y.data_ptr(), out.data_ptr()])
    before = len(mode.seen)
    f[(1,)](x, y, out, 64, BLOCK=64)
    assert len(mode.seen) == before

    late = _SeesDataPtr()

    class Enters(FakeTensor):  # read through Python: enters the mode as it is read
        def data_ptr(self) -> int:
            late.__enter__()
            return super().data_ptr()

    first = Enters(x.data_ptr())
    for _ in range(2):
        late.seen.clear()
        try:
            f[(1,)](first, y, out, 64, BLOCK=64)
        finally:
            late.__exit__(None, None, None)
        assert late.seen == [y.data_ptr(), out.data_ptr()]
    (variant,) = f.variants()
    assert [c[0] for c in variant.launcher.calls] == ["python"] + ["native"] * 4


def test_disabled_by_environment():
    code = ("import torch, tritonjit._native as n; print(n.install_tensor_reader(wait=True));"
            "print(n.torch_reader.reason())")
    env = {**os.environ, "TRITONJIT_TORCH_READER": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.splitlines() == ["False", "disabled by TRITONJIT_TORCH_READER=0"]


def test_the_built_reader_is_reused(reader, tmp_path, monkeypatch):
    """A second build for the same torch finds the shared object and compiles nothing."""
    from tritonjit._native import torch_build, torch_reader

    args = (torch_reader._module.name, torch_reader.SOURCE, [torch_reader.HEADER], [torch_reader.HERE])
    first = torch_build.build(*args)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("compiled again"))
    assert torch_build.build(*args) == first


def test_current_stream_declines_without_a_backend(reader):
    """torch's CPU build registers no CUDA guard: the reader says so (None), it does not
    answer a wrong stream or raise."""
    if torch.cuda.is_available():
        pytest.skip("CUDA present: covered by test_gpu_current_stream")
    assert reader.current_stream(1, 0) is None


@pytest.mark.gpu
def test_gpu_current_stream(reader):
    """The reader's current stream is torch's, also under a stream context and per device."""
    assert reader.current_stream(1, 0) == torch.cuda.current_stream(0).cuda_stream
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert reader.current_stream(1, 0) == side.cuda_stream != 0
    assert reader.current_stream(1, 0) == torch.cuda.current_stream(0).cuda_stream
    for d in range(1, torch.cuda.device_count()):
        other = torch.cuda.Stream(device=d)
        with torch.cuda.stream(other):
            assert reader.current_stream(1, d) == other.cuda_stream
            assert reader.current_stream(1, 0) == torch.cuda.current_stream(0).cuda_stream
    x = torch.ones(4, device="cuda")
    assert reader.read_tensor(x) == (x.data_ptr(), torch.float32, 0)
