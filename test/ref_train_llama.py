#!/usr/bin/python3
"""Independent float64 reference for whole training runs of a Llama-family model (test/test_reference.sh): the
model is transformers' LlamaForCausalLM in float64 (with --mlp relu2 its MLPs replaced by down(relu(up x)^2); with
--mlp geglu its hidden_act gelu_pytorch_tanh, Gemma's GeGLU down(gelu_tanh(gate x) * up x)), the recipe ref_train.py's (data order, accumulation, the
pre-clip norm, clipping, warmup and decay, AdamW with bias correction and decoupled weight decay on the matmul
weights and embeddings only). It shares with the trainer only the input files it writes itself (the model file
from the format's specification, docs/llama.md, and a token shard) and reads the trainer's results through its
JSON log and checkpoint.

    ref_train_llama.py make --out-dir DIR [shape and recipe options]
    ref_compare.py --out-dir DIR --log LOG --ckpt-dir CK [--tol-...]   (test/ref_compare.py: numpy alone)
"""
import argparse
import math
import os
import struct
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_train import adafactor_step, add_args, make_tokens, plant_separators, run, train, write_inputs  # noqa: E402
from ref_compare import LLAMA_MAGIC  # noqa: E402
from ref_gpt2 import attn_mask  # noqa: E402

DT = torch.float64
DECAYED = ("embed_tokens", "q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj", "up_proj", "gate_proj",
           "down_proj", "lm_head")




def muon_pieces(name, shape):
    """The Llama family's Muon matrices: each projection of the blocks, q, k, v, o, up, gate and down apart."""
    return [()] if name.startswith("model.layers.") and name.endswith("_proj.weight") else []


class ReLU2MLP(torch.nn.Module):
    """modded-nanogpt's MLP: down(relu(up x)^2), no gate (the trainer's --mlp relu2)."""

    def __init__(self, C, H):
        super().__init__()
        self.up_proj = torch.nn.Linear(C, H, bias=False)
        self.down_proj = torch.nn.Linear(H, C, bias=False)

    def forward(self, x):
        return self.down_proj(torch.relu(self.up_proj(x)).square())


def build(a):
    """LlamaForCausalLM, or with --qkv-bias Qwen2ForCausalLM (q/k/v biases, which must not be decayed)."""
    Config, Model = (Qwen2Config, Qwen2ForCausalLM) if a.qkv_bias else (LlamaConfig, LlamaForCausalLM)
    cfg = Config(vocab_size=a.vocab, hidden_size=a.channels, num_hidden_layers=a.layers, intermediate_size=a.hidden,
                 num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, max_position_embeddings=a.max_seq,
                 rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=bool(a.tied),
                 hidden_act="gelu_pytorch_tanh" if a.mlp == "geglu" else "silu")
    cfg._attn_implementation = "eager"
    torch.manual_seed(a.seed)
    m = Model(cfg)
    if a.mlp == "relu2":
        for layer in m.model.layers:
            layer.mlp = ReLU2MLP(a.channels, a.hidden)
    m = m.to(DT)
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():  # norm gains near 1 and biases large (decaying them would show), weights ~ 1/sqrt(fan-in)
        for name, p in m.named_parameters():
            if "norm" in name:
                t = 1.0 + 0.2 * torch.randn(p.shape, generator=g, dtype=DT)
            elif name.endswith(".bias"):
                t = 0.3 * torch.randn(p.shape, generator=g, dtype=DT)
            elif "embed" in name or "lm_head" in name:
                t = 0.05 * torch.randn(p.shape, generator=g, dtype=DT)
            else:
                t = torch.randn(p.shape, generator=g, dtype=DT) / math.sqrt(p.shape[-1])
            p.copy_(t.float().double())  # values the fp32 file holds exactly
    return m


def file_tensors(m, Vp, use_grad=False):
    """(name, array) in the model file's order (docs/llama.md), from the model's parameters (or their .grad)."""
    sd = dict(m.named_parameters())
    get = lambda n: (sd[n].grad if use_grad else sd[n]).detach().double().numpy()  # noqa: E731
    L = m.config.num_hidden_layers
    pad = lambda w: np.concatenate([w, np.zeros((Vp - w.shape[0], w.shape[1]))])  # noqa: E731
    lay = lambda f: np.stack([f("model.layers.%d." % l) for l in range(L)])  # noqa: E731
    out = [("wte", pad(get("model.embed_tokens.weight"))),
           ("attn_norm", lay(lambda p: get(p + "input_layernorm.weight"))),
           ("wqkv", lay(lambda p: np.concatenate([get(p + "self_attn.%s_proj.weight" % x) for x in "qkv"])))]
    if "model.layers.0.self_attn.q_proj.bias" in sd:
        out.append(("bqkv", lay(lambda p: np.concatenate([get(p + "self_attn.%s_proj.bias" % x) for x in "qkv"]))))
    out += [("wo", lay(lambda p: get(p + "self_attn.o_proj.weight"))),
            ("mlp_norm", lay(lambda p: get(p + "post_attention_layernorm.weight"))),
            ("wfc", lay(lambda p: np.concatenate([get(p + "mlp.up_proj.weight")] + ([get(p + "mlp.gate_proj.weight")]
                                                  if p + "mlp.gate_proj.weight" in sd else [])))),
            ("wproj", lay(lambda p: get(p + "mlp.down_proj.weight"))),
            ("final_norm", get("model.norm.weight"))]
    if not m.config.tie_word_embeddings:
        out.append(("lm_head", pad(get("lm_head.weight"))))
    return out


def file_groups(m):
    """The file's tensors (file_tensors' order) as (name, layer or None, the model's parameters it packs by rows):
    the trainer's tensors, which Adafactor steps whole (its row and column means, RMS and clipping per tensor)."""
    sd = dict(m.named_parameters())
    lay = lambda name, parts: [(name, l, ["model.layers.%d.%s" % (l, x) for x in parts])  # noqa: E731
                               for l in range(m.config.num_hidden_layers)]
    out = [("wte", None, ["model.embed_tokens.weight"])] + lay("attn_norm", ["input_layernorm.weight"])
    out += lay("wqkv", ["self_attn.%s_proj.weight" % x for x in "qkv"])
    if "model.layers.0.self_attn.q_proj.bias" in sd:
        out += lay("bqkv", ["self_attn.%s_proj.bias" % x for x in "qkv"])
    gate = ["mlp.gate_proj.weight"] if "model.layers.0.mlp.gate_proj.weight" in sd else []
    out += lay("wo", ["self_attn.o_proj.weight"]) + lay("mlp_norm", ["post_attention_layernorm.weight"])
    out += lay("wfc", ["mlp.up_proj.weight"] + gate) + lay("wproj", ["mlp.down_proj.weight"])
    out.append(("final_norm", None, ["model.norm.weight"]))
    if not m.config.tie_word_embeddings:
        out.append(("lm_head", None, ["lm_head.weight"]))
    return out


def adafactor_stepper(m, names, a, Vp):
    """adafactor_all for train(): each file tensor (the embedding and head padded to Vp rows, as the trainer holds
    them) assembled from the model's parameters, stepped by ref_train's adafactor_step, and split back; its packed
    state kept per tensor and layer (state)."""
    sd = dict(m.named_parameters())
    state = {}

    def step(grads, lr, t):
        g_of = dict(zip(names, grads))
        for name, l, parts in file_groups(m):
            P = np.concatenate([sd[x].detach().numpy() for x in parts])
            G = np.concatenate([g_of[x].numpy() for x in parts])
            rows = P.shape[0]
            if name in ("wte", "lm_head"):
                P, G = (np.concatenate([X, np.zeros((Vp - rows,) + X.shape[1:])]) for X in (P, G))
            st = state.setdefault((name, l), np.zeros(P.shape[0] + P.shape[1] if P.ndim == 2 else P.size))
            adafactor_step(P, G, st, lr, t, any(k in parts[0] for k in DECAYED), a)
            at = 0
            for x in parts:
                v = sd[x].detach().numpy()
                v[...] = P[at:at + v.shape[0]]
                at += v.shape[0]
    return step, state


def adafactor_moments(m, Vp, state):
    """The packed state in the file's layout (the state file's m): each tensor's at the start of its place."""
    out = []
    for n, t in file_tensors(m, Vp):
        z = np.zeros(t.shape)
        for (name, l), st in state.items():
            if name == n:
                (z[l] if l is not None else z).reshape(-1)[:st.size] = st
        out.append((n, z))
    return out


MLP_SLOT = {"swiglu": 0, "relu2": 1, "gelu": 2, "geglu": 3}


def header(a, Vp):
    h = [0] * 256
    h[:15] = [LLAMA_MAGIC, 1, a.max_seq, a.vocab, Vp, a.layers, a.heads, a.kv_heads, a.channels,
              a.channels // a.heads, a.hidden, a.tied, a.qkv_bias, 0, 0]
    h[15] = struct.unpack("<i", struct.pack("<f", 1e-5))[0]
    h[16] = struct.unpack("<i", struct.pack("<f", 10000.0))[0]
    h[21] = MLP_SLOT[a.mlp]  # the MLP's activation (docs/llama.md, slot 21)
    return np.array(h, dtype="<i4")


def cmd_make(a):
    V, Vp, B, T, A, S = a.vocab, (a.vocab + 127) // 128 * 128, a.batch, a.seq, a.accum, a.steps
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    m = build(a)
    p0 = [(n, t.copy()) for n, t in file_tensors(m, Vp)]
    gen = torch.Generator().manual_seed(a.seed + 1)
    ntok = (S * A + 3) * B * T + 1
    tokens = plant_separators(gen, make_tokens(gen, V, ntok), a.doc_sep)
    params = [p for _, p in m.named_parameters()]
    names = [n for n, _ in m.named_parameters()]

    def loss_of(x, y):
        if a.doc_sep < 0 and not a.attn_window:
            return torch.nn.functional.cross_entropy(m(x).logits.reshape(-1, V), y.reshape(-1))
        # the masks as transformers takes a custom one: 4D, 0 where visible and the dtype's minimum elsewhere; with
        # --rope-restart each token's position counts from its document's start
        vis = attn_mask(x, a.doc_sep if a.doc_sep >= 0 else None, a.attn_window)
        mask = torch.zeros(vis.shape, dtype=torch.float64).masked_fill(~vis, torch.finfo(torch.float64).min)
        pos = torch.arange(x.shape[1]).expand(x.shape).clone()
        if a.rope_restart:
            doc = attn_mask(x, a.doc_sep, 0).squeeze(1)  # documents alone: each query's first key is its document's start
            first = doc.int().argmax(dim=-1)
            pos = pos - first
        return torch.nn.functional.cross_entropy(m(x, attention_mask=mask, position_ids=pos).logits.reshape(-1, V),
                                                 y.reshape(-1))
    stepper, af_state = adafactor_stepper(m, names, a, Vp)
    losses, norms, lrs, ms, clipped = train(params, names, loss_of, lambda n: any(k in n for k in DECAYED), tokens, a,
                                            muon_pieces, adafactor_all=stepper)
    for p, mo in zip(params, ms):
        p.grad = mo  # file_tensors(use_grad) then lays the first moments out in the file's order
    moments = adafactor_moments(m, Vp, af_state) if a.optimizer == "adafactor" else file_tensors(m, Vp, True)
    write_inputs(a, header(a, Vp), [t for _, t in p0], tokens)
    np.savez(os.path.join(a.out_dir, "ref.npz"), losses=np.array(losses), norms=np.array(norms), lrs=np.array(lrs),
             V=V, names=np.array([n for n, _ in p0]), **{"p0_" + n: t for n, t in p0},
             **{"p_" + n: t for n, t in file_tensors(m, Vp)}, **{"m_" + n: t for n, t in moments})
    clip = a.grad_clip
    print(f"{'Qwen 2 (q/k/v bias)' if a.qkv_bias else 'Llama'} reference ({a.mlp}): C={a.channels} NH={a.heads} KV={a.kv_heads} H={a.hidden} L={a.layers} "
          f"{'tied' if a.tied else 'untied'} B={B} T={T} A={A} steps={S}: losses {losses[0]:.5f} .. {losses[-1]:.5f}, "
          f"norms {norms[0]:.4f} .. {norms[-1]:.4f}, {clipped} of {S} steps clip at {clip}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_args(ap, channels=64, accum=2, steps=20, warmup=3)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--tied", type=int, default=0)
    ap.add_argument("--qkv-bias", type=int, default=0, help="1: Qwen2ForCausalLM, q/k/v biases (not decayed)")
    ap.add_argument("--mlp", choices=("swiglu", "relu2", "geglu"), default="swiglu")
    return run(ap.parse_args(), cmd_make)


if __name__ == "__main__":
    sys.exit(main())
