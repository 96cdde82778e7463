#!/usr/bin/env bash
# test_reference.sh: whole training runs against an independent float64 PyTorch reference (test/ref_train.py).
# The reference runs the trainer's recipe (data order, accumulation, norm, clipping, warmup and decay, AdamW
# with its decay mask) from the same model file and tokens; the trainer runs through its normal CLI and is
# judged by its JSON log and its checkpoint: per-step loss, gradient norm and lr, and every parameter and
# AdamW-moment tensor within its own bound. Two shapes cover the code paths a small test misses: C = 128
# (matmuls with K = 512 > 256), T = 33 and 41 (no tile divides them), head sizes 32 and 64, B*T = 99 and 82
# (no block divides them), clipping that clips on some steps and not others, cosine and linear decay.
# Runs: the CPU build (1 process; 3 ranks at ZeRO-2; 2 pipeline stages), and, where it is built, the CUDA
# build on the CPU emulator in fp32 (tolerances as tight as the CPU build's) and in bf16 and fp16 (loose).
source "$(dirname "$0")/lib.sh"
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
if ! "$TORCH_PY" -c "import torch" 2>/dev/null; then
  skip "training runs vs PyTorch: $TORCH_PY cannot import torch (apt-get install python3-torch, or set TORCH_PYTHON)"
  finish; exit
fi
if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi

# tolerances, measured (worst seen): fp32 loss 4e-8, norm 2e-7, params 1.2e-5 of their movement, first
# moments 1.2e-6; bf16 1.6e-4, 1.5e-3, 5e-2, 1.7e-2; fp16 2.1e-5, 1.2e-4, 1e-2, 3e-3
TOL_FP32=(--tol-loss 1e-6 --tol-norm 1e-5 --tol-param 1e-4 --tol-moment 1e-5)
TOL_BF16=(--tol-loss 1e-3 --tol-norm 5e-3 --tol-param 0.15 --tol-moment 0.05)
TOL_FP16=(--tol-loss 2e-4 --tol-norm 1e-3 --tol-param 0.03 --tol-moment 0.01)

# reference NAME OPTIONS...: writes $W/NAME/{model.bin,train.bin,args,ref.npz}
reference() {
  local name=$1; shift
  "$TORCH_PY" test/ref_train.py make --out-dir "$W/$name" "$@" > "$W/$name.ref.out" 2>&1 \
    && ok "$(cat "$W/$name.ref.out")" || { bad "reference $name" "$(cat "$W/$name.ref.out")"; return 1; }
}
# against NAME LABEL TOL-ARRAY-NAME LAUNCH... -- FLAGS...: runs LAUNCH with the recipe's flags and FLAGS, then compares
against() {
  local name=$1 label=$2 tol=$3; shift 3
  local launch=() run="$W/$name.$(tr -c 'a-z0-9\n' _ <<<"$label")"
  [ -f "$W/$name/ref.npz" ] || { bad "$label: no reference to compare with"; return; }
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  mapfile -t args < "$W/$name/args"
  local tolv="$tol[@]"
  "${launch[@]}" "${args[@]}" "$@" --log "$run.jsonl" -o "$run" -n 1000 > "$run.out" 2>&1 \
    || { bad "$label: the run failed" "$(tail -5 "$run.out")"; return; }
  local out
  out=$("$TORCH_PY" test/ref_train.py compare --out-dir "$W/$name" --log "$run.jsonl" --ckpt-dir "$run" --label "$label: " "${!tolv}" 2>&1)
  while IFS= read -r line; do
    case "$line" in PASS\ *) ok "${line#PASS }" ;; FAIL\ *) bad "${line#FAIL }" ;; *) echo "$line" ;; esac
  done <<<"$out"
}

reference h32 --channels 128 --heads 4 --batch 3 --seq 33 --accum 3 --steps 8 --warmup 2 --schedule cosine --grad-clip 1.0
reference h64 --channels 128 --heads 2 --batch 2 --seq 41 --accum 2 --steps 7 --warmup 3 --schedule linear --grad-clip 1.2 --seed 7
against h32 "cpu, head size 32" TOL_FP32 $BIN -- --grad-accum 3
against h64 "cpu, head size 64" TOL_FP32 $BIN -- --grad-accum 2
if have_mpi "training runs vs PyTorch on several ranks"; then
  # 3 ranks with one micro-batch each read exactly the tokens of 1 process with 3
  against h32 "cpu, 3 ranks at ZeRO-2" TOL_FP32 "${MPI[@]}" -np 3 $BIN -- --grad-accum 1 -z 2
  against h64 "cpu, 2 pipeline stages" TOL_FP32 "${MPI[@]}" -np 2 $BIN -- --pp 2
fi
# The Llama family (CPU build): transformers' LlamaForCausalLM in float64 under the same recipe, GQA 2:1, an untied
# head, 20 steps with accumulation 2 and clipping on 11 of them (test/ref_train_llama.py).
# LLAMA: the reference's directory (llama, or llama_relu2: ReLU²'s MLP, H = 4C, the model file's slot 21 saying so).
LLAMA=llama
llama_reference() {
  "$TORCH_PY" test/ref_train_llama.py make --out-dir "$W/$LLAMA" --grad-clip 1.45 "$@" > "$W/$LLAMA.ref.out" 2>&1 \
    && ok "$(tail -1 "$W/$LLAMA.ref.out")" || { bad "reference $LLAMA" "$(cat "$W/$LLAMA.ref.out")"; return 1; }
}
# llama_against LABEL LAUNCH... -- FLAGS...
llama_against() {
  local label=$1; shift
  local launch=() run="$W/$LLAMA.$(tr -c 'a-z0-9\n' _ <<<"$label")"
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  mapfile -t args < "$W/$LLAMA/args"
  "${launch[@]}" "${args[@]}" "$@" --log "$run.jsonl" -o "$run" -n 1000 > "$run.out" 2>&1 \
    || { bad "$label: the run failed" "$(tail -5 "$run.out")"; return; }
  local out
  out=$("$TORCH_PY" test/ref_train_llama.py compare --out-dir "$W/$LLAMA" --log "$run.jsonl" --ckpt-dir "$run" \
        --label "$label: " "${TOL_FP32[@]}" 2>&1)
  while IFS= read -r line; do
    case "$line" in PASS\ *) ok "${line#PASS }" ;; FAIL\ *) bad "${line#FAIL }" ;; *) echo "$line" ;; esac
  done <<<"$out"
}
if llama_reference; then
  llama_against "cpu, Llama GQA 2:1 untied" $BIN --
  if have_mpi "Llama training runs vs PyTorch on several ranks"; then
    llama_against "cpu, Llama on 2 ranks at ZeRO-3" "${MPI[@]}" -np 2 $BIN -- --grad-accum 1 -z 3
    llama_against "cpu, Llama on 2 pipeline stages" "${MPI[@]}" -np 2 $BIN -- --pp 2
  fi
fi
# ReLU² (--mlp relu2) in the same model, H = 4C = 256: the model file's slot 21 carries it to the trainer
LLAMA=llama_relu2
if llama_reference --mlp relu2 --hidden 256; then
  llama_against "cpu, Llama ReLU² GQA 2:1 untied" $BIN --
fi

if [ "${REF_EMU:-1}" = 0 ]; then
  skip "the CUDA build vs PyTorch: REF_EMU=0 (the CPU build only)"
elif [ -x ./train_gpt_emu ]; then
  against h32 "cuda emu fp32, head size 32" TOL_FP32 ./train_gpt_emu -- --precision fp32
  against h64 "cuda emu fp32, head size 64" TOL_FP32 ./train_gpt_emu -- --precision fp32
  against h32 "cuda emu bf16" TOL_BF16 ./train_gpt_emu -- --precision bf16
  # a fixed power-of-two scale: dynamic scaling would skip its first steps, which the reference does not
  against h32 "cuda emu fp16" TOL_FP16 ./train_gpt_emu -- --precision fp16 --loss-scale 1024
else
  skip "the CUDA build vs PyTorch: no ./train_gpt_emu (make train_gpt_emu; it needs the CUDA toolkit's headers)"
fi
finish
