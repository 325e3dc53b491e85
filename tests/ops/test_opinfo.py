"""Every aten overload enable() routes, on PyTorch's own OpInfo sample inputs
(``torch.testing._internal.common_methods_invocations.op_db``): forward under ``enable()``
against eager, the in-place and ``out=`` variants where the overload is one, the
backward where the op is differentiable, and (float32) the second derivative where OpInfo
says eager has one.

An overload maps to the OpInfo entries of its name (``eq_.Scalar`` -> ``eq``, in place;
``exp.out`` -> ``exp``, out=; ``hardtanh`` -> ``nn.functional.hardtanh``); one without an
entry is reported with the reason, not failed. A call both sides refuse with an error
passes (aten's error under enable() is the point of the fallback).

On CPU (the interpreter, in CI) each entry runs a few small samples in float32, float16,
bfloat16 and one integer dtype; the ``gpu``/``slow`` variant runs every sample on the GPU:
``pytest tests/ops/test_opinfo.py -m gpu``. Each run prints its table (terminal summary): per overload,
samples passed, and how many calls tritonjit served against how many it left to aten.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import sys
from collections import defaultdict
from typing import Any, Callable

import pytest
import torch

pytest.importorskip("expecttest", reason="PyTorch's OpInfo database imports expecttest (a test dependency)")
import tritonjit_ops as T
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map
from tritonjit_ops import _native_ops
from tritonjit_ops._registry import _ATEN

#: aten overloads whose OpInfo entry has another name
ALIASES = {"_softmax": "softmax", "_log_softmax": "log_softmax", "_fused_rms_norm": "nn.functional.rms_norm",
           "native_group_norm": "nn.functional.group_norm", "_to_copy": "to", "sum.dim_IntList": "sum",
           "mean.dim": "mean", "embedding": "nn.functional.embedding",
           "nll_loss_forward": "nn.functional.nll_loss", "nll_loss_backward": "nn.functional.nll_loss",
           "index.Tensor": "__getitem__"}
#: why an overload without an OpInfo entry is covered elsewhere
_RANDOM = "random output: tests/ops/test_dropout.py checks it"
ELSEWHERE = {"native_dropout": _RANDOM, "bernoulli_.float": _RANDOM, "uniform_": _RANDOM, "normal_": _RANDOM,
             "copy_": "no OpInfo entry; tests/ops/_sync_cases.py and every model test call it"}
#: per-OpInfo tolerances where tritonjit computes differently from aten (documented why)
TOL_OVERRIDE: dict[str, dict[str, float]] = {}
#: per-(OpInfo, dtype) tolerances, each with its reason
DTYPE_TOL_OVERRIDE: dict[tuple[str, torch.dtype], dict[str, float]] = {
    # aten's CUDA cumsum scans bf16 in bf16 (CUB over scalar_t): each partial sum rounds;
    # tritonjit accumulates in fp32 and rounds once, so they part by a few ulps of the running sum
    ("cumsum", torch.bfloat16): dict(rtol=0.15, atol=0.1),
    ("cumsum", torch.float16): dict(rtol=0.02, atol=0.0125),  # the same, at fp16's finer ulp (H200: 1.3e-3)
    # aten's CUDA group_norm stores each group's mean and rstd in the input dtype
    # (RowwiseMomentsCUDAKernel writes T) and normalizes with those rounded statistics;
    # tritonjit keeps them in fp32: on the H200 one output of 125 parted by 0.018 (about 9 ulps)
    ("nn.functional.group_norm", torch.bfloat16): dict(rtol=0.02, atol=0.04),
    ("nn.functional.group_norm", torch.float16): dict(rtol=4e-3, atol=5e-3),  # the same (H200: 0.0024, 5 ulps)
    # logsumexp's backward is grad * exp(x - result) in fp16 tensor ops: a result one fp16 ulp
    # apart (0.0078 at 8; the forward's sum runs in another order) moves the gradient by 0.8%,
    # and the fp16 difference x - result rounds by as much (0.5% off fp64 on the CPU, aten alone)
    ("logsumexp", torch.float16): dict(rtol=1e-2, atol=4e-3),
    # pow's backward of a large reference input (a gradient of 2e5): the fp32 kernel's general
    # power (pow_general) lies 2.2e-5 relative from float64's value there, past the default 2e-5
    ("pow", torch.float32): dict(rtol=4e-5, atol=2e-5),
}
#: ops whose index outputs may order equal values differently (bf16 makes ties common): the
#: indices pass when they select the same values; name -> how to find the dim in a sample
def _dim_first(s: Any) -> int:
    """The dim of sort/argsort(input, dim=-1, ...)."""
    return s.args[0] if s.args and isinstance(s.args[0], int) else s.kwargs.get("dim", -1)


TIE_ORDER: dict[str, Callable[[Any], int]] = {
    "topk": lambda s: s.args[1] if len(s.args) > 1 else s.kwargs.get("dim", -1),
    "sort": _dim_first,
    "argsort": _dim_first,
}
CPU_SAMPLES = 2        # samples per OpInfo entry and dtype on CPU (CI's time budget)
CPU_MAX_NUMEL = 2048   # on CPU, samples whose tensors hold more elements are left out
REFERENCE_SAMPLES = 12  # reference inputs per functional entry and dtype on CPU (extremal values come late)

_BY_NAME: dict[str, list[Any]] = defaultdict(list)
for _op in op_db:
    if _op.name.startswith(("masked.", "sparse.")):
        continue  # other operators (masked reductions, sparse layouts) that share a name's tail
    for _k in {_op.name, _op.aten_name, _op.name.split(".")[-1]}:
        _BY_NAME[_k].append(_op)


def variant(overload: str) -> tuple[str, str]:
    """(OpInfo name, kind): kind "fn" (functional), "inplace" or "out"."""
    base, _, ov = overload.partition(".")
    if overload in ALIASES:
        return ALIASES[overload], "fn"
    if ov == "out" or ov.endswith("_out") or ov.startswith("out"):
        return base, "out"
    if base.endswith("_") and not base.endswith("__") and base[:-1] in _BY_NAME:
        return base[:-1], "inplace"
    return ALIASES.get(base, base), "fn"


def groups() -> tuple[dict[tuple[str, str, str], list[str]], dict[str, str]]:
    """(OpInfo full name, variant test name, kind) -> the overloads it covers; and the
    overloads without an OpInfo entry, with the reason."""
    covered: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    unmapped: dict[str, str] = {}
    for name in sorted(_ATEN):
        key, kind = variant(name)
        ops = [] if name in ELSEWHERE else _BY_NAME.get(key, [])
        if not ops:
            unmapped[name] = ELSEWHERE.get(name, f"no OpInfo entry named {key!r}")
            continue
        for op in ops:
            covered[(op.name, op.variant_test_name, kind)].append(name)
    return dict(covered), unmapped


GROUPS, UNMAPPED = groups()
_OPS = {(op.name, op.variant_test_name): op for op in op_db}
#: overload -> [passed, samples, tritonjit calls, aten fallbacks, notes]
RESULTS: dict[str, list[Any]] = {}


def _tol(op: Any, dtype: torch.dtype) -> dict[str, float]:
    tol = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
           torch.float16: dict(rtol=1e-3, atol=1e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}.get(
        dtype, dict(rtol=0.0, atol=0.0))
    return {**tol, **TOL_OVERRIDE.get(op.name, {}), **DTYPE_TOL_OVERRIDE.get((op.name, dtype), {})}


def _detached(sample: Any) -> tuple[Any, tuple, dict]:
    f = lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t
    return tree_map(f, sample.input), tree_map(f, tuple(sample.args)), tree_map(f, dict(sample.kwargs))


def _numel(sample: Any) -> int:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return sum(t.numel() for t in leaves if isinstance(t, torch.Tensor))


def _call(fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except Exception as e:  # compared below: both sides must agree on failing
        return None, e


def _tensors(r: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(r)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _compare(got: Any, ref: Any, op: Any, dtype: torch.dtype, what: str, sample: Any = None) -> None:
    g, r = _tensors(got), _tensors(ref)
    assert len(g) == len(r), f"{what}: {len(g)} outputs, eager has {len(r)}"
    for k, (a, b) in enumerate(zip(g, r)):
        if (op.name in TIE_ORDER and sample is not None and k == len(r) - 1 and b.dtype == torch.int64
                and a.shape == b.shape and not torch.equal(a, b) and not sample.kwargs.get("stable")
                and isinstance(sample.input, torch.Tensor) and sample.input.dim()):
            x, d = sample.input.detach(), TIE_ORDER[op.name](sample)
            torch.testing.assert_close(x.gather(d, a), x.gather(d, b), equal_nan=True, rtol=0, atol=0,
                                       msg=lambda m: f"{what}: the indices select other values: {m}")
            continue
        torch.testing.assert_close(a.detach(), b.detach(), equal_nan=True, **_tol(op, b.dtype),
                                   msg=lambda m: f"{what}: {m}")


def _counters() -> tuple[int, int]:
    s = _native_ops.stats()
    return s.get("plan_hits", 0) + s.get("python_calls", 0) - s.get("aten_calls", 0), s.get("aten_calls", 0)


def _run_sample(op: Any, kind: str, sample: Any, dtype: torch.dtype, grad: bool) -> None:
    """One sample: eager, then under enable(); raises AssertionError on a mismatch."""
    if kind == "fn":
        inp, args, kwargs = sample.input, tuple(sample.args), dict(sample.kwargs)
        fn = lambda: op.op(inp, *args, **kwargs)
    elif kind == "inplace":
        def fn() -> Any:
            inp, args, kwargs = _detached(sample)
            op.inplace_variant(inp, *args, **kwargs)
            return inp
    else:
        ref_shape, _ = _call(lambda: op.op(*_detached(sample)[:1], *_detached(sample)[1], **_detached(sample)[2]))

        def fn() -> Any:
            inp, args, kwargs = _detached(sample)
            out = torch.empty_like(ref_shape)
            op.op(inp, *args, **kwargs, out=out)
            return out
    ref, ref_err = _call(fn)
    with T.enable(include="all"):
        got, err = _call(fn)
    what = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''} ({kind}, {dtype}, {sample!r:.200})"
    if ref_err is not None:
        assert err is not None, f"{what}: eager raised {ref_err!r:.200}, enable() did not"
        return
    assert err is None, f"{what}: enable() raised {err!r}"
    _compare(got, ref, op, dtype, what, sample)
    if not grad:
        return
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    inputs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    idx = [i for i, t in enumerate(_tensors(ref)) if t.requires_grad and t.dtype.is_floating_point]
    if not inputs or not idx:
        return
    outs = [_tensors(ref)[i] for i in idx]
    gen = torch.Generator(device=outs[0].device).manual_seed(0)
    cots = [torch.randn(t.shape, dtype=t.dtype, device=t.device, generator=gen) for t in outs]
    ref_g, ref_err = _call(lambda: torch.autograd.grad(outs, inputs, cots, allow_unused=True))
    if ref_err is not None:  # eager's backward raises (clamp's of a min broadcast past self): so must ours
        with T.enable(include="all"):
            res = op.op(sample.input, *sample.args, **sample.kwargs)
            _, err = _call(lambda: torch.autograd.grad([_tensors(res)[i] for i in idx], inputs, cots, allow_unused=True))
        assert err is not None, f"{what}: eager's backward raised {ref_err!r:.200}, enable()'s did not"
        return
    gi, ri = _tensors(got)[-1], _tensors(ref)[-1]
    if op.name in TIE_ORDER and len(inputs) == 1 and len(cots) == 1 and not torch.equal(gi, ri):
        # ties picked other indices (the forward check accepted them): the gradient goes where
        # they point; eager's formula (scatter of the values' gradient) at tritonjit's indices
        ref_g = (torch.zeros_like(inputs[0]).scatter(TIE_ORDER[op.name](sample), gi, cots[0]),)
    with T.enable(include="all"):
        res = op.op(sample.input, *sample.args, **sample.kwargs)
        got_g = torch.autograd.grad([_tensors(res)[i] for i in idx], inputs, cots, allow_unused=True)
    exact: list | None = None
    for k, (a, b) in enumerate(zip(got_g, ref_g)):
        assert (a is None) == (b is None), f"{what}: backward: gradient presence differs"
        if a is None:
            continue
        try:
            torch.testing.assert_close(a, b, equal_nan=True, **_tol(op, b.dtype), msg=lambda m: f"{what}: backward: {m}")
        except AssertionError:
            # a half-precision forward that rounds better than eager's (logsumexp in bf16: eager's
            # 7.375 against the correctly rounded 7.40625) moves a backward that reads it by a
            # few ulps: then the float64 gradient of the same inputs decides
            exact = _float64_grads(op, sample, idx, cots) if exact is None else exact
            if exact is None or exact[k] is None:
                raise
            torch.testing.assert_close(a, exact[k].to(a.dtype), equal_nan=True, **_tol(op, b.dtype),
                                       msg=lambda m: f"{what}: backward, against float64 too: {m}")
    if dtype == torch.float32 and getattr(op, "supports_gradgrad", False):
        _check_second_order(op, sample, idx, inputs, cots, what)


def _check_second_order(op: Any, sample: Any, idx: list[int], inputs: list[torch.Tensor], cots: list[torch.Tensor],
                        what: str) -> None:
    """Second derivatives: the gradient taken with create_graph=True, differentiated again
    with fixed cotangents, eager against enable(). A gradient that is differentiable in
    eager and not under enable() (a backward that left the graph) fails here."""
    def run() -> tuple[list[bool], tuple]:
        outs = _tensors(op.op(sample.input, *sample.args, **sample.kwargs))
        first = torch.autograd.grad([outs[i] for i in idx], inputs, cots, create_graph=True, allow_unused=True)
        live = [g is not None and g.requires_grad for g in first]
        wrt = [g for g, k in zip(first, live) if k]
        gen = torch.Generator(device=inputs[0].device).manual_seed(1)
        cot2 = [torch.randn(g.shape, dtype=g.dtype, device=g.device, generator=gen) for g in wrt]
        return live, (torch.autograd.grad(wrt, inputs, cot2, allow_unused=True) if wrt else ())

    ref, ref_err = _call(run)
    if ref_err is not None:
        return  # eager has no second derivative of this sample (its backward op has no derivative)
    with T.enable(include="all"):
        got, err = _call(run)
    assert err is None, f"{what}: second derivative: enable() raised {err!r:.300}"
    assert got[0] == ref[0], f"{what}: second derivative: which gradients are differentiable differs ({got[0]} " \
                             f"under enable(), eager {ref[0]})"
    for a, b in zip(got[1], ref[1]):
        assert (a is None) == (b is None), f"{what}: second derivative: gradient presence differs"
        if a is not None:
            torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-4, atol=1e-4,
                                       msg=lambda m: f"{what}: second derivative: {m}")


def _float64_grads(op: Any, sample: Any, idx: list[int], cots: list[torch.Tensor]) -> list | None:
    """Eager's gradients of the sample's inputs computed in float64 (None where the op has no
    float64 form): the reference a half-precision gradient is nearest to when it is right."""
    def up(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point:
            return t.detach().double().requires_grad_(t.requires_grad)
        return t

    inp, args, kwargs = tree_map(up, sample.input), tree_map(up, tuple(sample.args)), tree_map(up, dict(sample.kwargs))
    leaves, _ = tree_flatten((inp, args, kwargs))
    inputs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    try:
        outs = _tensors(op.op(inp, *args, **kwargs))
        return list(torch.autograd.grad([outs[i] for i in idx], inputs, [c.double() for c in cots], allow_unused=True))
    except (RuntimeError, TypeError):
        return None


def _takes_inplace(op: Any) -> bool:
    """torch.nn.functional's activations take ``inplace=True`` (then calling aten's ``relu_``, ...)."""
    try:
        return "inplace" in inspect.signature(op.op).parameters
    except (TypeError, ValueError):
        return False


class _with_inplace_kwarg:
    """An OpInfo whose in-place variant is its function with ``inplace=True``."""

    def __init__(self, op: Any) -> None:
        self._op = op
        self.inplace_variant = lambda *a, **k: op.op(*a, **k, inplace=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)


def _dtypes(op: Any, device: str, full: bool) -> list[torch.dtype]:
    supported = op.supported_dtypes(device)
    # the half types on both: their semantics differ from fp32's (a quotient that rounds
    # before trunc; a sign whose compiled select lost its -1), which fp32 samples cannot see
    # and two integer widths: a 32-bit int reaches kernels and scalar conversions that int64
    # does not (amin of a 0-dim int32 once filled its identity through an fp32 scalar)
    want = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool]
    got = [d for d in want if d in supported]
    ints = [d for d in got if not d.is_floating_point]
    floats = [d for d in got if d.is_floating_point]
    return floats + ints[:2]


def _run_group(key: tuple[str, str, str], device: str, full: bool, reference: bool = False) -> None:
    """Run a group's samples; ``reference``: OpInfo's reference inputs instead (infinities,
    NaN, extremal values, empty and noncontiguous tensors), in float32 and int32."""
    name, vname, kind = key
    op = _OPS[(name, vname)]
    overloads = GROUPS[key]
    for ov in overloads:
        RESULTS.setdefault(ov, [0, 0, 0, 0, []])
    if kind == "inplace" and op.inplace_variant is None and _takes_inplace(op):
        op = _with_inplace_kwarg(op)
    if kind == "inplace" and op.inplace_variant is None:
        for ov in overloads:
            RESULTS[ov][4].append(f"{name}: OpInfo has no in-place variant")
        pytest.skip(f"{name}: OpInfo has no in-place variant")
    if kind == "out" and not op.supports_out:
        for ov in overloads:
            RESULTS[ov][4].append(f"{name}: OpInfo has no out= variant")
        pytest.skip(f"{name}: OpInfo does not support out=")
    passed = total = 0
    before = _counters()
    failures: list[str] = []
    dtypes = [d for d in (torch.float32, torch.int32) if d in op.supported_dtypes(device)] if reference else \
        _dtypes(op, device, full)
    for dtype in dtypes:
        grad = kind == "fn" and op.supports_autograd and dtype.is_floating_point
        if reference:
            try:  # some entries' generators raise themselves (where's asks a bool tensor to require grad)
                samples = list(itertools.islice((s for s in op.reference_inputs(device, dtype, requires_grad=grad)
                                                 if _numel(s) <= CPU_MAX_NUMEL), REFERENCE_SAMPLES))
            except ValueError as e:
                for ov in overloads:
                    RESULTS[ov][4].append(f"{name}: OpInfo's reference inputs raise ({e!s:.80})")
                continue
        else:
            samples = op.sample_inputs(device, dtype, requires_grad=grad)
        if not full and not reference:
            samples = itertools.islice((s for s in samples if _numel(s) <= CPU_MAX_NUMEL), CPU_SAMPLES)
        for sample in samples:
            if kind == "out" and not isinstance(sample.input, torch.Tensor):
                continue
            total += 1
            try:
                _run_sample(op, kind, sample, dtype, grad)
                passed += 1
            except AssertionError as e:
                failures.append(str(e)[:600])
    after = _counters()
    for ov in overloads:
        r = RESULTS[ov]
        r[0] += passed
        r[1] += total
        r[2] += after[0] - before[0]
        r[3] += after[1] - before[1]
    if total == 0:
        pytest.skip(f"{name} ({kind}): no sample fits ({'all' if full else 'small'} samples)")
    assert not failures, f"{len(failures)} of {total} samples differ from eager:\n" + "\n".join(failures[:5])


_KEYS = sorted(GROUPS)
_IDS = [f"{n}{'.' + v if v else ''}-{k}" for n, v, k in _KEYS]


def report_lines() -> list[str]:
    """The table of this run (tests/ops/conftest.py prints it in pytest's terminal summary)."""
    if not RESULTS:
        return []
    lines = [f"{'overload':32s} {'passed':>8s} {'group calls tj/aten':>20s}  notes"]
    for ov in sorted(_ATEN):
        if ov in UNMAPPED:
            lines.append(f"{ov:32s} {'-':>8s} {'-':>20s}  skipped: {UNMAPPED[ov]}")
        elif ov in RESULTS:
            p, t, tj, at, notes = RESULTS[ov]
            lines.append(f"{ov:32s} {f'{p}/{t}':>8s} {f'{tj}/{at}':>20s}  {'; '.join(sorted(set(notes)))}")
    tested = sum(1 for ov in RESULTS if RESULTS[ov][1])
    lines.append(f"{len(_ATEN)} routed overloads: {tested} run on OpInfo samples here, {len(UNMAPPED)} without an "
                 "OpInfo entry")
    return lines


@pytest.mark.parametrize("key", _KEYS, ids=_IDS)
def test_opinfo_cpu(key: tuple[str, str, str]) -> None:
    _run_group(key, "cpu", full=False)


_FN_KEYS = [k for k in _KEYS if k[2] == "fn"]


@pytest.mark.parametrize("key", _FN_KEYS, ids=[i for k, i in zip(_KEYS, _IDS) if k[2] == "fn"])
def test_opinfo_reference_inputs_cpu(key: tuple[str, str, str]) -> None:
    """Infinities, NaN, extremal values and empty tensors (found log1p(inf), sinh past 80,
    isnan of an empty int tensor)."""
    _run_group(key, "cpu", full=False, reference=True)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("key", _KEYS, ids=_IDS)
def test_opinfo_gpu_all_samples(key: tuple[str, str, str]) -> None:
    _run_group(key, "cuda", full=True)


def test_opinfo_error_inputs_raise_as_eager() -> None:
    """OpInfo's error inputs (bad dims, ranges, dtypes) of every routed functional entry: where
    eager raises, enable() raises the same exception type (a reduction over 65 dims was
    served, arange to infinity raised Python's OverflowError)."""
    bad, n = [], 0
    for name, vname, _ in _FN_KEYS:
        op = _OPS[(name, vname)]
        try:
            errors = list(op.error_inputs("cpu"))
        except Exception:  # entries whose error generators need what this build lacks
            continue
        for ei in errors:
            call = functools.partial(op.op, ei.sample_input.input, *ei.sample_input.args, **ei.sample_input.kwargs)
            _, ref = _call(call)
            if ref is None:
                continue
            n += 1
            with T.enable(include="all"):
                _, err = _call(call)
            if type(err) is not type(ref):
                bad.append(f"{name}: eager raised {type(ref).__name__} ({ref!s:.80}), enable() {err!r:.120}")
    assert n > 50 and not bad, "\n".join(bad)


def test_every_routed_overload_is_mapped_or_explained() -> None:
    """The mapping itself: every overload enable() routes has OpInfo samples or a reason."""
    assert set(_ATEN) == {ov for ovs in GROUPS.values() for ov in ovs} | set(UNMAPPED)
    assert all(UNMAPPED.values())


def test_backward_after_a_better_rounded_forward_is_judged_against_float64(monkeypatch) -> None:
    """logsumexp of a bf16 row whose exact value is 7.3917: tritonjit rounds it to 7.40625,
    eager's CPU kernel to 7.375, and the backward exp(x - result) of each reads its own
    forward, 3% apart. The check passes it against the float64 gradient and would not
    against eager's alone."""
    from torch.testing._internal.opinfo.core import SampleInput

    op = _OPS[("logsumexp", "")]
    rows = [[-7.375, 7.375, 1.8281, -6.875, 3.0312], [0.0, 1.0, 2.0, 3.0, 4.0]]

    def sample() -> Any:
        return SampleInput(torch.tensor(rows, dtype=torch.bfloat16).requires_grad_(), args=(1,))

    with T.enable(include=["logsumexp"]):
        ours = torch.logsumexp(sample().input.detach(), 1)[0].item()
    if ours == torch.logsumexp(sample().input.detach(), 1)[0].item():
        pytest.skip("eager rounds this row as tritonjit does on this torch")
    _run_sample(op, "fn", sample(), torch.bfloat16, True)
    monkeypatch.setattr(sys.modules[__name__], "_float64_grads", lambda *a: None)
    with pytest.raises(AssertionError, match="backward"):
        _run_sample(op, "fn", sample(), torch.bfloat16, True)
