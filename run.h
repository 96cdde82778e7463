// run.h: the run record, and how it is set up and torn down. It serves trainer.h, whose loop reads and
// writes nothing but this struct, and the headers that report on a run or tune it (report.h,
// autotune.h). Set-up is everything decided before the plan: the world and its placement on nodes, the
// flags, the model's shape and initial weights, the data, the decoder, the out dir every rank must see,
// and the checkpoint to resume from. Every rank runs every part; only rank 0 prints (printf0).
#ifndef RUN_H
#define RUN_H

#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "config.h"
#include "checkpoint.h"
#include "dataloader.h"
#include "zero.h"
#include "pipeline.h"
#include "fault.h"
#include "plan.h"
#include "sample.h"

// Only rank 0 talks to the user; every rank still computes.
static int log_rank = 0;
#define printf0(...) do { if (log_rank == 0) printf(__VA_ARGS__); } while (0)

#define RUN_HOST 64  // bytes of a node's name in Run.hosts

typedef struct {
    TrainConfig cfg;
    Comm comm, dp_comm, pp_comm, tied_comm;  // the world; this stage's data-parallel group; the pipeline; the tied embedding's pair
    Comm tp_comm, kv_comm;                   // --tp: this rank's TP group; those of it holding its key/value heads
    int world, rank;
    int pp_stages, dp, stage, dp_rank;       // the world is tp x dp x pp_stages; rank = tp_rank + tp (dp_rank + dp stage)
    int tp, tp_rank;
    TpGroup tpg;                             // --tp > 1: the group the model's collectives and gradient sums use
    char *hosts;                             // each rank's node (host name), RUN_HOST bytes per rank
    int B, T, A;
    int synthetic;                           // training on the embedded corpus
    // the model
    const char *init;
    ModelConfig mc;                          // the whole model
    ModelConfig mc_rank;                     // what this rank holds of it: mc, or with --tp its TP rank's slice
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
    int *first, *holds_unit, slots;          // first[s]: stage s's first layer; holds_unit[u]: this stage holds unit u
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

static size_t run_nvme_buffer(const Run *r) { return (size_t)(r->cfg.nvme_buffer_mb * 1048576.0); }

// The ranks on this rank's node (they share its RAM and disk).
static int run_local_ranks(const Run *r) {
    int n = 0;
    for (int i = 0; i < r->world; i++) n += strcmp(r->hosts + (size_t)i * RUN_HOST, r->hosts + (size_t)r->rank * RUN_HOST) == 0;
    return n;
}

// The positions a sample's key/value cache holds: the first token and -g more, at most a sequence (trainer.h's
// run_sample); 0 where the run draws none (-s 0, or no step to sample after). The memory plan counts a cache this
// long, and run_build reserves it.
static int run_sample_tokens(const TrainConfig *cfg, int T) {
    if (cfg->sample_every <= 0 || cfg->steps <= 0) return 0;
    return cfg->gen_tokens + 1 < T ? cfg->gen_tokens + 1 : T;
}

// This rank's share of the run's layout, as the memory plan takes it (after run_plan has split the layers).
static PlanLayout run_plan_layout(const Run *r) {
    PlanLayout l = {&r->mc_rank, r->B, r->T, r->cfg.recompute, r->first[r->stage + 1] - r->first[r->stage], r->slots, r->holds_unit,
                    r->dp, r->bucket_bytes, run_nvme_buffer(r), run_sample_tokens(&r->cfg, r->T)};
    return l;
}

// The run's own choice of ZeRO stage and offload.
static PlanChoice run_plan_choice(const Run *r) {
    PlanChoice c = {r->cfg.zero_stage, r->offload, r->offload_params, r->nvme};
    return c;
}

// A usage error (config.h) is met by every rank alike: each leaves MPI cleanly before exit(2).
static Comm *usage_error_comm = NULL;
static void run_leave_on_usage_error(void) { if (usage_error_comm) comm_finalize(usage_error_comm); }

// The world: its ranks, the flags (checked against the world), the stages and groups, each rank's node,
// the device, the transport, the watchdog and the fault to inject.
static void run_setup_world(Run *r, int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);  // a step's line reaches a redirected log (slurm's) when it happens
    comm_init(&r->comm, &argc, &argv);
    r->world = r->comm.world; r->rank = r->comm.rank;
    log_rank = r->rank;
    usage_error_rank = r->rank;
    usage_error_comm = &r->comm;
    usage_error_leave = run_leave_on_usage_error;
    build_info.name = backend_build_name();  // what --help says about this binary
    build_info.precisions = backend_precisions_built();
    build_info.precision_default = backend_precision_default();
#ifdef USE_MPI
    build_info.mpi = 1;
#endif
    build_info.extra = backend_build_extra();
    TrainConfig *cfg = &r->cfg;
    config_defaults(cfg);
    parse_args(cfg, argc, argv);
    config_validate(cfg);
    config_resolve_precision(cfg, backend_precision_default(), backend_precisions_built());
    config_check_world(cfg, r->world);
    // the world is TP x data-parallel x pipeline stages, TP innermost (tensor_parallel.h's mesh)
    r->tp = cfg->tp; r->pp_stages = cfg->pp; r->dp = r->world / (r->pp_stages * r->tp);
    TpMesh mesh = tp_mesh(r->rank, r->tp, r->dp, r->pp_stages);
    r->tp_rank = mesh.tp_rank; r->stage = mesh.stage; r->dp_rank = mesh.dp_rank;
    if (cfg->sp == 1 && r->tp == 1) usage_error("--sp 1: sequence parallelism shards the tensor-parallel ranks' sequence; it needs --tp > 1");
    if (cfg->sp < 0) cfg->sp = r->tp > 1;  // on by default with --tp (Megatron's advice)
    config_resolve_batch(cfg, r->dp);
    // which node each rank runs on, for the placement line and the out dir's check
    char me[RUN_HOST] = {0};
    if (gethostname(me, RUN_HOST - 1) != 0) strcpy(me, "?");
    r->hosts = (char *)callocCheck(r->world, RUN_HOST);
    comm_allgather_bytes(&r->comm, me, r->hosts, RUN_HOST);
    backend_init(r->comm.local_rank);  // after the flags, so --help and flag errors need no device
    backend_set_precision(PRECISION_NAMES[cfg->precision], cfg->tf32);
    if (cfg->comm == COMM_FLAG_NCCL && !comm_enable_device(&r->comm))
        fatal("--comm nccl: this build has no NCCL (it needs the CUDA build with MPI)");
    comm_watchdog_start(&r->comm, cfg->comm_timeout);
    fault_parse(getenv("TRAIN_GPT_FAULT"));
    r->B = cfg->micro_batch; r->T = cfg->seq_len; r->A = cfg->grad_accum;
    r->synthetic = cfg->train_data == NULL;
}

// --tp: whether the model splits N ways (errors name the flag and the numbers), and this rank's slice's config.
static void run_setup_tp(Run *r) {
    const TrainConfig *cfg = &r->cfg;
    r->mc_rank = r->mc;
    if (r->tp == 1) return;
    if (!backend_has_tp())
        usage_error("--tp %d: the %s build does not split layers yet; the CPU build (./train_gpt_cpu) does", r->tp, backend_build_name());
    ArchShape s = model_whole_shape(&r->mc);
    TpDims t = {r->tp, 0, r->mc.num_heads, r->mc.num_kv_heads};
    char msg[400];
    if (tp_shape_error(&s, &t, msg, sizeof(msg))) usage_error("%s (-e/--init %s)", msg, r->init);
    if (X_BYTES != sizeof(float) && cfg->comm != COMM_FLAG_NCCL)
        usage_error("--tp %d --precision %s: the activations' sums in 16 bits go through NCCL only; add --comm nccl (or use "
                    "--precision fp32)", r->tp, PRECISION_NAMES[cfg->precision]);
    if (cfg->sp && r->T % r->tp != 0)
        usage_error("--sp 1: -t/--seq-len %d is not a multiple of --tp %d (each rank keeps T / tp positions)", r->T, r->tp);
    r->mc_rank.tp_size = r->tp;
    r->mc_rank.tp_rank = r->tp_rank;
    r->mc_rank.seq_parallel = cfg->sp;
}

// The model: a checkpoint file, a dN descriptor, or (by default) d2 for the synthetic corpus.
static void run_setup_model(Run *r) {
    TrainConfig *cfg = &r->cfg;
    r->init = cfg->init ? cfg->init : "d2";
    int data_vocab = r->synthetic ? 0 : data_vocab_size(cfg->tokenizer, cfg->train_data);  // sample.h
    int vocab = r->synthetic ? SYNTH_VOCAB : data_vocab > 0 ? data_vocab : 50257;  // a fresh model takes the data's tokenizer's
    if (model_config_from_descriptor(r->init, vocab, &r->mc)) {
        char why[512];
        if (cfg->mlp && model_choose_mlp(&r->mc, cfg->mlp - 1, why, sizeof(why))) usage_error("--mlp %s", why);
        r->params = (float *)mallocCheck(model_num_params(&r->mc) * sizeof(float));
        model_init_random(&r->mc, r->params, cfg->seed);
    } else {
        // "dN" that is no file: a depth out of range, not a file to open
        const char *s = r->init;
        int digits = s[0] == 'd' && s[1] != '\0' && !file_exists(s);
        for (const char *p = s + 1; digits && *p; p++) digits = *p >= '0' && *p <= '9';
        if (digits) usage_error("-e/--init: %s: depth %s is %s: a fresh GPT-2 has depth 1 to 1000 (d2, d6, d12, d24, ...)", s, s + 1,
                                atol(s + 1) < 1 ? "too small" : "too large");
        r->params = model_read_file_for("-e/--init", r->init, &r->mc);
        if (cfg->mlp && cfg->mlp - 1 != r->mc.mlp)
            usage_error("--mlp %s: %s is a model file, whose header says %s; --mlp chooses the activation of a fresh model "
                        "(-e llama-dN or a preset)", MLP_NAMES[cfg->mlp - 1], r->init, MLP_NAMES[r->mc.mlp]);
    }
    config_check_model(cfg, r->mc.num_layers, r->mc.max_seq_len);
    r->num_params = model_num_params(&r->mc);
    run_setup_tp(r);
}

// The data: the synthetic corpus's own train and validation streams, or the shards the flags name.
static void run_setup_data(Run *r) {
    TrainConfig *cfg = &r->cfg;
    int B = r->B, T = r->T;
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
}

// Set-up: the world, the flags, the model's shape and initial weights, the data and the decoder.
static void run_setup(Run *r, int argc, char **argv) {
    run_setup_world(r, argc, argv);
    run_setup_model(r);
    run_setup_data(r);
    decoder_init(&r->dec, r->cfg.tokenizer, r->synthetic, r->synthetic ? NULL : r->train_loader.shards[0].path);
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

// The learning-rate schedule is part of the run: a resumed run keeps the one it was saved with (a
// different -x only moves where it stops), unless --lr-steps says otherwise, and either way the user is told.
static void run_resume_schedule(Run *r) {
    const TrainConfig *cfg = &r->cfg;
    int saved = r->resumed.total_steps;
    if (cfg->lr_steps > 0 && cfg->lr_steps != saved) {
        printf0("resume: --lr-steps %d: the learning-rate schedule now spans %d steps instead of the saved run's %d; at step "
                "%d the learning rate moves from %.3e to %.3e\n", cfg->lr_steps, cfg->lr_steps, saved, r->start_step + 1,
                lr_at(cfg, r->start_step, saved), lr_at(cfg, r->start_step, cfg->lr_steps));
    } else if (cfg->lr_steps == 0) {
        r->lr_span = saved;
        if (cfg->steps != saved) {
            printf0("resume: -x/--steps %d differs from the saved run's %d: the learning-rate schedule stays the saved run's "
                    "(%s over %d steps); pass --lr-steps %d to stretch it over the new length\n", cfg->steps, saved,
                    LR_SCHEDULE_NAMES[cfg->lr_schedule], saved, cfg->steps);
        }
    }
}

// Resume: the newest complete checkpoint in the out dir replaces the initial weights, and its state
// (step, data position, sampler, AdamW moments, loss scaler) is kept for run_build.
static void run_resume(Run *r) {
    TrainConfig *cfg = &r->cfg;
    r->start_step = 0;
    r->lr_span = cfg->lr_steps > 0 ? cfg->lr_steps : cfg->steps;
    if (cfg->out_dir) make_dir("-o/--out-dir", cfg->out_dir);
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
    ModelConfig rc;
    free(r->params);
    r->params = model_read_file(mp, &rc);
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
    run_resume_schedule(r);
}

// Teardown: everything the run holds, freed, and the world left.
static void run_free(Run *r) {
    if (r->logf) fclose(r->logf);
    free(r->gen);
    zero_free(&r->zero);
    model_free(r->model);
    free(r->first);
    free(r->holds_unit);
    free(r->hosts);
    dataloader_free(&r->train_loader);
    if (r->have_val) dataloader_free(&r->val_loader);
    decoder_free(&r->dec);
    comm_free_group(&r->dp_comm);
    comm_free_group(&r->pp_comm);
    comm_free_group(&r->tied_comm);
    comm_free_group(&r->tp_comm);
    comm_free_group(&r->kv_comm);
    if (r->tp > 1) tp_group_free(&r->tpg);
    comm_finalize(&r->comm);
}

#endif
