/*
Command-line front end to tokenizer.h (GPT-2 BPE, tiktoken-compatible; or a Hugging Face
tokenizer.json of byte-level BPE, tokenizers-compatible), corpus.h and shards.h.

  ./tokenize encode (--encoder E.json --merges V.bpe | --tokenizer tokenizer.json) < in.txt   one id per line
  ./tokenize decode (--encoder E.json --merges V.bpe | --tokenizer tok.bin|tokenizer.json) < ids.txt
  ./tokenize shards (--encoder E.json --merges V.bpe | --tokenizer tokenizer.json) --in IN [--in IN ...] --out-dir D ...

`shards` streams any number of inputs (text, JSON lines, gzip; files, directories, globs,
stdin) through a pool of threads into llm.c-format token shards of --shard-tokens, and
writes the decoder file D/tokenizer.bin. See --help and the README's "Real data".

Exit codes: 0 ok, 1 runtime error (missing/corrupt file, bad input, I/O), 2 usage error.
Every shard is written under a temporary name and renamed into place when complete.

Build: gcc -O2 -Wall -Wextra -std=gnu11 tokenize.c -o tokenize -lm -lpthread
*/
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>
#include <glob.h>
#include "base/utils.h"
#include "tokenizer/tokenizer_files.h"  // tokenizer_init_bpe and _bin, tokenizer_write_bin, and tokenizer.h
#include "tokenizer/tokenizer_json.h"   // tokenizer_init_json, tokenizer_file_is_json: Hugging Face tokenizer.json
#include "tokenizer/corpus.h"
#include "tokenizer/shards.h"

#define DEFAULT_VAL_TOKENS 32768          // without --name (the small layout)
#define DEFAULT_SHARD_TOKENS 100000000LL  // llm.c's FineWeb shards

static const char *USAGE =
    "usage:\n"
    "  TOK is --encoder E.json --merges V.bpe (GPT-2's files) or --tokenizer tokenizer.json\n"
    "  (Hugging Face, byte-level BPE: GPT-2's, Llama 3's, Qwen 2's or SmolLM's pre-tokenizer; docs/tokenizer.md)\n"
    "  tokenize encode TOK < in.txt\n"
    "      encode stdin (raw bytes, UTF-8 text) and print one token id per line\n"
    "  tokenize decode TOK < ids.txt\n"
    "  tokenize decode --tokenizer tok.bin < ids.txt\n"
    "      read token ids (one per line) and write their raw bytes to stdout\n"
    "  tokenize shards TOK --in IN [--in IN ...] --out-dir D\n"
    "                  [--name NAME] [--shard-tokens N] [--val-tokens N] [--threads N] [--doc-token T]\n"
    "                  [--doc-sep STR] [--text-field F] [--format txt|jsonl|framed] [--resume]\n"
    "      IN: a file, a directory (its .txt .jsonl .json files, and .gz of them,\n"
    "      sorted), a quoted glob (sorted) or - (stdin); read in the order given.\n"
    "      .txt (and other names): documents split at STR (default \"\\n\\n\", a blank\n"
    "      line; C escapes \\n \\t \\r \\\\ are understood). .jsonl/.json(.gz): one JSON\n"
    "      object a line, the document is its field F (default text). --format\n"
    "      overrides the extension (stdin is txt by default); framed: each document an\n"
    "      8-byte little-endian length, then its bytes. Invalid UTF-8 is refused.\n"
    "      Each document becomes <|endoftext|> + its tokens; the stream is cut into\n"
    "      shards of N tokens (default 100000000): with --name, D/NAME_val_000000.bin\n"
    "      (the first --val-tokens, default one shard), then D/NAME_train_000001.bin...\n"
    "      (llm.c's names); without, D/val_000000.bin (default 32768 tokens), then\n"
    "      D/train_000000.bin... The train split gets at least one token. Plus\n"
    "      D/tokenizer.bin. --threads (default: all cores) encode in parallel; the\n"
    "      output is the same for any N. --resume continues after the complete shards\n"
    "      that D/[NAME_]shards.state records (refused, naming it, if a setting or an\n"
    "      input's size or time changed), tokenizing only the rest of the inputs; stdin\n"
    "      is read up to there unchecked, and the last complete shard made again and\n"
    "      compared; without a state it reads from the start and keeps the complete\n"
    "      shards after comparing them. --batch-kb (1024): text per work unit.\n"
    "      D is created if missing.\n"
    "      With --tokenizer tokenizer.json, the separator is <|begin_of_text|> when the\n"
    "      tokenizer has it, else <|endoftext|> (--doc-token T names any other token),\n"
    "      the shards hold uint32 ids (llm.c's 20240801, version 7) when the vocabulary\n"
    "      is over 65536, and D/tokenizer.json is a copy of it.\n"
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
    const char *encoder, *merges, *tokenizer, *out_dir, *doc_sep, *val_tokens;
    const char *name, *shard_tokens, *threads, *text_field, *format, *batch_kb, *resume, *doc_token;
    const char **in;  // --in, in the order given
    int n_in;
} Args;

typedef struct { const char *name; size_t offset; const char *cmds; } FlagSpec;
#define IN_FLAG ((size_t)-1)      // --in may be given several times
#define SWITCH_FLAG "--resume"    // the one flag without a value

// which subcommands accept which flag (a space-separated list, matched as words)
static const FlagSpec FLAGS[] = {
    {"--encoder",    offsetof(Args, encoder),    "encode decode shards"},
    {"--merges",     offsetof(Args, merges),     "encode decode shards"},
    {"--tokenizer",  offsetof(Args, tokenizer),  "encode decode shards"},
    {"--doc-token",  offsetof(Args, doc_token),  "shards"},
    {"--in",         IN_FLAG,                    "shards"},
    {"--out-dir",    offsetof(Args, out_dir),    "shards"},
    {"--val-tokens", offsetof(Args, val_tokens), "shards"},
    {"--doc-sep",    offsetof(Args, doc_sep),    "shards"},
    {"--name",       offsetof(Args, name),       "shards"},
    {"--shard-tokens", offsetof(Args, shard_tokens), "shards"},
    {"--threads",    offsetof(Args, threads),    "shards"},
    {"--text-field", offsetof(Args, text_field), "shards"},
    {"--format",     offsetof(Args, format),     "shards"},
    {"--batch-kb",   offsetof(Args, batch_kb),   "shards"},
    {"--resume",     offsetof(Args, resume),     "shards"},
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
        if (strcmp(spec->name, SWITCH_FLAG) == 0) {
            if (value != NULL) { usage_error("flag '%s' takes no value", spec->name); }
            value = "1";
        }
        if (value == NULL) {
            if (i + 1 >= argc) { usage_error("flag '%s' needs a value", spec->name); }
            value = argv[++i];
        }
        if (spec->offset == IN_FLAG) {
            a.in = (const char **)reallocCheck((void *)a.in, (size_t)(a.n_in + 1) * sizeof(char *));
            a.in[a.n_in++] = value;
            continue;
        }
        const char **slot = (const char **)((char *)&a + spec->offset);
        if (*slot != NULL) { usage_error("flag '%s' given twice", spec->name); }
        *slot = value;
    }
    // required flags
    int bpe = a.encoder != NULL || a.merges != NULL;
    if (a.tokenizer != NULL) {
        if (bpe) { usage_error("%s: give either --tokenizer or --encoder/--merges, not both", a.cmd); }
    } else {
        if (a.encoder == NULL) { usage_error("%s: missing required flag '--encoder' (or --tokenizer tokenizer.json)", a.cmd); }
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
        struct stat st;
        if (stat(a->tokenizer, &st) != 0) { runtime_error("--tokenizer %s: cannot open: %s", a->tokenizer, strerror(errno)); }
        if (tokenizer_file_is_json(a->tokenizer)) {
            tokenizer_init_json(t, a->tokenizer);
            char note[1600];
            if (strcmp(a->cmd, "decode") != 0 && tokenizer_missing_bytes_note(t, a->tokenizer, note, sizeof(note))) {
                fprintf(stderr, "tokenize: note: %s\n", note);
            }
        } else if (strcmp(a->cmd, "decode") == 0) {
            tokenizer_init_bin(t, a->tokenizer);
        } else {
            usage_error("%s: --tokenizer %s is not a tokenizer.json (an llm.c tokenizer.bin can only decode)", a->cmd, a->tokenizer);
        }
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

// ----------------------------------------------------------------------------
// subcommands

static int cmd_encode(const Args *a) {
    Tokenizer t;
    load_tokenizer(a, &t);
    size_t len;
    unsigned char *text = read_stream(stdin, "stdin", &len);
    if (t.hf) {  // a tokenizer.json encodes text, as `tokenizers` does (a Python str): bytes that are not UTF-8 are refused
        int bad;
        size_t ok = utf8_valid_prefix(text, len, 1, &bad);
        if (bad) { runtime_error("stdin: invalid UTF-8 at byte %zu (a tokenizer.json encodes UTF-8 text only)", ok); }
    }
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

// a non-negative integer flag, at least lo
static long long int_flag(const char *flag, const char *v, long long dflt, long long lo) {
    if (v == NULL) { return dflt; }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end != 0 || x < lo) { usage_error("%s: expected an integer >= %lld, got '%s'", flag, lo, v); }
    return x;
}

static int machine_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) { return CPU_COUNT(&set); }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// the progress line (on a terminal only) and the summary
typedef struct {
    Pool *pool;
    const Source *src;       // the input being read
    long long bytes_before;  // bytes read from the inputs already closed
    long long skipped;       // --resume: bytes before the place it starts from
    long long total;         // all inputs' bytes, 0 when unknown (stdin, gzip)
    double t0, last;
    int tty;
} Progress;

static void progress_line(void *ctx) {
    Progress *pr = (Progress *)ctx;
    double now = wall_seconds();
    if (!pr->tty || now - pr->last < 0.5) { return; }
    pr->last = now;
    double mb = (double)(pr->bytes_before + (pr->src ? pr->src->bytes - pr->src->start : 0)) / 1e6, dt = now - pr->t0;
    char eta[64] = "";
    if (pr->total > 0 && mb > 0) {
        double left = ((double)(pr->total - pr->skipped) / 1e6 - mb) / (mb / dt);
        snprintf(eta, sizeof(eta), " | ETA %.0f s", left > 0 ? left : 0);
    }
    fprintf(stderr, "\r%.0f MB, %.1f MB/s | %lld documents | %lld tokens | %lld shards%s\033[K", mb, mb / dt,
            pr->pool->docs, pr->pool->w->tokens, pr->pool->w->shards_written + pr->pool->w->shards_kept, eta);
}

static void shards_options(const Args *a, Writer *w, int *threads, size_t *batch_bytes) {
    w->dir = a->out_dir;
    w->name = a->name;
    if (a->name != NULL && (a->name[0] == 0 || strchr(a->name, '/') != NULL)) {
        usage_error("--name: expected a file name prefix without '/', got '%s'", a->name);
    }
    w->shard_tokens = int_flag("--shard-tokens", a->shard_tokens, DEFAULT_SHARD_TOKENS, 1);
    if (w->shard_tokens > INT32_MAX) { usage_error("--shard-tokens: at most %d (the shard header's count is an int32)", INT32_MAX); }
    w->val_tokens = int_flag("--val-tokens", a->val_tokens, a->name ? w->shard_tokens : DEFAULT_VAL_TOKENS, 0);
    if (w->val_tokens > INT32_MAX) { usage_error("--val-tokens: at most %d (the shard header's count is an int32)", INT32_MAX); }
    w->resume = a->resume != NULL;
    *threads = (int)int_flag("--threads", a->threads, machine_cores(), 1);
    if (*threads > 1024) { usage_error("--threads: at most 1024, got %d", *threads); }
    *batch_bytes = (size_t)int_flag("--batch-kb", a->batch_kb, 1024, 1) * 1024;
    if (a->format && strcmp(a->format, "txt") != 0 && strcmp(a->format, "jsonl") != 0 && strcmp(a->format, "framed") != 0) {
        usage_error("--format: expected txt, jsonl or framed, got '%s'", a->format);
    }
    if (a->text_field && strlen(a->text_field) >= 256) { usage_error("--text-field: at most 255 bytes"); }
}

// reads one input into the pool's batches
static Batch *shards_read_one(const Args *a, const char *path, int index, DocPos from, Batch *b, Pool *pool,
                              Progress *pr, const char *sep, LineBuf *lb) {
    Source s;
    source_open(&s, path, index);
    if (from.input == index) { source_skip(&s, from.off, from.line); }
    pr->src = &s;
    long long docs = 0;
    int fmt = input_format(path, a->format);
    if (fmt == FMT_FRAMED) {
        b = read_framed(&s, b, pool->batch_bytes, pool_handoff, pool, &docs);
    } else if (fmt == FMT_JSONL) {
        const char *field = a->text_field ? a->text_field : "text";
        b = read_jsonl(&s, b, lb, field, pool->batch_bytes, pool_handoff, pool, &docs);
        if (docs == 0 && s.bytes > 0) { corpus_die("%s: no JSON lines (only blank ones)", s.path); }
    } else {
        b = read_txt(&s, b, sep, strlen(sep), pool->batch_bytes, pool_handoff, pool);
    }
    source_close(&s);
    if (s.bytes == 0) { corpus_die("%s: empty input (no bytes)", s.path); }
    pr->bytes_before += s.bytes - s.start;
    pr->src = NULL;
    return b;
}

// FNV-1a over the vocabulary's bytes: a changed tokenizer is a changed setting for --resume
static unsigned long long vocab_hash(Tokenizer *t) {
    unsigned long long h = 1469598103934665603ULL;
    for (int id = 0; id < t->vocab_size; id++) {
        int len;
        const unsigned char *p = tokenizer_token_bytes(t, id, &len);
        for (int i = 0; i <= len; i++) { h = (h ^ (i < len ? p[i] : 0x100u)) * 1099511628211ULL; }
    }
    return h ^ t->fingerprint;  // a tokenizer.json's merges, pattern and added tokens too (0 for GPT-2's files)
}

// the document separator token: --doc-token, else the tokenizer's own (tokenizer_json.h's choice)
static int doc_token(const Args *a, Tokenizer *t) {
    if (a->doc_token == NULL) {
        if (t->eot_token < 0) {
            usage_error("shards: %s has neither <|begin_of_text|> nor <|endoftext|>; name the token that goes before each "
                        "document with --doc-token", a->tokenizer);
        }
        return t->eot_token;
    }
    int id = tokenizer_find_token(t, a->doc_token);
    if (id < 0) { usage_error("--doc-token: '%s' is not a token of %s", a->doc_token, a->tokenizer ? a->tokenizer : a->encoder); }
    return id;
}

// the resume state's lines (shards.h) for the settings that decide the token stream (the
// result) and for the inputs (*inputs)
static char *state_head(const Args *a, const Writer *w, const InputList *in, const char *sep, Tokenizer *t, char **inputs) {
    char *buf = NULL, *ibuf = NULL;
    size_t len = 0, ilen = 0;
    FILE *f = open_memstream(&buf, &len), *fi = open_memstream(&ibuf, &ilen);
    if (f == NULL || fi == NULL) { runtime_error("out of memory"); }
    fprintf(f, "tokenize-shards-state 2\n--shard-tokens %lld\n--val-tokens %lld\n--name %s\n--doc-sep ", w->shard_tokens,
            w->val_tokens, a->name ? a->name : "(none)");
    for (const char *c = sep; *c; c++) { fprintf(f, "%02x", (unsigned char)*c); }
    int dlen;
    const unsigned char *db = tokenizer_token_bytes(t, t->eot_token, &dlen);
    int printable = 1;
    for (int k = 0; k < dlen; k++) { printable &= db[k] > 0x20 && db[k] < 0x7f; }
    fprintf(f, "\n--doc-token %s", printable ? "" : "hex:");
    for (int k = 0; k < dlen; k++) { fprintf(f, printable ? "%c" : "%02x", db[k]); }
    fprintf(f, " (id %d, %s shards)", t->eot_token, w->wide ? "uint32" : "uint16");
    fprintf(f, "\n--text-field %s\n--format %s\ntokenizer %016llx\n", a->text_field ? a->text_field : "text",
            a->format ? a->format : "(by extension)", vocab_hash(t));
    for (int i = 0; i < in->n; i++) {
        struct stat st;
        if (strcmp(in->paths[i], "-") == 0 || stat(in->paths[i], &st) != 0) { memset(&st, 0, sizeof(st)); }
        if (strchr(in->paths[i], '\n') != NULL) { runtime_error("--in %s: a path with a newline is not supported", in->paths[i]); }
        fprintf(fi, "input %d size=%lld mtime=%lld.%09ld path=%s\n", i, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                (long)st.st_mtim.tv_nsec, in->paths[i]);
    }
    fclose(f);
    fclose(fi);
    *inputs = ibuf;
    return buf;
}

// --resume: where reading starts (the first input when there is no state to continue from)
static DocPos shards_resume_point(Writer *w, const InputList *in, int stdin_uses, Progress *pr) {
    DocPos from = {0, 0, 0};
    if (!w->resume) { unlink(w->state_path); return from; }
    if (!state_load(w, &from, stdin_uses)) {
        fprintf(stderr, "tokenize: note: --resume: no %s, so the inputs are read from the start and the complete "
                        "shards are compared, not rewritten\n", w->state_path);
        return from;
    }
    for (int i = 0; i < from.input; i++) {
        struct stat st;
        if (!is_gz(in->paths[i]) && stat(in->paths[i], &st) == 0) { pr->skipped += (long long)st.st_size; }
    }
    pr->skipped += from.off;
    if (stdin_uses) {
        fprintf(stderr, "tokenize: note: --resume with standard input (--in -): its bytes before the place the state "
                        "records are read and dropped, not tokenized; they cannot be checked, so the last complete "
                        "shard is made again and compared\n");
    }
    if (from.input == in->n) {
        printf("resume: all %d shard(s) are complete (%s)\n", w->k, w->state_path);
    } else {
        printf("resume: %d shard(s) complete, %lld tokens; continuing at %s byte %lld (line %lld), %lld token(s) of "
               "that document already written\n", w->k, w->tokens_before, in->paths[from.input], from.off, from.line + 1, w->skip);
    }
    return from;
}

// The end of the input inside the validation shard: every token would be validation but one, and the
// trainer would then stop on a train shard too small for a micro-batch. Say which flag sets the split.
static void shards_check_split(const Args *a, const Writer *w) {
    if (w->k != 0 || !w->open || w->cmp || w->cur < 2) { return; }  // writer_finish says the rest
    const char *why = a->val_tokens ? "--val-tokens"
                      : a->name ? "--val-tokens' default with --name: one whole --shard-tokens shard, as llm.c's FineWeb"
                                : "--val-tokens' default";
    corpus_die("the inputs make %lld tokens, no more than the validation shard's %lld (%s), so none would be left to "
               "train on; set --val-tokens to the validation split you want, e.g. --val-tokens %lld (a tenth of them)",
               w->cur, w->val_tokens, why, w->cur / 10 > 0 ? w->cur / 10 : 1);
}

// Shards of an earlier run into the same --out-dir and --name beyond this run's last: a glob such as
// 'train_*.bin' would read them with this run's, so they are removed, and each is named.
static void shards_remove_stale(const Args *a, const Writer *w) {
    const char *splits[2] = {"val", "train"};
    int removed = 0;
    char first[4200] = "", last[4200] = "";
    const char *sl = a->out_dir[0] && a->out_dir[strlen(a->out_dir) - 1] == '/' ? "" : "/";
    for (int s = 0; s < 2; s++) {
        char pattern[4200];
        snprintf(pattern, sizeof(pattern), "%s%s%s%s%s_[0-9][0-9][0-9][0-9][0-9][0-9]*.bin", a->out_dir, sl,
                 a->name ? a->name : "", a->name ? "_" : "", splits[s]);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0) { continue; }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            const char *p = g.gl_pathv[i] + strlen(g.gl_pathv[i]) - 4;  // ".bin"
            const char *d = p;
            while (d > g.gl_pathv[i] && d[-1] >= '0' && d[-1] <= '9') { d--; }
            if (d[-1] != '_') { continue; }
            long long index = strtoll(d, NULL, 10);
            // the writer's k: val is shard 0; train shards count on from 1 with --name, from 0 without
            long long k = s == 0 ? index : a->name ? index : index + 1;
            if (k < w->k || (s == 0 && index == 0)) { continue; }
            if (unlink(g.gl_pathv[i]) != 0) { runtime_error("%s: from an earlier run, and cannot be removed: %s", g.gl_pathv[i], strerror(errno)); }
            if (removed++ == 0) { snprintf(first, sizeof(first), "%s", g.gl_pathv[i]); }
            snprintf(last, sizeof(last), "%s", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    if (removed == 1) {
        fprintf(stderr, "tokenize: removed %s: a shard of an earlier run beyond this run's last, which a glob of the "
                        "shards would have read with this run's\n", first);
    } else if (removed > 1) {
        fprintf(stderr, "tokenize: removed %d shards of an earlier run beyond this run's last (%s ... %s), which a glob of "
                        "the shards would have read with this run's\n", removed, first, last);
    }
}

// D/tokenizer.json: the file the shards were made with, for the trainer's samples and exports
static void copy_tokenizer_json(const char *src, const char *dir) {
    char *dst = join_path(dir, "tokenizer.json");
    char *tmp = join_path(dir, "tokenizer.json.tmp");
    size_t n;
    unsigned char *data = tok_read_file(src, &n);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) { runtime_error("%s: cannot create: %s", tmp, strerror(errno)); }
    int ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) { ok = 0; }
    if (!ok) { unlink(tmp); runtime_error("%s: write failed: %s", tmp, strerror(errno)); }
    if (rename(tmp, dst) != 0) { unlink(tmp); runtime_error("%s: cannot rename to %s: %s", tmp, dst, strerror(errno)); }
    printf("wrote %s: a copy of %s\n", dst, src);
    free(data);
    free(dst);
    free(tmp);
}

static int cmd_shards(const Args *a) {
    Writer w;
    memset(&w, 0, sizeof(w));
    int threads;
    size_t batch_bytes;
    shards_options(a, &w, &threads, &batch_bytes);
    char *sep = unescape(a->doc_sep != NULL ? a->doc_sep : "\\n\\n");
    if (sep[0] == 0) { usage_error("--doc-sep must not be empty"); }
    int sep_bad;
    utf8_valid_prefix((const unsigned char *)sep, strlen(sep), 1, &sep_bad);
    if (sep_bad) { usage_error("--doc-sep must be UTF-8 text, as the documents are"); }
    if (a->text_field && a->text_field[0] == 0) { usage_error("--text-field must not be empty"); }
    struct stat st;
    if (stat(a->out_dir, &st) == 0 && !S_ISDIR(st.st_mode)) { runtime_error("--out-dir '%s' exists and is not a directory", a->out_dir); }
    InputList inputs;
    memset(&inputs, 0, sizeof(inputs));
    for (int i = 0; i < a->n_in; i++) { inputs_add(&inputs, a->in[i]); }
    int stdin_uses = 0;
    for (int i = 0; i < inputs.n; i++) { stdin_uses += strcmp(inputs.paths[i], "-") == 0; }
    if (stdin_uses > 1) { usage_error("--in -: standard input can be read only once"); }

    Tokenizer t;
    load_tokenizer(a, &t);
    t.eot_token = doc_token(a, &t);    // set before the pool shares t with its threads
    w.wide = t.vocab_size > 65536;     // ids above 65535 need llm.c's uint32 shards
    w.doc_sep = t.eot_token;           // recorded in every shard's header: the trainer's --doc-mask reads it
    make_dirs(a->out_dir);
    corpus_cleanup = remove_tmp;
    signal(SIGXFSZ, SIG_IGN);  // a file size limit is then a write error (EFBIG), cleaned up like a full disk
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    w.buf = (unsigned char *)mallocCheck(WRITE_BUF_TOKENS * sizeof(uint32_t));

    Pool pool;
    pool_start(&pool, &t, &w, threads, batch_bytes);
    Progress pr = {&pool, NULL, 0, 0, inputs.size_unknown ? 0 : inputs.known_bytes, wall_seconds(), wall_seconds(), isatty(2)};
    g_progress_tty = pr.tty;
    char state_name[4096];
    snprintf(state_name, sizeof(state_name), "%s%sshards.state", a->name ? a->name : "", a->name ? "_" : "");
    char *state_path = join_path(a->out_dir, state_name);
    w.state_path = state_path;
    char *state_inputs;
    w.state_head = state_head(a, &w, &inputs, sep, &t, &state_inputs);
    w.state_inputs = state_inputs;
    w.n_inputs = inputs.n;
    DocPos from = shards_resume_point(&w, &inputs, stdin_uses, &pr);
    pool.on_written = progress_line;
    pool.ctx = &pr;
    LineBuf lb = {NULL, 0};
    Batch *b = pool_acquire(&pool);
    for (int i = from.input; i < inputs.n; i++) { b = shards_read_one(a, inputs.paths[i], i, from, b, &pool, &pr, sep, &lb); }
    pool_finish(&pool, b);
    shards_check_split(a, &w);
    writer_finish(&w, pool.last);
    clear_progress();

    char *tok_path = join_path(a->out_dir, "tokenizer.bin");
    if (tokenizer_bin_fits(&t)) {
        tokenizer_write_bin(&t, tok_path);
        printf("wrote %s: %d tokens in the vocabulary\n", tok_path, t.vocab_size);
    } else {
        unlink(tok_path);  // not one of an earlier run's tokenizer
        fprintf(stderr, "tokenize: note: no %s: a token is empty or over 255 bytes, which llm.c's format cannot hold "
                        "(the trainer decodes with tokenizer.json)\n", tok_path);
    }
    if (a->tokenizer != NULL) { copy_tokenizer_json(a->tokenizer, a->out_dir); }
    sync_dir(a->out_dir);
    double dt = wall_seconds() - pr.t0;
    struct rusage ru;  // the reading and writing thread's own CPU time: the limit when it nears dt
    getrusage(RUSAGE_THREAD, &ru);
    double main_cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec
                      + 1e-6 * (double)ru.ru_stime.tv_usec;
    printf("%d input(s), %.1f MB read", inputs.n, (double)pr.bytes_before / 1e6);
    if (w.resume) printf(", %.1f MB skipped (--resume)", (double)pr.skipped / 1e6);  // only a resumed run skips any
    printf(", %lld documents, %lld tokens in %.2f s (%.1f MB/s, %.2fM tokens/s, %d threads, %.2f CPU-s reading and "
           "writing); %lld shard(s) written, %lld kept\n", pool.docs, w.tokens, dt, (double)pr.bytes_before / 1e6 / dt,
           (double)w.tokens / 1e6 / dt, threads, main_cpu, w.shards_written, w.shards_kept);
    shards_remove_stale(a, &w);
    check_stdout();
    free(tok_path);
    free(state_path);
    free((void *)w.state_head);
    free(state_inputs);
    free(lb.buf);
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
