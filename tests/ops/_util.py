"""Shared tolerances and helpers for the operator tests."""
import torch

TOL = {
    torch.float32: dict(rtol=1.3e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
}
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def close(got, ref, dtype=None, **kw):
    tol = dict(TOL.get(dtype or ref.dtype, dict(rtol=0, atol=0)))
    tol.update(kw)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    torch.testing.assert_close(got, ref, equal_nan=True, **tol)


def strided(t):
    """A non-contiguous view with the same values: every other column of a wider tensor."""
    wide = torch.empty(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]
