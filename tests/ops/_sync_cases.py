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
NOT_OPERATORS = {"enable", "disable", "enabled_ops", "dispatch_key", "audit", "audit_table", "Audit", "AuditRow"}


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
    return cases


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
        "mm": (a, bm), "bmm": (ba, bb), "addmm": (bias3, a, lin.t()),
        "index_select": (i["table"], 0, i["sel"]), "gather": (x, 1, i["gidx"]), "embedding": (i["table"], i["ids"]),
    }
    args["nll_loss_forward"] = (i["logits"], i["target"], None, 1, -100)
    for n in ("neg", "abs", "exp", "sigmoid", "tanh", "relu", "silu", "gelu"):
        args[n] = (x,)
    for n in ("log", "sqrt", "rsqrt"):
        args[n] = (pos,)
    kwargs = {"add.Tensor": {"alpha": 2}, "gelu": {"approximate": "tanh"}}
    cases = [Case(n, lambda n=n, a=a: _aten(n)(*a, **kwargs.get(n, {})), None) for n, a in args.items()]
    cases += [_schema_case(n, i) for n in _ATEN if n not in args]
    cases += [
        Case("mul.Tensor/cpu-scalar-tensor", lambda: _aten("mul.Tensor")(x, i["scalar_cpu"]), None),
        Case("add.Tensor/transposed", lambda: _aten("add.Tensor")(x.t(), z.t()), None),
        Case("mm/linear-layout", lambda: _aten("mm")(a, lin.t()), None),
    ]
    return cases


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
