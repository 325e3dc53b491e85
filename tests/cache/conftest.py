"""Every cache test runs against its own empty Triton cache and tritonjit index."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cache_support import (  # noqa: F401
    AXPY,
    SIG,
    TARGET,
    artifact_dirs,
    env_for_subprocess,
    make_read_only,
    restore_writable,
)


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fresh TRITON_CACHE_DIR (the index lives under it); the record hook off."""
    root = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(root))
    monkeypatch.delenv("TRITONJIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITONJIT_DISK_CACHE", raising=False)
    monkeypatch.delenv("TRITONJIT_RECORD", raising=False)
    from triton import knobs

    # an override of knobs.cache.dir (left by another test) would hide TRITON_CACHE_DIR
    monkeypatch.delitem(knobs.cache.__dict__, "dir", raising=False)
    from tritonjit._disk_cache import index

    index._reported.clear()  # corruption is reported once per variant and process
    return root


@pytest.fixture
def kernel_file(tmp_path: Path) -> Callable[..., str]:
    """Write a kernel module (a new path each time, so each is a fresh JITFunction)."""
    count = [0]

    def write(factor: int = 2, body: str = "helper(v)", name: str | None = None) -> str:
        count[0] += 1
        path = tmp_path / (name or f"kern_{count[0]}.py")
        path.write_text(textwrap.dedent(AXPY.format(factor=factor, body=body)))
        return str(path)

    return write


@pytest.fixture
def compile_counter(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Counts calls of triton.compile (the index must avoid them)."""
    import triton

    calls: list[Any] = []
    real = triton.compile

    def counting(src: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(src)
        return real(src, *args, **kwargs)

    monkeypatch.setattr(triton, "compile", counting)
    return calls


@pytest.fixture
def read_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], str]]:
    """``read_only(path)`` makes a tree unwritable (see make_read_only); undone afterwards."""
    made: list[Path] = []

    def make(path: Path) -> str:
        made.append(path)
        return make_read_only(path, monkeypatch)

    yield make
    for path in made:
        restore_writable(path)
