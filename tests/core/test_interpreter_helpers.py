"""Kernels that call @triton.jit helpers run on the interpreter and leave Triton's
language untouched, so the same kernel still compiles for a real target afterwards."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import tritonjit  # noqa: E402

pytestmark = pytest.mark.usefixtures("interpreter_backend")


@triton.jit
def _twice(v):
    return v * 2


@triton.jit
def scale_by_helper(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, _twice(tl.load(x + offs, mask=m)), mask=m)


def _language() -> dict:
    """What Triton's language resolves each name to (getattr: Triton's own restore may
    copy an inherited member into a class dict, which changes nothing)."""
    import triton.language.core as core

    return {(o.__name__, k): getattr(o, k) for o in (tl, core, tl.tensor, tl.math)
            for k in dir(o) if k != "__annotations__"}


def test_helper_runs_then_kernel_cross_compiles():
    f = tritonjit.function(scale_by_helper)
    x, out = torch.randn(100), torch.empty(100)
    before = _language()
    f[(2,)](x, out, 100, BLOCK=64)
    after = _language()
    assert [k for k in before.keys() | after.keys() if before.get(k) != after.get(k)] == []
    f[(2,)](x, out, 100, BLOCK=64)  # a second launch reuses the rewritten helper
    torch.testing.assert_close(out, x * 2)
    compiled = f.compile(f.signature(x, out, 100, BLOCK=64), target="cuda:90")
    assert compiled.binary[:4] == b"\x7fELF"
