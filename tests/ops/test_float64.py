"""float64 under enable(): results at float64 precision, as aten's. The kernels of softmax,
log_softmax, the norms, nll_loss and the activations' backwards compute in float32 (they
gave float64 calls float32-accurate results, errors of 1e-7..1e-5), so enable() leaves
those float64 calls to aten (_registry.FP32_MATH); embedding's backward accumulates
float64 in float64; the Python path's torch-ops attention fallback, the CPU SDPA
logsumexp and _fused_rms_norm_backward (no aten CPU kernel) keep float64 in float64."""
from __future__ import annotations

import os
import subprocess
import sys

import torch
import tritonjit_ops as T

F = torch.nn.functional


def _cases() -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 33, dtype=torch.float64, generator=g)
    y = torch.randn(4, 33, dtype=torch.float64, generator=g)
    w = torch.randn(33, dtype=torch.float64, generator=g)
    b = torch.randn(33, dtype=torch.float64, generator=g)
    t = torch.tensor([1, 0, 32, 5])
    q, k, v = (torch.randn(1, 2, 5, 8, dtype=torch.float64, generator=g) for _ in range(3))
    i = torch.tensor([[1, 3, 1], [0, 3, 3]])
    e = torch.randn(6, 8, dtype=torch.float64, generator=g)
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
    }


def _run(fn, inputs, enabled: bool) -> list[torch.Tensor]:
    leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in inputs]
    with T.enable() if enabled else _nothing():
        out = fn(*leaves)
        g = torch.Generator().manual_seed(1)
        cot = torch.randn(out.shape, dtype=out.dtype, generator=g)
        grads = torch.autograd.grad(out, [a for a in leaves if a.requires_grad], cot)
    return [out.detach(), *grads]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def mismatches() -> list[str]:
    bad = []
    for name, (fn, inputs) in _cases().items():
        ref = _run(fn, inputs, False)
        got = _run(fn, inputs, True)
        for j, (r, o) in enumerate(zip(ref, got)):
            what = "forward" if j == 0 else f"gradient {j - 1}"
            if o.dtype != r.dtype:
                bad.append(f"{name} {what}: dtype {o.dtype}, eager {r.dtype}")
            elif not torch.allclose(o, r, rtol=1e-10, atol=1e-12):
                bad.append(f"{name} {what}: max error {(o - r).abs().max().item():.3g}")
    return bad


def test_float64_at_float64_precision():
    from tritonjit_ops import _native_ops

    _native_ops.module(wait=True)  # the C++ operator path, where it builds
    assert mismatches() == []


def test_float64_at_float64_precision_python_path():
    """enable() on its Python registrations (TRITONJIT_OPS_NATIVE=0: as before the C++ path is built)."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import test_float64 as m; print(m.mismatches())"
    env = {**os.environ, "TRITONJIT_OPS_NATIVE": "0"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout[-3000:]
