// train_gpt.cu: the CUDA build of the trainer, `./train_gpt`. It defines the same kernels as the CPU
// reference (train_gpt.c), with the same signatures, on device memory, and the same memory backend;
// the model code (model.h), ZeRO (zero.h), the pipeline (pipeline.h) and the training loop
// (trainer.h) are shared, so the two builds run the same operations in the same order.
//
// This first version computes in fp32 (matmuls through cuBLASLt with fp32 compute, no TF32) and
// favours exactness over speed: every reduction has a fixed order, so runs are deterministic and
// comparable with the CPU build to fp32 rounding. Collectives go through MPI with host staging
// (comm.h sees device pointers and stages them).
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"
#include "gpt2.h"

#define BUILD_NAME "cuda"

static void cuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) fatal_at(file, line, "CUDA: %s", cudaGetErrorString(err));
}
#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)

static void cublas_check(cublasStatus_t status, const char *file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) fatal_at(file, line, "cuBLASLt: status %d", (int)status);
}
#define cublasCheck(status) cublas_check((status), __FILE__, __LINE__)

// Launch errors surface at the next synchronising call; checking right after each launch names the kernel.
#define launchCheck() cudaCheck(cudaGetLastError())

static cublasLtHandle_t cublaslt_handle;
static void *cublaslt_workspace = NULL;
static const size_t CUBLASLT_WORKSPACE_BYTES = 32u << 20;
static float *attention_scratch = NULL;  // per (b, h, t) row sums for the attention backward
static size_t attention_scratch_floats = 0;
static int backend_ready = 0;

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// ----------------------------------------------------------------------------
// Kernels. Shapes as in train_gpt.c: B batch, T time, C channels, OC output channels, NH heads.

__global__ void encoder_forward_kernel(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * T * C) return;
    int c = idx % C, bt = idx / C, t = bt % T;
    out[idx] = wte[(long)inp[bt] * C + c] + wpe[(long)t * C + c];
}

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    long n = (long)B * T * C;
    encoder_forward_kernel<<<ceil_div(n, 256), 256>>>(out, inp, wte, wpe, B, T, C);
    launchCheck();
}

// One thread per channel walks every token in order: no two threads touch the same address, and the
// sum order is the CPU build's.
__global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int *inp, int BT, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = 0; i < BT; i++) dwte[(long)inp[i] * C + c] += dout[(long)i * C + c];
}

__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)T * C) return;
    int c = idx % C, t = idx / C;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += dout[((long)b * T + t) * C + c];
    dwpe[idx] += s;
}

static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    encoder_backward_wte_kernel<<<ceil_div(C, 128), 128>>>(dwte, dout, inp, B * T, C);
    launchCheck();
    encoder_backward_wpe_kernel<<<ceil_div((long)T * C, 256), 256>>>(dwpe, dout, B, T, C);
    launchCheck();
}

__device__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
}

__device__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
    return x;
}

// One warp per row.
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                                         const float *bias, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (long)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = x[c] - m; v += d * d; }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    float *o = out + (long)row * C;
    for (int c = lane; c < C; c += 32) o[c] = (r * (x[c] - m)) * weight[c] + bias[c];
    if (lane == 0) { mean[row] = m; rstd[row] = r; }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int N, int C) {
    layernorm_forward_kernel<<<ceil_div(N, 8), 256>>>(out, mean, rstd, inp, weight, bias, N, C);
    launchCheck();
}

__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *weight,
                                               const float *mean, const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *d = dout + (long)row * C, *x = inp + (long)row * C;
    float m = mean[row], s = rstd[row], a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
        a += dnorm;
        b += dnorm * norm;
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    float *di = dinp + (long)row * C;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
        di[c] += (dnorm - a - norm * b) * s;
    }
}

__global__ void layernorm_backward_params_kernel(float *dweight, float *dbias, const float *dout, const float *inp,
                                                 const float *mean, const float *rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int i = 0; i < N; i++) {
        float d = dout[(long)i * C + c];
        dw += (inp[(long)i * C + c] - mean[i]) * rstd[i] * d;
        db += d;
    }
    dweight[c] += dw;
    dbias[c] += db;
}

static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int N, int C) {
    layernorm_backward_dinp_kernel<<<ceil_div(N, 8), 256>>>(dinp, dout, inp, weight, mean, rstd, N, C);
    launchCheck();
    layernorm_backward_params_kernel<<<ceil_div(C, 128), 128>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    launchCheck();
}

// D (m x n, column-major) = op(A) op(B) + beta D, fp32 in and out, fp32 compute.
static void cublaslt_matmul(float *d, const float *a, const float *b, int m, int n, int k, int lda, int ldb, int ldd,
                            int trans_a, int trans_b, float beta) {
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, trans_a ? k : m, trans_a ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, trans_b ? n : k, trans_b ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasCheck(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, desc, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found == 0) fatal("cuBLASLt has no algorithm for a %dx%dx%d fp32 matmul (transa %d, transb %d)", m, n, k, trans_a, trans_b);
    float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(cublaslt_handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo,
                               cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, 0));
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
}

__global__ void add_bias_kernel(float *out, const float *bias, int N, int OC) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (long)N * OC) out[idx] += bias[idx % OC];
}

// Row-major out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias; in column-major terms
// out^T (OC x N) = weight^T^T ... i.e. D = op(W') inp' with W' the (C x OC) column-major view of W.
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    cublaslt_matmul(out, weight, inp, OC, N, C, C, C, OC, 1, 0, 0.0f);
    if (bias) {
        add_bias_kernel<<<ceil_div((long)N * OC, 256), 256>>>(out, bias, N, OC);
        launchCheck();
    }
}

__global__ void bias_backward_kernel(float *dbias, const float *dout, int N, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = 0.0f;
    for (int i = 0; i < N; i++) s += dout[(long)i * OC + o];
    dbias[o] += s;
}

// dinp = dout @ weight (overwritten), dweight += dout^T @ inp, dbias += column sums of dout.
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int C, int OC) {
    cublaslt_matmul(dinp, weight, dout, C, N, OC, C, OC, C, 0, 0, 0.0f);
    cublaslt_matmul(dweight, inp, dout, C, OC, N, C, OC, C, 0, 1, 1.0f);
    if (dbias) {
        bias_backward_kernel<<<ceil_div(OC, 128), 128>>>(dbias, dout, N, OC);
        launchCheck();
    }
}

// One thread per (b, h, t): the causal softmax row and the weighted sum of values.
__global__ void attention_forward_kernel(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * NH * T) return;
    int t = idx % T, h = (idx / T) % NH, b = idx / ((long)T * NH);
    int C3 = 3 * C, hs = C / NH;
    float scale = rsqrtf((float)hs);
    const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
    float *a = att + (((long)b * NH + h) * T + t) * T;
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *k = qkv + ((long)b * T + t2) * C3 + h * hs + C;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += q[i] * k[i];
        dot *= scale;
        a[t2] = dot;
        maxv = fmaxf(maxv, dot);
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxv); sum += a[t2]; }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
    for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
    float *o = out + ((long)b * T + t) * C + h * hs;
    for (int i = 0; i < hs; i++) {
        float s = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) s += a[t2] * qkv[((long)b * T + t2) * C3 + h * hs + 2 * C + i];
        o[i] = s;
    }
}

static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    long n = (long)B * NH * T;
    attention_forward_kernel<<<ceil_div(n, 128), 128>>>(out, att, qkv, B, T, C, NH);
    launchCheck();
}

// Backward in two passes so that no two threads write one address. Pass 1, per (b, h, t): the row's
// sum(a * datt) and dq. Pass 2, per (b, h, t2): dk and dv, summing over the rows t >= t2.
__global__ void attention_backward_q_kernel(float *dqkv, float *rowdot, const float *dout, const float *qkv,
                                            const float *att, int B, int T, int C, int NH) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * NH * T) return;
    int t = idx % T, h = (idx / T) % NH, b = idx / ((long)T * NH);
    int C3 = 3 * C, hs = C / NH;
    float scale = rsqrtf((float)hs);
    const float *a = att + (((long)b * NH + h) * T + t) * T;
    const float *d = dout + ((long)b * T + t) * C + h * hs;
    float dot = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *v = qkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
        float datt = 0.0f;
        for (int i = 0; i < hs; i++) datt += v[i] * d[i];
        dot += a[t2] * datt;
    }
    rowdot[idx] = dot;
    float *dq = dqkv + ((long)b * T + t) * C3 + h * hs;
    for (int i = 0; i < hs; i++) dq[i] = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *v = qkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
        const float *k = qkv + ((long)b * T + t2) * C3 + h * hs + C;
        float datt = 0.0f;
        for (int i = 0; i < hs; i++) datt += v[i] * d[i];
        float dpre = a[t2] * (datt - dot) * scale;
        for (int i = 0; i < hs; i++) dq[i] += dpre * k[i];
    }
}

__global__ void attention_backward_kv_kernel(float *dqkv, const float *rowdot, const float *dout, const float *qkv,
                                             const float *att, int B, int T, int C, int NH) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * NH * T) return;
    int t2 = idx % T, h = (idx / T) % NH, b = idx / ((long)T * NH);
    int C3 = 3 * C, hs = C / NH;
    float scale = rsqrtf((float)hs);
    const float *v = qkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
    float *dk = dqkv + ((long)b * T + t2) * C3 + h * hs + C, *dv = dk + C;
    for (int i = 0; i < hs; i++) { dk[i] = 0.0f; dv[i] = 0.0f; }
    for (int t = t2; t < T; t++) {
        float a = att[(((long)b * NH + h) * T + t) * T + t2];
        const float *d = dout + ((long)b * T + t) * C + h * hs;
        const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
        float datt = 0.0f;
        for (int i = 0; i < hs; i++) datt += v[i] * d[i];
        float dpre = a * (datt - rowdot[((long)b * NH + h) * T + t]) * scale;
        for (int i = 0; i < hs; i++) { dv[i] += a * d[i]; dk[i] += dpre * q[i]; }
    }
}

static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                               int NH) {
    size_t need = (size_t)B * NH * T;
    if (need > attention_scratch_floats) {
        if (attention_scratch) cudaCheck(cudaFree(attention_scratch));
        cudaCheck(cudaMalloc(&attention_scratch, need * sizeof(float)));
        attention_scratch_floats = need;
    }
    attention_backward_q_kernel<<<ceil_div(need, 128), 128>>>(dqkv, attention_scratch, dout, qkv, att, B, T, C, NH);
    launchCheck();
    attention_backward_kv_kernel<<<ceil_div(need, 128), 128>>>(dqkv, attention_scratch, dout, qkv, att, B, T, C, NH);
    launchCheck();
}

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
__global__ void gelu_forward_kernel(float *out, const float *inp, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x)));
}

static void gelu_forward(float *out, const float *inp, long N) {
    gelu_forward_kernel<<<ceil_div(N, 256), 256>>>(out, inp, N);
    launchCheck();
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = inp[i];
    float th = tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
    gelu_backward_kernel<<<ceil_div(N, 256), 256>>>(dinp, inp, dout, N);
    launchCheck();
}

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = a[i] + b[i];
}

static void residual_forward(float *out, const float *a, const float *b, long N) {
    residual_forward_kernel<<<ceil_div(N, 256), 256>>>(out, a, b, N);
    launchCheck();
}

// One block per row: softmax over the first V columns, the row's loss, and the row replaced by
// dloss/dlogits in the same pass (no probability tensor). Block reductions in a fixed tree order.
__device__ float block_reduce(float x, int is_max) {
    __shared__ float shared[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = is_max ? warp_max(x) : warp_sum(x);
    __syncthreads();
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < nwarps ? shared[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(x) : warp_sum(x);
}

__global__ void classifier_kernel(float *logits, float *losses, const int *targets, int V, int Vp, float dloss) {
    float *row = logits + (long)blockIdx.x * Vp;
    float maxv = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) maxv = fmaxf(maxv, row[v]);
    maxv = block_reduce(maxv, 1);
    float sum = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) sum += expf(row[v] - maxv);
    sum = block_reduce(sum, 0);
    float logsum = logf(sum) + maxv;
    int y = targets[blockIdx.x];
    float ly = row[y];
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) losses[blockIdx.x] = logsum - ly;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float g = v < V ? expf(row[v] - logsum) * dloss : 0.0f;
        if (v == y) g -= dloss;
        row[v] = g;
    }
}

static void classifier_forward_backward(float *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
    classifier_kernel<<<N, 512>>>(logits, losses, targets, V, Vp, dloss);
    launchCheck();
}

// ----------------------------------------------------------------------------
// Memory backend: device memory.

static size_t backend_allocated = 0;  // model-state bytes handed out, so a run can report them beside its plan

static size_t backend_malloced = 0;   // every byte backend_malloc handed out (activations, workspace)
static void *backend_malloc(size_t bytes) {
    backend_malloced += bytes;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fatal("out of GPU memory allocating %.2f GiB (%.2f GiB free of %.2f GiB): %s", bytes / 1073741824.0,
              free_b / 1073741824.0, total_b / 1073741824.0, cudaGetErrorString(err));
    }
    cudaCheck(cudaMemset(p, 0, bytes > 0 ? bytes : 1));
    return p;
}

static void backend_free(void *p) { cudaCheck(cudaFree(p)); }
static void backend_zero(float *buf, size_t n) { cudaCheck(cudaMemset(buf, 0, n * sizeof(float))); }

static void backend_tokens_from_host(int *dst, const int *src, size_t n) {
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(int), cudaMemcpyHostToDevice));
}

static double backend_sum_losses(const float *losses, int n) {
    float *host = (float *)mallocCheck(n * sizeof(float));
    cudaCheck(cudaMemcpy(host, losses, n * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0.0;  // the CPU build's order
    for (int i = 0; i < n; i++) s += host[i];
    free(host);
    return s;
}

static const float *backend_logits_row(const float *row, int Vp) {
    static float *host = NULL;
    static int cap = 0;
    if (Vp > cap) { free(host); host = (float *)mallocCheck(Vp * sizeof(float)); cap = Vp; }
    cudaCheck(cudaMemcpy(host, row, Vp * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
}

// Sum of squares in the CPU build's fixed 64K chunks, each chunk by one block in a fixed order, the
// chunks summed in order on the host: the result does not depend on the launch.
#define NORM_CHUNK 65536
__global__ void sum_squares_kernel(double *partial, const float *x, size_t n) {
    size_t lo = (size_t)blockIdx.x * NORM_CHUNK, hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
    __shared__ double shared[256];
    double s = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * x[i];
    shared[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

static double backend_sum_squares(const float *x, size_t n) {
    if (n == 0) return 0.0;
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial_d, *partial = (double *)mallocCheck(nchunks * sizeof(double));
    cudaCheck(cudaMalloc(&partial_d, nchunks * sizeof(double)));
    sum_squares_kernel<<<(unsigned)nchunks, 256>>>(partial_d, x, n);
    launchCheck();
    cudaCheck(cudaMemcpy(partial, partial_d, nchunks * sizeof(double), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(partial_d));
    double total = 0.0;
    for (size_t i = 0; i < nchunks; i++) total += partial[i];
    free(partial);
    return total;
}

static float *backend_alloc(size_t n) {
    backend_allocated += n * sizeof(float);
    return (float *)backend_malloc(n * sizeof(float));
}
static void backend_to_host(float *host, const float *buf, size_t n) {
    cudaCheck(cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost));
}
static void backend_from_host(float *buf, const float *host, size_t n) {
    cudaCheck(cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice));
}
static void backend_copy(float *dst, const float *src, size_t n) {
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
}

__global__ void add_kernel(float *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

static void backend_add(float *dst, const float *src, size_t n) {
    if (n == 0) return;
    add_kernel<<<ceil_div((long)n, 256), 256>>>(dst, src, n);
    launchCheck();
}

__global__ void adamw_kernel(float *p, const float *g, float *mom, float *vel, size_t n, float lr, float beta1,
                             float beta2, float bc1, float bc2, float eps, float wd, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float grad = g[i] * scale;
    float mi = beta1 * mom[i] + (1.0f - beta1) * grad;
    float vi = beta2 * vel[i] + (1.0f - beta2) * grad * grad;
    mom[i] = mi;
    vel[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
}

static void backend_adamw(float *p, const float *g, float *mom, float *vel, size_t n, int decayed, const AdamWArgs *a) {
    if (n == 0) return;
    float bc1 = 1.0f - powf(a->beta1, (float)a->t), bc2 = 1.0f - powf(a->beta2, (float)a->t);
    adamw_kernel<<<ceil_div((long)n, 256), 256>>>(p, g, mom, vel, n, a->lr, a->beta1, a->beta2, bc1, bc2, a->eps,
                                                  decayed ? a->weight_decay : 0.0f, a->grad_scale);
    launchCheck();
}

// Pinned host memory for --offload optimizer, so transfers run at full speed.
static float *backend_alloc_host(size_t n) {
    backend_allocated += n * sizeof(float);
    float *p = NULL;
    cudaCheck(cudaMallocHost(&p, (n > 0 ? n : 1) * sizeof(float)));
    memset(p, 0, n * sizeof(float));
    return p;
}
static void backend_free_host(float *p) { cudaCheck(cudaFreeHost(p)); }

#include "model.h"

// Picks the GPU by node-local rank and sets up cuBLASLt; a machine without a usable GPU or driver
// stops here with one line that says so.
static void backend_init(int local_rank) {
    if (backend_ready) return;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        fprintf(stderr, "error: no usable CUDA device: %s (the CPU build, ./train_gpt_cpu, needs none)\n", cudaGetErrorString(err));
        exit(1);
    }
    if (n == 0) {
        fprintf(stderr, "error: no CUDA device found (the CPU build, ./train_gpt_cpu, needs none)\n");
        exit(1);
    }
    cudaCheck(cudaSetDevice(local_rank % n));
    cublasCheck(cublasLtCreate(&cublaslt_handle));
    cudaCheck(cudaMalloc(&cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES));
    backend_ready = 1;
}

#define PRECISION_DEFAULT "fp32"
#define PRECISIONS_BUILT "fp32"
static void backend_set_precision(const char *precision, int tf32) { (void)precision; (void)tf32; }

// The device's high-water mark of memory in use (cudaMalloc'd by us, plus cuBLASLt and the context).
static size_t backend_peak_device_bytes(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    static size_t peak = 0;
    if (total_b - free_b > peak) peak = total_b - free_b;
    return peak;
}

// Dense bf16 peak of the card, for MFU; 0 (MFU not reported) for a card we have no figure for.
static double model_peak_flops(void) {
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    if (strstr(prop.name, "H100") || strstr(prop.name, "H200")) return 989e12;
    if (strstr(prop.name, "A100")) return 312e12;
    return 0.0;
}

static const char *model_device_name(void) {
    static char name[300];
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(name, sizeof(name), "%s (sm_%d%d, %.0f GiB), fp32 kernels", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / 1073741824.0);
    return name;
}

#include "trainer.h"

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
