"""What tritonjit keeps, and for how long (docs/architecture.md, "What each cache keeps").

A runtime object lives as long as its kernel object: ``tritonjit.function(kernel)``
hangs it on the kernel, so kernels made and dropped in a loop (a model rebuilt per
request, a test suite, generated code) do not accumulate their runtime objects,
variants, dispatchers and tuners; ``function(path, name)`` keeps its object as long
as the imported module, i.e. for the process. (The operator library's bounded plan
caches are tested in tests/ops/test_softmax_norm.py.)
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import pytest
import triton
import triton.language as tl

torch = pytest.importorskip("torch")

import _spec_kernels as K  # noqa: E402
import tritonjit  # noqa: E402
from tritonjit import _autotune, _function, _native  # noqa: E402
from tritonjit._variant import module_cache  # noqa: E402

pytestmark = pytest.mark.usefixtures("interpreter_backend")


def body(X, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(X + offs, tl.load(X + offs, mask=m) + 1, mask=m)


def _transient(launch: bool, x: torch.Tensor) -> weakref.ref:
    """A kernel made, wrapped (and launched), then dropped: a weak reference to its
    runtime object."""
    f = tritonjit.function(triton.jit(body))
    if launch:
        f[(1,)](x, 16, BLOCK=16)
    return weakref.ref(f)


def _alive(refs: list) -> int:
    """Runtime objects still alive, not counting the newest one: Triton >= 3.9 keeps the
    last JITFunction of each qualified name in a registry of its own (triton.runtime.jit),
    and a JITFunction holds its runtime object. Bounded: one per kernel name."""
    return sum(r() is not None for r in refs[:-1])


def test_transient_kernels_free_their_runtime_objects():
    x = torch.zeros(16)
    gc.collect()
    before, modules_before = len(_function._instances), len(module_cache)
    refs = [_transient(i % 20 == 0, x) for i in range(2000)]  # 100 of them compiled and launched
    gc.collect()
    assert _alive(refs) == 0
    newest = 1 if refs[-1]() is not None else 0  # see _alive
    assert len(_function._instances) == before + newest
    assert len(module_cache) == modules_before  # hash-less (interpreter) variants are not kept there
    assert torch.equal(x, torch.full((16,), 100.0))


def test_transient_kernels_do_not_grow_memory():
    x = torch.zeros(16)
    for _ in range(10):  # warm whatever is made once per process
        _transient(True, x)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            _transient(True, x)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000, f"200 dropped kernels still hold {grown} bytes"  # they held ~3 MB


def test_a_live_kernel_keeps_its_runtime_object_and_variants():
    x = torch.zeros(16)
    k = triton.jit(body)
    ref = weakref.ref(tritonjit.function(k))
    ref()[(1,)](x, 16, BLOCK=16)
    gc.collect()
    f = tritonjit.function(k)
    assert f is ref() and len(f.variants()) == 1  # the same object, its variants intact


def test_function_of_a_path_lives_as_long_as_its_module():
    ref = weakref.ref(tritonjit.function(K.__file__, "add"))
    gc.collect()
    assert ref() is not None and tritonjit.function(K.__file__, "add") is ref()


def test_transient_autotuned_kernels_free_their_tuners():
    x = torch.zeros(16)
    before = len(_autotune._tuners)

    def one() -> weakref.ref:
        k = triton.heuristics({"BLOCK": lambda args: 16})(triton.jit(body))
        f = tritonjit.function(k)
        f[(1,)](x, 16)
        return weakref.ref(f)

    refs = [one() for _ in range(20)]
    gc.collect()
    assert _alive(refs) == 0 and len(_autotune._tuners) == before


@pytest.mark.skipif(not _native.available(), reason=f"native dispatcher: {_native.reason}")
def test_transient_kernels_on_the_native_path_are_freed():
    from tritonjit.testing import FakeTensor, RecordingBackend

    tritonjit.register_backend(RecordingBackend(name="lifetimes", keep=False))
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("lifetimes")
    try:
        x = FakeTensor(1 << 20)

        def one() -> weakref.ref:
            f = tritonjit.function(triton.jit(body))
            f[(1,)](x, 16, BLOCK=16)
            f[(1,)](x, 16, BLOCK=16)  # the dispatcher's memo now holds the variant
            assert f._dispatcher.stats()["native"] == 1
            return weakref.ref(f)

        refs = [one() for _ in range(300)]
        gc.collect()
        assert _alive(refs) == 0
    finally:
        tritonjit._registry.registry._current = previous
        tritonjit.unregister_backend("lifetimes")

