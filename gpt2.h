// gpt2.h: the model's shape and parameter layout, and llm.c's model file (.bin), shared by every
// build. The 16 parameter tensors live back to back in one buffer in llm.c's order, so a file's
// payload is exactly that buffer and a flat index means the same parameter everywhere (the ZeRO
// shards and the optimizer state are cut from the same flat layout).
#ifndef GPT2_H
#define GPT2_H

#include <ctype.h>
#include <math.h>
#include "utils.h"

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define NUM_PARAMETER_TENSORS 16

typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp, V rounded up to a multiple of 128
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
} GPT2Config;

static const char *const PARAM_NAMES[NUM_PARAMETER_TENSORS] __attribute__((unused)) = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// Weight decay applies to the matmul weights and the embeddings, not to biases or LayerNorm.
static const int PARAM_DECAYED[NUM_PARAMETER_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

static void gpt2_param_sizes(const GPT2Config *c, size_t sizes[NUM_PARAMETER_TENSORS]) {
    size_t Vp = c->padded_vocab_size, C = c->channels, maxT = c->max_seq_len, L = c->num_layers;
    sizes[0] = Vp * C;          // wte
    sizes[1] = maxT * C;        // wpe
    sizes[2] = L * C;           // ln1w
    sizes[3] = L * C;           // ln1b
    sizes[4] = L * 3 * C * C;   // qkvw
    sizes[5] = L * 3 * C;       // qkvb
    sizes[6] = L * C * C;       // attprojw
    sizes[7] = L * C;           // attprojb
    sizes[8] = L * C;           // ln2w
    sizes[9] = L * C;           // ln2b
    sizes[10] = L * 4 * C * C;  // fcw
    sizes[11] = L * 4 * C;      // fcb
    sizes[12] = L * C * 4 * C;  // fcprojw
    sizes[13] = L * C;          // fcprojb
    sizes[14] = C;              // lnfw
    sizes[15] = C;              // lnfb
}

static size_t gpt2_num_params(const GPT2Config *c) {
    size_t sizes[NUM_PARAMETER_TENSORS], n = 0;
    gpt2_param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) n += sizes[i];
    return n;
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
// Units: the model as the distributed code sees it. Unit 0 ("outer") packs wte, wpe, lnfw, lnfb;
// unit 1+l packs layer l's twelve tensors back to back (ln1w, ln1b, qkvw, qkvb, attprojw, attprojb,
// ln2w, ln2b, fcw, fcb, fcprojw, fcprojb). A layer's weights are then one contiguous block that can
// be gathered, freed, sent to a pipeline stage or reduce-scattered as one piece. A run maps a
// piece of a unit to its place in llm.c's flat order (the file layout).

#define NUM_LAYER_PIECES 12
typedef struct {
    size_t flat;      // offset in llm.c's flat order
    size_t len;
    int unit;
    size_t unit_off;  // offset inside the unit
    int decayed;      // AdamW weight decay applies
} ParamRun;

static int gpt2_num_units(const GPT2Config *c) { return c->num_layers + 1; }

static size_t gpt2_unit_size(const GPT2Config *c, int u) {
    size_t C = c->channels;
    if (u == 0) return (size_t)c->padded_vocab_size * C + (size_t)c->max_seq_len * C + 2 * C;
    return 12 * C * C + 13 * C;  // 3CC + CC + 4CC + 4CC weights; 2C + 3C + C + 2C + 4C + C vectors
}

// Fills runs (4 + 12L of them, in unit order) and returns their count.
static int gpt2_param_runs(const GPT2Config *c, ParamRun *runs) {
    size_t sizes[NUM_PARAMETER_TENSORS], toff[NUM_PARAMETER_TENSORS], off = 0;
    gpt2_param_sizes(c, sizes);
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { toff[k] = off; off += sizes[k]; }
    int n = 0;
    const int outer[4] = {0, 1, 14, 15};
    size_t uoff = 0;
    for (int i = 0; i < 4; i++) {
        int k = outer[i];
        runs[n++] = (ParamRun){toff[k], sizes[k], 0, uoff, PARAM_DECAYED[k]};
        uoff += sizes[k];
    }
    int L = c->num_layers;
    for (int l = 0; l < L; l++) {
        uoff = 0;
        for (int k = 2; k < 14; k++) {
            size_t per = sizes[k] / L;
            runs[n++] = (ParamRun){toff[k] + (size_t)l * per, per, 1 + l, uoff, PARAM_DECAYED[k]};
            uoff += per;
        }
    }
    return n;
}

static void gpt2_check_config(const GPT2Config *c, const char *where) {
    if (c->max_seq_len < 1 || c->max_seq_len > 65536 || c->vocab_size < 1 || c->padded_vocab_size < c->vocab_size ||
        c->num_layers < 1 || c->num_heads < 1 || c->channels < 1 || c->channels % c->num_heads != 0) {
        fatal("%s: implausible model shape (maxT %d, V %d, Vp %d, L %d, NH %d, C %d)", where, c->max_seq_len,
              c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels);
    }
}

// "dN": the GPT-2 family as llm.c names it; any other depth gets 64*N channels in 64-wide heads.
// Returns 0 if `desc` is not of that form.
static int gpt2_config_from_descriptor(const char *desc, int vocab_size, GPT2Config *c) {
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

// GPT-2 initialisation as llm.c and nanoGPT do it: N(0, 0.02) weights, zero biases, unit LayerNorm
// gains, residual projections scaled by 1/sqrt(2L). Normal draws by Box-Muller from our own RNG so
// the same seed gives the same model on every machine and in every build.
static void gpt2_init_random(const GPT2Config *c, float *params, uint64_t seed) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    uint64_t rng = mix_seed(seed ^ 0x6770743221ull);
    float residual_std = 0.02f / sqrtf(2.0f * c->num_layers);
    float *p = params;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        int is_weight = PARAM_DECAYED[i];
        int is_ln_gain = i == 2 || i == 8 || i == 14;
        float std = (i == 6 || i == 12) ? residual_std : 0.02f;
        size_t n = sizes[i];
        if (i == 0) n = (size_t)c->vocab_size * c->channels;  // padded rows stay zero
        for (size_t j = 0; j < sizes[i]; j++) {
            if (j >= n) { p[j] = 0.0f; continue; }
            if (is_weight) {
                float u1 = random_f32(&rng), u2 = random_f32(&rng);
                p[j] = std * sqrtf(-2.0f * logf(1.0f - u1)) * cosf(2.0f * (float)M_PI * u2);
            } else {
                p[j] = is_ln_gain ? 1.0f : 0.0f;
            }
        }
        p += sizes[i];
    }
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Reads an llm.c model file (version 3 fp32 or 5 bf16) into a freshly malloc'd fp32 buffer. `what`
// names where the path came from (a flag, "-e/--init"), so an error says which input is wrong.
static float *gpt2_read_model_file_for(const char *what, const char *path, GPT2Config *c) {
    char name[4200];
    snprintf(name, sizeof(name), "%s%s%s", what ? what : "", what ? ": " : "", path);
    struct stat st;
    if (what && stat(path, &st) != 0) {
        fatal("%s: cannot open: %s (expected an llm.c model file, or dN for a fresh GPT-2 of depth N such as d2, d6, "
              "d12)", name, strerror(errno));
    }
    FILE *fp = fopen_user(what, path, "rb");
    int header[256];
    if (fread(header, sizeof(int), 256, fp) != 256) fatal("%s: too short for an llm.c model header (1024 bytes)", name);
    if (header[0] != MODEL_MAGIC) {
        fatal("%s: bad magic %d, expected %d (not an llm.c model file?)", name, header[0], MODEL_MAGIC);
    }
    int version = header[1];
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
    size_t n = gpt2_num_params(c);
    size_t elem = version == MODEL_VERSION_FP32 ? 4 : 2;
    fseekCheck(fp, 0, SEEK_END, path);
    long size = ftell(fp);
    if (size != (long)(1024 + n * elem)) {
        fatal("%s: %ld bytes, but the header's shape needs %zu (%zu parameters of %zu bytes + 1024 header)",
              name, size, 1024 + n * elem, n, elem);
    }
    fseekCheck(fp, 1024, SEEK_SET, path);
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
static float *gpt2_read_model_file(const char *path, GPT2Config *c) { return gpt2_read_model_file_for(NULL, path, c); }

static void gpt2_model_header(const GPT2Config *c, int header[256]) {
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
