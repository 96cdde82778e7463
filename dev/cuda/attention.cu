// dev/cuda/attention.cu: flash-style causal multi-head self-attention (forward and backward) for the GPT-2
// trainer, plus a check against a CPU reference and a benchmark.
//
// Build and run on a GPU machine (sm_80 or newer), from the repo root:
//   make dev/cuda/attention && ./dev/cuda/attention
//   ./dev/cuda/attention check   # only the correctness checks; "bench": only the benchmark
//   ./dev/cuda/attention check small   # without the T = 1024 shape (make test-cuda-emu runs this on the CPU)
//   ./dev/cuda/attention check orders  # the backwards whose blocks wait on each other (run in other block orders)
// It prints one PASS/FAIL line per check and exits nonzero if any check fails.
// Under the emulated GPU (make dev/cuda/attention_emu) the same device code runs on the CPU.
//
// Layouts (as the CPU reference attention in cpu/attention.h): qkv (B, T, 3C) row-major; head h's q at columns
// h*hs, k at C + h*hs, v at 2C + h*hs, hs = C / NH. out (B, T, C), head h at columns h*hs. Scores are scaled
// by 1/sqrt(hs), causal (key t2 <= query t). The forward also writes lse (B, NH, T), float: the natural-log
// logsumexp of each query row's scaled scores, which lets the backward recompute P = exp(scale*S - lse)
// without ever storing the T x T matrix.
//
// Design (the kernels live in cuda/attention*.cuh; this file checks and times them):
//  * Tiles: fp32 and the 16-bit backward: 64 rows per block, 4 warps of 16; 16-bit forward: 128 query rows per
//    block, 8 warps of 16; key tiles of 64 throughout. Forward and dQ blocks walk key tiles 0..diagonal, longest
//    rows first; dK/dV blocks walk query tiles diagonal..end. No atomics on data, fixed summation orders, so runs
//    are bit-identical. Partial tiles (T not a multiple of 64) are zero-filled and masked.
//  * bf16/fp16 (attn_tc_*): scores, probabilities and the output accumulator stay in registers as mma.sync
//    m16n8k16 fragments (PTX's documented layout). Operand tiles are row-major in shared memory, filled by
//    cp.async into two buffers (the next tile loads while the current one is used, one barrier per tile); B
//    operands come through ldmatrix, or ldmatrix.trans where the product needs the tile's transpose (V, K, Q,
//    dout). exp2 with the scale folded into one FFMA. Under the emulator, mma.sync and ldmatrix run as their
//    plain-code definitions (shuffles) and cp.async lands only at its wait.
//  * fp32 (attn_fwd_kernel, attn_bwd_*): the same tiles and masks with plain FMAs through shared memory,
//    matching the CPU reference to ~1e-6 relative.
//  * Backward, 16-bit (issue #22's second round): 5 products per tile pair, FlashAttention-2's count. The row-dot
//    kernel writes D = rowsum(dout * out) and zeroes the turn counters; then one kernel, a block per 64 key rows,
//    computes S^T, dP^T, dV += P^T dout, dK += dS^T Q, stores dS^T in shared memory and computes the tile's dQ
//    contribution dS K. dQ is summed over key blocks in an fp32 accumulator in a fixed order (the diagonal block
//    first, block 0 last, which scales and writes dQ), each block waiting for its turn on a per-(b, h, query tile)
//    counter (cuda/block_order.cuh: acquire load, release fence + increment) - FlashAttention-3's deterministic
//    backward, with no atomics on data. Blocks are numbered kb = nqb - 1 - x, so a block waits only on blocks of
//    lower x in its row of the grid, which a GPU dispatches first; the wait is placed after the block's own dV/dK
//    work on the tile, and in steady state the block before it finished that tile one step earlier. Now
//    TRAIN_GPT_ATTN_BWD=fused (see "Backward, two passes" below). fp32: a row-dot kernel, then dK/dV, then dQ, unchanged.
//  * Backward, two passes (the default 16-bit backward since the H200 window of 2026-11-28; issue #22's first round,
//    then dev/cuda/attention_v2.cuh, multi-head only): a dQ kernel on 128-row query blocks that computes D and
//    recomputes S and dP, then the fused kernel without its dQ part (attn_tc_bwd_kernel<.., false>) for dK and dV: 7
//    products per tile pair, no waits. Timed there (bf16, B=16 T=1024 hs 64): 0.665 ms (96.9 TFLOP/s) against the
//    fused kernel's 0.914 (70.5), and ahead at every shape of the table (cuda/attention_bwd_2pass.cuh). Grouped-query
//    attention added when it became the default: its dK/dV blocks walk the group as the fused kernel's do.
//  * Grouped-query attention (the Llama family, issue 35): qkv rows of NH query heads, then KV key and KV value
//    heads (C + 2 KV hs); query head h reads key/value head h / (NH / KV) in place, no copy to full width. The
//    forward and dQ blocks are per query head as before; the dK/dV blocks (fp32: attn_bwd_dkdv_kernel; 16-bit:
//    attn_tc_bwd_kernel) are per key/value head and walk the group's query heads in order, so dK and dV are summed
//    over the group in registers in a fixed order; the 16-bit kernel's dQ turns are per query head as before.
//    KV = NH makes each group one head: multi-head attention's arithmetic in its order (GPT-2's bits). The GQA shapes
//    (4:1, multi-query at hs 64 and 128, 2:1) are checked against the float64 reference's GQA form.
//  * Registers (ptxas, nvcc 13.0, sm_90a; bf16 and fp16 alike), hs 64 / 128: forward 128 / 223, no spills (v1:
//    160 / 254 at half the threads per block); backward (5 products) 255 / 255, 12 / 448 bytes spilled (stores;
//    24 / 556 loaded), hs 16 / 32: 126 / 166, none; the two-pass dQ 205 / 255 (16 bytes spilled at 128) and dK/dV 250 /
//    255 (604 bytes at 128); v1's dQ 240 / 255 (432 bytes), dK/dV 255 / 255 (1032 bytes). Shared memory per block:
//    forward 36,864 / 69,632 bytes, backward 56,320 / 97,280 (Q, dout x 2, K, dS^T 64 x 72, lse and D x 2).
//    `./dev/cuda/attention bench` prints the default (new), fused, v1 and v3 side by side.
//  * Backward v3 (TRAIN_GPT_ATTN_BWD=v3, cuda/attention_bwd_v3.cuh; off by default until timed): 128-key blocks of 8
//    warps, dQ's parts in one fp32 copy per split (a block walks its split's key blocks in turn), summed by a small
//    kernel in split order: no waits, no atomics. `check` runs it and the fused kernel beside the default at every
//    16-bit shape without RoPE (and the v3_shapes: 3 and 4 splits); `bench` times it in its own column.
//  * RoPE in the loads (the Llama family without QK-norm; the rope_shapes cases): with the angle tables the kernels
//    rotate each Q and K tile as it lands (16-bit: in shared memory, one extra barrier per tile; fp32: element by
//    element from global memory) and un-rotate dQ and dK through the warp's own shared rows before writing them, so
//    the model runs no RoPE pass over q and k. ptxas (nvcc 13.0, sm_90a), before -> after, hs 64 / 128: 16-bit forward
//    128 / 228 registers, no spill -> 128 / 229, 4 / 0 bytes spilled; 16-bit backward 255 / 255, 0 / 32 bytes spilled
//    -> 255 / 255, 8 / 8; fp32 forward 80 / 95 -> 80 / 96, dK/dV unchanged (128 / 250, 8 / 0 bytes), dQ 80 / 128 with
//    12 / 0 bytes spilled -> 95 / 128, none. The tables are read from L2 in every block that loads a tile (at the d12
//    GQA shape about 0.28 GB forward and 0.44 GB backward a layer, against the 0.126 GB of DRAM traffic the two
//    passes cost): not yet timed on a GPU.
//  * Masks (issue 49, arch/attn_mask.h; attention_masks.cuh's checks): every kernel takes an AttnMask (window, document
//    starts), skips the tiles wholly outside it (counted under ATTN_COUNT_TILES and compared with attn_mask_tile_empty)
//    and masks the cut ones per element. The 16-bit backward with a mask is cuda/attention_bwd_kv.cuh (KV-stationary,
//    dQ in an fp32 buffer in descending key-block turns; TRAIN_GPT_ATTN_BWD=kv for causal), each of its instantiations
//    checked; `sweep` (attention_sweep.cuh) times them for cuda/attention_tuned.h.
//  * Measured on an H100 (B=8, T=1024, NH=12, hs=64, bf16) before issue #22 (the kernels now in
//    attention_v1.cuh): forward 0.138 ms (93 TFLOP/s), backward 0.426 ms (76 TFLOP/s); Nsight Compute showed the
//    forward latency-bound at 3 warps per scheduler (registers). The current kernels are not yet timed on a GPU:
//    `./dev/cuda/attention bench` prints both, side by side.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include <vector>
#include "attention_ref.h"

// The kernels are the trainer's own (cuda/attention.cuh's flash_attention_forward/backward): this file only
// checks and times them. ATTN_COUNT_TILES: each kernel counts the tiles it visits (the mask checks compare them).
#define ATTN_COUNT_TILES
#include "../../cuda/attention.cuh"
// The 16-bit kernels before issue #22, for the bit comparison below and the old-vs-new benchmark.
#include "attention_v1.cuh"

// ---- dev check and benchmark ----

// KV: key/value heads (grouped-query attention); 0 means NH (GPT-2's multi-head attention). rope: the Llama family's
// RoPE inside the kernels' loads (qkv holds q and k unrotated; flash_attention_* get the angle tables).
struct AttnShape { int B, T, C, NH, KV = 0; bool rope = false; };

// RoPE (rotate-half) on the q and k heads of every row of a host qkv (B, T, C3). Forward (the reference's input): the
// kernels' own rotation, rope_pair's fp32 arithmetic rounded once to floatT, so the float64 attention below starts
// from the Q and K tiles the kernels use (RoPE's arithmetic itself is checked against the CPU build by
// dev/cuda/kernels.cu). inverse: the transpose in double (the reference's dq, dk back to the unrotated q, k).
// cos_t, sin_t: (T, hs/2).
template <typename floatT>
static void attn_ref_rope(float *x, const float *cos_t, const float *sin_t, int B, int T, long C3, int nheads, int hs,
                          bool inverse) {
    const int h2 = hs / 2;
    for (long r = 0; r < (long)B * T; r++) {
        const int t = (int)(r % T);
        for (int h = 0; h < nheads; h++) {
            float *v = x + r * C3 + (long)h * hs;
            for (int i = 0; i < h2; i++) {
                const float c = cos_t[(long)t * h2 + i], sn = sin_t[(long)t * h2 + i];
                if (inverse) {
                    const double d1 = v[i], d2 = v[i + h2];
                    v[i] = (float)(d1 * c + d2 * sn);
                    v[i + h2] = (float)(d2 * c - d1 * sn);
                } else {
                    const float x1 = v[i], x2 = v[i + h2], p2 = x2 * sn, p1 = x1 * sn;
                    v[i] = attn_to_float(attn_from_float<floatT>(fmaf(x1, c, -p2)));
                    v[i + h2] = attn_to_float(attn_from_float<floatT>(fmaf(x2, c, p1)));
                }
            }
        }
    }
}

// Scratch for any 16-bit backward (the checks and the bench run each of them).
static size_t attn_check_scratch_floats(size_t elem_bytes, int B, int T, int C, int NH) {
    size_t n = attn_bwd_scratch_floats(elem_bytes, B, T, C, NH);
    for (int k : {ATT_BWD_2PASS, ATT_BWD_FUSED, ATT_BWD_V3}) {
        const size_t m = attn_bwd_scratch_floats(elem_bytes, B, T, C, NH, k);
        if (m > n) n = m;
    }
    return n;
}

// A check's device buffers: the inputs (qkv, dout) uploaded from the host's rounded copies, the outputs, a second
// dqkv for the determinism rerun, lse and the backward's scratch.
template <typename floatT> struct AttnDev {
    floatT *qkv, *dout, *out, *dqkv, *dqkv2;
    float *lse, *scratch;
};

template <typename floatT>
static AttnDev<floatT> attn_dev_alloc(const std::vector<floatT> &qkv_t, const std::vector<floatT> &dout_t, int B, int T,
                                      int C, int NH) {
    const long nqkv = (long)qkv_t.size(), nout = (long)dout_t.size(), nlse = (long)B * NH * T;
    AttnDev<floatT> d;
    cudaCheck(cudaMalloc(&d.qkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d.dout, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d.out, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d.dqkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d.dqkv2, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d.lse, nlse * sizeof(float)));
    const size_t nscratch = attn_check_scratch_floats(sizeof(floatT), B, T, C, NH);
    cudaCheck(cudaMalloc(&d.scratch, nscratch * sizeof(float)));
    cudaCheck(cudaMemcpy(d.qkv, qkv_t.data(), nqkv * sizeof(floatT), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d.dout, dout_t.data(), nout * sizeof(floatT), cudaMemcpyHostToDevice));
    // Poison every output (all-ones bytes are NaN in all three types): anything not written shows up.
    cudaCheck(cudaMemset(d.out, 0xff, nout * sizeof(floatT)));
    cudaCheck(cudaMemset(d.lse, 0xff, nlse * sizeof(float)));
    cudaCheck(cudaMemset(d.dqkv, 0xff, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(d.dqkv2, 0x00, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(d.scratch, 0xff, nscratch * sizeof(float)));
    return d;
}

template <typename floatT> static void attn_dev_free(const AttnDev<floatT> &d) {
    cudaCheck(cudaFree(d.qkv));
    cudaCheck(cudaFree(d.dout));
    cudaCheck(cudaFree(d.out));
    cudaCheck(cudaFree(d.dqkv));
    cudaCheck(cudaFree(d.dqkv2));
    cudaCheck(cudaFree(d.lse));
    cudaCheck(cudaFree(d.scratch));
}

// 16-bit: the kernels before issue #22 (v1) do the same arithmetic per row in the same order for out, lse, dK and dV
// (other tiles per block, other loads), so they must give the same bits; dQ is summed in another order (dq vs v1: its
// largest difference, relative to dQ's largest magnitude). Independent of the reference: a change in the order of a
// sum shows here even where it stays inside the tolerance. v1 is multi-head only, without RoPE. Writes the note for
// the PASS/FAIL line to v1.
template <typename floatT>
static bool same_bits_as_v1(const AttnDev<floatT> &dev, int B, int T, int C, int NH, const std::vector<floatT> &out_t,
                            const std::vector<float> &lse_g, const std::vector<floatT> &dqkv_t, char *v1, size_t v1_len) {
    const long nqkv = (long)dqkv_t.size(), nout = (long)out_t.size(), nlse = (long)lse_g.size();
    floatT *d_qkv = dev.qkv, *d_dout = dev.dout, *d_out = dev.out, *d_dqkv2 = dev.dqkv2;
    float *d_lse = dev.lse, *d_scratch = dev.scratch;
    std::vector<floatT> dqkv2_t(nqkv), out2_t(nout);
    std::vector<float> lse2_g(nlse);
    cudaCheck(cudaMemset(d_dqkv2, 0xff, nqkv * sizeof(floatT)));
    attn_v1_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    attn_v1_backward(d_dqkv2, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(out2_t.data(), d_out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse2_g.data(), d_lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv2_t.data(), d_dqkv2, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    bool same = memcmp(out_t.data(), out2_t.data(), nout * sizeof(floatT)) == 0 &&
                memcmp(lse_g.data(), lse2_g.data(), nlse * sizeof(float)) == 0;
    double dq_diff = 0.0, dq_max = 0.0;
    for (long r = 0; r < (long)B * T; r++) {
        same &= memcmp(&dqkv_t[r * 3 * C + C], &dqkv2_t[r * 3 * C + C], 2 * C * sizeof(floatT)) == 0;
        for (int c = 0; c < C; c++) {
            const double a = attn_to_float(dqkv_t[r * 3 * C + c]), b = attn_to_float(dqkv2_t[r * 3 * C + c]);
            dq_diff = fmax(dq_diff, fabs(a - b));
            dq_max = fmax(dq_max, fabs(b));
        }
    }
    snprintf(v1, v1_len, " | %s v1 bits; dq vs v1 %.1e", same ? "=" : "DIFFER from", dq_max > 0 ? dq_diff / dq_max : dq_diff);
    return same;
}

// Another 16-bit backward (TRAIN_GPT_ATTN_BWD's kernel `kernel`: the fused one or v3, beside the default 2pass) on
// the same inputs and forward outputs: dq, dk, dv against the reference at the same tolerance, and twice (into
// buffers poisoned differently) for the same bits. Its dK and dV must also be the default kernel's bits (dflt): each
// key row's warp runs the same products over the same query tiles in the same order (only dQ is summed in another
// order). Prints its own PASS/FAIL line; without RoPE only (with RoPE the fused kernel runs whatever is chosen).
template <typename floatT>
static bool check_alt(const AttnDev<floatT> &dev, const AttnShape &sh, const std::vector<float> &dqkv_ref,
                      const std::vector<floatT> &dflt, int kernel) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH, KV = sh.KV > 0 ? sh.KV : NH;
    const long kvw = (long)KV * hs, C3 = C + 2 * kvw, nqkv = (long)B * T * C3;
    std::vector<floatT> a(nqkv), b(nqkv);
    cudaCheck(cudaMemset(dev.dqkv, 0xff, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(dev.dqkv2, 0x00, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(dev.scratch, 0xff, attn_check_scratch_floats(sizeof(floatT), B, T, C, NH) * sizeof(float)));
    flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                             nullptr, kernel);
    flash_attention_backward(dev.dqkv2, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                             nullptr, kernel);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(a.data(), dev.dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(b.data(), dev.dqkv2, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    const bool det = memcmp(a.data(), b.data(), nqkv * sizeof(floatT)) == 0;
    bool same_kv = true;
    for (long r = 0; r < (long)B * T; r++) same_kv &= memcmp(&a[r * C3 + C], &dflt[r * C3 + C], 2 * kvw * sizeof(floatT)) == 0;
    std::vector<float> g(nqkv);
    for (long i = 0; i < nqkv; i++) g[i] = attn_to_float(a[i]);
    const AttnTol tol = attn_tolerance(sizeof(floatT), std::is_same<floatT, __nv_bfloat16>::value);
    const double e_dq = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, 0, C);
    const double e_dk = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, C, kvw);
    const double e_dv = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, C + kvw, kvw);
    const bool ok = e_dq <= tol.dqkv && e_dk <= tol.dqkv && e_dv <= tol.dqkv && det && same_kv;
    uint32_t fnv = 2166136261u;
    for (long i = 0; i < nqkv * (long)sizeof(floatT); i++) fnv = (fnv ^ ((const unsigned char *)a.data())[i]) * 16777619u;
    char name[40] = "fused backward";
    if (kernel == ATT_BWD_V3) snprintf(name, sizeof(name), "v3 backward (%d splits)", attn_v3_splits(B, T, NH));
    if (kernel == ATT_BWD_2PASS) snprintf(name, sizeof(name), "2pass backward");
    printf("%s %-5s B=%d T=%4d C=%3d NH=%2d KV=%d hs=%3d | %s: rel err dq %.2e dk %.2e dv %.2e "
           "(tol %.1e) | deterministic %s, bits %08x | dk, dv %s the default kernel's bits\n", ok ? "PASS" : "FAIL",
           attn_type_name<floatT>(), B, T, C, NH, KV, hs, name, e_dq, e_dk, e_dv, tol.dqkv, det ? "yes" : "NO", fnv,
           same_kv ? "=" : "DIFFER from");
    return ok;
}

template <typename floatT>
static bool run_check(const AttnShape &sh, uint64_t seed) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH, KV = sh.KV > 0 ? sh.KV : NH;
    const bool gqa = KV != NH;
    const char *ty = attn_type_name<floatT>();
    const long kvw = (long)KV * hs, C3 = C + 2 * kvw;  // a qkv row: 3C where KV = NH
    const long nqkv = (long)B * T * C3, nout = (long)B * T * C, nlse = (long)B * NH * T;
    // Inputs, rounded to floatT on the host first so that the reference sees exactly what the GPU sees.
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 2.0f, seed, kvw);
    std::vector<floatT> qkv_t(nqkv), dout_t(nout);
    for (long i = 0; i < nqkv; i++) { qkv_t[i] = attn_from_float<floatT>(qkv[i]); qkv[i] = attn_to_float(qkv_t[i]); }
    for (long i = 0; i < nout; i++) { dout_t[i] = attn_from_float<floatT>(dout[i]); dout[i] = attn_to_float(dout_t[i]); }
    std::vector<float> out_ref(nout), lse_ref(nlse), dqkv_ref(nqkv);
    // RoPE: angles t θ^(-2i/hs), θ = 10000; the reference attends over the rotated q and k and its dq and dk are
    // rotated back
    const long ntab = (long)T * (hs / 2);
    std::vector<float> cos_t(ntab), sin_t(ntab), qkv_rot(qkv);
    float *d_cos = nullptr, *d_sin = nullptr;
    if (sh.rope) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < hs / 2; i++) {
                const double a = t * pow(10000.0, -2.0 * i / hs);
                cos_t[(long)t * (hs / 2) + i] = (float)cos(a);
                sin_t[(long)t * (hs / 2) + i] = (float)sin(a);
            }
        attn_ref_rope<floatT>(qkv_rot.data(), cos_t.data(), sin_t.data(), B, T, C3, NH + KV, hs, false);
        cudaCheck(cudaMalloc(&d_cos, ntab * sizeof(float)));
        cudaCheck(cudaMalloc(&d_sin, ntab * sizeof(float)));
        cudaCheck(cudaMemcpy(d_cos, cos_t.data(), ntab * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_sin, sin_t.data(), ntab * sizeof(float), cudaMemcpyHostToDevice));
    }
    attn_ref_forward(out_ref.data(), lse_ref.data(), qkv_rot.data(), B, T, C, NH, KV);
    attn_ref_backward(dqkv_ref.data(), dout.data(), qkv_rot.data(), B, T, C, NH, KV);
    if (sh.rope) attn_ref_rope<floatT>(dqkv_ref.data(), cos_t.data(), sin_t.data(), B, T, C3, NH + KV, hs, true);

    const AttnDev<floatT> dev = attn_dev_alloc(qkv_t, dout_t, B, T, C, NH);
    floatT *d_qkv = dev.qkv, *d_dout = dev.dout, *d_out = dev.out, *d_dqkv = dev.dqkv, *d_dqkv2 = dev.dqkv2;
    float *d_lse = dev.lse, *d_scratch = dev.scratch;

    flash_attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0, KV, d_cos, d_sin);
    flash_attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0, KV, d_cos, d_sin);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<floatT> out_t(nout), dqkv_t(nqkv), dqkv2_t(nqkv), out2_t(nout);
    std::vector<float> lse_g(nlse), lse2_g(nlse);
    cudaCheck(cudaMemcpy(out_t.data(), d_out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse_g.data(), d_lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv_t.data(), d_dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    // Determinism: forward and backward again (backward into a buffer poisoned differently), bit-compare.
    flash_attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0, KV, d_cos, d_sin);
    flash_attention_backward(d_dqkv2, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0, KV, d_cos, d_sin);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(out2_t.data(), d_out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse2_g.data(), d_lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv2_t.data(), d_dqkv2, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    const bool det = memcmp(out_t.data(), out2_t.data(), nout * sizeof(floatT)) == 0 &&
                     memcmp(lse_g.data(), lse2_g.data(), nlse * sizeof(float)) == 0 &&
                     memcmp(dqkv_t.data(), dqkv2_t.data(), nqkv * sizeof(floatT)) == 0;
    char v1[96] = "";
    bool same = true;
    // (v1 is multi-head only, without RoPE: GQA and RoPE shapes skip the comparison)
    if constexpr (sizeof(floatT) == 2)
        if (!gqa && !sh.rope) same = same_bits_as_v1(dev, B, T, C, NH, out_t, lse_g, dqkv_t, v1, sizeof(v1));
    std::vector<float> out_g(nout), dqkv_g(nqkv);
    for (long i = 0; i < nout; i++) out_g[i] = attn_to_float(out_t[i]);
    for (long i = 0; i < nqkv; i++) dqkv_g[i] = attn_to_float(dqkv_t[i]);
    const AttnTol tol = attn_tolerance(sizeof(floatT), std::is_same<floatT, __nv_bfloat16>::value);
    const double e_out = attn_rel_err(out_g.data(), out_ref.data(), (long)B * T, C, 0, C);
    const double e_lse = attn_rel_err(lse_g.data(), lse_ref.data(), 1, nlse, 0, nlse);
    const double e_dq = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, C3, 0, C);
    const double e_dk = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, C3, C, kvw);
    const double e_dv = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, C3, C + kvw, kvw);
    const bool ok = e_out <= tol.out && e_lse <= tol.lse && e_dq <= tol.dqkv && e_dk <= tol.dqkv &&
                    e_dv <= tol.dqkv && det && same;
    // FNV-1a of the outputs' bits: runs in other thread and block orders (the emulator's) must print the same
    uint32_t fnv = 2166136261u;
    auto hash = [&](const void *p, size_t n) {
        for (size_t i = 0; i < n; i++) fnv = (fnv ^ ((const unsigned char *)p)[i]) * 16777619u;
    };
    hash(out_t.data(), nout * sizeof(floatT));
    hash(lse_g.data(), nlse * sizeof(float));
    hash(dqkv_t.data(), nqkv * sizeof(floatT));
    char kvs[24] = "";
    if (gqa || sh.rope) snprintf(kvs, sizeof(kvs), " KV=%d%s", KV, sh.rope ? " rope" : "");
    printf("%s %-5s B=%d T=%4d C=%3d NH=%2d%s hs=%3d | rel err out %.2e lse %.2e dq %.2e dk %.2e dv %.2e "
           "(tol %.1e/%.1e/%.1e) | deterministic %s, bits %08x%s\n",
           ok ? "PASS" : "FAIL", ty, B, T, C, NH, kvs, hs, e_out, e_lse, e_dq, e_dk, e_dv, tol.out, tol.lse, tol.dqkv,
           det ? "yes" : "NO", fnv, v1);
    bool ok_v3 = true;  // the other 16-bit backwards
    if constexpr (sizeof(floatT) == 2)
        if (!sh.rope)
            for (int k : {ATT_BWD_2PASS, ATT_BWD_FUSED, ATT_BWD_V3})
                if (k != attn_bwd_kernel_choice()) ok_v3 &= check_alt(dev, sh, dqkv_ref, dqkv_t, k);
    attn_dev_free(dev);
    if (sh.rope) {
        cudaCheck(cudaFree(d_cos));
        cudaCheck(cudaFree(d_sin));
    }
    return ok && ok_v3;
}

#include "attention_masks.cuh"

// Milliseconds per call of f (after warm-up), by CUDA events.
template <typename F> static float time_ms(F &&f, int warmup, int iters) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (int i = 0; i < warmup; i++) f();
    cudaCheck(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) f();
    cudaCheck(cudaEventRecord(e1));
    cudaCheck(cudaEventSynchronize(e1));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    return ms / iters;
}

// One row of the benchmark table: the current kernels ("new": the backward TRAIN_GPT_ATTN_BWD chooses, 2pass by
// default), those before issue #22 ("v1"), and the other 16-bit backwards, "fused" (5 products, blocks taking turns
// on dQ) and "v3", at one shape,
// TFLOP/s in FlashAttention's convention (causal: forward 4 B NH T^2 hs / 2, backward 2.5 x forward; the
// backward's row dot and recomputation are not counted). dev/bench_sdpa.py prints PyTorch's at the same shapes.
template <typename floatT>
static void run_bench(int B, int T, int C, int NH, int KV = 0) {
    if (KV <= 0) KV = NH;
    const long kvw = (long)KV * (C / NH), nqkv = (long)B * T * (C + 2 * kvw), nout = (long)B * T * C, nlse = (long)B * NH * T;
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 1.0f, 7, kvw);
    std::vector<floatT> qkv_t(nqkv), dout_t(nout);
    for (long i = 0; i < nqkv; i++) qkv_t[i] = attn_from_float<floatT>(qkv[i]);
    for (long i = 0; i < nout; i++) dout_t[i] = attn_from_float<floatT>(dout[i]);
    floatT *d_qkv, *d_dout, *d_out, *d_dqkv;
    float *d_lse, *d_scratch;
    cudaCheck(cudaMalloc(&d_qkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_dout, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_out, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_dqkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_lse, nlse * sizeof(float)));
    cudaCheck(cudaMalloc(&d_scratch, attn_check_scratch_floats(sizeof(floatT), B, T, C, NH) * sizeof(float)));
    cudaCheck(cudaMemcpy(d_qkv, qkv_t.data(), nqkv * sizeof(floatT), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dout, dout_t.data(), nout * sizeof(floatT), cudaMemcpyHostToDevice));
    const int warmup = 3, iters = 20;
    const double fwd_flops = 4.0 * B * NH * (double)T * T * ((double)C / NH) / 2.0, bwd_flops = 2.5 * fwd_flops;
    const float f_new = time_ms([&] { flash_attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0, KV); }, warmup, iters);
    const float b_new = time_ms([&] {
        flash_attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0, KV); }, warmup, iters);
    float f_v1 = 0.0f, b_v1 = 0.0f, b_fused = 0.0f, b_v3 = 0.0f;
    if constexpr (sizeof(floatT) == 2) {  // the fused and v3 backwards, whatever TRAIN_GPT_ATTN_BWD says
        b_fused = time_ms([&] { flash_attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0, KV,
                                                         nullptr, nullptr, ATT_BWD_FUSED); }, warmup, iters);
        b_v3 = time_ms([&] { flash_attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0, KV, nullptr,
                                                      nullptr, ATT_BWD_V3); }, warmup, iters);
    }
    if constexpr (sizeof(floatT) == 2) if (KV == NH) {  // v1 is multi-head only
        f_v1 = time_ms([&] { attn_v1_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0); }, warmup, iters);
        b_v1 = time_ms([&] { attn_v1_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0); }, warmup, iters);
    }
    auto tf = [](double flops, float ms) { return ms > 0.0f ? flops / (ms * 1e-3) / 1e12 : 0.0; };
    char kvs[16] = "";
    if (KV != NH) snprintf(kvs, sizeof(kvs), " (KV %d)", KV);
    printf("bench %-5s %3d %5d %3d%s %4d | %8.3f %7.1f %7.1f | %8.3f %7.1f %7.1f %7.1f | %8.3f %7.1f\n", attn_type_name<floatT>(),
           B, T, NH, kvs, C / NH, f_new, tf(fwd_flops, f_new), tf(fwd_flops, f_v1), b_new, tf(bwd_flops, b_new),
           tf(bwd_flops, b_fused), tf(bwd_flops, b_v1), b_v3, tf(bwd_flops, b_v3));
    cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_dqkv));
    cudaCheck(cudaFree(d_lse));
    cudaCheck(cudaFree(d_scratch));
}

// The table: T 512..4096 at 16k tokens per call (B = 16384 / T), head sizes 64 (NH 12, GPT-2 124M's) and 128
// (NH 6, the same C), bf16 and fp16; then GPT-2 124M's training shape B = 8, T = 1024.
static void bench_table(void) {
    printf("bench type    B     T  NH   hs |  fwd ms  TFLOP/s (v1) |  bwd ms  TFLOP/s (fused) (v1) |  v3 bwd ms TFLOP/s\n");
    for (int hs : {64, 128})
        for (int T : {512, 1024, 2048, 4096}) {
            run_bench<__nv_bfloat16>(16384 / T, T, 768, 768 / hs);
            run_bench<__half>(16384 / T, T, 768, 768 / hs);
        }
    run_bench<__nv_bfloat16>(8, 1024, 768, 12);
    // grouped-query attention at the same shape (the Llama family's d12 width): 4:1 and multi-query; the FLOPs are
    // the same as multi-head's, K and V are read NH / KV times fewer
    run_bench<__nv_bfloat16>(8, 1024, 768, 12, 3);
    run_bench<__nv_bfloat16>(8, 1024, 768, 12, 1);
}

#include "attention_sweep.cuh"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "sweep") == 0) return attn_sweep();
    const bool do_check = argc < 2 || strcmp(argv[1], "check") == 0;
    const bool do_bench = argc < 2 || strcmp(argv[1], "bench") == 0;
    // "check small": only the shapes with T <= 256 (the CPU emulator, dev/cuda/emu, runs these in CI); "check masks":
    // only the masks' checks (attention_masks.cuh; both run them); "check orders": the 16-bit backwards whose blocks
    // wait on each other (cuda/block_order.cuh: the fused kernel's dQ turns, v3's splits, the KV-stationary kernel's
    // descending dQ turns), in bf16 at shapes that give each several blocks to wait on: the runs test_cuda_emu.sh repeats
    // in other block orders, whose lines must equal the same lines of `check small` (their bits too)
    const bool orders = argc > 2 && strcmp(argv[2], "orders") == 0;
    const bool small = orders || (argc > 2 && strcmp(argv[2], "small") == 0),
               masks_only = argc > 2 && strcmp(argv[2], "masks") == 0;
    int dev = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    int failures = 0;
    if (do_check) failures += run_mask_checks(101, orders);
    if (do_check && !masks_only) {
        // The brief's three shapes, then edge cases: T = 1, three tiles with a ragged end, hs = 128, and the head
        // sizes that pad to 48, 80, 96 and 112 (the shape check accepts them).
        // {1, 250, 128, 2}: two 128-row blocks of the 16-bit forward and dQ, the second ragged, 4 key tiles.
        const AttnShape shapes[] = {{2, 64, 64, 4},  {1, 100, 128, 4}, {4, 1024, 768, 12}, {1, 1, 64, 2},
                                    {2, 130, 256, 2}, {1, 77, 96, 2},  {1, 50, 160, 2},    {1, 40, 192, 2},
                                    {1, 33, 224, 2},  {1, 250, 128, 2}};
        // fp32 only: head sizes that are not multiples of 16 (zero-padded to 48 and 16).
        const AttnShape fp32_shapes[] = {{1, 50, 40, 1}, {2, 70, 24, 3}};
        uint64_t seed = 1;
        // `check orders` keeps {1, 250, 128, 2} (two 128-row blocks of dQ turns), GQA 2:1 with a ragged third tile, and
        // v3's 4 splits over 5 key blocks; the seeds stay those of `check small`, so the lines are the same
        auto keep = [&](const AttnShape &sh) { return !orders || (sh.T == 250 || sh.T == 150 || sh.T == 520); };
        for (const AttnShape &sh : shapes) {
            if ((small && sh.T > 256) || !keep(sh)) { seed++; continue; }
            if (!orders) failures += !run_check<float>(sh, seed);
            failures += !run_check<__nv_bfloat16>(sh, seed);
            if (!orders) failures += !run_check<__half>(sh, seed);
            seed++;
        }
        for (const AttnShape &sh : fp32_shapes) { if (!orders) failures += !run_check<float>(sh, seed); seed++; }
        // Grouped-query attention (the Llama family): 4:1 (hs 16), multi-query at hs 64 (the d12 head, K and V in
        // registers), 2:1 with a ragged third tile (hs 32), multi-query at hs 128 (K and V in shared memory). dK and dV
        // sum over the group's query heads; the 16-bit backward's blocks walk the group's heads in turn.
        const AttnShape gqa_shapes[] = {{2, 64, 128, 8, 2}, {1, 100, 256, 4, 1}, {1, 150, 128, 4, 2}, {1, 70, 384, 3, 1}};
        for (const AttnShape &sh : gqa_shapes) {
            if (!keep(sh)) { seed++; continue; }
            if (!orders) failures += !run_check<float>(sh, seed);
            failures += !run_check<__nv_bfloat16>(sh, seed);
            if (!orders) failures += !run_check<__half>(sh, seed);
            seed++;
        }
        // RoPE inside the loads (the Llama family without QK-norm): 4:1 at hs 32 with a ragged tile, 1:1 at hs 16,
        // multi-query at hs 64 over two 128-row forward blocks, and (GPU only) the d12 GQA 4:1 training shape.
        const AttnShape rope_shapes[] = {{1, 100, 256, 8, 2, true}, {2, 70, 64, 4, 4, true}, {1, 150, 256, 4, 1, true},
                                         {4, 1024, 768, 12, 3, true}};
        for (const AttnShape &sh : rope_shapes) {
            if ((small && sh.T > 256) || orders) { seed++; continue; }
            failures += !run_check<float>(sh, seed);
            failures += !run_check<__nv_bfloat16>(sh, seed);
            failures += !run_check<__half>(sh, seed);
            seed++;
        }
        // The v3 backward's splits (TRAIN_GPT_ATTN_BWD=v3; every 16-bit shape above checks it too, at 1 or 2 splits):
        // 4 splits over 5 key blocks of 128 (snake order 0 1 2 3 | 3: split 3 takes two), ragged, 1:1 at hs 16 and 4:1
        // at hs 64 over 4 key blocks; 3 splits at hs 128, 4:1, ragged.
        // Each in one 16-bit type (the kernel is one template over the type, and both types run it at every shape above):
        // bf16, fp16, bf16.
        const AttnShape v3_shapes[] = {{1, 520, 32, 2}, {1, 390, 256, 4, 1}, {1, 300, 512, 4, 1}};
        for (int i = 0; i < 3; i++) {
            const AttnShape &sh = v3_shapes[i];
            if (keep(sh) && i % 2 == 0) failures += !run_check<__nv_bfloat16>(sh, seed);
            if (!orders && i % 2 == 1) failures += !run_check<__half>(sh, seed);
            seed++;
        }
    }
    if (do_bench) bench_table();
    if (do_check) printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
