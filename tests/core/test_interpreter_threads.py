"""Interpreter launches and compiles in other threads exclude each other.

The interpreter patches ``triton.language`` for the whole process while a kernel
runs; a cross-compile in another thread meanwhile used to build its IR from the
interpreter's functions and fail.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import triton
import triton.language as tl
import tritonjit
from tritonjit._lang_lock import ReadWriteLock

torch = pytest.importorskip("torch")


@triton.jit
def _twice(v):
    return v * 2


@triton.jit
def _add_twice(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, _twice(tl.load(x + offs, mask=m)) + tl.load(y + offs, mask=m), mask=m)


@pytest.fixture
def fresh_triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Triton cache and index: every compile really runs Triton's code generator."""
    from triton import knobs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITONJIT_CACHE_DIR", raising=False)
    monkeypatch.delitem(knobs.cache.__dict__, "dir", raising=False)
    return tmp_path


def test_cross_compiles_beside_interpreter_launches(fresh_triton_cache, interpreter_backend):
    f = tritonjit.function(_add_twice)
    x, y = torch.randn(512), torch.randn(512)
    stop, failures, launches = threading.Event(), [], []

    def launch_loop() -> None:  # back to back: the language is patched nearly all the time
        while not stop.is_set():
            out = torch.zeros(512)
            try:
                f[(8,)](x, y, out, 512, BLOCK=64)
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(f"interpreter launch: {type(exc).__name__}: {exc}")
                return
            launches.append(out)

    thread = threading.Thread(target=launch_loop)
    thread.start()
    try:
        for block in (16, 64, 256):
            try:
                f.compile(f"*fp32:16,*fp32:16,*fp32:16,i32,{block}", target="cuda:90")
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(f"compile BLOCK={block}: {str(exc)[:400]}")
    finally:
        stop.set()
        thread.join()
    assert not failures, "\n".join(failures)
    assert launches, "the interpreter thread never ran a kernel beside the compiles"
    torch.testing.assert_close(launches[-1], x * 2 + y)


def test_readers_share_and_writers_exclude():
    lock, seen = ReadWriteLock(), []

    def read() -> None:
        with lock.reading():
            seen.append("read")

    with lock.reading():
        other = threading.Thread(target=read)
        other.start()
        other.join(timeout=5)
        assert seen == ["read"], "a second reader waited for the first"
    with lock.writing():
        other = threading.Thread(target=read)
        other.start()
        time.sleep(0.05)
        assert seen == ["read"], "a reader entered while the writer held the lock"
        with lock.writing():  # re-entrant for the writer
            pass
    other.join(timeout=5)
    assert seen == ["read", "read"]


def test_a_loop_of_launches_does_not_starve_a_reader():
    lock, stop = ReadWriteLock(), threading.Event()

    def launches() -> None:
        while not stop.is_set():
            with lock.writing():
                time.sleep(0.001)

    def compiles() -> None:
        for _ in range(5):
            with lock.reading():
                pass

    writer, reader = threading.Thread(target=launches), threading.Thread(target=compiles)
    writer.start()
    time.sleep(0.01)
    reader.start()
    reader.join(timeout=5)
    starved = reader.is_alive()
    stop.set()
    writer.join()
    reader.join()
    assert not starved, "five reads did not get in within 5 s of a launch loop"


def test_writing_while_reading_in_one_thread_is_refused():
    lock = ReadWriteLock()
    with lock.reading(), pytest.raises(RuntimeError, match="inside a compile"), lock.writing():
        pass
