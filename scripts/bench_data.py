#!/usr/bin/env python3
"""
`make bench-data`: ./tokenize shards against tiktoken on the same non-repeating text, in the same run.

Generates MB megabytes of JSON lines (documents of random length over a Zipf-distributed vocabulary
of Tiny Shakespeare's words, then 200k made-up ones in its tail: no block repeats, and the frequent words
recur as in real text), then times
  - ./tokenize shards on 1 and 2 threads (MB/s, tokens/s, peak RSS),
  - tiktoken's encode_ordinary_batch-free path single-process, and a multiprocessing.Pool of the
    same number of cores as llm.c's dev/data/fineweb.py uses it (imap, chunksize 16, one
    <|endoftext|> + encode_ordinary per document),
and checks that both give the same number of tokens. --rss-mb N adds one ./tokenize run on
N MB (the flat-memory check; nothing else at that size). Generated files live in a temporary
directory under /tmp and are deleted at the end.

  python3 scripts/bench_data.py [--mb 200] [--rss-mb 3000] [--threads 1,2] [--skip-tiktoken]
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ENC = None
ENCODER_DIR = ["../shared/data/x"]


def make_words(rng, n, text_path):
    """Tiny Shakespeare's words (when there) and n made-up ones, mixed case and punctuation."""
    real = open(text_path, encoding="utf-8").read().split() if os.path.exists(text_path) else []
    lens = rng.integers(2, 10, size=n)
    buf = bytes(rng.integers(97, 123, size=int(lens.sum()), dtype=np.uint8)).decode()
    ends = np.cumsum(lens)
    made = [buf[e - L:e] for e, L in zip(ends.tolist(), lens.tolist())]
    real = sorted(set(real))
    rng.shuffle(real)
    rng.shuffle(made)
    return np.array(real + made, dtype=object)  # Zipf's head: real words; its tail: made-up ones


def generate(path, mb, seed=0):
    rng = np.random.default_rng(seed)
    words = make_words(rng, 200000, os.path.join(os.path.dirname(ENCODER_DIR[0]), "tinyshakespeare.txt"))
    target, written = mb * 1000000, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            ids = rng.zipf(1.2, size=400000) % len(words)
            cuts = np.cumsum(rng.integers(50, 3000, size=400))
            for doc_ids in np.split(ids, cuts[cuts < len(ids)]):
                if len(doc_ids) == 0:
                    continue
                line = json.dumps({"text": " ".join(words[doc_ids])}) + "\n"
                f.write(line)
                written += len(line)
                if written >= target:
                    break
    return written


def timed(cmd):
    """Runs cmd; returns (wall seconds, CPU seconds, stdout, peak RSS of the child in MiB)."""
    wrapper = ("import resource, subprocess, sys, time; t = time.time(); "
               "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); dt = time.time() - t; "
               "sys.stdout.write(p.stdout.decode()); r = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print('@@ %f %f %d %d' % (dt, r.ru_utime + r.ru_stime, r.ru_maxrss, p.returncode))")
    p = subprocess.run([sys.executable, "-c", wrapper] + cmd, stdout=subprocess.PIPE, check=True)
    out = p.stdout.decode()
    dt, cpu, rss, rc = out.strip().split("\n")[-1].split()[1:]
    if int(rc) != 0:
        raise SystemExit("failed: %s" % " ".join(cmd))
    return float(dt), float(cpu), out, int(rss) / 1024


def run_tokenize(a, path, out, threads):
    cmd = [a.tokenize, "shards", "--encoder", a.encoder, "--merges", a.merges, "--in", path, "--out-dir", out,
           "--name", "bench", "--threads", str(threads), "--val-tokens", "1000000"]
    dt, cpu, log, rss = timed(cmd)
    tokens = int([l for l in log.splitlines() if " tokens in " in l][-1].split(" documents, ")[1].split()[0])
    shutil.rmtree(out, ignore_errors=True)
    return dt, cpu, tokens, rss


def init_worker(encoder, merges):
    global ENC
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
    from test_tokenizer import make_encoding
    ENC = make_encoding(encoder, merges)


def tok_doc(line):
    # llm.c's fineweb.py: the end-of-text token, then encode_ordinary(text), as uint16
    ids = [50256] + ENC.encode_ordinary(json.loads(line)["text"])
    return np.array(ids, dtype=np.uint16)


def run_tiktoken(a, path, procs):
    t, t0 = time.time(), os.times()
    n = 0
    with open(path, encoding="utf-8") as f:
        if procs == 1:
            init_worker(a.encoder, a.merges)
            for line in f:
                n += len(tok_doc(line))
        else:
            with mp.Pool(procs, initializer=init_worker, initargs=(a.encoder, a.merges)) as pool:
                for ids in pool.imap(tok_doc, f, chunksize=16):
                    n += len(ids)
    t1 = os.times()
    cpu = sum(t1[:4]) - sum(t0[:4])  # this process and its (joined) pool workers
    return time.time() - t, cpu, n


def main():
    ap = argparse.ArgumentParser(description="tokenize shards vs tiktoken")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rss-mb", type=int, default=0)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--skip-tiktoken", action="store_true")
    ap.add_argument("--tokenize", default="./tokenize")
    ap.add_argument("--encoder", default=os.environ.get("DATA_DIR", "../shared/data") + "/gpt2_encoder.json")
    ap.add_argument("--merges", default=os.environ.get("DATA_DIR", "../shared/data") + "/gpt2_vocab.bpe")
    a = ap.parse_args()
    ENCODER_DIR[0] = a.encoder
    tmp = tempfile.mkdtemp(prefix="bench_data_", dir="/tmp")
    try:
        path = os.path.join(tmp, "corpus.jsonl")
        t = time.time()
        size = generate(path, a.mb)
        print("input: %.0f MB of generated JSON lines (%.0f s to generate), %d cores" % (size / 1e6, time.time() - t,
                                                                                            os.cpu_count()))
        print("%-32s %7s %7s %8s %10s %10s %9s" % ("", "wall s", "CPU s", "MB/s", "Mtokens/s", "MB/CPU-s", "peak RSS"))
        row = "%-32s %7.1f %7.1f %8.1f %10.2f %10.1f %9s"
        ref = None
        for th in [int(x) for x in a.threads.split(",")]:
            dt, cpu, n, rss = run_tokenize(a, path, os.path.join(tmp, "out"), th)
            ref = ref or n
            print(row % ("./tokenize shards --threads %d" % th, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu,
                         "%.0f MiB" % rss))
        if not a.skip_tiktoken:
            for procs in [1] + [int(x) for x in a.threads.split(",") if int(x) > 1]:
                dt, cpu, n = run_tiktoken(a, path, procs)
                what = "tiktoken, one process" if procs == 1 else "tiktoken, Pool(%d) as llm.c" % procs
                print(row % (what, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu, ""))
                if n != ref:
                    print("  MISMATCH: tiktoken made %d tokens, tokenize %d" % (n, ref))
        print("(%d tokens, %.2f bytes a token; load average %.1f on %d cores: wall figures are shared-machine figures)"
              % (ref, size / ref, os.getloadavg()[0], os.cpu_count()))
        if a.rss_mb:
            os.remove(path)
            size = generate(path, a.rss_mb, seed=1)
            th = max(int(x) for x in a.threads.split(","))
            dt, cpu, n, rss = run_tokenize(a, path, os.path.join(tmp, "out"), th)
            print(row % ("./tokenize shards --threads %d" % th, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu,
                         "%.0f MiB" % rss) + "   (%.0f MB input, %d tokens)" % (size / 1e6, n))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
