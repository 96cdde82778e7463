#!/usr/bin/env bash
# test_adafactor.sh: --optimizer adafactor against an independent reference: test/ref_train.py runs the trainer's
# recipe on GPT-2 in float64 PyTorch with torch.optim.Adafactor's algorithm written in numpy (CI's torch 1.13
# predates it): relative step sizes, the decay, factored row and column means for each layer's matrices and the
# embeddings, unfactored vectors, the update's RMS clipped by d. The trainer runs through its CLI and is judged by its
# log and checkpoint: 8 steps' losses, norms and lrs, every tensor against its own size and against how far it moved,
# and Adafactor's packed state (the state file's m). The layouts (ZeRO-1 and ZeRO-3 on 2 ranks, --pp 2, --offload,
# the swap file; 3 ranks, as the reference's 3 micro-batches) against the same reference and one process; the plan equals the allocation; resume is bit for bit;
# another optimizer's state is refused naming it; --tp is refused (not yet); the emulated CUDA build equals this one.
source "$(dirname "$0")/lib.sh"
ref_start "Adafactor vs its reference" transformers

# measured (worst seen): loss 2.2e-8 relative, norm 1.2e-7, 14 of 16 tensors within 9e-8 of their own size and the
# state within 1e-6; ln2w 1.5e-6 of its size (one element whose gradient is rounding noise in float32: Adafactor's
# first step is sign(g) there), so the tensors are held at 5e-6 of their size and 1e-4 of their movement (7.7e-5 seen)
TOL=(--optimizer adafactor --tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-4 --tol-moment 1e-5 --tol-param-rel 5e-6)

G=ref_train.py
ref_make $G a8 --optimizer adafactor --steps 8 --grad-clip 1.3
# every arg away from its default: lr, beta2 decay, both eps, d and the decay
ref_make $G a8o --optimizer adafactor --steps 8 --grad-clip 1.3 --adafactor-lr 0.02 --adafactor-beta2-decay -0.5 \
  --adafactor-eps1 1e-6 --adafactor-eps2 1e-2 --adafactor-d 0.5 --adafactor-weight-decay 0.1 --seed 7
ref_against $G a8 "gpt2 adafactor" TOL $BIN -- --grad-accum 3
ref_against $G a8o "gpt2 adafactor, every arg set" TOL $BIN -- --grad-accum 3

# vs_one LABEL A B: two runs' logs (one process and a layout), every step's loss and norm within 2e-5 relative
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
run_of() { echo "a8.$(tr -c 'a-z0-9\n' _ <<<"$1")"; }
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

# the memory plan counts Adafactor's state (rows + cols per matrix, n per vector, as the slices cut them) and its
# three whole-unit buffers: allocated = planned, the swap file's bytes too
for label in "gpt2 adafactor" "${LAYOUTS[@]}"; do
  run=$(run_of "$label")
  [ -f "$W/$run.jsonl" ] || continue
  out=$($PY -c '
import json, sys
a = next(d["allocated"] for d in map(json.loads, open(sys.argv[1])) if "allocated" in d)
print(a["model_state_bytes"], a["planned_model_state_bytes"], a["swap_file_bytes"], a["planned_disk_bytes"])
sys.exit(a["model_state_bytes"] != a["planned_model_state_bytes"] or a["swap_file_bytes"] != a["planned_disk_bytes"])' "$W/$run.jsonl") \
    && ok "$label: Adafactor's model state allocated as planned ($out bytes)" || bad "$label: Adafactor's model state as planned" "$out"
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

# resume: 3 steps, then 3 more, is the uninterrupted 6 bit for bit (the state is in the state file); an AdamW run
# resumed from Adafactor's state, or the reverse, stops naming both, with nothing written
R=(-x 6 -u 2 -v 0 -s 0 --optimizer adafactor -e llama-d2 --grad-accum 2)
$BIN "${R[@]}" -o "$W/full" > "$W/full.out" 2>&1
$BIN "${R[@]}" --lr-steps 6 -x 3 -o "$W/part" > /dev/null 2>&1 && $BIN "${R[@]}" -o "$W/part" -y 1 > "$W/part.out" 2>&1
cmp -s "$W/full/model_00000006.bin" "$W/part/model_00000006.bin" && cmp -s "$W/full/state_00000006.bin" "$W/part/state_00000006.bin" \
  && ok "llama-d2 Adafactor resumed after 3 of 6 steps: the model and state files of the uninterrupted run, byte for byte" \
  || bad "Adafactor resumed after 3 of 6 steps equals the uninterrupted run" "$(tail -3 "$W/part.out")"
$BIN "${R[@]}" "${NV[@]}" --lr-steps 6 -x 3 -o "$W/nvp" > /dev/null 2>&1 && $BIN "${R[@]}" "${NV[@]}" -o "$W/nvp" -y 1 > "$W/nvp.out" 2>&1
cmp -s "$W/full/model_00000006.bin" "$W/nvp/model_00000006.bin" && cmp -s "$W/full/state_00000006.bin" "$W/nvp/state_00000006.bin" \
  && ok "Adafactor offloaded to nvme, resumed after 3 of 6 steps: the uninterrupted run's model and state files, byte for byte" \
  || bad "Adafactor offloaded to nvme and resumed equals the uninterrupted run" "$(tail -3 "$W/nvp.out")"
if have_mpi "an Adafactor checkpoint of 2 ranks at ZeRO-3 resumed in 1 process"; then
  "${MPI[@]}" -np 2 $BIN "${R[@]}" --grad-accum 1 --lr-steps 6 -x 3 -z 3 -o "$W/z3" > /dev/null 2>&1 && $BIN "${R[@]}" -o "$W/z3" -y 1 > "$W/z3.out" 2>&1
  out=$($PY - "$W/full/model_00000006.bin" "$W/z3/model_00000006.bin" <<'PYEOF'
import sys, numpy as np
a, b = (np.fromfile(p, dtype="<f4", offset=1024) for p in sys.argv[1:])
err = float(np.abs(a - b).max()); print(f"max parameter difference {err:.1e} (< 2e-5)"); sys.exit(0 if err < 2e-5 else 1)
PYEOF
  ) && ok "Adafactor checkpoint of 2 ranks at ZeRO-3 resumed in 1 process: $out" || bad "Adafactor ZeRO-3 checkpoint resumed in 1 process: $out" "$(tail -3 "$W/z3.out")"
fi
before=$(ls "$W/full" | tr '\n' ' ')
out=$($BIN "${R[@]}" -x 8 --optimizer adamw -o "$W/full" -y 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "saved by a run with --optimizer adafactor; this run has --optimizer adamw" <<<"$out" && [ "$(ls "$W/full" | tr '\n' ' ')" = "$before" ] \
  && ok "Adafactor's state resumed with --optimizer adamw: an error naming both, nothing written" \
  || bad "Adafactor's state resumed with --optimizer adamw is an error naming both" "$out"
$BIN -x 2 -v 0 -s 0 -e llama-d2 -o "$W/adam" > /dev/null 2>&1
out=$($BIN -x 4 -v 0 -s 0 -e llama-d2 --optimizer adafactor -o "$W/adam" -y 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "saved by a run with --optimizer adamw; this run has --optimizer adafactor" <<<"$out" \
  && ok "AdamW's state resumed with --optimizer adafactor: an error naming both" || bad "AdamW's state resumed with --optimizer adafactor is an error naming both" "$out"
out=$($BIN -e d2 --optimizer adafactor --tp 2 --dry-run --world 2 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "\-\-tp 2 with --optimizer adafactor: not yet" <<<"$out" \
  && ok "--tp 2 with --optimizer adafactor: refused, naming both" || bad "--tp with adafactor is refused" "$out"
out=$($BIN -e d2 --optimizer adafactor --adafactor-d 0 -x 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "\-\-adafactor-d" <<<"$out" && ok "--adafactor-d 0: an error naming the flag" || bad "--adafactor-d 0 is refused" "$out"

# the emulated CUDA build (fp32) runs Adafactor as this build does: the device store copies each unit to the host
if [ -x ./train_gpt_emu ]; then
  E=(-e llama-d2 -x 4 -u 1 -v 0 -s 0 -b 2 -t 32 --optimizer adafactor --adafactor-weight-decay 0.1)
  $BIN "${E[@]}" -o "$W/ecpu" --log "$W/ecpu.jsonl" > /dev/null 2>&1
  ./train_gpt_emu "${E[@]}" --precision fp32 -o "$W/eemu" --log "$W/eemu.jsonl" > "$W/eemu.out" 2>&1
  out=$($PY - "$W/ecpu" "$W/eemu" <<'PYEOF'
import json, sys, numpy as np
losses = [[d["loss"] for d in map(json.loads, open(p + ".jsonl")) if "loss" in d] for p in sys.argv[1:]]
a, b = (np.fromfile(p + "/model_00000004.bin", dtype="<f4", offset=1024) for p in sys.argv[1:])
el = max(abs(x - y) / abs(x) for x, y in zip(*losses)) if losses[0] and len(losses[0]) == len(losses[1]) else 1.0
ep = float(np.linalg.norm(a - b) / np.linalg.norm(a)) if a.size == b.size else 1.0
print(f"4 steps, losses within {el:.1e}, parameters {ep:.1e} (< 1e-5)"); sys.exit(0 if el < 1e-5 and ep < 1e-5 else 1)
PYEOF
  ) && ok "the emulated CUDA build's Adafactor (fp32) equals the CPU build's: $out" || bad "the emulated CUDA build's Adafactor equals the CPU build's: $out" "$(tail -3 "$W/eemu.out")"
else
  skip "the emulated CUDA build's Adafactor: ./train_gpt_emu is not built (make train_gpt_emu)"
fi

finish
