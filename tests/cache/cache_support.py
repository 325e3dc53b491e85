"""Shared pieces of the cache tests (a module of its own: test files cannot import conftest)."""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path
from typing import Any

AXPY = """
import triton
import triton.language as tl


@triton.jit
def helper(v):
    return v * {factor}


@triton.jit
def axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) * alpha + tl.load(y + offs, mask=m)
    tl.store(out + offs, {body}, mask=m)
"""

SIG = "*fp32:16,*fp32:16,*fp32:16,i32,fp32,128"
TARGET = "cuda:90"


def artifact_dirs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.is_dir() and p.name != "tritonjit"] if root.exists() else []


def env_for_subprocess(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


# ---- read-only storage --------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def make_read_only(root: Path, monkeypatch: Any) -> str:
    """Make the tree ``root`` unwritable, as read-only storage is; returns how.

    By chmod where that binds ("chmod"). As root it does not, so the os calls that
    write (open for writing, mkdir, unlink, rmdir, rename, replace) fail under
    ``root`` with EACCES instead ("simulated"), the error read-only storage gives."""
    root.mkdir(parents=True, exist_ok=True)
    for p in sorted(root.rglob("*"), reverse=True) + [root]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    probe = root / ".write-probe"
    try:
        probe.touch()
    except PermissionError:
        return "chmod"
    probe.unlink()
    _refuse_writes_under(str(root), monkeypatch)
    return "simulated"


def restore_writable(root: Path) -> None:
    """Undo :func:`make_read_only`'s chmod (the simulation ends with its monkeypatch)."""
    if root.exists():
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def _refuse_writes_under(root: str, monkeypatch: Any) -> None:
    root = os.path.realpath(root)

    def inside(path: Any, dir_fd: int | None = None) -> bool:
        if isinstance(path, int):
            return False
        path = os.fsdecode(os.fspath(path))
        if dir_fd is not None and not os.path.isabs(path):
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        path = os.path.realpath(path)
        return path == root or path.startswith(root + os.sep)

    def refuse(path: Any) -> PermissionError:
        return PermissionError(errno.EACCES, "Permission denied (simulated read-only storage)", os.fsdecode(path))

    def guard(real: Any, writes: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            for path in writes(*args, **kwargs):
                if inside(path, kwargs.get("dir_fd")):
                    raise refuse(path)
            return real(*args, **kwargs)
        return call

    def open_writes(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> list[Any]:
        return [file] if any(c in mode for c in "wax+") else []

    def os_open_writes(path: Any, flags: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [path] if flags & _WRITE_FLAGS else []

    monkeypatch.setattr(builtins, "open", guard(builtins.open, open_writes))
    monkeypatch.setattr(io, "open", guard(io.open, open_writes))
    monkeypatch.setattr(os, "open", guard(os.open, os_open_writes))
    for name in ("mkdir", "unlink", "remove", "rmdir"):
        monkeypatch.setattr(os, name, guard(getattr(os, name), lambda path, *a, **k: [path]))
    for name in ("rename", "replace"):
        monkeypatch.setattr(os, name, guard(getattr(os, name), lambda src, dst, *a, **k: [src, dst]))
