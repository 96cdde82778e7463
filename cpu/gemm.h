// cpu/gemm.h: the CPU build's one matrix multiply (cpu/matmul.h's products, and Muon's Newton-Schulz on host
// memory: cpu/muon_host.h, which the CUDA build's host tier runs too).
#ifndef CPU_GEMM_H
#define CPU_GEMM_H

#ifdef _OPENMP
#include <omp.h>
#endif
#include "../base/utils.h"

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

#endif  // CPU_GEMM_H
