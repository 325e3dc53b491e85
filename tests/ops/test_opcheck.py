"""``torch.library.opcheck`` over every ``torch.ops.tritonjit`` operator: the schema is
what the kernel does (no undeclared mutation or aliasing), the fake (meta) kernel gives
the real kernel's shapes, dtypes and strides, the autograd registration covers every
differentiable input, and AOTAutograd traces the op with dynamic shapes, as
``torch.compile`` does. A new operator without a sample here fails the completeness test.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from tritonjit_ops import _registry

tj = torch.ops.tritonjit


def _samples(dev: str) -> dict[str, Callable[[], tuple[tuple, dict[str, Any]]]]:
    """op (``name.overload``) -> its arguments: broadcast, keepdim, scalar and batched mixes."""
    g = torch.Generator().manual_seed(0)

    def r(*shape: int, grad: bool = True, positive: bool = False, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        t = torch.randn(*shape, generator=g)
        t = t.abs() + 0.5 if positive else t
        return t.to(dev, dtype).requires_grad_(grad)

    # flash attention takes 16-bit q, k, v of head_dim 64 or 128 on a GPU (fp32 and smaller
    # heads on the interpreter); its lse is fp32
    h = torch.float32 if dev == "cpu" else torch.bfloat16
    hd = 16 if dev == "cpu" else 64

    def i(v: list) -> torch.Tensor:
        return torch.tensor(v, device=dev)

    return {
        "add.Tensor": lambda: ((r(3, 4), r(4)), {"alpha": 2}),
        "add.Scalar": lambda: ((r(3, 4), 1.5), {}),
        "sub.Tensor": lambda: ((r(3, 4), r(3, 4)), {}),
        "sub.Scalar": lambda: ((r(3, 4), 2), {}),
        "mul.Tensor": lambda: ((r(3, 4), r(3, 1)), {}),
        "mul.Scalar": lambda: ((r(3, 4), 3.0), {}),
        "div.Tensor": lambda: ((r(3, 4), r(4, positive=True)), {}),
        "div.Scalar": lambda: ((r(3, 4), 3.0), {}),
        "maximum.Tensor": lambda: ((r(3, 4), r(3, 4)), {}),
        "minimum.Tensor": lambda: ((r(3, 4), r(1, 4)), {}),
        "pow.Tensor_Tensor": lambda: ((r(3, 4, positive=True), r(3, 4)), {}),
        "pow.Tensor_Scalar": lambda: ((r(3, 4), 2.0), {}),
        "pow.Scalar": lambda: ((2.0, r(3, 4)), {}),
        **{op: (lambda: ((r(3, 4),), {})) for op in ("neg", "abs", "exp", "sigmoid", "tanh", "relu", "silu")},
        **{op: (lambda: ((r(3, 4, positive=True),), {})) for op in ("log", "sqrt", "rsqrt")},
        "gelu": lambda: ((r(3, 4),), {"approximate": "tanh"}),
        "where": lambda: ((r(3, 4, grad=False) > 0, r(3, 4), r(4)), {}),
        "sum": lambda: ((r(2, 3, 4), [1], True), {}),
        "mean": lambda: ((r(2, 3, 4), [0, 2]), {}),
        "amax": lambda: ((r(2, 3, 4), [1]), {}),
        "amin": lambda: ((r(2, 3, 4), [2], True), {}),
        "argmax": lambda: ((r(2, 3, 4, grad=False), 1), {}),
        "argmin": lambda: ((r(2, 3, 4, grad=False),), {}),
        "softmax": lambda: ((r(2, 3, 4), -1), {}),
        "log_softmax": lambda: ((r(2, 3, 4), 1), {}),
        "layer_norm": lambda: ((r(3, 8), [8], r(8), r(8)), {}),
        "rms_norm": lambda: ((r(3, 8), [8], r(8), 1e-6), {}),
        "group_norm": lambda: ((r(2, 4, 3), 2, r(4), r(4)), {}),
        "mm": lambda: ((r(3, 5), r(4, 5).t()), {}),
        "bmm": lambda: ((r(2, 3, 5), r(2, 5, 4)), {}),
        "addmm": lambda: ((r(4), r(3, 5), r(5, 4)), {"beta": 0.5, "alpha": 2}),
        "baddbmm": lambda: ((r(2, 1, 4), r(2, 3, 5), r(2, 4, 5).transpose(1, 2)), {"beta": 1.0, "alpha": 0.125}),
        "index_select": lambda: ((r(6, 4), 0, i([0, 3, 3])), {}),
        "gather": lambda: ((r(4, 6), 1, i([[0, 3], [1, 1], [5, 2], [4, 4]])), {}),
        "embedding": lambda: ((r(6, 4), i([[0, 2], [5, 1]])), {}),
        "fused_add_rms_norm": lambda: ((r(3, 8), r(3, 8), r(8), 1e-6), {}),
        "silu_and_mul": lambda: ((r(3, 8),), {}),
        "rotary_embedding": lambda: ((r(1, 3, 2, 8), r(3, 4, grad=False), r(3, 4, grad=False)), {}),
        "cross_entropy": lambda: ((r(4, 7), i([1, -100, 3, 0])), {}),
        "flash_attention": lambda: ((r(1, 4, 8, hd, dtype=h), r(1, 2, 8, hd, dtype=h), r(1, 2, 8, hd, dtype=h),
                                     True, None), {}),
        "flash_attention_backward": lambda: ((r(1, 4, 8, hd, grad=False, dtype=h), r(1, 4, 8, hd, grad=False, dtype=h),
                                              r(1, 2, 8, hd, grad=False, dtype=h), r(1, 2, 8, hd, grad=False, dtype=h),
                                              r(1, 4, 8, hd, grad=False, dtype=h), r(1, 4, 8, grad=False), True, None),
                                             {}),
    }


OPS = [o[0] for o in _registry._OPS]


def _op(name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(tj, base), overload or "default")


def test_every_tritonjit_op_has_a_sample() -> None:
    missing = sorted(set(OPS) - set(_samples("cpu")))
    assert not missing, f"add opcheck samples for {missing}"


@pytest.mark.parametrize("name", OPS)
def test_opcheck(name: str) -> None:
    args, kwargs = _samples("cpu")[name]()
    torch.library.opcheck(_op(name), args, kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("name", OPS)
def test_opcheck_gpu(name: str) -> None:
    args, kwargs = _samples("cuda")[name]()
    torch.library.opcheck(_op(name), args, kwargs)
