#!/usr/bin/python3
"""test_hf_llama.py: the Llama family's Hugging Face side (scripts/import_hf.py, scripts/export_hf.py,
scripts/llmc_llama.py) against transformers, and the Llama-family model file against a forward written here
from the file format's specification alone (docs/huggingface.md): it reads the raw bytes, so it is what shows that
the file's layout and semantics are Hugging Face's. Tiny random models, seconds. Needs torch, transformers,
safetensors and tokenizers (Debian's python, TORCH_PYTHON). Prints PASS/FAIL per check and the
"N passed, N failed" line run_tests.sh counts.

    test/test_hf_llama.py [--work DIR]

transformers 4.45 has no Qwen3ForCausalLM; where it is missing, the Qwen 3 model is transformers'
LlamaForCausalLM with q_norm/k_norm (LlamaRMSNorm over head_dim, eps rms_norm_eps) applied to each head's q and
k before RoPE, as Qwen3Attention does, under Qwen 3's tensor names; where transformers has the class, it is used.
"""
import argparse
import copy
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the machine's cores are shared; the models are tiny
warnings.filterwarnings("ignore")
try:
    import numpy as np
    import torch
    import tokenizers  # noqa: F401
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM)
    from transformers.models.llama import modeling_llama as ml
except ImportError as e:
    print("SKIP Hugging Face Llama family: %s cannot import %s (pip install torch transformers safetensors tokenizers; "
          "TORCH_PYTHON names the interpreter)" % (sys.executable, e.name))
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(0)

transformers.logging.set_verbosity_error()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_hf  # noqa: E402  (the GPT-2 suite's set-up: check and its counts, script, expect_error)
from test_hf import ROOT, check, expect_error, script  # noqa: E402

HAVE_QWEN3 = hasattr(transformers, "Qwen3ForCausalLM")


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- the reference forward, from the spec alone

def ref_logits(path, tokens):
    """Logits (B, T, V) of the Llama-family file at path, in float64, from its raw bytes: header of 256 int32
    (magic 20261126, version 1, then max_seq_len, V, Vp, L, NH, KV, C, head_dim, H, tied, qkv_bias, qk_norm,
    rope_scaling, and float32 bits of eps, theta, factor, low, high, then original max positions), fp32 tensors."""
    raw = read(path)
    h = struct.unpack("<256i", raw[:1024])
    assert h[0] == 20261126 and h[1] == 1 and not any(h[21:]), h[:22]
    _, V, Vp, L, NH, KV, C, hd, H, tied, qkv_bias, qk_norm, scaling = h[2:15]
    eps, theta, factor, low, high = (struct.unpack("<f", struct.pack("<i", h[i]))[0] for i in range(15, 20))
    orig = h[20]
    off = 1024

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = np.frombuffer(raw, dtype="<f4", count=n, offset=off).reshape(shape)
        off += 4 * n
        return torch.from_numpy(a.astype(np.float64))
    wte, attn_norm, wqkv = take(Vp, C), take(L, C), take(L, (NH + 2 * KV) * hd, C)
    bqkv = take(L, (NH + 2 * KV) * hd) if qkv_bias else None
    q_norm, k_norm = (take(L, hd), take(L, hd)) if qk_norm else (None, None)
    wo, mlp_norm, wfc, wproj, final_norm = take(L, C, NH * hd), take(L, C), take(L, 2 * H, C), take(L, C, H), take(C)
    head = wte if tied else take(Vp, C)
    assert off == len(raw), (off, len(raw))
    assert not wte[V:].any() and not head[V:].any(), "padded vocabulary rows must be zero"

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    if scaling:  # Llama 3.1: keep high frequencies, divide low ones by factor, blend in between
        wavelen = 2 * math.pi / inv
        smooth = (orig / wavelen - low) / (high - low)
        blended = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelen < orig / high, inv, torch.where(wavelen > orig / low, inv / factor, blended))
    B, T = tokens.shape
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # (T, hd/2)
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]

    def rope(x):  # x (B, T, heads, hd): halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
        x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    x = wte[tokens]
    for l in range(L):
        a = rms(x, attn_norm[l]) @ wqkv[l].T
        if qkv_bias:
            a = a + bqkv[l]
        q = a[..., :NH * hd].reshape(B, T, NH, hd)
        k = a[..., NH * hd:(NH + KV) * hd].reshape(B, T, KV, hd)
        v = a[..., (NH + KV) * hd:].reshape(B, T, KV, hd)
        if qk_norm:
            q, k = rms(q, q_norm[l]), rms(k, k_norm[l])
        q, k = rope(q), rope(k)
        out = torch.empty(B, T, NH, hd, dtype=torch.float64)
        for hh in range(NH):
            g = hh // (NH // KV)
            s = torch.einsum("btd,bsd->bts", q[:, :, hh], k[:, :, g]) / math.sqrt(hd)
            s = s.masked_fill(~mask, float("-inf")).softmax(-1)
            out[:, :, hh] = torch.einsum("bts,bsd->btd", s, v[:, :, g])
        x = x + out.reshape(B, T, NH * hd) @ wo[l].T
        fc = rms(x, mlp_norm[l]) @ wfc[l].T
        up, gate = fc[..., :H], fc[..., H:]
        x = x + (torch.nn.functional.silu(gate) * up) @ wproj[l].T
    return (rms(x, final_norm) @ head[:V].T).numpy()


# ---------------------------------------------------------------- Qwen 3 where transformers lacks it

class Qwen3Attention(ml.LlamaAttention):
    """Llama's attention with Qwen 3's q_norm / k_norm on each head before RoPE (eager attention)."""

    def __init__(self, config, layer_idx):
        super().__init__(config, layer_idx)
        self.q_norm = ml.LlamaRMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = ml.LlamaRMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None, output_attentions=False,
                use_cache=False, cache_position=None, position_embeddings=None, **kwargs):
        b, t, _ = hidden_states.shape
        q = self.q_norm(self.q_proj(hidden_states).view(b, t, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(b, t, -1, self.head_dim)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, t, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
        if past_key_value is not None:
            k, v = past_key_value.update(k, v, self.layer_idx, {"sin": sin, "cos": cos, "cache_position": cache_position})
        k, v = ml.repeat_kv(k, self.num_key_value_groups), ml.repeat_kv(v, self.num_key_value_groups)
        w = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            w = w + attention_mask[:, :, :, :k.shape[-2]]
        w = torch.softmax(w.float(), dim=-1).to(q.dtype)
        return self.o_proj((w @ v).transpose(1, 2).reshape(b, t, -1)), None, past_key_value


class Qwen3Shim(LlamaForCausalLM):
    def __init__(self, config):
        config._attn_implementation = "eager"
        super().__init__(config)
        for i, layer in enumerate(self.model.layers):
            layer.self_attn = Qwen3Attention(config, i)
        self.post_init()


QWEN3_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
              "rope_scaling", "tie_word_embeddings", "hidden_act")


def qwen3_model(cfg):
    if HAVE_QWEN3:
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg))
    return Qwen3Shim(LlamaConfig(**cfg))


def qwen3_save(m, d):
    """save_pretrained, with config.json saying Qwen3ForCausalLM / qwen3 when the model is the shim."""
    m.save_pretrained(d)
    if not HAVE_QWEN3:
        p = os.path.join(d, "config.json")
        c = json.load(open(p))
        c = {k: c[k] for k in QWEN3_KEYS}
        c.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", attention_bias=False, use_sliding_window=False,
                 torch_dtype="float32")
        json.dump(c, open(p, "w"), indent=2)


def load_hf(d):
    """(model, missing, unexpected): AutoModelForCausalLM, or for qwen3 without transformers' class the shim
    loaded strictly from model.safetensors under the same names."""
    c = json.load(open(os.path.join(d, "config.json")))
    if c["model_type"] == "qwen3" and not HAVE_QWEN3:
        m = Qwen3Shim(LlamaConfig(**{k: c[k] for k in QWEN3_KEYS}))
        sd = load_file(os.path.join(d, "model.safetensors"))
        r = m.load_state_dict(sd, strict=False)
        missing = [k for k in r.missing_keys if not (c["tie_word_embeddings"] and k == "lm_head.weight")]
        if c["tie_word_embeddings"]:
            m.tie_weights()
        return m.eval(), missing, list(r.unexpected_keys), "Qwen3ForCausalLM (the LlamaForCausalLM-based stand-in)"
    m, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    return m.eval(), info["missing_keys"] + info["mismatched_keys"], info["unexpected_keys"], type(m).__name__


# ---------------------------------------------------------------- models

def randomize(m, seed):
    """Every parameter random: norm weights near 1 and biases near 0 would hide a swapped or dropped tensor."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))
    return m.eval()


def models():
    """(label, model, save function). Shapes small but every option on in one of them."""
    base = dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, max_position_embeddings=64, hidden_act="silu")
    out = []
    m = LlamaForCausalLM(LlamaConfig(**base, intermediate_size=96, num_attention_heads=8, num_key_value_heads=2,
                                     rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False))
    out.append(("LlamaForCausalLM, GQA 4:1 (8 heads, 2 kv), untied", randomize(m, 1), lambda m, d: m.save_pretrained(d)))
    # the shape llm.c's llama3 writer derives: h = int(2 * 4C / 3) = 170, * 1.3 = 221, to a multiple of 32 = 224;
    # Llama 3.1's RoPE scaling as llm.c applies it (factor 8, 1, 4, 8192); vocabulary 260 is padded to 384
    m = LlamaForCausalLM(LlamaConfig(**dict(base, vocab_size=260), intermediate_size=224, num_attention_heads=4,
                                     num_key_value_heads=1, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}))
    out.append(("LlamaForCausalLM, GQA 4:1 (4 heads, 1 kv), tied, llama3 RoPE scaling", randomize(m, 2),
                lambda m, d: m.save_pretrained(d)))
    m = Qwen2ForCausalLM(Qwen2Config(**base, intermediate_size=80, num_attention_heads=4, num_key_value_heads=2,
                                     rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True))
    out.append(("Qwen2ForCausalLM, q/k/v bias, tied", randomize(m, 3), lambda m, d: m.save_pretrained(d)))
    m = qwen3_model(dict(base, intermediate_size=112, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                         rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False, rope_scaling=None))
    out.append(("Qwen3ForCausalLM, qk-norm, head_dim 24 != 64/4, untied", randomize(m, 4), qwen3_save))
    return out


def logits(m, x):
    with torch.no_grad():
        return m(x).logits.double().numpy()


def rel(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


# ---------------------------------------------------------------- checks

def test_model(work, i, label, m, save):
    hf = os.path.join(work, "m%d_hf" % i)
    save(m, hf)
    binf = os.path.join(work, "m%d.bin" % i)
    r = script("import_hf.py", hf, binf)
    ok = r.returncode == 0
    check("%s: saved by transformers, imports" % label, ok, r.stdout)
    if not ok:
        return None
    x = torch.randint(0, m.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(10 + i))
    want = logits(m, x)
    got = ref_logits(binf, x)
    d = rel(got, want)
    check("%s: a forward written from the file format's spec, reading the imported file's bytes, equals transformers' "
          "logits within 1e-5 (max |diff| / scale %.1e, scale %.1f)" % (label, d, np.abs(want).max()), d <= 1e-5)
    out = os.path.join(work, "m%d_out" % i)
    r = script("export_hf.py", binf, out, "--no-tokenizer")
    if r.returncode != 0:
        check("%s: exports" % label, False, r.stdout)
        return binf
    m2, missing, unexpected, cls = load_hf(out)
    sd, sd2 = m.state_dict(), m2.state_dict()
    same = sorted(sd) == sorted(sd2) and all(torch.equal(sd[k], sd2[k]) for k in sd)
    want_cls = m.config.architectures[0] if getattr(m.config, "architectures", None) else type(m).__name__
    check("%s: export loads as %s with no missing or unexpected weights, every tensor bit-identical to the original"
          % (label, cls), not missing and not unexpected and same and cls.split()[0] == json.load(
              open(os.path.join(hf, "config.json")))["architectures"][0],
          "missing %s unexpected %s same %s (%s vs %s)" % (missing, unexpected, same, cls, want_cls))
    c0, c1 = json.load(open(os.path.join(hf, "config.json"))), json.load(open(os.path.join(out, "config.json")))
    keys = [k for k in QWEN3_KEYS + ("model_type", "architectures") if k in c0 or k in c1]
    diff = {k: (c0.get(k), c1.get(k)) for k in keys if c0.get(k, None if k != "tie_word_embeddings" else False) != c1.get(k)}
    check("%s: the exported config.json has the original's %d fields (shapes, head_dim, rms_norm_eps, rope_theta, "
          "rope_scaling, tie_word_embeddings ...)" % (label, len(keys)), not diff, str(diff))
    check("%s: the exported model's logits equal the original's exactly" % label,
          np.array_equal(logits(m2, x), want))
    back = os.path.join(work, "m%d_back.bin" % i)
    r = script("import_hf.py", out, back)
    check("%s: import -> export -> import is byte-identical" % label,
          r.returncode == 0 and read(back) == read(binf), r.stdout)
    return binf


def test_inputs(work, m, binf):
    """The same weights from sharded safetensors, pytorch_model.bin (whole and sharded) and bf16."""
    for name, kw in (("sharded safetensors (model.safetensors.index.json)", dict(max_shard_size="40KB")),
                     ("pytorch_model.bin", dict(safe_serialization=False)),
                     ("sharded pytorch_model.bin (pytorch_model.bin.index.json)", dict(safe_serialization=False, max_shard_size="40KB"))):
        d = os.path.join(work, "in_" + name.split()[0] + str(len(kw)))
        m.save_pretrained(d, **kw)
        files = sorted(os.listdir(d))
        out = d + ".bin"
        r = script("import_hf.py", d, out)
        check("%s (%d files) imports to the same bytes as model.safetensors" % (name, len(files)),
              r.returncode == 0 and read(out) == read(binf) and len(files) >= 3 - ("index" not in name), r.stdout + str(files))
    mb = LlamaForCausalLM(m.config).eval()
    mb.load_state_dict(m.state_dict())
    mb = mb.to(torch.bfloat16)
    d16, d32 = os.path.join(work, "in_bf16"), os.path.join(work, "in_bf16_as_f32")
    mb.save_pretrained(d16)
    mb.float().save_pretrained(d32)
    r1, r2 = script("import_hf.py", d16, d16 + ".bin"), script("import_hf.py", d32, d32 + ".bin")
    st = load_file(os.path.join(d16, "model.safetensors"))
    check("a bf16 checkpoint (%s) imports widened to fp32 exactly: the same bytes as its fp32 copy" %
          next(iter(st.values())).dtype, r1.returncode == r2.returncode == 0 and read(d16 + ".bin") == read(d32 + ".bin"),
          r1.stdout + r2.stdout)


def write_llmc_llama3(path, m, bf16, multiple_of, ffn_dim_multiplier, use_scaled_rope, older=False):
    """A file as llm.c's llama3 branch writes it (FORMATS.md): 2,048-byte header (256 int32, 256 float32),
    wte, lm_head in the wpe slot, zero "biases", q and k rows of each head in Meta's interleaved order,
    fc = up_proj's rows then gate_proj's per layer. older: the 2024-09 writer's 1,024-byte int-only header."""
    c, sd = m.config, {k: v.detach().float() for k, v in m.state_dict().items()}
    L, NH, KV, C = c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.hidden_size
    hd = C // NH
    hi, hf = [0] * 256, [0.0] * 256
    hi[:8] = [20240803, 5 if bf16 else 3, c.max_position_embeddings, c.vocab_size, L, NH, KV, C]
    if older:
        hi[8:16] = [int(ffn_dim_multiplier), multiple_of, int(c.rms_norm_eps), int(c.rope_theta), use_scaled_rope, 4, 3, 1]
    else:
        hi[8:12] = [multiple_of, use_scaled_rope, 3, 1]
        hf[:3] = [ffn_dim_multiplier, c.rms_norm_eps, c.rope_theta]

    def interleave(w, heads):  # Hugging Face's rotate-half rows -> Meta's pairs, as the branch does on loading
        return w.view(heads, 2, hd // 2, C).transpose(1, 2).reshape(heads * hd, C)
    lay = "model.layers.%d."
    wte = sd["model.embed_tokens.weight"]
    head = sd["lm_head.weight"] if "lm_head.weight" in sd else wte
    qkv = [torch.cat([interleave(sd[lay % i + "self_attn.q_proj.weight"], NH), interleave(sd[lay % i + "self_attn.k_proj.weight"], KV),
                      sd[lay % i + "self_attn.v_proj.weight"]]) for i in range(L)]
    ln1 = [sd[lay % i + "input_layernorm.weight"] for i in range(L)]
    wo = [sd[lay % i + "self_attn.o_proj.weight"] for i in range(L)]
    ln2 = [sd[lay % i + "post_attention_layernorm.weight"] for i in range(L)]
    up = [sd[lay % i + "mlp.up_proj.weight"] for i in range(L)]
    gate = [sd[lay % i + "mlp.gate_proj.weight"] for i in range(L)]
    down = [sd[lay % i + "mlp.down_proj.weight"] for i in range(L)]
    if older:  # no biases; every layer's c_fc (up), then every layer's c_fc2 (gate); lm_head last
        ts = [wte] + ln1 + qkv + wo + ln2 + up + gate + down + [sd["model.norm.weight"], head]
    else:
        def zeros(ws):
            return [torch.zeros(w.shape[0]) for w in ws]
        fc = [torch.cat([u, g]) for u, g in zip(up, gate)]
        ts = ([wte, head] + ln1 + zeros(ln1) + qkv + zeros(qkv) + wo + zeros(wo) + ln2 + zeros(ln2) + fc + zeros(fc) + down
              + zeros(down) + [sd["model.norm.weight"], torch.zeros(C)])
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *hi))
        if not older:
            f.write(struct.pack("<256f", *hf))
        for t in ts:
            if bf16:
                f.write(t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes())
            else:
                f.write(t.numpy().astype("<f4").tobytes())


def test_llmc(work, untied, tied, tied_bin):
    """llm.c llama3-branch files to ours: equal to the direct import of the same weights, byte for byte."""
    p = os.path.join(work, "llmc_tied.bin")
    write_llmc_llama3(p, tied, False, 32, 1.3, 1)
    out = os.path.join(work, "llmc_tied_conv.bin")
    r = script("llmc_llama.py", p, out)
    check("llm.c llama3 file (v3 fp32, tied as two copies, use_scaled_rope, H from multiple_of 32 and ffn_dim_multiplier "
          "1.3 = 224) converts to the same bytes as the direct import of the Hugging Face model",
          r.returncode == 0 and read(out) == read(tied_bin), r.stdout)
    # Llama 3.2's published scaling factor is 32 where the branch computes 8: --rope-factor gives the file the former
    hf32 = os.path.join(work, "llmc_tied_f32_hf")
    shutil.copytree(os.path.join(work, "m1_hf"), hf32)
    c = json.load(open(os.path.join(hf32, "config.json")))
    c["rope_scaling"]["factor"] = 32.0
    json.dump(c, open(os.path.join(hf32, "config.json"), "w"))
    r1 = script("import_hf.py", hf32, hf32 + ".bin")
    r = script("llmc_llama.py", p, out + "32", "--rope-factor", "32")
    check("llmc_llama.py --rope-factor 32 gives the same bytes as the direct import of the model with rope_scaling factor 32",
          r1.returncode == r.returncode == 0 and read(out + "32") == read(hf32 + ".bin"), r1.stdout + r.stdout)
    # bf16: the direct import of the model in bf16 (widened to fp32) is the reference
    mb = LlamaForCausalLM(untied.config).eval()
    mb.load_state_dict(untied.state_dict())
    mb = mb.to(torch.bfloat16)
    hfb = os.path.join(work, "llmc_untied_bf16_hf")
    mb.save_pretrained(hfb)
    direct = os.path.join(work, "llmc_untied_direct.bin")
    r1 = script("import_hf.py", hfb, direct)
    p = os.path.join(work, "llmc_untied.bin")
    # C 64: h = 170; ffn_dim_multiplier 0.5 -> 85, multiple_of 32 -> 96, the model's intermediate_size
    write_llmc_llama3(p, mb, True, 32, 0.5, 0)
    out = os.path.join(work, "llmc_untied_conv.bin")
    r = script("llmc_llama.py", p, out)
    check("llm.c llama3 file (v5 bf16, untied, GQA 4:1, no RoPE scaling, H 96 from ffn_dim_multiplier 0.5) converts to "
          "the same bytes as the direct import of the bf16 Hugging Face model",
          r1.returncode == r.returncode == 0 and read(out) == read(direct), r1.stdout + r.stdout)
    old = os.path.join(work, "llmc_old.bin")
    write_llmc_llama3(old, tied, False, 32, 1.3, 1, older=True)
    expect_error("llm.c's older llama3 file (1,024-byte int header, floats truncated) without the lost values",
                 ["llmc_llama.py", old, out + "2"], ["older header", "--norm-eps", "--ffn-dim-multiplier"], out + "2")
    r = script("llmc_llama.py", old, out + "3", "--norm-eps", "1e-5", "--ffn-dim-multiplier", "1.3")
    check("llm.c's older llama3 file (its own tensor layout) with --norm-eps 1e-5 --ffn-dim-multiplier 1.3 converts to the "
          "same bytes as the direct import", r.returncode == 0 and read(out + "3") == read(tied_bin), r.stdout)
    expect_error("export_hf.py given an llm.c llama3 file", ["export_hf.py", p, os.path.join(work, "llmc_exp")],
                 ["llmc_llama.py"], os.path.join(work, "llmc_exp"))


def test_refusals(work, m, qwen2_hf):
    base = os.path.join(work, "ref_base")
    m.save_pretrained(base)
    out = os.path.join(work, "ref.bin")

    def variant(tag, cfg=None, src=base, tensors=None):
        d = os.path.join(work, "ref_" + tag)
        shutil.copytree(src, d)
        p = os.path.join(d, "config.json")
        c = json.load(open(p))
        if cfg:
            cfg(c)
        json.dump(c, open(p, "w"))
        if tensors:
            sd = load_file(os.path.join(d, "model.safetensors"))
            tensors(sd)
            save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return d
    cases = [
        ("an unsupported architecture (MistralForCausalLM)", dict(cfg=lambda c: c.update(model_type="mistral", architectures=["MistralForCausalLM"])),
         ["config.json", "model_type", "mistral"]),
        ("attention_bias (a bias on o_proj too)", dict(cfg=lambda c: c.update(attention_bias=True)), ["config.json", "attention_bias", "o_proj"]),
        ("mlp_bias", dict(cfg=lambda c: c.update(mlp_bias=True)), ["config.json", "mlp_bias"]),
        ("rope_scaling of type linear", dict(cfg=lambda c: c.update(rope_scaling={"rope_type": "linear", "factor": 2.0})),
         ["config.json", "rope_scaling.rope_type", "linear"]),
        ("an odd head_dim", dict(cfg=lambda c: c.update(head_dim=7)), ["config.json", "head_dim", "odd"]),
        ("rope_parameters of rope_type yarn", dict(cfg=lambda c: c.update(rope_parameters={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "rope_theta": 10000.0})),
         ["config.json", "rope_parameters.rope_type", "yarn"]),
        ("a key inside rope_parameters it does not understand", dict(cfg=lambda c: c.update(rope_parameters={
            "rope_type": "default", "rope_theta": 10000.0, "mscale": 1.0})), ["config.json", "rope_parameters.mscale"]),
        ("a key inside rope_scaling it does not understand", dict(cfg=lambda c: c.update(rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32, "beta_fast": 32})), ["config.json", "rope_scaling.beta_fast"]),
        ("rope_parameters whose θ differs from the top-level rope_theta", dict(cfg=lambda c: c.update(rope_parameters={
            "rope_type": "default", "rope_theta": 100000.0})), ["config.json", "rope_parameters", "rope_theta", "disagree"]),
        ("heads not divisible by key/value heads", dict(cfg=lambda c: c.update(num_key_value_heads=3)),
         ["config.json", "num_key_value_heads"]),
        ("hidden_act gelu", dict(cfg=lambda c: c.update(hidden_act="gelu")), ["config.json", "hidden_act"]),
        ("a Qwen 2 with use_sliding_window", dict(src=qwen2_hf, cfg=lambda c: c.update(use_sliding_window=True)),
         ["config.json", "use_sliding_window"]),
        ("an o_proj.bias in the weights", dict(tensors=lambda sd: sd.update({"model.layers.0.self_attn.o_proj.bias": torch.zeros(64)})),
         ["model.safetensors", "unexpected tensor", "o_proj.bias"]),
        ("a missing tensor", dict(tensors=lambda sd: sd.pop("model.layers.1.mlp.gate_proj.weight")),
         ["model.safetensors", "model.layers.1.mlp.gate_proj.weight", "missing"]),
        ("a shape that config.json does not imply", dict(cfg=lambda c: c.update(intermediate_size=100)),
         ["model.safetensors", "up_proj", "shape"]),
        ("tie_word_embeddings true beside an lm_head.weight that differs", dict(cfg=lambda c: c.update(tie_word_embeddings=True)),
         ["model.safetensors", "lm_head.weight differs", "tie_word_embeddings"]),
    ]
    for i, (name, kw, want) in enumerate(cases):
        expect_error("import of " + name, ["import_hf.py", variant(str(i), **kw), out], want, out)
    tr = variant("trunc")
    p = os.path.join(tr, "model.safetensors")
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 1000)
    expect_error("import of a truncated model.safetensors", ["import_hf.py", tr, out], ["model.safetensors", "truncated"], out)
    left = [n for n in os.listdir(work) if ".tmp" in n or n.startswith(".export_hf.")]
    check("no temporary files left behind by the refusals", not left, str(left))


def trainer_loss(work, binf, x, y):
    """The trainer's own mean loss on (x, y): test/hf_forward grads runs model/model.h's forward as train_gpt_cpu does."""
    hf = os.path.join(ROOT, "test", "hf_forward")
    tok, tgt, out = (os.path.join(work, "loss." + e) for e in ("tok", "tgt", "f32"))
    x.numpy().astype("<i4").tofile(tok)
    y.numpy().astype("<i4").tofile(tgt)
    r = test_hf.run([hf, "grads", binf, tok, tgt, str(x.shape[0]), str(x.shape[1]), out])
    if r.returncode != 0:
        return None, "%s: %s (make test/hf_forward)" % (hf, r.stdout)
    return float(np.fromfile(out, dtype="<f4", count=1)[0]), ""


def header_rope(binf):
    """(theta, rope_scaling, factor, low, high, original max positions) from the Llama-family file's header."""
    h = struct.unpack("<256i", read(binf)[:1024])
    fl = [struct.unpack("<f", struct.pack("<i", h[i]))[0] for i in (16, 17, 18, 19)]
    return (fl[0], h[14], fl[1], fl[2], fl[3], h[20])


def v5_form(c):
    """config.json as transformers 5.x saves it: RoPE only inside rope_parameters, no rope_theta or rope_scaling at
    the top (written by hand: CI has transformers 4.45, which writes the older form)."""
    c = dict(c)
    rp = dict(c.pop("rope_scaling") or {}, rope_theta=c.pop("rope_theta"))
    rp.setdefault("rope_type", "default")
    c.update(rope_parameters=rp, transformers_version="5.0.0")
    return c


def test_v5_configs(work):
    """Configs in transformers 5.x's form (rope_parameters) import with their θ and scaling, the trainer's loss equals
    transformers' (4.45 on the same weights with the equivalent 4.x config) and the export carries the same
    rope_parameters, beside 4.x's keys that 4.45 reads (its model equals the original)."""
    base = dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, max_position_embeddings=64, hidden_act="silu",
                intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5)
    llama3 = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 16}  # a short original context: the scaling changes the loss at T 48
    cases = [("LlamaForCausalLM, rope_parameters θ 100000", LlamaForCausalLM(LlamaConfig(**base, rope_theta=100000.0))),
             ("LlamaForCausalLM, rope_parameters θ 500000 with llama3 scaling (factor 32)",
              LlamaForCausalLM(LlamaConfig(**base, rope_theta=500000.0, rope_scaling=llama3, tie_word_embeddings=True))),
             ("Qwen2ForCausalLM, rope_parameters θ 1e6", Qwen2ForCausalLM(Qwen2Config(**base, rope_theta=1e6)))]
    for i, (label, m) in enumerate(cases):
        randomize(m, 30 + i)
        d = os.path.join(work, "v5_%d" % i)
        m.save_pretrained(d)
        p = os.path.join(d, "config.json")
        c5 = v5_form(json.load(open(p)))
        json.dump(c5, open(p, "w"), indent=2)
        binf = d + ".bin"
        r = script("import_hf.py", d, binf)
        if r.returncode != 0:
            check("%s: imports" % label, False, r.stdout)
            continue
        rs = m.config.rope_scaling or {}
        want = (float(np.float32(m.config.rope_theta)), int(bool(rs)), rs.get("factor", 0.0), rs.get("low_freq_factor", 0.0),
                rs.get("high_freq_factor", 0.0), rs.get("original_max_position_embeddings", 0))
        got = header_rope(binf)
        check("%s: the imported header's θ and scaling are the config's %s" % (label, got), got == want, "want %s" % (want,))
        g = torch.Generator().manual_seed(40 + i)
        x, y = (torch.randint(0, 300, (2, 48), generator=g) for _ in range(2))
        md = copy.deepcopy(m).double()
        with torch.no_grad():
            ref = torch.nn.functional.cross_entropy(md(x).logits.reshape(-1, 300), y.reshape(-1)).item()
        loss, err = trainer_loss(work, binf, x, y)
        ok = loss is not None and abs(loss - ref) / ref <= 1e-5
        check("%s: the trainer's loss %s equals transformers' %.7f within 1e-5 relative" % (
            label, "%.7f" % loss if loss is not None else "(none)", ref), ok, err)
        out = d + "_out"
        r = script("export_hf.py", binf, out, "--no-tokenizer")
        oc = json.load(open(os.path.join(out, "config.json"))) if r.returncode == 0 else {}
        check("%s: exports with the same rope_parameters %s" % (label, json.dumps(oc.get("rope_parameters"))),
              oc.get("rope_parameters") == c5["rope_parameters"], r.stdout + json.dumps(oc.get("rope_parameters")))
        if r.returncode == 0:
            m2 = load_hf(out)[0]
            d2 = rel(logits(m2, x), logits(m, x))
            check("%s: transformers %s loads the export with the same RoPE (logits within 1e-6 of the original's: %.1e)"
                  % (label, transformers.__version__, d2), d2 <= 1e-6)


MINIMAL = dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               max_position_embeddings=64)
# Qwen3Config's defaults in transformers 5.x (4.45 has no Qwen 3): head_dim 128, not hidden_size / heads
QWEN3_DEFAULTS = dict(head_dim=128, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)


def test_missing_keys(work):
    """config.json files that leave out tie_word_embeddings, rms_norm_eps, rope_theta, head_dim (and for Llama
    num_key_value_heads), written by hand (save_pretrained writes every key): each field gets its model type's own
    default as transformers' config class applies it (AutoConfig of 4.45 on the same file; Qwen 3: 5.x's Qwen3Config)."""
    for mt, arch in (("llama", "LlamaForCausalLM"), ("qwen2", "Qwen2ForCausalLM"), ("qwen3", "Qwen3ForCausalLM")):
        d = os.path.join(work, "minimal_" + mt)
        os.makedirs(d)
        c = dict(MINIMAL, architectures=[arch], model_type=mt)
        if mt != "llama":
            c["num_key_value_heads"] = 2  # Qwen's default, 32, would not divide 4 heads
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
        if mt == "qwen3":
            cfg = LlamaConfig(**dict(c, **QWEN3_DEFAULTS))
            m = randomize(Qwen3Shim(cfg), 50)
            save = qwen3_save
        else:
            cfg = transformers.AutoConfig.from_pretrained(d)
            m = randomize(AutoModelForCausalLM.from_config(cfg), 51)
            save = lambda m, w: m.save_pretrained(w)  # noqa: E731
        w = d + "_weights"
        save(m, w)
        shutil.copy(os.path.join(w, "model.safetensors"), d)
        binf = d + ".bin"
        r = script("import_hf.py", d, binf)
        if r.returncode != 0:
            check("%s config.json without the optional fields: imports" % arch, False, r.stdout)
            continue
        h = struct.unpack("<256i", read(binf)[:1024])
        eps, theta = (struct.unpack("<f", struct.pack("<i", h[k]))[0] for k in (15, 16))
        got = dict(num_key_value_heads=h[7], head_dim=h[9], tie_word_embeddings=bool(h[11]), rms_norm_eps=eps, rope_theta=theta)
        hd = getattr(cfg, "head_dim", None) if mt != "qwen2" else None
        want = dict(num_key_value_heads=cfg.num_key_value_heads, head_dim=hd or cfg.hidden_size // cfg.num_attention_heads,
                    tie_word_embeddings=cfg.tie_word_embeddings, rms_norm_eps=float(np.float32(cfg.rms_norm_eps)),
                    rope_theta=float(np.float32(cfg.rope_theta)))
        x = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(52))
        dl = rel(ref_logits(binf, x), logits(m, x))
        check("%s config.json without the optional fields: the header has transformers' defaults %s, and the file's "
              "logits equal transformers' (%.1e)" % (arch, got, dl), got == want and dl <= 1e-5, "want %s" % want)


def test_geglu(work):
    """GeGLU (--mlp geglu, slot 21 = 3) is LlamaForCausalLM with hidden_act gelu_pytorch_tanh; ungated MLPs are refused."""
    m = randomize(LlamaForCausalLM(LlamaConfig(**dict(MINIMAL, hidden_act="gelu_pytorch_tanh", num_key_value_heads=2,
                                                      tie_word_embeddings=False))), 7)
    hf, binf, out = (os.path.join(work, "geglu" + e) for e in ("_hf", ".bin", "_out"))
    m.save_pretrained(hf)
    r = script("import_hf.py", hf, binf)
    slot = struct.unpack("<256i", read(binf)[:1024])[21] if r.returncode == 0 else None
    check("GeGLU (hidden_act gelu_pytorch_tanh) imports with header slot 21 = 3 (got %s)" % slot, slot == 3, r.stdout)
    x, y = (torch.randint(0, 300, (2, 48), generator=torch.Generator().manual_seed(77 + i)) for i in range(2))
    with torch.no_grad():
        ref = torch.nn.functional.cross_entropy(copy.deepcopy(m).double()(x).logits.reshape(-1, 300), y.reshape(-1)).item()
    loss, err = trainer_loss(work, binf, x, y) if slot == 3 else (None, "not imported")
    check("GeGLU: the trainer's loss %s equals transformers' %.7f (float64) within 1e-5 relative" % (
        "%.7f" % loss if loss is not None else "(none)", ref), loss is not None and abs(loss - ref) / ref <= 1e-5, err)
    r = script("export_hf.py", binf, out, "--no-tokenizer")
    oc = json.load(open(os.path.join(out, "config.json"))) if r.returncode == 0 else {}
    same = r.returncode == 0 and np.array_equal(logits(load_hf(out)[0], x), logits(m, x))
    check("GeGLU: exports as %s with hidden_act %s, logits equal the original's exactly" % (
        oc.get("architectures"), oc.get("hidden_act")), same and oc.get("hidden_act") == "gelu_pytorch_tanh", r.stdout)
    gelu = os.path.join(work, "gelu_run")  # ungated GELU in the Llama family: the trainer's own file
    test_hf.run([os.path.join(ROOT, "train_gpt_cpu"), "-e", "llama-d1", "--mlp", "gelu", "-x", "1", "-b", "1", "-t", "8",
                 "-v", "0", "-s", "0", "-o", gelu])
    expect_error("export of an ungated MLP (--mlp gelu, slot 21 = 2)", ["export_hf.py", os.path.join(gelu, "model_00000001.bin"),
                 os.path.join(work, "gelu_out")], ["slot 21 = 2", "without a gate"], os.path.join(work, "gelu_out"))


def test_export_errors(work, binf):
    raw = bytearray(read(binf))
    bad = os.path.join(work, "bad_reserved.bin")
    struct.pack_into("<i", raw, 4 * 30, 7)
    open(bad, "wb").write(raw)
    expect_error("export of a file with a non-zero reserved header slot", ["export_hf.py", bad, os.path.join(work, "bad_out")],
                 ["bad_reserved.bin", "reserved header slot 30"], os.path.join(work, "bad_out"))
    tr = os.path.join(work, "bad_trunc.bin")
    open(tr, "wb").write(read(binf)[:-8])
    expect_error("export of a truncated Llama-family file", ["export_hf.py", tr, os.path.join(work, "bad_out")],
                 ["bad_trunc.bin", "truncated"], os.path.join(work, "bad_out"))


def test_checkpoint_dir(work, binf, other_bin):
    """An out dir: the newest complete checkpoint (model beside its state file) is exported."""
    run = os.path.join(work, "run")
    os.makedirs(run)
    for step, src, state in ((2, other_bin, True), (5, binf, True), (9, other_bin, False)):
        shutil.copy(src, os.path.join(run, "model_%08d.bin" % step))
        if state:
            open(os.path.join(run, "state_%08d.bin" % step), "wb").write(b"\0" * 1024)
    out = os.path.join(work, "run_hf")
    r = script("export_hf.py", run, out, "--no-tokenizer")
    direct = os.path.join(work, "run_direct")
    r2 = script("export_hf.py", binf, direct, "--no-tokenizer")
    check("export of an out dir takes its newest complete checkpoint (step 5, not step 9 without its state file)",
          r.returncode == r2.returncode == 0 and "model_00000005.bin" in r.stdout and
          read(os.path.join(out, "model.safetensors")) == read(os.path.join(direct, "model.safetensors")), r.stdout + r2.stdout)


def test_tokenizer(work, binf, gpt2_bin):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    text = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen liquor jugs",
            "how vexingly quick daft zebras jump", "sphinx of black quartz, judge my vow"] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=290, special_tokens=["<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    tj = os.path.join(work, "tokenizer.json")
    tok.save(tj)
    sample = "the lazy zebra judges five quick foxes"
    ids = tok.encode(sample).ids
    out = os.path.join(work, "tok_file")
    r = script("export_hf.py", binf, out, "--tokenizer", tj)
    ok = r.returncode == 0
    t = AutoTokenizer.from_pretrained(out) if ok else None
    check("--tokenizer tokenizer.json: AutoTokenizer loads the export and encodes as tokenizers does (%d ids)" % len(ids),
          ok and t(sample)["input_ids"] == ids and t.decode(ids) == sample, r.stdout)
    tdir = os.path.join(work, "tok_dir")
    os.makedirs(tdir)
    shutil.copy(tj, tdir)
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"},
              open(os.path.join(tdir, "tokenizer_config.json"), "w"))
    out = os.path.join(work, "tok_dir_out")
    r = script("export_hf.py", binf, out, "--tokenizer", tdir)
    ok = r.returncode == 0
    c = json.load(open(os.path.join(out, "config.json"))) if ok else {}
    t = AutoTokenizer.from_pretrained(out) if ok else None
    check("--tokenizer DIR: its tokenizer_config.json is copied, and config.json's bos/eos ids are its <s>, </s> (%s, %s)"
          % (c.get("bos_token_id"), c.get("eos_token_id")),
          ok and t(sample)["input_ids"] == ids and (c.get("bos_token_id"), c.get("eos_token_id")) == (0, 1)
          and t.eos_token_id == 1, r.stdout)
    out = os.path.join(work, "tok_gpt2")
    r = script("export_hf.py", gpt2_bin, out, "--tokenizer", tj)
    ok = r.returncode == 0
    t = AutoTokenizer.from_pretrained(out) if ok else None
    m = AutoModelForCausalLM.from_pretrained(out) if ok else None
    check("GPT-2 (an llm.c file of vocabulary 300) with --tokenizer tokenizer.json: AutoTokenizer and the model load",
          ok and t(sample)["input_ids"] == ids and type(m).__name__ == "GPT2LMHeadModel", r.stdout)
    # the run's tokenizer.bin (./tokenize shards writes it and a copy of the tokenizer.json beside the shards): the
    # tokenizer.json beside it is taken when its vocabulary is the .bin's, refused by name when not
    text_in = os.path.join(work, "tok_text.txt")
    open(text_in, "w").write("\n".join(text))
    shards = os.path.join(work, "tok_shards")
    r = test_hf.run(["./tokenize", "shards", "--tokenizer", tj, "--in", text_in, "--out-dir", shards, "--doc-token", "</s>",
                     "--val-tokens", "200"])
    m290 = randomize(LlamaForCausalLM(LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=48,
                                                  num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32)), 7)
    m290.save_pretrained(os.path.join(work, "tok_m290"))
    b290 = os.path.join(work, "tok_m290.bin")
    r2 = script("import_hf.py", os.path.join(work, "tok_m290"), b290)
    out = os.path.join(work, "tok_bin")
    r3 = script("export_hf.py", b290, out, "--tokenizer", os.path.join(shards, "tokenizer.bin"))
    ok = r.returncode == r2.returncode == r3.returncode == 0
    t = AutoTokenizer.from_pretrained(out) if ok else None
    check("--tokenizer the run's tokenizer.bin (vocabulary %d): the tokenizer.json beside it, whose vocabulary is the "
          ".bin's, is exported and encodes as tokenizers does" % tok.get_vocab_size(),
          ok and t(sample)["input_ids"] == ids, r.stdout + r2.stdout + r3.stdout)
    other = os.path.join(work, "tok_shards_other")
    shutil.copytree(shards, other)
    tj3 = json.load(open(os.path.join(other, "tokenizer.json")))
    v = tj3["model"]["vocab"]
    a_tok = next(k for k, i in v.items() if i == 100)
    v["\u0100" + a_tok] = v.pop(a_tok)  # id 100's string gains a leading byte 0x00 (not a merge's result; only the ids count)
    json.dump(tj3, open(os.path.join(other, "tokenizer.json"), "w"))
    expect_error("--tokenizer tokenizer.bin beside a tokenizer.json of another vocabulary",
                 ["export_hf.py", b290, os.path.join(work, "tok_bin_bad"), "--tokenizer", os.path.join(other, "tokenizer.bin")],
                 ["tokenizer.bin", "token 100", "tokenizer.json"], os.path.join(work, "tok_bin_bad"))
    small = os.path.join(work, "tok_small.json")
    tj2 = json.load(open(tj))
    tj2["added_tokens"].append(dict(tj2["added_tokens"][0], id=400, content="<big>"))
    json.dump(tj2, open(small, "w"))
    expect_error("export with no tokenizer to be found (a vocabulary of 300, not GPT-2's)", ["export_hf.py", binf,
                 os.path.join(work, "tok_none")], ["no tokenizer", "300", "--tokenizer", "--no-tokenizer"],
                 os.path.join(work, "tok_none"))
    expect_error("--tokenizer with an id beyond the model's vocabulary", ["export_hf.py", binf, os.path.join(work, "tok_bad"),
                                                                          "--tokenizer", small],
                 ["tok_small.json", "token id 400", "300"], os.path.join(work, "tok_bad"))


def test_presets():
    """The file's tensor list (scripts/llmc_llama.py, which import and export use) at the published shapes gives the
    published parameter counts, vocabulary padding aside."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from llmc_llama import llama_shapes
    presets = [  # (name, C, L, NH, KV, H, V, tied, qkv_bias, published count)
        ("SmolLM-135M", 576, 30, 9, 3, 1536, 49152, 1, 0, 134515008),
        ("Llama-3.2-1B", 2048, 16, 32, 8, 8192, 128256, 1, 0, 1235814400),
        ("TinyLlama-1.1B", 2048, 22, 32, 4, 5632, 32000, 0, 0, 1100048384),
        ("Qwen2.5-0.5B", 896, 24, 14, 2, 4864, 151936, 1, 1, 494032768)]
    got = {}
    for name, C, L, NH, KV, H, V, tied, qb, want in presets:
        d = dict(C=C, L=L, NH=NH, KV=KV, hd=C // NH, H=H, V=V, Vp=V, tied=tied, qkv_bias=qb, qk_norm=0)
        got[name] = (sum(int(np.prod(s)) for _, s in llama_shapes(d)), want)
    check("the file's tensors at the published shapes count the published parameters: %s" %
          ", ".join("%s %d" % (k, v[0]) for k, v in got.items()), all(a == b for a, b in got.values()), str(got))


def test_generate(m, binf):
    """transformers' greedy generation from the export's weights equals argmax of the reference forward."""
    prompt = [5, 17, 42]
    with torch.no_grad():
        hg = m.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=0)[0].tolist()
    seq = list(prompt)
    for _ in range(12):
        seq.append(int(ref_logits(binf, torch.tensor([seq]))[0, -1].argmax()))
    check("greedy generation: transformers' generate(do_sample=False) equals argmax of the spec's forward on the file, "
          "12 tokens, %d distinct" % len(set(seq[3:])), hg == seq and len(set(seq[3:])) >= 3, "%s vs %s" % (hg, seq))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", help="scratch directory (default: a fresh temporary one, removed at the end)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="test_hf_llama.")
    try:
        torch.manual_seed(0)
        ms = models()
        bins = [test_model(work, i, label, m, save) for i, (label, m, save) in enumerate(ms)]
        test_inputs(work, ms[0][1], bins[0])
        test_llmc(work, ms[0][1], ms[1][1], bins[1])
        test_refusals(work, ms[0][1], os.path.join(work, "m2_hf"))
        test_v5_configs(work)
        test_missing_keys(work)
        test_export_errors(work, bins[0])
        test_geglu(work)
        test_checkpoint_dir(work, bins[0], bins[2])
        from transformers import GPT2Config, GPT2LMHeadModel
        g = os.path.join(work, "gpt2_hf")
        GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=32, n_embd=32, n_layer=1, n_head=2)).save_pretrained(g)
        r = script("import_hf.py", g, g + ".bin")
        if r.returncode != 0:
            print(r.stdout)
        test_tokenizer(work, bins[0], g + ".bin")
        test_generate(ms[0][1], bins[0])
        test_presets()
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (test_hf.passed, test_hf.failed))
    sys.exit(1 if test_hf.failed else 0)


if __name__ == "__main__":
    main()
