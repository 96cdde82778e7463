#!/usr/bin/env bash
# test_muon.sh: --optimizer muon against an independent reference: test/ref_train.py (GPT-2) and
# test/ref_train_llama.py (the Llama family, GQA 2:1) run the trainer's recipe in float64 PyTorch with Muon written
# in numpy from torch.optim.Muon's definition (CI's torch predates torch.optim.Muon): momentum, Nesterov,
# Newton-Schulz on q, k and v apart (and up and gate apart), the decay with the unadjusted lr, the adjusted step;
# AdamW on the rest. The trainer runs through its CLI and is judged by its log and checkpoint: 8 steps' losses,
# norms and lrs, every tensor after 8 steps against how far it moved, Muon's momentum buffers (the state file's m),
# and after one step every parameter of Muon's tensors within 1e-6 absolute (3.9e-8 seen; the issue asks 1e-5,
# which a 1% error in a coefficient, ~2.5e-6 here, would pass). The layouts (ZeRO 0-3, --pp 2, --offload) against
# the same reference, and state files: resume bit for bit, the optimizer recorded and checked.
source "$(dirname "$0")/lib.sh"
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
if ! "$TORCH_PY" -c "import torch, transformers" 2>/dev/null; then
  skip "Muon vs its reference: $TORCH_PY cannot import torch and transformers (apt-get install python3-torch; pip install transformers)"
  finish; exit
fi
if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi

# measured (worst seen): loss 1.0e-7 relative, norm 1.6e-7, params 1.1e-5 of their movement, momentum 1.7e-6
TOL8=(--tol-loss 5e-5 --tol-norm 1e-5 --tol-param 5e-5 --tol-moment 1e-5)
# one step: AdamW's first step is m / sqrt(v), +-lr wherever a gradient is rounding noise (wte's rare rows), so
# the relative bound is loose there; Muon's tensors are held absolutely
TOL1=(--tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-3 --tol-moment 1e-5 --tol-param-abs 1e-6)

# reference SCRIPT NAME OPTIONS...: writes $W/NAME/{model.bin,train.bin,args,ref.npz}
reference() {
  local script=$1 name=$2; shift 2
  "$TORCH_PY" "test/$script" make --out-dir "$W/$name" --optimizer muon "$@" > "$W/$name.ref.out" 2>&1 \
    && ok "$(tail -1 "$W/$name.ref.out") (Muon)" || { bad "reference $name" "$(cat "$W/$name.ref.out")"; return 1; }
}
# against SCRIPT NAME LABEL TOL-ARRAY-NAME LAUNCH... -- FLAGS...
against() {
  local script=$1 name=$2 label=$3 tol=$4; shift 4
  local launch=() run="$W/$name.$(tr -c 'a-z0-9\n' _ <<<"$label")"
  [ -f "$W/$name/ref.npz" ] || { bad "$label: no reference to compare with"; return; }
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  mapfile -t args < "$W/$name/args"
  local tolv="$tol[@]"
  "${launch[@]}" "${args[@]}" "$@" --log "$run.jsonl" -o "$run" -n 1000 > "$run.out" 2>&1 \
    || { bad "$label: the run failed" "$(tail -5 "$run.out")"; return; }
  local out
  out=$("$TORCH_PY" "test/$script" compare --out-dir "$W/$name" --log "$run.jsonl" --ckpt-dir "$run" --label "$label: " "${!tolv}" 2>&1)
  while IFS= read -r line; do
    case "$line" in PASS\ *) ok "${line#PASS }" ;; FAIL\ *) bad "${line#FAIL }" ;; *) echo "$line" ;; esac
  done <<<"$out"
}

G=ref_train.py; L=ref_train_llama.py
reference $G g8 --steps 8 --grad-clip 1.3
reference $G g1 --steps 1 --grad-clip 0
# the other settings: plain momentum, Keller Jordan's lr adjustment, another mu, lr and step count
reference $G g8o --steps 8 --grad-clip 1.3 --muon-nesterov 0 --muon-lr-adjust original --muon-momentum 0.9 --muon-lr 0.02 --muon-ns-steps 4 --seed 7
reference $L l8 --steps 8 --grad-clip 1.45
reference $L l1 --steps 1 --grad-clip 0
against $G g8 "gpt2 muon" TOL8 $BIN -- --grad-accum 3
against $G g1 "gpt2 muon, one step" TOL1 $BIN -- --grad-accum 3
against $G g8o "gpt2 muon, Nesterov off, lr adjust original" TOL8 $BIN -- --grad-accum 3
against $L l8 "llama muon" TOL8 $BIN --
against $L l1 "llama muon, one step" TOL1 $BIN --

finish
