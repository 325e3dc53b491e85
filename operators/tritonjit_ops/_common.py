"""Shared helpers for the operator wrappers: launching, dtype rules, shape checks.

Everything here is on the host hot path of some operator, so it stays small and
allocation-free where it can.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl  # noqa: F401 - Triton requires it visible to the @triton.jit helper below
import tritonjit

__all__ = [
    "jit",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "is_cuda_like",
    "backend_device_type",
    "check_dtype",
    "check_same_device",
    "check_out",
    "coalesce",
    "normalize_dims",
    "next_pow2",
    "cdiv",
    "unravel4",
    "host_check_allowed",
    "DEVICE_ASSERT",
    "assert_options",
    "opmath",
    "fp32_exact",
    "deterministic",
]

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
LOW_PRECISION = (torch.float16, torch.bfloat16)


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The type aten computes a floating dtype's reductions and norms in (its opmath type):
    float64 for float64, float32 for the rest. Kernels pick the same in Triton with
    ``ACC: tl.constexpr = tl.float64 if p.dtype.element_ty == tl.float64 else tl.float32``."""
    return torch.float64 if dtype == torch.float64 else torch.float32


#: dtypes whose every value a 16-bit float holds (no rounding on the way in)
_EXACT_IN_HALF = (torch.bool, torch.uint8, torch.int8)


def rounded_to_common(common: torch.dtype, tensors: Sequence[Any]) -> bool:
    """Whether aten's kernel rounds a tensor operand to the 16-bit ``common`` dtype before it
    computes (TensorIterator casts each tensor operand to the common dtype; a CPU scalar it
    reads in opmath): an integer tensor beyond int8 (``x_bf16 + i`` takes bf16(257) = 256) or
    a 0-dim tensor of a wider float type beside ``common`` ones. tritonjit's kernels read an
    operand in its own type straight into fp32 unless told to round it first
    (elementwise.rounding_type)."""
    return common in LOW_PRECISION and any(_rounds(t, common) for t in tensors)


def _rounds(t: Any, common: torch.dtype) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype != common and t.dtype not in _EXACT_IN_HALF


def deterministic() -> bool:
    """Whether ``torch.use_deterministic_algorithms(True)`` is on. The ops that write through an
    index (sums by atomics, or a last writer that varies) then hand their calls to aten, which
    runs a deterministic algorithm for them or raises, as in eager."""
    return torch.are_deterministic_algorithms_enabled()


def fp32_exact(v: float) -> bool:
    """Whether float32 holds ``v`` exactly (NaN and the infinities included): a float scalar
    reaches a kernel as a float32 argument (Triton's rule), so a float64 computation with
    any other value would be off by up to 3e-8 relative."""
    if v != v:
        return True
    try:
        return struct.unpack("f", struct.pack("f", v))[0] == v
    except OverflowError:
        return False


def jit(kernel: Callable, key_buckets: dict | None = None) -> tritonjit.KernelFunction:
    """The tritonjit launcher for ``kernel`` (one cached instance per kernel).

    Every launch in this package goes through the returned object,
    ``jit(k)[grid](...)``; never ``k[grid]``, which is Triton's slower path.
    ``key_buckets`` is passed to ``tritonjit.function`` (autotuned kernels).
    """
    return tritonjit.function(kernel, key_buckets=key_buckets)


def capturing(device: torch.device | str) -> bool:
    """Whether torch's current stream of ``device`` is capturing a CUDA graph: work that
    synchronizes, tunes or reads random state on the host must not run then."""
    if torch.device(device).type != "cuda":
        return False
    try:
        return torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def backend_device_type() -> str:
    """The active backend's torch device type ("cuda", "npu", ...; "cpu" for the interpreter):
    the tensors enable() and the tritonjit:: ops serve."""
    return tritonjit.current_backend().info.device_type or "cpu"


def is_cuda_like(t: torch.Tensor) -> bool:
    """True on a real accelerator, where bigger blocks and more warps pay off."""
    return t.device.type != "cpu"


def host_check_allowed(t: torch.Tensor) -> bool:
    """Whether an operator may read ``t``'s values on the host to validate them.

    The one place that decides it: only for CPU tensors (the interpreter backend),
    whose values the host reads without waiting for anything. On an accelerator that
    read (``.item()``, ``int(t)``, a boolean mask) would synchronize the host with the
    device, about 50-140 us a call, and make CUDA-graph capture impossible; there the
    kernel checks the values itself with a ``tl.device_assert`` compiled in by
    ``DEVICE_ASSERT``, as aten's CUDA_KERNEL_ASSERT does: the launch stays
    asynchronous and a bad value surfaces at the next synchronization as
    "device-side assert triggered".
    """
    return t.device.type == "cpu"


#: Launch options of a kernel whose ``tl.device_assert`` must be compiled in (pass them
#: with the kernel's constexpr guard on, e.g. ``k[grid](..., CHECK=True, **DEVICE_ASSERT)``).
#: Triton (3.6's language/semantic.py) drops every device_assert unless ``debug`` is on,
#: and ``debug`` alone would also turn on its integer-overflow sanitizer
#: (``sanitize_overflow``: a compare and an assert on every 32-bit add/sub/mul of the
#: kernel); nothing else in 3.6's front end or its CUDA/AMD compiler drivers reads ``debug``. So the cost is the kernel's own
#: compare per checked value and a branch to the out-of-line trap; an assert over a
#: block (not a scalar) also gets one CTA barrier from Triton's lowering (sm_90 PTX,
#: Triton 3.6: +4 to +8 instructions on the hot path of the index kernels).
DEVICE_ASSERT = {"debug": True, "sanitize_overflow": False}
_NO_OPTIONS: dict = {}


def assert_options(check: bool) -> dict:
    """The launch options of a kernel whose constexpr guard ``CHECK`` is ``check``."""
    return DEVICE_ASSERT if check else _NO_OPTIONS


def next_pow2(n: int) -> int:
    return 1 << (max(int(n), 1) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def row_tile(k: int, n: int, tile: int = 1024) -> tuple[int, int]:
    """(columns, rows) a program copies of ``n`` rows of ``k`` elements: up to ``tile``
    elements, narrow rows several to a program (one program per row of 8 ran 12x aten's
    time in the pad kernel); rows wider than ``tile // 2`` one to a program, in column blocks."""
    block = min(next_pow2(k), tile)
    return block, max(1, min(tile // block, next_pow2(n)))


def check_dtype(op: str, t: torch.Tensor, allowed: Sequence[torch.dtype]) -> None:
    if t.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"tritonjit.{op}: unsupported dtype {t.dtype}; expected one of {names}")


def check_same_device(op: str, *tensors: torch.Tensor | None) -> torch.device | None:
    """The one device of ``tensors`` (None where none is a tensor); aten's error where two differ."""
    dev = None
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor):
            continue
        if dev is None:
            dev = t.device
        elif t.device != dev:
            raise RuntimeError(
                f"tritonjit.{op}: Expected all tensors to be on the same device, "
                f"but found at least two devices, {dev} and {t.device}!"
            )
    return dev


def check_out(op: str, out: torch.Tensor, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> None:
    """Validate an ``out=`` tensor. Unlike aten we never resize: a mismatch is an error."""
    if out.dtype != dtype:
        raise RuntimeError(f"tritonjit.{op}: Expected out tensor to have dtype {dtype}, but got {out.dtype} instead")
    if tuple(out.shape) != tuple(shape):
        raise RuntimeError(
            f"tritonjit.{op}: Expected out tensor to have shape {list(shape)}, but got {list(out.shape)} instead"
        )
    if out.device != device:
        raise RuntimeError(f"tritonjit.{op}: Expected out tensor on {device}, but got {out.device}")


def normalize_dims(op: str, dims, ndim: int, allow_empty_means_all: bool = True) -> tuple[int, ...]:
    """Wrap negative dims, reject duplicates and out-of-range dims like aten does."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    dims = tuple(dims)
    if len(dims) == 0:
        if allow_empty_means_all:
            return tuple(range(ndim))
        raise RuntimeError(f"tritonjit.{op}: Expected reduction dim to be specified for input.numel() == 0.")
    rank = max(ndim, 1)
    out = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})"
            )
        d = d % rank
        if d in out:
            raise RuntimeError(f"tritonjit.{op}: dim {d} appears multiple times in the list of dims")
        out.append(d)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def coalesce(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every operand.

    Turns most broadcast/strided elementwise problems into rank <= 4 ones, so one
    kernel with four (size, stride) pairs covers them.
    """
    keep = [i for i, s in enumerate(shape) if s != 1]
    shp = [shape[i] for i in keep]
    strs = [[st[i] for i in keep] for st in strides]
    if not shp:
        return [1], [[0] for _ in strides]
    out_shape = [shp[-1]]
    out_strides = [[st[-1]] for st in strs]
    for i in range(len(shp) - 2, -1, -1):
        if all(st[i] == os[0] * out_shape[0] for st, os in zip(strs, out_strides)):
            out_shape[0] *= shp[i]
        else:
            out_shape.insert(0, shp[i])
            for st, os in zip(strs, out_strides):
                os.insert(0, st[i])
    return out_shape, out_strides


@triton.jit
def unravel4(offs, d1, d2, d3):
    """Flat offsets -> (i0, i1, i2, i3) over a rank-4 (padded) row-major shape (.., d1, d2, d3)."""
    i3 = offs % d3
    t = offs // d3
    i2 = t % d2
    t = t // d2
    return t // d1, t % d1, i2, i3
