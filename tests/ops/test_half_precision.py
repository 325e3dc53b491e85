"""The new operator families in bfloat16 and float16 under enable() against eager (the CPU
OpInfo run covers float32 and integers): casts round to nearest even, reductions and scans
mask their tails with their identity, arange's values, sort/topk, the index ops."""
import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T


def _cases(dt: torch.dtype) -> dict:
    g = torch.Generator().manual_seed(0)
    b = torch.randn(8, 33, generator=g).to(dt)
    c = torch.randn(33, generator=g).to(dt)
    u = (torch.rand(8, 33, generator=g) * 1.8 - 0.9).to(dt)
    b3 = (b.float() * 3).to(dt)
    idx = torch.tensor([0, 2])
    return {
        "exp2": lambda: torch.exp2(b), "sin": lambda: torch.sin(b), "erfinv": lambda: torch.erfinv(u),
        "round": lambda: torch.round(b3), "frac": lambda: torch.frac(b3), "sign": lambda: torch.sign(b),
        "atan": lambda: torch.atan(b), "expm1": lambda: torch.expm1(b), "log1p": lambda: torch.log1p(u),
        "asin": lambda: torch.asin(u), "tan": lambda: torch.tan(u), "sinh": lambda: torch.sinh(b),
        "hardswish": lambda: F.hardswish(b), "mish": lambda: F.mish(b), "elu": lambda: F.elu(b),
        "softplus": lambda: F.softplus(b), "add_": lambda: b.clone().add_(c), "eq": lambda: b == c,
        "clamp": lambda: b.clamp(-0.5, 0.5), "masked_fill": lambda: b.masked_fill(b > 0, 1.0),
        "lerp": lambda: torch.lerp(b, b3, 0.3), "addcmul": lambda: torch.addcmul(b, b, b, value=0.5),
        "to_fp32": lambda: b.to(torch.float32), "from_fp32": lambda: (b.float() * 1.2345).to(dt),
        "contiguous": lambda: b.t().contiguous(), "cat": lambda: torch.cat([b, b3]),
        "sort": lambda: torch.sort(b, stable=True), "topk": lambda: torch.topk(b, 3), "cumsum": lambda: torch.cumsum(b, 1),
        "max_dim": lambda: b.max(1), "var_mean": lambda: torch.var_mean(b, 1), "std": lambda: b.std(1),
        "logsumexp": lambda: torch.logsumexp(b, 1), "norm": lambda: torch.linalg.vector_norm(b, dim=1),
        "arange": lambda: torch.arange(0, 3, 0.25, dtype=dt), "full": lambda: torch.full((3,), 2.5, dtype=dt),
        "index_put_": lambda: b.clone().index_put_((idx,), c.expand(2, 33)), "index": lambda: b[:, idx],
        "triu": lambda: b.triu(), "repeat": lambda: b.repeat(2, 1), "any": lambda: b.any(1), "rsub": lambda: 1.0 - b,
        "div_floor": lambda: torch.div(b, c, rounding_mode="floor"), "atan2": lambda: torch.atan2(b, c),
        "nan_to_num": lambda: torch.nan_to_num(b / 0), "reciprocal": lambda: torch.reciprocal(b),
    }


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_matches_eager(dt):
    tol = dict(rtol=1.6e-2, atol=1e-2) if dt == torch.bfloat16 else dict(rtol=1e-3, atol=1e-3)
    bad = []
    for name, f in _cases(dt).items():
        ref = f()
        with T.enable(include="all", wait_native=True):
            got = f()
        for r, g in zip(ref if isinstance(ref, tuple) else (ref,), got if isinstance(got, tuple) else (got,)):
            try:
                assert g.dtype == r.dtype and g.shape == r.shape, (g.dtype, r.dtype, g.shape, r.shape)
                torch.testing.assert_close(g, r, equal_nan=True, **(tol if r.dtype.is_floating_point else {}))
            except AssertionError as e:
                bad.append(f"{name}: {str(e).splitlines()[:4]}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_prod_accumulates_in_fp32(dt):
    # (eager's CPU product of bf16 accumulates in bf16; tritonjit's in fp32, as aten's CUDA kernel)
    p = (torch.randn(8, 33, generator=torch.Generator().manual_seed(1)).abs() + 0.5).to(dt)
    with T.enable(include="all", wait_native=True):
        got = p.prod(1)
    exact = p.double().prod(1)
    assert got.dtype == dt
    torch.testing.assert_close(got.double(), exact, rtol=8e-3 if dt == torch.bfloat16 else 1e-3, atol=0)
