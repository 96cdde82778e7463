// cuda/adamw.cuh: the optimizer's device kernels (launched by cuda/backend.cuh for zero.h): AdamW on fp32
// master weights, and the working weights (bf16 with stochastic rounding, fp16) made from them.
#ifndef CUDA_ADAMW_CUH
#define CUDA_ADAMW_CUH

#include "common.cuh"
#include "../backend/adamw_args.h"  // AdamWArgs and AdamWSegment: the step's settings and the slices the device table is made from
#include "../cpu/adamw_host.h"       // the host tier's AdamW (backend_adamw_host, cuda/backend.cuh)

__device__ __forceinline__ void adamw_one(float &p, float g, float &mom, float &vel, float lr, float beta1, float beta2,
                                          float bc1, float bc2, float eps, float wd, float scale) {
    float grad = g * scale;
    float mi = beta1 * mom + (1.0f - beta1) * grad;
    float vi = beta2 * vel + (1.0f - beta2) * grad * grad;
    mom = mi;
    vel = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    p -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
}

// The working weights from the fp32 master copy. bf16 rounds stochastically: the 16 bits that are
// dropped decide, against a hash of (seed, index), whether to round up, so small AdamW updates are
// kept on average instead of vanishing under round-to-nearest. fp16 rounds to nearest.
__device__ __forceinline__ uint32_t hash_u32(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (uint32_t)x;
}

__device__ __forceinline__ bf16 weight_bf16(float x, size_t i, uint64_t seed) {
    uint32_t bits = __float_as_uint(x);
    if (isfinite(x)) bits += hash_u32(seed ^ (i * 0x9e3779b97f4a7c15ull)) & 0xffffu;  // carries into the kept bits
    uint16_t top = (uint16_t)(bits >> 16);
    if (!isfinite(__uint_as_float(bits & 0xffff0000u)) && isfinite(x)) top = (uint16_t)(__float_as_uint(x) >> 16);
    return __ushort_as_bfloat16(top);
}

// 4 values a thread where the pointers allow (one 16-byte load, one 8-byte store); the last thread takes
// what is left of n one by one. The value at i depends on i alone (keyed index + i: src[0]'s index in its unit),
// so the width changes no bit.
template <int V>
__global__ void weights_bf16_kernel(bf16 *dst, const float *src, size_t n, size_t index, uint64_t seed) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        const XVec<float, V> x = *reinterpret_cast<const XVec<float, V> *>(src + i);
        XVec<bf16, V> o;
#pragma unroll
        for (int k = 0; k < V; k++) o.v[k] = weight_bf16(x.v[k], index + i + k, seed);
        *reinterpret_cast<XVec<bf16, V> *>(dst + i) = o;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) dst[k] = weight_bf16(src[k], index + k, seed);
    }
}

template <int V>
__global__ void weights_fp16_kernel(__half *dst, const float *src, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        const XVec<float, V> x = *reinterpret_cast<const XVec<float, V> *>(src + i);
        XVec<__half, V> o;
#pragma unroll
        for (int k = 0; k < V; k++) o.v[k] = __float2half_rn(x.v[k]);
        *reinterpret_cast<XVec<__half, V> *>(dst + i) = o;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) dst[k] = __float2half_rn(src[k]);
    }
}


// ---- the step's update in one launch (issue 23): AdamW over every tensor of a table, the working copy beside ----
// A segment of the table: one tensor's slice (backend.h's AdamWSegment), on the device. Blocks take CHUNK
// floats of one segment each; first_block says where a segment's blocks start, so a block finds its own by
// a binary search of the table, which is made once at start-up (no copy to the device per step).
#define ADAMW_CHUNK 1024  // 256 threads x 4 floats
struct AdamWSeg {
    float *p;
    const float *g;
    float *m, *v;
    void *w;                  // the working copy (bf16 or fp16) to write beside p, or NULL
    size_t n, w_index;        // floats; the index of p[0] in its unit (the working copy's rounding index)
    unsigned first_block;
    int decayed, unit, vec;   // vec: every pointer aligned for 16-byte loads (8-byte stores to w)
};

// What the update reads from the device when the verdict came from the device (update_verdict_kernel):
// the scale that multiplies the gradients (clip factor / loss scale) and whether to skip the update.
struct AdamWVerdict {
    float scale;
    int skip;
    double sum;               // the sum of squares it was decided on (for a check beside the host's)
};

// utils.h's mix_seed, on the device: model.h seeds unit u's rounding at version t with mix_seed(t * 1000003 + u)
__device__ __forceinline__ uint64_t mix_seed_device(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The working copy's element from the updated master: the same function of (value, index, seed) as
// weights_bf16_kernel / weights_fp16_kernel, so fusing changes no bit.
template <int WK> __device__ __forceinline__ void put_working(void *w, size_t k, float x, size_t index, uint64_t seed) {
    if (WK == PREC_BF16) reinterpret_cast<bf16 *>(w)[k] = weight_bf16(x, index, seed);
    else if (WK == PREC_FP16) reinterpret_cast<__half *>(w)[k] = __float2half_rn(x);
}

// WK: the working copy's precision (PREC_FP32: none). verdict: NULL, or the device's verdict, which replaces scale.
template <int WK>
__global__ void adamw_multi_kernel(const AdamWSeg *segs, int nsegs, float lr, float beta1, float beta2, float bc1,
                                   float bc2, float eps, float wd, float scale, const AdamWVerdict *verdict,
                                   uint64_t version) {
    if (verdict) {
        if (verdict->skip) return;  // a non-finite gradient: the step is skipped, the weights stay as they are
        scale = verdict->scale;
    }
    int lo = 0, hi = nsegs - 1;  // the last segment whose first block is at or before this one
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (segs[mid].first_block <= blockIdx.x) lo = mid; else hi = mid - 1;
    }
    const AdamWSeg sg = segs[lo];
    size_t i = (size_t)(blockIdx.x - sg.first_block) * ADAMW_CHUNK + threadIdx.x * 4;
    if (i >= sg.n) return;
    float d = sg.decayed ? wd : 0.0f;
    uint64_t seed = mix_seed_device(version * 1000003u + (uint64_t)sg.unit);
    if (sg.vec && i + 4 <= sg.n) {
        typedef XVec<float, 4> F;
        F pv = *reinterpret_cast<F *>(sg.p + i), mv = *reinterpret_cast<F *>(sg.m + i), vv = *reinterpret_cast<F *>(sg.v + i);
        const F gv = *reinterpret_cast<const F *>(sg.g + i);
#pragma unroll
        for (int k = 0; k < 4; k++) adamw_one(pv.v[k], gv.v[k], mv.v[k], vv.v[k], lr, beta1, beta2, bc1, bc2, eps, d, scale);
        *reinterpret_cast<F *>(sg.p + i) = pv;
        *reinterpret_cast<F *>(sg.m + i) = mv;
        *reinterpret_cast<F *>(sg.v + i) = vv;
        if (WK != PREC_FP32 && sg.w) {
            typedef XVec<uint16_t, 4> H;  // 4 bf16 or fp16 values, one 8-byte store
            H o;
#pragma unroll
            for (int k = 0; k < 4; k++) put_working<WK>(&o.v[k], 0, pv.v[k], sg.w_index + i + k, seed);
            *reinterpret_cast<H *>(reinterpret_cast<uint16_t *>(sg.w) + i) = o;
        }
    } else {
        for (size_t k = i; k < sg.n && k < i + 4; k++) {
            adamw_one(sg.p[k], sg.g[k], sg.m[k], sg.v[k], lr, beta1, beta2, bc1, bc2, eps, d, scale);
            if (WK != PREC_FP32 && sg.w) put_working<WK>(sg.w, k, sg.p[k], sg.w_index + k, seed);
        }
    }
}

// This rank's sum of squares, on the device, from the chunk partials of backend_sum_squares_start: each buffer's
// partials added in order, the buffers in order (as the host's zero_grad_sum_squares_finish does). One block;
// bufsum holds a double per buffer.
__global__ void norm_local_kernel(double *slot, double *bufsum, const double *partial, const unsigned *first_chunk, int count) {
    for (int b = threadIdx.x; b < count; b += blockDim.x) {
        double s = 0.0;
        for (unsigned c = first_chunk[b]; c < first_chunk[b + 1]; c++) s += partial[c];
        bufsum[b] = s;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    double sum = 0.0;
    for (int b = 0; b < count; b++) sum += bufsum[b];
    *slot = sum;
}

// The verdict from the ranks' sums in rank order, in the host's arithmetic: norm = (float)sqrt(sum) / loss_scale;
// not finite: skip; over clip: scale by clip / (norm + 1e-6). One thread.
__global__ void update_verdict_kernel(AdamWVerdict *out, const double *slots, int count, float loss_scale, float clip) {
    double sum = 0.0;
    for (int r = 0; r < count; r++) sum += slots[r];
    float norm = (float)sqrt(sum) / loss_scale;
    float clip_scale = clip > 0.0f && norm > clip ? clip / (norm + 1e-6f) : 1.0f;
    out->skip = !isfinite(norm);
    out->scale = clip_scale / loss_scale;
    out->sum = sum;
}

#endif  // CUDA_ADAMW_CUH
