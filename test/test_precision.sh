#!/usr/bin/env bash
# test_precision.sh: --precision and loss scaling on the CPU build. A power-of-two loss scale is
# exact in fp32, so a dynamically scaled run must give the unscaled run's numbers bit for bit; an
# overflow (injected: TRAIN_GPT_FAULT=overflow:STEPS makes the loss gradient infinite, as fp16 does)
# must skip exactly that step, move the scale by DeepSpeed's rules, show in both logs, survive a
# resume, and agree across ZeRO ranks. The fp16 arithmetic itself runs only in the CUDA build.
source "$(dirname "$0")/lib.sh"
if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi

# field LOG KEY: "step value" for every step line holding KEY
field() { $PY - "$@" <<'PYEOF'
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    if "loss" in d and sys.argv[2] in d: print(d["step"], d[sys.argv[2]])
PYEOF
}

common=(-e d2 -b 4 -t 32 -x 8 -v 0 -s 0 -l 1e-3 -u 2 -n 1 --keep-checkpoints 20)
$BIN "${common[@]}" -o "$W/plain" --log "$W/plain.jsonl" > "$W/plain.out" 2>&1 || bad "unscaled run" "$(cat "$W/plain.out")"
$BIN "${common[@]}" -o "$W/dyn" --log "$W/dyn.jsonl" --loss-scale dynamic > "$W/dyn.out" 2>&1 || bad "scaled run" "$(cat "$W/dyn.out")"
[ "$(field "$W/plain.jsonl" loss)" = "$(field "$W/dyn.jsonl" loss)" ] && [ "$(field "$W/plain.jsonl" norm)" = "$(field "$W/dyn.jsonl" norm)" ] \
  && cmp -s "$W/plain/model_00000008.bin" "$W/dyn/model_00000008.bin" \
  && ok "dynamic loss scale 2^16 in fp32: 8 losses, norms and the final model bit-identical to no scaling" \
  || bad "scaled vs unscaled run" "$(paste <(field "$W/plain.jsonl" loss) <(field "$W/dyn.jsonl" loss))"
[ "$(field "$W/dyn.jsonl" loss_scale | sed -n 1p)" = "1 65536" ] && [ -z "$(field "$W/plain.jsonl" loss_scale)" ] \
  && ok "the log carries the loss scale only when scaling is on" || bad "loss_scale field" "$(field "$W/dyn.jsonl" loss_scale)"

# the scale each step ran with, when overflows hit steps 3, 4 and 8: two clean steps (1, 2) double
# it after step 2; step 3 spends the hysteresis of 2, step 4 halves it; two clean steps since (5, 6)
# double it after step 6; step 8 spends hysteresis again
ls=(--loss-scale dynamic --loss-scale-power 10 --loss-scale-window 2 --loss-scale-hysteresis 2)
TRAIN_GPT_FAULT=overflow:3,4,8 $BIN "${common[@]}" "${ls[@]}" -o "$W/of" --log "$W/of.jsonl" > "$W/of.out" 2>&1 \
  || bad "run with injected overflows" "$(cat "$W/of.out")"
want_skip=$'1 False\n2 False\n3 True\n4 True\n5 False\n6 False\n7 False\n8 True'
want_scale=$'1 1024\n2 1024\n3 2048\n4 2048\n5 1024\n6 1024\n7 2048\n8 2048'
got_skip=$(field "$W/of.jsonl" skipped); got_scale=$(field "$W/of.jsonl" loss_scale)
[ "$got_skip" = "$want_skip" ] && [ "$got_scale" = "$want_scale" ] \
  && ok "overflows at steps 3, 4, 8 skip exactly those steps; the scale follows window 2 and hysteresis 2 (1024 1024 2048 2048 1024 1024 2048 2048)" \
  || bad "skips and scales" "$(paste <(echo "$got_skip") <(echo "$got_scale"))"
cmp -s "$W/of/model_00000002.bin" "$W/of/model_00000004.bin" && ! cmp -s "$W/of/model_00000004.bin" "$W/of/model_00000005.bin" \
  && ok "a skipped step leaves the weights untouched (model after step 4 = after step 2)" || bad "weights changed on a skipped step"
[ "$(field "$W/plain.jsonl" loss | sed -n 1,2p)" = "$(field "$W/of.jsonl" loss | sed -n 1,2p)" ] \
  && ok "steps before the first overflow match the unscaled run bit for bit" || bad "losses before the overflow"
grep -q "OVERFLOW: step skipped, loss scale 2048 -> 1024" "$W/of.out" && grep -q "loss scaling: 3 steps skipped for overflow" "$W/of.out" \
  && ok "the console names each skipped step and the scale change, and the total at the end" || bad "console overflow lines" "$(grep -i overflow "$W/of.out")"
grep -q '"norm": null' "$W/of.jsonl" && $PY -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$W/of.jsonl" \
  && ok "an overflowed step's norm is logged as null, and the log stays valid JSON" || bad "JSON log with an overflow"

# resume after step 5 (inside the scaler's window, with hysteresis spent): the rest is bit-identical
mkdir -p "$W/ofr"; cp "$W/of/model_00000005.bin" "$W/of/state_00000005.bin" "$W/ofr/"
TRAIN_GPT_FAULT=overflow:3,4,8 $BIN "${common[@]}" "${ls[@]}" -o "$W/ofr" -y 1 --log "$W/ofr.jsonl" > "$W/ofr.out" 2>&1 \
  || bad "resumed run" "$(cat "$W/ofr.out")"
[ "$(field "$W/of.jsonl" loss | tail -3)" = "$(field "$W/ofr.jsonl" loss)" ] && [ "$(field "$W/of.jsonl" loss_scale | tail -3)" = "$(field "$W/ofr.jsonl" loss_scale)" ] \
  && [ "$(field "$W/of.jsonl" norm | tail -3)" = "$(field "$W/ofr.jsonl" norm)" ] \
  && cmp -s "$W/of/model_00000008.bin" "$W/ofr/model_00000008.bin" \
  && ok "resume at step 5 continues the loss scaler exactly: steps 6-8 (losses, norms), scales and the final model bit-identical" \
  || bad "resume with loss-scaler state" "$(paste <(field "$W/of.jsonl" loss_scale | tail -3) <(field "$W/ofr.jsonl" loss_scale))"

# ZeRO-2 on 2 ranks sees the same overflows through the reduced norm: same skips, same losses
if have_mpi "loss scaling on 2 ranks at ZeRO-2"; then
  TRAIN_GPT_FAULT=overflow:3,4,8 "${MPI[@]}" -np 2 $BIN "${common[@]}" "${ls[@]}" -b 2 -z 2 -o "$W/of2" --log "$W/of2.jsonl" > "$W/of2.out" 2>&1 \
    || bad "2-rank ZeRO-2 run with overflows" "$(tail "$W/of2.out")"
  TRAIN_GPT_FAULT=overflow:3,4,8 $BIN "${common[@]}" "${ls[@]}" -b 2 --grad-accum 2 --log "$W/of1.jsonl" -n 0 > "$W/of1.out" 2>&1
  r=$($PY - "$W/of1.jsonl" "$W/of2.jsonl" <<'PYEOF'
import json, sys
L = lambda p: [(d["step"], d["loss"], d["norm"], d["skipped"], d["loss_scale"]) for d in map(json.loads, open(p)) if "loss" in d]
a, b = L(sys.argv[1]), L(sys.argv[2])
# a skipped step's norm is null (non-finite); the others must agree like the losses
same_norms = all((x[2] is None) == (y[2] is None) and (x[2] is None or abs(x[2] - y[2]) <= 1e-5 * abs(x[2])) for x, y in zip(a, b))
ok = len(a) == 8 and [x[3:] for x in a] == [x[3:] for x in b] and all(abs(x[1] - y[1]) <= 1e-5 * abs(x[1]) for x, y in zip(a, b)) and same_norms
print(f"{len(a)} steps; skips and scales {'equal' if ok else 'differ'}; max loss difference {max(abs(x[1]-y[1]) for x, y in zip(a, b)):.1e}; norms {'agree' if same_norms else 'differ'}")
sys.exit(0 if ok else 1)
PYEOF
  ) && ok "2 ranks at ZeRO-2 skip the same steps with the same scales as one process: $r" || bad "ZeRO-2 overflow agreement" "$r"
fi

# at the floor an overflow stops the run with a message, instead of skipping forever
TRAIN_GPT_FAULT=overflow:1,2,3,4 $BIN "${common[@]}" -n 0 --loss-scale dynamic --loss-scale-power 1 --loss-scale-hysteresis 1 > "$W/floor.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "overflow at the minimum loss scale 1" "$W/floor.out" \
  && ok "an overflow at the minimum loss scale is fatal and says so (exit $rc)" || bad "floor overflow" "$(tail -3 "$W/floor.out")"
# without dynamic scaling, non-finite gradients are skipped and, five in a row, end the run
TRAIN_GPT_FAULT=overflow:2,3,4,5,6 $BIN "${common[@]}" -n 0 > "$W/nan.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "non-finite for 5 steps in a row" "$W/nan.out" && [ "$(grep -c 'OVERFLOW: non-finite gradients, step skipped' "$W/nan.out")" = 4 ] \
  && ok "unscaled: each non-finite step is skipped and named (4 lines), the 5th in a row ends the run (exit $rc)" || bad "divergence stop" "$(tail -3 "$W/nan.out")"

# a run that diverges for real (a learning rate of 1000): its loss turns NaN; the log must stay JSON (the loss, like
# the norm, null when not finite, for every reader of the log) and the run stop after 5 non-finite steps in a row
$BIN -e d2 -b 4 -t 32 -x 12 -v 0 -s 0 -l 1e3 -u 0 --log "$W/div.jsonl" > "$W/div.out" 2>&1
rc=$?
r=$($PY - "$W/div.jsonl" <<'PYEOF'
import json, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
nan = [d["step"] for d in rows if d["loss"] is None]
print(f"{len(rows)} step lines, loss null at steps {nan}")
sys.exit(0 if nan and all(d["norm"] is None for d in rows if d["loss"] is None) else 1)
PYEOF
) && [ $rc -ne 0 ] && grep -q "non-finite for 5 steps in a row" "$W/div.out" \
  && ok "a diverged run (-l 1e3): the log stays valid JSON, $r; stopped after 5 non-finite steps (exit $rc)" \
  || bad "diverged run's log" "$r $(tail -2 "$W/div.out")"

# flags
expect_err() {  # expect_err "what" "message fragment" flags...
  local what=$1 frag=$2; shift 2
  local out; out=$($BIN "$@" -x 1 2>&1); local rc=$?
  [ $rc -eq 2 ] && grep -q -- "$frag" <<<"$out" && ok "$what" || bad "$what (exit $rc)" "$out"
}
expect_err "--precision bf16 in the CPU build is refused, pointing at ./train_gpt" "this build computes in fp32 only" --precision bf16
# the CPU build has no TF32: it once took --tf32 1 and its banner said "fp32 (TF32 matmuls)" over plain fp32 ones
expect_err "--tf32 1 in the CPU build is refused (plain fp32 matmuls), pointing at ./train_gpt" "--tf32 1: the cpu build's matmuls are plain fp32, with no TF32 mode" --tf32 1
expect_err "--precision fp8 is named as not a precision" "'fp8' is not one of bf16, fp16, fp32" --precision fp8
expect_err "--loss-scale abc is refused" "'abc' is not dynamic, none or a positive number" --loss-scale abc
expect_err "--loss-scale-window 0 is refused" "--loss-scale-window: must be >= 1" --loss-scale-window 0
expect_err "--loss-scale-min above the first scale is refused" "at most the first scale" --loss-scale-power 2 --loss-scale-min 8
$BIN --help | grep -q -- "--precision" && $BIN --help | grep -q -- "--loss-scale-hysteresis" && $BIN --help | grep -q -- "--tf32" \
  && ok "--help lists --precision, --tf32 and the loss-scale flags" || bad "--help"
finish
