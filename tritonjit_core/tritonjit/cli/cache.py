"""``tritonjit cache {list,stats,clear,export,import}``: the compiled-variant cache.

``export FILE`` writes the index entries and their artifacts to a bundle (tar.gz,
every file hashed); ``import FILE`` installs one on another machine of the same
target after checking all of it (structure, paths, sizes, hashes), all or nothing:
a tampered or malformed bundle is refused whole, with a message naming what is
wrong, and the caches are left as they were.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any

from ._output import emit_json, table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cache", help="list, inspect, clear, export and import compiled variants")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    a = actions.add_parser("list", help="every cached variant")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    a = actions.add_parser("stats", help="counts and sizes")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    a = actions.add_parser("clear", help="remove the index, the autotune store and the artifacts they point at "
                           "(exit 1 when something could not be removed)")
    a.add_argument("--index-only", action="store_true", help="keep the artifacts in Triton's cache")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    a = actions.add_parser("export", help="write cached variants to a bundle file")
    a.add_argument("file")
    a.add_argument("--kernel", default=None, help="only this kernel")
    a.add_argument("--target", default=None, help="only this target, e.g. cuda:90")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    a = actions.add_parser("import", help="install a bundle, all or nothing (checked whole first: paths, sizes, sha256)")
    a.add_argument("file")
    a.add_argument("--sha256", default=None, help="require this bundle digest (as printed by export)")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    p.set_defaults(func=run, action=None)


def run(args: argparse.Namespace) -> int:
    from .. import _bundle

    action = args.action or "stats"
    if action == "list":
        rows = _bundle.list_entries()
        if args.json:
            emit_json(rows)
            return 0
        if not rows:
            print("no cached variants")
            return 0
        print(table([[r["key"][:12], r.get("kernel", "-"), r.get("signature", "-"), r.get("target", "-"),
                      _opts(r.get("options")), r.get("bytes", "-"), _when(r.get("created")), r.get("problem") or "ok"]
                     for r in rows], ["key", "kernel", "signature", "target", "options", "bytes", "created", "state"]))
        return 0
    if action == "stats":
        s = _bundle.stats()
        if args.json:
            emit_json(s)
            return 0
        print(f"index:        {s['index_dir']}\ntriton cache: {s['triton_cache_dir']}\ntriton:       {s['triton']}")
        print(f"{s['entries']} variants of {s['kernels']} kernels, {s['bytes']} bytes; {s['broken']} broken; "
              f"{s['autotune_files']} autotune files")
        for t, n in sorted(s["by_target"].items()):
            print(f"  {t}: {n}")
        r = s["remote"]
        if r is None:
            print("remote cache: none (TRITONJIT_REMOTE_CACHE unset)")
        elif not r["reachable"]:
            print(f"remote cache: {r['url']}, not answering ({r.get('error')})")
        else:
            print(f"remote cache: {r['url']}: {r['hits']} hits, {r['misses']} misses, {r['stores']} stores, "
                  f"{r['compiles']} compiles, {r['rejected']} rejected (the fleet's, since the server started)")
        return 0
    if action == "clear":
        out = _bundle.clear(artifacts=not args.index_only)
        if args.json:
            emit_json(out)
        else:
            print(f"removed {out['entries']} index entries and {out['artifact_dirs']} artifact directories")
            for kept in out["not_removed"]:
                print(f"could not remove {kept['path']}: {kept['error']}", file=sys.stderr)
        return 1 if out["not_removed"] else 0
    if action == "export":
        exported = _bundle.export_bundle(args.file, kernel=args.kernel, target=args.target)
        if args.json:
            emit_json(exported.__dict__)
        else:
            print(f"wrote {exported.entries} variants ({exported.files} files, {exported.bytes} bytes) to "
                  f"{exported.path}")
            print(f"bundle sha256: {exported.sha256}")
            for skipped in exported.skipped:
                print(f"  skipped {skipped}")
        return 0
    if action == "import":
        imported = _bundle.import_bundle(args.file, expect_sha256=args.sha256)
        if args.json:
            emit_json(imported.__dict__)
        else:
            print(f"imported {imported.entries} variants ({imported.files} files); bundle sha256: {imported.sha256}")
            if not imported.triton_matches:
                print(f"warning: the bundle was made with Triton {imported.bundle_triton}; this machine has another "
                      "Triton build, so its variants will not be used here")
        return 0
    raise ValueError(f"unknown cache action '{action}'")


def _opts(options: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((options or {}).items())) or "-"


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")
