// tune_list.h: --autotune-world N --dry-run, the layouts of N ranks that fit, listed in one process without starting
// or timing anything (either build, with or without --autotune). Every layout of tensor-parallel degree x pipeline
// stages x data-parallel ranks x ZeRO stage the run would accept is planned at each recompute level, with the memory
// plan --dry-run --world prints (report_stage_plans: each stage, each TP rank's slice, the largest kept), against
// --mem-limit, the card --gpu names, or this build's own device; the rows that fit are listed with the communication
// a step moves per rank by kind, counted (comm_count.h: the bytes --timing's counters add up in a real run), and the
// pipeline's bubble. What is left out is counted and said, never dropped silently.
#ifndef TUNE_LIST_H
#define TUNE_LIST_H

#include "autotune.h"
#include "comm_count.h"
#include "report.h"

#define TUNE_LIST_SHOWN 30  // rows printed; --log has every row

typedef struct {
    int tp, pp, dp, zero, recompute, B, A, sp, worst_stage, comm_stage;
    double device, host;        // the largest stage's per-rank plan
    double comm[NUM_AXES];      // the busiest stage's step, by axis
    double comm_total, bubble;
} TuneRow;

// The layout's counting record (comm_count.h) for a row.
static CommLayout tune_list_comm_layout(const Run *r, const TuneRow *w, const int *first) {
    int exchange = backend_memory_is_host() && !plan_target.cuda_facts ? 1 : r->cfg.comm == COMM_FLAG_NCCL;
    int verdict = w->pp == 1 && w->tp == 1 && optimizer_ops(r->cfg.optimizer)->device_verdict && exchange;
    CommLayout c = {&r->mc, w->tp, w->sp, w->pp, w->dp, w->zero, w->recompute, w->B, r->T, w->A, first, target_x_bytes(),
                    backend_fuses_gelu() && !plan_target.cuda_facts, verdict};
    return c;
}

// The row's memory: every stage's plan for every TP rank's slice, as report_stage_plans makes it for --world, the
// largest kept (device memory; with on_host, the CPU build's own plan, device and host together).
static void tune_list_need(const Run *r, TuneRow *w, const int *first, int *holds, int on_host) {
    w->device = w->host = 0.0;
    for (int s = 0; s < w->pp; s++)
        for (int t = 0; t < w->tp; t++) {
            ModelConfig mt = r->mc;
            mt.tp_size = w->tp; mt.tp_rank = t; mt.seq_parallel = w->sp;
            mt.ends = pp_stage_ends(s, w->pp);  // the outer tensors stage s holds
            // run_plan_layout's fields, with the row's (plan_stage sets the stage's layers, slots and units)
            PlanLayout l = {&mt, w->B, r->T, w->recompute, 0, 0, NULL, w->dp, (size_t)(r->cfg.reduce_bucket_mb * 1048576.0),
                            run_nvme_buffer(r), run_sample_tokens(&r->cfg, r->T), optimizer_ops(r->cfg.optimizer), r->cfg.doc_mask,
                            r->any_window || r->cfg.doc_mask};
            plan_stage(&l, first, w->pp, s, w->A, holds);
            PlanChoice c = {w->zero, 0, 0, 0};
            PlanNeed n = plan_need(&l, c, NULL);
            double dev = (double)n.device + (on_host ? (double)n.host : 0.0);
            if ((s == 0 && t == 0) || dev > w->device) { w->device = dev; w->host = on_host ? 0.0 : (double)n.host; w->worst_stage = s; }
        }
}

// The row's step counted on each stage's first rank; the busiest stage's kept (stage_bytes: pp x NUM_AXES, or NULL).
static void tune_list_comm(const Run *r, TuneRow *w, const int *first, double *stage_bytes) {
    CommLayout c = tune_list_comm_layout(r, w, first);
    w->comm_total = -1.0;
    for (int s = 0; s < w->pp; s++) {
        double b[NUM_AXES], sum = 0.0;
        comm_count_step(&c, s, b);
        for (int k = 0; k < NUM_AXES; k++) sum += b[k];
        if (stage_bytes) memcpy(stage_bytes + (size_t)s * NUM_AXES, b, sizeof(b));
        if (sum > w->comm_total) { w->comm_total = sum; w->comm_stage = s; memcpy(w->comm, b, sizeof(b)); }
    }
    w->bubble = pp_bubble_formula(w->pp, w->A);
}

// Order: the least communication per rank first, then the smaller bubble, then the less memory.
static int tune_list_cmp(const void *a, const void *b) {
    const TuneRow *x = (const TuneRow *)a, *y = (const TuneRow *)b;
    if (x->comm_total != y->comm_total) return x->comm_total < y->comm_total ? -1 : 1;
    if (x->bubble != y->bubble) return x->bubble < y->bubble ? -1 : 1;
    return x->device < y->device ? -1 : x->device > y->device;
}

// What was left out, counted for the closing lines.
typedef struct {
    int unusable, no_batch, too_big, higher_rc;
    double least_need;     // the smallest plan among those that do not fit
    char unusable_why[512];
} TuneLeftOut;

// The largest micro-batch up to the run's own (-b) that the tokens per step divide into for dp ranks: 0 if none.
static int tune_list_micro(const Run *r, long total, int dp) {
    for (int b = r->B; b >= 1; b--) if (total % ((long)b * r->T * dp) == 0) return b;
    return 0;
}

// Every layout of W ranks the run accepts, each at the lowest recompute level that fits (rows, *count of them).
static TuneRow *tune_list_enumerate(const Run *r, long total, double limit, int on_host, int *count, TuneLeftOut *out) {
    const ModelConfig *mc = &r->mc;
    int W = r->cfg.autotune_world, L = mc->num_layers, n = 0, cap = 64;
    TuneRow *rows = (TuneRow *)mallocCheck(cap * sizeof(TuneRow));
    int *first = (int *)mallocCheck((W + 1) * sizeof(int)), *holds = (int *)mallocCheck(model_num_units(mc) * sizeof(int));
    for (int tp = 1; tp <= W; tp++)
        for (int pp = 1; pp <= W / tp; pp++) {
            if (W % (tp * pp)) continue;
            int dp = W / (tp * pp), B = tune_list_micro(r, total, dp);
            if (pp > L || !tune_tp_splits(mc, tp)) {  // more ranks of a kind than the model can use
                size_t len = strlen(out->unusable_why);
                if (out->unusable++ < 6 && len < 400)
                    snprintf(out->unusable_why + len, sizeof(out->unusable_why) - len, "%s--tp %d --pp %d (%s)", len ? ", " : "", tp, pp,
                             pp > L ? "more stages than layers" : "the TP degree does not split the heads, the MLP or the vocabulary");
                continue;
            }
            if (B == 0) { out->no_batch++; continue; }
            pp_split(mc, r->T, pp, first);
            for (int z = 0; z <= 3; z++) {
                if ((dp == 1 && z > 0) || (pp > 1 && z >= 2)) continue;  // nothing to shard; stages 2-3 refuse --pp
                TuneRow w = {tp, pp, dp, z, 0, B, (int)(total / ((long)B * r->T * dp)), tp > 1 && r->T % tp == 0, 0, 0, 0, 0, {0}, 0, 0};
                int fit = 0;
                for (int rc = 0; rc <= 3 && !fit; rc++) {
                    w.recompute = rc;
                    tune_list_need(r, &w, first, holds, on_host);
                    fit = w.device <= limit;
                    if (!fit && rc == 3 && (out->least_need == 0 || w.device < out->least_need)) out->least_need = w.device;
                }
                if (!fit) { out->too_big++; continue; }
                out->higher_rc += 3 - w.recompute;
                tune_list_comm(r, &w, first, NULL);
                if (n == cap) rows = (TuneRow *)reallocCheck(rows, (cap *= 2) * sizeof(TuneRow));
                rows[n++] = w;
            }
        }
    free(first);
    free(holds);
    qsort(rows, n, sizeof(TuneRow), tune_list_cmp);
    *count = n;
    return rows;
}

// Bytes for the table's comm columns: MiB, GiB past 10 GiB, "0" for none.
static const char *tune_list_bytes(double b, char *buf, size_t n) {
    if (b == 0) snprintf(buf, n, "0");
    else if (b < 10 * 1073741824.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
    return buf;
}

// One row on the console: the layout, its batch, memory, comm by kind and bubble, and the flags that run it.
static void tune_list_print_row(const TuneRow *w) {
    char m[32], b[5][32], flags[128];
    snprintf(flags, sizeof(flags), "--tp %d --pp %d -z %d -r %d -b %d --grad-accum %d", w->tp, w->pp, w->zero, w->recompute, w->B, w->A);
    printf("  %3d %3d %4d %2d %2d %4d %6d %11s %11s %11s %11s %11s %11s %6.3f   %s\n", w->tp, w->pp, w->dp, w->zero, w->recompute,
           w->B, w->A, tune_bytes(w->device, m, sizeof(m)), tune_list_bytes(w->comm[AX_TP], b[0], 32),
           tune_list_bytes(w->comm[AX_DP_REDUCE], b[1], 32), tune_list_bytes(w->comm[AX_GATHER], b[2], 32),
           tune_list_bytes(w->comm[AX_PIPE_SEND], b[3], 32), tune_list_bytes(w->comm_total, b[4], 32), w->bubble, flags);
}

// One row in the log, with every stage's counted bytes (stage_bytes: pp x NUM_AXES).
static void tune_list_log_row(FILE *f, int W, const TuneRow *w, const double *stage_bytes) {
    fprintf(f, "{\"tune_layout\": {\"world\": %d, \"tp\": %d, \"pp\": %d, \"dp\": %d, \"zero_stage\": %d, \"recompute\": %d, "
            "\"micro_batch\": %d, \"grad_accum\": %d, \"sp\": %d, \"device_bytes\": %.0f, \"host_bytes\": %.0f, \"memory_stage\": %d, "
            "\"bubble\": %.6f, \"comm_stage\": %d, \"comm_bytes\": [", W, w->tp, w->pp, w->dp, w->zero, w->recompute, w->B, w->A,
            w->sp, w->device, w->host, w->worst_stage, w->bubble, w->comm_stage);
    for (int s = 0; s < w->pp; s++) {
        fprintf(f, "%s{", s ? ", " : "");
        for (int k = 0; k < NUM_AXES; k++) fprintf(f, "%s\"%s\": %.0f", k ? ", " : "", AXIS_NAMES[k], stage_bytes[(size_t)s * NUM_AXES + k]);
        fprintf(f, "}");
    }
    fprintf(f, "]}}\n");
}

// The tokens per step of the run of W ranks (-d, or -b x -t x --grad-accum x W), and how it came, into why.
static long tune_list_total(const Run *r, int argc, char **argv, char *why, size_t n) {
    int gave_d = 0;
    for (int i = 1; i < argc; i++) gave_d |= !strcmp(argv[i], "-d") || !strncmp(argv[i], "--total-batch-tokens", 20);
    const TrainConfig *cfg = &r->cfg;
    long total = cfg->total_batch_tokens * (gave_d ? 1 : cfg->autotune_world);
    if (gave_d) snprintf(why, n, "-d %ld", total);
    else snprintf(why, n, "-d not given: -b %d x -t %d x --grad-accum %d x %d ranks%s", r->B, r->T, r->A, cfg->autotune_world,
                  r->synthetic ? "; the built-in corpus's tiny batch, not a training run's: give -d for a real one" : "");
    return total;
}

// Whether this run asks for the list: --dry-run with --autotune or --autotune-world given.
static int tune_list_wanted(const TrainConfig *cfg, int argc, char **argv) {
    int given = 0;
    for (int i = 1; i < argc; i++) given |= !strncmp(argv[i], "--autotune-world", 16);
    return cfg->dry_run && (cfg->autotune || given);
}

// The header: whose memory, the tokens per step, what is enumerated, what each column is, and the order.
static void tune_list_header(const Run *r, long total, const char *total_why, double limit, const char *against) {
    const TrainConfig *cfg = &r->cfg;
    char lim[32];
    report_plan_target(cfg);
    printf("layouts of %d ranks for %s | T %d | %ld tokens per step (%s) | memory limit per rank %s (%s)\n", cfg->autotune_world,
           r->init, r->T, total, total_why, tune_bytes(limit, lim, sizeof(lim)), against);
    printf("enumerated: TP degrees that divide %d ranks and split the model (with --sp where T divides) x pipeline stages (at "
           "most one per layer) x data-parallel ranks x ZeRO 0-3 (1-3 only with more than one data-parallel rank, 2-3 only "
           "without --pp, as the run requires) x recompute 0-3; no offload; the micro-batch is the largest up to -b %d that "
           "the tokens per step divide into, the accumulation the rest; nothing is started or timed\n", cfg->autotune_world, r->B);
    printf("each row is the lowest recompute level that fits (a higher one fits too: it saves memory and costs compute, and at "
           "-r 3 TP's forward collectives again)\n");
    printf("memory/rank: the largest stage's device memory, the plan --dry-run --world %d prints for those flags\n", cfg->autotune_world);
    printf("comm per step, counted on the busiest stage's first rank as --timing counts it (each collective's whole buffer: an "
           "all-reduce of n floats n, a reduce-scatter and an all-gather n each; the log's comm_bytes): tp (TP's collectives), "
           "dp_reduce (the gradients' reduction), gather (ZeRO's gathers of weights and of the norm), pipe_send (the "
           "activations and their gradients sent to the neighbour stages; as many received), total with the loss's and the "
           "norm's few bytes\n");
    if (cfg->optimizer != OPTIMIZER_ADAMW)
        printf("note: --optimizer %s gathers whole matrices of its own, which the comm columns leave out (they count AdamW's step)\n",
               OPTIMIZER_NAMES[cfg->optimizer]);
    printf("bubble: 1F1B's idle share, (pp - 1) / (accumulation + pp - 1)\n");
    printf("order: the least communication per rank first, then the smaller bubble, then the less memory\n");
}

// --autotune-world N --dry-run (with or without --autotune): the table. Returns the exit status (1: nothing fits).
static int tune_list_main(Run *r, int argc, char **argv) {
    const TrainConfig *cfg = &r->cfg;
    const double gib = 1073741824.0;
    int W = cfg->autotune_world;
    FILE *logf = NULL;
    if (cfg->log_path && !(logf = fopen(cfg->log_path, "w"))) fatal("--log: %s: cannot open for writing: %s", cfg->log_path, strerror(errno));
    const GpuSpec *g = plan_target.gpu;
    int on_host = backend_memory_is_host() && !g;
    double limit = cfg->mem_limit > 0 ? cfg->mem_limit * gib : g ? g->gib * gib
                 : on_host ? (double)physical_memory_bytes() : (double)backend_device_capacity();
    char against[160], why[256];
    if (cfg->mem_limit > 0) snprintf(against, sizeof(against), "--mem-limit");
    else if (g) snprintf(against, sizeof(against), "--gpu %s: an %s", g->key, g->name);
    else snprintf(against, sizeof(against), "%s; --gpu NAME or --mem-limit GiB plans another", on_host ? "this machine's physical "
                  "memory" : "this build's device");
    long total = tune_list_total(r, argc, argv, why, sizeof(why));
    tune_list_header(r, total, why, limit, against);
    TuneLeftOut out = {0, 0, 0, 0, 0.0, ""};
    int n;
    TuneRow *rows = tune_list_enumerate(r, total, limit, on_host, &n, &out);
    printf("\n  %3s %3s %4s %2s %2s %4s %6s %11s %11s %11s %11s %11s %11s %6s   %s\n", "tp", "pp", "dp", "z", "r", "b", "accum",
           "memory/rank", "tp", "dp_reduce", "gather", "pipe_send", "total", "bubble", "flags (with --dry-run --world N to plan, or mpirun -np N)");
    int *first = (int *)mallocCheck((W + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        if (i < TUNE_LIST_SHOWN) tune_list_print_row(&rows[i]);
        if (!logf) continue;
        double *sb = (double *)mallocCheck((size_t)rows[i].pp * NUM_AXES * sizeof(double));
        pp_split(&r->mc, r->T, rows[i].pp, first);
        tune_list_comm(r, &rows[i], first, sb);
        tune_list_log_row(logf, W, &rows[i], sb);
        free(sb);
    }
    free(first);
    char least[32];
    printf("%d layout%s fit", n, n == 1 ? "" : "s");
    if (n > TUNE_LIST_SHOWN) printf(" (the first %d shown; %s)", TUNE_LIST_SHOWN, logf ? "every row is in the --log file" : "--log FILE writes every row");
    char big[96] = "";
    if (out.too_big) snprintf(big, sizeof(big), " (the smallest needs %s at -r 3)", tune_bytes(out.least_need, least, sizeof(least)));
    printf("\nleft out: %d that do not fit at any recompute level%s; %d rows at higher recompute levels of the layouts listed "
           "(they fit too); %d layout%s with more ranks than the model can use%s%s%s", out.too_big, big, out.higher_rc, out.unusable,
           out.unusable == 1 ? "" : "s", out.unusable ? ": " : "", out.unusable_why, out.unusable > 6 ? ", ..." : "");
    if (out.no_batch) printf("; %d layout%s whose data-parallel ranks do not divide %ld tokens per step into sequences of %d",
                             out.no_batch, out.no_batch == 1 ? "" : "s", total, r->T);
    printf("\n");
    if (logf) fclose(logf);
    free(rows);
    return n > 0 ? 0 : 1;
}

#endif
