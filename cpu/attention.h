// cpu/attention.h: causal self-attention keeping the full softmax for the backward, and the decode of one new
// token against the key/value cache by the forward's own row.
#ifndef CPU_ATTENTION_H
#define CPU_ATTENTION_H

#include <math.h>
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../utils.h"


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
// The model keeps each row's full softmax (B, NH, T, T) for the backward, which needs no workspace.
static size_t backend_att_saved_floats(size_t B, size_t NH, size_t T) { return B * NH * T * T; }
static size_t backend_att_workspace_bytes(int B, int NH, int T, int C) { (void)B, (void)NH, (void)T, (void)C; return 0; }
static void attention_workspace(void *p, size_t bytes) { (void)p, (void)bytes; }  // none: its bytes are 0
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

#endif
