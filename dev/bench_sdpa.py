#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention at the shapes of `./dev/cuda/attention bench`, for a side-by-side
table on one GPU: causal, bf16 and fp16, T = 512..4096 at 16k tokens per call (B = 16384 / T), head sizes 64
(NH 12) and 128 (NH 6), then B = 8, T = 1024, hs = 64 (GPT-2 124M's training shape), and the same with grouped-query attention
(the Llama of d12 width: KV 3 key/value heads, then 1; enable_gqa, torch >= 2.5). One row per shape and
backend (flash: FlashAttention-2 inside PyTorch; cudnn: cuDNN's fused attention), TFLOP/s in FlashAttention's
convention (causal: forward 4 B NH T^2 hs / 2, backward 2.5 x forward), timed with CUDA events after warm-up.

    python3 dev/bench_sdpa.py                  # both backends
    python3 dev/bench_sdpa.py --backend flash  # one
    ./dev/cuda/attention bench; python3 dev/bench_sdpa.py    # ours, then PyTorch's, same shapes and columns

A backend that refuses a shape or dtype prints "n/a" in its columns. Needs a CUDA build of torch and a GPU.
"""
import argparse
import sys


def shapes():  # B, T, NH, hs, KV (key/value heads: NH is multi-head)
    for hs in (64, 128):
        for T in (512, 1024, 2048, 4096):
            yield 16384 // T, T, 768 // hs, hs, 768 // hs
    yield 8, 1024, 12, 64, 12
    yield 8, 1024, 12, 64, 3
    yield 8, 1024, 12, 64, 1


def time_ms(fn, warmup, iters):
    import torch
    for _ in range(warmup):
        fn()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / iters


def bench(backend, dtype, B, T, NH, hs, KV, warmup, iters):
    """(forward ms, backward ms) for one shape, or None where the backend refuses it."""
    import torch
    import torch.nn.functional as F
    try:  # torch >= 2.3
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = lambda: sdpa_kernel([{"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]])
    except ImportError:  # torch 2.0-2.2: flash only, through the older switch
        if backend != "flash":
            return None
        ctx = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    g = torch.Generator(device="cuda").manual_seed(7)
    # (B, NH, T, hs), as the trainer's heads are laid out after the split of qkv
    q, k, v = (torch.randn(B, h, T, hs, device="cuda", dtype=dtype, generator=g).requires_grad_() for h in (NH, KV, KV))
    dout = torch.randn(B, NH, T, hs, device="cuda", dtype=dtype, generator=g)
    gqa = {"enable_gqa": True} if KV != NH else {}  # query head h reads key/value head h // (NH / KV)
    try:
        with ctx():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
            fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa), warmup, iters)
            # the backward alone: one forward graph, its backward replayed (retain_graph)
            bwd = time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), warmup, iters)
    except (RuntimeError, TypeError) as e:  # no kernel of this backend for the shape or dtype; no enable_gqa (torch < 2.5)
        print(f"# {backend} {dtype} B={B} T={T} NH={NH} KV={KV} hs={hs}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        return None
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["flash", "cudnn", "both"], default="both")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("dev/bench_sdpa.py: needs torch (with CUDA); run it with the Python that has it", file=sys.stderr)
        return 2
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        print(f"dev/bench_sdpa.py: torch {torch.__version__} has no scaled_dot_product_attention (needs >= 2.0)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("dev/bench_sdpa.py: needs a CUDA device (this torch sees none)", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()} | torch {torch.__version__}")
    print("sdpa  backend type    B     T  NH   hs |  fwd ms  TFLOP/s |  bwd ms  TFLOP/s")
    backends = ["flash", "cudnn"] if args.backend == "both" else [args.backend]
    for B, T, NH, hs, KV in shapes():
        fwd_flops = 4.0 * B * NH * T * T * hs / 2.0  # grouped or not: the same products, K and V read fewer times
        kvs = f" (KV {KV})" if KV != NH else ""       # as ./dev/cuda/attention bench prints it
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "half")):
            if KV != NH and dtype != torch.bfloat16:
                continue  # ours times the grouped shapes in bf16 only
            for be in backends:
                r = bench(be, dtype, B, T, NH, hs, KV, args.warmup, args.iters)
                if r is None:
                    print(f"sdpa  {be:7s} {name:5s} {B:3d} {T:5d} {NH:3d}{kvs} {hs:4d} |      n/a      n/a |      n/a      n/a")
                    continue
                f, b = r
                print(f"sdpa  {be:7s} {name:5s} {B:3d} {T:5d} {NH:3d}{kvs} {hs:4d} | {f:8.3f} {fwd_flops / f / 1e9:8.1f} |"
                      f" {b:8.3f} {2.5 * fwd_flops / b / 1e9:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
