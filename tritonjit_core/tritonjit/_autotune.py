"""``@triton.autotune`` and ``@triton.heuristics`` through ``tritonjit.function``.

The wrappers are read, not run: their layers (outermost first) become a
:class:`Tuner` that turns a call's arguments into the full keyword set of the
variant to launch. Semantics are Triton's own (3.6 ``Autotuner.run`` /
``Heuristics.run``): the tuning key is the values of the ``key`` arguments plus the
dtypes of the tensor arguments; ``prune_configs_by`` (``early_config_prune``, then
``perf_model`` + ``top_k``) narrows the configs; ``reset_to_zero`` / ``restore_value``
(and user ``pre_hook`` / ``post_hook``) run around every benchmarked launch; a
config that fails to compile or is out of resources times as infinity.

What tritonjit adds: the best config per key is kept in memory and on disk, keyed by
device name, Triton version and the kernel's source hash (which covers its callees),
so the next process does not tune again; configs are timed on the backend's device
by its ``benchmarker`` hook (the CUDA plugin's is ``triton.testing.do_bench``), else
by the wall clock around its ``synchronize`` hook: the core asks the backend for
device facts and never branches on a device type; ``TRITONJIT_AUTOTUNE=0`` never
tunes (stored config, else the first that survives ``early_config_prune``); on the
interpreter tuning is skipped and that first config used; a single config left by
pruning is used without timing, as in Triton.

Opt-in key buckets (``tritonjit.function(kernel, key_buckets={"M": "log2", ...})``)
map the values of named ``key`` arguments before they form the tuning key, so nearby
shapes share one tuned config (FlagGems' LibTuner ``strategy``). A strategy is a name
in :data:`BUCKET_STRATEGIES` (``"log2"``: a positive int rounded up to the next power
of two) or any callable ``value -> hashable``. The bucketing is part of the on-disk
store's identity.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ._disk_cache import atomic_write, cache_root, file_lock, target_str, triton_fingerprint
from ._errors import ArgumentError, BackendError, CompilationError, HookError
from ._timing import no_sync, wall_clock_bench

log = logging.getLogger(__name__)

#: ``timer(call, config) -> milliseconds``; ``call()`` runs one launch with its hooks
Timer = Callable[[Callable[[], None], Any], float]

_local = threading.local()  # .resolved: launches made by the tuner carry full kwargs
_timer_override: Timer | None = None


# ---- policy --------------------------------------------------------------------------------------
def tuning_enabled() -> bool:
    return os.environ.get("TRITONJIT_AUTOTUNE", "1").strip().lower() not in ("0", "false", "no", "off")


def tunes_on(backend: Any) -> bool:
    """Whether configs are benchmarked on this backend (not on the interpreter: its
    timings say nothing about any device)."""
    return backend.name != "interpreter" and backend.info.triton_backend != "interpreter"


@contextlib.contextmanager
def use_timer(timer: Timer | None) -> Iterator[None]:
    """Time configs with ``timer`` in this block (tests inject a fake clock)."""
    global _timer_override
    previous, _timer_override = _timer_override, timer
    try:
        yield
    finally:
        _timer_override = previous


# ---- key buckets ---------------------------------------------------------------------------------------
def _log2_bucket(value: Any) -> Any:
    """A positive int rounded up to the next power of two; anything else unchanged."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return 1 << (value - 1).bit_length()
    return value


#: named bucket strategies of ``key_buckets``
BUCKET_STRATEGIES: dict[str, Callable[[Any], Any]] = {"log2": _log2_bucket}

#: normalized key buckets: parameter name -> (label for the store's identity, function)
KeyBuckets = dict[str, tuple[str, Callable[[Any], Any]]]


def key_buckets_of(kernel_name: str, kernel: Any, spec: Any) -> KeyBuckets | None:
    """Validate ``key_buckets`` against the kernel's ``@triton.autotune`` key(s)."""
    if spec is None:
        return None
    if not hasattr(spec, "items"):
        raise ArgumentError(kernel_name, f"key_buckets must be a dict of key argument -> strategy, got {spec!r}")
    keys = [k for kind, obj in layers_of(kernel) if kind == "autotune" for k in obj.keys]
    if not keys:
        raise ArgumentError(kernel_name, "key_buckets needs an @triton.autotune-wrapped kernel (it buckets the "
                            "autotuner's key)")
    out: KeyBuckets = {}
    for name, strategy in spec.items():
        if name not in keys:
            raise ArgumentError(kernel_name, f"key_buckets names '{name}', which is not in the @triton.autotune "
                                f"key {keys}", str(name))
        if isinstance(strategy, str):
            fn = BUCKET_STRATEGIES.get(strategy)
            if fn is None:
                raise ArgumentError(kernel_name, f"unknown key bucket strategy {strategy!r}; expected one of "
                                    f"{sorted(BUCKET_STRATEGIES)} or a callable value -> hashable", name)
            out[name] = (strategy, fn)
        elif callable(strategy):
            out[name] = (_callable_label(strategy), strategy)
        else:
            raise ArgumentError(kernel_name, f"key bucket strategy must be one of {sorted(BUCKET_STRATEGIES)} or "
                                f"a callable value -> hashable, got {strategy!r}", name)
    return out or None


def _callable_label(fn: Any) -> str:
    """module.qualname of a bucket function, plus a hash of its code when it has one."""
    label = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    code = getattr(fn, "__code__", None)
    if code is not None:
        label += ":" + hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()[:12]
    return label


def bucket_labels(buckets: KeyBuckets | None) -> dict[str, str]:
    return {k: label for k, (label, _) in (buckets or {}).items()}


# ---- the layers ------------------------------------------------------------------------------------
def layers_of(kernel: Any) -> list[tuple[str, Any]]:
    """("autotune", Autotuner) / ("heuristics", Heuristics) wrappers, outermost first."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    out: list[tuple[str, Any]] = []
    obj = kernel
    while not isinstance(obj, JITFunction):
        if isinstance(obj, Heuristics):
            out.append(("heuristics", obj))
        elif isinstance(obj, Autotuner):
            out.append(("autotune", obj))
        obj = getattr(obj, "fn", None)
        if obj is None:
            break
    return out


def tuning_key(at: Any, args: Sequence[Any], kwargs: dict[str, Any], buckets: KeyBuckets | None = None) -> tuple:
    """Triton's key: values of the ``key`` arguments (bucketed where ``buckets`` says),
    then dtypes of tensor arguments."""
    all_args = {**dict(zip(at.arg_names, args, strict=False)), **kwargs}
    named = {k: v for k, v in all_args.items() if k in at.arg_names}
    if buckets:
        key: list[Any] = [buckets[k][1](named[k]) if k in buckets else named[k] for k in at.keys if k in named]
    else:
        key = [named[k] for k in at.keys if k in named]
    for v in named.values():
        if hasattr(v, "dtype"):
            key.append(str(v.dtype))
    return tuple(key)


def prune(at: Any, nargs: dict[str, Any], kwargs: dict[str, Any]) -> list[Any]:
    """``prune_configs_by``: early_config_prune, then the perf model's top_k."""
    configs = list(at.configs)
    if at.early_config_prune:
        configs = list(at.early_config_prune(configs, nargs, **kwargs))
        if not configs:
            raise ValueError("early_config_prune returned no config; it must return at least one")
    if at.perf_model:
        top_k = at.configs_top_k
        if isinstance(top_k, float) and top_k <= 1.0:
            top_k = max(1, int(len(at.configs) * top_k))
        elif not isinstance(top_k, int):
            raise TypeError("prune_configs_by['top_k'] must be a float <= 1.0 or an int")
        if len(configs) > top_k:
            est = {id(c): at.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in configs}
            configs = sorted(configs, key=lambda c: est[id(c)])[:top_k]
    return configs


def select(at: Any, configs: Sequence[Any], nargs: dict[str, Any], kwargs: dict[str, Any],
           launch: Callable[[dict[str, Any]], None], timer: Timer) -> tuple[Any, dict[int, float]]:
    """Benchmark ``configs`` and return (fastest, {config index: ms}).

    Each timed ``call()`` runs the config's pre_hook, the autotuner's pre_hook
    (``reset_to_zero``; snapshot for ``restore_value``), the launch, and the post_hook
    (restore). Afterwards the ``reset_to_zero`` tensors are zeroed once more, so the real
    launch that follows starts from zero, as in Triton.
    """
    timings: dict[int, float] = {}
    for i, cfg in enumerate(configs):
        conflicts = kwargs.keys() & cfg.kwargs.keys()
        if conflicts:
            raise ValueError(f"conflicting meta-parameters {', '.join(sorted(conflicts))}: given as arguments and "
                             "tuned by @triton.autotune; do not pass tuned parameters")
        current = dict(kwargs, **cfg.all_kwargs())
        full = {**nargs, **current}

        def call(cfg: Any = cfg, current: dict = current, full: dict = full) -> None:
            if cfg.pre_hook:
                cfg.pre_hook(full)
            at.pre_hook(full)
            try:
                launch(current)
            except Exception as exc:
                try:
                    at.post_hook(full, exception=exc)
                finally:
                    raise
            at.post_hook(full, exception=None)

        try:
            ms = float(timer(call, cfg))
        except HookError:  # a plugin's bug, not a config that does not fit
            raise
        except (CompilationError, BackendError) as exc:  # does not compile / out of resources
            log.info("autotune config %s failed: %s", cfg, exc)
            ms = math.inf
        except Exception as exc:
            if type(exc).__name__ in ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError"):
                ms = math.inf
            else:
                raise
        timings[i] = ms
    best_i = min(timings, key=lambda i: timings[i])
    if math.isinf(timings[best_i]):
        raise BackendError(f"every autotune config failed to compile or run ({len(configs)} tried)")
    best = configs[best_i]
    at.pre_hook({**nargs, **kwargs, **best.all_kwargs()}, reset_only=True)
    return best, timings


# ---- timing ------------------------------------------------------------------------------------------
def device_timer(backend: Any, at: Any, device: int) -> Timer:
    """The timer of a backend: the autotuner's own ``do_bench`` if it has one, else the
    backend's ``benchmarker``, else wall clock around its ``synchronize``. Each timing
    runs with ``device`` current, as the benchmarker and synchronize expect."""
    user = getattr(at, "_do_bench", None)
    bench: Callable[[Callable[[], None]], Any] | None
    if user is not None:
        bench = lambda call: user(call, quantiles=(0.5, 0.2, 0.8))
    else:
        bench = backend.benchmarker() if backend.benchmarker is not None else None
        if bench is None:
            sync = _synchronize_of(backend, device)
            bench = lambda call: wall_clock_bench(call, sync)
    timed = bench
    guard = backend.device_guard

    def timer(call: Callable[[], None], cfg: Any) -> float:
        with guard(device):
            return _first(timed(call))

    return timer


def _first(x: Any) -> float:
    return float(x[0]) if isinstance(x, (list, tuple)) else float(x)


def _synchronize_of(backend: Any, device: int) -> Callable[[], None]:
    sync = backend.synchronize
    return no_sync if sync is None else lambda: sync(device)


# ---- the on-disk store ----------------------------------------------------------------------------------
class ConfigStore:
    """Best configs of one autotuned kernel on one device, in one JSON file under
    ``<cache root>/autotune``. The file name hashes the device name, Triton's version,
    the kernel's source hash (callees included), the config list, the key names and
    the key buckets: a change to any of them starts a fresh file, never a stale choice."""

    def __init__(self, kernel: str, jit_fn: Any, at: Any, device_name: str,
                 buckets: KeyBuckets | None = None) -> None:
        self.kernel = kernel
        self.device_name = device_name
        ident_fields: dict[str, Any] = {
            "device": device_name, "triton": triton_fingerprint(), "source": jit_fn.cache_key,
            "configs": [_config_json(c) for c in at.configs], "key": list(at.keys),
        }
        labels = {k: v for k, v in bucket_labels(buckets).items() if k in at.keys}
        if labels:  # absent without buckets: stores of unbucketed kernels keep their names
            ident_fields["buckets"] = labels
        ident = json.dumps(ident_fields, sort_keys=True, default=repr)
        self.digest = hashlib.sha256(ident.encode()).hexdigest()[:24]
        self.configs = list(at.configs)

    @property
    def path(self) -> str:
        return os.path.join(cache_root(), "autotune", f"{self.kernel[:80]}-{self.digest}.json")

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            return data if isinstance(data, dict) and isinstance(data.get("entries"), dict) else {"entries": {}}
        except FileNotFoundError:
            return {"entries": {}}
        except (OSError, ValueError) as exc:
            log.warning("ignoring the unreadable autotune store %s (%s)", self.path, exc)
            return {"entries": {}}

    def get(self, key: tuple) -> Any | None:
        """The stored choice for ``key``: the local store first, then the shared remote
        cache (whose choice is then kept locally)."""
        cfg = self._config_of(self._read()["entries"].get(repr(key)))
        if cfg is None:
            cfg = self.remote_get(key)
        return cfg

    def remote_get(self, key: tuple) -> Any | None:
        """The choice another process of the fleet stored in the remote cache, kept locally."""
        from . import _remote_cache

        remote = _remote_cache.active()
        rec = remote.tuned_get(self.digest, repr(key)) if remote is not None else None
        cfg = self._config_of(rec)
        if cfg is not None and rec is not None:
            self._write_local(key, rec)
        return cfg

    def _config_of(self, rec: Any) -> Any | None:
        """The config a record names, if it is one of this kernel's (by index and content)."""
        if not isinstance(rec, dict):
            return None
        i = rec.get("index")
        if isinstance(i, int) and 0 <= i < len(self.configs) and _config_json(self.configs[i]) == rec.get("config"):
            return self.configs[i]
        return None

    def put(self, key: tuple, index: int, timings: dict[int, float]) -> None:
        rec = {
            "index": index, "config": _config_json(self.configs[index]),
            "timings_ms": {str(i): (None if math.isinf(t) else t) for i, t in timings.items()},
            "tuned_at": time.time(),
        }
        self._write_local(key, rec)
        from . import _remote_cache

        remote = _remote_cache.active()
        if remote is not None:
            remote.tuned_put(self.digest, repr(key), rec)

    def _write_local(self, key: tuple, rec: dict[str, Any]) -> None:
        try:
            with file_lock(self.path + ".lock"):
                data = self._read()
                data.update(kernel=self.kernel, device=self.device_name, triton=triton_fingerprint())
                data["entries"][repr(key)] = rec
                atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True).encode())
        except OSError as exc:  # a read-only cache costs a re-tune next time, nothing else
            log.warning("could not store the autotune result of '%s': %s", self.kernel, exc)


def _config_json(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(cfg.all_kwargs(), sort_keys=True, default=repr))


# ---- the tuner of one KernelFunction ------------------------------------------------------------------------
class Tuner:
    """Resolves a call's keyword arguments through the kernel's wrapper layers."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.layers = layers_of(fn.wrapped)
        self.chosen: dict[tuple, Any] = {}  # (autotuner id, backend, device, key) -> Config
        self.timings: dict[tuple, dict[int, float]] = {}
        self._stores: dict[tuple, ConfigStore] = {}
        self._lock = threading.RLock()
        self.tuned = 0  # how many keys were benchmarked by this process

    def resolve(self, args: tuple, kwargs: dict[str, Any], grid: Any = None, stream: Any = None,
                launching: bool = True) -> dict[str, Any]:
        return self._apply(0, args, dict(kwargs), grid, stream, launching)

    def _apply(self, i: int, args: tuple, kwargs: dict[str, Any], grid: Any, stream: Any,
               launching: bool) -> dict[str, Any]:
        if i == len(self.layers):
            return kwargs
        kind, obj = self.layers[i]
        if kind == "heuristics":
            for name, heur in obj.values.items():  # later heuristics see earlier ones, as in Triton
                kwargs[name] = heur({**dict(zip(obj.arg_names, args, strict=False)), **kwargs})
            return self._apply(i + 1, args, kwargs, grid, stream, launching)
        conflicts = kwargs.keys() & {k for c in obj.configs for k in c.kwargs}
        if conflicts:
            raise ArgumentError(self.fn.name, f"conflicting meta-parameters {', '.join(sorted(conflicts))}: "
                                "given as arguments and tuned by @triton.autotune; do not pass tuned parameters")
        cfg = self._config(i, obj, args, kwargs, grid, stream, launching)
        kwargs.update(cfg.all_kwargs())
        if launching and cfg.pre_hook is not None:
            cfg.pre_hook({**dict(zip(obj.arg_names, args, strict=False)), **kwargs})
        return self._apply(i + 1, args, kwargs, grid, stream, launching)

    def _config(self, i: int, at: Any, args: tuple, kwargs: dict[str, Any], grid: Any, stream: Any,
                launching: bool) -> Any:
        if len(at.configs) == 1:
            return at.configs[0]
        state = self.fn._state
        backend = state.backend
        key = tuning_key(at, args, kwargs, self.fn.key_buckets)
        device = self._device(state, args)
        mkey = (id(at), backend.name, device, key)
        cfg = self.chosen.get(mkey)
        if cfg is not None:
            return cfg
        if not tunes_on(backend):  # interpreter: first config that survives pruning, never stored
            cfg = self.chosen[mkey] = self._untuned(at, args, kwargs)
            return cfg
        with self._lock:
            cfg = self.chosen.get(mkey)
            if cfg is not None:
                return cfg
            store = self._store(at, backend, device)
            cfg = store.get(key)
            if cfg is None and (not tuning_enabled() or grid is None or not launching):
                if grid is None or not launching:
                    return self._untuned(at, args, kwargs)  # f.signature(): no launch to time; do not remember
                cfg = self._untuned(at, args, kwargs)
            if cfg is None:
                cfg = self._tune_once(i, at, args, kwargs, key, mkey, store, backend, device, grid, stream)
            self.chosen[mkey] = cfg
            return cfg

    def _untuned(self, at: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        """The config used without tuning: the first that survives pruning."""
        if not at.early_config_prune and not at.perf_model:
            return at.configs[0]
        return prune(at, dict(zip(at.arg_names, args, strict=False)), kwargs)[0]

    def _tune_once(self, i: int, at: Any, args: tuple, kwargs: dict[str, Any], key: tuple, mkey: tuple,
                   store: ConfigStore, backend: Any, device: int, grid: Any, stream: Any) -> Any:
        """Tune, or, with a shared remote cache, let one process of the fleet tune this
        key while the others wait for its choice (the remote cache's single flight)."""
        from . import _remote_cache

        remote = _remote_cache.active()
        if remote is None:
            return self._tune(i, at, args, kwargs, key, mkey, store, backend, device, grid, stream)
        found: list[Any] = []

        def fetch() -> bool:
            cfg = store.remote_get(key)
            if cfg is not None:
                found.append(cfg)
            return cfg is not None

        name = "tune:" + hashlib.sha256(f"{store.digest}:{key!r}".encode()).hexdigest()
        with remote.acquire(name, fetch) as lease:
            if lease.fetched and found:
                return found[0]
            return self._tune(i, at, args, kwargs, key, mkey, store, backend, device, grid, stream)

    def _tune(self, i: int, at: Any, args: tuple, kwargs: dict[str, Any], key: tuple, mkey: tuple,
              store: ConfigStore, backend: Any, device: int, grid: Any, stream: Any) -> Any:
        nargs = dict(zip(at.arg_names, args, strict=False))
        configs = prune(at, nargs, kwargs)
        if len(configs) == 1:  # nothing to compare (Triton does not time it either); not stored
            return configs[0]

        def launch(current: dict[str, Any]) -> None:
            full = self._apply(i + 1, args, dict(current), grid, stream, False)
            with resolved():
                self.fn._run(grid, *args, stream=stream, **full)

        timer = _timer_override or device_timer(backend, at, device)
        t0 = time.perf_counter()
        best, timings = select(at, configs, nargs, kwargs, launch, timer)
        index = next(j for j, c in enumerate(at.configs) if c is best)
        all_timings = {next(j for j, c in enumerate(at.configs) if c is configs[k]): t for k, t in timings.items()}
        self.timings[mkey] = all_timings
        self.tuned += 1
        log.info("autotuned %s: key=%s best=%s (%d configs in %.2fs)", self.fn.name, key, best,
                 len(configs), time.perf_counter() - t0)
        store.put(key, index, all_timings)
        return best

    def _device(self, state: Any, args: tuple) -> int:
        for a in args:
            if hasattr(a, "data_ptr") and hasattr(a, "device"):
                try:
                    return state.device_of(a)
                except Exception:
                    break
        return state.current_device()

    def _store(self, at: Any, backend: Any, device: int) -> ConfigStore:
        skey = (id(at), backend.name, device)
        store = self._stores.get(skey)
        if store is None:
            store = self._stores[skey] = ConfigStore(self.fn.name, self.fn.jit_fn, at, device_name(backend, device),
                                                     self.fn.key_buckets)
        return store


@contextlib.contextmanager
def resolved() -> Iterator[None]:
    """Launches in this block already carry the full keyword set: do not resolve again."""
    previous = getattr(_local, "resolved", False)
    _local.resolved = True
    try:
        yield
    finally:
        _local.resolved = previous


def device_name(backend: Any, device: int) -> str:
    """A name for the device configs were tuned on: the backend, the compile target
    and, where the backend has the ``device_name`` hook, the device's model."""
    parts = [backend.name]
    try:
        parts.append(target_str(backend.compile_target(device, None)))
    except Exception:
        pass
    if backend.device_name is not None:
        try:
            name = backend.device_name(device)
            if name:
                parts.append(str(name))
        except Exception:
            pass
    return "/".join(parts)


#: the Tuner of each live KernelFunction, by id: weak, as the KernelFunction holds its own
#: (``fn._tuner``), so a kernel that is dropped frees its tuner too; removing an entry
#: makes the next call start a fresh Tuner (what a new process would do)
_tuners: weakref.WeakValueDictionary[int, Tuner] = weakref.WeakValueDictionary()
_tuners_lock = threading.Lock()


def tuner_of(fn: Any) -> Tuner:
    tuner = _tuners.get(id(fn))
    if tuner is None or tuner.fn is not fn:
        with _tuners_lock:
            tuner = _tuners.get(id(fn))
            if tuner is None or tuner.fn is not fn:
                tuner = fn._tuner = _tuners[id(fn)] = Tuner(fn)
    return tuner


def meta_kwargs(fn: Any, args: tuple, kwargs: dict[str, Any], grid: Any = None, stream: Any = None) -> dict[str, Any]:
    """KernelFunction._meta_kwargs: the keyword set of the variant a call launches.

    Without a grid (``f.signature``) nothing is tuned or hooked: the remembered or
    stored config, else the first."""
    if getattr(_local, "resolved", False):
        return kwargs
    kw = dict(kwargs)
    s = kw.pop("stream", None)
    out = tuner_of(fn).resolve(args, kw, grid, stream if stream is not None else s, launching=grid is not None)
    if s is not None:
        out["stream"] = s
    return out
