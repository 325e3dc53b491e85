"""Finding a vendor's runtime library, and saying what was looked for when it is absent."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class LibrarySearch:
    """The outcome of looking for a driver library: the loaded handle or why not."""

    names: tuple[str, ...]
    env_var: str
    path: str | None = None
    handle: ctypes.CDLL | None = None
    tried: list[str] = field(default_factory=list)
    error: str = ""

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
        looked = " or ".join(self.names)
        return (f"looked for {looked} and did not find it (tried: {', '.join(self.tried) or 'nothing'}"
                f"{'; ' + self.error if self.error else ''}); set {self.env_var}=/path/to/lib to point at it")


def find_library(names: Sequence[str], env_var: str, search_dirs: Sequence[str] = (),
                 explicit: str | None = None) -> LibrarySearch:
    """Load the first of ``names`` that opens, honouring ``explicit`` then ``$env_var``.

    Order: an explicit path, the environment variable, each name in the directories
    of ``search_dirs`` (vendor SDK roots such as ``$ROCM_PATH/lib``), then each name
    through the dynamic loader's own search. A library that is named explicitly but
    fails to open is reported, never silently replaced by another one.
    """
    search = LibrarySearch(tuple(names), env_var)
    pinned = explicit or os.environ.get(env_var)
    if pinned:
        candidates = [pinned]
    else:
        candidates = [os.path.join(d, n) for d in search_dirs if d for n in names]
        candidates = [c for c in candidates if os.path.exists(c)]
        for n in names:
            candidates.append(n)
            found = ctypes.util.find_library(n[3:].split(".so")[0]) if n.startswith("lib") else None
            if found and found not in candidates:
                candidates.append(found)
    for cand in candidates:
        search.tried.append(cand)
        try:
            search.handle = ctypes.CDLL(cand, mode=ctypes.RTLD_LOCAL)
            search.path = cand
            return search
        except OSError as exc:
            if pinned:
                search.error = str(exc)
    return search


def _has_symbol(lib: ctypes.CDLL, name: str) -> bool:
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
