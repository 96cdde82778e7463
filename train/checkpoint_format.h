// checkpoint_format.h: the training-state file, our own format, written beside an llm.c model file so
// that a run can stop and continue bit for bit. A checkpoint of step S in the out dir is the pair
//   model_SSSSSSSS.bin  llm.c model file (version 3, fp32): the weights after S optimizer steps
//   state_SSSSSSSS.bin  this format: step, batch layout, data and RNG positions, AdamW moments
// The state file is written last, so its presence marks the pair complete. Both are written to a
// temporary name, flushed and renamed. Layout of the state file (little-endian):
//   int32 header[256]: [0] magic 20241122, [1] version 1, [2] step S, [3] micro-batch B, [4] seq T,
//     [5] grad accumulation A, [6] data-parallel ranks D, [7] shuffle, [8..9] seed (lo, hi 32 bits),
//     [10..11] train loader position (micro-batches taken by rank 0's view, lo, hi), [12..13] sampler
//     RNG state (lo, hi), [14..15] parameter count P (lo, hi), [16] steps the learning-rate schedule spans (-x, or --lr-steps),
//     [17] vocab size V; from version 2: [18] AdamW updates applied (steps less skipped ones),
//     [19] loss scale (float32 bits), [20] loss-scaler steps seen, [21] its step of the last
//     overflow (-1 none), [22] hysteresis left, [23] steps skipped for overflow; from version 3: [24] the
//     optimizer (optim/optim_args.h's OptimizerKind: 0 AdamW, 1 Muon, 2 Adafactor); from version 4: attention's masks
//     (train/attn_masks.h): [25] bit 0 --doc-mask, bit 1 --doc-rope-restart, [26] the document separator, [27] the
//     period n of the layers' windows (0: none; layer l's window is [28 + l % n], 0 for a global layer), [28 .. 28 + n)
//     those windows; the rest 0. A run with AdamW and causal attention writes version 2, which holds all it has (older
//     builds read it); one with another optimizer version 3, one with masks version 4, which older builds refuse rather
//     than take its state for AdamW's or train on without its masks. Version 1 files (no loss scaler) still load:
//     updates = step, and the scaler starts afresh
//   float32 m[P], v[P]: the optimizer's two state arrays (optim/optimizer.h) in the slice's shape, in the model
//     file's parameter order, 0 where it keeps nothing: AdamW's first and second moments; Muon's momentum buffers
//     in m where it owns the matrices, and 0 in v there; each optimizer's header says what its arrays hold
// Here: the format, its atomic single-writer form, and the files' names; checkpoint.h writes a ZeRO rank's share
// of both files. Needs no model (test/test_units.c checks it alone).
#ifndef CHECKPOINT_FORMAT_H
#define CHECKPOINT_FORMAT_H

#include <dirent.h>
#include <fcntl.h>
#include "../base/utils.h"

#define STATE_MAGIC 20241122
#define STATE_VERSION 4
#define STATE_WINDOWS 200  // the longest period of the layers' windows a state file records (words 28..227)

typedef struct {
    int step, B, T, grad_accum, world, shuffle, total_steps, vocab_size;
    uint64_t seed, loader_pos, sample_rng, num_params;
    int updates;                 // AdamW's t: steps applied, not skipped
    float loss_scale;            // 0 in a version 1 file: no scaler state saved
    int scaler_iter, scaler_last_overflow, scaler_hysteresis_left, scaler_skipped;
    int optimizer;               // 0 AdamW (versions 1 and 2), 1 Muon (config.h's OptimizerKind)
    int mask_flags, doc_sep;     // version 4: bit 0 --doc-mask, bit 1 --doc-rope-restart; the separator (0 without)
    int window_period;           // version 4: layer l's window is windows[l % window_period]; 0: no window
    int windows[STATE_WINDOWS];
} TrainState;

static void put_u64(int *h, int i, uint64_t x) { h[i] = (int)(uint32_t)x; h[i + 1] = (int)(uint32_t)(x >> 32); }
static uint64_t get_u64(const int *h, int i) { return (uint64_t)(uint32_t)h[i] | ((uint64_t)(uint32_t)h[i + 1] << 32); }

static void state_header(int h[256], const TrainState *s);

static void state_write(const char *path, const TrainState *s, const float *m, const float *v) {
    int h[256];
    state_header(h, s);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, h, sizeof(int), 256);
    atomic_write(&af, m, sizeof(float), s->num_params);
    atomic_write(&af, v, sizeof(float), s->num_params);
    atomic_commit(&af);
}

// Reads the header into s; if m and v are given, also the moments (P floats each).
static void state_read(const char *path, TrainState *s, float *m, float *v) {
    FILE *fp = fopenCheck(path, "rb");
    int h[256];
    if (fread(h, sizeof(int), 256, fp) != 256) fatal("%s: too short for a training-state header", path);
    if (h[0] != STATE_MAGIC) fatal("%s: bad magic %d, expected %d (not a training-state file?)", path, h[0], STATE_MAGIC);
    if (h[1] < 1 || h[1] > STATE_VERSION) fatal("%s: training-state version %d, this build reads 1 to %d", path, h[1], STATE_VERSION);
    s->step = h[2]; s->B = h[3]; s->T = h[4]; s->grad_accum = h[5]; s->world = h[6]; s->shuffle = h[7];
    s->seed = get_u64(h, 8); s->loader_pos = get_u64(h, 10); s->sample_rng = get_u64(h, 12); s->num_params = get_u64(h, 14);
    s->total_steps = h[16]; s->vocab_size = h[17];
    s->updates = s->step; s->loss_scale = 0.0f;
    s->scaler_iter = s->scaler_skipped = 0; s->scaler_last_overflow = -1; s->scaler_hysteresis_left = 0;
    if (h[1] >= 2) {
        s->updates = h[18];
        memcpy(&s->loss_scale, &h[19], sizeof(float));
        s->scaler_iter = h[20]; s->scaler_last_overflow = h[21]; s->scaler_hysteresis_left = h[22]; s->scaler_skipped = h[23];
    }
    s->optimizer = h[1] >= 3 ? h[24] : 0;
    s->mask_flags = h[1] >= 4 ? h[25] : 0;
    s->doc_sep = h[1] >= 4 ? h[26] : 0;
    s->window_period = h[1] >= 4 && h[27] > 0 && h[27] <= STATE_WINDOWS ? h[27] : 0;
    for (int i = 0; i < STATE_WINDOWS; i++) s->windows[i] = i < s->window_period ? h[28 + i] : 0;
    fseekCheck(fp, 0, SEEK_END, path);
    long size = ftell(fp);
    long want = 1024 + 8 * (long)s->num_params;
    if (size != want) fatal("%s: %ld bytes, expected %ld for %llu parameters (truncated?)", path, size, want,
                            (unsigned long long)s->num_params);
    if (m && v) {
        fseekCheck(fp, 1024, SEEK_SET, path);
        freadCheck(m, sizeof(float), s->num_params, fp, path);
        freadCheck(v, sizeof(float), s->num_params, fp, path);
    }
    fclose(fp);
}

// A checkpoint written by many ranks at once. Rank 0 creates both files under temporary names with
// their headers and full sizes; every rank then writes its shards into them at their offsets
// (ckpt_write_shards), flushes, and waits for the others; rank 0 renames the model file and then the
// state file, whose appearance marks the checkpoint complete. A crash at any point leaves either
// the previous complete checkpoint or this one, never a half-written pair under a final name.
static void ckpt_create(const char *tmp, const int header[256], size_t payload_bytes) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fatal("%s: cannot create: %s", tmp, strerror(errno));
    if (pwrite(fd, header, 1024, 0) != 1024 || ftruncate(fd, (off_t)(1024 + payload_bytes)) != 0) {
        int e = errno;
        close(fd);
        remove(tmp);
        fatal("%s: cannot size to %zu bytes: %s", tmp, 1024 + payload_bytes, strerror(e));
    }
    if (fsync(fd) != 0 || close(fd) != 0) fatal("%s: flush failed: %s", tmp, strerror(errno));
}

static int ckpt_open(const char *tmp) {
    int fd = open(tmp, O_WRONLY);
    if (fd < 0) fatal("%s: cannot open for writing: %s", tmp, strerror(errno));
    return fd;
}

static void ckpt_close(int fd, const char *tmp) {
    if (fsync(fd) != 0 || close(fd) != 0) fatal("%s: flush failed: %s", tmp, strerror(errno));
}

static void ckpt_commit(const char *tmp, const char *path) {
    if (rename(tmp, path) != 0) fatal("%s: rename to %s failed: %s", tmp, path, strerror(errno));
}

static void state_header(int h[256], const TrainState *s) {
    memset(h, 0, 256 * sizeof(int));
    int masks = s->mask_flags || s->window_period;
    h[0] = STATE_MAGIC; h[1] = masks ? 4 : s->optimizer ? 3 : 2; h[2] = s->step; h[3] = s->B; h[4] = s->T; h[5] = s->grad_accum;
    h[6] = s->world; h[7] = s->shuffle;
    put_u64(h, 8, s->seed); put_u64(h, 10, s->loader_pos); put_u64(h, 12, s->sample_rng); put_u64(h, 14, s->num_params);
    h[16] = s->total_steps; h[17] = s->vocab_size;
    h[18] = s->updates;
    memcpy(&h[19], &s->loss_scale, sizeof(float));
    h[20] = s->scaler_iter; h[21] = s->scaler_last_overflow; h[22] = s->scaler_hysteresis_left; h[23] = s->scaler_skipped;
    if (s->optimizer) h[24] = s->optimizer;
    if (masks) { h[25] = s->mask_flags; h[26] = s->doc_sep; h[27] = s->window_period; }
    for (int i = 0; i < s->window_period && i < STATE_WINDOWS; i++) h[28 + i] = s->windows[i];
}

static void checkpoint_paths(const char *dir, int step, char *model_path, char *state_path, size_t n) {
    snprintf(model_path, n, "%s/model_%08d.bin", dir, step);
    snprintf(state_path, n, "%s/state_%08d.bin", dir, step);
}

// Steps of the complete checkpoints in dir, ascending (a state file with its model file beside it).
static int checkpoint_list(const char *dir, int *steps, int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int step;
        char tail[8];
        if (sscanf(e->d_name, "state_%d.%7s", &step, tail) == 2 && strcmp(tail, "bin") == 0 &&
            strlen(e->d_name) == strlen("state_00000000.bin")) {
            char mp[4200], sp[4200];
            checkpoint_paths(dir, step, mp, sp, sizeof(mp));
            if (file_exists(mp) && n < max) steps[n++] = step;
        }
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) { int t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    return n;
}

// After this run wrote its checkpoint of step `done`: deletes the oldest of the complete checkpoints at or before
// it, so that `keep` remain, `done` always among them. A checkpoint of a later step is not this run's (run.h refuses
// a fresh run into a folder that holds one, but another process may write there): it is never counted or deleted,
// so pruning cannot remove what this run just wrote in favour of another run's.
static void checkpoint_prune(const char *dir, int keep, int done) {
    int steps[4096];
    int n = checkpoint_list(dir, steps, 4096);
    while (n > 0 && steps[n - 1] > done) n--;
    for (int i = 0; i + keep < n; i++) {
        char mp[4200], sp[4200];
        checkpoint_paths(dir, steps[i], mp, sp, sizeof(mp));
        remove(sp);  // the marker goes first, so a crash here never leaves a state without its model
        remove(mp);
    }
}

// Moves every complete checkpoint in dir into a new folder beside them, dir/replaced-K (the first K free), and
// writes its path to moved: --replace-checkpoints keeps another run's files rather than deleting them. Returns
// how many it moved.
static int checkpoint_move_aside(const char *dir, char *moved, size_t n) {
    int steps[4096];
    int count = checkpoint_list(dir, steps, 4096);
    if (count == 0) return 0;
    for (int k = 1;; k++) {
        snprintf(moved, n, "%s/replaced-%d", dir, k);
        if (mkdir(moved, 0755) == 0) break;
        if (errno != EEXIST) fatal("--replace-checkpoints: cannot make %s: %s", moved, strerror(errno));
    }
    for (int i = 0; i < count; i++) {
        char from[2][4200], to[2][4400];
        checkpoint_paths(dir, steps[i], from[0], from[1], sizeof(from[0]));
        checkpoint_paths(moved, steps[i], to[0], to[1], sizeof(to[0]));
        for (int f = 1; f >= 0; f--)  // the state (the marker) first, as pruning does
            if (rename(from[f], to[f]) != 0) fatal("--replace-checkpoints: cannot move %s to %s: %s", from[f], to[f], strerror(errno));
    }
    return count;
}

#endif
