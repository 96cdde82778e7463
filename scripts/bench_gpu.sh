#!/usr/bin/env bash
# bench_gpu.sh (make bench): GPT-2 124M (d12), T=1024, on the GPU: train_gpt's tokens/s, MFU and
# peak memory at the largest micro-batch that fits, and the same model in PyTorch (bf16 autocast,
# torch.compile, SDPA: dev/bench_pytorch.py) in the same run, for the ratio. Output goes to stdout
# and to dev/bench/bench_gpu_<gpu>.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-20}
make -s train_gpt dev/cuda/kernels
W=$(mktemp -d /tmp/bench_gpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 - "$W/rand.bin" <<'PYEOF'
import numpy as np, sys
n = 1 << 24
toks = np.random.default_rng(0).integers(0, 50257, n, dtype=np.uint16)
h = np.zeros(256, dtype=np.int32); h[:3] = [20240520, 1, n]
with open(sys.argv[1], 'wb') as f: f.write(h.tobytes()); f.write(toks.tobytes())
PYEOF
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
mkdir -p dev/bench
out=dev/bench/bench_gpu_${gpu}.txt
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  for B in 16 8 4; do
    if ./train_gpt -i "$W/rand.bin" -e d12 -b $B -t 1024 -x $STEPS -v 0 -s 0 --log "$W/tg.jsonl" > "$W/tg.out" 2>&1; then
      python3 - "$W/tg.jsonl" $B <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][3:]
ms = statistics.median(r["ms"] for r in rows)
mfu = statistics.median(r["mfu"] or 0 for r in rows)
print(f"train_gpt d12 B={sys.argv[2]} T=1024: {ms:.1f} ms/step, {int(sys.argv[2]) * 1024 / (ms / 1e3):.0f} tok/s, MFU {100 * mfu:.1f}%")
PYEOF
      grep "memory plan" "$W/tg.out" | head -1
      break
    fi
  done
  python3 dev/bench_pytorch.py --depth 12 --batch 16 --seq 1024 --steps $((STEPS + 10)) 2>&1 | grep -v "^{"
  # where the time goes: each kernel alone at the same shapes (B=8)
  ./dev/cuda/kernels bench
} | tee "$out"
