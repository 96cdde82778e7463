// model_config.h: what a model is, for every family: its shape and its block's choices (ModelConfig), the values of
// the table's shape symbols that follow from them (model_shape), the roles a parameter or an activation plays in the
// block (the tables' role column: model.h reads tensors by role, never by name), and the block's activation table.
// A family (gpt2.h, llama.h) is a parameter table, a model file format and presets; it fills a ModelConfig, and
// from then on the block (model.h) and everything else read the choices, never the family. A new norm, activation
// or position scheme is a value and a row of its table here, its kernels, and one case in block.h's function for
// that choice point.
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <stdint.h>
#include <string.h>
#include "../base/utils.h"
#include "arch.h"  // the table machinery: ArchShape, ArchParam, ArchAct
#include "rope.h"  // RopeParams

// The block's choice points, each an enum and its one table of names (in the enum's order): the flag parser, --help,
// the run's lines, the model files' errors and --profile read a choice's words there, and its rules (the MLP's
// width) are properties of its entry, so a new value is a row here, its kernels and its case in block.h.
typedef struct {
    const char *name;   // as a flag and the run's logs spell it ("rmsnorm")
    const char *words;  // as the run's model line writes it ("RMSNorm")
} ChoiceName;
// The norm: LayerNorm (weight and bias, keeps the mean) or RMSNorm (weight only).
enum { NORM_LAYERNORM, NORM_RMSNORM, NUM_NORMS };
static const ChoiceName NORM_CHOICES[NUM_NORMS] = {{"layernorm", "LayerNorm"}, {"rmsnorm", "RMSNorm"}};
// The positions: a learned table added to the embedding, or RoPE on q and k.
enum { POS_LEARNED, POS_ROPE, NUM_POSITIONS };
static const ChoiceName POS_CHOICES[NUM_POSITIONS] = {{"learned", "learned positions"}, {"rope", "RoPE"}};
// The on/off choices (QK-norm, the q/k/v bias) and the key/value heads (a number: KV = NH is multi-head, 1
// multi-query) as the model line names them.
static const ChoiceName QK_NORM_CHOICE = {"qk_norm", "QK-norm"};
static const ChoiceName QKV_BIAS_CHOICE = {"qkv_bias", "qkv bias"};
static const ChoiceName KV_HEADS_CHOICE = {"kv_heads", "KV"};

// The MLP's activation. The values are what the Llama family's model file stores in header slot 21: 0 SwiGLU and
// 1 ReLU² keep the meaning they had when the slot was a flag (0 in every file written before it), so a new
// activation takes the next value and no file changes.
enum { MLP_SWIGLU, MLP_RELU2, MLP_GELU, MLP_GEGLU, NUM_MLPS };
typedef struct {
    const char *name;   // as --mlp, the run's lines and the files' errors spell it
    const char *words;  // the model line's
    int gated;          // fc makes 2H, up | gate packed (the table's ARCH_OPT_GATED: DIM_FC = 2H), the MLP's two
                        // matrices of the family's width; else fc makes H, and a fresh model's H is 4C (GPT-2's,
                        // modded-nanogpt's)
    const char *help;   // --help's definition
} MlpChoice;
static const MlpChoice MLP_CHOICES[NUM_MLPS] = {  // in the enum's order
    {"swiglu", "SwiGLU", 1, "down(silu(gate x) * up x), Llama's"},
    {"relu2", "ReLU²", 0, "down(relu(up x)^2), no gate, hidden width 4C (modded-nanogpt)"},
    {"gelu", "GELU", 0, "down(gelu_tanh(up x)), GPT-2's"},
    {"geglu", "GeGLU", 1, "down(gelu_tanh(gate x) * up x), Gemma's (up | gate packed as SwiGLU's)"},
};
#define MLP_EVERY ((1 << NUM_MLPS) - 1)  // a family whose file stores any activation (ModelFamily.mlps)
// Value i's name (and, where help is not NULL, its definition), NULL past the end: what the flag parser and --help
// read the choice's list through (config.h's OPT_CHOICE).
static const char *mlp_choice_name(int i, const char **help) {
    if (i < 0 || i >= NUM_MLPS) return NULL;
    if (help) *help = MLP_CHOICES[i].help;
    return MLP_CHOICES[i].name;
}

// " 0 (swiglu), 1 (relu2), ..." appended at msg + n (n: what msg already holds, snprintf's count): the values a model
// file's MLP slot may hold, each named (words: by the model line's words). Returns msg, for an error's return.
static const char *mlp_values_text(char *msg, size_t len, int n, int words) {
    for (int k = 0; k < NUM_MLPS && n >= 0 && (size_t)n < len; k++)
        n += snprintf(msg + n, len - n, "%s %d (%s)", k ? "," : "", k, words ? MLP_CHOICES[k].words : MLP_CHOICES[k].name);
    return msg;
}

struct ModelFamily;  // below: a family's table, model file and descriptors

// A model's config. The six shape fields first; then the family (its parameter table and file format); then the
// block's choices, which the family fills (gpt2_config, llama.h's presets and file header). Fill it after a memset:
// resume compares configs with memcmp.
typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp, V rounded up to a multiple of 128 (the padding rows are zero)
    int num_layers;         // L
    int num_heads;          // NH: query heads
    int channels;           // C
    const struct ModelFamily *family;
    int num_kv_heads;       // KV: key/value heads, dividing NH (NH: multi-head, as GPT-2; 1: multi-query)
    int head_dim;           // hd (C / NH unless the family says otherwise); even with RoPE
    int ffn_hidden;         // H: the MLP's hidden width (the rows of its down projection's input)
    int norm;               // NORM_
    float norm_eps;         // the norm's epsilon
    int positions;          // POS_
    RopeParams rope;        // POS_ROPE's θ and scaling (zero otherwise)
    int mlp;                // MLP_
    int qk_norm;            // RMSNorm over hd on each q and k head before RoPE (Qwen 3, OLMo 2)
    int qkv_bias;           // the q/k/v projection has a bias
    int tied;               // the head is wte (else its own tensor)
    // --tp: a config with tp_size > 1 describes rank tp_rank's slice of the model (tp_layout.h): every size, unit
    // and run derived from it is the slice's, each run placed in the whole model's file order. Model files and
    // checkpoints hold whole models, whose configs have tp_size 0. seq_parallel: --sp (replicated tensors'
    // gradients are then parts).
    int tp_size, tp_rank, seq_parallel;
    // --pp: a config with ends set (ARCH_END_INPUT or ARCH_END_OUTPUT) describes a pipeline end stage's share of the
    // outer unit: only the outer tensors that end uses (arch.h's arch_param_held), so its units, runs, roles and plan
    // are that share's. 0: every outer tensor (one process, model files and checkpoints, a middle stage's config).
    int ends;
} ModelConfig;

// A family: its parameter table, its model file format, the descriptors that name its fresh models and presets, and
// how the run's lines describe it. gpt2.h and llama.h each define one; family.h lists them.
typedef struct ModelFamily {
    const char *name;           // "gpt2", "llama"
    const Arch *arch;           // its parameter table, in its file's order
    int magic;                  // slot 0 of its model file's header
    const char *file_kind;      // what its files are called in errors ("an llm.c GPT-2 model file")
    const char *fresh;          // the descriptor of its fresh models, for errors ("dN")
    const char *flops_formula;  // --profile's words for the training FLOPs per token
    int count_unpadded;         // the run's parameter count adds the count without the vocabulary's padding rows
    int mlps;                   // the MLP activations its file can store (bits 1 << MLP_; MLP_EVERY: its header has a slot)
    // a fresh model or a preset named `desc` (vocab_size: the data's, for the fresh ones); 0 if desc is not one
    int (*from_descriptor)(const char *desc, int vocab_size, ModelConfig *c);
    // a header with this family's magic into c (after a memset); *bf16: the payload is bf16, else fp32. NULL, or the
    // error in msg ("FILE: ...", naming the slot and what was expected)
    const char *(*header_read)(const int32_t h[256], const char *file, ModelConfig *c, int *bf16, char *msg, size_t len);
    void (*header_write)(const ModelConfig *c, int32_t h[256]);
    void (*shape_text)(const ModelConfig *c, char *buf, size_t n);  // the run's model line
} ModelFamily;

static int model_padded_vocab(int V) { return (V + 127) / 128 * 128; }

// Whether the MLP's first matmul packs a gate beside up (the table's ARCH_OPT_GATED).
static int model_mlp_gated(const ModelConfig *c) { return MLP_CHOICES[c->mlp].gated; }

// The shape symbols' values for a whole model: the same formulas for every family (GPT-2: KV = NH, hd = C / NH,
// H = 4C give its 3C q/k/v rows, C attention width and 4C MLP rows). tp_layout.h's model_shape: a config's, its TP
// rank's slice where tp_size > 1.
static ArchShape model_whole_shape(const ModelConfig *c) {
    ArchShape s;
    memset(&s, 0, sizeof(s));
    size_t NH = c->num_heads, KV = c->num_kv_heads, hd = c->head_dim, H = c->ffn_hidden;
    s.dim[DIM_ONE] = 1;
    s.dim[DIM_V] = c->vocab_size;
    s.dim[DIM_VP] = c->padded_vocab_size;
    s.dim[DIM_MAXT] = c->max_seq_len;
    s.dim[DIM_C] = c->channels;
    s.dim[DIM_QKV] = (NH + 2 * KV) * hd;
    s.dim[DIM_ATT] = NH * hd;
    s.dim[DIM_HD] = hd;
    s.dim[DIM_FC] = model_mlp_gated(c) ? 2 * H : H;
    s.dim[DIM_HID] = H;
    s.dim[DIM_QKHEADS] = NH + KV;
    s.num_layers = c->num_layers;
    s.num_heads = c->num_heads;
    s.num_kv_heads = c->num_kv_heads;
    s.opt[ARCH_ALWAYS] = 1;
    s.opt[ARCH_OPT_QKV_BIAS] = c->qkv_bias != 0;
    s.opt[ARCH_OPT_QK_NORM] = c->qk_norm != 0;
    s.opt[ARCH_OPT_UNTIED] = !c->tied;
    s.opt[ARCH_OPT_TIED] = c->tied != 0;
    s.opt[ARCH_OPT_LAYERNORM] = c->norm == NORM_LAYERNORM;
    s.opt[ARCH_OPT_GATED] = model_mlp_gated(c);
    s.attn_flop_width = NH * hd;
    s.ends = c->ends;
    return s;
}


// ----------------------------------------------------------------------------
// Roles: the column of a table row that says what the block does with the tensor. model.h finds each weight by
// walking its family's rows once (no name is looked up on a step's path); a role the table or the options leave out
// is NULL there. Adding a weight: a role here, a row in the family's table, and the kernels that read it.

enum {
    W_NONE = -1,
    W_LN1W, W_LN1B, W_QKVW, W_QKVB, W_QNORM, W_KNORM, W_ATTPROJW, W_ATTPROJB, W_LN2W, W_LN2B, W_FCW, W_FCB,
    W_FCPROJW, W_FCPROJB, NUM_LAYER_ROLES,   // per layer
    W_WTE = NUM_LAYER_ROLES, W_WPE, W_LNFW, W_LNFB, W_LM_HEAD, NUM_WEIGHT_ROLES  // outer
};

// Activations, by role: what the forward keeps for the backward.
enum {
    ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATTY, ACT_ATT, ACT_ATTPROJ, ACT_RESIDUAL2,
    ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_GELU, ACT_FCPROJ, ACT_RESIDUAL3, ACT_LNF,
    ACT_LNF_MEAN, ACT_LNF_RSTD, ACT_LOGITS, ACT_LOSSES, ACT_QKV_PRE, ACT_QK_RSTD, NUM_ACTS
};

// The pre-norm block's activations, in model.h's layout order; the options choose the rows (an absent row takes
// no bytes). Level 1 drops the MLP's activation output (it reruns from fch), level 2 the norm outputs too, level 3
// everything but each layer's output (the whole layer reruns). LayerNorm keeps each row's mean and rstd, RMSNorm
// the rstd alone. With QK-norm the block keeps q and k before the norm (qkv_pre) and the norm's per-head rstd; qkv
// is then after QK-norm and RoPE, what attention reads. The last column: with --sp (sequence parallelism) the entry
// is kept as this TP rank's B T / N token rows (the residual stream and the norms), else whole.
static const ArchAct BLOCK_ACTS[] = {
    {"encoded", DIM_C, 0, 0, ARCH_ACT_ALWAYS_KEPT, ARCH_ALWAYS, ACT_ENCODED, 1},
    {"ln1", DIM_C, 0, 1, 2, ARCH_ALWAYS, ACT_LN1, 1},
    {"ln1_mean", DIM_ONE, 1, 1, 3, ARCH_OPT_LAYERNORM, ACT_LN1_MEAN, 1},
    {"ln1_rstd", DIM_ONE, 1, 1, 3, ARCH_ALWAYS, ACT_LN1_RSTD, 1},
    {"qkv_pre", DIM_QKV, 0, 1, 3, ARCH_OPT_QK_NORM, ACT_QKV_PRE, 0},
    {"qk_rstd", DIM_QKHEADS, 1, 1, 3, ARCH_OPT_QK_NORM, ACT_QK_RSTD, 0},
    {"qkv", DIM_QKV, 0, 1, 3, ARCH_ALWAYS, ACT_QKV, 0},
    {"atty", DIM_ATT, 0, 1, 3, ARCH_ALWAYS, ACT_ATTY, 0},
    {"att", ARCH_ACT_ATT, 1, 1, 3, ARCH_ALWAYS, ACT_ATT, 0},
    {"attproj", DIM_C, 0, 1, 0, ARCH_ALWAYS, ACT_ATTPROJ, 1},
    {"residual2", DIM_C, 0, 1, 3, ARCH_ALWAYS, ACT_RESIDUAL2, 1},
    {"ln2", DIM_C, 0, 1, 2, ARCH_ALWAYS, ACT_LN2, 1},
    {"ln2_mean", DIM_ONE, 1, 1, 3, ARCH_OPT_LAYERNORM, ACT_LN2_MEAN, 1},
    {"ln2_rstd", DIM_ONE, 1, 1, 3, ARCH_ALWAYS, ACT_LN2_RSTD, 1},
    {"fch", DIM_FC, 0, 1, 3, ARCH_ALWAYS, ACT_FCH, 0},
    {"fch_gelu", DIM_HID, 0, 1, 1, ARCH_ALWAYS, ACT_FCH_GELU, 0},  // the MLP's activation output, whichever it is
    {"fcproj", DIM_C, 0, 1, 0, ARCH_ALWAYS, ACT_FCPROJ, 1},
    {"residual3", DIM_C, 0, 1, ARCH_ACT_ALWAYS_KEPT, ARCH_ALWAYS, ACT_RESIDUAL3, 1},
    {"lnf", DIM_C, 0, 0, 0, ARCH_ALWAYS, ACT_LNF, 1},
    {"lnf_mean", DIM_ONE, 1, 0, 0, ARCH_OPT_LAYERNORM, ACT_LNF_MEAN, 1},
    {"lnf_rstd", DIM_ONE, 1, 0, 0, ARCH_ALWAYS, ACT_LNF_RSTD, 1},
    {"logits", DIM_VP, 0, 0, 0, ARCH_ALWAYS, ACT_LOGITS, 0},
    {"losses", DIM_ONE, 1, 0, 0, ARCH_ALWAYS, ACT_LOSSES, 0},
};
static const ArchActs BLOCK_ACT_TABLE = {BLOCK_ACTS, (int)(sizeof(BLOCK_ACTS) / sizeof(BLOCK_ACTS[0]))};

#endif
