// zero.h: data parallelism with ZeRO sharding of the optimizer, written once for every build. It
// never touches memory itself: it moves the model's buffers with comm.h and updates them with the
// build's backend (model_params, model_grads, model_adamw_range, backend_sum_squares,
// backend_alloc/free, backend_to_host/from_host), so the same logic runs on host memory with MPI
// and on GPU memory with NCCL.
//
//   stage 0: gradients are all-reduced; every rank keeps all of AdamW's moments and updates every
//            parameter (identically).
//   stage 1: gradients are reduce-scattered; rank r keeps the moments of its shard only, updates
//            that shard of the parameters, and the shards are all-gathered after the step.
// The model's buffers are padded to world * shard floats (comm_padded_size); the padding stays 0.
// Gradients are sums over ranks of per-rank sums already scaled by 1 / (tokens in the whole step),
// so the result is the exact token mean of the step.
#ifndef ZERO_H
#define ZERO_H

#include "comm.h"

typedef struct {
    int stage;
    Comm *comm;
    size_t n;          // real parameters
    size_t shard;      // floats per rank's shard
    size_t lo, hi;     // this rank's parameters [lo, hi), hi clamped to n
    float *m, *v;      // AdamW moments: all n at stage 0, the shard at stage 1 (backend memory)
    size_t opt_floats; // floats of optimizer state this rank holds
} Zero;

static void zero_init(Zero *z, Comm *comm, int stage, size_t n) {
    memset(z, 0, sizeof(*z));
    z->stage = stage;
    z->comm = comm;
    z->n = n;
    z->shard = comm_shard_size(n, comm->world);
    if (stage == 0) {
        z->lo = 0;
        z->hi = n;
    } else {
        z->lo = (size_t)comm->rank * z->shard;
        z->hi = z->lo + z->shard < n ? z->lo + z->shard : n;
        if (z->lo > n) z->lo = n;
    }
    z->opt_floats = stage == 0 ? n : z->shard;
    z->m = backend_alloc(z->opt_floats);
    z->v = backend_alloc(z->opt_floats);
}

static void zero_free(Zero *z) {
    backend_free(z->m);
    backend_free(z->v);
}

// Bytes of AdamW state per rank, for the memory plan.
static size_t zero_optimizer_bytes(int stage, size_t n, int world) {
    return 2 * (stage == 0 ? n : comm_shard_size(n, world)) * sizeof(float);
}

// After the step's backward passes: combine the gradients of all ranks.
static void zero_reduce_gradients(Zero *z, Model *model) {
    if (z->stage == 0) comm_allreduce_sum(z->comm, model_grads(model), comm_padded_size(z->n, z->comm->world));
    else comm_reduce_scatter_sum(z->comm, model_grads(model), z->shard);
}

// Global L2 norm of the combined gradient (identical on every rank).
static float zero_grad_norm(Zero *z, Model *model) {
    if (z->stage == 0) return (float)sqrt(backend_sum_squares(model_grads(model), z->n));
    double local = backend_sum_squares(model_grads(model) + z->lo, z->hi - z->lo);
    return (float)sqrt(comm_allreduce_sum_f64(z->comm, local));
}

static void zero_update(Zero *z, Model *model, const AdamWArgs *args) {
    model_adamw_range(model, z->m, z->v, z->lo, z->hi, args);
    if (z->stage >= 1) comm_allgather(z->comm, model_params(model), z->shard);
}

// Whole moments on the host of every rank (for a checkpoint); m_host and v_host hold n floats.
static void zero_get_opt_state(Zero *z, float *m_host, float *v_host) {
    if (z->stage == 0) {
        backend_to_host(m_host, z->m, z->n);
        backend_to_host(v_host, z->v, z->n);
        return;
    }
    size_t np = comm_padded_size(z->n, z->comm->world);
    float *buf = (float *)callocCheck(np, sizeof(float));
    float *dst[2] = {m_host, v_host}, *src[2] = {z->m, z->v};
    for (int k = 0; k < 2; k++) {
        backend_to_host(buf + (size_t)z->comm->rank * z->shard, src[k], z->shard);
        comm_allgather(z->comm, buf, z->shard);
        memcpy(dst[k], buf, z->n * sizeof(float));
    }
    free(buf);
}

// Takes this rank's part of whole moments (from a checkpoint written by any layout).
static void zero_set_opt_state(Zero *z, const float *m_host, const float *v_host) {
    size_t count = z->hi - z->lo;
    float *tmp = (float *)callocCheck(z->opt_floats, sizeof(float));
    memcpy(tmp, m_host + z->lo, count * sizeof(float));
    backend_from_host(z->m, tmp, z->opt_floats);
    memcpy(tmp, v_host + z->lo, count * sizeof(float));
    backend_from_host(z->v, tmp, z->opt_floats);
    free(tmp);
}

#endif
