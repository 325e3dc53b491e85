"""Module-level functions of the public API: backend discovery and selection."""

from __future__ import annotations

from ._backend import Backend
from ._registry import BrokenPlugin, registry


def backends() -> list[Backend]:
    """Every discovered backend, highest priority first; each knows its availability
    (``b.is_available()`` -> (ok, reason))."""
    return registry.backends()


def broken_plugins() -> list[BrokenPlugin]:
    """Entry points that failed to import or validate, with the reason."""
    registry.discover()
    return list(registry.broken)


def set_backend(name: str | None) -> Backend | None:
    """Make ``name`` the active backend (None: back to automatic selection).

    Raises :class:`tritonjit.BackendError` for an unknown or unavailable backend,
    listing the known ones.
    """
    return registry.set_current(name)


def current_backend() -> Backend:
    """The active backend: set_backend(), else $TRITONJIT_BACKEND, else the
    highest-priority available backend (the interpreter when nothing else is)."""
    return registry.current()


def get_backend(name: str) -> Backend:
    """A discovered backend by name."""
    return registry.get(name)


def register_backend(plugin: object) -> Backend:
    """Register a backend plugin object directly (tests, notebooks); installed
    plugins are found through the ``tritonjit.backends`` entry points instead."""
    registry.discover()
    return registry.register(plugin, dist=None)


def unregister_backend(name: str) -> None:
    registry.unregister(name)
