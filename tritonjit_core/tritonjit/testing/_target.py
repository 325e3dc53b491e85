"""What a backend tells the conformance suite about itself."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._backend import CompiledVariant


@dataclass
class LaunchCheck:
    """One launch the suite made, for the target's verifier to confirm."""

    kernel: str
    compiled: CompiledVariant
    grid: tuple[int, int, int]
    stream: int
    args: tuple  # the runtime arguments: (x, y, out, n, alpha)
    block_x: int  # num_warps x the variant's warp size


@dataclass
class ConformanceTarget:
    """A backend under test. Give a FRESH plugin object, not the installed one.

    ``variant(fn, signature, options)`` returns a compiled variant of the suite's
    kernel for this backend (a real compile where this machine can do one, else a
    stand-in binary, and say which in the plugin's README); ``make_args(n)`` returns
    ``(x, y, out)`` pointer arguments of ``n`` fp32 elements; ``verify(checks)``
    asserts the launches happened as described (results on a real device or the
    interpreter; recorded calls on a simulated driver).
    """

    plugin: Any
    name: str
    variant: Callable[[Any, str, dict], CompiledVariant]
    verify: Callable[[Sequence[LaunchCheck]], None]
    make_args: Callable[[int], tuple] | None = None
    entry_point: str | None = None  # its name in the tritonjit.backends entry points
    arch: str | None = None  # an architecture compile_target(None, arch) accepts with no device
    before_load: Callable[[CompiledVariant], None] | None = None
    unavailable_plugin: Callable[[], Any] | None = None  # the plugin with its library missing
    missing_library: str | None = None  # that plugin's availability reason must name this
    max_shared: int | None = None  # the device's shared-memory limit per block; None: no limit
    corrupt_binary_fails: bool = True  # load() of garbage bytes must raise
    inject_failure: Callable[[], None] | None = None  # make the driver fail the next launch
    stream: int = 0
    device: int = 0
    simulated: bool = False  # results come from a simulated driver
    extra: dict[str, Any] = field(default_factory=dict)


def default_args(n: int) -> tuple:
    """Host tensors (real memory with data_ptr) for drivers that execute nothing."""
    import torch

    return (torch.arange(n, dtype=torch.float32), torch.ones(n, dtype=torch.float32),
            torch.zeros(n, dtype=torch.float32))


# ---- simulated drivers -------------------------------------------------------------------------
_SIZES = {"i1": ("b", 1), "i8": ("b", 1), "i16": ("h", 2), "i32": ("i", 4), "i64": ("q", 8), "u1": ("B", 1),
          "u8": ("B", 1), "u16": ("H", 2), "u32": ("I", 4), "u64": ("Q", 8), "fp16": ("e", 2),
          "fp32": ("f", 4), "fp64": ("d", 8)}


def expected_params(compiled: CompiledVariant, args: Sequence[Any]) -> tuple[bytes, ...]:
    """Each kernel parameter's bytes, encoded here independently of the plugin's packer:
    the runtime arguments by their Triton type, then the scratch pointers (NULL) that
    the compiler's metadata says the kernel takes."""
    types = [t.split(":")[0] for t in compiled.signature.split(",")
             if (t.startswith("*") or t.split(":")[0] in _SIZES) and not t.endswith(":1")]
    assert len(types) == len(args), f"{len(types)} runtime types for {len(args)} arguments"
    out = []
    for ty, a in zip(types, args):
        if ty.startswith("*"):
            out.append(struct.pack("<Q", a.data_ptr() if hasattr(a, "data_ptr") else int(a)))
        else:
            code, _ = _SIZES[ty]
            out.append(struct.pack("<" + code, float(a) if code in "efd" else int(a)))
    md = compiled.metadata
    scratch = 2 if "profile_scratch_size" in md else 1 if "global_scratch_size" in md else 0
    out += [b"\0" * 8] * scratch
    return tuple(out)


def simulated_target(plugin: Any, sim: Any, name: str, variant: Callable[[Any, str, dict], CompiledVariant], *,
                     param_sizes: Callable[[CompiledVariant], Sequence[int]] | None = None,
                     launch_symbol: str, stream: int = 0x5EED, **kw: Any) -> ConformanceTarget:
    """A target whose plugin runs against a :class:`tritonjit.pluginkit.SimulatedDriver`.

    ``param_sizes(compiled)`` gives the parameter sizes the simulated driver checks
    (default: from the signature, encoded independently of the plugin); pass the
    compiler's own kernarg metadata where it exists (AMD's ``.args``).
    """

    def before_load(compiled: CompiledVariant) -> None:
        if param_sizes is not None:
            sizes = list(param_sizes(compiled))
        else:
            sizes = [len(b) for b in expected_params(compiled, _dummy_args(compiled))]
        sim.expect_params(compiled.name, sizes)

    def verify(checks: Sequence[LaunchCheck]) -> None:
        records = sim.launches()[-len(checks):]
        assert len(records) == len(checks), f"simulated driver recorded {len(records)} launches, expected {len(checks)}"
        got = Counter((r.kernel, r.grid, r.block, r.shared, r.stream, r.params) for r in records)
        want = Counter((c.kernel, c.grid, (c.block_x, 1, 1), c.compiled.shared, c.stream,
                        expected_params(c.compiled, c.args)) for c in checks)
        assert got == want, f"recorded launches differ from the expected ones:\n got  {got}\n want {want}"

    return ConformanceTarget(plugin=plugin, name=name, variant=variant, verify=verify, make_args=default_args,
                             before_load=before_load, inject_failure=lambda: sim.fail_next(launch_symbol, 1),
                             stream=stream, simulated=True, **kw)


def _dummy_args(compiled: CompiledVariant) -> list[Any]:
    types = [t.split(":")[0] for t in compiled.signature.split(",")
             if (t.startswith("*") or t.split(":")[0] in _SIZES) and not t.endswith(":1")]
    return [0 if ty.startswith("*") or not ty.startswith("fp") else 0.0 for ty in types]


class HostBackedTensor:
    """A host tensor presented as living on a vendor device, for SIMULATED drivers:
    ``data_ptr()`` and ``dtype`` are the host tensor's, ``device`` says the vendor's
    type, so a backend's ``device_of`` accepts it on the user path."""

    def __init__(self, tensor: Any, device_type: str, index: int = 0) -> None:
        from types import SimpleNamespace

        self.host = tensor
        self.dtype = tensor.dtype
        self.device = SimpleNamespace(type=device_type, index=index)

    def data_ptr(self) -> int:
        return self.host.data_ptr()
