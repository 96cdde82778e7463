#!/usr/bin/env python3
"""import_hf.py: a Hugging Face model directory to a model file that train_gpt starts from with -e:
GPT-2 (GPT2LMHeadModel or GPT2Model; gpt2 through gpt2-xl or any other shape of the same architecture) to an
llm.c model file, and the Llama family (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) to the
trainer's Llama-family model file (magic 20261126, fp32; docs/huggingface.md).

    scripts/import_hf.py HF_DIR OUT.bin [--dtype auto|fp32|bf16]

HF_DIR holds config.json and the weights: model.safetensors, a sharded model.safetensors.index.json, or
PyTorch's pytorch_model.bin (or its sharded pytorch_model.bin.index.json; those need torch to read).
GPT-2: names with or without the "transformer." prefix are accepted; the attention-mask buffers older
checkpoints carry (attn.bias, attn.masked_bias) are skipped; lm_head.weight must equal wte (GPT-2 ties them;
llm.c has no separate head). The vocabulary is padded to a multiple of 128 with zero rows, as llm.c does.
--dtype auto writes version 5 (bf16) when every tensor is bf16 and version 3 (fp32) otherwise.
Llama family: every tensor is widened to fp32 exactly (bf16 and fp16 sources included); the vocabulary is
padded to a multiple of 128 with zero rows; q and k rows are kept in Hugging Face's rotate-half order.
Options the file cannot express are refused, naming the config.json field: hidden_act other than silu,
attention_bias (it also puts a bias on o_proj), mlp_bias, a rope_type other than default/llama3, a key
inside rope_parameters or rope_scaling that is not understood, partial_rotary_factor, use_sliding_window,
layer_types other than full_attention, an odd head_dim, num_attention_heads not divisible by num_key_value_heads.
RoPE's θ and Llama 3.1's scaling are read from either form transformers writes: 4.x's top-level rope_theta and
rope_scaling, 5.x's rope_parameters; a config holding both must say the same in both. A field left out gets
the default the model type's transformers config class gives it (LLAMA_DEFAULTS; docs/huggingface.md).
Checked before anything is written: the architecture and its options in config.json, every tensor's shape
against config.json, missing and unknown tensors, and truncated files; each error names the file and the
field. The output is written to a temporary name, flushed and renamed. Needs only numpy (and torch for
pytorch_model.bin).
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:  # numpy is the scripts' one dependency: say so, not a traceback
    sys.exit("error: import_hf.py needs numpy: pip install numpy (or apt-get install python3-numpy)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_hf import (HFError, LAYER_MAP, LLMC_TENSORS, OUTER_MAP, bf16_to_f32, f32_to_bf16, padded_vocab,  # noqa: E402
                     read_safetensors, write_llmc)
from llmc_llama import HF_ACTS, MLP_NAMES, check_dims, f32, write_llama  # noqa: E402

BUFFERS = ("attn.bias", "attn.masked_bias")  # causal-mask buffers, not weights


def load_config(hf_dir):
    path = os.path.join(hf_dir, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except OSError as e:
        raise HFError("%s: cannot open: %s (expected a Hugging Face model directory)" % (path, e.strerror))
    except ValueError as e:
        raise HFError("%s: not valid JSON (%s)" % (path, e))
    if not isinstance(c, dict):
        raise HFError("%s: not a JSON object" % path)
    return path, c


def read_config(path, c):
    def want(field, ok, expected, default=None):
        v = c.get(field, default)
        if not ok(v):
            raise HFError("%s: %s is %s, expected %s (llm.c's GPT-2 has no other)" % (path, field, json.dumps(v), expected))
        return v
    if c.get("model_type") != "gpt2":
        raise HFError("%s: model_type is %s, expected one of \"gpt2\", %s (architectures %s; supported: GPT2LMHeadModel, %s)"
                      % (path, json.dumps(c.get("model_type")), ", ".join('"%s"' % k for k in LLAMA_TYPES),
                         json.dumps(c.get("architectures")), ", ".join(LLAMA_TYPES.values())))
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
    st, idx, pt, ptidx = (os.path.join(hf_dir, n) for n in ("model.safetensors", "model.safetensors.index.json",
                                                            "pytorch_model.bin", "pytorch_model.bin.index.json"))
    if os.path.exists(st):
        files = [st]
    elif os.path.exists(idx):
        files = index_files(idx)
    elif os.path.exists(pt):
        return read_torch(pt)
    elif os.path.exists(ptidx):
        out = {}
        for p in index_files(ptidx):
            out.update(read_torch(p))
        return out
    else:
        raise HFError("%s: no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                      "pytorch_model.bin.index.json" % hf_dir)
    out = {}
    for p in files:
        for name, (a, tag) in read_safetensors(p).items():
            out[strip(name)] = (a, tag, p)
    return out


def index_files(idx):
    """The shard files a sharded checkpoint's index names (every one must exist)."""
    try:
        with open(idx) as f:
            files = sorted(set(os.path.join(os.path.dirname(idx), v) for v in json.load(f)["weight_map"].values()))
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        raise HFError("%s: weight_map unreadable (%s)" % (idx, e))
    for p in files:
        if not os.path.exists(p):
            raise HFError("%s: names shard %s, which is missing" % (idx, os.path.basename(p)))
    return files


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
        if not isinstance(v, torch.Tensor):
            continue
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


# ---------------------------------------------------------------- the Llama family

LLAMA_TYPES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
# transformers' defaults for the fields a config.json may leave out, as its config classes apply them when they load
# the file: LlamaConfig and Qwen2Config (the same values in 4.45 and 5.x) and Qwen3Config (5.x; 4.45 has no Qwen 3).
# num_key_value_heads None means num_attention_heads; head_dim None means hidden_size / num_attention_heads (Qwen 2
# has no head_dim field: always that); rope_theta is 5.x's RotaryEmbeddingConfigMixin.default_theta, 4.45's argument.
_LLAMA_COMMON = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_act": "silu",
                 "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False, "head_dim": None}
LLAMA_DEFAULTS = {
    "llama": dict(_LLAMA_COMMON, vocab_size=32000, intermediate_size=11008, max_position_embeddings=2048,
                  num_key_value_heads=None),
    "qwen2": dict(_LLAMA_COMMON, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768,
                  num_key_value_heads=32),
    "qwen3": dict(_LLAMA_COMMON, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768,
                  num_key_value_heads=32, head_dim=128),
}
ROTARY_BUFFER = "self_attn.rotary_emb.inv_freq"  # a buffer older Llama checkpoints carry, not a weight
# the keys a RoPE dictionary may hold, per rope_type (transformers 5.x's _validate_*_rope_parameters); "type" is
# the older spelling of rope_type
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
ROPE_KEYS = {"default": {"rope_type", "type", "rope_theta"},
             "llama3": {"rope_type", "type", "rope_theta"} | set(LLAMA3_KEYS)}


def read_rope(path, c, maxT, refuse):
    """(theta, rope_scaling, factor, low, high, original max positions) from either form transformers writes:
    4.x's top-level rope_theta and rope_scaling, or 5.x's rope_parameters (rope_theta and the scaling inside it).
    5.x reads a non-empty legacy rope_scaling in place of rope_parameters and a top-level rope_theta where the dict
    has none; 4.x reads only the legacy keys. So a config that holds both forms must say the same in both (what
    export_hf.py writes), or it is refused: no version's reading is guessed. A key or rope_type not understood is
    refused by name, never defaulted."""
    dflt_theta = c.get("rope_theta", LLAMA_DEFAULTS[c["model_type"]]["rope_theta"])

    def parse(r, name, theta, orig_default):
        if not isinstance(r, dict):
            refuse(name, r, "expected null or an object")
        rt = r.get("rope_type", r.get("type", "default"))
        if "type" in r and "rope_type" in r and r["type"] != r["rope_type"]:
            refuse(name + ".type", r["type"], "differs from its rope_type %s" % json.dumps(r["rope_type"]))
        if rt not in ROPE_KEYS:
            refuse(name + ".rope_type", rt, "only \"default\" or \"llama3\" (Llama 3.1's scaling)")
        allowed = ROPE_KEYS[rt] - ({"rope_theta"} if name == "rope_scaling" else set())
        for k in r:
            if k == "partial_rotary_factor" and r[k] == 1.0:
                continue
            if k not in allowed:
                refuse(name + "." + k, r[k], "not understood for rope_type \"%s\" (it reads %s)" % (rt, ", ".join(sorted(allowed))))
        theta = r.get("rope_theta", theta)
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
            refuse(name + ".rope_theta" if "rope_theta" in r else "rope_theta", theta, "expected a positive number")
        if rt == "default":
            return (f32(theta), 0, 0.0, 0.0, 0.0, 0)
        v = {k: r.get(k, orig_default if k == "original_max_position_embeddings" else None) for k in LLAMA3_KEYS}
        for k in LLAMA3_KEYS:
            ok = isinstance(v[k], int) and v[k] > 0 if k == LLAMA3_KEYS[3] else (
                isinstance(v[k], (int, float)) and not isinstance(v[k], bool) and v[k] > 0)
            if not ok:
                refuse(name + "." + k, v[k], "llama3 scaling needs a positive %s" % ("integer" if k == LLAMA3_KEYS[3] else "number"))
        return (f32(theta), 1, f32(v["factor"]), f32(v["low_freq_factor"]), f32(v["high_freq_factor"]),
                v["original_max_position_embeddings"])
    views = []
    if c.get("rope_parameters") is not None:
        # 5.x: original_max_position_embeddings defaults to max_position_embeddings (standardize_rope_params)
        views.append(("rope_parameters", parse(c["rope_parameters"], "rope_parameters", dflt_theta, maxT)))
    if not views or "rope_theta" in c or c.get("rope_scaling"):
        rs = c.get("rope_scaling")  # 4.x requires original_max_position_embeddings for llama3
        views.append(("rope_theta and rope_scaling", parse({} if rs is None else rs, "rope_scaling", dflt_theta, None)))
    if len(views) == 2 and views[0][1] != views[1][1]:
        raise HFError("%s: rope_parameters %s and the top-level rope_theta %s / rope_scaling %s disagree: transformers "
                      "4.x reads the latter, 5.x %s; make them the same" % (
                          path, json.dumps(c["rope_parameters"]), json.dumps(c.get("rope_theta")),
                          json.dumps(c.get("rope_scaling")), "the legacy rope_scaling first" if c.get("rope_scaling")
                          else "rope_parameters"))
    return views[0][1]


def read_llama_config(path, c):
    """dims of the Llama-family file from config.json; every option it cannot express is an error naming the field."""
    mt = c["model_type"]
    arch = c.get("architectures") or [LLAMA_TYPES[mt]]
    if arch != [LLAMA_TYPES[mt]]:
        raise HFError("%s: architectures is %s, expected [\"%s\"] for model_type \"%s\"" % (path, json.dumps(arch), LLAMA_TYPES[mt], mt))
    dflt = LLAMA_DEFAULTS[mt]

    def get(field, default=None):
        return c.get(field, dflt.get(field, default))

    def refuse(field, v, why):
        raise HFError("%s: %s is %s: %s (not supported by the Llama-family file)" % (path, field, json.dumps(v), why))
    d = {}
    for field, k in (("vocab_size", "V"), ("hidden_size", "C"), ("intermediate_size", "H"), ("num_hidden_layers", "L"),
                     ("num_attention_heads", "NH"), ("max_position_embeddings", "maxT")):
        v = get(field)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise HFError("%s: %s is %s, expected a positive integer" % (path, field, json.dumps(v)))
        d[k] = v
    kv = get("num_key_value_heads")
    d["KV"] = d["NH"] if kv is None else kv
    if not isinstance(d["KV"], int) or d["KV"] <= 0 or d["NH"] % d["KV"]:
        raise HFError("%s: num_key_value_heads is %s, expected a positive integer dividing num_attention_heads %d"
                      % (path, json.dumps(kv), d["NH"]))
    hd = get("head_dim") if mt != "qwen2" else None
    if hd is None:
        hd = d["C"] // d["NH"]
        if d["C"] % d["NH"]:
            raise HFError("%s: hidden_size %d is not divisible by num_attention_heads %d and there is no head_dim"
                          % (path, d["C"], d["NH"]))
    if not isinstance(hd, int) or hd <= 0:
        raise HFError("%s: head_dim is %s, expected a positive integer" % (path, json.dumps(hd)))
    if hd % 2:
        refuse("head_dim", hd, "odd; RoPE rotates pairs of channels")
    if mt == "qwen2" and c.get("head_dim") not in (None, hd):
        refuse("head_dim", c["head_dim"], "Qwen2ForCausalLM (transformers 4.45) uses hidden_size / num_attention_heads = %s"
               % (d["C"] / d["NH"]))
    d["hd"] = hd
    act = get("hidden_act")
    acts = {v: k for k, v in HF_ACTS.items()}  # the gated MLPs the file stores: SwiGLU, GeGLU
    if act not in acts:
        refuse("hidden_act", act, "the MLP is gated, expected \"silu\" (SwiGLU) or \"gelu_pytorch_tanh\" (GeGLU)")
    d["mlp"] = MLP_NAMES.index(acts[act])
    if mt in ("llama", "qwen3") and c.get("attention_bias", False):
        refuse("attention_bias", True, "%s then puts a bias on q, k, v and o_proj; only q/k/v biases (Qwen2ForCausalLM) are"
               % LLAMA_TYPES[mt])
    if c.get("mlp_bias", False):
        refuse("mlp_bias", True, "the MLP has no biases")
    if c.get("use_sliding_window", False):
        refuse("use_sliding_window", True, "attention is full and causal, no sliding window")
    lt = c.get("layer_types")  # 5.x's Qwen configs list each layer's attention
    if lt is not None and (not isinstance(lt, list) or any(t != "full_attention" for t in lt)):
        refuse("layer_types", lt, "attention is full and causal in every layer (\"full_attention\")")
    prf = c.get("partial_rotary_factor", 1.0)
    if prf != 1.0:
        refuse("partial_rotary_factor", prf, "RoPE covers the whole head")
    # pretraining_tp > 1 only slices the same matmuls, so it is accepted as it is
    tied = get("tie_word_embeddings")
    if not isinstance(tied, bool):
        refuse("tie_word_embeddings", tied, "expected true or false")
    d["tied"] = int(tied)
    d["qkv_bias"] = int(mt == "qwen2")
    d["qk_norm"] = int(mt == "qwen3")
    eps = get("rms_norm_eps")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        refuse("rms_norm_eps", eps, "expected a positive number")
    d["eps"] = f32(eps)
    keys = ("theta", "rope_scaling", "rope_factor", "rope_low", "rope_high", "rope_orig")
    d.update(zip(keys, read_rope(path, c, d["maxT"], refuse)))
    d["Vp"] = padded_vocab(d["V"])
    d["mt"] = mt
    check_dims(d, path)
    return d


def as_fp32(a, tag):
    if tag == "BF16":
        return bf16_to_f32(np.asarray(a))
    return np.asarray(a, dtype=np.float32)


class Layers:
    """Per-layer tensors made one at a time as the writer asks for them: a model is never held whole in fp32."""

    def __init__(self, thunks):
        self.thunks = thunks

    def __len__(self):
        return len(self.thunks)

    def __iter__(self):
        return (f() for f in self.thunks)


def gather_llama(path, d, w):
    """The Llama-family tensors from the Hugging Face ones (names with or without "model."). Every name and shape
    is checked here, before anything is written; the per-layer tensors are converted while writing."""
    used = set()

    def get(name, shape):
        for n in (name, "model." + name):
            if n in w:
                a, tag, p = w[n]
                if tuple(a.shape) != tuple(shape):
                    raise HFError("%s: tensor '%s' has shape %s, config.json implies %s" % (p, n, list(a.shape), list(shape)))
                used.add(n)
                return lambda: as_fp32(a, tag)
        raise HFError("%s: tensor '%s' is missing (config.json: %s)" % (
            next(iter(w.values()))[2] if w else path, "model." + name if not name.startswith("lm_head") else name, path))

    def cat(*parts):
        return lambda: np.concatenate([f() for f in parts])
    L, C, V, hd, H, NH, KV = d["L"], d["C"], d["V"], d["hd"], d["H"], d["NH"], d["KV"]

    def padded(a):
        out = np.zeros((d["Vp"], C), dtype=np.float32)
        out[:V] = a
        return out

    def layers(fn):
        return Layers([fn("layers.%d." % i) for i in range(L)])
    t = {"wte": padded(get("embed_tokens.weight", (V, C))())}
    t["attn_norm"] = layers(lambda p: get(p + "input_layernorm.weight", (C,)))
    t["wqkv"] = layers(lambda p: cat(get(p + "self_attn.q_proj.weight", (NH * hd, C)), get(p + "self_attn.k_proj.weight", (KV * hd, C)),
                                     get(p + "self_attn.v_proj.weight", (KV * hd, C))))
    if d["qkv_bias"]:
        t["bqkv"] = layers(lambda p: cat(get(p + "self_attn.q_proj.bias", (NH * hd,)), get(p + "self_attn.k_proj.bias", (KV * hd,)),
                                         get(p + "self_attn.v_proj.bias", (KV * hd,))))
    if d["qk_norm"]:
        t["q_norm"] = layers(lambda p: get(p + "self_attn.q_norm.weight", (hd,)))
        t["k_norm"] = layers(lambda p: get(p + "self_attn.k_norm.weight", (hd,)))
    t["wo"] = layers(lambda p: get(p + "self_attn.o_proj.weight", (C, NH * hd)))
    t["mlp_norm"] = layers(lambda p: get(p + "post_attention_layernorm.weight", (C,)))
    # up_proj's rows first, then gate_proj's: the second half feeds SiLU, as in llm.c's llama3 files
    t["wfc"] = layers(lambda p: cat(get(p + "mlp.up_proj.weight", (H, C)), get(p + "mlp.gate_proj.weight", (H, C))))
    t["wproj"] = layers(lambda p: get(p + "mlp.down_proj.weight", (C, H)))
    t["final_norm"] = get("norm.weight", (C,))()
    if d["tied"]:
        if "lm_head.weight" in w:  # some tied checkpoints store the head too; transformers ignores it
            a, tag, p = w["lm_head.weight"]
            if tuple(a.shape) != (V, C) or not np.array_equal(as_fp32(a, tag), t["wte"][:V]):
                raise HFError("%s: lm_head.weight differs from model.embed_tokens.weight but config.json (%s) says "
                              "tie_word_embeddings true" % (p, path))
            used.add("lm_head.weight")
    else:
        t["lm_head"] = padded(get("lm_head.weight", (V, C))())
    for name, (a, tag, p) in w.items():
        if name in used or name.endswith(ROTARY_BUFFER):
            continue
        raise HFError("%s: unexpected tensor '%s' (not part of %s with the options of %s)"
                      % (p, name, LLAMA_TYPES[d["mt"]], path))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=("auto", "fp32", "bf16"), default="auto",
                    help="auto: bf16 (version 5) if every tensor is bf16, else fp32 (version 3)")
    a = ap.parse_args()
    try:
        path, c = load_config(a.hf_dir)
        if c.get("model_type") in LLAMA_TYPES:
            return main_llama(a, path, c)
        d = read_config(path, c)
        w = read_weights(a.hf_dir)
        bf16 = a.dtype == "bf16" or (a.dtype == "auto" and w and all(tag == "BF16" for _, tag, _ in w.values()))
        t = gather(d, w, bf16)
        write_llmc(a.out, d, t, bf16)
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("imported %s (L=%d, C=%d, heads %d, vocab %d padded to %d, max seq %d) to %s (version %d, %s)" %
          (a.hf_dir, d["L"], d["C"], d["NH"], d["V"], d["Vp"], d["maxT"], a.out, 5 if bf16 else 3, "bf16" if bf16 else "fp32"))


def main_llama(a, path, c):
    if a.dtype == "bf16":
        raise HFError("--dtype bf16: the Llama-family file holds fp32 tensors only (version 1)")
    d = read_llama_config(path, c)
    w = read_weights(a.hf_dir)
    t = gather_llama(path, d, w)
    write_llama(a.out, d, t)
    print("imported %s (%s: L=%d, C=%d, heads %d, kv heads %d, head_dim %d, MLP %d, vocab %d padded to %d, max seq %d, "
          "%s%s%s%s) to %s (Llama-family file, fp32)" % (
              a.hf_dir, LLAMA_TYPES[d["mt"]], d["L"], d["C"], d["NH"], d["KV"], d["hd"], d["H"], d["V"], d["Vp"], d["maxT"],
              "tied" if d["tied"] else "untied", ", q/k/v bias" if d["qkv_bias"] else "", ", qk-norm" if d["qk_norm"] else "",
              ", llama3 RoPE scaling" if d["rope_scaling"] else "", a.out))


if __name__ == "__main__":
    main()
