#!/usr/bin/env python3
"""export_hf.py: an llm.c model file (or the newest checkpoint of a trainer's out dir) to a Hugging Face
GPT2LMHeadModel directory that AutoModelForCausalLM and AutoTokenizer load as they are.

    scripts/export_hf.py IN OUT_DIR [--encoder gpt2_encoder.json --merges gpt2_vocab.bpe]
                         [--no-tokenizer] [--overwrite]

IN: a model file (version 3 fp32 or 5 bf16) or an out dir (-o of train_gpt), whose newest complete
checkpoint is taken. OUT_DIR gets config.json, model.safetensors (the tensors in the file's own precision:
F32 or BF16; the padded vocabulary rows dropped; no lm_head.weight, since GPT-2 ties it to wte and
transformers fills it from there) and, for GPT-2's 50257-token vocabulary, the tokenizer: vocab.json and
merges.txt are OpenAI's encoder.json and vocab.bpe (the files scripts/tinyshakespeare.sh fetches; looked
for in data/ and ../shared/data unless given). Everything is written to a temporary directory beside
OUT_DIR and renamed into place at the end. Needs only numpy.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_hf import HFError, LAYER_MAP, OUTER_MAP, latest_checkpoint, read_llmc, write_safetensors  # noqa: E402

GPT2_VOCAB = 50257
EOT = "<|endoftext|>"


def hf_config(d, bf16):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": d["V"], "n_positions": d["maxT"], "n_ctx": d["maxT"], "n_embd": d["C"],
        "n_layer": d["L"], "n_head": d["NH"], "n_inner": None,
        # llm.c's GELU is the tanh approximation; its LayerNorm epsilon 1e-5; no dropout at inference
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": d["V"] - 1, "eos_token_id": d["V"] - 1,
        "torch_dtype": "bfloat16" if bf16 else "float32",
    }


def hf_tensors(d, t, bf16):
    """(name, array, dtype tag) in the order they are written: outer tensors, then layer by layer."""
    tag = "BF16" if bf16 else "F32"
    wte = t["wte"][:d["V"]]
    pad = t["wte"][d["V"]:]
    if pad.size and np.any(pad != 0):
        print("note: the padded vocabulary rows %d..%d are not zero; dropped all the same" % (d["V"], d["Vp"] - 1))
    out = [("transformer." + OUTER_MAP["wte"], wte, tag), ("transformer." + OUTER_MAP["wpe"], t["wpe"], tag)]
    for i in range(d["L"]):
        for name, (hf, transpose) in LAYER_MAP.items():
            a = t[name][i]
            out.append(("transformer.h.%d.%s" % (i, hf), a.T if transpose else a, tag))
    out += [("transformer." + OUTER_MAP["lnfw"], t["lnfw"], tag), ("transformer." + OUTER_MAP["lnfb"], t["lnfb"], tag)]
    return out


def find_tokenizer_file(given, name, flag):
    if given:
        if not os.path.isfile(given):
            raise HFError("%s: %s: no such file" % (flag, given))
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    for d in ("data", os.path.join(here, "..", "data"), os.path.join(here, "..", "..", "shared", "data")):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    raise HFError("%s not found in data/ or ../shared/data: give %s (scripts/tinyshakespeare.sh fetches it), "
                  "or --no-tokenizer" % (name, flag))


def write_tokenizer(out, d, encoder, merges):
    with open(encoder, encoding="utf-8") as f:
        try:
            vocab = json.load(f)
        except ValueError as e:
            raise HFError("%s: not JSON (%s); expected GPT-2's encoder.json" % (encoder, e))
    if len(vocab) != d["V"] or vocab.get(EOT) != d["V"] - 1:
        raise HFError("%s: %d tokens with %s at %s; the model has a vocabulary of %d" %
                      (encoder, len(vocab), EOT, vocab.get(EOT), d["V"]))
    shutil.copyfile(encoder, os.path.join(out, "vocab.json"))
    shutil.copyfile(merges, os.path.join(out, "merges.txt"))
    tc = {"tokenizer_class": "GPT2Tokenizer", "model_max_length": d["maxT"], "add_prefix_space": False,
          "bos_token": EOT, "eos_token": EOT, "unk_token": EOT}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": EOT, "eos_token": EOT, "unk_token": EOT}, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="llm.c model file, or a train_gpt out dir (its newest checkpoint)")
    ap.add_argument("out_dir")
    ap.add_argument("--encoder", help="GPT-2 encoder.json (default: data/ or ../shared/data gpt2_encoder.json)")
    ap.add_argument("--merges", help="GPT-2 vocab.bpe (default: data/ or ../shared/data gpt2_vocab.bpe)")
    ap.add_argument("--no-tokenizer", action="store_true", help="write the model only")
    ap.add_argument("--overwrite", action="store_true", help="replace OUT_DIR if it exists")
    a = ap.parse_args()
    try:
        path = latest_checkpoint(a.input) if os.path.isdir(a.input) else a.input
        d, t, bf16 = read_llmc(path)
        out = os.path.abspath(a.out_dir.rstrip("/"))
        if os.path.exists(out) and not a.overwrite:
            raise HFError("%s: exists (give --overwrite to replace it)" % a.out_dir)
        tok = not a.no_tokenizer and d["V"] == GPT2_VOCAB
        if tok:
            enc = find_tokenizer_file(a.encoder, "gpt2_encoder.json", "--encoder")
            mer = find_tokenizer_file(a.merges, "gpt2_vocab.bpe", "--merges")
        tmp = tempfile.mkdtemp(prefix=".export_hf.", dir=os.path.dirname(out))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary directory
        try:
            write_safetensors(os.path.join(tmp, "model.safetensors"), hf_tensors(d, t, bf16), {"format": "pt"})
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(hf_config(d, bf16), f, indent=2)
                f.write("\n")
            if tok:
                write_tokenizer(tmp, d, enc, mer)
            if os.path.exists(out):
                old = out + ".old%d" % os.getpid()
                os.rename(out, old)
                os.rename(tmp, out)
                shutil.rmtree(old)
            else:
                os.rename(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("exported %s (L=%d, C=%d, heads %d, vocab %d, %s) to %s%s" %
          (path, d["L"], d["C"], d["NH"], d["V"], "bf16" if bf16 else "fp32", a.out_dir,
           "" if tok else " (no tokenizer files: %s)" % ("--no-tokenizer" if a.no_tokenizer else "not GPT-2's vocabulary")))


if __name__ == "__main__":
    main()
