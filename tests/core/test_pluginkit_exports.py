"""tritonjit.pluginkit imports each public name on first use, and every name resolves.

The kit is imported by every plugin at discovery, in every process; the CUDA plugin
needs one class of it. The three lists of the kit's names (``_WHERE`` for the lazy
lookup, ``__all__``, the TYPE_CHECKING imports for type checkers) must stay equal.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tritonjit.pluginkit as kit


def _type_checking_names() -> set[str]:
    tree = ast.parse(Path(kit.__file__).read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return {a.asname or a.name for imp in node.body if isinstance(imp, ast.ImportFrom) for a in imp.names}
    raise AssertionError("no TYPE_CHECKING block in tritonjit/pluginkit/__init__.py")


def test_the_three_lists_of_names_agree():
    assert sorted(kit._WHERE) == sorted(kit.__all__)
    assert _type_checking_names() == set(kit.__all__)


def test_every_name_resolves_to_its_module():
    for name, where in kit._WHERE.items():
        obj = getattr(kit, name)
        module = where.lstrip(".")
        if hasattr(obj, "__module__") and not isinstance(obj, (int, str, tuple, dict, frozenset)):
            assert obj.__module__.endswith(module), (name, obj.__module__, where)
    assert set(kit.__all__) <= set(dir(kit))


def test_an_unknown_name_is_an_attribute_error():
    try:
        kit.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc) and "tritonjit.pluginkit" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_one_name_imports_only_its_module():
    code = ("import sys\nfrom tritonjit.pluginkit import TorchDevices\n"
            "print(sorted(m for m in sys.modules if m.startswith('tritonjit.pluginkit')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "['tritonjit.pluginkit', 'tritonjit.pluginkit._devices']"
