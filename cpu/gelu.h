// cpu/gelu.h: the MLP's element-wise activations, GELU (tanh approximation) and ReLU² (modded-nanogpt's), forward
// and backward, and the residual sum.
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

// ReLU²: out = relu(x)^2; dinp = 2 relu(x) dout.
static void relu2_forward(float *out, const float *inp, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = r * r;
    }
}

static void relu2_backward(float *dinp, const float *inp, const float *dout, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        dinp[i] = 2.0f * r * dout[i];
    }
}

static void residual_forward(float *out, const float *a, const float *b, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) out[i] = a[i] + b[i];
}

#endif
