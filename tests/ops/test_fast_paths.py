"""The cached hot paths (plan per shape) agree with torch on the cases that pick
them and on neighbours that must not reuse a plan (other dim, dtype, weight layout)."""
import pytest
import torch
import tritonjit_ops as T
from _util import close

F = torch.nn.functional


def test_softmax_plans_keyed_by_dim_and_dtype():
    x = torch.randn(3, 5, 7)
    for dim in (-1, 0, 1, 2, [1]):
        close(T.softmax(x, dim), torch.softmax(x, dim if isinstance(dim, int) else dim[0]))
    close(T.log_softmax(x, 1), torch.log_softmax(x, 1))
    close(T.softmax(x.half(), 1), torch.softmax(x.half(), 1))  # same shape, other dtype
    with pytest.raises(IndexError):
        T.softmax(x, 3)
    with pytest.raises(TypeError, match="softmax"):
        T.softmax(x.to(torch.int32), 0)


def test_row_norms_with_and_without_affine():
    x, w, b = torch.randn(4, 33), torch.randn(33), torch.randn(33)
    close(T.rms_norm(x, (33,), w, 1e-6), F.rms_norm(x, (33,), w, 1e-6))
    close(T.rms_norm(x, [33], None), F.rms_norm(x, [33], None))
    close(T.rms_norm(x.bfloat16(), (33,), w.bfloat16()), F.rms_norm(x.bfloat16(), (33,), w.bfloat16()))
    close(T.layer_norm(x, (33,), w, b), F.layer_norm(x, (33,), w, b))
    close(T.layer_norm(x, (33,), w, None), F.layer_norm(x, (33,), w, None))
    close(T.layer_norm(x, (33,)), F.layer_norm(x, (33,)))
    with pytest.raises(RuntimeError, match="weight"):
        T.rms_norm(x, (33,), torch.randn(32))
    with pytest.raises(RuntimeError, match="normalized_shape"):
        T.layer_norm(x, (32,), None, None)
    assert T.rms_norm(torch.empty(0, 33), (33,), w).shape == (0, 33)


def test_binary_and_unary_fast_paths():
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    close(T.sub(x, y), x - y)
    close(T.sub(x, y, alpha=2), x - 2 * y)
    close(T.gelu(x, "tanh"), F.gelu(x, approximate="tanh"))
    with pytest.raises(RuntimeError, match="size of tensor"):
        T.add(x, torch.randn(8, 2))  # same numel, other shape: no flat launch
    assert T.mul(torch.empty(0), torch.empty(0)).shape == (0,)


def test_silu_and_mul_split_and_pair():
    g, u = torch.randn(3, 2, 10), torch.randn(3, 2, 10)
    close(T.silu_and_mul(g), F.silu(g[..., :5]) * g[..., 5:])
    close(T.silu_and_mul(g, u), F.silu(g) * u)
    with pytest.raises(RuntimeError, match="even"):
        T.silu_and_mul(torch.randn(2, 5))
    with pytest.raises(TypeError, match="dtype"):
        T.silu_and_mul(g, u.double())
