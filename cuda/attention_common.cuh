// cuda/attention_common.cuh: what the two flash-attention implementations (cuda/attention_fp32.cuh and
// cuda/attention_mma.cuh) share: the tile geometry, the one block set-up of their six kernels, the element
// conversions and the backward's row-dot kernel. Layouts: qkv (B, T, C + 2 KV hs) (GPT-2's (B, T, 3C) where KV = NH),
// out and dout (B, T, C), lse (B, NH, T); query head h's columns h*hs.
#ifndef CUDA_ATTENTION_COMMON_CUH
#define CUDA_ATTENTION_COMMON_CUH

#include "common.cuh"

constexpr int ATT_BQ = 64;                // query rows per block (forward, dQ) / per query tile (dK/dV)
constexpr int ATT_BK = 64;                // key rows per key tile (forward, dQ) / per block (dK/dV)
constexpr int ATT_WARPS = 4;              // each warp owns 16 consecutive rows of the block's 64
constexpr int ATT_THREADS = 32 * ATT_WARPS;
constexpr int ATT_MAX_HS = 128;
static_assert(ATT_BQ == 16 * ATT_WARPS && ATT_BK == ATT_BQ, "the diagonal-tile logic assumes square 64 tiles");

// A flash kernel's block and its place in the tensors, the set-up all six kernels share. blockIdx.y is (b, h) for
// the blocks of one query head (forward, dQ, and the 16-bit backward), or (b, kvh) for the blocks of one key/value
// head (the fp32 dK/dV kernel, kv_blocks), which walk the query heads of their group in order (set_head);
// blockIdx.x a tile of `rows` rows (64, or the 16-bit forward's 128), numbered so that the longest loops start first
// (query_tiles: from the last tile; the 16-bit backward's key tiles too, so that a block waits only on blocks of
// lower x): query tiles (forward, dQ: they walk
// the key tiles up to the diagonal) from the last, key tiles (dK/dV: they walk the query tiles from the diagonal
// to the end) from the first.
// Grouped-query attention: qkv rows hold NH query heads, then KV key heads, then KV value heads (cpu/attention.h's
// packing), C = NH hs is the query width (out, dout), C3 = C + 2 KV hs the qkv row; query head h reads key/value
// head h / (NH / KV) in place. KV = NH is GPT-2's (B, T, 3C) layout, the addresses of multi-head attention.
// q, k, v and dout point at row 0 of the head's columns (q, k, v rows C3 apart, dout rows C apart); qkv_at, k_at,
// v_at and row_at are those rows' offsets in a qkv-shaped and a (B, T, C) tensor, for the outputs dqkv and out.
template <typename floatT>
struct AttnBlock {
    int nqb, tile, bh, hs, warp, lane, b, kvh, group;  // query tiles in T, this block's tile, b * NH + h, head size
    long C, C3, T, qkv_at, row_at, k_at, v_at;
    int NH;
    const floatT *q, *k, *v, *dout;
    const floatT *qkv_g, *dout_g;
    __device__ AttnBlock(const floatT *qkv, const floatT *dout_in, int T_, int C_, int NH_, int KV, bool query_tiles,
                         int rows = ATT_BQ, bool kv_blocks = false) {
        nqb = (T_ + rows - 1) / rows;
        tile = query_tiles ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x;
        NH = NH_;
        T = T_;
        C = C_;
        hs = C_ / NH_;
        group = NH_ / KV;
        C3 = C_ + 2L * KV * hs;
        int h;
        if (kv_blocks) { b = blockIdx.y / KV; kvh = blockIdx.y % KV; h = kvh * group; }
        else { b = blockIdx.y / NH_; h = blockIdx.y % NH_; kvh = h / group; }
        k_at = (long)b * T_ * C3 + C_ + (long)kvh * hs;
        v_at = k_at + (long)KV * hs;
        k = qkv + k_at;
        v = qkv + v_at;
        qkv_g = qkv;
        dout_g = dout_in;
        set_head(h);
        warp = threadIdx.x / 32;
        lane = threadIdx.x % 32;
    }
    // Points q, dout, bh, qkv_at and row_at at query head h of the block's batch row.
    __device__ void set_head(int h) {
        bh = b * NH + h;
        qkv_at = (long)b * T * C3 + (long)h * hs;
        row_at = (long)b * T * C + (long)h * hs;
        q = qkv_g + qkv_at;
        dout = dout_g ? dout_g + row_at : nullptr;
    }
};

static inline __host__ __device__ float attn_to_float(float x) { return x; }
static inline __host__ __device__ float attn_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
static inline __host__ __device__ float attn_to_float(__half x) { return __half2float(x); }
template <typename T> inline __host__ __device__ T attn_from_float(float x);
template <> inline __host__ __device__ float attn_from_float<float>(float x) { return x; }
template <> inline __host__ __device__ __nv_bfloat16 attn_from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> inline __host__ __device__ __half attn_from_float<__half>(float x) { return __float2half(x); }

// ---- RoPE where attention reads q and k (the Llama family without QK-norm: cuda/attention.cuh's rope tables) ----
// Rotate-half (cpu/rope.h's rope_heads): the pair (x1, x2) = (x[i], x[i + hs/2]) of a q or k row at position t
// becomes (x1 c - x2 s, x2 c + x1 s), c and s row t, column i of the fp32 (maxT, hs/2) tables; `inverse` applies
// the transpose (d1 c + d2 s, d2 c - d1 s), which takes a gradient with respect to the rotated row back to the
// unrotated one. The rounding is spelled out, one product rounded (__fmul_rn, never contracted) and one fused
// into the add (fmaf), so that no compiler can contract the two call sites differently (nvcc contracts a * b - c * d
// as it sees fit, and so does g++ in C++ mode, the emulator's): cuda/rope.cuh's rope_kernel calls this too, so
// the separate pass and the rotation on load compute the same fp32 value from the same stored one, and round it
// once to the same bits.
__device__ __forceinline__ void rope_pair(float x1, float x2, float c, float s, bool inverse, float &y1, float &y2) {
    const float sn = inverse ? -s : s;  // negation is exact: x1 c + x2 s is x1 c - x2 (-s) to the bit
    y1 = fmaf(x1, c, -__fmul_rn(x2, sn));
    y2 = fmaf(x2, c, __fmul_rn(x1, sn));
}

// The backward's step 1: D[b, h, t] = sum_c dout[b, t, h*hs + c] * out[b, t, h*hs + c]. One warp per (b, h, t),
// fixed lane order and butterfly, so deterministic. It also zeroes the 16-bit backward's nzero turn counters
// (cuda/attention_mma.cuh), fewer than the rows.
template <typename floatT>
__global__ void attn_bwd_rowdot_kernel(float *__restrict__ rowdot, const floatT *__restrict__ dout,
                                       const floatT *__restrict__ out, int B, int T, int C, int NH,
                                       int *__restrict__ zero, int nzero) {
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // = (b * NH + h) * T + t
    const int lane = threadIdx.x % 32;
    if (lane == 0 && row < nzero) zero[row] = 0;
    if (row >= (long)B * NH * T) return;
    const int t = row % T, h = (row / T) % NH, b = row / ((long)T * NH), hs = C / NH;
    const long off = ((long)b * T + t) * C + h * hs;
    float s = 0.0f;
    for (int c = lane; c < hs; c += 32) s += attn_to_float(dout[off + c]) * attn_to_float(out[off + c]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) rowdot[row] = s;
}

#endif  // CUDA_ATTENTION_COMMON_CUH
