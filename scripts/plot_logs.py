#!/usr/bin/env python3
"""Draw training loss, validation loss and throughput from one or more JSON-lines logs (--log) into
one PNG, to compare runs.

    python3 scripts/plot_logs.py out/a/log.jsonl out/b/log.jsonl [-o runs.png] [--labels a,b] [--smooth 20]

Without -o the PNG goes beside the first log, named after it (out/a/log.jsonl -> out/a/log.png).
Needs matplotlib (pip install matplotlib, or Debian's python3-matplotlib).

A log that was appended to by resumed runs is read as one run: the last line of each step wins.
"""
import argparse
import json
import math
import sys


def json_lines(path):
    """Each line of a train_gpt --log file as a dict, in file order (blank lines skipped); exits naming the file, and
    the line, where it cannot be opened or a line is not JSON. dev/optimizer_study.py reads its logs with it too."""
    try:
        f = open(path)
    except OSError as e:
        sys.exit(f"error: {path}: cannot open: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"error: {path}:{n}: not JSON ({e})")


def read_log(path):
    steps, vals, tps, floor, no_att = {}, {}, {}, None, None
    for d in json_lines(path):
        if "loss" in d and "step" in d:
            steps[d["step"]] = d["loss"]
            if "tokens_per_s" in d:
                tps[d["step"]] = d["tokens_per_s"]
        elif "val_loss" in d:
            vals[d["step"]] = d["val_loss"]
            floor = d.get("floor", floor)
            no_att = d.get("no_attention", no_att)
    if not steps and not vals:
        sys.exit(f"error: {path}: no step or val_loss lines (is it a train_gpt --log file?)")
    return steps, vals, tps, floor, no_att


def smooth(xs, k):
    if k <= 1:
        return xs
    out, acc = [], []
    for x in xs:
        acc.append(x)
        if len(acc) > k:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="JSON-lines logs written by train_gpt --log")
    ap.add_argument("-o", "--out", help="PNG file to write (default: the first log's name with .png)")
    ap.add_argument("--labels", help="comma-separated names for the runs (default: the file names)")
    ap.add_argument("--smooth", type=int, default=1, help="moving average over this many steps for the train loss")
    args = ap.parse_args()
    labels = args.labels.split(",") if args.labels else args.logs
    if len(labels) != len(args.logs):
        sys.exit(f"error: --labels has {len(labels)} names for {len(args.logs)} logs")

    if args.out is None:
        base = args.logs[0][:-len(".jsonl")] if args.logs[0].endswith(".jsonl") else args.logs[0]
        args.out = base + ".png"
    runs = [read_log(path) for path in args.logs]  # bad logs are named before anything is drawn
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: plot_logs.py needs matplotlib: pip install matplotlib (or apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_tps) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (steps, vals, tps, floor, no_att), label in zip(runs, labels):
        xs = sorted(steps)
        line = ax_loss.plot(xs, smooth([steps[s] for s in xs], args.smooth), lw=1, alpha=0.8, label=f"{label} train")[0]
        if vals:
            vs = sorted(vals)
            ax_loss.plot(vs, [vals[s] for s in vs], "o-", ms=3, color=line.get_color(), label=f"{label} val")
        if floor is not None and math.isfinite(floor):
            ax_loss.axhline(floor, ls="--", lw=1, color="gray", label="entropy floor")
        if no_att is not None and math.isfinite(no_att):
            ax_loss.axhline(no_att, ls=":", lw=1, color="gray", label="best without attention")
        if tps:
            ts = sorted(tps)
            ax_tps.plot(ts, [tps[s] for s in ts], lw=1, color=line.get_color(), label=label)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (nats/token)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=8)
    ax_loss.grid(alpha=0.3)
    ax_tps.set_xlabel("step")
    ax_tps.set_ylabel("tokens/s")
    ax_tps.set_title("throughput")
    ax_tps.grid(alpha=0.3)
    if ax_tps.lines:
        ax_tps.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
