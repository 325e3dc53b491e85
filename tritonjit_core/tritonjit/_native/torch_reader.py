"""The torch tensor reader: built once per torch version on first use, then loaded.

The native dispatcher reads three things from every tensor argument: its data
pointer, its dtype and its device. Through Python (``t.data_ptr()``, ``t.dtype``)
that is about a hundred nanoseconds per tensor, most of a launch's overhead for a
kernel with many tensors. ``_torch_tensor.cpp`` reads them through torch's C++ API
instead. torch's headers are not available when tritonjit-core itself is built
(build isolation), so the reader is compiled here, on first use, against the torch
in this process, with the system C++ compiler, as Triton builds its launchers.

The shared object lives under ``<cache root>/native/``, named by a hash of the
source, the compiler flags, torch's version and location and the Python ABI, so a
torch upgrade builds a new one. Where anything fails (no compiler, no headers),
tritonjit logs why once and the dispatcher keeps reading tensors through Python.

``TRITONJIT_TORCH_READER=0`` turns the reader off (``TRITONJIT_NO_NATIVE=1`` too).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from typing import Any

from .._disk_cache import cache_root, file_lock

log = logging.getLogger("tritonjit")

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "_torch_tensor.cpp")
HEADER = os.path.join(HERE, "tritonjit_tensor.h")

_lock = threading.Lock()
_capsule: Any = None
#: why the reader is or is not in use (``tritonjit info`` shows it)
reason = "not loaded yet"
_tried = False


def enabled() -> bool:
    return os.environ.get("TRITONJIT_TORCH_READER", "1").strip().lower() not in ("0", "false", "no", "off")


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build_command(torch: Any, cxx: str, out: str) -> list[str]:
    from torch.utils import cpp_extension

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-std=" + _cxx_standard(), f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
           "-w", "-I", HERE, "-I", sysconfig.get_paths()["include"]]
    for inc in cpp_extension.include_paths():
        cmd += ["-I", inc]
    cmd += [SOURCE, "-L", lib, "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}", "-o", out]
    return cmd


def _cxx_standard() -> str:
    """The C++ standard torch's own extension builder uses (C++20 from torch 2.10, C++17 before)."""
    import torch

    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return "c++20" if (major, minor) >= (2, 10) else "c++17"


def _artifact(torch: Any, cxx: str) -> str:
    h = hashlib.sha256()
    for path in (SOURCE, HEADER):
        with open(path, "rb") as f:
            h.update(f.read())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    h.update(repr((torch.__version__, os.path.dirname(torch.__file__), cxx, _cxx_standard(), suffix)).encode())
    return os.path.join(cache_root(), "native", f"_torch_tensor-{h.hexdigest()[:16]}{suffix}")


def _import(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("tritonjit._native._torch_tensor", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(torch: Any) -> str:
    """Compile the reader for this torch (once; other processes wait on a file lock) and
    return the shared object's path. Raises RuntimeError with the compiler's output."""
    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX)")
    path = _artifact(torch, cxx)
    if os.path.exists(path):
        return path
    with file_lock(path + ".lock"):
        if os.path.exists(path):
            return path
        tmp = f"{path}.tmp.{os.getpid()}"
        t0 = time.perf_counter()
        log.info("tritonjit: building the torch tensor reader for torch %s (once per torch version)", torch.__version__)
        p = subprocess.run(_build_command(torch, cxx, tmp), capture_output=True, text=True)
        if p.returncode != 0:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise RuntimeError(f"{os.path.basename(cxx)} failed: {(p.stderr or p.stdout).strip()[-1500:]}")
        os.replace(tmp, path)
        log.info("tritonjit: torch tensor reader built in %.1f s: %s", time.perf_counter() - t0, path)
    return path


def status() -> str:
    """What ``tritonjit info`` reports: in use, built, or why not; never builds."""
    if _capsule is not None or _tried or not enabled():
        return reason if enabled() else "disabled by TRITONJIT_TORCH_READER=0"
    torch = sys.modules.get("torch")
    cxx = _compiler()
    if torch is None:
        return "not loaded (torch not imported)"
    if cxx is None:
        return "not available (no C++ compiler found; set CXX)"
    path = _artifact(torch, cxx)
    return f"built ({path})" if os.path.exists(path) else "builds on the first native launch (once per torch version)"


def load() -> Any:
    """The reader's capsule, or None (``reason`` says why). Only tried once per process,
    and only once torch is imported: tensors are torch's, and importing torch here
    would cost every process that never passes one."""
    global _capsule, reason, _tried
    if _capsule is not None or _tried:
        return _capsule
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    with _lock:
        if _tried:
            return _capsule
        _tried = True
        if not enabled():
            reason = "disabled by TRITONJIT_TORCH_READER=0"
            return None
        try:
            _capsule = _import(build(torch)).reader
            reason = "in use"
        except Exception as exc:  # anything: the Python reads are the reference anyway
            reason = f"not available ({exc})"
            log.warning("tritonjit: the torch tensor reader is %s; tensors are read through Python", reason)
    return _capsule
