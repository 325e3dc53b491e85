"""The native dispatcher (tritonjit/_native) against the Python reference path.

Runs on CPU: a *recording* backend (a test plugin whose C launch entry records what
it was given instead of launching; it simulates no vendor) lets the whole native
path run: bind, key, memo, lookup in the Python path's cache, C launch entry.
"""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any, NamedTuple

import pytest
import torch
import triton
import triton.language as tl
import tritonjit
from tritonjit import SpecializationRules, _native
from tritonjit.testing import FakeTensor, RecordingBackend, installed_as_current

pytestmark = pytest.mark.skipif(not _native.available(), reason=f"native dispatcher: {_native.reason}")


@triton.jit
def add_kernel(X, Y, Out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs) + tl.load(Y + offs), mask=offs < n)


@triton.jit(do_not_specialize=["b"], do_not_specialize_on_alignment=["c"])
def mixed_kernel(P, a, b, c, s: tl.float32, q: tl.int64, K: tl.constexpr, M: tl.constexpr = 4, d=7):
    pass


@pytest.fixture
def recording():
    backend = RecordingBackend()
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording")
    yield backend
    tritonjit.set_backend(None)
    tritonjit.unregister_backend("recording")


def _fresh(kernel: Any) -> tritonjit.KernelFunction:
    return tritonjit.KernelFunction(kernel)


def _python_key(f: tritonjit.KernelFunction, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("stream", None)
    return f._state.binder(*args, **kwargs)[0]


def test_launch_goes_through_the_native_entry(recording):
    f = _fresh(add_kernel)
    x, y, o = FakeTensor(1 << 20), FakeTensor(1 << 21), FakeTensor((1 << 22) + 4)
    f[(3,)](x, y, o, 1000, BLOCK=256)  # miss: compiled by the Python path
    assert f._dispatcher is not None
    f[(3, 2)](x, y, o, 1000, BLOCK=256)
    (variant,) = f.variants()
    calls = variant.launcher.calls
    assert calls[0][0] == "python" and calls[1][0] == "native"
    kind, grid, stream, args = calls[1]
    assert grid == (3, 2, 1) and stream == 1000
    assert args[0] == (1, 1 << 20) and args[2] == (1, (1 << 22) + 4)  # TJ_ARG_PTR, address
    assert args[3] == (2, 1000) and args[4][0] == 6  # TJ_ARG_INT; BLOCK a constexpr
    assert variant.signature == "*fp32:16,*fp32:16,*fp32,i32,256"
    assert f._dispatcher.stats() == {"native": 1, "python": 0}  # the first call built it


def test_stream_options_and_grid_callable(recording):
    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(1,)](x, x, x, 16, BLOCK=64, num_warps=2)
    f[lambda meta: (meta["n"] // meta["BLOCK"],)](x, x, x, 640, BLOCK=64, num_warps=2, stream=77)
    (variant,) = f.variants()
    kind, grid, stream, _ = variant.launcher.calls[-1]
    assert (kind, grid, stream) == ("native", (10, 1, 1), 77)
    f[(1,)](x, x, x, 16, BLOCK=64, num_warps=4)  # another option value: another variant
    assert len(f.variants()) == 2


def test_bound_launcher(recording):
    f = _fresh(add_kernel)
    x, y = FakeTensor(1 << 12), FakeTensor(1 << 13)
    launch = f.bind((4,), x, y, y, 100, BLOCK=128)
    assert launch.params == ("X", "Y", "Out", "n")
    launch(x, y, y, 100)
    launch(y, x, x, 200)
    unaligned = FakeTensor((1 << 12) + 8)
    launch(unaligned, x, x, 200)  # another variant: the bound launcher re-dispatches
    sigs = sorted(v.signature for v in f.variants())
    assert sigs == ["*fp32,*fp32:16,*fp32:16,i32,128", "*fp32:16,*fp32:16,*fp32:16,i32,128"]
    with pytest.raises(TypeError, match="runtime arguments"):
        launch(x, y)


def test_errors_come_from_the_reference_path(recording):
    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(1,)](x, x, x, 16, BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'Y'.*CPU tensor"):
        f[(1,)](x, FakeTensor(4096, device=-1), x, 16, BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'Out'.*device 1 but 'X' is on device 0"):
        f[(1,)](x, x, FakeTensor(4096, device=1), 16, BLOCK=64)
    with pytest.raises(tritonjit.GridError):
        f[(0,)](x, x, x, 16, BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match="fits no Triton integer"):
        f[(1,)](x, x, x, 2**70, BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match="missing"):
        f[(1,)](x, x, x, BLOCK=64)
    assert len(f.variants()) == 1  # caches intact


# ---- grids: the C path launches only what the Python path accepts --------------------------------
MAX_X, MAX_YZ = 2**31 - 1, 2**16 - 1
BAD_GRIDS = {
    # grid: words the GridError must hold (besides the kernel's name)
    (): "0 dimensions",
    (None,): "NoneType",
    (2.0,): "float",
    (float("nan"),): "float",
    (float("inf"),): "float",
    (True,): "bool",
    (1, False): "bool",
    ("4",): "str",
    (0,): "zero or negative",
    (1, 1, 1, 1): "4 dimensions",
    (MAX_X + 1,): "exceeds the limits",
    (2**32 + 3,): "exceeds the limits",  # a c_uint would launch it as (3, 1, 1)
    (2**64 + 1,): "exceeds the limits",
    (1, MAX_YZ + 1): "exceeds the limits",  # within a uint32: the old C path launched it
    (1, 1, MAX_YZ + 1): "exceeds the limits",
}


def _launches(f: tritonjit.KernelFunction) -> list[tuple[str, tuple[int, int, int]]]:
    return [(c[0], tuple(c[1])) for v in f.variants() for c in v.launcher.calls]


@pytest.fixture(params=["c", "python"])
def launch_path(request, recording, monkeypatch):
    """The recording backend through the C dispatcher, or with none (the Python path only)."""
    if request.param == "python":
        monkeypatch.setattr(_native, "make_dispatcher", lambda fn, state: None)
    return request.param


@pytest.mark.parametrize("grid", list(BAD_GRIDS), ids=repr)
def test_bad_grids_are_refused_on_every_path(launch_path, grid):
    """Each bad grid, as a tuple, from a grid callable and through a bound launcher:
    GridError naming the kernel and what was expected, nothing launched, caches intact."""
    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(1,)](x, x, x, 16, BLOCK=64)
    f[(1,)](x, x, x, 16, BLOCK=64)  # the variant is in the memo: the next call is the C path's
    launches = _launches(f)
    for via in ("tuple", "callable", "bind", "bind callable"):
        with pytest.raises(tritonjit.GridError) as err:
            if via == "tuple":
                f[grid](x, x, x, 16, BLOCK=64)
            elif via == "callable":
                f[lambda meta: grid](x, x, x, 16, BLOCK=64)
            elif via == "bind":
                f.bind(grid, x, x, x, 16, BLOCK=64)(x, x, x, 16)
            else:
                f.bind(lambda meta: grid, x, x, x, 16, BLOCK=64)(x, x, x, 16)
        msg = str(err.value)
        assert "kernel 'add_kernel'" in msg and BAD_GRIDS[grid] in msg, (via, msg)
    assert _launches(f) == launches, "a refused grid must launch nothing"
    assert len(f.variants()) == 1
    f[(2,)](x, x, x, 16, BLOCK=64)
    assert _launches(f)[-1] == ("native" if launch_path == "c" else "python", (2, 1, 1))


def test_grids_at_the_limits_launch_natively(recording):
    """With the refusals above, this holds the C path's limits equal to MAX_GRID's."""
    from tritonjit._backend import MAX_GRID

    assert MAX_GRID == (MAX_X, MAX_YZ, MAX_YZ)
    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(1,)](x, x, x, 16, BLOCK=64)
    for grid in [(MAX_X,), (1, MAX_YZ), (1, 1, MAX_YZ), (MAX_X, MAX_YZ, MAX_YZ), [3, 2]]:
        f[grid](x, x, x, 16, BLOCK=64)
    f[lambda meta: (MAX_X, MAX_YZ)](x, x, x, 16, BLOCK=64)
    f.bind((MAX_X, 1, MAX_YZ), x, x, x, 16, BLOCK=64)(x, x, x, 16)
    assert _launches(f)[1:] == [("native", (MAX_X, 1, 1)), ("native", (1, MAX_YZ, 1)), ("native", (1, 1, MAX_YZ)),
                                ("native", (MAX_X, MAX_YZ, MAX_YZ)), ("python", (3, 2, 1)),
                                ("native", (MAX_X, MAX_YZ, 1)), ("native", (MAX_X, 1, MAX_YZ))]


def test_int_subclasses_are_ints_in_a_grid(recording):
    import enum

    class Blocks(enum.IntEnum):
        FOUR = 4

    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(Blocks.FOUR, 2)](x, x, x, 16, BLOCK=64)
    (call,) = f.variants()[0].launcher.calls
    assert call[1] == (4, 2, 1) and all(type(g) is int for g in call[1])


def test_a_backend_may_declare_larger_grid_limits():
    """BackendInfo.max_grid raises the core's limits: such grids take the Python path
    (the C path keeps the core's), and are still refused past the declared ones."""
    big = 2**32 - 1
    backend = RecordingBackend(name="recording_big", max_grid=(big, big, big))
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording_big")
    try:
        f = _fresh(add_kernel)
        x = FakeTensor(4096)
        f[(1,)](x, x, x, 16, BLOCK=64)
        f[(2**31, MAX_YZ + 1, big)](x, x, x, 16, BLOCK=64)
        f[(1, MAX_YZ)](x, x, x, 16, BLOCK=64)
        assert _launches(f)[1:] == [("python", (2**31, MAX_YZ + 1, big)), ("native", (1, MAX_YZ, 1))]
        with pytest.raises(tritonjit.GridError, match=f"exceeds the limits of backend 'recording_big'.*x <= {big}"):
            f[(big + 1,)](x, x, x, 16, BLOCK=64)
    finally:
        tritonjit.set_backend(None)
        tritonjit.unregister_backend("recording_big")


def test_max_grid_must_be_three_positive_ints():
    with pytest.raises(ValueError, match="max_grid"):
        tritonjit.BackendInfo(name="x", max_grid=(2**32, 1.5, 1))


def test_second_device_uses_its_own_cache(recording):
    f = _fresh(add_kernel)
    a0, a1 = FakeTensor(4096, device=0), FakeTensor(4096, device=1)
    f[(1,)](a0, a0, a0, 16, BLOCK=64)
    f[(1,)](a1, a1, a1, 16, BLOCK=64)
    f[(1,)](a1, a1, a1, 16, BLOCK=64)
    assert sorted(v.device for v in f.variants()) == [0, 1]
    v1 = next(v for v in f.variants() if v.device == 1)
    assert v1.launcher.calls[-1][0] == "native" and v1.launcher.calls[-1][2] == 1001  # device 1's stream


_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64, torch.uint8,
           torch.bool, torch.float64]


class _Pair(NamedTuple):
    a: Any
    b: Any


def _random_runtime_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if r < 0.12 and depth < 3:  # a tuple (nested, empty, or a namedtuple, which Python keys by its class)
        items = tuple(_random_runtime_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 2, 3])))
        return _Pair(*items[:2], *[None] * (2 - len(items[:2]))) if rng.random() < 0.1 else items
    if r < 0.35:
        return rng.choice([0, 1, -1, 16, 32, 17, 2**31 - 1, 2**31, 2**31 - 16, -2**31, -2**31 - 1, 2**32, 2**63 - 1,
                           2**63, 2**63 + 16, 2**64 - 1, 2**64, -2**63, -2**63 - 1, rng.randrange(-2**40, 2**40)])
    if r < 0.45:
        return rng.choice([0.0, 1.0, -2.5, float("inf")])
    if r < 0.5:
        return rng.choice([True, False])
    if r < 0.55:
        return None
    return FakeTensor(rng.randrange(0, 1 << 40) * rng.choice([1, 2, 4, 16, 32]), rng.choice(_DTYPES))


def _random_constexpr(rng: random.Random) -> Any:
    return rng.choice([1, 16, 1024, 1.0, True, False, None, "abc", tl.float16, tl.constexpr(8), 2.5, 0])


@pytest.mark.parametrize("rules", [SpecializationRules(), SpecializationRules(equal_to_1=False),
                                   SpecializationRules(divisibility=8), SpecializationRules(align_pointers=False)])
def test_native_key_agrees_with_python_binder(rules):
    """Many random argument lists: the native key is the Python binder's key, exactly."""
    backend = RecordingBackend(name="recording_rules", rules=rules)
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording_rules")
    try:
        rng = random.Random(1234)
        checked = 0
        for kernel in (add_kernel, mixed_kernel):
            f = _fresh(kernel)
            f._make_state()
            d = f._dispatcher
            assert d is not None
            names = [p.name for p in f.params]
            for _ in range(1500):
                args, kwargs = [], {}
                for p in f.params:
                    if p.has_default and rng.random() < 0.5:
                        continue
                    v = _random_constexpr(rng) if p.is_constexpr else _random_runtime_value(rng)
                    if rng.random() < 0.3 or kwargs or (p.has_default and len(args) < p.index):
                        kwargs[p.name] = v
                    else:
                        args.append(v)
                if rng.random() < 0.2:
                    kwargs["num_warps"] = rng.choice([2, 4])
                try:
                    want = _python_key(f, *args, **kwargs)
                except Exception:
                    want = None  # the Python binder rejects it: native must not accept it
                got = d.key(*args, **kwargs)
                if want is None:
                    assert got is None, (names, args, kwargs, got)
                    continue
                if got is None:  # fell back: allowed only for arguments the native path leaves to Python
                    continue
                assert got[0] == want and got[1] == 0, (args, kwargs, got, want)
                assert [type(a) for a in got[0]] == [type(b) for b in want]
                checked += 1
        assert checked > 1500
    finally:
        tritonjit.set_backend(None)
        tritonjit.unregister_backend("recording_rules")


def test_native_path_takes_ordinary_calls(recording):
    """The native key does not fall back on ordinary arguments (else it is not a fast path)."""
    f = _fresh(mixed_kernel)
    f._make_state()
    x = FakeTensor(1 << 20, torch.float16)
    for args in [(x, 5, 1, 32, 0.5, 3), (x, 2**40, 2**63 + 1, -7, 1, 2**35), (None, 1, 1, 1, 2.0, 1)]:
        assert f._dispatcher.key(*args, K=8, M=2) is not None, args


def test_no_native_env_selects_the_python_path():
    code = ("import tritonjit, tritonjit._native as n; f = tritonjit.KernelFunction.__mro__;"
            "print(n.available(), n.reason, f[1].__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "TRITONJIT_NO_NATIVE": "1"}).stdout
    assert out.split()[0] == "False" and "TRITONJIT_NO_NATIVE" in out and out.split()[-1] == "object"


def test_dtype_fast_path_follows_changes_to_the_tensor_type(recording):
    """The dispatcher reads ``.dtype`` through the type's C getter while the type is
    unchanged; redefining ``dtype`` on the type must be seen on the next call."""

    class DevTensor(torch.Tensor):
        __torch_function__ = torch._C._disabled_torch_function_impl

        def get_device(self) -> int:
            return 0

    f = _fresh(add_kernel)
    f._make_state()
    x = torch.empty(64).as_subclass(DevTensor)
    key = f._dispatcher.key(x, x, x, 16, BLOCK=64)
    assert key is not None and key[0][0] == "*fp32:16" and key[0] == _python_key(f, x, x, x, 16, BLOCK=64)
    DevTensor.dtype = property(lambda self: torch.float16)
    try:
        key = f._dispatcher.key(x, x, x, 16, BLOCK=64)
        assert key[0][0] == "*fp16:16" and key[0] == _python_key(f, x, x, x, 16, BLOCK=64)
    finally:
        del DevTensor.dtype
    assert f._dispatcher.key(x, x, x, 16, BLOCK=64)[0][0] == "*fp32:16"
    y = torch.empty(64, dtype=torch.int8).as_subclass(DevTensor)  # same type, other dtype
    assert f._dispatcher.key(y, x, x, 16, BLOCK=64)[0][0] == "*i8:16"


@triton.jit
def tuple_kernel(ptrs, n, coef, BLOCK: tl.constexpr):
    pass


def test_tuple_calls_launch_natively_with_their_elements(recording):
    """A tuple argument is keyed in C (the binder's TupleToken) and reaches a launch entry
    that takes tuples (TJ_LAUNCH_F_TUPLES) as TJ_ARG_TUPLE: its elements, nested, each
    digested as a plain argument would be."""
    f = _fresh(tuple_kernel)
    x, y = FakeTensor(1 << 20), FakeTensor(1 << 21)
    f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)  # a miss: compiled through the Python path
    f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)
    (variant,) = f.variants()
    assert variant.native is not None and variant.signature == "(*fp32:16,(*fp32:16,nullopt)),i32,(fp32,i32:1),64"
    assert [c[0] for c in variant.launcher.calls] == ["python", "native"]
    assert variant.launcher.calls[-1][3] == [(8, [(1, x.ptr), (8, [(1, y.ptr), (0, None)])]), (2, 100),
                                             (8, [(4, 2.0), (2, 1)]), (6, 64)]
    f[(2,)]((y, (x, None)), 100, (0.5, 1), BLOCK=64)  # other values, the same variant
    assert variant.launcher.calls[-1][0] == "native"
    assert variant.launcher.calls[-1][3][0] == (8, [(1, y.ptr), (8, [(1, x.ptr), (0, None)])])
    assert variant.launcher.calls[-1][3][2] == (8, [(4, 0.5), (2, 1)])
    launch = f.bind((2,), (x, (y, None)), 100, (2.0, 1), BLOCK=64)
    launch((y, (x, None)), 100, (3.0, 1))
    assert variant.launcher.calls[-1][3][2] == (8, [(4, 3.0), (2, 1)])
    assert [c[0] for c in variant.launcher.calls] == ["python"] + ["native"] * 3


def test_tuple_errors_come_from_the_python_path(recording):
    f = _fresh(tuple_kernel)
    x, y = FakeTensor(1 << 20), FakeTensor(1 << 21)
    f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 'ptrs\[1\]\[0\]'.*CPU tensor"):
        f[(2,)]((x, (FakeTensor(4096, device=-1), None)), 100, (2.0, 1), BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 'ptrs\[1\]\[0\]'.*device 0 but 'ptrs\[0\]'"):
        f[(2,)]((FakeTensor(4096, device=1), (x, None)), 100, (2.0, 1), BLOCK=64)
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 'coef'.*element \[1\].*got str"):
        f[(2,)]((x, (y, None)), 100, (2.0, "a"), BLOCK=64)
    assert len(f.variants()) == 1  # caches intact


def test_repeated_tuple_launches_follow_every_element(recording):
    """The launch that repeats the last one reuses its tuple tokens: a call whose tuple
    differs in any element (its value class, alignment, dtype, length, nesting) must get
    its own variant and its own values."""
    f = _fresh(tuple_kernel)
    a, b = FakeTensor(1 << 20), FakeTensor((1 << 20) + 4)
    h = FakeTensor(1 << 21, torch.float16)
    seq = [((a, (a, None)), (2.0, 1)), ((a, (a, None)), (2.0, 1)), ((b, (a, None)), (2.0, 1)),
           ((a, (a, a)), (2.0, 1)), ((h, (a, None)), (2.0, 1)), ((a, (a, None)), (2.0, 16)),
           ((a, (a, None)), (2.0, 2**40)), ((a, (a, None)), (True, 1)), ((a, (a, None)), (2.0,)),
           ((a, ((a,), None)), (2.0, 1)), ((a, (a, None)), (2.0, 1))]
    for rnd in range(2):
        for ptrs, coef in seq:
            variant = f[(1,)](ptrs, 100, coef, BLOCK=64)
            assert variant.signature == f.signature(ptrs, 100, coef, BLOCK=64), (ptrs, coef)
            path, _, _, args = variant.launcher.calls[-1]
            assert path == "native" or rnd == 0
            if path == "native":
                assert args[2] == (8, [_digest(c) for c in coef])
    assert f._dispatcher.stats()["native"] > len(seq)


def test_tuples_take_the_python_path_where_the_launcher_takes_none():
    """A launch entry without TJ_LAUNCH_F_TUPLES never receives a tuple: those calls go
    through the Python path (the backend flattens them there), plain calls stay native."""
    backend = RecordingBackend(name="recording-no-tuples", tuples=False)
    tritonjit.register_backend(backend)
    tritonjit.set_backend("recording-no-tuples")
    try:
        f = _fresh(tuple_kernel)
        x, y = FakeTensor(1 << 20), FakeTensor(1 << 21)
        for _ in range(3):
            f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)
        (variant,) = f.variants()
        assert [c[0] for c in variant.launcher.calls] == ["python"] * 3
        assert variant.launcher.calls[-1][3] == ((x, (y, None)), 100, (2.0, 1))  # whole tuples
        g = _fresh(add_kernel)
        g[(1,)](x, x, x, 16, BLOCK=64)
        g[(1,)](x, x, x, 16, BLOCK=64)
        assert g._dispatcher.stats()["native"] == 1
    finally:
        tritonjit.set_backend(None)
        tritonjit.unregister_backend("recording-no-tuples")


def test_counting_recorder_counts_python_path_launches_without_recording_them():
    # Recorder(keep=False) only counts: the Python path's launches too (a miss, f.run)
    backend = RecordingBackend(name="counting-only", keep=False)
    tritonjit.register_backend(backend)
    tritonjit.set_backend("counting-only")
    try:
        x, y = FakeTensor(1 << 20), FakeTensor(1 << 21)
        f = _fresh(tuple_kernel)
        f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)
        f[(2,)]((x, (y, None)), 100, (2.0, 1), BLOCK=64)
        (variant,) = f.variants()
        assert variant.launcher.calls == [] and variant.launcher.count == 2
        g = _fresh(add_kernel)
        g[(1,)](x, x, x, 16, BLOCK=64)  # a miss: the Python path
        g[(1,)](x, x, x, 16, BLOCK=64)  # the C entry
        g.run(x, x, x, 16, BLOCK=64, grid=(1,))  # the Python path again
        (variant,) = g.variants()
        assert variant.launcher.calls == [] and variant.launcher.count == 3
        assert g._dispatcher.stats()["native"] == 1
    finally:
        tritonjit.set_backend(None)
        tritonjit.unregister_backend("counting-only")


class _StreamCounting(RecordingBackend):
    """The recording backend, counting calls of its Python current_stream hook."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.stream_calls = 0

    @tritonjit.hookimpl
    def current_stream(self, device: int) -> int:
        self.stream_calls += 1
        return 1000 + device


@pytest.mark.parametrize("keep", [False, True])
def test_a_counting_recorder_answers_the_stream_in_c(keep):
    """keep=False (the CPU benchmark of the native path): the stream comes from the launcher's
    C entry, as a vendor's does, not from a Python hook call per launch; keep=True leaves it
    to the hook, whose answer the records show."""
    backend = _StreamCounting(name=f"stream-{keep}", keep=keep)
    tritonjit.register_backend(backend)
    tritonjit.set_backend(f"stream-{keep}")
    try:
        x = FakeTensor(1 << 20)
        g = _fresh(add_kernel)
        for _ in range(5):
            g[(1,)](x, x, x, 16, BLOCK=64)
        assert g._dispatcher.stats()["native"] == 4
        (variant,) = g.variants()
        assert variant.launcher.count == 5
        if keep:
            assert backend.stream_calls >= 4 and {c[2] for c in variant.launcher.calls} == {1000}
        else:
            assert backend.stream_calls <= 1 and variant.launcher.calls == []  # the miss's Python path only
    finally:
        tritonjit.set_backend(None)
        tritonjit.unregister_backend(f"stream-{keep}")


# ---- the hot path's shortcuts: the last variant, the scalar token tables, tp_call ---------------------
@triton.jit
def wide_kernel(X, Y, Out, n,
                i0=2, i1=3, i2=4, i3=5, i4=6, i5=7, i6=8, i7=9, i8=10, i9=11,
                i10=12, i11=13, i12=14, i13=15, i14=16, i15=17, i16=18, i17=19, i18=20, i19=21,
                i20=22, i21=23, i22=24, i23=25, i24=26, i25=27, i26=28, i27=29, i28=30, i29=31,
                alpha=0.5, BLOCK: tl.constexpr = 64):
    pass


def _digest(v: Any) -> tuple:
    """What the recorder holds for one argument (tritonjit_launch.h's kinds)."""
    if isinstance(v, FakeTensor):
        return (1, v.ptr)
    if isinstance(v, bool):
        return (5, int(v))
    if isinstance(v, float):
        return (4, v)
    return (2, v)


def test_repeated_launches_follow_every_argument(recording):
    """The launch that repeats the last one takes a shortcut (no memo search): a call
    that differs in any argument must still get its own variant and its own values, a
    tensor given another data pointer or dtype (same object) included."""
    f = _fresh(add_kernel)
    a, b = FakeTensor(1 << 20), FakeTensor((1 << 20) + 4)  # aligned, unaligned
    h = FakeTensor(1 << 21, torch.float16)
    m = FakeTensor(3 << 20)  # mutated below: new data pointers and dtypes, same object
    seq = [(a, 1000), (a, 1000), (b, 1000), (a, 1), (a, 1000), (h, 1000), (a, 16), (a, 2**40), (a, 1000),
           (m, 1000), ("ptr", (3 << 20) + 2), (m, 1000), ("ptr", 5 << 20), (m, 1000), ("dtype", torch.float16),
           (m, 1000), (m, 7), (a, 7), (a, 1000)]
    for rnd in range(2):
        m.ptr, m.dtype = 3 << 20, torch.float32
        for t, n in seq:
            if t == "ptr":
                m.ptr = n
                continue
            if t == "dtype":
                m.dtype = n
                continue
            variant = f[(1,)](t, a, a, n, BLOCK=64)
            assert variant.signature == f.signature(t, a, a, n, BLOCK=64), (t.ptr, t.dtype, n)
            path, _, _, args = variant.launcher.calls[-1]
            assert path == "native" or rnd == 0  # the first round's misses compile through Python
            if path == "native":
                assert args[:4] == [_digest(t), _digest(a), _digest(a), _digest(n)]
    assert f._dispatcher.stats()["native"] > len(seq)  # the second round is all native


def test_repeated_launches_with_constexprs_and_options(recording):
    """The shortcut compares constexprs and launch options too (equal values that are
    other objects included)."""
    f = _fresh(mixed_kernel)
    x = FakeTensor(1 << 20, torch.float16)
    big = 10**6
    calls = [dict(K=8), dict(K=8), dict(K=16), dict(K=8, M=2), dict(K=8, num_warps=2), dict(K=8, num_warps=4),
             dict(K=8), dict(K=big), dict(K=int(str(big))), dict(K=2.5), dict(K=float("2.5")), dict(K=True),
             dict(K=8, d=1), dict(K=8)]
    for _ in range(2):
        for kw in calls:
            variant = f[(1,)](x, 5, 1, 32, 0.5, 3, **kw)
            key = _python_key(f, x, 5, 1, 32, 0.5, 3, **kw)
            assert f._state.caches[0][key] is variant, kw
    assert f._dispatcher.stats()["native"] >= len(calls)


def test_wide_calls_launch_natively_through_tp_call(recording):
    """A call of more than 30 arguments and keywords is a tuple and a dict in CPython
    (CALL_FUNCTION_EX), as is ``f[grid](*args, **kw)``: bound from them directly (tp_call),
    with the same results as through vectorcall."""
    f = _fresh(wide_kernel)
    x, y, o = FakeTensor(1 << 20), FakeTensor(1 << 21), FakeTensor((1 << 22) + 4)
    ints = tuple(range(100, 130))
    args = (x, y, o, 1000, *ints, 0.25)
    want = f.signature(*args, BLOCK=32)
    for k in range(4):
        variant = f[(2,)](*args, BLOCK=32)
        assert variant.signature == want
        if k:
            assert variant.launcher.calls[-1][3][:35] == [_digest(a) for a in args]
    assert f._dispatcher.stats() == {"native": 3, "python": 1}  # the first: a miss
    # the same call written out (more than 30 arguments: CPython compiles it to a tuple and a dict)
    variant = f[(2,)](x, y, o, 1000, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115,
                      116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 0.25, BLOCK=32)
    assert variant.signature == want and f._dispatcher.stats()["native"] == 4
    # small call sites of the same kernel (defaults), alternating with the wide ones
    small = f.signature(x, y, o, 1000, BLOCK=32)
    for k in range(3):
        assert f[(2,)](x, y, o, 1000, BLOCK=32).signature == small
        assert f[(2,)](*args, **{"BLOCK": 32}).signature == want
        rec = f[(2,)](*args, BLOCK=32, num_warps=2).launcher.calls[-1]
        assert rec[0] == "native" or k == 0  # the first: a miss
        assert rec[3][:35] == ([_digest(a) for a in args] if k else args)
        assert f[(2,)](*args, BLOCK=32, stream=5).launcher.calls[-1][1:3] == ((2, 1, 1), 5)
        assert f[(2,)](*args[:-1], BLOCK=32, alpha=0.75).launcher.calls[-1][3][34] == (4, 0.75)
    assert f._dispatcher.stats()["python"] == 3  # and the first small call and the first num_warps=2
    with pytest.raises(TypeError):
        f[(2,)](*args, **{1: 2})  # not a keyword: the reference path raises
    with pytest.raises(TypeError):
        f[(2,)](*args, BLOCK=32, alpha=0.75)  # alpha twice
    with pytest.raises(TypeError):
        f[(2,)](*args, BLOCK=32, **{f"opt{k}": k for k in range(100)})  # unknown launch options


def test_annotated_parameters_keep_their_tokens(recording):
    """Scalar tokens come from a per-parameter table filled on first use: annotations
    (fixed or remapping) must hold for every class of value, in any order."""
    f = _fresh(mixed_kernel)
    x = FakeTensor(1 << 20, torch.float16)
    values = [3, 16, 1, 2**40, 2**63 + 16, -32, 0.5, True, None]
    rng = random.Random(7)
    for _ in range(200):
        s, q, c = rng.choice(values[:7]), rng.choice(values[:6]), rng.choice(values)
        args = (x, 5, 1, c, s, q)
        try:
            want = f.signature(*args, K=8)
        except Exception:
            continue
        assert f[(1,)](*args, K=8).signature == want, args


def test_binding_edge_cases(recording):
    """Binding without copying (every parameter positional) and the keyword mask: a
    parameter given twice goes to the reference path (which raises), defaults fill in."""
    f = _fresh(add_kernel)
    x = FakeTensor(4096)
    f[(1,)](x, x, x, 16, BLOCK=64)  # a miss
    d = f._dispatcher
    assert d.key(x, x, x, 16, 64) == d.key(x, x, x, 16, BLOCK=64) == d.key(BLOCK=64, n=16, Out=x, Y=x, X=x)
    assert d.key(x, x, x, 16, 64, n=16) is None and d.key(x, x, x, 16, n=16, BLOCK=64) is None
    with pytest.raises(TypeError):
        f[(1,)](x, x, x, 16, 64, n=16)
    with pytest.raises(TypeError):
        f[(1,)](x, x, x, n=16)  # BLOCK missing
    rec = f[(1,)](x, x, x, 16, 64, stream=5).launcher.calls[-1]
    assert rec[0] == "native" and rec[2] == 5
    g = _fresh(mixed_kernel)
    g[(1,)](x, 5, 1, 32, 0.5, 3, K=8)
    assert g._dispatcher.key(x, 5, 1, 32, 0.5, 3, K=8) == g._dispatcher.key(x, 5, 1, 32, 0.5, 3, 8, 4, 7)
    assert g._dispatcher.key(x, 5, 1, 32, 0.5, 3, K=8, d=7)[0] == _python_key(g, x, 5, 1, 32, 0.5, 3, K=8)


# ---- packed launches (TJ_LAUNCH_F_PACKED): the dispatcher packs while it keys ------------------------
@triton.jit
def packing_kernel(P, a, b, c, Q, d, K: tl.constexpr):
    pass


def _device_values(record: tuple, layout: tuple, runtime: tuple) -> list:
    """What a recorded launch hands the device, per kernel parameter: (tj_pack_code, value)
    as the recorder's layout packs it, None for a skipped one; for every path alike."""
    from tritonjit.testing._recording import PACK_SKIP

    path, _, _, args = record
    if path == "packed":
        return list(args)
    if path == "python":  # the launcher's arguments: the runtime parameters' values
        values = dict(zip(runtime, (_digest(v) if v is not None else (0, None) for v in args)))
        args = [values.get(p, (6, None)) for p in range(len(layout))]
    out = []
    for (_, code), (_, v) in zip(layout, args):
        if code == PACK_SKIP:
            out.append(None)
        elif code == 5:  # fp32: the float rounded as the device reads it
            out.append((code, float(torch.tensor(v, dtype=torch.float32))))
        else:
            out.append((code, int(v)))
    return out


def _run_packing_calls(backend: RecordingBackend, calls: list, kernel: Any = packing_kernel,
                       **constexprs: Any) -> tuple[list, list]:
    """Each call's device values and the path it took, ``kernel[(1,)](*args, **constexprs)``
    on ``backend`` (packing_kernel with K=4 by default)."""
    constexprs = constexprs or {"K": 4}
    with installed_as_current(backend):
        f = _fresh(kernel)
        got, paths = [], []
        for args in calls:
            variant = f[(1,)](*args, **constexprs)
            rec = variant.launcher.calls[-1]
            layout = tritonjit.testing.pack_layout(variant.signature, variant.compiled.runtime_params)
            assert layout is not None
            got.append(_device_values(rec, layout, variant.compiled.runtime_params))
            paths.append(rec[0])
        return got, paths


def test_packed_launches_hand_the_device_what_tj_args_do():
    """A launcher that takes packed buffers gets, call for call, the bytes a launcher
    packing the tj_args itself makes: over pointers (aligned or not), ints of every class
    (1, divisible, i64, u64), floats (fp32 rounding), bools and None, repeated keys (packed)
    and new ones (not)."""
    rng = random.Random(7)
    ptrs = [FakeTensor(1 << 20), FakeTensor((1 << 20) + 4), FakeTensor(1 << 21), FakeTensor(3 << 20)]
    ints = [1000, 1001, 16, 1, -5, 2**40, 2**40 + 3, 2**63 + 5]
    floats = [0.1, 1.5, -2.25e-3, 3.0e38, 1e-45]
    calls = []
    for _ in range(300):
        if calls and rng.random() < 0.5:  # many calls repeat the last key with other values
            p, a, b, c, q, d = calls[-1]
            calls.append((rng.choice(ptrs[:1] + ptrs[2:]) if p.ptr % 16 == 0 else p, a + 16 if 0 < a < 2**31 - 32
                          and a % 16 else a, rng.choice(floats), c, q, d))
            continue
        calls.append((rng.choice(ptrs), rng.choice(ints), rng.choice(floats), rng.choice([True, False]),
                      rng.choice([None, ptrs[0], ptrs[1]]), rng.choice(ints[:6])))
    packed, packed_paths = _run_packing_calls(RecordingBackend("rec-packed", packed=True), calls)
    plain, plain_paths = _run_packing_calls(RecordingBackend("rec-plain"), calls)
    assert packed == plain
    assert "packed" not in plain_paths
    assert packed_paths.count("packed") > 100, packed_paths  # the repeated keys


def test_annotated_kernels_launch_packed_where_the_values_fit():
    """An annotation fixes a parameter's token whatever its value (``s: tl.float32`` given
    an int, ``q: tl.int64``): the same key no longer says the value fits its slot, so the
    dispatcher checks those values. A repeated call whose annotated values fit launches
    packed; one whose float parameter gets an int hands tj_args to the launcher, which
    converts it. Either way the device gets what a launcher packing tj_args gives it."""
    x = FakeTensor(1 << 20)
    sq = [(1.5, 9), (1.5, 9), (1.5, 9), (2, 9), (1.5, 2**40), (-0.25, -3), (3, 2**40), (0.5, 2**40 + 16)]
    calls = [(x, 3, 5, 7, s, q) for s, q in sq]
    packed, packed_paths = _run_packing_calls(RecordingBackend("rec-packed-ann", packed=True), calls, mixed_kernel, K=2)
    plain, _ = _run_packing_calls(RecordingBackend("rec-plain-ann"), calls, mixed_kernel, K=2)
    assert packed == plain
    # a miss (Python), then a native launch that sets the layout to pack by; a float for s
    # fits and packs; an int for s is keyed alike (fp32) but does not fit: tj_args. q's
    # 2**40 is another key (i64:16): a miss, then each key's repeats pack.
    assert packed_paths == ["python", "native", "packed", "native", "python", "packed", "native", "packed"]


def test_packed_recorder_offers_no_layout_for_tuples():
    """A variant with a tuple parameter has no packed layout (its device leaves are not
    one slot per parameter): its calls hand over tj_args, tuples included."""
    backend = RecordingBackend("rec-packed-tuples", packed=True)
    with installed_as_current(backend):
        f = _fresh(tuple_kernel)
        x, y = FakeTensor(1 << 20), FakeTensor(1 << 21)
        for _ in range(3):
            variant = f[(1,)]((x, y), 1000, (0.5, 3), BLOCK=64)
        assert tritonjit.testing.pack_layout(variant.signature, variant.compiled.runtime_params) is None
        assert [c[0] for c in variant.launcher.calls] == ["python", "native", "native"]


class _Reentrant(FakeTensor):
    """A tensor whose data_ptr() launches the same kernel with other arguments: Python
    code run while the dispatcher keys (and packs) a call, which fills the memo anew."""

    f: Any = None
    depth = 0

    def data_ptr(self) -> int:
        if _Reentrant.depth == 0 and _Reentrant.f is not None:
            _Reentrant.depth += 1
            try:
                for n in (3, 16, 2**40 + 1, 2**40, -7, 2**63 + 1):  # more new variants than the memo holds
                    _Reentrant.f[(1,)](FakeTensor(1 << 22), n, 0.25, True, None, 7, K=4)
            finally:
                _Reentrant.depth -= 1
        return self.ptr


def test_packed_launches_survive_python_run_while_keying():
    """The layout a call packs by is the last launch's: a launch from inside the keying
    (Python code) may replace that memo entry. The call must then launch with tj_args,
    or by a layout still alive, and hand the device its own values either way."""
    backend = RecordingBackend("rec-packed-reentrant", packed=True)
    with installed_as_current(backend):
        try:
            f = _fresh(packing_kernel)
            _Reentrant.f = f
            q = _Reentrant(5 << 20)
            plain = FakeTensor(1 << 20)
            for n in (100, 100, 101, 102):
                f[(1,)](plain, n, 1.5, False, q, 9, K=4)
                outer = [v for v in f.variants() if v.signature.endswith("i32,4") and "*fp32:16,i32,fp32,u1,*fp32:16" in
                         v.signature]
                (variant,) = outer
                rec = variant.launcher.calls[-1]
                layout = tritonjit.testing.pack_layout(variant.signature, variant.compiled.runtime_params)
                got = _device_values(rec, layout, variant.compiled.runtime_params)
                assert got[0] == (1, 1 << 20) and got[1] == (2, n) and got[4] == (1, 5 << 20) and got[5] == (2, 9), rec
            assert len(f.variants()) == 6  # the outer call's and five of the inner ones' (-7 is 3's class)
        finally:
            _Reentrant.f = None


@pytest.mark.parametrize("bad", [(4000, 2), (2112 - 8, 2), (0, 9)], ids=["past-the-buffer", "no-room-to-spill",
                                                                        "unknown-code"])
def test_a_launchers_bad_layout_is_never_packed_by(bad):
    """The dispatcher checks a launcher's layout once (tj_pack_layout_ok) before it writes
    by it: a slot past its buffer or of an unknown code makes it hand over tj_args."""
    def layout(signature: str, runtime_params: Any) -> tuple:
        good = tritonjit.testing.pack_layout(signature, runtime_params)
        return (bad, *good[1:])

    backend = RecordingBackend("rec-bad-layout", layout=layout)
    with installed_as_current(backend):
        f = _fresh(add_kernel)
        x = FakeTensor(1 << 20)
        for n in (1000, 1001, 1002):
            variant = f[(1,)](x, x, x, n, BLOCK=64)
        assert [c[0] for c in variant.launcher.calls] == ["python", "native", "native"]
        assert variant.launcher.calls[-1][3][3] == (2, 1002)


def test_packed_launches_with_equal_constexprs_of_other_objects():
    """A constexpr computed per call (``BLOCK=int(s)``: a new int object each time), another
    call site's literal, or a bound launcher's own objects key to the same variant by
    equality, not identity: those calls launch packed too, with their own values."""
    backend = RecordingBackend("rec-packed-equal", packed=True)
    with installed_as_current(backend):
        f = _fresh(add_kernel)
        x, y, o = FakeTensor(1 << 20), FakeTensor(1 << 21), FakeTensor(1 << 22)
        f[(1,)](x, y, o, 1000, BLOCK=int("1024"))
        for n in (1001, 1002, 1003):
            f[(1,)](x, y, o, n, BLOCK=int("1024"))
        bound = f.bind((1,), x, y, o, 1000, BLOCK=int("1024"))
        for n in (1004, 1005):
            bound(x, y, o, n)
        (variant,) = f.variants()
        calls = variant.launcher.calls
        assert [c[0] for c in calls] == ["python", "native", "packed", "packed", "packed", "packed"]
        assert [c[3][3] for c in calls[2:]] == [(2, n) for n in (1002, 1003, 1004, 1005)]
