"""Static signatures and libtriton_jit's signature strings.

A kernel's *static* signature (computed once per function) says, for each parameter,
whether it is a constexpr, whether it is specialized, and its default. A *variant*
is one specialization: for each parameter either a runtime type token (``*fp32:16``,
``i32``, ``i64:16``, ``fp32``, ``u1``) or a constant (a constexpr value, an int
equal to 1 written ``i32:1``, None written ``nullopt``).

The signature string is libtriton_jit's: the tokens joined by commas, constexprs
written as their value. ``render`` and ``parse`` are inverse. Two kinds go beyond
libtriton_jit's format, as Triton accepts them: a tuple argument is its element
tokens in parentheses, nested (``(*fp32:16,(i32,nullopt))``; an int 1 or a None in
it is a constant, as at the top level; a namedtuple is written with its class name
and fields, ``Pair(x=*fp32:16,scale=fp32)``, which is what its compile needs), and a
host ``TensorDescriptor`` is Triton's own type string (``tensordesc<fp16[64, 64]>``:
element type and block shape).
"""

from __future__ import annotations

import ast
import collections
import functools
import inspect
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

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


TUPLE = "tuple"  # Slot.type of a tuple argument
TENSORDESC = "tensordesc<"  # how the type of a host TensorDescriptor argument begins


class TupleToken(tuple):
    """The binder's key token of a tuple argument: its elements' tokens (nested) and,
    for a namedtuple, its class (Triton compiles the field names in). A tuple
    ``(items, cls)``, so that a key holding one hashes and compares in C: the variant
    cache hashes the key on every launch."""

    __slots__ = ()

    def __new__(cls, items: tuple, tuple_cls: Any = None) -> TupleToken:
        return tuple.__new__(cls, (items, tuple_cls))

    def __getnewargs__(self) -> tuple[tuple, Any]:  # pickling: the arguments of __new__
        return (self[0], self[1])

    @property
    def items(self) -> tuple:
        return self[0]

    @property
    def cls(self) -> Any:
        return self[1]

    def __repr__(self) -> str:
        return f"TupleToken(items={self[0]!r}, cls={self[1]!r})"


# ---- one slot of a variant -------------------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """A parameter's part of a variant: a runtime type with hint, or a constant; for a
    tuple argument, the slots of its elements."""

    type: str | None  # "*fp32", "i32", "tensordesc<fp16[64, 64]>", "tuple"; None for a constant
    hint: int | None = None  # 16 (divisible/aligned), 1 (an int equal to 1: a constant) or None
    value: Any = None  # the constant, when the slot is one
    items: tuple[Slot, ...] | None = None  # a tuple's elements
    cls: Any = None  # a namedtuple's class (None: a plain tuple)

    @property
    def is_constant(self) -> bool:
        return self.type is None or self.hint == 1

    @property
    def is_tensordesc(self) -> bool:
        return self.type is not None and self.type.startswith(TENSORDESC)

    def token(self) -> str:
        if self.items is not None:
            if self.cls is not None:
                fields = ",".join(f"{f}={s.token()}" for f, s in zip(self.cls._fields, self.items))
                return f"{self.cls.__name__}({fields})"
            return "(" + ",".join(s.token() for s in self.items) + ")"
        if self.type is None:
            return render_value(self.value)
        return f"{self.type}:{self.hint}" if self.hint else self.type


def tuple_slot(items: Sequence[Slot], cls: Any = None) -> Slot:
    return Slot(TUPLE, items=tuple(items), cls=cls)


def leaves(slot: Slot, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Slot]]:
    """(path, slot) of every leaf of a slot, depth first (Triton's order of a tuple's
    elements in the signature, the attributes and the launcher's arguments)."""
    if slot.items is None:
        yield path, slot
        return
    for i, item in enumerate(slot.items):
        yield from leaves(item, (*path, i))


def has_descriptor(slot: Slot) -> bool:
    """A descriptor, or a tuple holding one at any depth."""
    return slot.is_tensordesc or any(has_descriptor(s) for s in slot.items or ())


def slot_from_token(token: Any, param: Param) -> Slot:
    """The key token the binder produced for ``param`` -> a Slot."""
    if param.is_constexpr:
        return Slot(None, value=_unwrap_key_value(token))
    return _runtime_slot(token)


def _runtime_slot(token: Any) -> Slot:
    if token.__class__ is TupleToken:
        return tuple_slot([_runtime_slot(t) for t in token.items], token.cls)
    if token == NULLOPT:
        return Slot(None, value=None)
    if token.startswith(TENSORDESC):
        return Slot(token)
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
    """Read a signature string back into slots, checking it against the kernel. The
    empty string is the signature of a kernel without parameters: no entries."""
    parts = [p.strip() for p in _split(signature)] if signature.strip() else []
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
        slots.append(_parse_runtime(part, kernel, signature, param))
    return slots


_NAMED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\((.*)\)", re.S)


def split_tuple(token: str) -> tuple[str | None, list[tuple[str | None, str]]] | None:
    """A tuple token -> (namedtuple class name or None, [(field or None, element)]);
    None for a token that is no tuple. ``(a,b)`` and ``Name(f=a,g=b)``."""
    named = _NAMED.fullmatch(token)
    if named is None and not (token.startswith("(") and token.endswith(")")):
        return None
    inner = (named.group(2) if named else token[1:-1]).strip()
    parts = [p.strip() for p in _split(inner)] if inner else []
    if named is None:
        return None, [(None, p) for p in parts]
    fields = [p.partition("=") for p in parts]
    return named.group(1), [(f.strip(), t.strip()) if eq else (None, f) for f, eq, t in fields]


@functools.cache
def named_tuple_class(name: str, fields: tuple[str, ...]) -> type:
    """A namedtuple class of this name and fields (one per pair, so parses compare
    equal): what compiling a namedtuple argument read from a signature needs."""
    return collections.namedtuple(name, fields)


def _parse_runtime(part: str, kernel: str, signature: str, param: Param) -> Slot:
    """One runtime entry: a type with hint, nullopt, a descriptor type or a tuple."""
    tup = split_tuple(part)
    if tup is not None:
        name, items = tup
        if any(not t for _, t in items) or (name is not None and any(f is None for f, _ in items)):
            raise SignatureError(kernel, signature, f"parameter '{param.name}': tuple '{part}' has an empty element "
                                 "or a namedtuple element without its field name")
        slots = [_parse_runtime(t, kernel, signature, param) for _, t in items]
        if name is None:
            return tuple_slot(slots)
        try:
            cls = named_tuple_class(name, tuple(f for f, _ in items))
        except ValueError as exc:
            raise SignatureError(kernel, signature, f"parameter '{param.name}': '{part}': {exc}") from None
        return tuple_slot(slots, cls)
    if part == NULLOPT:
        return Slot(None, value=None)
    if part.startswith(TENSORDESC):
        return Slot(_parse_tensordesc(part, kernel, signature, param))
    ty, _, hint = part.partition(":")
    base = ty[1:] if ty.startswith("*") else ty
    if base.startswith("k") and ty.startswith("*"):
        base = base[1:]
    if base not in SCALAR_TYPES:
        raise SignatureError(kernel, signature, f"parameter '{param.name}': '{part}' is not a type; expected one of "
                             f"*fp32, i32, i64, fp32, u1, ... optionally with :16 or :1, 'nullopt', a tuple "
                             f"'(...)' of these, or a descriptor type 'tensordesc<fp16[64, 64]>'")
    if hint not in ("", "1", "16"):
        raise SignatureError(kernel, signature, f"parameter '{param.name}': hint ':{hint}' must be :16 or :1")
    if hint == "1":
        if ty.startswith("*") or ty.startswith("fp") or ty.startswith("bf"):
            raise SignatureError(kernel, signature, f"parameter '{param.name}': ':1' applies to integers only")
        return Slot(ty, 1, value=1)
    return Slot(ty, int(hint) if hint else None)


def tensordesc_type(dtype: str, block_shape: Sequence[int]) -> str:
    """Triton's signature type of a host TensorDescriptor: ``tensordesc<fp16[64, 64]>``."""
    return f"{TENSORDESC}{dtype}{list(block_shape)}>"


def parse_tensordesc(ty: str) -> tuple[str, list[int]]:
    """``tensordesc<fp16[64, 64]>`` -> ("fp16", [64, 64])."""
    inner = ty[len(TENSORDESC):-1]
    dtype, _, shape = inner.partition("[")
    return dtype, [int(x) for x in shape.rstrip("]").split(",")]


def _parse_tensordesc(part: str, kernel: str, signature: str, param: Param) -> str:
    try:
        dtype, shape = parse_tensordesc(part)
        ok = part.endswith("]>") and dtype in SCALAR_TYPES and 1 <= len(shape) <= 5
    except ValueError:
        ok = False
    if not ok:
        raise SignatureError(kernel, signature, f"parameter '{param.name}': '{part}' is not a descriptor type; "
                             f"expected e.g. 'tensordesc<fp16[64, 64]>' (element type, 1 to 5 block dimensions)")
    return tensordesc_type(dtype, shape)


_OPEN, _CLOSE = "([<", ")]>"


def _split(signature: str) -> list[str]:
    """Split on top-level commas: not inside quotes (string constexprs may hold commas),
    nor inside a tuple's parentheses or a descriptor type's brackets."""
    out, cur, quote, depth = [], [], None, 0
    for ch in signature:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            if ch in _OPEN:
                depth += 1
            elif ch in _CLOSE and depth:
                depth -= 1
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
