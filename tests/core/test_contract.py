"""The backend contract is one list (``tritonjit._hookspecs``); the copies that must exist
follow it: the registry's resolution, the ``Backend`` fields and the plugin guide's
hook table. A method named like a hook but not marked ``@hookimpl`` is refused."""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import types
from pathlib import Path

import pytest
import tritonjit
from tritonjit import Backend, BackendInfo, SpecializationRules, hookimpl
from tritonjit._hookspecs import HOOKS, OPTIONAL, REQUIRED, BackendSpec
from tritonjit._registry import Registry
from tritonjit.interpreter import InterpreterBackend

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugin-guide.md"
#: Backend fields that are not hook implementations: backend_info's result and bookkeeping
NOT_HOOK_FIELDS = {"info", "plugin", "dist", "_avail", "_lock"}


def _params(hook: str) -> tuple[str, ...]:
    return tuple(inspect.signature(getattr(BackendSpec, hook)).parameters)[1:]  # without self


# ---- one list ----------------------------------------------------------------------------------
def test_required_and_optional_partition_the_hooks():
    assert set(REQUIRED) | set(OPTIONAL) == set(HOOKS) and not set(REQUIRED) & set(OPTIONAL)
    assert len(set(HOOKS)) == len(HOOKS)
    assert "backend_info" in REQUIRED and "launch" in REQUIRED and "compile" in OPTIONAL


def test_backend_fields_are_the_spec_list():
    fields = dataclasses.fields(Backend)
    hook_fields = [f for f in fields if f.name not in NOT_HOOK_FIELDS]
    assert {f.name for f in fields} - {f.name for f in hook_fields} == NOT_HOOK_FIELDS

    def has_default(f: dataclasses.Field) -> bool:
        return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING

    # backend_info's result is the ``info`` field; every other hook is a field of its own name,
    # without a default exactly where the hook is required
    assert [f.name for f in hook_fields if not has_default(f)] == [h for h in REQUIRED if h != "backend_info"]
    assert [f.name for f in hook_fields if has_default(f)] == list(OPTIONAL)


def _guide_table() -> list[tuple[str, tuple[str, ...], bool]]:
    """(hook, parameters, optional) of each row of the guide's hook table."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## 2. The hooks", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\|\s*`(\w+)\(([^)]*)\)`\s*(\*optional\*)?\s*\|", line)
        if m:
            rows.append((m[1], tuple(a.strip() for a in m[2].split(",") if a.strip()), m[3] is not None))
    return rows


def test_plugin_guide_hook_table_is_the_spec_list():
    rows = _guide_table()
    assert rows, f"no hook table found under '## 2. The hooks' in {GUIDE}"
    assert rows == [(h, _params(h), h in OPTIONAL) for h in HOOKS]


def test_registry_resolves_every_hook_of_the_list():
    plugin = _Complete()
    backend = Registry().register(plugin)
    for hook in HOOKS:
        if hook == "backend_info":
            assert backend.info.name == "contract"
        else:
            assert getattr(backend, hook).__func__ is getattr(_Complete, hook), hook


def test_a_missing_optional_hook_gets_the_core_default():
    backend = Registry().register(_Named())
    assert backend.make_launcher is None
    assert backend.specialization_rules() == SpecializationRules()


# ---- small plugins ------------------------------------------------------------------------------
class _Named(InterpreterBackend):
    """The interpreter's hooks under another name, so a private registry takes it."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name="contract", priority=1, triton_backend="interpreter", device_type="cpu")


class _Complete(_Named):
    """Every hook of the contract, optional ones included, marked."""

    @hookimpl
    def specialization_rules(self) -> SpecializationRules:
        return SpecializationRules(equal_to_1=False)

    @hookimpl
    def make_launcher(self, state):
        return None

    @hookimpl
    def synchronize(self, device):
        pass

    @hookimpl
    def benchmarker(self):
        return None

    @hookimpl
    def device_name(self, device):
        return "contract device"


def _forgetful(base: type, hook: str) -> object:
    """A subclass of ``base`` overriding ``hook`` without ``@hookimpl``, as a plugin."""
    return type("Forgetful", (base,), {hook: lambda self, *args: None})()


@pytest.mark.parametrize("hook", ["compile", "make_launcher", "specialization_rules"])
def test_unmarked_override_of_an_optional_hook_is_refused(hook):
    with pytest.raises(tritonjit.BackendError, match=rf"Forgetful\.{hook} is named like the '{hook}' hook but is "
                                                     r"not marked @hookimpl"):
        Registry().register(_forgetful(_Complete, hook))


def test_unmarked_override_of_a_required_hook_names_the_override():
    # without the rule the message would be 'lacks required hooks: load', blaming the base
    with pytest.raises(tritonjit.BackendError, match=r"Forgetful\.load .*not marked @hookimpl"):
        Registry().register(_forgetful(_Named, "load"))


def test_unmarked_hook_of_a_module_plugin_is_refused():
    mod = types.ModuleType("tj_contract_module")
    mod.__dict__.update({name: getattr(_Named(), name) for name in REQUIRED})

    def compile(src, target, options):  # noqa: A001 - named like the hook on purpose
        return None

    mod.compile = compile
    with pytest.raises(tritonjit.BackendError, match=r"tj_contract_module\.compile .*not marked @hookimpl"):
        Registry().register(mod)


def test_marked_override_and_unrelated_helpers_register():
    class Fine(_Named):
        compile_count = 0  # not a routine: no hook

        def helper(self):  # no hook of that name
            return 1

        @hookimpl
        def compile(self, src, target, options):
            self.compile_count += 1
            return super().compile(src, target, options)

    backend = Registry().register(Fine())
    assert backend.compile.__func__ is Fine.compile


def test_a_misspelt_hookimpl_is_refused_naming_it():
    class Typo(_Named):
        @hookimpl
        def compiel(self, src, target, options):  # never called: there is no such hook
            return None

    with pytest.raises(tritonjit.BackendError, match=r"Typo\.compiel is marked @hookimpl, but tritonjit has no "
                                                     r"hook named 'compiel'.*the hooks are: .*compile"):
        Registry().register(Typo())


@pytest.mark.parametrize("wrap", [staticmethod, classmethod])
def test_a_misspelt_static_or_class_hookimpl_is_refused(wrap):
    Typo = type("Typo", (_Named,), {"lod": wrap(hookimpl(lambda *a: None))})
    with pytest.raises(tritonjit.BackendError, match=r"no hook named 'lod'"):
        Registry().register(Typo())


def test_a_misspelt_hookimpl_of_a_module_plugin_is_refused():
    mod = types.ModuleType("tj_contract_typo")
    mod.__dict__.update({name: getattr(_Named(), name) for name in REQUIRED})
    mod.laucnh = hookimpl(lambda state, grid, stream, packed: None)
    with pytest.raises(tritonjit.BackendError, match=r"tj_contract_typo\.laucnh is marked @hookimpl"):
        Registry().register(mod)


def test_refused_plugin_leaves_the_registry_clean():
    reg = Registry()
    forgetful = _forgetful(_Named, "compile")
    with pytest.raises(tritonjit.BackendError):
        reg.register(forgetful)
    assert not reg.pm.is_registered(forgetful)
    assert all(impl.plugin is not forgetful for hook in HOOKS for impl in getattr(reg.pm.hook, hook).get_hookimpls())
    assert reg.register(_Named()).name == "contract"  # the name is free


def test_discovery_records_an_unmarked_hook_as_a_broken_plugin(monkeypatch):
    from importlib.metadata import EntryPoint

    mod = types.ModuleType("tj_contract_forgetful")
    mod.plugin = _forgetful(_Named, "make_launcher")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: [
        EntryPoint(name="forgetful", value=f"{mod.__name__}:plugin", group="tritonjit.backends")])
    reg = Registry()
    assert reg.backends() == []
    assert [b.name for b in reg.broken] == ["forgetful"]
    assert "Forgetful.make_launcher" in reg.broken[0].reason and "@hookimpl" in reg.broken[0].reason
