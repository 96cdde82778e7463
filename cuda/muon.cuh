// cuda/muon.cuh: Muon's arithmetic for the CUDA build (backend.h's backend_muon_*, muon.h's formulas) on device
// memory: the momentum and the step as element-wise kernels on the fp32 state; Newton-Schulz through the build's
// cuBLASLt matmuls (cuda/matmul.cuh) in the run's precision, as torch's Muon runs it in bf16 throughout: the
// iterate X is floatX (bf16 or fp16; fp32 under --precision fp32, with TF32 under --tf32), each product accumulates
// in fp32 and is rounded once to floatX, b A + c A A and a X + B X in the products' epilogues (alpha, beta). The
// Frobenius norm is a fixed-order reduction (64K chunks, each summed by one block in double, the chunks in order)
// of X's values in floatX, and in 16 bits the norm is rounded to floatX before the division, as torch's norm of a
// bf16 tensor is. With host = 1 (--offload: the update runs on the host) the host runs cpu/muon_host.h's fp32 code,
// the CPU build's.
#ifndef CUDA_MUON_CUH
#define CUDA_MUON_CUH

#include "common.cuh"
#include "matmul.cuh"        // cublaslt_matmul_scaled
#include "backend.cuh"       // X_BYTES, which ../backend.h (through muon_host.h) needs first
#include "../cpu/muon_host.h"  // the host tier's arithmetic, and MUON_NS_A, _B, _C

static int backend_has_muon(void) { return 1; }

__global__ void muon_momentum_kernel(float *b, float *u, const float *g, size_t n, float mu, float scale,
                                     int nesterov) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] * scale;
    float bi = mu * b[i] + (1.0f - mu) * gi;
    b[i] = bi;
    u[i] = nesterov ? (1.0f - mu) * gi + mu * bi : bi;
}

__global__ void muon_apply_kernel(float *p, const float *o, size_t n, float decay, float step) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * decay - step * o[i];
}

static void backend_muon_momentum(float *b, float *u, const float *g, size_t n, float mu, float scale, int nesterov, int host) {
    if (host) { muon_momentum_host(b, u, g, n, mu, scale, nesterov); return; }
    if (n == 0) return;
    LAUNCH(ceil_div((long)n, 256), 256, 0, main_stream, muon_momentum_kernel)(b, u, g, n, mu, scale, nesterov);
    launchCheck();
}

static void backend_muon_apply(float *p, const float *o, size_t n, float decay, float step, int host) {
    if (host) { muon_apply_host(p, o, n, decay, step); return; }
    if (n == 0) return;
    LAUNCH(ceil_div((long)n, 256), 256, 0, main_stream, muon_apply_kernel)(p, o, n, decay, step);
    launchCheck();
}

// ---- Newton-Schulz on the device
#define MUON_CHUNK 65536

// One 64K chunk's sum of squares per block, of x's values as the iterate holds them (rounded to T), in double.
template <typename T>
__global__ void muon_sum_squares_kernel(double *partial, const float *x, size_t n) {
    size_t c0 = (size_t)blockIdx.x * MUON_CHUNK, hi = c0 + MUON_CHUNK < n ? c0 + MUON_CHUNK : n;
    block_sum_squares<T>(partial + blockIdx.x, x, c0, hi);  // cuda/backend.cuh's, the gradient norm's
}

// The chunks summed in order; the norm max(|X|_F, 1e-7), in T's precision.
template <typename T>
__global__ void muon_norm_kernel(float *norm, const double *partial, int chunks) {
    double s = 0.0;
    for (int c = 0; c < chunks; c++) s += partial[c];
    float v = (float)sqrt(s);
    if (v < 1e-7f) v = 1e-7f;
    *norm = to_f(from_f<T>(v));
}

// dst[i] = D(src[i]), or with a norm D(S(src[i]) / norm): the iterate made from x, or the result written back.
template <typename S, typename D>
__global__ void muon_copy_kernel(D *dst, const S *src, size_t n, const float *norm) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = to_f(src[i]);
    if (norm) v = to_f(from_f<D>(v)) / *norm;
    dst[i] = from_f<D>(v);
}

// dst (C x R, row-major) = src (R x C)^T, each value as muon_copy_kernel takes it: a 32 x 32 tile a block through
// shared memory, so that both the reads and the writes run along rows.
template <typename S, typename D>
__global__ void muon_transpose_kernel(D *dst, const S *src, int R, int C, const float *norm) {
    __shared__ float tile[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    for (int k = threadIdx.y; k < 32; k += 8) {
        int r = blockIdx.y * 32 + k;
        if (r < R && c < C) {
            float v = to_f(src[(size_t)r * C + c]);
            if (norm) v = to_f(from_f<D>(v)) / *norm;
            tile[k][threadIdx.x] = v;
        }
    }
    __syncthreads();
    int r = blockIdx.y * 32 + threadIdx.x;
    for (int k = threadIdx.y; k < 32; k += 8) {
        int cc = blockIdx.x * 32 + k;
        if (cc < C && r < R) dst[(size_t)cc * R + r] = from_f<D>(tile[threadIdx.x][k]);
    }
}

// dst = src (R x C, row-major) or its transpose, converted (and with norm, divided by it).
template <typename S, typename D>
static void muon_copy(D *dst, const S *src, int R, int C, int transpose, const float *norm) {
    size_t n = (size_t)R * C;
    if (!transpose) LAUNCH(ceil_div((long)n, 256), 256, 0, main_stream, muon_copy_kernel<S, D>)(dst, src, n, norm);
    else LAUNCH(dim3(ceil_div(C, 32), ceil_div(R, 32)), dim3(32, 8), 0, main_stream,
                muon_transpose_kernel<S, D>)(dst, src, R, C, norm);
    launchCheck();
}

// x (rows x cols, fp32, device) orthogonalised in place, muon.h's formula in the run's precision. work holds
// muon_ns_workspace(rows, cols) floats: X and its next value (m x n), A and B = b A + c A A (m x m), in floatX,
// which fits where the CPU build keeps them in fp32. The norm's partial sums are in the kernels' scratch.
static void backend_muon_orthogonalize(float *x, int rows, int cols, int steps, float *work, int host) {
    if (host) { muon_orthogonalize_host(x, rows, cols, steps, work); return; }
    int tr = rows > cols, m = tr ? cols : rows, n = tr ? rows : cols;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    char *w = (char *)work;
    floatX *X = (floatX *)w, *Y = (floatX *)(w + mn * X_BYTES), *A = (floatX *)(w + 2 * mn * X_BYTES);
    floatX *B = (floatX *)(w + (2 * mn + mm) * X_BYTES);
    int chunks = ceil_div((long)mn, MUON_CHUNK);
    double *partial = (double *)scratch_get(2 * (size_t)chunks + 2);
    float *norm = (float *)(partial + chunks);
    WITH_X(
        LAUNCH(chunks, 256, 0, main_stream, muon_sum_squares_kernel<xt>)(partial, x, mn); launchCheck();
        LAUNCH(1, 1, 0, main_stream, muon_norm_kernel<xt>)(norm, partial, chunks); launchCheck();
        muon_copy<float, xt>((xt *)X, x, rows, cols, tr, norm));
    // row-major P Q is, column-major, Q^T P^T = [Q's memory] [P's memory]; X's memory read column-major is X^T (n x m)
    for (int s = 0; s < steps; s++) {
        cublaslt_matmul_scaled(A, 0, X, X, NULL, m, m, n, n, n, m, 1, 0, 1.0f, 0.0f, NO_EPILOGUE);      // X X^T
        cublaslt_matmul_scaled(B, 0, A, A, A, m, m, m, m, m, m, 0, 0, MUON_NS_C, MUON_NS_B, NO_EPILOGUE);  // bA + cAA
        cublaslt_matmul_scaled(Y, 0, X, B, X, n, m, m, n, m, n, 0, 0, 1.0f, MUON_NS_A, NO_EPILOGUE);     // aX + BX
        floatX *t = X; X = Y; Y = t;
    }
    WITH_X(muon_copy<xt, float>(x, (const xt *)X, m, n, tr, NULL));
}

#endif  // CUDA_MUON_CUH
