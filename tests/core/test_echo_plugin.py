"""A third-party plugin written only from docs/plugin-guide.md is discovered and used.

The fixture distribution tests/fixtures/tritonjit-echo is pip-installed (no deps, no
build isolation) from a private copy (setuptools builds in the source tree, and CI's
tox environments run this test at once) into a temporary target directory; child processes with that
directory on their path discover it through the ``tritonjit.backends`` entry point,
select it (set_backend and TRITONJIT_BACKEND) and launch through it: no core change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tritonjit-echo"
KERNELS = Path(__file__).resolve().parent / "_spec_kernels.py"


@pytest.fixture(scope="module")
def echo_site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("echo-site")
    source = tmp_path_factory.mktemp("echo-src") / FIXTURE.name
    shutil.copytree(FIXTURE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--no-index", "--quiet", "--target", str(target), str(source)],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        pytest.fail(f"installing the fixture plugin failed:\n{res.stdout}\n{res.stderr}")
    assert any(p.name.startswith("tritonjit_echo-") and p.suffix == ".dist-info" for p in target.iterdir())
    return target


SCRIPT = textwrap.dedent('''\
    import json, os, sys
    import torch, tritonjit
    sys.path.insert(0, os.path.dirname({kernels!r}))
    import _spec_kernels as K

    out = {{"backends": [b.name for b in tritonjit.backends()],
            "broken": [b.name for b in tritonjit.broken_plugins()],
            "dist": tritonjit.get_backend("echo").dist}}
    if {select!r} == "set_backend":
        tritonjit.set_backend("echo")
    out["current"] = tritonjit.current_backend().name
    import tritonjit_echo
    f = tritonjit.function(K.add)
    x, y = torch.arange(300.0), torch.full((300,), 2.0)
    for _ in range(3):
        o = torch.zeros(300)
        f[(3,)](x, y, o, 300, BLOCK=128)
    out["correct"] = bool(torch.equal(o, x + y))
    o1 = torch.zeros(300)
    f[lambda meta: (2,)](x[1:], y, o1, 1, BLOCK=128)    # another variant: misaligned, n == 1
    out["signature"] = f.signature(x, y, o, 300, BLOCK=128)
    out["calls"] = dict(tritonjit_echo.plugin.calls)
    out["variants"] = sorted(v.signature for v in f.variants())
    print(json.dumps(out))
''')


def _run(site: Path, select: str, **env: str) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("TRITONJIT_BACKEND", "TRITONJIT_ECHO_LOG")}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    res = subprocess.run([sys.executable, "-c", SCRIPT.format(kernels=str(KERNELS), select=select)],
                         capture_output=True, text=True, env=e, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _check_used(out: dict) -> None:
    assert out["current"] == "echo"
    assert out["correct"]
    # two variants: one compile, load and prepare each; pack+launch once per launch
    assert out["calls"] == {"compile": 2, "load": 2, "prepare": 2, "pack_args": 4, "launch": 4}
    assert out["variants"] == ["*fp32,*fp32:16,*fp32:16,i32:1,128", "*fp32:16,*fp32:16,*fp32:16,i32,128"]


def test_discovered_through_its_entry_point(echo_site):
    out = _run(echo_site, "none", TRITONJIT_BACKEND="interpreter")
    assert "echo" in out["backends"] and "interpreter" in out["backends"]
    assert out["broken"] == [] and out["dist"] == "tritonjit-echo"
    assert out["current"] == "interpreter" and out["calls"] == {}  # installed, but not chosen


def test_selected_with_set_backend(echo_site):
    _check_used(_run(echo_site, "set_backend", TRITONJIT_BACKEND="interpreter"))  # set_backend wins


def test_selected_with_environment(echo_site, tmp_path):
    log = tmp_path / "hooks.jsonl"
    out = _run(echo_site, "env", TRITONJIT_BACKEND="echo", TRITONJIT_ECHO_LOG=str(log))
    _check_used(out)
    hooks = [json.loads(line)["hook"] for line in log.read_text().splitlines()]
    assert hooks[:5] == ["compile", "load", "prepare", "pack_args", "launch"]  # the lifecycle order
