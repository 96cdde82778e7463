// dev/cuda/emu/selftest.cu: the emulator's own checks, against hand-computed results: warp shuffles and votes,
// barriers with predicates, the NaN fill, launch limits, pointer attributes, cp.async and ldmatrix (the
// attention kernels' instructions, through the wrappers of cuda/async_copy.cuh and cuda/attention_mma.cuh), and
// cuBLASLt (every transpose, the bias, GELU and bias-gradient epilogues, the type combinations it must refuse).
// `selftest ok` runs them and ends with "N passed, N failed" (`selftest blocks`: only the blocks that wait on each other). `selftest MODE` runs one broken program that a GPU would hang on, fault on or
// get wrong; the emulator must stop it with a message naming the problem (test/test_cuda_emu.sh checks which).
// Built only for the emulator (make dev/cuda/emu/selftest): g++ -include dev/cuda/emu/emu.h, like train_gpt.cu.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../../cuda/async_copy.cuh"
#include "../../../cuda/attention_mma.cuh"
#include "../../../cuda/block_order.cuh"

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); exit(2); } \
    } while (0)

static int passes = 0, fails = 0;
static void expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    ok ? passes++ : fails++;
}

// ---- warp collectives ----

__global__ void shuffles(int *out) {
    int lane = threadIdx.x;
    out[0 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
    out[1 * 32 + lane] = __shfl_sync(0xffffffffu, lane * 10, 7);
    out[2 * 32 + lane] = __shfl_up_sync(0xffffffffu, lane * 10, 3);
    out[3 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
    out[4 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 9, 8);  // within groups of 8
    out[5 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane * 10, 2, 16);
    out[6 * 32 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[7 * 32 + lane] = __any_sync(0xffffffffu, lane == 17) + 2 * __all_sync(0xffffffffu, lane < 40);
    float f = __shfl_xor_sync(0xffffffffu, (float)lane + 0.5f, 1);
    out[8 * 32 + lane] = (int)(f * 2.0f);
    if (lane < 16) out[9 * 32 + lane] = __shfl_xor_sync(0x0000ffffu, lane, 1);  // a half-warp mask
    else out[9 * 32 + lane] = -1;
}

static void check_shuffles(void) {
    int *d, h[10 * 32];
    CHECK(cudaMalloc(&d, sizeof(h)));
    LAUNCH(1, 32, 0, 0, shuffles)(d);
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    int ok[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    unsigned ballot = 0;
    for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
    for (int l = 0; l < 32; l++) {
        ok[0] &= h[l] == (l ^ 5) * 10;
        ok[1] &= h[32 + l] == 70;
        ok[2] &= h[64 + l] == (l >= 3 ? l - 3 : l) * 10;
        ok[3] &= h[96 + l] == (l + 3 < 32 ? l + 3 : l) * 10;
        ok[4] &= h[128 + l] == ((l ^ 9) <= (l | 7) ? l ^ 9 : l) * 10;  // an earlier group may be read, a later not
        ok[5] &= h[160 + l] == ((l % 16) + 2 < 16 ? l + 2 : l) * 10;
        ok[6] &= (unsigned)h[192 + l] == ballot;
        ok[7] &= h[224 + l] == 3;
        ok[8] &= h[256 + l] == 2 * (l ^ 1) + 1;
        ok[9] &= h[288 + l] == (l < 16 ? l ^ 1 : -1);
    }
    const char *names[10] = {"__shfl_xor_sync", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                             "__shfl_xor_sync width 8", "__shfl_down_sync width 16", "__ballot_sync",
                             "__any_sync, __all_sync", "__shfl_xor_sync of a float", "__shfl_xor_sync on half a warp"};
    char buf[128];
    for (int i = 0; i < 10; i++) {
        snprintf(buf, sizeof(buf), "%s gives each lane the value of the lane it names", names[i]);
        expect(ok[i], buf);
    }
    CHECK(cudaFree(d));
}

// Each thread writes its index, the block meets at a barrier, then reads its neighbour's: right only if the
// barrier held every thread back until all had written. 96 threads: three warps, one of them partial-free.
__global__ void barrier_count(int *out) {
    __shared__ int s[96];
    int t = threadIdx.x;
    s[t] = t;
    int n = __syncthreads_count(t % 4 == 0);
    out[t] = s[(t + 1) % 96] + 1000 * n;
}

static void check_barriers(void) {
    int *d, h[96];
    CHECK(cudaMalloc(&d, sizeof(h)));
    LAUNCH(1, 96, 0, 0, barrier_count)(d);
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int t = 0; t < 96; t++) ok &= h[t] == (t + 1) % 96 + 1000 * 24;
    expect(ok, "__syncthreads_count: every thread sees the others' writes and the count of true predicates");
    CHECK(cudaFree(d));
}

// ---- memory ----

__global__ void read_smem(float *out) {
    DYNAMIC_SHARED(float, s);
    out[threadIdx.x] = s[threadIdx.x];
}

static void check_memory(void) {
    float *d, h[64];
    CHECK(cudaMalloc(&d, sizeof(h)));
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    int nan = 1;
    for (int i = 0; i < 64; i++) nan &= isnan(h[i]);
    expect(nan, "cudaMalloc memory reads as NaN until written");
    LAUNCH(1, 64, 64 * sizeof(float), 0, read_smem)(d);
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    nan = 1;
    for (int i = 0; i < 64; i++) nan &= isnan(h[i]);
    expect(nan, "dynamic shared memory reads as NaN until written");
    float *pinned, host[4];
    CHECK(cudaMallocHost(&pinned, 16));
    cudaPointerAttributes a1, a2, a3;
    CHECK(cudaPointerGetAttributes(&a1, d + 3));
    CHECK(cudaPointerGetAttributes(&a2, pinned));
    CHECK(cudaPointerGetAttributes(&a3, host));
    expect(a1.type == cudaMemoryTypeDevice && a2.type == cudaMemoryTypeHost && a3.type == cudaMemoryTypeUnregistered,
           "cudaPointerGetAttributes: device, pinned host and plain host memory");
    CHECK(cudaFreeHost(pinned));
    // launches over the device's limits are refused, as on a GPU, and cudaGetLastError says so
    LAUNCH(1, 1025, 0, 0, read_smem)(d);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "a block of 1025 threads is refused");
    LAUNCH(1, 64, 64 * 1024, 0, read_smem)(d);
    expect(cudaGetLastError() != cudaSuccess, "64 KiB of dynamic shared memory without cudaFuncSetAttribute is refused");
    CHECK(cudaFuncSetAttribute(read_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    LAUNCH(1, 64, 64 * 1024, 0, read_smem)(d);
    expect(cudaGetLastError() == cudaSuccess, "64 KiB of dynamic shared memory after cudaFuncSetAttribute");
    CHECK(cudaFree(d));
}

// ---- asynchronous copies and ldmatrix ----

// Two groups: the first waited for alone (wait_group 1), the second (odd threads zero-filling) after.
__global__ void cp_async_groups(const uint4 *src, uint4 *out) {
    DYNAMIC_SHARED(uint4, s);  // [2][64]
    const int i = threadIdx.x;
    cp_async_16(&s[i], &src[i], true);
    cp_async_commit();
    cp_async_16(&s[64 + i], &src[64 + i], i % 2 == 0);
    cp_async_commit();
    cp_async_wait<1>();
    out[i] = s[i];            // group 0: landed
    out[64 + i] = s[64 + i];  // group 1: still in flight, so the emulator's 0xff bytes
    cp_async_wait<0>();
    __syncthreads();
    out[128 + i] = s[64 + (63 - i)];  // another thread's group 1, after its wait and a barrier
}

// Lane l gives the address of row l of a [32][8] matrix of 16-bit values M[r][c] = 8 r + c.
__global__ void ldmatrix_forms(uint32_t *out) {
    __shared__ __align__(16) uint16_t m[32 * 8];
    const int l = threadIdx.x;
    for (int c = 0; c < 8; c++) m[8 * l + c] = (uint16_t)(8 * l + c);
    __syncwarp();
    uint32_t r[4], rt[4];
    ldmatrix_x4(r, &m[8 * l]);
    ldmatrix_x4_trans(rt, &m[8 * l]);
    for (int j = 0; j < 4; j++) {
        out[32 * j + l] = r[j];
        out[128 + 32 * j + l] = rt[j];
    }
}

static void check_async_copies(void) {
    uint4 *src, *out, h[3 * 64];
    uint32_t *lm, hl[256];
    CHECK(cudaMalloc(&src, 128 * sizeof(uint4)));
    CHECK(cudaMalloc(&out, sizeof(h)));
    CHECK(cudaMalloc(&lm, sizeof(hl)));
    uint4 in[128];
    for (unsigned i = 0; i < 128; i++) in[i] = make_uint4(i, i + 1000, i + 2000, i + 3000);
    CHECK(cudaMemcpy(src, in, sizeof(in), cudaMemcpyHostToDevice));
    LAUNCH(1, 64, 128 * sizeof(uint4), 0, cp_async_groups)(src, out);
    CHECK(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost));
    int landed = 1, pending = 1, after = 1;
    for (int i = 0; i < 64; i++) {
        landed &= !memcmp(&h[i], &in[i], 16);
        pending &= h[64 + i].x == 0xffffffffu && h[64 + i].y == 0xffffffffu && h[64 + i].z == 0xffffffffu && h[64 + i].w == 0xffffffffu;
        const int j = 63 - i;
        const uint4 want = j % 2 == 0 ? in[64 + j] : make_uint4(0u, 0u, 0u, 0u);
        after &= !memcmp(&h[128 + i], &want, 16);
    }
    expect(landed, "cp.async: a group lands at cp.async.wait_group 1 when a newer group is committed");
    expect(pending, "cp.async: the newer group's destination is 0xff (NaN) until its wait");
    expect(after, "cp.async: after wait_group 0 and __syncthreads every thread reads the others' copies, src-size 0 zero-filled");
    LAUNCH(1, 32, 0, 0, ldmatrix_forms)(lm);
    CHECK(cudaMemcpy(hl, lm, sizeof(hl), cudaMemcpyDeviceToHost));
    int plain = 1, trans = 1;
    for (int l = 0; l < 32; l++) {
        const unsigned g = l / 4, t = l % 4;
        for (unsigned j = 0; j < 4; j++) {  // PTX: thread 4g + t holds row g, elements 2t, 2t+1 (.trans: of M^T)
            plain &= hl[32 * j + l] == ((8 * (8 * j + g) + 2 * t) | (8 * (8 * j + g) + 2 * t + 1) << 16);
            trans &= hl[128 + 32 * j + l] == ((8 * (8 * j + 2 * t) + g) | (8 * (8 * j + 2 * t + 1) + g) << 16);
        }
    }
    expect(plain, "ldmatrix.x4: lane 4g+t gets row g, columns 2t and 2t+1 of each matrix");
    expect(trans, "ldmatrix.x4.trans: lane 4g+t gets rows 2t and 2t+1 at column g of each matrix");
    CHECK(cudaFree(src));
    CHECK(cudaFree(out));
    CHECK(cudaFree(lm));
}

// ---- cuBLASLt, against a plain loop over the documented definition ----

static cublasLtHandle_t lt;
static void check_cublaslt_epilogues(void);

// D (m x n) = op(A) op(B) + beta C + bias, all column-major; returns the status of the call.
static cublasStatus_t lt_matmul(cudaDataType_t ab, cudaDataType_t dt, cublasComputeType_t compute, int ta, int tb,
                                int m, int n, int k, const void *A, int lda, const void *B, int ldb, void *D, int ldd,
                                const void *bias, int bias_type, float beta) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F);
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb));
    if (bias) {
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
        if (bias_type >= 0) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(int));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, ab, ta ? k : m, ta ? m : k, lda);
    cublasLtMatrixLayoutCreate(&lb, ab, tb ? n : k, tb ? k : n, ldb);
    cublasLtMatrixLayoutCreate(&ld, dt, m, n, ldd);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found == 1) {
        float alpha = 1.0f;
        st = cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, NULL, 0, 0);
    } else if (st == CUBLAS_STATUS_SUCCESS) {
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return st;
}

static void check_cublaslt(void) {
    const int m = 5, n = 3, k = 7;  // odd sizes: no layout is square, every mix-up shows
    float A[64], B[64], D0[64], bias[8], out[64];
    for (int i = 0; i < 64; i++) { A[i] = (float)((i * 5) % 9 - 4) / 4; B[i] = (float)((i * 3) % 7 - 3) / 2; D0[i] = (float)(i % 5); }
    for (int i = 0; i < 8; i++) bias[i] = (float)i / 8;
    float *dA, *dB, *dD, *dbias;
    CHECK(cudaMalloc(&dA, sizeof(A))); CHECK(cudaMalloc(&dB, sizeof(B)));
    CHECK(cudaMalloc(&dD, sizeof(out))); CHECK(cudaMalloc(&dbias, sizeof(bias)));
    CHECK(cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbias, bias, sizeof(bias), cudaMemcpyHostToDevice));
    cublasLtHandle_t none = NULL;
    cublasLtMatmulPreference_t p;
    cublasLtMatmulPreferenceCreate(&p);
    cublasLtMatmulHeuristicResult_t r;
    int found;
    expect(cublasLtMatmulAlgoGetHeuristic(none, NULL, NULL, NULL, NULL, NULL, p, 1, &r, &found) == CUBLAS_STATUS_NOT_INITIALIZED,
           "cuBLASLt: a handle cublasLtCreate did not make is CUBLAS_STATUS_NOT_INITIALIZED");
    cublasLtMatmulPreferenceDestroy(p);
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) { expect(0, "cublasLtCreate"); return; }
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int withbias = 0; withbias < 2; withbias++) {
                int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldd = m + 1;  // padded leading dimensions
                float beta = withbias ? 0.0f : 0.5f;
                CHECK(cudaMemcpy(dD, D0, sizeof(D0), cudaMemcpyHostToDevice));
                cublasStatus_t st = lt_matmul(CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, ta, tb, m, n, k, dA, lda, dB, ldb,
                                              dD, ldd, withbias ? dbias : NULL, -1, beta);
                CHECK(cudaMemcpy(out, dD, sizeof(out), cudaMemcpyDeviceToHost));
                double worst = 0.0;
                int untouched = 1;
                for (int j = 0; j < n; j++) {
                    for (int i = 0; i < m; i++) {
                        double s = beta * D0[i + j * ldd] + (withbias ? bias[i] : 0.0);
                        for (int l = 0; l < k; l++)
                            s += (double)(ta ? A[l + i * lda] : A[i + l * lda]) * (tb ? B[j + l * ldb] : B[l + j * ldb]);
                        worst = fmax(worst, fabs(out[i + j * ldd] - s));
                    }
                    untouched &= out[m + j * ldd] == D0[m + j * ldd];  // the padding row of D
                }
                char buf[160];
                snprintf(buf, sizeof(buf), "cuBLASLt fp32 transa %d transb %d %s: error %.1e vs the definition, padding untouched",
                         ta, tb, withbias ? "bias epilogue (beta 0)" : "beta 0.5", worst);
                expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-5 && untouched, buf);
            }
    // bf16 in, fp32 out (the weight gradients); fp16 in, fp16 out with bias; TF32 rounds its inputs
    __nv_bfloat16 Ab[64], Bb[64];
    __half Ah[64], Bh[64], Dh[64], biash[8];
    for (int i = 0; i < 64; i++) { Ab[i] = __float2bfloat16(A[i]); Bb[i] = __float2bfloat16(B[i]); Ah[i] = __float2half(A[i]); Bh[i] = __float2half(B[i]); }
    for (int i = 0; i < 8; i++) biash[i] = __float2half(bias[i]);
    void *d16a, *d16b, *d16d, *d16bias;
    CHECK(cudaMalloc(&d16a, 128)); CHECK(cudaMalloc(&d16b, 128)); CHECK(cudaMalloc(&d16d, 128)); CHECK(cudaMalloc(&d16bias, 16));
    CHECK(cudaMemcpy(d16a, Ab, 128, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d16b, Bb, 128, cudaMemcpyHostToDevice));
    cublasStatus_t st = lt_matmul(CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 1, m, n, k, d16a, m, d16b, n, dD, m, NULL, -1, 0.0f);
    CHECK(cudaMemcpy(out, dD, sizeof(out), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int l = 0; l < k; l++) s += (double)__bfloat162float(Ab[i + l * m]) * __bfloat162float(Bb[j + l * n]);
            worst = fmax(worst, fabs(out[i + j * m] - s));
        }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-6, "cuBLASLt bf16 A, B with an fp32 D (exact products, fp32 sums)");
    CHECK(cudaMemcpy(d16a, Ah, 128, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d16b, Bh, 128, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d16bias, biash, 16, cudaMemcpyHostToDevice));
    st = lt_matmul(CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 1, 0, m, n, k, d16a, k, d16b, k, d16d, m, d16bias, -1, 0.0f);
    CHECK(cudaMemcpy(Dh, d16d, 2 * m * n, cudaMemcpyDeviceToHost));
    worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = __half2float(biash[i]);
            for (int l = 0; l < k; l++) s += (double)__half2float(Ah[l + i * k]) * __half2float(Bh[l + j * k]);
            worst = fmax(worst, fabs(__half2float(Dh[i + j * m]) - s) / fmax(1.0, fabs(s)));
        }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-3, "cuBLASLt fp16 with a bias of D's type (broadcast along D's rows)");
    // TF32: 1 + 2^-12 keeps only 10 mantissa bits, so (1 + 2^-12)^2 computes as 1
    float one[1] = {1.0f + 1.0f / 4096}, res[1];
    float *d1, *d2;
    CHECK(cudaMalloc(&d1, 4)); CHECK(cudaMalloc(&d2, 4));
    CHECK(cudaMemcpy(d1, one, 4, cudaMemcpyHostToDevice));
    lt_matmul(CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 0, 0, 1, 1, 1, d1, 1, d1, 1, d2, 1, NULL, -1, 0.0f);
    CHECK(cudaMemcpy(res, d2, 4, cudaMemcpyDeviceToHost));
    float tf = res[0];
    lt_matmul(CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 0, 1, 1, 1, d1, 1, d1, 1, d2, 1, NULL, -1, 0.0f);
    CHECK(cudaMemcpy(res, d2, 4, cudaMemcpyDeviceToHost));
    expect(tf == 1.0f && res[0] > 1.0f, "cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32 rounds inputs to TF32, CUBLAS_COMPUTE_32F does not");
    // what the library refuses
    expect(lt_matmul(CUDA_R_16F, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0, 0, m, n, k, d16a, m, d16b, k, d16d, m, NULL, -1, 0.0f) ==
           CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt refuses fp16 A, B with a bf16 D");
    expect(lt_matmul(CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F_FAST_TF32, 0, 0, m, n, k, d16a, m, d16b, k, d16d, m, NULL, -1, 0.0f) ==
           CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt refuses TF32 compute on fp16 inputs");
    expect(lt_matmul(CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 0, 0, m, n, k, d16a, m, d16b, k, d16d, m, d16bias, CUDA_R_32F, 0.0f) ==
           CUBLAS_STATUS_NOT_SUPPORTED, "cuBLASLt refuses an fp32 bias with an fp16 D (the bias has D's type)");
    expect(lt_matmul(CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 0, m, n, k, dA, m - 1, dB, k, dD, m, NULL, -1, 0.0f) ==
           CUBLAS_STATUS_INVALID_VALUE, "cuBLASLt refuses a leading dimension smaller than the rows");
    check_cublaslt_epilogues();
    cublasLtDestroy(lt);
}

// One fp32 matmul D (m x n, ld m) = op(A) op(B) with an epilogue and its operands; returns the status of the call.
static cublasStatus_t lt_epilogue(cublasLtEpilogue_t epi, int ta, int tb, int m, int n, int k, const float *A, const float *B,
                                  float *D, const float *bias_in, float *bias_out, float *aux, long aux_ld) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    const void *bias = bias_in ? (const void *)bias_in : (const void *)bias_out;
    if (bias) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (aux) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    int64_t ald = aux_ld;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof(ald));
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta ? k : m, ta ? m : k, ta ? k : m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb ? n : k, tb ? k : n, tb ? n : k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found);
    float alpha = 1.0f, beta = 0.0f;
    if (st == CUBLAS_STATUS_SUCCESS && found == 1)
        st = cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, NULL, 0, 0);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return st;
}

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// The epilogues the trainer uses (cublasLt.h): GELU_AUX_BIAS (bias, GELU's input to aux, GELU), DGELU (times GELU's
// derivative at aux), BGRADA / BGRADB (op(A) summed over k per row of D / op(B) summed over k per column of D,
// written), against the definition; and what they refuse.
static void check_cublaslt_epilogues(void) {
    const int m = 8, n = 3, k = 5;  // m: aux's leading dimension must be a multiple of 8
    float A[40], B[15], bias[8], D[24], aux[24], g[8], ref[24];
    for (int i = 0; i < 40; i++) A[i] = (float)((i * 5) % 9 - 4) / 4;
    for (int i = 0; i < 15; i++) B[i] = (float)((i * 3) % 7 - 3) / 2;
    for (int i = 0; i < 8; i++) bias[i] = (float)i / 8 - 0.5f;
    float *dA, *dB, *dD, *dbias, *daux, *dg;
    CHECK(cudaMalloc(&dA, sizeof(A))); CHECK(cudaMalloc(&dB, sizeof(B))); CHECK(cudaMalloc(&dD, sizeof(D)));
    CHECK(cudaMalloc(&dbias, sizeof(bias))); CHECK(cudaMalloc(&daux, sizeof(aux))); CHECK(cudaMalloc(&dg, sizeof(g)));
    CHECK(cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice)); CHECK(cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbias, bias, sizeof(bias), cudaMemcpyHostToDevice));
    for (int j = 0; j < n; j++)  // op(A) = A (m x k, ld m), op(B) = B (k x n, ld k)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int l = 0; l < k; l++) s += (double)A[i + l * m] * B[l + j * k];
            ref[i + j * m] = (float)s;
        }
    cublasStatus_t st = lt_epilogue(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 0, 0, m, n, k, dA, dB, dD, dbias, NULL, daux, m);
    CHECK(cudaMemcpy(D, dD, sizeof(D), cudaMemcpyDeviceToHost)); CHECK(cudaMemcpy(aux, daux, sizeof(aux), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int i = 0; i < m * n; i++) {
        double pre = (double)ref[i] + bias[i % m];
        worst = fmax(worst, fmax(fabs(aux[i] - pre), fabs(D[i] - gelu_d(pre))));
    }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-5, "cuBLASLt GELU_AUX_BIAS: the biased product in aux, its GELU in D");
    st = lt_epilogue(CUBLASLT_EPILOGUE_DGELU, 0, 0, m, n, k, dA, dB, dD, NULL, NULL, daux, m);
    CHECK(cudaMemcpy(D, dD, sizeof(D), cudaMemcpyDeviceToHost));
    worst = 0.0;
    for (int i = 0; i < m * n; i++) {
        double x = aux[i], h = 1e-4, slope = (gelu_d(x + h) - gelu_d(x - h)) / (2 * h);
        worst = fmax(worst, fabs(D[i] - ref[i] * slope));
    }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-4, "cuBLASLt DGELU: the product times GELU's derivative at aux");
    // BGRADB with op(B) = B^T read from an n x k matrix (the weight gradient's layout): n sums over k, written
    CHECK(cudaMemset(dg, 0x7f, sizeof(g)));
    st = lt_epilogue(CUBLASLT_EPILOGUE_BGRADB, 0, 1, m, n, k, dA, dB, dD, NULL, dg, NULL, 0);
    CHECK(cudaMemcpy(g, dg, sizeof(g), cudaMemcpyDeviceToHost));
    worst = 0.0;
    for (int j = 0; j < n; j++) {
        double s = 0.0;
        for (int l = 0; l < k; l++) s += B[j + l * n];
        worst = fmax(worst, fabs(g[j] - s));
    }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-6, "cuBLASLt BGRADB: op(B) summed over k, one value per column of D");
    st = lt_epilogue(CUBLASLT_EPILOGUE_BGRADA, 1, 0, m, n, k, dA, dB, dD, NULL, dg, NULL, 0);
    CHECK(cudaMemcpy(g, dg, sizeof(g), cudaMemcpyDeviceToHost));
    worst = 0.0;
    for (int i = 0; i < m; i++) {
        double s = 0.0;
        for (int l = 0; l < k; l++) s += A[l + i * k];
        worst = fmax(worst, fabs(g[i] - s));
    }
    expect(st == CUBLAS_STATUS_SUCCESS && worst < 1e-6, "cuBLASLt BGRADA: op(A) summed over k, one value per row of D");
    expect(lt_epilogue(CUBLASLT_EPILOGUE_DGELU, 0, 0, m, n, k, dA, dB, dD, NULL, NULL, NULL, m) == CUBLAS_STATUS_INVALID_VALUE,
           "cuBLASLt refuses DGELU without the aux pointer (GELU's input)");
    expect(lt_epilogue(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 0, 0, m, n, k, dA, dB, dD, dbias, NULL, daux, m + 4) ==
           CUBLAS_STATUS_INVALID_VALUE, "cuBLASLt refuses an aux leading dimension not divisible by 8");
    expect(lt_epilogue(CUBLASLT_EPILOGUE_DRELU, 0, 0, m, n, k, dA, dB, dD, NULL, NULL, daux, m) == CUBLAS_STATUS_NOT_SUPPORTED,
           "cuBLASLt (emulated) refuses an epilogue it does not implement (DRELU)");
}

// ---- blocks that wait on each other (cuda/block_order.cuh) ----

// Block b takes turn `turn` (b, or nblocks - 1 - b: waits on blocks the grid starts later) on acc: every thread
// reads another thread's element, written by the previous turn's block, and writes its own; the result tells the
// order of the turns. fences: bit 0 the release's __threadfence, bit 1 the acquire's (the broken modes drop one).
__global__ void take_turns(float *acc, int *counter, int reverse, int fences) {
    const int b = blockIdx.x, turn = reverse ? gridDim.x - 1 - b : b, i = threadIdx.x;
    if (i == 0) {
        if (fences == 3) block_order_wait(counter, turn);
        else {
            while (atomicAdd(counter, 0) < turn) __nanosleep(64);
            if (fences & 2) __threadfence();
        }
    }
    __syncthreads();
    const float x = turn == 0 ? 0.0f : acc[(i + 1) % blockDim.x];
    __syncthreads();
    acc[i] = x * 3.0f + (float)turn + 1.0f;
    __syncthreads();
    if (i == 0) {
        if (fences == 3) block_order_release(counter);
        else {
            if (fences & 1) __threadfence();
            atomicAdd(counter, 1);
        }
    }
}
// Two blocks that each wait for the other to go first.
__global__ void wait_cycle(int *counter) {
    if (threadIdx.x == 0) block_order_wait(&counter[blockIdx.x], 1);
    __syncthreads();
    if (threadIdx.x == 0) block_order_release(&counter[1 - blockIdx.x]);
}

static int turns_ok(int reverse, int fences, int nblocks) {
    float *acc;
    int *counter;
    CHECK(cudaMalloc(&acc, 64 * sizeof(float)));
    CHECK(cudaMalloc(&counter, sizeof(int)));
    CHECK(cudaMemset(counter, 0, sizeof(int)));
    LAUNCH(nblocks, 64, 0, 0, take_turns)(acc, counter, reverse, fences);
    float h[64];
    int c = 0;
    CHECK(cudaMemcpy(h, acc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&c, counter, sizeof(int), cudaMemcpyDeviceToHost));
    float want = 0.0f;
    for (int t = 0; t < nblocks; t++) want = want * 3.0f + (float)t + 1.0f;
    int ok = c == nblocks;
    for (int i = 0; i < 64; i++) ok &= h[i] == want;
    CHECK(cudaFree(acc));
    CHECK(cudaFree(counter));
    return ok;
}

static void check_block_order(void) {
    expect(turns_ok(0, 3, 9), "blocks take turns in block order through a counter (cuda/block_order.cuh)");
    expect(turns_ok(1, 3, 9), "blocks take turns in reverse block order: each waits on blocks started after it");
}

// ---- broken programs: each must stop with the emulator's message ----

__global__ void exited_lane(int *out) {
    if (threadIdx.x == 5) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}
__global__ void different_collectives(int *out) {
    if (threadIdx.x < 16) __syncwarp();
    else out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}
__global__ void barrier_skipped(int *out) {
    if (threadIdx.x >= 32) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void deadlock(int *out) {
    if (threadIdx.x == 0) __syncthreads();
    else __syncwarp();
    out[threadIdx.x] = 1;
}
__global__ void shfl_unnamed(int *out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1, 20);
}
__global__ void race(int *out) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x;
    out[threadIdx.x] = s[63 - threadIdx.x];  // no __syncthreads between the write and the read
}
__global__ void write_one(float *p) { p[threadIdx.x] = 1.0f; }
__global__ void cp_async_no_wait(const uint4 *src, uint4 *out) {
    DYNAMIC_SHARED(uint4, s);
    cp_async_16(&s[threadIdx.x], &src[threadIdx.x], true);
    cp_async_commit();
    __syncthreads();  // no cp.async.wait_group before it: what is read is 0xff, and the copies are in flight at exit
    out[threadIdx.x] = s[63 - threadIdx.x];
}
__global__ void cp_async_uncommitted(const uint4 *src, uint4 *out) {
    DYNAMIC_SHARED(uint4, s);
    cp_async_16(&s[threadIdx.x], &src[threadIdx.x], true);
    cp_async_wait<0>();  // waits for committed groups only: this copy never lands
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}
__global__ void cp_async_no_barrier(const uint4 *src, uint4 *out) {
    DYNAMIC_SHARED(uint4, s);
    cp_async_16(&s[threadIdx.x], &src[threadIdx.x], true);
    cp_async_commit();
    cp_async_wait<0>();
    out[threadIdx.x] = s[63 - threadIdx.x];  // another thread's copy with no __syncthreads after the waits
}

// Graphs (stream capture): what is captured runs only at replay; arguments are frozen at capture, memory is read at
// replay; a call that waits during capture is refused and invalidates it.
__global__ void add_scalar(float *x, float v, const float *w) { x[threadIdx.x] += v + (w ? *w : 0.0f); }
static void check_graphs(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *x, *w, host[4];
    CHECK(cudaMalloc(&x, 4 * sizeof(float)));
    CHECK(cudaMalloc(&w, sizeof(float)));
    CHECK(cudaMemset(x, 0, 4 * sizeof(float)));
    float one = 1.0f, v = 10.0f;
    CHECK(cudaMemcpy(w, &one, sizeof(float), cudaMemcpyHostToDevice));
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamIsCapturing(s, &st));
    LAUNCH(1, 4, 0, s, add_scalar)(x, v, w);  // x += 10 + *w
    CHECK(cudaMemsetAsync(w, 0, sizeof(float), s));  // then *w = 0 ...
    LAUNCH(1, 4, 0, s, add_scalar)(x, v, w);  // ... and x += 10 + *w again
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
    expect(st == cudaStreamCaptureStatusActive && host[0] == 0.0f, "graphs: captured work is recorded, not run");
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
    expect(host[0] == 21.0f && host[3] == 21.0f, "graphs: a launch replays the recorded kernels and memset in order");
    v = 1000.0f;  // a host value changed after capture: the replay still adds the captured 10
    float two = 2.0f;  // a value behind a device pointer: the replay reads it as it is now
    CHECK(cudaMemcpy(w, &two, sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
    expect(host[0] == 21.0f + 12.0f + 10.0f, "graphs: a replay sees kernel arguments as captured, device memory as it is now");
    // memory the graph does not refer to may come and go; memory it refers to may go once the graph has
    float *other;
    CHECK(cudaMalloc(&other, 64));
    CHECK(cudaFree(other));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
    expect(host[0] == 43.0f + 20.0f, "graphs: a replay after a free of memory the graph does not refer to runs");
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    // waiting during capture: refused, named, and the capture is invalidated
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LAUNCH(1, 4, 0, s, add_scalar)(x, v, (const float *)NULL);
    cudaError_t sync = cudaDeviceSynchronize();
    cudaError_t copy = cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost);
    CHECK(cudaStreamIsCapturing(s, &st));
    cudaError_t end = cudaStreamEndCapture(s, &g);
    (void)cudaGetLastError();
    CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
    expect(sync == cudaErrorStreamCaptureUnsupported && copy == cudaErrorStreamCaptureUnsupported &&
           st == cudaStreamCaptureStatusInvalidated && end == cudaErrorStreamCaptureInvalidated && g == NULL &&
           host[0] == 63.0f, "graphs: cudaDeviceSynchronize and cudaMemcpy during capture are refused, the capture invalidated, nothing run");
    // the legacy default stream while a blocking stream captures
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LAUNCH(1, 4, 0, 0, add_scalar)(x, v, (const float *)NULL);
    cudaError_t legacy = cudaGetLastError();
    end = cudaStreamEndCapture(s, &g);
    (void)cudaGetLastError();
    expect(legacy == cudaErrorStreamCaptureImplicit && end == cudaErrorStreamCaptureInvalidated,
           "graphs: a launch on the legacy stream during capture is refused (cudaErrorStreamCaptureImplicit)");
    CHECK(cudaFree(x));
    CHECK(cudaFree(w));
    CHECK(cudaStreamDestroy(s));
}

struct Span {
    float *p;
    int n;
};
__global__ void write_through(Span a) {
    if ((int)threadIdx.x < a.n) a.p[threadIdx.x] = 1.0f;
}

static int broken(const char *mode) {
    int *d;
    CHECK(cudaMalloc(&d, 64 * sizeof(int)));
    if (!strcmp(mode, "exited-lane")) LAUNCH(1, 32, 0, 0, exited_lane)(d);
    else if (!strcmp(mode, "different-collectives")) LAUNCH(1, 32, 0, 0, different_collectives)(d);
    else if (!strcmp(mode, "barrier-skipped")) LAUNCH(1, 64, 0, 0, barrier_skipped)(d);
    else if (!strcmp(mode, "deadlock")) LAUNCH(1, 32, 0, 0, deadlock)(d);
    else if (!strcmp(mode, "shfl-unnamed")) LAUNCH(1, 32, 0, 0, shfl_unnamed)(d);
    else if (!strcmp(mode, "race")) LAUNCH(1, 64, 0, 0, race)(d);
    else if (!strcmp(mode, "out-of-bounds")) LAUNCH(1, 65, 0, 0, write_one)((float *)d);
    else if (!strcmp(mode, "block-cycle")) {
        CHECK(cudaMemset(d, 0, 2 * sizeof(int)));
        LAUNCH(2, 32, 0, 0, wait_cycle)(d);
    } else if (!strcmp(mode, "block-successor")) {  // one block resident: a wait on a later block never ends
        if (!turns_ok(1, 3, 4)) printf("block-successor: wrong result\n");
    } else if (!strcmp(mode, "block-no-release")) {
        if (!turns_ok(0, 2, 4)) printf("block-no-release: wrong result\n");
    } else if (!strcmp(mode, "block-no-acquire")) {
        if (!turns_ok(0, 1, 4)) printf("block-no-acquire: wrong result\n");
    } else if (!strcmp(mode, "block-fences")) {  // the same with both fences: no race
        if (turns_ok(0, 3, 4) && turns_ok(1, 3, 4)) { printf("block-fences: ok\n"); return 0; }
        printf("block-fences: wrong result\n");
        return 1;
    }
    else if (!strncmp(mode, "cp-async-", 9)) {
        uint4 *src, *out;
        CHECK(cudaMalloc(&src, 64 * sizeof(uint4)));
        CHECK(cudaMalloc(&out, 64 * sizeof(uint4)));
        CHECK(cudaMemset(src, 0, 64 * sizeof(uint4)));
        if (!strcmp(mode, "cp-async-no-wait")) LAUNCH(1, 64, 64 * sizeof(uint4), 0, cp_async_no_wait)(src, out);
        else if (!strcmp(mode, "cp-async-uncommitted")) LAUNCH(1, 64, 64 * sizeof(uint4), 0, cp_async_uncommitted)(src, out);
        else if (!strcmp(mode, "cp-async-no-barrier")) LAUNCH(1, 64, 64 * sizeof(uint4), 0, cp_async_no_barrier)(src, out);
        else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    }
    else if (!strcmp(mode, "host-pointer")) {
        static float host[64];
        LAUNCH(1, 64, 0, 0, write_one)(host);
    } else if (!strncmp(mode, "graph-freed", 11)) {
        // a graph replayed after memory it captured was freed: a kernel's pointer inside a struct argument (allocated
        // again at the same size: should the allocator put it where it was, only its serial number tells it apart),
        // or a copy's source
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        float *buf, *dst;
        CHECK(cudaMalloc(&buf, 64 * sizeof(float)));
        CHECK(cudaMalloc(&dst, 64 * sizeof(float)));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        if (!strcmp(mode, "graph-freed")) LAUNCH(1, 32, 0, s, write_through)(Span{buf, 32});
        else CHECK(cudaMemcpyAsync(dst, buf, 64 * sizeof(float), cudaMemcpyDeviceToDevice, s));
        CHECK(cudaStreamEndCapture(s, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        CHECK(cudaGraphDestroy(g));
        CHECK(cudaGraphLaunch(ge, s));  // fine: nothing freed yet
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFree(buf));
        float *again;
        CHECK(cudaMalloc(&again, 64 * sizeof(float)));
        printf("%s: the buffer was at %p, its successor is at %p\n", mode, (void *)buf, (void *)again);
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaStreamSynchronize(s));
    } else if (!strcmp(mode, "copy-past-end")) {
        int x[65];
        cudaMemcpy(d, x, sizeof(x), cudaMemcpyHostToDevice);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    cudaDeviceSynchronize();
    printf("%s: not caught\n", mode);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    (void)x_prec, (void)main_stream;  // cuda/common.cuh's (included for the attention's ldmatrix wrappers), unused here
    if (!strcmp(mode, "block-successor")) {  // before the emulator reads its settings
        setenv("TRAIN_GPT_EMU_RESIDENT", "1", 1);
        setenv("TRAIN_GPT_EMU_ORDER", "forward", 1);
    }
    if (!strcmp(mode, "blocks")) {  // the waits alone, for runs in every block order and under the race detector
        check_block_order();
        printf("%d passed, %d failed\n", passes, fails);
        return fails ? 1 : 0;
    }
    if (strcmp(mode, "ok") != 0) return broken(mode);
    check_shuffles();
    check_barriers();
    check_memory();
    check_async_copies();
    check_block_order();
    check_cublaslt();
    check_graphs();
    printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
