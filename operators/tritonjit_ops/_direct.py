"""The direct entries (``tritonjit_ops.add(x, y)``, ...) as C callables.

Once the C++ operator path is loaded, each public entry whose operator has a planner is
replaced in the package by ``_native_ops.direct``'s callable: a call whose arguments bind
to one of the operator's ``tritonjit::`` overloads (by the Python entry's own parameter
names and defaults) and whose call shape has a plan runs that plan in C++, from the plan
cache that ``torch.ops.tritonjit`` shares: no Python frame, no dispatcher. Every other
call (autograd work, ``out=``, a tensor subclass, a torch function or dispatch mode,
functorch, another device, a shape without a plan) is passed, unchanged, to the Python
entry, which stays the reference and raises the errors. ``__wrapped__`` is that entry.

``from tritonjit_ops import add`` made before the C++ path is loaded keeps the Python
entry (same results); ``tritonjit_ops.add`` always names the current one.

The ``torch.ops.tritonjit.<op>`` packets get the same callable as their call
(:func:`install_packets`), with torch's own call (the dispatcher) as the fallback: a
plain call (no autograd work, no mode, transform, subclass, profiler or tracer, a call
shape with a plan) runs the plan that the op's C++ kernel would run behind the
dispatcher; every other call goes through the dispatcher as before.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Iterable, Mapping

import torch

log = logging.getLogger(__name__)
_MISSING = object()  # a parameter without a default (a required argument)
_P = inspect.Parameter


def _schema(namespace: str, name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops, namespace), base).__getattr__(overload or "default")._schema


def overload_entries(fn: Callable, overloads: Iterable[str], planners: Mapping[str, Callable],
                     namespace: str = "tritonjit") -> list[tuple[str, Callable | None, tuple, tuple]]:
    """(overload, planner or None, names, defaults) of each overload of ``fn``'s operator, in
    order: its positional schema arguments map to the entry's positional parameters in
    order, its keyword-only ones to parameters of the same name; names and defaults are
    the entry's. Empty where an overload does not map so, or none has a planner."""
    impl = inspect.unwrap(fn)
    try:
        params = list(inspect.signature(impl).parameters.values())
    except (TypeError, ValueError):
        return []
    pos = [p for p in params if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)]
    # a keyword-only schema argument may be an ordinary parameter of the entry (gelu's
    # approximate): the direct path then takes it by keyword only, the Python entry either way
    by_name = {p.name: p for p in params if p.kind in (_P.KEYWORD_ONLY, _P.POSITIONAL_OR_KEYWORD)}
    out = []
    for name in overloads:
        names, defaults = [], []
        i = 0
        for a in _schema(namespace, name).arguments:
            if a.kwarg_only:
                p = by_name.get(a.name)
            else:
                p = pos[i] if i < len(pos) and pos[i].kind is not _P.POSITIONAL_ONLY else None
                i += 1
            if p is None:
                return []
            names.append(p.name)
            defaults.append(_MISSING if p.default is _P.empty else p.default)
        out.append((name, planners.get(name), tuple(names), tuple(defaults)))
    return out if any(e[1] is not None for e in out) else []


def schema_entries(overloads: Iterable[str], planners: Mapping[str, Callable],
                   namespace: str = "tritonjit") -> list[tuple[str, Callable | None, tuple, tuple]]:
    """As :func:`overload_entries`, with the schemas' own names and defaults (torch.ops calls)."""
    out = []
    for name in overloads:
        args = _schema(namespace, name).arguments
        out.append((name, planners.get(name), tuple(a.name for a in args),
                    tuple(a.default_value if a.has_default_value() else _MISSING for a in args)))
    return out if any(e[1] is not None for e in out) else []


def _groups(ops: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for op in ops:
        groups.setdefault(op.partition(".")[0], []).append(op)
    return groups


def install(mod: Any, namespace: dict[str, Any], ops: Iterable[str], planners: Mapping[str, Callable],
            device_type: str) -> list[str]:
    """Replace ``namespace``'s entries of ``ops`` (``tritonjit::`` overload names, in
    registration order) by direct entries of ``mod`` (the loaded ``_native_ops``); returns
    the names replaced."""
    done = []
    for base, overloads in _groups(ops).items():
        fn = namespace.get(base)
        if not callable(fn) or type(fn).__name__ == "DirectEntry":
            continue
        entries = overload_entries(fn, overloads, planners)
        if not entries:
            continue
        try:
            entry = mod.direct("tritonjit", entries, fn, device_type, _MISSING)
        except RuntimeError as exc:  # a default the schema cannot hold: this entry stays Python
            log.debug("the direct entry %s stays Python: %s", base, exc)
            continue
        entry.__name__ = entry.__qualname__ = base
        entry.__doc__ = fn.__doc__
        entry.__wrapped__ = fn
        entry._tritonjit_autograd = getattr(fn, "_tritonjit_autograd", False)
        namespace[base] = entry
        done.append(base)
    return done


def install_packets(mod: Any, ops: Iterable[str], planners: Mapping[str, Callable], device_type: str) -> list[str]:
    """Give each ``torch.ops.tritonjit.<op>`` packet (made fast by _packets.speed_up) a
    direct entry as its call, falling back to torch's; returns the packets changed."""
    from . import _packets

    done = []
    for base, overloads in _groups(ops).items():
        packet = getattr(torch.ops.tritonjit, base)
        if not isinstance(packet, _packets._FastPacket) or _packets.direct_of(packet) is not None:
            continue
        entries = schema_entries(overloads, planners)
        if not entries:
            continue
        try:
            entry = mod.direct("tritonjit", entries, packet._op, device_type, _MISSING, True)
        except RuntimeError as exc:
            log.debug("the packet torch.ops.tritonjit.%s keeps torch's call: %s", base, exc)
            continue
        _packets.set_direct(packet, entry)
        done.append(base)
    return done
