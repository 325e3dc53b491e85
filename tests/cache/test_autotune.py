"""@triton.autotune / @triton.heuristics through tritonjit.function.

On the interpreter: tuning skipped, first config, heuristics, callable grid gets the
config's meta-parameters. The tuning logic itself runs with tuning forced on for the
interpreter and a fake timer (no timed test): the fastest config wins, pruning,
reset_to_zero / restore_value effects, memory and disk persistence, TRITONJIT_AUTOTUNE=0.
"""

from __future__ import annotations

import contextlib
import json
import os
from types import SimpleNamespace

import pytest
import tritonjit
from tritonjit import BackendInfo, _autotune, hookimpl
from tritonjit._registry import Registry
from tritonjit.interpreter import InterpreterBackend
from tritonjit.testing import installed_as_current

torch = pytest.importorskip("torch")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

CONFIGS = [triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2),
           triton.Config({"BLOCK": 128}, num_warps=4)]


def make_kernels():
    """Fresh kernel objects per test (tritonjit keeps one runtime object per kernel)."""

    @triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["acc"], restore_value=["io"])
    @triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
    @triton.jit
    def accumulate(x, acc, io, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(x + offs, mask=m)
        tl.atomic_add(acc + offs, v, mask=m)  # accumulates: tuning runs must not leak into it
        tl.store(io + offs, tl.load(io + offs, mask=m) + 1.0, mask=m)  # in place: restored after tuning runs
        if EVEN:
            tl.store(x + offs, v, mask=m)

    return accumulate


@pytest.fixture
def interp(caches):
    tritonjit.set_backend("interpreter")
    yield
    tritonjit.set_backend(None)


def _grid_recorder(seen):
    def grid(meta):
        seen.append(dict(meta))
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)
    return grid


def _args(n=256):
    return torch.randn(n), torch.zeros(n), torch.zeros(n)


def test_interpreter_uses_first_config_heuristics_and_grid_meta(interp):
    f = tritonjit.function(make_kernels())
    x, acc, io = _args(256)
    seen = []
    with _autotune.use_timer(lambda call, cfg: pytest.fail("the interpreter must not tune")):
        f[_grid_recorder(seen)](x, acc, io, 256)
    assert len(seen) == 1 and seen[0]["BLOCK"] == 32 and seen[0]["num_warps"] == 1 and seen[0]["EVEN"] is True
    torch.testing.assert_close(acc, x)
    torch.testing.assert_close(io, torch.ones(256))
    assert f.signature(x, acc, io, 100).endswith(",32,False")  # heuristics on n=100
    assert not os.path.isdir(os.path.join(_autotune.cache_root(), "autotune"))


@pytest.fixture
def tuning(interp, monkeypatch):
    """Tuning forced on for the interpreter, timed by a fake clock: BLOCK=64 is fastest."""
    monkeypatch.setattr(_autotune, "tunes_on", lambda backend: True)
    timed = []

    def fake_timer(call, cfg):
        call()
        call()  # a timer runs the kernel repeatedly: hooks must keep the effects from piling up
        timed.append(cfg.kwargs["BLOCK"])
        return {32: 3.0, 64: 1.0, 128: 2.0}[cfg.kwargs["BLOCK"]]

    with _autotune.use_timer(fake_timer):
        yield timed


def test_tuning_picks_fastest_and_hooks_reset_and_restore(tuning):
    f = tritonjit.function(make_kernels())
    x, acc, io = _args(256)
    seen = []
    f[_grid_recorder(seen)](x, acc, io, 256)
    assert tuning == [32, 64, 128]
    assert seen[-1]["BLOCK"] == 64 and seen[-1]["num_warps"] == 2  # the real launch uses the best config
    torch.testing.assert_close(acc, x)  # reset_to_zero: 6 tuning launches left no trace
    torch.testing.assert_close(io, torch.ones(256))  # restore_value: incremented once, by the real launch
    f[_grid_recorder(seen)](x, acc, io, 256)
    assert tuning == [32, 64, 128], "the same key must not be tuned again"
    x2, acc2, io2 = _args(512)
    f[_grid_recorder(seen)](x2, acc2, io2, 512)  # a new key value: tuned again
    assert tuning == [32, 64, 128] * 2


def test_launch_kwargs_is_the_tuned_launchs_keyword_set_for_the_plain_kernel(tuning):
    """launch_kwargs(): the tuned config and the heuristics a launch would use (tuning
    once, as a launch would, launching nothing else); the plain kernel launched with them
    computes what the tuned launch does."""
    tuned = make_kernels()
    f = tritonjit.function(tuned)
    x, acc, io = _args(200)
    grid = _grid_recorder([])
    kw = f.launch_kwargs(grid, x, acc, io, 200)
    assert tuning == [32, 64, 128]
    assert kw["BLOCK"] == 64 and kw["num_warps"] == 2 and kw["EVEN"] is False  # 200 % 64 != 0
    torch.testing.assert_close(acc, torch.zeros(200))  # tuning runs left no trace; nothing else ran
    torch.testing.assert_close(io, torch.zeros(200))
    assert f.launch_kwargs(grid, x, acc, io, 200, stream=0) == kw and tuning == [32, 64, 128]  # no second tuning
    plain = tritonjit.function(tuned.fn.fn)  # the kernel under @autotune and @heuristics
    assert plain.launch_kwargs(grid, x, acc, io, 200, BLOCK=64) == {"BLOCK": 64}  # nothing to resolve
    plain[(triton.cdiv(200, kw["BLOCK"]),)](x, acc, io, 200, **kw)
    torch.testing.assert_close(acc, x)
    torch.testing.assert_close(io, torch.ones(200))


def test_best_config_persists_on_disk_for_the_next_process(tuning):
    kernel = make_kernels()
    x, acc, io = _args(256)
    tritonjit.function(kernel)[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](x, acc, io, 256)
    (store,) = [n for n in os.listdir(os.path.join(_autotune.cache_root(), "autotune")) if n.endswith(".json")]
    with open(os.path.join(_autotune.cache_root(), "autotune", store)) as fh:
        data = json.load(fh)
    (rec,) = data["entries"].values()
    assert rec["config"]["BLOCK"] == 64 and rec["index"] == 1 and data["device"].startswith("interpreter")
    # a new process: a fresh Tuner for an identical kernel reads the choice instead of tuning
    _autotune._tuners.clear()
    seen = []
    tritonjit.function(make_kernels())[_grid_recorder(seen)](x, acc, io, 256)
    assert tuning == [32, 64, 128] and seen[-1]["BLOCK"] == 64


def test_autotune_off_uses_stored_else_first(tuning, monkeypatch):
    monkeypatch.setenv("TRITONJIT_AUTOTUNE", "0")
    seen = []
    x, acc, io = _args(256)
    tritonjit.function(make_kernels())[_grid_recorder(seen)](x, acc, io, 256)
    assert tuning == [] and seen[-1]["BLOCK"] == 32  # nothing stored: first config
    monkeypatch.delenv("TRITONJIT_AUTOTUNE")
    _autotune._tuners.clear()
    tritonjit.function(make_kernels())[_grid_recorder(seen)](x, acc, io, 256)  # tunes and stores
    monkeypatch.setenv("TRITONJIT_AUTOTUNE", "0")
    _autotune._tuners.clear()
    tritonjit.function(make_kernels())[_grid_recorder(seen)](x, acc, io, 256)
    assert tuning == [32, 64, 128] and seen[-1]["BLOCK"] == 64  # stored config, no tuning


def test_pruning_early_prune_and_perf_model():
    pruned_seen = []

    def early(configs, nargs, **kw):
        pruned_seen.append(sorted(nargs))
        return [c for c in configs if c.kwargs["BLOCK"] != 32]

    def perf_model(**kw):
        return {64: 5.0, 128: 1.0, 32: 0.0}[kw["BLOCK"]]

    at = triton.autotune(configs=CONFIGS, key=["n"],
                         prune_configs_by={"early_config_prune": early, "perf_model": perf_model, "top_k": 1})(
        make_kernels().fn.fn)
    kept = _autotune.prune(at, {"x": 1, "n": 8}, {})
    assert [c.kwargs["BLOCK"] for c in kept] == [128] and pruned_seen == [["n", "x"]]
    empty = triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"early_config_prune": lambda c, a, **k: []})(
        make_kernels().fn.fn)
    with pytest.raises(ValueError, match="at least one"):
        _autotune.prune(empty, {}, {})


def test_select_failures_count_as_infinite_and_conflicts_are_errors():
    from tritonjit import CompilationError

    at = make_kernels()
    nargs = {"x": 0, "acc": torch.zeros(4), "io": torch.zeros(4), "n": 4}

    def launch(current):
        if current["BLOCK"] == 64:
            raise CompilationError("accumulate", "sig", "cuda:90", RuntimeError("out of shared memory"))

    best, timings = _autotune.select(at, at.configs, nargs, {}, launch,
                                     lambda call, cfg: (call(), {32: 2.0, 64: 0.1, 128: 1.0}[cfg.kwargs["BLOCK"]])[1])
    assert best.kwargs["BLOCK"] == 128 and timings[1] == float("inf")
    with pytest.raises(ValueError, match="conflicting meta-parameters BLOCK"):
        _autotune.select(at, at.configs, nargs, {"BLOCK": 32}, launch, lambda call, cfg: 1.0)


def test_tuning_key_is_key_values_plus_dtypes():
    at = make_kernels()
    x = torch.zeros(4, dtype=torch.float16)
    key = _autotune.tuning_key(at, (x, torch.zeros(4), torch.zeros(4), 4), {})
    assert key == (4, "torch.float16", "torch.float32", "torch.float32")


def test_passing_a_tuned_parameter_is_a_clear_error(tuning):
    f = tritonjit.function(make_kernels())
    x, acc, io = _args(64)
    with pytest.raises(tritonjit.ArgumentError, match="accumulate.*BLOCK"):
        f[(1,)](x, acc, io, 64, BLOCK=64)


# ---- key buckets (tritonjit.function(kernel, key_buckets=...)) ------------------------------------------
LOG2 = {"n": "log2"}


def _launch(f, n, seen):
    x, acc, io = _args(n)
    f[_grid_recorder(seen)](x, acc, io, n)
    return acc, x


def test_key_buckets_one_tuning_per_bucket(tuning):
    f = tritonjit.function(make_kernels(), key_buckets=LOG2)
    seen = []
    acc, x = _launch(f, 200, seen)
    assert tuning == [32, 64, 128] and seen[-1]["BLOCK"] == 64
    torch.testing.assert_close(acc, x)
    _launch(f, 256, seen)  # 200 and 256 are both in the 256 bucket: tuned once
    _launch(f, 129, seen)
    assert tuning == [32, 64, 128] and seen[-1]["BLOCK"] == 64 and seen[-1]["n"] == 129
    _launch(f, 257, seen)  # the 512 bucket: tuned again
    assert tuning == [32, 64, 128] * 2
    assert len(_autotune.tuner_of(f).chosen) == 2


def test_key_buckets_persist_and_are_part_of_the_store_identity(tuning):
    seen = []
    _launch(tritonjit.function(make_kernels(), key_buckets=LOG2), 200, seen)
    folder = os.path.join(_autotune.cache_root(), "autotune")
    (bucketed,) = [n for n in os.listdir(folder) if n.endswith(".json")]
    with open(os.path.join(folder, bucketed)) as fh:
        assert list(json.load(fh)["entries"]) == [repr((256, "torch.float32", "torch.float32", "torch.float32"))]
    # a new process: a fresh Tuner reads the bucket's choice for another n of that bucket
    _autotune._tuners.clear()
    _launch(tritonjit.function(make_kernels(), key_buckets=LOG2), 250, seen)
    assert tuning == [32, 64, 128] and seen[-1]["BLOCK"] == 64
    # the same kernel without buckets, or with another strategy, starts a fresh store
    _launch(tritonjit.function(make_kernels()), 256, seen)
    _launch(tritonjit.function(make_kernels(), key_buckets={"n": lambda v: v // 100}), 256, seen)
    assert tuning == [32, 64, 128] * 3
    assert len([n for n in os.listdir(folder) if n.endswith(".json")]) == 3


def test_key_buckets_callable_strategy(tuning):
    f = tritonjit.function(make_kernels(), key_buckets={"n": lambda v: v >= 256})
    seen = []
    for n in (64, 100, 256, 1000):
        _launch(f, n, seen)
    assert tuning == [32, 64, 128] * 2


def test_key_buckets_bad_input_names_kernel_and_parameter():
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'n' of kernel 'accumulate'.*unknown key bucket "
                       "strategy 'log3'"):
        tritonjit.function(make_kernels(), key_buckets={"n": "log3"})
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'x' of kernel 'accumulate'.*not in the "
                       r"@triton.autotune key \['n'\]"):
        tritonjit.function(make_kernels(), key_buckets={"x": "log2"})
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'n'.*callable"):
        tritonjit.function(make_kernels(), key_buckets={"n": 2})
    with pytest.raises(tritonjit.ArgumentError, match="kernel 'accumulate'.*needs an @triton.autotune"):
        tritonjit.function(make_kernels().fn.fn, key_buckets=LOG2)
    kernel = make_kernels()
    f = tritonjit.function(kernel, key_buckets=LOG2)
    assert tritonjit.function(kernel) is f and tritonjit.function(kernel, key_buckets={"n": "log2"}) is f
    with pytest.raises(tritonjit.ArgumentError, match="accumulate.*already has a runtime object"):
        tritonjit.function(kernel, key_buckets={"n": lambda v: v})


def test_log2_strategy():
    log2 = _autotune.BUCKET_STRATEGIES["log2"]
    assert [log2(v) for v in (1, 2, 3, 4, 5, 1000, 1024, 1025)] == [1, 2, 4, 4, 8, 1024, 1024, 2048]
    assert [log2(v) for v in (0, -3, True, 2.5, None)] == [0, -3, True, 2.5, None]


def test_untuned_fallback_is_the_first_config_that_survives_pruning(tuning, monkeypatch):
    monkeypatch.setenv("TRITONJIT_AUTOTUNE", "0")
    at = triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["acc"], restore_value=["io"],
                         prune_configs_by={"early_config_prune": lambda cs, nargs, **kw: cs[1:]})(
        make_kernels().fn)
    seen = []
    _launch(tritonjit.function(at), 256, seen)
    assert tuning == [] and seen[-1]["BLOCK"] == 64
    monkeypatch.delenv("TRITONJIT_AUTOTUNE")
    one = triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["acc"], restore_value=["io"],
                          prune_configs_by={"early_config_prune": lambda cs, nargs, **kw: cs[2:]})(
        make_kernels().fn)
    _launch(tritonjit.function(one), 256, seen)
    assert tuning == [] and seen[-1]["BLOCK"] == 128  # one config left: used without timing


# ---- device facts come from the backend's hooks, never from its device type ------------------------------
class TimedDevice(InterpreterBackend):
    """The interpreter with the autotuner's device facts as hooks: a benchmarker that
    reads a script of timings, a device name, and a device guard that is recorded."""

    def __init__(self, times: dict[int, float], device_type: str = "cpu") -> None:
        self.times, self.device_type, self.timed, self.guarded = times, device_type, [], []

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name="timed", priority=-200, triton_backend="interpreter", warp_size=1,
                           dispatch_key="CPU", device_type=self.device_type)

    @hookimpl
    def device_guard(self, device: int):
        self.guarded.append(device)
        return contextlib.nullcontext()

    @hookimpl
    def benchmarker(self):
        def bench(fn):
            before = len(self.timed)
            fn()
            assert len(self.timed) == before + 1, "the launch runs through the grid recorder"
            return self.times[self.timed[-1]]
        return bench

    @hookimpl
    def device_name(self, device: int) -> str:
        return f"Timed Device {device}"


class SyncOnly(InterpreterBackend):
    """A 'cuda'-typed backend with only a synchronize hook: the core must not reach for
    torch.cuda or triton.testing, only for the hook."""

    def __init__(self) -> None:
        self.synced: list[int] = []

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name="synconly", triton_backend="interpreter", device_type="cuda")

    @hookimpl
    def synchronize(self, device: int) -> None:
        self.synced.append(device)


def test_configs_are_timed_by_the_backends_benchmarker_and_stored_per_device_name(caches, monkeypatch):
    monkeypatch.setattr(_autotune, "tunes_on", lambda backend: True)
    plugin = TimedDevice({32: 3.0, 64: 1.0, 128: 2.0})
    seen = []

    def grid(meta):
        plugin.timed.append(meta["BLOCK"])
        seen.append(meta["BLOCK"])
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    x, acc, io = _args(256)
    with installed_as_current(plugin):
        tritonjit.function(make_kernels())[grid](x, acc, io, 256)
    assert plugin.timed[:3] == [32, 64, 128] and seen[-1] == 64  # the fastest by the benchmarker
    assert plugin.guarded.count(0) >= 3  # each timing with the tuned device current
    torch.testing.assert_close(acc, x)
    (store,) = [n for n in os.listdir(os.path.join(_autotune.cache_root(), "autotune")) if n.endswith(".json")]
    with open(os.path.join(_autotune.cache_root(), "autotune", store)) as fh:
        device = json.load(fh)["device"]
    assert device.startswith("timed/") and device.endswith("/Timed Device 0")


def test_without_a_benchmarker_the_wall_clock_around_the_synchronize_hook(monkeypatch):
    import triton.testing

    monkeypatch.setattr(triton.testing, "do_bench", lambda *a, **k: pytest.fail("no CUDA branch in the core"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "looked up by device type")
    plugin = SyncOnly()
    backend = Registry().register(plugin)
    assert backend.benchmarker is None and backend.device_name is None
    calls = []
    ms = _autotune.device_timer(backend, object(), 3)(lambda: calls.append(1), None)
    assert ms >= 0.0 and calls and set(plugin.synced) == {3}
    name = _autotune.device_name(backend, 3)
    assert name.startswith("synconly/") and "looked up by device type" not in name


def test_the_autotuners_own_do_bench_comes_first():
    backend = Registry().register(TimedDevice({}))
    at = SimpleNamespace(_do_bench=lambda call, quantiles: [0.25, 0.2, 0.3])
    assert _autotune.device_timer(backend, at, 0)(lambda: None, None) == 0.25
    assert backend.plugin.timed == []
