"""tritonjit backend plugin for Enflame GCUs.

Registered through the ``tritonjit.backends`` entry point as ``gcu``: Enflame's
TopsRT driven through tritonjit.pluginkit's CUDA-like driver binding. README.md says
what was verified against a simulated driver and what needs hardware.
"""

from ._plugin import ENV_DRIVER, GRID_LIMITS, GcuBackend, plugin

__all__ = ["ENV_DRIVER", "GRID_LIMITS", "GcuBackend", "plugin"]
