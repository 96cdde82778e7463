// zero.h: data parallelism with ZeRO sharding, written once for every build. It owns the model's
// parameter, gradient and optimizer memory, and drives the model's forward and backward unit by
// unit (gpt2.h's units: the outer unit with the embeddings, then one unit per layer). It never
// touches memory itself: it moves buffers with comm.h and works on them with the build's backend
// (backend_alloc/free/copy/zero/add/to_host/from_host, backend_sum_squares_start/finish, backend_adamw) and the
// model's pieces (model_set_unit, model_embed_forward, model_layer_forward, model_head_forward,
// model_head_backward, model_layer_backward, model_embed_backward). So the same logic runs on host
// memory with MPI and on GPU memory with NCCL.
//
// Every unit is cut into `world` equal shards (the last one padded); rank r owns shard r of each.
//   stage 0: every rank holds all parameters, gradients and AdamW moments; gradients are all-reduced
//            after the step's micro-batches and every rank updates everything (identically).
//   stage 1: AdamW's moments are sharded: gradients are reduce-scattered after the micro-batches,
//            each rank updates its shards, and the parameters are all-gathered.
//   stage 2: gradients are sharded too: each layer's gradient is reduce-scattered as soon as that
//            layer's backward is done (the bucket is the layer), so a rank holds its gradient shards,
//            the outer unit's gradient and one layer's gradient, never the whole.
//   stage 3: parameters are sharded too: each layer's weights are all-gathered just before its
//            forward and again before its backward, into one of two buffers, and dropped after. The
//            outer unit (embeddings, final LayerNorm) stays whole on every rank, since the tied
//            embedding is used at both ends of the model.
// Gradients are sums over ranks of per-rank sums already scaled by 1 / (tokens in the whole step),
// so the result is the exact token mean of the step whatever the layout.
//
// --offload optimizer|params keeps AdamW's moments and the master copy of this rank's parameters off
// the device, in a host tier: host memory, or with --offload-device nvme records of a swap file
// (swap.h). Each unit's slice of that state is cut into pieces of at most a ring buffer's size; the
// update streams the pieces through swap.h's ring, so the next piece is read and the previous
// written back while one is updated. Only zero_state_get/put and zero_update know which tier it is.
#ifndef ZERO_H
#define ZERO_H

#include "backend.h"
#include "comm.h"
#include "swap.h"

enum { ZS_MASTER, ZS_M, ZS_V, ZS_ARRAYS };  // the arrays of a swap record

typedef struct {
    int stage;
    Comm *comm;
    Model *model;
    GPT2Config config;
    int nu, L;
    size_t *usize, *ushard;        // per unit: size, shard size
    size_t *uoff;                  // per unit: offset in the whole-unit buffers (each unit padded to world*shard)
    size_t *soff;                  // per unit: offset of this rank's shard in the shard buffers
    size_t whole_floats, shard_floats;
    ParamRun *runs;
    int nruns;
    // memory (backend)
    float *params;                 // stages 0-2: every unit whole; stage 3: the outer unit whole
    float *grads;                  // stages 0-1: every unit whole; stages 2-3: the outer unit whole
    float *layer_grad;             // stages 2-3: the gradients of one bucket of layers
    float *bucket_pack;            // stages 2-3 with buckets of several layers: their shards, rank by rank
    int bucket_layers;             // layers whose gradients are reduce-scattered together
    float *layer_param[2];         // stage 3: gathered layer weights (this layer and the next)
    int slot_layer[2];             // stage 3: which layer each buffer holds whole (-1: none or stale)
    CommRequest prefetch;          // stage 3: the gather of the next layer, running while this one computes
    int prefetch_layer;
    float *pshard;                 // stage 3: this rank's shards of the layers' parameters (the master copy;
                                   // the outer unit's master is its whole copy in params)
    float *gshard;                 // stages 2-3: this rank's gradient shards, accumulated over micro-batches
    float *m, *v;                  // AdamW moments: whole at stage 0, this rank's shards at stages 1-3
    size_t opt_floats;
    // --offload optimizer: m and v live in host memory, beside a host master copy of this rank's
    // parameters and a host staging copy of its gradients; AdamW runs on the CPU
    int offload;
    int offload_params;            // --offload params (stage 3): the host master copy is the only copy of the layer shards
    float *hmaster, *hgrad;
    // the gradient norm's per-unit slices and sums, between zero_grad_sum_squares_start and _finish
    const float **ss_x;
    size_t *ss_n;
    double *ss_sum;
    int ss_count;
    // --offload-device nvme: m, v and hmaster are records of a swap file (NULL here); hgrad stages one piece
    int nvme;
    Swap swap;
    int *piece_first;              // per unit (and one past the last): its first record
    size_t *piece_lo, *piece_n;    // per record: where it starts in its unit's slice, and its floats
} Zero;

// How many of unit u's floats rank r owns.
static size_t zero_owned(const Zero *z, int u, int r) {
    size_t lo = (size_t)r * z->ushard[u];
    if (lo >= z->usize[u]) return 0;
    return z->usize[u] - lo < z->ushard[u] ? z->usize[u] - lo : z->ushard[u];
}
static size_t zero_slice_len(const Zero *z, int u) { return z->stage == 0 ? z->usize[u] : zero_owned(z, u, z->comm->rank); }

// A unit this rank holds: all of them, or those that `present` marks (a pipeline stage's).
static size_t zero_unit_size(const GPT2Config *c, int u, const int *present) {
    return present && !present[u] ? 0 : gpt2_unit_size(c, u);
}

// Layers per gradient bucket at stages 2-3: as many as fit in bucket_bytes, at least one.
static int zero_bucket_layers(const GPT2Config *c, int world, size_t bucket_bytes) {
    size_t layer = comm_shard_size(gpt2_unit_size(c, 1), world) * world * sizeof(float);
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
static void zero_swap_plan(const GPT2Config *c, int stage, int world, const int *present, size_t buffer_bytes,
                           size_t *host, size_t *disk) {
    int nu = gpt2_num_units(c);
    size_t *span = (size_t *)mallocCheck(nu * sizeof(size_t)), chunk = zero_piece_floats(buffer_bytes);
    for (int u = 0; u < nu; u++) {
        size_t sh = comm_shard_size(zero_unit_size(c, u, present), world);
        span[u] = stage == 0 ? sh * world : sh;
    }
    int n = zero_swap_pieces(span, nu, chunk, NULL, NULL, NULL);
    size_t *floats = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
    zero_swap_pieces(span, nu, chunk, floats, NULL, NULL);
    *disk = swap_file_bytes(floats, n, ZS_ARRAYS);
    *host = n ? swap_ring_bytes(floats, n, ZS_ARRAYS) + swap_cap(chunk) * sizeof(float) : 0;
    free(floats); free(span);
}

// Per-rank bytes of parameters, gradients and AdamW state for a stage, without allocating. With
// nvme the optimizer's state is on disk (zero_swap_plan), so none of it is counted here.
static void zero_memory_plan(const GPT2Config *c, int stage, int world, const int *present, size_t bucket_bytes,
                             int offload, int offload_params, int nvme, size_t *params, size_t *grads, size_t *opt) {
    int K = zero_bucket_layers(c, world, bucket_bytes);
    int nu = gpt2_num_units(c);
    size_t whole = 0, shard = 0, outer = 0, layer = 0;
    for (int u = 0; u < nu; u++) {
        size_t sh = comm_shard_size(zero_unit_size(c, u, present), world);
        whole += sh * world;
        shard += sh;
        if (u == 0) outer = sh * world; else if (sh > 0) layer = sh * world;
    }
    size_t outer_shard = outer / world;
    *params = (stage <= 2 ? whole : outer + 2 * layer + (offload_params ? 0 : shard - outer_shard)) * sizeof(float);
    *grads = (stage <= 1 ? whole : outer + (K > 1 ? 2 * K : 1) * layer + shard) * sizeof(float);
    *opt = nvme ? 0 : (offload ? 4 : 2) * (stage == 0 ? whole : shard) * sizeof(float);  // offloaded: m, v, master, grads
}

static float *zero_unit_params(Zero *z, int u) { return z->params + z->uoff[u]; }

// Where layer l sits in its gradient bucket; buckets are filled in backward order, last layer first.
static int zero_bucket_slot(const Zero *z, int l) { return (z->L - 1 - l) % z->bucket_layers; }

// Points the model at unit u's resident parameters and gradient buffer.
static void zero_point_unit(Zero *z, int u, float *params) {
    float *g = z->stage <= 1 || u == 0 ? z->grads + z->uoff[u]
                                       : z->layer_grad + (size_t)zero_bucket_slot(z, u - 1) * z->ushard[u] * z->comm->world;
    model_set_unit(z->model, u, params, g);
}

// nvme_path: with --offload-device nvme, the directory of the swap file (NULL: host memory), whose
// ring buffers are nvme_buffer_bytes each; `note` receives what swap_open says the user should know.
static void zero_init(Zero *z, Comm *comm, int stage, Model *model, const int *present, size_t bucket_bytes, int offload,
                      int offload_params, const char *nvme_path, size_t nvme_buffer_bytes, char *note, size_t note_len) {
    memset(z, 0, sizeof(*z));
    z->stage = stage;
    z->comm = comm;
    z->model = model;
    z->config = model->config;
    z->nu = gpt2_num_units(&z->config);
    z->L = z->config.num_layers;
    z->bucket_layers = zero_bucket_layers(&z->config, comm->world, bucket_bytes);
    z->usize = (size_t *)callocCheck(z->nu, sizeof(size_t));
    z->ushard = (size_t *)callocCheck(z->nu, sizeof(size_t));
    z->uoff = (size_t *)callocCheck(z->nu, sizeof(size_t));
    z->soff = (size_t *)callocCheck(z->nu, sizeof(size_t));
    int W = comm->world;
    for (int u = 0; u < z->nu; u++) {
        z->usize[u] = zero_unit_size(&z->config, u, present);
        z->ushard[u] = comm_shard_size(z->usize[u], W);
        z->uoff[u] = z->whole_floats;
        z->soff[u] = z->shard_floats;
        z->whole_floats += z->ushard[u] * W;
        z->shard_floats += z->ushard[u];
    }
    z->ss_x = (const float **)callocCheck(z->nu, sizeof(float *));
    z->ss_n = (size_t *)callocCheck(z->nu, sizeof(size_t));
    z->ss_sum = (double *)callocCheck(z->nu, sizeof(double));
    z->runs = (ParamRun *)mallocCheck((4 + 12 * (size_t)z->L) * sizeof(ParamRun));
    z->nruns = gpt2_param_runs(&z->config, z->runs);
    size_t outer = z->ushard[0] * W, layer = 0;
    for (int u = 1; u < z->nu; u++) if (z->ushard[u] * W > layer) layer = z->ushard[u] * W;
    z->params = backend_alloc(stage <= 2 ? z->whole_floats : outer);
    z->grads = backend_alloc(stage <= 1 ? z->whole_floats : outer);
    if (stage >= 2) {
        z->layer_grad = backend_alloc((size_t)z->bucket_layers * layer);
        if (z->bucket_layers > 1) z->bucket_pack = backend_alloc((size_t)z->bucket_layers * layer);
        z->gshard = backend_alloc(z->shard_floats);
    }
    if (stage == 3) {
        z->layer_param[0] = backend_alloc(layer);
        z->layer_param[1] = backend_alloc(layer);
        z->slot_layer[0] = z->slot_layer[1] = -1;
        z->prefetch_layer = -1;
        if (!offload_params) z->pshard = backend_alloc(z->shard_floats - z->ushard[0]);
    }
    z->opt_floats = stage == 0 ? z->whole_floats : z->shard_floats;
    z->offload = offload || offload_params;
    z->offload_params = offload_params;
    offload = z->offload;
    if (offload && nvme_path) {
        z->nvme = 1;
        size_t *span = (size_t *)mallocCheck(z->nu * sizeof(size_t)), chunk = zero_piece_floats(nvme_buffer_bytes);
        for (int u = 0; u < z->nu; u++) span[u] = stage == 0 ? z->ushard[u] * W : z->ushard[u];
        int n = zero_swap_pieces(span, z->nu, chunk, NULL, NULL, NULL);
        z->piece_first = (int *)mallocCheck((z->nu + 1) * sizeof(int));
        z->piece_lo = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
        z->piece_n = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
        zero_swap_pieces(span, z->nu, chunk, z->piece_n, z->piece_first, z->piece_lo);
        swap_open(&z->swap, nvme_path, comm->rank, z->piece_n, n, ZS_ARRAYS, note, note_len);
        z->hgrad = (float *)swap_alloc_aligned(swap_cap(chunk) * sizeof(float));
        free(span);
    } else if (offload) {
        z->m = backend_alloc_host(z->opt_floats);
        z->v = backend_alloc_host(z->opt_floats);
        z->hmaster = backend_alloc_host(z->opt_floats);
        z->hgrad = backend_alloc_host(z->opt_floats);
    } else {
        z->m = backend_alloc(z->opt_floats);
        z->v = backend_alloc(z->opt_floats);
    }
    for (int u = 0; u < z->nu; u++)
        zero_point_unit(z, u, (stage == 3 && u > 0) || z->usize[u] == 0 ? NULL : zero_unit_params(z, u));
}

static void zero_free(Zero *z) {
    float *bufs[] = {z->params, z->grads, z->layer_grad, z->bucket_pack, z->layer_param[0], z->layer_param[1], z->pshard, z->gshard};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) if (bufs[i]) backend_free(bufs[i]);
    float *opt[] = {z->m, z->v, z->hmaster, z->hgrad};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
        if (!opt[i]) continue;
        if (z->nvme) free(opt[i]); else if (z->offload) backend_free_host(opt[i]); else backend_free(opt[i]);
    }
    if (z->nvme) { swap_close(&z->swap); free(z->piece_first); free(z->piece_lo); free(z->piece_n); }
    free(z->usize); free(z->ushard); free(z->uoff); free(z->soff); free(z->runs);
    free(z->ss_x); free(z->ss_n); free(z->ss_sum);
}

// The part [a, b) of a unit-u run that falls in [lo, lo + cnt) of the unit; 0 when none does.
static int run_overlap(const ParamRun *run, int u, size_t lo, size_t cnt, size_t *a, size_t *b) {
    if (run->unit != u) return 0;
    *a = run->unit_off > lo ? run->unit_off : lo;
    *b = run->unit_off + run->len < lo + cnt ? run->unit_off + run->len : lo + cnt;
    return *a < *b;
}


// This rank's slice of unit u: where it starts in the unit, its length, its master copy (backend
// memory), and its offset in the optimizer-state layout (whole at stage 0, shards otherwise).
static size_t zero_slice_lo(const Zero *z, int u) { return z->stage == 0 ? 0 : (size_t)z->comm->rank * z->ushard[u]; }
static size_t zero_slice_len(const Zero *z, int u);
static float *zero_slice_params(Zero *z, int u) {
    if (z->stage <= 2 || u == 0) return z->params + z->uoff[u] + zero_slice_lo(z, u);
    if (z->offload_params) return z->hmaster + z->soff[u];  // host memory
    return z->pshard + z->soff[u] - z->ushard[0];
}
static size_t zero_opt_off(const Zero *z, int u) { return z->stage == 0 ? z->uoff[u] : z->soff[u]; }

// The optimizer's state where it lives: array a (ZS_MASTER with offload only, ZS_M, ZS_V) of unit u's
// slice, floats [lo, lo + n), to a host buffer. Device memory, host memory or the swap file.
static void zero_state_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) {
    if (!z->nvme) {
        const float *base = a == ZS_MASTER ? z->hmaster : a == ZS_M ? z->m : z->v;
        if (z->offload) memcpy(dst, base + zero_opt_off(z, u) + lo, n * sizeof(float));
        else backend_to_host(dst, base + zero_opt_off(z, u) + lo, n);
        return;
    }
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        size_t a0 = lo > z->piece_lo[p] ? lo : z->piece_lo[p], end = z->piece_lo[p] + z->piece_n[p];
        if (lo + n < end) end = lo + n;
        if (a0 >= end) continue;
        const float *rec = swap_read(&z->swap, p, a, 1);
        memcpy(dst + (a0 - lo), rec + (a0 - z->piece_lo[p]), (end - a0) * sizeof(float));
    }
}

// The other way: the first n floats of unit u's slice of array a from a host buffer (the rest of the
// slice, its padding, is zero).
static void zero_state_put(Zero *z, int a, int u, const float *src, size_t n) {
    if (!z->nvme) {
        float *base = a == ZS_MASTER ? z->hmaster : a == ZS_M ? z->m : z->v;
        if (z->offload) memcpy(base + zero_opt_off(z, u), src, n * sizeof(float));
        else backend_from_host(base + zero_opt_off(z, u), src, n);
        return;
    }
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        float *rec = swap_bounce(&z->swap);
        size_t plo = z->piece_lo[p], k = n > plo ? (n - plo < z->piece_n[p] ? n - plo : z->piece_n[p]) : 0;
        memset(rec, 0, swap_cap(z->piece_n[p]) * sizeof(float));
        memcpy(rec, src + plo, k * sizeof(float));
        swap_write(&z->swap, p, a, 1);
    }
}

// --offload params: this rank's master shard of layer unit u (ushard[u] floats) into device memory.
static void zero_master_to_device(Zero *z, int u, float *dst) {
    if (!z->nvme) { backend_from_host(dst, z->hmaster + z->soff[u], z->ushard[u]); return; }
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++)
        backend_from_host(dst + z->piece_lo[p], swap_read(&z->swap, p, ZS_MASTER, 1), z->piece_n[p]);
}

// ----------------------------------------------------------------------------
// Moving between llm.c's flat order (files) and the unit layout. `whole` is a host buffer of one
// unit, padded; flat is the whole model in llm.c's order.

static void unit_from_flat(const Zero *z, int u, const float *flat, float *whole) {
    for (int i = 0; i < z->nruns; i++) {
        const ParamRun *r = &z->runs[i];
        if (r->unit == u) memcpy(whole + r->unit_off, flat + r->flat, r->len * sizeof(float));
    }
}

static void unit_to_flat(const Zero *z, int u, const float *whole, float *flat) {
    for (int i = 0; i < z->nruns; i++) {
        const ParamRun *r = &z->runs[i];
        if (r->unit == u) memcpy(flat + r->flat, whole + r->unit_off, r->len * sizeof(float));
    }
}

// Unit u whole into a backend buffer of ushard*world floats: this rank's shard comes from `mine`
// (a backend pointer to its ushard floats), the others' by all-gather.
static void zero_gather_unit(Zero *z, int u, const float *mine, float *whole) {
    float *dst = whole + (size_t)z->comm->rank * z->ushard[u];
    if (dst != mine) backend_copy(dst, mine, z->ushard[u]);
    comm_allgather(z->comm, whole, z->ushard[u]);
}

// Stage 3: layer unit u whole in buf: this rank's master shard put in place (from device memory, or
// from the host with --offload params), then the all-gather.
static void zero_gather_layer(Zero *z, int u, float *buf) {
    float *dst = buf + (size_t)z->comm->rank * z->ushard[u];
    if (z->offload_params) zero_master_to_device(z, u, dst);
    else backend_copy(dst, z->pshard + z->soff[u] - z->ushard[0], z->ushard[u]);
    comm_allgather(z->comm, buf, z->ushard[u]);
}

// Loads the whole model (llm.c flat order, host) into this rank's share of it; `updates` is how many
// AdamW updates those parameters have had (0 for a fresh model, the state file's count on resume).
static void zero_load_params(Zero *z, const float *flat, int updates) {
    if (z->stage == 3) z->slot_layer[0] = z->slot_layer[1] = -1;
    size_t maxw = 0;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] * z->comm->world > maxw) maxw = z->ushard[u] * z->comm->world;
    float *whole = (float *)callocCheck(maxw, sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        memset(whole, 0, maxw * sizeof(float));
        unit_from_flat(z, u, flat, whole);
        if (z->stage <= 2 || u == 0) backend_from_host(z->params + z->uoff[u], whole, z->ushard[u] * z->comm->world);
        else if (!z->offload_params)
            backend_from_host(z->pshard + z->soff[u] - z->ushard[0], whole + (size_t)z->comm->rank * z->ushard[u], z->ushard[u]);
        if (z->offload) zero_state_put(z, ZS_MASTER, u, whole + zero_slice_lo(z, u), zero_slice_len(z, u));
    }
    free(whole);
    model_weights_changed(z->model, (uint64_t)updates);
}

// The whole model in llm.c's flat order on the host of every rank (for checkpoints).
static void zero_get_params(Zero *z, float *flat) {
    size_t maxw = 0;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] * z->comm->world > maxw) maxw = z->ushard[u] * z->comm->world;
    float *whole = (float *)mallocCheck(maxw * sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        const float *src = z->params + (z->stage <= 2 || u == 0 ? z->uoff[u] : 0);
        if (z->stage == 3 && u > 0) {
            zero_gather_layer(z, u, z->layer_param[0]);
            z->slot_layer[0] = u - 1;
            src = z->layer_param[0];
        }
        backend_to_host(whole, src, z->usize[u]);
        unit_to_flat(z, u, whole, flat);
    }
    free(whole);
}

// Writes this rank's share of a checkpoint straight into the two files every rank has open (on a
// shared filesystem): its shard of each unit it holds, of the parameters into the model file and of
// AdamW's moments into the state file, each at its place in llm.c's flat order. Together the ranks
// write every parameter once, and no rank ever holds the whole model. `skip_unit` is a unit another
// group writes (the tied one on the last pipeline stage).
static void zero_write_shards(Zero *z, int fd_model, int fd_state, const char *model_path, const char *state_path,
                              size_t num_params, int skip_unit) {
    int r = z->comm->rank;
    size_t maxs = 1;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] > maxs) maxs = z->ushard[u];
    float *host = (float *)mallocCheck(maxs * sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (u == skip_unit || z->usize[u] == 0) continue;
        size_t lo = (size_t)r * z->ushard[u], cnt = zero_owned(z, u, r);
        if (cnt == 0) continue;
        int host_params = z->offload_params && u > 0;  // the layer shards live only in the host tier
        const float *params = z->stage <= 2 || u == 0 ? z->params + z->uoff[u] + lo : z->pshard + z->soff[u] - z->ushard[0];
        size_t slo = z->stage == 0 ? lo : 0;  // where [lo, lo + cnt) starts in this rank's slice
        for (int k = 0; k < 3; k++) {
            if (k == 0 && !host_params) backend_to_host(host, params, cnt);
            else zero_state_get(z, k == 0 ? ZS_MASTER : k == 1 ? ZS_M : ZS_V, u, slo, cnt, host);
            int fd = k == 0 ? fd_model : fd_state;
            const char *path = k == 0 ? model_path : state_path;
            size_t base = 1024 + (k == 2 ? num_params * sizeof(float) : 0);
            for (int i = 0; i < z->nruns; i++) {
                const ParamRun *run = &z->runs[i];
                size_t a, b;
                if (!run_overlap(run, u, lo, cnt, &a, &b)) continue;
                size_t bytes = (b - a) * sizeof(float);
                off_t at = (off_t)(base + (run->flat + (a - run->unit_off)) * sizeof(float));
                if (pwrite(fd, host + (a - lo), bytes, at) != (ssize_t)bytes) fatal("%s: write failed: %s", path, strerror(errno));
            }
        }
    }
    free(host);
}

// Takes this rank's part of whole moments in flat order (from a checkpoint of any layout).
static void zero_set_opt_state(Zero *z, const float *m_flat, const float *v_flat) {
    size_t maxw = 0;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] * z->comm->world > maxw) maxw = z->ushard[u] * z->comm->world;
    float *whole = (float *)callocCheck(maxw, sizeof(float));
    const float *src[2] = {m_flat, v_flat};
    for (int k = 0; k < 2; k++)
        for (int u = 0; u < z->nu; u++) {
            if (z->usize[u] == 0) continue;
            memset(whole, 0, maxw * sizeof(float));
            unit_from_flat(z, u, src[k], whole);
            if (z->stage == 0) zero_state_put(z, k ? ZS_V : ZS_M, u, whole, z->ushard[u] * z->comm->world);
            else zero_state_put(z, k ? ZS_V : ZS_M, u, whole + (size_t)z->comm->rank * z->ushard[u], z->ushard[u]);
        }
    free(whole);
}

// ----------------------------------------------------------------------------
// The step.

static void zero_zero_grad(Zero *z) {
    if (z->stage <= 1) backend_zero(z->grads, z->whole_floats);
    else {
        backend_zero(z->grads, z->ushard[0] * z->comm->world);
        backend_zero(z->gshard, z->shard_floats);
    }
}

// Stage 3: layer l's weights, whole, into buffer `slot`, and the model pointed at them.
// Stage 3: layer l's weights whole in buffer l % 2 (gathered now, or already there from a prefetch or
// an earlier pass since the last update), the model pointed at them, and the gather of layer
// l + dir started into the other buffer so that it runs while layer l computes.
static void zero_fetch_layer(Zero *z, int l, int dir) {
    if (z->stage < 3) return;
    int slot = l & 1, u = 1 + l;
    if (z->prefetch_layer == l) {
        comm_wait(z->comm, &z->prefetch);
        z->prefetch_layer = -1;
        z->slot_layer[slot] = l;
    }
    if (z->slot_layer[slot] != l) {
        zero_gather_layer(z, u, z->layer_param[slot]);
        z->slot_layer[slot] = l;
    }
    zero_point_unit(z, u, z->layer_param[slot]);
    int next = l + dir;
    if (dir != 0 && next >= 0 && next < z->L && z->slot_layer[next & 1] != next && z->prefetch_layer < 0) {
        float *buf = z->layer_param[next & 1];
        float *own = buf + (size_t)z->comm->rank * z->ushard[1 + next];
        if (z->offload_params) zero_master_to_device(z, 1 + next, own);
        else backend_copy(own, z->pshard + z->soff[1 + next] - z->ushard[0], z->ushard[1 + next]);
        z->slot_layer[next & 1] = -1;
        comm_allgather_start(z->comm, buf, z->ushard[1 + next], &z->prefetch);
        z->prefetch_layer = next;
    }
}

static void zero_drop_layer(Zero *z, int l) {
    if (z->stage == 3) zero_point_unit(z, 1 + l, NULL);
}

// Stages 2-3: unit u's gradient of this micro-batch (in buf, whole) reduce-scattered, this rank's
// shard added to its accumulated gradient shard, and buf cleared for the next use.
static void zero_bucket_done(Zero *z, int u, float *buf) {
    comm_reduce_scatter_sum(z->comm, buf, z->ushard[u]);
    backend_add(z->gshard + z->soff[u], buf + (size_t)z->comm->rank * z->ushard[u], z->ushard[u]);
    backend_zero(buf, z->ushard[u] * z->comm->world);
}

// A layer's forward and backward with what the stage needs around them: at stage 3 its weights are
// gathered first and dropped after; at stages 2-3 its gradient is reduce-scattered as soon as its
// backward is done. pipeline.h runs every step through these.
static void zero_layer_forward(Zero *z, int l) {
    zero_fetch_layer(z, l, +1);
    model_layer_forward(z->model, l);
    zero_drop_layer(z, l);
}

// Stages 2-3 with buckets of n layers (slots 0..n-1 hold layers top+... down to the one just done):
// their shards are packed rank by rank, so one reduce-scatter hands every rank its shards of all n.
static void zero_flush_bucket(Zero *z, int lowest_layer, int n) {
    int W = z->comm->world, r = z->comm->rank;
    size_t sh = z->ushard[1], whole = sh * W;
    for (int q = 0; q < W; q++)
        for (int j = 0; j < n; j++)
            backend_copy(z->bucket_pack + ((size_t)q * n + j) * sh, z->layer_grad + (size_t)j * whole + (size_t)q * sh, sh);
    comm_reduce_scatter_sum(z->comm, z->bucket_pack, (size_t)n * sh);
    for (int j = 0; j < n; j++) {
        int layer = lowest_layer + (n - 1 - j);  // slot j holds the j-th layer of the bucket in backward order
        backend_add(z->gshard + z->soff[1 + layer], z->bucket_pack + ((size_t)r * n + j) * sh, sh);
    }
    backend_zero(z->layer_grad, (size_t)n * whole);
}

static void zero_layer_backward(Zero *z, int l) {
    zero_fetch_layer(z, l, -1);
    model_layer_backward(z->model, l);
    if (z->stage >= 2) {
        int slot = zero_bucket_slot(z, l);
        if (z->bucket_layers == 1) zero_bucket_done(z, 1 + l, z->layer_grad);
        else if (slot == z->bucket_layers - 1 || l == 0) zero_flush_bucket(z, l, slot + 1);
    }
    zero_drop_layer(z, l);
}

static void zero_embed_backward(Zero *z) {
    model_embed_backward(z->model);
    if (z->stage >= 2) zero_bucket_done(z, 0, z->grads);
}

// After the step's micro-batches: combine the gradients of all ranks (stages 0-1; stages 2-3 did
// it layer by layer during backward).
static void zero_reduce_gradients(Zero *z) {
    if (z->stage == 0) comm_allreduce_sum(z->comm, z->grads, z->whole_floats);
    else if (z->stage == 1)
        for (int u = 0; u < z->nu; u++) comm_reduce_scatter_sum(z->comm, z->grads + z->uoff[u], z->ushard[u]);
}

// This rank's reduced gradient of unit u (its shard, or the whole unit at stage 0).
static float *zero_grad_slice(Zero *z, int u) {
    if (z->stage == 0) return z->grads + z->uoff[u];
    if (z->stage == 1) return z->grads + z->uoff[u] + (size_t)z->comm->rank * z->ushard[u];
    return z->gshard + z->soff[u];
}

// Sum of squares of this group's combined gradient (identical on every rank of the group), in two
// calls: _start hands every unit's slice to the backend in one call (on a GPU, kernels whose partial
// sums come back with the step's one synchronisation), _finish adds them up after it. A unit that
// another group also holds (the tied outer unit on the last pipeline stage) can be skipped.
static void zero_grad_sum_squares_start(Zero *z, int skip_unit) {
    int k = 0;
    for (int u = 0; u < z->nu; u++) {
        if (u == skip_unit || z->usize[u] == 0) continue;
        z->ss_x[k] = zero_grad_slice(z, u);
        z->ss_n[k++] = z->stage == 0 ? z->usize[u] : zero_owned(z, u, z->comm->rank);
    }
    z->ss_count = k;
    backend_sum_squares_start(z->ss_x, z->ss_n, k);
}
static double zero_grad_sum_squares_finish(Zero *z) {
    backend_sum_squares_finish(z->ss_sum, z->ss_count);
    double local = 0.0;
    for (int i = 0; i < z->ss_count; i++) local += z->ss_sum[i];
    return z->stage == 0 ? local : comm_allreduce_sum_f64(z->comm, local);
}

// Global L2 norm of the combined gradient (identical on every rank).
static float zero_grad_norm(Zero *z) {
    zero_grad_sum_squares_start(z, -1);
    return (float)sqrt(zero_grad_sum_squares_finish(z));
}

// --offload-device nvme: unit u's update, piece by piece as the swap stream hands them in (master,
// m, v read; the next pieces already being read and the previous written back meanwhile).
static void zero_update_pieces(Zero *z, int u, const AdamWArgs *args) {
    size_t lo = zero_slice_lo(z, u), cnt = zero_slice_len(z, u);
    float *g = zero_grad_slice(z, u);
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        int r;
        float *rec = swap_stream_next(&z->swap, &r);
        size_t plo = z->piece_lo[p], n = cnt > plo ? (cnt - plo < z->piece_n[p] ? cnt - plo : z->piece_n[p]) : 0;
        if (r != p) internal_fault("swap stream out of step: record %d for piece %d", r, p);
        float *master = swap_array(&z->swap, rec, p, ZS_MASTER), *m = swap_array(&z->swap, rec, p, ZS_M);
        float *v = swap_array(&z->swap, rec, p, ZS_V);
        if (n > 0) {
            backend_to_host(z->hgrad, g + plo, n);
            for (int i = 0; i < z->nruns; i++) {  // [lo + plo, lo + plo + n) of the unit
                const ParamRun *run = &z->runs[i];
                size_t a, b, base = lo + plo;
                if (!run_overlap(run, u, base, n, &a, &b)) continue;
                adamw_host(master + (a - base), z->hgrad + (a - base), m + (a - base), v + (a - base), b - a, run->decayed, args);
            }
            if (!(z->offload_params && u > 0)) backend_from_host(zero_slice_params(z, u) + plo, master, n);
        }
        swap_stream_done(&z->swap);
    }
}

// Unit u's update with the state in device or host memory.
static void zero_update_unit(Zero *z, int u, const AdamWArgs *args) {
    size_t lo = zero_slice_lo(z, u), cnt = zero_slice_len(z, u), off = zero_opt_off(z, u);
    float *p = zero_slice_params(z, u);  // this rank's master copy of [lo, lo + cnt) of unit u
    float *g = zero_grad_slice(z, u);
    float *m = z->m + off, *v = z->v + off;
    if (z->offload && cnt > 0) {  // the update runs on the host copies; the device gets the result
        backend_offload_wait(u);  // the gradient's copy, started by zero_update
        p = z->hmaster + off;
        g = z->hgrad + off;
    }
    // weight decay differs between the unit's tensors: walk the runs that overlap [lo, lo + cnt)
    for (int i = 0; i < z->nruns; i++) {
        const ParamRun *run = &z->runs[i];
        size_t a, b;
        if (!run_overlap(run, u, lo, cnt, &a, &b)) continue;
        if (z->offload) adamw_host(p + (a - lo), g + (a - lo), m + (a - lo), v + (a - lo), b - a, run->decayed, args);
        else backend_adamw(p + (a - lo), g + (a - lo), m + (a - lo), v + (a - lo), b - a, run->decayed, args);
    }
    if (z->offload && cnt > 0 && !(z->offload_params && u > 0)) backend_offload_from_host(zero_slice_params(z, u), z->hmaster + off, cnt);
}

static void zero_update(Zero *z, const AdamWArgs *args) {
    if (z->stage == 3) {  // gathered copies of the old weights are stale from here on
        if (z->prefetch_layer >= 0) { comm_wait(z->comm, &z->prefetch); z->prefetch_layer = -1; }
        z->slot_layer[0] = z->slot_layer[1] = -1;
    }
    if (z->nvme) swap_stream_begin(&z->swap, 0, z->swap.nrec);
    int host_tier = z->offload && !z->nvme;
    if (host_tier) {  // every unit's gradient on its way to the host at once; each unit waits for its own
        backend_offload_begin();
        for (int u = 0; u < z->nu; u++) {
            size_t cnt = zero_slice_len(z, u);
            if (cnt > 0) backend_offload_to_host(z->hgrad + zero_opt_off(z, u), zero_grad_slice(z, u), cnt, u);
        }
    }
    for (int u = 0; u < z->nu; u++) {
        if (z->nvme) zero_update_pieces(z, u, args); else zero_update_unit(z, u, args);
        if (z->stage >= 1 && (z->stage <= 2 || u == 0)) {
            if (host_tier) backend_offload_end();  // the all-gather reads what was just copied back
            comm_allgather(z->comm, z->params + z->uoff[u], z->ushard[u]);
        }
    }
    if (host_tier) backend_offload_end();
    if (z->nvme) swap_stream_end(&z->swap);
    model_weights_changed(z->model, (uint64_t)args->t);
}

#endif
