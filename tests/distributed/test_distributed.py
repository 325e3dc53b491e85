"""tritonjit under torchrun: benchmarks/distributed.py on two GPUs (gpu), and its code paths on
CPU (two gloo ranks through Triton's interpreter)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "distributed.py"


def _torchrun(out: Path, *extra: str, timeout: int) -> dict:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", OMP_NUM_THREADS="1")
    proc = subprocess.run([torchrun, "--nproc-per-node", "2", str(SCRIPT), "--out", str(out), *extra], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    summary = out / "distributed.json"
    assert summary.exists(), (proc.stdout[-3000:], proc.stderr[-5000:])
    result = json.loads(summary.read_text())
    brief = json.dumps({k: v for k, v in result.items() if k not in ("ranks", "isolation")}, indent=1)[-3000:]
    # a rank that fails after writing its results (at exit) shows only in torchrun's output
    assert proc.returncode == 0 and result["ok"], (f"torchrun exit status {proc.returncode}\n{brief}\n"
                                                   f"stderr:\n{proc.stderr[-6000:]}")
    return result


def test_two_cpu_ranks_interleave_kernels_and_collectives(tmp_path: Path) -> None:
    result = _torchrun(tmp_path, "--smoke", "--only", "cache,tp", timeout=300)
    assert result["tp"]["ok"] and result["cache"]["ok"]
    assert [r["rank"] for r in result["ranks"]] == [0, 1]


@pytest.mark.gpu
def test_two_gpus_ddp_fsdp2_tp_isolation_one_compile_per_node(tmp_path: Path) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    result = _torchrun(tmp_path, timeout=900)
    assert result["compiles"]["compiled_twice"] == 0 and sum(result["compiles"]["per_rank"]) > 0
    rank1 = result["cache"]["ranks"][1]
    assert rank1["compiled"] == 0 and set(rank1["sources"]) == {"local"} and rank1["devices"] == [1]
    for rank in result["isolation"].values():
        assert all(stage["ok"] for stage in rank.values()), rank
