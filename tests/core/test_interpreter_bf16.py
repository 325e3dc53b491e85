"""float32 -> bfloat16 casts on the interpreter round to nearest even, as on a GPU and in
torch (Triton 3.6's interpreter truncated them: every bf16 result one ulp toward zero in
about a quarter of the elements, which compounded through a bf16 model's layers)."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl
import tritonjit

torch = pytest.importorskip("torch")


@triton.jit
def _to_bf16(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m).to(tl.bfloat16), mask=m)


@triton.jit
def _store_bf16(x, out, n, BLOCK: tl.constexpr):  # the store converts to the pointer's type
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * 1.0, mask=m)


@triton.jit
def _to_bf16_rounding(x, out, n, RTZ: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    if RTZ:
        r = v.to(tl.bfloat16, fp_downcast_rounding="rtz")
    else:
        r = v.to(tl.bfloat16, fp_downcast_rounding="rtne")
    tl.store(out + offs, r, mask=m)


def _values() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([0x3F808000, 0x3F818000, 0x3FFFFFFF, 0x7F7FFFFF, 0xBF808001, 0x00000001, 0x80000000,
                            0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001], dtype=torch.int64).to(torch.int32)
    return torch.cat([special.view(torch.float32), torch.randn(4000, generator=g) * 100,
                      torch.randn(1000, generator=g) * 1e-39])


@pytest.mark.parametrize("kernel", [_to_bf16, _store_bf16], ids=["to", "store"])
def test_float32_to_bfloat16_rounds_to_nearest_even(interpreter_backend, kernel):
    x = _values()
    out = torch.empty(x.shape, dtype=torch.bfloat16)
    tritonjit.function(kernel)[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    ref = x.to(torch.bfloat16)
    nan = ref.isnan()
    assert torch.equal(out.isnan(), nan)
    assert torch.equal(out[~nan].view(torch.int16), ref[~nan].view(torch.int16))


def test_explicit_rounding_modes(interpreter_backend):
    x = _values()[11:]  # finite
    for rtz in (False, True):
        out = torch.empty(x.shape, dtype=torch.bfloat16)
        tritonjit.function(_to_bf16_rounding)[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), RTZ=rtz, BLOCK=256)
        ref = (x.view(torch.int32) >> 16).to(torch.int16) if rtz else x.to(torch.bfloat16).view(torch.int16)
        assert torch.equal(out.view(torch.int16), ref)


@triton.jit
def _to_f32(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m).to(tl.float32), mask=m)


def test_bfloat16_to_float32_is_exact(interpreter_backend):
    x = _values().to(torch.bfloat16)  # subnormals among them
    out = torch.empty(x.shape)
    tritonjit.function(_to_f32)[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    ref = x.float()
    assert torch.equal(out.isnan(), ref.isnan())
    assert torch.equal(out[~ref.isnan()].view(torch.int32), ref[~ref.isnan()].view(torch.int32))
