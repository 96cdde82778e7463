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
#include "../base/utils.h"
#include "activations.h"  // the fused forms' second kernel
#include "gemm.h"  // gemm, the products below

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

// dinp = dout @ weight (overwritten: every caller's dinp is scratch); dweight, dbias += their sums. dinp NULL: the
// weight's gradient alone; dweight NULL: the input's alone (a tied head at a pipeline's output end: pipeline.h).
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int C, int OC) {
    if (dinp) gemm(N, C, OC, dout, OC, 1, weight, C, 1, dinp, C, 1, 0);
    // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC): walking dout by rows, not columns, keeps the
    // large operand streaming and the small one (inp) in cache
    if (dweight) gemm(C, OC, N, inp, 1, C, dout, OC, 1, dweight, 1, C, 1);
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
