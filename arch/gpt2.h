// gpt2.h: the GPT-2 family (llm.c's): its parameter table (llm.c's 16 tensors, in its model file's order), its block's
// choices (LayerNorm eps 1e-5, a learned position table, GELU with a 4C hidden width, multi-head attention with a
// q/k/v bias, a tied head), the "dN" descriptors, and llm.c's model file header (version 3 fp32, 5 bf16).
#ifndef GPT2_H
#define GPT2_H

#include <ctype.h>
#include <math.h>
#include "../base/utils.h"
#include "model_config.h"  // ModelConfig, the roles, ModelFamily

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define NUM_PARAMETER_TENSORS 16
#define NUM_LAYER_PIECES 12  // the per-layer tensors, ln1w .. fcprojb

static const ArchParam GPT2_PARAMS[] = {
    {"wte", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_OPT_TIED, W_WTE, PACK_ONE, ARCH_ALWAYS, ARCH_OPT_TIED, TP_VOCAB, TP_GRAD_WHOLE},  // also the head
    {"wpe", DIM_MAXT, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_NEVER, W_WPE, PACK_ONE, ARCH_ALWAYS, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"ln1w", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LN1W, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"ln1b", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_LN1B, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"qkvw", DIM_QKV, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS, W_QKVW, PACK_QKV, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_REPLICAS},
    {"qkvb", DIM_QKV, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_QKVB, PACK_QKV, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_REPLICAS},
    {"attprojw", DIM_C, DIM_ATT, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS, W_ATTPROJW, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_COLS, TP_GRAD_WHOLE},
    {"attprojb", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_ATTPROJB, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"ln2w", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LN2W, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"ln2b", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_LN2B, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"fcw", DIM_FC, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS, W_FCW, PACK_UP_GATE, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_WHOLE},
    {"fcb", DIM_FC, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_FCB, PACK_UP_GATE, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_WHOLE},
    {"fcprojw", DIM_C, DIM_HID, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS, W_FCPROJW, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_COLS, TP_GRAD_WHOLE},
    {"fcprojb", DIM_C, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_FCPROJB, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"lnfw", DIM_C, DIM_ONE, 0, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LNFW, PACK_ONE, ARCH_NEVER, ARCH_ALWAYS, TP_NONE, TP_GRAD_WHOLE},
    {"lnfb", DIM_C, DIM_ONE, 0, 0, INIT_ZEROS, ARCH_ALWAYS, ARCH_NEVER, W_LNFB, PACK_ONE, ARCH_NEVER, ARCH_ALWAYS, TP_NONE, TP_GRAD_WHOLE},
};
static const Arch ARCH_GPT2 = {"gpt2", GPT2_PARAMS, (int)(sizeof(GPT2_PARAMS) / sizeof(GPT2_PARAMS[0]))};

static const char *const PARAM_NAMES[NUM_PARAMETER_TENSORS] __attribute__((unused)) = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// Weight decay applies to the matmul weights and the embeddings, not to biases or LayerNorm.
static const int PARAM_DECAYED[NUM_PARAMETER_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

// GPT-2's shape symbols as llm.c writes them (3C, 4C), apart from model_shape's general formulas, so that the tests
// can hold the two against each other.
static void gpt2_arch_shape(const ModelConfig *c, ArchShape *s) {
    memset(s, 0, sizeof(*s));
    size_t C = c->channels;
    s->dim[DIM_ONE] = 1;
    s->dim[DIM_V] = c->vocab_size;
    s->dim[DIM_VP] = c->padded_vocab_size;
    s->dim[DIM_MAXT] = c->max_seq_len;
    s->dim[DIM_C] = C;
    s->dim[DIM_QKV] = 3 * C;
    s->dim[DIM_ATT] = C;
    s->dim[DIM_HD] = C / c->num_heads;
    s->dim[DIM_FC] = 4 * C;
    s->dim[DIM_HID] = 4 * C;
    s->dim[DIM_QKHEADS] = 0;
    s->num_layers = c->num_layers;
    s->num_heads = s->num_kv_heads = c->num_heads;
    s->opt[ARCH_ALWAYS] = 1;
    s->opt[ARCH_OPT_TIED] = 1;
    s->opt[ARCH_OPT_LAYERNORM] = 1;
    s->attn_flop_width = C;
}

static void gpt2_param_sizes(const ModelConfig *c, size_t sizes[NUM_PARAMETER_TENSORS]) {
    ArchShape s;
    gpt2_arch_shape(c, &s);
    arch_param_sizes(&ARCH_GPT2, &s, sizes);
}

static const ModelFamily *gpt2_family(void);  // GPT2_FAMILY, below

// GPT-2's block choices for a config whose six shape fields are set.
static void gpt2_choices(ModelConfig *c) {
    c->family = gpt2_family();
    c->num_kv_heads = c->num_heads;
    c->head_dim = c->num_heads > 0 ? c->channels / c->num_heads : 0;
    c->ffn_hidden = 4 * c->channels;
    c->norm = NORM_LAYERNORM;
    c->norm_eps = 1e-5f;
    c->positions = POS_LEARNED;
    c->mlp = MLP_GELU;
    c->qkv_bias = 1;
    c->tied = 1;
}

// A GPT-2 config of this shape (the tests' models).
static ModelConfig gpt2_config(int maxT, int V, int Vp, int L, int NH, int C) {
    ModelConfig c;
    memset(&c, 0, sizeof(c));
    c.max_seq_len = maxT; c.vocab_size = V; c.padded_vocab_size = Vp; c.num_layers = L; c.num_heads = NH; c.channels = C;
    gpt2_choices(&c);
    return c;
}

static const char *gpt2_config_error(const ModelConfig *c, const char *where, char *msg, size_t len) {
    if (c->max_seq_len < 1 || c->max_seq_len > 65536 || c->vocab_size < 1 || c->padded_vocab_size < c->vocab_size ||
        c->num_layers < 1 || c->num_heads < 1 || c->channels < 1 || c->channels % c->num_heads != 0) {
        snprintf(msg, len, "%s: implausible model shape (maxT %d, V %d, Vp %d, L %d, NH %d, C %d)", where, c->max_seq_len,
                 c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels);
        return msg;
    }
    return NULL;
}

// "dN": the GPT-2 family as llm.c names it; any other depth gets 64*N channels in 64-wide heads.
// Returns 0 if `desc` is not of that form.
static int gpt2_config_from_descriptor(const char *desc, int vocab_size, ModelConfig *c) {
    if (desc[0] != 'd' || desc[1] == '\0') return 0;
    for (const char *s = desc + 1; *s; s++) if (!isdigit((unsigned char)*s)) return 0;
    int depth = atoi(desc + 1);
    if (depth < 1 || depth > 1000) return 0;
    int C, NH;
    switch (depth) {
        case 6: C = 384; NH = 6; break;
        case 12: C = 768; NH = 12; break;
        case 24: C = 1024; NH = 16; break;
        case 36: C = 1280; NH = 20; break;
        case 48: C = 1600; NH = 25; break;
        case 60: C = 1920; NH = 30; break;
        case 72: C = 2880; NH = 30; break;
        case 84: C = 3456; NH = 36; break;
        default: C = 64 * depth; NH = depth; break;
    }
    *c = gpt2_config(1024, vocab_size, (vocab_size + 127) / 128 * 128, depth, NH, C);
    return 1;
}

// llm.c's header: slot 0 the magic, 1 the version, 2..7 maxT, V, L, NH, C, Vp.
static const char *gpt2_header_read(const int32_t h[256], const char *file, ModelConfig *c, int *bf16, char *msg,
                                    size_t len) {
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16) {
        snprintf(msg, len, "%s: model file version %d, expected 3 (fp32) or 5 (bf16)", file, h[1]);
        return msg;
    }
    *bf16 = h[1] == MODEL_VERSION_BF16;
    *c = gpt2_config(h[2], h[3], h[7], h[4], h[5], h[6]);
    return gpt2_config_error(c, file, msg, len);
}

static void gpt2_header_write(const ModelConfig *c, int32_t h[256]) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = MODEL_MAGIC;
    h[1] = MODEL_VERSION_FP32;
    h[2] = c->max_seq_len;
    h[3] = c->vocab_size;
    h[4] = c->num_layers;
    h[5] = c->num_heads;
    h[6] = c->channels;
    h[7] = c->padded_vocab_size;
}

static void gpt2_shape_text(const ModelConfig *c, char *buf, size_t n) {
    snprintf(buf, n, "L %d | C %d | NH %d", c->num_layers, c->channels, c->num_heads);
}

static const ModelFamily GPT2_FAMILY = {
    "gpt2", &ARCH_GPT2, MODEL_MAGIC, "an llm.c GPT-2 model file", "dN", "6N + 6LCT", 0, 1 << MLP_GELU, gpt2_config_from_descriptor,
    gpt2_header_read, gpt2_header_write, gpt2_shape_text};
static const ModelFamily *gpt2_family(void) { return &GPT2_FAMILY; }

#endif
