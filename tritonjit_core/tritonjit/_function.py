"""``tritonjit.function``: one cached runtime object per kernel, and the launch path.

The hot path is ``KernelFunction._run``: bind -> key -> variant lookup -> launch,
with everything that can be precomputed (binder, backend functions, argument
selection) done once per function, backend and variant. A miss goes to ``_miss``,
which compiles, loads and prepares, and inserts into the cache only when all of
that succeeded, so bad input never leaves a broken entry behind.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import _autotune, _frozen, _native
from ._backend import Backend, CompiledVariant, call_hook, checked_index, launch_hook
from ._compiler import compile_variant, known_options, parse_target
from ._errors import ArgumentError, BackendError, GridError, HookError, TritonJITError
from ._loader import load_kernel
from ._registry import registry
from ._signature import Param, Slot, parse, render, slot_from_token, static_signature
from ._specialize import SpecializationFailure, make_binder
from ._variant import Variant, make_variant

log = logging.getLogger(__name__)

_GRID_EXPECTED = "a tuple of 1 to 3 ints >= 1 (or a callable returning one)"
_SCALARS = frozenset((int, float, bool, type(None)))


def nested_tensors(a: Any, where: str = "") -> list[tuple[Any, str]]:
    """(tensor, where) inside a tuple argument (``where``: ``[1][0]``) or a tensor
    descriptor (its base, ``.base``); empty for anything else."""
    if isinstance(a, tuple):
        out = []
        for i, x in enumerate(a):
            c = x.__class__
            if c in _SCALARS:  # first: a scalar misses data_ptr at some cost
                continue
            if c is not tuple and getattr(x, "data_ptr", None) is not None:
                out.append((x, f"{where}[{i}]"))
            else:
                out.extend(nested_tensors(x, f"{where}[{i}]"))
        return out
    base = getattr(a, "base", None)
    if getattr(base, "data_ptr", None) is not None and getattr(a, "block_shape", None) is not None:
        return [(base, f"{where}.base")]
    return []


class _State:
    """Per (function, backend): the binder and one variant cache per device."""

    __slots__ = ("backend", "binder", "caches", "current_device", "current_stream", "device_of", "runtime_index",
                 "grid_limits")

    def __init__(self, backend: Backend, binder: Callable, runtime_index: tuple[int, ...] = ()) -> None:
        self.backend = backend
        self.binder = binder
        self.caches: dict[int, dict[Any, Variant]] = {}
        self.current_device = backend.current_device
        self.current_stream = backend.current_stream
        self.device_of = backend.device_of
        self.runtime_index = runtime_index  # parameters that may hold tensors
        self.grid_limits = backend.info.grid_limits  # (x, y, z) maxima, checked on every launch


class KernelFunction(_native.KernelBase):
    """A Triton kernel driven by tritonjit. Get one with :func:`tritonjit.function`.

    ``f[grid](*args, num_warps=.., num_stages=.., stream=.., **constexprs)`` launches;
    ``f.bind(grid, *args, **kw)`` returns a launcher taking only the runtime args;
    ``f.signature(*args)`` renders the variant a call would use; ``f.compile(sig,
    target=...)`` compiles one without any device.

    With the native accelerator built, ``f[grid]`` is served by its C base class
    (tritonjit/_native) and reaches ``_run`` only for what C does not handle.
    """

    def __init__(self, kernel: Any, origin: str | None = None, key_buckets: Any = None) -> None:
        self.wrapped = kernel
        self.jit_fn, self._heuristics, self._autotune_configs = _unwrap(kernel)
        self.name: str = self.jit_fn.fn.__name__
        #: autotune key buckets (``tritonjit.function(..., key_buckets=...)``), normalized
        self.key_buckets = _autotune.key_buckets_of(self.name, kernel, key_buckets)
        self.origin = origin
        self.params: list[Param] = static_signature(self.jit_fn)
        self._param_names = [p.name for p in self.params]
        self._state: _State | None = None
        self._dispatcher = None  # the native dispatcher of the current state, if any
        self._lock = threading.RLock()

    # ---- launching ---------------------------------------------------------------------
    if TYPE_CHECKING:  # the C base class serves it, else _py_getitem (installed below)
        def __getitem__(self, grid: Any) -> Callable[..., Any]: ...

    def _py_getitem(self, grid: Any) -> Callable[..., Any]:
        """``f[grid]`` of the Python path (the C base calls it when it has no dispatcher)."""
        return functools.partial(self._run, grid)

    def bind(self, grid: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        """A launcher for hot loops: grid, constexprs, options and ``stream=`` fixed now;
        call it with the runtime (non-constexpr) arguments, positionally, in order.

        Each call still specializes its arguments: a call whose arguments select another
        variant (an unaligned pointer, an int equal to 1) launches that variant."""
        state = self._state
        if state is None or state.backend is not registry._current:
            state = self._make_state()
        if not callable(grid):  # a fixed grid is refused now, not at the first launch
            self._checked_grid(self._grid_from_callable(grid, (), {}), state.backend)
        if self._heuristics is not None or self._autotune_configs is not None:
            kwargs = self._meta_kwargs(args, kwargs, grid)
        stream = kwargs.pop("stream", None)
        _, bound, options = self._bind(state, args, kwargs)
        dispatcher = self._dispatcher
        if dispatcher is not None:
            if stream is not None:
                kwargs["stream"] = stream
            return dispatcher.bind(grid, *args, **kwargs)
        return BoundLaunch(self, grid, bound, options, stream)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch with an explicit ``grid=`` keyword (like Triton's ``run``)."""
        return self._run(grid, *args, **kwargs)

    def _run(self, grid: Any, *args: Any, stream: int | None = None, **kwargs: Any) -> Variant:
        state = self._state
        if state is None or state.backend is not registry._current:
            state = self._make_state()
        if self._heuristics is not None or self._autotune_configs is not None:
            kwargs = self._meta_kwargs(args, kwargs, grid, stream)
        key, bound, options = self._bind(state, args, kwargs)
        device = self._launch_device(state, bound)
        cache = state.caches.get(device)
        try:
            variant = cache[key]  # type: ignore[index]
        except (KeyError, TypeError):
            variant = self._miss(state, device, key, bound, options)
        if grid.__class__ is not tuple:
            grid = self._grid_from_callable(grid, bound, options)
        n = len(grid)
        g0 = grid[0] if n else 0
        g1 = grid[1] if n > 1 else 1
        g2 = grid[2] if n > 2 else 1
        mx, my, mz = state.grid_limits
        if not (n <= 3 and g0.__class__ is int and g1.__class__ is int and g2.__class__ is int
                and 0 < g0 <= mx and 0 < g1 <= my and 0 < g2 <= mz):
            g0, g1, g2 = self._checked_grid(grid, state.backend)
        try:
            here = state.current_device()
        except Exception as exc:
            raise HookError.raised(state.backend.name, "current_device", exc, self.name) from exc
        if here.__class__ is not int or here < 0:
            here = checked_index(state.backend, "current_device", here, self.name)
        if device == variant.device and device == here:
            self._launch(state, variant, (g0, g1, g2), device, stream, bound)
        else:  # tensors on a device other than the current one
            with call_hook(state.backend, "device_guard", device, kernel=self.name):
                self._launch(state, variant, (g0, g1, g2), device, stream, bound)
        return variant

    def _launch(self, state: _State, variant: Variant, grid: tuple[int, int, int], device: int, stream: Any,
                bound: tuple) -> None:
        """The stream (the backend's current one unless given), then the variant's
        launcher. What a hook raises, or a stream handle that is no int >= 0, becomes
        a HookError naming backend and hook; tritonjit's own errors (a plugin's
        ArgumentError, a DriverError) pass unchanged. The native path checks nothing
        here: what it cannot take it hands to this path."""
        if stream is None:
            try:
                stream = state.current_stream(device)
            except Exception as exc:
                raise HookError.raised(state.backend.name, "current_stream", exc, self.name) from exc
            if stream.__class__ is not int or stream < 0:
                stream = checked_index(state.backend, "current_stream", stream, self.name)
        try:
            variant.launcher(grid, stream, variant.runtime_args(bound))
        except TritonJITError:
            raise
        except Exception as exc:
            raise HookError.raised(state.backend.name, launch_hook(state.backend), exc, self.name) from exc

    def variant_for(self, *args: Any, **kwargs: Any) -> Variant:
        """The variant ``f[grid](*args, **kwargs)`` would launch, compiled or loaded if
        needed (frozen: FrozenError), without launching. The C++ API asks this on a miss
        of its own cache, so C++ and Python share one set of variants."""
        state = self._state
        if state is None or state.backend is not registry._current:
            state = self._make_state()
        kwargs.pop("stream", None)
        if self._heuristics is not None or self._autotune_configs is not None:
            kwargs = self._meta_kwargs(args, kwargs)
        key, bound, options = self._bind(state, args, kwargs)
        device = self._launch_device(state, bound)
        cache = state.caches.get(device)
        try:
            return cache[key]  # type: ignore[index]
        except (KeyError, TypeError):
            return self._miss(state, device, key, bound, options)

    def native_spec(self) -> tuple:
        """What the C++ API (tritonjit/function.h) needs to know of this kernel on the
        active backend: (name, constexpr flag per parameter, names, divisibility,
        exact_ints, backend name, torch device type). ``exact_ints``: heuristics decide
        constexprs from argument values, so C++ keys ints by value, not by class."""
        state = self._state
        if state is None or state.backend is not registry._current:
            state = self._make_state()
        backend = state.backend
        if self._autotune_configs is not None:
            raise ArgumentError(self.name, "is autotuned; the C++ API launches plain and heuristics-wrapped "
                                "kernels (choose the config in Python, or launch the untuned kernel with it)")
        rules = backend.specialization_rules()
        div = int(rules.divisibility) if rules.align_pointers else 0
        return (self.name, tuple(p.is_constexpr for p in self.params), tuple(self._param_names), div,
                self._heuristics is not None, backend.name, backend.info.device_type or "cpu")

    def _launch_device(self, state: _State, bound: tuple) -> int:
        """The device of the tensor arguments (all on one), else the current device.
        Tensors inside tuples and the bases of tensor descriptors count too."""
        device = None
        first = (0, "")  # the parameter index and the place of the first tensor (for the message)
        names = self._param_names
        for i in state.runtime_index:
            a = bound[i]
            c = a.__class__
            tensors: Sequence[tuple[Any, str]]
            if c in _SCALARS:
                continue
            if c is tuple or getattr(a, "data_ptr", None) is None:
                tensors = nested_tensors(a)
            else:
                tensors = ((a, ""),)
            for t, where in tensors:
                try:
                    d = state.device_of(t)
                except ValueError as exc:
                    raise ArgumentError(self.name, str(exc), names[i] + where) from None
                except TritonJITError:
                    raise
                except Exception as exc:
                    raise HookError.raised(state.backend.name, "device_of", exc, self.name) from exc
                if d.__class__ is not int or d < 0:
                    d = checked_index(state.backend, "device_of", d, self.name)
                if device is None:
                    device, first = d, (i, where)
                elif d != device:
                    raise ArgumentError(
                        self.name, f"is on device {d} but '{names[first[0]] + first[1]}' is on device {device}; "
                        "the tensors of one launch must be on one device", names[i] + where)
        if device is None:
            device = call_hook(state.backend, "current_device", kernel=self.name)
            if device.__class__ is not int or device < 0:
                device = checked_index(state.backend, "current_device", device, self.name)
        return device

    def _bind(self, state: _State, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
        """The binder's (key, arguments in parameter order, options), its failures
        turned into errors that name the kernel and the parameter."""
        try:
            return state.binder(*args, **kwargs)
        except SpecializationFailure as exc:
            raise ArgumentError(self.name, str(exc), exc.param) from None
        except TypeError as exc:
            raise self._binding_error(exc, args, kwargs) from None

    def _make_state(self) -> _State:
        with self._lock:
            backend = registry.current()
            if self._state is None or self._state.backend is not backend:
                binder = make_binder(self.params, backend.specialization_rules(), self.name)
                runtime_index = tuple(p.index for p in self.params if not p.is_constexpr)
                state = _State(backend, binder, runtime_index)
                self._dispatcher = None
                self._state = state
                self._dispatcher = _native.make_dispatcher(self, state)
            return self._state

    def _miss(self, state: _State, device: int, key: Any, bound: tuple, options: dict) -> Variant:
        try:
            hash(key)
        except TypeError:
            bad = next(p.name for p, k in zip(self.params, key) if not _hashable(k))
            raise ArgumentError(self.name, "constexpr value is not hashable; pass an int, float, bool, "
                                "str, None or a tl.dtype", bad) from None
        for p, k in zip(self.params, key, strict=False):  # a tensor is hashable but no compile-time constant
            if p.is_constexpr and getattr(_unwrap_key(k), "data_ptr", None) is not None:
                raise ArgumentError(self.name, f"is a tl.constexpr and needs a compile-time constant (int, "
                                    f"float, bool, str, None or a tl.dtype), got a {type(_unwrap_key(k)).__name__}",
                                    p.name)
        with self._lock:
            cache = state.caches.setdefault(device, {})
            variant = cache.get(key)
            if variant is not None:
                return variant
            slots = self._slots_from_key(key)
            opts = self._check_options(options)
            backend = state.backend
            with call_hook(backend, "device_guard", device, kernel=self.name):
                target = call_hook(backend, "compile_target", device, None, kernel=self.name)
                compiled = compile_variant(self.jit_fn, self.params, slots, target, opts, self.name, backend,
                                           frozen=_frozen.is_frozen())
                variant = make_variant(backend, compiled, slots, device, self.name)
            _record(self, compiled, opts)
            cache[key] = variant
            return variant

    def _slots_from_key(self, key: tuple) -> list[Slot]:
        return [slot_from_token(tok, p) for tok, p in zip(key, self.params)]

    def _check_options(self, options: dict) -> dict:
        known = known_options()
        for k, v in options.items():
            if k not in known:
                raise ArgumentError(
                    self.name,
                    f"unknown keyword argument '{k}'; the kernel's parameters are "
                    f"{', '.join(self._param_names)} and launch options are stream, "
                    f"num_warps, num_stages, num_ctas, maxnreg, ...",
                )
            if k in ("num_warps", "num_stages", "num_ctas") and (not isinstance(v, int) or v < 1):
                raise ArgumentError(self.name, f"{k} must be a positive int, got {v!r}")
        return dict(options)

    def _binding_error(self, exc: TypeError, args: tuple, kwargs: dict) -> ArgumentError:
        text = str(exc)
        name = text.split("(", 1)[0]
        msg = text[len(name):].lstrip("()").strip() if text.startswith(name + "()") else text
        param = None
        for p in self._param_names:
            if f"'{p}'" in text:
                param = p
                break
        expected = ", ".join(self._param_names)
        return ArgumentError(self.name, f"{msg} (the kernel takes: {expected}; got {len(args)} positional "
                             f"and keywords {sorted(kwargs) or 'none'})", param)

    def _grid_from_callable(self, grid: Any, bound: tuple, options: dict) -> tuple:
        """A grid given as a callable of the launch's meta-parameters, an int or a list,
        as a tuple (its dimensions are checked by ``_checked_grid``)."""
        if callable(grid):
            meta = dict(zip(self._param_names, bound))
            meta.update(options)
            grid = grid(meta)
        if isinstance(grid, int):
            grid = (grid,)
        elif isinstance(grid, list):
            grid = tuple(grid)
        if not isinstance(grid, tuple):
            raise GridError(self.name, f"grid must be {_GRID_EXPECTED}, got {type(grid).__name__} {grid!r}")
        return grid

    def _checked_grid(self, grid: tuple, backend: Backend) -> tuple[int, int, int]:
        """The grid as 3 ints, else GridError saying which dimension is wrong and why.
        Nothing else reaches a backend: drivers take fixed-width dims, and a value that
        does not fit them would be truncated into another grid, not refused."""
        if not 1 <= len(grid) <= 3:
            raise GridError(self.name, f"grid {grid!r} has {len(grid)} dimensions; expected {_GRID_EXPECTED}")
        limits = backend.info.grid_limits
        dims = []
        for axis, v, limit in zip("xyz", grid, limits):
            if not isinstance(v, int) or isinstance(v, bool):
                raise GridError(self.name, f"grid {grid!r}: dimension {axis} is {type(v).__name__} {v!r}; expected "
                                f"an int >= 1 (a bool or a float is not a grid dimension)")
            if v < 1:
                raise GridError(self.name, f"grid {grid!r} has a zero or negative dimension {axis} = {v}; "
                                "every dimension must be >= 1")
            if v > limit:
                raise GridError(self.name, f"grid {grid!r}: dimension {axis} = {v} exceeds the limits of backend "
                                f"'{backend.name}': x <= {limits[0]}, y <= {limits[1]}, z <= {limits[2]}")
            dims.append(int(v))
        dims += [1] * (3 - len(dims))
        return dims[0], dims[1], dims[2]

    def launch_kwargs(self, grid: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The full keyword set ``f[grid](*args, **kwargs)`` launches with: @triton.heuristics
        evaluated and the @triton.autotune config chosen (timed on the device on the first
        call of a tuning key, as a launch would; nothing is launched besides the timing).

        An autotuned launch resolves the tuning key and the heuristics in Python on every
        call; a caller that knows which of its calls share a config can ask once and launch
        the plain kernel (``tritonjit.function(kernel.fn...)``) with the answer, which takes
        the native path."""
        state = self._state
        if state is None or state.backend is not registry._current:
            self._make_state()
        kwargs.pop("stream", None)
        if self._heuristics is None and self._autotune_configs is None:
            return dict(kwargs)
        return self._meta_kwargs(args, kwargs, grid)

    def _meta_kwargs(self, args: tuple, kwargs: dict, grid: Any = None, stream: Any = None) -> dict:
        """@triton.heuristics evaluated and the @triton.autotune config chosen (tuned on
        the device when there is a grid to launch; see _autotune.py)."""
        return _autotune.meta_kwargs(self, args, kwargs, grid, stream)

    # ---- introspection and ahead-of-time compile ----------------------------------------------
    def signature(self, *args: Any, **kwargs: Any) -> str:
        """The signature string of the variant these arguments select."""
        kwargs.pop("stream", None)
        state = self._state if self._state is not None and self._state.backend is registry._current else self._make_state()
        if self._heuristics is not None or self._autotune_configs is not None:
            kwargs = self._meta_kwargs(args, kwargs)
        key, _, _ = self._bind(state, args, kwargs)
        return render(self._slots_from_key(key[: len(self.params)]))

    def parse_signature(self, signature: str) -> list[Slot]:
        return parse(signature, self.params, self.name)

    def compile(self, signature: str, target: str | None = None, **options: Any) -> CompiledVariant:
        """Compile the variant named by ``signature`` for ``target`` (e.g. "cuda:90",
        "hip:gfx942"); no device needed. Without ``target``, for the current device."""
        slots = self.parse_signature(signature)
        opts = self._check_options(options)
        if target is None:
            backend = registry.current()
            device = checked_index(backend, "current_device", call_hook(backend, "current_device", kernel=self.name),
                                   self.name)
            tgt = call_hook(backend, "compile_target", device, None, kernel=self.name)
        else:
            name, tgt = parse_target(target, registry.get)
            try:
                backend = registry.get(name)
            except BackendError:
                backend = None
        return compile_variant(self.jit_fn, self.params, slots, tgt, opts, self.name, backend)

    def variants(self) -> list[Variant]:
        """The variants compiled so far by this process for the current backend."""
        state = self._state
        return [] if state is None else [v for c in state.caches.values() for v in c.values()]

    def __repr__(self) -> str:
        return f"<tritonjit.KernelFunction {self.name}({', '.join(self._param_names)})>"


if not _native.available():  # the Python path serves f[grid]
    setattr(KernelFunction, "__getitem__", KernelFunction._py_getitem)  # noqa: B010 (a method the checker sees)


class BoundLaunch:
    """``f.bind(...)`` of the Python path: the runtime arguments fill the bound ones."""

    __slots__ = ("fn", "grid", "bound", "options", "index", "params")

    def __init__(self, fn: KernelFunction, grid: Any, bound: tuple, options: dict, stream: Any) -> None:
        self.fn = fn
        self.grid = grid
        self.bound = list(bound)
        self.options = dict(options)
        if stream is not None:
            self.options["stream"] = stream
        self.index = tuple(p.index for p in fn.params if not p.is_constexpr)
        self.params = tuple(fn.params[i].name for i in self.index)

    def __call__(self, *args: Any) -> Any:
        if len(args) != len(self.index):
            raise TypeError(f"a bound launcher takes the kernel's runtime arguments {list(self.params)} "
                            f"positionally, got {len(args)}")
        vals = list(self.bound)
        for i, a in zip(self.index, args):
            vals[i] = a
        return self.fn._run(self.grid, *vals, **self.options)


_recorder: Callable[[KernelFunction, CompiledVariant, dict], None] | None = None
if os.environ.get("TRITONJIT_RECORD"):  # TRITONJIT_RECORD=FILE: append each variant to a manifest
    from ._manifest import recorder_from_env

    _recorder = recorder_from_env()


def _record(fn: KernelFunction, compiled: CompiledVariant, options: dict) -> None:
    if _recorder is not None:
        _recorder(fn, compiled, options)


def _unwrap_key(k: Any) -> Any:
    """A constexpr's value from its key token ((type, value) for non-ints)."""
    return k[1] if type(k) is tuple and len(k) == 2 and isinstance(k[0], type) else k


def _hashable(x: Any) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _unwrap(kernel: Any) -> tuple[Any, list | None, list | None]:
    """JITFunction under @triton.autotune / @triton.heuristics wrappers."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    heuristics: list | None = None
    configs: list | None = None
    obj = kernel
    while not isinstance(obj, JITFunction):
        if isinstance(obj, Heuristics):
            heuristics = (heuristics or []) + list(obj.values.items())
        elif isinstance(obj, Autotuner):
            configs = list(obj.configs)
        inner = getattr(obj, "fn", None)
        if inner is None or inner is obj:
            raise TypeError(f"expected a @triton.jit function (optionally autotuned), got {type(kernel).__name__}")
        obj = inner
    return obj, heuristics, configs


# ---- tritonjit.function ----------------------------------------------------------------------
#: the attribute of a kernel object holding its runtime object: the kernel keeps its
#: KernelFunction alive, and nothing in tritonjit keeps the kernel alive, so a kernel the
#: user drops takes its runtime object, variants and launch state with it (a cycle
#: kernel <-> runtime object that the garbage collector frees)
_ATTR = "__tritonjit_function__"
#: every live runtime object by id(kernel) or (path, name), for introspection (audit);
#: weak, so it keeps nothing alive
_instances: weakref.WeakValueDictionary[Any, KernelFunction] = weakref.WeakValueDictionary()
#: runtime objects kept for the life of the process: those of ``function(path, name)``
#: (their module is imported once and kept, see ``_modules``) and those of kernel
#: objects that take no attribute (no ``__dict__``)
_pinned: dict[Any, KernelFunction] = {}
_instances_lock = threading.RLock()  # function(path, name) re-enters through function(jit)


def function(kernel: Any, name: str | None = None, *, key_buckets: Any = None) -> KernelFunction:
    """The tritonjit runtime object of a kernel, one per kernel, alive as long as the
    kernel object is (``function(path, name)``'s: as long as the process).

    ``function(jit_fn)`` wraps a ``@triton.jit`` function (autotuned or heuristics
    wrapped ones too); ``function("path/to/file.py", "kernel")`` imports the file by
    path (no package or relative import needed) and takes the kernel from it.

    ``key_buckets`` (``@triton.autotune`` kernels only, opt-in) maps key argument names
    to a bucket strategy, so that nearby values share one tuned config:
    ``key_buckets={"M": "log2", "N": "log2", "K": "log2"}`` tunes once per
    power-of-two bucket (next power of two of a positive int) instead of once per
    exact value; a strategy may also be any callable ``value -> hashable``. A name
    outside the autotuner's ``key`` or an unknown strategy raises ArgumentError. As the
    runtime object is one per kernel, its key buckets are fixed by the first call that
    creates it; asking again with different ones raises ArgumentError.
    """
    if isinstance(kernel, (str, os.PathLike)):
        if name is None:
            raise TypeError("tritonjit.function(path, name): name of the kernel is missing")
        path = os.path.abspath(os.fspath(kernel))
        key: Any = (path, name)
        inst = _pinned.get(key)
        if inst is None:
            jit = load_kernel(path, name)
            with _instances_lock:
                inst = _pinned.get(key)
                if inst is None:
                    inst = _pinned[key] = _instances[key] = function(jit, key_buckets=key_buckets)
        elif key_buckets is not None:
            _check_same_buckets(inst, key_buckets)
        return inst
    inst = _runtime_object(kernel)
    if inst is None:
        with _instances_lock:
            inst = _runtime_object(kernel)
            if inst is None:
                return _attach(kernel, KernelFunction(kernel, key_buckets=key_buckets))
    if key_buckets is not None:
        _check_same_buckets(inst, key_buckets)
    return inst


def _runtime_object(kernel: Any) -> KernelFunction | None:
    """The runtime object ``function`` made for this very kernel object, if any."""
    inst = getattr(kernel, _ATTR, None)
    if inst is None or inst.wrapped is not kernel:  # (a wrapper may forward attributes)
        inst = _pinned.get(id(kernel))
        if inst is None or inst.wrapped is not kernel:
            return None
    return inst


def _attach(kernel: Any, inst: KernelFunction) -> KernelFunction:
    """Let ``kernel`` keep ``inst`` alive; pin it where the kernel takes no attribute."""
    try:
        vars(kernel)[_ATTR] = inst
    except TypeError:  # no __dict__
        _pinned[id(kernel)] = inst
    _instances[id(kernel)] = inst
    return inst


def _check_same_buckets(inst: KernelFunction, key_buckets: Any) -> None:
    """A second ``function(kernel, key_buckets=...)`` must ask for what the first set."""
    wanted = _autotune.bucket_labels(_autotune.key_buckets_of(inst.name, inst.wrapped, key_buckets))
    have = _autotune.bucket_labels(inst.key_buckets)
    if wanted != have:
        raise ArgumentError(inst.name, f"already has a runtime object with key_buckets {have or 'none'}; asked for "
                            f"{wanted}. tritonjit keeps one runtime object per kernel: pass the same key_buckets "
                            "wherever this kernel is wrapped")
