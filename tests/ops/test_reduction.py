import pytest
import torch
import tritonjit_ops as T
from _util import FLOATS, close

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
    block_k = cx.get("BLOCK_K") or L.args[[p.name for p in L.fn.params].index("BLOCK_K")]
    block_r = L.args[[p.name for p in L.fn.params].index("BLOCK_R")]
    if k > 1:  # the tile holds min(k, 512 // block_r) kept elements (the CPU's tile of 512)
        assert block_k >= min(1 << (k - 1).bit_length(), 512 // block_r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_short_middle_dim(dtype):
    x = torch.randn(8192, 2, 1024, device="cuda", dtype=dtype)
    close(T.sum(x, [1]), torch.sum(x, [1]), dtype, rtol=2e-2, atol=2e-2)
    close(T.mean(x, [1], keepdim=True), torch.mean(x, [1], keepdim=True), dtype, rtol=2e-2, atol=2e-2)
