# test/cuda_emu_attention.sh: test_cuda_emu.sh's section for the 16-bit attention backwards (`bash test/test_cuda_emu.sh
# attnbwd` runs it alone), sourced by it.
# TRAIN_GPT_ATTN_BWD=fused (attention_mma.cuh's one kernel, blocks taking turns on dQ), =v3
# (cuda/attention_bwd_v3.cuh) and =kv (cuda/attention_bwd_kv.cuh, KV-stationary, dQ in descending turns) against the default two-pass backward (cuda/attention_bwd_2pass.cuh), whole runs: GPT-2
# d2 (multi-head, hs 32) and llama-d2 (grouped-query) in bf16 and fp16 at T = 160 (two key blocks of 128, the second
# ragged; three query blocks of 64). The forward is the same; the gradients differ only in dQ's fp32 summation order
# before it is rounded, so step 1's loss is the same bits and the later steps move apart by rounding alone. 2 steps:
# step 1's norm is the backward's gradients, step 2's loss their update (a step costs ~2 CPU s at T = 160 in 16 bits,
# and 12 runs take these; steps 3-4 added no check). Bounds 4-9x what the emulator measured over 4 steps (v3 against
# the fused kernel, then the default): d2 bf16 0 and 0 (the same bits), d2 fp16 1.1e-6 and 1.3e-5, llama-d2 (2:1) bf16
# 1.1e-5 and 2.8e-5 (losses, norms).
attn_bwd_v3_runs() {
  local m pr tl tn r k a=(-b 2 -t 160 -x 2 -v 0 -s 0)
  for m in "d2 bf16 1e-4 2e-4" "d2 fp16 5e-6 5e-5" "llama-d2 bf16 1e-4 2e-4"; do
    read -r m pr tl tn <<<"$m"
    $EMU -e $m --precision $pr "${a[@]}" --log "$W/v3-$m-$pr-off.jsonl" > "$W/v3-off.out" 2>&1 || { bad "attention backward: $m $pr default run" "$(tail -3 "$W/v3-off.out")"; continue; }
    for k in fused v3 kv; do
      TRAIN_GPT_ATTN_BWD=$k $EMU -e $m --precision $pr "${a[@]}" --log "$W/v3-$m-$pr-$k.jsonl" > "$W/v3-on.out" 2>&1 \
        || { bad "attention backward: $m $pr run with TRAIN_GPT_ATTN_BWD=$k" "$(tail -3 "$W/v3-on.out")"; continue; }
      r=$(close "$W/v3-$m-$pr-off.jsonl" "$W/v3-$m-$pr-$k.jsonl" $tl $tn) \
        && [ "$(losses "$W/v3-$m-$pr-off.jsonl" | sed -n 1p | cut -d' ' -f2)" = "$(losses "$W/v3-$m-$pr-$k.jsonl" | sed -n 1p | cut -d' ' -f2)" ] \
        && ok "$m $pr: TRAIN_GPT_ATTN_BWD=$k beside the default two-pass attention backward, step 1's loss the same bits: $r" \
        || bad "attention backward $k vs the default two-pass one, $m $pr" "$r"
    done
  done
  # the old name of the v3 lever is refused with the new one, not ignored
  r=$(TRAIN_GPT_ATTN_BWD_V3=1 $EMU -e d2 --precision bf16 "${a[@]}" 2>&1) && bad "TRAIN_GPT_ATTN_BWD_V3=1 ran" "$(tail -2 <<<"$r")" \
    || { grep -q 'TRAIN_GPT_ATTN_BWD=v3' <<<"$r" && ok "TRAIN_GPT_ATTN_BWD_V3=1 refused, naming TRAIN_GPT_ATTN_BWD=v3" || bad "TRAIN_GPT_ATTN_BWD_V3=1's error" "$(tail -2 <<<"$r")"; }
  r=$(TRAIN_GPT_ATTN_BWD=v4 $EMU -e d2 --precision bf16 "${a[@]}" 2>&1) && bad "TRAIN_GPT_ATTN_BWD=v4 ran" "$(tail -2 <<<"$r")" \
    || { grep -q 'TRAIN_GPT_ATTN_BWD=v4: expected 2pass' <<<"$r" && ok "TRAIN_GPT_ATTN_BWD=v4 refused, naming the choices" || bad "TRAIN_GPT_ATTN_BWD=v4's error" "$(tail -2 <<<"$r")"; }
}

# The memory plan under masks (--doc-mask, --attn-window): in 16 bits a masked layer's backward is the KV-stationary
# one (cuda/attention_bwd_kv.cuh), whose workspace (D, a turn counter per 64-row query tile, the tiles' fp32 dQ sums)
# is larger than the default's D; the plan counts it, the model allocates it, and a backward asking for more than the
# model's workspace stops the run. d2 in bf16 at -b 2 -t 64, 2 steps with documents and with a window 16: each run
# allocates its plan (model state, activations and workspace), the plan its --dry-run prints, and that dry run's
# workspace exceeds the causal dry run's by, counted by hand, the kernel's room less D (B NH = 4 query tiles of 64 x hs
# 64 floats, 4 counters) and, with documents, their starts (B T ints).
attn_mask_plan_runs() {
  local r k m extra a=(-e d2 --precision bf16 -i "$W/mp-docs.bin" -b 2 -t 64 -v 0 -s 0)
  $PY - "$W/mp-docs.bin" <<'PYEOF'
import random, struct, sys
random.seed(1)
toks = [random.randrange(64) for _ in range(4096)]  # token 5 (--doc-token) ends a document about every 64 tokens
h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, len(toks)
open(sys.argv[1], "wb").write(struct.pack("<256i", *h) + struct.pack("<%dH" % len(toks), *toks))
PYEOF
  $EMU "${a[@]}" --dry-run --log "$W/mp-causal.jsonl" > "$W/mp-causal.out" 2>&1 || { bad "masks' plan: the causal dry run" "$(tail -3 "$W/mp-causal.out")"; return; }
  for k in "doc:--doc-mask --doc-token 5:512" "window:--attn-window 16:0"; do
    IFS=: read -r k m extra <<<"$k"
    $EMU "${a[@]}" $m -x 2 --log "$W/mp-$k.jsonl" > "$W/mp-$k.out" 2>&1 || { bad "masks' plan: d2 bf16 $m trains" "$(tail -3 "$W/mp-$k.out")"; continue; }
    $EMU "${a[@]}" $m --dry-run --log "$W/mp-$k-dry.jsonl" > "$W/mp-$k-dry.out" 2>&1
    r=$($PY - "$W/mp-$k.jsonl" "$W/mp-$k-dry.jsonl" "$W/mp-causal.jsonl" "$extra" <<'PYEOF'
import json, sys
def first(p, key): return next(json.loads(l)[key] for l in open(p) if key in json.loads(l))
a, plan, dry, causal = first(sys.argv[1], "allocated"), first(sys.argv[1], "memory_plan"), first(sys.argv[2], "memory_plan"), first(sys.argv[3], "memory_plan")
B, NH, T, hs = 2, 2, 64, 64
tiles = B * NH * ((T + 63) // 64)
room = ((B * NH * T + 3) // 4 * 4 + (tiles + 3) // 4 * 4 + tiles * 64 * hs - B * NH * T) * 4  # the kv kernel's, less D
want = room + int(sys.argv[4])
dw = dry["workspace_bytes"] - causal["workspace_bytes"]
ok = a["model_state_bytes"] == a["planned_model_state_bytes"] and a["activation_bytes"] == a["planned_activation_bytes"] \
    and plan["workspace_bytes"] == dry["workspace_bytes"] and plan["activations_bytes"] == dry["activations_bytes"] and dw == want
print(f"allocated {a['model_state_bytes']} bytes of model state and {a['activation_bytes']} of activations and workspace "
      f"(planned {a['planned_model_state_bytes']}, {a['planned_activation_bytes']}); the dry run's workspace "
      f"{dw} bytes over the causal one's (by hand {want})")
sys.exit(0 if ok else 1)
PYEOF
    ) && ok "masks' memory plan, d2 bf16 $m: $r" || bad "masks' memory plan, d2 bf16 $m" "$r"
  done
}
