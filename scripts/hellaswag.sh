#!/usr/bin/env bash
# HellaSwag's validation set (10,042 examples, 4 endings each) for --eval-mc: fetch it (unless DIR already
# has hellaswag_val.jsonl) and convert it to token ids with scripts/mc_tokenize.py, as llm.c scores it
# (context, then each ending with a leading space; acc_norm by mean log-likelihood per ending token).
#   scripts/hellaswag.sh [DIR]    -> DIR/hellaswag_val_tokens.jsonl (DIR defaults to data/hellaswag)
# then: ./train_gpt -e d12 ... -j 'D/val_*.bin' --eval-mc DIR/hellaswag_val_tokens.jsonl
# GPT-2's encoder files are taken from data/ or ../shared/data (scripts/tinyshakespeare.sh fetches them).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-data/hellaswag}
mkdir -p "$DIR"
if [ ! -f "$DIR/hellaswag_val.jsonl" ]; then
  url=https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl
  echo "downloading $url"
  curl -fsSL "$url" -o "$DIR/hellaswag_val.jsonl.part" && mv "$DIR/hellaswag_val.jsonl.part" "$DIR/hellaswag_val.jsonl"
fi
[ -x ./tokenize ] || make -s tokenize
python3 scripts/mc_tokenize.py "$DIR/hellaswag_val.jsonl" "$DIR/hellaswag_val_tokens.jsonl"
