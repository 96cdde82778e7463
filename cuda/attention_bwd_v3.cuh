// cuda/attention_bwd_v3.cuh: the 16-bit attention backward "v3" (TRAIN_GPT_ATTN_BWD_V3=1; off by default until a GPU
// has timed it): FlashAttention-2's dK/dV-stationary loop on mma.sync with wider key blocks, and dQ summed without
// any block waiting on another. Launched by cuda/attention.cuh's flash_attention_backward.
//
// Why (dev/bench/2026-11-28-h200): the default 5-product kernel (attention_mma.cuh) ran 70 TFLOP/s at GPT-2's shape
// against FlashAttention-2's 144 and cuDNN's 235. Its blocks own 64 keys with 4 warps at 255 registers (2 blocks per
// SM), and take turns on each dQ tile: every step ends in a spin on a global counter, a barrier, and a 16 KB fp32
// read-modify-write of dQ per 64 x 64 tile pair through L2. Here a block owns 128 keys with 8 warps (the Q and dout
// tiles it loads feed twice the keys: half the tile traffic and half the barriers per product), the 64 x HS dQ
// contribution of a step is computed by all 8 warps (16 query rows by HS/2 columns each, not 16 x HS by 4 warps),
// and dQ goes to a private fp32 accumulator per split (below): no waits, no atomics, the same bits in every run.
//
// Splits (FlashAttention-2's deterministic backward): the grid is (ns, B*KV). Block (s, b*KV + kvh) takes the key
// blocks n of split s in "snake" order (n = s, 2 ns - 1 - s, 2 ns + s, ..: every split gets about the same causal
// work) one after the other; for each it walks the group's query heads in order and each head's query tiles from
// the diagonal to the end, summing dK and dV in registers. Its dQ contributions go to acc[s] (fp32, [ns][B*NH][Tpad]
// [HS]): the split's first key block (n = s, which reaches every query row >= 128 s) stores, the later ones add, always
// by the same thread for the same element (program order, no synchronisation needed). attn_v3_dq_kernel then writes
// dQ = scale * sum over s of acc[s] (rows >= 128 s), s in order. ns = min(4, key blocks, ceil(264 / (B NH))): about
// two blocks per SM of a 132-SM H100 (its dQ memory is ns fp32 copies of dQ).
//
// Per step (query tile of 64 rows at q0, head h), warp w owns keys kw = k0 + 16 w .. + 15 (its K and V rows the A
// operands: registers at HS <= 64, shared memory at 128): S^T = K Q^T, dP^T = V dout^T, P^T = 2^(S^T scale log2 e -
// lse log2 e), dS^T = P^T (dP^T - D); dV += P^T dout, dK += dS^T Q; dS^T to shared memory; then warp w computes
// query rows 16 (w % 4) .. + 15, columns (w / 4) HS/2 .. + HS/2 of dS K (at HS 16 warps 0-3 take all columns).
// The next Q and dout tiles load (cp.async) while this one is computed on. Causal skipping: a warp's query chunks of
// 16 wholly before its keys are skipped in dV and dK (all of them: S^T and dP^T too), and dQ's key chunks wholly
// after its query rows. RoPE in the loads is not offered (flash_attention_backward runs the default kernel there).
#ifndef CUDA_ATTENTION_BWD_V3_CUH
#define CUDA_ATTENTION_BWD_V3_CUH

#include "attention_mma.cuh"

constexpr int ATT_V3_BN = 128;                    // keys per key block
constexpr int ATT_V3_WARPS = ATT_V3_BN / 16;      // a warp per 16 keys
constexpr int ATT_V3_THREADS = 32 * ATT_V3_WARPS;
constexpr int ATT_V3_MAX_SPLITS = 4;
constexpr int ATT_V3_TARGET_BLOCKS = 264;         // 2 x an H100's 132 SMs
static_assert(ATT_V3_BN == 2 * ATT_BQ, "a key block is two query tiles: the diagonal logic below");

// Shared memory (floatT elements unless said): K, V [128][LDR]; Q, dout x 2 buffers [64][LDR]; dS^T [128][LDS];
// lse, D [2][64] floats.
template <typename floatT, int HS>
struct AttnV3 {
    static constexpr int LDR = AttnTc<floatT, HS>::LDR, KTILE = ATT_V3_BN * LDR, QTILE = ATT_BQ * LDR;
    static constexpr size_t BYTES = sizeof(floatT) * (2 * KTILE + 4 * QTILE + ATT_V3_BN * ATT_TC_LDS) + 4 * 64 * sizeof(float);
};

// Splits for a shape (attention.cuh sizes the accumulator with it; B*NH, not B*KV, so that the memory plan, which
// knows NH only, holds it).
static inline int attn_v3_splits(int B, int T, int NH) {
    const int nkb = (T + ATT_V3_BN - 1) / ATT_V3_BN, want = (ATT_V3_TARGET_BLOCKS + B * NH - 1) / (B * NH);
    const int most = nkb < ATT_V3_MAX_SPLITS ? nkb : ATT_V3_MAX_SPLITS;
    return want < 1 ? 1 : want > most ? most : want;
}
// Query rows the accumulator holds per head: T rounded up to whole 64-row tiles.
static inline __host__ __device__ long attn_v3_tpad(int T) { return (long)(T + ATT_BQ - 1) / ATT_BQ * ATT_BQ; }

// Key block i (0, 1, ..) of split s of ns, in snake order; >= the key block count ends the split.
__device__ __forceinline__ int attn_v3_key_block(int s, int i, int ns) {
    return 2 * ns * (i / 2) + ((i & 1) ? 2 * ns - 1 - s : s);
}

// One step's dQ part for warp `warp`, added to (first: stored in) the split's accumulator rows of the tile. (At HS 128
// two passes of 32 columns spilled more than one of 64: 92 bytes against 72, ptxas sm_90a.)
template <typename floatT, int HS>
__device__ __forceinline__ void attn_v3_dq_step(float *acc_tile, const floatT *St, const floatT *Ks, int warp, int k0,
                                                int q0, bool first) {
    constexpr int NCOL = HS >= 32 ? HS / 2 : HS;  // columns a warp computes
    constexpr int NW = HS >= 32 ? 8 : 4;          // warps at work
    constexpr int PASS = NCOL;                    // columns a pass
    if (warp >= NW) return;
    const int rg = warp & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    // its query rows q0 + 16 rg .. + 15 see the key chunks up to their last row's
    const int kc1 = min(ATT_V3_BN / 16, (q0 + 16 * rg + 16 - k0) / 16);
#pragma unroll
    for (int col0 = (warp >> 2) * NCOL; col0 < (warp >> 2) * NCOL + NCOL; col0 += PASS) {
        float dq[PASS / 8][4];
        attn_tc_zero<PASS / 8>(dq);
        if (kc1 > 0) attn_tc_dsk<floatT, HS, ATT_V3_BN / 16, PASS>(dq, St, 16 * rg, Ks + col0, kc1);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float *a = acc_tile + (long)(16 * rg + g + 8 * r) * HS + col0 + 2 * t;
#pragma unroll
            for (int n = 0; n < PASS / 8; n++) {
                float2 v = make_float2(dq[n][2 * r], dq[n][2 * r + 1]);
                if (!first) {
                    const float2 prev = *reinterpret_cast<const float2 *>(a + n * 8);
                    v.x = prev.x + v.x;
                    v.y = prev.y + v.y;
                }
                *reinterpret_cast<float2 *>(a + n * 8) = v;
            }
        }
    }
}

// The dK/dV-stationary kernel (see the top): dK and dV written per key block, dQ's parts to dq_acc.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_V3_THREADS, 1)
attn_v3_bwd_kernel(floatT *__restrict__ dqkv, float *__restrict__ dq_acc, const floatT *__restrict__ dout,
                   const floatT *__restrict__ qkv, const float *__restrict__ lse, const float *__restrict__ rowdot, int T,
                   int C, int NH, int KV, float scale) {
    using L = AttnV3<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Vs = Ks + L::KTILE, *Qbuf = Vs + L::KTILE,
           *St = Qbuf + 4 * L::QTILE;  // buffer b: Q at Qbuf + 2b QTILE, dout after it
    float *lse_s = reinterpret_cast<float *>(St + ATT_V3_BN * ATT_TC_LDS), *D_s = lse_s + 2 * 64;
    AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, false, ATT_V3_BN, true);
    const int split = blockIdx.x, ns = gridDim.x, hs = blk.hs, warp = blk.warp, lane = blk.lane, g = lane >> 2;
    const int nkb = (T + ATT_V3_BN - 1) / ATT_V3_BN, nqb = (T + ATT_BQ - 1) / ATT_BQ, h0 = blk.kvh * blk.group;
    const long C3 = blk.C3, tpad = (long)nqb * ATT_BQ, bnh = (long)(gridDim.y / KV) * NH;  // B * NH
    const float sl2 = scale * 1.4426950408889634f;
    // lse (natural log, scaled to log2 at use) and D of a query tile: with T % 4 == 0 (and both 16-byte aligned) by
    // cp.async beside the tile (16-byte chunks, each wholly below T or wholly zero-filled), so that no warp waits on
    // their latency; else plain loads.
    const bool rows_async = T % 4 == 0 && ((uintptr_t)lse | (uintptr_t)rowdot) % 16 == 0;
    auto load_rows = [&](int h, int qb, int buf) {
        const long bh = (long)blk.b * NH + h;
        if (rows_async) {
            if (threadIdx.x < 32) {
                const int j = threadIdx.x & 15, q = qb * ATT_BQ + 4 * j;
                const float *src = (threadIdx.x < 16 ? lse : rowdot) + bh * T;
                cp_async_16((threadIdx.x < 16 ? lse_s : D_s) + buf * 64 + 4 * j, q < T ? src + q : src, q < T);
            }
        } else {
            for (int i = threadIdx.x; i < 64; i += ATT_V3_THREADS) {
                const int q = qb * ATT_BQ + i;
                lse_s[buf * 64 + i] = q < T ? lse[bh * T + q] : 0.0f;
                D_s[buf * 64 + i] = q < T ? rowdot[bh * T + q] : 0.0f;
            }
        }
    };
    auto load_q = [&](int h, int qb, int buf) {  // Q and dout tiles of head h, query tile qb (cp.async)
        blk.set_head(h);
        floatT *Qs = Qbuf + 2 * buf * L::QTILE;
        attn_tc_tile<floatT, HS, ATT_BQ, ATT_V3_THREADS>(Qs, blk.q, C3, qb * ATT_BQ, T, hs);
        attn_tc_tile<floatT, HS, ATT_BQ, ATT_V3_THREADS>(Qs + L::QTILE, blk.dout, C, qb * ATT_BQ, T, hs);
        load_rows(h, qb, buf);
    };

    for (int i = 0;; i++) {
        const int n = attn_v3_key_block(split, i, ns);
        if (n >= nkb) break;
        const int k0 = n * ATT_V3_BN, kw = k0 + warp * 16, key[2] = {kw + g, kw + g + 8};
        const int qb0 = k0 / ATT_BQ, nper = nqb - qb0, nsteps = blk.group * nper;
        __syncthreads();  // every warp is done with the last key block's tiles
        attn_tc_tile<floatT, HS, ATT_V3_BN, ATT_V3_THREADS>(Ks, blk.k, C3, k0, T, hs);
        attn_tc_tile<floatT, HS, ATT_V3_BN, ATT_V3_THREADS>(Vs, blk.v, C3, k0, T, hs);
        load_q(h0, qb0, 0);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        AttnTcKvWarp<floatT, HS, ATT_V3_BN> kvw(Ks, Vs, warp * 16);

        for (int step = 0; step < nsteps; step++) {
            const int h = h0 + step / nper, qb = qb0 + step % nper, q0 = qb * ATT_BQ, buf = step & 1;
            cp_async_wait<0>();
            __syncthreads();  // tile qb is in for every thread; every warp is done with the last step's tile and dS^T
            if (step + 1 < nsteps) load_q(h0 + (step + 1) / nper, qb0 + (step + 1) % nper, buf ^ 1);
            cp_async_commit();
            const floatT *Qs = Qbuf + 2 * buf * L::QTILE, *dOs = Qs + L::QTILE;
            // the warp's first 16-query chunk that any of its keys sees (4: none; kw - q0 is a multiple of 16), and
            // whether some query is before some key
            const int kc0 = kw <= q0 ? 0 : min(4, (kw - q0) / 16);
            kvw.step(Ks, Vs, Qs, dOs, St, lse_s + buf * 64, 1.4426950408889634f, D_s + buf * 64, warp * 16, kw, q0, kc0,
                     q0 < kw + 15, T, sl2);
            __syncthreads();  // dS^T is complete
            float *acc = dq_acc + (((long)split * bnh + (long)blk.b * NH + h) * tpad + q0) * HS;
            attn_v3_dq_step<floatT, HS>(acc, St, Ks, warp, k0, q0, i == 0);
        }
        const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
        attn_tc_write<floatT, HS>(dqkv + blk.k_at, C3, kvw.dk, key, sc, T, hs);
        attn_tc_write<floatT, HS>(dqkv + blk.v_at, C3, kvw.dv, key, one, T, hs);
    }
}

// dQ = scale * sum over the splits s of acc[s] (each only at its rows >= 128 s), in s order, into dqkv's q columns.
// A thread per two columns of a (b, h, t) row.
template <typename floatT>
__global__ void attn_v3_dq_kernel(floatT *__restrict__ dqkv, const float *__restrict__ dq_acc, int B, int T, int C, int NH,
                                  int KV, int HS, int ns, float scale) {
    const int hs = C / NH, pairs = hs / 2;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x, rows = (long)B * NH * T;
    if (idx >= rows * pairs) return;
    const long row = idx / pairs;  // (b * NH + h) * T + t
    const int c = 2 * (int)(idx % pairs), t = (int)(row % T);
    const long bh = row / T, b = bh / NH, h = bh % NH, tpad = attn_v3_tpad(T);
    const long per_split = (long)B * NH * tpad * HS;
    const float *a = dq_acc + (bh * tpad + t) * HS + c;
    float2 v = make_float2(0.0f, 0.0f);
    for (int s = 0; s < ns && t >= s * ATT_V3_BN; s++) {
        const float2 x = *reinterpret_cast<const float2 *>(a + s * per_split);
        v.x += x.x;
        v.y += x.y;
    }
    const long C3 = C + 2L * KV * hs;
    *reinterpret_cast<uint32_t *>(dqkv + (b * T + t) * C3 + h * hs + c) = attn_pack<floatT>(v.x * scale, v.y * scale);
}

#endif  // CUDA_ATTENTION_BWD_V3_CUH
