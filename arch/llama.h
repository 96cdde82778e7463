// llama.h: the Llama family (Llama 2/3, TinyLlama, SmolLM; Qwen 2 with its q/k/v bias, Qwen 3 and OLMo 2 with
// QK-norm): its parameter table, its block's choices (RMSNorm, RoPE, SwiGLU or ReLU², grouped-query attention), its
// presets and "llama-dN" descriptors, and its model file's header (docs/llama.md, "The model file").
#ifndef LLAMA_H
#define LLAMA_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include "../base/utils.h"
#include "model_config.h"  // ModelConfig, the roles, ModelFamily

#define LLAMA_MAGIC 20261126
#define LLAMA_VERSION_FP32 1
#define LLMC_LLAMA3_MAGIC 20240803  // llm.c's llama3 branch's files: not this format (family.h says how to convert one)

static const ArchParam LLAMA_PARAMS[] = {
    {"wte", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_OPT_TIED, W_WTE, PACK_ONE, ARCH_ALWAYS, ARCH_OPT_TIED, TP_VOCAB, TP_GRAD_WHOLE},  // the head when tied
    {"attn_norm", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LN1W, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"wqkv", DIM_QKV, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS, W_QKVW, PACK_QKV, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_REPLICAS},
    {"bqkv", DIM_QKV, DIM_ONE, 1, 0, INIT_ZEROS, ARCH_OPT_QKV_BIAS, ARCH_NEVER, W_QKVB, PACK_QKV, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_REPLICAS},
    {"q_norm", DIM_HD, DIM_ONE, 1, 0, INIT_ONES, ARCH_OPT_QK_NORM, ARCH_NEVER, W_QNORM, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_PART},
    {"k_norm", DIM_HD, DIM_ONE, 1, 0, INIT_ONES, ARCH_OPT_QK_NORM, ARCH_NEVER, W_KNORM, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_PART},
    {"wo", DIM_C, DIM_ATT, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS, W_ATTPROJW, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_COLS, TP_GRAD_WHOLE},
    {"mlp_norm", DIM_C, DIM_ONE, 1, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LN2W, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_NONE, TP_GRAD_WHOLE},
    {"wfc", DIM_FC, DIM_C, 1, 1, INIT_NORMAL, ARCH_ALWAYS, ARCH_ALWAYS, W_FCW, PACK_UP_GATE, ARCH_NEVER, ARCH_NEVER, TP_ROWS, TP_GRAD_WHOLE},
    {"wproj", DIM_C, DIM_HID, 1, 1, INIT_RESIDUAL, ARCH_ALWAYS, ARCH_ALWAYS, W_FCPROJW, PACK_ONE, ARCH_NEVER, ARCH_NEVER, TP_COLS, TP_GRAD_WHOLE},
    {"final_norm", DIM_C, DIM_ONE, 0, 0, INIT_ONES, ARCH_ALWAYS, ARCH_NEVER, W_LNFW, PACK_ONE, ARCH_NEVER, ARCH_ALWAYS, TP_NONE, TP_GRAD_WHOLE},
    {"lm_head", DIM_VP, DIM_C, 0, 1, INIT_NORMAL, ARCH_OPT_UNTIED, ARCH_ALWAYS, W_LM_HEAD, PACK_ONE, ARCH_NEVER, ARCH_ALWAYS, TP_VOCAB, TP_GRAD_WHOLE},
};
static const Arch ARCH_LLAMA = {"llama", LLAMA_PARAMS, (int)(sizeof(LLAMA_PARAMS) / sizeof(LLAMA_PARAMS[0]))};

static const ModelFamily *llama_family(void);  // LLAMA_FAMILY, below

// The family's choices before a preset, a descriptor or a header sets the rest: RMSNorm eps 1e-5, RoPE θ 10000
// unscaled, SwiGLU, a tied head, no bias, no QK-norm.
static void llama_defaults(ModelConfig *c) {
    memset(c, 0, sizeof(*c));
    c->family = llama_family();
    c->norm = NORM_RMSNORM;
    c->norm_eps = 1e-5f;
    c->positions = POS_ROPE;
    c->rope.theta = 10000.0f;
    c->mlp = MLP_SWIGLU;
    c->tied = 1;
}

// The shape symbols' values (model_shape's; the tests' name for them).
static void llama_arch_shape(const ModelConfig *c, ArchShape *s) { *s = model_whole_shape(c); }

static int llama_ffn_hidden(int C, int multiple_of, double ffn_dim_multiplier) {
    long h = (long)(2 * (4L * C) / 3);
    if (ffn_dim_multiplier > 0) h = (long)(ffn_dim_multiplier * (double)h);
    return (int)((h + multiple_of - 1) / multiple_of * multiple_of);
}

// The first thing wrong with a config, in words naming the field and what was expected; NULL when it is fine.
// msg holds the text (returned when not NULL).
static const char *llama_config_error(const ModelConfig *c, char *msg, size_t len) {
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
    if (c->mlp < 0 || c->mlp >= NUM_MLPS || !(llama_family()->mlps >> c->mlp & 1)) {
        return mlp_values_text(msg, len, snprintf(msg, len, "MLP activation %d, expected", c->mlp), 0);
    }
    if (c->tied != 0 && c->tied != 1) { snprintf(msg, len, "tied is %d, expected 0 or 1", c->tied); return msg; }
    if (c->qkv_bias != 0 && c->qkv_bias != 1) { snprintf(msg, len, "qkv_bias is %d, expected 0 or 1", c->qkv_bias); return msg; }
    if (c->qk_norm != 0 && c->qk_norm != 1) { snprintf(msg, len, "qk_norm is %d, expected 0 or 1", c->qk_norm); return msg; }
    if (!(c->norm_eps > 0.0f) || !isfinite(c->norm_eps)) {
        snprintf(msg, len, "norm_eps %g, expected a positive number such as 1e-5", c->norm_eps);
        return msg;
    }
    if (!(c->rope.theta > 0.0f) || !isfinite(c->rope.theta)) {
        snprintf(msg, len, "rope_theta %g, expected a positive number such as 10000 or 500000", c->rope.theta);
        return msg;
    }
    if (c->rope.scaling == 0) {
        if (c->rope.factor != 0.0f || c->rope.low_freq_factor != 0.0f || c->rope.high_freq_factor != 0.0f ||
            c->rope.original_max_pos != 0) {
            snprintf(msg, len, "rope_scaling 0 (none) with non-zero scaling fields (factor %g, low %g, high %g, "
                     "original %d): expected all 0", c->rope.factor, c->rope.low_freq_factor, c->rope.high_freq_factor,
                     c->rope.original_max_pos);
            return msg;
        }
    } else if (c->rope.scaling == 1) {
        if (!(c->rope.factor >= 1.0f) || !(c->rope.low_freq_factor > 0.0f) ||
            !(c->rope.high_freq_factor > c->rope.low_freq_factor) || c->rope.original_max_pos < 1) {
            snprintf(msg, len, "rope_scaling 1 (llama3) needs factor >= 1, 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings >= 1 (got factor %g, low %g, high %g, original %d)",
                     c->rope.factor, c->rope.low_freq_factor, c->rope.high_freq_factor, c->rope.original_max_pos);
            return msg;
        }
    } else {
        snprintf(msg, len, "rope_scaling %d, expected 0 (none) or 1 (llama3)", c->rope.scaling);
        return msg;
    }
    return NULL;
}

static void llama_check_config(const ModelConfig *c, const char *where) {
    char msg[512];
    if (llama_config_error(c, msg, sizeof(msg))) fatal("%s: %s", where, msg);
}

// The presets: published shapes (their configs on the Hugging Face hub). Returns 0 for an unknown name.
static int llama_preset(const char *name, ModelConfig *c) {
    llama_defaults(c);
    if (strcmp(name, "smollm-135m") == 0) {  // HuggingFaceTB/SmolLM-135M
        c->max_seq_len = 2048; c->vocab_size = 49152; c->num_layers = 30; c->num_heads = 9; c->num_kv_heads = 3;
        c->channels = 576; c->ffn_hidden = 1536; c->tied = 1;
    } else if (strcmp(name, "llama-3.2-1b") == 0) {  // meta-llama/Llama-3.2-1B
        c->max_seq_len = 131072; c->vocab_size = 128256; c->num_layers = 16; c->num_heads = 32; c->num_kv_heads = 8;
        c->channels = 2048; c->ffn_hidden = 8192; c->tied = 1; c->rope.theta = 500000.0f;
        c->rope.scaling = 1; c->rope.factor = 32.0f; c->rope.low_freq_factor = 1.0f; c->rope.high_freq_factor = 4.0f;
        c->rope.original_max_pos = 8192;
    } else if (strcmp(name, "llama-3.1-8b") == 0) {  // meta-llama/Llama-3.1-8B
        c->max_seq_len = 131072; c->vocab_size = 128256; c->num_layers = 32; c->num_heads = 32; c->num_kv_heads = 8;
        c->channels = 4096; c->ffn_hidden = 14336; c->tied = 0; c->rope.theta = 500000.0f;
        c->rope.scaling = 1; c->rope.factor = 8.0f; c->rope.low_freq_factor = 1.0f; c->rope.high_freq_factor = 4.0f;
        c->rope.original_max_pos = 8192;
    } else if (strcmp(name, "tinyllama-1.1b") == 0) {  // TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T
        c->max_seq_len = 2048; c->vocab_size = 32000; c->num_layers = 22; c->num_heads = 32; c->num_kv_heads = 4;
        c->channels = 2048; c->ffn_hidden = 5632; c->tied = 0;
    } else if (strcmp(name, "qwen2.5-0.5b") == 0) {  // Qwen/Qwen2.5-0.5B
        c->max_seq_len = 32768; c->vocab_size = 151936; c->num_layers = 24; c->num_heads = 14; c->num_kv_heads = 2;
        c->channels = 896; c->ffn_hidden = 4864; c->tied = 1; c->qkv_bias = 1; c->rope.theta = 1000000.0f;
        c->norm_eps = 1e-6f;
    } else {
        return 0;
    }
    c->padded_vocab_size = model_padded_vocab(c->vocab_size);
    c->head_dim = c->channels / c->num_heads;
    return 1;
}
static const char *const LLAMA_PRESETS[] = {"smollm-135m", "llama-3.2-1b", "tinyllama-1.1b", "qwen2.5-0.5b", "llama-3.1-8b"};

static int32_t llama_f32_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static float llama_bits_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }

static void llama_header_write(const ModelConfig *c, int32_t h[256]) {
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
    h[14] = c->rope.scaling;
    h[15] = llama_f32_bits(c->norm_eps);
    h[16] = llama_f32_bits(c->rope.theta);
    h[17] = llama_f32_bits(c->rope.factor);
    h[18] = llama_f32_bits(c->rope.low_freq_factor);
    h[19] = llama_f32_bits(c->rope.high_freq_factor);
    h[20] = c->rope.original_max_pos;
    h[21] = c->mlp;  // the MLP's activation, model_config.h's MLP_ value: 0 SwiGLU (every file before the slot), 1 ReLU², ...
}

// Fills c from a header; returns NULL, or the error ("FILE: ...", naming the slot and field) in msg. The
// config is checked too (llama_config_error), so a header that reads is one the kernels accept.
static const char *llama_header_read(const int32_t h[256], const char *file, ModelConfig *c, int *bf16, char *msg,
                                     size_t len) {
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
    for (int k = 22; k < 256; k++)
        if (h[k] != 0) {
            snprintf(msg, len, "%s: reserved header slot %d is %d, expected 0 (written by a newer train_gpt?)", file, k, h[k]);
            return msg;
        }
    *bf16 = 0;
    llama_defaults(c);
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
    c->rope.scaling = h[14];
    c->norm_eps = llama_bits_f32(h[15]);
    c->rope.theta = llama_bits_f32(h[16]);
    c->rope.factor = llama_bits_f32(h[17]);
    c->rope.low_freq_factor = llama_bits_f32(h[18]);
    c->rope.high_freq_factor = llama_bits_f32(h[19]);
    c->rope.original_max_pos = h[20];
    c->mlp = h[21];  // checked with the rest below (llama_config_error), named in slot 21's words here
    if (c->mlp < 0 || c->mlp >= NUM_MLPS) {
        return mlp_values_text(msg, len, snprintf(msg, len, "%s: MLP activation %d in slot 21, expected", file, h[21]), 1);
    }
    if (c->padded_vocab_size != model_padded_vocab(c->vocab_size) && c->vocab_size > 0) {
        snprintf(msg, len, "%s: padded_vocab_size %d in slot 4, expected %d (vocab_size %d rounded up to a multiple of "
                 "128)", file, c->padded_vocab_size, model_padded_vocab(c->vocab_size), c->vocab_size);
        return msg;
    }
    char why[400];
    if (llama_config_error(c, why, sizeof(why))) {
        snprintf(msg, len, "%s: %s", file, why);
        return msg;
    }
    return NULL;
}

// "llama-dN": a fresh Llama-family model of depth N, sized as GPT-2's dN of other depths is: C = 64N, L = N, NH = N
// heads of 64; KV = NH / 4 key/value heads where 4 divides NH, else NH / 2 where 2 does, else NH (multi-head);
// SwiGLU's hidden width from Meta's recipe with multiple_of 64 (int(8C/3) rounded up); a tied head, no biases,
// RMSNorm eps 1e-5, RoPE θ 10000, maxT 1024. Returns 0 if `desc` is not of that form.
static int llama_config_from_descriptor(const char *desc, int vocab_size, ModelConfig *c) {
    if (strncmp(desc, "llama-d", 7) != 0 || desc[7] == '\0') return 0;
    for (const char *s = desc + 7; *s; s++) if (!isdigit((unsigned char)*s)) return 0;
    int depth = atoi(desc + 7);
    if (depth < 1 || depth > 1000) return 0;
    llama_defaults(c);
    c->max_seq_len = 1024;
    c->vocab_size = vocab_size;
    c->padded_vocab_size = model_padded_vocab(vocab_size);
    c->num_layers = depth;
    c->num_heads = depth;
    c->num_kv_heads = depth % 4 == 0 ? depth / 4 : depth % 2 == 0 ? depth / 2 : depth;
    c->channels = 64 * depth;
    c->head_dim = 64;
    c->ffn_hidden = llama_ffn_hidden(c->channels, 64, 0.0);
    return 1;
}

// A fresh model or a preset (smollm-135m, llama-3.2-1b, tinyllama-1.1b, qwen2.5-0.5b: their published shapes and
// vocabularies), checked.
static int llama_from_descriptor(const char *desc, int vocab_size, ModelConfig *c) {
    if (!llama_config_from_descriptor(desc, vocab_size, c) && !llama_preset(desc, c)) return 0;
    llama_check_config(c, desc);
    return 1;
}

static void llama_shape_text(const ModelConfig *c, char *buf, size_t n) {
    snprintf(buf, n, "Llama family: L %d | C %d | NH %d | %s %d | hd %d | %s H %d | %s head%s%s%s%s | %s eps %g | "
             "%s theta %g%s", c->num_layers, c->channels, c->num_heads, KV_HEADS_CHOICE.words, c->num_kv_heads,
             c->head_dim, MLP_CHOICES[c->mlp].words, c->ffn_hidden, c->tied ? "tied" : "untied",
             c->qkv_bias ? " | " : "", c->qkv_bias ? QKV_BIAS_CHOICE.words : "", c->qk_norm ? " | " : "",
             c->qk_norm ? QK_NORM_CHOICE.words : "", NORM_CHOICES[c->norm].words, c->norm_eps,
             POS_CHOICES[c->positions].words, c->rope.theta, c->rope.scaling ? " (llama3 scaling)" : "");
}

static const ModelFamily LLAMA_FAMILY = {
    "llama", &ARCH_LLAMA, LLAMA_MAGIC, "a Llama-family model file", "llama-dN", "6N + 6L(NH hd)T", 1,
    MLP_EVERY, llama_from_descriptor,  // header slot 21 holds the activation's enum
    llama_header_read, llama_header_write, llama_shape_text};
static const ModelFamily *llama_family(void) { return &LLAMA_FAMILY; }

#endif
