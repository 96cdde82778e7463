// test_llama_cpu.c: the Llama family's CPU kernels (cpu/llama.h) against PyTorch autograd through
// transformers' own Llama pieces (test/ref_llama.py, fp32), forward and backward; the key/value-cache decode
// against the full forward, bit for bit; and the architecture tables (arch.h): GPT-2's table derives exactly
// what gpt2.h derives, the Llama presets count the published parameters, the model file header round-trips
// and refuses bad input by file and field.
// usage: test/test_llama_cpu DIR   (DIR holds llama_ref.bin from test/ref_llama.py)
#define TESTING  // the CPU build without its main, for model.h's activation layout
#include "train_gpt.c"
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

static void test_relu2(void) {
    long N = 7 * 24;
    float *out = fbuf(N), *dinp = fbuf(N);
    const float *inp = ref("r2.inp", N);
    relu2_forward(out, inp, N);
    check_close("ReLU² forward relu(x)^2 (cpu/gelu.h)", out, ref("r2.out", N), N);
    relu2_backward(dinp, inp, ref("r2.dout", N), N);
    check_close("ReLU² backward 2 relu(x) dout", dinp, ref("r2.dinp", N), N);
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

// With KV = NH the GQA kernels are GPT-2's attention (train_gpt.c) bit for bit, forward, saved softmax, backward and
// decode: the block written once can run GPT-2 on them without moving a number.
static void test_gqa_is_gpt2_attention(void) {
    int B = 2, T = 11, NH = 4, hd = 16, C = NH * hd, n = B * T * 3 * C;
    uint64_t rng = 77;
    float *qkv = fbuf(n), *dout = fbuf(B * T * C);
    for (int i = 0; i < n; i++) qkv[i] = 2.0f * random_f32(&rng) - 1.0f;
    for (int i = 0; i < B * T * C; i++) dout[i] = 2.0f * random_f32(&rng) - 1.0f;
    float *o1 = fbuf(B * T * C), *o2 = fbuf(B * T * C), *a1 = fbuf(B * NH * T * T), *a2 = fbuf(B * NH * T * T);
    float *d1 = fbuf(n), *d2 = fbuf(n), *dec1 = fbuf(C), *dec2 = fbuf(C), *kc = fbuf(T * C), *vc = fbuf(T * C);
    attention_forward(o1, a1, qkv, B, T, C, NH);
    gqa_attention_forward(o2, a2, qkv, B, T, NH, NH, hd);
    attention_backward(d1, dout, qkv, o1, a1, B, T, C, NH);
    gqa_attention_backward(d2, dout, qkv, a2, B, T, NH, NH, hd);
    for (int t = 0; t < T; t++) kv_cache_store(kc, vc, qkv + (long)t * 3 * C, t, NH, NH, hd);
    attention_decode(dec1, qkv, T - 1, C, NH);
    gqa_attention_decode(dec2, qkv + (long)(T - 1) * 3 * C, kc, vc, T - 1, NH, NH, hd);
    int same = !memcmp(o1, o2, B * T * C * sizeof(float)) && !memcmp(a1, a2, B * NH * T * T * sizeof(float)) &&
               !memcmp(d1, d2, n * sizeof(float)) && !memcmp(dec1, dec2, C * sizeof(float));
    check(same, "GQA with KV = NH is GPT-2's attention_forward/backward/decode bit for bit (NH %d, hd %d, T %d)", NH, hd, T);
    free(qkv), free(dout), free(o1), free(o2), free(a1), free(a2), free(d1), free(d2), free(dec1), free(dec2), free(kc), free(vc);
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
// A whole model from the kernels and the table's offsets, against transformers' LlamaForCausalLM /
// Qwen2ForCausalLM: logits, loss and every parameter's gradient. Plain loops for the matmuls (the model is
// tiny); the point is the layout (wqkv's row blocks, wfc's up-then-gate halves, tied or untied head) and the
// composition of the kernels, which model.h writes once (test/test_llama_train.py checks the trainer's).

// out (N, OC) = inp (N, IC) @ w (OC, IC)^T + b
static void mm_fwd(float *out, const float *inp, const float *w, const float *b, int N, int IC, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            float s = b ? b[o] : 0.0f;
            for (int c = 0; c < IC; c++) s += inp[(long)n * IC + c] * w[(long)o * IC + c];
            out[(long)n * OC + o] = s;
        }
}
// dinp = dout @ w (overwritten); dw += dout^T inp; db += column sums
static void mm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w, int N, int IC,
                   int OC) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < IC; c++) {
            float s = 0.0f;
            for (int o = 0; o < OC; o++) s += dout[(long)n * OC + o] * w[(long)o * IC + c];
            dinp[(long)n * IC + c] = s;
        }
    for (int o = 0; o < OC; o++) {
        float sb = 0.0f;
        for (int n = 0; n < N; n++) {
            float d = dout[(long)n * OC + o];
            sb += d;
            for (int c = 0; c < IC; c++) dw[(long)o * IC + c] += d * inp[(long)n * IC + c];
        }
        if (db) db[o] += sb;
    }
}

// A Llama-family config from its fields in the order of the family's file header (slots 2..20).
static ModelConfig llama_cfg(int maxT, int V, int Vp, int L, int NH, int KV, int C, int hd, int H, int tied, int qkv_bias,
                             int qk_norm, int scaling, float eps, float theta, float factor, float low, float high, int orig) {
    ModelConfig c;
    llama_defaults(&c);
    c.max_seq_len = maxT, c.vocab_size = V, c.padded_vocab_size = Vp, c.num_layers = L, c.num_heads = NH;
    c.num_kv_heads = KV, c.channels = C, c.head_dim = hd, c.ffn_hidden = H, c.tied = tied, c.qkv_bias = qkv_bias;
    c.qk_norm = qk_norm, c.norm_eps = eps;
    c.rope = (RopeParams){scaling, theta, factor, low, high, orig};
    return c;
}

// Pointer to layer l of tensor `name` in a flat buffer (NULL when the option leaves it out).
static float *tensor_at(float *base, const ArchShape *s, const char *name, int l) {
    int k = arch_find(&ARCH_LLAMA, name);
    if (k < 0) fatal("no tensor %s", name);
    const ArchParam *p = &ARCH_LLAMA.params[k];
    size_t sz = arch_tensor_size(p, s);
    if (sz == 0) return NULL;
    return base + arch_tensor_offset(&ARCH_LLAMA, s, k) + (p->per_layer ? (size_t)l * (sz / s->num_layers) : 0);
}

static void test_model(const char *tag, int NH, int KV, int tied, int qkv_bias) {
    ModelConfig c = llama_cfg(64, 200, 256, 2, NH, KV, 32, 8, 48, tied, qkv_bias, 0, qkv_bias ? 0 : 1, 1e-5f, 10000.0f,
                     qkv_bias ? 0.0f : 8.0f, qkv_bias ? 0.0f : 1.0f, qkv_bias ? 0.0f : 4.0f, qkv_bias ? 0 : 4);
    char msg[512], name[64], what[200];
    if (llama_config_error(&c, msg, sizeof(msg))) fatal("%s", msg);
    ArchShape s;
    llama_arch_shape(&c, &s);
    int B = 2, T = 8, L = c.num_layers, C = c.channels, hd = c.head_dim, H = c.ffn_hidden, V = c.vocab_size;
    int Vp = c.padded_vocab_size, R = (NH + 2 * KV) * hd, A = NH * hd, BT = B * T;
    size_t P = arch_num_params(&ARCH_LLAMA, &s);
    snprintf(name, sizeof(name), "%s.params", tag);
    float *params = ref(name, P), *grads = fbuf(P);
    snprintf(name, sizeof(name), "%s.tokens", tag);
    const float *tokf = ref(name, (size_t)B * (T + 1));
    int *inp = (int *)mallocCheck(BT * sizeof(int)), *tgt = (int *)mallocCheck(BT * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) inp[b * T + t] = (int)tokf[b * (T + 1) + t], tgt[b * T + t] = (int)tokf[b * (T + 1) + t + 1];
    RopeParams rp = c.rope;
    float *cs = fbuf(T * hd / 2), *sn = fbuf(T * hd / 2);
    rope_table(cs, sn, T, hd, &rp);
    // activations per layer: the residual in, its norm, qkv after RoPE, attention, the residual mid, its norm, fc, swiglu
    float *res = fbuf((size_t)(L + 1) * BT * C), *ln1 = fbuf((size_t)L * BT * C), *r1 = fbuf(L * BT), *qkv = fbuf((size_t)L * BT * R);
    float *att = fbuf((size_t)L * B * NH * T * T), *ao = fbuf((size_t)L * BT * A), *mid = fbuf((size_t)L * BT * C);
    float *ln2 = fbuf((size_t)L * BT * C), *r2 = fbuf(L * BT), *fc = fbuf((size_t)L * BT * 2 * H), *sw = fbuf((size_t)L * BT * H);
    float *lnf = fbuf(BT * C), *rf = fbuf(BT), *logits = fbuf((size_t)BT * Vp), *tmp = fbuf((size_t)BT * (C > R ? (2 * H > R ? 2 * H : R) : C));
    const float *wte = tensor_at(params, &s, "wte", 0), *head = tied ? wte : tensor_at(params, &s, "lm_head", 0);
    for (int i = 0; i < BT; i++) memcpy(res + (long)i * C, wte + (long)inp[i] * C, C * sizeof(float));
    for (int l = 0; l < L; l++) {
        float *x = res + (long)l * BT * C, *xo = res + (long)(l + 1) * BT * C, *m = mid + (long)l * BT * C;
        float *q = qkv + (long)l * BT * R;
        rmsnorm_forward(ln1 + (long)l * BT * C, r1 + l * BT, x, tensor_at(params, &s, "attn_norm", l), BT, C, c.norm_eps);
        mm_fwd(q, ln1 + (long)l * BT * C, tensor_at(params, &s, "wqkv", l), tensor_at(params, &s, "bqkv", l), BT, C, R);
        rope_forward(q, cs, sn, B, T, NH, KV, hd);
        gqa_attention_forward(ao + (long)l * BT * A, att + (long)l * B * NH * T * T, q, B, T, NH, KV, hd);
        mm_fwd(tmp, ao + (long)l * BT * A, tensor_at(params, &s, "wo", l), NULL, BT, A, C);
        for (long i = 0; i < (long)BT * C; i++) m[i] = x[i] + tmp[i];
        rmsnorm_forward(ln2 + (long)l * BT * C, r2 + l * BT, m, tensor_at(params, &s, "mlp_norm", l), BT, C, c.norm_eps);
        mm_fwd(fc + (long)l * BT * 2 * H, ln2 + (long)l * BT * C, tensor_at(params, &s, "wfc", l), NULL, BT, C, 2 * H);
        swiglu_forward(sw + (long)l * BT * H, fc + (long)l * BT * 2 * H, BT, H);
        mm_fwd(tmp, sw + (long)l * BT * H, tensor_at(params, &s, "wproj", l), NULL, BT, H, C);
        for (long i = 0; i < (long)BT * C; i++) xo[i] = m[i] + tmp[i];
    }
    rmsnorm_forward(lnf, rf, res + (long)L * BT * C, tensor_at(params, &s, "final_norm", 0), BT, C, c.norm_eps);
    mm_fwd(logits, lnf, head, NULL, BT, C, Vp);
    // the loss (mean cross-entropy over the real vocabulary) and its gradient, the logits' rows reused
    float *lg = fbuf((size_t)BT * V), *dlogits = fbuf((size_t)BT * Vp);
    double loss = 0.0;
    for (int i = 0; i < BT; i++) {
        const float *z = logits + (long)i * Vp;
        float mx = -INFINITY, sum = 0.0f;
        for (int v = 0; v < V; v++) { lg[(long)i * V + v] = z[v]; if (z[v] > mx) mx = z[v]; }
        for (int v = 0; v < V; v++) sum += expf(z[v] - mx);
        loss += -(z[tgt[i]] - mx - logf(sum)) / BT;
        for (int v = 0; v < V; v++) dlogits[(long)i * Vp + v] = (expf(z[v] - mx) / sum - (v == tgt[i])) / BT;
    }
    snprintf(name, sizeof(name), "%s.logits", tag);
    snprintf(what, sizeof(what), "%s: logits vs transformers", tag);
    check_close(what, lg, ref(name, (size_t)BT * V), (size_t)BT * V);
    snprintf(name, sizeof(name), "%s.loss", tag);
    float lossf = (float)loss;
    snprintf(what, sizeof(what), "%s: loss %.6f vs transformers", tag, lossf);
    check_close(what, &lossf, ref(name, 1), 1);
    // backward
    float *dres = fbuf(BT * C), *dm = fbuf(BT * C), *dsw = fbuf(BT * H), *dfc = fbuf(BT * 2 * H), *dln = fbuf(BT * C);
    float *dao = fbuf(BT * A), *dq = fbuf(BT * R);
    float *dwte = tensor_at(grads, &s, "wte", 0), *dhead = tied ? dwte : tensor_at(grads, &s, "lm_head", 0);
    mm_bwd(dln, dhead, NULL, dlogits, lnf, head, BT, C, Vp);
    rmsnorm_backward(dres, tensor_at(grads, &s, "final_norm", 0), dln, res + (long)L * BT * C,
                     tensor_at(params, &s, "final_norm", 0), rf, BT, C);
    for (int l = L - 1; l >= 0; l--) {
        float *m = mid + (long)l * BT * C;
        mm_bwd(dsw, tensor_at(grads, &s, "wproj", l), NULL, dres, sw + (long)l * BT * H, tensor_at(params, &s, "wproj", l), BT, H, C);
        swiglu_backward(dfc, dsw, fc + (long)l * BT * 2 * H, BT, H);
        mm_bwd(dln, tensor_at(grads, &s, "wfc", l), NULL, dfc, ln2 + (long)l * BT * C, tensor_at(params, &s, "wfc", l), BT, C, 2 * H);
        memcpy(dm, dres, BT * C * sizeof(float));  // the residual's gradient, plus the MLP branch's
        rmsnorm_backward(dm, tensor_at(grads, &s, "mlp_norm", l), dln, m, tensor_at(params, &s, "mlp_norm", l), r2 + l * BT, BT, C);
        mm_bwd(dao, tensor_at(grads, &s, "wo", l), NULL, dm, ao + (long)l * BT * A, tensor_at(params, &s, "wo", l), BT, A, C);
        gqa_attention_backward(dq, dao, qkv + (long)l * BT * R, att + (long)l * B * NH * T * T, B, T, NH, KV, hd);
        rope_backward(dq, cs, sn, B, T, NH, KV, hd);
        mm_bwd(dln, tensor_at(grads, &s, "wqkv", l), tensor_at(grads, &s, "bqkv", l), dq, ln1 + (long)l * BT * C,
               tensor_at(params, &s, "wqkv", l), BT, C, R);
        memcpy(dres, dm, BT * C * sizeof(float));
        rmsnorm_backward(dres, tensor_at(grads, &s, "attn_norm", l), dln, res + (long)l * BT * C,
                         tensor_at(params, &s, "attn_norm", l), r1 + l * BT, BT, C);
    }
    for (int i = 0; i < BT; i++)  // serial: two tokens may share a row
        for (int j = 0; j < C; j++) dwte[(long)inp[i] * C + j] += dres[(long)i * C + j];
    snprintf(name, sizeof(name), "%s.grads", tag);
    const float *rg = ref(name, P);
    double worst = 0.0;
    const char *worst_name = "";
    for (int k = 0; k < ARCH_LLAMA.num_params; k++) {
        size_t n = arch_tensor_size(&ARCH_LLAMA.params[k], &s), off = arch_tensor_offset(&ARCH_LLAMA, &s, k);
        if (n == 0) continue;
        double e = rel_err(grads + off, rg + off, n);
        if (e > worst || e != e) worst = e, worst_name = ARCH_LLAMA.params[k].name;
    }
    check(worst <= TOL, "%s: every parameter's gradient vs transformers (worst %s, relative error %.2e)", tag, worst_name, worst);
    float *bufs[] = {grads, cs, sn, res, ln1, r1, qkv, att, ao, mid, ln2, r2, fc, sw, lnf, rf, logits, tmp, lg, dlogits,
                     dres, dm, dsw, dfc, dln, dao, dq};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]);
    free(inp), free(tgt);
}

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
    const size_t published[4] = {134515008, 1235814400, 1100048384, 494032768};
    for (int i = 0; i < 4; i++) {
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

    // the file order of LLAMA_FORMAT.md with every option on (the model tests above cover the orders without
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
    check(order_ok, "Llama table: LLAMA_FORMAT.md's tensor order, offsets and sizes with every option on");
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
        Model *m = model_create(&cs[f], 1, 4, 0, 0, cs[f].num_layers, 1, 0);
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
        if (model_memory_plan(&c, B, T, r, c.num_layers, 1, 1, 0).activations != want) ok = 0;
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
    w.mlp = MLP_SWIGLU, w.ffn_hidden = 8192;
    struct { int slot, value; const char *want; } bad[] = {
        {0, 20240326, "m.bin: bad magic 20240326 in slot 0"},
        {0, 20240803, "llm.c's llama3 branch"},
        {1, 2, "m.bin: version 2 in slot 1, expected 1"},
        {37, 5, "m.bin: reserved header slot 37 is 5"},
        {4, 128257, "m.bin: padded_vocab_size 128257 in slot 4"},
        {7, 5, "m.bin: n_head 32 is not a multiple of n_kv_head 5"},
        {21, 2, "m.bin: MLP activation 2 in slot 21, expected 0 (SwiGLU) or 1 (ReLU²)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        llama_header_write(&w, h);
        h[bad[i].slot] = bad[i].value;
        e = llama_header_read(h, "m.bin", &r, &bf16, msg, sizeof(msg));
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
    test_relu2();
    test_attention("gqa41", 8, 2);
    test_attention("gqa11", 4, 4);
    test_attention("mqa", 4, 1);
    test_chain();
    test_gqa_is_gpt2_attention();
    test_model("m_gqa_tied", 4, 2, 1, 0);
    test_model("m_mha_untied", 4, 4, 0, 0);
    test_model("m_mqa_qwen2", 4, 1, 1, 1);
    test_tables();
    test_act_tables();
    test_pieces();
    test_roles();
    test_config_and_header();
    return check_summary();
}
