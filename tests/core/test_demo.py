"""``tritonjit demo`` and ``python -m tritonjit.demo`` run and check their kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITONJIT_BACKEND"}
    env["TRITONJIT_BACKEND"] = "interpreter"  # this machine's default; a GPU machine picks its own
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300)


def test_demo_module_json():
    res = _run("-m", "tritonjit.demo", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] and report["backend"] == "interpreter" and report["device"] == "cpu"
    by_name = {r["name"]: r for r in report["results"]}
    assert set(by_name) == {"add", "two-pass sum", "2-D scale, bias=None", "2-D scale + bias"}
    assert all(r["ok"] and r["max_abs_err"] < 1e-3 for r in report["results"])
    assert by_name["2-D scale, bias=None"]["signature"].split(",")[1] == "nullopt"
    assert by_name["2-D scale + bias"]["signature"].split(",")[1] == "*fp32:16"


def test_demo_subcommand_table():
    res = _run("-m", "tritonjit", "demo")
    assert res.returncode == 0, res.stderr
    assert "backend 'interpreter'" in res.stdout and "all results match torch" in res.stdout
    assert res.stdout.count(" ok ") >= 4


def test_demo_detects_a_wrong_result(monkeypatch, capsys):
    from tritonjit import demo

    real = demo.CASES["add"]

    def wrong(torch, dev):
        got, expected, sig, shape = real(torch, dev)
        return got + 1, expected, sig, shape

    monkeypatch.setitem(demo.CASES, "add", wrong)
    assert demo.main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "DIFFER" in out
