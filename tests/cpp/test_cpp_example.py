"""The example C++ operator (operators/examples/cpp_add), built as a user would build it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
import tritonjit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "operators", "examples", "cpp_add")
sys.path.insert(0, EXAMPLE)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    from build import load_example

    load_example(str(tmp_path_factory.mktemp("cpp_add")))
    return torch.ops.tritonjit_example


def test_example_operator_matches_torch(example):
    x, y = torch.randn(3000), torch.randn(3000)
    torch.testing.assert_close(example.add(x, y), x + y)
    torch.testing.assert_close(example.add(x[::2], y[::2]), x[::2] + y[::2])  # made contiguous first
    assert example.add(torch.empty(0), torch.empty(0)).numel() == 0
    with pytest.raises(RuntimeError, match="shapes differ"):
        example.add(x, y[:10])


def test_example_operator_has_a_backward(example):
    x, y = torch.randn(100, requires_grad=True), torch.randn(100, requires_grad=True)
    (example.add(x, y) * torch.arange(100.0)).sum().backward()
    torch.testing.assert_close(x.grad, torch.arange(100.0))
    torch.testing.assert_close(y.grad, torch.arange(100.0))


@pytest.mark.gpu
def test_example_operator_on_cuda(example):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    torch.testing.assert_close(example.add(x, y), x + y)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_example_builds_with_cmake(tmp_path):
    prefix = torch.utils.cmake_prefix_path
    cfg = subprocess.run(["cmake", "-S", EXAMPLE, "-B", str(tmp_path), f"-DCMAKE_PREFIX_PATH={prefix}",
                          f"-Dtritonjit_DIR={tritonjit.get_cmake_dir()}", f"-DPython3_EXECUTABLE={sys.executable}"],
                         capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout[-2000:] + cfg.stderr[-2000:]
    build = subprocess.run(["cmake", "--build", str(tmp_path), "-j", "2"], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-2000:]
    lib = tmp_path / "libtritonjit_example_add.so"
    assert lib.exists()
    # load it in a fresh process (the ops would clash with the cpp_extension build of this one)
    code = ("import torch, sys; torch.ops.load_library(sys.argv[1]); "
            f"torch.ops.tritonjit_example.set_kernel_file({os.path.join(EXAMPLE, 'add_kernel.py')!r}); "
            "x = torch.randn(100); torch.testing.assert_close(torch.ops.tritonjit_example.add(x, x), 2 * x); print('ok')")
    run = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
