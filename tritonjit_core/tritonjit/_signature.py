"""Static signatures and libtriton_jit's signature strings.

A kernel's *static* signature (computed once per function) says, for each parameter,
whether it is a constexpr, whether it is specialized, and its default. A *variant*
is one specialization: for each parameter either a runtime type token (``*fp32:16``,
``i32``, ``i64:16``, ``fp32``, ``u1``) or a constant (a constexpr value, an int
equal to 1 written ``i32:1``, None written ``nullopt``).

The signature string is libtriton_jit's: the tokens joined by commas, constexprs
written as their value. ``render`` and ``parse`` are inverse.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Sequence

from ._errors import SignatureError

NULLOPT = "nullopt"

# Triton's names for the element types a pointer or scalar may have.
SCALAR_TYPES = frozenset(
    "i1 i8 i16 i32 i64 u1 u8 u16 u32 u64 fp16 bf16 fp32 fp64 fp8e4nv fp8e5 fp8e4b8 fp8e5b16 fp8e4b15".split()
)


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel, as far as specialization is concerned."""

    index: int
    name: str
    is_constexpr: bool
    do_not_specialize: bool
    do_not_specialize_on_alignment: bool
    annotation_type: str  # a Triton type forced by annotation ("i64", "fp32"...), or ""
    is_const: bool  # a `const` pointer annotation ("*k" types)
    default: Any = inspect.Parameter.empty

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


def static_signature(jit_fn: Any) -> list[Param]:
    """Read the params of a Triton ``JITFunction`` once (Triton's own KernelParam
    objects carry the annotation and do_not_specialize decisions)."""
    params = []
    for kp in jit_fn.params:
        ann = kp.annotation_type or ""
        if ann.startswith("*k"):
            ann = "*" + ann[2:]
        params.append(
            Param(
                index=kp.num,
                name=kp.name,
                is_constexpr=bool(kp.is_constexpr),
                do_not_specialize=bool(kp.do_not_specialize),
                do_not_specialize_on_alignment=bool(kp.do_not_specialize_on_alignment),
                annotation_type=ann,
                is_const=bool(kp.is_const),
                default=kp.default,
            )
        )
    return params


# ---- one slot of a variant -------------------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """A parameter's part of a variant: a runtime type with hint, or a constant."""

    type: str | None  # "*fp32", "i32", ... ; None for a constexpr or None constant
    hint: int | None = None  # 16 (divisible/aligned), 1 (an int equal to 1: a constant) or None
    value: Any = None  # the constant, when the slot is one

    @property
    def is_constant(self) -> bool:
        return self.type is None or self.hint == 1

    def token(self) -> str:
        if self.type is None:
            return render_value(self.value)
        return f"{self.type}:{self.hint}" if self.hint else self.type


def slot_from_token(token: Any, param: Param) -> Slot:
    """The key token the binder produced for ``param`` -> a Slot."""
    if param.is_constexpr:
        return Slot(None, value=_unwrap_key_value(token))
    if token == NULLOPT:
        return Slot(None, value=None)
    ty, _, hint = token.partition(":")
    if hint == "1":
        return Slot(ty, 1, value=1)
    return Slot(ty, int(hint) if hint else None)


def _unwrap_key_value(token: Any) -> Any:
    # the binder keys non-int constexprs as (type, value) so 1, 1.0 and True differ
    if type(token) is tuple and len(token) == 2 and isinstance(token[0], type):
        return token[1]
    return token


def render_value(value: Any) -> str:
    """A constant as the signature writes it."""
    if value is None:
        return NULLOPT
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    name = getattr(value, "name", None)
    if type(value).__name__ == "dtype" and isinstance(name, str):
        return f"tl.{name}"
    return repr(value)


def render(slots: Sequence[Slot]) -> str:
    return ",".join(s.token() for s in slots)


def parse(signature: str, params: Sequence[Param], kernel: str) -> list[Slot]:
    """Read a signature string back into slots, checking it against the kernel."""
    parts = [p.strip() for p in _split(signature)]
    if len(parts) != len(params):
        raise SignatureError(kernel, signature, f"has {len(parts)} entries, the kernel has {len(params)} parameters "
                             f"({', '.join(p.name for p in params)})")
    slots = []
    for part, param in zip(parts, params):
        if not part:
            raise SignatureError(kernel, signature, f"entry for parameter '{param.name}' is empty")
        if param.is_constexpr:
            slots.append(Slot(None, value=_parse_value(part, kernel, signature, param)))
            continue
        if part == NULLOPT:
            slots.append(Slot(None, value=None))
            continue
        ty, _, hint = part.partition(":")
        base = ty[1:] if ty.startswith("*") else ty
        if base.startswith("k") and ty.startswith("*"):
            base = base[1:]
        if base not in SCALAR_TYPES:
            raise SignatureError(kernel, signature, f"parameter '{param.name}': '{part}' is not a type; expected one of "
                                 f"*fp32, i32, i64, fp32, u1, ... optionally with :16 or :1, or 'nullopt'")
        if hint not in ("", "1", "16"):
            raise SignatureError(kernel, signature, f"parameter '{param.name}': hint ':{hint}' must be :16 or :1")
        if hint == "1":
            if ty.startswith("*") or ty.startswith("fp") or ty.startswith("bf"):
                raise SignatureError(kernel, signature, f"parameter '{param.name}': ':1' applies to integers only")
            slots.append(Slot(ty, 1, value=1))
        else:
            slots.append(Slot(ty, int(hint) if hint else None))
    return slots


def _split(signature: str) -> list[str]:
    """Split on commas that are not inside quotes (string constexprs may hold commas)."""
    out, cur, quote = [], [], None
    for ch in signature:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _parse_value(text: str, kernel: str, signature: str, param: Param) -> Any:
    if text == NULLOPT:
        return None
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if text.startswith("tl."):
        import triton.language as tl

        attr = getattr(tl, text[3:], None)
        if attr is None:
            try:
                attr = tl.dtype(text[3:])
            except Exception:
                attr = None
        if attr is not None:
            return attr
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SignatureError(kernel, signature, f"constexpr parameter '{param.name}' needs a value "
                             f"(an int, float, bool, string or nullopt), got '{text}'") from None
