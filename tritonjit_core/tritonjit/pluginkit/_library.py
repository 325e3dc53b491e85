"""Finding a vendor's runtime libraries, and saying what was looked for when one is absent.

Most drivers are one library (``libcuda.so.1``, ``libtopsrt.so``): :func:`find_library`.
Some runtimes are split over several that are all needed (CANN's ``libascendcl.so``
for ``acl*`` and ``libruntime.so`` for ``rt*``): :func:`find_libraries`, whose
:class:`LibrarySet` binds each symbol from whichever library exports it. Both honour
an explicit path, then ``$<env_var>``, then the SDK directories, then the dynamic
loader's own search; both report every place they looked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


class LibraryNotFound(OSError):
    """A needed library (or a symbol in it) is absent; the message says what was looked for."""


def sdk_lib_dirs(env_vars: Iterable[str], default_roots: Iterable[str] = (),
                 subdirs: Sequence[str] = ("lib", "lib64")) -> list[str]:
    """``<root>/<subdir>`` for each SDK root named by an environment variable, then the defaults."""
    roots = [os.environ.get(var) for var in env_vars] + list(default_roots)
    return [os.path.join(r, sub) for r in roots if r for sub in subdirs]


@dataclass
class LibrarySearch:
    """The outcome of looking for a driver library: the loaded handle or why not."""

    names: tuple[str, ...]
    env_var: str
    path: str | None = None
    handle: ctypes.CDLL | None = None
    tried: list[str] = field(default_factory=list)
    error: str = ""
    search_dirs: tuple[str, ...] = ()
    pinned: str | None = None  # the one path named explicitly or by $env_var

    @property
    def found(self) -> bool:
        return self.handle is not None

    @property
    def simulated(self) -> bool:
        """True when the library is tritonjit's simulated driver (tests only)."""
        return self.handle is not None and _has_symbol(self.handle, "tritonjit_simulated_driver")

    def reason(self) -> str:
        if self.found:
            kind = "SIMULATED driver (no hardware)" if self.simulated else "driver"
            return f"{kind} {self.path}"
        if self.pinned:
            return (f"could not open {self.pinned}, named explicitly or by {self.env_var} "
                    f"({self.error or 'no such library'}); it should be the {' or '.join(self.names)} to use")
        looked = " or ".join(self.names)
        where = f" in {', '.join(self.search_dirs)} and" if self.search_dirs else ""
        return (f"looked for {looked}{where} on the loader's path and did not find it "
                f"(tried: {', '.join(self.tried) or 'nothing'}{'; ' + self.error if self.error else ''}); "
                f"set {self.env_var}=/path/to/lib to point at it")


def find_library(names: Sequence[str], env_var: str, search_dirs: Sequence[str] = (),
                 explicit: str | None = None, *, mode: int = ctypes.RTLD_LOCAL) -> LibrarySearch:
    """Load the first of ``names`` that opens, honouring ``explicit`` then ``$env_var``.

    Order: an explicit path, the environment variable, each name in the directories
    of ``search_dirs`` (vendor SDK roots such as ``$ROCM_PATH/lib``), then each name
    through the dynamic loader's own search. A library that is named explicitly but
    fails to open is reported, never silently replaced by another one. ``mode``:
    ``ctypes.RTLD_GLOBAL`` where the vendor's libraries resolve each other's symbols.
    """
    search = LibrarySearch(tuple(names), env_var, search_dirs=tuple(d for d in search_dirs if d))
    pinned = explicit or os.environ.get(env_var)
    search.pinned = pinned or None
    if pinned:
        candidates = [pinned]
    else:
        candidates = [os.path.join(d, n) for d in search.search_dirs for n in names]
        candidates = [c for c in candidates if os.path.exists(c)]
        for n in names:
            candidates.append(n)
            found = ctypes.util.find_library(n[3:].split(".so")[0]) if n.startswith("lib") else None
            if found and found not in candidates:
                candidates.append(found)
    for cand in candidates:
        search.tried.append(cand)
        try:
            search.handle = ctypes.CDLL(cand, mode=mode)
            search.path = cand
            return search
        except OSError as exc:
            if pinned:
                search.error = str(exc)
    return search


@dataclass
class LibrarySet:
    """Several libraries that are all needed, found together (:func:`find_libraries`)."""

    searches: list[LibrarySearch]

    @property
    def found(self) -> bool:
        return all(s.found for s in self.searches)

    @property
    def handles(self) -> list[ctypes.CDLL]:
        return [s.handle for s in self.searches if s.handle is not None]

    @property
    def simulated(self) -> bool:
        return any(s.simulated for s in self.searches)

    def reason(self) -> str:
        if self.found:
            paths = ", ".join(dict.fromkeys(s.path or "" for s in self.searches))
            return f"{'SIMULATED driver (no hardware)' if self.simulated else 'driver'} {paths}"
        return "; ".join(s.reason() for s in self.searches if not s.found)

    def require(self) -> LibrarySet:
        """Self when every library opened, else :class:`LibraryNotFound` with the reason."""
        if not self.found:
            raise LibraryNotFound(self.reason())
        return self

    def bind(self, name: str, restype: Any, argtypes: Sequence[Any]) -> Any:
        """``name`` from the first library exporting it, with its C signature."""
        for lib in self.handles:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = restype, list(argtypes)
                return fn
        raise LibraryNotFound(f"symbol {name} is exported by none of {self.reason()}")


def find_libraries(libraries: Sequence[Sequence[str]], env_var: str, search_dirs: Sequence[str] = (),
                   explicit: str | None = None, *, mode: int = ctypes.RTLD_LOCAL) -> LibrarySet:
    """Find every library of ``libraries`` (each a tuple of alternative file names).

    An explicit path or ``$env_var`` names ONE library that exports everything (the
    tests' simulated driver) and replaces them all; otherwise each is searched for as
    :func:`find_library` does, in order, so one library's symbols can resolve the next's.
    """
    pinned = explicit or os.environ.get(env_var)
    if pinned:
        names = tuple(n for alternatives in libraries for n in alternatives)
        return LibrarySet([find_library(names, env_var, (), pinned, mode=mode)])
    return LibrarySet([find_library(alternatives, env_var, search_dirs, mode=mode) for alternatives in libraries])


def _has_symbol(lib: ctypes.CDLL, name: str) -> bool:
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
