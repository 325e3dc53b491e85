"""Shared pieces of the cache tests (a module of its own: test files cannot import conftest)."""

from __future__ import annotations

import os
from pathlib import Path

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
