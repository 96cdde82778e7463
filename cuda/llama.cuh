// cuda/llama.cuh: the Llama family's element-wise and normalisation kernels in the CUDA build: RMSNorm, QK-norm,
// RoPE and SwiGLU, forward and backward, in the run's precision (floatX activations and weights, fp32 statistics
// and parameter gradients). Each has cpu/llama.h's name, argument order and semantics, the CPU build's reference,
// so one model.h drives both builds; dev/cuda/kernels.cu checks each against it per precision. Grouped-query
// attention is in cuda/attention.cuh (training) and cuda/decode.cuh (the key/value-cache step); the q/k/v bias
// is the qkv matmul's bias (cuda/matmul.cuh).
//
// Layouts (cpu/llama.h's): the packed qkv row of a token is NH query heads, KV key heads, KV value heads of hd
// each; the SwiGLU input row is up_proj's H columns, then gate_proj's H. RoPE's cos and sin tables (maxT, hd/2)
// are fp32 in device memory, the caller's copy of cpu/llama.h's rope_table (computed on the host in
// transformers' steps, so that long positions get the same angles as the reference).
//
// Deterministic: no atomics; the weights' gradients are summed over fixed chunks of rows and then over the
// chunks in order (layernorm.cuh's COL_CHUNKS and column_reduce_kernel), the same bits in every run.
#ifndef CUDA_LLAMA_CUH
#define CUDA_LLAMA_CUH

#include "common.cuh"
#include "layernorm.cuh"  // COL_CHUNKS, column_reduce_kernel
#include "attention_common.cuh"  // rope_pair, RoPE's arithmetic shared with the attention kernels' loads

// ----------------------------------------------------------------------------
// RMSNorm: out = w * (x * s), s = 1 / sqrt(mean(x^2) + eps), one warp per row (layernorm_forward_kernel's
// shape). rstd (N) keeps s for the backward.
template <typename T>
__global__ void rmsnorm_forward_kernel(T *out, float *rstd, const T *inp, const T *weight, int N, int C, float eps) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (long)row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) { const float v = to_f(x[c]); ss += v * v; }
    const float s = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    T *o = out + (long)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f<T>(to_f(weight[c]) * (to_f(x[c]) * s));
    if (lane == 0) rstd[row] = s;
}

static void rmsnorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *weight, int N, int C, float eps) {
    WITH_X(LAUNCH(ceil_div(N, 8), 256, 0, main_stream, rmsnorm_forward_kernel<xt>)((xt *)out, rstd, (const xt *)inp,
                                                                                  (const xt *)weight, N, C, eps));
    launchCheck();
}

// RMSNorm's backward in one pass, layernorm_backward_fused_kernel's structure: block = one of COL_CHUNKS fixed chunks
// of rows, warp y its rows y, y + 8, ...; each row's dinp is added to (the residual stream's gradient:
// dx = s w d - x s^3 mean(w d x)), and the row's d * x * s goes into the warp's own column sums in shared memory
// (8 warps x C floats), which the block adds in warp order into its chunk's partial; column_reduce_kernel then adds
// the chunks in order into dweight.
template <typename T, int V>
__global__ void rmsnorm_backward_kernel(T *dinp, float *partial_w, const T *dout, const T *inp, const T *weight,
                                        const float *rstd, int N, int C) {
    DYNAMIC_SHARED(float, smem);
    typedef XVec<T, V> Vec;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunk = blockIdx.x;
    float *sw = smem + (size_t)warp * C;  // this warp's column sums
    for (int i = lane; i < C / V; i += 32)
        for (int k = 0; k < V; k++) sw[i * V + k] = 0.0f;
    const Vec *w = reinterpret_cast<const Vec *>(weight);
    const long lo = (long)N * chunk / COL_CHUNKS, hi = (long)N * (chunk + 1) / COL_CHUNKS;
    for (long row = lo + warp; row < hi; row += 8) {
        const Vec *d = reinterpret_cast<const Vec *>(dout + row * C), *x = reinterpret_cast<const Vec *>(inp + row * C);
        Vec *di = reinterpret_cast<Vec *>(dinp + row * C);
        const float s = rstd[row];
        float dot = 0.0f;
        for (int i = lane; i < C / V; i += 32) {
            const Vec dv = d[i], xv = x[i], wv = w[i];
#pragma unroll
            for (int k = 0; k < V; k++) dot += to_f(wv.v[k]) * to_f(dv.v[k]) * to_f(xv.v[k]);
        }
        const float kx = s * s * s * warp_sum(dot) / C;
        for (int i = lane; i < C / V; i += 32) {
            const Vec dv = d[i], xv = x[i], wv = w[i];
            Vec o = di[i];
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float xf = to_f(xv.v[k]), df = to_f(dv.v[k]);
                o.v[k] = from_f<T>(to_f(o.v[k]) + (s * (to_f(wv.v[k]) * df) - kx * xf));
                sw[i * V + k] += df * (xf * s);
            }
            di[i] = o;
        }
    }
    __syncthreads();  // every warp's column sums are complete
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float tw = 0.0f;
        for (int k = 0; k < 8; k++) tw += smem[(size_t)k * C + c];
        partial_w[(long)chunk * C + c] = tw;
    }
}

// dinp += RMSNorm'(dout); dweight += sum over rows of dout * x * rstd. The shared memory (32 bytes a column) is over
// the default 48 KiB from C = 1537 on: the kernel is allowed the device's maximum once.
static void rmsnorm_backward(floatX *dinp, float *dweight, const floatX *dout, const floatX *inp, const floatX *weight,
                             const float *rstd, int N, int C) {
    float *pw = scratch_get((size_t)COL_CHUNKS * C);
    const size_t smem = (size_t)8 * C * sizeof(float);
    WITH_X(with_vec_width<xt>(C % vec16<xt>() == 0 && aligned16(dinp, dout, inp, weight), [&](auto width) {
        constexpr int V = decltype(width)::value;
        static int opted = 0;  // one per instantiation
        if (smem > 48 * 1024 && !opted) {
            cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_kernel<xt, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448));
            opted = 1;
        }
        LAUNCH(COL_CHUNKS, 256, smem, main_stream, rmsnorm_backward_kernel<xt, V>)((xt *)dinp, pw, (const xt *)dout,
                                                                                  (const xt *)inp, (const xt *)weight, rstd, N, C);
    }));
    launchCheck();
    LAUNCH(ceil_div(C, 256), 256, 0, main_stream, column_reduce_kernel)(dweight, pw, C);
    launchCheck();
}

// ----------------------------------------------------------------------------
// QK-norm: RMSNorm over hd on each query head (q_w) and key head (k_w) of the packed qkv; value heads copied
// (cpu/llama.h's qknorm_forward/backward). One warp per (row, head) of the NH + 2 KV heads. rstd (BT, NH + KV).

template <typename T>
__global__ void qknorm_forward_kernel(T *out, float *rstd, const T *inp, const T *q_w, const T *k_w, int BT, int NH,
                                      int KV, int hd, float eps) {
    const long task = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // row * (NH + 2 KV) + head
    const int lane = threadIdx.x % 32, nh = NH + 2 * KV, nk = NH + KV;
    if (task >= (long)BT * nh) return;
    const long row = task / nh;
    const int h = (int)(task % nh);
    const T *x = inp + task * hd;  // heads are consecutive: row * nh * hd + h * hd
    T *o = out + task * hd;
    if (h >= nk) {  // a value head
        for (int c = lane; c < hd; c += 32) o[c] = x[c];
        return;
    }
    const T *w = h < NH ? q_w : k_w;
    float ss = 0.0f;
    for (int c = lane; c < hd; c += 32) { const float v = to_f(x[c]); ss += v * v; }
    const float s = 1.0f / sqrtf(warp_sum(ss) / hd + eps);
    for (int c = lane; c < hd; c += 32) o[c] = from_f<T>(to_f(w[c]) * (to_f(x[c]) * s));
    if (lane == 0) rstd[row * nk + h] = s;
}

static void qknorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *q_w, const floatX *k_w, int BT,
                           int NH, int KV, int hd, float eps) {
    const long tasks = (long)BT * (NH + 2 * KV);
    WITH_X(LAUNCH(ceil_div(tasks, 8), 256, 0, main_stream, qknorm_forward_kernel<xt>)((xt *)out, rstd, (const xt *)inp,
                                                                                     (const xt *)q_w, (const xt *)k_w, BT,
                                                                                     NH, KV, hd, eps));
    launchCheck();
}

// dinp overwritten: one warp per (row, head), the q and k heads through the norm, the v heads copied.
template <typename T>
__global__ void qknorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *q_w, const T *k_w,
                                            const float *rstd, int BT, int NH, int KV, int hd) {
    const long task = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, nh = NH + 2 * KV, nk = NH + KV;
    if (task >= (long)BT * nh) return;
    const long row = task / nh;
    const int h = (int)(task % nh);
    const T *x = inp + task * hd, *d = dout + task * hd;
    T *dx = dinp + task * hd;
    if (h >= nk) {
        for (int c = lane; c < hd; c += 32) dx[c] = d[c];
        return;
    }
    const T *w = h < NH ? q_w : k_w;
    const float s = rstd[row * nk + h];
    float dot = 0.0f;
    for (int c = lane; c < hd; c += 32) dot += to_f(w[c]) * to_f(d[c]) * to_f(x[c]);
    const float kx = s * s * s * warp_sum(dot) / hd;
    for (int c = lane; c < hd; c += 32) dx[c] = from_f<T>(s * (to_f(w[c]) * to_f(d[c])) - kx * to_f(x[c]));
}

// The weights' gradients: column j < 2 hd (q_w's hd, then k_w's), chunk blockIdx.y of the rows; thread row y of the
// (32 x 8) block sums the chunk's rows y, y + 8, ..., each over its heads in order; the 8 shares are then added
// in order (column_partials_kernel's scheme).
template <typename T>
__global__ void qknorm_dw_partials_kernel(float *partial, const T *dout, const T *inp, const float *rstd, int BT, int NH,
                                          int KV, int hd) {
    __shared__ float sw[8][33];
    const int j = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y, nk = NH + KV;
    const long R = (long)(NH + 2 * KV) * hd;
    const long lo = (long)BT * chunk / COL_CHUNKS, hi = (long)BT * (chunk + 1) / COL_CHUNKS;
    float w = 0.0f;
    if (j < 2 * hd) {
        const int is_k = j >= hd, c = is_k ? j - hd : j, h0 = is_k ? NH : 0, h1 = is_k ? nk : NH;
        for (long i = lo + threadIdx.y; i < hi; i += 8) {
            for (int h = h0; h < h1; h++) {
                const long at = i * R + (long)h * hd;
                w += to_f(dout[at + c]) * (to_f(inp[at + c]) * rstd[i * nk + h]);
            }
        }
    }
    sw[threadIdx.y][threadIdx.x] = w;
    __syncthreads();
    if (threadIdx.y == 0 && j < 2 * hd) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += sw[k][threadIdx.x];
        partial[(long)chunk * 2 * hd + j] = t;
    }
}

__global__ void qknorm_dw_reduce_kernel(float *dq_w, float *dk_w, const float *partial, int hd) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= 2 * hd) return;
    float s = 0.0f;
    for (int k = 0; k < COL_CHUNKS; k++) s += partial[(long)k * 2 * hd + j];
    if (j < hd) dq_w[j] += s;
    else dk_w[j - hd] += s;
}

static void qknorm_backward(floatX *dinp, float *dq_w, float *dk_w, const floatX *dout, const floatX *inp,
                            const floatX *q_w, const floatX *k_w, const float *rstd, int BT, int NH, int KV, int hd) {
    const long tasks = (long)BT * (NH + 2 * KV);
    float *pw = scratch_get((size_t)COL_CHUNKS * 2 * hd);
    WITH_X({
        LAUNCH(ceil_div(tasks, 8), 256, 0, main_stream, qknorm_backward_dinp_kernel<xt>)(
            (xt *)dinp, (const xt *)dout, (const xt *)inp, (const xt *)q_w, (const xt *)k_w, rstd, BT, NH, KV, hd);
        launchCheck();
        LAUNCH(dim3(ceil_div(2 * hd, 32), COL_CHUNKS), dim3(32, 8), 0, main_stream, qknorm_dw_partials_kernel<xt>)(
            pw, (const xt *)dout, (const xt *)inp, rstd, BT, NH, KV, hd);
        launchCheck();
    });
    LAUNCH(ceil_div(2 * hd, 256), 256, 0, main_stream, qknorm_dw_reduce_kernel)(dq_w, dk_w, pw, hd);
    launchCheck();
}

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

// ----------------------------------------------------------------------------
// SwiGLU over the packed fc output inp (N, 2H) = (up | gate): out (N, H) = silu(gate) * up, in one pass.
template <typename T>
__global__ void swiglu_forward_kernel(T *out, const T *inp, int N, int H) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)N * H) return;
    const long i = idx / H;
    const int j = (int)(idx % H);
    const T *up = inp + i * 2 * H;
    const float g = to_f(up[H + j]);
    out[idx] = from_f<T>((g / (1.0f + expf(-g))) * to_f(up[j]));
}

static void swiglu_forward(floatX *out, const floatX *inp, int N, int H) {
    WITH_X(LAUNCH(ceil_div((long)N * H, 256), 256, 0, main_stream, swiglu_forward_kernel<xt>)((xt *)out, (const xt *)inp, N, H));
    launchCheck();
}

// dinp (N, 2H) overwritten: d up = dout silu(g), d gate = dout up silu'(g), silu' = s (1 + g (1 - s)).
template <typename T>
__global__ void swiglu_backward_kernel(T *dinp, const T *dout, const T *inp, int N, int H) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)N * H) return;
    const long i = idx / H;
    const int j = (int)(idx % H);
    const T *up = inp + i * 2 * H;
    T *dup = dinp + i * 2 * H;
    const float g = to_f(up[H + j]), u = to_f(up[j]), d = to_f(dout[idx]), s = 1.0f / (1.0f + expf(-g));
    dup[j] = from_f<T>(d * (g * s));
    dup[H + j] = from_f<T>(d * u * (s * (1.0f + g * (1.0f - s))));
}

static void swiglu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H) {
    WITH_X(LAUNCH(ceil_div((long)N * H, 256), 256, 0, main_stream, swiglu_backward_kernel<xt>)((xt *)dinp, (const xt *)dout,
                                                                                              (const xt *)inp, N, H));
    launchCheck();
}

#endif  // CUDA_LLAMA_CUH
