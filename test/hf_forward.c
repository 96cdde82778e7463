// hf_forward.c: the trainer's own forward and sampler on an llm.c model file, for test/test_hf.sh to
// compare with Hugging Face transformers on the exported model. It runs the very code the trainer runs
// (model.h through pipeline.h's pp_forward_only, and trainer.h's sample_token on the key/value-cached
// decode path that run_sample uses), in the CPU build.
//   test/hf_forward logits MODEL.bin TOKENS.i32 B T OUT.f32   logits of a (B, T) batch of int32 tokens,
//                                                             the first V columns, float32 (B, T, V)
//   test/hf_forward grads MODEL.bin TOKENS.i32 TARGETS.i32 B T OUT.f32   the batch's mean loss, then every
//                                                             parameter's gradient in the file's order (float32)
//   test/hf_forward greedy MODEL.bin N SEED T0 [T1 ...]       N tokens after the prompt T0.., two lines:
//                                                             "greedy: ids" (argmax, the temperature-0 limit
//                                                             of the trainer's rule) and "sample: u id ..."
//                                                             (sample_token with the trainer's draws from SEED)
#define TESTING
#include "train_gpt.c"

typedef struct {
    ModelConfig c;
    Model *m;
    Zero z;
    Optimizer opt;  // never steps: zero.h holds an optimizer's state for every model it owns
    Comm solo;
    Pipeline p;
    float *params;
} Loaded;

static void load(Loaded *l, const char *path, int B, int T) {
    l->params = model_read_file_for("MODEL", path, &l->c);
    if (T > l->c.max_seq_len) fatal("T=%d exceeds the model's max_seq_len %d", T, l->c.max_seq_len);
    l->m = model_create(&l->c, B, T, 0, 0, l->c.num_layers, 1, 0, 0);
    l->solo = comm_solo();
    adamw_create(&l->opt, (AdamWOpts){0.9f, 0.95f, 1e-8f, 0.0f}, 0.0f);
    zero_init(&l->z, &l->solo, 0, l->m, NULL, 0, 0, 0, NULL, 0, NULL, 0, &l->opt);
    zero_load_params(&l->z, l->params, 0);
    l->p = (Pipeline){1, 0, 0, l->c.num_layers, 1, &l->solo, &l->z, 0.0};
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

static void run_logits(const char *model, const char *in, int B, int T, const char *out) {
    Loaded l;
    load(&l, model, B, T);
    int *tok = (int *)mallocCheck((size_t)B * T * sizeof(int));
    FILE *f = fopenCheck(in, "rb");
    freadCheck(tok, sizeof(int), (size_t)B * T, f, in);
    fclose(f);
    pp_forward_only(&l.p, tok, NULL, B, T);
    f = fopenCheck(out, "wb");
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) fwriteCheck(model_logits(l.m, b, t), sizeof(float), l.c.vocab_size, f, out);
    fclose(f);
}

// Both decodings through the cache, as run_sample does: one token at a time against the cached keys.
static void run_generate(const char *model, int n, uint64_t seed, int np, char **prompt) {
    Loaded l;
    int total = np + n;
    load(&l, model, 1, total);
    int *g = (int *)mallocCheck(total * sizeof(int));
    for (int mode = 0; mode < 2; mode++) {
        uint64_t rng = seed;
        for (int i = 0; i < np; i++) g[i] = atoi(prompt[i]);
        printf(mode == 0 ? "greedy:" : "sample:");
        model_decode_begin(l.m, total);
        for (int t = 0; t < total - 1; t++) {
            model_decode_at(l.m, t);
            pp_forward_only(&l.p, &g[t], NULL, 1, 1);
            if (t + 1 < np) continue;
            const float *row = model_logits(l.m, 0, 0);
            if (mode == 0) {
                g[t + 1] = argmax(row, l.c.vocab_size);
                printf(" %d", g[t + 1]);
            } else {
                float u = random_f32(&rng);
                g[t + 1] = sample_token(row, l.c.vocab_size, u);
                printf(" %.9g %d", u, g[t + 1]);
            }
        }
        model_decode_end(l.m);
        printf("\n");
    }
}

// One training micro-batch's loss and every parameter's gradient (dloss/dparam of the batch's mean loss), through
// the pieces the trainer runs (model.h's forward and backward as zero.h drives them at stage 0), written as
// float32: the loss, then the gradients in the model file's flat order (the units mapped back by the runs).
static void run_grads(const char *model, const char *in, const char *tg, int B, int T, const char *out) {
    Loaded l;
    load(&l, model, B, T);
    int *tok = (int *)mallocCheck((size_t)B * T * sizeof(int)), *tgt = (int *)mallocCheck((size_t)B * T * sizeof(int));
    FILE *f = fopenCheck(in, "rb");
    freadCheck(tok, sizeof(int), (size_t)B * T, f, in);
    fclose(f);
    f = fopenCheck(tg, "rb");
    freadCheck(tgt, sizeof(int), (size_t)B * T, f, tg);
    fclose(f);
    Model *m = l.m;
    model_embed_forward(m, tok, B, T);
    for (int i = 0; i < l.c.num_layers; i++) model_layer_forward(m, i);
    model_head_forward(m, tgt, 1.0f / (B * T));
    model_head_backward(m);
    for (int i = l.c.num_layers - 1; i >= 0; i--) model_layer_backward(m, i);
    model_embed_backward(m);
    float loss = (float)model_take_loss(m);
    size_t n = model_num_params(&l.c);
    float *flat = (float *)callocCheck(n, sizeof(float));
    ParamRun *runs = (ParamRun *)mallocCheck(model_max_runs(&l.c) * sizeof(ParamRun));
    int nr = model_param_runs(&l.c, runs);
    for (int i = 0; i < nr; i++) memcpy(flat + runs[i].flat, m->ugrads[runs[i].unit] + runs[i].unit_off, runs[i].len * sizeof(float));
    f = fopenCheck(out, "wb");
    fwriteCheck(&loss, sizeof(float), 1, f, out);
    fwriteCheck(flat, sizeof(float), n, f, out);
    fclose(f);
    free(flat); free(runs); free(tok); free(tgt);
}

int main(int argc, char **argv) {
    backend_init(0);
    if (argc == 7 && strcmp(argv[1], "logits") == 0) run_logits(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), argv[6]);
    else if (argc == 8 && strcmp(argv[1], "grads") == 0) run_grads(argv[2], argv[3], argv[4], atoi(argv[5]), atoi(argv[6]), argv[7]);
    else if (argc >= 6 && strcmp(argv[1], "greedy") == 0) run_generate(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), argc - 5, argv + 5);
    else {
        fprintf(stderr, "usage: %s logits MODEL.bin TOKENS.i32 B T OUT.f32 | grads MODEL.bin TOKENS.i32 TARGETS.i32 B T OUT.f32 | "
                "greedy MODEL.bin N SEED T0 [T1 ...]\n", argv[0]);
        return 2;
    }
    return 0;
}
