import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import tritonjit_ops as T
from tritonjit_ops import matmul, norm, pointwise

softmax = sys.modules["tritonjit_ops.softmax"]  # the package attribute is the function
from _util import close


def test_torch_ops_entries():
    x, y = torch.randn(3, 4), torch.randn(4)
    close(torch.ops.tritonjit.add(x, y, alpha=2), torch.add(x, y, alpha=2))
    close(torch.ops.tritonjit.add.Scalar(x, 1.5), x + 1.5)
    close(torch.ops.tritonjit.sum(x, [1], True), x.sum(1, keepdim=True))
    close(torch.ops.tritonjit.rms_norm(x, [4], None, 1e-6), F.rms_norm(x, [4], None, 1e-6))
    out, h = torch.ops.tritonjit.fused_add_rms_norm(x, x, torch.ones(4), 1e-6)
    close(h, 2 * x)
    close(torch.ops.tritonjit.gelu(x, approximate="tanh"), F.gelu(x, approximate="tanh"))


def test_fake_impls_trace_with_compile():
    def f(x, w, r):
        h = torch.ops.tritonjit.mm(x, w)
        h = torch.ops.tritonjit.silu_and_mul(h)
        out, res = torch.ops.tritonjit.fused_add_rms_norm(h, r, None, 1e-6)
        return torch.ops.tritonjit.softmax(out, -1), torch.ops.tritonjit.sum(res, [0])

    x, w, r = torch.randn(4, 8), torch.randn(8, 12), torch.randn(4, 6)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    for got, ref in zip(compiled(x, w, r), f(x, w, r)):
        close(got, ref)


def test_fake_shapes_match_real():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(2, 3, 8)
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(x)
        assert torch.ops.tritonjit.amax(fx, [1]).shape == (2, 8)
        assert torch.ops.tritonjit.argmax(fx, 2, True).dtype == torch.int64
        assert torch.ops.tritonjit.cross_entropy(fx[0], torch.zeros(3, dtype=torch.int64)).shape == ()
        assert torch.ops.tritonjit.rotary_embedding(fx[None], torch.ones(3, 4), torch.ones(3, 4)).shape == (1, 2, 3, 8)


def test_enable_context_and_global_switch():
    x, y = torch.randn(5), torch.randn(5)
    assert T.enabled_ops() == []
    with T.enable():
        assert "add.Tensor" in T.enabled_ops() and "mm" in T.enabled_ops()
        close(x + y, torch.add(x, y))
    assert T.enabled_ops() == []
    T.enable(include=["mm", "addmm"])
    try:
        assert T.enabled_ops() == ["addmm", "mm"]
    finally:
        T.disable()
    assert T.enabled_ops() == []
    with pytest.raises(ValueError, match="no tritonjit implementation"):
        T.enable(include=["not_an_op"])
    assert T.enabled_ops() == []


def test_an_enable_object_entered_again_enables_again():
    """``e = enable(...)`` entered by several ``with`` blocks routes inside each. It used to
    route only in the first; a later block ran aten's kernels, and its end disabled an
    enable() made outside it."""
    e = T.enable(include=(n for n in ["mm", "addmm"]), exclude=(n for n in ["addmm"]))
    with e:
        assert T.enabled_ops() == ["mm"]
    assert T.enabled_ops() == []
    for _ in range(2):
        with e:
            assert T.enabled_ops() == ["mm"]
        assert T.enabled_ops() == []
    outer = T.enable(include=["addmm"])
    try:
        with e:  # nested in outer: keeps the first selection; its end leaves outer on
            assert T.enabled_ops() == ["addmm"]
        assert T.enabled_ops() == ["addmm"]
    finally:
        T.disable()
    with outer:  # undone by disable(): entering it enables again
        assert T.enabled_ops() == ["addmm"]
    assert T.enabled_ops() == []
    with T.enable(include=["mm"]):  # a block's end disables what was enabled inside it too
        T.disable()
        T.enable(include=["addmm"])
    assert T.enabled_ops() == []


class _Counter:
    """Counts the launches of a tritonjit launcher on the interpreter, where every launch,
    from Python or from the C++ operator path, runs its ``_run``."""

    def __init__(self, monkeypatch, fn):
        self.n = 0
        run = fn._run

        def counted(*args, **kwargs):
            self.n += 1
            return run(*args, **kwargs)

        monkeypatch.setattr(fn, "_run", counted, raising=False)


class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.RMSNorm(d, eps=1e-6)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)
        self.gn = nn.GroupNorm(2, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        h = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(h)
        x = x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))
        return self.gn(x.transpose(1, 2)).transpose(1, 2)


class Model(nn.Module):
    def __init__(self, vocab=50, d=16, blocks=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(blocks)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return F.log_softmax(self.head(self.blocks(self.emb(ids))), -1)


_KERNELS = ((matmul, "_mm"), (norm, "_norm"), (softmax, "_softmax"), (pointwise, "_binary_flat"))


def _model_check(device, monkeypatch):
    torch.manual_seed(0)
    model = Model().to(device).eval()
    ids = torch.randint(0, 50, (2, 7), device=device)
    counters = {name: _Counter(monkeypatch, getattr(mod, name)) for mod, name in _KERNELS}
    with torch.no_grad():
        ref = model(ids)
        with T.enable(wait_native=True):
            if device == "cpu":
                got = model(ids)
                launched = {name for name, c in counters.items() if c.n}
            else:  # launches from C++ reach no Python: the profiler sees them on the device
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    got = model(ids)
                    torch.cuda.synchronize()
                names = {e.name for e in prof.events()}
                launched = {name for mod, name in _KERNELS if getattr(mod, name).name in names}
    for _, name in _KERNELS:
        assert name in launched, f"{name} never launched under enable()"
    close(got, ref, rtol=1e-4, atol=1e-4)


def test_model_under_enable_matches_eager(monkeypatch):
    _model_check("cpu", monkeypatch)


def test_autograd_still_works_under_enable():
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    with T.enable():
        (torch.softmax(x @ w, -1) * 2).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    (torch.softmax(x @ w, -1) * 2).sum().backward()
    close(gx, x.grad)
    close(gw, w.grad)


@pytest.mark.gpu
def test_model_under_enable_matches_eager_gpu(monkeypatch):
    torch.backends.cuda.matmul.allow_tf32 = False
    _model_check("cuda", monkeypatch)


def test_device_default_is_the_measured_set_and_all_routes_everything():
    """Without include, a device backend routes DEVICE_DEFAULT (measured no slower than eager
    in real models); the interpreter routes the whole table; include="all" and a single name
    are accepted."""
    from tritonjit_ops import _registry

    cuda = set(T.default_ops("CUDA"))
    assert cuda == set(_registry._ATEN) & _registry.DEVICE_DEFAULT
    assert {"mm", "add.Tensor", "_softmax", "cat", "_softmax_backward_data"} <= cuda
    assert "nll_loss_forward" not in cuda and "bitwise_xor_.Tensor" not in cuda  # opt-in: measured slower
    assert {"fill_.Scalar", "full", "bitwise_not", "max"} <= cuda  # fills check values per call (Plan.fits)
    # the default has a C++ host path throughout (SDPA and AdamW route through their own policies;
    # their modules are imported by the registry)
    own = set(sys.modules["tritonjit_ops.attention"].ATEN) | set(sys.modules["tritonjit_ops.optim"].ATEN)
    assert not [n for n in cuda - own if n not in _registry._PLANNERS]
    assert set(T.default_ops("CPU")) == set(_registry._ATEN)
    with T.enable(include="all"):
        assert set(T.enabled_ops()) >= set(_registry._ATEN)
    with T.enable(include="mm"):
        assert T.enabled_ops() == ["mm"]


class _Building:
    """The C++ operator path's build as _native_ops.native() gives it, with a set reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


@pytest.mark.parametrize("reason, include, python", [
    ("building", None, False),  # the default selection waits on aten's kernels
    ("building", ["add.Tensor"], True),  # an explicit selection runs on the Python kernels
    ("not available: no C++ compiler", None, True),  # nothing to wait for: the Python kernels
])
def test_default_selection_stays_on_aten_while_the_cpp_path_builds(monkeypatch, reason, include, python):
    """On a device backend, the default operators are chosen for the C++ path's cost; their
    Python kernels cost 20-50 us of host time a call. While that path builds (the first
    minute of a fresh install), enable() leaves them on aten's kernels, then swaps the C++
    kernels in when the build is done (an explicit selection's Python kernels: at their next
    call). (A CUDA registration is visible on a CPU build of torch, which has no CUDA kernels
    of its own.)"""
    from tritonjit_ops import _native_ops, _registry

    ready, registered = [], []
    monkeypatch.setattr(_registry, "dispatch_key", lambda: "CUDA")
    monkeypatch.setattr(_native_ops, "module", lambda wait=False: None)
    monkeypatch.setattr(_native_ops, "native", lambda: _Building(reason))
    monkeypatch.setattr(_native_ops, "on_ready", ready.append)
    monkeypatch.setattr(_native_ops, "register", lambda *a, **k: registered.append(a[2]) or "handle")
    monkeypatch.setattr(_native_ops, "release", lambda handle: None)

    def has_cuda_kernel() -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "CUDA")

    assert not has_cuda_kernel()
    with T.enable(include):
        assert has_cuda_kernel() is python
        path = T._registry.native_path()
        assert path.startswith("Python" if python else "aten (until the C++ path is built: building)"), path
        assert len(ready) == 1
        ready[0](object())  # the build is done: the C++ kernels replace aten's (or the Python ones)
        if python:  # ... at the Python kernels' next call, on its thread (what that call runs)
            assert T._registry.native_path().startswith("Python (the C++ path is built") and has_cuda_kernel()
            T._registry._finish_swap()
        assert T._registry.native_path() == "C++" and not has_cuda_kernel()
        assert [e[0] for e in registered[0]] == list(T._registry.enabled_ops())
        assert ("add.Tensor" in T._registry.enabled_ops()) and (include is not None or
                                                                  "mm" in T._registry.enabled_ops())
    assert T._registry.native_path() == "disabled" and not has_cuda_kernel()


def test_the_cpp_path_takes_over_at_the_next_call_on_the_callers_thread(monkeypatch):
    """The build thread must not remove the Python kernels: another thread inside one (its
    call dispatched, waiting for the GIL) would run a freed kernel (torch crashes when a
    Library's kernels are destroyed while another thread calls the op). The build's callback
    only marks the switch; the next call of a Python kernel makes it, on the caller's thread,
    and is served."""
    import threading

    from tritonjit_ops import _native_ops, _registry

    mod = _native_ops.module(wait=True)
    if mod is None:
        pytest.skip(f"the C++ operator path is not available here ({_native_ops.native()})")
    ready = []
    real_module = _native_ops.module
    monkeypatch.setattr(_native_ops, "module", lambda wait=False: None)  # as while it builds
    monkeypatch.setattr(_native_ops, "on_ready", ready.append)
    x, y = torch.randn(33), torch.randn(33)
    added, multiplied = x + y, x * y  # aten's
    with T.enable(include=["add.Tensor", "mul.Tensor"]):
        monkeypatch.setattr(_native_ops, "module", real_module)
        assert _registry.native_path().startswith("Python") and len(ready) == 1
        build = threading.Thread(target=ready[0], args=(mod,))
        build.start()
        build.join()
        assert _registry.native_path().startswith("Python (the C++ path is built")
        close(torch.add(x, y), added)  # the switch, then the call served
        assert _registry.native_path() == "C++"
        before = _native_ops.stats()["plan_hits"] + _native_ops.stats()["plans_made"]
        close(torch.mul(x, y), multiplied)
        assert _native_ops.stats()["plan_hits"] + _native_ops.stats()["plans_made"] > before
    assert _registry.native_path() == "disabled"
