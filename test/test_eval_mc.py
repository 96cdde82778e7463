#!/usr/bin/python3
"""test_eval_mc.py: --eval-mc (train/eval_mc.h) and scripts/mc_tokenize.py, scripts/hellaswag.sh. The trainer's
per-example log-likelihoods (TRAIN_GPT_EVAL_MC_DUMP) against a PyTorch computation on the same weights
(transformers' GPT2LMHeadModel loaded from scripts/export_hf.py's export, which test_hf.py checks equals the
trainer's forward), the same score on ZeRO-3 and --pp 2 layouts and in the emulated CUDA build, chance on a
balanced set for an untrained model, and the errors. Run by test/test_eval_mc.sh.

    test/test_eval_mc.py --work DIR --data ../shared/data [--emu ./train_gpt_emu] [--mpi]
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_hf as H  # noqa: E402  (check, run, script, hf_load)

MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS", "-np", "2"]


def make_text_set(data, path, n, seed):
    """Examples from Tiny Shakespeare: a line, then its true next line among 3 others; labels balanced.
    One context is long, to make the trainer drop its first tokens."""
    lines = [l.strip() for l in open(os.path.join(data, "tinyshakespeare.txt")) if len(l.strip()) > 20]
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            j = rng.randrange(len(lines) - 1)
            ctx = lines[j] if i else " ".join(lines[j - 12:j + 1])
            wrong = [lines[rng.randrange(len(lines))] for _ in range(3)]
            label = i % 4
            ends = wrong[:label] + [lines[j + 1]] + wrong[label:]
            # the ending carries the space between (as the harness splits it: a context's trailing space moves to the ending)
            f.write(json.dumps({"context": ctx, "endings": [" " + e for e in ends], "label": label}) + "\n")


def read_dump(path, n):
    """The first evaluation's n lines: label, predictions and each ending's (sum, mean)."""
    rows = [l.split() for l in open(path)][:n]
    return [(int(r[1]), int(r[2]), int(r[3]), [(float(r[k]), float(r[k + 1])) for k in range(4, len(r), 2)]) for r in rows]


def torch_scores(m, tokset, T):
    """Each ending's log-likelihood in float64 from transformers' logits, with the trainer's truncation rule
    (the context's last T - len(ending) tokens)."""
    out = []
    with torch.no_grad():
        for ex in tokset:
            ctx, ends = ex["context_tokens"], ex["ending_tokens"]
            sc = []
            for e in ends:
                c = ctx[-(T - len(e)):] if len(ctx) > T - len(e) else ctx
                x = torch.tensor([c + e])
                lp = torch.log_softmax(m(x).logits[0].double(), -1)
                s = sum(float(lp[len(c) + t - 1, e[t]]) for t in range(len(e)))
                sc.append((s, s / len(e)))
            out.append(sc)
    return out


def trainer(binary, model, a, mcfile, dump, extra=(), mpi=False):
    if os.path.exists(dump):
        os.remove(dump)
    env = dict(os.environ, TRAIN_GPT_EVAL_MC_DUMP=dump)
    log = dump + ".log"
    cmd = (MPI if mpi else []) + [binary, "-e", model, "-i", a.ts + "/train_*.bin", "-j", a.ts + "/val_*.bin", "-b", "4",
                                  "-t", "64", "-x", "0", "-v", "1", "-m", "1", "-s", "0", "--eval-mc", mcfile, "--log", log] + list(extra)
    r = subprocess.run(cmd, cwd=H.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    vals = [json.loads(l) for l in open(log) if "val_loss" in l] if os.path.exists(log) else []
    return r, vals


def check_lm_eval(a, hfdir, text, got):
    """scripts/lm_eval.sh: the harness's hf model on the export, the set as a local YAML task, offline. Its
    log-likelihoods are the trainer's (examples 1-7: example 0's context is longer than the trainer's -t 64)."""
    out = os.path.join(a.work, "lm")
    env = dict(os.environ, PYTHON=sys.executable, HF_HOME=os.path.join(a.work, "hf_home"))
    r = subprocess.run(["bash", "scripts/lm_eval.sh", hfdir, text, out, "--limit", "8"], cwd=H.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env)
    res = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(out, "results")) for f in fs]
    results = [json.load(open(p)) for p in res if os.path.basename(p).startswith("results_")]
    samples = [json.loads(l) for p in res if os.path.basename(p).startswith("samples_") for l in open(p)]
    m = results[0]["results"].get("llmc_mc", {}) if results else {}
    H.check("scripts/lm_eval.sh runs lm-evaluation-harness offline on the export with the local YAML task: acc %s, "
            "acc_norm %s on 8 examples" % (m.get("acc,none"), m.get("acc_norm,none")), r.returncode == 0 and
            "acc,none" in m and "acc_norm,none" in m and len(samples) == 8, r.stdout[-600:])
    worst, same = float("inf"), False
    if len(samples) == 8 and len(got) == 24:
        by = {s["doc_id"]: [float(x[0]) for x in s["filtered_resps"]] for s in samples}
        worst = max(abs(by[i][k] - got[i][3][k][0]) for i in range(1, 8) for k in range(4))
        same = all(int(np.argmax(by[i])) == got[i][2] for i in range(1, 8))
    H.check("the harness's log-likelihood of each ending equals the trainer's --eval-mc within 1e-4 (%.2e), and its acc "
            "choices the trainer's" % worst, worst <= 1e-4 and same)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--emu", default="")
    ap.add_argument("--mpi", action="store_true")
    ap.add_argument("--lmeval", action="store_true", help="also scripts/lm_eval.sh (needs lm_eval)")
    a = ap.parse_args()
    w = a.work
    enc, mer = os.path.join(a.data, "gpt2_encoder.json"), os.path.join(a.data, "gpt2_vocab.bpe")
    a.ts = os.path.join(w, "ts")
    H.run(["./tokenize", "shards", "--encoder", enc, "--merges", mer, "--in", os.path.join(a.data, "tinyshakespeare.txt"),
           "--out-dir", a.ts])
    out = os.path.join(w, "out")
    r = H.run(["./train_gpt_cpu", "-i", a.ts + "/train_*.bin", "-j", a.ts + "/val_*.bin", "-e", "d2", "-b", "8", "-t", "64",
               "-x", "10", "-l", "3e-3", "-v", "0", "-s", "0", "-o", out, "-n", "10"])
    model = os.path.join(out, "model_00000010.bin")

    # the text set through the converter
    text, tok = os.path.join(w, "mc.jsonl"), os.path.join(w, "mc_tok.jsonl")
    make_text_set(a.data, text, 24, 11)
    r = H.script("mc_tokenize.py", text, tok, "--encoder", enc, "--merges", mer)
    tokset = [json.loads(l) for l in open(tok)] if r.returncode == 0 else []
    ex = json.loads(open(text).readlines()[1])
    want = [int(x) for x in H.run(["./tokenize", "encode", "--encoder", enc, "--merges", mer], input=ex["context"]).stdout.split()]
    H.check("mc_tokenize.py converts 24 text examples; a context's ids are ./tokenize's", len(tokset) == 24 and
            tokset[1]["context_tokens"] == want and tokset[1]["label"] == 1, r.stdout)

    # the CPU build against PyTorch, example by example
    dump = os.path.join(w, "cpu.dump")
    r, vals = trainer("./train_gpt_cpu", model, a, tok, dump)
    got = read_dump(dump, 24) if os.path.exists(dump) else []
    hfdir = os.path.join(w, "hf")
    H.script("export_hf.py", model, hfdir, "--encoder", enc, "--merges", mer)
    m, _, _ = H.hf_load(hfdir)
    ref = torch_scores(m, tokset, 64)
    worst = max((abs(g[3][k][0] - ref[i][k][0]) for i, g in enumerate(got) for k in range(len(ref[i]))), default=float("inf"))
    H.check("the trainer's log-likelihood of each of the 96 endings equals PyTorch's within 1e-4 (max |diff| %.2e; one "
            "context cut to its last tokens)" % worst, len(got) == 24 and worst <= 1e-4, r.stdout[-300:])
    pn = [int(np.argmax([s[1] for s in sc])) for sc in ref]
    ps = [int(np.argmax([s[0] for s in sc])) for sc in ref]
    labels = [e["label"] for e in tokset]
    H.check("acc_norm's and acc's choices equal PyTorch's example by example",
            len(got) == 24 and [g[1] for g in got] == pn and [g[2] for g in got] == ps, "%s vs %s" % ([g[1] for g in got], pn))
    an = sum(p == l for p, l in zip(pn, labels)) / 24
    ac = sum(p == l for p, l in zip(ps, labels)) / 24
    v0 = vals[0].get("eval_mc", {}) if vals else {}
    H.check("the log's val line has eval_mc acc_norm %.4f, acc %.4f, n 24: PyTorch's %.4f and %.4f" %
            (v0.get("acc_norm", -1), v0.get("acc", -1), an, ac),
            abs(v0.get("acc_norm", -1) - an) < 1e-9 and abs(v0.get("acc", -1) - ac) < 1e-9 and v0.get("n") == 24
            and "eval-mc acc_norm %.4f" % an in r.stdout, str(vals))

    # other layouts and the CUDA build give the same choices and scores
    layouts = []
    if a.mpi:
        layouts += [("2 ranks at ZeRO-3", "./train_gpt_cpu", ["-z", "3"], True), ("--pp 2", "./train_gpt_cpu", ["--pp", "2"], True)]
    if a.emu:
        layouts.append(("the CUDA build on the emulator (fp32)", a.emu, ["--precision", "fp32"], False))
    for name, binary, extra, mpi in layouts:
        d2 = os.path.join(w, "l.dump")
        r2, vals2 = trainer(binary, model, a, tok, d2, extra, mpi)
        g2 = read_dump(d2, 24) if os.path.exists(d2) else []
        diff = max((abs(x[3][k][0] - y[3][k][0]) for x, y in zip(g2, got) for k in range(len(x[3]))), default=float("inf"))
        H.check("%s: the same choices and eval_mc line as one process, log-likelihoods within 1e-4 (%.2e)" % (name, diff),
                len(g2) == 24 and [x[1:3] for x in g2] == [x[1:3] for x in got] and diff <= 1e-4
                and vals2 and vals2[0].get("eval_mc") == v0, r2.stdout[-400:])

    # an untrained model on a balanced random set of 400 (synthetic corpus, 64 tokens): chance, 1/4
    rng = random.Random(5)
    bal = os.path.join(w, "balanced.jsonl")
    with open(bal, "w") as f:
        for i in range(400):
            f.write(json.dumps({"context_tokens": [rng.randrange(64) for _ in range(rng.randint(3, 12))],
                                "ending_tokens": [[rng.randrange(64) for _ in range(rng.randint(1, 6))] for _ in range(4)],
                                "label": i % 4}) + "\n")
    r = H.run(["./train_gpt_cpu", "-e", "d2", "-x", "0", "-v", "1", "-m", "1", "-s", "0", "--eval-mc", bal])
    acc = [float(x) for x in __import__("re").findall(r"eval-mc acc_norm ([0-9.]+)", r.stdout)]
    sd = math.sqrt(0.25 * 0.75 / 400)
    H.check("an untrained d2 on a balanced set of 400 with 4 endings scores at chance: acc_norm %s within 0.25 +- 3 sigma "
            "(%.3f)" % (acc[:1], 3 * sd), len(acc) >= 1 and abs(acc[0] - 0.25) <= 3 * sd, r.stdout[-300:])

    # errors
    bad = os.path.join(w, "bad.jsonl")
    open(bad, "w").write('{"context_tokens":[1,2],"ending_tokens":[[3],[4]],"label":0}\n'
                         '{"context_tokens":[1,2],"ending_tokens":[[3],[4],[5]],"label":3}\n')
    r = H.run(["./train_gpt_cpu", "-e", "d2", "-x", "0", "-v", "1", "-s", "0", "--eval-mc", bad])
    H.check("a label out of range is an error naming the file, the line and the field",
            r.returncode != 0 and "bad.jsonl line 2" in r.stdout and '"label" is 3, outside 0..2' in r.stdout, r.stdout[-300:])
    r = H.run(["./train_gpt_cpu", "-e", "d2", "-x", "0", "-v", "1", "-s", "0", "--eval-mc", text])
    H.check("a text set given to the trainer is an error that names scripts/mc_tokenize.py",
            r.returncode != 0 and "mc.jsonl line 1" in r.stdout and "mc_tokenize.py" in r.stdout, r.stdout[-300:])
    badt = os.path.join(w, "badt.jsonl")
    open(badt, "w").write('{"ctx": "A", "endings": ["b", "c"], "label": "2"}\n')
    r = H.script("mc_tokenize.py", badt, os.path.join(w, "badt_tok.jsonl"), "--encoder", enc, "--merges", mer)
    H.check("mc_tokenize.py: a label out of range names the line and writes nothing", r.returncode != 0 and "line 1" in r.stdout
            and '"label" is 2' in r.stdout and not os.path.exists(os.path.join(w, "badt_tok.jsonl")), r.stdout)
    r = H.run(["./train_gpt_cpu", "-i", a.ts + "/train_*.bin", "-e", "d2", "-x", "0", "--eval-mc", tok])
    H.check("--eval-mc without -j is refused before anything runs", r.returncode != 0 and "--eval-mc" in r.stdout
            and "-j/--val-data" in r.stdout, r.stdout[-300:])

    # scripts/hellaswag.sh on a local file of HellaSwag's form (no network here)
    hd = os.path.join(w, "hs")
    os.makedirs(hd)
    with open(os.path.join(hd, "hellaswag_val.jsonl"), "w") as f:
        for i in range(3):
            f.write(json.dumps({"ind": i, "activity_label": "Roof shingle removal", "ctx_a": "A man is on a roof.",
                                "ctx_b": "he", "ctx": "A man is on a roof. he", "split": "val", "split_type": "indomain",
                                "label": i % 4, "endings": ["is using wrap.", "removes tiles.", "sits.", "waves."],
                                "source_id": "x"}) + "\n")
    r = subprocess.run(["bash", "scripts/hellaswag.sh", hd], cwd=H.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    conv = [json.loads(l) for l in open(os.path.join(hd, "hellaswag_val_tokens.jsonl"))] if r.returncode == 0 else []
    H.check("scripts/hellaswag.sh converts a local hellaswag_val.jsonl (endings with llm.c's leading space: ' sits.' -> %s)"
            % (conv[0]["ending_tokens"][2] if conv else None), len(conv) == 3 and conv[2]["label"] == 2
            and conv[0]["ending_tokens"][2] == [10718, 13], r.stdout[-300:])
    if a.lmeval:
        check_lm_eval(a, hfdir, text, got)
    else:
        H.skipped += 1
        print("SKIP lm-evaluation-harness: %s cannot import lm_eval (.ci/run shows the pip install line)" % sys.executable)
    print("%d passed, %d failed, %d skipped" % (H.passed, H.failed, H.skipped))
    sys.exit(1 if H.failed else 0)


if __name__ == "__main__":
    main()
