// cuda/norms.cuh: the block's norms in the CUDA build (train_gpt.cu, called by model.h), forward and backward: LayerNorm,
// RMSNorm and QK-norm (cpu/norms.h's names and semantics), and the deterministic column sums of the matmul's bias
// gradient (cuda/matmul.cuh), whose chunked order the norms' one-pass backwards keep for their weight gradients. N rows of C.
#ifndef CUDA_NORMS_CUH
#define CUDA_NORMS_CUH

#include "common.cuh"

// One warp per row.
template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp, const T *weight, const T *bias,
                                         int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (long)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += to_f(x[c]);
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = to_f(x[c]) - m; v += d * d; }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    T *o = out + (long)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f<T>((r * (to_f(x[c]) - m)) * to_f(weight[c]) + to_f(bias[c]));
    if (lane == 0) { mean[row] = m; rstd[row] = r; }
}

static void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight,
                              const floatX *bias, int N, int C) {
    WITH_X(LAUNCH(ceil_div(N, 8), 256, 0, main_stream, layernorm_forward_kernel<xt>)((xt *)out, mean, rstd, (const xt *)inp,
                                                                          (const xt *)weight, (const xt *)bias, N, C));
    launchCheck();
}

// Column sums over N rows, deterministic and parallel: the rows are cut into COL_CHUNKS fixed chunks;
// a (32 x 8) block sums 32 columns of one chunk (each thread a strided share of rows, then the 8
// shares in order); a second kernel adds the chunks up in order. For LayerNorm the two sums are
// dweight (dout * normalised input) and dbias (dout); for a bias, only the latter.
#define COL_CHUNKS 64
template <typename T, int V>
__global__ void column_partials_kernel(float *partial_w, float *partial_b, const T *dout, const T *inp, const float *mean,
                                       const float *rstd, int N, int C) {
    __shared__ float sw[8][32 * V + 1], sb[8][32 * V + 1];
    typedef XVec<T, V> Vec;
    int c = (blockIdx.x * 32 + threadIdx.x) * V, chunk = blockIdx.y;  // this thread's columns c .. c + V - 1
    long lo = (long)N * chunk / COL_CHUNKS, hi = (long)N * (chunk + 1) / COL_CHUNKS;
    float w[V], b[V];
#pragma unroll
    for (int k = 0; k < V; k++) w[k] = b[k] = 0.0f;
    if (c < C) {
        for (long i = lo + threadIdx.y; i < hi; i += 8) {
            const Vec d = *reinterpret_cast<const Vec *>(dout + i * C + c);
#pragma unroll
            for (int k = 0; k < V; k++) b[k] += to_f(d.v[k]);
            if (inp) {
                const Vec x = *reinterpret_cast<const Vec *>(inp + i * C + c);
                const float m = mean[i], r = rstd[i];
#pragma unroll
                for (int k = 0; k < V; k++) w[k] += (to_f(x.v[k]) - m) * r * to_f(d.v[k]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) { sw[threadIdx.y][threadIdx.x * V + k] = w[k]; sb[threadIdx.y][threadIdx.x * V + k] = b[k]; }
    __syncthreads();
    // the 8 row shares of each of the block's 32 V columns, in order; each thread finishes V of them
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 32 * V; j += 256) {
        const int cc = blockIdx.x * 32 * V + j;
        if (cc >= C) continue;
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < 8; k++) { tw += sw[k][j]; tb += sb[k][j]; }
        if (partial_w) partial_w[(long)chunk * C + cc] = tw;
        partial_b[(long)chunk * C + cc] = tb;
    }
}

__global__ void column_reduce_kernel(float *dst, const float *partial, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int k = 0; k < COL_CHUNKS; k++) s += partial[(long)k * C + c];
    dst[c] += s;
}

static void column_sums(float *dweight, float *dbias, const floatX *dout, const floatX *inp, const float *mean,
                        const float *rstd, int N, int C) {
    float *pw = scratch_get((size_t)2 * COL_CHUNKS * C), *pb = pw + (size_t)COL_CHUNKS * C;
    dim3 block(32, 8);
    WITH_X(with_vec_width<xt>(C % vec16<xt>() == 0 && aligned16(dout) && (!inp || aligned16(inp)), [&](auto width) {
        constexpr int V = decltype(width)::value;
        dim3 grid(ceil_div(C, 32 * V), COL_CHUNKS);
        LAUNCH(grid, block, 0, main_stream, column_partials_kernel<xt, V>)(dweight ? pw : NULL, pb, (const xt *)dout, (const xt *)inp, mean,
                                                       rstd, N, C);
    }));
    launchCheck();
    if (dweight) { LAUNCH(ceil_div(C, 256), 256, 0, main_stream, column_reduce_kernel)(dweight, pw, C); launchCheck(); }
    LAUNCH(ceil_div(C, 256), 256, 0, main_stream, column_reduce_kernel)(dbias, pb, C);
    launchCheck();
}

// LayerNorm's backward in one pass over dout and inp (issue 23): the blocks are column_partials_kernel's
// COL_CHUNKS chunks of rows, warp y of a block takes the chunk's rows y, y + 8, ... as that kernel's thread
// row y does, computes each row's dinp (lane l takes vectors l, l + 32, ... of the row; dinp is added to, as the
// residual's gradient), and adds the row into its own per-column sums in shared memory (sw, sb: 8 warps x C
// each); the block then adds the 8 warps' sums in order. Every sum is the same sequence of additions as the
// separate dinp and column-sum kernels it replaces made, so the results are bit for bit theirs.
template <typename T, int V>
__global__ void layernorm_backward_fused_kernel(T *dinp, float *partial_w, float *partial_b, const T *dout, const T *inp,
                                                const T *weight, const float *mean, const float *rstd, int N, int C) {
    DYNAMIC_SHARED(float, smem);
    typedef XVec<T, V> Vec;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunk = blockIdx.x;
    float *sw = smem + (size_t)warp * C, *sb = smem + (size_t)(8 + warp) * C;  // this warp's column sums
    for (int i = lane; i < C / V; i += 32)
        for (int k = 0; k < V; k++) sw[i * V + k] = sb[i * V + k] = 0.0f;
    const Vec *w = reinterpret_cast<const Vec *>(weight);
    long lo = (long)N * chunk / COL_CHUNKS, hi = (long)N * (chunk + 1) / COL_CHUNKS;
    for (long row = lo + warp; row < hi; row += 8) {
        const Vec *d = reinterpret_cast<const Vec *>(dout + row * C), *x = reinterpret_cast<const Vec *>(inp + row * C);
        Vec *di = reinterpret_cast<Vec *>(dinp + row * C);
        float m = mean[row], s = rstd[row], a = 0.0f, b = 0.0f;
        for (int i = lane; i < C / V; i += 32) {
            const Vec dv = d[i], xv = x[i], wv = w[i];
#pragma unroll
            for (int k = 0; k < V; k++) {
                float norm = (to_f(xv.v[k]) - m) * s, dnorm = to_f(wv.v[k]) * to_f(dv.v[k]);
                a += dnorm;
                b += dnorm * norm;
            }
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        for (int i = lane; i < C / V; i += 32) {
            const Vec dv = d[i], xv = x[i], wv = w[i];
            Vec o = di[i];
#pragma unroll
            for (int k = 0; k < V; k++) {
                float norm = (to_f(xv.v[k]) - m) * s, dnorm = to_f(wv.v[k]) * to_f(dv.v[k]);
                o.v[k] = from_f<T>(to_f(o.v[k]) + (dnorm - a - norm * b) * s);
                sb[i * V + k] += to_f(dv.v[k]);
                sw[i * V + k] += (to_f(xv.v[k]) - m) * s * to_f(dv.v[k]);
            }
            di[i] = o;
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < 8; k++) { tw += smem[(size_t)k * C + c]; tb += smem[(size_t)(8 + k) * C + c]; }
        partial_w[(long)chunk * C + c] = tw;
        partial_b[(long)chunk * C + c] = tb;
    }
}

// Both of LayerNorm's column sums from their chunk partials, in chunk order (column_reduce_kernel's order).
__global__ void column_reduce2_kernel(float *dw, float *db, const float *pw, const float *pb, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < COL_CHUNKS; k++) { sw += pw[(long)k * C + c]; sb += pb[(long)k * C + c]; }
    dw[c] += sw;
    db[c] += sb;
}

// Two launches where there were four, and dout and inp read once. The shared memory (64 bytes a column) is over
// the default 48 KiB from C = 769 on: the kernel is allowed the device's maximum once.
static void layernorm_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                               const floatX *weight, const float *mean, const float *rstd, int N, int C) {
    float *pw = scratch_get((size_t)2 * COL_CHUNKS * C), *pb = pw + (size_t)COL_CHUNKS * C;
    size_t smem = (size_t)16 * C * sizeof(float);
    WITH_X(with_vec_width<xt>(C % vec16<xt>() == 0 && aligned16(dinp, dout, inp, weight), [&](auto width) {
        constexpr int V = decltype(width)::value;
        static int opted = 0;  // one per instantiation
        if (smem > 48 * 1024 && !opted) {
            cudaCheck(cudaFuncSetAttribute(layernorm_backward_fused_kernel<xt, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448));
            opted = 1;
        }
        LAUNCH(COL_CHUNKS, 256, smem, main_stream, layernorm_backward_fused_kernel<xt, V>)((xt *)dinp, pw, pb, (const xt *)dout, (const xt *)inp,
                                                                             (const xt *)weight, mean, rstd, N, C);
    }));
    launchCheck();
    LAUNCH(ceil_div(C, 256), 256, 0, main_stream, column_reduce2_kernel)(dweight, dbias, pw, pb, C);
    launchCheck();
}

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
// (cpu/norms.h's qknorm_forward/backward). One warp per (row, head) of the NH + 2 KV heads. rstd (BT, NH + KV).

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

#endif  // CUDA_NORMS_CUH
