// cpu/gelu.h: GELU (tanh approximation) forward and backward, and the residual sum.
#ifndef CPU_GELU_H
#define CPU_GELU_H

#include <math.h>

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

#endif
