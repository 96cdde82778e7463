#!/usr/bin/env python3
"""
FineWeb (or any Hugging Face dataset with Parquet files) to llm.c token shards, in one command:

  python3 scripts/fineweb.py                           # HuggingFaceFW/fineweb sample-10BT -> data/fineweb10B/
  python3 scripts/fineweb.py --preset sample-100BT --out-dir data/fineweb100B
  python3 scripts/fineweb.py --dataset HuggingFaceFW/fineweb-edu --pattern 'sample/10BT/*.parquet' --out-dir D
  python3 scripts/fineweb.py --dataset USER/NAME --split validation   # files data/validation-*.parquet
  python3 scripts/fineweb.py --local DIR ...          # a copy already on disk, in the hub's layout (no network)

The files come through the official client (huggingface_hub.snapshot_download: resumable,
HF_TOKEN / HF_HOME / HF_ENDPOINT as usual); their text column is streamed (pyarrow, one record
batch at a time, scripts/parquet_text.py's framed format) into `./tokenize shards`, which writes NAME_val_000000.bin (the first
--shard-tokens tokens, as llm.c's dev/data/fineweb.py does), then NAME_train_000001.bin, ...
of 100M tokens each, and tokenizer.bin, under --out-dir: the layout scripts/gpt2_recipes.sh
reads (data/fineweb10B/fineweb_train_*.bin). Run it again after an interruption: the download
resumes, and tokenize --resume drops the text the complete shards already hold without
tokenizing it (the Parquet files are decoded again, about 8x faster than tokenizing) and makes
the last complete shard again as a check that the stream is the same.

Needs: pip install huggingface_hub pyarrow; GPT-2's encoder.json and vocab.bpe (taken from
data/ or ../shared/data, else downloaded from OpenAI's public bucket), or --tokenizer: the
tokenizer.json of the model to continue (Llama 3, Qwen 2, SmolLM: byte-level BPE; read by
./tokenize itself, see docs/tokenizer.md), whose shards are uint32 when its vocabulary is over
65,536 and whose document separator is its own (--doc-token to choose another).
"""
import argparse
import fnmatch
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parquet_text import stream_parquet, stream_parquet_parallel  # noqa: E402

PRESETS = {"sample-10BT": "sample/10BT/*.parquet", "sample-100BT": "sample/100BT/*.parquet",
           "sample-350BT": "sample/350BT/*.parquet"}
GPT2_FILES = {"gpt2_encoder.json": "https://openaipublic.blob.core.windows.net/gpt-2/models/124M/encoder.json",
              "gpt2_vocab.bpe": "https://openaipublic.blob.core.windows.net/gpt-2/models/124M/vocab.bpe"}


def tokenizer_file(given, name):
    if given:
        return given
    for d in ("data", "../shared/data"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    os.makedirs("data", exist_ok=True)
    path = os.path.join("data", name)
    print("downloading %s" % GPT2_FILES[name], file=sys.stderr)
    urllib.request.urlretrieve(GPT2_FILES[name], path + ".part")
    os.rename(path + ".part", path)
    return path


def parquet_files(a, pattern):
    """The dataset's files matching pattern, sorted: from --local, else fetched by huggingface_hub."""
    root = a.local
    if root is None:
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            raise SystemExit("fineweb.py: needs huggingface_hub (pip install huggingface_hub pyarrow)")
        root = snapshot_download(repo_id=a.dataset, repo_type="dataset", revision=a.revision,
                                 allow_patterns=[pattern], cache_dir=a.cache_dir)
    files = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), root)
            if fnmatch.fnmatch(rel, pattern):
                files.append(rel)
    if not files:
        raise SystemExit("fineweb.py: no file matches %r under %s" % (pattern, root))
    return [os.path.join(root, f) for f in sorted(files)]


def main():
    ap = argparse.ArgumentParser(description="a Hugging Face dataset to llm.c token shards")
    ap.add_argument("--dataset", default="HuggingFaceFW/fineweb", help="the hub repository (a dataset)")
    ap.add_argument("--preset", default="sample-10BT", choices=sorted(PRESETS), help="FineWeb's samples")
    ap.add_argument("--subset", help="a folder of the repository (e.g. sample/10BT): its *.parquet files")
    ap.add_argument("--split", help="a split in the hub's standard layout: data/SPLIT-*.parquet")
    ap.add_argument("--pattern", help="the files to read, a glob relative to the repository (overrides the above)")
    ap.add_argument("--revision", default=None, help="a branch or commit (refs/convert/parquet for auto-converted sets)")
    ap.add_argument("--local", help="read this directory (the hub's layout) instead of downloading")
    ap.add_argument("--cache-dir", default=None, help="huggingface_hub's cache (default: HF_HOME's)")
    ap.add_argument("--column", default="text")
    ap.add_argument("--out-dir", default="data/fineweb10B")
    ap.add_argument("--name", default="fineweb", help="shard file prefix")
    ap.add_argument("--shard-tokens", default="100000000")
    ap.add_argument("--val-tokens", default=None, help="default: one shard, as llm.c")
    ap.add_argument("--threads", default=None, help="tokenize threads (default: every core)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 8),
                    help="processes decoding Parquet row groups (default: a core in 8, as the tokenizer is ~8x slower)")
    ap.add_argument("--tokenize", default="./tokenize")
    ap.add_argument("--encoder", default=None)
    ap.add_argument("--merges", default=None)
    ap.add_argument("--tokenizer", default=None, help="a Hugging Face tokenizer.json (byte-level BPE) instead of GPT-2's files")
    ap.add_argument("--doc-token", default=None, help="the token before each document (default: the tokenizer's own)")
    a = ap.parse_args()
    if a.tokenizer and (a.encoder or a.merges):
        ap.error("give either --tokenizer or --encoder/--merges")
    pattern = a.pattern or (a.subset.rstrip("/") + "/*.parquet" if a.subset else None) \
        or ("data/%s-*.parquet" % a.split if a.split else None) or PRESETS[a.preset]
    if not os.path.exists(a.tokenize):
        subprocess.run(["make", "-s", "tokenize"], check=True)
    if a.tokenizer:
        if not os.path.isfile(a.tokenizer):
            raise SystemExit("fineweb.py: --tokenizer %s: no such file" % a.tokenizer)
        tok_args = ["--tokenizer", a.tokenizer] + (["--doc-token", a.doc_token] if a.doc_token else [])
    else:
        tok_args = ["--encoder", tokenizer_file(a.encoder, "gpt2_encoder.json"), "--merges", tokenizer_file(a.merges, "gpt2_vocab.bpe")]
        tok_args += ["--doc-token", a.doc_token] if a.doc_token else []
    cmd = [a.tokenize, "shards"] + tok_args + ["--in", "-", "--format", "framed",
           "--out-dir", a.out_dir, "--name", a.name, "--shard-tokens", a.shard_tokens, "--resume"]
    if a.val_tokens is not None:
        cmd += ["--val-tokens", a.val_tokens]
    if a.threads is not None:
        cmd += ["--threads", a.threads]
    files = parquet_files(a, pattern)
    print("%d parquet file(s) matching %s -> %s/%s_*.bin" % (len(files), pattern, a.out_dir, a.name), file=sys.stderr)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    try:
        if a.jobs > 1:
            rows, nulls = stream_parquet_parallel(files, a.column, proc.stdin, a.jobs)
        else:
            rows, nulls = stream_parquet(files, a.column, proc.stdin)
        proc.stdin.close()
    except BrokenPipeError:
        rows = nulls = 0  # tokenize stopped (and said why); its exit status below tells
    except BaseException:
        # the stream is incomplete: stop tokenize before an end of input makes it write the last shard
        proc.terminate()
        proc.wait()
        raise
    rc = proc.wait()
    if rc != 0:
        raise SystemExit("fineweb.py: tokenize exited %d" % rc)
    print("%d documents from %d file(s)%s" % (rows, len(files), ", %d null rows skipped" % nulls if nulls else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
