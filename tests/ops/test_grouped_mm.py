"""aten::_grouped_mm (MoE experts): its four forms against aten's kernel, the backward
through aten's formula (which calls the other forms), the calls left to aten, and a
transformers MoE model under enable()."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, tiny_model
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


def test_empty_groups_and_an_empty_k_split_give_zeros():
    a, dy = torch.randn(0, K), torch.randn(0, N)
    got = grouped_mm(a.t(), dy, _offs(0, 0, 0))
    assert got.shape == (3, K, N) and not got.any()
    a, dy = torch.randn(20, K), torch.randn(20, N)
    got = grouped_mm(a.t(), dy, _offs(0, 20, 20))
    assert not got[0].any() and not got[2].any()
    close(got[1], a.t() @ dy, rtol=1e-4, atol=1e-4)


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

    offs = torch.tensor([100, 100, 700, 800, 1200, 1500, 1900, 2048], dtype=torch.int32, device="cuda")
    args = {"2d x 3d": (r(2048, 1024), r(8, 2048, 1024).transpose(-2, -1), offs),
            "2d x 2d": (r(2048, 1024).t(), r(2048, 512), offs),
            "3d x 3d": (r(8, 256, 1024), r(8, 1024, 512)),
            "3d x 2d": (r(8, 256, 1024), r(1024, 2048), offs)}[form]
    want = _loop_reference(*args)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with T.enable(include=["_grouped_mm"]):
            got = torch._grouped_mm(*args)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-1)
    try:
        aten = torch._grouped_mm(*args)
    except RuntimeError:  # a layout aten's CUDA kernel does not take
        return
    torch.testing.assert_close(got, aten, rtol=2e-2, atol=2e-1)
