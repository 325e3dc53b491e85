"""``torch.ops.tritonjit.<op>`` without the Python frame of ``OpOverloadPacket.__call__``.

torch's packet ``__call__`` is a Python method that, for an operator without torchbind
arguments (every ``tritonjit::`` operator), only forwards to ``self._op``: the C function
that resolves the overload and calls the dispatcher. That frame costs about 0.3-0.4 us a
call, a tenth of a small op. :func:`speed_up` gives each packet of a namespace a class of
its own whose ``__call__`` *is* that C function. The packet stays an
``OpOverloadPacket`` (``isinstance`` holds: torch.compile and the overload attributes work
as before), and when torch refreshes ``_op`` (a new overload defined later,
``torch._ops._refresh_packet``), the class follows it.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch

__all__ = ["speed_up"]

_Base: Any = torch._ops.OpOverloadPacket


class _FastPacket(_Base):
    """Base of the per-operator classes: ``_op`` lives in the class (``_torch_op``), and so
    does ``__call__``: that C function itself, or a direct entry (see _direct.py) that falls
    back to it."""

    __slots__ = ()

    @property
    def _op(self) -> Any:
        return type(self).__dict__["_torch_op"]

    @_op.setter
    def _op(self, op: Any) -> None:
        # torch refreshed the packet (an overload added): its new call, without a direct
        # entry made for the old overloads
        cls = type(self)
        cls._torch_op = op
        cls.__call__ = staticmethod(op)
        cls._refreshed = True


def refreshed(packet: Any) -> bool:
    """Whether torch refreshed the packet's call since it was made fast (it then has no
    direct entry: that entry knew only the overloads of its time)."""
    return bool(type(packet).__dict__.get("_refreshed", False))


def direct_of(packet: Any) -> Any:
    """The direct entry that calls ``packet``, or None where torch's call does."""
    call = type(packet).__dict__.get("__call__")
    fn = call.__func__ if isinstance(call, staticmethod) else None
    return None if fn is None or fn is type(packet).__dict__.get("_torch_op") else fn


def set_direct(packet: Any, entry: Any) -> None:
    """Make ``entry`` (a direct entry whose fallback is ``packet._op``) the packet's call."""
    type(packet).__call__ = staticmethod(entry)


def speed_up(namespace: str, names: Iterable[str]) -> int:
    """Give the packets ``torch.ops.<namespace>.<name>`` their fast class; returns how many
    changed. A packet with torchbind overloads keeps torch's ``__call__`` (which dispatches
    those in Python)."""
    ns = getattr(torch.ops, namespace)
    changed = 0
    for name in dict.fromkeys(names):
        packet = getattr(ns, name)
        if type(packet) is not _Base or packet._has_torchbind_op_overload:  # done already, or not torch's
            continue
        op = packet.__dict__.pop("_op")  # from now on a class attribute (see _FastPacket._op)
        packet.__class__ = type(f"{namespace}_{name}_packet", (_FastPacket,),
                                {"__slots__": (), "__call__": staticmethod(op), "_torch_op": op,
                                 "__module__": __name__})
        changed += 1
    return changed
