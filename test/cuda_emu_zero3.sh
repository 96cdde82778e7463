# cuda_emu_zero3.sh: test_cuda_emu.sh's ZeRO-over-the-outer-unit section (zero3_runs; `test_cuda_emu.sh zero3` runs it
# alone), sourced by it (lib.sh's ok/bad, $EMU, $MPI, $W, close).
# The emulated CUDA build in fp32 over NCCL (issue 48): GPT-2 d2 (tied, learned positions) and an untied Llama
# (test/llama_model.py: GQA 4:1, QK-norm, q/k/v bias) at ZeRO-2 and -3 on 2 and 3 ranks, the outer unit sharded like a
# layer, train 4 steps like one CPU process reading the same tokens (2e-5 relative), each rank allocating its plan (step
# 1's norm: the gradients reduced to each shard; steps 2-4: the sharded updates gathered back).
# And the plan of a card is one plan: the CPU build's --gpu h100 --dry-run gives, figure by figure, the emulated CUDA
# build's own --dry-run (its plan of what it allocates), for one rank of d12 (bf16 and fp32, ZeRO-3 with recompute) and
# for Llama 3.1 8B's 64-rank ZeRO-3 layout and its 16-rank TP 8 x PP 2 one.
zero3_runs() {
  local M="$W/z3-untied.bin" m tag np z r base=(-b 2 -t 32 -x 4 -v 0 -s 0 -l 1e-3 -u 2 --precision fp32)
  $PY test/llama_model.py "$M" 4 1 || { bad "writing the untied Llama model file (test/llama_model.py)"; return; }
  for m in d2 "$M"; do
    tag=$(basename "$m" .bin)
    ./train_gpt_cpu -e "$m" "${base[@]}" --grad-accum 6 --log "$W/z3-$tag-cpu.jsonl" > "$W/z3-$tag-cpu.out" 2>&1 \
      || { bad "ZeRO over the outer unit: $tag in one CPU process" "$(tail -3 "$W/z3-$tag-cpu.out")"; continue; }
    for np in 2 3; do
      for z in 2 3; do
        "${MPI[@]}" -np $np $EMU -e "$m" "${base[@]}" --grad-accum $((6 / np)) -z $z --comm nccl --log "$W/z3-$tag-$np$z.jsonl" \
          > "$W/z3-$tag-$np$z.out" 2>&1 || { bad "$tag at ZeRO-$z on $np ranks over NCCL runs" "$(tail -3 "$W/z3-$tag-$np$z.out")"; continue; }
        set -- $($PY -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if "allocated" in l][0]["allocated"]; print(d["model_state_bytes"], d["planned_model_state_bytes"])' "$W/z3-$tag-$np$z.jsonl")
        r=$(close "$W/z3-$tag-cpu.jsonl" "$W/z3-$tag-$np$z.jsonl" 2e-5) && [ $# -eq 2 ] && [ "$1" = "$2" ] \
          && ok "$tag, ZeRO-$z on $np ranks over NCCL (outer unit sharded), fp32: $r vs one CPU process; allocates its plan ($1 bytes)" \
          || bad "$tag, ZeRO-$z on $np ranks over NCCL vs one CPU process, allocation" "$r $*"
      done
    done
  done
  local keys='("params_bytes", "grads_bytes", "optimizer_bytes", "gathered_bytes", "working_weights_bytes", "activations_bytes", "workspace_bytes", "kv_cache_bytes", "device_bytes", "host_bytes")'
  local i=0 args
  for args in "-e d12 -b 4 -t 256 -z 3 -r 1" "-e d12 -b 4 -t 256 -z 3 -r 1 --precision fp32" \
              "-e llama-3.1-8b --world 64 -z 3 -b 1 -t 8192" "-e llama-3.1-8b --world 16 --tp 8 --pp 2 -b 1 -t 8192 --grad-accum 8"; do
    i=$((i + 1))
    ./train_gpt_cpu --dry-run --gpu h100 $args --log "$W/plan$i-cpu.jsonl" > "$W/plan$i-cpu.out" 2>&1
    $EMU --dry-run $args --log "$W/plan$i-emu.jsonl" > "$W/plan$i-emu.out" 2>&1
    r=$($PY - "$W/plan$i-cpu.jsonl" "$W/plan$i-emu.jsonl" "$keys" <<'PYEOF'
import json, sys
keys = eval(sys.argv[3])
def plans(p):
    rows = [json.loads(l) for l in open(p)]
    return [d.get("memory_plan") or d.get("stage_plan") for d in rows if "memory_plan" in d or "stage_plan" in d]
a, b = plans(sys.argv[1]), plans(sys.argv[2])
ok = len(a) == len(b) > 0 and all(x[k] == y[k] for x, y in zip(a, b) for k in keys)
diff = [f"{k} {x[k]} vs {y[k]}" for x, y in zip(a, b) for k in keys if x[k] != y[k]]
print(f"{len(a)} plan(s), {len(keys)} figures each equal (device {a[0]['device_bytes'] / 2**30:.2f} GiB)" if ok else "; ".join(diff) or "no plan")
sys.exit(0 if ok else 1)
PYEOF
)
    [ $? -eq 0 ] && ok "the CPU build's --gpu h100 plan is the CUDA build's own ($args): $r" || bad "the CPU build's --gpu plan vs the CUDA build's ($args)" "$r"
  done
}
