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
// The gated MLPs: inp (N, 2H) is the packed fc output, up_proj's H columns then gate_proj's H (llm.c's llama3
// order: the second half feeds the gate); out (N, H) = act(gate) * up. SwiGLU (Llama's) gates with SiLU,
// silu(g) = g * sigmoid(g); GeGLU (Gemma's) with gelu_tanh. One kernel each way, the gate a parameter.
typedef enum { GLU_SILU, GLU_GELU_TANH } GluGate;

// The gate's value, forward.
static inline float glu_gate(GluGate a, float g) {
    return a == GLU_SILU ? g / (1.0f + expf(-g)) : gelu_tanh(g);
}
// The gate's value and derivative, backward (SiLU's from one sigmoid s: g s and s (1 + g (1 - s))).
static inline void glu_gate_grad(GluGate a, float g, float *val, float *grad) {
    if (a == GLU_SILU) {
        const float s = 1.0f / (1.0f + expf(-g));
        *val = g * s;
        *grad = s * (1.0f + g * (1.0f - s));
    } else {
        *val = gelu_tanh(g);
        *grad = gelu_tanh_grad(g);
    }
}

static inline void glu_forward(float *out, const float *inp, int N, int H, GluGate a) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H;
        float *o = out + i * H;
        for (int j = 0; j < H; j++) o[j] = glu_gate(a, gate[j]) * up[j];
    }
}

// dinp (N, 2H) overwritten: d up = dout * act(g); d gate = (dout * up) * act'(g).
static inline void glu_backward(float *dinp, const float *dout, const float *inp, int N, int H, GluGate a) {
#pragma omp parallel for
    for (long i = 0; i < N; i++) {
        const float *up = inp + i * 2 * H, *gate = up + H, *d = dout + i * H;
        float *dup = dinp + i * 2 * H, *dgate = dup + H;
        for (int j = 0; j < H; j++) {
            float val, grad;
            glu_gate_grad(a, gate[j], &val, &grad);
            dup[j] = d[j] * val;
            dgate[j] = (d[j] * up[j]) * grad;
        }
    }
}

static void swiglu_forward(float *out, const float *inp, int N, int H) { glu_forward(out, inp, N, H, GLU_SILU); }
static void swiglu_backward(float *dinp, const float *dout, const float *inp, int N, int H) {
    glu_backward(dinp, dout, inp, N, H, GLU_SILU);
}
static void geglu_forward(float *out, const float *inp, int N, int H) { glu_forward(out, inp, N, H, GLU_GELU_TANH); }
static void geglu_backward(float *dinp, const float *dout, const float *inp, int N, int H) {
    glu_backward(dinp, dout, inp, N, H, GLU_GELU_TANH);
}

#endif
