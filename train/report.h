// report.h: what a run tells the user, on the console (rank 0) and in the JSON-lines log (--log). It
// serves trainer.h's phases: the memory plan and whether it fits the machine, the placement of ranks on
// nodes, each step's line (loss, speed, MFU, memory, ETA, disk traffic, pipeline bubble, loss scaling)
// with --timing's breakdown and its JSON line, and --profile's table of modules at the end. It decides
// nothing: every figure it prints was computed by the loop (StepResult) or the plan.
#ifndef REPORT_H
#define REPORT_H

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include "run.h"
#include "../backend/timing.h"

// What one optimizer step produced, for the step's line and the log.
typedef struct {
    double loss, ms, tps, flops, peak;
    float lr, norm, step_scale;
    int skip;
    double *idle;                            // per-stage idle fraction (pipelines only), else NULL
    double eta_s;                            // the run's time left at its pace so far
    double time_ms[NUM_PHASES];              // where the step's time went (timing.h): data, forward, ...
    double comm_ms[NUM_AXES], comm_bytes[NUM_AXES];  // comm's part by axis (TP, the pipeline's sends and waits, ...), and its bytes
    double disk_read, disk_written, disk_wait_ms;  // --offload-device nvme: the step's swap traffic, and time blocked on it
    double tp_bytes[TP_NUM_KINDS];           // --tp: this rank's TP collectives' bytes this step, by kind (tensor_parallel.h)
} StepResult;

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

// The optimizer's state by its name: AdamW's moments, Muon's momentum on the blocks' matrices beside AdamW's moments on
// the rest, or Adafactor's factored second moments (the plan counts what each optimizer's plan says, optim/).
static const char *report_optimizer_state(OptimizerKind k) {
    return k == OPTIMIZER_MUON ? "Muon + AdamW state" : k == OPTIMIZER_ADAFACTOR ? "Adafactor state" : "AdamW state";
}

static void report_memory_plan(const MemoryPlan *mp, OptimizerKind opt) {
    double mib = 1048576.0;
    printf0("memory plan per rank: params %.1f MiB | grads %.1f MiB | %s %.1f MiB%s | ", mp->params / mib,
            mp->grads / mib, report_optimizer_state(opt), mp->optimizer / mib,
            mp->optimizer_on_host ? " (host: moments, master copy, gradient staging)" : "");
    if (mp->gathered) printf0("ZeRO working set %.1f MiB (whole units gathered and gradients reduced) | ", mp->gathered / mib);
    if (mp->working) printf0("working weights %.1f MiB | ", mp->working / mib);
    printf0("activations %.1f MiB | workspace %.1f MiB | ", mp->activations / mib, mp->workspace / mib);
    if (mp->kv_cache) printf0("kv cache %.1f MiB | ", mp->kv_cache / mib);  // the samples' (-s, -g); none without them
    printf0("total %.1f MiB\n", (mp->params + mp->grads + mp->gathered + mp->optimizer + mp->working + mp->activations + mp->workspace +
                                  mp->kv_cache) / mib);
}

// The plan against the machine: device, host RAM and disk per rank beside what there is, and when it
// does not fit, the first configuration that would (plan.h's advice); then the log's memory_plan line.
static void report_memory_fit(const Run *r) {
    const TrainConfig *cfg = &r->cfg;
    const double gib = 1073741824.0;
    MachineCapacity m = machine_capacity(cfg->mem_limit, cfg->nvme_path, run_local_ranks(r));
    const PlanNeed *n = &r->need;
    char dev[64] = "";
    if (!m.device_is_host) snprintf(dev, sizeof(dev), "%.2f GiB on the device (of %.2f) | ", n->device / gib, m.device / gib);
    else snprintf(dev, sizeof(dev), "%.2f GiB device state (host memory in this build) | ", n->device / gib);
    char disk[160] = "no disk";
    if (r->nvme) snprintf(disk, sizeof(disk), "%.2f GiB disk under %s (free %.2f per rank)", n->disk / gib, cfg->nvme_path, m.disk / gib);
    int fits = plan_fits(n, &m);
    if (m.ram > 0)
        printf0("memory per rank: %shost RAM %.2f GiB (available %.2f per rank%s, %d rank%s on this node) | %s: %s\n", dev, n->host / gib,
                m.ram / gib, cfg->mem_limit > 0 && m.device_is_host ? ": --mem-limit" : ": MemAvailable + this process's own", m.local_ranks,
                m.local_ranks == 1 ? "" : "s", disk, fits ? "fits" : "does not fit");
    else printf0("memory per rank: %shost RAM %.2f GiB (the GPU node's, not checked) | %s: %s\n", dev, n->host / gib, disk,
                 fits ? "fits" : "does not fit");
    char advice[512] = "";
    PlanChoice c;
    PlanNeed cn;
    PlanLayout layout = run_plan_layout(r);
    if (!fits && plan_advise(&layout, r->pp_stages, run_plan_choice(r), &m, cfg->nvme_path != NULL, &c, &cn)) {
        int len = snprintf(advice, sizeof(advice), "-z %d --offload %s", c.zero, OFFLOAD_NAMES[c.offload_params ? 2 : c.offload]);
        if (c.nvme) snprintf(advice + len, sizeof(advice) - len, " --offload-device nvme --nvme-path %s", cfg->nvme_path ? cfg->nvme_path : "DIR");
        printf0("memory: this configuration does not fit; it would with %s: %.2f GiB device state | host RAM %.2f GiB | disk %.2f GiB%s\n",
                advice, cn.device / gib, cn.host / gib, cn.disk / gib, c.nvme && !cfg->nvme_path ? " (DIR: a directory on a local disk with that much free)" : "");
    } else if (!fits) {
        printf0("memory: this configuration does not fit, and no ZeRO stage or offload makes it fit this layout; use more ranks, "
                "--pp, a smaller -b/--micro-batch or -r 3\n");
    }
    if (!r->logf || r->start_step != 0) return;
    const MemoryPlan *plan = &r->plan;
    fprintf(r->logf, "{\"memory_plan\": {\"world\": %d, \"zero_stage\": %d, \"params_bytes\": %zu, \"grads_bytes\": %zu, "
            "\"optimizer_bytes\": %zu, \"gathered_bytes\": %zu, \"working_weights_bytes\": %zu, \"activations_bytes\": %zu, \"workspace_bytes\": %zu, "
            "\"kv_cache_bytes\": %zu, \"device_bytes\": %zu, \"host_bytes\": %zu, \"disk_bytes\": %zu, \"ram_per_rank_bytes\": %.0f, "
            "\"disk_free_per_rank_bytes\": %.0f, \"device_capacity_bytes\": %.0f, \"fits\": %s, \"advice\": ",
            r->world, cfg->zero_stage, plan->params, plan->grads, plan->optimizer, plan->gathered, plan->working, plan->activations,
            plan->workspace, plan->kv_cache, r->need.device, r->need.host, r->need.disk, m.ram, m.disk, m.device, fits ? "true" : "false");
    if (advice[0]) fprintf(r->logf, "\"%s\"}}\n", advice); else fprintf(r->logf, "null}}\n");
    fflush(r->logf);
}

// --dry-run --world N, a stage that does not fit: the cheapest change that does (plan_advise_stage), planned for the TP
// rank that needs the most (mc), or the layout's own levers when none does.
static void report_stage_advice(const Run *r, PlanLayout *l, ModelConfig mc, double limit, int on_host) {
    const double gib = 1073741824.0;
    char text[160];
    PlanNeed n;
    l->mc = &mc;
    if (plan_advise_stage(l, r->pp_stages, run_plan_choice(r), limit, on_host, text, sizeof(text), &n))
        printf0("  advice: it fits with %s: %.2f GiB device state | host RAM %.2f GiB | disk %.2f GiB\n", text, n.device / gib,
                n.host / gib, n.disk / gib);
    else printf0("  advice: no ZeRO stage, recompute level, micro-batch or offload makes this stage fit; use more ranks, a "
                 "higher --tp (within a node) or --pp\n");
}

// The outer tensors a stage holds, as its plan line names them (mc: the stage's config; its ends say which end).
static void report_stage_outer(const ModelConfig *mc, int holds, char *buf, size_t n) {
    buf[0] = '\0';
    if (!holds) return;
    int in = mc->ends != ARCH_END_OUTPUT, out = mc->ends != ARCH_END_INPUT;
    snprintf(buf, n, " +%s%s%s%s%s", in ? " embedding" : "", in && mc->positions == POS_LEARNED ? ", positions" : "",
             in && out ? "," : "", out ? " final norm, head" : "", out && !in && mc->tied ? " (the tied embedding)" : "");
}

// --dry-run --world N: the plan of every pipeline stage's ranks, computed here as those ranks compute their own
// (run_plan): the stage's layers and micro-batches in flight, the TP rank's slice of the model (each TP rank's,
// the largest kept: the slices are the same sizes), its state sharded by ZeRO over the data-parallel group. The
// machine this runs on is not the layout's: each stage is checked against --mem-limit (GiB per rank) when given.
static void report_stage_plans(const Run *r) {
    const TrainConfig *cfg = &r->cfg;
    const double gib = 1073741824.0;
    int pp = r->pp_stages, per_stage = r->tp * r->dp, nu = model_num_units(&r->mc), all_fit = 1;
    int *holds = (int *)mallocCheck(nu * sizeof(int));
    // each stage against --mem-limit, else --gpu's card (its device memory only: the node's RAM is not known here)
    const GpuSpec *g = plan_target.gpu;
    double limit = cfg->mem_limit > 0 ? cfg->mem_limit * gib : g ? g->gib * gib : 0;
    int on_host = backend_memory_is_host() && !g;
    char against[96];
    if (cfg->mem_limit > 0) snprintf(against, sizeof(against), "--mem-limit %g GiB", cfg->mem_limit);
    else if (g) snprintf(against, sizeof(against), "an %s's %.0f GiB", g->key, g->gib);
    for (int s = 0; s < pp; s++) {
        PlanLayout l = run_plan_layout(r);
        MemoryPlan mp = {0};
        PlanNeed need = {0, 0, 0};
        ModelConfig mc = r->mc_rank;
        mc.ends = pp_stage_ends(s, pp);  // the outer tensors stage s holds
        for (int t = 0; t < r->tp; t++) {  // each TP rank's slice as that rank would plan it
            ModelConfig mt = mc;
            mt.tp_rank = t;
            l.mc = &mt;
            plan_stage(&l, r->first, pp, s, r->A, holds);
            MemoryPlan m;
            PlanNeed n = plan_need(&l, run_plan_choice(r), &m);
            if (t == 0 || n.device + n.host > need.device + need.host) { need = n; mp = m; mc = mt; }
        }
        size_t count = 0;  // the parameters of the stage's slice a rank holds, before ZeRO shards their state
        for (int u = 0; u < nu; u++) count += zero_unit_size(&mc, u, holds);
        char outer[96];
        report_stage_outer(&mc, holds[0], outer, sizeof(outer));
        printf0("stage %d of %d: ranks %d-%d (tp %d x dp %d) | layers %d-%d%s | %d micro-batch%s in flight | %zu parameters per "
                "rank\n  ", s, pp, s * per_stage, (s + 1) * per_stage - 1, r->tp, r->dp, r->first[s], r->first[s + 1] - 1,
                outer, l.slots, l.slots == 1 ? "" : "es", count);
        report_memory_plan(&mp, cfg->optimizer);
        int fits = limit <= 0 || (double)need.device + (on_host ? need.host : 0) <= limit;
        all_fit &= fits;
        if (limit > 0) printf0("  %.2f GiB device state | host RAM %.2f GiB | disk %.2f GiB: %s %s\n", need.device / gib,
                               need.host / gib, need.disk / gib, fits ? "fits" : "does not fit", against);
        if (!fits) report_stage_advice(r, &l, mc, limit, on_host);
        if (!r->logf) continue;
        fprintf(r->logf, "{\"stage_plan\": {\"world\": %d, \"stage\": %d, \"first_rank\": %d, \"last_rank\": %d, \"first_layer\": %d, "
                "\"last_layer\": %d, \"slots\": %d, \"params\": %zu, \"params_bytes\": %zu, \"grads_bytes\": %zu, "
                "\"optimizer_bytes\": %zu, \"gathered_bytes\": %zu, \"working_weights_bytes\": %zu, \"activations_bytes\": %zu, \"workspace_bytes\": %zu, "
                "\"kv_cache_bytes\": %zu, \"model_state_bytes\": %zu, \"activation_bytes\": %zu, \"device_bytes\": %zu, "
                "\"host_bytes\": %zu, \"disk_bytes\": %zu}}\n", r->world, s, s * per_stage, (s + 1) * per_stage - 1, r->first[s],
                r->first[s + 1] - 1, l.slots, count, mp.params, mp.grads, mp.optimizer, mp.gathered, mp.working, mp.activations, mp.workspace,
                mp.kv_cache, mp.params + mp.grads + mp.gathered + mp.optimizer, mp.activations + mp.workspace + mp.working, need.device,
                need.host, need.disk);
    }
    free(holds);
    if (limit <= 0) printf0("memory: planned for a layout of %d rank%s, not started; this machine is not checked (give --gpu "
                            "NAME or --mem-limit GiB per rank to check each stage against a device)\n", r->world,
                            r->world == 1 ? "" : "s");
    else if (!all_fit) printf0("memory: a stage does not fit %s per rank\n", against);
    if (r->logf) fflush(r->logf);
}

// Whose memory the plan counts (backend/target.h): a card named by --gpu, or this build's own, said plainly where a
// reader could take a CPU plan for a GPU's.
static void report_plan_target(const TrainConfig *cfg) {
    const GpuSpec *g = plan_target.gpu;
    if (g && plan_target.cuda_facts)
        printf0("plan: what the CUDA build (./train_gpt) would allocate on an %s (%.0f GiB, --gpu %s) at --precision %s: "
                "%s, attention keeping a row's logsumexp (flash), not T x T scores; this %s build runs nothing\n", g->name, g->gib,
                g->key, PRECISION_NAMES[cfg->precision], plan_target.weights_copy ? "fp32 master weights and their working copies"
                : "fp32 weights", backend_build_name());
    else if (g) printf0("plan: this build's, checked against an %s (%.0f GiB, --gpu %s), not the device it runs on\n", g->name, g->gib, g->key);
    else if (cfg->dry_run && backend_memory_is_host())
        printf0("plan: this %s build's own memory (fp32; attention keeps T x T scores), not a GPU's: --gpu NAME (h100, h200, "
                "a100-80, ...) plans what the CUDA build would allocate on that card\n", backend_build_name());
}

// The placement line: which node each rank runs on, with its stage and data-parallel index, and how the
// groups fall on the nodes (a data-parallel group inside one node keeps the gradient reduction off the
// network; a pipeline boundary between nodes moves one micro-batch's activations per send).
static void report_placement(const Run *r) {
    if (r->world == 1 || r->rank != 0) return;
    if (r->cfg.world) {  // --world N: planned, not started; the mesh alone
        printf("placement: planned, not started: rank = tp index + %d * (dp index + %d * stage): TP groups of %d consecutive ranks; "
               "stage s holds ranks %d * s to %d * s + %d\n", r->tp, r->dp, r->tp, r->tp * r->dp, r->tp * r->dp, r->tp * r->dp - 1);
        return;
    }
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
            TpMesh at = tp_mesh(i, r->tp, r->dp, r->pp_stages);
            if (r->tp > 1) printf("%s rank %d (stage %d, dp %d, tp %d)", first ? "" : ",", i, at.stage, at.dp_rank, at.tp_rank);
            else printf("%s rank %d (stage %d, dp %d)", first ? "" : ",", i, at.stage, at.dp_rank);
            first = 0;
        }
        fputs(n + 1 < nodes ? " |" : "\n", stdout);
    }
    // rank = tp index + tp * (dp index + dp * stage) (tensor_parallel.h's mesh)
    TpMesh mesh = tp_mesh(0, r->tp, r->dp, r->pp_stages);
    int dp_across = 0, hops = 0, hops_across = 0, tp_across = 0, groups = r->pp_stages * r->tp;
    for (int s = 0; s < r->pp_stages; s++)
        for (int t = 0; t < r->tp; t++) {
            for (int d = 1; d < r->dp; d++)
                if (node_of[tp_mesh_rank(&mesh, t, d, s)] != node_of[tp_mesh_rank(&mesh, t, 0, s)]) { dp_across++; break; }
            for (int d = 0; d < r->dp && s + 1 < r->pp_stages; d++) {
                hops++;
                hops_across += node_of[tp_mesh_rank(&mesh, t, d, s)] != node_of[tp_mesh_rank(&mesh, t, d, s + 1)];
            }
        }
    for (int s = 0; s < r->pp_stages; s++)
        for (int d = 0; d < r->dp; d++)
            for (int t = 1; t < r->tp; t++)
                if (node_of[tp_mesh_rank(&mesh, t, d, s)] != node_of[tp_mesh_rank(&mesh, 0, d, s)]) { tp_across++; break; }
    if (nodes > 1) printf("placement: data-parallel groups spanning nodes: %d of %d | pipeline hops between nodes: %d of %d%s",
                          dp_across, groups, hops_across, hops, r->tp > 1 ? "" : "\n");
    if (nodes > 1 && r->tp > 1) printf(" | tensor-parallel groups spanning nodes: %d of %d (keep them in a node)\n", tp_across,
                                       r->pp_stages * r->dp);
    free(node_of);
}

// The run's header: the build, device, world, layout and precision; the placement; the pipeline's split;
// the model, the batch and the data.
static void report_run_header(const Run *r) {
    const TrainConfig *cfg = &r->cfg;
    const ModelConfig *mc = &r->mc;
    int pp_stages = r->pp_stages, A = r->A;
    char scale[32];
    if (cfg->loss_scale == LOSS_SCALE_FIXED) snprintf(scale, sizeof(scale), "%g", cfg->loss_scale_fixed);
    else snprintf(scale, sizeof(scale), "%s", LOSS_SCALE_NAMES[cfg->loss_scale]);
    char where[64] = "";
    if (r->nvme) snprintf(where, sizeof(where), " to nvme");
    char tp[64] = "";
    if (r->tp > 1) snprintf(tp, sizeof(tp), "tensor-parallel %d (sequence parallel %s) x ", r->tp, cfg->sp ? "on" : "off");
    printf0("train_gpt (%s build) on %s | world %d = %sdata-parallel %d x pipeline %d | ZeRO stage %d | offload %s%s | "
            "precision %s%s | loss scale %s\n", backend_build_name(), backend_device_name(), r->world, tp, r->dp, pp_stages, cfg->zero_stage,
            OFFLOAD_NAMES[cfg->offload], where, PRECISION_NAMES[cfg->precision], cfg->tf32 ? " (TF32 matmuls)" : "", scale);
    report_placement(r);
    report_plan_target(cfg);
    if (cfg->optimizer == OPTIMIZER_MUON) {
        char muon[1024], adamw[1024];
        muon_owner_text(mc, muon, adamw, sizeof(muon));
        printf0("optimizer: muon on each layer's %s (momentum %g%s, %d Newton-Schulz steps, lr %g adjusted by %s) | adamw "
                "on %s\n", muon, cfg->muon_momentum, cfg->muon_nesterov ? " Nesterov" : "", cfg->muon_ns_steps,
                cfg->muon_lr > 0 ? cfg->muon_lr : cfg->lr, MUON_LR_ADJUST_NAMES[cfg->muon_lr_adjust], adamw);
        printf0("optimizer: Newton-Schulz %.4g GFLOP per step over all ranks, beside the model's %.4g (6N + attention, "
                "%ld tokens)\n", muon_step_flops(mc, cfg->muon_ns_steps) / 1e9,
                model_flops_per_token(mc, r->T) * (double)cfg->total_batch_tokens / 1e9, cfg->total_batch_tokens);
        if (r->logf && r->start_step == 0)
            fprintf(r->logf, "{\"optimizer\": {\"muon\": \"%s\", \"adamw\": \"%s\", \"muon_lr\": %.9g, \"muon_momentum\": %.9g, "
                    "\"muon_nesterov\": %d, \"muon_ns_steps\": %d, \"muon_lr_adjust\": \"%s\"}}\n", muon, adamw,
                    cfg->muon_lr > 0 ? cfg->muon_lr : cfg->lr, cfg->muon_momentum, cfg->muon_nesterov, cfg->muon_ns_steps,
                    MUON_LR_ADJUST_NAMES[cfg->muon_lr_adjust]);
    }
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
    char shape[512], note[128];
    model_shape_text(mc, shape, sizeof(shape));
    model_count_note(mc, note, sizeof(note));
    printf0("model: %s | %s | V %d (padded %d) | maxT %d | %zu parameters%s\n", r->init, shape, mc->vocab_size,
            mc->padded_vocab_size, mc->max_seq_len, r->num_params, note);
    printf0("batch: micro-batch %d x seq %d x accumulation %d x data-parallel %d = %ld tokens per step | recompute %d\n",
           r->B, r->T, A, r->dp, cfg->total_batch_tokens, cfg->recompute);
    if (cfg->dry_run && r->synthetic && r->num_params >= 100000000 && cfg->total_batch_tokens < 65536 && r->T < mc->max_seq_len) {
        int T = mc->max_seq_len < 8192 ? mc->max_seq_len : 8192;  // a pretraining length, within the model's
        printf0("note: this plans the built-in corpus's tiny batch (%ld tokens per step at -t %d), not a training run of this "
                "model; a real batch: -b 1 -t %d -d %d (%d sequences per step; the accumulation follows from the ranks) with "
                "-i/--train-data your shards\n", cfg->total_batch_tokens, r->T, T, 524288 / T * T, 524288 / T);
    }
    if (cfg->zero_stage > 0 && r->dp == 1 && !r->offload_params)  // --offload params at -z 3 moves the master off the device
        printf0("warning: -z %d with one data-parallel rank: nothing to shard, the one rank's shard is the whole state (ZeRO "
                "divides params, grads and optimizer state over the data-parallel ranks: world / (tp x pp))\n", cfg->zero_stage);
    printf0("data: %s (%d shard%s, %ld micro-batches per epoch)%s%s\n", r->synthetic ? "synthetic corpus" : cfg->train_data,
           r->train_loader.nshards, r->train_loader.nshards == 1 ? "" : "s", r->train_loader.windows_per_epoch,
           r->have_val ? " | val: " : " | no validation data", r->have_val ? (r->synthetic ? "synthetic" : cfg->val_data) : "");
    if (r->any_window || cfg->doc_mask) {  // attention's masks (attn_masks.h); none: causal, and no line
        char masks[512];
        attn_masks_text(cfg, r->attn_window, r->mc.num_layers, r->doc_sep, masks, sizeof(masks));
        printf0("attention: causal + %s | FLOPs and MFU count the visible pairs%s\n", masks,
                cfg->doc_mask ? " (the documents' own: each step's data)" : "");
    }
    if (r->synthetic) printf0("synthetic corpus: a Markov chain over %d symbols; after a '.', the document's first token "
                              "again (%.1f%% of targets; only attention reaches back for it) | entropy floor %.4f nats/token, the "
                              "best possible loss; without attention %.4f at best\n", SYNTH_SYMBOLS, 100.0 * r->synth.copied,
                              r->synth.floor, r->synth.no_attention);
    if (cfg->out_dir && cfg->checkpoint_every > 0)
        printf0("checkpoints: %s every %d steps and after step %d (the newest %d kept)\n", cfg->out_dir, cfg->checkpoint_every,
                cfg->steps, cfg->keep_checkpoints);
    else if (cfg->out_dir)
        printf0("checkpoints: %s after step %d only (and on SIGTERM/SIGUSR1); -n/--checkpoint-every is 0, so nothing periodic "
                "is written\n", cfg->out_dir, cfg->steps);
    else printf0("checkpoints: none (no -o/--out-dir: nothing of this run is saved)\n");
    if (cfg->steps < cfg->warmup)
        printf0("note: -x/--steps %d is shorter than the -u/--warmup of %d steps: the learning rate climbs to %.3e and never "
                "reaches its peak -l/--lr %.3e (lower -u/--warmup to reach it)\n", cfg->steps, cfg->warmup,
                lr_at(cfg, cfg->steps - 1 > 0 ? cfg->steps - 1 : 0, r->lr_span), cfg->lr);
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
static double report_eta(Run *r, int step, double step_ms) {
    double now = wall_seconds();
    int left = r->cfg.steps - step - 1;
    if (r->eta_t0 == 0.0 || step + 1 <= r->eta_step0) { r->eta_t0 = now; r->eta_step0 = step + 1; return left * step_ms / 1e3; }
    return left * (now - r->eta_t0) / (step + 1 - r->eta_step0);
}

// The step's line on the console and its JSON line in the log.
static void report_step(Run *r, int step, const StepResult *s) {
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
    // --print-every N: every Nth step's line, and always the run's first and last and any skipped step
    int shown = (step + 1) % cfg->print_every == 0 || step == r->start_step || step + 1 == cfg->steps || s->skip;
    if (shown) printf0("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %.0f tok/s | %s | peak %s | ETA %s%s%s%s\n",
                       step + 1, cfg->steps, s->loss, s->lr, s->norm, s->ms, s->tps, mfu, model_peak_memory(), eta, disk, bubble, scaling);
    if (cfg->timing && shown) {  // --timing: the breakdown below the step's line
        printf0("  time ms:");
        for (int k = 0; k < NUM_PHASES; k++) printf0(" %s %.1f%s", PHASE_NAMES[k], s->time_ms[k], k < NUM_PHASES - 1 ? " |" : "");
        printf0(" (sum %.1f of %.1f)\n", timing_sum(s->time_ms), s->ms);
        if (r->world > 1) {  // comm by axis: its time and the bytes its calls moved on this rank
            double sum = 0.0;
            printf0("  comm ms:");
            for (int k = 0; k < NUM_AXES; k++) {
                printf0(" %s %.1f (%.0f B)%s", AXIS_NAMES[k], s->comm_ms[k], s->comm_bytes[k], k < NUM_AXES - 1 ? " |" : "");
                sum += s->comm_ms[k];
            }
            printf0(" (sum %.1f of comm %.1f)\n", sum, s->time_ms[PH_COMM]);
        }
        if (r->tp > 1) {
            printf0("  tp bytes:");
            for (int k = 0; k < TP_NUM_KINDS; k++) printf0(" %s %.0f%s", TP_KIND_NAMES[k], s->tp_bytes[k], k < TP_NUM_KINDS - 1 ? " |" : "\n");
        }
    }
    FILE *logf = r->logf;
    if (!logf) return;
    fprintf(logf, "{\"step\": %d, \"loss\": ", step + 1);
    if (isfinite(s->loss)) fprintf(logf, "%.9g", s->loss); else fprintf(logf, "null");  // JSON has no nan or inf
    fprintf(logf, ", \"lr\": %.9g, \"norm\": ", s->lr);
    if (isfinite(s->norm)) fprintf(logf, "%.9g", s->norm); else fprintf(logf, "null");  // JSON has no inf
    fprintf(logf, ", \"ms\": %.3f, \"tokens_per_s\": %.1f, \"flops_per_s\": %.4g, \"mfu\": ", s->ms, s->tps, s->flops);
    if (s->peak > 0) fprintf(logf, "%.5f", s->flops / s->peak); else fprintf(logf, "null");
    fprintf(logf, ", \"peak_rss_mib\": %.1f, \"peak_device_mib\": %.1f", peak_rss_mib(), backend_peak_device_bytes() / 1048576.0);
    if (scaling_on || s->skip) fprintf(logf, ", \"loss_scale\": %.9g, \"skipped\": %s, \"loss_scale_next\": %.9g",
                                       step_scale, s->skip ? "true" : "false", scaler->scale);
    fprintf(logf, ", \"eta_s\": %.3f, \"time_ms\": {", s->eta_s);
    for (int k = 0; k < NUM_PHASES; k++) fprintf(logf, "%s\"%s\": %.3f", k ? ", " : "", PHASE_NAMES[k], s->time_ms[k]);
    fprintf(logf, "}");
    if (r->world > 1) {  // comm by axis (they add up to time_ms's comm) and the bytes each axis moved on rank 0
        fprintf(logf, ", \"comm_ms\": {");
        for (int k = 0; k < NUM_AXES; k++) fprintf(logf, "%s\"%s\": %.3f", k ? ", " : "", AXIS_NAMES[k], s->comm_ms[k]);
        fprintf(logf, "}, \"comm_bytes\": {");
        for (int k = 0; k < NUM_AXES; k++) fprintf(logf, "%s\"%s\": %.0f", k ? ", " : "", AXIS_NAMES[k], s->comm_bytes[k]);
        fprintf(logf, "}");
    }
    // rank 0's swap traffic this step; the wait is part of the phases above (the optimizer's, mostly)
    if (r->nvme) fprintf(logf, ", \"nvme\": {\"read_bytes\": %.0f, \"write_bytes\": %.0f, \"wait_ms\": %.3f}", s->disk_read,
                         s->disk_written, s->disk_wait_ms);
    if (r->tp > 1) {  // rank 0's TP traffic this step
        fprintf(logf, ", \"tp_bytes\": {");
        for (int k = 0; k < TP_NUM_KINDS; k++) fprintf(logf, "%s\"%s\": %.0f", k ? ", " : "", TP_KIND_NAMES[k], s->tp_bytes[k]);
        fprintf(logf, "}");
    }
    if (s->idle) {
        fprintf(logf, ", \"bubble\": [");
        for (int k = 0; k < pp_stages; k++) fprintf(logf, "%s%.4f", k ? ", " : "", s->idle[k]);
        fprintf(logf, "], \"bubble_1f1b\": %.4f", pp_bubble_formula(pp_stages, A));
    }
    fprintf(logf, "}\n");
    fflush(logf);
}

// --timing: a step's bytes by axis added to this rank's totals, and whether they are the first step's.
static void report_comm_add(Run *r, const double bytes[NUM_AXES]) {
    int unlike = 0;
    for (int k = 0; k < NUM_AXES; k++) {
        if (r->comm_steps == 0) r->comm_first[k] = bytes[k];
        unlike |= bytes[k] != r->comm_first[k];
        r->comm_total[k] += bytes[k];
    }
    r->comm_steps++;
    r->comm_unlike += unlike;
}

// --timing with several ranks, at the run's end: every rank's bytes by axis (rank 0's steps log only its own), gathered
// once, so that each stage's traffic (the output end's tied-embedding receive, its --sp gathers) can be held to the
// count train/comm_count.h lists; logged as every rank's totals over the steps (and its steps unlike its first), on
// the console one line per stage: each axis's bytes per step, or the stage's ranks' range where they differ.
static void report_comm_ranks(Run *r) {
    if (!r->cfg.timing || r->world <= 1 || r->comm_steps == 0) return;
    double mine[NUM_AXES + 1], *all = (double *)mallocCheck((size_t)r->world * sizeof(mine));
    memcpy(mine, r->comm_total, sizeof(r->comm_total));
    mine[NUM_AXES] = r->comm_unlike;
    comm_allgather_bytes(&r->comm, mine, all, sizeof(mine));  // every rank ran the same steps: the loop agrees on a stop
    int per_stage = r->tp * r->dp, n = r->comm_steps, unlike = 0;
    for (int i = 0; i < r->world; i++) unlike += all[i * (NUM_AXES + 1) + NUM_AXES] > 0;
    printf0("comm bytes per step by stage (every rank's counters over %d step%s; %s):\n", n, n == 1 ? "" : "s",
            unlike ? "some ranks' steps differ, their mean shown" : "every step the same on every rank");
    for (int st = 0; st < r->pp_stages; st++) {
        if (per_stage == 1) printf0("  stage %d (rank %d):", st, st);
        else printf0("  stage %d (ranks %d-%d):", st, st * per_stage, (st + 1) * per_stage - 1);
        for (int k = 0; k < NUM_AXES; k++) {
            double lo = INFINITY, hi = -INFINITY;
            for (int i = st * per_stage; i < (st + 1) * per_stage; i++) {
                lo = fmin(lo, all[i * (NUM_AXES + 1) + k] / n);
                hi = fmax(hi, all[i * (NUM_AXES + 1) + k] / n);
            }
            if (lo == hi) printf0(" %s %.0f%s", AXIS_NAMES[k], lo, k < NUM_AXES - 1 ? " |" : "\n");
            else printf0(" %s %.0f-%.0f (its ranks differ)%s", AXIS_NAMES[k], lo, hi, k < NUM_AXES - 1 ? " |" : "\n");
        }
    }
    if (r->logf) {
        fprintf(r->logf, "{\"comm_bytes_ranks\": [");
        for (int i = 0; i < r->world; i++)
            for (int k = 0; k < NUM_AXES; k++)
                fprintf(r->logf, "%s\"%s\": %.0f%s", k ? ", " : i ? ", {" : "{", AXIS_NAMES[k], all[i * (NUM_AXES + 1) + k],
                        k == NUM_AXES - 1 ? "}" : "");
        fprintf(r->logf, "], \"steps\": %d, \"steps_unlike_first\": [", n);
        for (int i = 0; i < r->world; i++) fprintf(r->logf, "%s%.0f", i ? ", " : "", all[i * (NUM_AXES + 1) + NUM_AXES]);
        fprintf(r->logf, "]}\n");
        fflush(r->logf);
    }
    free(all);
}

// --profile: rank 0's modules over the profiled steps, on the console and as one JSON line. The
// counted FLOPs are checked against the model's formula, 6 per parameter per token plus attention:
// they differ by the parameters no matmul multiplies (the position embedding, a lookup; biases and
// LayerNorm weights), which the table names, so the comparison is exact rather than approximate.
static void report_profile(Run *r) {
    Timing *t = &timing;
    // --tp: what the rank's TP group counted together, module by module (its ranks' slices add up to the model)
    double group[NUM_ROWS];
    memcpy(group, t->row_flops, sizeof(group));
    for (int k = 1; r->tp > 1 && k < NUM_ROWS; k++) group[k] = comm_allreduce_sum_f64(&r->tp_comm, group[k]);
    if (r->rank != 0 || t->profiled_steps == 0) return;
    const char *source = "";
    double peak = backend_profile_peak_flops(&source);
    const ModelConfig *mc = &r->mc_rank;  // the rank's slice with --tp: its matmuls, its heads, its vocabulary rows
    double L = mc->num_layers, C = model_attn_width(mc);  // C: attention's width (GPT-2's channels)
    double tokens = (double)r->B * r->T * r->A;  // this rank's tokens per step
    double params = (double)model_num_params(mc);
    double formula = (6.0 * params + 6.0 * L * C * r->T) * tokens;
    double matmul_params = model_matmul_params(mc), other_params = params - matmul_params;
    double counted = 0.0, total_ms = 0.0;
    for (int k = 1; k < NUM_ROWS; k++) { counted += t->row_flops[k]; total_ms += t->row_ms[k]; }
    counted /= t->profiled_steps;
    int n = t->profiled_steps;
    printf("profile: rank 0%s, %d step%s%s\n", r->tp > 1 ? " (its slice of --tp's: the FLOPs it does)" : "", n,
           n == 1 ? "" : "s",
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
        printf("  %-14s %9s %11.1f %6.1f%% %10s %9s %8s\n", tot ? "total" : timing_row_name(k), calls, ms,
               100.0 * ms / t->profiled_ms, gf, rate, frac);
    }
    printf("  the modules' time is %.2f%% of the profiled steps' %.1f ms\n", 100.0 * total_ms / t->profiled_ms, t->profiled_ms);
    if (r->pp_stages > 1) printf("  FLOPs per step: rank 0 runs pipeline stage 0 only, so the comparison with the whole model's "
                                 "6N + 6LCT is left out (run --pp 1 for it)\n");
    if (r->pp_stages == 1) {
        // what the matmuls and causal attention must come to: 6 per matmul weight per token, and
        // attention's 6C(T+1) per token per layer
        double exact = 6.0 * matmul_params * tokens + 6.0 * L * C * (r->T + 1.0) * tokens;
        char what[160];
        model_nonmatmul_text(mc, other_params, what, sizeof(what));
        if (r->any_window || r->cfg.doc_mask)  // attention's masks: the visible pairs counted, not T (T + 1) / 2
            printf("  attention under the masks (--attn-window, --doc-mask): its FLOPs count the pairs it visits; the causal "
                   "figure below is the bound\n");
        printf("  FLOPs per step: counted %.4f GFLOP (6 x %.0f matmul weights x %.0f tokens + causal attention = %.4f%s) | "
               "formula %s: %.4f GFLOP | counted / formula %.4f: %.0f of N's %zu parameters are in no matmul "
               "(%s)\n", counted / 1e9, matmul_params,
               tokens, exact / 1e9, r->cfg.recompute == 3 ? "; recompute 3 reruns the layers' forward, counted too" : "",
               model_flops_formula(mc), formula / 1e9, counted / formula, other_params, (size_t)params, what);
    }
    if (r->tp > 1) {
        double sum = 0.0;
        for (int k = 1; k < NUM_ROWS; k++) sum += group[k];
        printf("  the TP group's %d ranks counted %.4f GFLOP per step together (one process counts the whole model's; "
               "key/value heads held by several ranks count on each)\n", r->tp, sum / n / 1e9);
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
                    "\"flops_per_s\": %.6g, \"peak_fraction\": ", k > 1 ? ", " : "", timing_row_name(k), t->row_calls[k], ms,
                    ms / t->profiled_ms, fl, ms > 0 ? fl / (ms / 1e3) : 0.0);
            if (peak > 0 && fl > 0 && ms > 0) fprintf(r->logf, "%.5f}", fl / (ms / 1e3) / peak); else fprintf(r->logf, "null}");
        }
        fprintf(r->logf, "]");
        if (r->tp > 1) {  // the TP group's sum, module by module (rank 0's table is its own slice)
            fprintf(r->logf, ", \"tp_group_flops\": {");
            for (int k = 1; k < NUM_ROWS; k++)
                fprintf(r->logf, "%s\"%s\": %.17g", k > 1 ? ", " : "", timing_row_name(k), group[k]);
            fprintf(r->logf, "}");
        }
        fprintf(r->logf, "}}\n");
        fflush(r->logf);
    }
}

#endif
