"""The planners' size rules: calls that aten's kernel serves faster from some size on are
planned as aten's (``aten_plan()``) on a device, ours below it and on the interpreter.
Meta tensors stand for a device here; the GPU test runs both sides under ``enable()``'s
default and holds the values to eager's."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from tritonjit_ops import elementwise as E

BIG = E._ATEN_CLAMP_NUMEL
CLAMPS = {
    "clamp": lambda x: E.PLANNERS["clamp"](x, -1.0, 1.0),
    "clamp.Tensor": lambda x: E.PLANNERS["clamp.Tensor"](x, torch.zeros((), device=x.device), None),
    "clamp_min": lambda x: E.PLANNERS["clamp_min"](x, 0.0),
    "clamp_max": lambda x: E.PLANNERS["clamp_max"](x, 0.0),
    "clamp_": lambda x: E.PLANNERS["clamp_"](x, -1.0, 1.0),
    "hardtanh": lambda x: E.PLANNERS["hardtanh"](x),
}


@pytest.mark.parametrize("op", list(CLAMPS))
def test_large_clamps_are_atens_on_a_device(op):
    big = torch.empty(BIG, dtype=torch.bfloat16, device="meta")
    small = torch.empty(BIG - 1, dtype=torch.bfloat16, device="meta")
    assert CLAMPS[op](big).aten
    p = CLAMPS[op](small)
    assert p is not None and not p.aten and len(p.launches) == 1


def test_the_interpreter_runs_large_clamps_itself():
    p = CLAMPS["clamp"](torch.empty(BIG, dtype=torch.bfloat16))
    assert p is not None and not p.aten


def test_size_rule_ops_are_in_the_device_default():
    from tritonjit_ops._registry import DEVICE_DEFAULT

    assert {"clamp", "clamp_min", "clamp_max", "hardtanh", "copy_", "remainder.Scalar"} <= DEVICE_DEFAULT


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4096, BIG + 7])
def test_clamps_and_copies_under_the_default_on_gpu(n):
    """Below the bound the C++ path launches our kernel, above it aten's; values as eager's
    either way (the in-place clamp_ and copy_ return self)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    calls = {
        "clamp": lambda: torch.clamp(x, -0.5, 0.5), "clamp_min": lambda: x.clamp_min(0.0),
        "clamp_max": lambda: x.clamp_max(0.25), "hardtanh": lambda: F.hardtanh(x),
        "clamp_": lambda: x.clone().clamp_(-0.5, 0.5),
        "copy_ transposed": lambda: torch.empty(n // 64, 64, device="cuda").copy_(x[: n // 64 * 64].view(64, -1).t()),
        "remainder": lambda: (x * 1000).long() % 37,
    }
    for name, fn in calls.items():
        ref = fn()
        with T.enable(wait_native=True):
            fn()
            before = native.stats()
            got = fn()
            delta = stats_delta(before, native.stats())
        assert torch.equal(got, ref), name
        assert delta["python_calls"] == 0, (name, delta)
        if n >= BIG and name != "remainder":
            assert delta.get("aten_calls", 0) >= 1, (name, delta)
        else:
            assert delta.get("launches", 0) >= 1, (name, delta)
