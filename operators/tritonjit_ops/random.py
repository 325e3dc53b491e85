"""Dropout: ``native_dropout`` and ``native_dropout_backward`` with torch's generators.

The keep mask comes from Triton's Philox (``tl.rand(seed, offset + i)``). On a CUDA-like
device the seed and the counter offset are those of the device's default generator, read
from and advanced in its host-side state (``get_state``/``set_state``: the same
Philox seed/offset pair aten's CUDA kernels use, as FlagGems's
``philox_backend_seed_offset`` does), so a call reads no device memory and never
synchronizes, successive calls differ, and ``torch.manual_seed`` makes a run
reproducible. On the CPU (the interpreter) the seed is drawn from torch's CPU generator,
which ``manual_seed`` resets as well. Inside a CUDA graph capture the calls are aten's: a
seed and offset read on the host would be frozen into the graph (every replay the same
mask), where aten's kernels take the generator's graph-safe offsets. The mask is not eager's bit for bit (aten's Philox
layout differs), but it keeps each element with probability 1 - p, scales by 1/(1 - p),
and the backward uses the mask the forward returned, as aten's does.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, capturing, jit
from ._fallback import with_aten_fallback
from ._plan import execute, launch
from .elementwise import _refuse, run

Tensor = torch.Tensor
_BLOCK = 1024


@triton.jit
def _dropout_kernel(x, out, mask, n, p, scale, seed, offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    r = tl.rand(seed, (offset + offs).to(tl.uint32))
    keep = r >= p
    v = tl.load(x + offs, mask=valid).to(tl.float32)
    tl.store(out + offs, tl.where(keep, v * scale, 0.0).to(out.dtype.element_ty), mask=valid)
    tl.store(mask + offs, keep, mask=valid)


_dropout = jit(_dropout_kernel)


def _seed_offset(op: str, device: torch.device, increment: int) -> tuple[int, int]:
    """The Philox (seed, offset) of ``device``'s default generator, advanced by ``increment``
    (rounded up to 4, as aten's kernels count); host-only on every device. Refuses (aten's
    kernel then serves the call) while the device's stream captures a CUDA graph."""
    if capturing(device):
        raise _refuse(op, "a CUDA graph capture (aten's kernel draws graph-safe Philox offsets)")
    if device.type == "cpu":
        gen = torch.default_generator
        seed = int(torch.empty((), dtype=torch.int64).random_(0, 2**31 - 1, generator=gen))
        return seed, 0
    mod = getattr(torch, device.type)
    gen = mod.default_generators[device.index if device.index is not None else mod.current_device()]
    state = gen.get_state()
    words = state.view(torch.int64)
    seed, offset = int(words[0]), int(words[1])
    words[1] = offset + (increment + 3) // 4 * 4
    gen.set_state(state)
    return seed, offset


def native_dropout(x: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES:
        raise _refuse("native_dropout", f"input of dtype {getattr(x, 'dtype', None)}")
    if not 0.0 <= p <= 1.0:
        raise _refuse("native_dropout", f"p={p}")  # aten's error
    xc = x.contiguous()
    mask = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    if train is False or p == 0.0:  # aten: the input (a copy) and an all-true mask
        out = run("copy", [x], x.dtype, "fp32" if x.dtype != torch.float64 else "fp64")
        return out, run("copy", [True], torch.bool, "i1", out=mask, inplace=True)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n:
        seed, offset = _seed_offset("native_dropout", x.device, n)
        scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        execute(launch(_dropout, ((n + _BLOCK - 1) // _BLOCK,), xc, out, mask, n, float(p), scale, seed,
                       offset % 2**31, BLOCK=_BLOCK))
    return out, mask


def native_dropout_backward(grad: Tensor, mask: Tensor, scale: float) -> Tensor:
    if not isinstance(grad, Tensor) or grad.dtype not in FLOAT_DTYPES or not isinstance(mask, Tensor):
        raise _refuse("native_dropout_backward", "arguments")
    if mask.dtype != torch.bool:
        raise _refuse("native_dropout_backward", f"a mask of dtype {mask.dtype}")
    ct = "fp64" if grad.dtype == torch.float64 else "fp32"
    return run("mask_scale", [grad, mask], grad.dtype, ct, [scale])


@triton.jit
def _fill_kernel(out, n, a, b, seed, offset, DIST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    c = (offset + offs).to(tl.uint32)
    if DIST == "uniform":  # [a, b)
        v = a + (b - a) * tl.rand(seed, c)
    elif DIST == "normal":  # mean a, std b
        v = a + b * tl.randn(seed, c)
    else:  # "bernoulli": 1 with probability a
        v = (tl.rand(seed, c) < a).to(tl.float32)
    tl.store(out + offs, v.to(out.dtype.element_ty), mask=valid)


_fill = jit(_fill_kernel)


def _random_fill(op: str, dist: str, x: Tensor, a: float, b: float, generator: Any) -> Tensor:
    """Fill ``x`` in place from the device generator's Philox stream (a contiguous buffer,
    copied into a strided ``x``)."""
    if generator is not None:
        raise _refuse(op, "an explicit generator")
    if not isinstance(x, Tensor) or x.dtype not in FLOAT_DTYPES + ((torch.bool,) if dist == "bernoulli" else ()):
        raise _refuse(op, f"self of dtype {getattr(x, 'dtype', None)}")
    if torch._debug_has_internal_overlap(x) == 1:
        raise _refuse(op, "a self with internal overlap")
    n = x.numel()
    if n == 0:
        return x
    target = x if x.is_contiguous() else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    seed, offset = _seed_offset(op, x.device, n * (2 if dist == "normal" else 1))
    execute(launch(_fill, ((n + _BLOCK - 1) // _BLOCK,), target, n, float(a), float(b), seed, offset % 2**31,
                   DIST=dist, BLOCK=_BLOCK))
    if target is not x:
        run("copy", [target], x.dtype, "fp32" if x.dtype != torch.float64 else "fp64", out=x, inplace=True)
    return x


def bernoulli_(x: Tensor, p: float = 0.5, *, generator: Any = None) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise _refuse("bernoulli_", f"p={p}")
    return _random_fill("bernoulli_", "bernoulli", x, p, 0.0, generator)


def uniform_(x: Tensor, low: float = 0.0, high: float = 1.0, *, generator: Any = None) -> Tensor:
    if not low <= high:
        raise _refuse("uniform_", f"from={low} > to={high}")
    return _random_fill("uniform_", "uniform", x, low, high, generator)


def normal_(x: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    if not std >= 0.0:
        raise _refuse("normal_", f"std={std}")
    return _random_fill("normal_", "normal", x, mean, std, generator)


ATEN: dict[str, Callable[..., Any]] = {
    "bernoulli_.float": bernoulli_, "uniform_": uniform_, "normal_": normal_,
    "native_dropout": native_dropout,
    "native_dropout_backward": native_dropout_backward,
}
ATEN = with_aten_fallback(ATEN)
