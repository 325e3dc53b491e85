"""One process of a fleet, for the remote-cache tests (run as a script).

    python _fleet_worker.py KERNEL_FILE OUT_JSON SYNC_DIR NAME SIG [SIG ...]

Compiles each signature for cuda:90 (cross-compiled, no device) with its own local
caches (the caller sets TRITON_CACHE_DIR) and the shared TRITONJIT_REMOTE_CACHE.
Before the first variant it writes ``SYNC_DIR/ready-NAME`` and waits for
``SYNC_DIR/go``; before each later variant i it writes ``SYNC_DIR/done<i>-NAME`` and
waits for ``SYNC_DIR/go<i>`` when that gate is asked for (``SYNC_DIR/gate<i>``
exists), so a test can act between variants (kill the server). Writes what happened
as JSON: per variant the cache source and hash, triton.compile calls, warnings.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings


def wait_for(path: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path} after {limit} s")
        time.sleep(0.01)


def main() -> None:
    kernel_file, out, sync, name, *sigs = sys.argv[1:]
    import triton
    import tritonjit

    calls: list[int] = []
    real = triton.compile

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    triton.compile = counting
    f = tritonjit.function(kernel_file, "axpy")
    results = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        open(os.path.join(sync, f"ready-{name}"), "w").close()
        wait_for(os.path.join(sync, "go"))
        for i, sig in enumerate(sigs):
            if i:
                open(os.path.join(sync, f"done{i}-{name}"), "w").close()
                if os.path.exists(os.path.join(sync, f"gate{i}")):
                    wait_for(os.path.join(sync, f"go{i}"))
            t0 = time.perf_counter()
            v = f.compile(sig, target="cuda:90")
            results.append({"signature": sig, "cache": v.cache_source, "hash": v.hash,
                             "seconds": time.perf_counter() - t0})
    from tritonjit import _remote_cache

    with open(out, "w") as fh:
        json.dump({"results": results, "compiles": len(calls), "counts": _remote_cache.process_counts(),
                   "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}, fh)


if __name__ == "__main__":
    main()
