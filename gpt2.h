// gpt2.h: the model's config (ModelConfig: GPT-2 or the Llama family), its parameter layout from the family's
// table (arch.h), and the model files (llm.c's GPT-2 .bin; the Llama family's, by magic), shared by every build.
// The parameter tensors live back to back in one buffer in the file's order (GPT-2: llm.c's 16), so a file's
// payload is exactly that buffer and a flat index means the same parameter everywhere (the ZeRO shards and the
// optimizer state are cut from the same flat layout). The distributed code, the reports and the plan ask the
// model_* / gpt2_* functions here, which read the table: they know no family.
#ifndef GPT2_H
#define GPT2_H

#include <ctype.h>
#include <math.h>
#include "utils.h"
#include "arch.h"  // the families' parameter tables: every size, unit and run below derives from them
#include "tp_layout.h"  // --tp: a rank's slice of the table

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define NUM_PARAMETER_TENSORS 16

// The model's config, of any family. The six shape fields hold
// for every family; `family` says which table (arch.h) the rest of the code derives from, and a Llama-family
// model keeps its whole config in `llama` (whose shape fields equal the six). A zeroed config is GPT-2's, so
// code that fills only the six fields gets GPT-2 as before. Fill it after a memset: resume compares configs
// with memcmp.
enum { FAMILY_GPT2 = 0, FAMILY_LLAMA = 1 };
typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp, V rounded up to a multiple of 128
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
    int family;             // FAMILY_
    LlamaConfig llama;      // FAMILY_LLAMA only (zero otherwise)
    // --tp: a config with tp_size > 1 describes rank tp_rank's slice of the model (tp_layout.h): every size, unit
    // and run derived from it is the slice's, each run placed in the whole model's file order. Model files and
    // checkpoints hold whole models, whose configs have tp_size 0. seq_parallel: --sp (replicated tensors'
    // gradients are then parts).
    int tp_size, tp_rank, seq_parallel;
} ModelConfig;

// The family's tables and the config's values for their symbols.
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
    s->opt[ARCH_ALWAYS] = 1;
    s->opt[ARCH_OPT_TIED] = 1;
    s->opt[ARCH_OPT_LAYERNORM] = 1;
    s->attn_flop_width = C;
}

static const Arch *model_arch(const ModelConfig *c) { return c->family == FAMILY_LLAMA ? &ARCH_LLAMA : &ARCH_GPT2; }
static const ArchActs *model_act_table(const ModelConfig *c) {
    return c->family == FAMILY_LLAMA ? &LLAMA_ACT_TABLE : &GPT2_ACT_TABLE;
}
static TpDims model_tp_dims(const ModelConfig *c) {
    TpDims t = {c->tp_size > 1 ? c->tp_size : 1, c->tp_rank, c->num_heads,
                c->family == FAMILY_LLAMA ? c->llama.num_kv_heads : c->num_heads};
    return t;
}
// The whole model's shape, and the one a config describes (its TP rank's slice where tp_size > 1).
static ArchShape model_whole_shape(const ModelConfig *c) {
    ArchShape s;
    if (c->family == FAMILY_LLAMA) llama_arch_shape(&c->llama, &s);
    else gpt2_arch_shape(c, &s);
    return s;
}
static ArchShape model_shape(const ModelConfig *c) {
    ArchShape s = model_whole_shape(c);
    TpDims t = model_tp_dims(c);
    tp_local_shape(&s, &t);
    return s;
}
// Query and key/value heads this config's attention runs (a TP rank's own).
static int model_heads(const ModelConfig *c) { TpDims t = model_tp_dims(c); return tp_local_heads(&t); }
static int model_kv_heads(const ModelConfig *c) { TpDims t = model_tp_dims(c); return tp_local_kv_heads(&t); }

// A Llama config as the model's (the six shape fields copied out).
static ModelConfig model_config_llama(const LlamaConfig *l) {
    ModelConfig c;
    memset(&c, 0, sizeof(c));
    c.max_seq_len = l->max_seq_len;
    c.vocab_size = l->vocab_size;
    c.padded_vocab_size = l->padded_vocab_size;
    c.num_layers = l->num_layers;
    c.num_heads = l->num_heads;
    c.channels = l->channels;
    c.family = FAMILY_LLAMA;
    c.llama = *l;
    return c;
}

static const char *const PARAM_NAMES[NUM_PARAMETER_TENSORS] __attribute__((unused)) = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// Weight decay applies to the matmul weights and the embeddings, not to biases or LayerNorm.
static const int PARAM_DECAYED[NUM_PARAMETER_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

static void gpt2_param_sizes(const ModelConfig *c, size_t sizes[NUM_PARAMETER_TENSORS]) {
    ArchShape s;
    gpt2_arch_shape(c, &s);
    arch_param_sizes(&ARCH_GPT2, &s, sizes);
}

// Parameters of the model (the stored, padded vocabulary), from the family's table.
static size_t model_num_params(const ModelConfig *c) {
    ArchShape s = model_shape(c);
    return arch_num_params(model_arch(c), &s);
}

// AdamW's settings for one step (grad_scale is the clipping factor, t the 1-based step).
typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_scale; int t; } AdamWArgs;

// One tensor's slice for backend_adamw_run (backend.h): its parameters, gradient and moments, whether it is
// decayed, and where its working copy goes (the build's floatX, NULL for none) with p[0]'s index in unit `unit`.
typedef struct {
    float *p;
    const float *g;
    float *m, *v;
    size_t n;
    int decayed;
    void *w;
    size_t w_index;
    int unit;
} AdamWSegment;

// AdamW on n parameters in host memory (the CPU build's update, and the CUDA build's with
// --offload optimizer): gradients are multiplied by grad_scale first (global-norm clipping);
// decayed says whether weight decay applies (matmul weights and embeddings).
static void adamw_host(float *p, const float *g, float *mom, float *vel, size_t n, int decayed, const AdamWArgs *a) {
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

// ----------------------------------------------------------------------------
// Units: the model as the distributed code sees it (arch.h): unit 0 ("outer") packs the outer tensors (GPT-2:
// wte, wpe, lnfw, lnfb), unit 1+l layer l's (GPT-2's twelve, ln1w .. fcprojb), each in file order.

#define NUM_LAYER_PIECES 12
static int model_num_units(const ModelConfig *c) { return c->num_layers + 1; }

static size_t model_unit_size(const ModelConfig *c, int u) {
    ArchShape s = model_shape(c);
    return arch_unit_size(model_arch(c), &s, u);
}

// Fills runs (at most model_max_runs of them, in unit order) and returns their count.
// A TP rank's runs are pieces of the whole model's tensors (tp_param_runs).
static size_t model_max_runs(const ModelConfig *c) {
    if (c->tp_size > 1) {
        ArchShape s = model_whole_shape(c);
        TpDims t = model_tp_dims(c);
        return (size_t)tp_param_runs(model_arch(c), &s, &t, c->seq_parallel, NULL, NULL);
    }
    return (size_t)ARCH_MAX_PARAMS * (c->num_layers + 1);
}
static int model_param_runs(const ModelConfig *c, ParamRun *runs) {
    if (c->tp_size > 1) {
        ArchShape s = model_whole_shape(c);
        TpDims t = model_tp_dims(c);
        return tp_param_runs(model_arch(c), &s, &t, c->seq_parallel, runs, NULL);
    }
    ArchShape s = model_shape(c);
    return arch_param_runs(model_arch(c), &s, runs);
}

static void gpt2_check_config(const ModelConfig *c, const char *where) {
    if (c->max_seq_len < 1 || c->max_seq_len > 65536 || c->vocab_size < 1 || c->padded_vocab_size < c->vocab_size ||
        c->num_layers < 1 || c->num_heads < 1 || c->channels < 1 || c->channels % c->num_heads != 0) {
        fatal("%s: implausible model shape (maxT %d, V %d, Vp %d, L %d, NH %d, C %d)", where, c->max_seq_len,
              c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels);
    }
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
    c->max_seq_len = 1024;
    c->vocab_size = vocab_size;
    c->padded_vocab_size = (vocab_size + 127) / 128 * 128;
    c->num_layers = depth;
    c->num_heads = NH;
    c->channels = C;
    return 1;
}

// "llama-dN": a fresh Llama-family model of depth N, sized as GPT-2's dN of other depths is: C = 64N, L = N, NH = N
// heads of 64; KV = NH / 4 key/value heads where 4 divides NH, else NH / 2 where 2 does, else NH (multi-head);
// SwiGLU's hidden width from Meta's recipe with multiple_of 64 (int(8C/3) rounded up); a tied head, no biases,
// RMSNorm eps 1e-5, RoPE θ 10000, maxT 1024. Returns 0 if `desc` is not of that form.
static int llama_config_from_descriptor(const char *desc, int vocab_size, LlamaConfig *c) {
    if (strncmp(desc, "llama-d", 7) != 0 || desc[7] == '\0') return 0;
    for (const char *s = desc + 7; *s; s++) if (!isdigit((unsigned char)*s)) return 0;
    int depth = atoi(desc + 7);
    if (depth < 1 || depth > 1000) return 0;
    memset(c, 0, sizeof(*c));
    c->max_seq_len = 1024;
    c->vocab_size = vocab_size;
    c->padded_vocab_size = arch_padded_vocab(vocab_size);
    c->num_layers = depth;
    c->num_heads = depth;
    c->num_kv_heads = depth % 4 == 0 ? depth / 4 : depth % 2 == 0 ? depth / 2 : depth;
    c->channels = 64 * depth;
    c->head_dim = 64;
    c->ffn_hidden = llama_ffn_hidden(c->channels, 64, 0.0);
    c->tied = 1;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    return 1;
}

// A model named by a descriptor: "dN" (GPT-2), "llama-dN" (a fresh Llama), or a Llama preset's name
// (smollm-135m, llama-3.2-1b, tinyllama-1.1b, qwen2.5-0.5b, llama-3.1-8b: their published shapes and vocabularies). vocab_size is
// the data's for the fresh ones. Returns 0 if `desc` is none of these (a model file, then).
static int model_config_from_descriptor(const char *desc, int vocab_size, ModelConfig *c) {
    memset(c, 0, sizeof(*c));
    if (gpt2_config_from_descriptor(desc, vocab_size, c)) return 1;
    LlamaConfig lc;
    if (!llama_config_from_descriptor(desc, vocab_size, &lc) && !llama_preset(desc, &lc)) return 0;
    llama_check_config(&lc, desc);
    *c = model_config_llama(&lc);
    return 1;
}

// FLOPs from the family's table (arch.h): training FLOPs per token at sequence length T (the MFU formula, GPT-2's
// 6N + 6LCT), a layer's and the head's forward FLOPs per token (pipeline.h's stage costs), the matmul weights.
static double model_flops_per_token(const ModelConfig *c, int T) {
    ArchShape s = model_shape(c);
    return arch_flops_per_token(model_arch(c), &s, T);
}
static double model_layer_forward_flops(const ModelConfig *c, int T) {
    ArchShape s = model_shape(c);
    return arch_layer_forward_flops(model_arch(c), &s, T);
}
static double model_head_forward_flops(const ModelConfig *c) {
    ArchShape s = model_shape(c);
    return arch_head_forward_flops(&s);
}
static double model_matmul_params(const ModelConfig *c) {
    ArchShape s = model_shape(c);
    return (double)arch_matmul_params(model_arch(c), &s);
}
// Attention's width per layer in the FLOP formulas (C for GPT-2, NH hd for the Llama family).
static double model_attn_width(const ModelConfig *c) { return (double)model_shape(c).attn_flop_width; }

// The shape as the run's model line gives it ("L 12 | C 768 | NH 12" for GPT-2; the Llama family adds its own).
static void model_shape_text(const ModelConfig *c, char *buf, size_t n) {
    if (c->family != FAMILY_LLAMA) {
        snprintf(buf, n, "L %d | C %d | NH %d", c->num_layers, c->channels, c->num_heads);
        return;
    }
    const LlamaConfig *l = &c->llama;
    snprintf(buf, n, "Llama family: L %d | C %d | NH %d | KV %d | hd %d | SwiGLU H %d | %s head%s%s | RMSNorm eps %g | "
             "RoPE theta %g%s", l->num_layers, l->channels, l->num_heads, l->num_kv_heads, l->head_dim, l->ffn_hidden,
             l->tied ? "tied" : "untied", l->qkv_bias ? " | qkv bias" : "", l->qk_norm ? " | QK-norm" : "", l->norm_eps,
             l->rope_theta, l->rope_scaling ? " (llama3 scaling)" : "");
}

// --profile's words for the FLOP formula and for the parameters no matmul reads (`other` of them).
static const char *model_flops_formula(const ModelConfig *c) { return c->family == FAMILY_LLAMA ? "6N + 6L(NH hd)T" : "6N + 6LCT"; }
static void model_nonmatmul_text(const ModelConfig *c, double other, char *buf, size_t n) {
    if (c->family == FAMILY_LLAMA) { snprintf(buf, n, "RMSNorm weights and biases"); return; }
    double wpe = (double)c->max_seq_len * c->channels;
    snprintf(buf, n, "the position embedding %.0f, a lookup; biases and LayerNorm weights %.0f", wpe, other - wpe);
}

// After the parameter count: nothing for GPT-2 (llm.c counts the padded rows), and for the Llama family the count
// without the vocabulary's padding rows where they differ, the number transformers and the model cards give.
static void model_count_note(const ModelConfig *c, char *buf, size_t n) {
    buf[0] = '\0';
    if (c->family != FAMILY_LLAMA || c->vocab_size == c->padded_vocab_size) return;
    ArchShape s = model_shape(c);
    snprintf(buf, n, " (%zu without the vocabulary's padding rows)", arch_num_params_unpadded(model_arch(c), &s));
}

// GPT-2 initialisation as llm.c and nanoGPT do it: N(0, 0.02) weights, zero biases, unit LayerNorm
// gains, residual projections scaled by 1/sqrt(2L). Normal draws by Box-Muller from our own RNG so
// the same seed gives the same model on every machine and in every build. The rules are the table's
// (arch_init_random), which the Llama family shares (its norm gains 1).
static void model_init_random(const ModelConfig *c, float *params, uint64_t seed) {
    ArchShape s = model_shape(c);
    arch_init_random(model_arch(c), &s, params, seed);
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Opens an llm.c model file (version 3 fp32 or 5 bf16) and checks its header and size against the shape it
// states (into *c), reading no weight: returns the file positioned at the weights, and *version. `what` names
// where the path came from (a flag, "-e/--init"), so an error says which input is wrong.
static FILE *model_open_file_for(const char *what, const char *path, ModelConfig *c, int *version_out) {
    char name[4200];
    snprintf(name, sizeof(name), "%s%s%s", what ? what : "", what ? ": " : "", path);
    struct stat st;
    if (what && stat(path, &st) != 0) {
        fatal("%s: cannot open: %s (expected an llm.c model file, or dN for a fresh GPT-2 of depth N such as d2, d6, "
              "d12; a Llama-family model file, llama-dN for a fresh Llama, or a Llama preset: smollm-135m, llama-3.2-1b, "
              "tinyllama-1.1b, qwen2.5-0.5b, llama-3.1-8b)", name, strerror(errno));
    }
    FILE *fp = fopen_user(what, path, "rb");
    int header[256];
    if (fread(header, sizeof(int), 256, fp) != 256) fatal("%s: too short for an llm.c model header (1024 bytes)", name);
    memset(c, 0, sizeof(*c));
    int version;
    if (header[0] == LLAMA_MAGIC) {  // the Llama family's file (arch.h, docs/llama.md): fp32, every field exact
        LlamaConfig lc;
        char msg[4800];
        if (llama_header_read(header, name, &lc, msg, sizeof(msg))) fatal("%s", msg);
        *c = model_config_llama(&lc);
        version = MODEL_VERSION_FP32;
    } else if (header[0] == 20240803) {
        fatal("%s: an llm.c llama3-branch model file (magic 20240803): its q/k rows are in Meta's interleaved order "
              "and its norm_eps may be lost; convert it first with scripts/llmc_llama.py IN.bin OUT.bin", name);
    } else if (header[0] != MODEL_MAGIC) {
        fatal("%s: bad magic %d, expected %d (an llm.c GPT-2 model file) or %d (a Llama-family model file)", name,
              header[0], MODEL_MAGIC, LLAMA_MAGIC);
    } else {
        version = header[1];
        if (version != MODEL_VERSION_FP32 && version != MODEL_VERSION_BF16) {
            fatal("%s: model file version %d, expected 3 (fp32) or 5 (bf16)", name, version);
        }
        c->max_seq_len = header[2];
        c->vocab_size = header[3];
        c->num_layers = header[4];
        c->num_heads = header[5];
        c->channels = header[6];
        c->padded_vocab_size = header[7];
        gpt2_check_config(c, name);
    }
    size_t n = model_num_params(c);
    size_t elem = version == MODEL_VERSION_FP32 ? 4 : 2;
    fseekCheck(fp, 0, SEEK_END, path);
    long size = ftell(fp);
    if (size != (long)(1024 + n * elem)) {
        fatal("%s: %ld bytes, but the header's shape needs %zu (%zu parameters of %zu bytes + 1024 header)",
              name, size, 1024 + n * elem, n, elem);
    }
    fseekCheck(fp, 1024, SEEK_SET, path);
    *version_out = version;
    return fp;
}

// Reads an llm.c model file into a freshly malloc'd fp32 buffer (model_open_file_for checks it first).
static float *model_read_file_for(const char *what, const char *path, ModelConfig *c) {
    int version;
    FILE *fp = model_open_file_for(what, path, c, &version);
    size_t n = model_num_params(c);
    float *params = (float *)mallocCheck(n * sizeof(float));
    if (version == MODEL_VERSION_FP32) {
        freadCheck(params, sizeof(float), n, fp, path);
    } else {
        uint16_t *tmp = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
        freadCheck(tmp, sizeof(uint16_t), n, fp, path);
        for (size_t i = 0; i < n; i++) params[i] = bf16_to_f32(tmp[i]);
        free(tmp);
    }
    fclose(fp);
    return params;
}
static float *model_read_file(const char *path, ModelConfig *c) { return model_read_file_for(NULL, path, c); }

// The model file's header, in the family's format.
static void model_file_header(const ModelConfig *c, int header[256]) {
    if (c->family == FAMILY_LLAMA) { llama_header_write(&c->llama, (int32_t *)header); return; }
    memset(header, 0, 256 * sizeof(int));
    header[0] = MODEL_MAGIC;
    header[1] = MODEL_VERSION_FP32;
    header[2] = c->max_seq_len;
    header[3] = c->vocab_size;
    header[4] = c->num_layers;
    header[5] = c->num_heads;
    header[6] = c->channels;
    header[7] = c->padded_vocab_size;
}

#endif
