// trainer.h: the training loop both builds share (train_gpt.c, train_gpt.cu): train_main and the phases of a run
// over one Run struct (run.h): plan, build, then per step evaluate, sample, step, log, checkpoint; and finish.
// It stands on shared headers only: the model through model.h (model_create, model_logits, its memory plan), the
// step's data parallelism and optimizer through zero.h (the optimizer made once from the flags, config.h's
// optimizer_args; each step's learning rates here), the pipeline through pipeline.h, and the device through backend.h's contract, which the build implements (cpu/ or
// cuda/, included before this file). Everything the user sees of a run (flags, files, logs) is decided here once:
// the flags in config.h, the run record and its set-up in run.h, the memory plan in plan.h, what is printed and
// logged in report.h, samples in sample.h, injected faults in fault.h, --autotune in autotune.h, --eval-mc in
// eval_mc.h.
#ifndef TRAINER_H
#define TRAINER_H

#include <signal.h>
#include <time.h>
#include "config.h"
#include "checkpoint.h"
#include "../dataloader.h"
#include "../zero.h"
#include "../pipeline.h"
#include "../base/fault.h"
#include "plan.h"
#include "sample.h"
#include "run.h"
#include "report.h"
#include "eval_mc.h"
#include "autotune.h"
#include "tune_list.h"


// One step's settings: each group's learning rate through the schedule, from its own peak, and the update count.
static OptStep optimizer_step(const TrainConfig *c, const Optimizer *o, int step, int total, int t) {
    OptStep s = {{0}, 1.0f, t};
    for (int g = 0; g < o->groups; g++) {
        TrainConfig k = *c;
        k.lr = o->peak[g];
        s.lr[g] = lr_at(&k, step, total);
    }
    return s;
}

// dev/cuda/emu counts each training step's device calls (TRAIN_GPT_EMU_COUNTS=1); elsewhere these are nothing.
#ifndef STEP_BEGIN
#define STEP_BEGIN(step)
#define STEP_END(step)
#endif

// SIGTERM / SIGUSR1 ask the run to finish its step, checkpoint and exit 0 (slurm's preemption).
static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { (void)sig; stop_requested = 1; }

// ----------------------------------------------------------------------------
// A run, told in phases. Everything a run holds lives in one struct (run.h); train_main below reads as
// the story: set up, resume, plan, build, then for each step evaluate, sample, step, log, checkpoint.
// Every rank runs every phase; only rank 0 prints and writes the log.

// Model FLOPs per token (the step line's MFU): the formula's 6N + 6 L width T, where attention under masks counts the
// pairs it visits (attn_mask_visible_pairs): 6 width (2 keys - 1) per layer, keys the mean visible keys of a query,
// which is the formula's T where attention is causal. Documents make the count the data's: the step's micro-batches'.
static double run_flops_per_token(Run *r, int T) {
    double f = model_flops_per_token(&r->mc_rank, T);
    Model *m = r->model;
    if (!r->any_window && !r->cfg.doc_mask) return f;
    int L = r->mc.num_layers;
    double pairs = 0.0;
    if (r->cfg.doc_mask && m->doc_tokens > 0) pairs = m->doc_pairs / (double)m->doc_tokens;
    else pairs = model_mask_pairs(r->any_window ? r->attn_window : NULL, L, NULL, 1, T) / T;  // a row of one document
    m->doc_pairs = 0.0;
    m->doc_tokens = 0;
    double width = (double)model_shape(&r->mc_rank).attn_flop_width;
    return f + 6.0 * width * (2.0 * pairs - (double)L * (T + 1));
}

// Validation loss: every rank of every pipeline reads the same batches; the last stage computes it.
static float evaluate(Pipeline *pp, DataLoader *val, int batches, int B, int T) {
    dataloader_reset(val);
    double s = 0.0;
    for (int i = 0; i < batches; i++) {
        dataloader_next(val);
        s += pp_forward_only_docs(pp, val->inputs, val->targets, val->doc_start, B, T);
    }
    return (float)(comm_allreduce_sum_f64(pp->group, s) / batches);
}

// The plan: how the layers split over pipeline stages, the memory each rank needs, the run's header
// lines, and the log's first line.
static void run_plan(Run *r) {
    TrainConfig *cfg = &r->cfg;
    const ModelConfig *mc = &r->mc;
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
    r->holds_unit = (int *)callocCheck(model_num_units(mc), sizeof(int));
    PlanLayout mine = run_plan_layout(r);
    plan_stage(&mine, r->first, pp_stages, stage, A, r->holds_unit);
    r->slots = mine.slots;
    // activations: this stage's layers, times the micro-batches it keeps in flight
    r->bucket_bytes = (size_t)(cfg->reduce_bucket_mb * 1048576.0);
    r->offload_params = cfg->offload == OFFLOAD_PARAMS;
    r->offload = r->offload_params || cfg->offload == OFFLOAD_OPTIMIZER;
    r->nvme = cfg->offload_device == OFFLOAD_TO_NVME;
    PlanLayout layout = run_plan_layout(r);
    r->need = plan_need(&layout, run_plan_choice(r), &r->plan);
    report_run_header(r);
    if (cfg->world) { report_stage_plans(r); return; }  // --dry-run --world N: every stage's ranks, not this machine's
    report_memory_plan(&r->plan, cfg->optimizer);
    report_memory_fit(r);
}

// Build: the groups, the model's memory, zero.h's shards with the weights and (on resume) AdamW's
// moments in them, and the loop's own state: data position, sampler, loss scaler.
// The groups of the mesh (tensor_parallel.h): data-parallel ranks share a stage and TP index, a pipeline its
// data-parallel and TP index, a TP group its data-parallel index and stage.
static void run_split_mesh(Run *r) {
    int stage = r->stage, tp = r->tp, tpr = r->tp_rank;
    comm_split(&r->comm, stage * tp + tpr, r->dp_rank, &r->dp_comm);
    comm_split(&r->comm, r->dp_rank * tp + tpr, stage, &r->pp_comm);
    comm_split(&r->comm, r->holds_unit[0] ? r->dp_rank * tp + tpr : r->world + r->rank, stage, &r->tied_comm);
    comm_split(&r->comm, r->rank / tp, tpr, &r->tp_comm);
    TpDims td = model_tp_dims(&r->mc_rank);
    comm_split(&r->comm, (r->rank / tp) * tp + tpr / tp_kv_replicas(&td), tpr, &r->kv_comm);
    // each group's role: --timing charges its calls to an axis by it (comm.h's comm_axis)
    comm_set_role(&r->dp_comm, COMM_ROLE_DP);
    comm_set_role(&r->pp_comm, COMM_ROLE_PIPE);
    comm_set_role(&r->tied_comm, COMM_ROLE_TIED);
    comm_set_role(&r->tp_comm, COMM_ROLE_TP);
    comm_set_role(&r->kv_comm, COMM_ROLE_TP);
}

static void run_build(Run *r) {
    TrainConfig *cfg = &r->cfg;
    int stage = r->stage, dp = r->dp, start_step = r->start_step, tp = r->tp;
    run_split_mesh(r);
    size_t act_before = backend_scratch_allocated();
    r->model = model_create(&r->mc_rank, r->B, r->T, cfg->recompute, r->first[stage], r->first[stage + 1], r->slots,
                            cfg->zero_stage == 3, r->any_window || cfg->doc_mask);
    model_set_masks(r->model, r->any_window ? r->attn_window : NULL, cfg->doc_mask, cfg->doc_rope_restart);
    if (tp > 1) {
        tp_group_init(&r->tpg, &r->mc_rank, &r->tp_comm, &r->kv_comm);
        model_set_tp(r->model, &r->tpg);
    }
    timing.names = model_row_names(&r->mc);  // --profile's rows as the block's choices call them
    const MemoryPlan *plan = &r->plan;
    size_t act_bytes = backend_scratch_allocated() - act_before, planned_act = plan->activations + plan->workspace + plan->working;
    // the samples' key/value cache, once for the run at the length every sample uses (model_kv_reserve says why)
    size_t kv_before = backend_scratch_allocated();
    if (run_sample_tokens(cfg, r->T)) model_kv_reserve(r->model, run_sample_tokens(cfg, r->T));
    size_t kv_bytes = backend_scratch_allocated() - kv_before;
    size_t allocated_before = backend_state_allocated();
    char note[512];
    OptimizerArgs opt_args = optimizer_args(cfg);
    optimizer_create(&r->opt, &opt_args);
    zero_init(&r->zero, &r->dp_comm, cfg->zero_stage, r->model, r->holds_unit, r->bucket_bytes, r->offload, r->offload_params,
              r->nvme ? cfg->nvme_path : NULL, run_nvme_buffer(r), note, sizeof(note), &r->opt);
    if (r->pp_stages > 1 && r->holds_unit[0])  // one end of the model (mc_rank's ends: the outer tensors it holds)
        zero_tie_outer_unit(&r->zero, &r->tied_comm);
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
    size_t model_state = backend_state_allocated() - allocated_before;
    size_t planned_state = plan->params + plan->grads + plan->gathered + plan->optimizer;  // with nvme, AdamW's state is in the swap file
    printf0("allocated per rank: model state %.1f MiB (planned %.1f MiB) | activations and workspace %.1f MiB (planned %.1f MiB)",
            model_state / 1048576.0, planned_state / 1048576.0, act_bytes / 1048576.0, planned_act / 1048576.0);
    if (kv_bytes || plan->kv_cache) printf0(" | kv cache %.1f MiB (planned %.1f MiB)", kv_bytes / 1048576.0, plan->kv_cache / 1048576.0);
    printf0("\n");
    // every rank's figures, for the log: what --dry-run --world plans for each stage's ranks is checked against them
    size_t mine[3] = {model_state, act_bytes, kv_bytes}, *ranks = (size_t *)mallocCheck((size_t)r->world * sizeof(mine));
    comm_allgather_bytes(&r->comm, mine, ranks, sizeof(mine));
    if (r->logf) {
        fprintf(r->logf, "{\"allocated\": {\"model_state_bytes\": %zu, \"planned_model_state_bytes\": %zu, "
                "\"activation_bytes\": %zu, \"planned_activation_bytes\": %zu, \"kv_cache_bytes\": %zu, "
                "\"planned_kv_cache_bytes\": %zu, \"swap_file_bytes\": %zu, \"planned_disk_bytes\": %zu", model_state,
                planned_state, act_bytes, planned_act, kv_bytes, plan->kv_cache, r->nvme ? r->zero.swap.file_bytes : 0, r->need.disk);
        for (int i = 0; i < r->world && r->world > 1; i++)  // [model state, activations and workspace, kv cache] per rank
            fprintf(r->logf, "%s[%zu, %zu, %zu]%s", i ? ", " : ", \"ranks\": [", ranks[3 * i], ranks[3 * i + 1], ranks[3 * i + 2],
                    i == r->world - 1 ? "]" : "");
        fprintf(r->logf, "}}\n");
    }
    free(ranks);
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
// --tp: the TP traffic of what ran outside a step (evaluation, sampling) as the log's "tp_bytes" object.
static void run_log_tp_bytes(Run *r, const double bytes[TP_NUM_KINDS]) {
    if (!r->logf || r->tp <= 1) return;
    fprintf(r->logf, ", \"tp_bytes\": {");
    for (int k = 0; k < TP_NUM_KINDS; k++) fprintf(r->logf, "%s\"%s\": %.0f", k ? ", " : "", TP_KIND_NAMES[k], bytes[k]);
    fprintf(r->logf, "}");
}

static void run_evaluate(Run *r, int step) {
    double tp_bytes[TP_NUM_KINDS];
    tp_bytes_take(r->tp > 1 ? &r->tpg : NULL, tp_bytes);  // the last step's line took its own: nothing since
    float vl = evaluate(&r->pipe, &r->val_loader, r->val_batches, r->B, r->T);
    double floor = r->synth.floor;
    if (r->synthetic) printf0("step %5d | val loss %.4f | floor %.4f | gap %.4f\n", step, vl, floor, vl - floor);
    else printf0("step %5d | val loss %.4f\n", step, vl);
    McScore mc = {0, 0.0, 0.0};
    if (r->cfg.eval_mc) mc = eval_mc_run(&r->pipe, r->cfg.eval_mc, r->B, r->T, r->mc.vocab_size);
    if (mc.n) printf0("step %5d | eval-mc acc_norm %.4f | acc %.4f | %d examples\n", step, mc.acc_norm, mc.acc, mc.n);
    if (r->logf) {
        if (isfinite(vl)) fprintf(r->logf, "{\"step\": %d, \"val_loss\": %.9g", step, vl);
        else fprintf(r->logf, "{\"step\": %d, \"val_loss\": null", step);  // a diverged model's: JSON has no nan
        if (mc.n) fprintf(r->logf, ", \"eval_mc\": {\"acc_norm\": %.9g, \"acc\": %.9g, \"n\": %d}", mc.acc_norm, mc.acc, mc.n);
        if (r->synthetic) fprintf(r->logf, ", \"floor\": %.9g, \"no_attention\": %.9g", floor, r->synth.no_attention);
        tp_bytes_take(r->tp > 1 ? &r->tpg : NULL, tp_bytes);  // the evaluation's (and --eval-mc's) TP traffic
        run_log_tp_bytes(r, tp_bytes);
        fprintf(r->logf, "}\n");
        fflush(r->logf);
    }
}

// Sampling: every rank takes part (the forward needs all stages, and at ZeRO-3 all ranks); the last
// stage draws the token and passes it to the others; rank 0 prints.
// Each new token runs the model on itself alone, against the key/value cache of the ones before it
// (model_decode_*), so n tokens cost n one-token forwards rather than forwards of 1, 2, ..., n tokens.
static void run_sample(Run *r, int step) {
    int n = run_sample_tokens(&r->cfg, r->T);  // the length run_build reserved the cache for
    double tp_bytes[TP_NUM_KINDS];
    tp_bytes_take(r->tp > 1 ? &r->tpg : NULL, tp_bytes);
    int *gen = r->gen, last_stage = r->stage == r->pp_stages - 1;
    gen[0] = decoder_first_token(&r->dec);
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
    if (r->rank == 0) decode_end(&r->dec);
    printf0("\n");
    if (r->logf && r->tp > 1) {  // --tp: the sample's TP traffic in the log (the steps' lines count only theirs)
        tp_bytes_take(&r->tpg, tp_bytes);
        fprintf(r->logf, "{\"step\": %d, \"sample_tokens\": %d", step, n);
        run_log_tp_bytes(r, tp_bytes);
        fprintf(r->logf, "}\n");
        fflush(r->logf);
    }
}

// One optimizer step: the micro-batches through the pipeline, the gradients reduced, the norm, the loss
// scaler's verdict, and the update: issued at once with the device's own verdict where this rank's norm is the
// whole norm, else decided by the host after the step's synchronisation and run then. Returns
// what the step's line reports. Between the first and the last kernel the host never waits for the device: the losses and
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
    fault_step_begin(r->rank, step + 1);
    zero_clear_grads(zero);
    double tp_before[TP_NUM_KINDS];
    tp_bytes_take(r->tp > 1 ? &r->tpg : NULL, tp_before);  // nothing: evaluation and sampling logged theirs
    float dloss = 1.0f / ((float)B * T * A * dp), step_scale = scaler->scale;
    if (fault_overflow(step + 1)) dloss = INFINITY;
    dloss *= step_scale;  // a power of two: every gradient is scaled exactly
    pp_run_step(&r->pipe, &r->train_loader, A, B, T, dloss);
    timing_phase(PH_OTHER);
    double busy_ms = (wall_seconds() - t0) * 1e3;
    fault_stall(r->rank, step + 1);
    zero_reduce_gradients(zero);  // the tied embedding's pair first (zero_tie_outer_unit)
    timing_phase(PH_OPTIMIZER);  // the norm, clipping and the update, as DeepSpeed's "step" counts them
    // each stage sums its own units (each outer tensor at one end), then the pipeline adds the stages up
    zero_grad_sum_squares_start(zero);
    OptStep upd = optimizer_step(cfg, &r->opt, step, r->lr_span, r->updates + 1);
    float lr = upd.lr[0];  // the log's: group 0's (every tensor no other group takes)
    // where this rank's sums are the whole norm, the device decides clipping and skipping itself and the
    // update follows the backward at once; elsewhere it waits for the host's verdict (below)
    int now = pp_stages == 1 && zero_update_on_device(zero);
    if (now) {
        zero_update_verdict(zero, step_scale, cfg->grad_clip);
        zero_update_now(zero, &upd);
    }
    timing_phase(PH_OTHER);
    timing_step_end();  // the CUDA build's one synchronisation: everything the step queued has run
    // the host's collectives on what came back are comm, by the host's clock (a straggler's wait shows here)
    double tail0 = wall_seconds();
    double mine = model_take_loss(r->model);  // only last stages contribute, and of a TP group its first rank
    double loss = comm_allreduce_sum_f64(&r->comm, r->tp_rank == 0 ? mine : 0.0) / ((double)A * dp);
    double ss = zero_grad_sum_squares_finish(zero);
    float norm = (float)sqrt(comm_allreduce_sum_f64(&r->pp_comm, ss)) / step_scale;
    timing_charge(PH_COMM, MOD_NONE, (wall_seconds() - tail0) * 1e3);
    int skip = loss_scaler_update(scaler, !isfinite(norm));
    if (skip < 0) fatal("step %d: the gradients overflow at the minimum loss scale %g (--loss-scale-min); fp16 cannot "
                        "represent this run's gradients (try --precision bf16)", step + 1, step_scale);
    r->bad_in_a_row = skip ? r->bad_in_a_row + 1 : 0;
    if (!scaler->dynamic && r->bad_in_a_row >= 5) fatal("step %d: gradients non-finite for 5 steps in a row: the run has "
                                                        "diverged (lower -l/--lr, or raise --warmup)", step + 1);
    float grad_scale = cfg->grad_clip > 0.0f && norm > cfg->grad_clip ? cfg->grad_clip / (norm + 1e-6f) : 1.0f;
    if (!skip) {
        r->updates++;
        upd.grad_scale = grad_scale / step_scale;
        if (!now) {  // the host's verdict: the update runs here, where the step ends, charged by the host's clock
            double u0 = wall_seconds();
            zero_update(zero, &upd);
            timing_charge(PH_OPTIMIZER, MOD_NONE, (wall_seconds() - u0) * 1e3);
        }
    } else if (now) {
        zero_update_skipped(zero, r->updates);  // the device skipped it too: the same norm, the same test
    }
    STEP_END(step + 1);
    memcpy(s.time_ms, timing.step_ms, sizeof(s.time_ms));
    memcpy(s.comm_ms, timing.comm_ms, sizeof(s.comm_ms));
    memcpy(s.comm_bytes, timing.comm_bytes, sizeof(s.comm_bytes));
    double ms = (wall_seconds() - t0) * 1e3;
    if (timing.profile) { timing.profiled_ms += ms; timing.profiled_steps++; }
    double tps = cfg->total_batch_tokens / (ms / 1e3);
    // model FLOPs per token, as llm.c and PaLM count them: 6N for the matmuls' forward and
    // backward, plus 6*L*C*T for attention; per device: with --tp its slice's (its N, its heads) on the tokens
    // of its data-parallel group
    s.flops = run_flops_per_token(r, T) * tps * r->tp / r->world;
    s.peak = backend_peak_flops();
    if (step > r->start_step) { r->total_ms += ms; r->timed_steps++; }  // the first step warms caches
    // the pipeline's measured bubble: the share of each stage's step spent waiting for a neighbour
    if (pp_stages > 1) {
        s.idle = (double *)callocCheck(pp_stages, sizeof(double));
        for (int k = 0; k < pp_stages; k++)
            s.idle[k] = comm_allreduce_sum_f64(&r->pp_comm, k == stage ? r->pipe.wait_s * 1e3 / busy_ms : 0.0);
    }
    s.disk_read = (double)(sw->bytes_read - rd0); s.disk_written = (double)(sw->bytes_written - wr0);
    s.disk_wait_ms = (sw->wait_s - wait0) * 1e3;
    tp_bytes_take(r->tp > 1 ? &r->tpg : NULL, s.tp_bytes);
    s.loss = loss; s.ms = ms; s.tps = tps; s.lr = lr; s.norm = norm; s.step_scale = step_scale; s.skip = skip;
    return s;
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
        model_file_header(&r->mc, h);
        ckpt_create(mtmp, h, r->num_params * sizeof(float));
        const LossScaler *sc = &r->scaler;
        TrainState st = {done, r->B, r->T, r->A, r->dp, cfg->shuffle, r->lr_span, r->mc.vocab_size, cfg->seed,
                         r->train_loader.pos * (uint64_t)r->dp, r->sample_rng, r->num_params, r->updates, sc->scale,
                         sc->iter, sc->last_overflow, sc->hysteresis_left, sc->skipped, (int)cfg->optimizer,
                         (cfg->doc_mask ? 1 : 0) | (cfg->doc_rope_restart ? 2 : 0), r->doc_sep, 0, {0}};
        attn_masks_record(r->attn_window, r->mc.num_layers, &st);
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
        checkpoint_prune(cfg->out_dir, cfg->keep_checkpoints, done);
        printf("checkpoint: %s and %s\n", mp, sp);
    }
    comm_barrier(&r->comm);
}


// The end: the run's averages and --profile's table, and everything freed (run.h).
static void run_finish(Run *r) {
    report_comm_ranks(r);  // --timing: every rank's communication, one collective
    if (r->cfg.profile) report_profile(r);
    if (r->timed_steps > 0) {
        double ms = r->total_ms / r->timed_steps;
        printf0("average: %.1f ms/step | %.0f tok/s | peak %s\n", ms, r->cfg.total_batch_tokens / (ms / 1e3), model_peak_memory());
    }
    if (r->scaler.skipped > 0) printf0("loss scaling: %d step%s skipped for overflow; final scale %g\n", r->scaler.skipped,
                                       r->scaler.skipped == 1 ? "" : "s", r->scaler.scale);
    run_free(r);
}

static int train_main(int argc, char **argv) {
    openmp_wait_politely(argv);
    static Run run;  // static: zeroed, and too large to want on the stack
    Run *r = &run;
    run_setup(r, argc, argv);
    if (tune_list_wanted(&r->cfg, argc, argv) || r->cfg.autotune) {  // the layouts that fit (--dry-run), or timed
        int rc = r->cfg.dry_run ? tune_list_main(r, argc, argv) : autotune_main(r, argc, argv);
        comm_finalize(&r->comm);
        return rc;
    }
    run_resume(r);
    if (r->cfg.resume && r->start_step >= r->cfg.steps) {
        printf0("resume: the checkpoint is at step %d and -x/--steps is %d: this run is complete, nothing to train (raise "
                "-x/--steps to continue it)\n", r->start_step, r->cfg.steps);
        comm_finalize(&r->comm);
        return 0;
    }
    if (r->cfg.eval_mc) eval_mc_load(r->cfg.eval_mc, r->mc.vocab_size, r->T);  // a bad file stops the run before step 0
    run_plan(r);
    if (r->cfg.dry_run) {
        if (r->cfg.tokens_per_s > 0)  // the length of the training the user has in mind, at a speed they measured
            printf0("target: %.3g tokens at %.0f tokens/s on %d device%s: %.1f days\n", (double)r->cfg.target_tokens,
                    r->cfg.tokens_per_s, r->world, r->world == 1 ? "" : "s", r->cfg.target_tokens / r->cfg.tokens_per_s / 86400.0);
        if (r->logf) fclose(r->logf);
        comm_finalize(&r->comm);
        return 0;
    }
    run_load_weights(r);
    run_build(r);
    const TrainConfig *cfg = &r->cfg;
    for (int step = r->start_step; step <= cfg->steps; step++) {
        int last = step == cfg->steps;
        if (r->have_val && cfg->val_every > 0 && (step % cfg->val_every == 0 || last)) run_evaluate(r, step);
        if (cfg->sample_every > 0 && step > 0 && (step % cfg->sample_every == 0 || last)) run_sample(r, step);
        if (last) break;
        StepResult s = run_step(r, step);
        s.eta_s = report_eta(r, step, s.ms);
        report_step(r, step, &s);
        if (cfg->timing) report_comm_add(r, s.comm_bytes);
        free(s.idle);
        int done = step + 1;
        // a signal may reach the ranks at different steps: agree, so all stop after the same one
        stop_requested = comm_allreduce_max_int(&r->comm, stop_requested);
        // with -o the run's end is always saved (a run that trained and kept nothing is never what was meant);
        // -n adds the periodic ones
        if (cfg->out_dir && ((cfg->checkpoint_every > 0 && done % cfg->checkpoint_every == 0) || done == cfg->steps ||
                             stop_requested)) run_checkpoint(r, done);
        if (stop_requested) {
            printf0("stop signal: checkpointed after step %d, exiting\n", done);
            if (!cfg->out_dir) printf0("warning: no -o/--out-dir, so nothing was saved\n");
            break;
        }
    }
    run_keep_out_dir();  // the run completed: an out dir it made stays, even if nothing was written there
    run_finish(r);
    return 0;
}

#endif
