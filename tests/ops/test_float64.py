"""float64 at float64 precision, as aten's, on every path: under enable(), through the direct
entries (``tritonjit_ops.softmax(x)``) and through ``torch.ops.tritonjit``, forward and
gradients. The kernels that accumulate (softmax, the norms, the losses, the activations'
backwards, rotary, silu_and_mul) compute in aten's opmath type: float32 for 16- and 32-bit
inputs, float64 for float64 (they used to round float64 through float32: errors of
1e-7..1e-5). AdamW's float64 parameters step in float64 torch ops (its kernel takes its
hyperparameters as float32 scalars). The GPU variants run the same cases on CUDA."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import tritonjit_ops as T

F = torch.nn.functional
GPU = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                       reason="needs a CUDA GPU")])


def _cases(dev: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(4, 33, dtype=torch.float64, generator=g).to(dev) for _ in range(2))
    w, b = (torch.randn(33, dtype=torch.float64, generator=g).to(dev) for _ in range(2))
    t = torch.tensor([1, 0, 32, 5], device=dev)
    q, k, v = (torch.randn(1, 2, 5, 8, dtype=torch.float64, generator=g).to(dev) for _ in range(3))
    i = torch.tensor([[1, 3, 1], [0, 3, 3]], device=dev)
    e = torch.randn(6, 8, dtype=torch.float64, generator=g).to(dev)
    return {
        "softmax": (lambda a: torch.softmax(a, -1), [x]),
        "softmax_dim0": (lambda a: torch.softmax(a, 0), [x]),
        "log_softmax": (lambda a: torch.log_softmax(a, -1), [x]),
        "log_softmax_dtype": (lambda a: torch.log_softmax(a, -1, dtype=torch.float64), [x.float()]),
        "layer_norm": (lambda a, c, d: F.layer_norm(a, (33,), c, d), [x, w, b]),
        "group_norm": (lambda a: F.group_norm(a.view(4, 33, 1), 3), [x]),
        "rms_norm": (lambda a, c: F.rms_norm(a, (33,), c, 1e-6), [x, w]),
        "fused_rms_norm": (lambda a, c: torch.ops.aten._fused_rms_norm(a, [33], c, 1e-6)[0], [x, w]),
        "cross_entropy": (lambda a: F.cross_entropy(a, t), [x]),
        "nll_loss_weight": (lambda a: F.nll_loss(a, t, weight=w.abs()), [x]),
        "gelu": (lambda a: F.gelu(a), [x]),
        "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), [x]),
        "silu": (lambda a: F.silu(a), [x]),
        "tanh": (lambda a: torch.tanh(a), [x]),
        "sigmoid": (lambda a: torch.sigmoid(a), [x]),
        "embedding": (lambda a: F.embedding(i, a), [e]),
        "sdpa": (lambda a, c, d: F.scaled_dot_product_attention(a, c, d, is_causal=True), [q, k, v]),
        "sdpa_mask": (lambda a, c, d: F.scaled_dot_product_attention(a, c, d, attn_mask=y[:1, :25].view(5, 5)),
                      [q, k, v]),
        "mul_add": (lambda a, c: a * c + y, [x, y]),
        # float scalars beside float64 tensors (a kernel takes a float scalar as float32: these
        # calls go to aten unless float32 holds the value, as 0.5 and 2.0)
        "mul_scalar": (lambda a: a * 0.1 + 0.3 - a / 3.0, [x]),
        "exact_scalars": (lambda a: a * 0.5 + 2.0, [x]),
        "add_alpha": (lambda a, c: torch.add(a, c, alpha=0.1), [x, y]),
        "clamp": (lambda a: a.clamp(-0.1, 0.2), [x]),
        "leaky_relu": (lambda a: F.leaky_relu(a, 0.01), [x]),
        "where_scalar": (lambda a: torch.where(a > 0.1, a, 0.1), [x]),
        "masked_fill": (lambda a: a.masked_fill(a > 0.5, 0.1), [x]),
        "pad": (lambda a: F.pad(a, (1, 2), value=0.1), [x]),
        "pow_scalar": (lambda a: (a.abs() + 1) ** 1.1, [x]),
        "lerp": (lambda a, c: torch.lerp(a, c, 0.3), [x, y]),
        "full_arange": (lambda a: a + torch.full_like(a, 0.1) + torch.arange(0, 3.3, 0.1, dtype=a.dtype,
                                                                               device=a.device)[:33], [x]),
    }


def _direct_cases(dev: str = "cpu") -> dict:
    """(tritonjit's call, eager's call, inputs) per case: the direct entries and the
    ``torch.ops.tritonjit`` operators with float64 inputs."""
    g = torch.Generator().manual_seed(2)
    x, y, r = (torch.randn(4, 33, dtype=torch.float64, generator=g).to(dev) for _ in range(3))
    w, b = (torch.randn(33, dtype=torch.float64, generator=g).to(dev) for _ in range(2))
    x3 = torch.randn(2, 6, 3, 16, dtype=torch.float64, generator=g).to(dev)
    ang = torch.randn(6, 8, dtype=torch.float64, generator=g).to(dev)
    t = torch.tensor([1, 0, -100, 5], device=dev)
    ops = torch.ops.tritonjit

    def rotary_ref(a):
        c, s = ang.cos()[:, None], ang.sin()[:, None]
        return torch.cat([a[..., :8] * c - a[..., 8:] * s, a[..., 8:] * c + a[..., :8] * s], -1)

    cases = {
        "softmax": (lambda a: T.softmax(a, -1), lambda a: torch.softmax(a, -1), [x]),
        "softmax_dim0": (lambda a: T.softmax(a, 0), lambda a: torch.softmax(a, 0), [x]),
        "log_softmax": (lambda a: T.log_softmax(a, -1), lambda a: torch.log_softmax(a, -1), [x]),
        "layer_norm": (lambda a, c, d: T.layer_norm(a, (33,), c, d), lambda a, c, d: F.layer_norm(a, (33,), c, d),
                       [x, w, b]),
        "rms_norm": (lambda a, c: T.rms_norm(a, (33,), c, 1e-6), lambda a, c: F.rms_norm(a, (33,), c, 1e-6), [x, w]),
        "group_norm": (lambda a, c: T.group_norm(a.view(4, 3, 11), 3, c[:3], c[3:6]),
                       lambda a, c: F.group_norm(a.view(4, 3, 11), 3, c[:3], c[3:6]), [x, w]),
        "fused_add_rms_norm": (lambda a, d, c: torch.cat(T.fused_add_rms_norm(a, d, c, 1e-6)),
                               lambda a, d, c: torch.cat([F.rms_norm(a + d, (33,), c, 1e-6), a + d]), [x, r, w]),
        "cross_entropy_mean": (lambda a: T.cross_entropy(a, t), lambda a: F.cross_entropy(a, t), [x]),
        "cross_entropy_none": (lambda a: T.cross_entropy(a, t, reduction="none"),
                               lambda a: F.cross_entropy(a, t, reduction="none"), [x]),
        "silu_and_mul": (lambda a: T.silu_and_mul(a), lambda a: F.silu(a[:, :16]) * a[:, 16:32], [x[:, :32]]),
        "rotary_embedding": (lambda a: T.rotary_embedding(a, ang.cos(), ang.sin()), rotary_ref, [x3]),
        "gelu_tanh": (lambda a: T.gelu(a, approximate="tanh"), lambda a: F.gelu(a, approximate="tanh"), [x]),
        "silu": (lambda a: T.silu(a), F.silu, [x]),
        "ops.softmax": (lambda a: ops.softmax(a, -1), lambda a: torch.softmax(a, -1), [x]),
        "ops.layer_norm": (lambda a, c, d: ops.layer_norm(a, [33], c, d, 1e-5),
                           lambda a, c, d: F.layer_norm(a, (33,), c, d), [x, w, b]),
        "ops.rms_norm": (lambda a, c: ops.rms_norm(a, [33], c, 1e-6), lambda a, c: F.rms_norm(a, (33,), c, 1e-6),
                         [x, w]),
        "ops.cross_entropy": (lambda a: ops.cross_entropy(a, t), lambda a: F.cross_entropy(a, t), [x]),
        "mul_scalar": (lambda a: T.mul(a, 0.1), lambda a: a * 0.1, [x]),
        "add_alpha": (lambda a, c: T.add(a, c, alpha=0.1), lambda a, c: torch.add(a, c, alpha=0.1), [x, y]),
        "sub_alpha": (lambda a, c: T.sub(a, c, alpha=0.3), lambda a, c: torch.sub(a, c, alpha=0.3), [x, y]),
        "where_scalar": (lambda a: T.where(a > 0, a, 0.1), lambda a: torch.where(a > 0, a, 0.1), [x]),
        "pow_scalar": (lambda a: T.pow(a.abs() + 1, 1.1), lambda a: (a.abs() + 1) ** 1.1, [x]),
        "ops.mul_scalar": (lambda a: ops.mul(a, 0.1), lambda a: a * 0.1, [x]),
    }
    return cases


def _run(fn, inputs, enabled: bool) -> list[torch.Tensor]:
    leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in inputs]
    with T.enable() if enabled else _nothing():
        out = fn(*leaves)
        g = torch.Generator().manual_seed(1)
        cot = torch.randn(out.shape, dtype=out.dtype, generator=g).to(out.device)
        grads = torch.autograd.grad(out, [a for a in leaves if a.requires_grad], cot)
    return [out.detach(), *grads]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _compare(name: str, ref: list[torch.Tensor], got: list[torch.Tensor]) -> list[str]:
    bad = []
    for j, (r, o) in enumerate(zip(ref, got)):
        what = "forward" if j == 0 else f"gradient {j - 1}"
        if o.dtype != r.dtype:
            bad.append(f"{name} {what}: dtype {o.dtype}, eager {r.dtype}")
        elif not torch.allclose(o, r, rtol=1e-10, atol=1e-12):
            bad.append(f"{name} {what}: max error {(o - r).abs().max().item():.3g}")
    return bad


def mismatches(dev: str = "cpu") -> list[str]:
    bad = []
    for name, (fn, inputs) in _cases(dev).items():
        bad += _compare(name, _run(fn, inputs, False), _run(fn, inputs, True))
    return bad


def direct_mismatches(dev: str = "cpu") -> list[str]:
    bad = []
    for name, (fn, ref_fn, inputs) in _direct_cases(dev).items():
        bad += _compare(name, _run(ref_fn, inputs, False), _run(fn, inputs, False))
    return bad


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_float64_at_float64_precision(dev):
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)  # the C++ operator path, where it builds
    assert mismatches(dev) == []


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_direct_entries_and_ops_keep_float64(dev):
    """The direct entries and torch.ops.tritonjit compute float64 in float64 (forward and backward)."""
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)
    assert direct_mismatches(dev) == []


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_adamw_steps_float64_in_float64(dev):
    """tritonjit_ops.AdamW and adamw_step over a list mixing float64 and float32 parameters: the
    float64 ones match torch's fused AdamW at float64 precision, the float32 ones at float32's."""
    g = torch.Generator().manual_seed(3)
    ps = [torch.randn(50, dtype=torch.float64, generator=g), torch.randn(7, generator=g),
          torch.randn(3, 5, dtype=torch.float64, generator=g)]
    ref = [p.to(dev).clone().requires_grad_() for p in ps]
    got = [p.to(dev).clone().requires_grad_() for p in ps]
    o_ref = torch.optim.AdamW(ref, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.1, fused=True)
    o_got = T.AdamW(got, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.1)
    for _ in range(3):
        for a, c in zip(ref, got):
            a.grad = torch.randn(a.shape, dtype=a.dtype, generator=g).to(dev)
            c.grad = a.grad.clone()
        o_ref.step()
        o_got.step()
    for a, c in zip(ref, got):
        tol = dict(rtol=1e-12, atol=1e-14) if a.dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c.detach(), a.detach(), **tol)


def test_float64_at_float64_precision_python_path():
    """enable() on its Python registrations (TRITONJIT_OPS_NATIVE=0: as before the C++ path is built)."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path.insert(0, {here!r}); import test_float64 as m; "
            "print(m.mismatches() + m.direct_mismatches())")
    env = {**os.environ, "TRITONJIT_OPS_NATIVE": "0"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout[-3000:]


def test_float64_variants_cross_compile_for_sm90():
    """Triton's code generator, not only its interpreter, takes the float64 forms of the kernels
    (their accumulators and loop-carried values typed by a constexpr dtype): every float64
    variant the CPU cases above launched compiles for sm_90."""
    import importlib

    import tritonjit

    mismatches()
    direct_mismatches()
    names = ("softmax", "softmax_backward", "norm", "norm_backward", "loss", "loss_backward", "fused",
             "fused_backward", "pointwise_backward")
    compiled = []
    for mod in (importlib.import_module(f"tritonjit_ops.{n}") for n in names):
        for obj in vars(mod).values():
            if isinstance(obj, tritonjit.KernelFunction):
                for sig in sorted({v.signature for v in obj.variants() if "*fp64" in v.signature}):
                    ptx = obj.compile(sig, target="cuda:90").asm["ptx"]
                    assert ".f64" in ptx, (obj.name, sig)
                    compiled.append(obj.name)
    expected = {"_softmax_kernel", "_softmax_bwd_kernel", "_norm_kernel", "_norm_bwd_rows_kernel", "_col_sum_kernel",
                "_ce_rows_kernel", "_ce_reduce_kernel", "_ce_bwd_kernel", "_silu_mul_kernel", "_silu_mul_bwd_kernel",
                "_rotary_kernel", "_nll_kernel", "_nll_backward_kernel", "_act_bwd_kernel"}
    assert expected <= set(compiled), sorted(expected - set(compiled))


def _eps_cases(dev: str) -> dict:
    """Rows of near-zero variance, where eps decides rstd, and an eps float32 does not hold."""
    g = torch.Generator().manual_seed(4)
    eps = 1e-10
    x = (1e-7 * torch.randn(4, 33, dtype=torch.float64, generator=g)).to(dev)  # variance ~1e-14
    s = (1e-6 * torch.randn(4, 33, dtype=torch.float64, generator=g)).to(dev)  # mean square ~1e-12
    r = (1e-6 * torch.randn(4, 33, dtype=torch.float64, generator=g)).to(dev)
    w = torch.randn(33, dtype=torch.float64, generator=g).to(dev)
    ops = torch.ops.tritonjit
    return {
        "layer_norm": (lambda a, c: T.layer_norm(a, (33,), c, None, eps),
                       lambda a, c: F.layer_norm(a, (33,), c, None, eps), [x, w]),
        "rms_norm": (lambda a, c: T.rms_norm(a, (33,), c, eps), lambda a, c: F.rms_norm(a, (33,), c, eps), [s, w]),
        "group_norm": (lambda a: T.group_norm(a.view(4, 3, 11), 3, eps=eps),
                       lambda a: F.group_norm(a.view(4, 3, 11), 3, eps=eps), [x]),
        "fused_add_rms_norm": (lambda a, d: torch.cat(T.fused_add_rms_norm(a, d, None, eps)),
                               lambda a, d: torch.cat([F.rms_norm(a + d, (33,), None, eps), a + d]), [s, r]),
        "ops.layer_norm": (lambda a, c: ops.layer_norm(a, [33], c, None, eps),
                           lambda a, c: F.layer_norm(a, (33,), c, None, eps), [x, w]),
        "ops.rms_norm": (lambda a, c: ops.rms_norm(a, [33], c, eps), lambda a, c: F.rms_norm(a, (33,), c, eps),
                         [s, w]),
    }


@pytest.mark.parametrize("dev", ["cpu", GPU])
def test_norm_eps_reaches_float64_kernels_as_float64(dev):
    """A norm's eps is a float64 kernel parameter (annotated tl.float64: Triton passes a Python
    float as float32), read in the math type: on rows where eps decides rstd, an eps of 1e-10
    gives aten's float64 results and gradients (float32's 1e-10 is 3e-8 off: errors of 1e-10
    here). The interpreter passes a float argument in its parameter's type too (fp32 unless
    annotated), so both variants would show the defect."""
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)
    bad = []
    for name, (fn, ref_fn, inputs) in _eps_cases(dev).items():
        bad += _compare(name, _run(ref_fn, inputs, False), _run(fn, inputs, False))
    assert bad == []


def test_norm_eps_parameter_is_float64_and_fp32_math_stays_fp32():
    """The norm kernels' eps parameter is fp64 in every variant's signature, and an fp32
    variant converts it to fp32 where it reads it: its code for sm_90 has no float64
    arithmetic (eps added in fp64 would carry rstd and the output through float64)."""
    import re

    from tritonjit_ops import norm, norm_backward

    x = torch.randn(4, 33, requires_grad=True)
    T.layer_norm(x.detach(), (33,), None, None, 1e-5)  # a forward variant
    T.rms_norm(x, (33,), None, 1e-6).sum().backward()  # and a backward's
    seen = 0
    for k in (norm._norm, norm_backward._norm_bwd_rows):
        for v in k.variants():
            params = v.signature.split(",")
            assert "fp64" in params, (k.name, v.signature)
            if v.signature.startswith("*fp32"):
                ptx = k.compile(v.signature, target="cuda:90").asm["ptx"]
                arith = re.findall(r"\b(?:add|sub|mul|div|fma|sqrt|rsqrt)\.\S*f64", ptx)
                assert arith == [], (k.name, v.signature, arith[:5])
                seen += 1
    assert seen >= 2


def test_float64_with_an_inexact_float_scalar_goes_to_aten():
    """x64 * 0.1 under enable() is aten's call (float32 does not hold 0.1); x64 * 0.5 and a
    float32 tensor times 0.1 stay on tritonjit's kernels."""
    from _util import native_ops_or_skip, routed

    native_ops_or_skip()
    x64 = torch.randn(64, dtype=torch.float64)
    for fn, aten in ((lambda: torch.mul(x64, 0.1), 1), (lambda: torch.mul(x64, 0.5), 0),
                     (lambda: torch.mul(x64.float(), 0.1), 0)):
        got, d = routed(fn, ["mul.Tensor", "mul.Scalar"])
        assert torch.equal(got, fn())
        assert d["aten_calls"] == aten, d


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_plans_follow_the_default_dtype(device):
    """A result type that depends on the default dtype (an int tensor times a float, an int
    division, a factory) follows torch.set_default_dtype: the C++ path's plan key holds the
    default dtype (a plan made under float32 once served the same call after the switch to
    float64, with a float32 result)."""
    from _util import native_ops_or_skip

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    native_ops_or_skip()
    x = torch.arange(5, device=device)
    calls = (lambda: x * 0.5, lambda: x / 3, lambda: torch.arange(0, 1, 0.25, device=device))
    before = torch.get_default_dtype()
    try:
        for dtype in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(dtype)
            refs = [fn() for fn in calls]
            with T.enable(wait_native=True):
                got = [fn() for fn in calls]
            for g, r in zip(got, refs):
                assert g.dtype == r.dtype == dtype and torch.equal(g, r), (dtype, g, r)
    finally:
        torch.set_default_dtype(before)
