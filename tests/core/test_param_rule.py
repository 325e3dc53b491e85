"""One decision per parameter: the binder, the native dispatcher's flags and the compile
bridge's attributes all follow _specialize.param_rule (issue 15, item 10)."""

from __future__ import annotations

import itertools

import pytest
from tritonjit import SpecializationRules, _native
from tritonjit._compiler import _triton_attr_is_empty_string
from tritonjit._signature import Param, Slot
from tritonjit._specialize import _make_spec, param_rule

ANNOTATIONS = ("", "i32", "i64", "fp32", "u1", "bf16")
RULES = (SpecializationRules(), SpecializationRules(equal_to_1=False),
         SpecializationRules(align_pointers=False), SpecializationRules(divisibility=8))


def _params():
    for dns, dnsa, const, ann in itertools.product((False, True), (False, True), (False, True), ANNOTATIONS):
        yield Param(0, "p", False, dns, dnsa, ann, const)


@pytest.mark.parametrize("rules", RULES, ids=repr)
def test_binder_follows_the_rule(rules):
    for p in _params():
        rule = param_rule(p, rules)
        spec = _make_spec(p, rules)
        token = spec(1)
        if rule.fixed:
            assert token == rule.annotation, (p, rule)
        elif rule.remap:
            assert token == rule.annotation, (p, rule)  # the annotated type, without the ==1 hint
        elif rule.equal_to_1:
            assert token == "i32:1", (p, rule)
        else:
            assert token == "i32", (p, rule)
        if not rule.fixed and not rule.annotation:
            aligned = spec(rules.divisibility * 4)
            assert aligned.endswith(f":{rules.divisibility}") == rule.align, (p, rule, aligned)


@pytest.mark.skipif(not _native.available(), reason=f"native dispatcher: {_native.reason}")
@pytest.mark.parametrize("rules", RULES, ids=repr)
def test_dispatcher_flags_are_the_rule(rules):
    d = _native.dispatch
    for p in _params():
        rule = param_rule(p, rules)
        _, flags, _, forced = _native._param_entry(p, rules)
        assert bool(flags & d.F_ALIGN) == rule.align
        assert bool(flags & d.F_EQ1) == rule.equal_to_1
        assert bool(flags & d.F_CONST_PTR) == rule.const_pointer
        assert bool(flags & d.F_ANN_FIXED) == rule.fixed and (forced == rule.annotation if rule.fixed else forced is None)
        assert bool(flags & d.F_ANN_REMAP) == rule.remap


def test_compile_attributes_follow_the_rule():
    for p in _params():
        rule = param_rule(p)
        for ty in ("*fp32", "i32", "i64", "fp32", "u1"):
            want = rule.specialize and not rule.fixed and (ty.startswith("*") or ty in ("i32", "i64"))
            assert _triton_attr_is_empty_string(p, Slot(ty, None)) == want, (p, ty)
