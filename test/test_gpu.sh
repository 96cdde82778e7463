#!/usr/bin/env bash
# test_gpu.sh (make test-gpu): the CUDA build on a machine with an NVIDIA GPU, checked against the
# PyTorch reference and against the CPU build: logits, loss and every gradient at every recompute
# level and accumulation; 10 training steps beside the CPU build's; exact resume; checkpoints that
# cross between the builds; several ranks on one GPU through MPI; the Llama family (GQA 4:1 with QK-norm: the
# same whole runs as test_cuda_emu.sh's llama_runs); compute-sanitizer. A check that this build
# cannot run (a train_gpt built without Open MPI, where the machine had none: the device tool's GPU machines)
# prints SKIP and its reason, and the run ends "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
W=$(mktemp -d /tmp/test_gpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0; fail=0; skipped=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
skip() { echo "SKIP $1"; skipped=$((skipped+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -8 | sed 's/^/    /'; fail=$((fail+1)); }
losses() { $PY -c '
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    if "loss" in d: print(d["step"], repr(d["loss"]))' "$1"; }
close() { $PY - "$@" <<'PYEOF'
import json, sys
def L(p): return {d["step"]: d["loss"] for d in map(json.loads, open(p)) if "loss" in d}
a, b = L(sys.argv[1]), L(sys.argv[2]); tol = float(sys.argv[3])
steps = sorted(a)
if not steps or any(s not in b for s in steps): print("missing steps"); sys.exit(1)
err = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
print(f"{len(steps)} losses within {err:.1e} relative (< {tol:g})")
sys.exit(0 if err < tol else 1)
PYEOF
}

# 0. every kernel against the CPU build's, in fp32, bf16 and fp16 (dev/cuda/kernels.cu)
out=$(./dev/cuda/kernels check 2>&1); rc=$?
echo "$out" | sed 's/^/    /'
[ $rc -eq 0 ] && ok "kernels vs the CPU build's: $(tail -1 <<<"$out")" || bad "kernels vs the CPU build's" "$(grep FAIL <<<"$out")"

# 1. the model against PyTorch, as the CPU build is checked (test_gpt2.c compiled for the GPU)
if "$TORCH_PY" test/ref_gpt2.py --out-dir "$W/ref" > "$W/ref.log" 2>&1; then
  out=$(./test/test_gpt2_gpu "$W/ref" 2>&1); rc=$?
  echo "$out" | sed 's/^/    /'
  [ $rc -eq 0 ] && ok "fp32 CUDA model vs PyTorch: $(tail -1 <<<"$out")" || bad "CUDA model vs PyTorch" "$out"
else bad "PyTorch reference ($TORCH_PY)" "$(cat "$W/ref.log")"; fi

# 1a. generation with the key/value cache against the full-prefix forward, in each precision
for p in fp32 bf16 fp16; do
  out=$(./test/test_generate_gpu $p 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "generation with the KV cache ($p) vs the full-prefix forward: $(tail -1 <<<"$out")" || bad "generation ($p)" "$out"
done

# 2. ten steps beside the CPU build, from the same initialisation and data
common=(-e d2 -b 4 -t 64 -x 10 -v 5 -s 0 --grad-accum 2)
fp32=(--precision fp32)
./train_gpt_cpu "${common[@]}" --log "$W/cpu.jsonl" > "$W/cpu.out" 2>&1
./train_gpt "${fp32[@]}" "${common[@]}" --log "$W/gpu.jsonl" > "$W/gpu.out" 2>&1 || bad "GPU run" "$(tail "$W/gpu.out")"
r=$(close "$W/cpu.jsonl" "$W/gpu.jsonl" 1e-4) && ok "10 steps, GPU vs CPU build: $r" || bad "GPU vs CPU 10 steps" "$r"

# 2a. bf16 and fp16 beside the CPU build's fp32. Activations in bf16 carry 8 mantissa bits (2^-9 ~ 2e-3
# per rounding), and some dozens of roundings feed each loss; over 10 steps of training the losses
# of a d2 model stay within ~1% of fp32's. fp16 keeps 11 bits, so it must be closer (0.3%).
./train_gpt_cpu "${common[@]}" -v 0 --log "$W/cpu10.jsonl" > /dev/null 2>&1
for p in bf16:1e-2 fp16:3e-3; do
  ./train_gpt --precision ${p%%:*} "${common[@]}" -v 0 --log "$W/${p%%:*}.jsonl" > "$W/${p%%:*}.out" 2>&1 || bad "${p%%:*} run" "$(tail -3 "$W/${p%%:*}.out")"
  r=$(close "$W/cpu10.jsonl" "$W/${p%%:*}.jsonl" ${p##*:}) && ok "10 steps in ${p%%:*} vs the CPU build's fp32: $r" || bad "${p%%:*} vs fp32" "$r"
done
grep -q '"loss_scale": 65536' "$W/fp16.jsonl" && ok "fp16 runs with dynamic loss scaling from 2^16 (logged)" || bad "fp16 loss scale in the log"
# bf16 is deterministic and resumes bit for bit (stochastic rounding is seeded by the update count). T=256 gives the
# attention backward 4 key blocks, which take their turns on dQ (cuda/block_order.cuh) in a fixed order; T=1024
# gives 16 (GPT-2's training length), where a turn waits on the most blocks before it.
bk=(-e d2 -b 4 -t 256 -x 8 -v 0 -s 0 -n 4 --keep-checkpoints 5)
./train_gpt "${bk[@]}" -o "$W/bf" --log "$W/bf.jsonl" > /dev/null 2>&1
./train_gpt "${bk[@]}" -o "$W/bf2" --log "$W/bf2.jsonl" > /dev/null 2>&1
mkdir -p "$W/bfr"; cp "$W/bf/model_00000004.bin" "$W/bf/state_00000004.bin" "$W/bfr/"
./train_gpt "${bk[@]}" -o "$W/bfr" -y 1 --log "$W/bfr.jsonl" > /dev/null 2>&1
[ -s "$W/bf.jsonl" ] && [ "$(losses "$W/bf.jsonl")" = "$(losses "$W/bf2.jsonl")" ] && [ "$(losses "$W/bf.jsonl" | tail -n 4)" = "$(losses "$W/bfr.jsonl")" ] \
  && cmp -s "$W/bf/model_00000008.bin" "$W/bf2/model_00000008.bin" && cmp -s "$W/bf/model_00000008.bin" "$W/bfr/model_00000008.bin" \
  && ok "bf16 at T=256: two runs bit-identical; resume at step 4 bit-identical to the end" || bad "bf16 determinism and resume at T=256"
bk=(-e d2 -b 2 -t 1024 -x 4 -v 0 -s 0 -n 4)
./train_gpt "${bk[@]}" -o "$W/bfl" --log "$W/bfl.jsonl" > "$W/bfl.out" 2>&1
./train_gpt "${bk[@]}" -o "$W/bfl2" --log "$W/bfl2.jsonl" > /dev/null 2>&1
[ -s "$W/bfl.jsonl" ] && [ "$(losses "$W/bfl.jsonl")" = "$(losses "$W/bfl2.jsonl")" ] \
  && cmp -s "$W/bfl/model_00000004.bin" "$W/bfl2/model_00000004.bin" \
  && ok "bf16 at T=1024: two runs bit-identical (losses and checkpoint)" || bad "bf16 determinism at T=1024" "$(tail -3 "$W/bfl.out")"

# 3. exact resume on the GPU
ck=(--precision fp32 -e d2 -b 4 -t 64 -x 12 -v 0 -s 0 -n 4 --keep-checkpoints 5)
./train_gpt "${ck[@]}" -o "$W/full" --log "$W/full.jsonl" > /dev/null 2>&1
mkdir -p "$W/res"; cp "$W/full/model_00000004.bin" "$W/full/state_00000004.bin" "$W/res/"
./train_gpt "${ck[@]}" -o "$W/res" -y 1 --log "$W/res.jsonl" > /dev/null 2>&1
[ -s "$W/res.jsonl" ] && [ "$(losses "$W/full.jsonl" | tail -n 8)" = "$(losses "$W/res.jsonl")" ] \
  && cmp -s "$W/full/model_00000012.bin" "$W/res/model_00000012.bin" \
  && ok "GPU resume at step 4: steps 5-12 bit-identical, final checkpoint byte-identical" || bad "GPU exact resume"

# 4. checkpoints cross between the builds
mkdir -p "$W/g2c" "$W/c2g"
cp "$W/full/model_00000004.bin" "$W/full/state_00000004.bin" "$W/g2c/"
./train_gpt_cpu "${ck[@]}" -o "$W/g2c" -y 1 --log "$W/g2c.jsonl" > /dev/null 2>&1
r=$(close "$W/res.jsonl" "$W/g2c.jsonl" 1e-4) && ok "a GPU checkpoint resumes in the CPU build: $r" || bad "GPU -> CPU checkpoint" "$r"
./train_gpt_cpu "${ck[@]}" -x 4 -o "$W/cpu4" > /dev/null 2>&1
cp "$W/cpu4/model_00000004.bin" "$W/cpu4/state_00000004.bin" "$W/c2g/"
./train_gpt "${ck[@]}" -o "$W/c2g" -y 1 --log "$W/c2g.jsonl" > /dev/null 2>&1
r=$(close "$W/res.jsonl" "$W/c2g.jsonl" 1e-4) && ok "a CPU checkpoint resumes in the GPU build: $r" || bad "CPU -> GPU checkpoint" "$r"

# 5. several ranks on the one GPU through MPI (NCCL refuses two ranks on one device). A train_gpt built without
# Open MPI (no mpicc where it was built) runs as one process only: these checks are skipped, with that reason.
has_mpi=0; ldd ./train_gpt 2>/dev/null | grep -q 'libmpi' && has_mpi=1
if [ $has_mpi = 0 ]; then
  skip "2 ranks via MPI at ZeRO 0-3, --pp 2, --tp 2, --offload optimizer|params (8 checks): this train_gpt was built without Open MPI"
elif command -v mpirun >/dev/null; then
  ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --log "$W/one.jsonl" > /dev/null 2>&1
  for z in 0 1 2 3; do
    mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 2 -z $z \
      --log "$W/mpi$z.jsonl" > "$W/mpi$z.out" 2>&1
    r=$(close "$W/one.jsonl" "$W/mpi$z.jsonl" 1e-5) && ok "2 ranks on one GPU via MPI at ZeRO-$z vs 1 process: $r" || bad "MPI ZeRO-$z on GPU" "$r $(tail -3 "$W/mpi$z.out")"
  done
  mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --pp 2 \
    --log "$W/pp.jsonl" > "$W/pp.out" 2>&1
  r=$(close "$W/one.jsonl" "$W/pp.jsonl" 1e-5) && ok "--pp 2 on one GPU via MPI vs 1 process: $r" || bad "pipeline on GPU" "$r $(tail -3 "$W/pp.out")"
  # tensor parallelism (cuda/vocab.cuh, the collectives staged through the host: --comm mpi, fp32)
  mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --tp 2 \
    --log "$W/tp.jsonl" > "$W/tp.out" 2>&1
  r=$(close "$W/one.jsonl" "$W/tp.jsonl" 2e-5) && ok "--tp 2 on one GPU via MPI vs 1 process: $r" || bad "--tp 2 on GPU" "$r $(tail -3 "$W/tp.out")"
  # 5a. optimizer offload on the GPU: host AdamW on pinned memory, same numbers as on the device
  for o in optimizer params; do
    z=1; [ $o = params ] && z=3
    mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 2 -z $z \
      --offload $o --log "$W/off$o.jsonl" > "$W/off$o.out" 2>&1
    r=$(close "$W/mpi$z.jsonl" "$W/off$o.jsonl" 1e-6) && ok "--offload $o at ZeRO-$z on one GPU vs on-device AdamW: $r" \
      || bad "--offload $o on GPU" "$r $(tail -3 "$W/off$o.out")"
  done
else bad "mpirun not found: the multi-rank and offload checks need Open MPI (apt-get install openmpi-bin libopenmpi-dev)"
fi


# 5b. NCCL (one rank here: NCCL refuses two ranks on one GPU), against the one-process run of 5. NCCL comes with
# the MPI build (MPI hands out NCCL's id): without it, skipped.
if [ $has_mpi = 0 ]; then
  skip "--comm nccl with one rank: this train_gpt was built without Open MPI, and so without NCCL"
else
  [ -s "$W/one.jsonl" ] || ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --log "$W/one.jsonl" > /dev/null 2>&1
  ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --comm nccl --log "$W/nccl.jsonl" > "$W/nccl.out" 2>&1
  [ -s "$W/nccl.jsonl" ] && [ "$(losses "$W/nccl.jsonl")" = "$(losses "$W/one.jsonl")" ] && ok "--comm nccl with one rank: same losses"   || bad "--comm nccl with one rank" "$(tail -3 "$W/nccl.out")"
fi
if [ $has_mpi = 1 ] && command -v mpirun >/dev/null && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  mpirun --allow-run-as-root -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 2 -z 1 --comm nccl     --log "$W/nccl2.jsonl" > "$W/nccl2.out" 2>&1
  r=$(close "$W/one.jsonl" "$W/nccl2.jsonl" 1e-5) && ok "2 GPUs through NCCL at ZeRO-1 vs 1 process: $r" || bad "NCCL on 2 GPUs" "$r"
  mpirun --allow-run-as-root -np 2 ./train_gpt --precision fp32 -e d2 -b 4 -t 64 -x 10 -v 0 -s 0 --grad-accum 4 --tp 2 --comm nccl --log "$W/tpn.jsonl" > "$W/tpn.out" 2>&1
  r=$(close "$W/one.jsonl" "$W/tpn.jsonl" 2e-5) && ok "--tp 2 on 2 GPUs through NCCL vs 1 process: $r" || bad "--tp 2 over NCCL on 2 GPUs" "$r $(tail -3 "$W/tpn.out")"
fi

# 5c. the Llama family (issue 35): a model with grouped-query attention 4:1 and QK-norm (test/llama_model.py: NH 4 over
# KV 1 of head_dim 16, untied, q/k/v bias) through cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh and the grouped-query attention kernels, as
# test_cuda_emu.sh's llama_runs checks it on the emulator: fp32, bf16, fp16 beside the CPU build's fp32, exact
# resume, graphs = eager, 2 ranks at ZeRO-3 and --pp 2 = one process
LM="$W/gqa41.bin"
if $PY test/llama_model.py "$LM" 4 1; then
  lc=(-e "$LM" -b 2 -t 80 -x 8 -v 0 -s 0 --grad-accum 2); lck=(-n 4 --keep-checkpoints 5); lev=(-v 4 -m 2 -s 4 -g 8)
  ./train_gpt_cpu "${lc[@]}" --log "$W/ll-cpu.jsonl" > /dev/null 2>&1
  for p in fp32:1e-4 bf16:1e-2 fp16:3e-3; do
    ./train_gpt --precision ${p%%:*} "${lc[@]}" "${lck[@]}" "${lev[@]}" -o "$W/ll-${p%%:*}" --log "$W/ll-${p%%:*}.jsonl" > "$W/ll-${p%%:*}.out" 2>&1 \
      || bad "Llama ${p%%:*} run" "$(tail -3 "$W/ll-${p%%:*}.out")"
    r=$(close "$W/ll-cpu.jsonl" "$W/ll-${p%%:*}.jsonl" ${p##*:}) && ok "Llama GQA 4:1 with QK-norm, 8 steps in ${p%%:*} vs the CPU build's fp32: $r" \
      || bad "Llama ${p%%:*} vs the CPU build" "$r"
  done
  for p in fp32 bf16; do
    mkdir -p "$W/ll-$p-r"; cp "$W/ll-$p/model_00000004.bin" "$W/ll-$p/state_00000004.bin" "$W/ll-$p-r/"
    ./train_gpt --precision $p "${lc[@]}" "${lck[@]}" "${lev[@]}" -o "$W/ll-$p-r" -y 1 --log "$W/ll-$p-r.jsonl" > /dev/null 2>&1
    [ -s "$W/ll-$p-r.jsonl" ] && [ "$(losses "$W/ll-$p.jsonl" | tail -n 4)" = "$(losses "$W/ll-$p-r.jsonl")" ] \
      && cmp -s "$W/ll-$p/model_00000008.bin" "$W/ll-$p-r/model_00000008.bin" \
      && ok "Llama $p resumed at step 4: steps 5-8 and the step-8 checkpoint bit-identical" || bad "Llama $p exact resume"
  done
  TRAIN_GPT_GRAPHS=0 ./train_gpt --precision bf16 "${lc[@]}" "${lck[@]}" "${lev[@]}" -o "$W/ll-eager" --log "$W/ll-eager.jsonl" > "$W/ll-eager.out" 2>&1
  [ -s "$W/ll-eager.jsonl" ] && [ "$(losses "$W/ll-bf16.jsonl")" = "$(losses "$W/ll-eager.jsonl")" ] \
    && cmp -s "$W/ll-bf16/model_00000008.bin" "$W/ll-eager/model_00000008.bin" \
    && [ "$(grep -o '"val_loss": [^,}]*' "$W/ll-bf16.jsonl")" = "$(grep -o '"val_loss": [^,}]*' "$W/ll-eager.jsonl")" ] \
    && [ -n "$(grep '^sample' "$W/ll-bf16.out")" ] && [ "$(grep '^sample' "$W/ll-bf16.out")" = "$(grep '^sample' "$W/ll-eager.out")" ] \
    && ok "Llama bf16, graphs on vs TRAIN_GPT_GRAPHS=0: losses, validation, samples and final checkpoint bit-identical" \
    || bad "Llama graphs vs eager" "$(diff <(losses "$W/ll-bf16.jsonl") <(losses "$W/ll-eager.jsonl"))"
  if [ $has_mpi = 1 ] && command -v mpirun >/dev/null; then
    lone=(--precision fp32 -e "$LM" -b 2 -t 80 -x 6 -v 0 -s 0)
    ./train_gpt "${lone[@]}" --grad-accum 4 --log "$W/ll-one.jsonl" > /dev/null 2>&1
    mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt "${lone[@]}" --grad-accum 2 -z 3 --log "$W/ll-z3.jsonl" > "$W/ll-z3.out" 2>&1
    r=$(close "$W/ll-one.jsonl" "$W/ll-z3.jsonl" 1e-5) && ok "Llama: 2 ranks on one GPU via MPI at ZeRO-3 vs 1 process: $r" || bad "Llama ZeRO-3 on GPU" "$r $(tail -3 "$W/ll-z3.out")"
    mpirun --allow-run-as-root --oversubscribe -np 2 ./train_gpt "${lone[@]}" --grad-accum 4 --pp 2 --log "$W/ll-pp.jsonl" > "$W/ll-pp.out" 2>&1
    r=$(close "$W/ll-one.jsonl" "$W/ll-pp.jsonl" 1e-5) && ok "Llama: --pp 2 on one GPU via MPI vs 1 process: $r" || bad "Llama --pp 2 on GPU" "$r $(tail -3 "$W/ll-pp.out")"
    if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
      mpirun --allow-run-as-root -np 2 ./train_gpt "${lone[@]}" --grad-accum 2 -z 3 --comm nccl --log "$W/ll-nccl.jsonl" > "$W/ll-nccl.out" 2>&1
      r=$(close "$W/ll-one.jsonl" "$W/ll-nccl.jsonl" 1e-5) && ok "Llama: 2 GPUs through NCCL at ZeRO-3 vs 1 process: $r" || bad "Llama NCCL ZeRO-3 on 2 GPUs" "$r"
    fi
  else
    skip "Llama: 2 ranks at ZeRO-3 and --pp 2 (2 checks): this train_gpt was built without Open MPI, or mpirun is missing"
  fi
else bad "writing the Llama model file (test/llama_model.py)"; fi

# 5b. Muon (--optimizer muon, cuda/muon.cuh: Newton-Schulz on cuBLASLt in the run's precision), as test_cuda_emu.sh's
# muon_runs checks it on the emulator: 8 steps of d2 and llama-d2 beside the CPU build's Muon, fp32 within this list's
# fp32 bound (1e-4; the emulator measures 5.8e-8) and bf16 within the emulator's bound (1e-3; it measures 1.1e-4).
# Not yet run on a GPU (written without one); kernels.cu's `check muon` is in check 0.
for m in d2:48 llama-d2:32; do
  ma=(-e ${m%:*} -b 2 -t ${m#*:} -x 8 -v 0 -s 0 --grad-accum 2 --optimizer muon); n=${m%:*}
  ./train_gpt_cpu "${ma[@]}" --log "$W/mu-$n-cpu.jsonl" > /dev/null 2>&1
  for p in fp32:1e-4 bf16:1e-3; do
    ./train_gpt --precision ${p%%:*} "${ma[@]}" --log "$W/mu-$n-${p%%:*}.jsonl" > "$W/mu-$n.out" 2>&1 \
      || bad "Muon ${p%%:*} run ($n)" "$(tail -3 "$W/mu-$n.out")"
    r=$(close "$W/mu-$n-cpu.jsonl" "$W/mu-$n-${p%%:*}.jsonl" ${p##*:}) && ok "Muon ${p%%:*} ($n), 8 steps vs the CPU build's fp32 Muon: $r" \
      || bad "Muon ${p%%:*} ($n) vs the CPU build's" "$r"
  done
done

# 6. compute-sanitizer on a short run
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    out=$(compute-sanitizer --tool $tool --error-exitcode 9 ./train_gpt -e d2 -b 2 -t 32 -x 2 -v 1 -m 1 -s 2 -g 4 -r 3 2>&1); rc=$?
    # memcheck ends with "ERROR SUMMARY: 0 errors", racecheck with "RACECHECK SUMMARY: 0 hazards displayed"
    [ $rc -eq 0 ] && grep -qE "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)" <<<"$out" && ok "compute-sanitizer $tool: 0 errors" || bad "compute-sanitizer $tool" "$out"
    # the Llama family's kernels (GQA 4:1, QK-norm, bias, SwiGLU), bf16, with validation and a sample through the cache
    [ -s "$LM" ] || continue
    out=$(compute-sanitizer --tool $tool --error-exitcode 9 ./train_gpt -e "$LM" -b 2 -t 48 -x 2 -v 1 -m 1 -s 2 -g 4 -r 1 2>&1); rc=$?
    [ $rc -eq 0 ] && grep -qE "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)" <<<"$out" && ok "compute-sanitizer $tool, Llama GQA 4:1: 0 errors" \
      || bad "compute-sanitizer $tool, Llama" "$out"
  done
fi

echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
