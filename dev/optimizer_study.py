#!/usr/bin/env python3
"""Steps to a loss: Muon against AdamW on Tiny Shakespeare (issue 42), with the CPU build.

    python3 dev/optimizer_study.py [--models d4,llama-d4] [--lrs 3e-4,1e-3,3e-3,1e-2] [-x 80] [--out DIR]

For each model it trains once per optimizer and learning rate of the sweep (same seed, same data order, same
schedule), picks each optimizer's best lr by its final validation loss, and reports the first validated step at
which Muon's best run reaches AdamW's best final validation loss, with the training seconds of both (the sum of
the logged step times, Newton-Schulz included; validation left out). It writes a text report (--result) and one
PNG of both best curves per model, against step and against seconds (--plot).

Tiny Shakespeare is tokenized with GPT-2's tokenizer by ./tokenize shards (from --data-dir). A run whose log is
complete is not run again, so an interrupted study continues; --from-logs only reads the logs of --out.
Needs matplotlib for the plot (pip install matplotlib).
"""
import argparse
import glob
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from plot_logs import json_lines  # noqa: E402  (the logs' one reader)


def read_log(path):
    """(steps, vals): steps[step] = ms of the step, vals[step] = validation loss. A resumed log's last line of a
    step wins."""
    steps, vals = {}, {}
    for d in json_lines(path):
        if "val_loss" in d:
            vals[d["step"]] = d["val_loss"]
        elif "loss" in d and "step" in d:
            steps[d["step"]] = d["ms"]
    return steps, vals


def final_val(vals):
    return vals[max(vals)] if vals else float("inf")


def best_lr(finals):
    """finals: {lr: final validation loss} -> the lr of the lowest (a diverged run's NaN/None never wins)."""
    ok = {lr: v for lr, v in finals.items() if v is not None and v == v}
    if not ok:
        sys.exit("error: every run of the sweep diverged")
    return min(ok, key=lambda lr: ok[lr])


def steps_to_loss(vals, target):
    """The first validated step whose validation loss is at or below target (None if never)."""
    for s in sorted(vals):
        if vals[s] is not None and vals[s] <= target:
            return s
    return None


def seconds_to(steps, step):
    """Training seconds of steps 1..step: the logged step times summed."""
    return sum(ms for s, ms in steps.items() if s <= step) / 1000.0


def loss_str(v, width):
    return f"{v:>{width}.4f}" if v is not None and v == v else f"{'diverged':>{width}}"


def lr_name(lr):
    return f"{lr:g}"


def train_cmd(a, model, opt, lr, log):
    d = os.path.join(a.out, "shards")
    return [a.bin, "-i", f"{d}/train_*.bin", "-j", f"{d}/val_*.bin", "-e", model, "--optimizer", opt,
            "-l", lr_name(lr), "-b", str(a.b), "-t", str(a.t), "-x", str(a.steps), "-u", str(a.warmup),
            "-v", str(a.val_every), "-m", str(a.val_batches), "-s", "0", "--seed", str(a.seed),
            "--print-every", "10", "--log", log]


def complete(log, steps):
    if not os.path.exists(log):
        return False
    s, v = read_log(log)
    return steps in s and steps in v


def make_shards(a):
    d = os.path.join(a.out, "shards")
    if os.path.exists(os.path.join(d, "val_000000.bin")):
        return
    cmd = [a.tokenize, "shards", "--encoder", os.path.join(a.data_dir, "gpt2_encoder.json"), "--merges",
           os.path.join(a.data_dir, "gpt2_vocab.bpe"), "--in", os.path.join(a.data_dir, "tinyshakespeare.txt"),
           "--out-dir", d]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def run_sweep(a):
    """Each run not yet complete, --jobs at a time (each with --threads OpenMP threads), its console in a .out file
    beside its log."""
    queued = []
    for model in a.models:
        for opt in ("adamw", "muon"):
            for lr in a.lrs[opt]:
                log = os.path.join(a.out, f"{model}_{opt}_lr{lr_name(lr)}.jsonl")
                if not complete(log, a.steps):
                    queued.append((train_cmd(a, model, opt, lr, log), log))
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    running = []
    while queued or running:
        while queued and len(running) < a.jobs:
            cmd, log = queued.pop(0)
            if os.path.exists(log):
                os.remove(log)  # an interrupted run starts again (the trainer appends to a log)
            print("$ " + " ".join(cmd), flush=True)
            out = open(log[:-len(".jsonl")] + ".out", "w")
            running.append((subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), cmd, log, out, time.time()))
        time.sleep(1)
        for r in [r for r in running if r[0].poll() is not None]:
            running.remove(r)
            p, cmd, log, out, t0 = r
            out.close()
            tail = open(out.name).read().strip().splitlines()[-1:] or [""]
            print(f"  {time.time() - t0:.0f} s wall, {os.path.basename(log)}: {tail[0]}", flush=True)
            if p.returncode != 0 and not os.path.exists(log):
                sys.exit(f"error: {' '.join(cmd)} failed: see {out.name}")


def analyse(a):
    """Per model: the sweep's rows, each optimizer's best, and Muon's steps and seconds to AdamW's final loss."""
    out = []
    for model in a.models:
        runs = {}
        for opt in ("adamw", "muon"):
            for lr in a.lrs[opt]:
                log = os.path.join(a.out, f"{model}_{opt}_lr{lr_name(lr)}.jsonl")
                if not os.path.exists(log):
                    sys.exit(f"error: {log}: no such log (run the study without --from-logs)")
                runs[opt, lr] = read_log(log)
        best = {opt: best_lr({lr: final_val(runs[opt, lr][1]) for lr in a.lrs[opt]}) for opt in ("adamw", "muon")}
        ad_steps, ad_vals = runs["adamw", best["adamw"]]
        mu_steps, mu_vals = runs["muon", best["muon"]]
        target = final_val(ad_vals)
        ad_last = max(ad_vals)
        mu_at = steps_to_loss(mu_vals, target)
        out.append({"model": model, "runs": runs, "best": best, "target": target, "adamw_steps": ad_last,
                    "adamw_s": seconds_to(ad_steps, ad_last), "muon_steps": mu_at,
                    "muon_s": None if mu_at is None else seconds_to(mu_steps, mu_at)})
    return out


def shard_tokens(a, split):
    """Tokens in the split's shards: an llm.c shard's header holds its count at int32 [2]."""
    n = 0
    for p in sorted(glob.glob(os.path.join(a.out, "shards", f"{split}_*.bin"))):
        with open(p, "rb") as f:
            n += struct.unpack("<3i", f.read(12))[2]
    return n


def report(a, res):
    L = [f"# Steps to a loss: Muon against AdamW (dev/optimizer_study.py), {time.strftime('%Y-%m-%d')}", "",
         f"data: Tiny Shakespeare, GPT-2's tokenizer ({a.data_dir}/tinyshakespeare.txt by ./tokenize shards): "
         f"{shard_tokens(a, 'train')} train tokens, {shard_tokens(a, 'val')} validation tokens",
         f"each run: -b {a.b} -t {a.t} ({a.b * a.t} tokens per step) -x {a.steps} ({a.b * a.t * a.steps} tokens) "
         f"-u {a.warmup}, cosine to 0.1, -c 0.1, clip 1, --seed {a.seed} (the same data order for all), "
         f"validation every {a.val_every} steps on {a.val_batches} x {a.b * a.t} tokens",
         f"runs: {a.jobs} at a time, {a.threads} OpenMP thread(s) each",
         f"sweep: AdamW lr {', '.join(map(lr_name, a.lrs['adamw']))}; Muon lr {', '.join(map(lr_name, a.lrs['muon']))} "
         "(--muon-lr-adjust match_rms_adamw: Muon's matrices and AdamW's rest share -l)",
         "seconds: the logged step times summed (forward, backward, the optimizer with Newton-Schulz; validation "
         "left out), on a shared 2-core machine: noisy, a ratio of the two, not a speed claim", ""]
    for r in res:
        L.append(f"## {r['model']}")
        L.append(f"{'optimizer':<10}{'lr':>8}{'final val':>11}{'train s':>9}{'opt ms/step':>13}")
        for (opt, lr), (steps, vals) in r["runs"].items():
            mark = "  <- best" if r["best"][opt] == lr else ""
            L.append(f"{opt:<10}{lr_name(lr):>8}{loss_str(final_val(vals), 11)}{seconds_to(steps, max(steps)):>9.1f}"
                     f"{opt_ms(a, r['model'], opt, lr):>13.1f}{mark}")
        for opt in ("adamw", "muon"):
            if len(a.lrs[opt]) > 2 and r["best"][opt] in (min(a.lrs[opt]), max(a.lrs[opt])):
                L.append(f"{opt}'s best lr is at the sweep's edge: a wider sweep might find a better one")
        ns = banner_line(a, r["model"], r["best"]["muon"], "optimizer: Newton-Schulz")
        if ns:
            L.append(ns[len("optimizer: "):])
        L.append(f"AdamW (lr {lr_name(r['best']['adamw'])}) ends at val {r['target']:.4f} after {r['adamw_steps']} steps, "
                 f"{r['adamw_s']:.1f} s")
        if r["muon_steps"] is None:
            L.append(f"Muon (lr {lr_name(r['best']['muon'])}) never reaches {r['target']:.4f} in {a.steps} steps")
        else:
            L.append(f"Muon (lr {lr_name(r['best']['muon'])}) reaches it at step {r['muon_steps']} "
                     f"({r['muon_steps'] / r['adamw_steps']:.2f} of AdamW's steps; goal <= 0.67), "
                     f"{r['muon_s']:.1f} s ({r['muon_s'] / r['adamw_s']:.2f} of AdamW's seconds)")
        L.append("")
    L.append("commands (one per run; the shards by ./tokenize shards as above):")
    for r in res:
        for opt, lr in r["runs"]:
            L.append("  " + " ".join(train_cmd(a, r["model"], opt, lr, f"{r['model']}_{opt}_lr{lr_name(lr)}.jsonl")))
    return "\n".join(L) + "\n"


def banner_line(a, model, lr, prefix):
    """The line of Muon's run's console (its .out) that starts with prefix, or None."""
    try:
        with open(os.path.join(a.out, f"{model}_muon_lr{lr_name(lr)}.out")) as f:
            return next((ln.strip() for ln in f if ln.startswith(prefix)), None)
    except OSError:
        return None


def opt_ms(a, model, opt, lr):
    """The optimizer's mean ms per step (Newton-Schulz inside Muon's) from the log's time breakdown."""
    ms = [d["time_ms"]["optimizer"] for d in json_lines(os.path.join(a.out, f"{model}_{opt}_lr{lr_name(lr)}.jsonl"))
          if "time_ms" in d and "val_loss" not in d]
    return sum(ms) / len(ms) if ms else float("nan")


def plot(a, res):
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: optimizer_study.py needs matplotlib for --plot: pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(res), 2, figsize=(10, 3.2 * len(res)), squeeze=False)
    for row, r in zip(axes, res):
        for opt, color in (("adamw", "tab:blue"), ("muon", "tab:red")):
            steps, vals = r["runs"][opt, r["best"][opt]]
            vs = sorted(vals)
            label = f"{opt} lr {lr_name(r['best'][opt])}"
            row[0].plot(vs, [vals[s] for s in vs], "o-", ms=2, color=color, label=label)
            row[1].plot([seconds_to(steps, s) for s in vs], [vals[s] for s in vs], "o-", ms=2, color=color, label=label)
        for ax, x, by in zip(row, ("step", "training seconds (Newton-Schulz included)"), ("steps", "seconds")):
            ax.axhline(r["target"], ls="--", lw=1, color="gray", label="AdamW's final")
            ax.set_xlabel(x)
            ax.set_ylabel("validation loss")
            ax.set_title(f"{r['model']}: Tiny Shakespeare, by {by}")
            ax.set_ylim(r["target"] - 0.5, r["target"] + 2.5)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.plot, dpi=70)
    print(f"wrote {a.plot}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="d4,llama-d4", help="comma-separated -e models (default: d4,llama-d4)")
    ap.add_argument("--lrs", default="3e-4,1e-3,3e-3,1e-2", help="the lr sweep of both optimizers (default: 3e-4,1e-3,3e-3,1e-2)")
    ap.add_argument("--lrs-adamw", help="AdamW's sweep (default: --lrs)")
    ap.add_argument("--lrs-muon", help="Muon's sweep (default: --lrs)")
    ap.add_argument("-x", "--steps", type=int, default=80, help="steps per run (default: 80)")
    ap.add_argument("-b", type=int, default=4, help="micro-batch (default: 4)")
    ap.add_argument("-t", type=int, default=64, help="sequence length (default: 64)")
    ap.add_argument("-u", "--warmup", type=int, default=10, help="warmup steps (default: 10)")
    ap.add_argument("-v", "--val-every", type=int, default=4, help="validate every N steps (default: 4)")
    ap.add_argument("-m", "--val-batches", type=int, default=2, help="validation micro-batches (default: 2)")
    ap.add_argument("--seed", type=int, default=1337, help="seed of every run (default: 1337)")
    ap.add_argument("--data-dir", default="../shared/data", help="tinyshakespeare.txt and GPT-2's tokenizer files")
    ap.add_argument("--out", default="out/optimizer_study", help="shards and logs (default: out/optimizer_study)")
    ap.add_argument("--result", help="write the report here too (default: print it only)")
    ap.add_argument("--plot", help="PNG of both best curves per model, vs step and vs seconds")
    ap.add_argument("--bin", default="./train_gpt_cpu", help="the trainer (default: ./train_gpt_cpu)")
    ap.add_argument("--tokenize", default="./tokenize", help="the tokenizer program (default: ./tokenize)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default: 1)")
    ap.add_argument("--threads", type=int, default=2, help="OpenMP threads of each run (default: 2)")
    ap.add_argument("--from-logs", action="store_true", help="run nothing: report on the logs already in --out")
    a = ap.parse_args()
    a.models = a.models.split(",")
    a.lrs = {opt: [float(x) for x in (getattr(a, f"lrs_{opt}") or a.lrs).split(",")] for opt in ("adamw", "muon")}
    if not a.from_logs:
        os.makedirs(a.out, exist_ok=True)
        make_shards(a)
        run_sweep(a)
    res = analyse(a)
    text = report(a, res)
    print(text, end="")
    if a.result:
        with open(a.result, "w") as f:
            f.write(text)
    if a.plot:
        plot(a, res)


if __name__ == "__main__":
    main()
