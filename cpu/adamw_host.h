// adamw_host.h: AdamW's arithmetic on host memory: the CPU build's update (cpu/backend.h's backend_adamw_run), and
// both builds' backend_adamw_host, the host tier's (--offload), as cpu/muon_host.h is Muon's.
#ifndef CPU_ADAMW_HOST_H
#define CPU_ADAMW_HOST_H

#include <math.h>
#include <stddef.h>
#include "../backend/adamw_args.h"

// AdamW on n parameters in host memory: gradients are multiplied by grad_scale first (global-norm clipping);
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

#endif // CPU_ADAMW_HOST_H
