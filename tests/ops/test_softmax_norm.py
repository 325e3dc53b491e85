import pytest
import torch
import torch.nn.functional as F
import tritonjit_ops as T
from _util import FLOATS, close


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
