// zero_layout.h: ZeRO's record of one rank (Zero) and how it cuts the model: units into shards, this rank's
// slice of each, the gradient buckets and the swap file's records, and where a unit's master copy and reduced
// gradient live. Plain arithmetic on the record and the memory plan's sums; zero_store.h keeps the optimizer's
// state on top of it, and zero.h (which includes both) runs the step. See zero.h for the stages.
#ifndef ZERO_LAYOUT_H
#define ZERO_LAYOUT_H

#include "../backend/backend.h"
#include "../parallel/comm.h"
#include "swap.h"
#include "../model/model.h"
#include "../optim/optimizer.h"  // the boundary: ZeRO asks the run's optimizer for its state and its steps

// the arrays of a swap record: the master copy, then the optimizer's state arrays (ZS_M + a, a < OPT_ARRAYS)
enum { ZS_MASTER, ZS_M, ZS_V, ZS_ARRAYS };
typedef char zero_record_holds_every_state_array[ZS_ARRAYS == 1 + OPT_ARRAYS ? 1 : -1];  // (C and C++ alike)

typedef struct Zero Zero;

// Where the optimizer's state lives, chosen at start-up: device memory (the optimizer steps it on the device),
// host memory (--offload: on the host) or a swap file (--offload-device nvme). Arrays are ZS_MASTER (offload
// only) and the optimizer's state arrays ZS_M, ZS_V of this rank's slice of a unit, in the slice's shape.
typedef struct {
    void (*get)(Zero *z, int a, int u, size_t lo, size_t n, float *dst);  // floats [lo, lo + n) of the slice to the host
    void (*put)(Zero *z, int a, int u, const float *src, size_t n);       // the slice's first n floats from the host
    void (*master_to_device)(Zero *z, int u, float *dst);                  // this rank's master slice of unit u
    void (*begin)(Zero *z, const OptStep *s, int verdict);                 // the step's update starts (the device
                                                                           // store's: the optimizer's one launch)
    void (*update)(Zero *z, int u, const OptStep *s);                      // unit u's slice, its device master refreshed
    void (*join)(Zero *z);                                                 // the refreshed masters readable by the compute
    void (*end)(Zero *z);                                                  // after the last unit
    void (*close)(Zero *z);
} ZeroStore;

struct Zero {
    int stage;
    Comm *comm;
    Model *model;
    TpGroup *tp;                   // --tp: the model's TP group (NULL without), used through tensor_parallel.h's API
    ModelConfig config;
    int nu, L;
    size_t *usize, *ushard;        // per unit: size, shard size
    size_t *uoff;                  // per unit: offset in the whole-unit buffers (each unit padded to world*shard)
    size_t *slo, *slen, *sspan;    // per unit: this rank's slice: where it starts in the unit, its floats, its padded room
    size_t *soff;                  // per unit: offset of this rank's slice in the slice buffers (uoff at stage 0)
    size_t whole_floats, slice_floats;
    ParamRun *runs;
    int nruns;
    // memory (backend)
    float *params;                 // stages 0-2: every unit whole; stage 3: the outer unit gathered whole (the
                                   // working set: valid from its first use after an update, outer_gathered)
    int outer_gathered;            // stage 3: params holds the outer unit as the last update left it
    float *grads;                  // stages 0-1: every unit whole; stages 2-3: the outer unit whole
    float *layer_grad;             // stages 2-3: the gradients of one bucket of layers
    float *bucket_pack;            // stages 2-3 with buckets of several layers: their shards, rank by rank
    int bucket_layers;             // layers whose gradients are reduce-scattered together
    float *layer_param[2];         // stage 3: gathered layer weights (this layer and the next)
    int slot_layer[2];             // stage 3: which layer each buffer holds whole (-1: none or stale)
    CommRequest prefetch;          // stage 3: the gather of the next layer, running while this one computes
    int prefetch_layer;
    float *pshard;                 // stage 3: this rank's shards of every unit's parameters (the master copy)
    float *gshard;                 // stages 2-3: this rank's gradient shards, accumulated over micro-batches
    // --pp: an end stage's outer unit holds only the outer tensors that end uses (the config's ends); the gradients
    // of those both ends use (a tied embedding) are summed over `tied` (zero_tie_outer_unit), and such a tensor is
    // counted (norm, checkpoint) by the input end
    Comm *tied;
    int ends;                      // ARCH_END_ bits: the ends of the model this stage runs (both without --pp)
    float *norm_slots;             // every rank's sum of squares, a double (2 floats) each, for the device's verdict
    // the optimizer (optimizer.h) and its state (ZeroStore): each state array in device or host memory, unit by
    // unit the room the optimizer asks for this rank's slice (whole units at stage 0, shards at stages 1-3); with
    // --offload beside a host master copy of this rank's parameters and a host copy of its gradients, and the
    // optimizer steps it on the CPU
    Optimizer *opt;
    const ZeroStore *store;
    float *state[OPT_ARRAYS];
    size_t *aoff[OPT_ARRAYS];      // per array, per unit: where the unit's room starts
    size_t state_floats[OPT_ARRAYS];
    int offload;
    int offload_params;            // --offload params (stage 3): the host master copy is the only copy of the layer shards
    float *hmaster, *hgrad;
    // the gradient norm's per-unit slices and sums, between zero_grad_sum_squares_start and _finish
    const float **ss_x;
    size_t *ss_n;
    double *ss_sum;
    int ss_count;
    size_t *ss_piece;              // zero_counted_pieces' pieces of one unit (offsets, then lengths)
    size_t *ss_tp;                 // --tp: tp_counted's pieces of one of those (offsets, then lengths)
    // --offload-device nvme: the state arrays and hmaster are records of a swap file (NULL here); hgrad stages
    // one piece; one_stream: every unit's update is one pass, so one stream runs through every record
    int nvme, one_stream;
    Swap swap;
    int *piece_first;              // per unit (and one past the last): its first record
    size_t *piece_lo, *piece_n;    // per record: where it starts in its unit's slice, and its floats
};

// How many of unit u's floats rank r owns.
static size_t zero_owned(const Zero *z, int u, int r) {
    size_t lo = (size_t)r * z->ushard[u];
    if (lo >= z->usize[u]) return 0;
    return z->usize[u] - lo < z->ushard[u] ? z->usize[u] - lo : z->ushard[u];
}

// A unit this rank holds: all of them, or those that `held` marks (a pipeline stage's).
static size_t zero_unit_size(const ModelConfig *c, int u, const int *held) {
    return held && !held[u] ? 0 : model_unit_size(c, u);
}

// The padded room of a rank's slice of a unit with shards of `shard` floats: the whole unit at
// stage 0 (every rank owns everything), one shard otherwise.
static size_t zero_slice_span(int stage, size_t shard, int world) { return stage == 0 ? shard * world : shard; }

// Layers per gradient bucket at stages 2-3: as many as fit in bucket_bytes, at least one.
static int zero_bucket_layers(const ModelConfig *c, int world, size_t bucket_bytes) {
    size_t layer = comm_shard_size(model_unit_size(c, 1), world) * world * sizeof(float);
    size_t k = bucket_bytes / layer;
    if (k < 1) k = 1;
    if (k > (size_t)c->num_layers) k = c->num_layers;
    return (int)k;
}

// Floats per array of a swap record: three arrays (master, m, v) fill one ring buffer of buffer_bytes.
static size_t zero_piece_floats(size_t buffer_bytes) {
    size_t n = buffer_bytes / (ZS_ARRAYS * sizeof(float)) / 1024 * 1024;
    return n < 1024 ? 1024 : n;
}

// The swap records: unit u's slice of the optimizer state (span[u] floats) cut into pieces of at most
// `chunk`. Fills floats[] (per record) and first[] (per unit, nu + 1 entries) where not NULL; returns
// the number of records.
static int zero_swap_pieces(const size_t *span, int nu, size_t chunk, size_t *floats, int *first, size_t *lo) {
    int n = 0;
    for (int u = 0; u < nu; u++) {
        if (first) first[u] = n;
        for (size_t a = 0; a < span[u]; a += chunk, n++) {
            if (floats) floats[n] = span[u] - a < chunk ? span[u] - a : chunk;
            if (lo) lo[n] = a;
        }
    }
    if (first) first[nu] = n;
    return n;
}

// Per-rank bytes of the swap file and of the host memory it streams through (ring and gradient
// staging), for --offload-device nvme, without opening anything.
static void zero_swap_plan(const ModelConfig *c, int stage, int world, const int *held, size_t buffer_bytes,
                           size_t *host, size_t *disk) {
    int nu = model_num_units(c);
    size_t *span = (size_t *)mallocCheck(nu * sizeof(size_t)), chunk = zero_piece_floats(buffer_bytes);
    for (int u = 0; u < nu; u++) span[u] = zero_slice_span(stage, comm_shard_size(zero_unit_size(c, u, held), world), world);
    int n = zero_swap_pieces(span, nu, chunk, NULL, NULL, NULL);
    size_t *floats = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
    zero_swap_pieces(span, nu, chunk, floats, NULL, NULL);
    *disk = swap_file_bytes(floats, n, ZS_ARRAYS);
    *host = n ? swap_ring_bytes(floats, n, ZS_ARRAYS) + swap_cap(chunk) * sizeof(float) : 0;
    free(floats); free(span);
}

// Per-rank bytes of parameters, gradients and optimizer state for a stage, without allocating: the optimizer's
// (opt->plan: its state arrays' rooms and workspace; with nvme only what is not on disk, zero_swap_plan), and with
// offload the host master copy and gradients beside it. ZeRO's working set apart (`gathered`): params and grads are
// this rank's own (every unit whole where the stage keeps it so, its shards where it shards it), gathered the whole
// units a step reads or reduces besides: at stages 2-3 the outer unit's gradient and one bucket of layers' (with its
// packing buffer for buckets of several), at stage 3 also the outer unit's weights and two layers'.
static void zero_memory_plan(const ModelConfig *c, int stage, int world, const int *held, size_t bucket_bytes,
                             int offload, int offload_params, int nvme, const OptimizerOps *opt, size_t *params, size_t *grads,
                             size_t *optimizer, size_t *gathered) {
    int K = zero_bucket_layers(c, world, bucket_bytes);
    int nu = model_num_units(c);
    size_t whole = 0, shard = 0, slices = 0, outer = 0, layer = 0;
    size_t *usize = (size_t *)mallocCheck(nu * sizeof(size_t));
    for (int u = 0; u < nu; u++) {
        usize[u] = zero_unit_size(c, u, held);
        size_t sh = comm_shard_size(usize[u], world);
        whole += sh * world;
        shard += sh;
        slices += zero_slice_span(stage, sh, world);
        if (u == 0) outer = sh * world; else if (sh > 0) layer = sh * world;
    }
    *params = (stage <= 2 ? whole : offload_params ? 0 : shard) * sizeof(float);
    *grads = (stage <= 1 ? whole : shard) * sizeof(float);
    *gathered = (stage <= 1 ? 0 : outer + (K > 1 ? 2 * K : 1) * layer + (stage == 3 ? outer + 2 * layer : 0)) * sizeof(float);
    *optimizer = ((nvme ? 0 : offload ? 2 * slices : 0) + opt->plan(c, stage, world, usize, nvme)) * sizeof(float);
    free(usize);
}

// Whether unit u stays whole in params on every rank: every unit at stages 0-2; at stage 3 none, the outer
// unit included: its master is this rank's shard like a layer's, gathered into params when used (zero_fetch_outer).
static int zero_resident(const Zero *z, int u) { (void)u; return z->stage <= 2; }

// This rank's master copy of its slice of unit u in device memory: inside the resident whole unit,
// or among the layer shards at stage 3; NULL where --offload params keeps it only in the store.
static float *zero_master(Zero *z, int u) {
    if (zero_resident(z, u)) return z->params + z->uoff[u] + z->slo[u];
    return z->pshard ? z->pshard + z->soff[u] : NULL;
}

// This rank's master slice of unit u into device memory at dst, from wherever it lives.
static void zero_master_into(Zero *z, int u, float *dst) {
    const float *m = zero_master(z, u);
    if (m) backend_copy(dst, m, z->ushard[u]);
    else z->store->master_to_device(z, u, dst);
}

// This rank's reduced gradient of unit u (its slice).
static float *zero_grad_slice(Zero *z, int u) {
    if (z->stage <= 1) return z->grads + z->uoff[u] + z->slo[u];
    return z->gshard + z->soff[u];
}

// Where layer l sits in its gradient bucket; buckets are filled in backward order, last layer first.
static int zero_bucket_slot(const Zero *z, int l) { return (z->L - 1 - l) % z->bucket_layers; }

// Points the model at unit u's resident parameters and gradient buffer.
static void zero_point_unit(Zero *z, int u, float *params) {
    float *g = z->stage <= 1 || u == 0 ? z->grads + z->uoff[u]
                                       : z->layer_grad + (size_t)zero_bucket_slot(z, u - 1) * z->ushard[u] * z->comm->world;
    model_set_unit(z->model, u, params, g);
}

#endif
