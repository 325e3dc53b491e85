"""``tritonjit info``: versions, backends with availability, devices, cache directory,
broken plugins (naming entry point and distribution) and plugins switched off with
``TRITONJIT_DISABLE_PLUGINS``. A plugin that raises, even SystemExit, never stops it."""

from __future__ import annotations

import argparse
import os
import platform
from importlib import metadata
from typing import Any

from ._output import emit_json, paragraph, table, terminal_width


def add_parser(sub: Any) -> None:
    p = sub.add_parser("info", help="versions, backends (and why unavailable), devices, cache dir")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def collect() -> dict[str, Any]:
    import tritonjit
    from tritonjit._disk_cache import target_str
    from tritonjit._registry import ENV_DISABLE, registry

    registry.discover()
    backends = []
    for b in tritonjit.backends():
        ok, why = b.is_available()
        entry: dict[str, Any] = {
            "name": b.name, "available": ok, "reason": why, "priority": b.info.priority,
            "distribution": b.dist, "version": _version(b.dist) if b.dist else None,
            "triton_backend": b.info.triton_backend, "binary": b.info.binary_ext,
            "warp_size": b.info.warp_size, "dispatch_key": b.info.dispatch_key, "devices": [],
        }
        if ok:
            try:
                n = b.device_count()
                for d in range(n):
                    tgt = b.compile_target(d, None)
                    entry["devices"].append({"index": d, "target": target_str(tgt)})
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a plugin must not break info, sys.exit() included
                entry["device_error"] = f"{type(exc).__name__}: {exc}"
        backends.append(entry)
    try:
        current = tritonjit.current_backend().name
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        current = f"none ({exc})"
    return {
        "tritonjit": tritonjit.__version__,
        "python": platform.python_version(),
        "triton": _version("triton"),
        "torch": _version("torch"),
        "active_backend": current,
        "backends": backends,
        "broken_plugins": [{"name": b.name, "distribution": b.dist, "entry_point": b.value, "reason": b.reason}
                           for b in registry.broken],
        "disable_plugins": os.environ.get(ENV_DISABLE, ""),
        "disabled_plugins": [{"name": d.name, "distribution": d.dist, "entry_point": d.value}
                             for d in registry.disabled],
        "cache_dir": cache_dir(),
        "remote_cache": remote_cache_status(),
        "native": native_status(),
    }


def native_status() -> dict[str, Any]:
    """The C launch path (the dispatcher, and the torch tensor reader it uses) and every
    torch-linked C++ helper: in use, prebuilt, built, or why it is missing (no compiler,
    a build that failed with its first line, switched off by an environment variable)."""
    from tritonjit import _native

    try:
        import torch  # noqa: F401 - the helpers are built against it
    except ImportError:
        pass
    from tritonjit._native import torch_reader

    reader = torch_reader.status() if _native.available() else "-"
    helpers = {torch_reader._module.name: reader if _native.available() else
               f"not used: it serves the native dispatcher, which is {_native.reason}"}
    helpers.update(_ops_helpers())
    return {"dispatcher": _native.reason, "torch_reader": reader, "helpers": helpers}


def _ops_helpers() -> dict[str, str]:
    """tritonjit_ops' helpers, where it is installed (importing it registers its operators)."""
    import importlib.util

    if importlib.util.find_spec("tritonjit_ops") is None:
        return {}
    try:
        from tritonjit_ops import _native_ops, _prologue
    except Exception as exc:  # a broken operator library must not break info
        return {"tritonjit_ops": f"not importable ({type(exc).__name__}: {exc})"}
    if not _prologue._enabled():
        off = "disabled by TRITONJIT_OPS_NATIVE=0 or TRITONJIT_NO_NATIVE=1"
        return {"tritonjit_ops._prologue_native": off, "tritonjit_ops._native_ops": off}
    return {m.name: m.status() for m in (_prologue.native(), _native_ops.native()) if m is not None}


def remote_cache_status() -> dict[str, Any] | None:
    """``TRITONJIT_REMOTE_CACHE`` and whether its server answers now (None when unset)."""
    from tritonjit import _remote_cache

    try:
        remote = _remote_cache.active()
    except ValueError as exc:  # a malformed URL or timeout
        return {"url": os.environ.get(_remote_cache.ENV_URL, ""), "reachable": False, "error": str(exc)}
    if remote is None:
        return None
    ok, why = remote.ping()
    out: dict[str, Any] = {"url": remote.url.display, "reachable": ok}
    if not ok:
        out["error"] = why
    return out


def cache_dir() -> str:
    """Triton's cache directory, where the artifacts live (TRITON_CACHE_DIR honoured)."""
    try:
        from triton import knobs

        return str(knobs.cache.dir)
    except Exception:
        return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


def run(args: argparse.Namespace) -> int:
    info = collect()
    if args.json:
        emit_json(info)
        return 0
    width = terminal_width()
    print(f"tritonjit {info['tritonjit']}  (python {info['python']}, triton {info['triton']}, torch {info['torch']})")
    print(paragraph(f"active backend: {info['active_backend']}", width))
    print(paragraph(f"cache dir: {info['cache_dir']}", width))
    remote = info["remote_cache"]
    if remote is None:
        print(paragraph("remote cache: none (TRITONJIT_REMOTE_CACHE unset)", width))
    else:
        state = "answers" if remote["reachable"] else f"not answering ({remote.get('error')})"
        print(paragraph(f"remote cache: {remote['url']}, {state}", width))
    print(paragraph(f"native dispatcher: {info['native']['dispatcher']}", width))
    for name, why in info["native"]["helpers"].items():
        print(paragraph(f"C++ helper {name}: {why}", width))
    print()
    rows = []
    for b in info["backends"]:
        devs = ", ".join(d["target"] for d in b["devices"]) or "-"
        rows.append([b["name"], "yes" if b["available"] else "no", b["priority"], b["distribution"] or "-", devs, b["reason"]])
    print(table(rows, ["backend", "available", "priority", "package", "devices", "details"], width=width))
    for b in info["broken_plugins"]:
        print("\n" + paragraph(f"broken plugin '{b['name']}' ({b['distribution']}, entry point {b['entry_point']}): "
                               f"{b['reason']}", width))
    if info["disable_plugins"]:
        off = ", ".join(f"{d['name']} ({d['distribution']})" for d in info["disabled_plugins"]) or "none installed"
        print("\n" + paragraph(f"TRITONJIT_DISABLE_PLUGINS={info['disable_plugins']}: not loaded: {off}", width))
    return 0
