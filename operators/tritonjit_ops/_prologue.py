"""Call prologues of the small-call fast paths: checks plus output allocation.

``binary(x, y)`` answers ``(out, numel, upcast)`` where two tensors can take the flat
elementwise kernel (one float dtype of fp32/fp16/bf16, one shape, both contiguous;
upcast: compute in fp32), else None; ``like(x)`` allocates the contiguous output of
a contiguous input. Both exist twice: in Python below (the reference, always
there) and in C++ (``_prologue.cpp``, about a microsecond cheaper per call), which
comes prebuilt in a wheel built for this torch, else tritonjit's torch_build compiles
it on a background thread the first time a fast path runs (once per torch version).
The module globals are rebound when it is ready, so callers write
``_prologue.binary(x, y)`` and get whichever is current.
``TRITONJIT_OPS_NATIVE=0`` (or ``TRITONJIT_NO_NATIVE=1``) keeps the Python ones.
"""
from __future__ import annotations

import os
from typing import Any

import torch

Tensor = torch.Tensor
#: dtypes of the flat fast paths -> compute in fp32 (the 16-bit ones)
UPCAST = {torch.float32: False, torch.float16: True, torch.bfloat16: True}
_upcast = UPCAST.get
_empty_like = torch.empty_like
_CONTIGUOUS = torch.contiguous_format
HERE = os.path.dirname(os.path.abspath(__file__))
#: the wheel's prebuilt C++ helpers (tritonjit._native.torch_prebuilt), used when built for this torch
PREBUILT = os.path.join(HERE, "_prebuilt")


def binary_py(x: Any, y: Any) -> tuple[Tensor, int, bool] | None:
    """Python prologue. Devices are not compared (two torch.device objects cost more
    than the launch's own key): the dispatcher refuses tensors on two devices."""
    if x.__class__ is Tensor and y.__class__ is Tensor:
        up = _upcast(x.dtype)
        if up is not None and y.dtype is x.dtype and x.shape == y.shape and x.is_contiguous() and y.is_contiguous():
            return _empty_like(x, memory_format=_CONTIGUOUS), x.numel(), up
    return None


def like_py(x: Tensor) -> Tensor:
    # callers pass contiguous tensors; the format still matters: preserve_format would keep
    # a size-1 dim's odd stride, where aten's TensorIterator gives contiguous ones (as the
    # C++ prologue's at::empty_like(x, Contiguous) does)
    return _empty_like(x, memory_format=_CONTIGUOUS)


def _enabled() -> bool:
    off = ("1", "true", "yes", "on")
    return (os.environ.get("TRITONJIT_OPS_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")
            and os.environ.get("TRITONJIT_NO_NATIVE", "").strip().lower() not in off)


_native: Any = None


def native() -> Any:
    """The build of the C++ prologues (tritonjit._native.torch_build.AsyncModule), or None."""
    global _native
    if _native is None and _enabled():
        try:
            from tritonjit._native.torch_build import AsyncModule
        except ImportError:  # pragma: no cover - tritonjit-core is our dependency
            return None
        _native = AsyncModule("tritonjit_ops._prologue_native", os.path.join(HERE, "_prologue.cpp"), prebuilt=PREBUILT)
        _native.on_ready(_use)
    return _native


def _use(mod: Any) -> None:
    global binary, like
    binary, like = mod.binary, mod.like


def start(wait: bool = False) -> bool:
    """Start building the C++ prologues (once); ``wait`` blocks until done. True when in use."""
    global binary, like
    if binary is _first_binary:
        binary = binary_py
    if like is _first_like:
        like = like_py
    nat = native()
    if nat is not None:
        nat.start(wait)
    from . import _native_ops  # the operators' C++ path is built beside (no wait)

    _native_ops.module()
    return binary is not binary_py


def _first_binary(x: Any, y: Any) -> tuple[Tensor, int, bool] | None:
    start()
    return binary(x, y)


def _first_like(x: Tensor) -> Tensor:
    start()
    return like(x)


# The first call starts the build, then the Python prologues run until it is ready.
binary = _first_binary
like = _first_like
