"""What a backend plugin declares, and the resolved object the runtime calls directly."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Sequence

from ._errors import HookError, TritonJITError

#: the grid every backend accepts, checked by the core before any launch: CUDA's
#: limits (x < 2**31, y and z < 2**16), which also fit every driver's 32-bit dims
MAX_GRID: tuple[int, int, int] = (2**31 - 1, 2**16 - 1, 2**16 - 1)


@dataclass(frozen=True)
class BackendInfo:
    """Static facts about a backend, returned by its ``backend_info`` hook.

    ``triton_backend`` is the name of Triton's compiler backend that produces its
    binaries ("cuda", "hip", ...), ``binary_ext`` the artifact extension it loads
    ("cubin", "hsaco", ...). ``priority`` orders automatic selection: the highest
    available backend wins; the built-in interpreter has the lowest. ``max_grid``
    raises the core's grid limits (:data:`MAX_GRID`) for a backend whose launch takes
    larger dimensions; a device's smaller limits are the backend's to check.
    """

    name: str
    priority: int = 0
    triton_backend: str = ""
    binary_ext: str = ""
    warp_size: int = 32
    dispatch_key: str = "PrivateUse1"
    device_type: str = ""  # torch device type of its tensors ("cuda", "npu", "cpu", ...)
    description: str = ""
    max_grid: tuple[int, int, int] | None = None  # larger (x, y, z) limits than MAX_GRID

    def __post_init__(self) -> None:
        g = self.max_grid
        if g is not None and not (isinstance(g, tuple) and len(g) == 3
                                  and all(type(v) is int and v >= 1 for v in g)):
            raise ValueError(f"backend '{self.name}': max_grid must be a tuple of 3 ints >= 1 or None, got {g!r}")

    @property
    def grid_limits(self) -> tuple[int, int, int]:
        """The largest grid the core lets through to this backend, per dimension."""
        g = self.max_grid or MAX_GRID
        return (max(g[0], MAX_GRID[0]), max(g[1], MAX_GRID[1]), max(g[2], MAX_GRID[2]))


@dataclass(frozen=True)
class SpecializationRules:
    """Switches over Triton's specialization rules that a backend may change."""

    equal_to_1: bool = True  # an int argument equal to 1 becomes a constant
    divisibility: int = 16  # pointers aligned / ints divisible by this get a hint
    align_pointers: bool = True  # pointer alignment participates at all


@dataclass
class CompiledVariant:
    """One compiled specialization of a kernel: what every backend's ``load`` reads.

    Shared mechanics (reading metadata, locating the artifact) live here once, so no
    plugin re-implements them.
    """

    name: str
    signature: str
    target: Any
    binary: bytes | None
    metadata: dict[str, Any]
    asm: dict[str, Any] = field(default_factory=dict)
    hash: str = ""
    cache_dir: str | None = None
    artifact: Any = None  # the compiler's own object (Triton's CompiledKernel, ...)
    binary_ext: str = ""  # "cubin", "hsaco", ...
    #: the kernel parameter of each argument the launcher receives, in order (set by the
    #: core; None: read from the signature, see tritonjit._flatten)
    runtime_params: tuple[int, ...] | None = None
    #: where this process got it: "compiled", "local" (tritonjit's index) or "remote"
    #: (the shared remote cache); set by the core's compile bridge
    cache_source: str = "compiled"

    @property
    def num_warps(self) -> int:
        return int(self.metadata.get("num_warps", 4))

    @property
    def shared(self) -> int:
        return int(self.metadata.get("shared", 0))

    def binary_path(self, ext: str | None = None) -> str | None:
        """Path of the artifact file (of extension ``ext``) in Triton's cache, if any."""
        ext = ext or self.binary_ext
        if self.cache_dir is None or not ext:
            return None
        import os

        path = os.path.join(self.cache_dir, f"{self.name}.{ext}")
        return path if os.path.exists(path) else None


def _default_specialization_rules() -> SpecializationRules:
    return SpecializationRules()


@dataclass
class Backend:
    """A backend plugin with its hook implementations resolved once.

    The runtime calls these attributes directly: no hook relay on the hot path. One
    field per hook of ``_hookspecs.HOOKS`` (``backend_info``'s result is ``info``),
    with a default exactly for the optional ones; written out for the type hints,
    and held equal to the spec list by tests/core/test_contract.py.
    """

    info: BackendInfo
    plugin: Any
    dist: str | None
    availability: Callable[[], tuple[bool, str]]
    device_count: Callable[[], int]
    current_device: Callable[[], int]
    device_of: Callable[[Any], int]
    current_stream: Callable[[int], int]
    device_guard: Callable[[int], ContextManager[None]]
    compile_target: Callable[[int | None, str | None], Any]
    load: Callable[[CompiledVariant, int], Any]
    prepare: Callable[[CompiledVariant, Any, int], Any]
    pack_args: Callable[[Any, Sequence[Any]], Any]
    launch: Callable[[Any, tuple[int, int, int], int, Any], None]
    synchronize: Callable[[int], None] | None = None
    benchmarker: Callable[[], Callable[[Callable[[], Any]], float] | None] | None = None
    device_name: Callable[[int], str] | None = None
    specialization_rules: Callable[[], SpecializationRules] = _default_specialization_rules
    compile: Callable[[Any, Any, dict], Any] | None = None
    make_launcher: Callable[[Any], Any] | None = None
    _avail: tuple[bool, str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def dispatch_key(self) -> str:
        return self.info.dispatch_key

    @property
    def warp_size(self) -> int:
        return self.info.warp_size

    def is_available(self) -> tuple[bool, str]:
        """Availability, asked once and remembered; a raising hook counts as 'no'."""
        if self._avail is None:
            try:
                ok, reason = self.availability()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a plugin must never break discovery, sys.exit() included
                ok, reason = False, f"availability check raised {type(exc).__name__}: {exc}"
            self._avail = (bool(ok), str(reason))
        return self._avail

    def refresh_availability(self) -> None:
        """Forget the remembered availability: the next ``is_available()`` asks the
        plugin again (after its driver library changed, e.g. a test's simulated one)."""
        with self._lock:
            self._avail = None

    @property
    def available(self) -> bool:
        return self.is_available()[0]

    def __repr__(self) -> str:
        ok, why = self.is_available()
        state = "available" if ok else f"unavailable: {why}"
        return f"<Backend {self.name!r} priority={self.info.priority} {state}>"


#: what the hooks whose results enter the launch path must return
_EXPECTED = {
    "current_device": "a device index (an int >= 0, not a bool)",
    "device_of": "a device index (an int >= 0, not a bool)",
    "current_stream": "a stream handle (an int >= 0, not a bool)",
}


def checked_index(backend: Backend, hook: str, value: Any, kernel: str | None = None) -> int:
    """A device index or stream handle from ``hook``, checked where it enters the
    runtime: an int >= 0 (a bool is a plugin bug, not device 1), else HookError naming
    the backend and the hook. Drivers take these as fixed-width integers, so garbage
    let through would select another device or stream rather than fail."""
    if value.__class__ is int and value >= 0:
        return value
    if not isinstance(value, bool):
        try:
            index = operator.index(value)
        except TypeError:
            pass
        else:
            if index >= 0:
                return index
    raise HookError.returned(backend.name, hook, value, _EXPECTED[hook], kernel)


def call_hook(backend: Backend, hook: str, *args: Any, kernel: str | None = None) -> Any:
    """``backend.<hook>(*args)`` off the hot path (a miss, an ahead-of-time compile): an
    exception that is not tritonjit's own becomes a HookError naming backend and hook."""
    try:
        return getattr(backend, hook)(*args)
    except TritonJITError:
        raise
    except Exception as exc:
        raise HookError.raised(backend.name, hook, exc, kernel) from exc


def launch_hook(backend: Backend) -> str:
    """The name of what runs a launch on ``backend``, for errors raised in it."""
    return "make_launcher's launcher" if backend.make_launcher is not None else "pack_args/launch"
