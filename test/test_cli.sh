#!/usr/bin/env bash
# test_cli.sh: the trainer as a user meets it: flags, errors on bad input, checkpoints, exact resume,
# preemption by signal, and learning on the embedded corpus. Run from the repo root after `make`.
set -u
BIN=${BIN:-./train_gpt_cpu}
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/test_cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0; fail=0; skipped=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
skip() { echo "SKIP $1"; skipped=$((skipped+1)); }
# bad NAME DETAIL: the detail's first 3 lines and its last 8 (a failure is often at the end of a long output)
bad() {
  echo "FAIL $1"
  if [ -n "${2:-}" ]; then
    if [ "$(wc -l <<<"$2")" -gt 11 ]; then { head -3 <<<"$2"; echo "[...]"; tail -8 <<<"$2"; } | sed 's/^/    /'
    else sed 's/^/    /' <<<"$2"; fi
  fi
  fail=$((fail+1))
}

# expect_error NAME EXPECTED_TEXT ARGS...: non-zero exit and a message containing EXPECTED_TEXT, in
# the user's words: bad input is not a bug, so the message carries no source location
expect_error() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$($BIN "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && ! grep -qE "\.(h|c|cu):[0-9]+|internal fault" <<<"$out"; then ok "$name"
  else bad "$name (rc $rc, wanted '$want' and no source location)" "$out"; fi
}

# the JSON-lines loss and gradient norm of each step, one "step loss norm" per line (a bug that scales the
# gradient leaves the losses of the first steps alone, and AdamW nearly blind to it: the norm is not)
losses() { $PY -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "loss" in d: print(d["step"], repr(d["loss"]), repr(d.get("norm")))
' "$1"; }
# the sampled texts of a run's console output, one per line
samples() { grep '^sample: ' "$1"; }

# --- flags -------------------------------------------------------------------------------------
out=$($BIN --help); rc=$?
missing=""
for f in -i/--train-data -j/--val-data -e/--init -o/--out-dir -b/--micro-batch -t/--seq-len -d/--total-batch-tokens \
         --grad-accum -x/--steps -l/--lr -u/--warmup -q/--lr-final-frac -k/--lr-schedule -c/--weight-decay --beta1 \
         --beta2 --eps --grad-clip -r/--recompute --seed --shuffle -v/--val-every -m/--val-batches -s/--sample-every \
         -g/--gen-tokens -n/--checkpoint-every -y/--resume --log --help; do
  for part in ${f//\// }; do grep -qE -- "(^|[ ,])$part( |,|$)" <<<"$out" || missing="$missing $part"; done
done
[ $rc -eq 0 ] && [ -z "$missing" ] && ok "--help exits 0 and lists every flag" || bad "--help lists every flag (missing:$missing)"

undocumented=""
for f in $(grep -oE -- '--[a-z0-9-]+' <<<"$out" | sort -u); do grep -qE -- "(\`|, )$f( |\`)" README.md || undocumented="$undocumented $f"; done
[ -z "$undocumented" ] && ok "README's flag table documents every flag --help lists" || bad "flags missing from README:$undocumented"

expect_error "unknown flag is named" "unknown flag '--bogus'" --bogus 1
expect_error "non-integer value names flag and value" "-b/--micro-batch: 'abc' is not an integer" -b abc
expect_error "non-number lr is refused" "-l/--lr: '1e-3x' is not a number" --lr 1e-3x
expect_error "unknown schedule is refused" "-k/--lr-schedule: 'cosin' is not one of" -k cosin
expect_error "recompute level out of range" "-r/--recompute: must be 0, 1, 2 or 3" -r 4
expect_error "missing value is refused" "flag --seed needs a value" --seed
expect_error "total batch must divide" "-d/--total-batch-tokens: total batch tokens 1000 != micro-batch 4 x seq 64 x accumulation A x data-parallel 1" -b 4 -t 64 -d 1000
expect_error "conflicting -d and --grad-accum" "total batch tokens 512 != micro-batch 4 x seq 64 x accumulation 3" -b 4 -t 64 -d 512 --grad-accum 3
expect_error "seq longer than the model" "-t/--seq-len: 2048 is longer than the model's maximum sequence length 1024" -t 2048 -x 1
expect_error "resume needs an out dir" "-y/--resume: needs -o/--out-dir" -y 1
expect_error "an unquoted glob's extra files: quote the glob" "-i/--train-data: '$W/b_2.bin' after its value: an unquoted glob that the shell expanded into several files? quote the glob (-i 'data/train_*.bin')" -i "$W/b_1.bin" "$W/b_2.bin" -x 1
# --pp or --tp in one process (a first try, or a build without MPI): how to get ranks, not just the arithmetic; and
# --pp 0 is not a stage count (it once read "0 stages do not divide the world of 1 ranks")
expect_error "--pp 2 in one process says how to start ranks or plan them" "--pp: 2 stages do not divide the world of 1 rank; one process is a world of 1: start the ranks with mpirun -np N, or plan the layout in one process with --dry-run --world N" --pp 2 -x 1
expect_error "--sp 1 given with a sequence --tp does not divide names --sp 0" "--sp 1: -t/--seq-len 63 is not a multiple of --tp 2 (sequence parallelism keeps T / tp positions per rank); pass --sp 0 to replicate the sequence instead" --tp 2 --sp 1 -t 63 -e llama-d2 --dry-run --world 2
out=$($BIN --optimizer muon -e llama-d2 --dry-run 2>&1)
grep -q "| Muon + AdamW state [0-9.]* MiB |" <<<"$out" && ! grep -q "| AdamW state" <<<"$out" \
  && ok "the memory plan names Muon's state (Muon + AdamW state), not AdamW's alone" || bad "the memory plan's optimizer label under Muon" "$out"
expect_error "--pp 0 is refused as a stage count" "--pp: 0, expected a number of pipeline stages >= 1" --pp 0 -x 1
expect_error "a stray word is an unexpected argument" "unexpected argument 'foo': every value follows its flag" -x 1 foo
expect_error "-e d5000: a depth too large, not a file" "-e/--init: d5000: depth 5000 is too large: a fresh GPT-2 has depth 1 to 1000" -e d5000

# --- bad files ---------------------------------------------------------------------------------
expect_error "missing model file is named with its flag" "-e/--init: $W/nope.bin: cannot open: No such file or directory (expected an llm.c model file, or dN" -e "$W/nope.bin"
expect_error "missing tokenizer file is named with its flag" "--tokenizer: $W/nope.bin: cannot open" --tokenizer "$W/nope.bin"
expect_error "unwritable log is named with its flag" "--log: $W/no/dir.jsonl: cannot open for writing" --log "$W/no/dir.jsonl" -x 1
mkdir -p "$W/adir"
expect_error "directory as model file" "$W/adir: is a directory" -e "$W/adir"
head -c 5000 /dev/urandom > "$W/garbage.bin"
expect_error "model file with a wrong magic" "$W/garbage.bin: bad magic" -e "$W/garbage.bin"
$PY - "$W" <<'PYEOF'
import struct, sys, os
w = sys.argv[1]
def shard(path, tokens, magic=20240520, version=1, count=None, cut=0):
    h = [0]*256; h[0] = magic; h[1] = version; h[2] = len(tokens) if count is None else count
    data = struct.pack('<256i', *h) + struct.pack('<%dH' % len(tokens), *tokens)
    open(path, 'wb').write(data[:len(data)-cut] if cut else data)
import random
random.seed(0)
toks = [random.randrange(64) for _ in range(5000)]
shard(f'{w}/good.bin', toks)
shard(f'{w}/trunc.bin', toks, cut=100)
shard(f'{w}/foreign.bin', toks, magic=12345)
shard(f'{w}/v2.bin', toks, version=2)
shard(f'{w}/big_token.bin', toks[:100] + [60000] + toks[101:])
shard(f'{w}/tiny.bin', toks[:10])
# a model too short for what its header promises
h = [0]*256; h[0:8] = [20240326, 3, 64, 64, 2, 2, 128, 128]
open(f'{w}/short_model.bin', 'wb').write(struct.pack('<256i', *h) + b'\0' * 4000)
PYEOF
expect_error "truncated shard is named" "$W/trunc.bin: header says 5000 tokens" -i "$W/trunc.bin" -x 1
expect_error "foreign shard is named" "$W/foreign.bin: bad magic 12345" -i "$W/foreign.bin" -x 1
expect_error "shard version is checked" "$W/v2.bin: shard version 2" -i "$W/v2.bin" -x 1
expect_error "no shard matches the glob" "-i/--train-data: no file matches '$W/none_*.bin'" -i "$W/none_*.bin"
expect_error "token outside the vocabulary" "$W/big_token.bin: token 60000 at position 100" -i "$W/big_token.bin" -e d2 -b 1 -t 4096 -x 1 -t 1024 -v 0 -s 0 -b 4
expect_error "shard too small for a micro-batch, naming tokenize's --val-tokens" "$W/tiny.bin: too few tokens for one micro-batch of B*T+1 = 513 tokens (largest shard has 10); lower -b/-t, or give the split more tokens (./tokenize shards --val-tokens" -i "$W/tiny.bin" -x 1
expect_error "model shorter than its header says" "$W/short_model.bin: 5024 bytes, but the header's shape needs" -e "$W/short_model.bin"
# attention's masks (issue 49): each bad input names the flag and the numbers
expect_error "--attn-window 0 is refused" "--attn-window 0: a window is at least 1 key" --attn-window 0 -x 1
expect_error "a window beyond the context is refused" "--attn-window 100: beyond the context, -t/--seq-len 64" --attn-window 100 -x 1
expect_error "a pattern that does not fit the layers" "--attn-window-pattern LLG: 3 entries do not fit the model's 2 layers" --attn-window 8 --attn-window-pattern LLG -x 1
expect_error "a pattern's L without --attn-window" "--attn-window-pattern GL: entry 1 is L, the --attn-window, which is not given" --attn-window-pattern GL -x 1
expect_error "--doc-mask on the synthetic corpus" "--doc-mask: the built-in synthetic corpus has no document separator" --doc-mask -x 1
expect_error "--doc-mask on a shard without the separator's record names it and --doc-token" "--doc-mask: -i/--train-data $W/good.bin records no document separator in its header" --doc-mask -i "$W/good.bin" -x 1
expect_error "--doc-token beyond the vocabulary" "--doc-token 99999: outside the model's vocabulary of" --doc-mask --doc-token 99999 -i "$W/good.bin" -x 1
expect_error "--doc-rope-restart without --doc-mask" "--doc-rope-restart: only with --doc-mask" --doc-rope-restart -x 1
expect_error "--doc-rope-restart on a model without RoPE" "--doc-rope-restart: the model (-e/--init d2) has learned positions, not RoPE" --doc-mask --doc-token 5 --doc-rope-restart -i "$W/good.bin" -x 1
$BIN --doc-mask --doc-token 5 --attn-window 16 -i "$W/good.bin" -x 2 -v 0 -s 0 -o "$W/masked" > "$W/masked.out" 2>&1
expect_error "a resume with other masks is refused, naming the flags" "saved by a run with --doc-mask 1 (separator 5), --doc-rope-restart 0 and sliding windows; this run has --doc-mask 0" --attn-window 16 -i "$W/good.bin" -x 3 -v 0 -s 0 -o "$W/masked" -y 1
printf '{"context_tokens": [1, 2], "ending_tokens": [[3], [4]], "label": 0}\n{"context_tokens": [1, 70], "ending_tokens": [[3], [4]], "label": 1}\n' > "$W/oov_mc.jsonl"
out=$($BIN -x 2 -v 1 -s 0 --eval-mc "$W/oov_mc.jsonl" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "oov_mc.jsonl line 2: \"context_tokens\" has token 70, outside the model's vocabulary of 64" <<<"$out" && ! grep -q "val loss" <<<"$out" \
  && ok "an --eval-mc file with a token outside the vocabulary stops the run at its start, before step 0's validation" || bad "--eval-mc checked at start (rc $rc)" "$out"
mkdir -p "$W/ck_bad"
$BIN -i "$W/trunc.bin" -o "$W/ck_bad" -n 1 -x 2 >/dev/null 2>&1
[ -z "$(ls -A "$W/ck_bad")" ] && ok "a failed start writes nothing to the out dir" || bad "a failed start writes nothing" "$(ls "$W/ck_bad")"

# --- the tokenizer against the model, at start (issue 44) ---------------------------------------------------
# A tokenizer of more ids than the model (V 49152 with GPT-2's 50257) used to train and then stop at the first sample
# with an internal fault; shards of a 49152-token tokenizer fed to a model of 50257 trained at loss 10 without a word.
# Both are errors at start naming the flag, both files and sizes, before -o is made. A model up to 1% larger than
# its tokenizer (padding rows, as Qwen 2.5's) is taken silently; a fresh preset larger than the data's tokenizer warns.
# tokdir DIR V EOT [MAXID [EXTRA [WIDTH]]]: DIR/tokenizer.bin of V tokens, and train/val shards of ids below MAXID
tokdir() { $PY - "$@" <<'PYEOF'
import os, random, struct, sys
d, V, eot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
maxid = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
extra = int(sys.argv[5]) if len(sys.argv) > 5 else -1
width = int(sys.argv[6]) if len(sys.argv) > 6 else 2
os.makedirs(d, exist_ok=True)
with open(d + "/tokenizer.bin", "wb") as f:
    f.write(struct.pack("<256I", 20240328, 2, V, eot, *[0] * 252))
    for i in range(V): f.write(bytes([len(b" t%d" % i)]) + b" t%d" % i)
rng = random.Random(V)
for split, n in (("train", 3000), ("val", 1000)):
    toks = [rng.randrange(maxid) for _ in range(n)]
    if extra >= 0: toks[7] = extra
    magic, version, fmt = (20240520, 1, "H") if width == 2 else (20240801, 7, "I")
    open("%s/%s_000000.bin" % (d, split), "wb").write(struct.pack("<256i", magic, version, n, *[0] * 253) + struct.pack("<%d%s" % (n, fmt), *toks))
PYEOF
}
tokdir "$W/tg" 50257 50256          # GPT-2's size
tokdir "$W/ts" 49152 0              # SmolLM's size
tokdir "$W/tq" 50000 0              # 257 fewer than GPT-2's: within 1%
tokdir "$W/tx" 50000 0 1000 50100   # a shard id beyond the tokenizer beside it (but within a GPT-2 model)
tokdir "$W/tw" 70000 0              # more ids than uint16 shards hold
small=(-b 1 -t 16 -x 1 -v 0 -s 0)
$BIN -e d2 -i "$W/tg/train_*.bin" "${small[@]}" -o "$W/m50257" > /dev/null 2>&1
$BIN -e d2 -i "$W/ts/train_*.bin" "${small[@]}" -o "$W/m49152" > /dev/null 2>&1
g_model=$W/m50257/model_00000001.bin s_model=$W/m49152/model_00000001.bin
expect_error "--tokenizer larger than the model (GPT-2's 50257 on a V 49152 model): at start, naming flag, files and sizes" \
  "--tokenizer $W/tg/tokenizer.bin: a vocabulary of 50257 tokens, but the model (-e/--init $s_model) has 49152: ids 49152 to 50256 (the end-of-text token among them)" \
  -e "$s_model" --tokenizer "$W/tg/tokenizer.bin" -b 1 -t 16 -x 2 -s 2 -v 0 -o "$W/o_tok4"
[ ! -e "$W/o_tok4" ] && ok "... and -o is not created" || bad "a wrong --tokenizer leaves no -o" "$(ls -la "$W/o_tok4")"
expect_error "shards of a 49152-token tokenizer on a trained model of 50257: an error naming both files and sizes" \
  "-i/--train-data: the shards' tokenizer $W/ts/tokenizer.bin: a vocabulary of 49152 tokens, but the model (-e/--init $g_model) has 50257: it was made for another tokenizer" \
  -e "$g_model" -i "$W/ts/train_*.bin" "${small[@]}" -o "$W/o_tok5"
[ ! -e "$W/o_tok5" ] && ok "... and -o is not created" || bad "a wrong shards' tokenizer leaves no -o" "$(ls -la "$W/o_tok5")"
expect_error "--tokenizer and the shards' own tokenizer differ" \
  "--tokenizer $W/tg/tokenizer.bin has 50257 tokens, but the train shards' own tokenizer $W/ts/tokenizer.bin (beside them) has 49152" \
  -e d2 -i "$W/ts/train_*.bin" --tokenizer "$W/tg/tokenizer.bin" "${small[@]}"
expect_error "train and validation shards of different tokenizers" \
  "-j/--val-data: the validation shards' tokenizer $W/tg/tokenizer.bin has 50257 tokens, but the train shards' $W/ts/tokenizer.bin has 49152" \
  -e d2 -i "$W/ts/train_*.bin" -j "$W/tg/val_*.bin" "${small[@]}"
expect_error "a shard id beyond the tokenizer beside it" \
  "-i/--train-data: $W/tx/train_000000.bin: token 50100 at position 7 is outside the vocabulary of the tokenizer beside it, $W/tx/tokenizer.bin (50000 tokens)" \
  -e "$g_model" -i "$W/tx/train_*.bin" "${small[@]}"
expect_error "uint16 shards beside a tokenizer of more than 65,536 ids" \
  "-i/--train-data: $W/tw/train_000000.bin: uint16 tokens, which cannot hold the ids of the tokenizer beside it, $W/tw/tokenizer.bin (70000 tokens)" \
  -e d2 -i "$W/tw/train_*.bin" "${small[@]}" --dry-run
out=$($BIN -e "$g_model" -i "$W/tq/train_*.bin" -j "$W/tq/val_*.bin" "${small[@]}" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^step     1/1" <<<"$out" && ! grep -qE "warning|error" <<<"$out" \
  && ok "a model 257 rows (under 1%) larger than the data's tokenizer (padding, as Qwen 2.5's) trains without a word" || bad "padding rows taken silently (rc $rc)" "$out"
out=$($BIN -e qwen2.5-0.5b -i "$W/tg/train_*.bin" "${small[@]}" --dry-run 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "warning: -i/--train-data: the shards' tokenizer $W/tg/tokenizer.bin: a vocabulary of 50257 tokens, but the model (-e/--init qwen2.5-0.5b (fresh weights)) has 151936: its embedding rows 50257 to 151935 are never used" <<<"$out" \
  && ok "a fresh preset larger than the data's tokenizer: a warning, and the run goes on" || bad "a fresh preset's unused rows warned (rc $rc)" "$out"

# a Hugging Face model given where an llm.c file goes: named, with the converter (-e) or the file to give (--tokenizer);
# and an -o made for a run that stops at start is removed again (parents included)
mkdir -p "$W/hfm"
printf '{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 49152}\n' > "$W/hfm/config.json"
printf '{"tokenizer_class": "GPT2Tokenizer", "model_max_length": 2048}\n' > "$W/hfm/tokenizer_config.json"
$PY -c 'import json, struct, sys; h = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode(); open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(4))' "$W/hfm/model.safetensors"
expect_error "-e a Hugging Face directory points to scripts/import_hf.py" "-e/--init: $W/hfm: a Hugging Face model directory, not an llm.c model file: convert it first with scripts/import_hf.py $W/hfm model.bin" -e "$W/hfm"
expect_error "-e model.safetensors points to scripts/import_hf.py with its directory" "-e/--init: $W/hfm/model.safetensors: a safetensors file, not an llm.c model file: a Hugging Face model is converted first, from its directory: scripts/import_hf.py $W/hfm model.bin" -e "$W/hfm/model.safetensors"
expect_error "--tokenizer config.json: not a tokenizer, and what is" "--tokenizer $W/hfm/config.json: not a tokenizer: a model's configuration (config.json). --tokenizer takes a Hugging Face tokenizer.json" --tokenizer "$W/hfm/config.json"
expect_error "--tokenizer tokenizer_config.json: not a tokenizer's vocabulary" "--tokenizer $W/hfm/tokenizer_config.json: not a tokenizer: a tokenizer's settings (tokenizer_config.json), not its vocabulary" --tokenizer "$W/hfm/tokenizer_config.json"
out=$($BIN -x 1 -o "$W/made/a/b" --eval-mc "$W/oov_mc.jsonl" 2>&1); rc=$?
[ $rc -ne 0 ] && [ ! -e "$W/made" ] && ok "an -o made for a run that stops at start (a bad --eval-mc) is removed again, its new parents too" \
  || bad "an -o made for a failed start is removed (rc $rc)" "$(ls -R "$W/made" 2>&1) $out"

# --- dry run -----------------------------------------------------------------------------------
out=$($BIN --dry-run -o "$W/dry" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "memory plan per rank" <<<"$out" && ! grep -q "^step" <<<"$out" && [ -z "$(ls -A "$W/dry" 2>/dev/null)" ]; then
  ok "--dry-run prints the memory plan and trains nothing"; else bad "--dry-run" "$out"; fi

# --- the out dir: created with its parents, and the run's end always saved there ---------------------
# -o without -n: the final checkpoint is written (so scripts/export_hf.py finds it), and the run says at start
# that nothing periodic will be; -x under the -u warmup is announced (the peak rate is never reached)
out=$($BIN -x 3 -v 0 -s 0 -o "$W/deep/er/out" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(ls "$W/deep/er/out" 2>/dev/null | tr '\n' ' ')" = "model_00000003.bin state_00000003.bin " ] \
   && grep -q "checkpoints: $W/deep/er/out after step 3 only .*nothing periodic is written" <<<"$out"; then
  ok "-o a/b/c without -n: missing parents created, the final checkpoint written, 'nothing periodic' said at start"
else bad "-o without -n saves the final checkpoint into a new nested dir (rc $rc)" "$(ls -R "$W/deep" 2>&1; grep -E 'checkpoint|error' <<<"$out")"; fi
grep -q "note: -x/--steps 3 is shorter than the -u/--warmup of 30 steps: the learning rate climbs to 3.000e-04 and never reaches its peak" <<<"$out" \
  && ok "-x shorter than the -u warmup is announced" || bad "-x under the warmup announced" "$out"
if ! $PY -c "import numpy" 2>/dev/null; then
  skip "scripts/export_hf.py on that final checkpoint: $PY cannot import numpy (pip install numpy)"
else
  r=$($PY scripts/export_hf.py "$W/deep/er/out" "$W/deep_hf" --no-tokenizer 2>&1) && [ -s "$W/deep_hf/model.safetensors" ] \
    && ok "scripts/export_hf.py finds that final checkpoint" || bad "export_hf.py on an -o dir without -n" "$r"
fi
touch "$W/plainfile"
expect_error "an -o path under a file names -o/--out-dir" "-o/--out-dir $W/plainfile/x: cannot create directory: Not a directory" -x 1 -o "$W/plainfile/x"

# --- checkpoints and exact resume --------------------------------------------------------------
# sampling every 3 steps: the checkpoint at step 4 holds a sampling RNG one sample along, so a resume that
# restarted the RNG instead of restoring it would sample differently at steps 6, 9 and 12
common=(-e d2 -b 4 -t 32 --grad-accum 2 -r 2 -x 12 -v 4 -s 3 -g 8 -n 4 --keep-checkpoints 5)
$BIN "${common[@]}" -o "$W/full" --log "$W/full.jsonl" >"$W/full.out" 2>&1 || bad "uninterrupted run" "$(tail "$W/full.out")"
n=$(ls "$W/full"/state_*.bin 2>/dev/null | wc -l)
[ "$n" -eq 3 ] && [ -f "$W/full/model_00000008.bin" ] && ! ls "$W/full"/*.tmp >/dev/null 2>&1 \
  && ok "checkpoints every 4 steps: model_ and state_ pairs, no temporaries" || bad "checkpoint files" "$(ls "$W/full")"
mkdir -p "$W/resumed"
cp "$W/full/model_00000004.bin" "$W/full/state_00000004.bin" "$W/resumed/"
$BIN "${common[@]}" -o "$W/resumed" -y 1 --log "$W/resumed.jsonl" >"$W/resumed.out" 2>&1
if grep -q "resume: step 4" "$W/resumed.out" && [ "$(losses "$W/full.jsonl" | tail -n 8)" = "$(losses "$W/resumed.jsonl")" ]; then
  ok "resumed at step 4: steps 5-12 have bit-identical losses and gradient norms"; else bad "exact resume" "$(diff <(losses "$W/full.jsonl" | tail -n 8) <(losses "$W/resumed.jsonl"))"; fi
[ "$(samples "$W/full.out" | wc -l)" -eq 4 ] && [ "$(samples "$W/full.out" | tail -n 3)" = "$(samples "$W/resumed.out")" ] \
  && ok "resumed at step 4: the samples at steps 6, 9 and 12 are the uninterrupted run's (the sampling RNG is restored)" \
  || bad "samples after resume" "$(diff <(samples "$W/full.out" | tail -n 3) <(samples "$W/resumed.out"))"
cmp -s "$W/full/model_00000012.bin" "$W/resumed/model_00000012.bin" && cmp -s "$W/full/state_00000012.bin" "$W/resumed/state_00000012.bin" \
  && ok "resumed run ends with byte-identical model and optimizer state" || bad "final checkpoint identical after resume"
$BIN "${common[@]}" -x 20 -o "$W/keep" --keep-checkpoints 2 >/dev/null 2>&1
[ "$(ls "$W/keep" | tr '\n' ' ')" = "model_00000016.bin model_00000020.bin state_00000016.bin state_00000020.bin " ] \
  && ok "--keep-checkpoints 2 keeps the newest two" || bad "--keep-checkpoints" "$(ls "$W/keep")"
expect_error "resume with another batch layout is refused" "saved with micro-batch 4, seq 32, 2 micro-batches per step" "${common[@]}" -b 2 -o "$W/resumed" -y 1

# each resume refusal names the flags that resume it, and those flags then do (issue 50): a llama-d4 run with 4
# micro-batches per step, resumed first with -e's default (d2), then without --grad-accum; switching the optimizer
# names the weights-only start, -e with the checkpoint's model file, which then trains
rz=(-b 4 -t 32 -v 0 -s 0)
$BIN -e llama-d4 "${rz[@]}" --grad-accum 4 -x 2 -o "$W/rz" > /dev/null 2>&1
out=$($BIN "${rz[@]}" -x 3 -o "$W/rz" -y 1 2>&1)
out2=$($BIN -e llama-d4 "${rz[@]}" -x 3 -o "$W/rz" -y 1 2>&1)
out3=$($BIN -e llama-d4 "${rz[@]}" --grad-accum 4 -x 3 -o "$W/rz" -y 1 2>&1)
grep -qF "this run's (-e d2, the default without -e) is L 2 | C 128" <<<"$out" && grep -qF "pass -e llama-d4 (or -e $W/rz/model_00000002.bin)" <<<"$out" \
  && grep -qF "pass -b 4 -t 32 --grad-accum 4 to resume it" <<<"$out2" && grep -q "resume: step 2 from .* (saved by 1 data-parallel rank)" <<<"$out3" \
  && ok "resume refusals name both shapes and '-e llama-d4', then '--grad-accum 4'; with both the run resumes at step 2 (saved by 1 data-parallel rank)" \
  || bad "resume refusals name the flags that resume" "$out
$out2
$out3"
out=$($BIN -e llama-d4 "${rz[@]}" --grad-accum 4 -x 4 --optimizer muon -o "$W/rz" -y 1 2>&1)
start=$(grep -oE -- "-e [^ ]+/model_00000003.bin --optimizer muon" <<<"$out")
out2=$([ -n "$start" ] && $BIN $start "${rz[@]}" --grad-accum 4 -x 1 -o "$W/rz-muon" 2>&1)
grep -q "step     1/1" <<<"$out2" && [ -f "$W/rz-muon/state_00000001.bin" ] \
  && ok "switching the optimizer on resume names the weights-only start ($start), which trains" \
  || bad "the optimizer refusal names the weights-only start" "$out
$out2"

# issue 50's two runs into one -o: the second, a fresh run, stops at start (before its memory plan) naming -y 1 and a
# new folder, and the first run's checkpoints are untouched; --replace-checkpoints 1 moves them aside whole and
# starts; -y 1 then resumes the run the folder now holds
$BIN -x 20 -n 10 -o "$W/D" -v 0 -s 0 > "$W/first.out" 2>&1
sums() { (cd "$1" && md5sum model_*.bin state_*.bin 2>/dev/null); }
before=$(sums "$W/D")
out=$($BIN -x 5 -o "$W/D" -v 0 -s 0 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "pass -y 1 to resume that run, or a new -o folder" <<<"$out" && grep -qF -- "--replace-checkpoints 1" <<<"$out" \
  && ! grep -q "memory plan" <<<"$out" && [ -n "$before" ] && [ "$(sums "$W/D")" = "$before" ] && [ "$(ls "$W/D" | wc -l)" -eq 4 ] \
  && ok "a fresh run into an -o holding another run's checkpoints stops at start naming -y 1 and a new folder; steps 10 and 20 untouched" \
  || bad "a fresh run into an -o holding another run's checkpoints is refused, nothing lost (rc $rc)" "$out
$(ls "$W/D")"
out=$($BIN -x 5 -o "$W/D" -v 0 -s 0 --replace-checkpoints 1 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qF "moved the 2 checkpoints in $W/D (steps 10 to 20) aside to $W/D/replaced-1/" <<<"$out" && [ "$(sums "$W/D/replaced-1")" = "$before" ] \
  && [ "$(ls "$W/D"/*.bin | tr '\n' ' ')" = "$W/D/model_00000005.bin $W/D/state_00000005.bin " ] \
  && ok "--replace-checkpoints 1 moves them, byte for byte, to D/replaced-1/ and the run's step 5 is kept" \
  || bad "--replace-checkpoints 1 moves them aside (rc $rc)" "$out
$(ls -R "$W/D")"
out=$($BIN -x 7 -o "$W/D" -v 0 -s 0 -y 1 2>&1)
grep -qF "resume: step 5 from $W/D/state_00000005.bin" <<<"$out" && [ -f "$W/D/state_00000007.bin" ] \
  && ok "-y 1 then resumes the run the folder holds (step 5 to 7)" || bad "-y 1 resumes after the move" "$out"

# resuming a finished run says so and does nothing; a longer -x keeps the saved schedule unless --lr-steps says otherwise
out=$($BIN "${common[@]}" -o "$W/full" -y 1 --log "$W/again.jsonl" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "this run is complete, nothing to train" <<<"$out" && ! grep -q "val loss" <<<"$out" && [ ! -e "$W/again.jsonl" ] \
  && ok "resuming a finished run says it is complete and trains, validates and writes nothing" || bad "resume a finished run" "$out"
mkdir -p "$W/longer" "$W/stretched"
cp "$W/full/model_00000012.bin" "$W/full/state_00000012.bin" "$W/longer/"
cp "$W/full/model_00000012.bin" "$W/full/state_00000012.bin" "$W/stretched/"
# cosine over 12 steps (warmup 2) from 3e-3 to 3e-3 x 0.1: past its end the rate stays 3e-4
out=$($BIN "${common[@]}" -u 2 -x 16 -o "$W/longer" -y 1 --log "$W/longer.jsonl" 2>&1)
lrs=$($PY -c 'import json,sys; print(" ".join("%.6g" % d["lr"] for d in map(json.loads, open(sys.argv[1])) if "loss" in d))' "$W/longer.jsonl")
grep -q "learning-rate schedule stays the saved run's (cosine over 12 steps); pass --lr-steps 16" <<<"$out" && [ "$lrs" = "0.0003 0.0003 0.0003 0.0003" ] \
  && ok "-x raised on resume: the saved 12-step schedule is kept and said so (lr $lrs)" || bad "-x raised on resume keeps the schedule" "$out $lrs"
$BIN "${common[@]}" -x 16 -v 0 -o "$W/whole16" -n 16 --log "$W/whole16.jsonl" >/dev/null 2>&1
out=$($BIN "${common[@]}" -x 16 -o "$W/stretched" -y 1 --lr-steps 16 --log "$W/stretched.jsonl" 2>&1)
lr_of() { $PY -c 'import json,sys; print(" ".join("%.6g" % d["lr"] for d in map(json.loads, open(sys.argv[1])) if "loss" in d and d["step"] > 12))' "$1"; }
grep -q "now spans 16 steps instead of the saved run's 12" <<<"$out" && [ -n "$(lr_of "$W/stretched.jsonl")" ] && [ "$(lr_of "$W/stretched.jsonl")" = "$(lr_of "$W/whole16.jsonl")" ] \
  && ok "--lr-steps 16 on resume: steps 13-16 get a 16-step run's learning rates, and the change is announced" || bad "--lr-steps on resume" "$out"

# model files: bf16 (version 5) reads as the same weights as fp32 (version 3) rounded to bf16
$PY - "$W/full/model_00000012.bin" "$W" <<'PYEOF'
import struct, sys
src, w = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
h = list(struct.unpack('<256i', data[:1024])); n = (len(data) - 1024) // 4
vals = struct.unpack('<%dI' % n, data[1024:])
hi = [v >> 16 for v in vals]  # truncate to bf16
h5 = h[:]; h5[1] = 5
open(f'{w}/m5.bin', 'wb').write(struct.pack('<256i', *h5) + struct.pack('<%dH' % n, *hi))
open(f'{w}/m3.bin', 'wb').write(struct.pack('<256i', *h) + struct.pack('<%dI' % n, *[x << 16 for x in hi]))
PYEOF
$BIN -e "$W/m5.bin" -b 4 -t 32 -x 2 -v 0 -s 0 --log "$W/m5.jsonl" >/dev/null 2>&1
$BIN -e "$W/m3.bin" -b 4 -t 32 -x 2 -v 0 -s 0 --log "$W/m3.jsonl" >/dev/null 2>&1
[ -s "$W/m5.jsonl" ] && [ "$(losses "$W/m5.jsonl")" = "$(losses "$W/m3.jsonl")" ] \
  && ok "a bf16 (version 5) model file trains exactly like its fp32 (version 3) twin" || bad "bf16 model file"

# uint32 shards (llm.c's Llama 3 form) read as uint16 ones do, at every offset: the same random ids (high bytes
# set, so a word read at the wrong width or place shows) as three uint16 and three uint32 train shards of other
# lengths and a val shard each; 25 steps of 2 shuffled micro-batches (50 of the 149 windows) and 5 validations
# give the same losses and norms step for step. The ids are below 4096, the vocabulary of the tokenizer.bin beside
# the shards, which sizes the fresh model: at GPT-2's 50257 the classifier made these two runs half the suite's time.
$PY - "$W/uw" <<'PYEOF'
import os, random, struct, sys
w = sys.argv[1]
os.makedirs(w)
V = 4096
with open(f"{w}/tokenizer.bin", "wb") as f:
    f.write(struct.pack("<256I", 20240328, 2, V, 0, *[0] * 252))
    for i in range(V): f.write(bytes([len(b" t%d" % i)]) + b" t%d" % i)
random.seed(1)
for name, n in [("train_1", 3001), ("train_2", 2500), ("train_3", 4099), ("val_1", 1500)]:
    toks = [random.randrange(256, V) for _ in range(n)]
    for kind, magic, version, fmt in [("u16", 20240520, 1, "H"), ("u32", 20240801, 7, "I")]:
        h = [0] * 256; h[0:3] = [magic, version, n]
        open(f"{w}/{kind}_{name}.bin", "wb").write(struct.pack("<256i", *h) + struct.pack(f"<{n}{fmt}", *toks))
PYEOF
for k in u16 u32; do
  $BIN -e d2 -b 2 -t 32 --grad-accum 2 -x 25 -v 5 -m 4 -s 0 -i "$W/uw/${k}_train_*.bin" -j "$W/uw/${k}_val_*.bin" \
    --log "$W/$k.jsonl" > "$W/$k.out" 2>&1
done
vals() { grep -o '"val_loss": [0-9.e-]*' "$1"; }
[ "$(losses "$W/u16.jsonl" | wc -l)" = 25 ] && [ "$(vals "$W/u16.jsonl" | wc -l)" -ge 5 ] && grep -q "V 4096" "$W/u16.out" \
  && [ "$(losses "$W/u32.jsonl")" = "$(losses "$W/u16.jsonl")" ] && [ "$(vals "$W/u32.jsonl")" = "$(vals "$W/u16.jsonl")" ] \
  && ok "uint32 shards train as their uint16 twins: 25 steps over 50 shuffled windows of 3 shards, and 5 validations, identical" \
  || bad "uint32 shards vs uint16 shards of the same tokens" "$(diff <(losses "$W/u16.jsonl"; vals "$W/u16.jsonl") <(losses "$W/u32.jsonl"; vals "$W/u32.jsonl") | head -4; tail -2 "$W/u32.out")"

# --- preemption: SIGTERM finishes the step, checkpoints, exits 0; resuming matches ---------------
# The signal comes from the fault hook (TRAIN_GPT_FAULT=signal:TERM:17 raises it at the start of step 17),
# so the stop lands on the same step every time; sampling is on and the stop falls between two samples.
pre=(-e d2 -b 4 -t 32 -x 40 -v 0 -s 10 -g 8)
$BIN "${pre[@]}" --log "$W/nostop.jsonl" >"$W/nostop.out" 2>&1
TRAIN_GPT_FAULT=signal:TERM:17 $BIN "${pre[@]}" -o "$W/pre" --log "$W/pre.jsonl" >"$W/pre.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ "$(ls "$W/pre"/state_*.bin 2>/dev/null)" = "$W/pre/state_00000017.bin" ] && grep -q "stop signal: checkpointed after step 17" "$W/pre.out"; then
  ok "SIGTERM during step 17: the run finishes that step, checkpoints (state_00000017.bin) and exits 0"; else bad "SIGTERM checkpoint (rc $rc)" "$(tail -3 "$W/pre.out")"; fi
TRAIN_GPT_FAULT=signal:USR1:25 $BIN "${pre[@]}" -o "$W/pre" -y 1 --log "$W/pre.jsonl" >"$W/pre2.out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ -f "$W/pre/state_00000025.bin" ] && grep -q "stop signal: checkpointed after step 25" "$W/pre2.out" \
  && ok "SIGUSR1 (slurm's preemption warning) during step 25 of the resumed run: checkpoint at 25, exit 0" || bad "SIGUSR1 checkpoint (rc $rc)" "$(tail -3 "$W/pre2.out")"
$BIN "${pre[@]}" -o "$W/pre" -y 1 --log "$W/pre.jsonl" >"$W/pre3.out" 2>&1
[ "$(losses "$W/nostop.jsonl")" = "$(losses "$W/pre.jsonl")" ] \
  && ok "stopped twice and resumed: the uninterrupted run's 40 losses and gradient norms, bit for bit" || bad "resume after SIGTERM and SIGUSR1" "$(diff <(losses "$W/nostop.jsonl") <(losses "$W/pre.jsonl") | head)"
[ "$(samples "$W/nostop.out")" = "$(cat "$W/pre.out" "$W/pre2.out" "$W/pre3.out" | samples /dev/stdin)" ] && [ "$(samples "$W/nostop.out" | wc -l)" -eq 4 ] \
  && ok "and its 4 samples (steps 10-40) are the uninterrupted run's" || bad "samples across preemptions" "$(diff <(samples "$W/nostop.out") <(cat "$W/pre.out" "$W/pre2.out" "$W/pre3.out" | samples /dev/stdin))"
out=$(TRAIN_GPT_FAULT=signal:HUP:3 $BIN -x 5 -v 0 -s 0 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "TRAIN_GPT_FAULT: signal 'HUP' is not TERM, USR1 or SEGV" <<<"$out" && ok "a fault spec the hook does not know is refused by name" || bad "bad TRAIN_GPT_FAULT" "$out"
# --- a shared machine: OpenMP threads spin briefly, then sleep (unless the user chose otherwise) --
spin_of() {  # spin_of ENV...: GOMP_SPINCOUNT and OMP_WAIT_POLICY as the running trainer sees them
  env "$@" $BIN -x 100000 -v 0 -s 0 >/dev/null 2>&1 &
  local pid=$! seen=""
  for i in $(seq 1 200); do seen=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -E "^(GOMP_SPINCOUNT|OMP_WAIT_POLICY)=" | sort | tr '\n' ' '); [ -n "$seen" ] && break; sleep 0.1; done
  kill $pid; wait $pid 2>/dev/null
  echo "$seen"
}
[ "$(spin_of)" = "GOMP_SPINCOUNT=1000 " ] && [ "$(spin_of OMP_WAIT_POLICY=active)" = "OMP_WAIT_POLICY=active " ] \
  && [ "$(spin_of GOMP_SPINCOUNT=5)" = "GOMP_SPINCOUNT=5 " ] \
  && ok "OpenMP waits spin 1,000 times, then sleep; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept" \
  || bad "OpenMP wait policy" "$(spin_of) | $(spin_of OMP_WAIT_POLICY=active) | $(spin_of GOMP_SPINCOUNT=5)"

# --- learning on the embedded default ----------------------------------------------------------
# it gets within 0.05 nats of the floor, and below the best a model without attention can do: the
# tokens that repeat a document's first token are learnt, which only attention can do
out=$($BIN 2>&1); rc=$?
last=$(grep "val loss" <<<"$out" | tail -1)
gap=$(sed -E 's/.*gap ([0-9.-]+).*/\1/' <<<"$last")
vl=$(sed -E 's/.*val loss ([0-9.]+).*/\1/' <<<"$last")
noatt=$(sed -nE 's/.*without attention ([0-9.]+) at best.*/\1/p' <<<"$out")
if [ $rc -eq 0 ] && [ -n "$gap" ] && [ -n "$noatt" ] && awk -v g="$gap" -v v="$vl" -v n="$noatt" 'BEGIN{exit !(g < 0.05 && v < n - 0.2)}'; then
  ok "default run learns the synthetic corpus, attention included: $last (gap < 0.05; without attention at best $noatt)"
else bad "default run learns (gap < 0.05, val loss 0.2 below the no-attention bound $noatt)" "$last"; fi

# --- where the time goes ------------------------------------------------------------------------
# every step's JSON line cuts the step into data, forward, backward, comm, optimizer and other, adding up
# to its ms; --timing prints the same under each step line; the time left is on the line and in the log
out=$($BIN -x 6 -v 3 -s 0 --timing --log "$W/timing.jsonl" 2>&1); rc=$?
r=$($PY test/breakdown.py "$W/timing.jsonl") && ok "time breakdown in every log line, parts add up to ms: $r" || bad "time breakdown" "$r"
n=$(grep -cE '^  time ms: data [0-9.]+ \| forward [0-9.]+ \| backward [0-9.]+ \| comm [0-9.]+ \| optimizer [0-9.]+ \| other [0-9.]+ \(sum' <<<"$out")
[ $rc -eq 0 ] && [ "$n" = 6 ] && ok "--timing prints the breakdown under each of the 6 step lines" || bad "--timing console lines ($n)" "$out"
eta=$($PY -c 'import json,sys; e=[d["eta_s"] for d in map(json.loads, open(sys.argv[1])) if "loss" in d]; print(int(len(e) == 6 and e[-1] == 0 and all(x > 0 for x in e[:-1]) and e[0] >= e[-2]), e)' "$W/timing.jsonl")
[ "${eta%% *}" = 1 ] && [ "$(grep -c '| ETA [0-9.]*[smhd]' <<<"$out")" = 6 ] && ok "time left on every step line and in the log (eta_s ${eta#* })" \
  || bad "ETA on the line and in the log" "$eta"
out=$($BIN -x 10 -v 0 -s 0 --print-every 4 --log "$W/every.jsonl" 2>&1)
[ "$(grep -oE '^step +[0-9]+/10 ' <<<"$out" | awk '{print $2}' | tr '\n' ' ')" = "1/10 4/10 8/10 10/10 " ] && [ "$(losses "$W/every.jsonl" | wc -l)" = 10 ] \
  && ok "--print-every 4 over 10 steps prints steps 1, 4, 8 and 10; the log keeps all 10" || bad "--print-every" "$out"
expect_error "--print-every 0 is refused" "--print-every: must be >= 1" --print-every 0
[ "$(grep -c '^  time ms' <<<"$($BIN -x 2 -v 0 -s 0 2>&1)")" = 0 ] && ok "without --timing no breakdown lines" || bad "breakdown printed without --timing"

# --profile: a table of the modules at the end and one JSON line; on d12 (the synthetic corpus's vocabulary: the
# position embedding is under 1% of N) the counted FLOPs are the matmuls' and attention's exactly and within 2% of
# 6N + 6LCT; the CPU's FMA peak is measured, so the matmuls get a fraction of it
out=$($BIN -e d12 -b 1 -t 64 -x 2 -v 0 -s 0 --profile --log "$W/prof.jsonl" 2>&1); rc=$?
r=$($PY test/profile_check.py "$W/prof.jsonl" 12 768 128 64 64) && [ $rc -eq 0 ] && grep -q "^  mlp up " <<<"$out" \
  && grep -q "peak [0-9.]* GFLOP/s: this CPU's FMA peak, measured" <<<"$out" && ok "--profile on d12: $r" || bad "--profile on d12" "$r $out"
# the peak is the cores' own, whatever else runs: measured on the threads' own CPU time, it stays within 15% when two
# busy loops take the cores (a wall-clock peak halves on 2 cores), and the line says what share of the time it ran
peak_of() { $BIN -e d2 -b 1 -t 16 -x 1 -v 0 -s 0 --profile 2>&1 | sed -nE 's/^  peak ([0-9.]+) GFLOP\/s: .*measured on the threads. own CPU time \(they ran [0-9]+% of the wall time.*/\1/p'; }
alone=$(peak_of)
yes > /dev/null & y1=$!; yes > /dev/null & y2=$!
loaded=$(peak_of)
kill $y1 $y2; wait $y1 $y2 2>/dev/null
[ -n "$alone" ] && [ -n "$loaded" ] && awk -v a="$alone" -v b="$loaded" 'BEGIN{exit !(b > 0.85 * a && b < a / 0.85)}' \
  && ok "--profile's FMA peak under two busy loops: $loaded GFLOP/s against $alone alone (the threads' own CPU time; the share they ran is said)" \
  || bad "--profile's peak under load (alone '$alone', loaded '$loaded')"
out=$($BIN -x 3 -v 0 -s 0 -r 2 --grad-accum 2 --profile 2>&1)
grep -qE "^  total +- +[0-9.]+ +100.0%" <<<"$out" && grep -q "counted / formula 0.76" <<<"$out" \
  && ok "--profile on d2 with recompute 2 and accumulation: the table, and 6N's position embedding (24% of N) named" \
  || bad "--profile on d2" "$(grep -A20 '^profile' <<<"$out")"

# --autotune: micro-batch x recompute x offload, those over --mem-limit dropped by the plan, offload (a memory lever
# that cannot be faster, and in the CPU build frees nothing) not timed, the rest timed 3 times each in interleaved
# rounds and sorted by their mean tokens/s with the range of their runs and days for --target-tokens; every timed
# configuration with the run's micro-batch size trains the same weights (checked on its losses), and the best line's
# flags, pasted, train them bit for bit. The verdict follows from the printed runs: another configuration is best
# only when its slowest run beats the run's own fastest and its mean leads by 3%; else the own stays, and it is said.
out=$($BIN -b 2 -t 16 -d 32 -x 50 -r 3 --log "$W/tune.jsonl" --autotune --mem-limit 0.0135 2>&1); rc=$?
best=$(sed -n 's/^best: //p' <<<"$out")
r=$($PY - <<'PYEOF' "$out" "$best"
import re, sys
out, best = sys.argv[1], sys.argv[2]
lines = out.splitlines()
rows = [l.split() for l in lines if re.match(r"^  -b \d+ --grad-accum \d+ -r \d -z \d --offload \w+ +[0-9]+ +[0-9]+-[0-9]+ +[0-9.]+% ", l)]
unfit = [l for l in lines if "does not fit:" in l and l.rstrip().endswith("> 13.8 MiB")]
levers = [l for l in lines if "not timed: offload frees no memory in the CPU build" in l and "--offload optimizer" in l]
tps = [float(r[10]) for r in rows]
bad = []
if "24 configurations" not in out or "16 fit the memory plan; 8 of them offload" not in out: bad.append("counts")
if len(rows) != 8 or len(unfit) != 8 or len(levers) != 8: bad.append(f"{len(rows)} timed rows, {len(unfit)} unfit, {len(levers)} levers")
if any(r[9] != "none" for r in rows): bad.append("an offload configuration was timed")
if tps != sorted(tps, reverse=True): bad.append("not sorted by tok/s")
for r in rows:
    lo, hi = map(float, r[11].split("-"))
    if r[14] != "3" or not (lo <= float(r[10]) * 1.0001 and float(r[10]) <= hi * 1.0001): bad.append(f"runs or range {r}")
    # the +- is half the range over the mean, from unrounded speeds: the printed ones are whole tok/s and the +- has one
    # decimal, so the recomputed figure may differ by up to 0.05 + (50 + pct / 2) / tok/s (on a busy machine, at 498
    # tok/s and a range of 129%, they differed by 0.12, and the flat 0.11 this once was failed the suite)
    pct = float(r[12].rstrip("%")); tps_r = float(r[10])
    if abs(pct - 50 * (hi - lo) / tps_r) > max(0.11, 0.051 + (50 + pct / 2) / tps_r): bad.append(f"spread {r}")
    days = float(r[17])
    if abs(days - 1e11 / float(r[10]) / 86400) > 0.06 * days: bad.append(f"days {r}")
    if r[1] == "2" and "same" not in " ".join(r[18:]): bad.append(f"same weights {r}")
own = [r for r in rows if "own configuration" in " ".join(r)]
same = [r for r in rows if r[1] == "2"]
if len(own) != 1: bad.append("no own row")
else:
    o, f = own[0], same[0]  # the fastest with the same weights
    olo, ohi = map(float, o[11].split("-")); flo, fhi = map(float, f[11].split("-"))
    beyond = f is not o and flo > ohi and float(f[10]) >= 1.03 * float(o[10])
    want = " ".join(f[:10]) if beyond else " ".join(o[:10])
    if best != want: bad.append(f"best {best!r}, the runs say {want!r}")
    if f is not o and not beyond and "is within the noise of this run's own" not in out: bad.append("no 'within the noise' line")
verdict = "beyond the noise" if own and best != " ".join(own[0][:10]) else "the own kept"
print("; ".join(bad) if bad else f"{len(rows)} timed 3 times ({tps[0]:.0f} .. {tps[-1]:.0f} tok/s), 8 over --mem-limit dropped, 8 offload not timed, {verdict}")
sys.exit(1 if bad else 0)
PYEOF
); prc=$?  # (the table's checks decide: before, only the tuner's exit status did)
[ $rc -eq 0 ] && [ $prc -eq 0 ] && [ -n "$best" ] && [ ! -e "$W/tune.jsonl" ] && ok "--autotune: $r; best: $best" || bad "--autotune table" "$r $out"
$BIN -b 2 -t 16 -d 32 -x 3 -v 0 -s 0 --log "$W/own.jsonl" > /dev/null 2>&1
$BIN -t 16 -d 32 -x 3 -v 0 -s 0 $best --log "$W/best.jsonl" > /dev/null 2>&1
[ -s "$W/best.jsonl" ] && [ "$(losses "$W/best.jsonl")" = "$(losses "$W/own.jsonl")" ] && grep -q "trains the same weights as this run's own, bit for bit" <<<"$out" \
  && ok "the best line's flags, pasted into a run, train the run's own weights bit for bit (and the tuner says so)" || bad "best flags vs own" "$best"
out=$($BIN -b 2 -t 16 -d 32 --autotune --mem-limit 0.001 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "0 fit the memory plan" <<<"$out" && grep -q "^best: none" <<<"$out" && ok "--autotune with nothing that fits: says so, exit 1" || bad "--autotune nothing fits" "$out"
# --autotune-world 2: ZeRO stages, pipeline stages and TP degrees too (d2's 2 heads split 2 ways), each timed through
# mpirun; configurations with the run's micro-batch size train the same weights up to the order of sums across ranks
# (bit-identical where the sums have two terms: a pipeline's two micro-batches against two ranks' gradients). 32
# tokens a step (2 sequences) and 6.8 MiB a rank leave 20 layouts (ZeRO-1 at micro-batch 1, --pp 2 and --tp 2 at 1
# and 2), 40 launches of mpirun: at 64 tokens and 7.1 MiB, 35 layouts took a third of the suite's time.
if command -v mpirun > /dev/null && $BIN --help | grep -q "MPI: yes"; then
  out=$($BIN -b 2 -t 16 -d 32 --autotune --autotune-world 2 --mem-limit 0.0066 2>&1); rc=$?
  best=$(sed -n 's/^best: //p' <<<"$out")
  n=$(grep -cE "^  -b [0-9]+ --grad-accum [0-9]+ -r [0-9] -z [0-9] --offload [a-z]+ --pp [12]( --tp 2 --sp 1)? +[0-9]+ +[0-9]+-[0-9]+ +[0-9.]+% +[0-9.]+ +2 " <<<"$out")
  [ $rc -eq 0 ] && grep -q "x ZeRO stage x pipeline stages x tensor-parallel degrees" <<<"$out" \
    && grep -qE -- "--pp 2 .*same (\(losses bit-identical\)|up to the order of sums)" <<<"$out" \
    && grep -qE -- "--pp 1 --tp 2 --sp 1 .*same (\(losses bit-identical\)|up to the order of sums)" <<<"$out" \
    && ! grep -q "DIFFERENT" <<<"$out" \
    && grep -qE -- "^best: -b 2 .*--pp [12]( --tp 2 --sp 1)?$" <<<"$out" && [ "$n" -ge 4 ] \
    && ok "--autotune-world 2: $n layouts timed twice each through mpirun (ZeRO, pipeline stages and --tp 2), best: $best" \
    || bad "--autotune-world 2 (exit $rc, $n layouts timed, best '$best'; the output's last lines follow)" "$out"
else  # without them the trainer must say which is missing rather than time nothing
  out=$($BIN -b 2 -t 16 -d 64 --autotune --autotune-world 2 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -qE -- "--autotune-world 2: (mpirun is not on the PATH|this binary was built without MPI)" <<<"$out"; then
    skip "--autotune-world 2: no mpirun, or ./train_gpt_cpu built without MPI (apt-get install libopenmpi-dev openmpi-bin); the trainer refuses it so: $(tail -1 <<<"$out")"
  else bad "--autotune-world 2 without MPI: a clear refusal" "$out"; fi
fi
out=$($BIN -e d12 --dry-run --tokens-per-s 77 --target-tokens 1000000000 2>&1)
grep -q "target: 1e+09 tokens at 77 tokens/s on 1 device: 150.3 days" <<<"$out" && ok "--dry-run with a measured speed gives the days for --target-tokens" || bad "--dry-run days" "$(tail -2 <<<"$out")"
expect_error "negative --mem-limit is refused" "--mem-limit: must be > 0 GiB" --mem-limit -1
expect_error "zero --target-tokens is refused" "--target-tokens: must be >= 1" --target-tokens 0

# --- samples print whole UTF-8 characters --------------------------------------------------------
# a tokenizer whose even tokens are the first byte of 'é' (C3) and odd ones its second (A9): an untrained
# model's sample cuts characters everywhere; what is printed must be UTF-8, with each C3 A9 pair as 'é' and
# every cut character as U+FFFD, never a lone byte
$PY - "$W/utf8tok.bin" <<'PYEOF'
import struct, sys
h = [0] * 256; h[0:4] = [20240328, 2, 64, 0]
open(sys.argv[1], 'wb').write(struct.pack('<256I', *h) + b''.join(bytes([1]) + (b'\xc3' if i % 2 == 0 else b'\xa9') for i in range(64)))
PYEOF
$BIN -x 1 -v 0 -s 1 -g 40 --tokenizer "$W/utf8tok.bin" 2>&1 | grep -a '^sample: ' > "$W/utf8.out"
r=$($PY -c '
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")[len("sample: "):].rstrip("\n")
assert len(t) > 0 and set(t) <= {"\u00e9", "\ufffd"} and "\u00e9" in t, repr(t)
print("%d characters, %d of them whole" % (len(t), t.count("\u00e9")))' "$W/utf8.out" 2>&1) \
  && ok "a sample whose tokens cut UTF-8 characters prints whole ones (U+FFFD for the cut): $r" || bad "samples print whole UTF-8 characters" "$r"

# --- under mpirun: a usage error is printed once, and the job ends with status 2 ------------------------
if command -v mpirun > /dev/null && $BIN --help | grep -q "MPI: yes"; then
  out=$(OMP_NUM_THREADS=1 timeout 60 mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS -np 2 $BIN -z 2 --pp 2 -x 1 2>&1); rc=$?
  n=$(grep -c "error: -z/--zero-stage 2 with --pp 2" <<<"$out"); e=$(grep -o "error:" <<<"$out" | wc -l)
  if [ $rc -eq 2 ] && [ "$n" = 1 ] && [ "$e" = 1 ] && ! grep -qE "MPI_ABORT|exiting improperly|without calling .finalize" <<<"$out"; then
    ok "under mpirun -np 2 a usage error is printed once (rank 0), every rank leaves MPI cleanly, exit status 2"
  else bad "usage error under mpirun: once, exit 2, no abort (rc $rc, $n copies)" "$out"; fi
  out=$(OMP_NUM_THREADS=1 timeout 60 mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS -np 2 $BIN --help 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c '^usage:' <<<"$out")" = 1 ] && ! grep -qE "MPI_ABORT|exiting improperly|abnormal termination" <<<"$out" \
    && ok "under mpirun -np 2 --help is printed once and the job exits 0 without mpirun's abnormal-termination notice" \
    || bad "--help under mpirun (rc $rc)" "$(grep -vE '^  ' <<<"$out")"
else skip "usage errors and --help under mpirun: no mpirun, or ./train_gpt_cpu built without MPI (apt-get install libopenmpi-dev openmpi-bin)"; fi

# --- `make test` changes nothing on the machine --------------------------------------------------
# The Slurm suites, as root on a machine without the Slurm stack, must install nothing, start no daemon and
# make no namespace, but SKIP and say how to enable them (`make test-cluster`). Root and "nothing installed"
# are faked with stand-ins on the PATH (id, dpkg-query) and every command that would change the machine is a
# stand-in that only writes its name down.
shim=$W/shim; mkdir -p "$shim"
for c in apt-get apt unshare nsenter ip munged mungekey slurmctld slurmd sbatch; do
  printf '#!/bin/sh\necho "%s $*" >> "%s"\nexit 1\n' "$c" "$W/shim.log" > "$shim/$c"
done
printf '#!/bin/sh\nexit 1\n' > "$shim/dpkg-query"; cp "$shim/dpkg-query" "$shim/dpkg"
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 0; exit 0; }\nexec /usr/bin/id "$@"\n' > "$shim/id"
chmod +x "$shim"/*
out=$(PATH=$shim:$PATH timeout 120 bash test/test_slurm.sh 2>&1; PATH=$shim:$PATH timeout 120 bash test/test_multinode.sh 2>&1)
if [ ! -s "$W/shim.log" ] && [ "$(grep -c '^SKIP .*make test-cluster' <<<"$out")" = 2 ]; then
  ok "the Slurm suites as root without Slurm installed: SKIPs naming make test-cluster; nothing installed, started or made"
elif command -v mpirun > /dev/null && $BIN --help | grep -q "MPI: yes"; then
  bad "the Slurm suites without Slurm installed change nothing and skip" "$(cat "$W/shim.log" 2>/dev/null; echo "$out")"
else skip "the Slurm suites without Slurm: no mpirun or no MPI build, so they skip before they would look for Slurm"; fi

echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
