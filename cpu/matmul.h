// cpu/matmul.h: the CPU build's matrix multiplies: one strided, register-tiled gemm for the forward and both
// backward products, the one-row products of generation (gemv, and a transposed copy of the classifier while a
// sample is decoded), and the fused forms of backend.h as the two kernels they replace.
#ifndef CPU_MATMUL_H
#define CPU_MATMUL_H

#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../utils.h"
#include "gelu.h"  // the fused forms' second kernel

// ----------------------------------------------------------------------------
// Matrix multiply: C[M,N] (+)= A[M,K] * B[K,N], with A and B read through strides so that the
// forward (B = W^T) and both backward products use one kernel without transposed copies. Each
// task packs a K x TN panel of B contiguously (one pass, so a strided B costs nothing in the inner
// loop), then sweeps TM-row tiles of A over it with a TM x TN block of accumulators held in
// registers: per k it broadcasts TM values of A and loads TN/16 vectors of the panel.

#ifdef __AVX512F__
#define GEMM_TM 12
#define GEMM_TN 32
#else
#define GEMM_TM 6
#define GEMM_TN 16
#endif
#define GEMM_ROWS_PER_TASK (8 * GEMM_TM)
#define GEMM_KC 256  // a KC x TN panel (32 KiB) stays in L1 while every row tile sweeps it

static void gemm_tile(int K, const float *const arow[GEMM_TM], long sak, const float *panel, float *C, long scm,
                      long scn, int rows, int cols, int accumulate) {
    float acc[GEMM_TM][GEMM_TN];
    for (int r = 0; r < GEMM_TM; r++)
        for (int c = 0; c < GEMM_TN; c++) acc[r][c] = 0.0f;
    for (int k = 0; k < K; k++) {
        const float *b = panel + (long)k * GEMM_TN;
        for (int r = 0; r < GEMM_TM; r++) {
            float a = arow[r][k * sak];
#pragma omp simd
            for (int c = 0; c < GEMM_TN; c++) acc[r][c] += a * b[c];
        }
    }
    for (int r = 0; r < rows; r++) {
        float *crow = C + (long)r * scm;
        if (accumulate) for (int c = 0; c < cols; c++) crow[c * scn] += acc[r][c];
        else for (int c = 0; c < cols; c++) crow[c * scn] = acc[r][c];
    }
}

static void gemm(int M, int N, int K, const float *A, long sam, long sak, const float *B, long sbk, long sbn,
                 float *C, long scm, long scn, int accumulate) {
    int nblocks = (N + GEMM_TN - 1) / GEMM_TN;
    // Split M across tasks only when the column blocks alone cannot keep every thread busy: each
    // extra row chunk packs the same panels again.
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    int rows_per_task = nblocks >= 2 * threads ? M : GEMM_ROWS_PER_TASK;
    if (rows_per_task < 1) rows_per_task = 1;
    int mchunks = (M + rows_per_task - 1) / rows_per_task;
    long ntasks = (long)nblocks * mchunks;
#pragma omp parallel
    {
        float *panel = (float *)mallocCheck((size_t)GEMM_KC * GEMM_TN * sizeof(float));
        long packed = -1;  // with a single K block, consecutive tasks of a thread share the panel
#pragma omp for schedule(static)
        for (long task = 0; task < ntasks; task++) {
            int nb = (int)(task / mchunks), mc = (int)(task % mchunks);
            int n0 = nb * GEMM_TN, cols = N - n0 < GEMM_TN ? N - n0 : GEMM_TN;
            int mbegin = mc * rows_per_task;
            int mend = mbegin + rows_per_task < M ? mbegin + rows_per_task : M;
            for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
                int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                for (int k = 0; k < kc && !(K <= GEMM_KC && packed == nb); k++) {
                    float *dst = panel + (long)k * GEMM_TN;
                    const float *src = B + (long)(k0 + k) * sbk + (long)n0 * sbn;
                    for (int c = 0; c < cols; c++) dst[c] = src[c * sbn];
                    for (int c = cols; c < GEMM_TN; c++) dst[c] = 0.0f;
                }
                packed = nb;
                for (int m0 = mbegin; m0 < mend; m0 += GEMM_TM) {
                    int rows = mend - m0 < GEMM_TM ? mend - m0 : GEMM_TM;
                    const float *arow[GEMM_TM];
                    for (int r = 0; r < GEMM_TM; r++) arow[r] = A + (long)(m0 + (r < rows ? r : 0)) * sam + (long)k0 * sak;
                    gemm_tile(kc, arow, sak, panel, C + (long)m0 * scm + (long)n0 * scn, scm, scn, rows, cols,
                              accumulate || k0 > 0);
                }
            }
        }
        free(panel);
    }
}


// One row (generation with the key/value cache): out[o] = inp . weight[o] with gemm's arithmetic per
// element (a multiply-add chain over k, block by block of GEMM_KC, the blocks summed in order), so a
// token's logits are those of a longer forward bit for bit; without gemm's packed panels and 12-row
// tiles, which for one row are all overhead. Eight output rows at a time keep eight chains in flight.
#define GEMV_ROWS 8
#ifdef __FMA__
#define GEMV_MADD(a, b, acc) fmaf(a, b, acc)  // what the compiler makes of gemm_tile's acc += a * b
#else
#define GEMV_MADD(a, b, acc) ((acc) + (a) * (b))
#endif
static void gemv(float *out, const float *inp, const float *weight, int C, int OC) {
#pragma omp parallel for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += GEMV_ROWS) {
        int n = OC - o0 < GEMV_ROWS ? OC - o0 : GEMV_ROWS;
        const float *w[GEMV_ROWS];  // the rows (the last block repeats its first row where OC runs out)
        for (int j = 0; j < GEMV_ROWS; j++) w[j] = weight + (long)(o0 + (j < n ? j : 0)) * C;
        float total[GEMV_ROWS];
        for (int k0 = 0; k0 < C; k0 += GEMM_KC) {
            int kend = C - k0 < GEMM_KC ? C : k0 + GEMM_KC;
            float acc[GEMV_ROWS] = {0};
            for (int k = k0; k < kend; k++) {
                float a = inp[k];
                for (int j = 0; j < GEMV_ROWS; j++) acc[j] = GEMV_MADD(a, w[j][k], acc[j]);
            }
            for (int j = 0; j < GEMV_ROWS; j++) total[j] = k0 == 0 ? acc[j] : total[j] + acc[j];
        }
        for (int j = 0; j < n; j++) out[o0 + j] = total[j];
    }
}

// While a sample is generated (backend_decode_begin/end, called by model.h) the weights do not
// change. The largest one-row product, the tied classifier's (Vp x C, Vp >= 8C), then reads a
// transpose of the weight made at its first use in the sample: its columns are contiguous, so
// every token streams them with full-width vector multiply-adds, one output per lane and in gemm's
// order (bit for bit the same logits), instead of gathering eight rows at a time.
#define GEMVT_COLS 64
static int decode_active = 0;
static const float *gemvt_src = NULL;  // the weight whose transpose gemvt holds
static float *gemvt = NULL;            // (C, OC rounded up to GEMVT_COLS), zero-padded
static void backend_decode_begin(void) { decode_active = 1; }
static void backend_decode_end(void) {
    decode_active = 0;
    free(gemvt);
    gemvt = NULL;
    gemvt_src = NULL;
}

static void gemv_transposed(float *out, const float *inp, const float *weight, int C, int OC) {
    long OCp = (OC + GEMVT_COLS - 1) / GEMVT_COLS * GEMVT_COLS;
    if (gemvt_src != weight) {
        free(gemvt);
        gemvt = (float *)callocCheck((size_t)C * OCp, sizeof(float));
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++)
            for (int k = 0; k < C; k++) gemvt[(long)k * OCp + o] = weight[(long)o * C + k];
        gemvt_src = weight;
    }
#pragma omp parallel for schedule(static)
    for (long o0 = 0; o0 < OCp; o0 += GEMVT_COLS) {
        float total[GEMVT_COLS];
        for (int k0 = 0; k0 < C; k0 += GEMM_KC) {
            int kend = C - k0 < GEMM_KC ? C : k0 + GEMM_KC;
            float acc[GEMVT_COLS] = {0};
            for (int k = k0; k < kend; k++) {
                float a = inp[k];
                const float *col = gemvt + (long)k * OCp + o0;
#pragma omp simd
                for (int j = 0; j < GEMVT_COLS; j++) acc[j] += a * col[j];
            }
            for (int j = 0; j < GEMVT_COLS; j++) total[j] = k0 == 0 ? acc[j] : total[j] + acc[j];
        }
        for (int j = 0; j < GEMVT_COLS && o0 + j < OC; j++) out[o0 + j] = total[j];
    }
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (N == 1 && decode_active && OC >= 8 * C) gemv_transposed(out, inp, weight, C, OC);
    else if (N == 1) gemv(out, inp, weight, C, OC);
    else gemm(N, OC, C, inp, C, 1, weight, 1, C, out, OC, 1, 0);
    if (bias) {
#pragma omp parallel for
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) out[(long)i * OC + o] += bias[o];
    }
}

// dinp = dout @ weight (overwritten: every caller's dinp is scratch); dweight, dbias += their sums.
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int C, int OC) {
    gemm(N, C, OC, dout, OC, 1, weight, C, 1, dinp, C, 1, 0);
    // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC): walking dout by rows, not columns, keeps the
    // large operand streaming and the small one (inp) in cache
    gemm(C, OC, N, inp, 1, C, dout, OC, 1, dweight, 1, C, 1);
    if (dbias) {
#pragma omp parallel for
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int i = 0; i < N; i++) s += dout[(long)i * OC + o];
            dbias[o] += s;
        }
    }
}

// The fused forms of backend.h, as the two kernels they replace (the CUDA build's epilogues are checked against
// these by dev/cuda/kernels.cu); model.h never takes them here.
static int backend_fuses_gelu(void) { return 0; }
static int backend_fuses_residual(void) { return 0; }
static void matmul_forward_gelu(float *out, float *pre, const float *inp, const float *weight, const float *bias, int N, int C,
                                int OC) {
    matmul_forward(pre, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre, (long)N * OC);
}
static void matmul_forward_residual(float *out, const float *residual, const float *inp, const float *weight,
                                    const float *bias, int N, int C, int OC) {
    matmul_forward(out, inp, weight, bias, N, C, OC);
    residual_forward(out, residual, out, (long)N * OC);
}
static void matmul_backward_dgelu(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                  const float *weight, const float *pre, int N, int C, int OC) {
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    gelu_backward(dinp, pre, dinp, (long)N * C);
}

#endif
