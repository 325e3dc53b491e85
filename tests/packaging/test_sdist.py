"""Every distribution's sdist builds, carries its LICENSE, readme, full metadata and
the tests it needs, and a few of those tests run from the unpacked sdist, against the
sdist's own code (put first on the path)."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "tritonjit": ROOT, "tritonjit_core": ROOT / "tritonjit_core", "tritonjit_ops": ROOT / "operators",
    **{p.name.replace("-", "_"): p for p in sorted((ROOT / "plugins").glob("tritonjit-*"))},
}
#: what each sdist must carry besides the package: tests the package needs
TESTS = {"tritonjit_core": ["conftest.py", "tests/core/test_signature.py", "tests/core/conftest.py",
                            "tests/fixtures/tritonjit-echo/pyproject.toml", "docs/plugin-guide.md"],
         "tritonjit_ops": ["conftest.py", "tests/ops/conftest.py", "tests/ops/test_registry.py"],
         "tritonjit_npu": ["tests/conftest.py", "tests/sim/ascend_sim.c"],
         "tritonjit_cuda": ["tests/conftest.py", "tests/test_plugin_cpu.py", "tritonjit_cuda/_driver.c"]}


#: what a checkout holds that no sdist is built from: build outputs, caches, environments
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".tox", ".nox", "build", "dist", "*.egg-info", "__pycache__",
                                    "*.so", "*.pyc", ".*_cache", ".hypothesis", ".gpu_*")


@pytest.fixture(scope="module")
def sdists(tmp_path_factory) -> dict[str, Path]:
    """Each distribution's sdist, built by its own build backend, unpacked.

    Built from a copy of the checkout without its build outputs: an in-place install
    (``pip install ./operators``) leaves ``build/`` and ``*.egg-info`` beside the sources,
    and setuptools makes its release tree in the folder it builds, which other processes
    of the same checkout may be using."""
    src = tmp_path_factory.mktemp("checkout") / "repo"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE, symlinks=True)
    out = tmp_path_factory.mktemp("sdist")
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    unpacked = {}
    for name, folder in FOLDERS.items():
        p = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src / folder.relative_to(ROOT),
                           capture_output=True, text=True)
        assert p.returncode == 0, f"sdist of {name} failed:\n{p.stderr[-3000:]}"
        archive = out / p.stdout.strip().splitlines()[-1]
        with tarfile.open(archive) as tar:
            tar.extractall(out, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        unpacked[name] = out / archive.name.removesuffix(".tar.gz")
    return unpacked


def test_every_sdist_carries_license_readme_metadata_and_tests(sdists):
    for name, tree in sdists.items():
        assert (tree / "LICENSE").read_text() == (ROOT / "LICENSE").read_text(), name
        meta = email.message_from_string((tree / "PKG-INFO").read_text())
        assert meta["License-Expression"] == "MIT", name
        assert meta["License-File"] == "LICENSE", name
        assert any(u.startswith("Source, https://github.com/REPLACE-WITH-OWNER/") for u in meta.get_all("Project-URL")), name
        assert "Programming Language :: Python :: 3.13" in meta.get_all("Classifier"), name
        assert meta["Description-Content-Type"] == "text/markdown" and len(meta.get_payload()) > 500, name
        for req in meta.get_all("Requires-Dist") or []:
            if req.startswith("tritonjit"):
                assert "<0.2" in req and ">=0.1" in req, (name, req)
        for rel in TESTS.get(name, []):
            assert (tree / rel).is_file(), f"{name}'s sdist lacks {rel}"
        if name.startswith("tritonjit_") and name not in ("tritonjit_core", "tritonjit_ops"):
            assert list((tree / "tests").glob("test_*.py")), f"{name}'s sdist has no tests"


def _pytest_from(tree: Path, package: str, *tests: str) -> str:
    """Run ``tests`` with ``tree`` (the unpacked sdist) first on the path; check that
    ``package`` was imported from there, not from the repository."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    check = f"import {package}; assert {package}.__file__.startswith({str(tree)!r}), {package}.__file__"
    subprocess.run([sys.executable, "-c", check], env=env, check=True, cwd=tree)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                       cwd=tree, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    return p.stdout


def test_core_tests_run_from_the_core_sdist(sdists):
    out = _pytest_from(sdists["tritonjit_core"], "tritonjit",
                       "tests/core/test_signature.py", "tests/core/test_launch_abi.py")
    assert " passed" in out


def test_plugin_tests_run_from_the_plugin_sdist(sdists):
    out = _pytest_from(sdists["tritonjit_npu"], "tritonjit_npu", "tests/test_npu_abi.py")
    assert " passed" in out


def test_operator_tests_run_from_the_operators_sdist(sdists):
    out = _pytest_from(sdists["tritonjit_ops"], "tritonjit_ops", "tests/ops/test_registry.py")
    assert " passed" in out
