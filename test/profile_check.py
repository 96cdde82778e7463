"""profile_check.py LOG L C Vp T TOKENS [--no-peak] [--any-ratio]: the --profile line of a JSON log is whole and its FLOPs are right.

Checks: one "profile" line with every module of the table (embedding ... other), the modules' shares adding
up to the profiled steps' time (within 5%), the counted FLOPs per step equal to what the matmuls and causal
attention do (6 per matmul weight per token, 12 L C (T+1)/2 per token for attention) to 1e-6, and within 2%
of the model's formula 6N + 6LCT; a measured peak with a fraction of it for the matmuls in (0, 1] (or, with
--no-peak, a null peak and null fractions, as on a device whose peak is unknown). --any-ratio leaves out the
2% check, for small models whose position embedding is a large part of N. Prints a summary line.
"""
import json
import sys

log, L, C, Vp, T, tokens = sys.argv[1], *map(int, sys.argv[2:7])
no_peak = "--no-peak" in sys.argv
names = ["embedding", "layernorm", "qkv matmul", "attention", "projection", "residual", "mlp up", "gelu", "mlp down",
         "head and loss", "optimizer", "collectives", "data", "other"]
lines = [d["profile"] for d in map(json.loads, open(log)) if "profile" in d]
bad = []
if len(lines) != 1:
    print(f"{len(lines)} profile lines")
    sys.exit(1)
p = lines[0]
mods = {m["module"]: m for m in p["modules"]}
if list(mods) != names:
    bad.append(f"modules {list(mods)}")
share = sum(m["share"] for m in p["modules"])
if abs(share - 1) > 0.05:
    bad.append(f"shares add up to {share:.4f}")
exact = 6 * (12 * L * C * C + Vp * C) * tokens + 6 * L * C * (T + 1) * tokens
counted, formula = p["counted_flops_per_step"], p["formula_flops_per_step"]
if abs(counted - exact) > 1e-6 * exact:
    bad.append(f"counted {counted:.6g} != matmuls + attention {exact:.6g}")
ratio = counted / formula
if abs(ratio - 1) > 0.02 and "--any-ratio" not in sys.argv:
    bad.append(f"counted / formula {ratio:.4f}")
mm = [mods[k] for k in ("qkv matmul", "projection", "mlp up", "mlp down", "head and loss")]
if no_peak:
    if p["peak_flops"] is not None or any(m["peak_fraction"] is not None for m in p["modules"]):
        bad.append("a peak where none is known")
elif not p["peak_flops"] or not all(m["peak_fraction"] and 0 < m["peak_fraction"] <= 1 for m in mm):
    bad.append(f"peak {p['peak_flops']}, matmul fractions {[m['peak_fraction'] for m in mm]}")
if any(m["calls"] <= 0 or m["flops"] <= 0 for m in mm + [mods["attention"]]):
    bad.append("a matmul or attention row without calls or FLOPs")
if bad:
    print("; ".join(bad))
    sys.exit(1)
peak = f"peak {p['peak_flops'] / 1e9:.0f} GFLOP/s ({p['peak_source']}), mlp up at {100 * mods['mlp up']['peak_fraction']:.0f}%" \
    if p["peak_flops"] else "no peak known"
print(f"{len(mods)} modules, shares add up to {share:.4f}; counted {counted / 1e9:.4f} GFLOP/step = matmuls + attention "
      f"exactly, {ratio:.4f} of 6N + 6LCT; {peak}")
