// zero_store.h: the three homes of zero.h's optimizer state, one of which zero_init chooses at
// start-up (zero_store_open): device memory, where AdamW runs on the device; host memory
// (--offload), where AdamW runs on the host beside a host master copy of this rank's parameters; and
// a swap file (--offload-device nvme, swap.h), whose records zero.h's update streams piece by piece.
// Each home implements ZeroStore (zero.h), so zero.h's update, checkpoint reads and loads never ask
// which it is. Stands on zero_layout.h (the record and its slices); serves only zero.h.
#ifndef ZERO_STORE_H
#define ZERO_STORE_H

#include "zero_layout.h"

static float *zero_store_array(Zero *z, int a) { return a == ZS_MASTER ? z->hmaster : a == ZS_M ? z->m : z->v; }
static void zero_store_nothing(Zero *z) { (void)z; }

// ---- device memory: m and v beside the parameters, AdamW by the backend
static void store_device_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) {
    if (a == ZS_V && z->muon) { zero_v_transfer(z, u, lo, n, dst, 1, 0); return; }
    backend_to_host(dst, zero_store_array(z, a) + z->soff[u] + lo, n);
}
static void store_device_put(Zero *z, int a, int u, const float *src, size_t n) {
    if (a == ZS_V && z->muon) { zero_v_transfer(z, u, 0, n, (float *)src, 0, 0); return; }
    backend_from_host(zero_store_array(z, a) + z->soff[u], src, n);
}
// The master copy is the device's own (zero_master), never only in this store.
static void store_device_master(Zero *z, int u, float *dst) { backend_copy(dst, zero_master(z, u), z->ushard[u]); }
// Every unit's slice in one launch (zero_adamw_plan's table), with the device's verdict or without; the working
// copies are written in the same pass at stage 0 (fused_copy).
static void store_device_begin(Zero *z, const AdamWArgs *args, int verdict) { backend_adamw_run(z->adamw_plan, args, verdict); }
static void store_device_update(Zero *z, int u, const AdamWArgs *args) { (void)z, (void)u, (void)args; }  // done in begin
static void store_device_close(Zero *z) { backend_free(z->m); backend_free(z->v); }

// ---- host memory (--offload): every unit's gradient leaves for the host at once (begin), each unit
// waits only for its own, and its updated master goes back while the host updates the next
static void store_host_get(Zero *z, int a, int u, size_t lo, size_t n, float *dst) {
    if (a == ZS_V && z->muon) { zero_v_transfer(z, u, lo, n, dst, 1, 1); return; }
    memcpy(dst, zero_store_array(z, a) + z->soff[u] + lo, n * sizeof(float));
}
static void store_host_put(Zero *z, int a, int u, const float *src, size_t n) {
    if (a == ZS_V && z->muon) { zero_v_transfer(z, u, 0, n, (float *)src, 0, 1); return; }
    memcpy(zero_store_array(z, a) + z->soff[u], src, n * sizeof(float));
}
static void store_host_master(Zero *z, int u, float *dst) { backend_from_host(dst, z->hmaster + z->soff[u], z->ushard[u]); }
static void store_host_begin(Zero *z, const AdamWArgs *args, int verdict) {
    (void)args, (void)verdict;  // the host's verdict (zero_update_on_device is the device store's)
    backend_offload_begin();
    for (int u = 0; u < z->nu; u++)
        if (z->slen[u] > 0) backend_offload_to_host(z->hgrad + z->soff[u], zero_grad_slice(z, u), z->slen[u], u);
}
static void store_host_update(Zero *z, int u, const AdamWArgs *args) {
    size_t off = z->soff[u], cnt = z->slen[u];
    if (cnt == 0) return;
    backend_offload_wait(u);  // the gradient's copy, started by store_host_begin
    if (z->muon) muon_update_unit(z->muon, z->comm, z->stage, u, z->slo[u], cnt, z->ushard[u], z->hmaster + off,
                                  z->hgrad + off, z->m + off, args->grad_scale, args->weight_decay);
    zero_adamw_range(z, u, z->slo[u], cnt, z->hmaster + off, z->hgrad + off, z->m + off, z->v + off, args);
    float *dev = zero_master(z, u);  // NULL with --offload params: the host copy is the only one
    if (dev) backend_offload_from_host(dev, z->hmaster + off, cnt);
}
static void store_host_join(Zero *z) { (void)z; backend_offload_end(); }
static void store_host_end(Zero *z) {
    (void)z;
    backend_offload_end();  // the compute stream waits for every master copied back
}
static void store_host_close(Zero *z) {
    float *opt[] = {z->m, z->v, z->hmaster, z->hgrad};
    for (int i = 0; i < 4; i++) backend_free_host_state(opt[i]);
}

// ---- a swap file (--offload-device nvme): m, v and the master are records of swap.h's file, each
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
// With Muon each unit streams by itself (store_nvme_update); otherwise one stream runs through every record.
static void store_nvme_begin(Zero *z, const AdamWArgs *args, int verdict) {
    (void)args, (void)verdict;
    if (!z->muon) swap_stream_begin(&z->swap, 0, z->swap.nrec);
}
// Unit u's pieces as the swap stream hands them in (master, m, v read; the next pieces already being read and the
// previous written back meanwhile). pass 0: the update, AdamW's; with Muon's matrices in the unit, pass 1 takes each
// piece's gradient into Muon's momentum (m) and pass 2, after the orthogonalisation, steps the master, Muon's and AdamW's.
static void store_nvme_pieces(Zero *z, int u, const AdamWArgs *args, int pass) {
    size_t lo = z->slo[u], cnt = z->slen[u];
    float *g = zero_grad_slice(z, u), *dev = zero_master(z, u);
    for (int p = z->piece_first[u]; p < z->piece_first[u + 1]; p++) {
        int r;
        float *rec = swap_stream_next(&z->swap, &r);
        size_t plo = z->piece_lo[p], n = cnt > plo ? (cnt - plo < z->piece_n[p] ? cnt - plo : z->piece_n[p]) : 0;
        if (r != p) internal_fault("swap stream out of step: record %d for piece %d", r, p);
        float *master = swap_array(&z->swap, rec, p, ZS_MASTER), *m = swap_array(&z->swap, rec, p, ZS_M);
        if (n > 0) {
            backend_to_host(z->hgrad, g + plo, n);
            if (pass == 1) muon_momentum(z->muon, u, lo + plo, n, z->hgrad, m, args->grad_scale);
            if (pass == 2) muon_apply(z->muon, u, lo + plo, n, master, args->weight_decay);
            if (pass != 1) {
                zero_adamw_range(z, u, lo + plo, n, master, z->hgrad, m, swap_array(&z->swap, rec, p, ZS_V), args);
                if (dev) backend_from_host(dev + plo, master, n);
            }
        }
        swap_stream_done(&z->swap);
    }
}
// Unit u's update. With Muon, a stream of the unit's records per pass: Newton-Schulz needs every piece's momentum
// before any piece's step, so a unit with Muon's matrices is read and written twice.
static void store_nvme_update(Zero *z, int u, const AdamWArgs *args) {
    int first, last, np = z->piece_first[u + 1] - z->piece_first[u];
    if (!z->muon) { store_nvme_pieces(z, u, args, 0); return; }
    if (np == 0) return;
    int muon = muon_unit_mats(z->muon, u, &first, &last) && z->slen[u] > 0;
    if (muon) {
        swap_stream_begin(&z->swap, z->piece_first[u], np);
        store_nvme_pieces(z, u, args, 1);
        swap_stream_end(&z->swap);
        muon_orthogonalize(z->muon, z->comm, z->stage, u, z->ushard[u]);
    }
    swap_stream_begin(&z->swap, z->piece_first[u], np);
    store_nvme_pieces(z, u, args, muon ? 2 : 0);
    swap_stream_end(&z->swap);
}
static void store_nvme_end(Zero *z) { if (!z->muon) swap_stream_end(&z->swap); }
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
    } else if (z->offload) {
        z->store = &ZERO_STORE_HOST;
        z->m = backend_alloc_host_state(z->slice_floats);
        z->v = backend_alloc_host_state(z->muon ? z->v_floats : z->slice_floats);
        z->hmaster = backend_alloc_host_state(z->slice_floats);
        z->hgrad = backend_alloc_host_state(z->slice_floats);
    } else {
        z->store = &ZERO_STORE_DEVICE;
        z->m = backend_alloc_state(z->slice_floats);
        z->v = backend_alloc_state(z->muon ? z->v_floats : z->slice_floats);
    }
}

#endif
