#!/usr/bin/env bash
# Every GPU test and benchmark in one go, on a CUDA machine with torch and triton
# already installed: installs the project without dependencies, then writes logs
# and JSON into the folder given (default ./gpu-results).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation ./tritonjit_core ./plugins/tritonjit-cuda ./operators \
    > "$out/install.log" 2>&1 || { tail -30 "$out/install.log"; exit 1; }
(cd /tmp && python3 -m tritonjit info) > "$out/info.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/info.txt" 2>&1
# STEPS="gpu_tests demo" runs only those steps
step() { local name=$1; shift; [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]] && return; echo "== $name"; timeout "${STEP_TIMEOUT:-400}" "$@" > "$out/$name.log" 2>&1; echo "rc=$? $(tail -1 "$out/$name.log")"; }
step gpu_tests python3 -m pytest -q -m gpu tests plugins/tritonjit-cuda -p no:cacheprovider -W ignore
step demo python3 -m tritonjit demo
step bench_launch python3 -m tritonjit bench launch --json "$out/launch.json"
step bench_ops python3 -m tritonjit bench ops --json "$out/ops.json"
step bench_warmstart python3 -m tritonjit bench warmstart --json "$out/warmstart.json"
step bench_autotune python3 -m tritonjit bench autotune --json "$out/autotune.json"
step bench_warmup python3 -m tritonjit bench warmup --json "$out/warmup.json" --jobs 1,2,4,8,16 --variants 144
step bench_models python3 -m tritonjit bench models --json "$out/models.json"
step bench_audit python3 -m tritonjit bench audit --json "$out/audit.json"
step bench_attention python3 -m tritonjit bench attention --json "$out/attention.json"
step bench_adamw python3 -m tritonjit bench adamw --json "$out/adamw.json"
# two GPUs or more: DDP, FSDP2, kernels beside NCCL collectives, device isolation, one compile per node
if [[ $(nvidia-smi -L 2>/dev/null | wc -l) -ge 2 ]]; then
    step distributed env NCCL_NVLS_ENABLE=0 python3 -m torch.distributed.run --nproc-per-node 2 \
        benchmarks/distributed.py --out "$out/dist"
fi
