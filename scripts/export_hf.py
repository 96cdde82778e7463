#!/usr/bin/env python3
"""export_hf.py: a model file (or the newest checkpoint of a trainer's out dir) to a Hugging Face directory
that AutoModelForCausalLM and AutoTokenizer load as they are: GPT2LMHeadModel from an llm.c GPT-2 file,
LlamaForCausalLM (Qwen2ForCausalLM with q/k/v bias, Qwen3ForCausalLM with qk-norm) from a Llama-family file.

    scripts/export_hf.py IN OUT_DIR [--tokenizer tokenizer.json|DIR]
                         [--encoder gpt2_encoder.json --merges gpt2_vocab.bpe] [--no-tokenizer] [--overwrite]

IN: a model file or an out dir (-o of train_gpt), whose newest complete checkpoint (model_SSSSSSSS.bin beside
its state_SSSSSSSS.bin) is taken; the file's magic says which family it is. OUT_DIR gets config.json and
model.safetensors.
GPT-2 (llm.c version 3 fp32 or 5 bf16): the tensors in the file's own precision (F32 or BF16); the padded
vocabulary rows dropped; no lm_head.weight, since GPT-2 ties it to wte and transformers fills it from there.
For GPT-2's 50257-token vocabulary the tokenizer is written too: vocab.json and merges.txt are OpenAI's
encoder.json and vocab.bpe (the files scripts/tinyshakespeare.sh fetches; looked for in data/ and
../shared/data unless given).
Llama family (magic 20261126): F32 tensors under Hugging Face's names; the padded vocabulary rows dropped;
lm_head.weight only when untied; config.json has every field transformers reads (head_dim, rms_norm_eps,
rope_theta, rope_scaling for llama3 and the same RoPE as rope_parameters (transformers 5.x's form; 4.x reads
the former, 5.x the latter), tie_word_embeddings, num_key_value_heads, intermediate_size; floats
as the shortest decimal that reads back as the file's float32). bos/eos token ids are not in the model
file: config.json has them null unless the tokenizer's tokenizer_config.json names the tokens.
--tokenizer copies a tokenizer beside the model: a tokenizer.json file (then a minimal tokenizer_config.json
is written), or a directory (a Hugging Face model's, say) whose tokenizer.json, tokenizer_config.json,
special_tokens_map.json and tokenizer.model are copied. For GPT-2 it comes in addition to vocab.json and
merges.txt when those are found.
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
from llmc_llama import LLAMA_MAGIC, LLMC3_MAGIC, f32_json, read_llama  # noqa: E402

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
        "hidden_act": "silu", "max_position_embeddings": d["maxT"], "rms_norm_eps": f32_json(d["eps"]),
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
    src = {} if a.no_tokenizer or not a.tokenizer else tokenizer_sources(a.tokenizer)
    special = special_ids(src, d["V"]) if src else {}

    def write(tmp):
        write_safetensors(os.path.join(tmp, "model.safetensors"), llama_tensors(d, t), {"format": "pt"})
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(llama_config(d, mt, arch, special), f, indent=2)
            f.write("\n")
        if src:
            copy_tokenizer(tmp, src, d["maxT"], {"tokenizer_class": "PreTrainedTokenizerFast"})
    write_dir(out, write)
    print("exported %s (%s: L=%d, C=%d, heads %d, kv heads %d, head_dim %d, MLP %d, vocab %d, %s) to %s%s" % (
        path, arch, d["L"], d["C"], d["NH"], d["KV"], d["hd"], d["H"], d["V"], "tied" if d["tied"] else "untied",
        a.out_dir, " with the tokenizer" if src else " (no tokenizer files: give --tokenizer)"))


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
                    "copied beside the model")
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
        gpt2_vocab = not a.no_tokenizer and d["V"] == GPT2_VOCAB
        src = {} if a.no_tokenizer or not a.tokenizer else tokenizer_sources(a.tokenizer)
        if src:
            tokenizer_json_ids(src["tokenizer.json"], d["V"])
        enc = mer = None
        if gpt2_vocab:
            enc = find_tokenizer_file(a.encoder, "gpt2_encoder.json", "--encoder", not src)
            mer = find_tokenizer_file(a.merges, "gpt2_vocab.bpe", "--merges", not src)
        tok = bool(src) or bool(enc and mer)

        def write(tmp):
            write_safetensors(os.path.join(tmp, "model.safetensors"), hf_tensors(d, t, bf16), {"format": "pt"})
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(hf_config(d, bf16), f, indent=2)
                f.write("\n")
            if enc and mer:
                write_tokenizer(tmp, d, enc, mer)
            if src:
                copy_tokenizer(tmp, src, d["maxT"], {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False,
                                                     "bos_token": EOT, "eos_token": EOT, "unk_token": EOT})
        write_dir(out, write)
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("exported %s (L=%d, C=%d, heads %d, vocab %d, %s) to %s%s" %
          (path, d["L"], d["C"], d["NH"], d["V"], "bf16" if bf16 else "fp32", a.out_dir,
           "" if tok else " (no tokenizer files: %s)" % ("--no-tokenizer" if a.no_tokenizer else "not GPT-2's vocabulary")))


if __name__ == "__main__":
    main()
