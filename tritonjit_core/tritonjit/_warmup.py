"""Parallel warm-up: compile a manifest's variants in worker processes.

Each worker is a spawned process that imports the kernels and calls
``KernelFunction.compile`` (so every artifact lands in Triton's cache *and* in the
tritonjit index, ready for a warm start). The pool is tritonjit's own rather than
``ProcessPoolExecutor``: there a crashing worker breaks the whole pool, here the
parent knows which variant each worker holds, so a compiler that crashes (or hangs
past ``timeout``) fails that one variant, the worker is replaced and the others go
on.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from ._manifest import ENV as RECORD_ENV
from ._manifest import ManifestEntry

RECORDED = "recorded"  # --target recorded: each entry's own target


@dataclass
class Result:
    """What became of one variant."""

    entry: ManifestEntry
    status: str  # "compiled" | "cached" | "failed" | "crashed" | "timeout"
    seconds: float = 0.0
    error: str | None = None
    target: str | None = None
    hash: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("compiled", "cached")

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.entry.kernel, "file": self.entry.file, "signature": self.entry.signature,
                "options": self.entry.options_dict, "target": self.target, "status": self.status,
                "seconds": round(self.seconds, 4), "error": self.error, "hash": self.hash}


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    jobs: int = 1
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "seconds": round(self.seconds, 4), "total": len(self.results),
                **{s: self.count(s) for s in ("compiled", "cached", "failed", "crashed", "timeout")},
                "results": [r.to_json() for r in self.results]}


# ---- the worker side ----------------------------------------------------------------------------
def load_entry_kernel(entry: ManifestEntry) -> Any:
    """The kernel object of an entry: by module name when importable, else by path; a
    script's kernel (module ``__main__``) from its definition, never by running the script."""
    from ._loader import load_kernel
    from ._script_kernel import MAIN, load_script_kernel

    if entry.module == MAIN:
        return load_script_kernel(entry.file, entry.kernel)
    if entry.module:
        try:
            mod = importlib.import_module(entry.module)
            obj = getattr(mod, entry.kernel, None)
            if obj is not None:
                return obj
        except ImportError:
            pass
    return load_kernel(entry.file, entry.kernel)


def compile_entry(entry: ManifestEntry, target: str | None) -> dict[str, Any]:
    """Compile one entry in this process; the worker's unit of work."""
    from . import _disk_cache
    from ._function import function

    tgt = entry.target if target == RECORDED else target
    f = function(load_entry_kernel(entry))
    hits = _disk_cache.index.hits
    t0 = time.perf_counter()
    v = f.compile(entry.signature, target=tgt, **entry.options_dict)
    seconds = time.perf_counter() - t0
    status = "cached" if _disk_cache.index.hits > hits else "compiled"
    return {"status": status, "seconds": seconds, "target": _disk_cache.target_str(v.target), "hash": v.hash}


def _worker_main(conn: Connection) -> None:
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        entry, target = task
        try:
            out = compile_entry(entry, target)
        except BaseException as exc:  # report, stay alive for the next variant
            out = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "trace": traceback.format_exc(limit=6)}
        conn.send(out)


class _Worker:
    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        with _without_env(RECORD_ENV):  # the warm-up's own compiles are not recorded
            self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
            self.proc.start()
        child.close()
        self.task: tuple[int, float] | None = None  # (entry index, start time)

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


@contextlib.contextmanager
def _without_env(name: str) -> Iterator[None]:
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


# ---- the parent side ------------------------------------------------------------------------------
def warmup(entries: Sequence[ManifestEntry], jobs: int = 1, target: str | None = None, progress: bool = True,
           timeout: float | None = None) -> Report:
    """Compile ``entries`` in ``jobs`` spawned workers (``target``: None for the local
    device, "recorded" for each entry's own, or a name such as "cuda:90")."""
    jobs = max(1, min(int(jobs), len(entries) or 1))
    report = Report(jobs=jobs)
    results: list[Result | None] = [None] * len(entries)
    bar = _progress(len(entries), progress)
    ctx = mp.get_context("spawn")
    t_start = time.perf_counter()
    pending = list(range(len(entries)))[::-1]
    workers: list[_Worker] = []
    try:
        workers = [_Worker(ctx) for _ in range(jobs)]

        def give(w: _Worker) -> None:
            if pending:
                i = pending.pop()
                w.task = (i, time.perf_counter())
                w.conn.send((entries[i], target))

        for w in workers:
            give(w)
        while any(w.task is not None for w in workers):
            busy = [w for w in workers if w.task is not None]
            wait_for: float | None = None
            if timeout is not None:
                now = time.perf_counter()
                wait_for = max(0.0, min(w.task[1] + timeout - now for w in busy))  # type: ignore[index]
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=wait_for)
            for w in busy:
                i, t0 = w.task  # type: ignore[misc]
                elapsed = time.perf_counter() - t0
                replace = False
                if w.conn in ready:
                    try:
                        out = w.conn.recv()
                        results[i] = Result(entries[i], out["status"], out.get("seconds", elapsed), out.get("error"),
                                            out.get("target"), out.get("hash"))
                    except (EOFError, OSError):  # died while answering
                        results[i] = _crashed(entries[i], w, elapsed)
                        replace = True
                elif w.proc.sentinel in ready:
                    results[i] = _crashed(entries[i], w, elapsed)
                    replace = True
                elif timeout is not None and elapsed >= timeout:
                    w.kill()
                    results[i] = Result(entries[i], "timeout", elapsed, f"compile took over {timeout:g} s; "
                                        "the worker was killed")
                    replace = True
                else:
                    continue
                w.task = None
                if bar is not None:
                    bar.update(1)
                    r = results[i]
                    if r is not None and not r.ok:
                        bar.write(f"tritonjit warmup: {r.entry.describe()} {r.status}: {r.error}")
                if replace:
                    with contextlib.suppress(Exception):
                        w.conn.close()
                    workers.remove(w)
                    if pending:
                        w = _Worker(ctx)
                        workers.append(w)
                give(w)
    finally:
        for w in workers:
            w.stop()
        if bar is not None:
            bar.close()
    report.seconds = time.perf_counter() - t_start
    report.results = [r for r in results if r is not None]
    return report


def _crashed(entry: ManifestEntry, w: _Worker, elapsed: float) -> Result:
    w.proc.join(timeout=5)
    code = w.proc.exitcode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Result(entry, "crashed", elapsed, f"the compiler process died ({how}) while compiling this variant")


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency, but never fail a warm-up over a progress bar
        return None
    return tqdm(total=total, desc="tritonjit warmup", unit="variant", file=sys.stderr, dynamic_ncols=True)
