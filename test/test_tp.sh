#!/usr/bin/env bash
# test_tp.sh: tensor parallelism (--tp N, parallel/tensor_parallel.h) on the CPU build under mpirun. Every layout must train
# like one process that reads the same tokens: the same 8 losses and gradient norms within 2e-5 relative (they
# differ only in the order of floating-point sums: the row-parallel matmuls' parts are added by the all-reduce),
# the same validation losses and the same samples (the head's logits gathered from the ranks' columns for
# sampling), and the memory each rank allocates is what its plan says. Models: the Llama family with grouped-query
# attention 4:2, an untied head, q/k/v biases and QK-norm (test/llama_model.py); llama-d4, multi-query (1 key/value
# head) with a tied head; GPT-2 d4. --tp 2 and --tp 4: for the first, 4 ranks exceed its 2 key/value heads (each
# held by 2 ranks), for the second every degree does. Checkpoints stay whole: a --tp 2 checkpoint resumes in one
# process and a one-process checkpoint at --tp 4, each continuing like the uninterrupted run. And the refusals: a
# degree that does not divide the heads, the key/value heads, the MLP, the vocabulary or the world. Sequence
# parallelism (--sp, on by default) runs in every layout but the --sp 0 ones; its plan is checked against a count by
# hand, and the TP traffic each step logs against the collectives counted by hand (with Muon's and Adafactor's own). A --tp 2 run's export
# (scripts/export_hf.py) loads in transformers, whose logits are the trainer's (needs test/hf_forward and
# TORCH_PYTHON, default /usr/bin/python3, with torch, transformers and safetensors).
source "$(dirname "$0")/lib.sh"
have_mpi "tensor parallelism" || { finish; exit; }

# compare_losses A.jsonl B.jsonl: max relative differences of the per-step losses and gradient norms (2e-5), or FAIL.
# The norm shows a gradient summed twice or counted on every replica (clipping's global norm).
compare_losses() { $PY - "$@" <<'PYEOF'
import json, sys
def load(p):
    return {d["step"]: (d["loss"], d["norm"]) for d in map(json.loads, open(p)) if "loss" in d}
a, b = load(sys.argv[1]), load(sys.argv[2])
steps = sorted(b)
if not steps or any(s not in a for s in steps): print(f"missing steps: {sorted(a)} vs {steps}"); sys.exit(1)
err = max(abs(a[s][0] - b[s][0]) / abs(a[s][0]) for s in steps)
nerr = max(abs(a[s][1] - b[s][1]) / abs(a[s][1]) for s in steps)
print(f"{len(steps)} losses and norms, max relative differences {err:.2e} and {nerr:.2e}")
sys.exit(0 if err < 2e-5 and nerr < 2e-5 else 1)
PYEOF
}
# allocated LOG: the rank-0 allocation line's figures: model state and activations, each against its plan
allocated() { $PY -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if "allocated" in l][0]["allocated"]; print(d["model_state_bytes"], d["planned_model_state_bytes"], d["activation_bytes"], d["planned_activation_bytes"])' "$1"; }
$PY test/llama_model.py "$W/gqa42.bin" 4 2 || bad "writing the GQA 4:2 model file (test/llama_model.py)"
common=(-b 4 -t 32 -x 8 -v 4 -m 2 -s 4 -g 12 -l 1e-3 -u 3)
for model in "$W/gqa42.bin" llama-d4 d4; do
  name=$(basename "$model" .bin)
  $BIN -e "$model" "${common[@]}" --log "$W/$name.ref.jsonl" > "$W/$name.ref.out" 2>&1 || { bad "$name: one process" "$(cat "$W/$name.ref.out")"; continue; }
  for layout in "2" "4" "2 --sp 0"; do
    tp=${layout%% *}; tag=$(echo "$layout" | tr -d ' -')
    label="$name --tp $layout"
    out=$("${MPI[@]}" -np $tp $BIN -e "$model" "${common[@]}" --tp $layout --log "$W/$name.$tag.jsonl" 2>&1)
    if [ $? -ne 0 ]; then bad "$label runs" "$out"; continue; fi
    r=$(compare_losses "$W/$name.ref.jsonl" "$W/$name.$tag.jsonl") && ok "$label: $r vs 1 process" || bad "$label: losses vs 1 process" "$r"
    r=$(compare_eval "$W/$name.ref.jsonl" "$W/$name.ref.out" "$W/$name.$tag.jsonl" <(echo "$out") 2e-5) && ok "$label: $r" \
      || bad "$label: validation and samples vs 1 process" "$r"
    set -- $(allocated "$W/$name.$tag.jsonl")
    [ $# -eq 4 ] && [ "$1" = "$2" ] && [ "$3" = "$4" ] && ok "$label: allocates what the plan says ($1 bytes of model state, $3 of activations per rank)" \
      || bad "$label: allocated vs plan" "$*"
    dry_matches "$label" $tp "$W/$name.$tag.jsonl" -e "$model" "${common[@]}" --tp $layout
  done
done
# composed with the other axes (4 ranks, against one process reading the same tokens): --tp 2 x 2 data-parallel
# ranks at ZeRO-1, -2 and -3 (each TP rank's slice sharded over its data-parallel pair), with gradient accumulation
# and recompute levels; --tp 2 x --pp 2 with the tied embedding (its gradient summed between the pipeline's ends) and untied
compose() {  # compose LABEL MODEL REF_ACCUM ARGS...: 6 steps against one process at accumulation REF_ACCUM
  local label=$1 model=$2 acc=$3; shift 3
  local base=(-e "$model" -b 4 -t 32 -x 6 -v 0 -s 0 -l 1e-3 -u 3) tag; tag=$(echo "$label" | tr -c 'a-z0-9' _)
  [ -f "$W/ref.$(basename "$model").$acc.jsonl" ] || $BIN "${base[@]}" --grad-accum "$acc" --log "$W/ref.$(basename "$model").$acc.jsonl" > /dev/null 2>&1
  local out; out=$("${MPI[@]}" -np 4 $BIN "${base[@]}" "$@" --log "$W/$tag.jsonl" 2>&1) || { bad "$label runs" "$out"; return; }
  r=$(compare_losses "$W/ref.$(basename "$model").$acc.jsonl" "$W/$tag.jsonl") && ok "$label: $r vs 1 process x $acc" || bad "$label: losses vs 1 process" "$r"
  dry_matches "$label" 4 "$W/$tag.jsonl" "${base[@]}" "$@"
  set -- $(allocated "$W/$tag.jsonl")
  [ $# -eq 4 ] && [ "$1" = "$2" ] && [ "$3" = "$4" ] && ok "$label: allocates what the plan says" || bad "$label: allocated vs plan" "$*"
}
for z in 1 2 3; do compose "GQA 4:2 --tp 2 x 2 ranks, ZeRO-$z" "$W/gqa42.bin" 2 --tp 2 -z $z; done
compose "GQA 4:2 --tp 2 --sp 0 x 2 ranks, ZeRO-1" "$W/gqa42.bin" 2 --tp 2 --sp 0 -z 1
compose "GPT-2 d4 --tp 2 x 2 ranks, ZeRO-3, accumulation 2, recompute 3" d4 4 --tp 2 -z 3 --grad-accum 2 -r 3
compose "GPT-2 d4 --tp 2 --sp 0 x 2 ranks, ZeRO-2, accumulation 2, recompute 1" d4 4 --tp 2 --sp 0 -z 2 --grad-accum 2 -r 1
compose "MQA tied llama-d4 --tp 2 x --pp 2, accumulation 2, recompute 2" llama-d4 2 --tp 2 --pp 2 --grad-accum 2 -r 2
# --timing splits comm by axis (issue 50): --tp 2 x --pp 2 on 4 ranks, rank 0 (stage 0) has TP time and the pipeline's
# waiting apart, every axis's bytes beside its time; the axes add up to comm and the phases to the step; TP's bytes
# are the TP collectives' own count (tp_bytes), and stage 0 sends twice what it receives (activations out, their
# gradients back: B T C floats per micro-batch, halved by --sp; and the tied embedding's output gradient out: pipeline.h)
out=$("${MPI[@]}" -np 4 $BIN -e llama-d4 -b 4 -t 32 -x 2 -v 0 -s 0 --tp 2 --pp 2 --grad-accum 2 --timing --log "$W/axes.jsonl" 2>&1)
r=$($PY - "$W/axes.jsonl" <<'PYEOF'
import json, sys
rows = [d for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
ok, msg = len(rows) == 2, []
for d in rows:
    a, b, t = d["comm_ms"], d["comm_bytes"], d["time_ms"]
    ok &= a["tp"] > 0 and a["pipe_wait"] > 0 and a["pipe_send"] >= 0 and b["gather"] == 0
    ok &= abs(sum(a.values()) - t["comm"]) <= 0.01 * t["comm"] + 0.05 and abs(sum(t.values()) - d["ms"]) <= 0.05 * d["ms"]
    ok &= b["tp"] == sum(d["tp_bytes"].values()) and b["pipe_send"] == 2 * b["pipe_wait"] == 2 * 2 * 4 * 32 * 256 * 4 // 2
    msg.append(f"step {d['step']}: tp {a['tp']:.1f} ms {b['tp']:.0f} B, pipe wait {a['pipe_wait']:.1f} ms, send {a['pipe_send']:.1f} ms "
               f"{b['pipe_send']:.0f} B, of comm {t['comm']:.1f} ms")
print("; ".join(msg)); sys.exit(0 if ok else 1)
PYEOF
) && grep -qE "^  comm ms: tp [0-9.]+ \([0-9]+ B\) \| pipe_send [0-9.]+ \([0-9]+ B\) \| pipe_wait [0-9.]+ \([0-9]+ B\) \| dp_reduce .* \(sum [0-9.]+ of comm [0-9.]+\)$" <<<"$out" \
  && ok "--timing under --tp 2 x --pp 2: comm by axis, TP apart from the pipeline's waiting, adding up: $r" \
  || bad "--timing's comm by axis under --tp 2 x --pp 2" "$r
$(grep -A1 "time ms" <<<"$out" | head -4)"
# untied: each end stage counts its own end's tensors (wte on the first, lm_head's row slices on the last), none summed
compose "GQA 4:2 untied --tp 2 x --pp 2, accumulation 2" "$W/gqa42.bin" 2 --tp 2 --pp 2 --grad-accum 2
# what sequence parallelism saves, from the plan of the d4 runs above against a count by hand: the residual stream
# and the norms' rows (per layer ln1, residual2, ln2, residual3 of B T C floats and 4 statistics of B T; once:
# encoded, attproj, fcproj, lnf of B T C and lnf's 2 statistics) kept on B T / 2 rows, and the full (B T, C) buffer
# the gathers and the reduce-scatters pass through added to the workspace
r=$($PY - "$W/d4.2.jsonl" "$W/d4.2sp0.jsonl" <<'PYEOF'
import json, sys
sp, nosp = (json.loads(open(p).readline())["memory_plan"] for p in sys.argv[1:])
L, B, T, C, N = 4, 4, 32, 256, 2
sharded = 4 * (L * (4 * B * T * C + 4 * B * T) + 4 * B * T * C + 2 * B * T)
saved = nosp["activations_bytes"] - sp["activations_bytes"]
extra = sp["workspace_bytes"] - nosp["workspace_bytes"]
print(f"activations {nosp['activations_bytes']} -> {sp['activations_bytes']} bytes per rank: {saved} saved (by hand "
      f"{sharded * (N - 1) // N}), workspace +{extra} (by hand {4 * B * T * C})")
sys.exit(0 if saved == sharded * (N - 1) // N and extra == 4 * B * T * C else 1)
PYEOF
) && ok "--sp 1's plan, GPT-2 d4 --tp 2: $r" || bad "--sp 1's plan vs the count by hand" "$r"
# communication counted: rank 0's TP bytes in the log, by kind (each collective's whole buffer), against the count by
# hand for GPT-2 d4 (L 4, C 256, B 4, T 32, maxT 1024) at --tp 2: every step alike, every evaluation (-v 4 -m 2: at
# steps 0, 4 and 8) and every sample (-s 4 -g 12: at steps 4 and 8) too, so no collective goes uncounted. A step
# without --sp: all-reduces of B T C floats, 2 per layer forward and 2 backward, the embedding's and the head's input
# gradient, and the cross-entropy's sums (2 B T); the row maxima's all-gather (N B T). With --sp: per layer forward 2
# all-gathers (the norms' rows) and 2 reduce-scatters (the projections), backward 4 all-gathers (the residual
# gradient twice, the norms' rows again) and 2 reduce-scatters (the input gradients); the embedding 1 reduce-scatter
# and 1 all-gather, the head 2 all-gathers (its input, forward and backward) and 1 reduce-scatter; and the replicated
# tensors' gradients all-reduced (per layer 6 C: 2 LayerNorms' weights and biases and 2 row-parallel biases; wpe's
# maxT C, lnf's 2 C). Both: the gradient norm's sum of squares (one double). An evaluation batch is the forward's
# share and the cross-entropy's; a sample's 12 one-token forwards run whole rows (no --sp): per token the embedding's
# and 2 per layer all-reduces of C, and the row of logits gathered (Vp floats).
r=$($PY - "$W/d4.2sp0.jsonl" "$W/d4.2.jsonl" <<'PYEOF'
import json, sys
L, C, B, T, N, maxT, f, batches, gen = 4, 256, 4, 32, 2, 1024, 4, 2, 12
BTC = B * T * C * f
want = [{"all_reduce": BTC * (4 * L + 2) + 2 * B * T * f + 8, "all_gather": N * B * T * f, "reduce_scatter": 0},
        {"all_reduce": 2 * B * T * f + (6 * C * L + maxT * C + 2 * C) * f + 8, "all_gather": BTC * (6 * L + 3) + N * B * T * f,
         "reduce_scatter": BTC * (4 * L + 2)}]
evals = [{"all_reduce": batches * (BTC * (2 * L + 1) + 2 * B * T * f), "all_gather": batches * N * B * T * f, "reduce_scatter": 0},
         {"all_reduce": batches * 2 * B * T * f, "all_gather": batches * (BTC * (2 * L + 1) + N * B * T * f),
          "reduce_scatter": batches * BTC * (2 * L + 1)}]
ok = True
for p, w, e in zip(sys.argv[1:], want, evals):
    lines = list(map(json.loads, open(p)))
    Vp = 128  # the built-in corpus's 64 ids, padded to a multiple of 128
    s = {"all_reduce": gen * (2 * L + 1) * C * f, "all_gather": gen * Vp * 4, "reduce_scatter": 0}
    got = [d["tp_bytes"] for d in lines if "loss" in d]
    got_e = [d.get("tp_bytes") for d in lines if "val_loss" in d]
    got_s = [d.get("tp_bytes") for d in lines if "sample_tokens" in d]
    good = len(got) == 8 and all(g == w for g in got) and len(got_e) == 3 and all(g == e for g in got_e) \
        and len(got_s) == 2 and all(g == s for g in got_s)
    if not good: print(f"{p}: {got[:1]} per step, by hand {w}; evaluations {got_e} vs {e}; samples {got_s} vs {s}")
    ok &= good
print(f"8 steps, 3 evaluations and 2 samples each: --sp 0 {want[0]}, --sp 1 {want[1]} a step")
sys.exit(0 if ok else 1)
PYEOF
) && ok "TP bytes of steps, evaluations and samples as counted by hand: $r" || bad "TP bytes vs the count by hand" "$r"
# the optimizers' own TP traffic, counted by hand the same way (GPT-2 d4, --tp 2 --sp 0, 2 steps each): a step is
# AdamW's above plus the optimizer's whole-matrix collectives over every TP rank's unit, the widest held (padded; a
# layer's at --tp 2: ln1 and ln2's 4 C, q/k/v's 3 C / 2 rows and biases, attention's output C x C / 2 and its bias C,
# fc's 2 C rows and biases, fcproj's C x 2 C and its bias C: 6 C^2 + 9.5 C floats, wider than the outer unit).
# Muon: per layer one all-gather of the N units and one reduce-scatter of the owners' results; Adafactor: per unit,
# outer and layers, 3 all-gathers (the gradient, the parameters, the packed state)
r=$(for opt in muon adafactor; do
  "${MPI[@]}" -np 2 $BIN -e d4 -b 4 -t 32 -x 2 -v 0 -s 0 -l 1e-3 -u 3 --tp 2 --sp 0 --optimizer $opt --log "$W/bytes.$opt.jsonl" > "$W/bytes.$opt.out" 2>&1 \
    || { echo "--optimizer $opt --tp 2 failed: $(tail -3 "$W/bytes.$opt.out")"; exit 1; }
done
$PY - "$W/bytes.muon.jsonl" "$W/bytes.adafactor.jsonl" <<'PYEOF'
import json, sys
L, C, B, T, N, f = 4, 256, 4, 32, 2, 4
adamw = {"all_reduce": B * T * C * f * (4 * L + 2) + 2 * B * T * f + 8, "all_gather": N * B * T * f, "reduce_scatter": 0}
unit = 6 * C * C + 19 * C // 2
extra = [{"all_gather": L * N * unit * f, "reduce_scatter": L * N * unit * f}, {"all_gather": (L + 1) * 3 * N * unit * f}]
ok, msg = True, []
for p, name, e in zip(sys.argv[1:], ("Muon", "Adafactor"), extra):
    want = {k: v + e.get(k, 0) for k, v in adamw.items()}
    got = [d["tp_bytes"] for d in map(json.loads, open(p)) if "loss" in d]
    ok &= len(got) == 2 and all(g == want for g in got)
    msg.append(f"{name} {got[0] if got else None}" + ("" if got and got[0] == want else f" (by hand {want})"))
print("; ".join(msg) + " a step"); sys.exit(0 if ok else 1)
PYEOF
) && ok "Muon's and Adafactor's TP collectives in the TP bytes, as counted by hand: $r" || bad "the optimizers' TP bytes vs the count by hand" "$r"
# the vocabulary shards' edges: the built-in corpus seldom or never has a shard's first or last id as a target (id 32,
# the first of --tp 4's second shard, is none in its first thousand tokens), so a cross-entropy or an embedding that
# takes a neighbour's edge id as its own would pass the runs above. Token shards written here hold, in every 8 tokens,
# the first and last valid id of every shard at --tp 2 and 4 (V 64, Vp 128: ids 0, 31, 32, 63) as inputs and as
# targets; the GQA 4:2 model (untied: the embedding and the head both vocabulary-parallel) and GPT-2 d4's file (tied)
# train and validate on them at --tp 2 and 4 like one process.
$PY - "$W/edges_train.bin" "$W/edges_val.bin" <<'PYEOF'
import random, struct, sys
V, Vp = 64, 128
edges = sorted({e for n in (2, 4) for r in range(n) for e in (r * Vp // n, (r + 1) * Vp // n - 1) if e < V})
rng = random.Random(52)
for path, n in zip(sys.argv[1:], (4096, 1024)):
    toks = []
    while len(toks) < n:
        block = edges + [rng.randrange(V) for _ in range(8 - len(edges))]
        rng.shuffle(block)
        toks += block
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *toks[:n]))
PYEOF
$BIN -e d4 -b 4 -t 32 -x 1 -v 0 -s 0 -n 1 -o "$W/d4file" > /dev/null 2>&1
edge=(-i "$W/edges_train.bin" -j "$W/edges_val.bin" -b 4 -t 32 -x 4 -v 2 -m 2 -s 2 -g 8 -l 1e-3 -u 3)
for model in "$W/gqa42.bin" "$W/d4file/model_00000001.bin"; do
  name=$(basename "$(dirname "$model")")_$(basename "$model" .bin)
  $BIN -e "$model" "${edge[@]}" --log "$W/edge.$name.ref.jsonl" > "$W/edge.$name.ref.out" 2>&1 || { bad "$name on the edge ids: one process" "$(tail -3 "$W/edge.$name.ref.out")"; continue; }
  for tp in 2 4; do
    r2=""
    out=$("${MPI[@]}" -np $tp $BIN -e "$model" "${edge[@]}" --tp $tp --log "$W/edge.$name.$tp.jsonl" 2>&1) || { bad "$name on the edge ids --tp $tp runs" "$out"; continue; }
    r=$(compare_losses "$W/edge.$name.ref.jsonl" "$W/edge.$name.$tp.jsonl") \
      && r2=$(compare_eval "$W/edge.$name.ref.jsonl" "$W/edge.$name.ref.out" "$W/edge.$name.$tp.jsonl" <(echo "$out") 2e-5) \
      && ok "$(basename "$model") --tp $tp, every shard's first and last id as inputs and targets: $r, $r2 vs 1 process" \
      || bad "$(basename "$model") --tp $tp on the vocabulary shards' edge ids vs 1 process" "$r ${r2:-}"
  done
done
out=$("${MPI[@]}" -np 4 $BIN -e llama-d4 -b 4 -t 32 -x 1 -v 0 -s 0 --tp 2 2>&1)
grep -qF "world 4 = tensor-parallel 2 (sequence parallel on) x data-parallel 2 x pipeline 1" <<<"$out" \
  && grep -qF "rank 0 (stage 0, dp 0, tp 0), rank 1 (stage 0, dp 0, tp 1), rank 2 (stage 0, dp 1, tp 0), rank 3 (stage 0, dp 1, tp 1)" <<<"$out" \
  && ok "the mesh: TP ranks consecutive, then data parallel (placement line)" || bad "the mesh's placement line" "$out"

# checkpoints stay whole: --tp 2 saves at step 4 and one process goes on; one process saves and --tp 4 goes on
ck=(-e "$W/gqa42.bin" -b 4 -t 32 -v 0 -s 0 -l 1e-3 -u 3 --lr-steps 8)
$BIN "${ck[@]}" -x 8 --log "$W/ck.ref.jsonl" > "$W/ck.ref.out" 2>&1 || bad "checkpoint reference run" "$(cat "$W/ck.ref.out")"
"${MPI[@]}" -np 2 $BIN "${ck[@]}" -x 4 --tp 2 -o "$W/ck2" > "$W/ck2a.out" 2>&1 || bad "--tp 2 saving" "$(cat "$W/ck2a.out")"
$BIN "${ck[@]}" -x 8 -o "$W/ck2" -y 1 --log "$W/ck2.jsonl" > "$W/ck2b.out" 2>&1 || bad "one process resuming --tp 2's checkpoint" "$(cat "$W/ck2b.out")"
r=$(compare_losses "$W/ck.ref.jsonl" "$W/ck2.jsonl") && grep -q "resume: step 4" "$W/ck2b.out" \
  && ok "a --tp 2 checkpoint resumed in one process: steps 5-8, $r vs the uninterrupted run" || bad "--tp 2 checkpoint resumed in one process" "$r"
$BIN "${ck[@]}" -x 4 -o "$W/ck1" > "$W/ck1a.out" 2>&1 || bad "one process saving" "$(cat "$W/ck1a.out")"
"${MPI[@]}" -np 4 $BIN "${ck[@]}" -x 8 --tp 4 --sp 0 -o "$W/ck1" -y 1 --log "$W/ck1.jsonl" > "$W/ck1b.out" 2>&1 \
  || bad "--tp 4 resuming one process's checkpoint" "$(cat "$W/ck1b.out")"
r=$(compare_losses "$W/ck.ref.jsonl" "$W/ck1.jsonl") && grep -q "resume: step 4" "$W/ck1b.out" \
  && ok "a one-process checkpoint resumed at --tp 4 (2 ranks per key/value head): steps 5-8, $r vs the uninterrupted run" \
  || bad "one-process checkpoint resumed at --tp 4" "$r"
# the files are the whole model in today's order: --tp 2's step-4 model file against one process's, parameter by parameter
r=$($PY - "$W/ck2/model_00000004.bin" "$W/ck1/model_00000004.bin" <<'PYEOF'
import array, sys
def load(p):
    d = open(p, 'rb').read(); a = array.array('f'); a.frombytes(d[1024:]); return d[:1024], a
(ha, a), (hb, b) = load(sys.argv[1]), load(sys.argv[2])
diff = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")
print(f"{len(a)} parameters, headers {'equal' if ha == hb else 'differ'}, max difference {diff:.1e}")
sys.exit(0 if ha == hb and diff < 1e-4 else 1)
PYEOF
) && ok "--tp 2's model file is one process's: $r" || bad "--tp 2's model file vs one process's" "$r"

# a --tp 2 run's export loads in transformers: GPT-2 d2 and the GQA 4:2 untied model with q/k/v biases (no QK-norm:
# Qwen2ForCausalLM, which transformers 4.45 has) train 4 steps at --tp 2 and in one process on the same tokens;
# scripts/export_hf.py exports the --tp 2 run's final checkpoint, and transformers' logits on 2 x 16 random tokens
# (float32) are compared with the trainer's own forward (test/hf_forward, one process) of that checkpoint, and of the
# one-process run's: the largest difference over the largest logit, within 1e-5 (the orders of the sums differ)
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
hf_export() {  # hf_export NAME MODEL: the checks above for one model
  local name=$1 run=(-e "$2" -b 4 -t 32 -x 4 -v 0 -s 0 -l 1e-3 -u 3) tag; tag=$(echo "$1" | tr -c 'a-zA-Z0-9' _)
  "${MPI[@]}" -np 2 $BIN "${run[@]}" --tp 2 -o "$W/hf_$tag.tp2" > "$W/hf_$tag.tp2.out" 2>&1 || { bad "$name --tp 2 for the export" "$(cat "$W/hf_$tag.tp2.out")"; return; }
  $BIN "${run[@]}" -o "$W/hf_$tag.tp1" > "$W/hf_$tag.tp1.out" 2>&1 || { bad "$name in one process for the export" "$(cat "$W/hf_$tag.tp1.out")"; return; }
  local out; out=$("$TORCH_PY" scripts/export_hf.py "$W/hf_$tag.tp2" "$W/hf_$tag.hf" --no-tokenizer 2>&1) || { bad "$name: export_hf.py of the --tp 2 run" "$out"; return; }
  r=$(OMP_NUM_THREADS=1 "$TORCH_PY" - "$W/hf_$tag.hf" "$W/hf_$tag.tp2/model_00000004.bin" "$W/hf_$tag.tp1/model_00000004.bin" "$W/hf_$tag" <<'PYEOF'
import subprocess, sys
import numpy as np, torch
from transformers import AutoModelForCausalLM, logging
logging.set_verbosity_error()
hf, tp2, tp1, work = sys.argv[1:]
m = AutoModelForCausalLM.from_pretrained(hf).float().eval()
V, B, T = m.config.vocab_size, 2, 16
x = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(7))
with torch.no_grad():
    got = m(x).logits.numpy()
x.numpy().astype("<i4").tofile(work + ".tok")
res = []
for f in (tp2, tp1):
    r = subprocess.run(["test/hf_forward", "logits", f, work + ".tok", str(B), str(T), work + ".f32"], capture_output=True, text=True)
    if r.returncode: print(r.stdout + r.stderr); sys.exit(1)
    ref = np.fromfile(work + ".f32", dtype="<f4").reshape(B, T, V)
    res.append(float(np.abs(got - ref).max() / np.abs(ref).max()))
print(f"{type(m).__name__}, {B}x{T} tokens x {V} logits: {res[0]:.1e} vs the trainer's forward of the --tp 2 checkpoint, "
      f"{res[1]:.1e} of the one-process run's (< 1e-5)")
sys.exit(0 if max(res) < 1e-5 else 1)
PYEOF
) && ok "$name --tp 2's export loads in transformers: $r" || bad "$name --tp 2's export in transformers vs the trainer" "$r"
}
if [ ! -x test/hf_forward ]; then bad "export to transformers: test/hf_forward is not built (make test/hf_forward)"
elif "$TORCH_PY" -c "import torch, transformers, safetensors" 2>/dev/null; then
  $PY test/llama_model.py "$W/qwen42.bin" 4 2 --no-qk-norm || bad "writing the GQA 4:2 q/k/v-bias model file (test/llama_model.py)"
  hf_export "GQA 4:2 untied, q/k/v bias" "$W/qwen42.bin"
  hf_export "GPT-2 d2" d2
else bad "export to transformers: $TORCH_PY cannot import torch, transformers and safetensors (.ci/run shows the pip line)"; fi

# --profile under --tp: each rank counts the FLOPs of its slice (its q/k/v and MLP columns, attention on its heads,
# its vocabulary rows), so the TP group's counts, module by module, add up to one process's: exactly where every
# tensor splits (GQA 4:2 at --tp 2, GPT-2 d4 at --tp 2), and at --tp 4 beyond the 2 key/value heads with the q/k/v
# module over by the k/v projections each pair of ranks holds twice (6 x tokens x 2 KV hd C x L per step). And the
# step line's FLOP rate is the slice's formula, 6 N_rank + 6 L C_rank T per token (the profile line's formula per
# step) on the step's tokens
prof=(-b 4 -t 32 -x 3 -v 0 -s 0 --profile)
for model in "$W/gqa42.bin" d4; do
  name=$(basename "$model" .bin)
  $BIN -e "$model" "${prof[@]}" --log "$W/prof.$name.1.jsonl" > "$W/prof.$name.1.out" 2>&1 || { bad "$name --profile, one process" "$(cat "$W/prof.$name.1.out")"; continue; }
  for tp in 2 4; do
    [ $name = d4 ] && [ $tp = 4 ] && continue
    out=$("${MPI[@]}" -np $tp $BIN -e "$model" "${prof[@]}" --tp $tp --log "$W/prof.$name.$tp.jsonl" 2>&1) || { bad "$name --tp $tp --profile runs" "$out"; continue; }
    extra=0; [ $name = gqa42 ] && [ $tp = 4 ] && extra=$((6 * 4 * 32 * 2 * 2 * 16 * 64 * 2 * 2))  # 2 profiled steps
    r=$($PY - "$W/prof.$name.1.jsonl" "$W/prof.$name.$tp.jsonl" $tp $extra <<'PYEOF'
import json, sys
one, tp, n, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
prof = lambda p: [d["profile"] for d in map(json.loads, open(p)) if "profile" in d][0]
p1, pt = prof(one), prof(tp)
whole = {m["module"]: m["flops"] for m in p1["modules"]}
group, mine = pt["tp_group_flops"], {m["module"]: m["flops"] for m in pt["modules"]}
bad, qkv = [], list(whole)[2]  # the q/k/v row, named by the family ("qkv matmul", "qkv+rope")
for k, v in whole.items():
    want = v + (extra if k == qkv else 0)
    if abs(group[k] - want) > 1e-12 * max(want, 1): bad.append(f"{k}: the group's {group[k]:.6g}, one process {v:.6g} (+{extra:.6g})")
    if extra == 0 and abs(mine[k] * n - v) > 1e-12 * max(v, 1): bad.append(f"{k}: rank 0's {mine[k]:.6g} x {n} vs {v:.6g}")
steps = [d["flops_per_s"] * d["ms"] / 1e3 for d in map(json.loads, open(tp)) if "flops_per_s" in d]
f = pt["formula_flops_per_step"]
if not steps or any(abs(s - f) > 2e-3 * f for s in steps): bad.append(f"step lines' FLOPs {steps} vs the slice's formula {f:.6g}")
print("; ".join(bad) or f"{len(whole)} modules: the group's sum = one process's {sum(whole.values()) / 1e9:.4f} GFLOP"
      + (f" + the shared k/v heads' {extra / 1e9:.4f}" if extra else f", rank 0's = 1/{n} of each")
      + f"; the step line's FLOPs = the slice's formula {f / 1e9:.4f} GFLOP (one process {p1['formula_flops_per_step'] / 1e9:.4f})")
sys.exit(1 if bad else 0)
PYEOF
)
    [ $? -eq 0 ] && ok "$name --tp $tp --profile: $r" || bad "$name --tp $tp --profile: the slices' FLOPs" "$r"
  done
done

# refusals, each naming the flag and the numbers
expect() {  # expect LABEL WANT ARGS...: a non-zero exit whose output contains WANT
  local label=$1 want=$2; shift 2
  local out; out=$("$@" 2>&1); local rc=$?
  [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && ok "$label: \"$(grep -F -- "$want" <<<"$out" | head -1 | cut -c1-160)\"" \
    || bad "$label" "rc $rc: $out"
}
$PY test/llama_model.py "$W/gqa63.bin" 6 3
expect "a degree not dividing the world" "--tp 4 x --pp 1 = 4 ranks does not divide the world of 2 ranks" "${MPI[@]}" -np 2 $BIN --tp 4 -x 1
expect "a degree not dividing the query heads" "--tp 3 does not divide the model's 4 query heads" "${MPI[@]}" -np 3 $BIN -e d4 --tp 3 --sp 0 -x 1
expect "a degree neither dividing the key/value heads nor a multiple of them" "--tp 2 and the model's 3 key/value heads" \
  "${MPI[@]}" -np 2 $BIN -e "$W/gqa63.bin" --tp 2 --sp 0 -x 1
expect "a degree not dividing the MLP's hidden size" "--tp 3 does not divide the MLP's hidden size 512" "${MPI[@]}" -np 3 $BIN -e llama-d3 --tp 3 --sp 0 -x 1
expect "a degree not dividing the padded vocabulary" "--tp 3 does not divide the padded vocabulary's 128 rows" "${MPI[@]}" -np 3 $BIN -e d3 --tp 3 --sp 0 -x 1
expect "--tp 0" "--tp: 0, expected a tensor-parallel degree >= 1" $BIN --tp 0 -x 1
expect "--sp on by default with a sequence the degree does not divide: says it was the default and that --sp 0 lifts it" "--sp is on by default with --tp > 1 (--sp 1): -t/--seq-len 30 is not a multiple of --tp 4 (sequence parallelism keeps T / tp positions per rank); pass --sp 0" \
  "${MPI[@]}" -np 4 $BIN -e d4 --tp 4 -t 30 -x 1
expect "--sp 1 without --tp" "--sp 1: sequence parallelism shards the tensor-parallel ranks' sequence; it needs --tp > 1" $BIN --sp 1 -x 1
finish
