"""Which kernel serves an SDPA call under enable() on a device (TRITONJIT_OPS_SDPA): in
"auto" each distinct call is timed once against aten's kernel and the faster serves it;
the backward follows its forward's decision, so it never gets inputs saved by the other
kernel. Timings are stood in for (no GPU here); the decision logic is what is tested."""

from __future__ import annotations

import warnings

import pytest
import torch
import triton.testing

attention = pytest.importorskip("tritonjit_ops.attention")
from tritonjit_ops import _policy, _registry  # noqa: E402

OP = "_scaled_dot_product_flash_attention"


@pytest.fixture
def device_call(monkeypatch):
    """A device-like call (meta tensors) on the C++ operator path, with stand-in timings."""
    monkeypatch.setattr(_registry._State, "native", object())
    monkeypatch.setattr(attention, "_ROUTE", {})
    monkeypatch.setattr(_policy, "_chosen", {})
    times: dict[str, float] = {}
    calls: list[str] = []

    def bench(fn, rep=None):
        who = fn()
        calls.append(who)
        return times[who]

    monkeypatch.setattr(triton.testing, "do_bench", bench)
    q = torch.empty(2, 4, 1024, 64, device="meta")
    k = torch.empty(2, 2, 1024, 64, device="meta")
    return q, k, times, calls


def _forward(q, k, causal=True):
    attention._route(OP, q, k, None, causal, lambda: "ours", lambda: "aten")


def _backward(q, k, causal=True):
    attention._route(OP + "_backward", q, k, None, causal)


def test_auto_takes_aten_where_it_measured_faster_and_the_backward_follows(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, times, calls = device_call
    times.update(ours=2.0, aten=1.0)
    with pytest.raises(attention.Unsupported, match="aten's kernel measured faster"):
        _forward(q, k)
    with pytest.raises(attention.Unsupported):
        _backward(q, k)
    with pytest.raises(attention.Unsupported):
        _forward(q, k)  # decided once: no second timing
    assert calls == ["ours", "aten"]


def test_auto_keeps_tritonjit_where_it_is_as_fast_and_decides_per_call_key(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, times, calls = device_call
    times.update(ours=1.05, aten=1.0)  # within ATTN_MARGIN
    _forward(q, k)
    _backward(q, k)
    times.update(ours=3.0)
    with pytest.raises(attention.Unsupported):
        _forward(q, k, causal=False)  # another key: timed again
    _forward(q, k)  # the first key keeps its decision
    assert len(calls) == 4


def test_a_backward_without_its_forward_decision_goes_to_aten(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, _, calls = device_call
    with pytest.raises(attention.Unsupported):
        _backward(q, k)
    assert calls == []


def test_forcing_tritonjit_on_a_device_warns_about_nothing(device_call, monkeypatch):
    """TRITONJIT_OPS_SDPA=tritonjit runs tritonjit's kernels for the forward and the backward
    on a device, untimed and without a warning (a backward on CUDA once warned of a defect
    that turned out to be eager's own: the CHANGELOG's known issues)."""
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    q, k, times, calls = device_call
    times.update(ours=9.0, aten=1.0)  # aten would win a timing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _forward(q, k)
        _backward(q, k)
    assert calls == []


@pytest.mark.parametrize("mode", ["tritonjit", "aten"])
def test_the_switch_overrides_the_measurement(device_call, monkeypatch, mode):
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", mode)
    q, k, times, calls = device_call
    times.update(ours=9.0, aten=1.0)
    if mode == "aten":
        with pytest.raises(attention.Unsupported, match="TRITONJIT_OPS_SDPA=aten"):
            _forward(q, k)
    else:
        _forward(q, k)
        _backward(q, k)
    assert calls == []


def test_a_call_aten_cannot_time_stays_with_tritonjit(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, times, calls = device_call
    times.update(ours=1.0)  # "aten" missing: timing it raises, as aten's kernel refusing the call would

    _forward(q, k)
    _backward(q, k)
    assert calls == ["ours", "aten"]


def _measured_aten(q, k):
    """The audit's view: the forward and the backward of this call went to aten, measured faster."""
    v, do = torch.empty_like(k), torch.empty_like(q)
    fwd = _policy.chose_aten(OP, (q, k, v, 0.0, True))
    bwd = _policy.chose_aten(OP + "_backward", (do, q, k, v, do))
    assert fwd == bwd
    return fwd


def test_the_audit_sees_the_calls_aten_measured_faster_on_and_no_others(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, times, _ = device_call
    with pytest.raises(attention.Unsupported):
        _backward(q, k)  # no forward decision: aten's kernel, but nothing measured
    assert not _measured_aten(q, k)
    times.update(ours=1.0, aten=1.0)
    _forward(q, k)
    assert not _measured_aten(q, k)
    q2 = torch.empty(2, 4, 512, 64, device="meta")
    times.update(ours=2.0)
    with pytest.raises(attention.Unsupported):
        _forward(q2, k)
    assert _measured_aten(q2, k) and not _measured_aten(q, k)
    attention.clear_routes()
    assert attention._ROUTE == {} and not _measured_aten(q2, k)
    with pytest.raises(attention.Unsupported):
        _forward(q2, k)  # measured again: noted again
    _policy.clear()
    with pytest.raises(attention.Unsupported):
        _forward(q2, k)  # decided by _ROUTE: a forward notes its choice on every call
    assert _measured_aten(q2, k)


def test_a_forced_aten_is_no_measured_choice(device_call, monkeypatch):
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "aten")
    q, k, _, _ = device_call
    with pytest.raises(attention.Unsupported):
        _forward(q, k)
    assert not _measured_aten(q, k)


# ---- the C++ path's planners: a shape aten serves is planned to aten, once -------------------------
def _planned(op, q, k, causal=True, **kw):
    """What the C++ path's planner of ``op`` answers for a bf16 call like ``q``/``k`` (meta tensors)."""
    v = torch.empty_like(k)
    if op.endswith("_backward"):
        do = torch.empty_like(q)
        return attention.PLANNERS[op](do, q, k, v, do, torch.empty(q.shape[:3], device="meta"), None, None,
                                      q.shape[2], k.shape[2], 0.0, causal, None, None)
    return attention.PLANNERS[op](q, k, v, 0.0, causal, **kw)


def _bf16(*shape):
    return torch.empty(*shape, device="meta", dtype=torch.bfloat16)


def test_the_planner_gives_aten_the_shapes_it_measured_faster_without_running_ours(device_call, monkeypatch):
    """Where aten measured faster the plan is aten's; where ours serve, the implementation's
    work after the decision is recorded for a plan (test_attention_plans.py), never run."""
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    _, _, times, calls = device_call
    ran = []

    def stand_in(name):  # returns what the timing stand-in reports ("ours")
        return lambda *a, **kw: ran.append(name + ("-recorded" if attention._planning.rec is not None else "")) or "ours"

    monkeypatch.setattr(attention, "_planning", attention.threading.local())
    attention._planning.rec = None
    monkeypatch.setattr(attention, "_forward", stand_in("fwd"))
    monkeypatch.setattr(attention, "_backward", stand_in("bwd"))
    monkeypatch.setattr(attention, "_aten_kernel", lambda op, q: lambda *a, **kw: "aten")
    times.update(ours=2.0, aten=1.0)
    q, k = _bf16(2, 4, 1024, 64), _bf16(2, 2, 1024, 64)
    plan = _planned(OP, q, k)
    assert plan is not None and plan.aten
    assert _planned(OP + "_backward", q, k).aten  # the backward follows its forward
    assert _measured_aten(q, k)
    times.update(ours=1.0)
    q2 = _bf16(2, 4, 512, 64)
    k2 = _bf16(2, 2, 512, 64)
    for op in (OP, OP + "_backward"):
        p = _planned(op, q2, k2)  # ours serve it (the stand-ins launch nothing a plan could hold)
        assert p is None or not p.aten
    assert calls == ["ours", "aten", "ours", "aten"]  # each forward key timed once
    # only the timing ran our forward; the implementations' work after the decision was recorded
    assert ran == ["fwd", "fwd", "fwd-recorded", "bwd-recorded"]
    assert not getattr(attention._planning, "on", False)


def test_the_planner_gives_aten_calls_the_kernels_refuse_and_the_forced_mode(device_call, monkeypatch):
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    _, _, times, calls = device_call
    assert _planned(OP, _bf16(1, 2, 16, 48), _bf16(1, 2, 16, 48)).aten  # head_dim 48: check() refuses
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "aten")
    assert _planned(OP, _bf16(1, 2, 16, 64), _bf16(1, 2, 16, 64)).aten
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    assert _planned(OP, _bf16(1, 2, 16, 64), _bf16(1, 2, 16, 64)) is None
    assert calls == []  # nothing timed


def test_the_planner_leaves_bad_input_to_the_implementation(device_call, monkeypatch):
    """A call the implementation raises on with anything but Unsupported: no plan (None), so
    each call runs it and aten's own error follows, as without a planner."""
    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)

    def broken(*a, **kw):
        raise ValueError("bad input")

    monkeypatch.setitem(attention.ATEN, OP, broken)
    assert attention._planner(OP)(_bf16(1, 2, 16, 64), _bf16(1, 2, 16, 64), _bf16(1, 2, 16, 64)) is None
    assert not getattr(attention._planning, "on", False)


def test_clear_policies_forgets_the_routes(device_call, monkeypatch):
    """tritonjit_ops.clear_policies(): the public reset of the measured policies, SDPA's included."""
    import tritonjit_ops

    monkeypatch.delenv("TRITONJIT_OPS_SDPA", raising=False)
    q, k, times, calls = device_call
    times.update(ours=2.0, aten=1.0)
    with pytest.raises(attention.Unsupported):
        _forward(q, k)
    assert attention._ROUTE and _measured_aten(q, k)
    tritonjit_ops.clear_policies()
    assert attention._ROUTE == {} and not _measured_aten(q, k)
    with pytest.raises(attention.Unsupported):
        _forward(q, k)
    assert calls == ["ours", "aten", "ours", "aten"]  # timed again
