// arch.h: an architecture is data. A family is a table of its parameter tensors (name, shape in the config's
// symbols, per layer or outer, weight-decayed or not, initialisation rule, the option that makes it present),
// listed in its model file's order; everything the distributed code and the reports need about parameters
// derives from the table by the pure functions below: tensor sizes and file offsets, the units (unit 0
// outer, unit 1 + l layer l, each contiguous), the ParamRuns mapping file order to unit order, parameter
// counts (with and without the vocabulary's padding rows), FLOPs per token, and the random initialisation.
// Two tables: GPT-2 (which must derive exactly what gpt2.h derives; test/test_llama_cpu.c checks it) and
// the Llama family (LLAMA_FORMAT.md, docs/llama.md), with the Llama model file's header as pure functions.
#ifndef ARCH_H
#define ARCH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "utils.h"

// ----------------------------------------------------------------------------
// The table.

// Symbols a tensor's shape is written in; a family resolves each to a number for a given config.
enum {
    DIM_ONE,    // 1: a vector's second dimension
    DIM_V,      // vocabulary
    DIM_VP,     // vocabulary padded to a multiple of 128 (the stored rows)
    DIM_MAXT,   // max sequence length (GPT-2's position embedding)
    DIM_C,      // channels
    DIM_QKV,    // rows of the fused q/k/v projection: 3C for GPT-2, (NH + 2 KV) hd for Llama
    DIM_ATT,    // attention's output width: C for GPT-2, NH hd for Llama
    DIM_HD,     // head size
    DIM_FC,     // rows of the MLP's first matmul: 4C for GPT-2, 2H (up then gate) for Llama
    DIM_HID,    // the MLP's hidden width: 4C for GPT-2, H for Llama
    DIM_QKHEADS,  // heads that QK-norm normalises per token: NH + KV (activations only)
    NUM_DIMS
};

// A run maps a piece of a unit to its place in the file's flat order: the distributed code's (zero.h) view of
// the parameters. Units: unit 0 ("outer") packs the outer tensors, unit 1 + l layer l's, each contiguous, so a
// layer's weights can be gathered, freed, sent to a pipeline stage or reduce-scattered as one piece.
typedef struct {
    size_t flat;      // offset in the file's flat order
    size_t len;
    int unit;
    size_t unit_off;  // offset inside the unit
    int decayed;      // AdamW weight decay applies
} ParamRun;

// Options a tensor may depend on (ARCH_ALWAYS for none).
// ARCH_OPT_LAYERNORM: the block's norms are LayerNorms, which keep each row's mean beside its rstd (GPT-2); the
// Llama family's RMSNorms keep only the rstd.
enum {
    ARCH_NEVER = -1, ARCH_ALWAYS, ARCH_OPT_QKV_BIAS, ARCH_OPT_QK_NORM, ARCH_OPT_UNTIED, ARCH_OPT_TIED, ARCH_OPT_LAYERNORM,
    NUM_ARCH_OPTS
};

// Initialisation rules (GPT-2's, which the Llama family shares: N(0, 0.02) weights, residual projections
// N(0, 0.02 / sqrt(2L)), norm gains 1, biases 0; rows of the padded vocabulary 0).
enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS };

typedef struct {
    const char *name;  // as the file, --profile and errors call it
    int rows, cols;    // DIM_ symbols; per layer, the tensor is (L, rows, cols) in the file
    int per_layer;     // 1: one per layer, in units 1..L; 0: outer, in unit 0
    int decayed;       // AdamW's weight decay applies
    int init;          // INIT_ rule
    int present;       // ARCH_ALWAYS or the ARCH_OPT_ that the tensor needs
    int matmul;        // when it is a matmul's weight (6 FLOPs per element per token in training): an option
                       // (ARCH_OPT_TIED for an embedding that is also the head), ARCH_ALWAYS or ARCH_NEVER
} ArchParam;

#define ARCH_MAX_PARAMS 24
typedef struct {
    const char *family;
    const ArchParam *params;  // in the model file's order; units keep the same relative order
    int num_params;
} Arch;

// A config as the table sees it: the symbols' values, the depth, the options.
typedef struct {
    size_t dim[NUM_DIMS];
    int num_layers;
    int opt[NUM_ARCH_OPTS];  // opt[ARCH_ALWAYS] is 1
    size_t attn_flop_width;  // per layer and per token, attention's QK^T and AV cost 2 * 2 * width * T forward
} ArchShape;

static int arch_present(const ArchParam *p, const ArchShape *s) { return s->opt[p->present]; }

// Elements of tensor k (all layers for a per-layer tensor; 0 when absent), its rows counted as `rows_dim`
// says (DIM_VP for the stored size; the published counts use DIM_V).
static size_t arch_tensor_size_rows(const ArchParam *p, const ArchShape *s, int vocab_dim) {
    if (!arch_present(p, s)) return 0;
    size_t rows = s->dim[p->rows == DIM_VP ? vocab_dim : p->rows];
    return rows * s->dim[p->cols] * (p->per_layer ? (size_t)s->num_layers : 1);
}
static size_t arch_tensor_size(const ArchParam *p, const ArchShape *s) { return arch_tensor_size_rows(p, s, DIM_VP); }

// sizes[k] for every tensor of the table (0 for an absent one), in file order.
static void arch_param_sizes(const Arch *a, const ArchShape *s, size_t *sizes) {
    for (int k = 0; k < a->num_params; k++) sizes[k] = arch_tensor_size(&a->params[k], s);
}

static size_t arch_num_params(const Arch *a, const ArchShape *s) {
    size_t n = 0;
    for (int k = 0; k < a->num_params; k++) n += arch_tensor_size(&a->params[k], s);
    return n;
}

// Without the padding rows of the vocabulary: the count transformers prints for the same model.
static size_t arch_num_params_unpadded(const Arch *a, const ArchShape *s) {
    size_t n = 0;
    for (int k = 0; k < a->num_params; k++) n += arch_tensor_size_rows(&a->params[k], s, DIM_V);
    return n;
}

static int arch_num_units(const ArchShape *s) { return s->num_layers + 1; }

// Unit 0 packs the outer tensors, unit 1 + l layer l's, each in file order.
static size_t arch_unit_size(const Arch *a, const ArchShape *s, int u) {
    size_t n = 0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        if (p->per_layer != (u > 0)) continue;
        size_t sz = arch_tensor_size(p, s);
        n += p->per_layer ? sz / s->num_layers : sz;
    }
    return n;
}

// The runs in unit order (unit 0's tensors, then each layer's), each a piece of one tensor with its offset in
// the file's flat order and in its unit: model_param_runs for any table. Returns the count (at most
// num_params * (L + 1)); absent tensors make no run.
static int arch_param_runs(const Arch *a, const ArchShape *s, ParamRun *runs) {
    size_t toff[ARCH_MAX_PARAMS], off = 0;
    for (int k = 0; k < a->num_params; k++) { toff[k] = off; off += arch_tensor_size(&a->params[k], s); }
    int n = 0;
    size_t uoff = 0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        size_t sz = arch_tensor_size(p, s);
        if (p->per_layer || sz == 0) continue;
        runs[n++] = (ParamRun){toff[k], sz, 0, uoff, p->decayed};
        uoff += sz;
    }
    int L = s->num_layers;
    for (int l = 0; l < L; l++) {
        uoff = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            size_t per = arch_tensor_size(p, s) / L;
            if (!p->per_layer || per == 0) continue;
            runs[n++] = (ParamRun){toff[k] + (size_t)l * per, per, 1 + l, uoff, p->decayed};
            uoff += per;
        }
    }
    return n;
}

// Offset of tensor k in the flat (file-order) buffer; a per-layer tensor's layer l is at
// arch_tensor_offset + l * arch_tensor_size / L.
static size_t arch_tensor_offset(const Arch *a, const ArchShape *s, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++) off += arch_tensor_size(&a->params[j], s);
    return off;
}

// Offset of tensor k inside its unit (a per-layer tensor's offset inside each layer's unit): the sizes of the
// tensors before it in file order that live in the same kind of unit.
static size_t arch_unit_offset(const Arch *a, const ArchShape *s, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const ArchParam *p = &a->params[j];
        if (p->per_layer != a->params[k].per_layer) continue;
        size_t sz = arch_tensor_size(p, s);
        off += p->per_layer ? sz / s->num_layers : sz;
    }
    return off;
}

// Index of the tensor called `name`, or -1.
static int arch_find(const Arch *a, const char *name) {
    for (int k = 0; k < a->num_params; k++) if (strcmp(a->params[k].name, name) == 0) return k;
    return -1;
}

// Matmul weights per model (the head counted once: a tied head is wte, an untied one lm_head).
static size_t arch_matmul_params(const Arch *a, const ArchShape *s) {
    size_t n = 0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        if (p->matmul != ARCH_NEVER && s->opt[p->matmul]) n += arch_tensor_size(p, s);
    }
    return n;
}

// Training FLOPs per token at sequence length T, the trainer's MFU formula: 6 per parameter plus attention's
// 6 L width T (GPT-2's 6N + 6LCT).
static double arch_flops_per_token(const Arch *a, const ArchShape *s, int T) {
    return 6.0 * (double)arch_num_params(a, s) + 6.0 * s->num_layers * (double)s->attn_flop_width * T;
}

// What the matmuls and causal attention come to exactly (report.h's --profile check): 6 per matmul weight per
// token, and the causal attention's 6 width (T + 1) per layer per token.
static double arch_flops_per_token_exact(const Arch *a, const ArchShape *s, int T) {
    return 6.0 * (double)arch_matmul_params(a, s) + 6.0 * s->num_layers * (double)s->attn_flop_width * (T + 1.0);
}

// Forward FLOPs per token of one layer (2 per matmul weight, attention's 2 * 2 * width * T) and of the head
// (2 * Vp * C): pipeline.h's stage costs (GPT-2: 24C^2 + 4TC and 2VpC).
static double arch_layer_forward_flops(const Arch *a, const ArchShape *s, int T) {
    double mm = 0.0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        if (p->per_layer && p->matmul != ARCH_NEVER && s->opt[p->matmul]) mm += (double)arch_tensor_size(p, s) / s->num_layers;
    }
    return 2.0 * mm + 4.0 * (double)T * (double)s->attn_flop_width;
}
static double arch_head_forward_flops(const ArchShape *s) { return 2.0 * (double)s->dim[DIM_VP] * (double)s->dim[DIM_C]; }

// The random initialisation of the whole flat buffer from the table: model_init_random's draws, tensor by
// tensor in file order, so a GPT-2 table gives model_init_random's bits.
static void arch_init_random(const Arch *a, const ArchShape *s, float *params, uint64_t seed) {
    uint64_t rng = mix_seed(seed ^ 0x6770743221ull);
    float residual_std = 0.02f / sqrtf(2.0f * s->num_layers);
    float *p = params;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *t = &a->params[k];
        size_t sz = arch_tensor_size(t, s), n = arch_tensor_size_rows(t, s, DIM_V);  // padded rows stay zero
        float std = t->init == INIT_RESIDUAL ? residual_std : 0.02f;
        for (size_t j = 0; j < sz; j++) {
            if (j >= n) { p[j] = 0.0f; continue; }
            if (t->init == INIT_NORMAL || t->init == INIT_RESIDUAL) {
                float u1 = random_f32(&rng), u2 = random_f32(&rng);
                p[j] = std * sqrtf(-2.0f * logf(1.0f - u1)) * cosf(2.0f * (float)M_PI * u2);
            } else {
                p[j] = t->init == INIT_ONES ? 1.0f : 0.0f;
            }
        }
        p += sz;
    }
}

// ----------------------------------------------------------------------------
// Activations: what the forward keeps for the backward, per family. A per-layer tensor is kept for every layer
// below its recompute level and shared by the layers (rebuilt in backward) from it; the rest are one copy.
// Sizes are per token in a DIM_ symbol (DIM_ONE for a row statistic), or attention's saved state, whose size
// is the build's (backend_att_saved_floats: the softmax on the CPU, its row statistics on a GPU). model.h's enum,
// ACT_SHARED_FROM_LEVEL, ACT_PER_LAYER, ACT_IS_FLOAT and act_sizes became this table: model.h lays activations out
// from it, by role.

#define ARCH_ACT_ATT (-1)         // width: attention's saved state, backend_att_saved_floats(B, NH, T) floats
#define ARCH_ACT_ALWAYS_KEPT 99   // shared_from: kept for every layer at every level
typedef struct {
    const char *name;
    int width;        // DIM_ symbol per token, or ARCH_ACT_ATT
    int is_float;     // float whatever the precision (statistics, the softmax, losses); else the build's floatX
    int per_layer;    // one per layer (below shared_from) or one for the model
    int shared_from;  // recompute level from which one copy is shared (0: always one copy)
    int present;      // ARCH_ALWAYS or the option it needs
} ArchAct;

typedef struct {
    const ArchAct *acts;
    int num_acts;
} ArchActs;

// Copies of activation i at a recompute level, for a model running `layers` layers.
static int arch_act_copies(const ArchAct *a, int layers, int recompute) {
    if (!a->per_layer) return 1;
    return recompute < a->shared_from ? layers : 1;
}

// Elements of one copy (0 when the option leaves it out); att_saved: the build's backend_att_saved_floats(B, NH, T).
static size_t arch_act_elems(const ArchAct *a, const ArchShape *s, int B, int T, size_t att_saved) {
    if (!s->opt[a->present]) return 0;
    if (a->width == ARCH_ACT_ATT) return att_saved;
    return (size_t)B * T * s->dim[a->width];
}

// Bytes of every activation at a recompute level, each copy 256-byte aligned as model.h lays them out.
static size_t arch_act_bytes(const ArchActs *t, const ArchShape *s, int B, int T, int recompute, int layers,
                             size_t x_bytes, size_t att_saved) {
    size_t total = 0;
    for (int i = 0; i < t->num_acts; i++) {
        const ArchAct *a = &t->acts[i];
        size_t per = (arch_act_elems(a, s, B, T, att_saved) * (a->is_float ? sizeof(float) : x_bytes) + 255) / 256 * 256;
        total += per * arch_act_copies(a, layers, recompute);
    }
    return total;
}

// The pre-norm block's activations, in model.h's order; each family's options choose its rows (an absent row takes
// no bytes). Level 1 drops the MLP's activation output (GELU or SwiGLU reruns from fch), level 2 the norm outputs
// too, level 3 everything but each layer's output (the whole layer reruns). LayerNorm (GPT-2) keeps each row's mean
// and rstd, RMSNorm (the Llama family) the rstd alone. With QK-norm the block keeps q and k before the norm
// (qkv_pre) and the norm's per-head rstd; qkv is then after QK-norm and RoPE, what attention reads.
static const ArchAct BLOCK_ACTS[] = {
    {"encoded", DIM_C, 0, 0, ARCH_ACT_ALWAYS_KEPT, ARCH_ALWAYS},
    {"ln1", DIM_C, 0, 1, 2, ARCH_ALWAYS},
    {"ln1_mean", DIM_ONE, 1, 1, 3, ARCH_OPT_LAYERNORM},
    {"ln1_rstd", DIM_ONE, 1, 1, 3, ARCH_ALWAYS},
    {"qkv_pre", DIM_QKV, 0, 1, 3, ARCH_OPT_QK_NORM},
    {"qk_rstd", DIM_QKHEADS, 1, 1, 3, ARCH_OPT_QK_NORM},
    {"qkv", DIM_QKV, 0, 1, 3, ARCH_ALWAYS},
    {"atty", DIM_ATT, 0, 1, 3, ARCH_ALWAYS},
    {"att", ARCH_ACT_ATT, 1, 1, 3, ARCH_ALWAYS},
    {"attproj", DIM_C, 0, 1, 0, ARCH_ALWAYS},
    {"residual2", DIM_C, 0, 1, 3, ARCH_ALWAYS},
    {"ln2", DIM_C, 0, 1, 2, ARCH_ALWAYS},
    {"ln2_mean", DIM_ONE, 1, 1, 3, ARCH_OPT_LAYERNORM},
    {"ln2_rstd", DIM_ONE, 1, 1, 3, ARCH_ALWAYS},
    {"fch", DIM_FC, 0, 1, 3, ARCH_ALWAYS},
    {"fch_gelu", DIM_HID, 0, 1, 1, ARCH_ALWAYS},  // the MLP's activation output: GELU's, or SwiGLU's (model.h's role)
    {"fcproj", DIM_C, 0, 1, 0, ARCH_ALWAYS},
    {"residual3", DIM_C, 0, 1, ARCH_ACT_ALWAYS_KEPT, ARCH_ALWAYS},
    {"lnf", DIM_C, 0, 0, 0, ARCH_ALWAYS},
    {"lnf_mean", DIM_ONE, 1, 0, 0, ARCH_OPT_LAYERNORM},
    {"lnf_rstd", DIM_ONE, 1, 0, 0, ARCH_ALWAYS},
    {"logits", DIM_VP, 0, 0, 0, ARCH_ALWAYS},
    {"losses", DIM_ONE, 1, 0, 0, ARCH_ALWAYS},
};

// ----------------------------------------------------------------------------
// GPT-2: llm.c's 16 tensors.

static const ArchParam GPT2_PARAMS[] = {
    {"wte", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_OPT_TIED},  // also the head (GPT-2 is tied)
    {"wpe", DIM_MAXT, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_NEVER},
    {"ln1w", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"ln1b", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"qkvw", DIM_QKV, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"qkvb", DIM_QKV, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"attprojw", DIM_C, DIM_ATT, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"attprojb", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"ln2w", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"ln2b", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"fcw", DIM_FC, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"fcb", DIM_FC, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"fcprojw", DIM_C, DIM_HID, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"fcprojb", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
    {"lnfw", DIM_C, DIM_ONE, 0, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"lnfb", DIM_C, DIM_ONE, 0, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER},
};
static const Arch ARCH_GPT2 = {"gpt2", GPT2_PARAMS, (int)(sizeof(GPT2_PARAMS) / sizeof(GPT2_PARAMS[0]))};

// GPT-2's activations: the pre-norm block's table below, with LayerNorm's means.
static const ArchActs GPT2_ACT_TABLE = {BLOCK_ACTS, (int)(sizeof(BLOCK_ACTS) / sizeof(BLOCK_ACTS[0]))};


// ----------------------------------------------------------------------------
// The Llama family (LLAMA_FORMAT.md): Llama 2/3, TinyLlama, SmolLM; Qwen 2 (qkv_bias), Qwen 3 / OLMo 2 (qk_norm).

#define LLAMA_MAGIC 20261126
#define LLAMA_VERSION_FP32 1

typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp: V rounded up to a multiple of 128 (rows V..Vp-1 of wte and lm_head are zero)
    int num_layers;         // L
    int num_heads;          // NH
    int num_kv_heads;       // KV: divides NH; NH is multi-head attention, 1 multi-query
    int channels;           // C
    int head_dim;           // hd: usually C / NH (Qwen 3 may differ); even, for RoPE's halves
    int ffn_hidden;         // H: SwiGLU's hidden width
    int tied;               // the head is wte (no lm_head tensor)
    int qkv_bias;           // q, k, v projections have a bias (Qwen 2)
    int qk_norm;            // RMSNorm over hd on each head's q and k before RoPE (Qwen 3, OLMo 2)
    int rope_scaling;       // 0 none, 1 Llama 3.1's ("rope_type": "llama3")
    float norm_eps;         // RMSNorm's epsilon
    float rope_theta;       // θ
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;  // rope_scaling 1 only, else 0
    int rope_original_max_pos;                                       // rope_scaling 1 only, else 0
} LlamaConfig;

static const ArchParam LLAMA_PARAMS[] = {
    {"wte", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_OPT_TIED},  // the head when tied
    {"attn_norm", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"wqkv", DIM_QKV, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"bqkv", DIM_QKV, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_OPT_QKV_BIAS, ARCH_NEVER},
    {"q_norm", DIM_HD, DIM_ONE, 1, 0, INIT_ONES, ARCH_OPT_QK_NORM, ARCH_NEVER},
    {"k_norm", DIM_HD, DIM_ONE, 1, 0, INIT_ONES, ARCH_OPT_QK_NORM, ARCH_NEVER},
    {"wo", DIM_C, DIM_ATT, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"mlp_norm", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"wfc", DIM_FC, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"wproj", DIM_C, DIM_HID, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS},
    {"final_norm", DIM_C, DIM_ONE, 0, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER},
    {"lm_head", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_OPT_UNTIED, ARCH_ALWAYS},
};
static const Arch ARCH_LLAMA = {"llama", LLAMA_PARAMS, (int)(sizeof(LLAMA_PARAMS) / sizeof(LLAMA_PARAMS[0]))};

// The Llama family's activations: the pre-norm block's table, RMSNorm keeping no mean, QK-norm's rows with the option.
static const ArchActs LLAMA_ACT_TABLE = {BLOCK_ACTS, (int)(sizeof(BLOCK_ACTS) / sizeof(BLOCK_ACTS[0]))};

static void llama_arch_shape(const LlamaConfig *c, ArchShape *s) {
    memset(s, 0, sizeof(*s));
    size_t C = c->channels, hd = c->head_dim, H = c->ffn_hidden;
    s->dim[DIM_ONE] = 1;
    s->dim[DIM_V] = c->vocab_size;
    s->dim[DIM_VP] = c->padded_vocab_size;
    s->dim[DIM_MAXT] = c->max_seq_len;
    s->dim[DIM_C] = C;
    s->dim[DIM_QKV] = (size_t)(c->num_heads + 2 * c->num_kv_heads) * hd;
    s->dim[DIM_ATT] = (size_t)c->num_heads * hd;
    s->dim[DIM_HD] = hd;
    s->dim[DIM_FC] = 2 * H;
    s->dim[DIM_HID] = H;
    s->dim[DIM_QKHEADS] = (size_t)(c->num_heads + c->num_kv_heads);
    s->num_layers = c->num_layers;
    s->opt[ARCH_ALWAYS] = 1;
    s->opt[ARCH_OPT_QKV_BIAS] = c->qkv_bias != 0;
    s->opt[ARCH_OPT_QK_NORM] = c->qk_norm != 0;
    s->opt[ARCH_OPT_UNTIED] = !c->tied;
    s->opt[ARCH_OPT_TIED] = c->tied != 0;
    s->attn_flop_width = (size_t)c->num_heads * hd;
}

// SwiGLU's hidden width from Meta's recipe: h = int(2 * 4C / 3), h = int(ffn_dim_multiplier * h) when a
// multiplier is given (> 0), then rounded up to a multiple of multiple_of (Llama 3.2 1B: C 2048, 1.4, 1024 → 8192).
static int llama_ffn_hidden(int C, int multiple_of, double ffn_dim_multiplier) {
    long h = (long)(2 * (4L * C) / 3);
    if (ffn_dim_multiplier > 0) h = (long)(ffn_dim_multiplier * (double)h);
    return (int)((h + multiple_of - 1) / multiple_of * multiple_of);
}

// The first thing wrong with a config, in words naming the field and what was expected; NULL when it is fine.
// msg holds the text (returned when not NULL).
static const char *llama_config_error(const LlamaConfig *c, char *msg, size_t len) {
    if (c->num_layers < 1 || c->num_heads < 1 || c->num_kv_heads < 1 || c->channels < 1 || c->head_dim < 1 ||
        c->ffn_hidden < 1 || c->max_seq_len < 1 || c->vocab_size < 1 || c->padded_vocab_size < c->vocab_size) {
        snprintf(msg, len, "implausible Llama shape (maxT %d, V %d, Vp %d, L %d, NH %d, KV %d, C %d, hd %d, H %d): "
                 "every size must be positive and Vp >= V", c->max_seq_len, c->vocab_size, c->padded_vocab_size,
                 c->num_layers, c->num_heads, c->num_kv_heads, c->channels, c->head_dim, c->ffn_hidden);
        return msg;
    }
    if (c->num_heads % c->num_kv_heads != 0) {
        snprintf(msg, len, "n_head %d is not a multiple of n_kv_head %d: grouped-query attention needs the key/value "
                 "heads to divide the query heads (equal for multi-head, 1 for multi-query)", c->num_heads, c->num_kv_heads);
        return msg;
    }
    if (c->head_dim % 2 != 0) {
        snprintf(msg, len, "head_dim %d is odd: RoPE rotates the two halves of each head, so it must be even", c->head_dim);
        return msg;
    }
    if (c->tied != 0 && c->tied != 1) { snprintf(msg, len, "tied is %d, expected 0 or 1", c->tied); return msg; }
    if (c->qkv_bias != 0 && c->qkv_bias != 1) { snprintf(msg, len, "qkv_bias is %d, expected 0 or 1", c->qkv_bias); return msg; }
    if (c->qk_norm != 0 && c->qk_norm != 1) { snprintf(msg, len, "qk_norm is %d, expected 0 or 1", c->qk_norm); return msg; }
    if (!(c->norm_eps > 0.0f) || !isfinite(c->norm_eps)) {
        snprintf(msg, len, "norm_eps %g, expected a positive number such as 1e-5", c->norm_eps);
        return msg;
    }
    if (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta)) {
        snprintf(msg, len, "rope_theta %g, expected a positive number such as 10000 or 500000", c->rope_theta);
        return msg;
    }
    if (c->rope_scaling == 0) {
        if (c->rope_factor != 0.0f || c->rope_low_freq_factor != 0.0f || c->rope_high_freq_factor != 0.0f ||
            c->rope_original_max_pos != 0) {
            snprintf(msg, len, "rope_scaling 0 (none) with non-zero scaling fields (factor %g, low %g, high %g, "
                     "original %d): expected all 0", c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                     c->rope_original_max_pos);
            return msg;
        }
    } else if (c->rope_scaling == 1) {
        if (!(c->rope_factor >= 1.0f) || !(c->rope_low_freq_factor > 0.0f) ||
            !(c->rope_high_freq_factor > c->rope_low_freq_factor) || c->rope_original_max_pos < 1) {
            snprintf(msg, len, "rope_scaling 1 (llama3) needs factor >= 1, 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings >= 1 (got factor %g, low %g, high %g, original %d)",
                     c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_original_max_pos);
            return msg;
        }
    } else {
        snprintf(msg, len, "rope_scaling %d, expected 0 (none) or 1 (llama3)", c->rope_scaling);
        return msg;
    }
    return NULL;
}

static void llama_check_config(const LlamaConfig *c, const char *where) {
    char msg[512];
    if (llama_config_error(c, msg, sizeof(msg))) fatal("%s: %s", where, msg);
}

static int arch_padded_vocab(int V) { return (V + 127) / 128 * 128; }

// The presets: published shapes (their configs on the Hugging Face hub). Returns 0 for an unknown name.
static int llama_preset(const char *name, LlamaConfig *c) {
    memset(c, 0, sizeof(*c));
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    if (strcmp(name, "smollm-135m") == 0) {  // HuggingFaceTB/SmolLM-135M
        c->max_seq_len = 2048; c->vocab_size = 49152; c->num_layers = 30; c->num_heads = 9; c->num_kv_heads = 3;
        c->channels = 576; c->ffn_hidden = 1536; c->tied = 1;
    } else if (strcmp(name, "llama-3.2-1b") == 0) {  // meta-llama/Llama-3.2-1B
        c->max_seq_len = 131072; c->vocab_size = 128256; c->num_layers = 16; c->num_heads = 32; c->num_kv_heads = 8;
        c->channels = 2048; c->ffn_hidden = 8192; c->tied = 1; c->rope_theta = 500000.0f;
        c->rope_scaling = 1; c->rope_factor = 32.0f; c->rope_low_freq_factor = 1.0f; c->rope_high_freq_factor = 4.0f;
        c->rope_original_max_pos = 8192;
    } else if (strcmp(name, "llama-3.1-8b") == 0) {  // meta-llama/Llama-3.1-8B
        c->max_seq_len = 131072; c->vocab_size = 128256; c->num_layers = 32; c->num_heads = 32; c->num_kv_heads = 8;
        c->channels = 4096; c->ffn_hidden = 14336; c->tied = 0; c->rope_theta = 500000.0f;
        c->rope_scaling = 1; c->rope_factor = 8.0f; c->rope_low_freq_factor = 1.0f; c->rope_high_freq_factor = 4.0f;
        c->rope_original_max_pos = 8192;
    } else if (strcmp(name, "tinyllama-1.1b") == 0) {  // TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T
        c->max_seq_len = 2048; c->vocab_size = 32000; c->num_layers = 22; c->num_heads = 32; c->num_kv_heads = 4;
        c->channels = 2048; c->ffn_hidden = 5632; c->tied = 0;
    } else if (strcmp(name, "qwen2.5-0.5b") == 0) {  // Qwen/Qwen2.5-0.5B
        c->max_seq_len = 32768; c->vocab_size = 151936; c->num_layers = 24; c->num_heads = 14; c->num_kv_heads = 2;
        c->channels = 896; c->ffn_hidden = 4864; c->tied = 1; c->qkv_bias = 1; c->rope_theta = 1000000.0f;
        c->norm_eps = 1e-6f;
    } else {
        return 0;
    }
    c->padded_vocab_size = arch_padded_vocab(c->vocab_size);
    c->head_dim = c->channels / c->num_heads;
    return 1;
}
static const char *const LLAMA_PRESETS[] = {"smollm-135m", "llama-3.2-1b", "tinyllama-1.1b", "qwen2.5-0.5b", "llama-3.1-8b"};

// ----------------------------------------------------------------------------
// RoPE's angle tables (host code, shared by both builds; the kernels are the builds'). Frequencies
// f_i = 1 / θ^(2i/hd), i < hd/2, optionally rescaled as Llama 3.1 ("rope_type": "llama3"): wavelengths 2π/f
// longer than original/low_freq_factor are divided by factor, shorter than original/high_freq_factor kept, and in
// between interpolated. cos and sin (maxT, hd/2) hold the angle t * f_i, computed in fp32 in the same steps as
// transformers' LlamaRotaryEmbedding (fp32 inv_freq, the fp32 product t * f_i), so that at long positions the
// angles are the same floats and not merely close: at t = 8192 one ulp of f is already 1e-3 radians.

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

static RopeParams llama_rope_params(const LlamaConfig *c) {
    RopeParams p = {c->rope_scaling, c->rope_theta, c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                    c->rope_original_max_pos};
    return p;
}

// ----------------------------------------------------------------------------
// The Llama model file's header (LLAMA_FORMAT.md): 256 int32, floats stored as their float32 bits. Pure
// functions on the buffer; gpt2.h's model file reader and writer (dispatched by magic) call them.

static int32_t arch_f32_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static float arch_bits_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }

static void llama_header_write(const LlamaConfig *c, int32_t h[256]) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = LLAMA_MAGIC;
    h[1] = LLAMA_VERSION_FP32;
    h[2] = c->max_seq_len;
    h[3] = c->vocab_size;
    h[4] = c->padded_vocab_size;
    h[5] = c->num_layers;
    h[6] = c->num_heads;
    h[7] = c->num_kv_heads;
    h[8] = c->channels;
    h[9] = c->head_dim;
    h[10] = c->ffn_hidden;
    h[11] = c->tied;
    h[12] = c->qkv_bias;
    h[13] = c->qk_norm;
    h[14] = c->rope_scaling;
    h[15] = arch_f32_bits(c->norm_eps);
    h[16] = arch_f32_bits(c->rope_theta);
    h[17] = arch_f32_bits(c->rope_factor);
    h[18] = arch_f32_bits(c->rope_low_freq_factor);
    h[19] = arch_f32_bits(c->rope_high_freq_factor);
    h[20] = c->rope_original_max_pos;
}

// Fills c from a header; returns NULL, or the error ("FILE: ...", naming the slot and field) in msg. The
// config is checked too (llama_config_error), so a header that reads is one the kernels accept.
static const char *llama_header_read(const int32_t h[256], const char *file, LlamaConfig *c, char *msg, size_t len) {
    if (h[0] != LLAMA_MAGIC) {
        snprintf(msg, len, "%s: bad magic %d in slot 0, expected %d (a Llama-family model file of train_gpt)%s", file,
                 h[0], LLAMA_MAGIC, h[0] == 20240803 ? "; this is llm.c's llama3 branch file, whose interleaved q/k "
                 "rows and lost norm_eps need a conversion (docs/llama.md)" : h[0] == 20240326 ? "; this is a GPT-2 "
                 "model file" : "");
        return msg;
    }
    if (h[1] != LLAMA_VERSION_FP32) {
        snprintf(msg, len, "%s: version %d in slot 1, expected %d (fp32 tensors)%s", file, h[1], LLAMA_VERSION_FP32,
                 h[1] > LLAMA_VERSION_FP32 ? ": written by a newer train_gpt" : "");
        return msg;
    }
    for (int k = 21; k < 256; k++)
        if (h[k] != 0) {
            snprintf(msg, len, "%s: reserved header slot %d is %d, expected 0 (written by a newer train_gpt?)", file, k, h[k]);
            return msg;
        }
    memset(c, 0, sizeof(*c));
    c->max_seq_len = h[2];
    c->vocab_size = h[3];
    c->padded_vocab_size = h[4];
    c->num_layers = h[5];
    c->num_heads = h[6];
    c->num_kv_heads = h[7];
    c->channels = h[8];
    c->head_dim = h[9];
    c->ffn_hidden = h[10];
    c->tied = h[11];
    c->qkv_bias = h[12];
    c->qk_norm = h[13];
    c->rope_scaling = h[14];
    c->norm_eps = arch_bits_f32(h[15]);
    c->rope_theta = arch_bits_f32(h[16]);
    c->rope_factor = arch_bits_f32(h[17]);
    c->rope_low_freq_factor = arch_bits_f32(h[18]);
    c->rope_high_freq_factor = arch_bits_f32(h[19]);
    c->rope_original_max_pos = h[20];
    if (c->padded_vocab_size != arch_padded_vocab(c->vocab_size) && c->vocab_size > 0) {
        snprintf(msg, len, "%s: padded_vocab_size %d in slot 4, expected %d (vocab_size %d rounded up to a multiple of "
                 "128)", file, c->padded_vocab_size, arch_padded_vocab(c->vocab_size), c->vocab_size);
        return msg;
    }
    char why[400];
    if (llama_config_error(c, why, sizeof(why))) {
        snprintf(msg, len, "%s: %s", file, why);
        return msg;
    }
    return NULL;
}

#endif
