"""Builds tritonjit-ops: pure Python, unless asked for prebuilt torch helpers; an sdist
that carries the operator tests.

- ``TRITONJIT_PREBUILD_TORCH=1`` (torch and tritonjit-core installed in the build
  environment, so no build isolation: ``tox -e wheels``) compiles the call prologues
  and the C++ operator path into the wheel's ``tritonjit_ops/_prebuilt/`` for that
  torch (tritonjit's ``_native/torch_prebuilt.py``), and the wheel becomes platform
  specific; at run time they are used when torch matches, else built on first use.
- The sdist takes the repository's ``tests/ops`` (and its root conftest.py) in the
  repository's layout, so ``pytest tests/ops`` runs from the unpacked sdist.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
#: files of the repository (relative to its root) that the operator tests need
SDIST_TESTS = ["conftest.py", "tests/ops"]


def _prebuilt_module():  # noqa: ANN202 - tritonjit's torch_prebuilt, loaded by path (tritonjit is not imported)
    spec = importlib.util.find_spec("tritonjit")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("TRITONJIT_PREBUILD_TORCH=1 needs tritonjit-core installed in the build environment")
    core = spec.submodule_search_locations[0]
    mod_spec = importlib.util.spec_from_file_location("_tritonjit_torch_prebuilt",
                                                      os.path.join(core, "_native", "torch_prebuilt.py"))
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = mod
    mod_spec.loader.exec_module(mod)
    return mod, core


def _requested() -> bool:
    return os.environ.get("TRITONJIT_PREBUILD_TORCH", "").strip().lower() in ("1", "true", "yes", "on")


class BinaryDistribution(Distribution):
    """A platform wheel when it carries prebuilt helpers, a pure one otherwise."""

    def has_ext_modules(self) -> bool:
        return _requested()


class BuildPy(build_py):
    """build_py, plus the prebuilt helpers where TRITONJIT_PREBUILD_TORCH=1."""

    def run(self) -> None:
        super().run()
        if not _requested():
            return
        import torch

        prebuilt, core = _prebuilt_module()
        inc = os.path.join(core, "include")
        pkg = os.path.join(HERE, "tritonjit_ops")
        # the same (name, source, headers, include dirs) as _prologue.native() and _native_ops.native()
        helpers = [
            prebuilt.Helper("tritonjit_ops._prologue_native", os.path.join(pkg, "_prologue.cpp")),
            prebuilt.Helper("tritonjit_ops._native_ops", os.path.join(pkg, "_native_ops.cpp"),
                            (os.path.join(inc, "tritonjit", "function.h"),
                             os.path.join(core, "_native", "tritonjit_launch.h")), (inc,)),
        ]
        out = os.path.join(self.build_lib, "tritonjit_ops", "_prebuilt")
        # site-packages/tritonjit_ops/_prebuilt/x.so -> site-packages/torch/lib
        prebuilt.prebuild(helpers, out, torch, rpath="$ORIGIN/../../torch/lib")


class Sdist(sdist):
    """sdist, plus the repository's operator tests (when built from the repository)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = REPO if os.path.isdir(os.path.join(REPO, "tests", "ops")) else HERE  # else: an unpacked sdist
        for rel in SDIST_TESTS:
            src, dst = os.path.join(root, rel), os.path.join(base_dir, rel)
            if os.path.isdir(src):
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif os.path.isfile(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "sdist": Sdist})
