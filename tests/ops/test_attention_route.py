"""Which kernel serves an SDPA call under enable() on a device (TRITONJIT_OPS_SDPA): in
"auto" each distinct call is timed once against aten's kernel and the faster serves it;
the backward follows its forward's decision, so it never gets inputs saved by the other
kernel. Timings are stood in for (no GPU here); the decision logic is what is tested."""

from __future__ import annotations

import pytest
import torch
import triton.testing

attention = pytest.importorskip("tritonjit_ops.attention")
from tritonjit_ops import _registry  # noqa: E402

OP = "_scaled_dot_product_flash_attention"


@pytest.fixture
def device_call(monkeypatch):
    """A device-like call (meta tensors) on the C++ operator path, with stand-in timings."""
    monkeypatch.setattr(_registry._State, "native", object())
    monkeypatch.setattr(attention, "_ROUTE", {})
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
