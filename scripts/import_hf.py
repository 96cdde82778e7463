#!/usr/bin/env python3
"""import_hf.py: a Hugging Face GPT-2 directory (GPT2LMHeadModel or GPT2Model; gpt2 through gpt2-xl or any
other shape of the same architecture) to an llm.c model file that train_gpt starts from with -e.

    scripts/import_hf.py HF_DIR OUT.bin [--dtype auto|fp32|bf16]

HF_DIR holds config.json and the weights: model.safetensors, a sharded model.safetensors.index.json, or
PyTorch's pytorch_model.bin (that one needs torch to read). Names with or without the "transformer."
prefix are accepted; the attention-mask buffers older checkpoints carry (attn.bias, attn.masked_bias) are
skipped; lm_head.weight must equal wte (GPT-2 ties them; llm.c has no separate head). The vocabulary is
padded to a multiple of 128 with zero rows, as llm.c does. --dtype auto writes version 5 (bf16) when every
tensor is bf16 and version 3 (fp32) otherwise. Checked before anything is written: the architecture and
its options in config.json, every tensor's shape against config.json, missing and unknown tensors, and
truncated files; each error names the file and the field. The output is written to a temporary name and
renamed. Needs only numpy (and torch for pytorch_model.bin).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_hf import (HFError, LAYER_MAP, LLMC_TENSORS, OUTER_MAP, bf16_to_f32, f32_to_bf16, padded_vocab,  # noqa: E402
                     read_safetensors, write_llmc)

BUFFERS = ("attn.bias", "attn.masked_bias")  # causal-mask buffers, not weights


def read_config(hf_dir):
    path = os.path.join(hf_dir, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except OSError as e:
        raise HFError("%s: cannot open: %s (expected a Hugging Face model directory)" % (path, e.strerror))
    except ValueError as e:
        raise HFError("%s: not valid JSON (%s)" % (path, e))

    def want(field, ok, expected, default=None):
        v = c.get(field, default)
        if not ok(v):
            raise HFError("%s: %s is %s, expected %s (llm.c's GPT-2 has no other)" % (path, field, json.dumps(v), expected))
        return v
    want("model_type", lambda v: v == "gpt2", '"gpt2"')
    arch = c.get("architectures") or ["GPT2LMHeadModel"]
    if not all(a in ("GPT2LMHeadModel", "GPT2Model") for a in arch):
        raise HFError("%s: architectures is %s, expected GPT2LMHeadModel or GPT2Model" % (path, json.dumps(arch)))
    want("activation_function", lambda v: v in ("gelu_new", "gelu_pytorch_tanh"), '"gelu_new" (tanh GELU)', "gelu_new")
    want("layer_norm_epsilon", lambda v: abs(v - 1e-5) < 1e-12, "1e-05", 1e-5)
    want("scale_attn_weights", lambda v: v is True, "true", True)
    want("scale_attn_by_inverse_layer_idx", lambda v: v is False, "false", False)
    want("add_cross_attention", lambda v: v is False, "false", False)
    want("tie_word_embeddings", lambda v: v is True, "true", True)
    d = {"V": c.get("vocab_size"), "maxT": c.get("n_positions"), "L": c.get("n_layer"),
         "NH": c.get("n_head"), "C": c.get("n_embd")}
    for field, k in (("vocab_size", "V"), ("n_positions", "maxT"), ("n_layer", "L"), ("n_head", "NH"), ("n_embd", "C")):
        if not isinstance(d[k], int) or d[k] <= 0:
            raise HFError("%s: %s is %s, expected a positive integer" % (path, field, json.dumps(d[k])))
    if d["C"] % d["NH"]:
        raise HFError("%s: n_embd %d is not divisible by n_head %d" % (path, d["C"], d["NH"]))
    want("n_inner", lambda v: v is None or v == 4 * d["C"], "null or 4 * n_embd = %d" % (4 * d["C"]))
    d["Vp"] = padded_vocab(d["V"])
    return d


def read_weights(hf_dir):
    """{name without 'transformer.': (array, dtype tag, file)}"""
    st, idx, pt = (os.path.join(hf_dir, n) for n in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
    files = []
    if os.path.exists(st):
        files = [st]
    elif os.path.exists(idx):
        try:
            with open(idx) as f:
                files = sorted(set(os.path.join(hf_dir, v) for v in json.load(f)["weight_map"].values()))
        except (ValueError, KeyError, AttributeError) as e:
            raise HFError("%s: weight_map unreadable (%s)" % (idx, e))
    elif os.path.exists(pt):
        return read_torch(pt)
    else:
        raise HFError("%s: no model.safetensors, model.safetensors.index.json or pytorch_model.bin" % hf_dir)
    out = {}
    for p in files:
        for name, (a, tag) in read_safetensors(p).items():
            out[strip(name)] = (a, tag, p)
    return out


def read_torch(path):
    try:
        import torch
    except ImportError:
        raise HFError("%s: reading PyTorch weights needs torch (or convert the directory to safetensors)" % path)
    try:
        sd = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many kinds for a damaged file
        raise HFError("%s: torch.load failed: %s (truncated?)" % (path, e))
    out = {}
    for name, v in sd.items():
        if v.dtype == torch.bfloat16:
            out[strip(name)] = (v.view(torch.int16).numpy().view(np.uint16), "BF16", path)
        else:
            out[strip(name)] = (v.float().numpy(), "F32", path)
    return out


def strip(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


def as_f32(a, tag):
    return bf16_to_f32(np.asarray(a)) if tag == "BF16" else np.asarray(a, dtype=np.float32)


def gather(d, w, bf16):
    """The 16 llm.c tensors from the Hugging Face ones, every shape checked."""
    used = set()

    def get(name, shape):
        if name not in w:
            raise HFError("%s: tensor '%s' is missing" % (next(iter(w.values()))[2] if w else "weights", name))
        a, tag, path = w[name]
        if tuple(a.shape) != tuple(shape):
            raise HFError("%s: tensor '%s' has shape %s, config.json (n_layer %d, n_embd %d, vocab_size %d, n_positions %d) "
                          "implies %s" % (path, name, list(a.shape), d["L"], d["C"], d["V"], d["maxT"], list(shape)))
        used.add(name)
        if bf16:
            return np.asarray(a) if tag == "BF16" else f32_to_bf16(as_f32(a, tag))
        return as_f32(a, tag)
    dt = np.uint16 if bf16 else np.float32
    C, L = d["C"], d["L"]
    t = {"wte": np.zeros((d["Vp"], C), dtype=dt)}
    t["wte"][:d["V"]] = get(OUTER_MAP["wte"], (d["V"], C))
    t["wpe"] = get(OUTER_MAP["wpe"], (d["maxT"], C))
    hf_shape = {"qkvw": (C, 3 * C), "attprojw": (C, C), "fcw": (C, 4 * C), "fcprojw": (4 * C, C)}
    for name, fn in LLMC_TENSORS:
        if name not in LAYER_MAP:
            continue
        hf, transpose = LAYER_MAP[name]
        full = np.empty(fn(d), dtype=dt)
        for i in range(L):
            shape = hf_shape[name] if transpose else full.shape[1:]
            a = get("h.%d.%s" % (i, hf), shape)
            full[i] = a.T if transpose else a
        t[name] = full
    t["lnfw"] = get(OUTER_MAP["lnfw"], (C,))
    t["lnfb"] = get(OUTER_MAP["lnfb"], (C,))
    for name, (a, tag, path) in w.items():
        if name in used or any(name.endswith(b) for b in BUFFERS):
            continue
        if name == "lm_head.weight":
            if tuple(a.shape) != (d["V"], C) or not np.array_equal(as_f32(a, tag), as_f32(*w[OUTER_MAP["wte"]][:2])):
                raise HFError("%s: lm_head.weight differs from wte.weight; llm.c's GPT-2 ties them (untied heads are not supported)" % path)
            continue
        raise HFError("%s: unexpected tensor '%s' (not part of GPT-2)" % (path, name))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=("auto", "fp32", "bf16"), default="auto",
                    help="auto: bf16 (version 5) if every tensor is bf16, else fp32 (version 3)")
    a = ap.parse_args()
    try:
        d = read_config(a.hf_dir)
        w = read_weights(a.hf_dir)
        bf16 = a.dtype == "bf16" or (a.dtype == "auto" and w and all(tag == "BF16" for _, tag, _ in w.values()))
        t = gather(d, w, bf16)
        write_llmc(a.out, d, t, bf16)
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("imported %s (L=%d, C=%d, heads %d, vocab %d padded to %d, max seq %d) to %s (version %d, %s)" %
          (a.hf_dir, d["L"], d["C"], d["NH"], d["V"], d["Vp"], d["maxT"], a.out, 5 if bf16 else 3, "bf16" if bf16 else "fp32"))


if __name__ == "__main__":
    main()
