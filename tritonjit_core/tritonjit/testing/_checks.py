"""Checks every out-of-tree plugin's tests make, written once.

A plugin whose vendor Triton is not installable here must still fail a compile with
one clear :class:`tritonjit.CompilationError` naming the kernel and what to install,
and must be discovered under its name from its own distribution.
"""

from __future__ import annotations

from typing import Any

import pytest

from .._backend import Backend
from .._errors import CompilationError
from .._function import function
from .._registry import registry


def assert_vendor_compiler_missing(kernel: Any, signature: str, target: str, *mentions: str) -> str:
    """Compiling ``kernel`` for ``target`` raises a CompilationError naming the kernel,
    every string of ``mentions`` (what to install) and the installed Triton's version;
    returns the message for further checks."""
    import triton

    f = function(kernel)
    with pytest.raises(CompilationError) as info:
        f.compile(signature, target=target)
    text = str(info.value)
    for needed in (f.name, *mentions, triton.__version__):
        assert needed in text, f"the error does not name {needed!r}:\n{text}"
    return text


def assert_installed_backend(name: str, dist: str, **info: Any) -> Backend:
    """The backend ``name`` is discovered from distribution ``dist`` and its
    :class:`tritonjit.BackendInfo` has the given fields (``dispatch_key="PrivateUse1"``)."""
    backend = registry.get(name)
    assert backend.dist == dist, f"backend '{name}' comes from {backend.dist}, expected {dist}"
    for field, want in info.items():
        got = getattr(backend.info, field)
        assert got == want, f"backend '{name}': info.{field} is {got!r}, expected {want!r}"
    return backend
