"""SDPA on the C++ operator path where tritonjit's kernels serve a call shape: the planner
records the launches the Python implementation would make and returns them as the shape's
plan (outputs laid out as aten's, integer results, the backward's temporary), so later calls
allocate and launch in C++ without Python.

On a device the SDPA overloads are CUDA's; here the same planners and implementations run
on CPU tensors (the interpreter): through the Python plan executor, and through the C++
executor by registering them for aten's flash overloads at the CPU key for one test."""

from __future__ import annotations

import importlib

import pytest
import torch
from _util import SDPA_LAYOUT_CASES, native_ops_or_skip, needs_cxx, sdpa_layout_calls, stats_delta
from tritonjit_ops import _plan as P

A = importlib.import_module("tritonjit_ops.attention")  # tritonjit_ops.attention is the function

FLASH = "_scaled_dot_product_flash_attention"
EFFICIENT = "_scaled_dot_product_efficient_attention"


def _bshd(b, h, s, d, g):
    """(B, H, S, D) viewed from a (B, S, H, D) tensor, as transformers' attention passes them."""
    return torch.randn(b, s, h, d, generator=g).transpose(1, 2)


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return _bshd(2, 4, 24, 16, g), _bshd(2, 2, 24, 16, g), _bshd(2, 2, 24, 16, g)


def _same(got, want):
    assert len(got) == len(want)
    for x, y in zip(got, want):
        if isinstance(y, torch.Tensor):
            assert isinstance(x, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype
            assert x.stride() == y.stride() or y.numel() == 0
            torch.testing.assert_close(x, y, rtol=0, atol=0)
        else:
            assert x == y


def test_a_recorded_forward_and_backward_plan_give_the_implementations_results(qkv):
    q, k, v = qkv
    args = (q, k, v, 0.0, True)
    plan = A._planner(FLASH)(*args)
    assert plan is not None and not plan.aten and len(plan.launches) == 1
    assert plan.result[4:6] == (P.Const(24), P.Const(24)) and plan.result[2:4] == (-1, -1)
    assert plan.outputs[0].strides == q.stride()  # laid out (B, S, H, D), as aten's output
    want = A.sdpa_flash(*args)
    got = P.run(plan, args)
    _same(got[:2], want[:2])
    assert got[4:6] == want[4:6] == (24, 24)

    do = torch.randn_like(want[0])
    bargs = (do, q, k, v, want[0], want[1], None, None, 24, 24, 0.0, True, want[6], want[7])
    bplan = A._planner(FLASH + "_backward")(*bargs)
    assert bplan is not None and len(bplan.launches) == 3 and len(bplan.temps) == 1  # delta
    _same(P.run(bplan, bargs), A.sdpa_flash_backward(*bargs))


@pytest.mark.parametrize("compute_lse", [True, False])
def test_the_efficient_path_with_a_mask_plans_the_mask_as_the_argument(qkv, compute_lse):
    """bert's padding mask: the kernel gets an expanded view of it, which the plan passes as
    the call's own argument; without compute_log_sumexp the logsumexp is a temporary."""
    q, k, v = qkv
    mask = torch.randn(2, 1, 24, 24)
    args = (q, k, v, mask, compute_lse, 0.0, False)
    plan = A._planner(EFFICIENT)(*args)
    assert plan is not None
    assert P.In(3) in plan.launches[0].args
    assert len(plan.temps) == (0 if compute_lse else 1)
    for call in (args, (q, k, v, torch.randn(2, 1, 24, 24), compute_lse, 0.0, False)):
        # (the second: the plan is no copy of the first call's mask; another mask of the key is read)
        got, want = P.run(plan, call), A.sdpa_efficient(*call)
        _same(got[:1], want[:1])
        assert got[1].shape == want[1].shape  # (B, H, M rounded up to 32), or empty
        _same([got[1][..., :24]], [want[1][..., :24]])  # its rows past M are padding


def test_calls_a_plan_could_not_tell_apart_get_none(qkv):
    """Key and value one tensor: the recorded launch cannot tell which argument it read, and
    another call of the key may pass two; that shape runs the Python implementation."""
    q, k, _ = qkv
    assert A._planner(FLASH)(q, k, k, 0.0, False) is None
    assert not getattr(A._planning, "on", False) and getattr(A._planning, "rec", None) is None


@pytest.mark.parametrize("shape", [(2, 1, 24, 24), (2, 4, 24, 24)], ids=["broadcast", "full"])
def test_a_bool_mask_is_converted_per_call_so_it_gets_no_plan(qkv, shape):
    """The kernel reads an additive mask made from the bool one on each call: data a plan
    cannot allocate afresh (at the full shape the made mask is a dense buffer, which only
    the implementation's note of its empty allocations tells from a temporary)."""
    q, k, v = qkv
    mask = torch.rand(*shape) > 0.3
    mask[..., 0] = True
    assert A._planner(EFFICIENT)(q, k, v, mask, True, 0.0, False) is None


def test_an_input_copied_to_unit_stride_gets_no_plan(qkv):
    """A key whose last dimension is strided is copied by the implementation on each call
    (the kernels take unit-stride rows): the copy holds data, so no plan."""
    q, _, v = qkv
    k = torch.randn(2, 2, 24, 32)[..., ::2]
    assert k.stride(-1) == 2
    assert A._planner(FLASH)(q, k, v, 0.0, False) is None
    assert getattr(A._planning, "empty", None) is None


def test_buffer_like_keeps_dense_layouts_and_refuses_the_others():
    t = torch.empty(2, 5, 3, 4).transpose(1, 2)
    assert P.Buffer.like(t) == P.Buffer((2, 3, 5, 4), torch.float32, t.stride())
    assert P.Buffer.like(torch.empty(3, 4)) == P.Buffer((3, 4), torch.float32)
    assert P.Buffer.like(torch.empty(3, 8)[:, ::2]) is None  # gaps
    assert P.Buffer.like(torch.empty(3, 1).expand(3, 4)) is None  # overlapping
    odd = torch.empty_strided((1, 4, 1, 8), (256, 8, 99, 1))  # size-1 dims' strides kept as given
    assert P.Buffer.like(odd).empty("cpu").stride() == odd.stride()


@needs_cxx
def test_the_cpp_executor_runs_recorded_plans_without_python(qkv):
    """aten's flash overloads registered for CPU tensors with the SDPA planners: the second
    call of each shape runs its plan in C++ (strided outputs, integer results, the backward's
    temporary) and gives the Python implementation's results."""
    native = native_ops_or_skip()
    q, k, v = qkv
    entries = [(op, A._planner(op), A.ATEN[op]) for op in (FLASH, FLASH + "_backward")]
    handle = native.register("aten", "CPU", entries)
    try:
        flash = torch.ops.aten._scaled_dot_product_flash_attention.default
        flash_bwd = torch.ops.aten._scaled_dot_product_flash_attention_backward.default
        flash(q, k, v, 0.0, True)
        before = native.stats()
        got = flash(q, k, v, 0.0, True)
        d = stats_delta(before, native.stats())
        assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["launches"] == 1
        want = A.sdpa_flash(q, k, v, 0.0, True)
        _same(got[:2], want[:2])
        assert (got[4], got[5]) == (24, 24) and got[2] is None and got[3] is None
        do = torch.randn_like(want[0])
        bargs = (do, q, k, v, want[0], want[1], None, None, 24, 24, 0.0, True, want[6], want[7])
        flash_bwd(*bargs)
        before = native.stats()
        grads = flash_bwd(*bargs)
        d = stats_delta(before, native.stats())
        assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["launches"] == 3
        _same(grads, A.sdpa_flash_backward(*bargs))
    finally:
        native.release(handle)


def test_no_plan_is_kept_from_inside_a_graph_capture(qkv, monkeypatch):
    """A shape first met inside a CUDA graph capture gets no plan: the tuner could not time
    its configs there, and a plan would keep the untimed one for good (the Python
    implementation serves such calls and asks the tuner again outside the capture)."""
    q, k, v = qkv
    monkeypatch.setattr(A, "capturing", lambda device: True)
    assert A._planner(FLASH)(q, k, v, 0.0, True) is None
    monkeypatch.setattr(A, "capturing", lambda device: False)
    assert A._planner(FLASH)(q, k, v, 0.0, True) is not None


def test_backward_plans_launch_the_python_paths_values_through_packed_cpp_launches(monkeypatch):
    """The cuDNN-attention backward's plans, executed in C++ through a recording backend whose
    launchers take packed buffers (as CUDA's do): every launch of every plan passes the values
    the Python implementation computes for that call (input pointers, strides, scales, sizes),
    over DiffLlama's sequence of call layouts (one plain call; two calls sharing query and key
    whose gradients are slices of one tensor; the same with a (B, S, H, D) query; one call on
    that query), where the GPU gave wrong gradients for the second and the fourth."""
    native_ops_or_skip()
    import tritonjit_ops as T
    from tritonjit._backend import BackendInfo
    from tritonjit.testing import RecordingBackend, installed_as_current
    from tritonjit.testing._recording import hookimpl

    class CpuRecording(RecordingBackend):
        """Launches nothing; takes CPU tensors, and enable() registers at the CPU key for it."""

        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo(name=self.name, priority=-1000, device_type="cpu", dispatch_key="CPU")

        @hookimpl
        def device_of(self, tensor):
            return 0

    monkeypatch.setattr(A, "TUNED_ON_CPU", True)  # the GPU's tiles and its _launch_tuned path
    b, h, s, d = 2, 4, 128, 64
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(b, s, h, d, generator=g).half() for _ in range(4)]
    bwd = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default
    kernels = (A._pre, A._dkdv, A._dq)
    kinds = []

    def recorded(fn):  # the recording launchers' calls (the interpreter's variants have none)
        return [c for var in fn.variants() for c in getattr(var.launcher, "calls", ())]

    with installed_as_current(CpuRecording("rec-cpu-packed", packed=True)):
        for two, q_bshd in SDPA_LAYOUT_CASES:
            for q, k, v, do in sdpa_layout_calls(base, two, q_bshd, g):
                o, lse = torch.empty_like(q), torch.empty(b, h, s, 1)
                seed, offset = torch.empty((), dtype=torch.int64), torch.empty((), dtype=torch.int64)
                for fn in kernels:
                    for var in fn.variants():
                        getattr(var.launcher, "calls", []).clear()
                with T.enable(wait_native=True):
                    bwd(do, q, k, v, o, lse, seed, offset, None, None, None, s, s, 0.0, True, scale=d ** -0.5)
                dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
                delta = torch.empty(b, h, s)
                fresh = {t.data_ptr() for t in (dq, dk, dv, delta)}  # the plan allocates its own
                expected = A._bwd_args(do, q, k, v, o, lse, delta, dq, dk, dv, True, d ** -0.5, None)[:3]
                for fn, want in zip(kernels, expected):
                    (call,) = recorded(fn)
                    kinds.append(call[0])
                    for i, (w, got) in enumerate(zip(want, call[3])):
                        if got is None or (isinstance(w, torch.Tensor) and w.data_ptr() in fresh):
                            continue  # a constexpr or a value specialized away; a buffer of the plan's
                        w = w.data_ptr() if isinstance(w, torch.Tensor) else w
                        got = got[1] if isinstance(got, tuple) else got
                        assert got == pytest.approx(w, rel=1e-6), (two, q_bshd, fn.name, fn.params[i].name)
    assert kinds[:3] == ["nogil"] * 3 and set(kinds[3:]) == {"packed"}  # the packed path, tested
