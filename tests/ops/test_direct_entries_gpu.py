"""GPU: the direct entries' C++ path (test_direct_entries.py's cases) on CUDA tensors,
on the current stream of a side stream, and inside a CUDA graph. Skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_or_skip, stats_delta
from test_direct_entries import SERVED, _inputs, _python

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def native():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import tritonjit

    tritonjit.set_backend("cuda")
    mod = native_ops_or_skip()
    if type(T.add).__name__ != "DirectEntry":
        pytest.fail("the C++ operator path is loaded but tritonjit_ops.add is not its direct entry")
    return mod


def _cuda_inputs():
    # the 0-dim tensor stays on the CPU: a scalar operand, as aten takes it
    return {k: v if k == "s" else v.cuda() for k, v in _inputs().items()}


@pytest.mark.parametrize("case", sorted(SERVED))
def test_served_in_cpp_on_cuda(native, case):
    op, call = SERVED[case]
    t = _cuda_inputs()
    ref = call(_python(op), t)
    call(getattr(T, op), t)
    before = native.stats()
    got = call(getattr(T, op), t)
    delta = stats_delta(before, native.stats())
    assert delta["direct_hits"] == 1 and delta["python_calls"] == 0, delta
    for g, r in zip(got, ref) if isinstance(ref, tuple) else [(got, ref)]:
        close(g, r)


def test_side_stream_and_cuda_graph(native):
    t = _cuda_inputs()
    a, b = t["a"], t["b"]
    T.add(a, b)
    x = torch.zeros_like(a)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # x becomes 1 only after this, in the side stream's order
        x.fill_(1.0)
        out = T.add(x, x)  # on another stream it would read zeros
    torch.cuda.synchronize()
    assert bool((out == 2).all()), "the direct entry did not launch on the current (side) stream"
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = T.rms_norm(T.add(a, b), [16], t["w"], 1e-6)
    a.add_(1.0)
    g.replay()
    torch.cuda.synchronize()
    close(y, torch.nn.functional.rms_norm(a + b, [16], t["w"], 1e-6), rtol=1e-5, atol=1e-5)
