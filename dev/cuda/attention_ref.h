// attention_ref.h: host-only reference for causal multi-head self-attention, shared by the GPU check
// (dev/cuda/attention.cu) and the host emulation of its tile algorithm (dev/cuda/attention_emulate.cpp).
//
// Written the plain way on purpose: the full causal softmax row for every query, in double, then the
// textbook backward through the weighted sum and the softmax. Nothing here is tiled, so it shares no
// structure (and no bugs) with the flash kernels it checks.
//
// Layouts (as train_gpt.c): qkv (B, T, 3C) with head h's q at column h*hs, k at C + h*hs, v at 2C + h*hs,
// hs = C / NH; out and dout (B, T, C); lse (B, NH, T) = natural-log logsumexp of each row's scaled scores.
// Grouped-query attention (cpu/attention.h's packing): qkv (B, T, C + 2 KV hs), key head j at C + j*hs, value head j at
// C + KV*hs + j*hs, query head h reading head h / (NH / KV).
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

// out (B, T, C) and lse (B, NH, T) from qkv. Grouped-query attention: KV key/value heads (KV <= 0: NH), qkv rows
// of C + 2 KV hs (NH query heads, KV key heads, KV value heads: cpu/attention.h's packing), query head h reading key/value
// head h / (NH / KV); KV = NH is the (B, T, 3C) layout above.
static inline void attn_ref_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, int KV = 0) {
    if (KV <= 0) KV = NH;
    const int hs = C / NH, group = NH / KV;
    const long C3 = C + 2L * KV * hs;
    const double scale = 1.0 / sqrt((double)hs);
    std::vector<double> s(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const long koff = C + (long)(h / group) * hs, voff = koff + (long)KV * hs;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
                double m = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((long)b * T + t2) * C3 + koff;
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * (double)k[i];
                    s[t2] = d * scale;
                    if (s[t2] > m) m = s[t2];
                }
                double z = 0.0;
                for (int t2 = 0; t2 <= t; t2++) { s[t2] = exp(s[t2] - m); z += s[t2]; }
                lse[((long)b * NH + h) * T + t] = (float)(m + log(z));
                float *o = out + ((long)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double acc = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) acc += s[t2] * (double)qkv[((long)b * T + t2) * C3 + voff + i];
                    o[i] = (float)(acc / z);
                }
            }
        }
}

// dqkv (B, T, C + 2 KV hs), overwritten, from dout (B, T, C) and qkv. Recomputes the softmax itself. A key/value
// head's dK and dV sum over its group's query heads in double.
static inline void attn_ref_backward(float *dqkv, const float *dout, const float *qkv, int B, int T, int C, int NH,
                                     int KV = 0) {
    if (KV <= 0) KV = NH;
    const int hs = C / NH, group = NH / KV;
    const long C3 = C + 2L * KV * hs;
    const double scale = 1.0 / sqrt((double)hs);
    std::vector<double> p(T), dp(T), acc((size_t)T * 3 * hs);
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            const long koff = C + (long)kvh * hs, voff = koff + (long)KV * hs;
            std::fill(acc.begin(), acc.end(), 0.0);  // per token: [dq | dk | dv] (dq of the current query head)
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < hs; i++) acc[(size_t)t * 3 * hs + i] = 0.0;
                for (int t = 0; t < T; t++) {
                    const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
                    const float *go = dout + ((long)b * T + t) * C + h * hs;
                    double m = -INFINITY;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *k = qkv + ((long)b * T + t2) * C3 + koff;
                        double d = 0.0;
                        for (int i = 0; i < hs; i++) d += (double)q[i] * (double)k[i];
                        p[t2] = d * scale;
                        if (p[t2] > m) m = p[t2];
                    }
                    double z = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) { p[t2] = exp(p[t2] - m); z += p[t2]; }
                    double rowdot = 0.0;  // sum_t2 p * dp
                    for (int t2 = 0; t2 <= t; t2++) {
                        p[t2] /= z;
                        const float *v = qkv + ((long)b * T + t2) * C3 + voff;
                        double d = 0.0;
                        for (int i = 0; i < hs; i++) d += (double)go[i] * (double)v[i];
                        dp[t2] = d;
                        rowdot += p[t2] * d;
                    }
                    double *dq = &acc[(size_t)t * 3 * hs];
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *k = qkv + ((long)b * T + t2) * C3 + koff;
                        double *dk = &acc[(size_t)t2 * 3 * hs + hs], *dv = dk + hs;
                        const double ds = p[t2] * (dp[t2] - rowdot) * scale;  // d(loss)/d(raw score q.k)
                        for (int i = 0; i < hs; i++) {
                            dq[i] += ds * (double)k[i];
                            dk[i] += ds * (double)q[i];
                            dv[i] += p[t2] * (double)go[i];
                        }
                    }
                }
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < hs; i++)
                        dqkv[((long)b * T + t) * C3 + h * hs + i] = (float)acc[(size_t)t * 3 * hs + i];
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++) {
                    float *row = dqkv + ((long)b * T + t) * C3;
                    row[koff + i] = (float)acc[(size_t)t * 3 * hs + hs + i];
                    row[voff + i] = (float)acc[(size_t)t * 3 * hs + 2 * hs + i];
                }
        }
}

// Deterministic test data: uniform in [-1, 1) from a 64-bit LCG. q and k are scaled by amp_qk so that the
// scaled scores have a spread of a few units (peaked softmax rows, so the online rescaling really runs);
// v and dout stay in [-1, 1).
static inline float attn_rand_uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) * (1.0 / 8388608.0)) - 1.0f;  // 24 random bits -> [-1, 1)
}

// kvw: the key (or value) heads' width KV hs (<= 0: C), so that qkv rows are C + 2 kvw.
static inline void attn_make_inputs(float *qkv, float *dout, int B, int T, int C, float amp_qk, uint64_t seed,
                                    long kvw = 0) {
    if (kvw <= 0) kvw = C;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345u;
    for (long i = 0; i < (long)B * T * (C + 2 * kvw); i++) {
        const long col = i % (C + 2 * kvw);
        qkv[i] = attn_rand_uniform(&s) * (col < C + kvw ? amp_qk : 1.0f);
    }
    for (long i = 0; i < (long)B * T * C; i++) dout[i] = attn_rand_uniform(&s);
}

// Error of got against ref over columns [col0, col0 + ncols) of a (rows, ld) matrix, as max |got - ref| divided
// by max |ref| ("relative to max"). NaN or inf anywhere in got gives +inf.
static inline double attn_rel_err(const float *got, const float *ref, long rows, long ld, long col0, long ncols) {
    double maxdiff = 0.0, maxref = 0.0;
    for (long r = 0; r < rows; r++)
        for (long c = col0; c < col0 + ncols; c++) {
            const double g = got[r * ld + c], f = ref[r * ld + c];
            if (!isfinite(g)) return INFINITY;
            maxdiff = fmax(maxdiff, fabs(g - f));
            maxref = fmax(maxref, fabs(f));
        }
    return maxref > 0.0 ? maxdiff / maxref : maxdiff;
}

// Tolerances (relative to max, see attn_rel_err), used by both attention.cu and attention_emulate.cpp.
// Inputs are rounded to the element type on the host before the reference runs, so only the kernels' own
// rounding is measured. Figures in brackets: the largest error the host emulation of the tile algorithm
// measured over all test shapes (attention_emulate.cpp), i.e. what the same arithmetic gives.
//  fp32: fp32 sums in another order than the double reference, at most ~1e3 terms each. out and lse are
//    good to a few 1e-7 [out 7e-7, lse 2e-7]: limit 1e-5. The gradients recompute P = exp(scale*S - lse),
//    whose argument has an absolute fp32 error of ~1e-6 when |scale*S| and lse are ~10, i.e. a relative
//    error ~1e-6 in every P term, correlated along the row [dv 2.2e-6 at T=1024]: limit 2e-5.
//  bf16: 8 significant bits, unit roundoff u = 2^-8 = 3.9e-3. Results are rounded to bf16 on store, an
//    error of up to u * max|ref| on its own [out 2.9e-3]: limit 2u = 8e-3 for out. The backward also
//    rounds P and dS to bf16 before the tensor-core products (independent relative errors of u per term,
//    averaging out over the sums) and forms D = rowsum(dout * out) from the rounded out [dq 4.5e-3]:
//    limit 4u = 1.6e-2. lse is fp32 throughout (bf16 x bf16 products are exact in fp32): limit 1e-5.
//  fp16: 11 significant bits, u = 2^-11 = 4.9e-4 [out 3.7e-4, dq 6.6e-4]: limits 2u = 1e-3 for out and
//    4u = 2e-3 for dqkv. The test data stays far from fp16's range limits (|P| <= 1, inputs of order 1).
// Any indexing or masking error shows up as O(1e-2) or more in fp32 and fp16 (the emulation's mutation
// runs: a shifted mask or a skipped tile gives errors of 1e-1 to 1).
struct AttnTol { double out, lse, dqkv; };
static inline AttnTol attn_tolerance(int bytes_per_elem, bool is_bf16) {
    if (bytes_per_elem == 4) return AttnTol{1e-5, 1e-5, 2e-5};
    if (is_bf16) return AttnTol{8e-3, 1e-5, 1.6e-2};
    return AttnTol{1e-3, 1e-5, 2e-3};
}
