"""Finding and opening the vendor's shared libraries with ctypes.

Kept apart from the driver bindings so ``tritonjit info`` can say exactly which
files were looked for when a runtime is absent. (Candidate for tritonjit.pluginkit:
every vendor plugin needs the same search.)
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Sequence


class LibraryNotFound(RuntimeError):
    """None of the candidate paths of a vendor library could be opened."""


def candidates(names: Sequence[str], env_dirs: Iterable[str], default_dirs: Iterable[str],
               subdirs: Sequence[str] = ("lib64", "lib")) -> list[str]:
    """Paths to try for each library name: $ENV/<subdir>/<name>, default dirs, then the
    bare name (the dynamic loader's own search, LD_LIBRARY_PATH included)."""
    roots = [os.environ[e] for e in env_dirs if os.environ.get(e)] + list(default_dirs)
    out: list[str] = []
    for name in names:
        for root in roots:
            for sub in subdirs:
                out.append(os.path.join(root, sub, name))
        out.append(name)
    return out


def open_first(paths: Sequence[str], what: str) -> ctypes.CDLL:
    """Open the first path that loads; the error lists every path tried."""
    errors = []
    for path in paths:
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            errors.append(f"{path} ({exc})")
    raise LibraryNotFound(f"{what} not found; looked for: " + "; ".join(errors))


def bind(libs: Sequence[ctypes.CDLL], name: str, restype: object, argtypes: Sequence[object]) -> object:
    """Resolve ``name`` in the first library that exports it, with its C signature."""
    for lib in libs:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = list(argtypes)
            return fn
    raise LibraryNotFound(f"symbol {name} is exported by none of {[lib._name for lib in libs]}")
