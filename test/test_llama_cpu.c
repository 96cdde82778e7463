// test_llama_cpu.c: the Llama family's CPU kernels (cpu/llama.h) against PyTorch autograd through
// transformers' own Llama pieces (test/ref_llama.py, fp32), forward and backward; the key/value-cache decode
// against the full forward, bit for bit; and the architecture tables (arch.h): GPT-2's table derives exactly
// what gpt2.h derives, the Llama presets count the published parameters, the model file header round-trips
// and refuses bad input by file and field.
// usage: test/test_llama_cpu DIR   (DIR holds llama_ref.bin from test/ref_llama.py)
#include "arch.h"
#include "cpu/llama.h"
#include "test/check.h"

// ----------------------------------------------------------------------------
// The reference file: named records.

typedef struct {
    char name[49];
    size_t n;
    float *data;
} Record;
static Record recs[256];
static int nrecs = 0;

static void load_records(const char *path) {
    FILE *fp = fopenCheck(path, "rb");
    char name[48];
    while (fread(name, 1, 48, fp) == 48) {
        if (nrecs == 256) fatal("%s: more than 256 records", path);
        Record *r = &recs[nrecs++];
        memcpy(r->name, name, 48);
        r->name[48] = '\0';
        int64_t n;
        freadCheck(&n, sizeof(n), 1, fp, path);
        r->n = (size_t)n;
        r->data = (float *)mallocCheck(r->n * sizeof(float) + 1);
        freadCheck(r->data, sizeof(float), r->n, fp, path);
    }
    fclose(fp);
}

// The record `name`, which must hold n floats.
static float *ref(const char *name, size_t n) {
    for (int i = 0; i < nrecs; i++)
        if (strcmp(recs[i].name, name) == 0) {
            if (recs[i].n != n) fatal("reference %s holds %zu floats, the test expects %zu", name, recs[i].n, n);
            return recs[i].data;
        }
    fatal("reference has no record %s (rerun test/ref_llama.py)", name);
}

// max |a - b| / max |b|: relative to the tensor's scale, so tiny entries do not dominate
static double rel_err(const float *a, const float *b, size_t n) {
    double maxdiff = 0.0, maxref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > maxdiff || d != d) maxdiff = d != d ? INFINITY : d;
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

#define TOL 1e-5
static void check_close(const char *what, const float *got, const float *want, size_t n) {
    double e = rel_err(got, want, n);
    check(e <= TOL, "%s: relative error %.2e (limit %.0e)", what, e, TOL);
}

static float *fbuf(size_t n) { return (float *)callocCheck(n ? n : 1, sizeof(float)); }
static float *copy_of(const float *src, size_t n) {
    float *p = fbuf(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}

// ----------------------------------------------------------------------------
// Kernels vs PyTorch.

static void test_rmsnorm(void) {
    int N = 6, C = 40;
    const float *x = ref("rms.x", N * C), *w = ref("rms.w", C), *dy = ref("rms.dy", N * C);
    float *y = fbuf(N * C), *rstd = fbuf(N), *dx = fbuf(N * C), *dw = fbuf(C);
    rmsnorm_forward(y, rstd, x, w, N, C, 1e-5f);
    check_close("rmsnorm forward", y, ref("rms.y", N * C), N * C);
    check_close("rmsnorm rstd", rstd, ref("rms.rstd", N), N);
    rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
    check_close("rmsnorm backward dinp", dx, ref("rms.dx", N * C), N * C);
    check_close("rmsnorm backward dweight", dw, ref("rms.dw", C), C);
    // a second backward adds to both (the residual stream's gradient and the weight's)
    rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
    float *twice = copy_of(ref("rms.dx", N * C), N * C);
    for (int i = 0; i < N * C; i++) twice[i] *= 2.0f;
    check_close("rmsnorm backward adds into dinp", dx, twice, N * C);
    free(y), free(rstd), free(dx), free(dw), free(twice);
}

static void test_qknorm(void) {
    int BT = 5, NH = 4, KV = 2, hd = 8, R = (NH + 2 * KV) * hd;
    const float *inp = ref("qkn.inp", BT * R), *qw = ref("qkn.qw", hd), *kw = ref("qkn.kw", hd);
    float *out = fbuf(BT * R), *rstd = fbuf(BT * (NH + KV)), *dinp = fbuf(BT * R), *dqw = fbuf(hd), *dkw = fbuf(hd);
    qknorm_forward(out, rstd, inp, qw, kw, BT, NH, KV, hd, 1e-6f);
    check_close("qk-norm forward (q and k heads normed, v copied)", out, ref("qkn.out", BT * R), BT * R);
    for (int i = 0; i < BT * R; i++) dinp[i] = 123.0f;  // overwritten, not added to
    qknorm_backward(dinp, dqw, dkw, ref("qkn.dout", BT * R), inp, qw, kw, rstd, BT, NH, KV, hd);
    check_close("qk-norm backward dinp", dinp, ref("qkn.dinp", BT * R), BT * R);
    check_close("qk-norm backward dq_norm", dqw, ref("qkn.dqw", hd), hd);
    check_close("qk-norm backward dk_norm", dkw, ref("qkn.dkw", hd), hd);
    free(out), free(rstd), free(dinp), free(dqw), free(dkw);
}

static RopeParams rope_params(float theta, float factor, float low, float high, int orig) {
    RopeParams p = {factor > 0 ? 1 : 0, theta, factor, low, high, orig};
    return p;
}

static void test_rope_table(const char *tag, int hd, int maxT, RopeParams p) {
    int h2 = hd / 2;
    char name[64], what[160];
    float *f = fbuf(h2), *c = fbuf((size_t)maxT * h2), *s = fbuf((size_t)maxT * h2);
    rope_inv_freq(f, hd, &p);
    snprintf(name, sizeof(name), "%s.inv_freq", tag);
    const float *rf = ref(name, h2);
    snprintf(what, sizeof(what), "RoPE %s: inverse frequencies equal LlamaRotaryEmbedding's bit for bit", tag);
    check(memcmp(f, rf, h2 * sizeof(float)) == 0, "%s (max diff %.3g)", what, max_abs_diff(f, rf, h2));
    rope_table(c, s, maxT, hd, &p);
    snprintf(name, sizeof(name), "%s.cos", tag);
    double ec = max_abs_diff(c, ref(name, (size_t)maxT * h2), (size_t)maxT * h2);
    snprintf(name, sizeof(name), "%s.sin", tag);
    double es = max_abs_diff(s, ref(name, (size_t)maxT * h2), (size_t)maxT * h2);
    check(ec <= 1e-6 && es <= 1e-6, "RoPE %s: cos/sin table for positions 0..%d within 1e-6 of transformers' (cos %.2g, "
          "sin %.2g)", tag, maxT - 1, ec, es);
    free(f), free(c), free(s);
}

static void test_rope_apply(const char *tag, int hd, RopeParams p) {
    int B = 2, T = 9, NH = 4, KV = 2, R = (NH + 2 * KV) * hd, n = B * T * R;
    char name[64], what[128];
    float *c = fbuf(T * hd / 2), *s = fbuf(T * hd / 2);
    rope_table(c, s, T, hd, &p);
    snprintf(name, sizeof(name), "%s.qkv", tag);
    float *x = copy_of(ref(name, n), n);
    rope_forward(x, c, s, B, T, NH, KV, hd);
    snprintf(name, sizeof(name), "%s.out", tag);
    snprintf(what, sizeof(what), "RoPE %s forward vs apply_rotary_pos_emb (q and k rotated, v untouched)", tag);
    check_close(what, x, ref(name, n), n);
    snprintf(name, sizeof(name), "%s.dout", tag);
    float *d = copy_of(ref(name, n), n);
    rope_backward(d, c, s, B, T, NH, KV, hd);
    snprintf(name, sizeof(name), "%s.dqkv", tag);
    snprintf(what, sizeof(what), "RoPE %s backward", tag);
    check_close(what, d, ref(name, n), n);
    free(c), free(s), free(x), free(d);
}

static void test_swiglu(void) {
    int N = 7, H = 24;
    float *out = fbuf(N * H), *dinp = fbuf(N * 2 * H);
    const float *inp = ref("swi.inp", N * 2 * H);
    swiglu_forward(out, inp, N, H);
    check_close("SwiGLU forward silu(gate) * up, up's columns first", out, ref("swi.out", N * H), N * H);
    swiglu_backward(dinp, ref("swi.dout", N * H), inp, N, H);
    check_close("SwiGLU backward", dinp, ref("swi.dinp", N * 2 * H), N * 2 * H);
    free(out), free(dinp);
}

static void test_attention(const char *tag, int NH, int KV) {
    int B = 2, T = 9, hd = 16, R = (NH + 2 * KV) * hd, O = NH * hd;
    char name[64], what[160];
    snprintf(name, sizeof(name), "%s.qkv", tag);
    const float *qkv = ref(name, (size_t)B * T * R);
    float *out = fbuf(B * T * O), *att = fbuf(GQA_ATT_SAVED_FLOATS(B, NH, T)), *dqkv = fbuf(B * T * R);
    gqa_attention_forward(out, att, qkv, B, T, NH, KV, hd);
    snprintf(name, sizeof(name), "%s.out", tag);
    const float *rout = ref(name, B * T * O);
    snprintf(what, sizeof(what), "GQA %d:%d (NH %d, KV %d) forward", NH / KV, 1, NH, KV);
    check_close(what, out, rout, B * T * O);
    snprintf(name, sizeof(name), "%s.att", tag);
    snprintf(what, sizeof(what), "GQA NH %d KV %d saved softmax", NH, KV);
    check_close(what, att, ref(name, GQA_ATT_SAVED_FLOATS(B, NH, T)), GQA_ATT_SAVED_FLOATS(B, NH, T));
    for (int i = 0; i < B * T * R; i++) dqkv[i] = 7.0f;  // overwritten, not added to
    snprintf(name, sizeof(name), "%s.dout", tag);
    gqa_attention_backward(dqkv, ref(name, B * T * O), qkv, att, B, T, NH, KV, hd);
    snprintf(name, sizeof(name), "%s.dqkv", tag);
    snprintf(what, sizeof(what), "GQA NH %d KV %d backward dq, dk, dv (dk/dv summed over the group)", NH, KV);
    check_close(what, dqkv, ref(name, B * T * R), B * T * R);
    // decode: each sequence token by token against a cache of the key/value heads only
    float *kc = fbuf((size_t)T * KV * hd), *vc = fbuf((size_t)T * KV * hd), *o = fbuf(O);
    int same = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = qkv + ((long)b * T + t) * R;
            kv_cache_store(kc, vc, row, t, NH, KV, hd);
            gqa_attention_decode(o, row, kc, vc, t, NH, KV, hd);
            if (memcmp(o, out + ((long)b * T + t) * O, O * sizeof(float)) != 0) same = 0;
        }
    check(same, "GQA NH %d KV %d decode with a %d-head cache: every step bit-identical to the full forward's row", NH,
          KV, KV);
    snprintf(what, sizeof(what), "GQA NH %d KV %d decode's last token vs PyTorch", NH, KV);
    check_close(what, o, rout + ((long)(B - 1) * T + T - 1) * O, O);
    free(out), free(att), free(dqkv), free(kc), free(vc), free(o);
}

// Qwen 3's attention core: QK-norm, RoPE (llama3 scaling), GQA 3:1, and the gradients back through all three.
static void test_chain(void) {
    int B = 2, T = 7, NH = 6, KV = 2, hd = 8, R = (NH + 2 * KV) * hd, O = NH * hd, n = B * T * R;
    const float *qkv = ref("chain.qkv", n), *qw = ref("chain.qw", hd), *kw = ref("chain.kw", hd);
    RopeParams p = rope_params(500000.0f, 8.0f, 1.0f, 4.0f, 4);
    float *c = fbuf(T * hd / 2), *s = fbuf(T * hd / 2);
    rope_table(c, s, T, hd, &p);
    float *normed = fbuf(n), *rstd = fbuf(B * T * (NH + KV)), *out = fbuf(B * T * O), *att = fbuf(B * NH * T * T);
    qknorm_forward(normed, rstd, qkv, qw, kw, B * T, NH, KV, hd, 1e-6f);
    rope_forward(normed, c, s, B, T, NH, KV, hd);
    gqa_attention_forward(out, att, normed, B, T, NH, KV, hd);
    check_close("QK-norm + RoPE + GQA 3:1 forward", out, ref("chain.out", B * T * O), B * T * O);
    float *d = fbuf(n), *dinp = fbuf(n), *dqw = fbuf(hd), *dkw = fbuf(hd);
    gqa_attention_backward(d, ref("chain.dout", B * T * O), normed, att, B, T, NH, KV, hd);
    rope_backward(d, c, s, B, T, NH, KV, hd);
    qknorm_backward(dinp, dqw, dkw, d, qkv, qw, kw, rstd, B * T, NH, KV, hd);
    check_close("QK-norm + RoPE + GQA backward dqkv", dinp, ref("chain.dqkv", n), n);
    check_close("QK-norm + RoPE + GQA backward dq_norm", dqw, ref("chain.dqw", hd), hd);
    check_close("QK-norm + RoPE + GQA backward dk_norm", dkw, ref("chain.dkw", hd), hd);
    free(c), free(s), free(normed), free(rstd), free(out), free(att), free(d), free(dinp), free(dqw), free(dkw);
}

// ----------------------------------------------------------------------------
// The architecture tables.

// GPT-2's table against gpt2.h: sizes, count, units, runs (flat offset, length, unit, offset in unit, decay),
// in one check per config.
static void test_gpt2_table(const char *what, GPT2Config c) {
    ArchShape s;
    gpt2_arch_shape(&c, &s);
    size_t want[NUM_PARAMETER_TENSORS], got[ARCH_MAX_PARAMS];
    gpt2_param_sizes(&c, want);
    arch_param_sizes(&ARCH_GPT2, &s, got);
    int ok = ARCH_GPT2.num_params == NUM_PARAMETER_TENSORS, bad = -1;
    for (int k = 0; ok && k < NUM_PARAMETER_TENSORS; k++)
        if (got[k] != want[k] || strcmp(ARCH_GPT2.params[k].name, PARAM_NAMES[k]) != 0 ||
            ARCH_GPT2.params[k].decayed != PARAM_DECAYED[k]) ok = 0, bad = k;
    if (arch_num_params(&ARCH_GPT2, &s) != gpt2_num_params(&c)) ok = 0;
    if (arch_num_units(&s) != gpt2_num_units(&c)) ok = 0;
    for (int u = 0; u < gpt2_num_units(&c); u++) if (arch_unit_size(&ARCH_GPT2, &s, u) != gpt2_unit_size(&c, u)) ok = 0;
    size_t nr = 4 + (size_t)NUM_LAYER_PIECES * c.num_layers;
    ParamRun *a = (ParamRun *)callocCheck(nr, sizeof(ParamRun)), *b = (ParamRun *)callocCheck(nr, sizeof(ParamRun));
    int na = gpt2_param_runs(&c, a), nb = arch_param_runs(&ARCH_GPT2, &s, b);
    if (na != nb) ok = 0;
    for (int i = 0; ok && i < na; i++)
        if (a[i].flat != b[i].flat || a[i].len != b[i].len || a[i].unit != b[i].unit || a[i].unit_off != b[i].unit_off ||
            a[i].decayed != b[i].decayed) ok = 0;
    check(ok, "GPT-2 table = gpt2.h (%s: L %d, C %d, V %d, maxT %d): sizes, names, decay, count, %d unit sizes, %d runs%s%s",
          what, c.num_layers, c.channels, c.vocab_size, c.max_seq_len, gpt2_num_units(&c), na, bad >= 0 ? "; first "
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
    GPT2Config d12, d2, odd, d6;
    gpt2_config_from_descriptor("d12", 50257, &d12);
    gpt2_config_from_descriptor("d2", 50257, &d2);
    gpt2_config_from_descriptor("d6", 65, &d6);
    d6.max_seq_len = 256;
    odd = (GPT2Config){64, 1000, 1024, 3, 4, 48};
    test_gpt2_table("d12", d12);
    test_gpt2_table("d2", d2);
    test_gpt2_table("d6, T 256, V 65", d6);
    test_gpt2_table("L 3, C 48", odd);

    // the initialisation from the table draws gpt2_init_random's numbers in its order
    ArchShape s;
    gpt2_arch_shape(&d2, &s);
    size_t N = gpt2_num_params(&d2);
    float *a = fbuf(N), *b = fbuf(N);
    gpt2_init_random(&d2, a, 42);
    arch_init_random(&ARCH_GPT2, &s, b, 42);
    check(memcmp(a, b, N * sizeof(float)) == 0, "GPT-2 table's initialisation = gpt2_init_random bit for bit (d2, %zu "
          "parameters)", N);
    free(a), free(b);

    // FLOPs: the trainer's 6N + 6LCT and report.h's matmul weights 12LCC + VpC
    gpt2_arch_shape(&d12, &s);
    double L = d12.num_layers, C = d12.channels, Vp = d12.padded_vocab_size, T = 1024;
    double f = arch_flops_per_token(&ARCH_GPT2, &s, 1024);
    double want = 6.0 * gpt2_num_params(&d12) + 6.0 * L * C * T;
    double mm = (double)arch_matmul_params(&ARCH_GPT2, &s), want_mm = 12.0 * L * C * C + Vp * C;
    check(f == want && mm == want_mm, "GPT-2 table's FLOPs per token %.6g (trainer.h: %.6g) and matmul weights %.0f "
          "(report.h: %.0f)", f, want, mm, want_mm);

    // the Llama presets count what transformers counts
    const size_t published[4] = {134515008, 1235814400, 1100048384, 494032768};
    for (int i = 0; i < 4; i++) {
        LlamaConfig lc;
        llama_preset(LLAMA_PRESETS[i], &lc);
        char msg[512];
        const char *err = llama_config_error(&lc, msg, sizeof(msg));
        llama_arch_shape(&lc, &s);
        size_t n = arch_num_params_unpadded(&ARCH_LLAMA, &s);
        check(n == published[i] && !err && runs_partition(&ARCH_LLAMA, &s),
              "preset %s: %zu parameters (published %zu), config valid, runs partition the %zu stored", LLAMA_PRESETS[i],
              n, published[i], arch_num_params(&ARCH_LLAMA, &s));
    }
    int h1 = llama_ffn_hidden(2048, 1024, 1.4), h2 = llama_ffn_hidden(4096, 1024, 1.3), h3 = llama_ffn_hidden(2048, 256, 0);
    check(h1 == 8192 && h2 == 14336 && h3 == 5632, "SwiGLU hidden from multiple_of and ffn_dim_multiplier: Llama 3.2 1B "
          "%d (8192), Llama 3.1 8B %d (14336), TinyLlama %d (5632)", h1, h2, h3);

    // every option combination: the optional tensors come and go, the runs still partition the buffer
    LlamaConfig t = {64, 300, 384, 2, 4, 2, 32, 8, 40, 1, 0, 0, 0, 1e-5f, 10000.0f, 0, 0, 0, 0};
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
}

static void test_config_and_header(void) {
    char msg[512];
    LlamaConfig c;
    llama_preset("smollm-135m", &c);
    c.num_kv_heads = 2;  // 9 heads
    const char *e = llama_config_error(&c, msg, sizeof(msg));
    check(e && strstr(e, "n_head 9") && strstr(e, "n_kv_head 2"), "refused: n_head 9 with n_kv_head 2 (%s)", e ? e : "accepted");
    llama_preset("smollm-135m", &c);
    c.head_dim = 63;
    e = llama_config_error(&c, msg, sizeof(msg));
    check(e && strstr(e, "head_dim 63") && strstr(e, "RoPE"), "refused: odd head_dim for RoPE (%s)", e ? e : "accepted");

    // header round trip: every field, floats by their bits
    LlamaConfig w, r;
    llama_preset("llama-3.2-1b", &w);
    w.qk_norm = 1;
    w.norm_eps = 1e-6f;
    int32_t h[256];
    llama_header_write(&w, h);
    e = llama_header_read(h, "m.bin", &r, msg, sizeof(msg));
    check(!e && memcmp(&w, &r, sizeof(w)) == 0 && h[0] == LLAMA_MAGIC && h[1] == 1 && h[15] == f32_bits(1e-6f) &&
          h[16] == 0x48f42400, "Llama header round trip: every field (rope_theta 500000 stored as 0x%08x)%s%s", h[16],
          e ? ": " : "", e ? e : "");
    struct { int slot, value; const char *want; } bad[] = {
        {0, 20240326, "m.bin: bad magic 20240326 in slot 0"},
        {0, 20240803, "llm.c's llama3 branch"},
        {1, 2, "m.bin: version 2 in slot 1, expected 1"},
        {37, 5, "m.bin: reserved header slot 37 is 5"},
        {4, 128257, "m.bin: padded_vocab_size 128257 in slot 4"},
        {7, 5, "m.bin: n_head 32 is not a multiple of n_kv_head 5"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        llama_header_write(&w, h);
        h[bad[i].slot] = bad[i].value;
        e = llama_header_read(h, "m.bin", &r, msg, sizeof(msg));
        check(e && strstr(e, bad[i].want), "header slot %d = %d refused naming it: %s", bad[i].slot, bad[i].value,
              e ? e : "accepted");
    }
}

int main(int argc, char **argv) {
    if (argc != 2) fatal("usage: %s DIR (DIR holds llama_ref.bin from test/ref_llama.py)", argv[0]);
    char path[4096];
    snprintf(path, sizeof(path), "%s/llama_ref.bin", argv[1]);
    load_records(path);
    test_rmsnorm();
    test_qknorm();
    test_rope_table("rope_default", 64, 4096, rope_params(10000.0f, 0, 0, 0, 0));
    test_rope_table("rope_llama3", 64, 16384, rope_params(500000.0f, 32.0f, 1.0f, 4.0f, 8192));
    test_rope_apply("ropea", 16, rope_params(10000.0f, 0, 0, 0, 0));
    test_rope_apply("ropes", 16, rope_params(500000.0f, 8.0f, 1.0f, 4.0f, 4));
    test_swiglu();
    test_attention("gqa41", 8, 2);
    test_attention("gqa11", 4, 4);
    test_attention("mqa", 4, 1);
    test_chain();
    test_tables();
    test_config_and_header();
    return check_summary();
}
