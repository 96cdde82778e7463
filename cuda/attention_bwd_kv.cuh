// cuda/attention_bwd_kv.cuh: the KV-stationary deterministic 16-bit attention backward (issue 49), built like
// FlashAttention-3's deterministic mode and cuDNN's Hopper engine: each thread block owns one key/value tile of BN keys
// (dK and dV accumulate in registers, no atomics on them); dQ is accumulated in an fp32 buffer in global memory in a
// fixed order that a per-(batch, head, query tile) counter enforces (cuda/block_order.cuh), key blocks in descending
// order (the last key block, with the fewest query tiles under a causal mask, first: shortest processing time first);
// a small kernel (attention_bwd_v3.cuh's attn_v3_dq_kernel, one split) converts dQ to floatX times the scale.
// The only 16-bit backward that takes a mask (arch/attn_mask.h: window, document), and TRAIN_GPT_ATTN_BWD=kv for
// causal. Launched by cuda/attention.cuh's flash_attention_backward after attn_bwd_rowdot_kernel (D, counters zeroed).
//
// Grid (nkb, B*KV): block x owns key block n = nkb - 1 - x (rows [BN n, BN n + BN)) of key/value head kvh, BN / 16
// warps of 16 keys (AttnTcKvWarp: K and V fragments in registers at HS <= 64, shared memory at 128). It walks the
// group's query heads in order (grouped-query attention read in place: dK and dV sum over the group in registers),
// each over the 64-row query tiles m that see any of its keys: from the causal diagonal (BN n / 64) to the last whose
// first row's first key is inside the block (attn_mask_tile_empty's tiles, no more). Per tile: S^T, dP^T, P^T, dS^T
// (masked per element where the causal edge, the window or a document start cuts the tile), dV += P^T dout, dK +=
// dS^T Q, dS^T to shared memory, then the tile's dQ part dS K (warp w: query rows 16 (w % 4) .., columns split in
// BN / 64 parts), waited for and added in turn: the contributors of query tile m are the key blocks lo(m) .. hi(m),
// hi(m) = the block of the tile's last row; block n adds after the hi(m) - n blocks above it (the first stores), so
// every run sums dQ in the same order. A block waits only on blocks of its grid row with a lower x (higher n),
// which a GPU dispatches first, and releases a tile's turn at the next step's barrier (FlashAttention-3's placement).
// Pipeline: STAGES buffers of (Q, dout, lse, D, first keys), the next STAGES - 1 tiles loading (cp.async) while one is
// computed on.
// Instantiations (attn_kv_configs, the sweep's set; dev/gpu_session.sh picks one per GPU into cuda/attention_tuned.h):
// BN 64 (4 warps), BN 128 (8 warps), each at 2 and 3 stages. With BN 64 and a causal mask the dQ order and products
// are the fused kernel's (attention_mma.cuh), so dQ has its bits: dev/cuda/attention.cu checks that.
#ifndef CUDA_ATTENTION_BWD_KV_CUH
#define CUDA_ATTENTION_BWD_KV_CUH

#include "attention_bwd_v3.cuh"
#include "block_order.cuh"

template <typename floatT, int HS, int BN, int STAGES>
struct AttnKv {
    static_assert(BN == 64 || BN == 128, "key blocks of 64 or 128 rows");
    static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 stages");
    static constexpr int WARPS = BN / 16, THREADS = 32 * WARPS;
    static constexpr int LDR = AttnTc<floatT, HS>::LDR, KTILE = BN * LDR, QTILE = ATT_BQ * LDR;
    // K, V [BN][LDR]; STAGES x (Q, dout) [64][LDR]; dS^T [BN][LDS]; STAGES x (lse, D, first key) [64]
    static constexpr size_t BYTES = sizeof(floatT) * (2 * KTILE + 2 * STAGES * QTILE + BN * ATT_TC_LDS) +
                                    (size_t)STAGES * 64 * (2 * sizeof(float) + sizeof(int));
    // the dQ product's column parts: two at BN 128 (8 warps over 4 row groups), one at 64 (and at HS 16)
    static constexpr int CS = (WARPS >= 8 && HS >= 32) ? 2 : 1, NCOL = HS / CS;
};

// The query tile m's last key block (the one that stores its dQ first), for key blocks of BN.
template <int BN>
__device__ __forceinline__ int attn_kv_hi(int m, int T) { return min(m * ATT_BQ + ATT_BQ - 1, T - 1) / BN; }

template <typename floatT, int HS, int BN, int STAGES>
__global__ void __launch_bounds__(AttnKv<floatT, HS, BN, STAGES>::THREADS, 1)
attn_kv_bwd_kernel(floatT *__restrict__ dqkv, float *__restrict__ dq_acc, int *__restrict__ turns,
                   const floatT *__restrict__ dout, const floatT *__restrict__ qkv, const float *__restrict__ lse,
                   const float *__restrict__ rowdot, int T, int C, int NH, int KV, float scale, AttnMask mask) {
    using L = AttnKv<floatT, HS, BN, STAGES>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Vs = Ks + L::KTILE, *Qbuf = Vs + L::KTILE,
           *St = Qbuf + 2 * STAGES * L::QTILE;  // stage s: Q at Qbuf + 2 s QTILE, dout after it
    float *lse_s = reinterpret_cast<float *>(St + BN * ATT_TC_LDS), *D_s = lse_s + STAGES * 64;
    int *fk_s = reinterpret_cast<int *>(D_s + STAGES * 64);
    AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, false, BN, true);
    const int nkb = (T + BN - 1) / BN, n = nkb - 1 - (int)blockIdx.x, hs = blk.hs, warp = blk.warp, lane = blk.lane;
    const int g = lane >> 2, t = lane & 3, nqb = (T + ATT_BQ - 1) / ATT_BQ, h0 = blk.kvh * blk.group;
    const int k0 = n * BN, kw = k0 + warp * 16, key[2] = {kw + g, kw + g + 8};
    const long C3 = blk.C3;
    const float sl2 = scale * 1.4426950408889634f;
    // the query tiles this key block sees: from the diagonal to the last whose first row's first key is inside it
    const int m0 = k0 / ATT_BQ;
    int m1 = m0;
    while (m1 < nqb && attn_first_key(mask, blk.b, T, m1 * ATT_BQ) < k0 + BN) m1++;
    const int nper = m1 - m0, nsteps = blk.group * nper;
    auto turn_of = [&](int h, int m) { return turns + (long)(blk.b * NH + h) * nqb + m; };
    // Q, dout (cp.async), lse (log2 domain), D and the rows' first keys of step s's tile into stage s % STAGES
    auto load = [&](int s) {
        const int h = h0 + s / nper, m = m0 + s % nper, st = s % STAGES;
        blk.set_head(h);
        floatT *Qs = Qbuf + 2 * st * L::QTILE;
        attn_tc_tile<floatT, HS, ATT_BQ, L::THREADS>(Qs, blk.q, C3, m * ATT_BQ, T, hs);
        attn_tc_tile<floatT, HS, ATT_BQ, L::THREADS>(Qs + L::QTILE, blk.dout, C, m * ATT_BQ, T, hs);
        const long bh = (long)blk.b * NH + h;
        for (int i = threadIdx.x; i < 64; i += L::THREADS) {
            const int q = m * ATT_BQ + i;
            lse_s[st * 64 + i] = q < T ? lse[bh * T + q] * 1.4426950408889634f : 0.0f;
            D_s[st * 64 + i] = q < T ? rowdot[bh * T + q] : 0.0f;
            fk_s[st * 64 + i] = attn_first_key(mask, blk.b, T, q);
        }
    };

    attn_tc_tile<floatT, HS, BN, L::THREADS>(Ks, blk.k, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, BN, L::THREADS>(Vs, blk.v, C3, k0, T, hs);
    for (int s = 0; s < STAGES - 1; s++) {  // the first tiles; group 0 holds K and V too
        if (s < nsteps) load(s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    AttnTcKvWarp<floatT, HS, BN> kvw(Ks, Vs, warp * 16);
    const int rg = warp & 3, col0 = (warp >> 2) * L::NCOL;
    const bool dq_warp = warp < 4 * L::CS;

    for (int step = 0; step < nsteps; step++) {
        const int h = h0 + step / nper, m = m0 + step % nper, q0 = m * ATT_BQ, st = step % STAGES;
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile `step` is in for every thread; every warp is done with the last step's tile, dS^T, dQ
        if (step > 0 && threadIdx.x == 0) {  // the last step's dQ tile: its turn passes on
            const int hp = h0 + (step - 1) / nper, mp = m0 + (step - 1) % nper;
            block_order_release(turn_of(hp, mp));
        }
        if (step + STAGES - 1 < nsteps) load(step + STAGES - 1);
        cp_async_commit();
        ATTN_COUNT_TILE();
        const floatT *Qs = Qbuf + 2 * st * L::QTILE, *dOs = Qs + L::QTILE;
        const int *fk_b = fk_s + st * 64;
        // the warp's first 16-query chunk any of its keys sees (4: none), whether the causal edge cuts the tile
        // (some query before some key) or the mask does (some key before its query's first: the tile's last row's
        // first key is the latest)
        const int kc0 = kw <= q0 ? 0 : min(4, (kw - q0) / 16);
        const bool cut = kw < fk_b[min(63, T - 1 - q0)];
        kvw.step(Ks, Vs, Qs, dOs, St, lse_s + st * 64, 1.0f, D_s + st * 64, warp * 16, kw, q0, kc0, q0 < kw + 15 || cut,
                 T, sl2, cut ? fk_b : nullptr);
        __syncthreads();  // dS^T is complete
        // this block's part of dQ's tile: query rows 16 rg .., its key chunks up to the rows' last (causal)
        float dq[L::NCOL / 8][4];
        attn_tc_zero<L::NCOL / 8>(dq);
        const int kc1 = min(BN / 16, (q0 + 16 * rg + 16 - k0) / 16);
        if (dq_warp && kc1 > 0) attn_tc_dsk<floatT, HS, BN / 16, L::NCOL>(dq, St, 16 * rg, Ks + col0, kc1);
        // its turn: after the hi(m) - n key blocks above it (0: it stores first)
        const int hi = attn_kv_hi<BN>(m, T), turn = hi - n;
        if (turn > 0 && threadIdx.x == 0) block_order_wait(turn_of(h, m), turn);
        __syncthreads();
        if (dq_warp) {
            float *acc = dq_acc + ((long)(blk.b * NH + h) * nqb + m) * ATT_BQ * HS;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float *a = acc + (long)(16 * rg + g + 8 * r) * HS + col0 + 2 * t;
#pragma unroll
                for (int c = 0; c < L::NCOL / 8; c++) {
                    float2 v = make_float2(dq[c][2 * r], dq[c][2 * r + 1]);
                    if (turn > 0) {  // the blocks before it have added theirs
                        const float2 prev = *reinterpret_cast<const float2 *>(a + c * 8);
                        v.x = prev.x + v.x;
                        v.y = prev.y + v.y;
                    }
                    *reinterpret_cast<float2 *>(a + c * 8) = v;
                }
            }
        }
    }
    __syncthreads();  // every thread's dQ adds to the last tile are done
    if (nsteps > 0 && threadIdx.x == 0) block_order_release(turn_of(h0 + (nsteps - 1) / nper, m0 + (nsteps - 1) % nper));
    const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
    attn_tc_write<floatT, HS>(dqkv + blk.k_at, C3, kvw.dk, key, sc, T, hs);
    attn_tc_write<floatT, HS>(dqkv + blk.v_at, C3, kvw.dv, key, one, T, hs);
}

// The instantiation set: (key rows per block, pipeline stages); warps are BN / 16. The sweep times each; a row of
// cuda/attention_tuned.h names the fastest per GPU, head size and precision.
struct AttnKvConfig { int bn, stages; };
static const AttnKvConfig attn_kv_configs[] = {{64, 2}, {64, 3}, {128, 2}, {128, 3}};
constexpr int ATT_KV_NCONFIGS = 4;

// Calls f(std::integral_constant<int, BN>, std::integral_constant<int, STAGES>) for configuration cfg.
template <typename F>
static void attn_kv_dispatch(int cfg, F &&f) {
    switch (cfg) {
    case 0: f(std::integral_constant<int, 64>{}, std::integral_constant<int, 2>{}); break;
    case 1: f(std::integral_constant<int, 64>{}, std::integral_constant<int, 3>{}); break;
    case 2: f(std::integral_constant<int, 128>{}, std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 128>{}, std::integral_constant<int, 3>{}); break;
    }
}

#endif  // CUDA_ATTENTION_BWD_KV_CUH
