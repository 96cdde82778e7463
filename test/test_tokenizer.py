#!/usr/bin/env python3
"""
Tests ./tokenize (tokenizer.h) against tiktoken's GPT-2 encoding as an independent
reference. tiktoken cannot download anything here, so the encoding is built from
the same local encoder.json / vocab.bpe files.

usage:
  python3 test/test_tokenizer.py --tokenize ./tokenize \
      --encoder ../shared/data/gpt2_encoder.json --merges ../shared/data/gpt2_vocab.bpe \
      --text ../shared/data/tinyshakespeare.txt

Prints "PASS name" / "FAIL name: detail" (or "SKIP name: reason") per check and
ends with "N passed, M failed, K skipped"; exits 1 if anything failed. Without tiktoken it
skips, saying how to install it.
"""
import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

try:
    import tiktoken
    import tiktoken.load
except ImportError:
    tiktoken = None

GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256
VOCAB = 50257
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
SHARD_DOC_SEP_TAG = 20261206  # dataloader.h's: header word 3, the separator's id in word 4
TOKENIZER_MAGIC = 20240328


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print("PASS %s" % name)
        else:
            self.failed += 1
            print("FAIL %s: %s" % (name, detail))
        sys.stdout.flush()
        return ok

    def skip(self, name, reason):
        self.skipped += 1
        print("SKIP %s: %s" % (name, reason))


def make_encoding(encoder, merges):
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=merges, encoder_json_file=encoder)
    return tiktoken.Encoding(name="gpt2", explicit_n_vocab=VOCAB, pat_str=GPT2_PAT,
                             mergeable_ranks=ranks, special_tokens={"<|endoftext|>": EOT})


class Tool:
    """Runs the ./tokenize binary."""

    def __init__(self, exe, encoder, merges):
        self.exe, self.encoder, self.merges = exe, encoder, merges

    def run(self, args, data=b""):
        return subprocess.run([self.exe] + args, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def bpe_args(self):
        return ["--encoder", self.encoder, "--merges", self.merges]

    def encode(self, data):
        p = self.run(["encode"] + self.bpe_args(), data)
        if p.returncode != 0:
            raise RuntimeError("encode exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        return [int(x) for x in p.stdout.split()]

    def decode(self, ids, tokenizer_bin=None):
        args = ["decode"] + (["--tokenizer", tokenizer_bin] if tokenizer_bin else self.bpe_args())
        p = self.run(args, "".join("%d\n" % i for i in ids).encode())
        if p.returncode != 0:
            raise RuntimeError("decode exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        return p.stdout


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def diff_detail(got, want):
    i = first_diff(got, want)
    return "lengths %d vs %d (tiktoken), first difference at index %d: got %s, tiktoken %s" % (
        len(got), len(want), i, got[max(0, i - 3):i + 5], want[max(0, i - 3):i + 5])


# ----------------------------------------------------------------------------
# test inputs

def hard_strings():
    s = [
        ("empty", ""),
        ("ascii", "Hello, world! This is a test."),
        ("spaces_runs", "a  b   c    d \t e\t\tf"),
        ("trailing_ws", "trailing spaces   "),
        ("trailing_newlines", "end of text\n\n\n"),
        ("nl_space_nl", "\n\n \n"),
        ("nl_space_nl_word", "x\n\n \nword"),
        ("only_spaces", "     "),
        ("leading_ws", "   \t\n  leading"),
        ("crlf", "line one\r\nline two\r\n\r\n  indented\r\n"),
        ("tabs_before_word", "\t\t\tx \t y\n z"),
        # U+00A0 is white space to \s (not to " ?"): these give different ids if it were
        # treated as punctuation
        ("nbsp_ideographic", "a\u00a0b \u00a0 c\u3000d \u3000e\u3000\u3000f x \u00a0y \u00a0\u00a0\u00a0x"),
        ("unicode_spaces", "x\u2000y\u2003z\u2009w\u200aq\u202fr\u205fs\u1680t\u0085u\u2028v\u2029 end \u2003"),
        ("not_white_space", "a\u200bb\u180ec\x1cd\x1fe\ufeff f"),  # ZWSP, MVS, FS..US, BOM are not White_Space
        ("contractions_lower", "don't can't I'm you're we've they'll he'd it's"),
        # upper-case contractions are not special in GPT-2: "'S" is "'" + "S..."
        ("contractions_upper", "I'M DON'T WE'RE THEY'LL HE'D IT'S YOU'VE\n'Shall'!\n'Mine"),
        ("contraction_edge", "'s' ''ll '''re 'x 's's 'S 'll've're 'd' O'Neil's rock'n'roll ' s"),
        ("apostrophe_in_punct", "?'s !'ll .'re --'d '"),
        ("digits_ascii", "12345 1,234.56 3rd 4th 1e10 0x1F 007"),
        ("digits_long", "314159265358979323846264338327950288419716939937510"),
        ("digits_arabic_indic", "٠١٢٣٤٥٦٧٨٩ and ۰۱۲۳"),
        ("digits_superscript", "x² y³ ¹ ¼ ½ ⁴⁵⁶ H₂O"),
        ("roman_numerals", "Ⅻ Ⅳ ⅻ ⅷ Chapter Ⅻ"),
        ("digits_other", "①②③ १२३ ๑๒๓ 𝟘𝟙𝟚 ꘠꘡ 〇〡〢 𐄇𐄈"),
        ("letters_digits_mixed", "abc123def 123abc a1b2c3 x²y"),
        ("cjk", "中文字符测试，日本語のテキスト、カタカナ。한국어 텍스트입니다."),
        ("arabic", "مرحبا بالعالم، هذا اختبار. السَّلَامُ عَلَيْكُمْ"),
        ("hebrew", "שָׁלוֹם עוֹלָם"),
        ("devanagari", "नमस्ते दुनिया, यह एक परीक्षण है। क्षत्रिय"),
        ("greek", "Καλημέρα κόσμε! ΑΒΓΔ αβγδ ἄλφα"),
        ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок."),
        ("thai", "สวัสดีชาวโลก"),
        ("latin_precomposed", "café naïve résumé Ångström façade œuvre ß Ǆ ǅ ǆ"),
        ("latin_combining", "cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030angstro\u0308m e\u0301\u0301\u0301"),
        ("modifier_letters", "ʰʲ ª º ˆ ˇ ꜝ"),
        ("punct_runs", "!!!???...---***,,,;;; ... --> <-- ==> !?!?"),
        ("punct_mixed", "\"quoted\" (paren) [bracket] {brace} <angle> «guillemets» — – … ¿¡"),
        ("symbols", "@#$%^&*~`|\\/+= © ® ™ € £ ¥ ° ± × ÷ ∑ ∫ √ ∞ ≠ ≤"),
        ("emoji", "I ❤️ 🍕! 😀😃😄 a😀b 👍🏽 👍🏿"),
        ("emoji_zwj", "👨‍👩‍👧‍👦 🏳️‍🌈 👩🏽‍💻 🧑‍🤝‍🧑"),
        ("emoji_flags", "🇺🇸🇯🇵🇩🇪 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"),
        ("control_chars", "a\x00b\x01c\x07\x08d\x7f e\x1b[0m"),
        ("unassigned_private", "\u0378 \ue000\uf8ff \uffff \U0010ffff \U000f0000 x\u0378y"),
        ("endoftext_literal", "<|endoftext|>hello<|endoftext|> <|endoftext|>"),
        ("code", "def f(x):\n    return x**2  # square\n\n\nif __name__ == '__main__':\n\tprint(f(3))\n"),
        ("url_email", "https://example.com/path?q=1&r=two#frag user.name+tag@example.co.uk"),
        ("long_space_run", " " * 1000 + "x" + " " * 700),
        ("long_newline_run", "\n" * 500 + "y"),
        ("long_punct_run", "!" * 3000),
        ("long_letter_run", "a" * 4000),
        ("long_mixed_ws", " \t\n" * 300 + "z"),
    ]
    return s


def random_unicode(seed, n_chars):
    """Random printable text over much of Unicode (only code points Python's
    unicodedata knows as assigned), mixed with ASCII words, digits and white space
    so that all pre-tokeniser branches get exercised."""
    rng = random.Random(seed)
    ws = [" ", " ", " ", "\n", "\t", "\u00a0", "\u3000", "  ", "\n\n", " \n"]
    out = []
    while len(out) < n_chars:
        r = rng.random()
        if r < 0.25:
            out.append(rng.choice(ws))
        elif r < 0.35:
            out.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789'.,!?-") for _ in range(rng.randint(1, 8))))
        else:
            # mostly BMP, sometimes astral; skip unassigned / surrogates / private use
            hi = 0x10000 if rng.random() < 0.8 else 0x30000
            while True:
                cp = rng.randrange(0x20, hi)
                ch = chr(cp)
                if unicodedata.category(ch) not in ("Cn", "Cs", "Co") and (ch.isprintable() or ch.isspace()):
                    break
            out.append(ch)
    return "".join(out)


def invalid_utf8_samples():
    rng = random.Random(1234)
    return [
        ("lone_bytes", b"\xff\xfe abc \x80\x81 def \xc0\xaf \xc3( \xe2\x82 end"),
        ("truncated_seq", b"caf\xc3 na\xc3\xafve \xf0\x9f\x98 \xf0\x9f \xe4\xb8"),
        ("surrogates_overlong", b"\xed\xa0\x80\xed\xbf\xbf \xe0\x80\xaf \xf4\x90\x80\x80 \xf8\x88\x80\x80\x80"),
        ("mixed_valid_invalid", "Привет ".encode() + b"\xd0" + " мир 😀".encode() + b"\x9f\x98\x80 ok"),
        ("random_bytes", bytes(rng.randrange(256) for _ in range(4096))),
        ("trailing_lead_byte", b"abc\xe2"),
    ]


# ----------------------------------------------------------------------------
# shard / tokenizer file readers (written independently of tokenize.c)

def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 1024:
        raise ValueError("%s: %d bytes, shorter than the header" % (path, len(data)))
    magic, version, n = struct.unpack("<3i", data[:12])
    if magic != SHARD_MAGIC:
        raise ValueError("%s: magic %d, expected %d" % (path, magic, SHARD_MAGIC))
    if version != SHARD_VERSION:
        raise ValueError("%s: version %d, expected %d" % (path, version, SHARD_VERSION))
    # words 3 and 4: the document separator's record (the trainer's --doc-mask), <|endoftext|> here
    tag, sep = struct.unpack("<2i", data[12:20])
    if tag != SHARD_DOC_SEP_TAG or sep != 50256:
        raise ValueError("%s: header words 3, 4 are %d, %d, expected %d, 50256 (the separator's record)" % (path, tag, sep, SHARD_DOC_SEP_TAG))
    if any(struct.unpack("<251i", data[20:1024])):
        raise ValueError("%s: header words 5..255 are not zero" % path)
    if len(data) != 1024 + 2 * n:
        raise ValueError("%s: size %d, expected 1024 + 2*%d = %d" % (path, len(data), n, 1024 + 2 * n))
    return list(struct.unpack("<%dH" % n, data[1024:]))


def read_tokenizer_bin(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256I", data[:1024])
    if header[0] != TOKENIZER_MAGIC or header[1] != 2:
        raise ValueError("%s: magic/version %d/%d" % (path, header[0], header[1]))
    vocab, eot = header[2], header[3]
    if any(header[4:]):
        raise ValueError("%s: header words 4..255 are not zero" % path)
    pos, toks = 1024, []
    for _ in range(vocab):
        n = data[pos]
        toks.append(data[pos + 1:pos + 1 + n])
        if n == 0 or len(toks[-1]) != n:
            raise ValueError("%s: bad or truncated entry %d" % (path, len(toks) - 1))
        pos += 1 + n
    if pos != len(data):
        raise ValueError("%s: %d trailing bytes" % (path, len(data) - pos))
    return vocab, eot, toks


def listdir_or_none(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None


# ----------------------------------------------------------------------------
# checks

def check_text_file(res, tool, enc, text_path):
    if not text_path or not os.path.exists(text_path):
        res.skip("tiktoken_text", "text file %r not found" % text_path)
        return None
    with open(text_path, "rb") as f:
        data = f.read()
    want = enc.encode_ordinary(data.decode("utf-8"))
    try:
        got = tool.encode(data)
    except RuntimeError as e:
        res.check("tiktoken_text", False, str(e))
        return data
    res.check("tiktoken_text", got == want,
              "" if got == want else diff_detail(got, want))
    try:
        back = tool.decode(got)
        res.check("roundtrip_text", back == data, "decoded %d bytes, expected %d" % (len(back), len(data)))
    except RuntimeError as e:
        res.check("roundtrip_text", False, str(e))
    return data


def check_strings(res, tool, enc):
    cases = hard_strings()
    cases.append(("random_unicode_seed0", random_unicode(0, 3000)))
    cases.append(("random_unicode_seed1", random_unicode(1, 3000)))
    rt_bad = []
    for name, text in cases:
        data = text.encode("utf-8")
        want = enc.encode_ordinary(text)
        try:
            got = tool.encode(data)
            back = tool.decode(got)
        except RuntimeError as e:
            res.check("tiktoken_str:" + name, False, str(e))
            continue
        res.check("tiktoken_str:" + name, got == want, "" if got == want else
                  "%r: %s" % (text[:60], diff_detail(got, want)))
        if back != data:
            rt_bad.append(name)
    res.check("roundtrip_strings", not rt_bad, "decode(encode(x)) != x for %s" % rt_bad)

    # invalid UTF-8: no reference exists, but it must not crash, give valid ids and round-trip
    rt_bad = []
    for name, data in invalid_utf8_samples():
        try:
            ids = tool.encode(data)
            back = tool.decode(ids)
            if back != data or any(not 0 <= i < EOT for i in ids):
                rt_bad.append(name)
        except RuntimeError as e:
            rt_bad.append("%s (%s)" % (name, e))
    res.check("roundtrip_invalid_utf8", not rt_bad, "failed for %s" % rt_bad)


def expected_stream(enc, text, sep):
    stream = []
    for doc in text.split(sep):
        stream.append(EOT)
        stream.extend(enc.encode_ordinary(doc))
    return stream


def check_shards(res, tool, enc, text_data, tmp):
    if text_data is None:
        text_data = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
                     "All:\nSpeak, speak.\n\n" * 2000).encode()
    in_path = os.path.join(tmp, "input.txt")
    with open(in_path, "wb") as f:
        f.write(text_data)
    text = text_data.decode("utf-8")

    # default settings: blank-line documents, 32768 val tokens
    out = os.path.join(tmp, "shards", "nested")  # also checks that missing parents are created
    p = tool.run(["shards"] + tool.bpe_args() + ["--in", in_path, "--out-dir", out])
    if not res.check("shards_run", p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace"))):
        return
    names = listdir_or_none(out)
    res.check("shards_files", names == ["shards.state", "tokenizer.bin", "train_000000.bin", "val_000000.bin"], "directory has %s" % names)
    lines = p.stdout.decode().splitlines()
    res.check("shards_summary", all(any(n in l for l in lines) for n in ["tokenizer.bin", "val_000000.bin", "train_000000.bin"]),
              "stdout was %r" % p.stdout.decode())
    try:
        val = read_shard(os.path.join(out, "val_000000.bin"))
        train = read_shard(os.path.join(out, "train_000000.bin"))
        res.check("shards_format", True)
    except (OSError, ValueError, struct.error) as e:
        res.check("shards_format", False, str(e))
        return
    want = expected_stream(enc, text, "\n\n")
    n_val = min(32768, len(want) - 1)
    res.check("shards_val_count", len(val) == n_val, "val has %d tokens, expected %d" % (len(val), n_val))
    got = val + train
    res.check("shards_stream", got == want, "" if got == want else diff_detail(got, want))

    tok_bin = os.path.join(out, "tokenizer.bin")
    try:
        vocab, eot, toks = read_tokenizer_bin(tok_bin)
        ok = vocab == VOCAB and eot == EOT and len(toks) == VOCAB
        bad = [i for i in range(len(toks)) if toks[i] != enc.decode_single_token_bytes(i)]
        res.check("tokenizer_bin", ok and not bad, "vocab %d eot %d, %d entries differ from tiktoken (first %s)"
                  % (vocab, eot, len(bad), bad[:5]))
    except (OSError, ValueError, IndexError, struct.error) as e:
        res.check("tokenizer_bin", False, str(e))
    try:
        back = tool.decode(val + train, tokenizer_bin=tok_bin)
        want_bytes = b"<|endoftext|>" + text_data.replace(b"\n\n", b"<|endoftext|>")
        res.check("roundtrip_tokenizer_bin", back == want_bytes, "decoded %d bytes, expected %d" % (len(back), len(want_bytes)))
    except RuntimeError as e:
        res.check("roundtrip_tokenizer_bin", False, str(e))

    # custom separator (escaped on the command line) and empty documents (asking for more val tokens than the
    # inputs make is an error naming --val-tokens: test_shards.py checks it)
    small = "one\n\ntwo\nthree\n\n\n\nfour\nfive\n"
    small_path = os.path.join(tmp, "small.txt")
    with open(small_path, "w", encoding="utf-8") as f:
        f.write(small)
    for sep_arg, sep in [("\\n", "\n"), ("\\n\\n", "\n\n")]:
        out2 = os.path.join(tmp, "small_out_%d" % len(sep))
        p = tool.run(["shards"] + tool.bpe_args() + ["--in", small_path, "--out-dir", out2,
                                                      "--val-tokens", "2", "--doc-sep", sep_arg])
        name = "shards_docsep_%s" % sep_arg.replace("\\", "")
        if p.returncode != 0:
            res.check(name, False, "exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
            continue
        try:
            val = read_shard(os.path.join(out2, "val_000000.bin"))
            train = read_shard(os.path.join(out2, "train_000000.bin"))
            want = expected_stream(enc, small, sep)
            res.check(name, val + train == want and len(val) == 2,
                      "val %d train %d, stream equal: %s" % (len(val), len(train), val + train == want))
        except (OSError, ValueError, struct.error) as e:
            res.check(name, False, str(e))

    # explicit --val-tokens
    out3 = os.path.join(tmp, "small_out_val3")
    p = tool.run(["shards"] + tool.bpe_args() + ["--in", small_path, "--out-dir", out3, "--val-tokens=3"])
    try:
        val = read_shard(os.path.join(out3, "val_000000.bin"))
        train = read_shard(os.path.join(out3, "train_000000.bin"))
        want = expected_stream(enc, small, "\n\n")
        res.check("shards_val_tokens", p.returncode == 0 and len(val) == 3 and val + train == want,
                  "exit %d, val %d train %d" % (p.returncode, len(val), len(train)))
    except (OSError, ValueError, struct.error) as e:
        res.check("shards_val_tokens", False, "exit %d: %s" % (p.returncode, e))


def check_errors(res, tool, tmp):
    in_path = os.path.join(tmp, "err_input.txt")
    with open(in_path, "w") as f:
        f.write("hello\n\nworld\n")

    def expect_fail(name, args, code, must_mention, out_dir=None, data=b""):
        p = tool.run(args, data)
        err = p.stderr.decode(errors="replace")
        problems = []
        if p.returncode != code:
            problems.append("exit %d, expected %d" % (p.returncode, code))
        if must_mention not in err:
            problems.append("stderr does not mention %r" % must_mention)
        if out_dir is not None and os.path.exists(out_dir):
            problems.append("%s was created: %s" % (out_dir, listdir_or_none(out_dir)))
        if p.stdout and out_dir is not None:
            problems.append("unexpected stdout %r" % p.stdout[:200])
        res.check(name, not problems, "; ".join(problems) + " (stderr: %r)" % err.strip()[:300])

    missing = os.path.join(tmp, "no_such_dir", "encoder.json")
    out = os.path.join(tmp, "err_out1")
    expect_fail("error_missing_encoder", ["shards", "--encoder", missing, "--merges", tool.merges,
                                          "--in", in_path, "--out-dir", out], 1, missing, out)
    missing_m = os.path.join(tmp, "missing_vocab.bpe")
    expect_fail("error_missing_merges", ["encode", "--encoder", tool.encoder, "--merges", missing_m], 1, missing_m)
    out = os.path.join(tmp, "err_out2")
    # a directory is read for its .txt/.jsonl/.json(.gz) files; one with none of them is an error
    no_corpus = os.path.join(tmp, "no_corpus_files")
    os.makedirs(no_corpus, exist_ok=True)
    with open(os.path.join(no_corpus, "README.md"), "w") as f:
        f.write("not a corpus file\n")
    expect_fail("error_in_is_directory", ["shards"] + tool.bpe_args() + ["--in", no_corpus, "--out-dir", out], 1,
                no_corpus, out)
    out = os.path.join(tmp, "err_out3")
    expect_fail("error_missing_in", ["shards"] + tool.bpe_args() + ["--in", in_path + ".nope", "--out-dir", out],
                1, in_path + ".nope", out)
    out = os.path.join(tmp, "err_out4")
    expect_fail("error_unknown_flag", ["shards"] + tool.bpe_args() + ["--in", in_path, "--out-dir", out, "--bogus", "1"],
                2, "--bogus", out)
    out = os.path.join(tmp, "err_out5")
    expect_fail("error_flag_wrong_subcommand", ["encode"] + tool.bpe_args() + ["--out-dir", out], 2, "--out-dir", out)
    expect_fail("error_unknown_subcommand", ["frobnicate"], 2, "frobnicate")
    out = os.path.join(tmp, "err_out6")
    expect_fail("error_missing_value", ["shards"] + tool.bpe_args() + ["--in", in_path, "--out-dir", out, "--val-tokens"],
                2, "--val-tokens", out)
    expect_fail("error_bad_val_tokens", ["shards"] + tool.bpe_args() + ["--in", in_path, "--out-dir", out,
                                                                        "--val-tokens", "-5"], 2, "--val-tokens", out)
    expect_fail("error_missing_required", ["shards"] + tool.bpe_args() + ["--in", in_path], 2, "--out-dir")

    bad_bin = os.path.join(tmp, "bad_tokenizer.bin")
    with open(bad_bin, "wb") as f:
        f.write(struct.pack("<256I", *([123] + [0] * 255)))
    expect_fail("error_bad_tokenizer_magic", ["decode", "--tokenizer", bad_bin], 1, "bad magic 123", data=b"1\n")
    trunc_bin = os.path.join(tmp, "trunc_tokenizer.bin")
    with open(trunc_bin, "wb") as f:
        f.write(struct.pack("<256I", *([TOKENIZER_MAGIC, 2, VOCAB, EOT] + [0] * 252)) + b"\x01a\x02b")
    expect_fail("error_truncated_tokenizer_bin", ["decode", "--tokenizer", trunc_bin], 1, trunc_bin, data=b"1\n")

    # merges that do not belong to the encoder (two lines swapped)
    with open(tool.merges, encoding="utf-8") as f:
        lines = f.read().split("\n")
    lines[5], lines[6] = lines[6], lines[5]
    bad_merges = os.path.join(tmp, "swapped_vocab.bpe")
    with open(bad_merges, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    expect_fail("error_mismatched_merges", ["encode", "--encoder", tool.encoder, "--merges", bad_merges], 1,
                bad_merges + ":6", data=b"hi")
    bad_json = os.path.join(tmp, "bad_encoder.json")
    with open(bad_json, "w") as f:
        f.write('{"a": 0, "b": 1,,}')
    expect_fail("error_bad_json", ["encode", "--encoder", bad_json, "--merges", tool.merges], 1, bad_json, data=b"hi")
    expect_fail("error_decode_bad_id", ["decode"] + tool.bpe_args(), 1, "50257", data=b"15\n50257\n")
    expect_fail("error_decode_not_a_number", ["decode"] + tool.bpe_args(), 1, "line 2", data=b"15\nabc\n")

    p = tool.run(["--help"])
    res.check("help", p.returncode == 0 and b"usage" in p.stdout and b"shards" in p.stdout,
              "exit %d, stdout %r" % (p.returncode, p.stdout[:100]))


def main():
    ap = argparse.ArgumentParser(description="compare ./tokenize against tiktoken's GPT-2 encoding")
    ap.add_argument("--tokenize", default="./tokenize")
    ap.add_argument("--encoder", default="../shared/data/gpt2_encoder.json")
    ap.add_argument("--merges", default="../shared/data/gpt2_vocab.bpe")
    ap.add_argument("--text", default="../shared/data/tinyshakespeare.txt")
    args = ap.parse_args()
    for path in (args.tokenize, args.encoder, args.merges):
        if not os.path.exists(path):
            sys.exit("test_tokenizer.py: %s not found" % path)

    res = Results()
    if tiktoken is None:
        res.skip("tokenizer vs tiktoken", "%s has no tiktoken (pip install tiktoken)" % sys.executable)
        print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
        sys.exit(0)
    enc = make_encoding(args.encoder, args.merges)
    tool = Tool(os.path.abspath(args.tokenize), args.encoder, args.merges)
    with tempfile.TemporaryDirectory(prefix="test_tokenizer_") as tmp:
        text_data = check_text_file(res, tool, enc, args.text)
        check_strings(res, tool, enc)
        check_shards(res, tool, enc, text_data, tmp)
        check_errors(res, tool, tmp)
    print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
    sys.exit(1 if res.failed else 0)


if __name__ == "__main__":
    main()
