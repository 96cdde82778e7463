// cuda/backend.cuh: the CUDA build's backend, every backend_* function the shared headers (model.h, zero.h,
// trainer.h, ...) call: device memory, the pinned token ring, the losses' and logits' copies, the sums of
// squares, the offload stream, the AdamW and working-weight launchers, the device's set-up and facts.
#ifndef CUDA_BACKEND_CUH
#define CUDA_BACKEND_CUH

#include <cublasLt.h>
#include "common.cuh"
#include "matmul.cuh"  // the cuBLASLt handle and workspace that backend_init makes
#include "adamw.cuh"
#include "../base/timing_marks.h"  // backend_mark's array
#include "../backend/backend_bytes.h"  // the state and scratch bytes handed out, counted below
#include "../backend/target.h"  // the precisions, which the CPU build's plan of a card takes too

static int backend_ready = 0;

// ----------------------------------------------------------------------------
// Memory backend: device memory.

static void *backend_alloc_scratch(size_t bytes) {
    backend_scratch_bytes += bytes;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fatal("out of GPU memory allocating %.2f GiB (%.2f GiB free of %.2f GiB): %s", bytes / 1073741824.0,
              free_b / 1073741824.0, total_b / 1073741824.0, cudaGetErrorString(err));
    }
    cudaCheck(cudaMemset(p, 0, bytes > 0 ? bytes : 1));
    return p;
}

static void backend_free(void *p) { cudaCheck(cudaFree(p)); }
static void backend_zero_scratch(void *p, size_t bytes) { cudaCheck(cudaMemsetAsync(p, 0, bytes, main_stream)); }
static void backend_zero_state(float *buf, size_t n) { cudaCheck(cudaMemsetAsync(buf, 0, n * sizeof(float), main_stream)); }

static void *backend_alloc_pinned(size_t bytes) {
    void *p = NULL;
    cudaCheck(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
}
static void backend_free_pinned(void *p) { cudaCheck(cudaFreeHost(p)); }

// Has the stream passed event e? cudaEventQuery answers without waiting; the wait comes only if not.
static void event_wait(cudaEvent_t e) {
    cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) cudaCheck(cudaEventSynchronize(e));
    else cudaCheck(q);
}

// Token uploads go through a ring of pinned slots, so that each copy is asynchronous (a copy from pageable
// memory makes the host wait for the device) and the caller may refill its buffer at once. A slot is
// written again only after its last copy has passed, which at 2 uploads per micro-batch is long since.
#define TOKEN_SLOTS 16
static int *token_slot[TOKEN_SLOTS];
static cudaEvent_t token_copied[TOKEN_SLOTS];
static size_t token_cap = 0;
static int token_next = 0;
static void backend_tokens_from_host(int *dst, const int *src, size_t n) {
    if (n > token_cap) {  // the first upload, or a longer one: every slot's old copy must be done first
        cudaCheck(cudaDeviceSynchronize());
        for (int k = 0; k < TOKEN_SLOTS; k++) {
            if (token_cap) backend_free_pinned(token_slot[k]);
            else cudaCheck(cudaEventCreateWithFlags(&token_copied[k], cudaEventDisableTiming));
            token_slot[k] = (int *)backend_alloc_pinned(n * sizeof(int));
            cudaCheck(cudaEventRecord(token_copied[k], main_stream));
        }
        token_cap = n;
    }
    int k = token_next;
    token_next = (k + 1) % TOKEN_SLOTS;
    event_wait(token_copied[k]);
    memcpy(token_slot[k], src, n * sizeof(int));
    cudaCheck(cudaMemcpyAsync(dst, token_slot[k], n * sizeof(int), cudaMemcpyHostToDevice, main_stream));
    cudaCheck(cudaEventRecord(token_copied[k], main_stream));
}

// The heads' losses (model.h's queue) go to pinned host memory asynchronously; model_take_loss reads
// them after backend_losses_wait, which by then (after the step's synchronisation) waits for nothing.
static cudaEvent_t losses_copied = NULL;
static void backend_losses_to_host(float *host, const float *losses, int n) {
    if (!losses_copied) cudaCheck(cudaEventCreateWithFlags(&losses_copied, cudaEventDisableTiming));
    cudaCheck(cudaMemcpyAsync(host, losses, n * sizeof(float), cudaMemcpyDeviceToHost, main_stream));
    cudaCheck(cudaEventRecord(losses_copied, main_stream));
}
static void backend_losses_wait(void) {
    if (losses_copied) event_wait(losses_copied);
}

template <typename T>
__global__ void to_float_kernel(float *dst, const T *src, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_f(src[i]);
}

static const float *backend_logits_row(const floatX *row, int Vp) {
    static float *host = NULL;
    static int cap = 0;
    if (Vp > cap) { free(host); host = (float *)mallocCheck(Vp * sizeof(float)); cap = Vp; }
    float *f = scratch_get(Vp);
    WITH_X(LAUNCH(ceil_div(Vp, 256), 256, 0, main_stream, to_float_kernel<xt>)(f, (const xt *)row, Vp));
    launchCheck();
    cudaCheck(cudaMemcpy(host, f, Vp * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
}

// Sum of squares in the CPU build's fixed 64K chunks, each chunk by one block in a fixed order, the
// chunks summed in order afterwards: the result does not depend on the launch. Every buffer's chunks in
// one launch: block b finds its buffer in a table of (x, n, first chunk), which goes to the device only
// when the buffers change (zero.h passes the same ones every step).
#define NORM_CHUNK 65536
struct SumSqBuf { const float *x; size_t n; unsigned first; };

// One block's sum of squares of x[lo, hi) in double, each value as T holds it (float: as it is), to *out: the
// block's threads (256 at most) stride the range, then a fixed tree over the block. The gradient norm's chunks (below)
// and Muon's Frobenius norm (cuda/muon.cuh) are summed by it.
template <typename T>
__device__ void block_sum_squares(double *out, const float *x, size_t lo, size_t hi) {
    __shared__ double shared[256];
    double s = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const double v = to_f(from_f<T>(x[i]));
        s += v * v;
    }
    shared[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = shared[0];
}

__global__ void sum_squares_kernel(double *partial, const SumSqBuf *bufs, int count) {
    int lo = 0, hi = count - 1;  // the last buffer whose first chunk is at or before this block
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (bufs[mid].first <= blockIdx.x) lo = mid; else hi = mid - 1;
    }
    size_t n = bufs[lo].n, c0 = (size_t)(blockIdx.x - bufs[lo].first) * NORM_CHUNK;
    block_sum_squares<float>(partial + blockIdx.x, bufs[lo].x, c0, c0 + NORM_CHUNK < n ? c0 + NORM_CHUNK : n);
}

// The chunk partials land in one device buffer, copied to pinned memory asynchronously (_start); _finish
// adds each buffer's partials up in order once the copy has passed, which after the step's
// synchronisation needs no wait. backend_update_verdict reads the same partials on the device.
static double *ss_partial_d = NULL, *ss_partial = NULL, *ss_bufsum_d = NULL;  // grown, never freed per call
static size_t ss_cap = 0;
static SumSqBuf *ss_bufs = NULL, *ss_bufs_d = NULL;  // the buffers' table, on the host and the device
static unsigned *ss_first_d = NULL;                  // per buffer (and one past): its first chunk, for the verdict
static int ss_count = 0, ss_bufs_cap = 0;
static size_t ss_chunks = 0;
static cudaEvent_t ss_copied = NULL;

// The table for these buffers: the same as last time, or made again (and sent to the device).
static void sum_squares_table(const float **xs, const size_t *ns, int count) {
    int same = count == ss_count && ss_bufs_d;
    for (int i = 0; same && i < count; i++) same = ss_bufs[i].x == xs[i] && ss_bufs[i].n == ns[i];
    if (same) return;
    if (count + 1 > ss_bufs_cap) {
        if (ss_bufs_d) { cudaCheck(cudaFree(ss_bufs_d)); cudaCheck(cudaFree(ss_first_d)); cudaCheck(cudaFree(ss_bufsum_d)); }
        ss_bufs_cap = count + 1;
        ss_bufs = (SumSqBuf *)reallocCheck(ss_bufs, ss_bufs_cap * sizeof(SumSqBuf));
        cudaCheck(cudaMalloc(&ss_bufs_d, ss_bufs_cap * sizeof(SumSqBuf)));
        cudaCheck(cudaMalloc(&ss_first_d, ss_bufs_cap * sizeof(unsigned)));
        cudaCheck(cudaMalloc(&ss_bufsum_d, ss_bufs_cap * sizeof(double)));
    }
    unsigned *first = (unsigned *)mallocCheck((count + 1) * sizeof(unsigned));
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        ss_bufs[i] = (SumSqBuf){xs[i], ns[i], (unsigned)total};
        first[i] = (unsigned)total;
        total += (ns[i] + NORM_CHUNK - 1) / NORM_CHUNK;
    }
    first[count] = (unsigned)total;
    if (total > ss_cap) {
        if (ss_partial_d) { cudaCheck(cudaFree(ss_partial_d)); backend_free_pinned(ss_partial); }
        cudaCheck(cudaMalloc(&ss_partial_d, total * sizeof(double)));
        ss_partial = (double *)backend_alloc_pinned(total * sizeof(double));
        ss_cap = total;
    }
    if (count > 0) {
        cudaCheck(cudaMemcpy(ss_bufs_d, ss_bufs, count * sizeof(SumSqBuf), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(ss_first_d, first, (count + 1) * sizeof(unsigned), cudaMemcpyHostToDevice));
    }
    free(first);
    ss_count = count;
    ss_chunks = total;
}

static void backend_sum_squares_start(const float **xs, const size_t *ns, int count) {
    sum_squares_table(xs, ns, count);
    if (!ss_copied) cudaCheck(cudaEventCreateWithFlags(&ss_copied, cudaEventDisableTiming));
    if (ss_chunks > 0) {
        LAUNCH((unsigned)ss_chunks, 256, 0, main_stream, sum_squares_kernel)(ss_partial_d, ss_bufs_d, count);
        launchCheck();
        cudaCheck(cudaMemcpyAsync(ss_partial, ss_partial_d, ss_chunks * sizeof(double), cudaMemcpyDeviceToHost, main_stream));
    }
    cudaCheck(cudaEventRecord(ss_copied, main_stream));
}
static void backend_sum_squares_finish(double *out, int count) {
    event_wait(ss_copied);
    for (int i = 0; i < count; i++) {
        size_t end = i + 1 < count ? ss_bufs[i + 1].first : ss_chunks;
        double s = 0.0;
        for (size_t c = ss_bufs[i].first; c < end; c++) s += ss_partial[c];
        out[i] = s;
    }
}

// The verdict on the update (backend.h), on the device: this rank's sum from the partials of the last _start,
// then the verdict from every rank's.
static AdamWVerdict *verdict_d = NULL;
static void backend_norm_local(float *slot) {
    if (ss_count == 0) internal_fault("backend_norm_local: no sums of squares started");
    LAUNCH(1, 256, 0, main_stream, norm_local_kernel)((double *)slot, ss_bufsum_d, ss_partial_d, ss_first_d, ss_count);
    launchCheck();
}
static void backend_update_verdict(const float *slots, int count, float loss_scale, float clip) {
    if (!verdict_d) cudaCheck(cudaMalloc(&verdict_d, sizeof(AdamWVerdict)));
    LAUNCH(1, 1, 0, main_stream, update_verdict_kernel)(verdict_d, (const double *)slots, count, loss_scale, clip);
    launchCheck();
}

static float *backend_alloc_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    return (float *)backend_alloc_scratch(n * sizeof(float));
}
static void backend_to_host(float *host, const float *buf, size_t n) {
    cudaCheck(cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost));
}
static void backend_from_host(float *buf, const float *host, size_t n) {
    cudaCheck(cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice));
}
// comm.h's staging and messages: synchronous copies on the legacy default stream, which the blocking compute
// stream is ordered with, so they follow the compute stream's work so far.
static int backend_memory_is_host(void) { return 0; }
static void backend_bytes_to_host(void *host, const void *buf, size_t bytes) {
    if (cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) internal_fault("comm: device-to-host staging failed");
}
static void backend_bytes_from_host(void *buf, const void *host, size_t bytes) {
    if (cudaMemcpy(buf, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) internal_fault("comm: host-to-device staging failed");
}
// Two bf16 or fp16 values added in fp32 are exact unless their exponents are far apart (then the smaller is below
// half the result's last place), so one rounding to 16 bits gives the correctly rounded sum, NCCL's __hadd's.
static void backend_x_add_host(void *inout, const void *in, size_t n) {
    if (x_prec == PREC_BF16) {
        bf16 *a = (bf16 *)inout;
        const bf16 *b = (const bf16 *)in;
        for (size_t i = 0; i < n; i++) a[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    } else if (x_prec == PREC_FP16) {
        __half *a = (__half *)inout;
        const __half *b = (const __half *)in;
        for (size_t i = 0; i < n; i++) a[i] = __float2half_rn(__half2float(a[i]) + __half2float(b[i]));
    } else {
        for (size_t i = 0; i < n; i++) ((float *)inout)[i] += ((const float *)in)[i];
    }
}

// The step's clock (timing.h): a mark is an event on the compute stream (every kernel, copy and matmul of the
// build runs there; NCCL's stream and the offload stream join it through events). The events are made once
// and kept: mark i of each step reuses event i.
static cudaEvent_t *mark_events = NULL;
static int mark_cap = 0;
static void backend_mark(int i) {
    if (i >= mark_cap) {
        int old = mark_cap;
        mark_events = (cudaEvent_t *)timing_marks_grow(mark_events, &mark_cap, i, sizeof(cudaEvent_t));
        for (int k = old; k < mark_cap; k++) cudaCheck(cudaEventCreate(&mark_events[k]));
    }
    cudaCheck(cudaEventRecord(mark_events[i], main_stream));
}
static void backend_step_sync(int last) { cudaCheck(cudaEventSynchronize(mark_events[last])); }
static double backend_mark_ms(int i) {
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, mark_events[i - 1], mark_events[i]));
    return ms;
}
// The offloaded update's copies run on a stream of their own, so that the host's AdamW of one unit overlaps the
// copies of the others: every unit's gradient goes to pinned host memory at once (the host waits for unit u's
// alone, `ticket` u, before updating it), and each updated slice goes back while the host updates the next.
// Events order them after the compute stream's work so far (begin) and the compute stream's next work after
// every copy back (end).
static cudaStream_t offload_stream = NULL;
static cudaEvent_t offload_ready = NULL, offload_back = NULL, *offload_done = NULL;
static int offload_tickets = 0;
static void backend_offload_begin(void) {
    if (!offload_stream) {
        cudaCheck(cudaStreamCreateWithFlags(&offload_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&offload_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&offload_back, cudaEventDisableTiming));
    }
    cudaCheck(cudaEventRecord(offload_ready, main_stream));
    cudaCheck(cudaStreamWaitEvent(offload_stream, offload_ready, 0));
}
static void backend_offload_to_host(float *host, const float *buf, size_t n, int ticket) {
    if (ticket >= offload_tickets) {  // the first update: one event per unit, kept
        int grown = ticket + 1;
        offload_done = (cudaEvent_t *)reallocCheck(offload_done, grown * sizeof(cudaEvent_t));
        for (int i = offload_tickets; i < grown; i++) cudaCheck(cudaEventCreateWithFlags(&offload_done[i], cudaEventDisableTiming));
        offload_tickets = grown;
    }
    cudaCheck(cudaMemcpyAsync(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost, offload_stream));
    cudaCheck(cudaEventRecord(offload_done[ticket], offload_stream));
}
static void backend_offload_wait(int ticket) { event_wait(offload_done[ticket]); }
static void backend_offload_from_host(float *buf, const float *host, size_t n) {
    cudaCheck(cudaMemcpyAsync(buf, host, n * sizeof(float), cudaMemcpyHostToDevice, offload_stream));
}
static void backend_offload_end(void) {
    cudaCheck(cudaEventRecord(offload_back, offload_stream));
    cudaCheck(cudaStreamWaitEvent(main_stream, offload_back, 0));
}

static void backend_copy(float *dst, const float *src, size_t n) {
    cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, main_stream));
}

// A strided block copy: a thread a value, blockIdx.y strides over the rows (so a launch has no grid-size limit).
__global__ void copy_rows_kernel(float *dst, size_t dst_stride, const float *src, size_t src_stride, size_t rows,
                                 size_t cols) {
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (size_t r = blockIdx.y; r < rows; r += gridDim.y) dst[r * dst_stride + c] = src[r * src_stride + c];
}
static void backend_copy_rows(float *dst, size_t dst_stride, const float *src, size_t src_stride, size_t rows, size_t cols) {
    if (rows == 0 || cols == 0) return;
    const dim3 grid((unsigned)ceil_div((long)cols, 256), (unsigned)(rows < 65535 ? rows : 65535));
    LAUNCH(grid, 256, 0, main_stream, copy_rows_kernel)(dst, dst_stride, src, src_stride, rows, cols);
    launchCheck();
}

// The fp32 kernels below take 4 values a thread where the pointers are 16-byte aligned (one load or
// store each), the last thread what is left of n one by one; each value is computed alone, as before.
template <int V>
__global__ void add_kernel(float *dst, const float *src, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= n) return;
    if (V > 1 && i + V <= n) {
        XVec<float, V> d = *reinterpret_cast<XVec<float, V> *>(dst + i);
        const XVec<float, V> s = *reinterpret_cast<const XVec<float, V> *>(src + i);
#pragma unroll
        for (int k = 0; k < V; k++) d.v[k] += s.v[k];
        *reinterpret_cast<XVec<float, V> *>(dst + i) = d;
    } else {
        for (size_t k = i; k < n && k < i + V; k++) dst[k] += src[k];
    }
}

static void backend_add(float *dst, const float *src, size_t n) {
    if (n == 0) return;
    with_vec_width<float>(aligned16(dst, src), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div((long)(n + V - 1) / V, 256), 256, 0, main_stream, add_kernel<V>)(dst, src, n);
    });
    launchCheck();
}

// The step's update in one launch (backend.h): the table goes to the device once; a run launches
// adamw_multi_kernel over every block of every segment.
struct AdamWPlan { AdamWSeg *segs; int count; unsigned blocks; };
static void *backend_adamw_plan(const AdamWSegment *segs, int count) {
    AdamWPlan *plan = (AdamWPlan *)callocCheck(1, sizeof(AdamWPlan));
    AdamWSeg *t = (AdamWSeg *)callocCheck(count > 0 ? count : 1, sizeof(AdamWSeg));
    unsigned blocks = 0;
    for (int i = 0; i < count; i++) {
        const AdamWSegment *s = &segs[i];
        int vec = aligned16(s->p, s->g, s->m, s->v) && ((uintptr_t)s->w & 7) == 0;
        t[i] = (AdamWSeg){s->p, s->g, s->m, s->v, (void *)s->w, s->n, s->w_index, blocks, s->decayed, s->unit, vec};
        blocks += (unsigned)ceil_div((long)s->n, ADAMW_CHUNK);
    }
    cudaCheck(cudaMalloc(&plan->segs, (count > 0 ? count : 1) * sizeof(AdamWSeg)));
    cudaCheck(cudaMemcpy(plan->segs, t, count * sizeof(AdamWSeg), cudaMemcpyHostToDevice));
    free(t);
    plan->count = count;
    plan->blocks = blocks;
    return plan;
}
static void backend_adamw_run(void *p, const AdamWArgs *a, int verdict) {
    const AdamWPlan *plan = (const AdamWPlan *)p;
    if (plan->blocks == 0) return;
    if (verdict && !verdict_d) internal_fault("backend_adamw_run: no verdict on the device (backend_update_verdict)");
    float bc1 = 1.0f - powf(a->beta1, (float)a->t), bc2 = 1.0f - powf(a->beta2, (float)a->t);
    const AdamWVerdict *v = verdict ? verdict_d : NULL;
    uint64_t version = (uint64_t)a->t;
    if (x_prec == PREC_BF16)
        LAUNCH(plan->blocks, 256, 0, main_stream, adamw_multi_kernel<PREC_BF16>)(plan->segs, plan->count, a->lr, a->beta1, a->beta2, bc1, bc2,
                                                                   a->eps, a->weight_decay, a->grad_scale, v, version);
    else if (x_prec == PREC_FP16)
        LAUNCH(plan->blocks, 256, 0, main_stream, adamw_multi_kernel<PREC_FP16>)(plan->segs, plan->count, a->lr, a->beta1, a->beta2, bc1, bc2,
                                                                   a->eps, a->weight_decay, a->grad_scale, v, version);
    else
        LAUNCH(plan->blocks, 256, 0, main_stream, adamw_multi_kernel<PREC_FP32>)(plan->segs, plan->count, a->lr, a->beta1, a->beta2, bc1, bc2,
                                                                   a->eps, a->weight_decay, a->grad_scale, v, version);
    launchCheck();
}
static void backend_adamw_plan_free(void *p) {
    AdamWPlan *plan = (AdamWPlan *)p;
    if (!plan) return;
    cudaCheck(cudaFree(plan->segs));
    free(plan);
}
static void backend_adamw_host(float *p, const float *g, float *m, float *v, size_t n, int decayed, const AdamWArgs *a) {
    adamw_host(p, g, m, v, n, decayed, a);
}

// Pinned host memory for --offload optimizer, so transfers run at full speed.
static float *backend_alloc_host_state(size_t n) {
    backend_state_bytes += n * sizeof(float);
    float *p = NULL;
    cudaCheck(cudaMallocHost(&p, (n > 0 ? n : 1) * sizeof(float)));
    memset(p, 0, n * sizeof(float));
    return p;
}
static void backend_free_host_state(float *p) { cudaCheck(cudaFreeHost(p)); }

static int backend_weights_need_copy(void) { return x_prec != PREC_FP32; }

static void backend_weights_from_master(floatX *dst, const float *src, size_t n, size_t index, uint64_t seed) {
    if (n == 0) return;
    if (x_prec == PREC_FP32) cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, main_stream));
    // 4 floats read (16 bytes), 4 16-bit values written (8 bytes)
    else with_vec_width<float>(aligned16(src) && ((uintptr_t)dst & 7) == 0, [&](auto width) {
        constexpr int V = decltype(width)::value;
        if (x_prec == PREC_BF16) LAUNCH(ceil_div((long)(n + V - 1) / V, 256), 256, 0, main_stream, weights_bf16_kernel<V>)((bf16 *)dst, src, n, index, seed);
        else LAUNCH(ceil_div((long)(n + V - 1) / V, 256), 256, 0, main_stream, weights_fp16_kernel<V>)((__half *)dst, src, n);
    });
    launchCheck();
}

// ----------------------------------------------------------------------------
// Graphs (backend.h's backend_graph_begin/_end): pipeline.h brackets a micro-batch's forward and its backward,
// each captured from the compute stream once and replayed as one launch, so the host hands the GPU two
// operations for what was some fifty launches, matmuls and memsets per layer each. A graph freezes every
// argument of its kernels: the pointers are the model's and the shared scratch (whose move re-records, see
// scratch_moves), the sizes are the shape, and the one value that changes between steps, the loss gradient's
// weight with its loss scale, is the variant: a new scale (dynamic scaling moves it rarely) records the graph
// again rather than putting the weight in device memory, so the kernels and the CPU build stay as they are.
// The first run of a shape is eager: what the work allocates or plans on first use (scratch, cuBLASLt plans,
// shared-memory opt-ins) cannot be done during capture. TRAIN_GPT_GRAPHS=0 runs everything eagerly.
// A graph replayed after a buffer it recorded was freed would use whatever lies there now, with no error on a GPU:
// the scratch moves when a later caller needs more (the first sample's or --eval-mc's logits row, with a
// vocabulary larger than the training kernels' partials), so a move records the graphs again, and model_free drops
// them before the model's buffers go. The emulator stops such a replay, naming the node and the free
// (test_cuda_emu.sh graphs runs a sample that moves the scratch between steps).
typedef struct {
    cudaGraphExec_t exec;        // the recorded work, for (shape, variant) with scratch as it was (moves)
    uint64_t shape, variant;
    unsigned moves;
    int warm;                    // the work has run eagerly for warm_shape, with scratch as at warm_moves
    uint64_t warm_shape;
    unsigned warm_moves;
    int capturing;
} GraphSlot;
#define GRAPH_SLOTS 4  // backend.h (included after this file) numbers its graphs below this
static GraphSlot graph_slots[GRAPH_SLOTS];
static int graphs_on = -1;

static int backend_graph_begin(int g, uint64_t shape, uint64_t variant) {
    if (graphs_on < 0) graphs_on = switch_env("TRAIN_GPT_GRAPHS", 1);
    if (!graphs_on) return 0;
    if (g < 0 || g >= GRAPH_SLOTS) fatal("graph %d: backend.cuh keeps %d", g, GRAPH_SLOTS);
    GraphSlot *s = &graph_slots[g];
    if (s->capturing) fatal("graph %d begun again before its end", g);
    if (s->exec && s->shape == shape && s->variant == variant && s->moves == scratch_moves) {
        cudaCheck(cudaGraphLaunch(s->exec, main_stream));
        return 1;
    }
    if (!s->warm || s->warm_shape != shape || s->warm_moves != scratch_moves) {
        s->warm = 0;  // this run is the eager one; backend_graph_end marks it done
        s->warm_shape = shape;
        return 0;
    }
    cudaCheck(cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal));
    s->capturing = 1;
    s->shape = shape;
    s->variant = variant;
    s->moves = scratch_moves;
    return 0;
}

static void backend_graph_end(int g) {
    if (!graphs_on) return;
    GraphSlot *s = &graph_slots[g];
    if (!s->capturing) {  // the eager run: what it grew is in place now
        s->warm = 1;
        s->warm_moves = scratch_moves;
        return;
    }
    s->capturing = 0;
    cudaGraph_t graph;
    cudaCheck(cudaStreamEndCapture(main_stream, &graph));
    if (s->exec) cudaCheck(cudaGraphExecDestroy(s->exec));  // a launched one finishes first
    cudaCheck(cudaGraphInstantiate(&s->exec, graph, 0));
    cudaCheck(cudaGraphDestroy(graph));
    cudaCheck(cudaGraphLaunch(s->exec, main_stream));
}

static void backend_graphs_drop(void) {
    for (int g = 0; g < GRAPH_SLOTS; g++) {
        if (graph_slots[g].exec) cudaCheck(cudaGraphExecDestroy(graph_slots[g].exec));
        graph_slots[g] = (GraphSlot){0};
    }
}

// Generation brackets (model.h): the CUDA build needs nothing held while the weights stay still.
static void backend_decode_begin(void) {}
static void backend_decode_end(void) {}

// Picks the GPU by node-local rank and sets up cuBLASLt; a machine without a usable GPU or driver
// stops here with one line that says so.
static void backend_init(int local_rank) {
    if (backend_ready) return;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        fprintf(stderr, "error: no usable CUDA device: %s (the CPU build, ./train_gpt_cpu, needs none)\n", cudaGetErrorString(err));
        exit(1);
    }
    if (n == 0) {
        fprintf(stderr, "error: no CUDA device found (the CPU build, ./train_gpt_cpu, needs none)\n");
        exit(1);
    }
    cudaCheck(cudaSetDevice(local_rank % n));
    // a blocking stream: what still goes to the legacy default stream (the synchronous copies) is ordered with it
    cudaCheck(cudaStreamCreate(&main_stream));
    cublasCheck(cublasLtCreate(&cublaslt_handle));
    matmul_read_switches();
    cudaCheck(cudaMalloc(&cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES));
    backend_ready = 1;
}

// The bytes of one floatX, which model.h sizes activations and working weights with.
static size_t x_bytes = 4;
#define X_BYTES x_bytes
// The build (backend.h). For --help: the attention kernels are compiled for these (padded) head sizes only.
static const char *backend_build_name(void) { return "cuda"; }
static const char *backend_precision_default(void) { return GPU_PRECISION_DEFAULT; }  // backend/target.h's
static const char *backend_precisions_built(void) { return GPU_PRECISIONS; }
static const char *backend_build_extra(void) { return "attention head sizes 16, 32, 64, 128 (GPT-2: 64)"; }
static void backend_set_precision(const char *precision, int tf32) {
    x_prec = strcmp(precision, "bf16") == 0 ? PREC_BF16 : strcmp(precision, "fp16") == 0 ? PREC_FP16 : PREC_FP32;
    x_bytes = x_prec == PREC_FP32 ? 4 : 2;
    use_tf32 = tf32;
}
static int backend_has_tf32(void) { return 1; }

// The device's high-water mark of memory in use (cudaMalloc'd by us, plus cuBLASLt and the context).
static size_t backend_peak_device_bytes(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    static size_t peak = 0;
    if (total_b - free_b > peak) peak = total_b - free_b;
    return peak;
}

// The memory the autotuner plans against: the whole card's.
static size_t backend_device_capacity(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    return total_b;
}

// Dense bf16 peak of the card, for MFU; 0 (MFU not reported) for a card we have no figure for.
static double backend_peak_flops(void) {
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    if (strstr(prop.name, "H100") || strstr(prop.name, "H200")) return 989e12;
    if (strstr(prop.name, "A100")) return 312e12;
    return 0.0;
}

// --profile's roofline: the card's dense bf16 peak where it is known (0: the column stays empty).
static double backend_profile_peak_flops(const char **source) {
    *source = "the card's dense bf16 peak (datasheet)";
    return backend_peak_flops();
}

static const char *backend_device_name(void) {
    static char name[300];
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(name, sizeof(name), "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / 1073741824.0);
    return name;
}

#endif  // CUDA_BACKEND_CUH
