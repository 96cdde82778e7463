#!/usr/bin/env python3
"""The PyTorch baseline for scripts/bench_gpu.sh: GPT-2 (same shapes and tied head as train_gpt), AdamW,
bf16 autocast, torch.compile and scaled_dot_product_attention; prints tokens/s, MFU and peak memory
of the median step, one line of JSON at the end. --accum N makes a step N micro-batches of gradient
accumulation before the one clip and update (llm.c's GPT-2 124M recipe: 32 x 16 x 1024 = 0.5M tokens).

--llama: transformers' LlamaForCausalLM instead, shaped as train_gpt's `-e llama-dN` (arch/gpt2.h's
llama_config_from_descriptor): C = 64N, L = N, NH = N heads of 64, KV = NH/4 key/value heads where 4 divides NH
(else NH/2, else NH), SwiGLU hidden int(8C/3) rounded up to a multiple of 64, tied head, no biases; vocabulary
50,304 (GPT-2's 50,257 padded to a multiple of 128, as train_gpt's rows are and as the GPT-2 model here is), so
the parameter count is train_gpt's own (printed: d12 gives 112,970,496). Its attention is transformers' "sdpa"
(PyTorch's SDPA: with torch >= 2.5 and no padding mask, as here, transformers passes enable_gqa and the key/value
heads are read in place; older, it repeats them to full width first), its loss transformers' own (labels shifted
inside: T - 1 positions scored, the same matmuls).

Both print MFU by the arch table's formula (arch/arch.h's arch_flops_per_token): 6 N + 6 L (NH hd) T FLOPs per token,
N the parameters; scripts/bench_gpu.sh recomputes every row's MFU by one formula anyway.

    python3 dev/bench_pytorch.py --depth 12 --batch 16 --seq 1024 --steps 30 [--accum 32]
    python3 dev/bench_pytorch.py --llama --depth 12 --batch 16 --seq 1024 --steps 20
    python3 dev/bench_pytorch.py --llama --depth 2 --batch 2 --seq 64 --steps 3 --device cpu   # a check, no GPU

Without torch.compile (torch < 2.0, or --no-compile) the model runs eager and the output says so ("compiled":
false); without F.scaled_dot_product_attention (torch < 2.0) GPT-2's attention is written out (softmax of QK^T).
"""
import argparse, json, math, statistics, time
import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]  # torch < 2.0 (a check on a CPU machine): the same attention, written out
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return att.softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V=50304, maxT=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def llama_shape(depth):
    """train_gpt's llama-dN (arch/gpt2.h's llama_config_from_descriptor): (C, NH, KV, hd, H)."""
    C, NH = 64 * depth, depth
    KV = depth // 4 if depth % 4 == 0 else depth // 2 if depth % 2 == 0 else depth
    H = (8 * C // 3 + 63) // 64 * 64  # Meta's int(2 * 4C / 3), rounded up to a multiple of 64
    return C, NH, KV, 64, H


class LlamaLoss(nn.Module):
    """transformers' LlamaForCausalLM, called as GPT above is: (idx, targets) -> mean cross-entropy."""
    def __init__(self, L, C, NH, KV, hd, H, V, maxT):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        import transformers
        impl = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "eager"  # sdpa needs torch >= 2.1
        cfg = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=H, num_hidden_layers=L, num_attention_heads=NH,
                          num_key_value_heads=KV, head_dim=hd, max_position_embeddings=maxT, rms_norm_eps=1e-5,
                          tie_word_embeddings=True, attention_bias=False, mlp_bias=False, use_cache=False,
                          attn_implementation=impl)
        self.model = LlamaForCausalLM(cfg)
        self.note = f"transformers {transformers.__version__} LlamaForCausalLM, attention {self.model.config._attn_implementation}"

    def forward(self, idx, targets):
        return self.model(input_ids=idx, labels=targets, use_cache=False).loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step (gradient accumulation)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--llama", action="store_true", help="transformers' LlamaForCausalLM shaped as train_gpt's llama-dN")
    ap.add_argument("--device", default="cuda", help="cpu runs the same code without a GPU (to check the script)")
    args = ap.parse_args()
    V, Vp = 50257, 50304
    torch.manual_seed(0)
    dev = torch.device(args.device)
    if args.llama:
        C, NH, KV, hd, H = llama_shape(args.depth)
        model = LlamaLoss(args.depth, C, NH, KV, hd, H, Vp, max(1024, args.seq)).to(dev)
        desc, note, att_width = f"llama-d{args.depth}", model.note, NH * hd
        shape = {"C": C, "NH": NH, "KV": KV, "hd": hd, "H": H, "Vp": Vp}
    else:
        shapes = {6: (384, 6), 12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}
        C, NH = shapes.get(args.depth, (64 * args.depth, args.depth))
        model = GPT(args.depth, C, NH, Vp).to(dev)
        desc, note, att_width = f"d{args.depth}", "GPT-2 (this script's)", C
        shape = {"C": C, "NH": NH, "Vp": Vp}
    N = sum(p.numel() for p in model.parameters())  # a tied head counted once
    N_unpadded = N - (Vp - V) * C                    # without the vocabulary's padding rows (one tied matrix)
    fused = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, **fused)
    compiled = not args.no_compile and hasattr(torch, "compile")
    if not args.no_compile and not compiled:
        note += f"; torch {torch.__version__} has no torch.compile: eager"
    step_fn = torch.compile(model) if compiled else model
    x = torch.randint(0, 50257, (args.batch, args.seq), device=dev)
    y = torch.randint(0, 50257, (args.batch, args.seq), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = []
    for s in range(args.steps):
        sync()
        t0 = time.perf_counter()
        for _ in range(args.accum):
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = step_fn(x, y) / args.accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times[min(5, len(times) // 2):]) * 1e3
    tps = args.batch * args.seq * args.accum / (ms / 1e3)
    flops = (6 * N + 6 * args.depth * att_width * args.seq) * tps
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    peak = 989e12 if ("H100" in name or "H200" in name) else 312e12 if "A100" in name else float("nan")
    res = {"impl": "pytorch", "model": desc, "shape": shape, "device": name, "params": N, "params_unpadded": N_unpadded,
           "batch": args.batch, "seq": args.seq, "accum": args.accum, "ms_per_step": ms,
           "tokens_per_s": tps, "mfu": flops / peak, "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else float("nan"),
           "torch": torch.__version__, "compiled": compiled, "note": note}
    acc = f" x{args.accum}" if args.accum > 1 else ""
    print(f"{desc}: {note}; {N} parameters ({N_unpadded} without the vocabulary's padding rows)")
    print(f"pytorch {desc} B={args.batch}{acc} T={args.seq}: {ms:.1f} ms/step, {tps:.0f} tok/s, MFU {100 * res['mfu']:.1f}%, "
          f"peak {res['peak_mem_gib']:.1f} GiB{'' if compiled else ', eager'}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
