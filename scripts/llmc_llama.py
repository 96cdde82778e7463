#!/usr/bin/env python3
"""llmc_llama.py: the trainer's Llama-family model file (magic 20261126, version 1, fp32; the layout is in
docs/llama.md, "The model file"), shared by scripts/export_hf.py and scripts/import_hf.py, and a converter from llm.c's
`llama3` branch model files (magic 20240803) to it:

    scripts/llmc_llama.py IN.bin OUT.bin [--untie] [--rope-factor F --rope-low-freq-factor F
                                          --rope-high-freq-factor F --rope-original-max-position N]
                                         [--norm-eps E --ffn-dim-multiplier M]   (older writer's files)

IN is a file written by the llama3 branch's train_llama3.py (write_model) or train_llama3.cu: a 2,048-byte
header (256 int32, then 256 float32: ffn_dim_multiplier, norm_eps, rope_theta), then the tensors in GPT-2's
slots: wte, lm_head (in the wpe slot), the RMSNorm weights with zero "biases", c_attn (q, k, v rows) with a
zero bias, c_proj with a zero bias, fc (per layer c_fc = up_proj's rows, then c_fc2 = gate_proj's) with a zero
bias, the MLP's c_proj with a zero bias, ln_f with a zero bias; version 3 is fp32, version 5 bf16 (widened to
fp32 exactly). The converter
  - un-permutes each head's q and k rows from Meta's interleaved RoPE pairs to the rotate-half order that
    Hugging Face and this trainer use (the inverse of the permutation the branch applies when it loads a
    Hugging Face checkpoint);
  - takes the head from the wpe slot: a head that equals wte bit for bit (the branch writes tied Llama 3.2
    models as two copies) gives a tied file, unless --untie;
  - checks that every "bias" is zero (the branch's Llama uses none) and drops them;
  - computes the MLP's hidden size as the branch does: h = int(2 * 4C / 3), h = int(ffn_dim_multiplier * h),
    rounded up to a multiple of multiple_of, and checks it against the file's size;
  - with use_scaled_rope = 1 writes the RoPE scaling the branch computes (it always uses Llama 3.1's factor 8,
    low_freq_factor 1, high_freq_factor 4, original context 8192, also for Llama 3.2 models, whose Hugging Face
    config says factor 32); the --rope-* flags replace those values.

The older writer of the branch (August to September 13, 2024) put everything in one 1,024-byte int32 header
(ints [8..15]: ffn_dim_multiplier, multiple_of, norm_eps, rope_theta, use_scaled_rope, max_gen_batch_size,
major, minor version), where ffn_dim_multiplier (1.3 became 1) and norm_eps (1e-5 became 0) were truncated,
and laid its tensors out without the zero biases: wte, ln_1, c_attn, c_proj, ln_2, every layer's c_fc, every
layer's c_fc2, the MLP's c_proj, ln_f, lm_head. Such a file is refused by name unless the user supplies the
two lost values: --norm-eps and --ffn-dim-multiplier, as in the LlamaConfig of the train_llama3.py that wrote
it (Llama 3.1 8B: --norm-eps 1e-5 --ffn-dim-multiplier 1.3); each must truncate to what the header holds.
Alternatively write the checkpoint again with the branch's current write_model, which stores both as float32.

The output is written to a temporary name, flushed and renamed. Needs only numpy.
"""
import argparse
import os
import struct
import sys

try:
    import numpy as np
except ImportError:  # numpy is the scripts' one dependency: say so, not a traceback
    sys.exit(f"error: {os.path.basename(sys.argv[0])} needs numpy: pip install numpy (or apt-get install python3-numpy)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_hf import HFError, atomic_file, bf16_to_f32, open_model_file, padded_vocab  # noqa: E402

LLAMA_MAGIC = 20261126
LLAMA_VERSION = 1
LLMC3_MAGIC = 20240803
HEADER_BYTES = 1024

# header slots of the Llama-family file (docs/huggingface.md)
INT_SLOTS = [("maxT", 2), ("V", 3), ("Vp", 4), ("L", 5), ("NH", 6), ("KV", 7), ("C", 8), ("hd", 9), ("H", 10),
             ("tied", 11), ("qkv_bias", 12), ("qk_norm", 13), ("rope_scaling", 14)]
FLOAT_SLOTS = [("eps", 15), ("theta", 16), ("rope_factor", 17), ("rope_low", 18), ("rope_high", 19)]
ORIG_SLOT = 20  # rope original_max_position_embeddings (int)
MLP_SLOT = 21  # the MLP's activation: its value in arch/model_config.h's MLP_CHOICES order (0 in every older file)
MLP_NAMES = ["swiglu", "relu2", "gelu", "geglu"]  # slot 21's values, as --mlp spells them
MLP_GATED = {"swiglu", "geglu"}  # wfc is up | gate, 2H rows; the others' wfc is up alone, H rows
# transformers' name of the gate's activation for each gated MLP (LlamaMLP: down(act(gate x) * up x))
HF_ACTS = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh"}
# ReLU² exports as a gated MLP with gate_proj = up_proj and hidden_act "relu" (relu(u) u = relu(u)², export_hf.py)
HF_RELU2_ACT = "relu"
RESERVED_FROM = 22


def f32(x):
    """x as the nearest float32, returned as a Python float (what the file stores)."""
    return float(np.float32(x))


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", f32(x)))[0]


def bits_f32(i):
    return struct.unpack("<f", struct.pack("<i", i))[0]


def f32_json(x):
    """The shortest decimal that reads back as the same float32 (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(x)))


def llama_shapes(d):
    """(name, shape) of the file's tensors in order; options decide which are present."""
    L, C, hd, H = d["L"], d["C"], d["hd"], d["H"]
    qkv = (d["NH"] + 2 * d["KV"]) * hd
    s = [("wte", (d["Vp"], C)), ("attn_norm", (L, C)), ("wqkv", (L, qkv, C))]
    if d["qkv_bias"]:
        s.append(("bqkv", (L, qkv)))
    if d["qk_norm"]:
        s += [("q_norm", (L, hd)), ("k_norm", (L, hd))]
    fc = 2 * H if MLP_NAMES[d.get("mlp", 0)] in MLP_GATED else H
    s += [("wo", (L, C, d["NH"] * hd)), ("mlp_norm", (L, C)), ("wfc", (L, fc, C)), ("wproj", (L, C, H)),
          ("final_norm", (C,))]
    if not d["tied"]:
        s.append(("lm_head", (d["Vp"], C)))
    return s


def check_dims(d, where):
    """The constraints every reader and writer shares; each error names the field."""
    for k in ("maxT", "V", "Vp", "L", "NH", "KV", "C", "hd", "H"):
        if not isinstance(d[k], int) or d[k] <= 0:
            raise HFError("%s: %s is %s, expected a positive integer" % (where, k, d[k]))
    if d["Vp"] != padded_vocab(d["V"]):
        raise HFError("%s: padded_vocab_size %d, expected %d (vocab_size %d rounded up to a multiple of 128)"
                      % (where, d["Vp"], padded_vocab(d["V"]), d["V"]))
    if d["NH"] % d["KV"]:
        raise HFError("%s: n_head %d is not divisible by n_kv_head %d" % (where, d["NH"], d["KV"]))
    if d["hd"] % 2:
        raise HFError("%s: head_dim %d is odd; RoPE rotates pairs of channels" % (where, d["hd"]))
    for k in ("tied", "qkv_bias", "qk_norm", "rope_scaling"):
        if d[k] not in (0, 1):
            raise HFError("%s: %s is %s, expected 0 or 1" % (where, k, d[k]))
    if d.get("mlp", 0) not in range(len(MLP_NAMES)):
        raise HFError("%s: the MLP's activation (header slot 21) is %s, expected %s" % (
            where, d.get("mlp"), ", ".join("%d (%s)" % (i, n) for i, n in enumerate(MLP_NAMES))))
    if not d["eps"] > 0 or not d["theta"] > 0:
        raise HFError("%s: norm_eps %r and rope_theta %r must be positive" % (where, d["eps"], d["theta"]))
    if d["rope_scaling"]:
        if not (d["rope_factor"] > 0 and d["rope_high"] > d["rope_low"] > 0 and d["rope_orig"] > 0):
            raise HFError("%s: llama3 RoPE scaling needs factor > 0, high_freq_factor > low_freq_factor > 0 and "
                          "original_max_position_embeddings > 0 (got %r, %r, %r, %r)"
                          % (where, d["rope_factor"], d["rope_low"], d["rope_high"], d["rope_orig"]))
    elif d["rope_factor"] or d["rope_low"] or d["rope_high"] or d["rope_orig"]:
        raise HFError("%s: RoPE scaling fields set without rope_scaling 1" % where)


def header_bytes(d):
    h = [0] * 256
    h[0], h[1] = LLAMA_MAGIC, LLAMA_VERSION
    for k, i in INT_SLOTS:
        h[i] = int(d[k])
    for k, i in FLOAT_SLOTS:
        h[i] = f32_bits(d[k])
    h[ORIG_SLOT] = int(d["rope_orig"])
    h[MLP_SLOT] = int(d.get("mlp", 0))
    return struct.pack("<256i", *h)


def is_llama_file(path):
    try:
        with open(path, "rb") as f:
            raw = f.read(4)
    except OSError:
        return False
    return len(raw) == 4 and struct.unpack("<i", raw)[0] == LLAMA_MAGIC


def read_llama(path):
    """Returns (dims, tensors): tensors maps names to read-only float32 arrays (memory-mapped)."""
    f, size, raw = open_model_file(path, "a Llama-family model file", HEADER_BYTES)
    f.close()  # the tensors are mapped
    h = struct.unpack("<256i", raw)
    if h[0] != LLAMA_MAGIC:
        raise HFError("%s: header[0] (magic) is %d, expected %d (a Llama-family model file)" % (path, h[0], LLAMA_MAGIC))
    if h[1] != LLAMA_VERSION:
        raise HFError("%s: header[1] (version) is %d, expected %d (fp32)" % (path, h[1], LLAMA_VERSION))
    bad = [i for i in range(RESERVED_FROM, 256) if h[i]]
    if bad:
        raise HFError("%s: reserved header slot %d is %d, expected 0 (a file from a newer writer?)" % (path, bad[0], h[bad[0]]))
    d = {k: h[i] for k, i in INT_SLOTS}
    d.update({k: bits_f32(h[i]) for k, i in FLOAT_SLOTS})
    d["rope_orig"] = h[ORIG_SLOT]
    d["mlp"] = h[MLP_SLOT]
    check_dims(d, path)
    shapes = llama_shapes(d)
    want = HEADER_BYTES + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if size != want:
        raise HFError("%s: %d bytes, expected %d for its header (L=%d C=%d NH=%d KV=%d hd=%d H=%d Vp=%d tied %d qkv_bias %d "
                      "qk_norm %d; truncated?)" % (path, size, want, d["L"], d["C"], d["NH"], d["KV"], d["hd"], d["H"], d["Vp"],
                                                 d["tied"], d["qkv_bias"], d["qk_norm"]))
    t, off = {}, HEADER_BYTES
    for name, shape in shapes:
        t[name] = np.memmap(path, dtype="<f4", mode="r", offset=off, shape=shape)
        off += 4 * int(np.prod(shape))
    return d, t


def write_llama(path, d, tensors):
    """tensors: name -> an array of the full shape, or a sequence of per-layer arrays (written one after another,
    which is the same bytes as the stacked tensor, without holding it). Temporary name, fsync, rename."""
    check_dims(d, path)
    with atomic_file(path) as f:
        f.write(header_bytes(d))
        for name, shape in llama_shapes(d):
            parts = tensors[name]
            if not isinstance(parts, np.ndarray):
                assert len(parts) == shape[0], (name, len(parts), shape)
                for p in parts:
                    assert tuple(p.shape) == shape[1:], (name, p.shape, shape)
                    f.write(np.ascontiguousarray(p, dtype="<f4").tobytes())
            else:
                assert tuple(parts.shape) == shape, (name, parts.shape, shape)
                f.write(np.ascontiguousarray(parts, dtype="<f4").tobytes())


# ---------------------------------------------------------------- llm.c's llama3 branch files

def ffn_hidden(C, multiple_of, ffn_dim_multiplier):
    """The branch's (and Meta's) SwiGLU hidden size."""
    h = int(2 * (4 * C) / 3)
    if ffn_dim_multiplier is not None:
        h = int(ffn_dim_multiplier * h)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def meta_to_rotate_half(w, heads, hd):
    """Rows of each head from Meta's interleaved pairs (x0, x1), (x2, x3), ... to the rotate-half order
    (x0, x2, ..., x1, x3, ...): the inverse of w.view(heads, 2, hd/2, C).transpose(1, 2), which the branch
    applies to Hugging Face's rows."""
    C = w.shape[-1]
    return w.reshape(heads, hd // 2, 2, C).transpose(0, 2, 1, 3).reshape(heads * hd, C)


def rotate_half_to_meta(w, heads, hd):
    C = w.shape[-1]
    return w.reshape(heads, 2, hd // 2, C).transpose(0, 2, 1, 3).reshape(heads * hd, C)


def read_llmc_llama3(path, untie=False, rope=None, norm_eps=None, ffn_dim_multiplier=None):
    """Returns (dims, tensors) of our format from an llm.c llama3-branch file. norm_eps and ffn_dim_multiplier
    are for the older writer's files only, whose header lost them."""
    f, size, raw = open_model_file(path, "an llm.c llama3 model file", 2048)
    with f:
        hi = struct.unpack("<256i", raw[:1024])
        if hi[0] != LLMC3_MAGIC:
            raise HFError("%s: header[0] (magic) is %d, expected %d (llm.c's llama3 branch)%s" % (
                path, hi[0], LLMC3_MAGIC, "; this is already a Llama-family file of this trainer" if hi[0] == LLAMA_MAGIC else ""))
        if hi[1] not in (3, 5):
            raise HFError("%s: header[1] (version) is %d, expected 3 (fp32) or 5 (bf16)" % (path, hi[1]))
        width = 4 if hi[1] == 3 else 2
        maxT, V, L, NH, KV, C = hi[2:8]
        for name, v in (("block_size", maxT), ("vocab_size", V), ("n_layer", L), ("n_head", NH), ("n_kv_head", KV), ("n_embd", C)):
            if v <= 0:
                raise HFError("%s: header %s is %d, expected a positive integer" % (path, name, v))
        if NH % KV or C % NH or (C // NH) % 2:
            raise HFError("%s: n_head %d must divide n_embd %d into even heads and be divisible by n_kv_head %d"
                          % (path, NH, C, KV))
        hd = C // NH
        # the older writer's ints [12..15] are use_scaled_rope, max_gen_batch_size and the version (never all 0);
        # the current writer leaves them 0 and puts its floats in the second kilobyte
        older = any(hi[12:16])
        if older:
            if norm_eps is None or ffn_dim_multiplier is None:
                raise HFError(
                    "%s: the llama3 branch's older header (September 2024: one 1,024-byte int32 header, ints [12..15] = "
                    "use_scaled_rope, max_gen_batch_size, major, minor version = %s), where norm_eps (now %d) and "
                    "ffn_dim_multiplier (now %d) were truncated to integers. Give the values of the LlamaConfig the file "
                    "was written from with --norm-eps and --ffn-dim-multiplier (Llama 3.1 8B: 1e-5 and 1.3), or write "
                    "the checkpoint again with the branch's current write_model (see scripts/llmc_llama.py --help)"
                    % (path, list(hi[12:16]), hi[10], hi[8]))
            if int(ffn_dim_multiplier) != hi[8] or int(norm_eps) != hi[10]:
                raise HFError("%s: --ffn-dim-multiplier %r and --norm-eps %r do not truncate to the header's %d and %d"
                              % (path, ffn_dim_multiplier, norm_eps, hi[8], hi[10]))
            head = 1024
            multiple_of, scaled, ffn_mult, eps, theta = hi[9], hi[12], ffn_dim_multiplier, norm_eps, float(hi[11])
        else:
            if norm_eps is not None or ffn_dim_multiplier is not None:
                raise HFError("%s: --norm-eps and --ffn-dim-multiplier are for the older writer's files; this file's header "
                              "holds both" % path)
            head = 2048
            hf_ = struct.unpack("<256f", raw[1024:2048])
            multiple_of, scaled, ffn_mult, eps, theta = hi[8], hi[9], hf_[0], hf_[1], hf_[2]
        if multiple_of <= 0 or scaled not in (0, 1):
            raise HFError("%s: header multiple_of %d (expected > 0) or use_scaled_rope %d (expected 0 or 1)" % (path, multiple_of, scaled))
        H = ffn_hidden(C, multiple_of, ffn_mult)
        qkv = (NH + 2 * KV) * hd
        if older:  # no zero biases; the MLP's c_fc (up) of every layer, then c_fc2 (gate) of every layer; lm_head last
            shapes = [("wte", (V, C)), ("ln1w", (L, C)), ("qkvw", (L, qkv, C)), ("attprojw", (L, C, C)), ("ln2w", (L, C)),
                      ("fc", (L, H, C)), ("fc2", (L, H, C)), ("fcprojw", (L, C, H)), ("lnfw", (C,)), ("lm_head", (V, C))]
        else:
            shapes = [("wte", (V, C)), ("lm_head", (V, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, qkv, C)),
                      ("qkvb", (L, qkv)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
                      ("fcw", (L, 2 * H, C)), ("fcb", (L, 2 * H)), ("fcprojw", (L, C, H)), ("fcprojb", (L, C)),
                      ("lnfw", (C,)), ("lnfb", (C,))]
        want = head + width * sum(int(np.prod(s)) for _, s in shapes)
        if size != want:
            raise HFError("%s: %d bytes, expected %d for L=%d C=%d NH=%d KV=%d V=%d and an MLP hidden size of %d (from "
                          "multiple_of %d, ffn_dim_multiplier %r; truncated, or another writer?)"
                          % (path, size, want, L, C, NH, KV, V, H, multiple_of, ffn_mult))
        f.seek(head)
        t = {}
        for name, shape in shapes:
            n = int(np.prod(shape))
            a = np.frombuffer(f.read(n * width), dtype="<f4" if width == 4 else "<u2").reshape(shape)
            t[name] = np.array(a) if width == 4 else bf16_to_f32(a)
    if older:
        t["fcw"] = np.concatenate([t.pop("fc"), t.pop("fc2")], axis=1)  # per layer: up's rows, then gate's
    for name in ("ln1b", "qkvb", "attprojb", "ln2b", "fcb", "fcprojb", "lnfb"):
        if name in t and np.any(t[name] != 0):
            raise HFError("%s: tensor %s is not zero; the llama3 branch's Llama has no biases (another writer?)" % (path, name))
    tied = 0 if untie else int(np.array_equal(t["wte"].view(np.uint32), t["lm_head"].view(np.uint32)))
    d = {"maxT": maxT, "V": V, "Vp": padded_vocab(V), "L": L, "NH": NH, "KV": KV, "C": C, "hd": hd, "H": H,
         "tied": tied, "qkv_bias": 0, "qk_norm": 0, "rope_scaling": scaled, "eps": f32(eps), "theta": f32(theta),
         "rope_factor": 0.0, "rope_low": 0.0, "rope_high": 0.0, "rope_orig": 0}
    if scaled:
        r = {"factor": 8.0, "low": 1.0, "high": 4.0, "orig": 8192}
        r.update({k: v for k, v in (rope or {}).items() if v is not None})
        d.update(rope_factor=f32(r["factor"]), rope_low=f32(r["low"]), rope_high=f32(r["high"]), rope_orig=int(r["orig"]))
    elif rope and any(v is not None for v in rope.values()):
        raise HFError("%s: --rope-* given but the file's use_scaled_rope is 0" % path)

    def pad(a):
        out = np.zeros((d["Vp"], C), dtype=np.float32)
        out[:V] = a
        return out
    q, k = NH * hd, KV * hd
    wqkv = []
    for i in range(L):
        w = t["qkvw"][i]
        wqkv.append(np.concatenate([meta_to_rotate_half(w[:q], NH, hd), meta_to_rotate_half(w[q:q + k], KV, hd), w[q + k:]]))
    out = {"wte": pad(t["wte"]), "attn_norm": t["ln1w"], "wqkv": wqkv, "wo": t["attprojw"], "mlp_norm": t["ln2w"],
           "wfc": t["fcw"], "wproj": t["fcprojw"], "final_norm": t["lnfw"]}
    if not tied:
        out["lm_head"] = pad(t["lm_head"])
    return d, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="llm.c llama3-branch model file (magic 20240803, version 3 or 5)")
    ap.add_argument("out", help="the Llama-family model file to write")
    ap.add_argument("--untie", action="store_true", help="keep a separate lm_head even when it equals wte")
    ap.add_argument("--rope-factor", type=float, help="llama3 RoPE scaling factor (default the branch's 8)")
    ap.add_argument("--rope-low-freq-factor", type=float, help="(default 1)")
    ap.add_argument("--rope-high-freq-factor", type=float, help="(default 4)")
    ap.add_argument("--rope-original-max-position", type=int, help="(default 8192)")
    ap.add_argument("--norm-eps", type=float, help="older writer's files only: the model's norm_eps (the header holds it "
                    "truncated to 0)")
    ap.add_argument("--ffn-dim-multiplier", type=float, help="older writer's files only: the model's ffn_dim_multiplier "
                    "(the header holds it truncated)")
    a = ap.parse_args()
    try:
        d, t = read_llmc_llama3(a.input, a.untie, {"factor": a.rope_factor, "low": a.rope_low_freq_factor,
                                                   "high": a.rope_high_freq_factor, "orig": a.rope_original_max_position},
                                a.norm_eps, a.ffn_dim_multiplier)
        write_llama(a.out, d, t)
    except HFError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    print("converted %s (L=%d, C=%d, heads %d/%d kv, MLP %d, vocab %d, %s, norm_eps %g, rope_theta %g%s) to %s" % (
        a.input, d["L"], d["C"], d["NH"], d["KV"], d["H"], d["V"], "tied" if d["tied"] else "untied", d["eps"], d["theta"],
        ", llama3 scaling factor %g" % d["rope_factor"] if d["rope_scaling"] else "", a.out))


if __name__ == "__main__":
    main()
