#!/usr/bin/env bash
# test_scripts.sh DATA: the Tiny Shakespeare script end to end on real text (a short run): shards
# are made, the model trains on them, the validation loss falls, and samples decode as text.
set -u
cd "$(dirname "$0")/.."
DATA=$1
W=$(mktemp -d /tmp/test_scripts.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -5 | sed 's/^/    /'; fail=$((fail+1)); }
cp "$DATA/tinyshakespeare.txt" "$DATA/gpt2_encoder.json" "$DATA/gpt2_vocab.bpe" "$W/"
out=$(bash scripts/tinyshakespeare.sh "$W" -e d2 -x 40 -v 20 -s 40 -g 16 --log "$W/log.jsonl" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -f "$W/tinyshakespeare/train_000000.bin" ] && [ -f "$W/tinyshakespeare/tokenizer.bin" ] \
  && ok "scripts/tinyshakespeare.sh makes shards and trains" || bad "scripts/tinyshakespeare.sh" "$out"
v0=$(grep -E "^step +0 \| val loss" <<<"$out" | sed -E 's/.*val loss ([0-9.]+).*/\1/')
v1=$(grep -E "^step +40 \| val loss" <<<"$out" | sed -E 's/.*val loss ([0-9.]+).*/\1/')
[ -n "$v0" ] && [ -n "$v1" ] && awk -v a="$v0" -v b="$v1" 'BEGIN{exit !(b < a - 1.0)}' \
  && ok "val loss falls on real text: $v0 -> $v1" || bad "val loss falls by more than 1 nat" "$v0 -> $v1"
sample=$(grep "^sample:" <<<"$out" | tail -1)
# decoded GPT-2 text, not token ids: it has letters, and is not a list of numbers
grep -qE "[a-zA-Z]{2}" <<<"$sample" && ! grep -qE "^sample: ([0-9]+ )+$" <<<"$sample" \
  && ok "samples decode through the tokenizer.bin beside the shards: ${sample:0:60}" || bad "sample decodes" "$sample"
# flags alone pass through to the trainer (the data directory defaults to data/ of the checkout):
# run in a copy of the checkout, so the test leaves no data/ behind
mkdir -p "$W/repo" "$W/shared"
cp -rp scripts cpu tokenizer Makefile ./*.h ./*.c .build-cpu train_gpt_cpu tokenize "$W/repo/" 2>/dev/null
ln -s "$(realpath "$DATA")" "$W/shared/data"
out=$(bash "$W/repo/scripts/tinyshakespeare.sh" -e d2 -x 3 -v 0 -s 0 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "step     3/3" <<<"$out" && [ -f "$W/repo/data/tinyshakespeare/train_000000.bin" ] \
  && ok "scripts/tinyshakespeare.sh -e d2 -x 3 ...: flags without a data directory reach the trainer" || bad "flags pass through" "$out"
# a checkout with no ../shared/data: the files come from $DATA_DIR (as make test reads it), and where they are
# nowhere and the download fails (a curl that cannot reach the host), the error names the file and the ways out
mkdir -p "$W/lone/repo" "$W/bin" "$W/empty"
cp -rp scripts cpu tokenizer Makefile ./*.h ./*.c .build-cpu train_gpt_cpu tokenize "$W/lone/repo/" 2>/dev/null
out=$(DATA_DIR="$DATA" bash "$W/lone/repo/scripts/tinyshakespeare.sh" -e d2 -x 2 -v 0 -s 0 2>&1); rc=$?
printf '#!/bin/sh\necho "curl: (6) Could not resolve host" >&2; exit 6\n' > "$W/bin/curl"; chmod +x "$W/bin/curl"
out2=$(PATH="$W/bin:$PATH" DATA_DIR="$W/empty" bash "$W/lone/repo/scripts/tinyshakespeare.sh" "$W/lone/d2" -x 2 2>&1); rc2=$?
[ $rc -eq 0 ] && grep -q "step     2/2" <<<"$out" && ! grep -q downloading <<<"$out" && [ $rc2 -ne 0 ] \
  && grep -q "error: could not download tinyshakespeare.txt from https://.*; put it in $W/lone/d2/ or ../shared/data, or set DATA_DIR" <<<"$out2" \
  && [ -z "$(ls -A "$W/lone/d2")" ] \
  && ok "no ../shared/data: the files come from DATA_DIR; a failed download is an error naming the file and where to put it, with nothing left behind" \
  || bad "DATA_DIR and a failed download" "$out $out2"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
