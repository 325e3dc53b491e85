"""Small C++ modules linked against the torch in this process, built once per torch version.

torch's headers are not available when a tritonjit distribution is built (build
isolation), so modules that use torch's C++ API are compiled on first use with the
system C++ compiler, as Triton builds its launchers, and kept under
``<cache root>/native/``. The file name hashes the sources, the compiler, torch's
version and location and the Python ABI, so a torch upgrade builds a new one; a
file lock makes concurrent processes build it once.

A build takes 10-20 s, so callers start it in the background (:func:`load_async`)
and keep their pure-Python path until it is ready. Used by the core's tensor reader
(``torch_reader.py``) and by tritonjit_ops' call prologues.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._disk_cache import cache_root, file_lock

log = logging.getLogger(__name__)


def compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cxx_standard(torch: Any) -> str:
    """The C++ standard torch's own extension builder uses (C++20 from torch 2.10, C++17 before)."""
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return "c++20" if (major, minor) >= (2, 10) else "c++17"


def artifact(name: str, sources: Sequence[str], torch: Any, cxx: str) -> str:
    """Where the module built from ``sources`` for this torch lives (it may not exist yet)."""
    h = hashlib.sha256()
    for path in sources:
        with open(path, "rb") as f:
            h.update(f.read())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    h.update(repr((torch.__version__, os.path.dirname(torch.__file__), cxx, cxx_standard(torch), suffix)).encode())
    return os.path.join(cache_root(), "native", f"{name.rpartition('.')[2]}-{h.hexdigest()[:16]}{suffix}")


def _command(source: str, include_dirs: Sequence[str], torch: Any, cxx: str, out: str) -> list[str]:
    from torch.utils import cpp_extension

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-std=" + cxx_standard(torch), f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-w"]
    for inc in (*include_dirs, sysconfig.get_paths()["include"], *cpp_extension.include_paths()):
        cmd += ["-I", inc]
    return cmd + [source, "-L", lib, "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}", "-o", out]


def build(name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> str:
    """Compile ``source`` (once; other processes wait on a file lock) and return the
    shared object's path. RuntimeError with the compiler's output where it fails."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise RuntimeError("torch is not imported")
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX)")
    path = artifact(name, (source, *headers), torch, cxx)
    if os.path.exists(path):
        return path
    with file_lock(path + ".lock"):
        if os.path.exists(path):
            return path
        tmp = f"{path}.tmp.{os.getpid()}"
        t0 = time.perf_counter()
        log.info("building %s for torch %s (once per torch version)", name, torch.__version__)
        # The rename is part of the child's command: a process that exits while its
        # background build runs (a short script) still leaves a finished module, not a
        # stray temporary file, and the next process loads it.
        cmd = " ".join(shlex.quote(a) for a in _command(source, include_dirs, torch, cxx, tmp))
        p = subprocess.run(["/bin/sh", "-c", f"{cmd} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}"],
                           capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(path):
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise RuntimeError(f"{os.path.basename(cxx)} failed: {(p.stderr or p.stdout).strip()[-1500:]}")
        log.info("built %s in %.1f s: %s", name, time.perf_counter() - t0, path)
    return path


def load(name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> Any:
    """Build if needed, then import the module ``name`` from the shared object."""
    path = build(name, source, headers, include_dirs)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class AsyncModule:
    """A module built on a background thread on first :meth:`start`; ``ready`` callbacks
    run (on that thread, with the module) once it is loaded. ``reason`` says where it is."""

    def __init__(self, name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> None:
        self.name, self.source, self.headers, self.include_dirs = name, source, tuple(headers), tuple(include_dirs)
        self.module: Any = None
        self.reason = "not started"
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._callbacks: list[Callable[[Any], None]] = []

    def on_ready(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(module)`` when loaded (now, if it already is)."""
        with self._lock:
            if self.module is None:
                self._callbacks.append(callback)
                return
        callback(self.module)

    def start(self, wait: bool = False) -> Any:
        """Begin the build (once); with ``wait``, block until it is done. The module or None.

        A module already built (by an earlier process, or ``tritonjit warmup --native``)
        is loaded at once, in the calling thread: callers then take its path from their
        first call on, not only once a background thread got to it."""
        with self._lock:
            if self._thread is None and not self._done.is_set():
                if "torch" not in sys.modules:
                    return None
                self.reason = "building"
                if self._built():
                    self._thread = threading.current_thread()
                    sync = True
                else:
                    self._thread = threading.Thread(target=self._run, name=f"tritonjit-build-{self.name}", daemon=True)
                    self._thread.start()
                    sync = False
            else:
                sync = False
        if sync:
            self._run()
        if wait:
            self._done.wait()
        return self.module

    def _built(self) -> bool:
        cxx = compiler()
        try:
            return cxx is not None and os.path.exists(
                artifact(self.name, (self.source, *self.headers), sys.modules["torch"], cxx))
        except OSError:
            return False

    def _run(self) -> None:
        try:
            mod = load(self.name, self.source, self.headers, self.include_dirs)
            path = mod.__file__
        except Exception as exc:  # anything: the caller's Python path is the reference
            self.reason = f"not available ({exc})"
            log.warning("%s is %s; the Python path is used instead", self.name, self.reason)
            self._done.set()
            return
        with self._lock:
            self.module = mod
            self.reason = f"in use ({path})"
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb(mod)
            except Exception:  # a failing consumer must not break the others
                log.exception("a callback of %s failed", self.name)
        self._done.set()
