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

template <typename T>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * Tn * C) return;
    int c = idx % C, bt = idx / C, t = bt % Tn;
    out[idx] = from_f<T>(to_f(wte[(long)inp[bt] * C + c]) + to_f(wpe[(long)t * C + c]));
}

static void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C) {
    long n = (long)B * T * C;
    WITH_X(encoder_forward_kernel<<<ceil_div(n, 256), 256>>>((xt *)out, inp, (const xt *)wte, (const xt *)wpe, B, T, C));
    launchCheck();
}

// dwte: one block per distinct token, its threads over channels, adding that token's positions in
// increasing order (the CPU build's order). The positions come grouped by token from the host.
template <typename T>
__global__ void encoder_backward_wte_kernel(float *dwte, const T *dout, const int *tokens, const int *starts,
                                            const int *positions, int C) {
    int k = blockIdx.x, tok = tokens[k];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = dwte[(long)tok * C + c];
        for (int j = starts[k]; j < starts[k + 1]; j++) s += to_f(dout[(long)positions[j] * C + c]);
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

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C) {
    // group positions by token on the host (a counting sort keeps each token's positions in order)
    int BT = B * T;
    static int *host = NULL, *dev = NULL, cap = 0;
    if (BT > cap) {
        free(host);
        if (dev) cudaCheck(cudaFree(dev));
        host = (int *)mallocCheck((size_t)5 * BT * sizeof(int) + 2 * sizeof(int));
        cudaCheck(cudaMalloc(&dev, ((size_t)4 * BT + 2) * sizeof(int)));
        cap = BT;
    }
    int *tok = host, *tokens = host + BT, *starts = host + 2 * BT, *positions = host + 3 * BT + 1, *order = host + 4 * BT + 1;
    cudaCheck(cudaMemcpy(tok, inp, BT * sizeof(int), cudaMemcpyDeviceToHost));
    // sort (token, position) pairs: each token's positions end up together and in increasing order
    static uint64_t *keys = NULL;
    static int keys_cap = 0;
    if (BT > keys_cap) { free(keys); keys = (uint64_t *)mallocCheck((size_t)BT * sizeof(uint64_t)); keys_cap = BT; }
    for (int i = 0; i < BT; i++) keys[i] = ((uint64_t)(uint32_t)tok[i] << 32) | (uint32_t)i;
    qsort(keys, BT, sizeof(uint64_t), compare_u64);
    for (int i = 0; i < BT; i++) order[i] = (int)(uint32_t)keys[i];
    int ntok = 0;
    for (int j = 0; j < BT; j++) {
        if (j == 0 || tok[order[j]] != tok[order[j - 1]]) { tokens[ntok] = tok[order[j]]; starts[ntok++] = j; }
        positions[j] = order[j];
    }
    starts[ntok] = BT;
    int *d_tokens = dev, *d_starts = dev + BT, *d_positions = dev + 2 * BT + 1;
    cudaCheck(cudaMemcpy(d_tokens, tokens, ntok * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_starts, starts, (ntok + 1) * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_positions, positions, BT * sizeof(int), cudaMemcpyHostToDevice));
    WITH_X(encoder_backward_wte_kernel<<<ntok, 256>>>(dwte, (const xt *)dout, d_tokens, d_starts, d_positions, C));
    launchCheck();
    WITH_X(encoder_backward_wpe_kernel<<<ceil_div((long)T * C, 256), 256>>>(dwpe, (const xt *)dout, B, T, C));
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
    WITH_X(layernorm_forward_kernel<<<ceil_div(N, 8), 256>>>((xt *)out, mean, rstd, (const xt *)inp, (const xt *)weight,
                                                             (const xt *)bias, N, C));
    launchCheck();
}

template <typename T>
__global__ void layernorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *weight, const float *mean,
                                               const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *d = dout + (long)row * C, *x = inp + (long)row * C;
    float m = mean[row], s = rstd[row], a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float norm = (to_f(x[c]) - m) * s, dnorm = to_f(weight[c]) * to_f(d[c]);
        a += dnorm;
        b += dnorm * norm;
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    T *di = dinp + (long)row * C;
    for (int c = lane; c < C; c += 32) {
        float norm = (to_f(x[c]) - m) * s, dnorm = to_f(weight[c]) * to_f(d[c]);
        di[c] = from_f<T>(to_f(di[c]) + (dnorm - a - norm * b) * s);
    }
}

// Column sums over N rows, deterministic and parallel: the rows are cut into COL_CHUNKS fixed chunks;
// a (32 x 8) block sums 32 columns of one chunk (each thread a strided share of rows, then the 8
// shares in order); a second kernel adds the chunks up in order. For LayerNorm the two sums are
// dweight (dout * normalised input) and dbias (dout); for a bias, only the latter.
#define COL_CHUNKS 64
template <typename T>
__global__ void column_partials_kernel(float *partial_w, float *partial_b, const T *dout, const T *inp, const float *mean,
                                       const float *rstd, int N, int C) {
    __shared__ float sw[8][33], sb[8][33];
    int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
    long lo = (long)N * chunk / COL_CHUNKS, hi = (long)N * (chunk + 1) / COL_CHUNKS;
    float w = 0.0f, b = 0.0f;
    if (c < C) {
        for (long i = lo + threadIdx.y; i < hi; i += 8) {
            float d = to_f(dout[i * C + c]);
            b += d;
            if (inp) w += (to_f(inp[i * C + c]) - mean[i]) * rstd[i] * d;
        }
    }
    sw[threadIdx.y][threadIdx.x] = w;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < 8; k++) { tw += sw[k][threadIdx.x]; tb += sb[k][threadIdx.x]; }
        if (partial_w) partial_w[(long)chunk * C + c] = tw;
        partial_b[(long)chunk * C + c] = tb;
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
    dim3 grid(ceil_div(C, 32), COL_CHUNKS), block(32, 8);
    WITH_X(column_partials_kernel<<<grid, block>>>(dweight ? pw : NULL, pb, (const xt *)dout, (const xt *)inp, mean, rstd, N, C));
    launchCheck();
    if (dweight) { column_reduce_kernel<<<ceil_div(C, 256), 256>>>(dweight, pw, C); launchCheck(); }
    column_reduce_kernel<<<ceil_div(C, 256), 256>>>(dbias, pb, C);
    launchCheck();
}

static void layernorm_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                               const floatX *weight, const float *mean, const float *rstd, int N, int C) {
    WITH_X(layernorm_backward_dinp_kernel<<<ceil_div(N, 8), 256>>>((xt *)dinp, (const xt *)dout, (const xt *)inp,
                                                                   (const xt *)weight, mean, rstd, N, C));
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
static void cublaslt_matmul(void *d, int d_float, const floatX *a, const floatX *b, const floatX *bias, int m, int n,
                            int k, int lda, int ldb, int ldd, int trans_a, int trans_b, float beta) {
    cublasComputeType_t compute = x_prec == PREC_FP32 && use_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t xt = x_cuda_type(), dt = d_float ? CUDA_R_32F : xt;
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (bias) {  // fused into the epilogue: no separate pass over the output
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, xt, trans_a ? k : m, trans_a ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, xt, trans_b ? n : k, trans_b ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, dt, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    uint32_t al[4] = {ptr_alignment(a), ptr_alignment(b), ptr_alignment(d), ptr_alignment(d)};
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasCheck(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, desc, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found == 0) fatal("cuBLASLt has no algorithm for a %dx%dx%d matmul (transa %d, transb %d, precision %d)", m, n, k,
                          trans_a, trans_b, x_prec);
    float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(cublaslt_handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo,
                               cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, 0));
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
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
template <typename T> static inline __host__ __device__ T attn_from_float(float x);
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
    extern __shared__ __align__(128) unsigned char attn_smem[];
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
    extern __shared__ __align__(128) unsigned char attn_smem[];
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
    __syncwarp();
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
    extern __shared__ __align__(128) unsigned char attn_smem[];
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
    __syncwarp();
    const int row0 = q0 + warp * 16, nrows = T - row0 < 16 ? T - row0 : 16;
    if (nrows > 0) dq.write(dqkv + ((long)b * T + row0) * C3 + h * hs, C3, nrows, hs, scale, Sw, L::LDS);
}

// ---- host side ----

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

// Calls f(std::integral_constant<int, HS>) for the padded head size HS.
template <typename F>
static void attn_dispatch_hs(int hs_padded, F &&f) {
    switch (hs_padded) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: fprintf(stderr, "attention: head size %d is not built (16, 32, 64 and 128 are; GPT-2 uses 64)\n", hs_padded); exit(EXIT_FAILURE);
    }
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
        const size_t smem = AttnSmem<floatT, HS>::FWD_BYTES;
        attn_allow_smem(attn_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
        attn_fwd_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(out, lse, qkv, T, C, NH, scale);
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
    attn_bwd_rowdot_kernel<floatT><<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(scratch, dout, out, B, T, C, NH);
    cudaCheck(cudaGetLastError());
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const size_t smem = AttnSmem<floatT, HS>::BWD_BYTES;
        const char *ty = attn_type_name<floatT>();
        attn_allow_smem(attn_bwd_dkdv_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
        attn_bwd_dkdv_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
        cudaCheck(cudaGetLastError());
        attn_allow_smem(attn_bwd_dq_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
        attn_bwd_dq_kernel<floatT, HS><<<grid, ATT_THREADS, smem, stream>>>(dqkv, dout, qkv, lse, scratch, T, C, NH, scale);
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
    extern __shared__ float att_s[];  // t + 1 scores, then ATT_DECODE_THREADS floats of reduction scratch
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
    WITH_X(attention_decode_kernel<<<NH, ATT_DECODE_THREADS, smem>>>((xt *)out, (const xt *)qkv, t, C, NH));
    launchCheck();
}
// Generation brackets (model.h): the CUDA build needs nothing held while the weights stay still.
static void backend_decode_begin(void) {}
static void backend_decode_end(void) {}
// ---- end attention against the key/value cache ----

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
template <typename T>
__global__ void gelu_forward_kernel(T *out, const T *inp, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = to_f(inp[i]);
    out[i] = from_f<T>(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x))));
}

static void gelu_forward(floatX *out, const floatX *inp, long N) {
    WITH_X(gelu_forward_kernel<<<ceil_div(N, 256), 256>>>((xt *)out, (const xt *)inp, N));
    launchCheck();
}

template <typename T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = to_f(inp[i]);
    float th = tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = from_f<T>(local * to_f(dout[i]));
}

static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    WITH_X(gelu_backward_kernel<<<ceil_div(N, 256), 256>>>((xt *)dinp, (const xt *)inp, (const xt *)dout, N));
    launchCheck();
}

template <typename T>
__global__ void residual_forward_kernel(T *out, const T *a, const T *b, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

static void residual_forward(floatX *out, const floatX *a, const floatX *b, long N) {
    WITH_X(residual_forward_kernel<<<ceil_div(N, 256), 256>>>((xt *)out, (const xt *)a, (const xt *)b, N));
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

template <typename T>
__global__ void classifier_kernel(T *logits, float *losses, const int *targets, int V, int Vp, float dloss) {
    T *row = logits + (long)blockIdx.x * Vp;
    float maxv = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) maxv = fmaxf(maxv, to_f(row[v]));
    maxv = block_reduce(maxv, 1);
    float sum = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) sum += expf(to_f(row[v]) - maxv);
    sum = block_reduce(sum, 0);
    float logsum = logf(sum) + maxv;
    int y = targets[blockIdx.x];
    float ly = to_f(row[y]);
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) losses[blockIdx.x] = logsum - ly;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float g = v < V ? expf(to_f(row[v]) - logsum) * dloss : 0.0f;
        if (v == y) g -= dloss;
        row[v] = from_f<T>(g);
    }
}

static void classifier_forward_backward(floatX *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
    WITH_X(classifier_kernel<<<N, 512>>>((xt *)logits, losses, targets, V, Vp, dloss));
    launchCheck();
}

// The working weights from the fp32 master copy. bf16 rounds stochastically: the 16 bits that are
// dropped decide, against a hash of (seed, index), whether to round up, so small AdamW updates are
// kept on average instead of vanishing under round-to-nearest. fp16 rounds to nearest.
__device__ __forceinline__ uint32_t hash_u32(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (uint32_t)x;
}

__global__ void weights_bf16_kernel(bf16 *dst, const float *src, size_t n, uint64_t seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = src[i];
    uint32_t bits = __float_as_uint(x);
    if (isfinite(x)) bits += hash_u32(seed ^ (i * 0x9e3779b97f4a7c15ull)) & 0xffffu;  // carries into the kept bits
    uint16_t top = (uint16_t)(bits >> 16);
    if (!isfinite(__uint_as_float(bits & 0xffff0000u)) && isfinite(x)) top = (uint16_t)(__float_as_uint(x) >> 16);
    dst[i] = __ushort_as_bfloat16(top);
}

__global__ void weights_fp16_kernel(__half *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2half_rn(src[i]);
}

static int backend_weights_need_copy(void) { return x_prec != PREC_FP32; }

static void backend_weights_from_master(floatX *dst, const float *src, size_t n, uint64_t seed) {
    if (n == 0) return;
    if (x_prec == PREC_BF16) weights_bf16_kernel<<<ceil_div((long)n, 256), 256>>>((bf16 *)dst, src, n, seed);
    else if (x_prec == PREC_FP16) weights_fp16_kernel<<<ceil_div((long)n, 256), 256>>>((__half *)dst, src, n);
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
    WITH_X(to_float_kernel<<<ceil_div(Vp, 256), 256>>>(f, (const xt *)row, Vp));
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

// Attention keeps only each row's logsumexp (B, NH, T) for backward, which recomputes the softmax.
#define ATT_SAVED_FLOATS(B, NH, T) ((size_t)(B) * (NH) * (T))

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

#define PRECISION_DEFAULT "bf16"
#define PRECISIONS_BUILT "bf16, fp16, fp32"
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
    snprintf(name, sizeof(name), "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / 1073741824.0);
    return name;
}

#include "trainer.h"

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
