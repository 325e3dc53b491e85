"""pluginkit's library search: the order it tries places in, what it reports, and the
loader's cache read once per process (ctypes.util.find_library ran ldconfig, gcc and ld
at every call: ~200 ms of vendor availability checks on a machine without their drivers)."""
from __future__ import annotations

import ctypes
import os
import shutil
import sys

import pytest
from tritonjit.pluginkit import _library
from tritonjit.pluginkit._library import find_libraries, find_library, loader_paths

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the loader cache is Linux's")


def _libc_path() -> str:
    paths = loader_paths("c")
    if not paths:
        pytest.skip("ldconfig knows no libc here")
    return paths[0]


@linux
def test_loader_paths_reads_ldconfig_once(monkeypatch):
    _library._ldconfig_cache.cache_clear()
    calls = []
    real = _library.subprocess.run

    def counting(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(_library.subprocess, "run", counting)
    assert any(os.path.basename(p).startswith("libc.so") for p in loader_paths("c"))
    assert loader_paths("no-such-library-anywhere") == []
    loader_paths("m")
    assert len(calls) == 1


@linux
def test_a_soname_only_the_loader_knows_is_found_after_the_plain_names():
    libc = _libc_path()
    s = find_library(["libc.so"], "TJ_TEST_LIB")  # libc.so is a linker script: dlopen refuses it
    assert s.found and os.path.basename(s.path).startswith("libc.so")
    assert s.tried[0] == "libc.so" and s.path in s.tried and libc in s.tried


@linux
def test_ld_library_path_is_searched(tmp_path, monkeypatch):
    libc = _libc_path()
    shutil.copy(libc, tmp_path / "libtjfake.so.3")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    s = find_library(["libtjfake.so"], "TJ_TEST_LIB")
    assert s.found and s.path == str(tmp_path / "libtjfake.so.3")


def test_sdk_directories_come_before_the_loader(tmp_path):
    libc = _libc_path()
    shutil.copy(libc, tmp_path / "libc.so.6")
    s = find_library(["libc.so.6"], "TJ_TEST_LIB", [str(tmp_path)])
    assert s.path == str(tmp_path / "libc.so.6") and s.tried == [s.path]


def test_a_missing_library_says_where_it_looked(tmp_path):
    s = find_library(["libtj-nowhere.so.1"], "TJ_TEST_LIB", [str(tmp_path)])
    assert not s.found and s.handle is None
    why = s.reason()
    assert "libtj-nowhere.so.1" in why and str(tmp_path) in why and "TJ_TEST_LIB" in why


def test_a_pinned_library_that_fails_is_reported_not_replaced(tmp_path, monkeypatch):
    bad = tmp_path / "libbroken.so"
    bad.write_bytes(b"not an ELF file")
    monkeypatch.setenv("TJ_TEST_LIB", str(bad))
    s = find_library(["libc.so.6"], "TJ_TEST_LIB")  # libc.so.6 would open: the pin wins, and fails
    assert not s.found and s.tried == [str(bad)]
    assert str(bad) in s.reason() and "TJ_TEST_LIB" in s.reason()


def test_find_libraries_binds_each_symbol_from_the_library_that_has_it():
    _libc_path()
    found = find_libraries([("libc.so.6",), ("libm.so.6",)], "TJ_TEST_LIB").require()
    assert found.bind("strlen", ctypes.c_size_t, [ctypes.c_char_p])(b"abc") == 3
    assert found.bind("cos", ctypes.c_double, [ctypes.c_double])(0.0) == 1.0
