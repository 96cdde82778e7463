// cpu/attention.h: causal self-attention keeping the full softmax for the backward, and the decode of one new
// token against the key/value cache by the forward's own row; multi-head (GPT-2) and grouped-query (the Llama
// family) are one code; the key/value cache of the grouped-query heads and its decode step. Every call takes the
// mask (arch/attn_mask.h; NULL: plain causal): a query's row runs over its visible keys [first, t] only, so the work is
// the visible area (attn_mask_visible_pairs), and the saved softmax is zero outside it.
#ifndef CPU_ATTENTION_H
#define CPU_ATTENTION_H

#include <math.h>
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../base/utils.h"
#include "../arch/attn_mask.h"
#include "rope.h"  // rope_forward: a rotated copy of qkv when asked for RoPE in the kernel


// One attention for both families, on the packed qkv row of a token: NH query heads, then KV key heads, then KV
// value heads, hs floats each ((NH + 2 KV) hs). Query head h reads key/value head h / (NH / KV) (Hugging Face's
// repeat_kv): KV = NH is GPT-2's multi-head attention (the row is q, k, v of C = NH hs each, 3C), KV < NH the
// Llama family's grouped-query attention (KV = 1 multi-query). Causal softmax of (q . k) / sqrt(hs).

// One query row: a[f..t] = the softmax over keys f..t (the visible ones: f is the mask's first key, 0 when causal)
// of scale (q . k), then o (hs values) = the a-weighted sum of values f..t; a[0..f) is left alone. k and v point at
// row 0 of one key/value head, rows `stride` floats apart (the packed row in the forward, the cache's row in the
// Llama decode). The forward runs it for every row and the decode for the new one, so a generated token's
// attention is bit-identical to that row of the full forward.
static void attention_row(float *o, float *a, const float *q, const float *k, const float *v, int f, int t, long stride,
                          int hs, float scale) {
    float maxv = -INFINITY;
    for (int t2 = f; t2 <= t; t2++) {
        const float *kr = k + t2 * stride;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += q[i] * kr[i];
        dot *= scale;
        a[t2] = dot;
        if (dot > maxv) maxv = dot;
    }
    float sum = 0.0f;
    for (int t2 = f; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxv); sum += a[t2]; }
    float inv = 1.0f / sum;
    for (int t2 = f; t2 <= t; t2++) a[t2] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = f; t2 <= t; t2++) {
        const float *vr = v + t2 * stride;
        for (int i = 0; i < hs; i++) o[i] += a[t2] * vr[i];
    }
}

// The first key query t of row b sees under the mask (NULL: causal, 0).
static int attn_first(const AttnMask *mask, int b, int T, int t) { return mask ? attn_mask_first_key(mask, b, T, t) : 0; }

// out (B, T, NH hs); att (B, NH, T, T) keeps the softmax for the backward (zero outside the visible keys).
static void gqa_attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int KV, int hs,
                                  const AttnMask *mask) {
    long R = (long)(NH + 2 * KV) * hs;
    int group = NH / KV;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                int kvh = h / group;
                const float *base = qkv + (long)b * T * R;
                float *a = att + (((long)b * NH + h) * T + t) * T;
                int f = attn_first(mask, b, T, t);
                attention_row(out + ((long)b * T + t) * NH * hs + h * hs, a, base + t * R + h * hs,
                              base + (NH + kvh) * hs, base + (NH + KV + kvh) * hs, f, t, R, hs, scale);
                for (int t2 = 0; t2 < f; t2++) a[t2] = 0.0f;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}

// dqkv (B, T, (NH + 2 KV) hs) overwritten; datt is a (T) scratch row per thread. Threads split over (b, key/value
// head); each walks its group's query heads in order, so dK and dV are summed over the group in a fixed order
// and no two threads share an output (at KV = NH, one (b, h) pair owns its slice of dqkv). Each query row runs over
// its visible keys [first, t] only (the softmax is zero elsewhere, so this is exact, and the work the visible area).
static void gqa_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T,
                                   int NH, int KV, int hs, const AttnMask *mask) {
    long R = (long)(NH + 2 * KV) * hs;
    int group = NH / KV;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *datt = (float *)mallocCheck((size_t)T * sizeof(float));
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < KV; kvh++) {
                const float *base = qkv + (long)b * T * R;
                float *dbase = dqkv + (long)b * T * R;
                long koff = (long)(NH + kvh) * hs, voff = (long)(NH + KV + kvh) * hs;
                for (int t = 0; t < T; t++) {
                    for (int i = 0; i < hs; i++) { dbase[t * R + koff + i] = 0.0f; dbase[t * R + voff + i] = 0.0f; }
                    for (int h = kvh * group; h < (kvh + 1) * group; h++)
                        for (int i = 0; i < hs; i++) dbase[t * R + h * hs + i] = 0.0f;
                }
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    for (int t = 0; t < T; t++) {
                        const float *a = att + (((long)b * NH + h) * T + t) * T;
                        const float *d = dout + ((long)b * T + t) * NH * hs + h * hs;
                        int f = attn_first(mask, b, T, t);
                        // through the weighted sum of values
                        for (int t2 = f; t2 <= t; t2++) {
                            const float *v = base + t2 * R + voff;
                            float *dv = dbase + t2 * R + voff;
                            float s = 0.0f;
                            for (int i = 0; i < hs; i++) { s += v[i] * d[i]; dv[i] += a[t2] * d[i]; }
                            datt[t2] = s;
                        }
                        // through the softmax: dpre = a * (datt - sum(a * datt))
                        float dot = 0.0f;
                        for (int t2 = f; t2 <= t; t2++) dot += a[t2] * datt[t2];
                        const float *q = base + t * R + h * hs;
                        float *dq = dbase + t * R + h * hs;
                        for (int t2 = f; t2 <= t; t2++) {
                            float dpre = a[t2] * (datt[t2] - dot) * scale;
                            const float *k = base + t2 * R + koff;
                            float *dk = dbase + t2 * R + koff;
                            for (int i = 0; i < hs; i++) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
                        }
                    }
            }
        free(datt);
    }
}

// Attention of one new token (q: NH hs) over key/value rows 0..t, k and v at key/value head 0 of row 0 and rows
// `stride` floats apart: the forward's row, so the result is bit-identical to that row of the full forward. A
// window (mask->window) reads rows max(0, t - window + 1)..t only; the decode has no document mask (the generated
// token's document is the prompt's), so a doc_start here is a caller's bug.
static void gqa_attention_decode_rows(float *out, const float *q, const float *k, const float *v, long stride, int t,
                                      int NH, int KV, int hs, const AttnMask *mask) {
    if (mask && mask->doc_start) internal_fault("attention decode given a document mask: generation is one document");
    int f = attn_first(mask, 0, t + 1, t);
    int group = NH / KV;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *a = (float *)mallocCheck((size_t)(t + 1) * sizeof(float));
#pragma omp for
        for (int h = 0; h < NH; h++) {
            int kvh = h / group;
            attention_row(out + h * hs, a, q + h * hs, k + kvh * hs, v + kvh * hs, f, t, stride, hs, scale);
        }
        free(a);
    }
}

// GPT-2's causal self-attention: the above at KV = NH. qkv (B, T, 3C) holds q, k, v; att (B, NH, T, T) keeps the
// softmax for the backward pass (only t2 <= t is meaningful).
static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH, const AttnMask *mask) {
    gqa_attention_forward(out, att, qkv, B, T, NH, NH, C / NH, mask);
}

// dqkv is overwritten. `out` (the forward's output) is for builds that recompute the softmax from it; the stored
// att makes it unneeded here. The model keeps each row's full softmax (B, NH, T, T) for the backward, which needs
// no workspace.
static size_t backend_att_saved_floats(size_t B, size_t NH, size_t T) { return B * NH * T * T; }
static size_t backend_att_workspace_bytes(int B, int NH, int T, int C, int masked) {
    (void)B, (void)NH, (void)T, (void)C, (void)masked;
    return 0;
}
static void attention_workspace(void *p, size_t bytes) { (void)p, (void)bytes; }  // none: its bytes are 0
static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *att,
                               int B, int T, int C, int NH, const AttnMask *mask) {
    (void)out;
    gqa_attention_backward(dqkv, dout, qkv, att, B, T, NH, NH, C / NH, mask);
}

// Attention of one new token (row t of qkv, (t + 1, 3C)) over the keys and values of rows 0..t, for
// generation with a key/value cache: attention_forward's row, so the result is bit-identical to it.
static void attention_decode(float *out, const float *qkv, int t, int C, int NH, const AttnMask *mask) {
    long C3 = 3L * C;
    gqa_attention_decode_rows(out, qkv + t * C3, qkv + C, qkv + 2 * C, C3, t, NH, NH, C / NH, mask);
}

// ----------------------------------------------------------------------------
// Grouped-query attention on the packed qkv: cpu/attention.h's gqa_attention_forward/backward (one code with
// GPT-2's, which is KV = NH); the decode below reads the key/value cache.

// The floats gqa_attention_forward keeps for the backward: the softmax, (B, NH, T, T).
#define GQA_ATT_SAVED_FLOATS(B, NH, T) ((size_t)(B) * (NH) * (T) * (T))

// The key/value cache of one layer holds only the key/value heads: kcache and vcache (maxT, KV hd) each,
// NH / KV times smaller than a cache of every query head's keys. kv_cache_store copies row t's k and v
// (after RoPE) out of a packed qkv row.
static void kv_cache_store(float *kcache, float *vcache, const float *qkv_row, int t, int NH, int KV, int hd) {
    long kvd = (long)KV * hd;
    for (long i = 0; i < kvd; i++) {
        kcache[t * kvd + i] = qkv_row[(long)NH * hd + i];
        vcache[t * kvd + i] = qkv_row[(long)NH * hd + kvd + i];
    }
}

// Attention of one new token (q: NH hd, after RoPE; its key and value already stored at row t) over cache rows
// 0..t: gqa_attention_forward's row, so the result is bit-identical to that row of the full forward.
static void gqa_attention_decode(float *out, const float *q, const float *kcache, const float *vcache, int t, int NH,
                                 int KV, int hd, const AttnMask *mask) {
    gqa_attention_decode_rows(out, q, kcache, vcache, (long)KV * hd, t, NH, KV, hd, mask);
}

// backend.h's grouped-query attention, on the kernels above. With RoPE's tables (q and k unrotated) the CPU build
// rotates a copy of qkv first, the two kernels in turn; model.h does not ask for it (backend_fuses_rope: 0, it runs
// rope_forward/backward as passes of their own), so this path costs the model nothing and keeps its numbers.
static int backend_fuses_rope(void) { return 0; }
static float *gqa_rope_copy(const float *qkv, const float *rope_cos, const float *rope_sin, int B, int T, int NH, int KV,
                            int hd) {
    size_t n = (size_t)B * T * (NH + 2 * KV) * hd;
    float *r = (float *)mallocCheck(n * sizeof(float));
    memcpy(r, qkv, n * sizeof(float));
    rope_forward(r, rope_cos, rope_sin, B, T, NH, KV, hd);
    return r;
}
static void attention_gqa_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int KV, int hd,
                                  const float *rope_cos, const float *rope_sin, const AttnMask *mask) {
    float *r = rope_cos ? gqa_rope_copy(qkv, rope_cos, rope_sin, B, T, NH, KV, hd) : NULL;
    gqa_attention_forward(out, att, r ? r : qkv, B, T, NH, KV, hd, mask);
    free(r);
}
static void attention_gqa_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                                   const float *att, int B, int T, int NH, int KV, int hd, const float *rope_cos,
                                   const float *rope_sin, const AttnMask *mask) {
    (void)out;  // the saved softmax is all the CPU backward needs
    float *r = rope_cos ? gqa_rope_copy(qkv, rope_cos, rope_sin, B, T, NH, KV, hd) : NULL;
    gqa_attention_backward(dqkv, dout, r ? r : qkv, att, B, T, NH, KV, hd, mask);
    if (r) rope_backward(dqkv, rope_cos, rope_sin, B, T, NH, KV, hd);
    free(r);
}
static void attention_gqa_decode(float *out, const float *q, const float *kcache, const float *vcache, int t, int NH,
                                 int KV, int hd, const AttnMask *mask) {
    gqa_attention_decode(out, q, kcache, vcache, t, NH, KV, hd, mask);
}

#endif
