"""copy.py's operators beyond what PyTorch's OpInfo samples reach: copy_ (not routed on the
interpreter backend, whose own launches call it: tested through its function here and under
enable() on a GPU), layouts (_to_copy keeps a transposed input's strides, cat keeps
channels-last), bfloat16 rounding, arange's values, and enable()'s refusals reaching aten."""
import pytest
import torch
import tritonjit_ops as T
from tritonjit_ops import copy as C


def test_copy_into_strided_broadcast_and_cast():
    dst = torch.zeros(6, 8)[:, ::2]  # strided destination
    src = torch.randn(4)  # broadcast over rows
    C.copy_(dst, src)
    assert torch.equal(dst, src.expand(6, 4))
    dst16 = torch.empty(3, 4, dtype=torch.bfloat16).t()
    src32 = torch.randn(4, 3) * 100
    C.copy_(dst16, src32)
    assert torch.equal(dst16, src32.to(torch.bfloat16))  # round to nearest even, as aten


def test_to_copy_layouts_and_bf16_rounding():
    x = torch.randn(5, 7).t()
    with T.enable(include="all", wait_native=True):
        y = x.to(torch.float64)
        b = x.to(torch.bfloat16)
        c = x.contiguous()
    assert y.stride() == x.stride() and torch.equal(y, x.double())  # preserve_format keeps strides
    assert torch.equal(b, x.to(torch.bfloat16))
    assert c.is_contiguous() and torch.equal(c, x)


def test_cat_keeps_channels_last_and_promotes():
    a = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    b = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    with T.enable(include="all", wait_native=True):
        got = torch.cat([a, b], 1)
        mixed = torch.cat([torch.ones(2, dtype=torch.int32), torch.full((3,), 0.5)])
        rot = torch.cat([-a[..., 2:], a[..., :2]], -1)  # rotate_half-like strided halves
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.equal(got, torch.cat([a, b], 1))
    assert mixed.dtype == torch.float32 and torch.equal(mixed, torch.tensor([1, 1, 0.5, 0.5, 0.5]))
    assert torch.equal(rot, torch.cat([-a[..., 2:], a[..., :2]], -1))


@pytest.mark.parametrize("args,kwargs", [((10,), {}), ((2, 11, 3), {}), ((0.1, 2.0, 0.3), {}),
                                         ((5,), {"dtype": torch.float64}), ((-3, 4), {"dtype": torch.int32}),
                                         ((1.0, -1.0, -0.25), {})])
def test_arange(args, kwargs):
    ref = torch.arange(*args, **kwargs)
    with T.enable(include="all", wait_native=True):
        got = torch.arange(*args, **kwargs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)


def test_refused_calls_get_atens_result():
    z = torch.tensor([1 + 2j, 3 - 1j])
    with T.enable(include="all", wait_native=True):
        got = [torch.cat([z, z]), torch.zeros_like(z), z.clone(), torch.full((2,), 1 + 1j)]
    want = [torch.cat([z, z]), torch.zeros_like(z), z.clone(), torch.full((2,), 1 + 1j)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


@pytest.mark.gpu
def test_copy_under_enable_on_gpu():
    dst = torch.zeros(6, 8, device="cuda")[:, ::2]
    src = torch.randn(4, device="cuda")
    with T.enable(include="all", wait_native=True):
        assert "copy_" in T.enabled_ops()
        dst.copy_(src)
        host = torch.randn(3, 4).cuda()  # across devices: aten's copy
        back = host.cpu()
        into = torch.empty(3, 4, device="cuda").copy_(back)  # host to device through copy_
        value = torch.empty(2, device="cuda").copy_(torch.tensor(1.5))  # a 0-dim CPU value
    assert torch.equal(dst, src.expand(6, 4)) and torch.equal(back.cuda(), host)
    assert torch.equal(into, host) and value.tolist() == [1.5, 1.5]


_COPY_CASES = {  # name -> (dst, src): the copy_ calls models make
    "contiguous": lambda: (torch.empty(4, 6), torch.randn(4, 6)),
    "cast f32 -> bf16": lambda: (torch.empty(4, 6, dtype=torch.bfloat16), torch.randn(4, 6) * 100),
    "int64 -> int32": lambda: (torch.empty(3, 5, dtype=torch.int32), torch.randint(-9, 9, (3, 5))),
    "bool -> f32": lambda: (torch.empty(7), torch.rand(7) > 0.5),
    "transposed src": lambda: (torch.empty(5, 6), torch.randn(6, 5).t()),
    "broadcast row": lambda: (torch.empty(4, 6), torch.randn(1, 6)),
    "broadcast 0-dim device tensor": lambda: (torch.empty(3, 2), torch.tensor(2.5)),
    "KV-cache slice (B,H,S,D)[:, :, 3:5]": lambda: (torch.zeros(2, 3, 8, 4)[:, :, 3:5], torch.randn(2, 3, 2, 4)),
    "heads view of (B,S,H,D) into (B,H,S,D)": lambda: (torch.empty(2, 3, 5, 4), torch.randn(2, 5, 3, 4).transpose(1, 2)),
    "same view": lambda: (lambda t: (t, t))(torch.randn(3, 4)),
    "empty": lambda: (torch.empty(0, 4), torch.randn(0, 4)),
}


@pytest.mark.parametrize("case", list(_COPY_CASES))
def test_copy_plan(case):
    """copy_'s planner (the C++ path's plan, run here by the Python executor): one launch into
    dst's own strides, src broadcast and cast, values as aten's copy_, dst returned."""
    from tritonjit_ops import _plan

    dst, src = _COPY_CASES[case]()
    ref = dst.clone().copy_(src) if dst.data_ptr() != src.data_ptr() else src.clone()
    p = C._plan_copy_(dst, src)
    assert p is not None and p.writes == (0,) and p.result == (_plan.In(0),)
    assert len(p.launches) == (1 if dst.numel() else 0)
    out = _plan.run(p, [dst, src, False])
    assert out is dst and torch.equal(dst, ref)


def test_copy_plan_refusals():
    """What the planner leaves to aten's copy_ (planned as aten's: no trip through the Python
    implementation): a src that does not broadcast to dst (aten's error), a lazily negated
    src (conj().imag), a complex src, an expanded dst (aten refuses to write it), another
    device, 7 dims that do not coalesce; a Python number is no plan at all; and a src that
    overlaps dst in another view is sent to the implementation per call by the executor."""
    from tritonjit_ops import _plan

    neg = torch.randn(2, 3, dtype=torch.complex64).conj().imag
    assert neg.is_neg()
    odd = torch.empty(2, 3, 2, 3, 2, 3, 2)
    atens = [(torch.empty(4, 6), torch.randn(5, 6)), (torch.empty(2, 3), neg),
             (torch.empty(3), torch.randn(3, dtype=torch.complex64)), (torch.empty(1, 6).expand(4, 6), torch.randn(4, 6)),
             (torch.empty(3, device="meta"), torch.randn(3)), (odd, odd.permute(6, 5, 4, 3, 2, 1, 0).contiguous()
                                                                .permute(6, 5, 4, 3, 2, 1, 0)[..., :1].expand(odd.shape))]
    for dst, src in atens:
        assert C._plan_copy_(dst, src).aten, (dst.shape, src.shape)
    assert C._plan_copy_(torch.empty(3), 1.0) is None
    x = torch.arange(8.0)
    p = C._plan_copy_(x[1:], x[:-1])
    with pytest.raises(NotImplementedError, match="shares memory"):
        _plan.run(p, [x[1:], x[:-1], False])


@pytest.mark.filterwarnings("ignore:Casting complex values")
@pytest.mark.parametrize("call", ["to complex", "to meta", "complex to float", "clone complex"])
def test_to_copy_and_clone_refusals_run_atens_kernel_without_python(call):
    """What _to_copy and clone refuse (another device, such as lengths moved to the host for
    CTC loss; a complex dtype) is planned as aten's on the C++ path: aten's result, and no trip
    through the Python implementation per call (before: the implementation ran and refused
    each time, at 1.7x aten's time on the H200)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    x = torch.randn(4, 6)
    z = torch.randn(4, 6, dtype=torch.complex64)
    fn, arg = {"to complex": (lambda t: t.to(torch.complex64), x), "to meta": (lambda t: t.to("meta"), x),
               "complex to float": (lambda t: t.to(torch.float32), z), "clone complex": (lambda t: t.clone(), z)}[call]
    ref = fn(arg)
    with T.enable(include=["_to_copy", "clone"], wait_native=True):
        fn(arg)  # the first call makes the plan
        before = native.stats()
        got = fn(arg)
        delta = stats_delta(before, native.stats())
    assert got.dtype == ref.dtype and got.device == ref.device and got.shape == ref.shape
    if got.device.type != "meta":
        assert torch.equal(got, ref)
    assert delta["python_calls"] == 0 and delta["aten_calls"] == 1, delta


@pytest.mark.parametrize("case", ["fp32", "int into transposed fp32", "fp32 into bf16", "a view of self"])
def test_fill_tensor_is_planned_as_a_broadcast_copy(case):
    """fill_.Tensor (a 0-dim value tensor) is aten's ``self.copy_(value)``: one planned launch
    on the C++ path, cast and into any strides; a value that is a view of ``self`` goes to aten
    per call (copy_'s overlap rule). Before, every call ran the Python implementation."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()

    def make():
        if case == "a view of self":
            x = torch.arange(6.0)
            return x, x[2]
        return {"fp32": lambda: (torch.zeros(4, 6), torch.tensor(3.5)),
                "int into transposed fp32": lambda: (torch.zeros(6, 4).t(), torch.tensor(7)),
                "fp32 into bf16": lambda: (torch.zeros(3, 5, dtype=torch.bfloat16), torch.tensor(1.2345))}[case]()

    x, v = make()
    ref = x.fill_(v)
    with T.enable(include=["fill_.Tensor"], wait_native=True):
        x, v = make()
        x.fill_(v)  # the first call makes the plan
        x, v = make()
        before = native.stats()
        got = x.fill_(v)
        delta = stats_delta(before, native.stats())
    assert got is x and torch.equal(got, ref)
    if case == "a view of self":
        assert delta["aten_calls"] == 1, delta
    else:
        assert delta["python_calls"] == 0 and delta["launches"] == 1, delta
    with T.enable(include=["fill_.Tensor"], wait_native=True), pytest.raises(RuntimeError, match="0-dimension"):
        torch.zeros(3).fill_(torch.ones(2))


def test_copy_plan_leaves_large_transposing_copies_to_aten():
    """On a device, a copy of 4M+ elements that reads src across dst's rows (a transpose) is
    aten's (its kernel tiles the reads; ours measured 1.04-1.08x); a large copy in dst's
    memory order, a broadcast row, and a small transpose stay ours. (Meta tensors stand for a
    device: on the CPU the interpreter runs every copy.)"""
    m = dict(device="meta")
    big = (2048, 4096)
    assert C._plan_copy_(torch.empty(big, **m), torch.empty(big[::-1], **m).t()).aten
    assert C._plan_copy_(torch.empty(big[::-1], **m).t(), torch.empty(big, **m)).aten  # writes across
    assert not C._plan_copy_(torch.empty(big[::-1], **m).t(), torch.empty(big[::-1], **m).t()).aten  # same order
    assert not C._plan_copy_(torch.empty(big, **m), torch.empty(big, **m)).aten
    assert not C._plan_copy_(torch.empty(big, **m), torch.empty(1, 4096, **m)).aten
    assert not C._plan_copy_(torch.empty(64, 64, **m), torch.empty(64, 64, **m).t()).aten


@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in _COPY_CASES if c != "empty"])
def test_copy_plan_hits_on_gpu(case):
    """copy_ under enable() on the device: the C++ path serves a second call from its plan
    (no Python call), with aten's values."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    dst, src = (t.cuda() for t in _COPY_CASES[case]())
    if case == "same view":
        src = dst
    ref = dst.clone().copy_(src) if dst.data_ptr() != src.data_ptr() else src.clone()
    with T.enable(include=["copy_"], wait_native=True):
        dst.copy_(src)
        before = native.stats()
        dst.copy_(src)
        delta = stats_delta(before, native.stats())
    assert torch.equal(dst, ref)
    assert delta["python_calls"] == 0 and delta["plan_hits"] >= 1, delta


@pytest.mark.parametrize("args", [(0.0, -8.000001, -4.0), (1.0, 5.000001, 2.0), (-0.9, 2.1, 2.0), (0.5, 5.5, 1.5),
                                  (-3.7, 3.7, 1.2), (0.0, -0.5, -1.0), (2.5, -3.5, -1.5), (0, 5, 0.5), (3, 11, 3)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_arange_float_bounds_integer_dtype(args, dtype):
    """aten's int64 arange truncates start, end and step before it computes the size (other
    dtypes take the size from the float bounds): arange(0., -8.000001, -4., dtype=int64) has 2
    elements, int32's has 3."""
    from _util import aten_arange

    try:
        ref = aten_arange(*args, dtype=dtype)
    except (RuntimeError, ValueError) as e:  # int64 with a step that truncates to 0
        with pytest.raises(type(e), match="step must be nonzero"):
            with T.enable(include=["arange.start_step"]):
                torch.arange(*args, dtype=dtype)
        return
    with T.enable(include=["arange.start_step"]):
        got = torch.arange(*args, dtype=dtype)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got, ref)
    torch.testing.assert_close(got, ref)


def test_arange_step_truncating_to_zero_raises_where_old_aten_would_crash(monkeypatch):
    """Where the installed torch divides by zero in that size (before 2.13: SIGFPE, the process
    dies), the operator raises the ValueError that later versions raise instead of falling back."""
    from tritonjit_ops import copy as C

    monkeypatch.setattr(C, "_ARANGE_DIVIDES_BY_ZERO", True)
    with T.enable(include=["arange.start_step"], wait_native=True):  # the C++ path, where it builds
        with pytest.raises(ValueError, match="step must be nonzero") as e:
            torch.arange(0, 5, 0.5, dtype=torch.int64)
        assert getattr(e.value, "_tritonjit_final", False), "aten's error, not the operator's"
        assert torch.arange(0, 5, 1.5, dtype=torch.int64).tolist() == [0, 1, 2, 3, 4]  # step 1 after truncation
    # the Python path (before the C++ path is built) raises it too, instead of handing it to aten
    from tritonjit_ops import _fallback

    monkeypatch.setattr(_fallback, "_on_python_path", lambda: True)
    with pytest.raises(ValueError, match="step must be nonzero") as e:
        C.ATEN["arange.start_step"](0, 5, 0.5, dtype=torch.int64)
    assert getattr(e.value, "_tritonjit_final", False), "aten's error, not the operator's"


_LAYOUTS = {
    "attention heads view (B,H,S,D) of (B,S,H,D)": lambda: torch.randn(2, 6, 3, 8).permute(0, 2, 1, 3),
    "transposed matrix": lambda: torch.randn(6, 5).t(),
    "channels-last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "5-d permutation": lambda: torch.randn(2, 3, 4, 5, 2).permute(4, 3, 2, 1, 0),
    "sliced rows (not dense)": lambda: torch.randn(4, 9)[:, :7],
    "size-1 dim with an odd stride": lambda: torch.randn(3, 1, 4).transpose(0, 2),
}


@pytest.mark.parametrize("layout", list(_LAYOUTS))
@pytest.mark.parametrize("call", ["to bf16", "to float64 contiguous", "clone", "clone contiguous", "to channels-last"])
def test_copies_of_any_layout_take_the_cpp_plans(layout, call):
    """_to_copy and clone of the layouts models make run planned, in aten's output layout
    (preserve_format keeps a dense input's strides), with aten's values: before, every
    non-contiguous input went to the Python implementation (5-7x eager's time on the H200
    for T5's attention views)."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    x = _LAYOUTS[layout]()
    fn = {"to bf16": lambda t: t.to(torch.bfloat16),
          "to float64 contiguous": lambda t: t.to(torch.float64, memory_format=torch.contiguous_format),
          "clone": lambda t: t.clone(),
          "clone contiguous": lambda t: t.clone(memory_format=torch.contiguous_format),
          "to channels-last": lambda t: t.to(torch.float64, memory_format=torch.channels_last)}[call]
    try:
        ref = fn(x)
    except RuntimeError as e:  # channels-last of another rank: aten's error under enable() too
        with T.enable(include=["_to_copy", "clone"], wait_native=True), pytest.raises(RuntimeError):
            fn(x)
        assert "rank" in str(e)
        return
    with T.enable(include=["_to_copy", "clone"], wait_native=True):
        fn(x)  # the first call makes the plan
        before = native.stats()
        got = fn(x)
        delta = stats_delta(before, native.stats())
    assert got.dtype == ref.dtype and got.shape == ref.shape and torch.equal(got, ref)
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    assert delta["python_calls"] == 0 and delta["launches"] >= 1, delta  # 5 dims that do not coalesce: the rank-6 kernel


def test_rank5_copies_take_the_rank6_kernel_and_cross_compile_for_sm90():
    """repeat_kv's clone of (B, KV heads, repeats, S, D) broadcast views of (B, S, H, D)
    storage (Gemma 3, or any GQA model whose attention has a mask), and a stack at the last
    dim of head views (Cohere's rotary), are rank 5 after coalescing: the rank-6 kernel
    (elementwise._ew6) serves them, the stack's second input at an output offset."""
    from tritonjit_ops import _plan
    from tritonjit_ops import elementwise as E

    q = torch.empty(2, 16, 8, 64, dtype=torch.bfloat16).transpose(1, 2)  # (B, H, S, D) of (B, S, H, D)
    rep = q[:, :, None].expand(2, 8, 4, 16, 64)
    p = C._plan_clone(rep, memory_format=torch.contiguous_format)
    (clone_launch,) = p.launches
    assert len(clone_launch.args) == 9 + 5 + 4 * 6 + 12  # ptrs, n, scalars, obase; dims; strides; constexprs
    s = C._plan_stack([q[..., 1::2], q[..., ::2]], -1)
    assert clone_launch.fn is E._ew6
    # each stacked input is rank 4: the first takes the cheaper kernel, the second its slice one element in
    assert [L.fn for L in s.launches] == [E._ew, E._ew6] and s.launches[1].args[8] == 1
    out = torch.empty(p.outputs[0].shape, dtype=torch.bfloat16)
    for L, ins in ((clone_launch, [rep]), (s.launches[1], [q[..., ::2]])):
        args = [ins[0] if isinstance(a, (_plan.In, _plan.InItem)) else out if isinstance(a, _plan.Out) else a
                for a in L.args]
        assert E._ew6.compile(E._ew6.signature(*args), target="cuda:90").binary


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rank5_views_under_enable_on_gpu(dtype):
    """The rank-6 kernel on the device, through the C++ plans: repeat_kv's clone and reshape
    of (B, KV, rep, S, D) broadcast views (Gemma 3), Cohere's stack of interleaved head
    halves (the second input at an output offset), a cast and a unary op of a rank-5 view;
    values and strides as eager's, no call left to the Python implementation."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    q = torch.randn(2, 16, 8, 64, device="cuda", dtype=dtype).transpose(1, 2)  # (B, H, S, D) of (B, S, H, D)
    calls = {
        "clone repeat_kv": lambda: q[:, :, None].expand(2, 8, 4, 16, 64).clone(),
        "reshape repeat_kv": lambda: q[:, :, None].expand(2, 8, 4, 16, 64).reshape(2, 32, 16, 64),
        "stack halves": lambda: torch.stack([-q[..., 1::2], q[..., ::2]], dim=-1),
        "cast rank 5": lambda: q[:, :, None].expand(2, 8, 3, 16, 64).to(torch.float64),
        "exp rank 5": lambda: q[:, :, None].expand(2, 8, 3, 16, 64).exp(),
    }
    for name, fn in calls.items():
        want = fn()
        with T.enable(wait_native=True):
            fn()  # the plan
            before = native.stats()
            got = fn()
            delta = stats_delta(before, native.stats())
        torch.cuda.synchronize()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if name.startswith("exp"):  # the device's exp and aten's may differ in the last bit
            torch.testing.assert_close(got, want, msg=name)
        else:  # copies are exact
            assert torch.equal(got, want), name
        assert delta["python_calls"] == 0 and delta["launches"] >= 1, (name, delta)
