"""What torch.compile does with a model under enable() (docs/torch-compile.md says it):
Inductor runs its own kernels for the aten ops, none of tritonjit's; a call of
``torch.ops.tritonjit.*`` is kept in the compiled code and launches tritonjit's kernel."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import tritonjit
import tritonjit_ops
from torch._inductor.utils import run_and_get_code
from tritonjit_ops._audit import _count_launches


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin, self.norm = torch.nn.Linear(32, 32), torch.nn.LayerNorm(32)

    def forward(self, x):
        return torch.softmax(self.norm(torch.nn.functional.silu(self.lin(x)) + x), -1)


def explicit(x):
    return torch.ops.tritonjit.softmax(x * 2, -1) + 1


@pytest.fixture
def on_the_interpreter():
    """CPU tensors, routed by enable() (the interpreter's dispatch key is CPU)."""
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("interpreter")
    yield
    tritonjit._registry.registry._current = previous


def test_compiled_model_under_enable_runs_inductors_kernels_and_keeps_tritonjit_ops(on_the_interpreter):
    torch._dynamo.reset()
    x, model = torch.randn(4, 32), Block()
    with tritonjit_ops.enable():
        with _count_launches() as eager:
            ref = model(x)
        compiled = torch.compile(model)
        out, code = run_and_get_code(compiled, x)
        with _count_launches() as launches:
            again = compiled(x)
    assert eager[0] > 0  # eager under enable(): tritonjit's kernels
    assert launches[0] == 0 and "tritonjit" not in "".join(code)
    assert torch.allclose(out, ref, atol=1e-5) and torch.allclose(again, ref, atol=1e-5)

    fn = torch.compile(explicit)
    out, code = run_and_get_code(fn, x)
    with _count_launches() as launches:
        again = fn(x)
    assert "torch.ops.tritonjit.softmax" in "".join(code) and launches[0] == 1
    assert torch.allclose(again, torch.softmax(x * 2, -1) + 1, atol=1e-6)
    torch._dynamo.reset()


# torch's Python dispatcher (on while torch.compile traces) caches, per aten overload and
# dispatch key, the key whose kernel serves it. enable() and disable() add and remove those
# kernels, so they must drop the caches: clone (aten's kernel: CompositeExplicitAutograd)
# cached "CPU" under enable() and, traced after disable(), called a CPU kernel that no longer
# existed (a segfault: the next torch.compile's rng snapshot clones). Run in a process of its own.
PYTHON_DISPATCHER = """
import torch, tritonjit_ops
from torch._dispatch.python import enable_python_dispatcher
from tritonjit_ops._audit import _count_launches

wait = {wait}
x = torch.randn(8)
with tritonjit_ops.enable(include=["clone"], wait_native=wait):
    with enable_python_dispatcher():
        torch.clone(x)  # torch caches the key of enable()'s kernel
with enable_python_dispatcher():
    after = torch.clone(x)  # that kernel is gone: aten's serves the call
with tritonjit_ops.enable(include=["clone"], wait_native=wait):
    path = tritonjit_ops._registry.native_path()
    with enable_python_dispatcher(), _count_launches() as launches:
        during = torch.clone(x)  # aten's key was cached last: tritonjit's kernel serves the call
print(path.split()[0], torch.equal(after, x), torch.equal(during, x), launches[0])
"""


@pytest.mark.parametrize("native", ["1", "0"], ids=["cpp-path", "python-path"])
def test_python_dispatcher_follows_enable_and_disable(native, tmp_path):
    env = {**os.environ, "TRITONJIT_BACKEND": "interpreter", "TRITONJIT_OPS_NATIVE": native}
    code = PYTHON_DISPATCHER.format(wait=native == "1")
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    path, after, during, launches = p.stdout.split()[-4:]
    if native == "1" and path != "C++":
        pytest.skip(f"the C++ operator path is not available here ({path})")
    assert path == ("C++" if native == "1" else "Python")
    assert (after, during, launches) == ("True", "True", "1")
