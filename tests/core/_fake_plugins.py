"""Fake backend plugins for the discovery tests: entry points and plugin module text.

The ``plugin_modules`` fixture (conftest.py) writes such modules where they import."""
from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint

from tritonjit._registry import ENTRY_POINT_GROUP

#: a plugin module: an interpreter-like backend named ``{name}`` (``PLUGIN.format(name=...)``)
PLUGIN = textwrap.dedent('''\
    from tritonjit.interpreter import InterpreterBackend
    from tritonjit import BackendInfo, hookimpl


    class Plugin(InterpreterBackend):
        @hookimpl
        def backend_info(self):
            return BackendInfo(name={name!r}, priority=5, triton_backend="interpreter", device_type="cpu")


    plugin = Plugin()
''')


def ep(name: str, value: str) -> EntryPoint:
    """An entry point of the ``tritonjit.backends`` group."""
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)
