#!/usr/bin/env python3
"""mc_tokenize.py: a multiple-choice set in text to the token-id JSON lines that train_gpt's --eval-mc reads.

    scripts/mc_tokenize.py IN.jsonl OUT.jsonl [--encoder gpt2_encoder.json --merges gpt2_vocab.bpe | --tokenizer tokenizer.json]

Each input line is one example, in one of two forms:
  ours:       {"context": "text", "endings": ["text", ...], "label": k}   endings taken as they are (give
              them their leading space where one belongs: " went home")
  HellaSwag:  {"ctx": "text", "endings": ["text", ...], "label": k, ...} (its published jsonl, as
              scripts/hellaswag.sh fetches it); as llm.c does, each ending gets a leading space
Output lines: {"context_tokens": [...], "ending_tokens": [[...], ...], "label": k}. The GPT-2 encoding comes
from GPT-2's encoder files (found in data/ or ../shared/data, or --encoder/--merges) through tiktoken when
it is installed, else through ./tokenize (one process per string: slower, the same ids). --tokenizer tokenizer.json
(a Hugging Face byte-level BPE: the model's own, e.g. Llama 3's) encodes with the `tokenizers` library when it is
installed (encode(text, add_special_tokens=False)), else through ./tokenize --tokenizer, the same ids. A label outside
the endings is an error naming the line.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def run_tokenize(tok_args):
    tok = os.path.join(ROOT, "tokenize")
    if not os.path.exists(tok):
        sys.exit("error: no tiktoken / tokenizers library and no ./tokenize (make tokenize)")

    def enc_tokenize(text):
        r = subprocess.run([tok, "encode"] + tok_args, input=text.encode(), stdout=subprocess.PIPE, check=True)
        return [int(x) for x in r.stdout.split()]
    return enc_tokenize


def json_encoder(path):
    """A tokenizer.json's encoding: the tokenizers library, else ./tokenize --tokenizer (tokenizer_json.h)."""
    if not os.path.isfile(path):
        sys.exit("error: --tokenizer %s: no such file" % path)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return run_tokenize(["--tokenizer", path])
    tok = Tokenizer.from_file(path)
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def encoder(args):
    """GPT-2's encoding from the local encoder files: tiktoken built from them (no download), else ./tokenize."""
    cands = [os.path.join(d, "gpt2_encoder.json") for d in ("data", os.path.join(ROOT, "data"), os.path.join(ROOT, "..", "shared", "data"))]
    e = args.encoder or next((p for p in cands if os.path.isfile(p)), None)
    m = args.merges or (e and os.path.join(os.path.dirname(e), "gpt2_vocab.bpe"))
    if not (e and m and os.path.isfile(e) and os.path.isfile(m)):
        sys.exit("error: GPT-2's gpt2_encoder.json and gpt2_vocab.bpe not found in data/ or ../shared/data: give --encoder "
                 "and --merges (scripts/tinyshakespeare.sh fetches them)")
    try:
        import tiktoken
        import tiktoken.load
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=m, encoder_json_file=e)
        return tiktoken.Encoding(name="gpt2", explicit_n_vocab=50257, pat_str=GPT2_PAT, mergeable_ranks=ranks,
                                 special_tokens={"<|endoftext|>": 50256}).encode_ordinary
    except ImportError:
        pass
    return run_tokenize(["--encoder", e, "--merges", m])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--encoder")
    ap.add_argument("--merges")
    ap.add_argument("--tokenizer", help="a Hugging Face tokenizer.json (byte-level BPE) instead of GPT-2's files")
    a = ap.parse_args()
    if a.tokenizer and (a.encoder or a.merges):
        ap.error("give either --tokenizer or --encoder/--merges")
    enc = json_encoder(a.tokenizer) if a.tokenizer else encoder(a)
    out = []
    with open(a.input, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ex = json.loads(line)
            except ValueError as e:
                sys.exit("error: %s line %d: not JSON (%s)" % (a.input, i, e))
            hella = "ctx" in ex
            ctx = ex.get("ctx", ex.get("context"))
            ends, label = ex.get("endings"), ex.get("label")
            if not isinstance(ctx, str) or not isinstance(ends, list) or not all(isinstance(x, str) for x in ends):
                sys.exit("error: %s line %d: expected \"context\" (or HellaSwag's \"ctx\") text and \"endings\", a list of texts" % (a.input, i))
            if isinstance(label, str) and label.isdigit():
                label = int(label)
            if not isinstance(label, int) or not 0 <= label < len(ends):
                sys.exit("error: %s line %d: \"label\" is %s, outside 0..%d for its %d endings" % (a.input, i, json.dumps(label), len(ends) - 1, len(ends)))
            out.append({"context_tokens": enc(ctx), "ending_tokens": [enc((" " if hella else "") + x) for x in ends], "label": label})
    tmp = a.output + ".tmp"
    with open(tmp, "w") as f:
        for ex in out:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")
    os.replace(tmp, a.output)
    print("wrote %s: %d examples" % (a.output, len(out)))


if __name__ == "__main__":
    main()
