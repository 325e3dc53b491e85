"""Builds tritonjit-core: the optional native dispatcher, prebuilt torch helpers on request,
and an sdist that carries the core's tests.

- ``tritonjit._native._dispatch`` (C): optional=True, so where no C compiler is found
  the build goes on without it and tritonjit runs its pure-Python launch path (the
  reference, also chosen with TRITONJIT_NO_NATIVE=1).
- ``TRITONJIT_PREBUILD_TORCH=1`` (with torch installed in the build environment, so no
  build isolation: ``tox -e wheels``) also compiles the torch tensor reader into the
  wheel's ``tritonjit/_native/_prebuilt/`` for that torch (see
  ``tritonjit/_native/torch_prebuilt.py``); at run time it is used when torch matches.
- The sdist takes the repository's ``tests/core`` (with the fixtures and the files
  those tests read) in the repository's layout, so ``pytest tests/core`` runs from
  the unpacked sdist.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
#: files of the repository (relative to its root) that the core's tests need
SDIST_TESTS = ["conftest.py", "tests/core", "tests/fixtures/tritonjit-echo", "docs/plugin-guide.md"]


def _load(name: str, path: str):  # noqa: ANN202 - a module loaded by path
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class BuildPy(build_py):
    """build_py, plus the prebuilt torch tensor reader where TRITONJIT_PREBUILD_TORCH=1."""

    def run(self) -> None:
        super().run()
        native = os.path.join(HERE, "tritonjit", "_native")
        prebuilt = _load("_tritonjit_torch_prebuilt", os.path.join(native, "torch_prebuilt.py"))
        if not prebuilt.requested():
            return
        import torch

        helper = prebuilt.Helper("tritonjit._native._torch_tensor", os.path.join(native, "_torch_tensor.cpp"),
                                 (os.path.join(native, "tritonjit_tensor.h"),), (native,))
        out = os.path.join(self.build_lib, "tritonjit", "_native", "_prebuilt")
        # site-packages/tritonjit/_native/_prebuilt/x.so -> site-packages/torch/lib
        prebuilt.prebuild([helper], out, torch, rpath="$ORIGIN/../../../torch/lib")


class Sdist(sdist):
    """sdist, plus the repository's core tests (when built from the repository)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = REPO if os.path.isdir(os.path.join(REPO, "tests", "core")) else HERE  # else: an unpacked sdist
        for rel in SDIST_TESTS:
            src = os.path.join(root, rel)
            dst = os.path.join(base_dir, rel)
            if os.path.isdir(src):
                shutil.copytree(src, dst, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info", "build"))
            elif os.path.isfile(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)


setup(
    cmdclass={"build_py": BuildPy, "sdist": Sdist},
    ext_modules=[
        Extension(
            "tritonjit._native._dispatch",
            sources=["tritonjit/_native/_dispatch.c", "tritonjit/_native/_recorder.c"],
            depends=["tritonjit/_native/_dispatch.h", "tritonjit/_native/tritonjit_launch.h",
                     "tritonjit/_native/tritonjit_tensor.h"],
            include_dirs=["tritonjit/_native"],
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
            optional=True,
        )
    ],
)
