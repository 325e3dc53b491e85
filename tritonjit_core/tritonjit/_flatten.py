"""Tuple arguments -> the leaf arguments a device receives, in Triton's launcher order.

Triton's launchers pass a tuple argument as its elements, depth first, leaving out
the constant ones (a None, an int equal to 1, an empty tuple): the compiled kernel
has one parameter per remaining leaf. Every backend whose device ABI is Triton's does
the same, so the plan is read here once, from a variant's signature string, for
every plugin to use. A tensor descriptor stays one leaf (its type
``tensordesc<...>``): how it expands is the backend's own ABI (the CUDA plugin's TMA
descriptor, for one).

The launcher receives the arguments of the variant's runtime parameters (its
non-constant ones) in order. Which parameters those are is unambiguous from the
core (``CompiledVariant.runtime_params``); from a bare signature string, a token is
a runtime parameter when it reads as a type, a descriptor type or a tuple of these
(an empty ``()`` reads as a constexpr value there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ._signature import NULLOPT, SCALAR_TYPES, TENSORDESC, _split, split_tuple

Path = tuple[int, ...]


@dataclass(frozen=True)
class RuntimeParam:
    """One argument the launcher receives: its kernel parameter and its device leaves."""

    index: int  # the kernel parameter
    leaves: tuple[tuple[Path, str], ...]  # (path inside a tuple argument, type), depth first

    @property
    def is_plain(self) -> bool:
        """A pointer or scalar passed as it is (not a tuple, not a descriptor)."""
        return len(self.leaves) == 1 and self.leaves[0][0] == () and not self.leaves[0][1].startswith(TENSORDESC)


def runtime_plan(signature: str, runtime_params: Sequence[int] | None = None) -> list[RuntimeParam]:
    """The launcher's arguments of a variant, in order, each with its leaves.

    ``runtime_params``: the parameter index of each (``CompiledVariant.runtime_params``);
    None reads them from the signature alone (see the module's docstring)."""
    tokens = [t.strip() for t in _split(signature)]
    if runtime_params is None:
        runtime_params = [i for i, t in enumerate(tokens) if _is_runtime(t, top=True)]
    return [RuntimeParam(i, tuple(_leaves(tokens[i], ()))) for i in runtime_params]


def leaf_types(plan: Sequence[RuntimeParam]) -> list[str]:
    """The types of all leaves, in the order the device receives them."""
    return [ty for p in plan for _, ty in p.leaves]


def has_compound(plan: Sequence[RuntimeParam]) -> bool:
    return not all(p.is_plain for p in plan)


def flattener(plan: Sequence[RuntimeParam]) -> Callable[[Sequence[Any]], list[Any]] | None:
    """``args -> leaf values`` for the launcher's arguments; None when every argument
    already is its own leaf (no tuple, no descriptor: nothing to do on the hot path)."""
    if not has_compound(plan):
        return None
    getters = [(pos, tuple(path for path, _ in p.leaves)) for pos, p in enumerate(plan)]

    def flatten(args: Sequence[Any]) -> list[Any]:
        out = []
        for pos, paths in getters:
            a = args[pos]
            for path in paths:
                v = a
                for i in path:
                    v = v[i]
                out.append(v)
        return out

    return flatten


def _leaves(token: str, path: Path) -> list[tuple[Path, str]]:
    tup = split_tuple(token)
    if tup is not None:
        out: list[tuple[Path, str]] = []
        for i, (_, t) in enumerate(tup[1]):
            out.extend(_leaves(t, (*path, i)))
        return out
    if token == NULLOPT or token.endswith(":1"):
        return []
    return [(path, token.partition(":")[0] if not token.startswith(TENSORDESC) else token)]


def _is_runtime(token: str, top: bool = False) -> bool:
    """A type, a descriptor type, or a tuple of these (constants allowed inside)."""
    tup = split_tuple(token)
    if tup is not None:
        name, items = tup
        if not items:
            return not top
        return all((f is not None or name is None) and _is_runtime(t) for f, t in items)
    if token.startswith(TENSORDESC):
        return True
    ty, _, hint = token.partition(":")
    if not top and (token == NULLOPT or hint == "1"):
        return True
    if hint not in ("", "16"):
        return False
    base = ty[1:] if ty.startswith("*") else ty
    if ty.startswith("*k") and base[1:] in SCALAR_TYPES:
        base = base[1:]
    return base in SCALAR_TYPES
