# cuda_emu_fp16.sh: test_cuda_emu.sh's fp16 overflow section (fp16_overflow), sourced by it (lib.sh's ok/bad, $EMU, $W,
# close), kept beside it so that file stays under 800 lines.
# A real fp16 overflow: from a loss scale of 2^20 the backward of step 2 overflows fp16 and the gradients are
# infinite (the console's norm is inf; the injected TRAIN_GPT_FAULT=overflow makes them NaN). The step must be
# skipped and logged as such, the scale halve, and the run go on exactly as the same scaler driven by an injected
# overflow at the same step (the path test_precision.sh covers), and like the CPU build's fp32 run given that step.
fp16_overflow() {
  local ov=(-e d2 -b 2 -t 32 -x 6 -v 0 -s 0 -n 6 --loss-scale dynamic --loss-scale-power 20 --loss-scale-hysteresis 1) r sk
  $EMU --precision fp16 "${ov[@]}" -o "$W/ovr" --log "$W/ovr.jsonl" > "$W/ovr.out" 2>&1 || bad "fp16 run from 2^20" "$(tail -3 "$W/ovr.out")"
  sk=$($PY -c 'import json,sys; print(",".join(str(d["step"]) for d in map(json.loads, open(sys.argv[1])) if d.get("skipped")))' "$W/ovr.jsonl")
  local inf; inf=$(grep -cE '^step +('"${sk//,/|}"')/6 .*\| norm inf \|.*OVERFLOW: step skipped, loss scale 1.04858e\+06 -> 524288$' "$W/ovr.out")
  r=$($PY - "$W/ovr.jsonl" <<'PYEOF'
import json, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
sk = [d["step"] for d in rows if d["skipped"]]
ok = len(rows) == 6 and len(sk) == 1 and sk[0] > 1
for d in rows:
    scale = 2**20 if d["step"] <= sk[0] else 2**19 if sk else 0
    nxt = 2**19 if sk and d["step"] >= sk[0] else 2**20
    ok &= d["loss_scale"] == scale and d["loss_scale_next"] == nxt and (d["norm"] is None) == d["skipped"]
print(f"step {sk} skipped (norm null, loss_scale 2^20, loss_scale_next 2^19), the others at 2^20 before and 2^19 after")
sys.exit(0 if ok else 1)
PYEOF
  ) && [ "$inf" = 1 ] && grep -q "loss scaling: 1 step skipped for overflow; final scale 524288" "$W/ovr.out" \
    && ok "fp16 from a loss scale of 2^20: a real overflow (gradients infinite, norm inf on the console): $r" \
    || bad "fp16 real overflow: skip and scale in the log and on the console ($inf console lines)" "$r $(grep -E '^step|scaling' "$W/ovr.out" | cut -c1-70,150-)"
  [ -n "$sk" ] || sk=2
  TRAIN_GPT_FAULT=overflow:$sk $EMU --precision fp16 "${ov[@]}" -o "$W/ovi" --log "$W/ovi.jsonl" > "$W/ovi.out" 2>&1
  TRAIN_GPT_FAULT=overflow:$sk ./train_gpt_cpu "${ov[@]}" -o "$W/ovc" --log "$W/ovc.jsonl" > "$W/ovc.out" 2>&1
  local fields='import json,sys
for d in map(json.loads, open(sys.argv[1])):
    if "loss" in d: print(d["step"], repr(d["loss"]), d["norm"], d["loss_scale"], d["skipped"])'
  [ -s "$W/ovi.jsonl" ] && [ "$($PY -c "$fields" "$W/ovr.jsonl")" = "$($PY -c "$fields" "$W/ovi.jsonl")" ] \
    && cmp -s "$W/ovr/model_00000006.bin" "$W/ovi/model_00000006.bin" && cmp -s "$W/ovr/state_00000006.bin" "$W/ovi/state_00000006.bin" \
    && grep -qE "^step +$sk/6 .*\| norm -?nan \|" "$W/ovi.out" \
    && ok "fp16: the real overflow at step $sk and an injected one there (gradients NaN) give bit-identical losses, norms, scales, skips and checkpoints" \
    || bad "fp16 real vs injected overflow" "$(diff <($PY -c "$fields" "$W/ovr.jsonl") <($PY -c "$fields" "$W/ovi.jsonl"))"
  r=$($PY - "$W/ovc.jsonl" "$W/ovr.jsonl" <<'PYEOF'
import json, sys
L = lambda p: [(d["step"], d["loss"], d["norm"], d["loss_scale"], d["skipped"]) for d in map(json.loads, open(p)) if "loss" in d]
a, b = L(sys.argv[1]), L(sys.argv[2])
ok = len(a) == 6 and [x[3:] for x in a] == [x[3:] for x in b]
err = max(abs(x[1] - y[1]) / x[1] for x, y in zip(a, b)) if ok else 1.0
nerr = max(abs(x[2] - y[2]) / x[2] for x, y in zip(a, b) if x[2] is not None) if ok else 1.0
print(f"skips and scales equal; losses within {err:.1e}, norms within {nerr:.1e} of the CPU build's fp32 (< 3e-3)")
sys.exit(0 if ok and err < 3e-3 and nerr < 3e-3 else 1)
PYEOF
  ) && ok "fp16 after the real overflow vs the CPU build's fp32 run with that step's overflow injected: $r" \
    || bad "fp16 real overflow vs the CPU build" "$r"
}
