#!/usr/bin/env python3
"""
Tests `./tokenize shards` on corpora (issue 24) against tiktoken's GPT-2 encoding, built
offline from the same encoder.json / vocab.bpe as test/test_tokenizer.py does:
many inputs (files, a directory, a glob, stdin; .txt, .jsonl, .json.gz) in order, shards of
--shard-tokens under llm.c's names, byte-identical output whatever --threads, long documents
cut across work units, odd Unicode, --resume after a kill (reading only the rest of the inputs
when they are files, refusing a changed input or flag), the training loader on the
result, and every bad input (with the file and line named, and no shard under a final name).
Also scripts/fineweb.py (through scripts/parquet_text.py's framed format) on a local dataset in
the hub's layout, when pyarrow is installed.

usage: python3 test/test_shards.py --tokenize ./tokenize --encoder E.json --merges V.bpe [--text tinyshakespeare.txt]
"""
import argparse
import glob
import gzip
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tokenizer import Results, make_encoding, diff_detail, EOT  # noqa: E402

try:
    import tiktoken  # noqa: F401
except ImportError:
    tiktoken = None


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n = struct.unpack("<3i", data[:12])
    if magic != 20240520 or version != 1 or len(data) != 1024 + 2 * n:
        raise ValueError("%s: magic %d version %d count %d size %d" % (path, magic, version, n, len(data)))
    return list(struct.unpack("<%dH" % n, data[1024:]))


def stream_of(enc, docs):
    out = []
    for d in docs:
        out.append(EOT)
        out.extend(enc.encode_ordinary(d))
    return out


def odd_docs(rng):
    """Documents that stress the pre-tokeniser and the JSON decoder."""
    docs = [
        "Hello, world! It's a test; they'll see.",
        "naïve café — “quotes” ‘single’ … ½ ² Ⅻ",
        "日本語のテキストと中文字符，한국어 텍스트",
        "emoji 😀👍🏽👨‍👩‍👧 flags 🇫🇷🇯🇵 and ZWJ",
        "combining e\u0301 a\u0308 and RTL עברית العربية",
        "spaces   runs\t\ttabs\r\nCRLF\n\n\nblank lines  \u00a0nbsp\u2003em",
        "numbers 123456789 3.14159 1e10 ٣٤٥ ⅷ",
        "<|endoftext|> as plain text, and \\ backslashes \"quoted\"",
        "control \u0001\u001f chars and NUL \u0000 inside",
        "",
        " ",
        "x",
    ]
    words = ["the", "of", "data", "naïve", "über", "Straße", "東京", "😀", "x1", "---", "...", "  ", "\n"]
    for _ in range(40):
        docs.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 60))))
    return docs


def long_doc(rng, n_words):
    """A document far longer than a work unit, with cut points ('a b') and stretches without."""
    parts = []
    for i in range(n_words):
        w = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9)))
        parts.append(w)
        if i % 997 == 0:
            parts.append("  \n\t" + "😀" * 50 + "   ")
    return " ".join(parts)


def spaced_doc(rng, n_words):
    """A long document whose words are mostly apart by runs of white space mixing spaces and U+00A0: a cut at a
    space inside such a run splits one of the pre-tokeniser's pieces, and for GPT-2 that changes the ids (for
    runs of plain spaces it does not: they encode as repeated 220), so only the rare single spaces are safe."""
    seps = [" ", "  ", " \u00a0 \u00a0 ", "\u00a0 \u00a0 \u00a0", " \u00a0  \u00a0 ", "   \u00a0 \u00a0  "]
    out = []
    for _ in range(n_words):
        out.append("".join(rng.choice("klmnopqrs") for _ in range(rng.randint(1, 6))))
        out.append(seps[2] if rng.random() < 0.6 else rng.choice(seps[1:]) if rng.random() < 0.75 else " ")
    return "".join(out)


class Env:
    def __init__(self, args, tmp):
        self.exe, self.tmp = args.tokenize, tmp
        self.bpe = ["--encoder", args.encoder, "--merges", args.merges]

    def run(self, args, data=None, **kw):
        return subprocess.run([self.exe, "shards"] + self.bpe + args, input=data, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, **kw)

    def path(self, *p):
        return os.path.join(self.tmp, *p)


def shards_in(d, name):
    val = sorted(glob.glob(os.path.join(d, name + "_val_*.bin")))
    train = sorted(glob.glob(os.path.join(d, name + "_train_*.bin")))
    return val, train


def read_all(d, name):
    val, train = shards_in(d, name)
    return [read_shard(p) for p in val + train]


def dir_bytes(d):
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def write_jsonl(path, docs, extra=True):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "wt", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            row = {"id": i, "meta": {"url": "x", "l": [1, 2.5e3, None, True]}, "text": d} if extra else {"text": d}
            f.write(json.dumps(row, ensure_ascii=(i % 2 == 0)) + "\n")


def check_corpus(res, env, enc, rng):
    """Several inputs (directory, glob, plain file, gzip) in order, many shards, equal to tiktoken."""
    docs = odd_docs(rng)
    big = long_doc(rng, 60000)  # ~350 KB: several 64 KB work units
    corpus = env.path("corpus")
    os.makedirs(os.path.join(corpus, "dir"))
    write_jsonl(os.path.join(corpus, "dir", "b.jsonl"), docs[10:30])
    write_jsonl(os.path.join(corpus, "dir", "a.jsonl"), docs[:10])       # sorted: a before b
    write_jsonl(os.path.join(corpus, "dir", "c.json.gz"), docs[30:] + [big])
    with open(os.path.join(corpus, "dir", "notes.md"), "w") as f:        # not a corpus file: skipped
        f.write("ignore me")
    for i in range(3):
        write_jsonl(os.path.join(corpus, "part_%d.jsonl.gz" % i), docs[i::3], extra=False)
    txt_docs = ["plain text one", "two\nlines", big[:50000], "", "último"]
    with open(os.path.join(corpus, "t.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(txt_docs))
    all_docs = docs[:10] + docs[10:30] + docs[30:] + [big] + [d for i in range(3) for d in docs[i::3]] + txt_docs
    want = stream_of(enc, all_docs)

    outs = {}
    for th in (1, 2, 3):
        out = env.path("out_t%d" % th)
        p = env.run(["--in", os.path.join(corpus, "dir"), "--in", os.path.join(corpus, "part_*.jsonl.gz"),
                     "--in", os.path.join(corpus, "t.txt"), "--out-dir", out, "--name", "c",
                     "--shard-tokens", "7000", "--val-tokens", "3000", "--threads", str(th), "--batch-kb", "64"])
        if not res.check("corpus_run_threads_%d" % th, p.returncode == 0, p.stderr.decode(errors="replace")[-400:]):
            return
        outs[th] = out
    shards = read_all(outs[1], "c")
    got = [t for s in shards for t in s]
    res.check("corpus_equals_tiktoken", got == want, "" if got == want else diff_detail(got, want))
    sizes = [len(s) for s in shards]
    ok = sizes[0] == 3000 and all(n == 7000 for n in sizes[1:-1]) and 0 < sizes[-1] <= 7000
    res.check("corpus_shard_sizes", ok and len(sizes) > 5, "sizes %s" % sizes)
    val, train = shards_in(outs[1], "c")
    names = [os.path.basename(p) for p in val + train]
    want_names = ["c_val_000000.bin"] + ["c_train_%06d.bin" % i for i in range(1, len(names))]
    res.check("corpus_llmc_names", names == want_names and os.path.exists(os.path.join(outs[1], "tokenizer.bin"))
              and not glob.glob(os.path.join(outs[1], "*.tmp")), "files %s" % sorted(os.listdir(outs[1])))
    same = dir_bytes(outs[1]) == dir_bytes(outs[2]) == dir_bytes(outs[3])
    res.check("corpus_identical_whatever_threads", same, "1, 2 and 3 threads gave different files")
    return corpus, want


def check_txt_and_stdin(res, env, enc, rng, text):
    """Plain text: a custom separator, a document much longer than a work unit, standard input."""
    big = long_doc(rng, 120000)
    data = (text or "") + "@@" + big + "@@" + spaced_doc(rng, 100000) + "@@" + "tail\n"
    path = env.path("long.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(data)
    want = stream_of(enc, data.split("@@"))
    out = env.path("out_txt")
    p = env.run(["--in", path, "--out-dir", out, "--name", "t", "--doc-sep", "@@", "--batch-kb", "16",
                 "--shard-tokens", "50000", "--threads", "2"])
    got = [t for s in read_all(out, "t") for t in s] if p.returncode == 0 else []
    res.check("txt_long_document_cut_equals_tiktoken", got == want,
              p.stderr.decode(errors="replace")[-300:] if p.returncode else diff_detail(got, want))
    out2 = env.path("out_stdin")
    rows = "".join(json.dumps({"text": d}) + "\n" for d in ["from", "stdin \ud83d\ude00", "\ud800 lone surrogate"])
    p = env.run(["--in", "-", "--format", "jsonl", "--out-dir", out2, "--name", "s", "--val-tokens", "2"],
                data=rows.encode())
    want = stream_of(enc, ["from", "stdin 😀", "\ud800 lone surrogate"])  # tiktoken replaces the surrogate
    got = [t for s in read_all(out2, "s") for t in s] if p.returncode == 0 else []
    res.check("stdin_jsonl_escapes_and_lone_surrogate", got == want,
              p.stderr.decode(errors="replace") if p.returncode else diff_detail(got, want))


def check_json_fuzz(res, env, enc):
    """3000 random strings of quotes, backslashes, control characters, U+2028, emoji and lone surrogates, in
    objects with nested values around the text field, written by Python's json (ASCII-escaped or not)."""
    rng = random.Random(9)
    alphabet = ['"', "\\", "\n", "\x01", "\x1f", "é", "😀", "a", "b", " ", "/", "\t", "\u2028", "\ud800", "x" * 9]
    docs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    path = env.path("fuzz.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            ascii_only = rng.random() < 0.5 or "\ud800" in d  # a lone surrogate has no UTF-8 form
            f.write(json.dumps({"a": [1, {"b": "}"}], "text": d, "z": None}, ensure_ascii=ascii_only) + "\n")
    out = env.path("out_fuzz")
    p = env.run(["--in", path, "--out-dir", out, "--name", "f", "--val-tokens", "100", "--threads", "2"])
    want = stream_of(enc, docs)
    got = [t for s in read_all(out, "f") for t in s] if p.returncode == 0 else []
    res.check("jsonl_fuzz_escapes_equal_tiktoken", got == want,
              p.stderr.decode(errors="replace")[-300:] if p.returncode else diff_detail(got, want))


def check_resume(res, env, corpus):
    """A run on stdin killed mid-way, resumed, gives the bytes of an uninterrupted run; the input's bytes before the
    state's place are dropped unread by the tokenizer, and the last complete shard is made again and compared."""
    rng = random.Random(7)
    docs = [long_doc(rng, 300) for _ in range(400)]
    src = env.path("resume.jsonl")
    write_jsonl(src, docs)
    data = open(src, "rb").read()
    common = ["--in", "-", "--format", "jsonl", "--name", "r", "--shard-tokens", "20000", "--val-tokens", "20000",
              "--threads", "2", "--batch-kb", "32"]
    ref = env.path("resume_ref")
    p = env.run(common + ["--out-dir", ref], data=data)
    out = env.path("resume_out")
    proc = subprocess.Popen([env.exe, "shards"] + env.bpe + common + ["--out-dir", out], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    half = len(data) * 2 // 3
    proc.stdin.write(data[:half])
    proc.stdin.flush()
    deadline = time.time() + 30
    while time.time() < deadline and len(glob.glob(os.path.join(out, "r_train_*.bin"))) < 3:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    before = sorted(os.listdir(out))
    complete = all(len(read_shard(os.path.join(out, f))) == 20000 for f in before if f.endswith(".bin")
                   and f != "tokenizer.bin")
    res.check("kill_leaves_only_complete_shards", p.returncode == 0 and len(before) >= 3 and complete,
              "after the kill: %s" % before)
    for f in glob.glob(os.path.join(out, "*.tmp")):  # the killed run's temporary, never a final name
        os.remove(f)
    # a copy whose last complete shard does not match the input: refused, not silently kept
    bad = env.path("resume_bad")
    shutil.copytree(out, bad)
    try:
        k = int([ln for ln in open(os.path.join(out, "r_shards.state")) if ln.startswith("shards ")][0].split()[1])
    except (OSError, IndexError, ValueError):
        k = 1
    last = os.path.join(bad, "r_%s_%06d.bin" % ("val" if k == 1 else "train", k - 1))
    if os.path.exists(last):
        b = bytearray(open(last, "rb").read())
        b[2000] ^= 1
        open(last, "wb").write(bytes(b))
    p3 = env.run(common + ["--out-dir", bad, "--resume"], data=data)
    res.check("resume_refuses_a_changed_shard", p3.returncode == 1 and os.path.basename(last).encode() in p3.stderr,
              "exit %d: %s" % (p3.returncode, p3.stderr.decode(errors="replace")[-300:]))
    p2 = env.run(common + ["--out-dir", out, "--resume"], data=data)
    kept = p2.stdout.decode().count("kept ")
    # the last shard the state records is made again and compared; a kill between a shard's rename and the state's
    # write leaves complete shards past the state, which are compared and kept too
    shards_on_disk = len([f for f in before if f.startswith("r_") and f.endswith(".bin")])
    want_kept = 1 + shards_on_disk - k
    read, skipped = summary_mb(p2.stdout)
    # stdin cannot be seeked or checked: said so, the bytes before the state's place dropped, the last shard compared
    said = b"--resume with standard input" in p2.stderr
    res.check("resume_identical_bytes", p2.returncode == 0 and dir_bytes(out) == dir_bytes(ref) and kept == want_kept and said
              and skipped is not None and skipped > 0, "exit %d, kept %d (want %d), skipped %s MB, stderr %s" % (
                  p2.returncode, kept, want_kept, skipped, p2.stderr.decode(errors="replace")[-300:]))


def summary_mb(out):
    """The summary's 'X MB read, Y MB skipped (--resume)'."""
    for line in out.decode().splitlines():
        if " MB read, " in line:
            f = line.split()
            return float(f[2]), float(f[5])
    return None, None


def check_resume_files(res, env):
    """--resume over files continues after the complete shards: it reads only the rest of the inputs (the
    summary's bytes read), makes the bytes of an uninterrupted run, and refuses a changed input or flag."""
    rng = random.Random(11)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(1, 8))) for _ in range(3000)]
    vocab += ["naïve", "东京", "😀", "\n", "  "]

    def docs(n):  # lengths from a few words to documents longer than a work unit (cut, and cut at a shard end)
        return [" ".join(rng.choices(vocab, k=int(rng.paretovariate(1.2) * 40))) for _ in range(n)]
    d = env.path("rf")
    os.makedirs(d)
    inputs = [os.path.join(d, n) for n in ("a.txt", "b.jsonl", "c.jsonl.gz")]  # gzip last: its size is unknown
    with open(inputs[0], "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs(2000)))
    write_jsonl(inputs[1], docs(2000))
    write_jsonl(inputs[2], docs(800))
    total = (os.path.getsize(inputs[0]) + os.path.getsize(inputs[1]) + len(gzip.open(inputs[2]).read())) / 1e6
    common = sum([["--in", p] for p in inputs], []) + ["--name", "q", "--shard-tokens", "50000", "--batch-kb", "16"]
    ref = env.path("rf_ref")
    t = time.time()
    p = env.run(common + ["--out-dir", ref, "--threads", "2"])
    fresh_s = time.time() - t
    n_ref = len(shards_in(ref, "q")[1]) + 1
    # killed when the state records four fifths of the shards
    out = env.path("rf_out")
    state = os.path.join(out, "q_shards.state")
    proc = subprocess.Popen([env.exe, "shards"] + env.bpe + common + ["--out-dir", out, "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done, deadline = 0, time.time() + 120
    while proc.poll() is None and time.time() < deadline and done < n_ref * 4 // 5:
        time.sleep(0.01)
        try:
            done = int([ln for ln in open(state).read().splitlines() if ln.startswith("shards ")][0].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    proc.kill()
    proc.wait()
    t = time.time()
    p2 = env.run(common + ["--out-dir", out, "--resume", "--threads", "2"])
    resume_s = time.time() - t
    read, skipped = summary_mb(p2.stdout)
    wrote = p2.stdout.decode().count("wrote ")
    print("  resume after %d of %d shards: %.2f of %.2f MB read, %.2f MB skipped; %.2f s against %.2f s fresh"
          % (done, n_ref, read or -1, total, skipped or -1, resume_s, fresh_s))
    res.check("resume_files_reads_only_the_rest", p.returncode == 0 and p2.returncode == 0 and read is not None
              and wrote >= 2 and 0 < read <= 0.4 * total and abs(read + skipped - total) < 0.11 and b"resume: " in p2.stdout,
              "exit %d/%d, killed after %d of %d shards, read %s skipped %s of %.2f MB, stderr %s" % (
                  p.returncode, p2.returncode, done, n_ref, read, skipped, total, p2.stderr.decode(errors="replace")[-300:]))
    for f in glob.glob(os.path.join(out, "*.tmp")):
        os.remove(f)
    res.check("resume_files_identical_bytes", p2.returncode == 0 and dir_bytes(out) == dir_bytes(ref),
              "the resumed run's files differ from an uninterrupted run's")
    p3 = env.run(common + ["--out-dir", out, "--resume"])
    read, _ = summary_mb(p3.stdout)
    res.check("resume_files_complete_reads_nothing", p3.returncode == 0 and read == 0.0 and dir_bytes(out) == dir_bytes(ref),
              "exit %d, read %s MB" % (p3.returncode, read))
    with open(inputs[1], "a") as f:
        f.write(json.dumps({"text": "one more"}) + "\n")
    p4 = env.run(common + ["--out-dir", out, "--resume"])
    err = p4.stderr.decode(errors="replace")
    res.check("resume_refuses_a_changed_input", p4.returncode == 1 and "input 1 changed" in err and inputs[1] in err
              and dir_bytes(out) == dir_bytes(ref), "exit %d: %s" % (p4.returncode, err[-300:]))
    p5 = env.run(common[:-4] + ["--shard-tokens", "40000", "--batch-kb", "16", "--out-dir", out, "--resume"])
    err = p5.stderr.decode(errors="replace")
    res.check("resume_refuses_a_changed_flag", p5.returncode == 1 and "--shard-tokens changed" in err
              and "50000" in err and dir_bytes(out) == dir_bytes(ref), "exit %d: %s" % (p5.returncode, err[-300:]))


def check_loader(res, env, args, text):
    """The trainer's loader reads a multi-shard result: every shard, windows never crossing a boundary."""
    exe = os.path.join(os.path.dirname(args.tokenize) or ".", "train_gpt_cpu")
    if not os.path.exists(exe) or not text:
        res.skip("loader_multi_shard", "needs ./train_gpt_cpu and Tiny Shakespeare")
        return
    out = env.path("loader")
    p = env.run(["--in", args.text, "--out-dir", out, "--name", "ts", "--shard-tokens", "40000",
                 "--val-tokens", "20000"])
    val, train = shards_in(out, "ts")
    B, T = 4, 64
    windows = sum((len(read_shard(f)) - 1) // (B * T) for f in train)
    q = subprocess.run([exe, "-i", os.path.join(out, "ts_train_*.bin"), "-j", os.path.join(out, "ts_val_*.bin"),
                        "-e", "d2", "-b", str(B), "-t", str(T), "-x", "2", "-v", "2", "-s", "0", "-n", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    log = q.stdout.decode(errors="replace")
    want = "(%d shards, %d micro-batches per epoch)" % (len(train), windows)
    res.check("loader_multi_shard", p.returncode == 0 and q.returncode == 0 and len(train) >= 8 and want in log
              and "step     2 | val loss" in log, "expected %r in:\n%s" % (want, log[-600:]))


def expect_error(res, env, name, args, must, out, data=None, code=1):
    p = env.run(args + ["--out-dir", out], data=data)
    err = p.stderr.decode(errors="replace")
    finals = [f for f in (os.listdir(out) if os.path.isdir(out) else []) if f.endswith(".bin")]
    problems = []
    if p.returncode != code:
        problems.append("exit %d, expected %d" % (p.returncode, code))
    for m in must:
        if m not in err:
            problems.append("stderr does not mention %r" % m)
    if finals:
        problems.append("files under a final name: %s" % finals)
    if glob.glob(os.path.join(out, "*.tmp")):
        problems.append("a temporary was left")
    res.check(name, not problems, "; ".join(problems) + " (stderr: %r)" % err.strip()[-300:])


def check_errors(res, env):
    d = env.path("bad")
    os.makedirs(d)

    def f(name, content, mode="w"):
        p = os.path.join(d, name)
        with open(p, mode) as fh:
            fh.write(content)
        return p

    good = "".join(json.dumps({"text": "document %d " % i * 20}) + "\n" for i in range(300))
    bad_json = f("bad.jsonl", good + '{"text": "unterminated}\n' + good)
    expect_error(res, env, "error_bad_json_line", ["--in", bad_json, "--val-tokens", "100000"],
                 [bad_json + ":301:", "unterminated string"], env.path("e1"))
    three = "".join(good.splitlines(True)[:3])
    no_field = f("nofield.jsonl", three + "\n" + '{"id": 3, "body": "x"}\n')
    no_field_line = 5  # three documents, a blank line (skipped), then the object without "text"
    expect_error(res, env, "error_missing_text_field", ["--in", no_field],
                 ["%s:%d:" % (no_field, no_field_line), '"text" field'], env.path("e2"))
    bad_utf8 = f("bad.txt", b"fine line\nsecond \xff\xfe line\n", "wb")
    expect_error(res, env, "error_invalid_utf8_txt", ["--in", bad_utf8], [bad_utf8 + ":2:", "invalid UTF-8", "0xff"],
                 env.path("e3"))
    bad_utf8j = f("badu.jsonl", b'{"text": "ok"}\n{"text": "caf\xc3"}\n', "wb")
    expect_error(res, env, "error_invalid_utf8_jsonl", ["--in", bad_utf8j], [bad_utf8j + ":2:", "invalid UTF-8"],
                 env.path("e4"))
    empty = f("empty.txt", "")
    expect_error(res, env, "error_empty_input", ["--in", empty], [empty, "empty"], env.path("e5"))
    not_gz = f("fake.jsonl.gz", "this is not gzip\n")
    expect_error(res, env, "error_corrupt_gzip", ["--in", not_gz], [not_gz, "gzip"], env.path("e6"))
    expect_error(res, env, "error_glob_matches_nothing", ["--in", os.path.join(d, "*.nothing")], ["matches no file"],
                 env.path("e7"))
    expect_error(res, env, "error_bad_threads", ["--in", empty, "--threads", "0"], ["--threads"], env.path("e8"),
                 code=2)

    # a full disk: a 64 KB file-size limit (as a full tmpfs would) stops the run cleanly
    big = f("big.jsonl", good * 20)
    out = env.path("e9")
    p = subprocess.run([env.exe, "shards"] + env.bpe + ["--in", big, "--out-dir", out, "--name", "f",
                                                        "--shard-tokens", "1000000", "--val-tokens", "1000"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)))
    err = p.stderr.decode(errors="replace")
    files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    res.check("error_full_disk", p.returncode == 1 and "f_train_000001.bin.tmp: write failed" in err
              and files == ["f_shards.state", "f_val_000000.bin"], "exit %d, files %s, stderr %r" % (p.returncode, files, err[-300:]))


def check_fineweb_script(res, env, args, enc):
    """scripts/fineweb.py on a local dataset laid out as the hub serves FineWeb (sample/10BT/*.parquet)."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        res.skip("fineweb_script_local_parquet", "pyarrow is not installed (pip install pyarrow)")
        res.skip("fineweb_script_jobs_2_identical", "pyarrow is not installed (pip install pyarrow)")
        return
    root = env.path("hub", "fineweb")
    os.makedirs(os.path.join(root, "sample", "10BT"))
    rng = random.Random(3)
    files = []
    for i in range(3):
        docs = odd_docs(rng)[i * 10:(i + 1) * 10] + [long_doc(rng, 200) for _ in range(20)]
        docs[3] = None  # a null row: skipped
        table = pyarrow.table({"text": docs, "id": ["%d-%d" % (i, k) for k in range(len(docs))],
                               "token_count": list(range(len(docs)))})
        docs = [d for d in docs if d is not None]
        pq.write_table(table, os.path.join(root, "sample", "10BT", "%03d_00000.parquet" % i), row_group_size=7)
        files.append(docs)
    outs = {}
    for jobs in (1, 2):  # row groups decoded in this process, or by 2 worker processes
        outs[jobs] = out = env.path("fw_out_%d" % jobs)
        p = subprocess.run([sys.executable, "scripts/fineweb.py", "--local", root, "--subset", "sample/10BT",
                            "--out-dir", out, "--shard-tokens", "3000", "--val-tokens", "1000", "--jobs", str(jobs),
                            "--tokenize", args.tokenize, "--encoder", args.encoder, "--merges", args.merges],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            break
    want = stream_of(enc, [d for docs in files for d in docs])
    got = [t for s in read_all(outs[1], "fineweb") for t in s] if p.returncode == 0 else []
    res.check("fineweb_script_local_parquet", got == want and len(shards_in(outs[1], "fineweb")[1]) >= 3,
              p.stderr.decode(errors="replace")[-500:] if p.returncode else diff_detail(got, want))
    res.check("fineweb_script_jobs_2_identical", p.returncode == 0 and dir_bytes(outs[1]) == dir_bytes(outs[2]),
              "--jobs 2 wrote other files than --jobs 1")


def check_small_corpus_and_stale_shards(res, env, enc, text):
    """A corpus smaller than the validation shard: an error that names --val-tokens (not a train split of one token).
    A rerun with a smaller input into the folder of a larger one: its shards beyond the new last are removed and
    named, so a glob of the shards reads this run's tokens only."""
    small = env.path("small.txt")
    small_docs = ["document %d: the quick brown fox jumps over the lazy dog %d times." % (i, i * 7) for i in range(300)]
    with open(small, "w", encoding="utf-8") as f:
        f.write("\n\n".join(small_docs))
    n = len(stream_of(enc, small_docs))
    for name, extra, want in [("small_corpus_name_default_val_error_names_val_tokens", ["--name", "sm"],
                               "default with --name: one whole --shard-tokens shard"),
                              ("small_corpus_default_val_error_names_val_tokens", [], "(--val-tokens' default)"),
                              ("small_corpus_val_tokens_too_large_error", ["--val-tokens", str(n)], "(--val-tokens)")]:
        out = env.path("sm_" + name)
        p = env.run(["--in", small, "--out-dir", out] + extra)
        err = p.stderr.decode(errors="replace")
        left = [f for f in os.listdir(out) if f.endswith(".bin")] if os.path.isdir(out) else []
        res.check(name, p.returncode == 1 and ("the inputs make %d tokens" % n) in err and want in err
                  and "set --val-tokens to the validation split you want, e.g. --val-tokens %d" % (n // 10) in err and not left,
                  "rc %d, left %s: %r" % (p.returncode, left, err[-400:]))
    if text is None:
        res.skip("stale_shards_of_a_larger_run_removed", "no Tiny Shakespeare text (--text)")
        return
    big = env.path("big.txt")
    with open(big, "w", encoding="utf-8") as f:
        f.write(text)
    out = env.path("stale")
    p1 = env.run(["--in", big, "--out-dir", out, "--name", "st", "--shard-tokens", "40000", "--val-tokens", "20000"])
    before = len(shards_in(out, "st")[1])
    p2 = env.run(["--in", small, "--out-dir", out, "--name", "st", "--shard-tokens", "40000", "--val-tokens", "1000"])
    err = p2.stderr.decode(errors="replace")
    got = [t for s in read_all(out, "st") for t in s] if p2.returncode == 0 else []
    want = stream_of(enc, small_docs)
    res.check("stale_shards_of_a_larger_run_removed", p1.returncode == 0 and before > 2 and p2.returncode == 0
              and got == want and len(shards_in(out, "st")[1]) == 1
              and ("removed %d shards of an earlier run" % (before - 1)) in err and "st_train_000002.bin" in err,
              "%d train shards before; rc %d; %d tokens read back, %d made: %r" % (before, p2.returncode, len(got), len(want), err[-400:]))


def main():
    ap = argparse.ArgumentParser(description="./tokenize shards on corpora vs tiktoken")
    ap.add_argument("--tokenize", default="./tokenize")
    ap.add_argument("--encoder", default="../shared/data/gpt2_encoder.json")
    ap.add_argument("--merges", default="../shared/data/gpt2_vocab.bpe")
    ap.add_argument("--text", default="../shared/data/tinyshakespeare.txt")
    args = ap.parse_args()
    res = Results()
    if tiktoken is None:
        res.skip("test_shards", "tiktoken is not installed (pip install tiktoken)")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    enc = make_encoding(args.encoder, args.merges)
    text = open(args.text, encoding="utf-8").read() if os.path.exists(args.text) else None
    tmp = tempfile.mkdtemp(prefix="test_shards_")
    try:
        env = Env(args, tmp)
        rng = random.Random(1)
        got = check_corpus(res, env, enc, rng)
        check_txt_and_stdin(res, env, enc, rng, text)
        check_json_fuzz(res, env, enc)
        check_resume(res, env, got[0] if got else None)
        check_resume_files(res, env)
        check_loader(res, env, args, text)
        check_errors(res, env)
        check_fineweb_script(res, env, args, enc)
        check_small_corpus_and_stale_shards(res, env, enc, text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
