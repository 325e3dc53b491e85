"""Plugin discovery and backend selection.

Plugins are found through the entry-point group ``tritonjit.backends``. One plugin
failing to import (an exception or ``sys.exit()``), or failing validation, is recorded
with its reason, naming its entry point and distribution, and never stops the others;
only a KeyboardInterrupt goes through, so Ctrl-C still stops a slow import. The
built-in interpreter is registered before any other plugin, so a third-party plugin
of the same name cannot displace it. A plugin built for another native launch ABI
than the core's is refused at registration (``_launch_abi.py``).
``TRITONJIT_DISABLE_PLUGINS=name1,name2`` (entry-point or distribution names) skips
installed plugins without importing them.
Selection order: :func:`set_backend`, else ``TRITONJIT_BACKEND``, else the
highest-priority available backend; the interpreter is the fallback.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from ._backend import Backend, BackendInfo
from ._errors import BackendError
from ._hookspecs import HOOKS, OPTIONAL, PROJECT, REQUIRED, BackendSpec
from ._launch_abi import check as check_launch_abi

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tritonjit.backends"
ENV_BACKEND = "TRITONJIT_BACKEND"
ENV_DISABLE = "TRITONJIT_DISABLE_PLUGINS"
#: the entry point of the built-in backend (tritonjit-core's own)
BUILTIN = "tritonjit.interpreter:plugin"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager with the one rule of what counts as a hook of the contract.

    A routine named like a hook but not marked ``@hookimpl`` is refused rather than
    skipped: skipped, a subclass's unmarked override of ``compile`` would hide both
    itself and the base class's hook, and the backend would silently run the core's
    default instead (libtriton_jit's ``static_assert(BackendPolicy<X>)``, at
    registration). The other way round, a routine marked ``@hookimpl`` under a name
    that is no hook (a typo: ``compiel``) is refused too, where pluggy would register
    it and never call it. Only names of hooks go through pluggy's own (slow, static)
    attribute lookup: the rest of a plugin's ~60 attributes, at every discovery, are
    read from the class dictionaries.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(BackendSpec)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if name not in HOOKS:
            if not name.startswith("__") and _marked(_raw_attr(plugin, name)):
                raise pluggy.PluginValidationError(
                    plugin, f"{_defined_in(plugin, name)}.{name} is marked @hookimpl, but tritonjit has no hook "
                    f"named '{name}' (a misspelt hook is never called); the hooks are: {', '.join(HOOKS)}")
            return None
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in HOOKS and _is_routine(plugin, name):
            owner = _defined_in(plugin, name)
            raise pluggy.PluginValidationError(
                plugin, f"{owner}.{name} is named like the '{name}' hook but is not marked @hookimpl "
                "(an unmarked override hides the hook it replaces); decorate it with "
                "tritonjit.hookimpl, or rename it if it is not meant as the hook")
        return opts


_IMPL_MARK = f"{PROJECT}_impl"  # the attribute pluggy's HookimplMarker sets on a function


def _raw_attr(plugin: Any, name: str) -> Any:
    """``plugin.name`` as stored (instance or module dictionary, then the classes of the MRO),
    running no descriptor; None when absent."""
    if isinstance(plugin, type):  # a class registered as the plugin
        mro: tuple[type, ...] = plugin.__mro__
    else:
        own = getattr(plugin, "__dict__", None)
        if isinstance(own, dict) and name in own:
            return own[name]
        mro = type(plugin).__mro__
    for cls in mro:
        if name in vars(cls):
            return vars(cls)[name]
    return None


def _marked(attr: Any) -> bool:
    """Whether a stored attribute is a function marked ``@hookimpl`` (through static- and
    classmethod wrappers)."""
    fn = getattr(attr, "__func__", attr) if isinstance(attr, (staticmethod, classmethod)) else attr
    return inspect.isroutine(fn) and getattr(fn, _IMPL_MARK, None) is not None


def _is_routine(plugin: Any, name: str) -> bool:
    """Whether ``plugin.name`` is a function or method, read without running descriptors."""
    attr = _raw_attr(plugin, name)
    return isinstance(attr, (staticmethod, classmethod)) or inspect.isroutine(attr)


def _defined_in(plugin: Any, name: str) -> str:
    """Where ``name`` is written: the class of the MRO that defines it, or the module."""
    if inspect.ismodule(plugin):
        return plugin.__name__
    for cls in type(plugin).__mro__:
        if name in vars(cls):
            return cls.__qualname__
    return type(plugin).__qualname__


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that could not be turned into a backend, and why."""

    name: str
    dist: str | None
    reason: str
    value: str | None = None  # the entry point's "module:object"


@dataclass(frozen=True)
class DisabledPlugin:
    """An entry point skipped, unimported, because TRITONJIT_DISABLE_PLUGINS names it."""

    name: str
    dist: str | None
    value: str


def disabled_names() -> frozenset[str]:
    """The names in ``TRITONJIT_DISABLE_PLUGINS`` (comma-separated, blanks ignored)."""
    return frozenset(n.strip() for n in os.environ.get(ENV_DISABLE, "").split(",") if n.strip())


class Registry:
    """Holds the plugin manager, the resolved backends and the current selection."""

    def __init__(self) -> None:
        self.pm = PluginManager()
        self._backends: dict[str, Backend] = {}
        self.broken: list[BrokenPlugin] = []
        self.disabled: list[DisabledPlugin] = []
        #: [current backend or None]: the native dispatcher reads the selection from this
        #: list without an attribute lookup per launch
        self.current_cell: list[Backend | None] = [None]
        self._lock = threading.RLock()
        self._discovered = False
        #: entry points already imported or skipped, as (name, value): a lookup by name
        #: imports its own plugin early, and the full discovery must not import it twice
        self._seen: set[tuple[str, str]] = set()

    @property
    def _current(self) -> Backend | None:
        return self.current_cell[0]

    @_current.setter
    def _current(self, backend: Backend | None) -> None:
        self.current_cell[0] = backend

    # ---- discovery ------------------------------------------------------------------
    def discover(self, name: str | None = None) -> None:
        """Import and register every installed plugin (once per process); with ``name``,
        only the built-in backend and the entry points called ``name``.

        Why the name: a process that names its backend (a target ``cuda:90``,
        ``TRITONJIT_BACKEND``) needs that one plugin; importing every installed plugin first
        is most of a warm start. The rules are the same either way: the built-in registers
        first, a disabled plugin is not imported, a second plugin of one name is refused,
        and an entry point is loaded once however often it is asked for.
        """
        with self._lock:
            if self._discovered:
                return
            if name is None:
                self._discovered = True
            off = disabled_names()
            for ep in _builtin_first(_entry_points()):
                if name is None or ep.value == BUILTIN or ep.name == name:
                    self._consider(ep, off)

    def _consider(self, ep: metadata.EntryPoint, off: frozenset[str]) -> None:
        """Load one entry point unless it was seen already or is disabled."""
        key = (ep.name, ep.value)
        if key in self._seen:
            return
        self._seen.add(key)
        found = getattr(ep, "dist", None)
        dist = found.name if found is not None else None
        if ep.value != BUILTIN and (ep.name in off or dist in off):
            log.info("backend plugin '%s' (%s) disabled by %s", ep.name, dist or "?", ENV_DISABLE)
            self.disabled.append(DisabledPlugin(ep.name, dist, ep.value))
            return
        self._load(ep, dist)

    def _load(self, ep: metadata.EntryPoint, dist: str | None) -> None:
        """Import and register one entry point; whatever it raises (SystemExit too, but
        not KeyboardInterrupt) makes it a broken plugin instead of stopping discovery."""
        try:
            plugin = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._broken(ep, dist, f"import of '{ep.value}' failed: {_describe(exc)}")
            return
        try:
            self.register(plugin, dist=dist, entry_name=ep.name)
        except BackendError as exc:
            self._broken(ep, dist, str(exc))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._broken(ep, dist, f"registering '{ep.value}' failed: {_describe(exc)}")

    def _broken(self, ep: metadata.EntryPoint, dist: str | None, reason: str) -> None:
        log.warning("backend plugin '%s' (%s, entry point %s) skipped: %s",
                    ep.name, dist or "?", ep.value, reason)
        self.broken.append(BrokenPlugin(ep.name, dist, reason, ep.value))

    def register(self, plugin: Any, dist: str | None = None, entry_name: str | None = None) -> Backend:
        """Validate a plugin object against the hookspecs and resolve its hooks."""
        label: str = entry_name or getattr(plugin, "__name__", None) or type(plugin).__name__
        check_launch_abi(plugin, label, dist)  # before any hook: a mismatched C launcher is never used
        try:
            self.pm.register(plugin, name=f"tritonjit-backend:{label}:{id(plugin)}")
        except (ValueError, pluggy.PluginValidationError) as exc:
            if isinstance(exc, pluggy.PluginValidationError) and self.pm.is_registered(plugin):
                self.pm.unregister(plugin)  # older pluggy registers part of a plugin before failing
            raise BackendError(f"plugin '{label}' does not fit the hookspecs: {exc}") from exc
        impls = _resolve(self.pm, plugin)
        missing = [h for h in REQUIRED if h not in impls]
        if missing:
            self.pm.unregister(plugin)
            raise BackendError(f"plugin '{label}' lacks required hooks: {', '.join(missing)}")
        try:
            info = impls["backend_info"]()
            if not isinstance(info, BackendInfo):
                raise TypeError(f"backend_info returned {type(info).__name__}, expected BackendInfo")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self.pm.unregister(plugin)
            raise BackendError(f"plugin '{label}': backend_info failed: {_describe(exc)}") from exc
        with self._lock:
            if info.name in self._backends:
                self.pm.unregister(plugin)
                raise BackendError(_duplicate(info.name, dist or label or "?", self._backends[info.name]))
            fields = {k: impls[k] for k in REQUIRED if k != "backend_info"}
            fields.update({k: impls[k] for k in OPTIONAL if k in impls})
            backend = Backend(info=info, plugin=plugin, dist=dist, **fields)
            self._backends[info.name] = backend
        return backend

    def unregister(self, name: str) -> None:
        with self._lock:
            backend = self._backends.pop(name)
            self.pm.unregister(backend.plugin)
            if self._current is backend:
                self._current = None

    # ---- queries --------------------------------------------------------------------
    def backends(self) -> list[Backend]:
        self.discover()
        # by name among equal priorities: the order must not depend on which backend a
        # lookup by name imported first
        return sorted(self._backends.values(), key=lambda b: (-b.info.priority, b.info.name))

    def get(self, name: str) -> Backend:
        """The backend called ``name``; its own entry point is imported first and the
        others only when it is not found there (a plugin may name its entry point
        differently from its backend)."""
        backend = self._backends.get(name)
        if backend is not None:
            return backend
        self.discover(name)
        backend = self._backends.get(name)
        if backend is not None:
            return backend
        self.discover()
        try:
            return self._backends[name]
        except KeyError:
            known = ", ".join(sorted(self._backends)) or "none"
            broken = "".join(f"; plugin '{b.name}' is broken: {b.reason}" for b in self.broken if b.name == name)
            off = "".join(f"; plugin '{d.name}' is disabled by {ENV_DISABLE}" for d in self.disabled if d.name == name)
            raise BackendError(f"unknown backend '{name}' (known backends: {known}){broken}{off}") from None

    def set_current(self, name: str | None) -> Backend | None:
        with self._lock:
            if name is None:
                self._current = None
                return None
            backend = self.get(name)
            ok, why = backend.is_available()
            if not ok:
                raise BackendError(f"backend '{name}' is not available: {why}")
            self._current = backend
            return backend

    def current(self) -> Backend:
        backend = self._current
        if backend is not None:
            return backend
        with self._lock:
            if self._current is None:
                self._current = self._select()
            return self._current

    def _select(self) -> Backend:
        wanted = os.environ.get(ENV_BACKEND)
        if wanted:
            backend = self.get(wanted)
            ok, why = backend.is_available()
            if not ok:
                raise BackendError(f"{ENV_BACKEND}={wanted}, but that backend is not available: {why}")
            return backend
        for backend in self.backends():
            if backend.available:
                return backend
        reasons = "; ".join(f"{b.name}: {b.is_available()[1]}" for b in self.backends()) or "no plugin is installed"
        raise BackendError(f"no backend is available ({reasons})")


def _entry_points() -> list[metadata.EntryPoint]:
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    seen: set[tuple[str, str]] = set()
    out = []
    for ep in eps:  # one distribution found twice on sys.path must not count twice
        key = (ep.name, ep.value)
        if key not in seen:
            seen.add(key)
            out.append(ep)
    return out


def _builtin_first(eps: list[metadata.EntryPoint]) -> list[metadata.EntryPoint]:
    """The built-in backend's entry point before every other: it registers its name
    first, so a third-party plugin of the same name is the one refused."""
    return sorted(eps, key=lambda ep: ep.value != BUILTIN)


def _is_builtin(backend: Backend) -> bool:
    from . import interpreter

    return backend.plugin is interpreter.plugin


def _duplicate(name: str, newcomer: str, kept: Backend) -> str:
    """Why a second plugin of one backend name is refused."""
    if _is_builtin(kept):
        return (f"plugin '{newcomer}' is named '{name}', the name of tritonjit's built-in backend, which is kept; "
                "give the plugin's BackendInfo another name")
    other = kept.dist or "a plugin registered earlier"
    return f"two plugins are named '{name}': {newcomer} and {other}; uninstall one of them"


def _describe(exc: BaseException) -> str:
    """An exception as ``Type: message``; a SystemExit says that the plugin tried to exit."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the plugin called sys.exit() (a plugin must never end the process)"
    return f"{type(exc).__name__}: {exc}"


def _resolve(pm: pluggy.PluginManager, plugin: Any) -> dict[str, Any]:
    """The plugin's own implementation function of each hook, looked up once."""
    impls: dict[str, Any] = {}
    for hook_name in HOOKS:
        caller = getattr(pm.hook, hook_name)
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                impls[hook_name] = impl.function
    return impls


registry = Registry()
