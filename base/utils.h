// utils.h: checked wrappers for the C library calls the trainer makes, so that every failure
// says what failed and why before exiting. Shared by every build and tool.
//
// Two kinds of error. fatal(): the user's input or environment is wrong (a missing or truncated
// file, a bad value, a full disk); the message names the file, flag or value and what was expected,
// in the user's words, without a source location, which would only suggest a bug. internal_fault():
// the program broke its own invariant (or a library it drives did); the source location is for us.
#ifndef UTILS_H
#define UTILS_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// The one clock every timer reads: monotonic seconds (step times, the watchdog, the disk's waits, the
// tokenizer's rate). Only differences mean anything.
static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// "error: " and the message on stderr, then exit with status: the user's mistakes end here.
static void exit_with_error(int status, const char *fmt, va_list ap) __attribute__((noreturn));
static void exit_with_error(int status, const char *fmt, va_list ap) {
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    exit(status);
}

static void fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    exit_with_error(EXIT_FAILURE, fmt, ap);
}

// An internal fault: the same, plus where in the source it was detected.
static void fatal_at(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
static void fatal_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n  (internal fault at %s:%d)\n", file, line);
    va_end(ap);
    exit(EXIT_FAILURE);
}
#define internal_fault(...) fatal_at(__FILE__, __LINE__, __VA_ARGS__)

// Opens a file the user named; `what` says which (a flag such as "-e/--init", or NULL), so the
// error tells the user which of their inputs is wrong.
static FILE *fopen_user(const char *what, const char *path, const char *mode) {
    struct stat st;
    const char *sep = what ? ": " : "";
    if (what == NULL) what = "";
    if (mode[0] == 'r' && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) fatal("%s%s%s: is a directory, expected a file", what, sep, path);
    FILE *fp = fopen(path, mode);
    if (fp == NULL) fatal("%s%s%s: cannot open%s: %s", what, sep, path, mode[0] == 'r' ? "" : " for writing", strerror(errno));
    return fp;
}
#define fopenCheck(path, mode) fopen_user(NULL, path, mode)

// fread that insists on every element: a short read means a truncated file.
static void freadCheck(void *ptr, size_t size, size_t n, FILE *fp, const char *path) {
    size_t got = fread(ptr, size, n, fp);
    if (got != n) {
        fatal("%s: truncated or unreadable (wanted %zu items of %zu bytes, got %zu)%s%s",
              path, n, size, got, ferror(fp) ? ": " : "", ferror(fp) ? strerror(errno) : "");
    }
}

static void fwriteCheck(const void *ptr, size_t size, size_t n, FILE *fp, const char *path) {
    if (fwrite(ptr, size, n, fp) != n) fatal("%s: write failed: %s", path, strerror(errno));
}

static void fseekCheck(FILE *fp, long off, int whence, const char *path) {
    if (fseek(fp, off, whence) != 0) fatal("%s: seek to %ld failed: %s", path, off, strerror(errno));
}

// Running out of memory is the machine's limit, not a bug: said plainly, with the size.
static void *mallocCheck(size_t size) {
    void *p = malloc(size > 0 ? size : 1);
    if (p == NULL) fatal("out of memory allocating %zu bytes (%.2f GiB)", size, size / 1073741824.0);
    return p;
}

static void *callocCheck(size_t n, size_t size) {
    void *p = calloc(n > 0 ? n : 1, size);
    if (p == NULL) fatal("out of memory allocating %zu x %zu bytes (%.2f GiB)", n, size, (double)n * size / 1073741824.0);
    return p;
}

static void *reallocCheck(void *old, size_t size) {
    void *p = realloc(old, size > 0 ? size : 1);
    if (p == NULL) fatal("out of memory growing a buffer to %zu bytes (%.2f GiB)", size, size / 1073741824.0);
    return p;
}

// Files that matter are never written in place: write "path.tmp", flush it to the disk, then rename,
// so a crash leaves either the old file or the new one, never half of one.
typedef struct {
    FILE *fp;
    char path[4096];
    char tmp[4112];
} AtomicFile;

static void atomic_open(AtomicFile *af, const char *path) {
    if (strlen(path) >= sizeof(af->path)) fatal("%s: path too long", path);
    strcpy(af->path, path);
    snprintf(af->tmp, sizeof(af->tmp), "%s.tmp", path);
    af->fp = fopen(af->tmp, "wb");
    if (af->fp == NULL) fatal("%s: cannot create: %s", af->tmp, strerror(errno));
}

static void atomic_write(AtomicFile *af, const void *ptr, size_t size, size_t n) {
    if (fwrite(ptr, size, n, af->fp) != n) {
        int e = errno;
        fclose(af->fp);
        remove(af->tmp);
        fatal("%s: write failed: %s", af->tmp, strerror(e));
    }
}

static void atomic_commit(AtomicFile *af) {
    int bad = fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0;
    int e = errno;
    if (fclose(af->fp) != 0) bad = 1;
    if (bad) { remove(af->tmp); fatal("%s: flush failed: %s", af->tmp, strerror(e)); }
    if (rename(af->tmp, af->path) != 0) {
        e = errno;
        remove(af->tmp);
        fatal("%s: rename to %s failed: %s", af->tmp, af->path, strerror(e));
    }
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// mkdir -p: the directory and any missing parents. Errors name the flag that gave the path.
static void make_dir(const char *flag, const char *path) {
    if (dir_exists(path)) return;
    size_t n = strlen(path);
    char *p = (char *)malloc(n + 1);
    if (!p) fatal("%s %s: out of memory", flag, path);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            fatal("%s %s: cannot create directory: %s", flag, path, strerror(e));
        }
        p[i] = saved;
    }
    free(p);
    if (!dir_exists(path)) fatal("%s %s: exists and is not a directory", flag, path);
}

// xorshift* random numbers: tiny, fast, and identical on every platform, which the exact-resume
// guarantee needs (the state is one 64-bit word saved in the training state).
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}
static float random_f32(uint64_t *state) { return (random_u32(state) >> 8) / 16777216.0f; }  // [0, 1)

// SplitMix64 turns (seed, stream id) pairs into well-mixed independent seeds.
static uint64_t mix_seed(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif
