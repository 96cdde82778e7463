#!/usr/bin/env bash
# test_pipeline.sh: 1F1B pipeline parallelism on the CPU build under mpirun. --pp 2 and --pp 4 with 8
# micro-batches, and --pp 2 x 2 data-parallel ranks at ZeRO-1, each give the same 10 losses (1e-5
# relative, and gradient norms), validation losses, samples and final parameters as one process, --pp 2 x 1 rank bit
# for bit (tied GPT-2 and llama-d4, an untied Llama); recompute works per stage; a checkpoint taken
# with stages resumes with other stages or none; every rank allocates its stage's plan (the end stages holding only the
# outer tensors they use); the measured bubble is logged beside the formula.
source "$(dirname "$0")/lib.sh"
have_mpi "1F1B pipelines" || { finish; exit; }

compare() { $PY - "$@" <<'PYEOF'
import json, sys, array
def losses(p):
    return {d["step"]: (d["loss"], d["norm"]) for d in map(json.loads, open(p)) if "loss" in d}
def params(p):
    d = open(p, 'rb').read(); a = array.array('f'); a.frombytes(d[1024:]); return a
a, b = losses(sys.argv[1]), losses(sys.argv[2])
first = int(sys.argv[5]) if len(sys.argv) > 5 else 1
steps = [s for s in a if s >= first]
if not steps or any(s not in b for s in steps): print("missing steps"); sys.exit(1)
err = max(abs(a[s][0] - b[s][0]) / abs(a[s][0]) for s in steps)
nerr = max(abs(a[s][1] - b[s][1]) / abs(a[s][1]) for s in steps)  # the gradient's scale, which AdamW hides
msg = f"{len(steps)} losses within {err:.1e}, gradient norms within {nerr:.1e}"
ok = err < 1e-5 and nerr < 1e-5
if sys.argv[3] != "-":
    pa, pb = params(sys.argv[3]), params(sys.argv[4])
    diff = max(abs(x - y) for x, y in zip(pa, pb))
    msg += f", final parameters within {diff:.1e}"
    ok &= len(pa) == len(pb) and diff < 1e-4
print(msg)
sys.exit(0 if ok else 1)
PYEOF
}

# validation (4 micro-batches) and a 16-token sample (through every stage's key/value cache) at steps 5 and 10
common=(-e d4 -b 2 -t 32 -x 10 -v 5 -s 5 -g 16 -m 4 -l 1e-3 -u 3)
$BIN "${common[@]}" --grad-accum 8 -n 10 -o "$W/ref" --log "$W/ref.jsonl" > "$W/ref.out" 2>&1 || bad "one-process reference" "$(tail -3 "$W/ref.out")"
# the 4-stage layout also recomputes (level 3: only layer inputs kept) on every stage
for layout in "2 1 0 8 0" "4 1 0 8 3" "2 2 1 4 0"; do
  set -- $layout
  pp=$1 dp=$2 z=$3 A=$4 rc=$5
  name="--pp $pp x data-parallel $dp at ZeRO-$z ($A micro-batches per rank$([ $rc -gt 0 ] && echo ", recompute $rc"))"
  out=$("${MPI[@]}" -np $((pp * dp)) $BIN "${common[@]}" --pp $pp -z $z --grad-accum $A -r $rc -n 10 -o "$W/pp$pp$dp" --log "$W/pp$pp$dp.jsonl" 2>&1)
  if [ $? -ne 0 ]; then bad "$name runs" "$out"; continue; fi
  r=$(compare "$W/ref.jsonl" "$W/pp$pp$dp.jsonl" "$W/ref/model_00000010.bin" "$W/pp$pp$dp/model_00000010.bin") \
    && ok "$name vs one process: $r" || bad "$name vs one process" "$r"
  r=$(compare_eval "$W/ref.jsonl" "$W/ref.out" "$W/pp$pp$dp.jsonl" <(echo "$out")) && ok "$name: $r vs one process" \
    || bad "$name: validation and samples vs one process" "$r"
  alloc=$(grep -o "allocated per rank: .*" <<<"$out")
  a=$($PY -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][1]["allocated"]; print(int(d["model_state_bytes"] == d["planned_model_state_bytes"] and d["activation_bytes"] == d["planned_activation_bytes"]))' "$W/pp$pp$dp.jsonl")
  [ "$a" = 1 ] && ok "$name: stage 0 allocates what its plan says ($alloc)" || bad "$name: allocation vs plan" "$alloc"
  # every rank, the end stages' own outer tensors included (the last stage's: the final norm, the tied embedding)
  dry_matches "$name" $((pp * dp)) "$W/pp$pp$dp.jsonl" "${common[@]}" --pp $pp -z $z --grad-accum $A -r $rc
done
# a tied embedding at 2 stages x 1 rank: bit for bit (the output end adds the lookup's part of its gradient after each
# head's, in one process's order: pipeline.h), the logged losses and norms and the final model file
sums() { grep -o '"loss": [^,]*, [^,]*, "norm": [^,]*' "$1"; }
bits() {  # bits LABEL REF RUN MODEL_FILE: the logged losses and norms the same text, the final model files the same bytes
  [ -n "$(sums "$2.jsonl")" ] && [ "$(sums "$2.jsonl")" = "$(sums "$3.jsonl")" ] && cmp -s "$2/$4" "$3/$4" \
    && ok "$1 --pp 2 bit-identical to one process: $(sums "$2.jsonl" | wc -l) losses and norms as logged, the final model file byte for byte" \
    || bad "$1 --pp 2 bit for bit" "$(diff <(sums "$2.jsonl") <(sums "$3.jsonl") | head -4) $(cmp "$2/$4" "$3/$4" 2>&1)"
}
bits "GPT-2 d4 (tied)" "$W/ref" "$W/pp21" model_00000010.bin
# the Llama family (llama-d4): 2 stages, and 2 stages x 2 data-parallel ranks at ZeRO-1, train like one process and
# stage 0 allocates its plan
lcommon=(-e llama-d4 -b 2 -t 32 -x 6 -v 0 -s 0 -l 1e-3 -u 2)
$BIN "${lcommon[@]}" --grad-accum 4 -n 6 -o "$W/lref" --log "$W/lref.jsonl" > "$W/lref.out" 2>&1 || bad "Llama one-process reference" "$(tail -3 "$W/lref.out")"
for layout in "2 1 0 4" "2 2 1 2"; do
  set -- $layout
  pp=$1 dp=$2 z=$3 A=$4
  name="Llama (llama-d4) --pp $pp x data-parallel $dp at ZeRO-$z"
  out=$("${MPI[@]}" -np $((pp * dp)) $BIN "${lcommon[@]}" --pp $pp -z $z --grad-accum $A -n 6 -o "$W/lpp$pp$dp" --log "$W/lpp$pp$dp.jsonl" 2>&1)
  if [ $? -ne 0 ]; then bad "$name runs" "$out"; continue; fi
  r=$(compare "$W/lref.jsonl" "$W/lpp$pp$dp.jsonl" "$W/lref/model_00000006.bin" "$W/lpp$pp$dp/model_00000006.bin") \
    && ok "$name vs one process: $r" || bad "$name vs one process" "$r"
  a=$($PY -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][1]["allocated"]; print(int(d["model_state_bytes"] == d["planned_model_state_bytes"] and d["activation_bytes"] == d["planned_activation_bytes"]))' "$W/lpp$pp$dp.jsonl")
  [ "$a" = 1 ] && ok "$name: stage 0 allocates what its plan says" || bad "$name: allocation vs plan"
  dry_matches "$name" $((pp * dp)) "$W/lpp$pp$dp.jsonl" "${lcommon[@]}" --pp $pp -z $z --grad-accum $A
done
bits "llama-d4 (tied)" "$W/lref" "$W/lpp21" model_00000006.bin
# an untied head (test/llama_model.py: GQA 4:1, QK-norm, q/k/v bias): each end stage holds only the outer tensors it
# uses (issue 48), the first wte, the last the final norm and lm_head, so nothing is summed between them. 2 stages, and
# x 2 ranks at ZeRO-0 and -1, train like one process (the final model file's lm_head too, which only the last stage
# holds), 2 stages bit for bit (losses, norms and the final model file: the same sums in the same order), and every
# rank allocates its stage's plan; a checkpoint taken at --pp 2 x 2 ranks resumes in one process and at --pp 2, and one
# taken by one process resumes at --pp 2, like the uninterrupted run.
if $PY test/llama_model.py "$W/untied.bin" 4 1; then
  ucommon=(-e "$W/untied.bin" -b 2 -t 32 -x 6 -v 3 -s 3 -g 8 -m 2 -l 1e-3 -u 2)
  $BIN "${ucommon[@]}" --grad-accum 4 -n 3 --keep-checkpoints 2 -o "$W/uref" --log "$W/uref.jsonl" > "$W/uref.out" 2>&1 || bad "untied one-process reference" "$(tail -3 "$W/uref.out")"
  for layout in "2 1 0 4" "2 2 0 2" "2 2 1 2"; do
    set -- $layout
    pp=$1 dp=$2 z=$3 A=$4
    name="untied Llama --pp $pp x data-parallel $dp at ZeRO-$z"
    out=$("${MPI[@]}" -np $((pp * dp)) $BIN "${ucommon[@]}" --pp $pp -z $z --grad-accum $A -n 3 -o "$W/upp$dp$z" --log "$W/upp$dp$z.jsonl" 2>&1)
    if [ $? -ne 0 ]; then bad "$name runs" "$out"; continue; fi
    r=$(compare "$W/uref.jsonl" "$W/upp$dp$z.jsonl" "$W/uref/model_00000006.bin" "$W/upp$dp$z/model_00000006.bin") \
      && ok "$name vs one process: $r" || bad "$name vs one process" "$r"
    r=$(compare_eval "$W/uref.jsonl" "$W/uref.out" "$W/upp$dp$z.jsonl" <(echo "$out")) && ok "$name: $r vs one process" \
      || bad "$name: validation and samples vs one process" "$r"
    dry_matches "$name" $((pp * dp)) "$W/upp$dp$z.jsonl" "${ucommon[@]}" --pp $pp -z $z --grad-accum $A
  done
  bits "untied Llama" "$W/uref" "$W/upp10" model_00000006.bin
  for l in "1 4 upp21" "2 4 upp21" "2 4 uref"; do
    set -- $l
    d="$W/uresume$1$3"; mkdir -p "$d"; cp "$W/$3/model_00000003.bin" "$W/$3/state_00000003.bin" "$d/"
    if [ "$1" -eq 1 ]; then run=($BIN); else run=("${MPI[@]}" -np $1 $BIN --pp $1); fi
    out=$("${run[@]}" "${ucommon[@]}" --grad-accum $2 -n 3 -o "$d" -y 1 --log "$d/log.jsonl" 2>&1)
    from=$([ "$3" = uref ] && echo "one process" || echo "--pp 2 x 2 ranks (ZeRO-1)")
    r=$(compare "$W/uref.jsonl" "$d/log.jsonl" "$W/uref/model_00000006.bin" "$d/model_00000006.bin" 4) && grep -q "resume: step 3" <<<"$out" \
      && ok "untied Llama saved by $from, resumed with $1 stage(s): steps 4-6 $r" || bad "untied resume with $1 stage(s) from $from" "$r $out"
  done
else bad "writing the untied Llama model file (test/llama_model.py)"; fi
grep -q "pipeline split (1F1B, 8 micro-batches; bubble (p-1)/(m+p-1) = 0.273): stage 0: layers 0-0 + embedding" <<<"$("${MPI[@]}" -np 4 $BIN "${common[@]}" --pp 4 --grad-accum 8 --dry-run 2>&1)" \
  && ok "the split and the 1F1B bubble are printed at start" || bad "split printed"
r=$($PY - "$W/pp41.jsonl" <<'PYEOF'
import json, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "bubble" in d]
ok = len(rows) == 10 and all(len(d["bubble"]) == 4 and all(0 <= b < 1 for b in d["bubble"]) for d in rows)
ok &= all(abs(d["bubble_1f1b"] - 3 / 11) < 1e-4 for d in rows)
print(f"last step: measured {rows[-1]['bubble']} vs 1F1B {rows[-1]['bubble_1f1b']:.3f}" if rows else "no bubble lines")
sys.exit(0 if ok else 1)
PYEOF
) && ok "every step logs the measured bubble per stage beside the formula; $r" || bad "bubble logged" "$r"

# where the time goes in a pipeline: the parts add up, and waiting for a neighbour (the bubble) is comm
for l in "2 1" "4 1" "2 2"; do
  set -- $l
  r=$($PY test/breakdown.py "$W/pp$1$2.jsonl" 0.01) && ok "--pp $1 x $2 rank(s): time breakdown adds up, pipeline waits show as comm: $r" \
    || bad "--pp $1 x $2: time breakdown" "$r"
done

# --profile on a pipeline: rank 0's table (stage 0) adds up, its waits are the collectives row, and the whole
# model's formula is left out (null) rather than compared with one stage's FLOPs
"${MPI[@]}" -np 2 $BIN "${common[@]}" -x 3 -v 0 -s 0 --pp 2 --grad-accum 4 --profile --log "$W/ppprof.jsonl" > "$W/ppprof.out" 2>&1
r=$($PY - "$W/ppprof.jsonl" <<'PYEOF'
import json, sys
p = [d["profile"] for d in map(json.loads, open(sys.argv[1])) if "profile" in d][0]
m = {x["module"]: x for x in p["modules"]}
share = sum(x["share"] for x in p["modules"])
ok = abs(share - 1) < 0.05 and m["collectives"]["calls"] > 0 and m["collectives"]["ms"] > 0 and p["formula_flops_per_step"] is None
print(f"shares add up to {share:.4f}, collectives {m['collectives']['calls']} calls {m['collectives']['ms']:.1f} ms, formula {p['formula_flops_per_step']}")
sys.exit(0 if ok else 1)
PYEOF
) && ok "--profile with --pp 2: $r" || bad "--profile with --pp 2" "$r $(tail -3 "$W/ppprof.out")"

# a checkpoint taken with 2 stages x 2 ranks resumes on 4 stages, and on one process
"${MPI[@]}" -np 4 $BIN "${common[@]}" --pp 2 -z 1 --grad-accum 4 -n 5 -o "$W/save" > /dev/null 2>&1
for layout in "4 8" "1 8"; do
  set -- $layout
  d="$W/resume$1"; mkdir -p "$d"; cp "$W/save/model_00000005.bin" "$W/save/state_00000005.bin" "$d/"
  if [ "$1" -eq 1 ]; then run=($BIN); else run=("${MPI[@]}" -np $1 $BIN --pp $1); fi
  out=$("${run[@]}" "${common[@]}" --grad-accum $2 -o "$d" -y 1 --log "$d/log.jsonl" 2>&1)
  r=$(compare "$W/ref.jsonl" "$d/log.jsonl" - - 6) && grep -q "resume: step 5" <<<"$out" \
    && ok "saved at --pp 2 x 2 ranks, resumed with $1 stage(s): steps 6-10 $r" || bad "resume with $1 stage(s)" "$r $out"
done

out=$("${MPI[@]}" -np 2 $BIN "${common[@]}" --pp 2 -z 2 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF -- "-z/--zero-stage 2 with --pp 2: stages 2 and 3 reduce gradients" <<<"$out" && ok "ZeRO-2 with a pipeline is refused up front, with the reason" || bad "pp with ZeRO-2 refused" "$out"
out=$("${MPI[@]}" -np 3 $BIN "${common[@]}" --pp 2 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF -- "--pp: 2 stages do not divide the world of 3 ranks" <<<"$out" && ok "a world the stages do not divide is refused" || bad "pp not dividing world" "$out"
out=$("${MPI[@]}" -np 4 $BIN -e d2 --pp 4 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF -- "--pp: 4 stages for a model of 2 layers" <<<"$out" && ok "more stages than layers is refused" || bad "pp > layers" "$out"
out=$("${MPI[@]}" -np 3 $BIN -e d4 --pp 3 --dry-run 2>&1)
grep -q "warning: 4 layers do not split evenly over 3 stages" <<<"$out" && ok "an uneven split is warned about with its imbalance" || bad "uneven split warning" "$out"
# the batch line counts the data-parallel ranks, not the world: 4 ranks as 2 stages x 2 hold 2 x 32 x 3 x 2 tokens a step
out=$("${MPI[@]}" -np 4 $BIN -e d4 -b 2 -t 32 --grad-accum 3 --pp 2 --dry-run 2>&1)
grep -qF "batch: micro-batch 2 x seq 32 x accumulation 3 x data-parallel 2 = 384 tokens per step" <<<"$out" \
  && ok "the batch line of --pp 2 x 2 ranks names 2 data-parallel ranks and their 384 tokens" || bad "pp batch line" "$(grep ^batch <<<"$out")"

finish
