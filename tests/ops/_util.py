"""Shared tolerances and helpers for the operator tests."""
import torch

TOL = {
    torch.float32: dict(rtol=1.3e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
}
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def close(got, ref, dtype=None, **kw):
    tol = dict(TOL.get(dtype or ref.dtype, dict(rtol=0, atol=0)))
    tol.update(kw)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    torch.testing.assert_close(got, ref, equal_nan=True, **tol)


def strided(t):
    """A non-contiguous view with the same values: every other column of a wider tensor."""
    wide = torch.empty(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


# ---- the C++ operator path (tests of planners) ------------------------------------------------
import shutil  # noqa: E402
from typing import Any, Callable, Iterator  # noqa: E402

import pytest  # noqa: E402

#: the C++ operator path is built with the machine's compiler; without one the ops stay on Python
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                               reason="no C++ compiler: the operators stay on their Python kernels")


def native_ops_or_skip() -> Any:
    """tritonjit_ops._native_ops once its C++ module is built; the test skips where it cannot be."""
    from tritonjit_ops import _native_ops

    if _native_ops.module(wait=True) is None:
        pytest.skip(f"C++ operator path: {_native_ops.native().reason}")
    return _native_ops


def native_ops_disabled() -> Iterator[Any]:
    """A module fixture's body: tritonjit_ops._native_ops (skipping where it cannot be built),
    with enable() off before the module's tests and after them."""
    import tritonjit_ops as T

    native = native_ops_or_skip()
    T.disable()
    yield native
    T.disable()


def native_ops_enabled() -> Iterator[Any]:
    """A module fixture's body: tritonjit_ops._native_ops (skipping where it cannot be built),
    with enable() on, its calls on the C++ path, for the module's tests."""
    import tritonjit_ops as T

    native = native_ops_or_skip()
    with T.enable(wait_native=True):
        assert T._registry.native_path() == "C++"
        yield native


def index_checks_as_on_a_device(monkeypatch: Any, *, kernel_asserts: bool = False) -> Iterator[None]:
    """A fixture's body: ``host_check_allowed`` answers as on a device in every tritonjit_ops
    module that asks it (index values are checked by the kernels, not read on the host), so
    the planners plan as they do there. The C++ path's plans made before (with host checks)
    and during (without) are forgotten, so neither kind serves a call of the other. With
    ``kernel_asserts`` Triton's interpreter honours the kernels' device asserts, as a kernel
    compiled with debug=True does on a GPU."""
    import importlib
    import pkgutil

    import tritonjit_ops
    from tritonjit_ops import _common, _native_ops

    for info in pkgutil.iter_modules(tritonjit_ops.__path__):
        mod = importlib.import_module(f"tritonjit_ops.{info.name}")
        if hasattr(mod, "host_check_allowed"):
            monkeypatch.setattr(mod, "host_check_allowed", lambda t: False)
    if kernel_asserts:
        import triton.runtime.interpreter as interp

        monkeypatch.setattr(interp.interpreter_builder, "options", interp.InterpreterOptions(**_common.DEVICE_ASSERT))
    _native_ops.clear_plans()
    yield
    _native_ops.clear_plans()


def bench_module(stem: str) -> Any:
    """benchmarks/<stem>.py imported as a module (the benchmarks folder is no package), once per
    process: tests use its cases and entry points."""
    import importlib.util
    import sys
    from pathlib import Path

    name = f"tritonjit_bench_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
    return sys.modules[name]


def stats_delta(before: dict, after: dict) -> dict:
    """The C++ path's counters (plan_hits, python_calls, launches, ...) between two stats()."""
    return {k: after[k] - before[k] for k in after}


def launch_arg(L: Any, name: str) -> Any:
    """What a plan's Launch ``L`` passes for its kernel's parameter ``name`` (constexprs too)."""
    return L.args[[p.name for p in L.fn.params].index(name)]


def routed(fn: Callable[[], Any], ops: list[str]) -> tuple[Any, dict]:
    """fn() under enable(include=ops), its second call (the first made the plans), and the
    C++ path's counters of that call."""
    import tritonjit_ops as T
    from tritonjit_ops import _native_ops

    with T.enable(include=ops, wait_native=True):
        fn()
        before = _native_ops.stats()
        got = fn()
        d = stats_delta(before, _native_ops.stats())
    return got, d


# ---- tiny transformers models (test_models_more.py, test_models_wider.py) -----------------------
def tiny_model(model_cls: str, cfg_cls: str, kw: dict, attn: str) -> Any:
    """transformers' ``model_cls`` from ``cfg_cls(**kw)`` with random weights (seed 0) and the
    attention implementation ``attn``; the test skips where the installed transformers
    lacks the class or that implementation."""
    import warnings

    import torch

    tf = pytest.importorskip("transformers")
    if not hasattr(tf, model_cls) or not hasattr(tf, cfg_cls):
        pytest.skip(f"transformers {tf.__version__} has no {model_cls}")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = getattr(tf, cfg_cls)(**kw)
        cfg._attn_implementation = attn
        try:
            return getattr(tf, model_cls)(cfg)
        except ValueError as e:  # an architecture without that attention implementation
            pytest.skip(str(e)[:120])


def aten_arange(*args: Any, **kw: Any) -> torch.Tensor:
    """torch.arange, except where torch before 2.13 divides by zero and kills the process
    (int64 with a step that truncates to 0): there, the ValueError that later versions raise."""
    from tritonjit_ops import copy as C

    step = args[2] if len(args) == 3 else 1
    if C._ARANGE_DIVIDES_BY_ZERO and kw.get("dtype") == torch.int64 and int(step) == 0:
        raise ValueError("step must be nonzero")
    return torch.arange(*args, **kw)


# ---- SDPA call layouts in turn (DiffLlama's and Llama's; the GPU's SDPA-backward defect) -------
#: (two calls sharing query and key, query laid out (B, S, H, D)), each case twice
SDPA_LAYOUT_CASES = [(False, False), (True, False), (True, True), (False, True)] * 2


def sdpa_layout_calls(base: list, two: bool, q_bshd: bool, g: torch.Generator) -> list[tuple]:
    """(q, k, v, do) of each SDPA call of one case, from ``base``: four (B, S, H, D) tensors.
    q, k, v contiguous (B, H, S, D), q a (B, S, H, D) view where ``q_bshd``; one call whose
    gradient is base[3] seen (B, H, S, D), or two calls with their own values sharing q and k
    whose gradients are the halves of one (B, S, H, 2D) tensor (DiffLlama concatenates them)."""
    q, k, v1, v2 = (t.clone().transpose(1, 2).contiguous() for t in base)
    if q_bshd:
        q = base[0].clone().transpose(1, 2)
    if not two:
        return [(q, k, v1, base[3].transpose(1, 2))]
    b, s, h, d = base[0].shape
    up = torch.randn(b, s, h, 2 * d, generator=g).to(device=base[0].device, dtype=base[0].dtype)
    return [(q, k, v1, up[..., :d].transpose(1, 2)), (q, k, v2, up[..., d:].transpose(1, 2))]
