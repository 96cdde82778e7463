#!/usr/bin/python3
"""Independent float64 PyTorch reference for the fp32 C GPT-2 trainer (llm.c style).

Run with Debian's python (torch 1.13 + numpy):

    /usr/bin/python3 test/ref_gpt2.py --out-dir DIR [--layers 2 --channels 64 --heads 4
        --vocab 101 --padded-vocab 128 --max-seq 32 --batch 4 --seq 16 --steps 10 --seed 1337]
        [--check]

Writes into DIR:
  model.bin  llm.c checkpoint, version 3 (fp32): 256 x int32 header
             [0]=20240326 [1]=3 [2]=maxT [3]=V [4]=L [5]=NH [6]=C [7]=Vp, then the 16
             parameter tensors (order below) as float32, row-major, back to back.
  ref.bin    reference state: 256 x int32 header
             [0]=20240327 [1]=100 [2]=B [3]=T [4]=S [5]=V [6]=Vp [7]=P,
             float32 bit patterns at [16]=lr [17]=beta1 [18]=beta2 [19]=eps
             [20]=weight_decay [21]=grad_clip; then
             x (B*T int32), y (B*T int32), logits (B*T*V f32, first V columns only),
             loss (1 f32), grads (P f32, parameter layout), losses (S f32),
             grad norms (S f32, pre-clip global L2 norm), final params (P f32).

All computation is float64. --check additionally runs torch.autograd.gradcheck of the
whole-model loss on a tiny instance (w.r.t. all 16 parameter tensors).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

DT = torch.float64

MODEL_VERSION = 3
REF_MAGIC = 20240327
REF_VERSION = 100

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the model file's magic and its tensors in the file's order, as test/ref_compare.py reads them back
from ref_compare import MODEL_MAGIC, PARAM_NAMES  # noqa: E402
# tensors that get weight decay (matmul weights and embeddings)
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def param_shapes(V, Vp, maxT, L, C):
    return {
        "wte": (Vp, C), "wpe": (maxT, C),
        "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }


def init_params(gen, V, Vp, maxT, L, C):
    """Returns list of 16 float64 leaf tensors in llm.c order. Deterministic in gen.
    Values are rounded to float32 precision (then held as float64)."""
    shapes = param_shapes(V, Vp, maxT, L, C)

    def randn(shape, std, mean=0.0):
        return mean + std * torch.randn(shape, generator=gen, dtype=DT)

    p = {}
    wte = torch.zeros((Vp, C), dtype=DT)
    wte[:V] = randn((V, C), 0.02)
    p["wte"] = wte
    p["wpe"] = randn(shapes["wpe"], 0.02)
    for name in PARAM_NAMES[2:]:
        shp = shapes[name]
        if name in ("qkvw", "attprojw", "fcw", "fcprojw"):
            p[name] = randn(shp, 0.1)
        elif name in ("ln1w", "ln2w", "lnfw"):
            p[name] = randn(shp, 0.1, mean=1.0)
        else:  # biases, LayerNorm biases
            p[name] = randn(shp, 0.02)
    out = []
    for name in PARAM_NAMES:
        assert tuple(p[name].shape) == tuple(shapes[name]), name
        # round to fp32-representable values (kept in float64) so the reference starts
        # from exactly the weights stored in model.bin, which the C code loads
        out.append(p[name].float().double().requires_grad_(True))
    return out


def layernorm(x, w, b, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attn_mask(x, sep=None, window=0):
    """The trainer's attention mask (arch/attn_mask.h) as explicit booleans, (B, 1, T, T): key k visible to query q
    iff k <= q, q - k < window (window > 0), and k is in q's document: at or after the token following the latest
    separator before q (sep None: one document a row; a separator ends its own document)."""
    B, T = x.shape
    q = torch.arange(T).view(T, 1)
    k = torch.arange(T).view(1, T)
    m = (k <= q).expand(B, T, T).clone()
    if window:
        m &= (q - k < window)
    if sep is not None:
        start = torch.zeros(B, T, dtype=torch.long)
        for b in range(B):
            s = 0
            for t in range(T):
                start[b, t] = s
                if int(x[b, t]) == sep:
                    s = t + 1
        m &= k.view(1, 1, T) >= start.view(B, T, 1)
    return m.unsqueeze(1)


def forward(params, x, y, V, NH, mask=None):
    """Returns (logits over all Vp columns (B,T,Vp), loss scalar). Everything float64. mask: attn_mask's (B, 1, T, T)
    booleans, or None: causal."""
    (wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb,
     ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb) = params
    B, T = x.shape
    C = wte.shape[1]
    L = ln1w.shape[0]
    hs = C // NH
    pos = torch.arange(T)
    h = wte[x] + wpe[pos].unsqueeze(0)  # (B,T,C)
    if mask is None:
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        a = layernorm(h, ln1w[l], ln1b[l])
        qkv = a @ qkvw[l].t() + qkvb[l]  # (B,T,3C)
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B,NH,T,hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        yatt = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        h = h + (yatt @ attprojw[l].t() + attprojb[l])
        m = layernorm(h, ln2w[l], ln2b[l])
        m = gelu_tanh(m @ fcw[l].t() + fcb[l])
        h = h + (m @ fcprojw[l].t() + fcprojb[l])
    h = layernorm(h, lnfw, lnfb)
    logits = h @ wte.t()  # (B,T,Vp)
    lv = logits[..., :V]  # softmax / CE only over the real vocab
    logp = torch.log_softmax(lv, dim=-1)
    loss = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1).mean()
    return logits, loss


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def global_norm(grads):
    return torch.sqrt(sum((g * g).sum() for g in grads))


def train(params, x, y, V, NH, steps, lr, b1, b2, eps, wd, clip):
    """Hand-written AdamW (llm.c formulas) with global-norm grad clipping, float64."""
    params = [p.detach().clone().requires_grad_(True) for p in params]
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    losses, norms = [], []
    for s in range(steps):
        t = s + 1
        for p in params:
            p.grad = None
        _, loss = forward(params, x, y, V, NH)
        grads = torch.autograd.grad(loss, params)
        n = global_norm(grads).item()
        losses.append(loss.item())
        norms.append(n)
        scale = clip / (n + 1e-6) if n > clip else 1.0
        with torch.no_grad():
            for name, p, g, m, v in zip(PARAM_NAMES, params, grads, ms, vs):
                g = g * scale
                m.mul_(b1).add_((1.0 - b1) * g)
                v.mul_(b2).add_((1.0 - b2) * g * g)
                mhat = m / (1.0 - b1 ** t)
                vhat = v / (1.0 - b2 ** t)
                d = wd if name in DECAY else 0.0
                p.sub_(lr * (mhat / (torch.sqrt(vhat) + eps) + d * p))
    return params, losses, norms


def f32(t):
    a = t.detach().cpu().numpy().astype("<f4") if torch.is_tensor(t) else np.asarray(t, dtype="<f4")
    return a.reshape(-1)


def run_gradcheck():
    """gradcheck of the whole-model loss on a tiny instance w.r.t. all 16 parameters."""
    gen = torch.Generator().manual_seed(42)
    V, Vp, maxT, L, C, NH, B, T = 7, 8, 6, 2, 8, 2, 2, 5
    params = init_params(gen, V, Vp, maxT, L, C)
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)

    def f(*ps):
        return forward(list(ps), x, y, V, NH)[1]

    ok = torch.autograd.gradcheck(f, tuple(params), eps=1e-6, atol=1e-8, rtol=1e-6)
    assert ok
    # also an explicit central finite-difference spot check on a few scalar entries
    _, loss = forward(params, x, y, V, NH)
    grads = torch.autograd.grad(loss, params)
    h = 1e-6
    worst = 0.0
    for pi, idx in [(0, (3, 1)), (4, (1, 5, 2)), (5, (0, 17)), (8, (1, 3)), (12, (0, 2, 30)), (15, (4,))]:
        with torch.no_grad():
            ps = [p.detach().clone() for p in params]
            ps[pi][idx] += h
            lp = forward(ps, x, y, V, NH)[1].item()
            ps[pi][idx] -= 2 * h
            lm = forward(ps, x, y, V, NH)[1].item()
        fd = (lp - lm) / (2 * h)
        an = grads[pi][idx].item()
        worst = max(worst, abs(fd - an))
        assert abs(fd - an) < 1e-7 + 1e-5 * abs(an), (PARAM_NAMES[pi], idx, fd, an)
    # padded wte rows must have exactly zero gradient
    assert torch.all(grads[0][V:] == 0)
    print(f"gradcheck: OK (tiny model, all 16 tensors; FD spot-check max abs err {worst:.2e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=101)
    ap.add_argument("--padded-vocab", type=int, default=128)
    ap.add_argument("--max-seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--check", action="store_true", help="also run gradcheck on a tiny model")
    a = ap.parse_args()

    L, C, NH, V, Vp, maxT = a.layers, a.channels, a.heads, a.vocab, a.padded_vocab, a.max_seq
    B, T, S = a.batch, a.seq, a.steps
    assert C % NH == 0, "channels must be divisible by heads"
    assert Vp >= V >= 1 and 1 <= T <= maxT and B >= 1 and S >= 1
    lr, b1, b2, eps, wd, clip = 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    if a.check:
        run_gradcheck()

    gen = torch.Generator().manual_seed(a.seed)
    params = init_params(gen, V, Vp, maxT, L, C)
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)

    logits, loss = forward(params, x, y, V, NH)
    grads = torch.autograd.grad(loss, params)
    P = sum(p.numel() for p in params)
    assert torch.all(grads[0][V:] == 0), "padded wte rows must get zero gradient"
    # plausibility: small random init -> near-uniform predictions, loss ~ ln(V)
    assert abs(loss.item() - math.log(V)) < 0.5, (loss.item(), math.log(V))

    final, losses, norms = train(params, x, y, V, NH, S, lr, b1, b2, eps, wd, clip)
    assert abs(losses[0] - loss.item()) <= 1e-12 * max(1.0, abs(loss.item()))
    assert abs(norms[0] - global_norm(grads).item()) <= 1e-10 * max(1.0, norms[0])
    assert torch.all(final[0][V:] == 0), "padded wte rows must stay zero"

    os.makedirs(a.out_dir, exist_ok=True)

    # model.bin
    hdr = np.zeros(256, dtype="<i4")
    hdr[:8] = [MODEL_MAGIC, MODEL_VERSION, maxT, V, L, NH, C, Vp]
    model_path = os.path.join(a.out_dir, "model.bin")
    with open(model_path, "wb") as f:
        f.write(hdr.tobytes())
        for p in params:
            f.write(f32(p).tobytes())

    # ref.bin
    rh = np.zeros(256, dtype="<i4")
    rh[:8] = [REF_MAGIC, REF_VERSION, B, T, S, V, Vp, P]
    rh[16:22] = np.array([lr, b1, b2, eps, wd, clip], dtype="<f4").view("<i4")
    ref_path = os.path.join(a.out_dir, "ref.bin")
    with open(ref_path, "wb") as f:
        f.write(rh.tobytes())
        f.write(x.numpy().astype("<i4").reshape(-1).tobytes())
        f.write(y.numpy().astype("<i4").reshape(-1).tobytes())
        f.write(f32(logits[..., :V]).tobytes())
        f.write(f32([loss.item()]).tobytes())
        f.write(f32(flat(grads)).tobytes())
        f.write(f32(losses).tobytes())
        f.write(f32(norms).tobytes())
        f.write(f32(flat(final)).tobytes())

    # verify file sizes against the format
    model_size = os.path.getsize(model_path)
    ref_size = os.path.getsize(ref_path)
    exp_model = 4 * (256 + P)
    exp_ref = 4 * (256 + 2 * B * T + B * T * V + 1 + P + 2 * S + P)
    assert model_size == exp_model, (model_size, exp_model)
    assert ref_size == exp_ref, (ref_size, exp_ref)

    print(f"P = {P}")
    print(f"loss = {loss.item():.6f} (ln V = {math.log(V):.6f})")
    print("losses[0:3] = " + " ".join(f"{l:.6f}" for l in losses[:3]) + f"  losses[{S-1}] = {losses[-1]:.6f}")
    print(f"grad_norm[0] = {norms[0]:.6f}")
    print(f"wrote {model_path} ({model_size} bytes), {ref_path} ({ref_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
