#!/usr/bin/env bash
# gpu_session.sh: what a lent GPU machine (the device tool: 10 minutes a call, 30 a session) runs, in the order that
# loses least if the time runs out: correctness first, then the figures. Three calls, each within 10 minutes:
#
#   bash dev/gpu_session.sh check    # build for the card; the attention check; make test-gpu; the attention bench and
#                                    # PyTorch's scaled_dot_product_attention at the same shapes
#   bash dev/gpu_session.sh bench    # make bench, with llm.c beside this trainer and PyTorch
#   bash dev/gpu_session.sh levers   # make bench-levers, with the base build's row
#
# Each step's output goes to a file of its own in $OUT (the device tool's folder that comes back; else
# dev/bench/session/) as it runs, and a line to summary.txt, so a call cut short still returns what was done. Each
# step has its own time limit: a hang (the attention backward's blocks taking turns, cuda/block_order.cuh, have not
# yet run on a GPU) costs that step, not the call. The device machine reaches nothing outside, so the ignored .bench/
# brings llm.c (LLMC_DIR), cudnn-frontend's headers, rev (this tree's commit, as the machine gets no .git: write it
# first, git rev-parse --short HEAD > .bench/rev) and base/ (an
# earlier tree, built for bench-levers' base row); carry it (carry: [".bench"]).
set -u
cd "$(dirname "$0")/.."
phase=${1:-}
case "$phase" in check|bench|levers) ;; *) echo "usage: bash dev/gpu_session.sh check|bench|levers (see the top of this file)" >&2; exit 2 ;; esac
dst=${OUT:-dev/bench/session}
mkdir -p "$dst"
export BENCH_REV=${BENCH_REV:-$(cat .bench/rev 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export NVCC_ARCH=${NVCC_ARCH:--gencode arch=compute_90a,code=sm_90a}
jobs=$(nproc)

step() {  # name, seconds, command...: runs it under a limit, its output to $dst/name.txt and a line to summary.txt
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    timeout -k 10 "$limit" "$@" > "$dst/$name.txt" 2>&1
    rc=$?
    local why="exit $rc"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="stopped after ${limit} s (a hang?)"
    echo "$name: $why, $((SECONDS - t0)) s, last line: $(tail -1 "$dst/$name.txt")" | tee -a "$dst/summary.txt"
}

nvidia-smi -L > "$dst/device.txt" 2>&1 || echo "no GPU (nvidia-smi -L failed)" > "$dst/device.txt"
echo "== $(date -u +%FT%TZ) phase $phase at $BENCH_REV on $(head -1 "$dst/device.txt")" | tee -a "$dst/summary.txt"
case "$phase" in
    check)
        step build 240 make -j"$jobs" train_gpt train_gpt_cpu test/test_gpt2_gpu test/test_generate_gpu dev/cuda/kernels dev/cuda/attention
        step attention_check 60 ./dev/cuda/attention check
        step test_gpu 180 make test-gpu
        step attention_bench 50 ./dev/cuda/attention bench
        step sdpa 50 python3 dev/bench_sdpa.py
        ;;
    bench)
        step build 150 make -j"$jobs" train_gpt dev/cuda/kernels dev/cuda/attention
        step bench 440 make bench LLMC_DIR=.bench/llm.c CUDNN_FRONTEND_PATH=.bench/cudnn-frontend/include
        cp dev/bench/bench_gpu_*.txt dev/bench/llmc_build.log "$dst/" 2>/dev/null
        ;;
    levers)
        step build 150 make -j"$jobs" train_gpt
        if [ -d .bench/base ] && [ ! -x .bench/base/train_gpt ]; then step base_build 200 make -C .bench/base -j"$jobs" train_gpt; fi
        base=(); [ -x .bench/base/train_gpt ] && base=(BASE_BIN=.bench/base/train_gpt)
        step levers 240 make bench-levers "${base[@]}"
        ;;
esac
