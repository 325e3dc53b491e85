"""aten::_grouped_mm (MoE experts): its four forms against aten's kernel, the backward
through aten's formula (which calls the other forms), the calls left to aten, and a
transformers MoE model under enable()."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, tiny_model
from tritonjit_ops import grouped_mm as gm
from tritonjit_ops._audit import _count_launches
from tritonjit_ops.grouped_mm import grouped_mm

K, N = 32, 48
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}


def _offs(*ends: int) -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32)


def _cases(dtype: torch.dtype) -> list[tuple[str, tuple, int]]:
    """(form, arguments, rows of the result that aten defines) per form; groups of 0 rows,
    tiles that straddle group boundaries, a transposed weight (nn.Linear's layout)."""
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    a, w = r(70, K), r(4, K, N)
    return [("2d x 3d", (a, w, _offs(10, 10, 45, 64)), 64),
            ("2d x 3d, mat2 transposed", (a, r(4, N, K).transpose(-2, -1), _offs(0, 33, 33, 70)), 70),
            ("2d x 2d (split K)", (a.t(), r(70, N), _offs(10, 10, 45, 70)), -1),
            ("3d x 3d", (r(4, 24, K), w), -1),
            ("3d x 2d (split N)", (r(4, 24, K), r(K, 64), _offs(16, 16, 40, 64)), -1)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_every_form_matches_aten(dtype):
    for form, args, rows in _cases(dtype):
        want = torch._grouped_mm(*args)
        got = grouped_mm(*args)
        assert got.shape == want.shape and got.dtype == want.dtype, form
        if rows >= 0:  # rows past the last offset are not defined (neither kernel writes them)
            got, want = got[:rows], want[:rows]
        torch.testing.assert_close(got, want, **TOL[dtype], msg=lambda m, f=form: f"{f}: {m}")


def test_routed_forward_and_backward_match_aten():
    """Under enable() the forward and both gradients (aten's formula: the 2d x 3d form with
    the weight transposed, and the 2d x 2d form) run tritonjit's kernel: three launches."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, K, generator=g, requires_grad=True)
    w = torch.randn(4, K, N, generator=g, requires_grad=True)
    offs, dy = _offs(10, 10, 45, 64), torch.randn(64, N, generator=g)
    want = torch._grouped_mm(a, w, offs)
    want_g = torch.autograd.grad(want, (a, w), dy)
    with T.enable(include=["_grouped_mm"]), _count_launches() as launches:
        got = torch._grouped_mm(a, w, offs)
        got_g = torch.autograd.grad(got, (a, w), dy)
    assert launches[0] == 3
    close(got.detach(), want.detach(), rtol=1e-4, atol=1e-4)
    for x, y in zip(got_g, want_g):
        close(x, y, rtol=1e-4, atol=1e-4)


def test_calls_it_does_not_take_go_to_aten_and_errors_are_atens():
    a, w, offs = torch.randn(64, K), torch.randn(4, K, N), _offs(10, 10, 45, 64)
    with pytest.raises(NotImplementedError, match="_grouped_mm: a bias; aten's kernel serves"):
        grouped_mm(a, w, offs, bias=torch.randn(4, N))
    with pytest.raises(NotImplementedError, match="out_dtype"):
        grouped_mm(a.bfloat16(), w.bfloat16(), offs, out_dtype=torch.float32)
    with pytest.raises(RuntimeError, match="offs must be int32"):
        grouped_mm(a, w, offs.long())
    with pytest.raises(RuntimeError, match="offs has 3 groups, the 3D operand 4"):
        grouped_mm(a, w, offs[:3])
    with pytest.raises(RuntimeError, match="contraction dims differ"):
        grouped_mm(a[:, :16], w, offs)
    with T.enable(include=["_grouped_mm"]), _count_launches() as launches:  # aten's kernel, and its error
        with pytest.raises(RuntimeError, match="Float32, BFloat16 or Float16"):
            torch._grouped_mm(a.double(), w.double(), offs)
    assert launches[0] == 0


def test_the_cpp_path_plans_each_layout_once_and_launches_without_python():
    """Under enable() a call takes the C++ operator path: one plan per layout (every form),
    then one launch a call with no trip to Python, the group sizes free to change between
    calls (they stay on the device); aten's result each time."""
    from _util import native_ops_or_skip, stats_delta

    native = native_ops_or_skip()
    g = torch.Generator().manual_seed(2)
    a, w, x3 = torch.randn(64, K, generator=g), torch.randn(4, K, N, generator=g), torch.randn(4, 16, K, generator=g)
    calls = [(a, w, _offs(10, 10, 45, 64)), (a, w.transpose(-2, -1).contiguous().transpose(-2, -1), _offs(0, 30, 31, 64)),
             (a.t(), torch.randn(64, N, generator=g), _offs(20, 20, 50, 64)), (x3, w)]
    wants = [torch._grouped_mm(*args) for args in calls]
    with T.enable(include=["_grouped_mm"], wait_native=True):
        assert T._registry.native_path() == "C++"
        for args in calls:
            torch._grouped_mm(*args)  # plans the layout
        for args, want in zip(calls, wants):
            before = native.stats()
            got = torch._grouped_mm(*args)
            d = stats_delta(before, native.stats())
            assert (d["plan_hits"], d["launches"], d["python_calls"], d["plans_made"]) == (1, 1, 0, 0), d
            close(got, want, rtol=1e-4, atol=1e-4)
        moved = (a, w, _offs(64, 64, 64, 64))  # another routing of the same layout: the same plan
        before = native.stats()
        got = torch._grouped_mm(*moved)
        assert stats_delta(before, native.stats())["plans_made"] == 0
        close(got, a @ w[0], rtol=1e-4, atol=1e-4)


def test_aten_serves_where_it_measured_faster(monkeypatch):
    """The measured policy: a product from COMPARE_MIN_WORK multiply-adds (fp32: from
    COMPARE_MIN_WORK_FP32) or COMPARE_MIN_OUT outputs is timed once per layout, tritonjit's kernel against aten's, and the
    faster serves that layout from then on; smaller ones are not timed; the environment
    forces either; clear_decisions forgets. (Meta tensors and a replaced timer: no GPU.)"""
    times: list[float] = []
    timed: list[int] = []

    def fake_time(fn):
        timed.append(1)
        return times.pop(0)

    monkeypatch.setattr(gm, "_time", fake_time)
    monkeypatch.setenv("TRITONJIT_OPS_GROUPED_MM_ATEN", "auto")
    gm.clear_decisions()

    def call(dtype, rows, k, n):
        a = torch.empty(rows, k, dtype=dtype, device="meta")
        b = torch.empty(8, k, n, dtype=dtype, device="meta")
        offs = torch.empty(8, dtype=torch.int32, device="meta")
        return gm.aten_serves(gm._Form(gm._ROWS, 8, rows, n, k), a, b, offs)

    big = (torch.bfloat16, 1024, 1024, 1024)  # 2^30 multiply-adds: timed
    times[:] = [2.0, 1.0]  # tritonjit's time, then aten's
    assert call(*big) is True and len(timed) == 2
    assert call(*big) is True and len(timed) == 2  # decided: not timed again
    assert call(torch.bfloat16, 1024, 1024, 1023) is False and len(timed) == 2  # under the bound
    times[:] = [1.0, 1.0]
    assert call(torch.float32, 256, 256, 256) is False and len(timed) == 4  # fp32: timed from 2^24; a tie is ours
    times[:] = [2.0, 1.0]  # a weight gradient of 16 tokens: 2^25 multiply-adds, but 2^24 outputs: timed
    dy, h = (torch.empty(16, c, dtype=torch.bfloat16, device="meta") for c in (4096, 512))
    kform = gm._Form(gm._KSPLIT, 8, 4096, 512, 16)
    assert gm.aten_serves(kform, dy.t(), h, torch.empty(8, dtype=torch.int32, device="meta")) is True
    assert len(timed) == 6 and not gm.timed(kform._replace(n=511), torch.bfloat16)
    monkeypatch.setenv("TRITONJIT_OPS_GROUPED_MM_ATEN", "never")
    assert call(*big) is False
    monkeypatch.setenv("TRITONJIT_OPS_GROUPED_MM_ATEN", "always")
    assert call(torch.bfloat16, 16, 16, 16) is True
    monkeypatch.setenv("TRITONJIT_OPS_GROUPED_MM_ATEN", "auto")
    gm.clear_decisions()
    times[:] = [1.0, 2.0]
    assert call(*big) is False and len(timed) == 8
    a = torch.randn(64, K)
    assert gm.aten_serves(gm._check(a, torch.randn(4, K, N), _offs(1, 2, 3, 64), None, None), a, a, None) is False
    assert len(timed) == 8  # never timed on the CPU


def test_aten_is_timed_only_where_its_kernel_takes_the_group_boundaries():
    """aten's CUDA kernel asserts on the device where groups split a contiguous axis at
    boundaries off 16 bytes (which would end the process): such a call is not timed and
    tritonjit's kernel serves it; split axes that are not contiguous take any boundary."""
    x3, w2 = torch.randn(4, 16, K).bfloat16(), torch.randn(K, 64).bfloat16()  # 3d x 2d: out's columns split
    form = gm._check(x3, w2, _offs(8, 24, 40, 64), None, None)
    assert gm._aten_takes(form, x3, w2, _offs(8, 24, 40, 64))
    assert not gm._aten_takes(form, x3, w2, _offs(8, 20, 40, 64))
    a, w = torch.randn(64, K).bfloat16(), torch.randn(4, K, N).bfloat16()  # 2d x 3d: rows of a row-major self
    assert gm._aten_takes(gm._check(a, w, _offs(1, 2, 3, 64), None, None), a, w, _offs(1, 2, 3, 64))
    at = torch.randn(K, 64).bfloat16().t()  # a column-major self: its rows are contiguous
    assert not gm._aten_takes(gm._check(at, w, _offs(1, 2, 3, 64), None, None), at, w, _offs(1, 2, 3, 64))
    dy, h = torch.randn(64, K).bfloat16(), torch.randn(64, N).bfloat16()  # the weight gradient: K split
    assert gm._aten_takes(gm._check(dy.t(), h, _offs(1, 2, 3, 64), None, None), dy.t(), h, _offs(1, 2, 3, 64))
    kc = dy.t().contiguous()  # K-contiguous self
    assert not gm._aten_takes(gm._check(kc, h, _offs(1, 2, 3, 64), None, None), kc, h, _offs(1, 2, 3, 64))


def test_a_layout_aten_serves_runs_atens_kernel_on_both_paths(monkeypatch):
    """Where the policy chose aten's kernel, the C++ path passes the call on to it (no launch)
    and the Python path refuses it (aten's kernel through the fallback); the audit counts it as
    a measured choice, not a missing kernel."""
    from _util import native_ops_or_skip, stats_delta
    from tritonjit_ops import _audit

    native = native_ops_or_skip()
    monkeypatch.setenv("TRITONJIT_OPS_GROUPED_MM_ATEN", "always")
    g = torch.Generator().manual_seed(4)
    args = (torch.randn(64, K, generator=g), torch.randn(4, K, N, generator=g), _offs(10, 10, 45, 64))
    want = torch._grouped_mm(*args)
    gm.clear_decisions()
    try:
        with T.enable(include=["_grouped_mm"], wait_native=True):
            before = native.stats()
            got = torch._grouped_mm(*args)
            d = stats_delta(before, native.stats())
            assert d["aten_calls"] == 1 and d["launches"] == 0, d
            _, cov = _audit.coverage(lambda: torch._grouped_mm(*args), include=["_grouped_mm"])
        assert cov["policy_calls"] == cov["covered_calls"] == 1, cov
        close(got, want, rtol=0, atol=0)
        with pytest.raises(NotImplementedError, match="measured faster"):
            gm.routed(*args)
    finally:
        gm.clear_decisions()


def test_empty_groups_and_an_empty_k_split_give_zeros():
    a, dy = torch.randn(0, K), torch.randn(0, N)
    got = grouped_mm(a.t(), dy, _offs(0, 0, 0))
    assert got.shape == (3, K, N) and not got.any()
    a, dy = torch.randn(20, K), torch.randn(20, N)
    got = grouped_mm(a.t(), dy, _offs(0, 20, 20))
    assert not got[0].any() and not got[2].any()
    close(got[1], a.t() @ dy, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", ["2d x 3d", "3d x 2d"])
def test_many_uneven_groups_find_their_tiles(form):
    """37 groups (the group scan has 64 lanes, 27 of them masked),
    of 0 to 70 rows (or columns): empty runs, groups smaller than a tile, exactly a tile,
    straddling two, and rows past the last offset. Every program finds its group and its
    tile; a program past the last tile writes nothing."""
    g = torch.Generator().manual_seed(3)
    sizes = torch.randint(0, 71, (37,), generator=g)
    sizes[[0, 5, 6, 7, 36]] = 0
    sizes[[1, 2]] = torch.tensor([32, 33])  # the interpreter's tile is 32
    ends = sizes.cumsum(0).to(torch.int32)
    total = int(ends[-1])
    if form == "2d x 3d":
        args = (torch.randn(total + 9, K, generator=g), torch.randn(37, K, N, generator=g), ends)
    else:
        args = (torch.randn(37, 24, K, generator=g), torch.randn(K, total + 9, generator=g), ends)
    want = _loop_reference(*args)
    got = grouped_mm(*args)
    if form == "2d x 3d":
        got, want = got[:total], want[:total]
    else:
        got, want = got[:, :total], want[:, :total]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


_SM90 = {"2d x 3d": ((8192, 4096), (8192, 1, 1), (8, 4096, 28672), (117440512, 1, 4096), (8192, 28672), 8),
         "2d x 3d, weight N-major": ((32768, 2048), (2048, 1, 1), (128, 2048, 768), (1572864, 768, 1),
                                     (32768, 768), 128),
         "2d x 2d": ((768, 32768), (1, 768, 1), (32768, 2048), (2048, 1, 1), (128, 768, 2048), 128),
         "3d x 3d": ((8, 512, 1024), (524288, 1024, 1), (8, 1024, 512), (524288, 512, 1), (8, 512, 512), 8),
         "3d x 2d": ((8, 512, 1024), (524288, 1024, 1), (1024, 4096), (4096, 1, 1), (512, 4096), 8)}


@pytest.mark.parametrize("form", sorted(_SM90))
def test_gpu_tiles_cross_compile_for_sm90(form):
    """The launch a GPU call of MoE size gets (its tile, warps and stages) compiles for sm_90
    within the shared memory of a block, with the products on the tensor cores (wgmma)."""
    a_shape, a_strides, b_shape, b_strides, out_shape, groups = _SM90[form]
    a = torch.empty_strided(a_shape, a_strides[-len(a_shape):], dtype=torch.bfloat16, device="meta")
    b = torch.empty_strided(b_shape, b_strides[-len(b_shape):], dtype=torch.bfloat16, device="meta")
    out = torch.empty(out_shape, dtype=torch.bfloat16, device="meta")
    offs = torch.empty(groups, dtype=torch.int32, device="meta") if a.dim() + b.dim() < 6 else None
    mode = gm._MODES[(a.dim(), b.dim())]
    form_ = gm._Form(mode, groups, a.shape[-2], b.shape[-1], a.shape[-1])
    _, args, meta = gm.launch_args(a, b, offs, out, form_, on_gpu=True)
    warps, stages = meta.pop("num_warps"), meta.pop("num_stages")
    # TMA descriptors too, where a group's operands start 16-byte aligned (not 3d x 2d: its
    # groups split mat2's contiguous axis)
    for tma in (False, True) if form != "3d x 2d" else (False,):
        sig = gm._grouped_mm.signature(*args, **dict(meta, TMA=tma))
        c = gm._grouped_mm.compile(sig, target="cuda:90", num_warps=warps, num_stages=stages)
        assert c.binary and c.shared <= 232448, (form, meta, c.shared)
        assert "wgmma" in c.asm["ptx"], form
        assert ("cp.async.bulk.tensor" in c.asm["ptx"]) == tma, form


_LLAMA = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
_MOE = {"mixtral": ("MixtralForCausalLM", "MixtralConfig", dict(_LLAMA, num_local_experts=4, num_experts_per_tok=2)),
        "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", dict(_LLAMA, num_experts=4, num_experts_per_tok=2,
                                                                    moe_intermediate_size=32, head_dim=8))}


@pytest.mark.parametrize("name", sorted(_MOE))
def test_moe_model_training_step_runs_its_experts_here(name):
    """A transformers MoE model's training step with only _grouped_mm routed (the
    interpreter): its experts' products, forward and backward, launch tritonjit's kernel, and
    logits and gradients match eager's."""
    model = tiny_model(*_MOE[name], attn="sdpa")
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(0))
    params = [p for p in model.parameters() if p.requires_grad]
    ref = model(input_ids=ids).logits
    ref_g = torch.autograd.grad(ref.square().mean(), params, allow_unused=True)
    with T.enable(include=["_grouped_mm"]), _count_launches() as launches:
        got = model(input_ids=ids).logits
        got_g = torch.autograd.grad(got.square().mean(), params, allow_unused=True)
    if launches[0] == 0:
        pytest.skip(f"{name}: this transformers' experts do not call aten::_grouped_mm")
    close(got.detach(), ref.detach(), rtol=1e-4, atol=1e-5)
    for x, y in zip(got_g, ref_g):
        assert (x is None) == (y is None)
        if x is not None:
            close(x, y, rtol=1e-3, atol=1e-5)


def _loop_reference(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None) -> torch.Tensor:
    """_grouped_mm by its definition, one fp32 product per group (reads offs on the host)."""
    a32, b32 = a.float(), b.float()
    if offs is None:
        return torch.bmm(a32, b32)
    ends = offs.tolist()
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        out = torch.zeros(a.shape[0], b.shape[2], device=a.device)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a32[s:e] @ b32[g]
    elif a.dim() == 3:
        out = torch.zeros(a.shape[1], b.shape[1], device=a.device)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a32[g] @ b32[:, s:e]
    else:
        out = torch.stack([a32[:, s:e] @ b32[s:e] for s, e in zip(starts, ends)])
    return out


def test_the_loop_reference_is_atens_definition():
    for form, args, rows in _cases(torch.float32):
        want = torch._grouped_mm(*args)
        rows = rows if rows >= 0 else want.shape[0]
        torch.testing.assert_close(_loop_reference(*args)[:rows], want[:rows], rtol=1e-4, atol=1e-4,
                                   msg=lambda m, f=form: f"{f}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["2d x 3d", "2d x 2d", "3d x 3d", "3d x 2d"])
def test_gpu_grouped_mm_matches_its_definition_in_bf16(form):
    """MoE-sized products (8 experts, 2048 routed tokens, uneven groups, one empty) on the
    device: against the definition (and aten's kernel where it takes the layout), and
    without a host sync (the groups stay on the device)."""
    g = torch.Generator(device="cuda").manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", generator=g).bfloat16()

    # 3d x 2d: aten's kernel takes only groups of whole 16-byte columns (it asserts on the device)
    ends = [104, 104, 704, 800, 1200, 1504, 1904, 2048] if form == "3d x 2d" else [100, 100, 700, 800, 1200, 1500,
                                                                                   1900, 2048]
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    args = {"2d x 3d": (r(2048, 1024), r(8, 2048, 1024).transpose(-2, -1), offs),
            "2d x 2d": (r(2048, 1024).t(), r(2048, 512), offs),
            "3d x 3d": (r(8, 256, 1024), r(8, 1024, 512)),
            "3d x 2d": (r(8, 256, 1024), r(1024, 2048), offs)}[form]
    want = _loop_reference(*args)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:  # tritonjit's kernel, whatever the measured policy would choose (timing synchronizes)
        with T.enable(include=["_grouped_mm"]), _policy_env("never"):
            got = torch._grouped_mm(*args)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-1)
    try:
        aten = torch._grouped_mm(*args)
    except RuntimeError:  # a layout aten's CUDA kernel does not take
        return
    torch.testing.assert_close(got, aten, rtol=2e-2, atol=2e-1)


@pytest.mark.gpu
def test_gpu_measured_policy_decides_once_and_then_never_syncs():
    """On the device, enable()'s default: the first call of a large layout times both kernels
    (and synchronizes), and every later call of the layout, other group sizes included, is
    served by the chosen kernel without a host sync and with aten's result."""
    from tritonjit_ops import _native_ops

    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(4096, 1024, device="cuda", generator=g).bfloat16()
    w = torch.randn(8, 2048, 1024, device="cuda", generator=g).bfloat16().transpose(-2, -1)
    offs = [torch.tensor(e, dtype=torch.int32, device="cuda") for e in
            ([400, 400, 1400, 1600, 2400, 3000, 3800, 4096], [512 * (i + 1) for i in range(8)])]
    gm.clear_decisions()
    with T.enable(wait_native=True), _policy_env("auto"):
        assert "_grouped_mm" in T.default_ops()
        torch._grouped_mm(x, w, offs[0])  # decides
        decided = dict(gm._decided)
        assert len(decided) == 1
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = [torch._grouped_mm(x, w, o) for o in offs]
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert gm._decided == decided
    print(f"aten serves: {next(iter(decided.values()))}; C++ path: {_native_ops.stats()}")
    for o, y in zip(offs, got):
        torch.testing.assert_close(y, torch._grouped_mm(x, w, o), rtol=2e-2, atol=2e-1)
    gm.clear_decisions()


class _policy_env:
    """TRITONJIT_OPS_GROUPED_MM_ATEN set for a block, the decisions forgotten on both sides."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        import os

        self.old = os.environ.get("TRITONJIT_OPS_GROUPED_MM_ATEN")
        os.environ["TRITONJIT_OPS_GROUPED_MM_ATEN"] = self.mode
        gm.clear_decisions()

    def __exit__(self, *exc: object) -> None:
        import os

        if self.old is None:
            os.environ.pop("TRITONJIT_OPS_GROUPED_MM_ATEN", None)
        else:
            os.environ["TRITONJIT_OPS_GROUPED_MM_ATEN"] = self.old
        gm.clear_decisions()
