"""Warm-up of kernels a script defined: compiled from their definitions, the script never re-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tritonjit import KernelNotFoundError
from tritonjit._function import load_kernel
from tritonjit._manifest import read
from tritonjit._script_kernel import kernel_module_source, load_script_kernel
from tritonjit._warmup import warmup

torch = pytest.importorskip("torch")

# a "training script": its top-level code must run once, in the recording run only
SCRIPT = '''\
"""A user's script: the kernel, then the program."""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

with open(os.environ["MARKER"], "a") as f:  # top-level code: "training starts"
    f.write(f"{os.getpid()}\\n")

try:
    from triton.language.extra import libdevice  # noqa: F401
except ImportError:
    libdevice = None

SCALE: tl.constexpr = tl.constexpr(3)
unused = torch.zeros(3)


@triton.jit
def helper(v):
    return v * SCALE


@triton.jit
def scale_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, helper(tl.load(X + offs, mask=m)), mask=m)


if __name__ == "__main__":
    import tritonjit
    from tritonjit import _disk_cache

    f = tritonjit.function(scale_kernel)
    if os.environ.get("CHECK_TARGET"):  # the next run: is the warmed-up variant found?
        v = f.compile("*fp32:16,*fp32:16,i32,128", target=os.environ["CHECK_TARGET"])
        print("index hits", _disk_cache.index.hits)
    else:
        tritonjit.set_backend("interpreter")
        x, out = torch.randn(100), torch.empty(100)
        f[(1,)](x, out, 100, BLOCK=128)
        assert torch.allclose(out, x * 3)
'''


def test_warmup_never_runs_the_script(caches, tmp_path, monkeypatch):
    """Record a script's kernel, warm it up in workers: the script's top-level code
    ran once (the recording run), and its next run finds the variant warm-up compiled."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    marker, manifest = tmp_path / "marker", tmp_path / "m.jsonl"
    monkeypatch.setenv("MARKER", str(marker))  # the workers could write it too, were they to run the script
    env = {**os.environ, "MARKER": str(marker), "TRITONJIT_RECORD": str(manifest)}
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=180)
    [line] = [json.loads(s) for s in manifest.read_text().splitlines()]
    assert line["module"] == "__main__" and line["file"] == str(script)
    report = warmup(read(str(manifest)), jobs=1, target="cuda:90", progress=False)
    assert [r.status for r in report.results] == ["compiled"], report.to_json()
    assert len(marker.read_text().splitlines()) == 1  # only the recording run wrote it
    env.pop("TRITONJIT_RECORD")
    out = subprocess.run([sys.executable, str(script)], check=True, env={**env, "CHECK_TARGET": "cuda:90"},
                         timeout=180, capture_output=True, text=True).stdout
    assert "index hits 1" in out, out


def test_source_keeps_the_kernel_and_its_dependencies_only(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    src = kernel_module_source(str(script), "scale_kernel")
    lines, orig = src.splitlines(), SCRIPT.splitlines()
    assert len(lines) == len(orig)
    kept = {orig[i] for i, line in enumerate(lines) if line}
    assert all(line == orig[i] for i, line in enumerate(lines) if line)  # each at its own line number
    for needed in ("from __future__ import annotations", "import triton", "import triton.language as tl",
                   "SCALE: tl.constexpr = tl.constexpr(3)", "def helper(v):", "def scale_kernel(X, Out, n, "
                   "BLOCK: tl.constexpr):"):
        assert needed in kept, needed
    for code in ("import torch", "unused = torch.zeros(3)", "    f.write(f\"{os.getpid()}\\n\")",
                 "if __name__ == \"__main__\":", "import os"):
        assert code not in kept, code
    # the same kernel as the script's own: Triton's hash (source, first line, globals) is equal
    monkeypatch.setenv("MARKER", str(tmp_path / "marker"))
    assert load_script_kernel(str(script), "scale_kernel").cache_key == load_kernel(str(script), "scale_kernel").cache_key


TANGLED = """
import sys
import triton
import triton.language as tl

for arg in sys.argv:
    BLOCK_DEFAULT = len(arg)


@triton.jit
def k(X, BLOCK: tl.constexpr = BLOCK_DEFAULT):
    tl.store(X + tl.arange(0, BLOCK), 0)
"""


@pytest.mark.parametrize(("text", "name", "match"), [
    (TANGLED, "k", r"uses 'BLOCK_DEFAULT', which the script's top-level code binds at line 6"),
    (TANGLED, "nope", r"no top-level kernel definition named 'nope'"),
    ("import triton\nX = 1; print(X)\n@triton.jit\ndef k(P):\n    pass\n".replace("pass", "tl.store(P, X)"), "k",
     r"line 2: a statement the kernel needs shares its line"),
])
def test_refusals_say_what_to_move(tmp_path, text, name, match):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(text))
    with pytest.raises(KernelNotFoundError, match=match):
        kernel_module_source(str(script), name)


def test_a_main_that_is_not_a_file_is_refused():
    with pytest.raises(KernelNotFoundError, match="not a file .*move the kernel into a module"):
        kernel_module_source(str(Path.cwd() / "<stdin>"), "k")
