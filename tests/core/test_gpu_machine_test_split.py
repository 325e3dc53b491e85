"""The repository's conftest.py on a machine with a GPU: the CPU tests run on the
interpreter backend, as in CI, and the GPU tests in a process of their own
(``pytest -m gpu``), because the operator library registers its kernels for the backend
active when it is imported. Checked without a GPU: pytest runs two tiny tests in a
subprocess whose first plugin makes ``torch.cuda.is_available()`` answer True, or False (a
stand-in for the machine, nothing launches; so the test means the same on a GPU machine)
and loads the conftest's hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = f'''
import importlib.util
import torch

torch.cuda.is_available = lambda: {{gpu}}  # the machine has a GPU or not (a stand-in: nothing launches)
spec = importlib.util.spec_from_file_location("repo_conftest", {str(ROOT / "conftest.py")!r})
repo_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repo_conftest)
pytest_configure = repo_conftest.pytest_configure
pytest_collection_modifyitems = repo_conftest.pytest_collection_modifyitems
'''

TESTS = '''
import os
import pytest

def test_cpu():
    print("CPU-BACKEND", os.environ.get("TRITONJIT_BACKEND"))

@pytest.mark.gpu
def test_gpu():
    print("GPU-BACKEND", os.environ.get("TRITONJIT_BACKEND"))
'''


def _pytest(tmp_path: Path, *args: str, gpu: bool = True, backend: str | None = None, workers: bool = False) -> str:
    (tmp_path / "machine.py").write_text(PLUGIN.format(gpu=gpu))
    (tmp_path / "test_split.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITONJIT_BACKEND", "TRITONJIT_TESTS_CPU_RUN")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    if backend is not None:
        env["TRITONJIT_BACKEND"] = backend
    xdist = ("-n", "2") if workers else ("-p", "no:xdist")
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-rs", "-p", "machine", "-p", "no:cacheprovider", *xdist,
           "--rootdir", str(tmp_path), "--confcutdir", str(tmp_path), str(tmp_path / "test_split.py"), *args]
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: everything deselected
    return out.stdout


def test_a_gpu_machine_runs_cpu_tests_on_the_interpreter_and_skips_gpu_tests(tmp_path):
    out = _pytest(tmp_path)
    assert "CPU-BACKEND interpreter" in out
    assert "GPU-BACKEND" not in out and "process of their own" in out and "pytest -m gpu" in out


@pytest.mark.parametrize("markexpr", ["gpu", "gpu and not slow"])
def test_a_gpu_machine_runs_gpu_tests_on_the_device_with_m_gpu(tmp_path, markexpr):
    out = _pytest(tmp_path, "-m", markexpr)
    assert "GPU-BACKEND None" in out and "CPU-BACKEND" not in out


@pytest.mark.parametrize("markexpr", ["not gpu", "slow or not gpu"])
def test_selections_with_cpu_tests_use_the_interpreter(tmp_path, markexpr):
    out = _pytest(tmp_path, "-m", markexpr)
    assert "CPU-BACKEND interpreter" in out


def test_xdist_workers_keep_the_split(tmp_path):
    """The workers inherit the backend this file chose (and the mark that it chose it): they
    too run the CPU tests on the interpreter and skip the GPU tests."""
    pytest.importorskip("xdist")
    out = _pytest(tmp_path, workers=True)
    assert "1 passed, 1 skipped" in out and "process of their own" in out
    out = _pytest(tmp_path, "-m", "gpu", workers=True)
    assert "1 passed" in out and "skipped" not in out


def test_a_backend_the_user_set_is_left_as_it_is(tmp_path):
    out = _pytest(tmp_path, backend="cuda")
    assert "CPU-BACKEND cuda" in out and "GPU-BACKEND cuda" in out


def test_without_a_gpu_nothing_changes(tmp_path):
    out = _pytest(tmp_path, gpu=False)
    assert "CPU-BACKEND None" in out and "needs a GPU (none on this machine)" in out
