"""Autograd of the operators, on each of their three paths, in one place.

- ``torch.ops.tritonjit.*``: each differentiable op gets ``torch.library.register_autograd``
  with a ``setup_context`` and a ``backward`` (the table ``GRADS``). Backwards call
  ``torch.ops.tritonjit.*_backward`` ops (Triton backward kernels, registered below with
  fakes, so ``torch.compile`` traces them) where a fused backward pays, and torch
  operators (routed too under ``enable()``) for the one-liners (``mul``'s, ``mm``'s).
- Direct entries (``tritonjit_ops.rms_norm(...)``): :func:`wrap_public` replaces the
  package's public functions by ones that, when grad mode is on and an input requires
  grad, run through a ``torch.autograd.Function`` with the same ``GRADS`` entry; other
  calls go straight to the kernel (one check, no autograd).
- ``enable()``: aten's own derivative formulas call aten's backward operators; those
  listed in ``ATEN_BACKWARD`` are routed to Triton backward kernels (``ATEN_PLANNERS``:
  on the C++ operator path).

The backward ops have gradients too (double_backward.py: the vjp of a torch formula of
each), so ``create_graph=True`` works at every order on the first two paths; under
``enable()`` aten's own formulas differentiate aten's backward operators. An op without a
backward never gives None gradients silently: its backward raises ``NotImplementedError``
naming the op (``_no_backward``).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, NamedTuple

import torch
import torch.nn.functional as F

from . import (
    copy,
    double_backward,
    fused_backward,
    gated,
    group_norm_backward,
    indexing_backward,
    log_sigmoid,
    loss_backward,
    norm,
    norm_backward,
    pointwise_backward,
    softmax_backward,
)
from ._common import opmath
from ._plan import run as run_plan

Tensor = torch.Tensor
_tj = torch.ops.tritonjit

__all__ = ["GRADS", "ATEN_BACKWARD", "ATEN_PLANNERS", "AUTOGRAD_KERNELS", "BACKWARD_OPS", "register",
           "register_autograd", "register_backward_ops", "register_grads", "wrap_public"]


# ------------------------------------------------------------------ aten's backward operators (enable())
#: aten overload -> Python implementation, merged into enable()'s table
ATEN_BACKWARD: dict[str, Callable] = {
    "_softmax_backward_data": softmax_backward.softmax_backward,
    "_log_softmax_backward_data": softmax_backward.log_softmax_backward,
    "native_layer_norm_backward": norm_backward.native_layer_norm_backward,
    "_fused_rms_norm_backward": norm_backward.fused_rms_norm_backward,
    "native_group_norm_backward": group_norm_backward.native_group_norm_backward,
    **gated.BACKWARD,
    **log_sigmoid.BACKWARD,
    "embedding_dense_backward": indexing_backward.embedding_dense_backward,
    "silu_backward": pointwise_backward.silu_backward,
    "gelu_backward": pointwise_backward.gelu_backward,
    "sigmoid_backward": pointwise_backward.sigmoid_backward,
    "tanh_backward": pointwise_backward.tanh_backward,
    "threshold_backward": pointwise_backward.threshold_backward,
    "hardtanh_backward": pointwise_backward.hardtanh_backward,
    "softplus_backward": pointwise_backward.softplus_backward,
    "nll_loss_backward": loss_backward.nll_loss_backward,
    **copy.BACKWARD,
}

def needed_backward(names: list[str], dispatch_key: str) -> list[str]:
    """Backward ops enable() must route with ``names`` for gradients to work at all: aten has
    no CPU kernel of ``_fused_rms_norm_backward``, which the derivative of a routed
    ``_fused_rms_norm`` calls (on CPU aten's rms_norm never reaches ``_fused_rms_norm``)."""
    if dispatch_key == "CPU" and "_fused_rms_norm" in names and "_fused_rms_norm_backward" not in names:
        return ["_fused_rms_norm_backward"]
    return []


#: aten overload -> planner of the C++ operator path
ATEN_PLANNERS: dict[str, Callable] = {**softmax_backward.PLANNERS, **norm_backward.PLANNERS,
                                      **indexing_backward.PLANNERS, **pointwise_backward.PLANNERS,
                                      **loss_backward.PLANNERS, **copy.BACKWARD_PLANNERS,
                                      **group_norm_backward.PLANNERS, **gated.BACKWARD_PLANNERS,
                                      **log_sigmoid.BACKWARD_PLANNERS}


# ------------------------------------------------------------------ tritonjit's backward operators
def _fake_norm_backward(g, x, w, dres, n, eps, rms, need_bias):
    wdt = w.dtype if w is not None else x.dtype
    return (torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty((n if w is not None else 0,), dtype=wdt),
            x.new_empty((n if need_bias else 0,), dtype=wdt))


def _fake_silu_and_mul_backward(g, gate, up=None):
    return (torch.empty_like(gate, memory_format=torch.contiguous_format),
            gate.new_empty((0,)) if up is None else torch.empty_like(up, memory_format=torch.contiguous_format))


def _fake_act(g, x, *args, **kwargs):
    return g.new_empty(x.shape, dtype=torch.promote_types(g.dtype, x.dtype))


#: name, schema, implementation, fake
BACKWARD_OPS: list[tuple[str, str, Callable, Callable]] = [
    ("norm_backward", "(Tensor grad_out, Tensor input, Tensor? weight, Tensor? dres, int n, float eps, bool rms, "
                      "bool need_bias) -> (Tensor, Tensor, Tensor)",
     norm_backward.norm_backward, _fake_norm_backward),
    ("softmax_backward", "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
     softmax_backward.softmax_backward, lambda g, y, dim, dt: y.new_empty(y.shape, dtype=dt)),
    ("log_softmax_backward", "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
     softmax_backward.log_softmax_backward, lambda g, y, dim, dt: y.new_empty(y.shape, dtype=dt)),
    ("silu_backward", "(Tensor grad_output, Tensor self) -> Tensor", pointwise_backward.silu_backward, _fake_act),
    ("gelu_backward", "(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
     pointwise_backward.gelu_backward, _fake_act),
    ("sigmoid_backward", "(Tensor grad_output, Tensor output) -> Tensor", pointwise_backward.sigmoid_backward,
     _fake_act),
    ("tanh_backward", "(Tensor grad_output, Tensor output) -> Tensor", pointwise_backward.tanh_backward, _fake_act),
    ("threshold_backward", "(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
     pointwise_backward.threshold_backward, _fake_act),
    ("hardtanh_backward", "(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val) -> Tensor",
     pointwise_backward.hardtanh_backward, _fake_act),
    ("softplus_backward", "(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold) -> Tensor",
     pointwise_backward.softplus_backward, _fake_act),
    ("silu_and_mul_backward", "(Tensor grad, Tensor gate, Tensor? up=None) -> (Tensor, Tensor)",
     fused_backward.silu_and_mul_backward, _fake_silu_and_mul_backward),
    ("cross_entropy_backward", "(Tensor grad, Tensor logits, Tensor target, int ignore_index=-100, "
                               "str reduction='mean') -> Tensor",
     fused_backward.cross_entropy_backward,
     lambda g, lg, t, ignore_index=-100, reduction="mean": torch.empty_like(lg, memory_format=torch.contiguous_format)),
    ("embedding_backward", "(Tensor grad, Tensor indices, int num_weights, int padding_idx=-1, "
                           "bool scale_grad_by_freq=False) -> Tensor",
     indexing_backward.embedding_backward,
     lambda g, i, nw, padding_idx=-1, scale_grad_by_freq=False: g.new_empty((nw, g.shape[-1]))),
]


# ------------------------------------------------------------------ backward formulas
class Grad(NamedTuple):
    """``setup(ctx, args, kwargs, output)`` saves what ``backward(ctx, *grads)`` needs; backward
    returns one gradient (or None) per positional argument. ``args`` are the positional
    arguments of the op's schema, ``kwargs`` its keyword-only ones."""

    setup: Callable[..., None]
    backward: Callable[..., tuple]


def _a(args: tuple, kw: dict, i: int, name: str, default: Any = None) -> Any:
    return args[i] if len(args) > i else kw.get(name, default)


def _t(v: Any) -> bool:
    return isinstance(v, Tensor)


def _to(g: Tensor | None, like: Any) -> Tensor | None:
    """``g`` summed down to the shape of the input ``like`` (broadcasting), None for a scalar input."""
    if g is None or not _t(like):
        return None
    return g if g.shape == like.shape else g.sum_to_size(like.shape)


def _save(ctx: Any, **values: Any) -> None:
    """Tensors through save_for_backward (version-checked), the rest as attributes."""
    names = [k for k, v in values.items() if _t(v)]
    ctx.save_for_backward(*(values[k] for k in names))
    ctx.tensor_names = names
    for k, v in values.items():
        if not _t(v):
            setattr(ctx, k, v)


def _load(ctx: Any) -> dict[str, Any]:
    got = dict(zip(ctx.tensor_names, ctx.saved_tensors))
    return got


def _binary_setup(ctx, args, kw, out):
    _save(ctx, x=args[0], y=args[1], alpha=kw.get("alpha", 1))


def _add_bwd(sign: int) -> Callable:
    def bwd(ctx, g):
        x, y = _xy(ctx)
        k = sign * ctx.alpha
        return _to(g, x), _to(g if k == 1 else g * k, y)

    return bwd


def _xy(ctx) -> tuple[Any, Any]:
    s = _load(ctx)
    return s.get("x", getattr(ctx, "x", None)), s.get("y", getattr(ctx, "y", None))


def _mul_bwd(ctx, g):
    x, y = _xy(ctx)
    n = ctx.needs_input_grad
    return (_to(g * y, x) if n[0] else None), (_to(g * x, y) if n[1] else None)


def _div_bwd(ctx, g):
    x, y = _xy(ctx)
    n = ctx.needs_input_grad
    return (_to(g / y, x) if n[0] else None), (_to(-g * x / (y * y), y) if n[1] and _t(y) else None)


def _extremum_bwd(greater: bool) -> Callable:
    def bwd(ctx, g):
        x, y = _xy(ctx)
        win_x = x > y if greater else x < y
        tie = x == y
        half = g / 2
        zero = torch.zeros((), dtype=g.dtype, device=g.device)
        gx = torch.where(tie, half, torch.where(win_x, g, zero))
        gy = torch.where(tie, half, torch.where(win_x, zero, g))
        return _to(gx, x), _to(gy, y)

    return bwd


def _pow_setup(ctx, args, kw, out):
    _save(ctx, x=args[0], y=args[1], out=out)


def _pow_bwd(ctx, g):
    s = _load(ctx)
    x, e, out = s.get("x", getattr(ctx, "x", None)), s.get("y", getattr(ctx, "y", None)), s["out"]
    n = ctx.needs_input_grad
    gx = ge = None
    if n[0] and _t(x):
        if not _t(e) and e == 0:
            gx = torch.zeros_like(x)
        else:
            gx = g * e * torch.pow(x, e - 1)
            if _t(e):
                gx = torch.where(e == 0, torch.zeros_like(gx), gx)
            gx = _to(gx, x)
    if n[1] and _t(e):
        logx = torch.log(x) if _t(x) else torch.log(torch.tensor(float(x), dtype=out.dtype, device=out.device))
        ge = g * out * logx
        zero_base = (x == 0) & (e >= 0) if _t(x) else ((e >= 0) & (x == 0))
        ge = _to(torch.where(zero_base, torch.zeros_like(ge), ge), e)
    return gx, ge


def _unary(save_out: bool, fn: Callable[[Tensor, Tensor, Any], Tensor]) -> Grad:
    """The Grad of a one-input op: ``fn(grad, saved, ctx)``, saved = the output or the input."""
    def setup(ctx, args, kw, out):
        _save(ctx, v=out if save_out else args[0], approximate=_a(args, kw, 1, "approximate", "none"))

    def bwd(ctx, g):
        return (fn(g, _load(ctx)["v"], ctx) if ctx.needs_input_grad[0] else None,)

    return Grad(setup, bwd)


def _where_setup(ctx, args, kw, out):
    _save(ctx, c=args[0], x=args[1], y=args[2])


def _where_bwd(ctx, g):
    s = _load(ctx)
    x, y = s.get("x", getattr(ctx, "x", None)), s.get("y", getattr(ctx, "y", None))
    zero = torch.zeros((), dtype=g.dtype, device=g.device)
    return None, _to(torch.where(s["c"], g, zero), x), _to(torch.where(s["c"], zero, g), y)


def _dims(dim: Any, nd: int) -> tuple[int, ...]:
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(nd))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(d % max(nd, 1) for d in dims))


def _unreduce(g: Tensor, shape: torch.Size, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    if not keepdim and len(shape):
        for d in dims:
            g = g.unsqueeze(d)
    return g.expand(shape)


def _reduce_setup(ctx, args, kw, out):
    x = args[0]
    _save(ctx, shape=x.shape, dtype=x.dtype, dims=_dims(_a(args, kw, 1, "dim"), x.dim()),
          keepdim=bool(_a(args, kw, 2, "keepdim", False)))


def _sum_bwd(mean: bool) -> Callable:
    def bwd(ctx, g):
        gx = _unreduce(g, ctx.shape, ctx.dims, ctx.keepdim)
        if mean:
            count = 1
            for d in ctx.dims:
                count *= ctx.shape[d]
            gx = gx / count
        return (gx.to(ctx.dtype),)

    return bwd


def _extreme_setup(ctx, args, kw, out):
    x = args[0]
    _save(ctx, x=x, out=out, dims=_dims(_a(args, kw, 1, "dim", ()), x.dim()),
          keepdim=bool(_a(args, kw, 2, "keepdim", False)))


def _extreme_bwd(ctx, g):
    s = _load(ctx)
    x = s["x"]
    hit = (x == _unreduce(s["out"], x.shape, ctx.dims, ctx.keepdim)).to(g.dtype)
    count = hit.sum(ctx.dims, keepdim=True) if x.dim() else hit
    return (_unreduce(g, x.shape, ctx.dims, ctx.keepdim) * hit / count,)


def _softmax_grad(log: bool) -> Grad:
    def setup(ctx, args, kw, out):
        _save(ctx, out=out, dim=_a(args, kw, 1, "dim", -1), dtype=args[0].dtype)

    def bwd(ctx, g):
        op = _tj.log_softmax_backward if log else _tj.softmax_backward
        return (op(g, _load(ctx)["out"], ctx.dim, ctx.dtype),)

    return Grad(setup, bwd)


def _numel(shape: Any) -> int:
    n = 1
    for s in ((shape,) if isinstance(shape, int) else shape):
        n *= s
    return n


def _layer_norm_setup(ctx, args, kw, out):
    x, ns, w, b = args[0], args[1], _a(args, kw, 2, "weight"), _a(args, kw, 3, "bias")
    _save(ctx, x=x, w=w, n=_numel(ns), eps=float(_a(args, kw, 4, "eps", 1e-5)), has_b=b is not None)


def _layer_norm_bwd(ctx, g):
    s = _load(ctx)
    w = s.get("w")
    need = ctx.needs_input_grad
    dx, dw, db = _tj.norm_backward(g, s["x"], w, None, ctx.n, ctx.eps, False, ctx.has_b and need[3])
    return (dx, None, dw.view(w.shape) if w is not None and need[2] else None,
            db.view(w.shape if w is not None else (-1,)) if ctx.has_b and need[3] else None, None)


def _rms_norm_setup(ctx, args, kw, out):
    x, ns, w = args[0], args[1], _a(args, kw, 2, "weight")
    eps = _a(args, kw, 3, "eps")
    _save(ctx, x=x, w=w, n=_numel(ns), eps=float(norm.default_rms_eps(x.dtype) if eps is None else eps))


def _rms_norm_bwd(ctx, g):
    s = _load(ctx)
    w = s.get("w")
    dx, dw, _ = _tj.norm_backward(g, s["x"], w, None, ctx.n, ctx.eps, True, False)
    return dx, None, (dw.view(w.shape) if w is not None and ctx.needs_input_grad[2] else None), None


def _fused_add_rms_setup(ctx, args, kw, out):
    x, w = args[0], args[2]
    _save(ctx, h=out[1], w=w, n=x.shape[-1], eps=float(_a(args, kw, 3, "eps", 1e-6)))


def _fused_add_rms_bwd(ctx, g_out, g_h):
    s = _load(ctx)
    w = s.get("w")
    dx, dw, _ = _tj.norm_backward(g_out, s["h"], w, g_h, ctx.n, ctx.eps, True, False)
    return dx, dx, (dw.view(w.shape) if w is not None and ctx.needs_input_grad[2] else None), None


def _group_norm_setup(ctx, args, kw, out):
    _save(ctx, x=args[0], w=_a(args, kw, 2, "weight"), groups=args[1], eps=float(_a(args, kw, 4, "eps", 1e-5)),
          has_b=_a(args, kw, 3, "bias") is not None)


def _group_norm_bwd(ctx, g):
    # group_norm_backward.py's kernels (aten's where they decline), from statistics recomputed in
    # the opmath type (fp32, fp64 for fp64)
    s = _load(ctx)
    x, w = s["x"], s.get("w")
    if torch.is_grad_enabled():  # create_graph: aten's backward op has no derivative; its composite has
        return _group_norm_differentiable(ctx, g, x, w)
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // (n * c) if n * c else 1
    xf = x.reshape(n, ctx.groups, -1).to(opmath(x.dtype))
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + ctx.eps)
    need = ctx.needs_input_grad
    dt = norm.param_stats_dtype(x, w)  # aten's backward reads them in the forward's dtype (fp32 for mixed)
    args = (g.contiguous(), x.contiguous(), mean.to(dt), rstd.to(dt), w, n, c, hw, ctx.groups,
            [need[0], w is not None and need[2], ctx.has_b and need[3]])
    plan = group_norm_backward.plan_native_group_norm_backward(*args)
    dx, dw, db = run_plan(plan, args) if plan is not None else torch.ops.aten.native_group_norm_backward(*args)
    return dx, None, dw, db, None


def _group_norm_differentiable(ctx, g, x, w):
    """Under create_graph: the vjp of F.group_norm, differentiable again."""
    b = x.new_zeros((x.shape[1],), dtype=x.dtype if w is None else w.dtype) if ctx.has_b else None

    def forward(*p):
        it = iter(p)
        return F.group_norm(next(it), ctx.groups, next(it) if w is not None else None,
                            next(it) if b is not None else None, ctx.eps)

    got = iter(double_backward.vjp(forward, tuple(t for t in (x, w, b) if t is not None), g))
    dx, dw, db = next(got), next(got) if w is not None else None, next(got) if b is not None else None
    need = ctx.needs_input_grad
    return dx if need[0] else None, None, dw if need[2] else None, db if need[3] else None, None


def _mm_setup(ctx, args, kw, out):
    _save(ctx, a=args[0], b=args[1])


def _mm_bwd(ctx, g):
    s = _load(ctx)
    n = ctx.needs_input_grad
    return (_tj.mm(g, s["b"].t()) if n[0] else None), (_tj.mm(s["a"].t(), g) if n[1] else None)


def _bmm_bwd(ctx, g):
    s = _load(ctx)
    n = ctx.needs_input_grad
    return ((_tj.bmm(g, s["b"].transpose(1, 2)) if n[0] else None),
            (_tj.bmm(s["a"].transpose(1, 2), g) if n[1] else None))


def _addmm_setup(ctx, args, kw, out):
    _save(ctx, bias=args[0], a=args[1], b=args[2], beta=kw.get("beta", 1), alpha=kw.get("alpha", 1))


def _add_mm_bwd(batched: bool) -> Callable[..., tuple]:
    """addmm's (batched: baddbmm's) backward: the bias's gradient summed to its broadcast shape."""
    def backward(ctx, g):
        mm = _tj.bmm if batched else _tj.mm  # looked up at call time: the ops register after this module
        s = _load(ctx)
        n = ctx.needs_input_grad
        gb = _to(g if ctx.beta == 1 else g * ctx.beta, s["bias"]) if n[0] else None
        ga = mm(g, s["b"].transpose(-1, -2)) if n[1] else None
        gm = mm(s["a"].transpose(-1, -2), g) if n[2] else None
        if ctx.alpha != 1:
            ga = ga * ctx.alpha if ga is not None else None
            gm = gm * ctx.alpha if gm is not None else None
        return gb, ga, gm
    return backward


def _index_setup(ctx, args, kw, out):
    x = args[0]
    _save(ctx, index=args[2], shape=x.shape, dtype=x.dtype, dim=args[1])


def _index_select_bwd(ctx, g):
    gx = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
    if len(ctx.shape) == 0:
        return gx + g.reshape(()), None, None
    return gx.index_add_(ctx.dim, _load(ctx)["index"].reshape(-1), g), None, None


def _gather_bwd(ctx, g):
    gx = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
    if len(ctx.shape) == 0:
        return gx + g.reshape(()), None, None
    return gx.scatter_add_(ctx.dim, _load(ctx)["index"], g), None, None


def _embedding_setup(ctx, args, kw, out):
    w = args[0]
    _save(ctx, indices=args[1], rows=w.shape[0], padding_idx=int(_a(args, kw, 2, "padding_idx", -1)))


def _embedding_bwd(ctx, g):
    gw = _tj.embedding_backward(g, _load(ctx)["indices"], ctx.rows, ctx.padding_idx, False)
    return (gw, None) + ((None,) if len(ctx.needs_input_grad) > 2 else ())


def _silu_and_mul_setup(ctx, args, kw, out):
    _save(ctx, gate=args[0], up=_a(args, kw, 1, "up"))


def _silu_and_mul_bwd(ctx, g):
    s = _load(ctx)
    up = s.get("up")
    dg, du = _tj.silu_and_mul_backward(g, s["gate"], up)
    return dg, (du if up is not None else None)


def _rotary_setup(ctx, args, kw, out):
    _save(ctx, cos=args[1], sin=args[2], interleaved=bool(_a(args, kw, 3, "interleaved", False)))


def _rotary_bwd(ctx, g):
    if any(ctx.needs_input_grad[1:3]):
        raise NotImplementedError("tritonjit::rotary_embedding has no gradient for cos and sin (expected them not "
                                  "to require grad); detach them, or compute the rotation with torch operators")
    s = _load(ctx)
    # the inverse rotation (rotation by -theta) is the transpose of the forward's
    return _tj.rotary_embedding(g, s["cos"], torch.neg(s["sin"]), ctx.interleaved), None, None, None


def _cross_entropy_setup(ctx, args, kw, out):
    _save(ctx, logits=args[0], target=args[1], ignore_index=int(_a(args, kw, 2, "ignore_index", -100)),
          reduction=_a(args, kw, 3, "reduction", "mean"))


def _cross_entropy_bwd(ctx, g):
    s = _load(ctx)
    gl = _tj.cross_entropy_backward(g, s["logits"], s["target"], ctx.ignore_index, ctx.reduction)
    return gl, None, None, None


def _act(fn: Callable[..., Tensor]) -> Callable[[Tensor, Tensor, Any], Tensor]:
    return lambda g, v, ctx: fn(g, v)


#: op (a tritonjit:: op's name without its overload; a direct entry's name) -> its backward
GRADS: dict[str, Grad] = {
    "add": Grad(_binary_setup, _add_bwd(1)),
    "sub": Grad(_binary_setup, _add_bwd(-1)),
    "mul": Grad(_binary_setup, _mul_bwd),
    "div": Grad(_binary_setup, _div_bwd),
    "maximum": Grad(_binary_setup, _extremum_bwd(True)),
    "minimum": Grad(_binary_setup, _extremum_bwd(False)),
    "pow": Grad(_pow_setup, _pow_bwd),
    "neg": _unary(False, lambda g, v, ctx: -g),
    "abs": _unary(False, lambda g, v, ctx: g * torch.sgn(v)),
    "exp": _unary(True, lambda g, v, ctx: g * v),
    "log": _unary(False, lambda g, v, ctx: g / v),
    "sqrt": _unary(True, lambda g, v, ctx: g / (2 * v)),
    "rsqrt": _unary(True, lambda g, v, ctx: -0.5 * g * v * v * v),
    "sigmoid": _unary(True, _act(lambda g, v: _tj.sigmoid_backward(g, v))),
    "tanh": _unary(True, _act(lambda g, v: _tj.tanh_backward(g, v))),
    "relu": _unary(True, _act(lambda g, v: _tj.threshold_backward(g, v, 0))),
    "silu": _unary(False, _act(lambda g, v: _tj.silu_backward(g, v))),
    "gelu": _unary(False, lambda g, v, ctx: _tj.gelu_backward(g, v, approximate=ctx.approximate)),
    "where": Grad(_where_setup, _where_bwd),
    "sum": Grad(_reduce_setup, _sum_bwd(False)),
    "mean": Grad(_reduce_setup, _sum_bwd(True)),
    "amax": Grad(_extreme_setup, _extreme_bwd),
    "amin": Grad(_extreme_setup, _extreme_bwd),
    "softmax": _softmax_grad(False),
    "log_softmax": _softmax_grad(True),
    "layer_norm": Grad(_layer_norm_setup, _layer_norm_bwd),
    "rms_norm": Grad(_rms_norm_setup, _rms_norm_bwd),
    "group_norm": Grad(_group_norm_setup, _group_norm_bwd),
    "fused_add_rms_norm": Grad(_fused_add_rms_setup, _fused_add_rms_bwd),
    "mm": Grad(_mm_setup, _mm_bwd),
    "bmm": Grad(_mm_setup, _bmm_bwd),
    "addmm": Grad(_addmm_setup, _add_mm_bwd(False)),
    "baddbmm": Grad(_addmm_setup, _add_mm_bwd(True)),
    "index_select": Grad(_index_setup, _index_select_bwd),
    "gather": Grad(_index_setup, _gather_bwd),
    "embedding": Grad(_embedding_setup, _embedding_bwd),
    "silu_and_mul": Grad(_silu_and_mul_setup, _silu_and_mul_bwd),
    "rotary_embedding": Grad(_rotary_setup, _rotary_bwd),
    "cross_entropy": Grad(_cross_entropy_setup, _cross_entropy_bwd),
}

#: ops whose backward runs Triton backward kernels (tritonjit:: backward ops, or the forward's own kernel)
FUSED = frozenset({"rms_norm", "layer_norm", "fused_add_rms_norm", "softmax", "log_softmax", "cross_entropy",
                   "silu_and_mul", "rotary_embedding", "gelu", "silu", "sigmoid", "tanh", "relu", "embedding",
                   "mm", "bmm", "addmm", "baddbmm"})

#: ops whose outputs are never differentiable (integer results): no autograd needed
NOT_DIFFERENTIABLE = frozenset({"argmax", "argmin"})


def _no_backward(qualname: str) -> Callable:
    def backward(ctx, *grads):
        raise NotImplementedError(f"{qualname} has no backward: its inputs cannot get gradients through it; run "
                                  f"it under torch.no_grad() or on detached inputs, or use the torch operator")

    return backward


def _padded(backward: Callable) -> Callable:
    """``backward`` returning one gradient per positional argument: a formula may stop after
    the last differentiable one."""
    def padded(ctx, *grads):
        result = backward(ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        return result + (None,) * (len(ctx.needs_input_grad) - len(result))

    return padded


def _has_kwarg_only(schema: str) -> bool:
    head = schema.split("->")[0]
    return "*," in head.replace(" ", "")


#: qualname -> torch.library's Python autograd kernel of the op, as register_autograd builds
#: it, for the C++ autograd gates (_registry._TritonjitOps): they call it only where autograd
#: has work. Empty on a torch without torch._library.autograd's helpers (no gates there).
AUTOGRAD_KERNELS: dict[str, Callable] = {}


def register_autograd(lib: Any, qualname: str, backward: Callable, setup_context: Callable | None = None) -> None:
    """torch.library.register_autograd (its Python kernel at the Autograd key serves wherever no
    gate is registered), plus the same kernel kept in AUTOGRAD_KERNELS for the gate."""
    torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)
    lib_autograd: Any = getattr(getattr(torch, "_library", None), "autograd", None)
    if hasattr(lib_autograd, "Info") and hasattr(lib_autograd, "make_autograd_impl"):
        op = torch._library.utils.lookup_op(qualname)
        AUTOGRAD_KERNELS[qualname] = lib_autograd.make_autograd_impl(op, lib_autograd.Info(backward, setup_context))


def register_grad(lib: Any, qualname: str, schema: str, grad: Grad | None) -> None:
    """Register ``grad`` as op ``qualname``'s autograd (None: a backward that raises)."""
    if grad is None:
        register_autograd(lib, qualname, _no_backward(qualname))
        return
    setup = grad.setup
    def with_keywords(ctx, inputs, keyword_only_inputs, output):
        setup(ctx, tuple(inputs), dict(keyword_only_inputs), output)

    def positional(ctx, inputs, output):
        setup(ctx, tuple(inputs), {}, output)

    # torch.library passes keyword_only_inputs exactly when the schema has keyword-only arguments
    setup_context = with_keywords if _has_kwarg_only(schema) else positional
    register_autograd(lib, qualname, _padded(grad.backward), setup_context)


def register_backward_ops(lib: Any, key: str) -> None:
    """Define the tritonjit:: backward ops (BACKWARD_OPS) in ``lib``, with fakes and their own
    gradients (double_backward.py)."""
    for name, schema, impl, fake in BACKWARD_OPS:
        lib.define(f"{name}{schema}")
        lib.impl(name, impl, key)
        torch.library.register_fake(f"{lib.ns}::{name}", fake, lib=lib)
        register_grad(lib, f"{lib.ns}::{name}", schema, Grad(*double_backward.grad_of(double_backward.REFERENCES[name])))


def register_grads(lib: Any, ops: Iterable[tuple[str, str]]) -> None:
    """The autograd of ``lib``'s ops ((name, schema) pairs): GRADS' entry of the op's base
    name, else a backward that raises (never silent None gradients)."""
    for name, schema in ops:
        base = name.partition(".")[0]
        if base not in NOT_DIFFERENTIABLE:
            register_grad(lib, f"{lib.ns}::{name}", schema, GRADS.get(base))


def register(lib: Any, key: str, ops: Iterable[tuple[str, str]]) -> None:
    """Both of the above, for the tritonjit:: library."""
    register_backward_ops(lib, key)
    register_grads(lib, ops)


# ------------------------------------------------------------------ direct entries
class _Direct(torch.autograd.Function):
    """A direct entry's call through autograd: ``apply(*args, meta)`` with meta = (name,
    implementation, Grad, keyword-only arguments); the same layout as torch.library's
    generated Functions, so one Grad serves both."""

    @staticmethod
    def forward(ctx: Any, *args: Any) -> Any:
        *pos, (name, impl, grad, kwargs) = args
        out = impl(*pos, **kwargs)
        ctx.grad_name = name
        if grad is not None:
            grad.setup(ctx, tuple(pos), kwargs, out)
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        grad = GRADS.get(ctx.grad_name)
        if grad is None:
            _no_backward(f"tritonjit_ops.{ctx.grad_name}")(ctx, *grads)
        prev = ctx.needs_input_grad
        try:
            ctx.needs_input_grad = prev[:-1]
            result = _padded(grad.backward)(ctx, *grads)  # type: ignore[union-attr]
        finally:
            ctx.needs_input_grad = prev
        return (*result, None)


def _differentiable(name: str, impl: Callable) -> Callable:
    """``impl`` with autograd: straight to the kernel unless grad mode is on and an input requires grad."""
    grad = GRADS.get(name)
    sig = inspect.signature(impl)
    kwonly = {p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}
    is_grad_enabled = torch.is_grad_enabled
    apply = _Direct.apply

    def through_autograd(args: tuple, kwargs: dict) -> Any:
        bound = sig.bind(*args, **kwargs)
        if bound.arguments.get("out") is not None:
            raise RuntimeError(f"tritonjit_ops.{name}: out= does not support automatic differentiation (an input "
                               f"requires grad); call it without out=")
        bound.apply_defaults()
        pos = tuple(v for k, v in bound.arguments.items() if k not in kwonly)
        kw = {k: v for k, v in bound.arguments.items() if k in kwonly and k != "out"}
        return apply(*pos, (name, impl, grad, kw))

    def fn(*args: Any, **kwargs: Any) -> Any:
        # the no-grad cost: this frame, one grad-mode read, a look at each argument
        if is_grad_enabled():
            for a in args:
                if isinstance(a, Tensor) and a.requires_grad:
                    return through_autograd(args, kwargs)
            if kwargs:
                for a in kwargs.values():
                    if isinstance(a, Tensor) and a.requires_grad:
                        return through_autograd(args, kwargs)
        return impl(*args, **kwargs) if kwargs else impl(*args)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = impl.__doc__
    fn.__wrapped__ = impl  # type: ignore[attr-defined]
    fn._tritonjit_autograd = True  # type: ignore[attr-defined]
    return fn


def wrap_public(namespace: dict[str, Any], ops: Iterable[str]) -> None:
    """Give the package's direct entries among ``ops`` (tritonjit:: op names) autograd, in place."""
    for name in sorted({o.partition(".")[0] for o in ops}):
        fn = namespace.get(name)
        if name in NOT_DIFFERENTIABLE or not callable(fn) or getattr(fn, "_tritonjit_autograd", False):
            continue
        namespace[name] = _differentiable(name, fn)
