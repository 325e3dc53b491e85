"""An imported bundle verifies on the machine that imported it, and can be exported again
(Triton's group file is rewritten there with local paths: the installed entry lists
the rewritten file's hash)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cache_support import SIG, TARGET


def test_an_imported_bundle_verifies_and_exports_again(caches: Path, kernel_file: Callable[..., str],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonjit
    from tritonjit import _bundle

    tritonjit.function(kernel_file(), "axpy").compile(SIG, target=TARGET)
    first = _bundle.export_bundle(str(tmp_path / "a.tar.gz"))
    assert first.entries == 1
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "another-machine"))
    _bundle.import_bundle(str(tmp_path / "a.tar.gz"))
    [row] = _bundle.list_entries()
    assert row["problem"] is None
    again = _bundle.export_bundle(str(tmp_path / "b.tar.gz"))
    assert again.entries == 1 and not again.skipped
