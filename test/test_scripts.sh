#!/usr/bin/env bash
# test_scripts.sh DATA: the Tiny Shakespeare script end to end on real text (a short run): shards
# are made, the model trains on them, the validation loss falls, and samples decode as text.
set -u
cd "$(dirname "$0")/.."
DATA=$1
SHARED_DIRS=$(sed -n 's/^SHARED_DIRS="\(.*\)"$/\1/p' test/lib.sh)  # the headers' folders, as lib.sh names them
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
cp -rp scripts $SHARED_DIRS cpu tokenizer Makefile ./*.h ./*.c .build-cpu train_gpt_cpu tokenize "$W/repo/" 2>/dev/null
ln -s "$(realpath "$DATA")" "$W/shared/data"
out=$(bash "$W/repo/scripts/tinyshakespeare.sh" -e d2 -x 3 -v 0 -s 0 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "step     3/3" <<<"$out" && [ -f "$W/repo/data/tinyshakespeare/train_000000.bin" ] \
  && ok "scripts/tinyshakespeare.sh -e d2 -x 3 ...: flags without a data directory reach the trainer" || bad "flags pass through" "$out"
# a checkout with no ../shared/data: the files come from $DATA_DIR (as make test reads it), and where they are
# nowhere and the download fails (a curl that cannot reach the host), the error names the file and the ways out
mkdir -p "$W/lone/repo" "$W/bin" "$W/empty"
cp -rp scripts $SHARED_DIRS cpu tokenizer Makefile ./*.h ./*.c .build-cpu train_gpt_cpu tokenize "$W/lone/repo/" 2>/dev/null
out=$(DATA_DIR="$DATA" bash "$W/lone/repo/scripts/tinyshakespeare.sh" -e d2 -x 2 -v 0 -s 0 2>&1); rc=$?
printf '#!/bin/sh\necho "curl: (6) Could not resolve host" >&2; exit 6\n' > "$W/bin/curl"; chmod +x "$W/bin/curl"
out2=$(PATH="$W/bin:$PATH" DATA_DIR="$W/empty" bash "$W/lone/repo/scripts/tinyshakespeare.sh" "$W/lone/d2" -x 2 2>&1); rc2=$?
[ $rc -eq 0 ] && grep -q "step     2/2" <<<"$out" && ! grep -q downloading <<<"$out" && [ $rc2 -ne 0 ] \
  && grep -q "error: could not download tinyshakespeare.txt from https://.*; put it in $W/lone/d2/ or ../shared/data, or set DATA_DIR" <<<"$out2" \
  && [ -z "$(ls -A "$W/lone/d2")" ] \
  && ok "no ../shared/data: the files come from DATA_DIR; a failed download is an error naming the file and where to put it, with nothing left behind" \
  || bad "DATA_DIR and a failed download" "$out $out2"
# dev/optimizer_study.py (Muon against AdamW, steps to a loss): its judgement on logs written by hand, whose answers
# are known: AdamW's best lr is the lowest *final* validation loss (lr 1e-2 dips lower mid-run, then ends higher),
# a diverged run (null losses) never wins, Muon's steps to AdamW's final loss is the first validation at or below it
# (step 4 equals it exactly), the last line of a step repeated by a resume wins, and the seconds are the step
# times summed through that step (100·s ms at step s: 1.0 s to step 4, 3.6 s to step 8)
mkdir -p "$W/study"
${PYTHON:-python3} - "$W/study" <<'PYEOF'
import json, sys
vals = {"adamw_lr0.001": {0: 11, 2: 9, 4: 8, 6: 7, 8: 6.0}, "adamw_lr0.003": {0: 11, 2: 8, 4: 7, 6: 6, 8: 5.5},
        "adamw_lr0.01": {0: 11, 2: 6, 4: 5.0, 6: 5.4, 8: 5.8}, "muon_lr0.001": {0: 11, 2: 8, 4: 6.5, 6: 6, 8: 5.6},
        "muon_lr0.003": {0: 11, 2: 5.6, 4: 5.5, 6: 5.2, 8: 5.1}, "muon_lr0.01": {0: 11, 2: 4.0, 4: None, 6: None, 8: None}}
for name, v in vals.items():
    with open(f"{sys.argv[1]}/d4_{name}.jsonl", "w") as f:
        f.write(json.dumps({"optimizer": name}) + "\n")
        for s in range(9):
            if s > 0:
                f.write(json.dumps({"step": s, "loss": 9.0, "ms": 100.0 * s, "time_ms": {"optimizer": 10.0}}) + "\n")
            if s == 4 and name == "muon_lr0.003":
                f.write(json.dumps({"step": 4, "val_loss": 5.9}) + "\n")  # a run resumed from step 3 logs step 4 again
            if s in v:
                f.write(json.dumps({"step": s, "val_loss": v[s]}) + "\n")
PYEOF
out=$(${PYTHON:-python3} dev/optimizer_study.py --from-logs --out "$W/study" --models d4 --lrs 1e-3,3e-3,1e-2 -x 8 -v 2 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^adamw        0.003     5.5000      3.6         10.0  <- best$" <<<"$out" \
  && grep -q "^muon         0.003     5.1000      3.6         10.0  <- best$" <<<"$out" \
  && grep -q "^AdamW (lr 0.003) ends at val 5.5000 after 8 steps, 3.6 s$" <<<"$out" \
  && grep -q "^Muon (lr 0.003) reaches it at step 4 (0.50 of AdamW's steps; goal <= 0.67), 1.0 s (0.28 of AdamW's seconds)$" <<<"$out" \
  && ok "optimizer_study.py on hand-written logs: best lr by final loss (not a mid-run dip, not a diverged run), Muon's steps and seconds to AdamW's final loss" \
  || bad "optimizer_study.py's judgement on hand-written logs" "$out"
# and end to end on real runs (d2, 4 steps, two lrs each): the shards, the runs, the report, the plot (where
# matplotlib is: the plot is the one part that needs it)
PY=${PYTHON:-python3}
plot=(); $PY -c "import matplotlib" 2>/dev/null && plot=(--plot "$W/study2/plot.png")
out=$($PY dev/optimizer_study.py --data-dir "$DATA" --tokenize ./tokenize --out "$W/study2" --models d2 --lrs 1e-3,3e-3 \
  -x 4 -b 4 -t 32 -u 1 -v 2 -m 1 --result "$W/study2/result.txt" "${plot[@]}" 2>&1); rc=$?
rows=$(grep -cE "^(adamw|muon) +0\.00[13] +[0-9.]+ +[0-9.]+ +[0-9.]+" "$W/study2/result.txt" 2>/dev/null)
[ $rc -eq 0 ] && [ "$rows" = 4 ] && grep -q "^AdamW (lr 0.00[13]) ends at val" "$W/study2/result.txt" && { [ ${#plot[@]} -eq 0 ] || [ -s "$W/study2/plot.png" ]; } \
  && ok "optimizer_study.py end to end on d2 (4 runs of 4 steps): shards, runs, report$([ ${#plot[@]} -gt 0 ] && echo " and plot" || echo "; no plot: $PY has no matplotlib")" \
  || bad "optimizer_study.py end to end" "$out"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
