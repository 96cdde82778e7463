// test_llama_cpu.c: the Llama family's CPU kernels (cpu/norms.h, cpu/rope.h, cpu/activations.h) against PyTorch autograd through
// transformers' own Llama pieces (test/ref_llama.py, fp32), forward and backward; the key/value-cache decode
// against the full forward, bit for bit. The architecture tables have their own test (test/test_arch.c).
// usage: test/test_llama_cpu DIR   (DIR holds llama_ref.bin from test/ref_llama.py)
#define TESTING  // the CPU build without its main, for model.h's activation layout
#include "train_gpt.c"
#include "arch/arch.h"
#include "cpu/rope.h"
#include "test/check.h"
#include "test/llama_cfg.h"

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

// A gated MLP (cpu/activations.h's glu_forward/glu_backward under one gate) against test/ref_llama.py's glu_case TAG:
// out = act(gate) * up over the packed (up | gate) input, and the backward's (up | gate) gradient.
typedef void (*GluFwd)(float *out, const float *inp, int N, int H);
typedef void (*GluBwd)(float *dinp, const float *dout, const float *inp, int N, int H);
static void test_glu(const char *name, const char *act, const char *tag, GluFwd fwd, GluBwd bwd) {
    int N = 7, H = 24;
    char key[64], what[128];
    float *out = fbuf(N * H), *dinp = fbuf(N * 2 * H);
    snprintf(key, sizeof(key), "%s.inp", tag);
    const float *inp = ref(key, N * 2 * H);
    fwd(out, inp, N, H);
    snprintf(key, sizeof(key), "%s.out", tag);
    snprintf(what, sizeof(what), "%s forward %s(gate) * up, up's columns first", name, act);
    check_close(what, out, ref(key, N * H), N * H);
    snprintf(key, sizeof(key), "%s.dout", tag);
    bwd(dinp, ref(key, N * H), inp, N, H);
    snprintf(key, sizeof(key), "%s.dinp", tag);
    snprintf(what, sizeof(what), "%s backward (up | gate)", name);
    check_close(what, dinp, ref(key, N * 2 * H), N * 2 * H);
    free(out), free(dinp);
}

static void test_relu2(void) {
    long N = 7 * 24;
    float *out = fbuf(N), *dinp = fbuf(N);
    const float *inp = ref("r2.inp", N);
    relu2_forward(out, inp, N);
    check_close("ReLU² forward relu(x)^2 (cpu/activations.h)", out, ref("r2.out", N), N);
    relu2_backward(dinp, inp, ref("r2.dout", N), N);
    check_close("ReLU² backward 2 relu(x) dout", dinp, ref("r2.dinp", N), N);
    free(out), free(dinp);
}

// Attention under the masks of arch/attn_mask.h (issue 49) against float64 PyTorch with explicit boolean masks
// (test/ref_llama.py's masked_attention_case): the forward, the saved softmax (zero outside the mask), the backward,
// each within 1e-6 of the reference's scale; the visible pairs the FLOPs count, and which 8x8 tiles a kernel may skip,
// against the reference's own mask (its softmax's nonzeros); and with a window alone, the decode over the window's
// cache rows bit for bit the forward's row.
#define MASK_TOL 1e-6
static void test_masked_attention(const char *tag, int docs, int window, int NH, int KV, int hd) {
    int B = 2, T = 37, R = (NH + 2 * KV) * hd, O = NH * hd;
    char name[64], what[200];
    int *ds = NULL;
    if (docs) {
        snprintf(name, sizeof(name), "%s.doc_start", tag);
        const float *f = ref(name, (size_t)B * T);
        ds = (int *)mallocCheck((size_t)B * T * sizeof(int));
        for (int i = 0; i < B * T; i++) ds[i] = (int)f[i];
    }
    AttnMask m = {window, ds};
    snprintf(name, sizeof(name), "%s.qkv", tag);
    const float *qkv = ref(name, (size_t)B * T * R);
    size_t na = GQA_ATT_SAVED_FLOATS(B, NH, T);
    float *out = fbuf(B * T * O), *att = fbuf(na), *dqkv = fbuf(B * T * R);
    for (size_t i = 0; i < na; i++) att[i] = 7.0f;  // the masked entries must be written zero
    gqa_attention_forward(out, att, qkv, B, T, NH, KV, hd, &m);
    double e;
    snprintf(name, sizeof(name), "%s.out", tag);
    e = rel_err(out, ref(name, B * T * O), B * T * O);
    check(e <= MASK_TOL, "%s (NH %d, KV %d, window %d%s) forward vs float64 masked attention: relative error %.2e (limit %.0e)",
          tag, NH, KV, window, docs ? ", documents" : "", e, MASK_TOL);
    snprintf(name, sizeof(name), "%s.att", tag);
    const float *ratt = ref(name, na);
    e = rel_err(att, ratt, na);
    check(e <= MASK_TOL, "%s saved softmax (zero outside the mask): relative error %.2e", tag, e);
    for (int i = 0; i < B * T * R; i++) dqkv[i] = 7.0f;  // overwritten, not added to
    snprintf(name, sizeof(name), "%s.dout", tag);
    gqa_attention_backward(dqkv, ref(name, B * T * O), qkv, att, B, T, NH, KV, hd, &m);
    snprintf(name, sizeof(name), "%s.dqkv", tag);
    e = rel_err(dqkv, ref(name, B * T * R), B * T * R);
    check(e <= MASK_TOL, "%s backward dq, dk, dv: relative error %.2e (limit %.0e)", tag, e, MASK_TOL);
    snprintf(name, sizeof(name), "%s.pairs", tag);
    const float *pairs = ref(name, B);
    int pairs_ok = 1, tiles_ok = 1, tiles = 0, empty = 0;
    for (int b = 0; b < B; b++) {
        if (attn_mask_visible_pairs(&m, b, T) != (long long)pairs[b]) pairs_ok = 0;
        for (int q0 = 0; q0 < T; q0 += 8)
            for (int k0 = 0; k0 < T; k0 += 8) {
                int q1 = q0 + 8 < T ? q0 + 8 : T, k1 = k0 + 8 < T ? k0 + 8 : T, any = 0;
                for (int q = q0; q < q1; q++)
                    for (int k = k0; k < k1; k++) any |= ratt[(((size_t)b * NH) * T + q) * T + k] != 0.0f;
                tiles++;
                empty += !any;
                if (attn_mask_tile_empty(&m, b, T, q0, q1, k0, k1) != !any) tiles_ok = 0;
            }
    }
    check(pairs_ok, "%s visible pairs per row (attn_mask_visible_pairs) = the reference mask's (%.0f, %.0f)", tag, pairs[0], pairs[1]);
    check(tiles_ok, "%s attn_mask_tile_empty = no visible pair in the tile, all %d 8x8 tiles (%d empty)", tag, tiles, empty);
    if (!docs) {  // the decode: the window bounds the cache rows it reads, bit for bit the forward's row
        float *kc = fbuf((size_t)T * KV * hd), *vc = fbuf((size_t)T * KV * hd), *o = fbuf(O);
        int same = 1;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *row = qkv + ((long)b * T + t) * R;
                kv_cache_store(kc, vc, row, t, NH, KV, hd);
                gqa_attention_decode(o, row, kc, vc, t, NH, KV, hd, &m);
                if (memcmp(o, out + ((long)b * T + t) * O, O * sizeof(float)) != 0) same = 0;
            }
        snprintf(what, sizeof(what), "%s decode over the cache (window %d): every step bit-identical to the forward's row", tag, window);
        check(same, "%s", what);
        free(kc), free(vc), free(o);
    }
    free(out), free(att), free(dqkv), free(ds);
}

static void test_attention(const char *tag, int NH, int KV) {
    int B = 2, T = 9, hd = 16, R = (NH + 2 * KV) * hd, O = NH * hd;
    char name[64], what[160];
    snprintf(name, sizeof(name), "%s.qkv", tag);
    const float *qkv = ref(name, (size_t)B * T * R);
    float *out = fbuf(B * T * O), *att = fbuf(GQA_ATT_SAVED_FLOATS(B, NH, T)), *dqkv = fbuf(B * T * R);
    gqa_attention_forward(out, att, qkv, B, T, NH, KV, hd, NULL);
    snprintf(name, sizeof(name), "%s.out", tag);
    const float *rout = ref(name, B * T * O);
    snprintf(what, sizeof(what), "GQA %d:%d (NH %d, KV %d) forward", NH / KV, 1, NH, KV);
    check_close(what, out, rout, B * T * O);
    snprintf(name, sizeof(name), "%s.att", tag);
    snprintf(what, sizeof(what), "GQA NH %d KV %d saved softmax", NH, KV);
    check_close(what, att, ref(name, GQA_ATT_SAVED_FLOATS(B, NH, T)), GQA_ATT_SAVED_FLOATS(B, NH, T));
    for (int i = 0; i < B * T * R; i++) dqkv[i] = 7.0f;  // overwritten, not added to
    snprintf(name, sizeof(name), "%s.dout", tag);
    gqa_attention_backward(dqkv, ref(name, B * T * O), qkv, att, B, T, NH, KV, hd, NULL);
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
            gqa_attention_decode(o, row, kc, vc, t, NH, KV, hd, NULL);
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
    attention_forward(o1, a1, qkv, B, T, C, NH, NULL);
    gqa_attention_forward(o2, a2, qkv, B, T, NH, NH, hd, NULL);
    attention_backward(d1, dout, qkv, o1, a1, B, T, C, NH, NULL);
    gqa_attention_backward(d2, dout, qkv, a2, B, T, NH, NH, hd, NULL);
    for (int t = 0; t < T; t++) kv_cache_store(kc, vc, qkv + (long)t * 3 * C, t, NH, NH, hd);
    attention_decode(dec1, qkv, T - 1, C, NH, NULL);
    gqa_attention_decode(dec2, qkv + (long)(T - 1) * 3 * C, kc, vc, T - 1, NH, NH, hd, NULL);
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
    gqa_attention_forward(out, att, normed, B, T, NH, KV, hd, NULL);
    check_close("QK-norm + RoPE + GQA 3:1 forward", out, ref("chain.out", B * T * O), B * T * O);
    float *d = fbuf(n), *dinp = fbuf(n), *dqw = fbuf(hd), *dkw = fbuf(hd);
    gqa_attention_backward(d, ref("chain.dout", B * T * O), normed, att, B, T, NH, KV, hd, NULL);
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

// Pointer to layer l of tensor `name` in a flat buffer (NULL when the option leaves it out).
static float *tensor_at(float *base, const ArchShape *s, const char *name, int l) {
    int k = arch_find(&ARCH_LLAMA, name);
    if (k < 0) fatal("no tensor %s", name);
    const ArchParam *p = &ARCH_LLAMA.params[k];
    size_t sz = arch_tensor_size(p, s);
    if (sz == 0) return NULL;
    return base + arch_tensor_offset(&ARCH_LLAMA, s, k) + (p->per_layer ? (size_t)l * (sz / s->num_layers) : 0);
}

// The mean cross-entropy over the real vocabulary (V of the Vp columns) of BT rows of logits, with its gradient
// (dlogits, Vp wide, zero in the padding) and the logits' real columns copied to lg (V wide) for the comparison.
static double cross_entropy(float *lg, float *dlogits, const float *logits, const int *tgt, int BT, int V, int Vp) {
    double loss = 0.0;
    for (int i = 0; i < BT; i++) {
        const float *z = logits + (long)i * Vp;
        float mx = -INFINITY, sum = 0.0f;
        for (int v = 0; v < V; v++) { lg[(long)i * V + v] = z[v]; if (z[v] > mx) mx = z[v]; }
        for (int v = 0; v < V; v++) sum += expf(z[v] - mx);
        loss += -(z[tgt[i]] - mx - logf(sum)) / BT;
        for (int v = 0; v < V; v++) dlogits[(long)i * Vp + v] = (expf(z[v] - mx) / sum - (v == tgt[i])) / BT;
    }
    return loss;
}

// Every parameter's gradient (P of them, in the table's order) against transformers' (TAG.grads): one check on
// the worst tensor's relative error.
static void check_grads(const char *tag, const float *grads, const ArchShape *s, size_t P) {
    char name[64];
    snprintf(name, sizeof(name), "%s.grads", tag);
    const float *rg = ref(name, P);
    double worst = 0.0;
    const char *worst_name = "";
    for (int k = 0; k < ARCH_LLAMA.num_params; k++) {
        size_t n = arch_tensor_size(&ARCH_LLAMA.params[k], s), off = arch_tensor_offset(&ARCH_LLAMA, s, k);
        if (n == 0) continue;
        double e = rel_err(grads + off, rg + off, n);
        if (e > worst || e != e) worst = e, worst_name = ARCH_LLAMA.params[k].name;
    }
    check(worst <= TOL, "%s: every parameter's gradient vs transformers (worst %s, relative error %.2e)", tag, worst_name, worst);
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
        gqa_attention_forward(ao + (long)l * BT * A, att + (long)l * B * NH * T * T, q, B, T, NH, KV, hd, NULL);
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
    double loss = cross_entropy(lg, dlogits, logits, tgt, BT, V, Vp);
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
        gqa_attention_backward(dq, dao, qkv + (long)l * BT * R, att + (long)l * B * NH * T * T, B, T, NH, KV, hd, NULL);
        rope_backward(dq, cs, sn, B, T, NH, KV, hd);
        mm_bwd(dln, tensor_at(grads, &s, "wqkv", l), tensor_at(grads, &s, "bqkv", l), dq, ln1 + (long)l * BT * C,
               tensor_at(params, &s, "wqkv", l), BT, C, R);
        memcpy(dres, dm, BT * C * sizeof(float));
        rmsnorm_backward(dres, tensor_at(grads, &s, "attn_norm", l), dln, res + (long)l * BT * C,
                         tensor_at(params, &s, "attn_norm", l), r1 + l * BT, BT, C);
    }
    for (int i = 0; i < BT; i++)  // serial: two tokens may share a row
        for (int j = 0; j < C; j++) dwte[(long)inp[i] * C + j] += dres[(long)i * C + j];
    check_grads(tag, grads, &s, P);
    float *bufs[] = {grads, cs, sn, res, ln1, r1, qkv, att, ao, mid, ln2, r2, fc, sw, lnf, rf, logits, tmp, lg, dlogits,
                     dres, dm, dsw, dfc, dln, dao, dq};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]);
    free(inp), free(tgt);
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
    test_glu("SwiGLU", "silu", "swi", swiglu_forward, swiglu_backward);
    test_glu("GeGLU", "gelu_tanh", "geg", geglu_forward, geglu_backward);
    test_relu2();
    test_attention("gqa41", 8, 2);
    test_attention("gqa11", 4, 4);
    test_attention("mqa", 4, 1);
    test_masked_attention("mask_causal", 0, 0, 4, 2, 16);
    test_masked_attention("mask_doc", 1, 0, 4, 2, 16);
    test_masked_attention("mask_win", 0, 5, 4, 2, 16);
    test_masked_attention("mask_docwin", 1, 5, 4, 2, 16);
    test_masked_attention("mask_docwin_mqa", 1, 7, 4, 1, 8);
    test_chain();
    test_gqa_is_gpt2_attention();
    test_model("m_gqa_tied", 4, 2, 1, 0);
    test_model("m_mha_untied", 4, 4, 0, 0);
    test_model("m_mqa_qwen2", 4, 1, 1, 1);
    return check_summary();
}
