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
#include "attn_masks.h"
#include "checkpoint.h"
#include "../dataloader.h"
#include "../zero.h"
#include "../optim/optimizers.h"  // --optimizer's optimizer, made from config.h's optimizer_args
#include "../pipeline.h"
#include "../base/fault.h"
#include "../backend/timing.h"  // CommAxis: the axes --timing counts each rank's bytes by
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
    int sp_default;                          // --sp was not given: on by default with --tp > 1 (its errors say so)
    TpGroup tpg;                             // --tp > 1: the group the model's collectives and gradient sums use
    char *hosts;                             // each rank's node (host name), RUN_HOST bytes per rank
    int B, T, A;
    int synthetic;                           // training on the embedded corpus
    // the model
    const char *init;
    ModelConfig mc;                          // the whole model
    ModelConfig mc_rank;                     // what this rank holds of it: mc, or with --tp its TP rank's slice, with
                                             // --pp of its stage's outer tensors (ends)
    int init_is_file;                        // -e names a model file (else a descriptor: fresh weights)
    size_t num_params;
    float *params;                           // the initial weights (run_load_weights), until they are handed to zero.h
    // data
    SynthSource synth;
    DataLoader train_loader, val_loader;
    int have_val, val_batches;
    Decoder dec;
    // resume
    int start_step;
    int lr_span;                             // steps the learning-rate schedule spans (saved in checkpoints)
    TrainState resumed;
    // attention's masks (train/attn_masks.h): each layer's window (0 global), whether any has one, the document separator
    int *attn_window, any_window, doc_sep;
    char resume_model[4200], resume_state[4200];  // the checkpoint's files, read by run_load_weights
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
    Optimizer opt;                 // --optimizer's, its args from the flags (optimizer_from_config); zero.h steps it
    Pipeline pipe;
    LossScaler scaler;
    uint64_t sample_rng;
    int updates, bad_in_a_row;
    int *gen;
    double total_ms;
    int timed_steps;
    double eta_t0;                           // for the time left: when the run's first step ended, and which step that was
    int eta_step0;
    // --timing: this rank's communication by axis (timing.h's CommAxis) summed over the steps it ran, the first step's,
    // the steps counted and how many differed from the first (report_comm_ranks logs every rank's at the end)
    double comm_total[NUM_AXES], comm_first[NUM_AXES];
    int comm_steps, comm_unlike;
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
                    r->dp, r->bucket_bytes, run_nvme_buffer(r), run_sample_tokens(&r->cfg, r->T),
                    optimizer_ops(r->cfg.optimizer), r->cfg.doc_mask, r->any_window || r->cfg.doc_mask};
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
    attn_masks_validate(cfg);
    // --gpu: the plan is checked against the card; in the CPU build (device memory is host memory) it plans what the CUDA
    // build would allocate there, at its precisions (model_state.h's target_* read plan_target), and runs nothing
    int plans_card = cfg->gpu && backend_memory_is_host();
    if (plans_card && !cfg->dry_run)
        usage_error("--gpu %s: the %s build plans that card's memory but does not run on it; add --dry-run (./train_gpt, the "
                    "CUDA build, trains on it)", cfg->gpu, backend_build_name());
    config_resolve_precision(cfg, plans_card ? GPU_PRECISION_DEFAULT : backend_precision_default(),
                             plans_card ? GPU_PRECISIONS : backend_precisions_built());
    plan_target.gpu = gpu_spec(cfg->gpu);
    plan_target.cuda_facts = plans_card;
    plan_target.x_bytes = cfg->precision == PRECISION_FP32 ? 4 : 2;
    plan_target.weights_copy = cfg->precision != PRECISION_FP32;
    if (cfg->optimizer == OPTIMIZER_MUON && !backend_has_muon())
        usage_error("--optimizer muon: the %s build has no Muon; use --optimizer adamw", backend_build_name());
    if (cfg->tf32 && !backend_has_tf32())
        usage_error("--tf32 1: the %s build's matmuls are plain fp32, with no TF32 mode (TF32 is the CUDA build's tensor "
                    "cores: ./train_gpt)", backend_build_name());
    if (cfg->world > 0) {  // --dry-run --world N: one process plans the layout as its N ranks would (report_stage_plans)
        if (r->world > 1) usage_error("--world %d: the layout is planned by one process; start it without mpirun (it runs as %d "
                                      "ranks)", cfg->world, r->world);
        r->world = cfg->world;
    }
    config_check_world(cfg, r->world);
    // the world is TP x data-parallel x pipeline stages, TP innermost (tensor_parallel.h's mesh)
    r->tp = cfg->tp; r->pp_stages = cfg->pp; r->dp = r->world / (r->pp_stages * r->tp);
    TpMesh mesh = tp_mesh(r->rank, r->tp, r->dp, r->pp_stages);
    r->tp_rank = mesh.tp_rank; r->stage = mesh.stage; r->dp_rank = mesh.dp_rank;
    if (cfg->sp == 1 && r->tp == 1) usage_error("--sp 1: sequence parallelism shards the tensor-parallel ranks' sequence; it needs --tp > 1");
    r->sp_default = cfg->sp < 0;
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

// --tp: whether the model splits N ways (errors name the flag and the numbers), and this rank's slice's config (with
// --pp, of its stage's outer tensors: the end it runs, pp_stage_ends).
static void run_setup_tp(Run *r) {
    const TrainConfig *cfg = &r->cfg;
    r->mc_rank = r->mc;
    r->mc_rank.ends = pp_stage_ends(r->stage, r->pp_stages);
    if (r->tp == 1) return;
    if (!backend_has_tp())
        usage_error("--tp %d: the %s build does not split layers yet; the CPU build (./train_gpt_cpu) does", r->tp, backend_build_name());
    ArchShape s = model_whole_shape(&r->mc);
    TpDims t = {r->tp, 0, r->mc.num_heads, r->mc.num_kv_heads};
    char msg[400];
    if (tp_shape_error(&s, &t, msg, sizeof(msg))) usage_error("%s (-e/--init %s)", msg, r->init);
    if (cfg->sp && r->T % r->tp != 0)
        usage_error("%s: -t/--seq-len %d is not a multiple of --tp %d (sequence parallelism keeps T / tp positions per rank); "
                    "pass --sp 0 to replicate the sequence instead, or a -t/--seq-len that is a multiple of %d", r->sp_default ?
                    "--sp is on by default with --tp > 1 (--sp 1)" : "--sp 1", r->T, r->tp, r->tp);
    r->mc_rank.tp_size = r->tp;
    r->mc_rank.tp_rank = r->tp_rank;
    r->mc_rank.seq_parallel = cfg->sp;
}

// -e given a Hugging Face model (its directory, model.safetensors, a PyTorch checkpoint, config.json): the importer
// makes an llm.c model file of it. Told by the directory's files or the file's first bytes (safetensors: an 8-byte
// header length, then '{'; PyTorch's zip: "PK\3\4"; JSON: '{'); anything else is left to the model file's reader.
static void run_refuse_hf_init(const char *path) {
    char dir[4200], probe[4300];
    struct stat st;
    if (stat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        static const char *const hf[] = {"config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"};
        int found = 0;
        for (int i = 0; i < 4; i++) { snprintf(probe, sizeof(probe), "%s/%s", path, hf[i]); found |= file_exists(probe); }
        if (found) fatal("-e/--init: %s: a Hugging Face model directory, not an llm.c model file: convert it first with "
                         "scripts/import_hf.py %s model.bin, then -e model.bin (docs/huggingface.md)", path, path);
        return;
    }
    unsigned char b[9] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, 9, f) : 0;
    if (f) fclose(f);
    size_t len = strlen(path);
    int named = len >= 12 && strcmp(path + len - 12, ".safetensors") == 0;
    const char *what = named || (n == 9 && b[8] == '{' && b[6] == 0 && b[7] == 0) ? "a safetensors file"
                     : n >= 4 && memcmp(b, "PK\3\4", 4) == 0 ? "a PyTorch checkpoint (zip)"
                     : n >= 1 && b[0] == '{' ? "a JSON file (a Hugging Face config.json?)" : NULL;
    if (!what) return;
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0'; else strcpy(dir, ".");
    fatal("-e/--init: %s: %s, not an llm.c model file: a Hugging Face model is converted first, from its directory: "
          "scripts/import_hf.py %s model.bin, then -e model.bin (docs/huggingface.md)", path, what, dir);
}

// The model's shape: a model file's header, a dN descriptor, or (by default) d2 for the synthetic corpus. No weight
// is read or made here (run_load_weights does that, after the plan): --dry-run and --autotune's plan touch none.
static void run_setup_model(Run *r) {
    TrainConfig *cfg = &r->cfg;
    r->init = cfg->init ? cfg->init : "d2";
    int data_vocab = r->synthetic ? 0 : data_vocab_size(cfg->tokenizer, cfg->train_data);  // sample.h
    int vocab = r->synthetic ? SYNTH_VOCAB : data_vocab > 0 ? data_vocab : 50257;  // a fresh model takes the data's tokenizer's
    r->init_is_file = !model_config_from_descriptor(r->init, vocab, &r->mc);
    if (!r->init_is_file) {  // a fresh model: its weights are made by run_load_weights, after the plan
        char why[512];
        if (cfg->mlp && model_choose_mlp(&r->mc, cfg->mlp - 1, why, sizeof(why))) usage_error("--mlp %s", why);
    } else {
        // "dN" that is no file: a depth out of range, not a file to open
        const char *s = r->init;
        int digits = s[0] == 'd' && s[1] != '\0' && !file_exists(s);
        for (const char *p = s + 1; digits && *p; p++) digits = *p >= '0' && *p <= '9';
        if (digits) usage_error("-e/--init: %s: depth %s is %s: a fresh GPT-2 has depth 1 to 1000 (d2, d6, d12, d24, ...)", s, s + 1,
                                atol(s + 1) < 1 ? "too small" : "too large");
        run_refuse_hf_init(r->init);
        int bf16;
        fclose(model_open_file_for("-e/--init", r->init, &r->mc, &bf16));
        if (cfg->mlp && cfg->mlp - 1 != r->mc.mlp)
            usage_error("--mlp %s: %s is a model file, whose header says %s; --mlp chooses the activation of a fresh model "
                        "(-e llama-dN or a preset)", MLP_CHOICES[cfg->mlp - 1].name, r->init, MLP_CHOICES[r->mc.mlp].name);
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

// The model named as the tokenizer checks name it: "-e/--init FILE" (trained weights) or "-e/--init NAME (fresh)".
static void run_model_name(const Run *r, char *buf, size_t n) {
    snprintf(buf, n, "-e/--init %s%s", r->init, r->init_is_file ? "" : " (fresh weights)");
}

// A tokenizer against the model's vocabulary of V ids. `what` names the file and where it came from.
// A tokenizer with more tokens than V, or an end-of-text id >= V, is an error: the data (and a sample's first token)
// hold ids the model has no row for. Fewer tokens than V is what a padded vocabulary looks like (Qwen 2.5's 151,936
// rows for its tokenizer's 151,665): up to 1% of V is taken silently. More than that, a trained model (a file) was
// made for another tokenizer: an error, since its rows would mean other tokens; a fresh model only wastes the rows
// the tokenizer never uses: a warning.
static void run_check_vocab(const Run *r, const char *what, int Vt, int eot) {
    int V = r->mc.vocab_size;
    char model[4300];
    run_model_name(r, model, sizeof(model));
    if (Vt > V) fatal("%s: a vocabulary of %d tokens, but the model (%s) has %d: ids %d to %d%s would be outside it. Give the "
                      "tokenizer the model was made with (or a model made for this tokenizer)", what, Vt, model, V, V, Vt - 1,
                      eot >= V ? " (the end-of-text token among them)" : "");
    if (eot >= V) fatal("%s: its end-of-text token %d is outside the model's vocabulary of %d (%s)", what, eot, V, model);
    if ((long)(V - Vt) * 100 <= V) return;
    if (r->init_is_file) fatal("%s: a vocabulary of %d tokens, but the model (%s) has %d: it was made for another tokenizer, "
                               "whose ids mean other tokens. Tokenize the data with the model's own tokenizer (the one "
                               "beside the shards it was trained on, or its Hugging Face tokenizer.json)", what, Vt, model, V);
    printf0("warning: %s: a vocabulary of %d tokens, but the model (%s) has %d: its embedding rows %d to %d are never "
            "used (-e dN or llama-dN takes the tokenizer's size)\n", what, Vt, model, V, Vt, V - 1);
}

// Whether the first tokens of a shard (up to 65,536: cheap at any size) are ids of a vocabulary of V; 0 if not,
// with the first that is not in *bad and its position in *at.
static int shard_prefix_below(const Shard *s, int V, uint32_t *bad, long *at) {
    long n = s->ntok < 65536 ? s->ntok : 65536;
    if (n == 0) return 1;
    unsigned char *buf = (unsigned char *)mallocCheck((size_t)n * 4);
    FILE *fp = fopenCheck(s->path, "rb");
    fseekCheck(fp, SHARD_HEADER_BYTES, SEEK_SET, s->path);
    freadCheck(buf, (size_t)s->tok_bytes, (size_t)n, fp, s->path);
    fclose(fp);
    int ok = 1;
    for (long i = 0; i < n && ok; i++) {
        uint32_t t = s->tok_bytes == 4 ? ((uint32_t *)buf)[i] : ((uint16_t *)buf)[i];
        if (t >= (uint32_t)V) { ok = 0; *bad = t; *at = i; }
    }
    free(buf);
    return ok;
}

// A split's shards against the model and against their own tokenizer (the file ./tokenize wrote beside them):
// ids within both (first tokens only), and uint16 tokens only where that tokenizer's ids fit in them.
static void run_check_shards(const Run *r, const DataLoader *dl, const char *flag, const Decoder *own) {
    for (int i = 0; i < dl->nshards; i += dl->nshards - 1 > 0 ? dl->nshards - 1 : 1) {  // the first and the last
        const Shard *s = &dl->shards[i];
        uint32_t bad;
        long at;
        if (!shard_prefix_below(s, r->mc.vocab_size, &bad, &at)) {
            char model[4300];
            run_model_name(r, model, sizeof(model));
            fatal("%s %s: token %u at position %ld is outside the model's vocabulary of %d (%s)", flag, s->path, bad, at,
                  r->mc.vocab_size, model);
        }
        if (own->kind != DECODE_TOKENIZER) continue;
        if (!shard_prefix_below(s, own->tok.vocab_size, &bad, &at))
            fatal("%s %s: token %u at position %ld is outside the vocabulary of the tokenizer beside it, %s (%d tokens): the "
                  "shards were written by another tokenizer", flag, s->path, bad, at, own->path, own->tok.vocab_size);
        if (s->tok_bytes == 2 && own->tok.vocab_size > 65536)
            fatal("%s %s: uint16 tokens, which cannot hold the ids of the tokenizer beside it, %s (%d tokens): the shards "
                  "were written by another tokenizer", flag, s->path, own->path, own->tok.vocab_size);
    }
}

// The tokenizers against the model and the data, before anything is allocated or written: --tokenizer's and the
// one beside the train shards (and the validation shards') must be one vocabulary, that of the model (run_check_vocab).
static void run_check_tokenizers(Run *r) {
    const TrainConfig *cfg = &r->cfg;
    char what[4400];
    if (r->dec.kind == DECODE_TOKENIZER) {
        snprintf(what, sizeof(what), cfg->tokenizer ? "--tokenizer %s" : "-i/--train-data: the shards' tokenizer %s", r->dec.path);
        run_check_vocab(r, what, r->dec.tok.vocab_size, tokenizer_eot(&r->dec.tok));
    }
    if (r->synthetic) return;
    Decoder train, val;
    char beside[4200];
    const Decoder *ref = &r->dec;  // the train shards' own tokenizer: the decoder's, unless --tokenizer named another
    train.kind = val.kind = DECODE_IDS;
    if (cfg->tokenizer && tokenizer_beside(r->train_loader.shards[0].path, beside, sizeof(beside))) {
        decoder_init(&train, beside, 0, NULL);
        ref = &train;
        if (train.tok.vocab_size != r->dec.tok.vocab_size)
            fatal("--tokenizer %s has %d tokens, but the train shards' own tokenizer %s (beside them) has %d: the samples would "
                  "be decoded by another tokenizer than the data's", r->dec.path, r->dec.tok.vocab_size, beside, train.tok.vocab_size);
    }
    run_check_shards(r, &r->train_loader, "-i/--train-data:", ref);
    if (r->have_val) {
        const Decoder *vref = ref;
        if (tokenizer_beside(r->val_loader.shards[0].path, beside, sizeof(beside)) && (ref->kind != DECODE_TOKENIZER ||
                                                                                        strcmp(beside, ref->path) != 0)) {
            decoder_init(&val, beside, 0, NULL);
            vref = &val;
            if (ref->kind == DECODE_TOKENIZER && val.tok.vocab_size != ref->tok.vocab_size)
                fatal("-j/--val-data: the validation shards' tokenizer %s has %d tokens, but the train shards' %s has %d: the "
                      "two splits were written by different tokenizers", beside, val.tok.vocab_size, ref->path, ref->tok.vocab_size);
            if (ref->kind != DECODE_TOKENIZER) {
                snprintf(what, sizeof(what), "-j/--val-data: the shards' tokenizer %s", beside);
                run_check_vocab(r, what, val.tok.vocab_size, tokenizer_eot(&val.tok));
            }
        }
        run_check_shards(r, &r->val_loader, "-j/--val-data:", vref);
    }
    decoder_free(&train);
    decoder_free(&val);
}

// The masks (attn_masks.h): each layer's window from the flags, the separator the loaders cut documents at.
static void run_setup_masks(Run *r) {
    const TrainConfig *cfg = &r->cfg;
    int L = r->mc.num_layers;
    r->attn_window = (int *)callocCheck(L, sizeof(int));
    r->any_window = attn_masks_layers(cfg, L, r->attn_window);
    r->doc_sep = 0;
    if (cfg->doc_rope_restart && r->mc.positions != POS_ROPE)
        usage_error("--doc-rope-restart: the model (-e/--init %s) has learned positions, not RoPE", r->init);
    if (!cfg->doc_mask) return;
    r->doc_sep = attn_masks_doc_sep(cfg, &r->train_loader, "-i/--train-data", r->synthetic, r->mc.vocab_size);
    dataloader_set_doc_sep(&r->train_loader, r->doc_sep);
    if (r->have_val) dataloader_set_doc_sep(&r->val_loader, r->doc_sep);  // the same tokenizer's separator
}

// Set-up: the world, the flags, the model's shape, the data, the decoder, and the tokenizers checked against them.
static void run_setup(Run *r, int argc, char **argv) {
    run_setup_world(r, argc, argv);
    run_setup_model(r);
    run_setup_data(r);
    run_setup_masks(r);
    decoder_init(&r->dec, r->cfg.tokenizer, r->synthetic, r->synthetic ? NULL : r->train_loader.shards[0].path);
    run_check_tokenizers(r);
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

// The out dir as this run made it (-o with its missing parents), so that a run that stops before it has written
// anything there leaves no empty directory behind: at exit, unless the run completed (run_keep_out_dir), the
// directories it made are removed while they are empty (a checkpoint, or any file, keeps them).
static char out_dir_made[4200], out_dir_top[4200];  // the out dir, and the outermost directory this run made
static void run_unmake_out_dir(void) {
    char p[4200];
    snprintf(p, sizeof(p), "%s", out_dir_made);
    size_t top = strlen(out_dir_top);
    while (p[0] && strlen(p) >= top && rmdir(p) == 0) {
        char *slash = strrchr(p, '/');
        if (!slash) break;
        *slash = '\0';
    }
}
static void run_make_out_dir(const char *dir) {
    char p[4200];
    snprintf(p, sizeof(p), "%s", dir);
    for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--) p[n - 1] = '\0';  // "out/" is out
    if (!dir_exists(p) && !out_dir_made[0]) {
        snprintf(out_dir_made, sizeof(out_dir_made), "%s", p);
        for (size_t i = 1; i <= strlen(p); i++) {  // the first prefix that does not exist
            if (p[i] != '/' && p[i] != '\0') continue;
            char saved = p[i];
            p[i] = '\0';
            int missing = !dir_exists(p);
            if (missing) snprintf(out_dir_top, sizeof(out_dir_top), "%s", p);
            p[i] = saved;
            if (missing) break;
        }
        atexit(run_unmake_out_dir);
    }
    make_dir("-o/--out-dir", dir);
}
static void run_keep_out_dir(void) { out_dir_made[0] = '\0'; }

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

// A fresh run (-y 0) into an out dir that holds checkpoints would write its own beside another run's, and a later
// -y 1 would resume whichever is newer: it stops here, before anything is allocated or written, naming -y 1 (to
// resume them) and a new folder; --replace-checkpoints 1 moves them aside instead (never deletes them). Every
// rank sees the same out dir (run_check_out_dir), so every rank decides alike; rank 0 speaks.
static void run_fresh_out_dir(Run *r) {
    const char *dir = r->cfg.out_dir;
    if (!dir) return;
    int steps[4096];
    int n = checkpoint_list(dir, steps, 4096);
    if (n == 0) return;
    if (r->cfg.dry_run) {  // it writes nothing and moves nothing; it says what the run would do
        printf0("note: -o/--out-dir %s holds another run's checkpoints (newest: step %d): the run would %s\n", dir, steps[n - 1],
                r->cfg.replace_checkpoints ? "move them aside (--replace-checkpoints 1)" : "stop (pass -y 1 to resume it, or a new -o)");
        return;
    }
    if (r->cfg.replace_checkpoints) {
        comm_barrier(&r->comm);  // every rank has listed them before rank 0 moves them
        char moved[4300];
        if (r->rank == 0) {
            checkpoint_move_aside(dir, moved, sizeof(moved));
            printf("--replace-checkpoints: moved the %d checkpoint%s in %s (steps %d to %d) aside to %s/\n", n, n == 1 ? "" : "s",
                   dir, steps[0], steps[n - 1], moved);
        }
        comm_barrier(&r->comm);
        return;
    }
    if (r->rank == 0)
        fprintf(stderr, "error: -o/--out-dir %s holds another run's checkpoints (%d, the newest of step %d: %s/model_%08d.bin); "
                "this run starts fresh (-y 0) and would write beside them, so it stops before writing anything: pass -y 1 to "
                "resume that run, or a new -o folder for a new run (or --replace-checkpoints 1 to move them aside into "
                "%s/replaced-K/)\n", dir, n, steps[n - 1], dir, steps[n - 1], dir);
    comm_finalize(&r->comm);
    exit(EXIT_FAILURE);
}

// The descriptor that makes a fresh model of c's shape ("llama-d4", "d6 --mlp relu2"), or "" if none does (a
// preset's or an imported model's shape): for the resume refusal's advice.
static void run_descriptor_for(const ModelConfig *c, char *out, size_t n) {
    out[0] = '\0';
    for (int f = 0; f < NUM_FAMILIES; f++) {
        const char *pat = FAMILIES[f]->fresh;  // "dN", "llama-dN"
        const char *N = strchr(pat, 'N');
        if (!N) continue;
        for (int d = 1; d <= 64; d++) {
            char desc[64];
            snprintf(desc, sizeof(desc), "%.*s%d", (int)(N - pat), pat, d);
            for (int mlp = -1; mlp < NUM_MLPS; mlp++) {
                ModelConfig t;
                char why[512];
                memset(&t, 0, sizeof(t));
                if (!FAMILIES[f]->from_descriptor(desc, c->vocab_size, &t)) break;
                if (mlp >= 0 && (mlp == t.mlp || model_choose_mlp(&t, mlp, why, sizeof(why)))) continue;
                if (memcmp(&t, c, sizeof(t)) == 0) {
                    snprintf(out, n, "%s%s%s", desc, mlp >= 0 ? " --mlp " : "", mlp >= 0 ? MLP_CHOICES[mlp].name : "");
                    return;
                }
            }
        }
    }
}

// The checkpoint's model is not the one -e (or its default, d2) describes: both shapes named, and the -e that
// resumes it (its descriptor, or the checkpoint's own model file, which always does).
static void run_refuse_shape(const Run *r, const ModelConfig *saved, const char *mp) {
    char have[256], want[256], desc[96];
    saved->family->shape_text(saved, want, sizeof(want));
    r->mc.family->shape_text(&r->mc, have, sizeof(have));
    run_descriptor_for(saved, desc, sizeof(desc));
    char fix[4400];
    if (desc[0]) snprintf(fix, sizeof(fix), "-e %s (or -e %s)", desc, mp);
    else snprintf(fix, sizeof(fix), "-e %s", mp);
    fatal("%s: the checkpoint's model is %s; this run's (-e %s%s) is %s: pass %s to resume it", mp, want, r->init,
          strcmp(r->init, "d2") == 0 ? ", the default without -e" : "", have, fix);
}

// Resume: the newest complete checkpoint in the out dir replaces the initial weights, and its state
// (step, data position, sampler, AdamW moments, loss scaler) is kept for run_build.
static void run_resume(Run *r) {
    TrainConfig *cfg = &r->cfg;
    r->start_step = 0;
    r->lr_span = cfg->lr_steps > 0 ? cfg->lr_steps : cfg->steps;
    if (cfg->out_dir) run_make_out_dir(cfg->out_dir);
    if (cfg->out_dir) run_check_out_dir(r);
    if (!cfg->resume) { run_fresh_out_dir(r); return; }
    int steps[4096];
    int n = checkpoint_list(cfg->out_dir, steps, 4096);
    if (n == 0) {
        printf0("resume: no complete checkpoint in %s, starting from scratch\n", cfg->out_dir);
        return;
    }
    char *mp = r->resume_model, *sp = r->resume_state;
    checkpoint_paths(cfg->out_dir, steps[n - 1], mp, sp, sizeof(r->resume_model));
    ModelConfig rc;
    int bf16;
    fclose(model_open_file_for(NULL, mp, &rc, &bf16));  // its weights are read by run_load_weights
    if (memcmp(&rc, &r->mc, sizeof(rc)) != 0) run_refuse_shape(r, &rc, mp);
    TrainState *s = &r->resumed;
    state_read(sp, s, NULL, NULL);
    if (s->num_params != r->num_params) fatal("%s: parameter count differs from the model's", sp);
    if (s->B != r->B || s->T != r->T || (long)s->grad_accum * s->world != (long)r->A * r->dp) {
        long per_step = (long)s->grad_accum * s->world;  // micro-batches per step over all data-parallel ranks
        char fix[320];
        if (per_step % r->dp == 0) snprintf(fix, sizeof(fix), "pass -b %d -t %d --grad-accum %ld to resume it", s->B, s->T, per_step / r->dp);
        else snprintf(fix, sizeof(fix), "its %ld micro-batches per step do not split over this run's %d data-parallel ranks: resume "
                      "with -b %d -t %d and a number of data-parallel ranks that divides %ld", per_step, r->dp, s->B, s->T, per_step);
        fatal("%s: saved with micro-batch %d, seq %d, %ld micro-batches per step; this run has %d, %d, %d "
              "(the data order would differ): %s", sp, s->B, s->T, per_step, r->B, r->T, r->A * r->dp, fix);
    }
    if (s->seed != cfg->seed || s->shuffle != cfg->shuffle) {
        fatal("%s: saved with --seed %llu --shuffle %d; pass the same to resume", sp, (unsigned long long)s->seed, s->shuffle);
    }
    if (s->optimizer != (int)cfg->optimizer) {
        int known = s->optimizer >= 0 && s->optimizer < (int)(sizeof(OPTIMIZER_NAMES) / sizeof(OPTIMIZER_NAMES[0])) - 1;
        const char *saved = known ? OPTIMIZER_NAMES[s->optimizer] : "(unknown to this build)";
        fatal("%s: saved by a run with --optimizer %s; this run has --optimizer %s (the state is %s's): resume "
              "with --optimizer %s, or start a new run from its weights alone with -e %s --optimizer %s -o and a new folder "
              "(-y 0: the step, data position and optimizer state start afresh)", sp, saved, OPTIMIZER_NAMES[cfg->optimizer],
              saved, saved, mp, OPTIMIZER_NAMES[cfg->optimizer]);
    }
    int flags = (cfg->doc_mask ? 1 : 0) | (cfg->doc_rope_restart ? 2 : 0);
    int same_windows = attn_masks_same_windows(s, r->attn_window, r->mc.num_layers);
    if (s->mask_flags != flags || (flags & 1 && s->doc_sep != r->doc_sep) || !same_windows) {
        char saved[64];
        snprintf(saved, sizeof(saved), (s->mask_flags & 1) ? "1 (separator %d)" : "0", s->doc_sep);
        fatal("%s: saved by a run with --doc-mask %s, --doc-rope-restart %d and %s; this run has --doc-mask %d, "
              "--doc-rope-restart %d and %s (--attn-window, --attn-window-pattern): resume with the masks it was trained "
              "with", sp, saved, (s->mask_flags >> 1) & 1, s->window_period ? "sliding windows" : "no sliding window",
              cfg->doc_mask, cfg->doc_rope_restart, !r->any_window ? "no sliding window" : same_windows ? "the same windows" : s->window_period ? "other windows" : "sliding windows");
    }
    r->start_step = s->step;
    printf0("resume: step %d from %s (saved by %d data-parallel rank%s)\n", r->start_step, sp, s->world, s->world == 1 ? "" : "s");
    run_resume_schedule(r);
}

// The initial weights, once the plan is made and the run goes ahead: the checkpoint's (and its AdamW moments) on
// resume, else -e's file, else a fresh initialisation from --seed.
static void run_load_weights(Run *r) {
    if (r->resume_model[0]) {
        ModelConfig rc;
        r->params = model_read_file(r->resume_model, &rc);
        r->resume_m = (float *)mallocCheck(r->num_params * sizeof(float));
        r->resume_v = (float *)mallocCheck(r->num_params * sizeof(float));
        state_read(r->resume_state, &r->resumed, r->resume_m, r->resume_v);
    } else if (r->init_is_file) {
        r->params = model_read_file_for("-e/--init", r->init, &r->mc);
    } else {
        r->params = (float *)mallocCheck(r->num_params * sizeof(float));
        model_init_random(&r->mc, r->params, r->cfg.seed);
    }
}

// Teardown: everything the run holds, freed, and the world left.
static void run_free(Run *r) {
    if (r->logf) fclose(r->logf);
    free(r->gen);
    zero_free(&r->zero);
    model_free(r->model);
    free(r->first);
    free(r->holds_unit);
    free(r->attn_window);
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
