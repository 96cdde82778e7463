// cuda/attention_mma.cuh: flash attention in bf16 and fp16 on mma.sync tensor-core instructions: the
// instruction helpers, the shared tiles that cp.async fills, the forward kernel and the backward kernel (dK, dV
// and dQ, its blocks taking turns on dQ: cuda/block_order.cuh). Launched by cuda/attention.cuh in 16-bit runs.
#ifndef CUDA_ATTENTION_MMA_CUH
#define CUDA_ATTENTION_MMA_CUH

#include "async_copy.cuh"
#include "attention_common.cuh"
#include "block_order.cuh"

// ---- 16-bit attention on mma.sync: FlashAttention-2's register layout ----
// The 16-bit path keeps every score tile in registers: a warp computes its 16 rows x 64 keys of S with
// m16n8k16 tensor-core products, runs the online softmax on the accumulators, and feeds them straight
// back as the A operand of P.V (an m16n8 accumulator pair has the layout of an m16n8k16 A operand).
// Shared memory holds only row-major operand tiles, filled by cp.async while the previous tile is computed on;
// a B operand that needs a tile's transpose (V in P.V, K in dS.K, Q and dout in dK and dV) comes through
// ldmatrix.trans. fp32 runs cuda/attention_fp32.cuh.
//
// Fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
// lane = 4 g + t: A (16x16): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
// a3 = A[g+8][2t+8, 2t+9]; B (16x8): b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]; C, D (16x8, fp32):
// d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1]. A register's lower-indexed value is its low half.

template <typename floatT> __device__ __forceinline__ float attn_lo(uint32_t w);
template <typename floatT> __device__ __forceinline__ float attn_hi(uint32_t w);
template <> __device__ __forceinline__ float attn_lo<bf16>(uint32_t w) { return __uint_as_float(w << 16); }
template <> __device__ __forceinline__ float attn_hi<bf16>(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
template <> __device__ __forceinline__ float attn_lo<__half>(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
template <> __device__ __forceinline__ float attn_hi<__half>(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}
__device__ __forceinline__ unsigned short attn_bits(bf16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ unsigned short attn_bits(__half x) { return __half_as_ushort(x); }
// Two values rounded to nearest into one register (one conversion instruction for the pair).
template <typename floatT> __device__ __forceinline__ uint32_t attn_pack(float lo, float hi);
template <> __device__ __forceinline__ uint32_t attn_pack<bf16>(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return (uint32_t)attn_bits(v.x) | ((uint32_t)attn_bits(v.y) << 16);
}
template <> __device__ __forceinline__ uint32_t attn_pack<__half>(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return (uint32_t)attn_bits(v.x) | ((uint32_t)attn_bits(v.y) << 16);
}
// 2^x as the hardware's approximation (one MUFU op; relative error about 2^-22, and 2^-inf = 0), where
// exp2f adds range handling around it.
__device__ __forceinline__ float attn_exp2(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

// d += A . B for one m16n8k16 tile, fp32 accumulation.
template <typename floatT>
__device__ __forceinline__ void mma_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same<floatT, __half>::value)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    // The same product from warp shuffles, for devices without mma.sync; it is also the instruction's
    // definition in plain code: each lane gathers its two rows of A and two columns of B.
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float ar[2][16], bc[2][16];
#pragma unroll
    for (int j = 0; j < 4; j++) {  // lane 4g + j holds A's rows g, g+8 at columns 2j, 2j+1 and 2j+8, 2j+9
        const uint32_t w0 = __shfl_sync(0xffffffffu, a[0], 4 * g + j), w1 = __shfl_sync(0xffffffffu, a[1], 4 * g + j);
        const uint32_t w2 = __shfl_sync(0xffffffffu, a[2], 4 * g + j), w3 = __shfl_sync(0xffffffffu, a[3], 4 * g + j);
        ar[0][2 * j] = attn_lo<floatT>(w0); ar[0][2 * j + 1] = attn_hi<floatT>(w0);
        ar[1][2 * j] = attn_lo<floatT>(w1); ar[1][2 * j + 1] = attn_hi<floatT>(w1);
        ar[0][2 * j + 8] = attn_lo<floatT>(w2); ar[0][2 * j + 9] = attn_hi<floatT>(w2);
        ar[1][2 * j + 8] = attn_lo<floatT>(w3); ar[1][2 * j + 9] = attn_hi<floatT>(w3);
#pragma unroll
        for (int c = 0; c < 2; c++) {  // lane 4n + j holds B's column n at rows 2j, 2j+1 and 2j+8, 2j+9
            const int src = 4 * (2 * t + c) + j;
            const uint32_t v0 = __shfl_sync(0xffffffffu, b[0], src), v1 = __shfl_sync(0xffffffffu, b[1], src);
            bc[c][2 * j] = attn_lo<floatT>(v0); bc[c][2 * j + 1] = attn_hi<floatT>(v0);
            bc[c][2 * j + 8] = attn_lo<floatT>(v1); bc[c][2 * j + 9] = attn_hi<floatT>(v1);
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float s = d[2 * r + c];
#pragma unroll
            for (int k = 0; k < 16; k++) s = fmaf(ar[r][k], bc[c][k], s);
            d[2 * r + c] = s;
        }
#endif
}

// Four 8x8 16-bit matrices from shared memory (PTX ldmatrix.sync.aligned.m8n8.x4.shared.b16): lanes
// 8j .. 8j+7 give the addresses of matrix j's 8 rows (16 bytes each, 16-byte aligned); lane 4g + t
// receives r[j] = matrix j's row g, columns 2t and 2t+1: one instruction for four B operand registers.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned long long p = __shfl_sync(0xffffffffu, (unsigned long long)row, 8 * j + g);
        r[j] = reinterpret_cast<const uint32_t *>(p)[t];
    }
#endif
}

// The same four 8x8 matrices transposed (ldmatrix...x4.trans): lane 4g + t receives r[j] = matrix j's rows 2t
// and 2t + 1 at column g (low half row 2t). From a row-major [k][n] tile that is an m16n8k16 B operand
// (b0 = B[2t, 2t+1][g]) without a transposed copy in shared memory.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned long long p0 = __shfl_sync(0xffffffffu, (unsigned long long)row, 8 * j + 2 * t);
        const unsigned long long p1 = __shfl_sync(0xffffffffu, (unsigned long long)row, 8 * j + 2 * t + 1);
        r[j] = (uint32_t)reinterpret_cast<const uint16_t *>(p0)[g] | ((uint32_t)reinterpret_cast<const uint16_t *>(p1)[g] << 16);
    }
#endif
}

// ---- tiles and their products ----
// Forward: a block owns ATT_TC_BQ = 128 query rows, 8 warps of 16, and walks key tiles of 64; backward: a
// block owns 64 key rows, 4 warps of 16 (ATT_THREADS), and walks query tiles of 64. Shared memory is four
// row-major [64][LDR] tiles: two buffers of two, the next pair loading (cp.async) while the current one is used.
constexpr int ATT_TC_BQ = 128, ATT_TC_WARPS = 8, ATT_TC_THREADS = 32 * ATT_TC_WARPS, ATT_TC_BK = 64;
static_assert(ATT_TC_BQ == 16 * ATT_TC_WARPS && ATT_TC_BK == ATT_BK, "a warp owns 16 rows; key tiles of 64");

// LDR: a tile row is 16 bytes past a multiple of 128, so the 8 rows an ldmatrix matrix reads start 4 banks apart.
// KV_SMEM: the backward reads its K and V fragments from shared memory per query tile, where holding them (HS / 4
// registers each) beside dK and dV (HS / 2 each) would spill: at HS 128 ptxas put 432 bytes of each thread in
// local memory. Then V keeps a tile of its own.
template <typename floatT, int HS>
struct AttnTc {
    static constexpr int LDR = HS + 8, TILE = 64 * LDR;
    static constexpr bool KV_SMEM = HS > 64;
    static constexpr size_t FWD_BYTES = sizeof(floatT) * 4 * TILE;   // K, V x 2 buffers (Q first in buffer 1)
    // backward: Q, dout x 2 buffers, K, (V,) dS^T [64][64 + 8]; lse, D x 2
    static constexpr size_t BWD_BYTES =
        sizeof(floatT) * ((KV_SMEM ? 6 : 5) * TILE + 64 * (64 + 8)) + 4 * sizeof(float) * 64;
    static_assert(HS % 16 == 0 && (LDR * sizeof(floatT)) % 16 == 0, "16-byte rows");
};

// Issues the copies of rows [row0, row0 + ROWS) of one head (rows ld_src apart) into a row-major tile, the
// block's THREADS threads sharing the 16-byte chunks. Rows >= T and columns >= hs become zero, so a head
// size padded up to HS adds nothing to any product and a ragged last tile nothing past T.
template <typename floatT, int HS, int ROWS, int THREADS>
__device__ __forceinline__ void attn_tc_tile(floatT *tile, const floatT *__restrict__ src, long ld_src, int row0, int T,
                                             int hs) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int i = 0; i < (ROWS * HS / 8 + THREADS - 1) / THREADS; i++) {
        const int idx = threadIdx.x + i * THREADS, r = idx / (HS / 8), c = (idx % (HS / 8)) * 8;
        if (ROWS * HS / 8 % THREADS != 0 && idx >= ROWS * HS / 8) break;
        const bool in = row0 + r < T && c < hs;
        cp_async_16(tile + r * L::LDR + c, in ? src + (long)(row0 + r) * ld_src + c : src, in);
    }
}

// A warp's 16 rows of a row-major tile, columns [16 kc, 16 kc + 16), as an m16n8k16 A operand: one ldmatrix, its
// matrix j the rows 8 (j & 1) .. + 7 at columns 8 (j >> 1) .. + 7 (a0: rows g, a1: rows g + 8, a2 and a3 the same
// 8 columns on).
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_row_chunk(uint32_t a[4], const floatT *tile, int row0, int kc) {
    using L = AttnTc<floatT, HS>;
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
    ldmatrix_x4(a, tile + (row0 + (j & 1) * 8 + r) * L::LDR + kc * 16 + (j >> 1) * 8);
}
// All HS / 16 of them.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_rows(uint32_t a[][4], const floatT *tile, int row0) {
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) attn_tc_row_chunk<floatT, HS>(a[kc], tile, row0, kc);
}

// A warp's accumulator of N 8-column tiles (16 rows each), zeroed.
template <int N>
__device__ __forceinline__ void attn_tc_zero(float acc[][4]) {
#pragma unroll
    for (int n = 0; n < N; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// B operands for the 8-column tiles n and n + 1, k-chunk kc (b[0], b[1] for tile n, b[2], b[3] for n + 1), from
// a row-major tile M: attn_tc_b2 when M's rows are B's columns (B = M^T: K in Q K^T), attn_tc_b2t when M's rows
// are B's k (B = M: V in P V), through ldmatrix.trans.
template <int LD, typename floatT>
__device__ __forceinline__ void attn_tc_b2(uint32_t b[4], const floatT *M, int n, int kc) {
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
    ldmatrix_x4(b, M + ((n + (j >> 1)) * 8 + r) * LD + kc * 16 + (j & 1) * 8);
}
template <int LD, typename floatT>
__device__ __forceinline__ void attn_tc_b2t(uint32_t b[4], const floatT *M, int n, int kc) {
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
    ldmatrix_x4_trans(b, M + (kc * 16 + (j & 1) * 8 + r) * LD + (n + (j >> 1)) * 8);
}

// acc[n] (16 rows x 8 columns 8n..8n+7) += A . B^T over k chunk kc, for the 64 rows of a row-major tile Bm
// (B[k][n] = Bm[n][k]): eight independent accumulators between dependent products.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_scores_chunk(float acc[8][4], const uint32_t a[4], const floatT *Bm, int kc) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int n = 0; n < 8; n += 2) {
        uint32_t b[4];
        attn_tc_b2<L::LDR>(b, Bm, n, kc);
        mma_16x8x16<floatT>(acc[n], a, b);
        mma_16x8x16<floatT>(acc[n + 1], a, b + 2);
    }
}

// acc[n] = A . B^T as above over all of k: the warp's scores against 64 keys, or dP against 64 rows of V. Only
// n < n_end (even) are computed; the rest are zero.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_scores(float acc[8][4], const uint32_t a[][4], const floatT *Bm, int n_end) {
    using L = AttnTc<floatT, HS>;
    attn_tc_zero<8>(acc);
    if (n_end == 8) {  // k outermost
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) attn_tc_scores_chunk<floatT, HS>(acc, a[kc], Bm, kc);
        return;
    }
#pragma unroll
    for (int n = 0; n < 8; n += 2) {
        if (n >= n_end) break;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t b[4];
            attn_tc_b2<L::LDR>(b, Bm, n, kc);
            mma_16x8x16<floatT>(acc[n], a[kc], b);
            mma_16x8x16<floatT>(acc[n + 1], a[kc], b + 2);
        }
    }
}

// The same with A a warp's 16 rows [row0, row0 + 16) of a row-major tile As, read from shared memory a chunk at a
// time (AttnTc::KV_SMEM).
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_scores_tile(float acc[8][4], const floatT *As, int row0, const floatT *Bm) {
    attn_tc_zero<8>(acc);
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        uint32_t a[4];
        attn_tc_row_chunk<floatT, HS>(a, As, row0, kc);
        attn_tc_scores_chunk<floatT, HS>(acc, a, Bm, kc);
    }
}

// out[HS / 8] += P . M for P given as score accumulators p[8][4] (16 rows x 64 columns, the k dimension),
// 16-column chunks [kc0, kc1), and M a row-major [64][HS] tile (V, K, Q or dout) read through ldmatrix.trans.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_pv(float out[][4], const float p[8][4], const floatT *M, int kc0, int kc1) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        if (kc < kc0 || kc >= kc1) continue;
        const uint32_t a[4] = {attn_pack<floatT>(p[2 * kc][0], p[2 * kc][1]), attn_pack<floatT>(p[2 * kc][2], p[2 * kc][3]),
                               attn_pack<floatT>(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                               attn_pack<floatT>(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
        for (int n = 0; n < HS / 8; n += 2) {
            uint32_t b[4];
            attn_tc_b2t<L::LDR>(b, M, n, kc);
            mma_16x8x16<floatT>(out[n], a, b);
            mma_16x8x16<floatT>(out[n + 1], a, b + 2);
        }
    }
}

// Writes a warp's 16 x hs accumulator (times mul) to rows row[0], row[1] (this lane's g and g + 8) of dst,
// rows ld apart; rows >= T are skipped.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_write(floatT *dst, long ld, const float acc[][4], const int row[2], const float mul[2],
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

// RoPE (rope_pair) in place on the rows [0, ROWS) of a row-major shared tile that hold positions pos0 + r < T, columns
// [0, hs); rows >= T (zero fill) are left alone. The block's THREADS threads share the ROWS x HS/2 pairs in a fixed,
// unrolled pattern (pairs past hs/2 skipped), without a division by the run-time head size. The caller brackets it
// with barriers: the tile's copies landed before, the readers after.
template <typename floatT, int HS, int ROWS, int THREADS>
__device__ __forceinline__ void attn_tc_rope_tile(floatT *tile, int pos0, int T, int hs, const float *__restrict__ cos_t,
                                                  const float *__restrict__ sin_t) {
    using L = AttnTc<floatT, HS>;
    static_assert(ROWS * (HS / 2) % THREADS == 0, "whole rounds of pairs");
    const int h2 = hs / 2;
#pragma unroll 1  // one pair at a time: unrolled, the loads run ahead and the registers of the kernel's loop spill
    for (int k = 0; k < ROWS * (HS / 2) / THREADS; k++) {
        const int idx = threadIdx.x + k * THREADS, r = idx / (HS / 2), i = idx % (HS / 2), p = pos0 + r;
        if (i >= h2 || p >= T) continue;
        floatT *x = tile + r * L::LDR;
        float y1, y2;
        rope_pair(attn_to_float(x[i]), attn_to_float(x[i + h2]), cos_t[(long)p * h2 + i], sin_t[(long)p * h2 + i], false,
                  y1, y2);
        x[i] = attn_from_float<floatT>(y1);
        x[i + h2] = attn_from_float<floatT>(y2);
    }
}

// RoPE's transpose on a warp's 16 gradient rows: stage (the warp's own 16 rows of a row-major shared tile, LDR
// apart) holds them as floatT, rounded as they would be stored (attn_pack); rows pos0 .. pos0 + 15 below T go to dst
// (the head's row 0, rows ld apart) un-rotated (rope_pair), two columns of each half a lane at a time: the bits of
// the plain write followed by the separate rope_backward pass.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_unrope_rows(floatT *dst, long ld, const floatT *stage, int pos0, int T, int hs,
                                                    const float *__restrict__ cos_t, const float *__restrict__ sin_t) {
    using L = AttnTc<floatT, HS>;
    const int lane = threadIdx.x & 31, h2 = hs / 2, np = h2 / 2;  // hs % 16 == 0: h2 is even
    __syncwarp();  // the warp's lanes have staged their rows; a pair crosses lanes
    for (int idx = lane; idx < 16 * np; idx += 32) {
        const int r = idx / np, i = 2 * (idx % np), p = pos0 + r;
        if (p >= T) continue;
        const floatT *x = stage + r * L::LDR;
        const float *c = cos_t + (long)p * h2 + i, *sn = sin_t + (long)p * h2 + i;
        float a0, a1, b0, b1;
        rope_pair(attn_to_float(x[i]), attn_to_float(x[i + h2]), c[0], sn[0], true, a0, b0);
        rope_pair(attn_to_float(x[i + 1]), attn_to_float(x[i + h2 + 1]), c[1], sn[1], true, a1, b1);
        floatT *d = dst + (long)p * ld;
        *reinterpret_cast<uint32_t *>(d + i) = attn_pack<floatT>(a0, a1);
        *reinterpret_cast<uint32_t *>(d + i + h2) = attn_pack<floatT>(b0, b1);
    }
}

// The causal geometry of a warp's 16 query rows [r_lo, r_lo + 16) against the key tile at k0: the 8-key chunks
// it sees (0 .. n_end, even; <= 0: none), and whether the causal mask cuts the tile.
struct AttnDiag {
    int n_end;
    bool masked;
    __device__ AttnDiag(int r_lo, int k0) {
        n_end = min(8, (r_lo + 16 - k0) / 8);
        masked = k0 + ATT_TC_BK - 1 > r_lo;
    }
};

// Key tiles a block of query rows [q0, q0 + ATT_TC_BQ) walks: up to its last row's diagonal, and none past T
// (rows < T see keys < T only; rows >= T are not written).
__device__ __forceinline__ int attn_tc_key_tiles(int q0, int T) {
    return min((q0 + ATT_TC_BQ - 1) / ATT_TC_BK + 1, (T + ATT_TC_BK - 1) / ATT_TC_BK);
}

// Forward. Block (x, b*NH + h) owns query rows [128 qb, 128 qb + 128), qb = nqb - 1 - x (longest rows first);
// warp w owns 16 of them. Per key tile: S = Q K^T in registers, masked and scaled into the log2 domain, online
// softmax (running max m and this lane's partial row sums l), O = O * 2^(m_old - m_new) + P V. The next K and V
// tiles load (cp.async) while this one is computed on. At the end out = O / l and lse = (m scale log2 e +
// log2 l) ln 2, the natural-log logsumexp the fp32 path keeps.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS)
attn_tc_fwd_kernel(floatT *__restrict__ out, float *__restrict__ lse, const floatT *__restrict__ qkv, int T, int C, int NH,
                   int KV, float scale, const float *__restrict__ rope_cos, const float *__restrict__ rope_sin,
                   AttnMask mask) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *sm = reinterpret_cast<floatT *>(attn_smem);  // buffer b: K at tile 2b, V at 2b + 1; Q first in buffer 1
    const AttnBlock<floatT> blk(qkv, nullptr, T, C, NH, KV, true, ATT_TC_BQ);  // k, v: the group's head
    const int qb = blk.tile, bh = blk.bh, hs = blk.hs, warp = blk.warp, lane = blk.lane, g = lane >> 2, t = lane & 3;
    const long C3 = blk.C3;
    const int q0 = qb * ATT_TC_BQ, r_lo = q0 + warp * 16, row[2] = {r_lo + g, r_lo + g + 8}, nkb = attn_tc_key_tiles(q0, T);
    const float sl2 = scale * 1.4426950408889634f;
    // The mask (arch/attn_mask.h): the block's key tiles start at its first row's first key (the tiles before are
    // wholly masked); this lane's rows see keys from fk[r], the warp's last row from fk_last (the latest: first keys
    // never decrease along a row). Causal: all 0, and the arithmetic below is the causal kernel's.
    const int kb0 = attn_first_key(mask, blk.b, T, q0) / ATT_TC_BK, fk[2] = {attn_first_key(mask, blk.b, T, row[0]),
                    attn_first_key(mask, blk.b, T, row[1])}, fk_last = attn_first_key(mask, blk.b, T, r_lo + 15),
              fk_first = attn_first_key(mask, blk.b, T, r_lo);

    attn_tc_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm + 2 * L::TILE, blk.q, C3, q0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(sm, blk.k, C3, kb0 * ATT_TC_BK, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(sm + L::TILE, blk.v, C3, kb0 * ATT_TC_BK, T, hs);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (rope_cos) {  // RoPE on the loaded Q tile, in place
        attn_tc_rope_tile<floatT, HS, ATT_TC_BQ, ATT_TC_THREADS>(sm + 2 * L::TILE, q0, T, hs, rope_cos, rope_sin);
        __syncthreads();
    }
    uint32_t qa[HS / 16][4];
    attn_tc_rows<floatT, HS>(qa, sm + 2 * L::TILE, warp * 16);
    float o[HS / 8][4];
    attn_tc_zero<HS / 8>(o);
    // m is the running max of the raw scores (scale > 0 keeps the order), so each probability is one
    // FFMA and one exp2: 2^(s scale log2 e - m scale log2 e).
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = kb0; kb < nkb; kb++) {
        const int k0 = kb * ATT_TC_BK;
        cp_async_wait<0>();
        __syncthreads();  // tile kb is in for every thread, and every warp is done with tile kb - 1 (and Q)
        ATTN_COUNT_TILE();
        if (kb + 1 < nkb) {
            floatT *nx = sm + ((kb + 1 - kb0) & 1) * 2 * L::TILE;  // the first tile (kb0) in buffer 0
            attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(nx, blk.k, C3, k0 + ATT_TC_BK, T, hs);
            attn_tc_tile<floatT, HS, 64, ATT_TC_THREADS>(nx + L::TILE, blk.v, C3, k0 + ATT_TC_BK, T, hs);
        }
        cp_async_commit();
        floatT *Ks = sm + ((kb - kb0) & 1) * 2 * L::TILE, *Vs = Ks + L::TILE;
        if (rope_cos) {  // RoPE on this K tile, in place, while the next one loads
            attn_tc_rope_tile<floatT, HS, ATT_TC_BK, ATT_TC_THREADS>(Ks, k0, T, hs, rope_cos, rope_sin);
            __syncthreads();
        }
        const AttnDiag dg(r_lo, k0);
        if (dg.n_end <= 0) continue;  // every key of the tile is after this warp's rows
        if (k0 + ATT_TC_BK <= fk_first) continue;  // every key of the tile is before this warp's rows' first keys
        float s[8][4];
        attn_tc_scores<floatT, HS>(s, qa, Ks, dg.n_end);
        if (dg.masked || k0 < fk_last) {  // the causal edge, or the window's or a document's start, cuts the tile
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + n * 8 + 2 * t + (e & 1);
                    if (n >= dg.n_end || key > row[e >> 1] || key < fk[e >> 1]) s[n][e] = -INFINITY;
                }
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
            // 0 on the row's first visible tile, where m = -inf; a row that has seen no key yet (a mask's tile before
            // its first key) keeps m = -inf, alpha 1 and probabilities 2^-inf = 0
            alpha[r] = m_new == -INFINITY ? 1.0f : attn_exp2((m[r] - m_new) * sl2);
            m[r] = m_new;
            ms[r] = m_new == -INFINITY ? 0.0f : m_new * sl2;
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
        attn_tc_pv<floatT, HS>(o, s, Vs, 0, dg.n_end / 2);
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {  // a + b equals b + a, so the 4 lanes of a row get the same bits
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = 1.0f / l[r];
        if (t == 0 && row[r] < T) lse[(long)bh * T + row[r]] = (m[r] * sl2 + log2f(l[r])) * 0.6931471805599453f;
    }
    attn_tc_write<floatT, HS>(out + blk.row_at, C, o, row, inv, T, hs);
}

// A warp's dQ rows from the block's dS^T tile: out[NCOL / 8] += A . K, A (16 query rows x 16 NKC keys) the
// transpose of columns [col0, col0 + 16) of St (row-major [16 NKC keys][ATT_TC_LDS], through ldmatrix.trans: lane
// 4g + t gets A[g][2t, 2t + 1] = St[2t, 2t + 1][col0 + g]), key chunks [0, kc1) of 16, and K a row-major
// [16 NKC][LDR] tile from its first column wanted on (NCOL of them). The default backward: 64 keys, all HS columns;
// v3 (attention_bwd_v3.cuh): 128 keys, HS / 2 columns a warp.
constexpr int ATT_TC_LDS = 64 + 8;  // the dS^T tile's row: 16 bytes past a multiple of 128, as LDR
template <typename floatT, int HS, int NKC = 4, int NCOL = HS>
__device__ __forceinline__ void attn_tc_dsk(float out[][4], const floatT *St, int col0, const floatT *Ks, int kc1) {
    using L = AttnTc<floatT, HS>;
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
#pragma unroll
    for (int kc = 0; kc < NKC; kc++) {
        if (kc >= kc1) break;
        uint32_t a[4];
        ldmatrix_x4_trans(a, St + (kc * 16 + (j >> 1) * 8 + r) * ATT_TC_LDS + col0 + (j & 1) * 8);
#pragma unroll
        for (int n = 0; n < NCOL / 8; n += 2) {
            uint32_t b[4];
            attn_tc_b2t<L::LDR>(b, Ks, n, kc);
            mma_16x8x16<floatT>(out[n], a, b);
            mma_16x8x16<floatT>(out[n + 1], a, b + 2);
        }
    }
}

// A warp's part of a dK/dV-stationary backward with key blocks of BN rows (the default kernel's 64, v3's 128 in
// attention_bwd_v3.cuh): its 16 keys kw .. kw + 15, rows row0 .. row0 + 15 of the block's K and V tiles, as A operands
// (in registers, or read from shared memory per step where KV_SMEM: then ka and va stay unused), and its dK and dV
// accumulators.
template <typename floatT, int HS, int BN>
struct AttnTcKvWarp {
    static constexpr bool KV_SMEM = AttnTc<floatT, HS>::KV_SMEM;
    uint32_t ka[KV_SMEM ? 1 : HS / 16][4], va[KV_SMEM ? 1 : HS / 16][4];
    float dk[HS / 8][4], dv[HS / 8][4];

    __device__ __forceinline__ AttnTcKvWarp(const floatT *Ks, const floatT *Vs, int row0) {
        if constexpr (!KV_SMEM) {
            attn_tc_rows<floatT, HS>(ka, Ks, row0);
            attn_tc_rows<floatT, HS>(va, Vs, row0);
        }
        attn_tc_zero<HS / 8>(dk);
        attn_tc_zero<HS / 8>(dv);
    }

    // One step, against the 64-row query tile at q0: S^T and dP^T, the probabilities and dS^T (to St, rows row0 ..
    // row0 + 15), dV += P^T dout and dK += dS^T Q. lse_b times lse_log2 is the rows' lse in the log2 domain (the
    // default kernel scales it as it loads it: 1; v3 loads it by cp.async, unscaled: log2 e; the same product).
    // The kernel gives the causal geometry in its own terms (ptxas sm_90a: the default's qb == kb form spills less
    // than one computed from kw and q0 here): kc0, the first 16-query chunk any of the warp's keys sees (4: none,
    // which only a key block taller than the query tile has); diag, whether the causal mask cuts the tile (some
    // query before some key). fk_b (the KV-stationary backward's, attention_bwd_kv.cuh): the tile's rows' first keys
    // (arch/attn_mask.h), a key before its query's masked too where diag says the mask cuts the tile; NULL: causal.
    __device__ __forceinline__ void step(const floatT *Ks, const floatT *Vs, const floatT *Qs, const floatT *dOs,
                                         floatT *St, const float *lse_b, float lse_log2, const float *D_b, int row0,
                                         int kw, int q0, int kc0, bool diag, int T, float sl2,
                                         const int *fk_b = nullptr) {
        const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
        const bool sees = BN <= ATT_BQ || kc0 < 4;
        float s[8][4], dp[8][4];
        if (sees) {
            if constexpr (KV_SMEM) {
                attn_tc_scores_tile<floatT, HS>(s, Ks, row0, Qs);
                attn_tc_scores_tile<floatT, HS>(dp, Vs, row0, dOs);
            } else {
                attn_tc_scores<floatT, HS>(s, ka, Qs, 8);
                attn_tc_scores<floatT, HS>(dp, va, dOs, 8);
            }
            const bool masked = diag || q0 + ATT_BQ > T;  // or query rows past T
            const int key[2] = {kw + g, kw + g + 8};
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = n * 8 + 2 * t + (e & 1), q = q0 + i;
                    float p = attn_exp2(fmaf(s[n][e], sl2, -(lse_b[i] * lse_log2)));
                    if (masked && (q < key[e >> 1] || q >= T || (fk_b && key[e >> 1] < fk_b[i]))) p = 0.0f;
                    s[n][e] = p;
                    dp[n][e] = p * (dp[n][e] - D_b[i]);
                }
        } else {
            attn_tc_zero<8>(dp);
        }
        // dS^T to shared memory, rounded to floatT as the products round it (zeros where the warp sees no query);
        // St null: no dQ from this kernel (the two-pass backward's dK/dV pass)
        if (St) {
#pragma unroll
            for (int n = 0; n < 8; n++) {
                floatT *row = St + (row0 + g) * ATT_TC_LDS + n * 8 + 2 * t;
                *reinterpret_cast<uint32_t *>(row) = attn_pack<floatT>(dp[n][0], dp[n][1]);
                *reinterpret_cast<uint32_t *>(row + 8 * ATT_TC_LDS) = attn_pack<floatT>(dp[n][2], dp[n][3]);
            }
        }
        if (sees) {
            attn_tc_pv<floatT, HS>(dv, s, dOs, kc0, 4);
            attn_tc_pv<floatT, HS>(dk, dp, Qs, kc0, 4);
        }
    }
};

// Backward, one kernel for dK, dV and dQ: 5 products per tile pair (FlashAttention-2's), after attn_bwd_rowdot_kernel
// has written D = rowsum(dout * out) and zeroed the turn counters. Block (x, b*KV + kvh) owns key rows [64 kb, 64 kb +
// 64), kb = nqb - 1 - x; warp w owns 16 of them, its K and V rows the A operands (held in registers, or read from
// shared memory per tile where KV_SMEM). Per query tile qb >= kb, transposed: S^T = K Q^T, dP^T = V dout^T, P^T =
// 2^(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - D); dV += P^T dout and dK += dS^T Q (times scale at the end),
// dout and Q through ldmatrix.trans. dS^T goes to shared memory, and each warp then computes 16 query rows of the
// tile's dQ contribution dS K. dQ of tile qb is the sum over key blocks kb = qb, qb - 1, .., 0 in that order
// (cuda/block_order.cuh): the diagonal block writes its contribution to the fp32 accumulator dq_acc, the blocks after
// it wait on the tile's counter until it says qb - kb blocks have added, then add theirs and count on, and block 0 adds
// the last one and writes dQ (times scale) in floatT: the same bits in every run, no atomics on data. A block waits
// only on blocks of its own row of the grid with a lower x (kb + 1 .. qb), which a GPU dispatches first. The next Q and
// dout tiles (and their lse and D) load while this one is computed on.
// Grouped-query attention: the grid's rows are (b, kvh), and a block walks the NH / KV query heads of its group in
// order, each over its query tiles, so dK and dV sum over the group in a fixed order in registers; each query head's
// dQ tiles keep their own counters and accumulators, taken in turns as above (a block's waits are still only on
// blocks of lower x of its row: those never wait on it, so the order cannot deadlock). KV = NH is one head a block,
// GPT-2's kernel step for step.
// DQ = false (the two-pass backward's second pass, cuda/attention_bwd_2pass.cuh): dK and dV only, the same products
// in the same order (so the same bits), no dS^T tile, no turns; its blocks start with the longest loops (kb = x).
template <typename floatT, int HS, bool DQ = true>
__global__ void __launch_bounds__(ATT_THREADS)
attn_tc_bwd_kernel(floatT *__restrict__ dqkv, float *__restrict__ dq_acc, int *__restrict__ turns,
                   const floatT *__restrict__ dout, const floatT *__restrict__ qkv, const float *__restrict__ lse,
                   const float *__restrict__ rowdot, int T, int C, int NH, int KV, float scale,
                   const float *__restrict__ rope_cos, const float *__restrict__ rope_sin) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    // buffer b: Q at tile 2b, dout at 2b + 1; K at tile 4, kept; V at 5, kept (KV_SMEM), else first at 3 until its
    // fragments are in registers; then dS^T [64][LDS], lse and D [2][64]
    floatT *sm = reinterpret_cast<floatT *>(attn_smem), *Ks = sm + 4 * L::TILE, *Vs = sm + (L::KV_SMEM ? 5 : 3) * L::TILE,
           *St = sm + (L::KV_SMEM ? 6 : 5) * L::TILE;
    float *lse_s = reinterpret_cast<float *>(St + 64 * ATT_TC_LDS), *D_s = lse_s + 2 * 64;
    AttnBlock<floatT> blk(qkv, dout, T, C, NH, KV, DQ, ATT_BQ, true);
    const int nqb = blk.nqb, kb = blk.tile, hs = blk.hs, warp = blk.warp, lane = blk.lane, g = lane >> 2, t = lane & 3;
    const long C3 = blk.C3;
    const int k0 = kb * ATT_BK, key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    const float sl2 = scale * 1.4426950408889634f;
    // The steps: the group's query heads h0, h0 + 1, .. in order, each over query tiles kb .. nqb - 1.
    const int h0 = blk.kvh * blk.group, nper = nqb - kb, nsteps = blk.group * nper;
    // query tile qb of head h: its turn counter (key blocks that have added) and its dQ accumulator [64][HS]
    auto turn_of = [&](int h, int qb) { return turns + (long)(blk.b * NH + h) * nqb + qb; };
    auto acc_of = [&](int h, int qb) { return dq_acc + ((long)(blk.b * NH + h) * nqb + qb) * ATT_BQ * HS; };
    // lse (log2 domain) and D of query tile qb of head h into slot `buf`; rows past T are zero (masked anyway)
    auto load_rows = [&](int h, int qb, int buf) {
        const long bh = (long)blk.b * NH + h;
        for (int i = threadIdx.x; i < 64; i += ATT_THREADS) {
            const int q = qb * ATT_BQ + i;
            lse_s[buf * 64 + i] = q < T ? lse[bh * T + q] * 1.4426950408889634f : 0.0f;
            D_s[buf * 64 + i] = q < T ? rowdot[bh * T + q] : 0.0f;
        }
    };

    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(Ks, blk.k, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(Vs, blk.v, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm, blk.q, C3, k0, T, hs);
    attn_tc_tile<floatT, HS, 64, ATT_THREADS>(sm + L::TILE, blk.dout, C, k0, T, hs);
    cp_async_commit();
    load_rows(h0, kb, 0);
    cp_async_wait<0>();
    __syncthreads();
    if (rope_cos) {  // RoPE on the block's K tile, in place (each Q tile is rotated in its step)
        attn_tc_rope_tile<floatT, HS, ATT_BK, ATT_THREADS>(Ks, k0, T, hs, rope_cos, rope_sin);
        __syncthreads();
    }
    AttnTcKvWarp<floatT, HS, ATT_BK> kvw(Ks, Vs, warp * 16);

    for (int step = 0; step < nsteps; step++) {
        const int h = h0 + step / nper, qb = kb + step % nper, q0 = qb * ATT_BQ, buf = step & 1;
        cp_async_wait<0>();
        __syncthreads();  // tile qb is in for every thread; every warp is done with the last step's tile (and V), dS^T and dQ
        if (DQ && kb > 0 && step > 0 && threadIdx.x == 0)  // the last step's dQ tile: its turn passes on
            block_order_release(turn_of(h0 + (step - 1) / nper, kb + (step - 1) % nper));
        if (step + 1 < nsteps) {
            const int hn = h0 + (step + 1) / nper, qn = kb + (step + 1) % nper;
            blk.set_head(hn);
            floatT *nx = sm + (buf ^ 1) * 2 * L::TILE;
            attn_tc_tile<floatT, HS, 64, ATT_THREADS>(nx, blk.q, C3, qn * ATT_BQ, T, hs);
            attn_tc_tile<floatT, HS, 64, ATT_THREADS>(nx + L::TILE, blk.dout, C, qn * ATT_BQ, T, hs);
            load_rows(hn, qn, buf ^ 1);
        }
        cp_async_commit();
        floatT *Qs = sm + buf * 2 * L::TILE, *dOs = Qs + L::TILE;
        if (rope_cos) {  // RoPE on this Q tile, in place, while the next one loads
            attn_tc_rope_tile<floatT, HS, ATT_BQ, ATT_THREADS>(Qs, q0, T, hs, rope_cos, rope_sin);
            __syncthreads();
        }
        // on the diagonal tile warp w's keys see queries >= 16 w only: 16-query chunks w..3
        kvw.step(Ks, Vs, Qs, dOs, DQ ? St : nullptr, lse_s + buf * 64, 1.0f, D_s + buf * 64, warp * 16, k0 + warp * 16, q0,
                 qb == kb ? warp : 0, qb == kb, T, sl2);
        if constexpr (!DQ) continue;
        // this block's turn on head h's dQ tile qb: after key blocks qb .. kb + 1
        if (qb > kb && threadIdx.x == 0) block_order_wait(turn_of(h, qb), qb - kb);
        __syncthreads();  // dS^T is complete, and the turn is this block's
        float dq[HS / 8][4];
        attn_tc_zero<HS / 8>(dq);
        // warp w's query rows 16 w .. 16 w + 15 see keys <= themselves: on the diagonal, key chunks 0..w
        attn_tc_dsk<floatT, HS>(dq, St, warp * 16, Ks, qb == kb ? warp + 1 : 4);
        const int qrow[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
        float *acc = acc_of(h, 0);  // rows of tile qb at qrow - 0: the head's [nqb * 64][HS]
        floatT *dq_g = dqkv + ((long)blk.b * T * C3 + (long)h * hs);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float *a = acc + (long)qrow[r] * HS + 2 * t;
            floatT *dst = dq_g + (long)qrow[r] * C3 + 2 * t;
#pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                float2 v = make_float2(dq[n][2 * r], dq[n][2 * r + 1]);
                if (qb > kb) {  // the blocks before this one have added theirs
                    const float2 prev = *reinterpret_cast<const float2 *>(a + n * 8);
                    v.x = prev.x + v.x;
                    v.y = prev.y + v.y;
                }
                if (kb > 0) *reinterpret_cast<float2 *>(a + n * 8) = v;
                else if (rope_cos)  // the last turn, RoPE: dQ staged in the warp's rows of this Q tile (read by none now)
                    *reinterpret_cast<uint32_t *>(Qs + (warp * 16 + g + 8 * r) * L::LDR + n * 8 + 2 * t) =
                        attn_pack<floatT>(v.x * scale, v.y * scale);
                else if (qrow[r] < T && n * 8 + 2 * t < hs)  // the last turn: dQ itself
                    *reinterpret_cast<uint32_t *>(dst + n * 8) = attn_pack<floatT>(v.x * scale, v.y * scale);
            }
        }
        if (kb == 0 && rope_cos)
            attn_tc_unrope_rows<floatT, HS>(dq_g, C3, Qs + warp * 16 * L::LDR, q0 + warp * 16, T, hs, rope_cos, rope_sin);
    }
    __syncthreads();  // every thread's dQ adds to the last tile are done (and every warp's reads of tile 0)
    if (DQ && kb > 0 && threadIdx.x == 0) block_order_release(turn_of(h0 + blk.group - 1, nqb - 1));
    const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
    if (rope_cos) {  // dK staged in the warp's 16 rows of tile 0 (free now), then un-rotated
        floatT *stage = sm + warp * 16 * L::LDR;
        const int lrow[2] = {g, g + 8};
        attn_tc_write<floatT, HS>(stage, L::LDR, kvw.dk, lrow, sc, 16, HS);
        attn_tc_unrope_rows<floatT, HS>(dqkv + blk.k_at, C3, stage, k0 + warp * 16, T, hs, rope_cos, rope_sin);
    } else {
        attn_tc_write<floatT, HS>(dqkv + blk.k_at, C3, kvw.dk, key, sc, T, hs);
    }
    attn_tc_write<floatT, HS>(dqkv + blk.v_at, C3, kvw.dv, key, one, T, hs);
}

// ---- end 16-bit attention ----

#endif  // CUDA_ATTENTION_MMA_CUH
