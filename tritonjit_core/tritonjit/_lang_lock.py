"""One process-wide reader/writer lock over ``triton.language``.

The interpreter backend patches ``triton.language`` and ``JITFunction.__call__`` for
the whole process while it runs a kernel (Triton's interpreter works that way);
Triton's code generator reads the same objects while it turns a kernel into IR, so
a compile in another thread during a launch builds IR from the interpreter's
functions and fails. Interpreter launches therefore hold :data:`language` for
writing (one at a time, nothing else reading), and compiles hold it for reading
while, and only while, they read the language: the source's hash and Triton's
``make_ir`` stage (see :func:`reading_source`), and a plugin's own compiler. The
rest of a compile (LLVM, ptxas) runs beside the interpreter, and compiles never
wait for each other.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any


class ReadWriteLock:
    """Many readers or one writer, both re-entrant within a thread.

    Neither side starves the other: a waiting writer goes before new readers, and
    the readers that waited for a writer go before the next writer (a loop of
    launches re-takes the lock before a woken reader runs otherwise). A thread that
    already reads reads again without waiting (no deadlock on nested reads); a
    thread that reads may not start writing, it would wait for itself.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, int] = {}  # thread id -> depth
        self._writer: int | None = None
        self._writer_depth = 0
        self._writers_waiting = 0
        self._readers_waiting = 0
        self._admitted = 0  # readers let in ahead of the next writer when the last one left

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer != me and not self._readers.get(me):
                self._wait_to_read()
            self._readers[me] = self._readers.get(me, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                depth = self._readers.pop(me) - 1
                if depth:
                    self._readers[me] = depth
                else:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._writer_depth += 1
            else:
                if self._readers.get(me):
                    raise RuntimeError("tritonjit: an interpreter launch inside a compile of the same thread "
                                       "(the compile reads triton.language, which the launch patches)")
                self._wait_to_write()
                self._writer, self._writer_depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._writer_depth -= 1
                if not self._writer_depth:
                    self._writer = None
                    self._admitted = self._readers_waiting
                    self._cond.notify_all()

    def _wait_to_read(self) -> None:
        self._readers_waiting += 1
        entered = False
        try:
            while self._writer is not None or (self._writers_waiting and not self._admitted):
                self._cond.wait()
            entered = True
        finally:
            self._readers_waiting -= 1
            if entered:
                self._admitted = max(self._admitted - 1, 0)
            else:  # interrupted: keep no pass that nobody will use
                self._admitted = min(self._admitted, self._readers_waiting)
                self._cond.notify_all()

    def _wait_to_write(self) -> None:
        self._writers_waiting += 1
        try:
            while self._writer is not None or self._readers or self._admitted:
                self._cond.wait()
        finally:
            self._writers_waiting -= 1
            self._cond.notify_all()  # readers held back for this writer look again


language = ReadWriteLock()
"""Held for writing while ``triton.language`` is patched, for reading while it is read."""


def reading_source(src: Any) -> Any:
    """``src`` (Triton's ``ASTSource``) with the two methods that read
    ``triton.language`` run under :data:`language`, for reading: ``hash`` (the
    kernel's cache key follows its globals into the language) and ``make_ir`` (the
    code generator, the one stage of ``triton.compile`` that reads it)."""
    for name in ("hash", "make_ir"):
        method = getattr(src, name, None)
        if method is not None and not getattr(method, "_tritonjit_reading", False):
            setattr(src, name, _read_locked(method))
    return src


def _read_locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with language.reading():
            return fn(*args, **kwargs)

    locked._tritonjit_reading = True  # type: ignore[attr-defined]
    return locked
