// cpu/backend.h: the CPU build's side of backend.h beside its kernels: every buffer is host memory, copies are
// memcpy, there are no graphs and no streams, AdamW runs on the host (adamw_host.h), and the device
// facts (name, peak FLOP/s) are the CPU's.
#ifndef CPU_BACKEND_H
#define CPU_BACKEND_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../base/utils.h"
#include "../arch/gpt2.h"
#include "adamw_host.h"  // adamw_host, the update backend_adamw_run applies
#include "../backend/backend.h"  // BackendComm, and the contract this file implements
#include "../base/timing_marks.h"  // backend_mark's array
#include "../backend/backend_bytes.h"  // the state and scratch bytes handed out, counted below

// The build (backend.h). The reference computes in fp32 only (config_resolve_precision refuses the others).
static const char *backend_build_name(void) { return "cpu"; }
static const char *backend_precision_default(void) { return "fp32"; }
static const char *backend_precisions_built(void) { return "fp32"; }
static const char *backend_build_extra(void) { return NULL; }

// ----------------------------------------------------------------------------
// Memory: on the CPU every buffer is host memory.
static void *backend_alloc_scratch(size_t bytes) {
    backend_scratch_bytes += bytes;
    return callocCheck(bytes, 1);
}
static void backend_free(void *p) { free(p); }
static void backend_zero_scratch(void *p, size_t bytes) { memset(p, 0, bytes); }
static void backend_tokens_from_host(int *dst, const int *src, size_t n) { memcpy(dst, src, n * sizeof(int)); }
// The heads' losses, queued by model.h and read after the step: on the CPU, copied at once.
static void backend_losses_to_host(float *host, const float *losses, int n) { memcpy(host, losses, n * sizeof(float)); }
static void backend_losses_wait(void) {}
static void *backend_alloc_pinned(size_t bytes) { return mallocCheck(bytes); }
static void backend_free_pinned(void *p) { free(p); }
static const float *backend_logits_row(const float *row, int Vp) { (void)Vp; return row; }

// Sum of squares of a flat float array, in fixed 64K chunks summed in order: the result does not
// depend on the number of threads, which exact resume and rank-count independence need.
#define NORM_CHUNK 65536
static double sum_squares(const float *x, size_t n) {
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *partial = (double *)mallocCheck(nchunks * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < nchunks; ch++) {
        size_t lo = ch * NORM_CHUNK, hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * x[i];
        partial[ch] = s;
    }
    double total = 0.0;
    for (size_t ch = 0; ch < nchunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

// The rest of the backend zero.h works through. The gradient norm's sums are started and collected
// in two calls, so that the CUDA build can read them back with the step's one synchronisation.
static double *ss_sums = NULL;
static int ss_cap = 0, ss_count = 0;
static void backend_sum_squares_start(const float **xs, const size_t *ns, int count) {
    if (count > ss_cap) { free(ss_sums); ss_sums = (double *)mallocCheck(count * sizeof(double)); ss_cap = count; }
    ss_count = count;
    for (int i = 0; i < count; i++) ss_sums[i] = sum_squares(xs[i], ns[i]);
}
static void backend_sum_squares_finish(double *out, int count) { memcpy(out, ss_sums, count * sizeof(double)); }
static float *backend_alloc_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    return (float *)callocCheck(n, sizeof(float));
}
static void backend_to_host(float *host, const float *buf, size_t n) { memcpy(host, buf, n * sizeof(float)); }
static void backend_from_host(float *buf, const float *host, size_t n) { memcpy(buf, host, n * sizeof(float)); }
// comm.h's copies: the build's memory is host memory, which MPI moves directly, so these only serve messages.
static int backend_memory_is_host(void) { return 1; }
static void backend_bytes_to_host(void *host, const void *buf, size_t bytes) { memcpy(host, buf, bytes); }
static void backend_bytes_from_host(void *buf, const void *host, size_t bytes) { memcpy(buf, host, bytes); }
static void backend_x_add_host(void *inout, const void *in, size_t n) {
    for (size_t i = 0; i < n; i++) ((float *)inout)[i] += ((const float *)in)[i];
}
// No device transport: comm.h keeps every collective on MPI and never calls the others.
static size_t backend_comm_id_bytes(void) { return 0; }
static void backend_comm_id(void *id) { (void)id; internal_fault("the CPU build has no device transport"); }
static BackendComm *backend_comm_open(const void *id, int world, int rank) {
    (void)id; (void)world; (void)rank;
    internal_fault("the CPU build has no device transport");
}
static BackendComm *backend_comm_split(BackendComm *dc, int color, int key) {
    (void)dc; (void)color; (void)key;
    internal_fault("the CPU build has no device transport");
}
static void backend_comm_close(BackendComm *dc) { (void)dc; }
static void backend_comm_allreduce_sum(BackendComm *dc, float *buf, size_t n) {
    (void)dc; (void)buf; (void)n;
    internal_fault("the CPU build has no device transport");
}
static void backend_comm_reduce_scatter_sum(BackendComm *dc, float *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("the CPU build has no device transport");
}
static void backend_comm_allgather(BackendComm *dc, float *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("the CPU build has no device transport");
}
static void backend_comm_allreduce_sum_x(BackendComm *dc, floatX *buf, size_t n) {
    backend_comm_allreduce_sum(dc, (float *)buf, n);
}
static void backend_comm_reduce_scatter_sum_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    backend_comm_reduce_scatter_sum(dc, (float *)buf, shard, rank);
}
static void backend_comm_allgather_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    backend_comm_allgather(dc, (float *)buf, shard, rank);
}
static void backend_comm_join(void) {}
// The step's clock (timing.h): the work is done when a call returns, so a mark is the host's clock now.
static double *mark_seconds = NULL;
static int mark_cap = 0;
static void backend_mark(int i) {
    if (i >= mark_cap) mark_seconds = (double *)timing_marks_grow(mark_seconds, &mark_cap, i, sizeof(double));
    mark_seconds[i] = wall_seconds();
}
static void backend_step_sync(int last) { (void)last; }
static double backend_mark_ms(int i) { return (mark_seconds[i] - mark_seconds[i - 1]) * 1e3; }
// The offloaded update's copies (zero.h): asynchronous on a GPU; here they are done when called.
static void backend_offload_begin(void) {}
static void backend_offload_to_host(float *host, const float *buf, size_t n, int ticket) { (void)ticket; memcpy(host, buf, n * sizeof(float)); }
static void backend_offload_wait(int ticket) { (void)ticket; }
static void backend_offload_from_host(float *buf, const float *host, size_t n) { memcpy(buf, host, n * sizeof(float)); }
static void backend_offload_end(void) {}
static void backend_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
static void backend_copy_rows(float *dst, size_t dst_stride, const float *src, size_t src_stride, size_t rows, size_t cols) {
    for (size_t i = 0; i < rows; i++) memcpy(dst + i * dst_stride, src + i * src_stride, cols * sizeof(float));
}
static void backend_zero_state(float *buf, size_t n) { memset(buf, 0, n * sizeof(float)); }
static void backend_add(float *dst, const float *src, size_t n) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

// Host memory for --offload optimizer: the CPU build's memory is host memory already.
static float *backend_alloc_host_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    return (float *)callocCheck(n, sizeof(float));
}
static void backend_free_host_state(float *p) { free(p); }

// The kernels read the fp32 parameters themselves: no working copy.
// The step's update over a table (backend.h): here the table is the caller's segments, copied, and the
// verdict is decided at once, since the sums of squares are done when started.
typedef struct { AdamWSegment *segs; int count; } AdamWPlan;
static struct { float scale; int skip; } verdict = {1.0f, 0};
static void *backend_adamw_plan(const AdamWSegment *segs, int count) {
    AdamWPlan *plan = (AdamWPlan *)mallocCheck(sizeof(AdamWPlan));
    plan->segs = (AdamWSegment *)mallocCheck((count > 0 ? count : 1) * sizeof(AdamWSegment));
    memcpy(plan->segs, segs, count * sizeof(AdamWSegment));
    plan->count = count;
    return plan;
}
static void backend_adamw_plan_free(void *p) {
    if (p) free(((AdamWPlan *)p)->segs);
    free(p);
}
static void backend_norm_local(float *slot) {
    double sum = 0.0;
    for (int i = 0; i < ss_count; i++) sum += ss_sums[i];
    memcpy(slot, &sum, sizeof(sum));
}
static void backend_update_verdict(const float *slots, int count, float loss_scale, float clip) {
    double sum = 0.0;
    for (int r = 0; r < count; r++) {
        double s;
        memcpy(&s, slots + 2 * r, sizeof(s));
        sum += s;
    }
    float norm = (float)sqrt(sum) / loss_scale;
    verdict.skip = !isfinite(norm);
    verdict.scale = (clip > 0.0f && norm > clip ? clip / (norm + 1e-6f) : 1.0f) / loss_scale;
}
static void backend_adamw_run(void *p, const AdamWArgs *a, int use_verdict) {
    const AdamWPlan *plan = (const AdamWPlan *)p;
    if (use_verdict && verdict.skip) return;
    AdamWArgs args = *a;
    if (use_verdict) args.grad_scale = verdict.scale;
    for (int i = 0; i < plan->count; i++) {
        const AdamWSegment *s = &plan->segs[i];
        adamw_host(s->p, s->g, s->m, s->v, s->n, s->decayed, &args);
    }
}
static void backend_adamw_host(float *p, const float *g, float *m, float *v, size_t n, int decayed, const AdamWArgs *a) {
    adamw_host(p, g, m, v, n, decayed, a);
}
static int backend_weights_need_copy(void) { return 0; }
static void backend_weights_from_master(float *dst, const float *src, size_t n, size_t index, uint64_t seed) {
    (void)index, (void)seed;
    memcpy(dst, src, n * sizeof(float));
}

// No graphs here (backend.h): the bracketed work runs every time.
static int backend_graph_begin(int g, uint64_t shape, uint64_t variant) { (void)g, (void)shape, (void)variant; return 0; }
static void backend_graph_end(int g) { (void)g; }
static void backend_graphs_drop(void) {}

static void backend_init(int local_rank) { (void)local_rank; }

static void backend_set_precision(const char *precision, int tf32) { (void)precision; (void)tf32; }
static int backend_has_tf32(void) { return 0; }  // plain fp32 arithmetic: no tensor cores to round for
static size_t backend_peak_device_bytes(void) { return 0; }  // no device: the step line reports RSS
// The memory the autotuner plans against: the machine's (the CPU build's device memory is host memory).
static size_t backend_device_capacity(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

// No honest dense peak is known for an arbitrary CPU, so MFU is not reported (the log gives FLOP/s).
static double backend_peak_flops(void) { return 0.0; }

// --profile's roofline: this CPU's own peak, measured once. Every OpenMP thread runs 12 independent
// chains of vector multiply-adds as wide as the CPU's (enough in flight to cover the FMA units' latency; the
// compiler contracts a*b+c into one FMA and, with -march=native, uses the widest vectors the CPU has).
// Each thread's rate is its work over its own CPU time (CLOCK_THREAD_CPUTIME_ID), not the wall clock's:
// on a machine that other processes share, a thread that waits for a core is not counted as slow, so the
// peak is the cores' own; the source line says how much of the wall time the threads did run (a low share
// means the modules' wall-clock GFLOP/s, and so their "of peak", read low). The best of 3 tries of ~40 ms.
// The vector is the CPU's own width: a 64-byte vector on a CPU without AVX-512 (a Zen 3) is split by gcc
// through memory and measured a fifth of the peak, so the matmuls read as 500% of it.
#ifdef __AVX512F__
#define FMA_LANES 16
#else
#define FMA_LANES 8
#endif
typedef float fma_vec __attribute__((vector_size(FMA_LANES * sizeof(float))));
static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double backend_profile_peak_flops(const char **source) {
    const long iters = 8000000;
    double best = 0.0, best_share = 0.0;
    volatile float seed = 1.0f;
    for (int rep = 0; rep < 3; rep++) {
        int threads = 1;
        double rate = 0.0, cpu = 0.0;  // summed over the threads
        double t0 = wall_seconds();
#pragma omp parallel reduction(+ : rate, cpu)
        {
#ifdef _OPENMP
#pragma omp single
            threads = omp_get_num_threads();
#endif
            double c0 = thread_cpu_seconds();
            fma_vec acc[12], a, b;
            for (int i = 0; i < FMA_LANES; i++) { a[i] = 0.999999f * seed; b[i] = 1e-6f * seed; }
            for (int k = 0; k < 12; k++) acc[k] = a * (float)(k + 1);
            for (long i = 0; i < iters; i++)
                for (int k = 0; k < 12; k++) acc[k] = acc[k] * a + b;
            float sink = 0.0f;
            for (int k = 0; k < 12; k++) for (int i = 0; i < FMA_LANES; i++) sink += acc[k][i];
            if (sink == 12345.0f) seed = sink;  // keeps the chains live
            double dc = thread_cpu_seconds() - c0;
            cpu += dc;
            rate += dc > 0 ? 2.0 * FMA_LANES * 12 * (double)iters / dc : 0.0;
        }
        double wall = wall_seconds() - t0;
        if (rate > best) { best = rate; best_share = cpu / (threads * wall); }
    }
    static char text[256];
    snprintf(text, sizeof(text), "this CPU's FMA peak, measured on the threads' own CPU time (they ran %.0f%% of the wall time%s)",
             100.0 * (best_share < 1.0 ? best_share : 1.0), best_share < 0.9 ? "; other processes had the rest of the cores, "
             "so the modules' wall-clock GFLOP/s and their 'of peak' read low" : "");
    *source = text;
    return best;
}

static const char *backend_device_name(void) {
    static char name[64];
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    snprintf(name, sizeof(name), "CPU, %d OpenMP thread%s", threads, threads == 1 ? "" : "s");
#else
    snprintf(name, sizeof(name), "CPU, 1 thread");
#endif
    return name;
}

#endif
