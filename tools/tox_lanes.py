"""Run tox envs a few at a time and free each env's directory once it passes.

Why: every env of the matrix carries its own torch and Triton (about 1.5 GB each), so
`tox -p 2 -e <all thirteen>` leaves some 20 GB on disk by its end, more than a small
CI machine has. Run through this, the matrix never holds more than `--parallel` envs
at once: the same envs, the same isolation (one plugin per env), a fraction of the
disk. Each env's output goes to a log file that is printed when the env fails.

    python tools/tox_lanes.py -m ci          # the envs of tox.ini's label `ci`
    python tools/tox_lanes.py -e cuda,lint   # named envs
    python tools/tox_lanes.py -m ci --keep   # keep the env directories (faster reruns)
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    env: str
    rc: int
    seconds: float
    log: Path


def _tox_command() -> list[str]:
    """tox of the interpreter running this script (the README's .venv)."""
    return [sys.executable, "-m", "tox"]


def env_dirs(selector: list[str]) -> dict[str, Path]:
    """Each selected env's directory, as tox itself resolves it (`tox config -k env_dir`)."""
    out = subprocess.run(
        [*_tox_command(), "config", *selector, "-k", "env_dir"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"tox_lanes: `tox config {' '.join(selector)}` failed:\n{out.stdout}{out.stderr}")
    dirs: dict[str, Path] = {}
    env = None
    for line in out.stdout.splitlines():
        head = re.fullmatch(r"\[testenv:(.+)\]", line.strip())
        if head:
            env = head.group(1)
        elif env and line.startswith("env_dir = "):
            dirs[env] = Path(line.split(" = ", 1)[1].strip())
    if not dirs:
        raise SystemExit(f"tox_lanes: no tox env matches {' '.join(selector)}")
    return dirs


def run_env(env: str, log_dir: Path) -> Result:
    log = log_dir / f"{env}.log"
    start = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.call([*_tox_command(), "run", "-e", env], cwd=ROOT, stdout=fh,
                             stderr=subprocess.STDOUT)
    return Result(env, rc, time.perf_counter() - start, log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run tox envs a few at a time, freeing each env's directory once it passes.")
    sel = ap.add_mutually_exclusive_group(required=True)
    sel.add_argument("-e", "--envs", help="comma-separated env names, as `tox -e` takes them")
    sel.add_argument("-m", "--label", help="a label of tox.ini's [tox] labels, e.g. ci")
    ap.add_argument("-p", "--parallel", type=int, default=2, metavar="N",
                    help="envs running at once (default 2; the disk holds at most N envs)")
    ap.add_argument("--keep", action="store_true",
                    help="keep every env's directory (reruns skip the installs; needs the disk)")
    ap.add_argument("--fail-fast", action="store_true", help="start no new env after a failure")
    args = ap.parse_args(argv)
    if args.parallel < 1:
        ap.error("--parallel must be at least 1")

    selector = ["-e", args.envs] if args.envs else ["-m", args.label]
    dirs = env_dirs(selector)
    log_dir = ROOT / ".tox" / "lanes-logs"
    log_dir.mkdir(parents=True, exist_ok=True)

    todo: queue.Queue[str] = queue.Queue()
    for env in dirs:
        todo.put(env)
    results: list[Result] = []
    lock = threading.Lock()
    failed = threading.Event()

    def lane() -> None:
        while not (args.fail_fast and failed.is_set()):
            try:
                env = todo.get_nowait()
            except queue.Empty:
                return
            res = run_env(env, log_dir)
            freed = ""
            if res.rc == 0 and not args.keep and dirs[env].is_dir():
                shutil.rmtree(dirs[env], ignore_errors=True)
                freed = ", env directory freed"
            with lock:
                results.append(res)
                state = "OK" if res.rc == 0 else f"FAIL (exit {res.rc})"
                print(f"{env}: {state} in {res.seconds:.1f} s{freed}", flush=True)
                if res.rc != 0:
                    failed.set()
                    print(f"---- {res.log.relative_to(ROOT)} ----", flush=True)
                    sys.stdout.write(res.log.read_text(errors="replace"))
                    print(f"---- end of {env} ----", flush=True)

    start = time.perf_counter()
    threads = [threading.Thread(target=lane, name=f"lane-{i}") for i in range(min(args.parallel, len(dirs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r.env for r in results if r.rc != 0]
    skipped = [e for e in dirs if e not in {r.env for r in results}]
    total = time.perf_counter() - start
    summary = f"{len(results) - len(bad)} of {len(dirs)} envs passed in {total:.0f} s"
    if bad:
        summary += f"; failed: {', '.join(bad)}"
    if skipped:
        summary += f"; not run (--fail-fast): {', '.join(skipped)}"
    print(summary, flush=True)
    return 1 if bad or skipped else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
