"""Kernels defined in a script: compiled from their own source, never by running the script.

A kernel recorded from ``__main__`` (``python train.py``) lives in a file whose
top-level code is the user's program: importing that file would start the training
again. :func:`load_script_kernel` instead runs only the top-level statements the kernel
needs -- its definition, the functions it calls, the imports and constants they use,
found by scope analysis (:mod:`symtable`) -- and nothing else.

The statements keep their line numbers (every other line is left blank) and are
compiled under the script's own file name, so Triton's source hash (the kernel's
text, its first line and its dependencies) is the script's own: what warm-up compiles
here is what the script's next run finds in the cache, and a compiler error points at
the script's line. What cannot be separated from the program (a name the kernel needs
that top-level code binds, a kernel that is not a top-level definition) is refused
with a message that says what to move.
"""

from __future__ import annotations

import ast
import builtins
import os
import symtable
import sys
import tokenize
import types
from typing import Any

from ._errors import KernelNotFoundError

MAIN = "__main__"  # the manifest's ``module`` for a kernel a script defined

# top-level statements that only define names; If/Try qualify when everything in them does
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign, ast.AugAssign, ast.Pass)

_modules: dict[tuple[str, str], types.ModuleType] = {}


def load_script_kernel(path: str, name: str) -> Any:
    """The kernel ``name`` of the script at ``path``, defined without running the script."""
    key = (path, name)
    mod = _modules.get(key)
    if mod is None:
        source = kernel_module_source(path, name)
        modname = "tritonjit_script_" + "".join(c if c.isalnum() else "_" for c in f"{path}_{name}")
        mod = types.ModuleType(modname)
        mod.__file__ = path
        sys.modules[modname] = mod  # Triton resolves globals through the module
        try:
            exec(compile(source, path, "exec"), mod.__dict__)
        except Exception:
            sys.modules.pop(modname, None)
            raise
        _modules[key] = mod
    return getattr(mod, name)


def kernel_module_source(path: str, name: str) -> str:
    """The script's text with only the lines the kernel ``name`` needs (others blank)."""
    if not path or not os.path.isfile(path):
        raise KernelNotFoundError(
            f"kernel '{name}' was defined in a __main__ that is not a file ('{path}': python -c, stdin or a "
            "notebook), so warm-up cannot compile it from its source; move the kernel into a module")
    with tokenize.open(path) as f:  # honours a coding declaration
        text = f.read()
    tree = ast.parse(text, path)
    binders, tangled = _binders(tree)
    if name not in binders:
        where = f" (it is bound by top-level code at line {tangled[name].lineno})" if name in tangled else ""
        raise KernelNotFoundError(f"script '{path}' has no top-level kernel definition named '{name}'{where}; "
                                  "warm-up compiles a script's kernels from their definitions only")
    keep: list[ast.stmt] = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    seen: set[str] = set()
    todo = [name]
    while todo:
        needed = todo.pop()
        if needed in seen:
            continue
        seen.add(needed)
        if needed in tangled:
            stmt = tangled[needed]
            raise KernelNotFoundError(
                f"kernel '{name}' in script '{path}' uses '{needed}', which the script's top-level code binds at "
                f"line {stmt.lineno}; warm-up does not run a script's top-level code: define '{needed}' with a "
                "plain import, def or assignment, or move the kernel into a module")
        for stmt in binders.get(needed, ()):
            if stmt not in keep:
                keep.append(stmt)
                todo.extend(_needs(stmt))
        if needed not in binders and not hasattr(builtins, needed):
            keep.extend(s for s in _star_imports(tree) if s not in keep)
    return _only(text, tree, keep, path)


def _binders(tree: ast.Module) -> tuple[dict[str, list[ast.stmt]], dict[str, ast.stmt]]:
    """Which top-level statements bind each name: definitions, and code (``tangled``).
    A name that code only re-imports (``import torch`` under ``if __name__ == ...``) is
    not tangled when a definition binds it too: both bind the same module."""
    binders: dict[str, list[ast.stmt]] = {}
    tangled: dict[str, ast.stmt] = {}
    reimported: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if _defines_only(stmt):
            for n in _bound(stmt):
                binders.setdefault(n, []).append(stmt)
            continue
        table = symtable.symtable(ast.unparse(stmt), "<stmt>", "exec")
        for sym in table.get_symbols():
            if sym.is_imported() and not _assigned_otherwise(stmt, sym.get_name()):
                reimported.setdefault(sym.get_name(), stmt)
            elif sym.is_assigned() or sym.is_imported():
                tangled.setdefault(sym.get_name(), stmt)
    for n, stmt in reimported.items():
        if n not in binders:
            tangled.setdefault(n, stmt)
    return binders, tangled


def _assigned_otherwise(stmt: ast.stmt, name: str) -> bool:
    """Whether ``stmt`` binds ``name`` by anything but an import (at module level)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
    return False


def _defines_only(stmt: ast.stmt) -> bool:
    if isinstance(stmt, _DEFINITIONS):
        return True
    if isinstance(stmt, ast.If):
        return all(_defines_only(s) for s in stmt.body + stmt.orelse)
    if isinstance(stmt, ast.Try):
        parts = stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
        return all(_defines_only(s) for s in parts)
    if isinstance(stmt, ast.Expr):  # a docstring or a bare constant
        return isinstance(stmt.value, ast.Constant)
    return False


def _bound(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds (walking into compound ones)."""
    table = symtable.symtable(ast.unparse(stmt), "<stmt>", "exec")
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}


def _needs(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement reads, at definition or when called."""
    table = symtable.symtable(ast.unparse(stmt), "<stmt>", "exec")
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:
        t = stack.pop()
        names.update(s.get_name() for s in t.get_symbols() if s.is_global() and s.is_referenced())
        stack.extend(t.get_children())
    return names


def _star_imports(tree: ast.Module) -> list[ast.stmt]:
    return [s for s in tree.body if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)]


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno for d in decorators])


def _only(text: str, tree: ast.Module, keep: list[ast.stmt], path: str) -> str:
    """``text`` with the lines of ``keep`` in place and every other line blank."""
    lines = text.splitlines(keepends=True)
    kept: set[int] = set()
    for stmt in keep:
        kept.update(range(_first_line(stmt), (stmt.end_lineno or stmt.lineno) + 1))
    for stmt in tree.body:
        if stmt not in keep and kept & set(range(_first_line(stmt), (stmt.end_lineno or stmt.lineno) + 1)):
            raise KernelNotFoundError(f"script '{path}', line {stmt.lineno}: a statement the kernel needs shares "
                                      "its line with other top-level code; put it on a line of its own")
    return "".join(line if i in kept else "\n" for i, line in enumerate(lines, 1))
