"""Temporarily make a plugin object THE backend of its name in the process registry."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._backend import Backend
from .._registry import registry


@contextlib.contextmanager
def installed_as_current(plugin: Any) -> Iterator[Backend]:
    """Register ``plugin`` in place of the installed backend of the same name, select
    it, and restore both on exit, so ``tritonjit.function(k)[grid](...)`` runs the
    real user path through it (e.g. against a simulated driver)."""
    registry.discover()
    name = plugin.backend_info().name
    previous_current = registry._current
    original = registry._backends.get(name)
    if original is not None:
        registry.unregister(name)
    backend = registry.register(plugin, dist="tritonjit.testing")
    try:
        registry.set_current(name)
        yield backend
    finally:
        registry.unregister(name)
        restored = registry.register(original.plugin, dist=original.dist) if original is not None else None
        registry._current = restored if previous_current is original and original is not None else (
            None if previous_current is original else previous_current)
