#!/usr/bin/env bash
# test_cluster.sh: a multi-rank job never hangs silently. A rank that stops outside any collective
# is named by the watchdog and the job ends non-zero; a rank that is killed (by the fault hook,
# TRAIN_GPT_FAULT=die:RANK:STEP) takes the job down;
# the plot script draws a real log into a PNG. (Without mpirun or matplotlib, those parts SKIP.) The scripts that
# launch on what a machine may lack (scripts/run_node.sh: mpirun and ./train_gpt; scripts/lm_eval.sh: lm-eval,
# transformers, torch) name it in one line before doing anything, on every machine.
source "$(dirname "$0")/lib.sh"
run=(-e d2 -b 2 -t 32 -v 0 -s 0)

if have_mpi "hangs and dead ranks"; then
  # one rank stalls before the gradient reduction of step 4: the watchdog names it, every rank stops
  t0=$SECONDS
  out=$(TRAIN_GPT_FAULT=stall:2:4 timeout 60 "${MPI[@]}" -x TRAIN_GPT_FAULT -np 4 $BIN "${run[@]}" -x 100 --comm-timeout 3 2>&1); rc=$?
  took=$((SECONDS - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 30 ] && grep -q "watchdog: rank 2 has not reached collective" <<<"$out" \
     && grep -q "watchdog: rank [013] has waited .* inside collective" <<<"$out"; then
    ok "a stalled rank: the watchdog names rank 2 and where the others wait, the job exits $rc after ${took} s"
  else bad "watchdog names the stalled rank (rc $rc, ${took} s)" "$out"; fi

  # a rank killed mid-run takes the job down, and mpirun names it: the fault hook makes rank 2 SIGKILL itself
  # at the start of step 3 (no polling of the log, no pkill that could hit another job's processes)
  t0=$SECONDS
  TRAIN_GPT_FAULT=die:2:3 timeout 60 "${MPI[@]}" -x TRAIN_GPT_FAULT -np 4 $BIN "${run[@]}" -x 100000 --log "$W/kill.jsonl" > "$W/kill.out" 2>&1; rc=$?
  took=$((SECONDS - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "fault injection: rank 2 kills itself at step 3" "$W/kill.out" \
     && grep -qE "rank 2 .*(signal 9|Killed)" "$W/kill.out" && [ "$(grep -c '"loss"' "$W/kill.jsonl")" -eq 2 ]; then
    ok "rank 2 killed with SIGKILL at step 3: the job ends in ${took} s, exit $rc, mpirun names rank 2, the log stops after step 2"
  else bad "killed rank ends the job and is named (rc $rc, ${took} s)" "$(cat "$W/kill.out")"; fi
fi

# the plot script turns real logs into a PNG of sensible size
$BIN "${run[@]}" -x 30 -v 10 --log "$W/a.jsonl" > /dev/null 2>&1
$BIN "${run[@]}" -x 30 -v 10 -l 1e-3 --log "$W/b.jsonl" > /dev/null 2>&1
if have_matplotlib "plot_logs.py draws logs"; then
  out=$($PY scripts/plot_logs.py -o "$W/plot.png" "$W/a.jsonl" "$W/b.jsonl" --labels "lr 3e-3,lr 1e-3" 2>&1)
  dims=$($PY - "$W/plot.png" <<'PYEOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n' and d[12:16] == b'IHDR', "not a PNG"
w, h = struct.unpack('>II', d[16:24])
print(w, h, len(d))
PYEOF
  )
  set -- $dims
  if [ $# -eq 3 ] && [ "$1" -ge 600 ] && [ "$2" -ge 300 ] && [ "$3" -ge 10000 ]; then
    ok "plot_logs.py draws two real logs into a ${1}x${2} PNG of $3 bytes"; else bad "plot_logs.py makes a PNG" "$out $dims"; fi
  out=$($PY scripts/plot_logs.py "$W/a.jsonl" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -s "$W/a.png" ] && grep -q "wrote $W/a.png" <<<"$out" && ok "plot_logs.py without -o writes the PNG beside the log" \
    || bad "plot_logs.py default output" "$out"
fi
# a file that is not a log is named before matplotlib is needed
echo "not a log" > "$W/notalog.jsonl"
out=$($PY scripts/plot_logs.py -o "$W/x.png" "$W/notalog.jsonl" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "notalog.jsonl:1: not JSON" <<<"$out" && [ ! -e "$W/x.png" ] && ok "plot_logs.py names a file that is not a log" \
  || bad "plot_logs.py rejects a non-log" "$out"

# scripts/run_node.sh on a PATH without mpirun (only what the script runs before its check), then with an mpirun
# that must not be reached and no trainer binary: each says what is missing and how to get it (they once ended in
# "exec: mpirun: not found" and in mpirun's own error about the binary)
mkdir -p "$W/nompi" "$W/fakempi"
ln -s "$(command -v dirname)" "$W/nompi/dirname"
printf '#!/bin/sh\necho "mpirun reached" >&2; exit 9\n' > "$W/fakempi/mpirun"; chmod +x "$W/fakempi/mpirun"
out=$(PATH="$W/nompi" "$BASH" scripts/run_node.sh none -x 1 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$out" = "error: run_node.sh needs mpirun (apt-get install libopenmpi-dev openmpi-bin; make then builds the trainers with MPI)" ] \
  && ok "scripts/run_node.sh without mpirun: one line naming it and its packages" || bad "run_node.sh without mpirun (exit $rc)" "$out"
out=$(PATH="$W/fakempi:$W/nompi" TRAIN_BIN="$W/no_train_gpt" "$BASH" scripts/run_node.sh none -x 1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qF "error: run_node.sh: no $W/no_train_gpt (make train_gpt needs the CUDA toolkit's nvcc; TRAIN_BIN=./train_gpt_cpu" <<<"$out" \
  && ! grep -q "mpirun reached" <<<"$out" && ok "scripts/run_node.sh without its trainer binary: names it and how to build it, before mpirun" \
  || bad "run_node.sh without the binary (exit $rc)" "$out"
# scripts/lm_eval.sh with a Python that has no site-packages (-S), so neither lm-eval nor transformers nor torch
printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v "$PY")" > "$W/bare_python"; chmod +x "$W/bare_python"
echo '{"context": "a", "endings": [" b", " c"], "label": 0}' > "$W/set.jsonl"
out=$(PYTHON="$W/bare_python" bash scripts/lm_eval.sh "$W/no_model" "$W/set.jsonl" "$W/lm" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -qF "error: scripts/lm_eval.sh needs lm-eval, transformers and torch in $W/bare_python, which lacks: lm_eval transformers torch" <<<"$out" \
  && [ ! -e "$W/lm" ] && ok "scripts/lm_eval.sh without the harness: one line naming what the Python lacks, nothing written" \
  || bad "lm_eval.sh without lm-eval (exit $rc)" "$out"

finish
