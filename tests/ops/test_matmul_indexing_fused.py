import math

import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from _util import FLOATS, close, launch_arg

MM_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
          torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mnk", [(37, 29, 45), (16, 16, 16), (1, 5, 3)])
def test_mm(dtype, mnk):
    m, n, k = mnk
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    close(T.mm(a, b), torch.mm(a, b), **MM_TOL[dtype])
    close(T.mm(b.t(), a.t()), torch.mm(b.t(), a.t()), **MM_TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_bmm_addmm(dtype):
    a, b = torch.randn(3, 10, 20).to(dtype), torch.randn(3, 20, 7).to(dtype)
    close(T.bmm(a, b), torch.bmm(a, b), **MM_TOL[dtype])
    close(T.bmm(a, b.transpose(1, 2).contiguous().transpose(1, 2)), torch.bmm(a, b), **MM_TOL[dtype])
    x, w = torch.randn(9, 20).to(dtype), torch.randn(20, 7).to(dtype)
    for bias in (torch.randn(7).to(dtype), torch.randn(9, 7).to(dtype), torch.randn(9, 1).to(dtype)):
        close(T.addmm(bias, x, w), torch.addmm(bias, x, w), **MM_TOL[dtype])
        close(T.addmm(bias, x, w, beta=0.5, alpha=2.0), torch.addmm(bias, x, w, beta=0.5, alpha=2.0),
              **MM_TOL[dtype])
    nan_bias = torch.full((7,), float("nan")).to(dtype)
    close(T.addmm(nan_bias, x, w, beta=0), torch.addmm(nan_bias, x, w, beta=0), **MM_TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_baddbmm(dtype):
    """BLOOM's ALiBi scores (a (B, 1, N) bias, alpha 1/sqrt(d), k transposed) and every other
    broadcast of the bias, read in the epilogue at its own strides."""
    a, b = torch.randn(4, 10, 16).to(dtype), torch.randn(4, 7, 16).to(dtype).transpose(1, 2)
    tol = MM_TOL[dtype]
    for bias in (torch.randn(4, 1, 7), torch.randn(4, 10, 7), torch.randn(7), torch.randn(10, 1),
                 torch.randn(1, 10, 7), torch.randn(4, 7, 10).transpose(1, 2), torch.tensor(0.5)):
        bias = bias.to(dtype)
        close(T.baddbmm(bias, a, b), torch.baddbmm(bias, a, b), **tol)
        close(T.baddbmm(bias, a, b, beta=1.0, alpha=0.25), torch.baddbmm(bias, a, b, beta=1.0, alpha=0.25), **tol)
        close(T.baddbmm(bias, a, b, beta=-0.5, alpha=2), torch.baddbmm(bias, a, b, beta=-0.5, alpha=2), **tol)
    nan_bias = torch.full((4, 1, 7), float("nan")).to(dtype)
    close(T.baddbmm(nan_bias, a, b, beta=0), torch.baddbmm(nan_bias, a, b, beta=0), **tol)
    assert T.baddbmm(torch.randn(4, 1, 7).to(dtype), a, b).is_contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_baddbmm_split_k_adds_each_batchs_bias(dtype):
    """A split-K plan (as a GPU chooses for few output tiles): the reduce kernel adds the bias
    of its own batch, not the first batch's."""
    from tritonjit_ops import matmul

    a, b = torch.randn(3, 8, 600).to(dtype), torch.randn(3, 600, 24).to(dtype)
    bias = (torch.arange(3.0).view(3, 1, 1) * 100 + torch.randn(3, 1, 24)).to(dtype).expand(3, 8, 24)
    plan = matmul.make_plan(8, 24, 600, 3, dtype, a.stride()[1:], b.stride()[1:], True, "cpu",
                            (16, 32, 64, 4, 1), 4, scale=True)
    assert plan.split_k == 4
    c = matmul.run(plan, a, b, torch.empty(3, 8, 24, dtype=dtype), bias, 2.0, 0.5)
    tol = dict(rtol=MM_TOL[dtype]["rtol"], atol=MM_TOL[dtype]["atol"] * 8)
    close(c, torch.baddbmm(bias, a, b, beta=0.5, alpha=2.0), **tol)


def test_baddbmm_bad_input():
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    with pytest.raises(RuntimeError, match="Input dtypes must be the same, got: input torch.float16"):
        T.baddbmm(torch.randn(2, 3, 5).half(), a, b)
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor|self must be a 3D tensor"):
        T.baddbmm(torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[2, 4\] but got: \[3, 4\]"):
        T.baddbmm(torch.randn(2, 3, 5), a, torch.randn(3, 4, 5))
    with pytest.raises(RuntimeError, match="expanded size"):
        T.baddbmm(torch.randn(2, 3, 6), a, b)
    with pytest.raises(TypeError, match="tritonjit.baddbmm: expected a Tensor for self"):
        T.baddbmm(1.0, a, b)


def _layout(t, transposed):
    """t with the same values, stored transposed (its first axis contiguous) when asked."""
    return t.t().contiguous().t() if transposed else t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m", [1, 4, 16, 33])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_mm_skinny_in_every_layout(dtype, m, layout):
    """Decode-like M with a and/or b transposed: NT is nn.Linear's x @ W.t(), TN a grad_W."""
    a = _layout(torch.randn(m, 72).to(dtype), layout[0] == "T")
    b = _layout(torch.randn(72, 40).to(dtype), layout[1] == "T")
    close(T.mm(a, b), torch.mm(a, b), **MM_TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_split_k(dtype):
    """One output tile and K >= 512 split K on the interpreter: fp32 partials, then the
    reduce kernel (bias, alpha and beta applied there)."""
    from tritonjit_ops import matmul

    x, w = torch.randn(8, 600).to(dtype), torch.randn(24, 600).to(dtype)
    assert matmul.choose(8, 24, 600, 1, dtype, (600, 1), (1, 600), False, torch.device("cpu")).split_k > 1
    tol = dict(MM_TOL[dtype], atol=MM_TOL[dtype]["atol"] * 4)  # sums over 600 products
    close(T.mm(x, w.t()), torch.mm(x, w.t()), **tol)
    for bias in (torch.randn(24).to(dtype), torch.randn(8, 1).to(dtype), torch.randn(8, 24).to(dtype)):
        close(T.addmm(bias, x, w.t(), beta=0.5, alpha=2.0), torch.addmm(bias, x, w.t(), beta=0.5, alpha=2.0),
              **dict(tol, atol=tol["atol"] * 2))
    xs, ws = torch.randn(3, 5, 520).to(dtype), torch.randn(3, 520, 20).to(dtype)
    close(T.bmm(xs, ws), torch.bmm(xs, ws), **tol)
    close(T.mm(x.t().contiguous().t(), w.t()), torch.mm(x, w.t()), **tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("split,tma,persistent", [(1, True, False), (2, True, False), (1, True, True),
                                                  (1, False, True)])
def test_tma_and_persistent_paths_on_the_interpreter(dtype, layout, split, tma, persistent):
    """The TMA branch (descriptors, transposed tiles read with .T, zero-filled edges; on the
    GPU taken only with TRITONJIT_MM_TMA=1) and the persistent one (min(tiles, SMs) programs
    walking the tiles; the interpreter counts 4 SMs) compute the same as torch, batched,
    with bias and alpha/beta."""
    from tritonjit_ops import matmul

    a = torch.randn(2, 40, 48).to(dtype) if layout[0] == "N" else torch.randn(2, 48, 40).to(dtype).transpose(1, 2)
    b = torch.randn(2, 48, 24).to(dtype) if layout[1] == "N" else torch.randn(2, 24, 48).to(dtype).transpose(1, 2)
    bias = torch.randn(40, 24).to(dtype)
    assert matmul.tma_ok(2, a.stride(), b.stride(), 40, 24, 48, True)
    plan = matmul.make_plan(40, 24, 48, 2, dtype, a.stride(), b.stride(), True, "cpu",
                            (16, 16, 16, 1, 1, tma, persistent), split, scale=True)
    assert plan.grid == ((4, 2, 1) if persistent else (6, 2, split))  # 3x2 tiles; persistent: 4 programs walk 6
    c = torch.empty(2, 40, 24, dtype=dtype)
    matmul.run(plan, a, b, c, bias, 2.0, 0.5)
    ref = (2.0 * torch.bmm(a.float(), b.float()) + 0.5 * bias.float()).to(dtype)
    close(c, ref, **MM_TOL[dtype])


def test_mm_empty():
    close(T.mm(torch.randn(0, 3), torch.randn(3, 4)), torch.mm(torch.randn(0, 3), torch.randn(3, 4)))
    close(T.mm(torch.randn(2, 0), torch.randn(0, 4)), torch.zeros(2, 4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
def test_matmuls_of_other_dtypes_are_atens_without_python(dtype):
    """Integer and float64 matmuls (no kernel here takes them): aten's kernel, planned as such
    on the C++ path once per call key, instead of the Python implementation refusing each call."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-3, 4, (5, 6), generator=g).to(dtype) for _ in range(2))
    a3, b3 = (torch.randint(-3, 4, (2, 5, 6), generator=g).to(dtype) for _ in range(2))
    bias = torch.randint(-3, 4, (6,), generator=g).to(dtype)
    for fn, op in ((lambda: a @ b.t(), "mm"), (lambda: a3 @ b3.transpose(1, 2), "bmm"),
                   (lambda: torch.addmm(bias, a.t(), b), "addmm")):
        got, d = routed(fn, [op])
        assert torch.equal(got, fn())
        assert d["python_calls"] == 0 and d["aten_calls"] == 1, (op, d)


def test_matmuls_with_an_empty_inner_dim_are_atens_without_python():
    """K = 0: a fill (zeros, or beta * bias for addmm): aten's kernel, decided by the key's shapes,
    not the Python implementation on every call."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    bias = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    for fn, op in ((lambda: torch.randn(4, 0) @ torch.randn(0, 5), "mm"),
                   (lambda: torch.randn(2, 4, 0).bmm(torch.randn(2, 0, 5)), "bmm"),
                   (lambda: torch.addmm(bias, torch.randn(4, 0), torch.randn(0, 5), beta=0.5), "addmm")):
        got, d = routed(fn, [op])
        close(got, fn())
        assert d["python_calls"] == 0 and d["aten_calls"] == 1, (op, d)


def test_mm_bad_input():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        T.mm(torch.randn(2, 3), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match="same dtype"):
        T.mm(torch.randn(2, 3), torch.randn(3, 2).half())
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.mm(torch.ones(2, 3, dtype=torch.int32), torch.ones(3, 2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="2D"):
        T.mm(torch.randn(2, 3, 4), torch.randn(4, 2))
    with pytest.raises(RuntimeError, match="batch2"):
        T.bmm(torch.randn(2, 3, 4), torch.randn(3, 4, 2))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_index_select(dtype):
    x = (torch.randn(5, 6, 7) * 10).to(dtype)
    idx = torch.tensor([4, 0, 2, 2])
    for d in range(3):
        close(T.index_select(x, d, idx), torch.index_select(x, d, idx))
    close(T.index_select(x.transpose(0, 2), 1, idx.int()), torch.index_select(x.transpose(0, 2), 1, idx.int()))
    close(T.index_select(x, 1, idx[:0]), torch.index_select(x, 1, idx[:0]))


@pytest.mark.parametrize("shape, dim, n", [((300, 3), 0, 257), ((6, 40, 2), 1, 77), ((4, 9, 1), 1, 300),
                                           ((700, 1500), 0, 3), ((2, 5, 600), 1, 9)])
def test_index_select_tiles_narrow_and_wide_rows(shape, dim, n):
    """Rows of 1-3 elements go several hundred to a program (the last tile partly outside the
    output), rows past 1024 elements take column blocks; every row lands where aten puts it."""
    from tritonjit_ops._common import row_tile

    x = torch.randn(*shape)
    idx = torch.randint(0, shape[dim], (n,), generator=torch.Generator().manual_seed(n))
    k = math.prod(shape[dim + 1:])
    block, rows = row_tile(k, math.prod(shape[:dim]) * n)
    assert block * rows <= 1024 and (rows > 1) == (k <= 512)
    assert torch.equal(T.index_select(x, dim, idx), torch.index_select(x, dim, idx))
    w = torch.randn(shape[0], 3)
    ids = torch.randint(0, shape[0], (5, 61))
    assert torch.equal(T.embedding(w, ids), F.embedding(ids, w))


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather(dtype):
    x = torch.randn(5, 6, 7).to(dtype)
    for d, shape in ((0, (5, 3, 7)), (1, (2, 8, 3)), (2, (2, 6, 3))):
        idx = torch.randint(0, x.shape[d], shape)
        close(T.gather(x, d, idx), torch.gather(x, d, idx))
    idx = torch.randint(0, 6, (7, 5)).t()
    close(T.gather(x[:, :, 0].t().t(), 1, idx), torch.gather(x[:, :, 0], 1, idx))


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding(dtype):
    w = torch.randn(10, 8).to(dtype)
    ids = torch.randint(0, 10, (3, 4))
    close(T.embedding(w, ids), F.embedding(ids, w))


def test_indexing_bad_input():
    x = torch.randn(4, 5)
    with pytest.raises(IndexError, match="index_select: index 4 is out of range"):
        T.index_select(x, 0, torch.tensor([4]))
    with pytest.raises(IndexError, match="embedding: index -1 is out of range"):
        T.embedding(x, torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="int64"):
        T.gather(x, 0, torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="Size does not match"):
        T.gather(x, 0, torch.zeros(2, 6, dtype=torch.int64))
    with pytest.raises(IndexError, match="vector"):
        T.index_select(x, 0, torch.zeros(2, 2, dtype=torch.int64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_silu_and_mul(dtype):
    g, u = torch.randn(4, 3, 20).to(dtype), torch.randn(4, 3, 20).to(dtype)
    close(T.silu_and_mul(g, u), F.silu(g) * u)
    close(T.silu_and_mul(torch.cat([g, u], -1)), F.silu(g) * u)
    with pytest.raises(RuntimeError, match="even"):
        T.silu_and_mul(torch.randn(3, 5))
    with pytest.raises(RuntimeError, match="same shape"):
        T.silu_and_mul(g, u[:, :2])


def _rope_ref(x, cos, sin, interleaved):
    r2 = cos.shape[1]
    c, s = cos[:, None, :].float(), sin[:, None, :].float()
    xf = x.float()
    rot, rest = xf[..., : 2 * r2], xf[..., 2 * r2:]
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        o = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)
    else:
        x1, x2 = rot[..., :r2], rot[..., r2:]
        o = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    return torch.cat([o, rest], -1).to(x.dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rot", [8, 4])
def test_rotary(dtype, interleaved, rot):
    x = torch.randn(2, 5, 3, 8).to(dtype)
    ang = torch.randn(5, rot // 2)
    close(T.rotary_embedding(x, ang.cos(), ang.sin(), interleaved),
          _rope_ref(x, ang.cos(), ang.sin(), interleaved))
    with pytest.raises(RuntimeError, match="cos/sin"):
        T.rotary_embedding(x, ang.cos()[:4], ang.sin()[:4])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(dtype, reduction):
    lg = torch.randn(6, 11).to(dtype)
    tg = torch.randint(0, 11, (6,))
    tg[2] = -100
    ref = F.cross_entropy(lg.float(), tg, reduction=reduction).to(dtype)
    close(T.cross_entropy(lg, tg, reduction=reduction), ref)
    tg[2] = tg[4] = 3
    close(T.cross_entropy(lg, tg, ignore_index=3, reduction=reduction),
          F.cross_entropy(lg.float(), tg, ignore_index=3, reduction=reduction).to(dtype))


def test_cross_entropy_wide_and_bad():
    lg, tg = torch.randn(3, 2500), torch.randint(0, 2500, (3,))
    close(T.cross_entropy(lg, tg), F.cross_entropy(lg, tg))
    with pytest.raises(IndexError, match="target 2500 is out of bounds"):
        T.cross_entropy(lg, torch.tensor([0, 1, 2500]))
    with pytest.raises(ValueError, match="reduction"):
        T.cross_entropy(lg, tg, reduction="avg")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_gpu_matmul_fused(dtype):
    a = torch.randn(1000, 770, device="cuda", dtype=dtype)
    b = torch.randn(770, 513, device="cuda", dtype=dtype)
    # K=770 sums reach |28|, where one bf16 ulp is 0.125 and one fp16 ulp 0.016:
    # allow two output ulps against an fp32 reference of the same inputs
    tol = {torch.bfloat16: dict(rtol=2e-2, atol=0.25), torch.float16: dict(rtol=2e-2, atol=0.04),
           torch.float32: dict(rtol=1e-3, atol=1e-3)}[dtype]
    close(T.mm(a, b), torch.mm(a.float(), b.float()).to(dtype), **tol)
    g = torch.randn(256, 2 * 4096, device="cuda", dtype=dtype)
    close(T.silu_and_mul(g), F.silu(g[:, :4096]) * g[:, 4096:])
    lg, tg = torch.randn(64, 32000, device="cuda", dtype=dtype), torch.randint(0, 32000, (64,), device="cuda")
    close(T.cross_entropy(lg, tg), F.cross_entropy(lg.float(), tg).to(dtype))


def test_silu_and_mul_with_up_on_another_device():
    """The fast path (one call checks and allocates) still gives torch's device message."""
    g = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match="same device"):
        T.silu_and_mul(g, torch.randn(4, 8, device="meta"))
    close(T.silu_and_mul(g.double(), g.double()), F.silu(g.double()) * g.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("rows, n, d, padding_idx, freq", [
    (32, 8192, 16, -1, False),  # T5's relative position buckets (65536 indices there): a small table
    (5, 3000, 33, 2, True),  # padding_idx and scale_grad_by_freq; a column count not a power of two
    (64, 1100, 100, 0, False),  # the largest small table of 32/64-bit gradients; several column blocks
    (65, 1100, 8, -1, False),  # one row past it: the atomic kernel
    (73, 16384, 16, -1, False),  # wav2vec2-BERT's 73 relative distances: the tensor-core table (not fp64)
    (256, 32768, 40, 5, False),  # its largest table; padding_idx; 40 columns in blocks of 32
    (257, 1100, 8, -1, False),  # one row past it: the atomic kernel
    (32, 1000, 16, -1, False),  # fewer indices than the small-table kernel takes
])
def test_embedding_backward_small_tables(dtype, rows, n, d, padding_idx, freq):
    """The weight gradient against float64 aten, to the output dtype's rounding of the
    exact sum (aten's own CPU kernel accumulates 16-bit gradients in 16 bits)."""
    from tritonjit_ops import indexing_backward as ib

    if dtype == torch.float64 and n >= 16384:
        pytest.skip("fp64 has no tensor-core table: the atomic kernel, which the smaller cases test")
    g = torch.Generator().manual_seed(n)
    idx = torch.randint(0, rows, (n,), generator=g)
    idx[:7] = rows - 1  # the last row: a kernel that stopped one short would miss it
    grad = torch.randn(n, d, generator=g).to(dtype)
    exact = torch.ops.aten.embedding_dense_backward(grad.double(), idx, rows, padding_idx, freq)
    got = ib.embedding_dense_backward(grad, idx, rows, padding_idx, freq)
    assert got.dtype == dtype and got.shape == (rows, d)
    scale = float(exact.abs().max())
    tol = {torch.float32: 1e-6, torch.float64: 1e-12}.get(dtype, 8e-3)
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=tol * max(scale, 1.0))
    if padding_idx >= 0:
        assert not got[padding_idx].any()
    if dtype != torch.float32:
        return
    # through autograd, as a model's embedding is trained (F.embedding's backward)
    w = torch.randn(rows, d, dtype=dtype, requires_grad=True)
    with T.enable():
        F.embedding(idx.view(-1, 4), w, padding_idx=padding_idx if padding_idx >= 0 else None,
                    scale_grad_by_freq=freq).backward(grad.view(-1, 4, d))
    torch.testing.assert_close(w.grad.double(), exact, rtol=0, atol=tol * max(scale, 1.0))


@pytest.mark.parametrize("dtype, rows, n, freq, kernel", [
    (torch.bfloat16, 73, 16384, False, "dot"),  # up to 256 rows, 128 indices a row: one-hot times rows
    (torch.float16, 256, 32768, False, "dot"),
    (torch.float32, 73, 16384, False, "dot"),  # as three bf16 parts
    (torch.float64, 73, 16384, False, "atomic"),  # no tensor cores for fp64
    (torch.bfloat16, 73, 16383, False, "atomic"),  # a chunk shorter than the table
    (torch.bfloat16, 257, 40000, False, "atomic"),
    (torch.bfloat16, 73, 16384, True, "atomic"),  # scale_grad_by_freq divides each row: the vector kernel's
    (torch.bfloat16, 64, 4096, True, "vector"),
    (torch.float32, 64, 4096, False, "vector"),  # up to 64 rows, 1024 indices: the vector units
    (torch.bfloat16, 32, 1024, False, "vector"),
])
def test_embedding_backward_small_table_kernels(dtype, rows, n, freq, kernel):
    """Which kernel a table of ``rows`` read by ``n`` indices takes: the atomics of a few
    hundred indices per row queued on one address cost wav2vec2-BERT's step 3.3x eager on its
    73-row distance table (an H100), which the tensor-core table sums in registers instead."""
    from tritonjit_ops import indexing_backward as ib

    grad, idx = torch.empty(n, 64, dtype=dtype), torch.randint(0, rows, (n,))
    plan = ib._plan(grad, idx, rows, -1, freq, False)
    small = [ln for ln in plan.launches if ln.fn is ib._embed_bwd_small]
    atomic = [ln for ln in plan.launches if ln.fn is ib._embed_bwd]
    if kernel == "atomic":
        assert atomic and not small
        return
    assert small and not atomic
    assert launch_arg(small[0], "DOT") == (kernel == "dot")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, n", [(32, 2048), (73, 16384)])  # the vector table, the tensor-core table
def test_embedding_backward_small_tables_keep_non_finite_values_in_their_row(dtype, rows, n):
    """An inf or a NaN in the gradient (a loss scaler's overflow) lands in its own row only, as
    in aten's sum: a product with the one-hot's zeros made a NaN of the whole column before."""
    from tritonjit_ops import indexing_backward as ib

    g = torch.Generator().manual_seed(rows)
    idx = torch.randint(0, rows, (n,), generator=g)
    idx[:3] = torch.tensor([3, 5, 7])
    grad = torch.randn(n, 16, generator=g).to(dtype)
    grad[0, 2], grad[1, 4], grad[2, 2] = float("inf"), float("nan"), float("-inf")
    exact = torch.ops.aten.embedding_dense_backward(grad.double(), idx, rows, -1, False)
    got = ib.embedding_dense_backward(grad, idx, rows, -1, False).double()
    assert torch.equal(got.isnan(), exact.isnan()) and torch.equal(got.isinf(), exact.isinf())
    fin = exact.isfinite()
    tol = 1e-6 if dtype == torch.float32 else 8e-3
    torch.testing.assert_close(got[fin], exact[fin], rtol=0, atol=tol * float(exact[fin].abs().max()))


@pytest.mark.parametrize("t, acc", [("bf16", "fp32"), ("fp16", "fp32"), ("fp32", "fp32")])
def test_embedding_backward_tensor_core_table_cross_compiles(t, acc):
    """The tensor-core table (one-hot times rows; fp32 as three truncated bf16 parts) compiles
    for an H100/H200 and an A100 target here, with no GPU: the interpreter runs it as fp32."""
    from tritonjit_ops import _common
    from tritonjit_ops import indexing_backward as ib

    # g, idx, acc, counts, L, W, D, padding_idx, CHUNK, WP, SUB, BLOCK, FREQ, DOT, DOT_F32, CHECK
    sig = f"*{t}:16,*i64:16,*{acc}:16,*{t}:16,i32:16,i32,i32:16,i32,2048,128,32,64,False,True,False,True"
    for target in ("cuda:90", "cuda:80"):
        ib._embed_bwd_small.compile(sig, target=target, num_warps=4, **_common.DEVICE_ASSERT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("rows, n, d, padding_idx", [
    (50, 1, 16, -1),  # one token (decode)
    (50, 2, 33, -1),  # two tokens, the same index twice
    (7, 40, 300, 3),  # duplicates, padding_idx, three column blocks
    (7, 128, 100, -1),  # the most indices the few-indices kernel takes
    (7, 129, 20, -1),  # one past: the accumulator's kernels
])
def test_embedding_backward_few_indices(dtype, rows, n, d, padding_idx):
    """Up to FEW_INDICES indices the gradient is the zeroing and one launch in any dtype (four
    launches through an fp32 accumulator for a 16-bit table before): each index's program
    sums its duplicates' rows and the first writes, so a repeated index is counted once per
    occurrence, never twice and never lost; padding_idx's row stays zero. Against float64
    aten, to the dtype's rounding of the exact sum, with the host check's variant and the
    device assert's."""
    from tritonjit_ops import indexing_backward as ib
    from tritonjit_ops._plan import run

    g = torch.Generator().manual_seed(n)
    idx = torch.randint(0, rows, (n,), generator=g)
    idx[n // 2:] = idx[0]  # half the indices repeat the first
    if padding_idx >= 0:
        idx[1] = padding_idx
    grad = torch.randn(n, d, generator=g).to(dtype)
    exact = torch.ops.aten.embedding_dense_backward(grad.double(), idx, rows, padding_idx, False)
    tol = {torch.float32: 1e-6, torch.float64: 1e-12}.get(dtype, 8e-3) * max(float(exact.abs().max()), 1.0)
    few = n <= ib.FEW_INDICES
    for check in (False, True):
        p = ib._plan(grad, idx, rows, padding_idx, False, check)
        kernels = [launch.fn for launch in p.launches]
        assert (kernels == [ib._zero, ib._embed_bwd_few]) == few, kernels
        got = run(p, (grad, idx, rows, padding_idx, idx))
        assert got.dtype == dtype and got.shape == (rows, d)
        torch.testing.assert_close(got.double(), exact, rtol=0, atol=tol)
        if padding_idx >= 0:
            assert not got[padding_idx].any()
    torch.testing.assert_close(ib.embedding_dense_backward(grad, idx, rows, padding_idx).double(), exact, rtol=0,
                               atol=tol)


def test_embedding_backward_few_indices_kernel_cross_compiles_for_sm90():
    """The few-indices kernel's bf16 variant with the device assert builds for an H100/H200 here."""
    from tritonjit_ops import indexing_backward as ib

    grad, idx = torch.randn(2, 64).to(torch.bfloat16), torch.tensor([3, 3])
    p = ib._plan(grad, idx, 50, -1, False, True)
    launch = p.launches[-1]
    assert launch.fn is ib._embed_bwd_few
    sub, block, check = launch.args[-3:]
    sig = f"*bf16:16,*i64:16,*bf16:16,i32,i32,i32:16,i32,{sub},{block},{check}"
    ptx = ib._embed_bwd_few.compile(sig, target="cuda:90", **launch.options()).asm["ptx"]
    assert "atom" not in ptx  # no atomics: the sum is each program's own
