"""tritonjit-core installed without a C compiler has no native dispatcher: it says so,
instead of the misleading "circular import" of a failed ``from . import _dispatch``,
and runs the Python launch path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import tritonjit


def test_a_core_without_the_extension_says_it_was_not_built(tmp_path):
    copy = tmp_path / "tritonjit"
    shutil.copytree(Path(tritonjit.__file__).parent, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = (f"import tritonjit, tritonjit._native as n; assert tritonjit.__file__.startswith({str(tmp_path)!r});"
            "print(n.reason); print(n.available())")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("TRITONJIT_NO_NATIVE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    reason, available = out.splitlines()
    assert available == "False"
    assert reason.startswith("not built: the optional native dispatcher (tritonjit._native._dispatch)"), reason
    assert "the Python launch path is used" in reason and "circular" not in reason
