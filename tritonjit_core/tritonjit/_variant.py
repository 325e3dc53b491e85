"""A variant ready to launch, how one is made (load -> prepare -> launcher), and the
module cache every plugin shares.

Kept apart from the runtime object (``_function.py``) because the C++ API, the warm-up
and the conformance suite make variants too, and all of them must share loaded modules.
"""

from __future__ import annotations

import threading
from operator import itemgetter
from typing import Any, Callable, Sequence

from ._backend import Backend, CompiledVariant, call_hook
from ._errors import HookError
from ._signature import Slot, has_descriptor, render

__all__ = ["Variant", "make_variant", "ModuleCache", "module_cache"]


class Variant:
    """A compiled, loaded and prepared variant on one device: ready to launch."""

    __slots__ = ("compiled", "slots", "runtime_args", "launcher", "device", "state", "native")

    def __init__(self, compiled: CompiledVariant, slots: Sequence[Slot], device: int,
                 state: Any, launcher: Callable[[tuple, int, tuple], None]) -> None:
        self.compiled = compiled
        self.slots = tuple(slots)
        self.device = device
        self.state = state
        idx = [i for i, s in enumerate(slots) if not s.is_constant]
        if len(idx) == 0:
            self.runtime_args: Callable[[tuple], tuple] = lambda a: ()
        elif len(idx) == 1:
            i0 = idx[0]
            self.runtime_args = lambda a: (a[i0],)
        else:
            self.runtime_args = itemgetter(*idx)
        self.launcher = launcher
        # the backend's C launch entry (tritonjit_launch.h), used by the native dispatcher.
        # Tuples reach it as TJ_ARG_TUPLE where it announces TJ_LAUNCH_F_TUPLES (the
        # dispatcher checks); descriptors, which a host fills per launch, keep to Python
        self.native = None if any(has_descriptor(s) for s in slots) else getattr(launcher, "tritonjit_launch", None)

    @property
    def signature(self) -> str:
        return render(self.slots)


def make_variant(backend: Backend, compiled: CompiledVariant, slots: Sequence[Slot], device: int,
                 kernel: str | None = None) -> Variant:
    """load -> prepare -> the launcher, through the backend's resolved functions; what
    a hook raises (not tritonjit's own errors) becomes a HookError naming it."""
    handle = module_cache.load(backend, compiled, device, kernel)
    state = call_hook(backend, "prepare", compiled, handle, device, kernel=kernel)
    launcher = call_hook(backend, "make_launcher", state, kernel=kernel) if backend.make_launcher is not None else None
    if launcher is not None and not callable(launcher):
        raise HookError.returned(backend.name, "make_launcher", launcher,
                                 "a callable launcher(grid, stream, args), or None", kernel)
    if launcher is None:
        pack, launch = backend.pack_args, backend.launch

        def launcher(grid: tuple, stream: int, args: tuple, _s: Any = state) -> None:
            launch(_s, grid, stream, pack(_s, args))
    return Variant(compiled, slots, device, state, launcher)


class ModuleCache:
    """(backend, artifact hash, device) -> loaded module handle, shared by all plugins.

    Kept for the life of the process: one entry per distinct artifact and device, so
    the kernels of one source share a module however many runtime objects wrap them.
    A variant without a hash (the interpreter's, a test backend's) is loaded but not
    kept: nothing could share it, and keying it by the object's id would hand a later
    variant that reuses the id a module that is not its own."""

    def __init__(self) -> None:
        self._handles: dict[tuple[str, str, int], Any] = {}
        self._lock = threading.Lock()

    def load(self, backend: Backend, compiled: CompiledVariant, device: int, kernel: str | None = None) -> Any:
        if not compiled.hash:
            return call_hook(backend, "load", compiled, device, kernel=kernel)
        key = (backend.name, compiled.hash, device)
        handle = self._handles.get(key)
        if handle is None:
            with self._lock:
                handle = self._handles.get(key)
                if handle is None:
                    handle = call_hook(backend, "load", compiled, device, kernel=kernel)
                    self._handles[key] = handle
        return handle

    def clear(self) -> None:
        with self._lock:
            self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)


module_cache = ModuleCache()
