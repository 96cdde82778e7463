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
