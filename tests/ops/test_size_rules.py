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


def test_large_slice_and_select_backward_are_atens_on_a_device():
    """Outputs of _ATEN_SLICE_BACKWARD_NUMEL elements or more take aten's fill and copy on a
    device (the one-pass pad kernel ran 3.3x aten's time on Mamba's (8, 2048, 512, 8) state);
    below it, and on the interpreter at any size, one launch of ours."""
    from tritonjit_ops import copy as C

    big = C._ATEN_SLICE_BACKWARD_NUMEL
    for dev in ("meta", "cpu"):
        g = torch.empty(8, big // 8 // 64, 8, device=dev)  # select of dim 2 of (8, big/512, 64, 8)
        p = C.BACKWARD_PLANNERS["select_backward"](g, [8, big // 8 // 64, 64, 8], 2, 5)
        assert p.aten == (dev == "meta"), dev
        gs = torch.empty(8, big // 8 // 64, 32, 8, device=dev)
        p = C.BACKWARD_PLANNERS["slice_backward"](gs, [8, big // 8 // 64, 64, 8], 2, 0, 32, 1)
        assert p.aten == (dev == "meta"), dev
    small = torch.empty(4, 512, 8, device="meta")
    p = C.BACKWARD_PLANNERS["select_backward"](small, [4, 512, 256, 8], 2, 7)
    assert not p.aten and len(p.launches) == 1
    with pytest.raises(NotImplementedError, match="an output this large"):
        C.select_backward(torch.empty(8, big // 8 // 64, 8, device="meta"), [8, big // 8 // 64, 64, 8], 2, 5)


def test_size_rule_ops_are_in_the_device_default():
    from tritonjit_ops._registry import DEVICE_DEFAULT

    assert {"clamp", "clamp_min", "clamp_max", "hardtanh", "copy_", "remainder.Scalar"} <= DEVICE_DEFAULT


def _under_the_default(native, fn):
    """(eager's result, the result of fn's second call under enable()'s default, the C++
    path's counters of that call)."""
    from _util import stats_delta

    ref = fn()
    with T.enable(wait_native=True):
        fn()
        before = native.stats()
        got = fn()
        delta = stats_delta(before, native.stats())
    return ref, got, delta


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4096, BIG + 7])
def test_clamps_and_copies_under_the_default_on_gpu(n):
    """Below the bound the C++ path launches our kernel, above it aten's; values as eager's
    either way (the in-place clamp_ and copy_ return self)."""
    from _util import native_ops_or_skip

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
        ref, got, delta = _under_the_default(native, fn)
        assert torch.equal(got, ref), name
        assert delta["python_calls"] == 0, (name, delta)
        if n >= BIG and name != "remainder":
            assert delta.get("aten_calls", 0) >= 1, (name, delta)
        else:
            assert delta.get("launches", 0) >= 1, (name, delta)


@pytest.mark.gpu
def test_select_backward_below_and_above_the_bound_on_gpu():
    """The gradient of a per-step select (Mamba's scan) under the default: one launch of ours
    for a small state; past the bound aten's select_backward, whose zero fill and slice copy
    come back through the dispatcher to the fill and copy plans; values equal to eager's."""
    from _util import native_ops_or_skip
    from tritonjit_ops import copy as C

    native = native_ops_or_skip()
    for d1 in (256, C._ATEN_SLICE_BACKWARD_NUMEL // (4 * 64 * 8) + 1):
        sizes = [4, d1, 64, 8]
        g = torch.randn(4, d1, 8, device="cuda")

        def call(g=g, sizes=sizes):
            return torch.ops.aten.select_backward(g, sizes, 2, 5)

        ref, got, delta = _under_the_default(native, call)
        assert torch.equal(got, ref), d1
        big = 4 * d1 * 64 * 8 >= C._ATEN_SLICE_BACKWARD_NUMEL
        assert delta.get("python_calls", 0) == 0, delta
        if big:  # aten's kernel, then its fill and copy_ as our launches
            assert delta.get("aten_calls", 0) == 1 and delta.get("launches", 0) == 2, (d1, delta)
        else:
            assert delta.get("aten_calls", 0) == 0 and delta.get("launches", 0) == 1, (d1, delta)
