#!/usr/bin/env bash
# bench_levers.sh (make bench-levers): the step's levers of issue #23, each alone, on one GPU: GPT-2 124M
# (d12), B=16, T=1024, bf16, one micro-batch per step, the median ms/step after 3 warm-up steps. Each lever
# is an environment variable that train_gpt reads at start (cuda/matmul.cuh, cuda/classifier.cuh), so one
# binary times them all. BASE_BIN=path adds a row for another build (an earlier commit) at its defaults.
#
#   make bench-levers [STEPS=20] [BASE_BIN=...] [TP=2 [SP=0|1]]
#
# TP=N times every row at tensor parallelism: N ranks (N GPUs) under mpirun, train_gpt --tp N (and --sp SP where
# given), the same tokens per step; MPIRUN is the launcher and its flags (default mpirun).
#
# dev/gpu_session.sh sets BENCH_NO_BUILD=1 (train_gpt is there), BENCH_SHARD (the random shard it made once) and
# BENCH_LIMIT_TRAIN_GPT (seconds a run may take before it is stopped and its row says so; default 120).
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-20}
LIMIT=${BENCH_LIMIT_TRAIN_GPT:-120}
[ "${BENCH_NO_BUILD:-0}" = 1 ] || make -s train_gpt || exit 1
W=$(mktemp -d /tmp/bench_levers.XXXXXX)
trap 'rm -rf "$W"' EXIT
TP=${TP:-1}
case "$TP" in ''|*[!0-9]*|0) echo "bench_levers.sh: TP=$TP, expected a tensor-parallel degree >= 1" >&2; exit 2 ;; esac
LAUNCH=() TPF=()  # at TP > 1: mpirun -np TP, then env sets each row's variables on every rank
if [ "$TP" -gt 1 ]; then
    read -r -a LAUNCH <<< "${MPIRUN:-mpirun}"
    LAUNCH+=(-np "$TP") TPF=(--tp "$TP")
    if [ -n "${SP:-}" ]; then TPF+=(--sp "$SP"); fi
fi
SHARD=${BENCH_SHARD:-}
if [ -z "$SHARD" ] || [ ! -s "$SHARD" ]; then SHARD="$W/rand.bin"; python3 dev/rand_shard.py "$SHARD" || exit 1; fi

time_one() {  # label, binary, env assignments... (FLAGS="...": more train_gpt flags for this row)
    local label=$1 bin=$2; shift 2
    rm -f "$W/l.jsonl"
    timeout -k 5 "$LIMIT" "${LAUNCH[@]}" env "$@" "$bin" -i "$SHARD" -e "${MODEL:-d12}" -b 16 -t 1024 -x "$STEPS" -v 0 -s 0 \
        "${TPF[@]}" ${FLAGS:-} --log "$W/l.jsonl" > "$W/out" 2>&1
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "$label: stopped after its ${LIMIT} s limit"; return; fi
    if [ $rc -ne 0 ]; then echo "$label: failed: $(grep -m1 -iE 'error|out of' "$W/out")"; return; fi
    python3 - "$label" "$W/l.jsonl" <<'PYEOF'
import json, statistics, sys
ms = [d["ms"] for d in map(json.loads, open(sys.argv[2])) if "loss" in d and "ms" in d][3:]
print(f"{sys.argv[1]:<58} {statistics.median(ms):7.2f} ms/step  (min {min(ms):.2f}, {len(ms)} steps)")
PYEOF
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), train_gpt ${BENCH_REV:-$(git rev-parse --short HEAD 2>/dev/null)}"
echo "# d12 B=16 T=1024 bf16, one micro-batch per step$([ "$TP" -gt 1 ] && echo ", ${TPF[*]} on $TP GPUs"); defaults: BGRAD=1 GELU_FUSION=0 RESIDUAL_FUSION=0 CLASSIFIER_STAGED=1 GRAPHS=1 ATTN_BWD=2pass"
time_one "defaults" ./train_gpt
# the other attention backwards (the default is 2pass): early, so a short window times them
time_one "TRAIN_GPT_ATTN_BWD=v3 (attention backward v3)" ./train_gpt TRAIN_GPT_ATTN_BWD=v3
time_one "TRAIN_GPT_ATTN_BWD=fused (one kernel, turns on dQ)" ./train_gpt TRAIN_GPT_ATTN_BWD=fused
MODEL=llama-d12 time_one "llama-d12 TRAIN_GPT_ATTN_BWD=v3 (attention backward v3, GQA 4:1)" ./train_gpt TRAIN_GPT_ATTN_BWD=v3
# Muon (--optimizer muon): Newton-Schulz on the 2-D matrices each step, AdamW on the rest; its cost over AdamW's step
FLAGS="--optimizer muon" time_one "--optimizer muon (Newton-Schulz, 5 iterations a matrix)" ./train_gpt
time_one "TRAIN_GPT_BGRAD=0 (bias gradients by our kernel)" ./train_gpt TRAIN_GPT_BGRAD=0
time_one "TRAIN_GPT_GELU_FUSION=1 (GELU in cuBLASLt's epilogues)" ./train_gpt TRAIN_GPT_GELU_FUSION=1
time_one "TRAIN_GPT_RESIDUAL_FUSION=1 (residual add as beta=1)" ./train_gpt TRAIN_GPT_RESIDUAL_FUSION=1
time_one "TRAIN_GPT_CLASSIFIER_STAGED=0 (classifier row from global)" ./train_gpt TRAIN_GPT_CLASSIFIER_STAGED=0
time_one "TRAIN_GPT_GRAPHS=0 (forward and backward launched eagerly, not as CUDA graphs)" ./train_gpt TRAIN_GPT_GRAPHS=0
time_one "GELU_FUSION=1 RESIDUAL_FUSION=1" ./train_gpt TRAIN_GPT_GELU_FUSION=1 TRAIN_GPT_RESIDUAL_FUSION=1
time_one "defaults (again, for the spread)" ./train_gpt
if [ -n "${BASE_BIN:-}" ]; then  # its commit, where a file named rev beside it says (dev/gpu_session.sh prepare writes one)
    time_one "base build: $BASE_BIN$([ -f "$(dirname "$BASE_BIN")/rev" ] && echo " ($(cat "$(dirname "$BASE_BIN")/rev"))")" "$BASE_BIN"
fi
# the Llama family at d12 width (GQA 4:1, no QK-norm): RoPE as its own passes (the default since the H200 window of
# 2026-11-28) or inside attention's loads
MODEL=llama-d12 time_one "llama-d12 defaults (RoPE as its own passes)" ./train_gpt
MODEL=llama-d12 time_one "llama-d12 TRAIN_GPT_ROPE_IN_ATTENTION=1 (RoPE in attention's loads)" ./train_gpt TRAIN_GPT_ROPE_IN_ATTENTION=1
# Adafactor (--optimizer adafactor): factored second moments, each unit stepped on the host in one order (so every
# layout is one process); what that costs a GPU's step, beside AdamW's and Muon's (last: a
# host step may be slow, and the row's limit must not cost the others)
FLAGS="--optimizer adafactor" time_one "--optimizer adafactor (factored second moments, stepped on the host)" ./train_gpt
