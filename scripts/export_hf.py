#!/usr/bin/env python3
"""export_hf.py: a model file (or the newest checkpoint of a trainer's out dir) to a Hugging Face directory
that AutoModelForCausalLM and AutoTokenizer load as they are: GPT2LMHeadModel from an llm.c GPT-2 file,
LlamaForCausalLM (Qwen2ForCausalLM with q/k/v bias, Qwen3ForCausalLM with qk-norm) from a Llama-family file.

    scripts/export_hf.py IN OUT_DIR [--tokenizer tokenizer.json|DIR|tokenizer.bin]
                         [--encoder gpt2_encoder.json --merges gpt2_vocab.bpe] [--no-tokenizer] [--overwrite]

IN: a model file or an out dir (-o of train_gpt), whose newest complete checkpoint (model_SSSSSSSS.bin beside
its state_SSSSSSSS.bin) is taken; the file's magic says which family it is. OUT_DIR gets config.json and
model.safetensors.
GPT-2 (llm.c version 3 fp32 or 5 bf16): the tensors in the file's own precision (F32 or BF16); the padded
vocabulary rows dropped; no lm_head.weight, since GPT-2 ties it to wte and transformers fills it from there.
Llama family (magic 20261126): F32 tensors under Hugging Face's names; the padded vocabulary rows dropped;
lm_head.weight only when untied; config.json has every field transformers reads (head_dim, rms_norm_eps,
rope_theta, rope_scaling for llama3 and the same RoPE as rope_parameters (transformers 5.x's form; 4.x reads
the former, 5.x the latter), tie_word_embeddings, num_key_value_heads, intermediate_size; floats
as the shortest decimal that reads back as the file's float32). bos/eos token ids are not in the model
file: config.json has them null unless the tokenizer's tokenizer_config.json names the tokens.
Every export gets a tokenizer that AutoTokenizer loads and that encodes as the training data was encoded
(either family), or the export is refused unless --no-tokenizer:
  --tokenizer tokenizer.json: copied (with a minimal tokenizer_config.json); a directory (a Hugging Face
    model's, say): its tokenizer.json, tokenizer_config.json, special_tokens_map.json and tokenizer.model;
  --tokenizer tokenizer.bin (llm.c's, or a directory holding one; the run's): it holds the tokens' bytes but no
    merges, so it cannot encode; the tokenizer.json beside it (./tokenize shards leaves one) is taken when its
    vocabulary is the same, else for GPT-2's 50257 tokens GPT-2's files once the .bin's tokens are checked
    against encoder.json; otherwise an error says what to give;
  without --tokenizer, a vocabulary of GPT-2's 50257 tokens gets vocab.json and merges.txt, OpenAI's
    encoder.json and vocab.bpe (--encoder/--merges, or data/ and ../shared/data where
    scripts/tinyshakespeare.sh leaves them), bos/eos 50256 in config.json.
Everything is written to a temporary directory beside OUT_DIR and renamed into place at the end. Needs
only numpy.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # numpy is the scripts' one dependency: say so, not a traceback
    sys.exit("error: export_hf.py needs numpy: pip install numpy (or apt-get install python3-numpy)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_hf import HFError, LAYER_MAP, OUTER_MAP, latest_checkpoint, read_llmc, write_safetensors  # noqa: E402
from llmc_llama import HF_ACTS, LLAMA_MAGIC, LLMC3_MAGIC, MLP_NAMES, f32_json, read_llama  # noqa: E402

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


# ---------------------------------------------------------------- the Llama family

def llama_arch(d, path):
    """Which Hugging Face class holds the file's options exactly."""
    mlp = MLP_NAMES[d["mlp"]]
    if mlp not in HF_ACTS:  # GeGLU is LlamaMLP with gelu_pytorch_tanh; GemmaForCausalLM would add (1 + w) norms and sqrt(C)
        raise HFError("%s: the MLP's activation is %s (header slot 21 = %d), without a gate: transformers' Llama-family "
                      "MLP is gated, down(act(gate x) * up x), and no class computes %s in its place"
                      % (path, mlp, d["mlp"], mlp))
    if d["qkv_bias"] and d["qk_norm"]:
        raise HFError("%s: q/k/v bias and qk-norm together: no transformers class has exactly that (Qwen3ForCausalLM's "
                      "attention_bias also puts a bias on o_proj)" % path)
    if d["qkv_bias"]:
        if d["hd"] * d["NH"] != d["C"]:
            raise HFError("%s: q/k/v bias with head_dim %d != n_embd / n_head = %d / %d: Qwen2ForCausalLM (transformers 4.45) "
                          "derives head_dim from hidden_size" % (path, d["hd"], d["C"], d["NH"]))
        return "qwen2", "Qwen2ForCausalLM"
    if d["qk_norm"]:
        return "qwen3", "Qwen3ForCausalLM"
    return "llama", "LlamaForCausalLM"


def llama_config(d, mt, arch, special):
    c = {
        "architectures": [arch], "model_type": mt,
        "vocab_size": d["V"], "hidden_size": d["C"], "intermediate_size": d["H"], "num_hidden_layers": d["L"],
        "num_attention_heads": d["NH"], "num_key_value_heads": d["KV"], "head_dim": d["hd"],
        "hidden_act": HF_ACTS[MLP_NAMES[d["mlp"]]], "max_position_embeddings": d["maxT"], "rms_norm_eps": f32_json(d["eps"]),
        "rope_theta": f32_json(d["theta"]), "rope_scaling": None, "tie_word_embeddings": bool(d["tied"]),
        "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True,
        "bos_token_id": special.get("bos"), "eos_token_id": special.get("eos"), "torch_dtype": "float32",
    }
    # RoPE in both forms, saying the same: transformers 4.x reads only rope_theta and rope_scaling (it keeps
    # rope_parameters as an unused attribute); 5.x reads rope_parameters, a non-empty rope_scaling in its place, and
    # rope_theta where the dict has none, so it finds the same values whichever it takes.
    c["rope_parameters"] = {"rope_theta": c["rope_theta"], "rope_type": "default"}
    if d["rope_scaling"]:
        c["rope_scaling"] = {"rope_type": "llama3", "factor": f32_json(d["rope_factor"]),
                             "low_freq_factor": f32_json(d["rope_low"]), "high_freq_factor": f32_json(d["rope_high"]),
                             "original_max_position_embeddings": d["rope_orig"]}
        c["rope_parameters"] = dict(c["rope_scaling"], rope_theta=c["rope_theta"])
    if mt == "llama":
        c.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    else:
        c.update(use_sliding_window=False, sliding_window=None, max_window_layers=d["L"])
        if mt == "qwen3":
            c["attention_bias"] = False
        else:
            del c["head_dim"]  # Qwen2ForCausalLM derives it (hidden_size / num_attention_heads, checked above)
    return c


def llama_tensors(d, t):
    """(name, array, "F32") in Hugging Face's names: outer tensors, then layer by layer."""
    V, NH, KV, hd, H = d["V"], d["NH"], d["KV"], d["hd"], d["H"]
    pads = [t["wte"][V:]] + ([t["lm_head"][V:]] if not d["tied"] else [])
    if any(p.size and np.any(p != 0) for p in pads):
        print("note: the padded vocabulary rows %d..%d are not zero; dropped all the same" % (V, d["Vp"] - 1))
    out = [("model.embed_tokens.weight", t["wte"][:V])]
    q, k = NH * hd, KV * hd
    for i in range(d["L"]):
        p = "model.layers.%d." % i
        w = t["wqkv"][i]
        out += [(p + "input_layernorm.weight", t["attn_norm"][i]), (p + "self_attn.q_proj.weight", w[:q]),
                (p + "self_attn.k_proj.weight", w[q:q + k]), (p + "self_attn.v_proj.weight", w[q + k:])]
        if d["qkv_bias"]:
            b = t["bqkv"][i]
            out += [(p + "self_attn.q_proj.bias", b[:q]), (p + "self_attn.k_proj.bias", b[q:q + k]),
                    (p + "self_attn.v_proj.bias", b[q + k:])]
        if d["qk_norm"]:
            out += [(p + "self_attn.q_norm.weight", t["q_norm"][i]), (p + "self_attn.k_norm.weight", t["k_norm"][i])]
        fc = t["wfc"][i]  # up_proj's H rows, then gate_proj's
        out += [(p + "self_attn.o_proj.weight", t["wo"][i]), (p + "post_attention_layernorm.weight", t["mlp_norm"][i]),
                (p + "mlp.gate_proj.weight", fc[H:]), (p + "mlp.up_proj.weight", fc[:H]),
                (p + "mlp.down_proj.weight", t["wproj"][i])]
    out.append(("model.norm.weight", t["final_norm"]))
    if not d["tied"]:
        out.append(("lm_head.weight", t["lm_head"][:V]))
    return [(n, a, "F32") for n, a in out]


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")


def tokenizer_sources(given):
    """{file name: source path} of --tokenizer (a tokenizer.json, or a directory holding one)."""
    if os.path.isdir(given):
        src = {n: os.path.join(given, n) for n in TOKENIZER_FILES if os.path.isfile(os.path.join(given, n))}
        if "tokenizer.json" not in src:
            raise HFError("--tokenizer %s: the directory has no tokenizer.json" % given)
        return src
    if not os.path.isfile(given):
        raise HFError("--tokenizer %s: no such file or directory" % given)
    return {"tokenizer.json": given}


def tokenizer_json_ids(path, V):
    """Checks that every id of the tokenizer.json fits the model's vocabulary; returns {token: id} of its added tokens."""
    try:
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        vocab = tj["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HFError("--tokenizer %s: not a tokenizers tokenizer.json (%s)" % (path, e))
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    added = {a["content"]: a["id"] for a in tj.get("added_tokens") or []}
    top = max(ids + list(added.values()) + [-1])
    if top >= V:
        raise HFError("--tokenizer %s: token id %d, but the model's vocabulary has %d tokens" % (path, top, V))
    toks = dict(vocab) if isinstance(vocab, dict) else {}
    toks.update(added)
    return toks


def special_ids(src, V):
    """bos/eos ids for config.json from the tokenizer's tokenizer_config.json (when it names them)."""
    toks = tokenizer_json_ids(src["tokenizer.json"], V)
    out = {}
    if "tokenizer_config.json" in src:
        try:
            with open(src["tokenizer_config.json"], encoding="utf-8") as f:
                tc = json.load(f)
        except (OSError, ValueError) as e:
            raise HFError("--tokenizer %s: not JSON (%s)" % (src["tokenizer_config.json"], e))
        for k in ("bos", "eos"):
            v = tc.get(k + "_token")
            v = v.get("content") if isinstance(v, dict) else v
            if isinstance(v, str) and v in toks:
                out[k] = toks[v]
    return out


def copy_tokenizer(out, src, maxT, tc_default):
    for n, p in src.items():
        shutil.copyfile(p, os.path.join(out, n))
    if "tokenizer_config.json" not in src:
        tc = dict(tc_default, model_max_length=maxT)
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(tc, f, indent=2)


def export_llama(a, path, out):
    d, t = read_llama(path)
    mt, arch = llama_arch(d, path)
    tok = tokenizer_plan(a, d["V"], d["maxT"], {"tokenizer_class": "PreTrainedTokenizerFast"})

    def write(tmp):
        write_safetensors(os.path.join(tmp, "model.safetensors"), llama_tensors(d, t), {"format": "pt"})
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(llama_config(d, mt, arch, tok.special), f, indent=2)
            f.write("\n")
        tok.write(tmp)
    write_dir(out, write)
    print("exported %s (%s: L=%d, C=%d, heads %d, kv heads %d, head_dim %d, MLP %d, vocab %d, %s) to %s%s" % (
        path, arch, d["L"], d["C"], d["NH"], d["KV"], d["hd"], d["H"], d["V"], "tied" if d["tied"] else "untied",
        a.out_dir, tok.what))


def write_dir(out, write):
    """write(tmp) fills a temporary directory beside out, which is then renamed to out (replacing it)."""
    tmp = tempfile.mkdtemp(prefix=".export_hf.", dir=os.path.dirname(out))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary directory
    try:
        write(tmp)
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


def file_magic(path):
    try:
        with open(path, "rb") as f:
            raw = f.read(4)
    except OSError as e:
        raise HFError("%s: cannot open: %s (expected a model file)" % (path, e.strerror))
    return struct.unpack("<i", raw)[0] if len(raw) == 4 else None


# ---------------------------------------------------------------- GPT-2

def find_tokenizer_file(given, name, flag, required=True):
    if given:
        if not os.path.isfile(given):
            raise HFError("%s: %s: no such file" % (flag, given))
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    for d in ("data", os.path.join(here, "..", "data"), os.path.join(here, "..", "..", "shared", "data")):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    if not required:
        return None
    raise HFError("%s not found in data/ or ../shared/data: give %s (scripts/tinyshakespeare.sh fetches it), "
                  "or --no-tokenizer" % (name, flag))


LLMC_TOKENIZER_MAGIC = 20240328


def byte_decoder():
    """GPT-2's byte-level alphabet: the printable character standing for each byte, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def read_tokenizer_bin(path):
    """The token byte strings of an llm.c tokenizer.bin (version 1 or 2) and its end-of-text id."""
    with open(path, "rb") as f:
        raw = f.read()
    h = struct.unpack("<256I", raw[:1024]) if len(raw) >= 1024 else None
    if h is None or h[0] != LLMC_TOKENIZER_MAGIC or h[1] not in (1, 2):
        raise HFError("--tokenizer %s: not an llm.c tokenizer.bin (magic %d, version 1 or 2)" % (path, LLMC_TOKENIZER_MAGIC))
    toks, off = [], 1024
    for i in range(h[2]):
        n = raw[off] if off < len(raw) else 0
        if n == 0 or off + 1 + n > len(raw):
            raise HFError("--tokenizer %s: token %d runs past the end of the file (truncated?)" % (path, i))
        toks.append(raw[off + 1:off + 1 + n])
        off += 1 + n
    return toks, (h[3] if h[1] == 2 else 50256)


def json_vocab_bytes(vocab, added=()):
    """{id: bytes} of a byte-level BPE vocabulary (GPT-2's alphabet) plus added tokens (their UTF-8 text)."""
    dec = byte_decoder()
    out = {}
    for tokstr, i in vocab.items():
        out[i] = bytes(dec[ch] for ch in tokstr) if all(ch in dec for ch in tokstr) else tokstr.encode("utf-8")
    for a in added:
        out[a["id"]] = a["content"].encode("utf-8")
    return out


def same_vocabulary(toks, ids):
    """The first id whose bytes differ between a tokenizer.bin's tokens and {id: bytes}, or None."""
    for i, b in enumerate(toks):
        if ids.get(i) != b:
            return i
    return None if len(ids) == len(toks) else len(toks)


class Tokenizer:
    """What goes beside the model: write(tmp) writes the files, special the bos/eos ids for config.json, what the
    words the summary line ends with."""

    def __init__(self, write=lambda tmp: None, special=None, what=""):
        self.write, self.special, self.what = write, special or {}, what


def gpt2_files(a, V, maxT, why):
    """GPT-2's encoder.json and vocab.bpe (given, or from data/ or ../shared/data) for a model of GPT-2's vocabulary."""
    enc = find_tokenizer_file(a.encoder, "gpt2_encoder.json", "--encoder")
    mer = find_tokenizer_file(a.merges, "gpt2_vocab.bpe", "--merges")
    return enc, mer, Tokenizer(lambda tmp: write_tokenizer(tmp, {"V": V, "maxT": maxT}, enc, mer),
                               {"bos": V - 1, "eos": V - 1}, " with GPT-2's tokenizer (%s)" % why)


def tokenizer_from_bin(a, path, V, maxT, tc_default):
    """An llm.c tokenizer.bin holds the vocabulary's bytes only: not the merges, not the pre-tokenizer, so it cannot
    encode. What can: the tokenizer.json `./tokenize shards` copies beside it when it has the same vocabulary, or,
    for GPT-2's vocabulary, GPT-2's encoder.json and vocab.bpe once the .bin's tokens are checked to be theirs."""
    toks, eot = read_tokenizer_bin(path)
    if len(toks) != V:
        raise HFError("--tokenizer %s: %d tokens, but the model's vocabulary has %d" % (path, len(toks), V))
    beside = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer.json")
    if os.path.isfile(beside):
        try:
            with open(beside, encoding="utf-8") as f:
                tj = json.load(f)
            ids = json_vocab_bytes(tj["model"]["vocab"], tj.get("added_tokens") or [])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise HFError("%s (beside --tokenizer %s): not a byte-level BPE tokenizer.json (%s)" % (beside, path, e))
        bad = same_vocabulary(toks, ids)
        if bad is not None:
            raise HFError("--tokenizer %s: token %d differs from %s's (%r vs %r): not the tokenizer the .bin was written "
                          "from; give that tokenizer.json as --tokenizer" % (path, bad, beside, toks[bad] if bad < len(toks)
                                                                             else None, ids.get(bad)))
        return tokenizer_json_plan({"tokenizer.json": beside}, V, maxT, tc_default)
    if V == GPT2_VOCAB and eot == V - 1:
        enc = a.encoder or find_tokenizer_file(None, "gpt2_encoder.json", "--encoder", required=False)
        if not enc or not (a.merges or find_tokenizer_file(None, "gpt2_vocab.bpe", "--merges", required=False)):
            raise HFError("--tokenizer %s: an llm.c tokenizer.bin holds the tokens' bytes but not the merges, so it cannot "
                          "encode; its 50257 tokens look like GPT-2's: give --encoder gpt2_encoder.json --merges "
                          "gpt2_vocab.bpe (scripts/tinyshakespeare.sh fetches them) instead of it" % path)
        with open(find_tokenizer_file(enc, "gpt2_encoder.json", "--encoder"), encoding="utf-8") as f:
            bad = same_vocabulary(toks, json_vocab_bytes(json.load(f)))
        if bad is not None:
            raise HFError("--tokenizer %s: token %d is %r, not GPT-2's (%s): give the tokenizer.json the shards were "
                          "written with" % (path, bad, toks[bad], enc))
        return gpt2_files(a, V, maxT, "checked against %s" % path)[2]
    raise HFError("--tokenizer %s: an llm.c tokenizer.bin holds the tokens' bytes but not the merges or the "
                  "pre-tokenizer, so it cannot encode, and it is not GPT-2's: give the tokenizer.json the shards were "
                  "written with (./tokenize shards leaves a copy beside its tokenizer.bin)" % path)


def tokenizer_json_plan(src, V, maxT, tc_default):
    special = special_ids(src, V)
    return Tokenizer(lambda tmp: copy_tokenizer(tmp, src, maxT, tc_default), special, " with the tokenizer")


def tokenizer_plan(a, V, maxT, tc_default):
    """The tokenizer every export gets (any family): --tokenizer (a tokenizer.json, a directory holding one or a
    tokenizer.bin, or an llm.c tokenizer.bin), else GPT-2's files for GPT-2's vocabulary; with none of them an
    error, unless --no-tokenizer. Checked before anything is written."""
    if a.no_tokenizer:
        return Tokenizer(what=" (no tokenizer files: --no-tokenizer)")
    if a.tokenizer:
        given = a.tokenizer
        if os.path.isdir(given) and not os.path.isfile(os.path.join(given, "tokenizer.json")) \
                and os.path.isfile(os.path.join(given, "tokenizer.bin")):
            given = os.path.join(given, "tokenizer.bin")
        if os.path.isfile(given) and file_magic(given) == LLMC_TOKENIZER_MAGIC:
            return tokenizer_from_bin(a, given, V, maxT, tc_default)
        return tokenizer_json_plan(tokenizer_sources(given), V, maxT, tc_default)
    if V == GPT2_VOCAB or a.encoder or a.merges:  # given GPT-2's files for another vocabulary: refused when written
        return gpt2_files(a, V, maxT, "the model's vocabulary is GPT-2's 50257 tokens")[2]
    raise HFError("no tokenizer for a vocabulary of %d tokens: give --tokenizer (the tokenizer.json the training shards "
                  "were written with; ./tokenize shards leaves a copy beside them), or --no-tokenizer to export the "
                  "model alone" % V)


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="model file, or a train_gpt out dir (its newest checkpoint)")
    ap.add_argument("out_dir")
    ap.add_argument("--tokenizer", help="tokenizer.json, or a directory with tokenizer.json (and tokenizer_config.json ...), "
                    "copied beside the model; or the run's llm.c tokenizer.bin (see below)")
    ap.add_argument("--encoder", help="GPT-2 encoder.json (default: data/ or ../shared/data gpt2_encoder.json)")
    ap.add_argument("--merges", help="GPT-2 vocab.bpe (default: data/ or ../shared/data gpt2_vocab.bpe)")
    ap.add_argument("--no-tokenizer", action="store_true", help="write the model only")
    ap.add_argument("--overwrite", action="store_true", help="replace OUT_DIR if it exists")
    a = ap.parse_args()
    try:
        path = latest_checkpoint(a.input) if os.path.isdir(a.input) else a.input
        out = os.path.abspath(a.out_dir.rstrip("/"))
        if os.path.exists(out) and not a.overwrite:
            raise HFError("%s: exists (give --overwrite to replace it)" % a.out_dir)
        magic = file_magic(path)
        if magic == LLAMA_MAGIC:
            return export_llama(a, path, out)
        if magic == LLMC3_MAGIC:
            raise HFError("%s: an llm.c llama3-branch file (magic %d): convert it first with scripts/llmc_llama.py"
                          % (path, LLMC3_MAGIC))
        d, t, bf16 = read_llmc(path)
        tok = tokenizer_plan(a, d["V"], d["maxT"], {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False,
                                                    "bos_token": EOT, "eos_token": EOT, "unk_token": EOT})

        def write(tmp):
            write_safetensors(os.path.join(tmp, "model.safetensors"), hf_tensors(d, t, bf16), {"format": "pt"})
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(hf_config(d, bf16), f, indent=2)
                f.write("\n")
            tok.write(tmp)
        write_dir(out, write)
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("exported %s (L=%d, C=%d, heads %d, vocab %d, %s) to %s%s" %
          (path, d["L"], d["C"], d["NH"], d["V"], "bf16" if bf16 else "fp32", a.out_dir, tok.what))


if __name__ == "__main__":
    main()
