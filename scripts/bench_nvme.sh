#!/usr/bin/env bash
# bench_nvme.sh: --offload optimizer --offload-device nvme (ZeRO-Infinity) on the CPU build, against the
# disk's own limit. First the disk's sequential write and read bandwidth with direct I/O (dd, 1 GiB, under
# the same directory), then a short training run whose log gives, per step: bytes read from and written to
# the swap file, the time spent waiting on the disk, the rest (compute), and peak RSS.
#   scripts/bench_nvme.sh [MODEL] [B] [T] [STEPS]      (default d12 4 64 4; NVME_DIR=/fast/disk to choose the disk)
# `make bench-cpu` runs it on d12; the README's d48 figures are `scripts/bench_nvme.sh d48 1 64 3`.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-d12}; B=${2:-4}; T=${3:-64}; STEPS=${4:-4}
PY=${PYTHON:-python3}
DIR=${NVME_DIR:-/tmp}
W=$(mktemp -d "$DIR/bench_nvme.XXXXXX")
trap 'rm -rf "$W"' EXIT
make -s train_gpt_cpu
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), disk under $DIR: $(df -h --output=source,fstype,avail "$DIR" | tail -1 | xargs)"
# the disk's limit: 1 GiB written and read back with O_DIRECT (no page cache on either side)
dd if=/dev/zero of="$W/dd.bin" bs=64M count=16 oflag=direct 2> "$W/dd_w.txt"
dd if="$W/dd.bin" of=/dev/null bs=64M iflag=direct 2> "$W/dd_r.txt"
rm -f "$W/dd.bin"
wbw=$(tail -1 "$W/dd_w.txt" | awk -F', ' '{print $NF}'); rbw=$(tail -1 "$W/dd_r.txt" | awk -F', ' '{print $NF}')
echo "disk, dd with direct I/O, 1 GiB in 64 MiB blocks: write $wbw, read $rbw"
# the synthetic corpus is enough for timing; a real vocabulary (GPT-2's 50257) needs a shard of random tokens
$PY dev/rand_shard.py "$W/rand.bin" $((1 << 18)) || exit 1
mkdir -p "$W/swap"
./train_gpt_cpu -i "$W/rand.bin" -e "$MODEL" -b "$B" -t "$T" -x "$STEPS" -v 0 -s 0 --offload optimizer \
  --offload-device nvme --nvme-path "$W/swap" --log "$W/run.jsonl" > "$W/run.out" 2>&1 || { cat "$W/run.out"; exit 1; }
grep -E "^(memory|offload to nvme|allocated|step)" "$W/run.out"
$PY - "$W/run.jsonl" "$MODEL" "$B" "$T" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
plan = [r for r in rows if "memory_plan" in r][0]["memory_plan"]
steps = [r for r in rows if "loss" in r]
timed = steps[1:] or steps  # the first step warms caches
med = lambda k: statistics.median(k(s) for s in timed)
ms, wait = med(lambda s: s["ms"]), med(lambda s: s["nvme"]["wait_ms"])
rd, wr = med(lambda s: s["nvme"]["read_bytes"]), med(lambda s: s["nvme"]["write_bytes"])
opt = med(lambda s: s["time_ms"]["optimizer"])
print(f"{sys.argv[2]} B={sys.argv[3]} T={sys.argv[4]} --offload optimizer --offload-device nvme, median of {len(timed)} step(s):")
print(f"  step {ms / 1e3:.2f} s = waiting on the disk {wait / 1e3:.2f} s + compute {(ms - wait) / 1e3:.2f} s "
      f"(of which the optimizer phase {opt / 1e3:.2f} s, its disk wait included)")
print(f"  disk per step: read {rd / 2**30:.2f} GiB, written {wr / 2**30:.2f} GiB; {(rd + wr) / 1e9 / (ms / 1e3):.2f} GB/s over the step, "
      f"{(rd + wr) / 1e9 / max(opt / 1e3, 1e-9):.2f} GB/s over the optimizer phase (GB: 10^9 bytes, as dd counts)")
print(f"  plan per rank: device state {plan['device_bytes'] / 2**30:.2f} GiB | host RAM {plan['host_bytes'] / 2**30:.2f} GiB | "
      f"disk {plan['disk_bytes'] / 2**30:.2f} GiB | fits: {plan['fits']}")
print(f"  peak RSS {steps[-1]['peak_rss_mib'] / 1024:.2f} GiB (getrusage)")
PYEOF
