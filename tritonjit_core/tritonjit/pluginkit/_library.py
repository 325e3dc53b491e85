"""Finding a vendor's runtime libraries, and saying what was looked for when one is absent.

Most drivers are one library (``libcuda.so.1``, ``libtopsrt.so``): :func:`find_library`.
Some runtimes are split over several that are all needed (CANN's ``libascendcl.so``
for ``acl*`` and ``libruntime.so`` for ``rt*``): :func:`find_libraries`, whose
:class:`LibrarySet` binds each symbol from whichever library exports it. Both honour
an explicit path, then ``$<env_var>``, then the SDK directories, then the dynamic
loader's own search; both report every place they looked.

The loader's search beyond a bare ``dlopen`` (other sonames of the library, as
``ctypes.util.find_library`` finds them) reads ``ldconfig -p`` once per process:
``find_library`` runs ldconfig, and on a miss gcc and ld, at every call, 10-35 ms
per name -- some 200 ms for the vendor plugins' availability checks on a machine
that has none of their drivers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import re
import subprocess
import sys
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
        candidates = [c for c in candidates if os.path.exists(c)] + list(names)
    if _open_first(search, candidates, mode, report=bool(pinned)) or pinned:
        return search
    # the loader's other names for the library (libcuda.so.1 for libcuda.so), asked only now
    more = [p for n in names if n.startswith("lib") for p in loader_paths(n[3:].split(".so")[0])]
    _open_first(search, [p for p in dict.fromkeys(more) if p not in search.tried], mode, report=False)
    return search


def _open_first(search: LibrarySearch, candidates: Sequence[str], mode: int, report: bool) -> bool:
    for cand in candidates:
        search.tried.append(cand)
        try:
            search.handle = ctypes.CDLL(cand, mode=mode)
            search.path = cand
            return True
        except OSError as exc:
            if report:
                search.error = str(exc)
    return False


def loader_paths(stem: str) -> list[str]:
    """Where the dynamic loader would find ``lib<stem>.so*``: its cache (``ldconfig -p``,
    read once per process), then ``$LD_LIBRARY_PATH``. Off Linux, ``ctypes.util.find_library``."""
    if not sys.platform.startswith("linux"):
        found = ctypes.util.find_library(stem)
        return [found] if found else []
    pattern = re.compile(rf"^\s+lib{re.escape(stem)}\.so[^\s]*\s.*=>\s*(\S+)\s*$", re.M)
    paths = pattern.findall(_ldconfig_cache())
    for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        paths += sorted(glob.glob(os.path.join(glob.escape(d), f"lib{stem}.so*")))
    return list(dict.fromkeys(paths))


@functools.lru_cache(maxsize=1)
def _ldconfig_cache() -> str:
    """``ldconfig -p``, run once per process (empty when there is no ldconfig)."""
    env = dict(os.environ, LC_ALL="C", LANG="C")
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            return subprocess.run([exe, "-p"], capture_output=True, text=True, env=env, timeout=10,
                                  check=False).stdout
        except (OSError, subprocess.SubprocessError):
            continue
    return ""


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
