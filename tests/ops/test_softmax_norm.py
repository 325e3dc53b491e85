import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from _util import FLOATS, close, launch_arg


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dim, dtype, log):
    x = (torch.randn(4, 6, 33) * 3).to(dtype)
    fn, ref = (T.log_softmax, torch.log_softmax) if log else (T.softmax, torch.softmax)
    close(fn(x, dim), ref(x, dim))
    close(fn(x.transpose(0, 2), dim), ref(x.transpose(0, 2), dim))


def test_softmax_long_rows_and_dtype():
    x = torch.randn(3, 2500)  # online (multi-pass) path on the interpreter
    close(T.softmax(x, -1), torch.softmax(x, -1))
    close(T.log_softmax(x.t(), 0), torch.log_softmax(x.t(), 0), rtol=1e-5, atol=1e-5)
    h = x.half()
    close(T.softmax(h, 1, dtype=torch.float32), torch.softmax(h, 1, dtype=torch.float32), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_of_long_rows_masked_to_minus_inf(log):
    """Top-k sampling masks all but a few logits of a vocabulary to -inf: in the online pass
    of a long row (past one tile: 8000 elements) the blocks before the first finite value are
    all -inf, where subtracting the running max gave exp(-inf + inf) = NaN for the whole row.
    Rows of a few finite values, one early and late ones, and an all -inf row (NaN, as aten's)
    agree with torch, over the last dim and a middle one, directly and under enable()."""
    x = torch.full((4, 8000), float("-inf"))
    x[:3, 7000:7020] = torch.randn(3, 20, generator=torch.Generator().manual_seed(0))
    x[1, 5] = 2.0
    fn, ref = (T.log_softmax, torch.log_softmax) if log else (T.softmax, torch.softmax)
    for t, dim in ((x, -1), (x.t().contiguous(), 0), (x.reshape(4, 8000, 1).expand(4, 8000, 2).contiguous(), 1)):
        want = ref(t, dim)
        torch.testing.assert_close(fn(t, dim), want, equal_nan=True)
        with T.enable(include=["_softmax", "_log_softmax"], wait_native=True):
            torch.testing.assert_close(ref(t, dim), want, equal_nan=True)


@pytest.mark.gpu
def test_gpu_softmax_of_a_masked_vocabulary():
    """The same on the GPU at a vocabulary past its one-pass tile (50000 logits, 20 finite)."""
    x = torch.full((4, 50000), float("-inf"), device="cuda")
    x[:3, 40000:40020] = torch.randn(3, 20, device="cuda")
    for fn, ref in ((T.softmax, torch.softmax), (T.log_softmax, torch.log_softmax)):
        want = ref(x, -1)
        assert not want[:3].isnan().any()
        torch.testing.assert_close(fn(x, -1), want, equal_nan=True)
        with T.enable(include=["_softmax", "_log_softmax"], wait_native=True):
            torch.testing.assert_close(ref(x, -1), want, equal_nan=True)


def test_softmax_edge():
    x = torch.tensor([[float("-inf"), 0.0, 1.0], [5.0, 5.0, 5.0]])
    close(T.softmax(x, 1), torch.softmax(x, 1))
    close(T.softmax(torch.randn(0, 4), 1), torch.softmax(torch.randn(0, 4), 1))
    close(T.softmax(torch.tensor(2.0), 0), torch.softmax(torch.tensor(2.0), 0))
    with pytest.raises(IndexError):
        T.softmax(torch.randn(2, 3), 2)
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.softmax(torch.ones(3, dtype=torch.int64), 0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, affine):
    x = torch.randn(3, 5, 24).to(dtype)
    w = torch.randn(24).to(dtype) if affine else None
    b = torch.randn(24).to(dtype) if affine else None
    close(T.layer_norm(x, [24], w, b, 1e-5), F.layer_norm(x, [24], w, b, 1e-5))
    close(T.layer_norm(x, [5, 24]), F.layer_norm(x, [5, 24]))


def test_layer_norm_long_rows():
    x = torch.randn(2, 3000) * 2 + 3
    w, b = torch.randn(3000), torch.randn(3000)
    close(T.layer_norm(x, [3000], w, b), F.layer_norm(x, [3000], w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm(dtype):
    x = torch.randn(4, 7, 40).to(dtype)
    w = torch.randn(40).to(dtype)
    close(T.rms_norm(x, [40], w, 1e-6), F.rms_norm(x, [40], w, 1e-6))
    close(T.rms_norm(x, (40,), w), F.rms_norm(x, (40,), w))
    close(T.rms_norm(x.transpose(0, 1), [40], None), F.rms_norm(x.transpose(0, 1), [40], None))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_default_eps_is_the_math_types(dtype):
    """Without eps, rms_norm adds the epsilon of its math type (fp32's for half inputs), as
    aten's kernels do; the input dtype's (9.8e-4 for fp16) would shrink these small rows by
    a third. The direct entry, torch.ops.tritonjit, enable() and the backward agree with aten."""
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(6, 64, generator=g) * 0.01).to(dtype)
    w = torch.randn(64, generator=g).to(dtype)
    want = F.rms_norm(x, [64], w)
    close(T.rms_norm(x, [64], w), want)
    close(torch.ops.tritonjit.rms_norm(x, [64], w), want)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    F.rms_norm(xs, [64], ws).sum().backward()
    with T.enable():
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        out = F.rms_norm(xe, [64], we)
        out.sum().backward()
    close(out.detach(), want)
    close(xe.grad, xs.grad, rtol=2e-2, atol=2e-2)
    close(we.grad, ws.grad, rtol=2e-2, atol=2e-2)


def test_rms_norm_long_rows():
    x = torch.randn(2, 3000)
    close(T.rms_norm(x, [3000], None, 1e-5), F.rms_norm(x, [3000], None, 1e-5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm(dtype):
    x = torch.randn(2, 6, 4, 5).to(dtype)
    w, b = torch.randn(6).to(dtype), torch.randn(6).to(dtype)
    close(T.group_norm(x, 3, w, b), F.group_norm(x, 3, w, b))
    close(T.group_norm(x, 6), F.group_norm(x, 6))
    x2 = torch.randn(2, 4, 40, 40)
    close(T.group_norm(x2, 2), F.group_norm(x2, 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_add_rms_norm(dtype):
    x, r = torch.randn(5, 32).to(dtype), torch.randn(5, 32).to(dtype)
    w = torch.randn(32).to(dtype)
    out, h = T.fused_add_rms_norm(x, r, w, 1e-6)
    close(h, x + r)
    close(out, F.rms_norm(x + r, [32], w, 1e-6))


def test_norm_bad_input():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        T.layer_norm(torch.randn(3, 4), [5])
    with pytest.raises(RuntimeError, match="weight"):
        T.rms_norm(torch.randn(3, 4), [4], torch.randn(5))
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        T.group_norm(torch.randn(2, 6, 3), 4)
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.layer_norm(torch.ones(3, 4, dtype=torch.int32), [4])
    with pytest.raises(RuntimeError, match="residual"):
        T.fused_add_rms_norm(torch.randn(3, 4), torch.randn(3, 5), None)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_gpu_softmax_norm(dtype):
    x = torch.randn(1024, 4096, device="cuda", dtype=dtype)
    w = torch.randn(4096, device="cuda", dtype=dtype)
    close(T.softmax(x, -1), torch.softmax(x, -1))
    close(T.softmax(x, 0), torch.softmax(x, 0))
    close(T.rms_norm(x, [4096], w, 1e-6), F.rms_norm(x, [4096], w, 1e-6))
    close(T.layer_norm(x, [4096], w, w), F.layer_norm(x, [4096], w, w))
    big = torch.randn(64, 40000, device="cuda", dtype=dtype)
    close(T.softmax(big, -1), torch.softmax(big, -1))


def test_softmax_and_norm_plans_are_bounded():
    """One plan per reduced size: a sweep over sizes must not grow the plan caches
    forever (bounded like fused._silu_plans: cleared when full)."""
    import importlib

    softmax, norm = (importlib.import_module(f"tritonjit_ops.{m}") for m in ("softmax", "norm"))
    for mod, plan in ((softmax, lambda n: softmax._plan(False, n, False)), (norm, lambda n: norm._plan(False, n))):
        mod._plans.clear()
        for n in range(1, 3 * mod._PLANS_MAX):
            plan(n)
        assert 0 < len(mod._plans) <= mod._PLANS_MAX
        assert plan(7) == plan(7)  # still answers (recomputed after a clear)
    x = torch.randn(3, 40)
    close(T.softmax(x, -1), torch.softmax(x, -1))  # and the operators still run
    close(T.rms_norm(x, (40,)), F.rms_norm(x, (40,)))


@pytest.mark.parametrize("m,n,programs,rows_a_step", [
    (1536, 1024, 132, 4), (4096, 1024, 132, 4), (16384, 256, 132, 16), (4096, 2048, 264, 2),
    (2048, 4096, 264, 1), (8192, 1024, 264, 4)])
def test_norm_backward_programs_and_rows_a_step(m, n, programs, rows_a_step):
    """On a device (here the meta device: 132 SMs), the row kernel of the norm backward runs
    one program per SM up to 4M elements and two above (fewer partial rows to add where the
    call is small), never more programs than row blocks. Each takes a tile's worth of rows a
    step (4096 elements). Its weight and bias sums: one partial row per program, added by the
    second launch."""
    from tritonjit_ops import norm_backward as NB

    x = torch.empty(m, n, device="meta", dtype=torch.bfloat16)
    w = torch.empty(n, device="meta", dtype=torch.bfloat16)
    stats = torch.empty(m, 1, device="meta")
    p = NB.plan_native_layer_norm_backward(x, x, [n], stats, stats, w, w, [True, True, True])
    rows, cols = p.launches
    assert rows.fn is NB._norm_bwd_rows and launch_arg(rows, "BLOCK_M") == rows_a_step
    assert rows.grid == (programs, 1, 1) and p.temps[0].shape == (2, programs, n)
    assert cols.fn is NB._col_sum


@pytest.mark.parametrize("m,n,programs,rows_a_step,columns", [
    (512, 1024, 132, 1, 32), (100, 1024, 100, 1, 32), (768, 4096, 132, 1, 64), (300, 256, 132, 1, 8),
    (1024, 1024, 132, 4, 32)])
def test_norm_backward_of_few_rows_is_one_launch(m, n, programs, rows_a_step, columns):
    """A few hundred rows with the forward's statistics (aten's backward ops): one launch, in
    which one program per SM (at most one per row) gives dx, one row a step where a tile's
    worth would leave programs without rows, and the programs after them sum the weight and
    bias gradients of 32 or 64 columns each over every row: no partial rows, no second launch.
    Without the statistics (tritonjit's own backward recomputes them) or above SMALL_ROWS
    rows, the two launches."""
    from tritonjit_ops import norm_backward as NB

    x = torch.empty(m, n, device="meta", dtype=torch.bfloat16)
    w = torch.empty(n, device="meta", dtype=torch.bfloat16)
    stats = torch.empty(m, 1, device="meta")
    p = NB.plan_native_layer_norm_backward(x, x, [n], stats, stats, w, w, [True, True, True])
    (one,) = p.launches
    assert one.fn is NB._norm_bwd_small and not p.temps
    assert launch_arg(one, "BLOCK_M") == rows_a_step and launch_arg(one, "BLOCK_C") * columns >= n
    assert one.grid == (programs + columns, 1, 1)
    p = NB.plan_fused_rms_norm_backward(x, x, [n], stats, w, [True, True])
    assert [L.fn for L in p.launches] == [NB._norm_bwd_small]
    p = NB.plan_norm_backward(x, x, w, None, n, 1e-5, False, True)
    assert [L.fn for L in p.launches] == [NB._norm_bwd_rows, NB._col_sum]
    big = torch.empty(NB.SMALL_ROWS + 1, n, device="meta", dtype=torch.bfloat16)
    stats = torch.empty(NB.SMALL_ROWS + 1, 1, device="meta")
    p = NB.plan_native_layer_norm_backward(big, big, [n], stats, stats, w, w, [True, True, True])
    assert [L.fn for L in p.launches] == [NB._norm_bwd_rows, NB._col_sum]
    wide = torch.empty(m, NB.SMALL_ELEMS // m + 1, device="meta", dtype=torch.bfloat16)  # past the elements measured
    ww, stats = torch.empty(wide.shape[1], device="meta", dtype=torch.bfloat16), torch.empty(m, 1, device="meta")
    p = NB.plan_native_layer_norm_backward(wide, wide, [wide.shape[1]], stats, stats, ww, ww, [True, True, True])
    assert NB._norm_bwd_small not in [L.fn for L in p.launches]


@pytest.mark.parametrize("m,n,kernel,rows_a_step", [
    (1536, 64, "_norm_bwd_rows", 16), (512, 64, "_norm_bwd_small", 16), (40, 64, "_norm_bwd_small", 1),
    (37, 200, "_norm_bwd_small", 1)])
def test_norm_backward_values_with_many_and_one_row_a_step(m, n, kernel, rows_a_step):
    """The row kernel (16 rows a step on the interpreter at 1536x64) and the one-launch kernel
    of few rows (16 rows a step at 512x64, one at 40x64 and at 37x200, whose columns and rows
    do not fill their blocks) give aten's dx, dw and db, also where the call asks for some of
    them only; RMS norm's backward shares the kernels."""
    from tritonjit_ops import norm_backward as NB

    g = torch.Generator().manual_seed(5)
    x, dy = torch.randn(m, n, generator=g), torch.randn(m, n, generator=g)
    w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
    for mask in ([False, True, False], [True, False, True]):
        part = (dy, x, [n], mean, rstd, w, b, mask)
        for got, want in zip(NB.native_layer_norm_backward(*part), torch.ops.aten.native_layer_norm_backward(*part)):
            assert (got is None) == (want is None)
            if want is not None:
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    args = (dy, x, [n], mean, rstd, w, b, [True, True, True])
    p = NB.plan_native_layer_norm_backward(*args)
    assert p.launches[0].fn is getattr(NB, kernel)
    assert launch_arg(p.launches[0], "BLOCK_M") == rows_a_step
    for got, want in zip(NB.native_layer_norm_backward(*args), torch.ops.aten.native_layer_norm_backward(*args)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = torch.autograd.grad(torch.nn.functional.rms_norm(xs, [n], ws, 1e-6), (xs, ws), dy)
    rrstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    got = NB.fused_rms_norm_backward(dy, x, [n], rrstd, w, [True, True])
    for a, b_ in zip(got, want):
        torch.testing.assert_close(a, b_, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rms, need_w, need_b, rows_a_step, n, block_c", [
    (False, True, True, 1, 1024, 32), (True, True, False, 1, 4096, 64), (False, False, True, 4, 1024, 32)])
def test_norm_backward_of_few_rows_cross_compiles_for_sm90(rms, need_w, need_b, rows_a_step, n, block_c):
    """The one-launch kernel's two kinds of program share nothing but the launch: Triton's
    compiler (not the interpreter) checks that the branches' values agree in type. With
    contiguous rows' layout arguments (1, 1, N, 0, 0, 1) its code has no 64-bit division
    (the layout folds to ``row * N + col``); a strided x's and dy's layouts compile too."""
    from tritonjit_ops import norm_backward as NB

    rows_c = NB.TILE_ELEMS // block_c
    head = "*bf16:16,*bf16:16,*bf16:16,*fp32:16,*fp32:16,*bf16:16,*bf16:16,*bf16:16,i32:16,i32:16,i32:16,"
    tail = f"{rms},True,{need_w},{need_b},{rows_a_step},{n},{rows_c},{block_c}"
    contiguous = "i32:1,i32:1,i32:16,i32:16,i32:16,i32:1,"
    strided = "i32,i32,i32:16,i32,i32:16,i32,"  # a head's view: rows of three dims, elements apart
    ptx = NB._norm_bwd_small.compile(head + contiguous * 2 + tail, target="cuda:90", num_warps=8).asm["ptx"]
    assert "div.s64" not in ptx and "rem.s64" not in ptx
    sig = head + strided + contiguous + tail
    assert NB._norm_bwd_small.compile(sig, target="cuda:90", num_warps=8).binary, sig


#: strided inputs the norm kernel reads in place: (base shape, view, normalized dims)
NORM_VIEWS = {
    "q/k layer norm of attention heads": ((2, 5, 3, 16), lambda t: t.transpose(1, 2), 1),
    "a slice of longer rows": ((4, 6, 48), lambda t: t[..., :32], 1),
    "channels last, small (elements 64 apart)": ((2, 16, 4, 4), lambda t: t.permute(0, 2, 3, 1), 1),
    "two normalized dims, sliced rows": ((3, 6, 4, 8), lambda t: t[:, :4], 2),
}


@pytest.mark.parametrize("case", list(NORM_VIEWS))
@pytest.mark.parametrize("long_rows", [False, True], ids=["one pass", "looped"])
def test_layer_and_rms_norm_read_strided_views_in_place(case, long_rows, monkeypatch):
    """native_layer_norm's and _fused_rms_norm's plans read a strided x in place (no contiguous
    copy: the plan asks for none), in the one-pass kernel and the looped one for long rows;
    outputs, means and rstds equal aten's, and the output is contiguous, as aten's is."""
    from tritonjit_ops import _plan, norm

    if long_rows:  # every row longer than the one-pass bound: the looped kernel
        monkeypatch.setattr(norm, "_plans", {})
        real = norm._plan
        monkeypatch.setattr(norm, "_plan", lambda on_gpu, n: (False, 8, *real(on_gpu, n)[2:]))
    shape, view, nd = NORM_VIEWS[case]
    x = view(torch.randn(*shape, generator=torch.Generator().manual_seed(0)))
    assert not x.is_contiguous()
    ns = list(x.shape[x.dim() - nd:])
    w, b = torch.randn(ns), torch.randn(ns)
    p = norm.plan_native_layer_norm(x, ns, w, b, 1e-5)
    assert p.contiguous == (), p.contiguous
    got = _plan.run(p, (x, ns, w, b, 1e-5))
    for g, want in zip(got, torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)
        assert g.is_contiguous()
    p = norm.plan_fused_rms_norm(x, ns, w, 1e-6)
    assert p.contiguous == ()
    out, rstd = _plan.run(p, (x, ns, w, 1e-6))
    torch.testing.assert_close(out, F.rms_norm(x, ns, w, 1e-6), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(list(range(-nd, 0)), keepdim=True) + 1e-6),
                               rtol=1e-5, atol=1e-5)
    if not long_rows:  # and from C++ (the key holds the strides)
        from _util import native_ops_or_skip, routed

        native_ops_or_skip()
        got, d = routed(lambda: F.layer_norm(x, ns, w, b), ["native_layer_norm"])
        torch.testing.assert_close(got, F.layer_norm(x, ns, w, b), rtol=1e-5, atol=1e-5)
        assert d["python_calls"] == 0 and d["plan_hits"] == 1, d


def test_layer_norm_of_a_layout_without_rows_is_copied_first():
    """Four kept dims that do not merge: the plan copies x first, and still agrees."""
    from tritonjit_ops import _plan, norm

    x = torch.randn(2, 3, 2, 3, 8).permute(0, 2, 1, 3, 4)[:, :, :, :2]
    p = norm.plan_native_layer_norm(x, [8], None, None, 1e-5)
    assert p.contiguous == (0,)
    for g, want in zip(_plan.run(p, (x, [8], None, None, 1e-5)), torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5)):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", list(NORM_VIEWS))
@pytest.mark.parametrize("strided", ["x", "dy", "both"])
@pytest.mark.parametrize("kernel", ["small", "rows", "wide"])
def test_norm_backward_reads_strided_views_in_place(case, strided, kernel, monkeypatch):
    """native_layer_norm_backward's and _fused_rms_norm_backward's plans read a strided x or
    gradient in place in the row kernels (the one-launch small kernel and the rows kernel
    with its column sums: no contiguous copy asked for), as the forward reads x; rows past
    the row kernels (the wide kernel) are copied first. dx, dweight and dbias equal aten's;
    dx is contiguous, as aten's is."""
    from tritonjit_ops import _plan
    from tritonjit_ops import norm_backward as nb

    if kernel == "rows":
        monkeypatch.setattr(nb, "SMALL_ROWS", 0)
    if kernel == "wide":
        monkeypatch.setattr(nb, "_one_pass", lambda on_gpu, n: False)
    shape, view, nd = NORM_VIEWS[case]
    g = torch.Generator().manual_seed(1)
    base = torch.randn(*shape, generator=g)
    x = view(base) if strided != "dy" else view(base).contiguous()
    dy = view(torch.randn(*shape, generator=g))
    if strided == "x":
        dy = dy.contiguous()
    ns = list(x.shape[x.dim() - nd:])
    w, b = torch.randn(ns, generator=g), torch.randn(ns, generator=g)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    args = (dy, x, ns, mean, rstd, w, b, [True, True, True])
    p = nb.plan_native_layer_norm_backward(*args)
    copied = {0, 1} & set(p.contiguous)
    assert copied == ({i for i, t in ((0, dy), (1, x)) if not t.is_contiguous()} if kernel == "wide" else set()), p
    for got, want in zip(_plan.run(p, args), torch.ops.aten.native_layer_norm_backward(*args)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert _plan.run(p, args)[0].is_contiguous()
    _, rstd = torch.ops.aten._fused_rms_norm(x, ns, w, 1e-6)
    args = (dy, x, ns, rstd, w, [True, True])
    p = nb.plan_fused_rms_norm_backward(*args)
    assert ({0, 1} & set(p.contiguous)) == copied
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    want = torch.autograd.grad(F.rms_norm(xr, ns, wr, 1e-6), (xr, wr), dy)  # aten has no CPU rms backward op
    for got, e in zip(_plan.run(p, args), want):
        torch.testing.assert_close(got, e, rtol=1e-4, atol=1e-5)


def test_norm_backward_of_strided_views_from_cxx():
    """A layer norm's training step over a transposed conv output ([B, C, HW] -> [B, HW, C], as
    PVT, CvT, FocalNet and Swin norm their patches) on the C++ path: the backward is one plan
    of the row kernels with no copy, and the gradients equal eager's."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    g = torch.Generator().manual_seed(2)
    conv = torch.randn(2, 32, 16, generator=g)
    w, b = torch.randn(32, generator=g).requires_grad_(), torch.randn(32, generator=g).requires_grad_()
    up = torch.randn(2, 32, 16, generator=g)

    def step():
        x = conv.clone().requires_grad_()
        y = F.layer_norm(x.transpose(1, 2), [32], w, b)
        return torch.autograd.grad(y.transpose(1, 2), (x, w, b), up)  # dy: a transposed view as well

    want = step()
    got, d = routed(step, ["native_layer_norm", "native_layer_norm_backward"])
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    assert d["python_calls"] == 0 and d["plan_hits"] >= 2, d


def test_strided_norm_variants_cross_compile_for_sm90():
    """The one-pass and looped variants with a strided x's layout arguments compile for the
    H200 (no GPU needed)."""
    from tritonjit_ops import norm

    ints = "i32,i32,i32,i32,i32,i32:16,i32,i32:16,i32:1"  # CPG, HW, G, S1, S2, T0, T1, T2, TC
    for one_pass, block_m, block_n in ((True, 16, 64), (False, 1, 4096)):
        sig = (f"*bf16:16,*bf16:16,*bf16:16,*bf16:16,*bf16:16,*bf16:16,*fp32:16,*fp32:16,i32,i32:16,fp64,{ints},"
               f"False,True,True,False,False,True,{one_pass},{block_m},{block_n}")
        assert norm._norm.compile(sig, target="cuda:90", num_warps=4).binary


@pytest.mark.gpu
def test_gpu_norms_of_strided_views_are_read_in_place():
    """On the GPU, from C++: layer and RMS norms of the strided views above, and the layer
    norm's backward, agree with eager (fp32 and bf16), one plan hit a call, no Python."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    for case, (shape, view, nd) in NORM_VIEWS.items():
        for dtype in (torch.float32, torch.bfloat16):
            x = view(torch.randn(*shape, device="cuda", dtype=dtype))
            ns = list(x.shape[x.dim() - nd:])
            w = torch.randn(ns, device="cuda", dtype=dtype)
            for fn in (lambda: F.layer_norm(x, ns, w, w),  # noqa: B023
                       lambda: torch.ops.aten._fused_rms_norm(x, ns, w, 1e-6)[0]):  # noqa: B023
                want = fn()
                got, d = routed(fn, ["native_layer_norm", "_fused_rms_norm"])
                close(got, want)
                assert d["python_calls"] == 0 and d["plan_hits"] == 1, (case, d)
            # and the backward, x and its gradient both strided: read in place, one plan a call
            _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, w, 1e-5)
            dy = view(torch.randn(*shape, device="cuda", dtype=dtype))
            args = (dy, x, ns, mean, rstd, w, w, [True, True, True])
            want = torch.ops.aten.native_layer_norm_backward(*args)
            got, d = routed(lambda: torch.ops.aten.native_layer_norm_backward(*args),  # noqa: B023
                            ["native_layer_norm_backward"])
            for a, e in zip(got, want):
                close(a, e)
            assert d["python_calls"] == 0 and d["plan_hits"] == 1, (case, d)
