"""Operator benchmark: tritonjit_ops against torch eager, measured in the same run.

    python benchmarks/ops.py [--json FILE] [--quick] [--inplace-sweep] [--opt-in] [--permuted]

small: host-bound latency of tiny calls, us/call (N back-to-back calls, one
synchronize; torch eager, the direct entry and torch.ops timed in interleaved
rounds, each keeping its best).
layouts: the same for small calls with the layouts a model's calls have (broadcast,
keepdim, a Python scalar, transposed and strided views, a reduction over a middle
dim), beside the direct entry's Python implementation.
inplace: in-place calls a model makes (a residual ``add_``, ``mul_`` by a Python float, MoE
routing's ``div_``, ``clamp_`` and ``//``, a broadcast ``masked_fill_``, ``relu_`` of a
transposed view) under ``enable()`` against eager, timed in alternating rounds.
opt-in (``--opt-in``): overloads that models were seen sending to aten while they were opt-in,
at the shapes those models make, under ``enable(include=[op])`` against eager: the measure by
which one joins enable()'s device default (softplus, tril, sign, logical_and_, fill_.Tensor
and reciprocal did on 2026-12-06; div with a rounding mode, erf, floor, triu and the scatters wait
for it).
permuted (``--permuted``): elementwise calls on permuted views at model sizes (an activation
of a transposed view, whose result takes that layout; an in-place clamp of a permuted view;
an activation backward of two layouts) under ``enable()`` against eager, checked first.
large: device throughput via triton.testing.do_bench, GB/s of bytes that must
move, beside the copy bandwidth of the same run (the ceiling); mm in TFLOP/s.
Targets (H200): small <= 1.0x eager, large >= 95% of copy, mm >= 0.95x torch.mm.
FlagGems and Liger are measured beside them where they are installed (optional;
each call is first checked against torch's result).
Needs an accelerator; on a CPU-only machine it runs only the small cases, tiny,
through the interpreter, as a smoke test.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

import torch

_ROOT = Path(__file__).resolve().parents[1]
for sub in ("operators", "tritonjit_core", "benchmarks"):  # benchmarks: _timing, when imported by a test
    if str(_ROOT / sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / sub))

import tritonjit  # noqa: E402
import tritonjit_ops as T  # noqa: E402
from _timing import Rounds  # noqa: E402

F = torch.nn.functional


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _others() -> dict[str, object]:
    """FlagGems and Liger, where installed: the other Triton operator libraries the
    targets name. Each is optional; a failing import is reported and skipped."""
    out: dict[str, object] = {}
    for name, mod in (("FlagGems", "flag_gems"), ("Liger", "liger_kernel.ops")):
        try:
            out[name] = __import__(mod, fromlist=["_"])
        except Exception as exc:  # not installed, or broken against this torch/triton
            print(f"{name}: not measured ({type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
    return out


def _other_impls(others: dict[str, object]) -> dict[str, dict[str, object]]:
    """case -> {library: callable(args)}; the calls mirror tritonjit's in each case."""
    impls: dict[str, dict[str, object]] = {}
    fg = others.get("FlagGems")
    if fg is not None:
        impls["add"] = {"FlagGems": lambda a, b: fg.add(a, b)}
        impls["rms_norm"] = {"FlagGems": lambda x, w: fg.rms_norm(x, [x.shape[-1]], w, 1e-6)}
        impls["softmax"] = {"FlagGems": lambda x: fg.softmax(x, -1)}
        impls["sum"] = {"FlagGems": lambda x: fg.sum_dim(x, [-1])}
        impls["silu_and_mul"] = {"FlagGems": lambda g, u: fg.silu_and_mul(g, u)}
        impls["mm"] = {"FlagGems": lambda a, b: fg.mm(a, b)}
    if others.get("Liger") is not None:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        impls.setdefault("rms_norm", {})["Liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)
        impls.setdefault("softmax", {})["Liger"] = lambda x: LigerSoftmaxFunction.apply(x)
        impls.setdefault("silu_and_mul", {})["Liger"] = lambda g, u: LigerSiLUMulFunction.apply(g, u)
    return impls


def _checked(lib: str, case: str, fn, ref) -> object | None:
    """fn if it runs and agrees with the reference result, else None (reported)."""
    try:
        got = fn()
        torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
        return fn
    except Exception as exc:
        print(f"{lib} {case}: not measured ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})", file=sys.stderr)
        return None


def small_cases(dev: str, n: int, reps: int, impls: dict) -> list[dict]:
    xs, ys = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    xr = torch.randn(4, 1024, device=dev, dtype=torch.bfloat16)
    wr = torch.ones(1024, device=dev, dtype=torch.bfloat16)
    # the last entry: torch's own operator called the way torch.ops.tritonjit's are (from
    # Python through torch.ops: a Python __call__, then torch's boxed call; the overload
    # named, as aten's packets have many to choose from), which says what that calling
    # path costs by itself
    cases = [
        ("add 1024 fp32", "add", (xs, ys), lambda: torch.add(xs, ys), lambda: T.add(xs, ys),
         lambda: torch.ops.tritonjit.add(xs, ys), lambda: torch.ops.aten.add.Tensor(xs, ys)),
        ("rms_norm 4x1024 bf16", "rms_norm", (xr, wr), lambda: F.rms_norm(xr, (1024,), wr, 1e-6),
         lambda: T.rms_norm(xr, (1024,), wr, 1e-6), lambda: torch.ops.tritonjit.rms_norm(xr, [1024], wr, 1e-6),
         lambda: torch.ops.aten.rms_norm.default(xr, [1024], wr, 1e-6)),
        ("softmax 4x1024 bf16", "softmax", (xr,), lambda: torch.softmax(xr, -1), lambda: T.softmax(xr, -1),
         lambda: torch.ops.tritonjit.softmax(xr, -1), lambda: torch.ops.aten.softmax.int(xr, -1)),
    ]
    rows = []
    for name, key, args, eager, direct, op, aten_op in cases:
        rounds = Rounds(n, reps, lambda: _sync(dev))
        rounds.add("eager", eager)
        rounds.add("direct", direct)
        rounds.add("ops", op)
        rounds.add("aten_ops", aten_op)
        ref = eager()
        for lib, impl in impls.get(key, {}).items():
            fn = _checked(lib, name, lambda impl=impl: impl(*args), ref)
            if fn is not None:
                rounds.add(lib, fn)
        t = rounds.run(warmup=min(n, 100))
        te, td, to, ta = t["eager"], t["direct"], t["ops"], t["aten_ops"]
        rows.append(dict(case=name, unit="us/call", torch=te, direct=td, torch_ops=to, aten_torch_ops=ta,
                         ratio_direct=td / te, ratio_torch_ops=to / te, ratio_aten_torch_ops=ta / te,
                         **{lib: t.get(lib) for lib in ("FlagGems", "Liger")}))
    return rows


def layout_cases(dev: str, n: int, reps: int) -> list[dict]:
    """Small calls with the layouts a model's calls have (broadcast, keepdim, a Python
    scalar, transposed and strided views), through each path: eager, the direct entry,
    the direct entry's Python implementation (``__wrapped__``: what the direct entry
    costs where the C++ path is not loaded, or does not serve the call), torch.ops."""
    dt = torch.bfloat16
    h = torch.randn(1, 16, 2048, device=dev, dtype=dt)
    bias = torch.randn(2048, device=dev, dtype=dt)
    q = torch.randn(1, 16, 32, 64, device=dev, dtype=dt)
    rot = torch.randn(1, 32, 16, 128, device=dev, dtype=dt)
    tj = torch.ops.tritonjit

    def py(op):
        fn = getattr(T, op)
        return getattr(fn, "__wrapped__", fn)

    cases = [  # name, eager, direct, the direct entry's Python implementation, torch.ops (or None)
        ("broadcast add [1,16,2048] + [2048] bf16", lambda: h + bias, lambda: T.add(h, bias),
         lambda: py("add")(h, bias), lambda: tj.add(h, bias)),
        ("mean over the last dim, keepdim, bf16", lambda: h.mean(-1, keepdim=True),
         lambda: T.mean(h, -1, keepdim=True), lambda: py("mean")(h, -1, keepdim=True), lambda: tj.mean(h, [-1], True)),
        ("tensor * python float bf16", lambda: h * 0.125, lambda: T.mul(h, 0.125), lambda: py("mul")(h, 0.125),
         lambda: tj.mul(h, 0.125)),
        ("add of transposed views bf16", lambda: q.transpose(1, 2) + q.transpose(1, 2),
         lambda: T.add(q.transpose(1, 2), q.transpose(1, 2)), lambda: py("add")(q.transpose(1, 2), q.transpose(1, 2)),
         None),
        ("rotary-like halves x[..., :64] * x[..., 64:] bf16", lambda: rot[..., :64] * rot[..., 64:],
         lambda: T.mul(rot[..., :64], rot[..., 64:]), lambda: py("mul")(rot[..., :64], rot[..., 64:]),
         lambda: tj.mul(rot[..., :64], rot[..., 64:])),
        ("softmax over dim 1 bf16", lambda: torch.softmax(h, 1), lambda: T.softmax(h, 1), lambda: py("softmax")(h, 1),
         lambda: tj.softmax(h, 1)),
    ]
    rows = []
    for name, eager, direct, python, op in cases:
        ref = eager()
        for path in (direct, python, op):
            if path is not None:
                torch.testing.assert_close(path().float(), ref.float(), rtol=2e-2, atol=2e-2)
        rounds = Rounds(n, reps, lambda: _sync(dev))
        rounds.add("eager", eager)
        rounds.add("direct", direct)
        rounds.add("python", python)
        if op is not None:
            rounds.add("ops", op)
        t = rounds.run(warmup=min(n, 100))
        te = t["eager"]
        rows.append(dict(case=name, unit="us/call", torch=te, direct=t["direct"], python=t["python"],
                         torch_ops=t.get("ops"), ratio_direct=t["direct"] / te, ratio_python=t["python"] / te,
                         ratio_torch_ops=t["ops"] / te if "ops" in t else None))
    return rows


def inplace_cases(dev: str, n: int, reps: int) -> list[dict]:
    """In-place calls (and MoE routing's floor division) under ``enable()`` against eager: each
    call's best of ``reps`` rounds, the rounds alternating eager and enabled."""
    g = torch.Generator(device=dev).manual_seed(0)
    dt = torch.bfloat16
    h = torch.randn(1, 16, 2048, device=dev, dtype=dt, generator=g)
    r = torch.randn(1, 16, 2048, device=dev, dtype=dt, generator=g) * 1e-3
    w = torch.rand(8192, 2, device=dev, generator=g) + 0.5
    ws = w.sum(-1, keepdim=True)
    ids = torch.randint(0, 8, (16384,), device=dev, generator=g)
    mask = torch.rand(1, 16, 1, device=dev, generator=g) > 0.5
    sq = torch.randn(64, 64, device=dev, dtype=dt, generator=g)
    cases = [  # name, the call, the overloads enable() routes for it
        ("residual h.add_(r) [1,16,2048] bf16", lambda: h.add_(r), ["add_.Tensor"]),
        ("h.mul_(python float) bf16", lambda: h.mul_(1.0), ["mul_.Scalar"]),
        ("MoE w.div_(w.sum) [8192,2] / [8192,1] fp32", lambda: w.div_(ws), ["div_.Tensor"]),
        ("MoE ids.clamp_(max=7) i64[16384]", lambda: ids.clamp_(max=7), ["clamp_"]),
        ("MoE ids // 2 i64[16384]", lambda: ids // 2, ["floor_divide"]),
        ("h.masked_fill_(mask [1,16,1], 0) bf16", lambda: h.masked_fill_(mask, 0.0), ["masked_fill_.Scalar"]),
        ("relu_ of a transposed view [64,64] bf16", lambda: sq.t().relu_(), ["relu_"]),
    ]
    return _eager_vs_enabled(dev, cases, n, reps)


def _eager_vs_enabled(dev: str, cases: list[tuple[str, Callable[[], Any], list[str]]], n: int, reps: int) -> list[dict]:
    """Each case (name, the call, the overloads ``enable()`` routes for it) eagerly and under
    ``enable(include=...)``: its best of ``reps`` rounds, the rounds alternating the two."""
    import time

    best: dict[tuple[str, str], float] = {}
    for i in range(reps):
        for mode in ("eager", "enable"):
            for name, fn, ops in cases:
                ctx = T.enable(include=ops, wait_native=True) if mode == "enable" else None
                try:
                    for _ in range(min(n, 100) if i == 0 else 0):
                        fn()
                    _sync(dev)
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn()
                    _sync(dev)
                    us = (time.perf_counter() - t0) / n * 1e6
                finally:
                    if ctx is not None:
                        ctx.__exit__(None, None, None)
                best[(name, mode)] = min(us, best.get((name, mode), float("inf")))
    return [dict(case=name, unit="us/call", torch=best[(name, "eager")], enabled=best[(name, "enable")],
                 ratio=best[(name, "enable")] / best[(name, "eager")]) for name, _, _ in cases]


def inplace_sweep_calls(dev: str, shape: tuple[int, ...] = (1, 16, 2048)) -> list[tuple[str, Callable[[], Any]]]:
    """One call of every in-place overload that has a C++ plan, built from its aten schema: a
    bf16 ``self`` of ``shape`` (int64 for the bitwise ops), a same-shape tensor for each tensor
    argument, a (1, ..., 1)-broadcast bool mask for ``masked_fill_``, a scalar for each scalar and
    the schema's defaults for the rest. What a model's residual, scale and activation calls are."""
    from tritonjit_ops import elementwise

    g = torch.Generator(device=dev).manual_seed(0)
    names = sorted(n for n in elementwise.PLANNERS if n.split(".")[0].endswith("_"))  # the in-place pointwise ones
    calls = []
    for name in names:
        op, _, overload = name.partition(".")
        fn = getattr(getattr(torch.ops.aten, op), overload or "default")
        ints = op.startswith("bitwise_")
        dt = torch.int64 if ints else torch.bfloat16

        def tensor(dt: torch.dtype = dt) -> torch.Tensor:
            if dt == torch.int64:
                return torch.randint(1, 100, shape, device=dev, generator=g)
            return (torch.rand(shape, device=dev, generator=g) * 0.5 + 0.25).to(dt)

        args: list[Any] = [tensor()]
        kwargs: dict[str, Any] = {}
        for a in fn._schema.arguments[1:]:
            t = str(a.type)
            if a.name == "mask":
                args.append(torch.rand(shape[:-1] + (1,), device=dev, generator=g) > 0.5)
            elif a.name == "value" and t == "Tensor":  # masked_fill_.Tensor: a 0-dim value
                args.append(torch.tensor(0.5 if not ints else 3, device=dev, dtype=dt))
            elif op.startswith("clamp") and a.name in ("min", "max"):
                hi = a.name == "max"
                kwargs[a.name] = (tensor() * (1 if hi else 0.5)) if "Tensor" in t else (0.75 if hi else 0.25)
            elif a.has_default_value():
                continue
            elif t == "Tensor":
                args.append(tensor())
            elif t == "number":
                args.append(3 if ints else 0.5)
            elif t in ("str", "Optional[str]"):
                kwargs[a.name] = "floor"
            else:
                raise TypeError(f"inplace_sweep_calls: {name}: no value for {a.name} of type {t}")
        calls.append((name, lambda fn=fn, args=tuple(args), kwargs=kwargs: fn(*args, **kwargs)))
    return calls


def inplace_sweep(dev: str, n: int, reps: int) -> list[dict]:
    """Every planned in-place overload (:func:`inplace_sweep_calls`) under ``enable()`` against
    eager: each call's best of ``reps`` rounds, the rounds alternating eager and enabled. The
    measure ``enable()``'s device default takes in-place overloads by."""
    return _eager_vs_enabled(dev, [(name, fn, [name]) for name, fn in inplace_sweep_calls(dev)], n, reps)


def _model_randn(dev: str, g: torch.Generator, small: bool) -> Callable[..., torch.Tensor]:
    """``r(*shape, dt=bf16)``: a standard normal tensor of a model's shape (``small``: each dim at
    most 8, the interpreter's stand-in), drawn from ``g``."""
    def r(*shape: int, dt: torch.dtype = torch.bfloat16) -> torch.Tensor:
        if small:
            shape = tuple(min(d, 8) for d in shape)
        return torch.randn(*shape, device=dev, generator=g).to(dt)

    return r


def opt_in_calls(dev: str, small: bool = False) -> list[tuple[str, Callable[[], Any], list[str]]]:
    """(name, the call, the overload it routes) for overloads that were or are opt-in, at the
    shapes models make (``small``: tiny stand-ins, for the interpreter): Mamba's time-step
    softplus (bf16 and its fp32 cast, decode and prefill), Mamba-2's chunk masks (tril of bool,
    fp32 and bf16 blocks), DeBERTa's relative-position sign (int64), attention-mask ands (a
    broadcast bool mask), a fill from a 0-dim device tensor and reciprocals, which joined the
    device default on 2026-12-06, as did erf, floor, triu and an MoE router's scatters later
    that day, with an MoE combine's index_add_; and, still opt-in, a floor division of lengths."""
    g = torch.Generator(device=dev).manual_seed(0)
    f32 = torch.float32
    r = _model_randn(dev, g, small)

    def b(*shape: int) -> torch.Tensor:
        return r(*shape, dt=f32) > 0

    sp = torch.nn.functional.softplus
    x1, x2, x3, x4 = r(4, 256, 512), r(4, 256, 512, dt=f32), r(1, 1, 512, dt=f32), r(8, 1024, 2048)
    ones, t5, t4 = b(256, 256) | True, r(4, 8, 4, 64, 64, dt=f32), r(4, 8, 256, 256)
    pos, s3 = (r(256, 256, dt=f32) * 300).long(), r(4, 256, 256, dt=f32)
    m4, m1, a2, b2 = b(4, 1, 256, 256), b(1, 1, 256, 256), b(4, 256), b(4, 256)
    f1, v1, f2, v2 = r(4, 256, 1024, dt=f32), torch.tensor(0.5, device=dev), r(1, 8), torch.tensor(2.0, device=dev)
    q1, q2, q3 = r(4, 256, dt=f32), r(4, 256, 1024), r(1 << 24, dt=f32)
    lens = torch.tensor([16000, 15200, 9600, 4000], device=dev)[: 2 if small else 4]
    e1, c1, c2 = r(4, 256, 1024), r(1, 256, dt=f32) * 100, r(4, 256, dt=f32) * 100
    u1, u2 = b(64, 64) | True, r(256, 256, dt=f32)
    tokens, experts = (8, 8) if small else (1024, 64)
    topk = torch.rand(tokens, experts, device=dev, generator=g).topk(4 if small else 8, dim=1).indices
    z1, z2, w1 = r(tokens, experts) * 0, r(tokens, experts, dt=f32) * 0, r(tokens, topk.shape[1], dt=f32)
    n1, h1, n2, h2 = (8, 8, 8, 4) if small else (1024, 256, 8192, 2048)
    acc1, s1, acc2, s2 = r(n1, h1) * 0, r(n1 // 4, h1), r(n2, h2) * 0, r(n2 // 4, h2)
    ids1 = torch.randperm(n1, device=dev, generator=g)[: n1 // 4]
    ids2 = torch.randperm(n2, device=dev, generator=g)[: n2 // 4]
    return [
        ("softplus bf16 [4,256,512]", lambda: sp(x1), ["softplus"]),
        ("softplus fp32 [4,256,512]", lambda: sp(x2), ["softplus"]),
        ("softplus fp32 [1,1,512] (decode)", lambda: sp(x3), ["softplus"]),
        ("softplus bf16 [8,1024,2048]", lambda: sp(x4), ["softplus"]),
        ("tril bool [256,256]", lambda: torch.tril(ones), ["tril"]),
        ("tril(-1) fp32 [4,8,4,64,64]", lambda: torch.tril(t5, -1), ["tril"]),
        ("tril bf16 [4,8,256,256]", lambda: torch.tril(t4), ["tril"]),
        ("sign i64 [256,256]", lambda: torch.sign(pos), ["sign"]),
        ("sign fp32 [4,256,256]", lambda: torch.sign(s3), ["sign"]),
        ("logical_and_ bool [4,1,256,256] & [1,1,256,256]", lambda: m4.logical_and_(m1), ["logical_and_"]),
        ("logical_and_ bool [4,256]", lambda: a2.logical_and_(b2), ["logical_and_"]),
        ("fill_(0-dim tensor) fp32 [4,256,1024]", lambda: f1.fill_(v1), ["fill_.Tensor"]),
        ("fill_(0-dim tensor) bf16 [1,8]", lambda: f2.fill_(v2), ["fill_.Tensor"]),
        ("reciprocal fp32 [4,256]", lambda: torch.reciprocal(q1), ["reciprocal"]),
        ("reciprocal bf16 [4,256,1024]", lambda: torch.reciprocal(q2), ["reciprocal"]),
        ("reciprocal fp32 [16M]", lambda: torch.reciprocal(q3), ["reciprocal"]),
        # seen on aten in the 149-architecture sweep (2026-12-06): the audio encoders' conv output
        # lengths (Wav2Vec2, HuBERT, WavLM, SEW-D; still opt-in), ESM's and SEW-D's erf GELU, Llama 4's
        # and LongT5's floor of positions, ProphetNet's and Qwen3-Next's triangular masks
        ("div(rounding_mode='floor') i64 [4] (conv output lengths)",
         lambda: torch.div(lens - 400, 320, rounding_mode="floor"), ["div.Tensor_mode"]),
        ("erf bf16 [4,256,1024]", lambda: torch.erf(e1), ["erf"]),
        ("floor fp32 [1,256] (positions)", lambda: torch.floor(c1), ["floor"]),
        ("floor fp32 [4,256]", lambda: torch.floor(c2), ["floor"]),
        ("triu(1) bool [64,64]", lambda: torch.triu(u1, 1), ["triu"]),
        ("triu fp32 [256,256]", lambda: torch.triu(u2), ["triu"]),
        # an MoE router's masks and weights (DeepSeek-V3, GLM-4-MoE, dots1, DBRX, Switch, NLLB-MoE)
        ("scatter_(1, topk, 1.0) bf16 [1024,64] (a router's mask)", lambda: z1.scatter_(1, topk, 1.0),
         ["scatter_.value"]),
        ("scatter_(1, topk, weights) fp32 [1024,64]", lambda: z2.scatter_(1, topk, w1), ["scatter_.src"]),
        ("scatter_add_(1, topk, weights) fp32 [1024,64] (on a clone)", lambda: z2.clone().scatter_add_(1, topk, w1),
         ["scatter_add_"]),
        # an MoE layer's combine, once per expert (DBRX, Switch, NLLB-MoE, Mixtral's transformers 4.x
        # code), in bf16: by 16-bit atomics on an NVIDIA GPU
        ("index_add_(0, token_ids, expert_out) bf16 [1024,256] <- [256,256] (on a clone)",
         lambda: acc1.clone().index_add_(0, ids1, s1), ["index_add_"]),
        ("index_add_(0, token_ids, expert_out) bf16 [8192,2048] <- [2048,2048] (on a clone)",
         lambda: acc2.clone().index_add_(0, ids2, s2), ["index_add_"]),
    ]


def permuted_calls(dev: str, small: bool = False) -> list[tuple[str, Callable[[], Any], list[str]]]:
    """(name, the call, the overload it routes) for elementwise calls on permuted views at model
    sizes (``small``: tiny stand-ins, for the interpreter): an activation of a transposed or
    head-permuted view (whose result takes the view's layout, as aten's does), a clamp and an
    exp of a transposed matrix, an in-place clamp of a permuted view, an activation backward of
    two layouts. The elementwise kernel walked such calls in logical order until 2026-12-06,
    writing one element per memory sector (13.9x eager at 8M bf16 elements)."""
    g = torch.Generator(device=dev).manual_seed(0)
    f32 = torch.float32
    r = _model_randn(dev, g, small)

    F = torch.nn.functional
    x1, x2, x3 = r(8, 2048, 1024).transpose(1, 2), r(4, 256, 8, 64).permute(0, 2, 1, 3), r(4, 256, 512).transpose(1, 2)
    m1, m2 = r(2048, 1024, dt=f32).t(), r(2048, 2048, dt=f32).t()  # m1 under 4M: larger clamps are aten's
    p1 = r(4, 8, 256, 64).permute(0, 2, 1, 3)
    gy, x4 = r(8, 1024, 2048), r(8, 2048, 1024).transpose(1, 2)
    silu_bwd = torch.ops.aten.silu_backward
    return [
        ("gelu of a transposed bf16 [8,1024,2048] view", lambda: F.gelu(x1), ["gelu"]),
        ("silu of a head-permuted bf16 [4,8,256,64] view", lambda: F.silu(x2), ["silu"]),
        ("softplus of a transposed bf16 [4,512,256] view", lambda: F.softplus(x3), ["softplus"]),
        ("clamp(-1, 1) of a transposed fp32 [1024,2048]", lambda: torch.clamp(m1, -1.0, 1.0), ["clamp"]),
        ("exp of a transposed fp32 [2048,2048]", lambda: torch.exp(m2), ["exp"]),
        ("clamp_(-2, 2) of a permuted bf16 [4,256,8,64] view", lambda: p1.clamp_(-2.0, 2.0), ["clamp_"]),
        ("silu_backward, contiguous grad, transposed input, bf16 8M", lambda: silu_bwd(gy, x4), ["silu_backward"]),
        ("log_sigmoid of a transposed bf16 [8,1024,2048] view (opt-in)", lambda: F.logsigmoid(x1),
         ["log_sigmoid_forward"]),
    ]


def checked_cases(dev: str, calls: list[tuple[str, Callable[[], Any], list[str]]], n: int, reps: int) -> list[dict]:
    """``calls`` (:func:`opt_in_calls`, :func:`permuted_calls`) under ``enable(include=[op])``
    against eager, each first checked against eager's result, values and strides (a mismatch
    is a row's ``error``, and its time is still given)."""
    errors = {}
    for name, fn, ops in calls:
        ref = fn().clone()
        with T.enable(include=ops, wait_native=True):
            got = fn().clone()
        if got.dtype != ref.dtype or not torch.allclose(got.float(), ref.float(), rtol=1e-2, atol=1e-2, equal_nan=True):
            errors[name] = f"differs from eager (max {(got.double() - ref.double()).abs().max().item():.3g})"
        elif got.stride() != ref.stride():
            errors[name] = f"strides {got.stride()}, eager's {ref.stride()}"
    rows = _eager_vs_enabled(dev, calls, n, reps)
    for row in rows:
        if row["case"] in errors:
            row["error"] = errors[row["case"]]
    return rows


def inplace_table(rows: list[dict]) -> str:
    out = ["| in-place call | unit | torch eager | under enable() | ratio |", "| --- | --- | --- | --- | --- |"]
    out += [f"| {r['case']} | {r['unit']} | {r['torch']:.2f} | {r['enabled']:.2f} | {r['ratio']:.2f}x |" for r in rows]
    return "\n".join(out)


def large_cases(dev: str, impls: dict) -> list[dict]:
    from triton.testing import do_bench

    def gbps(fn, nbytes):
        return nbytes / do_bench(fn) / 1e6

    def others(row: dict, key: str, args: tuple, ref, nbytes: int) -> dict:
        for lib, impl in impls.get(key, {}).items():
            fn = _checked(lib, row["case"], lambda impl=impl: impl(*args), ref)
            row[lib] = gbps(fn, nbytes) if fn is not None else None
        return row

    rows = []
    n = 1 << 27
    a, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
    copy = gbps(lambda: a.copy_(b), 2 * n * 4)
    rows.append(dict(case="copy 2^27 fp32 (ceiling)", unit="GB/s", torch=copy, tritonjit=copy))
    rows.append(others(dict(case="add 2^27 fp32", unit="GB/s", torch=gbps(lambda: torch.add(a, b), 3 * n * 4),
                            tritonjit=gbps(lambda: T.add(a, b), 3 * n * 4)), "add", (a, b), a + b, 3 * n * 4))
    a = b = None  # free the memory before the next case (the closures ran already)
    m, k = 32768, 4096
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.ones(k, device=dev, dtype=torch.bfloat16)
    nb = 2 * m * k * 2
    rows.append(others(dict(case="rms_norm 32768x4096 bf16", unit="GB/s",
                            torch=gbps(lambda: F.rms_norm(x, (k,), w, 1e-6), nb),
                            tritonjit=gbps(lambda: T.rms_norm(x, (k,), w, 1e-6), nb)),
                       "rms_norm", (x, w), F.rms_norm(x, (k,), w, 1e-6), nb))
    rows.append(others(dict(case="softmax 32768x4096 bf16", unit="GB/s", torch=gbps(lambda: torch.softmax(x, -1), nb),
                            tritonjit=gbps(lambda: T.softmax(x, -1), nb)),
                       "softmax", (x,), torch.softmax(x, -1), nb))
    rows.append(others(dict(case="sum last dim 32768x4096 bf16", unit="GB/s", torch=gbps(lambda: torch.sum(x, -1), nb // 2),
                            tritonjit=gbps(lambda: T.sum(x, -1), nb // 2)),
                       "sum", (x,), torch.sum(x, -1), nb // 2))
    g, u = torch.randn_like(x), torch.randn_like(x)
    rows.append(others(dict(case="silu_and_mul 32768x4096 bf16", unit="GB/s",
                            torch=gbps(lambda: F.silu(g) * u, 3 * m * k * 2),
                            tritonjit=gbps(lambda: T.silu_and_mul(g, u), 3 * m * k * 2)),
                       "silu_and_mul", (g, u), F.silu(g) * u, 3 * m * k * 2))
    for r in rows:
        r["ratio"] = r["tritonjit"] / r["torch"]
        r["of_copy"] = r["tritonjit"] / copy
    x = g = u = None  # likewise
    s = 8192
    A = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    B = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    fl = 2 * s**3
    T.mm(A, B)  # tunes (or finds the stored config) before anything is timed
    mm_others = {lib: _checked(lib, "mm", lambda impl=impl: impl(A, B), torch.mm(A, B))
                 for lib, impl in impls.get("mm", {}).items()}
    # compute-bound: the clock drifts with the card's temperature, so the paths are
    # timed in alternating rounds and each keeps its best
    best = {"torch": 0.0, "tritonjit": 0.0, **{lib: 0.0 for lib, fn in mm_others.items() if fn is not None}}
    for _ in range(3):
        best["torch"] = max(best["torch"], fl / do_bench(lambda: torch.mm(A, B), rep=200) / 1e9)
        best["tritonjit"] = max(best["tritonjit"], fl / do_bench(lambda: T.mm(A, B), rep=200) / 1e9)
        for lib, fn in mm_others.items():
            if fn is not None:
                best[lib] = max(best[lib], fl / do_bench(fn, rep=200) / 1e9)
    import importlib

    from tritonjit._autotune import tuner_of

    matmul = importlib.import_module("tritonjit_ops.matmul")
    picked = [c.all_kwargs() for c in tuner_of(matmul._mm_tuned).chosen.values()]
    print(f"mm: the tuner's config {picked}", file=sys.stderr)
    rows.append(dict(case="mm 8192^3 bf16", unit="TFLOP/s", ratio=best["tritonjit"] / best["torch"], config=picked,
                     **{k: best.get(k) for k in ("torch", "tritonjit", "FlagGems", "Liger")}))
    return rows


def _cell(v: object, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def layout_table(rows: list[dict]) -> str:
    out = ["| layout | unit | torch eager | tritonjit direct | its Python implementation | tritonjit torch.ops | "
           "ratio (direct, Python implementation, ops) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ops = _cell(r["ratio_torch_ops"], ".2f")
        out.append(f"| {r['case']} | {r['unit']} | {r['torch']:.2f} | {r['direct']:.2f} | {r['python']:.2f} | "
                   f"{_cell(r['torch_ops'], '.2f')} | {r['ratio_direct']:.2f}x, {r['ratio_python']:.2f}x, "
                   f"{ops + 'x' if r['ratio_torch_ops'] is not None else ops} |")
    return "\n".join(out)


def table(small: list[dict], large: list[dict]) -> str:
    out = ["| case | unit | torch eager | tritonjit direct | tritonjit torch.ops | aten through torch.ops | FlagGems | "
           "Liger | ratio (direct, ops; aten through torch.ops) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in small:
        out.append(f"| {r['case']} | {r['unit']} | {r['torch']:.2f} | {r['direct']:.2f} | {r['torch_ops']:.2f} | "
                   f"{r['aten_torch_ops']:.2f} | {_cell(r.get('FlagGems'), '.2f')} | {_cell(r.get('Liger'), '.2f')} | "
                   f"{r['ratio_direct']:.2f}x, {r['ratio_torch_ops']:.2f}x; {r['ratio_aten_torch_ops']:.2f}x |")
    if large:
        out += ["", "| case | unit | torch eager | tritonjit | FlagGems | Liger | ratio | of copy |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in large:
            oc = f"{r['of_copy']:.0%}" if "of_copy" in r else "-"
            out.append(f"| {r['case']} | {r['unit']} | {r['torch']:.1f} | {r['tritonjit']:.1f} | "
                       f"{_cell(r.get('FlagGems'), '.1f')} | {_cell(r.get('Liger'), '.1f')} | {r['ratio']:.2f}x | {oc} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--quick", action="store_true", help="fewer calls per measurement")
    p.add_argument("--inplace-sweep", action="store_true",
                   help="also time every planned in-place overload under enable() against eager")
    p.add_argument("--permuted", action="store_true",
                   help="also time elementwise calls on permuted views at model sizes (an activation of a "
                        "transposed view, ...) under enable() against eager")
    p.add_argument("--opt-in", action="store_true",
                   help="also time the overloads models sent to aten while opt-in (softplus, tril, sign, erf, "
                        "floor, triu, ...) at those models' shapes against eager")
    args = p.parse_args(argv)
    dev = tritonjit.current_backend().info.device_type or "cpu"  # the interpreter's tensors live on the CPU
    from tritonjit import _native
    from tritonjit_ops import _native_ops, _prologue

    # all three are built in the background on first use: measure them in use
    print(f"torch tensor reader in use: {_native.install_tensor_reader(wait=True)}; "
          f"C++ call prologues in use: {_prologue.start(wait=True)}; "
          f"C++ operator path (torch.ops) in use: {_native_ops.module(wait=True) is not None}")
    impls = _other_impls(_others()) if dev == "cuda" else {}
    if dev == "cpu":
        print("no CUDA device: small cases only, through the interpreter (a smoke test, not a measurement)")
        small = small_cases(dev, n=5, reps=1, impls=impls)
        layouts = layout_cases(dev, n=3, reps=1)
        inplace = inplace_cases(dev, n=2, reps=1)
        sweep = inplace_sweep(dev, n=1, reps=1) if args.inplace_sweep else []
        opt_in = checked_cases(dev, opt_in_calls(dev, small=True), n=1, reps=1) if args.opt_in else []
        permuted = checked_cases(dev, permuted_calls(dev, small=True), n=1, reps=1) if args.permuted else []
        large: list[dict] = []
    else:
        small = small_cases(dev, n=2000 if args.quick else 10000, reps=3 if args.quick else 5, impls=impls)
        layouts = layout_cases(dev, n=2000 if args.quick else 5000, reps=3 if args.quick else 5)
        inplace = inplace_cases(dev, n=2000 if args.quick else 5000, reps=3 if args.quick else 5)
        sweep = inplace_sweep(dev, n=2000, reps=3 if args.quick else 5) if args.inplace_sweep else []
        reps = 3 if args.quick else 7
        opt_in = checked_cases(dev, opt_in_calls(dev), n=200, reps=reps) if args.opt_in else []
        permuted = checked_cases(dev, permuted_calls(dev), n=100, reps=reps) if args.permuted else []
        large = large_cases(dev, impls)
    meta = dict(device=torch.cuda.get_device_name() if dev == "cuda" else "cpu", torch=torch.__version__,
                backend=tritonjit.current_backend().name)
    print(table(small, large))
    print()
    print(layout_table(layouts))
    print()
    print(inplace_table(inplace))
    if sweep:
        print()
        print(inplace_table(sweep).replace("in-place call", "in-place overload (sweep)", 1))
    for rows, title in ((opt_in, "opt-in overload"), (permuted, "call on a permuted view")):
        if rows:
            print()
            print(inplace_table(rows).replace("in-place call", title, 1))
            for r in rows:
                if "error" in r:
                    print(f"MISMATCH {r['case']}: {r['error']}")
    if dev == "cuda":  # calls the native dispatcher served, and those it left to the Python path
        import importlib

        mods = {m: importlib.import_module(f"tritonjit_ops.{m}") for m in ("pointwise", "norm", "softmax")}
        for name, f in (("add", mods["pointwise"]._binary_flat), ("rms_norm", mods["norm"]._norm),
                        ("softmax", mods["softmax"]._softmax)):
            d = getattr(f, "_dispatcher", None)
            print(f"dispatcher {name}: {d.stats() if d is not None else 'none (Python path)'}")
    if args.json:
        rows = dict(meta=meta, small=small, layouts=layouts, inplace=inplace, inplace_sweep=sweep, opt_in=opt_in,
                    permuted=permuted, large=large)
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
