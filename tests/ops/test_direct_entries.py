"""The direct entries as C callables (_direct.py, _native_ops.direct): a call that binds to
an operator overload and has a plan runs in C++; everything else goes, unchanged, to the
Python entry. Here on the interpreter (CPU tensors), whose launches go through Python."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch
import tritonjit_ops as T
from _util import close, native_ops_or_skip, needs_cxx, stats_delta
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

pytestmark = needs_cxx
F = torch.nn.functional


@pytest.fixture(scope="module")
def native():
    mod = native_ops_or_skip()
    if type(T.add).__name__ != "DirectEntry":
        pytest.fail("the C++ operator path is loaded but tritonjit_ops.add is not its direct entry")
    return mod


def _inputs():
    g = torch.Generator().manual_seed(0)
    return dict(a=torch.randn(2, 8, 16, generator=g), b=torch.randn(2, 8, 16, generator=g),
                m=torch.randn(6, 10, generator=g), w=torch.randn(16, generator=g), s=torch.tensor(2.5),
                i=torch.randint(-4, 4, (3, 5), generator=g), h=torch.randn(4, 16, generator=g).to(torch.bfloat16))


# name -> call(entry, inputs); entry is T.<op> or its Python entry (__wrapped__)
SERVED = {
    "add same shape": ("add", lambda f, t: f(t["a"], t["b"])),
    "add broadcast": ("add", lambda f, t: f(t["a"], t["b"][:, :1, :])),
    "add transposed view": ("add", lambda f, t: f(t["m"].t(), t["m"].t())),
    "add python float": ("add", lambda f, t: f(t["a"], 0.5)),
    "add python int alpha": ("add", lambda f, t: f(t["a"], t["b"], alpha=2)),
    "add int tensor int": ("add", lambda f, t: f(t["i"], 3)),
    "sub 0-dim cpu tensor": ("sub", lambda f, t: f(t["a"], t["s"])),
    "mul int tensor": ("mul", lambda f, t: f(t["i"], 3)),
    "div bf16": ("div", lambda f, t: f(t["h"], t["h"] + 1)),
    "pow scalar base": ("pow", lambda f, t: f(2.0, t["a"])),
    "maximum strided": ("maximum", lambda f, t: f(t["a"][..., ::2], t["b"][..., 1::2])),
    "exp": ("exp", lambda f, t: f(t["a"])),
    "gelu tanh keyword": ("gelu", lambda f, t: f(t["a"], approximate="tanh")),
    "where": ("where", lambda f, t: f(t["a"] > 0, t["a"], t["b"])),
    "sum all": ("sum", lambda f, t: f(t["a"])),
    "sum dim keepdim": ("sum", lambda f, t: f(t["a"], [1], True)),
    "sum dim tuple dtype": ("sum", lambda f, t: f(t["a"], (1,), dtype=torch.float32)),
    "sum of a bool mask (int64)": ("sum", lambda f, t: f(t["a"] > 0, -1)),
    "sum bf16 to fp32 dtype": ("sum", lambda f, t: f(t["h"], -1, dtype=torch.float32)),
    "mean bf16 to fp32 dtype": ("mean", lambda f, t: f(t["h"], [0], True, dtype=torch.float32)),
    "sum int to int64 dtype": ("sum", lambda f, t: f(t["i"], 0, dtype=torch.int64)),
    "softmax bf16 to fp32 dtype": ("softmax", lambda f, t: f(t["h"], -1, torch.float32)),
    "mean keepdim keyword": ("mean", lambda f, t: f(t["a"], -1, keepdim=True)),
    "amax": ("amax", lambda f, t: f(t["a"], [1])),
    "argmax": ("argmax", lambda f, t: f(t["m"], 0)),
    "softmax": ("softmax", lambda f, t: f(t["a"], -1)),
    "log_softmax dim 1 bf16": ("log_softmax", lambda f, t: f(t["h"], 0)),
    "layer_norm": ("layer_norm", lambda f, t: f(t["a"], (16,), t["w"], t["w"])),
    "rms_norm": ("rms_norm", lambda f, t: f(t["a"], [16], t["w"], 1e-6)),
    "rms_norm default eps": ("rms_norm", lambda f, t: f(t["a"], (16,))),
    "rms_norm torch.Size shape": ("rms_norm", lambda f, t: f(t["a"], t["a"].shape[-1:], t["w"])),
    "mm transposed": ("mm", lambda f, t: f(t["m"], t["m"].t())),
    "mul of a Parameter (nn weights are)": ("mul", lambda f, t: f(torch.nn.Parameter(t["w"], requires_grad=False), t["a"])),
    "minimum": ("minimum", lambda f, t: f(t["a"], t["b"])),
    "fused_add_rms_norm (two results)": ("fused_add_rms_norm", lambda f, t: f(t["a"], t["b"], t["w"], 1e-6)),
    "silu_and_mul": ("silu_and_mul", lambda f, t: f(t["a"])),
}


def _python(name):
    return getattr(T, name).__wrapped__


@pytest.mark.parametrize("case", sorted(SERVED))
def test_served_in_cpp_and_matches_the_python_entry(native, case):
    op, call = SERVED[case]
    t = _inputs()
    ref = call(_python(op), t)
    call(getattr(T, op), t)  # the first call of a shape may make its plan
    before = native.stats()
    got = call(getattr(T, op), t)
    delta = stats_delta(before, native.stats())
    assert delta["direct_hits"] == 1 and delta["direct_python_calls"] == 0, delta
    assert delta["python_calls"] == 0, delta  # the plan ran, not the operator's Python implementation
    for g, r in zip(got, ref) if isinstance(ref, tuple) else [(got, ref)]:
        close(g, r)


class _Sub(torch.Tensor):
    pass


PYTHON = {
    "out=": lambda t: T.add(t["a"], t["b"], out=torch.empty_like(t["a"])),
    "a keyword the op lacks": lambda t: T.softmax(t["a"], dim=-1, _stacklevel=5),
    "a tensor subclass": lambda t: T.mul(t["a"].as_subclass(_Sub), t["b"]),
    "a python scalar first": lambda t: T.add(2.0, t["a"]),
    "a list for a Scalar": lambda t: T.add(t["a"], [1.0]),
}


@pytest.mark.parametrize("case", sorted(PYTHON))
def test_other_calls_go_to_the_python_entry(native, case):
    t = _inputs()
    before = native.stats()
    try:
        PYTHON[case](t)
    except (TypeError, RuntimeError):
        pass  # what the Python entry says of it is its own business; that it was asked is ours
    delta = stats_delta(before, native.stats())
    assert delta["direct_python_calls"] == 1 and delta["direct_hits"] == 0, delta


def test_autograd_calls_take_the_python_entry_with_gradients(native):
    t = _inputs()
    a = t["a"].clone().requires_grad_()
    w = t["w"].clone().requires_grad_()
    before = native.stats()
    y = T.rms_norm(T.mul(a, 2.0), [16], w, 1e-6)
    assert stats_delta(before, native.stats())["direct_python_calls"] == 2
    y.square().sum().backward()
    a2, w2 = t["a"].clone().requires_grad_(), t["w"].clone().requires_grad_()
    F.rms_norm(a2 * 2.0, [16], w2, 1e-6).square().sum().backward()
    close(a.grad, a2.grad, rtol=1e-4, atol=1e-4)
    close(w.grad, w2.grad, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # no autograd work: served in C++
        before = native.stats()
        T.mul(a, 2.0)
        assert stats_delta(before, native.stats())["direct_hits"] == 1


def test_modes_and_transforms_take_the_python_entry(native):
    t = _inputs()
    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    class Pass(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    for ctx in (Count(), Pass()):
        before = native.stats()
        with ctx:
            close(T.add(t["a"], t["b"]), t["a"] + t["b"])
        assert stats_delta(before, native.stats())["direct_python_calls"] == 1, type(ctx).__name__
    assert seen, "the dispatch mode saw none of the Python entry's aten calls"
    before = native.stats()  # functorch's batched tensors: the Python entry (which refuses them)
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda r: T.exp(r))(t["m"])
    assert stats_delta(before, native.stats())["direct_python_calls"] == 1


def test_errors_are_the_python_entrys(native):
    t = _inputs()
    for call in (lambda f: f(t["a"], "x"), lambda f: f(t["a"], t["m"])):
        with pytest.raises(Exception) as direct:
            call(T.add)
        with pytest.raises(Exception) as python:
            call(_python("add"))
        assert type(direct.value) is type(python.value)
        assert str(direct.value) == str(python.value)


def test_looks_like_the_python_entry(native):
    assert T.add.__name__ == "add" and T.add.__doc__ == _python("add").__doc__
    assert inspect.signature(T.add) == inspect.signature(_python("add"))
    assert "direct entry add" in repr(T.add)
    assert T.add._tritonjit_autograd


def test_a_fresh_import_names_the_direct_entries_once_built(native):
    """Built already (this process built or loaded it): a new process loads it at import, so
    names imported from the package are the direct entries from the start."""
    code = "from tritonjit_ops import add; import tritonjit_ops as T; print(type(add).__name__, add is T.add)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["DirectEntry", "True"], out.stderr[-2000:]


def test_overload_entries_map_names_and_defaults():
    from tritonjit_ops import _direct, pointwise

    (entry,) = _direct.overload_entries(pointwise.add, ["add.Tensor"], {"add.Tensor": object()})
    name, _, names, defaults = entry
    assert name == "add.Tensor" and names == ("x", "y", "alpha")
    assert defaults[:2] == (_direct._MISSING, _direct._MISSING) and defaults[2] == 1

    def no_alpha(x, y):
        return x

    # the schema's keyword-only alpha has no parameter in this entry: no direct overload
    assert _direct.overload_entries(no_alpha, ["add.Tensor"], {"add.Tensor": object()}) == []


# ---- torch.ops.tritonjit packets: plain calls run the plan, the others take the dispatcher


def _torch_call(packet):
    return packet._op  # torch's call of the packet (the direct entry's fallback)


def test_packet_plain_calls_run_the_plan_the_dispatcher_would(native):
    from tritonjit_ops import _packets

    t = _inputs()
    pk = torch.ops.tritonjit.add
    assert _packets.direct_of(pk) is not None and _packets.direct_of(pk) is not pk._op
    for call in (lambda p: p(t["a"], t["b"]), lambda p: p(t["a"], 0.5, alpha=2), lambda p: p(t["a"], t["s"])):
        ref = call(_torch_call(pk))
        call(pk)
        before = native.stats()
        got = call(pk)
        delta = stats_delta(before, native.stats())
        assert delta["direct_hits"] == 1 and delta["python_calls"] == 0, delta
        close(got, ref)
    sm = torch.ops.tritonjit.log_softmax  # (test_packets.py refreshes softmax's packet)
    sm(t["h"], -1, torch.float32)
    before = native.stats()
    close(sm(t["h"], dim=-1, dtype=torch.float32), _torch_call(sm)(t["h"], -1, torch.float32))
    assert stats_delta(before, native.stats())["direct_hits"] == 1


def test_packet_calls_the_dispatcher_would_change_take_it(native):
    t = _inputs()
    pk = torch.ops.tritonjit.add
    pk(t["a"], t["b"])
    before = native.stats()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        pk(t["a"], t["b"])
    assert stats_delta(before, native.stats())["direct_python_calls"] == 1
    assert any("tritonjit::add" in e.name for e in prof.events()), "the profiler did not see the op"

    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Count():
        pk(t["a"], t["b"])
    assert "tritonjit.add.Tensor" in seen

    a = t["a"].clone().requires_grad_()
    before = native.stats()
    y = pk(a, t["b"], alpha=3)
    assert stats_delta(before, native.stats())["direct_python_calls"] == 1
    y.sum().backward()
    close(a.grad, torch.ones_like(a))

    # binding as torch's resolver would: an int for int[] is torch's to take or refuse
    before = native.stats()
    try:
        torch.ops.tritonjit.mean(t["a"], -1)
    except RuntimeError:
        pass
    assert stats_delta(before, native.stats())["direct_hits"] == 0
    with pytest.raises(RuntimeError, match="tritonjit::add"):
        pk(t["a"], t["b"], t["b"], t["b"])  # no overload takes it: torch's own error


def test_every_public_entry_with_a_planner_is_a_direct_entry(native):
    """An entry whose parameters stop mapping to its schema would silently stay Python."""
    from tritonjit_ops import _registry

    planned = {name.partition(".")[0] for name, *_ in _registry._OPS if name in _registry._TJ_PLANNERS}
    public = planned & set(T.__all__)
    assert len(public) >= 30
    assert sorted(n for n in public if type(getattr(T, n)).__name__ != "DirectEntry") == []
    # a packet torch refreshed since (an overload defined later, as test_packets.py does)
    # keeps torch's call: its direct entry knew only the overloads of its time
    from tritonjit_ops import _packets

    packets = [getattr(torch.ops.tritonjit, n) for n in sorted(planned)]
    fast = [p for p in packets if isinstance(p, _packets._FastPacket) and not _packets.refreshed(p)]
    assert len(fast) >= len(packets) - 1  # one may have been refreshed by test_packets.py
    assert [str(p) for p in fast if _packets.direct_of(p) is None] == []
