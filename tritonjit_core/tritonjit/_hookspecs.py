"""The backend contract: the pluggy hook specifications every backend plugin implements.

A backend plugin is one object (a module or an instance) registered under the entry
point group ``tritonjit.backends``. Each plugin is one backend. The runtime calls the
hooks below through pluggy only to discover and validate plugins; after that it
resolves each plugin's implementations once (:class:`tritonjit.Backend`) and calls
them directly, so the per-launch hot path never pays for a hook relay.

:class:`BackendSpec` is the one list of the contract: :data:`HOOKS`, :data:`REQUIRED`
and :data:`OPTIONAL` are read off it, and a hook marked :func:`optional` has a default
in the core. The registry, the :class:`tritonjit.Backend` fields and the hook table of
docs/plugin-guide.md follow it (tests/core/test_contract.py holds them equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence, TypeVar

import pluggy

if TYPE_CHECKING:
    from ._backend import BackendInfo, CompiledVariant, SpecializationRules

PROJECT = "tritonjit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

_F = TypeVar("_F", bound=Callable[..., Any])
_OPTIONAL_MARK = f"{PROJECT}_optional"


def optional(spec: _F) -> _F:
    """Mark a hookspec optional: the core has a default, so a plugin may leave it out."""
    setattr(spec, _OPTIONAL_MARK, True)
    return spec


class BackendSpec:
    """Hook specifications of a backend policy (names follow libtriton_jit's split)."""

    # ---- identity and availability -------------------------------------------------
    @hookspec
    def backend_info(self) -> BackendInfo:
        """Static facts: name, priority, Triton target family, warp size, dispatch key,
        binary kind. Called once at discovery."""

    @hookspec
    def availability(self) -> tuple[bool, str]:
        """(available, reason). The reason says which library or device was looked for
        and not found, for ``tritonjit info``. Must never raise."""

    # ---- devices and streams ------------------------------------------------------
    @hookspec
    def device_count(self) -> int:
        """Number of devices this backend drives (0 when unavailable)."""

    @hookspec
    def current_device(self) -> int:
        """Index of the current device of the calling thread."""

    @hookspec
    def device_of(self, tensor: Any) -> int:
        """Device index of a tensor argument; raise :class:`tritonjit.ArgumentError`-
        friendly ``ValueError`` when the tensor does not live on this backend."""

    @hookspec
    def current_stream(self, device: int) -> int:
        """Raw handle of the stream that launches on ``device`` go to by default."""

    @hookspec
    def device_guard(self, device: int) -> ContextManager[None]:
        """A context manager making ``device`` current (for launches and allocations)."""

    # ---- device facts (the autotuner asks them instead of branching on a device type) ----
    @optional
    @hookspec
    def synchronize(self, device: int) -> None:
        """Block until the work queued on ``device`` is done. Default: nothing (a
        backend whose launches return when the work is done)."""

    @optional
    @hookspec
    def benchmarker(self) -> Callable[[Callable[[], Any]], float] | None:
        """A callable ``bench(fn) -> ms``: the median time of the zero-argument ``fn``
        on the current device (Triton's ``DriverBase.get_benchmarker()``). Default
        (or None): the core's wall clock around ``synchronize``."""

    @optional
    @hookspec
    def device_name(self, device: int) -> str:
        """The model of ``device`` ("NVIDIA H200"); tuned configs are stored per device
        name. Default: the backend name and compile target alone name it."""

    # ---- compilation ----------------------------------------------------------------
    @hookspec
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        """Triton ``GPUTarget`` for a device of this machine (``arch`` None) or for a
        named architecture (``arch`` like "90" or "gfx942"), with no device needed."""

    @optional
    @hookspec
    def specialization_rules(self) -> SpecializationRules:
        """Changes to Triton's specialization rules (the NPU disables the equal-to-1
        rule, for example). Default: Triton's own rules."""

    @optional
    @hookspec
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        """Compile a Triton ``ASTSource`` for ``target``. The default calls
        ``triton.compile``; a backend whose compiler is not Triton's (the interpreter)
        returns its own artifact object."""

    # ---- the kernel lifecycle: load -> prepare -> pack_args -> launch -------------------
    @hookspec
    def load(self, kernel: CompiledVariant, device: int) -> Any:
        """Binary -> module and function handles on ``device``. Called once per device
        and variant; the core's module cache keeps the result."""

    @hookspec
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> Any:
        """Per-kernel launch state: shared-memory opt-in, scratch requirements,
        argument layout. Returned object is passed to ``pack_args`` and ``launch``."""

    @hookspec
    def pack_args(self, state: Any, args: Sequence[Any]) -> Any:
        """Turn the runtime (non-constexpr) arguments into the device ABI."""

    @hookspec
    def launch(self, state: Any, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        """Enqueue the kernel on ``stream``."""

    @optional
    @hookspec
    def make_launcher(self, state: Any) -> Any:
        """A single callable ``launcher(grid, stream, args)`` that fuses pack_args and
        launch (typically compiled code). The core prefers it on the hot path when
        present."""


def _hooks_of(spec: type) -> tuple[str, ...]:
    """The hookspecs of a spec class, in the order they are written."""
    return tuple(name for name, fn in vars(spec).items() if hasattr(fn, f"{PROJECT}_spec"))


#: every hook of the contract, in the order of :class:`BackendSpec`
HOOKS: tuple[str, ...] = _hooks_of(BackendSpec)
#: hooks with a default in the core (marked :func:`optional`)
OPTIONAL: tuple[str, ...] = tuple(h for h in HOOKS if getattr(getattr(BackendSpec, h), _OPTIONAL_MARK, False))
#: hooks every plugin must implement
REQUIRED: tuple[str, ...] = tuple(h for h in HOOKS if h not in OPTIONAL)
