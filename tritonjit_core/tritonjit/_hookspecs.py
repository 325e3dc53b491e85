"""The backend contract: the pluggy hook specifications every backend plugin implements.

A backend plugin is one object (a module or an instance) registered under the entry
point group ``tritonjit.backends``. Each plugin is one backend. The runtime calls the
hooks below through pluggy only to discover and validate plugins; after that it
resolves each plugin's implementations once (:class:`tritonjit.Backend`) and calls
them directly, so the per-launch hot path never pays for a hook relay.

Hooks marked *optional* have a default in the core; every other hook is required.
docs/plugin-guide.md explains each hook with an example.
"""

from __future__ import annotations

from typing import Any, ContextManager, Sequence

import pluggy

PROJECT = "tritonjit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class BackendSpec:
    """Hook specifications of a backend policy (names follow libtriton_jit's split)."""

    # ---- identity and availability -------------------------------------------------
    @hookspec
    def backend_info(self) -> BackendInfo:  # noqa: F821 (defined in _backend)
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

    # ---- compilation ----------------------------------------------------------------
    @hookspec
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        """Triton ``GPUTarget`` for a device of this machine (``arch`` None) or for a
        named architecture (``arch`` like "90" or "gfx942"), with no device needed."""

    @hookspec
    def specialization_rules(self) -> SpecializationRules:  # noqa: F821
        """*Optional.* Changes to Triton's specialization rules (the NPU disables the
        equal-to-1 rule, for example)."""

    @hookspec
    def compile(self, src: Any, target: Any, options: dict) -> Any:
        """*Optional.* Compile a Triton ``ASTSource`` for ``target``. The default calls
        ``triton.compile``; a backend whose compiler is not Triton's (the interpreter)
        returns its own artifact object."""

    # ---- the kernel lifecycle: load -> prepare -> pack_args -> launch -------------------
    @hookspec
    def load(self, kernel: CompiledVariant, device: int) -> Any:  # noqa: F821
        """Binary -> module and function handles on ``device``. Called once per device
        and variant; the core's module cache keeps the result."""

    @hookspec
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> Any:  # noqa: F821
        """Per-kernel launch state: shared-memory opt-in, scratch requirements,
        argument layout. Returned object is passed to ``pack_args`` and ``launch``."""

    @hookspec
    def pack_args(self, state: Any, args: Sequence[Any]) -> Any:
        """Turn the runtime (non-constexpr) arguments into the device ABI."""

    @hookspec
    def launch(self, state: Any, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        """Enqueue the kernel on ``stream``."""

    @hookspec
    def make_launcher(self, state: Any) -> Any:
        """*Optional.* A single callable ``launcher(grid, stream, args)`` that fuses
        pack_args and launch (typically compiled code). The core prefers it on the hot
        path when present."""
