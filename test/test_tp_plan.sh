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
outer_slice = 2 * (Vp // N) * C + C
def stages(p): return [d["stage_plan"] for d in map(json.loads, open(p)) if "stage_plan" in d]
s16, s32 = stages(sys.argv[1]), stages(sys.argv[2])
out = open(sys.argv[3]).read()
msgs, ok = [], whole == 8030261248 and f"| {whole} parameters" in out
msgs.append(f"whole model by hand {whole} (published 8030261248)")
ok &= len(s16) == 2 and s16[0]["first_layer"] == 0 and s16[0]["last_layer"] + 1 == s16[1]["first_layer"] and s16[1]["last_layer"] == L - 1
for s in s16:
    layers = s["last_layer"] - s["first_layer"] + 1
    want = layers * layer_slice + outer_slice  # the first and the last stage hold the outer unit (both, here)
    good = s["params"] == want and s["params_bytes"] == 4 * want and s["grads_bytes"] == 4 * want and s["optimizer_bytes"] == 8 * want
    good &= f"{s['first_rank']}-{s['last_rank']} (tp 8 x dp 1) | layers {s['first_layer']}-{s['last_layer']}" in out
    good &= f"| {want} parameters per rank" in out
    ok &= good
    msgs.append(f"stage {s['stage']} (ranks {s['first_rank']}-{s['last_rank']}, {layers} layers): {s['params']} per rank, by hand "
                f"{layers} x {layer_slice} + {outer_slice} = {want}")
# ZeRO-1 over the 2 data-parallel ranks: the whole slice's parameters and gradients, AdamW's m and v of half of
# each unit (layers even, the outer unit even: no padding)
ok &= len(s32) == 2
for s, t in zip(s32, s16):
    layers = s["last_layer"] - s["first_layer"] + 1
    want_opt = 2 * 4 * (layers * (layer_slice // 2) + outer_slice // 2)
    ok &= s["params"] == t["params"] and s["params_bytes"] == t["params_bytes"] and s["optimizer_bytes"] == want_opt
    ok &= (s["first_rank"], s["last_rank"]) == (16 * s["stage"], 16 * s["stage"] + 15)
    msgs.append(f"ZeRO-1 x 2: stage {s['stage']} AdamW {s['optimizer_bytes']} bytes (by hand {want_opt})")
print("; ".join(msgs))
sys.exit(0 if ok else 1)
PYEOF
) && ok "llama-3.1-8b --world 16 --tp 8 --pp 2 as counted by hand: $r" || bad "llama-3.1-8b's stages vs the count by hand" "$r"

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
expect "a degree that does not split the model" "--tp 12 does not divide the model's 32 query heads" $BIN -e llama-3.1-8b --dry-run --world 12 --tp 12
finish
