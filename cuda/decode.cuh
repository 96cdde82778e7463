// cuda/decode.cuh: attention of one new token against the key/value cache, for generation in the CUDA build
// (train_gpt.cu, called by model.h's layer_decode): GPT-2's attention_decode over the cached qkv rows, and the Llama
// family's attention_gqa_decode over a cache of the key/value heads only (one kernel for both).
#ifndef CUDA_DECODE_CUH
#define CUDA_DECODE_CUH

#include "common.cuh"

// One new token's attention over cached rows 0..t. q: the token's NH query heads (hs each, after RoPE); k and v: row 0
// of the cached keys and values, rows ld apart, key/value head j at columns j*hs; query head h reads key/value head
// h / group. One block per query head: the threads score the cached keys, the block reduces the max and the sum of
// exponentials in a fixed tree (deterministic), then each thread writes output channels as the weighted sum of the
// cached values. Fp32 throughout. One row per call, so simple beats fast; the scores of up to ATT_DECODE_MAX_T
// positions fit in shared memory.
// GPT-2's cache is the qkv activation itself (model.h's layer_decode: row t of qkv, (t + 1) rows of 3C, is the new
// token's q, k, v); the Llama family's is kcache and vcache of its KV heads only (cpu/attention.h's kv_cache_store).
#define ATT_DECODE_THREADS 128
#define ATT_DECODE_MAX_T 8192
template <typename T>
__global__ void attention_decode_kernel(T *out, const T *q_row, const T *k_g, const T *v_g, long ld, int t, int hs,
                                        int group) {
    DYNAMIC_SHARED(float, att_s);  // t + 1 scores, then ATT_DECODE_THREADS floats of reduction scratch
    float *red = att_s + t + 1;
    int h = blockIdx.x, tid = threadIdx.x;
    const T *q = q_row + h * hs, *kh = k_g + (h / group) * hs, *vh = v_g + (h / group) * hs;
    float scale = 1.0f / sqrtf((float)hs);
    float maxv = -INFINITY;
    for (int t2 = tid; t2 <= t; t2 += blockDim.x) {
        const T *k = kh + (size_t)t2 * ld;
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
        for (int t2 = 0; t2 <= t; t2++) o += att_s[t2] * to_f(vh[(size_t)t2 * ld + i]);
        out[h * hs + i] = from_f<T>(o * inv);
    }
}

static void attention_decode_launch(floatX *out, const floatX *q, const floatX *k, const floatX *v, long ld, int t, int NH,
                                    int hs, int group, const char *who) {
    if (t >= ATT_DECODE_MAX_T) internal_fault("%s: position %d beyond the %d it is built for", who, t, ATT_DECODE_MAX_T);
    size_t smem = ((size_t)t + 1 + ATT_DECODE_THREADS) * sizeof(float);
    WITH_X(LAUNCH(NH, ATT_DECODE_THREADS, smem, main_stream, attention_decode_kernel<xt>)(
        (xt *)out, (const xt *)q, (const xt *)k, (const xt *)v, ld, t, hs, group));
    launchCheck();
}

// GPT-2: qkv holds rows 0..t of (B = 1, T, 3C); row t's q against the k and v of rows 0..t.
static void attention_decode(floatX *out, const floatX *qkv, int t, int C, int NH) {
    WITH_X({
        const xt *x = (const xt *)qkv;
        attention_decode_launch(out, (const floatX *)(x + (size_t)t * 3 * C), (const floatX *)(x + C),
                                (const floatX *)(x + 2 * C), 3L * C, t, NH, C / NH, 1, "attention_decode");
    });
}

// The Llama family's cache (cpu/attention.h's): kcache and vcache (maxT, KV hd) each, only the key/value heads.
// kv_cache_store copies row t's k and v (after RoPE) out of a packed qkv row ((NH + 2 KV) hd).
static void kv_cache_store(floatX *kcache, floatX *vcache, const floatX *qkv_row, int t, int NH, int KV, int hd) {
    WITH_X({
        const size_t kvd = (size_t)KV * hd;
        const xt *r = (const xt *)qkv_row;
        cudaCheck(cudaMemcpyAsync((xt *)kcache + t * kvd, r + (size_t)NH * hd, kvd * sizeof(xt), cudaMemcpyDeviceToDevice,
                                  main_stream));
        cudaCheck(cudaMemcpyAsync((xt *)vcache + t * kvd, r + (size_t)NH * hd + kvd, kvd * sizeof(xt),
                                  cudaMemcpyDeviceToDevice, main_stream));
    });
}

// One new token (q: NH hd, after RoPE; its key and value already stored at row t) over cache rows 0..t; query head h
// reads the cache's key/value head h / (NH / KV) in place.
static void attention_gqa_decode(floatX *out, const floatX *q, const floatX *kcache, const floatX *vcache, int t, int NH,
                                 int KV, int hd) {
    attention_decode_launch(out, q, kcache, vcache, (long)KV * hd, t, NH, hd, NH / KV, "attention_gqa_decode");
}

#endif  // CUDA_DECODE_CUH
