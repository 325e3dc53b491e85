"""torch.ops.tritonjit.<op> packets call the overload resolver directly (_packets.py),
and stay torch's packets in every other respect."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops  # noqa: F401 - registers the tritonjit:: operators
from tritonjit_ops import _packets


def test_packets_are_fast_and_still_torch_packets():
    pk = torch.ops.tritonjit.add
    assert isinstance(pk, torch._ops.OpOverloadPacket) and isinstance(pk, _packets._FastPacket)
    assert type(pk).__call__ is not torch._ops.OpOverloadPacket.__call__
    assert pk.overloads() == ["Tensor", "Scalar"] and str(pk.Tensor) == "tritonjit.add.Tensor"
    x, y = torch.randn(33), torch.randn(33)
    torch.testing.assert_close(pk(x, y), x + y)
    torch.testing.assert_close(pk(x, 2.5), x + 2.5)  # overload resolution: the Scalar one
    with pytest.raises(RuntimeError, match="tritonjit::add"):
        pk(x, y, y, y)  # no overload takes it: torch's own error, naming the op
    assert _packets.speed_up("tritonjit", ["add"]) == 0  # already done: unchanged


def test_an_overload_defined_later_is_callable_through_the_packet():
    """torch refreshes a packet's _op when an overload is added; the fast class follows it."""
    pk = torch.ops.tritonjit.softmax
    lib = torch.library.Library("tritonjit", "FRAGMENT")
    try:
        lib.define("softmax.test_extra(Tensor x, int dim, int offset, int more) -> Tensor")
        lib.impl("softmax.test_extra", lambda x, dim, offset, more: torch.softmax(x, dim) + offset + more,
                 "CompositeExplicitAutograd")
        x = torch.randn(4, 8)
        torch.testing.assert_close(pk(x, -1, 1, 2), torch.softmax(x, -1) + 3)
        torch.testing.assert_close(pk(x, -1), torch.softmax(x, -1))
        assert "test_extra" in pk.overloads()
    finally:
        lib._destroy()
