#!/usr/bin/python3
"""Independent float64 PyTorch reference for whole training runs of ./train_gpt_cpu and ./train_gpt_emu.

test_gpt2 checks the model's forward and backward; this checks the trainer's own step, which nothing
else re-derives: the data order, gradient accumulation over micro-batches, the pre-clip gradient norm,
clipping, the learning-rate schedule (warmup, then cosine or linear decay to a final fraction), and
AdamW with bias correction and decoupled weight decay on the matmul weights and embeddings only. It
shares with the trainer nothing but the input files, and reads the trainer's results only through its
normal outputs: the JSON log and the checkpoint files.

    ref_train.py make --out-dir DIR [shape and recipe options]
        writes DIR/model.bin (llm.c v3 fp32), DIR/train.bin (llm.c token shard), DIR/args (the trainer's
        flags for this recipe, one per line) and DIR/ref.npz (per-step loss, norm, lr; the final
        parameters and AdamW first moments, per tensor)
    ref_compare.py --out-dir DIR --log LOG --ckpt-dir CK [--tol-loss ..] [--tol-param ..]
        (test/ref_compare.py, numpy alone: the comparison needs no torch) reads the trainer's LOG and its
        checkpoint at the last step in CK, prints one PASS/FAIL line per check (per-step loss, norm and lr;
        every parameter tensor and every first-moment tensor within its own bound) and exits 1 on a failure.

The recipe, as the README states it: with --shuffle 0 and one shard, micro-batch g of the run (step s,
accumulation index a, g = s*A + a) is the B*T+1 tokens starting at g*B*T (wrapping at the shard's end).
The step's loss is the mean over all B*T*A tokens; the logged norm is the L2 norm of that mean's gradient
before clipping; if it exceeds the clip, the gradient is scaled by clip/(norm + 1e-6). lr at step s (from
0): warmup lr*(s+1)/W for s < W, then cosine from lr to lr*q over s = W .. S-1.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_gpt2 import DT, MODEL_MAGIC, MODEL_VERSION, PARAM_NAMES, DECAY, param_shapes, forward, attn_mask  # noqa: E402

SHARD_MAGIC, SHARD_VERSION = 20240520, 1
SHARD_DOC_SEP_TAG = 20261206  # dataloader.h's: header word 3; word 4 the document separator (--doc-mask)


def init_params(gen, V, Vp, maxT, L, C):
    """Like ref_gpt2's, but biases and LayerNorm offsets large (std 0.3) and LayerNorm gains near 1, so
    that decaying a tensor that must not be decayed moves it visibly. Rounded to fp32 values."""
    shapes = param_shapes(V, Vp, maxT, L, C)
    p = {}
    for name in PARAM_NAMES:
        shp = shapes[name]
        if name in ("wte", "wpe"):
            t = 0.05 * torch.randn(shp, generator=gen, dtype=DT)
        elif name in ("qkvw", "attprojw", "fcw", "fcprojw"):
            t = torch.randn(shp, generator=gen, dtype=DT) / math.sqrt(shp[-1])
        elif name in ("ln1w", "ln2w", "lnfw"):
            t = 1.0 + 0.2 * torch.randn(shp, generator=gen, dtype=DT)
        else:
            t = 0.3 * torch.randn(shp, generator=gen, dtype=DT)
        p[name] = t
    p["wte"][V:] = 0.0  # llm.c's padded rows are zero and stay zero
    return [p[n].float().double() for n in PARAM_NAMES]


def make_tokens(gen, V, n):
    """A token stream with structure to learn (a noisy walk over the vocabulary), not uniform noise."""
    steps = torch.multinomial(torch.tensor([0.45, 0.25, 0.15, 0.1, 0.05], dtype=DT), n, replacement=True, generator=gen)
    jumps = torch.rand(n, generator=gen, dtype=DT) < 0.05
    rnd = torch.randint(0, V, (n,), generator=gen)
    tok = torch.empty(n, dtype=torch.long)
    cur = 0
    for i in range(n):
        cur = int(rnd[i]) if jumps[i] else (cur + int(steps[i]) + 1) % V
        tok[i] = cur
    return tok


def plant_separators(gen, tok, sep):
    """With --doc-sep: about one token in 8 becomes the separator, so each row holds several documents (and some rows
    a separator at their first or last position); the walk itself never reaches id sep (>= V - 1 is kept free)."""
    if sep < 0:
        return tok
    tok = torch.where(tok == sep, torch.zeros_like(tok), tok)
    at = torch.rand(tok.numel(), generator=gen, dtype=DT) < 0.125
    return torch.where(at, torch.full_like(tok, sep), tok)


def lr_at(step, lr, warmup, steps, final_frac, schedule):
    if step < warmup:
        return lr * (step + 1) / warmup
    lo = lr * final_frac
    span = steps - warmup
    if span <= 1:
        return lo
    prog = min(1.0, (step - warmup) / (span - 1))
    if schedule == "cosine":
        return lo + 0.5 * (1.0 + math.cos(math.pi * prog)) * (lr - lo)
    return lr - prog * (lr - lo)


def newton_schulz(G, steps):
    """torch.optim.Muon's orthogonalisation, in float64: the wider way round, normalised, `steps` iterations."""
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = G.shape[0] > G.shape[1]
    X = G.T if tall else G
    X = X / max(np.linalg.norm(X), 1e-7)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.T if tall else X


def muon_step(p, g, buf, lr, wd, a):
    """One Muon update of the matrix p (numpy views, in place): momentum buffer, Nesterov, Newton-Schulz, decoupled
    decay with the unadjusted lr, the adjusted step (torch.optim.Muon's, issue 42)."""
    mu = a.muon_momentum
    buf *= mu
    buf += (1 - mu) * g
    u = (1 - mu) * g + mu * buf if a.muon_nesterov else buf
    rows, cols = p.shape
    ratio = 0.2 * math.sqrt(max(rows, cols)) if a.muon_lr_adjust == "match_rms_adamw" else math.sqrt(max(1, rows / cols))
    o = newton_schulz(u, a.muon_ns_steps)
    p *= 1 - lr * wd
    p -= lr * ratio * o


def adafactor_step(p, g, st, lr, t, decayed, a):
    """One torch.optim.Adafactor step of one tensor (numpy float64 views, in place), as its documentation and
    implementation define it (CI's torch 1.13 predates it): rho = min(lr, 1/sqrt(t)), alpha = max(eps2, RMS(p)) rho
    (before the decay), p (1 - lr wd); a matrix's row and column means of g^2 lerped into R and C by t^beta2_decay,
    V = R C / max(mean R, eps1); a vector's V lerped; U = g / sqrt(max(V, eps1^2)); p -= alpha / max(1, RMS(U)/d) U.
    st: the tensor's state, R then C packed (a matrix) or V, as the trainer's checkpoint holds it."""
    eps1 = a.adafactor_eps1 or float(np.finfo(np.float32).eps)
    w = t ** a.adafactor_beta2_decay
    rho = min(lr, 1 / math.sqrt(t))
    alpha = max(a.adafactor_eps2, math.sqrt(float(np.mean(p * p)))) * rho
    if decayed and a.adafactor_weight_decay:
        p *= 1 - lr * a.adafactor_weight_decay
    if a.adafactor_maximize:
        g = -g
    if p.ndim == 2:
        rows, cols = p.shape
        R, C = st[:rows], st[rows:rows + cols]
        R += w * (np.mean(g * g, axis=1) - R)
        C += w * (np.mean(g * g, axis=0) - C)
        V = np.outer(R, C) / max(float(R.mean()), eps1)
    else:
        st += w * (g * g - st)
        V = st
    U = g / np.sqrt(np.maximum(V, eps1 * eps1))
    p -= alpha / max(1.0, math.sqrt(float(np.mean(U * U))) / a.adafactor_d) * U


def adafactor_tensors(name, p, layered):
    """The tensors Adafactor steps in parameter p (numpy): each layer's own where layered(name), else p whole."""
    return [p[l] for l in range(p.shape[0])] if layered(name) else [p]


def train(params, names, loss_of, decayed, tokens, a, muon_pieces=None, layered=None, adafactor_all=None):
    """The trainer's recipe on `params` (named `names`) from float64 PyTorch, shared with ref_train_llama.py:
    micro-batch g = s*A + acc of the stream, the mean loss's gradient summed over the accumulation, the pre-clip
    norm and clipping, lr_at's schedule, AdamW with bias correction and decoupled weight decay where
    decayed(name). loss_of(x, y) is the model's mean loss. Returns the per-step losses, norms and lrs, and the
    first moments (Muon's momentum buffers for its matrices). With --optimizer muon, muon_pieces(name, shape) lists
    the Muon matrices of a tensor as index tuples into it (none: AdamW's). With --optimizer adafactor,
    adafactor_all(grads, lr, t), where given, steps every parameter (the clipped gradients, in params' order): a
    model whose trainer tensors pack several of params (ref_train_llama.py's)."""
    B, T, A, S = a.batch, a.seq, a.accum, a.steps
    ntok = tokens.numel()
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    b1, b2, eps, wd, clip = 0.9, 0.95, a.eps, a.weight_decay, a.grad_clip
    losses, norms, lrs = [], [], []
    for s in range(S):
        grads = [torch.zeros_like(p) for p in params]
        total = 0.0
        for acc in range(A):
            g = s * A + acc
            off = (g % ((ntok - 1) // (B * T))) * B * T
            win = tokens[off:off + B * T + 1]
            x, y = win[:-1].view(B, T), win[1:].view(B, T)
            loss = loss_of(x, y)
            for acc_g, gr in zip(grads, torch.autograd.grad(loss / A, params)):
                acc_g += gr
            total += loss.item() / A
        norm = math.sqrt(sum(float((gr * gr).sum()) for gr in grads))
        scale = clip / (norm + 1e-6) if clip > 0 and norm > clip else 1.0
        lr = lr_at(s, a.adafactor_lr if a.optimizer == "adafactor" else a.lr, a.warmup, S, a.lr_final_frac, a.schedule)
        t = s + 1
        muon_lr = lr_at(s, a.muon_lr or a.lr, a.warmup, S, a.lr_final_frac, a.schedule)
        with torch.no_grad():
            if a.optimizer == "adafactor" and adafactor_all:
                adafactor_all([gr * scale for gr in grads], lr, t)
            for name, p, gr, m, v in zip(names, params, grads, ms, vs):
                if a.optimizer == "adafactor" and adafactor_all:
                    break
                gr = gr * scale
                if a.optimizer == "adafactor":  # m holds the packed state, at the start of each tensor's place
                    for pt, gt, mt in zip(*(adafactor_tensors(name, x, layered) for x in (p.detach().numpy(), gr.numpy(), m.numpy()))):
                        mt = mt.reshape(-1)
                        adafactor_step(pt, gt, mt[:pt.shape[0] + pt.shape[1]] if pt.ndim == 2 else mt, lr, t, decayed(name), a)
                    continue
                pieces = muon_pieces(name, tuple(p.shape)) if a.optimizer == "muon" else []
                if pieces:  # numpy views of the tensors: the update lands in p and m
                    pn, gn, mn = p.detach().numpy(), gr.numpy(), m.numpy()
                    for ix in pieces:
                        muon_step(pn[ix], gn[ix], mn[ix], muon_lr, wd, a)
                    continue
                m.mul_(b1).add_((1 - b1) * gr)
                v.mul_(b2).add_((1 - b2) * gr * gr)
                mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
                p.sub_(lr * (mhat / (torch.sqrt(vhat) + eps) + (wd if decayed(name) else 0.0) * p))
        losses.append(total); norms.append(norm); lrs.append(lr)
    clipped = sum(n > clip for n in norms) if clip > 0 else 0
    # the recipe must exercise both sides of the clip, or a clipping bug could hide
    assert clip == 0 or 0 < clipped < S, f"--grad-clip {clip}: {clipped} of {S} steps clip (norms {norms})"
    return losses, norms, lrs, ms, clipped


def gpt2_muon_pieces(name, shape):
    """GPT-2's Muon matrices: per layer, q, k and v of qkvw (C rows each), attprojw, fcw, fcprojw."""
    if name not in ("qkvw", "attprojw", "fcw", "fcprojw"):
        return []
    L, rows = shape[0], shape[1]
    split = [rows // 3] * 3 if name == "qkvw" else [rows]
    out = []
    for l in range(L):
        r0 = 0
        for r in split:
            out.append((l, slice(r0, r0 + r)))
            r0 += r
    return out


def write_inputs(a, header, tensors, tokens):
    """DIR/model.bin (the 256-int header, then each tensor as fp32), DIR/train.bin (an llm.c uint16 shard of
    the tokens) and DIR/args (the trainer's flags for this recipe, one per line)."""
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "model.bin"), "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            f.write(t.astype("<f4").tobytes())
    sh = np.zeros(256, dtype="<i4")
    sh[:3] = [SHARD_MAGIC, SHARD_VERSION, tokens.numel()]
    if a.doc_sep >= 0:  # the separator's record, as ./tokenize writes it: the trainer's --doc-mask reads it from here
        sh[3:5] = [SHARD_DOC_SEP_TAG, a.doc_sep]
    with open(os.path.join(a.out_dir, "train.bin"), "wb") as f:
        f.write(sh.tobytes())
        f.write(tokens.numpy().astype("<u2").tobytes())
    flags = ["-e", os.path.join(a.out_dir, "model.bin"), "-i", os.path.join(a.out_dir, "train.bin"), "--shuffle", "0",
             "-b", a.batch, "-t", a.seq, "--grad-accum", a.accum, "-x", a.steps, "-u", a.warmup, "-k", a.schedule,
             "-l", a.lr, "-q", a.lr_final_frac, "--grad-clip", a.grad_clip, "-c", a.weight_decay, "--beta1", 0.9,
             "--beta2", 0.95, "--eps", a.eps, "-v", 0, "-s", 0]
    if a.doc_sep >= 0:
        flags += ["--doc-mask"]
    if a.attn_window > 0:
        flags += ["--attn-window", a.attn_window]
    if a.rope_restart:
        flags += ["--doc-rope-restart"]
    if a.optimizer == "adafactor":
        flags += ["--optimizer", "adafactor", "--adafactor-lr", a.adafactor_lr, "--adafactor-beta2-decay", a.adafactor_beta2_decay,
                  "--adafactor-eps1", a.adafactor_eps1, "--adafactor-eps2", a.adafactor_eps2, "--adafactor-d", a.adafactor_d,
                  "--adafactor-weight-decay", a.adafactor_weight_decay, "--adafactor-maximize", a.adafactor_maximize]
    if a.optimizer == "muon":
        flags += ["--optimizer", "muon", "--muon-momentum", a.muon_momentum, "--muon-nesterov", a.muon_nesterov,
                  "--muon-ns-steps", a.muon_ns_steps, "--muon-lr-adjust", a.muon_lr_adjust]
        if a.muon_lr:
            flags += ["--muon-lr", a.muon_lr]
    with open(os.path.join(a.out_dir, "args"), "w") as f:
        f.write("\n".join(str(x) for x in flags) + "\n")


def cmd_make(a):
    L, C, NH, V, Vp, maxT, B, T, A, S = a.layers, a.channels, a.heads, a.vocab, a.padded_vocab, a.max_seq, a.batch, a.seq, a.accum, a.steps
    assert C % NH == 0 and T <= maxT and V <= Vp
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    gen = torch.Generator().manual_seed(a.seed)
    params0 = init_params(gen, V, Vp, maxT, L, C)
    nwin = S * A + 3  # a few windows more than the run reads, so the end of the shard is never reached
    ntok = nwin * B * T + 1
    tokens = make_tokens(gen, V, ntok)
    tokens = plant_separators(gen, tokens, a.doc_sep)

    params = [p.clone().requires_grad_(True) for p in params0]
    sep = a.doc_sep if a.doc_sep >= 0 else None
    loss_of = lambda x, y: forward(params, x, y, V, NH, attn_mask(x, sep, a.attn_window))[1]
    losses, norms, lrs, ms, clipped = train(params, PARAM_NAMES, loss_of,
                                            lambda name: name in DECAY, tokens, a, gpt2_muon_pieces,
                                            lambda name: name not in ("wte", "wpe", "lnfw", "lnfb"))
    hdr = np.zeros(256, dtype="<i4")
    hdr[:8] = [MODEL_MAGIC, MODEL_VERSION, maxT, V, L, NH, C, Vp]
    write_inputs(a, hdr, [p.numpy() for p in params0], tokens)
    np.savez(os.path.join(a.out_dir, "ref.npz"), losses=np.array(losses), norms=np.array(norms), lrs=np.array(lrs),
             V=V, Vp=Vp, **{"p0_" + n: p.numpy() for n, p in zip(PARAM_NAMES, params0)},
             **{"p_" + n: p.detach().numpy() for n, p in zip(PARAM_NAMES, params)},
             **{"m_" + n: m.numpy() for n, m in zip(PARAM_NAMES, ms)})
    clip = a.grad_clip
    print(f"reference: C={C} NH={NH} (head size {C // NH}) L={L} B={B} T={T} A={A} steps={S}: losses "
          f"{losses[0]:.5f} .. {losses[-1]:.5f}, norms {norms[0]:.4f} .. {norms[-1]:.4f}, {clipped} of {S} steps clip at {clip}")


def add_args(ap, channels, accum, steps, warmup):
    """The options both references take (ref_train_llama.py's defaults differ in the four given)."""
    ap.add_argument("cmd", choices=["make"])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--channels", type=int, default=channels)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=101)
    ap.add_argument("--max-seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--seq", type=int, default=33)
    ap.add_argument("--accum", type=int, default=accum)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--lr-final-frac", type=float, default=0.1)
    ap.add_argument("--schedule", default="cosine", choices=["cosine", "linear"])
    ap.add_argument("--weight-decay", type=float, default=0.5)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--doc-sep", type=int, default=-1, help="documents: this id separates them (recorded in the shard's "
                    "header, planted in the tokens) and the run and the reference mask attention by them (--doc-mask)")
    ap.add_argument("--attn-window", type=int, default=0, help="a sliding window of this many keys (--attn-window)")
    ap.add_argument("--rope-restart", type=int, default=0, help="1: RoPE's positions from 0 in each document "
                    "(--doc-rope-restart; the Llama family)")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "muon", "adafactor"])
    # torch.optim.Adafactor's defaults (eps1 0: its None)
    ap.add_argument("--adafactor-lr", type=float, default=1e-2)
    ap.add_argument("--adafactor-beta2-decay", type=float, default=-0.8)
    ap.add_argument("--adafactor-eps1", type=float, default=0.0)
    ap.add_argument("--adafactor-eps2", type=float, default=1e-3)
    ap.add_argument("--adafactor-d", type=float, default=1.0)
    ap.add_argument("--adafactor-weight-decay", type=float, default=0.0)
    ap.add_argument("--adafactor-maximize", type=int, default=0)
    ap.add_argument("--muon-momentum", type=float, default=0.95)
    ap.add_argument("--muon-nesterov", type=int, default=1)
    ap.add_argument("--muon-ns-steps", type=int, default=5)
    ap.add_argument("--muon-lr", type=float, default=0.0, help="0: --lr")
    ap.add_argument("--muon-lr-adjust", default="match_rms_adamw", choices=["match_rms_adamw", "original"])


def run(a, make):
    """The command: make writes the reference's files (exit status 0); test/ref_compare.py compares a run with them."""
    make(a)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_args(ap, channels=128, accum=3, steps=8, warmup=2)
    ap.add_argument("--padded-vocab", type=int, default=128)
    return run(ap.parse_args(), cmd_make)


if __name__ == "__main__":
    sys.exit(main())
