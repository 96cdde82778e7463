// cpu/llama.h: the Llama family's CPU reference kernels (RMSNorm, QK-norm, RoPE, SwiGLU, grouped-query
// attention and its key/value-cache decode step), plain fp32 C with OpenMP, in train_gpt.c's conventions:
// B batch, T time, C channels, N rows; `out`/`inp` pointers; a backward adds into parameter gradients;
// dinp is overwritten except where the input is the residual stream (rmsnorm_backward adds, as
// layernorm_backward does, so the caller sums the two branches of the residual without a copy).
// Semantics are Hugging Face's LlamaForCausalLM (see docs/llama.md): every formula below says which.
//
// The packed qkv row of one token holds NH query heads, then KV key heads, then KV value heads, each
// hd floats: (NH + 2 KV) * hd. The matmul that makes it is the GPT-2 one with weight wqkv (file order).
// Callers check the shape first (llama_config_error in arch.h): hd even for RoPE, NH % KV == 0.
#ifndef CPU_LLAMA_H
#define CPU_LLAMA_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "../base/utils.h"
#include "../arch/rope.h"  // RopeParams and rope_table: the angle tables, shared with the CUDA build
#include "attention.h"  // gqa_attention_*: the attention GPT-2 runs at KV = NH

// ----------------------------------------------------------------------------
// RMSNorm: out = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps), in fp32 (LlamaRMSNorm). One row.

static float rmsnorm_row(float *out, const float *x, const float *w, int C, float eps) {
    float ss = 0.0f;
    for (int c = 0; c < C; c++) ss += x[c] * x[c];
    float s = 1.0f / sqrtf(ss / C + eps);
    for (int c = 0; c < C; c++) out[c] = w[c] * (x[c] * s);
    return s;
}

// dx = s * g - x * s^3 * mean(x . g) with g = w * dout: the derivative of x * s through s's dependence on
// every x. `accumulate` adds into dx (the residual stream) or overwrites it (a scratch buffer).
static void rmsnorm_row_backward(float *dx, const float *d, const float *x, const float *w, float s, int C,
                                 int accumulate) {
    float dot = 0.0f;
    for (int c = 0; c < C; c++) dot += w[c] * d[c] * x[c];
    float k = s * s * s * dot / C;
    for (int c = 0; c < C; c++) {
        float v = s * (w[c] * d[c]) - k * x[c];
        dx[c] = accumulate ? dx[c] + v : v;
    }
}

// inp, out (N, C); rstd (N) kept for the backward.
static void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) rstd[i] = rmsnorm_row(out + (long)i * C, inp + (long)i * C, weight, C, eps);
}

// dinp += RMSNorm'(dout) (the residual stream); dweight += sum over rows of dout * x * rstd.
static void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                             const float *rstd, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        rmsnorm_row_backward(dinp + (long)i * C, dout + (long)i * C, inp + (long)i * C, weight, rstd[i], C, 1);
    // the weight's gradient reduces over rows: split by channel so threads never share an output, and
    // every channel sums its rows in the same order whatever the thread count
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f;
        for (int i = 0; i < N; i++) dw += dout[(long)i * C + c] * (inp[(long)i * C + c] * rstd[i]);
        dweight[c] += dw;
    }
}

// QK-norm (Qwen 3, OLMo 2): RMSNorm over hd on each query head with q_w and on each key head with k_w (one
// weight per layer, shared by the heads), on the packed qkv (BT rows of (NH + 2 KV) hd); value heads are
// copied. out and inp must differ: the backward needs the input. rstd (BT, NH + KV).
static void qknorm_forward(float *out, float *rstd, const float *inp, const float *q_w, const float *k_w, int BT,
                           int NH, int KV, int hd, float eps) {
    int R = (NH + 2 * KV) * hd, nk = NH + KV;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (long)i * R;
        float *o = out + (long)i * R;
        for (int h = 0; h < nk; h++)
            rstd[(long)i * nk + h] = rmsnorm_row(o + h * hd, x + h * hd, h < NH ? q_w : k_w, hd, eps);
        for (int j = nk * hd; j < R; j++) o[j] = x[j];
    }
}

// dinp (the packed qkv before the norm) is overwritten: q and k heads through the norm, v heads copied;
// dq_w, dk_w += their sums over rows and heads (per channel, rows then heads in order).
static void qknorm_backward(float *dinp, float *dq_w, float *dk_w, const float *dout, const float *inp,
                            const float *q_w, const float *k_w, const float *rstd, int BT, int NH, int KV, int hd) {
    int R = (NH + 2 * KV) * hd, nk = NH + KV;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *d = dout + (long)i * R, *x = inp + (long)i * R;
        float *dx = dinp + (long)i * R;
        for (int h = 0; h < nk; h++)
            rmsnorm_row_backward(dx + h * hd, d + h * hd, x + h * hd, h < NH ? q_w : k_w, rstd[(long)i * nk + h], hd, 0);
        for (int j = nk * hd; j < R; j++) dx[j] = d[j];
    }
#pragma omp parallel for
    for (int c = 0; c < 2 * hd; c++) {
        int is_k = c >= hd, cc = is_k ? c - hd : c, h0 = is_k ? NH : 0, h1 = is_k ? nk : NH;
        float dw = 0.0f;
        for (int i = 0; i < BT; i++)
            for (int h = h0; h < h1; h++) {
                long j = (long)i * R + h * hd + cc;
                dw += dout[j] * (inp[j] * rstd[(long)i * nk + h]);
            }
        if (is_k) dk_w[cc] += dw; else dq_w[cc] += dw;
    }
}

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
                                 int KV, int hd) {
    gqa_attention_decode_rows(out, q, kcache, vcache, (long)KV * hd, t, NH, KV, hd);
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
                                  const float *rope_cos, const float *rope_sin) {
    float *r = rope_cos ? gqa_rope_copy(qkv, rope_cos, rope_sin, B, T, NH, KV, hd) : NULL;
    gqa_attention_forward(out, att, r ? r : qkv, B, T, NH, KV, hd);
    free(r);
}
static void attention_gqa_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                                   const float *att, int B, int T, int NH, int KV, int hd, const float *rope_cos,
                                   const float *rope_sin) {
    (void)out;  // the saved softmax is all the CPU backward needs
    float *r = rope_cos ? gqa_rope_copy(qkv, rope_cos, rope_sin, B, T, NH, KV, hd) : NULL;
    gqa_attention_backward(dqkv, dout, r ? r : qkv, att, B, T, NH, KV, hd);
    if (r) rope_backward(dqkv, rope_cos, rope_sin, B, T, NH, KV, hd);
    free(r);
}
static void attention_gqa_decode(float *out, const float *q, const float *kcache, const float *vcache, int t, int NH,
                                 int KV, int hd) {
    gqa_attention_decode(out, q, kcache, vcache, t, NH, KV, hd);
}

#endif
