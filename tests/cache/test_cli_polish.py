"""The command line's small courtesies: --version, one target format in every --json,
``info`` lines that fit the terminal, log lines named by module (no repeated prefix),
and a ``bench`` that says where the benchmarks are."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tritonjit
from cache_support import SIG, TARGET
from tritonjit.cli import bench
from tritonjit.cli import main as cli_main
from tritonjit.cli._output import table

ROOT = Path(__file__).resolve().parents[2]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tritonjit {tritonjit.__version__}"


def test_compile_json_writes_the_target_as_every_command_does(caches, kernel_file, capsys):
    assert cli_main(["compile", f"{kernel_file()}:axpy", "--signature", SIG, "--target", TARGET, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == TARGET and out["metadata"]["target"] == TARGET
    assert cli_main(["cache", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["target"] == TARGET


def test_info_lines_fit_the_terminal(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    assert cli_main(["info"]) == 0
    for line in capsys.readouterr().out.splitlines():
        assert len(line) <= 100 or " " not in line.strip(), line  # only a single long word may overflow


def test_table_wraps_its_last_column():
    rows = [["cuda", "no", "x " * 80], ["interpreter", "yes", "always available"]]
    narrow = table(rows, ["backend", "ok", "details"], width=50).splitlines()
    assert narrow[2].startswith("cuda") and narrow[3].startswith("    x x")  # under its row
    assert max(map(len, narrow)) <= 50
    wide = table(rows, ["backend", "ok", "details"], width=80).splitlines()
    assert max(map(len, wide)) <= 80 and wide[3].startswith(" " * len("interpreter  ok   ") + "x x")
    assert table(rows, ["backend", "ok", "details"]).splitlines()[2].endswith("x x")  # no width: as is


def test_log_lines_name_their_module_once(caches, tmp_path):
    bad = tmp_path / "m.jsonl"
    bad.write_text("not json\n")
    p = subprocess.run([sys.executable, "-m", "tritonjit", "warmup", str(bad), "--json"], capture_output=True,
                       text=True, timeout=120)
    assert "WARNING tritonjit._manifest: " in p.stderr and "m.jsonl:1: skipping a malformed" in p.stderr, p.stderr
    assert "tritonjit: tritonjit" not in p.stderr


def _log_calls(path: Path) -> list[tuple[int, str]]:
    """(line, problem) of each logger made with a literal name or message prefixed 'tritonjit'."""
    problems = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "getLogger" and not (node.args and isinstance(node.args[0], ast.Name)
                                                  and node.args[0].id == "__name__"):
            problems.append((node.lineno, "getLogger without __name__"))
        if (node.func.attr in ("debug", "info", "warning", "error", "exception", "critical")
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("log", "logger", "_log")
                and node.args and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("tritonjit")):
            problems.append((node.lineno, "message repeats the logger's name"))
    return problems


def test_loggers_are_named_by_module():
    files = [p for d in ("tritonjit_core/tritonjit", "operators/tritonjit_ops", "plugins") for p in (ROOT / d).rglob("*.py")]
    bad = [f"{p.relative_to(ROOT)}:{line}: {why}" for p in files for line, why in _log_calls(p)]
    assert not bad, bad


def test_bench_outside_a_checkout_says_where_the_benchmarks_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRITONJIT_BENCHMARKS", raising=False)
    monkeypatch.setattr(bench, "__file__", str(tmp_path / "site-packages" / "tritonjit" / "cli" / "bench.py"))
    with pytest.raises(FileNotFoundError, match="not part of the installed packages.*source checkout.*--dir"):
        bench.find_dir(None)
    monkeypatch.setenv("TRITONJIT_BENCHMARKS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="TRITONJIT_BENCHMARKS=.* is not tritonjit's benchmarks folder"):
        bench.find_dir(None)
    assert bench.find_dir(str(ROOT / "benchmarks")) == ROOT / "benchmarks"
    assert os.path.isfile(ROOT / "benchmarks" / "ops.py")
