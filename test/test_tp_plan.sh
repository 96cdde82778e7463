#!/usr/bin/env bash
# test_tp_plan.sh: a cluster's plan without the cluster (--dry-run --world N, train/report.h's report_stage_plans): one
# process prints the memory plan of every pipeline stage's ranks of an N-rank layout (--tp, --pp, ZeRO over the
# data-parallel group of N / (tp pp)) without starting them. The parameters each rank holds are checked against a
# count by hand from Llama 3.1 8B's published shape (the split of arch/tp_layout.h written out here, not taken from the
# code), AdamW's state against ZeRO-1's shards over 2 data-parallel ranks, and every preset plans a cluster in a
# fraction of a second of CPU and well under 100 MiB, and sequence parallelism (on by default with --tp) plans fewer
# activation bytes than --sp 0 on every stage, by the count by hand. test_tp.sh checks the other half: the same plan,
# made this way, is what each rank of a real layout allocates.
source "$(dirname "$0")/lib.sh"
if ! $BIN --help >/dev/null; then bad "./train_gpt_cpu is needed"; finish; exit 1; fi

# Llama 3.1 8B on 16 ranks: 8-way TP x 2 stages (1 data-parallel rank), then x 2 data-parallel ranks at ZeRO-1
$BIN -e llama-3.1-8b --dry-run --world 16 --tp 8 --pp 2 -b 1 -t 8192 --grad-accum 8 --log "$W/w16.jsonl" > "$W/w16.out" 2>&1 \
  || bad "--dry-run --world 16 --tp 8 --pp 2 -e llama-3.1-8b" "$(cat "$W/w16.out")"
$BIN -e llama-3.1-8b --dry-run --world 32 --tp 8 --pp 2 -z 1 -b 1 -t 8192 --grad-accum 8 --log "$W/w32.jsonl" > "$W/w32.out" 2>&1 \
  || bad "--dry-run --world 32 --tp 8 --pp 2 -z 1 -e llama-3.1-8b" "$(cat "$W/w32.out")"
$BIN -e llama-3.1-8b --dry-run --world 16 --tp 8 --pp 2 --sp 0 -b 1 -t 8192 --grad-accum 8 --log "$W/w16sp0.jsonl" > "$W/w16sp0.out" 2>&1 \
  || bad "--dry-run --world 16 --tp 8 --pp 2 --sp 0 -e llama-3.1-8b" "$(cat "$W/w16sp0.out")"
r=$($PY - "$W/w16.jsonl" "$W/w32.jsonl" "$W/w16.out" <<'PYEOF'
import json, re, sys
# the published shape (meta-llama/Llama-3.1-8B's config.json): untied, grouped-query attention 32:8
L, C, NH, KV, hd, H, V = 32, 4096, 32, 8, 128, 14336, 128256
Vp = (V + 127) // 128 * 128            # padded to a multiple of 128: 128256 already is
N = 8                                  # --tp
# one layer whole: q/k/v, o, up+gate, down, the two RMSNorms' gains
layer = (NH + KV + KV) * hd * C + C * NH * hd + 2 * H * C + C * H + 2 * C
outer = Vp * C + Vp * C + C            # wte, lm_head (untied), the final norm
whole = L * layer + outer - 2 * (Vp - V) * C
# one TP rank's slice: q/k/v by heads (32/8 query heads, 8/8 key/value heads), o by the same columns, up and gate
# each by H/8 rows, down by H/8 columns, the norms replicated; the embedding and the head by Vp/8 rows each
layer_slice = (NH // N + 2 * (KV // N)) * hd * C + C * (NH // N) * hd + 2 * (H // N) * C + C * (H // N) + 2 * C
# each end stage holds the outer tensors it uses (issue 48): the first the embedding's Vp/8 rows, the last the final
# norm (replicated) and the untied head's Vp/8 rows; neither the other end's
outer_slice = [(Vp // N) * C, C + (Vp // N) * C]
words = [" + embedding |", " + final norm, head |"]
def stages(p): return [d["stage_plan"] for d in map(json.loads, open(p)) if "stage_plan" in d]
s16, s32 = stages(sys.argv[1]), stages(sys.argv[2])
out = open(sys.argv[3]).read()
msgs, ok = [], whole == 8030261248 and f"| {whole} parameters" in out
msgs.append(f"whole model by hand {whole} (published 8030261248)")
ok &= len(s16) == 2 and s16[0]["first_layer"] == 0 and s16[0]["last_layer"] + 1 == s16[1]["first_layer"] and s16[1]["last_layer"] == L - 1
for s in s16:
    layers = s["last_layer"] - s["first_layer"] + 1
    want = layers * layer_slice + outer_slice[s["stage"]]  # its layers' slices + the outer tensors its end uses
    good = s["params"] == want and s["params_bytes"] == 4 * want and s["grads_bytes"] == 4 * want and s["optimizer_bytes"] == 8 * want
    good &= f"{s['first_rank']}-{s['last_rank']} (tp 8 x dp 1) | layers {s['first_layer']}-{s['last_layer']}{words[s['stage']]}" in out
    good &= f"| {want} parameters per rank" in out
    ok &= good
    msgs.append(f"stage {s['stage']} (ranks {s['first_rank']}-{s['last_rank']}, {layers} layers{words[s['stage']][:-2]}): {s['params']} "
                f"per rank, by hand {layers} x {layer_slice} + {outer_slice[s['stage']]} = {want}")
# ZeRO-1 over the 2 data-parallel ranks: the whole slice's parameters and gradients, AdamW's m and v of half of
# each unit (layers even, the outer unit even: no padding)
ok &= len(s32) == 2
for s, t in zip(s32, s16):
    layers = s["last_layer"] - s["first_layer"] + 1
    want_opt = 2 * 4 * (layers * (layer_slice // 2) + outer_slice[s["stage"]] // 2)
    ok &= s["params"] == t["params"] and s["params_bytes"] == t["params_bytes"] and s["optimizer_bytes"] == want_opt
    ok &= (s["first_rank"], s["last_rank"]) == (16 * s["stage"], 16 * s["stage"] + 15)
    msgs.append(f"ZeRO-1 x 2: stage {s['stage']} AdamW {s['optimizer_bytes']} bytes (by hand {want_opt})")
print("; ".join(msgs))
sys.exit(0 if ok else 1)
PYEOF
) && ok "llama-3.1-8b --world 16 --tp 8 --pp 2 as counted by hand: $r" || bad "llama-3.1-8b's stages vs the count by hand" "$r"

# a tied embedding at both ends (Llama 3.2 1B at --tp 8 --pp 2) and GPT-2's positions at the input end (d12 at --tp 4
# --pp 2, the built-in corpus's 64 tokens padded to 128): each end stage holds its layers' slices + the outer tensors
# it uses, by hand: the tied embedding's Vp/N rows at both ends (its gradient summed between them), the positions
# (replicated) at the first, the final norm (replicated: RMSNorm's gain, LayerNorm's gain and bias) at the last
$BIN -e llama-3.2-1b --dry-run --world 16 --tp 8 --pp 2 -b 1 -t 8192 --grad-accum 8 --log "$W/t16.jsonl" > "$W/t16.out" 2>&1 \
  || bad "--dry-run --world 16 --tp 8 --pp 2 -e llama-3.2-1b" "$(cat "$W/t16.out")"
$BIN -e d12 --dry-run --world 8 --tp 4 --pp 2 -b 1 -t 1024 --grad-accum 8 --log "$W/g8.jsonl" > "$W/g8.out" 2>&1 \
  || bad "--dry-run --world 8 --tp 4 --pp 2 -e d12" "$(cat "$W/g8.out")"
for m in "llama-3.2-1b:t16" "d12:g8"; do
  r=$($PY - "${m%%:*}" "$W/${m#*:}.jsonl" "$W/${m#*:}.out" <<'PYEOF'
import json, sys
name = sys.argv[1]
if name == "llama-3.2-1b":  # meta-llama/Llama-3.2-1B's config.json: tied, grouped-query attention 32:8
    L, C, NH, KV, hd, H, V, N = 16, 2048, 32, 8, 64, 8192, 128256, 8
    layer = (NH // N + 2 * (KV // N)) * hd * C + C * (NH // N) * hd + 2 * (H // N) * C + C * (H // N) + 2 * C
    Vp = (V + 127) // 128 * 128
    ends = [(Vp // N) * C, (Vp // N) * C + C]  # wte's rows; wte's rows (the tied head) + the final RMSNorm's gain
    words = [" + embedding |", " + final norm, head (the tied embedding) |"]
else:  # GPT-2 d12: C 768, 12 heads, 4C MLP, learned positions (maxT 1024), LayerNorms with biases, tied
    L, C, T, V, N = 12, 768, 1024, 64, 4
    Vp = (V + 127) // 128 * 128
    # per layer: q/k/v (3C rows) and fc (4C rows) by rows with their biases, attention's and the MLP's output
    # projections by columns, their biases and the two LayerNorms (gain, bias) replicated
    layer = (3 * C * C + 3 * C) // N + C * C // N + C + (4 * C * C + 4 * C) // N + 4 * C * C // N + C + 4 * C
    ends = [(Vp // N) * C + T * C, (Vp // N) * C + 2 * C]  # wte's rows + wpe (replicated); wte's rows + lnf's gain, bias
    words = [" + embedding, positions |", " + final norm, head (the tied embedding) |"]
s = [d["stage_plan"] for d in map(json.loads, open(sys.argv[2])) if "stage_plan" in d]
out = open(sys.argv[3]).read()
ok, msgs = len(s) == 2 and s[0]["first_layer"] == 0 and s[1]["last_layer"] == L - 1, []
for st in s:
    layers = st["last_layer"] - st["first_layer"] + 1
    want = layers * layer + ends[st["stage"]]
    ok &= st["params"] == want and st["params_bytes"] == 4 * want and st["optimizer_bytes"] == 8 * want
    ok &= f"layers {st['first_layer']}-{st['last_layer']}{words[st['stage']]}" in out and f"| {want} parameters per rank" in out
    msgs.append(f"stage {st['stage']}{words[st['stage']][:-2]}: {st['params']} per rank, by hand {layers} x {layer} + {ends[st['stage']]} = {want}")
print("; ".join(msgs))
sys.exit(0 if ok else 1)
PYEOF
)
  [ $? -eq 0 ] && ok "${m%%:*} --pp 2 end stages as counted by hand: $r" || bad "${m%%:*}'s end stages vs the count by hand" "$r"
done

# sequence parallelism against --sp 0, stage by stage: the residual stream and the norms' rows kept on B T / 8 rows
# (per layer ln1, residual2, ln2, residual3 of B T C floats and the two RMSNorms' rstd of B T; once per stage encoded,
# attproj, fcproj, lnf of B T C and lnf's rstd), times the micro-batches in flight, and the (B T, C) buffer the
# gathers and reduce-scatters pass through added to the workspace; the parameters unchanged
r=$($PY - "$W/w16.jsonl" "$W/w16sp0.jsonl" <<'PYEOF'
import json, sys
def stages(p): return [d["stage_plan"] for d in map(json.loads, open(p)) if "stage_plan" in d]
sp, nosp = stages(sys.argv[1]), stages(sys.argv[2])
B, T, C, N = 1, 8192, 4096, 8
ok, msgs = len(sp) == len(nosp) == 2, []
for a, b in zip(sp, nosp):
    layers = a["last_layer"] - a["first_layer"] + 1
    sharded = 4 * a["slots"] * (layers * (4 * B * T * C + 2 * B * T) + 4 * B * T * C + B * T)
    saved, extra = b["activations_bytes"] - a["activations_bytes"], a["workspace_bytes"] - b["workspace_bytes"]
    ok &= saved == sharded * (N - 1) // N and extra == 4 * B * T * C and a["params"] == b["params"] and a["slots"] == b["slots"]
    msgs.append(f"stage {a['stage']}: activations {b['activations_bytes']} -> {a['activations_bytes']} bytes, {saved} saved (by hand "
                f"{sharded * (N - 1) // N}), workspace +{extra} (by hand {4 * B * T * C})")
print("; ".join(msgs))
sys.exit(0 if ok else 1)
PYEOF
) && ok "llama-3.1-8b --world 16 --tp 8 --pp 2: --sp 1 plans fewer activations than --sp 0, as counted by hand: $r" \
  || bad "--sp 1's plan vs --sp 0's, by hand" "$r"

# every preset (and GPT-2 d24, 350M) plans a cluster without allocating: CPU time and RSS of the whole process
for pc in smollm-135m:3 qwen2.5-0.5b:2 tinyllama-1.1b:4 llama-3.2-1b:8 llama-3.1-8b:8 d24:4; do
  p=${pc%%:*} n=${pc##*:}
  r=$($PY - "$BIN" "$p" "$n" <<'PYEOF'
import resource, subprocess, sys
bin, p, n = sys.argv[1:]
args = [bin, "--dry-run", "-e", p, "--world", str(4 * int(n)), "--tp", n, "--pp", "2", "-z", "1", "-b", "1", "-t", "960", "--grad-accum", "8"]
q = subprocess.run(args, capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu, rss = ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024
stages = q.stdout.count("memory plan per rank:")
print(f"{stages} stages of {4 * int(n)} ranks (tp {n}) in {cpu:.2f} s of CPU, max RSS {rss:.1f} MiB")
sys.exit(0 if q.returncode == 0 and stages == 2 and cpu < 1.0 and rss < 100 else 1)
PYEOF
)
  [ $? -eq 0 ] && ok "--dry-run --world -e $p: $r" || bad "--dry-run --world -e $p: under a second of CPU and 100 MiB" "$r"
done

# ZeRO-3 shards every tensor (issue 48): Llama 3.1 8B on 64 data-parallel ranks planned for an H100 from this CPU build
# (--gpu h100: the CUDA build's figures) holds params + grads + AdamW state within 5% of DeepSpeed's 16 P / N bytes
# (exactly its shards: P / 64 rounded up per unit), beside the working set the plan names, counted by hand: the outer
# unit (embedding, final norm, untied head) and two layers gathered whole, and the outer unit's and one layer's gradient
# whole while they are reduced; against the card's 80 GiB it fits. Without --gpu the plan says it is the CPU build's own.
$BIN -e llama-3.1-8b --dry-run --world 64 -z 3 -b 1 -t 8192 --gpu h100 --log "$W/z3.jsonl" > "$W/z3.out" 2>&1 \
  || bad "--dry-run --world 64 -z 3 --gpu h100 -e llama-3.1-8b" "$(tail -3 "$W/z3.out")"
r=$($PY - "$W/z3.jsonl" "$W/z3.out" <<'PYEOF'
import json, sys
L, C, NH, KV, hd, H, V, N = 32, 4096, 32, 8, 128, 14336, 128256, 64
P = 8030261248
layer = (NH + 2 * KV) * hd * C + C * NH * hd + 3 * H * C + 2 * C
outer = 2 * V * C + C
pad = lambda n: -(-n // N) * N
s = [d["stage_plan"] for d in map(json.loads, open(sys.argv[1])) if "stage_plan" in d]
out = open(sys.argv[2]).read()
ok = len(s) == 1 and L * layer + outer == P
s = s[0]
state = s["params_bytes"] + s["grads_bytes"] + s["optimizer_bytes"]
paper = 16 * P / N
shards = 16 * (pad(outer) + L * pad(layer)) // N
work = 4 * (2 * pad(outer) + 3 * pad(layer))
ok &= abs(state - paper) / paper < 0.05 and state == shards and s["gathered_bytes"] == work
ok &= "ZeRO working set" in out and "fits an h100's 80 GiB" in out and "plan: what the CUDA build (./train_gpt) would allocate on an NVIDIA H100" in out
print(f"params + grads + AdamW {state / 2**30:.3f} GiB (16 P / 64 = {paper / 2**30:.3f}, the shards by hand {shards / 2**30:.3f}), "
      f"working set {s['gathered_bytes'] / 2**30:.2f} GiB (by hand {work / 2**30:.2f}), device {s['device_bytes'] / 2**30:.2f} GiB")
sys.exit(0 if ok else 1)
PYEOF
) && ok "llama-3.1-8b, 64 ranks, ZeRO-3, --gpu h100: $r" || bad "llama-3.1-8b ZeRO-3 on 64 ranks vs 16 P / N" "$r"
out=$($BIN -e llama-3.1-8b --dry-run --world 64 -z 3 -b 1 -t 8192 2>&1)
grep -q "^plan: this cpu build's own memory (fp32; attention keeps T x T scores), not a GPU's: --gpu NAME" <<<"$out" \
  && ok "without --gpu the CPU build's plan says whose it is: \"$(grep "^plan:" <<<"$out" | cut -c1-100)...\"" || bad "the CPU build's plan names itself" "$out"
grep -qF "placement: planned, not started: rank = tp index + 8 * (dp index + 1 * stage): TP groups of 8 consecutive ranks; stage s holds ranks 8 * s to 8 * s + 7" "$W/w16.out" \
  && ok "the placement formula of --world 16 --tp 8 --pp 2 reads as the mesh: $(grep -o "rank = tp index[^:]*" "$W/w16.out")" || bad "placement formula" "$(grep placement "$W/w16.out")"
out=$($BIN -e d2 --dry-run -z 3 2>&1)
grep -qF "warning: -z 3 with one data-parallel rank: nothing to shard" <<<"$out" && ok "-z 3 with one data-parallel rank warns" || bad "-z 3 on one rank warns" "$out"

out=$($BIN -e llama-3.1-8b --dry-run 2>&1)
grep -qF "note: this plans the built-in corpus's tiny batch (512 tokens per step at -t 64), not a training run of this model; a real batch: -b 1 -t 8192 -d 524288" <<<"$out" \
  && ok "a preset's dry run at the built-in corpus's batch says so and shows a real batch's flags" || bad "the tiny batch's note" "$out"

# a stage that does not fit gets advice, checked here by planning it: Llama 3.1 8B on 8 L40S (48 GiB) at ZeRO-1 does not
# fit; the advice is ZeRO-3 with recompute 3, and planned so it fits, while either alone does not
a=(-e llama-3.1-8b --dry-run --world 8 -b 1 -t 8192 -s 0 --gpu l40s)
out=$($BIN "${a[@]}" -z 1 2>&1)
adv=$(grep -o "advice: it fits with [^:]*" <<<"$out" | sed 's/advice: it fits with //')
fit() { $BIN "${a[@]}" "$@" 2>&1 | grep -c "fits an l40s's 48 GiB$"; }
[ "$adv" = "-z 3 -r 3" ] && [ "$(fit -z 3 -r 3)" = 1 ] && [ "$(fit -z 3)" = 0 ] && [ "$(fit -z 1 -r 3)" = 0 ] \
  && ok "a stage that does not fit an L40S is advised '$adv', which planned fits, and neither lever alone does" || bad "the stage's advice" "$adv: $out"

# what --world refuses, naming the flag and the numbers
expect() {  # expect LABEL WANT ARGS...: exit 2 with WANT in the output
  local label=$1 want=$2; shift 2
  local out; out=$("$@" 2>&1); local rc=$?
  [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out" && ok "$label: \"$(grep -F -- "$want" <<<"$out" | head -1 | cut -c1-150)\"" || bad "$label" "rc $rc: $out"
}
expect "--world without --dry-run" "--world 16 plans a layout without starting it: it needs --dry-run" $BIN --world 16 --tp 8 -x 1
expect "--world with --autotune" "not --autotune (which takes --autotune-world)" $BIN --world 4 --dry-run --autotune
expect "a layout that does not divide the world" "--tp 8 x --pp 2 = 16 ranks does not divide the world of 24 ranks" \
  $BIN -e llama-3.1-8b --dry-run --world 24 --tp 8 --pp 2
expect "an unknown card" "--gpu: 'h900' is not a card the plan knows; expected one of h100" $BIN --dry-run --gpu h900
expect "--gpu in the CPU build without --dry-run" "--gpu h100: the cpu build plans that card's memory but does not run on it; add --dry-run" $BIN --gpu h100 -x 1
expect "a degree that does not split the model" "--tp 12 does not divide the model's 32 query heads" $BIN -e llama-3.1-8b --dry-run --world 12 --tp 12
# --autotune-world N --dry-run (issue 48): the layouts of N ranks that fit, in one process, nothing started or timed.
# Communication is counted, not estimated: each listed row's bytes per step by axis (train/comm_count.h, the log's
# tune_layout rows, stage 0's) are what rank 0 of a real run of its flags counts in each step (--timing's comm_bytes),
# for GPT-2 d2 (tied) at --tp 2 x dp 2 ZeRO-1, --pp 2 x dp 2 ZeRO-1 (the tied embedding's sum between the ends), dp 4
# ZeRO-3 (the layers' gathers and prefetches walked), --tp 2 x --pp 2, Llama d2 (multi-query: the key/value head's
# gradient summed over the TP pair) at --tp 2 x dp 2 ZeRO-2 (TP's sums every micro-batch), and at a --mem-limit that only
# recompute 3 fits, d2 --tp 2 x dp 2 ZeRO-1 -r 3 (the forward's TP collectives again in the backward)
list() { local tag=$1; shift; $BIN --dry-run --autotune-world 4 "$@" --log "$W/list.$tag.jsonl" > "$W/list.$tag.out" 2>&1 || bad "--autotune-world 4 --dry-run $*" "$(tail -3 "$W/list.$tag.out")"; }
list d2 -e d2 -b 4 -t 64 -d 2048
list ll -e llama-d2 -b 4 -t 64 -d 2048
list r3 -e d2 -b 8 -t 256 -d 8192 --mem-limit 0.0335
counted() {  # counted LABEL LIST MODEL TP PP Z ARGS...: the list's row of that layout against a real run's counters
  local label=$1 lst=$2 model=$3 tp=$4 pp=$5 z=$6; shift 6
  local row; row=$($PY -c "
import json, sys
rows = [d['tune_layout'] for d in map(json.loads, open('$W/list.$lst.jsonl')) if 'tune_layout' in d]
r = [r for r in rows if (r['tp'], r['pp'], r['dp'], r['zero_stage']) == ($tp, $pp, 4 // ($tp * $pp), $z)]
print(f\"-r {r[0]['recompute']} -b {r[0]['micro_batch']} --grad-accum {r[0]['grad_accum']}\" + (f\" --sp {r[0]['sp']}\" if $tp > 1 else '') if r else '')")
  [ -n "$row" ] || { bad "$label: no row --tp $tp --pp $pp -z $z in the list" "$(tail -3 "$W/list.$lst.out")"; return; }
  "${MPI[@]}" -np 4 $BIN -e $model --tp $tp --pp $pp -z $z $row "$@" -x 2 -v 0 -s 0 --timing --log "$W/run.$label.jsonl" > "$W/run.$label.out" 2>&1 \
    || { bad "$label: the real run" "$(tail -3 "$W/run.$label.out")"; return; }
  local r; r=$($PY - "$W/list.$lst.jsonl" "$W/run.$label.jsonl" $tp $pp $z <<'PYEOF'
import json, sys
tp, pp, z = map(int, sys.argv[3:])
row = [d["tune_layout"] for d in map(json.loads, open(sys.argv[1])) if "tune_layout" in d]
row = [r for r in row if (r["tp"], r["pp"], r["zero_stage"]) == (tp, pp, z)][0]
steps = [d["comm_bytes"] for d in map(json.loads, open(sys.argv[2])) if "loss" in d]
want = row["comm_bytes"][0]
print(f"-r {row['recompute']} -b {row['micro_batch']} --grad-accum {row['grad_accum']}: listed " +
      ", ".join(f"{k} {v:.0f}" for k, v in want.items() if v) + f"; the run's {len(steps)} steps the same")
sys.exit(0 if len(steps) == 2 and all(s == want for s in steps) and sum(want.values()) > 0 else 1)
PYEOF
)
  [ $? -eq 0 ] && ok "listed comm = a real run's counters, $label: $r" || bad "listed comm vs the real run's, $label" "$r"
  # every stage, every rank: the run's end gathers each rank's counters (--timing's comm_bytes_ranks, totals over its
  # steps); each rank's per step, every step alike, is its stage's listed row (the output end's tied-embedding receive
  # and its --sp gathers included), and the console's line for the stage says the same
  r=$($PY - "$W/list.$lst.jsonl" "$W/run.$label.jsonl" "$W/run.$label.out" $tp $pp $z <<'PYEOF'
import json, sys
tp, pp, z = map(int, sys.argv[4:])
row = [d["tune_layout"] for d in map(json.loads, open(sys.argv[1])) if "tune_layout" in d]
row = [r for r in row if (r["tp"], r["pp"], r["zero_stage"]) == (tp, pp, z)][0]
end = [d for d in map(json.loads, open(sys.argv[2])) if "comm_bytes_ranks" in d]
out = open(sys.argv[3]).read()
ok = len(end) == 1 and len(end[0]["comm_bytes_ranks"]) == 4 and end[0]["steps"] == 2 and end[0]["steps_unlike_first"] == [0] * 4
ok &= "every step the same on every rank" in out
per, msgs = 4 // pp, []
for st, want in enumerate(row["comm_bytes"]):
    got = [{k: v / 2 for k, v in c.items()} for c in end[0]["comm_bytes_ranks"][st * per:(st + 1) * per]] if ok else []
    ok &= len(got) == per and all(g == want for g in got) and sum(want.values()) > 0
    ok &= f"  stage {st} (ranks {st * per}-{st * per + per - 1}): " + " | ".join(f"{k} {v:.0f}" for k, v in want.items()) in out
    msgs.append(f"stage {st}'s {per} ranks " + ", ".join(f"{k} {v:.0f}" for k, v in want.items() if v) +
                "".join(f" (rank {st * per + i} counts {g})" for i, g in enumerate(got) if g != want))
print("; ".join(msgs))
sys.exit(0 if ok else 1)
PYEOF
)
  [ $? -eq 0 ] && ok "listed comm = every rank's counters per step, $label: $r" || bad "listed comm vs every rank's counters, $label" "$r"
}
if have_mpi "the listed layouts' comm against real runs"; then
  counted "d2 --tp 2 x dp 2 -z 1" d2 d2 2 1 1 -t 64
  counted "d2 --pp 2 x dp 2 -z 1" d2 d2 1 2 1 -t 64
  counted "d2 dp 4 -z 3" d2 d2 1 1 3 -t 64
  counted "d2 --tp 2 x --pp 2" d2 d2 2 2 0 -t 64
  counted "llama-d2 --tp 2 x dp 2 -z 2" ll llama-d2 2 1 2 -t 64
  counted "d2 --tp 2 x dp 2 -z 1 at recompute 3" r3 d2 2 1 1 -t 256
fi
# which layouts are listed, and their memory: every layout of 4 ranks d2 can take (by hand: TP 1 or 2, its 2 heads;
# 1 or 2 stages, its 2 layers; ZeRO 1-3 with data-parallel ranks, 2-3 without --pp) planned by --dry-run --world 4 at
# each recompute level against --mem-limit 0.037 GiB: a layout is listed at the lowest level that fits, with that
# plan's largest stage as its memory, and a layout that fits at none is left out and counted
list lim -e d2 -b 8 -t 256 -d 8192 --mem-limit 0.037
r=$($PY - "$BIN" "$W" <<'PYEOF'
import json, subprocess, sys
bin, w = sys.argv[1:]
rows = {(r["tp"], r["pp"], r["zero_stage"]): r for r in (d["tune_layout"] for d in map(json.loads, open(f"{w}/list.lim.jsonl")) if "tune_layout" in d)}
out = open(f"{w}/list.lim.out").read()
ok, want, left, msg = True, 0, 0, []
for tp in (1, 2):
    for pp in (1, 2):
        dp = 4 // (tp * pp)
        for z in range(4):
            if (dp == 1 and z) or (pp > 1 and z >= 2): continue
            got = None
            for r in range(4):
                A = 8192 // (8 * 256 * dp)
                q = subprocess.run([bin, "-e", "d2", "-b", "8", "-t", "256", "--grad-accum", str(A), "--dry-run", "--world", "4",
                                    "--tp", str(tp), "--pp", str(pp), "-z", str(z), "-r", str(r), "--mem-limit", "0.037",
                                    "--log", f"{w}/lim.jsonl"], capture_output=True, text=True)
                if q.returncode: print(q.stdout[-300:], q.stderr[-300:]); sys.exit(1)
                if "does not fit" not in q.stdout:
                    dev = max(d["stage_plan"]["device_bytes"] for d in map(json.loads, open(f"{w}/lim.jsonl")) if "stage_plan" in d)
                    got = (r, dev)
                    break
            row = rows.get((tp, pp, z))
            if got is None: left += 1; ok &= row is None
            else:
                want += 1
                ok &= row is not None and (row["recompute"], row["device_bytes"]) == got and row["dp"] == dp
            msg.append(f"tp{tp} pp{pp} z{z}: " + (f"-r {got[0]} {got[1]} B" if got else "none fits"))
ok &= len(rows) == want and f"{want} layouts fit" in out and f"left out: {left} that do not fit" in out
print(f"{want} listed, {left} left out: " + "; ".join(msg))
sys.exit(0 if ok else 1)
PYEOF
) && ok "the listed layouts and their memory are --dry-run --world's, at the lowest recompute that fits: $r" || bad "the list vs --dry-run --world" "$r"
# Llama 3.1 8B on 64 H100s (docs/clusters.md's table), with --autotune too: in well under two seconds of CPU; the first
# rows' memory is the --world plan of their flags; ordered by communication; what is left out is counted
r=$($PY - "$BIN" "$W" <<'PYEOF'
import json, resource, subprocess, sys
bin, w = sys.argv[1:]
base = [bin, "-e", "llama-3.1-8b", "-b", "1", "-t", "8192", "-d", "524288", "--gpu", "h100", "--dry-run"]
q = subprocess.run(base + ["--autotune", "--autotune-world", "64", "--log", f"{w}/list8b.jsonl"], capture_output=True, text=True)
cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = cpu.ru_utime + cpu.ru_stime
rows = [d["tune_layout"] for d in map(json.loads, open(f"{w}/list8b.jsonl")) if "tune_layout" in d]
ok = q.returncode == 0 and len(rows) > 30 and f"{len(rows)} layouts fit (the first 30 shown" in q.stdout and "round 1" not in q.stdout
ok &= "memory limit per rank 80.00 GiB (--gpu h100" in q.stdout and "left out: " in q.stdout
tot = [sum(r["comm_bytes"][r["comm_stage"]].values()) for r in rows]
ok &= tot == sorted(tot)
msg = []
for r in rows[:3] + [r for r in rows if r["tp"] == 8][:1]:
    subprocess.run(base + ["--world", "64", "--tp", str(r["tp"]), "--pp", str(r["pp"]), "-z", str(r["zero_stage"]), "-r", str(r["recompute"]),
                   "--log", f"{w}/w8b.jsonl"], capture_output=True)
    dev = max(d["stage_plan"]["device_bytes"] for d in map(json.loads, open(f"{w}/w8b.jsonl")) if "stage_plan" in d)
    ok &= dev == r["device_bytes"] and dev <= 80 * 2**30
    msg.append(f"--tp {r['tp']} --pp {r['pp']} -z {r['zero_stage']} -r {r['recompute']}: {dev / 2**30:.2f} GiB")
print(f"{len(rows)} layouts in {cpu:.2f} s of CPU; " + "; ".join(msg))
sys.exit(0 if ok and cpu < 2.0 else 1)
PYEOF
) && ok "llama-3.1-8b on 64 H100s, the fitting layouts: $r" || bad "llama-3.1-8b's list on 64 ranks" "$r"
# the CUDA build (emulated, where make test builds it): its list for a card is the CPU build's --gpu list, row for row
# (the same plan and count from the same code, with the CUDA build's facts); and --autotune without --dry-run plans
# against the card --gpu names, not the device it runs on (the tuner is stopped once its header has said so)
if [ -x ./train_gpt_emu ]; then
  a=(-e llama-3.1-8b -b 1 -t 8192 -d 524288 -s 0 --gpu h100 --dry-run --autotune-world 64)
  ./train_gpt_emu "${a[@]}" --log "$W/emu8b.jsonl" > "$W/emu8b.out" 2>&1; $BIN "${a[@]}" --log "$W/cpu8b.jsonl" > /dev/null 2>&1
  # (the stopped tuner's scratch directory under its own TMPDIR, gone with $W: a glob over /tmp would take another
  # suite's tuner directory from under it while the queue runs the two side by side)
  mkdir -p "$W/tune"
  head=$(TMPDIR=$W/tune timeout 300 ./train_gpt_emu --precision fp32 -b 2 -t 16 -d 32 --autotune --gpu a10 2>&1 | head -4)
  n=$(grep -c tune_layout "$W/emu8b.jsonl")
  cmp -s "$W/emu8b.jsonl" "$W/cpu8b.jsonl" && [ "$n" -gt 30 ] && grep -qF "memory limit per rank 24.00 GiB (--gpu a10: an NVIDIA A10 24GB)" <<<"$head" \
    && compgen -G "$W/tune/train_gpt_autotune.*" > /dev/null \
    && ok "the emulated CUDA build lists the CPU build's --gpu h100 layouts ($n rows, the same bytes), and --autotune --gpu a10 plans 24 GiB (its scratch under \$TMPDIR): $(grep "^autotune:" <<<"$head" | head -1 | cut -c1-120)" \
    || bad "the CUDA build's list and --autotune --gpu" "$n rows; $head; $(tail -2 "$W/emu8b.out")"
else
  skip "the emulated CUDA build's list and --autotune --gpu: no ./train_gpt_emu (make test builds it where the CUDA toolkit's headers are)"
fi
expect "--autotune-world with --world" "--autotune-world 64 with --world 64: give one" $BIN --dry-run --world 64 --autotune-world 64
finish
