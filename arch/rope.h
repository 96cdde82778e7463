// rope.h: RoPE's angle tables (host code, shared by both builds; the kernels are the builds'). Frequencies
// f_i = 1 / θ^(2i/hd), i < hd/2, optionally rescaled as Llama 3.1 ("rope_type": "llama3"): wavelengths 2π/f
// longer than original/low_freq_factor are divided by factor, shorter than original/high_freq_factor kept, and in
// between interpolated. cos and sin (maxT, hd/2) hold the angle t * f_i, computed in fp32 in the same steps as
// transformers' LlamaRotaryEmbedding (fp32 inv_freq, the fp32 product t * f_i), so that at long positions the
// angles are the same floats and not merely close: at t = 8192 one ulp of f is already 1e-3 radians.
#ifndef ROPE_H
#define ROPE_H

#include <math.h>
#include "../base/utils.h"

typedef struct {
    int scaling;  // 0 none, 1 Llama 3.1's
    float theta, factor, low_freq_factor, high_freq_factor;
    int original_max_pos;
} RopeParams;

static void rope_inv_freq(float *inv_freq, int hd, const RopeParams *p) {
    for (int i = 0; i < hd / 2; i++) {
        float e = (float)(2 * i) / (float)hd;
        inv_freq[i] = 1.0f / powf(p->theta, e);
    }
    if (p->scaling != 1) return;
    float old = (float)p->original_max_pos;
    float low_wavelen = old / p->low_freq_factor, high_wavelen = old / p->high_freq_factor;
    for (int i = 0; i < hd / 2; i++) {
        float f = inv_freq[i];
        float wavelen = (float)(2.0 * M_PI) / f;
        float g = wavelen > low_wavelen ? f / p->factor : f;  // long wavelengths: slowed by factor
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {  // in between: interpolated
            float smooth = (old / wavelen - p->low_freq_factor) / (p->high_freq_factor - p->low_freq_factor);
            // each product rounded on its own as PyTorch's elementwise ops do: the volatile keeps the compiler
            // from fusing the sum into a multiply-add, which moves the last bit
            volatile float slow = (1.0f - smooth) * g / p->factor, fast = smooth * g;
            g = slow + fast;
        }
        inv_freq[i] = g;
    }
}

// cos, sin: (maxT, hd/2) each.
static void rope_table(float *cos_t, float *sin_t, int maxT, int hd, const RopeParams *p) {
    int h2 = hd / 2;
    float *f = (float *)mallocCheck((size_t)h2 * sizeof(float));
    rope_inv_freq(f, hd, p);
#pragma omp parallel for
    for (int t = 0; t < maxT; t++)
        for (int i = 0; i < h2; i++) {
            float a = (float)t * f[i];
            cos_t[(long)t * h2 + i] = cosf(a);
            sin_t[(long)t * h2 + i] = sinf(a);
        }
    free(f);
}

#endif
