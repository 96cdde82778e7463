// cuda/attention_bwd_2pass.cuh: the 16-bit attention backward in two passes, the default (TRAIN_GPT_ATTN_BWD=2pass):
// first dQ, by blocks of 128 query rows that compute their rows' D = rowsum(dout * out) and recompute S and dP for
// dQ = dS K; then dK and dV, by attention_mma.cuh's backward kernel without its dQ part (attn_tc_bwd_kernel<.., false>),
// which recomputes S and dP once more. 7 products per tile pair against the one-kernel backward's 5, but no block
// waits on another and no dQ accumulator goes through L2.
//
// Why (dev/bench/2026-11-28-h200, NVIDIA H200, bf16, hs 64, one run): this backward (then dev/cuda/attention_v2.cuh,
// multi-head only) took 0.665 ms at B=16 T=1024 (96.9 TFLOP/s) where the one-kernel backward, the default since issue
// #22's second round and never timed before, took 0.914 ms (70.5): its blocks take turns on each dQ tile (a spin on a
// global counter, a barrier and a 16 KB fp32 read-modify-write of dQ per tile pair). The two-pass one was ahead at
// every shape of the table (T 512 to 4096, hs 64 and 128: 68-142 TFLOP/s against 66-73), by 1.37x at GPT-2's.
//
// Grouped-query attention: a dQ block reads its query head's key/value head in place; a dK/dV block walks its group's
// query heads in order (as the one-kernel backward does: the same bits for dK and dV). RoPE in the loads is not offered
// (flash_attention_backward runs the one-kernel backward there). Launched by cuda/attention.cuh's
// flash_attention_backward (attn_2pass_backward). Deterministic: every output element is written by
// one thread, its sums in a fixed order.
#ifndef CUDA_ATTENTION_BWD_2PASS_CUH
#define CUDA_ATTENTION_BWD_2PASS_CUH

#include "attention_mma.cuh"

// Shared memory of the dQ pass: K and V tiles x 2 buffers (the block's Q and dout first, in buffer 0 and 1's place).
template <typename floatT, int HS>
struct Attn2Pass {
    static constexpr size_t DQ_BYTES = sizeof(floatT) * 4 * AttnTc<floatT, HS>::TILE;
};

// The row dot D = rowsum(dout * out) of a warp's 16 rows [r_lo, r_lo + 16), each row's lanes summed in a fixed
// order (the fp32 path's attn_bwd_rowdot_kernel, bit for bit); written to rowdot for the dK/dV pass, and returned
// for this lane's rows r_lo + g and r_lo + g + 8.
template <typename floatT>
__device__ __forceinline__ void attn_2pass_rowdot(float D[2], float *__restrict__ rowdot, const floatT *__restrict__ dout,
                                                  const floatT *__restrict__ out, int r_lo, int T, int C, int hs) {
    const int lane = threadIdx.x & 31, g = lane >> 2;
    for (int i = 0; i < 16; i++) {
        const int r = r_lo + i;
        float s = 0.0f;
        if (r < T)
            for (int c = lane; c < hs; c += 32) s += attn_to_float(dout[(long)r * C + c]) * attn_to_float(out[(long)r * C + c]);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0 && r < T) rowdot[r] = s;
        if (i == g) D[0] = s;
        if (i == g + 8) D[1] = s;
    }
}

// The dQ pass. Block (x, b*NH + h) owns query rows [128 qb, 128 qb + 128), qb = nqb - 1 - x (the longest loops
// first); warp w owns 16, its Q and dout rows held as A operands. It first computes its rows' D, then per key tile
// kb up to the diagonal: S = Q K^T, dP = dout V^T, P from lse, dS = P (dP - D), dQ += dS K (times scale at the end),
// K through ldmatrix.trans; the next K and V tiles load while this one is computed on.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS)
attn_2pass_dq_kernel(floatT *__restrict__ dqkv, float *__restrict__ rowdot, const floatT *__restrict__ dout,
                     const floatT *__restrict__ qkv, const floatT *__restrict__ out, const float *__restrict__ lse, int T,
                     int C, int NH, int KV, float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *sm = reinterpret_cast<floatT *>(attn_smem);  // buffer b: K at tile 2b, V at 2b + 1; Q, dout first
    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, true, ATT_TC_BQ);
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, t = lane & 3;
    const long C3 = blk.C3;
    const int q0 = qb * ATT_TC_BQ, r_lo = q0 + warp * 16, row[2] = {r_lo + (lane >> 2), r_lo + (lane >> 2) + 8};
    const int nkb = attn_tc_key_tiles(q0, T);
    const float sl2 = scale * 1.4426950408889634f;

    attn_tc_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm, blk.q, C3, q0, T, hs);
    attn_tc_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm + 2 * L::TILE, blk.dout, C, q0, T, hs);
    cp_async_commit();
    float Dr[2], lse2[2];
    attn_2pass_rowdot<floatT>(Dr, rowdot + (long)bh * T, blk.dout, out + blk.row_at, r_lo, T, C, hs);
#pragma unroll
    for (int r = 0; r < 2; r++) lse2[r] = row[r] < T ? lse[(long)bh * T + row[r]] * 1.4426950408889634f : 0.0f;
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qa[HS / 16][4], da[HS / 16][4];
    attn_tc_rows<floatT, HS>(qa, sm, warp * 16);
    attn_tc_rows<floatT, HS>(da, sm + 2 * L::TILE, warp * 16);
    __syncthreads();  // every warp has its Q and dout rows before K and V overwrite them
    attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(sm, blk.k, C3, 0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(sm + L::TILE, blk.v, C3, 0, T, hs);
    cp_async_commit();
    float dq[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    for (int kb = 0; kb < nkb; kb++) {
        const int k0 = kb * ATT_TC_BK;
        cp_async_wait<0>();
        __syncthreads();  // tile kb is in for every thread, and every warp is done with tile kb - 1
        if (kb + 1 < nkb) {
            floatT *nx = sm + ((kb + 1) & 1) * 2 * L::TILE;
            attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(nx, blk.k, C3, k0 + ATT_TC_BK, T, hs);
            attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(nx + L::TILE, blk.v, C3, k0 + ATT_TC_BK, T, hs);
        }
        cp_async_commit();
        const floatT *Ks = sm + (kb & 1) * 2 * L::TILE, *Vs = Ks + L::TILE;
        const AttnDiag dg(r_lo, k0);
        if (dg.n_end <= 0) continue;
        float s[8][4], dp[8][4];
        attn_tc_scores<floatT, HS>(s, qa, Ks, dg.n_end);
        attn_tc_scores<floatT, HS>(dp, da, Vs, dg.n_end);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse2[e >> 1]));
                if (dg.masked && (n >= dg.n_end || k0 + n * 8 + 2 * t + (e & 1) > row[e >> 1])) p = 0.0f;  // causal
                s[n][e] = p * (dp[n][e] - Dr[e >> 1]);
            }
        attn_tc_pv<floatT, HS>(dq, s, Ks, 0, dg.n_end / 2);
    }
    const float sc[2] = {scale, scale};
    attn_tc_write<floatT, HS>(dqkv + blk.qkv_at, C3, dq, row, sc, T, hs);
}

#endif  // CUDA_ATTENTION_BWD_2PASS_CUH
