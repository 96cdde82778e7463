#!/usr/bin/env bash
# bench_busy.sh [BIN] [ENV=VALUE ...]: the default run's ms/step on an idle machine and beside one
# busy process (`yes`, which wants a whole core), as a laptop always has. Each figure is the median of
# three runs' averages (-x 40, no validation or sampling). With ENV=VALUE pairs the runs get those
# variables (e.g. OMP_WAIT_POLICY=active to see the spinning it replaces).
set -u
BIN=${1:-./train_gpt_cpu}; shift || true
run() { env "$@" "$BIN" -x 40 -v 0 -s 0 2>&1 | sed -nE 's/^average: ([0-9.]+) ms\/step.*/\1/p'; }
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
idle=$(median3 "$(run "$@")" "$(run "$@")" "$(run "$@")")
timeout 300 yes > /dev/null &
busy_pid=$!
sleep 0.5
busy=$(median3 "$(run "$@")" "$(run "$@")" "$(run "$@")")
kill "$busy_pid"; wait "$busy_pid" 2>/dev/null
echo "${*:-defaults}: idle ${idle} ms/step | beside one busy process ${busy} ms/step ($(nproc) cores)"
