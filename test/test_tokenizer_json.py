#!/usr/bin/env python3
"""
Tests ./tokenize with Hugging Face tokenizer.json files (tokenizer_json.h) against the `tokenizers`
library as the independent reference. No published tokenizer can be downloaded here, so the test
trains small byte-level BPE tokenizers with `tokenizers` itself, one per pre-tokenizer family
(GPT-2's ByteLevel regex, Llama 3's and Qwen 2's Split patterns, SmolLM's Digits then ByteLevel), with special and added tokens,
plus one whose vocabulary is over 65,535 (inflated with added tokens, its document separator above
65,535) so that uint32 shards are made; and GPT-2's real files as a tokenizer.json.

usage:
  /usr/bin/python3 test/test_tokenizer_json.py --tokenize ./tokenize [--train-gpt ./train_gpt_cpu] \
      [--encoder gpt2_encoder.json --merges gpt2_vocab.bpe] [--text tinyshakespeare.txt]

Prints "PASS name" / "FAIL name: detail" / "SKIP name: reason" per check and ends with
"N passed, M failed, K skipped"; exits 1 if anything failed.
"""
import argparse
import copy
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tokenizer import Results, hard_strings, random_unicode, first_diff  # noqa: E402

try:
    from tokenizers import Tokenizer, AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:
    Tokenizer = None

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
              r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PAT = LLAMA3_PAT.replace(r"\p{N}{1,3}", r"\p{N}")
SHARD16 = (20240520, 1)
SHARD32 = (20240801, 7)
BIG_SHIFT = 128000  # a vocabulary of Llama 3's size (128,256): uint32 shards, and a 128k-row embedding to train


def training_texts(text_path):
    """What the small tokenizers learn from: the tricky strings, generated Unicode, digits and
    white space in every arrangement, and some Shakespeare, so that merges cross every kind of
    pre-token boundary a wrong pre-tokenizer would move."""
    rng = random.Random(1)
    texts = [t for _, t in hard_strings()] * 3
    texts += [random_unicode(s, 2000) for s in range(8)]
    ws = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "   \n", " \u00a0", "\u3000"]
    parts = ["e\u0301", "\u1100\u1161", "a\u0323\u0307", "\u212B", "12345", "2024", "3.14", "don't", "I'LL", "we're", "He'S", "x", "it'Sabc", "we'REd", "'LLama", "I'Mx", "'Dy",
             "Sabc", "REd", "LLama", "Mx", "Dy", "it'ſx", "ſx", "ſxſx", "foo", "Ünïcödé", "日本語", "😀😀", "!!", "...",
             "-->", "(a)", "€5", "١٢٣"]
    for _ in range(1000):
        texts.append("".join(rng.choice(parts) + rng.choice(ws) for _ in range(rng.randint(1, 12))))
    if text_path and os.path.isfile(text_path):
        with open(text_path, encoding="utf-8") as f:
            data = f.read(100000)
        texts += [data[i:i + 1000] for i in range(0, len(data), 1000)]
    return texts


def train(kind, texts, vocab_size, specials, ignore_merges=False, nfc=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif kind.startswith("digits"):  # SmolLM's (individual digits), StarCoder's style
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=kind == "digits1"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        pat = LLAMA3_PAT if kind == "llama3" else QWEN2_PAT
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pat), behavior="isolated", invert=False),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, tr)
    return tok


def probe_texts():
    """The texts compared token for token: the GPT-2 test's tricky strings, generated Unicode, and
    what separates the Llama 3 / Qwen 2 patterns from GPT-2's."""
    out = list(hard_strings())
    out += [("random_unicode_%d" % s, random_unicode(100 + s, 1500)) for s in range(4)]
    out += [
        ("contractions_any_case", "it's IT'S It'S we'RE They'Ve I'M you'LL he'D it'ſ 'S 's's it'Sabc we'REd 'LLama I'Mx 'Dy 'Tz 'rEd it'ſx ſxſx"),
        ("digit_runs", "1 12 123 1234 12345 1234567 x1234y ١٢٣٤٥ 12,345.678 ²³"),
        ("newline_runs", "a\n\nb\r\n\r\nc \n \n d\t\n\te  \r\n  f\n"),
        ("space_before_punct_newline", "x ...\n\ny !!\r\n z?\n"),
        ("letter_after_symbol", "$abc #tag @user \u00a0word \u3000語 _x"),
        ("long_whitespace", "a" + " " * 70 + "b" + "\n" * 40 + "c" + "\t \n" * 20),
        ("special_in_text", "hello<|endoftext|>world <|begin_of_text|> <tool_call>x</tool_call><|endoftext|"),
        ("emoji_zwj", "👩‍👩‍👧‍👦 🏳️‍🌈 😀😀😀 a😀b"),
        ("nfc_cases", "cafe\u0301 A\u030A \u212B \u1100\u1161\u11A8 \uAC00\u11A8 a\u0307\u0323 a\u0323\u0307 q\u0307\u0323x "
                      "\u0958 \u0344 e\u0302\u0301 \u1E9B\u0323 \u0627\u064E\u0651 \u03B1\u0301 \u2126 <tool_call>e\u0301"),
    ]
    return out


class Tool:
    def __init__(self, exe):
        self.exe = exe

    def run(self, args, data=b""):
        return subprocess.run([self.exe] + args, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def encode(self, tok_args, text):
        p = self.run(["encode"] + tok_args, text.encode("utf-8") if isinstance(text, str) else text)
        if p.returncode != 0:
            raise RuntimeError("encode exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        return [int(x) for x in p.stdout.split()]

    def decode(self, tok_args, ids):
        p = self.run(["decode"] + tok_args, "".join("%d\n" % i for i in ids).encode())
        if p.returncode != 0:
            raise RuntimeError("decode exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        return p.stdout


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack("<256i", data[:1024])
    width = 4 if (h[0], h[1]) == SHARD32 else 2
    toks = list(struct.unpack("<%d%s" % (h[2], "I" if width == 4 else "H"), data[1024:1024 + width * h[2]]))
    return (h[0], h[1]), toks


def shard_stream(d):
    names = sorted(n for n in os.listdir(d) if n.endswith(".bin") and n != "tokenizer.bin")
    names = [n for n in names if n.startswith("val") or "_val_" in n] + [n for n in names if n.startswith("train") or "_train_" in n]
    kinds, toks = set(), []
    for n in names:
        k, t = read_shard(os.path.join(d, n))
        kinds.add(k)
        toks += t
    return kinds, toks


def check_encode(res, tool, name, path, hf, texts):
    bad = []
    for tname, text in texts:
        want = hf.encode(text, add_special_tokens=False).ids
        try:
            got = tool.encode(["--tokenizer", path], text)
        except RuntimeError as e:
            bad.append("%s: %s" % (tname, e))
            continue
        if got != want:
            k = first_diff(got, want)
            bad.append("%s: first difference at id %d: got %s, tokenizers %s (%s)" % (
                tname, k, got[k:k + 4], want[k:k + 4], [hf.id_to_token(i) for i in want[k:k + 4]]))
    res.check("encode_%s" % name, not bad, "; ".join(bad[:3]) + (" (%d texts differ)" % len(bad) if bad else ""))


def check_decode(res, tool, name, path, hf, texts, nfc=False):
    bad = []
    for tname, text in texts:
        ids = hf.encode(text, add_special_tokens=False).ids
        got = tool.decode(["--tokenizer", path], ids)
        text = unicodedata.normalize("NFC", text) if nfc else text  # what the tokens hold
        if got != text.encode("utf-8") or hf.decode(ids, skip_special_tokens=False) != text:
            bad.append(tname)
    res.check("decode_roundtrip_%s" % name, not bad, "differs for %s" % bad[:5])


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def check_errors(res, tool, tmp, good_path):
    with open(good_path, encoding="utf-8") as f:
        good = json.load(f)
    raw = open(good_path, "rb").read()

    def expect(name, obj_or_bytes, must, cmd="encode", code=1, extra=()):
        p = os.path.join(tmp, "bad_%s.json" % name)
        if isinstance(obj_or_bytes, bytes):
            open(p, "wb").write(obj_or_bytes)
        else:
            write_json(p, obj_or_bytes)
        args = [cmd, "--tokenizer", p] + list(extra)
        if cmd == "shards":
            args += ["--in", os.path.join(tmp, "docs.txt"), "--out-dir", os.path.join(tmp, "err_out")]
        r = tool.run(args, b"hello world\n" if cmd != "decode" else b"1\n")
        err = r.stderr.decode(errors="replace")
        ok = r.returncode == code and all(m in err for m in must) and (cmd != "shards" or not os.path.exists(os.path.join(tmp, "err_out")))
        res.check("error_%s" % name, ok, "exit %d, stderr %r (wanted exit %d naming %s)" % (r.returncode, err.strip()[:300], code, must))

    expect("truncated", raw[:len(raw) // 2], ["bad_truncated.json", "truncated"])
    expect("not_json", b"{\"model\": [1, 2,, 3]}", ["bad_not_json.json", "byte 16"])
    j = copy.deepcopy(good); j["model"]["type"] = "WordPiece"
    expect("wordpiece", j, ["bad_wordpiece.json", "model.type", "WordPiece"])
    j = copy.deepcopy(good); j["model"]["type"] = "Unigram"
    expect("unigram", j, ["bad_unigram.json", "model.type", "Unigram"])
    j = copy.deepcopy(good); j["model"]["byte_fallback"] = True
    expect("byte_fallback", j, ["bad_byte_fallback.json", "model.byte_fallback"])
    j = copy.deepcopy(good); j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\p{L}+|\s+|[^\s\p{L}]+"
    expect("unknown_pattern", j, ["bad_unknown_pattern.json", "pre_tokenizer.pretokenizers[0].pattern.Regex", "not one this tokenizer implements"])
    j = copy.deepcopy(good); j["normalizer"] = {"type": "NFKC"}
    expect("normalizer", j, ["bad_normalizer.json", "normalizer", "NFKC"])
    j = copy.deepcopy(good); j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
    expect("add_prefix_space", j, ["bad_add_prefix_space.json", "pre_tokenizer.pretokenizers[1].add_prefix_space"])
    j = copy.deepcopy(good); j["model"]["merges"][3] = ["Ġzzqqxx", j["model"]["merges"][3][1]]
    expect("merge_unknown_token", j, ["bad_merge_unknown_token.json", "model.merges[3]", "Ġzzqqxx", "not in model.vocab"])
    j = copy.deepcopy(good); j["model"]["merges"][5] = "a b c"
    expect("merge_malformed", j, ["bad_merge_malformed.json", "model.merges[5]"])
    j = copy.deepcopy(good); j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    expect("metaspace", j, ["bad_metaspace.json", "pre_tokenizer.type", "'Metaspace' is not supported", "[Split, ByteLevel]",
                            "[Digits, ByteLevel]", "[ByteLevel]"])
    j = copy.deepcopy(good); j["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    expect("decoder", j, ["bad_decoder.json", "decoder", "WordPiece"])
    j = copy.deepcopy(good); del j["model"]["vocab"]["Ġ"]
    expect("vocab_gap", j, ["bad_vocab_gap.json", "model.vocab", "no token has the id %d" % good["model"]["vocab"]["Ġ"]])
    expect("doc_token_unknown", good, ["--doc-token", "<|nope|>", "is not a token"], cmd="shards", code=2, extra=["--doc-token", "<|nope|>"])
    r = tool.run(["encode", "--tokenizer", os.path.join(tmp, "nope.json")], b"x")
    res.check("error_missing_tokenizer_file", r.returncode == 1 and b"--tokenizer " + os.path.join(tmp, "nope.json").encode() + b": cannot open"
              in r.stderr, r.stderr.decode(errors="replace"))
    binf = os.path.join(tmp, "llmc_tokenizer.bin")
    with open(binf, "wb") as f:
        f.write(struct.pack("<256i", 20240328, 2, 1, 0, *([0] * 252)) + b"\x01a")
    r = tool.run(["shards", "--tokenizer", binf, "--in", os.path.join(tmp, "docs.txt"), "--out-dir", os.path.join(tmp, "err_out")])
    res.check("error_encode_with_tokenizer_bin", r.returncode == 2 and b"is not a tokenizer.json" in r.stderr
              and not os.path.exists(os.path.join(tmp, "err_out")), r.stderr.decode(errors="replace"))
    r = tool.run(["encode", "--tokenizer", good_path], b"ok \xff\xfe bad")
    res.check("error_invalid_utf8_refused", r.returncode == 1 and b"invalid UTF-8 at byte 3" in r.stderr, r.stderr.decode(errors="replace"))


def byte_to_unicode():
    """GPT-2's byte alphabet (what ByteLevel maps each byte to), as OpenAI's bytes_to_unicode builds it."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    return {b: chr(c) for b, c in zip(bs, cs)}


# SmolLM's tokenizer.json lacks 21 byte tokens: 0xC0, 0xC1 and 0xF5-0xFF (never in UTF-8) and control bytes its
# training data did not hold; here 8 control bytes stand for those
MISSING_BYTES = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0E, 0x0F, 0xC0, 0xC1] + list(range(0xF5, 0x100))


def without_bytes(j, drop):
    """A trained tokenizer.json made to look like a published one that lacks the byte tokens `drop`: every
    vocabulary string holding one of them and every merge making or using one is removed, and the ids closed up
    (added tokens' too)."""
    gone = set(byte_to_unicode()[b] for b in drop)
    vocab = j["model"]["vocab"]
    keep = sorted((i, k) for k, i in vocab.items() if not gone.intersection(k))
    ids = sorted(set([i for i, _ in keep] + [t["id"] for t in j["added_tokens"] if t["content"] not in vocab or
                                             not gone.intersection(t["content"])]))
    new_id = {old: n for n, old in enumerate(ids)}
    j["model"]["vocab"] = {k: new_id[i] for i, k in keep}
    j["model"]["merges"] = [m for m in j["model"]["merges"] if not gone.intersection("".join(m))]
    for t in j["added_tokens"]:
        t["id"] = new_id[t["id"]]
    return j


def check_missing_bytes(res, tool, tmp, texts, text_path):
    """A byte-level BPE with a Digits pre-tokenizer (SmolLM's form) lacking 21 byte tokens: a byte with no token is
    dropped (its neighbours may then merge across it), or is unk_token when one is set, as `tokenizers` does; the
    ids are the library's token for token on Tiny Shakespeare with such bytes, digits, accents and emoji in it."""
    ctl = [chr(b) for b in MISSING_BYTES if b < 0x80]
    rng = random.Random(7)
    train_texts = texts + ["".join(rng.choice(ctl + [".", "!", "a", "b", " ", "1"]) for _ in range(30)) for _ in range(300)]
    src = os.path.join(tmp, "missing_trained.json")
    train("digits1", train_texts, 1200, ["<|endoftext|>", "<|im_start|>"]).save(src)
    with open(src, encoding="utf-8") as f:
        j = without_bytes(json.load(f), MISSING_BYTES)
    path = os.path.join(tmp, "missing_bytes.json")
    write_json(path, j)
    hf = Tokenizer.from_file(path)
    words = ["the", "Thou", "art", "é", "café", "😀", "👩‍👩‍👧", "12345", "3.14", "2024", "...", "!!", "a.b", "x"]
    gen = "".join(rng.choice(words) + rng.choice(["", " ", "\n", ".", "!"] + ctl) + rng.choice(ctl + ["", " "]) for _ in range(20000))
    corpus = (open(text_path, encoding="utf-8").read() if text_path and os.path.isfile(text_path) else "") + gen
    r = tool.run(["encode", "--tokenizer", path], corpus.encode())
    got = [int(x) for x in r.stdout.split()] if r.returncode == 0 else []
    want = hf.encode(corpus, add_special_tokens=False).ids
    err = r.stderr.decode(errors="replace")
    missing = sum(1 for b in range(256) if hf.token_to_id(byte_to_unicode()[b]) is None)
    res.check("missing_byte_tokens_digits_as_tokenizers", r.returncode == 0 and got == want and missing == 21,
              "exit %d %s, %d bytes without a token, %d vs %d ids, first difference at %d" % (
                  r.returncode, err.strip()[-200:], missing, len(got), len(want), first_diff(got, want)))
    res.check("missing_byte_tokens_said_once", err.count("have no token") == 1 and "21 of the 256 bytes have no token" in err
              and "0x01" in err and "0xFF" in err and "dropped" in err, err[-300:])
    r = tool.run(["encode", "--tokenizer", path], b"ok \xff bad")
    res.check("missing_byte_tokens_invalid_utf8_refused", r.returncode == 1 and b"invalid UTF-8 at byte 3" in r.stderr, r.stderr.decode(errors="replace"))
    # with an unk_token: each such byte is that token, or one for a run of them with fuse_unk
    j["model"]["vocab"]["<unk>"] = 1 + max(list(j["model"]["vocab"].values()) + [t["id"] for t in j["added_tokens"]])
    j["model"]["unk_token"] = "<unk>"
    short = gen[:20000]
    for fuse in (False, True):
        j["model"]["fuse_unk"] = fuse
        p = os.path.join(tmp, "missing_bytes_unk%d.json" % fuse)
        write_json(p, j)
        hf = Tokenizer.from_file(p)
        want = hf.encode(short, add_special_tokens=False).ids
        r = tool.run(["encode", "--tokenizer", p], short.encode())
        got = [int(x) for x in r.stdout.split()] if r.returncode == 0 else []
        unk = hf.token_to_id("<unk>")
        res.check("missing_byte_tokens_unk_fuse_%s" % str(fuse).lower(), r.returncode == 0 and got == want and want.count(unk) > 100,
                  "exit %d %s, %d unk, first difference at %d" % (r.returncode, r.stderr.decode(errors="replace")[-200:],
                                                                  want.count(unk), first_diff(got, want)))


def check_ignore_merges(res, tool, tmp):
    """ignore_merges changes ids only where a pre-token is a vocabulary token that its merges do not make: by hand,
    a vocabulary holding abc (and Ġabc) with the merges a b and b c only. With the flag, the word abc is that
    token; without, BPE gives ab + c. Both ways the library's ids, and the two ways differ."""
    b2u = byte_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for k in ["ab", "bc", "abc", "Ġabc"]:
        vocab[k] = len(vocab)
    text = "abc abc,abc\nabcabc xabc ab bc abcd 'abc'"
    ids = {}
    for flag in (False, True):
        j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
             "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
             "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                       "fuse_unk": False, "byte_fallback": False, "ignore_merges": flag, "vocab": vocab, "merges": [["a", "b"], ["b", "c"]]}}
        p = os.path.join(tmp, "ignore_merges_%s.json" % str(flag).lower())
        write_json(p, j)
        want = Tokenizer.from_file(p).encode(text, add_special_tokens=False).ids
        got = tool.encode(["--tokenizer", p], text)
        ids[flag] = want
        res.check("ignore_merges_%s_hand_built" % str(flag).lower(), got == want, "got %s, tokenizers %s" % (got, want))
    res.check("ignore_merges_changes_ids", vocab["abc"] in ids[True] and vocab["abc"] not in ids[False] and vocab["Ġabc"] in ids[True],
              "with %s, without %s" % (ids[True], ids[False]))


def check_shards(res, tool, tmp, name, path, hf, docs, want_kind, want_sep, extra=(), threads=(1, 3)):
    """tokenize shards: the stream is the separator then tokenizers' ids, per document; the shard kind follows
    the vocabulary; the output is the same for any --threads; the state names the separator."""
    inp = os.path.join(tmp, "%s_docs.jsonl" % name)
    with open(inp, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    sep_id = hf.token_to_id(want_sep)
    want = []
    for d in docs:
        want += [sep_id] + hf.encode(d, add_special_tokens=False).ids
    outs = []
    for th in threads:
        out = os.path.join(tmp, "%s_out_%d" % (name, th))
        r = tool.run(["shards", "--tokenizer", path, "--in", inp, "--out-dir", out, "--val-tokens", "500",
                      "--shard-tokens", "1500", "--threads", str(th), "--batch-kb", "4"] + list(extra))
        if r.returncode != 0:
            res.check("shards_%s" % name, False, r.stderr.decode(errors="replace"))
            return None
        outs.append(out)
    kinds, got = shard_stream(outs[0])
    res.check("shards_%s_stream" % name, got == want and kinds == {want_kind},
              "kinds %s (want %s), %d tokens vs %d, first difference at %d" % (kinds, want_kind, len(got), len(want), first_diff(got, want)))
    same = all(shard_stream(o) == (kinds, got) for o in outs[1:])
    state = open(os.path.join(outs[0], "shards.state")).read()
    copied = open(os.path.join(outs[0], "tokenizer.json"), "rb").read() == open(path, "rb").read()
    res.check("shards_%s_threads_state_copy" % name, same and ("--doc-token %s (id %d" % (want_sep, sep_id)) in state and copied,
              "threads same: %s, state: %r, tokenizer.json copied: %s" % (same, state[:400], copied))
    return outs[0]


def check_scripts(res, tool, tmp, paths, toks):
    """scripts/mc_tokenize.py --tokenizer (the tokenizers library) and scripts/fineweb.py --tokenizer (./tokenize)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hf = toks["qwen2"]
    mc_in, mc_out = os.path.join(tmp, "mc.jsonl"), os.path.join(tmp, "mc_tok.jsonl")
    exs = [{"context": "The 12345 cats'LL", "endings": [" sleep.", " run\r\n"], "label": 1},
           {"ctx": "Ünïcödé 😀", "endings": ["yes", "no"], "label": "0"}]
    with open(mc_in, "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in exs)
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "mc_tokenize.py"), mc_in, mc_out, "--tokenizer", paths["qwen2"]],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = [json.loads(l) for l in open(mc_out)] if p.returncode == 0 else []
    want = [[tool.encode(["--tokenizer", paths["qwen2"]], "The 12345 cats'LL"), [tool.encode(["--tokenizer", paths["qwen2"]], x) for x in exs[0]["endings"]]],
            [hf.encode("Ünïcödé 😀", add_special_tokens=False).ids, [hf.encode(" yes").ids, hf.encode(" no").ids]]]
    res.check("mc_tokenize_script_tokenizer_json", [[g["context_tokens"], g["ending_tokens"]] for g in got] == want,
              (p.stdout + p.stderr).decode(errors="replace")[-300:] + " got %s want %s" % (got, want))
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        res.skip("fineweb_script_tokenizer_json", "pyarrow is not installed (pip install pyarrow)")
        return
    hub = os.path.join(tmp, "hub")
    os.makedirs(os.path.join(hub, "sample", "10BT"))
    docs = [t for _, t in probe_texts() if t and "<|" not in t and "<tool_call>" not in t]
    pq.write_table(pyarrow.table({"text": docs}), os.path.join(hub, "sample", "10BT", "000_00000.parquet"), row_group_size=5)
    out = os.path.join(tmp, "fw")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "fineweb.py"), "--local", hub, "--subset", "sample/10BT",
                        "--out-dir", out, "--shard-tokens", "1000", "--val-tokens", "300", "--jobs", "1",
                        "--tokenize", tool.exe, "--tokenizer", paths["big"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    want = []
    for d in docs:
        want += [toks["big"].token_to_id("<|begin_of_text|>")] + toks["big"].encode(d, add_special_tokens=False).ids
    kinds, got = shard_stream(out) if p.returncode == 0 else (set(), [])
    res.check("fineweb_script_tokenizer_json", got == want and kinds == {SHARD32},
              p.stderr.decode(errors="replace")[-300:] + " kinds %s, first difference at %d" % (kinds, first_diff(got, want)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenize", required=True)
    ap.add_argument("--train-gpt", default=None)
    ap.add_argument("--train-gpt-emu", default=None, help="the emulated CUDA build, for the end-to-end run in both builds")
    ap.add_argument("--encoder")
    ap.add_argument("--merges")
    ap.add_argument("--text")
    a = ap.parse_args()
    res = Results()
    if Tokenizer is None:
        res.skip("tokenizer_json", "the Python running this has no `tokenizers` (pip install tokenizers; run_tests.sh uses TORCH_PYTHON)")
        print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
        return 0
    tool = Tool(a.tokenize)
    tmp = tempfile.mkdtemp(prefix="test_tokenizer_json_")
    try:
        return run_checks(a, res, tool, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_checks(a, res, tool, tmp):
    texts = training_texts(a.text)
    probes = probe_texts()
    toks = {}
    toks["gpt2"] = train("gpt2", texts, 1200, ["<|endoftext|>"])
    toks["llama3"] = train("llama3", texts, 1200, ["<|begin_of_text|>", "<|end_of_text|>"], ignore_merges=True)
    toks["qwen2"] = train("qwen2", texts, 1200, ["<|endoftext|>", "<|im_start|>"], nfc=True)  # Qwen 2's normalizer too
    toks["smollm"] = train("digits1", texts, 1200, ["<|endoftext|>", "<|im_start|>"])
    toks["digits_runs"] = train("digitsN", texts, 1200, ["<|endoftext|>"])
    toks["qwen2"].add_tokens([AddedToken("<tool_call>", special=False, normalized=True), AddedToken("</tool_call>", special=False, normalized=False)])
    paths = {}
    for k, t in toks.items():
        paths[k] = os.path.join(tmp, "%s.json" % k)
        t.save(paths[k])
    # over 65,535 ids: a small Llama 3 style BPE whose every id is moved up by 70,000, below it 70,000 filler
    # vocabulary strings that text never makes (they start with the bytes 0xFF 0xFE, never in UTF-8), so that
    # every id BPE and the separator give is above 65,535 (adding 70,000 added tokens instead takes the
    # library minutes)
    small = train("llama3", texts, 600, ["<|begin_of_text|>", "<|reserved_special_token_0|>"], ignore_merges=True)
    small.save(os.path.join(tmp, "small.json"))
    with open(os.path.join(tmp, "small.json"), encoding="utf-8") as f:
        j = json.load(f)

    def filler(i):
        s = "ÿþ"
        while True:
            s += chr(ord("a") + i % 26)
            i //= 26
            if i == 0:
                return s
    vocab = {filler(i): i for i in range(BIG_SHIFT)}
    vocab.update({k: i + BIG_SHIFT for k, i in j["model"]["vocab"].items()})
    j["model"]["vocab"] = vocab
    for t in j["added_tokens"]:
        t["id"] += BIG_SHIFT
    paths["big"] = os.path.join(tmp, "big.json")
    write_json(paths["big"], j)
    toks["big"] = big = Tokenizer.from_file(paths["big"])
    ids = big.encode("Hello, world 12345 \u00e9\U0001F600", add_special_tokens=False).ids
    res.check("big_vocab_over_65535", big.get_vocab_size() > 65536 and big.token_to_id("<|begin_of_text|>") > 65535
              and min(ids) >= BIG_SHIFT, "vocab %d, ids %s" % (big.get_vocab_size(), ids[:10]))
    # the merges in the older "a b" string form give the same ids
    with open(paths["llama3"], encoding="utf-8") as f:
        j = json.load(f)
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    paths["llama3_string_merges"] = os.path.join(tmp, "llama3_string_merges.json")
    write_json(paths["llama3_string_merges"], j)
    toks["llama3_string_merges"] = Tokenizer.from_file(paths["llama3_string_merges"])

    for k in ["gpt2", "llama3", "qwen2", "smollm", "digits_runs", "llama3_string_merges", "big"]:
        check_encode(res, tool, k, paths[k], toks[k], probes if k != "big" else probes[:12])
    for k in ["gpt2", "llama3", "qwen2", "smollm"]:
        check_decode(res, tool, k, paths[k], toks[k], probes, nfc=k == "qwen2")
    # NFC on generated text full of combining marks (of every order), Hangul jamo, singletons and exclusions: the
    # ids equal the library's, and they decode to what Python's unicodedata makes of the text
    r = random.Random(3)
    pool = [chr(c) for c in list(range(0x300, 0x370)) + [0x5B0, 0x64B, 0x651, 0x93C, 0x94D, 0x9BE, 0x9C7, 0xB3E, 0xBBE, 0xCC2,
                                                          0x3099, 0x309A, 0x1D165, 0x1D16E, 0x1100, 0x1112, 0x1161, 0x1175, 0x11A8,
                                                          0x11C2, 0x212B, 0x2126, 0x958, 0x344, 0x340, 0xAC00, 0xAC01, 0x1E9B, 0xF73,
                                                          0x304B, 0x30AB, 0xB47, 0xDD9, 0xC5, 0x1EA0]] + list("aeoAEOnNcCsS ")
    text = "\n".join("".join(r.choice(pool) for _ in range(r.randint(1, 60))) for _ in range(150))
    got = tool.encode(["--tokenizer", paths["qwen2"]], text)
    want = toks["qwen2"].encode(text, add_special_tokens=False).ids
    dec = tool.decode(["--tokenizer", paths["qwen2"]], got)
    res.check("nfc_generated_marks_and_jamo", got == want and dec == unicodedata.normalize("NFC", text).encode(),
              "ids differ at %d; decoded text %s Python's NFC" % (first_diff(got, want), "is" if dec == unicodedata.normalize("NFC", text).encode() else "is not"))
    # 'ſ (U+017F LONG S): the library's case-insensitive (?i:'s) folds it onto 's', and so does tokenize
    t = toks["llama3"]
    pieces = [p for p, _ in t.pre_tokenizer.pre_tokenize_str("it'ſx")]
    res.check("contraction_long_s_folded", pieces == ["it", "'Å¿", "x"],
              "tokenizers now pre-tokenizes it'ſx as %s: tokenizer.h's tok_contraction_ci must follow" % pieces)

    # GPT-2's real files as a tokenizer.json: the same ids as through encoder.json + vocab.bpe (tiktoken's, as
    # test_tokenizer.py checks) and as tokenizers
    if a.encoder and a.merges and os.path.isfile(a.encoder):
        g = Tokenizer(models.BPE.from_file(a.encoder, a.merges))
        g.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        g.decoder = decoders.ByteLevel()
        g.add_special_tokens(["<|endoftext|>"])
        gp = os.path.join(tmp, "gpt2_real.json")
        g.save(gp)
        sample = open(a.text, encoding="utf-8").read(200000) if a.text and os.path.isfile(a.text) else "".join(t for _, t in probes)
        sample = sample.replace("<|endoftext|>", "")
        got = tool.encode(["--tokenizer", gp], sample)
        files = tool.encode(["--encoder", a.encoder, "--merges", a.merges], sample)
        want = g.encode(sample, add_special_tokens=False).ids
        res.check("gpt2_real_files_as_tokenizer_json", got == want == files and g.get_vocab_size() == 50257,
                  "json vs tokenizers differ at %d, json vs encoder.json at %d" % (first_diff(got, want), first_diff(got, files)))
        check_encode(res, tool, "gpt2_real_probes", gp, g, probes)
    else:
        res.skip("gpt2_real_files_as_tokenizer_json", "no --encoder/--merges (GPT-2's files)")
        res.skip("encode_gpt2_real_probes", "no --encoder/--merges (GPT-2's files)")

    # shards
    rng = random.Random(5)
    docs = [t for _, t in probes] + [" ".join(rng.choice(["alpha", "beta", "12345", "don't", "é"]) for _ in range(rng.randint(1, 400)))
                                     for _ in range(60)]
    docs = [d for d in docs if "<|" not in d and "<tool_call>" not in d]
    check_shards(res, tool, tmp, "gpt2", paths["gpt2"], toks["gpt2"], docs, SHARD16, "<|endoftext|>")
    check_shards(res, tool, tmp, "llama3", paths["llama3"], toks["llama3"], docs, SHARD16, "<|begin_of_text|>")
    check_shards(res, tool, tmp, "llama3_doc_token", paths["llama3"], toks["llama3"], docs, SHARD16, "<|end_of_text|>",
                 extra=["--doc-token", "<|end_of_text|>"], threads=(2,))
    big_out = check_shards(res, tool, tmp, "big", paths["big"], toks["big"], docs[:30], SHARD32, "<|begin_of_text|>")
    if big_out:
        # --resume keeps the complete uint32 shards; a changed --doc-token is refused by name
        r = tool.run(["shards", "--tokenizer", paths["big"], "--in", os.path.join(tmp, "big_docs.jsonl"), "--out-dir", big_out,
                      "--val-tokens", "500", "--shard-tokens", "1500", "--batch-kb", "4", "--resume"])
        out = r.stdout.decode()
        res.check("shards_big_resume", r.returncode == 0 and "resume: all" in out, out + r.stderr.decode())
        r = tool.run(["shards", "--tokenizer", paths["big"], "--in", os.path.join(tmp, "big_docs.jsonl"), "--out-dir", big_out,
                      "--val-tokens", "500", "--shard-tokens", "1500", "--batch-kb", "4", "--resume", "--doc-token",
                      "<|reserved_special_token_0|>"])
        res.check("shards_big_resume_doc_token_changed", r.returncode == 1 and b"--doc-token changed" in r.stderr, r.stderr.decode())
        # its trained vocabulary has tokens over 255 bytes, which llm.c's tokenizer.bin cannot hold: only the
        # tokenizer.json copy is there, and it decodes the shards
        dec = tool.decode(["--tokenizer", os.path.join(big_out, "tokenizer.json")], read_shard(os.path.join(big_out, "val_000000.bin"))[1])
        res.check("shards_big_decode_with_copy", dec.startswith(b"<|begin_of_text|>" + docs[0].encode()[:50])
                  and not os.path.exists(os.path.join(big_out, "tokenizer.bin")), repr(dec[:100]))

    # the trainer reads uint32 shards, and a token outside the model's vocabulary is named with its shard and position
    if a.train_gpt and os.path.exists(a.train_gpt) and big_out:
        cut = os.path.join(tmp, "loader")
        os.makedirs(cut)
        kind, tk = read_shard(os.path.join(big_out, "train_000000.bin"))
        body = [x - BIG_SHIFT if x >= BIG_SHIFT else x for x in tk][:65]  # one micro-batch of B*T+1, so the step reads them all
        bad_at = 40
        for nm, tokens in [("ok", body), ("bad", body[:bad_at] + [70601] + body[bad_at + 1:])]:
            h = [0] * 256
            h[0:3] = [SHARD32[0], SHARD32[1], len(tokens)]
            with open(os.path.join(cut, "%s_u32.bin" % nm), "wb") as f:
                f.write(struct.pack("<256i", *h) + struct.pack("<%dI" % len(tokens), *tokens))
        base = [a.train_gpt, "-e", "d2", "-b", "1", "-t", "64", "-x", "1", "-v", "0", "-s", "0", "-o", os.path.join(cut, "o")]
        r = subprocess.run(base + ["-i", os.path.join(cut, "ok_u32.bin")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        res.check("trainer_reads_uint32_shard", r.returncode == 0 and b"step" in r.stdout, (r.stdout + r.stderr).decode()[-500:])
        r = subprocess.run(base + ["-i", os.path.join(cut, "bad_u32.bin")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        want_msg = ("%s: token 70601 at position %d is outside the model's vocabulary" % (os.path.join(cut, "bad_u32.bin"), bad_at)).encode()
        res.check("trainer_uint32_token_outside_vocab", r.returncode == 1 and want_msg in r.stderr, r.stderr.decode()[-500:])
        # end to end, in both builds: a fresh Llama-family model takes the vocabulary of the tokenizer.json beside the
        # uint32 shards, trains, and its samples are decoded with it (the filler tokens' bytes 0xFF 0xFE can only come
        # from that decoding; the trainer prints bytes that are not UTF-8 as U+FFFD each, so they show as two U+FFFD
        # before a token's letters)
        V = big.get_vocab_size()
        for name, binary in [("trainer_end_to_end_tokenizer_json_vocab", a.train_gpt),
                             ("trainer_end_to_end_tokenizer_json_vocab_emulated_cuda", a.train_gpt_emu)]:
            if not binary or not os.path.exists(binary):
                res.skip(name, "needs --train-gpt-emu ./train_gpt_emu (make train_gpt_emu: the CUDA toolkit's headers)")
                continue
            r = subprocess.run([binary, "-i", os.path.join(big_out, "train_*.bin"), "-j", os.path.join(big_out, "val_*.bin"),
                                "-e", "llama-d2", "-b", "1", "-t", "64", "-x", "2", "-v", "1", "-m", "1", "-s", "1", "-g", "64"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            losses = [float(x) for x in re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+)", r.stdout.decode(errors="replace"), re.M)]
            res.check(name, r.returncode == 0 and (" V %d " % V).encode() in r.stdout and b"Llama family" in r.stdout
                      and len(losses) == 2 and abs(losses[0] - math.log(V)) < 0.5 and b"sample: " in r.stdout
                      and re.search(rb"\xef\xbf\xbd\xef\xbf\xbd[a-z]", r.stdout) is not None,
                      "exit %d, V %d, losses %s (ln V %.2f): %r" % (r.returncode, V, losses, math.log(V), (r.stdout + r.stderr)[-400:]))
    else:
        res.skip("trainer_reads_uint32_shard", "needs --train-gpt ./train_gpt_cpu")
        res.skip("trainer_uint32_token_outside_vocab", "needs --train-gpt ./train_gpt_cpu")
        res.skip("trainer_end_to_end_tokenizer_json_vocab", "needs --train-gpt ./train_gpt_cpu")
        res.skip("trainer_end_to_end_tokenizer_json_vocab_emulated_cuda", "needs --train-gpt ./train_gpt_cpu")

    check_scripts(res, tool, tmp, paths, toks)
    with open(os.path.join(tmp, "docs.txt"), "w") as f:
        f.write("one document\n\nanother one\n")
    check_errors(res, tool, tmp, paths["llama3"])
    check_missing_bytes(res, tool, tmp, texts, a.text)
    check_ignore_merges(res, tool, tmp)
    print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
