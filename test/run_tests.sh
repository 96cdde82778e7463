#!/usr/bin/env bash
# run_tests.sh: every test that needs no GPU, as `make test` runs it. Each suite prints PASS/FAIL/SKIP
# lines and its own count; this adds them up and ends with the line CI reads: "N passed, N failed,
# N skipped". A test whose optional dependency is missing (PyTorch, tiktoken, Open MPI, matplotlib,
# nvcc, the data files, root and an installed Slurm stack) is a SKIP that names it and how to install it.
# `make test` installs nothing (Slurm's private daemons start only where the stack is already installed); it
# passes with skips, and .ci/run, which installs everything, fails on any. test/checks.txt lists how many
# checks each suite runs; a suite that runs another number fails (a part that silently stopped running).
# Inputs it uses when present: ../shared/data (GPT-2 tokenizer files, Tiny Shakespeare), or set
# DATA_DIR. PyTorch is the reference for the model; TORCH_PYTHON names the interpreter that has it.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
DATA=${DATA_DIR:-../shared/data}
W=$(mktemp -d /tmp/run_tests.XXXXXX)
trap 'rm -rf "$W"' EXIT
total_pass=0; total_fail=0; total_skip=0
# cpu_now: sets CPU to the CPU seconds (user + sys) of the processes this shell has waited for, from bash's `times` (its
# second line: the children's user and system time): a suite's cost on a busy machine, where its wall time is noise.
# `times` goes to a file, since in a $(...) it would run in a subshell of its own, with no children
cpu_now() {
  local f="$W/times.$BASHPID"  # (inside the $(...) below, $BASHPID is the subshell's)
  times > "$f"
  CPU=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } printf "%.1f", s }' "$f")
}
skip() { echo "SKIP $1"; total_skip=$((total_skip + 1)); }

# tally NAME OUT RC WALL CPU: adds up the counts of a suite that ran (its output in OUT, its exit status RC), says what
# it cost (wall and CPU seconds); a suite that died without printing its count is one failure
tally() {
  local name=$1 out=$2 rc=$3 wall=$4 cpu=$5
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$out" | tail -1)
  if [ -n "$line" ]; then
    local p f s; p=$(cut -d' ' -f1 <<<"$line"); f=$(cut -d' ' -f3 <<<"$line"); s=$(cut -s -d' ' -f5 <<<"$line")
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + ${s:-0}))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "FAIL $name exited $rc"; total_fail=$((total_fail + 1)); fi
    # the suite must run exactly the checks the manifest lists: fewer means a part silently did not run,
    # more means the manifest (and so the count CI reports) is stale. A suite with skips names them itself.
    local want; want=$(awk -F'\t' -v n="$name" '$2 == n { print $1 }' test/checks.txt)
    if [ -z "$want" ]; then
      echo "FAIL $name: not in test/checks.txt (add its number of checks)"; total_fail=$((total_fail + 1))
    elif [ "${s:-0}" -eq 0 ] && [ $((p + f)) -ne "$want" ]; then
      echo "FAIL $name ran $((p + f)) checks, test/checks.txt expects $want"; total_fail=$((total_fail + 1))
    elif [ "${s:-0}" -gt 0 ] && [ $((p + f)) -ne "$want" ]; then
      echo "NOTE $name ran $((p + f)) of its $want checks; the rest are the skips above"
    fi
  else
    echo "FAIL $name ended without a result (exit $rc)"; total_fail=$((total_fail + 1))
  fi
  echo "--- $name took $wall s ($cpu s of CPU)"
}

# run_suite NAME CMD...: runs a suite, echoes its output as it comes, adds its counts
run_suite() {
  local name=$1; shift
  echo "=== $name"
  local t0=$SECONDS c0; cpu_now; c0=$CPU
  "$@" 2>&1 | tee "$W/out"
  local rc=${PIPESTATUS[0]} c1; cpu_now; c1=$CPU
  tally "$name" "$W/out" "$rc" $((SECONDS - t0)) "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.0f", b - a }')"
}

# The queue: every suite that times nothing (no watchdog, timeout or kill), and the emulated CUDA build's programs, as
# jobs for two slots (CI's machine has 2 cores and most suites keep one busy: one process, OMP_NUM_THREADS=1). Each
# slot takes the next job not yet taken, in the order the jobs were queued (the longest first, so that the last ones
# to end are short and the slots end together); a job queued with --after MARK waits for the job that makes MARK (a
# build, queued before it). Each job's output goes to a file, shown whole, with its counts and cost, when it ends.
# Sharing the machine may slow a suite, never change what it checks.
q_names=(); q_cmds=(); q_after=(); q_build=()
# job [--after MARK] NAME CMD...: queues a suite
job() {
  local after=""
  if [ "$1" = --after ]; then after=$2; shift 2; fi
  q_names+=("$1"); shift
  q_after+=("$after"); q_build+=(""); q_cmds+=("$(printf '%q ' "$@")")
}
# build_job MARK NAME LOG TARGET...: queues a build of the emulated CUDA build's programs (emu_build), which makes
# MARK when it ends, built or not (the jobs after it skip or fail on what is missing); a failed build is one failure
build_job() {
  local mark=$1 name=$2; shift 2
  q_names+=("$name"); q_after+=(""); q_build+=("$mark"); q_cmds+=("$(printf '%q ' emu_build "$@")")
}
# run_job I: job I in this slot: its output to job$I.out, then "rc wall cpu" to job$I.res (CPU: user + system seconds
# of the processes it ran, from cpu_now in this slot's own shell)
run_job() {
  local i=$1 t0 c0 rc
  if [ -n "${q_after[$i]}" ]; then while [ ! -e "$W/${q_after[$i]}.done" ]; do sleep 1; done; fi
  t0=$SECONDS; cpu_now; c0=$CPU
  eval "${q_cmds[$i]}" > "$W/job$i.out" 2>&1; rc=$?
  cpu_now
  [ -z "${q_build[$i]}" ] || touch "$W/${q_build[$i]}.done"
  echo "$rc $((SECONDS - t0)) $(awk -v a="$c0" -v b="$CPU" 'BEGIN { printf "%.0f", b - a }')" > "$W/job$i.tmp"
  mv "$W/job$i.tmp" "$W/job$i.res"
}
# slot: takes jobs until none is left (mkdir is atomic: each job is taken by one slot)
slot() { local i; for i in "${!q_names[@]}"; do mkdir "$W/taken$i" 2>/dev/null && run_job "$i"; done; }
# run_queue: the two slots, and each job's report as it ends; a job whose slot died without a result is a failure
run_queue() {
  local pids=() shown=() left=${#q_names[@]} i rc wall cpu
  slot & pids+=($!)
  slot & pids+=($!)
  while [ "$left" -gt 0 ]; do
    local alive=0; kill -0 "${pids[@]}" 2>/dev/null && alive=1
    for i in "${!q_names[@]}"; do
      [ -z "${shown[$i]:-}" ] || continue
      if [ -e "$W/job$i.res" ]; then
        read -r rc wall cpu < "$W/job$i.res"
      elif [ "$alive" = 0 ] && ! kill -0 "${pids[0]}" 2>/dev/null && ! kill -0 "${pids[1]}" 2>/dev/null; then
        rc=1; wall=0; cpu=0; echo "(its slot ended without a result)" >> "$W/job$i.out"
      else continue; fi
      shown[$i]=1; left=$((left - 1))
      echo "=== ${q_names[$i]}"
      cat "$W/job$i.out" 2>/dev/null
      if [ -n "${q_build[$i]}" ]; then
        [ "$rc" -eq 0 ] || total_fail=$((total_fail + 1))
        echo "--- ${q_names[$i]} took $wall s ($cpu s of CPU)"
      else
        tally "${q_names[$i]}" "$W/job$i.out" "$rc" "$wall" "$cpu"
      fi
    done
    [ "$left" -eq 0 ] || sleep 1
  done
  wait "${pids[@]}"
  q_names=(); q_cmds=(); q_after=(); q_build=()
}

# emu_build LOG TARGET...: the emulated CUDA build's binaries (the Makefile's `test` passes TEST_EMU_KERNELS and
# TEST_EMU_TRAINER; empty without the CUDA headers, or when this runs alone), one compile at a time, the output kept
# in LOG for test_build.sh; a failure names the log's last lines
emu_build() {
  local log=$1; shift
  [ $# -gt 0 ] || return 0
  mkdir -p build
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory "$@" > "$log" 2>&1 && return 0
  echo "FAIL make $* (its output: $log)"; tail -20 "$log" | sed 's/^/    /'; return 1
}

HAVE_TORCH=""; "$TORCH_PY" -c "import torch" 2>/dev/null && HAVE_TORCH=1
HAVE_GPT2=""; [ -f "$DATA/gpt2_encoder.json" ] && [ -f "$DATA/gpt2_vocab.bpe" ] && HAVE_GPT2=1
HAVE_TEXT=""; [ -f "$DATA/tinyshakespeare.txt" ] && HAVE_TEXT=1
HAVE_CUDA_H=""; [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_bf16.h" ] && HAVE_CUDA_H=1
text_args=(); [ -n "$HAVE_TEXT" ] && text_args=(--text "$DATA/tinyshakespeare.txt")

# The quick suites first, one at a time (a few seconds each, and a broken build shows here at once)
run_suite "sizes of files and functions" "$PY" test/test_sizes.py
run_suite "layers and docs/layout.md" "$PY" test/test_layout.py
run_suite units ./test/test_units
run_suite "pipeline schedule and split" ./test/test_pipeline
run_suite "generation with the key/value cache" ./test/test_generate
run_suite "architecture tables (arch/arch.h, the families)" ./test/test_arch
if [ -n "$HAVE_TORCH" ]; then
  "$TORCH_PY" test/ref_gpt2.py --out-dir "$W/ref" > "$W/ref.log" 2>&1 || { cat "$W/ref.log"; }
  run_suite "model vs PyTorch" ./test/test_gpt2 "$W/ref"
  "$TORCH_PY" test/ref_llama.py --out-dir "$W/llama" > "$W/llama.log" 2>&1 || { cat "$W/llama.log"; }
  run_suite "Llama family: CPU kernels vs PyTorch" ./test/test_llama_cpu "$W/llama"
  run_suite "the trainer's Llama family vs transformers (logits, loss, every gradient)" "$TORCH_PY" test/test_llama_train.py
else
  skip "model vs PyTorch: $TORCH_PY cannot import torch (apt-get install python3-torch, or set TORCH_PYTHON to a Python that has it)"
fi
run_suite "precision and loss scaling" bash test/test_precision.sh

# Then the queue, the longest jobs first: the emulated CUDA build's two groups of programs (the trainer's, which the
# most suites wait for, first), each group's checks after it, then the rest by their cost (docs/testing.md has each)
if [ -n "$HAVE_CUDA_H" ]; then
  build_job emu-trainer "the emulated trainer's programs (TEST_EMU_TRAINER)" build/test-bins-emu.log ${TEST_EMU_TRAINER:-}
  build_job emu-kernels "the kernel checks' programs (TEST_EMU_KERNELS)" build/test-bins-emu-kernels.log ${TEST_EMU_KERNELS:-}
  job --after emu-trainer "CUDA build on the CPU emulator (dev/cuda/emu)" bash test/test_cuda_emu.sh trainer
  job --after emu-kernels "CUDA kernels on the CPU emulator (dev/cuda/emu)" bash test/test_cuda_emu.sh kernels
  emu=emu-trainer
else
  skip "CUDA build on the CPU emulator: no CUDA toolkit headers in ${CUDA_HOME:-/usr/local/cuda}/include (install NVIDIA's CUDA toolkit, or set CUDA_HOME to where it is; no GPU or nvcc needed)"
  emu=""
fi
after_emu=(); [ -n "$emu" ] && after_emu=(--after "$emu")
# builds in scratch copies (make -j2), and reads the emulated trainer's build log
job "${after_emu[@]}" "builds that follow the machine" bash test/test_build.sh
if command -v nvcc >/dev/null; then
  job "CUDA build without a GPU" bash test/test_cuda_build.sh
else
  skip "CUDA build: nvcc is not on the PATH (install NVIDIA's CUDA toolkit, 12 or newer, and put its bin/ on the PATH)"
fi
job "data parallel / ZeRO under mpirun" bash test/test_zero.sh
[ -n "$HAVE_TORCH" ] && job "${after_emu[@]}" "training runs vs PyTorch" bash test/test_reference.sh  # 3 ranks under mpirun
job "tensor parallelism under mpirun" bash test/test_tp.sh
[ -n "$HAVE_TORCH" ] && job "Muon vs its numpy reference" bash test/test_muon.sh
job "1F1B pipeline under mpirun" bash test/test_pipeline.sh
if [ -n "$HAVE_GPT2" ] && [ -n "$HAVE_TEXT" ]; then
  job "${after_emu[@]}" "multiple-choice evaluation (--eval-mc)" bash test/test_eval_mc.sh "$DATA"  # 2 ranks under mpirun
fi
[ -n "$HAVE_TORCH" ] && job "${after_emu[@]}" "Adafactor vs its numpy reference" bash test/test_adafactor.sh
if [ -n "$HAVE_GPT2" ]; then
  if [ -n "$HAVE_TEXT" ]; then
    job "tinyshakespeare script" bash test/test_scripts.sh "$DATA"
  else
    skip "tinyshakespeare script: no $DATA/tinyshakespeare.txt (set DATA_DIR to a directory with it)"
  fi
fi
# tokenizer.json (Hugging Face, byte-level BPE) against the tokenizers library; GPT-2's files and the text when present
json_args=()
[ -n "$HAVE_GPT2" ] && json_args=(--encoder "$DATA/gpt2_encoder.json" --merges "$DATA/gpt2_vocab.bpe")
[ -n "$HAVE_TEXT" ] && json_args+=(--text "$DATA/tinyshakespeare.txt")
[ -n "$HAVE_CUDA_H" ] && json_args+=(--train-gpt-emu ./train_gpt_emu)
job "${after_emu[@]}" "tokenizer.json vs tokenizers" "$TORCH_PY" test/test_tokenizer_json.py --tokenize ./tokenize --train-gpt ./train_gpt_cpu "${json_args[@]}"
job "headers that stand alone" bash test/test_headers.sh
job "${after_emu[@]}" "a cluster's plan without the cluster (--dry-run --world)" bash test/test_tp_plan.sh
job "Hugging Face Llama family (import, export, llm.c llama3 files)" "$TORCH_PY" test/test_hf_llama.py
if [ -n "$HAVE_GPT2" ] && [ -n "$HAVE_TEXT" ]; then
  job "${after_emu[@]}" "Hugging Face export and import" bash test/test_hf.sh "$DATA"
else
  skip "Hugging Face export and import, --eval-mc: no gpt2_encoder.json or tinyshakespeare.txt in $DATA (scripts/tinyshakespeare.sh downloads them into data/; then DATA_DIR=data make test)"
fi
job "${after_emu[@]}" "the Llama family at the command line (presets' counts and plan, bad input)" bash test/test_llama_cli.sh
if [ -n "$HAVE_GPT2" ]; then
  job "tokenizer vs tiktoken" "$PY" test/test_tokenizer.py --tokenize ./tokenize --encoder "$DATA/gpt2_encoder.json" \
    --merges "$DATA/gpt2_vocab.bpe" "${text_args[@]}"
fi
run_queue

# Alone, once the queue is done: the suites that time things (watchdogs, signals, kills, daemons)
if [ -n "$HAVE_GPT2" ]; then
  # its --resume checks kill a run part way
  run_suite "corpora to shards (tokenize shards, scripts/fineweb.py)" "$PY" test/test_shards.py --tokenize ./tokenize \
    --encoder "$DATA/gpt2_encoder.json" --merges "$DATA/gpt2_vocab.bpe" "${text_args[@]}"
else
  skip "tokenizer vs tiktoken and the tinyshakespeare script: no GPT-2 tokenizer files (gpt2_encoder.json, gpt2_vocab.bpe) in $DATA (scripts/tinyshakespeare.sh downloads them and the text into data/; then DATA_DIR=data make test)"
fi
run_suite "trainer CLI" bash test/test_cli.sh  # its watchdog and signal checks time things
run_suite "README vs the code" bash test/test_readme.sh
run_suite "ZeRO-Infinity: offload to NVMe" bash test/test_nvme.sh
run_suite "hangs, dead ranks, plots" bash test/test_cluster.sh
# The Slurm suites start daemons (munged, slurmctld, slurmd) and, for two nodes, network namespaces; they
# run only where the stack is installed, which `make test` never does itself: `make test-cluster` (as root)
# installs it, and .ci/run calls that before `make test`. Elsewhere they are SKIPs that say so.
source test/slurm_lib.sh
slurm_gate() {  # slurm_gate NAME: 0 when the Slurm suites may run here, else a SKIP naming why and how
  local missing
  if [ -n "${SKIP_SLURM:-}" ]; then skip "$1: SKIP_SLURM is set"; return 1; fi
  if [ "$(id -u)" -ne 0 ]; then skip "$1: needs root, to start munge and Slurm's daemons (CI runs as root; $SLURM_ENABLE)"; return 1; fi
  missing=$(slurm_missing)
  if [ -n "$missing" ]; then skip "$1: Slurm is not installed ($missing), and make test installs nothing; $SLURM_ENABLE"; return 1; fi
}
if slurm_gate "slurm sbatch, preemption, resubmission"; then
  run_suite "slurm sbatch, preemption, resubmission" bash test/test_slurm.sh
fi
# two simulated nodes in network namespaces (test/cluster.sh); it skips by itself, with the reason, where
# namespaces cannot be made (no CAP_NET_ADMIN, no bridge or veth in the kernel)
if slurm_gate "two-node Slurm: placement, ZeRO and pipelines across nodes, preemption"; then
  run_suite "two-node Slurm: placement, ZeRO and pipelines across nodes, preemption" bash test/test_multinode.sh
fi

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
