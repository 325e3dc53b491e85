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
# WHEELS=DIR: test dependencies an offline GPU image lacks (expecttest, without which the
# OpInfo test skips), installed from wheels in DIR
if [[ -n "${WHEELS:-}" ]]; then
    python3 -m pip install -q --no-deps "$WHEELS"/*.whl >> "$out/install.log" 2>&1 || { tail -30 "$out/install.log"; exit 1; }
fi
python3 -c "import expecttest" 2>/dev/null || echo "note: expecttest is not installed: the OpInfo GPU test will skip (WHEELS=DIR)"
(cd /tmp && python3 -m tritonjit info) > "$out/info.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/info.txt" 2>&1
# STEPS="gpu_tests demo" runs only those steps
step() { local name=$1; shift; [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]] && return; echo "== $name"; timeout "${STEP_TIMEOUT:-400}" "$@" > "$out/$name.log" 2>&1; echo "rc=$? $(tail -1 "$out/$name.log")"; }
# the GPU tests in SHARDS processes at once (default 6: compiling is most of their time); the
# shards' logs follow one another in gpu_tests.log, their failures and the summaries first
gpu_tests() {
    local n=${SHARDS:-6} i rc=0 tmp ids
    tmp=$(mktemp -d)
    python3 -m pytest -q --collect-only -m gpu tests plugins/tritonjit-cuda -p no:cacheprovider 2>/dev/null \
        | grep '::' > "$tmp/ids"
    for i in $(seq 0 $((n - 1))); do
        mapfile -t ids < <(awk -v n="$n" -v i="$i" 'NR % n == i' "$tmp/ids")  # test ids may hold spaces
        # -m gpu: a GPU process (conftest.py: any other selection runs the CPU tests on the interpreter)
        timeout "${STEP_TIMEOUT:-400}" python3 -m pytest -q -rfEs -p no:cacheprovider -W ignore -m gpu "${ids[@]}" \
            > "$tmp/log$i" 2>&1 &
    done
    for i in $(seq 0 $((n - 1))); do wait -n || rc=1; done
    for i in $(seq 0 $((n - 1))); do echo "shard $i: $(tail -1 "$tmp/log$i")"; grep -E '^(FAILED|ERROR) ' "$tmp/log$i"; done
    for i in $(seq 0 $((n - 1))); do echo "==== shard $i"; cat "$tmp/log$i"; done
    rm -rf "$tmp"
    return $rc
}
if [[ -z "${STEPS:-}" || " $STEPS " == *" gpu_tests "* ]]; then
    echo "== gpu_tests"; gpu_tests > "$out/gpu_tests.log" 2>&1; echo "rc=$?"; grep -E '^(shard|FAILED|ERROR) ' "$out/gpu_tests.log"
fi
step demo python3 -m tritonjit demo
step bench_launch python3 -m tritonjit bench launch --json "$out/launch.json"
step bench_ops python3 -m tritonjit bench ops --json "$out/ops.json"
step bench_warmstart python3 -m tritonjit bench warmstart --json "$out/warmstart.json"
step bench_autotune python3 -m tritonjit bench autotune --json "$out/autotune.json"
step bench_warmup python3 -m tritonjit bench warmup --json "$out/warmup.json" --jobs 1,2,4,8,16 --variants 144
step bench_models python3 -m tritonjit bench models --json "$out/models.json"
step bench_models_amp python3 -m tritonjit bench models --amp bf16 --shapes train,prefill,decode --rounds 5 \
    --json "$out/models_amp.json"
step bench_audit python3 -m tritonjit bench audit --json "$out/audit.json"
step bench_attention python3 -m tritonjit bench attention --json "$out/attention.json"
step bench_grouped_mm python3 benchmarks/grouped_mm.py --json "$out/grouped_mm.json"
# the architectures benchmark at its host-bound size, then at one where the device is the cost
step architectures python3 benchmarks/architectures.py
STEP_TIMEOUT=${STEP_TIMEOUT_LARGE:-900} step architectures_large python3 benchmarks/architectures.py --hidden 1024 --layers 4 --batch 8 --tokens 512 \
    --image 128 --calls 3 --generate greedy
step bench_adamw python3 -m tritonjit bench adamw --json "$out/adamw.json"
# two GPUs or more: DDP, FSDP2, kernels beside NCCL collectives, device isolation, one compile per node
if [[ $(nvidia-smi -L 2>/dev/null | wc -l) -ge 2 ]]; then
    step distributed env NCCL_NVLS_ENABLE=0 python3 -m torch.distributed.run --nproc-per-node 2 \
        benchmarks/distributed.py --out "$out/dist"
fi
