// train_gpt.c: the CPU reference build of the trainer. Plain fp32 C with OpenMP on every hot loop.
// The model lives here (kernels, the layer-by-layer forward and backward, AdamW); the training
// loop, evaluation, sampling, checkpoints and logs come from trainer.h, which the CUDA build
// shares, so the two builds run the same loop and differ only in the model functions below.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "utils.h"
#include "gpt2.h"

// The facts backend.h asks of a build, then the contract this file implements.
#define BUILD_NAME "cpu"
// The reference computes in fp32 only (config_resolve_precision refuses the others).
#define PRECISION_DEFAULT "fp32"
#define PRECISIONS_BUILT "fp32"
// The model keeps each row's full softmax (B, NH, T, T) for attention's backward.
#define ATT_SAVED_FLOATS(B, NH, T) ((size_t)(B) * (NH) * (T) * (T))
#include "backend.h"

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

// ----------------------------------------------------------------------------
// Kernels. Shapes: B batch, T time, C channels, OC output channels, NH heads.

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((long)b * T + t) * C;
            const float *we = wte + (long)inp[b * T + t] * C, *pe = wpe + (long)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

// Serial over tokens: two tokens may share an embedding row, and a fixed order keeps it deterministic.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((long)b * T + t) * C;
            float *dwt = dwte + (long)inp[b * T + t] * C, *dwp = dwpe + (long)t * C;
            for (int i = 0; i < C; i++) { dwt[i] += d[i]; dwp[i] += d[i]; }
        }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int N, int C) {
    const float eps = 1e-5f;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (long)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (long)i * C;
        for (int c = 0; c < C; c++) o[c] = (s * (x[c] - m)) * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

// dinp += LN'(dout); dweight, dbias += their sums over rows.
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *d = dout + (long)i * C, *x = inp + (long)i * C;
        float m = mean[i], s = rstd[i];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float *di = dinp + (long)i * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
            di[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    // the parameter gradients reduce over rows: split by channel so threads never share an output
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f, db = 0.0f;
        for (int i = 0; i < N; i++) {
            float d = dout[(long)i * C + c];
            dw += (inp[(long)i * C + c] - mean[i]) * rstd[i] * d;
            db += d;
        }
        dweight[c] += dw;
        dbias[c] += db;
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

// One query row of one head: a[0..t] = the softmax over keys 0..t of scale (q . k), then o (hs values) = the
// a-weighted sum of values 0..t. k points at key row 0 of the head (value rows at k + C), rows C3 apart. The
// forward runs it for every row and the decode for the new one, so a generated token's attention is
// bit-identical to that row of the full forward.
static void attention_row(float *o, float *a, const float *q, const float *k, int t, int C, int C3, int hs, float scale) {
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *kr = k + (long)t2 * C3;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += q[i] * kr[i];
        dot *= scale;
        a[t2] = dot;
        if (dot > maxv) maxv = dot;
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxv); sum += a[t2]; }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *v = k + (long)t2 * C3 + C;
        for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
    }
}

// Causal self-attention. qkv (B, T, 3C) holds q, k, v; att (B, NH, T, T) keeps the softmax for the
// backward pass (only t2 <= t is meaningful).
static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                float *a = att + (((long)b * NH + h) * T + t) * T;
                attention_row(out + ((long)b * T + t) * C + h * hs, a, qkv + ((long)b * T + t) * C3 + h * hs,
                              qkv + (long)b * T * C3 + h * hs + C, t, C, C3, hs, scale);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}

// dqkv is overwritten. datt is a (T) scratch row per thread; one (b, h) pair owns its slice of dqkv,
// so threads split over (b, h) and never collide. `out` (the forward's output) is for builds that
// recompute the softmax from it; the stored att makes it unneeded here.
static void attention_workspace(void *p, size_t bytes) { (void)p, (void)bytes; }  // none: ATT_BWD_WORKSPACE_BYTES is 0
static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *att,
                               int B, int T, int C, int NH) {
    (void)out;
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *datt = (float *)mallocCheck((size_t)T * sizeof(float));
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    float *dq = dqkv + ((long)b * T + t) * C3 + h * hs;
                    for (int i = 0; i < hs; i++) { dq[i] = 0.0f; dq[i + C] = 0.0f; dq[i + 2 * C] = 0.0f; }
                }
                for (int t = 0; t < T; t++) {
                    const float *a = att + (((long)b * NH + h) * T + t) * T;
                    const float *d = dout + ((long)b * T + t) * C + h * hs;
                    // through the weighted sum of values
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *v = qkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
                        float *dv = dqkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
                        float s = 0.0f;
                        for (int i = 0; i < hs; i++) { s += v[i] * d[i]; dv[i] += a[t2] * d[i]; }
                        datt[t2] = s;
                    }
                    // through the softmax: dpre = a * (datt - sum(a * datt))
                    float dot = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * datt[t2];
                    const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
                    float *dq = dqkv + ((long)b * T + t) * C3 + h * hs;
                    for (int t2 = 0; t2 <= t; t2++) {
                        float dpre = a[t2] * (datt[t2] - dot) * scale;
                        const float *k = qkv + ((long)b * T + t2) * C3 + h * hs + C;
                        float *dk = dqkv + ((long)b * T + t2) * C3 + h * hs + C;
                        for (int i = 0; i < hs; i++) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
                    }
                }
            }
        free(datt);
    }
}

// Attention of one new token (row t of qkv, (t + 1, 3C)) over the keys and values of rows 0..t, for
// generation with a key/value cache: attention_forward's row, so the result is bit-identical to it.
static void attention_decode(float *out, const float *qkv, int t, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *a = (float *)mallocCheck((size_t)(t + 1) * sizeof(float));
#pragma omp for
        for (int h = 0; h < NH; h++)
            attention_row(out + h * hs, a, qkv + (long)t * C3 + h * hs, qkv + h * hs + C, t, C, C3, hs, scale);
        free(a);
    }
}

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
static void gelu_forward(float *out, const float *inp, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

static void residual_forward(float *out, const float *a, const float *b, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) out[i] = a[i] + b[i];
}

// The fused forms of backend.h, as the two kernels they replace (the CUDA build's epilogues are checked against
// these by dev/cuda/kernels.cu); model.h never takes them here.
static int backend_fuses_gelu(void) { return 0; }

// No graphs here (backend.h): the bracketed work runs every time.
static int backend_graph_begin(int g, uint64_t shape, uint64_t variant) { (void)g, (void)shape, (void)variant; return 0; }
static void backend_graph_end(int g) { (void)g; }
static void backend_graphs_drop(void) {}
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

// Softmax and cross-entropy over the first V of Vp logit columns, fused with the gradient: each row
// of logits is replaced by dloss/dlogits = (softmax - onehot(target)) * dloss, so no probability
// tensor is ever stored. Padded columns get zero gradient.
static void classifier_forward_backward(float *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (long)i * Vp;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (row[v] > maxv) maxv = row[v];
        int y = targets[i];
        float ly = row[y];
        // one exp per logit: keep exp(x - max) in the row, then scale it into the gradient
        float sum = 0.0f;
        for (int v = 0; v < V; v++) { row[v] = expf(row[v] - maxv); sum += row[v]; }
        losses[i] = logf(sum) + maxv - ly;
        float scale = dloss / sum;
        for (int v = 0; v < V; v++) row[v] *= scale;
        row[y] -= dloss;
        for (int v = V; v < Vp; v++) row[v] = 0.0f;
    }
}

// ----------------------------------------------------------------------------
// Memory: on the CPU every buffer is host memory.
static size_t backend_state_bytes = 0;  // model-state bytes handed out, so a run can report them beside its plan
static size_t backend_scratch_bytes = 0;   // every byte backend_alloc_scratch handed out (activations, workspace)
static void *backend_alloc_scratch(size_t bytes) {
    backend_scratch_bytes += bytes;
    return callocCheck(bytes, 1);
}
static void backend_free(void *p) { free(p); }
static void backend_zero_scratch(void *p, size_t bytes) { memset(p, 0, bytes); }
static void backend_tokens_from_host(int *dst, const int *src, size_t n) { memcpy(dst, src, n * sizeof(int)); }
// The heads' losses, queued by model.h and read after the step: on the CPU, copied at once.
static void backend_losses_to_host(float *host, const float *losses, int n) { memcpy(host, losses, n * sizeof(float)); }
static void backend_losses_wait(void) {}
static void *backend_alloc_pinned(size_t bytes) { return mallocCheck(bytes); }
static void backend_free_pinned(void *p) { free(p); }
static const float *backend_logits_row(const float *row, int Vp) { (void)Vp; return row; }

// Sum of squares of a flat float array, in fixed 64K chunks summed in order: the result does not
// depend on the number of threads, which exact resume and rank-count independence need.
#define NORM_CHUNK 65536
static double sum_squares(const float *x, size_t n) {
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial = (double *)mallocCheck(nchunks * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < nchunks; ch++) {
        size_t lo = ch * NORM_CHUNK, hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * x[i];
        partial[ch] = s;
    }
    double total = 0.0;
    for (size_t ch = 0; ch < nchunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

// The rest of the backend zero.h works through. The gradient norm's sums are started and collected
// in two calls, so that the CUDA build can read them back with the step's one synchronisation.
static double *ss_sums = NULL;
static int ss_cap = 0, ss_count = 0;
static void backend_sum_squares_start(const float **xs, const size_t *ns, int count) {
    if (count > ss_cap) { free(ss_sums); ss_sums = (double *)mallocCheck(count * sizeof(double)); ss_cap = count; }
    ss_count = count;
    for (int i = 0; i < count; i++) ss_sums[i] = sum_squares(xs[i], ns[i]);
}
static void backend_sum_squares_finish(double *out, int count) { memcpy(out, ss_sums, count * sizeof(double)); }
static float *backend_alloc_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    return (float *)callocCheck(n, sizeof(float));
}
static void backend_to_host(float *host, const float *buf, size_t n) { memcpy(host, buf, n * sizeof(float)); }
static void backend_from_host(float *buf, const float *host, size_t n) { memcpy(buf, host, n * sizeof(float)); }
// The offloaded update's copies (zero.h): asynchronous on a GPU; here they are done when called.
static void backend_offload_begin(void) {}
static void backend_offload_to_host(float *host, const float *buf, size_t n, int ticket) { (void)ticket; memcpy(host, buf, n * sizeof(float)); }
static void backend_offload_wait(int ticket) { (void)ticket; }
static void backend_offload_from_host(float *buf, const float *host, size_t n) { memcpy(buf, host, n * sizeof(float)); }
static void backend_offload_end(void) {}
static void backend_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
static void backend_zero_state(float *buf, size_t n) { memset(buf, 0, n * sizeof(float)); }
static void backend_add(float *dst, const float *src, size_t n) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

// Host memory for --offload optimizer: the CPU build's memory is host memory already.
static float *backend_alloc_host_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    return (float *)callocCheck(n, sizeof(float));
}
static void backend_free_host_state(float *p) { free(p); }

// The kernels read the fp32 parameters themselves: no working copy.
// The step's update over a table (backend.h): here the table is the caller's segments, copied, and the
// verdict is decided at once, since the sums of squares are done when started.
typedef struct { AdamWSegment *segs; int count; } AdamWPlan;
static struct { float scale; int skip; } verdict = {1.0f, 0};
static void *backend_adamw_plan(const AdamWSegment *segs, int count) {
    AdamWPlan *plan = (AdamWPlan *)mallocCheck(sizeof(AdamWPlan));
    plan->segs = (AdamWSegment *)mallocCheck((count > 0 ? count : 1) * sizeof(AdamWSegment));
    memcpy(plan->segs, segs, count * sizeof(AdamWSegment));
    plan->count = count;
    return plan;
}
static void backend_adamw_plan_free(void *p) {
    if (p) free(((AdamWPlan *)p)->segs);
    free(p);
}
static void backend_norm_local(float *slot) {
    double sum = 0.0;
    for (int i = 0; i < ss_count; i++) sum += ss_sums[i];
    memcpy(slot, &sum, sizeof(sum));
}
static void backend_update_verdict(const float *slots, int count, float loss_scale, float clip) {
    double sum = 0.0;
    for (int r = 0; r < count; r++) {
        double s;
        memcpy(&s, slots + 2 * r, sizeof(s));
        sum += s;
    }
    float norm = (float)sqrt(sum) / loss_scale;
    verdict.skip = !isfinite(norm);
    verdict.scale = (clip > 0.0f && norm > clip ? clip / (norm + 1e-6f) : 1.0f) / loss_scale;
}
static void backend_adamw_run(void *p, const AdamWArgs *a, int use_verdict) {
    const AdamWPlan *plan = (const AdamWPlan *)p;
    if (use_verdict && verdict.skip) return;
    AdamWArgs args = *a;
    if (use_verdict) args.grad_scale = verdict.scale;
    for (int i = 0; i < plan->count; i++) {
        const AdamWSegment *s = &plan->segs[i];
        adamw_host(s->p, s->g, s->m, s->v, s->n, s->decayed, &args);
    }
}
static int backend_weights_need_copy(void) { return 0; }
static void backend_weights_from_master(float *dst, const float *src, size_t n, uint64_t seed) {
    (void)seed;
    memcpy(dst, src, n * sizeof(float));
}

#include "model.h"

static void backend_init(int local_rank) { (void)local_rank; }

static void backend_set_precision(const char *precision, int tf32) { (void)precision; (void)tf32; }
static size_t backend_peak_device_bytes(void) { return 0; }  // no device: the step line reports RSS
// The memory the autotuner plans against: the machine's (the CPU build's device memory is host memory).
static size_t backend_device_capacity(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

// No honest dense peak is known for an arbitrary CPU, so MFU is not reported (the log gives FLOP/s).
static double model_peak_flops(void) { return 0.0; }

// --profile's roofline: this CPU's own peak, measured once. Every OpenMP thread runs 12 independent
// chains of vector multiply-adds as wide as the CPU's (enough in flight to cover the FMA units' latency; the
// compiler contracts a*b+c into one FMA and, with -march=native, uses the widest vectors the CPU has).
// Each thread's rate is its work over its own CPU time (CLOCK_THREAD_CPUTIME_ID), not the wall clock's:
// on a machine that other processes share, a thread that waits for a core is not counted as slow, so the
// peak is the cores' own; the source line says how much of the wall time the threads did run (a low share
// means the modules' wall-clock GFLOP/s, and so their "of peak", read low). The best of 3 tries of ~40 ms.
// The vector is the CPU's own width: a 64-byte vector on a CPU without AVX-512 (a Zen 3) is split by gcc
// through memory and measured a fifth of the peak, so the matmuls read as 500% of it.
#ifdef __AVX512F__
#define FMA_LANES 16
#else
#define FMA_LANES 8
#endif
typedef float fma_vec __attribute__((vector_size(FMA_LANES * sizeof(float))));
static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double profile_peak_flops(const char **source) {
    const long iters = 8000000;
    double best = 0.0, best_share = 0.0;
    volatile float seed = 1.0f;
    for (int rep = 0; rep < 3; rep++) {
        int threads = 1;
        double rate = 0.0, cpu = 0.0;  // summed over the threads
        double t0 = wall_seconds();
#pragma omp parallel reduction(+ : rate, cpu)
        {
#ifdef _OPENMP
#pragma omp single
            threads = omp_get_num_threads();
#endif
            double c0 = thread_cpu_seconds();
            fma_vec acc[12], a, b;
            for (int i = 0; i < FMA_LANES; i++) { a[i] = 0.999999f * seed; b[i] = 1e-6f * seed; }
            for (int k = 0; k < 12; k++) acc[k] = a * (float)(k + 1);
            for (long i = 0; i < iters; i++)
                for (int k = 0; k < 12; k++) acc[k] = acc[k] * a + b;
            float sink = 0.0f;
            for (int k = 0; k < 12; k++) for (int i = 0; i < FMA_LANES; i++) sink += acc[k][i];
            if (sink == 12345.0f) seed = sink;  // keeps the chains live
            double dc = thread_cpu_seconds() - c0;
            cpu += dc;
            rate += dc > 0 ? 2.0 * FMA_LANES * 12 * (double)iters / dc : 0.0;
        }
        double wall = wall_seconds() - t0;
        if (rate > best) { best = rate; best_share = cpu / (threads * wall); }
    }
    static char text[256];
    snprintf(text, sizeof(text), "this CPU's FMA peak, measured on the threads' own CPU time (they ran %.0f%% of the wall time%s)",
             100.0 * (best_share < 1.0 ? best_share : 1.0), best_share < 0.9 ? "; other processes had the rest of the cores, "
             "so the modules' wall-clock GFLOP/s and their 'of peak' read low" : "");
    *source = text;
    return best;
}

static const char *model_device_name(void) {
    static char name[64];
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    snprintf(name, sizeof(name), "CPU, %d OpenMP thread%s", threads, threads == 1 ? "" : "s");
#else
    snprintf(name, sizeof(name), "CPU, 1 thread");
#endif
    return name;
}


#include "trainer.h"

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
