// test_units.c: the pieces of the training loop that have exact answers: the learning-rate
// schedules, the data loader's order and its rank-of-N view, the synthetic corpus's entropy floor,
// the training-state file, and the CPU build's classifier on a trained model's kind of logits.
#include <math.h>
#include "train/config.h"
#include "dataloader.h"
#include "train/checkpoint_format.h"  // the state file's format, without zero.h's sharded writer
#include "cpu/classifier.h"

#include "check.h"
static int near(float a, float b) { return fabsf(a - b) <= 1e-6f * fmaxf(1.0f, fabsf(b)); }

static void test_schedules(void) {
    TrainConfig c;
    config_defaults(&c);
    c.lr = 1.0f; c.lr_final_frac = 0.1f; c.warmup = 10;
    int total = 110;
    c.lr_schedule = LR_COSINE;
    check(near(lr_at(&c, 0, total), 0.1f) && near(lr_at(&c, 9, total), 1.0f), "warmup is linear from lr/warmup to lr");
    check(near(lr_at(&c, 10, total), 1.0f) && near(lr_at(&c, 109, total), 0.1f) &&
          near(lr_at(&c, 10 + 99 / 2, total), 0.1f + 0.9f * 0.5f * (1.0f + cosf((float)M_PI * 49.0f / 99.0f))),
          "cosine decays from lr to lr*final_frac over the steps after warmup");
    c.lr_schedule = LR_LINEAR;
    check(near(lr_at(&c, 10, total), 1.0f) && near(lr_at(&c, 109, total), 0.1f) &&
          near(lr_at(&c, 10 + 33, total), 1.0f - 0.9f * 33.0f / 99.0f), "linear decay hits both ends and is linear");
    c.lr_schedule = LR_CONSTANT;
    check(near(lr_at(&c, 50, total), 1.0f) && near(lr_at(&c, 109, total), 1.0f), "constant stays at lr after warmup");
    c.lr_schedule = LR_WSD;
    c.wsd_decay_frac = 0.2f;  // decay over the last 22 steps: 88..109
    check(near(lr_at(&c, 87, total), 1.0f) && near(lr_at(&c, 88, total), 1.0f) && near(lr_at(&c, 109, total), 0.1f) &&
          lr_at(&c, 100, total) < 1.0f, "wsd holds lr until the last 20%% of steps, then decays to the floor");
    c.warmup = 0;
    c.lr_schedule = LR_COSINE;
    check(near(lr_at(&c, 0, total), 1.0f), "no warmup starts at the peak");
}

static void write_shard(const char *path, int shard_id, long n) {
    int h[256] = {0};
    h[0] = SHARD_MAGIC; h[1] = SHARD_VERSION; h[2] = (int)n;
    FILE *fp = fopenCheck(path, "wb");
    fwrite(h, sizeof(int), 256, fp);
    for (long i = 0; i < n; i++) {
        uint16_t t = (uint16_t)((shard_id * 7 + i) % 1000);
        fwrite(&t, 2, 1, fp);
    }
    fclose(fp);
}

// (shard, offset) of the next micro-batch, as one number
static long next_key(DataLoader *dl) {
    dataloader_next(dl);
    return (long)dl->cur_shard * 100000000L + dl->cur_offset;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

// Whether keys[0..n) holds each of the n windows of `all` (sorted) exactly once.
static int each_once(const long *keys, const long *all, long n) {
    long *k = mallocCheck(n * sizeof(long));
    memcpy(k, keys, n * sizeof(long));
    qsort(k, n, sizeof(long), cmp_long);
    int same = memcmp(k, all, n * sizeof(long)) == 0;
    free(k);
    return same;
}

// The shuffled order over several epochs, read by one process and by 4 ranks (105 windows: an epoch
// ends in the middle of a round of the ranks, and the order crosses shard boundaries inside an epoch).
// Every epoch holds every window exactly once, each epoch in an order of its own (none in file order),
// and the ranks' micro-batches are the one-process stream dealt out round-robin.
static void check_epochs(DataLoader *one, const char *pattern, int B, int T) {
    enum { EPOCHS = 4, WORLD = 4 };
    long wpe = one->windows_per_epoch, n = EPOCHS * wpe;
    long *stream = mallocCheck(n * sizeof(long)), *all = mallocCheck(wpe * sizeof(long));
    dataloader_reset(one);
    for (long i = 0; i < n; i++) stream[i] = next_key(one);
    long m = 0;  // every window of every shard, in file order (from the shard sizes, not from the loader)
    for (int s = 0; s < one->nshards; s++)
        for (long w = 0; w < (one->shards[s].ntok - 1) / ((long)B * T) && m < wpe; w++) all[m++] = s * 100000000L + w * B * T;
    int once = 1, fresh = 1, shuffled = 1, crossings = 0;
    for (int e = 0; e < EPOCHS; e++) {
        const long *ep = stream + e * wpe;
        once &= each_once(ep, all, wpe);
        shuffled &= memcmp(ep, all, wpe * sizeof(long)) != 0;
        for (int f = 0; f < e; f++) fresh &= memcmp(ep, stream + f * wpe, wpe * sizeof(long)) != 0;
        for (long i = 1; i < wpe; i++) crossings += ep[i] / 100000000L != ep[i - 1] / 100000000L;
    }
    check(m == wpe && once && shuffled && crossings == EPOCHS * 2, "%d epochs of %ld windows: each holds every window exactly once, "
          "across %d shard boundaries, none in file order", EPOCHS, wpe, crossings);
    check(fresh, "each of %d epochs is in an order of its own (no two epochs alike)", EPOCHS);
    // rank r's k-th micro-batch is the stream's (k*WORLD + r)-th, so each epoch, cut by global index, again
    // holds every window once
    DataLoader ranks[WORLD];
    long *dealt = mallocCheck(n * sizeof(long));
    for (int r = 0; r < WORLD; r++) dataloader_init(&ranks[r], pattern, "-i", B, T, r, WORLD, 1, 42, 1000);
    for (long k = 0; k * WORLD < n; k++)
        for (int r = 0; r < WORLD && k * WORLD + r < n; r++) dealt[k * WORLD + r] = next_key(&ranks[r]);
    int ranks_once = 1;
    for (int e = 0; e < EPOCHS; e++) ranks_once &= each_once(dealt + e * wpe, all, wpe);
    check(ranks_once && memcmp(dealt, stream, n * sizeof(long)) == 0, "%d ranks over %d epochs (%ld windows, "
          "not a multiple of %d): together they take every window once per epoch, in the one-process order",
          WORLD, EPOCHS, wpe, WORLD);
    for (int r = 0; r < WORLD; r++) dataloader_free(&ranks[r]);
    free(dealt); free(stream); free(all);
}

static void test_dataloader(void) {
    char dir[] = "/tmp/test_units_XXXXXX";
    if (!mkdtemp(dir)) fatal("mkdtemp failed");
    char path[256], pattern[256];
    long sizes[3] = {1000, 1601, 777};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/train_%06d.bin", dir, i);
        write_shard(path, i, sizes[i]);
    }
    snprintf(pattern, sizeof(pattern), "%s/train_*.bin", dir);
    int B = 2, T = 16;
    DataLoader one;
    dataloader_init(&one, pattern, "-i", B, T, 0, 1, 1, 42, 1000);
    long wpe = one.windows_per_epoch;
    long expect = (999 / 32) + (1600 / 32) + (776 / 32);
    check(wpe == expect, "windows per epoch %ld = sum over shards of (n-1)/(B*T) = %ld", wpe, expect);

    // one epoch visits every window exactly once, and the inputs/targets are the shifted window
    long *keys = mallocCheck(wpe * sizeof(long));
    int shifted = 1;
    for (long i = 0; i < wpe; i++) {
        keys[i] = next_key(&one);
        for (int k = 0; k < B * T; k++) {
            long pos = one.cur_offset + k;
            int want_in = (int)((one.cur_shard * 7 + pos) % 1000), want_tg = (int)((one.cur_shard * 7 + pos + 1) % 1000);
            if (one.inputs[k] != want_in || one.targets[k] != want_tg) shifted = 0;
        }
    }
    qsort(keys, wpe, sizeof(long), cmp_long);
    int unique = 1;
    for (long i = 1; i < wpe; i++) if (keys[i] == keys[i - 1]) unique = 0;
    check(unique, "an epoch visits each of the %ld windows exactly once", wpe);
    check(shifted, "targets are the inputs shifted by one token, read from the right shard and offset");

    // the next epoch is a different order of the same windows
    dataloader_reset(&one);
    long first_epoch0 = next_key(&one);
    one.pos = wpe;
    long first_epoch1 = next_key(&one);
    check(first_epoch0 != first_epoch1, "each epoch is shuffled anew");

    // N ranks with accumulation A read exactly what one process reads with N*A
    for (int world = 2; world <= 4; world += 2) {
        int A = 3, steps = 9;  // crosses an epoch boundary (105 windows < 9 steps x 12)
        DataLoader ranks[4];
        for (int r = 0; r < world; r++) dataloader_init(&ranks[r], pattern, "-i", B, T, r, world, 1, 42, 1000);
        dataloader_reset(&one);
        int same = 1;
        for (int s = 0; s < steps; s++) {
            long a[64], b[64];
            for (int i = 0; i < A * world; i++) a[i] = next_key(&one);
            int n = 0;
            for (int r = 0; r < world; r++)
                for (int i = 0; i < A; i++) b[n++] = next_key(&ranks[r]);
            qsort(a, n, sizeof(long), cmp_long);
            qsort(b, n, sizeof(long), cmp_long);
            if (memcmp(a, b, n * sizeof(long)) != 0) same = 0;
        }
        check(same, "%d ranks x accumulation %d read the same micro-batches per step as 1 process x %d", world, A, A * world);
        for (int r = 0; r < world; r++) dataloader_free(&ranks[r]);
    }

    // resuming from a saved position continues the same stream
    dataloader_reset(&one);
    for (int i = 0; i < 37; i++) next_key(&one);
    uint64_t saved = one.pos;
    long cont[5], res[5];
    for (int i = 0; i < 5; i++) cont[i] = next_key(&one);
    DataLoader again;
    dataloader_init(&again, pattern, "-i", B, T, 0, 1, 1, 42, 1000);
    again.pos = saved;
    for (int i = 0; i < 5; i++) res[i] = next_key(&again);
    check(memcmp(cont, res, sizeof(cont)) == 0, "a loader restored to position %llu continues the same stream",
          (unsigned long long)saved);

    check_epochs(&one, pattern, B, T);

    DataLoader ordered;
    dataloader_init(&ordered, pattern, "-i", B, T, 0, 1, 0, 42, 1000);
    long k0 = next_key(&ordered), k1 = next_key(&ordered);
    check(k0 == 0 && k1 == 32, "--shuffle 0 reads the first shard in order");
    dataloader_free(&ordered);
    dataloader_free(&again);
    dataloader_free(&one);
    free(keys);
    for (int i = 0; i < 3; i++) { snprintf(path, sizeof(path), "%s/train_%06d.bin", dir, i); remove(path); }
    rmdir(dir);
}

// The synthetic corpus's floor, computed by synth_init's recursion, against the mean loss of an
// oracle that predicts 2M sampled tokens from the rules alone (it knows the chain and the copy
// rule, reads each document from its start, and checks every copy as it goes).
static void test_synthetic(void) {
    int T = 64;
    SynthSource m;
    synth_init(&m, 0, T);
    long n = 2000000 / T * T + 1;
    uint16_t *x = synth_sample(&m, n, 7);
    double nll = 0.0, r = SYNTH_COPY_RATE;
    long targets = 0, copies = 0, bad_copies = 0, markers = 0;
    for (long d = 0; d + T < n; d += T) {
        for (int p = 1; p <= T; p++) {  // targets 1..T-1 of the document, then the next one's first token
            int prev = x[d + p - 1], tok = x[d + p];
            double q;
            if (p < T && prev == SYNTH_MARKER) {  // a copy of the document's first token
                copies++;
                if (tok != x[d]) bad_copies++;
                q = 1.0;
            } else {
                double chain = 0.0;
                for (int k = 0; k < SYNTH_SUCCESSORS; k++) if (m.next[prev][k] == tok) chain += m.prob[prev][k];
                int may_mark = p <= T - 2;
                q = tok == SYNTH_MARKER ? (may_mark ? r : 0.0) : (may_mark ? 1.0 - r : 1.0) * chain;
                markers += tok == SYNTH_MARKER;
            }
            nll -= log(q);
            targets++;
        }
    }
    nll /= targets;
    check(bad_copies == 0 && copies > 0, "synthetic corpus: all %ld tokens after a marker repeat their document's first token",
          copies);
    check(fabs(nll - m.floor) < 0.005, "synthetic corpus: an oracle's mean loss on 2M sampled tokens %.4f matches the "
          "computed floor %.4f", nll, m.floor);
    check(fabs((double)copies / targets - m.copied) < 0.002 && fabs((double)markers / targets - m.copied) < 0.002,
          "synthetic corpus: copies are %.4f of the targets, as computed (%.4f)", (double)copies / targets, m.copied);
    free(x);
}

static void test_state_file(void) {
    char path[] = "/tmp/test_state_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    TrainState s = {12, 4, 64, 3, 2, 1, 100, 50257, 0x123456789abcull, 777, 0xfedcba9876543210ull, 1000,
                    10, 32768.0f, 12, 7, 1, 2, 1, 0, 0, 0, {0}};  // optimizer 1: Muon, a version 3 file
    float m[1000], v[1000], m2[1000], v2[1000];
    for (int i = 0; i < 1000; i++) { m[i] = i * 0.5f; v[i] = -i * 0.25f; }
    state_write(path, &s, m, v);
    TrainState r;
    state_read(path, &r, m2, v2);
    check(memcmp(&s, &r, sizeof(s)) == 0 && memcmp(m, m2, sizeof(m)) == 0 && memcmp(v, v2, sizeof(v)) == 0,
          "training-state file round-trips every field and both moment vectors");
    // AdamW's state is version 2, as before Muon (older builds read it); Muon's is version 3 and says so
    FILE *vp = fopen(path, "rb");
    int hv[25];
    check(vp && fread(hv, sizeof(int), 25, vp) == 25 && hv[1] == 3 && hv[24] == 1, "a Muon state file is version 3 with [24] = 1");
    if (vp) fclose(vp);
    s.optimizer = 0;
    state_write(path, &s, m, v);
    vp = fopen(path, "rb");
    check(vp && fread(hv, sizeof(int), 25, vp) == 25 && hv[1] == 2 && hv[24] == 0, "an AdamW state file is version 2, as before");
    if (vp) fclose(vp);
    // attention's masks (train/attn_masks.h): version 4, [25] the flags, [26] the separator, [27] the windows' period
    // and [28..] the windows, read back as written
    s.mask_flags = 3, s.doc_sep = 50256, s.window_period = 3, s.windows[0] = 128, s.windows[1] = 128, s.windows[2] = 0;
    state_write(path, &s, m, v);
    state_read(path, &r, m2, v2);
    vp = fopen(path, "rb");
    int h4[32];
    check(vp && fread(h4, sizeof(int), 32, vp) == 32 && h4[1] == 4 && h4[25] == 3 && h4[26] == 50256 && h4[27] == 3 &&
              h4[28] == 128 && h4[30] == 0 && h4[31] == 0 && memcmp(&s, &r, sizeof(s)) == 0,
          "a state file with masks is version 4: flags, separator and the windows' period round-trip");
    if (vp) fclose(vp);
    s.mask_flags = s.doc_sep = s.window_period = 0;
    memset(s.windows, 0, sizeof(s.windows));
    // a version 1 file (before loss scaling) still loads: updates = step, no scaler state
    FILE *fp = fopen(path, "r+b");
    int one = 1;
    fseek(fp, 4, SEEK_SET);
    fwrite(&one, sizeof(int), 1, fp);
    fclose(fp);
    state_read(path, &r, NULL, NULL);
    check(r.step == 12 && r.updates == 12 && r.loss_scale == 0.0f && r.scaler_last_overflow == -1,
          "a version 1 training-state file loads with updates = step and no loss-scaler state");
    remove(path);
}

// DeepSpeed's dynamic loss scaling rules, traced by hand: 2^4 start, window 3, hysteresis 2, floor 2.
static void test_loss_scaler(void) {
    TrainConfig c;
    config_defaults(&c);
    c.loss_scale = LOSS_SCALE_DYNAMIC;
    c.loss_scale_power = 4; c.loss_scale_window = 3; c.loss_scale_hysteresis = 2; c.loss_scale_min = 2.0f;
    LossScaler s;
    loss_scaler_init(&s, &c);
    const int overflow[14] = {0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    // clean steps 0-2 double the scale at the 3rd; the 1st overflow spends hysteresis, the 2nd halves;
    // three clean steps after the last overflow double (and refill hysteresis); then halving to the
    // floor, where one more overflow is fatal
    const int want_ret[14] = {0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, -1};
    const float want_scale[14] = {16, 16, 32, 32, 16, 16, 16, 32, 32, 16, 8, 4, 2, 2};
    int ok = 1;
    for (int i = 0; i < 14; i++) {
        int r = loss_scaler_update(&s, overflow[i]);
        if (r != want_ret[i] || s.scale != want_scale[i]) {
            printf("  step %d: returned %d scale %g, expected %d scale %g\n", i, r, s.scale, want_ret[i], want_scale[i]);
            ok = 0;
        }
    }
    check(ok && s.skipped == 8, "dynamic loss scaling follows DeepSpeed's rules (window, hysteresis, floor) over 14 steps");
    c.loss_scale = LOSS_SCALE_NONE;
    loss_scaler_init(&s, &c);
    check(s.scale == 1.0f && !s.dynamic && loss_scaler_update(&s, 1) == 1 && s.scale == 1.0f && loss_scaler_update(&s, 0) == 0,
          "with loss scaling off the scale stays 1 and an overflowed step is still skipped");
    c.loss_scale = LOSS_SCALE_FIXED; c.loss_scale_fixed = 1024.0f;
    loss_scaler_init(&s, &c);
    check(s.scale == 1024.0f && !s.dynamic, "a fixed --loss-scale is taken as given");
}

// Rows of logits as a trained model gives them (not random init's nearly flat ones): a bulk of GPT-2's padded
// vocabulary (50,257 of 50,304 columns) normal around 0 with spread sd, 20 likely tokens up to `top` nats above it
// and one above those, the target the top token, a likely one or one of the bulk (losses from ~0.01 to ~25).
static void sharp_rows(float *logits, int *targets, int N, int V, int Vp, uint64_t *rng) {
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        const double sd = 1.5 + i % 3, top = 18.0 + 4 * (i % 4);
        for (int v = 0; v < Vp; v++) {
            double u = random_f32(rng) + 1e-9, w = random_f32(rng);
            row[v] = (float)(sd * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * w));
        }
        int best = (int)(random_u32(rng) % V), likely = best;
        for (int k = 0; k < 20; k++) row[likely = (int)(random_u32(rng) % V)] = (float)(top - (i % 2 ? 14.0 : 8.0) + 7.0 * random_f32(rng));
        row[best] = (float)top;
        targets[i] = i % 3 == 0 ? best : i % 3 == 1 ? likely : (int)(random_u32(rng) % V);
    }
}

// The classifier's loss and dlogits against the same arithmetic in long double (64-bit mantissa) on the same
// logits, on sharp 50k-wide rows: a float running sum of the row's exponentials was off by up to 4e-4 relative
// there, and so was every probability of the gradient. Bounds: 1e-6 relative on each row's loss, 1e-6 of the
// row's largest gradient on each gradient (a float's rounding is 6e-8).
static void test_classifier_sharp(void) {
    const int N = 12, V = 50257, Vp = 50304;
    const float dloss = 1.0f / N;
    float *logits = (float *)mallocCheck((size_t)N * Vp * sizeof(float)), *losses = (float *)mallocCheck(N * sizeof(float));
    int *targets = (int *)mallocCheck(N * sizeof(int));
    uint64_t rng = 1234;
    sharp_rows(logits, targets, N, V, Vp, &rng);
    long double *ref = (long double *)mallocCheck((size_t)N * Vp * sizeof(long double)), *ref_loss = (long double *)mallocCheck(N * sizeof(long double));
    for (int i = 0; i < N; i++) {
        const float *row = logits + (size_t)i * Vp;
        long double *g = ref + (size_t)i * Vp, m = -INFINITY, s = 0.0L;
        for (int v = 0; v < V; v++) m = fmaxl(m, row[v]);
        for (int v = 0; v < V; v++) s += g[v] = expl((long double)row[v] - m);
        ref_loss[i] = logl(s) + m - row[targets[i]];
        for (int v = 0; v < Vp; v++) g[v] = v < V ? g[v] / s * dloss : 0.0L;
        g[targets[i]] -= dloss;
    }
    classifier_forward_backward(logits, losses, targets, N, V, Vp, dloss);
    double loss_err = 0.0, grad_err = 0.0, lo = INFINITY, hi = 0.0;
    for (int i = 0; i < N; i++) {
        loss_err = fmax(loss_err, (double)(fabsl(losses[i] - ref_loss[i]) / ref_loss[i]));
        lo = fmin(lo, (double)ref_loss[i]); hi = fmax(hi, (double)ref_loss[i]);
        long double worst = 0.0L, scale = 0.0L;
        for (int v = 0; v < Vp; v++) {
            long double r = ref[(size_t)i * Vp + v];
            worst = fmaxl(worst, fabsl(logits[(size_t)i * Vp + v] - r)); scale = fmaxl(scale, fabsl(r));
        }
        grad_err = fmax(grad_err, (double)(worst / scale));
    }
    check(loss_err < 1e-6, "classifier on %d sharp rows of %d (losses %.3g to %.3g): each loss within %.2e of long double's "
          "(< 1e-6 relative)", N, V, lo, hi, loss_err);
    check(grad_err < 1e-6, "classifier on the same rows: dlogits within %.2e of long double's, relative to the row's "
          "largest (< 1e-6)", grad_err);
    free(logits); free(losses); free(targets); free(ref); free(ref_loss);
}

// Pruning after this run's checkpoint of step 5, in a folder that also holds another run's of steps 10 and 20
// (issue 50: the new run's step 5 was pruned as the oldest): this run's newest is kept, the other run's are not
// touched, and of this run's own only `keep` remain (step 3 of 1, 3, 5 goes at keep 2).
static void test_prune(void) {
    char dir[] = "/tmp/test_prune_XXXXXX";
    if (!mkdtemp(dir)) { check(0, "mkdtemp for the pruning test"); return; }
    int steps[] = {1, 3, 5, 10, 20};
    for (int i = 0; i < 5; i++) {
        char mp[4200], sp[4200];
        checkpoint_paths(dir, steps[i], mp, sp, sizeof(mp));
        fclose(fopenCheck(mp, "wb"));
        fclose(fopenCheck(sp, "wb"));
    }
    checkpoint_prune(dir, 2, 5);
    int left[8];
    int n = checkpoint_list(dir, left, 8);
    check(n == 4 && left[0] == 3 && left[1] == 5 && left[2] == 10 && left[3] == 20,
          "pruning after step 5 at --keep-checkpoints 2 keeps steps 3 and 5 and another run's 10 and 20 (%d left, first %d)",
          n, n ? left[0] : -1);
    for (int i = 0; i < 5; i++) {
        char mp[4200], sp[4200];
        checkpoint_paths(dir, steps[i], mp, sp, sizeof(mp));
        remove(mp); remove(sp);
    }
    rmdir(dir);
}

int main(void) {
    test_schedules();
    test_dataloader();
    test_synthetic();
    test_state_file();
    test_prune();
    test_loss_scaler();
    test_classifier_sharp();
    return check_summary();
}
