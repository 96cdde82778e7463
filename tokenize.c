/*
Command-line front end to tokenizer.h (GPT-2 BPE, tiktoken-compatible).

  ./tokenize encode --encoder E.json --merges V.bpe < in.txt       one id per line
  ./tokenize decode (--encoder E.json --merges V.bpe | --tokenizer tok.bin) < ids.txt
  ./tokenize shards --encoder E.json --merges V.bpe --in in.txt --out-dir D
                    [--val-tokens N] [--doc-sep STR]

`shards` produces llm.c-format token files: D/val_000000.bin, D/train_000000.bin
and the decoder file D/tokenizer.bin.

Exit codes: 0 ok, 1 runtime error (missing/corrupt file, I/O), 2 usage error.
Nothing is written before all inputs have been read and encoded, and every output
file is written under a temporary name and renamed into place.

Build: gcc -O2 -Wall -Wextra -std=gnu11 tokenize.c -o tokenize -lm
*/
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "tokenizer.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define DEFAULT_VAL_TOKENS 32768

static const char *USAGE =
    "usage:\n"
    "  tokenize encode --encoder E.json --merges V.bpe < in.txt\n"
    "      encode stdin (raw bytes, UTF-8 text) and print one token id per line\n"
    "  tokenize decode --encoder E.json --merges V.bpe < ids.txt\n"
    "  tokenize decode --tokenizer tok.bin < ids.txt\n"
    "      read token ids (one per line) and write their raw bytes to stdout\n"
    "  tokenize shards --encoder E.json --merges V.bpe --in in.txt --out-dir D\n"
    "                  [--val-tokens N] [--doc-sep STR]\n"
    "      split in.txt into documents at STR (default \"\\n\\n\", i.e. a blank line;\n"
    "      C escapes \\n \\t \\r \\\\ are understood), emit <|endoftext|> before each\n"
    "      document followed by its tokens, and write the first N tokens (default\n"
    "      32768, at most all but one) to D/val_000000.bin, the rest to\n"
    "      D/train_000000.bin (llm.c format), plus D/tokenizer.bin for decoding.\n"
    "      D is created if missing.\n"
    "  tokenize --help\n"
    "\n"
    "encoder.json and vocab.bpe are the files OpenAI published for GPT-2.\n"
    "Exit status: 0 ok, 1 runtime error, 2 usage error.\n";

// ----------------------------------------------------------------------------
// errors

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tokenize: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(run ./tokenize --help for usage)\n");
    va_end(ap);
    exit(2);
}

static void runtime_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void runtime_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tokenize: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

// ----------------------------------------------------------------------------
// arguments

typedef struct {
    const char *cmd;
    const char *encoder, *merges, *tokenizer, *in, *out_dir, *doc_sep, *val_tokens;
} Args;

typedef struct { const char *name; size_t offset; const char *cmds; } FlagSpec;

// which subcommands accept which flag (a space-separated list, matched as words)
static const FlagSpec FLAGS[] = {
    {"--encoder",    offsetof(Args, encoder),    "encode decode shards"},
    {"--merges",     offsetof(Args, merges),     "encode decode shards"},
    {"--tokenizer",  offsetof(Args, tokenizer),  "decode"},
    {"--in",         offsetof(Args, in),         "shards"},
    {"--out-dir",    offsetof(Args, out_dir),    "shards"},
    {"--val-tokens", offsetof(Args, val_tokens), "shards"},
    {"--doc-sep",    offsetof(Args, doc_sep),    "shards"},
};

static int word_in(const char *word, const char *list) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) { return 1; }
    }
    return 0;
}

static Args parse_args(int argc, char **argv) {
    Args a;
    memset(&a, 0, sizeof(a));
    if (argc < 2) { usage_error("missing subcommand (encode, decode or shards)"); }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        }
    }
    a.cmd = argv[1];
    if (!word_in(a.cmd, "encode decode shards") || strchr(a.cmd, ' ') != NULL) {
        usage_error("unknown subcommand '%s' (expected encode, decode or shards)", a.cmd);
    }
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = NULL;
        size_t name_len = strlen(arg);
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq != NULL) { name_len = (size_t)(eq - arg); value = eq + 1; }
        const FlagSpec *spec = NULL;
        for (size_t k = 0; k < sizeof(FLAGS) / sizeof(FLAGS[0]); k++) {
            if (strlen(FLAGS[k].name) == name_len && strncmp(FLAGS[k].name, arg, name_len) == 0) { spec = &FLAGS[k]; }
        }
        if (spec == NULL) {
            if (strncmp(arg, "-", 1) == 0) { usage_error("unknown flag '%.*s'", (int)name_len, arg); }
            usage_error("unexpected argument '%s'", arg);
        }
        if (!word_in(a.cmd, spec->cmds)) { usage_error("flag '%s' is not valid for '%s'", spec->name, a.cmd); }
        if (value == NULL) {
            if (i + 1 >= argc) { usage_error("flag '%s' needs a value", spec->name); }
            value = argv[++i];
        }
        const char **slot = (const char **)((char *)&a + spec->offset);
        if (*slot != NULL) { usage_error("flag '%s' given twice", spec->name); }
        *slot = value;
    }
    // required flags
    int bpe = a.encoder != NULL || a.merges != NULL;
    if (strcmp(a.cmd, "decode") == 0 && a.tokenizer != NULL) {
        if (bpe) { usage_error("decode: give either --tokenizer or --encoder/--merges, not both"); }
    } else {
        if (a.encoder == NULL) { usage_error("%s: missing required flag '--encoder'", a.cmd); }
        if (a.merges == NULL) { usage_error("%s: missing required flag '--merges'", a.cmd); }
    }
    if (strcmp(a.cmd, "shards") == 0) {
        if (a.in == NULL) { usage_error("shards: missing required flag '--in'"); }
        if (a.out_dir == NULL) { usage_error("shards: missing required flag '--out-dir'"); }
    }
    return a;
}

// ----------------------------------------------------------------------------
// I/O helpers

static unsigned char *read_stream(FILE *f, const char *name, size_t *out_len) {
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = (unsigned char *)mallocCheck(cap + 1);
    for (;;) {
        if (len == cap) { cap *= 2; buf = (unsigned char *)reallocCheck(buf, cap + 1); }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) { break; }
    }
    if (ferror(f)) { runtime_error("%s: read error: %s", name, strerror(errno)); }
    buf[len] = 0;
    *out_len = len;
    return buf;
}

static void check_stdout(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) { runtime_error("error writing to stdout: %s", strerror(errno)); }
}

static void load_tokenizer(const Args *a, Tokenizer *t) {
    if (a->tokenizer != NULL) {
        tokenizer_init_bin(t, a->tokenizer);
    } else {
        tokenizer_init_bpe(t, a->encoder, a->merges);
    }
}

// mkdir -p
static void make_dirs(const char *path) {
    size_t n = strlen(path);
    char *p = (char *)mallocCheck(n + 1);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) { continue; }
        char saved = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) { runtime_error("cannot create directory '%s': %s", p, strerror(errno)); }
        p[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) { runtime_error("--out-dir '%s' exists and is not a directory", path); }
    free(p);
}

// fsync the directory so that the renames themselves survive a crash
static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)mallocCheck(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/') { p[k++] = '/'; }
    memcpy(p + k, name, b + 1);
    return p;
}

// llm.c token shard: 256 int32 header (magic, version, count), then uint16 tokens.
// Written to path.tmp, flushed, fsynced, renamed: readers never see half a file.
static void write_shard(const char *path, const int *ids, size_t n) {
    if (n > (size_t)INT32_MAX) { runtime_error("%s: %zu tokens do not fit the shard header", path, n); }
    char *tmp = join_path("", path);
    tmp = (char *)reallocCheck(tmp, strlen(path) + 5);
    strcat(tmp, ".tmp");
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) { runtime_error("%s: cannot create: %s", tmp, strerror(errno)); }
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;
    int ok = fwrite(header, sizeof(int32_t), 256, f) == 256;
    uint16_t chunk[4096];
    for (size_t i = 0; ok && i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        for (size_t k = 0; k < m; k++) { chunk[k] = (uint16_t)ids[i + k]; }
        ok = fwrite(chunk, sizeof(uint16_t), m, f) == m;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (fclose(f) != 0 && ok) { ok = 0; err = errno; }
    if (!ok) { remove(tmp); runtime_error("%s: write failed: %s", tmp, strerror(err)); }
    if (rename(tmp, path) != 0) { err = errno; remove(tmp); runtime_error("%s: cannot rename to %s: %s", tmp, path, strerror(err)); }
    free(tmp);
}

// "\n\n" typed on a command line arrives as backslash-n; turn C escapes into bytes
static char *unescape(const char *s) {
    size_t n = strlen(s), k = 0;
    char *out = (char *)mallocCheck(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') { out[k++] = s[i]; continue; }
        char c = s[++i];
        if (c == 'n') { out[k++] = '\n'; }
        else if (c == 't') { out[k++] = '\t'; }
        else if (c == 'r') { out[k++] = '\r'; }
        else if (c == '\\') { out[k++] = '\\'; }
        else { usage_error("--doc-sep: unsupported escape '\\%c' (use \\n \\t \\r \\\\)", c ? c : ' '); }
    }
    out[k] = 0;
    return out;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ----------------------------------------------------------------------------
// subcommands

static int cmd_encode(const Args *a) {
    Tokenizer t;
    load_tokenizer(a, &t);
    size_t len;
    unsigned char *text = read_stream(stdin, "stdin", &len);
    int *ids;
    size_t n;
    if (tokenizer_encode(&t, text, len, &ids, &n) != 0) { exit(1); }
    for (size_t i = 0; i < n; i++) { printf("%d\n", ids[i]); }
    check_stdout();
    free(ids);
    free(text);
    tokenizer_free(&t);
    return 0;
}

static int cmd_decode(const Args *a) {
    Tokenizer t;
    load_tokenizer(a, &t);
    size_t len;
    unsigned char *in = read_stream(stdin, "stdin", &len);
    // ids are separated by white space (one per line is what encode prints)
    size_t i = 0, line = 1;
    while (i < len) {
        unsigned char c = in[i];
        if (c == '\n') { line++; i++; continue; }
        if (c == ' ' || c == '\t' || c == '\r') { i++; continue; }
        long long id = 0;
        size_t start = i;
        while (i < len && in[i] >= '0' && in[i] <= '9' && i - start < 12) { id = id * 10 + (in[i++] - '0'); }
        if (i == start || (i < len && in[i] != '\n' && in[i] != ' ' && in[i] != '\t' && in[i] != '\r')) {
            runtime_error("stdin line %zu: expected a token id (non-negative integer)", line);
        }
        int blen;
        const unsigned char *b = tokenizer_token_bytes(&t, id > INT32_MAX ? -1 : (int)id, &blen);
        if (b == NULL) { runtime_error("stdin line %zu: token id %lld out of range (vocab size %d)", line, id, t.vocab_size); }
        fwrite(b, 1, (size_t)blen, stdout);
    }
    check_stdout();
    free(in);
    tokenizer_free(&t);
    return 0;
}

static int cmd_shards(const Args *a) {
    long long val_tokens = DEFAULT_VAL_TOKENS;
    if (a->val_tokens != NULL) {
        char *end;
        errno = 0;
        val_tokens = strtoll(a->val_tokens, &end, 10);
        if (errno || end == a->val_tokens || *end != 0 || val_tokens < 0) {
            usage_error("--val-tokens: expected a non-negative integer, got '%s'", a->val_tokens);
        }
    }
    char *sep = unescape(a->doc_sep != NULL ? a->doc_sep : "\\n\\n");
    size_t sep_len = strlen(sep);
    if (sep_len == 0) { usage_error("--doc-sep must not be empty"); }
    {   // reject an --out-dir that is a file before doing any work
        struct stat st;
        if (stat(a->out_dir, &st) == 0 && !S_ISDIR(st.st_mode)) { runtime_error("--out-dir '%s' exists and is not a directory", a->out_dir); }
    }

    Tokenizer t;
    load_tokenizer(a, &t);
    if (t.vocab_size > 65536) { runtime_error("vocab size %d does not fit llm.c's uint16 token shards", t.vocab_size); }
    size_t len;
    unsigned char *text = tok_read_file(a->in, &len);

    // Documents are text.split(sep) in Python terms (so "a\n\n\n\nb" has an empty
    // document in the middle); each becomes <|endoftext|> + encode(document).
    double t0 = now_s();
    size_t cap = 1 << 16, n = 0, ndocs = 0;
    int *stream = (int *)mallocCheck(cap * sizeof(int));
    size_t start = 0;
    for (;;) {
        const unsigned char *hit = NULL;
        for (size_t k = start; k + sep_len <= len; k++) {
            if (text[k] == (unsigned char)sep[0] && memcmp(text + k, sep, sep_len) == 0) { hit = text + k; break; }
        }
        size_t end = hit ? (size_t)(hit - text) : len;
        int *ids;
        size_t nids;
        if (tokenizer_encode(&t, text + start, end - start, &ids, &nids) != 0) { exit(1); }
        if (n + nids + 1 > cap) {
            while (n + nids + 1 > cap) { cap *= 2; }
            stream = (int *)reallocCheck(stream, cap * sizeof(int));
        }
        stream[n++] = tokenizer_eot(&t);
        memcpy(stream + n, ids, nids * sizeof(int));
        n += nids;
        free(ids);
        ndocs++;
        if (hit == NULL) { break; }
        start = end + sep_len;
    }
    double t1 = now_s();
    printf("encoded %s: %zu bytes, %zu documents, %zu tokens in %.3f s\n", a->in, len, ndocs, n, t1 - t0);

    // the train split must not be empty
    size_t nval = (size_t)val_tokens;
    if (nval > n - 1) {
        fprintf(stderr, "tokenize: note: --val-tokens %lld clamped to %zu to leave one train token\n", val_tokens, n - 1);
        nval = n - 1;
    }

    make_dirs(a->out_dir);
    char *tok_path = join_path(a->out_dir, "tokenizer.bin");
    char *val_path = join_path(a->out_dir, "val_000000.bin");
    char *train_path = join_path(a->out_dir, "train_000000.bin");
    tokenizer_write_bin(&t, tok_path);
    printf("wrote %s: %d tokens in the vocabulary\n", tok_path, t.vocab_size);
    write_shard(val_path, stream, nval);
    printf("wrote %s: %zu tokens\n", val_path, nval);
    write_shard(train_path, stream + nval, n - nval);
    printf("wrote %s: %zu tokens\n", train_path, n - nval);
    sync_dir(a->out_dir);
    check_stdout();

    free(tok_path);
    free(val_path);
    free(train_path);
    free(stream);
    free(text);
    free(sep);
    tokenizer_free(&t);
    return 0;
}

int main(int argc, char **argv) {
    Args a = parse_args(argc, argv);
    if (strcmp(a.cmd, "encode") == 0) { return cmd_encode(&a); }
    if (strcmp(a.cmd, "decode") == 0) { return cmd_decode(&a); }
    return cmd_shards(&a);
}
