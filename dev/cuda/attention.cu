// dev/cuda/attention.cu: flash-style causal multi-head self-attention (forward and backward) for the GPT-2
// trainer, plus a check against a CPU reference and a benchmark.
//
// Build and run on a GPU machine (sm_80 or newer), from the repo root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a
//        -Xcompiler -Wall,-Wextra -o /tmp/attention dev/cuda/attention.cu      (one line)
//   /tmp/attention           # correctness checks, then the benchmark
//   /tmp/attention check     # only the correctness checks;  /tmp/attention bench: only the benchmark
// It prints one PASS/FAIL line per check and exits nonzero if any check fails.
// The tile algorithm is also emulated on the host (no GPU needed) by dev/cuda/attention_emulate.cpp:
//   g++ -O2 -march=native -std=c++17 -fopenmp -o /tmp/attention_emulate dev/cuda/attention_emulate.cpp && /tmp/attention_emulate
//
// Layouts (as the CPU reference attention in train_gpt.c): qkv (B, T, 3C) row-major; head h's q at columns
// h*hs, k at C + h*hs, v at 2C + h*hs, hs = C / NH. out (B, T, C), head h at columns h*hs. Scores are scaled
// by 1/sqrt(hs), causal (key t2 <= query t). The forward also writes lse (B, NH, T), float: the natural-log
// logsumexp of each query row's scaled scores, which lets the backward recompute P = exp(scale*S - lse)
// without ever storing the T x T matrix.
//
// Design (the section between the two "move into train_gpt.cu" markers is what the trainer needs):
//  * Tiles: 64 query rows per block, 4 warps, each warp owning 16 of them; key tiles of 64. Forward and
//    dQ blocks walk key tiles 0..diagonal; dK/dV blocks walk query tiles diagonal..end (FlashAttention-2
//    split: no atomics, every output element written by exactly one thread, fixed summation order, so
//    runs are bit-identical). On the diagonal tile each warp skips the 16-wide blocks that the causal
//    mask zeroes entirely; partial tiles (T not a multiple of 64) are zero-filled and masked.
//  * floatT = __nv_bfloat16 or __half: the two matmuls of each step on tensor cores (nvcuda::wmma,
//    16x16x16 fragments, fp32 accumulation). floatT = float: the same tiles, loops and masks with plain
//    fp32 FMAs (exactness mode, matches the CPU reference to ~1e-6 relative).
//  * Scores leave the tensor cores through shared memory (store_matrix_sync to a float tile) for the
//    per-row softmax / per-element backward work; the forward's output accumulator also lives in shared
//    memory as fp32 so that the per-row online-softmax rescale is plain indexing (wmma's register layout
//    is opaque). A faster version would use mma.sync PTX with its documented fragment layout to keep S,
//    P and O in registers (no shared round trips, FA2 style), exp2f with log2(e) folded into the scale,
//    cp.async double-buffered K/V loads, and on sm_90 wgmma/TMA.
//  * Backward: a small kernel for D = rowsum(dout * out) (per row and head) into the float scratch; a
//    dK/dV kernel, one block per (key tile, b, h); a dQ kernel, one block per (query tile, b, h). Both
//    recompute S and P = exp(scale*S - lse) (and dP = dout . v) from the inputs.
//  * Dynamic shared memory per block (AttnSmem below), bytes: 16-bit hs=64: forward 71680, backward
//    90624 (3 and 2 blocks per H100 SM); 16-bit hs=128: 112640 / 123392; fp32 hs=64: 83200 / 100352;
//    fp32 hs=128: 148736 / 165888 (just under the A100's 166912 opt-in limit). The launchers raise
//    cudaFuncAttributeMaxDynamicSharedMemorySize and exit with a message if the device offers less.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include <vector>
#include "attention_ref.h"

// ============================================================================================================
// ---- begin: move into train_gpt.cu ------------------------------------------------------------------------

// train_gpt.cu has its own cudaCheck; this one is only for the standalone build.
#ifndef cudaCheck
static void attn_cuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(err));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) attn_cuda_check((err), __FILE__, __LINE__)
#endif

constexpr int ATT_BQ = 64;                // query rows per block (forward, dQ) / per query tile (dK/dV)
constexpr int ATT_BK = 64;                // key rows per key tile (forward, dQ) / per block (dK/dV)
constexpr int ATT_WARPS = 4;              // each warp owns 16 consecutive rows of the block's 64
constexpr int ATT_THREADS = 32 * ATT_WARPS;
constexpr int ATT_MAX_HS = 128;
static_assert(ATT_BQ == 16 * ATT_WARPS && ATT_BK == ATT_BQ, "the diagonal-tile logic assumes square 64 tiles");

// Shared memory layout, per kernel, in bytes from the start of the dynamic shared memory. HS is the head
// size padded to a multiple of 16 (equal to hs on the tensor-core path; fp32 pads with zero columns).
//   floatT tiles [64][LDH] (q, k, v, dout rows); float tiles [64][LDS] (scores S, dP);
//   floatT tiles [64][LDP] (P, dS as tensor-core operands; in fp32 mode P/dS overwrite S/dP in place);
//   forward's float output accumulator [64][LDO].
// Tensor-core path: wmma needs 32-byte aligned fragment pointers and ldm a multiple of 16 bytes; the +8/+4
// element padding keeps that and staggers rows across banks. fp32 path: odd strides, so that 32 lanes
// reading 32 different rows of a tile at the same column hit 32 different banks.
template <typename floatT, int HS>
struct AttnSmem {
    static constexpr bool TC = sizeof(floatT) == 2;
    static constexpr int LDH = TC ? HS + 8 : HS + 1;
    static constexpr int LDS = TC ? ATT_BK + 4 : ATT_BK + 1;
    static constexpr int LDP = TC ? ATT_BK + 8 : LDS;
    static constexpr int LDO = TC ? HS + 4 : HS + 1;
    static constexpr size_t round128(size_t x) { return (x + 127) / 128 * 128; }
    static constexpr size_t H_TILE = round128(sizeof(floatT) * ATT_BQ * LDH);
    static constexpr size_t S_TILE = round128(sizeof(float) * ATT_BQ * LDS);
    static constexpr size_t P_TILE = TC ? round128(sizeof(floatT) * ATT_BQ * LDP) : 0;
    static constexpr size_t O_TILE = round128(sizeof(float) * ATT_BQ * LDO);
    static constexpr size_t VEC = round128(sizeof(float) * ATT_BQ);
    // forward: Q K V | S | P | O
    static constexpr size_t FWD_Q = 0, FWD_K = H_TILE, FWD_V = 2 * H_TILE, FWD_S = 3 * H_TILE;
    static constexpr size_t FWD_P = FWD_S + S_TILE, FWD_O = FWD_P + P_TILE, FWD_BYTES = FWD_O + O_TILE;
    // backward (dK/dV and dQ kernels; dQ leaves the P tile unused): Q dO K V | S dP | P dS | lse D
    static constexpr size_t BWD_Q = 0, BWD_DO = H_TILE, BWD_K = 2 * H_TILE, BWD_V = 3 * H_TILE;
    static constexpr size_t BWD_S = 4 * H_TILE, BWD_DP = BWD_S + S_TILE, BWD_P = BWD_DP + S_TILE;
    static constexpr size_t BWD_DS = BWD_P + P_TILE, BWD_LSE = BWD_DS + P_TILE, BWD_D = BWD_LSE + VEC;
    static constexpr size_t BWD_BYTES = BWD_D + VEC;
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= ATT_MAX_HS, "padded head size");
    static_assert(!TC || (LDH % 8 == 0 && LDP % 8 == 0 && LDS % 4 == 0 && LDO % 4 == 0), "wmma ldm");
    static_assert(!TC || ((16 * LDH * sizeof(floatT)) % 32 == 0 && (16 * LDP * sizeof(floatT)) % 32 == 0 &&
                          (16 * LDS * 4) % 32 == 0 && (16 * LDO * 4) % 32 == 0), "wmma 32-byte fragment alignment");
};

static inline __host__ __device__ float attn_to_float(float x) { return x; }
static inline __host__ __device__ float attn_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
static inline __host__ __device__ float attn_to_float(__half x) { return __half2float(x); }
template <typename T> static inline __host__ __device__ T attn_from_float(float x);
template <> inline __host__ __device__ float attn_from_float<float>(float x) { return x; }
template <> inline __host__ __device__ __nv_bfloat16 attn_from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> inline __host__ __device__ __half attn_from_float<__half>(float x) { return __float2half(x); }

// Rows [row0, row0 + 64) of one head's hs columns into a shared tile [64][LD]. src points at row 0 of the
// head's columns, rows ld_src apart. Rows >= T, and on the fp32 path the pad columns hs..HS, are zero.
// 16-bit path: 16-byte vector loads (hs is a multiple of 16, so C is a multiple of 16 and every row start
// is 16-byte aligned given a 16-byte aligned base pointer; the launchers check the base).
template <typename floatT, int HS, int LD>
__device__ void attn_load_tile(floatT *dst, const floatT *__restrict__ src, long ld_src, int row0, int T, int hs) {
    if constexpr (sizeof(floatT) == 2) {
        constexpr int CHUNKS = HS / 8;  // 8 elements = 16 bytes
        for (int idx = threadIdx.x; idx < ATT_BQ * CHUNKS; idx += ATT_THREADS) {
            const int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (row0 + r < T) v = *reinterpret_cast<const uint4 *>(src + (long)(row0 + r) * ld_src + c);
            *reinterpret_cast<uint4 *>(dst + r * LD + c) = v;
        }
    } else {
        for (int idx = threadIdx.x; idx < ATT_BQ * HS; idx += ATT_THREADS) {
            const int r = idx / HS, c = idx % HS;
            float v = 0.0f;
            if (row0 + r < T && c < hs) v = src[(long)(row0 + r) * ld_src + c];
            dst[r * LD + c] = v;
        }
    }
}

// One warp: Cm[16][16*nb0 .. 16*nb1) = A[16][HS] . Bm[16*nb0 .. 16*nb1)[HS]^T, i.e. C[r][j] = A_r . B_j
// (both operands row-major [row][HS] tiles in shared memory; C fp32 in shared memory, row-major).
template <typename floatT, int HS>
__device__ void attn_warp_mm_nt(float *Cm, int ldc, const floatT *A, int lda, const floatT *Bm, int ldb, int nb0,
                                int nb1) {
    if constexpr (sizeof(floatT) == 2) {
        using namespace nvcuda;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, floatT, wmma::row_major> a[HS / 16];
#pragma unroll
        for (int k = 0; k < HS / 16; k++) wmma::load_matrix_sync(a[k], A + k * 16, lda);
        for (int n = nb0; n < nb1; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int k = 0; k < HS / 16; k++) {
                // B^T as a col-major K x N operand: element (d, j) at Bm[(16n + j) * ldb + 16k + d]
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatT, wmma::col_major> bf;
                wmma::load_matrix_sync(bf, Bm + n * 16 * ldb + k * 16, ldb);
                wmma::mma_sync(acc, a[k], bf, acc);
            }
            wmma::store_matrix_sync(Cm + n * 16, acc, ldc, wmma::mem_row_major);
        }
    } else {
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
}

// A warp's 16 x HS fp32 accumulator: wmma fragments on the tensor-core path, per-lane registers (lane owns
// columns lane, lane + 32, ...) on the fp32 path. add(): acc += A[16][16*kb0 .. 16*kb1) . Bm[16*kb0 ..
// 16*kb1)[HS] with A a [16][lda] tile and Bm a row-major [row][HS] tile, both in shared memory.
template <typename floatT, int HS, bool TC = (sizeof(floatT) == 2)>
struct AttnWarpAcc;

template <typename floatT, int HS>
struct AttnWarpAcc<floatT, HS, true> {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f[HS / 16];
    __device__ void zero() {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::fill_fragment(f[n], 0.0f);
    }
    __device__ void load(const float *src, int ld) {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::load_matrix_sync(f[n], src + n * 16, ld, nvcuda::wmma::mem_row_major);
    }
    __device__ void store(float *dst, int ld) {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::store_matrix_sync(dst + n * 16, f[n], ld, nvcuda::wmma::mem_row_major);
    }
    __device__ void add(const floatT *A, int lda, const floatT *Bm, int ldb, int kb0, int kb1) {
        using namespace nvcuda;
        for (int k = kb0; k < kb1; k++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatT, wmma::row_major> a;
            wmma::load_matrix_sync(a, A + k * 16, lda);
#pragma unroll
            for (int n = 0; n < HS / 16; n++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatT, wmma::row_major> bf;
                wmma::load_matrix_sync(bf, Bm + k * 16 * ldb + n * 16, ldb);
                wmma::mma_sync(f[n], a, bf, f[n]);
            }
        }
    }
    // dst[r][c] = mul * acc[r][c] for r < nrows (dst rows ld_dst apart, global memory). Goes through stage,
    // a [16][ld_stage >= 64] float tile in shared memory owned by this warp, 64 columns at a time.
    __device__ void write(floatT *dst, long ld_dst, int nrows, int hs, float mul, float *stage, int ld_stage) {
        const int lane = threadIdx.x & 31;
        (void)hs;  // == HS on this path
#pragma unroll
        for (int n0 = 0; n0 < HS / 16; n0 += 4) {
            const int nn = (HS / 16 - n0) < 4 ? (HS / 16 - n0) : 4;
#pragma unroll
            for (int n = 0; n < nn; n++)
                nvcuda::wmma::store_matrix_sync(stage + n * 16, f[n0 + n], ld_stage, nvcuda::wmma::mem_row_major);
            __syncwarp();
            for (int r = 0; r < nrows; r++)
                for (int c = lane; c < nn * 16; c += 32)
                    dst[r * ld_dst + n0 * 16 + c] = attn_from_float<floatT>(mul * stage[r * ld_stage + c]);
            __syncwarp();
        }
    }
};

template <typename floatT, int HS>
struct AttnWarpAcc<floatT, HS, false> {
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
    __device__ void write(floatT *dst, long ld_dst, int nrows, int hs, float mul, float *stage, int ld_stage) {
        const int lane = threadIdx.x & 31;
        (void)stage;
        (void)ld_stage;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (r < nrows && lane + 32 * q < hs) dst[r * ld_dst + lane + 32 * q] = mul * v[r][q];
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
                float scale) {
    using L = AttnSmem<floatT, HS>;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::FWD_Q);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::FWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::FWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::FWD_S);
    floatT *Ps = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::FWD_P) : reinterpret_cast<floatT *>(Ss);
    float *Os = reinterpret_cast<float *>(attn_smem + L::FWD_O);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int qb = nqb - 1 - (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;  // row t of the head's q at q_g + t * C3
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int q0 = qb * ATT_BQ;

    attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
    for (int i = threadIdx.x; i < ATT_BQ * L::LDO; i += ATT_THREADS) Os[i] = 0.0f;

    const floatT *Qw = Qs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS;
    floatT *Pw = Ps + warp * 16 * L::LDP;
    float *Ow = Os + warp * 16 * L::LDO;
    const int r = lane >> 1, half = lane & 1;  // this lane's row within the warp's 16, and column parity
    const int t = q0 + warp * 16 + r;          // its query position
    float m_run = -INFINITY, l_run = 0.0f;     // identical in lanes 2r and 2r+1
    AttnWarpAcc<floatT, HS> acc;

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K, V (and Q, O are initialised)
        attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
        __syncthreads();
        // On the diagonal tile (k0 == q0) warp w's rows see keys j <= 16 w + 15 only: 16-blocks 0..w.
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        __syncwarp();
        // Columns >= 16 nblk of Sw were not written this step; the mask below never reads them.
        float mx = -INFINITY;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            if (t2 <= t && t2 < T) mx = fmaxf(mx, Sw[r * L::LDS + j] * scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx);
        // Every row sees key 0 in tile 0, so m_new is finite from the first tile on; the guard only keeps a
        // fully masked row (none exists here) from producing exp(-inf + inf) = NaN.
        const float alpha = (m_new == -INFINITY) ? 1.0f : expf(m_run - m_new);
        float psum = 0.0f;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            float p = 0.0f;
            if (t2 <= t && t2 < T) p = expf(Sw[r * L::LDS + j] * scale - m_new);
            psum += p;
            Pw[r * L::LDP + j] = attn_from_float<floatT>(p);  // fp32: overwrites S[r][j] just read, same lane
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
    floatT *o_g = out + (long)b * T * C + h * hs;
    for (int rr = 0; rr < 16; rr++) {
        const float inv = __shfl_sync(0xffffffffu, inv_l, 2 * rr);
        const int tt = q0 + warp * 16 + rr;
        if (tt < T)
            for (int c = lane; c < hs; c += 32) o_g[(long)tt * C + c] = attn_from_float<floatT>(Ow[rr * L::LDO + c] * inv);
    }
}

// Backward, step 1: D[b, h, t] = sum_c dout[b, t, h*hs + c] * out[b, t, h*hs + c]. One warp per (b, h, t),
// fixed lane order and butterfly, so deterministic.
template <typename floatT>
__global__ void attn_bwd_rowdot_kernel(float *__restrict__ Dsc, const floatT *__restrict__ dout,
                                       const floatT *__restrict__ out, int B, int T, int C, int NH) {
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // = (b * NH + h) * T + t
    const int lane = threadIdx.x % 32;
    if (row >= (long)B * NH * T) return;
    const int t = row % T, h = (row / T) % NH, b = row / ((long)T * NH), hs = C / NH;
    const long off = ((long)b * T + t) * C + h * hs;
    float s = 0.0f;
    for (int c = lane; c < hs; c += 32) s += attn_to_float(dout[off + c]) * attn_to_float(out[off + c]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) Dsc[row] = s;
}

// Backward, dK and dV. Block (kb, b*NH + h) owns key rows [64 kb, 64 kb + 64); warp w owns keys
// 64 kb + 16 w + [0, 16). For each query tile qb = kb..end, with the warp's keys as rows (transposed scores):
// S^T = K Q^T, dP^T = V dout^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D), then
// dV += P^T dout and dK += dS^T Q (times scale at the end). On the diagonal tile warp w only sees queries
// i >= 16 w: 16-blocks w..3.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                     const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnSmem<floatT, HS>;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::BWD_Q);
    floatT *dOs = reinterpret_cast<floatT *>(attn_smem + L::BWD_DO);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::BWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::BWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::BWD_S);
    float *dPs = reinterpret_cast<float *>(attn_smem + L::BWD_DP);
    floatT *Ps = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_P) : reinterpret_cast<floatT *>(Ss);
    floatT *dSs = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_DS) : reinterpret_cast<floatT *>(dPs);
    float *lse_s = reinterpret_cast<float *>(attn_smem + L::BWD_LSE);
    float *D_s = reinterpret_cast<float *>(attn_smem + L::BWD_D);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int kb = blockIdx.x, k0 = kb * ATT_BK;  // the longest loops (small kb) start first
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
    attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
    const floatT *Kw = Ks + warp * 16 * L::LDH, *Vw = Vs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS, *dPw = dPs + warp * 16 * L::LDS;
    floatT *Pw = Ps + warp * 16 * L::LDP, *dSw = dSs + warp * 16 * L::LDP;
    AttnWarpAcc<floatT, HS> dk, dv;
    dk.zero();
    dv.zero();

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_BQ;
        __syncthreads();  // every warp is done with the previous Q, dout, lse, D (and K, V are loaded)
        attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(dOs, do_g, C, q0, T, hs);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const int tq = q0 + i;
            lse_s[i] = tq < T ? lse[(long)bh * T + tq] : 0.0f;
            D_s[i] = tq < T ? Dsc[(long)bh * T + tq] : 0.0f;
        }
        __syncthreads();
        const int nb0 = (qb == kb) ? warp : 0;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Kw, L::LDH, Qs, L::LDH, nb0, ATT_BQ / 16);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, Vw, L::LDH, dOs, L::LDH, nb0, ATT_BQ / 16);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BQ; e += 32) {
            const int jr = e / ATT_BQ, i = e % ATT_BQ;  // key row within the warp, query column
            const int key = k0 + warp * 16 + jr, tq = q0 + i;
            float p = 0.0f, ds = 0.0f;
            if (key <= tq && tq < T) {
                p = expf(Sw[jr * L::LDS + i] * scale - lse_s[i]);
                ds = p * (dPw[jr * L::LDS + i] - D_s[i]);
            }
            // fp32: P, dS overwrite the S, dP elements this lane just read
            Pw[jr * L::LDP + i] = attn_from_float<floatT>(p);
            dSw[jr * L::LDP + i] = attn_from_float<floatT>(ds);
        }
        __syncwarp();
        dv.add(Pw, L::LDP, dOs, L::LDH, nb0, ATT_BQ / 16);
        dk.add(dSw, L::LDP, Qs, L::LDH, nb0, ATT_BQ / 16);
    }
    __syncwarp();
    const int key0 = k0 + warp * 16, nrows = T - key0 < 16 ? T - key0 : 16;
    if (nrows > 0) {
        floatT *dk_g = dqkv + ((long)b * T + key0) * C3 + C + h * hs;
        dk.write(dk_g, C3, nrows, hs, scale, Sw, L::LDS);
        dv.write(dk_g + C, C3, nrows, hs, 1.0f, Sw, L::LDS);
    }
}

// Backward, dQ. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x; warp w owns
// 16 of them. For each key tile 0..qb: S = Q K^T, dP = dout V^T, dS = P (dP - D), dQ += dS K (times scale
// at the end). On the diagonal tile warp w only sees keys j <= 16 w + 15: 16-blocks 0..w.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dq_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                   const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnSmem<floatT, HS>;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::BWD_Q);
    floatT *dOs = reinterpret_cast<floatT *>(attn_smem + L::BWD_DO);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::BWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::BWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::BWD_S);
    float *dPs = reinterpret_cast<float *>(attn_smem + L::BWD_DP);
    floatT *dSs = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_DS) : reinterpret_cast<floatT *>(dPs);
    float *lse_s = reinterpret_cast<float *>(attn_smem + L::BWD_LSE);
    float *D_s = reinterpret_cast<float *>(attn_smem + L::BWD_D);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int qb = nqb - 1 - (int)blockIdx.x, q0 = qb * ATT_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
    attn_load_tile<floatT, HS, L::LDH>(dOs, do_g, C, q0, T, hs);
    for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
        const int tq = q0 + i;
        lse_s[i] = tq < T ? lse[(long)bh * T + tq] : 0.0f;
        D_s[i] = tq < T ? Dsc[(long)bh * T + tq] : 0.0f;
    }
    const floatT *Qw = Qs + warp * 16 * L::LDH, *dOw = dOs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS, *dPw = dPs + warp * 16 * L::LDS;
    floatT *dSw = dSs + warp * 16 * L::LDP;
    const float *lse_w = lse_s + warp * 16, *D_w = D_s + warp * 16;
    AttnWarpAcc<floatT, HS> dq;
    dq.zero();

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K, V (and Q, dout, lse, D are loaded)
        attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
        __syncthreads();
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, dOw, L::LDH, Vs, L::LDH, 0, nblk);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BK; e += 32) {
            const int ir = e / ATT_BK, j = e % ATT_BK;  // query row within the warp, key column
            const int tq = q0 + warp * 16 + ir, key = k0 + j;
            float ds = 0.0f;
            if (key <= tq && tq < T) {
                const float p = expf(Sw[ir * L::LDS + j] * scale - lse_w[ir]);
                ds = p * (dPw[ir * L::LDS + j] - D_w[ir]);
            }
            dSw[ir * L::LDP + j] = attn_from_float<floatT>(ds);  // fp32: overwrites the dP element just read
        }
        __syncwarp();
        dq.add(dSw, L::LDP, Ks, L::LDH, 0, nblk);
    }
    __syncwarp();
    const int row0 = q0 + warp * 16, nrows = T - row0 < 16 ? T - row0 : 16;
    if (nrows > 0) dq.write(dqkv + ((long)b * T + row0) * C3 + h * hs, C3, nrows, hs, scale, Sw, L::LDS);
}

// ---- host side ----

template <typename floatT> static const char *attn_type_name() {
    return std::is_same<floatT, float>::value ? "float" : std::is_same<floatT, __half>::value ? "half" : "bf16";
}

// Exits with a message naming the shape if the kernels cannot run it; returns the padded head size.
template <typename floatT>
static int attn_check_shape(const char *who, int B, int T, int C, int NH) {
    constexpr bool TC = sizeof(floatT) == 2;
    if (B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d T=%d C=%d NH=%d (need B, T, C, NH >= 1 and NH dividing C)\n",
                who, attn_type_name<floatT>(), B, T, C, NH);
        exit(EXIT_FAILURE);
    }
    const int hs = C / NH;
    if (hs > ATT_MAX_HS || (TC && hs % 16 != 0)) {
        fprintf(stderr, "%s<%s>: unsupported head size hs=%d (B=%d T=%d C=%d NH=%d): need hs <= %d%s\n", who,
                attn_type_name<floatT>(), hs, B, T, C, NH, ATT_MAX_HS,
                TC ? " and a multiple of 16 on the tensor-core path" : "");
        exit(EXIT_FAILURE);
    }
    if ((long)B * NH > 65535) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d NH=%d: B*NH = %ld exceeds the grid's y limit 65535\n", who,
                attn_type_name<floatT>(), B, NH, (long)B * NH);
        exit(EXIT_FAILURE);
    }
    return (hs + 15) / 16 * 16;
}

static void attn_check_aligned(const char *who, const char *what, const void *p) {
    if ((uintptr_t)p % 16 != 0) {
        fprintf(stderr, "%s: %s = %p is not 16-byte aligned (the 16-bit path loads rows with 16-byte vectors)\n",
                who, what, p);
        exit(EXIT_FAILURE);
    }
}

// Allows a kernel `bytes` of dynamic shared memory (all of ours exceed the default 48 KB); exits naming the
// shape if the device cannot give that much. Called before every launch: it is cheap next to the kernels
// and stays right if the current device changes.
template <typename Kernel>
static void attn_allow_smem(Kernel kernel, size_t bytes, const char *who, const char *type, int B, int T, int C, int NH) {
    int dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (bytes > (size_t)optin) {
        fprintf(stderr, "%s<%s>: shape B=%d T=%d C=%d NH=%d (hs=%d) needs %zu bytes of shared memory per block, "
                "the device allows %d\n", who, type, B, T, C, NH, C / NH, bytes, optin);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// Calls f(std::integral_constant<int, HS>) for the padded head size HS.
template <typename F>
static void attn_dispatch_hs(int hs_padded, F &&f) {
    switch (hs_padded) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 48: f(std::integral_constant<int, 48>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 80: f(std::integral_constant<int, 80>{}); break;
    case 96: f(std::integral_constant<int, 96>{}); break;
    case 112: f(std::integral_constant<int, 112>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: fprintf(stderr, "attention: internal error, padded head size %d\n", hs_padded); exit(EXIT_FAILURE);
    }
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C).
template <typename floatT>
static void attention_forward(floatT *out, float *lse, const floatT *qkv, int B, int T, int C, int NH,
                              cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attention_forward", B, T, C, NH);
    if (sizeof(floatT) == 2) attn_check_aligned("attention_forward", "qkv", qkv);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const size_t smem = AttnSmem<floatT, HS>::FWD_BYTES;
        attn_allow_smem(attn_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
        attn_fwd_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(out, lse, qkv, T, C, NH, scale);
        cudaCheck(cudaGetLastError());
    });
}

// dqkv (B, T, 3C), every element overwritten, from dout (B, T, C), qkv, out and lse of the forward.
// scratch: B*NH*T floats.
template <typename floatT>
static void attention_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                               const float *lse, int B, int T, int C, int NH, cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attention_backward", B, T, C, NH);
    if (sizeof(floatT) == 2) {
        attn_check_aligned("attention_backward", "qkv", qkv);
        attn_check_aligned("attention_backward", "dout", dout);
    }
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const long rows = (long)B * NH * T;
    attn_bwd_rowdot_kernel<floatT><<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(scratch, dout, out, B, T, C, NH);
    cudaCheck(cudaGetLastError());
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const size_t smem = AttnSmem<floatT, HS>::BWD_BYTES;
        const char *ty = attn_type_name<floatT>();
        attn_allow_smem(attn_bwd_dkdv_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
        attn_bwd_dkdv_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
        cudaCheck(cudaGetLastError());
        attn_allow_smem(attn_bwd_dq_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
        attn_bwd_dq_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
        cudaCheck(cudaGetLastError());
    });
}

// ---- end: move into train_gpt.cu --------------------------------------------------------------------------
// ============================================================================================================

// ---- dev check and benchmark ----

struct AttnShape { int B, T, C, NH; };

template <typename floatT>
static bool run_check(const AttnShape &sh, uint64_t seed) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH;
    const char *ty = attn_type_name<floatT>();
    const long nqkv = (long)B * T * 3 * C, nout = (long)B * T * C, nlse = (long)B * NH * T;
    // Inputs, rounded to floatT on the host first so that the reference sees exactly what the GPU sees.
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 2.0f, seed);
    std::vector<floatT> qkv_t(nqkv), dout_t(nout);
    for (long i = 0; i < nqkv; i++) { qkv_t[i] = attn_from_float<floatT>(qkv[i]); qkv[i] = attn_to_float(qkv_t[i]); }
    for (long i = 0; i < nout; i++) { dout_t[i] = attn_from_float<floatT>(dout[i]); dout[i] = attn_to_float(dout_t[i]); }
    std::vector<float> out_ref(nout), lse_ref(nlse), dqkv_ref(nqkv);
    attn_ref_forward(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
    attn_ref_backward(dqkv_ref.data(), dout.data(), qkv.data(), B, T, C, NH);

    floatT *d_qkv, *d_dout, *d_out, *d_dqkv, *d_dqkv2;
    float *d_lse, *d_scratch;
    cudaCheck(cudaMalloc(&d_qkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_dout, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_out, nout * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_dqkv, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_dqkv2, nqkv * sizeof(floatT)));
    cudaCheck(cudaMalloc(&d_lse, nlse * sizeof(float)));
    cudaCheck(cudaMalloc(&d_scratch, nlse * sizeof(float)));
    cudaCheck(cudaMemcpy(d_qkv, qkv_t.data(), nqkv * sizeof(floatT), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dout, dout_t.data(), nout * sizeof(floatT), cudaMemcpyHostToDevice));
    // Poison every output (all-ones bytes are NaN in all three types): anything not written shows up.
    cudaCheck(cudaMemset(d_out, 0xff, nout * sizeof(floatT)));
    cudaCheck(cudaMemset(d_lse, 0xff, nlse * sizeof(float)));
    cudaCheck(cudaMemset(d_dqkv, 0xff, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(d_dqkv2, 0x00, nqkv * sizeof(floatT)));
    cudaCheck(cudaMemset(d_scratch, 0xff, nlse * sizeof(float)));

    attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<floatT> out_t(nout), dqkv_t(nqkv), dqkv2_t(nqkv), out2_t(nout);
    std::vector<float> lse_g(nlse), lse2_g(nlse);
    cudaCheck(cudaMemcpy(out_t.data(), d_out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse_g.data(), d_lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv_t.data(), d_dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    // Determinism: forward and backward again (backward into a buffer poisoned differently), bit-compare.
    attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    attention_backward(d_dqkv2, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(out2_t.data(), d_out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse2_g.data(), d_lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv2_t.data(), d_dqkv2, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    const bool det = memcmp(out_t.data(), out2_t.data(), nout * sizeof(floatT)) == 0 &&
                     memcmp(lse_g.data(), lse2_g.data(), nlse * sizeof(float)) == 0 &&
                     memcmp(dqkv_t.data(), dqkv2_t.data(), nqkv * sizeof(floatT)) == 0;

    std::vector<float> out_g(nout), dqkv_g(nqkv);
    for (long i = 0; i < nout; i++) out_g[i] = attn_to_float(out_t[i]);
    for (long i = 0; i < nqkv; i++) dqkv_g[i] = attn_to_float(dqkv_t[i]);
    const AttnTol tol = attn_tolerance(sizeof(floatT), std::is_same<floatT, __nv_bfloat16>::value);
    const double e_out = attn_rel_err(out_g.data(), out_ref.data(), (long)B * T, C, 0, C);
    const double e_lse = attn_rel_err(lse_g.data(), lse_ref.data(), 1, nlse, 0, nlse);
    const double e_dq = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, 3L * C, 0, C);
    const double e_dk = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, 3L * C, C, C);
    const double e_dv = attn_rel_err(dqkv_g.data(), dqkv_ref.data(), (long)B * T, 3L * C, 2L * C, C);
    const bool ok = e_out <= tol.out && e_lse <= tol.lse && e_dq <= tol.dqkv && e_dk <= tol.dqkv &&
                    e_dv <= tol.dqkv && det;
    printf("%s %-5s B=%d T=%4d C=%3d NH=%2d hs=%3d | rel err out %.2e lse %.2e dq %.2e dk %.2e dv %.2e "
           "(tol %.1e/%.1e/%.1e) | deterministic %s\n",
           ok ? "PASS" : "FAIL", ty, B, T, C, NH, hs, e_out, e_lse, e_dq, e_dk, e_dv, tol.out, tol.lse, tol.dqkv,
           det ? "yes" : "NO");
    cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_dqkv));
    cudaCheck(cudaFree(d_dqkv2));
    cudaCheck(cudaFree(d_lse));
    cudaCheck(cudaFree(d_scratch));
    return ok;
}

template <typename floatT>
static void run_bench(int B, int T, int C, int NH) {
    const long nqkv = (long)B * T * 3 * C, nout = (long)B * T * C, nlse = (long)B * NH * T;
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 1.0f, 7);
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
    cudaCheck(cudaMalloc(&d_scratch, nlse * sizeof(float)));
    cudaCheck(cudaMemcpy(d_qkv, qkv_t.data(), nqkv * sizeof(floatT), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dout, dout_t.data(), nout * sizeof(floatT), cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    const int warmup = 3, iters = 20;
    const double hs = (double)C / NH;
    const double fwd_flops = 2.0 * 2.0 * B * NH * (double)T * T * hs / 2.0;  // two matmuls, causal half
    const double bwd_flops = 2.5 * fwd_flops;
    float ms_fwd = 0.0f, ms_bwd = 0.0f;
    for (int i = 0; i < warmup; i++) attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    cudaCheck(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    cudaCheck(cudaEventRecord(e1));
    cudaCheck(cudaEventSynchronize(e1));
    cudaCheck(cudaEventElapsedTime(&ms_fwd, e0, e1));
    for (int i = 0; i < warmup; i++)
        attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    cudaCheck(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++)
        attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    cudaCheck(cudaEventRecord(e1));
    cudaCheck(cudaEventSynchronize(e1));
    cudaCheck(cudaEventElapsedTime(&ms_bwd, e0, e1));
    ms_fwd /= iters;
    ms_bwd /= iters;
    printf("bench %-5s B=%2d T=%d C=%d NH=%d | forward %.3f ms %.1f TFLOP/s | backward %.3f ms %.1f TFLOP/s\n",
           attn_type_name<floatT>(), B, T, C, NH, ms_fwd, fwd_flops / (ms_fwd * 1e-3) / 1e12, ms_bwd,
           bwd_flops / (ms_bwd * 1e-3) / 1e12);
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_dqkv));
    cudaCheck(cudaFree(d_lse));
    cudaCheck(cudaFree(d_scratch));
}

int main(int argc, char **argv) {
    const bool do_check = argc < 2 || strcmp(argv[1], "check") == 0;
    const bool do_bench = argc < 2 || strcmp(argv[1], "bench") == 0;
    int dev = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    int failures = 0;
    if (do_check) {
        // The brief's three shapes, then edge cases: T = 1, three tiles with a ragged end, hs = 128, hs = 48.
        const AttnShape shapes[] = {{2, 64, 64, 4},  {1, 100, 128, 4}, {4, 1024, 768, 12}, {1, 1, 64, 2},
                                    {2, 130, 256, 2}, {1, 77, 96, 2}};
        // fp32 only: head sizes that are not multiples of 16 (zero-padded to 48 and 16).
        const AttnShape fp32_shapes[] = {{1, 50, 40, 1}, {2, 70, 24, 3}};
        uint64_t seed = 1;
        for (const AttnShape &sh : shapes) {
            failures += !run_check<float>(sh, seed);
            failures += !run_check<__nv_bfloat16>(sh, seed);
            failures += !run_check<__half>(sh, seed);
            seed++;
        }
        for (const AttnShape &sh : fp32_shapes) failures += !run_check<float>(sh, seed++);
    }
    if (do_bench) {
        run_bench<__nv_bfloat16>(8, 1024, 768, 12);
        run_bench<__nv_bfloat16>(16, 1024, 768, 12);
    }
    if (do_check) printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
