"""The native launch ABI (``_native/tritonjit_launch.h``) as Python sees it, and its check.

A plugin with a C launcher is compiled against a copy of the core's header; a core
and a plugin built from different versions of it would misread each other's
``tj_launch`` struct. So a plugin declares the ABI it was built for, as the
attribute ``tritonjit_launch_abi`` of its plugin object (the CUDA plugin reads it
from its C extension), and the registry refuses a plugin whose ABI differs from
the core's, before any hook of it is resolved: it becomes a broken plugin whose
reason names the plugin, its ABI and the core's. A plugin without a C launch entry
declares nothing and is not checked. The dispatcher also compares the ``abi`` field
of every capsule it is handed (a second line for plugins that declare nothing).
"""

from __future__ import annotations

from typing import Any

from ._errors import BackendError

#: TJ_LAUNCH_ABI of tritonjit_launch.h (a test holds the two equal, and the C dispatcher's)
LAUNCH_ABI = 1
#: TJ_LAUNCH_CAPSULE of tritonjit_launch.h
LAUNCH_CAPSULE = "tritonjit.launch.v1"
#: the plugin object's attribute that declares the ABI its C launcher was built for
ATTRIBUTE = "tritonjit_launch_abi"


def declared_abi(plugin: Any) -> int | None:
    """The launch ABI a plugin declares, or None where it declares none."""
    value = getattr(plugin, ATTRIBUTE, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BackendError(f"{ATTRIBUTE} must be an int (the TJ_LAUNCH_ABI the plugin was built with), "
                           f"got {value!r}")
    return value


def check(plugin: Any, label: str, dist: str | None) -> None:
    """Raise BackendError where ``plugin`` was built for another launch ABI than this core's."""
    abi = declared_abi(plugin)
    if abi is None or abi == LAUNCH_ABI:
        return
    from . import __version__

    who = f"plugin '{label}'" + (f" ({dist})" if dist else "")
    raise BackendError(
        f"{who} was built for tritonjit's native launch ABI {abi}, but this tritonjit-core {__version__} "
        f"has launch ABI {LAUNCH_ABI} (tritonjit_launch.h, capsule '{LAUNCH_CAPSULE}'); install versions of "
        f"the plugin and tritonjit-core that match (upgrade or downgrade one of them)")
