"""torch.library registration: the ``tritonjit::`` operators, and ``enable()`` for aten.

Registration uses ``torch.library.Library`` with ``define`` + ``impl`` (about 1.6 us
of dispatcher cost) rather than ``@torch.library.custom_op`` (about 7 us). Where the
Python signature accepts what the dispatcher passes (positional arguments; keyword-only
ones, as keywords, only when not at their default) the operator function itself is
the impl, so a call enters its hot path with no wrapper frame in between. Fake
implementations run the eager reference under FakeTensorMode and return a
contiguous result, which is what the real kernels allocate, so
``torch.compile(fullgraph=True)`` traces models that call the ops.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings
from typing import Any, Callable, Iterable, Iterator

import torch
import tritonjit

from . import (
    _direct,
    _native_ops,
    _packets,
    fused,
    gated,
    indexing,
    log_sigmoid,
    matmul,
    norm,
    pointwise,
    reduction,
    reorder,
    softmax,
)
from . import autograd as _autograd
from ._common import backend_device_type, fp32_exact
from ._fallback import with_aten_fallback
from ._plan import aten_plan
from .copy import ATEN as _COPY_ATEN
from .copy import PLANNERS as _COPY_PLANNERS
from .elementwise import ATEN as _ELEMENTWISE_ATEN
from .elementwise import PLANNERS as _ELEMENTWISE_PLANNERS
from .loss import ATEN as _LOSS_ATEN
from .loss import PLANNERS as _LOSS_PLANNERS
from .random import ATEN as _RANDOM_ATEN
from .rowwise import ATEN as _ROWWISE_ATEN
from .rowwise import PLANNERS as _ROWWISE_PLANNERS
from .scatter import ATEN as _SCATTER_ATEN
from .scatter import PLANNERS as _SCATTER_PLANNERS

F = torch.nn.functional
Tensor = torch.Tensor

__all__ = ["dispatch_key", "enable", "disable", "enabled_ops", "default_ops"]


def dispatch_key() -> str:
    """The active backend's dispatch key: CPU for the interpreter, CUDA for cuda."""
    return tritonjit.current_backend().dispatch_key


def _contig(r):
    if isinstance(r, Tensor):
        return r.contiguous()
    return tuple(_contig(t) for t in r)


def _fake(ref: Callable) -> Callable:
    def fake(*args, **kwargs):
        return _contig(ref(*args, **kwargs))

    return fake


# name, schema, real implementation, eager reference (for the fake)
_OPS: list[tuple[str, str, Callable, Callable]] = [
    ("add.Tensor", "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     pointwise.add, lambda x, y, alpha=1: torch.add(x, y, alpha=alpha)),
    ("add.Scalar", "(Tensor self, Scalar other, *, Scalar alpha=1) -> Tensor",
     pointwise.add, lambda x, y, alpha=1: torch.add(x, y, alpha=alpha)),
    ("sub.Tensor", "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     pointwise.sub, lambda x, y, alpha=1: torch.sub(x, y, alpha=alpha)),
    ("sub.Scalar", "(Tensor self, Scalar other, *, Scalar alpha=1) -> Tensor",
     pointwise.sub, lambda x, y, alpha=1: torch.sub(x, y, alpha=alpha)),
]
for _n in ("mul", "div", "maximum", "minimum"):
    _OPS.append((f"{_n}.Tensor", "(Tensor self, Tensor other) -> Tensor", getattr(pointwise, _n), getattr(torch, _n)))
for _n in ("mul", "div"):
    _OPS.append((f"{_n}.Scalar", "(Tensor self, Scalar other) -> Tensor", getattr(pointwise, _n), getattr(torch, _n)))
_OPS += [
    ("pow.Tensor_Tensor", "(Tensor self, Tensor exponent) -> Tensor", pointwise.pow, torch.pow),
    ("pow.Tensor_Scalar", "(Tensor self, Scalar exponent) -> Tensor", pointwise.pow, torch.pow),
    ("pow.Scalar", "(Scalar self, Tensor exponent) -> Tensor", pointwise.pow, torch.pow),
]
for _n in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu"):
    _OPS.append((_n, "(Tensor self) -> Tensor", getattr(pointwise, _n), getattr(torch, _n)))
_OPS += [
    ("silu", "(Tensor self) -> Tensor", pointwise.silu, F.silu),
    ("gelu", "(Tensor self, *, str approximate='none') -> Tensor", pointwise.gelu,
     lambda x, approximate="none": F.gelu(x, approximate=approximate)),
    ("where", "(Tensor condition, Tensor self, Tensor other) -> Tensor", pointwise.where, torch.where),
    ("sum", "(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     reduction.sum,
     lambda x, dim=None, keepdim=False, dtype=None: (
         torch.sum(x, dim, keepdim, dtype=dtype) if dim is not None
         else torch.sum(x, tuple(range(x.dim())), keepdim, dtype=dtype) if x.dim() else torch.sum(x, dtype=dtype))),
    ("mean", "(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     reduction.mean,
     lambda x, dim=None, keepdim=False, dtype=None: (
         torch.mean(x, dim, keepdim, dtype=dtype) if dim is not None
         else torch.mean(x, tuple(range(x.dim())), keepdim, dtype=dtype) if x.dim() else torch.mean(x, dtype=dtype))),
    ("amax", "(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", reduction.amax, torch.amax),
    ("amin", "(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", reduction.amin, torch.amin),
    ("argmax", "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", reduction.argmax, torch.argmax),
    ("argmin", "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", reduction.argmin, torch.argmin),
    ("softmax", "(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", softmax.softmax, torch.softmax),
    ("log_softmax", "(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", softmax.log_softmax,
     torch.log_softmax),
    ("layer_norm", "(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
                   "float eps=1e-05) -> Tensor", norm.layer_norm, F.layer_norm),
    ("rms_norm", "(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",
     norm.rms_norm, F.rms_norm),
    ("group_norm", "(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
                   "-> Tensor", norm.group_norm, F.group_norm),
    ("mm", "(Tensor self, Tensor mat2) -> Tensor", matmul.mm, torch.mm),
    ("bmm", "(Tensor self, Tensor mat2) -> Tensor", matmul.bmm, torch.bmm),
    ("addmm", "(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
     matmul.addmm, torch.addmm),
    ("baddbmm", "(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
     matmul.baddbmm, torch.baddbmm),
    ("index_select", "(Tensor self, int dim, Tensor index) -> Tensor", indexing.index_select, torch.index_select),
    ("gather", "(Tensor self, int dim, Tensor index) -> Tensor", indexing.gather, torch.gather),
    ("embedding", "(Tensor weight, Tensor indices) -> Tensor", indexing.embedding,
     lambda w, i: F.embedding(i, w)),
    ("fused_add_rms_norm", "(Tensor x, Tensor residual, Tensor? weight, float eps=1e-06) -> (Tensor, Tensor)",
     norm.fused_add_rms_norm,
     lambda x, r, w, eps=1e-6: (F.rms_norm(x + r, x.shape[-1:], w, eps), x + r)),
    ("silu_and_mul", "(Tensor gate, Tensor? up=None) -> Tensor", fused.silu_and_mul,
     lambda g, u=None: F.silu(g[..., : g.shape[-1] // 2]) * g[..., g.shape[-1] // 2:] if u is None
     else F.silu(g) * u),
    ("rotary_embedding", "(Tensor x, Tensor cos, Tensor sin, bool interleaved=False) -> Tensor",
     fused.rotary_embedding, lambda x, c, s, interleaved=False: torch.empty_like(x)),
    ("cross_entropy", "(Tensor logits, Tensor target, int ignore_index=-100, str reduction='mean') -> Tensor",
     fused.cross_entropy, lambda lg, t, ignore_index=-100, reduction="mean": F.cross_entropy(
         lg.float(), t, ignore_index=ignore_index, reduction=reduction).to(lg.dtype)),
]

from . import attention, grouped_mm, optim  # noqa: E402 - its own import block, so that families merge without conflicts

_OPS += attention.OPS
_lib = torch.library.Library("tritonjit", "DEF")
_KEY = dispatch_key()
for _name, _schema, _impl, _ref in _OPS:
    _base, _, _overload = _name.partition(".")
    _lib.define(f"{_name}{_schema}")
    _lib.impl(_name, _impl, _KEY)
    torch.library.register_fake(f"tritonjit::{_name}", _fake(_ref), lib=_lib)
# backward ops, and each op's autograd (flash_attention's and its backward's: attention.register_autograd)
_autograd.register(_lib, _KEY, [(o[0], o[1]) for o in _OPS if not o[0].startswith("flash_attention")])
attention.register_autograd(_lib)
_packets.speed_up("tritonjit", (o[0].partition(".")[0] for o in _OPS))


def _first(planner: Callable) -> Callable:
    """A planner of an op returning (out, stats...) made to return out only."""
    def plan(*args: Any, **kwargs: Any) -> Any:
        p = planner(*args, **kwargs)
        return None if p is None else p._replace(result=p.result[:1])

    return plan


def _plan_group_norm(x: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    if not isinstance(x, Tensor) or x.dim() < 2:
        return None
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // (n * c) if n * c else 1
    # aten's argument order is (input, weight, bias, ...), this op's (input, num_groups, weight, bias, eps)
    return _remap_inputs(norm.plan_native_group_norm(x, weight, bias, n, c, hw, num_groups, eps), {1: 2, 2: 3})


def _remap_inputs(plan: Any, where: dict[int, int]) -> Any:
    """``plan`` with its references to argument i (In(i), InItem(i, k)) moved to argument
    where[i] (a planner of another argument order)."""
    if plan is None:
        return None
    from ._plan import In, InItem

    def ref(a: Any) -> Any:
        if type(a) is In:
            return In(where.get(a.i, a.i))
        return InItem(where.get(a.i, a.i), a.k) if type(a) is InItem else a

    return plan._replace(launches=tuple(L._replace(args=tuple(ref(a) for a in L.args)) for L in plan.launches),
                         contiguous=tuple(where.get(i, i) for i in plan.contiguous))


#: tritonjit:: op -> planner of the C++ operator path, for the schemas above (those that
#: are aten's take aten's planner)
_TJ_PLANNERS: dict[str, Callable] = {
    **{n: p for n, p in pointwise.PLANNERS.items() if n in {o[0] for o in _OPS}},
    # aten's maximum and minimum have no overload name; these ops have one
    "maximum.Tensor": pointwise.PLANNERS["maximum"], "minimum.Tensor": pointwise.PLANNERS["minimum"],
    "where": pointwise.plan_where,
    "sum": lambda x, dim=None, keepdim=False, *, dtype=None: reduction.plan_reduce("sum", x, dim, keepdim, dtype),
    "mean": lambda x, dim=None, keepdim=False, *, dtype=None: reduction.plan_reduce("mean", x, dim, keepdim, dtype),
    **{n: reduction.PLANNERS[n] for n in ("amax", "amin", "argmax", "argmin")},
    "softmax": lambda x, dim, dtype=None: softmax.plan_softmax(False, x, dim, dtype),
    "log_softmax": lambda x, dim, dtype=None: softmax.plan_softmax(True, x, dim, dtype),
    "layer_norm": norm.plan_layer_norm,
    "rms_norm": norm.plan_rms_norm,
    "group_norm": _first(_plan_group_norm),
    "index_select": indexing.plan_index_select,
    "gather": indexing.plan_gather,
    "embedding": indexing.plan_embedding,
    "fused_add_rms_norm": norm.plan_fused_add_rms_norm,
    **fused.PLANNERS,
    **matmul.PLANNERS,
}


def autograd_key(key: str) -> str:
    """The backend-specific Autograd key of a backend's dispatch key: CPU -> AutogradCPU,
    CUDA -> AutogradCUDA, PrivateUse1 -> AutogradPrivateUse1."""
    name = f"Autograd{key}"  # c10's naming of the per-backend Autograd keys
    torch._C._dispatch_key_parse(name)  # raises where the backend has none
    return name


class _TritonjitOps:
    """The C++ kernels of the ``tritonjit::`` ops: registered over their Python kernels
    once the C++ operator path is built, for the rest of the process; with them the ops'
    autograd gates (``_native_ops.register_gates``), at the backend's Autograd key over
    torch.library's Python autograd kernels, which they call only where autograd has work."""

    handle: Any = None
    gates: Any = None

    @classmethod
    def register(cls, mod: Any) -> None:
        if cls.handle is None:
            entries = [(name, _TJ_PLANNERS.get(name), impl) for name, _, impl, _ in _OPS]
            device = backend_device_type()
            cls.handle = _native_ops.register("tritonjit", _KEY, entries, device_type=device)
        if cls.gates is None:
            gates = [(q.partition("::")[2], k) for q, k in _autograd.AUTOGRAD_KERNELS.items()
                     if q.startswith("tritonjit::")]
            cls.gates = _native_ops.register_gates("tritonjit", autograd_key(_KEY), gates)


_native_ops.on_ready(_TritonjitOps.register)


def install_direct(namespace: dict[str, Any]) -> None:
    """Once the C++ operator path is loaded, replace the package's direct entries in
    ``namespace`` by C callables that run the ``tritonjit::`` ops' plans, and give the
    ``torch.ops.tritonjit`` packets the same for plain calls (see _direct.py)."""
    def install(mod: Any) -> None:
        device = backend_device_type()
        ops = [o[0] for o in _OPS]
        _direct.install(mod, namespace, ops, _TJ_PLANNERS, device)
        _direct.install_packets(mod, ops, _TJ_PLANNERS, device)

    _native_ops.on_ready(install)


# ------------------------------------------------------------ aten routing
def _softmax_aten(fn):
    def impl(x, dim, half_to_float):
        return fn(x, dim, torch.float32 if half_to_float else None)

    return impl


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    out, mean, rstd = norm.native_layer_norm(x, normalized_shape, weight, bias, eps)
    if x.device.type == "cpu":  # aten's CPU kernel: the input dtype (fp32 for mixed); its CUDA kernel: fp32
        dt = norm.param_stats_dtype(x, weight, bias)
        return out, mean.to(dt), rstd.to(dt)
    return out, mean, rstd


def _native_group_norm(x, weight, bias, n, c, hw, group, eps):
    # aten's group_norm gives its statistics in the input dtype (fp32 for mixed) on every device
    out, mean, rstd = norm.native_group_norm(x, weight, bias, n, c, hw, group, eps)
    dt = norm.param_stats_dtype(x, weight, bias)
    return out, mean.to(dt), rstd.to(dt)


def _sum_full(x, *, dtype=None):
    return reduction.sum(x, None, False, dtype=dtype)


def _mean_full(x, *, dtype=None):
    return reduction.mean(x, None, False, dtype=dtype)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return indexing.embedding(weight, indices)


def _gather(x, dim, index, *, sparse_grad=False):
    return indexing.gather(x, dim, index)


_ATEN: dict[str, Callable] = {
    "add.Tensor": pointwise.add,
    "add.Scalar": lambda x, y, alpha=1: pointwise.add(x, y, alpha=alpha),
    "sub.Tensor": pointwise.sub,
    "sub.Scalar": lambda x, y, alpha=1: pointwise.sub(x, y, alpha=alpha),
    "mul.Tensor": pointwise.mul, "mul.Scalar": pointwise.mul,
    "div.Tensor": pointwise.div, "div.Scalar": pointwise.div,
    "maximum": pointwise.maximum, "minimum": pointwise.minimum,
    "pow.Tensor_Tensor": pointwise.pow, "pow.Tensor_Scalar": pointwise.pow, "pow.Scalar": pointwise.pow,
    "neg": pointwise.neg, "abs": pointwise.abs, "exp": pointwise.exp, "log": pointwise.log,
    "sqrt": pointwise.sqrt, "rsqrt": pointwise.rsqrt, "sigmoid": pointwise.sigmoid, "tanh": pointwise.tanh,
    "relu": pointwise.relu, "silu": pointwise.silu,
    "gelu": pointwise.gelu,
    "where.self": pointwise.where,
    "sum": _sum_full,
    "sum.dim_IntList": reduction.sum,
    "mean": _mean_full,
    "mean.dim": reduction.mean,
    "amax": reduction.amax, "amin": reduction.amin, "argmax": reduction.argmax, "argmin": reduction.argmin,
    "_softmax": _softmax_aten(softmax.softmax), "_log_softmax": _softmax_aten(softmax.log_softmax),
    "native_layer_norm": _native_layer_norm,
    "native_group_norm": _native_group_norm,
    "_fused_rms_norm": norm.fused_rms_norm_with_rstd,
    "mm": matmul.mm, "bmm": matmul.bmm,
    "addmm": matmul.addmm, "baddbmm": matmul.baddbmm,
    "index_select": indexing.index_select, "gather": _gather, "embedding": _embedding,
    **_ELEMENTWISE_ATEN,
    **_COPY_ATEN,
    **_RANDOM_ATEN,
    **_ROWWISE_ATEN,
    **_SCATTER_ATEN,
    **_LOSS_ATEN,
    **gated.ATEN,
    **reorder.ATEN,
    **log_sigmoid.ATEN,
}
_ATEN.update(_autograd.ATEN_BACKWARD)  # aten's backward operators
_ATEN.update(attention.ATEN)  # SDPA's fused kernels and their backwards (refusals: aten's kernel)
_ATEN.update(optim.ATEN)  # _fused_adamw_: torch.optim.AdamW(fused=True)
_ATEN.update(grouped_mm.ATEN)  # MoE experts (transformers 5.x); measured against aten's kernel per layout


def _has_float64(values: Iterable[Any]) -> bool:
    """A float64 tensor (in a list too) or a float64 dtype argument (factories) among ``values``."""
    for v in values:
        if v is torch.float64 or (isinstance(v, Tensor) and v.dtype == torch.float64):
            return True
        if isinstance(v, (list, tuple)) and _has_float64(v):
            return True
    return False


def _float_scalars(args: tuple, kwargs: dict) -> list[float]:
    """The call's float scalars, with a 0-dim CPU tensor beside a device tensor read as one."""
    values = (*args, *kwargs.values())
    device = any(isinstance(v, Tensor) and not v.is_cpu for v in values)
    out = [v for v in values if isinstance(v, float)]
    if device:
        out += [float(v.item()) for v in values
                if isinstance(v, Tensor) and v.is_cpu and v.dim() == 0 and v.is_floating_point()]
    return out


def _refuse_float64_scalars(name: str, impl: Callable) -> Callable:
    """``impl`` raising NotImplementedError (aten's kernel computes the call) for a float64 call
    with a float scalar that float32 does not hold exactly: the kernels take float scalars as
    float32 arguments, so ``x64 * 0.1`` would be off by 3e-8 relative."""
    @functools.wraps(impl)
    def call(*args, **kwargs):
        if _has_float64((*args, *kwargs.values())) and not all(fp32_exact(v) for v in _float_scalars(args, kwargs)):
            raise NotImplementedError(f"tritonjit_ops.{name}: float64 with a float scalar that float32 does not "
                                      "hold (its kernel takes float scalars as float32); aten's kernel serves this call")
        return impl(*args, **kwargs)

    return call


def _plan_float64_scalars(planner: Callable) -> Callable:
    """``planner``, None for a float64 call with any float scalar: the C++ key holds a Scalar's
    type, not its value, so the Python implementation decides (see _refuse_float64_scalars).
    A value-keyed planner's key holds the values (arange's, constant_pad_nd's): a value float32
    holds exactly is planned as any other, one it does not is aten's plan, as the Python
    implementation would refuse it on every call."""
    by_value = getattr(planner, "value_keyed_scalars", False)

    @functools.wraps(planner)  # its marks too (_plan.value_keyed)
    def plan(*args, **kwargs):
        values = (*args, *kwargs.values())
        floats = [v for v in values if isinstance(v, float)]
        if floats and _has_float64(values):
            if not by_value:
                return None
            if not all(fp32_exact(v) for v in floats):
                return aten_plan()
        return planner(*args, **kwargs)

    return plan


def _is_complex(v: Any) -> bool:
    """A complex tensor, a list of tensors holding one, a complex dtype or a complex number."""
    if isinstance(v, Tensor):
        return v.is_complex()
    if isinstance(v, (list, tuple)):
        return any(isinstance(t, Tensor) and t.is_complex() for t in v)
    return isinstance(v, complex) or (isinstance(v, torch.dtype) and v.is_complex)


def _plan_complex_as_aten(planner: Callable) -> Callable:
    """``planner``, with every call that involves a complex dtype planned as aten's kernel
    (``aten_plan()``): no tritonjit kernel computes complex numbers, and without a plan such a
    call ran the Python implementation on every call to be refused there (20-50 us of host
    time on the H200, about twice eager's). The C++ key holds the dtypes, so the decision is
    made once per call shape."""
    @functools.wraps(planner)  # its marks too (_plan.value_keyed, list_limit)
    def plan(*args, **kwargs):
        if any(_is_complex(v) for v in (*args, *kwargs.values())):
            return aten_plan()
        return planner(*args, **kwargs)

    return plan


def _plan_within_grid(planner: Callable, otherwise: Callable[[], Any]) -> Callable:
    """``planner``, with a plan whose launch grid exceeds the active backend's limits replaced
    by ``otherwise()`` (aten's kernel for an aten overload; None, the Python implementation, for
    a ``tritonjit`` op): a kernel's grid of (rows, column tiles) meets the y limit of 65535
    at sizes aten's own kernels take (a softmax over dim 0 of 16400 x 131072). The plan is made
    once per call key, so the check costs nothing per call."""
    @functools.wraps(planner)  # its marks too (_plan.value_keyed, list_limit)
    def plan(*args, **kwargs):
        p = planner(*args, **kwargs)
        if p is not None and p.launches:
            limits = tritonjit.current_backend().info.grid_limits
            if any(g > lim for L in p.launches for g, lim in zip(L.grid, limits)):
                return otherwise()
        return p

    return plan


_ATEN = {n: _refuse_float64_scalars(n, f) for n, f in _ATEN.items()}
# enable()'s Python path: a call an implementation refuses runs aten's kernel, as on the C++ path
_ATEN = with_aten_fallback(_ATEN)


#: What enable() routes by default on a device backend: the overloads with a C++ host path
#: (a planner) whose end-to-end cost the models benchmark measured at or below eager's on the
#: H200 (2026-11-30: the first 44 forward overloads; then the copies, fills, comparisons,
#: cat/stack, cumsum, all/any, sin/cos and the activation, softmax, rms_norm and embedding
#: backwards, which raised the share of the models' calls on tritonjit kernels),
#: plus SDPA and AdamW, whose routes time or restrict themselves (TRITONJIT_OPS_SDPA; 16-bit
#: AdamW to aten). The rest (overloads on the Python path, which costs 20-50 us of host time
#: a call; planned ops that measured slower than aten's, such as the transcendental unary ops
#: at large shapes and nll_loss_forward; planned ops no model's audit has measured yet) is
#: opt-in on a device: ``enable(include="all")`` or by name. On the interpreter backend (a correctness
#: backend) enable() routes the whole table.
DEVICE_DEFAULT: frozenset[str] = frozenset([
    "_fused_rms_norm", "_log_softmax", "_softmax", "abs", "add.Scalar", "add.Tensor", "addmm", "amax", "amin",
    "argmax", "argmin", "bmm", "div.Scalar", "div.Tensor", "embedding", "exp", "gather", "gelu", "index_select",
    "log", "maximum", "mean", "mean.dim", "minimum", "mm", "mul.Scalar", "mul.Tensor", "native_group_norm",
    "native_layer_norm", "neg", "pow.Scalar", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "relu", "rsqrt",
    "sigmoid", "silu", "sqrt", "sub.Scalar", "sub.Tensor", "sum", "sum.dim_IntList", "tanh", "where.self",
    # copies, fills and shape ops with a C++ path
    "_to_copy", "clone", "cat", "stack", "zero_", "zeros_like", "ones_like",
    # scans and logical reductions with a C++ path (position ids, attention-mask checks)
    "cumsum", "all", "all.dim", "all.dims", "any", "any.dim", "any.dims",
    # comparisons, sin/cos (rotary tables)
    "eq.Scalar", "eq.Tensor", "ne.Scalar", "ne.Tensor", "lt.Scalar", "lt.Tensor", "le.Scalar", "le.Tensor",
    "gt.Scalar", "gt.Tensor", "ge.Scalar", "ge.Tensor", "sin", "cos",
    # backward operators with a C++ path
    "silu_backward", "gelu_backward", "tanh_backward", "sigmoid_backward", "threshold_backward", "hardtanh_backward",
    "_softmax_backward_data", "_log_softmax_backward_data", "_fused_rms_norm_backward", "embedding_dense_backward",
    # measured on the H200 (audit replays, 1x16x1024 and 8x1024x1024 bf16; 2026-11-30): at or below
    # aten's wall time per call, native_layer_norm_backward within 5-8% at 1k rows and 0.5-0.6x at 8k
    "native_layer_norm_backward", "nll_loss_backward", "arange", "arange.start", "arange.start_step",
    "constant_pad_nd", "masked_fill.Scalar", "masked_fill.Tensor", "repeat", "isinf",
    # in-place pointwise plans (2026-12-02, H200, bench ops --inplace-sweep: every planned in-place
    # overload on a (1, 16, 2048) bf16 self; the Mixtral audit): those at or below eager whose
    # out-of-place form is routed by default (the others share that form's reason to stay opt-in,
    # e.g. transcendental ops at large shapes), the clamp family and div's rounding modes (MoE
    # routing: clamp_ 0.81x, // 0.69x in the audit); 0.42-0.96x eager per call. neg_ (1.01x) and
    # bitwise_xor_.Tensor (1.08x) measured above it
    "add_.Tensor", "add_.Scalar", "sub_.Tensor", "sub_.Scalar", "mul_.Tensor", "mul_.Scalar", "div_.Tensor",
    "div_.Scalar", "div_.Tensor_mode", "floor_divide", "floor_divide_.Tensor", "pow_.Scalar", "pow_.Tensor",
    "clamp_", "clamp_.Tensor", "clamp_min_", "clamp_max_", "masked_fill_.Scalar", "masked_fill_.Tensor",
    "abs_", "relu_", "exp_", "log_", "sqrt_", "rsqrt_", "sigmoid_", "silu_", "gelu_", "tanh_", "sin_", "cos_",
    "eq_.Scalar", "eq_.Tensor", "ne_.Scalar", "ne_.Tensor", "lt_.Scalar", "lt_.Tensor", "le_.Scalar", "le_.Tensor",
    "gt_.Scalar", "gt_.Tensor", "ge_.Scalar", "ge_.Tensor",
    # x[idx] with one integer index tensor (MoE's token gathers; 2026-12-02, H200 audit of Mixtral and
    # Qwen3-MoE prefill: 0.80-0.93x eager per call, two bf16 row gathers at 1.03x and 1.09x, within the
    # replay's spread; both models' prefill and training steps 0.74-0.85x eager with it routed); also
    # several index tensors at adjacent dims (a padding mask's mask[batch_idx, kv_idx], beam search)
    "index.Tensor",
    # x[idx] = v with one 1-D index (MoE routing's inverse permutation): 0.70-0.73x eager in the same audits;
    # _index_put_impl_, the accumulating write of x[..., [i], :]'s backward (Falcon's multi-query split)
    "index_put_", "_index_put_impl_",
    # an MoE router's topk (short rows, small k: one launch): 0.47-0.48x eager in the same audits
    "topk",
    # the gradients of slices and selects (rotate_half's halves, a fused QKV's split, a pooled first
    # token): one launch where aten fills zeros and then copies
    "slice_backward", "select_backward",
    # generate()'s own calls around each decode step (its stopping checks, masks and cache
    # positions: bool [1] tensors, a few scalars; clamp (0.92x there; in the default since, below)
    # and reciprocal (0.91x; 0.97-1.46x in a sweep of 16 to 8M elements) stayed opt-in; max's plan leaves inputs over
    # 64K elements to aten), measured on the H200 (2026-12-03, audit of
    # greedy generation of 32 tokens by Llama, Qwen2, Falcon, Mixtral, BART and MPT): 0.74-0.95x
    # eager per op over all their calls; with them routed the decoders' generate steps ran 100%
    # of their covered calls on tritonjit kernels (87-97% before). The fills check each value
    # against the dtype's range per call (Plan.fits), as aten does; zeros, new_zeros, new_full
    # and fill_.Scalar are the same fill plan as ones, new_ones, full and full_like
    "scalar_tensor", "full", "full_like", "fill_.Scalar", "ones", "new_ones", "zeros", "new_zeros", "new_full",
    "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_not", "max",
    # measured on the H200 (2026-12-03, per call against eager at the shapes models make):
    # beam search's int64 `ids % vocab` (remainder.Scalar, 160 calls a beam generate) 0.90-0.98x
    # from [3, 8] to 1M elements; copy_ 0.64-1.01x (one f32->bf16 cast of 262K elements 1.08x),
    # a transposing copy of 4M+ elements planned as aten's (1.04-1.08x ours); clamp, clamp_min/max
    # and hardtanh 0.68-0.99x up to 1M elements (clamp of 4096 bf16 elements 1.06x), planned as
    # aten's from 4M on (1.05-1.10x ours in bf16 at 16M)
    "remainder.Scalar", "copy_", "clamp", "clamp.Tensor", "clamp_min", "clamp_min.Tensor", "clamp_max",
    "clamp_max.Tensor", "hardtanh",
    # MoE experts (2026-12-04): a C++ plan and a measured policy per layout, tritonjit's kernel or
    # aten's CUTLASS one, whichever measured faster (grouped_mm.aten_serves; H200, bf16: ours
    # 0.88-1.01x aten's time on Qwen3-MoE-like layers, 0.95-1.21x on Mixtral-like ones)
    "_grouped_mm",
    # reductions over the trailing dims, one launch from C++ (2026-12-05, H200, wall time per call
    # against eager in a loop at the shapes models make): max.dim/min.dim (an MoE router's
    # scores.max(-1)) 0.84-0.89x, linalg_vector_norm (F.normalize: Swin-v2's cosine attention,
    # embedding heads) 0.82-0.97x, logsumexp 0.13-0.15x, var/var_mean 0.48-0.92x; the row
    # counts and lengths where aten's kernel measured faster are planned as aten's
    # (rowwise._aten_serves)
    "max.dim", "min.dim", "linalg_vector_norm", "logsumexp", "var.correction", "std.correction",
    "var_mean.correction", "std_mean.correction",
    # measured on an H100 (2026-12-06, wall time per call against eager at model shapes, bf16):
    # softplus_backward 0.92-0.99x, log_sigmoid_backward 0.88-1.00x, sgn 0.98-0.99x, flip
    # 0.42-0.88x, roll (Swin's shifted windows) 0.22-0.63x, glu 0.61-0.82x, glu_backward
    # 0.78-0.87x, native_group_norm_backward 0.49-0.56x; Mamba-2, Bamba, Jamba, Falcon-Mamba,
    # Apertus, Speech2Text, Swin, the Wav2Vec2 conformer and RecurrentGemma with them routed
    # 0.80-0.91x eager (forward and training step). log_sigmoid_forward (1.20x at 8M-16M
    # elements) stays opt-in.
    # baddbmm (BLOOM's ALiBi scores), after the mm tuner counted a batch's programs: 0.33-0.85x
    # eager at 12 attention-score shapes (decode to 2048-token prefill; an H100, 2026-12-06)
    "softplus_backward", "log_sigmoid_backward", "sgn", "sgn_", "flip", "roll", "glu", "glu_backward",
    "native_group_norm_backward", "baddbmm",
    # the opt-in overloads models still sent to aten (2026-12-06, an H100, `bench ops --opt-in` at
    # Mamba's, Mamba-2's and DeBERTa's shapes and a sweep of 16 to 16M elements, wall time per
    # call against eager): softplus 0.84-0.99x, reciprocal 0.92-1.01x, sign 0.92-1.06x (1.06x a
    # 4096-element fp32 call, within the replay's spread), fill_ from a 0-dim tensor 0.51-0.84x,
    # logical_and_ 0.77-0.99x, tril 0.38-0.98x up to [2, 4096, 4096]. log_sigmoid_forward stays
    # opt-in: on the elementwise kernel 0.88-1.01x up to 4M elements and in fp32, 1.21-1.26x in
    # bf16 at 8M-16M (its own kernel had measured 1.10-1.20x at 4M-16M)
    "softplus", "reciprocal", "sign", "fill_.Tensor", "logical_and_", "tril",
    # the next opt-in overloads the 149-architecture sweep saw on aten (2026-12-06, an H100, per call
    # against eager at the shapes those models make and a sweep of 4K to 16M elements): erf (ESM's
    # and SEW-D's GELU) 0.88-1.02x, floor (Llama 4's and LongT5's positions) 0.91-1.00x, triu
    # (ProphetNet's and Qwen3-Next's masks) 0.38-1.06x (1.06x a [4, 8, 4, 64, 64] bool call, at the
    # launch-bound size where the fp32 one read 0.98x), an MoE router's scatter_ of a value or of
    # weights 0.73-0.93x and scatter_add_ 0.89-0.95x (16 to 16K tokens, 8 to 256 experts; bf16
    # accumulation stays aten's). div's rounding modes stay opt-in: the audio encoders' floor
    # division of four int64 lengths by a Python int measured 1.02-1.05x
    "erf", "floor", "triu", "scatter_.value", "scatter_.src", "scatter_add_",
    # an MoE layer's combine, out.index_add_(0, token_ids, expert_out) once per expert (DBRX, Switch
    # Transformers, NLLB-MoE; Longformer's and LED's steps), now planned and, in bf16 and fp16 on an
    # NVIDIA GPU, added by 16-bit atomics as aten's kernel adds them (each call eager's bit for bit
    # in DBRX's forward): 0.59-0.92x eager per call from [64, 256] to [16384, 4096] (H100,
    # 2026-12-06); those five models 0.79-0.88x eager with it routed
    "index_add_",
    *attention.ATEN, *optim.ATEN])


def default_ops(key: str | None = None) -> list[str]:
    """The overloads ``enable()`` routes without ``include`` for a dispatch key (default: the
    active backend's): the whole table on the interpreter (CPU), DEVICE_DEFAULT elsewhere."""
    key = dispatch_key() if key is None else key
    return list(_ATEN) if key == "CPU" else [n for n in _ATEN if n in DEVICE_DEFAULT]

#: aten overload -> planner of the C++ operator path (see _plan.py); the others are
#: registered with their Python implementation only
_PLANNERS: dict[str, Callable] = {**pointwise.PLANNERS, **reduction.PLANNERS, **softmax.PLANNERS, **norm.PLANNERS,
                                  **indexing.PLANNERS, **_SCATTER_PLANNERS, **matmul.PLANNERS,
                                  **_ELEMENTWISE_PLANNERS, **_COPY_PLANNERS, **_ROWWISE_PLANNERS,
                                  **_LOSS_PLANNERS, **gated.PLANNERS,
                                  **reorder.PLANNERS, **log_sigmoid.PLANNERS}
_PLANNERS.update(_autograd.ATEN_PLANNERS)
_PLANNERS.update(attention.PLANNERS)
_PLANNERS.update(grouped_mm.PLANNERS)
_PLANNERS = {n: _plan_within_grid(_plan_complex_as_aten(_plan_float64_scalars(p)), aten_plan)
             for n, p in _PLANNERS.items()}
_TJ_PLANNERS = {n: _plan_within_grid(_plan_float64_scalars(p), lambda: None) for n, p in _TJ_PLANNERS.items()}


log = logging.getLogger(__name__)


class _State:
    lib: torch.library.Library | None = None  # Python kernels
    native: Any = None  # the C++ kernels' registration (_native_ops)
    ops: tuple[str, ...] = ()
    key: str = ""
    depth: int = 0
    generation: int = 0
    deferred: bool = False  # lib holds no kernel: aten's serve the ops until the C++ path is built
    swap: int = 0  # the generation whose C++ kernels are built, to replace lib's at its next call


class _Enabled:
    """Returned by enable(): already active; leaving a ``with`` block undoes it (and every
    enable() made since: the end of the outermost block disables). The object may be entered
    again (``e = enable(); with e: ...; with e: ...``): a ``with`` entered after its
    activation was undone (by a block's end or by disable()) enables again with the same
    arguments."""

    def __init__(self, include: Iterable[str] | str | None, exclude: Iterable[str], wait_native: bool) -> None:
        self._args = (include, tuple(exclude), wait_native)
        self._generation = _State.generation  # of the activation this object made
        self._active = True

    def __enter__(self) -> _Enabled:
        if not self._active or self._generation != _State.generation:
            include, exclude, wait_native = self._args
            enable(include, exclude, wait_native=wait_native)
            self._generation, self._active = _State.generation, True
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        _State.depth -= 1
        if _State.depth <= 0:
            disable()


def enable(include: Iterable[str] | str | None = None, exclude: Iterable[str] = (), *, wait_native: bool = False) -> _Enabled:
    """Route the matching aten operators through tritonjit kernels for the active backend.

    Works as a global switch (``enable()`` ... ``disable()``) and as a context
    manager (``with enable(): ...``). ``include``/``exclude`` take aten names such
    as "mm" or "add.Tensor"; ``include="all"`` routes every overload tritonjit has, and
    without ``include`` a device backend routes :func:`default_ops` (the overloads measured
    no slower than eager in real models; the interpreter routes all). Nested enables keep
    the first selection.

    The operators run on the C++ operator path (``_native_ops``: plans cached per call
    shape, launched without Python) once it is built: in the background on first use,
    once per torch version. Until then, on a device backend, the default selection stays
    on aten's kernels (its Python kernels cost 20-50 us of host time a call, slower than
    eager: they are chosen for the C++ path's cost) and an explicit ``include`` runs on
    the Python kernels; where the C++ path cannot be built or is turned off
    (``TRITONJIT_OPS_NATIVE=0``), every selection runs on the Python kernels (a build that
    fails while an enable() waits leaves that enable() on aten's kernels; the next one
    takes the Python kernels).
    ``wait_native=True`` waits for the build, so that the first calls already take the
    C++ path.
    """
    exclude = tuple(exclude)  # read twice: here and by the _Enabled that may enable again
    if include is not None and not isinstance(include, str):
        include = tuple(include)
    _State.depth += 1
    if _State.lib is None and _State.native is None:
        if include is None:
            names = default_ops()
        elif isinstance(include, str) and include == "all":
            names = list(_ATEN)
        else:
            names = [include] if isinstance(include, str) else list(include)
        unknown = [n for n in names if n not in _ATEN]
        if unknown:
            _State.depth -= 1
            raise ValueError(f"tritonjit_ops.enable: no tritonjit implementation for {unknown}")
        excluded = set(exclude)
        names = [n for n in names if n not in excluded]
        names += _autograd.needed_backward(names, dispatch_key())
        _State.ops, _State.key = tuple(sorted(names)), dispatch_key()
        _State.generation += 1
        if _native_ops.module(wait=wait_native) is not None:
            _register_native()
        else:
            _State.deferred = include is None and _native_building()
            if _State.deferred:
                log.info("enable(): the C++ operator path is still building; aten's kernels serve the default "
                         "operators until it is ready (enable(wait_native=True) or `tritonjit warmup --native` "
                         "waits for it)")
            lib = torch.library.Library("aten", "IMPL")
            with _quiet_override():  # replacing aten's kernels is the point: no torch warning about it
                for n in () if _State.deferred else names:
                    lib.impl(n, _python_kernel(n), _State.key)
            _State.lib = lib
            generation = _State.generation
            _native_ops.on_ready(lambda mod: _swap_to_native(generation))
        _forget_python_dispatch(_State.ops)
    return _Enabled(include, exclude, wait_native)


def _native_building() -> bool:
    """Whether the C++ operator path is being built for a device backend: the window in
    which the default selection waits on aten's kernels. Not on the interpreter (a
    correctness backend, whose selection is the whole table, run from Python anyway)."""
    nat = _native_ops.native()
    return _State.key != "CPU" and nat is not None and nat.reason == "building"


@contextlib.contextmanager
def _quiet_override() -> Iterator[None]:
    """Silence torch's "Overriding a previously registered kernel" warning (a UserWarning from
    TORCH_WARN, once a process), and only that one."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        yield


def _register_native() -> None:
    """The C++ kernels at BackendSelect, over aten's kernels of every backend: calls of the
    active backend's tensors take tritonjit's plans, the others go on to aten's own."""
    entries = [(n, _PLANNERS.get(n), _ATEN[n]) for n in _State.ops]
    device = backend_device_type()
    _State.native = _native_ops.register("aten", "BackendSelect", entries, redispatch=True, device_type=device)


def _python_kernel(name: str) -> Callable[..., Any]:
    """enable()'s Python kernel of ``name``: its implementation, after the switch to the C++
    path where that path's build has finished (see _swap_to_native)."""
    impl = _ATEN[name]

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if _State.swap:
            _finish_swap()
        return impl(*args, **kwargs)

    return kernel


_swap_lock = threading.Lock()


def _swap_to_native(generation: int) -> None:
    """The C++ path is built (called on the build thread). Registering its kernels over others
    is safe while other threads call the ops; removing the Python kernels is not: a thread
    already inside one (its call dispatched, waiting for the GIL) would run a freed kernel. So
    where enable() registered Python kernels, the next call of one of them makes the switch,
    on its own thread (_finish_swap); where it registered none (the default selection on a
    device waits on aten's kernels while the build runs), the switch happens here."""
    if generation != _State.generation or _State.lib is None:
        return  # disabled (or enabled again) since
    _State.swap = generation
    if _State.deferred:
        _finish_swap()


def _finish_swap() -> None:
    """Register the C++ kernels over the Python ones, then drop those; an op always has one of
    the two."""
    with _swap_lock:
        generation, _State.swap = _State.swap, 0
        if generation != _State.generation or _State.lib is None:
            return
        _register_native()
        lib, _State.lib, _State.deferred = _State.lib, None, False
        lib._destroy()
        _forget_python_dispatch(_State.ops)


def disable() -> None:
    """Undo enable(): aten operators go back to their own kernels."""
    lib, native, ops = _State.lib, _State.native, _State.ops
    _State.lib, _State.native, _State.ops, _State.depth, _State.deferred = None, None, (), 0, False
    _State.generation += 1
    _State.swap = 0
    if lib is not None:
        lib._destroy()
    if native is not None:
        _native_ops.release(native)
    _forget_python_dispatch(ops)


def _forget_python_dispatch(names: Iterable[str]) -> None:
    """Drop torch's Python-dispatcher caches of the aten overloads ``names``, after their
    kernels changed.

    Under the Python dispatcher (torch.compile's tracing turns it on) an OpOverload caches,
    per dispatch key, the key whose kernel serves that key (``_dispatch_cache``), and calls
    that kernel directly. torch clears the cache when a Python kernel (``py_impl``) is added,
    not when a Library adds or removes a dispatcher kernel: ``clone`` cached "CPU" while
    enable()'s kernel was there (aten's own is CompositeExplicitAutograd) and traced after
    disable() called a kernel that no longer existed (a segfault in torch's C++); the other
    way round, a call traced under enable() would bypass tritonjit's kernel."""
    for name in names:
        base, _, overload = name.partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except (AttributeError, RuntimeError):  # not an aten overload in this torch
            continue
        cache = getattr(op, "_dispatch_cache", None)
        if cache:
            cache.clear()


def enabled_ops() -> list[str]:
    """The aten operators currently routed through tritonjit (empty when disabled)."""
    return list(_State.ops)


def native_path() -> str:
    """Where enable()'s operators run: "C++" (the C++ operator path), "aten" (the default
    selection while the C++ path builds), "Python" (its build is not ready, failed or is
    turned off: see the reason; or it is built and takes over at the next call) or "disabled"."""
    if _State.native is not None:
        return "C++"
    if _State.lib is not None:
        if _State.swap:
            return "Python (the C++ path is built: it takes over at the next call)"
        nat = _native_ops.native()
        reason = "C++ path off" if nat is None else nat.reason
        return f"aten (until the C++ path is built: {reason})" if _State.deferred else f"Python ({reason})"
    return "disabled"
