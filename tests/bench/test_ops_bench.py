"""The operator benchmark (benchmarks/ops.py) where no GPU is: its CPU smoke mode runs
the small cases through the interpreter and reports every path of each, aten's own
operator through torch.ops included. The figures themselves need a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_smoke_mode_reports_every_path(tmp_path):
    out = tmp_path / "ops.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the smoke mode, even on a GPU machine
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "ops.py"), "--json", str(out), "--opt-in",
                        "--permuted"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "aten through torch.ops" in p.stdout
    small = json.loads(out.read_text())["small"]
    assert [r["case"].split()[0] for r in small] == ["add", "rms_norm", "softmax"]
    for r in small:
        for path in ("torch", "direct", "torch_ops", "aten_torch_ops"):
            assert r[path] > 0, (r["case"], path)
        assert r["ratio_aten_torch_ops"] == pytest.approx(r["aten_torch_ops"] / r["torch"])
    layouts = json.loads(out.read_text())["layouts"]
    assert len(layouts) >= 5 and "broadcast add" in layouts[0]["case"]
    for r in layouts:
        assert r["torch"] > 0 and r["direct"] > 0 and r["python"] > 0, r["case"]
        assert r["ratio_direct"] == pytest.approx(r["direct"] / r["torch"])
    assert "its Python implementation" in p.stdout
    opt_in = json.loads(out.read_text())["opt_in"]  # --opt-in: each opt-in case, checked against eager
    assert {r["case"].split()[0].split("(")[0] for r in opt_in} == {"softplus", "tril", "sign", "logical_and_", "fill_",
                                                       "reciprocal", "div", "erf", "floor", "triu", "scatter_",
                                                       "scatter_add_", "index_add_"}
    assert all(r["torch"] > 0 and r["enabled"] > 0 and "error" not in r for r in opt_in)
    assert "| opt-in overload |" in p.stdout
    permuted = json.loads(out.read_text())["permuted"]  # --permuted: each checked against eager, strides too
    assert len(permuted) == 8 and all(r["torch"] > 0 and r["enabled"] > 0 and "error" not in r for r in permuted)
    assert "| call on a permuted view |" in p.stdout and "MISMATCH" not in p.stdout
