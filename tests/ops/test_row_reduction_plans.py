"""Reductions over the trailing dims on the C++ operator path: ``max.dim``/``min.dim`` (an MoE
router's ``scores.max(-1)``), ``linalg_vector_norm`` (``F.normalize``: cosine attention,
embedding heads), ``logsumexp`` (a router's z-loss) and var/std (with their means): one launch
of the row kernel, a program per row, against eager; a strided view is read in place where
the kernel can address its rows, and made contiguous first (or left to aten on a device) where
it cannot. aten's plan for 0-dim inputs, empty reductions and rows past MAX_N; other
dims take the Python implementation on the interpreter and aten's plan on a device."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

import pytest
import torch
import tritonjit_ops as T
from _util import native_ops_disabled, needs_cxx, routed
from tritonjit_ops import rowwise
from tritonjit_ops._layout import rows_layout

pytestmark = needs_cxx
OPS = ["max.dim", "min.dim", "linalg_vector_norm", "logsumexp", "var.correction", "std.correction",
       "var_mean.correction", "std_mean.correction"]


@pytest.fixture(scope="module", autouse=True)
def native():
    yield from native_ops_disabled()


def _x(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, d: str = "cpu") -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if len(shape) > 1 and shape[0] > 1 and shape[-1] > 3:
        x[1, ..., 3] = float("nan")  # NaN wins max/min (its index too) and poisons the others
    return x.to(d, dtype)


def _flat(r: Any) -> tuple:
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


#: name -> call; each planned (one launch, no Python call)
PLANNED: dict[str, Callable[[str], Any]] = {
    "max(-1)": lambda d: _x(4, 6, 16, d=d).max(-1),
    "min(-1, keepdim)": lambda d: _x(4, 6, 16, d=d).min(-1, keepdim=True),
    "max bf16": lambda d: _x(3, 40, dtype=torch.bfloat16, d=d).max(dim=1),
    "max int32 with ties": lambda d: torch.randint(-3, 3, (5, 33), generator=torch.Generator().manual_seed(1),
                                                dtype=torch.int32).to(d).max(-1),
    "max of a transposed input": lambda d: _x(16, 6, 4, d=d).transpose(0, 2).max(-1),
    "max of one column": lambda d: _x(7, 1, d=d).max(-1),
    "normalize": lambda d: torch.nn.functional.normalize(_x(2, 4, 8, 32, d=d), dim=-1),
    "norm bf16, keepdim": lambda d: torch.linalg.vector_norm(_x(4, 64, dtype=torch.bfloat16, d=d), 2, -1, True),
    "norm of all": lambda d: torch.linalg.vector_norm(_x(6, 5, d=d)),
    "norm 1 over two dims": lambda d: torch.linalg.vector_norm(_x(3, 4, 5, d=d), 1, (-2, -1)),
    "norm inf": lambda d: torch.linalg.vector_norm(_x(3, 9, d=d), float("inf"), -1),
    "norm 3": lambda d: torch.linalg.vector_norm(_x(3, 9, d=d).abs(), 3, -1),
    "norm to fp32": lambda d: torch.linalg.vector_norm(_x(3, 9, dtype=torch.bfloat16, d=d), 2, -1, dtype=torch.float32),
    "logsumexp": lambda d: torch.logsumexp(_x(8, 16, d=d), -1),
    "logsumexp bf16, keepdim": lambda d: torch.logsumexp(_x(8, 16, dtype=torch.bfloat16, d=d), (-1,), keepdim=True),
    "var": lambda d: _x(4, 24, d=d).var(-1),
    "var, correction 0": lambda d: _x(4, 24, d=d).var(-1, correction=0, keepdim=True),
    "std bf16": lambda d: _x(4, 24, dtype=torch.bfloat16, d=d).std(-1),
    "var_mean": lambda d: torch.var_mean(_x(4, 24, d=d), -1),
    "std_mean of all": lambda d: torch.std_mean(_x(5, 7, d=d)),
}


def _assert_same(got: tuple, want: tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        tol = dict(rtol=1.6e-2, atol=1e-2) if w.dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g, w, equal_nan=True, **tol)


@pytest.mark.parametrize("case", list(PLANNED))
def test_trailing_dim_reductions_are_one_launch(case):
    fn = functools.partial(PLANNED[case], "cpu")
    want = _flat(fn())
    got, d = routed(fn, OPS)
    _assert_same(_flat(got), want)
    assert d["python_calls"] == 0 and d["launches"] >= 1 and d["aten_calls"] == 0, d


@pytest.mark.parametrize("case, fn", [
    ("0-dim", lambda: torch.tensor(2.5).max(0)),
    ("rows past MAX_N", lambda: torch.linalg.vector_norm(_x(2, rowwise.MAX_N + 1), dim=-1)),
    ("empty reduction", lambda: torch.linalg.vector_norm(torch.ones(3, 0), dim=-1)),
], ids=["0-dim", "long rows", "empty"])
def test_calls_the_kernel_does_not_take_are_atens_plan(case, fn):
    want = _flat(fn())
    got, d = routed(fn, OPS)
    _assert_same(_flat(got), want)
    assert d["python_calls"] == 0 and d["aten_calls"] >= 1 and d["launches"] == 0, d


def test_another_dim_takes_the_python_implementation():
    x = _x(4, 6, 16)
    got, d = routed(lambda: x.max(1), OPS)
    _assert_same(_flat(got), _flat(x.max(1)))
    assert d["python_calls"] == 1, d


def _heads(d: str = "cpu") -> torch.Tensor:
    """An attention head's [B, H, L, D] view of a [B, L, H, D] tensor: three kept dims that
    do not merge."""
    return _x(2, 5, 3, 8, d=d).transpose(1, 2)


#: name -> (input, dims): views ``_row`` reads in place (no contiguous copy)
IN_PLACE: dict[str, tuple[Callable[[str], torch.Tensor], Any]] = {
    "attention heads": (_heads, -1),
    "rows sliced out of longer ones": (lambda d: _x(4, 6, 32, d=d)[:, :, :16], -1),
    "a transposed input": (lambda d: _x(16, 6, 4, d=d).transpose(0, 2), -1),
    "an expanded kept dim": (lambda d: _x(1, 6, 16, d=d).expand(3, 6, 16), -1),
    "an expanded reduced dim": (lambda d: _x(5, 1, d=d).expand(5, 12), -1),
    "two sliced dims that merge": (lambda d: _x(4, 5, 6, d=d)[:, :3], (-2, -1)),
    "a column of a matrix": (lambda d: _x(12, 5, d=d).t()[1:4], -1),
}


@pytest.mark.parametrize("case", list(IN_PLACE))
def test_strided_views_are_read_in_place(case):
    """A view whose rows ``_row`` can address (reduced dims merging into one stride, the others
    into at most three) takes no contiguous copy, and every reduction agrees with eager."""
    make, dim = IN_PLACE[case]
    x = make("cpu")
    assert not x.is_contiguous()
    P = rowwise.PLANNERS
    plans = [P["max.dim"](x, dim) if isinstance(dim, int) else None, P["linalg_vector_norm"](x, 2, dim),
             P["logsumexp"](x, dim), P["var_mean.correction"](x, dim)]
    for p in plans:
        assert p is None or (p.contiguous == () and len(p.launches) == 1), p
    fns = [lambda: torch.linalg.vector_norm(x, 2, dim), lambda: torch.logsumexp(x, dim),
           lambda: torch.var_mean(x, dim), lambda: x.std(dim, keepdim=True)]
    if isinstance(dim, int):
        fns.append(lambda: x.max(dim))
    for fn in fns:
        want = _flat(fn())
        got, d = routed(fn, OPS)
        _assert_same(_flat(got), want)
        assert d["python_calls"] == 0 and d["aten_calls"] == 0, d


def test_layouts_the_kernel_cannot_address_are_copied_or_atens_on_a_device():
    """Reduced dims that do not merge (two dims of a transposed input) or four kept dims that do
    not: the interpreter copies the input first; on a device (meta stands in) max/min and the
    norms take aten's one strided kernel, logsumexp and var the copy and ours."""
    P = rowwise.PLANNERS
    t = _x(6, 4, 5).transpose(-1, -2)
    four = _x(2, 3, 2, 3, 4).permute(0, 2, 1, 3, 4)[..., ::2]
    for x, dim in ((t, (-2, -1)), (four, -1)):
        assert rows_layout(x, [d % x.dim() for d in ((dim,) if isinstance(dim, int) else dim)]) is None
        assert P["linalg_vector_norm"](x, 2, dim).contiguous == (0,)
        want = torch.logsumexp(x, dim)
        got, d = routed(functools.partial(torch.logsumexp, x, dim), OPS)
        _assert_same((got,), (want,))
        assert d["python_calls"] == 0 and d["aten_calls"] == 0, d
        m = torch.empty(x.shape, device="meta").as_strided(x.shape, x.stride())
        assert P["linalg_vector_norm"](m, 2, dim).aten
        assert not P["logsumexp"](m, dim).aten and P["logsumexp"](m, dim).contiguous == (0,)
    assert P["max.dim"](torch.empty(four.shape, device="meta").as_strided(four.shape, four.stride()), -1).aten


def test_cumsum_reads_a_strided_last_dim_in_place():
    from tritonjit_ops._plan import run

    x = _x(6, 9).t()[:, 1:]  # rows 6 apart
    p = rowwise.PLANNERS["cumsum"](x, -1)
    assert p.contiguous == ()
    torch.testing.assert_close(run(p, (x, -1)), x.cumsum(-1), equal_nan=True)


def test_max_of_an_empty_dim_raises_atens_error():
    with pytest.raises(IndexError) as eager:
        torch.empty(3, 0).max(-1)
    with T.enable(include=["max.dim"], wait_native=True):
        for _ in range(2):
            with pytest.raises(IndexError, match=re.escape(str(eager.value))):
                torch.empty(3, 0).max(-1)


def test_the_correction_and_ord_are_part_of_the_key():
    """var's correction and the norm's ord pick the kernel's constants: calls that differ only
    in them get plans of their own."""
    x = _x(4, 24)
    fns = [lambda: x.var(-1, correction=0), lambda: x.var(-1, correction=2),
           lambda: torch.linalg.vector_norm(x, 1, -1), lambda: torch.linalg.vector_norm(x, 2, -1)]
    wants = [f() for f in fns]
    with T.enable(include=OPS, wait_native=True):
        for _ in range(2):
            for f, w in zip(fns, wants):
                _assert_same(_flat(f()), _flat(w))


def test_row_kernel_variants_cross_compile_for_sm90():
    """The variants these plans launch compile for an H100/H200 target here, with no GPU."""
    contiguous = "i32:1,i32:1,i32:16,i32:16,i32:16,i32:1"
    strided = "i32,i32,i32:16,i32,i32:16,i32:1"  # attention heads (S1, S2, T0, T1, T2, TC)
    sig = "*bf16:16,*bf16:16,*i64:16,i32,fp32,{layout},'{op}','fp32',{block},False,True"
    for op, block, layout in (("max", 16, contiguous), ("norm2", 64, contiguous), ("norm2", 8, strided),
                              ("logsumexp", 16, contiguous), ("var_mean", 1024, strided)):
        k = rowwise._row.compile(sig.format(op=op, block=block, layout=layout), target="cuda:90", num_warps=4)
        assert k.binary, op


def test_on_a_device_aten_serves_many_short_rows_and_long_rows():
    """max/min and the norms on a device leave to aten's kernel the shapes where it measured
    faster (meta stands in for a device); logsumexp and var keep the kernel; every op leaves
    other dims than the trailing ones to aten there; the interpreter plans them all."""
    P = rowwise.PLANNERS
    many_short = torch.empty(rowwise._ATEN_SHORT_ROWS[0] + 1, 32, device="meta")
    long_rows = torch.empty(8, rowwise._ATEN_LONG_ROW + 1, device="meta")
    few_short = torch.empty(1024, 16, device="meta")
    for x in (many_short, long_rows):
        assert P["max.dim"](x, -1).aten and P["min.dim"](x, -1).aten
        assert P["linalg_vector_norm"](x, 2, -1).aten
        assert not P["logsumexp"](x, [-1]).aten and not P["var.correction"](x, [-1]).aten
    assert not P["max.dim"](few_short, -1).aten and not P["linalg_vector_norm"](few_short, 2, -1).aten
    tokens = torch.empty(2, 7, 64, device="meta")  # max pooling over tokens: a middle dim
    assert P["max.dim"](tokens, 1).aten and P["var.correction"](tokens, [0]).aten
    assert P["max.dim"](torch.empty(tokens.shape), 1) is None  # the interpreter: the implementation
    assert not P["max.dim"](torch.empty(many_short.shape), -1).aten


@pytest.mark.gpu
def test_gpu_row_reductions_match_eager_and_capture_in_a_cuda_graph():
    """On the GPU: the planned calls (and those left to aten by shape) agree with eager, run
    from C++, and replay in a CUDA graph."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    for name, fn in PLANNED.items():
        cuda_fn = functools.partial(fn, "cuda")
        want = _flat(cuda_fn())
        got, d = routed(cuda_fn, OPS)
        _assert_same(_flat(got), want)
        assert d["python_calls"] == 0 and d["plan_hits"] >= 1, (name, d)
    for name, (make, dim) in IN_PLACE.items():  # strided views, read in place
        for x in (make("cuda"), make("cuda").to(torch.bfloat16)):
            for fn in (functools.partial(torch.linalg.vector_norm, x, 2, dim), functools.partial(torch.logsumexp, x, dim),
                       functools.partial(torch.var_mean, x, dim)):
                want = _flat(fn())
                got, d = routed(fn, OPS)
                _assert_same(_flat(got), want)
                assert d["python_calls"] == 0 and d["plan_hits"] >= 1, (name, d)
    x = torch.randn(rowwise._ATEN_SHORT_ROWS[0] * 2, 32, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(64, 24, device="cuda")
    want = (torch.linalg.vector_norm(x, 2, -1), x.max(-1).values, torch.logsumexp(y, -1), y.var(-1))
    with T.enable(include=OPS, wait_native=True):
        step = lambda: (torch.linalg.vector_norm(x, 2, -1), x.max(-1).values, torch.logsumexp(y, -1),  # noqa: E731
                        y.var(-1))
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = step()
        graph.replay()
        torch.cuda.synchronize()
    _assert_same(tuple(outs), want)

