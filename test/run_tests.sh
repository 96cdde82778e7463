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

# beside NAME CMD...: queues a suite on the second lane, to run on the second core beside the suites run_suite runs;
# the second lane runs its suites one after another, in the order given (each waits for the one before it), and
# `gather` waits for all of them and reports them then (each one's output whole, its counts, its cost). CI's machine
# has 2 cores and most suites keep one busy (one process, OMP_NUM_THREADS=1), so this halves their wall time. Only for
# a suite whose checks do not time anything (no watchdog, no timeout, no kill): sharing the machine may slow it,
# never change what it checks.
bg_names=(); bg_pids=(); bg_seq=0
beside() {
  local name=$1 i=${#bg_names[@]} prev=$((bg_seq - 1)); shift
  bg_names+=("$name")
  ( while [ $prev -ge 0 ] && [ ! -e "$W/bg$prev.res" ]; do sleep 1; done
    t0=$SECONDS; "$@" > "$W/bg$bg_seq.out" 2>&1; rc=$?; cpu_now; echo "$rc $((SECONDS - t0)) $(printf %.0f "$CPU")" > "$W/bg$bg_seq.res" ) &
  bg_pids+=($!); bg_ids+=($bg_seq); bg_seq=$((bg_seq + 1))
}
gather() {
  local i id rc wall cpu
  for i in "${!bg_names[@]}"; do
    id=${bg_ids[$i]}
    wait "${bg_pids[$i]}"
    echo "=== ${bg_names[$i]}"
    echo "(ran beside the suites above)"
    cat "$W/bg$id.out"
    read -r rc wall cpu < "$W/bg$id.res" || { rc=1; wall=0; cpu=0; }
    tally "${bg_names[$i]}" "$W/bg$id.out" "$rc" "$wall" "$cpu"
  done
  bg_names=(); bg_pids=(); bg_ids=()
}
bg_ids=()

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
# after_emu_trainer CMD...: CMD once the first lane has built the emulated trainer's programs (or failed to), for the
# suites of the second lane that run ./train_gpt_emu beside the CPU build (they skip its checks where it is missing)
after_emu_trainer() {
  while [ ! -e "$W/emu-trainer.done" ]; do sleep 1; done
  "$@"
}
# the kernel checks of the emulated CUDA build (test_cuda_emu.sh kernels), after their programs are built
emu_kernels() {
  emu_build build/test-bins-emu-kernels.log ${TEST_EMU_KERNELS:-} || { echo "0 passed, 1 failed"; return 1; }
  bash test/test_cuda_emu.sh kernels
}

HAVE_TORCH=""; "$TORCH_PY" -c "import torch" 2>/dev/null && HAVE_TORCH=1
HAVE_GPT2=""; [ -f "$DATA/gpt2_encoder.json" ] && [ -f "$DATA/gpt2_vocab.bpe" ] && HAVE_GPT2=1
HAVE_TEXT=""; [ -f "$DATA/tinyshakespeare.txt" ] && HAVE_TEXT=1
text_args=(); [ -n "$HAVE_TEXT" ] && text_args=(--text "$DATA/tinyshakespeare.txt")

# The second lane: first the emulated CUDA build's kernel checks (their programs built first), then suites that need
# only the CPU build and run one process, none of which times anything
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_bf16.h" ]; then
  beside "CUDA kernels on the CPU emulator (dev/cuda/emu)" emu_kernels
else
  skip "CUDA build on the CPU emulator: no CUDA toolkit headers in ${CUDA_HOME:-/usr/local/cuda}/include (install NVIDIA's CUDA toolkit, or set CUDA_HOME to where it is; no GPU or nvcc needed)"
fi
beside "headers that stand alone" bash test/test_headers.sh
if command -v nvcc >/dev/null; then
  beside "CUDA build without a GPU" bash test/test_cuda_build.sh
else
  skip "CUDA build: nvcc is not on the PATH (install NVIDIA's CUDA toolkit, 12 or newer, and put its bin/ on the PATH)"
fi
beside "Hugging Face Llama family (import, export, llm.c llama3 files)" "$TORCH_PY" test/test_hf_llama.py
if [ -n "$HAVE_GPT2" ]; then
  beside "tokenizer vs tiktoken" "$PY" test/test_tokenizer.py --tokenize ./tokenize --encoder "$DATA/gpt2_encoder.json" \
    --merges "$DATA/gpt2_vocab.bpe" "${text_args[@]}"
  if [ -n "$HAVE_TEXT" ]; then
    beside "tinyshakespeare script" bash test/test_scripts.sh "$DATA"
  else
    skip "tinyshakespeare script: no $DATA/tinyshakespeare.txt (set DATA_DIR to a directory with it)"
  fi
fi
beside "a cluster's plan without the cluster (--dry-run --world)" bash test/test_tp_plan.sh
# and, once the first lane has built ./train_gpt_emu, the suites that run it beside the CPU build
if [ -n "$HAVE_TORCH" ]; then
  beside "training runs vs PyTorch" after_emu_trainer bash test/test_reference.sh  # 3 ranks under mpirun
fi
# tokenizer.json (Hugging Face, byte-level BPE) against the tokenizers library; GPT-2's files and the text when present
json_args=()
[ -n "$HAVE_GPT2" ] && json_args=(--encoder "$DATA/gpt2_encoder.json" --merges "$DATA/gpt2_vocab.bpe")
[ -n "$HAVE_TEXT" ] && json_args+=(--text "$DATA/tinyshakespeare.txt")
[ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_bf16.h" ] && json_args+=(--train-gpt-emu ./train_gpt_emu)
beside "tokenizer.json vs tokenizers" after_emu_trainer "$TORCH_PY" test/test_tokenizer_json.py --tokenize ./tokenize --train-gpt ./train_gpt_cpu "${json_args[@]}"
if [ -n "$HAVE_GPT2" ] && [ -n "$HAVE_TEXT" ]; then
  beside "Hugging Face export and import" after_emu_trainer bash test/test_hf.sh "$DATA"
  beside "multiple-choice evaluation (--eval-mc)" after_emu_trainer bash test/test_eval_mc.sh "$DATA"  # 2 ranks under mpirun
else
  skip "Hugging Face export and import, --eval-mc: no gpt2_encoder.json or tinyshakespeare.txt in $DATA (scripts/tinyshakespeare.sh downloads them into data/; then DATA_DIR=data make test)"
fi
beside "the Llama family at the command line (presets' counts and plan, bad input)" after_emu_trainer bash test/test_llama_cli.sh

# The first lane: the suites that need only the CPU build
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
  run_suite "Muon vs its numpy reference" bash test/test_muon.sh
else
  skip "model vs PyTorch: $TORCH_PY cannot import torch (apt-get install python3-torch, or set TORCH_PYTHON to a Python that has it)"
fi
run_suite "data parallel / ZeRO under mpirun" bash test/test_zero.sh
run_suite "1F1B pipeline under mpirun" bash test/test_pipeline.sh
run_suite "tensor parallelism under mpirun" bash test/test_tp.sh
run_suite "precision and loss scaling" bash test/test_precision.sh

# Then the emulated CUDA build's trainer (the second lane's last suites wait for it), and the suites that run it
if ! emu_build build/test-bins-emu.log ${TEST_EMU_TRAINER:-}; then total_fail=$((total_fail + 1)); fi
touch "$W/emu-trainer.done"
run_suite "builds that follow the machine" bash test/test_build.sh  # make -j2: both cores
if [ -n "$HAVE_TORCH" ]; then
  run_suite "Adafactor vs its numpy reference" bash test/test_adafactor.sh
fi
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_bf16.h" ]; then
  run_suite "CUDA build on the CPU emulator (dev/cuda/emu)" bash test/test_cuda_emu.sh trainer
fi
gather

# Alone, once the second lane is done: the suites that time things (watchdogs, signals, kills, daemons)
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
