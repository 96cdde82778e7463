# test/cuda_emu_attention.sh: test_cuda_emu.sh's section for the attention backward v3 (`bash test/test_cuda_emu.sh
# attnbwd` runs it alone), sourced by it.
# TRAIN_GPT_ATTN_BWD_V3=1 (cuda/attention_bwd_v3.cuh) against the default attention backward, whole runs: GPT-2 d2
# (multi-head, hs 32) and llama-d2 (grouped-query) in bf16 and fp16 at T = 160 (two key blocks of 128, the second
# ragged). The forward is the same; the gradients differ only in dQ's fp32 summation order before it is rounded, so
# step 1's loss is the same bits and the later steps move apart by rounding alone. Bounds 4-9x what the emulator
# measured over the 4 steps: d2 bf16 0 and 0 (the same bits), d2 fp16 1.1e-6 and 1.3e-5, llama-d2 (2:1) bf16 1.1e-5
# and 2.8e-5 (losses, norms).
attn_bwd_v3_runs() {
  local m pr tl tn r a=(-b 2 -t 160 -x 4 -v 0 -s 0)
  for m in "d2 bf16 1e-4 2e-4" "d2 fp16 5e-6 5e-5" "llama-d2 bf16 1e-4 2e-4"; do
    read -r m pr tl tn <<<"$m"
    $EMU -e $m --precision $pr "${a[@]}" --log "$W/v3-$m-$pr-off.jsonl" > "$W/v3-off.out" 2>&1 || { bad "attention v3: $m $pr default run" "$(tail -3 "$W/v3-off.out")"; continue; }
    TRAIN_GPT_ATTN_BWD_V3=1 $EMU -e $m --precision $pr "${a[@]}" --log "$W/v3-$m-$pr-on.jsonl" > "$W/v3-on.out" 2>&1 \
      || { bad "attention v3: $m $pr run with TRAIN_GPT_ATTN_BWD_V3=1" "$(tail -3 "$W/v3-on.out")"; continue; }
    r=$(close "$W/v3-$m-$pr-off.jsonl" "$W/v3-$m-$pr-on.jsonl" $tl $tn) \
      && [ "$(losses "$W/v3-$m-$pr-off.jsonl" | sed -n 1p | cut -d' ' -f2)" = "$(losses "$W/v3-$m-$pr-on.jsonl" | sed -n 1p | cut -d' ' -f2)" ] \
      && ok "$m $pr: TRAIN_GPT_ATTN_BWD_V3=1 beside the default attention backward, step 1's loss the same bits: $r" \
      || bad "attention v3 vs the default backward, $m $pr" "$r"
  done
}
