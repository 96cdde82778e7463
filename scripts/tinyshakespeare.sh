#!/usr/bin/env bash
# Tiny Shakespeare, end to end: get the text and GPT-2's tokenizer files, make llm.c token shards,
# and train a small GPT-2 on them with the CPU build.
#   scripts/tinyshakespeare.sh [DATA_DIR] [extra train_gpt_cpu flags...]
# Files are taken from DATA_DIR (default data/) if present there, else copied from $DATA_DIR (the variable
# make test reads) or ../shared/data; otherwise they are downloaded (needs the network). The first argument
# is the data directory only if it does not start with '-', so flags alone pass straight through
# (scripts/tinyshakespeare.sh -x 10).
set -euo pipefail
SRC_DIR=${DATA_DIR:-}  # relative to where the script was started, so taken before the cd
[ -n "$SRC_DIR" ] && [ -d "$SRC_DIR" ] && SRC_DIR=$(cd "$SRC_DIR" && pwd)
cd "$(dirname "$0")/.."
DATA=data
if [ $# -gt 0 ] && [ "${1:0:1}" != "-" ]; then DATA=$1; shift; fi
mkdir -p "$DATA"
fetch() {  # fetch NAME URL
  local name=$1 url=$2
  [ -f "$DATA/$name" ] && return
  local src
  for src in "$SRC_DIR" ../shared/data; do
    if [ -n "$src" ] && [ -f "$src/$name" ]; then cp "$src/$name" "$DATA/$name"; return; fi
  done
  echo "downloading $url"
  if ! curl -fsSL "$url" -o "$DATA/$name.part"; then
    rm -f "$DATA/$name.part"
    echo "error: could not download $name from $url; put it in $DATA/ or ../shared/data, or set DATA_DIR to a directory that has it" >&2
    exit 1
  fi
  mv "$DATA/$name.part" "$DATA/$name"
}
fetch tinyshakespeare.txt https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
fetch gpt2_encoder.json https://openaipublic.blob.core.windows.net/gpt-2/models/124M/encoder.json
fetch gpt2_vocab.bpe https://openaipublic.blob.core.windows.net/gpt-2/models/124M/vocab.bpe
make -s tokenize train_gpt_cpu
./tokenize shards --encoder "$DATA/gpt2_encoder.json" --merges "$DATA/gpt2_vocab.bpe" \
  --in "$DATA/tinyshakespeare.txt" --out-dir "$DATA/tinyshakespeare"
./train_gpt_cpu -i "$DATA/tinyshakespeare/train_*.bin" -j "$DATA/tinyshakespeare/val_*.bin" \
  -e d4 -b 8 -t 64 -x 200 -l 1e-3 -u 20 -v 50 -m 8 -s 100 -g 48 "$@"
