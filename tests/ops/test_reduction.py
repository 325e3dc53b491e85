import functools

import pytest
import torch
import tritonjit_ops as T
from _util import FLOATS, close, launch_arg

DIMS = [None, 0, 1, 2, -1, [0, 2], [1, 2], [0, 1], [0, 1, 2]]


def _ref(op, x, dim, keepdim, **kw):
    if dim is None:
        dim = tuple(range(x.dim()))
    return getattr(torch, op)(x, dim, keepdim, **kw)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reduce_dims(op, dim, keepdim):
    x = torch.randn(4, 5, 6)
    got = getattr(T, op)(x, dim if dim is not None or op in ("sum", "mean") else [], keepdim)
    close(got, _ref(op, x, dim, keepdim), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reduce_dtypes_and_strided(op, dtype):
    x = torch.randn(6, 33).to(dtype).t()  # non-contiguous
    for dim in (0, 1, None):
        got = getattr(T, op)(x, dim if dim is not None or op in ("sum", "mean") else [])
        close(got, _ref(op, x, dim, False), dtype, rtol=2e-2, atol=2e-2)


def test_sum_dtype_and_int():
    x = torch.randn(3, 8).half()
    close(T.sum(x, 1, dtype=torch.float32), torch.sum(x, 1, dtype=torch.float32))
    i = torch.randint(-100, 100, (5, 7), dtype=torch.int32)
    close(T.sum(i, 0), torch.sum(i, 0))  # int32 -> int64 as in aten
    close(T.amax(i, 1), torch.amax(i, 1))
    b = torch.rand(4, 4) > 0.5
    close(T.sum(b), torch.sum(b))


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool])
def test_sum_mean_dtype_argument(op, src, dtype):
    """Every mix of input dtype and dtype= gives aten's dtype and values (or aten's error):
    the planned mixes (bool sums, 16-bit floats into fp32, integers into int64) and the
    ones that cast the input first."""
    x = (torch.randn(3, 5, 4) * 4).to(src)
    try:
        ref = getattr(torch, op)(x, 1, dtype=dtype)
    except RuntimeError:
        with pytest.raises((RuntimeError, TypeError), match=op):
            getattr(T, op)(x, 1, dtype=dtype)
        return
    got = getattr(T, op)(x, 1, dtype=dtype)
    close(got, ref, ref.dtype if ref.dtype.is_floating_point else None, rtol=2e-2, atol=2e-2)
    close(getattr(T, op)(x, dtype=dtype), getattr(torch, op)(x, dtype=dtype), rtol=2e-2, atol=2e-2)


def test_large_full_reduction_is_split():
    x = torch.randn(1 << 17)
    close(T.sum(x), x.sum(), rtol=1e-4, atol=1e-3)
    close(T.mean(x), x.mean(), rtol=1e-4, atol=1e-5)
    close(T.amax(x), x.amax())
    close(T.argmin(x), x.argmin())


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg(op, dtype):
    x = (torch.randn(5, 6, 7) * 10).to(dtype)
    for dim in (None, 0, 1, 2, -1):
        for keepdim in (False, True):
            close(getattr(T, op)(x, dim, keepdim), getattr(torch, op)(x, dim, keepdim))


def test_arg_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")]])
    close(T.argmax(x, 1), torch.argmax(x, 1))
    close(T.argmin(x, 1), torch.argmin(x, 1))
    close(T.amax(x, 1), torch.amax(x, 1))
    close(T.amin(x, 0), torch.amin(x, 0))


def test_empty_and_zero_size():
    e = torch.randn(0, 3)
    close(T.sum(e, 0), torch.sum(e, 0))
    close(T.sum(e, 1), torch.sum(e, 1))
    close(T.mean(e, 0), torch.mean(e, 0))
    close(T.amax(e, 1), torch.amax(e, 1))
    s = torch.tensor(3.0)
    close(T.sum(s), torch.sum(s))
    close(T.argmax(s), torch.argmax(s))


def test_bad_input():
    with pytest.raises(IndexError, match="Dimension out of range"):
        T.sum(torch.randn(2, 3), 2)
    with pytest.raises(RuntimeError, match="multiple times"):
        T.sum(torch.randn(2, 3), [1, -1])
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        T.mean(torch.ones(3, dtype=torch.int32))
    with pytest.raises(IndexError, match="non-zero size"):
        T.amax(torch.randn(0, 3), 0)
    with pytest.raises(RuntimeError, match="numel\\(\\) == 0"):
        T.argmax(torch.randn(0))
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.sum(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="shape"):
        T.sum(torch.randn(2, 3), 1, out=torch.empty(3))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_gpu_reductions(dtype):
    x = torch.randn(512, 4096, device="cuda", dtype=dtype)
    for dim in (None, 0, 1):
        close(T.sum(x, dim), _ref("sum", x, dim, False), dtype, rtol=2e-2, atol=1.0)
        close(T.amax(x, dim if dim is not None else []), _ref("amax", x, dim, False))
        close(T.argmax(x, dim), torch.argmax(x, dim))


@pytest.mark.parametrize("k", [1, 7, 64, 100, 1024])
@pytest.mark.parametrize("r", [1, 2, 3])
def test_short_middle_dim_tiles_widen(r, k):
    """A short reduced axis between two kept ones (MoE's (tokens, top_k, hidden) sum over top_k)
    fills its tiles along the kept axis, and still reduces right at every width."""
    from tritonjit_ops import reduction

    x = torch.randn(5, r, k)
    for op in ("sum", "mean", "amax", "argmax"):
        ref = getattr(torch, op)(x, 1) if op == "argmax" else _ref(op, x, [1], False)
        close(getattr(T, op)(x, 1) if op == "argmax" else getattr(T, op)(x, [1]), ref, rtol=1e-5, atol=1e-5)
    plan = reduction.plan_reduce("sum", x, [1])
    (L,) = plan.launches
    cx = dict(L.extra) if L.extra else {}
    block_k = cx.get("BLOCK_K") or launch_arg(L, "BLOCK_K")
    block_r = launch_arg(L, "BLOCK_R")
    if k > 1:  # the tile holds min(k, 512 // block_r) kept elements (the CPU's tile of 512)
        assert block_k >= min(1 << (k - 1).bit_length(), 512 // block_r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_short_middle_dim(dtype):
    x = torch.randn(8192, 2, 1024, device="cuda", dtype=dtype)
    close(T.sum(x, [1]), torch.sum(x, [1]), dtype, rtol=2e-2, atol=2e-2)
    close(T.mean(x, [1], keepdim=True), torch.mean(x, [1], keepdim=True), dtype, rtol=2e-2, atol=2e-2)


# ---- dense layouts in another order, and few programs over a long reduced axis --------------------
def _layouts():
    g = torch.Generator().manual_seed(7)
    base = torch.randn(3, 5, 4, 6, generator=g)
    cl = base.contiguous(memory_format=torch.channels_last)  # (N, C, H, W) stored as (N, H, W, C)
    m = torch.randn(40, 9, generator=g)
    p = torch.randn(4, 5, 6, generator=g).permute(1, 0, 2)  # kept dims out of their order in memory
    return {
        "channels_last bias grad (0, 2, 3)": (cl, (0, 2, 3)),
        "channels_last over C": (cl, (1,)),
        "channels_last over (2, 3)": (cl, (2, 3)),
        "transposed matrix over 0": (m.t(), (0,)),
        "transposed matrix over 1": (m.t(), (1,)),
        "permuted, kept dims swapped in memory": (p, (2,)),
        "channels_last with one channel": (torch.randn(3, 1, 4, 6, generator=g)
                                           .contiguous(memory_format=torch.channels_last), (0, 2, 3)),
    }


@pytest.mark.parametrize("case", sorted(_layouts()))
@pytest.mark.parametrize("keepdim", [False, True])
def test_dense_layouts_in_another_order(case, keepdim):
    """A channels_last or transposed input reduces over its memory (no copy) where the
    reduced dims are one block in memory order and the kept ones keep their order (a conv's
    bias gradient), and through a copy otherwise: every case matches torch, directly and on
    the C++ path, where the plan reads the input in place."""
    from _util import native_ops_or_skip, routed
    from tritonjit_ops import reduction

    x, dims = _layouts()[case]
    for op in ("sum", "mean", "amax"):
        close(getattr(T, op)(x, list(dims), keepdim), _ref(op, x, list(dims), keepdim), rtol=1e-5, atol=1e-5)
    in_place = reduction._memory_view(x, dims) is not None
    plan = reduction.plan_reduce("sum", x, list(dims), keepdim)
    if in_place:
        assert plan is not None and plan.contiguous == (), case  # no copy of the input
    native_ops_or_skip()
    got, d = routed(lambda: torch.sum(x, list(dims), keepdim), ["sum.dim_IntList"])
    close(got, _ref("sum", x, list(dims), keepdim), rtol=1e-5, atol=1e-5)
    if in_place:
        assert d["python_calls"] == 0 and d["plan_hits"] == 1, d


STAGED = {  # dims that are not one block: one (O, R, K) stage per run of adjacent dims
    "Mamba's state sum over (batch, seq)": ((3, 5, 7, 4), (0, 2), 2),
    "three runs": ((2, 3, 4, 5, 6), (0, 2, 4), 3),
    "a run of two and a single dim": ((3, 5, 7, 4), (0, 2, 3), 2),
    "kept first and last": ((3, 5, 7, 4), (1, 3), 2),
}


@pytest.mark.parametrize("case", sorted(STAGED))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_dims_in_several_runs_reduce_in_stages(case, dtype):
    """sum/mean/amax/amin over dims in several runs: one reduction per run, innermost first,
    reading the input in place (no permuted copy: the plan asks for none of a contiguous
    input), bf16 sums kept in fp32 between stages; the plan (the C++ executor's reference)
    and the direct entry agree with torch, keepdim or not, and so does a transposed input
    (read in place where the dims are one block in its memory order, else copied once)."""
    from tritonjit_ops import _plan, reduction

    shape, dims, runs = STAGED[case]
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(*shape, generator=g) * 8).to(dtype)
    tol = dict(rtol=2e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-4)
    for op in ("sum", "mean", "amax", "amin"):
        if op == "mean" and not dtype.is_floating_point:
            continue
        for keepdim in (False, True):
            ref = _ref(op, x, list(dims), keepdim)
            plan = reduction.plan_reduce(op, x, list(dims), keepdim)
            assert plan is not None and plan.contiguous == () and len(plan.launches) == runs, (op, plan)
            close(_plan.run(plan, [x, list(dims), keepdim]), ref, **tol)
            close(getattr(T, op)(x, list(dims), keepdim), ref, **tol)
    if dtype == torch.bfloat16:
        plan = reduction.plan_reduce("sum", x, list(dims))
        assert all(b.dtype == torch.float32 for b in plan.temps), plan.temps
    xt = x.transpose(2, 3)
    in_place = reduction._memory_view(xt, dims) is not None  # the dims one block in memory order
    assert reduction.plan_reduce("sum", xt, list(dims)).contiguous == (() if in_place else (0,))
    close(T.sum(xt, list(dims)), _ref("sum", xt, list(dims), False), **tol)


#: strided views reduced over their last dims, read in place through their rows' layout:
#: (base shape, the view, dims)
ROWS_IN_PLACE = {
    "attention heads, mean over -1 (q/k norms)": ((2, 5, 3, 8), lambda t: t.transpose(1, 2), (3,)),
    "rows sliced out of longer ones": ((4, 6, 32), lambda t: t[:, :, :16], (2,)),
    "a sliced matrix, the last two dims": ((4, 5, 6), lambda t: t[:, :3], (1, 2)),
    "five dims, the last one sliced": ((2, 4, 2, 8, 8), lambda t: t[..., :5], (4,)),
    "two long rows sliced (a split over R)": ((2, 140000), lambda t: t[:, :70001], (1,)),
    "a small matrix's columns (elements 8 apart)": ((6, 8), lambda t: t.t()[1:], (1,)),
    "a head view sliced (rotary halves)": ((2, 6, 4, 16), lambda t: t.transpose(1, 2)[..., :8], (3,)),
}


def _rows_case(case: str, device: str = "cpu", dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, tuple]:
    shape, view, dims = ROWS_IN_PLACE[case]
    return view(torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(device, dtype)), dims


@pytest.mark.parametrize("case", list(ROWS_IN_PLACE))
def test_strided_views_over_their_last_dims_are_read_in_place(case):
    """sum/mean/amax/amin and argmax of a strided view over its last dims: no contiguous copy
    (one launch, or a split's two), on the plan (the C++ executor's reference) and the C++
    path, each equal to torch; on a device a layout the kernel cannot address goes to aten's
    strided kernel instead of a copy and ours."""
    from _util import native_ops_or_skip, routed
    from tritonjit_ops import _plan, reduction

    x, dims = _rows_case(case)
    assert not x.is_contiguous() and reduction._memory_view(x, dims) is None
    for op in ("sum", "mean", "amax", "amin"):
        for keepdim in (False, True):
            p = reduction.plan_reduce(op, x, list(dims), keepdim)
            assert p.contiguous == () and not p.aten, (op, p)
            close(_plan.run(p, [x, list(dims), keepdim]), _ref(op, x, list(dims), keepdim), rtol=1e-5, atol=1e-5)
    if len(dims) == 1:
        p = reduction.plan_arg("argmax", x, dims[0], True)
        assert p.contiguous == ()
        close(_plan.run(p, [x, dims[0], True]), x.argmax(dims[0], keepdim=True))
    native_ops_or_skip()
    got, d = routed(lambda: torch.mean(x, list(dims), True), ["mean.dim"])
    close(got, x.mean(list(dims), True), rtol=1e-5, atol=1e-5)
    assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["aten_calls"] == 0, d


@pytest.mark.gpu
def test_gpu_strided_views_are_read_in_place_and_others_go_to_aten():
    """On the GPU, from C++: the strided views above reduce in place (a plan hit, no Python,
    no aten call) in fp32 and bf16; a layout the kernel cannot address is aten's call."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    ops = ["sum.dim_IntList", "mean.dim", "amax", "argmax"]
    for case in ROWS_IN_PLACE:
        for dtype in (torch.float32, torch.bfloat16):
            x, dims = _rows_case(case, "cuda", dtype)
            fns = [functools.partial(torch.sum, x, list(dims)), functools.partial(torch.mean, x, list(dims), True),
                   functools.partial(torch.amax, x, list(dims))]
            if len(dims) == 1 and dtype == torch.float32:  # (bf16 rounding makes ties, whose index aten leaves open)
                fns.append(functools.partial(torch.argmax, x, dims[0]))
            for fn in fns:
                want = fn()
                got, d = routed(fn, ops)
                close(got, want, dtype, rtol=2e-2, atol=2e-2)
                assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["aten_calls"] == 0, (case, d)
    x = torch.randn(2, 4, 8, 8, device="cuda").permute(0, 2, 1, 3)[..., :5]
    got, d = routed(lambda: torch.sum(x, [0, 1], True), ops)
    close(got, torch.sum(x, [0, 1], True), rtol=1e-5, atol=1e-5)
    assert d["python_calls"] == 0 and d["aten_calls"] == 1, d


def test_large_views_with_strided_rows_are_copied_first():
    """Rows whose elements lie a stride apart are read in place while small; past
    STRIDED_ROWS_MAX_NUMEL elements (each element a memory sector of its own) they are copied
    first, or on a device left to aten; rows of stride-1 elements are read in place at any size."""
    from tritonjit_ops import _layout, reduction

    big = torch.empty(2, _layout.STRIDED_ROWS_MAX_NUMEL).t()[1:]  # rows of 2 elements, far apart
    assert _layout.rows_layout(big, [1]) is None
    assert _layout.rows_layout(big[:16], [1]) is not None
    assert reduction.plan_reduce("sum", big, [1]).contiguous == (0,)
    wide = torch.empty(4, 2 * _layout.STRIDED_ROWS_MAX_NUMEL)[:, 1:]
    assert reduction.plan_reduce("sum", wide, [1]).contiguous == ()


def test_a_layout_needing_a_copy_is_atens_on_a_device():
    """A strided view the kernel cannot read in place (the sum over (0, 1) of a permuted head
    view: a bias gradient) is copied first on the interpreter and left to aten's one kernel on
    a device (meta stands in), for sum/mean/amax, argmax and any."""
    from tritonjit_ops import reduction

    x = torch.randn(2, 4, 8, 8).permute(0, 2, 1, 3)[..., :5]
    m = torch.empty(x.shape, device="meta").as_strided(x.shape, x.stride())
    assert reduction.plan_reduce("sum", x, [0, 1], True).contiguous == (0,)
    assert reduction.plan_reduce("sum", m, [0, 1], True).aten
    assert reduction.plan_reduce("amax", m, [1]).aten
    assert reduction.plan_arg("argmax", m, 1).aten and reduction.plan_logic("any", m, 1).aten
    assert not reduction.plan_reduce("sum", m, [3]).aten  # the last dim: read in place


def test_memory_view_refuses_what_it_cannot_read_in_place():
    from tritonjit_ops import reduction

    cl = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert reduction._memory_view(cl, (0, 2, 3))[1:] == (1, 40, 3)  # (N*H*W, C): a column sum
    assert reduction._memory_view(cl, (1,))[1:] == (40, 3, 1)
    assert reduction._memory_view(cl, (0, 1)) is None  # N and C are not one block in memory
    assert reduction._memory_view(torch.randn(4, 5, 6).permute(1, 0, 2), (2,)) is None  # kept (1, 0) in memory
    assert reduction._memory_view(torch.randn(8, 6)[:, ::2], (0,)) is None  # not dense


@pytest.mark.parametrize("shape", [(12544, 96), (3000, 5), (300, 700)])
def test_few_programs_over_a_long_reduced_axis_split(shape):
    """A column sum of a tall matrix (a bias gradient) splits its rows over programs when its
    columns give few of them (it was 2 programs over 12544 rows on a GPU), and sums right."""
    from tritonjit_ops import reduction

    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g)
    plan = reduction.plan_reduce("sum", x, [0], True)
    assert len(plan.launches) == 2, "split over the rows, then the partial sums reduced"
    close(T.sum(x, 0), x.sum(0), rtol=1e-5, atol=1e-4)
    close(T.mean(x, 0, keepdim=True), x.mean(0, keepdim=True), rtol=1e-5, atol=1e-5)
    close(T.amax(x, 0), x.amax(0))


@pytest.mark.parametrize("shape, grid", [((784, 384), (1, 48, 1)), ((3136, 768), (1, 96, 1)), ((196, 3072), (1, 96, 1)),
                                         ((4, 784, 384), (4, 24, 1))])
def test_mid_sized_column_sums_narrow_their_tiles_on_a_device(shape, grid):
    """On a device, a column sum whose columns give few programs and whose rows are a few tiles
    long narrows its column tiles for programs: one launch where a split would take two. (The
    launches are planned on the meta device, which plans as an accelerator does.)"""
    from tritonjit_ops import reduction

    *o, r, k = shape
    x = torch.empty(shape, device="meta", dtype=torch.bfloat16)
    out = torch.empty((o[0] if o else 1) * k, device="meta", dtype=torch.bfloat16)
    launches = reduction._reduce_launches("sum", x, o[0] if o else 1, r, k, x, out, None,
                                          lambda s, dt: torch.empty(s, device="meta", dtype=dt))
    assert len(launches) == 1 and tuple(launches[0].grid) == grid
    tall = torch.empty(12544, 96, device="meta", dtype=torch.bfloat16)  # many tiles a program: split
    assert len(reduction._reduce_launches("sum", tall, 1, 12544, 96, tall, out, None,
                                          lambda s, dt: torch.empty(s, device="meta", dtype=dt))) == 2


@pytest.mark.parametrize("shape, launches", [((316, 8000), 1), ((512, 6144), 1), ((1024, 8000), 2), ((300, 96), 1)])
def test_wide_column_sums_split_only_past_a_short_loop_on_a_device(shape, launches):
    """On a device, a column sum whose columns already give enough programs (a bias gradient
    of a wide layer) loops over up to 8 row tiles in one launch instead of a second launch
    for partial sums; a longer one still splits. (Planned on the meta device.)"""
    from tritonjit_ops import reduction

    r, k = shape
    x = torch.empty(shape, device="meta", dtype=torch.bfloat16)
    out = torch.empty(k, device="meta", dtype=torch.bfloat16)
    got = reduction._reduce_launches("sum", x, 1, r, k, x, out, None,
                                     lambda s, dt: torch.empty(s, device="meta", dtype=dt))
    assert len(got) == launches, [tuple(L.grid) for L in got]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(784, 384), (3136, 768), (196, 3072), (4096, 1024), (316, 8000)])
def test_gpu_mid_sized_column_sums(shape):
    """The narrowed one-launch column sums (bias gradients of mid-sized layers) against torch."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(*shape, device="cuda", generator=g).to(dtype)
        got, d = routed(lambda x=x: x.sum(0), ["sum.dim_IntList"])
        close(got.float(), x.float().sum(0), rtol=2e-2, atol=2e-1)
        assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["launches"] == 1, d


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_bias_gradient_sums(dtype):
    """ConvNeXt's bias gradients on the GPU: (4*56*56, 96) column sums and the channels_last
    sum over (N, H, W), on the C++ path with no copy, against torch."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(0)
    col = torch.randn(12544, 96, device="cuda", generator=g).to(dtype)
    cl = torch.randn(4, 96, 56, 56, device="cuda", generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    for fn in (lambda: col.sum(0, keepdim=True), lambda: cl.sum((0, 2, 3)), lambda: cl.mean((2, 3), keepdim=True)):
        got, d = routed(fn, ["sum.dim_IntList", "mean.dim"])
        close(got, fn(), dtype, rtol=2e-2, atol=2e-1)
        assert d["python_calls"] == 0 and d["plan_hits"] >= 1, d


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_staged_reductions_on_the_cpp_path(dtype):
    """Mamba's sum over (batch, seq) of a (B, D, L, N) state gradient, and a mean and an amax
    over two runs of dims, on the GPU: C++ plans of one stage a run (no Python call, no copy),
    against torch in fp64."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8, 256, 64, 8, device="cuda", generator=g).to(dtype)
    for op, over in (("sum", "sum.dim_IntList"), ("mean", "mean.dim"), ("amax", "amax")):
        got, d = routed(lambda op=op: getattr(torch, op)(x, [0, 2], keepdim=True), [over])
        ref = getattr(torch, op)(x.double(), [0, 2], keepdim=True)
        close(got.double(), ref, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=2e-1 if op == "sum" else 2e-2)
        assert d["python_calls"] == 0 and d["plan_hits"] == 1 and d["launches"] >= 2, (op, d)


def test_staged_reduction_of_mambas_state_moves_no_copy_of_it():
    """Planned as on a device (meta): the sum of a f32[8,2048,512,8] state over (0, 2) reads
    it once in place: its one scratch buffer holds the first stage's (8, 2048, 1, 8) result,
    and no launch's grid spans more programs than the input has 1024-element tiles."""
    import math

    from tritonjit_ops import reduction

    x = torch.empty(8, 2048, 512, 8, device="meta")
    plan = reduction.plan_reduce("sum", x, [0, 2], True)
    assert plan.contiguous == () and plan.outputs[0].shape == (1, 2048, 1, 8)
    assert [(b.shape, b.dtype) for b in plan.temps] == [((8, 2048, 1, 8), torch.float32)], plan.temps
    assert all(math.prod(L.grid) <= x.numel() // 1024 for L in plan.launches)
