// train_gpt.c: the CPU reference build of the trainer. Plain fp32 C with OpenMP on every hot loop.
// The model lives here (kernels, the layer-by-layer forward and backward, AdamW); the training
// loop, evaluation, sampling, checkpoints and logs come from trainer.h, which the CUDA build
// shares, so the two builds run the same loop and differ only in the model functions below.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "utils.h"
#include "gpt2.h"

#define BUILD_NAME "cpu"

// ----------------------------------------------------------------------------
// Matrix multiply: C[M,N] (+)= A[M,K] * B[K,N], with A and B read through strides so that the
// forward (B = W^T) and both backward products use one kernel without transposed copies. Each
// task packs a K x TN panel of B contiguously (one pass, so a strided B costs nothing in the inner
// loop), then sweeps TM-row tiles of A over it with a TM x TN block of accumulators held in
// registers: per k it broadcasts TM values of A and loads TN/16 vectors of the panel.

#ifdef __AVX512F__
#define GEMM_TM 12
#define GEMM_TN 32
#else
#define GEMM_TM 6
#define GEMM_TN 16
#endif
#define GEMM_ROWS_PER_TASK (8 * GEMM_TM)
#define GEMM_KC 256  // a KC x TN panel (32 KiB) stays in L1 while every row tile sweeps it

static void gemm_tile(int K, const float *const arow[GEMM_TM], long sak, const float *panel, float *C, long scm,
                      long scn, int rows, int cols, int accumulate) {
    float acc[GEMM_TM][GEMM_TN];
    for (int r = 0; r < GEMM_TM; r++)
        for (int c = 0; c < GEMM_TN; c++) acc[r][c] = 0.0f;
    for (int k = 0; k < K; k++) {
        const float *b = panel + (long)k * GEMM_TN;
        for (int r = 0; r < GEMM_TM; r++) {
            float a = arow[r][k * sak];
#pragma omp simd
            for (int c = 0; c < GEMM_TN; c++) acc[r][c] += a * b[c];
        }
    }
    for (int r = 0; r < rows; r++) {
        float *crow = C + (long)r * scm;
        if (accumulate) for (int c = 0; c < cols; c++) crow[c * scn] += acc[r][c];
        else for (int c = 0; c < cols; c++) crow[c * scn] = acc[r][c];
    }
}

static void gemm(int M, int N, int K, const float *A, long sam, long sak, const float *B, long sbk, long sbn,
                 float *C, long scm, long scn, int accumulate) {
    int nblocks = (N + GEMM_TN - 1) / GEMM_TN;
    int mchunks = (M + GEMM_ROWS_PER_TASK - 1) / GEMM_ROWS_PER_TASK;
    long ntasks = (long)nblocks * mchunks;
#pragma omp parallel
    {
        float *panel = (float *)mallocCheck((size_t)GEMM_KC * GEMM_TN * sizeof(float));
        long packed = -1;  // with a single K block, consecutive tasks of a thread share the panel
#pragma omp for schedule(static)
        for (long task = 0; task < ntasks; task++) {
            int nb = (int)(task / mchunks), mc = (int)(task % mchunks);
            int n0 = nb * GEMM_TN, cols = N - n0 < GEMM_TN ? N - n0 : GEMM_TN;
            int mbegin = mc * GEMM_ROWS_PER_TASK;
            int mend = mbegin + GEMM_ROWS_PER_TASK < M ? mbegin + GEMM_ROWS_PER_TASK : M;
            for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
                int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                for (int k = 0; k < kc && !(K <= GEMM_KC && packed == nb); k++) {
                    float *dst = panel + (long)k * GEMM_TN;
                    const float *src = B + (long)(k0 + k) * sbk + (long)n0 * sbn;
                    for (int c = 0; c < cols; c++) dst[c] = src[c * sbn];
                    for (int c = cols; c < GEMM_TN; c++) dst[c] = 0.0f;
                }
                packed = nb;
                for (int m0 = mbegin; m0 < mend; m0 += GEMM_TM) {
                    int rows = mend - m0 < GEMM_TM ? mend - m0 : GEMM_TM;
                    const float *arow[GEMM_TM];
                    for (int r = 0; r < GEMM_TM; r++) arow[r] = A + (long)(m0 + (r < rows ? r : 0)) * sam + (long)k0 * sak;
                    gemm_tile(kc, arow, sak, panel, C + (long)m0 * scm + (long)n0 * scn, scm, scn, rows, cols,
                              accumulate || k0 > 0);
                }
            }
        }
        free(panel);
    }
}

// ----------------------------------------------------------------------------
// Kernels. Shapes: B batch, T time, C channels, OC output channels, NH heads.

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((long)b * T + t) * C;
            const float *we = wte + (long)inp[b * T + t] * C, *pe = wpe + (long)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

// Serial over tokens: two tokens may share an embedding row, and a fixed order keeps it deterministic.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((long)b * T + t) * C;
            float *dwt = dwte + (long)inp[b * T + t] * C, *dwp = dwpe + (long)t * C;
            for (int i = 0; i < C; i++) { dwt[i] += d[i]; dwp[i] += d[i]; }
        }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int N, int C) {
    const float eps = 1e-5f;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (long)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (long)i * C;
        for (int c = 0; c < C; c++) o[c] = (s * (x[c] - m)) * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

// dinp += LN'(dout); dweight, dbias += their sums over rows.
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *d = dout + (long)i * C, *x = inp + (long)i * C;
        float m = mean[i], s = rstd[i];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float *di = dinp + (long)i * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = weight[c] * d[c];
            di[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    // the parameter gradients reduce over rows: split by channel so threads never share an output
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f, db = 0.0f;
        for (int i = 0; i < N; i++) {
            float d = dout[(long)i * C + c];
            dw += (inp[(long)i * C + c] - mean[i]) * rstd[i] * d;
            db += d;
        }
        dweight[c] += dw;
        dbias[c] += db;
    }
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    gemm(N, OC, C, inp, C, 1, weight, 1, C, out, OC, 1, 0);
    if (bias) {
#pragma omp parallel for
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) out[(long)i * OC + o] += bias[o];
    }
}

// dinp = dout @ weight (overwritten: every caller's dinp is scratch); dweight, dbias += their sums.
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int C, int OC) {
    gemm(N, C, OC, dout, OC, 1, weight, C, 1, dinp, C, 1, 0);
    // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC): walking dout by rows, not columns, keeps the
    // large operand streaming and the small one (inp) in cache
    gemm(C, OC, N, inp, 1, C, dout, OC, 1, dweight, 1, C, 1);
    if (dbias) {
#pragma omp parallel for
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int i = 0; i < N; i++) s += dout[(long)i * OC + o];
            dbias[o] += s;
        }
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
                const float *q = qkv + ((long)b * T + t) * C3 + h * hs;
                float *a = att + (((long)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((long)b * T + t2) * C3 + h * hs + C;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    dot *= scale;
                    a[t2] = dot;
                    if (dot > maxv) maxv = dot;
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxv); sum += a[t2]; }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float *o = out + ((long)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((long)b * T + t2) * C3 + h * hs + 2 * C;
                    for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
                }
            }
}

// dqkv is overwritten. datt is a (T) scratch row per thread; one (b, h) pair owns its slice of dqkv,
// so threads split over (b, h) and never collide.
static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                               int NH) {
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

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
static void gelu_forward(float *out, const float *inp, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

static void residual_forward(float *out, const float *a, const float *b, long N) {
#pragma omp parallel for simd
    for (long i = 0; i < N; i++) out[i] = a[i] + b[i];
}

// Softmax and cross-entropy over the first V of Vp logit columns, fused with the gradient: each row
// of logits is replaced by dloss/dlogits = (softmax - onehot(target)) * dloss, so no probability
// tensor is ever stored. Padded columns get zero gradient.
static void classifier_forward_backward(float *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (long)i * Vp;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (row[v] > maxv) maxv = row[v];
        float sum = 0.0f;
        for (int v = 0; v < V; v++) sum += expf(row[v] - maxv);
        float logsum = logf(sum) + maxv;
        int y = targets[i];
        losses[i] = logsum - row[y];
        for (int v = 0; v < V; v++) row[v] = expf(row[v] - logsum) * dloss;
        row[y] -= dloss;
        for (int v = V; v < Vp; v++) row[v] = 0.0f;
    }
}

// ----------------------------------------------------------------------------
// Activations. A tensor is kept for every layer only if the recompute level needs it in backward;
// otherwise one layer's copy is shared and backward recomputes it. The level-3 model keeps just
// each layer's output (the next layer's input) and reruns the whole layer.

enum {
    ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATTY, ACT_ATT, ACT_ATTPROJ, ACT_RESIDUAL2,
    ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_GELU, ACT_FCPROJ, ACT_RESIDUAL3, ACT_LNF,
    ACT_LNF_MEAN, ACT_LNF_RSTD, ACT_LOGITS, ACT_LOSSES, NUM_ACTS
};

// Recompute level from which a per-layer tensor is no longer kept for every layer
// (0 = never per layer: scratch or final-layer-only; 99 = always kept).
static const int ACT_DROPPED_AT[NUM_ACTS] = {
    99, 2, 3, 3, 3, 3, 3, 0, 3, 2, 3, 3, 3, 1, 0, 99, 0, 0, 0, 0, 0};
static const int ACT_PER_LAYER[NUM_ACTS] = {
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};

typedef struct {
    float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3, *lnf, *lnf_mean, *lnf_rstd;
    float *logits, *losses;
} ActivationTensors;

static void act_sizes(const GPT2Config *c, int B, int T, size_t per_copy[NUM_ACTS]) {
    size_t BT = (size_t)B * T, C = c->channels, NH = c->num_heads;
    size_t s[NUM_ACTS] = {BT * C, BT * C, BT, BT, BT * 3 * C, BT * C, B * NH * (size_t)T * T, BT * C, BT * C,
                          BT * C, BT, BT, BT * 4 * C, BT * 4 * C, BT * C, BT * C, BT * C, BT, BT,
                          BT * c->padded_vocab_size, BT};
    memcpy(per_copy, s, sizeof(s));
}

// Copies of activation i for a model that runs `layers` layers.
static int act_copies(int layers, int recompute, int i) {
    if (!ACT_PER_LAYER[i]) return 1;
    return recompute < ACT_DROPPED_AT[i] ? layers : 1;
}

// Scratch for one layer's backward: gradients of activations never need more than one layer.
typedef struct {
    float *dresidual, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *dlnf;
} GradActTensors;

typedef struct {
    GPT2Config config;
    size_t num_params;
    // Each unit's full parameters and where its gradient accumulates (gpt2.h's unit layout). zero.h
    // owns the memory and points these: at every moment, to whatever is resident for that unit.
    float **uparams, **ugrads;
    int B, T, recompute;                 // activation buffers are sized for these
    int first, last;                     // the layers [first, last) this model runs (a pipeline stage)
    // Activation slots: a pipeline stage keeps several micro-batches in flight, one slot each.
    int nslots, slot;
    float *slot_memory;                  // nslots * act_floats
    int *slot_inputs, *slot_targets, *slot_B, *slot_T;
    size_t act_off[NUM_ACTS];
    size_t act_floats, gradact_floats;
    float *act_ptr[NUM_ACTS];            // the current slot's tensors
    size_t act_stride[NUM_ACTS];         // floats between layers (0 for a single shared copy)
    float *gradact_memory;
    GradActTensors ga;
    int *inputs, *targets;               // the last forward's micro-batch
    int cur_B, cur_T;
    float mean_loss;
} Model;

// Bytes of each kind of memory, for the memory plan printed at start.
typedef struct { size_t params, grads, optimizer, activations, workspace; } MemoryPlan;

static MemoryPlan model_memory_plan(const GPT2Config *c, int B, int T, int recompute) {
    MemoryPlan mp;
    size_t n = gpt2_num_params(c), per[NUM_ACTS], acts = 0;
    act_sizes(c, B, T, per);
    for (int i = 0; i < NUM_ACTS; i++) acts += per[i] * act_copies(c->num_layers, recompute, i);
    size_t BT = (size_t)B * T, C = c->channels;
    mp.params = n * sizeof(float);
    mp.grads = n * sizeof(float);
    mp.optimizer = 2 * n * sizeof(float);
    mp.activations = acts * sizeof(float);
    mp.workspace = (BT * C * 5 + BT * 3 * C + BT * 8 * C) * sizeof(float);
    return mp;
}

static void model_use_slot(Model *m, int k) {
    m->slot = k;
    float *base = m->slot_memory + (size_t)k * m->act_floats;
    for (int i = 0; i < NUM_ACTS; i++) m->act_ptr[i] = base + m->act_off[i];
    size_t BT = (size_t)m->B * m->T;
    m->inputs = m->slot_inputs + k * BT;
    m->targets = m->slot_targets + k * BT;
    m->cur_B = m->slot_B[k];
    m->cur_T = m->slot_T[k];
}

// Activations and scratch for (B, T) micro-batches through layers [first, last), with `slots`
// micro-batches in flight; the parameters come from zero.h (model_set_unit).
static Model *model_create(const GPT2Config *config, int B, int T, int recompute, int first, int last, int slots) {
    Model *m = (Model *)callocCheck(1, sizeof(Model));
    m->config = *config;
    m->num_params = gpt2_num_params(config);
    m->B = B; m->T = T; m->recompute = recompute;
    m->first = first; m->last = last; m->nslots = slots;
    m->uparams = (float **)callocCheck(gpt2_num_units(config), sizeof(float *));
    m->ugrads = (float **)callocCheck(gpt2_num_units(config), sizeof(float *));

    size_t per[NUM_ACTS];
    act_sizes(config, B, T, per);
    m->act_floats = 0;
    for (int i = 0; i < NUM_ACTS; i++) {
        int copies = act_copies(last - first, recompute, i);
        m->act_off[i] = m->act_floats;
        m->act_stride[i] = copies > 1 ? per[i] : 0;
        m->act_floats += per[i] * copies;
    }
    m->slot_memory = (float *)mallocCheck((size_t)slots * m->act_floats * sizeof(float));
    size_t BT = (size_t)B * T, C = config->channels;
    m->gradact_floats = BT * C * 5 + BT * 3 * C + BT * 8 * C;
    m->gradact_memory = (float *)mallocCheck(m->gradact_floats * sizeof(float));
    float *q = m->gradact_memory;
    m->ga.dresidual = q; q += BT * C;
    m->ga.dln = q; q += BT * C;
    m->ga.datty = q; q += BT * C;
    m->ga.dlnf = q; q += BT * C;
    q += BT * C;  // spare, keeps the plan's arithmetic simple
    m->ga.dqkv = q; q += BT * 3 * C;
    m->ga.dfch = q; q += BT * 4 * C;
    m->ga.dfch_gelu = q; q += BT * 4 * C;
    m->slot_inputs = (int *)callocCheck((size_t)slots * BT, sizeof(int));
    m->slot_targets = (int *)callocCheck((size_t)slots * BT, sizeof(int));
    m->slot_B = (int *)callocCheck(slots, sizeof(int));
    m->slot_T = (int *)callocCheck(slots, sizeof(int));
    model_use_slot(m, 0);
    return m;
}

static void model_set_unit(Model *m, int u, float *params, float *grads) {
    m->uparams[u] = params;
    m->ugrads[u] = grads;
}

static void model_free(Model *m) {
    free(m->uparams);
    free(m->ugrads);
    free(m->slot_memory);
    free(m->gradact_memory);
    free(m->slot_inputs);
    free(m->slot_targets);
    free(m->slot_B);
    free(m->slot_T);
    free(m);
}

// The activation pointers of layer l (shared copies where the recompute level drops a tensor).
// Strides are in elements of a (B, T) sized buffer; a smaller micro-batch uses the front of each.
static ActivationTensors layer_acts(const Model *m, int l) {
    float *p[NUM_ACTS];
    for (int i = 0; i < NUM_ACTS; i++) p[i] = m->act_ptr[i] + (size_t)(l - m->first) * m->act_stride[i];
    ActivationTensors a = {p[ACT_ENCODED], p[ACT_LN1], p[ACT_LN1_MEAN], p[ACT_LN1_RSTD], p[ACT_QKV], p[ACT_ATTY],
                           p[ACT_ATT], p[ACT_ATTPROJ], p[ACT_RESIDUAL2], p[ACT_LN2], p[ACT_LN2_MEAN], p[ACT_LN2_RSTD],
                           p[ACT_FCH], p[ACT_FCH_GELU], p[ACT_FCPROJ], p[ACT_RESIDUAL3], p[ACT_LNF], p[ACT_LNF_MEAN],
                           p[ACT_LNF_RSTD], p[ACT_LOGITS], p[ACT_LOSSES]};
    return a;
}

static const float *layer_input(const Model *m, int l) {
    return l == m->first ? m->act_ptr[ACT_ENCODED] : layer_acts(m, l - 1).residual3;
}

// The twelve tensors of a layer inside its unit buffer (parameters or gradients alike).
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;

static LayerWeights layer_view(float *u, int C) {
    size_t c = C;
    LayerWeights w;
    w.ln1w = u; u += c;
    w.ln1b = u; u += c;
    w.qkvw = u; u += 3 * c * c;
    w.qkvb = u; u += 3 * c;
    w.attprojw = u; u += c * c;
    w.attprojb = u; u += c;
    w.ln2w = u; u += c;
    w.ln2b = u; u += c;
    w.fcw = u; u += 4 * c * c;
    w.fcb = u; u += 4 * c;
    w.fcprojw = u; u += 4 * c * c;
    w.fcprojb = u;
    return w;
}

// The outer unit: wte, wpe, lnfw, lnfb.
typedef struct { float *wte, *wpe, *lnfw, *lnfb; } OuterWeights;

static OuterWeights outer_view(float *u, const GPT2Config *c) {
    OuterWeights o;
    o.wte = u;
    o.wpe = o.wte + (size_t)c->padded_vocab_size * c->channels;
    o.lnfw = o.wpe + (size_t)c->max_seq_len * c->channels;
    o.lnfb = o.lnfw + c->channels;
    return o;
}

static void layer_forward(Model *m, int l, int B, int T) {
    int C = m->config.channels, NH = m->config.num_heads, BT = B * T;
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    const float *x = layer_input(m, l);
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, BT, C);
    matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C);
    attention_forward(a.atty, a.att, a.qkv, B, T, C, NH);
    matmul_forward(a.attproj, a.atty, w.attprojw, w.attprojb, BT, C, C);
    residual_forward(a.residual2, x, a.attproj, (long)BT * C);
    layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, BT, C);
    matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, BT, C, 4 * C);
    gelu_forward(a.fch_gelu, a.fch, (long)BT * 4 * C);
    matmul_forward(a.fcproj, a.fch_gelu, w.fcprojw, w.fcprojb, BT, 4 * C, C);
    residual_forward(a.residual3, a.residual2, a.fcproj, (long)BT * C);
}

// Rebuilds what the recompute level dropped, from what it kept. Deterministic kernels make the
// rebuilt tensors bit-identical to the originals, so every level gives the same numbers.
static void layer_recompute(Model *m, int l, int B, int T) {
    int C = m->config.channels, BT = B * T;
    if (m->recompute >= 3) { layer_forward(m, l, B, T); return; }
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    if (m->recompute >= 2) {
        layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, layer_input(m, l), w.ln1w, w.ln1b, BT, C);
        layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, BT, C);
    }
    if (m->recompute >= 1) gelu_forward(a.fch_gelu, a.fch, (long)BT * 4 * C);
}

// dresidual holds dloss/d(layer output) on entry and dloss/d(layer input) on return.
static void layer_backward(Model *m, int l, int B, int T) {
    int C = m->config.channels, NH = m->config.num_heads, BT = B * T;
    layer_recompute(m, l, B, T);
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    LayerWeights g = layer_view(m->ugrads[1 + l], C);
    GradActTensors *ga = &m->ga;
    const float *x = layer_input(m, l);
    // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    matmul_backward(ga->dfch_gelu, g.fcprojw, g.fcprojb, ga->dresidual, a.fch_gelu, w.fcprojw, BT, 4 * C, C);
    gelu_backward(ga->dfch, a.fch, ga->dfch_gelu, (long)BT * 4 * C);
    matmul_backward(ga->dln, g.fcw, g.fcb, ga->dfch, a.ln2, w.fcw, BT, C, 4 * C);
    layernorm_backward(ga->dresidual, g.ln2w, g.ln2b, ga->dln, a.residual2, w.ln2w, a.ln2_mean, a.ln2_rstd, BT, C);
    // residual2 = x + attproj(attention(qkv(ln1(x))))
    matmul_backward(ga->datty, g.attprojw, g.attprojb, ga->dresidual, a.atty, w.attprojw, BT, C, C);
    attention_backward(ga->dqkv, ga->datty, a.qkv, a.att, B, T, C, NH);
    matmul_backward(ga->dln, g.qkvw, g.qkvb, ga->dqkv, a.ln1, w.qkvw, BT, C, 3 * C);
    layernorm_backward(ga->dresidual, g.ln1w, g.ln1b, ga->dln, x, w.ln1w, a.ln1_mean, a.ln1_rstd, BT, C);
}

// ----------------------------------------------------------------------------
// The model interface that trainer.h drives (the CUDA build implements the same functions).

// The model in pieces, for the drivers in zero.h and pipeline.h: embedding, each layer, the head
// (final LayerNorm, tied classifier, loss), and their backward passes, in that order. A micro-batch
// is (B, T) with B and T at most what the model was created for.

static void model_embed_forward(Model *m, const int *inputs, int B, int T) {
    const GPT2Config *c = &m->config;
    int V = c->vocab_size, BT = B * T;
    if (B > m->B || T > m->T) fatal("micro-batch %dx%d is larger than the model's buffers %dx%d", B, T, m->B, m->T);
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) fatal("input token %d at position %d is outside the vocabulary of %d", inputs[i], i, V);
    }
    memcpy(m->inputs, inputs, BT * sizeof(int));
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
    OuterWeights o = outer_view(m->uparams[0], c);
    encoder_forward(m->act_ptr[ACT_ENCODED], inputs, o.wte, o.wpe, B, T, c->channels);
}

static void model_layer_forward(Model *m, int l) { layer_forward(m, l, m->cur_B, m->cur_T); }

// A pipeline stage's boundary: the input of its first layer (received from the stage before, in
// place of the embedding), its last layer's output, and the gradient buffer that holds dloss/d(output)
// before the stage's backward and dloss/d(input) after it.
static float *model_stage_input(Model *m, int B, int T) {
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
    return m->act_ptr[ACT_ENCODED];
}
static float *model_stage_output(Model *m) { return layer_acts(m, m->last - 1).residual3; }
static float *model_stage_grad(Model *m) { return m->ga.dresidual; }

// With targets: returns the mean loss and leaves dloss/dlogits, scaled by dloss (the weight of one
// token in the step's mean), for model_head_backward. Without: leaves the logits for sampling.
static float model_head_forward(Model *m, const int *targets, float dloss) {
    const GPT2Config *c = &m->config;
    int C = c->channels, V = c->vocab_size, Vp = c->padded_vocab_size, BT = m->cur_B * m->cur_T;
    OuterWeights o = outer_view(m->uparams[0], c);
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3, o.lnfw, o.lnfb, BT, C);
    matmul_forward(a.logits, a.lnf, o.wte, NULL, BT, C, Vp);
    m->mean_loss = -1.0f;
    if (targets) {
        for (int i = 0; i < BT; i++) {
            if (targets[i] < 0 || targets[i] >= V) fatal("target token %d at position %d is outside the vocabulary of %d", targets[i], i, V);
        }
        memcpy(m->targets, targets, BT * sizeof(int));
        classifier_forward_backward(a.logits, a.losses, targets, BT, V, Vp, dloss);
        double s = 0.0;  // fixed order, so the loss is reproducible bit for bit
        for (int i = 0; i < BT; i++) s += a.losses[i];
        m->mean_loss = (float)(s / BT);
    }
    return m->mean_loss;
}

static const float *model_logits(Model *m, int b, int t) {
    return m->act_ptr[ACT_LOGITS] + ((size_t)b * m->cur_T + t) * m->config.padded_vocab_size;
}

// Accumulates the head's gradients into the outer unit's and leaves dloss/d(last layer output).
static void model_head_backward(Model *m) {
    const GPT2Config *c = &m->config;
    int C = c->channels, Vp = c->padded_vocab_size, BT = m->cur_B * m->cur_T;
    OuterWeights o = outer_view(m->uparams[0], c), g = outer_view(m->ugrads[0], c);
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    GradActTensors *ga = &m->ga;
    matmul_backward(ga->dlnf, g.wte, NULL, a.logits, a.lnf, o.wte, BT, C, Vp);
    memset(ga->dresidual, 0, (size_t)BT * C * sizeof(float));
    layernorm_backward(ga->dresidual, g.lnfw, g.lnfb, ga->dlnf, a.residual3, o.lnfw, a.lnf_mean, a.lnf_rstd, BT, C);
}

static void model_layer_backward(Model *m, int l) { layer_backward(m, l, m->cur_B, m->cur_T); }

static void model_embed_backward(Model *m) {
    OuterWeights g = outer_view(m->ugrads[0], &m->config);
    encoder_backward(g.wte, g.wpe, m->ga.dresidual, m->inputs, m->cur_B, m->cur_T, m->config.channels);
}

// Sum of squares of a flat float array, in fixed 64K chunks summed in order: the result does not
// depend on the number of threads, which exact resume and rank-count independence need.
#define NORM_CHUNK 65536
static double sum_squares(const float *x, size_t n) {
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial = (double *)mallocCheck(nchunks * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < nchunks; ch++) {
        size_t lo = ch * NORM_CHUNK, hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * x[i];
        partial[ch] = s;
    }
    double total = 0.0;
    for (size_t ch = 0; ch < nchunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

// The backend zero.h works through; on the CPU every buffer is host memory.
static double backend_sum_squares(const float *x, size_t n) { return sum_squares(x, n); }
static size_t backend_allocated = 0;  // bytes handed out, so a run can report them beside its plan
static float *backend_alloc(size_t n) {
    backend_allocated += n * sizeof(float);
    return (float *)callocCheck(n, sizeof(float));
}
static void backend_free(float *p) { free(p); }
static void backend_to_host(float *host, const float *buf, size_t n) { memcpy(host, buf, n * sizeof(float)); }
static void backend_from_host(float *buf, const float *host, size_t n) { memcpy(buf, host, n * sizeof(float)); }
static void backend_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
static void backend_zero(float *buf, size_t n) { memset(buf, 0, n * sizeof(float)); }
static void backend_add(float *dst, const float *src, size_t n) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

// AdamW on n parameters with their gradients and moments; decayed says whether weight decay
// applies (matmul weights and embeddings). Gradients are multiplied by grad_scale first (global-norm
// clipping); t is the 1-based step.
static void backend_adamw(float *p, const float *g, float *mom, float *vel, size_t n, int decayed, const AdamWArgs *a) {
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

// No honest dense peak is known for an arbitrary CPU, so MFU is not reported (the log gives FLOP/s).
static double model_peak_flops(void) { return 0.0; }

static const char *model_device_name(void) {
    static char name[64];
#ifdef _OPENMP
    snprintf(name, sizeof(name), "CPU, %d OpenMP threads", omp_get_max_threads());
#else
    snprintf(name, sizeof(name), "CPU, 1 thread");
#endif
    return name;
}


#include "trainer.h"

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
