"""A recording backend for exercising the core's launch path without any device.

Its launcher is the native dispatcher's ``Recorder`` (a C launch entry that records,
or only counts, what it is given instead of launching), so the whole native path
runs: bind, key, memo, lookup, C launch entry. It simulates no vendor. Used by the
core's dispatcher tests and by benchmarks/native_dispatch_cpu.py.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .._backend import BackendInfo, CompiledVariant, SpecializationRules
from .._hookspecs import hookimpl


class FakeTensor:
    """A device tensor stand-in: what the binder reads (data_ptr, dtype, get_device)."""

    def __init__(self, ptr: int, dtype: Any = None, device: int = 0) -> None:
        if dtype is None:
            import torch

            dtype = torch.float32
        self.ptr, self.dtype, self.device_index = ptr, dtype, device

    def data_ptr(self) -> int:
        return self.ptr

    def get_device(self) -> int:
        return self.device_index


class RecordingBackend:
    """Launches nothing; ``keep=False`` makes its Recorder count launches (of the native
    and the Python path alike) without recording them."""

    def __init__(self, name: str = "recording", rules: SpecializationRules | None = None,
                 keep: bool = True, devices: int = 2, max_grid: tuple[int, int, int] | None = None,
                 tuples: bool = True, packed: bool = False, layout: Any = None,
                 device_type: str = "recdev") -> None:
        self.name, self.rules, self.keep, self.devices, self.loads = (
            name, rules or SpecializationRules(), keep, devices, 0)
        self.max_grid = max_grid
        self.tuples = tuples  # False: its launch entry takes no tuple arguments (TJ_LAUNCH_F_TUPLES)
        self.packed = packed  # True: its launch entry takes buffers its callers pack (TJ_LAUNCH_F_PACKED)
        # a callable (signature, runtime_params) -> layout in place of pack_layout, kept unchecked:
        # for tests that callers refuse a launcher's bad layout
        self.layout = layout
        # torch's name for its devices; "cpu" lets the C++ API answer the current device and
        # stream without asking Python, as it does for CUDA (for CPU-side timing of that path)
        self.device_type = device_type

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name=self.name, priority=-1000, device_type=self.device_type, dispatch_key="PrivateUse1",
                           max_grid=self.max_grid)

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        return True, "recording backend (launches nothing)"

    @hookimpl
    def device_count(self) -> int:
        return self.devices

    @hookimpl
    def current_device(self) -> int:
        return 0

    @hookimpl
    def device_of(self, tensor: Any) -> int:
        d = tensor.get_device()
        if d < 0:
            raise ValueError("expected a recdev tensor, got a CPU tensor")
        return d

    @hookimpl
    def current_stream(self, device: int) -> int:
        return 1000 + device

    @hookimpl
    def device_guard(self, device: int) -> Any:
        return contextlib.nullcontext()

    @hookimpl
    def compile_target(self, device: Any, arch: Any) -> Any:
        return ("recdev", device)

    @hookimpl
    def specialization_rules(self) -> SpecializationRules:
        return self.rules

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> CompiledVariant:
        return CompiledVariant(name=src.fn.fn.__name__, signature="", target=target, binary=None,
                               metadata=dict(options), hash="")

    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> Any:
        self.loads += 1
        return None

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> Any:
        from .. import _native

        if self.layout is not None:
            return _native.dispatch.Recorder(keep=self.keep, tuples=self.tuples, check_layout=False,
                                             layout=self.layout(kernel.signature, kernel.runtime_params))
        layout = pack_layout(kernel.signature, kernel.runtime_params) if self.packed else None
        return _native.dispatch.Recorder(keep=self.keep, tuples=self.tuples, layout=layout)

    @hookimpl
    def pack_args(self, state: Any, args: Any) -> Any:
        return args

    @hookimpl
    def launch(self, state: Any, grid: Any, stream: int, packed: Any) -> None:
        state(grid, stream, packed)

    @hookimpl
    def make_launcher(self, state: Any) -> Any:
        return state


#: tritonjit_launch.h's tj_pack_code of each scalar type a recorder packs
PACK_CODES = {"i32": 2, "i64": 3, "u64": 4, "fp32": 5, "fp64": 6, "i1": 7, "u1": 7}
PACK_PTR, PACK_SKIP = 1, 0


def pack_layout(signature: str, runtime_params: Any = None) -> tuple[tuple[int, int], ...] | None:
    """The recorder's parameter buffer for a variant: ``(offset, code)`` per kernel
    parameter, each device parameter at the next multiple of its size (8 for a pointer),
    skipped ones at a slot past them all; None where a parameter is a tuple, a descriptor
    or a type the recorder does not pack (its callers then hand over tj_args)."""
    from .._flatten import runtime_plan
    from .._signature import _split

    n_params = len([t for t in _split(signature) if t.strip()])
    plan = runtime_plan(signature, runtime_params)
    sizes = {2: 4, 5: 4, 7: 1}
    at, slots = 0, {}
    for p in plan:
        if not p.is_plain:
            return None
        ty = p.leaves[0][1]
        code = PACK_PTR if ty.startswith("*") else PACK_CODES.get(ty)
        if code is None:
            return None
        size = sizes.get(code, 8)
        at = (at + size - 1) // size * size
        slots[p.index] = (at, code)
        at += size
    sink = (at + 7) // 8 * 8 + 8
    return tuple(slots.get(i, (sink, PACK_SKIP)) for i in range(n_params))
