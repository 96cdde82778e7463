// test_arch.c: the architecture tables (arch.h and the families' files): GPT-2's table derives exactly what llm.c's
// layout is, the Llama presets count the published parameters, runs cover the flat buffer once, fused tensors'
// pieces and each row's role, the activation tables, and the model file header round-trips and refuses bad input
// by file and field. Needs no reference file.
// usage: test/test_arch
#define TESTING  // the CPU build without its main
#include "train_gpt.c"
#include "arch/arch.h"
#include "test/check.h"
#include "test/llama_cfg.h"

static float *fbuf(size_t n) { return (float *)callocCheck(n ? n : 1, sizeof(float)); }

// ----------------------------------------------------------------------------
// The architecture tables.

// GPT-2's table against gpt2.h: sizes, count, units, runs (flat offset, length, unit, offset in unit, decay),
// in one check per config.
static void test_gpt2_table(const char *what, ModelConfig c) {
    ArchShape s;
    gpt2_arch_shape(&c, &s);
    size_t want[NUM_PARAMETER_TENSORS], got[ARCH_MAX_PARAMS];
    gpt2_param_sizes(&c, want);
    arch_param_sizes(&ARCH_GPT2, &s, got);
    int ok = ARCH_GPT2.num_params == NUM_PARAMETER_TENSORS, bad = -1;
    for (int k = 0; ok && k < NUM_PARAMETER_TENSORS; k++)
        if (got[k] != want[k] || strcmp(ARCH_GPT2.params[k].name, PARAM_NAMES[k]) != 0 ||
            ARCH_GPT2.params[k].decayed != PARAM_DECAYED[k]) ok = 0, bad = k;
    if (arch_num_params(&ARCH_GPT2, &s) != model_num_params(&c)) ok = 0;
    if (arch_num_units(&s) != model_num_units(&c)) ok = 0;
    for (int u = 0; u < model_num_units(&c); u++) if (arch_unit_size(&ARCH_GPT2, &s, u) != model_unit_size(&c, u)) ok = 0;
    size_t nr = 4 + (size_t)NUM_LAYER_PIECES * c.num_layers;
    ParamRun *a = (ParamRun *)callocCheck(nr, sizeof(ParamRun)), *b = (ParamRun *)callocCheck(nr, sizeof(ParamRun));
    int na = model_param_runs(&c, a), nb = arch_param_runs(&ARCH_GPT2, &s, b);
    if (na != nb) ok = 0;
    for (int i = 0; ok && i < na; i++)
        if (a[i].flat != b[i].flat || a[i].len != b[i].len || a[i].unit != b[i].unit || a[i].unit_off != b[i].unit_off ||
            a[i].decayed != b[i].decayed) ok = 0;
    check(ok, "GPT-2 table = gpt2.h (%s: L %d, C %d, V %d, maxT %d): sizes, names, decay, count, %d unit sizes, %d runs%s%s",
          what, c.num_layers, c.channels, c.vocab_size, c.max_seq_len, model_num_units(&c), na, bad >= 0 ? "; first "
          "wrong tensor " : "", bad >= 0 ? PARAM_NAMES[bad] : "");
    free(a), free(b);
}

// Runs of a table cover the flat buffer exactly once (sorted by flat offset, each starts where the last ended),
// and each unit contiguously from 0 to its size.
static int cmp_flat(const void *x, const void *y) {
    size_t a = ((const ParamRun *)x)->flat, b = ((const ParamRun *)y)->flat;
    return a < b ? -1 : a > b;
}
static int runs_partition(const Arch *a, const ArchShape *s) {
    size_t N = arch_num_params(a, s);
    ParamRun *r = (ParamRun *)callocCheck((size_t)a->num_params * (s->num_layers + 1), sizeof(ParamRun));
    int n = arch_param_runs(a, s, r), ok = 1, unit = 0;
    size_t uoff = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].len == 0) ok = 0;
        if (r[i].unit != unit) {
            if (uoff != arch_unit_size(a, s, unit) || r[i].unit != unit + 1) ok = 0;
            unit = r[i].unit, uoff = 0;
        }
        if (r[i].unit_off != uoff) ok = 0;
        uoff += r[i].len;
    }
    if (unit != s->num_layers || uoff != arch_unit_size(a, s, unit)) ok = 0;
    qsort(r, n, sizeof(ParamRun), cmp_flat);
    size_t end = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].flat != end) ok = 0;
        end = r[i].flat + r[i].len;
    }
    if (end != N) ok = 0;
    free(r);
    return ok;
}

static void test_tables(void) {
    ModelConfig d12, d2, odd, d6;
    gpt2_config_from_descriptor("d12", 50257, &d12);
    gpt2_config_from_descriptor("d2", 50257, &d2);
    gpt2_config_from_descriptor("d6", 65, &d6);
    d6.max_seq_len = 256;
    odd = gpt2_config(64, 1000, 1024, 3, 4, 48);
    test_gpt2_table("d12", d12);
    test_gpt2_table("d2", d2);
    test_gpt2_table("d6, T 256, V 65", d6);
    test_gpt2_table("L 3, C 48", odd);

    // the initialisation from the table draws model_init_random's numbers in its order
    ArchShape s;
    gpt2_arch_shape(&d2, &s);
    size_t N = model_num_params(&d2);
    float *a = fbuf(N), *b = fbuf(N);
    model_init_random(&d2, a, 42);
    arch_init_random(&ARCH_GPT2, &s, b, 42);
    check(memcmp(a, b, N * sizeof(float)) == 0, "GPT-2 table's initialisation = model_init_random bit for bit (d2, %zu "
          "parameters)", N);
    free(a), free(b);

    // FLOPs: the trainer's 6N + 6LCT and report.h's matmul weights 12LCC + VpC
    gpt2_arch_shape(&d12, &s);
    double L = d12.num_layers, C = d12.channels, Vp = d12.padded_vocab_size, T = 1024;
    double f = arch_flops_per_token(&ARCH_GPT2, &s, 1024);
    double want = 6.0 * model_num_params(&d12) + 6.0 * L * C * T;
    double mm = (double)arch_matmul_params(&ARCH_GPT2, &s), want_mm = 12.0 * L * C * C + Vp * C;
    double lf = arch_layer_forward_flops(&ARCH_GPT2, &s, 1024), hf = arch_head_forward_flops(&s);
    check(f == want && mm == want_mm && lf == 24.0 * C * C + 4.0 * T * C && hf == 2.0 * Vp * C,
          "GPT-2 table's FLOPs per token %.6g (trainer.h: %.6g), matmul weights %.0f (report.h: %.0f), a layer's forward "
          "%.6g and the head's %.6g (pipeline.h's 24C^2 + 4TC, 2VpC)", f, want, mm, want_mm, lf, hf);

    // the Llama presets count what transformers counts
    const size_t published[5] = {134515008, 1235814400, 1100048384, 494032768, 8030261248};
    for (int i = 0; i < 5; i++) {
        ModelConfig lc;
        llama_preset(LLAMA_PRESETS[i], &lc);
        char msg[512];
        const char *err = llama_config_error(&lc, msg, sizeof(msg));
        llama_arch_shape(&lc, &s);
        size_t n = arch_num_params_unpadded(&ARCH_LLAMA, &s);
        check(n == published[i] && !err && runs_partition(&ARCH_LLAMA, &s),
              "preset %s: %zu parameters (published %zu), config valid, runs partition the %zu stored", LLAMA_PRESETS[i],
              n, published[i], arch_num_params(&ARCH_LLAMA, &s));
    }
    {  // FLOPs: the matmul weights of SmolLM-135M (tied: wte is the head) and of TinyLlama (untied: lm_head is)
        ModelConfig sm, ti;
        llama_preset("smollm-135m", &sm);
        llama_preset("tinyllama-1.1b", &ti);
        ArchShape ss, st;
        llama_arch_shape(&sm, &ss);
        llama_arch_shape(&ti, &st);
        double mm_s = 49152.0 * 576 + 30.0 * (960 * 576 + 576 * 576 + 3072 * 576 + 576 * 1536);
        double mm_t = 32000.0 * 2048 + 22.0 * (2560.0 * 2048 + 2048.0 * 2048 + 11264.0 * 2048 + 2048.0 * 5632);
        double fs = arch_flops_per_token(&ARCH_LLAMA, &ss, 2048), fs_want = 6.0 * 134515008 + 6.0 * 30 * 576 * 2048;
        check((double)arch_matmul_params(&ARCH_LLAMA, &ss) == mm_s && (double)arch_matmul_params(&ARCH_LLAMA, &st) == mm_t &&
              fs == fs_want, "Llama FLOPs: matmul weights SmolLM %.0f (by hand %.0f), TinyLlama %.0f (%.0f); SmolLM "
              "6N + 6L(NH hd)T at T 2048 %.6g (%.6g)", (double)arch_matmul_params(&ARCH_LLAMA, &ss), mm_s,
              (double)arch_matmul_params(&ARCH_LLAMA, &st), mm_t, fs, fs_want);
    }
    int h1 = llama_ffn_hidden(2048, 1024, 1.4), h2 = llama_ffn_hidden(4096, 1024, 1.3), h3 = llama_ffn_hidden(2048, 256, 0);
    check(h1 == 8192 && h2 == 14336 && h3 == 5632, "SwiGLU hidden from multiple_of and ffn_dim_multiplier: Llama 3.2 1B "
          "%d (8192), Llama 3.1 8B %d (14336), TinyLlama %d (5632)", h1, h2, h3);

    // every option combination: the optional tensors come and go, the runs still partition the buffer
    ModelConfig t = llama_cfg(64, 300, 384, 2, 4, 2, 32, 8, 40, 1, 0, 0, 0, 1e-5f, 10000.0f, 0, 0, 0, 0);
    int all_ok = 1;
    for (int m = 0; m < 8; m++) {
        t.tied = m & 1, t.qkv_bias = (m >> 1) & 1, t.qk_norm = (m >> 2) & 1;
        llama_arch_shape(&t, &s);
        size_t per_layer = 32 + (size_t)(4 + 2 * 2) * 8 * 32 + 32 * 32 + 32 + 80 * 32 + 32 * 40;
        if (t.qkv_bias) per_layer += (4 + 2 * 2) * 8;
        if (t.qk_norm) per_layer += 2 * 8;
        size_t outer = 384 * 32 + 32 + (t.tied ? 0 : 384 * 32);
        if (!runs_partition(&ARCH_LLAMA, &s) || arch_unit_size(&ARCH_LLAMA, &s, 1) != per_layer ||
            arch_unit_size(&ARCH_LLAMA, &s, 0) != outer || arch_num_params(&ARCH_LLAMA, &s) != outer + 2 * per_layer)
            all_ok = 0;
    }
    check(all_ok, "Llama table: tied/untied x qkv_bias x qk_norm, unit sizes by hand and runs partitioning the buffer");

    // the file order of docs/llama.md's model file with every option on (the model tests above cover the orders without
    // qk_norm against transformers; Qwen 3 is newer than transformers 4.45)
    t.tied = 0, t.qkv_bias = 1, t.qk_norm = 1;
    llama_arch_shape(&t, &s);
    const char *order[] = {"wte", "attn_norm", "wqkv", "bqkv", "q_norm", "k_norm", "wo", "mlp_norm", "wfc", "wproj",
                           "final_norm", "lm_head"};
    const size_t sizes[] = {384 * 32, 2 * 32, 2 * 64 * 32, 2 * 64, 2 * 8, 2 * 8, 2 * 32 * 32, 2 * 32, 2 * 80 * 32,
                            2 * 32 * 40, 32, 384 * 32};
    int order_ok = ARCH_LLAMA.num_params == 12;
    size_t off = 0;
    for (int k = 0; order_ok && k < 12; k++) {
        int j = arch_find(&ARCH_LLAMA, order[k]);
        if (j != k || arch_tensor_offset(&ARCH_LLAMA, &s, j) != off || arch_tensor_size(&ARCH_LLAMA.params[j], &s) != sizes[k])
            order_ok = 0;
        off += sizes[k];
    }
    check(order_ok, "Llama table: the model file's tensor order (docs/llama.md), offsets and sizes with every option on");
}

// A fused tensor's pieces (arch_param_pieces) against hand counts: GPT-2's q | k | v of C rows each and its one-piece
// fcw; a 4:1 grouped-query Llama's q | k | v of NH hd, KV hd, KV hd rows and SwiGLU's up | gate of H rows each.
static int pieces_are(const Arch *a, const ArchShape *s, const char *tensor, int n, const char *const *names,
                      const size_t *rows) {
    ArchPiece p[ARCH_MAX_PIECES];
    int k = arch_find(a, tensor), got = k < 0 ? -1 : arch_param_pieces(a, s, k, p), ok = got == n;
    size_t at = 0;
    for (int i = 0; ok && i < n; i++) {
        if (strcmp(p[i].name, names[i]) != 0 || p[i].row != at || p[i].rows != rows[i]) ok = 0;
        at += rows[i];
    }
    return ok && (n == 0 || at == s->dim[a->params[k].rows]);
}

static void test_pieces(void) {
    ModelConfig g = gpt2_config(64, 1000, 1024, 2, 4, 48);
    ArchShape s = model_shape(&g);
    const char *qkv[] = {"q", "k", "v"}, *fcw[] = {"fcw"}, *upgate[] = {"up", "gate"};
    size_t c3[] = {48, 48, 48}, fc4[] = {192};
    check(pieces_are(&ARCH_GPT2, &s, "qkvw", 3, qkv, c3) && pieces_are(&ARCH_GPT2, &s, "qkvb", 3, qkv, c3) &&
          pieces_are(&ARCH_GPT2, &s, "fcw", 1, fcw, fc4), "pieces: GPT-2 (C 48, NH 4) qkvw and qkvb are q | k | v of 48 "
          "rows each, fcw one piece of 4C = 192");
    ModelConfig l = llama_cfg(64, 300, 384, 2, 8, 2, 128, 16, 352, 1, 1, 0, 0, 1e-5f, 10000.0f, 0, 0, 0, 0);
    s = model_shape(&l);
    size_t gqa[] = {8 * 16, 2 * 16, 2 * 16}, h2[] = {352, 352}, hd[] = {16};
    const char *qn[] = {"q_norm"};
    check(pieces_are(&ARCH_LLAMA, &s, "wqkv", 3, qkv, gqa) && pieces_are(&ARCH_LLAMA, &s, "bqkv", 3, qkv, gqa) &&
          pieces_are(&ARCH_LLAMA, &s, "wfc", 2, upgate, h2) && !pieces_are(&ARCH_LLAMA, &s, "q_norm", 1, qn, hd),
          "pieces: Llama GQA 4:1 (NH 8, KV 2, hd 16) wqkv and bqkv are q | k | v of 128, 32, 32 rows, SwiGLU's wfc up | "
          "gate of H = 352 each; q_norm absent without QK-norm");
    l.mlp = MLP_RELU2, l.ffn_hidden = 4 * 128;
    s = model_shape(&l);
    const char *wfc[] = {"wfc"};
    size_t h4[] = {512};
    check(pieces_are(&ARCH_LLAMA, &s, "wfc", 1, wfc, h4), "pieces: ReLU²'s wfc is one piece of H = 4C = 512 rows (no gate)");
}

// The role column against the names each family's rows had before it (the block's W_ roles and ACT_ roles): a model
// finds every weight at the offset of the tensor of that name, and every activation row names its role's tensor.
static void test_roles(void) {
    static const char *const names[NUM_WEIGHT_ROLES][2] = {
        {"ln1w", "attn_norm"}, {"ln1b", 0}, {"qkvw", "wqkv"}, {"qkvb", "bqkv"}, {0, "q_norm"}, {0, "k_norm"},
        {"attprojw", "wo"}, {"attprojb", 0}, {"ln2w", "mlp_norm"}, {"ln2b", 0}, {"fcw", "wfc"}, {"fcb", 0},
        {"fcprojw", "wproj"}, {"fcprojb", 0}, {"wte", "wte"}, {"wpe", 0}, {"lnfw", "final_norm"}, {"lnfb", 0},
        {0, "lm_head"}};
    ModelConfig cs[2] = {gpt2_config(64, 1000, 1024, 2, 4, 48),
                         llama_cfg(64, 300, 384, 2, 4, 2, 32, 8, 40, 0, 1, 1, 0, 1e-5f, 10000.0f, 0, 0, 0, 0)};
    int ok = 1, bad_role = -1;
    for (int f = 0; f < 2; f++) {
        Model *m = model_create(&cs[f], 1, 4, 0, 0, cs[f].num_layers, 1, 0, 0);
        for (int r = 0; r < NUM_WEIGHT_ROLES; r++) {
            int k = names[r][f] ? arch_find(m->arch, names[r][f]) : -1;
            size_t want = k < 0 ? SIZE_MAX : arch_unit_offset(m->arch, &m->shape, k);
            if (m->w_off[r] != want) ok = 0, bad_role = r;
        }
        model_free(m);
    }
    static const char *const acts[NUM_ACTS] = {
        "encoded", "ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "att", "attproj", "residual2", "ln2", "ln2_mean",
        "ln2_rstd", "fch", "fch_gelu", "fcproj", "residual3", "lnf", "lnf_mean", "lnf_rstd", "logits", "losses",
        "qkv_pre", "qk_rstd"};
    int seen[NUM_ACTS] = {0};
    for (int i = 0; i < BLOCK_ACT_TABLE.num_acts; i++) {
        const ArchAct *a = &BLOCK_ACT_TABLE.acts[i];
        if (a->role < 0 || a->role >= NUM_ACTS || strcmp(acts[a->role], a->name) != 0 || seen[a->role]++) ok = 0;
    }
    char why[64] = "";
    if (bad_role >= 0) snprintf(why, sizeof(why), "; first wrong weight role %d", bad_role);
    check(ok && BLOCK_ACT_TABLE.num_acts == NUM_ACTS, "roles: GPT-2's and a Llama's (untied, bias, QK-norm) %d weight "
          "roles at their named tensors' unit offsets, %d activation rows each naming its own role%s", NUM_WEIGHT_ROLES,
          NUM_ACTS, why);
}


// GPT-2's activation table against model.h's layout: names, float or floatX, per layer, the level each is shared
// from, and the bytes of every tensor and in all at each recompute level, for the CPU build (X_BYTES 4, the softmax
// saved); and the Llama table's sizes by hand for a small QK-norm model.
static void test_act_tables(void) {
    ModelConfig c;
    gpt2_config_from_descriptor("d2", 50257, &c);
    ArchShape s;
    gpt2_arch_shape(&c, &s);
    // model.h's layout before the table replaced it (its enum order, sizes, float flags, per-layer flags and levels),
    // kept here as the independent statement of GPT-2's numbers that the table must reproduce
    enum { NA = 21 };
    const int shared[NA] = {99, 2, 3, 3, 3, 3, 3, 0, 3, 2, 3, 3, 3, 1, 0, 99, 0, 0, 0, 0, 0};
    const int per_layer[NA] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    const int is_float[NA] = {0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1};
    // the table's rows GPT-2's options choose (the Llama family's QK-norm rows are absent, and take no bytes)
    const ArchAct *rows[NA];
    int B = 3, T = 64, n = 0;
    for (int i = 0; i < BLOCK_ACT_TABLE.num_acts; i++)
        if (s.opt[BLOCK_ACT_TABLE.acts[i].present] && n < NA) rows[n++] = &BLOCK_ACT_TABLE.acts[i];
    int ok = n == NA;
    size_t BT = (size_t)B * T, C = c.channels, per[NA];
    size_t elems[NA] = {BT * C, BT * C, BT, BT, BT * 3 * C, BT * C, backend_att_saved_floats(B, c.num_heads, T), BT * C, BT * C,
                        BT * C, BT, BT, BT * 4 * C, BT * 4 * C, BT * C, BT * C, BT * C, BT, BT, BT * c.padded_vocab_size, BT};
    for (int i = 0; i < NA; i++) per[i] = (elems[i] * (is_float[i] ? 4 : X_BYTES) + 255) / 256 * 256;
    size_t att = backend_att_saved_floats(B, c.num_heads, T);
    for (int i = 0; ok && i < NA; i++) {
        const ArchAct *a = rows[i];
        size_t bytes = (arch_act_elems(a, &s, B, T, att) * (a->is_float ? 4 : X_BYTES) + 255) / 256 * 256;
        if (bytes != per[i] || a->is_float != is_float[i] || a->per_layer != per_layer[i] ||
            a->shared_from != (shared[i] == 99 ? ARCH_ACT_ALWAYS_KEPT : shared[i]))
            ok = 0;
    }
    for (int r = 0; ok && r <= 3; r++) {
        size_t want = 0;
        for (int i = 0; i < NA; i++) want += per[i] * (!per_layer[i] ? 1 : r < shared[i] ? c.num_layers : 1);
        if (arch_act_bytes(&BLOCK_ACT_TABLE, &s, B, T, r, c.num_layers, X_BYTES, att) != want) ok = 0;
        // and the memory plan model.h now derives from the table
        if (model_memory_plan(&c, B, T, r, c.num_layers, 1, 1, 0, 0).activations != want) ok = 0;
    }
    check(ok, "GPT-2 activation table = model.h's layout (21 tensors; bytes at recompute 0-3, d2, B 3, T 64)");

    ModelConfig lc = llama_cfg(64, 300, 384, 2, 4, 2, 32, 8, 40, 1, 0, 1, 0, 1e-5f, 10000.0f, 0, 0, 0, 0);
    llama_arch_shape(&lc, &s);
    size_t al = 256;
#define AL(n) (((n) + al - 1) / al * al)
    // per layer at level 0: ln1, ln1_rstd, qkv_pre, qk_rstd, qkv, atty, att, residual2, ln2, ln2_rstd, fch, fch_gelu (SwiGLU's);
    // one copy: encoded, attproj, fcproj, lnf, lnf_rstd, logits, losses; residual3 per layer always
    size_t layer0 = AL(BT * 32 * 4) + AL(BT * 4) + AL(BT * 64 * 4) + AL(BT * 6 * 4) + AL(BT * 64 * 4) + AL(BT * 32 * 4) +
                    AL((size_t)B * 4 * T * T * 4) + AL(BT * 32 * 4) + AL(BT * 32 * 4) + AL(BT * 4) + AL(BT * 80 * 4) +
                    AL(BT * 40 * 4);
    size_t once = AL(BT * 32 * 4) * 4 + AL(BT * 4) + AL(BT * 384 * 4) + AL(BT * 4);
    size_t want0 = 2 * (layer0 + AL(BT * 32 * 4)) + once;
    size_t want3 = layer0 + AL(BT * 32 * 4) * 2 + once;
    size_t dropped2 = 2 * AL(BT * 32 * 4) + AL(BT * 40 * 4);  // ln1, ln2 and fch_gelu: one copy from level 2
    size_t want2 = 2 * (layer0 - dropped2 + AL(BT * 32 * 4)) + dropped2 + once;
    size_t latt = (size_t)B * 4 * T * T;
    size_t got0 = arch_act_bytes(&BLOCK_ACT_TABLE, &s, B, T, 0, 2, 4, latt);
    size_t got2 = arch_act_bytes(&BLOCK_ACT_TABLE, &s, B, T, 2, 2, 4, latt);
    size_t got3 = arch_act_bytes(&BLOCK_ACT_TABLE, &s, B, T, 3, 2, 4, latt);
    lc.qk_norm = 0;
    llama_arch_shape(&lc, &s);
    size_t got0n = arch_act_bytes(&BLOCK_ACT_TABLE, &s, B, T, 0, 2, 4, latt);
    size_t want0n = want0 - 2 * (AL(BT * 64 * 4) + AL(BT * 6 * 4));
#undef AL
    check(got0 == want0 && got2 == want2 && got3 == want3 && got0n == want0n, "Llama activation table: with QK-norm %zu "
          "bytes at level 0 (by hand %zu), %zu at 2 (%zu), %zu at 3 (%zu); without, %zu at 0 (%zu)", got0, want0, got2,
          want2, got3, want3, got0n, want0n);
}

static void test_config_and_header(void) {
    char msg[512];
    ModelConfig c;
    llama_preset("smollm-135m", &c);
    c.num_kv_heads = 2;  // 9 heads
    const char *e = llama_config_error(&c, msg, sizeof(msg));
    check(e && strstr(e, "n_head 9") && strstr(e, "n_kv_head 2"), "refused: n_head 9 with n_kv_head 2 (%s)", e ? e : "accepted");
    llama_preset("smollm-135m", &c);
    c.head_dim = 63;
    e = llama_config_error(&c, msg, sizeof(msg));
    check(e && strstr(e, "head_dim 63") && strstr(e, "RoPE"), "refused: odd head_dim for RoPE (%s)", e ? e : "accepted");

    // header round trip: every field, floats by their bits
    ModelConfig w, r;
    llama_preset("llama-3.2-1b", &w);
    w.qk_norm = 1;
    w.norm_eps = 1e-6f;
    int32_t h[256];
    int bf16;
    llama_header_write(&w, h);
    e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
    check(!e && memcmp(&w, &r, sizeof(w)) == 0 && h[0] == LLAMA_MAGIC && h[1] == 1 && h[15] == llama_f32_bits(1e-6f) &&
          h[16] == 0x48f42400, "Llama header round trip: every field (rope_theta 500000 stored as 0x%08x)%s%s", h[16],
          e ? ": " : "", e ? e : "");
    w.mlp = MLP_RELU2, w.ffn_hidden = 4 * w.channels;  // --mlp relu2's config: slot 21 keeps it
    llama_header_write(&w, h);
    e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
    check(!e && memcmp(&w, &r, sizeof(w)) == 0 && h[21] == 1 && r.mlp == MLP_RELU2 && h[10] == 8192,
          "Llama header round trip with ReLU²: slot 21 = 1, H = 4C = 8192%s%s", e ? ": " : "", e ? e : "");
    h[21] = 0;
    e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
    check(!e && r.mlp == MLP_SWIGLU, "slot 21 = 0 (every file written before the slot) reads as SwiGLU");
    int every = 1;  // slot 21 holds the activation's enum, whichever it is (model_config.h's MLP_CHOICES)
    for (int k = 0; k < NUM_MLPS; k++) {
        w.mlp = k, w.ffn_hidden = MLP_CHOICES[k].gated ? 8192 : 4 * w.channels;
        llama_header_write(&w, h);
        e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
        every &= !e && h[21] == k && memcmp(&w, &r, sizeof(w)) == 0;
    }
    check(every, "Llama header round trip of every MLP activation (%d): slot 21 holds its enum", NUM_MLPS);
    w.mlp = MLP_SWIGLU, w.ffn_hidden = 8192;
    struct { int slot, value; const char *want; } bad[] = {
        {0, 20240326, "m.bin: bad magic 20240326 in slot 0"},
        {0, 20240803, "llm.c's llama3 branch"},
        {1, 2, "m.bin: version 2 in slot 1, expected 1"},
        {37, 5, "m.bin: reserved header slot 37 is 5"},
        {4, 128257, "m.bin: padded_vocab_size 128257 in slot 4"},
        {7, 5, "m.bin: n_head 32 is not a multiple of n_kv_head 5"},
        {21, 9, "m.bin: MLP activation 9 in slot 21, expected 0 (SwiGLU), 1 (ReLU²), 2 (GELU)"},
        {21, -1, "m.bin: MLP activation -1 in slot 21, expected 0 (SwiGLU)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        llama_header_write(&w, h);
        h[bad[i].slot] = bad[i].value;
        e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
        check(e && strstr(e, bad[i].want), "header slot %d = %d refused naming it: %s", bad[i].slot, bad[i].value,
              e ? e : "accepted");
    }
}

// The ends of the model each outer tensor is used at (ArchParam's at_input, at_output), as zero.h reads them from the
// runs: a pipeline's end stages sum only what both use (zero_sum_tied), and each tensor is counted by the end using it.
// Floats summed between the end stages per step: before, the whole outer unit; now the runs both ends use. By hand:
// GPT-2 124M: wte 50304 x 768 of the unit's wte + wpe 1024 x 768 + lnf 2 x 768; Llama 3.2 1B (tied): wte 128256 x 2048
// of it + final_norm 2048; Llama 3.1 8B (untied): none of wte 128256 x 4096 + final_norm 4096 + lm_head 128256 x 4096.
static void test_ends(void) {
    struct { const char *desc; size_t outer, both; const char *input, *output; } want[] = {
        {"d12", 50304ul * 768 + 1024 * 768 + 2 * 768, 50304ul * 768, "wte wpe", "wte lnfw lnfb"},
        {"llama-3.2-1b", 128256ul * 2048 + 2048, 128256ul * 2048, "wte", "wte final_norm"},
        {"llama-3.1-8b", 2 * 128256ul * 4096 + 4096, 0, "wte", "final_norm lm_head"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ModelConfig c;
        model_config_from_descriptor(want[i].desc, 50257, &c);
        ArchShape s = model_shape(&c);
        const Arch *a = model_arch(&c);
        ParamRun *runs = (ParamRun *)callocCheck(model_max_runs(&c), sizeof(ParamRun));
        int n = model_param_runs(&c, runs), ok = 1;
        size_t outer = 0, both = 0;
        for (int k = 0; k < n; k++) {
            if (runs[k].unit != 0) { ok &= runs[k].ends == 0; continue; }
            outer += runs[k].len;
            if (runs[k].ends == ARCH_END_BOTH) both += runs[k].len;
        }
        char in[128] = "", out[128] = "";
        for (int k = 0; k < a->num_params; k++) {
            int e = arch_param_ends(&a->params[k], &s);
            ok &= (e != 0) == (!a->params[k].per_layer && arch_present(&a->params[k], &s));
            if (e & ARCH_END_INPUT) snprintf(in + strlen(in), sizeof(in) - strlen(in), "%s%s", in[0] ? " " : "", a->params[k].name);
            if (e & ARCH_END_OUTPUT) snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? " " : "", a->params[k].name);
        }
        ok &= outer == model_unit_size(&c, 0) && outer == want[i].outer && both == want[i].both;
        ok &= strcmp(in, want[i].input) == 0 && strcmp(out, want[i].output) == 0;
        check(ok, "%s's ends: input [%s], output [%s]; --pp's end stages sum %zu floats per step (%.1f MiB), of the outer "
              "unit's %zu (%.1f MiB)", want[i].desc, in, out, both, both * 4.0 / 1048576, outer, outer * 4.0 / 1048576);
        free(runs);
    }
}

// --tp's runs, from the table's tp column, for every model the CPU build names (-e dN at each named depth and two
// by the default rule, llama-dN, every Llama preset: GPT-2 and Llama, tied and untied, multi-head, grouped-query and
// multi-query; a Llama with every option on; ReLU² beside GELU and SwiGLU) at every degree of 1, 2, 4, 8 that divides
// it: each rank's runs fill each of its local units contiguously, to the local unit's size, and the runs each rank
// counts (replicated tensors and shared key/value heads counted by one holder) cover the whole model exactly once;
// every run lies inside the model and a run no rank counts is another rank's counted run (a replica).
static int cmp_flat_len(const void *x, const void *y) {
    const ParamRun *a = (const ParamRun *)x, *b = (const ParamRun *)y;
    return a->flat < b->flat ? -1 : a->flat > b->flat ? 1 : a->len < b->len ? -1 : a->len > b->len;
}
static int tp_runs_cover(ModelConfig c, int n, char *why, size_t wl) {
    ArchShape whole = model_whole_shape(&c);
    size_t total = arch_num_params(model_arch(&c), &whole), ncounted = 0, nrep = 0;
    ParamRun *counted = NULL, *reps = NULL;
    c.tp_size = n;
    for (int r = 0; r < n; r++) {
        c.tp_rank = r;
        TpDims t = model_tp_dims(&c);
        int nr = (int)model_max_runs(&c);
        ParamRun *runs = (ParamRun *)callocCheck(nr, sizeof(ParamRun));
        TpRunInfo *info = (TpRunInfo *)callocCheck(nr, sizeof(TpRunInfo));
        int got = model_param_runs(&c, runs);
        if (n > 1) tp_param_runs(model_arch(&c), &whole, &t, 0, NULL, info);
        else for (int i = 0; i < got; i++) info[i].counted = 1;
        size_t uoff = 0;
        int unit = 0;
        for (int i = 0; i <= got; i++) {
            if (i == got || runs[i].unit != unit) {  // unit `unit` ends: its runs add up to the local unit
                if (uoff != model_unit_size(&c, unit)) {
                    snprintf(why, wl, "tp %d rank %d unit %d: runs add to %zu, the local unit is %zu", n, r, unit, uoff,
                             model_unit_size(&c, unit));
                    return 0;
                }
                if (i == got) break;
                unit = runs[i].unit, uoff = 0;
            }
            if (runs[i].unit_off != uoff || runs[i].len == 0 || runs[i].flat + runs[i].len > total) {
                snprintf(why, wl, "tp %d rank %d run %d: unit offset %zu (expected %zu), length %zu, flat %zu of %zu", n, r, i,
                         runs[i].unit_off, uoff, runs[i].len, runs[i].flat, total);
                return 0;
            }
            uoff += runs[i].len;
            ParamRun **to = info[i].counted ? &counted : &reps;
            size_t *cnt = info[i].counted ? &ncounted : &nrep;
            *to = (ParamRun *)reallocCheck(*to, (*cnt + 1) * sizeof(ParamRun));
            (*to)[(*cnt)++] = runs[i];
        }
        if (unit != model_num_units(&c) - 1) { snprintf(why, wl, "tp %d rank %d: runs end in unit %d", n, r, unit); return 0; }
        free(runs), free(info);
    }
    qsort(counted, ncounted, sizeof(ParamRun), cmp_flat_len);
    size_t at = 0;
    for (size_t i = 0; i < ncounted; i++) {
        if (counted[i].flat != at) {
            snprintf(why, wl, "tp %d: counted runs %s at %zu (next run at %zu)", n, counted[i].flat > at ? "leave a gap" : "overlap",
                     at, counted[i].flat);
            return 0;
        }
        at += counted[i].len;
    }
    if (at != total) { snprintf(why, wl, "tp %d: counted runs end at %zu of %zu", n, at, total); return 0; }
    for (size_t i = 0; i < nrep; i++)
        if (!bsearch(&reps[i], counted, ncounted, sizeof(ParamRun), cmp_flat_len)) {
            snprintf(why, wl, "tp %d: an uncounted run (flat %zu, %zu) is no counted run's replica", n, reps[i].flat, reps[i].len);
            return 0;
        }
    free(counted), free(reps);
    return 1;
}

static void test_tp_runs(void) {
    const char *names[] = {"d2", "d4", "d6", "d12", "d24", "d36", "d48", "d60", "d72", "d84", "llama-d4", "llama-d8",
                           "smollm-135m", "llama-3.2-1b", "tinyllama-1.1b", "qwen2.5-0.5b", "llama-3.1-8b"};
    int nn = (int)(sizeof(names) / sizeof(names[0]));
    for (int i = 0; i < nn + 3; i++) {
        ModelConfig c;
        char what[64];
        if (i < nn) {
            model_config_from_descriptor(names[i], 50257, &c);
            snprintf(what, sizeof(what), "%s", names[i]);
        } else if (i == nn) {  // every option on: grouped-query 4:2, untied, q/k/v bias, QK-norm (test/llama_model.py's)
            c = llama_cfg(64, 256, 256, 2, 4, 2, 128, 32, 256, 0, 1, 1, 0, 1e-5f, 10000.0f, 0, 0, 0, 0);
            snprintf(what, sizeof(what), "Llama GQA 4:2, untied, bias, QK-norm");
        } else {  // ReLU²'s ungated MLP, in each family
            model_config_from_descriptor(i == nn + 1 ? "d4" : "llama-d4", 64, &c);
            char msg[256];
            model_choose_mlp(&c, MLP_RELU2, msg, sizeof(msg));
            snprintf(what, sizeof(what), "%s --mlp relu2", i == nn + 1 ? "d4" : "llama-d4");
        }
        char degrees[32] = "", why[256] = "", msg[256];
        int ok = 1;
        for (int n = 1; n <= 8 && ok; n *= 2) {
            ArchShape s = model_whole_shape(&c);
            TpDims t = {n, 0, c.num_heads, c.num_kv_heads};
            if (tp_shape_error(&s, &t, msg, sizeof(msg))) continue;
            ok = tp_runs_cover(c, n, why, sizeof(why));
            snprintf(degrees + strlen(degrees), sizeof(degrees) - strlen(degrees), "%s%d", degrees[0] ? ", " : "", n);
        }
        check(ok, "--tp runs of %s (%s, NH %d, KV %d) at degrees %s: each rank's runs fill its local units, the counted "
              "ones cover the model once%s%s", what, c.tied ? "tied" : "untied", c.num_heads, c.num_kv_heads, degrees,
              ok ? "" : ": ", why);
    }
}

int main(void) {
    test_tables();
    test_ends();
    test_act_tables();
    test_pieces();
    test_roles();
    test_config_and_header();
    test_tp_runs();
    return check_summary();
}
