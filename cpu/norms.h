// cpu/norms.h: the block's norms, forward and backward: LayerNorm (saving each row's mean and 1/std), RMSNorm and
// QK-norm (RMSNorm per query and key head, Hugging Face's LlamaRMSNorm / Qwen 3's q_norm, k_norm).
#ifndef CPU_NORMS_H
#define CPU_NORMS_H

#include <math.h>
#include <stddef.h>

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

// ----------------------------------------------------------------------------
// RMSNorm: out = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps), in fp32 (LlamaRMSNorm). One row.

static float rmsnorm_row(float *out, const float *x, const float *w, int C, float eps) {
    float ss = 0.0f;
    for (int c = 0; c < C; c++) ss += x[c] * x[c];
    float s = 1.0f / sqrtf(ss / C + eps);
    for (int c = 0; c < C; c++) out[c] = w[c] * (x[c] * s);
    return s;
}

// dx = s * g - x * s^3 * mean(x . g) with g = w * dout: the derivative of x * s through s's dependence on
// every x. `accumulate` adds into dx (the residual stream) or overwrites it (a scratch buffer).
static void rmsnorm_row_backward(float *dx, const float *d, const float *x, const float *w, float s, int C,
                                 int accumulate) {
    float dot = 0.0f;
    for (int c = 0; c < C; c++) dot += w[c] * d[c] * x[c];
    float k = s * s * s * dot / C;
    for (int c = 0; c < C; c++) {
        float v = s * (w[c] * d[c]) - k * x[c];
        dx[c] = accumulate ? dx[c] + v : v;
    }
}

// inp, out (N, C); rstd (N) kept for the backward.
static void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) rstd[i] = rmsnorm_row(out + (long)i * C, inp + (long)i * C, weight, C, eps);
}

// dinp += RMSNorm'(dout) (the residual stream); dweight += sum over rows of dout * x * rstd.
static void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                             const float *rstd, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        rmsnorm_row_backward(dinp + (long)i * C, dout + (long)i * C, inp + (long)i * C, weight, rstd[i], C, 1);
    // the weight's gradient reduces over rows: split by channel so threads never share an output, and
    // every channel sums its rows in the same order whatever the thread count
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f;
        for (int i = 0; i < N; i++) dw += dout[(long)i * C + c] * (inp[(long)i * C + c] * rstd[i]);
        dweight[c] += dw;
    }
}

// QK-norm (Qwen 3, OLMo 2): RMSNorm over hd on each query head with q_w and on each key head with k_w (one
// weight per layer, shared by the heads), on the packed qkv (BT rows of (NH + 2 KV) hd); value heads are
// copied. out and inp must differ: the backward needs the input. rstd (BT, NH + KV).
static void qknorm_forward(float *out, float *rstd, const float *inp, const float *q_w, const float *k_w, int BT,
                           int NH, int KV, int hd, float eps) {
    int R = (NH + 2 * KV) * hd, nk = NH + KV;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (long)i * R;
        float *o = out + (long)i * R;
        for (int h = 0; h < nk; h++)
            rstd[(long)i * nk + h] = rmsnorm_row(o + h * hd, x + h * hd, h < NH ? q_w : k_w, hd, eps);
        for (int j = nk * hd; j < R; j++) o[j] = x[j];
    }
}

// dinp (the packed qkv before the norm) is overwritten: q and k heads through the norm, v heads copied;
// dq_w, dk_w += their sums over rows and heads (per channel, rows then heads in order).
static void qknorm_backward(float *dinp, float *dq_w, float *dk_w, const float *dout, const float *inp,
                            const float *q_w, const float *k_w, const float *rstd, int BT, int NH, int KV, int hd) {
    int R = (NH + 2 * KV) * hd, nk = NH + KV;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *d = dout + (long)i * R, *x = inp + (long)i * R;
        float *dx = dinp + (long)i * R;
        for (int h = 0; h < nk; h++)
            rmsnorm_row_backward(dx + h * hd, d + h * hd, x + h * hd, h < NH ? q_w : k_w, rstd[(long)i * nk + h], hd, 0);
        for (int j = nk * hd; j < R; j++) dx[j] = d[j];
    }
#pragma omp parallel for
    for (int c = 0; c < 2 * hd; c++) {
        int is_k = c >= hd, cc = is_k ? c - hd : c, h0 = is_k ? NH : 0, h1 = is_k ? nk : NH;
        float dw = 0.0f;
        for (int i = 0; i < BT; i++)
            for (int h = h0; h < h1; h++) {
                long j = (long)i * R + h * hd + cc;
                dw += dout[j] * (inp[j] * rstd[(long)i * nk + h]);
            }
        if (is_k) dk_w[cc] += dw; else dq_w[cc] += dw;
    }
}

#endif
