#!/usr/bin/env bash
# bench_sample.sh [BIN...]: how long sampling 63 tokens takes beside one training step, for a d6
# model with GPT-2's vocabulary at B=8, T=64 (the case where generation used to take longer than
# the run). The sample's time is measured from the moment the step's line is printed to the moment
# the sample's line is, so any build can be timed, old or new. Median of three runs.
set -u
cd "$(dirname "$0")/.."
W=$(mktemp -d /tmp/bench_sample.XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 - "$W/rand.bin" <<'PYEOF'
import random, struct, sys
random.seed(0); n = 1 << 18
h = [0] * 256; h[0:3] = [20240520, 1, n]
open(sys.argv[1], 'wb').write(struct.pack('<256i', *h) + struct.pack('<%dH' % n, *[random.randrange(50257) for _ in range(n)]))
PYEOF
for bin in "${@:-./train_gpt_cpu}"; do
  for i in 1 2 3; do
    "$bin" -i "$W/rand.bin" -e d6 -b 8 -t 64 -x 2 -v 0 -s 2 -g 64 2>&1 | python3 -c '
import sys, time, re
t_step = None
for line in sys.stdin:
    now = time.monotonic()
    m = re.match(r"step +2/2 .*\| ([0-9.]+) ms", line)
    if m: t_step, step_ms = now, float(m.group(1))
    if line.startswith("sample:") and t_step is not None: print(f"{(now - t_step) * 1e3:.0f} {step_ms:.0f}")
'
  done | sort -n | sed -n 2p | { read s st; echo "$bin: 63 tokens sampled in $s ms; one training step (8x64 tokens) $st ms"; }
done
