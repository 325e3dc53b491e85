"""cat and stack on the C++ operator path: plans whose launches read the tensors of cat's
``Tensor[]`` argument (``InItem``), one launch of the cat kernel for up to four inputs (more
go to aten's kernel), each input read at its own strides and cast to aten's promoted dtype. Checked against eager
on the interpreter; the kernel's variants cross-compiled for the H200 (sm_90)."""
from __future__ import annotations

from typing import Callable

import pytest
import torch
import tritonjit_ops as T
from _util import native_ops_or_skip, needs_cxx, stats_delta
from tritonjit_ops import _plan
from tritonjit_ops import copy as copy_ops

pytestmark = needs_cxx


@pytest.fixture(scope="module")
def native():
    return native_ops_or_skip()



_GEN = torch.Generator().manual_seed(0)


def _g() -> torch.Generator:
    """One generator for all inputs: two inputs of a call never hold the same values."""
    return _GEN


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_g())


def _rope() -> torch.Tensor:
    return _r(1, 4, 16, 64)


def _view(t: torch.Tensor) -> torch.Tensor:
    """A [1,4,16,64] tensor seen as [1,16,4,64] through a transpose (non-contiguous)."""
    return t.transpose(1, 2)


#: name -> (inputs, dim, launches the plan makes); inputs are made before enable()
CASES: dict[str, Callable[[], tuple[list[torch.Tensor], int, int]]] = {
    "2 inputs dim 0": lambda: ([_r(3, 5), _r(2, 5)], 0, 1),
    "3 inputs dim -1": lambda: ([_r(4, 3), _r(4, 1),
                                 _r(4, 6)], -1, 1),
    "middle dim": lambda: ([_r(2, 3, 4), _r(2, 5, 4)], 1, 1),
    "rotate_half (-x2, x1)": lambda: (lambda x: ([-x[..., 32:], x[..., :32]], -1, 1))(_rope()),
    "rotate_half strided halves": lambda: (lambda x: ([x[..., 32:], x[..., :32]], -1, 1))(_rope()),
    "transposed views dim 1": lambda: ([_view(_rope()), _view(_rope() * 2)], 1, 1),
    "transposed 2-D dim 0": lambda: ([_r(5, 3).t(), _r(5, 2).t()], 0, 1),
    "every other column": lambda: ([_r(4, 10)[:, ::2], _r(4, 3)], 1, 1),
    "expanded input (stride 0)": lambda: ([_r(1, 6).expand(3, 6), _r(2, 6)], 0, 1),
    "position ids (int64)": lambda: ([torch.arange(7).view(1, 7), torch.tensor([[7]])], -1, 1),
    "bool": lambda: ([torch.rand(3, 4) > 0.5, torch.rand(3, 2) > 0.5], 1, 1),
    "float16 + float32 + int32 promote": lambda: ([_r(2, 3).half(), _r(1, 3),
                                                   torch.randint(-9, 9, (2, 3), generator=_g(), dtype=torch.int32)], 0, 1),
    "bfloat16 + int64 -> bfloat16": lambda: ([_r(2, 3).bfloat16(),
                                              torch.randint(-300, 300, (2, 3))], 1, 1),
    "bool + uint8 -> uint8": lambda: ([torch.tensor([True, False]), torch.tensor([3, 250], dtype=torch.uint8)], 0, 1),
    "int8 + float64": lambda: ([torch.tensor([[-3, 5]], dtype=torch.int8), _r(2, 2).double()], 0, 1),
    "an empty 1-D input is skipped": lambda: ([torch.tensor([]), _r(3, 4), _r(2, 4)], 0, 1),
    "empty 1-D float64 input still promotes": lambda: ([_r(2, 2),
                                                        torch.tensor([], dtype=torch.float64)], 1, 1),
    "an input empty along dim": lambda: ([_r(2, 0), _r(2, 3)], 1, 1),
    "all inputs empty 1-D": lambda: ([torch.tensor([]), torch.tensor([], dtype=torch.int32)], 0, 0),
    "4 inputs: 1 launch": lambda: ([_r(3, k + 1) for k in range(4)], 1, 1),
    "4 strided inputs dim 0": lambda: ([_r(2, 8)[:, k:k + 4] for k in range(4)], 0, 1),
    "single input": lambda: ([_r(3, 4).t()], 0, 1),
    "rank 6, collapsible": lambda: ([_r(2, 1, 3, 2, 2, 2), _r(2, 1, 1, 2, 2, 2)], 2, 1),
    "rank 5 after merging: a copy per input": lambda: ([_r(3, 4, 5, 6, 7).permute(4, 2, 0, 3, 1), _r(2, 5, 3, 6, 4)],
                                                       0, 2),
    "4 inputs of rank 5: a launch per input": lambda: ([_r(3, 4, 5, 6, 7).permute(4, 2, 0, 3, 1)
                                                        for k in range(4)], 0, 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cat_matches_eager_in_one_planned_call(native, case):
    ts, dim, launches = CASES[case]()
    want = torch.cat(ts, dim)
    with T.enable(include=["cat"], wait_native=True):
        assert T._registry.native_path() == "C++"
        got = torch.cat(ts, dim)  # plans (once per key)
        before = native.stats()
        again = torch.cat(ts, dim)
        d = stats_delta(before, native.stats())
    for g in (got, again):
        assert g.dtype == want.dtype and g.shape == want.shape and g.stride() == want.stride()
        assert torch.equal(g, want), case
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] == 1, d
    assert d["launches"] == launches and d["aten_calls"] == 0, d


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_executor_runs_the_cat_plans(case):
    ts, dim, launches = CASES[case]()
    p = copy_ops._plan_cat(ts, dim)
    assert p is not None and len(p.launches) == launches
    want = torch.cat(ts, dim)
    got = _plan.run(p, [ts, dim])
    assert got.dtype == want.dtype and torch.equal(got, want)


STACK_CASES = {
    "dim 0": lambda: ([_r(3, 4), _r(3, 4)], 0),
    "dim -1, strided halves": lambda: (lambda x: ([x[..., 32:], x[..., :32]], -1))(_rope()),
    "middle dim, transposed, promotes": lambda: ([_view(_rope()), _view(_rope()).half(), _view(_rope()).bfloat16()], 2),
    "4 inputs": lambda: ([_r(2, 3) + k for k in range(4)], 1),
    # Cohere's rotary: (-x2, x1) interleaved, of (B, H, S, D) views of (B, S, H, D) storage; stacked at
    # the last dim they are rank 5 after merging, so each input is copied into its slice
    "dim -1, interleaved halves of head views": lambda: (lambda q: ([-q[..., 1::2], q[..., ::2]], -1))(
        _r(2, 6, 4, 16).transpose(1, 2)),
}


@pytest.mark.parametrize("case", sorted(STACK_CASES))
def test_stack_matches_eager_in_one_planned_call(native, case):
    ts, dim = STACK_CASES[case]()
    want = torch.stack(ts, dim)
    with T.enable(include=["stack"], wait_native=True):
        torch.stack(ts, dim)
        before = native.stats()
        got = torch.stack(ts, dim)
        d = stats_delta(before, native.stats())
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert d["python_calls"] == 0 and d["plans_made"] == 0 and d["plan_hits"] == 1, d
    assert d["launches"] == (len(ts) + 3) // 4 if "head views" not in case else len(ts)


def test_cat_plan_key_holds_each_inputs_strides(native):
    """The key describes every tensor of the list: same shapes with other strides, another
    dtype or another count of inputs are other plans; the same call is a hit."""
    a = _r(4, 6)
    calls = [[a[:, :3], a[:, 3:]], [a[:, :3].contiguous(), a[:, 3:]], [a[:, :3].contiguous(), a[:, 3:].contiguous()],
             [a[:, :3].double(), a[:, 3:]], [a[:, :3], a[:, 3:], a[:, 3:]]]
    want = [torch.cat(ts, 0) for ts in calls]
    with T.enable(include=["cat"], wait_native=True):
        before = native.stats()
        got = [torch.cat(ts, 0) for ts in calls]
        first = stats_delta(before, native.stats())
        before = native.stats()
        again = [torch.cat(ts, 0) for ts in calls]
        second = stats_delta(before, native.stats())
    for g, r, w in zip(got, again, want):
        assert g.dtype == w.dtype and torch.equal(g, w) and torch.equal(r, w)
    assert first["plans_made"] == len(calls) and first["python_calls"] == 0
    assert second["plans_made"] == 0 and second["plan_hits"] == len(calls)


def test_a_list_too_long_for_the_key_takes_the_python_implementation(native):
    ts = [torch.full((1,) * 19 + (2,), float(k)) for k in range(4)]  # 41 key words each: past kMaxWords
    assert len(ts) <= copy_ops._CAT_MAX_INPUTS
    want = torch.cat(ts, -1)
    with T.enable(include=["cat"], wait_native=True):
        before = native.stats()
        got = torch.cat(ts, -1)
        d = stats_delta(before, native.stats())
    assert torch.equal(got, want)
    assert d["python_calls"] == 1 and d["plans_made"] == 0


@pytest.mark.parametrize("op,dim", [("cat", -1), ("stack", 0), ("stack", -1)])
def test_lists_longer_than_the_limit_go_to_aten_without_a_key_or_python(native, op, dim):
    """More inputs than _CAT_MAX_INPUTS: aten's kernel at once (_plan.list_limit; a Mamba
    scan stacks 256 states, which took 256 copies from Python); at the limit, one launch."""
    n = copy_ops._CAT_MAX_INPUTS
    ts = [torch.full((3, 2), float(k)) for k in range(n + 1)]
    fn = getattr(torch, op)
    with T.enable(include=[op], wait_native=True):
        fn(ts[:n], dim)
        deltas = []
        for k in (n, n + 1):
            before = native.stats()
            got = fn(ts[:k], dim)
            deltas.append(stats_delta(before, native.stats()))
            want = getattr(torch, op)(ts[:k], dim)  # the same call, inside enable(): aten's result either way
            assert torch.equal(got, torch.tensor(want.tolist())) and got.stride() == want.stride()
    at, over = deltas
    assert at["plan_hits"] == 1 and at["launches"] == 1 and at["aten_calls"] == 0, at
    assert over["aten_calls"] == 1 and over["python_calls"] == 0 and over["launches"] == 0, over
    assert over["plans_made"] == 0 and over["plan_hits"] == 0, over


def test_python_paths_refuse_lists_longer_than_the_limit():
    """Without the C++ path the implementations refuse (aten's kernel serves the call) and
    the planners answer aten's plan, for the Python executor."""
    ts = [torch.ones(2)] * (copy_ops._CAT_MAX_INPUTS + 1)
    for impl in (copy_ops.cat, copy_ops.stack):
        with pytest.raises(NotImplementedError, match=f"{len(ts)} inputs"):
            impl(ts, 0)
    assert copy_ops._plan_cat(ts, 0).aten and copy_ops._plan_stack(ts, 0).aten
    assert not copy_ops._plan_cat(ts[:-1], 0).aten
    with T.enable(include=["cat", "stack"]):
        assert torch.equal(torch.stack(ts), torch.ones(len(ts), 2)) and torch.equal(torch.cat(ts), torch.ones(2 * len(ts)))


def test_list_limit_is_checked():
    with pytest.raises(ValueError, match="1 to 255"):
        _plan.list_limit(256)


def test_calls_the_planner_leaves_to_the_python_implementation(native):
    """channels_last inputs (aten's output is channels_last), 0-dim inputs and mismatched
    shapes: no plan; the Python implementation answers, or raises aten's error."""
    cl = _r(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert copy_ops._plan_cat([cl, cl], 1) is None
    assert copy_ops._plan_cat([_r(2, 3), _r(3, 3)], 1) is None
    p7 = _r(2, 3, 2, 3, 2, 3, 2).permute(6, 5, 4, 3, 2, 1, 0)  # reversed: no two dims merge
    assert copy_ops._plan_cat([p7, p7], 0) is None  # rank 7 after merging: past every kernel
    assert copy_ops._plan_cat([torch.tensor([1 + 1j]), torch.tensor([2j])], 0) is None
    sliced = cl[:, :2]  # channels-last strides, not channels_last-contiguous: aten's output is channels_last
    assert copy_ops._plan_cat([sliced, cl], 1) is None
    with T.enable(include=["cat"], wait_native=True):
        got = torch.cat([cl, cl], 1)
        got_sliced = torch.cat([sliced, cl], 1)
        with pytest.raises(RuntimeError, match="zero-dimensional"):
            torch.cat([torch.tensor(1.0), torch.tensor(2.0)])
        with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
            torch.cat([_r(2, 3), _r(3, 3)], 1)
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.equal(got, torch.cat([cl, cl], 1))
    want = torch.cat([sliced, cl], 1)
    assert got_sliced.stride() == want.stride() and torch.equal(got_sliced, want)


@pytest.mark.parametrize("dim", [0, 1, 2, 3, 4, -1])
def test_stack_output_layout_is_atens(native, dim):
    """Below the last dim aten stacks by a cat of the inputs themselves, viewed: channels-last
    inputs give a non-contiguous output, which the planner leaves to the Python
    implementation; the layouts agree with eager either way."""
    cl = _r(3, 3, 1, 3).to(memory_format=torch.channels_last)
    ts = [cl, cl + 1]
    want = torch.stack(ts, dim)
    with T.enable(include=["stack"], wait_native=True):
        got = torch.stack(ts, dim)
    assert got.stride() == want.stride() and torch.equal(got, want)
    assert (copy_ops._plan_stack(ts, dim) is None) == (not want.is_contiguous())


def _signatures() -> list[str]:
    """Signatures of the cat kernel's variants: one to four inputs, every cat position, mixed
    dtypes into each output dtype family, 64-bit indexing."""
    k = copy_ops._cat_k
    x = _r(1, 4, 16, 64)
    sets = [([x[..., 32:].bfloat16(), x[..., :32].bfloat16()], -1),
            ([x.half(), x.half()], 0),
            ([x[:, :2], x, x[:, 1:]], 1),
            ([torch.ones(2, 3, dtype=torch.bool), torch.randint(0, 5, (2, 3)), _r(2, 3).half(),
              _r(2, 3)], 0),
            ([torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 1, dtype=torch.bool)], 1),
            ([torch.randint(0, 5, (2, 3), dtype=torch.int32), torch.randint(0, 5, (2, 3))], 1)]
    sigs = []
    for ts, dim in sets:
        p = copy_ops._plan_cat(ts, dim)
        out = torch.empty(p.outputs[0].shape, dtype=p.outputs[0].dtype)
        for L in p.launches:
            args = [ts[a.k] if isinstance(a, _plan.InItem) else out if isinstance(a, _plan.Out) else a for a in L.args]
            sigs.append(k.signature(*args))
            if len(sigs) == 1:  # the same launch with 64-bit indexing
                sigs.append(k.signature(*args[:-1], True))
    return sigs


def test_cat_kernel_cross_compiles_for_sm90():
    k = copy_ops._cat_k
    sigs = _signatures()
    assert any(s.endswith("True") for s in sigs)
    for sig in sigs:
        assert k.compile(sig, target="cuda:90", num_warps=4).binary, sig


def test_int64_indexing_variant_is_right(monkeypatch):
    """The IDX64 variant (outputs or inputs spanning more than 2**31 elements), taken here
    for small tensors by lowering the threshold."""
    monkeypatch.setattr(copy_ops, "_INT32_MAX", 16)
    x = _rope()
    ts = [x[..., 32:], x[..., :32], _r(1, 4, 16, 3).double()]
    p = copy_ops._plan_cat(ts, -1)
    assert p is not None and all(L.args[-1] is True for L in p.launches)
    got = _plan.run(p, [ts, -1])
    assert torch.equal(got, torch.cat(ts, -1))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 4, 5, 256])
def test_cuda_cat_and_stack_plan_up_to_the_limit_and_pass_longer_lists_to_aten(n):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native = native_ops_or_skip()
    ts = [torch.randn(4, 512, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    for fn in (lambda: torch.cat(ts, -2), lambda: torch.stack(ts, 0), lambda: torch.stack(ts, -1)):
        want = fn()
        with T.enable(include=["cat", "stack"], wait_native=True):
            fn()
            before = native.stats()
            got = fn()
            d = stats_delta(before, native.stats())
        assert torch.equal(got, want) and got.stride() == want.stride()
        assert d["python_calls"] == 0
        if n <= copy_ops._CAT_MAX_INPUTS:
            assert d["plan_hits"] == 1 and d["launches"] >= 1 and d["aten_calls"] == 0, d
        else:  # aten's stack on CUDA calls cat, which comes back through the override: 2
            assert d["aten_calls"] >= 1 and d["launches"] == 0 and d["plan_hits"] == 0, d
