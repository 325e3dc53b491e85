"""Functions run in spawned processes by the cache tests (importable by name)."""

from __future__ import annotations

from typing import Any


def compile_once(path: str, signature: str, target: str, barrier: Any, out: Any) -> None:
    """Wait for the others, compile one variant, report (triton.compile calls, hash)."""
    import triton
    import tritonjit

    calls = []
    real = triton.compile

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    triton.compile = counting
    f = tritonjit.function(path, "axpy")
    barrier.wait()
    v = f.compile(signature, target=target)
    out.put((len(calls), v.hash))
