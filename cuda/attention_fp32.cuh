// cuda/attention_fp32.cuh: flash attention in fp32 (forward, dK/dV, dQ), the same tiles and masks as the
// 16-bit kernels with plain FMAs through shared memory, matching the CPU build to ~1e-6 relative. Launched by
// cuda/attention.cuh when the run's precision is fp32.
#ifndef CUDA_ATTENTION_FP32_CUH
#define CUDA_ATTENTION_FP32_CUH

#include "attention_common.cuh"

// Shared memory layout, per kernel, in bytes from the start of the dynamic shared memory. HS is the head
// size padded to a multiple of 16 (the pad columns are zero).
//   floatT tiles [64][LDH] (q, k, v, dout rows); float tiles [64][LDS] (scores S, dP, overwritten in place
//   by P, dS); the forward's float output accumulator [64][LDO].
// Odd strides, so that 32 lanes reading 32 different rows of a tile at the same column hit 32 different banks.
// These kernels run fp32 only (16-bit runs cuda/attention_mma.cuh): floatT is float.
template <typename floatT, int HS>
struct AttnSmem {
    static constexpr int LDH = HS + 1;
    static constexpr int LDS = ATT_BK + 1;
    static constexpr int LDP = LDS;
    static constexpr int LDO = HS + 1;
    static constexpr size_t round128(size_t x) { return (x + 127) / 128 * 128; }
    static constexpr size_t H_TILE = round128(sizeof(floatT) * ATT_BQ * LDH);
    static constexpr size_t S_TILE = round128(sizeof(float) * ATT_BQ * LDS);
    static constexpr size_t O_TILE = round128(sizeof(float) * ATT_BQ * LDO);
    static constexpr size_t VEC = round128(sizeof(float) * ATT_BQ);
    // forward: Q K V | S (P) | O
    static constexpr size_t FWD_Q = 0, FWD_K = H_TILE, FWD_V = 2 * H_TILE, FWD_S = 3 * H_TILE;
    static constexpr size_t FWD_O = FWD_S + S_TILE, FWD_BYTES = FWD_O + O_TILE;
    // backward (dK/dV and dQ kernels): Q dO K V | S (P) dP (dS) | lse D
    static constexpr size_t BWD_Q = 0, BWD_DO = H_TILE, BWD_K = 2 * H_TILE, BWD_V = 3 * H_TILE;
    static constexpr size_t BWD_S = 4 * H_TILE, BWD_DP = BWD_S + S_TILE;
    static constexpr size_t BWD_LSE = BWD_DP + S_TILE, BWD_D = BWD_LSE + VEC;
    static constexpr size_t BWD_BYTES = BWD_D + VEC;
    static_assert(sizeof(floatT) == sizeof(float), "the fp32 kernels; 16-bit runs attn_tc_*");
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= ATT_MAX_HS, "padded head size");
};

// Rows [row0, row0 + 64) of one head's hs columns into a shared tile [64][LD]. src points at row 0 of the
// head's columns, rows ld_src apart. Rows >= T and the pad columns hs..HS are zero. With RoPE's tables (cos_t not
// NULL: q and k of the Llama family, stored unrotated) each element is rotated as it is loaded, from its pair's two
// stored values (rope_pair: the separate pass's arithmetic, so the tile holds the same bits as after that pass).
template <typename floatT, int HS, int LD>
__device__ void attn_load_tile(floatT *dst, const floatT *__restrict__ src, long ld_src, int row0, int T, int hs,
                               const float *__restrict__ cos_t = nullptr, const float *__restrict__ sin_t = nullptr) {
    const int h2 = hs / 2;
    for (int idx = threadIdx.x; idx < ATT_BQ * HS; idx += ATT_THREADS) {
        const int r = idx / HS, c = idx % HS;
        float v = 0.0f;
        if (row0 + r < T && c < hs) {
            const floatT *x = src + (long)(row0 + r) * ld_src;
            v = x[c];
            if (cos_t) {
                const int i = c < h2 ? c : c - h2;
                const long a = (long)(row0 + r) * h2 + i;
                float y1, y2;
                rope_pair(attn_to_float(x[i]), attn_to_float(x[i + h2]), cos_t[a], sin_t[a], false, y1, y2);
                v = c < h2 ? y1 : y2;
            }
        }
        dst[r * LD + c] = v;
    }
}

// The next key tile of a kernel that walks key tiles (the forward, dQ): rows [k0, k0 + 64) of the block's K (rotated
// with RoPE's tables) and V into shared tiles, between two barriers: every warp is done with the previous tiles (and
// the kernel's set-up is complete) before, and every thread sees these after.
template <typename floatT, int HS>
__device__ void attn_next_kv_tile(floatT *Ks, floatT *Vs, const AttnBlock<floatT> &blk, int k0, int T,
                                  const float *__restrict__ cos_t, const float *__restrict__ sin_t) {
    using L = AttnSmem<floatT, HS>;
    __syncthreads();
    attn_load_tile<floatT, HS, L::LDH>(Ks, blk.k, blk.C3, k0, T, blk.hs, cos_t, sin_t);
    attn_load_tile<floatT, HS, L::LDH>(Vs, blk.v, blk.C3, k0, T, blk.hs);
    __syncthreads();
}

// The backward kernels' shared memory (AttnSmem's BWD_ layout), P and dS overwriting S and dP in place, and the
// query tile both load: rows [q0, q0 + 64) of the block's current query head, Q (rotated with RoPE's tables) and
// dout, and the rows' lse and D (zero past T).
template <typename floatT, int HS>
struct AttnBwdTiles {
    using L = AttnSmem<floatT, HS>;
    floatT *Qs, *dOs, *Ks, *Vs, *Ps, *dSs;
    float *Ss, *dPs, *lse_s, *D_s;
    __device__ explicit AttnBwdTiles(unsigned char *smem)
        : Qs(reinterpret_cast<floatT *>(smem + L::BWD_Q)), dOs(reinterpret_cast<floatT *>(smem + L::BWD_DO)),
          Ks(reinterpret_cast<floatT *>(smem + L::BWD_K)), Vs(reinterpret_cast<floatT *>(smem + L::BWD_V)),
          Ps(reinterpret_cast<floatT *>(smem + L::BWD_S)), dSs(reinterpret_cast<floatT *>(smem + L::BWD_DP)),
          Ss(reinterpret_cast<float *>(smem + L::BWD_S)), dPs(reinterpret_cast<float *>(smem + L::BWD_DP)),
          lse_s(reinterpret_cast<float *>(smem + L::BWD_LSE)), D_s(reinterpret_cast<float *>(smem + L::BWD_D)) {}
    __device__ void load_queries(const AttnBlock<floatT> &blk, int q0, int T, const float *__restrict__ lse,
                                 const float *__restrict__ rowdot, const float *__restrict__ cos_t,
                                 const float *__restrict__ sin_t) const {
        attn_load_tile<floatT, HS, L::LDH>(Qs, blk.q, blk.C3, q0, T, blk.hs, cos_t, sin_t);
        attn_load_tile<floatT, HS, L::LDH>(dOs, blk.dout, blk.C, q0, T, blk.hs);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const int tq = q0 + i;
            lse_s[i] = tq < T ? lse[(long)blk.bh * T + tq] : 0.0f;
            D_s[i] = tq < T ? rowdot[(long)blk.bh * T + tq] : 0.0f;
        }
    }
};

// One warp: Cm[16][16*nb0 .. 16*nb1) = A[16][HS] . Bm[16*nb0 .. 16*nb1)[HS]^T, i.e. C[r][j] = A_r . B_j
// (both operands row-major [row][HS] tiles in shared memory; C fp32 in shared memory, row-major).
template <typename floatT, int HS>
__device__ void attn_warp_mm_nt(float *Cm, int ldc, const floatT *A, int lda, const floatT *Bm, int ldb, int nb0,
                                int nb1) {
    const int lane = threadIdx.x & 31;
    for (int j = nb0 * 16 + lane; j < nb1 * 16; j += 32) {  // lane owns columns j, all 16 rows
        float acc[16];
#pragma unroll
        for (int r = 0; r < 16; r++) acc[r] = 0.0f;
        for (int d = 0; d < HS; d++) {
            const float bv = Bm[j * ldb + d];
#pragma unroll
            for (int r = 0; r < 16; r++) acc[r] = fmaf(A[r * lda + d], bv, acc[r]);
        }
#pragma unroll
        for (int r = 0; r < 16; r++) Cm[r * ldc + j] = acc[r];
    }
}

// A warp's 16 x HS fp32 accumulator in per-lane registers (lane owns columns lane, lane + 32, ...).
// add(): acc += A[16][16*kb0 .. 16*kb1) . Bm[16*kb0 .. 16*kb1)[HS] with A a [16][lda] tile and Bm a
// row-major [row][HS] tile, both in shared memory.
template <typename floatT, int HS>
struct AttnWarpAcc {
    static constexpr int NQ = (HS + 31) / 32;
    float v[16][NQ];
    __device__ void zero() {
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++) v[r][q] = 0.0f;
    }
    __device__ void load(const float *src, int ld) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++) v[r][q] = (lane + 32 * q < HS) ? src[r * ld + lane + 32 * q] : 0.0f;
    }
    __device__ void store(float *dst, int ld) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (lane + 32 * q < HS) dst[r * ld + lane + 32 * q] = v[r][q];
    }
    __device__ void add(const floatT *A, int lda, const floatT *Bm, int ldb, int kb0, int kb1) {
        const int lane = threadIdx.x & 31;
        for (int k = kb0 * 16; k < kb1 * 16; k++) {
            float bv[NQ];
#pragma unroll
            for (int q = 0; q < NQ; q++) bv[q] = (lane + 32 * q < HS) ? Bm[k * ldb + lane + 32 * q] : 0.0f;
#pragma unroll
            for (int r = 0; r < 16; r++) {
                const float a = A[r * lda + k];
#pragma unroll
                for (int q = 0; q < NQ; q++) v[r][q] = fmaf(a, bv[q], v[r][q]);
            }
        }
    }
    // dst[r][c] = mul * acc[r][c] for r < nrows, c < hs (dst rows ld_dst apart, global memory).
    __device__ void write(floatT *dst, long ld_dst, int nrows, int hs, float mul) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (r < nrows && lane + 32 * q < hs) dst[r * ld_dst + lane + 32 * q] = mul * v[r][q];
    }
    // write() for a gradient with respect to RoPE-rotated rows at positions pos0 .. pos0 + nrows - 1: the values are
    // staged (as floatT stores them) in the warp's own 16 rows of shared memory, stage [16][ld_stage], and written
    // un-rotated (RoPE's transpose, rope_pair), the bits of write() followed by the separate rope_backward pass.
    __device__ void write_unrope(floatT *dst, long ld_dst, int nrows, int hs, float mul, floatT *stage, int ld_stage,
                                 int pos0, const float *__restrict__ cos_t, const float *__restrict__ sin_t) {
        const int lane = threadIdx.x & 31, h2 = hs / 2;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (lane + 32 * q < HS) stage[r * ld_stage + lane + 32 * q] = attn_from_float<floatT>(mul * v[r][q]);
        __syncwarp();  // the pairs cross lanes
        for (int idx = lane; idx < nrows * h2; idx += 32) {
            const int r = idx / h2, i = idx % h2;
            const long a = (long)(pos0 + r) * h2 + i;
            float y1, y2;
            rope_pair(attn_to_float(stage[r * ld_stage + i]), attn_to_float(stage[r * ld_stage + i + h2]), cos_t[a],
                      sin_t[a], true, y1, y2);
            dst[r * ld_dst + i] = attn_from_float<floatT>(y1);
            dst[r * ld_dst + i + h2] = attn_from_float<floatT>(y2);
        }
    }
};

// Forward. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x (the longest rows start
// first); warp w owns rows 64 qb + 16 w + [0, 16). For each key tile 0..qb: S = Q K^T (fp32, shared), then
// per row the online softmax (lanes 2r and 2r+1 share row r, interleaved columns): running max m, running
// sum l, O *= exp(m_old - m_new), P = exp(scale S - m_new) (as floatT), O += P V. At the end out = O / l and
// lse = m + log(l).
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_fwd_kernel(floatT *__restrict__ out, float *__restrict__ lse, const floatT *__restrict__ qkv, int T, int C, int NH,
                int KV, float scale, const float *__restrict__ rope_cos, const float *__restrict__ rope_sin,
                AttnMask mask) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::FWD_Q);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::FWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::FWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::FWD_S);
    floatT *Ps = reinterpret_cast<floatT *>(Ss);  // P overwrites S in place
    float *Os = reinterpret_cast<float *>(attn_smem + L::FWD_O);

    const AttnBlock<floatT> blk(qkv, nullptr, T, C, NH, KV, true);
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane;
    const long C3 = blk.C3;
    const int q0 = qb * ATT_BQ;

    attn_load_tile<floatT, HS, L::LDH>(Qs, blk.q, C3, q0, T, hs, rope_cos, rope_sin);
    for (int i = threadIdx.x; i < ATT_BQ * L::LDO; i += ATT_THREADS) Os[i] = 0.0f;

    const floatT *Qw = Qs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS;
    floatT *Pw = Ps + warp * 16 * L::LDP;
    float *Ow = Os + warp * 16 * L::LDO;
    const int r = lane >> 1, half = lane & 1;  // this lane's row within the warp's 16, and column parity
    const int t = q0 + warp * 16 + r;          // its query position
    float m_run = -INFINITY, l_run = 0.0f;     // identical in lanes 2r and 2r+1
    AttnWarpAcc<floatT, HS> acc;
    // The mask (arch/attn_mask.h): key tiles from the block's first row's first key on (those before are wholly
    // masked); this lane's row sees keys from fk (causal: 0)
    const int kb0 = attn_first_key(mask, blk.b, T, q0) / ATT_BK, fk = attn_first_key(mask, blk.b, T, t);

    for (int kb = kb0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        attn_next_kv_tile<floatT, HS>(Ks, Vs, blk, k0, T, rope_cos, rope_sin);  // (Q and O are initialised before)
        ATTN_COUNT_TILE();
        // On the diagonal tile (k0 == q0) warp w's rows see keys j <= 16 w + 15 only: 16-blocks 0..w.
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        __syncwarp();
        // Columns >= 16 nblk of Sw were not written this step; the mask below never reads them.
        float mx = -INFINITY;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            if (t2 <= t && t2 < T && t2 >= fk) mx = fmaxf(mx, Sw[r * L::LDS + j] * scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx);
        // Causal, every row sees key 0 in tile 0, so m_new is finite from the first tile on; the guard keeps a row
        // that has seen no key yet (a mask's tile before its first key) from producing exp(-inf + inf) = NaN.
        const float alpha = (m_new == -INFINITY) ? 1.0f : expf(m_run - m_new);
        float psum = 0.0f;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            float p = 0.0f;
            if (t2 <= t && t2 < T && t2 >= fk) p = expf(Sw[r * L::LDS + j] * scale - m_new);
            psum += p;
            Pw[r * L::LDP + j] = attn_from_float<floatT>(p);  // overwrites S[r][j] just read, same lane
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);  // a + b in one lane, b + a in the other: same bits
        l_run = l_run * alpha + psum;
        m_run = m_new;
        for (int c = half; c < HS; c += 2) Ow[r * L::LDO + c] *= alpha;
        __syncwarp();
        acc.load(Ow, L::LDO);
        acc.add(Pw, L::LDP, Vs, L::LDH, 0, nblk);  // P's 16-blocks >= nblk are all zero on the diagonal
        acc.store(Ow, L::LDO);
    }
    __syncwarp();
    if (half == 0 && t < T) lse[(long)bh * T + t] = m_run + logf(l_run);
    const float inv_l = 1.0f / l_run;
    floatT *o_g = out + blk.row_at;
    for (int rr = 0; rr < 16; rr++) {
        const float inv = __shfl_sync(0xffffffffu, inv_l, 2 * rr);
        const int tt = q0 + warp * 16 + rr;
        if (tt < T)
            for (int c = lane; c < hs; c += 32) o_g[(long)tt * C + c] = attn_from_float<floatT>(Ow[rr * L::LDO + c] * inv);
    }
}

// Backward, dK and dV. Block (kb, b*KV + kvh) owns key rows [64 kb, 64 kb + 64) of key/value head kvh; warp w owns
// keys 64 kb + 16 w + [0, 16). For each query head h of the group (in order) and each query tile qb = kb..end,
// with the warp's keys as rows (transposed scores):
// S^T = K Q^T, dP^T = V dout^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D), then
// dV += P^T dout and dK += dS^T Q (times scale at the end). On the diagonal tile warp w only sees queries
// i >= 16 w: 16-blocks w..3.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                     const float *__restrict__ lse, const float *__restrict__ rowdot, int T, int C, int NH, int KV,
                     float scale, const float *__restrict__ rope_cos, const float *__restrict__ rope_sin, AttnMask mask) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    const AttnBwdTiles<floatT, HS> sm(attn_smem);
    floatT *Qs = sm.Qs, *dOs = sm.dOs;
    const float *lse_s = sm.lse_s, *D_s = sm.D_s;

    AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, false, ATT_BQ, true);
    const int nqb = blk.nqb, kb = blk.tile, k0 = kb * ATT_BK, hs = blk.hs, warp = blk.warp, lane = blk.lane;
    const long C3 = blk.C3;

    attn_load_tile<floatT, HS, L::LDH>(sm.Ks, blk.k, C3, k0, T, hs, rope_cos, rope_sin);
    attn_load_tile<floatT, HS, L::LDH>(sm.Vs, blk.v, C3, k0, T, hs);
    floatT *Kw = sm.Ks + warp * 16 * L::LDH, *Vw = sm.Vs + warp * 16 * L::LDH;
    float *Sw = sm.Ss + warp * 16 * L::LDS, *dPw = sm.dPs + warp * 16 * L::LDS;
    floatT *Pw = sm.Ps + warp * 16 * L::LDP, *dSw = sm.dSs + warp * 16 * L::LDP;
    AttnWarpAcc<floatT, HS> dk, dv;
    dk.zero();
    dv.zero();

    // the group's query heads in order, each over its query tiles: dK and dV summed over the group in a fixed order
    // the mask: query tiles up to the last whose first row's first key is in this key tile (those after see none)
    int qb_end = kb;
    while (qb_end < nqb && attn_first_key(mask, blk.b, T, qb_end * ATT_BQ) < k0 + ATT_BK) qb_end++;
    const bool causal = attn_mask_causal(mask);
    for (int h = blk.kvh * blk.group; h < (blk.kvh + 1) * blk.group; h++)
    for (int qb = kb; qb < qb_end; qb++) {
        blk.set_head(h);
        ATTN_COUNT_TILE();
        const int q0 = qb * ATT_BQ;
        __syncthreads();  // every warp is done with the previous Q, dout, lse, D (and K, V are loaded)
        sm.load_queries(blk, q0, T, lse, rowdot, rope_cos, rope_sin);
        __syncthreads();
        const int nb0 = (qb == kb) ? warp : 0;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Kw, L::LDH, Qs, L::LDH, nb0, ATT_BQ / 16);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, Vw, L::LDH, dOs, L::LDH, nb0, ATT_BQ / 16);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BQ; e += 32) {
            const int jr = e / ATT_BQ, i = e % ATT_BQ;  // key row within the warp, query column
            const int key = k0 + warp * 16 + jr, tq = q0 + i;
            float p = 0.0f, ds = 0.0f;
            if (key <= tq && tq < T && (causal || key >= attn_first_key(mask, blk.b, T, tq))) {
                p = expf(Sw[jr * L::LDS + i] * scale - lse_s[i]);
                ds = p * (dPw[jr * L::LDS + i] - D_s[i]);
            }
            // P, dS overwrite the S, dP elements this lane just read
            Pw[jr * L::LDP + i] = attn_from_float<floatT>(p);
            dSw[jr * L::LDP + i] = attn_from_float<floatT>(ds);
        }
        __syncwarp();
        dv.add(Pw, L::LDP, dOs, L::LDH, nb0, ATT_BQ / 16);
        dk.add(dSw, L::LDP, Qs, L::LDH, nb0, ATT_BQ / 16);
    }
    // no barrier: write() goes from registers to global memory, and write_unrope stages in the warp's own K rows,
    // which only this warp read
    const int key0 = k0 + warp * 16, nrows = T - key0 < 16 ? T - key0 : 16;
    if (nrows > 0) {
        if (rope_cos)
            dk.write_unrope(dqkv + blk.k_at + (long)key0 * C3, C3, nrows, hs, scale, Kw, L::LDH, key0, rope_cos, rope_sin);
        else
            dk.write(dqkv + blk.k_at + (long)key0 * C3, C3, nrows, hs, scale);
        dv.write(dqkv + blk.v_at + (long)key0 * C3, C3, nrows, hs, 1.0f);
    }
}

// Backward, dQ. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x; warp w owns
// 16 of them. For each key tile 0..qb: S = Q K^T, dP = dout V^T, dS = P (dP - D), dQ += dS K (times scale
// at the end). On the diagonal tile warp w only sees keys j <= 16 w + 15: 16-blocks 0..w.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dq_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                   const float *__restrict__ lse, const float *__restrict__ rowdot, int T, int C, int NH, int KV, float scale,
                   const float *__restrict__ rope_cos, const float *__restrict__ rope_sin, AttnMask mask) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    const AttnBwdTiles<floatT, HS> sm(attn_smem);
    floatT *Ks = sm.Ks, *Vs = sm.Vs;

    const AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, true);
    const int qb = blk.tile, q0 = qb * ATT_BQ, hs = blk.hs, warp = blk.warp, lane = blk.lane;
    const long C3 = blk.C3;

    sm.load_queries(blk, q0, T, lse, rowdot, rope_cos, rope_sin);
    floatT *Qw = sm.Qs + warp * 16 * L::LDH, *dOw = sm.dOs + warp * 16 * L::LDH;
    float *Sw = sm.Ss + warp * 16 * L::LDS, *dPw = sm.dPs + warp * 16 * L::LDS;
    floatT *dSw = sm.dSs + warp * 16 * L::LDP;
    const float *lse_w = sm.lse_s + warp * 16, *D_w = sm.D_s + warp * 16;
    AttnWarpAcc<floatT, HS> dq;
    dq.zero();
    const int kb0 = attn_first_key(mask, blk.b, T, q0) / ATT_BK;  // the mask: the key tiles before are wholly masked
    const bool causal = attn_mask_causal(mask);

    for (int kb = kb0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        attn_next_kv_tile<floatT, HS>(Ks, Vs, blk, k0, T, rope_cos, rope_sin);  // (Q, dout, lse, D loaded before)
        ATTN_COUNT_TILE();
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, dOw, L::LDH, Vs, L::LDH, 0, nblk);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BK; e += 32) {
            const int ir = e / ATT_BK, j = e % ATT_BK;  // query row within the warp, key column
            const int tq = q0 + warp * 16 + ir, key = k0 + j;
            float ds = 0.0f;
            if (key <= tq && tq < T && (causal || key >= attn_first_key(mask, blk.b, T, tq))) {
                const float p = expf(Sw[ir * L::LDS + j] * scale - lse_w[ir]);
                ds = p * (dPw[ir * L::LDS + j] - D_w[ir]);
            }
            dSw[ir * L::LDP + j] = attn_from_float<floatT>(ds);  // overwrites the dP element just read
        }
        __syncwarp();
        dq.add(dSw, L::LDP, Ks, L::LDH, 0, nblk);
    }
    const int row0 = q0 + warp * 16, nrows = T - row0 < 16 ? T - row0 : 16;
    // RoPE: staged in the warp's own Q rows, which only this warp read (before the loop's last __syncwarp)
    if (nrows > 0 && rope_cos)
        dq.write_unrope(dqkv + blk.qkv_at + (long)row0 * C3, C3, nrows, hs, scale, Qw, L::LDH, row0, rope_cos, rope_sin);
    else if (nrows > 0)
        dq.write(dqkv + blk.qkv_at + (long)row0 * C3, C3, nrows, hs, scale);
}

#endif  // CUDA_ATTENTION_FP32_CUH
