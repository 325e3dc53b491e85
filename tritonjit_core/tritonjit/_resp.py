"""A small Redis client (RESP2 over a socket), with bounded connect and read timeouts.

The shared remote cache needs a handful of commands (GET, SET NX PX, MGET, STRLEN,
HINCRBY, HGETALL, HGET, HSET, DEL, EVAL, PING); this speaks them without a
dependency, so tritonjit works wherever it is installed, with or without the
``redis`` package. Every socket operation is bounded by ``timeout`` seconds: a
server that does not answer costs at most that, never a hang. Any transport or
protocol failure raises :class:`RemoteUnavailable` and drops the connection (the
next call reconnects); an error reply from the server raises :class:`RedisReplyError`.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import unquote, urlsplit

#: bound on one bulk reply (an artifact file); a larger one is refused unread
MAX_BULK = 512 << 20


class RemoteUnavailable(OSError):
    """The server cannot be reached, stopped answering, or spoke something other than RESP."""


class RedisReplyError(Exception):
    """The server answered a command with an error reply."""


@dataclass(frozen=True)
class RedisURL:
    """``redis://[[user]:password@]host[:port][/db]``, parsed."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None

    @property
    def display(self) -> str:
        """The URL without its credentials (for messages, ``tritonjit info``)."""
        return f"redis://{self.host}:{self.port}/{self.db}"


def parse_url(url: str) -> RedisURL:
    """Parse a ``redis://`` URL; ValueError says what is wrong with it."""
    parts = urlsplit(url.strip())
    if parts.scheme != "redis":
        raise ValueError(f"remote cache URL {url!r} must look like redis://host:port/db (scheme 'redis', got "
                         f"{parts.scheme or 'none'!r})")
    if not parts.hostname:
        raise ValueError(f"remote cache URL {url!r} names no host; expected redis://host:port/db")
    try:
        port = parts.port or 6379
    except ValueError:
        raise ValueError(f"remote cache URL {url!r} has an invalid port; expected redis://host:port/db") from None
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ValueError(f"remote cache URL {url!r}: the database must be a number (redis://host:port/0), got "
                         f"{path!r}")
    return RedisURL(parts.hostname, port, int(path or 0), unquote(parts.username) if parts.username else None,
                    unquote(parts.password) if parts.password else None)


def _encode(args: Sequence[Any]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, bytes):
            b = a
        elif isinstance(a, str):
            b = a.encode()
        elif isinstance(a, int) and not isinstance(a, bool):
            b = str(a).encode()
        else:
            raise TypeError(f"a Redis argument must be bytes, str or int, got {type(a).__name__}")
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


class Connection:
    """One connection to a Redis server; thread-safe (one command or pipeline at a time)."""

    def __init__(self, url: RedisURL, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._buf = b""

    def call(self, *args: Any) -> Any:
        """Send one command, return its reply."""
        return self.pipeline([args])[0]

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Send the commands in one write, read their replies in order. An error reply
        raises RedisReplyError after all replies are read (the connection stays usable)."""
        with self._lock:
            try:
                sock = self._connected()
                sock.sendall(b"".join(_encode(c) for c in commands))
                replies = [self._reply() for _ in commands]
            except (OSError, EOFError, ValueError) as exc:
                self._drop()
                if isinstance(exc, RemoteUnavailable):
                    raise
                raise RemoteUnavailable(f"{self.url.display}: {type(exc).__name__}: {exc}") from None
        for r in replies:
            if isinstance(r, RedisReplyError):
                raise r
        return replies

    def _connected(self) -> socket.socket:
        if self._sock is not None and self._pid != os.getpid():  # a forked child: never share the parent's
            self._sock, self._buf = None, b""
        if self._sock is not None:
            return self._sock
        self._pid = os.getpid()
        sock = socket.create_connection((self.url.host, self.url.port), timeout=self.timeout)
        sock.settimeout(self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        setup: list[list[Any]] = []
        if self.url.password is not None:
            setup.append(["AUTH", *([self.url.username] if self.url.username else []), self.url.password])
        if self.url.db:
            setup.append(["SELECT", self.url.db])
        if setup:
            sock.sendall(b"".join(_encode(c) for c in setup))
            for _ in setup:
                r = self._reply()
                if isinstance(r, RedisReplyError):
                    raise RemoteUnavailable(f"{self.url.display}: the server refused the connection set-up: {r}")
        return sock

    # ---- reading replies ----------------------------------------------------------------------
    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise EOFError("the server closed the connection")
        self._buf += chunk

    def _line(self) -> bytes:
        while True:
            i = self._buf.find(b"\r\n")
            if i >= 0:
                line, self._buf = self._buf[:i], self._buf[i + 2:]
                return line
            if len(self._buf) > 1 << 16:
                raise ValueError("a reply line longer than 64 KiB: not a Redis server")
            self._fill()

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n + 2:
            self._fill()
        data, self._buf = self._buf[:n], self._buf[n + 2:]
        return data

    def _reply(self) -> Any:
        line = self._line()
        if not line:
            raise ValueError("an empty reply line: not a Redis server")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode(errors="replace")
        if kind == b"-":
            return RedisReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            if n > MAX_BULK:
                raise ValueError(f"a reply of {n} bytes exceeds the bound of {MAX_BULK}")
            return self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"unexpected reply type {kind!r}: not a Redis server")
