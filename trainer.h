// trainer.h: the training loop, shared by the CPU build (train_gpt.c) and the CUDA build
// (train_gpt.cu). It is included after the build has defined its Model and these functions:
//   Model *model_create(const GPT2Config *, int B, int T, int recompute, int first, int last, int slots,
//                       int stream_layers), model_free(Model *)
//   const float *model_logits(Model *, int b, int t)      (host pointer to Vp logits, after a
//                                                          forward without targets)
//   MemoryPlan model_memory_plan(const GPT2Config *, int B, int T, int recompute, int layers, int slots, int outer,
//                                int stream_layers)
//   void backend_init(int local_rank)                      (picks and prepares the device)
//   const char *model_device_name(void), size_t backend_allocated, backend_malloced (bytes handed out
//                                                          for model state, and for activations)
//   double model_peak_flops(void)                          (dense peak FLOP/s of one device; 0 = unknown)
// the model's pieces and the backend that zero.h drives (see there), and BUILD_NAME. Everything the user sees of a run (flags, files, logs) is decided here once.
#ifndef TRAINER_H
#define TRAINER_H

#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include "config.h"
#include "checkpoint.h"
#include "dataloader.h"
#include "tokenizer.h"
#include "zero.h"
#include "pipeline.h"

// dev/cuda/emu counts each training step's device calls (TRAIN_GPT_EMU_COUNTS=1); elsewhere these are nothing.
#ifndef STEP_BEGIN
#define STEP_BEGIN(step)
#define STEP_END(step)
#endif

// Only rank 0 talks to the user; every rank still computes.
static int log_rank = 0;
#define printf0(...) do { if (log_rank == 0) printf(__VA_ARGS__); } while (0)

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

// Peak memory for the step line: host RSS, and on a GPU the device's high-water mark too.
static const char *model_peak_memory(void) {
    static char buf[96];
    size_t dev = backend_peak_device_bytes();
    if (dev) snprintf(buf, sizeof(buf), "GPU %.0f MiB | RSS %.0f MiB", dev / 1048576.0, peak_rss_mib());
    else snprintf(buf, sizeof(buf), "RSS %.0f MiB", peak_rss_mib());
    return buf;
}

// SIGTERM / SIGUSR1 ask the run to finish its step, checkpoint and exit 0 (slurm's preemption).
static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { (void)sig; stop_requested = 1; }

// How sampled tokens become text: a tokenizer file, the synthetic corpus's own letters, or ids.
typedef struct {
    int kind;  // 0 ids, 1 tokenizer, 2 synthetic letters
    Tokenizer tok;
} Decoder;

static void decode_print(Decoder *d, int id) {
    if (d->kind == 1) {
        int len;
        const unsigned char *b = tokenizer_token_bytes(&d->tok, id, &len);
        fwrite(b, 1, len, stdout);
    } else if (d->kind == 2) {
        putchar(SYNTH_ALPHABET[id % SYNTH_VOCAB]);
    } else {
        printf("%d ", id);
    }
}

// Samples from softmax over the first V logits with a uniform draw u.
static int sample_token(const float *logits, int V, float u) {
    float maxv = -INFINITY;
    for (int i = 0; i < V; i++) if (logits[i] > maxv) maxv = logits[i];
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - maxv);
    double cdf = 0.0, target = u * sum;
    for (int i = 0; i < V; i++) {
        cdf += exp((double)logits[i] - maxv);
        if (target < cdf) return i;
    }
    return V - 1;
}

// Validation loss: every rank of every pipeline reads the same batches; the last stage computes it.
static float evaluate(Pipeline *pp, DataLoader *val, int batches, int B, int T) {
    dataloader_reset(val);
    double s = 0.0;
    for (int i = 0; i < batches; i++) {
        dataloader_next(val);
        s += pp_forward_only(pp, val->inputs, val->targets, B, T);
    }
    return (float)(comm_allreduce_sum_f64(pp->group, s) / batches);
}

static void print_memory_plan(const MemoryPlan *mp) {
    double mib = 1048576.0;
    printf0("memory plan per rank: params %.1f MiB | grads %.1f MiB | AdamW state %.1f MiB%s | ", mp->params / mib,
            mp->grads / mib, mp->optimizer / mib, mp->optimizer_on_host ? " (host: moments, master copy, gradient staging)" : "");
    if (mp->working) printf0("working weights %.1f MiB | ", mp->working / mib);
    printf0("activations %.1f MiB | workspace %.1f MiB | total %.1f MiB\n", mp->activations / mib, mp->workspace / mib,
            (mp->params + mp->grads + mp->optimizer + mp->working + mp->activations + mp->workspace) / mib);
}

// What a configuration needs per rank, from the exact plan: device memory (host memory in the CPU
// build), host RAM for the offloaded state (with nvme: the swap ring and gradient staging), disk for
// the swap file.
typedef struct { size_t device, host, disk; } PlanNeed;

static PlanNeed plan_need(const GPT2Config *mc, int B, int T, int recompute, int layers, int slots, const int *present, int dp,
                          size_t bucket_bytes, int z, int offload, int offload_params, int nvme, size_t nvme_buffer, MemoryPlan *out) {
    MemoryPlan mp = model_memory_plan(mc, B, T, recompute, layers, slots, present[0], z == 3);
    zero_memory_plan(mc, z, dp, present, bucket_bytes, offload, offload_params, nvme, &mp.params, &mp.grads, &mp.optimizer);
    mp.optimizer_on_host = offload && !nvme;
    PlanNeed n = {0, 0, 0};
    n.device = mp.params + mp.grads + mp.working + mp.activations + mp.workspace + (offload ? 0 : mp.optimizer);
    if (offload && !nvme) n.host = mp.optimizer;
    if (nvme) zero_swap_plan(mc, z, dp, present, nvme_buffer, &n.host, &n.disk);
    if (out) *out = mp;
    return n;
}

// What the machine has for each rank: its RAM (MemAvailable) and the disk under --nvme-path shared by the
// ranks on this node; the device's memory (the CUDA build; in the CPU build the device is the host).
typedef struct { double ram, disk, device; int device_is_host, local_ranks; } MachineRoom;

static size_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (size_t)kb * 1024;
}

// This process's resident memory: the initial weights it read or drew before the plan, which are handed to
// zero.h and freed, so for the plan they are as good as available.
static size_t self_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f && fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    if (f) fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static int plan_fits(const PlanNeed *n, const MachineRoom *m) {
    double ram = m->device_is_host ? (double)n->device + n->host : (double)n->host;
    if (ram > m->ram || (!m->device_is_host && m->device > 0 && n->device > m->device)) return 0;
    return !(n->disk > 0 && m->disk > 0 && n->disk > m->disk);
}

#define RUN_HOST 64

// ----------------------------------------------------------------------------
// A run, told in phases. Everything a run holds lives in one struct; train_main below reads as the
// story: set up, resume, plan, build, then for each step evaluate, sample, step, log, checkpoint.
// Every rank runs every phase; only rank 0 prints and writes the log.

typedef struct {
    TrainConfig cfg;
    Comm comm, dp_comm, pp_comm, tied_comm;  // the world; this stage's data-parallel group; the pipeline; the tied embedding's pair
    int world, rank;
    int pp_stages, dp, stage, dp_rank;       // the world is pp_stages x dp; rank = stage * dp + dp_rank
    char *hosts;                             // each rank's node (host name), RUN_HOST bytes per rank
    int B, T, A;
    int synthetic;                           // training on the embedded corpus
    // fault injection (TRAIN_GPT_FAULT), for the hang, preemption, dead-rank and loss-scaling tests
    int stall_rank, stall_step;
    int signal_num, signal_step, signal_rank;  // raise signal_num on ourselves at signal_step (rank -1: every rank)
    int die_rank, die_step;                    // SIGKILL ourselves at die_step
    int nvme_fault, nvme_fault_step;           // 1: the swap file is truncated, 2: its next read fails with EIO
    double stall_s;                          // stall:RANK:STEP:SECONDS stalls that long, then goes on (0: for ever)
    char overflow_steps[256];
    // the model
    const char *init;
    GPT2Config mc;
    size_t num_params;
    float *params;                           // the initial weights, until they are handed to zero.h
    // data
    SynthSource synth;
    DataLoader train_loader, val_loader;
    int have_val, val_batches;
    Decoder dec;
    // resume
    int start_step;
    int lr_span;                             // steps the learning-rate schedule spans (saved in checkpoints)
    TrainState resumed;
    float *resume_m, *resume_v;
    // the plan: this stage's layers and units, and the memory they need
    int *first, *present, slots;
    double imbalance;
    MemoryPlan plan;
    size_t bucket_bytes;
    int offload, offload_params;
    int nvme;                                // --offload-device nvme
    PlanNeed need;                           // the plan per rank: device, host RAM and disk bytes
    FILE *logf;
    // what runs
    Model *model;
    Zero zero;
    Pipeline pipe;
    LossScaler scaler;
    uint64_t sample_rng;
    int updates, bad_in_a_row;
    int *gen;
    double total_ms;
    int timed_steps;
    double eta_t0;                           // for the time left: when the run's first step ended, and which step that was
    int eta_step0;
} Run;

// What one optimizer step produced, for the step's line and the log.
typedef struct {
    double loss, ms, tps, flops, peak;
    float lr, norm, step_scale;
    int skip;
    double *idle;                            // per-stage idle fraction (pipelines only), else NULL
    double eta_s;                            // the run's time left at its pace so far
    double time_ms[NUM_PHASES];              // where the step's time went (timing.h): data, forward, ...
    double disk_read, disk_written, disk_wait_ms;  // --offload-device nvme: the step's swap traffic, and time blocked on it
} StepResult;

// Fault injection, so that tests of what happens when things go wrong are deterministic instead of
// racing a process from outside (polling a log, then kill or pkill, which can hit the wrong process):
//   stall:RANK:STEP[:SECONDS] that rank stops before the gradient reduction of that step, as a rank stuck
//                         in a kernel or on a dead disk would (the watchdog's test); with SECONDS it goes on
//                         after that long (a straggler, which the time breakdown shows as the others' comm)
//   die:RANK:STEP         that rank kills itself with SIGKILL at the start of that step (a node lost)
//   signal:SIG:STEP[:RANK] TERM or USR1 raised on itself at the start of that step, by every rank or one
//                         (preemption, as slurm's scancel --signal delivers it)
//   overflow:S1,S2,...    the loss gradient is infinite at those steps, as an fp16 overflow would make it
//   nvme-short:STEP       (--offload-device nvme) the swap file loses its second half at that step: a short read
//   nvme-eio:STEP         (--offload-device nvme) the swap file's next read at that step fails with EIO
//   nvme-nodirect         (--offload-device nvme) the swap file is opened as if the file system refused O_DIRECT
static void run_parse_fault(Run *r, const char *fault) {
    r->stall_rank = r->stall_step = -1; r->stall_s = 0.0;
    r->die_rank = r->die_step = -1;
    r->signal_num = 0; r->signal_step = r->signal_rank = -1;
    r->overflow_steps[0] = '\0';
    r->nvme_fault = 0; r->nvme_fault_step = -1;
    if (!fault || !*fault) return;
    char sig[8] = "";
    int n = 0;
    if (strncmp(fault, "overflow:", 9) == 0) snprintf(r->overflow_steps, sizeof(r->overflow_steps), ",%s,", fault + 9);
    else if (sscanf(fault, "stall:%d:%d%n", &r->stall_rank, &r->stall_step, &n) == 2 && !fault[n]) {}
    else if (sscanf(fault, "stall:%d:%d:%lf%n", &r->stall_rank, &r->stall_step, &r->stall_s, &n) == 3 && !fault[n]) {}
    else if (sscanf(fault, "die:%d:%d%n", &r->die_rank, &r->die_step, &n) == 2 && !fault[n]) {}
    else if (sscanf(fault, "nvme-short:%d%n", &r->nvme_fault_step, &n) == 1 && !fault[n]) r->nvme_fault = 1;
    else if (sscanf(fault, "nvme-eio:%d%n", &r->nvme_fault_step, &n) == 1 && !fault[n]) r->nvme_fault = 2;
    else if (strcmp(fault, "nvme-nodirect") == 0) swap_fault_no_direct = 1;
    else if ((sscanf(fault, "signal:%7[A-Z0-9]:%d%n", sig, &r->signal_step, &n) == 2 && !fault[n]) ||
             (sscanf(fault, "signal:%7[A-Z0-9]:%d:%d%n", sig, &r->signal_step, &r->signal_rank, &n) == 3 && !fault[n])) {
        r->signal_num = strcmp(sig, "TERM") == 0 ? SIGTERM : strcmp(sig, "USR1") == 0 ? SIGUSR1 : 0;
        if (!r->signal_num) fatal("TRAIN_GPT_FAULT: signal '%s' is not TERM or USR1", sig);
    } else {
        fatal("TRAIN_GPT_FAULT: '%s' is not stall:RANK:STEP[:SECONDS], die:RANK:STEP, signal:TERM|USR1:STEP[:RANK] or "
              "overflow:STEP[,STEP...], nvme-short:STEP, nvme-eio:STEP or nvme-nodirect", fault);
    }
}

// The faults that strike at the start of a step (1-based).
static void run_inject_fault(Run *r, int step) {
    if (r->rank == r->die_rank && step == r->die_step) {
        fprintf(stderr, "fault injection: rank %d kills itself at step %d\n", r->rank, step);
        raise(SIGKILL);
    }
    if (r->nvme_fault && step == r->nvme_fault_step && r->zero.nvme) {
        if (r->nvme_fault == 1) swap_fault_truncate(&r->zero.swap);
        else r->zero.swap.inject_eio = 1;
    }
    if (r->signal_num && step == r->signal_step && (r->signal_rank < 0 || r->signal_rank == r->rank)) {
        fprintf(stderr, "fault injection: rank %d raises SIG%s at step %d\n", r->rank, r->signal_num == SIGTERM ? "TERM" : "USR1", step);
        raise(r->signal_num);
    }
}

// Set-up: the world, the flags, the model's shape and initial weights, the data and the decoder.
static void run_setup(Run *r, int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);  // a step's line reaches a redirected log (slurm's) when it happens
    comm_init(&r->comm, &argc, &argv);
    r->world = r->comm.world; r->rank = r->comm.rank;
    log_rank = r->rank;
    build_info.name = BUILD_NAME;  // what --help says about this binary
    build_info.precisions = PRECISIONS_BUILT;
    build_info.precision_default = PRECISION_DEFAULT;
#ifdef USE_MPI
    build_info.mpi = 1;
#endif
#ifdef BUILD_EXTRA_INFO
    build_info.extra = BUILD_EXTRA_INFO;
#endif
    TrainConfig *cfg = &r->cfg;
    config_defaults(cfg);
    parse_args(cfg, argc, argv);
    config_validate(cfg);
    config_resolve_precision(cfg, PRECISION_DEFAULT, PRECISIONS_BUILT);
    // the world is pipeline stages x data-parallel ranks; rank = stage * dp + dp index
    if (cfg->pp < 1 || r->world % cfg->pp != 0) {
        fprintf(stderr, "error: --pp: %d stages do not divide the world of %d ranks\n", cfg->pp, r->world);
        exit(2);
    }
    r->pp_stages = cfg->pp; r->dp = r->world / r->pp_stages; r->stage = r->rank / r->dp; r->dp_rank = r->rank % r->dp;
    if (r->pp_stages > 1 && cfg->zero_stage >= 2) {
        fprintf(stderr, "error: -z/--zero-stage %d with --pp %d: stages 2 and 3 reduce gradients and gather weights layer by "
                "layer within one micro-batch's backward, which 1F1B interleaves across micro-batches; use -z 0 or 1\n",
                cfg->zero_stage, r->pp_stages);
        exit(2);
    }
    config_resolve_batch(cfg, r->dp);
    // which node each rank runs on, for the placement line and the out dir's check
    char me[RUN_HOST] = {0};
    if (gethostname(me, RUN_HOST - 1) != 0) strcpy(me, "?");
    r->hosts = (char *)callocCheck(r->world, RUN_HOST);
    comm_allgather_bytes(&r->comm, me, r->hosts, RUN_HOST);
    backend_init(r->comm.local_rank);  // after the flags, so --help and flag errors need no device
    backend_set_precision(cfg->precision, cfg->tf32);
    if (strcmp(cfg->comm, "nccl") == 0) comm_enable_nccl(&r->comm);
    comm_watchdog_start(&r->comm, cfg->comm_timeout);
    run_parse_fault(r, getenv("TRAIN_GPT_FAULT"));
    r->B = cfg->micro_batch; r->T = cfg->seq_len; r->A = cfg->grad_accum;
    r->synthetic = cfg->train_data == NULL;
    int B = r->B, T = r->T;

    // the model: a checkpoint file, a dN descriptor, or (by default) d2 for the synthetic corpus
    r->init = cfg->init ? cfg->init : "d2";
    int vocab = r->synthetic ? SYNTH_VOCAB : 50257;
    if (gpt2_config_from_descriptor(r->init, vocab, &r->mc)) {
        r->params = (float *)mallocCheck(gpt2_num_params(&r->mc) * sizeof(float));
        gpt2_init_random(&r->mc, r->params, cfg->seed);
    } else {
        r->params = gpt2_read_model_file_for("-e/--init", r->init, &r->mc);
    }
    if (r->pp_stages > r->mc.num_layers) {
        fprintf(stderr, "error: --pp: %d stages for a model of %d layers; each stage needs at least one layer\n", r->pp_stages,
                r->mc.num_layers);
        exit(2);
    }
    if (T > r->mc.max_seq_len) {
        fprintf(stderr, "error: -t/--seq-len: %d is longer than the model's maximum sequence length %d\n", T, r->mc.max_seq_len);
        exit(2);
    }
    r->num_params = gpt2_num_params(&r->mc);

    // data
    r->have_val = 0;
    if (r->synthetic) {
        synth_init(&r->synth, 0, T);
        long ntrain = 1L << 21, nval = 1L << 16;
        if (ntrain < (long)B * T * 4 + 1) ntrain = (long)B * T * 4 + 1;
        if (nval < (long)B * T + 1) nval = (long)B * T + 1;
        dataloader_init_memory(&r->train_loader, "synthetic-train", synth_sample(&r->synth, ntrain, 1), ntrain, B, T,
                               r->dp_rank, r->dp, cfg->shuffle, cfg->seed, r->mc.vocab_size);
        dataloader_init_memory(&r->val_loader, "synthetic-val", synth_sample(&r->synth, nval, 2), nval, B, T, 0, 1, 0, 0,
                               r->mc.vocab_size);
        r->have_val = 1;
    } else {
        dataloader_init(&r->train_loader, cfg->train_data, "-i/--train-data", B, T, r->dp_rank, r->dp, cfg->shuffle,
                        cfg->seed, r->mc.vocab_size);
        if (cfg->val_data) {
            // every rank evaluates the same batches, so the validation loss does not depend on the layout
            dataloader_init(&r->val_loader, cfg->val_data, "-j/--val-data", B, T, 0, 1, 0, 0, r->mc.vocab_size);
            r->have_val = 1;
        }
    }
    r->val_batches = cfg->val_batches;
    if (r->have_val && r->val_batches > dataloader_windows_per_rank(&r->val_loader)) {
        r->val_batches = (int)dataloader_windows_per_rank(&r->val_loader);
        printf0("note: validation data holds %d micro-batches; -m/--val-batches lowered to that\n", r->val_batches);
    }

    // how samples become text
    Decoder *dec = &r->dec;
    if (cfg->tokenizer) {
        fclose(fopen_user("--tokenizer", cfg->tokenizer, "rb"));  // a missing file is named with its flag
        tokenizer_init_bin(&dec->tok, cfg->tokenizer);
        dec->kind = 1;
    } else if (r->synthetic) {
        dec->kind = 2;
    } else {  // ./tokenize shards puts tokenizer.bin beside the shards
        char guess[4200];
        snprintf(guess, sizeof(guess), "%s", r->train_loader.shards[0].path);
        char *slash = strrchr(guess, '/');
        if (slash) strcpy(slash + 1, "tokenizer.bin"); else strcpy(guess, "tokenizer.bin");
        if (file_exists(guess)) { tokenizer_init_bin(&dec->tok, guess); dec->kind = 1; }
    }
}

// Every rank must see the same out dir: all of them write their shards into the checkpoint files rank 0
// creates, and each one picks the checkpoint to resume from by listing the directory. Rank 0 writes a file
// there and every rank looks for it (for up to 2 s, for a network file system's caches); a rank that cannot
// see it (a node-local disk, a directory not mounted on its node) stops the run before anything is written.
static void run_check_out_dir(Run *r) {
    if (r->world == 1) return;
    const char *dir = r->cfg.out_dir;
    long token[2] = {0, 0};
    if (r->rank == 0) { token[0] = (long)getpid(); token[1] = (long)(wall_seconds() * 1e6); }
    comm_broadcast(&r->comm, token, sizeof(token), 0);
    char path[4200];
    snprintf(path, sizeof(path), "%s/.visible-to-all-ranks.%ld.%ld", dir, token[0], token[1]);
    if (r->rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f) fatal("-o/--out-dir: %s: cannot write there: %s", dir, strerror(errno));
        fclose(f);
    }
    comm_barrier(&r->comm);
    int missing = !file_exists(path);
    for (int i = 0; missing && i < 20; i++) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        missing = !file_exists(path);
    }
    if (missing) fprintf(stderr, "error: -o/--out-dir %s: rank %d on %s cannot see the file rank 0 on %s wrote there; every rank "
                         "must see the same out dir (a directory on a file system that every node mounts), so nothing is "
                         "written and the run stops\n", dir, r->rank, r->hosts + (size_t)r->rank * RUN_HOST, r->hosts);
    int any = comm_allreduce_max_int(&r->comm, missing);
    if (r->rank == 0) remove(path);
    if (any) {
        comm_finalize(&r->comm);
        exit(2);
    }
}

// The placement line: which node each rank runs on, with its stage and data-parallel index, and how the
// groups fall on the nodes (a data-parallel group inside one node keeps the gradient reduction off the
// network; a pipeline boundary between nodes moves one micro-batch's activations per send).
static void print_placement(const Run *r) {
    if (r->world == 1 || r->rank != 0) return;
    int nodes = 0;
    int *node_of = (int *)callocCheck(r->world, sizeof(int));
    for (int i = 0; i < r->world; i++) {
        int j = 0;
        while (j < i && strcmp(r->hosts + (size_t)j * RUN_HOST, r->hosts + (size_t)i * RUN_HOST) != 0) j++;
        node_of[i] = j == i ? nodes++ : node_of[j];
    }
    printf("placement: %d rank%s on %d node%s |", r->world, r->world == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s");
    for (int n = 0; n < nodes; n++) {
        int first = 1;
        for (int i = 0; i < r->world; i++) {
            if (node_of[i] != n) continue;
            if (first) printf(" %s:", r->hosts + (size_t)i * RUN_HOST);
            printf("%s rank %d (stage %d, dp %d)", first ? "" : ",", i, i / r->dp, i % r->dp);
            first = 0;
        }
        fputs(n + 1 < nodes ? " |" : "\n", stdout);
    }
    // rank = stage * dp + dp index, so stage s's data-parallel group is ranks s*dp .. s*dp+dp-1
    int dp_across = 0, hops = 0, hops_across = 0;
    for (int s = 0; s < r->pp_stages; s++) {
        for (int d = 1; d < r->dp; d++)
            if (node_of[s * r->dp + d] != node_of[s * r->dp]) { dp_across++; break; }
        for (int d = 0; d < r->dp && s + 1 < r->pp_stages; d++) {
            hops++;
            hops_across += node_of[s * r->dp + d] != node_of[(s + 1) * r->dp + d];
        }
    }
    if (nodes > 1) printf("placement: data-parallel groups spanning nodes: %d of %d | pipeline hops between nodes: %d of %d\n",
                          dp_across, r->pp_stages, hops_across, hops);
    free(node_of);
}

// Resume: the newest complete checkpoint in the out dir replaces the initial weights, and its state
// (step, data position, sampler, AdamW moments, loss scaler) is kept for run_build.
static void run_resume(Run *r) {
    TrainConfig *cfg = &r->cfg;
    r->start_step = 0;
    r->lr_span = cfg->lr_steps > 0 ? cfg->lr_steps : cfg->steps;
    if (cfg->out_dir) make_dir(cfg->out_dir);
    if (cfg->out_dir) run_check_out_dir(r);
    if (!cfg->resume) return;
    int steps[4096];
    int n = checkpoint_list(cfg->out_dir, steps, 4096);
    if (n == 0) {
        printf0("resume: no complete checkpoint in %s, starting from scratch\n", cfg->out_dir);
        return;
    }
    char mp[4200], sp[4200];
    checkpoint_paths(cfg->out_dir, steps[n - 1], mp, sp, sizeof(mp));
    GPT2Config rc;
    free(r->params);
    r->params = gpt2_read_model_file(mp, &rc);
    if (memcmp(&rc, &r->mc, sizeof(rc)) != 0) fatal("%s: model shape differs from -e/--init's", mp);
    TrainState *s = &r->resumed;
    state_read(sp, s, NULL, NULL);
    if (s->num_params != r->num_params) fatal("%s: parameter count differs from the model's", sp);
    if (s->B != r->B || s->T != r->T || (long)s->grad_accum * s->world != (long)r->A * r->dp) {
        fatal("%s: saved with micro-batch %d, seq %d, %d micro-batches per step; this run has %d, %d, %d "
              "(the data order would differ)", sp, s->B, s->T, s->grad_accum * s->world, r->B, r->T, r->A * r->dp);
    }
    if (s->seed != cfg->seed || s->shuffle != cfg->shuffle) {
        fatal("%s: saved with --seed %llu --shuffle %d; pass the same to resume", sp, (unsigned long long)s->seed, s->shuffle);
    }
    r->resume_m = (float *)mallocCheck(s->num_params * sizeof(float));
    r->resume_v = (float *)mallocCheck(s->num_params * sizeof(float));
    state_read(sp, s, r->resume_m, r->resume_v);
    r->start_step = s->step;
    printf0("resume: step %d from %s (saved by %d rank%s)\n", r->start_step, sp, s->world, s->world == 1 ? "" : "s");
    // The learning-rate schedule is part of the run: a resumed run keeps the one it was saved with
    // (a different -x only moves where it stops), unless --lr-steps says otherwise, and either way
    // the user is told.
    int saved = s->total_steps;
    if (cfg->lr_steps > 0 && cfg->lr_steps != saved) {
        printf0("resume: --lr-steps %d: the learning-rate schedule now spans %d steps instead of the saved run's %d; at step "
                "%d the learning rate moves from %.3e to %.3e\n", cfg->lr_steps, cfg->lr_steps, saved, r->start_step + 1,
                lr_at(cfg, r->start_step, saved), lr_at(cfg, r->start_step, cfg->lr_steps));
    } else if (cfg->lr_steps == 0) {
        r->lr_span = saved;
        if (cfg->steps != saved) {
            printf0("resume: -x/--steps %d differs from the saved run's %d: the learning-rate schedule stays the saved run's "
                    "(%s over %d steps); pass --lr-steps %d to stretch it over the new length\n", cfg->steps, saved,
                    cfg->lr_schedule, saved, cfg->steps);
        }
    }
}

static size_t run_nvme_buffer(const Run *r) { return (size_t)(r->cfg.nvme_buffer_mb * 1048576.0); }

// The plan against the machine: device, host RAM and disk per rank beside what there is, and when it
// does not fit, the first configuration that would (by the same exact plan), in the order DeepSpeed
// advises trying them: ZeRO stages, then offload to host memory, then to NVMe. Returns whether the
// run's own fits; `advice` receives the flags that would make it fit ("" when it fits or nothing does).
static int run_plan_room(Run *r, MachineRoom *m, char *advice, size_t advice_len) {
    const TrainConfig *cfg = &r->cfg;
    const double gib = 1073741824.0;
    m->local_ranks = 0;
    for (int i = 0; i < r->world; i++) m->local_ranks += strcmp(r->hosts + (size_t)i * RUN_HOST, r->hosts + (size_t)r->rank * RUN_HOST) == 0;
#ifdef TRAIN_GPT_CUDA
    m->device_is_host = 0;
    m->device = cfg->mem_limit > 0 ? cfg->mem_limit * gib : (double)backend_device_capacity();
    m->ram = (double)mem_available_bytes() / m->local_ranks + (double)self_rss_bytes();
#else
    m->device_is_host = 1;
    m->device = 0;
    m->ram = cfg->mem_limit > 0 ? cfg->mem_limit * gib : (double)mem_available_bytes() / m->local_ranks + (double)self_rss_bytes();
#endif
    m->disk = cfg->nvme_path ? (double)swap_free_bytes(cfg->nvme_path) / m->local_ranks : 0.0;
    const PlanNeed *n = &r->need;
    char dev[64] = "";
    if (!m->device_is_host) snprintf(dev, sizeof(dev), "%.2f GiB on the device (of %.2f) | ", n->device / gib, m->device / gib);
    else snprintf(dev, sizeof(dev), "%.2f GiB device state (host memory in this build) | ", n->device / gib);
    char disk[160] = "no disk";
    if (r->nvme) snprintf(disk, sizeof(disk), "%.2f GiB disk under %s (free %.2f per rank)", n->disk / gib, cfg->nvme_path, m->disk / gib);
    int fits = plan_fits(n, m);
    printf0("memory per rank: %shost RAM %.2f GiB (available %.2f per rank%s, %d rank%s on this node) | %s: %s\n", dev, n->host / gib,
            m->ram / gib, cfg->mem_limit > 0 && m->device_is_host ? ": --mem-limit" : ": MemAvailable + this process's own", m->local_ranks,
            m->local_ranks == 1 ? "" : "s", disk, fits ? "fits" : "does not fit");
    advice[0] = '\0';
    if (fits) return 1;
    // the candidates: offload none, optimizer, params (ZeRO-3) to host memory, then to nvme; each at the run's
    // ZeRO stage and the higher ones its layout allows (2-3 need --pp 1; with one rank, only stage 3 with params)
    const char *offs[3] = {"none", "optimizer", "params"};
    int found = 0;
    for (int tier = 0; tier < 5 && !found; tier++) {
        int oi = tier == 0 ? 0 : tier <= 2 ? tier : tier - 2, nvme = tier >= 3;
        for (int z = cfg->zero_stage; z <= 3 && !found; z++) {
            if ((r->pp_stages > 1 && z >= 2) || (oi == 2 && z != 3) || (r->dp == 1 && z != cfg->zero_stage && !(z == 3 && oi == 2))) continue;
            if (z == cfg->zero_stage && oi == (r->offload_params ? 2 : r->offload) && nvme == r->nvme) continue;  // the run's own
            PlanNeed c = plan_need(&r->mc, r->B, r->T, cfg->recompute, r->first[r->stage + 1] - r->first[r->stage], r->slots, r->present,
                                   r->dp, r->bucket_bytes, z, oi > 0, oi == 2, nvme, run_nvme_buffer(r), NULL);
            MachineRoom mm = *m;
            if (nvme && !cfg->nvme_path) mm.disk = 0;  // no directory named: its free space is not known, so not checked
            if (!plan_fits(&c, &mm)) continue;
            found = 1;
            int len = snprintf(advice, advice_len, "-z %d --offload %s", z, offs[oi]);
            if (nvme) snprintf(advice + len, advice_len - len, " --offload-device nvme --nvme-path %s", cfg->nvme_path ? cfg->nvme_path : "DIR");
            printf0("memory: this configuration does not fit; it would with %s: %.2f GiB device state | host RAM %.2f GiB | disk %.2f GiB%s\n",
                    advice, c.device / gib, c.host / gib, c.disk / gib, nvme && !cfg->nvme_path ? " (DIR: a directory on a local disk with that much free)" : "");
        }
    }
    if (!found) printf0("memory: this configuration does not fit, and no ZeRO stage or offload makes it fit this layout; use more ranks, "
                        "--pp, a smaller -b/--micro-batch or -r 3\n");
    return 0;
}

// The plan: how the layers split over pipeline stages, the memory each rank needs, the run's header
// lines, and the log's first line.
static void run_plan(Run *r) {
    TrainConfig *cfg = &r->cfg;
    const GPT2Config *mc = &r->mc;
    // the log first: a path that cannot be written is an error before anything is printed
    r->logf = NULL;
    if (cfg->log_path && r->rank == 0) {
        r->logf = fopen(cfg->log_path, r->start_step > 0 ? "a" : "w");
        if (!r->logf) fatal("--log: %s: cannot open for writing: %s", cfg->log_path, strerror(errno));
    }
    int pp_stages = r->pp_stages, stage = r->stage, A = r->A;
    // this stage's layers, and the units it holds (the tied outer unit lives on the first and the last)
    r->first = (int *)mallocCheck((pp_stages + 1) * sizeof(int));
    r->imbalance = pp_split(mc, r->T, pp_stages, r->first);
    r->present = (int *)callocCheck(gpt2_num_units(mc), sizeof(int));
    r->present[0] = stage == 0 || stage == pp_stages - 1;
    for (int l = r->first[stage]; l < r->first[stage + 1]; l++) r->present[1 + l] = 1;
    r->slots = pp_max_in_flight(stage, pp_stages, A);
    // activations: this stage's layers, times the micro-batches it keeps in flight
    r->bucket_bytes = (size_t)(cfg->reduce_bucket_mb * 1048576.0);
    r->offload_params = strcmp(cfg->offload, "params") == 0;
    r->offload = r->offload_params || strcmp(cfg->offload, "optimizer") == 0;
    r->nvme = strcmp(cfg->offload_device, "nvme") == 0;
    MemoryPlan *plan = &r->plan;
    r->need = plan_need(mc, r->B, r->T, cfg->recompute, r->first[stage + 1] - r->first[stage], r->slots, r->present, r->dp,
                        r->bucket_bytes, cfg->zero_stage, r->offload, r->offload_params, r->nvme, run_nvme_buffer(r), plan);
    char where[64] = "";
    if (r->nvme) snprintf(where, sizeof(where), " to nvme");
    printf0("train_gpt (%s build) on %s | world %d = data-parallel %d x pipeline %d | ZeRO stage %d | offload %s%s | "
            "precision %s%s | loss scale %s\n", BUILD_NAME, model_device_name(), r->world, r->dp, pp_stages, cfg->zero_stage,
            cfg->offload, where, cfg->precision, cfg->tf32 ? " (TF32 matmuls)" : "", cfg->loss_scale);
    print_placement(r);
    if (pp_stages > 1) {
        printf0("pipeline split (1F1B, %d micro-batches; bubble (p-1)/(m+p-1) = %.3f):", A, pp_bubble_formula(pp_stages, A));
        for (int s = 0; s < pp_stages; s++) printf0(" stage %d: layers %d-%d%s%s |", s, r->first[s], r->first[s + 1] - 1,
                                                    s == 0 ? " + embedding" : "", s == pp_stages - 1 ? " + classifier" : "");
        printf0(" largest stage / mean = %.2f\n", r->imbalance);
        if (r->imbalance > 1.15) printf0("warning: %d layers do not split evenly over %d stages: the slowest stage does %.0f%% "
                                         "more work than the mean\n", mc->num_layers, pp_stages, 100.0 * (r->imbalance - 1.0));
        if (A < pp_stages) printf0("warning: %d micro-batches for %d stages: most of the pipeline idles; use more accumulation\n",
                                   A, pp_stages);
    }
    printf0("model: %s | L %d | C %d | NH %d | V %d (padded %d) | maxT %d | %zu parameters\n", r->init, mc->num_layers,
           mc->channels, mc->num_heads, mc->vocab_size, mc->padded_vocab_size, mc->max_seq_len, r->num_params);
    printf0("batch: micro-batch %d x seq %d x accumulation %d x data-parallel %d = %ld tokens per step | recompute %d\n",
           r->B, r->T, A, r->world, cfg->total_batch_tokens, cfg->recompute);
    printf0("data: %s (%d shard%s, %ld micro-batches per epoch)%s%s\n", r->synthetic ? "synthetic corpus" : cfg->train_data,
           r->train_loader.nshards, r->train_loader.nshards == 1 ? "" : "s", r->train_loader.windows_per_epoch,
           r->have_val ? " | val: " : " | no validation data", r->have_val ? (r->synthetic ? "synthetic" : cfg->val_data) : "");
    if (r->synthetic) printf0("synthetic corpus: a Markov chain over %d symbols; after a '.', the document's first token "
                              "again (%.1f%% of targets; only attention reaches back for it) | entropy floor %.4f nats/token, the "
                              "best possible loss; without attention %.4f at best\n", SYNTH_SYMBOLS, 100.0 * r->synth.copied,
                              r->synth.floor, r->synth.no_attention);
    print_memory_plan(plan);
    MachineRoom room;
    char advice[512];
    int fits = run_plan_room(r, &room, advice, sizeof(advice));
    if (r->logf && r->start_step == 0) {
        fprintf(r->logf, "{\"memory_plan\": {\"world\": %d, \"zero_stage\": %d, \"params_bytes\": %zu, \"grads_bytes\": %zu, "
                "\"optimizer_bytes\": %zu, \"working_weights_bytes\": %zu, \"activations_bytes\": %zu, \"workspace_bytes\": %zu, "
                "\"device_bytes\": %zu, \"host_bytes\": %zu, \"disk_bytes\": %zu, \"ram_per_rank_bytes\": %.0f, "
                "\"disk_free_per_rank_bytes\": %.0f, \"device_capacity_bytes\": %.0f, \"fits\": %s, \"advice\": ",
                r->world, cfg->zero_stage, plan->params, plan->grads, plan->optimizer, plan->working, plan->activations,
                plan->workspace, r->need.device, r->need.host, r->need.disk, room.ram, room.disk, room.device,
                fits ? "true" : "false");
        if (advice[0]) fprintf(r->logf, "\"%s\"}}\n", advice); else fprintf(r->logf, "null}}\n");
        fflush(r->logf);
    }
}

// Build: the groups, the model's memory, zero.h's shards with the weights and (on resume) AdamW's
// moments in them, and the loop's own state: data position, sampler, loss scaler.
static void run_build(Run *r) {
    TrainConfig *cfg = &r->cfg;
    int stage = r->stage, dp = r->dp, start_step = r->start_step;
    comm_split(&r->comm, stage, r->dp_rank, &r->dp_comm);
    comm_split(&r->comm, r->dp_rank, stage, &r->pp_comm);
    comm_split(&r->comm, r->present[0] ? r->dp_rank : r->world + r->rank, stage, &r->tied_comm);
    size_t act_before = backend_malloced;
    r->model = model_create(&r->mc, r->B, r->T, cfg->recompute, r->first[stage], r->first[stage + 1], r->slots,
                            cfg->zero_stage == 3);
    const MemoryPlan *plan = &r->plan;
    size_t act_bytes = backend_malloced - act_before, planned_act = plan->activations + plan->workspace + plan->working;
    size_t allocated_before = backend_allocated;
    char note[512];
    zero_init(&r->zero, &r->dp_comm, cfg->zero_stage, r->model, r->present, r->bucket_bytes, r->offload, r->offload_params,
              r->nvme ? cfg->nvme_path : NULL, run_nvme_buffer(r), note, sizeof(note));
    if (r->pp_stages > 1 && r->present[0]) zero_tie_outer_unit(&r->zero, &r->tied_comm, stage == r->pp_stages - 1);
    if (r->nvme) {
        const Swap *sw = &r->zero.swap;
        printf0("offload to nvme: rank 0's swap file %s, %.2f GiB in %d records (unlinked at once: removed when the process ends, "
                "however it ends) | %s%s | ring of %d x %.2f MiB\n", sw->path, sw->file_bytes / 1073741824.0, sw->nrec,
                sw->direct ? "O_DIRECT" : "buffered", r->zero.nvme ? ", " SWAP_IO_NAME : "", SWAP_RING, sw->buf_floats * 4 / 1048576.0);
        if (note[0]) printf0("note: %s\n", note);
    }
    if (cfg->zero_stage >= 2) printf0("ZeRO-%d: gradients reduce-scattered in buckets of %d layer%s (--reduce-bucket-mb %g)\n",
                                      cfg->zero_stage, r->zero.bucket_layers, r->zero.bucket_layers == 1 ? "" : "s",
                                      cfg->reduce_bucket_mb);
    r->pipe = (Pipeline){r->pp_stages, stage, r->first[stage], r->first[stage + 1], r->slots, &r->pp_comm, &r->zero, 0.0};
    size_t model_state = backend_allocated - allocated_before;
    size_t planned_state = plan->params + plan->grads + plan->optimizer;  // with nvme, AdamW's state is in the swap file
    printf0("allocated per rank: model state %.1f MiB (planned %.1f MiB) | activations and workspace %.1f MiB (planned %.1f MiB)\n",
            model_state / 1048576.0, planned_state / 1048576.0, act_bytes / 1048576.0, planned_act / 1048576.0);
    if (r->logf) fprintf(r->logf, "{\"allocated\": {\"model_state_bytes\": %zu, \"planned_model_state_bytes\": %zu, "
                         "\"activation_bytes\": %zu, \"planned_activation_bytes\": %zu, \"swap_file_bytes\": %zu, "
                         "\"planned_disk_bytes\": %zu}}\n", model_state, planned_state, act_bytes, planned_act,
                         r->nvme ? r->zero.swap.file_bytes : 0, r->need.disk);
    zero_load_params(&r->zero, r->params, start_step > 0 ? r->resumed.updates : 0);
    free(r->params);
    r->params = NULL;
    if (r->resume_m) {
        zero_set_opt_state(&r->zero, r->resume_m, r->resume_v);
        free(r->resume_m); free(r->resume_v);
        r->resume_m = r->resume_v = NULL;
    }
    const TrainState *s = &r->resumed;
    // the state file counts micro-batches taken by all data-parallel ranks together; each takes 1/dp
    r->train_loader.pos = start_step > 0 ? s->loader_pos / (uint64_t)dp : 0;
    r->sample_rng = start_step > 0 ? s->sample_rng : mix_seed(cfg->seed ^ 0x73616d70ull);
    LossScaler *scaler = &r->scaler;
    loss_scaler_init(scaler, cfg);
    r->updates = start_step > 0 ? s->updates : 0;
    r->bad_in_a_row = 0;
    if (start_step > 0 && s->loss_scale > 0.0f) {  // the scaler goes on where it was; a fixed scale is the flag's
        if (scaler->dynamic) scaler->scale = s->loss_scale;
        scaler->iter = s->scaler_iter;
        scaler->last_overflow = s->scaler_last_overflow;
        scaler->hysteresis_left = s->scaler_hysteresis_left;
        scaler->skipped = s->scaler_skipped;
    }
    signal(SIGTERM, on_stop_signal);
    signal(SIGUSR1, on_stop_signal);
    r->total_ms = 0.0;
    r->timed_steps = 0;
    r->gen = (int *)mallocCheck(r->T * sizeof(int));
}

// Evaluation: the validation loss (with the floor on the synthetic corpus), on the console and in the log.
static void run_evaluate(Run *r, int step) {
    float vl = evaluate(&r->pipe, &r->val_loader, r->val_batches, r->B, r->T);
    double floor = r->synth.floor;
    if (r->synthetic) printf0("step %5d | val loss %.4f | floor %.4f | gap %.4f\n", step, vl, floor, vl - floor);
    else printf0("step %5d | val loss %.4f\n", step, vl);
    if (r->logf) {
        fprintf(r->logf, "{\"step\": %d, \"val_loss\": %.9g", step, vl);
        if (r->synthetic) fprintf(r->logf, ", \"floor\": %.9g, \"no_attention\": %.9g", floor, r->synth.no_attention);
        fprintf(r->logf, "}\n");
        fflush(r->logf);
    }
}

// Sampling: every rank takes part (the forward needs all stages, and at ZeRO-3 all ranks); the last
// stage draws the token and passes it to the others; rank 0 prints.
// Each new token runs the model on itself alone, against the key/value cache of the ones before it
// (model_decode_*), so n tokens cost n one-token forwards rather than forwards of 1, 2, ..., n tokens.
static void run_sample(Run *r) {
    int n = r->cfg.gen_tokens + 1 < r->T ? r->cfg.gen_tokens + 1 : r->T;
    int *gen = r->gen, last_stage = r->stage == r->pp_stages - 1;
    gen[0] = r->dec.kind == 1 ? tokenizer_eot(&r->dec.tok) : 0;
    printf0("sample: ");
    model_decode_begin(r->model, n);
    for (int t = 1; t < n; t++) {
        model_decode_at(r->model, t - 1);
        pp_forward_only(&r->pipe, &gen[t - 1], NULL, 1, 1);
        float u = random_f32(&r->sample_rng);
        gen[t] = last_stage ? sample_token(model_logits(r->model, 0, 0), r->mc.vocab_size, u) : 0;
        comm_broadcast(&r->pp_comm, &gen[t], sizeof(int), r->pp_stages - 1);
        if (r->rank == 0) decode_print(&r->dec, gen[t]);
    }
    model_decode_end(r->model);
    printf0("\n");
}

// One optimizer step: the last step's update, the micro-batches through the pipeline, the gradients
// reduced, the norm, the loss scaler's verdict, and the update decided. Returns what the step's line
// reports. Between the first and the last kernel the host never waits for the device: the losses and
// the norm's partial sums come back together at the end, with the time breakdown (one synchronisation).
static StepResult run_step(Run *r, int step) {
    TrainConfig *cfg = &r->cfg;
    int B = r->B, T = r->T, A = r->A, dp = r->dp, pp_stages = r->pp_stages, stage = r->stage;
    Zero *zero = &r->zero;
    LossScaler *scaler = &r->scaler;
    StepResult s = {0};
    // --profile leaves out the run's first step (it warms caches), unless it is the only one
    timing.profile = cfg->profile && (step > r->start_step || cfg->steps - r->start_step == 1);
    const Swap *sw = &zero->swap;
    uint64_t rd0 = sw->bytes_read, wr0 = sw->bytes_written;
    double wait0 = sw->wait_s;
    double t0 = wall_seconds();
    timing_step_begin();  // from here every moment of the step is charged to a phase (timing.h)
    STEP_BEGIN(step + 1);
    comm_watchdog_step(step + 1);
    run_inject_fault(r, step + 1);
    zero_clear_grads(zero);  // after the last step's AdamW update, which zero.h runs first
    float dloss = 1.0f / ((float)B * T * A * dp), step_scale = scaler->scale;
    char stepname[16];
    snprintf(stepname, sizeof(stepname), ",%d,", step + 1);
    if (strstr(r->overflow_steps, stepname)) dloss = INFINITY;
    dloss *= step_scale;  // a power of two: every gradient is scaled exactly
    pp_run_step(&r->pipe, &r->train_loader, A, B, T, dloss);
    timing_phase(PH_OTHER);
    double busy_ms = (wall_seconds() - t0) * 1e3;
    if (r->rank == r->stall_rank && step + 1 == r->stall_step) {
        fprintf(stderr, "fault injection: rank %d stalls at step %d%s\n", r->rank, r->stall_step, r->stall_s > 0 ? " for a while" : "");
        if (r->stall_s > 0) { struct timespec ts = {(time_t)r->stall_s, (long)((r->stall_s - (time_t)r->stall_s) * 1e9)}; nanosleep(&ts, NULL); }
        else for (;;) pause();
    }
    zero_reduce_gradients(zero);  // the tied embedding's pair first (zero_tie_outer_unit)
    timing_phase(PH_OPTIMIZER);  // the norm, clipping and the update, as DeepSpeed's "step" counts them
    // each stage sums its own units (the tied unit once), then the pipeline adds the stages up
    zero_grad_sum_squares_start(zero);
    timing_phase(PH_OTHER);
    timing_step_end();  // the CUDA build's one synchronisation: everything the step queued has run
    // the host's collectives on what came back are comm, by the host's clock (a straggler's wait shows here)
    double tail0 = timing_now();
    double loss = comm_allreduce_sum_f64(&r->comm, model_take_loss(r->model)) / ((double)A * dp);  // only last stages contribute
    double ss = zero_grad_sum_squares_finish(zero);
    float norm = (float)sqrt(comm_allreduce_sum_f64(&r->pp_comm, ss)) / step_scale;
    timing_charge(PH_COMM, MOD_NONE, (timing_now() - tail0) * 1e3);
    int skip = loss_scaler_update(scaler, !isfinite(norm));
    if (skip < 0) fatal("step %d: the gradients overflow at the minimum loss scale %g (--loss-scale-min); fp16 cannot "
                        "represent this run's gradients (try --precision bf16)", step + 1, step_scale);
    r->bad_in_a_row = skip ? r->bad_in_a_row + 1 : 0;
    if (!scaler->dynamic && r->bad_in_a_row >= 5) fatal("step %d: gradients non-finite for 5 steps in a row: the run has "
                                                        "diverged (lower -l/--lr, or raise --warmup)", step + 1);
    float grad_scale = cfg->grad_clip > 0.0f && norm > cfg->grad_clip ? cfg->grad_clip / (norm + 1e-6f) : 1.0f;
    float lr = lr_at(cfg, step, r->lr_span);
    if (!skip) {
        r->updates++;
        AdamWArgs adam = {lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, grad_scale / step_scale, r->updates};
        zero_defer_update(zero, &adam);
    }
    STEP_END(step + 1);
    memcpy(s.time_ms, timing.step_ms, sizeof(s.time_ms));
    double ms = (wall_seconds() - t0) * 1e3;
    if (timing.profile) { timing.profiled_ms += ms; timing.profiled_steps++; }
    double tps = cfg->total_batch_tokens / (ms / 1e3);
    // model FLOPs per token, as llm.c and PaLM count them: 6N for the matmuls' forward and
    // backward, plus 6*L*C*T for attention; per device
    s.flops = (6.0 * r->num_params + 6.0 * r->mc.num_layers * r->mc.channels * T) * tps / r->world;
    s.peak = model_peak_flops();
    if (step > r->start_step) { r->total_ms += ms; r->timed_steps++; }  // the first step warms caches
    // the pipeline's measured bubble: the share of each stage's step spent waiting for a neighbour
    if (pp_stages > 1) {
        s.idle = (double *)callocCheck(pp_stages, sizeof(double));
        for (int k = 0; k < pp_stages; k++)
            s.idle[k] = comm_allreduce_sum_f64(&r->pp_comm, k == stage ? r->pipe.wait_s * 1e3 / busy_ms : 0.0);
    }
    s.disk_read = (double)(sw->bytes_read - rd0); s.disk_written = (double)(sw->bytes_written - wr0);
    s.disk_wait_ms = (sw->wait_s - wait0) * 1e3;
    s.loss = loss; s.ms = ms; s.tps = tps; s.lr = lr; s.norm = norm; s.step_scale = step_scale; s.skip = skip;
    return s;
}

// A duration the way the step line shows it: 45s, 12m05s, 3h07m, 2d05h.
static const char *format_duration(double sec, char *buf, size_t n) {
    long t = (long)(sec + 0.5);
    if (sec < 10) snprintf(buf, n, "%.1fs", sec);
    else if (t < 60) snprintf(buf, n, "%lds", t);
    else if (t < 3600) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400) snprintf(buf, n, "%ldh%02ldm", t / 3600, t % 3600 / 60);
    else snprintf(buf, n, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
    return buf;
}

// The time left: the steps to go at the pace of the steps since the first (which warms caches), wall
// clock, so validation, samples and checkpoints count in it; the first step's own time before that.
static double run_eta(Run *r, int step, double step_ms) {
    double now = wall_seconds();
    int left = r->cfg.steps - step - 1;
    if (r->eta_t0 == 0.0 || step + 1 <= r->eta_step0) { r->eta_t0 = now; r->eta_step0 = step + 1; return left * step_ms / 1e3; }
    return left * (now - r->eta_t0) / (step + 1 - r->eta_step0);
}

// Logging: the step's line on the console and its JSON line in the log.
static void run_log_step(Run *r, int step, const StepResult *s) {
    const TrainConfig *cfg = &r->cfg;
    const LossScaler *scaler = &r->scaler;
    int pp_stages = r->pp_stages, A = r->A;
    char mfu[48];
    if (s->peak > 0) snprintf(mfu, sizeof(mfu), "MFU %.1f%%", 100.0 * s->flops / s->peak);
    else snprintf(mfu, sizeof(mfu), "%.1f GFLOP/s (MFU n/a)", s->flops / 1e9);
    char bubble[512] = "";
    if (s->idle) {
        int len = snprintf(bubble, sizeof(bubble), " | bubble");
        for (int k = 0; k < pp_stages && len < 400; k++) len += snprintf(bubble + len, sizeof(bubble) - len, "%s%.2f", k ? "/" : " ", s->idle[k]);
        snprintf(bubble + len, sizeof(bubble) - len, " (1F1B %.2f) | activations in flight %.1f MiB", pp_bubble_formula(pp_stages, A),
                 r->plan.activations / 1048576.0);
    }
    char scaling[160] = "";
    float step_scale = s->step_scale;
    int scaling_on = scaler->dynamic || step_scale != 1.0f;
    if (s->skip && scaling_on) snprintf(scaling, sizeof(scaling), " | OVERFLOW: step skipped, loss scale %g -> %g", step_scale, scaler->scale);
    else if (s->skip) snprintf(scaling, sizeof(scaling), " | OVERFLOW: non-finite gradients, step skipped");
    else if (scaling_on) snprintf(scaling, sizeof(scaling), " | loss scale %g%s", step_scale, scaler->scale != step_scale ? " (doubled)" : "");
    char eta[32];
    format_duration(s->eta_s, eta, sizeof(eta));
    char disk[128] = "";
    if (r->nvme) snprintf(disk, sizeof(disk), " | disk read %.1f MiB write %.1f MiB wait %.1f ms", s->disk_read / 1048576.0,
                          s->disk_written / 1048576.0, s->disk_wait_ms);
    printf0("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %.0f tok/s | %s | peak %s | ETA %s%s%s%s\n",
            step + 1, cfg->steps, s->loss, s->lr, s->norm, s->ms, s->tps, mfu, model_peak_memory(), eta, disk, bubble, scaling);
    if (cfg->timing) {  // --timing: the breakdown below the step's line
        printf0("  time ms:");
        for (int k = 0; k < NUM_PHASES; k++) printf0(" %s %.1f%s", PHASE_NAMES[k], s->time_ms[k], k < NUM_PHASES - 1 ? " |" : "");
        printf0(" (sum %.1f of %.1f)\n", timing_sum(s->time_ms), s->ms);
    }
    FILE *logf = r->logf;
    if (!logf) return;
    fprintf(logf, "{\"step\": %d, \"loss\": %.9g, \"lr\": %.9g, \"norm\": ", step + 1, s->loss, s->lr);
    if (isfinite(s->norm)) fprintf(logf, "%.9g", s->norm); else fprintf(logf, "null");  // JSON has no inf
    fprintf(logf, ", \"ms\": %.3f, \"tokens_per_s\": %.1f, \"flops_per_s\": %.4g, \"mfu\": ", s->ms, s->tps, s->flops);
    if (s->peak > 0) fprintf(logf, "%.5f", s->flops / s->peak); else fprintf(logf, "null");
    fprintf(logf, ", \"peak_rss_mib\": %.1f, \"peak_device_mib\": %.1f", peak_rss_mib(), backend_peak_device_bytes() / 1048576.0);
    if (scaling_on || s->skip) fprintf(logf, ", \"loss_scale\": %.9g, \"skipped\": %s, \"loss_scale_next\": %.9g",
                                       step_scale, s->skip ? "true" : "false", scaler->scale);
    fprintf(logf, ", \"eta_s\": %.3f, \"time_ms\": {", s->eta_s);
    for (int k = 0; k < NUM_PHASES; k++) fprintf(logf, "%s\"%s\": %.3f", k ? ", " : "", PHASE_NAMES[k], s->time_ms[k]);
    fprintf(logf, "}");
    // rank 0's swap traffic this step; the wait is part of the phases above (the optimizer's, mostly)
    if (r->nvme) fprintf(logf, ", \"nvme\": {\"read_bytes\": %.0f, \"write_bytes\": %.0f, \"wait_ms\": %.3f}", s->disk_read,
                         s->disk_written, s->disk_wait_ms);
    if (s->idle) {
        fprintf(logf, ", \"bubble\": [");
        for (int k = 0; k < pp_stages; k++) fprintf(logf, "%s%.4f", k ? ", " : "", s->idle[k]);
        fprintf(logf, "], \"bubble_1f1b\": %.4f", pp_bubble_formula(pp_stages, A));
    }
    fprintf(logf, "}\n");
    fflush(logf);
}

// Checkpoint after `done` steps. The files hold the whole model and optimizer state in the
// single-process layout, so any number of ranks, stages and ZeRO stage can resume from them: rank 0
// creates both at full size, each rank writes its own shards into them, and rank 0 renames the
// model file, then the state file, whose presence marks the checkpoint complete.
static void run_checkpoint(Run *r, int done) {
    const TrainConfig *cfg = &r->cfg;
    char mp[4200], sp[4200], mtmp[4300], stmp[4300];
    checkpoint_paths(cfg->out_dir, done, mp, sp, sizeof(mp));
    snprintf(mtmp, sizeof(mtmp), "%s.tmp", mp);
    snprintf(stmp, sizeof(stmp), "%s.tmp", sp);
    if (r->rank == 0) {
        int h[256];
        gpt2_model_header(&r->mc, h);
        ckpt_create(mtmp, h, r->num_params * sizeof(float));
        const LossScaler *sc = &r->scaler;
        TrainState st = {done, r->B, r->T, r->A, r->dp, cfg->shuffle, r->lr_span, r->mc.vocab_size, cfg->seed,
                         r->train_loader.pos * (uint64_t)r->dp, r->sample_rng, r->num_params, r->updates, sc->scale,
                         sc->iter, sc->last_overflow, sc->hysteresis_left, sc->skipped};
        state_header(h, &st);
        ckpt_create(stmp, h, 2 * r->num_params * sizeof(float));
    }
    comm_barrier(&r->comm);
    int fdm = ckpt_open(mtmp), fds = ckpt_open(stmp);
    ckpt_write_shards(&r->zero, fdm, fds, mtmp, stmp, r->num_params);
    ckpt_close(fdm, mtmp);
    ckpt_close(fds, stmp);
    comm_barrier(&r->comm);
    if (r->rank == 0) {
        ckpt_commit(mtmp, mp);
        ckpt_commit(stmp, sp);  // last: its presence marks the checkpoint complete
        checkpoint_prune(cfg->out_dir, cfg->keep_checkpoints);
        printf("checkpoint: %s\n", sp);
    }
    comm_barrier(&r->comm);
}

// --profile: rank 0's modules over the profiled steps, on the console and as one JSON line. The
// counted FLOPs are checked against the model's formula, 6 per parameter per token plus attention:
// they differ by the parameters no matmul multiplies (the position embedding, a lookup; biases and
// LayerNorm weights), which the table names, so the comparison is exact rather than approximate.
static void run_profile_report(Run *r) {
    Timing *t = &timing;
    if (r->rank != 0 || t->profiled_steps == 0) return;
    const char *source = "";
    double peak = profile_peak_flops(&source);
    const GPT2Config *mc = &r->mc;
    double L = mc->num_layers, C = mc->channels, Vp = mc->padded_vocab_size;
    double tokens = (double)r->B * r->T * r->A;  // this rank's tokens per step
    double formula = (6.0 * r->num_params + 6.0 * L * C * r->T) * tokens;
    double matmul_params = 12.0 * L * C * C + Vp * C, other_params = r->num_params - matmul_params;
    double counted = 0.0, total_ms = 0.0;
    for (int k = 1; k < NUM_ROWS; k++) { counted += t->row_flops[k]; total_ms += t->row_ms[k]; }
    counted /= t->profiled_steps;
    int n = t->profiled_steps;
    printf("profile: rank 0, %d step%s%s\n", n, n == 1 ? "" : "s",
           n < r->cfg.steps - r->start_step ? " (the run's first is left out: it warms caches)" : "");
    if (peak > 0) printf("  peak %.1f GFLOP/s: %s\n", peak / 1e9, source);
    else printf("  peak unknown for this device: the 'of peak' column is empty\n");
    printf("  %-14s %9s %11s %7s %10s %9s %8s\n", "module", "calls", "ms", "share", "GFLOP", "GFLOP/s", "of peak");
    for (int k = 1; k <= NUM_ROWS; k++) {
        int tot = k == NUM_ROWS;
        double ms = tot ? total_ms : t->row_ms[k], fl = tot ? counted * n : t->row_flops[k];
        char calls[24], gf[24], rate[24], frac[24];
        if (tot || k == ROW_OTHER) snprintf(calls, sizeof(calls), "-"); else snprintf(calls, sizeof(calls), "%ld", t->row_calls[k]);
        if (fl > 0) {
            snprintf(gf, sizeof(gf), "%.3f", fl / 1e9);
            snprintf(rate, sizeof(rate), "%.1f", ms > 0 ? fl / (ms / 1e3) / 1e9 : 0.0);
            if (peak > 0 && ms > 0) snprintf(frac, sizeof(frac), "%.1f%%", 100.0 * fl / (ms / 1e3) / peak);
            else snprintf(frac, sizeof(frac), "-");
        } else { snprintf(gf, sizeof(gf), "-"); snprintf(rate, sizeof(rate), "-"); snprintf(frac, sizeof(frac), "-"); }
        printf("  %-14s %9s %11.1f %6.1f%% %10s %9s %8s\n", tot ? "total" : ROW_NAMES[k], calls, ms,
               100.0 * ms / t->profiled_ms, gf, rate, frac);
    }
    printf("  the modules' time is %.2f%% of the profiled steps' %.1f ms\n", 100.0 * total_ms / t->profiled_ms, t->profiled_ms);
    if (r->pp_stages > 1) printf("  FLOPs per step: rank 0 runs pipeline stage 0 only, so the comparison with the whole model's "
                                 "6N + 6LCT is left out (run --pp 1 for it)\n");
    if (r->pp_stages == 1) {
        // what the matmuls and causal attention must come to: 6 per matmul weight per token, and
        // attention's 6C(T+1) per token per layer
        double exact = 6.0 * matmul_params * tokens + 6.0 * L * C * (r->T + 1.0) * tokens;
        printf("  FLOPs per step: counted %.4f GFLOP (6 x %.0f matmul weights x %.0f tokens + causal attention = %.4f%s) | "
               "formula 6N + 6LCT: %.4f GFLOP | counted / formula %.4f: %.0f of N's %zu parameters are in no matmul "
               "(the position embedding %.0f, a lookup; biases and LayerNorm weights %.0f)\n", counted / 1e9, matmul_params,
               tokens, exact / 1e9, r->cfg.recompute == 3 ? "; recompute 3 reruns the layers' forward, counted too" : "",
               formula / 1e9, counted / formula, other_params, r->num_params, (double)mc->max_seq_len * C,
               other_params - (double)mc->max_seq_len * C);
    }
    if (r->logf) {
        fprintf(r->logf, "{\"profile\": {\"steps\": %d, \"step_ms\": %.3f, \"peak_flops\": ", n, t->profiled_ms);
        if (peak > 0) fprintf(r->logf, "%.6g", peak); else fprintf(r->logf, "null");
        fprintf(r->logf, ", \"peak_source\": \"%s\", \"counted_flops_per_step\": %.17g, \"formula_flops_per_step\": ", source, counted);
        if (r->pp_stages == 1) fprintf(r->logf, "%.17g", formula); else fprintf(r->logf, "null");  // stage 0 is not the model
        fprintf(r->logf, ", \"modules\": [");
        for (int k = 1; k < NUM_ROWS; k++) {
            double ms = t->row_ms[k], fl = t->row_flops[k];
            fprintf(r->logf, "%s{\"module\": \"%s\", \"calls\": %ld, \"ms\": %.3f, \"share\": %.5f, \"flops\": %.17g, "
                    "\"flops_per_s\": %.6g, \"peak_fraction\": ", k > 1 ? ", " : "", ROW_NAMES[k], t->row_calls[k], ms,
                    ms / t->profiled_ms, fl, ms > 0 ? fl / (ms / 1e3) : 0.0);
            if (peak > 0 && fl > 0 && ms > 0) fprintf(r->logf, "%.5f}", fl / (ms / 1e3) / peak); else fprintf(r->logf, "null}");
        }
        fprintf(r->logf, "]}}\n");
        fflush(r->logf);
    }
}

// The end: the run's averages, and everything freed.
static void run_finish(Run *r) {
    if (r->cfg.profile) run_profile_report(r);
    if (r->timed_steps > 0) {
        double ms = r->total_ms / r->timed_steps;
        printf0("average: %.1f ms/step | %.0f tok/s | peak %s\n", ms, r->cfg.total_batch_tokens / (ms / 1e3), model_peak_memory());
    }
    if (r->scaler.skipped > 0) printf0("loss scaling: %d step%s skipped for overflow; final scale %g\n", r->scaler.skipped,
                                       r->scaler.skipped == 1 ? "" : "s", r->scaler.scale);
    if (r->logf) fclose(r->logf);
    free(r->gen);
    zero_free(&r->zero);
    model_free(r->model);
    free(r->first);
    free(r->present);
    free(r->hosts);
    dataloader_free(&r->train_loader);
    if (r->have_val) dataloader_free(&r->val_loader);
    if (r->dec.kind == 1) tokenizer_free(&r->dec.tok);
    comm_finalize(&r->comm);
}

// OpenMP threads waiting for work spin before they sleep (libgomp: 300,000 iterations). Beside one
// other busy process on 2 cores, that made the default 2-thread run 4-15x slower than it is alone:
// a spinning thread burns the core its descheduled partner needs (dev/bench_busy.sh measures it;
// figures in the README). 1,000 spins keep the idle speed within a few percent and fall back to the
// fair share when a core is taken. libgomp reads the setting once, as it loads, before main, so the
// CPU build sets it and re-executes itself once; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
// (Not in the CUDA build, whose OpenMP use is small, and where tools such as compute-sanitizer run it.)
static void openmp_wait_politely(char **argv) {
#if defined(_OPENMP) && defined(__linux__) && !defined(__CUDACC__)
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("GOMP_SPINCOUNT", "1000", 1);
    execv("/proc/self/exe", argv);  // returns only if it failed: then run with the library's defaults
#else
    (void)argv;
#endif
}

#include "autotune.h"

static int train_main(int argc, char **argv) {
    openmp_wait_politely(argv);
    static Run run;  // static: zeroed, and too large to want on the stack
    Run *r = &run;
    run_setup(r, argc, argv);
    if (r->cfg.autotune) { int rc = autotune_main(r, argc, argv); comm_finalize(&r->comm); return rc; }
    run_resume(r);
    if (r->cfg.resume && r->start_step >= r->cfg.steps) {
        printf0("resume: the checkpoint is at step %d and -x/--steps is %d: this run is complete, nothing to train (raise "
                "-x/--steps to continue it)\n", r->start_step, r->cfg.steps);
        comm_finalize(&r->comm);
        return 0;
    }
    run_plan(r);
    if (r->cfg.dry_run) {
        if (r->cfg.tokens_per_s > 0)  // the length of the training the user has in mind, at a speed they measured
            printf0("target: %.3g tokens at %.0f tokens/s on %d device%s: %.1f days\n", (double)r->cfg.target_tokens,
                    r->cfg.tokens_per_s, r->world, r->world == 1 ? "" : "s", r->cfg.target_tokens / r->cfg.tokens_per_s / 86400.0);
        if (r->logf) fclose(r->logf);
        comm_finalize(&r->comm);
        return 0;
    }
    run_build(r);
    const TrainConfig *cfg = &r->cfg;
    for (int step = r->start_step; step <= cfg->steps; step++) {
        int last = step == cfg->steps;
        if (r->have_val && cfg->val_every > 0 && (step % cfg->val_every == 0 || last)) run_evaluate(r, step);
        if (cfg->sample_every > 0 && step > 0 && (step % cfg->sample_every == 0 || last)) run_sample(r);
        if (last) break;
        StepResult s = run_step(r, step);
        s.eta_s = run_eta(r, step, s.ms);
        run_log_step(r, step, &s);
        free(s.idle);
        int done = step + 1;
        // a signal may reach the ranks at different steps: agree, so all stop after the same one
        stop_requested = comm_allreduce_max_int(&r->comm, stop_requested);
        if (cfg->out_dir && ((cfg->checkpoint_every > 0 && (done % cfg->checkpoint_every == 0 || done == cfg->steps)) ||
                             stop_requested)) run_checkpoint(r, done);
        if (stop_requested) {
            printf0("stop signal: checkpointed after step %d, exiting\n", done);
            if (!cfg->out_dir) printf0("warning: no -o/--out-dir, so nothing was saved\n");
            break;
        }
    }
    run_finish(r);
    return 0;
}

#endif
