# gpt2_recipes.sh: flags for training GPT-2 shapes on FineWeb-style llm.c shards, sourced by
# run_node.sh and sbatch_gpu.sh as `recipe_args SIZE`. Batch 0.5M tokens per step, as GPT-2 and
# llm.c's reproductions use; the learning rates follow GPT-3's table for these sizes.
#
# Memory per GPU, model state only (fp32 master weights + AdamW m and v = 12 bytes/param, plus
# 2 bytes/param bf16 weights and 2-4 bytes/param gradients), with ZeRO-1 over 8 GPUs the 12 bytes
# are split 8 ways:
#   124M: ~2.5 GB at stage 0, ~1.2 GB at ZeRO-1; activations at B=32, T=1024 ~ 20 GB (recompute 0).
#   350M: ~6.4 GB at stage 0, ~2.3 GB at ZeRO-1; activations at B=16 ~ 25 GB (recompute 1 halves the MLP part).
#   774M: ~14 GB at stage 0, ~4.6 GB at ZeRO-1; activations at B=8 ~ 20 GB with recompute 1.
#   1.5B: ~27 GB at stage 0, ~8.7 GB at ZeRO-1; activations at B=8 ~ 30 GB with recompute 2: fits 80 GB cards.
# Data: TRAIN_GLOB / VAL_GLOB (default llm.c's fineweb10B layout under data/).

recipe_args() {
  local size=$1
  local train=${TRAIN_GLOB:-data/fineweb10B/fineweb_train_*.bin} val=${VAL_GLOB:-data/fineweb10B/fineweb_val_*.bin}
  local common=(-i "$train" -j "$val" -t 1024 -d 524288 -q 0.0 -c 0.1 -v 250 -m 20 -s 1000 -n 1000 -z 1)
  case "$size" in
    124M) echo "${common[@]}" -e d12 -b 32 -l 6e-4 -u 700 -x 18865 -r 0 ;;
    350M) echo "${common[@]}" -e d24 -b 16 -l 3e-4 -u 700 -x 38000 -r 1 ;;
    774M) echo "${common[@]}" -e d36 -b 8 -l 2.5e-4 -u 700 -x 38000 -r 1 ;;
    1.5B) echo "${common[@]}" -e d48 -b 8 -l 2e-4 -u 700 -x 32000 -r 2 ;;
    *) echo "unknown recipe '$size' (124M, 350M, 774M, 1.5B)" >&2; return 1 ;;
  esac
}
