// eval_mc.h: --eval-mc FILE, a multiple-choice set scored during training (HellaSwag and the like), for
// trainer.h's evaluation phase in both builds. Each example is a context and several endings; the model's
// answer is the ending with the highest mean log-likelihood per ending token given the context (llm.c's
// HellaSwag acc_norm: the completion-normalised log-likelihood), and acc (the highest sum) is kept beside it.
// The file is JSON lines of token ids, one example a line:
//   {"context_tokens": [ids], "ending_tokens": [[ids], [ids], ...], "label": k}
// (other keys are ignored). Text sets (ours: "context", "endings", "label"; HellaSwag's jsonl: "ctx",
// "endings", "label") become that form through scripts/mc_tokenize.py, since the trainer has no BPE encoder.
// Context and ending together must fit in T tokens; a longer context loses its first tokens.
// Every rank runs every forward (pipeline stages pass activations; ZeRO-3 gathers), as validation does; the
// last stage scores, and the counts reach every rank through the pipeline's all-reduce.
#ifndef EVAL_MC_H
#define EVAL_MC_H

#include "../base/utils.h"
#include "../pipeline.h"

typedef struct {
    int nctx, nend, label;
    int *ctx;        // nctx tokens
    int *end_len;    // nend lengths
    int **end;       // nend endings
} McExample;

typedef struct {
    const char *path;
    int n;
    McExample *ex;
} McSet;

typedef struct { int n; double acc, acc_norm; } McScore;

// --- a small JSON reader: just what one line of the set needs
typedef struct { const char *s; const char *path; int line; } McJson;

static void mc_fail(McJson *j, const char *what) {
    fatal("--eval-mc: %s line %d: %s (expected {\"context_tokens\": [ids], \"ending_tokens\": [[ids], ...], \"label\": k};"
          " scripts/mc_tokenize.py converts text sets)", j->path, j->line, what);
}
static void mc_ws(McJson *j) { while (*j->s == ' ' || *j->s == '\t' || *j->s == '\r' || *j->s == '\n') j->s++; }
static int mc_eat(McJson *j, char c) { mc_ws(j); if (*j->s != c) return 0; j->s++; return 1; }

static void mc_skip(McJson *j) {  // any value
    mc_ws(j);
    char c = *j->s;
    if (c == '"') {
        for (j->s++; *j->s && *j->s != '"'; j->s++) if (*j->s == '\\' && j->s[1]) j->s++;
        if (!*j->s) mc_fail(j, "unterminated string");
        j->s++;
    } else if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        j->s++;
        if (mc_eat(j, close)) return;
        do {
            if (c == '{') { mc_skip(j); if (!mc_eat(j, ':')) mc_fail(j, "':' expected"); }
            mc_skip(j);
        } while (mc_eat(j, ','));
        if (!mc_eat(j, close)) mc_fail(j, "malformed JSON");
    } else if (c && strchr("-0123456789tfn", c)) {
        while (*j->s && !strchr(",]} \t\r\n", *j->s)) j->s++;
    } else mc_fail(j, "malformed JSON");
}

static long mc_int(McJson *j, const char *field) {
    mc_ws(j);
    char *e;
    long v = strtol(j->s, &e, 10);
    if (e == j->s || *e == '.' || *e == 'e' || *e == 'E') {
        char msg[200];
        snprintf(msg, sizeof(msg), "\"%s\" holds something other than an integer", field);
        mc_fail(j, msg);
    }
    j->s = e;
    return v;
}

static int mc_ints(McJson *j, int **out, const char *field, int vocab) {  // [ids] -> count
    char msg[200];
    snprintf(msg, sizeof(msg), "\"%s\" is not a list of token ids", field);
    if (!mc_eat(j, '[')) mc_fail(j, msg);
    int n = 0, cap = 16;
    int *a = (int *)mallocCheck(cap * sizeof(int));
    if (!mc_eat(j, ']')) {
        do {
            long v = mc_int(j, field);
            if (v < 0 || v >= vocab) {
                snprintf(msg, sizeof(msg), "\"%s\" has token %ld, outside the model's vocabulary of %d", field, v, vocab);
                mc_fail(j, msg);
            }
            if (n == cap) a = (int *)realloc(a, (cap *= 2) * sizeof(int));
            a[n++] = (int)v;
        } while (mc_eat(j, ','));
        if (!mc_eat(j, ']')) mc_fail(j, msg);
    }
    *out = a;
    return n;
}

static void mc_parse_line(McJson *j, McExample *e, int vocab) {
    memset(e, 0, sizeof(*e));
    int have_ctx = 0, have_end = 0, have_label = 0, text = 0;
    if (!mc_eat(j, '{')) mc_fail(j, "not a JSON object");
    if (!mc_eat(j, '}')) {
        do {
            mc_ws(j);
            const char *k = j->s + 1;
            mc_skip(j);
            size_t kl = (size_t)(j->s - k - 1);
            if (!mc_eat(j, ':')) mc_fail(j, "':' expected after a key");
            if (kl == 14 && !strncmp(k, "context_tokens", kl)) { e->nctx = mc_ints(j, &e->ctx, "context_tokens", vocab); have_ctx = 1; }
            else if (kl == 13 && !strncmp(k, "ending_tokens", kl)) {
                if (!mc_eat(j, '[')) mc_fail(j, "\"ending_tokens\" is not a list of lists of token ids");
                int cap = 4;
                e->end = (int **)mallocCheck(cap * sizeof(int *));
                e->end_len = (int *)mallocCheck(cap * sizeof(int));
                do {
                    if (e->nend == cap) {
                        cap *= 2;
                        e->end = (int **)realloc(e->end, cap * sizeof(int *));
                        e->end_len = (int *)realloc(e->end_len, cap * sizeof(int));
                    }
                    e->end_len[e->nend] = mc_ints(j, &e->end[e->nend], "ending_tokens", vocab);
                    if (e->end_len[e->nend] == 0) mc_fail(j, "an ending in \"ending_tokens\" is empty");
                    e->nend++;
                } while (mc_eat(j, ','));
                if (!mc_eat(j, ']')) mc_fail(j, "\"ending_tokens\" is not a list of lists of token ids");
                have_end = 1;
            } else if (kl == 5 && !strncmp(k, "label", kl)) { e->label = (int)mc_int(j, "label"); have_label = 1; }
            else {
                if ((kl == 3 && !strncmp(k, "ctx", 3)) || (kl == 7 && !strncmp(k, "context", 7))) text = 1;
                mc_skip(j);
            }
        } while (mc_eat(j, ','));
        if (!mc_eat(j, '}')) mc_fail(j, "malformed JSON object");
    }
    if (!have_ctx || !have_end) mc_fail(j, text ? "text without token ids: convert the file with scripts/mc_tokenize.py"
                                                 : "\"context_tokens\" or \"ending_tokens\" missing");
    if (!have_label) mc_fail(j, "\"label\" missing");
    if (e->nctx == 0) mc_fail(j, "\"context_tokens\" is empty (the first ending token needs a token before it)");
    if (e->nend < 2) mc_fail(j, "fewer than 2 endings");
    if (e->label < 0 || e->label >= e->nend) {
        char msg[160];
        snprintf(msg, sizeof(msg), "\"label\" is %d, outside 0..%d for its %d endings", e->label, e->nend - 1, e->nend);
        mc_fail(j, msg);
    }
}

// Reads and checks the whole set (every rank reads it: it is small, and every rank runs every forward).
static void mc_load(McSet *set, const char *path, int vocab, int T) {
    FILE *fp = fopen(path, "rb");
    if (!fp) fatal("--eval-mc: %s: cannot open: %s", path, strerror(errno));
    set->path = path;
    set->n = 0;
    int cap = 64;
    set->ex = (McExample *)mallocCheck(cap * sizeof(McExample));
    char *line = NULL;
    size_t lcap = 0;
    McJson j = {NULL, path, 0};
    while (getline(&line, &lcap, fp) != -1) {
        j.line++;
        j.s = line;
        mc_ws(&j);
        if (!*j.s) continue;
        if (set->n == cap) set->ex = (McExample *)reallocCheck(set->ex, (cap *= 2) * sizeof(McExample));
        McExample *e = &set->ex[set->n];
        mc_parse_line(&j, e, vocab);
        mc_ws(&j);
        if (*j.s) mc_fail(&j, "text after the JSON object");
        for (int k = 0; k < e->nend; k++)
            if (e->end_len[k] + 1 > T) {
                char msg[160];
                snprintf(msg, sizeof(msg), "ending %d has %d tokens; with a context token it must fit -t %d", k, e->end_len[k], T);
                mc_fail(&j, msg);
            }
        set->n++;
    }
    free(line);
    fclose(fp);
    if (set->n == 0) fatal("--eval-mc: %s: no examples", path);
}

// log-probability of `target` under the first V of the logits, in double
static double mc_logprob(const float *logits, int V, int target) {
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) if (logits[i] > mx) mx = logits[i];
    double s = 0.0;
    for (int i = 0; i < V; i++) s += exp((double)logits[i] - mx);
    return (double)logits[target] - mx - log(s);
}

// Scores one example: the endings go through the model as rows of micro-batches of up to B rows, each row
// the context's last tokens then the ending, padded to the longest row (causal: padding after a row's end
// changes nothing before it). Fills sum[k] and mean[k] (log-likelihood of ending k) on the last stage.
static void mc_score_example(Pipeline *pp, const McExample *e, int B, int T, int V, int *rows, double *sum, double *mean) {
    int last = pp->stage == pp->stages - 1;
    for (int k0 = 0; k0 < e->nend; k0 += B) {
        int nb = e->nend - k0 < B ? e->nend - k0 : B, Tb = 0;
        for (int b = 0; b < nb; b++) {
            int el = e->end_len[k0 + b], cl = e->nctx < T - el ? e->nctx : T - el;
            if (cl + el > Tb) Tb = cl + el;
        }
        memset(rows, 0, (size_t)nb * Tb * sizeof(int));
        for (int b = 0; b < nb; b++) {
            int el = e->end_len[k0 + b], cl = e->nctx < T - el ? e->nctx : T - el;
            memcpy(rows + (size_t)b * Tb, e->ctx + (e->nctx - cl), cl * sizeof(int));
            memcpy(rows + (size_t)b * Tb + cl, e->end[k0 + b], el * sizeof(int));
        }
        pp_forward_only(pp, rows, NULL, nb, Tb);
        if (!last) continue;
        for (int b = 0; b < nb; b++) {
            int el = e->end_len[k0 + b], cl = e->nctx < T - el ? e->nctx : T - el;
            double s = 0.0;
            for (int t = 0; t < el; t++) s += mc_logprob(model_logits(pp->z->model, b, cl + t - 1), V, e->end[k0 + b][t]);
            sum[k0 + b] = s;
            mean[k0 + b] = s / el;
        }
    }
}

static int mc_argmax(const double *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

// The set's score with the current weights. TRAIN_GPT_EVAL_MC_DUMP=FILE appends each example's line
// (index, label, prediction by mean and by sum, then each ending's sum and mean log-likelihood) for the tests.
static McSet eval_mc_set;  // read once, at the run's start (eval_mc_load)

// Reads and checks the set before training, so a bad file (a token outside the vocabulary, an ending
// longer than -t) stops the run at once rather than at the first validation.
static void eval_mc_load(const char *path, int V, int T) {
    if (!eval_mc_set.path) mc_load(&eval_mc_set, path, V, T);
}

static McScore eval_mc_run(Pipeline *pp, const char *path, int B, int T, int V) {
    eval_mc_load(path, V, T);
    const McSet set = eval_mc_set;
    int *rows = (int *)mallocCheck((size_t)B * T * sizeof(int));
    int maxe = 0;
    for (int i = 0; i < set.n; i++) if (set.ex[i].nend > maxe) maxe = set.ex[i].nend;
    double *sum = (double *)mallocCheck(maxe * sizeof(double)), *mean = (double *)mallocCheck(maxe * sizeof(double));
    const char *dump_path = getenv("TRAIN_GPT_EVAL_MC_DUMP");
    FILE *dump = NULL;
    if (dump_path && pp->stage == pp->stages - 1 && pp->z->comm->rank == 0) dump = fopenCheck(dump_path, "a");
    double acc = 0.0, acc_norm = 0.0;
    for (int i = 0; i < set.n; i++) {
        const McExample *e = &set.ex[i];
        mc_score_example(pp, e, B, T, V, rows, sum, mean);
        if (pp->stage != pp->stages - 1) continue;
        int pn = mc_argmax(mean, e->nend), ps = mc_argmax(sum, e->nend);
        acc_norm += pn == e->label;
        acc += ps == e->label;
        if (dump) {
            fprintf(dump, "%d %d %d %d", i, e->label, pn, ps);
            for (int k = 0; k < e->nend; k++) fprintf(dump, " %.9g %.9g", sum[k], mean[k]);
            fprintf(dump, "\n");
        }
    }
    if (dump) fclose(dump);
    free(rows); free(sum); free(mean);
    McScore s = {set.n, comm_allreduce_sum_f64(pp->group, acc) / set.n, comm_allreduce_sum_f64(pp->group, acc_norm) / set.n};
    return s;
}

#endif
