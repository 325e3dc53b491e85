"""The calls a measured policy handed to aten's own kernel, for the audit to tell apart.

Under enable(), mm/addmm/bmm/baddbmm (``matmul._aten_is_faster``), the SDPA ops
(``attention._route``) and _grouped_mm (``grouped_mm.aten_serves``) give a call to aten's
kernel where aten measured faster on its shape. That is allowed, but the audit must show
it: such a call launches no tritonjit kernel, like an ordinary fallback, and after the
decision the C++ plan cache (mm, _grouped_mm) or the route table (SDPA) serves it without
asking Python again. So the policies note their
choice here, keyed by the call's layout, and the audit's recorders look it up.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import torch

__all__ = ["note_aten", "chose_aten", "clear", "clear_policies", "env_mode"]

#: at most this many records (the oldest go first), like attention._ROUTE_MAX
MAX = 4096
_SDPA = "_scaled_dot_product_"
#: key -> None: an insertion-ordered set
_chosen: dict[tuple, None] = {}


def env_mode(var: str, modes: tuple[str, ...]) -> str:
    """A measured policy's setting: environment variable ``var`` (case and surrounding spaces
    ignored) where it is one of ``modes``, else ``modes[0]``, the default ("auto"). Read on
    each decision, so a change takes effect for the shapes decided after it."""
    mode = os.environ.get(var, modes[0]).strip().lower()
    return mode if mode in modes else modes[0]


def _layout(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype, t.device


def _key(op: str, args: Sequence[Any]) -> tuple | None:
    """mm/addmm/bmm/baddbmm: the op and the layouts of its tensor arguments. An SDPA op: its family
    (the name without ``_backward``, so a backward finds its forward's record) and q's and
    k's shapes, dtype and device (forward: args[0], args[1]; backward: args[1], args[2])."""
    if op.startswith(_SDPA):
        family = op.removesuffix("_backward")
        i = 1 if family != op else 0
        if len(args) < i + 2:
            return None
        q, k = args[i], args[i + 1]
        if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)):
            return None
        return family, tuple(q.shape), tuple(k.shape), q.dtype, q.device
    return op, tuple(_layout(a) for a in args if isinstance(a, torch.Tensor))


def note_aten(op: str, args: Sequence[Any]) -> None:
    """A measured policy gave the call ``op(*args)`` ("mm", "addmm", an SDPA op) to aten."""
    key = _key(op, args)
    if key is None:
        return
    _chosen.pop(key, None)
    if len(_chosen) >= MAX:
        del _chosen[next(iter(_chosen))]
    _chosen[key] = None


def chose_aten(op_key: str, args: Sequence[Any]) -> bool:
    """Whether a measured policy gave this call (``op_key``: enable()'s name of the aten
    overload, "mm", "addmm.out"; ``args``: the call's positional arguments) to aten."""
    if not _chosen:
        return False
    key = _key(op_key, args)
    return key is not None and key in _chosen


def clear(ops: Iterable[str] | None = None) -> None:
    """Forget the records of ``ops`` (their names, an SDPA family for its backward too), or all."""
    if ops is None:
        _chosen.clear()
        return
    drop = set(ops)
    for key in [k for k in _chosen if k[0] in drop]:
        del _chosen[key]


def clear_policies() -> None:
    """Forget every measured policy decision, mm's (cuBLAS or tritonjit's kernel per call
    shape), SDPA's and _grouped_mm's (aten's kernel or tritonjit's), with the C++ path's
    plans made from them and the audit's records: the next call of each shape decides
    again. The C++ path reads ``TRITONJIT_OPS_MM_ATEN``, ``TRITONJIT_OPS_SDPA`` and
    ``TRITONJIT_OPS_GROUPED_MM_ATEN`` when it plans a call shape; call this after changing
    one in a running process."""
    from .attention import clear_routes  # (``from . import attention`` is the package's function)
    from .grouped_mm import clear_decisions
    from .matmul import clear_plans

    clear_plans()
    clear_routes()
    clear_decisions()
