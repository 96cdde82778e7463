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
    return (float)(comm_allreduce_sum_f64(pp->pp, s) / batches);
}

static void print_memory_plan(const MemoryPlan *mp) {
    double mib = 1048576.0;
    printf0("memory plan per rank: params %.1f MiB | grads %.1f MiB | AdamW state %.1f MiB%s | ", mp->params / mib,
            mp->grads / mib, mp->optimizer / mib, mp->optimizer_on_host ? " (host: moments, master copy, gradient staging)" : "");
    if (mp->working) printf0("working weights %.1f MiB | ", mp->working / mib);
    printf0("activations %.1f MiB | workspace %.1f MiB | total %.1f MiB\n", mp->activations / mib, mp->workspace / mib,
            (mp->params + mp->grads + mp->optimizer + mp->working + mp->activations + mp->workspace) / mib);
}

static int train_main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);  // a step's line reaches a redirected log (slurm's) when it happens
    Comm comm;
    comm_init(&comm, &argc, &argv);
    int world = comm.world, rank = comm.rank;
    log_rank = rank;
    TrainConfig cfg;
    config_defaults(&cfg);
    parse_args(&cfg, argc, argv);
    config_validate(&cfg);
    config_resolve_precision(&cfg, PRECISION_DEFAULT, PRECISIONS_BUILT);
    // the world is pipeline stages x data-parallel ranks; rank = stage * dp + dp index
    if (cfg.pp < 1 || world % cfg.pp != 0) {
        fprintf(stderr, "error: --pp: %d stages do not divide the world of %d ranks\n", cfg.pp, world);
        exit(2);
    }
    int pp_stages = cfg.pp, dp = world / pp_stages, stage = rank / dp, dp_rank = rank % dp;
    if (pp_stages > 1 && cfg.zero_stage >= 2) {
        fprintf(stderr, "error: -z/--zero-stage %d with --pp %d: stages 2 and 3 reduce gradients and gather weights layer by "
                "layer within one micro-batch's backward, which 1F1B interleaves across micro-batches; use -z 0 or 1\n",
                cfg.zero_stage, pp_stages);
        exit(2);
    }
    config_resolve_batch(&cfg, dp);
    backend_init(comm.local_rank);  // after the flags, so --help and flag errors need no device
    backend_set_precision(cfg.precision, cfg.tf32);
    if (strcmp(cfg.comm, "nccl") == 0) comm_enable_nccl(&comm);
    comm_watchdog_start(&comm, cfg.comm_timeout);
    // fault injection for the hang tests: TRAIN_GPT_FAULT=stall:RANK:STEP makes that rank stop
    // before the gradient reduction of that step, as a rank stuck in a kernel or on a dead disk would
    // TRAIN_GPT_FAULT=overflow:S1,S2,... makes the loss gradient infinite at those steps, as an fp16
    // overflow would, for the loss-scaling tests
    int stall_rank = -1, stall_step = -1;
    char overflow_steps[256] = "";
    const char *fault = getenv("TRAIN_GPT_FAULT");
    if (fault && strncmp(fault, "overflow:", 9) == 0) snprintf(overflow_steps, sizeof(overflow_steps), ",%s,", fault + 9);
    else if (fault && sscanf(fault, "stall:%d:%d", &stall_rank, &stall_step) != 2)
        fatal("TRAIN_GPT_FAULT: '%s' is not stall:RANK:STEP or overflow:STEP[,STEP...]", fault);
    int B = cfg.micro_batch, T = cfg.seq_len, A = cfg.grad_accum;
    int synthetic = cfg.train_data == NULL;

    // the model: a checkpoint file, a dN descriptor, or (by default) d2 for the synthetic corpus
    GPT2Config mc;
    float *params = NULL;
    const char *init = cfg.init ? cfg.init : "d2";
    int vocab = synthetic ? SYNTH_VOCAB : 50257;
    if (gpt2_config_from_descriptor(init, vocab, &mc)) {
        params = (float *)mallocCheck(gpt2_num_params(&mc) * sizeof(float));
        gpt2_init_random(&mc, params, cfg.seed);
    } else {
        params = gpt2_read_model_file(init, &mc);
    }
    if (pp_stages > mc.num_layers) {
        fprintf(stderr, "error: --pp: %d stages for a model of %d layers; each stage needs at least one layer\n", pp_stages,
                mc.num_layers);
        exit(2);
    }
    if (T > mc.max_seq_len) {
        fprintf(stderr, "error: -t/--seq-len: %d is longer than the model's maximum sequence length %d\n", T, mc.max_seq_len);
        exit(2);
    }

    // data
    MarkovSource markov;
    DataLoader train_loader, val_loader;
    int have_val = 0;
    if (synthetic) {
        markov_init(&markov, 0);
        long ntrain = 1L << 21, nval = 1L << 16;
        if (ntrain < (long)B * T * 4 + 1) ntrain = (long)B * T * 4 + 1;
        if (nval < (long)B * T + 1) nval = (long)B * T + 1;
        dataloader_init_memory(&train_loader, "synthetic-train", markov_sample(&markov, ntrain, 1), ntrain, B, T, dp_rank,
                               dp, cfg.shuffle, cfg.seed, mc.vocab_size);
        dataloader_init_memory(&val_loader, "synthetic-val", markov_sample(&markov, nval, 2), nval, B, T, 0, 1, 0, 0,
                               mc.vocab_size);
        have_val = 1;
    } else {
        dataloader_init(&train_loader, cfg.train_data, "-i/--train-data", B, T, dp_rank, dp, cfg.shuffle, cfg.seed,
                        mc.vocab_size);
        if (cfg.val_data) {
            // every rank evaluates the same batches, so the validation loss does not depend on the layout
            dataloader_init(&val_loader, cfg.val_data, "-j/--val-data", B, T, 0, 1, 0, 0, mc.vocab_size);
            have_val = 1;
        }
    }
    int val_batches = cfg.val_batches;
    if (have_val && val_batches > dataloader_windows_per_rank(&val_loader)) {
        val_batches = (int)dataloader_windows_per_rank(&val_loader);
        printf0("note: validation data holds %d micro-batches; -m/--val-batches lowered to that\n", val_batches);
    }

    Decoder dec = {0};
    if (cfg.tokenizer) {
        tokenizer_init_bin(&dec.tok, cfg.tokenizer);
        dec.kind = 1;
    } else if (synthetic) {
        dec.kind = 2;
    } else {  // ./tokenize shards puts tokenizer.bin beside the shards
        char guess[4200];
        snprintf(guess, sizeof(guess), "%s", train_loader.shards[0].path);
        char *slash = strrchr(guess, '/');
        if (slash) strcpy(slash + 1, "tokenizer.bin"); else strcpy(guess, "tokenizer.bin");
        if (file_exists(guess)) { tokenizer_init_bin(&dec.tok, guess); dec.kind = 1; }
    }

    // resume: the newest complete checkpoint in the out dir
    int start_step = 0;
    TrainState resumed = {0};
    float *resume_m = NULL, *resume_v = NULL;
    if (cfg.out_dir) make_dir(cfg.out_dir);
    if (cfg.resume) {
        int steps[4096];
        int n = checkpoint_list(cfg.out_dir, steps, 4096);
        if (n == 0) {
            printf0("resume: no complete checkpoint in %s, starting from scratch\n", cfg.out_dir);
        } else {
            char mp[4200], sp[4200];
            checkpoint_paths(cfg.out_dir, steps[n - 1], mp, sp, sizeof(mp));
            GPT2Config rc;
            free(params);
            params = gpt2_read_model_file(mp, &rc);
            if (memcmp(&rc, &mc, sizeof(rc)) != 0) fatal("%s: model shape differs from -e/--init's", mp);
            state_read(sp, &resumed, NULL, NULL);
            if (resumed.num_params != gpt2_num_params(&mc)) fatal("%s: parameter count differs from the model's", sp);
            if (resumed.B != B || resumed.T != T || (long)resumed.grad_accum * resumed.world != (long)A * dp) {
                fatal("%s: saved with micro-batch %d, seq %d, %d micro-batches per step; this run has %d, %d, %d "
                      "(the data order would differ)", sp, resumed.B, resumed.T, resumed.grad_accum * resumed.world, B, T,
                      A * dp);
            }
            if (resumed.seed != cfg.seed || resumed.shuffle != cfg.shuffle) {
                fatal("%s: saved with --seed %llu --shuffle %d; pass the same to resume", sp,
                      (unsigned long long)resumed.seed, resumed.shuffle);
            }
            resume_m = (float *)mallocCheck(resumed.num_params * sizeof(float));
            resume_v = (float *)mallocCheck(resumed.num_params * sizeof(float));
            state_read(sp, &resumed, resume_m, resume_v);
            start_step = resumed.step;
            printf0("resume: step %d from %s (saved by %d rank%s)\n", start_step, sp, resumed.world,
                    resumed.world == 1 ? "" : "s");
        }
    }

    size_t num_params = gpt2_num_params(&mc);
    // this stage's layers, and the units it holds (the tied outer unit lives on the first and the last)
    int *first = (int *)mallocCheck((pp_stages + 1) * sizeof(int));
    double imbalance = pp_split(&mc, T, pp_stages, first);
    int *present = (int *)callocCheck(gpt2_num_units(&mc), sizeof(int));
    present[0] = stage == 0 || stage == pp_stages - 1;
    for (int l = first[stage]; l < first[stage + 1]; l++) present[1 + l] = 1;
    int slots = pp_max_in_flight(stage, pp_stages, A);
    // activations: this stage's layers, times the micro-batches it keeps in flight
    MemoryPlan plan = model_memory_plan(&mc, B, T, cfg.recompute, first[stage + 1] - first[stage], slots, present[0],
                                        cfg.zero_stage == 3);
    size_t bucket_bytes = (size_t)(cfg.reduce_bucket_mb * 1048576.0);
    int offload_params = strcmp(cfg.offload, "params") == 0, offload = offload_params || strcmp(cfg.offload, "optimizer") == 0;
    plan.optimizer_on_host = offload;
    zero_memory_plan(&mc, cfg.zero_stage, dp, present, bucket_bytes, offload, offload_params, &plan.params, &plan.grads, &plan.optimizer);
    printf0("train_gpt (%s build) on %s | world %d = data-parallel %d x pipeline %d | ZeRO stage %d | offload %s | "
            "precision %s%s | loss scale %s\n", BUILD_NAME, model_device_name(), world, dp, pp_stages, cfg.zero_stage, cfg.offload,
            cfg.precision, cfg.tf32 ? " (TF32 matmuls)" : "", cfg.loss_scale);
    if (pp_stages > 1) {
        printf0("pipeline split (1F1B, %d micro-batches; bubble (p-1)/(m+p-1) = %.3f):", A, pp_bubble_formula(pp_stages, A));
        for (int s = 0; s < pp_stages; s++) printf0(" stage %d: layers %d-%d%s%s |", s, first[s], first[s + 1] - 1,
                                                    s == 0 ? " + embedding" : "", s == pp_stages - 1 ? " + classifier" : "");
        printf0(" largest stage / mean = %.2f\n", imbalance);
        if (imbalance > 1.15) printf0("warning: %d layers do not split evenly over %d stages: the slowest stage does %.0f%% "
                                      "more work than the mean\n", mc.num_layers, pp_stages, 100.0 * (imbalance - 1.0));
        if (A < pp_stages) printf0("warning: %d micro-batches for %d stages: most of the pipeline idles; use more accumulation\n",
                                   A, pp_stages);
    }
    printf0("model: %s | L %d | C %d | NH %d | V %d (padded %d) | maxT %d | %zu parameters\n", init, mc.num_layers,
           mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size, mc.max_seq_len, num_params);
    printf0("batch: micro-batch %d x seq %d x accumulation %d x data-parallel %d = %ld tokens per step | recompute %d\n",
           B, T, A, world, cfg.total_batch_tokens, cfg.recompute);
    printf0("data: %s (%d shard%s, %ld micro-batches per epoch)%s%s\n", synthetic ? "synthetic Markov corpus" : cfg.train_data,
           train_loader.nshards, train_loader.nshards == 1 ? "" : "s", train_loader.windows_per_epoch,
           have_val ? " | val: " : " | no validation data", have_val ? (synthetic ? "synthetic" : cfg.val_data) : "");
    if (synthetic) printf0("synthetic corpus entropy floor: %.4f nats/token (the best possible loss)\n", markov.entropy_rate);
    print_memory_plan(&plan);
    FILE *logf = NULL;
    if (cfg.log_path && rank == 0) {
        logf = fopen(cfg.log_path, start_step > 0 ? "a" : "w");
        if (!logf) fatal("--log: cannot open %s: %s", cfg.log_path, strerror(errno));
    }
    if (logf && start_step == 0) {
        fprintf(logf, "{\"memory_plan\": {\"world\": %d, \"zero_stage\": %d, \"params_bytes\": %zu, \"grads_bytes\": %zu, "
                "\"optimizer_bytes\": %zu, \"working_weights_bytes\": %zu, \"activations_bytes\": %zu, \"workspace_bytes\": %zu}}\n",
                world, cfg.zero_stage, plan.params, plan.grads, plan.optimizer, plan.working, plan.activations, plan.workspace);
        fflush(logf);
    }
    if (cfg.dry_run) { if (logf) fclose(logf); comm_finalize(&comm); return 0; }

    Comm dp_comm, pp_comm, tied_comm;
    comm_split(&comm, stage, dp_rank, &dp_comm);
    comm_split(&comm, dp_rank, stage, &pp_comm);
    comm_split(&comm, present[0] ? dp_rank : world + rank, stage, &tied_comm);
    size_t act_before = backend_malloced;
    Model *model = model_create(&mc, B, T, cfg.recompute, first[stage], first[stage + 1], slots, cfg.zero_stage == 3);
    size_t act_bytes = backend_malloced - act_before, planned_act = plan.activations + plan.workspace + plan.working;
    Zero zero;
    size_t allocated_before = backend_allocated;
    zero_init(&zero, &dp_comm, cfg.zero_stage, model, present, bucket_bytes, offload, offload_params);
    if (cfg.zero_stage >= 2) printf0("ZeRO-%d: gradients reduce-scattered in buckets of %d layer%s (--reduce-bucket-mb %g)\n",
                                     cfg.zero_stage, zero.bucket_layers, zero.bucket_layers == 1 ? "" : "s", cfg.reduce_bucket_mb);
    Pipeline pipe = {pp_stages, stage, first[stage], first[stage + 1], slots, &pp_comm, &zero, 0.0};
    size_t model_state = backend_allocated - allocated_before;
    size_t planned_state = plan.params + plan.grads + plan.optimizer;
    printf0("allocated per rank: model state %.1f MiB (planned %.1f MiB) | activations and workspace %.1f MiB (planned %.1f MiB)\n",
            model_state / 1048576.0, planned_state / 1048576.0, act_bytes / 1048576.0, planned_act / 1048576.0);
    if (logf) fprintf(logf, "{\"allocated\": {\"model_state_bytes\": %zu, \"planned_model_state_bytes\": %zu, "
                      "\"activation_bytes\": %zu, \"planned_activation_bytes\": %zu}}\n", model_state, planned_state,
                      act_bytes, planned_act);
    zero_load_params(&zero, params);
    free(params);
    if (resume_m) { zero_set_opt_state(&zero, resume_m, resume_v); free(resume_m); free(resume_v); }
    // the state file counts micro-batches taken by all data-parallel ranks together; each takes 1/dp
    train_loader.pos = start_step > 0 ? resumed.loader_pos / (uint64_t)dp : 0;
    uint64_t sample_rng = start_step > 0 ? resumed.sample_rng : mix_seed(cfg.seed ^ 0x73616d70ull);
    LossScaler scaler;
    loss_scaler_init(&scaler, &cfg);
    int updates = start_step > 0 ? resumed.updates : 0, bad_in_a_row = 0;
    if (start_step > 0 && resumed.loss_scale > 0.0f) {  // the scaler goes on where it was; a fixed scale is the flag's
        if (scaler.dynamic) scaler.scale = resumed.loss_scale;
        scaler.iter = resumed.scaler_iter;
        scaler.last_overflow = resumed.scaler_last_overflow;
        scaler.hysteresis_left = resumed.scaler_hysteresis_left;
        scaler.skipped = resumed.scaler_skipped;
    }

    signal(SIGTERM, on_stop_signal);
    signal(SIGUSR1, on_stop_signal);

    double total_ms = 0.0;
    int timed_steps = 0;
    int *gen = (int *)mallocCheck(T * sizeof(int));
    for (int step = start_step; step <= cfg.steps; step++) {
        int last = step == cfg.steps;
        if (have_val && cfg.val_every > 0 && (step % cfg.val_every == 0 || last)) {
            float vl = evaluate(&pipe, &val_loader, val_batches, B, T);
            if (synthetic) printf0("step %5d | val loss %.4f | floor %.4f | gap %.4f\n", step, vl, markov.entropy_rate,
                                   vl - markov.entropy_rate);
            else printf0("step %5d | val loss %.4f\n", step, vl);
            if (logf) {
                fprintf(logf, "{\"step\": %d, \"val_loss\": %.9g", step, vl);
                if (synthetic) fprintf(logf, ", \"floor\": %.9g", markov.entropy_rate);
                fprintf(logf, "}\n");
                fflush(logf);
            }
        }
        // every rank samples (the forward needs all stages, and at ZeRO-3 all ranks); the last stage
        // draws the token and passes it to the others; rank 0 prints
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last)) {
            int n = cfg.gen_tokens + 1 < T ? cfg.gen_tokens + 1 : T;
            gen[0] = dec.kind == 1 ? tokenizer_eot(&dec.tok) : 0;
            printf0("sample: ");
            for (int t = 1; t < n; t++) {
                pp_forward_only(&pipe, gen, NULL, 1, t);
                float u = random_f32(&sample_rng);
                gen[t] = stage == pp_stages - 1 ? sample_token(model_logits(model, 0, t - 1), mc.vocab_size, u) : 0;
                comm_broadcast(&pp_comm, &gen[t], sizeof(int), pp_stages - 1);
                if (rank == 0) decode_print(&dec, gen[t]);
            }
            printf0("\n");
        }
        if (last) break;

        double t0 = wall_seconds();
        STEP_BEGIN(step + 1);
        comm_watchdog_step(step + 1);
        zero_zero_grad(&zero);
        float dloss = 1.0f / ((float)B * T * A * dp), step_scale = scaler.scale;
        char stepname[16];
        snprintf(stepname, sizeof(stepname), ",%d,", step + 1);
        if (strstr(overflow_steps, stepname)) dloss = INFINITY;
        dloss *= step_scale;  // a power of two: every gradient is scaled exactly
        double loss = pp_run_step(&pipe, &train_loader, A, B, T, dloss);
        double busy_ms = (wall_seconds() - t0) * 1e3;
        if (rank == stall_rank && step + 1 == stall_step) {
            fprintf(stderr, "fault injection: rank %d stalls at step %d\n", rank, stall_step);
            for (;;) pause();
        }
        loss = comm_allreduce_sum_f64(&comm, loss) / ((double)A * dp);  // only last stages contribute
        // the tied embedding's gradient: the first stage's (lookup) plus the last stage's (classifier)
        if (pp_stages > 1 && present[0]) comm_allreduce_sum(&tied_comm, zero.grads + zero.uoff[0], zero.ushard[0] * dp);
        zero_reduce_gradients(&zero);
        // each stage sums its own units (the tied unit once), then the pipeline adds the stages up
        double ss = zero_grad_sum_squares(&zero, pp_stages > 1 && stage == pp_stages - 1 ? 0 : -1);
        float norm = (float)sqrt(comm_allreduce_sum_f64(&pp_comm, ss)) / step_scale;
        int skip = loss_scaler_update(&scaler, !isfinite(norm));
        if (skip < 0) fatal("step %d: the gradients overflow at the minimum loss scale %g (--loss-scale-min); fp16 cannot "
                            "represent this run's gradients (try --precision bf16)", step + 1, step_scale);
        bad_in_a_row = skip ? bad_in_a_row + 1 : 0;
        if (!scaler.dynamic && bad_in_a_row >= 5) fatal("step %d: gradients non-finite for 5 steps in a row: the run has "
                                                        "diverged (lower -l/--lr, or raise --warmup)", step + 1);
        float grad_scale = cfg.grad_clip > 0.0f && norm > cfg.grad_clip ? cfg.grad_clip / (norm + 1e-6f) : 1.0f;
        float lr = lr_at(&cfg, step, cfg.steps);
        if (!skip) {
            updates++;
            AdamWArgs adam = {lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, grad_scale / step_scale, updates};
            zero_update(&zero, &adam);
        }
        STEP_END(step + 1);
        double ms = (wall_seconds() - t0) * 1e3;
        double tps = cfg.total_batch_tokens / (ms / 1e3);
        // model FLOPs per token, as llm.c and PaLM count them: 6N for the matmuls' forward and
        // backward, plus 6*L*C*T for attention; per device
        double flops = (6.0 * num_params + 6.0 * mc.num_layers * mc.channels * T) * tps / world;
        double peak = model_peak_flops();
        char mfu[48];
        if (peak > 0) snprintf(mfu, sizeof(mfu), "MFU %.1f%%", 100.0 * flops / peak);
        else snprintf(mfu, sizeof(mfu), "%.1f GFLOP/s (MFU n/a)", flops / 1e9);
        if (step > start_step) { total_ms += ms; timed_steps++; }  // the first step warms caches
        // the pipeline's measured bubble: the share of each stage's step spent waiting for a neighbour
        char bubble[512] = "";
        double *idle = NULL;
        if (pp_stages > 1) {
            idle = (double *)callocCheck(pp_stages, sizeof(double));
            for (int s = 0; s < pp_stages; s++) idle[s] = comm_allreduce_sum_f64(&pp_comm, s == stage ? pipe.wait_s * 1e3 / busy_ms : 0.0);
            int len = snprintf(bubble, sizeof(bubble), " | bubble");
            for (int s = 0; s < pp_stages && len < 400; s++) len += snprintf(bubble + len, sizeof(bubble) - len, "%s%.2f", s ? "/" : " ", idle[s]);
            snprintf(bubble + len, sizeof(bubble) - len, " (1F1B %.2f) | activations in flight %.1f MiB", pp_bubble_formula(pp_stages, A),
                     plan.activations / 1048576.0);
        }
        char scaling[160] = "";
        int scaling_on = scaler.dynamic || step_scale != 1.0f;
        if (skip && scaling_on) snprintf(scaling, sizeof(scaling), " | OVERFLOW: step skipped, loss scale %g -> %g", step_scale, scaler.scale);
        else if (skip) snprintf(scaling, sizeof(scaling), " | OVERFLOW: non-finite gradients, step skipped");
        else if (scaling_on) snprintf(scaling, sizeof(scaling), " | loss scale %g%s", step_scale, scaler.scale != step_scale ? " (doubled)" : "");
        printf0("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %.0f tok/s | %s | peak %s%s%s\n",
                step + 1, cfg.steps, loss, lr, norm, ms, tps, mfu, model_peak_memory(), bubble, scaling);
        if (logf) {
            fprintf(logf, "{\"step\": %d, \"loss\": %.9g, \"lr\": %.9g, \"norm\": ", step + 1, loss, lr);
            if (isfinite(norm)) fprintf(logf, "%.9g", norm); else fprintf(logf, "null");  // JSON has no inf
            fprintf(logf, ", \"ms\": %.3f, \"tokens_per_s\": %.1f, \"flops_per_s\": %.4g, \"mfu\": ", ms, tps, flops);
            if (peak > 0) fprintf(logf, "%.5f", flops / peak); else fprintf(logf, "null");
            fprintf(logf, ", \"peak_rss_mib\": %.1f, \"peak_device_mib\": %.1f", peak_rss_mib(), backend_peak_device_bytes() / 1048576.0);
            if (scaling_on || skip) fprintf(logf, ", \"loss_scale\": %.9g, \"skipped\": %s, \"loss_scale_next\": %.9g",
                                            step_scale, skip ? "true" : "false", scaler.scale);
            if (idle) {
                fprintf(logf, ", \"bubble\": [");
                for (int s = 0; s < pp_stages; s++) fprintf(logf, "%s%.4f", s ? ", " : "", idle[s]);
                fprintf(logf, "], \"bubble_1f1b\": %.4f", pp_bubble_formula(pp_stages, A));
            }
            fprintf(logf, "}\n");
            fflush(logf);
        }

        free(idle);
        int done = step + 1;
        // a signal may reach the ranks at different steps: agree, so all stop after the same one
        stop_requested = comm_allreduce_max_int(&comm, stop_requested);
        int want_ckpt = cfg.out_dir && ((cfg.checkpoint_every > 0 && (done % cfg.checkpoint_every == 0 || done == cfg.steps)) ||
                                        stop_requested);
        if (want_ckpt) {
            char mp[4200], sp[4200], mtmp[4300], stmp[4300];
            checkpoint_paths(cfg.out_dir, done, mp, sp, sizeof(mp));
            snprintf(mtmp, sizeof(mtmp), "%s.tmp", mp);
            snprintf(stmp, sizeof(stmp), "%s.tmp", sp);
            // the files hold the whole model and optimizer state in the single-process layout, so any
            // number of ranks, stages and ZeRO stage can resume from them; each rank writes its shards
            if (rank == 0) {
                int h[256];
                gpt2_model_header(&mc, h);
                ckpt_create(mtmp, h, num_params * sizeof(float));
                TrainState st = {done, B, T, A, dp, cfg.shuffle, cfg.steps, mc.vocab_size, cfg.seed,
                                 train_loader.pos * (uint64_t)dp, sample_rng, num_params, updates, scaler.scale,
                                 scaler.iter, scaler.last_overflow, scaler.hysteresis_left, scaler.skipped};
                state_header(h, &st);
                ckpt_create(stmp, h, 2 * num_params * sizeof(float));
            }
            comm_barrier(&comm);
            int fdm = ckpt_open(mtmp), fds = ckpt_open(stmp);
            zero_write_shards(&zero, fdm, fds, mtmp, stmp, num_params, pp_stages > 1 && stage == pp_stages - 1 ? 0 : -1);
            ckpt_close(fdm, mtmp);
            ckpt_close(fds, stmp);
            comm_barrier(&comm);
            if (rank == 0) {
                ckpt_commit(mtmp, mp);
                ckpt_commit(stmp, sp);  // last: its presence marks the checkpoint complete
                checkpoint_prune(cfg.out_dir, cfg.keep_checkpoints);
                printf("checkpoint: %s\n", sp);
            }
            comm_barrier(&comm);
        }
        if (stop_requested) {
            printf0("stop signal: checkpointed after step %d, exiting\n", done);
            if (!cfg.out_dir) printf0("warning: no -o/--out-dir, so nothing was saved\n");
            break;
        }
    }
    if (timed_steps > 0) {
        double ms = total_ms / timed_steps;
        printf0("average: %.1f ms/step | %.0f tok/s | peak %s\n", ms, cfg.total_batch_tokens / (ms / 1e3), model_peak_memory());
    }
    if (scaler.skipped > 0) printf0("loss scaling: %d step%s skipped for overflow; final scale %g\n", scaler.skipped,
                                    scaler.skipped == 1 ? "" : "s", scaler.scale);
    if (logf) fclose(logf);
    free(gen);
    zero_free(&zero);
    model_free(model);
    free(first);
    free(present);
    dataloader_free(&train_loader);
    if (have_val) dataloader_free(&val_loader);
    if (dec.kind == 1) tokenizer_free(&dec.tok);
    comm_finalize(&comm);
    return 0;
}

#endif
