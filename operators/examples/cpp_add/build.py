"""Build and load the example operator with torch.utils.cpp_extension, then call it.

    python operators/examples/cpp_add/build.py
"""

from __future__ import annotations

import os

import torch
import tritonjit
from torch.utils.cpp_extension import load

HERE = os.path.dirname(os.path.abspath(__file__))


def load_example(build_dir: str | None = None) -> None:
    """Compile add_op.cpp (its ops register themselves with torch) and point it at its kernel."""
    load("tritonjit_example_add", [os.path.join(HERE, "add_op.cpp")], is_python_module=False,
         extra_include_paths=[tritonjit.get_include()], build_directory=build_dir, verbose=False)
    torch.ops.tritonjit_example.set_kernel_file(os.path.join(HERE, "add_kernel.py"))


if __name__ == "__main__":
    load_example()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = torch.randn(5000, device=device), torch.randn(5000, device=device)
    out = torch.ops.tritonjit_example.add(x, y)
    torch.testing.assert_close(out, x + y)
    print(f"torch.ops.tritonjit_example.add on {device} ({tritonjit.current_backend().name} backend): ok")
