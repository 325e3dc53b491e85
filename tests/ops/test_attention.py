"""Flash attention: the Triton forward and backward against torch's SDPA in fp32 math,
on every path (direct entry, torch.ops.tritonjit, SDPA under enable()).

On CPU the kernels run through Triton's interpreter with 16-row blocks, so the short
sequences here span several blocks and end in a partial one. The GPU cases (marked
gpu) run model shapes in bf16/fp16 against torch's own SDPA.
"""
from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch
import tritonjit
import tritonjit_ops as T
from _util import SDPA_LAYOUT_CASES, sdpa_layout_calls
from tritonjit_ops import _native_ops
from tritonjit_ops.attention import Unsupported  # (tritonjit_ops.attention is the function)

attention_module = sys.modules["tritonjit_ops.attention"]

F = torch.nn.functional
#: against fp32 math: the kernels' own rounding (fp32 on the interpreter), bf16/fp16 outputs
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


def _ref(q, k, v, causal=False, scale=None, mask=None):
    """Eager SDPA in fp32 math, with its gradients."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q32, k32, v32, attn_mask=mask, is_causal=causal, scale=scale,
                                           enable_gqa=q.shape[1] != k.shape[1])
    return o, q32, k32, v32


def _inputs(b, h, hk, m, n, d, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, hh, s, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
            for hh, s in ((h, m), (hk, n), (hk, n))]


def _check(o, grads, ref, do, dtype):
    r, q32, k32, v32 = ref
    rg = torch.autograd.grad(r, (q32, k32, v32), do.float())
    torch.testing.assert_close(o.float(), r, **TOL[dtype])
    for name, got, want in zip("qkv", grads, rg):
        assert got.dtype == dtype and got.shape == want.shape, name
        torch.testing.assert_close(got.float(), want, **TOL[dtype], msg=lambda s, n=name: f"d{n}: {s}")


CASES = [  # b, h, hk, m, n, d, causal
    (1, 2, 2, 40, 40, 16, False),
    (2, 2, 2, 33, 33, 32, True),  # a partial last block, causal
    (1, 4, 2, 16, 48, 16, False),  # GQA, more keys than queries
    (2, 4, 1, 37, 37, 16, True),  # GQA (multi-query), causal, odd length
    (1, 2, 2, 8, 21, 64, False),  # one partial block of each
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_direct_forward_backward(case, dtype):
    b, h, hk, m, n, d, causal = case
    q, k, v = _inputs(b, h, hk, m, n, d, dtype)
    o = T.attention(q, k, v, causal=causal)
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), do)
    _check(o, grads, _ref(q, k, v, causal), do, dtype)


def test_scale_and_transposed_layout():
    """A (B, S, H, D) tensor viewed as (B, H, S, D), as models pass it, and an explicit scale."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 24, 4, 32, generator=g).transpose(1, 2).requires_grad_() for _ in range(3))
    o = T.attention(q, k, v, causal=True, scale=0.3)
    do = torch.randn_like(o)
    _check(o, torch.autograd.grad(o, (q, k, v), do), _ref(q, k, v, True, 0.3), do, torch.float32)


@pytest.mark.parametrize("shape", [(2, 1, 1, 40), (2, 2, 24, 40)], ids=str)
def test_additive_and_bool_mask(shape):
    """bert's padding mask (B, 1, 1, N) broadcast over heads and rows, and a full one; a
    row masked out entirely gives 0 and no NaN in the gradients."""
    q, k, v = _inputs(2, 2, 2, 24, 40, 16, torch.float32)
    g = torch.Generator().manual_seed(2)
    add = torch.randn(shape, generator=g)
    add[0, ..., -7:] = float("-inf")
    for mask in (add, torch.rand(shape, generator=g) > 0.3):
        o = T.attention(q, k, v, attn_mask=mask)
        do = torch.randn_like(o)
        grads = torch.autograd.grad(o, (q, k, v), do)
        if mask.dtype == torch.bool:
            full = ~mask.expand(2, 2, 24, 40).any(-1)  # rows with no key: eager gives NaN/0, skip them
            assert torch.isfinite(o).all() and all(torch.isfinite(gr).all() for gr in grads)
            assert (o[full] == 0).all()
            mask = mask | full[..., None]
        _check(o, grads, _ref(q, k, v, mask=mask), do, torch.float32)


def test_tritonjit_op_with_autograd():
    q, k, v = _inputs(1, 4, 2, 20, 20, 16, torch.float32)
    o, lse = torch.ops.tritonjit.flash_attention(q, k, v, True, None)
    assert lse.shape == (1, 4, 20) and lse.dtype == torch.float32
    s = (q.detach() @ k.detach().repeat_interleave(2, 1).transpose(-1, -2)) / 4.0
    s = s.masked_fill(torch.ones(20, 20, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(s, -1), rtol=1e-5, atol=1e-5)
    do = torch.randn_like(o)
    _check(o, torch.autograd.grad(o, (q, k, v), do), _ref(q, k, v, True), do, torch.float32)


@pytest.mark.parametrize("bad, match", [
    (dict(d=24), "head_dim 24"),
    (dict(causal_mn=True), "causal with query length"),
    (dict(dtype=torch.float64), "dtype torch.float64"),
])
def test_refusals_name_the_reason(bad, match):
    d = bad.get("d", 16)
    q, k, v = _inputs(1, 2, 2, 8, 12 if bad.get("causal_mn") else 8, d, bad.get("dtype", torch.float32))
    with pytest.raises(Unsupported, match=match):
        T.attention(q, k, v, causal=bool(bad.get("causal_mn")))


def _routed(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.enable(wait_native=True):
            before = _native_ops.stats().get("python_calls", 0)
            out = fn()
            return out, _native_ops.stats().get("python_calls", 0) - before


def _in_cpp(fn):
    """fn() under enable() on the C++ operator path, and that path's counters of the call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.enable(wait_native=True):
            if _native_ops.module() is None:
                pytest.skip("the C++ operator path is off here")
            before = _native_ops.stats()
            out = fn()
            return out, {k: v - before[k] for k, v in _native_ops.stats().items()}


@pytest.mark.parametrize("causal, hk, masked", [(True, 4, False), (False, 2, False), (False, 4, True)])
def test_sdpa_under_enable_is_routed(causal, hk, masked):
    """SDPA reaches the CPU flash kernel; forward and backward run tritonjit's (2 Python
    implementation calls) and agree with eager."""
    q, k, v = _inputs(2, 4, hk, 24, 24, 16, torch.float32)
    mask = None
    if masked:
        mask = torch.zeros(2, 1, 1, 24)
        mask[1, ..., -5:] = float("-inf")

    def step():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=hk != 4)
        return o, torch.autograd.grad(o, (q, k, v), do)

    do = torch.randn(2, 4, 24, 16)
    (o, grads), calls = _routed(step)
    if _native_ops.native() is None or _native_ops.module() is None:
        pytest.skip("the C++ operator path is off here: no call counter")
    assert calls == 2
    _check(o, grads, _ref(q, k, v, causal, mask=mask), do, torch.float32)


def test_efficient_attention_op_under_enable():
    """aten's efficient-attention op (SDPA with a mask on CUDA) with its logsumexp layout
    (rows rounded up to 32) and its backward (no bias gradient): both planned (the launches
    recorded once per call shape) and run in C++."""
    q, k, v = _inputs(1, 2, 2, 20, 20, 16, torch.float32)
    bias = torch.randn(1, 1, 20, 20).expand(1, 2, 20, 20)

    do = torch.ones_like(q)  # outside the counted calls (ones_like is routed too)

    def run():
        o, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, False)
        g = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            do, q, k, v, bias, o, lse, torch.empty(()), torch.empty(()), 0.0, [True, True, True, False], False)
        return o, lse, do, g

    (o, lse, do, g), d = _in_cpp(run)
    assert d["python_calls"] == 0 and d["plans_made"] == 2 and d["launches"] == 4  # forward 1, backward 3
    assert lse.shape == (1, 2, 32) and g[3] is None
    _check(o, g[:3], _ref(q, k, v, mask=bias), do, torch.float32)


# ---- GPU ----------------------------------------------------------------------------------------
GPU_CASES = [(2, 8, 2, 1024, 64, True, torch.bfloat16), (1, 8, 8, 2048, 128, False, torch.bfloat16),
             (1, 4, 1, 1000, 128, True, torch.bfloat16), (1, 8, 2, 4096, 128, True, torch.bfloat16),
             (2, 8, 2, 1024, 64, True, torch.float16), (1, 8, 8, 2048, 128, False, torch.float16)]


@pytest.fixture(scope="module")
def gpu_warm():
    """Every variant the GPU cases launch (each tuned config), compiled first in parallel by
    tritonjit's warm-up: the tuner then finds them compiled (minutes of serial compiles)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tritonjit._manifest import ManifestEntry
    from tritonjit._warmup import warmup

    entries = {}
    mask = torch.zeros(2, 1, 1, 512, device="cuda", dtype=torch.bfloat16)
    calls = [(b, h, hk, s, d, causal, dtype, None) for b, h, hk, s, d, causal, dtype in GPU_CASES]
    calls += [(2, 8, 2, 512, 128, True, torch.bfloat16, None), (2, 8, 8, 512, 128, False, torch.bfloat16, mask)]
    for b, h, hk, s, d, causal, dtype, bias in calls:
        q, k = (torch.empty(b, hh, s, d, device="cuda", dtype=dtype) for hh in (h, hk))
        for fn, sig, opts in attention_module.signatures(q, k, k, causal=causal, bias=bias):
            entries[ManifestEntry(kernel=fn.name, file=attention_module.__file__, signature=sig,
                                  options=tuple(sorted(opts.items())), module="tritonjit_ops.attention")] = None
    major, minor = torch.cuda.get_device_capability()
    warmup(list(entries), jobs=min(16, os.cpu_count() or 1), target=f"cuda:{major}{minor}", progress=False)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
def test_gpu_against_torch(case, gpu_warm):
    b, h, hk, s, d, causal, dtype = case
    q, k, v = _inputs(b, h, hk, s, s, d, dtype, device="cuda")
    o = T.attention(q, k, v, causal=causal)
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), do)
    r = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != hk)
    rg = torch.autograd.grad(r, (q, k, v), do)
    exact, q32, k32, v32 = _ref(q, k, v, causal)  # fp32 math
    eg = torch.autograd.grad(exact, (q32, k32, v32), do.float())
    # tritonjit's error against fp32 math at most twice torch's own kernel's (plus a little)
    for name, got, torch_got, want in zip(("out", "dq", "dk", "dv"), (o, *grads), (r, *rg), (exact, *eg)):
        ours = (got.float() - want).abs().max().item()
        theirs = (torch_got.float() - want).abs().max().item()
        assert ours <= 2 * theirs + 1e-3 * want.abs().max().item(), (name, ours, theirs)


@pytest.mark.gpu
def test_gpu_sdpa_under_enable_is_routed(gpu_warm, monkeypatch):
    """SDPA on the GPU: GQA causal (torch's flash path) and with bert's padding mask (its
    efficient path): forward and backward run tritonjit's kernels and agree with eager
    (TRITONJIT_OPS_SDPA=tritonjit: "auto" would give a call to aten's kernel where it is faster)."""
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    attention_module.clear_routes()  # plans an earlier test's "auto" made for these shapes
    mask = torch.zeros(2, 1, 1, 512, device="cuda", dtype=torch.bfloat16)
    mask[1, ..., -100:] = float("-inf")
    for hk, kw in ((2, dict(is_causal=True, enable_gqa=True)), (8, dict(attn_mask=mask))):
        q, k, v = _inputs(2, 8, hk, 512, 512, 128, torch.bfloat16, device="cuda")
        do = torch.randn_like(q)
        r = F.scaled_dot_product_attention(q, k, v, **kw)
        rg = torch.autograd.grad(r, (q, k, v), do)

        def step(q=q, k=k, v=v, kw=kw, do=do):
            o = F.scaled_dot_product_attention(q, k, v, **kw)
            return o, torch.autograd.grad(o, (q, k, v), do)

        with T.enable(include="all", wait_native=True):
            step()  # first call: compiles and autotunes (the tuner's own torch calls are routed too)
        (o, grads), d = _in_cpp(step)
        assert d["python_calls"] == 0 and d["launches"] >= 4, (kw, d)  # the plans: forward 1, backward 3
        torch.testing.assert_close(o, r, rtol=2e-2, atol=2e-2)
        for got, want in zip(grads, rg):
            torch.testing.assert_close(got, want, rtol=5e-2, atol=1e-1)


def test_cudnn_attention_op_under_enable():
    """aten's cuDNN-attention op (where torch prefers it on Hopper) with its (B, H, M, 1)
    logsumexp, and its backward."""
    q, k, v = _inputs(1, 4, 2, 18, 18, 16, torch.float32)

    do = torch.ones_like(q)  # outside the counted calls (ones_like is routed too)

    def run():
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, True, False)
        g = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            do, q, k, v, r[0], r[1], r[6], r[7], None, None, None, 18, 18, 0.0, True)
        return r[0], r[1], do, g

    (o, lse, do, g), d = _in_cpp(run)
    assert d["python_calls"] == 0 and d["plans_made"] == 2 and d["launches"] == 4  # forward 1, backward 3
    assert lse.shape == (1, 4, 18, 1)
    _check(o, g, _ref(q, k, v, True), do, torch.float32)


def _layout_sequence(b, h, s, d, dtype, device):
    """DiffLlama's SDPA calls and their neighbours' layouts, in one process, in turn: one call
    on contiguous (B, H, S, D) inputs; two calls sharing query and key whose gradients are
    slices of one (B, S, H, 2D) tensor (DiffLlama concatenates the two outputs on the last
    dimension); the same with the query laid out (B, S, H, D), as a rotary embedding of a
    transposed projection leaves it; one call on that query. Each forward and backward runs
    through aten's SDPA under enable() (TRITONJIT_OPS_SDPA=tritonjit); yields (case, the
    gradients under enable(), those of fp32 math on the same values).

    The reference is SDPA's math backend in fp32, not eager in ``dtype``: torch 2.11's cuDNN
    attention backward keys its cached cuDNN graphs by the query, key and value layouts but
    not the output gradient's, so in one process eager's own gradients go wrong for the
    second and fourth patterns here (cosine ~0 against fp32 math on an H100)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(3)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    base = [rnd(b, s, h, d) for _ in range(4)]
    up = rnd(b, s, h, 2 * d)

    def grads(two, q_bshd, base=base, up=up):
        q, k, v1, v2 = (t.clone().transpose(1, 2).contiguous().requires_grad_() for t in base)
        if q_bshd:
            q = base[0].clone().transpose(1, 2).requires_grad_()
        if two:
            o1, o2 = (F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=d ** -0.5).transpose(1, 2)
                      .contiguous() for v in (v1, v2))
            loss = (torch.cat([o1, o2], dim=-1).float() * up.float()).sum()
            return torch.autograd.grad(loss, (q, k, v1, v2))
        o = F.scaled_dot_product_attention(q, k, v1, is_causal=True, scale=d ** -0.5)
        return torch.autograd.grad((o.float() * base[3].transpose(1, 2).float()).sum(), (q, k, v1))

    for case in SDPA_LAYOUT_CASES:
        with sdpa_kernel(SDPBackend.MATH):
            want = grads(*case, base=[t.float() for t in base], up=up.float())
        with T.enable(wait_native=True):
            got = grads(*case)
        yield case, got, want


@pytest.mark.gpu
def test_gpu_sdpa_layouts_in_turn(gpu_warm, monkeypatch):
    """Each SDPA call pattern of _layout_sequence agrees with fp32 math, whatever came before
    it in the process (each pattern runs twice): DiffLlama's gradients after Llama's, which
    once read as tritonjit's defect against eager, whose own were the wrong ones."""
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    attention_module.clear_routes()
    for case, got, want in _layout_sequence(4, 4, 256, 64, torch.bfloat16, "cuda"):
        for i, (x, y) in enumerate(zip(got, want)):
            cos = F.cosine_similarity(x.flatten().float(), y.flatten().float(), dim=0).item()
            assert cos > 0.999, (case, i, cos)


def _cudnn_causal(q, k, v, do):
    """aten's cuDNN-attention op (causal) and its backward, called as autograd calls them:
    (output, (dq, dk, dv))."""
    s, d = q.shape[2], q.shape[3]
    r = torch.ops.aten._scaled_dot_product_cudnn_attention.default(q, k, v, None, True, 0.0, True, False,
                                                                   scale=d ** -0.5)
    grads = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default(
        do, q, k, v, r[0], r[1], r[6], r[7], None, None, None, s, s, 0.0, True, scale=d ** -0.5)
    return r[0], grads[:3]


def test_cudnn_attention_layouts_in_turn():
    """The same sequence on the CPU, through aten's cuDNN-attention op and its backward (the
    C++ operator path's plans, which the CPU flash op has none of), against fp32 math."""
    b, h, s, d = 2, 4, 40, 16
    g = torch.Generator().manual_seed(3)
    base = [torch.randn(b, s, h, d, generator=g) for _ in range(4)]
    for case in SDPA_LAYOUT_CASES:
        for q, k, v, do in sdpa_layout_calls(base, *case, g):
            (o, grads), c = _in_cpp(lambda q=q, k=k, v=v, do=do: _cudnn_causal(q, k, v, do))
            assert c["python_calls"] == 0 and c["launches"] == 4, c  # the plans: forward 1, backward 3
            ref = _ref(q, k, v, True, d ** -0.5)
            _check(o, grads, ref, do, torch.float32)


@pytest.mark.gpu
def test_gpu_cudnn_attention_plans_are_the_python_implementation(gpu_warm, monkeypatch):
    """The same sequence on the GPU, each call made directly to the cuDNN op under enable():
    its C++ plans give, bit for bit, what the Python implementation gives for the same call
    outside enable(), and agree with fp32 math. (This check found the sequence's wrong
    gradients to be eager's: test_gpu_sdpa_layouts_in_turn.)"""
    monkeypatch.setenv("TRITONJIT_OPS_SDPA", "tritonjit")
    attention_module.clear_routes()
    b, h, s, d = 4, 4, 256, 64
    g = torch.Generator().manual_seed(3)
    base = [torch.randn(b, s, h, d, generator=g).to("cuda", torch.bfloat16) for _ in range(4)]
    for case in SDPA_LAYOUT_CASES:
        for q, k, v, do in sdpa_layout_calls(base, *case, g):
            (o, grads), c = _in_cpp(lambda q=q, k=k, v=v, do=do: _cudnn_causal(q, k, v, do))
            assert c["python_calls"] == 0 and c["launches"] == 4, (case, c)
            o_py, lse_py = attention_module.attention_forward(q, k, v, causal=True, scale=d ** -0.5)
            grads_py = attention_module.attention_backward(do, q, k, v, o_py, lse_py, causal=True, scale=d ** -0.5)
            assert torch.equal(o, o_py), case
            r, q32, k32, v32 = _ref(q, k, v, True, d ** -0.5)
            want = torch.autograd.grad(r, (q32, k32, v32), do.float())
            for name, x, y, w in zip("qkv", grads, grads_py, want):
                assert torch.equal(x, y), (case, name)
                cos = F.cosine_similarity(x.flatten().float(), w.flatten(), dim=0).item()
                assert cos > 0.999, (case, name, cos)


def test_cudnn_attention_plans_read_no_unwritten_memory(monkeypatch):
    """The same sequence with the GPU's tiles, every buffer that aten's ``empty`` allocates
    (the C++ plans' outputs and temporaries, delta included) filled with NaN, as deterministic
    mode does: a kernel that read an output or a temporary before writing it (memory a GPU's
    caching allocator hands out dirty once other calls ran) would put NaN into the results."""
    monkeypatch.setattr(attention_module, "TUNED_ON_CPU", True)
    b, h, s, d = 1, 2, 64, 64
    g = torch.Generator().manual_seed(5)
    base = [torch.randn(b, s, h, d, generator=g) for _ in range(4)]
    deterministic, fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        assert torch.empty(8).isnan().all()  # the filling this test relies on
        for case in SDPA_LAYOUT_CASES[:4]:
            for q, k, v, do in sdpa_layout_calls(base, *case, g):
                (o, grads), c = _in_cpp(lambda q=q, k=k, v=v, do=do: _cudnn_causal(q, k, v, do))
                assert c["python_calls"] == 0, c  # the plans served both
                _check(o, grads, _ref(q, k, v, True, d ** -0.5), do, torch.float32)
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.utils.deterministic.fill_uninitialized_memory = fill


@pytest.mark.parametrize("q_layout, do_layout", [("bhsd", "bshd"), ("bhsd", "half"), ("bshd", "half"),
                                                  ("bshd", "bshd")])
def test_kernels_read_nothing_outside_their_tensors(q_layout, do_layout, monkeypatch):
    """With the GPU's tiles (the unmasked EVEN paths) on the interpreter, every input a view
    into a buffer whose every other element is NaN (guards before and after, and the gaps of
    a strided layout: ``half`` is the first half of a (B, S, H, 2D) tensor, as DiffLlama's
    gradients are): a read outside a tensor would put NaN into the outputs."""
    monkeypatch.setattr(attention_module, "TUNED_ON_CPU", True)
    b, h, s, d, guard = 1, 2, 128, 64, 1 << 14
    strides = {"bhsd": (s * h * d, s * d, d, 1), "bshd": (s * h * d, d, h * d, 1),
               "half": (s * h * 2 * d, 2 * d, h * 2 * d, 1)}
    g = torch.Generator().manual_seed(0)

    def guarded(shape, stride, values=None):
        extent = 1 + sum((n - 1) * st for n, st in zip(shape, stride))
        t = torch.full((extent + 2 * guard,), float("nan")).as_strided(shape, stride, guard)
        return t.copy_(torch.randn(shape, generator=g) if values is None else values)

    shape = (b, h, s, d)
    q, k, v = guarded(shape, strides[q_layout]), guarded(shape, strides["bhsd"]), guarded(shape, strides["bhsd"])
    do = guarded(shape, strides[do_layout])
    o, lse = attention_module._forward(q, k, v, True, d ** -0.5, None, None, None)
    o, lse = guarded(shape, o.stride(), o), guarded(tuple(lse.shape), lse.stride(), lse)
    outs = (o, lse, *attention_module._backward(do, q, k, v, o, lse, True, d ** -0.5, None))
    assert not any(t.isnan().any() for t in outs)
    torch.testing.assert_close(o, _ref(q, k, v, True, d ** -0.5)[0], **TOL[torch.float32])


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_every_tuned_config_on_the_interpreter(which, causal, monkeypatch):
    """Each config the tuners may pick on a GPU (forward, dk/dv and dq: which one wins depends
    on timings, which a busy GPU changes) computes the same attention and gradients: the
    plain kernels launched with that config, at a length past SHORT_N that no block divides
    (the masked tails), on the interpreter."""
    configs = {"_attn_fwd": attention_module._FWD_CONFIGS[which], "_bwd_dkdv": attention_module._DKDV_CONFIGS[which],
               "_bwd_dq": attention_module._DQ_CONFIGS[which]}
    used = []

    def launch(tuned, plain, grid, args, consts, q, bias, m, n):
        meta = attention_module._fixed(consts, configs[plain.name].kwargs, m, n)
        used.append(plain.name)
        attention_module._run(plain, grid(meta), args, meta)

    monkeypatch.setattr(attention_module, "TUNED_ON_CPU", True)
    monkeypatch.setattr(attention_module, "_launch_tuned", launch)
    s = attention_module.SHORT_N + 44
    q, k, v = _inputs(1, 2, 1, s, s, 64, torch.float32)
    o = T.attention(q, k, v, causal=causal)
    do = torch.randn_like(o)
    _check(o, torch.autograd.grad(o, (q, k, v), do), _ref(q, k, v, causal), do, torch.float32)
    assert sorted(used) == ["_attn_fwd", "_bwd_dkdv", "_bwd_dq"]


@pytest.mark.parametrize("causal, s", [(True, 300), (False, 300), (True, 130)])
def test_gpu_launch_path_on_the_interpreter(causal, s, monkeypatch):
    """The autotuned launchers (GPU tiles, heuristics for the tails, grids from the config)
    run on the interpreter with their first config (of the short-sequence configs at 130)."""
    monkeypatch.setattr(attention_module, "TUNED_ON_CPU", True)
    q, k, v = _inputs(1, 2, 1, s, s, 16, torch.float32)
    o = T.attention(q, k, v, causal=causal)
    do = torch.randn_like(o)
    _check(o, torch.autograd.grad(o, (q, k, v), do), _ref(q, k, v, causal), do, torch.float32)


def _sm90_signature(kernel, cfg, d: int, causal: bool, bias: bool):
    f = tritonjit.function(kernel)
    t, lse = torch.empty(64, dtype=torch.bfloat16), torch.empty(64)
    s, h, hk = 4096, 32, 8
    qs, ks = (s * d * h, s * d, d), (s * d * hk, s * d, d)
    bs = (0, 0, s, 1) if bias else (0, 0, 0, 0)
    if kernel is attention_module._attn_fwd:
        args = (t, t, t, t, t, lse, 0.1, *qs, *ks, *ks, *bs, *qs, h * s, s, 1, h, 4, s, s)
    elif kernel is attention_module._bwd_dkdv:
        args = (t, t, t, t, t, lse, lse, t, t, 0.1, 0.1, *qs, *ks, *ks, *bs, *qs, h * s, s, 1, *ks, *ks, h, hk, 4, s, s)
    else:
        args = (t, t, t, t, t, lse, lse, t, 0.1, 0.1, *qs, *ks, *ks, *bs, *qs, h * s, s, 1, *qs, h, 4, s, s)
    meta = dict(cfg.kwargs, HEAD_DIM=d, CAUSAL=causal, HAS_BIAS=bias, EVEN_M=True, EVEN_N=not bias)
    return f, f.signature(*args, **meta)


@pytest.mark.parametrize("kernel", ["_attn_fwd", "_bwd_dkdv", "_bwd_dq"])
def test_every_config_cross_compiles_for_sm90(kernel):
    """Each tuned config of each kernel compiles for sm_90 within its shared memory (head
    dims 128 causal and 64 with a bias and a tail): compile errors show up without a GPU."""
    k = getattr(attention_module, kernel)
    configs = {"_attn_fwd": attention_module._FWD_CONFIGS, "_bwd_dkdv": attention_module._DKDV_CONFIGS,
               "_bwd_dq": attention_module._DQ_CONFIGS}[kernel]
    for cfg in configs:
        for d, causal, bias in ((128, True, False), (64, False, True)):
            f, sig = _sm90_signature(k, cfg, d, causal, bias)
            c = f.compile(sig, target="cuda:90", num_warps=cfg.num_warps, num_stages=cfg.num_stages)
            assert c.binary and c.shared <= 232448, (cfg, d, c.shared)


def test_refused_call_on_the_python_registrations(monkeypatch):
    """Without the C++ operator path, enable() replaces aten's kernels: a call the kernels
    refuse (head_dim 24) is computed by the torch-ops fallback, forward and backward."""
    monkeypatch.setattr(_native_ops, "module", lambda wait=False: None)
    monkeypatch.setattr(_native_ops, "on_ready", lambda callback: None)
    fallbacks = []
    math_forward = attention_module._math_forward
    monkeypatch.setattr(attention_module, "_math_forward", lambda *a: fallbacks.append(a[0].shape) or math_forward(*a))
    for d, causal in ((24, True), (16, False)):
        q, k, v = _inputs(1, 4, 2, 20, 20, d, torch.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with T.enable():
                assert T._registry.native_path().startswith("Python")
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                do = torch.randn_like(o)
                grads = torch.autograd.grad(o, (q, k, v), do)
        _check(o, grads, _ref(q, k, v, causal), do, torch.float32)
    assert fallbacks == [(1, 4, 20, 24)]  # the refused call only


def _layout(t):
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype)


@pytest.mark.parametrize("bshd", [True, False], ids=["bshd", "contiguous"])
@pytest.mark.parametrize("op", ["flash", "efficient", "cudnn", "cpu"])
def test_outputs_keep_aten_layouts(op, bshd):
    """Every routed op returns what aten's meta function says (shapes, strides, dtypes), for
    inputs laid out as models pass them (B, S, H, D) and contiguous, so torch.compile's
    traced graphs and aten's autograd formulas fit tritonjit's results."""
    q, k, v = (t.detach().transpose(1, 2).contiguous().transpose(1, 2) if bshd else t.detach()
               for t in _inputs(1, 4, 4, 20, 20, 16, torch.float32))
    a = torch.ops.aten
    fwd = {"flash": lambda q, k, v: a._scaled_dot_product_flash_attention(q, k, v, 0.0, True),
           "efficient": lambda q, k, v: a._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True),
           "cudnn": lambda q, k, v: a._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, True),
           "cpu": lambda q, k, v: a._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)}[op]

    def bwd(r, q, k, v):
        do = torch.ones(r[0].shape, dtype=r[0].dtype, device=r[0].device) if r[0].device.type == "meta" else ones
        if op == "flash":
            return a._scaled_dot_product_flash_attention_backward(do, q, k, v, r[0], r[1], None, None, 20, 20, 0.0,
                                                                  True, r[6], r[7])
        if op == "efficient":
            return a._scaled_dot_product_efficient_attention_backward(do, q, k, v, None, r[0], r[1], r[2], r[3],
                                                                      0.0, [True, True, True, False], True)[:3]
        if op == "cudnn":
            return a._scaled_dot_product_cudnn_attention_backward(do, q, k, v, r[0], r[1], r[6], r[7], None, None,
                                                                  None, 20, 20, 0.0, True)
        return a._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, r[0], r[1], 0.0, True)

    ones = torch.ones_like(q)  # outside the counted calls (ones_like is routed too)
    meta = [t.to("meta") for t in (q, k, v)]
    want_f = fwd(*meta)
    want_b = bwd(want_f, *meta)
    (got_f, got_b), d = _in_cpp(lambda: (lambda r: (r, bwd(r, q, k, v)))(fwd(q, k, v)))
    # the device overloads: plans recorded from the implementations; the CPU one: the implementations
    assert (d["python_calls"], d["launches"]) == ((2, 0) if op == "cpu" else (0, 4))
    for w, g in zip((*want_f[:2], *want_b), (*got_f[:2], *got_b)):
        assert _layout(g) == _layout(w)
