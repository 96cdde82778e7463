// autotune.h: --autotune, the fastest configuration that fits. Given the run's model, data, sequence
// length and tokens per step, it enumerates micro-batch size x recompute level x offload (x ZeRO stage
// where it changes anything), drops what the exact memory plan (plan.h, the run's own check:
// what the run would allocate, byte for byte, which the tests check) says cannot fit the device or the
// host (--mem-limit pretends a smaller one), times a few steps of each survivor, and prints them sorted
// by tokens/s with their memory and the days to train --target-tokens at that speed.
//
// Each survivor is timed as a child process of this binary with exactly the flags the table prints,
// so a measured row is what pasting its flags gives, and a configuration that cannot start (or runs
// out of memory the plan did not see) shows as failed instead of taking the tuner down with it.
//
// Offload and (for one rank) ZeRO-3 are levers for memory only: they move state off the device and add
// copies, so they cannot make a layout faster. An offload candidate is timed only where the same layout
// with less offloaded does not fit (and never in the CPU build, where device memory is host memory).
//
// Timing on a shared machine is noisy: every candidate is timed 2-3 times, in interleaved rounds
// (so all of them meet the other jobs' load alike), and the table gives each one's mean and the range of
// its runs. Another configuration replaces the run's own only when its slowest run beats the own's
// fastest (the ranges do not overlap) and its mean is faster by more than TUNE_MARGIN: a smaller lead is noise.
//
// What stays the same: the tokens per step, the learning-rate schedule, the seed and the data. Recompute
// levels, ZeRO stages and offload change no number (bit-identical losses; the tuner checks it on the
// timed steps against the run's own configuration). The micro-batch size is different: the data loader
// cuts the stream into windows of B x T tokens, so another B reads the data in another order, and its
// weights differ as another seed's would. `best:` therefore keeps the run's micro-batch size (the same
// weights, only faster), and the fastest configuration overall is printed above it.
#ifndef AUTOTUNE_H
#define AUTOTUNE_H

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "run.h"
#include "plan.h"

#define TUNE_MAX_RUNS 8
typedef struct {
    int B, A, recompute, zero, pp, tp, ok, same_b;
    int sp;                  // --tp > 1: sequence parallelism (on where T divides by tp, as Megatron advises)
    int lever_only;          // fits, but a memory lever where the layout fits without it: not timed (why says so)
    OffloadWhat offload;
    double device_bytes, host_bytes;
    double ms, tps;          // mean over its runs of each run's median step; tps 0 = not timed
    double sum_ms;
    int runs;
    double run_tps[TUNE_MAX_RUNS];  // each run's tokens/s
    double lo_tps, hi_tps;          // the slowest and the fastest run
    double max_loss_diff;    // against the run's own configuration's losses (same B only); -1 = not compared
    char flags[160], why[4400];
    double losses[16];
    int nlosses, own;        // own: the run's own configuration
} TuneCandidate;

// A run times this many steps after one warm-up step; its figure is their median. Each candidate is run
// TUNE_RUNS times (TUNE_RUNS_MPI for several ranks), in interleaved rounds (every other one in reverse
// order), and judged by the mean and the range of its runs; another configuration replaces the run's own
// only when it is faster beyond that range and by more than TUNE_MARGIN.
#define TUNE_TIMED_STEPS 3
#define TUNE_RUNS 3            // one process
#define TUNE_RUNS_MPI 2        // several ranks: each run starts an mpirun, which costs more than the few steps it times
#define TUNE_MARGIN 0.03

// Flags of the user's command line that the tuner sets itself or that make no sense in a timing run.
static int tune_dropped(const OptSpec *o) {
    static const char *const drop[] = {"--autotune", "--mem-limit", "--target-tokens", "--tokens-per-s", "--log", "--out-dir",
                                       "--checkpoint-every", "--resume", "--profile", "--timing", "--dry-run", "--steps",
                                       "--val-every", "--sample-every", "--micro-batch", "--grad-accum", "--recompute",
                                       "--zero-stage", "--offload", "--total-batch-tokens", "--pp", "--autotune-world",
                                       "--tp", "--sp"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) if (strcmp(o->longname, drop[i]) == 0) return 1;
    return 0;
}

// A candidate's log: its losses into c, the timed steps' milliseconds (after the warm-up step) into times;
// returns how many were timed.
static int tune_read_log(TuneCandidate *c, const char *logp, double times[16]) {
    FILE *lf = fopen(logp, "r");
    int timed = 0;
    c->nlosses = 0;
    char line[4096];
    while (lf && fgets(line, sizeof(line), lf)) {
        int step;
        double loss, ms;
        const char *pm = strstr(line, "\"ms\": ");
        if (sscanf(line, "{\"step\": %d, \"loss\": %lf", &step, &loss) == 2 && pm && sscanf(pm + 6, "%lf", &ms) == 1) {
            if (c->nlosses < 16) c->losses[c->nlosses++] = loss;
            if (step > 1 && timed < 16) times[timed++] = ms;
        }
    }
    if (lf) fclose(lf);
    return timed;
}

// Runs one candidate: this binary with the user's flags (less the dropped ones) and the candidate's;
// fills ms, tps and the losses from its log.
static void tune_time(TuneCandidate *c, int argc, char **argv, long total, const char *dir, int idx, int world) {
    char logp[4200], outp[4200];
    snprintf(logp, sizeof(logp), "%s/candidate%d.jsonl", dir, idx);
    snprintf(outp, sizeof(outp), "%s/candidate%d.out", dir, idx);
    char *args[256];
    int n = 0;
    // several ranks: through mpirun, which needs this binary's real path (its /proc/self/exe is mpirun's)
    static char self[4096];
    ssize_t len_self = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[len_self > 0 ? len_self : 0] = '\0';
    char np[16];
    snprintf(np, sizeof(np), "%d", world);
    if (world > 1) {
        args[n++] = (char *)"mpirun";
        if (geteuid() == 0) args[n++] = (char *)"--allow-run-as-root";
        args[n++] = (char *)"--oversubscribe";
        args[n++] = (char *)"-x";
        args[n++] = (char *)"OMP_NUM_THREADS";
        args[n++] = (char *)"-np";
        args[n++] = np;
        args[n++] = self;
    } else {
        args[n++] = (char *)"/proc/self/exe";
    }
    for (int i = 1; i < argc && n < 200; i++) {
        const char *arg = argv[i];
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const OptSpec *o = NULL;
        for (int k = 0; k < NUM_OPTIONS && !o; k++) {
            const OptSpec *s = &OPTIONS[k];
            if ((strlen(s->longname) == len && strncmp(arg, s->longname, len) == 0) || (s->shortname && !eq && strcmp(arg, s->shortname) == 0)) o = s;
        }
        int takes_value = o && !eq && o->kind != OPT_FLAG;
        if (o && o->kind == OPT_FLAG && !eq && i + 1 < argc && (strcmp(argv[i + 1], "0") == 0 || strcmp(argv[i + 1], "1") == 0)) takes_value = 1;
        if (o && tune_dropped(o)) { if (takes_value) i++; continue; }
        args[n++] = argv[i];
        if (takes_value && i + 1 < argc) args[n++] = argv[++i];
    }
    char b[16], a[16], r[16], z[16], d[32], x[16], pp[16], tp[16], sp[16];
    snprintf(pp, sizeof(pp), "%d", c->pp);
    snprintf(tp, sizeof(tp), "%d", c->tp);
    snprintf(sp, sizeof(sp), "%d", c->sp);
    snprintf(b, sizeof(b), "%d", c->B); snprintf(a, sizeof(a), "%d", c->A); snprintf(r, sizeof(r), "%d", c->recompute);
    snprintf(z, sizeof(z), "%d", c->zero); snprintf(d, sizeof(d), "%ld", total); snprintf(x, sizeof(x), "%d", TUNE_TIMED_STEPS + 1);
    const char *extra[] = {"-b", b, "--grad-accum", a, "-d", d, "-r", r, "-z", z, "--offload", OFFLOAD_NAMES[c->offload], "--pp", pp,
                           "-x", x, "-v", "0", "-s", "0", "--log", logp, "--tp", tp, "--sp", sp};
    // --sp only with --tp > 1
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]) - (c->tp > 1 ? 0 : 2); i++) args[n++] = (char *)extra[i];
    args[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fatal("--autotune: fork failed: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // a tuner that is stopped takes its candidate with it
        FILE *f = freopen(outp, "w", stdout);
        if (f) dup2(fileno(stdout), 2);
        // each rank gets its share of the cores, unless the user has said how many threads
        char threads[32];
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(threads, sizeof(threads), "%ld", ncpu / world > 0 ? ncpu / world : 1);
        if (world > 1) setenv("OMP_NUM_THREADS", threads, 0);
        if (world > 1) execvp("mpirun", args);
        else execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    double times[16];
    int timed = tune_read_log(c, logp, times);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || timed == 0) {
        if (c->runs > 0) return;  // a later run that failed keeps the earlier figure
        snprintf(c->why, sizeof(c->why), "failed (exit %d; see its output: %s)", WIFEXITED(status) ? WEXITSTATUS(status) : -1, outp);
        c->tps = 0.0;
        return;
    }
    for (int i = 1; i < timed; i++)
        for (int j = i; j > 0 && times[j] < times[j - 1]; j--) { double t = times[j]; times[j] = times[j - 1]; times[j - 1] = t; }
    double median = timed % 2 ? times[timed / 2] : 0.5 * (times[timed / 2 - 1] + times[timed / 2]);
    double run_tps = total / (median / 1e3);
    if (c->runs < TUNE_MAX_RUNS) c->run_tps[c->runs] = run_tps;
    c->lo_tps = c->runs == 0 || run_tps < c->lo_tps ? run_tps : c->lo_tps;
    c->hi_tps = c->runs == 0 || run_tps > c->hi_tps ? run_tps : c->hi_tps;
    c->sum_ms += median;
    c->runs++;
    c->ms = c->sum_ms / c->runs;
    c->tps = total / (c->ms / 1e3);
}

// The spread of a candidate's runs: half their range, as a share of the mean.
static double tune_spread(const TuneCandidate *c) { return c->tps > 0 ? 0.5 * (c->hi_tps - c->lo_tps) / c->tps : 0.0; }

static int tune_cmp(const void *a, const void *b) {
    const TuneCandidate *x = (const TuneCandidate *)a, *y = (const TuneCandidate *)b;
    if ((x->tps > 0) != (y->tps > 0)) return x->tps > 0 ? -1 : 1;
    if (x->ok != y->ok) return x->ok ? -1 : 1;
    return x->tps > y->tps ? -1 : x->tps < y->tps ? 1 : 0;
}

// Bytes as the table shows them: MiB below a GiB, so small models do not all read "0.01 GiB".
static const char *tune_bytes(double b, char *buf, size_t n) {
    if (b < 1073741824.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    return buf;
}

// A candidate's memory per rank: the largest of its stages' plans (each stage holds its layers, and the
// first and last the outer tensors each uses; micro-batches in flight per 1F1B), of its TP rank's slice of the model
// (--tp, with sequence parallelism where T divides by the degree). Where the device is the host (the CPU
// build) the host's share is device memory too.
static PlanNeed tune_need(const Run *r, const TuneCandidate *c, const int *first, int *holds_unit, int device_is_host) {
    ModelConfig slice = r->mc;
    slice.tp_size = c->tp; slice.tp_rank = 0; slice.seq_parallel = c->sp;  // the TP ranks' slices are the same sizes
    const ModelConfig *mc = &slice;
    int dp = r->cfg.autotune_world / (c->pp * c->tp);
    PlanChoice choice = {c->zero, c->offload != OFFLOAD_NONE, c->offload == OFFLOAD_PARAMS, 0};
    PlanNeed worst = {0, 0, 0};
    for (int st = 0; st < c->pp; st++) {
        slice.ends = pp_stage_ends(st, c->pp);  // the outer tensors the stage holds
        PlanLayout l = {mc, c->B, r->T, c->recompute, 0, 0, NULL, dp, 0, 0, run_sample_tokens(&r->cfg, r->T),
                        optimizer_ops(r->cfg.optimizer), r->cfg.doc_mask, r->any_window || r->cfg.doc_mask};  // the run's samples, whichever candidate it takes
        plan_stage(&l, first, c->pp, st, c->A, holds_unit);
        PlanNeed n = plan_need(&l, choice, NULL);
        if (device_is_host) { n.device += n.host; n.host = 0; }
        if (n.device > worst.device) worst.device = n.device;
        if (n.host > worst.host) worst.host = n.host;
    }
    return worst;
}

// Fills in a candidate's memory, whether it fits `cap`, why not, and its flags.
static void tune_fill(const Run *r, TuneCandidate *c, const int *first, int *holds_unit, const MachineCapacity *cap) {
    int W = r->cfg.autotune_world, cpu = cap->device_is_host;
    PlanNeed n = tune_need(r, c, first, holds_unit, cpu);
    double on_dev = (double)n.device, on_host = (double)n.host;
    double limit = cpu ? cap->ram : cap->device, host_limit = cap->ram;
    c->device_bytes = on_dev; c->host_bytes = on_host;
    c->ok = plan_fits(&n, cap);
    char need[32], have[32];
    if (!c->ok) snprintf(c->why, sizeof(c->why), "does not fit: %s %s > %s", tune_bytes(on_dev > limit ? on_dev : on_host, need, sizeof(need)),
                         on_dev > limit ? (cpu ? "of memory" : "on the device") : "on the host",
                         tune_bytes(on_dev > limit ? limit : host_limit, have, sizeof(have)));
    const char *off = OFFLOAD_NAMES[c->offload];
    char tp[32] = "";
    if (c->tp > 1) snprintf(tp, sizeof(tp), " --tp %d --sp %d", c->tp, c->sp);
    if (W > 1) snprintf(c->flags, sizeof(c->flags), "-b %d --grad-accum %d -r %d -z %d --offload %s --pp %d%s", c->B, c->A, c->recompute,
                        c->zero, off, c->pp, tp);
    else snprintf(c->flags, sizeof(c->flags), "-b %d --grad-accum %d -r %d -z %d --offload %s", c->B, c->A, c->recompute, c->zero, off);
}

// Offload is a lever for memory only (it moves state off the device and adds copies): a candidate that
// offloads is timed only where the same micro-batch, recompute level and layout with less offloaded (no
// offload for the optimizer; the optimizer alone for the parameters, at ZeRO-0 for one rank) does not
// fit. In the CPU build the device's memory is the host's, so offload frees nothing there.
static void tune_mark_levers(TuneCandidate *cs, int nc, int W, int device_is_host) {
    for (int i = 0; i < nc; i++) {
        TuneCandidate *c = &cs[i];
        if (!c->ok || c->offload == OFFLOAD_NONE) continue;
        if (device_is_host) {
            c->lever_only = 1;
            snprintf(c->why, sizeof(c->why), "not timed: offload frees no memory in the CPU build (device memory is host "
                     "memory) and only adds copies");
            continue;
        }
        int dp = W / (c->pp * c->tp);
        OffloadWhat lighter = c->offload == OFFLOAD_PARAMS ? OFFLOAD_OPTIMIZER : OFFLOAD_NONE;
        int lighter_zero = c->offload == OFFLOAD_PARAMS && dp == 1 ? 0 : c->zero;
        for (int j = 0; j < nc; j++) {
            const TuneCandidate *o = &cs[j];
            if (o->ok && o->B == c->B && o->recompute == c->recompute && o->pp == c->pp && o->tp == c->tp && o->offload == lighter &&
                o->zero == lighter_zero) {
                c->lever_only = 1;
                snprintf(c->why, sizeof(c->why), "not timed: %s fits, and offload only adds copies", o->flags);
                break;
            }
        }
    }
}

// Whether --tp N splits this model (tp_layout.h: N divides the query heads, the MLP and the padded vocabulary, and
// divides the key/value heads or is a multiple of them) in a build that runs it.
static int tune_tp_splits(const ModelConfig *mc, int n) {
    if (n == 1) return 1;
    if (!backend_has_tp()) return 0;
    ArchShape s = model_whole_shape(mc);
    TpDims t = {n, 0, mc->num_heads, mc->num_kv_heads};
    char msg[400];
    return tp_shape_error(&s, &t, msg, sizeof(msg)) == NULL;
}

// The candidates: micro-batch sizes bs[0..nb) x layouts x recompute x offload. Layouts: tensor-parallel degrees
// that divide the world and split the model (tune_tp_splits; with sequence parallelism where they divide T), times
// pipeline stages that divide the rest (at most one per layer); ZeRO stages where there is more than one data-parallel rank to shard over (2-3 not with a
// pipeline); offload none, the AdamW state on the host, and with ZeRO-3 the layers' parameters too (with one
// data-parallel rank stage 3 is enumerated only where offload params needs it).
static TuneCandidate *tune_enumerate(const Run *r, long total, const int *bs, int nb, const MachineCapacity *cap, int *count) {
    const ModelConfig *mc = &r->mc;
    int T = r->T, L = mc->num_layers, W = r->cfg.autotune_world, layouts = 0;
    // the layouts: (TP degree, stages) pairs, counted, then listed
    for (int tp = 1; tp <= W; tp++)
        for (int pp = 1; pp <= W / tp && pp <= L; pp++) layouts += W % (tp * pp) == 0 && tune_tp_splits(mc, tp);
    int *lay_tp = (int *)mallocCheck(2 * (size_t)layouts * sizeof(int)), *lay_pp = lay_tp + layouts, nl = 0;
    for (int tp = 1; tp <= W; tp++)
        for (int pp = 1; pp <= W / tp && pp <= L; pp++)
            if (W % (tp * pp) == 0 && tune_tp_splits(mc, tp)) { lay_tp[nl] = tp; lay_pp[nl++] = pp; }
    int *holds_unit = (int *)mallocCheck(model_num_units(mc) * sizeof(int));
    int *first = (int *)mallocCheck((W + 1) * sizeof(int));
    TuneCandidate *cs = (TuneCandidate *)callocCheck((size_t)nb * 4 * 3 * 4 * layouts, sizeof(TuneCandidate));
    int nc = 0;
    for (int li = 0; li < layouts; li++) {
        int tp = lay_tp[li], pp = lay_pp[li], dp = W / (tp * pp);
        pp_split(mc, T, pp, first);
        for (int bi = 0; bi < nb; bi++) {
            if (total % ((long)bs[bi] * T * dp)) continue;
            for (int z = 0; z <= 3; z++) {
                if ((dp == 1 && z > 0 && z < 3) || (pp > 1 && z >= 2)) continue;
                for (int rc = 0; rc <= 3; rc++)
                    for (int oi = 0; oi < 3; oi++) {
                        if (oi == OFFLOAD_PARAMS && z != 3) continue;             // only ZeRO-3 shards (and offloads) parameters
                        if (dp == 1 && z == 3 && oi != OFFLOAD_PARAMS) continue;  // one rank: stage 3 only for offload params
                        TuneCandidate *c = &cs[nc++];
                        c->B = bs[bi]; c->A = (int)(total / ((long)c->B * T * dp)); c->recompute = rc; c->offload = (OffloadWhat)oi;
                        c->zero = z; c->pp = pp; c->tp = tp; c->sp = tp > 1 && T % tp == 0;
                        c->same_b = c->B == r->B; c->max_loss_diff = -1.0;
                        tune_fill(r, c, first, holds_unit, cap);
                    }
            }
        }
    }
    free(holds_unit);
    free(first);
    free(lay_tp);
    tune_mark_levers(cs, nc, W, cap->device_is_host);
    *count = nc;
    return cs;
}

// The same weights: every timed candidate with the run's micro-batch size against the losses of the
// run's own configuration (or, when that did not fit, the first such candidate timed).
static void tune_compare_losses(TuneCandidate *cs, int nc, TuneCandidate *own) {
    TuneCandidate *ref = own && own->tps > 0 ? own : NULL;
    for (int i = 0; i < nc && !ref; i++) if (cs[i].tps > 0 && cs[i].same_b) ref = &cs[i];
    for (int i = 0; i < nc; i++) {
        TuneCandidate *c = &cs[i];
        if (!ref || c->tps <= 0 || !c->same_b || c->nlosses != ref->nlosses) continue;
        c->max_loss_diff = 0.0;
        for (int k = 0; k < c->nlosses; k++) {
            double dd = fabs(c->losses[k] - ref->losses[k]) / fabs(ref->losses[k]);
            if (dd > c->max_loss_diff) c->max_loss_diff = dd;
        }
    }
}

// One row of the final table.
static void tune_print_row(const TuneCandidate *c, double target, double same_tol) {
    char mem[96], days[32], same[96];
    char m1[32], m2[32];
    if (c->host_bytes > 0) snprintf(mem, sizeof(mem), "%s + host %s", tune_bytes(c->device_bytes, m1, sizeof(m1)), tune_bytes(c->host_bytes, m2, sizeof(m2)));
    else snprintf(mem, sizeof(mem), "%s", tune_bytes(c->device_bytes, m1, sizeof(m1)));
    if (c->tps > 0) snprintf(days, sizeof(days), "%.1f", target / c->tps / 86400.0); else snprintf(days, sizeof(days), "-");
    if (!c->same_b) snprintf(same, sizeof(same), "other data order (B %d)", c->B);
    else if (c->own) snprintf(same, sizeof(same), "same: this run's own configuration");
    else if (c->max_loss_diff == 0.0) snprintf(same, sizeof(same), "same (losses bit-identical)");
    else if (c->max_loss_diff >= 0.0 && c->max_loss_diff <= same_tol)
        snprintf(same, sizeof(same), "same up to the order of sums (losses within %.0e)", c->max_loss_diff);
    else if (c->max_loss_diff > 0.0) snprintf(same, sizeof(same), "DIFFERENT: losses differ by %.1e", c->max_loss_diff);
    else snprintf(same, sizeof(same), "not compared");
    char range[48];
    if (c->tps > 0) snprintf(range, sizeof(range), "%.0f-%.0f", c->lo_tps, c->hi_tps);
    if (c->tps > 0) printf("  %-70s %9.0f %13s %6.1f%% %10.1f %5d %26s %12s  %s\n", c->flags, c->tps, range, 100.0 * tune_spread(c),
                           c->ms, c->runs, mem, days, same);
    else printf("  %-70s %9s %13s %7s %10s %5s %26s %12s  %s\n", c->flags, "-", "-", "-", "-", "-", mem, "-", c->why);
}

// The table, sorted by tokens/s, and the verdict: the fastest overall, and `best:`, the fastest that
// trains the run's own weights. Returns the exit status (1: no `best`).
static int tune_verdict(TuneCandidate *cs, int nc, const TrainConfig *cfg) {
    int W = cfg->autotune_world;
    // one process: the same bits; several ranks: the same sums in another order (the ZeRO and pipeline
    // tests see ~1e-8)
    double same_tol = W > 1 ? 1e-5 : 0.0;
    qsort(cs, nc, sizeof(TuneCandidate), tune_cmp);
    TuneCandidate *own = NULL;
    for (int i = 0; i < nc; i++) if (cs[i].own) own = &cs[i];
    double target = (double)cfg->target_tokens;
    printf("\n  %-70s %9s %13s %7s %10s %5s %26s %12s  %s\n", "flags", "tok/s", "runs' range", "+-", "ms/step", "runs",
           "memory/rank (plan)", "days/target", "weights");
    int shown_best = -1, shown_fast = -1;
    for (int i = 0; i < nc; i++) {
        TuneCandidate *c = &cs[i];
        tune_print_row(c, target, same_tol);
        if (c->tps > 0 && shown_fast < 0) shown_fast = i;
        if (c->tps > 0 && c->same_b && c->max_loss_diff >= 0.0 && c->max_loss_diff <= same_tol && shown_best < 0) shown_best = i;
    }
    // the run's own configuration stays unless the best is faster beyond the noise: its slowest run faster
    // than the own's fastest, and its mean by more than the margin
    int own_i = own ? (int)(own - cs) : -1;
    if (shown_best >= 0 && own_i >= 0 && shown_best != own_i) {
        const TuneCandidate *b = &cs[shown_best];
        if (b->lo_tps <= own->hi_tps || b->tps < own->tps * (1.0 + TUNE_MARGIN)) {
            printf("the fastest configuration with the same weights (%s, %.0f tok/s, runs %.0f-%.0f) is within the noise of "
                   "this run's own (%.0f tok/s, runs %.0f-%.0f): %s; keeping the run's own\n", b->flags, b->tps, b->lo_tps,
                   b->hi_tps, own->tps, own->lo_tps, own->hi_tps, b->lo_tps <= own->hi_tps ? "their runs' ranges overlap"
                   : "less than the 3% margin apart");
            shown_best = own_i;
        } else {
            printf("faster beyond the noise: %s's slowest run (%.0f tok/s) beats this run's own fastest (%.0f), its mean by %.0f%%\n",
                   b->flags, b->lo_tps, own->hi_tps, 100.0 * (b->tps / own->tps - 1.0));
        }
    }
    printf("days/target: days to train --target-tokens %.3g tokens at that speed on %d device%s\n", target, W, W == 1 ? "" : "s");
    if (own && own->tps > 0) printf("this run's own configuration (%s): %.0f tok/s\n", own->flags, own->tps);
    if (shown_fast >= 0 && shown_fast != shown_best)
        printf("fastest overall: %s (%.0f tok/s), but its micro-batch size reads the data in another order, so it trains "
               "other weights\n", cs[shown_fast].flags, cs[shown_fast].tps);
    if (shown_best < 0) {
        printf("best: none (no configuration with this run's micro-batch size could be timed)\n");
        return 1;
    }
    if (W == 1) printf("every configuration marked 'same' trains the same weights as this run's own, bit for bit: recompute, "
                       "ZeRO stage and offload change only speed and memory\n");
    else printf("every configuration marked 'same' trains the same weights as this run's own, up to the order of "
                "floating-point sums across ranks: the layout changes only speed and memory\n");
    if (W > 1) printf("the flags below are for a run of %d ranks (mpirun -np %d ...)\n", W, W);
    printf("best: %s\n", cs[shown_best].flags);
    return 0;
}

// The children's logs and outputs go (a failed one's output is kept, for its row's pointer to it).
static void tune_clean(const char *dir, const TuneCandidate *cs, int nc) {
    for (int i = 0; i < nc; i++) {
        char p[4200];
        snprintf(p, sizeof(p), "%s/candidate%d.jsonl", dir, i); unlink(p);
        snprintf(p, sizeof(p), "%s/candidate%d.out", dir, i);
        int failed = 0;
        for (int k = 0; k < nc; k++) failed |= cs[k].ok && cs[k].tps <= 0 && strstr(cs[k].why, p) != NULL;
        if (!failed) unlink(p);
    }
    rmdir(dir);
}

// The tokens per step the run of W ranks would have (-d, or B x T x accumulation x W), and the
// micro-batch sizes that divide it: powers of two and the run's own (per data-parallel rank, checked
// per layout in tune_enumerate). Returns how many sizes.
static int tune_micro_batches(const Run *r, int argc, char **argv, long *total, int *bs) {
    int gave_d = 0;
    for (int i = 1; i < argc; i++) gave_d |= !strcmp(argv[i], "-d") || !strncmp(argv[i], "--total-batch-tokens", 20);
    *total = r->cfg.total_batch_tokens * (gave_d ? 1 : r->cfg.autotune_world);
    int nb = 0;
    for (long b = 1; b * r->T <= *total && nb < 30; b *= 2) if (*total % (b * r->T) == 0) bs[nb++] = (int)b;
    int have_own = 0;
    for (int i = 0; i < nb; i++) have_own |= bs[i] == r->B;
    if (!have_own) bs[nb++] = r->B;
    return nb;
}

// --autotune: after run_setup (the model, the data, the world and the batch are known). The tuner runs
// as one process and times one-process configurations. Returns the exit status: 1 when nothing could be
// timed with the run's micro-batch size (nothing fits, or every such configuration failed).
static int autotune_main(Run *r, int argc, char **argv) {
    const TrainConfig *cfg = &r->cfg;
    if (r->world > 1) fatal("--autotune: run it as one process (not under mpirun), with --autotune-world N for a run of N "
                            "ranks: it starts each configuration in processes of its own (through mpirun for N > 1)");
    int W = cfg->autotune_world;
    long total;
    int bs[32];
    int nb = tune_micro_batches(r, argc, argv, &total, bs);
    if (W > 1 && system("command -v mpirun > /dev/null 2>&1") != 0) fatal("--autotune-world %d: mpirun is not on the PATH", W);
    if (W > 1 && !build_info.mpi) fatal("--autotune-world %d: this binary was built without MPI", W);
    // what a candidate may use per rank: --mem-limit, else the device's memory (in the CPU build, where
    // device memory is host memory, the machine's), and the machine's RAM for the host's share
    // --gpu: that card's memory (the CUDA build; the CPU build takes --gpu with --dry-run only, which lists: tune_list.h)
    int cpu = strcmp(backend_build_name(), "cpu") == 0;
    const GpuSpec *g = plan_target.gpu;
    double limit = cfg->mem_limit > 0 ? cfg->mem_limit * 1073741824.0 : g ? g->gib * 1073741824.0 : (double)backend_device_capacity();
    MachineCapacity cap = {cpu ? limit : (double)physical_memory_bytes(), 0.0, cpu ? 0.0 : limit, cpu, 1};
    int nc;
    TuneCandidate *cs = tune_enumerate(r, total, bs, nb, &cap, &nc);
    int fit = 0, levers = 0, runs = W > 1 ? TUNE_RUNS_MPI : TUNE_RUNS;
    for (int i = 0; i < nc; i++) { fit += cs[i].ok; levers += cs[i].ok && cs[i].lever_only; }
    char lim[32];
    char whose[160];
    if (g && cfg->mem_limit <= 0) snprintf(whose, sizeof(whose), " (--gpu %s: an %s)", g->key, g->name);
    else snprintf(whose, sizeof(whose), "%s", cfg->mem_limit > 0 ? " (--mem-limit)" : cpu ? " (physical memory)" : " (the device's)");
    printf("autotune: %s | T %d | %ld tokens per step | world %d | memory limit per rank %s%s\n", r->init, r->T, total, W,
           tune_bytes(limit, lim, sizeof(lim)), whose);
    printf("autotune: %d configurations (micro-batch", nc);
    for (int i = 0; i < nb; i++) printf("%s%d", i ? ", " : " ", bs[i]);
    printf(" x recompute 0-3 x offload none, optimizer, params at ZeRO-3%s); %d fit the memory plan; %d of them offload where "
           "the layout fits without it (memory levers that cannot be faster: not timed); timing the other %d, %d runs each in "
           "interleaved rounds, each run %d steps after a warm-up step (their median counts)\n",
           W > 1 ? " x ZeRO stage x pipeline stages x tensor-parallel degrees" : "",
           fit, levers, fit - levers, runs, TUNE_TIMED_STEPS);
    // the children's logs go to a scratch directory under $TMPDIR (/tmp when unset), as mkdtemp's users expect
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/train_gpt_autotune.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) fatal("--autotune: cannot make a scratch directory %s: %s (set TMPDIR to a writable directory)", dir, strerror(errno));
    TuneCandidate *own = NULL;
    for (int i = 0; i < nc; i++)
        if (cs[i].ok && cs[i].same_b && cs[i].recompute == cfg->recompute && cs[i].zero == cfg->zero_stage && cs[i].pp == 1 &&
            cs[i].tp == 1 && cs[i].offload == cfg->offload) {
            own = &cs[i];
            own->own = 1;
            own->lever_only = 0;  // the run's own configuration is always timed: it is what the others must beat
        }
    for (int round = 0; round < runs; round++) {
        printf("round %d of %d:\n", round + 1, runs);
        for (int j = 0; j < nc; j++) {
            int i = round % 2 ? nc - 1 - j : j;
            TuneCandidate *c = &cs[i];
            if (!c->ok || c->lever_only || (round > 0 && c->tps <= 0)) continue;
            // the first run's losses are kept: the same flags give the same numbers
            double losses[16];
            int nl = c->nlosses;
            memcpy(losses, c->losses, sizeof(losses));
            tune_time(c, argc, argv, total, dir, i, W);
            if (round > 0) { c->nlosses = nl; memcpy(c->losses, losses, sizeof(losses)); }
            if (c->tps > 0) printf("  %-70s %9.0f tok/s (this run %.0f)\n", c->flags, c->tps, c->run_tps[c->runs - 1 < TUNE_MAX_RUNS ? c->runs - 1 : TUNE_MAX_RUNS - 1]);
            else printf("  %-70s %s\n", c->flags, c->why);
            fflush(stdout);
        }
    }
    tune_compare_losses(cs, nc, own);
    int rc = tune_verdict(cs, nc, cfg);
    tune_clean(dir, cs, nc);
    free(cs);
    return rc;
}

#endif
