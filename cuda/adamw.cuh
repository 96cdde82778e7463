// cuda/adamw.cuh: the optimizer's device kernels (launched by cuda/backend.cuh for zero.h): AdamW on fp32
// master weights, and the working weights (bf16 with stochastic rounding, fp16) made from them.
#ifndef CUDA_ADAMW_CUH
#define CUDA_ADAMW_CUH

#include "common.cuh"

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

template <int V>
__global__ void adamw_kernel(float *p, const float *g, float *mom, float *vel, size_t n, float lr, float beta1,
                             float beta2, float bc1, float bc2, float eps, float wd, float scale) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        typedef XVec<float, V> F;
        F pv = *reinterpret_cast<F *>(p + i), mv = *reinterpret_cast<F *>(mom + i), vv = *reinterpret_cast<F *>(vel + i);
        const F gv = *reinterpret_cast<const F *>(g + i);
#pragma unroll
        for (int k = 0; k < V; k++) adamw_one(pv.v[k], gv.v[k], mv.v[k], vv.v[k], lr, beta1, beta2, bc1, bc2, eps, wd, scale);
        *reinterpret_cast<F *>(p + i) = pv;
        *reinterpret_cast<F *>(mom + i) = mv;
        *reinterpret_cast<F *>(vel + i) = vv;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) adamw_one(p[k], g[k], mom[k], vel[k], lr, beta1, beta2, bc1, bc2, eps, wd, scale);
    }
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
// what is left of n one by one. The value at i depends on i alone, so the width changes no bit.
template <int V>
__global__ void weights_bf16_kernel(bf16 *dst, const float *src, size_t n, uint64_t seed) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        const XVec<float, V> x = *reinterpret_cast<const XVec<float, V> *>(src + i);
        XVec<bf16, V> o;
#pragma unroll
        for (int k = 0; k < V; k++) o.v[k] = weight_bf16(x.v[k], i + k, seed);
        *reinterpret_cast<XVec<bf16, V> *>(dst + i) = o;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) dst[k] = weight_bf16(src[k], k, seed);
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

#endif  // CUDA_ADAMW_CUH
