// family.h: the families (gpt2.h, llama.h) and what every part of the program asks of a model's config without
// knowing its family: the parameter table (model_arch) and everything derived from it (the parameter count, the
// units the distributed code moves and their runs in file order, FLOPs, the random initialisation), the run's words
// for the model, the descriptors (-e dN, llama-dN, a preset) and the model files, read by their magic.
// The parameter tensors live back to back in one buffer in the file's order, so a file's payload is exactly that
// buffer and a flat index means the same parameter everywhere (the ZeRO shards and the optimizer state are cut from
// the same flat layout).
#ifndef FAMILY_H
#define FAMILY_H

#include <errno.h>
#include <sys/stat.h>
#include "../base/utils.h"
#include "model_config.h"
#include "tp_layout.h"  // model_shape: a config's shape, its TP rank's slice where tp_size > 1
#include "gpt2.h"
#include "llama.h"

static const ModelFamily *const FAMILIES[] = {&GPT2_FAMILY, &LLAMA_FAMILY};
#define NUM_FAMILIES ((int)(sizeof(FAMILIES) / sizeof(FAMILIES[0])))

static const Arch *model_arch(const ModelConfig *c) {
    if (!c->family) internal_fault("a model config without a family (not filled by a family's descriptor or file)");
    return c->family->arch;
}
static const ArchActs *model_act_table(const ModelConfig *c) { (void)c; return &BLOCK_ACT_TABLE; }

// Parameters of the model (the stored, padded vocabulary), from the family's table.
static size_t model_num_params(const ModelConfig *c) {
    ArchShape s = model_shape(c);
    return arch_num_params(model_arch(c), &s);
}

// ----------------------------------------------------------------------------
// Units: the model as the distributed code sees it (arch.h): unit 0 ("outer") packs the outer tensors (GPT-2:
// wte, wpe, lnfw, lnfb), unit 1+l layer l's (GPT-2's twelve, ln1w .. fcprojb), each in file order.

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

// Whether an outer tensor is used at both ends of the model (the table's ends: a tied embedding, the lookup's and the
// head's), which a pipeline's end stages both hold (zero.h's zero_sum_tied, pipeline.h's order of its two parts).
static int model_ties_ends(const ModelConfig *c) {
    ParamRun *runs = (ParamRun *)mallocCheck(model_max_runs(c) * sizeof(ParamRun));
    int n = model_param_runs(c, runs), tied = 0;
    for (int i = 0; i < n; i++) tied |= runs[i].unit == 0 && runs[i].ends == ARCH_END_BOTH;
    free(runs);
    return tied;
}

// A model named by a descriptor: "dN" (GPT-2), "llama-dN" (a fresh Llama), or a Llama preset's name
// (smollm-135m, llama-3.2-1b, tinyllama-1.1b, qwen2.5-0.5b: their published shapes and vocabularies). vocab_size is
// the data's for the fresh ones. Returns 0 if `desc` is none of these (a model file, then).
static int model_config_from_descriptor(const char *desc, int vocab_size, ModelConfig *c) {
    for (int f = 0; f < NUM_FAMILIES; f++) {
        memset(c, 0, sizeof(*c));
        if (FAMILIES[f]->from_descriptor(desc, vocab_size, c)) return 1;
    }
    memset(c, 0, sizeof(*c));
    return 0;
}

// --mlp: the MLP's activation of a fresh model, one the family's file can store. The width follows the choice's
// entry (model_config.h's MLP_CHOICES): from a gated activation to an ungated one H becomes 4C (modded-nanogpt's
// for ReLU²), between two of a kind it stays. Returns NULL, or why not in msg.
static const char *model_choose_mlp(ModelConfig *c, int mlp, char *msg, size_t len) {
    const char *name = MLP_CHOICES[mlp].name;
    if (!(c->family->mlps >> mlp & 1)) {
        char can[64] = "";
        for (int k = 0; k < NUM_MLPS; k++)
            if (c->family->mlps >> k & 1)
                snprintf(can + strlen(can), sizeof(can) - strlen(can), "%s%s", can[0] ? " or " : "", MLP_CHOICES[k].name);
        int n = snprintf(msg, len, "%s: %s stores only %s (its header has no slot for another)", name,
                         c->family->file_kind, can);
        for (int f = 0; f < NUM_FAMILIES; f++)
            if (FAMILIES[f]->mlps >> mlp & 1 && n >= 0 && (size_t)n < len) {
                snprintf(msg + n, len - n, "; %s does: -e %s --mlp %s", FAMILIES[f]->file_kind, FAMILIES[f]->fresh, name);
                break;
            }
        return msg;
    }
    if (!MLP_CHOICES[mlp].gated && MLP_CHOICES[c->mlp].gated) c->ffn_hidden = 4 * c->channels;
    c->mlp = mlp;
    return NULL;
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
// Attention's width per layer in the FLOP formulas (NH hd: C for GPT-2).
static double model_attn_width(const ModelConfig *c) { return (double)model_shape(c).attn_flop_width; }

// The shape as the run's model line gives it ("L 12 | C 768 | NH 12" for GPT-2; the Llama family adds its own).
static void model_shape_text(const ModelConfig *c, char *buf, size_t n) { c->family->shape_text(c, buf, n); }

// --profile's words for the FLOP formula and for the parameters no matmul reads (`other` of them).
static const char *model_flops_formula(const ModelConfig *c) { return c->family->flops_formula; }
static void model_nonmatmul_text(const ModelConfig *c, double other, char *buf, size_t n) {
    const char *norm = NORM_CHOICES[c->norm].words;
    if (c->positions != POS_LEARNED) { snprintf(buf, n, "%s weights and biases", norm); return; }
    double wpe = (double)c->max_seq_len * c->channels;
    snprintf(buf, n, "the position embedding %.0f, a lookup; biases and %s weights %.0f", wpe, norm, other - wpe);
}

// After the parameter count: nothing for GPT-2 (llm.c counts the padded rows), and for the Llama family the count
// without the vocabulary's padding rows where they differ, the number transformers and the model cards give.
static void model_count_note(const ModelConfig *c, char *buf, size_t n) {
    buf[0] = '\0';
    if (!c->family->count_unpadded || c->vocab_size == c->padded_vocab_size) return;
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

// Opens a model file (any family's, by the magic in its first slot; llm.c's GPT-2 files as version 3 fp32 or 5 bf16)
// and checks its header and size against the shape it states (into *c), reading no weight: returns the file
// positioned at the weights, and in *bf16_out whether they are bf16. `what` names where the path came from (a flag,
// "-e/--init"), so an error says which input is wrong.
static FILE *model_open_file_for(const char *what, const char *path, ModelConfig *c, int *bf16_out) {
    char name[4200];
    snprintf(name, sizeof(name), "%s%s%s", what ? what : "", what ? ": " : "", path);
    struct stat st;
    if (what && stat(path, &st) != 0) {
        fatal("%s: cannot open: %s (expected an llm.c model file, or dN for a fresh GPT-2 of depth N such as d2, d6, "
              "d12; a Llama-family model file, llama-dN for a fresh Llama, or a Llama preset: smollm-135m, llama-3.2-1b, "
              "tinyllama-1.1b, qwen2.5-0.5b, llama-3.1-8b)", name, strerror(errno));
    }
    FILE *fp = fopen_user(what, path, "rb");
    int32_t header[256];
    if (fread(header, sizeof(int32_t), 256, fp) != 256) fatal("%s: too short for an llm.c model header (1024 bytes)", name);
    memset(c, 0, sizeof(*c));
    const ModelFamily *fam = NULL;
    for (int f = 0; f < NUM_FAMILIES; f++)
        if (header[0] == FAMILIES[f]->magic) fam = FAMILIES[f];
    if (!fam && header[0] == LLMC_LLAMA3_MAGIC) {
        fatal("%s: an llm.c llama3-branch model file (magic 20240803): its q/k rows are in Meta's interleaved order "
              "and its norm_eps may be lost; convert it first with scripts/llmc_llama.py IN.bin OUT.bin", name);
    } else if (!fam) {
        fatal("%s: bad magic %d, expected %d (%s) or %d (%s)", name, header[0], FAMILIES[0]->magic, FAMILIES[0]->file_kind,
              FAMILIES[1]->magic, FAMILIES[1]->file_kind);
    }
    char msg[4800];
    int bf16 = 0;
    if (fam->header_read(header, name, c, &bf16, msg, sizeof(msg))) fatal("%s", msg);
    size_t n = model_num_params(c);
    size_t elem = bf16 ? 2 : 4;
    fseekCheck(fp, 0, SEEK_END, path);
    long size = ftell(fp);
    if (size != (long)(1024 + n * elem)) {
        fatal("%s: %ld bytes, but the header's shape needs %zu (%zu parameters of %zu bytes + 1024 header)",
              name, size, 1024 + n * elem, n, elem);
    }
    fseekCheck(fp, 1024, SEEK_SET, path);
    *bf16_out = bf16;
    return fp;
}

// Reads a model file into a freshly malloc'd fp32 buffer (model_open_file_for checks it first).
static float *model_read_file_for(const char *what, const char *path, ModelConfig *c) {
    int bf16;
    FILE *fp = model_open_file_for(what, path, c, &bf16);
    size_t n = model_num_params(c);
    float *params = (float *)mallocCheck(n * sizeof(float));
    if (!bf16) {
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
static void model_file_header(const ModelConfig *c, int header[256]) { c->family->header_write(c, (int32_t *)header); }

#endif
