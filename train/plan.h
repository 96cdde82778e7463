// plan.h: the memory plan against the machine, the one answer to "does it fit". It serves the run's
// plan phase (trainer.h: the run's own configuration, and when it does not fit the first one that
// would) and the autotuner (autotune.h: which candidates are worth timing). The plan is exact: it is
// what the build's model_memory_plan and model_kv_cache_bytes (the samples' key/value cache) and zero.h's
// zero_memory_plan / zero_swap_plan say the run will allocate, byte for byte (the tests compare it with what is allocated), so advice taken from it holds.
#ifndef PLAN_H
#define PLAN_H

#include <stdio.h>
#include <unistd.h>
#include "../base/utils.h"
#include "../zero.h"
#include "../zero/swap.h"
#include "../parallel/pipeline_schedule.h"

// Bytes of each kind of memory, for the memory plan printed at start.
typedef struct {
    size_t params, grads, optimizer, activations, workspace;
    size_t working;         // the weights' copies in the compute precision (0 where that is fp32)
    size_t gathered;        // ZeRO's working set at stages 2-3: the whole units gathered and the whole gradients
                            // reduced (zero_memory_plan), beside this rank's own params and grads
    size_t kv_cache;        // generation's key/value cache (model_kv_cache_bytes; 0 where the run does not sample)
    int optimizer_on_host;  // --offload: the optimizer figure is host memory
} MemoryPlan;

// The plan of a model running `layers` layers with `slots` micro-batches in flight (a pipeline
// stage; the whole model is layers = L, slots = 1). Parameter-sized figures are for one unsharded
// copy; zero.h replaces them with the stage's own.
static MemoryPlan model_memory_plan(const ModelConfig *c, int B, int T, int recompute, int layers, int slots, int outer,
                                    int stream_layers, int attn_masked) {
    MemoryPlan mp = {0};
    ArchShape s = model_shape(c);
    const ArchActs *t = model_act_table(c);
    size_t n = model_num_params(c), acts = 0;
    for (int i = 0; i < t->num_acts; i++)
        acts += act_config_bytes(c, &t->acts[i], &s, B, T) * arch_act_copies(&t->acts[i], layers, recompute);
    acts *= slots;
    size_t BT = (size_t)B * T;
    mp.params = n * sizeof(float);
    mp.grads = n * sizeof(float);
    mp.optimizer = 2 * n * sizeof(float);
    mp.activations = acts;
    mp.workspace = gradact_elems(&s, BT) * target_x_bytes() + 2 * slots * BT * sizeof(int) +
                   target_att_workspace_bytes(B, model_heads(c), T, (int)s.dim[DIM_ATT], attn_masked) + model_rope_bytes(c) +
                   tp_scratch_floats(c->tp_size, BT) * sizeof(float) + model_sp_full_bytes(c, BT);
    mp.working = model_working_bytes(c, layers, outer, stream_layers);
    return mp;
}

// What a configuration needs per rank: device memory (host memory in the CPU build), host RAM for the
// offloaded state (with nvme: the swap ring and gradient staging), disk for the swap file.
typedef struct { size_t device, host, disk; } PlanNeed;

// One rank's share of a layout: everything the plan depends on besides the choice below.
typedef struct {
    const ModelConfig *mc;
    int B, T, recompute;
    int layers, slots;            // this stage's layers, and the micro-batches it keeps in flight (1F1B)
    const int *holds_unit;        // per unit (0: the outer tensors, as mc's ends has them; 1 + l: layer l): does this stage hold it
    int dp;                       // the data-parallel ranks the state is sharded over
    size_t bucket_bytes;          // --reduce-bucket-mb
    size_t nvme_buffer;           // --nvme-buffer-mb
    int kv_tokens;                // the positions of the run's samples' key/value cache (run_sample_tokens; 0: no sampling)
    const OptimizerOps *optimizer;  // --optimizer's table: its state's rooms and workspace (opt->plan)
    int doc_mask;                 // --doc-mask: each slot's document starts (model_doc_start_bytes) in the workspace
    int attn_masked;              // some layer's mask is not causal (--doc-mask, --attn-window): attention's workspace
} PlanLayout;

// Stage s of a pipeline of pp stages split at first[] (pp_split's), with A micro-batches per step: its layers, the
// micro-batches it keeps in flight (1F1B) and the units it holds, into l (holds_unit: model_num_units entries, filled
// here; unit 0, the outer one, lives on the first and the last stage, each holding the outer tensors it uses: l->mc
// is the stage's config, whose ends say which, pp_stage_ends).
static void plan_stage(PlanLayout *l, const int *first, int pp, int s, int A, int *holds_unit) {
    int nu = model_num_units(l->mc);
    if (l->mc->ends != pp_stage_ends(s, pp))
        internal_fault("plan_stage: stage %d of %d planned with a config of ends %d (pp_stage_ends: %d)", s, pp, l->mc->ends,
                       pp_stage_ends(s, pp));
    for (int u = 0; u < nu; u++) holds_unit[u] = u == 0 ? (s == 0 || s == pp - 1) : (u - 1 >= first[s] && u - 1 < first[s + 1]);
    l->layers = first[s + 1] - first[s];
    l->slots = pp_max_in_flight(s, pp, A);
    l->holds_unit = holds_unit;
}

// What the advice varies: the ZeRO stage and what is offloaded where.
typedef struct { int zero, offload, offload_params, nvme; } PlanChoice;

static PlanNeed plan_need(const PlanLayout *l, PlanChoice c, MemoryPlan *out) {
    MemoryPlan mp = model_memory_plan(l->mc, l->B, l->T, l->recompute, l->layers, l->slots, l->holds_unit[0], c.zero == 3,
                                      l->attn_masked);
    zero_memory_plan(l->mc, c.zero, l->dp, l->holds_unit, l->bucket_bytes, c.offload, c.offload_params, c.nvme, l->optimizer, &mp.params,
                     &mp.grads, &mp.optimizer, &mp.gathered);
    mp.optimizer_on_host = c.offload && !c.nvme;
    mp.kv_cache = l->kv_tokens ? model_kv_cache_bytes(l->mc, l->layers, l->kv_tokens) : 0;  // reserved once, for the run
    mp.workspace += model_doc_start_bytes(l->doc_mask, l->B, l->T, l->slots);
    PlanNeed n = {0, 0, 0};
    n.device = mp.params + mp.grads + mp.gathered + mp.working + mp.activations + mp.workspace + mp.kv_cache + (c.offload ? 0 : mp.optimizer);
    if (c.offload && !c.nvme) n.host = mp.optimizer;
    if (c.nvme) zero_swap_plan(l->mc, c.zero, l->dp, l->holds_unit, l->nvme_buffer, &n.host, &n.disk);
    if (c.nvme) n.host += mp.optimizer;  // the optimizer's workspace beside the swap file (the host steps the state)
    if (out) *out = mp;
    return n;
}

// What the machine has for each rank: its RAM and the disk under --nvme-path, shared by the ranks on
// this node; the device's memory (the CUDA build; in the CPU build the device is the host). A capacity
// of 0 is unknown, and not checked.
typedef struct { double ram, disk, device; int device_is_host, local_ranks; } MachineCapacity;

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

static size_t physical_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

// A running job's share of this node: RAM available now (MemAvailable) plus this process's own, the
// device's memory, and the disk's free space under nvme_path (NULL: unknown); --mem-limit (GiB, 0 =
// none) stands in for the device's memory (for RAM in the CPU build). --gpu: the card's memory is the device's.
static MachineCapacity machine_capacity(float mem_limit, const char *nvme_path, int local_ranks) {
    const double gib = 1073741824.0;
    MachineCapacity m;
    m.local_ranks = local_ranks;
    m.device_is_host = backend_memory_is_host();
    if (!m.device_is_host) {
        m.device = mem_limit > 0 ? mem_limit * gib : (double)backend_device_capacity();
        m.ram = (double)mem_available_bytes() / local_ranks + (double)self_rss_bytes();
    } else {
        m.device = 0;
        m.ram = mem_limit > 0 ? mem_limit * gib : (double)mem_available_bytes() / local_ranks + (double)self_rss_bytes();
    }
    m.disk = nvme_path ? (double)swap_free_bytes(nvme_path) / local_ranks : 0.0;
    if (plan_target.gpu) {  // --gpu: that card (its datasheet's memory, or --mem-limit's)
        m.device_is_host = 0;
        m.device = mem_limit > 0 ? mem_limit * gib : plan_target.gpu->gib * gib;
        if (plan_target.cuda_facts) m.ram = 0;  // the CPU build planning a GPU node: that node's RAM is not this one's
    }
    return m;
}

static int plan_fits(const PlanNeed *n, const MachineCapacity *m) {
    double ram = m->device_is_host ? (double)n->device + n->host : (double)n->host;
    if ((m->ram > 0 && ram > m->ram) || (!m->device_is_host && m->device > 0 && n->device > m->device)) return 0;
    return !(n->disk > 0 && m->disk > 0 && n->disk > m->disk);
}

// The first choice other than `own` that fits, in the order DeepSpeed advises trying them: offload
// nothing, the optimizer, the parameters (ZeRO-3) to host memory, then to nvme; each at the run's ZeRO
// stage and the higher ones its layout allows (2-3 need one pipeline stage; with one rank, only stage 3
// with params). Without a disk named (disk_known 0) the disk is not checked. Returns whether one fits.
static int plan_advise(const PlanLayout *l, int pp_stages, PlanChoice own, const MachineCapacity *m, int disk_known,
                       PlanChoice *advice, PlanNeed *need) {
    int own_offload = own.offload_params ? 2 : own.offload;
    for (int tier = 0; tier < 5; tier++) {
        int oi = tier == 0 ? 0 : tier <= 2 ? tier : tier - 2, nvme = tier >= 3;
        for (int z = own.zero; z <= 3; z++) {
            if ((pp_stages > 1 && z >= 2) || (oi == 2 && z != 3) || (l->dp == 1 && z != own.zero && !(z == 3 && oi == 2))) continue;
            if (z == own.zero && oi == own_offload && nvme == own.nvme) continue;  // the run's own
            PlanChoice c = {z, oi > 0, oi == 2, nvme};
            PlanNeed n = plan_need(l, c, NULL);
            MachineCapacity mm = *m;
            if (nvme && !disk_known) mm.disk = 0;  // no directory named: its free space is not known, so not checked
            if (!plan_fits(&n, &mm)) continue;
            *advice = c;
            *need = n;
            return 1;
        }
    }
    return 0;
}

// --dry-run --world: the cheapest change that makes a stage fit `limit` bytes per rank (its device memory; with on_host,
// the CPU build's, device and host together), each candidate checked by planning it. The levers are taken in this
// order, each added to the ones before at their furthest when they did not suffice: a higher ZeRO stage
// (communication only), a higher recompute level (compute only), the micro-batch halved (the accumulation making up
// the tokens), then plan_advise's offloads (host memory, then NVMe). Writes the flags into text; returns whether one
// fits. A TP or PP degree changes the layout itself: the caller names those when nothing here fits.
static int plan_advise_stage(const PlanLayout *l, int pp, PlanChoice own, double limit, int on_host, char *text, size_t n,
                             PlanNeed *need) {
    MachineCapacity m = {0, 0, 0, on_host, 1};
    if (on_host) m.ram = limit; else m.device = limit;
    PlanLayout k = *l;
    PlanChoice c = own;
    char flags[3][48] = {"", "", ""};  // the ZeRO stage, the recompute level, the micro-batch so far
    for (int lever = 0; lever < 3; lever++) {
        int from = lever == 0 ? own.zero + 1 : lever == 1 ? l->recompute + 1 : l->B / 2;
        int to = lever == 0 ? (l->dp > 1 && pp == 1 ? 3 : own.zero) : lever == 1 ? 3 : 1;
        for (int v = from; lever == 2 ? v >= to : v <= to; v = lever == 2 ? v / 2 : v + 1) {
            if (lever == 0) c.zero = v; else if (lever == 1) k.recompute = v; else k.B = v;
            if (lever == 0) snprintf(flags[0], sizeof(flags[0]), "-z %d ", v);
            else if (lever == 1) snprintf(flags[1], sizeof(flags[1]), "-r %d ", v);
            else snprintf(flags[2], sizeof(flags[2]), "-b %d (--grad-accum x %d) ", v, l->B / v);
            *need = plan_need(&k, c, NULL);
            if (plan_fits(need, &m)) {
                snprintf(text, n, "%s%s%s", flags[0], flags[1], flags[2]);
                text[strlen(text) - 1] = '\0';
                return 1;
            }
            if (lever == 2 && v == 1) break;
        }
    }
    PlanChoice o;
    if (!plan_advise(&k, pp, c, &m, 0, &o, need)) return 0;
    snprintf(text, n, "%s%s-z %d --offload %s%s", flags[1], flags[2], o.zero, o.offload_params ? "params" : o.offload ? "optimizer" : "none",
             o.nvme ? " --offload-device nvme --nvme-path DIR" : "");
    return 1;
}

#endif
