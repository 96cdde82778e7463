#!/usr/bin/env python3
"""llama_model.py FILE NH KV [--no-qk-norm]: a small Llama-family model file (docs/llama.md, version 1) with random weights, for the
CUDA build's whole-run tests (test_cuda_emu.sh, test_gpu.sh): L 2, C 64, NH query heads over KV key/value heads of
head_dim 16 (bf16/fp16 attention wants a multiple of 16), SwiGLU H 128, V 64 (padded 128: the built-in corpus's
vocabulary), maxT 128, an untied head, q/k/v bias and QK-norm (--no-qk-norm: without it, Qwen 2's shape, which
scripts/export_hf.py exports and transformers 4.45 loads). The norms' weights are near 1 but not 1, so a kernel
that drops one shows. The same seed for every NH and KV: only the number of q/k/v rows differs. Standard library only;
written under a temporary name and renamed, so no half-written file is left."""
import array
import os
import random
import struct
import sys

if len(sys.argv) not in (4, 5) or sys.argv[4:] not in ([], ["--no-qk-norm"]):
    sys.exit("usage: llama_model.py FILE NH KV [--no-qk-norm]")
f, NH, KV, qk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), len(sys.argv) == 4
L, C, hd, H, V, Vp, maxT = 2, 64, 16, 128, 64, 128, 128
bits = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]
h = [0] * 256
h[:15] = [20261126, 1, maxT, V, Vp, L, NH, KV, C, hd, H, 0, 1, int(qk), 0]  # tied 0, qkv_bias 1, qk_norm, no RoPE scaling
h[15], h[16] = bits(1e-5), bits(1e4)  # norm_eps, rope_theta
rng = random.Random(1234)
normal = lambda n, std=0.02: [rng.gauss(0, std) for _ in range(n)]
near1 = lambda n: [1 + rng.gauss(0, 0.1) for _ in range(n)]
emb = lambda: normal(V * C) + [0.0] * ((Vp - V) * C)  # the padding rows are zero
Q, res = (NH + 2 * KV) * hd, 0.02 / (2 * L) ** 0.5
# wte, attn_norm, wqkv, bqkv, q_norm, k_norm, wo, mlp_norm, wfc, wproj, final_norm, lm_head
tensors = [emb(), near1(L * C), normal(L * Q * C), normal(L * Q), near1(L * hd), near1(L * hd), normal(L * C * NH * hd, res),
           near1(L * C), normal(L * 2 * H * C), normal(L * C * H, res), near1(C), emb()]
if not qk:
    del tensors[4:6]  # no q_norm, k_norm
with open(f + ".tmp", "wb") as o:
    o.write(struct.pack("<256i", *h))
    for t in tensors:
        o.write(array.array("f", t).tobytes())
os.replace(f + ".tmp", f)
