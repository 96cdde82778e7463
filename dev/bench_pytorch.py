#!/usr/bin/env python3
"""The PyTorch baseline for scripts/bench_gpu.sh: GPT-2 (same shapes and tied head as train_gpt), AdamW,
bf16 autocast, torch.compile and scaled_dot_product_attention; prints tokens/s, MFU and peak memory
of the median step, one line of JSON at the end. --accum N makes a step N micro-batches of gradient
accumulation before the one clip and update (llm.c's GPT-2 124M recipe: 32 x 16 x 1024 = 0.5M tokens).

    python3 dev/bench_pytorch.py --depth 12 --batch 16 --seq 1024 --steps 30 [--accum 32]
"""
import argparse, json, math, statistics, time
import torch
import torch.nn as nn
import torch.nn.functional as F


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
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step (gradient accumulation)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda", help="cpu runs the same code without a GPU (to check the script)")
    args = ap.parse_args()
    shapes = {6: (384, 6), 12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}
    C, NH = shapes.get(args.depth, (64 * args.depth, args.depth))
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = GPT(args.depth, C, NH).to(dev)
    N = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=dev.type == "cuda")
    step_fn = model if args.no_compile else torch.compile(model)
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
    flops = (6 * N + 6 * args.depth * C * args.seq) * tps
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    peak = 989e12 if ("H100" in name or "H200" in name) else 312e12 if "A100" in name else float("nan")
    res = {"impl": "pytorch", "device": name, "params": N, "batch": args.batch, "seq": args.seq, "accum": args.accum, "ms_per_step": ms,
           "tokens_per_s": tps, "mfu": flops / peak, "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else float("nan"),
           "torch": torch.__version__, "compiled": not args.no_compile}
    acc = f" x{args.accum}" if args.accum > 1 else ""
    print(f"pytorch d{args.depth} B={args.batch}{acc} T={args.seq}: {ms:.1f} ms/step, {tps:.0f} tok/s, MFU {100 * res['mfu']:.1f}%, "
          f"peak {res['peak_mem_gib']:.1f} GiB")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
