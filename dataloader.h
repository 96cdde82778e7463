// dataloader.h: token shards in llm.c's format, read as a deterministic stream of micro-batches.
//
// A micro-batch is B*T+1 consecutive tokens of one shard (inputs are the first B*T, targets the
// last B*T). The stream is a pure function of (seed, micro-batch index): epoch e visits every
// window of every shard once, in an order shuffled from (seed, e). Because of that the loader's
// whole state is one counter, resuming is exact, and a rank-of-N view is simple: rank r takes
// global micro-batches r, r+N, r+2N, ..., so N ranks with accumulation A read exactly the tokens one
// process reads with accumulation N*A.
//
// Shards are llm.c's: a 1024-byte header (magic, version, token count), then the tokens, uint16
// (magic 20240520, version 1: GPT-2's) or uint32 (20240801, version 7: llm.c's Llama 3 form, for
// vocabularies over 65,536); each shard says which. A token outside the model's vocabulary is an
// error naming the shard and the token's position.
//
// Documents (--doc-mask): ./tokenize records the separator token it wrote between documents in two free slots of
// the header ([3] SHARD_DOC_SEP_TAG, [4] the separator's id; llm.c's readers look at [0..2] only). With a separator
// set (dataloader_set_doc_sep) each micro-batch also gives doc_start (B, T): for each input token, the position in
// its row where its document starts. The token after a separator starts a new document, so a separator belongs to
// the document it ends (torchtitan's block-causal mask for Llama 3 counts it so); a row's first token starts a
// document wherever the row begins.
#ifndef DATALOADER_H
#define DATALOADER_H

#include <glob.h>
#include <math.h>
#include "base/utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_MAGIC_U32 20240801
#define SHARD_VERSION_U32 7
#define SHARD_HEADER_BYTES 1024
#define SHARD_DOC_SEP_TAG 20261206  // header[3]: header[4] is the document separator's id

typedef struct {
    char *path;        // file, or a name for an in-memory shard
    uint16_t *mem;     // in-memory tokens (the synthetic corpus), else NULL
    long ntok;
    int tok_bytes;     // 2 (uint16 tokens) or 4 (uint32)
    long nwin;         // micro-batch windows in this shard
    int doc_sep;       // the document separator its header records, -1 none (and for in-memory shards)
} Shard;

typedef struct {
    Shard *shards;
    int nshards;
    int B, T;
    int rank, world;
    int shuffle;
    uint64_t seed;
    int vocab_size;
    long windows_per_epoch;
    uint64_t pos;      // micro-batches this rank has taken: the whole resumable state
    // caches of the current epoch's shard order and the current shard's window order
    int *order;
    int64_t order_epoch;
    long *perm;
    int64_t perm_epoch;
    int perm_shard;
    FILE *fp;
    int fp_shard;
    // the micro-batch just read
    unsigned char *buf; // B*T+1 tokens as the shard stores them
    int *inputs, *targets;
    int doc_sep;        // the document separator (dataloader_set_doc_sep), -1: no document starts
    int *doc_start;     // with a separator: (B, T), each input token's document start in its row; else NULL
    int cur_shard;
    long cur_offset;
} DataLoader;

// Reads and checks a shard's header and size; returns its token count, and *tok_bytes 2 or 4, *doc_sep the
// separator its header records (-1: none; NULL: not asked).
static long shard_check_file_sep(const char *path, int *tok_bytes, int *doc_sep) {
    FILE *fp = fopenCheck(path, "rb");
    int header[256];
    fseekCheck(fp, 0, SEEK_END, path);
    long size = ftell(fp);
    if (size < SHARD_HEADER_BYTES) fatal("%s: %ld bytes, too short for a token shard header (1024 bytes)", path, size);
    fseekCheck(fp, 0, SEEK_SET, path);
    freadCheck(header, sizeof(int), 256, fp, path);
    fclose(fp);
    if (header[0] != SHARD_MAGIC && header[0] != SHARD_MAGIC_U32) {
        fatal("%s: bad magic %d, expected %d (uint16 tokens) or %d (uint32) (not an llm.c token shard?)", path, header[0],
              SHARD_MAGIC, SHARD_MAGIC_U32);
    }
    int wide = header[0] == SHARD_MAGIC_U32;
    int want = wide ? SHARD_VERSION_U32 : SHARD_VERSION;
    if (header[1] != want) fatal("%s: shard version %d, expected %d (for magic %d)", path, header[1], want, header[0]);
    *tok_bytes = wide ? 4 : 2;
    if (doc_sep) *doc_sep = header[3] == SHARD_DOC_SEP_TAG ? header[4] : -1;
    long n = header[2];
    if (n < 0 || size != SHARD_HEADER_BYTES + (long)*tok_bytes * n) {
        fatal("%s: header says %ld tokens (%ld bytes) but the file has %ld bytes (truncated?)", path, n,
              SHARD_HEADER_BYTES + (long)*tok_bytes * n, size);
    }
    return n;
}
static long shard_check_file(const char *path, int *tok_bytes) { return shard_check_file_sep(path, tok_bytes, NULL); }

static void dataloader_setup(DataLoader *dl, int B, int T, int rank, int world, int shuffle, uint64_t seed, int vocab_size) {
    dl->B = B; dl->T = T; dl->rank = rank; dl->world = world;
    dl->shuffle = shuffle; dl->seed = seed; dl->vocab_size = vocab_size;
    dl->pos = 0;
    dl->windows_per_epoch = 0;
    long bt = (long)B * T;
    for (int i = 0; i < dl->nshards; i++) {
        Shard *s = &dl->shards[i];
        s->nwin = s->ntok > bt ? (s->ntok - 1) / bt : 0;
        dl->windows_per_epoch += s->nwin;
    }
    if (dl->windows_per_epoch == 0) {
        fatal("%s%s: too few tokens for one micro-batch of B*T+1 = %ld tokens (largest shard has %ld); lower -b/-t, or give "
              "the split more tokens (./tokenize shards --val-tokens sets how many go to the validation shard, the rest "
              "to train)", dl->shards[0].path, dl->nshards > 1 ? " and the other shards" : "", bt + 1, dl->shards[0].ntok);
    }
    dl->order = (int *)mallocCheck(dl->nshards * sizeof(int));
    dl->order_epoch = -1;
    dl->perm = NULL;
    dl->perm_epoch = -1;
    dl->perm_shard = -1;
    dl->fp = NULL;
    dl->fp_shard = -1;
    dl->buf = (unsigned char *)mallocCheck((bt + 1) * sizeof(uint32_t));
    dl->inputs = (int *)mallocCheck(bt * sizeof(int));
    dl->targets = (int *)mallocCheck(bt * sizeof(int));
    dl->doc_sep = -1;
    dl->doc_start = NULL;
}

// The separator every shard records (--doc-mask's), or -1 with *missing the first shard that records none
// (or, where two disagree, -2 with *missing the second of them).
static int dataloader_recorded_sep(const DataLoader *dl, const char **missing) {
    int sep = dl->shards[0].doc_sep;
    for (int i = 0; i < dl->nshards; i++) {
        if (dl->shards[i].doc_sep < 0) { *missing = dl->shards[i].path; return -1; }
        if (dl->shards[i].doc_sep != sep) { *missing = dl->shards[i].path; return -2; }
    }
    return sep;
}

// From now on each micro-batch gives doc_start by separator `sep` (>= 0).
static void dataloader_set_doc_sep(DataLoader *dl, int sep) {
    dl->doc_sep = sep;
    if (!dl->doc_start) dl->doc_start = (int *)mallocCheck((size_t)dl->B * dl->T * sizeof(int));
}

// Each input token's document start in its row: 0 until the first separator, then one past the latest separator
// before it (the separator itself ends its document).
static void dataloader_doc_starts(int *doc_start, const int *inputs, int B, int T, int sep) {
    for (int b = 0; b < B; b++) {
        int start = 0;
        for (int t = 0; t < T; t++) {
            doc_start[(size_t)b * T + t] = start;
            if (inputs[(size_t)b * T + t] == sep) start = t + 1;
        }
    }
}

// Opens every shard matching `pattern` and checks them all before any training starts.
static void dataloader_init(DataLoader *dl, const char *pattern, const char *flag, int B, int T, int rank, int world,
                            int shuffle, uint64_t seed, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        fatal("%s: no file matches '%s'", flag, pattern);
    }
    dl->nshards = (int)g.gl_pathc;
    dl->shards = (Shard *)callocCheck(dl->nshards, sizeof(Shard));
    for (int i = 0; i < dl->nshards; i++) {
        dl->shards[i].path = strdup(g.gl_pathv[i]);
        dl->shards[i].ntok = shard_check_file_sep(g.gl_pathv[i], &dl->shards[i].tok_bytes, &dl->shards[i].doc_sep);
    }
    globfree(&g);
    dataloader_setup(dl, B, T, rank, world, shuffle, seed, vocab_size);
}

// A loader over tokens already in memory (the synthetic corpus); it takes ownership of `tokens`.
static void dataloader_init_memory(DataLoader *dl, const char *name, uint16_t *tokens, long ntok, int B, int T,
                                   int rank, int world, int shuffle, uint64_t seed, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    dl->nshards = 1;
    dl->shards = (Shard *)callocCheck(1, sizeof(Shard));
    dl->shards[0].path = strdup(name);
    dl->shards[0].mem = tokens;
    dl->shards[0].ntok = ntok;
    dl->shards[0].tok_bytes = 2;
    dl->shards[0].doc_sep = -1;
    dataloader_setup(dl, B, T, rank, world, shuffle, seed, vocab_size);
}

// Fisher-Yates with our own RNG, so the order is the same on every machine.
static void shuffle_longs(long *a, long n, uint64_t seed) {
    uint64_t rng = mix_seed(seed);
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(((uint64_t)random_u32(&rng) << 32 | random_u32(&rng)) % (uint64_t)(i + 1));
        long t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

// Maps a global micro-batch index to (shard, token offset).
static void dataloader_locate(DataLoader *dl, uint64_t g, int *shard, long *offset) {
    int64_t epoch = (int64_t)(g / (uint64_t)dl->windows_per_epoch);
    long idx = (long)(g % (uint64_t)dl->windows_per_epoch);
    if (dl->order_epoch != epoch) {
        long *tmp = (long *)mallocCheck(dl->nshards * sizeof(long));
        for (int i = 0; i < dl->nshards; i++) tmp[i] = i;
        if (dl->shuffle) shuffle_longs(tmp, dl->nshards, dl->seed ^ mix_seed((uint64_t)epoch * 2 + 1));
        for (int i = 0; i < dl->nshards; i++) dl->order[i] = (int)tmp[i];
        free(tmp);
        dl->order_epoch = epoch;
    }
    int s = 0;
    for (int i = 0; i < dl->nshards; i++) {
        s = dl->order[i];
        if (idx < dl->shards[s].nwin) break;
        idx -= dl->shards[s].nwin;
    }
    long w = idx;
    if (dl->shuffle) {
        if (dl->perm_epoch != epoch || dl->perm_shard != s) {
            free(dl->perm);
            long n = dl->shards[s].nwin;
            dl->perm = (long *)mallocCheck(n * sizeof(long));
            for (long i = 0; i < n; i++) dl->perm[i] = i;
            shuffle_longs(dl->perm, n, dl->seed ^ mix_seed(((uint64_t)epoch << 20) ^ (uint64_t)s ^ 0xdada));
            dl->perm_epoch = epoch;
            dl->perm_shard = s;
        }
        w = dl->perm[idx];
    }
    *shard = s;
    *offset = w * (long)dl->B * dl->T;
}

// Reads this rank's next micro-batch into dl->inputs / dl->targets.
static void dataloader_next(DataLoader *dl) {
    uint64_t g = dl->pos * (uint64_t)dl->world + (uint64_t)dl->rank;
    dl->pos++;
    int s;
    long off;
    dataloader_locate(dl, g, &s, &off);
    Shard *sh = &dl->shards[s];
    long n = (long)dl->B * dl->T + 1;
    if (sh->mem) {
        memcpy(dl->buf, sh->mem + off, n * sizeof(uint16_t));
    } else {
        if (dl->fp_shard != s) {
            if (dl->fp) fclose(dl->fp);
            dl->fp = fopenCheck(sh->path, "rb");
            dl->fp_shard = s;
        }
        fseekCheck(dl->fp, SHARD_HEADER_BYTES + off * sh->tok_bytes, SEEK_SET, sh->path);
        freadCheck(dl->buf, (size_t)sh->tok_bytes, n, dl->fp, sh->path);
    }
    const uint16_t *b16 = (const uint16_t *)dl->buf;
    const uint32_t *b32 = (const uint32_t *)dl->buf;
    for (long i = 0; i < n; i++) {
        uint32_t tok = sh->tok_bytes == 4 ? b32[i] : b16[i];
        if (tok >= (uint32_t)dl->vocab_size) {
            fatal("%s: token %u at position %ld is outside the model's vocabulary of %d", sh->path, tok, off + i,
                  dl->vocab_size);
        }
        if (i < n - 1) dl->inputs[i] = (int)tok;
        if (i > 0) dl->targets[i - 1] = (int)tok;
    }
    if (dl->doc_start) dataloader_doc_starts(dl->doc_start, dl->inputs, dl->B, dl->T, dl->doc_sep);
    dl->cur_shard = s;
    dl->cur_offset = off;
}

static void dataloader_reset(DataLoader *dl) { dl->pos = 0; }

// Micro-batches this rank sees per epoch (used to bound validation).
static long dataloader_windows_per_rank(const DataLoader *dl) { return dl->windows_per_epoch / dl->world; }

static void dataloader_free(DataLoader *dl) {
    for (int i = 0; i < dl->nshards; i++) { free(dl->shards[i].path); free(dl->shards[i].mem); }
    free(dl->shards);
    free(dl->order);
    free(dl->perm);
    if (dl->fp) fclose(dl->fp);
    free(dl->buf);
    free(dl->inputs);
    free(dl->targets);
    free(dl->doc_start);
}

// ----------------------------------------------------------------------------
// The embedded default corpus: text that needs the whole model, with an exactly known floor.
//
// Documents of exactly T tokens (the run's sequence length), back to back. Every micro-batch row
// starts at a multiple of T in the corpus, so a row sees one document from its start, and its last
// target is the next document's first token. Tokens follow a fixed random first-order Markov chain
// over SYNTH_SYMBOLS symbols (it runs on across documents), except that at every position from 1
// to T-2 that does not follow a marker, with probability SYNTH_COPY_RATE the token is the marker
// '.', and the token after a marker repeats the document's first token. That token can be up to
// T-1 positions back: only attention can fetch it. The floor is exact:
// - a copied token costs 0 to a model that attends, and to one that does not, the entropy of the
//   chain's stationary law pi (the first token is a chain step, so distributed as pi);
// - a fresh token where a marker may come costs H_b(r) + (1 - r) h(prev) (marker or not, then the
//   chain from the previous token), elsewhere h(prev); every non-marker token is distributed as pi
//   (copies copy such a token, and the choices never look at token values), so E[h(prev)] is the
//   chain's entropy rate H;
// - and the chance that position p follows a marker is a two-state recursion over p.
// So the floor, and the best loss of a model that does not attend (the floor plus the copied share
// times H(pi)), tell the user how far the model is from the best possible, and whether it attends.

#define SYNTH_VOCAB 64
#define SYNTH_SYMBOLS 63             // the chain's symbols; the last id is the marker
#define SYNTH_MARKER 63
#define SYNTH_SUCCESSORS 4
#define SYNTH_COPY_RATE 0.1
// how samples of the synthetic corpus are printed: one symbol per token, the marker as '.'
static const char SYNTH_ALPHABET[SYNTH_VOCAB + 1] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";

typedef struct {
    int next[SYNTH_SYMBOLS][SYNTH_SUCCESSORS];
    double prob[SYNTH_SYMBOLS][SYNTH_SUCCESSORS];
    double entropy_rate;   // H: the chain's, nats per token
    double pi_entropy;     // H(pi): of its stationary law, what a copied token costs a model that does not attend
    int T;                 // document length
    double floor;          // the best possible mean loss over a row's T targets, nats per token
    double copied;         // the share of targets that are copies
    double no_attention;   // the best mean loss of a model that does not attend: floor + copied * H(pi)
} SynthSource;

static void synth_init(SynthSource *m, uint64_t seed, int T) {
    uint64_t rng = mix_seed(seed ^ 0x4d61726b6f76ull);
    for (int i = 0; i < SYNTH_SYMBOLS; i++) {
        double total = 0;
        for (int k = 0; k < SYNTH_SUCCESSORS; k++) {
            // successor 0 is always i+1 so the chain is irreducible; the others are random
            m->next[i][k] = k == 0 ? (i + 1) % SYNTH_SYMBOLS : (int)(random_u32(&rng) % SYNTH_SYMBOLS);
            double w = -log(1.0 - random_f32(&rng) * 0.999);  // exponential weights = Dirichlet(1)
            m->prob[i][k] = w;
            total += w;
        }
        for (int k = 0; k < SYNTH_SUCCESSORS; k++) m->prob[i][k] /= total;
    }
    // stationary distribution by power iteration (lazy chain, so it converges even if periodic)
    double pi[SYNTH_SYMBOLS], nxt[SYNTH_SYMBOLS];
    for (int i = 0; i < SYNTH_SYMBOLS; i++) pi[i] = 1.0 / SYNTH_SYMBOLS;
    for (int it = 0; it < 20000; it++) {
        for (int i = 0; i < SYNTH_SYMBOLS; i++) nxt[i] = 0.5 * pi[i];
        for (int i = 0; i < SYNTH_SYMBOLS; i++)
            for (int k = 0; k < SYNTH_SUCCESSORS; k++) nxt[m->next[i][k]] += 0.5 * pi[i] * m->prob[i][k];
        memcpy(pi, nxt, sizeof(pi));
    }
    // entropy rate: successors may repeat, so merge equal next-states before taking the entropy
    double H = 0, Hpi = 0;
    for (int i = 0; i < SYNTH_SYMBOLS; i++) {
        double p[SYNTH_SYMBOLS] = {0};
        for (int k = 0; k < SYNTH_SUCCESSORS; k++) p[m->next[i][k]] += m->prob[i][k];
        double h = 0;
        for (int j = 0; j < SYNTH_SYMBOLS; j++) if (p[j] > 0) h -= p[j] * log(p[j]);
        H += pi[i] * h;
        if (pi[i] > 0) Hpi -= pi[i] * log(pi[i]);
    }
    m->entropy_rate = H;
    m->pi_entropy = Hpi;
    m->T = T;
    // targets 1..T-1 of a row, then the next document's first token (a chain step: H);
    // after = P(the token before position p is a marker)
    double r = SYNTH_COPY_RATE, hb = -(r * log(r) + (1 - r) * log(1 - r));
    double cost = H, copies = 0.0, after = 0.0;
    for (int p = 1; p < T; p++) {
        copies += after;
        double fresh = 1.0 - after;
        if (p <= T - 2) { cost += fresh * (hb + (1 - r) * H); after = fresh * r; }
        else { cost += fresh * H; after = 0.0; }
    }
    m->floor = cost / T;
    m->copied = copies / T;
    m->no_attention = m->floor + m->copied * Hpi;
}

// n tokens: documents of T (the last one cut short), from a burnt-in state of the chain's own stream.
static uint16_t *synth_sample(const SynthSource *m, long n, uint64_t stream_seed) {
    uint16_t *out = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    uint64_t rng = mix_seed(stream_seed);
    int s = 0, T = m->T;
    long first = 0;  // where the current document starts
    for (long i = -1000; i < n; i++) {  // 1000 steps of burn-in first
        int p = i < 0 ? 0 : (int)(i % T);
        if (i >= 0 && p == 0) first = i;
        if (i > 0 && p > 0 && out[i - 1] == SYNTH_MARKER) {  // the document's first token again
            out[i] = out[first];
            s = out[i];
            continue;
        }
        if (i >= 0 && p >= 1 && p <= T - 2 && random_f32(&rng) < (float)SYNTH_COPY_RATE) {
            out[i] = SYNTH_MARKER;
            continue;
        }
        float u = random_f32(&rng);
        int k = 0;
        double c = m->prob[s][0];
        while (k < SYNTH_SUCCESSORS - 1 && u >= c) c += m->prob[s][++k];
        s = m->next[s][k];
        if (i >= 0) out[i] = (uint16_t)s;
    }
    return out;
}

#endif
