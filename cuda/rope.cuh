// cuda/rope.cuh: rotary positions (RoPE) in the CUDA build, forward and backward in place on the q and k heads of
// the packed qkv, in the run's precision; cpu/rope.h's names and semantics. The cos and sin tables (maxT, hd/2) are
// fp32 in device memory, the caller's copy of arch/rope.h's rope_table (computed on the host in transformers' steps).
#ifndef CUDA_ROPE_CUH
#define CUDA_ROPE_CUH

#include "common.cuh"
#include "attention_common.cuh"  // rope_pair, RoPE's arithmetic shared with the attention kernels' loads

// ----------------------------------------------------------------------------
// RoPE (rotate-half, cpu/llama.h's rope_heads): in place on the q and k heads of qkv (B, T, (NH + 2 KV) hd), token
// t at position t. One thread per (row, head, i < hd/2): the pair (x_i, x_{i + hd/2}). `inverse` applies the
// transpose (the backward, on the gradient).
template <typename T>
__global__ void rope_kernel(T *qkv, const float *cos_t, const float *sin_t, int B, int T_, int NH, int KV, int hd,
                            int inverse) {
    const int h2 = hd / 2, nk = NH + KV;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x, total = (long)B * T_ * nk * h2;
    if (idx >= total) return;
    const int i = (int)(idx % h2), h = (int)((idx / h2) % nk);
    const long row = idx / ((long)h2 * nk);
    const int t = (int)(row % T_);
    T *v = qkv + row * (long)(NH + 2 * KV) * hd + (long)h * hd;
    float y1, y2;  // attention_common.cuh's rope_pair: the arithmetic of RoPE in the attention kernels' loads
    rope_pair(to_f(v[i]), to_f(v[i + h2]), cos_t[(long)t * h2 + i], sin_t[(long)t * h2 + i], inverse != 0, y1, y2);
    v[i] = from_f<T>(y1);
    v[i + h2] = from_f<T>(y2);
}

static void rope_launch(floatX *qkv, const float *cos_t, const float *sin_t, int B, int T, int NH, int KV, int hd,
                        int inverse) {
    const long total = (long)B * T * (NH + KV) * (hd / 2);
    WITH_X(LAUNCH(ceil_div(total, 256), 256, 0, main_stream, rope_kernel<xt>)((xt *)qkv, cos_t, sin_t, B, T, NH, KV, hd,
                                                                              inverse));
    launchCheck();
}
static void rope_forward(floatX *qkv, const float *cos_t, const float *sin_t, int B, int T, int NH, int KV, int hd) {
    rope_launch(qkv, cos_t, sin_t, B, T, NH, KV, hd, 0);
}
// In place on dqkv: the gradient after RoPE becomes the gradient before it.
static void rope_backward(floatX *dqkv, const float *cos_t, const float *sin_t, int B, int T, int NH, int KV, int hd) {
    rope_launch(dqkv, cos_t, sin_t, B, T, NH, KV, hd, 1);
}

#endif  // CUDA_ROPE_CUH
