"""tritonjit_ops.audit on the interpreter backend: the captured calls, their counts and
argument texts, which are covered and which actually launched tritonjit kernels."""
import math

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _audit

F = torch.nn.functional


def _model(x, w, s, ids, table):
    y = torch.mm(x, w.t())              # nn.Linear's layout: a transposed weight
    y = y * s                           # broadcast mul
    m = y.mean(-1, keepdim=True)        # keepdim mean
    z = torch.cat([y, m], dim=-1)       # a list of tensors (routed: copy.py)
    z = torch.flip(z, [0])              # not routed
    e = F.embedding(ids, table)         # index argument: must stay in range on replay
    return torch.mm(x, w.t()), z, e


def _args():
    return (torch.randn(4, 16), torch.randn(8, 16), torch.randn(1, 8), torch.tensor([[0, 9, 3]]),
            torch.randn(10, 8))


def test_audit_rows():
    rows = T.audit(_model, *_args(), rounds=1)
    assert isinstance(rows, list) and all(isinstance(r, T.AuditRow) for r in rows)
    by = {(r.op, r.args): r for r in rows}
    mm = by[("aten::mm", "f32[4,16], f32[16,8]T")]
    mul = by[("aten::mul.Tensor", "f32[4,8], f32[1,8]")]
    mean = by[("aten::mean.dim", "f32[4,8], [-1], True")]
    emb = by[("aten::embedding", "f32[10,8], i64[1,3]")]
    cat = next(r for r in rows if r.op == "aten::cat")
    flip = next(r for r in rows if r.op == "aten::flip")
    assert (mm.calls, mul.calls, mean.calls, emb.calls, cat.calls, flip.calls) == (2, 1, 1, 1, 1, 1)
    for r in (mm, mul, mean, emb, cat):
        assert r.covered and r.routed and r.launches >= 1, r
        assert r.error is None and r.max_err is not None and r.max_err < 1e-5, r
    assert not flip.covered and not flip.routed and flip.launches == 0
    assert cat.args == "[f32[4,8],f32[4,1]], -1"
    for r in rows:
        assert r.error is None, r
        assert r.eager_us > 0 and r.tritonjit_us > 0 and math.isfinite(r.gap_us), r
    gaps = [r.gap_us for r in rows]
    assert gaps == sorted(gaps, reverse=True)  # costliest gap first
    t = v = [r for r in rows if r.op == "aten::t"]
    assert t and not v[0].has_kernel  # the transposes: views
    s = rows.summary()
    assert s["covered_calls"] == s["covered_routed_calls"] == s["routed_calls"] == 6 and s["kernel_calls"] == 7
    assert s["routed_share_of_covered"] == 1.0 and s["eager_us"] > 0 and s["tritonjit_us"] > 0
    text = str(rows)
    assert "| aten::mm | f32[4,16], f32[16,8]T | 2 | yes | yes |" in text
    assert "aten::t " not in text and "aten::t " in rows.table(views=True)
    assert "6 of 6 covered calls ran tritonjit kernels (100%)" in text
    assert T.audit_table(rows, limit=1).count("| aten::") == 1


def test_covered_call_without_a_launch_is_not_routed():
    # add.Tensor is covered, but an empty result launches nothing: covered, not routed
    rows = T.audit(lambda a, b: a + b, torch.empty(0, 4), torch.empty(0, 4), rounds=1)
    (row,) = [r for r in rows if r.op == "aten::add.Tensor"]
    assert row.covered and not row.routed and row.launches == 0
    assert "0 of 1 covered calls" in str(rows)


def test_replay_keeps_layouts_and_in_place_ops():
    base = torch.randn(6, 8)
    view = base[1:, ::2]  # offset and strides

    def f(v, b):
        b.add_(1.0)                      # in place (routed: elementwise.py)
        b.index_fill_(1, torch.tensor([0]), 2.0)  # in place, not covered
        return v.exp(), b.expand(3, 6, 8) * 2.0

    rows = T.audit(f, view, base, rounds=1)
    exp = next(r for r in rows if r.op == "aten::exp")
    assert exp.args == "f32[5,4]@(8,2)" and exp.routed and exp.error is None
    mul = next(r for r in rows if r.op == "aten::mul.Tensor")
    assert mul.args == "f32[3,6,8]@(0,8,1), 2.0" and mul.error is None
    add_ = next(r for r in rows if r.op.startswith("aten::add_"))
    assert add_.error is None and add_.covered and add_.max_err == 0, add_
    fill = next(r for r in rows if r.op.startswith("aten::index_fill_"))
    assert fill.error is None and not fill.covered, fill


def test_backward_calls_are_captured():
    w = torch.randn(8, 16, requires_grad=True)
    x = torch.randn(4, 16)

    def step():
        (x @ w.t()).sum().backward()

    calls = _audit.capture(step)
    ops = [c.op for c in calls]
    assert ops.count("aten::mm") >= 2  # forward and the weight gradient


def test_coverage_counts_launches_per_call():
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    out, cov = _audit.coverage(lambda: torch.flip(torch.cat([x @ w.t(), x[:, :8]], -1), [1]))
    assert out.shape == (4, 16)
    assert cov["covered_calls"] == cov["covered_routed_calls"] == cov["routed_calls"] == 2
    assert cov["kernel_calls"] == 3 and cov["not_routed"] == {"aten::flip": 1}


def test_audit_refuses_to_run_inside_enable():
    with T.enable():
        with pytest.raises(RuntimeError, match="outside enable"):
            T.audit(torch.neg, torch.randn(3))
    assert T.enabled_ops() == []
