"""tritonjit-ops: Triton kernels with Torch wrappers, launched through tritonjit.

Direct entries (``tritonjit_ops.add(x, y)``) skip the dispatcher; the same
operators are registered as ``torch.ops.tritonjit.*`` for the active backend's
dispatch key, and ``enable()`` routes the matching aten operators through them.
"""
from ._audit import Audit, AuditRow, audit, audit_table
from ._policy import clear_policies
from ._registry import default_ops, disable, dispatch_key, enable, enabled_ops
from .attention import attention
from .fused import cross_entropy, rotary_embedding, silu_and_mul
from .indexing import embedding, gather, index_select
from .matmul import addmm, baddbmm, bmm, mm
from .norm import fused_add_rms_norm, group_norm, layer_norm, rms_norm
from .optim import AdamW, adamw_step
from .pointwise import (
                        abs,
                        add,
                        div,
                        exp,
                        gelu,
                        log,
                        maximum,
                        minimum,
                        mul,
                        neg,
                        pow,
                        relu,
                        rsqrt,
                        sigmoid,
                        silu,
                        sqrt,
                        sub,
                        tanh,
                        where,
)
from .reduction import amax, amin, argmax, argmin, mean, sum
from .softmax import log_softmax, softmax

__all__ = [
    # pointwise
    "add", "sub", "mul", "div", "maximum", "minimum", "pow",
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "gelu", "silu", "where",
    # reductions
    "sum", "mean", "amax", "amin", "argmax", "argmin",
    # softmax, normalization
    "softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm",
    # matmul, indexing
    "mm", "bmm", "addmm", "baddbmm", "index_select", "gather", "embedding",
    # fused
    "fused_add_rms_norm", "silu_and_mul", "rotary_embedding", "cross_entropy",
    # attention, optimizer
    "attention", "AdamW", "adamw_step",
    # registration
    "enable", "disable", "enabled_ops", "default_ops", "dispatch_key",
    # measured policies (mm against cuBLAS, SDPA against aten's kernels): decide again
    "clear_policies",
    # audit: per aten call of a model, routed or not and its cost against eager
    "audit", "audit_table", "Audit", "AuditRow",
]
__version__ = "0.1.0"

# direct entries with autograd (see autograd.py): the kernels themselves when no input requires grad
from . import _registry as _reg  # noqa: E402
from .autograd import wrap_public as _wrap_public  # noqa: E402

_wrap_public(globals(), [_op[0] for _op in _reg._OPS])
# and, once the C++ operator path is loaded, C callables that run their plans (see _direct.py);
# loaded here where it is built already, else on the first call that needs it
_reg.install_direct(globals())
_reg._native_ops.load_if_ready()
