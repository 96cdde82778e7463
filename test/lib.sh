# lib.sh: the start the shell suites share (sourced): the repo root, the CPU build, one
# OpenMP thread per rank, mpirun as it must be called here, a scratch directory removed on exit, and
# PASS/FAIL/SKIP counting that ends with the "N passed, N failed, N skipped" line run_tests.sh adds
# up. A test that lacks an optional dependency is a SKIP that names it and how to install it. Below: helpers a few
# suites share (MPI and matplotlib present, the runs against the PyTorch references, validation and samples).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=./train_gpt_cpu
PY=${PYTHON:-python3}
# the shared headers' folders below the root (docs/layout.md: the layers), for suites that copy or scan the sources
SHARED_DIRS="base arch backend parallel model optim zero train"
export OMP_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS)
W=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0; fail=0; skipped=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -8 | sed 's/^/    /'; fail=$((fail+1)); }
skip() { echo "SKIP $1"; skipped=$((skipped+1)); }
# mark NAME: prints the wall and CPU seconds (user + sys of the processes this shell has waited for: bash's `times`,
# written to a file, since in a $(...) it would run in a subshell with no children) since the previous mark
mark() {
  local f="$W/times.$BASHPID" c  # (inside the $(...) below, $BASHPID is the subshell's)
  times > "$f"
  c=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } printf "%.1f", s }' "$f")
  [ "$1" = start ] || echo "(cost of $1: $((SECONDS - MARK_T)) s, $(awk -v a="$MARK_C" -v b="$c" 'BEGIN { printf "%.0f", b - a }') s of CPU)"
  MARK_T=$SECONDS; MARK_C=$c
}
finish() { echo "$pass passed, $fail failed, $skipped skipped"; [ "$fail" -eq 0 ]; }
# have_mpi WHAT: whether WHAT can run under mpirun; if not, a SKIP that says what to install
have_mpi() {
  if ! command -v mpirun >/dev/null; then
    skip "$1: mpirun is not on the PATH (apt-get install libopenmpi-dev openmpi-bin; make then rebuilds ./train_gpt_cpu with MPI)"
    return 1
  fi
  if ! $BIN --help 2>/dev/null | grep -q "MPI: yes"; then
    skip "$1: ./train_gpt_cpu was built without MPI (apt-get install libopenmpi-dev for mpicc; make then rebuilds it)"
    return 1
  fi
}
# have_matplotlib WHAT: the same for the plots
have_matplotlib() {
  $PY -c "import matplotlib" 2>/dev/null && return 0
  skip "$1: $PY has no matplotlib (pip install matplotlib, or apt-get install python3-matplotlib)"
  return 1
}
# Training runs against test/ref_train.py or test/ref_train_llama.py, float64 PyTorch (test_reference.sh, test_muon.sh).
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
# ref_start WHAT [MODULE]: a SKIP that ends the suite where $TORCH_PY cannot import torch (and MODULE), a FAIL where
# ./train_gpt_cpu is not built
ref_start() {
  if ! "$TORCH_PY" -c "import torch${2:+, $2}" 2>/dev/null; then
    skip "$1: $TORCH_PY cannot import torch${2:+ and $2} (apt-get install python3-torch${2:+; pip install $2}, or set TORCH_PYTHON)"
    finish; exit
  fi
  if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi
}
# hf_start WHAT: the Hugging Face suites' start (test_hf.sh, test_eval_mc.sh): a SKIP that ends the suite where
# $TORCH_PY cannot import torch, transformers or safetensors
hf_start() {
  local m
  for m in torch transformers safetensors; do
    if ! "$TORCH_PY" -c "import $m" 2>/dev/null; then
      skip "$1: $TORCH_PY cannot import $m (.ci/run shows the pip install line)"; finish; exit
    fi
  done
}
# ref_make SCRIPT NAME OPTIONS...: test/SCRIPT writes $W/NAME/{model.bin,train.bin,args,ref.npz}; PASS with its summary
ref_make() {
  local script=$1 name=$2; shift 2
  "$TORCH_PY" "test/$script" make --out-dir "$W/$name" "$@" > "$W/$name.ref.out" 2>&1 \
    && ok "$(tail -1 "$W/$name.ref.out")" || { bad "reference $name" "$(cat "$W/$name.ref.out")"; return 1; }
}
# ref_against SCRIPT NAME LABEL TOL-ARRAY-NAME LAUNCH... -- FLAGS...: runs LAUNCH with the recipe's flags and FLAGS,
# then test/ref_compare.py compares its log and checkpoint with SCRIPT's reference within the tolerances of the array
# named (numpy alone: the reference's torch import, ~2 CPU s, is paid once per reference, not once per run)
ref_against() {
  local script=$1 name=$2 label=$3 tol=$4; shift 4
  local launch=() run="$W/$name.$(tr -c 'a-z0-9\n' _ <<<"$label")"
  [ -f "$W/$name/ref.npz" ] || { bad "$label: no reference to compare with"; return; }
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  mapfile -t args < "$W/$name/args"
  local tolv="$tol[@]"
  "${launch[@]}" "${args[@]}" "$@" --log "$run.jsonl" -o "$run" -n 1000 > "$run.out" 2>&1 \
    || { bad "$label: the run failed" "$(tail -5 "$run.out")"; return; }
  local out
  out=$("$TORCH_PY" test/ref_compare.py --out-dir "$W/$name" --log "$run.jsonl" --ckpt-dir "$run" --label "$label: " "${!tolv}" 2>&1)
  while IFS= read -r line; do
    case "$line" in PASS\ *) ok "${line#PASS }" ;; FAIL\ *) bad "${line#FAIL }" ;; *) echo "$line" ;; esac
  done <<<"$out"
}
# compare_eval REF.jsonl REF.out GOT.jsonl GOT.out [TOL]: what a layout logs besides its step lines, against
# one process: every validation loss (same steps, within TOL relative, 1e-5 unless given) and every sample
# on the console (the same text: a layout that breaks the forward, the key/value cache or the sampler's
# random stream draws other tokens). Prints the measured difference; exits 1 on a mismatch.
# dry_matches LABEL NP LOG ARGS... (test_tp.sh, test_pipeline.sh): allocation = plan across the cluster: what one process plans for the layout without
# starting it (--dry-run --world NP, each pipeline stage's ranks) is what every rank of the real run (its log LOG, ARGS
# its flags) allocated: model state, activations and workspace, and the samples' key/value cache, rank by rank
dry_matches() {
  local label=$1 np=$2 log=$3; shift 3
  local out; out=$($BIN "$@" --dry-run --world "$np" --log "$W/dry.jsonl" 2>&1) || { bad "$label: --dry-run --world $np" "$out"; return; }
  local r; r=$($PY - "$W/dry.jsonl" "$log" <<'PYEOF'
import json, sys
plans = [d["stage_plan"] for d in map(json.loads, open(sys.argv[1])) if "stage_plan" in d]
ranks = [d["allocated"]["ranks"] for d in map(json.loads, open(sys.argv[2])) if "allocated" in d][0]
wrong = []
for i, got in enumerate(ranks):
    s = [p for p in plans if p["first_rank"] <= i <= p["last_rank"]][0]
    want = [s["model_state_bytes"], s["activation_bytes"], s["kv_cache_bytes"]]
    if got != want: wrong.append(f"rank {i}: allocated {got}, planned {want}")
print("; ".join(wrong) or f"{len(ranks)} ranks allocate their stage's plan ({'; '.join(str(p['model_state_bytes']) + ' + ' + str(p['activation_bytes']) + ' bytes' for p in plans)})")
sys.exit(1 if wrong or len(ranks) != plans[-1]["last_rank"] + 1 else 0)
PYEOF
)
  [ $? -eq 0 ] && ok "$label: --dry-run --world $np in one process: $r" || bad "$label: --dry-run --world $np vs what each rank allocated" "$r"
}

compare_eval() { $PY - "$@" <<'PYEOF'
import json, sys
def V(p): return {d["step"]: d["val_loss"] for d in map(json.loads, open(p)) if "val_loss" in d}
def S(p): return [l.rstrip("\n") for l in open(p, errors="replace") if l.startswith("sample: ")]
a, b = V(sys.argv[1]), V(sys.argv[3])
sa, sb = S(sys.argv[2]), S(sys.argv[4])
tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
if not a or sorted(a) != sorted(b): print(f"validation steps differ: {sorted(a)} vs {sorted(b)}"); sys.exit(1)
if not sa: print("the reference printed no sample"); sys.exit(1)
err = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
msg = f"{len(a)} validation losses within {err:.1e} (< {tol:g}), {len(sb)} of {len(sa)} samples"
same = sa == sb
if not same: msg += f" differ (first: {next((x, y) for x, y in zip(sa + [''] * 9, sb + [''] * 9) if x != y)})"
else: msg += " identical"
print(msg)
sys.exit(0 if err < tol and same else 1)
PYEOF
}

# ---- what the optimizer suites (test_muon.sh, test_adafactor.sh) share
# vs_one LABEL A B: two runs' logs ($W/A.jsonl one process's, $W/B.jsonl a layout's), every step's loss and norm within
# 2e-5 relative
vs_one() {
  local out
  out=$($PY - "$W/$2.jsonl" "$W/$3.jsonl" <<'PYEOF'
import json, sys
def steps(p): return {d["step"]: d for d in map(json.loads, open(p)) if "loss" in d and "norm" in d}
a, b = steps(sys.argv[1]), steps(sys.argv[2])
if not a or sorted(a) != sorted(b): print(f"steps differ: {sorted(a)} vs {sorted(b)}"); sys.exit(1)
err = max(abs(a[s][k] - b[s][k]) / abs(a[s][k]) for s in a for k in ("loss", "norm"))
print(f"{len(a)} steps' losses and norms within {err:.1e} of one process's (< 2e-5)"); sys.exit(0 if err < 2e-5 else 1)
PYEOF
) && ok "$1: $out" || bad "$1: $out"
}
# run_tag TEXT: a label as ref_against names its run's files
run_tag() { tr -c 'a-z0-9\n' _ <<<"$1"; }
# state_as_planned NAME LABEL RUN: the run's ($W/RUN.jsonl) model state and swap file allocated as its plan says
state_as_planned() {
  local out
  out=$($PY -c '
import json, sys
a = next(d["allocated"] for d in map(json.loads, open(sys.argv[1])) if "allocated" in d)
print(a["model_state_bytes"], a["planned_model_state_bytes"], a["swap_file_bytes"], a["planned_disk_bytes"])
sys.exit(a["model_state_bytes"] != a["planned_model_state_bytes"] or a["swap_file_bytes"] != a["planned_disk_bytes"])' "$W/$3.jsonl") \
    && ok "$2: $1's model state allocated as planned ($out bytes)" || bad "$2: $1's model state as planned" "$out"
}
# ranks_alloc LABEL RUN NP FLAGS...: what one process plans for the layout (--dry-run --world NP, with the recipe's args
# of ref_make's $W/NAME, RUN's NAME before its first dot) is what each rank of $W/RUN.jsonl allocated
ranks_alloc() {
  local label=$1 run=$2 np=$3; shift 3
  mapfile -t args < "$W/${run%%.*}/args"
  $BIN "${args[@]}" "$@" --dry-run --world "$np" --log "$W/$run.dry.jsonl" > "$W/$run.dry.out" 2>&1 || { bad "$label: --dry-run --world $np" "$(tail -3 "$W/$run.dry.out")"; return; }
  local out; out=$($PY - "$W/$run.dry.jsonl" "$W/$run.jsonl" <<'PYEOF'
import json, sys
plans = [d["stage_plan"] for d in map(json.loads, open(sys.argv[1])) if "stage_plan" in d]
ranks = [d["allocated"]["ranks"] for d in map(json.loads, open(sys.argv[2])) if "allocated" in d][0]
bad = [f"rank {i}: {got[0]} vs {p['model_state_bytes']}" for i, got in enumerate(ranks)
       for p in plans if p["first_rank"] <= i <= p["last_rank"] and got[0] != p["model_state_bytes"]]
print("; ".join(bad) or f"{len(ranks)} ranks' model state as --dry-run --world {len(ranks)} plans it: " + ", ".join(str(r[0]) for r in ranks))
sys.exit(1 if bad or len(ranks) != plans[-1]["last_rank"] + 1 else 0)
PYEOF
) && ok "$label: $out" || bad "$label: allocated vs --dry-run --world $np" "$out"
}
# optimizer_resume NAME OPT FLAGS...: an optimizer's state in checkpoints (FLAGS: a 6-step run of --optimizer OPT,
# -v 0 -s 0). 3 steps then 3 more equal the uninterrupted 6 byte for byte (model and state files), in memory and
# offloaded to nvme; 2 ranks at ZeRO-3 resumed in 1 process within 2e-5; an AdamW run resumed from OPT's state, or
# the reverse, stops naming both, writing nothing. 5 checks (4 without mpirun).
optimizer_resume() {
  local name=$1 opt=$2; shift 2
  local R=("$@") nv=(--offload optimizer --offload-device nvme --nvme-path "$W" --nvme-buffer-mb 0.05) out rc
  $BIN "${R[@]}" -o "$W/full" > "$W/full.out" 2>&1
  $BIN "${R[@]}" --lr-steps 6 -x 3 -o "$W/part" > /dev/null 2>&1 && $BIN "${R[@]}" -o "$W/part" -y 1 > "$W/part.out" 2>&1
  cmp -s "$W/full/model_00000006.bin" "$W/part/model_00000006.bin" && cmp -s "$W/full/state_00000006.bin" "$W/part/state_00000006.bin" \
    && ok "$name resumed after 3 of 6 steps: the model and state files of the uninterrupted run, byte for byte" \
    || bad "$name resumed after 3 of 6 steps equals the uninterrupted run" "$(tail -3 "$W/part.out")"
  $BIN "${R[@]}" "${nv[@]}" --lr-steps 6 -x 3 -o "$W/nvp" > /dev/null 2>&1 && $BIN "${R[@]}" "${nv[@]}" -o "$W/nvp" -y 1 > "$W/nvp.out" 2>&1
  cmp -s "$W/full/model_00000006.bin" "$W/nvp/model_00000006.bin" && cmp -s "$W/full/state_00000006.bin" "$W/nvp/state_00000006.bin" \
    && ok "$name offloaded to nvme, resumed after 3 of 6 steps: the uninterrupted run's model and state files, byte for byte" \
    || bad "$name offloaded to nvme and resumed equals the uninterrupted run" "$(tail -3 "$W/nvp.out")"
  if have_mpi "a $name checkpoint of 2 ranks at ZeRO-3 resumed in 1 process"; then
    "${MPI[@]}" -np 2 $BIN "${R[@]}" --grad-accum 1 --lr-steps 6 -x 3 -z 3 -o "$W/z3" > /dev/null 2>&1 && $BIN "${R[@]}" -o "$W/z3" -y 1 > "$W/z3.out" 2>&1
    out=$($PY - "$W/full/model_00000006.bin" "$W/z3/model_00000006.bin" <<'PYEOF'
import sys, numpy as np
a, b = (np.fromfile(p, dtype="<f4", offset=1024) for p in sys.argv[1:])
err = float(np.abs(a - b).max()); print(f"max parameter difference {err:.1e} (< 2e-5)"); sys.exit(0 if err < 2e-5 else 1)
PYEOF
    ) && ok "$name checkpoint of 2 ranks at ZeRO-3 resumed in 1 process: $out" || bad "$name ZeRO-3 checkpoint resumed in 1 process: $out" "$(tail -3 "$W/z3.out")"
  fi
  local before; before=$(ls "$W/full" | tr '\n' ' ')
  out=$($BIN "${R[@]}" -x 8 --optimizer adamw -o "$W/full" -y 1 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "saved by a run with --optimizer $opt; this run has --optimizer adamw" <<<"$out" && [ "$(ls "$W/full" | tr '\n' ' ')" = "$before" ] \
    && ok "$name's state resumed with --optimizer adamw: an error naming both, nothing written" \
    || bad "$name's state resumed with --optimizer adamw is an error naming both" "$out"
  $BIN -x 2 -v 0 -s 0 -e llama-d2 -o "$W/adam" > /dev/null 2>&1
  out=$($BIN -x 4 -v 0 -s 0 -e llama-d2 --optimizer "$opt" -o "$W/adam" -y 1 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "saved by a run with --optimizer adamw; this run has --optimizer $opt" <<<"$out" \
    && ok "AdamW's state resumed with --optimizer $opt: an error naming both" || bad "AdamW's state resumed with --optimizer $opt is an error naming both" "$out"
}
