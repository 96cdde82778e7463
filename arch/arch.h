// arch.h: an architecture is data. A family is a table of its parameter tensors (name, shape in the config's
// symbols, per layer or outer, weight-decayed or not, initialisation rule, the option that makes it present, the
// role it plays in the block, how a fused tensor packs its pieces, which end of the model uses an outer tensor),
// listed in its model file's order; everything the distributed code and the reports need about parameters derives
// from the table by the pure functions below: tensor sizes and file offsets, the units (unit 0 outer, unit 1 + l
// layer l, each contiguous), the ParamRuns mapping file order to unit order, a fused tensor's pieces, parameter
// counts (with and without the vocabulary's padding rows), FLOPs per token, and the random initialisation. The tables
// are the families' (gpt2.h, llama.h); the roles and the block's activation table are model_config.h's.
#ifndef ARCH_H
#define ARCH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../base/utils.h"

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
    int ends;         // an outer tensor's: which ends of the model use it (ARCH_END_ bits; 0 for a layer's run)
    size_t full_off;  // offset inside the unit as a holder of every outer tensor lays it out (unit_off but at a
                      // pipeline's end stage, ArchShape's ends): the key of the working copy's stochastic rounding,
                      // so an end stage rounds each element as one process does
} ParamRun;

// The ends of the model an outer tensor is used at (ParamRun's ends): the input end (the embedding, the first
// pipeline stage) and the output end (the head, the last stage). With --pp each end stage holds only the outer
// tensors it uses (ArchShape's ends): the first the embedding (and GPT-2's positions), the last the final norm and
// the head; a tensor both use (a tied embedding) is held at both, its gradients summed between them (zero.h).
enum { ARCH_END_INPUT = 1, ARCH_END_OUTPUT = 2, ARCH_END_BOTH = 3 };

// Options a tensor may depend on (ARCH_ALWAYS for none).
// ARCH_OPT_LAYERNORM: the block's norms are LayerNorms, which keep each row's mean beside its rstd (GPT-2); the
// Llama family's RMSNorms keep only the rstd. ARCH_OPT_GATED: the MLP's first matmul packs up and gate (SwiGLU).
enum {
    ARCH_NEVER = -1, ARCH_ALWAYS, ARCH_OPT_QKV_BIAS, ARCH_OPT_QK_NORM, ARCH_OPT_UNTIED, ARCH_OPT_TIED, ARCH_OPT_LAYERNORM,
    ARCH_OPT_GATED, NUM_ARCH_OPTS
};

// Initialisation rules (GPT-2's, which the Llama family shares: N(0, 0.02) weights, residual projections
// N(0, 0.02 / sqrt(2L)), norm gains 1, biases 0; rows of the padded vocabulary 0).
enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS };

// How a fused tensor packs its pieces along its rows (ArchParam's pack; arch_param_pieces): q | k | v by head
// counts (NH hd, KV hd, KV hd rows), or up | gate (H rows each) where ARCH_OPT_GATED is on (else one piece).
enum { PACK_ONE, PACK_QKV, PACK_UP_GATE };

// Tensor parallelism (--tp N, Megatron's split): the dimension of a tensor TP divides (ArchParam's tp; tp_layout.h
// cuts it, parallel/tensor_parallel.h runs the collectives that go with it):
//   TP_ROWS   a column-parallel matmul's weight or bias (q/k/v, the MLP's first matmul): each rank its rows, a fused
//             tensor piece by piece (pack: q | k | v by heads, up | gate evenly);
//   TP_COLS   a row-parallel matmul's weight (attention's output, the MLP's second matmul): each rank its columns;
//   TP_VOCAB  the embedding and the head: each rank Vp / N rows of the vocabulary;
//   TP_NONE   replicated: every rank holds it whole (norms, row-parallel biases, positions).
enum { TP_NONE, TP_ROWS, TP_COLS, TP_VOCAB };
// How a tensor's gradient completes across the TP group (ArchParam's tp_grad):
//   TP_GRAD_WHOLE     each rank computes its part whole (a split tensor's slice, or a replicated tensor from the
//                     replicated stream, equal on every rank): nothing to sum (with --sp a replicated tensor's
//                     gradient comes from the rank's rows: summed over the group);
//   TP_GRAD_PART      replicated, but applied head by head to the rank's own heads (QK-norm): the parts summed;
//   TP_GRAD_REPLICAS  split, with pieces several ranks hold (key/value heads when N exceeds KV): summed over them.
enum { TP_GRAD_WHOLE, TP_GRAD_PART, TP_GRAD_REPLICAS };

typedef struct {
    const char *name;  // as the file, --profile and errors call it
    int rows, cols;    // DIM_ symbols; per layer, the tensor is (L, rows, cols) in the file
    int per_layer;     // 1: one per layer, in units 1..L; 0: outer, in unit 0
    int decayed;       // AdamW's weight decay applies
    int init;          // INIT_ rule
    int present;       // ARCH_ALWAYS or the ARCH_OPT_ that the tensor needs
    int matmul;        // when it is a matmul's weight (6 FLOPs per element per token in training): an option
                       // (ARCH_OPT_TIED for an embedding that is also the head), ARCH_ALWAYS or ARCH_NEVER
    int role;          // what the block does with it (model_config.h's W_ roles)
    int pack;          // PACK_: the pieces of a fused tensor
    int at_input, at_output;  // an outer tensor: the option under which the input end (the embedding) and the output
                              // end (the head) use it (ARCH_ALWAYS, ARCH_NEVER, an option); a layer's: ARCH_NEVER
    int tp;            // TP_: the dimension tensor parallelism divides (the only place a tensor's split is stated)
    int tp_grad;       // TP_GRAD_: how its gradient completes across the TP group
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
    int num_heads, num_kv_heads;  // NH and KV: the q | k | v pieces' head counts
    int opt[NUM_ARCH_OPTS];  // opt[ARCH_ALWAYS] is 1
    size_t attn_flop_width;  // per layer and per token, attention's QK^T and AV cost 2 * 2 * width * T forward
    int sliced;              // a TP rank's slice (tp_local_shape): a replicated tensor (tp TP_NONE) keeps whole's dims
    size_t whole[NUM_DIMS];
    int ends;                // --pp: an end stage's ARCH_END_ bits: unit 0 holds only the outer tensors those ends use
                             // (arch_param_held); 0: every outer tensor (one process, a file's model)
} ArchShape;

static int arch_present(const ArchParam *p, const ArchShape *s) { return s->opt[p->present]; }
static int arch_opt_on(const ArchShape *s, int opt) { return opt != ARCH_NEVER && s->opt[opt]; }

// ARCH_END_ bits: the ends of the model that use tensor p (0 for a layer's tensor and an absent one).
static int arch_param_ends(const ArchParam *p, const ArchShape *s) {
    if (!arch_present(p, s)) return 0;
    return (arch_opt_on(s, p->at_input) ? ARCH_END_INPUT : 0) | (arch_opt_on(s, p->at_output) ? ARCH_END_OUTPUT : 0);
}

// Whether the units of shape s hold tensor p: a present layer tensor always; a present outer one where s holds every
// outer tensor (ends 0) or one of the ends that use it. Every walker of the units (sizes, offsets, runs, roles, the
// optimizers' tensors) asks this, so an end stage's outer unit is its own tensors packed in file order.
static int arch_param_held(const ArchParam *p, const ArchShape *s) {
    if (!arch_present(p, s)) return 0;
    return p->per_layer || s->ends == 0 || (arch_param_ends(p, s) & s->ends) != 0;
}

// Elements of tensor k (all layers for a per-layer tensor; 0 when absent), its rows counted as `rows_dim`
// says (DIM_VP for the stored size; the published counts use DIM_V).
static size_t arch_tensor_size_rows(const ArchParam *p, const ArchShape *s, int vocab_dim) {
    if (!arch_present(p, s)) return 0;
    const size_t *dim = s->sliced && p->tp == TP_NONE ? s->whole : s->dim;
    size_t rows = dim[p->rows == DIM_VP ? vocab_dim : p->rows];
    return rows * dim[p->cols] * (p->per_layer ? (size_t)s->num_layers : 1);
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

// Unit 0 packs the outer tensors (an end stage's: those it holds), unit 1 + l layer l's, each in file order.
static size_t arch_unit_size(const Arch *a, const ArchShape *s, int u) {
    size_t n = 0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        if (p->per_layer != (u > 0) || !arch_param_held(p, s)) continue;
        size_t sz = arch_tensor_size(p, s);
        n += p->per_layer ? sz / s->num_layers : sz;
    }
    return n;
}

// The runs in unit order (unit 0's tensors, then each layer's), each a piece of one tensor with its offset in
// the file's flat order and in its unit: model_param_runs for any table. Returns the count (at most
// num_params * (L + 1)); absent tensors, and the outer tensors an end stage does not hold, make no run.
static int arch_param_runs(const Arch *a, const ArchShape *s, ParamRun *runs) {
    size_t toff[ARCH_MAX_PARAMS], off = 0;
    for (int k = 0; k < a->num_params; k++) { toff[k] = off; off += arch_tensor_size(&a->params[k], s); }
    int n = 0;
    size_t uoff = 0, full = 0;
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        size_t sz = arch_tensor_size(p, s);
        if (p->per_layer || sz == 0) continue;
        if (arch_param_held(p, s)) {
            runs[n++] = (ParamRun){toff[k], sz, 0, uoff, p->decayed, arch_param_ends(p, s), full};
            uoff += sz;
        }
        full += sz;
    }
    int L = s->num_layers;
    for (int l = 0; l < L; l++) {
        uoff = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            size_t per = arch_tensor_size(p, s) / L;
            if (!p->per_layer || per == 0) continue;
            runs[n++] = (ParamRun){toff[k] + (size_t)l * per, per, 1 + l, uoff, p->decayed, 0, uoff};
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
// tensors before it in file order that live in the same kind of unit (an end stage's: those it holds).
static size_t arch_unit_offset(const Arch *a, const ArchShape *s, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const ArchParam *p = &a->params[j];
        if (p->per_layer != a->params[k].per_layer || !arch_param_held(p, s)) continue;
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

// A piece of a fused tensor: its rows [row, row + rows) of each layer's (rows, cols) matrix.
typedef struct {
    const char *name;
    size_t row, rows;
} ArchPiece;
#define ARCH_MAX_PIECES 3

// The pieces of tensor k (at most ARCH_MAX_PIECES), in row order; returns their count (1 for an unfused tensor, 0
// for an absent one). q | k | v: NH hd, KV hd, KV hd rows; up | gate: H rows each (SwiGLU; cpu/activations.h's order).
static int arch_param_pieces(const Arch *a, const ArchShape *s, int k, ArchPiece *out) {
    const ArchParam *p = &a->params[k];
    if (!arch_present(p, s)) return 0;
    size_t rows = s->dim[p->rows], hd = s->dim[DIM_HD];
    if (p->pack == PACK_QKV) {
        size_t q = (size_t)s->num_heads * hd, kv = (size_t)s->num_kv_heads * hd;
        out[0] = (ArchPiece){"q", 0, q};
        out[1] = (ArchPiece){"k", q, kv};
        out[2] = (ArchPiece){"v", q + kv, kv};
        return 3;
    }
    if (p->pack == PACK_UP_GATE && s->opt[ARCH_OPT_GATED]) {
        size_t H = s->dim[DIM_HID];
        out[0] = (ArchPiece){"up", 0, H};
        out[1] = (ArchPiece){"gate", H, H};
        return 2;
    }
    out[0] = (ArchPiece){p->name, 0, rows};
    return 1;
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
// Activations: what the forward keeps for the backward. A per-layer tensor is kept for every layer below its
// recompute level and shared by the layers (rebuilt in backward) from it; the rest are one copy. Sizes are per
// token in a DIM_ symbol (DIM_ONE for a row statistic), or attention's saved state, whose size is the build's
// (backend_att_saved_floats: the softmax on the CPU, its row statistics on a GPU). model.h lays activations out
// from the table (model_config.h's BLOCK_ACTS), by role.

#define ARCH_ACT_ATT (-1)         // width: attention's saved state, backend_att_saved_floats(B, NH, T) floats
#define ARCH_ACT_ALWAYS_KEPT 99   // shared_from: kept for every layer at every level
typedef struct {
    const char *name;
    int width;        // DIM_ symbol per token, or ARCH_ACT_ATT
    int is_float;     // float whatever the precision (statistics, the softmax, losses); else the build's floatX
    int per_layer;    // one per layer (below shared_from) or one for the model
    int shared_from;  // recompute level from which one copy is shared (0: always one copy)
    int present;      // ARCH_ALWAYS or the option it needs
    int role;         // model_config.h's ACT_ role: the tensor model.h's block reads it as
    int seq_sharded;  // --sp: kept as this rank's B T / N token rows (the residual stream, the norms), else all B T
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

#endif
