"""Small C++ modules linked against the torch in this process: prebuilt, else built once per torch.

torch's headers are not available when a tritonjit distribution is built under build
isolation, so modules that use torch's C++ API come from one of two places:

1. prebuilt in the installed wheel (``torch_prebuilt``: a wheelhouse built for a
   known torch carries them), used when torch's version, C++ ABI, the Python ABI
   and the sources all match;
2. else compiled on first use with the system C++ compiler, as Triton builds its
   launchers, and kept under ``<cache root>/native/``. The file name hashes the
   sources, the compiler, torch's version and location and the Python ABI, so a
   torch upgrade builds a new one; a file lock makes concurrent processes build it
   once.

A build takes 20-40 s, so callers start it in the background (:meth:`AsyncModule.start`)
and keep their pure-Python path until it is ready. A build that fails (no compiler,
a compiler error) is remembered on disk beside the artifacts, keyed by the same
facts plus the compiler's state: later processes neither retry nor warn again until
torch or the compiler changes (``tritonjit warmup --native`` retries). Used by the
core's tensor reader (``torch_reader.py``) and by tritonjit_ops' call prologues and
C++ operator path.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._disk_cache import cache_root, file_lock
from . import torch_prebuilt
from .torch_prebuilt import Helper, compiler, cxx_standard

log = logging.getLogger(__name__)

# Loading a module runs its C++ initialisers and its ready callbacks, which register kernels
# with torch's dispatcher. A background build that finishes while the interpreter shuts down
# must not start that (its daemon thread would run torch's C++ against a finalising
# interpreter): the exit hook waits for a load under way and stops any later one.
_load_lock = threading.Lock()
_exiting = False


@atexit.register
def _stop_loads() -> None:
    global _exiting
    with _load_lock:
        _exiting = True

__all__ = ["AsyncModule", "artifact", "build", "compiler", "cxx_standard", "failure_marker", "load"]


def artifact(name: str, sources: Sequence[str], torch: Any, cxx: str) -> str:
    """Where the module built from ``sources`` for this torch lives (it may not exist yet)."""
    return _cache_path(name, sources, torch, cxx, importlib.machinery.EXTENSION_SUFFIXES[0])


def failure_marker(name: str, sources: Sequence[str], torch: Any) -> str:
    """Where a failed build of this module, for this torch and this compiler state, is remembered."""
    return _cache_path(name, sources, torch, _compiler_state(compiler()), ".failed")


def _cache_path(name: str, sources: Sequence[str], torch: Any, cxx: str, suffix: str) -> str:
    h = hashlib.sha256(torch_prebuilt.digest(sources).encode())
    ext = importlib.machinery.EXTENSION_SUFFIXES[0]
    h.update(repr((torch.__version__, os.path.dirname(torch.__file__), cxx, cxx_standard(torch), ext)).encode())
    return os.path.join(cache_root(), "native", f"{name.rpartition('.')[2]}-{h.hexdigest()[:16]}{suffix}")


def _compiler_state(cxx: str | None) -> str:
    """The compiler as a failed build depends on it: none, or its path, size and time."""
    if cxx is None:
        return "no compiler"
    try:
        st = os.stat(os.path.realpath(cxx))
    except OSError:
        return cxx
    return f"{cxx}:{st.st_size}:{st.st_mtime_ns}"


def build(name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> str:
    """Compile ``source`` (once; other processes wait on a file lock) and return the
    shared object's path. RuntimeError with the compiler's output where it fails."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise RuntimeError("torch is not imported")
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install a wheel with the helpers prebuilt)")
    helper = Helper(name, source, tuple(headers), tuple(include_dirs))
    path = artifact(name, helper.sources, torch, cxx)
    if os.path.exists(path):
        return path
    with file_lock(path + ".lock"):
        if os.path.exists(path):
            return path
        tmp = f"{path}.tmp.{os.getpid()}"
        t0 = time.perf_counter()
        log.info("building %s for torch %s (once per torch version)", name, torch.__version__)
        lib = os.path.join(os.path.dirname(str(torch.__file__)), "lib")
        # The rename is part of the child's command: a process that exits while its
        # background build runs (a short script) still leaves a finished module, not a
        # stray temporary file, and the next process loads it.
        cmd = " ".join(shlex.quote(a) for a in torch_prebuilt.compile_command(helper, torch, cxx, tmp, lib))
        p = subprocess.run(["/bin/sh", "-c", f"{cmd} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}"],
                           capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(path):
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise RuntimeError(f"{os.path.basename(cxx)} failed: {(p.stderr or p.stdout).strip()[-1500:]}")
        log.info("built %s in %.1f s: %s", name, time.perf_counter() - t0, path)
    return path


def _import(name: str, path: str) -> Any:
    """The extension module at ``path``. Loading a single-phase extension enters it in
    ``sys.modules`` under ``name``; where a Python module of that name is already there
    (``tritonjit_ops._native_ops`` is both the wrapper and its C++ module), the wrapper
    stays, so that ``import`` and ``mock.patch`` keep finding it."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    before = sys.modules.get(name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if before is not None:
        sys.modules[name] = before
    return mod


def load(name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> Any:
    """Build if needed, then import the module ``name`` from the shared object."""
    return _import(name, build(name, source, headers, include_dirs))


def first_line(error: str) -> str:
    """The line of a build error that ``tritonjit info`` shows: the compiler's first
    ``error:`` line where there is one (the lines before it only say where), else the first."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    first = next((line for line in lines if "error:" in line or "error " in line.lower()), None)
    return first or (lines[0] if lines else error.strip())


class AsyncModule:
    """A module loaded from the wheel's prebuilt copy, else built on a background thread
    on first :meth:`start`; ``ready`` callbacks run (with the module) once it is loaded.
    ``reason`` says where it is; :meth:`status` says so without building anything."""

    def __init__(self, name: str, source: str, headers: Sequence[str] = (), include_dirs: Sequence[str] = (),
                 prebuilt: str | None = None) -> None:
        self.name, self.source, self.headers, self.include_dirs = name, source, tuple(headers), tuple(include_dirs)
        self.helper = Helper(name, source, self.headers, self.include_dirs)
        self.prebuilt = prebuilt
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

    def start(self, wait: bool = False, retry: bool = False, build: bool = True) -> Any:
        """Begin loading (once); with ``wait``, block until it is done. The module or None.

        A prebuilt module, or one already built (by an earlier process, or ``tritonjit
        warmup --native``), is loaded at once, in the calling thread: callers then take
        its path from their first call on. A build that failed before for this torch and
        compiler is not tried again (``retry`` forgets that failure and tries). Without
        ``build``, only a module that needs no build is loaded (nothing else starts)."""
        with self._lock:
            if self._thread is None and not self._done.is_set():
                torch = sys.modules.get("torch")
                if torch is None:
                    return None
                if retry:
                    self.forget_failure()
                ready = self._ready_path(torch)
                if not (ready or build):
                    return None
                failed = None if ready else self._remembered_failure(torch)
                self.reason = "building"
                if ready or failed:
                    self._thread = threading.current_thread()
                    sync = True
                else:
                    self._thread = threading.Thread(target=self._run, kwargs={"background": True},
                                                    name=f"tritonjit-build-{self.name}", daemon=True)
                    self._thread.start()
                    sync = False
            else:
                sync = False
        if sync:
            if failed:
                self._fail(failed, remembered=True)
            else:
                self._run(ready)
        if wait:
            self._done.wait()
        return self.module

    def load_if_ready(self) -> Any:
        """Load the module now, in this thread, where that needs no build (a prebuilt copy
        for this torch, or one built earlier); never starts a build. The module or None."""
        return self.start(build=False)

    # ---- where the module comes from --------------------------------------------------------
    def _ready_path(self, torch: Any) -> str | None:
        """A prebuilt module for this torch, else one built earlier, else None."""
        path, _ = torch_prebuilt.find(self.prebuilt, self.helper, torch)
        if path is not None:
            return path
        cxx = compiler()
        try:
            built = artifact(self.name, self.helper.sources, torch, cxx) if cxx else None
        except OSError:
            return None
        return built if built and os.path.exists(built) else None

    def _marker(self, torch: Any) -> str:
        return failure_marker(self.name, self.helper.sources, torch)

    def _remembered_failure(self, torch: Any) -> str | None:
        """The error of an earlier failed build for this torch and compiler state, if any."""
        try:
            with open(self._marker(torch)) as f:
                return str(json.load(f)["error"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _remember_failure(self, error: str) -> None:
        torch = sys.modules["torch"]
        marker = self._marker(torch)
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            tmp = f"{marker}.tmp.{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump({"module": self.name, "error": error, "torch": torch.__version__,
                           "compiler": _compiler_state(compiler()), "time": time.time()}, f)
            os.replace(tmp, marker)
        except OSError:  # a read-only cache: the failure is then reported once per process
            pass

    def forget_failure(self) -> None:
        """Delete the remembered failure for this torch and compiler (the next start retries)."""
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                os.unlink(self._marker(torch))
            except OSError:
                pass

    def _fail(self, error: str, remembered: bool) -> None:
        self.reason = f"not available: {describe_failure(error)}"
        if remembered:  # said once, by the process that failed; the others stay quiet
            log.debug("%s is %s (remembered; the Python path is used)", self.name, self.reason)
        else:
            self._remember_failure(error)
            log.warning("%s is %s; the Python path is used instead (remembered for this torch and "
                        "compiler: not retried until either changes, or `tritonjit warmup --native`)",
                        self.name, self.reason)
        self._done.set()

    def _run(self, path: str | None = None, background: bool = False) -> None:
        try:
            if path is None:
                path = build(self.name, self.source, self.headers, self.include_dirs)
        except Exception as exc:  # anything: the caller's Python path is the reference
            self._fail(str(exc), remembered=False)
            return
        if not background:  # the caller's own thread: the interpreter is not exiting under it
            self._load(path)
            return
        with _load_lock:  # a daemon thread: see _stop_loads
            if _exiting:
                self.reason = "not loaded: the process was exiting when its build finished"
                self._done.set()
                return
            self._load(path)

    def _load(self, path: str) -> None:
        """Import the built module and run the ready callbacks."""
        try:
            mod = _import(self.name, path)
        except Exception as exc:  # anything: the caller's Python path is the reference
            self._fail(str(exc), remembered=False)
            return
        with self._lock:
            self.module = mod
            how = "prebuilt, " if self.prebuilt and path.startswith(self.prebuilt) else ""
            self.reason = f"in use ({how}{path})"
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb(mod)
            except Exception:  # a failing consumer must not break the others
                log.exception("a callback of %s failed", self.name)
        self._done.set()

    def status(self) -> str:
        """What ``tritonjit info`` reports: in use, prebuilt, built, or why it is missing.
        Never builds or loads anything."""
        if self.reason != "not started":
            return self.reason
        torch = sys.modules.get("torch")
        if torch is None:
            return "not loaded (torch not imported)"
        path, why = torch_prebuilt.find(self.prebuilt, self.helper, torch)
        if path is not None:
            return f"prebuilt for torch {torch.__version__} (loads on first use: {path})"
        failed = self._remembered_failure(torch)
        if failed is not None:
            return f"not available: {describe_failure(failed)}"
        cxx = compiler()
        if cxx is None:
            return f"not available: no C++ compiler found (set CXX); {why}; the Python path is used"
        built = artifact(self.name, self.helper.sources, torch, cxx)
        if os.path.exists(built):
            return f"built ({built})"
        return f"builds on first use with {os.path.basename(cxx)} (once per torch version; {why})"


def describe_failure(error: str) -> str:
    """A remembered build error as ``tritonjit info`` and the warning say it."""
    if error.startswith("no C++ compiler"):
        return first_line(error)
    return f"build failed: {first_line(error)}"
