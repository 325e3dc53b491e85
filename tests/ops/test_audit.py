"""tritonjit_ops.audit on the interpreter backend: the captured calls, their counts and
argument texts, which are covered and which actually launched tritonjit kernels."""
import math

import pytest
import torch
import tritonjit_ops as T
from _util import native_ops_or_skip, needs_cxx
from tritonjit_ops import _audit, _policy

F = torch.nn.functional


def _model(x, w, s, ids, table):
    y = torch.mm(x, w.t())              # nn.Linear's layout: a transposed weight
    y = y * s                           # broadcast mul
    m = y.mean(-1, keepdim=True)        # keepdim mean
    z = torch.cat([y, m], dim=-1)       # a list of tensors (routed: copy.py)
    z = torch.logit(z, eps=0.25)        # not routed
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
    logit = next(r for r in rows if r.op == "aten::logit")
    assert (mm.calls, mul.calls, mean.calls, emb.calls, cat.calls, logit.calls) == (2, 1, 1, 1, 1, 1)
    for r in (mm, mul, mean, emb, cat):
        assert r.covered and r.routed and r.launches >= 1, r
        assert r.error is None and r.max_err is not None and r.max_err < 1e-5, r
    assert not logit.covered and not logit.routed and logit.launches == 0
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
    # add.Tensor is covered, but complex operands go to aten's kernel: covered, not routed
    c = torch.ones(2, 4, dtype=torch.complex64)
    rows = T.audit(lambda a, b: a + b, c, c, rounds=1)
    (row,) = [r for r in rows if r.op == "aten::add.Tensor"]
    assert row.covered and not row.routed and row.launches == 0 and row.has_kernel
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
    out, cov = _audit.coverage(lambda: torch.logit(torch.cat([x @ w.t(), x[:, :8]], -1), eps=0.25))
    assert out.shape == (4, 16)
    assert cov["covered_calls"] == cov["covered_routed_calls"] == cov["routed_calls"] == 2
    assert cov["kernel_calls"] == 3 and cov["not_routed"] == {"aten::logit": 1}


def test_calls_that_compute_nothing_are_not_counted_as_calls_left_to_aten():
    """A training step allocates zeros([0]) (an empty buffer): no kernel runs in eager or
    under enable(), so it is no kernel call, in the coverage count and in the replay."""
    x = torch.randn(3, 4)

    def step():
        return torch.zeros(0), x.new_zeros(2, 0) + 1, x * 2

    _, cov = _audit.coverage(step)
    assert cov["kernel_calls"] == cov["routed_calls"] == 1 and cov["not_routed"] == {}
    rows = T.audit(step, rounds=1)
    assert {r.op for r in rows if r.has_kernel} == {"aten::mul.Tensor"}
    assert not next(r for r in rows if r.op == "aten::add.Tensor").has_kernel


def test_calls_on_another_device_type_are_counted_apart():
    """A device model's host tensors (older Swin-v2 builds its shifted-window mask on the CPU):
    enable() routes only the backend's device type, so such calls are neither covered calls
    nor calls left to aten. Here the backend is the CPU and meta tensors stand for the other
    device."""
    x, m = torch.randn(3, 4), torch.ones(3, 4, device="meta")

    def step():
        return x * 2, m * 2, (m >= 1).long(), torch.arange(4, device="meta")

    _, cov = _audit.coverage(step)
    assert cov["other_device_calls"] == 4, cov
    assert cov["kernel_calls"] == cov["covered_calls"] == cov["covered_routed_calls"] == 1, cov
    assert cov["not_routed"] == {}
    rows = T.audit(step, rounds=1)
    covered = [(r.op, r.args, r.calls) for r in rows if r.covered]
    assert covered == [("aten::mul.Tensor", "f32[3,4], 2", 1)], covered
    assert sum(r.calls for r in rows if r.has_kernel) == 5  # the meta calls are rows, not covered ones


def test_audit_refuses_to_run_inside_enable():
    with T.enable():
        with pytest.raises(RuntimeError, match="outside enable"):
            T.audit(torch.neg, torch.randn(3))
    assert T.enabled_ops() == []


# ---- calls a measured policy gave to aten (aten measured faster) -------------------------------
@pytest.fixture
def no_records(monkeypatch):
    """An empty record of the measured policies' aten choices, for this test only."""
    monkeypatch.setattr(_policy, "_chosen", {})


def _complex_adds(a, b):
    # covered, but complex operands go to aten's kernel: an ordinary fallback, or (noted) a policy's
    return a + a, b + b


_COMPLEX = (torch.ones(2, 4, dtype=torch.complex64), torch.ones(2, 5, dtype=torch.complex64))


def test_coverage_tells_a_noted_aten_choice_from_an_ordinary_fallback(no_records):
    a, b = _COMPLEX
    _policy.note_aten("add.Tensor", (a, a))
    _, cov = _audit.coverage(_complex_adds, a, b)
    assert cov["covered_calls"] == 2 and cov["covered_routed_calls"] == 0
    assert cov["not_routed"] == {"aten::add.Tensor": 2}
    assert cov["policy_calls"] == 1 and cov["policy"] == {"aten::add.Tensor": 1}
    _policy.clear()
    _, cov = _audit.coverage(_complex_adds, a, b)
    assert cov["policy_calls"] == 0 and cov["policy"] == {}


def test_policy_records_key_the_call_layout_and_the_sdpa_family(no_records, monkeypatch):
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    _policy.note_aten("mm", (x, w))
    assert _policy.chose_aten("mm", (torch.randn(4, 8), torch.randn(8, 3)))  # same layout, other values
    assert not _policy.chose_aten("mm", (x, torch.randn(3, 8).t()))  # another layout
    assert not _policy.chose_aten("bmm", (x, w)) and not _policy.chose_aten("mm.out", (x, w))
    op = "_scaled_dot_product_efficient_attention"
    q, k = torch.empty(1, 2, 16, 8), torch.empty(1, 2, 32, 8)
    _policy.note_aten(op, (q, k))
    assert _policy.chose_aten(op, (q, k, k, None, True))
    assert _policy.chose_aten(op + "_backward", (q, q, k, k, None, q))  # do, q, k, v, ...: its forward's record
    assert not _policy.chose_aten(op + "_backward", (q, k, k, k))
    assert not _policy.chose_aten("_scaled_dot_product_flash_attention", (q, k, k))
    _policy.clear(["mm"])
    assert not _policy.chose_aten("mm", (x, w)) and _policy.chose_aten(op, (q, k))
    monkeypatch.setattr(_policy, "MAX", 2)
    for n in range(1, 4):
        _policy.note_aten("mm", (torch.empty(n, 2), torch.empty(2, 2)))
    assert len(_policy._chosen) == 2 and not _policy.chose_aten(op, (q, k))  # bounded: the oldest went first
    assert _policy.chose_aten("mm", (torch.empty(3, 2), torch.empty(2, 2)))


def _matmuls(x, w, bias, y):
    return torch.mm(x, w.t()), F.linear(x, w, bias), torch.bmm(x.expand(2, *x.shape), y)


@needs_cxx
def test_matmuls_the_measured_policy_gives_to_aten_are_counted_and_marked(no_records, monkeypatch):
    """On the C++ operator path, _aten_is_faster (forced: no GPU to measure on) sends mm,
    addmm and bmm to aten's kernel; the plan cache keeps that, and the audit and coverage
    count those calls as measured choices. Shapes of this test only: the C++ plan cache
    keeps aten's plans for the rest of the process."""
    native_ops_or_skip()
    from tritonjit_ops import matmul

    monkeypatch.delenv("TRITONJIT_OPS_MM_ATEN", raising=False)
    monkeypatch.setattr(matmul, "_aten_is_faster", lambda *args: True)
    args = (torch.randn(13, 23), torch.randn(9, 23), torch.randn(9), torch.randn(2, 23, 6))
    rows = T.audit(lambda *a: (_matmuls(*a), _complex_adds(*_COMPLEX)), *args, rounds=1)
    by = {r.op: r for r in rows if r.op in ("aten::mm", "aten::addmm", "aten::bmm")}
    assert len(by) == 3
    for r in by.values():
        assert r.covered and not r.routed and r.aten_measured and r.error is None and r.max_err < 1e-5, r
    adds = [r for r in rows if r.op == "aten::add.Tensor"]
    assert len(adds) == 2 and all(r.covered and not r.routed and not r.aten_measured for r in adds)
    s = rows.summary()
    assert s["aten_measured_calls"] == 3 and s["covered_routed_calls"] == 0 and s["covered_calls"] == 5
    assert s["kernel_or_measured_share_of_covered"] == 3 / 5
    text = str(rows)
    assert "| aten::mm | f32[13,23], f32[23,9]T | 1 | yes | aten (measured) |" in text
    assert "| aten::add.Tensor | c64[2,4], c64[2,4] | 1 | yes | no |" in text
    assert "0 of 5 covered calls ran tritonjit kernels (0%) and 3 went to aten, measured faster " \
           "(kernel or measured aten: 60%)" in text
    assert "aten measured faster)" in text  # the costliest calls without a tritonjit kernel

    # later calls never reach the planner: the record still tells them apart
    monkeypatch.setattr(matmul, "_aten_is_faster", lambda *args: pytest.fail("planned again"))
    got, cov = _audit.coverage(_matmuls, *args)
    assert cov["policy_calls"] == 3 and cov["policy"] == {"aten::mm": 1, "aten::addmm": 1, "aten::bmm": 1}
    assert cov["not_routed"] == cov["policy"]
    for g, want in zip(got, _matmuls(*args)):
        torch.testing.assert_close(g, want)


def test_error_ignores_generator_state_and_outputs_aten_did_not_compute():
    """SDPA's philox seed and offset are a generator's state (aten's are whatever it held with
    dropout_p 0, tritonjit's zeros), and its logsumexp is None from aten when not asked for:
    neither is a result, so neither makes the audit's error inf; the attention output still counts."""
    out = torch.randn(2, 3)
    cudnn = torch.ops.aten._scaled_dot_product_cudnn_attention.default
    ref = (out, None, None, None, 4, 4, torch.tensor(4574431552585415937), torch.tensor(77), None)
    got = (out.clone(), torch.randn(2, 1), None, None, 4, 4, torch.tensor(0), torch.tensor(0), None)
    assert _audit._max_err(ref, got) == float("inf")  # compared as they are
    assert _audit._max_err(*_audit._results(cudnn, ref, got)) == 0.0
    wrong = (out + 1, *got[1:])
    assert _audit._max_err(*_audit._results(cudnn, ref, wrong)) > 0.1
    flash = torch.ops.aten._scaled_dot_product_flash_attention.default  # rng_state / unused
    assert _audit._max_err(*_audit._results(flash, ref, got)) == 0.0


@pytest.mark.parametrize("largest", [True, False])
def test_error_of_an_unsorted_topk_compares_the_sets_it_chose(largest):
    """``topk(..., sorted=False)`` leaves its order unspecified: aten's CPU kernel returns a
    partial sort, tritonjit's kernel the sorted order. The audit compares the k entries each
    chose, not their positions, so an agreeing call reads 0 and a wrong choice still counts."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    topk = torch.ops.aten.topk.default
    ref = tuple(topk(x, 4, -1, largest, False))
    got = tuple(topk(x, 4, -1, largest, True))
    assert _audit._max_err(ref, got) == math.inf  # position by position they differ
    args = (x, 4, -1, largest, False)
    in_order = [_audit._in_order(topk, args, {}, o) for o in (ref, got)]
    assert _audit._max_err(*in_order) == 0.0
    wrong = (got[0].flip(-1), got[1].flip(-1))
    wrong[1][..., 0] = (wrong[1][..., 0] + 1) % 8  # one index no longer the one chosen
    assert _audit._max_err(*(_audit._in_order(topk, args, {}, o) for o in (ref, wrong))) == math.inf
    sorted_args = (x, 4, -1, largest, True)  # a sorted call compares position by position
    assert _audit._in_order(topk, sorted_args, {}, ref) is ref
    rows = T.audit(lambda t: torch.topk(t, 4, -1, largest, False), x, rounds=1)
    row = next(r for r in rows if r.op == "aten::topk")
    assert row.error is None and row.max_err == 0.0, row
