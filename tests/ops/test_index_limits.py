"""Index limits and operand types, on the CPU (the interpreter; plans on meta tensors).

- Plans of calls past 2**31 elements or offsets index in int64, and no plan launches a grid
  past the backend's limits (tests/ops/test_large_tensors.py runs such calls on a GPU).
- An op whose aten kernel takes its operands in the common dtype (comparisons, remainder,
  fmod, atan2, the logical ops; pow's Scalar exponent) gets a Scalar or a 0-dim operand of
  another type rounded to a 16-bit common dtype first, as aten does: ``x_bf16 > 0.3``
  compares with bf16(0.3) = 0.30078125.
"""
from __future__ import annotations

import sys

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _registry as Rg
from tritonjit_ops._plan import Plan, aten_plan, launch

M = sys.modules  # the op modules, whose names the package's functions shadow
BF = torch.bfloat16


def _meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _params(L) -> dict:
    return dict(zip([p.name for p in L.fn.params], L.args))


def test_a_strided_view_spanning_2_31_indexes_in_int64():
    """``x[:, 7]`` of 16400 x 131072: 16400 elements, the last 2**31 elements past the first."""
    v = _meta(16400, 131072)[:, 7]
    (L,) = Rg._PLANNERS["mul.Tensor"](v, 2).launches
    assert _params(L)["IDX64"] is True
    (L,) = Rg._PLANNERS["mul.Tensor"](_meta(16400, 8)[:, 7], 2).launches
    assert _params(L)["IDX64"] is False


@pytest.mark.parametrize("shape,dim", [((16400, 131072), 0), ((524288, 4096), -1), ((4, 4100, 8192), 1)])
def test_softmax_grids_stay_within_the_limits(shape, dim):
    """(rows, column tiles) on grid y met its limit of 65535 at these shapes: one axis now."""
    for name in ("_softmax", "_log_softmax"):
        (L,) = Rg._PLANNERS[name](_meta(*shape), dim, False).launches
        assert L.grid[1:] == (1, 1) and L.grid[0] <= 2**31 - 1
    dy = _meta(*shape)
    (L,) = Rg._PLANNERS["_softmax_backward_data"](dy, dy, dim, BF).launches
    assert L.grid[1:] == (1, 1)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_of_every_dim_matches_torch(dim, log):
    x = torch.randn(3, 5, 70)
    fn = torch.log_softmax if log else torch.softmax
    with T.enable():
        got = fn(x, dim)
    torch.testing.assert_close(got, fn(x, dim))


def test_a_plan_past_the_grid_limits_goes_to_aten():
    """The planners' guard: a launch grid past the backend's y limit is aten's plan (an aten
    overload) or no plan (a tritonjit op: its implementation); other plans pass."""
    softmax_kernel = M["tritonjit_ops.softmax"]._softmax
    x = torch.empty(4)

    def planner(grid):
        return lambda: Plan((), (launch(softmax_kernel, grid, x, x, 1, 1, 0, 1, 1, LOG=False, ONE_PASS=True,
                                        BLOCK_K=1, BLOCK_R=1),))

    assert Rg._plan_within_grid(planner((1, 70000, 1)), aten_plan)() == aten_plan()
    assert Rg._plan_within_grid(planner((1, 70000, 1)), lambda: None)() is None
    ok = Rg._plan_within_grid(planner((2**31 - 1, 65535, 1)), aten_plan)()
    assert ok.launches[0].grid == (2**31 - 1, 65535, 1)


def test_matmul_int64_offsets_where_an_operand_spans_2_31():
    mm = M["tritonjit_ops.matmul"]
    assert mm._idx64(16400, 131072, 64, (64, 1), (131072, 1))  # the output
    assert mm._idx64(131072, 64, 16400, (1, 131072), (64, 1))  # a transposed operand
    assert not mm._idx64(4096, 4096, 4096, (4096, 1), (4096, 1))
    a, b, bias = torch.randn(40, 24), torch.randn(24, 36), torch.randn(36)
    plan = mm.make_plan(40, 36, 24, 1, torch.float32, a.stride(), b.stride(), True, "cpu", (16, 16, 16, 4, 1))
    plan.meta = dict(plan.meta, IDX64=True)  # the int64 variant, on small operands
    c = torch.empty(40, 36)
    mm.run(plan, a, b, c, bias.expand(40, 36), 1.0, 1.0)
    torch.testing.assert_close(c, torch.addmm(bias, a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("upper", [False, True])
def test_the_int64_triangle_variant(upper):
    cp = M["tritonjit_ops.copy"]
    x = torch.randn(3, 7, 9)
    out = torch.empty_like(x)
    n = x.numel()
    cp.execute(cp.launch(cp._tri_k, ((n + 1023) // 1024,), x, out, n, 7, 9, 1, UPPER=upper, BLOCK=1024, IDX64=True))
    assert torch.equal(out, torch.triu(x, 1) if upper else torch.tril(x, 1))
    assert cp._idx64(2**31) == {"IDX64": True} and cp._idx64(2**31 - 1) == {}


# values at the rounding boundaries of 0.3, 0.7 and 257 in bf16 and fp16
_VALS = [0.30078125, 0.296875, 0.3, 0.300048828125, 256.0, 257.0, 258.0, 0.69921875, 1.3984375, -0.69921875, 0.0,
         1e-8]
_CASES = {
    "gt": lambda x: x > 0.3, "ge": lambda x: x >= 0.3, "lt": lambda x: 0.3 < x, "le": lambda x: x <= 0.3,
    "eq": lambda x: x == 0.3, "ne": lambda x: x != 0.3, "eq_int": lambda x: x == 257,
    "remainder": lambda x: x.remainder(0.7), "fmod": lambda x: torch.fmod(x, 0.7),
    "remainder_0dim": lambda x: x.remainder(torch.tensor(0.7)),
    "gt_0dim_f64": lambda x: x > torch.tensor(0.3, dtype=torch.float64),
    "atan2_0dim": lambda x: torch.atan2(x, torch.tensor(0.3)),
    "logical_and_0dim": lambda x: torch.logical_and(x, torch.tensor(1e-8)),
    "pow": lambda x: x.pow(1.3), "pow_int": lambda x: x.pow(257), "pow_two": lambda x: x.pow(2),
}


@pytest.mark.parametrize("dtype", [BF, torch.float16], ids=str)
@pytest.mark.parametrize("case", list(_CASES))
def test_operands_in_the_common_type(case, dtype):
    x = torch.tensor(_VALS, dtype=dtype)
    fn = _CASES[case]
    with T.enable():
        got = fn(x)
    want = fn(x)
    assert got.dtype == want.dtype
    assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (got.tolist(), want.tolist())


def test_arithmetic_keeps_a_scalar_in_fp32():
    """aten's add/mul take a Scalar in fp32 (opmath) for a bf16 tensor on a GPU: the rounding
    above is for the ops that compare or divide in the tensor's type only."""
    x = torch.tensor([1.3984375], dtype=BF)
    with T.enable():
        got = x * 0.3
    assert got.item() == torch.tensor(1.3984375 * 0.3, dtype=torch.float32).to(BF).item()


def test_a_scalar_divisor_on_a_device_multiplies_by_its_reciprocal():
    """aten's CUDA kernel divides a device tensor by a Scalar as ``x * (1 / s)`` in fp32 (258 /
    0.3 is 860.0 there, true division gives 859.99994); its CPU kernel divides, and so do the
    interpreter's plans."""
    E = M["tritonjit_ops.elementwise"]
    dev, cpu = _meta(4, dtype=torch.float32), torch.empty(4)
    assert E._divisor_op("div", [dev, 0.3]) == "div_recip"
    assert E._divisor_op("div", [cpu, 0.3]) == "div"
    assert E._divisor_op("div", [dev, dev]) == "div" and E._divisor_op("mul", [dev, 0.3]) == "mul"
    P = M["tritonjit_ops.pointwise"]
    x = torch.tensor([258.0, 0.30078125, 1e-8, 0.0, -7.5, float("inf")])
    out = torch.empty_like(x)
    P._binary_flat[(1,)](x, 0.3, out, x.numel(), 1, OP="div_recip", BLOCK=1024, X_SCALAR=False, Y_SCALAR=True,
                         UPCAST=True)
    inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(0.3, dtype=torch.float32)
    assert torch.equal(out, x * inv) and out[0].item() == 860.0
