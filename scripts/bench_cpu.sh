#!/usr/bin/env bash
# bench_cpu.sh: CPU training throughput, as `make bench-cpu` runs it. GPT-2 124M (d12, GPT-2
# vocabulary) at B=4, T=64, and a small model (d4), on shards of random tokens. Prints the median
# ms/step and tokens/s over the timed steps (the first step, which warms caches, is left out).
#   STEPS=20 scripts/bench_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-20}
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/bench_cpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
make -s train_gpt_cpu
$PY dev/rand_shard.py "$W/rand.bin" $((1 << 20)) || exit 1
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
for model in d12 d4; do
  ./train_gpt_cpu -i "$W/rand.bin" -e $model -b 4 -t 64 -x $((STEPS + 1)) -v 0 -s 0 --log "$W/$model.jsonl" > "$W/$model.out"
  $PY - "$W/$model.jsonl" "$model" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][1:]
ms = statistics.median(r["ms"] for r in rows)
print(f"{sys.argv[2]:>4} B=4 T=64: median {ms:.1f} ms/step over {len(rows)} steps, {4 * 64 / (ms / 1e3):.1f} tokens/s, "
      f"peak RSS {rows[-1]['peak_rss_mib']:.0f} MiB")
PYEOF
done
# ZeRO-Infinity on d12: AdamW's state in a swap file, against the disk's own bandwidth (scripts/bench_nvme.sh)
bash scripts/bench_nvme.sh d12 4 64 4
