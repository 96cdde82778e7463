// dev/cuda/attention_v2.cuh: the 16-bit backward as it was between the two rounds of issue #22: 7 products per
// tile pair (a dQ kernel on 128-row blocks that computes the row dot D and recomputes S and dP for dQ = dS K, then
// the dK/dV kernel that recomputes them again), kept so that `./dev/cuda/attention bench` can time it against the
// 5-product backward of cuda/attention_mma.cuh and `check` can compare their bits (dK and dV are the same
// arithmetic; dQ is summed in another order). Not part of the trainer.
#ifndef DEV_CUDA_ATTENTION_V2_CUH
#define DEV_CUDA_ATTENTION_V2_CUH

#include "../../cuda/attention.cuh"

template <typename floatT, int HS> struct AttnV2Bytes {
    static constexpr size_t DQ = sizeof(floatT) * 4 * AttnTc<floatT, HS>::TILE;                       // K, V x 2
    static constexpr size_t DKDV = sizeof(floatT) * 4 * AttnTc<floatT, HS>::TILE + 4 * sizeof(float) * 64;  // Q, dout x 2; lse, D x 2
};

// The row dot D = rowsum(dout * out) of a warp's 16 rows [r_lo, r_lo + 16), each row's lanes summed in a fixed
// order (the fp32 path's attn_bwd_rowdot_kernel, bit for bit); written to rowdot for the dK/dV kernel, and
// returned for this lane's rows r_lo + g and r_lo + g + 8.
template <typename floatT>
__device__ __forceinline__ void attn_v2_rowdot(float D[2], float *__restrict__ rowdot, const floatT *__restrict__ dout,
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

// Backward, dQ, run first. Block (x, b*NH + h) owns query rows [128 qb, 128 qb + 128), qb = nqb - 1 - x; warp w
// owns 16, its Q and dout rows held as A operands. It first computes its rows' D (attn_v2_rowdot), then per key
// tile kb up to the diagonal: S = Q K^T, dP = dout V^T, P from lse, dS = P (dP - D), dQ += dS K (times scale at
// the end), K through ldmatrix.trans; the next K and V tiles load while this one is computed on.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS)
attn_v2_bwd_dq_kernel(floatT *__restrict__ dqkv, float *__restrict__ rowdot, const floatT *__restrict__ dout,
                      const floatT *__restrict__ qkv, const floatT *__restrict__ out, const float *__restrict__ lse, int T,
                      int C, int NH, float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *sm = reinterpret_cast<floatT *>(attn_smem);  // buffer b: K at tile 2b, V at 2b + 1; Q, dout first
    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, NH, true, ATT_TC_BQ);
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, t = lane & 3;
    const long C3 = blk.C3;
    const int q0 = qb * ATT_TC_BQ, r_lo = q0 + warp * 16, row[2] = {r_lo + (lane >> 2), r_lo + (lane >> 2) + 8};
    const int nkb = attn_tc_key_tiles(q0, T);
    const float sl2 = scale * 1.4426950408889634f;

    attn_tc_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm, blk.q, C3, q0, T, hs);
    attn_tc_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm + 2 * L::TILE, blk.dout, C, q0, T, hs);
    cp_async_commit();
    float Dr[2], lse2[2];
    attn_v2_rowdot<floatT>(Dr, rowdot + (long)bh * T, blk.dout, out + blk.row_at, r_lo, T, C, hs);
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

// Backward, dK and dV, after dQ (which wrote D). Block (kb, b*NH + h) owns key rows [64 kb, 64 kb + 64) (kb =
// x: the longest first); warp w owns 16 of them, its K and V rows held as A operands. Per query tile qb >= kb,
// transposed: S^T = K Q^T, dP^T = V dout^T, P^T = 2^(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - D);
// then dV += P^T dout and dK += dS^T Q (times scale at the end), dout and Q through ldmatrix.trans. The next
// Q and dout tiles (and their lse and D) load while this one is computed on.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_v2_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                        const float *__restrict__ lse, const float *__restrict__ rowdot, int T, int C, int NH, float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *sm = reinterpret_cast<floatT *>(attn_smem);  // buffer b: Q at tile 2b, dout at 2b + 1; K, V first in 1
    float *lse_s = reinterpret_cast<float *>(sm + 4 * L::TILE), *D_s = lse_s + 2 * 64;  // [2][64] each
    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, NH, false);
    const int nqb = blk.nqb, kb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, t = lane & 3;
    const long C3 = blk.C3;
    const int k0 = kb * ATT_BK, key[2] = {k0 + warp * 16 + (lane >> 2), k0 + warp * 16 + (lane >> 2) + 8};
    const float sl2 = scale * 1.4426950408889634f;
    // lse (log2 domain) and D of query tile qb into slot `buf`; rows past T are zero (masked anyway)
    auto load_rows = [&](int qb, int buf) {
        for (int i = threadIdx.x; i < 64; i += ATT_THREADS) {
            const int q = qb * ATT_BQ + i;
            lse_s[buf * 64 + i] = q < T ? lse[(long)bh * T + q] * 1.4426950408889634f : 0.0f;
            D_s[buf * 64 + i] = q < T ? rowdot[(long)bh * T + q] : 0.0f;
        }
    };

    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm + 2 * L::TILE, blk.k, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm + 3 * L::TILE, blk.v, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm, blk.q, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm + L::TILE, blk.dout, C, k0, T, hs);
    cp_async_commit();
    load_rows(kb, 0);
    cp_async_wait<0>();
    __syncthreads();
    uint32_t ka[HS / 16][4], va[HS / 16][4];
    attn_tc_rows<floatT, HS>(ka, sm + 2 * L::TILE, warp * 16);
    attn_tc_rows<floatT, HS>(va, sm + 3 * L::TILE, warp * 16);
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_BQ, buf = (qb - kb) & 1;
        cp_async_wait<0>();
        __syncthreads();  // tile qb is in for every thread, and every warp is done with tile qb - 1 (and K, V)
        if (qb + 1 < nqb) {
            floatT *nx = sm + (buf ^ 1) * 2 * L::TILE;
            attn_tc_tile<floatT, HS, 64, ATT_THREADS>(nx, blk.q, C3, q0 + ATT_BQ, T, hs);
            attn_tc_tile<floatT, HS, 64, ATT_THREADS>(nx + L::TILE, blk.dout, C, q0 + ATT_BQ, T, hs);
            load_rows(qb + 1, buf ^ 1);
        }
        cp_async_commit();
        const floatT *Qs = sm + buf * 2 * L::TILE, *dOs = Qs + L::TILE;
        const float *lse_b = lse_s + buf * 64, *D_b = D_s + buf * 64;
        float s[8][4], dp[8][4];
        attn_tc_scores<floatT, HS>(s, ka, Qs, 8);
        attn_tc_scores<floatT, HS>(dp, va, dOs, 8);
        const bool masked = qb == kb || q0 + ATT_BQ > T;  // the causal diagonal, or query rows past T
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = n * 8 + 2 * t + (e & 1), q = q0 + i;
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse_b[i]));
                if (masked && (q < key[e >> 1] || q >= T)) p = 0.0f;
                s[n][e] = p;
                dp[n][e] = p * (dp[n][e] - D_b[i]);
            }
        // On the diagonal tile warp w's keys see queries >= 16 w only: 16-query chunks w..3.
        const int kc0 = qb == kb ? warp : 0;
        attn_tc_pv<floatT, HS>(dv, s, dOs, kc0, 4);
        attn_tc_pv<floatT, HS>(dk, dp, Qs, kc0, 4);
    }
    floatT *dqkv_b = dqkv + blk.qkv_at;
    const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
    attn_tc_write<floatT, HS>(dqkv_b + C, C3, dk, key, sc, T, hs);
    attn_tc_write<floatT, HS>(dqkv_b + 2 * C, C3, dv, key, one, T, hs);
}

// dqkv from dout, qkv, out and lse; scratch: B*NH*T floats (D).
template <typename floatT>
static void attn_v2_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                             const float *lse, int B, int T, int C, int NH, cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attn_v2_backward", B, T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH), grid_tc((T + ATT_TC_BQ - 1) / ATT_TC_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        using Y = AttnV2Bytes<floatT, HS>;
        const char *ty = attn_type_name<floatT>();
        attn_allow_smem(attn_v2_bwd_dq_kernel<floatT, HS>, Y::DQ, "attn_v2_backward", ty, B, T, C, NH);
        LAUNCH(grid_tc, ATT_TC_THREADS, Y::DQ, stream, attn_v2_bwd_dq_kernel<floatT, HS>)(dqkv, scratch, dout, qkv, out, lse,
                                                                                         T, C, NH, scale);
        cudaCheck(cudaGetLastError());
        attn_allow_smem(attn_v2_bwd_dkdv_kernel<floatT, HS>, Y::DKDV, "attn_v2_backward", ty, B, T, C, NH);
        LAUNCH(grid, ATT_THREADS, Y::DKDV, stream, attn_v2_bwd_dkdv_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C,
                                                                                       NH, scale);
        cudaCheck(cudaGetLastError());
    });
}

#endif  // DEV_CUDA_ATTENTION_V2_CUH
