"""Launch plans: what an operator call allocates and launches, decided once per call shape.

An operator's *planner* looks at a call's arguments (dtypes, shapes, strides, devices
and the values of its non-Scalar arguments; never at tensor data) and returns a
:class:`Plan`: the output buffers, the kernel launches with their arguments, and
what the call returns (outputs, or for an in-place op its ``In(i)`` argument itself).
Arguments of a launch are literals (ints, floats, constexprs) or references to the
call: ``In(i)`` (tensor argument i), ``InItem(i, k)`` (tensor k of the ``Tensor[]``
argument i: cat's inputs), ``Out(j)`` (output j), ``Tmp(k)`` (a temporary buffer),
``Arg(i)`` (the value of Scalar argument i, or of a 0-dim CPU tensor used as a
scalar). A planner that cannot handle a call
returns None and the operator's Python implementation runs instead (it validates
and raises aten's errors).

The same plan serves two executors: :func:`run` here (Python, used by the operators'
general paths) and the C++ operator path (``_native_ops.cpp``), which caches plans
per call key and executes them without Python. The key rule both rely on: a plan may
bake in anything about the call except the values of Scalar arguments (and of 0-dim
CPU tensors used as scalars), which it must pass through ``Arg(i)``: the C++ key
holds their types, not their values (of a Scalar argument, only whether it is 0 or
1 besides: a plan may depend on that, e.g. addmm's beta == 0).

*Value-keyed scalars*: a planner marked with :func:`value_keyed` (arange's) gets the
values of its Scalar arguments in the C++ key, so its plans may bake them in (arange's
size depends on them). Meant for ops called with a handful of distinct values: each
value is a plan of its own.

*Long tensor lists*: a planner marked with :func:`list_limit` (cat's, stack's) has calls
with more tensors in a list than its limit passed to aten's kernel by the C++ path at
once, without a key (whose words a long list would overflow) or a trip to Python.

*Factory calls* (no tensor arguments: ``arange``, ``zeros``, ``full``, ...) take the C++
path where their ``device`` argument names the active backend's device type (on the CPU
interpreter: ``None`` or a CPU device), their layout is strided and pin_memory is not set:
the plan's buffers are allocated on that device. Calls for another device go to aten's
kernel, as before. Every key holds the default dtype: what a factory's ``dtype=None``
means, and what an int tensor times a float (or an int division) gives.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import torch

from ._layout import dense

Tensor = torch.Tensor

__all__ = ["In", "InItem", "Out", "Tmp", "Arg", "Const", "Buffer", "Launch", "Plan", "aten_plan", "launch", "execute",
           "list_limit", "run", "scalar_fits", "zero_divisor", "serves_writes", "tf32_keyed", "value_keyed"]


class In(NamedTuple):
    """Tensor argument ``i`` of the call (after the plan's ``contiguous`` step). (The
    field is not called ``index``: that would shadow ``tuple.index``.)"""

    i: int


class InItem(NamedTuple):
    """Tensor ``k`` of the tensor-list argument ``i`` of the call (cat's inputs: the C++ key
    describes each element as it does a tensor argument). Not made contiguous by a plan's
    ``contiguous`` step, which names tensor arguments only."""

    i: int
    k: int


class Out(NamedTuple):
    """Output buffer ``i`` of the plan."""

    i: int


class Tmp(NamedTuple):
    """Temporary buffer ``i`` of the plan (freed after the call)."""

    i: int


class Arg(NamedTuple):
    """The runtime value of Scalar argument ``i`` (a 0-dim CPU tensor: its item)."""

    i: int


class Const(NamedTuple):
    """A result that is no tensor: an int (SDPA's max_q and max_k) or None, the same for every
    call of the plan's key."""

    value: int | None


class Buffer(NamedTuple):
    """A dense buffer allocated on the call's device: contiguous, or with the given ``strides``
    (a dense layout: SDPA's outputs (B, H, S, D) stored (B, S, H, D), as aten's kernels
    allocate them)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    strides: tuple[int, ...] | None = None

    @staticmethod
    def like(t: Tensor) -> Buffer | None:
        """A buffer laid out exactly as ``t`` (its shape, dtype and strides, size-1 dimensions'
        included; an empty one contiguous), or None where ``t`` is no dense tensor (overlapping,
        or with gaps)."""
        if t.numel() == 0 or (t.is_contiguous() and t.stride() == torch.empty(t.shape, device="meta").stride()):
            return Buffer(tuple(t.shape), t.dtype)
        if not dense(t.shape, t.stride()):
            return None
        return Buffer(tuple(t.shape), t.dtype, tuple(t.stride()))

    def empty(self, device: Any) -> Tensor:
        if self.strides is None:
            return torch.empty(self.shape, dtype=self.dtype, device=device)
        return torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device=device)


class Launch(NamedTuple):
    """One kernel launch: every kernel parameter in order (constexprs included), and its
    compile options (``num_warps``, ``num_stages``; ``extra``: e.g. ``debug``)."""

    fn: Any  # tritonjit.KernelFunction
    grid: tuple[int, int, int]
    args: tuple
    num_warps: int | None = None
    num_stages: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def options(self) -> dict[str, Any]:
        opts = dict(self.extra)
        if self.num_warps is not None:
            opts["num_warps"] = self.num_warps
        if self.num_stages is not None:
            opts["num_stages"] = self.num_stages
        return opts


class Plan(NamedTuple):
    outputs: tuple[Buffer, ...]
    launches: tuple[Launch, ...]
    # what the call returns, in order (one: a Tensor): output j, -1 (None), In(i): tensor
    # argument i itself, as given (an in-place op's ``self``, which its launches write through
    # In(i)), or Const(v): an int or None that is no output
    result: tuple[int | In | Const, ...] = (0,)
    temps: tuple[Buffer, ...] = ()
    contiguous: tuple[int, ...] = ()  # tensor arguments made contiguous before launching
    aten: bool = False  # run the device's own aten kernel instead (measured faster; C++ path only)
    # tensor arguments the launches write in place (an in-place op's self): a call where another
    # tensor argument shares one's memory in another view (a partial overlap, which aten refuses,
    # or an alias the launch would read after writing) goes to the Python implementation; the
    # very same view (``x.mul_(x)``) is served. Checked per call, since the key holds no addresses.
    writes: tuple[int, ...] = ()
    # with writes: no other tensor may share a written one's storage at all, not even as the same view
    # (a plan that writes through an index reads its other inputs after some writes)
    exclusive: bool = False
    # (i, dtype): Scalar argument i, passed through Arg(i), must convert to dtype without
    # overflow (aten's per-call check, see scalar_fits): a call whose value does not goes to
    # the operator's implementation, which hands it to aten for its error. Checked per call,
    # since the key holds the Scalar's type, not its value.
    fits: tuple[tuple[int, torch.dtype], ...] = ()
    # (i, dtype): Scalar argument i (or a wrapped number: ``x // 3`` passes a 0-dim tensor) is
    # an integer divisor: a call where it is 0 once converted to dtype (65536 in int16) goes
    # to the operator's implementation, which hands it to aten for its ZeroDivisionError.
    # Checked per call: the key tells a Scalar 0 from others, neither 65536 nor a wrapped 0.
    divisors: tuple[tuple[int, torch.dtype], ...] = ()


def aten_plan() -> Plan:
    """The plan of a call that aten's own kernel for the device serves faster than ours
    (decided by measuring; see matmul's planners). The C++ path under enable() passes
    such calls on to aten's kernel (it sits above it, at BackendSelect)."""
    return Plan((), (), (), aten=True)


_NO_DEFAULT = object()


def value_keyed(planner: Any) -> Any:
    """Mark ``planner``'s Scalar arguments as keyed by value on the C++ path (see the module
    docstring): its plans may bake their values in. Returns ``planner``."""
    planner.value_keyed_scalars = True
    return planner


def tf32_keyed(planner: Any) -> Any:
    """Mark ``planner``'s plans as baking in torch's allow_tf32 flag for matmuls
    (``torch.backends.cuda.matmul.allow_tf32``: an fp32 mm's input precision): the C++ path's
    key holds the flag, so a plan made before the flag changed does not serve after. Returns
    ``planner``."""
    planner.tf32_keyed = True
    return planner


def list_limit(n: int) -> Callable[[Any], Any]:
    """Mark a planner whose calls with a tensor list of more than ``n`` tensors (1 to 255) go
    to aten's kernel, decided on the C++ path before any key is built (such a list overflows
    the key anyway): cat's, whose launch copies a few inputs where aten's copies up to 64."""
    if not 1 <= n <= 255:
        raise ValueError(f"tritonjit_ops list_limit: expected 1 to 255 tensors, got {n}")

    def mark(planner: Any) -> Any:
        planner.list_limit = n
        return planner

    return mark


def launch(fn: Any, grid: Sequence[int], *args: Any, num_warps: int | None = None, num_stages: int | None = None,
           **constexprs: Any) -> Launch:
    """A Launch of ``fn[grid](*args, **constexprs)``: arguments bound to the kernel's
    parameters by name, defaults filled in, so the C++ executor gets one per parameter;
    keywords that are no parameter are compile options (``debug=True``, ...)."""
    params = fn.params
    if len(args) > len(params):
        raise TypeError(f"{fn.name}: {len(args)} arguments for {len(params)} parameters")
    vals = list(args)
    for p in params[len(args):]:
        if p.name in constexprs:
            vals.append(constexprs.pop(p.name))
        elif p.has_default:
            vals.append(p.default)
        else:
            raise TypeError(f"{fn.name}: parameter '{p.name}' is missing from the launch")
    g = tuple(grid) + (1,) * (3 - len(grid))
    return Launch(fn, g, tuple(vals), num_warps, num_stages, tuple(sorted(constexprs.items())))  # type: ignore[arg-type]


def execute(L: Launch) -> None:
    """Launch ``L`` now; its arguments are the objects themselves (no plan references)."""
    if L.num_warps is None and L.num_stages is None and not L.extra:
        L.fn[L.grid](*L.args)
    else:
        L.fn[L.grid](*L.args, **L.options())


def _scalar(v: Any) -> Any:
    return v.item() if isinstance(v, Tensor) else v


def scalar_fits(v: Any, dt: torch.dtype) -> bool:
    """Whether aten converts the Scalar ``v`` to ``dt`` without its "value cannot be
    converted to type ... without overflow" error (a bool dtype takes anything; inf and
    NaN pass into floating dtypes, not into integers; uint8 takes the integers -255..255, the
    negatives wrapping, and the floats 0..255, as c10::overflows allows). ``scalar_fits`` in
    ``_native_ops.cpp`` is the same rule."""
    if dt == torch.bool or isinstance(v, bool):
        return True
    if dt.is_floating_point:
        return (isinstance(v, float) and not math.isfinite(v)) or abs(v) <= torch.finfo(dt).max
    info = torch.iinfo(dt)
    # an unsigned type takes integers down to -max (they wrap), floats from 0 (c10::overflows
    # checks a float against [lowest, max]: -3.0 into uint8 is aten's error, -3 is 253)
    lo = -info.max if info.min == 0 and isinstance(v, int) else info.min
    return (isinstance(v, int) or math.isfinite(v)) and lo <= v <= info.max


def zero_divisor(v: Any, dt: torch.dtype) -> bool:
    """Whether the integer ``v`` is 0 once converted to the integer dtype ``dt`` (wrapping,
    as aten converts a Scalar). ``zero_divisor`` in ``_native_ops.cpp`` is the same rule."""
    return int(v) % (1 << torch.iinfo(dt).bits) == 0


def _device(args: Sequence[Any]) -> torch.device:
    """The device of a call's outputs: its first tensor (tensor lists' included) that is no
    0-dim CPU tensor used as a scalar, else its first tensor (as the C++ path picks it)."""
    first = None
    for a in args:
        for t in (a,) if isinstance(a, Tensor) else a if isinstance(a, (list, tuple)) else ():
            if isinstance(t, Tensor):
                if not (t.dim() == 0 and t.is_cpu):
                    return t.device
                first = t if first is None else first
    if first is None:
        raise RuntimeError("tritonjit_ops: a plan for a call without tensors")
    return first.device


def serves_writes(args: Sequence[Any], w: int, exclusive: bool = False) -> bool:
    """Whether a plan writing tensor argument ``w`` in place may serve the call ``args``: no
    other tensor argument (tensors of list arguments included) shares its storage, except as
    the very same view where the plan is not ``exclusive`` (the C++ executor's rule,
    ``Plan.writes``)."""
    o = args[w]
    if not isinstance(o, Tensor) or o.numel() == 0:
        return True
    base = o.untyped_storage().data_ptr()
    for i, a in enumerate(args):
        if i == w:
            continue
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if not isinstance(t, Tensor) or t.numel() == 0 or t.untyped_storage().data_ptr() != base:
                continue
            if exclusive or not (t.data_ptr() == o.data_ptr() and t.shape == o.shape and t.stride() == o.stride()
                                 and t.dtype == o.dtype):
                return False
    return True


def run(plan: Plan, args: Sequence[Any], device: Any = None) -> Any:
    """Execute ``plan`` for the call ``args`` in Python (the C++ executor's reference);
    ``device``: a factory call's (it has no tensor arguments)."""
    if plan.aten:
        raise RuntimeError("tritonjit_ops: an aten plan runs on the C++ operator path only")
    for w in plan.writes:
        if not serves_writes(args, w, plan.exclusive):
            raise NotImplementedError("tritonjit_ops: an in-place plan's self shares memory with another argument "
                                      "(in another view, or at all for a plan that writes through an index); "
                                      "the operator's implementation serves this call")
    for i, dt in plan.fits:
        if not scalar_fits(_scalar(args[i]), dt):
            raise NotImplementedError(f"tritonjit_ops: Scalar argument {i} ({args[i]!r}) overflows {dt}; "
                                      "the operator's implementation hands the call to aten")
    for i, dt in plan.divisors:
        if zero_divisor(_scalar(args[i]), dt):
            raise NotImplementedError(f"tritonjit_ops: integer divisor {i} ({args[i]!r}) is 0 in {dt}; "
                                      "the operator's implementation hands the call to aten")
    given = args
    args = list(args)
    for i in plan.contiguous:
        args[i] = args[i].contiguous()
    device = _device(args) if device is None else torch.device(device)
    outs = [b.empty(device) for b in plan.outputs]
    tmps = [b.empty(device) for b in plan.temps]

    def value(a: Any) -> Any:
        t = type(a)
        if t is In:
            return args[a.i]
        if t is InItem:
            return args[a.i][a.k]
        if t is Out:
            return outs[a.i]
        if t is Tmp:
            return tmps[a.i]
        if t is Arg:
            return _scalar(args[a.i])
        return a

    for L in plan.launches:
        L.fn[L.grid](*(value(a) for a in L.args), **L.options())

    def result(r: int | In | Const) -> Any:
        if isinstance(r, In):
            return given[r.i]
        if isinstance(r, Const):
            return r.value
        return outs[r] if r >= 0 else None

    if len(plan.result) == 1:
        return result(plan.result[0])
    return tuple(result(r) for r in plan.result)
