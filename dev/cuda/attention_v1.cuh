// dev/cuda/attention_v1.cuh: the 16-bit attention kernels as they were before issue #22 (64-row blocks of 4
// warps, register-staged loads, transposed shared tiles, a separate row-dot kernel), kept so that
// `./dev/cuda/attention bench` can time old against new in one run and `check` can compare their bits. Not
// part of the trainer. Uses cuda/attention_mma.cuh's instruction helpers (mma_16x8x16, ldmatrix_x4).
#ifndef DEV_CUDA_ATTENTION_V1_CUH
#define DEV_CUDA_ATTENTION_V1_CUH

#include "../../cuda/attention.cuh"

// Two 16-bit values from shared memory as one register (the trainer's kernels load fragments by ldmatrix now).
template <typename floatT> __device__ __forceinline__ uint32_t attn_ld32(const floatT *p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

// Shared tiles of the 16-bit kernels, in elements: row-major [64][LDR] (rows of q, k, v or dout) and
// transposed [HS][LDT]. Both strides are 16 bytes past a multiple of 128, so the 8 rows g = 0..7 that a
// fragment load touches start 4 banks apart and the 4 lanes t of a row fill them: no bank conflicts.
template <typename floatT, int HS>
struct AttnV1 {
    static constexpr int LDR = HS + 8, LDT = ATT_BK + 8;
    static constexpr int ROW = ATT_BQ * LDR, TR = HS * LDT;
    static constexpr size_t FWD_BYTES = sizeof(floatT) * (ROW + TR);  // K (Q first), V^T
    static constexpr size_t DKDV_BYTES = sizeof(floatT) * (2 * ROW + 2 * TR) + 2 * sizeof(float) * ATT_BQ;  // Q, dout, Q^T, dout^T, lse, D
    static constexpr size_t DQ_BYTES = sizeof(floatT) * (2 * ROW + TR);  // K, V (Q, dout first), K^T
    static_assert(HS % 16 == 0 && (LDR * sizeof(floatT)) % 16 == 0 && ROW % 8 == 0 && TR % 8 == 0, "16-byte rows");
};

// Rows [row0, row0 + 64) of one head, in two halves so that the global loads of the next tile can be in
// flight while the current one is computed on: attn_v1_fetch loads a thread's share into registers,
// attn_v1_stash writes it to a row-major tile rm and/or a transposed tile tr (either may be null). Rows
// >= T and columns >= hs are zero, so a head size padded up to HS adds nothing to any product. Lanes
// take consecutive rows of one 8-column chunk: the transposed 16-bit stores of a warp then fall in 16
// consecutive words, and the row-major 16-byte stores of 8 lanes in 32 different banks.
template <int HS> struct AttnV1Share { static constexpr int N = ATT_BQ * (HS / 8) / ATT_THREADS; };
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_fetch(uint4 v[AttnV1Share<HS>::N], const floatT *__restrict__ src, long ld_src,
                                              int row0, int T, int hs) {
#pragma unroll
    for (int i = 0; i < AttnV1Share<HS>::N; i++) {
        const int idx = threadIdx.x + i * ATT_THREADS, r = idx % ATT_BQ, c = (idx / ATT_BQ) * 8;
        v[i] = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < T && c < hs) v[i] = *reinterpret_cast<const uint4 *>(src + (long)(row0 + r) * ld_src + c);
    }
}
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_stash(floatT *rm, floatT *tr, const uint4 v[AttnV1Share<HS>::N]) {
    using L = AttnV1<floatT, HS>;
#pragma unroll
    for (int i = 0; i < AttnV1Share<HS>::N; i++) {
        const int idx = threadIdx.x + i * ATT_THREADS, r = idx % ATT_BQ, c = (idx / ATT_BQ) * 8;
        if (rm) *reinterpret_cast<uint4 *>(rm + r * L::LDR + c) = v[i];
        if (tr) {
            const floatT *e = reinterpret_cast<const floatT *>(&v[i]);
#pragma unroll
            for (int k = 0; k < 8; k++) tr[(c + k) * L::LDT + r] = e[k];
        }
    }
}
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_load(floatT *rm, floatT *tr, const floatT *__restrict__ src, long ld_src, int row0,
                                             int T, int hs) {
    uint4 v[AttnV1Share<HS>::N];
    attn_v1_fetch<floatT, HS>(v, src, ld_src, row0, T, hs);
    attn_v1_stash<floatT, HS>(rm, tr, v);
}

// A warp's 16 rows of a row-major tile as m16n8k16 A operands, HS / 16 of them.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_rows(uint32_t a[][4], const floatT *tile, int row0) {
    using L = AttnV1<floatT, HS>;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        const floatT *p = tile + (row0 + g) * L::LDR + kc * 16 + 2 * t;
        a[kc][0] = attn_ld32(p);
        a[kc][1] = attn_ld32(p + 8 * L::LDR);
        a[kc][2] = attn_ld32(p + 8);
        a[kc][3] = attn_ld32(p + 8 * L::LDR + 8);
    }
}

// B operands for the 8-row tiles n and n + 1 of a row-major shared matrix M (its rows are B's columns,
// its columns B's k), k-chunk kc: b[0], b[1] for tile n, b[2], b[3] for tile n + 1.
template <int LD, typename floatT>
__device__ __forceinline__ void attn_v1_b2(uint32_t b[4], const floatT *M, int n, int kc) {
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
    ldmatrix_x4(b, M + ((n + (j >> 1)) * 8 + r) * LD + kc * 16 + (j & 1) * 8);
}

// acc[n] (16 rows x 8 columns 8n..8n+7) = A . B^T for the 64 rows of a row-major tile Bm (B[k][n] =
// Bm[n][k]): the warp's scores against 64 keys, or dP against 64 rows of V. Only n < n_end (even) are
// computed; the rest are zero.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_scores(float acc[8][4], const uint32_t a[][4], const floatT *Bm, int n_end) {
    using L = AttnV1<floatT, HS>;
#pragma unroll
    for (int n = 0; n < 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    if (n_end == 8) {  // k outermost: eight independent accumulators between dependent products
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                uint32_t b[4];
                attn_v1_b2<L::LDR>(b, Bm, n, kc);
                mma_16x8x16<floatT>(acc[n], a[kc], b);
                mma_16x8x16<floatT>(acc[n + 1], a[kc], b + 2);
            }
        return;
    }
#pragma unroll
    for (int n = 0; n < 8; n += 2) {
        if (n >= n_end) break;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t b[4];
            attn_v1_b2<L::LDR>(b, Bm, n, kc);
            mma_16x8x16<floatT>(acc[n], a[kc], b);
            mma_16x8x16<floatT>(acc[n + 1], a[kc], b + 2);
        }
    }
}

// out[HS / 8] += P . V for P given as score accumulators p[8][4] (16 rows x 64 columns, the k dimension),
// 16-column chunks [kc0, kc1), and V^T a transposed tile (Vt[d][k]).
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_pv(float out[][4], const float p[8][4], const floatT *Vt, int kc0, int kc1) {
    using L = AttnV1<floatT, HS>;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        if (kc < kc0 || kc >= kc1) continue;
        const uint32_t a[4] = {attn_pack<floatT>(p[2 * kc][0], p[2 * kc][1]), attn_pack<floatT>(p[2 * kc][2], p[2 * kc][3]),
                               attn_pack<floatT>(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                               attn_pack<floatT>(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
        for (int n = 0; n < HS / 8; n += 2) {
            uint32_t b[4];
            attn_v1_b2<L::LDT>(b, Vt, n, kc);
            mma_16x8x16<floatT>(out[n], a, b);
            mma_16x8x16<floatT>(out[n + 1], a, b + 2);
        }
    }
}

// Writes a warp's 16 x hs accumulator (times mul) to rows row[0], row[1] (this lane's g and g + 8) of dst,
// rows ld apart; rows >= T are skipped.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v1_write(floatT *dst, long ld, const float acc[][4], const int row[2], const float mul[2],
                                              int T, int hs) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (row[r] >= T) continue;
#pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            const int c = n * 8 + 2 * t;
            if (c < hs)
                *reinterpret_cast<uint32_t *>(dst + (long)row[r] * ld + c) =
                    attn_pack<floatT>(acc[n][2 * r] * mul[r], acc[n][2 * r + 1] * mul[r]);
        }
    }
}

// Forward. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x (longest rows first);
// warp w owns 16 of them. Per key tile: S = Q K^T in registers, masked and scaled into the log2 domain,
// online softmax (running max m and this lane's partial row sums l), O = O * 2^(m_old - m_new) + P V.
// At the end out = O / l and lse = (m scale log2 e + log2 l) ln 2, the natural-log logsumexp the fp32
// path keeps.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_v1_fwd_kernel(floatT *__restrict__ out, float *__restrict__ lse, const floatT *__restrict__ qkv, int T, int C, int NH,
                   float scale) {
    using L = AttnV1<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Qs = Ks, *Vt = Ks + L::ROW;  // Q passes through K's tile
    const AttnBlock<floatT> blk(qkv, nullptr, T, C, NH, NH, true);
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, g = lane >> 2, t = lane & 3;
    const long C3 = blk.C3;
    const floatT *q_g = blk.q, *k_g = blk.k, *v_g = blk.v;
    const int q0 = qb * ATT_BQ, row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const float sl2 = scale * 1.4426950408889634f;

    attn_v1_load<floatT, HS>(Qs, nullptr, q_g, C3, q0, T, hs);
    __syncthreads();
    uint32_t qa[HS / 16][4];
    attn_v1_rows<floatT, HS>(qa, Qs, warp * 16);
    float o[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // m is the running max of the raw scores (scale > 0 keeps the order), so each probability is one
    // FFMA and one exp2: 2^(s scale log2 e - m scale log2 e).
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K and V^T
        attn_v1_load<floatT, HS>(Ks, nullptr, k_g, C3, k0, T, hs);
        attn_v1_load<floatT, HS>(nullptr, Vt, v_g, C3, k0, T, hs);
        __syncthreads();
        // On the diagonal tile warp w's rows see keys <= 16 w + 15: 8-key tiles 0 .. 2w + 1, and the causal
        // mask applies; every other tile is wholly visible (keys < q0 <= the rows, and < T).
        const int n_end = kb == qb ? 2 * (warp + 1) : 8;
        float s[8][4];
        attn_v1_scores<floatT, HS>(s, qa, Ks, n_end);
        if (kb == qb) {
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (n >= n_end || k0 + n * 8 + 2 * t + (e & 1) > row[e >> 1]) s[n][e] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 8; n++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2], ms[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {  // the row's 4 lanes agree on its max; key 0 keeps it finite
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r]);
            alpha[r] = attn_exp2((m[r] - m_new) * sl2);  // 0 on the first tile, where m = -inf
            m[r] = m_new;
            ms[r] = m_new * sl2;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = attn_exp2(fmaf(s[n][e], sl2, -ms[e >> 1]));  // masked: 2^-inf = 0
                s[n][e] = p;
                l[e >> 1] += p;
            }
#pragma unroll
        for (int n = 0; n < HS / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[n][e] *= alpha[e >> 1];
        attn_v1_pv<floatT, HS>(o, s, Vt, 0, n_end / 2);
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {  // a + b equals b + a, so the 4 lanes of a row get the same bits
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = 1.0f / l[r];
        if (t == 0 && row[r] < T) lse[(long)bh * T + row[r]] = (m[r] * sl2 + log2f(l[r])) * 0.6931471805599453f;
    }
    attn_v1_write<floatT, HS>(out + blk.row_at, C, o, row, inv, T, hs);
}

// Backward, dK and dV. Block (kb, b*NH + h) owns key rows [64 kb, 64 kb + 64) (kb = x: the longest first);
// warp w owns 16 of them, its K and V rows held as A operands. Per query tile qb >= kb, transposed:
// S^T = K Q^T, dP^T = V dout^T, P^T = 2^(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - D); then
// dV += P^T dout and dK += dS^T Q (times scale at the end), from the transposed tiles of dout and Q.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_v1_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                        const float *__restrict__ lse, const float *__restrict__ rowdot, int T, int C, int NH, float scale) {
    using L = AttnV1<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem), *dOs = Qs + L::ROW, *Qt = dOs + L::ROW, *dOt = Qt + L::TR;
    float *lse_s = reinterpret_cast<float *>(dOt + L::TR), *D_s = lse_s + ATT_BQ;
    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, NH, false);
    const int nqb = blk.nqb, kb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, t = lane & 3;
    const long C3 = blk.C3;
    const floatT *q_g = blk.q, *k_g = blk.k, *v_g = blk.v, *do_g = blk.dout;
    const int k0 = kb * ATT_BK, key[2] = {k0 + warp * 16 + (lane >> 2), k0 + warp * 16 + (lane >> 2) + 8};
    const float sl2 = scale * 1.4426950408889634f;

    // this block's K and V rows, through the Q and dout tiles, into registers
    attn_v1_load<floatT, HS>(Qs, nullptr, k_g, C3, k0, T, hs);
    attn_v1_load<floatT, HS>(dOs, nullptr, v_g, C3, k0, T, hs);
    __syncthreads();
    uint32_t ka[HS / 16][4], va[HS / 16][4];
    attn_v1_rows<floatT, HS>(ka, Qs, warp * 16);
    attn_v1_rows<floatT, HS>(va, dOs, warp * 16);
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    uint4 qd[2][AttnV1Share<HS>::N];  // the next Q and dout tiles, loaded while this one is computed on
    attn_v1_fetch<floatT, HS>(qd[0], q_g, C3, kb * ATT_BQ, T, hs);
    attn_v1_fetch<floatT, HS>(qd[1], do_g, C, kb * ATT_BQ, T, hs);
    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_BQ;
        __syncthreads();  // every warp is done with the previous tiles (and has its K, V rows)
        attn_v1_stash<floatT, HS>(Qs, Qt, qd[0]);
        attn_v1_stash<floatT, HS>(dOs, dOt, qd[1]);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const int q = q0 + i;
            lse_s[i] = q < T ? lse[(long)bh * T + q] * 1.4426950408889634f : 0.0f;
            D_s[i] = q < T ? rowdot[(long)bh * T + q] : 0.0f;
        }
        __syncthreads();
        if (qb + 1 < nqb) {
            attn_v1_fetch<floatT, HS>(qd[0], q_g, C3, q0 + ATT_BQ, T, hs);
            attn_v1_fetch<floatT, HS>(qd[1], do_g, C, q0 + ATT_BQ, T, hs);
        }
        float s[8][4], dp[8][4];
        attn_v1_scores<floatT, HS>(s, ka, Qs, 8);
        attn_v1_scores<floatT, HS>(dp, va, dOs, 8);
        const bool masked = qb == kb || q0 + ATT_BQ > T;  // the causal diagonal, or query rows past T
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = n * 8 + 2 * t + (e & 1), q = q0 + i;
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse_s[i]));
                if (masked && (q < key[e >> 1] || q >= T)) p = 0.0f;
                s[n][e] = p;
                dp[n][e] = p * (dp[n][e] - D_s[i]);
            }
        // On the diagonal tile warp w's keys see queries >= 16 w only: 16-query chunks w..3.
        const int kc0 = qb == kb ? warp : 0;
        attn_v1_pv<floatT, HS>(dv, s, dOt, kc0, 4);
        attn_v1_pv<floatT, HS>(dk, dp, Qt, kc0, 4);
    }
    floatT *dqkv_b = dqkv + blk.qkv_at;
    const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
    attn_v1_write<floatT, HS>(dqkv_b + C, C3, dk, key, sc, T, hs);
    attn_v1_write<floatT, HS>(dqkv_b + 2 * C, C3, dv, key, one, T, hs);
}

// Backward, dQ. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x; warp w owns 16,
// its Q and dout rows held as A operands. Per key tile kb <= qb: S = Q K^T, dP = dout V^T, P from lse,
// dS = P (dP - D), dQ += dS K (times scale at the end) from the transposed K tile.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_v1_bwd_dq_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                      const float *__restrict__ lse, const float *__restrict__ rowdot, int T, int C, int NH, float scale) {
    using L = AttnV1<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Vs = Ks + L::ROW, *Kt = Vs + L::ROW;
    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, NH, true);
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, t = lane & 3;
    const long C3 = blk.C3;
    const floatT *q_g = blk.q, *k_g = blk.k, *v_g = blk.v, *do_g = blk.dout;
    const int q0 = qb * ATT_BQ, row[2] = {q0 + warp * 16 + (lane >> 2), q0 + warp * 16 + (lane >> 2) + 8};
    const float sl2 = scale * 1.4426950408889634f;

    attn_v1_load<floatT, HS>(Ks, nullptr, q_g, C3, q0, T, hs);
    attn_v1_load<floatT, HS>(Vs, nullptr, do_g, C, q0, T, hs);
    __syncthreads();
    uint32_t qa[HS / 16][4], da[HS / 16][4];
    attn_v1_rows<floatT, HS>(qa, Ks, warp * 16);
    attn_v1_rows<floatT, HS>(da, Vs, warp * 16);
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lse2[r] = row[r] < T ? lse[(long)bh * T + row[r]] * 1.4426950408889634f : 0.0f;
        Dr[r] = row[r] < T ? rowdot[(long)bh * T + row[r]] : 0.0f;
    }
    float dq[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    uint4 kv[2][AttnV1Share<HS>::N];  // the next K and V tiles, loaded while this one is computed on
    attn_v1_fetch<floatT, HS>(kv[0], k_g, C3, 0, T, hs);
    attn_v1_fetch<floatT, HS>(kv[1], v_g, C3, 0, T, hs);
    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous tiles (and has its Q, dout rows)
        attn_v1_stash<floatT, HS>(Ks, Kt, kv[0]);
        attn_v1_stash<floatT, HS>(Vs, nullptr, kv[1]);
        __syncthreads();
        if (kb < qb) {
            attn_v1_fetch<floatT, HS>(kv[0], k_g, C3, k0 + ATT_BK, T, hs);
            attn_v1_fetch<floatT, HS>(kv[1], v_g, C3, k0 + ATT_BK, T, hs);
        }
        const int n_end = kb == qb ? 2 * (warp + 1) : 8;
        float s[8][4], dp[8][4];
        attn_v1_scores<floatT, HS>(s, qa, Ks, n_end);
        attn_v1_scores<floatT, HS>(dp, da, Vs, n_end);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse2[e >> 1]));
                if (kb == qb && (n >= n_end || k0 + n * 8 + 2 * t + (e & 1) > row[e >> 1])) p = 0.0f;  // causal diagonal
                s[n][e] = p * (dp[n][e] - Dr[e >> 1]);
            }
        attn_v1_pv<floatT, HS>(dq, s, Kt, 0, n_end / 2);
    }
    const float sc[2] = {scale, scale};
    attn_v1_write<floatT, HS>(dqkv + blk.qkv_at, C3, dq, row, sc, T, hs);
}

// The old launch sequence: the row-dot kernel, then dK/dV, then dQ.
template <typename floatT>
static void attn_v1_forward(floatT *out, float *lse, const floatT *qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attn_v1_forward", B, T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const size_t smem = AttnV1<floatT, HS>::FWD_BYTES;
        attn_allow_smem(attn_v1_fwd_kernel<floatT, HS>, smem, "attn_v1_forward", attn_type_name<floatT>(), B, T, C, NH);
        LAUNCH(grid, ATT_THREADS, smem, stream, attn_v1_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, scale);
        cudaCheck(cudaGetLastError());
    });
}
template <typename floatT>
static void attn_v1_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                             const float *lse, int B, int T, int C, int NH, cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attn_v1_backward", B, T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const long rows = (long)B * NH * T;
    LAUNCH((unsigned)((rows + 7) / 8), 256, 0, stream, attn_bwd_rowdot_kernel<floatT>)(scratch, dout, out, B, T, C, NH,
                                                                                     nullptr, 0);
    cudaCheck(cudaGetLastError());
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        using L = AttnV1<floatT, HS>;
        const char *ty = attn_type_name<floatT>();
        attn_allow_smem(attn_v1_bwd_dkdv_kernel<floatT, HS>, L::DKDV_BYTES, "attn_v1_backward", ty, B, T, C, NH);
        LAUNCH(grid, ATT_THREADS, L::DKDV_BYTES, stream, attn_v1_bwd_dkdv_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch,
                                                                                            T, C, NH, scale);
        cudaCheck(cudaGetLastError());
        attn_allow_smem(attn_v1_bwd_dq_kernel<floatT, HS>, L::DQ_BYTES, "attn_v1_backward", ty, B, T, C, NH);
        LAUNCH(grid, ATT_THREADS, L::DQ_BYTES, stream, attn_v1_bwd_dq_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T,
                                                                                        C, NH, scale);
        cudaCheck(cudaGetLastError());
    });
}

#endif  // DEV_CUDA_ATTENTION_V1_CUH
