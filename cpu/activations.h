// cpu/activations.h: the MLP's activations, forward and backward: GELU (tanh approximation), ReLU² (modded-nanogpt's),
// SwiGLU (Llama's gated SiLU on the packed fc output) and GeGLU (Gemma's gated GELU, packed alike), and the residual
// sum.
#ifndef CPU_ACTIVATIONS_H
#define CPU_ACTIVATIONS_H

#include <math.h>

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
// GELU's tanh approximation and its derivative, one value: GELU's kernels and GeGLU's gate.
static inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x)));
}
static inline float gelu_tanh_grad(float x) {
    float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

static void gelu_forward(float *out, const float *inp, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) out[i] = gelu_tanh(inp[i]);
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
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

static void residual_bias_forward(float *out, const float *res, const float *x, const float *bias, int N, int C) {
#pragma omp parallel for
    for (long i = 0; i < N; i++)
        for (int j = 0; j < C; j++) out[i * C + j] = res[i * C + j] + (x[i * C + j] + bias[j]);
}

// ----------------------------------------------------------------------------
// SwiGLU: inp (N, 2H) is the packed fc output, up_proj's H columns then gate_proj's H (llm.c's llama3
// order: the second half feeds SiLU); out (N, H) = silu(gate) * up, silu(g) = g * sigmoid(g).

static void swiglu_forward(float *out, const float *inp, int N, int H) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H;
        float *o = out + i * H;
        for (int j = 0; j < H; j++) {
            float g = gate[j];
            o[j] = (g / (1.0f + expf(-g))) * up[j];
        }
    }
}

// dinp (N, 2H) overwritten: d up = dout * silu(g); d gate = dout * up * silu'(g), silu' = s (1 + g (1 - s)).
static void swiglu_backward(float *dinp, const float *dout, const float *inp, int N, int H) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H, *d = dout + i * H;
        float *dup = dinp + i * 2 * H, *dgate = dup + H;
        for (int j = 0; j < H; j++) {
            float g = gate[j], s = 1.0f / (1.0f + expf(-g));
            dup[j] = d[j] * (g * s);
            dgate[j] = d[j] * up[j] * (s * (1.0f + g * (1.0f - s)));
        }
    }
}

// ----------------------------------------------------------------------------
// GeGLU (Gemma's MLP): SwiGLU's packing, up's H columns then gate's H; out (N, H) = gelu_tanh(gate) * up.

static void geglu_forward(float *out, const float *inp, int N, int H) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H;
        float *o = out + i * H;
        for (int j = 0; j < H; j++) o[j] = gelu_tanh(gate[j]) * up[j];
    }
}

// dinp (N, 2H) overwritten: d up = dout * gelu(g); d gate = gelu'(g) * (dout * up).
static void geglu_backward(float *dinp, const float *dout, const float *inp, int N, int H) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H, *d = dout + i * H;
        float *dup = dinp + i * 2 * H, *dgate = dup + H;
        for (int j = 0; j < H; j++) {
            dup[j] = d[j] * gelu_tanh(gate[j]);
            dgate[j] = gelu_tanh_grad(gate[j]) * (d[j] * up[j]);
        }
    }
}

#endif
