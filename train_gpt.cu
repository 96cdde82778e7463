// train_gpt.cu: the CUDA build of the trainer, `./train_gpt`. It defines the same kernels as the CPU
// reference (train_gpt.c), with the same names and argument order, on device memory, and the same
// memory backend; the model code (model.h), ZeRO (zero.h), the pipeline (pipeline.h) and the
// training loop (trainer.h) are shared, so the two builds run the same operations in the same order.
//
// Precision is chosen at run time (--precision): activations, their gradients and the weights the
// kernels read are `floatX`, an opaque element that each launcher turns into bf16, fp16 or float
// (WITH_X below); the parameters' master copy, their gradients and AdamW's state are always fp32,
// and every kernel accumulates in fp32. In fp32 the matmuls use fp32 compute (TF32 with --tf32)
// and the run is comparable with the CPU build to fp32 rounding. Every reduction has a fixed order
// (no atomics), so runs are deterministic and resume bit for bit.
//
// Two compilers build this file: nvcc for the GPU, and g++ with dev/cuda/emu/ (make train_gpt_emu), which runs
// the same device code on the CPU. So the code below launches every kernel through LAUNCH and declares dynamic
// shared memory through DYNAMIC_SHARED: under nvcc they are `<<<>>>` and `extern __shared__`; the emulator
// brings its own (it runs the kernel on the CPU and names it in every error). The shared headers and the tests
// ask TRAIN_GPT_CUDA, not __CUDACC__, whether they are in the CUDA build.
#ifndef TRAIN_GPT_CUDA
#define TRAIN_GPT_CUDA 1
#endif
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cublasLt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"
#include "gpt2.h"

#define BUILD_NAME "cuda"
// for --help: the attention kernels are compiled for these (padded) head sizes only
#define BUILD_EXTRA_INFO "attention head sizes 16, 32, 64, 128 (GPT-2: 64)"

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

// LAUNCH(grid, block, smem, stream, kernel)(args...) is kernel<<<grid, block, smem, stream>>>(args...).
#ifndef LAUNCH
#define LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif
// DYNAMIC_SHARED(type, name): the block's dynamic shared memory (the launch's smem bytes) as `type name[]`.
#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

// ----------------------------------------------------------------------------
// Precision. model.h sees floatX as an incomplete type, so only the launchers below can read it.

enum { PREC_FP32, PREC_BF16, PREC_FP16 };
static int x_prec = PREC_FP32;  // fp32 until backend_set_precision: the kernel tests compare with the CPU build
static size_t x_bytes = 4;
static int use_tf32 = 0;
typedef struct floatX_opaque floatX;
#define X_BYTES x_bytes
typedef __nv_bfloat16 bf16;

// Runs a statement with `xt` naming the run's element type.
#define WITH_X(...)                                                                  \
    do {                                                                             \
        switch (x_prec) {                                                            \
            case PREC_BF16: { typedef bf16 xt; __VA_ARGS__; } break;                  \
            case PREC_FP16: { typedef __half xt; __VA_ARGS__; } break;                \
            default: { typedef float xt; __VA_ARGS__; } break;                        \
        }                                                                            \
    } while (0)

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

// V consecutive values as one aligned load or store: 16 bytes (V = 16 / sizeof(T)) where the row length
// and the base pointer allow it, else V = 1. Each kernel below that uses it keeps one summation order per
// output for every V, so the vector width changes speed, not results.
template <typename T, int V>
struct alignas(sizeof(T) * V) XVec { T v[V]; };
template <typename T> constexpr int vec16() { return (int)(16 / sizeof(T)); }
static inline int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static cublasLtHandle_t cublaslt_handle;
static void *cublaslt_workspace = NULL;
static const size_t CUBLASLT_WORKSPACE_BYTES = 32u << 20;
static int backend_ready = 0;

// Scratch that kernels grow on demand: per-chunk column partials, attention's row terms, a row of
// logits in float.
static float *scratch = NULL;
static size_t scratch_floats = 0;
static float *scratch_get(size_t n) {
    if (n > scratch_floats) {
        if (scratch) cudaCheck(cudaFree(scratch));
        cudaCheck(cudaMalloc(&scratch, n * sizeof(float)));
        scratch_floats = n;
    }
    return scratch;
}

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// ----------------------------------------------------------------------------
// Kernels. Shapes as in train_gpt.c: B batch, T time, C channels, OC output channels, NH heads.

// V consecutive channels a thread (16 bytes where C and the pointers allow).
template <typename T, int V>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (idx >= (long)B * Tn * C) return;
    int c = idx % C, bt = idx / C, t = bt % Tn;
    const XVec<T, V> w = *reinterpret_cast<const XVec<T, V> *>(wte + (long)inp[bt] * C + c);
    const XVec<T, V> p = *reinterpret_cast<const XVec<T, V> *>(wpe + (long)t * C + c);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(to_f(w.v[k]) + to_f(p.v[k]));
    *reinterpret_cast<XVec<T, V> *>(out + idx) = o;
}

static void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C) {
    long n = (long)B * T * C;
    WITH_X({
        constexpr int V = vec16<xt>();
        if (C % V == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe))
            LAUNCH(ceil_div(n / V, 256), 256, 0, 0, encoder_forward_kernel<xt, V>)((xt *)out, inp, (const xt *)wte, (const xt *)wpe, B, T, C);
        else
            LAUNCH(ceil_div(n, 256), 256, 0, 0, encoder_forward_kernel<xt, 1>)((xt *)out, inp, (const xt *)wte, (const xt *)wpe, B, T, C);
    });
    launchCheck();
}

// dwte: one block per distinct token, its threads over channels, adding that token's positions in
// increasing order (the CPU build's order). The positions come grouped by token from the host.
// Positions grouped by token without leaving the device: links_kernel gives each position the next
// position holding the same token (or -1) and marks the first one; the wte kernel then has one block per
// first position walk its chain. Each token's rows are added in position order, as the CPU build adds them.
__global__ void encoder_links_kernel(int *next, int *first, const int *tokens, int BT) {
    __shared__ int tile[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int mine = i < BT ? tokens[i] : -1;
    int nx = -1, is_first = 1;
    for (int base = 0; base < BT; base += 256) {
        __syncthreads();  // the previous tile is read by every thread
        if (base + (int)threadIdx.x < BT) tile[threadIdx.x] = tokens[base + threadIdx.x];
        __syncthreads();
        const int n = BT - base < 256 ? BT - base : 256;
        for (int k = 0; k < n; k++) {
            if (tile[k] != mine) continue;
            const int j = base + k;
            if (j < i) is_first = 0;
            else if (j > i && nx < 0) nx = j;
        }
    }
    if (i < BT) { next[i] = nx; first[i] = is_first; }
}

template <typename T>
__global__ void encoder_backward_wte_kernel(float *dwte, const T *dout, const int *tokens, const int *next,
                                            const int *first, int C) {
    const int i = blockIdx.x;
    if (!first[i]) return;
    const int tok = tokens[i];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = dwte[(long)tok * C + c];
        for (int j = i; j >= 0; j = next[j]) s += to_f(dout[(long)j * C + c]);
        dwte[(long)tok * C + c] = s;
    }
}

template <typename T>
__global__ void encoder_backward_wpe_kernel(float *dwpe, const T *dout, int B, int Tn, int C) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)Tn * C) return;
    int c = idx % C, t = idx / C;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += to_f(dout[((long)b * Tn + t) * C + c]);
    dwpe[idx] += s;
}

static void encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C) {
    const int BT = B * T;
    static int *links = NULL, cap = 0;  // next and first, BT each; grows once, at the first step
    if (BT > cap) {
        if (links) cudaCheck(cudaFree(links));
        cudaCheck(cudaMalloc(&links, (size_t)2 * BT * sizeof(int)));
        cap = BT;
    }
    LAUNCH(ceil_div(BT, 256), 256, 0, 0, encoder_links_kernel)(links, links + BT, inp, BT);
    launchCheck();
    WITH_X(LAUNCH(BT, 256, 0, 0, encoder_backward_wte_kernel<xt>)(dwte, (const xt *)dout, inp, links, links + BT, C));
    launchCheck();
    WITH_X(LAUNCH(ceil_div((long)T * C, 256), 256, 0, 0, encoder_backward_wpe_kernel<xt>)(dwpe, (const xt *)dout,
                                                                                          B, T, C));
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
    WITH_X(LAUNCH(ceil_div(N, 8), 256, 0, 0, layernorm_forward_kernel<xt>)((xt *)out, mean, rstd, (const xt *)inp,
                                                                          (const xt *)weight, (const xt *)bias, N, C));
    launchCheck();
}

// One warp per row; lane l takes vectors l, l + 32, ... of the row.
template <typename T, int V>
__global__ void layernorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *weight, const float *mean,
                                               const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    typedef XVec<T, V> Vec;
    const Vec *d = reinterpret_cast<const Vec *>(dout + (long)row * C), *x = reinterpret_cast<const Vec *>(inp + (long)row * C);
    const Vec *w = reinterpret_cast<const Vec *>(weight);
    Vec *di = reinterpret_cast<Vec *>(dinp + (long)row * C);
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
        }
        di[i] = o;
    }
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
    WITH_X({
        if (C % vec16<xt>() == 0 && aligned16(dout) && (!inp || aligned16(inp))) {
            dim3 grid(ceil_div(C, 32 * vec16<xt>()), COL_CHUNKS);
            LAUNCH(grid, block, 0, 0, column_partials_kernel<xt, vec16<xt>()>)(dweight ? pw : NULL, pb, (const xt *)dout,
                                                                     (const xt *)inp, mean, rstd, N, C);
        } else {
            dim3 grid(ceil_div(C, 32), COL_CHUNKS);
            LAUNCH(grid, block, 0, 0, column_partials_kernel<xt, 1>)(dweight ? pw : NULL, pb, (const xt *)dout, (const xt *)inp, mean,
                                                           rstd, N, C);
        }
    });
    launchCheck();
    if (dweight) { LAUNCH(ceil_div(C, 256), 256, 0, 0, column_reduce_kernel)(dweight, pw, C); launchCheck(); }
    LAUNCH(ceil_div(C, 256), 256, 0, 0, column_reduce_kernel)(dbias, pb, C);
    launchCheck();
}

static void layernorm_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                               const floatX *weight, const float *mean, const float *rstd, int N, int C) {
    WITH_X({
        if (C % vec16<xt>() == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight))
            LAUNCH(ceil_div(N, 8), 256, 0, 0, layernorm_backward_dinp_kernel<xt, vec16<xt>()>)((xt *)dinp, (const xt *)dout,
                (const xt *)inp, (const xt *)weight, mean, rstd, N, C);
        else
            LAUNCH(ceil_div(N, 8), 256, 0, 0, layernorm_backward_dinp_kernel<xt, 1>)((xt *)dinp, (const xt *)dout, (const xt *)inp,
                                                                            (const xt *)weight, mean, rstd, N, C);
    });
    launchCheck();
    column_sums(dweight, dbias, dout, inp, mean, rstd, N, C);
}

// The largest power of two (up to 256) that divides a pointer: cuBLASLt must not pick a kernel that
// assumes more alignment than a buffer has.
static uint32_t ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al != 0) al >>= 1;
    return al;
}

static cudaDataType_t x_cuda_type(void) {
    return x_prec == PREC_BF16 ? CUDA_R_16BF : x_prec == PREC_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

// D (m x n, column-major) = op(A) op(B) + beta D [+ bias per row of D]. A and B are floatX; D is
// floatX, or float when d_float (weight gradients, accumulated with beta = 1). fp32 accumulation.
// A matmul's plan: descriptor, layouts and the heuristic's algorithm, made once per distinct call and
// kept (about a dozen runtime calls and a heuristic query otherwise, every matmul of every micro-batch).
// Everything that decides them is in the key; the bias pointer is the only per-call attribute.
typedef struct {
    int m, n, k, lda, ldb, ldd, trans_a, trans_b, d_float, bias, prec, tf32;
    uint32_t align[3];
} MatmulKey;
typedef struct {
    MatmulKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} MatmulPlan;
static MatmulPlan *matmul_plans = NULL;
static int matmul_nplans = 0, matmul_cap = 0;

static MatmulPlan *matmul_plan(const MatmulKey *key) {
    for (int i = 0; i < matmul_nplans; i++)
        if (memcmp(&matmul_plans[i].key, key, sizeof(*key)) == 0) return &matmul_plans[i];
    if (matmul_nplans == matmul_cap) {
        matmul_cap = matmul_cap ? 2 * matmul_cap : 64;
        matmul_plans = (MatmulPlan *)realloc(matmul_plans, matmul_cap * sizeof(MatmulPlan));
        if (!matmul_plans) fatal("out of host memory for cuBLASLt plans");
    }
    MatmulPlan *p = &matmul_plans[matmul_nplans];
    p->key = *key;
    cublasComputeType_t compute = key->prec == PREC_FP32 && key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t xt = x_cuda_type(), dt = key->d_float ? CUDA_R_32F : xt;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
    cublasOperation_t ta = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (key->bias) {  // fused into the epilogue: no separate pass over the output
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, xt, key->trans_a ? key->k : key->m, key->trans_a ? key->m : key->k, key->lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, xt, key->trans_b ? key->n : key->k, key->trans_b ? key->k : key->n, key->ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, dt, key->m, key->n, key->ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    uint32_t al[4] = {key->align[0], key->align[1], key->align[2], key->align[2]};
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // NOT_SUPPORTED is the heuristic's way of saying "no algorithm": report the shape, not a status code
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &heur,
                                                       &found);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0))
        fatal("cuBLASLt has no algorithm for a %dx%dx%d matmul (transa %d, transb %d, precision %d, alignments %u %u %u)",
              key->m, key->n, key->k, key->trans_a, key->trans_b, key->prec, al[0], al[1], al[2]);
    cublasCheck(st);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    p->algo = heur.algo;
    matmul_nplans++;
    return p;
}

// D (m x n, column-major, leading dimension ldd) = op(A) op(B) (+ bias along D's rows) + beta D.
static void cublaslt_matmul(void *d, int d_float, const floatX *a, const floatX *b, const floatX *bias, int m, int n,
                            int k, int lda, int ldb, int ldd, int trans_a, int trans_b, float beta) {
    MatmulKey key;
    memset(&key, 0, sizeof(key));  // the key is compared bytewise, padding included
    key.m = m; key.n = n; key.k = k; key.lda = lda; key.ldb = ldb; key.ldd = ldd;
    key.trans_a = trans_a; key.trans_b = trans_b; key.d_float = d_float; key.bias = bias != NULL;
    key.prec = x_prec; key.tf32 = use_tf32;
    key.align[0] = ptr_alignment(a); key.align[1] = ptr_alignment(b); key.align[2] = ptr_alignment(d);
    MatmulPlan *p = matmul_plan(&key);
    if (bias) cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(cublaslt_handle, p->desc, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld, &p->algo,
                               cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, 0));
}

// Row-major out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias. Column-major, that is
// out^T (OC x N) = W (OC x C, W's rows read as a C x OC column-major matrix, transposed) inp^T.
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C, int OC) {
    cublaslt_matmul(out, 0, weight, inp, bias, OC, N, C, C, C, OC, 1, 0, 0.0f);
}

// dinp = dout @ weight (overwritten), dweight += dout^T @ inp (fp32), dbias += column sums of dout.
static void matmul_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                            const floatX *weight, int N, int C, int OC) {
    cublaslt_matmul(dinp, 0, weight, dout, NULL, C, N, OC, C, OC, C, 0, 0, 0.0f);
    cublaslt_matmul(dweight, 1, inp, dout, NULL, C, OC, N, C, OC, C, 0, 1, 1.0f);
    if (dbias) column_sums(NULL, dbias, dout, NULL, NULL, NULL, N, OC);
}

// ---- flash attention (from dev/cuda/attention.cu) ----


constexpr int ATT_BQ = 64;                // query rows per block (forward, dQ) / per query tile (dK/dV)
constexpr int ATT_BK = 64;                // key rows per key tile (forward, dQ) / per block (dK/dV)
constexpr int ATT_WARPS = 4;              // each warp owns 16 consecutive rows of the block's 64
constexpr int ATT_THREADS = 32 * ATT_WARPS;
constexpr int ATT_MAX_HS = 128;
static_assert(ATT_BQ == 16 * ATT_WARPS && ATT_BK == ATT_BQ, "the diagonal-tile logic assumes square 64 tiles");

// Shared memory layout, per kernel, in bytes from the start of the dynamic shared memory. HS is the head
// size padded to a multiple of 16 (equal to hs on the tensor-core path; fp32 pads with zero columns).
//   floatT tiles [64][LDH] (q, k, v, dout rows); float tiles [64][LDS] (scores S, dP);
//   floatT tiles [64][LDP] (P, dS as tensor-core operands; in fp32 mode P/dS overwrite S/dP in place);
//   forward's float output accumulator [64][LDO].
// Tensor-core path: wmma needs 32-byte aligned fragment pointers and ldm a multiple of 16 bytes; the +8/+4
// element padding keeps that and staggers rows across banks. fp32 path: odd strides, so that 32 lanes
// reading 32 different rows of a tile at the same column hit 32 different banks.
template <typename floatT, int HS>
struct AttnSmem {
    static constexpr bool TC = sizeof(floatT) == 2;
    static constexpr int LDH = TC ? HS + 8 : HS + 1;
    static constexpr int LDS = TC ? ATT_BK + 4 : ATT_BK + 1;
    static constexpr int LDP = TC ? ATT_BK + 8 : LDS;
    static constexpr int LDO = TC ? HS + 4 : HS + 1;
    static constexpr size_t round128(size_t x) { return (x + 127) / 128 * 128; }
    static constexpr size_t H_TILE = round128(sizeof(floatT) * ATT_BQ * LDH);
    static constexpr size_t S_TILE = round128(sizeof(float) * ATT_BQ * LDS);
    static constexpr size_t P_TILE = TC ? round128(sizeof(floatT) * ATT_BQ * LDP) : 0;
    static constexpr size_t O_TILE = round128(sizeof(float) * ATT_BQ * LDO);
    static constexpr size_t VEC = round128(sizeof(float) * ATT_BQ);
    // forward: Q K V | S | P | O
    static constexpr size_t FWD_Q = 0, FWD_K = H_TILE, FWD_V = 2 * H_TILE, FWD_S = 3 * H_TILE;
    static constexpr size_t FWD_P = FWD_S + S_TILE, FWD_O = FWD_P + P_TILE, FWD_BYTES = FWD_O + O_TILE;
    // backward (dK/dV and dQ kernels; dQ leaves the P tile unused): Q dO K V | S dP | P dS | lse D
    static constexpr size_t BWD_Q = 0, BWD_DO = H_TILE, BWD_K = 2 * H_TILE, BWD_V = 3 * H_TILE;
    static constexpr size_t BWD_S = 4 * H_TILE, BWD_DP = BWD_S + S_TILE, BWD_P = BWD_DP + S_TILE;
    static constexpr size_t BWD_DS = BWD_P + P_TILE, BWD_LSE = BWD_DS + P_TILE, BWD_D = BWD_LSE + VEC;
    static constexpr size_t BWD_BYTES = BWD_D + VEC;
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= ATT_MAX_HS, "padded head size");
    static_assert(!TC || (LDH % 8 == 0 && LDP % 8 == 0 && LDS % 4 == 0 && LDO % 4 == 0), "wmma ldm");
    static_assert(!TC || ((16 * LDH * sizeof(floatT)) % 32 == 0 && (16 * LDP * sizeof(floatT)) % 32 == 0 &&
                          (16 * LDS * 4) % 32 == 0 && (16 * LDO * 4) % 32 == 0), "wmma 32-byte fragment alignment");
};

static inline __host__ __device__ float attn_to_float(float x) { return x; }
static inline __host__ __device__ float attn_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
static inline __host__ __device__ float attn_to_float(__half x) { return __half2float(x); }
template <typename T> inline __host__ __device__ T attn_from_float(float x);
template <> inline __host__ __device__ float attn_from_float<float>(float x) { return x; }
template <> inline __host__ __device__ __nv_bfloat16 attn_from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> inline __host__ __device__ __half attn_from_float<__half>(float x) { return __float2half(x); }

// Rows [row0, row0 + 64) of one head's hs columns into a shared tile [64][LD]. src points at row 0 of the
// head's columns, rows ld_src apart. Rows >= T, and on the fp32 path the pad columns hs..HS, are zero.
// 16-bit path: 16-byte vector loads (hs is a multiple of 16, so C is a multiple of 16 and every row start
// is 16-byte aligned given a 16-byte aligned base pointer; the launchers check the base).
template <typename floatT, int HS, int LD>
__device__ void attn_load_tile(floatT *dst, const floatT *__restrict__ src, long ld_src, int row0, int T, int hs) {
    if constexpr (sizeof(floatT) == 2) {
        constexpr int CHUNKS = HS / 8;  // 8 elements = 16 bytes
        for (int idx = threadIdx.x; idx < ATT_BQ * CHUNKS; idx += ATT_THREADS) {
            const int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (row0 + r < T) v = *reinterpret_cast<const uint4 *>(src + (long)(row0 + r) * ld_src + c);
            *reinterpret_cast<uint4 *>(dst + r * LD + c) = v;
        }
    } else {
        for (int idx = threadIdx.x; idx < ATT_BQ * HS; idx += ATT_THREADS) {
            const int r = idx / HS, c = idx % HS;
            float v = 0.0f;
            if (row0 + r < T && c < hs) v = src[(long)(row0 + r) * ld_src + c];
            dst[r * LD + c] = v;
        }
    }
}

// One warp: Cm[16][16*nb0 .. 16*nb1) = A[16][HS] . Bm[16*nb0 .. 16*nb1)[HS]^T, i.e. C[r][j] = A_r . B_j
// (both operands row-major [row][HS] tiles in shared memory; C fp32 in shared memory, row-major).
template <typename floatT, int HS>
__device__ void attn_warp_mm_nt(float *Cm, int ldc, const floatT *A, int lda, const floatT *Bm, int ldb, int nb0,
                                int nb1) {
    if constexpr (sizeof(floatT) == 2) {
        using namespace nvcuda;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, floatT, wmma::row_major> a[HS / 16];
#pragma unroll
        for (int k = 0; k < HS / 16; k++) wmma::load_matrix_sync(a[k], A + k * 16, lda);
        for (int n = nb0; n < nb1; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int k = 0; k < HS / 16; k++) {
                // B^T as a col-major K x N operand: element (d, j) at Bm[(16n + j) * ldb + 16k + d]
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatT, wmma::col_major> bf;
                wmma::load_matrix_sync(bf, Bm + n * 16 * ldb + k * 16, ldb);
                wmma::mma_sync(acc, a[k], bf, acc);
            }
            wmma::store_matrix_sync(Cm + n * 16, acc, ldc, wmma::mem_row_major);
        }
    } else {
        const int lane = threadIdx.x & 31;
        for (int j = nb0 * 16 + lane; j < nb1 * 16; j += 32) {  // lane owns columns j, all 16 rows
            float acc[16];
#pragma unroll
            for (int r = 0; r < 16; r++) acc[r] = 0.0f;
            for (int d = 0; d < HS; d++) {
                const float bv = Bm[j * ldb + d];
#pragma unroll
                for (int r = 0; r < 16; r++) acc[r] = fmaf(A[r * lda + d], bv, acc[r]);
            }
#pragma unroll
            for (int r = 0; r < 16; r++) Cm[r * ldc + j] = acc[r];
        }
    }
}

// A warp's 16 x HS fp32 accumulator: wmma fragments on the tensor-core path, per-lane registers (lane owns
// columns lane, lane + 32, ...) on the fp32 path. add(): acc += A[16][16*kb0 .. 16*kb1) . Bm[16*kb0 ..
// 16*kb1)[HS] with A a [16][lda] tile and Bm a row-major [row][HS] tile, both in shared memory.
template <typename floatT, int HS, bool TC = (sizeof(floatT) == 2)>
struct AttnWarpAcc;

template <typename floatT, int HS>
struct AttnWarpAcc<floatT, HS, true> {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f[HS / 16];
    __device__ void zero() {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::fill_fragment(f[n], 0.0f);
    }
    __device__ void load(const float *src, int ld) {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::load_matrix_sync(f[n], src + n * 16, ld, nvcuda::wmma::mem_row_major);
    }
    __device__ void store(float *dst, int ld) {
#pragma unroll
        for (int n = 0; n < HS / 16; n++) nvcuda::wmma::store_matrix_sync(dst + n * 16, f[n], ld, nvcuda::wmma::mem_row_major);
    }
    __device__ void add(const floatT *A, int lda, const floatT *Bm, int ldb, int kb0, int kb1) {
        using namespace nvcuda;
        for (int k = kb0; k < kb1; k++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatT, wmma::row_major> a;
            wmma::load_matrix_sync(a, A + k * 16, lda);
#pragma unroll
            for (int n = 0; n < HS / 16; n++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatT, wmma::row_major> bf;
                wmma::load_matrix_sync(bf, Bm + k * 16 * ldb + n * 16, ldb);
                wmma::mma_sync(f[n], a, bf, f[n]);
            }
        }
    }
    // dst[r][c] = mul * acc[r][c] for r < nrows (dst rows ld_dst apart, global memory). Goes through stage,
    // a [16][ld_stage >= 64] float tile in shared memory owned by this warp, 64 columns at a time.
    __device__ void write(floatT *dst, long ld_dst, int nrows, int hs, float mul, float *stage, int ld_stage) {
        const int lane = threadIdx.x & 31;
        (void)hs;  // == HS on this path
#pragma unroll
        for (int n0 = 0; n0 < HS / 16; n0 += 4) {
            const int nn = (HS / 16 - n0) < 4 ? (HS / 16 - n0) : 4;
#pragma unroll
            for (int n = 0; n < nn; n++)
                nvcuda::wmma::store_matrix_sync(stage + n * 16, f[n0 + n], ld_stage, nvcuda::wmma::mem_row_major);
            __syncwarp();
            for (int r = 0; r < nrows; r++)
                for (int c = lane; c < nn * 16; c += 32)
                    dst[r * ld_dst + n0 * 16 + c] = attn_from_float<floatT>(mul * stage[r * ld_stage + c]);
            __syncwarp();
        }
    }
};

template <typename floatT, int HS>
struct AttnWarpAcc<floatT, HS, false> {
    static constexpr int NQ = (HS + 31) / 32;
    float v[16][NQ];
    __device__ void zero() {
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++) v[r][q] = 0.0f;
    }
    __device__ void load(const float *src, int ld) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++) v[r][q] = (lane + 32 * q < HS) ? src[r * ld + lane + 32 * q] : 0.0f;
    }
    __device__ void store(float *dst, int ld) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (lane + 32 * q < HS) dst[r * ld + lane + 32 * q] = v[r][q];
    }
    __device__ void add(const floatT *A, int lda, const floatT *Bm, int ldb, int kb0, int kb1) {
        const int lane = threadIdx.x & 31;
        for (int k = kb0 * 16; k < kb1 * 16; k++) {
            float bv[NQ];
#pragma unroll
            for (int q = 0; q < NQ; q++) bv[q] = (lane + 32 * q < HS) ? Bm[k * ldb + lane + 32 * q] : 0.0f;
#pragma unroll
            for (int r = 0; r < 16; r++) {
                const float a = A[r * lda + k];
#pragma unroll
                for (int q = 0; q < NQ; q++) v[r][q] = fmaf(a, bv[q], v[r][q]);
            }
        }
    }
    __device__ void write(floatT *dst, long ld_dst, int nrows, int hs, float mul, float *stage, int ld_stage) {
        const int lane = threadIdx.x & 31;
        (void)stage;
        (void)ld_stage;
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int q = 0; q < NQ; q++)
                if (r < nrows && lane + 32 * q < hs) dst[r * ld_dst + lane + 32 * q] = mul * v[r][q];
    }
};

// Forward. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x (the longest rows start
// first); warp w owns rows 64 qb + 16 w + [0, 16). For each key tile 0..qb: S = Q K^T (fp32, shared), then
// per row the online softmax (lanes 2r and 2r+1 share row r, interleaved columns): running max m, running
// sum l, O *= exp(m_old - m_new), P = exp(scale S - m_new) (as floatT), O += P V. At the end out = O / l and
// lse = m + log(l).
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_fwd_kernel(floatT *__restrict__ out, float *__restrict__ lse, const floatT *__restrict__ qkv, int T, int C, int NH,
                float scale) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::FWD_Q);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::FWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::FWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::FWD_S);
    floatT *Ps = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::FWD_P) : reinterpret_cast<floatT *>(Ss);
    float *Os = reinterpret_cast<float *>(attn_smem + L::FWD_O);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int qb = nqb - 1 - (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;  // row t of the head's q at q_g + t * C3
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int q0 = qb * ATT_BQ;

    attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
    for (int i = threadIdx.x; i < ATT_BQ * L::LDO; i += ATT_THREADS) Os[i] = 0.0f;

    const floatT *Qw = Qs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS;
    floatT *Pw = Ps + warp * 16 * L::LDP;
    float *Ow = Os + warp * 16 * L::LDO;
    const int r = lane >> 1, half = lane & 1;  // this lane's row within the warp's 16, and column parity
    const int t = q0 + warp * 16 + r;          // its query position
    float m_run = -INFINITY, l_run = 0.0f;     // identical in lanes 2r and 2r+1
    AttnWarpAcc<floatT, HS> acc;

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K, V (and Q, O are initialised)
        attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
        __syncthreads();
        // On the diagonal tile (k0 == q0) warp w's rows see keys j <= 16 w + 15 only: 16-blocks 0..w.
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        __syncwarp();
        // Columns >= 16 nblk of Sw were not written this step; the mask below never reads them.
        float mx = -INFINITY;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            if (t2 <= t && t2 < T) mx = fmaxf(mx, Sw[r * L::LDS + j] * scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx);
        // Every row sees key 0 in tile 0, so m_new is finite from the first tile on; the guard only keeps a
        // fully masked row (none exists here) from producing exp(-inf + inf) = NaN.
        const float alpha = (m_new == -INFINITY) ? 1.0f : expf(m_run - m_new);
        float psum = 0.0f;
        for (int i = 0; i < ATT_BK / 2; i++) {
            const int j = half + 2 * i, t2 = k0 + j;
            float p = 0.0f;
            if (t2 <= t && t2 < T) p = expf(Sw[r * L::LDS + j] * scale - m_new);
            psum += p;
            Pw[r * L::LDP + j] = attn_from_float<floatT>(p);  // fp32: overwrites S[r][j] just read, same lane
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);  // a + b in one lane, b + a in the other: same bits
        l_run = l_run * alpha + psum;
        m_run = m_new;
        for (int c = half; c < HS; c += 2) Ow[r * L::LDO + c] *= alpha;
        __syncwarp();
        acc.load(Ow, L::LDO);
        acc.add(Pw, L::LDP, Vs, L::LDH, 0, nblk);  // P's 16-blocks >= nblk are all zero on the diagonal
        acc.store(Ow, L::LDO);
    }
    __syncwarp();
    if (half == 0 && t < T) lse[(long)bh * T + t] = m_run + logf(l_run);
    const float inv_l = 1.0f / l_run;
    floatT *o_g = out + (long)b * T * C + h * hs;
    for (int rr = 0; rr < 16; rr++) {
        const float inv = __shfl_sync(0xffffffffu, inv_l, 2 * rr);
        const int tt = q0 + warp * 16 + rr;
        if (tt < T)
            for (int c = lane; c < hs; c += 32) o_g[(long)tt * C + c] = attn_from_float<floatT>(Ow[rr * L::LDO + c] * inv);
    }
}

// Backward, step 1: D[b, h, t] = sum_c dout[b, t, h*hs + c] * out[b, t, h*hs + c]. One warp per (b, h, t),
// fixed lane order and butterfly, so deterministic.
template <typename floatT>
__global__ void attn_bwd_rowdot_kernel(float *__restrict__ Dsc, const floatT *__restrict__ dout,
                                       const floatT *__restrict__ out, int B, int T, int C, int NH) {
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // = (b * NH + h) * T + t
    const int lane = threadIdx.x % 32;
    if (row >= (long)B * NH * T) return;
    const int t = row % T, h = (row / T) % NH, b = row / ((long)T * NH), hs = C / NH;
    const long off = ((long)b * T + t) * C + h * hs;
    float s = 0.0f;
    for (int c = lane; c < hs; c += 32) s += attn_to_float(dout[off + c]) * attn_to_float(out[off + c]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) Dsc[row] = s;
}

// Backward, dK and dV. Block (kb, b*NH + h) owns key rows [64 kb, 64 kb + 64); warp w owns keys
// 64 kb + 16 w + [0, 16). For each query tile qb = kb..end, with the warp's keys as rows (transposed scores):
// S^T = K Q^T, dP^T = V dout^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D), then
// dV += P^T dout and dK += dS^T Q (times scale at the end). On the diagonal tile warp w only sees queries
// i >= 16 w: 16-blocks w..3.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                     const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::BWD_Q);
    floatT *dOs = reinterpret_cast<floatT *>(attn_smem + L::BWD_DO);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::BWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::BWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::BWD_S);
    float *dPs = reinterpret_cast<float *>(attn_smem + L::BWD_DP);
    floatT *Ps = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_P) : reinterpret_cast<floatT *>(Ss);
    floatT *dSs = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_DS) : reinterpret_cast<floatT *>(dPs);
    float *lse_s = reinterpret_cast<float *>(attn_smem + L::BWD_LSE);
    float *D_s = reinterpret_cast<float *>(attn_smem + L::BWD_D);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int kb = blockIdx.x, k0 = kb * ATT_BK;  // the longest loops (small kb) start first
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
    attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
    const floatT *Kw = Ks + warp * 16 * L::LDH, *Vw = Vs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS, *dPw = dPs + warp * 16 * L::LDS;
    floatT *Pw = Ps + warp * 16 * L::LDP, *dSw = dSs + warp * 16 * L::LDP;
    AttnWarpAcc<floatT, HS> dk, dv;
    dk.zero();
    dv.zero();

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_BQ;
        __syncthreads();  // every warp is done with the previous Q, dout, lse, D (and K, V are loaded)
        attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(dOs, do_g, C, q0, T, hs);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const int tq = q0 + i;
            lse_s[i] = tq < T ? lse[(long)bh * T + tq] : 0.0f;
            D_s[i] = tq < T ? Dsc[(long)bh * T + tq] : 0.0f;
        }
        __syncthreads();
        const int nb0 = (qb == kb) ? warp : 0;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Kw, L::LDH, Qs, L::LDH, nb0, ATT_BQ / 16);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, Vw, L::LDH, dOs, L::LDH, nb0, ATT_BQ / 16);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BQ; e += 32) {
            const int jr = e / ATT_BQ, i = e % ATT_BQ;  // key row within the warp, query column
            const int key = k0 + warp * 16 + jr, tq = q0 + i;
            float p = 0.0f, ds = 0.0f;
            if (key <= tq && tq < T) {
                p = expf(Sw[jr * L::LDS + i] * scale - lse_s[i]);
                ds = p * (dPw[jr * L::LDS + i] - D_s[i]);
            }
            // fp32: P, dS overwrite the S, dP elements this lane just read
            Pw[jr * L::LDP + i] = attn_from_float<floatT>(p);
            dSw[jr * L::LDP + i] = attn_from_float<floatT>(ds);
        }
        __syncwarp();
        dv.add(Pw, L::LDP, dOs, L::LDH, nb0, ATT_BQ / 16);
        dk.add(dSw, L::LDP, Qs, L::LDH, nb0, ATT_BQ / 16);
    }
    // no barrier: these kernels run fp32 only, whose write() goes from registers to global memory
    const int key0 = k0 + warp * 16, nrows = T - key0 < 16 ? T - key0 : 16;
    if (nrows > 0) {
        floatT *dk_g = dqkv + ((long)b * T + key0) * C3 + C + h * hs;
        dk.write(dk_g, C3, nrows, hs, scale, Sw, L::LDS);
        dv.write(dk_g + C, C3, nrows, hs, 1.0f, Sw, L::LDS);
    }
}

// Backward, dQ. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x; warp w owns
// 16 of them. For each key tile 0..qb: S = Q K^T, dP = dout V^T, dS = P (dP - D), dQ += dS K (times scale
// at the end). On the diagonal tile warp w only sees keys j <= 16 w + 15: 16-blocks 0..w.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_bwd_dq_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                   const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnSmem<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem + L::BWD_Q);
    floatT *dOs = reinterpret_cast<floatT *>(attn_smem + L::BWD_DO);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem + L::BWD_K);
    floatT *Vs = reinterpret_cast<floatT *>(attn_smem + L::BWD_V);
    float *Ss = reinterpret_cast<float *>(attn_smem + L::BWD_S);
    float *dPs = reinterpret_cast<float *>(attn_smem + L::BWD_DP);
    floatT *dSs = L::TC ? reinterpret_cast<floatT *>(attn_smem + L::BWD_DS) : reinterpret_cast<floatT *>(dPs);
    float *lse_s = reinterpret_cast<float *>(attn_smem + L::BWD_LSE);
    float *D_s = reinterpret_cast<float *>(attn_smem + L::BWD_D);

    const int nqb = (T + ATT_BQ - 1) / ATT_BQ;
    const int qb = nqb - 1 - (int)blockIdx.x, q0 = qb * ATT_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs;
    const floatT *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    attn_load_tile<floatT, HS, L::LDH>(Qs, q_g, C3, q0, T, hs);
    attn_load_tile<floatT, HS, L::LDH>(dOs, do_g, C, q0, T, hs);
    for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
        const int tq = q0 + i;
        lse_s[i] = tq < T ? lse[(long)bh * T + tq] : 0.0f;
        D_s[i] = tq < T ? Dsc[(long)bh * T + tq] : 0.0f;
    }
    const floatT *Qw = Qs + warp * 16 * L::LDH, *dOw = dOs + warp * 16 * L::LDH;
    float *Sw = Ss + warp * 16 * L::LDS, *dPw = dPs + warp * 16 * L::LDS;
    floatT *dSw = dSs + warp * 16 * L::LDP;
    const float *lse_w = lse_s + warp * 16, *D_w = D_s + warp * 16;
    AttnWarpAcc<floatT, HS> dq;
    dq.zero();

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K, V (and Q, dout, lse, D are loaded)
        attn_load_tile<floatT, HS, L::LDH>(Ks, k_g, C3, k0, T, hs);
        attn_load_tile<floatT, HS, L::LDH>(Vs, v_g, C3, k0, T, hs);
        __syncthreads();
        const int nblk = (kb == qb) ? warp + 1 : ATT_BK / 16;
        attn_warp_mm_nt<floatT, HS>(Sw, L::LDS, Qw, L::LDH, Ks, L::LDH, 0, nblk);
        attn_warp_mm_nt<floatT, HS>(dPw, L::LDS, dOw, L::LDH, Vs, L::LDH, 0, nblk);
        __syncwarp();
        for (int e = lane; e < 16 * ATT_BK; e += 32) {
            const int ir = e / ATT_BK, j = e % ATT_BK;  // query row within the warp, key column
            const int tq = q0 + warp * 16 + ir, key = k0 + j;
            float ds = 0.0f;
            if (key <= tq && tq < T) {
                const float p = expf(Sw[ir * L::LDS + j] * scale - lse_w[ir]);
                ds = p * (dPw[ir * L::LDS + j] - D_w[ir]);
            }
            dSw[ir * L::LDP + j] = attn_from_float<floatT>(ds);  // fp32: overwrites the dP element just read
        }
        __syncwarp();
        dq.add(dSw, L::LDP, Ks, L::LDH, 0, nblk);
    }
    const int row0 = q0 + warp * 16, nrows = T - row0 < 16 ? T - row0 : 16;
    if (nrows > 0) dq.write(dqkv + ((long)b * T + row0) * C3 + h * hs, C3, nrows, hs, scale, Sw, L::LDS);
}

// ---- host side ----

// ---- 16-bit attention on mma.sync: FlashAttention-2's register layout ----
// The 16-bit path keeps every score tile in registers: a warp computes its 16 rows x 64 keys of S with
// m16n8k16 tensor-core products, runs the online softmax on the accumulators, and feeds them straight
// back as the A operand of P.V (an m16n8 accumulator pair has the layout of an m16n8k16 A operand).
// Shared memory holds only operand tiles, some transposed, so that every B operand register is two
// adjacent 16-bit values of one shared row: one 32-bit load, no shuffles. fp32 runs the kernels above.
//
// Fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
// lane = 4 g + t: A (16x16): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
// a3 = A[g+8][2t+8, 2t+9]; B (16x8): b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]; C, D (16x8, fp32):
// d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1]. A register's lower-indexed value is its low half.

template <typename floatT> __device__ __forceinline__ float attn_lo(uint32_t w);
template <typename floatT> __device__ __forceinline__ float attn_hi(uint32_t w);
template <> __device__ __forceinline__ float attn_lo<bf16>(uint32_t w) { return __uint_as_float(w << 16); }
template <> __device__ __forceinline__ float attn_hi<bf16>(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
template <> __device__ __forceinline__ float attn_lo<__half>(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
template <> __device__ __forceinline__ float attn_hi<__half>(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}
__device__ __forceinline__ unsigned short attn_bits(bf16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ unsigned short attn_bits(__half x) { return __half_as_ushort(x); }
// Two values rounded to nearest into one register (one conversion instruction for the pair).
template <typename floatT> __device__ __forceinline__ uint32_t attn_pack(float lo, float hi);
template <> __device__ __forceinline__ uint32_t attn_pack<bf16>(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return (uint32_t)attn_bits(v.x) | ((uint32_t)attn_bits(v.y) << 16);
}
template <> __device__ __forceinline__ uint32_t attn_pack<__half>(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return (uint32_t)attn_bits(v.x) | ((uint32_t)attn_bits(v.y) << 16);
}
// 2^x as the hardware's approximation (one MUFU op; relative error about 2^-22, and 2^-inf = 0), where
// exp2f adds range handling around it.
__device__ __forceinline__ float attn_exp2(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}
template <typename floatT> __device__ __forceinline__ uint32_t attn_ld32(const floatT *p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

// d += A . B for one m16n8k16 tile, fp32 accumulation.
template <typename floatT>
__device__ __forceinline__ void mma_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same<floatT, __half>::value)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    // The same product from warp shuffles, for devices without mma.sync; it is also the instruction's
    // definition in plain code: each lane gathers its two rows of A and two columns of B.
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float ar[2][16], bc[2][16];
#pragma unroll
    for (int j = 0; j < 4; j++) {  // lane 4g + j holds A's rows g, g+8 at columns 2j, 2j+1 and 2j+8, 2j+9
        const uint32_t w0 = __shfl_sync(0xffffffffu, a[0], 4 * g + j), w1 = __shfl_sync(0xffffffffu, a[1], 4 * g + j);
        const uint32_t w2 = __shfl_sync(0xffffffffu, a[2], 4 * g + j), w3 = __shfl_sync(0xffffffffu, a[3], 4 * g + j);
        ar[0][2 * j] = attn_lo<floatT>(w0); ar[0][2 * j + 1] = attn_hi<floatT>(w0);
        ar[1][2 * j] = attn_lo<floatT>(w1); ar[1][2 * j + 1] = attn_hi<floatT>(w1);
        ar[0][2 * j + 8] = attn_lo<floatT>(w2); ar[0][2 * j + 9] = attn_hi<floatT>(w2);
        ar[1][2 * j + 8] = attn_lo<floatT>(w3); ar[1][2 * j + 9] = attn_hi<floatT>(w3);
#pragma unroll
        for (int c = 0; c < 2; c++) {  // lane 4n + j holds B's column n at rows 2j, 2j+1 and 2j+8, 2j+9
            const int src = 4 * (2 * t + c) + j;
            const uint32_t v0 = __shfl_sync(0xffffffffu, b[0], src), v1 = __shfl_sync(0xffffffffu, b[1], src);
            bc[c][2 * j] = attn_lo<floatT>(v0); bc[c][2 * j + 1] = attn_hi<floatT>(v0);
            bc[c][2 * j + 8] = attn_lo<floatT>(v1); bc[c][2 * j + 9] = attn_hi<floatT>(v1);
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float s = d[2 * r + c];
#pragma unroll
            for (int k = 0; k < 16; k++) s = fmaf(ar[r][k], bc[c][k], s);
            d[2 * r + c] = s;
        }
#endif
}

// Four 8x8 16-bit matrices from shared memory (PTX ldmatrix.sync.aligned.m8n8.x4.shared.b16): lanes
// 8j .. 8j+7 give the addresses of matrix j's 8 rows (16 bytes each, 16-byte aligned); lane 4g + t
// receives r[j] = matrix j's row g, columns 2t and 2t+1: one instruction for four B operand registers.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned long long p = __shfl_sync(0xffffffffu, (unsigned long long)row, 8 * j + g);
        r[j] = reinterpret_cast<const uint32_t *>(p)[t];
    }
#endif
}

// Shared tiles of the 16-bit kernels, in elements: row-major [64][LDR] (rows of q, k, v or dout) and
// transposed [HS][LDT]. Both strides are 16 bytes past a multiple of 128, so the 8 rows g = 0..7 that a
// fragment load touches start 4 banks apart and the 4 lanes t of a row fill them: no bank conflicts.
template <typename floatT, int HS>
struct AttnTc {
    static constexpr int LDR = HS + 8, LDT = ATT_BK + 8;
    static constexpr int ROW = ATT_BQ * LDR, TR = HS * LDT;
    static constexpr size_t FWD_BYTES = sizeof(floatT) * (ROW + TR);  // K (Q first), V^T
    static constexpr size_t DKDV_BYTES = sizeof(floatT) * (2 * ROW + 2 * TR) + 2 * sizeof(float) * ATT_BQ;  // Q, dout, Q^T, dout^T, lse, D
    static constexpr size_t DQ_BYTES = sizeof(floatT) * (2 * ROW + TR);  // K, V (Q, dout first), K^T
    static_assert(HS % 16 == 0 && (LDR * sizeof(floatT)) % 16 == 0 && ROW % 8 == 0 && TR % 8 == 0, "16-byte rows");
};

// Rows [row0, row0 + 64) of one head, in two halves so that the global loads of the next tile can be in
// flight while the current one is computed on: attn_tc_fetch loads a thread's share into registers,
// attn_tc_stash writes it to a row-major tile rm and/or a transposed tile tr (either may be null). Rows
// >= T and columns >= hs are zero, so a head size padded up to HS adds nothing to any product. Lanes
// take consecutive rows of one 8-column chunk: the transposed 16-bit stores of a warp then fall in 16
// consecutive words, and the row-major 16-byte stores of 8 lanes in 32 different banks.
template <int HS> struct AttnTcShare { static constexpr int N = ATT_BQ * (HS / 8) / ATT_THREADS; };
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_fetch(uint4 v[AttnTcShare<HS>::N], const floatT *__restrict__ src, long ld_src,
                                              int row0, int T, int hs) {
#pragma unroll
    for (int i = 0; i < AttnTcShare<HS>::N; i++) {
        const int idx = threadIdx.x + i * ATT_THREADS, r = idx % ATT_BQ, c = (idx / ATT_BQ) * 8;
        v[i] = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < T && c < hs) v[i] = *reinterpret_cast<const uint4 *>(src + (long)(row0 + r) * ld_src + c);
    }
}
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_stash(floatT *rm, floatT *tr, const uint4 v[AttnTcShare<HS>::N]) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int i = 0; i < AttnTcShare<HS>::N; i++) {
        const int idx = threadIdx.x + i * ATT_THREADS, r = idx % ATT_BQ, c = (idx / ATT_BQ) * 8;
        if (rm) *reinterpret_cast<uint4 *>(rm + r * L::LDR + c) = v[i];
        if (tr) {
            const floatT *e = reinterpret_cast<const floatT *>(&v[i]);
#pragma unroll
            for (int k = 0; k < 8; k++) tr[(c + k) * L::LDT + r] = e[k];
        }
    }
}
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_load(floatT *rm, floatT *tr, const floatT *__restrict__ src, long ld_src, int row0,
                                             int T, int hs) {
    uint4 v[AttnTcShare<HS>::N];
    attn_tc_fetch<floatT, HS>(v, src, ld_src, row0, T, hs);
    attn_tc_stash<floatT, HS>(rm, tr, v);
}

// A warp's 16 rows of a row-major tile as m16n8k16 A operands, HS / 16 of them.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_rows(uint32_t a[][4], const floatT *tile, int row0) {
    using L = AttnTc<floatT, HS>;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        const floatT *p = tile + (row0 + g) * L::LDR + kc * 16 + 2 * t;
        a[kc][0] = attn_ld32(p);
        a[kc][1] = attn_ld32(p + 8 * L::LDR);
        a[kc][2] = attn_ld32(p + 8);
        a[kc][3] = attn_ld32(p + 8 * L::LDR + 8);
    }
}

// B operands for the 8-row tiles n and n + 1 of a row-major shared matrix M (its rows are B's columns,
// its columns B's k), k-chunk kc: b[0], b[1] for tile n, b[2], b[3] for tile n + 1.
template <int LD, typename floatT>
__device__ __forceinline__ void attn_tc_b2(uint32_t b[4], const floatT *M, int n, int kc) {
    const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
    ldmatrix_x4(b, M + ((n + (j >> 1)) * 8 + r) * LD + kc * 16 + (j & 1) * 8);
}

// acc[n] (16 rows x 8 columns 8n..8n+7) = A . B^T for the 64 rows of a row-major tile Bm (B[k][n] =
// Bm[n][k]): the warp's scores against 64 keys, or dP against 64 rows of V. Only n < n_end (even) are
// computed; the rest are zero.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_scores(float acc[8][4], const uint32_t a[][4], const floatT *Bm, int n_end) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int n = 0; n < 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    if (n_end == 8) {  // k outermost: eight independent accumulators between dependent products
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                uint32_t b[4];
                attn_tc_b2<L::LDR>(b, Bm, n, kc);
                mma_16x8x16<floatT>(acc[n], a[kc], b);
                mma_16x8x16<floatT>(acc[n + 1], a[kc], b + 2);
            }
        return;
    }
#pragma unroll
    for (int n = 0; n < 8; n += 2) {
        if (n >= n_end) break;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t b[4];
            attn_tc_b2<L::LDR>(b, Bm, n, kc);
            mma_16x8x16<floatT>(acc[n], a[kc], b);
            mma_16x8x16<floatT>(acc[n + 1], a[kc], b + 2);
        }
    }
}

// out[HS / 8] += P . V for P given as score accumulators p[8][4] (16 rows x 64 columns, the k dimension),
// 16-column chunks [kc0, kc1), and V^T a transposed tile (Vt[d][k]).
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_pv(float out[][4], const float p[8][4], const floatT *Vt, int kc0, int kc1) {
    using L = AttnTc<floatT, HS>;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        if (kc < kc0 || kc >= kc1) continue;
        const uint32_t a[4] = {attn_pack<floatT>(p[2 * kc][0], p[2 * kc][1]), attn_pack<floatT>(p[2 * kc][2], p[2 * kc][3]),
                               attn_pack<floatT>(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                               attn_pack<floatT>(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
        for (int n = 0; n < HS / 8; n += 2) {
            uint32_t b[4];
            attn_tc_b2<L::LDT>(b, Vt, n, kc);
            mma_16x8x16<floatT>(out[n], a, b);
            mma_16x8x16<floatT>(out[n + 1], a, b + 2);
        }
    }
}

// Writes a warp's 16 x hs accumulator (times mul) to rows row[0], row[1] (this lane's g and g + 8) of dst,
// rows ld apart; rows >= T are skipped.
template <typename floatT, int HS>
__device__ __forceinline__ void attn_tc_write(floatT *dst, long ld, const float acc[][4], const int row[2], const float mul[2],
                                              int T, int hs) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (row[r] >= T) continue;
#pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            const int c = n * 8 + 2 * t;
            if (c < hs)
                *reinterpret_cast<uint32_t *>(dst + (long)row[r] * ld + c) =
                    attn_pack<floatT>(acc[n][2 * r] * mul[r], acc[n][2 * r + 1] * mul[r]);
        }
    }
}

// Forward. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x (longest rows first);
// warp w owns 16 of them. Per key tile: S = Q K^T in registers, masked and scaled into the log2 domain,
// online softmax (running max m and this lane's partial row sums l), O = O * 2^(m_old - m_new) + P V.
// At the end out = O / l and lse = (m scale log2 e + log2 l) ln 2, the natural-log logsumexp the fp32
// path keeps.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_tc_fwd_kernel(floatT *__restrict__ out, float *__restrict__ lse, const floatT *__restrict__ qkv, int T, int C, int NH,
                   float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Qs = Ks, *Vt = Ks + L::ROW;  // Q passes through K's tile
    const int nqb = (T + ATT_BQ - 1) / ATT_BQ, qb = nqb - 1 - (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs, *k_g = q_g + C, *v_g = q_g + 2 * C;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int q0 = qb * ATT_BQ, row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const float sl2 = scale * 1.4426950408889634f;

    attn_tc_load<floatT, HS>(Qs, nullptr, q_g, C3, q0, T, hs);
    __syncthreads();
    uint32_t qa[HS / 16][4];
    attn_tc_rows<floatT, HS>(qa, Qs, warp * 16);
    float o[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // m is the running max of the raw scores (scale > 0 keeps the order), so each probability is one
    // FFMA and one exp2: 2^(s scale log2 e - m scale log2 e).
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous K and V^T
        attn_tc_load<floatT, HS>(Ks, nullptr, k_g, C3, k0, T, hs);
        attn_tc_load<floatT, HS>(nullptr, Vt, v_g, C3, k0, T, hs);
        __syncthreads();
        // On the diagonal tile warp w's rows see keys <= 16 w + 15: 8-key tiles 0 .. 2w + 1, and the causal
        // mask applies; every other tile is wholly visible (keys < q0 <= the rows, and < T).
        const int n_end = kb == qb ? 2 * (warp + 1) : 8;
        float s[8][4];
        attn_tc_scores<floatT, HS>(s, qa, Ks, n_end);
        if (kb == qb) {
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (n >= n_end || k0 + n * 8 + 2 * t + (e & 1) > row[e >> 1]) s[n][e] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 8; n++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2], ms[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {  // the row's 4 lanes agree on its max; key 0 keeps it finite
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r]);
            alpha[r] = attn_exp2((m[r] - m_new) * sl2);  // 0 on the first tile, where m = -inf
            m[r] = m_new;
            ms[r] = m_new * sl2;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = attn_exp2(fmaf(s[n][e], sl2, -ms[e >> 1]));  // masked: 2^-inf = 0
                s[n][e] = p;
                l[e >> 1] += p;
            }
#pragma unroll
        for (int n = 0; n < HS / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[n][e] *= alpha[e >> 1];
        attn_tc_pv<floatT, HS>(o, s, Vt, 0, n_end / 2);
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {  // a + b equals b + a, so the 4 lanes of a row get the same bits
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = 1.0f / l[r];
        if (t == 0 && row[r] < T) lse[(long)bh * T + row[r]] = (m[r] * sl2 + log2f(l[r])) * 0.6931471805599453f;
    }
    attn_tc_write<floatT, HS>(out + (long)b * T * C + h * hs, C, o, row, inv, T, hs);
}

// Backward, dK and dV. Block (kb, b*NH + h) owns key rows [64 kb, 64 kb + 64) (kb = x: the longest first);
// warp w owns 16 of them, its K and V rows held as A operands. Per query tile qb >= kb, transposed:
// S^T = K Q^T, dP^T = V dout^T, P^T = 2^(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - D); then
// dV += P^T dout and dK += dS^T Q (times scale at the end), from the transposed tiles of dout and Q.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_tc_bwd_dkdv_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                        const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Qs = reinterpret_cast<floatT *>(attn_smem), *dOs = Qs + L::ROW, *Qt = dOs + L::ROW, *dOt = Qt + L::TR;
    float *lse_s = reinterpret_cast<float *>(dOt + L::TR), *D_s = lse_s + ATT_BQ;
    const int nqb = (T + ATT_BQ - 1) / ATT_BQ, kb = (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs, *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
    const int k0 = kb * ATT_BK, key[2] = {k0 + warp * 16 + (lane >> 2), k0 + warp * 16 + (lane >> 2) + 8};
    const float sl2 = scale * 1.4426950408889634f;

    // this block's K and V rows, through the Q and dout tiles, into registers
    attn_tc_load<floatT, HS>(Qs, nullptr, k_g, C3, k0, T, hs);
    attn_tc_load<floatT, HS>(dOs, nullptr, v_g, C3, k0, T, hs);
    __syncthreads();
    uint32_t ka[HS / 16][4], va[HS / 16][4];
    attn_tc_rows<floatT, HS>(ka, Qs, warp * 16);
    attn_tc_rows<floatT, HS>(va, dOs, warp * 16);
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    uint4 qd[2][AttnTcShare<HS>::N];  // the next Q and dout tiles, loaded while this one is computed on
    attn_tc_fetch<floatT, HS>(qd[0], q_g, C3, kb * ATT_BQ, T, hs);
    attn_tc_fetch<floatT, HS>(qd[1], do_g, C, kb * ATT_BQ, T, hs);
    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_BQ;
        __syncthreads();  // every warp is done with the previous tiles (and has its K, V rows)
        attn_tc_stash<floatT, HS>(Qs, Qt, qd[0]);
        attn_tc_stash<floatT, HS>(dOs, dOt, qd[1]);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const int q = q0 + i;
            lse_s[i] = q < T ? lse[(long)bh * T + q] * 1.4426950408889634f : 0.0f;
            D_s[i] = q < T ? Dsc[(long)bh * T + q] : 0.0f;
        }
        __syncthreads();
        if (qb + 1 < nqb) {
            attn_tc_fetch<floatT, HS>(qd[0], q_g, C3, q0 + ATT_BQ, T, hs);
            attn_tc_fetch<floatT, HS>(qd[1], do_g, C, q0 + ATT_BQ, T, hs);
        }
        float s[8][4], dp[8][4];
        attn_tc_scores<floatT, HS>(s, ka, Qs, 8);
        attn_tc_scores<floatT, HS>(dp, va, dOs, 8);
        const bool masked = qb == kb || q0 + ATT_BQ > T;  // the causal diagonal, or query rows past T
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = n * 8 + 2 * t + (e & 1), q = q0 + i;
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse_s[i]));
                if (masked && (q < key[e >> 1] || q >= T)) p = 0.0f;
                s[n][e] = p;
                dp[n][e] = p * (dp[n][e] - D_s[i]);
            }
        // On the diagonal tile warp w's keys see queries >= 16 w only: 16-query chunks w..3.
        const int kc0 = qb == kb ? warp : 0;
        attn_tc_pv<floatT, HS>(dv, s, dOt, kc0, 4);
        attn_tc_pv<floatT, HS>(dk, dp, Qt, kc0, 4);
    }
    floatT *dqkv_b = dqkv + (long)b * T * C3 + h * hs;
    const float one[2] = {1.0f, 1.0f}, sc[2] = {scale, scale};
    attn_tc_write<floatT, HS>(dqkv_b + C, C3, dk, key, sc, T, hs);
    attn_tc_write<floatT, HS>(dqkv_b + 2 * C, C3, dv, key, one, T, hs);
}

// Backward, dQ. Block (x, b*NH + h) owns query rows [64 qb, 64 qb + 64), qb = nqb - 1 - x; warp w owns 16,
// its Q and dout rows held as A operands. Per key tile kb <= qb: S = Q K^T, dP = dout V^T, P from lse,
// dS = P (dP - D), dQ += dS K (times scale at the end) from the transposed K tile.
template <typename floatT, int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attn_tc_bwd_dq_kernel(floatT *__restrict__ dqkv, const floatT *__restrict__ dout, const floatT *__restrict__ qkv,
                      const float *__restrict__ lse, const float *__restrict__ Dsc, int T, int C, int NH, float scale) {
    using L = AttnTc<floatT, HS>;
    DYNAMIC_SHARED(unsigned char, attn_smem);
    floatT *Ks = reinterpret_cast<floatT *>(attn_smem), *Vs = Ks + L::ROW, *Kt = Vs + L::ROW;
    const int nqb = (T + ATT_BQ - 1) / ATT_BQ, qb = nqb - 1 - (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    const long C3 = 3L * C;
    const floatT *q_g = qkv + (long)b * T * C3 + h * hs, *k_g = q_g + C, *v_g = q_g + 2 * C;
    const floatT *do_g = dout + (long)b * T * C + h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
    const int q0 = qb * ATT_BQ, row[2] = {q0 + warp * 16 + (lane >> 2), q0 + warp * 16 + (lane >> 2) + 8};
    const float sl2 = scale * 1.4426950408889634f;

    attn_tc_load<floatT, HS>(Ks, nullptr, q_g, C3, q0, T, hs);
    attn_tc_load<floatT, HS>(Vs, nullptr, do_g, C, q0, T, hs);
    __syncthreads();
    uint32_t qa[HS / 16][4], da[HS / 16][4];
    attn_tc_rows<floatT, HS>(qa, Ks, warp * 16);
    attn_tc_rows<floatT, HS>(da, Vs, warp * 16);
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lse2[r] = row[r] < T ? lse[(long)bh * T + row[r]] * 1.4426950408889634f : 0.0f;
        Dr[r] = row[r] < T ? Dsc[(long)bh * T + row[r]] : 0.0f;
    }
    float dq[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    uint4 kv[2][AttnTcShare<HS>::N];  // the next K and V tiles, loaded while this one is computed on
    attn_tc_fetch<floatT, HS>(kv[0], k_g, C3, 0, T, hs);
    attn_tc_fetch<floatT, HS>(kv[1], v_g, C3, 0, T, hs);
    for (int kb = 0; kb <= qb; kb++) {
        const int k0 = kb * ATT_BK;
        __syncthreads();  // every warp is done with the previous tiles (and has its Q, dout rows)
        attn_tc_stash<floatT, HS>(Ks, Kt, kv[0]);
        attn_tc_stash<floatT, HS>(Vs, nullptr, kv[1]);
        __syncthreads();
        if (kb < qb) {
            attn_tc_fetch<floatT, HS>(kv[0], k_g, C3, k0 + ATT_BK, T, hs);
            attn_tc_fetch<floatT, HS>(kv[1], v_g, C3, k0 + ATT_BK, T, hs);
        }
        const int n_end = kb == qb ? 2 * (warp + 1) : 8;
        float s[8][4], dp[8][4];
        attn_tc_scores<floatT, HS>(s, qa, Ks, n_end);
        attn_tc_scores<floatT, HS>(dp, da, Vs, n_end);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = attn_exp2(fmaf(s[n][e], sl2, -lse2[e >> 1]));
                if (kb == qb && (n >= n_end || k0 + n * 8 + 2 * t + (e & 1) > row[e >> 1])) p = 0.0f;  // causal diagonal
                s[n][e] = p * (dp[n][e] - Dr[e >> 1]);
            }
        attn_tc_pv<floatT, HS>(dq, s, Kt, 0, n_end / 2);
    }
    const float sc[2] = {scale, scale};
    attn_tc_write<floatT, HS>(dqkv + (long)b * T * C3 + h * hs, C3, dq, row, sc, T, hs);
}
// ---- end 16-bit attention ----

template <typename floatT> static const char *attn_type_name() {
    return std::is_same<floatT, float>::value ? "float" : std::is_same<floatT, __half>::value ? "half" : "bf16";
}

// Exits with a message naming the shape if the kernels cannot run it; returns the padded head size.
template <typename floatT>
static int attn_check_shape(const char *who, int B, int T, int C, int NH) {
    constexpr bool TC = sizeof(floatT) == 2;
    if (B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d T=%d C=%d NH=%d (need B, T, C, NH >= 1 and NH dividing C)\n",
                who, attn_type_name<floatT>(), B, T, C, NH);
        exit(EXIT_FAILURE);
    }
    const int hs = C / NH;
    if (hs > ATT_MAX_HS || (TC && hs % 16 != 0)) {
        fprintf(stderr, "%s<%s>: unsupported head size hs=%d (B=%d T=%d C=%d NH=%d): need hs <= %d%s\n", who,
                attn_type_name<floatT>(), hs, B, T, C, NH, ATT_MAX_HS,
                TC ? " and a multiple of 16 on the tensor-core path" : "");
        exit(EXIT_FAILURE);
    }
    if ((long)B * NH > 65535) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d NH=%d: B*NH = %ld exceeds the grid's y limit 65535\n", who,
                attn_type_name<floatT>(), B, NH, (long)B * NH);
        exit(EXIT_FAILURE);
    }
    return (hs + 15) / 16 * 16;
}

static void attn_check_aligned(const char *who, const char *what, const void *p) {
    if ((uintptr_t)p % 16 != 0) {
        fprintf(stderr, "%s: %s = %p is not 16-byte aligned (the 16-bit path loads rows with 16-byte vectors)\n",
                who, what, p);
        exit(EXIT_FAILURE);
    }
}

// Allows a kernel `bytes` of dynamic shared memory (all of ours exceed the default 48 KB); exits naming the
// shape if the device cannot give that much. Called before every launch: it is cheap next to the kernels
// and stays right if the current device changes.
template <typename Kernel>
static void attn_allow_smem(Kernel kernel, size_t bytes, const char *who, const char *type, int B, int T, int C, int NH) {
    int dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (bytes > (size_t)optin) {
        fprintf(stderr, "%s<%s>: shape B=%d T=%d C=%d NH=%d (hs=%d) needs %zu bytes of shared memory per block, "
                "the device allows %d\n", who, type, B, T, C, NH, C / NH, bytes, optin);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// Calls f(std::integral_constant<int, HS>) for the smallest built HS (16, 32, 64, 128) that holds the head
// size: the tile loaders zero the columns past hs, so a head of 48 runs as 64 and 80..112 as 128.
template <typename F>
static void attn_dispatch_hs(int hs_padded, F &&f) {
    if (hs_padded <= 16) f(std::integral_constant<int, 16>{});
    else if (hs_padded <= 32) f(std::integral_constant<int, 32>{});
    else if (hs_padded <= 64) f(std::integral_constant<int, 64>{});
    else f(std::integral_constant<int, 128>{});  // attn_check_shape refused hs > 128
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C).
template <typename floatT>
static void flash_attention_forward(floatT *out, float *lse, const floatT *qkv, int B, int T, int C, int NH,
                              cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attention_forward", B, T, C, NH);
    if (sizeof(floatT) == 2) attn_check_aligned("attention_forward", "qkv", qkv);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        if constexpr (sizeof(floatT) == 2) {
            const size_t smem = AttnTc<floatT, HS>::FWD_BYTES;
            attn_allow_smem(attn_tc_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_tc_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, scale);
        } else {
            const size_t smem = AttnSmem<floatT, HS>::FWD_BYTES;
            attn_allow_smem(attn_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, scale);
        }
        cudaCheck(cudaGetLastError());
    });
}

// dqkv (B, T, 3C), every element overwritten, from dout (B, T, C), qkv, out and lse of the forward.
// scratch: B*NH*T floats.
template <typename floatT>
static void flash_attention_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                               const float *lse, int B, int T, int C, int NH, cudaStream_t stream) {
    const int hsp = attn_check_shape<floatT>("attention_backward", B, T, C, NH);
    if (sizeof(floatT) == 2) {
        attn_check_aligned("attention_backward", "qkv", qkv);
        attn_check_aligned("attention_backward", "dout", dout);
    }
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const long rows = (long)B * NH * T;
    LAUNCH((unsigned)((rows + 7) / 8), 256, 0, stream, attn_bwd_rowdot_kernel<floatT>)(scratch, dout, out, B, T, C, NH);
    cudaCheck(cudaGetLastError());
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const char *ty = attn_type_name<floatT>();
        if constexpr (sizeof(floatT) == 2) {
            using L = AttnTc<floatT, HS>;
            attn_allow_smem(attn_tc_bwd_dkdv_kernel<floatT, HS>, L::DKDV_BYTES, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, L::DKDV_BYTES, stream, attn_tc_bwd_dkdv_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T,
                                                                                             C, NH, scale);
            cudaCheck(cudaGetLastError());
            attn_allow_smem(attn_tc_bwd_dq_kernel<floatT, HS>, L::DQ_BYTES, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, L::DQ_BYTES, stream, attn_tc_bwd_dq_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C,
                                                                                         NH, scale);
        } else {
            const size_t smem = AttnSmem<floatT, HS>::BWD_BYTES;
            attn_allow_smem(attn_bwd_dkdv_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_bwd_dkdv_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
            cudaCheck(cudaGetLastError());
            attn_allow_smem(attn_bwd_dq_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_bwd_dq_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
        }
        cudaCheck(cudaGetLastError());
    });
}


// The model's attention: flash-style kernels above; `att` holds each row's logsumexp.
static void attention_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int C, int NH) {
    WITH_X(flash_attention_forward((xt *)out, att, (const xt *)qkv, B, T, C, NH, (cudaStream_t)0));
}

static void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                               int B, int T, int C, int NH) {
    float *rows = scratch_get((size_t)B * NH * T);
    WITH_X(flash_attention_backward((xt *)dqkv, rows, (const xt *)dout, (const xt *)qkv, (const xt *)out, att, B, T, C, NH,
                                    (cudaStream_t)0));
}
// ---- end flash attention ----

// ---- attention of one new token against the key/value cache (generation) ----
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
    WITH_X(LAUNCH(NH, ATT_DECODE_THREADS, smem, 0, attention_decode_kernel<xt>)((xt *)out, (const xt *)qkv, t, C, NH));
    launchCheck();
}
// Generation brackets (model.h): the CUDA build needs nothing held while the weights stay still.
static void backend_decode_begin(void) {}
static void backend_decode_end(void) {}
// ---- end attention against the key/value cache ----

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
// Element-wise kernels take V consecutive values a thread (16 bytes where N and the pointers allow).
template <typename T, int V>
__global__ void gelu_forward_kernel(T *out, const T *inp, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float v = to_f(x.v[k]);
        o.v[k] = from_f<T>(0.5f * v * (1.0f + tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v))));
    }
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

static void gelu_forward(floatX *out, const floatX *inp, long N) {
    WITH_X({
        constexpr int V = vec16<xt>();
        if (N % V == 0 && aligned16(out) && aligned16(inp))
            LAUNCH(ceil_div(N / V, 256), 256, 0, 0, gelu_forward_kernel<xt, V>)((xt *)out, (const xt *)inp, N);
        else
            LAUNCH(ceil_div(N, 256), 256, 0, 0, gelu_forward_kernel<xt, 1>)((xt *)out, (const xt *)inp, N);
    });
    launchCheck();
}

template <typename T, int V>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i), d = *reinterpret_cast<const XVec<T, V> *>(dout + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float v = to_f(x.v[k]);
        float th = tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v));
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * v * v);
        o.v[k] = from_f<T>(local * to_f(d.v[k]));
    }
    *reinterpret_cast<XVec<T, V> *>(dinp + i) = o;
}

static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    WITH_X({
        constexpr int V = vec16<xt>();
        if (N % V == 0 && aligned16(dinp) && aligned16(inp) && aligned16(dout))
            LAUNCH(ceil_div(N / V, 256), 256, 0, 0, gelu_backward_kernel<xt, V>)((xt *)dinp, (const xt *)inp, (const xt *)dout, N);
        else
            LAUNCH(ceil_div(N, 256), 256, 0, 0, gelu_backward_kernel<xt, 1>)((xt *)dinp, (const xt *)inp, (const xt *)dout, N);
    });
    launchCheck();
}

template <typename T, int V>
__global__ void residual_forward_kernel(T *out, const T *a, const T *b, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(a + i), y = *reinterpret_cast<const XVec<T, V> *>(b + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(to_f(x.v[k]) + to_f(y.v[k]));
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

static void residual_forward(floatX *out, const floatX *a, const floatX *b, long N) {
    WITH_X({
        constexpr int V = vec16<xt>();
        if (N % V == 0 && aligned16(out) && aligned16(a) && aligned16(b))
            LAUNCH(ceil_div(N / V, 256), 256, 0, 0, residual_forward_kernel<xt, V>)((xt *)out, (const xt *)a, (const xt *)b, N);
        else
            LAUNCH(ceil_div(N, 256), 256, 0, 0, residual_forward_kernel<xt, 1>)((xt *)out, (const xt *)a, (const xt *)b, N);
    });
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

// Pass 1 reads the row once with an online softmax: each thread keeps a running max m and a sum s of
// exp(x - m), rescaled when m grows; the block then combines the (m, s) pairs. Pass 2 writes the gradient.
template <typename T, int V>
__global__ void classifier_kernel(T *logits, float *losses, const int *targets, int Vocab, int Vp, float dloss) {
    typedef XVec<T, V> Vec;
    T *row = logits + (long)blockIdx.x * Vp;
    Vec *rowv = reinterpret_cast<Vec *>(row);
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i * V < Vocab; i += blockDim.x) {
        const Vec x = rowv[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            if (i * V + k >= Vocab) break;
            const float v = to_f(x.v[k]);
            if (v > m) { s *= expf(m - v); m = v; }
            s += expf(v - m);
        }
    }
    const float maxv = block_reduce(m, 1);
    const float sum = block_reduce(m == -INFINITY ? 0.0f : s * expf(m - maxv), 0);
    const float logsum = logf(sum) + maxv;
    const int y = targets[blockIdx.x];
    const float ly = to_f(row[y]);
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) losses[blockIdx.x] = logsum - ly;
    for (int i = threadIdx.x; i < Vp / V; i += blockDim.x) {
        Vec x = rowv[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int v = i * V + k;
            float g = v < Vocab ? expf(to_f(x.v[k]) - logsum) * dloss : 0.0f;
            if (v == y) g -= dloss;
            x.v[k] = from_f<T>(g);
        }
        rowv[i] = x;
    }
}

static void classifier_forward_backward(floatX *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
    WITH_X({
        if (Vp % vec16<xt>() == 0 && aligned16(logits))
            LAUNCH(N, 512, 0, 0, classifier_kernel<xt, vec16<xt>()>)((xt *)logits, losses, targets, V, Vp, dloss);
        else
            LAUNCH(N, 512, 0, 0, classifier_kernel<xt, 1>)((xt *)logits, losses, targets, V, Vp, dloss);
    });
    launchCheck();
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

static int backend_weights_need_copy(void) { return x_prec != PREC_FP32; }

static void backend_weights_from_master(floatX *dst, const float *src, size_t n, uint64_t seed) {
    if (n == 0) return;
    int v4 = aligned16(src) && ((uintptr_t)dst & 7) == 0;
    if (x_prec == PREC_BF16 && v4) LAUNCH(ceil_div((long)(n + 3) / 4, 256), 256, 0, 0, weights_bf16_kernel<4>)((bf16 *)dst, src, n, seed);
    else if (x_prec == PREC_BF16) LAUNCH(ceil_div((long)n, 256), 256, 0, 0, weights_bf16_kernel<1>)((bf16 *)dst, src, n, seed);
    else if (x_prec == PREC_FP16 && v4) LAUNCH(ceil_div((long)(n + 3) / 4, 256), 256, 0, 0, weights_fp16_kernel<4>)((__half *)dst, src, n);
    else if (x_prec == PREC_FP16) LAUNCH(ceil_div((long)n, 256), 256, 0, 0, weights_fp16_kernel<1>)((__half *)dst, src, n);
    else cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
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
static void backend_clear(void *p, size_t bytes) { cudaCheck(cudaMemset(p, 0, bytes)); }
static void backend_zero(float *buf, size_t n) { cudaCheck(cudaMemset(buf, 0, n * sizeof(float))); }

static void *backend_pinned_alloc(size_t bytes) {
    void *p = NULL;
    cudaCheck(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
}
static void backend_pinned_free(void *p) { cudaCheck(cudaFreeHost(p)); }

// Has the stream passed event e? cudaEventQuery answers without waiting; the wait comes only if not.
static void event_wait(cudaEvent_t e) {
    cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) cudaCheck(cudaEventSynchronize(e));
    else cudaCheck(q);
}

// Token uploads go through a ring of pinned slots, so that each copy is asynchronous (a copy from pageable
// memory makes the host wait for the device) and the caller may refill its buffer at once. A slot is
// written again only after its last copy has passed, which at 2 uploads per micro-batch is long since.
#define TOKEN_SLOTS 16
static int *token_slot[TOKEN_SLOTS];
static cudaEvent_t token_copied[TOKEN_SLOTS];
static size_t token_cap = 0;
static int token_next = 0;
static void backend_tokens_from_host(int *dst, const int *src, size_t n) {
    if (n > token_cap) {  // the first upload, or a longer one: every slot's old copy must be done first
        cudaCheck(cudaDeviceSynchronize());
        for (int k = 0; k < TOKEN_SLOTS; k++) {
            if (token_cap) backend_pinned_free(token_slot[k]);
            else cudaCheck(cudaEventCreateWithFlags(&token_copied[k], cudaEventDisableTiming));
            token_slot[k] = (int *)backend_pinned_alloc(n * sizeof(int));
            cudaCheck(cudaEventRecord(token_copied[k], 0));
        }
        token_cap = n;
    }
    int k = token_next;
    token_next = (k + 1) % TOKEN_SLOTS;
    event_wait(token_copied[k]);
    memcpy(token_slot[k], src, n * sizeof(int));
    cudaCheck(cudaMemcpyAsync(dst, token_slot[k], n * sizeof(int), cudaMemcpyHostToDevice, 0));
    cudaCheck(cudaEventRecord(token_copied[k], 0));
}

// The heads' losses (model.h's queue) go to pinned host memory asynchronously; model_take_loss reads
// them after backend_losses_wait, which by then (after the step's synchronisation) waits for nothing.
static cudaEvent_t losses_copied = NULL;
static void backend_losses_to_host(float *host, const float *losses, int n) {
    if (!losses_copied) cudaCheck(cudaEventCreateWithFlags(&losses_copied, cudaEventDisableTiming));
    cudaCheck(cudaMemcpyAsync(host, losses, n * sizeof(float), cudaMemcpyDeviceToHost, 0));
    cudaCheck(cudaEventRecord(losses_copied, 0));
}
static void backend_losses_wait(void) {
    if (losses_copied) event_wait(losses_copied);
}

template <typename T>
__global__ void to_float_kernel(float *dst, const T *src, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_f(src[i]);
}

static const float *backend_logits_row(const floatX *row, int Vp) {
    static float *host = NULL;
    static int cap = 0;
    if (Vp > cap) { free(host); host = (float *)mallocCheck(Vp * sizeof(float)); cap = Vp; }
    float *f = scratch_get(Vp);
    WITH_X(LAUNCH(ceil_div(Vp, 256), 256, 0, 0, to_float_kernel<xt>)(f, (const xt *)row, Vp));
    launchCheck();
    cudaCheck(cudaMemcpy(host, f, Vp * sizeof(float), cudaMemcpyDeviceToHost));
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

// Each buffer's sum of squares: all the kernels write their chunk partials into one device buffer, which
// is copied to pinned memory asynchronously (_start); _finish adds each buffer's partials up in order
// once the copy has passed, which after the step's synchronisation needs no wait.
static double *ss_partial_d = NULL, *ss_partial = NULL;  // grown, never freed per call: cudaFree synchronises
static size_t ss_cap = 0;
static size_t *ss_chunks = NULL;  // per buffer: its chunks
static int ss_chunks_cap = 0;
static cudaEvent_t ss_copied = NULL;
static void backend_sum_squares_start(const float **xs, const size_t *ns, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += (ns[i] + NORM_CHUNK - 1) / NORM_CHUNK;
    if (total > ss_cap) {
        if (ss_partial_d) { cudaCheck(cudaFree(ss_partial_d)); backend_pinned_free(ss_partial); }
        cudaCheck(cudaMalloc(&ss_partial_d, total * sizeof(double)));
        ss_partial = (double *)backend_pinned_alloc(total * sizeof(double));
        ss_cap = total;
    }
    if (!ss_copied) cudaCheck(cudaEventCreateWithFlags(&ss_copied, cudaEventDisableTiming));
    if (count > ss_chunks_cap) { ss_chunks = (size_t *)reallocCheck(ss_chunks, count * sizeof(size_t)); ss_chunks_cap = count; }
    size_t *chunks = ss_chunks;
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        chunks[i] = (ns[i] + NORM_CHUNK - 1) / NORM_CHUNK;
        if (chunks[i] == 0) continue;
        LAUNCH((unsigned)chunks[i], 256, 0, 0, sum_squares_kernel)(ss_partial_d + off, xs[i], ns[i]);
        launchCheck();
        off += chunks[i];
    }
    if (off > 0) cudaCheck(cudaMemcpyAsync(ss_partial, ss_partial_d, off * sizeof(double), cudaMemcpyDeviceToHost, 0));
    cudaCheck(cudaEventRecord(ss_copied, 0));
}
static void backend_sum_squares_finish(double *out, int count) {
    event_wait(ss_copied);
    const size_t *chunks = ss_chunks;
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        double s = 0.0;
        for (size_t c = 0; c < chunks[i]; c++) s += ss_partial[off + c];
        out[i] = s;
        off += chunks[i];
    }
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
// The offloaded update's copies run on a stream of their own, so that the host's AdamW of one unit overlaps the
// copies of the others: every unit's gradient goes to pinned host memory at once (the host waits for unit u's
// alone, `ticket` u, before updating it), and each updated slice goes back while the host updates the next.
// Events order them after the compute stream's work so far (begin) and the compute stream's next work after
// every copy back (end).
static cudaStream_t offload_stream = NULL;
static cudaEvent_t offload_ready = NULL, offload_back = NULL, *offload_done = NULL;
static int offload_tickets = 0;
static void backend_offload_begin(void) {
    if (!offload_stream) {
        cudaCheck(cudaStreamCreateWithFlags(&offload_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&offload_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&offload_back, cudaEventDisableTiming));
    }
    cudaCheck(cudaEventRecord(offload_ready, 0));
    cudaCheck(cudaStreamWaitEvent(offload_stream, offload_ready, 0));
}
static void backend_offload_to_host(float *host, const float *buf, size_t n, int ticket) {
    if (ticket >= offload_tickets) {  // the first update: one event per unit, kept
        int grown = ticket + 1;
        offload_done = (cudaEvent_t *)reallocCheck(offload_done, grown * sizeof(cudaEvent_t));
        for (int i = offload_tickets; i < grown; i++) cudaCheck(cudaEventCreateWithFlags(&offload_done[i], cudaEventDisableTiming));
        offload_tickets = grown;
    }
    cudaCheck(cudaMemcpyAsync(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost, offload_stream));
    cudaCheck(cudaEventRecord(offload_done[ticket], offload_stream));
}
static void backend_offload_wait(int ticket) { event_wait(offload_done[ticket]); }
static void backend_offload_from_host(float *buf, const float *host, size_t n) {
    cudaCheck(cudaMemcpyAsync(buf, host, n * sizeof(float), cudaMemcpyHostToDevice, offload_stream));
}
static void backend_offload_end(void) {
    cudaCheck(cudaEventRecord(offload_back, offload_stream));
    cudaCheck(cudaStreamWaitEvent(0, offload_back, 0));
}

static void backend_copy(float *dst, const float *src, size_t n) {
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
}

// The fp32 kernels below take 4 values a thread where the pointers are 16-byte aligned (one load or
// store each), the last thread what is left of n one by one; each value is computed alone, as before.
template <int V>
__global__ void add_kernel(float *dst, const float *src, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        XVec<float, V> d = *reinterpret_cast<XVec<float, V> *>(dst + i);
        const XVec<float, V> s = *reinterpret_cast<const XVec<float, V> *>(src + i);
#pragma unroll
        for (int k = 0; k < V; k++) d.v[k] += s.v[k];
        *reinterpret_cast<XVec<float, V> *>(dst + i) = d;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) dst[k] += src[k];
    }
}

static void backend_add(float *dst, const float *src, size_t n) {
    if (n == 0) return;
    if (aligned16(dst) && aligned16(src)) LAUNCH(ceil_div((long)(n + 3) / 4, 256), 256, 0, 0, add_kernel<4>)(dst, src, n);
    else LAUNCH(ceil_div((long)n, 256), 256, 0, 0, add_kernel<1>)(dst, src, n);
    launchCheck();
}

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

static void backend_adamw(float *p, const float *g, float *mom, float *vel, size_t n, int decayed, const AdamWArgs *a) {
    if (n == 0) return;
    float bc1 = 1.0f - powf(a->beta1, (float)a->t), bc2 = 1.0f - powf(a->beta2, (float)a->t);
    float wd = decayed ? a->weight_decay : 0.0f;
    if (aligned16(p) && aligned16(g) && aligned16(mom) && aligned16(vel))
        LAUNCH(ceil_div((long)(n + 3) / 4, 256), 256, 0, 0, adamw_kernel<4>)(p, g, mom, vel, n, a->lr, a->beta1, a->beta2, bc1, bc2,
                                                                            a->eps, wd, a->grad_scale);
    else
        LAUNCH(ceil_div((long)n, 256), 256, 0, 0, adamw_kernel<1>)(p, g, mom, vel, n, a->lr, a->beta1, a->beta2, bc1, bc2, a->eps,
                                                                  wd, a->grad_scale);
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

// Attention keeps only each row's logsumexp (B, NH, T) for backward, which recomputes the softmax.
#define ATT_SAVED_FLOATS(B, NH, T) ((size_t)(B) * (NH) * (T))
#define PRECISION_DEFAULT "bf16"
#define PRECISIONS_BUILT "bf16, fp16, fp32"

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

static void backend_set_precision(const char *precision, int tf32) {
    x_prec = strcmp(precision, "bf16") == 0 ? PREC_BF16 : strcmp(precision, "fp16") == 0 ? PREC_FP16 : PREC_FP32;
    x_bytes = x_prec == PREC_FP32 ? 4 : 2;
    use_tf32 = tf32;
}

// The device's high-water mark of memory in use (cudaMalloc'd by us, plus cuBLASLt and the context).
static size_t backend_peak_device_bytes(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    static size_t peak = 0;
    if (total_b - free_b > peak) peak = total_b - free_b;
    return peak;
}

// The memory the autotuner plans against: the whole card's.
static size_t backend_device_capacity(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    return total_b;
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

// --profile's roofline: the card's dense bf16 peak where it is known (0: the column stays empty).
static double profile_peak_flops(const char **source) {
    *source = "the card's dense bf16 peak (datasheet)";
    return model_peak_flops();
}

static const char *model_device_name(void) {
    static char name[300];
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(name, sizeof(name), "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / 1073741824.0);
    return name;
}

#include "trainer.h"

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
