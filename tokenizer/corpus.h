/*
The inputs of `./tokenize shards`: which files a --in names, and how their bytes become
documents, streamed in work units (Batch) of about --batch-kb of text so that memory does
not grow with the corpus. Serves tokenize.c only.

- A --in is a file, a directory (its files with a known extension, sorted by name, not
  recursive), a glob (quoted, expanded here, sorted by name) or "-" (standard input).
- .txt and unknown extensions: documents split at --doc-sep (Python's text.split(sep)).
- .jsonl / .json (and .gz of either, decoded by a `gzip -dc` child process): one JSON
  object per line, the document is its --text-field string; blank lines are skipped.
- Invalid UTF-8 is refused, naming the file, line and byte; a JSON \u escape of a lone
  surrogate becomes U+FFFD (what tiktoken's encode makes of such a Python string).
- framed (--format framed only: what scripts/parquet_text.py writes for scripts/fineweb.py):
  each document is an 8-byte little-endian byte count, then its UTF-8 bytes; no escaping,
  so the Python side streams Arrow's buffers without encoding JSON.
- A document longer than a work unit is cut between "letter space letter" (ASCII), where
  GPT-2's, Llama 3's and Qwen 2's pre-tokenisers always end a piece, so the pieces encode to
  the same ids as the whole (unless a tokenizer.json's added token spans such a place); the
  text after a cut is a continuation (no document separator before it).

Every error names the input, the line where there is one, and what was expected, then calls
corpus_die, which runs the caller's cleanup hook (the shard writer removes its temporary).
*/
#ifndef CORPUS_H
#define CORPUS_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../tokenizer.h"

#define CORPUS_READ_CHUNK (1 << 16)

static void (*corpus_cleanup)(void) = NULL;  // set by the shard writer

static void corpus_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void corpus_die(const char *fmt, ...) {
    char msg[8192];  // formatted first: the cleanup may clear a path the message names
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (corpus_cleanup) { corpus_cleanup(); }
    fprintf(stderr, "%stokenize: %s\n", isatty(2) ? "\r\033[K" : "", msg);  // over a progress line

    exit(1);
}

// ----------------------------------------------------------------------------
// the list of input files

enum { FMT_TXT = 0, FMT_JSONL = 1, FMT_FRAMED = 2 };

typedef struct { char **paths; int n, cap; long long known_bytes; int size_unknown; } InputList;

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static int is_gz(const char *path) { return ends_with(path, ".gz"); }

// -1: not a corpus file (skipped inside a directory); otherwise FMT_*
static int known_format(const char *path) {
    if (ends_with(path, ".jsonl") || ends_with(path, ".json") || ends_with(path, ".jsonl.gz") || ends_with(path, ".json.gz")) {
        return FMT_JSONL;
    }
    if (ends_with(path, ".txt") || ends_with(path, ".txt.gz")) { return FMT_TXT; }
    return -1;
}

static int input_format(const char *path, const char *forced) {
    if (forced != NULL) { return strcmp(forced, "jsonl") == 0 ? FMT_JSONL : strcmp(forced, "framed") == 0 ? FMT_FRAMED : FMT_TXT; }
    int f = known_format(path);
    return f < 0 ? FMT_TXT : f;  // a file named explicitly is text whatever its name
}

static void inputs_push(InputList *l, const char *path) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->paths = (char **)reallocCheck(l->paths, (size_t)l->cap * sizeof(char *));
    }
    l->paths[l->n++] = strdup(path);
    struct stat st;
    if (strcmp(path, "-") == 0 || is_gz(path) || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        l->size_unknown = 1;
    } else {
        l->known_bytes += (long long)st.st_size;
    }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void inputs_add_dir(InputList *l, const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) { corpus_die("--in %s: cannot open directory: %s", dir, strerror(errno)); }
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || known_format(e->d_name) < 0) { continue; }
        if (n == cap) { cap = cap ? 2 * cap : 64; names = (char **)reallocCheck(names, (size_t)cap * sizeof(char *)); }
        size_t a = strlen(dir), b = strlen(e->d_name);
        names[n] = (char *)mallocCheck(a + b + 2);
        snprintf(names[n], a + b + 2, "%s%s%s", dir, a && dir[a - 1] == '/' ? "" : "/", e->d_name);
        n++;
    }
    closedir(d);
    if (n == 0) { corpus_die("--in %s: the directory holds no .txt, .txt.gz, .jsonl, .json, .jsonl.gz or .json.gz file", dir); }
    qsort(names, (size_t)n, sizeof(char *), cmp_str);
    for (int i = 0; i < n; i++) { inputs_push(l, names[i]); free(names[i]); }
    free(names);
}

// one --in value: "-", a file, a directory, or a glob (sorted by byte order, not locale)
static void inputs_add(InputList *l, const char *spec) {
    struct stat st;
    if (strcmp(spec, "-") == 0) { inputs_push(l, spec); return; }
    if (stat(spec, &st) == 0) {
        if (S_ISDIR(st.st_mode)) { inputs_add_dir(l, spec); } else { inputs_push(l, spec); }
        return;
    }
    if (strpbrk(spec, "*?[") == NULL) { corpus_die("--in %s: cannot open: %s", spec, strerror(errno)); }
    glob_t g;
    int rc = glob(spec, GLOB_NOSORT, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) { corpus_die("--in %s: the pattern matches no file", spec); }
    if (rc != 0) { corpus_die("--in %s: cannot expand the pattern", spec); }
    qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_str);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (stat(g.gl_pathv[i], &st) == 0 && S_ISDIR(st.st_mode)) { inputs_add_dir(l, g.gl_pathv[i]); }
        else { inputs_push(l, g.gl_pathv[i]); }
    }
    globfree(&g);
}

// ----------------------------------------------------------------------------
// a work unit: whole documents (or pieces of a long one) and, once encoded, their tokens

// where a document starts: what --resume records for the one a shard boundary falls in
typedef struct {
    int input;        // index in the input list
    long long off;    // byte offset of its first byte (of the decompressed stream)
    long long line;   // newlines before it (.txt, .jsonl) or documents before it (framed)
} DocPos;

typedef struct {
    unsigned char *text;
    size_t len, cap;
    size_t *off, *dlen;      // document i is text[off[i] .. off[i] + dlen[i])
    unsigned char *eot;      // 1: <|endoftext|> before it; 0: it continues the previous piece
    DocPos *pos;             // where document i starts (meaningful where eot[i] is 1)
    size_t *tend;            // its tokens end at tok[tend[i]] (filled by a worker)
    size_t ndocs, dcap;
    uint32_t *tok;           // filled by a worker (written as uint16 or uint32, shards.h)
    size_t ntok, tcap;
    long long index;         // position in the input order
    int state;
} Batch;

static void batch_reserve(Batch *b, size_t len) {
    if (len <= b->cap) { return; }
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < len) { cap *= 2; }
    b->text = (unsigned char *)reallocCheck(b->text, cap);
    b->cap = cap;
}

static void batch_add_doc(Batch *b, size_t off, size_t len, int eot, DocPos pos) {
    if (b->ndocs == b->dcap) {
        b->dcap = b->dcap ? 2 * b->dcap : 1024;
        b->off = (size_t *)reallocCheck(b->off, b->dcap * sizeof(size_t));
        b->dlen = (size_t *)reallocCheck(b->dlen, b->dcap * sizeof(size_t));
        b->eot = (unsigned char *)reallocCheck(b->eot, b->dcap);
        b->pos = (DocPos *)reallocCheck(b->pos, b->dcap * sizeof(DocPos));
        b->tend = (size_t *)reallocCheck(b->tend, b->dcap * sizeof(size_t));
    }
    b->off[b->ndocs] = off;
    b->dlen[b->ndocs] = len;
    b->eot[b->ndocs] = (unsigned char)eot;
    b->pos[b->ndocs] = pos;
    b->ndocs++;
}

// The reader hands full batches to this (tokenize.c's pool): it submits b and returns an
// empty batch, after copying b->text[keep_from .. b->len) to its start.
typedef Batch *(*BatchHandoff)(void *ctx, Batch *b, size_t keep_from);

// ----------------------------------------------------------------------------
// an open input: a file descriptor, possibly the pipe from a gzip child

typedef struct {
    const char *path;
    int index;          // in the input list
    int fd;
    pid_t gz_pid;
    long long bytes;    // the reader's offset in the (decompressed) stream, skipped bytes included
    long long start;    // bytes skipped at the start (--resume), not read for tokens
    long long lines;    // newlines (framed: documents) before the reader's current position
} Source;

static size_t source_read(Source *s, unsigned char *dst, size_t cap);

// --resume: starts at byte off, with line newlines (or documents) before it. A plain file
// seeks there; a gzip stream or a pipe has no random access, so the bytes up to it are read
// and dropped (gzip's or the producer's time, not the tokenizer's).
static void source_skip(Source *s, long long off, long long line) {
    s->lines = line;
    if (off == 0) { return; }
    if (s->gz_pid < 0 && lseek(s->fd, (off_t)off, SEEK_SET) == (off_t)off) {
        s->bytes = off;
    } else {
        unsigned char junk[CORPUS_READ_CHUNK];
        while (s->bytes < off) {
            size_t want = off - s->bytes < (long long)sizeof(junk) ? (size_t)(off - s->bytes) : sizeof(junk);
            if (source_read(s, junk, want) == 0) { corpus_die("%s: --resume: the stream ends before byte %lld", s->path, off); }
        }
    }
    s->start = off;
}

static void source_open(Source *s, const char *path, int index) {
    memset(s, 0, sizeof(*s));
    s->path = strcmp(path, "-") == 0 ? "stdin" : path;
    s->index = index;
    s->gz_pid = -1;
    if (strcmp(path, "-") == 0) { s->fd = 0; return; }
    int fd = open(path, O_RDONLY);
    if (fd < 0) { corpus_die("%s: cannot open: %s", path, strerror(errno)); }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) { corpus_die("%s: is a directory, expected a file", path); }
    if (!is_gz(path)) { s->fd = fd; return; }
    // gzip in a child: no link-time dependency, and it decompresses on another core
    int p[2];
    if (pipe(p) != 0) { corpus_die("%s: pipe: %s", path, strerror(errno)); }
    pid_t pid = fork();
    if (pid < 0) { corpus_die("%s: fork: %s", path, strerror(errno)); }
    if (pid == 0) {
        dup2(fd, 0);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        close(fd);
        execlp("gzip", "gzip", "-dc", (char *)NULL);
        _exit(127);
    }
    close(fd);
    close(p[1]);
    s->fd = p[0];
    s->gz_pid = pid;
}

static size_t source_read(Source *s, unsigned char *dst, size_t cap) {
    for (;;) {
        ssize_t got = read(s->fd, dst, cap);
        if (got >= 0) { s->bytes += got; return (size_t)got; }
        if (errno != EINTR) { corpus_die("%s: read error: %s", s->path, strerror(errno)); }
    }
}

static void source_close(Source *s) {
    if (s->fd != 0) { close(s->fd); }
    if (s->gz_pid > 0) {
        int status;
        while (waitpid(s->gz_pid, &status, 0) < 0 && errno == EINTR) {}
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            corpus_die("%s: `gzip -dc` failed (exit status %d%s): expected gzip-compressed data", s->path, code,
                       code == 127 ? ", gzip not found on the PATH" : "");
        }
    }
}

static long long count_newlines(const unsigned char *p, size_t n) {
    long long c = 0;
    const unsigned char *end = p + n;
    while (p < end && (p = (const unsigned char *)memchr(p, '\n', (size_t)(end - p))) != NULL) { c++; p++; }
    return c;
}

// ----------------------------------------------------------------------------
// UTF-8

// Length of the valid prefix of s[0..n); *bad says whether it stops at an invalid byte
// (else at the end, or, with at_eof == 0, at a sequence whose rest is still to be read).
static size_t utf8_valid_prefix(const unsigned char *s, size_t n, int at_eof, int *bad) {
    *bad = 0;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ULL) == 0) { i += 8; continue; }
        }
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        uint32_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) { need = 1; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) { lo = 0xA0; } if (c == 0xED) { hi = 0x9F; } }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) { lo = 0x90; } if (c == 0xF4) { hi = 0x8F; } }
        else { *bad = 1; return i; }
        for (size_t k = 1; k <= need; k++) {
            if (i + k >= n) { *bad = at_eof; return i; }
            unsigned char d = s[i + k];
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) { *bad = 1; return i; }
        }
        i += need + 1;
    }
    return i;
}

static void utf8_die(const Source *s, const unsigned char *line_start, const unsigned char *bad, long long line) {
    corpus_die("%s:%lld: invalid UTF-8 (byte 0x%02x at column %lld); documents must be UTF-8 text, and bad "
               "bytes are refused rather than replaced", s->path, line, *bad, (long long)(bad - line_start) + 1);
}

// ----------------------------------------------------------------------------
// .txt: documents separated by sep

// a cut between "letter space letter" (ASCII): GPT-2's pre-tokeniser ends a piece before a
// space that follows a non-space (no pattern but a run of white space continues through a
// space, and it looks only forward), so encoding the two sides apart gives the same ids. A
// space inside a run of spaces is no such place: "a   b" is "a", "  ", " b".
static size_t find_cut(const unsigned char *t, size_t from, size_t to) {
    for (size_t p = to; p > from + 1; p--) {
        unsigned char a = t[p - 1], c = t[p + 1];
        if (t[p] == ' ' && ((a | 32) >= 'a' && (a | 32) <= 'z') && ((c | 32) >= 'a' && (c | 32) <= 'z')) { return p; }
    }
    return 0;
}

// the validity check of newly read bytes [*valid, b->len): dies at the first bad byte
static void txt_check_utf8(Source *s, Batch *b, size_t *valid, int at_eof) {
    int bad;
    size_t ok = utf8_valid_prefix(b->text + *valid, b->len - *valid, at_eof, &bad);
    if (bad) {
        const unsigned char *bad = b->text + *valid + ok;
        long long line = s->lines + count_newlines(b->text + *valid, ok) + 1;
        const unsigned char *ls = bad;
        while (ls > b->text && ls[-1] != '\n') { ls--; }
        utf8_die(s, ls, bad, line);
    }
    s->lines += count_newlines(b->text + *valid, ok);
    *valid += ok;
}

static Batch *read_txt(Source *s, Batch *b, const char *sep, size_t seplen, size_t batch_bytes,
                       BatchHandoff handoff, void *ctx) {
    size_t pstart = b->len, scan = b->len, valid = b->len, cut_scan = b->len;
    int eot = 1;
    long long line_p = s->lines;  // newlines before pstart: counted once per byte, as pstart moves
    DocPos pos = {s->index, s->bytes, s->lines};
    for (;;) {
        batch_reserve(b, b->len + CORPUS_READ_CHUNK);
        size_t got = source_read(s, b->text + b->len, CORPUS_READ_CHUNK);
        b->len += got;
        txt_check_utf8(s, b, &valid, got == 0);
        if (got == 0) { break; }
        for (;;) {  // close every document whose separator is now in the buffer
            const unsigned char *hit = NULL;
            for (size_t k = scan; k + seplen <= b->len; k++) {
                const unsigned char *q = (const unsigned char *)memchr(b->text + k, sep[0], b->len - k - seplen + 1);
                if (q == NULL) { break; }
                k = (size_t)(q - b->text);
                if (memcmp(q, sep, seplen) == 0) { hit = q; break; }
            }
            if (hit == NULL) { scan = b->len >= seplen ? b->len - seplen + 1 : 0; if (scan < pstart) { scan = pstart; } break; }
            batch_add_doc(b, pstart, (size_t)(hit - b->text) - pstart, eot, pos);
            size_t next = (size_t)(hit - b->text) + seplen;
            line_p += count_newlines(b->text + pstart, next - pstart);
            pstart = scan = next;
            eot = 1;
            pos.off = s->bytes - (long long)b->len + (long long)pstart;  // the buffer ends at s->bytes
            pos.line = line_p;
        }
        if (b->len < batch_bytes) { continue; }
        if (b->len - pstart >= batch_bytes && b->len > seplen + 2) {
            // a long document: cut it where the pieces encode as the whole
            size_t from = cut_scan > pstart ? cut_scan : pstart;
            size_t cut = find_cut(b->text, from, b->len - seplen - 2);
            cut_scan = b->len - seplen - 2;
            if (cut > pstart) {
                batch_add_doc(b, pstart, cut - pstart, eot, pos);
                line_p += count_newlines(b->text + pstart, cut - pstart);
                pstart = cut;
                eot = 0;
            }
        }
        if (b->ndocs == 0) { continue; }  // no cut found yet: the piece grows
        size_t shift = pstart;
        b = handoff(ctx, b, pstart);
        pstart -= shift; scan -= shift; valid -= shift; cut_scan = cut_scan > shift ? cut_scan - shift : 0;
    }
    batch_add_doc(b, pstart, b->len - pstart, eot, pos);  // the text after the last separator
    return b;
}

// ----------------------------------------------------------------------------
// .jsonl: one object per line, the document is one string field

typedef struct { const Source *s; long long line; const unsigned char *p, *start, *end; } JLine;

static void jl_die(const JLine *j, const char *what) {
    corpus_die("%s:%lld: %s (column %lld)", j->s->path, j->line, what, (long long)(j->p - j->start) + 1);
}

static void jl_ws(JLine *j) { while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r')) { j->p++; } }

static uint32_t jl_hex4(JLine *j) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        if (j->p >= j->end) { jl_die(j, "unterminated \\u escape"); }
        unsigned char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') { v |= c - '0'; }
        else if ((c | 32) >= 'a' && (c | 32) <= 'f') { v |= (c | 32) - 'a' + 10; }
        else { j->p--; jl_die(j, "bad \\u escape: expected 4 hex digits"); }
    }
    return v;
}

static size_t put_utf8(unsigned char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12)); o[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        o[2] = (unsigned char)(0x80 | (cp & 63)); return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 63)); o[3] = (unsigned char)(0x80 | (cp & 63)); return 4;
}

// A JSON string at j->p (the opening quote); its decoded bytes go to out (room for
// as many bytes as the raw string has) when out is not NULL. Returns the decoded length.
static size_t jl_string(JLine *j, unsigned char *out) {
    if (j->p >= j->end || *j->p != '"') { jl_die(j, "expected a string"); }
    j->p++;
    size_t n = 0;
    for (;;) {
        const unsigned char *q = j->p;
        // 8 bytes at a time while none is '"', '\\' or a control character (the usual case)
        for (uint64_t w; q + 8 <= j->end; q += 8) {
            memcpy(&w, q, 8);
            const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
            uint64_t hit = ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | (w - ones * 0x20);
            if (hit & ~w & highs) { break; }
        }
        while (q < j->end && *q != '"' && *q != '\\' && *q >= 0x20) { q++; }
        if (out) { memcpy(out + n, j->p, (size_t)(q - j->p)); }
        n += (size_t)(q - j->p);
        j->p = q;
        if (q >= j->end) { jl_die(j, "unterminated string"); }
        if (*q == '"') { j->p++; return n; }
        if (*q < 0x20) { jl_die(j, "control character in a string (JSON needs it escaped)"); }
        j->p++;  // backslash
        if (j->p >= j->end) { jl_die(j, "unterminated escape"); }
        unsigned char e = *j->p++, c;
        uint32_t cp;
        switch (e) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u':
            cp = jl_hex4(j);
            if (cp >= 0xD800 && cp <= 0xDBFF && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                const unsigned char *save = j->p;
                j->p += 2;
                uint32_t lo = jl_hex4(j);
                if (lo >= 0xDC00 && lo <= 0xDFFF) { cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00); }
                else { j->p = save; }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) { cp = 0xFFFD; }  // a lone surrogate, as tiktoken replaces it
            { unsigned char tmp[4]; size_t k = put_utf8(tmp, cp); if (out) { memcpy(out + n, tmp, k); } n += k; }
            continue;
        default: j->p--; jl_die(j, "unknown escape in a string");
        }
        if (out) { out[n] = c; }
        n++;
    }
}

// skips any JSON value (nested objects and arrays too)
static void jl_skip_value(JLine *j) {
    int depth = 0;
    do {
        jl_ws(j);
        if (j->p >= j->end) { jl_die(j, "unexpected end of line inside a value"); }
        unsigned char c = *j->p;
        if (c == '"') { jl_string(j, NULL); }
        else if (c == '{' || c == '[') { depth++; j->p++; }
        else if (c == '}' || c == ']') { if (depth == 0) { jl_die(j, "unexpected bracket"); } depth--; j->p++; }
        else if (c == ',' || c == ':') { if (depth == 0) { jl_die(j, "expected a value"); } j->p++; }
        else {
            const unsigned char *q = j->p;
            while (q < j->end && strchr("+-.0123456789eEtruefalsn", *q) != NULL) { q++; }
            if (q == j->p) { jl_die(j, "expected a value"); }
            j->p = q;
        }
    } while (depth > 0);
}

// parses one line; appends the field's text to b and returns 1 (0 for a blank line)
static int jl_parse(JLine *j, const char *field, Batch *b, DocPos pos) {
    jl_ws(j);
    if (j->p == j->end) { return 0; }
    if (*j->p != '{') { jl_die(j, "expected a JSON object ('{')"); }
    j->p++;
    size_t flen = strlen(field), start = b->len;
    int found = 0;
    unsigned char key[256];
    for (int first = 1;; first = 0) {
        jl_ws(j);
        if (first && j->p < j->end && *j->p == '}') { j->p++; break; }
        const unsigned char *kp = j->p;
        size_t klen = jl_string(j, NULL);
        if (klen == flen && klen < sizeof(key)) { j->p = kp; jl_string(j, key); }
        jl_ws(j);
        if (j->p >= j->end || *j->p != ':') { jl_die(j, "expected ':' after a key"); }
        j->p++;
        jl_ws(j);
        if (klen == flen && klen < sizeof(key) && memcmp(key, field, flen) == 0) {
            if (j->p >= j->end || *j->p != '"') { jl_die(j, "the text field is not a string"); }
            b->len = start;  // a repeated key: the last one wins, as in Python's json
            batch_reserve(b, start + (size_t)(j->end - j->p));
            b->len = start + jl_string(j, b->text + start);
            found = 1;
        } else {
            jl_skip_value(j);
        }
        jl_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; break; }
        jl_die(j, "expected ',' or '}' in the object");
    }
    jl_ws(j);
    if (j->p != j->end) { jl_die(j, "unexpected text after the object"); }
    if (!found) { char msg[320]; snprintf(msg, sizeof(msg), "no \"%s\" field (--text-field)", field); j->p = j->start; jl_die(j, msg); }
    batch_add_doc(b, start, b->len - start, 1, pos);
    return 1;
}

typedef struct { unsigned char *buf; size_t cap; } LineBuf;

static Batch *read_jsonl(Source *s, Batch *b, LineBuf *lb, const char *field, size_t batch_bytes,
                         BatchHandoff handoff, void *ctx, long long *ndocs) {
    size_t have = 0, pos = 0;
    int eof = 0;
    for (;;) {
        unsigned char *nl = (unsigned char *)memchr(lb->buf + pos, '\n', have - pos);
        if (nl == NULL && !eof) {  // need more bytes: keep the partial line, read on
            memmove(lb->buf, lb->buf + pos, have - pos);
            have -= pos; pos = 0;
            if (lb->cap - have < CORPUS_READ_CHUNK) {
                lb->cap = lb->cap ? 2 * lb->cap : 1 << 20;
                lb->buf = (unsigned char *)reallocCheck(lb->buf, lb->cap);
            }
            size_t got = source_read(s, lb->buf + have, lb->cap - have);
            if (got == 0) { eof = 1; }
            have += got;
            continue;
        }
        size_t end = nl ? (size_t)(nl - lb->buf) : have;
        if (nl == NULL && end == pos) { break; }
        DocPos dp = {s->index, s->bytes - (long long)have + (long long)pos, s->lines};  // lb->buf ends at s->bytes
        JLine j = {s, ++s->lines, lb->buf + pos, lb->buf + pos, lb->buf + end};
        int bad;
        size_t ok = utf8_valid_prefix(j.start, end - pos, 1, &bad);
        if (bad) { utf8_die(s, j.start, j.start + ok, j.line); }
        *ndocs += jl_parse(&j, field, b, dp);
        pos = nl ? end + 1 : end;
        if (b->len >= batch_bytes) { b = handoff(ctx, b, b->len); }
        if (nl == NULL) { break; }
    }
    return b;
}

// ----------------------------------------------------------------------------
// framed: an 8-byte little-endian length, then the document's bytes

// reads exactly n bytes into dst; returns 0 at a clean end of input (nothing read)
static int source_read_exact(Source *s, unsigned char *dst, size_t n, long long doc) {
    size_t got = 0;
    while (got < n) {
        size_t m = source_read(s, dst + got, n - got);
        if (m == 0) {
            if (got == 0 && doc >= 0) { return 0; }
            corpus_die("%s: document %lld (byte offset %lld): the input ends %zu bytes into a %s of %zu bytes",
                       s->path, doc < 0 ? -doc : doc + 1, s->bytes - (long long)got, got, doc < 0 ? "document" : "length", n);
        }
        got += m;
    }
    return 1;
}

static Batch *read_framed(Source *s, Batch *b, size_t batch_bytes, BatchHandoff handoff, void *ctx, long long *ndocs) {
    for (long long doc = s->lines;; doc++) {
        DocPos pos = {s->index, s->bytes, doc};
        unsigned char h[8];
        if (!source_read_exact(s, h, 8, doc)) { break; }
        uint64_t n = 0;
        for (int k = 7; k >= 0; k--) { n = (n << 8) | h[k]; }
        if (n > ((uint64_t)1 << 40)) {
            corpus_die("%s: document %lld (byte offset %lld): length %llu is not plausible; is this the framed format "
                       "(8-byte little-endian length, then the text)?", s->path, doc + 1, s->bytes - 8, (unsigned long long)n);
        }
        size_t start = b->len;
        batch_reserve(b, start + (size_t)n);
        source_read_exact(s, b->text + start, (size_t)n, -(doc + 1));
        int bad;
        size_t ok = utf8_valid_prefix(b->text + start, (size_t)n, 1, &bad);
        if (bad) {
            corpus_die("%s: document %lld: invalid UTF-8 (byte 0x%02x at byte %zu of the document); documents must be UTF-8 "
                       "text, and bad bytes are refused rather than replaced", s->path, doc + 1, b->text[start + ok], ok);
        }
        b->len = start + (size_t)n;
        batch_add_doc(b, start, (size_t)n, 1, pos);
        (*ndocs)++;
        if (b->len >= batch_bytes) { b = handoff(ctx, b, b->len); }
    }
    return b;
}

#endif // CORPUS_H
