// cuda/layernorm.cuh: LayerNorm forward and backward of the CUDA build (train_gpt.cu, called by model.h), and
// the deterministic column sums of the matmul's bias gradient (cuda/matmul.cuh), whose chunked order LayerNorm's
// one-pass backward keeps for its weight and bias gradients. N rows of C channels.
#ifndef CUDA_LAYERNORM_CUH
#define CUDA_LAYERNORM_CUH

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

#endif  // CUDA_LAYERNORM_CUH
