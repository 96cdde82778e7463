#!/usr/bin/env bash
# test_adafactor.sh: --optimizer adafactor against an independent reference: test/ref_train.py (GPT-2) and
# test/ref_train_llama.py (the Llama family: RMSNorm, SwiGLU, GQA 2:1, an untied head) run the trainer's recipe in
# float64 PyTorch with torch.optim.Adafactor's algorithm written in numpy (CI's torch 1.13 predates it): relative step
# sizes, the decay, factored row and column means for each layer's matrices and the embeddings, unfactored vectors,
# the update's RMS clipped by d, on the trainer's tensors (the Llama reference packs q, k, v and up, gate as the file
# does). The trainer runs through its CLI and is judged by its log and checkpoint: 8 steps' losses, norms and lrs,
# every tensor against its own size and against how far it moved, and Adafactor's packed state (the state file's m).
# The layouts (ZeRO-1 and ZeRO-3 on 2 ranks, --pp 2, --offload, the swap file; 3 ranks, as the GPT-2 reference's 3
# micro-batches; --tp 2 on GPT-2, --tp 2, --tp 2 x 2 ranks at ZeRO-1 and --tp 4 on the Llama model) against the same
# reference and one process; the plan equals the allocation (on every rank with --tp); resume is bit for bit, and a
# ZeRO-3 or --tp 2 checkpoint resumes in one process; another optimizer's state is refused naming it; the emulated
# CUDA build equals this one, in one process and at --tp 2.
source "$(dirname "$0")/lib.sh"
ref_start "Adafactor vs its reference" transformers

# measured (worst seen): loss 2.2e-8 relative, norm 1.2e-7, 15 of 16 tensors within 9e-8 of their own size and the
# state within 1e-6; ln2w 1.47e-6 of its size, all of it one element, layer 1's 23rd (the rest of ln2w: 8.2e-8). Its
# step-1 gradient is -3.7e-8, 3e-5 of the tensor's RMS gradient (1.1e-3): a float32 sum of terms ~1e-3 carries ~1e-10
# of rounding, ~0.5% of it. Its g^2 (1.4e-15) is under eps1^2 (1.4e-14), so U = g / eps1 (-0.31), proportional to g,
# and the element moves 1.6e-3 with that error in it: 2.4e-5, which the later steps (g 1e-4 and up) keep. That is
# float32's, not Adafactor's: the GPT-2 tensors are held at 5e-6 of their size (3.4x the 1.47e-6 it makes), 1e-4 of
# their movement (7.7e-5 seen); the Llama model, which has no such element, at 1e-6 (TOLL)
TOL=(--optimizer adafactor --tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-4 --tol-moment 1e-5 --tol-param-rel 5e-6)

# the Llama model (measured: loss 1.0e-7, norm 1.4e-7, every tensor within 8.8e-8 of its size and 4.4e-6 of its
# movement, the state 9.8e-7): its tensors held at 1e-6 of their size
TOLL=(--tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-4 --tol-moment 1e-5 --tol-param-rel 1e-6)

G=ref_train.py; L=ref_train_llama.py
ref_make $G a8 --optimizer adafactor --steps 8 --grad-clip 1.3
ref_make $L l8 --optimizer adafactor --steps 8 --grad-clip 1.45
# every arg away from its default: lr, beta2 decay, both eps, d and the decay
ref_make $G a8o --optimizer adafactor --steps 8 --grad-clip 1.3 --adafactor-lr 0.02 --adafactor-beta2-decay -0.5 \
  --adafactor-eps1 1e-6 --adafactor-eps2 1e-2 --adafactor-d 0.5 --adafactor-weight-decay 0.1 --seed 7
ref_against $G a8 "gpt2 adafactor" TOL $BIN -- --grad-accum 3
ref_against $G a8o "gpt2 adafactor, every arg set" TOL $BIN -- --grad-accum 3
ref_against $L l8 "llama adafactor" TOLL $BIN --

run_of() { echo "a8.$(run_tag "$1")"; }
NV=(--offload optimizer --offload-device nvme --nvme-path "$W" --nvme-buffer-mb 0.05)
ref_against $G a8 "gpt2 adafactor, offload optimizer" TOL $BIN -- --grad-accum 3 --offload optimizer
ref_against $G a8 "gpt2 adafactor, offload optimizer to nvme" TOL $BIN -- --grad-accum 3 "${NV[@]}"
LAYOUTS=("gpt2 adafactor, offload optimizer" "gpt2 adafactor, offload optimizer to nvme")
if have_mpi "Adafactor on several ranks"; then
  # 3 ranks, one micro-batch each: the reference's 3 (and shards that cut tensors at odd places)
  for z in 1 3; do
    ref_against $G a8 "gpt2 adafactor, 3 ranks at ZeRO-$z" TOL "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z $z
    LAYOUTS+=("gpt2 adafactor, 3 ranks at ZeRO-$z")
  done
  ref_against $G a8 "gpt2 adafactor, 3 ranks at ZeRO-3, offload params" TOL "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z 3 --offload params
  ref_against $G a8 "gpt2 adafactor, 3 ranks at ZeRO-2, offload optimizer to nvme" TOL "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z 2 "${NV[@]}"
  ref_against $G a8 "gpt2 adafactor, 2 pipeline stages" TOL "${MPI[@]}" -np 2 $BIN -- --pp 2
  LAYOUTS+=("gpt2 adafactor, 3 ranks at ZeRO-3, offload params" "gpt2 adafactor, 3 ranks at ZeRO-2, offload optimizer to nvme"
            "gpt2 adafactor, 2 pipeline stages")
fi
for label in "${LAYOUTS[@]}"; do vs_one "$label" "$(run_of "gpt2 adafactor")" "$(run_of "$label")"; done
# --tp: a TP rank holds a slice of each matrix; every TP rank's unit is gathered, the whole model's unit assembled and
# stepped as one process steps it, each rank keeping its runs (rows, columns, vocabulary rows, a key/value head's
# replicas). The reference's T = 33 is no multiple of the degree: --sp 0
TP_RUNS=()
if have_mpi "Adafactor with tensor parallelism"; then
  ref_against $G a8 "gpt2 adafactor, --tp 2" TOL "${MPI[@]}" -np 2 $BIN -- --grad-accum 3 --tp 2 --sp 0
  vs_one "gpt2 adafactor, --tp 2" "$(run_of "gpt2 adafactor")" "$(run_of "gpt2 adafactor, --tp 2")"
  ref_against $L l8 "llama adafactor, --tp 2" TOLL "${MPI[@]}" -np 2 $BIN -- --tp 2 --sp 0
  ref_against $L l8 "llama adafactor, --tp 2 x 2 ranks at ZeRO-1" TOLL "${MPI[@]}" -np 4 $BIN -- --grad-accum 1 --tp 2 --sp 0 -z 1
  ref_against $L l8 "llama adafactor, --tp 4 (2 ranks per key/value head)" TOLL "${MPI[@]}" -np 4 $BIN -- --tp 4 --sp 0
  for label in "llama adafactor, --tp 2" "llama adafactor, --tp 2 x 2 ranks at ZeRO-1" "llama adafactor, --tp 4 (2 ranks per key/value head)"; do
    vs_one "$label" "l8.$(run_tag "llama adafactor")" "l8.$(run_tag "$label")"
  done
  ranks_alloc "llama adafactor, --tp 2 x 2 ranks at ZeRO-1" "l8.$(run_tag "llama adafactor, --tp 2 x 2 ranks at ZeRO-1")" 4 --grad-accum 1 --tp 2 --sp 0 -z 1
  ranks_alloc "llama adafactor, --tp 4" "l8.$(run_tag "llama adafactor, --tp 4 (2 ranks per key/value head)")" 4 --tp 4 --sp 0
  LAYOUTS+=("gpt2 adafactor, --tp 2")
fi

# the memory plan counts Adafactor's state (rows + cols per matrix, n per vector, as the slices cut them) and its
# three whole-unit buffers: allocated = planned, the swap file's bytes too
for label in "gpt2 adafactor" "${LAYOUTS[@]}"; do
  run=$(run_of "$label")
  [ -f "$W/$run.jsonl" ] && state_as_planned Adafactor "$label" "$run"
done
# the plan's optimizer state is Adafactor's packed floats and buffers, counted by hand for d2 (C 128, L 2, padded
# vocabulary 128, maxT 1024): sum(rows + cols) over its matrices + sum(n) over its vectors + 3 x the widest unit
$BIN -e d2 --optimizer adafactor -x 1 -v 0 -s 0 -o "$W/plan" --log "$W/plan.jsonl" > "$W/plan.out" 2>&1
out=$($PY - "$W/plan.jsonl" <<'PYEOF'
import json, sys
C, L, Vp, T = 128, 2, 128, 1024
P = Vp * C + T * C + 2 * C + L * (12 * C * C + 13 * C)
outer = (Vp + C) + (T + C) + 2 * C                # wte, wpe: rows + cols; lnfw, lnfb: n
layer = 4 * C + (3 * C + C) + 3 * C + (C + C) + C + (4 * C + C) + 4 * C + (C + 4 * C) + C  # ln1/ln2, qkv, attproj, fc, fcproj
wide = max(Vp * C + T * C + 2 * C, 12 * C * C + 13 * C)
want = 4 * (2 * P + outer + L * layer + 3 * wide)   # params, grads, then Adafactor's
a = next(d["allocated"] for d in map(json.loads, open(sys.argv[1])) if "allocated" in d)
print(f"{a['planned_model_state_bytes']} planned, {a['model_state_bytes']} allocated, {want} by hand")
sys.exit(not a["planned_model_state_bytes"] == a["model_state_bytes"] == want)
PYEOF
) && ok "d2's plan is Adafactor's packed state and three whole-unit buffers, byte for byte: $out" || bad "d2's plan shows Adafactor's state" "$out"

# resume: 3 steps, then 3 more, is the uninterrupted 6 bit for bit (the state is in the state file), in memory and
# streamed through the swap file; an AdamW run resumed from Adafactor's state, or the reverse, stops naming both
R=(-x 6 -u 2 -v 0 -s 0 --optimizer adafactor -e llama-d2 --grad-accum 2)
optimizer_resume "llama-d2 Adafactor" adafactor "${R[@]}"
# with --tp the packed state is kept where one process keeps it: a --tp 2 checkpoint of 3 steps resumed in one
# process ends as the uninterrupted one-process run ($W/full, optimizer_resume's)
if have_mpi "an Adafactor checkpoint of --tp 2 resumed in 1 process"; then
  "${MPI[@]}" -np 2 $BIN "${R[@]}" --tp 2 --lr-steps 6 -x 3 -o "$W/tp2" > /dev/null 2>&1 && $BIN "${R[@]}" -o "$W/tp2" -y 1 > "$W/tp2.out" 2>&1
  out=$($PY - "$W/full" "$W/tp2" <<'PYEOF'
import sys, numpy as np
p = [np.fromfile(d + "/model_00000006.bin", dtype="<f4", offset=1024) for d in sys.argv[1:]]
s = [np.fromfile(d + "/state_00000006.bin", dtype="<f4", offset=1024) for d in sys.argv[1:]]
ep = float(np.abs(p[0] - p[1]).max()) if p[0].size == p[1].size else 1.0
es = float(np.linalg.norm(s[0] - s[1]) / np.linalg.norm(s[0])) if s[0].size == s[1].size else 1.0
print(f"max parameter difference {ep:.1e} (< 2e-5), state {es:.1e} of its size (< 1e-5)"); sys.exit(0 if ep < 2e-5 and es < 1e-5 else 1)
PYEOF
  ) && ok "Adafactor checkpoint of --tp 2 resumed in 1 process: $out" || bad "Adafactor --tp 2 checkpoint resumed in 1 process: $out" "$(tail -3 "$W/tp2.out")"
fi
out=$($BIN -e d2 --optimizer adafactor --adafactor-d 0 -x 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "\-\-adafactor-d" <<<"$out" && ok "--adafactor-d 0: an error naming the flag" || bad "--adafactor-d 0 is refused" "$out"

# the emulated CUDA build (fp32) runs Adafactor as this build does: the device store copies each unit to the host;
# at --tp 2 (2 ranks) the TP group's gathers run on the device's transport (NCCL's, emulated)
if [ -x ./train_gpt_emu ]; then
  E=(-e llama-d2 -x 4 -u 1 -v 0 -s 0 -b 2 -t 32 --optimizer adafactor --adafactor-weight-decay 0.1)
  $BIN "${E[@]}" -o "$W/ecpu" --log "$W/ecpu.jsonl" > /dev/null 2>&1
  emu_vs_cpu() {  # emu_vs_cpu LABEL RUN: $W/RUN's losses and final parameters against the CPU build's one process
    local out
    out=$($PY - "$W/ecpu" "$W/$2" <<'PYEOF'
import json, sys, numpy as np
losses = [[d["loss"] for d in map(json.loads, open(p + ".jsonl")) if "loss" in d] for p in sys.argv[1:]]
a, b = (np.fromfile(p + "/model_00000004.bin", dtype="<f4", offset=1024) for p in sys.argv[1:])
el = max(abs(x - y) / abs(x) for x, y in zip(*losses)) if losses[0] and len(losses[0]) == len(losses[1]) else 1.0
ep = float(np.linalg.norm(a - b) / np.linalg.norm(a)) if a.size == b.size else 1.0
print(f"4 steps, losses within {el:.1e}, parameters {ep:.1e} (< 1e-5)"); sys.exit(0 if el < 1e-5 and ep < 1e-5 else 1)
PYEOF
    ) && ok "$1 equals the CPU build's: $out" || bad "$1 equals the CPU build's: $out" "$(tail -3 "$W/$2.out")"
  }
  ./train_gpt_emu "${E[@]}" --precision fp32 -o "$W/eemu" --log "$W/eemu.jsonl" > "$W/eemu.out" 2>&1
  emu_vs_cpu "the emulated CUDA build's Adafactor (fp32)" eemu
  if have_mpi "the emulated CUDA build's Adafactor at --tp 2"; then
    "${MPI[@]}" -np 2 ./train_gpt_emu "${E[@]}" --precision fp32 --tp 2 -o "$W/eemu2" --log "$W/eemu2.jsonl" > "$W/eemu2.out" 2>&1
    emu_vs_cpu "the emulated CUDA build's Adafactor (fp32) at --tp 2" eemu2
  fi
else
  skip "the emulated CUDA build's Adafactor: ./train_gpt_emu is not built (make train_gpt_emu)"
fi

finish
