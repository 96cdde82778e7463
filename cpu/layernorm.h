// cpu/layernorm.h: LayerNorm forward (saving each row's mean and 1/std) and backward.
#ifndef CPU_LAYERNORM_H
#define CPU_LAYERNORM_H

#include <math.h>

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

#endif
