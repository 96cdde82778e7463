// test_generate.c: generation with the key/value cache against the full-prefix forward (whose
// logits test_gpt2.c checks against PyTorch). For each position the cached one-token forward must
// give the very logits of a forward over the whole prefix, bit for bit in the CPU build, at every
// recompute level and head size, and sampling through either path must give the same tokens.
// Compiled by nvcc (make test/test_generate_gpu), or by g++ for the emulated GPU (make test/test_generate_emu), it
// checks the CUDA build the same way, where the full forward's flash attention and the decode kernel sum in
// different orders: there the logits must agree to a tolerance per precision (usage: test/test_generate_gpu
// [fp32|bf16|fp16] [llama]). The key/value cache's size is checked by hand: the Llama family's holds only its KV heads.
#define TESTING
#ifdef TRAIN_GPT_CUDA
#include "train_gpt.cu"
#else
#include "train_gpt.c"
#endif

#include "check.h"

// A model with sharp attention: random GPT-2 initialisation with the matmul weights scaled up, so
// the softmax is far from uniform and a wrong key or position would show.
static float *sharp_params(const ModelConfig *c, uint64_t seed) {
    float *p = (float *)mallocCheck(model_num_params(c) * sizeof(float));
    model_init_random(c, p, seed);
    const Arch *a = model_arch(c);
    ArchShape s = model_shape(c);
    size_t off = 0;
    for (int k = 0; k < a->num_params; k++) {
        size_t n = arch_tensor_size(&a->params[k], &s);
        if (a->params[k].decayed) for (size_t i = 0; i < n; i++) p[off + i] *= 8.0f;
        off += n;
    }
    return p;
}

static double tolerance = 0.0;  // max |difference| of logits allowed; 0: bit for bit

static void run_config(const ModelConfig *cp, int recompute, int n);
static void check_sampling(Pipeline *pp, Model *m, const ModelConfig *c, const float *full, const float *cached, int n,
                           int recompute);
static void run_case(int L, int C, int NH, int recompute, int n) {
    ModelConfig c = gpt2_config(64, 101, 128, L, NH, C);
    run_config(&c, recompute, n);
}

// The Llama family: NH query heads over KV key/value heads of hd, with its options; the cache holds only the KV heads.
static void run_llama(int L, int NH, int KV, int hd, int tied, int qkv_bias, int qk_norm, int scaling, int recompute, int n) {
    ModelConfig l;
    llama_defaults(&l);
    l.max_seq_len = 64; l.vocab_size = 101; l.padded_vocab_size = 128; l.num_layers = L; l.num_heads = NH;
    l.num_kv_heads = KV; l.channels = 48; l.head_dim = hd; l.ffn_hidden = 80; l.tied = tied; l.qkv_bias = qkv_bias;
    l.qk_norm = qk_norm; l.norm_eps = 1e-5f; l.rope.theta = 10000.0f;
    if (scaling) { l.rope.scaling = 1; l.rope.factor = 8.0f; l.rope.low_freq_factor = 1.0f; l.rope.high_freq_factor = 4.0f; l.rope.original_max_pos = 16; }
    llama_check_config(&l, "test_generate");
    ModelConfig c = l;
    printf("Llama family: NH %d over KV %d of hd %d, %s%s%s%s\n", NH, KV, hd, tied ? "tied" : "untied",
           qkv_bias ? ", qkv bias" : "", qk_norm ? ", QK-norm" : "", scaling ? ", llama3 RoPE scaling" : "");
    run_config(&c, recompute, n);
}

static void run_config(const ModelConfig *cp, int recompute, int n) {
    ModelConfig c = *cp;
    int L = c.num_layers, C = c.channels, NH = c.num_heads;
    float *params = sharp_params(&c, 7 + L + NH);
    Model *m = model_create(&c, 1, n, recompute, 0, L, 1, 0, 0);
    Comm solo = comm_solo();
    Zero z;
    Optimizer opt;  // never steps: zero.h holds an optimizer's state for every model it owns
    adamw_create(&opt, (AdamWOpts){0.9f, 0.95f, 1e-8f, 0.0f}, 0.0f);
    zero_init(&z, &solo, 0, m, NULL, 0, 0, 0, NULL, 0, NULL, 0, &opt);
    zero_load_params(&z, params, 0);
    Pipeline p = {1, 0, 0, L, 1, &solo, &z, 0.0};
    int V = c.vocab_size;
    int *tokens = (int *)mallocCheck(n * sizeof(int));
    uint64_t rng = 42;
    for (int t = 0; t < n; t++) tokens[t] = (int)(random_u32(&rng) % V);
    // full prefix: logits of position t-1 from a forward over tokens[0..t-1]
    float *full = (float *)mallocCheck((size_t)n * V * sizeof(float));
    for (int t = 1; t <= n; t++) {
        pp_forward_only(&p, tokens, NULL, 1, t);
        memcpy(full + (size_t)(t - 1) * V, model_logits(m, 0, t - 1), V * sizeof(float));
    }
    // cached: one token at a time
    float *cached = (float *)mallocCheck((size_t)n * V * sizeof(float));
    size_t scratch0 = backend_scratch_allocated();
    model_decode_begin(m, n);
    // the cache holds, per layer and position, GPT-2's whole q, k, v row (3C) or the Llama family's key and value
    // heads only (2 KV hd: grouped-query attention's cache is NH/KV times smaller than multi-head attention's)
    size_t width = c.positions == POS_ROPE ? 2 * (size_t)c.num_kv_heads * c.head_dim : 3 * (size_t)C;
    size_t cache = backend_scratch_allocated() - scratch0, want = (size_t)L * n * width * X_BYTES;
    check(cache == want, "L=%d NH=%d: the key/value cache is %zu bytes (by hand: %d layers x %d positions x %zu elements of %zu bytes = %zu)",
          L, NH, cache, L, n, width, (size_t)X_BYTES, want);
    int same = 1, first_bad = -1;
    double worst = 0.0;
    for (int t = 0; t < n; t++) {
        model_decode_at(m, t);
        pp_forward_only(&p, &tokens[t], NULL, 1, 1);
        const float *row = model_logits(m, 0, 0);
        memcpy(cached + (size_t)t * V, row, V * sizeof(float));
        double d = 0.0;
        for (int v = 0; v < V; v++) d = fmax(d, fabs((double)row[v] - full[(size_t)t * V + v]));
        if (d > worst) worst = d;
        if (tolerance == 0.0 ? memcmp(row, full + (size_t)t * V, V * sizeof(float)) != 0 : !(d <= tolerance)) {
            if (first_bad < 0) first_bad = t;
            same = 0;
        }
    }
    model_decode_end(m);
    check(same, "L=%d C=%d NH=%d recompute %d: cached logits equal the full-prefix forward's at all %d positions, %s "
          "(first beyond it at %d; max difference %.3g)", L, C, NH, recompute, n, tolerance == 0.0 ? "bit for bit" : "within tolerance",
          first_bad, worst);
    check_sampling(&p, m, &c, full, cached, n, recompute);
    free(tokens); free(full); free(cached); free(params);
    zero_free(&z);
    model_free(m);
}

// Sampling: the same draws through the cache and through the full prefix give the same tokens (bit for bit), or,
// within a tolerance, differ at no more positions than the logits' differences (full, cached: n rows of V) allow.
static void check_sampling(Pipeline *pp, Model *m, const ModelConfig *c, const float *full, const float *cached, int n,
                           int recompute) {
    int L = c->num_layers, NH = c->num_heads, V = c->vocab_size;
    // sampling: the same draws through both paths give the same tokens
    int *a = (int *)mallocCheck(n * sizeof(int)), *b = (int *)mallocCheck(n * sizeof(int));
    a[0] = b[0] = 0;
    uint64_t ra = 99, rb = 99;
    for (int t = 1; t < n; t++) {
        pp_forward_only(pp, a, NULL, 1, t);
        a[t] = sample_token(model_logits(m, 0, t - 1), V, random_f32(&ra));
    }
    model_decode_begin(m, n);
    for (int t = 1; t < n; t++) {
        model_decode_at(m, t - 1);
        pp_forward_only(pp, &b[t - 1], NULL, 1, 1);
        b[t] = sample_token(model_logits(m, 0, 0), V, random_f32(&rb));
    }
    model_decode_end(m);
    int distinct = 0;
    for (int t = 1; t < n; t++) distinct += a[t] != a[t - 1];
    int agree = 0;
    while (agree < n && a[agree] == b[agree]) agree++;
    if (tolerance == 0.0) {
        check(agree == n && distinct > n / 4, "L=%d NH=%d recompute %d: %d sampled tokens are the same through the cache and "
              "the full prefix (the first %d agree; %d changes of token)", L, NH, recompute, n - 1, agree - 1, distinct);
    } else {
        // Within a tolerance a draw that falls between two nearly equal cumulative probabilities may pick
        // another token, and from there the two sequences have different prefixes: compare draws position by
        // position instead, each from the same prefix (the logits above) and the same uniform number. A
        // logit difference d changes a probability by at most a factor e^(2d), so few draws may differ.
        // sample_token inverts the CDF with the draw u, so the two tokens differ only when u falls between
        // the two CDFs at some boundary: with probability at most sum_v |F_a(v) - F_b(v)| at that position.
        // Allow that expected count plus 3 sigma.
        int differ = 0;
        double expect_differ = 0.0;
        uint64_t r = 7;
        for (int t = 0; t < n; t++) {
            const float *la = full + (size_t)t * V, *lb = cached + (size_t)t * V;
            double ma = -1e30, mb = -1e30, za = 0.0, zb = 0.0, tv = 0.0;
            for (int v = 0; v < V; v++) { ma = fmax(ma, la[v]); mb = fmax(mb, lb[v]); }
            for (int v = 0; v < V; v++) { za += exp(la[v] - ma); zb += exp(lb[v] - mb); }
            double fa = 0.0, fb = 0.0;
            for (int v = 0; v < V; v++) {
                fa += exp(la[v] - ma) / za;
                fb += exp(lb[v] - mb) / zb;
                tv += fabs(fa - fb);
            }
            expect_differ += fmin(tv, 1.0);
            float u = random_f32(&r);
            differ += sample_token(la, V, u) != sample_token(lb, V, u);
        }
        double allowed = expect_differ + 3.0 * sqrt(expect_differ) + 1.0;
        check(differ <= allowed && distinct > n / 4, "L=%d NH=%d recompute %d: from the same prefixes and draws, %d of %d "
              "sampled tokens differ between the cache and the full prefix (<= %.1f: the CDFs' gaps, %.2f "
              "expected, plus 3 sigma; %d changes of token in a free run)", L, NH, recompute, differ, n, allowed, expect_differ,
              distinct);
    }
    free(a); free(b);
}

int main(int argc, char **argv) {
    openmp_wait_politely(argv);  // as the trainer does: many small parallel regions, on a shared machine
#ifdef TRAIN_GPT_CUDA
    const char *prec = argc > 1 ? argv[1] : "fp32";
    // "llama" after the precision: the Llama family's cases only (the emulated suite's 16-bit runs, where GPT-2's
    // four cases take a minute each)
    int only_llama = argc > 2 && strcmp(argv[2], "llama") == 0;
    backend_init(0);
    backend_set_precision(prec, 0);
    tolerance = strcmp(prec, "fp32") == 0 ? 1e-4 : 0.1;  // logits of O(10): fp32 sums, or bf16/fp16 activations
    printf("CUDA build, %s: logits within %g of the full forward's\n", prec, tolerance);
#else
    (void)argc; (void)argv;
    int only_llama = 0;
#endif
    if (!only_llama) {
        run_case(2, 128, 2, 0, 64);   // d2's shape: head size 64
        run_case(3, 96, 2, 3, 40);    // head size 48 (the CUDA build pads it to 64), and recompute 3 (only layer outputs kept)
        run_case(1, 64, 1, 2, 64);    // one head of 64, the full context
        run_case(2, 16, 1, 1, 48);    // a vocabulary of 8C or more: the classifier's transposed one-row product
    }
    // the Llama family (the CUDA build: cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh and the grouped-query decode of cuda/decode.cuh); head sizes
    // 12 and 24 where the attention pads them (the CPU build, fp32), 16 and 32 where it wants a multiple of 16 (bf16, fp16)
    int hd_a = 12, hd_b = 24;
#ifdef TRAIN_GPT_CUDA
    if (strcmp(prec, "fp32") != 0) hd_a = 16, hd_b = 32;
#endif
    run_llama(2, 4, 1, 16, 1, 0, 0, 0, 0, 64);    // GQA 4:1 (multi-query), tied
    run_llama(2, 4, 2, hd_a, 0, 1, 1, 1, 3, 48);  // GQA 2:1, head_dim != C/NH, untied, qkv bias, QK-norm, llama3 RoPE, recompute 3
    run_llama(1, 2, 2, hd_b, 1, 0, 0, 0, 2, 40);  // multi-head (KV = NH), recompute 2
    return check_summary();
}
