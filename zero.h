// zero.h: data parallelism with ZeRO sharding, written once for every build. It owns the model's
// parameter, gradient and optimizer memory, and drives the model's forward and backward unit by
// unit (gpt2.h's units: the outer unit with the embeddings, then one unit per layer). It never
// touches memory itself: it moves buffers with comm.h and works on them with the build's backend
// (backend_alloc_state/free/copy/zero/add/to_host/from_host, backend_sum_squares_start/finish), the run's
// optimizer (optim/optimizer.h: the state of a slice, the step of a slice, never naming which) and the
// model's pieces (model_set_unit, model_embed_forward, model_layer_forward, model_head_forward,
// model_head_backward, model_layer_backward, model_embed_backward). So the same logic runs on host
// memory with MPI and on GPU memory with NCCL.
//
// Every unit is cut into `world` equal shards (the last one padded). Rank r's slice of a unit is what
// it updates: shard r at stages 1-3; the whole unit at stage 0, where every rank owns everything.
//   stage 0: every rank holds all parameters, gradients and optimizer state; gradients are all-reduced
//            after the step's micro-batches and every rank updates everything (identically).
//   stage 1: the optimizer's state is sharded: gradients are reduce-scattered after the micro-batches,
//            each rank updates its shards, and the parameters are all-gathered.
//   stage 2: gradients are sharded too: each layer's gradient is reduce-scattered as soon as that
//            layer's backward is done (the bucket is the layer), so a rank holds its gradient shards,
//            the outer unit's gradient and one layer's gradient, never the whole.
//   stage 3: parameters are sharded too: each layer's weights are all-gathered just before its
//            forward and again before its backward, into one of two buffers, and dropped after. The
//            outer unit (embeddings, final norm, head) is sharded like a layer's: its master, gradient
//            and optimizer shards are 1/N, and it is all-gathered whole at its first use after an
//            update (the embedding's forward, or the head's at the last pipeline stage), into the one
//            buffer both ends read (a tied embedding's one tensor), where it stays until the next update.
//            The whole units gathered (the outer unit, two layers) and the whole gradients being
//            reduced (the outer unit's, a bucket of layers') are the stage's working set (the plan's row).
// Gradients are sums over ranks of per-rank sums already scaled by 1 / (tokens in the whole step),
// so the result is the exact token mean of the step whatever the layout.
//
// Where this rank's sums of squares are the whole gradient norm (zero_update_on_device), a step's
// update is issued right after its backward, the device deciding clipping and skipping itself
// (backend_update_verdict, zero_update_now). Elsewhere the host decides it after the step's one
// synchronisation and the update runs there, where the step ends (zero_update). Either way a step leaves
// nothing pending: whatever reads the parameters after it (evaluation, sampling, a checkpoint, the next
// step) reads them updated, and reading them changes nothing.
//
// --offload optimizer|params keeps the optimizer's state and the master copy of this rank's parameters off
// the device, in a host tier: host memory, or with --offload-device nvme records of a swap file
// (swap.h). Each unit's slice of that state is cut into pieces of at most a ring buffer's size; the
// update streams the pieces through swap.h's ring, so the next piece is read and the previous
// written back while one is updated. Which of the three stores (device, host, NVMe) holds the
// optimizer's state is chosen once, at zero_init; only the store's functions know which it is.
#ifndef ZERO_H
#define ZERO_H

#include "zero/zero_store.h"  // and through it zero_layout.h: the record, its slices and the optimizer's stores


// The run's optimizer on this layout (optimizer.h): its view of the units and slices, opened, and the rooms it asks
// for each state array, unit by unit. Before the store opens, which allocates them.
static void zero_open_optimizer(Zero *z, Optimizer *opt, int streamed) {
    z->opt = opt;
    OptLayout *l = &opt->lay;
    *l = (OptLayout){&z->config, z->model, z->stage, z->nu, z->comm, z->tp, z->usize,
                     z->ushard, z->slo, z->slen, z->sspan, z->runs, z->nruns, z->offload, streamed};
    opt->ops->open(opt);
    for (int a = 0; a < OPT_ARRAYS; a++) {
        z->aoff[a] = (size_t *)callocCheck(z->nu, sizeof(size_t));
        for (int u = 0; u < z->nu; u++) {
            z->aoff[a][u] = z->state_floats[a];
            z->state_floats[a] += opt->ops->room(opt, a, u);
        }
    }
}

// The device store's table: every unit's slice, made once, at zero_init, when every buffer it points into exists
// (the model's working copies too, which the optimizer may write in the same pass at stage 0).
static void zero_device_plan(Zero *z) {
    OptPiece *units = (OptPiece *)callocCheck(z->nu, sizeof(OptPiece));
    for (int u = 0; u < z->nu; u++)
        units[u] = z->slen[u] ? zero_slice_piece(z, u, zero_master(z, u), zero_grad_slice(z, u)) : (OptPiece){u, 0, 0, NULL, NULL, {NULL}};
    z->opt->ops->device_plan(z->opt, units);
    free(units);
}

// nvme_path: with --offload-device nvme, the directory of the swap file (NULL: host memory), whose
// ring buffers are nvme_buffer_bytes each; `note` receives what swap_open says the user should know.
static void zero_init(Zero *z, Comm *comm, int stage, Model *model, const int *held, size_t bucket_bytes, int offload,
                      int offload_params, const char *nvme_path, size_t nvme_buffer_bytes, char *note, size_t note_len,
                      Optimizer *opt) {
    memset(z, 0, sizeof(*z));
    z->stage = stage;
    z->comm = comm;
    z->model = model;
    z->tp = model->tp;  // --tp: the rank's TP group (NULL without), whose API (tensor_parallel.h) ZeRO calls
    z->config = model->config;
    z->nu = model_num_units(&z->config);
    z->L = z->config.num_layers;
    z->bucket_layers = zero_bucket_layers(&z->config, comm->world, bucket_bytes);
    size_t **per_unit[] = {&z->usize, &z->ushard, &z->uoff, &z->slo, &z->slen, &z->sspan, &z->soff};
    for (size_t i = 0; i < sizeof(per_unit) / sizeof(per_unit[0]); i++) *per_unit[i] = (size_t *)callocCheck(z->nu, sizeof(size_t));
    int W = comm->world;
    for (int u = 0; u < z->nu; u++) {
        z->usize[u] = zero_unit_size(&z->config, u, held);
        z->ushard[u] = comm_shard_size(z->usize[u], W);
        z->slo[u] = stage == 0 ? 0 : (size_t)comm->rank * z->ushard[u];
        z->slen[u] = stage == 0 ? z->usize[u] : zero_owned(z, u, comm->rank);
        z->sspan[u] = zero_slice_span(stage, z->ushard[u], W);
        z->uoff[u] = z->whole_floats;
        z->soff[u] = z->slice_floats;
        z->whole_floats += z->ushard[u] * W;
        z->slice_floats += z->sspan[u];
    }
    z->runs = (ParamRun *)mallocCheck(model_max_runs(&z->config) * sizeof(ParamRun));
    z->nruns = model_param_runs(&z->config, z->runs);
    z->ends = ARCH_END_BOTH;  // until zero_tie_outer_unit says this is one end of a pipeline (the config's ends)
    // the norm's pieces: a slice per unit (the outer unit's: up to one per run, zero_counted_pieces), or with --tp
    // each of those less the replicas others count
    size_t outer_runs = 0;
    for (int i = 0; i < z->nruns; i++) outer_runs += z->runs[i].unit == 0;
    size_t npieces = z->nu + outer_runs, nss = npieces + npieces * (size_t)tp_counted_max(z->tp);
    z->ss_x = (const float **)callocCheck(nss, sizeof(float *));
    z->ss_n = (size_t *)callocCheck(nss, sizeof(size_t));
    z->ss_sum = (double *)callocCheck(nss, sizeof(double));
    z->ss_piece = (size_t *)callocCheck(2 * ((size_t)z->nruns + 1), sizeof(size_t));
    if (z->tp) z->ss_tp = (size_t *)callocCheck(2 * (size_t)tp_counted_max(z->tp), sizeof(size_t));
    size_t outer = z->ushard[0] * W, layer = 0;
    for (int u = 1; u < z->nu; u++) if (z->ushard[u] * W > layer) layer = z->ushard[u] * W;
    z->params = backend_alloc_state(stage <= 2 ? z->whole_floats : outer);
    z->grads = backend_alloc_state(stage <= 1 ? z->whole_floats : outer);
    if (stage >= 2) {
        z->layer_grad = backend_alloc_state((size_t)z->bucket_layers * layer);
        if (z->bucket_layers > 1) z->bucket_pack = backend_alloc_state((size_t)z->bucket_layers * layer);
        z->gshard = backend_alloc_state(z->slice_floats);
    }
    if (stage == 3) {
        z->layer_param[0] = backend_alloc_state(layer);
        z->layer_param[1] = backend_alloc_state(layer);
        z->slot_layer[0] = z->slot_layer[1] = -1;
        z->prefetch_layer = -1;
        if (!offload_params) z->pshard = backend_alloc_state(z->slice_floats);
    }
    z->offload = offload || offload_params;
    z->offload_params = offload_params;
    zero_open_optimizer(z, opt, z->offload && nvme_path);  // before the store: the rooms of its arrays are the optimizer's
    zero_store_open(z, z->offload ? nvme_path : NULL, nvme_buffer_bytes, note, note_len);
    for (int u = 0; u < z->nu; u++)  // at stage 3 the outer unit's gathered buffer, filled at its first use
        zero_point_unit(z, u, (zero_resident(z, u) || u == 0) && z->usize[u] > 0 ? z->params + z->uoff[u] : NULL);
    if (z->store == &ZERO_STORE_DEVICE) zero_device_plan(z);  // now: its copy to the device waits for it
    z->norm_slots = (float *)backend_alloc_scratch(2 * (size_t)W * sizeof(float));
}

// --pp: this stage is one end of a pipeline (its config's ends, ARCH_END_ bits), whose outer unit holds only the outer
// tensors that end uses (arch_param_held: the first stage the embedding and GPT-2's positions, the last the final norm
// and the head), so its params, gradients, optimizer state and shards are those alone. A tensor both ends use (a tied
// embedding) is held at both, over `tied` (the first and the last stage of this data-parallel rank): its gradients
// are summed over the pair before the data-parallel reduction (zero_reduce_gradients), and the norm and the
// checkpoint take it from the input end (zero_counts_run).
static void zero_tie_outer_unit(Zero *z, Comm *tied) {
    if (z->config.ends != ARCH_END_INPUT && z->config.ends != ARCH_END_OUTPUT)
        internal_fault("zero_tie_outer_unit on a stage whose config holds no one end (ends %d)", z->config.ends);
    z->tied = tied;
    z->ends = z->config.ends;
}

// Whether this stage counts run r in the norm and the checkpoint: a layer's, yes (one stage holds it); an outer
// tensor's at the end that uses it, the input end where both do.
static int zero_counts_run(const Zero *z, const ParamRun *r) {
    if (r->unit != 0) return 1;
    return (z->ends & (r->ends & ARCH_END_INPUT ? ARCH_END_INPUT : ARCH_END_OUTPUT)) != 0;
}

// The pieces of unit u's slice that this stage counts, as offsets in the unit and lengths, adjacent runs merged:
// the whole slice but for the outer unit at an end of a pipeline. Returns their count (at most the unit's runs).
static int zero_counted_pieces(const Zero *z, int u, size_t *off, size_t *len) {
    if (u != 0 || z->ends == ARCH_END_BOTH) { off[0] = z->slo[u]; len[0] = z->slen[u]; return 1; }
    int k = 0;
    for (int i = 0; i < z->nruns; i++) {
        size_t a, b;
        if (!zero_counts_run(z, &z->runs[i]) || !run_overlap(&z->runs[i], u, z->slo[u], z->slen[u], &a, &b)) continue;
        if (k > 0 && off[k - 1] + len[k - 1] == a) len[k - 1] += b - a;
        else { off[k] = a; len[k++] = b - a; }
    }
    return k;
}

static void zero_free(Zero *z) {
    z->opt->ops->close(z->opt);
    for (int a = 0; a < OPT_ARRAYS; a++) free(z->aoff[a]);
    backend_free(z->norm_slots);
    float *bufs[] = {z->params, z->grads, z->layer_grad, z->bucket_pack, z->layer_param[0], z->layer_param[1], z->pshard, z->gshard};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) if (bufs[i]) backend_free(bufs[i]);
    z->store->close(z);
    free(z->usize); free(z->ushard); free(z->uoff); free(z->slo); free(z->slen); free(z->sspan); free(z->soff); free(z->runs);
    free(z->ss_x); free(z->ss_n); free(z->ss_sum); free(z->ss_tp); free(z->ss_piece);
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

// The widest padded unit, for host buffers that hold one unit at a time.
static size_t zero_max_whole(const Zero *z) {
    size_t maxw = 0;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] * z->comm->world > maxw) maxw = z->ushard[u] * z->comm->world;
    return maxw;
}

// Stage 3: unit u whole in buf: this rank's master shard put in place, then the all-gather.
static void zero_gather_layer(Zero *z, int u, float *buf) {
    zero_master_into(z, u, buf + (size_t)z->comm->rank * z->ushard[u]);
    comm_allgather(z->comm, buf, z->ushard[u]);
}

// Stage 3: the outer unit whole in params (where the model points for it) unless it is there since the last
// update: the embedding's forward and the head's call it, so each end gathers it once per step.
static void zero_fetch_outer(Zero *z) {
    if (z->stage < 3 || z->outer_gathered || z->usize[0] == 0) return;
    zero_gather_layer(z, 0, z->params);
    z->outer_gathered = 1;
}

// Loads the whole model (llm.c flat order, host) into this rank's share of it; `updates` is how many
// updates those parameters have had (0 for a fresh model, the state file's count on resume).
static void zero_load_params(Zero *z, const float *flat, int updates) {
    if (z->stage == 3) z->slot_layer[0] = z->slot_layer[1] = -1;
    z->outer_gathered = 0;
    size_t maxw = zero_max_whole(z);
    float *whole = (float *)callocCheck(maxw, sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        memset(whole, 0, maxw * sizeof(float));
        unit_from_flat(z, u, flat, whole);
        float *master = zero_master(z, u);
        if (zero_resident(z, u)) backend_from_host(z->params + z->uoff[u], whole, z->ushard[u] * z->comm->world);
        else if (master) backend_from_host(master, whole + z->slo[u], z->ushard[u]);
        if (z->offload) z->store->put(z, ZS_MASTER, u, whole + z->slo[u], z->slen[u]);
    }
    free(whole);
    model_weights_changed(z->model, (uint64_t)updates);
}

// The whole model in llm.c's flat order on the host of every rank (for checkpoints).
static void zero_get_params(Zero *z, float *flat) {
    float *whole = (float *)mallocCheck(zero_max_whole(z) * sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        const float *src = z->params + (zero_resident(z, u) ? z->uoff[u] : 0);
        if (!zero_resident(z, u) && u == 0) zero_fetch_outer(z);  // into params, as its next use would
        else if (!zero_resident(z, u)) {
            zero_gather_layer(z, u, z->layer_param[0]);
            z->slot_layer[0] = u - 1;
            src = z->layer_param[0];
        }
        backend_to_host(whole, src, z->usize[u]);
        unit_to_flat(z, u, whole, flat);
    }
    free(whole);
}

// For a checkpoint that every rank writes a part of: floats [lo, lo + cnt) of unit u, inside this
// rank's slice, of the parameters (ZS_MASTER), or of the optimizer's state arrays (ZS_M, ZS_V, in the slice's shape), to the host.
static void zero_read_owned(Zero *z, int a, int u, size_t lo, size_t cnt, float *dst) {
    const float *master = zero_master(z, u);
    if (a == ZS_MASTER && master) backend_to_host(dst, master + (lo - z->slo[u]), cnt);
    else z->store->get(z, a, u, lo - z->slo[u], cnt, dst);
}

// Takes this rank's part of whole moments in flat order (from a checkpoint of any layout).
static void zero_set_opt_state(Zero *z, const float *m_flat, const float *v_flat) {
    size_t maxw = zero_max_whole(z);
    float *whole = (float *)callocCheck(maxw, sizeof(float));
    const float *src[2] = {m_flat, v_flat};
    for (int k = 0; k < 2; k++)
        for (int u = 0; u < z->nu; u++) {
            if (z->usize[u] == 0) continue;
            memset(whole, 0, maxw * sizeof(float));
            unit_from_flat(z, u, src[k], whole);
            z->store->put(z, k ? ZS_V : ZS_M, u, whole + z->slo[u], z->sspan[u]);
        }
    free(whole);
}

// ----------------------------------------------------------------------------
// The step.

// The gradients cleared for a new step (the last step's update, which read them, is done).
static void zero_clear_grads(Zero *z) {
    if (z->stage <= 1) backend_zero_state(z->grads, z->whole_floats);
    else {
        backend_zero_state(z->grads, z->ushard[0] * z->comm->world);
        backend_zero_state(z->gshard, z->slice_floats);
    }
}

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
        zero_master_into(z, 1 + next, buf + (size_t)z->comm->rank * z->ushard[1 + next]);
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
    tp_sum_grads(z->tp, u, buf);  // --tp: the parts of replicated tensors completed first
    comm_reduce_scatter_sum(z->comm, buf, z->ushard[u]);
    backend_add(z->gshard + z->soff[u], buf + (size_t)z->comm->rank * z->ushard[u], z->ushard[u]);
    backend_zero_state(buf, z->ushard[u] * z->comm->world);
}

// The embedding's forward (the first pipeline stage's).
static void zero_embed_forward(Zero *z, const int *inputs, int B, int T) {
    zero_fetch_outer(z);
    model_embed_forward(z->model, inputs, B, T);
}

// The head's forward (the last pipeline stage's): the final norm, the logits and the loss.
static void zero_head_forward(Zero *z, const int *targets, float dloss) {
    zero_fetch_outer(z);
    model_head_forward(z->model, targets, dloss);
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
    for (int j = 0; j < n; j++) tp_sum_grads(z->tp, 1 + lowest_layer + (n - 1 - j), z->layer_grad + (size_t)j * whole);
    for (int q = 0; q < W; q++)
        for (int j = 0; j < n; j++)
            backend_copy(z->bucket_pack + ((size_t)q * n + j) * sh, z->layer_grad + (size_t)j * whole + (size_t)q * sh, sh);
    comm_reduce_scatter_sum(z->comm, z->bucket_pack, (size_t)n * sh);
    for (int j = 0; j < n; j++) {
        int layer = lowest_layer + (n - 1 - j);  // slot j holds the j-th layer of the bucket in backward order
        backend_add(z->gshard + z->soff[1 + layer], z->bucket_pack + ((size_t)r * n + j) * sh, sh);
    }
    backend_zero_state(z->layer_grad, (size_t)n * whole);
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

// tokens 0: the position table's part alone, at a pipeline's input end whose token table the output end updates
// (zero_ties_ends).
static void zero_embed_backward_tables(Zero *z, int tokens) {
    model_embed_backward_tables(z->model, tokens, z->model->cur_B, z->model->cur_T);
    if (z->stage >= 2) zero_bucket_done(z, 0, z->grads);
}
static void zero_embed_backward(Zero *z) { zero_embed_backward_tables(z, 1); }

// --pp: whether this end stage holds an outer tensor both ends use (the table's ends: a tied embedding, the input end's
// lookup and the output end's classifier). Then the output end adds both parts, in one process's order (pipeline.h):
// the input end adds only its own tables (model_embed_backward_tables) and sends the embedding output's gradient.
static int zero_ties_ends(const Zero *z) { return z->tied && model_ties_ends(&z->config); }

// --pp: the gradients of the outer tensors both ends use (a tied embedding) made whole at both end stages, runs
// adjacent where every outer tensor is held in one call (so both ends, whose units pack different tensors around
// them, make the same calls). The output end holds the whole sum (pipeline.h adds the input end's lookup part there, in
// one process's order), the input end zeros, so the sum is a copy bit for bit: x + 0 = x, and a gradient accumulated
// from +0 is never -0.
static void zero_sum_tied(Zero *z) {
    for (int i = 0; i < z->nruns; i++) {
        const ParamRun *r = &z->runs[i];
        if (r->unit != 0 || r->ends != ARCH_END_BOTH) continue;
        size_t n = r->len;
        while (i + 1 < z->nruns && z->runs[i + 1].unit == 0 && z->runs[i + 1].ends == ARCH_END_BOTH &&
               z->runs[i + 1].unit_off == r->unit_off + n && z->runs[i + 1].full_off == r->full_off + n)
            n += z->runs[++i].len;
        comm_allreduce_sum(z->tied, z->grads + z->uoff[0] + r->unit_off, n);
    }
}

// After the step's micro-batches: the tied outer tensors' gradients summed over the pipeline's end stages
// (zero_sum_tied), then the gradients of all ranks combined (stages 0-1; stages 2-3 did it layer by layer
// during backward).
static void zero_reduce_gradients(Zero *z) {
    if (z->stage <= 1)  // --tp: the parts of replicated tensors completed (stages 2-3: per layer, zero_bucket_done)
        for (int u = 0; u < z->nu; u++) if (z->usize[u]) tp_sum_grads(z->tp, u, z->grads + z->uoff[u]);
    if (z->tied) zero_sum_tied(z);
    if (z->stage == 0) comm_allreduce_sum(z->comm, z->grads, z->whole_floats);
    else if (z->stage == 1)
        for (int u = 0; u < z->nu; u++) comm_reduce_scatter_sum(z->comm, z->grads + z->uoff[u], z->ushard[u]);
}

// Sum of squares of this group's combined gradient (identical on every rank of the group), in two
// calls: _start hands every unit's slice to the backend in one call (on a GPU, kernels whose partial
// sums come back with the step's one synchronisation), _finish adds them up after it. What another group
// counts is left out: at a pipeline's end, the outer tensors the other end counts (zero_counted_pieces).
static void zero_grad_sum_squares_start(Zero *z) {
    int k = 0;
    TpGroup *tp = z->tp;
    size_t *poff = z->ss_piece, *plen = z->ss_piece + z->nruns + 1;
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        int np = zero_counted_pieces(z, u, poff, plen);
        for (int p = 0; p < np; p++) {
            if (!tp) { z->ss_x[k] = zero_grad_slice(z, u) + (poff[p] - z->slo[u]); z->ss_n[k++] = plen[p]; continue; }
            // --tp: a replica another TP rank counts is left out (ss arrays sized for the pieces: zero_init)
            size_t *off = z->ss_tp, *len = z->ss_tp + tp_counted_max(tp);
            int nt = tp_counted(tp, u, poff[p], plen[p], off, len);
            for (int i = 0; i < nt; i++) { z->ss_x[k] = zero_grad_slice(z, u) + (off[i] - z->slo[u]); z->ss_n[k++] = len[i]; }
        }
    }
    z->ss_count = k;
    backend_sum_squares_start(z->ss_x, z->ss_n, k);
}
static double zero_grad_sum_squares_finish(Zero *z) {
    backend_sum_squares_finish(z->ss_sum, z->ss_count);
    double local = 0.0;
    for (int i = 0; i < z->ss_count; i++) local += z->ss_sum[i];
    local = tp_norm_sum(z->tp, local);  // --tp: the TP ranks' slices
    if (z->stage == 0 || z->comm->world == 1) return local;  // at stage 0 every rank has it all
    // the ranks' sums added in rank order, as the device's verdict adds them (zero_update_verdict)
    double *all = (double *)mallocCheck(z->comm->world * sizeof(double)), sum = 0.0;
    comm_allgather_bytes(z->comm, &local, all, sizeof(double));
    for (int r = 0; r < z->comm->world; r++) sum += all[r];
    free(all);
    return sum;
}

// Global L2 norm of the combined gradient (identical on every rank).
static float zero_grad_norm(Zero *z) {
    zero_grad_sum_squares_start(z);
    return (float)sqrt(zero_grad_sum_squares_finish(z));
}

// The update now, every unit's slice in the store, then the parameters all-gathered where shards of
// a resident unit were updated (stages 1-3; at stage 3 the layers are gathered at their next use).
// verdict: the gradients' scale and the skip come from the device (backend_update_verdict; device store only).
static void zero_update_with(Zero *z, const OptStep *s, int verdict) {
    if (z->stage == 3) {  // gathered copies of the old weights are stale from here on
        if (z->prefetch_layer >= 0) { comm_wait(z->comm, &z->prefetch); z->prefetch_layer = -1; }
        z->slot_layer[0] = z->slot_layer[1] = -1;
        z->outer_gathered = 0;
    }
    int device = z->store == &ZERO_STORE_DEVICE;
    z->store->begin(z, s, verdict);  // the device store: every unit's slice, one launch
    for (int u = 0; u < z->nu; u++) {
        z->store->update(z, u, s);
        if (z->stage >= 1 && zero_resident(z, u)) {
            z->store->join(z);  // the all-gather reads what was just copied back
            comm_allgather(z->comm, z->params + z->uoff[u], z->ushard[u]);
        }
    }
    z->store->end(z);
    if (device && z->opt->fused) model_weights_converted(z->model, (uint64_t)s->t);
    else model_weights_changed(z->model, (uint64_t)s->t);
}
static void zero_update(Zero *z, const OptStep *s) { zero_update_with(z, s, 0); }

// Whether the step's update can be issued before the host has seen the norm: the optimizer runs on the device and takes its verdict, and
// the device can add the ranks' sums of squares up itself: the whole norm is this rank's (stage 0, one rank),
// or the ranks exchange their sums without the host waiting (the device transport, or host memory). Not
// across pipeline stages: the caller knows whether there are several, and each outer tensor is counted by one end.
static int zero_update_on_device(const Zero *z) {
    int local = z->stage == 0 || z->comm->world == 1;
    int exchange = z->comm->transport != COMM_MPI_STAGED;
    return z->store == &ZERO_STORE_DEVICE && (local || exchange) && !z->tied && !z->tp && z->opt->ops->device_verdict;
}

// The device's verdict on this step's update (backend.h): this rank's sum of squares, every rank's gathered
// where they hold different slices (in rank order, as zero_grad_sum_squares_finish adds them), and the verdict.
static void zero_update_verdict(Zero *z, float loss_scale, float clip) {
    int W = z->comm->world, shared = z->stage > 0 && W > 1;
    float *mine = z->norm_slots + 2 * (size_t)(shared ? z->comm->rank : 0);
    backend_norm_local(mine);
    if (shared) comm_allgather(z->comm, z->norm_slots, 2);
    backend_update_verdict(z->norm_slots, shared ? W : 1, loss_scale, clip);
}

// The step's update, issued right after its backward with the device's verdict (zero_update_on_device);
// args->t is the update count if the device does not skip it. If the host later learns that it did
// (zero_update_skipped), the weights and the rounding's version stay as they were.
static void zero_update_now(Zero *z, const OptStep *s) {
    zero_update_with(z, s, 1);
}
static void zero_update_skipped(Zero *z, int updates) { model_weights_kept(z->model, (uint64_t)updates); }

#endif
