"""The torch-linked C++ helpers need no compiler at run time on a normal install:
a wheel's prebuilt copy is used when it was built for this torch (else the helper is
built), and a build that fails is remembered on disk, so one message is given per
torch version and compiler state, not one per process. ``status()`` (what
``tritonjit info`` shows) says why a helper is missing."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

from tritonjit._native import torch_build, torch_prebuilt  # noqa: E402
from tritonjit._native.torch_build import AsyncModule  # noqa: E402

# A helper that compiles in about a second: it links torch's libraries like the real
# ones but includes only Python.h.
MINI = r"""
#include <Python.h>
static PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "%s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%s(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m) PyModule_AddIntConstant(m, "VALUE", %d);
  return m;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONJIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _source(tmp_path, stem: str, value: int = 42, broken: bool = False) -> str:
    path = tmp_path / f"{stem}.cpp"
    path.write_text("#error this helper does not compile\n" if broken else MINI % (stem, stem, value))
    return str(path)


needs_cxx = pytest.mark.skipif(torch_prebuilt.compiler() is None, reason="needs a C++ compiler")


@needs_cxx
def test_a_prebuilt_helper_for_this_torch_is_loaded_without_building(tmp_path, cache, monkeypatch):
    src = _source(tmp_path, "tj_mini")
    helper = torch_prebuilt.Helper("tjtest.tj_mini", src)
    prebuilt = str(tmp_path / "_prebuilt")
    (entry,) = torch_prebuilt.prebuild([helper], prebuilt, torch, rpath="$ORIGIN")
    assert entry["torch"] == torch.__version__ and entry["file"].startswith("tj_mini.torch-")
    mod = AsyncModule(helper.name, src, prebuilt=prebuilt)
    assert mod.status().startswith(f"prebuilt for torch {torch.__version__}")
    monkeypatch.setattr(torch_build, "build", lambda *a, **k: pytest.fail("built although prebuilt"))
    assert mod.start().VALUE == 42  # loaded at once, in this thread
    assert mod.reason.startswith("in use (prebuilt, ")


@needs_cxx
def test_load_if_ready_loads_a_built_helper_and_never_builds(tmp_path, cache, monkeypatch):
    src = _source(tmp_path, "tj_ready", value=5)
    fresh = AsyncModule("tjtest.tj_ready", src)
    real_build = torch_build.build
    monkeypatch.setattr(torch_build, "build", lambda *a, **k: pytest.fail("load_if_ready built"))
    assert fresh.load_if_ready() is None and fresh.reason == "not started"  # nothing built: nothing started
    monkeypatch.setattr(torch_build, "build", real_build)
    assert AsyncModule("tjtest.tj_ready", src).start(wait=True).VALUE == 5  # another process builds it
    monkeypatch.setattr(torch_build, "build", lambda *a, **k: pytest.fail("built again"))
    later = AsyncModule("tjtest.tj_ready", src)
    seen = []
    later.on_ready(lambda m: seen.append(m.VALUE))
    assert later.load_if_ready().VALUE == 5 and seen == [5]  # loaded in this thread, callbacks run
    assert later.load_if_ready().VALUE == 5  # once


@needs_cxx
def test_a_background_build_that_finishes_at_exit_loads_nothing(tmp_path, cache, monkeypatch):
    """Once the interpreter's exit hook ran, a build thread that finishes neither imports the
    module nor runs its callbacks (torch kernel registrations against a finalising
    interpreter), and its waiters are released."""
    src = _source(tmp_path, "tj_exit", value=3)
    mod = AsyncModule("tjtest.tj_exit", src)
    seen = []
    mod.on_ready(lambda m: seen.append(m.VALUE))
    monkeypatch.setattr(torch_build, "_exiting", True)  # as _stop_loads leaves it
    assert mod.start(wait=True) is None
    assert mod._thread is not threading.current_thread()  # it was built on the background thread
    assert seen == [] and mod.module is None and "exiting" in mod.reason
    monkeypatch.setattr(torch_build, "_exiting", False)
    assert AsyncModule("tjtest.tj_exit", src).start().VALUE == 3  # built: a later process loads it


@needs_cxx
def test_a_helper_named_as_its_python_wrapper_leaves_the_wrapper_importable(tmp_path, cache, monkeypatch):
    """A single-phase extension enters itself in sys.modules under its name on load;
    ``tritonjit_ops._native_ops`` is both a Python module and its C++ module's name, and
    ``import``/``mock.patch`` of the name must keep finding the Python module."""
    import types

    wrapper = types.ModuleType("tjtest.tj_twin")
    monkeypatch.setitem(sys.modules, "tjtest.tj_twin", wrapper)
    mod = AsyncModule("tjtest.tj_twin", _source(tmp_path, "tj_twin", value=8)).start(wait=True)
    assert mod.VALUE == 8 and mod is not wrapper
    assert sys.modules["tjtest.tj_twin"] is wrapper
    monkeypatch.delitem(sys.modules, "tjtest.tj_twin")
    assert torch_build.load("tjtest.tj_twin", _source(tmp_path, "tj_twin", value=8)).VALUE == 8
    assert sys.modules["tjtest.tj_twin"].VALUE == 8  # no wrapper: the extension stays, as a plain import leaves it


@needs_cxx
def test_a_prebuilt_helper_for_another_torch_or_other_sources_is_not_used(tmp_path, cache):
    src = _source(tmp_path, "tj_other")
    helper = torch_prebuilt.Helper("tjtest.tj_other", src)
    prebuilt = tmp_path / "_prebuilt"
    torch_prebuilt.prebuild([helper], str(prebuilt), torch, rpath="$ORIGIN")
    manifest = prebuilt / torch_prebuilt.MANIFEST
    data = json.loads(manifest.read_text())
    data["entries"][0]["torch"] = "0.1.0"
    manifest.write_text(json.dumps(data))
    path, why = torch_prebuilt.find(str(prebuilt), helper, torch)
    assert path is None and why == f"the prebuilt helper is for torch 0.1.0, this is torch {torch.__version__}"
    mod = AsyncModule(helper.name, src, prebuilt=str(prebuilt))
    assert "builds on first use" in mod.status() and "for torch 0.1.0" in mod.status()
    assert mod.start(wait=True).VALUE == 42  # the fallback: built here
    assert mod.reason.startswith("in use (") and "in use (prebuilt" not in mod.reason

    data["entries"][0]["torch"] = torch.__version__
    manifest.write_text(json.dumps(data))
    (tmp_path / "tj_other.cpp").write_text(MINI % ("tj_other", "tj_other", 7))
    assert torch_prebuilt.find(str(prebuilt), helper, torch) == (None, "the prebuilt helper was built from other sources")


@needs_cxx
def test_a_failed_build_is_remembered_and_reported_once(tmp_path, cache, monkeypatch, caplog):
    src = _source(tmp_path, "tj_broken", broken=True)
    first = AsyncModule("tjtest.tj_broken", src)
    with caplog.at_level(logging.DEBUG, logger="tritonjit"):
        assert first.start(wait=True) is None
    assert first.reason.startswith("not available: build failed: ")
    assert "does not compile" in first.reason or "error" in first.reason
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "remembered" in warnings[0].getMessage()

    # another process (a fresh module object): no compile, no warning, the same reason
    caplog.clear()
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("compiled again"))
    again = AsyncModule("tjtest.tj_broken", src)
    assert again.status() == first.reason
    with caplog.at_level(logging.DEBUG, logger="tritonjit"):
        assert again.start(wait=True) is None
    assert again.reason == first.reason
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@needs_cxx
def test_retry_forgets_the_failure(tmp_path, cache):
    src = _source(tmp_path, "tj_fixed", broken=True)
    AsyncModule("tjtest.tj_fixed", src).start(wait=True)
    assert os.path.exists(torch_build.failure_marker("tjtest.tj_fixed", (src,), torch))
    retried = AsyncModule("tjtest.tj_fixed", src)
    assert retried.start(wait=True, retry=True) is None  # still broken: tried and failed again
    assert retried.reason.startswith("not available: build failed")


def test_no_compiler_is_remembered_per_compiler_state(tmp_path, cache, monkeypatch, caplog):
    src = _source(tmp_path, "tj_nocc")
    monkeypatch.setattr(torch_build, "compiler", lambda: None)
    mod = AsyncModule("tjtest.tj_nocc", src)
    assert mod.status().startswith("not available: no C++ compiler found")
    with caplog.at_level(logging.WARNING, logger="tritonjit"):
        assert mod.start(wait=True) is None
        assert AsyncModule("tjtest.tj_nocc", src).start(wait=True) is None
    assert len(caplog.records) == 1, [r.getMessage() for r in caplog.records]
    assert mod.reason.startswith("not available: no C++ compiler found")
    # a compiler appears: another compiler state, so the failure no longer applies
    cxx = tmp_path / "c++"
    cxx.write_text("#!/bin/sh\nexit 1\n")
    cxx.chmod(0o755)
    monkeypatch.setattr(torch_build, "compiler", lambda: str(cxx))
    assert AsyncModule("tjtest.tj_nocc", src).status().startswith("builds on first use with c++")


def test_info_says_why_each_helper_is_missing(tmp_path):
    """No compiler on PATH, nothing prebuilt (an editable install), ops' helpers switched
    off: ``tritonjit info --json`` names every helper with its reason."""
    env = {**os.environ, "TRITONJIT_CACHE_DIR": str(tmp_path), "PATH": os.path.dirname(sys.executable),
           "TRITONJIT_OPS_NATIVE": "0"}
    env.pop("CXX", None)
    code = "import sys; from tritonjit.cli import main; sys.exit(main(['info', '--json']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    helpers = json.loads(out)["native"]["helpers"]
    reader = helpers["tritonjit._native._torch_tensor"]
    assert reader.startswith("not available: no C++ compiler found") or reader.startswith("not used"), reader
    for name in ("tritonjit_ops._prologue_native", "tritonjit_ops._native_ops"):
        if name in helpers:  # tritonjit_ops installed
            assert helpers[name].startswith("disabled by TRITONJIT_OPS_NATIVE=0"), helpers
