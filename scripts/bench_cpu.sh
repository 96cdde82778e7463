#!/usr/bin/env bash
# bench_cpu.sh: CPU training throughput, as `make bench-cpu` runs it. GPT-2 124M (d12, GPT-2
# vocabulary) at B=4, T=64, and a small model (d4), on shards of random tokens. Prints the median
# ms/step and tokens/s over the timed steps (the first step, which warms caches, is left out).
#   STEPS=20 scripts/bench_cpu.sh
#   TP=2 [SP=0|1] scripts/bench_cpu.sh   # tensor parallelism: TP ranks under mpirun (--tp TP [--sp SP]), the same
#                                        # tokens per step; OMP_NUM_THREADS each (default: the cores / TP)
# MPIRUN: the launcher and its flags (default mpirun; as root: MPIRUN="mpirun --allow-run-as-root --oversubscribe").
# The NVMe offload figure (scripts/bench_nvme.sh) is one process's: it runs only at TP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-20}
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/bench_cpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
TP=${TP:-1}
case "$TP" in ''|*[!0-9]*|0) echo "bench_cpu.sh: TP=$TP, expected a tensor-parallel degree >= 1" >&2; exit 2 ;; esac
make -s train_gpt_cpu
LAUNCH=() TPF=()
if [ "$TP" -gt 1 ]; then  # TP ranks, each OMP_NUM_THREADS threads (the cores shared out unless given)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / TP > 0 ? $(nproc) / TP : 1 ))}
  read -r -a LAUNCH <<< "${MPIRUN:-mpirun}"
  LAUNCH+=(-np "$TP" -x OMP_NUM_THREADS) TPF=(--tp "$TP")
  if [ -n "${SP:-}" ]; then TPF+=(--sp "$SP"); fi
fi
$PY dev/rand_shard.py "$W/rand.bin" $((1 << 20)) || exit 1
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}$([ "$TP" -gt 1 ] && echo ", ${TPF[*]}: $TP ranks")"
for model in d12 d4; do
  "${LAUNCH[@]}" ./train_gpt_cpu -i "$W/rand.bin" -e $model -b 4 -t 64 -x $((STEPS + 1)) -v 0 -s 0 "${TPF[@]}" \
    --log "$W/$model.jsonl" > "$W/$model.out" 2>&1 || { echo "$model: failed: $(grep -m1 -iE 'error' "$W/$model.out")" >&2; exit 1; }
  $PY - "$W/$model.jsonl" "$model${TPF[*]:+ ${TPF[*]}}" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][1:]
ms = statistics.median(r["ms"] for r in rows)
print(f"{sys.argv[2]:>4} B=4 T=64: median {ms:.1f} ms/step over {len(rows)} steps, {4 * 64 / (ms / 1e3):.1f} tokens/s, "
      f"peak RSS {rows[-1]['peak_rss_mib']:.0f} MiB")
PYEOF
done
# ZeRO-Infinity on d12: AdamW's state in a swap file, against the disk's own bandwidth (scripts/bench_nvme.sh)
[ "$TP" -gt 1 ] || bash scripts/bench_nvme.sh d12 4 64 4
