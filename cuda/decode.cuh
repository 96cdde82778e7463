// cuda/decode.cuh: attention of one new token against the key/value cache, for generation in the CUDA build
// (train_gpt.cu, called by model.h's layer_decode).
#ifndef CUDA_DECODE_CUH
#define CUDA_DECODE_CUH

#include "common.cuh"

// model.h's layer_decode: row t of qkv ((t + 1) rows of 3C) is the new token's q, k, v; its output
// row is attention over rows 0..t. One block per head: the threads score the cached keys, the
// block reduces the max and the sum of exponentials in a fixed tree (deterministic), then each
// thread writes output channels as the weighted sum of the cached values. Fp32 throughout. One row
// per call, so simple beats fast; the scores of up to ATT_DECODE_MAX_T positions fit in shared memory.
#define ATT_DECODE_THREADS 128
#define ATT_DECODE_MAX_T 8192
template <typename T>
__global__ void attention_decode_kernel(T *out, const T *qkv, int t, int C, int NH) {
    DYNAMIC_SHARED(float, att_s);  // t + 1 scores, then ATT_DECODE_THREADS floats of reduction scratch
    float *red = att_s + t + 1;
    int h = blockIdx.x, hs = C / NH, C3 = 3 * C, tid = threadIdx.x;
    const T *q = qkv + (size_t)t * C3 + h * hs;
    float scale = 1.0f / sqrtf((float)hs);
    float maxv = -INFINITY;
    for (int t2 = tid; t2 <= t; t2 += blockDim.x) {
        const T *k = qkv + (size_t)t2 * C3 + C + h * hs;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += to_f(q[i]) * to_f(k[i]);
        dot *= scale;
        att_s[t2] = dot;
        maxv = fmaxf(maxv, dot);
    }
    red[tid] = maxv;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
        __syncthreads();
    }
    maxv = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int t2 = tid; t2 <= t; t2 += blockDim.x) {
        float e = expf(att_s[t2] - maxv);
        att_s[t2] = e;
        sum += e;
    }
    red[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int i = tid; i < hs; i += blockDim.x) {
        float o = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) o += att_s[t2] * to_f(qkv[(size_t)t2 * C3 + 2 * C + h * hs + i]);
        out[h * hs + i] = from_f<T>(o * inv);
    }
}

static void attention_decode(floatX *out, const floatX *qkv, int t, int C, int NH) {
    if (t >= ATT_DECODE_MAX_T) internal_fault("attention_decode: position %d beyond the %d it is built for", t, ATT_DECODE_MAX_T);
    size_t smem = ((size_t)t + 1 + ATT_DECODE_THREADS) * sizeof(float);
    WITH_X(LAUNCH(NH, ATT_DECODE_THREADS, smem, main_stream, attention_decode_kernel<xt>)((xt *)out, (const xt *)qkv, t, C, NH));
    launchCheck();
}

#endif  // CUDA_DECODE_CUH
