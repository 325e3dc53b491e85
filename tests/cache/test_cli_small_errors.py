"""Small user errors of the command line and the manifest get a clear message.

- ``tritonjit compile file.py:name`` where ``name`` is no kernel: one line, exit 1;
- a manifest with binary lines: those lines are skipped with a warning naming the file
  and the line (as the docs say of bad lines), the good ones still read;
- ``tritonjit warmup DIR``: says DIR is a directory and a manifest file was expected;
- ``--timeout`` of zero, negative or not finite: an argparse error (exit 2);
- ``cache export`` errors name the user's target path, not a temporary file;
- ``f.compile("")`` of a kernel with no parameters (the empty signature).
"""

from __future__ import annotations

import logging
import os
import textwrap

import pytest
from tritonjit import _disk_cache, _manifest
from tritonjit.cli import main as cli_main

torch = pytest.importorskip("torch")


@pytest.fixture
def not_a_kernel(tmp_path) -> str:
    path = tmp_path / "mixed.py"
    path.write_text(textwrap.dedent("""\
        import triton
        import triton.language as tl

        BLOCK = 128

        def helper(x):
            return x

        @triton.jit
        def real(X):
            pass
    """))
    return str(path)


@pytest.mark.parametrize("name", ["helper", "BLOCK"])
def test_compile_of_something_that_is_no_kernel(caches, not_a_kernel, name, capsys):
    rc = cli_main(["compile", f"{not_a_kernel}:{name}", "--signature", "*fp32", "--target", "cuda:80"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert f"'{name}'" in err and "not a @triton.jit kernel" in err and "kernels in it: real" in err


def test_binary_manifest_lines_are_skipped_naming_file_and_line(caches, tmp_path, caplog):
    good = _manifest.ManifestEntry(kernel="k", file="/src/k.py", signature="*fp32:16,i32")
    path = tmp_path / "m.jsonl"
    import json

    path.write_bytes(b"\xff\xfe\x00\x01binary\x80\n" + json.dumps(good.to_json()).encode() + b"\n\xc3\x28\n")
    with caplog.at_level(logging.WARNING, logger="tritonjit"):
        entries = _manifest.read(str(path))
    assert entries == [good]
    msgs = [r.getMessage() for r in caplog.records]
    assert any(f"{path}:1:" in m and "not UTF-8 text" in m for m in msgs)
    assert any(f"{path}:3:" in m for m in msgs)


def test_warmup_of_a_directory_says_so(caches, tmp_path, capsys):
    rc = cli_main(["warmup", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and "is a directory" in err and "manifest file" in err and "does not exist" not in err


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_warmup_timeout_must_be_positive_seconds(caches, tmp_path, value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["warmup", str(tmp_path / "m.jsonl"), "--timeout", value])
    assert exc.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_cache_export_errors_name_the_users_path(caches, tmp_path, capsys, monkeypatch):
    target = tmp_path / "out"
    target.mkdir()  # a directory where the bundle file should go
    assert cli_main(["cache", "export", str(target)]) == 1
    err = capsys.readouterr().err
    assert str(target) in err and ".tmp." not in err and "is a directory" in err

    def refuse(src, dst):  # a write that fails at the last step (a full disk, a permission)
        raise PermissionError(13, "Permission denied", src, None, dst)

    monkeypatch.setattr(_disk_cache.os, "replace", refuse)
    bundle = tmp_path / "bundle.tar.gz"
    assert cli_main(["cache", "export", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert str(bundle) in err and ".tmp." not in err and "Permission denied" in err
    assert not any(".tmp." in n for n in os.listdir(tmp_path))  # the temporary file is gone
