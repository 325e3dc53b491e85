"""Torch-linked helpers compiled ahead of time, for one torch, and shipped in a wheel.

The C++ helpers (the core's tensor reader, tritonjit_ops' prologues and operator
path) link against torch, whose headers are not in a distribution's build
environment under build isolation; so they are built on first use
(``torch_build``), which needs a C++ compiler at run time. A wheelhouse built for a
known torch (``tox -e wheels``, with ``TRITONJIT_PREBUILD_TORCH=1`` and torch
installed in the build environment, no build isolation) carries them prebuilt in
the package's ``_prebuilt/`` folder with a ``manifest.json``: one entry per module,
keyed by torch's full version (a local tag such as ``+cpu`` included), its C++ ABI
flag, the Python extension suffix and a digest of the sources. At run time a
prebuilt module is used only when all four match the process; anything else falls
back to building.

This module imports nothing from tritonjit: the packages' ``setup.py`` load it by
path at build time, where tritonjit itself may not be importable.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Sequence
from typing import Any, NamedTuple

#: set to 1 at build time to compile the helpers into the wheel
ENV = "TRITONJIT_PREBUILD_TORCH"
MANIFEST = "manifest.json"


class Helper(NamedTuple):
    """One torch-linked module: its import name, its source and what it includes."""

    name: str
    source: str
    headers: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source, *self.headers)


def requested() -> bool:
    """Whether this build was asked to prebuild the helpers (``TRITONJIT_PREBUILD_TORCH=1``)."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def compiler() -> str | None:
    """The C++ compiler a build would use: ``$CXX``, else c++, g++, clang++ on PATH."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cxx_standard(torch: Any) -> str:
    """The C++ standard torch's own extension builder uses (C++20 from torch 2.10, C++17 before)."""
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return "c++20" if (major, minor) >= (2, 10) else "c++17"


def torch_key(torch: Any) -> dict[str, Any]:
    """What a compiled helper is tied to besides its sources."""
    return {
        "torch": torch.__version__,
        "cxx11_abi": int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)),
        "ext_suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
    }


def digest(paths: Sequence[str]) -> str:
    """sha256 of the files' contents, in order (sources and headers of one helper)."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def compile_command(helper: Helper, torch: Any, cxx: str, out: str, rpath: str) -> list[str]:
    """The compiler's command line for ``helper`` against ``torch``; ``rpath`` is where
    the shared object finds torch's libraries (they are loaded already when torch is
    imported first, as every caller does; the rpath is the fallback)."""
    from torch.utils import cpp_extension

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = torch_key(torch)["cxx11_abi"]
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-std=" + cxx_standard(torch), f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-w"]
    for inc in (*helper.include_dirs, sysconfig.get_paths()["include"], *cpp_extension.include_paths()):
        cmd += ["-I", inc]
    return cmd + [helper.source, "-L", lib, "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10",
                  f"-Wl,-rpath,{rpath}", "-o", out]


def file_name(helper: Helper, key: dict[str, Any]) -> str:
    """``_torch_tensor.torch-2.13.0+cpu.cpython-311-x86_64-linux-gnu.so``: one file per torch."""
    return f"{helper.name.rpartition('.')[2]}.torch-{key['torch']}{key['ext_suffix']}"


def prebuild(helpers: Sequence[Helper], out_dir: str, torch: Any, rpath: str, jobs: int = 2) -> list[dict[str, Any]]:
    """Compile ``helpers`` against ``torch`` into ``out_dir`` and write its manifest.
    RuntimeError naming the helper and the compiler's output where one fails."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError(f"{ENV}=1 needs a C++ compiler (set CXX)")
    os.makedirs(out_dir, exist_ok=True)
    key = torch_key(torch)

    def one(helper: Helper) -> dict[str, Any]:
        name = file_name(helper, key)
        p = subprocess.run(compile_command(helper, torch, cxx, os.path.join(out_dir, name), rpath),
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"prebuilding {helper.name} failed: {(p.stderr or p.stdout).strip()[-1500:]}")
        return {"module": helper.name, "file": name, "sources": digest(helper.sources), **key}

    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        entries = list(pool.map(one, helpers))
    with open(os.path.join(out_dir, MANIFEST), "w") as f:
        json.dump({"entries": entries}, f, indent=1)
    return entries


def find(prebuilt_dir: str | None, helper: Helper, torch: Any) -> tuple[str | None, str]:
    """(path of the prebuilt module for this torch, or None; and why not)."""
    if not prebuilt_dir:
        return None, "no prebuilt helpers in this install"
    try:
        with open(os.path.join(prebuilt_dir, MANIFEST)) as f:
            entries = json.load(f)["entries"]
    except (OSError, ValueError, KeyError):
        return None, "no prebuilt helpers in this install"
    mine = [e for e in entries if isinstance(e, dict) and e.get("module") == helper.name]
    if not mine:
        return None, "no prebuilt helpers in this install"
    key = torch_key(torch)
    for entry in mine:
        if all(entry.get(k) == v for k, v in key.items()):
            if entry.get("sources") != digest(helper.sources):
                return None, "the prebuilt helper was built from other sources"
            path = os.path.join(prebuilt_dir, str(entry.get("file")))
            return (path, "prebuilt") if os.path.exists(path) else (None, "the prebuilt helper's file is missing")
    built_for = ", ".join(sorted({str(e.get("torch")) for e in mine}))
    return None, f"the prebuilt helper is for torch {built_for}, this is torch {key['torch']}"
