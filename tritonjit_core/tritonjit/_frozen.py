"""Frozen mode: after warm-up, a launch that needs a new variant raises instead of compiling.

libtriton_jit has the same switch for production processes: a latency spike of a
second-long compile in the middle of serving is worse than a clear error. Frozen
does not forbid loading: a variant that is in memory, or whose artifact tritonjit's
on-disk index holds (``tritonjit warmup`` writes them), still launches. Explicit
compiles (``f.compile(...)``, ``tritonjit compile``, ``tritonjit warmup``) still
compile: freezing only concerns the launch path. ``TRITONJIT_FROZEN=1`` freezes a
process from its start.
"""

from __future__ import annotations

import os

__all__ = ["freeze", "unfreeze", "is_frozen"]

_TRUE = ("1", "true", "yes", "on")
_frozen = [os.environ.get("TRITONJIT_FROZEN", "").strip().lower() in _TRUE]


def freeze() -> None:
    """From now on a launch that needs a variant not yet compiled raises FrozenError."""
    _frozen[0] = True


def unfreeze() -> None:
    """Compile missing variants on the launch path again (the default)."""
    _frozen[0] = False


def is_frozen() -> bool:
    return _frozen[0]
