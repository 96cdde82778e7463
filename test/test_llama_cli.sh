#!/usr/bin/env bash
# test_llama_cli.sh: the Llama family at the trainer's command line (CPU build): each preset's --dry-run prints the
# published parameter count exactly (transformers' count of the Hugging Face model; these vocabularies are
# multiples of 128, so no padding rows), a real step of smollm-135m allocates exactly its plan, and bad input is a
# clear error naming the file and field: n_head not a multiple of n_kv_head, an odd head_dim, an llm.c llama3-branch
# file, a shard token outside the model's vocabulary, an unknown model name; the CUDA build (emulated, fp32) trains
# the family with the CPU build's losses and norms.
source "$(dirname "$0")/lib.sh"
if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi

for pc in smollm-135m:134515008 llama-3.2-1b:1235814400 tinyllama-1.1b:1100048384 qwen2.5-0.5b:494032768; do
  p=${pc%%:*} n=${pc##*:}
  out=$($BIN -e "$p" --dry-run 2>&1)
  grep -q "^model: $p | Llama family: .* | $n parameters$" <<<"$out" \
    && ok "--dry-run -e $p: the published $n parameters, exactly" || bad "--dry-run -e $p: parameter count" "$(grep model: <<<"$out")"
done

$BIN -e smollm-135m -b 1 -t 16 -x 1 -v 0 -s 0 --log "$W/smol.jsonl" > "$W/smol.out" 2>&1
alloc=$($PY -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][1]["allocated"]; print(d["model_state_bytes"], d["planned_model_state_bytes"], d["activation_bytes"], d["planned_activation_bytes"])' "$W/smol.jsonl" 2>&1)
set -- $alloc
[ $# -eq 4 ] && [ "$1" = "$2" ] && [ "$3" = "$4" ] && grep -q "step     1/1 | loss" "$W/smol.out" \
  && ok "smollm-135m trains a step and allocates exactly its plan ($1 bytes of model state, $3 of activations and workspace)" \
  || bad "smollm-135m: allocated vs plan" "$alloc $(tail -3 "$W/smol.out")"

# a Llama-family header (docs/llama.md) with fields set as given, and zero tensors of the size it needs
# header FILE MAGIC NH KV C HD
header() { $PY - "$@" <<'PYEOF'
import struct, sys
f, magic, nh, kv, c, hd = sys.argv[1], *map(int, sys.argv[2:])
h = [0] * 256
h[:15] = [magic, 1, 32, 64, 128, 1, nh, kv, c, hd, 96, 1, 0, 0, 0]
h[15] = struct.unpack("<i", struct.pack("<f", 1e-5))[0]
h[16] = struct.unpack("<i", struct.pack("<f", 1e4))[0]
open(f, "wb").write(struct.pack("<256i", *h) + bytes(4 * 100000))
PYEOF
}
expect() {  # expect LABEL WANT ARGS...: a non-zero exit whose output contains WANT
  local label=$1 want=$2; shift 2
  local out; out=$("$@" 2>&1); local rc=$?
  [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && ok "$label: \"$(grep -F -- "$want" <<<"$out" | head -1 | cut -c1-160)\"" \
    || bad "$label" "rc $rc: $out"
}
header "$W/gqa.bin" 20261126 3 2 48 16
expect "n_head not a multiple of n_kv_head is refused, naming the file" "gqa.bin: n_head 3 is not a multiple of n_kv_head 2" $BIN -e "$W/gqa.bin" -x 1
header "$W/odd.bin" 20261126 4 2 60 15
expect "an odd head_dim is refused (RoPE rotates halves)" "odd.bin: head_dim 15 is odd" $BIN -e "$W/odd.bin" -x 1
header "$W/llmc.bin" 20240803 4 2 64 16
expect "an llm.c llama3-branch file is refused, naming the converter" "convert it first with scripts/llmc_llama.py" $BIN -e "$W/llmc.bin" -x 1
expect "an unknown model name lists what -e takes" "llama-dN for a fresh Llama, or a Llama preset: smollm-135m" $BIN -e llama-7b -x 1
$PY - "$W/tok.bin" <<'PYEOF'
import struct, sys
toks = [i % 60 for i in range(300)]
toks[20] = 60000
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PYEOF
expect "a shard token outside the model's vocabulary is an error naming the shard and position" \
  "tok.bin: token 60000 at position 20 is outside the model's vocabulary of 50257" $BIN -e llama-d2 -i "$W/tok.bin" --shuffle 0 -b 2 -t 16 -x 2 -v 0 -s 0
if [ -x ./train_gpt_emu ]; then
  # the CUDA build (cuda/llama.cuh, emulated) in fp32: the CPU build's losses and gradient norms step by step
  lflags=(-e llama-d2 -x 4 -b 2 -t 32 -v 0 -s 0)
  $BIN "${lflags[@]}" --log "$W/lcpu.jsonl" > "$W/lcpu.out" 2>&1
  ./train_gpt_emu --precision fp32 "${lflags[@]}" --log "$W/lemu.jsonl" > "$W/lemu.out" 2>&1
  r=$($PY - "$W/lcpu.jsonl" "$W/lemu.jsonl" <<'PYEOF'
import json, sys
def load(p):
    return {d["step"]: (d["loss"], d["norm"]) for d in map(json.loads, open(p)) if "loss" in d and "norm" in d}
a, b = load(sys.argv[1]), load(sys.argv[2])
if len(a) != 4 or sorted(a) != sorted(b): print("steps", sorted(a), sorted(b)); sys.exit(1)
e = max(abs(a[s][k] - b[s][k]) / abs(a[s][k]) for s in a for k in (0, 1))
print(f"4 steps, losses and norms within {e:.1e} relative")
sys.exit(0 if e < 1e-5 else 1)
PYEOF
)
  [ $? -eq 0 ] && ok "the CUDA build (emulated, fp32) trains llama-d2 as the CPU build does: $r" \
    || bad "the CUDA build (emulated) on llama-d2" "$r $(tail -2 "$W/lemu.out")"
else
  skip "the CUDA build on the Llama family: ./train_gpt_emu is not built (make train_gpt_emu)"
fi
finish
