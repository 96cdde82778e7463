// block.h: the pre-norm block's choice points, one function each, switching on the config's choice
// (model_config.h), never on a family: the norm, what follows the q/k/v matmul (QK-norm, then the positions),
// attention, and the MLP's activation. model.h composes them into a layer, forward and backward, and owns the
// memory; a new norm, position scheme or activation is a value in model_config.h, its kernels (backend.h), and one
// case here. The tensors a layer reads and writes are named here too (model.h points them into its buffers).
#ifndef BLOCK_H
#define BLOCK_H

#include "../backend/backend.h"  // the kernels, and through it ModelConfig

// A layer's activations (model.h's layout of model_config.h's BLOCK_ACTS; NULL for a role the options leave out).
typedef struct {
    floatX *encoded, *ln1;
    float *ln1_mean, *ln1_rstd;
    floatX *qkv, *atty;
    float *att;  // what attention's backward needs of the softmax: backend_att_saved_floats
    floatX *attproj, *residual2, *ln2;
    float *ln2_mean, *ln2_rstd;
    floatX *fch, *fch_gelu, *fcproj, *residual3, *lnf;  // fch_gelu: the MLP's activation output, whichever it is
    float *lnf_mean, *lnf_rstd;
    floatX *logits;
    float *losses;
    floatX *qkv_pre;  // QK-norm: q, k, v before the norm and RoPE
    float *qk_rstd;   // QK-norm's statistics, (B*T, NH + KV)
} ActivationTensors;

// Scratch for one layer's backward: gradients of activations never need more than one layer. Widths from
// the table's dims: dresidual, dln, dlnf (C), datty (attention's output width), a spare (C; with QK-norm the
// gradient before the norm, q/k/v wide), dqkv, dfch (the fc matmul's rows), dfch_gelu (the MLP's hidden width).
typedef struct {
    floatX *dresidual, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *dlnf, *dqkv_pre;
} GradActTensors;

// A layer's weights as the kernels read them (floatX), and its gradients (float), in the W_ roles' order; a role the
// family or its options leave out is NULL.
typedef struct {
    floatX *ln1w, *ln1b, *qkvw, *qkvb, *qnormw, *knormw, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *qnormw, *knormw, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerGrads;

// The block as a layer runs it: the choices, the widths (the table's dims), and RoPE's angle tables.
typedef struct {
    const ModelConfig *c;
    int C, NH, KV, hd, QKV, ATT, FC, HID;
    float eps;
    const float *rope_cos, *rope_sin;  // POS_ROPE: (maxT, hd/2) each, row p for position p
    int rope_in_attention;             // block_rope_in_attention
} Block;

// Whether attention applies RoPE as it reads q and k (backend_fuses_rope: the CUDA build), so that qkv keeps them
// unrotated and no pass of RoPE's own runs, forward or backward: RoPE without QK-norm, outside decoding (the
// key/value cache holds rotated keys, so decoding rotates the new token's q and k in a pass).
static int block_rope_in_attention(const ModelConfig *c, int decoding) {
    return c->positions == POS_ROPE && !c->qk_norm && !decoding && backend_fuses_rope();
}

// The norm before attention, the MLP or the head: out = norm(inp). (The LayerNorm kernels' epsilon is llm.c's 1e-5,
// which model_create holds the config to.)
static void block_norm_forward(const Block *d, floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *w,
                               const floatX *b, int N) {
    switch (d->c->norm) {
        case NORM_LAYERNORM: layernorm_forward(out, mean, rstd, inp, w, b, N, d->C); break;
        case NORM_RMSNORM: rmsnorm_forward(out, rstd, inp, w, N, d->C, d->eps); break;
    }
}

// dinp += norm'(dout), the weights' gradients += theirs.
static void block_norm_backward(const Block *d, floatX *dinp, float *dw, float *db, const floatX *dout, const floatX *inp,
                                const floatX *w, const float *mean, const float *rstd, int N) {
    switch (d->c->norm) {
        case NORM_LAYERNORM: layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, d->C); break;
        case NORM_RMSNORM: rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, d->C); break;
    }
}

// The q/k/v matmul and what follows it, for B sequences of T tokens at positions pos0.. (pos0 > 0: decoding):
// a->qkv ends as attention reads it (q and k unrotated where rope_in_attention). Where QK-norm is on, the matmul
// writes qkv_pre.
// ln1: the norm's output as the matmul reads it (a->ln1, or with --sp its rows gathered).
static void block_qkv_forward(const Block *d, const ActivationTensors *a, const LayerWeights *w, int B, int T, int pos0,
                              const floatX *ln1) {
    const ModelConfig *c = d->c;
    int BT = B * T;
    matmul_forward(c->qk_norm ? a->qkv_pre : a->qkv, ln1, w->qkvw, w->qkvb, BT, d->C, d->QKV);
    if (c->qk_norm) qknorm_forward(a->qkv, a->qk_rstd, a->qkv_pre, w->qnormw, w->knormw, BT, d->NH, d->KV, d->hd, d->eps);
    switch (c->positions) {
        case POS_LEARNED: break;  // the embedding added them
        case POS_ROPE:
            if (!d->rope_in_attention) {
                size_t row = (size_t)pos0 * (d->hd / 2);
                rope_forward(a->qkv, d->rope_cos + row, d->rope_sin + row, B, T, d->NH, d->KV, d->hd);
            }
            break;
    }
}

// block_qkv_forward's backward after attention's: ga->dqkv (the gradient of what attention read) back through the
// positions and QK-norm, the norm's weights' gradients accumulated. Returns the gradient of the matmul's output.
static const floatX *block_qkv_backward(const Block *d, const GradActTensors *ga, const ActivationTensors *a,
                                        const LayerWeights *w, const LayerGrads *g, int B, int T) {
    switch (d->c->positions) {
        case POS_LEARNED: break;
        case POS_ROPE:  // where attention rotated q and k in its loads, dQ and dK came back un-rotated
            if (!d->rope_in_attention) rope_backward(ga->dqkv, d->rope_cos, d->rope_sin, B, T, d->NH, d->KV, d->hd);
            break;
    }
    if (!d->c->qk_norm) return ga->dqkv;
    qknorm_backward(ga->dqkv_pre, g->qnormw, g->knormw, ga->dqkv, a->qkv_pre, w->qnormw, w->knormw, a->qk_rstd, B * T,
                    d->NH, d->KV, d->hd);
    return ga->dqkv_pre;
}

// Causal attention of NH query heads over KV key/value heads (multi-head: KV = NH), RoPE in its loads where
// rope_in_attention.
static void block_attention_forward(const Block *d, const ActivationTensors *a, int B, int T) {
    attention_gqa_forward(a->atty, a->att, a->qkv, B, T, d->NH, d->KV, d->hd, d->rope_in_attention ? d->rope_cos : NULL,
                          d->rope_in_attention ? d->rope_sin : NULL);
}
static void block_attention_backward(const Block *d, const GradActTensors *ga, const ActivationTensors *a, int B, int T) {
    attention_gqa_backward(ga->dqkv, ga->datty, a->qkv, a->atty, a->att, B, T, d->NH, d->KV, d->hd,
                           d->rope_in_attention ? d->rope_cos : NULL, d->rope_in_attention ? d->rope_sin : NULL);
}

// The MLP's activation: out = act(fch), fch the first matmul's output (FC wide: H, or up | gate for a gated one).
static void block_mlp_act_forward(const Block *d, floatX *out, const floatX *fch, int BT) {
    switch (d->c->mlp) {
        case MLP_GELU: gelu_forward(out, fch, (long)BT * d->FC); break;
        case MLP_SWIGLU: swiglu_forward(out, fch, BT, d->HID); break;
        case MLP_RELU2: relu2_forward(out, fch, (long)BT * d->HID); break;
        case MLP_GEGLU: geglu_forward(out, fch, BT, d->HID); break;
    }
}
// dfch = act'(fch) dout (overwritten).
static void block_mlp_act_backward(const Block *d, floatX *dfch, const floatX *dout, const floatX *fch, int BT) {
    switch (d->c->mlp) {
        case MLP_GELU: gelu_backward(dfch, fch, dout, (long)BT * d->FC); break;
        case MLP_SWIGLU: swiglu_backward(dfch, dout, fch, BT, d->HID); break;
        case MLP_RELU2: relu2_backward(dfch, fch, dout, (long)BT * d->HID); break;
        case MLP_GEGLU: geglu_backward(dfch, dout, fch, BT, d->HID); break;
    }
}
// GELU in the matmuls' epilogues where the backend fuses it (rounded once, so not the bits of the two kernels:
// backward recomputes the activation the same way).
static int block_gelu_fused(const Block *d) { return d->c->mlp == MLP_GELU && backend_fuses_gelu(); }

#endif
