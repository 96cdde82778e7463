"""ref_llama.py: the reference for test/test_llama_cpu.c. PyTorch autograd in fp32 through transformers' own Llama
pieces (LlamaRMSNorm, LlamaRotaryEmbedding with and without rope_type llama3, apply_rotary_pos_emb, repeat_kv)
computes every kernel's forward and backward on random inputs; the inputs and results go to one file of named
records (name: 48 bytes, count: int64, then count float32), which the C test reads by name.

usage: /usr/bin/python3 test/ref_llama.py --out-dir DIR   (writes DIR/llama_ref.bin)
"""
import argparse
import math
import os
import struct

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb,
                                                      repeat_kv)

torch.manual_seed(1234)
records = []


def put(name, t):
    records.append((name, t.detach().to(torch.float32).contiguous().reshape(-1)))


def rand(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float32) * scale).requires_grad_(True)


def rmsnorm_case():
    N, C, eps = 6, 40, 1e-5
    x, dy = rand(N, C, scale=0.01), torch.randn(N, C)  # mean(x^2) ~ 1e-4: eps matters, and where it goes
    norm = LlamaRMSNorm(C, eps=eps)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.3 * torch.randn(C))
    y = norm(x)
    y.backward(dy)
    put("rms.x", x); put("rms.w", norm.weight); put("rms.dy", dy)
    put("rms.y", y); put("rms.rstd", torch.rsqrt(x.pow(2).mean(-1) + eps))
    put("rms.dx", x.grad); put("rms.dw", norm.weight.grad)


def qknorm_case():
    # Qwen 3's q_norm / k_norm: an RMSNorm over head_dim with one weight shared by the heads
    BT, NH, KV, hd, eps = 5, 4, 2, 8, 1e-6
    qkv, d = rand(BT, (NH + 2 * KV) * hd), torch.randn(BT, (NH + 2 * KV) * hd)
    qn, kn = LlamaRMSNorm(hd, eps=eps), LlamaRMSNorm(hd, eps=eps)
    with torch.no_grad():
        qn.weight.copy_(1.0 + 0.3 * torch.randn(hd))
        kn.weight.copy_(1.0 + 0.3 * torch.randn(hd))
    q, k, v = qkv.split([NH * hd, KV * hd, KV * hd], dim=-1)
    out = torch.cat([qn(q.view(BT, NH, hd)).reshape(BT, -1), kn(k.view(BT, KV, hd)).reshape(BT, -1), v], dim=-1)
    out.backward(d)
    put("qkn.inp", qkv); put("qkn.qw", qn.weight); put("qkn.kw", kn.weight); put("qkn.dout", d)
    put("qkn.out", out); put("qkn.dinp", qkv.grad); put("qkn.dqw", qn.weight.grad); put("qkn.dkw", kn.weight.grad)


def rope_module(hd, theta, maxT, scaling):
    kw = dict(hidden_size=hd * 4, num_attention_heads=4, rope_theta=theta, max_position_embeddings=maxT)
    if scaling:
        kw["rope_scaling"] = dict(rope_type="llama3", factor=scaling[0], low_freq_factor=scaling[1],
                                  high_freq_factor=scaling[2], original_max_position_embeddings=scaling[3])
    return LlamaRotaryEmbedding(config=LlamaConfig(**kw))


def rope_tables(tag, hd, theta, maxT, scaling):
    rot = rope_module(hd, theta, maxT, scaling)
    pos = torch.arange(maxT)[None, :]
    cos, sin = rot(torch.zeros(1, dtype=torch.float32), pos)
    cos, sin = cos[0], sin[0]
    assert torch.equal(cos[:, : hd // 2], cos[:, hd // 2:]) and torch.equal(sin[:, : hd // 2], sin[:, hd // 2:])
    put(tag + ".inv_freq", rot.inv_freq)
    put(tag + ".cos", cos[:, : hd // 2]); put(tag + ".sin", sin[:, : hd // 2])
    return cos, sin


def rope_apply_case(tag, hd, theta, scaling):
    B, T, NH, KV = 2, 9, 4, 2
    cos, sin = rope_tables(tag + "tab", hd, theta, T, scaling)
    qkv = rand(B, T, (NH + 2 * KV) * hd)
    d = torch.randn(B, T, (NH + 2 * KV) * hd)
    q, k, v = qkv.split([NH * hd, KV * hd, KV * hd], dim=-1)
    q = q.view(B, T, NH, hd).transpose(1, 2)
    k = k.view(B, T, KV, hd).transpose(1, 2)
    qr, kr = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    out = torch.cat([qr.transpose(1, 2).reshape(B, T, -1), kr.transpose(1, 2).reshape(B, T, -1), v], dim=-1)
    out.backward(d)
    put(tag + ".qkv", qkv); put(tag + ".dout", d); put(tag + ".out", out); put(tag + ".dqkv", qkv.grad)


def glu_case(tag, act):
    """A gated MLP, packed up | gate (up_proj's rows first, gate_proj's second: docs/llama.md, "The model file"):
    SwiGLU's act silu, GeGLU's (Gemma's MLP, transformers' GemmaMLP with gelu_pytorch_tanh) gelu tanh."""
    N, H = 7, 24
    inp, d = rand(N, 2 * H, scale=2.0), torch.randn(N, H)
    up, gate = inp.split([H, H], dim=-1)
    out = act(gate) * up
    out.backward(d)
    put(tag + ".inp", inp); put(tag + ".dout", d); put(tag + ".out", out); put(tag + ".dinp", inp.grad)


def relu2_case():
    N = 7 * 24  # ReLU² (modded-nanogpt's MLP activation): relu(x)^2, elementwise
    inp, d = rand(N, scale=2.0), torch.randn(N)
    out = torch.relu(inp).square()
    out.backward(d)
    put("r2.inp", inp); put("r2.dout", d); put("r2.out", out); put("r2.dinp", inp.grad)


def attention(qkv, B, T, NH, KV, hd):
    q, k, v = qkv.split([NH * hd, KV * hd, KV * hd], dim=-1)
    q = q.view(B, T, NH, hd).transpose(1, 2)
    k = repeat_kv(k.view(B, T, KV, hd).transpose(1, 2), NH // KV)
    v = repeat_kv(v.view(B, T, KV, hd).transpose(1, 2), NH // KV)
    att = q @ k.transpose(2, 3) / math.sqrt(hd)
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
    return (att @ v).transpose(1, 2).reshape(B, T, NH * hd), att


def attention_case(tag, NH, KV):
    B, T, hd = 2, 9, 16
    qkv, d = rand(B, T, (NH + 2 * KV) * hd), torch.randn(B, T, NH * hd)
    out, att = attention(qkv, B, T, NH, KV, hd)
    out.backward(d)
    put(tag + ".qkv", qkv); put(tag + ".dout", d); put(tag + ".out", out); put(tag + ".att", att)
    put(tag + ".dqkv", qkv.grad)


# The masks of arch/attn_mask.h (issue 49), as explicit booleans: each row's document starts (a separator ends its
# document: the token after it starts the next), a sliding window of W keys (the query's own included).
MASK_B, MASK_T, MASK_DOCS = 2, 37, ([0, 1, 9, 10, 23, 36], [0, 17])


def mask_doc_start():
    ds = torch.zeros(MASK_B, MASK_T, dtype=torch.long)
    for b, starts in enumerate(MASK_DOCS):
        for s in starts:
            ds[b, s:] = s
    return ds


def mask_bool(docs, window):
    T = MASK_T
    q, k = torch.arange(T).view(1, T, 1), torch.arange(T).view(1, 1, T)
    m = (k <= q).expand(MASK_B, T, T).clone()
    if window:
        m &= q - k < window
    if docs:
        m &= k >= mask_doc_start().view(MASK_B, T, 1)
    return m.unsqueeze(1)  # (B, 1, T, T)


def masked_attention_case(tag, docs, window, NH=4, KV=2, hd=16):
    """float64 attention with an explicit boolean mask (torch's masked softmax), forward and backward."""
    B, T = MASK_B, MASK_T
    qkv = torch.randn(B, T, (NH + 2 * KV) * hd, dtype=torch.float64).requires_grad_(True)
    d = torch.randn(B, T, NH * hd, dtype=torch.float64)
    q, k, v = qkv.split([NH * hd, KV * hd, KV * hd], dim=-1)
    q = q.view(B, T, NH, hd).transpose(1, 2)
    k = repeat_kv(k.view(B, T, KV, hd).transpose(1, 2), NH // KV)
    v = repeat_kv(v.view(B, T, KV, hd).transpose(1, 2), NH // KV)
    m = mask_bool(docs, window)
    att = (q @ k.transpose(2, 3) / math.sqrt(hd)).masked_fill(~m, float("-inf")).softmax(-1)
    out = (att @ v).transpose(1, 2).reshape(B, T, NH * hd)
    out.backward(d)
    put(tag + ".qkv", qkv); put(tag + ".dout", d); put(tag + ".out", out); put(tag + ".att", att)
    put(tag + ".dqkv", qkv.grad)
    put(tag + ".pairs", m.sum(dim=(1, 2, 3)).double())  # the visible pairs of each row
    if docs:
        put(tag + ".doc_start", mask_doc_start().double())


def chain_case():
    # Qwen 3's attention core: QK-norm, then RoPE (llama3 scaling), then GQA 3:1, gradients through all three
    B, T, NH, KV, hd, eps = 2, 7, 6, 2, 8, 1e-6
    cos, sin = rope_tables("chaintab", hd, 500000.0, T, (8.0, 1.0, 4.0, 4))
    qkv, d = rand(B, T, (NH + 2 * KV) * hd), torch.randn(B, T, NH * hd)
    qn, kn = LlamaRMSNorm(hd, eps=eps), LlamaRMSNorm(hd, eps=eps)
    with torch.no_grad():
        qn.weight.copy_(1.0 + 0.3 * torch.randn(hd))
        kn.weight.copy_(1.0 + 0.3 * torch.randn(hd))
    q, k, v = qkv.split([NH * hd, KV * hd, KV * hd], dim=-1)
    q = qn(q.view(B, T, NH, hd)).transpose(1, 2)
    k = kn(k.view(B, T, KV, hd)).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    packed = torch.cat([q.transpose(1, 2).reshape(B, T, -1), k.transpose(1, 2).reshape(B, T, -1), v], dim=-1)
    out, _ = attention(packed, B, T, NH, KV, hd)
    out.backward(d)
    put("chain.qkv", qkv); put("chain.qw", qn.weight); put("chain.kw", kn.weight); put("chain.dout", d)
    put("chain.out", out); put("chain.dqkv", qkv.grad); put("chain.dqw", qn.weight.grad); put("chain.dkw", kn.weight.grad)


def model_case(tag, NH, KV, tied, qkv_bias):
    """A whole LlamaForCausalLM (Qwen2ForCausalLM for qkv_bias) in fp32: its parameters in the model file's order
    (docs/llama.md, "The model file"), tokens, logits, the mean cross-entropy and every parameter's gradient in the same order."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, LlamaForCausalLM
    V, C, L, hd, H, B, T = 200, 32, 2, 8, 48, 2, 8
    Vp = (V + 127) // 128 * 128
    kw = dict(vocab_size=V, hidden_size=C, intermediate_size=H, num_hidden_layers=L, num_attention_heads=NH,
              num_key_value_heads=KV, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
              tie_word_embeddings=tied, attn_implementation="eager")
    if qkv_bias:
        model = Qwen2ForCausalLM(Qwen2Config(**kw, use_sliding_window=False))
    else:
        model = LlamaForCausalLM(LlamaConfig(**kw, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                     high_freq_factor=4.0, original_max_position_embeddings=4)))
    with torch.no_grad():  # weights big enough that every path moves the logits; norms away from 1
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.2 * torch.randn_like(p) if "norm" in name else 0.3 * torch.randn_like(p))
    tokens = torch.randint(0, V, (B, T + 1))
    out = model(tokens[:, :T])
    logits = out.logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
    loss.backward()
    m = model.model

    def pad(w):  # (V, C) -> (Vp, C), the padding rows zero
        return torch.cat([w, torch.zeros(Vp - V, w.shape[1])], 0)

    def layers(f):
        return torch.stack([f(layer) for layer in m.layers])

    def tensors(g):  # g(p) is p or p.grad
        a = lambda l: l.self_attn
        t = [pad(g(m.embed_tokens.weight)), layers(lambda l: g(l.input_layernorm.weight)),
             layers(lambda l: torch.cat([g(a(l).q_proj.weight), g(a(l).k_proj.weight), g(a(l).v_proj.weight)], 0))]
        if qkv_bias:
            t.append(layers(lambda l: torch.cat([g(a(l).q_proj.bias), g(a(l).k_proj.bias), g(a(l).v_proj.bias)], 0)))
        t += [layers(lambda l: g(a(l).o_proj.weight)), layers(lambda l: g(l.post_attention_layernorm.weight)),
              layers(lambda l: torch.cat([g(l.mlp.up_proj.weight), g(l.mlp.gate_proj.weight)], 0)),
              layers(lambda l: g(l.mlp.down_proj.weight)), g(m.norm.weight)]
        if not tied:
            t.append(pad(g(model.lm_head.weight)))
        return torch.cat([x.reshape(-1) for x in t])

    put(tag + ".params", tensors(lambda p: p))
    put(tag + ".grads", tensors(lambda p: p.grad))
    put(tag + ".tokens", tokens.float())
    put(tag + ".logits", logits)
    put(tag + ".loss", loss.reshape(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    rmsnorm_case()
    qknorm_case()
    rope_tables("rope_default", 64, 10000.0, 4096, None)
    rope_tables("rope_llama3", 64, 500000.0, 16384, (32.0, 1.0, 4.0, 8192))
    rope_apply_case("ropea", 16, 10000.0, None)
    rope_apply_case("ropes", 16, 500000.0, (8.0, 1.0, 4.0, 4))  # a small original context so T = 9 spans it
    glu_case("swi", torch.nn.functional.silu)
    glu_case("geg", lambda g: torch.nn.functional.gelu(g, approximate="tanh"))
    relu2_case()
    attention_case("gqa41", 8, 2)
    attention_case("gqa11", 4, 4)
    attention_case("mqa", 4, 1)
    masked_attention_case("mask_causal", False, 0)
    masked_attention_case("mask_doc", True, 0)
    masked_attention_case("mask_win", False, 5)
    masked_attention_case("mask_docwin", True, 5)
    masked_attention_case("mask_docwin_mqa", True, 7, NH=4, KV=1, hd=8)
    chain_case()
    model_case("m_gqa_tied", 4, 2, True, False)
    model_case("m_mha_untied", 4, 4, False, False)
    model_case("m_mqa_qwen2", 4, 1, True, True)
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "llama_ref.bin")
    with open(path + ".tmp", "wb") as f:
        for name, t in records:
            f.write(name.encode().ljust(48, b"\0"))
            f.write(struct.pack("<q", t.numel()))
            f.write(t.numpy().astype("<f4").tobytes())
    os.replace(path + ".tmp", path)
    print(f"wrote {len(records)} records to {path}")


if __name__ == "__main__":
    main()
