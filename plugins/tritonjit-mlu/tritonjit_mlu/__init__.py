"""tritonjit backend plugin for Cambricon MLUs.

Registered through the ``tritonjit.backends`` entry point as ``mlu``: CNDrv driven
through ctypes with FlagTree's Cambricon launch rules. README.md says what was
verified against a simulated driver and what needs hardware.
"""

from ._driver import ENV_DRIVER
from ._plugin import MluBackend, plugin

__all__ = ["ENV_DRIVER", "MluBackend", "plugin"]
