"""One call of every tritonjit_ops operator and of every aten operator ``enable()`` routes,
on plain inputs of one device and dtype.

Shared by the CPU tests (the table covers every operator and every case runs and
matches eager) and the GPU no-sync tests (each case runs under
``torch.cuda.set_sync_debug_mode("error")`` and inside a CUDA-graph capture).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F
import tritonjit_ops as T
from tritonjit_ops._registry import _ATEN

#: the public names of tritonjit_ops that are not operators
NOT_OPERATORS = {"enable", "disable", "enabled_ops", "default_ops", "dispatch_key", "audit", "audit_table", "Audit", "AuditRow",
                 "clear_policies"}


class Case(NamedTuple):
    name: str                        # the operator (direct) or the aten name, "/variant" appended
    call: Callable[[], Any]          # the call under test
    ref: Callable[[], Any] | None    # eager reference (direct cases); None: the same call without enable()


def _inputs(dev: str, dtype: torch.dtype) -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)

    def r(*shape, dt=dtype):
        return torch.randn(*shape, generator=g).to(dev, dt)

    d = {
        "x": r(4, 6), "y": r(6), "z": r(4, 6), "pos": r(4, 6).abs() + 0.5, "cond": r(4, 6) > 0,
        "x3": r(2, 4, 6), "w6": r(6), "b6": r(6),
        "xg": r(2, 4, 3), "w4": r(4), "b4": r(4),
        "a": r(5, 8), "bm": r(8, 3), "bias3": r(3), "lin": r(3, 8),
        "ba": r(2, 5, 8), "bb": r(2, 8, 3),
        "table": r(10, 6), "ids": torch.randint(0, 10, (2, 3), generator=g).to(dev),
        "sel": torch.tensor([3, 0, 3, 1]).to(dev),
        "gidx": torch.randint(0, 6, (4, 2), generator=g).to(dev),
        "logits": r(5, 11), "target": torch.tensor([1, -100, 10, 0, 3]).to(dev),
        "gate": r(3, 8), "up": r(3, 8),
        "rope": r(2, 5, 3, 8),
    }
    ang = torch.randn(5, 4, generator=g)
    d["cos"], d["sin"] = ang.cos().to(dev, dtype), ang.sin().to(dev, dtype)
    d["scalar_cpu"] = torch.tensor(2.5)  # a 0-dim CPU tensor: a scalar next to any device's tensor
    return d


def direct_cases(dev: str, dtype: torch.dtype) -> list[Case]:
    """Every operator of ``tritonjit_ops.__all__`` through its direct entry."""
    i = _inputs(dev, dtype)
    x, y, z, pos, cond = i["x"], i["y"], i["z"], i["pos"], i["cond"]
    cases = []
    for n in ("add", "sub", "mul", "div", "maximum", "minimum"):
        cases.append(Case(n, lambda n=n: getattr(T, n)(x, y), lambda n=n: getattr(torch, n)(x, y)))
    cases += [
        Case("add/alpha", lambda: T.add(x, z, alpha=2), lambda: torch.add(x, z, alpha=2)),
        Case("mul/python-scalar", lambda: T.mul(x, 1.5), lambda: x * 1.5),
        Case("mul/cpu-scalar-tensor", lambda: T.mul(x, i["scalar_cpu"]), lambda: x * i["scalar_cpu"]),
        Case("add/transposed", lambda: T.add(x.t(), z.t()), lambda: x.t() + z.t()),
        Case("pow", lambda: T.pow(pos, 2.0), lambda: torch.pow(pos, 2.0)),
    ]
    for n in ("neg", "abs", "exp", "sigmoid", "tanh", "relu"):
        cases.append(Case(n, lambda n=n: getattr(T, n)(x), lambda n=n: getattr(torch, n)(x)))
    for n in ("log", "sqrt", "rsqrt"):
        cases.append(Case(n, lambda n=n: getattr(T, n)(pos), lambda n=n: getattr(torch, n)(pos)))
    x3, w6, b6 = i["x3"], i["w6"], i["b6"]
    xg, w4, b4 = i["xg"], i["w4"], i["b4"]
    a, bm, bias3, lin, ba, bb = i["a"], i["bm"], i["bias3"], i["lin"], i["ba"], i["bb"]
    table, ids, sel, gidx = i["table"], i["ids"], i["sel"], i["gidx"]
    logits, target = i["logits"], i["target"]
    gate, up, rope, cos, sin = i["gate"], i["up"], i["rope"], i["cos"], i["sin"]
    cases += [
        Case("gelu", lambda: T.gelu(x, "tanh"), lambda: F.gelu(x, approximate="tanh")),
        Case("silu", lambda: T.silu(x), lambda: F.silu(x)),
        Case("where", lambda: T.where(cond, x, z), lambda: torch.where(cond, x, z)),
        Case("sum", lambda: T.sum(x3, (0, 2)), lambda: torch.sum(x3, (0, 2))),
        Case("sum/full", lambda: T.sum(x3), lambda: torch.sum(x3)),
        Case("mean", lambda: T.mean(x3, -1, True), lambda: torch.mean(x3, -1, True)),
        Case("amax", lambda: T.amax(x3, 1), lambda: torch.amax(x3, 1)),
        Case("amin", lambda: T.amin(x3, 1), lambda: torch.amin(x3, 1)),
        Case("argmax", lambda: T.argmax(x3, 2), lambda: torch.argmax(x3, 2)),
        Case("argmin", lambda: T.argmin(x3), lambda: torch.argmin(x3)),
        Case("softmax", lambda: T.softmax(x3, -1), lambda: torch.softmax(x3, -1)),
        Case("log_softmax", lambda: T.log_softmax(x3, 1), lambda: torch.log_softmax(x3, 1)),
        Case("layer_norm", lambda: T.layer_norm(x3, [6], w6, b6), lambda: F.layer_norm(x3, [6], w6, b6)),
        Case("rms_norm", lambda: T.rms_norm(x3, [6], w6, 1e-6), lambda: F.rms_norm(x3, [6], w6, 1e-6)),
        Case("group_norm", lambda: T.group_norm(xg, 2, w4, b4), lambda: F.group_norm(xg, 2, w4, b4)),
        Case("mm", lambda: T.mm(a, bm), lambda: torch.mm(a, bm)),
        Case("mm/linear-layout", lambda: T.mm(a, lin.t()), lambda: torch.mm(a, lin.t())),
        Case("bmm", lambda: T.bmm(ba, bb), lambda: torch.bmm(ba, bb)),
        Case("addmm", lambda: T.addmm(bias3, a, lin.t()), lambda: torch.addmm(bias3, a, lin.t())),
        Case("baddbmm", lambda: T.baddbmm(bb[:, :1], ba, bb, alpha=0.5),
             lambda: torch.baddbmm(bb[:, :1], ba, bb, alpha=0.5)),
        Case("index_select", lambda: T.index_select(table, 0, sel), lambda: torch.index_select(table, 0, sel)),
        Case("index_select/dim1", lambda: T.index_select(x3, 2, sel), lambda: torch.index_select(x3, 2, sel)),
        Case("gather", lambda: T.gather(x, 1, gidx), lambda: torch.gather(x, 1, gidx)),
        Case("embedding", lambda: T.embedding(table, ids), lambda: F.embedding(ids, table)),
        Case("fused_add_rms_norm", lambda: T.fused_add_rms_norm(x3, x3, w6, 1e-6),
             lambda: (F.rms_norm(x3 + x3, [6], w6, 1e-6), x3 + x3)),
        Case("silu_and_mul", lambda: T.silu_and_mul(gate, up), lambda: F.silu(gate) * up),
        Case("silu_and_mul/split", lambda: T.silu_and_mul(torch.cat([gate, up], -1)), lambda: F.silu(gate) * up),
        Case("rotary_embedding", lambda: T.rotary_embedding(rope, cos, sin), None),
        Case("cross_entropy", lambda: T.cross_entropy(logits, target),
             lambda: F.cross_entropy(logits.float(), target).to(dtype)),
        Case("cross_entropy/none", lambda: T.cross_entropy(logits, target, reduction="none"),
             lambda: F.cross_entropy(logits.float(), target, reduction="none").to(dtype)),
    ]
    return cases + attention_optim_direct_cases(dev, dtype)


def _aten(name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def aten_cases(dev: str, dtype: torch.dtype) -> list[Case]:
    """Every aten operator of ``_registry._ATEN``, called through ``torch.ops.aten``
    (the reference is the same call with ``enable()`` off)."""
    i = _inputs(dev, dtype)
    x, y, z, pos, cond, x3 = i["x"], i["y"], i["z"], i["pos"], i["cond"], i["x3"]
    a, bm, bias3, lin, ba, bb = i["a"], i["bm"], i["bias3"], i["lin"], i["ba"], i["bb"]
    args: dict[str, tuple] = {
        "add.Tensor": (x, y), "add.Scalar": (x, 1.5), "sub.Tensor": (x, z), "sub.Scalar": (x, 0.5),
        "mul.Tensor": (x, y), "mul.Scalar": (x, 3), "div.Tensor": (x, pos), "div.Scalar": (x, 4.0),
        "maximum": (x, z), "minimum": (x, y),
        "pow.Tensor_Tensor": (pos, x), "pow.Tensor_Scalar": (x, 2), "pow.Scalar": (2.0, x),
        "where.self": (cond, x, z),
        "sum": (x3,), "sum.dim_IntList": (x3, [1], True), "mean": (x3,), "mean.dim": (x3, [0, 2]),
        "amax": (x3, [2]), "amin": (x3, [0]), "argmax": (x3, 1), "argmin": (x3,),
        "_softmax": (x3, -1, False), "_log_softmax": (x3, 1, False),
        "native_layer_norm": (x3, [6], i["w6"], i["b6"], 1e-5),
        "native_group_norm": (i["xg"], i["w4"], i["b4"], 2, 4, 3, 2, 1e-5),
        "_fused_rms_norm": (x3, [6], i["w6"], 1e-6),
        "mm": (a, bm), "bmm": (ba, bb), "addmm": (bias3, a, lin.t()), "baddbmm": (bb[:, :1], ba, bb),
        "index_select": (i["table"], 0, i["sel"]), "gather": (x, 1, i["gidx"]), "embedding": (i["table"], i["ids"]),
    }
    args.update(_backward_args(i, dev, dtype))
    # MoE experts: 16-byte aligned rows (aten's rule), 3 groups of 12 tokens (one empty);
    # bf16 on a device, the dtype aten's CUDA kernel takes
    gdt = dtype if dev == "cpu" else torch.bfloat16
    args["_grouped_mm"] = (torch.randn(12, 16, device=dev).to(gdt), torch.randn(3, 16, 16, device=dev).to(gdt),
                           torch.tensor([4, 4, 12], dtype=torch.int32, device=dev))
    args["nll_loss_forward"] = (i["logits"], i["target"], None, 1, -100)
    _, total_weight = torch.ops.aten.nll_loss_forward(i["logits"], i["target"], None, 1, -100)
    args["nll_loss_backward"] = (torch.ones((), dtype=i["logits"].dtype, device=i["logits"].device), i["logits"],
                                 i["target"], None, 1, -100, total_weight)
    for n in ("neg", "abs", "exp", "sigmoid", "tanh", "relu", "silu", "gelu"):
        args[n] = (x,)
    for n in ("log", "sqrt", "rsqrt"):
        args[n] = (pos,)
    kwargs = {"add.Tensor": {"alpha": 2}, "gelu": {"approximate": "tanh"}}
    refs = {"_fused_rms_norm_backward": _rms_backward_ref(args["_fused_rms_norm_backward"])}  # no aten CPU kernel
    cases = [Case(n, lambda n=n, a=a: _aten(n)(*a, **kwargs.get(n, {})), refs.get(n)) for n, a in args.items()]
    special = attention_optim_aten_cases(dev, dtype)  # attention and AdamW: arguments of their own
    named = {c.name.split("/")[0] for c in special}
    cases += [_schema_case(n, i) for n in _ATEN if n not in args and n not in named]
    cases += [
        Case("mul.Tensor/cpu-scalar-tensor", lambda: _aten("mul.Tensor")(x, i["scalar_cpu"]), None),
        Case("add.Tensor/transposed", lambda: _aten("add.Tensor")(x.t(), z.t()), None),
        Case("mm/linear-layout", lambda: _aten("mm")(a, lin.t()), None),
    ]
    return cases + special


def _backward_args(i: dict[str, Any], dev: str, dtype: torch.dtype) -> dict[str, tuple]:
    """aten's backward operators, with arguments as aten's autograd passes them."""
    g = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dev, dtype)

    x, z, x3, w6, b6 = i["x"], i["z"], i["x3"], i["w6"], i["b6"]
    dy3 = r(2, 4, 6)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x3, [6], w6, b6, 1e-5)
    rms_rstd = torch.rsqrt(x3.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    _, g_mean, g_rstd = torch.ops.aten.native_group_norm(i["xg"], i["w4"], i["b4"], 2, 4, 3, 2, 1e-5)
    return {
        "_softmax_backward_data": (dy3, torch.softmax(x3, -1), -1, dtype),
        "_log_softmax_backward_data": (dy3, torch.log_softmax(x3, 1), 1, dtype),
        "native_layer_norm_backward": (dy3, x3, [6], mean, rstd, w6, b6, [True, True, True]),
        "_fused_rms_norm_backward": (dy3, x3, [6], rms_rstd, w6, [True, True]),
        "embedding_dense_backward": (r(2, 3, 6), i["ids"], 10, 2, False),
        "silu_backward": (x, z), "gelu_backward": (x, z), "sigmoid_backward": (x, z.sigmoid()),
        "tanh_backward": (x, z.tanh()), "threshold_backward": (x, z, 0.25),
        "hardtanh_backward": (x, z, -0.5, 0.5), "softplus_backward": (x, z, 2.0, 1.5),
        "glu_backward": (r(4, 3), z, 1),
        "log_sigmoid_backward": (x, z, torch.ops.aten.log_sigmoid_forward(z)[1]),  # the device's own buffer
        "native_group_norm_backward": (r(2, 4, 3), i["xg"], g_mean, g_rstd, i["w4"], 2, 4, 3, 2, [True, True, True]),
        "slice_backward": (x[:, 1:4], [4, 7], 1, 1, -3, 1), "select_backward": (x, [4, 6, 2], 2, -1),
    }


def _rms_backward_ref(args: tuple) -> Callable[[], Any]:
    dy, x, ns, _, w, _ = args

    def ref() -> Any:
        xs, ws = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        return torch.autograd.grad(F.rms_norm(xs, ns, ws, 1e-6), (xs, ws), dy)

    return ref


def _schema_case(name: str, i: dict[str, Any]) -> Case:
    """A call of ``name`` with arguments chosen from its schema: tensors like ``x`` (integers
    for bitwise ops), a bool ``mask``, Scalars, an empty ``out=`` (resized as aten does),
    ``self`` cloned first for in-place overloads (each call starts from the same values)."""
    x, z = i["x"], i["z"]
    ints = name.startswith("bitwise")
    if ints:
        x, z = (x * 10).to(torch.int32), (z * 10).to(torch.int32)
    schema = _aten(name)._schema
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    out_like = None
    base = name.partition(".")[0].rstrip("_")
    dev = x.device
    # the index family: index tensors in range, sources of matching shapes (x is [4, 6])
    by_name: dict[str, Any] = {
        "index": torch.tensor([[0, 3, 1, 2, 5, 4]] * 4, device=dev) if base.startswith("scatter")
        else torch.tensor([3, 0], device=dev),
        "src": z, "source": z[:2] if base.startswith("index") else z,
        "indices": [torch.tensor([3, 0], device=dev)], "values": z[:2],
        "dims": [1], "shifts": [2],  # flip, roll
    }
    stop = False  # a defaulted argument left out: the later positional ones too
    for k, a in enumerate(schema.arguments):
        t = str(a.type)
        t = t[len("Optional["):-1] if t.startswith("Optional[") else t
        if a.name == "out":
            out_like = x
            continue
        if a.kwarg_only or stop:
            if a.name == "rounding_mode":
                kwargs[a.name] = "floor"
            elif a.name == "device":  # factories: the inputs' device
                kwargs[a.name] = x.device
            elif a.name == "stable":
                kwargs[a.name] = True
            continue
        if a.name in by_name and not (a.name == "src" and t.startswith("Scalar")):
            v = by_name[a.name]
        elif t == "int" and a.name == "dim":
            v = 0 if base.startswith("index") else 1
        elif t in ("int", "SymInt") and a.name == "k":
            v = 2
        elif t.startswith(("List[int]", "int[]")) and a.name == "dim":
            v = [1]
        elif t.startswith(("List[Tensor]", "Tensor[]")):
            v = [x, z]
        elif t.startswith(("List[int]", "int[]", "SymInt[]")):
            v = [2, 1]
        elif t.startswith("Tensor"):
            v = i["cond"] if a.name in ("mask", "mask_") else x if k == 0 else torch.tensor(1.5).to(x.device, x.dtype) \
                if a.name == "value" else z + k
        elif t.startswith(("Scalar", "number")):
            v = {"start": 1, "end": 7, "step": 2}.get(a.name, 2 if ints else (-0.5 if a.name == "min" else 0.5) if k else 2.0)
        elif t in ("float", "bool") and a.name in ("p", "train", "scale", "from", "to", "mean", "std"):
            # random ops with results eager agrees with, through the RNG path: dropout's p = 1
            # drops everything, bernoulli's p = 1 is all ones, uniform on [0.5, 0.5], std 0
            v = {"p": 1.0, "train": True, "scale": 2.0, "from": 0.5, "to": 0.5, "mean": 0.5, "std": 0.0}[a.name]
        elif a.has_default_value():
            stop = True
            continue
        else:
            raise ValueError(f"_sync_cases: no automatic argument for {name}'s {a.name} ({t})")
        args.append(v)
    inplace = schema.arguments and schema.arguments[0].alias_info is not None and schema.arguments[0].alias_info.is_write

    def call() -> Any:
        a = [args[0].clone() if inplace else args[0], *args[1:]]
        if out_like is not None:
            kwargs["out"] = torch.empty(0, dtype=out_like.dtype, device=out_like.device)
        return _aten(name)(*a, **kwargs)

    return Case(name, call, None)


def aten_name(case: Case) -> str:
    return case.name.partition("/")[0]


def missing_direct() -> set[str]:
    """Operators of tritonjit_ops.__all__ without a direct case."""
    have = {c.name.partition("/")[0] for c in direct_cases("cpu", torch.float32)}
    return set(T.__all__) - NOT_OPERATORS - have


def missing_aten() -> set[str]:
    """Aten operators routed by enable() without a case."""
    return set(_ATEN) - {aten_name(c) for c in aten_cases("cpu", torch.float32)}


def close(got: Any, ref: Any, dtype: torch.dtype, what: str = "") -> None:
    """Loose agreement (these tests are about synchronization; exactness is tested elsewhere)."""
    if isinstance(ref, (tuple, list)):
        assert len(got) == len(ref), what
        for g, r in zip(got, ref):
            close(g, r, dtype, what)
        return
    tol = dict(rtol=3e-2, atol=3e-2) if dtype in (torch.bfloat16, torch.float16) else dict(rtol=5e-3, atol=5e-3)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (what, got.shape, ref.shape, got.dtype, ref.dtype)
    torch.testing.assert_close(got.cpu(), ref.cpu(), equal_nan=True, msg=lambda m: f"{what}: {m}", **tol)


# ---- attention and AdamW: cases with their own references --------------------------------------
def _attention_inputs(dev: str, dtype: torch.dtype) -> dict[str, Any]:
    """q, k, v (GQA: 4 query heads, 2 key heads), an upstream gradient, fp32-math outputs
    and logsumexp, and the fp32-math gradients. On a GPU in fp16/bf16 at head_dim 64 (what
    the kernels take there; fp32 would go to aten's kernels, which refuse it); on CPU at 16."""
    adt = dtype if dev == "cpu" else (torch.bfloat16 if dtype == torch.bfloat16 else torch.float16)
    d = 16 if dev == "cpu" else 64
    g = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, hh, 24, d, generator=g).to(dev, adt) for hh in (4, 2, 2, 4))
    q32, k32, v32 = (t.float().requires_grad_() for t in (q, k, v))
    kk, vv = k32.repeat_interleave(2, 1), v32.repeat_interleave(2, 1)
    scores = (q32 @ kk.transpose(-1, -2)) / d ** 0.5
    scores = scores.masked_fill(torch.ones(24, 24, dtype=torch.bool, device=dev).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, -1)
    o32 = torch.softmax(scores, -1) @ vv
    grads = torch.autograd.grad(o32, (q32, k32, v32), do.float())
    return {"q": q, "k": k, "v": v, "do": do, "o": o32.detach().to(adt), "lse": lse.detach(),
            "out_ref": o32.detach().to(adt), "grads_ref": tuple(t.to(adt) for t in grads)}


class _AdamWState:
    """Parameters, gradients and states reset from fixed values before each step (in place:
    the addresses stay, so the step's pointer tables are built once, before a capture)."""

    def __init__(self, dev: str, dtype: torch.dtype) -> None:
        g = torch.Generator().manual_seed(4)
        shapes = [(300,), (17, 5), (3,)]
        self.init = [[torch.randn(s, generator=g).to(dev, dtype) for s in shapes] for _ in range(4)]
        self.init[3] = [t.abs() for t in self.init[3]]  # exp_avg_sq >= 0
        self.work = [[t.clone() for t in ts] for ts in self.init]
        self.steps = [torch.full((), 3.0, device=dev) for _ in shapes]
        self.lr = torch.tensor(1e-2, device=dev)

    def reset(self) -> list[list[torch.Tensor]]:
        for ws, ts in zip(self.work, self.init):
            for w, t in zip(ws, ts):
                w.copy_(t)
        return self.work

    def step(self, fn: Callable[..., Any], tensor_lr: bool = False) -> tuple:
        p, g, m, v = self.reset()
        fn(p, g, m, v, [], self.steps, lr=self.lr if tensor_lr else 1e-2, beta1=0.9, beta2=0.99,
           weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
        return tuple(t.clone() for t in (*p, *m, *v))


def attention_optim_direct_cases(dev: str, dtype: torch.dtype) -> list[Case]:
    i = _attention_inputs(dev, dtype)
    q, k, v = i["q"], i["k"], i["v"]
    st = _AdamWState(dev, dtype)
    opt_params = [t.clone().requires_grad_() for t in st.init[0]]
    opt = T.AdamW(opt_params, lr=1e-2, weight_decay=0.1)
    ref_params = [t.clone().requires_grad_() for t in st.init[0]]
    ref_opt = torch.optim.AdamW(ref_params, lr=1e-2, weight_decay=0.1, foreach=False)

    def optimizer_step(o: Any, params: list[torch.Tensor]) -> tuple:
        with torch.no_grad():
            for p, p0, g0 in zip(params, st.init[0], st.init[1]):
                p.copy_(p0)
                p.grad = g0  # the same tensor each call: no allocation
            for state in o.state.values():
                state["exp_avg"].zero_()
                state["exp_avg_sq"].zero_()
                state["step"].zero_()
        o.step()
        return tuple(p.detach().clone() for p in params)

    def adamw_step(p, g, m, v, _, steps, **kw):
        return T.adamw_step(p, g, m, v, steps, lr=kw["lr"], beta1=kw["beta1"], beta2=kw["beta2"],
                            weight_decay=kw["weight_decay"], eps=kw["eps"])

    return [
        Case("attention", lambda: T.attention(q, k, v, causal=True), lambda: i["out_ref"]),
        Case("adamw_step", lambda: st.step(adamw_step), lambda: st.step(torch._fused_adamw_)),
        Case("AdamW", lambda: optimizer_step(opt, opt_params), lambda: optimizer_step(ref_opt, ref_params)),
    ]


def attention_optim_aten_cases(dev: str, dtype: torch.dtype) -> list[Case]:
    i = _attention_inputs(dev, dtype)
    q, k, v, do, o, lse = i["q"], i["k"], i["v"], i["do"], i["o"], i["lse"]
    a = torch.ops.aten
    seed = torch.zeros((), dtype=torch.int64, device=dev)
    lse_eff = torch.zeros(1, 4, 32, device=dev)
    lse_eff[..., :24] = lse
    lse_cpu = lse.transpose(1, 2).contiguous().transpose(1, 2)
    out, grads = (lambda: i["out_ref"]), (lambda: i["grads_ref"])
    st = _AdamWState(dev, dtype)
    return [
        Case("_scaled_dot_product_flash_attention",
             lambda: a._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0], out),
        Case("_scaled_dot_product_flash_attention_backward",
             lambda: a._scaled_dot_product_flash_attention_backward(do, q, k, v, o, lse, None, None, 24, 24, 0.0,
                                                                    True, seed, seed), grads),
        Case("_scaled_dot_product_flash_attention_for_cpu",
             lambda: a._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)[0], out),
        Case("_scaled_dot_product_flash_attention_for_cpu_backward",
             lambda: a._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, o, lse_cpu, 0.0, True),
             grads),
        Case("_scaled_dot_product_efficient_attention",
             lambda: a._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True)[0], out),
        Case("_scaled_dot_product_efficient_attention_backward",
             lambda: a._scaled_dot_product_efficient_attention_backward(
                 do, q, k, v, None, o, lse_eff, seed, seed, 0.0, [True, True, True, False], True)[:3], grads),
        Case("_scaled_dot_product_cudnn_attention",
             lambda: a._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, True)[0], out),
        Case("_scaled_dot_product_cudnn_attention_backward",
             lambda: a._scaled_dot_product_cudnn_attention_backward(do, q, k, v, o, lse[..., None], seed, seed, None,
                                                                    None, None, 24, 24, 0.0, True), grads),
        Case("_fused_adamw_", lambda: st.step(a._fused_adamw_), lambda: st.step(torch._fused_adamw_)),
        Case("_fused_adamw_.tensor_lr", lambda: st.step(a._fused_adamw_.tensor_lr, tensor_lr=True),
             lambda: st.step(torch._fused_adamw_, tensor_lr=True)),
    ]
