"""The specialization engine: arguments -> variant key, with Triton's rules.

For each kernel (and each backend's rule set) a *binder* is generated once: a plain
Python function with the kernel's own parameter list that returns the variant key
(one signature token per parameter) and the arguments in parameter order. Generating
it, as Triton does, lets Python's own call machinery bind positional, keyword and
default arguments; the per-argument work is one small function call.

The rules reproduce the installed Triton's (3.4 and newer): pointers by dtype and
16-byte alignment; ints by range (i32, i64, u64), divisibility by 16 and equality
to 1; floats as fp32; bools as u1; None as a constant; constexprs by value;
``do_not_specialize`` and ``do_not_specialize_on_alignment``; annotated types.
Tuples are specialized element by element (nested), every element with the full
rules whatever the parameter's own flags, as Triton's ``specialize_impl`` does; a
host ``TensorDescriptor`` by its element type and block shape (never by alignment).
tests/core/test_specialize_property.py checks them against Triton's own binder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ._backend import SpecializationRules
from ._signature import NULLOPT, Param, TupleToken, tensordesc_type

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
U64_MAX = 2**64 - 1

# torch dtype name -> Triton element type name
_DTYPE_NAMES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "u1",
    "int1": "u1", "uint1": "u1",  # torch's 1-bit dtypes: Triton (3.6-3.9) maps both to u1
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
}


class SpecializationFailure(Exception):
    """Raised inside a binder; the caller adds the kernel name."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(message)


def triton_dtype_name(dtype: Any) -> str | None:
    """Triton's element type for a torch (or torch-like) dtype, None if unsupported."""
    text = str(dtype)
    return _DTYPE_NAMES.get(text.rpartition(".")[2])


class _PointerTokens(dict):
    """dtype -> (aligned token, unaligned token), filled on first sight of a dtype."""

    def __init__(self, const: bool) -> None:
        super().__init__()
        self.prefix = "*k" if const else "*"

    def __missing__(self, dtype: Any) -> tuple[str, str] | None:
        name = triton_dtype_name(dtype)
        value = None if name is None else (f"{self.prefix}{name}:16", f"{self.prefix}{name}")
        self[dtype] = value
        return value


_EXPECTED = "expected a tensor, int, float, bool, None, tuple or TensorDescriptor"


def _descriptor_types() -> tuple[type, ...]:
    """Triton's host tensor descriptor class (an empty tuple where this Triton has none)."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:  # pragma: no cover - every supported Triton has it
        return ()
    return (TensorDescriptor,)


def _descriptor_token(a: Any, fail: Callable[[Any, str], SpecializationFailure]) -> str:
    """``tensordesc<fp16[64, 64]>``: Triton keys a descriptor by element type and block shape."""
    base = getattr(a, "base", None)
    dtype = getattr(base, "dtype", None)
    name = triton_dtype_name(dtype)
    if name is None:
        raise fail(a, f"TensorDescriptor base must be a tensor of a Triton dtype, got {type(base).__name__}"
                      f"{' of ' + str(dtype) if dtype is not None else ''}")
    return tensordesc_type(name, list(a.block_shape))


def _element_rules(param: Param) -> Param:
    """The parameter as its tuple's elements see it: Triton specializes every element
    (value and alignment, no const pointers), whatever the parameter's own flags."""
    return Param(param.index, param.name, False, False, False, "", False)


@dataclass(frozen=True)
class ParamRule:
    """How one runtime parameter is specialized on one backend: the one place that decides
    it. The Python binder (:func:`_make_spec`), the native dispatcher's per-parameter
    flags (``_native._param_entry``) and the compile bridge's attributes
    (``_compiler._triton_attr_is_empty_string``) all read it.

    ``align``: pointer alignment and int divisibility are keyed; ``equal_to_1``: an int
    equal to 1 becomes a constant; ``fixed``: the annotation alone gives the token
    (annotated floats and bools, and unspecialized annotated parameters, as Triton);
    ``remap``: the token's type is replaced by the annotation, its hint kept."""

    specialize: bool
    align: bool
    equal_to_1: bool
    const_pointer: bool
    annotation: str
    fixed: bool

    @property
    def remap(self) -> bool:
        return bool(self.annotation) and not self.fixed


def element_rule(rules: SpecializationRules | None = None) -> ParamRule:
    """The :class:`ParamRule` of every element of a tuple argument (:func:`_element_rules`),
    whatever its parameter's own flags; the native dispatcher keys elements by it."""
    return param_rule(_element_rules(Param(0, "", False, False, False, "", False)), rules)


def param_rule(param: Param, rules: SpecializationRules | None = None) -> ParamRule:
    """The :class:`ParamRule` of ``param`` under a backend's ``rules`` (Triton's by default)."""
    rules = rules or SpecializationRules()
    specialize = not param.do_not_specialize
    ann = param.annotation_type or ""
    return ParamRule(
        specialize=specialize,
        align=specialize and rules.align_pointers and not param.do_not_specialize_on_alignment,
        equal_to_1=specialize and rules.equal_to_1,
        const_pointer=param.is_const,
        annotation=ann,
        fixed=bool(ann) and (ann == "u1" or ann.startswith("fp") or ann.startswith("bf") or not specialize),
    )


def _make_spec(param: Param, rules: SpecializationRules) -> Callable[[Any], Any]:
    """The token function of one runtime parameter."""
    name = param.name
    rule = param_rule(param, rules)
    align = rule.align
    eq1 = rule.equal_to_1
    div = rules.divisibility
    ptr_tokens = _PointerTokens(rule.const_pointer)

    def fail(arg: Any, why: str) -> SpecializationFailure:
        return SpecializationFailure(name, why)

    def int_token(a: int) -> str:
        if I32_MIN <= a <= I32_MAX:
            if a == 1 and eq1:
                return "i32:1"
            ty = "i32"
        elif I64_MIN <= a <= I64_MAX:
            ty = "i64"
        elif 0 <= a <= U64_MAX:
            ty = "u64"
        else:
            raise fail(a, f"the int {a} fits no Triton integer type (i32, i64 or u64)")
        if align and a % div == 0:
            return f"{ty}:{div}"
        return ty

    def spec(a: Any) -> str | TupleToken:
        t = type(a)
        if t is int:
            return int_token(a)
        if t is float:
            return "fp32"
        if t is bool:
            return "u1"
        if a is None:
            return NULLOPT
        if t is tuple:  # before the data_ptr lookup, which a tuple misses at some cost
            return tuple_token(a)
        data_ptr = getattr(a, "data_ptr", None)
        if data_ptr is not None:
            tokens = ptr_tokens[a.dtype]
            if tokens is None:
                raise fail(a, f"tensor dtype {a.dtype} is not supported by Triton "
                              f"(supported: {', '.join(sorted(_DTYPE_NAMES))})")
            if align:
                return tokens[0] if data_ptr() % div == 0 else tokens[1]
            return tokens[1]
        if isinstance(a, int):  # numpy-free int subclasses (IntEnum, ...)
            return int_token(int(a))
        if isinstance(a, tuple):
            return tuple_token(a)
        if isinstance(a, descriptor_types):
            return _descriptor_token(a, fail)
        raise fail(a, f"{_EXPECTED}, got {type(a).__name__}")

    descriptor_types = _descriptor_types()
    elements: list[Callable[[Any], Any]] = []  # the element spec, made on the first tuple

    def tuple_token(a: tuple) -> TupleToken:
        if not elements:
            plain = not (param.do_not_specialize or param.do_not_specialize_on_alignment or param.is_const
                         or param.annotation_type)
            elements.append(spec if plain else _make_spec(_element_rules(param), rules))
        elem = elements[0]
        items = []
        for i, x in enumerate(a):
            try:
                items.append(elem(x))
            except SpecializationFailure as exc:
                raise SpecializationFailure(name, _element_message(i, str(exc))) from None
        return TupleToken(tuple(items), None if a.__class__ is tuple else a.__class__)

    ann = rule.annotation
    if not ann:
        return spec
    if rule.fixed:
        # Triton does not specialize annotated floats and bools (nor unspecialized args)
        def spec_fixed(a: Any) -> str:
            if a is None:
                return NULLOPT
            return ann
        return spec_fixed

    def spec_annotated(a: Any) -> str:
        token = spec(a)
        if token == NULLOPT:
            return token
        if not isinstance(token, str) or token.startswith("tensordesc"):
            raise fail(a, f"is annotated '{ann}' and takes a value of that type, got {type(a).__name__}")
        _, _, hint = token.partition(":")
        return f"{ann}:{hint}" if hint and hint != "1" else ann
    return spec_annotated


def _element_message(i: int, message: str) -> str:
    """Prefix a failure inside a tuple with the element's index path: ``element [1][0]: ...``."""
    if message.startswith("element ["):
        return f"element [{i}]{message[len('element '):]}"
    return f"element [{i}]: {message}"


def _constexpr_key(v: Any) -> Any:
    """Key of a constexpr value: 1, 1.0 and True must be different variants."""
    inner = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    if type(inner) in (int, str) or inner is None:
        return inner
    return (type(inner), inner)


def make_binder(params: Sequence[Param], rules: SpecializationRules, kernel: str) -> Callable:
    """Generate ``binder(*args, **kwargs) -> (key, args_in_param_order, options)``."""
    ns: dict[str, Any] = {"_ck": _constexpr_key}
    sig, key_parts = [], []
    for p in params:
        arg = p.name
        if p.has_default:
            ns[f"_d_{p.index}"] = p.default
            sig.append(f"{arg}=_d_{p.index}")
        else:
            sig.append(arg)
        if p.is_constexpr:
            key_parts.append(f"({arg} if {arg}.__class__ is int else _ck({arg}))")
        else:
            ns[f"_s{p.index}"] = _make_spec(p, rules)
            key_parts.append(f"_s{p.index}({arg})")
    names = ", ".join(p.name for p in params)
    trailing = "," if len(params) == 1 else ""
    key = ", ".join(key_parts) + ("," if len(key_parts) == 1 else "")
    src = (
        f"def {_identifier(kernel)}({', '.join(sig + ['**options'])}):\n"
        f"    if options:\n"
        f"        return ({', '.join(key_parts)}, tuple(options.items())), ({names}{trailing}), options\n"
        f"    return ({key}), ({names}{trailing}), options\n"
    )
    if not params:
        src = (f"def {_identifier(kernel)}(**options):\n"
               f"    return (tuple(options.items()),) if options else (), (), options\n")
    exec(compile(src, f"<tritonjit binder of {kernel}>", "exec"), ns)
    binder = ns[_identifier(kernel)]
    binder.__tritonjit_source__ = src
    return binder


def _identifier(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"k_{out}"
