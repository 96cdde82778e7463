// zero_store.h: the three homes of zero.h's optimizer state, one of which zero_init chooses at
// start-up (zero_store_open): device memory, where the optimizer steps it on the device; host memory
// (--offload), where it steps it on the host beside a host master copy of this rank's parameters; and
// a swap file (--offload-device nvme, swap.h), whose records zero.h's update streams piece by piece.
// Each asks the optimizer (optim/optimizer.h) for the state of a slice and to step it, never naming one.
// Each home implements ZeroStore (zero.h), so zero.h's update, checkpoint reads and loads never ask
// which it is. Stands on zero_layout.h (the record and its slices); serves only zero.h.
#ifndef ZERO_STORE_H
#define ZERO_STORE_H

#include "zero_layout.h"

static float *zero_store_array(Zero *z, int a, int u) {
    return a == ZS_MASTER ? z->hmaster + z->soff[u] : z->state[a - ZS_M] + z->aoff[a - ZS_M][u];
}
static void zero_store_nothing(Zero *z) { (void)z; }

// Slice positions [lo, lo + n) of unit u's state array a (ZS_M, ZS_V) to the host in the slice's shape (zeros
// where the optimizer keeps no place) or from it (those left out), through the optimizer's index; host_tier: the
// array is host memory.
static void zero_state_transfer(Zero *z, int a, int u, size_t lo, size_t n, float *host, int to_host, int host_tier) {
    const Optimizer *o = z->opt;
    float *base = zero_store_array(z, a, u);
    for (size_t cur = lo, end = lo + n, until; cur < end; cur = until) {
        int kept = o->ops->kept(o, a - ZS_M, u, cur, &until);
        if (until > end) until = end;
        if (until <= cur) internal_fault("optimizer %s: no progress in unit %d's state at %zu", o->ops->name, u, cur);
        size_t k = until - cur;
        float *at = host + (cur - lo);
        if (!kept) { if (to_host) memset(at, 0, k * sizeof(float)); continue; }
        float *s = base + o->ops->index(o, a - ZS_M, u, cur);
        if (host_tier) memcpy(to_host ? at : s, to_host ? s : at, k * sizeof(float));
        else if (to_host) backend_to_host(at, s, k);
        else backend_from_host(s, at, k);
    }
}

// Unit u's slice as the optimizer sees it where the state is in memory: the master, the gradient and the rooms.
static OptPiece zero_slice_piece(Zero *z, int u, float *p, const float *g) {
    OptPiece pc = {u, z->slo[u], z->slen[u], p, g, {NULL}};
    for (int a = 0; a < OPT_ARRAYS; a++) pc.state[a] = z->state[a] + z->aoff[a][u];
    return pc;
}

// The host tiers' whole-unit work between two passes (the optimizer's collectives): their buffers are host
// memory, which MPI takes as it is, whatever way the groups move device memory (the CUDA build's staging and
// device transport read device memory).
static void zero_host_between(Zero *z, int pass, int u, const OptStep *s) {
    Comm *tp = tp_comm(z->tp);
    CommTransport device = z->comm->transport, tp_device = tp ? tp->transport : device;
    if (z->comm->world > 1) z->comm->transport = COMM_MPI_HOST;
    if (tp) tp->transport = COMM_MPI_HOST;
    z->opt->ops->between(z->opt, pass, u, s);
    z->comm->transport = device;
    if (tp) tp->transport = tp_device;
}

// ---- device memory: the state arrays beside the parameters, stepped by the optimizer on the device
static void store_device_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) { zero_state_transfer(z, a, u, lo, n, dst, 1, 0); }
static void store_device_put(Zero *z, int a, int u, const float *src, size_t n) { zero_state_transfer(z, a, u, 0, n, (float *)src, 0, 0); }
// The master copy is the device's own (zero_master), never only in this store.
static void store_device_master(Zero *z, int u, float *dst) { backend_copy(dst, zero_master(z, u), z->ushard[u]); }
// The optimizer's launch over every unit's slice (its device table, made at zero_init), with the device's verdict
// or without; then each unit's own work (an optimizer that needs whole matrices).
static void store_device_begin(Zero *z, const OptStep *s, int verdict) { z->opt->ops->device_begin(z->opt, s, verdict); }
static void store_device_update(Zero *z, int u, const OptStep *s) {
    OptPiece pc = zero_slice_piece(z, u, zero_master(z, u), zero_grad_slice(z, u));
    z->opt->ops->device_unit(z->opt, &pc, s);
}
static void store_device_close(Zero *z) { for (int a = 0; a < OPT_ARRAYS; a++) backend_free(z->state[a]); }

// ---- host memory (--offload): every unit's gradient leaves for the host at once (begin), each unit
// waits only for its own, and its updated master goes back while the host updates the next
static void store_host_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) {
    if (a != ZS_MASTER) { zero_state_transfer(z, a, u, lo, n, dst, 1, 1); return; }
    memcpy(dst, zero_store_array(z, a, u) + lo, n * sizeof(float));
}
static void store_host_put(Zero *z, int a, int u, const float *src, size_t n) {
    if (a != ZS_MASTER) { zero_state_transfer(z, a, u, 0, n, (float *)src, 0, 1); return; }
    memcpy(zero_store_array(z, a, u), src, n * sizeof(float));
}
static void store_host_master(Zero *z, int u, float *dst) { backend_from_host(dst, z->hmaster + z->soff[u], z->ushard[u]); }
static void store_host_begin(Zero *z, const OptStep *s, int verdict) {
    (void)s, (void)verdict;  // the host's verdict (zero_update_on_device is the device store's)
    backend_offload_begin();
    for (int u = 0; u < z->nu; u++)
        if (z->slen[u] > 0) backend_offload_to_host(z->hgrad + z->soff[u], zero_grad_slice(z, u), z->slen[u], u);
}
// The optimizer's passes over the whole slice (one piece), its whole-unit work between them.
static void store_host_update(Zero *z, int u, const OptStep *s) {
    size_t off = z->soff[u], cnt = z->slen[u];
    if (cnt == 0) return;
    backend_offload_wait(u);  // the gradient's copy, started by store_host_begin
    OptPiece pc = zero_slice_piece(z, u, z->hmaster + off, z->hgrad + off);
    for (int pass = 0, passes = z->opt->ops->passes(z->opt, u); pass < passes; pass++) {
        z->opt->ops->piece(z->opt, pass, &pc, s);
        if (pass + 1 < passes) zero_host_between(z, pass, u, s);
    }
    float *dev = zero_master(z, u);  // NULL with --offload params: the host copy is the only one
    if (dev) backend_offload_from_host(dev, z->hmaster + off, cnt);
}
static void store_host_join(Zero *z) { (void)z; backend_offload_end(); }
static void store_host_end(Zero *z) {
    (void)z;
    backend_offload_end();  // the compute stream waits for every master copied back
}
static void store_host_close(Zero *z) {
    float *opt[] = {z->state[0], z->state[1], z->hmaster, z->hgrad};
    for (int i = 0; i < 4; i++) backend_free_host_state(opt[i]);
}

// ---- a swap file (--offload-device nvme): the state arrays and the master are records of swap.h's file, each
// unit's slice cut into pieces of at most a ring buffer's size; hgrad stages one piece's gradient
static void store_nvme_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) {
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        size_t a0 = lo > z->piece_lo[p] ? lo : z->piece_lo[p], end = z->piece_lo[p] + z->piece_n[p];
        if (lo + n < end) end = lo + n;
        if (a0 >= end) continue;
        const float *rec = swap_read(&z->swap, p, a, 1);
        memcpy(dst + (a0 - lo), rec + (a0 - z->piece_lo[p]), (end - a0) * sizeof(float));
    }
}
// (the rest of the slice, its padding, is written as zeros)
static void store_nvme_put(Zero *z, int a, int u, const float *src, size_t n) {
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        float *rec = swap_staging(&z->swap);
        size_t plo = z->piece_lo[p], k = n > plo ? (n - plo < z->piece_n[p] ? n - plo : z->piece_n[p]) : 0;
        memset(rec, 0, swap_cap(z->piece_n[p]) * sizeof(float));
        memcpy(rec, src + plo, k * sizeof(float));
        swap_write(&z->swap, p, a, 1);
    }
}
static void store_nvme_master(Zero *z, int u, float *dst) {
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++)
        backend_from_host(dst + z->piece_lo[p], swap_read(&z->swap, p, ZS_MASTER, 1), z->piece_n[p]);
}
// Where every unit's update is one pass, one stream runs through every record; otherwise each unit streams by itself.
static void store_nvme_begin(Zero *z, const OptStep *s, int verdict) {
    (void)s, (void)verdict;
    if (z->one_stream) swap_stream_begin(&z->swap, 0, z->swap.nrec);
}
// Unit u's pieces as the swap stream hands them in (the master and the state arrays read; the next pieces already
// being read and the previous written back meanwhile): pass `pass` of the optimizer's `passes` on each; the last
// pass's master goes back to the device.
static void store_nvme_pieces(Zero *z, int u, const OptStep *s, int pass, int passes) {
    size_t lo = z->slo[u], cnt = z->slen[u];
    float *g = zero_grad_slice(z, u), *dev = zero_master(z, u);
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        int r;
        float *rec = swap_stream_next(&z->swap, &r);
        size_t plo = z->piece_lo[p], n = cnt > plo ? (cnt - plo < z->piece_n[p] ? cnt - plo : z->piece_n[p]) : 0;
        if (r != p) internal_fault("swap stream out of step: record %d for piece %d", r, p);
        float *master = swap_array(&z->swap, rec, p, ZS_MASTER);
        if (n > 0) {
            backend_to_host(z->hgrad, g + plo, n);
            OptPiece pc = {u, lo + plo, n, master, z->hgrad, {NULL}};
            for (int a = 0; a < OPT_ARRAYS; a++) pc.state[a] = swap_array(&z->swap, rec, p, ZS_M + a);
            z->opt->ops->piece(z->opt, pass, &pc, s);
            if (pass == passes - 1 && dev) backend_from_host(dev + plo, master, n);
        }
        swap_stream_done(&z->swap);
    }
}
// Unit u's update: a stream of the unit's records per pass where the optimizer needs every piece's first pass
// before any piece's next (its whole-unit work between), so such a unit is read and written once per pass.
static void store_nvme_update(Zero *z, int u, const OptStep *s) {
    int np = z->piece_first[u + 1] - z->piece_first[u], passes = z->opt->ops->passes(z->opt, u);
    if (z->one_stream) { store_nvme_pieces(z, u, s, 0, 1); return; }
    if (np == 0) return;
    for (int pass = 0; pass < passes; pass++) {
        swap_stream_begin(&z->swap, z->piece_first[u], np);
        store_nvme_pieces(z, u, s, pass, passes);
        swap_stream_end(&z->swap);
        if (pass + 1 < passes) zero_host_between(z, pass, u, s);
    }
}
static void store_nvme_end(Zero *z) { if (z->one_stream) swap_stream_end(&z->swap); }
static void store_nvme_close(Zero *z) {
    free(z->hgrad);
    swap_close(&z->swap);
    free(z->piece_first); free(z->piece_lo); free(z->piece_n);
}

static const ZeroStore ZERO_STORE_DEVICE = {store_device_get, store_device_put, store_device_master, store_device_begin,
                                            store_device_update, zero_store_nothing, zero_store_nothing, store_device_close};
static const ZeroStore ZERO_STORE_HOST = {store_host_get, store_host_put, store_host_master, store_host_begin,
                                          store_host_update, store_host_join, store_host_end, store_host_close};
static const ZeroStore ZERO_STORE_NVME = {store_nvme_get, store_nvme_put, store_nvme_master, store_nvme_begin,
                                          store_nvme_update, zero_store_nothing, store_nvme_end, store_nvme_close};

// The store for this run: a swap file in nvme_path (with offload), host memory with offload, else
// the device; its memory allocated (z's slices already laid out).
static void zero_store_open(Zero *z, const char *nvme_path, size_t nvme_buffer_bytes, char *note, size_t note_len) {
    if (nvme_path) {
        z->store = &ZERO_STORE_NVME;
        z->nvme = 1;
        size_t chunk = zero_piece_floats(nvme_buffer_bytes);
        int n = zero_swap_pieces(z->sspan, z->nu, chunk, NULL, NULL, NULL);
        z->piece_first = (int *)mallocCheck((z->nu + 1) * sizeof(int));
        z->piece_lo = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
        z->piece_n = (size_t *)mallocCheck((n + 1) * sizeof(size_t));
        zero_swap_pieces(z->sspan, z->nu, chunk, z->piece_n, z->piece_first, z->piece_lo);
        swap_open(&z->swap, nvme_path, z->comm->rank, z->piece_n, n, ZS_ARRAYS, note, note_len);
        z->hgrad = (float *)swap_alloc_aligned(swap_cap(chunk) * sizeof(float));
    } else {
        z->store = z->offload ? &ZERO_STORE_HOST : &ZERO_STORE_DEVICE;
        for (int a = 0; a < OPT_ARRAYS; a++)
            z->state[a] = z->offload ? backend_alloc_host_state(z->state_floats[a]) : backend_alloc_state(z->state_floats[a]);
        if (z->offload) {
            z->hmaster = backend_alloc_host_state(z->slice_floats);
            z->hgrad = backend_alloc_host_state(z->slice_floats);
        }
    }
    z->one_stream = 1;
    for (int u = 0; u < z->nu; u++) if (z->opt->ops->passes(z->opt, u) > 1) z->one_stream = 0;
}

#endif
