"""breakdown.py LOG [MIN_COMM_MS]: the wall-clock breakdown of a training log is whole.

Every step line of the JSON log must have "time_ms" with the six parts (data, forward, backward, comm,
optimizer, other), none negative, adding up to the step's "ms" within 5%; where the log splits comm by axis
("comm_ms": tp, pipe_send, pipe_wait, dp_reduce, gather, other: runs of several ranks), the axes add up to
comm (within 1% and 0.05 ms: the same intervals, charged twice over); with MIN_COMM_MS, every step's
comm must be at least that (with MIN_COMM_MS@STEP, only that step's). Prints a one-line summary; exits 1
on any failure. Used by the shell suites (test_cli.sh, test_zero.sh, test_pipeline.sh, test_cuda_emu.sh).
"""
import json
import sys

rows = [d for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
min_comm, only_step = None, None
if len(sys.argv) > 2:
    spec = sys.argv[2].split("@")
    min_comm = float(spec[0])
    only_step = int(spec[1]) if len(spec) > 1 else None
keys = ["data", "forward", "backward", "comm", "optimizer", "other"]
bad = []
for d in rows:
    t = d.get("time_ms", {})
    if sorted(t) != sorted(keys) or min(t.values()) < 0:
        bad.append(f"step {d['step']}: time_ms {t}")
        continue
    s = sum(t.values())
    if abs(s - d["ms"]) > 0.05 * d["ms"]:
        bad.append(f"step {d['step']}: parts sum to {s:.2f} of {d['ms']:.2f} ms")
    axes = d.get("comm_ms")
    if axes is not None and (sorted(axes) != sorted(["tp", "pipe_send", "pipe_wait", "dp_reduce", "gather", "other"]) or
                             min(axes.values()) < 0 or abs(sum(axes.values()) - t["comm"]) > 0.01 * t["comm"] + 0.05):
        bad.append(f"step {d['step']}: comm_ms {axes} do not add up to comm {t['comm']:.3f}")
    if min_comm is not None and (only_step is None or d["step"] == only_step) and t["comm"] < min_comm:
        bad.append(f"step {d['step']}: comm {t['comm']:.3f} ms < {min_comm}")
if not rows:
    bad.append("no step lines")
if bad:
    print("; ".join(bad))
    sys.exit(1)
worst = max(abs(sum(d["time_ms"].values()) - d["ms"]) / d["ms"] for d in rows)
show = next((d for d in rows if d["step"] == only_step), rows[-1])
print(f"{len(rows)} steps, parts within {100 * worst:.2f}% of ms; step {show['step']}: " +
      ", ".join(f"{k} {v:.1f}" for k, v in show["time_ms"].items()) + f" of {show['ms']:.1f} ms")
