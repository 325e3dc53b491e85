"""``audit(fn, *args)``: per aten call of a model, whether tritonjit runs it and what it costs.

A model user who turns on ``enable()`` wants to know where the time goes and which
calls still run aten, to find the next slow path. ``audit`` answers per distinct call:
it runs ``fn`` once, eagerly, under a TorchDispatchMode that records every aten call
below autograd (the backward's too), groups the calls by overload and argument layout
(shapes, strides, dtypes, devices, non-tensor values), then replays each group on
fresh tensors of that layout, eager and under ``enable()``: once each to compare the
outputs and to count the tritonjit kernels the enabled replay launched, then timed in
interleaved rounds. Integer and bool tensors (indices, masks) replay with the captured
values, so index arguments stay in range; floating point ones get random values.
A covered call that launched no tritonjit kernel because a measured policy (mm, SDPA)
gave it to aten, aten being faster on its shape, is told apart from an ordinary
fallback (see _policy.py).
"""
from __future__ import annotations

import functools
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import _native_ops, _policy, _registry
from ._common import backend_device_type
from ._layout import extent as _extent

__all__ = ["AuditRow", "Audit", "audit", "audit_table", "capture", "coverage"]

Tensor = torch.Tensor

_DTYPE_NAMES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
    torch.bool: "b8", torch.complex64: "c64",
}
#: ops that launch no kernel beside the views: allocation, reshapes, host reads
_NO_KERNEL = frozenset({
    "aten::empty.memory_format", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::lift_fresh", "aten::_local_scalar_dense", "aten::detach",
    "aten::_unsafe_view", "aten::is_same_size", "aten::_has_compatible_shallow_copy_type", "aten::sym_size.int",
    "aten::sym_stride.int", "aten::sym_numel", "aten::sym_storage_offset",
})


# ------------------------------------------------------------------ capture
@dataclass(frozen=True, eq=False)
class _TensorSpec:
    """A tensor argument's layout, and its values where the replay must reuse them."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device
    values: Tensor | None  # storage[offset : offset + extent] for integer, bool and 0-dim tensors

    def key(self) -> tuple:
        return ("T", self.shape, self.stride, self.dtype, self.device)

    def make(self) -> Tensor:
        """A fresh tensor of this layout (a new buffer; captured values or random ones)."""
        extent = _extent(self.shape, self.stride)
        buf = torch.empty(self.offset + extent, dtype=self.dtype, device=self.device)
        if self.values is not None:
            buf[self.offset:].copy_(self.values)
        elif self.dtype.is_floating_point or self.dtype.is_complex:
            buf.normal_()
        else:
            buf.zero_()
        return buf.as_strided(self.shape, self.stride, self.offset)


def _spec(t: Tensor) -> _TensorSpec:
    shape, stride = tuple(t.shape), tuple(t.stride())
    values = None
    if not (t.dtype.is_floating_point or t.dtype.is_complex) or t.dim() == 0:
        raw = t.detach().as_strided((_extent(shape, stride),), (1,), t.storage_offset())
        values = raw.clone()
    return _TensorSpec(shape, stride, int(t.storage_offset()), t.dtype, t.device, values)


def _freeze(v: Any) -> Any:
    """A hashable stand-in for a non-tensor argument (lists become tuples)."""
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, _TensorSpec):
        return v.key()
    try:
        hash(v)
        return v
    except TypeError:
        return ("repr", repr(v))


@dataclass
class Call:
    """One distinct aten call: the overload, its arguments' specs, how often it ran."""

    func: Any  # torch._ops.OpOverload
    args: tuple
    kwargs: dict
    count: int = 1

    @property
    def op(self) -> str:
        return self.func.name()  # "aten::mm", "aten::add.Tensor"

    @property
    def covered(self) -> bool:
        """enable() has a tritonjit implementation registered for this overload."""
        return _aten_key(self.func) in _registry._ATEN

    @property
    def has_kernel(self) -> bool:
        """False for views and allocation/metadata ops, which no operator library replaces."""
        return not (_is_view(self.func) or self.op in _NO_KERNEL)


def _computes_nothing(out: Any) -> bool:
    """True when every tensor a call returned is empty: no kernel runs, in eager or under
    enable() (a zero-sized allocation such as ``zeros([0])`` is not a call left to aten)."""
    tensors = [t for t in pytree.tree_leaves(out) if isinstance(t, Tensor)]
    return bool(tensors) and all(t.numel() == 0 for t in tensors)


def _on_backend(tree: Any, device_type: str) -> bool:
    """Whether a call's tensors (arguments or results) include one on the backend's device type:
    enable() routes only those; a call of host tensors alone in a device model is aten's CPU
    kernel's, not a covered call left to aten."""
    return any(isinstance(t, Tensor) and t.device.type == device_type for t in pytree.tree_leaves(tree))


def _aten_key(func: Any) -> str:
    """The overload's name in enable()'s table: "mm", "add.Tensor"."""
    name = func._opname if hasattr(func, "_opname") else func.__name__.split(".")[0]
    overload = func._overloadname
    return name if overload == "default" else f"{name}.{overload}"


def _is_view(func: Any) -> bool:
    v = getattr(func, "is_view", None)
    if v is not None:
        return bool(v)
    return any(a.alias_info is not None and not a.alias_info.is_write for a in func._schema.arguments)


class _Recorder(TorchDispatchMode):
    """Records each aten call (op overload + argument specs) and counts repeats."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[tuple, Call] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # specs before the call: an in-place op changes the values it reads
        sargs, skw = pytree.tree_map_only(Tensor, _spec, (args, kwargs))
        key = (func, _freeze(sargs), _freeze(tuple(sorted(skw.items()))))
        call = self.calls.get(key)
        if call is None:
            self.calls[key] = Call(func, sargs, skw)
        else:
            call.count += 1
        return func(*args, **kwargs)


def capture(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Call]:
    """The distinct aten calls of ``fn(*args, **kwargs)`` (run once), in first-call order."""
    with _Recorder() as rec:
        fn(*args, **kwargs)
    return list(rec.calls.values())


# ------------------------------------------------------------------ launch counting
class _Launches:
    """``[0]``: the tritonjit launches so far: those through Python (counted by the wrappers
    of _count_launches) plus those of the C++ operator path (its own counter)."""

    def __init__(self) -> None:
        self.python = 0
        self._native0 = _native_ops.stats().get("launches", 0)

    def __getitem__(self, i: int) -> int:
        return self.python + _native_ops.stats().get("launches", 0) - self._native0

    def __setitem__(self, i: int, value: int) -> None:
        self.python = value - (self[0] - self.python)


@contextmanager
def _count_launches() -> Iterator[_Launches]:
    """Counts the launches of every tritonjit kernel (``f[grid](...)``, ``f.run``, ``f.bind``,
    and the C++ operator path's) while active. It wraps the class's launch entries, so it
    is for the audit's untimed replay only: the wrapper adds a Python frame to each launch."""
    from tritonjit import KernelFunction

    counter = _Launches()

    def counted(launch: Callable) -> Callable:
        def call(*a: Any, **k: Any) -> Any:
            counter[0] += 1
            return launch(*a, **k)

        return call

    saved = {n: KernelFunction.__dict__.get(n) for n in ("__getitem__", "run", "bind")}
    getitem, run, bind = KernelFunction.__getitem__, KernelFunction.run, KernelFunction.bind
    KernelFunction.__getitem__ = lambda self, grid: counted(getitem(self, grid))  # type: ignore[method-assign]

    def run_counted(self, *a: Any, **k: Any) -> Any:
        counter[0] += 1
        return run(self, *a, **k)

    KernelFunction.run = run_counted  # type: ignore[method-assign]
    KernelFunction.bind = lambda self, *a, **k: counted(bind(self, *a, **k))  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        for n, v in saved.items():
            if v is None:
                delattr(KernelFunction, n)
            else:
                setattr(KernelFunction, n, v)


def _kernel_names() -> set[str]:
    """Names of the Triton kernels tritonjit knows (those it has wrapped so far)."""
    from tritonjit import _function

    return {f.name for f in list(_function._instances.values())}


def _device_launches(run: Callable[[], Any], sync: Callable[[], None]) -> int | None:
    """tritonjit kernels seen on the device by torch's profiler during ``run()`` (CUDA only;
    None where the profiler is unavailable). A second witness beside _count_launches, for
    kernels launched without passing through a Python KernelFunction (from C++)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            sync()
        names = _kernel_names()
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.name in names)
    except Exception:  # no CUPTI, profiler already running, ...
        return None


class _RoutedRecorder(TorchDispatchMode):
    """Under enable(): per aten call, whether tritonjit kernels launched while it ran, and
    for a covered one that launched none, whether a measured policy gave it to aten."""

    def __init__(self, launches: _Launches) -> None:
        super().__init__()
        self.launches = launches
        self.counts = {"calls": 0, "kernel_calls": 0, "covered_calls": 0, "routed_calls": 0, "covered_routed_calls": 0,
                       "policy_calls": 0, "other_device_calls": 0}
        self.not_routed: dict[str, int] = {}
        self.policy: dict[str, int] = {}
        self.device_type = backend_device_type()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = self.launches[0]
        out = func(*args, **(kwargs or {}))
        call = Call(func, (), {})
        c = self.counts
        c["calls"] += 1
        if not call.has_kernel or _computes_nothing(out):
            return out
        if not _on_backend((args, kwargs, out), self.device_type):
            c["other_device_calls"] += 1  # a host tensor's op in a device model (a mask built on the CPU)
        else:
            c["kernel_calls"] += 1
            covered = call.covered
            c["covered_calls"] += covered
            if self.launches[0] > before:
                c["routed_calls"] += 1
                c["covered_routed_calls"] += covered
            else:
                self.not_routed[call.op] = self.not_routed.get(call.op, 0) + 1
                if covered and _policy.chose_aten(_aten_key(func), args):
                    c["policy_calls"] += 1
                    self.policy[call.op] = self.policy.get(call.op, 0) + 1
        return out


def coverage(fn: Callable[..., Any], *args: Any, include: Iterable[str] | str | None = None,
             exclude: Iterable[str] = (), **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Runs ``fn`` once under ``enable(include, exclude)``: what it returned, and the counts
    of its aten calls: all, those with a kernel (not views or allocations), those enable()
    covers, those that launched tritonjit kernels (and those of them covered), and
    ``policy_calls``: covered calls that launched none because a measured policy gave them
    to aten (aten measured faster on their shape; allowed, and told apart from fallbacks).
    ``other_device_calls``: kernel calls whose tensors all lie on another device type than the
    backend's (host tensors in a device model), counted apart from the rest;
    ``not_routed``: op -> kernel calls that launched none (the policy's included);
    ``policy``: op -> those of them a measured policy gave to aten. Count a call after a
    first one: the measured policies (mm, SDPA) time tritonjit's kernel on a shape's first
    call, even where aten's kernel serves the shape from then on. Waits for the C++
    operator path's build (``enable(wait_native=True)``): it counts the routing that
    serves from then on, not the default selection's wait on aten during the build."""
    with _registry.enable(include, exclude, wait_native=True), _count_launches() as launches, _RoutedRecorder(launches) as rec:
        result = fn(*args, **kwargs)
    return result, {**rec.counts, "not_routed": _by_count(rec.not_routed), "policy": _by_count(rec.policy)}


def _by_count(d: dict[str, int]) -> dict[str, int]:
    return dict(sorted(d.items(), key=lambda kv: -kv[1]))


# ------------------------------------------------------------------ replay
@dataclass
class AuditRow:
    """One distinct aten call of the audited function.

    ``covered``: enable() registers a tritonjit implementation for the overload;
    ``routed``: a tritonjit kernel launched when the call was replayed under enable()
    (a covered call that falls back to aten shows ``routed=False``); ``aten_measured``:
    a covered, unrouted call that a measured policy (mm, SDPA) gave to aten because
    aten's kernel measured faster on its shape (not an ordinary fallback); ``launches``:
    tritonjit launches per call; times in microseconds per call; ``max_err``: max
    |eager - tritonjit| over the outputs, relative to max |eager|.
    """

    op: str
    args: str
    calls: int
    covered: bool
    routed: bool
    launches: int
    eager_us: float
    tritonjit_us: float
    max_err: float | None = None
    has_kernel: bool = True
    error: str | None = None
    aten_measured: bool = False

    @property
    def gap_us(self) -> float:
        """Total extra time of this call under enable() in one run of the function."""
        return self.calls * (self.tritonjit_us - self.eager_us)

    @property
    def ratio(self) -> float:
        return self.tritonjit_us / self.eager_us if self.eager_us > 0 else math.nan


def _sync_for(calls: list[Call]) -> Callable[[], None]:
    types = {s.device.type for c in calls for s in pytree.tree_leaves((c.args, c.kwargs))
             if isinstance(s, _TensorSpec)}
    types.discard("cpu")
    if not types:
        return lambda: None
    dev = types.pop()
    if dev == "cuda":
        return torch.cuda.synchronize
    mod = getattr(torch, dev, None)
    return getattr(mod, "synchronize", None) or torch.accelerator.synchronize


def _materialize(call: Call) -> tuple[tuple, dict]:
    return pytree.tree_map_only(_TensorSpec, _TensorSpec.make, (call.args, call.kwargs))


def _clone(tree: Any) -> Any:
    """Same layout, own buffers (an in-place op of one replay must not feed the other)."""
    def one(t: Tensor) -> Tensor:
        out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        try:
            return out.copy_(t)
        except RuntimeError:  # overlapping (expanded) layout: rebuild from a clone of the storage span
            ext = _extent(tuple(t.shape), tuple(t.stride()))
            raw = t.as_strided((ext,), (1,), t.storage_offset()).clone()
            return raw.as_strided(tuple(t.shape), tuple(t.stride()), 0)

    return pytree.tree_map_only(Tensor, one, tree)


#: an op's outputs that hold a generator's state, not a result (SDPA's philox seed and
#: offset: aten returns whatever its generator held, or nothing it set, when dropout_p is 0)
_RNG_RETURNS = frozenset(["philox_seed", "philox_offset", "rng_state", "unused"])


def _results(func: Any, ref: Any, got: Any) -> tuple[Any, Any]:
    """(ref, got) without the outputs that are no result to compare: a generator's state
    (by the schema's return name) and those aten did not compute (None in ``ref``, such as
    SDPA's logsumexp when not asked for, which tritonjit's kernel gives anyway)."""
    schema = getattr(func, "_schema", None)
    if schema is None or not isinstance(ref, tuple) or not isinstance(got, tuple) or len(ref) != len(got):
        return ref, got
    names = [r.name for r in schema.returns]
    keep = [i for i in range(len(ref)) if ref[i] is not None
            and not (i < len(names) and names[i] in _RNG_RETURNS)]
    return tuple(ref[i] for i in keep), tuple(got[i] for i in keep)


def _in_order(func: Any, args: tuple, kwargs: dict, out: Any) -> Any:
    """``out`` of a ``topk(..., sorted=False)`` with its k entries ordered by value, then index:
    the order of an unsorted top-k is unspecified (aten's CPU kernel leaves a partial sort), so
    only the set compares. Any other call's ``out`` unchanged."""
    if _aten_key(func) != "topk" or not isinstance(out, tuple) or len(out) != 2:
        return out
    names = ("self", "k", "dim", "largest", "sorted")
    bound = {**dict(zip(names, args)), **kwargs}
    if bound.get("sorted", True):
        return out
    values, indices = out
    dim = bound.get("dim", -1)
    by_index = torch.sort(indices, dim=dim, stable=True)
    vals = values.gather(dim, by_index.indices)
    by_value = torch.sort(vals, dim=dim, stable=True, descending=bool(bound.get("largest", True)))
    return by_value.values, by_index.values.gather(dim, by_value.indices)


def _max_err(ref: Any, got: Any) -> float | None:
    """max |ref - got| / max |ref| over the floating outputs; inf where a shape differs,
    or where integer outputs differ."""
    rl = [t for t in pytree.tree_leaves(ref) if isinstance(t, Tensor)]
    gl = [t for t in pytree.tree_leaves(got) if isinstance(t, Tensor)]
    if len(rl) != len(gl):
        return math.inf
    diff, scale, any_t = 0.0, 0.0, False
    for r, g in zip(rl, gl):
        if r.shape != g.shape:
            return math.inf
        if r.numel() == 0:
            continue
        any_t = True
        if not (r.dtype.is_floating_point or r.dtype.is_complex):
            if not torch.equal(r, g.to(r.dtype)):
                return math.inf
            continue
        r64, g64 = r.detach().double(), g.detach().double()
        both_nan = torch.isnan(r64) & torch.isnan(g64)
        d = torch.where(both_nan, 0.0, (r64 - g64).abs())
        diff = max(diff, float(d.max()))
        finite = r64[torch.isfinite(r64)]
        if finite.numel():
            scale = max(scale, float(finite.abs().max()))
    if not any_t:
        return None
    return diff / scale if scale > 0 else diff


def _run_enabled(func: Any, args_kwargs: tuple[tuple, dict], route: Callable[[], Any]) -> Any:
    with route():
        return func(*args_kwargs[0], **args_kwargs[1])


def _other_device(call: Call, device_type: str) -> bool:
    """A captured call whose tensors (or, for a factory, ``device=``) are all on another device
    type than the backend's: enable() does not cover it (see :func:`_on_backend`)."""
    specs = [s for s in pytree.tree_leaves((call.args, call.kwargs)) if isinstance(s, _TensorSpec)]
    if specs:
        return all(s.device.type != device_type for s in specs)
    dev = call.kwargs.get("device")
    return dev is not None and torch.device(dev).type != device_type


def _on_cuda(call: Call) -> bool:
    return any(isinstance(s, _TensorSpec) and s.device.type == "cuda"
               for s in pytree.tree_leaves((call.args, call.kwargs)))


def _time_rounds(fn: Callable[[], Any], sync: Callable[[], None], n: int, route: Callable[[], Any] | None) -> float:
    """us per call of ``n`` back-to-back calls and one synchronize, under ``route()`` if given.
    One call runs untimed first: what the first call after entering the route costs (a model
    enters enable() once for thousands of calls) is no cost of the call's operator."""
    ctx = route() if route is not None else _null()
    with ctx:
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t0) / n * 1e6


@contextmanager
def _null() -> Iterator[None]:
    yield


def _replay(call: Call, sync: Callable[[], None], rounds: int, min_time_s: float, max_reps: int,
            route: Callable[[], Any]) -> AuditRow:
    """The row of one distinct call: replayed eager and under ``route()`` (an enable())."""
    args, kwargs = _materialize(call)
    func = call.func
    covered = call.covered and not _other_device(call, backend_device_type())
    row = AuditRow(call.op, _describe(call), call.count, covered, False, 0, math.nan, math.nan,
                   has_kernel=call.has_kernel)
    try:
        ea, ek = _clone((args, kwargs))
        ref = func(*ea, **ek)
        row.has_kernel = row.has_kernel and not _computes_nothing(ref)
        wa, wk = _clone((args, kwargs))
        with route():  # first: plans, compiles, and the measured policies (mm, SDPA) decide,
            func(*wa, **wk)  # timing both kernels: launches of a call aten serves from then on
            sync()
        del wa, wk
        ta, tk = _clone((args, kwargs))
        with route(), _count_launches() as launches:
            got = func(*ta, **tk)
            sync()
        row.launches = launches[0]
        if not row.launches and covered and _on_cuda(call):
            row.launches = _device_launches(lambda: _run_enabled(func, _clone((args, kwargs)), route), sync) or 0
        row.routed = row.launches > 0
        row.aten_measured = covered and not row.routed and _policy.chose_aten(_aten_key(func), ta)
        ref, got = (_in_order(func, args, kwargs, o) for o in (ref, got))
        row.max_err = _max_err(*_results(func, ref, got))
        del ref, got, ea, ek, ta, tk
        call_once = lambda: func(*args, **kwargs)  # noqa: E731
        paths = {False: None, True: route}
        # calibration: the better of two single calls (a first call may still plan or load), so a
        # one-time cost does not leave a path timed one call per round, sync latency included
        best = {e: min(_time_rounds(call_once, sync, 1, paths[e]) for _ in range(2)) for e in (False, True)}
        # calls per round, per path: about min_time_s each (1 for a slow interpreted kernel)
        n = {e: max(1, min(max_reps, int(min_time_s * 1e6 / max(t, 0.1)))) for e, t in best.items()}
        for _ in range(rounds):
            for enabled in (False, True):
                best[enabled] = min(best[enabled], _time_rounds(call_once, sync, n[enabled], paths[enabled]))
        row.eager_us, row.tritonjit_us = best[False], best[True]
    except Exception as exc:  # a call that cannot be replayed out of its context: reported, not fatal
        row.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    return row


def audit(fn: Callable[..., Any], *args: Any, rounds: int = 3, min_time_s: float = 2e-3, max_reps: int = 100,
          include: Iterable[str] | str | None = None, exclude: Iterable[str] = (), **kwargs: Any) -> Audit:
    """Audit ``fn(*args, **kwargs)``: per distinct aten call, routed or not and its cost.

    Runs ``fn`` once eagerly to capture its aten calls, then replays each distinct call
    eager and under ``enable()`` (``rounds`` interleaved rounds of about ``min_time_s``,
    at most ``max_reps`` calls each; the best round counts). ``include``/``exclude`` are
    enable()'s (e.g. ``include="all"``: what the opt-in families would cost). Returns an :class:`Audit`
    (a list of :class:`AuditRow`, costliest gap first) whose ``str()`` is a table.
    Call it outside ``enable()``: it switches routing on and off itself (waiting for the
    C++ operator path's build, as :func:`coverage` does).
    """
    if _registry.enabled_ops():
        raise RuntimeError("tritonjit_ops.audit: call it outside enable(); it compares eager against enable() itself")
    calls = capture(fn, *args, **kwargs)
    sync = _sync_for(calls)
    route = functools.partial(_registry.enable, include, exclude, wait_native=True)
    rows = [_replay(c, sync, rounds, min_time_s, max_reps, route) for c in calls]
    return Audit(sorted(rows, key=_gap_key, reverse=True))


def _gap_key(r: AuditRow) -> float:
    g = r.gap_us
    return -math.inf if math.isnan(g) else g


# ------------------------------------------------------------------ rendering
def _short(v: Any, device: torch.device | None = None) -> str:
    if isinstance(v, _TensorSpec):
        return _describe_tensor(v, device)
    if isinstance(v, torch.dtype):
        return _DTYPE_NAMES.get(v, str(v).replace("torch.", ""))
    if isinstance(v, (list, tuple)):
        inner = ",".join(_short(x, device) for x in v)
        return f"[{inner}]"
    if isinstance(v, float):
        return repr(v) if len(repr(v)) <= 8 else f"{v:.4g}"
    return repr(v) if isinstance(v, str) else str(v)


def _contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expected = 1
    for n, st in zip(reversed(shape), reversed(stride)):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def _describe_tensor(s: _TensorSpec, device: torch.device | None = None) -> str:
    """"bf16[16,1024]"; "T": the last two dims transposed; "@(strides)": another layout."""
    dt = _DTYPE_NAMES.get(s.dtype, str(s.dtype).replace("torch.", ""))
    text = f"{dt}[{','.join(map(str, s.shape))}]"
    if not _contiguous(s.shape, s.stride):
        shp, st = list(s.shape), list(s.stride)
        if len(shp) >= 2:
            shp[-1], shp[-2], st[-1], st[-2] = shp[-2], shp[-1], st[-2], st[-1]
        text += "T" if len(shp) >= 2 and _contiguous(tuple(shp), tuple(st)) else "@(" + ",".join(map(str, s.stride)) + ")"
    if device is not None and s.device != device:
        text += f" {s.device.type}"
    return text


def _describe(call: Call, limit: int = 110) -> str:
    specs = [s for s in pytree.tree_leaves((call.args, call.kwargs)) if isinstance(s, _TensorSpec)]
    device = specs[0].device if specs else None
    parts = [_short(a, device) for a in call.args]
    parts += [f"{k}={_short(v, device)}" for k, v in call.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary(rows: list[AuditRow]) -> dict[str, Any]:
    """Call counts and totals: how many calls run tritonjit kernels, how many covered ones a
    measured policy gave to aten (``aten_measured_calls``), what they cost."""
    compute = [r for r in rows if r.has_kernel]
    covered = [r for r in compute if r.covered]
    routed = [r for r in compute if r.routed]
    timed = [r for r in rows if r.error is None]
    eager = sum(r.calls * r.eager_us for r in timed)
    tj = sum(r.calls * r.tritonjit_us for r in timed)
    n = sum(r.calls for r in compute)
    n_cov = sum(r.calls for r in covered)
    n_routed = sum(r.calls for r in routed)
    n_cov_routed = sum(r.calls for r in covered if r.routed)
    n_measured = sum(r.calls for r in covered if r.aten_measured and not r.routed)
    uncovered = sorted((r for r in timed if r.has_kernel and not r.routed), key=lambda r: r.calls * r.eager_us,
                       reverse=True)
    return {
        "calls": sum(r.calls for r in rows), "kernel_calls": n, "covered_calls": n_cov, "routed_calls": n_routed,
        "covered_routed_calls": n_cov_routed, "aten_measured_calls": n_measured,
        "routed_share_of_covered": n_cov_routed / n_cov if n_cov else math.nan,
        "kernel_or_measured_share_of_covered": (n_cov_routed + n_measured) / n_cov if n_cov else math.nan,
        "routed_share_of_kernel_calls": n_routed / n if n else math.nan,
        "eager_us": eager, "tritonjit_us": tj, "ratio": tj / eager if eager else math.nan,
        "errors": sum(1 for r in rows if r.error),
        "top_unrouted": [f"{r.op} {r.args} ({r.calls}x, {r.calls * r.eager_us:.0f} us"
                         f"{', aten measured faster' if r.aten_measured else ''})" for r in uncovered[:5]],
    }


def _fmt_us(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def audit_table(rows: list[AuditRow], limit: int | None = None, views: bool = False) -> str:
    """A markdown table of ``rows`` (in their order; views and allocations left out unless
    ``views``), followed by the summary."""
    shown = [r for r in rows if views or r.has_kernel or r.error]
    cut = len(shown) - limit if limit is not None and len(shown) > limit else 0
    if limit is not None:
        shown = shown[:limit]
    head = ("| op | args | calls | covered | routed | eager us | tritonjit us | ratio | gap us (x calls) | err |\n"
            "| --- | --- | ---: | :-: | :-: | ---: | ---: | ---: | ---: | ---: |")
    lines = [head]
    for r in shown:
        routed = "yes" if r.routed else "aten (measured)" if r.aten_measured else "no"
        err = r.error if r.error else ("-" if r.max_err is None else f"{r.max_err:.1e}")
        lines.append(
            f"| {r.op} | {r.args} | {r.calls} | {'yes' if r.covered else 'no'} | "
            f"{routed} | {_fmt_us(r.eager_us)} | {_fmt_us(r.tritonjit_us)} | "
            f"{'-' if math.isnan(r.ratio) else f'{r.ratio:.2f}x'} | {_fmt_us(r.gap_us) if not math.isnan(r.gap_us) else '-'} "
            f"| {err} |")
    if cut:
        lines.append(f"| ... {cut} more rows | | | | | | | | | |")
    s = summary(rows)
    lines.append("")
    lines.append(
        f"{s['covered_routed_calls']} of {s['covered_calls']} covered calls ran tritonjit kernels "
        f"({_pct(s['routed_share_of_covered'])}) and {s['aten_measured_calls']} went to aten, measured faster "
        f"(kernel or measured aten: {_pct(s['kernel_or_measured_share_of_covered'])}); "
        f"{s['routed_calls']} of all {s['kernel_calls']} calls with a kernel "
        f"({_pct(s['routed_share_of_kernel_calls'])}); views and allocations: {s['calls'] - s['kernel_calls']} calls")
    lines.append(f"replayed call by call: eager {s['eager_us']:.0f} us, under enable() {s['tritonjit_us']:.0f} us "
                 f"({s['ratio']:.2f}x)" + (f"; {s['errors']} calls could not be replayed" if s["errors"] else ""))
    if s["top_unrouted"]:
        lines.append("costliest calls without a tritonjit kernel:")
        lines += [f"  {t}" for t in s["top_unrouted"][:3]]
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.0f}%"


class Audit(list):
    """The rows of one audit (a list of AuditRow); ``str()`` renders the table."""

    def summary(self) -> dict[str, Any]:
        return summary(self)

    def table(self, limit: int | None = None, views: bool = False) -> str:
        return audit_table(self, limit, views)

    def __str__(self) -> str:
        return audit_table(self)
