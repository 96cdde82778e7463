// cpu/rope.h: rotary positions (RoPE), Hugging Face's rotate-half form, forward and backward, in place on the q
// and k heads of the packed qkv; the angle tables are arch/rope.h's rope_table, shared with the CUDA build.
#ifndef CPU_ROPE_H
#define CPU_ROPE_H

#include <stddef.h>
#include "../arch/rope.h"

// ----------------------------------------------------------------------------
// RoPE, Hugging Face's rotate-half form, on the angle tables of arch.h's rope_table.

// Rotates n consecutive heads of hd floats in place by position t's angles: halves (x1, x2) of each head
// become (x1 cos - x2 sin, x2 cos + x1 sin), HF's q * cos + rotate_half(q) * sin term for term.
static void rope_heads(float *x, int n, int hd, const float *cos_row, const float *sin_row) {
    int h2 = hd / 2;
    for (int h = 0; h < n; h++) {
        float *v = x + h * hd;
        for (int i = 0; i < h2; i++) {
            float x1 = v[i], x2 = v[i + h2], c = cos_row[i], s = sin_row[i];
            v[i] = x1 * c - x2 * s;
            v[i + h2] = x2 * c + x1 * s;
        }
    }
}

// The transpose of the rotation (its inverse): (d1 cos + d2 sin, d2 cos - d1 sin).
static void rope_heads_backward(float *d, int n, int hd, const float *cos_row, const float *sin_row) {
    int h2 = hd / 2;
    for (int h = 0; h < n; h++) {
        float *v = d + h * hd;
        for (int i = 0; i < h2; i++) {
            float d1 = v[i], d2 = v[i + h2], c = cos_row[i], s = sin_row[i];
            v[i] = d1 * c + d2 * s;
            v[i + h2] = d2 * c - d1 * s;
        }
    }
}

// In place on the q and k heads of qkv (B, T, (NH + 2 KV) hd), token t at position t; v untouched.
static void rope_forward(float *qkv, const float *cos_t, const float *sin_t, int B, int T, int NH, int KV, int hd) {
    int R = (NH + 2 * KV) * hd, h2 = hd / 2;
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            rope_heads(qkv + ((long)b * T + t) * R, NH + KV, hd, cos_t + (long)t * h2, sin_t + (long)t * h2);
}

// In place on dqkv: the gradient after RoPE becomes the gradient before it.
static void rope_backward(float *dqkv, const float *cos_t, const float *sin_t, int B, int T, int NH, int KV, int hd) {
    int R = (NH + 2 * KV) * hd, h2 = hd / 2;
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            rope_heads_backward(dqkv + ((long)b * T + t) * R, NH + KV, hd, cos_t + (long)t * h2, sin_t + (long)t * h2);
}

#endif
