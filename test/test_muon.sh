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
ref_start "Muon vs its reference" transformers

# measured (worst seen): loss 1.0e-7 relative, norm 1.6e-7, params 1.1e-5 of their movement, momentum 1.7e-6
TOL8=(--tol-loss 5e-5 --tol-norm 1e-5 --tol-param 5e-5 --tol-moment 1e-5)
# one step: AdamW's first step is m / sqrt(v), +-lr wherever a gradient is rounding noise (wte's rare rows), so
# the relative bound is loose there; Muon's tensors are held absolutely
TOL1=(--tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-3 --tol-moment 1e-5 --tol-param-abs 1e-6)

# reference SCRIPT NAME OPTIONS...: lib.sh's ref_make with --optimizer muon; against: lib.sh's ref_against
reference() { local script=$1 name=$2; shift 2; ref_make "$script" "$name" --optimizer muon "$@"; }
against() { ref_against "$@"; }

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

g8one="g8.$(run_tag "gpt2 muon")"; l8one="l8.$(run_tag "llama muon")"
if have_mpi "Muon on several ranks"; then
  # every matrix orthogonalised by one owner of 3 (or 2), the others' places zeroed, the sum handed back
  for z in 0 1 2 3; do
    against $G g8 "gpt2 muon, 3 ranks at ZeRO-$z" TOL8 "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z $z
    vs_one "gpt2 muon, 3 ranks at ZeRO-$z" "$g8one" "g8.$(run_tag "gpt2 muon, 3 ranks at ZeRO-$z")"
  done
  against $G g8 "gpt2 muon, offload optimizer at ZeRO-2" TOL8 "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z 2 --offload optimizer
  against $L l8 "llama muon, 2 ranks at ZeRO-3, offload params" TOL8 "${MPI[@]}" -np 2 $BIN -- --grad-accum 1 -z 3 --offload params
  against $L l8 "llama muon, 2 pipeline stages" TOL8 "${MPI[@]}" -np 2 $BIN -- --pp 2
  vs_one "llama muon, 2 pipeline stages" "$l8one" "l8.$(run_tag "llama muon, 2 pipeline stages")"
fi
against $L l8 "llama muon, offload optimizer" TOL8 $BIN -- --offload optimizer

# --tp: a TP rank holds a slice of each matrix (q, k, v and up, gate by rows, wo and wproj by columns); each matrix is
# gathered whole over the TP group, orthogonalised by one owner of the TP x data-parallel ranks and its slices handed
# back (orthogonalising each slice by itself moves the losses by ~1e-2). T = 33 is no multiple of the degree: --sp 0
if have_mpi "Muon with tensor parallelism"; then
  against $G g8 "gpt2 muon, --tp 2" TOL8 "${MPI[@]}" -np 2 $BIN -- --grad-accum 3 --tp 2 --sp 0
  vs_one "gpt2 muon, --tp 2" "$g8one" "g8.$(run_tag "gpt2 muon, --tp 2")"
  for z in 1 3; do
    label="llama muon, --tp 2 x 2 ranks at ZeRO-$z"
    against $L l8 "$label" TOL8 "${MPI[@]}" -np 4 $BIN -- --grad-accum 1 --tp 2 --sp 0 -z $z
    vs_one "$label" "$l8one" "l8.$(run_tag "$label")"
  done
  against $L l8 "llama muon, --tp 4 (2 ranks per key/value head)" TOL8 "${MPI[@]}" -np 4 $BIN -- --tp 4 --sp 0
  vs_one "llama muon, --tp 4 beyond the 2 key/value heads" "$l8one" "l8.$(run_tag "llama muon, --tp 4 (2 ranks per key/value head)")"
  against $L l8 "llama muon, --tp 2 x --pp 2" TOL8 "${MPI[@]}" -np 4 $BIN -- --tp 2 --sp 0 --pp 2
  vs_one "llama muon, --tp 2 x --pp 2" "$l8one" "l8.$(run_tag "llama muon, --tp 2 x --pp 2")"
  ranks_alloc "llama muon, --tp 2 x 2 ranks at ZeRO-3" "l8.$(run_tag "llama muon, --tp 2 x 2 ranks at ZeRO-3")" 4 --grad-accum 1 --tp 2 --sp 0 -z 3
  ranks_alloc "llama muon, --tp 4" "l8.$(run_tag "llama muon, --tp 4 (2 ranks per key/value head)")" 4 --tp 4 --sp 0
fi

# --offload-device nvme: Muon's momentum is streamed through the swap file's records as AdamW's state is (records of
# 4096 floats here, so a layer is several), the host runs Newton-Schulz: the host-memory offload's numbers bit for bit
# bitwise LABEL A B: two runs' logs (every step's loss and norm) and final model and state files byte for byte
bitwise() {
  local a="$W/$2" b="$W/$3"
  cmp -s <(grep -o '"loss": [^,]*, "lr": [^,]*, "norm": [^,]*' "$a.jsonl") <(grep -o '"loss": [^,]*, "lr": [^,]*, "norm": [^,]*' "$b.jsonl") \
    && [ "$(grep -c '"loss"' "$a.jsonl")" -gt 0 ] && cmp -s "$a/model_00000008.bin" "$b/model_00000008.bin" \
    && cmp -s "$a/state_00000008.bin" "$b/state_00000008.bin" \
    && ok "$1: $(grep -c '"loss"' "$a.jsonl") steps' losses and norms and the final model and state files byte for byte" \
    || bad "$1: bit for bit" "$(diff <(grep -o '"loss": [^,]*' "$a.jsonl") <(grep -o '"loss": [^,]*' "$b.jsonl") | head -4)"
}
NV=(--offload optimizer --offload-device nvme --nvme-path "$W" --nvme-buffer-mb 0.05)
against $L l8 "llama muon, offload optimizer to nvme" TOL8 $BIN -- "${NV[@]}"
bitwise "llama muon, nvme vs host memory" "l8.$(run_tag "llama muon, offload optimizer")" "l8.$(run_tag "llama muon, offload optimizer to nvme")"
if have_mpi "Muon offloaded to nvme on 3 ranks"; then
  against $G g8 "gpt2 muon, offload optimizer to nvme at ZeRO-2" TOL8 "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z 2 "${NV[@]}"
  bitwise "gpt2 muon, 3 ranks at ZeRO-2, nvme vs host memory" "g8.$(run_tag "gpt2 muon, offload optimizer at ZeRO-2")" \
    "g8.$(run_tag "gpt2 muon, offload optimizer to nvme at ZeRO-2")"
  # all of it at once: --tp 2 x 2 ranks at ZeRO-3, the parameters' shards and the momentum in the swap file
  label="llama muon, --tp 2 x 2 ranks at ZeRO-3, offload params to nvme"
  against $L l8 "$label" TOL8 "${MPI[@]}" -np 4 $BIN -- --grad-accum 1 --tp 2 --sp 0 -z 3 --offload params \
    --offload-device nvme --nvme-path "$W" --nvme-buffer-mb 0.05
  vs_one "$label" "$l8one" "l8.$(run_tag "$label")"
fi

# the memory plan counts Muon's state (one buffer per matrix: v leaves them out) and workspace: allocated = planned
for label in "l8:llama muon" "l8:llama muon, 2 ranks at ZeRO-3, offload params" "g8:gpt2 muon, 3 ranks at ZeRO-2" \
             "l8:llama muon, --tp 2 x 2 ranks at ZeRO-3" "l8:llama muon, --tp 4 (2 ranks per key/value head)" \
             "l8:llama muon, offload optimizer to nvme" "g8:gpt2 muon, offload optimizer to nvme at ZeRO-2" \
             "l8:llama muon, --tp 2 x 2 ranks at ZeRO-3, offload params to nvme"; do
  run="${label%%:*}.$(run_tag "${label#*:}")"
  [ -f "$W/$run.jsonl" ] && state_as_planned Muon "${label#*:}" "$run"
done

# the banner and the log's first line say which tensors each optimizer owns
grep -q "^optimizer: muon on each layer's q of wqkv, k of wqkv, v of wqkv, wo, up of wfc, gate of wfc, wproj (momentum 0.95 Nesterov, 5 Newton-Schulz steps, lr 0.003 adjusted by match_rms_adamw) | adamw on wte, attn_norm, mlp_norm, final_norm, lm_head$" "$W/$l8one.out" \
  && head -1 "$W/$l8one.jsonl" | grep -q '"optimizer": {"muon": "q of wqkv, k of wqkv, v of wqkv, wo, up of wfc, gate of wfc, wproj", "adamw": "wte, attn_norm, mlp_norm, final_norm, lm_head"' \
  && ok "the banner and the log's first line name Muon's matrices (q, k, v of wqkv; up, gate of wfc; wo, wproj) and AdamW's tensors" \
  || bad "the banner and the log's first line name what each optimizer owns" "$(grep optimizer "$W/$l8one.out"; head -1 "$W/$l8one.jsonl")"

# resume: 3 steps, then 3 more, is the uninterrupted 6 bit for bit (the momentum is in the state file), in memory
# and streamed through the swap file; an AdamW run resumed from Muon's state, or the reverse, stops naming both
optimizer_resume Muon muon -x 6 -u 2 -v 0 -s 0 --optimizer muon -e llama-d2 --grad-accum 2

finish
