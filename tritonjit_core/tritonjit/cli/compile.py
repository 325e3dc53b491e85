"""``tritonjit compile FILE.py:KERNEL --signature SIG``: the standalone compiler process.

Imports the kernel's file by path, compiles one variant with Triton's compiler into
Triton's persistent cache and prints where the artifact is. Runs without any device
when ``--target`` is given.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._output import emit_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compile", help="compile one kernel variant into the cache (no device needed with --target)")
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the file holding the kernel, and its name")
    p.add_argument("--signature", "-s", required=True,
                   help='libtriton_jit signature, e.g. "*fp32:16,*fp32:16,*fp32:16,i32,1024"')
    p.add_argument("--target", "-t", default=None,
                   help="BACKEND:ARCH, e.g. cuda:90, cuda:80, hip:gfx942 (default: the current device)")
    p.add_argument("--num-warps", "-w", type=int, default=4)
    p.add_argument("--num-stages", "-n", type=int, default=3)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def split_kernel_spec(spec: str) -> tuple[str, str]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"expected FILE.py:KERNEL, got '{spec}'")
    return path, name


def run(args: argparse.Namespace) -> int:
    import tritonjit
    from tritonjit._disk_cache import target_str

    path, name = split_kernel_spec(args.kernel)
    f = tritonjit.function(path, name)
    v = f.compile(args.signature, target=args.target, num_warps=args.num_warps, num_stages=args.num_stages)
    result = {
        "kernel": v.name,
        "signature": v.signature,
        "target": target_str(v.target),  # "cuda:90", as every other command writes it
        "hash": v.hash,
        "cache": v.cache_source,  # "compiled", "local" (the index) or "remote" (TRITONJIT_REMOTE_CACHE)
        "cache_dir": v.cache_dir,
        "binary": v.binary_path(),
        "metadata": {k: target_str(val) if k == "target" else val for k, val in v.metadata.items()
                     if k not in ("extern_libs",)},
    }
    if args.json:
        emit_json(result)
    else:
        print(f"{result['kernel']} [{result['signature']}] for {result['target']} ({result['cache']})")
        print(f"  artifact dir: {result['cache_dir']}")
        print(f"  binary:       {result['binary']}")
        print(f"  shared={v.metadata.get('shared')} num_warps={v.metadata.get('num_warps')} "
              f"num_stages={v.metadata.get('num_stages')}")
    return 0

