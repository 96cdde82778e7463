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

Then the same for a large Hugging Face tokenizer.json (--json-vocab, default 110,000 ids, Llama 3's
pre-tokenizer, trained with the `tokenizers` library under TORCH_PYTHON on 10 MB of the same kind of
text, cached as /tmp/bench_data_tokenizer_VOCAB.json; or --json-tokenizer FILE): ./tokenize shards
--tokenizer (uint32 shards), `tokenizers`' encode_batch on all cores, and tiktoken built from the same
vocabulary (one process and a Pool), with their token counts compared. --skip-json leaves it out.

  python3 scripts/bench_data.py [--mb 200] [--rss-mb 3000] [--threads 1,2] [--skip-tiktoken] [--skip-json]
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

try:
    import numpy as np
except ImportError:  # numpy is the scripts' one dependency: say so, not a traceback
    sys.exit("error: bench_data.py needs numpy: pip install numpy (or apt-get install python3-numpy)")

ENC = None
DOC_ID = 50256  # the id before each document: GPT-2's <|endoftext|>, or the tokenizer.json's <|begin_of_text|>
ENCODER_DIR = ["../shared/data/x"]
TORCH_PY = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
              r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

# run by TORCH_PYTHON (the Python with `tokenizers`): train a byte-level BPE with Llama 3's pre-tokenizer
TRAIN_CODE = r'''
import json, os, sys
from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, trainers
src, out, vocab, pat = sys.argv[1:5]
tok = Tokenizer(models.BPE(ignore_merges=True))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pat), behavior="isolated", invert=False),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
tr = trainers.BpeTrainer(vocab_size=int(vocab), special_tokens=["<|begin_of_text|>", "<|end_of_text|>"], show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator((json.loads(l)["text"] for l in open(src, encoding="utf-8")), tr)
tok.save(out + ".tmp")
os.replace(out + ".tmp", out)
print(tok.get_vocab_size())
'''

# run by TORCH_PYTHON: `tokenizers`' encode_batch (its thread pool: all cores) over the JSON lines, 1000 documents a batch
ENCODE_CODE = r'''
import json, os, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
t, t0, n, batch = time.time(), os.times(), 0, []
def flush(batch):
    return sum(1 + len(e.ids) for e in tok.encode_batch(batch, add_special_tokens=False))
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        batch.append(json.loads(line)["text"])
        if len(batch) == 1000:
            n += flush(batch)
            batch = []
n += flush(batch) if batch else 0
t1 = os.times()
print("%f %f %d" % (time.time() - t, sum(t1[:4]) - sum(t0[:4]), n))
'''


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


def run_tokenize(a, path, out, threads, tokenizer_json=None):
    tok = ["--tokenizer", tokenizer_json] if tokenizer_json else ["--encoder", a.encoder, "--merges", a.merges]
    cmd = [a.tokenize, "shards"] + tok + ["--in", path, "--out-dir", out,
           "--name", "bench", "--threads", str(threads), "--val-tokens", "1000000"]
    dt, cpu, log, rss = timed(cmd)
    tokens = int([l for l in log.splitlines() if " tokens in " in l][-1].split(" documents, ")[1].split()[0])
    shutil.rmtree(out, ignore_errors=True)
    return dt, cpu, tokens, rss


def json_encoding(path):
    """tiktoken over a tokenizer.json's vocabulary (its ids as ranks: a trained BPE's ids are in merge order)
    and Llama 3's pattern; and the id of <|begin_of_text|>."""
    import tiktoken
    j = json.load(open(path, encoding="utf-8"))
    printable = [b for b in range(256) if chr(b).isprintable() and b != 0x20 and not (0x7f <= b <= 0xa0) and b != 0xad]
    to_byte, n = {}, 0
    for b in range(256):
        if b in printable:
            to_byte[chr(b)] = b
        else:
            to_byte[chr(256 + n)] = b
            n += 1
    ranks = {bytes(to_byte[c] for c in s): i for s, i in j["model"]["vocab"].items() if all(c in to_byte for c in s)}
    special = {t["content"]: t["id"] for t in j["added_tokens"]}
    return tiktoken.Encoding(name="bench_json", pat_str=LLAMA3_PAT, mergeable_ranks=ranks, special_tokens=special), \
        special["<|begin_of_text|>"]


def init_worker(encoder, merges, tokenizer_json=None):
    global ENC, DOC_ID
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
    if tokenizer_json:
        ENC, DOC_ID = json_encoding(tokenizer_json)
        return
    from test_tokenizer import make_encoding
    ENC = make_encoding(encoder, merges)


def tok_doc(line):
    # llm.c's fineweb.py: the end-of-text token (or <|begin_of_text|>), then encode_ordinary(text)
    ids = [DOC_ID] + ENC.encode_ordinary(json.loads(line)["text"])
    return np.array(ids, dtype=np.uint16 if DOC_ID == 50256 else np.uint32)


def run_tiktoken(a, path, procs, tokenizer_json=None):
    t, t0 = time.time(), os.times()
    n = 0
    with open(path, encoding="utf-8") as f:
        if procs == 1:
            init_worker(a.encoder, a.merges, tokenizer_json)
            for line in f:
                n += len(tok_doc(line))
        else:
            with mp.Pool(procs, initializer=init_worker, initargs=(a.encoder, a.merges, tokenizer_json)) as pool:
                for ids in pool.imap(tok_doc, f, chunksize=16):
                    n += len(ids)
    t1 = os.times()
    cpu = sum(t1[:4]) - sum(t0[:4])  # this process and its (joined) pool workers
    return time.time() - t, cpu, n


def bench_json(a, path, size, tmp, row):
    """The same corpus through a large tokenizer.json: ./tokenize, tokenizers' encode_batch, tiktoken."""
    tj = a.json_tokenizer or "/tmp/bench_data_tokenizer_%d.json" % a.json_vocab
    if not os.path.exists(tj):
        train = os.path.join(tmp, "train.jsonl")
        generate(train, 10, seed=2)
        t = time.time()
        p = subprocess.run([TORCH_PY, "-c", TRAIN_CODE, train, tj, str(a.json_vocab), LLAMA3_PAT], stdout=subprocess.PIPE)
        if p.returncode != 0:
            print("tokenizer.json part skipped: %s could not train one with `tokenizers`" % TORCH_PY)
            return
        print("trained %s (%s ids) with tokenizers in %.0f s" % (tj, p.stdout.decode().strip(), time.time() - t))
    print("tokenizer.json: %s" % tj)
    ref = None
    for th in [int(x) for x in a.threads.split(",")]:
        dt, cpu, n, rss = run_tokenize(a, path, os.path.join(tmp, "out"), th, tj)
        ref = ref or n
        print(row % ("./tokenize shards --tokenizer, %d thr" % th, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu,
                     "%.0f MiB" % rss))
    p = subprocess.run([TORCH_PY, "-c", ENCODE_CODE, tj, path], stdout=subprocess.PIPE)
    if p.returncode == 0:
        dt, cpu, n = p.stdout.decode().split()
        dt, cpu, n = float(dt), float(cpu), int(n)
        print(row % ("tokenizers encode_batch, all cores", dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu, ""))
        if n != ref:
            print("  MISMATCH: tokenizers made %d tokens, tokenize %d" % (n, ref))
    else:
        print("  (tokenizers encode_batch: %s failed)" % TORCH_PY)
    if not a.skip_tiktoken:
        for procs in [1] + [int(x) for x in a.threads.split(",") if int(x) > 1]:
            dt, cpu, n = run_tiktoken(a, path, procs, tj)
            what = "tiktoken (same vocab), one proc" if procs == 1 else "tiktoken (same vocab), Pool(%d)" % procs
            print(row % (what, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu, ""))
            if n != ref:
                print("  MISMATCH: tiktoken made %d tokens, tokenize %d" % (n, ref))


def main():
    ap = argparse.ArgumentParser(description="tokenize shards vs tiktoken")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rss-mb", type=int, default=0)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--skip-tiktoken", action="store_true")
    ap.add_argument("--skip-json", action="store_true", help="leave out the tokenizer.json part")
    ap.add_argument("--json-tokenizer", default=None, help="a tokenizer.json to time (default: a trained one, cached)")
    ap.add_argument("--json-vocab", type=int, default=110000)
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
        if not a.skip_json:
            bench_json(a, path, size, tmp, row)
        if a.rss_mb:
            os.remove(path)
            size = generate(path, a.rss_mb, seed=1)
            th = max(int(x) for x in a.threads.split(","))
            dt, cpu, n, rss = run_tokenize(a, path, os.path.join(tmp, "out"), th)
            print(row % ("./tokenize shards --threads %d" % th, dt, cpu, size / 1e6 / dt, n / 1e6 / dt, size / 1e6 / cpu,
                         "%.0f MiB" % rss) + "   (%.0f MB input, %d tokens)" % (size / 1e6, n))
            tj = a.json_tokenizer or "/tmp/bench_data_tokenizer_%d.json" % a.json_vocab
            if not a.skip_json and os.path.exists(tj):  # the same memory bound with the large tokenizer.json
                dt, cpu, n, rss = run_tokenize(a, path, os.path.join(tmp, "out"), th, tj)
                print(row % ("./tokenize shards --tokenizer, %d thr" % th, dt, cpu, size / 1e6 / dt, n / 1e6 / dt,
                             size / 1e6 / cpu, "%.0f MiB" % rss) + "   (%.0f MB input, %d tokens)" % (size / 1e6, n))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
