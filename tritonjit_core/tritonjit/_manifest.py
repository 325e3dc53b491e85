"""Manifests: the variants a run used, for ``tritonjit warmup`` to compile ahead of time.

``TRITONJIT_RECORD=FILE`` makes every variant a process compiles or loads append one
JSON line to FILE::

    {"format": 1, "kernel": "add_kernel", "file": "/src/ops/add.py", "module": "ops.add",
     "signature": "*fp32:16,*fp32:16,*fp32:16,i32,1024", "options": {"num_warps": 4},
     "target": "cuda:90", "backend": "cuda"}

``"module": "__main__"`` marks a kernel a script defined: warm-up compiles it from its
definition (tritonjit._script_kernel) instead of running the script.

Lines are appended with one ``write`` under an flock, so several processes can record
into one file. Reading skips blank and malformed lines (with a warning naming the
line) and drops duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._disk_cache import file_lock, target_str
from ._script_kernel import MAIN

log = logging.getLogger(__name__)

FORMAT = 1
ENV = "TRITONJIT_RECORD"


@dataclass(frozen=True)
class ManifestEntry:
    """One variant to compile: where the kernel lives, its signature and options."""

    kernel: str
    file: str
    signature: str
    options: tuple[tuple[str, Any], ...] = ()
    target: str | None = None
    backend: str | None = None
    module: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "kernel": self.kernel, "file": self.file, "module": self.module,
                "signature": self.signature, "options": self.options_dict, "target": self.target,
                "backend": self.backend}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ManifestEntry:
        for required in ("kernel", "file", "signature"):
            if not isinstance(obj.get(required), str) or not obj[required]:
                raise ValueError(f"missing or empty field '{required}'")
        options = obj.get("options") or {}
        if not isinstance(options, dict):
            raise ValueError("'options' must be an object")
        return cls(kernel=obj["kernel"], file=obj["file"], signature=obj["signature"],
                   options=tuple(sorted(options.items())), target=obj.get("target"),
                   backend=obj.get("backend"), module=obj.get("module"))

    def describe(self) -> str:
        return f"{self.kernel}[{self.signature}]"


def entry_for(fn: Any, compiled: Any, options: dict[str, Any]) -> ManifestEntry:
    """The manifest entry of a variant a KernelFunction just compiled or loaded."""
    code = getattr(getattr(fn.jit_fn, "fn", None), "__code__", None)
    path = fn.origin or (code.co_filename if code is not None else "")
    module = getattr(fn.jit_fn, "__module__", None)
    if (module or "").startswith("tritonjit_kernels_"):
        module = None  # a kernel file, only importable by path
    elif module == "__mp_main__" or (module or "").startswith("tritonjit_script_"):
        module = MAIN  # a script's kernel (in a multiprocessing child; compiled by warm-up)
    target = compiled.target
    return ManifestEntry(
        kernel=fn.name, file=os.path.abspath(path) if path else "", signature=compiled.signature,
        options=tuple(sorted((k, v) for k, v in options.items() if _plain(v))),
        target=target_str(target) if target is not None else None,
        backend=getattr(target, "backend", None), module=module,
    )


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool, type(None)))


def append(path: str, entries: Iterable[ManifestEntry]) -> None:
    """Append entries to the manifest at ``path`` (one write, under a lock)."""
    text = "".join(json.dumps(e.to_json(), sort_keys=True) + "\n" for e in entries)
    if not text:
        return
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with file_lock(os.path.abspath(path) + ".lock"):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def read(path: str) -> list[ManifestEntry]:
    """The distinct entries of a manifest, in first-seen order. Lines are decoded one
    by one, so a line that is not UTF-8 text (a binary file, a torn write) is skipped
    with a warning like any other malformed line, instead of refusing the file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"manifest '{path}' is a directory; expected a manifest file (JSON lines written "
                                "by a run with TRITONJIT_RECORD=FILE)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"manifest '{path}' does not exist (record one with TRITONJIT_RECORD={path})")
    seen: dict[ManifestEntry, None] = {}
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                log.warning("%s:%d: skipping a manifest line that is not UTF-8 text (%s)", path, lineno, exc)
                continue
            if not line:
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                entry = ManifestEntry.from_json(obj)
            except ValueError as exc:
                log.warning("%s:%d: skipping a malformed manifest line (%s)", path, lineno, exc)
                continue
            seen.setdefault(entry, None)
    return list(seen)


class ManifestWriter:
    """The ``_function._recorder`` hook: appends each variant once per process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: set[ManifestEntry] = set()
        self._lock = threading.Lock()

    def __call__(self, fn: Any, compiled: Any, options: dict[str, Any]) -> None:
        try:
            entry = entry_for(fn, compiled, options)
            with self._lock:
                if entry in self._seen:
                    return
                self._seen.add(entry)
            append(self.path, [entry])
        except Exception as exc:  # recording must never break a launch
            log.warning("could not record kernel '%s' to %s: %s", getattr(fn, "name", "?"), self.path, exc)


def recorder_from_env() -> ManifestWriter | None:
    path = os.environ.get(ENV, "").strip()
    return ManifestWriter(path) if path else None
