/*
The back half of `./tokenize shards`: a pool of threads that encode work units (corpus.h's
Batch) in parallel, and the writer that cuts the ordered token stream into llm.c shards.
Serves tokenize.c only.

Order: batches are numbered as the reader fills them, encoded by whichever thread is free,
and written strictly in their number's order, so the bytes do not depend on --threads.
A ring of 2 * threads + 2 batches bounds the memory in flight.

Shards: [NAME_]val_000000.bin holds the first --val-tokens tokens, then train shards of
--shard-tokens each, the last one partial. With --name the train index continues after
the validation shard's (llm.c's FineWeb layout: NAME_train_000001.bin first); without it
the older layout is kept (train_000000.bin first). Each shard is written to PATH.tmp,
fsynced and renamed when complete, so a killed run leaves no partial file under a final
name. --resume leaves a complete shard that is already there in place, after checking
that its tokens are the ones this run produces.

Shard format: llm.c's, a 1024-byte header (magic, version, token count) then the tokens, uint16
(20240520, version 1) when the vocabulary fits, else uint32 (20240801, version 7, llm.c's Llama 3
form).

Resume state: after each shard is renamed into place, D/[NAME_]shards.state (text, written
to .tmp and renamed) records the settings and inputs (sizes, modification times) that made
the shards, how many are complete, and where the next shard's first token comes from: the
input, the byte offset and line of the document it belongs to, and how many of that
document's tokens the complete shards already hold. --resume checks the settings and inputs
against the state (naming what changed), the complete shards' headers and sizes against its
token count, then seeks to that document and drops the tokens already written: it reads and
encodes only what the complete shards do not hold. Documents encode independently, so the
stream from that document on is the one an uninterrupted run makes.
*/
#ifndef SHARDS_H
#define SHARDS_H

#include <pthread.h>
#include <signal.h>
#include "corpus.h"

#define SHARD_MAGIC 20240520     // uint16 tokens (llm.c's GPT-2 shards)
#define SHARD_VERSION 1
#define SHARD_MAGIC_U32 20240801 // uint32 tokens (llm.c's Llama 3 shards), for a vocabulary over 65,536
#define SHARD_VERSION_U32 7
#define SHARD_HEADER_BYTES 1024
#define SHARD_DOC_SEP_TAG 20261206  // header[3] (dataloader.h's): header[4] is the separator between documents
#define WRITE_BUF_TOKENS (1 << 20)

// ----------------------------------------------------------------------------
// the writer

static char g_tmp_path[4096];  // the temporary being written; removed on errors and signals

static int g_progress_tty;     // a progress line is on stderr: clear it before printing a line

static void clear_progress(void) { if (g_progress_tty) { fprintf(stderr, "\r\033[K"); } }

static void remove_tmp(void) { if (g_tmp_path[0]) { unlink(g_tmp_path); g_tmp_path[0] = 0; } }

static void on_signal(int sig) {
    if (g_tmp_path[0]) { unlink(g_tmp_path); }
    _exit(128 + sig);
}

typedef struct {
    const char *dir, *name;
    long long shard_tokens, val_tokens;
    int resume;
    int k;                  // the shard being filled (0 = validation)
    long long cur;          // its tokens so far
    int open, fd;           // fd: the temporary being written
    FILE *cmp;              // --resume: the complete shard being compared instead
    char final[4000];
    int wide;               // uint32 tokens (SHARD_MAGIC_U32), else uint16
    int doc_sep;            // the separator written before each document, recorded in every header
    unsigned char *buf;     // WRITE_BUF_TOKENS tokens of 2 or 4 bytes
    size_t nbuf;
    long long tokens, shards_written, shards_kept;
    // the resume state (see the top of this file)
    const char *state_path;  // D/[NAME_]shards.state
    const char *state_head;  // its first lines: the settings, one a line
    const char *state_inputs;// its last lines: "input I size=.. mtime=.. path=..", one an input
    int n_inputs;
    DocPos doc;              // where the document being written starts
    long long doc_emitted;   // its tokens already in the stream
    DocPos shard_doc;        // doc and doc_emitted when the open shard began
    long long shard_emitted;
    long long skip;          // --resume: tokens of the first document the complete shards hold
    long long tokens_before; // tokens in the complete shards a resume starts after
    int no_state, at_end;    // no_state: a close that must not be recorded; at_end: the stream has ended
} Writer;

static void shard_path(const Writer *w, int k, char *out, size_t cap) {
    const char *split = k == 0 ? "val" : "train";
    int index = w->name != NULL || k == 0 ? k : k - 1;
    const char *sl = w->dir[0] && w->dir[strlen(w->dir) - 1] == '/' ? "" : "/";
    int n = w->name ? snprintf(out, cap, "%s%s%s_%s_%06d.bin", w->dir, sl, w->name, split, index)
                    : snprintf(out, cap, "%s%s%s_%06d.bin", w->dir, sl, split, index);
    if (n < 0 || (size_t)n + 5 >= cap) { corpus_die("--out-dir %s: path too long", w->dir); }
}

static long long shard_target(const Writer *w) { return w->k == 0 ? w->val_tokens : w->shard_tokens; }

static void write_all(int fd, const void *p, size_t n, off_t at) {
    const char *c = (const char *)p;
    while (n > 0) {
        ssize_t m = at >= 0 ? pwrite(fd, c, n, at) : write(fd, c, n);
        if (m < 0 && errno == EINTR) { continue; }
        if (m <= 0) { corpus_die("%s: write failed: %s (no shard is left under its final name)", g_tmp_path, strerror(m < 0 ? errno : ENOSPC)); }
        c += m; n -= (size_t)m;
        if (at >= 0) { at += m; }
    }
}

static size_t shard_tok_bytes(const Writer *w) { return w->wide ? 4 : 2; }

static void shard_header(const Writer *w, int32_t *h, long long n) {
    memset(h, 0, SHARD_HEADER_BYTES);
    h[0] = w->wide ? SHARD_MAGIC_U32 : SHARD_MAGIC;
    h[1] = w->wide ? SHARD_VERSION_U32 : SHARD_VERSION;
    h[2] = (int32_t)n;
    h[3] = SHARD_DOC_SEP_TAG;  // the separator between documents, for the trainer's --doc-mask (dataloader.h)
    h[4] = w->doc_sep;
}

// a shard's token count, when its header is ours (of this run's token width) and its size agrees with it; else -1
static long long shard_count(const Writer *w, const char *path) {
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (f == NULL) { return -1; }
    int32_t h[256], want[256];
    shard_header(w, want, 0);
    int ok = fread(h, 4, 256, f) == 256 && h[0] == want[0] && h[1] == want[1] && h[2] >= 0
             && fstat(fileno(f), &st) == 0 && st.st_size == SHARD_HEADER_BYTES + (long long)shard_tok_bytes(w) * h[2];
    fclose(f);
    return ok ? h[2] : -1;
}

// a complete shard from an earlier run: its header says the full count, and the size agrees
static int shard_complete(const Writer *w, const char *path, long long want) { return shard_count(w, path) == want; }

// ----------------------------------------------------------------------------
// the resume state

// records the shards closed so far (w->k is the one just closed) and where the next begins
static void state_write(Writer *w) {
    snprintf(g_tmp_path, sizeof(g_tmp_path), "%s.tmp", w->state_path);
    FILE *f = fopen(g_tmp_path, "w");
    if (f == NULL) { int e = errno; g_tmp_path[0] = 0; corpus_die("%s.tmp: cannot create: %s", w->state_path, strerror(e)); }
    DocPos d = w->at_end ? (DocPos){w->n_inputs, 0, 0} : w->doc;
    long long emitted = w->at_end ? 0 : w->doc_emitted;
    fprintf(f, "%sshards %d %lld\nnext %d %lld %lld %lld\nlast %d %lld %lld %lld %lld\ninputs %d\n%send\n", w->state_head,
            w->k + 1, w->tokens_before + w->tokens, d.input, d.off, d.line, emitted, w->shard_doc.input, w->shard_doc.off,
            w->shard_doc.line, w->shard_emitted, w->cur, w->n_inputs, w->state_inputs);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) { corpus_die("%s: write failed: %s", g_tmp_path, strerror(errno)); }
    if (fclose(f) != 0) { corpus_die("%s: close failed: %s", g_tmp_path, strerror(errno)); }
    if (rename(g_tmp_path, w->state_path) != 0) { corpus_die("%s: cannot rename to %s: %s", g_tmp_path, w->state_path, strerror(errno)); }
    g_tmp_path[0] = 0;
}

static void state_changed(const Writer *w, const char *was, const char *now, size_t now_len) {
    if (strncmp(now, "tokenize-shards-state ", 22) == 0) {
        corpus_die("--resume: %s is not a resume state of this version (first line '%s', expected '%.*s'); remove it, "
                   "or run without --resume", w->state_path, was, (int)now_len, now);
    }
    // the key: "--flag", "tokenizer", or "input N"
    size_t key = strcspn(now, " \n");
    if (strncmp(now, "input ", 6) == 0) { key = 6 + strcspn(now + 6, " \n"); }
    corpus_die("--resume: %.*s changed since the shards recorded in %s were made: it was '%s', now '%.*s'; restore it, "
               "or run without --resume to start over", (int)key, now, w->state_path, was, (int)now_len, now);
}

// --resume: reads the state, checks it and the complete shards, and sets the writer to
// continue after them; *next is where reading starts. 0 when there is no state. redo_last
// (standard input, whose skipped bytes cannot be checked): start at the last complete
// shard instead, which is then made again and compared, a check that the input is the same.
static int state_load(Writer *w, DocPos *next, int redo_last) {
    FILE *f = fopen(w->state_path, "r");
    if (f == NULL) {
        if (errno == ENOENT) { return 0; }
        corpus_die("%s: cannot open: %s", w->state_path, strerror(errno));
    }
    static char line[65536];
    for (const char *h = w->state_head; *h;) {
        size_t n = strcspn(h, "\n");
        if (fgets(line, sizeof(line), f) == NULL) { corpus_die("--resume: %s ends early; remove it, or run without --resume", w->state_path); }
        line[strcspn(line, "\n")] = 0;
        if (strlen(line) != n || memcmp(line, h, n) != 0) { state_changed(w, line, h, n); }
        h += n + (h[n] == '\n');
    }
    int k, n_was;
    long long total, emitted, last_emitted, last_count;
    DocPos d, last;
    if (fscanf(f, "shards %d %lld\nnext %d %lld %lld %lld\nlast %d %lld %lld %lld %lld\ninputs %d\n", &k, &total, &d.input,
               &d.off, &d.line, &emitted, &last.input, &last.off, &last.line, &last_emitted, &last_count, &n_was) != 12
        || k < 1 || d.input < 0 || d.input > n_was || d.off < 0 || emitted < 0 || last.input < 0 || last.input > d.input
        || last.off < 0 || last_emitted < 0 || last_count < 0 || last_count > total) {
        corpus_die("--resume: %s is malformed after its settings; remove it, or run without --resume", w->state_path);
    }
    // the inputs up to the one the next shard starts in must be the same; later ones are read whole anyway
    if (d.input == n_was ? w->n_inputs != n_was : w->n_inputs <= d.input) {
        corpus_die("--resume: the inputs changed since the shards recorded in %s were made: %d input(s) then, %d now; "
                   "restore them, or run without --resume to start over", w->state_path, n_was, w->n_inputs);
    }
    const char *h = w->state_inputs;
    for (int i = 0; i <= d.input && i < n_was; i++) {
        size_t n = strcspn(h, "\n");
        if (fgets(line, sizeof(line), f) == NULL) { corpus_die("--resume: %s ends early; remove it, or run without --resume", w->state_path); }
        line[strcspn(line, "\n")] = 0;
        if (strlen(line) != n || memcmp(line, h, n) != 0) { state_changed(w, line, h, n); }
        h += n + 1;
    }
    fclose(f);
    long long sum = 0;
    for (int i = 0; i < k; i++) {
        char path[4096];
        shard_path(w, i, path, sizeof(path));
        long long c = shard_count(w, path);
        if (c < 0) {
            corpus_die("--resume: %s records %d complete shard(s), but %s is missing or not a complete shard; remove %s "
                       "to start over", w->state_path, k, path, w->state_path);
        }
        sum += c;
    }
    if (sum != total) {
        corpus_die("--resume: %s records %lld tokens in %d shard(s), the shards hold %lld; remove it to start over",
                   w->state_path, total, k, sum);
    }
    w->k = redo_last ? k - 1 : k;
    w->tokens_before = redo_last ? total - last_count : total;
    w->skip = redo_last ? last_emitted : emitted;
    w->shards_kept = w->k;
    *next = redo_last ? last : d;
    return 1;
}

static void writer_open(Writer *w) {
    shard_path(w, w->k, w->final, sizeof(w->final));
    w->cur = 0;
    w->shard_doc = w->doc;
    w->shard_emitted = w->doc_emitted;
    w->open = 1;
    if (w->resume && shard_target(w) > 0 && shard_complete(w, w->final, shard_target(w))) {
        w->cmp = fopen(w->final, "rb");
        if (w->cmp == NULL || fseek(w->cmp, SHARD_HEADER_BYTES, SEEK_SET) != 0) { corpus_die("%s: cannot reopen", w->final); }
        return;
    }
    snprintf(g_tmp_path, sizeof(g_tmp_path), "%s.tmp", w->final);
    w->fd = open(g_tmp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) { int e = errno; g_tmp_path[0] = 0; corpus_die("%s.tmp: cannot create: %s", w->final, strerror(e)); }
    int32_t h[256];
    shard_header(w, h, 0);
    write_all(w->fd, h, SHARD_HEADER_BYTES, -1);
}

static void writer_flush(Writer *w) {
    if (w->nbuf) { write_all(w->fd, w->buf, w->nbuf * shard_tok_bytes(w), -1); }
    w->nbuf = 0;
}

static void writer_close(Writer *w) {
    if (w->cmp) {
        fclose(w->cmp);
        w->cmp = NULL;
        w->shards_kept++;
        clear_progress();
        printf("kept %s: %lld tokens (complete, --resume)\n", w->final, w->cur);
    } else {
        writer_flush(w);
        int32_t h[256];
        shard_header(w, h, w->cur);
        write_all(w->fd, h, SHARD_HEADER_BYTES, 0);
        if (fsync(w->fd) != 0) { corpus_die("%s: fsync failed: %s", g_tmp_path, strerror(errno)); }
        if (close(w->fd) != 0) { corpus_die("%s: close failed: %s", g_tmp_path, strerror(errno)); }
        if (rename(g_tmp_path, w->final) != 0) { corpus_die("%s: cannot rename to %s: %s", g_tmp_path, w->final, strerror(errno)); }
        g_tmp_path[0] = 0;
        w->shards_written++;
        clear_progress();
        printf("wrote %s: %lld tokens\n", w->final, w->cur);
    }
    if (!w->no_state) { state_write(w); }
    fflush(stdout);
    w->open = 0;
    w->k++;
}

// appends tokens to the stream; a full shard is closed only when more tokens follow, so
// that the end of the input can still move a token from validation to train
// t[0..n) as the shard stores them (2 or 4 bytes each) into out
static void shard_pack(const Writer *w, const uint32_t *t, size_t n, unsigned char *out) {
    if (w->wide) { memcpy(out, t, n * 4); return; }
    uint16_t *o = (uint16_t *)out;
    for (size_t i = 0; i < n; i++) { o[i] = (uint16_t)t[i]; }
}

static void writer_put(Writer *w, const uint32_t *t, size_t n) {
    if (w->skip > 0) {  // --resume: the complete shards hold these
        size_t d = n < (size_t)w->skip ? n : (size_t)w->skip;
        t += d;
        n -= d;
        w->skip -= (long long)d;
        w->doc_emitted += (long long)d;
    }
    while (n > 0) {
        if (w->open && w->cur == shard_target(w)) { writer_close(w); }
        if (!w->open) { writer_open(w); continue; }
        size_t m = (size_t)(shard_target(w) - w->cur);
        if (m > n) { m = n; }
        if (w->cmp) {
            unsigned char old[4 * 4096], now[4 * 4096];
            size_t tb = shard_tok_bytes(w);
            for (size_t i = 0; i < m;) {
                size_t c = m - i < 4096 ? m - i : 4096;
                shard_pack(w, t + i, c, now);
                if (fread(old, tb, c, w->cmp) != c || memcmp(old, now, c * tb) != 0) {
                    corpus_die("--resume: %s holds other tokens than these inputs make (near token %lld); "
                               "remove it, or run without --resume", w->final, w->cur + (long long)i);
                }
                i += c;
            }
        } else {
            for (size_t i = 0; i < m;) {
                size_t c = m - i < WRITE_BUF_TOKENS - w->nbuf ? m - i : WRITE_BUF_TOKENS - w->nbuf;
                shard_pack(w, t + i, c, w->buf + w->nbuf * shard_tok_bytes(w));
                w->nbuf += c;
                i += c;
                if (w->nbuf == WRITE_BUF_TOKENS) { writer_flush(w); }
            }
        }
        w->cur += (long long)m;
        w->tokens += (long long)m;
        w->doc_emitted += (long long)m;
        t += m;
        n -= m;
    }
}

// the end of the stream: close the last shard; the train split must not be empty, so a
// stream that ends inside the validation shard gives its last token to train_*
static void writer_finish(Writer *w, uint32_t last) {
    if (w->k == 0 && w->open) {
        if (w->cur < 2) { corpus_die("the inputs make %lld token(s): too few for a validation and a train shard", w->cur); }
        if (w->cmp) { corpus_die("--resume: %s is complete but these inputs end inside it; run without --resume", w->final); }
        if (w->cur < w->val_tokens) {
            fprintf(stderr, "tokenize: note: --val-tokens %lld clamped to %lld to leave one train token\n", w->val_tokens, w->cur - 1);
        }
        writer_flush(w);
        if (ftruncate(w->fd, SHARD_HEADER_BYTES + (long long)shard_tok_bytes(w) * (w->cur - 1)) != 0) { corpus_die("%s: truncate failed: %s", g_tmp_path, strerror(errno)); }
        w->cur--;
        w->tokens--;
        w->doc_emitted--;
        w->no_state = 1;  // the next token is the stream's last, moved: not a place to resume from
        writer_close(w);
        w->no_state = 0;
        writer_put(w, &last, 1);
    }
    w->at_end = 1;
    if (w->open) { writer_close(w); }
    free(w->buf);
    w->buf = NULL;
}

// ----------------------------------------------------------------------------
// the pool of encoding threads

enum { B_FREE = 0, B_FILLING, B_SUBMITTED, B_ENCODED };

typedef struct {
    Batch *slots;
    int nslots, nthreads;
    size_t batch_bytes;
    long long acquired, submitted, taken, written;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t *th;
    Tokenizer *base;
    Writer *w;
    long long docs;
    uint32_t last;
    void (*on_written)(void *ctx);
    void *ctx;
} Pool;

typedef struct { Pool *p; int id; } WorkerArg;

static void encode_batch(Tokenizer *t, Batch *b) {
    size_t need = b->len + b->ndocs + 1;  // a token covers at least one byte
    if (need > b->tcap) {
        b->tcap = need;
        b->tok = (uint32_t *)reallocCheck(b->tok, need * sizeof(uint32_t));
    }
    b->ntok = 0;
    for (size_t i = 0; i < b->ndocs; i++) {
        if (b->eot[i]) { b->tok[b->ntok++] = (uint32_t)tokenizer_eot(t); }  // the document separator
        int *ids;
        size_t n;
        if (tokenizer_encode(t, b->text + b->off[i], b->dlen[i], &ids, &n) != 0) { exit(1); }
        for (size_t k = 0; k < n; k++) { b->tok[b->ntok + k] = (uint32_t)ids[k]; }
        b->ntok += n;
        b->tend[i] = b->ntok;
        free(ids);
    }
}

static void *worker_main(void *arg) {
    Pool *p = ((WorkerArg *)arg)->p;
    Tokenizer t;
    tokenizer_share(&t, p->base);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->taken == p->submitted) { pthread_cond_wait(&p->work, &p->mu); }
        if (p->taken == p->submitted) { pthread_mutex_unlock(&p->mu); break; }
        Batch *b = &p->slots[p->taken++ % p->nslots];
        pthread_mutex_unlock(&p->mu);
        encode_batch(&t, b);
        pthread_mutex_lock(&p->mu);
        b->state = B_ENCODED;
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    tokenizer_free_shared(&t);
    return NULL;
}

static void pool_start(Pool *p, Tokenizer *base, Writer *w, int nthreads, size_t batch_bytes) {
    memset(p, 0, sizeof(*p));
    p->base = base;
    p->w = w;
    p->nthreads = nthreads;
    p->nslots = 2 * nthreads + 2;
    p->batch_bytes = batch_bytes;
    p->slots = (Batch *)mallocCheck((size_t)p->nslots * sizeof(Batch));
    memset(p->slots, 0, (size_t)p->nslots * sizeof(Batch));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->th = (pthread_t *)mallocCheck((size_t)nthreads * sizeof(pthread_t));
    static WorkerArg args[1024];
    for (int i = 0; i < nthreads; i++) {
        args[i].p = p;
        args[i].id = i;
        if (pthread_create(&p->th[i], NULL, worker_main, &args[i]) != 0) { corpus_die("cannot start thread %d", i); }
    }
}

// writes the oldest encoded batch (waiting for it)
static void pool_write_next(Pool *p) {
    Batch *b = &p->slots[p->written % p->nslots];
    pthread_mutex_lock(&p->mu);
    while (b->state != B_ENCODED) { pthread_cond_wait(&p->done, &p->mu); }
    pthread_mutex_unlock(&p->mu);
    // document by document, so that the writer knows where the one at a shard boundary starts
    for (size_t i = 0, t0 = 0; i < b->ndocs; t0 = b->tend[i], i++) {
        if (b->eot[i]) { p->w->doc = b->pos[i]; p->w->doc_emitted = 0; p->docs++; }
        writer_put(p->w, b->tok + t0, b->tend[i] - t0);
    }
    if (b->ntok) { p->last = b->tok[b->ntok - 1]; }
    // a long document grew this slot: give the memory back
    if (b->cap > 4 * p->batch_bytes) { free(b->text); b->text = NULL; b->cap = 0; }
    if (b->tcap > 4 * p->batch_bytes) { free(b->tok); b->tok = NULL; b->tcap = 0; }
    b->state = B_FREE;
    p->written++;
    if (p->on_written) { p->on_written(p->ctx); }
}

static Batch *pool_acquire(Pool *p) {
    while (p->acquired - p->written >= p->nslots) { pool_write_next(p); }
    Batch *b = &p->slots[p->acquired % p->nslots];
    b->index = p->acquired++;
    b->len = b->ndocs = b->ntok = 0;
    b->state = B_FILLING;
    return b;
}

static void pool_submit(Pool *p, Batch *b) {
    pthread_mutex_lock(&p->mu);
    if (b->index != p->submitted) { pthread_mutex_unlock(&p->mu); corpus_die("internal: batch %lld submitted out of order", b->index); }
    b->state = B_SUBMITTED;
    p->submitted++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

// corpus.h's BatchHandoff: submit b, continue in a fresh batch with b's tail
static Batch *pool_handoff(void *ctx, Batch *b, size_t keep_from) {
    Pool *p = (Pool *)ctx;
    Batch *nb = pool_acquire(p);
    size_t keep = b->len - keep_from;
    batch_reserve(nb, keep + CORPUS_READ_CHUNK);
    memcpy(nb->text, b->text + keep_from, keep);
    nb->len = keep;
    pool_submit(p, b);
    return nb;
}

// submits the last batch, writes everything, stops the threads
static void pool_finish(Pool *p, Batch *b) {
    pool_submit(p, b);
    while (p->written < p->submitted) { pool_write_next(p); }
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++) { pthread_join(p->th[i], NULL); }
    for (int i = 0; i < p->nslots; i++) {
        free(p->slots[i].text); free(p->slots[i].tok); free(p->slots[i].off); free(p->slots[i].dlen); free(p->slots[i].eot);
        free(p->slots[i].pos); free(p->slots[i].tend);
    }
    free(p->slots);
    free(p->th);
}

#endif // SHARDS_H
