"""Pointwise results keep aten's layout: TensorIterator allocates a new output in the memory
order of the operands (``x.t().exp()`` is stored as ``x``; attention's (B, H, S, D) views of
(B, S, H, D) storage stay so), and so must tritonjit's planned and direct paths. Before,
they returned contiguous results: right values, other strides, and a transposed input read
against the grain."""
import random

import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import _layout


def _view(shape, rng):
    """A random layout of ``shape``: permuted storage, maybe sliced (not dense), maybe one
    broadcast dimension, maybe channels-last."""
    n = len(shape)
    perm = list(range(n))
    rng.shuffle(perm)
    base_shape = [shape[p] for p in perm]
    if rng.random() < 0.3:
        base = torch.randn([s * 2 if s > 1 else s for s in base_shape])[tuple(slice(0, s) for s in base_shape)]
    else:
        base = torch.randn(base_shape)
    t = base.permute([perm.index(i) for i in range(n)])
    if n and rng.random() < 0.3:
        d = rng.randrange(n)
        if shape[d] > 1:
            idx = [slice(None)] * n
            idx[d] = slice(0, 1)
            t = t[tuple(idx)].expand(shape)
    if n == 4 and rng.random() < 0.2:
        t = torch.randn(shape).to(memory_format=torch.channels_last)
    return t


@pytest.mark.parametrize("seed", [0, 1])
def test_iter_strides_is_atens_rule(seed):
    """_layout.iter_strides against aten's own CPU results (neg, add, where: one, two and
    three operands), over random layouts, broadcasts, scalars and size-1 dimensions."""
    rng = random.Random(seed)
    checked = 0
    for _ in range(1500):
        n = rng.randint(1, 5)
        shape = [rng.choice([1, 1, 2, 3, 4, 5]) for _ in range(n)]
        nops = rng.randint(1, 3)
        ops = [_view(shape, rng)]
        for _ in range(nops - 1):
            r = rng.random()
            if r < 0.15:
                ops.append(2.0)
            elif r < 0.35:
                m = rng.randint(0, n)
                sub = [1 if rng.random() < 0.3 else s for s in shape[n - m:]]
                ops.append(_view(sub, rng) if sub else torch.randn(()))
            else:
                ops.append(_view(shape, rng))
        if nops == 1:
            ref = torch.neg(ops[0])
        elif nops == 2:
            ref = torch.add(ops[0], ops[1])
        else:
            ops[0] = ops[0] > 0
            ref = torch.where(*ops)
        got = _layout.iter_strides(list(ref.shape), ops)
        want = ref.stride()
        assert (torch.empty(ref.shape).stride() if got is None else got) == want, (
            [(tuple(o.shape), o.stride()) if isinstance(o, torch.Tensor) else o for o in ops], want, got)
        checked += got is not None
    assert checked > 200  # the non-contiguous answers were exercised, not only the fast set-up


_LAYOUTS = {
    "transposed": lambda: torch.randn(6, 4).t(),
    "permuted and sliced": lambda: torch.randn(3, 8, 5).permute(2, 0, 1)[:, :, :6],
    "heads of (B, S, H, D)": lambda: torch.randn(2, 16, 8, 4).transpose(1, 2),
    "expanded transposed": lambda: torch.randn(2, 16, 8, 4).transpose(1, 2)[:, :, None].expand(2, 8, 3, 16, 4),
    "channels-last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "sliced rows": lambda: torch.randn(4, 9)[:, :7],
    # dense, with size-1 dims of strides other than torch.empty's: aten's fast set-up keeps them
    # (a unary op's, two operands of one layout), a contiguous input's get the usual ones
    "size-1 dims of odd strides": lambda: torch.as_strided(torch.randn(24), (2, 1, 3, 4), (12, 99, 4, 1)),
    "a row of odd stride": lambda: torch.as_strided(torch.randn(8), (1, 8), (99, 1)),
    "permuted, a size-1 dim between": lambda: torch.as_strided(torch.randn(12), (3, 1, 4), (1, 7, 3)),
}
_OPS = {
    "exp": lambda x, c, row: x.exp(),
    "neg": lambda x, c, row: -x,
    "sin": lambda x, c, row: x.sin(),
    "silu": lambda x, c, row: torch.nn.functional.silu(x),
    "gelu tanh": lambda x, c, row: torch.nn.functional.gelu(x, approximate="tanh"),
    "mul scalar": lambda x, c, row: x * 0.5,
    "rsub": lambda x, c, row: 1 - x,
    "add itself": lambda x, c, row: x + x,
    "add contiguous": lambda x, c, row: x + c,
    "contiguous plus it": lambda x, c, row: c + x,
    "add broadcast row": lambda x, c, row: x + row,
    "lt": lambda x, c, row: x < 0,
    "where": lambda x, c, row: torch.where(x > 0, x, 0.0),
    "clamp": lambda x, c, row: x.clamp(-0.5, 0.5),
    "pow": lambda x, c, row: x ** 2,
    "hardtanh": lambda x, c, row: torch.nn.functional.hardtanh(x),
    "masked_fill (contiguous in aten)": lambda x, c, row: x.masked_fill(x > 0, 0.0),
    "pow of a Python base (contiguous in aten)": lambda x, c, row: 2 ** x,
    "clone": lambda x, c, row: x.clone(),
    "isinf (aten's x.abs() == inf)": lambda x, c, row: torch.isinf(x),
    "cast": lambda x, c, row: x.to(torch.float16) if x.device.type == "cpu" else x.float(),
}


@pytest.mark.parametrize("op", list(_OPS))
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_pointwise_results_have_atens_strides_under_enable(layout, op):
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    x, fn = _LAYOUTS[layout](), _OPS[op]
    c, row = torch.ones(x.shape), torch.arange(x.shape[-1], dtype=x.dtype)  # a contiguous and a broadcast operand
    want = fn(x, c, row)
    with T.enable(wait_native=True):
        fn(x, c, row)  # the plan
        before = native.stats()
        got = fn(x, c, row)
        delta = stats_delta(before, native.stats())
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got, want)
    assert delta["python_calls"] == 0, delta


@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_direct_entries_have_atens_strides(layout):
    x = _LAYOUTS[layout]()
    y = torch.randn(x.shape)
    for got, want in ((T.exp(x), torch.exp(x)), (T.add(x, y), torch.add(x, y)), (T.mul(y, x), torch.mul(y, x)),
                      (T.add(x, x), torch.add(x, x)), (T.where(x > 0, x, y), torch.where(x > 0, x, y)),
                      (T.sigmoid(x), torch.sigmoid(x)), (T.pow(x, 2), torch.pow(x, 2)), (T.pow(2, x), torch.pow(2, x))):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_python_implementations_have_atens_strides(layout, monkeypatch):
    """The Python implementations (the C++ path's fallback, and the path where it is not
    built) lay out as aten does: Scalar arguments are no iterator operands (clamp, lerp's
    weight, pow's exponent), hardtanh and nan_to_num allocate torch.empty_like(x), the
    contiguous fast paths give torch.empty's strides (the C++ prologues' Python stand-ins)."""
    from tritonjit_ops import _prologue, _registry

    monkeypatch.setattr(_prologue, "binary", _prologue.binary_py)
    monkeypatch.setattr(_prologue, "like", _prologue.like_py)
    x = _LAYOUTS[layout]()
    impl = _registry._ATEN
    F = torch.nn.functional
    for name, got, want in (
            ("clamp", impl["clamp"](x, -0.5, 0.5), x.clamp(-0.5, 0.5)),
            ("clamp_min", impl["clamp_min"](x, 0.0), x.clamp_min(0.0)),
            ("lerp.Scalar", impl["lerp.Scalar"](x, x * 2, 0.25), torch.lerp(x, x * 2, 0.25)),
            ("pow.Tensor_Scalar", impl["pow.Tensor_Scalar"](x, 2), x.pow(2)),
            ("pow.Scalar", impl["pow.Scalar"](2, x), torch.pow(2, x)),
            ("hardtanh", impl["hardtanh"](x), F.hardtanh(x)),
            ("nan_to_num", impl["nan_to_num"](x), torch.nan_to_num(x)),
            ("isinf", impl["isinf"](x), torch.isinf(x)),
            ("exp", impl["exp"](x), x.exp()),
            ("add", impl["add.Tensor"](x, x), x + x),
            ("mul by a Python float", impl["mul.Tensor"](x, 1.5), x * 1.5)):
        assert got.stride() == want.stride(), (name, got.stride(), want.stride())
        torch.testing.assert_close(got, want, msg=name)


def test_out_of_a_dense_permuted_layout_is_written_in_place():
    """out= a dense transposed tensor: written in its own memory order (no temporary)."""
    x = torch.randn(5, 7)
    out = torch.empty(7, 5).t()
    r = T.add(x, 1.0, out=out)
    assert r is out and out.stride() == (1, 5)
    torch.testing.assert_close(out, x + 1)


_BACKWARD_LAYOUTS = {
    "both transposed": lambda: (torch.randn(6, 4).t(), torch.randn(6, 4).t()),
    "both head views": lambda: (torch.randn(2, 16, 8, 4).transpose(1, 2), torch.randn(2, 16, 8, 4).transpose(1, 2)),
    "contiguous gradient, transposed input": lambda: (torch.randn(4, 6), torch.randn(6, 4).t()),
    "transposed gradient, contiguous input": lambda: (torch.randn(6, 4).t(), torch.randn(4, 6)),
    "sliced input": lambda: (torch.randn(4, 7), torch.randn(4, 9)[:, :7]),
}


@pytest.mark.parametrize("layouts", list(_BACKWARD_LAYOUTS))
@pytest.mark.parametrize("op", ["silu_backward", "gelu_backward", "sigmoid_backward", "tanh_backward",
                                "threshold_backward", "hardtanh_backward", "softplus_backward"])
def test_activation_backward_results_have_atens_strides(op, layouts):
    """A gradient and an input in one dense layout (attention's head views, a transposed
    activation) are read as they lie by the flat kernel; in two layouts, or not dense, by
    the strided kernel; either way in one launch (no contiguous copies first) and into
    aten's layout (threshold_backward's follows its input, the others' their gradient)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    f = getattr(torch.ops.aten, op)
    args = {"threshold_backward": (0.0,), "hardtanh_backward": (-0.5, 0.5), "softplus_backward": (2.0, 1.0)}.get(op, ())
    g, x = _BACKWARD_LAYOUTS[layouts]()
    for kw in ({}, {"approximate": "tanh"}) if op == "gelu_backward" else ({},):
        want = f(g, x, *args, **kw)
        with T.enable(include=[op], wait_native=True):
            f(g, x, *args, **kw)
            before = native.stats()
            got = f(g, x, *args, **kw)
            delta = stats_delta(before, native.stats())
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        torch.testing.assert_close(got, want)
        assert delta["python_calls"] == 0 and delta["launches"] == 1, delta


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_pointwise_results_have_atens_strides_on_gpu(layout):
    """The same on the device, in bf16 (planned calls write the permuted layout there)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    x = _LAYOUTS[layout]().to("cuda", torch.bfloat16)
    c, row = torch.ones(x.shape, device="cuda", dtype=x.dtype), torch.arange(x.shape[-1], device="cuda", dtype=x.dtype)
    for op, fn in _OPS.items():
        want = fn(x, c, row)
        with T.enable(wait_native=True):
            fn(x, c, row)
            before = native.stats()
            got = fn(x, c, row)
            delta = stats_delta(before, native.stats())
        assert got.stride() == want.stride(), (op, got.stride(), want.stride())
        torch.testing.assert_close(got, want, msg=op)
        assert delta["python_calls"] == 0, (op, delta)


@pytest.mark.gpu
@pytest.mark.parametrize("layouts", list(_BACKWARD_LAYOUTS))
def test_activation_backward_results_have_atens_strides_on_gpu(layouts):
    """The same on the device, in bf16, for every activation backward. sigmoid's and tanh's
    take their forward's output (1 - y * y cancels near |y| = 1, where aten's bf16 kernel
    and tritonjit's fp32 one round apart: a bf16 ulp of 1, hence the tolerance)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    g, x = (t.to("cuda", torch.bfloat16) for t in _BACKWARD_LAYOUTS[layouts]())
    ys, yt = torch.sigmoid(x), torch.tanh(x)  # same layouts as x (TensorIterator keeps them)
    calls = {"silu": lambda: torch.ops.aten.silu_backward(g, x), "gelu": lambda: torch.ops.aten.gelu_backward(g, x),
             "gelu tanh": lambda: torch.ops.aten.gelu_backward(g, x, approximate="tanh"),
             "sigmoid": lambda: torch.ops.aten.sigmoid_backward(g, ys), "tanh": lambda: torch.ops.aten.tanh_backward(g, yt),
             "threshold": lambda: torch.ops.aten.threshold_backward(g, x, 0.0),
             "hardtanh": lambda: torch.ops.aten.hardtanh_backward(g, x, -0.5, 0.5),
             "softplus": lambda: torch.ops.aten.softplus_backward(g, x, 2.0, 1.0)}
    for name, fn in calls.items():
        want = fn()
        with T.enable(include=["silu_backward", "gelu_backward", "sigmoid_backward", "tanh_backward",
                               "threshold_backward", "hardtanh_backward", "softplus_backward"], wait_native=True):
            fn()
            before = native.stats()
            got = fn()
            delta = stats_delta(before, native.stats())
        assert got.stride() == want.stride(), (name, got.stride(), want.stride())
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2, msg=lambda m, name=name: f"{name}: {m}")
        assert delta["python_calls"] == 0 and delta["launches"] == 1, (name, delta)


def test_flat_stride_is_what_view_minus_one_gives():
    """``flat_stride`` (the index, topk and gather plans' test of whether a view reads as one flat
    dim) answers as torch's own view(-1) does, over random layouts."""
    rng = random.Random(7)
    for _ in range(2000):
        shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(rng.randrange(0, 5))]
        t = _view(shape, rng)
        got = _layout.flat_stride(t.shape, t.stride())
        try:
            flat = t.view(-1)
        except RuntimeError:
            assert got is None, (t.shape, t.stride())
            continue
        if t.numel() >= 2:
            assert got == flat.stride(0), (t.shape, t.stride())
        else:
            assert got is not None


def test_large_calls_reading_across_rows_go_to_aten_on_a_device():
    """On a device, a pointwise call of at least 4M elements where an operand steps through
    memory along the output's innermost dim (T5's position bias laid out heads-innermost, a
    transposed operand) plans aten's kernel (it tiles such reads); smaller calls, operands
    read along the rows or broadcast, and the interpreter (CPU) keep tritonjit's kernel.
    (meta stands in for a device here.)"""
    from tritonjit_ops import pointwise as P

    x = torch.empty(8, 16, 1024, 1024, device="meta")
    bias = torch.empty(1, 1024, 1024, 16, device="meta", dtype=torch.bfloat16).permute(0, 3, 1, 2)
    assert P.plan_binary("add", x, bias).aten
    assert P.plan_binary("mul", x, x.transpose(2, 3)).aten
    assert P.plan_where(torch.empty(8, 16, 1024, 1024, device="meta", dtype=torch.bool), x, x.transpose(2, 3)).aten
    assert not P.plan_binary("add", x, bias.contiguous()).aten
    assert not P.plan_binary("add", x, torch.empty(1, 16, 1, 1024, device="meta")).aten
    assert not P.plan_binary("add", x[:1, :1], x[:1, :1].transpose(2, 3)).aten
    assert not P.plan_unary("exp", x.transpose(2, 3)).aten  # a unary output takes its input's layout
    cpu = torch.empty(4, 1024, 1024)
    assert not P.plan_binary("add", cpu, cpu.transpose(1, 2)).aten


@pytest.mark.parametrize("seed", [0, 1])
def test_elementwise_kernel_in_the_outputs_memory_order_over_random_layouts(seed):
    """The elementwise kernel walks the output's memory order (TensorIterator's reorder): over
    random layouts (permuted, sliced, broadcast, channels-last) a new result of aten's layout
    (clamp of one operand, a three-operand clamp) and an in-place write into a permuted self
    give aten's values and strides."""
    from tritonjit_ops import elementwise as E

    def layout(t):  # the strides that place elements (a size-1 dim's stride places none)
        return [st for sz, st in zip(t.shape, t.stride()) if sz > 1]

    rng = random.Random(seed)
    for _ in range(60):
        n = rng.randint(1, 4)
        shape = [rng.choice([1, 2, 3, 5]) for _ in range(n)]
        x = _view(shape, rng)
        lo = _view([s if rng.random() < 0.6 else 1 for s in shape], rng)
        got = E.run("clamp", [x, -0.5, 0.5], x.dtype, "fp32", aten_layout=True)
        want = torch.clamp(x, -0.5, 0.5)
        assert layout(got) == layout(want), (shape, x.stride())
        torch.testing.assert_close(got, want)
        got3 = E.run("clamp", [x, lo, 0.5], x.dtype, "fp32", aten_layout=True)
        want3 = torch.clamp(x, lo, torch.tensor(0.5))
        assert layout(got3) == layout(want3), (shape, x.stride(), lo.stride())
        torch.testing.assert_close(got3, want3)
        perm = list(range(n))
        rng.shuffle(perm)
        self_ = torch.randn([shape[p] for p in perm]).permute([perm.index(i) for i in range(n)])
        ref = self_.clone()
        E.run("add", [self_, x], self_.dtype, "fp32", [1.0], out=self_, inplace=True)  # s0: alpha
        torch.testing.assert_close(self_, ref + x)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_activation_of_a_large_transposed_view_on_gpu():
    """An activation of a transposed 8M-element bf16 view under enable(): aten's values and
    layout, one launch of the elementwise kernel (which read 13.9x eager's time before it
    walked the output's memory order). The clamp takes 2M elements of it: from 4M on a device
    clamps are aten's (elementwise._ATEN_CLAMP_NUMEL)."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    x = torch.randn(8, 1024, 1024, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    for op, fn in (("softplus", torch.nn.functional.softplus), ("gelu", torch.nn.functional.gelu),
                   ("clamp", lambda v: torch.clamp(v[:2], -1.0, 1.0))):
        want = fn(x)
        got, delta = routed(lambda fn=fn: fn(x), [op])
        assert got.stride() == want.stride() and want.stride(1) == 1, op  # x's transposed layout
        torch.testing.assert_close(got, want, msg=op)
        assert delta["launches"] == 1 and delta["python_calls"] == 0, (op, delta)


def _odd_dense(shape, rng):
    """A dense tensor of ``shape`` in a random dim order whose size-1 dims have random strides
    (aten's fast set-up keeps them; its other paths give torch.empty's)."""
    n = len(shape)
    perm = list(range(n))
    rng.shuffle(perm)
    base = torch.randn([shape[p] for p in perm]).permute([perm.index(i) for i in range(n)])
    st = [rng.choice([1, 3, 7, 99]) if s == 1 and rng.random() < 0.8 else base.stride(i) for i, s in enumerate(shape)]
    return torch.as_strided(base, shape, st)


_F = torch.nn.functional
#: default overloads of one or two operands whose result layout aten derives from them
_RANDOM_OPS = {
    "clone": (1, lambda a: a[0].clone()), "cast": (1, lambda a: a[0].to(torch.float64)),
    "add": (2, lambda a: a[0] + a[1]), "mul by a float": (1, lambda a: a[0] * 1.5), "rsub": (1, lambda a: 1 - a[0]),
    "where": (2, lambda a: torch.where(a[0] > 0, a[0], a[1])), "where scalar": (1, lambda a: torch.where(a[0] > 0, a[0], 0.0)),
    "gelu": (1, lambda a: _F.gelu(a[0])), "exp": (1, lambda a: a[0].exp()), "clamp": (1, lambda a: a[0].clamp(-0.5, 0.5)),
    "clamp tensor": (2, lambda a: a[0].clamp(min=a[1])), "pow": (1, lambda a: a[0].pow(2)), "pow base": (1, lambda a: 2 ** a[0]),
    "hardtanh": (1, lambda a: _F.hardtanh(a[0])), "softplus": (1, lambda a: _F.softplus(a[0])),
    "erf": (1, lambda a: torch.erf(a[0])), "floor": (1, lambda a: a[0].floor()), "sign": (1, lambda a: a[0].sign()),
    "isinf": (1, lambda a: torch.isinf(a[0])), "eq scalar": (1, lambda a: a[0] == 0.5), "flip": (1, lambda a: a[0].flip(-1)),
    "zeros_like": (1, lambda a: torch.zeros_like(a[0])), "full_like": (1, lambda a: torch.full_like(a[0], 2.0)),
    "sum keepdim": (1, lambda a: a[0].sum(-1, keepdim=True)), "softmax": (1, lambda a: a[0].softmax(-1)),
    "tril": (1, lambda a: a[0].tril()), "silu_backward": (2, lambda a: torch.ops.aten.silu_backward(a[0], a[1])),
}


@pytest.mark.parametrize("seed", [0, 1])
def test_random_dense_layouts_with_odd_size_1_strides(seed):
    """Random shapes of mostly size-1 and small dims, in random dense layouts with random size-1
    strides, through the default overloads' C++ plans (a second call served by the first's plan):
    values, dtype and strides equal to aten's, size-1 dims' included."""
    from _util import native_ops_or_skip

    native_ops_or_skip()
    rng = random.Random(seed)
    for _ in range(60):
        name = rng.choice(sorted(_RANDOM_OPS))
        k, fn = _RANDOM_OPS[name]
        shape = [rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(2, 4))]
        args = [_odd_dense(shape, rng) for _ in range(k)]
        T.disable()
        want = fn(args)
        with T.enable(wait_native=True):
            fn(args)
            got = fn(args)
        assert got.dtype == want.dtype and got.stride() == want.stride(), (
            name, [(tuple(a.shape), a.stride()) for a in args], got.stride(), want.stride())
        torch.testing.assert_close(got, want, msg=name)
