// adamw.h: the AdamW optimizer's host side, which every build and the distributed code share: one step's
// settings (AdamWArgs), a tensor's slice as the backend's update sees it (AdamWSegment, backend.h), and the
// update on host memory (the CPU build's, and the CUDA build's with --offload optimizer). The CUDA build's
// device update is cuda/adamw.cuh. A new optimizer is a header beside this one.
#ifndef ADAMW_H
#define ADAMW_H

#include <math.h>
#include <stddef.h>

// AdamW's settings for one step (grad_scale is the clipping factor, t the 1-based step).
typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_scale; int t; } AdamWArgs;

// One tensor's slice for backend_adamw_run (backend.h): its parameters, gradient and moments, whether it is
// decayed, and where its working copy goes (the build's floatX, NULL for none) with p[0]'s index in unit `unit`.
typedef struct {
    float *p;
    const float *g;
    float *m, *v;
    size_t n;
    int decayed;
    void *w;
    size_t w_index;
    int unit;
} AdamWSegment;

// AdamW on n parameters in host memory (the CPU build's update, and the CUDA build's with
// --offload optimizer): gradients are multiplied by grad_scale first (global-norm clipping);
// decayed says whether weight decay applies (matmul weights and embeddings).
static void adamw_host(float *p, const float *g, float *mom, float *vel, size_t n, int decayed, const AdamWArgs *a) {
    float bc1 = 1.0f - powf(a->beta1, (float)a->t), bc2 = 1.0f - powf(a->beta2, (float)a->t);
    float beta1 = a->beta1, beta2 = a->beta2, lr = a->lr, eps = a->eps, scale = a->grad_scale;
    float wd = decayed ? a->weight_decay : 0.0f;
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float grad = g[i] * scale;
        float mi = beta1 * mom[i] + (1.0f - beta1) * grad;
        float vi = beta2 * vel[i] + (1.0f - beta2) * grad * grad;
        mom[i] = mi;
        vel[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

#endif // ADAMW_H
