// dev/cuda/emu/emu_queue.cpp: the device's work queue: the device runs behind the host, as a GPU does; streams
// (and the legacy default stream's implicit waits), events, graphs (stream capture and replay), and the CUDA
// runtime calls that issue device work or make the host wait for it: copies, memsets, host functions,
// synchronisation (see emu.h for the model). What the work does is the other files': kernels (emu.cpp's
// emu_launch), matmuls (cublaslt.cpp), collectives (nccl.cpp).
#include "emu.h"
#include "emu_internal.h"

#include <deque>
#include <functional>
#include <memory>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unordered_map>
#include <vector>

// ----------------------------------------------------------------------------------------------------------------
// The device's work queues. A GPU runs kernels, asynchronous copies, memsets, matmuls and collectives after the call
// that issued them has returned; so does the emulator: each stream queues them in issue order, and they run only when
// the host waits (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, a copy that waits, cudaFree, an
// event or stream query that finds work pending, and any blocking MPI call, see nccl.cpp). Host code that reads a
// result it has not waited for, or reuses a buffer that a queued copy still reads, then sees what a GPU would let it
// see: the old contents. Between streams only cudaStreamWaitEvent orders work (and the legacy default stream's
// implicit waits on blocking streams), and when the host waits, the streams run in an order that a missing wait
// shows in: the default stream as far as it can first (TRAIN_GPT_EMU_STREAMS=default-first, the default), or every
// other stream first (side-first). A consumer that does not wait for its producer on another stream then reads
// stale data under the first, and a producer that does not wait for an earlier consumer overwrites its input
// under the second.

struct EmuOp {
    std::function<void()> run;     // empty: a wait
    std::shared_ptr<int> done;     // set once it has run
    std::shared_ptr<int> after;    // a wait: the op it waits for
};
static const int STREAM_MAGIC = 0x5354524d, EVENT_MAGIC = 0x4556454e;
struct CUstream_st {
    int magic;
    int blocking;                  // created without cudaStreamNonBlocking: ordered against the legacy default stream
    std::deque<EmuOp> ops;
    std::shared_ptr<int> tail;     // the last op issued to it
    CUgraph_st *capture;           // while it captures (cudaStreamBeginCapture): the graph its work is recorded into
    int capture_invalid;           // a call CUDA refuses during capture has invalidated it
};

// ----------------------------------------------------------------------------------------------------------------
// Graphs (stream capture). Between cudaStreamBeginCapture and cudaStreamEndCapture the work issued to the stream
// is recorded, not run: each kernel with its arguments as they were at the launch (copied by value, as CUDA
// copies them into the node), each copy and memset with its pointers, each matmul with copies of its descriptors
// and scalars. cudaGraphLaunch queues the recorded work again, in order, on the stream it is launched on, so a
// replay reads device memory (and pinned host memory) as it is then but every argument as it was at capture: a
// host value that changes between replays is frozen. The capture is global-mode, as the trainer asks for: a call
// that would make the host wait, allocate or free, or that issues work to the legacy default stream (which a
// blocking stream is ordered against), is refused with CUDA's error and a line that names it, the capture is
// invalidated and cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated. One stream captures at a time.
//
// A graph's pointers are frozen too: each node keeps the allocations it refers to (its copy's or memset's
// pointers, its matmul's matrices, and for a kernel every pointer-sized word of its arguments that points into
// one, a pointer inside a struct argument included). A replay after one of them was freed would, on a GPU, read
// and write whatever lies there now (another buffer, or nothing: a fault) with no error from the launch; here
// cudaGraphLaunch stops, naming the graph, the node, the allocation and where it was freed. The allocations are
// told apart by their serial numbers, not their addresses, so a buffer freed and allocated again where it was (as
// allocators like to do) is still caught. The cost: a lookup per pointer-sized word of a kernel's arguments at
// capture, and at a launch, only once some allocation a graph refers to has been freed, one per reference.
struct EmuRef {
    unsigned long long id;         // EmuAlloc::id
    uintptr_t base;
    size_t size;
    int kind;
};
struct EmuNode {
    std::function<void()> run;
    cudaEvent_t event;             // an event record: the replay moves the event's record to it
    const char *what;              // the kernel's name, or the call that issued it (emu_node_refs)
    std::vector<EmuRef> refs;      // the allocations it refers to
};
static const int GRAPH_MAGIC = 0x47525048, EXEC_MAGIC = 0x47455843;
struct CUgraph_st {
    int magic;
    std::vector<EmuNode> nodes;
    EmuCounts counted;             // what recording the nodes added to the counters, taken out again (see below)
    unsigned serial;               // the capture's number (the first is 1), and where it began
    int step, step_open;
};
struct CUgraphExec_st {
    int magic;
    std::vector<EmuNode> nodes;
    EmuCounts counted;
    unsigned serial;
    int step, step_open;
};
CUstream_st *g_capture = NULL;         // the stream that captures, if any
static unsigned g_captures = 0;         // captures begun (CUgraph_st::serial)
static EmuCounts g_capture_counts;      // the counters when it began
static CUstream_st g_legacy_stream = {STREAM_MAGIC, 0, {}, nullptr, nullptr, 0};
static std::vector<CUstream_st *> g_streams;  // every stream created (the legacy one is not in it)
static int g_flushing = 0;

static CUstream_st *stream_of(cudaStream_t s) {
    return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread ? &g_legacy_stream : s;
}
static int pending(const std::shared_ptr<int> &op) { return op && !*op; }
static void push(CUstream_st *q, std::function<void()> run, std::shared_ptr<int> after) {
    q->ops.push_back(EmuOp{std::move(run), std::make_shared<int>(0), std::move(after)});
    q->tail = q->ops.back().done;
}

cudaError_t capture_refuse(const char *who, cudaError_t e) {
    fprintf(stderr, "cuda-emu: %s while stream %p captures a graph: CUDA refuses it (%s) and invalidates the capture\n",
            who, (void *)g_capture, cudaGetErrorName(e));
    g_capture->capture_invalid = 1;
    return set_error(e);
}

// The next node's name and references (emu_node_refs, emu_node_scan), taken by emu_enqueue.
static const char *g_node_what = NULL;
static std::vector<EmuRef> g_node_refs;
static void node_ref(const void *p) {
    const EmuAlloc *a = p ? emu_find(p) : NULL;
    if (!a) return;
    for (const EmuRef &r : g_node_refs) if (r.id == a->id) return;
    g_node_refs.push_back(EmuRef{a->id, a->base, a->size, a->kind});
}
void emu_node_refs(const char *what, const void *const *ptrs, int n) {
    if (!g_capture) return;
    g_node_what = what;
    for (int i = 0; i < n; i++) node_ref(ptrs[i]);
}
void emu_node_scan(const char *what, const void *args, size_t bytes) {
    if (!g_capture) return;
    g_node_what = what;
    for (size_t o = 0; o + sizeof(uintptr_t) <= bytes; o += sizeof(uintptr_t)) {
        uintptr_t w;
        memcpy(&w, (const char *)args + o, sizeof(w));
        if (w >= 4096) node_ref((const void *)w);  // small values are sizes and flags, never memory
    }
}

// Queues work on stream s; returns what marks it done (empty when it ran at once, or was recorded into a graph).
std::shared_ptr<int> emu_enqueue(cudaStream_t s, std::function<void()> op) {
    configure();
    CUstream_st *q = stream_of(s);
    if (g_capture) {
        const char *what = g_node_what;
        std::vector<EmuRef> refs;
        refs.swap(g_node_refs);
        g_node_what = NULL;
        if (q == g_capture) {
            q->capture->nodes.push_back(EmuNode{std::move(op), NULL, what ? what : "an operation", std::move(refs)});
            return nullptr;
        }
        if (q == &g_legacy_stream && g_capture->blocking) {  // CUDA: cudaErrorStreamCaptureImplicit, and nothing runs
            capture_refuse("work issued to the legacy default stream (which a blocking stream is ordered against)",
                           cudaErrorStreamCaptureImplicit);
            return nullptr;
        }
    }
    if (!g_async) { op(); return nullptr; }
    // the legacy default stream and the blocking streams wait for each other's earlier work
    if (q == &g_legacy_stream) {
        for (CUstream_st *o : g_streams) if (o->blocking && pending(o->tail)) push(q, nullptr, o->tail);
    } else if (q->blocking && pending(g_legacy_stream.tail)) {
        push(q, nullptr, g_legacy_stream.tail);
    }
    push(q, std::move(op), nullptr);
    return q->tail;
}

static void stream_wait(cudaStream_t s, const std::shared_ptr<int> &op) {
    if (g_async && pending(op)) push(stream_of(s), nullptr, op);
}

unsigned long long g_ops_at_wait = 0;  // ops_issued when the host last waited for the device
void emu_device_flush(void) {
    if (g_flushing) return;  // a queued collective's own MPI calls
    g_flushing = 1;
    g_ops_at_wait = ops_issued(emu_counts);  // the host waits here (see the per-step counters)
    for (;;) {
        CUstream_st *pick = NULL;
        int left = 0;
        size_t n = g_streams.size();
        for (size_t i = 0; i <= n && !pick; i++) {
            // default-first: the legacy stream, then the others in creation order (the trainer's compute stream is
            // created first); side-first: the others newest first, the legacy one last
            CUstream_st *q = g_side_first ? (i < n ? g_streams[n - 1 - i] : &g_legacy_stream) : (i == 0 ? &g_legacy_stream : g_streams[i - 1]);
            if (q->ops.empty()) continue;
            left = 1;
            if (!pending(q->ops.front().after)) pick = q;
        }
        if (!pick) {
            if (left) emu_fatal("the device's streams wait for each other in a circle: no queued work can run");
            break;
        }
        EmuOp op = std::move(pick->ops.front());
        pick->ops.pop_front();
        if (op.run) op.run();
        *op.done = 1;
    }
    g_flushing = 0;
}

// ----------------------------------------------------------------------------------------------------------------
// The CUDA runtime calls that issue device work or make the host wait for it (emu.cpp has the others). Device
// work goes through the queue above; the calls that make the host wait run the queue first. Streams share the one
// queue; events pass when the queue reaches their record.

struct CUevent_st {
    int magic, recorded;
    CUstream_st *captured;      // its last record was into the capture of this stream (not run: nothing to wait for)
    std::shared_ptr<int> last;  // the record the device has to reach for the event to pass
    double t;
};

void emu_check_stream(const char *who, cudaStream_t s) {
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) return;
    if (s->magic != STREAM_MAGIC) emu_fatal("%s: stream %p is not a live stream (destroyed, or never created)", who, (void *)s);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

extern "C" {

cudaError_t cudaDeviceSynchronize(void) {
    if (g_capture) return capture_refuse("cudaDeviceSynchronize", cudaErrorStreamCaptureUnsupported);
    emu_counts.sync++;
    emu_device_flush();
    return cudaSuccess;
}

// Copies: the device side must lie inside one allocation (a GPU would fault, or corrupt a neighbour).
static cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int async, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    const EmuAlloc *ad = emu_find(dst), *as = emu_find(src);
    int dst_dev = ad && ad->kind == EMU_MEM_DEVICE && (uintptr_t)dst < ad->base + ad->size;
    int src_dev = as && as->kind == EMU_MEM_DEVICE && (uintptr_t)src < as->base + as->size;
    if (kind == cudaMemcpyDefault) {
        kind = dst_dev ? (src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                       : (src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    }
    const char *who = async ? "cudaMemcpyAsync" : "cudaMemcpy";
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) emu_require_device(who, "the destination", dst, n);
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) emu_require_device(who, "the source", src, n);
    if (kind == cudaMemcpyHostToDevice && src_dev)
        emu_fatal("%s(cudaMemcpyHostToDevice): the source %p is device memory", who, src);
    if (kind == cudaMemcpyDeviceToHost && dst_dev)
        emu_fatal("%s(cudaMemcpyDeviceToHost): the destination %p is device memory", who, dst);
    // a host copy waits for the device, unless it is an async copy to or from pinned memory
    int waits = (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost) &&
                (!async || (kind == cudaMemcpyHostToDevice ? !as : !ad));
    if (g_capture && (waits || !async))
        return capture_refuse(!async ? "cudaMemcpy (it waits, on the legacy default stream)" : "cudaMemcpyAsync from or to pageable host memory (it waits)",
                              cudaErrorStreamCaptureUnsupported);
    if (waits) {
        emu_device_flush();
        memmove(dst, src, n);
    } else if (kind == cudaMemcpyHostToHost) {
        memmove(dst, src, n);
    } else {
        const void *refs[] = {dst, src};
        emu_node_refs(who, refs, 2);
        emu_enqueue(stream, [=]() { memmove(dst, src, n); });  // reads the source when the device gets there
    }
    if (kind == cudaMemcpyHostToDevice) {
        emu_counts.h2d_bytes += n;
        if (!as) emu_counts.pageable++;
    }
    if (kind == cudaMemcpyDeviceToHost) {
        emu_counts.d2h_bytes += n;
        if (!ad) emu_counts.pageable++;
    }
    if (waits) emu_counts.sync++;
    if (kind != cudaMemcpyHostToHost) emu_counts.copies++;
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) { return copy(dst, src, n, kind, 0, 0); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    emu_check_stream("cudaMemcpyAsync", s);
    return copy(dst, src, n, kind, 1, s);
}
static cudaError_t fill(void *p, int v, size_t n, cudaStream_t s, const char *who) {
    if (n == 0) return cudaSuccess;
    emu_require_device(who, "the range", p, n);
    emu_counts.memsets++;
    emu_node_refs(who, &p, 1);
    emu_enqueue(s, [=]() { memset(p, v, n); });
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    if (g_capture) return capture_refuse("cudaMemset (on the legacy default stream)", cudaErrorStreamCaptureUnsupported);
    return fill(p, v, n, 0, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    emu_check_stream("cudaMemsetAsync", s);
    return fill(p, v, n, s, "cudaMemsetAsync");
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    *s = new CUstream_st{STREAM_MAGIC, (flags & cudaStreamNonBlocking) == 0, {}, nullptr, nullptr, 0};
    g_streams.push_back(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority) {
    (void)priority;
    return cudaStreamCreateWithFlags(s, flags);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    *least = 0;
    *greatest = -5;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    emu_check_stream("cudaStreamDestroy", s);
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) return set_error(cudaErrorInvalidResourceHandle);
    s->magic = 0;  // kept, so that a later use is caught
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu_check_stream("cudaStreamSynchronize", s);
    if (g_capture) return capture_refuse("cudaStreamSynchronize", cudaErrorStreamCaptureUnsupported);
    emu_counts.sync++;
    emu_device_flush();
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    emu_check_stream("cudaStreamQuery", s);
    if (g_capture) return capture_refuse("cudaStreamQuery", cudaErrorStreamCaptureUnsupported);
    if (!pending(stream_of(s)->tail)) return cudaSuccess;
    emu_device_flush();  // the device gets there by the next query, as a polling host would find
    return cudaErrorNotReady;
}

static void check_event(const char *who, cudaEvent_t e) {
    if (!e || e->magic != EVENT_MAGIC) emu_fatal("%s: event %p is not a live event", who, (void *)e);
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new CUevent_st{EVENT_MAGIC, 0, NULL, nullptr, 0.0};
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    return cudaEventCreate(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    check_event("cudaEventDestroy", e);
    e->magic = 0;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    check_event("cudaEventRecord", e);
    emu_check_stream("cudaEventRecord", s);
    auto run = [=]() {
        e->recorded = 1;
        e->t = now_ms();
    };
    if (g_capture && stream_of(s) == g_capture) {  // a node: its replay is the record
        g_capture->capture->nodes.push_back(EmuNode{run, e, "cudaEventRecord", {}});
        e->captured = g_capture;
        return cudaSuccess;
    }
    e->captured = NULL;
    e->last = emu_enqueue(s, run);
    return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags) {
    (void)flags;
    return cudaEventRecord(e, s);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    check_event("cudaEventSynchronize", e);
    if (g_capture) return capture_refuse("cudaEventSynchronize", cudaErrorStreamCaptureUnsupported);
    emu_counts.sync++;
    if (pending(e->last)) emu_device_flush();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    check_event("cudaEventQuery", e);
    if (g_capture && e->captured == g_capture) return capture_refuse("cudaEventQuery of an event recorded in the capture", cudaErrorStreamCaptureUnsupported);
    if (!pending(e->last)) return cudaSuccess;
    emu_device_flush();  // not yet; by the next query it has passed
    return cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    check_event("cudaEventElapsedTime", a);
    check_event("cudaEventElapsedTime", b);
    if (pending(a->last) || pending(b->last)) return cudaErrorNotReady;  // not an error that sticks, as on a GPU
    if (!a->recorded || !b->recorded) return set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    emu_check_stream("cudaStreamWaitEvent", s);
    check_event("cudaStreamWaitEvent", e);
    if (g_capture && (e->captured == g_capture) != (stream_of(s) == g_capture))
        return capture_refuse(e->captured ? "cudaStreamWaitEvent outside the capture on an event recorded inside it"
                                          : "cudaStreamWaitEvent in the capture on an event recorded outside it",
                              cudaErrorStreamCaptureIsolation);
    if (e->captured) return cudaSuccess;  // both in the capture: the replay runs the stream's work in order anyway
    stream_wait(s, e->last);  // the record as it is now: a later one does not move the wait
    return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    emu_check_stream("cudaLaunchHostFunc", s);
    emu_node_refs("cudaLaunchHostFunc", NULL, 0);
    emu_enqueue(s, [=]() { fn(data); });
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    (void)mode;  // every capture is checked as global-mode
    emu_check_stream("cudaStreamBeginCapture", s);
    if (stream_of(s) == &g_legacy_stream) {
        fprintf(stderr, "cuda-emu: cudaStreamBeginCapture on the legacy default stream: CUDA refuses it\n");
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    if (g_capture) emu_fatal("cudaStreamBeginCapture(%p) while stream %p captures: the emulator captures one stream at a time",
                             (void *)s, (void *)g_capture);
    s->capture = new CUgraph_st{GRAPH_MAGIC, {}, {}, ++g_captures, g_step, g_step_open};
    s->capture_invalid = 0;
    g_capture = s;
    g_capture_counts = emu_counts;
    return cudaSuccess;
}

}  // extern "C"

// The allocations that live graphs (captured, and instantiated) refer to, with how many references each, and of
// those, the ones freed since: by whom, called from where, and when.
struct EmuFreed {
    const char *who;
    uint32_t site;
    int step, step_open;
};
static std::unordered_map<unsigned long long, int> g_held;
static std::unordered_map<unsigned long long, EmuFreed> g_freed;
static void hold(const std::vector<EmuNode> &nodes, int d) {
    for (const EmuNode &n : nodes)
        for (const EmuRef &r : n.refs) {
            int &c = g_held[r.id];
            c += d;
            if (c <= 0) {
                g_held.erase(r.id);
                g_freed.erase(r.id);
            }
        }
}
void emu_graph_freed(const EmuAlloc &a, const char *who, const void *caller) {
    if (g_held.empty() || !g_held.count(a.id)) return;
    g_freed[a.id] = EmuFreed{who, site_of(caller), g_step, g_step_open};
}
// "in step 3", "after step 3", "before the first step"
static const char *when(int step, int open, char *buf, size_t n) {
    if (step < 0) snprintf(buf, n, "before the first step");
    else snprintf(buf, n, "%s step %d", open ? "in" : "after", step);
    return buf;
}
static const char *mem_kind(int kind) {
    return kind == EMU_MEM_DEVICE ? "device memory" : kind == EMU_MEM_PINNED ? "pinned host memory" : "registered host memory";
}
// Stops a replay whose nodes refer to memory freed since the capture (see EmuRef).
static void check_replay(const CUgraphExec_st *exec) {
    if (g_freed.empty()) return;
    for (size_t i = 0; i < exec->nodes.size(); i++)
        for (const EmuRef &r : exec->nodes[i].refs) {
            auto it = g_freed.find(r.id);
            if (it == g_freed.end()) continue;
            const EmuFreed &f = it->second;
            char site[600], cw[64], fw[64];
            emu_fatal("cudaGraphLaunch: graph #%u (executable %p, %zu nodes, captured %s) replays node %zu (%s) on %s "
                      "[%p, +%zu bytes), freed since the graph was captured: by %s %s, called from %s. A GPU would read "
                      "and write whatever lies there now; capture the graph again after its buffers move",
                      exec->serial, (const void *)exec, exec->nodes.size(), when(exec->step, exec->step_open, cw, sizeof(cw)),
                      i, exec->nodes[i].what, mem_kind(r.kind), (void *)r.base, r.size, f.who,
                      when(f.step, f.step_open, fw, sizeof(fw)), emu_where(f.site, site, sizeof(site)));
        }
}

extern "C" {

// Recording issued nothing: what it added to the operation counters is taken out again and kept with the graph,
// whose launches count it as replayed nodes.
static EmuCounts counts_since(const EmuCounts &a) {
    EmuCounts d = {};
    EmuCounts &c = emu_counts;
    d.launches = c.launches - a.launches; d.matmuls = c.matmuls - a.matmuls; d.copies = c.copies - a.copies;
    d.memsets = c.memsets - a.memsets; d.collectives = c.collectives - a.collectives;
    d.h2d_bytes = c.h2d_bytes - a.h2d_bytes; d.d2h_bytes = c.d2h_bytes - a.d2h_bytes;
    c.launches -= d.launches; c.matmuls -= d.matmuls; c.copies -= d.copies; c.memsets -= d.memsets;
    c.collectives -= d.collectives; c.h2d_bytes -= d.h2d_bytes; c.d2h_bytes -= d.d2h_bytes;
    return d;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    emu_check_stream("cudaStreamEndCapture", s);
    *graph = NULL;
    if (!g_capture || stream_of(s) != g_capture) {
        fprintf(stderr, "cuda-emu: cudaStreamEndCapture(%p): the stream is not capturing\n", (void *)s);
        return set_error(cudaErrorIllegalState);
    }
    CUgraph_st *g = s->capture;
    g->counted = counts_since(g_capture_counts);
    int invalid = s->capture_invalid;
    s->capture = NULL;
    s->capture_invalid = 0;
    g_capture = NULL;
    if (invalid) {
        delete g;
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    hold(g->nodes, 1);
    *graph = g;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status) {
    emu_check_stream("cudaStreamIsCapturing", s);
    CUstream_st *q = stream_of(s);
    *status = q != g_capture || !q ? cudaStreamCaptureStatusNone
              : q->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags) {
    (void)flags;
    if (!g || g->magic != GRAPH_MAGIC) emu_fatal("cudaGraphInstantiate: graph %p is not a live graph", (void *)g);
    *exec = new CUgraphExec_st{EXEC_MAGIC, g->nodes, g->counted, g->serial, g->step, g->step_open};
    hold(g->nodes, 1);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    emu_check_stream("cudaGraphLaunch", s);
    if (!exec || exec->magic != EXEC_MAGIC) emu_fatal("cudaGraphLaunch: %p is not a live executable graph", (void *)exec);
    if (g_capture) return capture_refuse("cudaGraphLaunch (the emulator does not nest graphs)", cudaErrorStreamCaptureUnsupported);
    check_replay(exec);
    emu_counts.graphs++;
    emu_counts.graph_nodes += exec->counted.launches + exec->counted.matmuls + exec->counted.copies + exec->counted.memsets +
                              exec->counted.collectives;
    emu_counts.h2d_bytes += exec->counted.h2d_bytes;
    emu_counts.d2h_bytes += exec->counted.d2h_bytes;
    for (const EmuNode &n : exec->nodes) {
        if (n.event) {
            n.event->captured = NULL;
            n.event->last = emu_enqueue(s, n.run);
        } else emu_enqueue(s, n.run);
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (!exec || exec->magic != EXEC_MAGIC) emu_fatal("cudaGraphExecDestroy: %p is not a live executable graph", (void *)exec);
    exec->magic = 0;
    hold(exec->nodes, -1);
    exec->nodes.clear();  // kept, so that a later use is caught
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    if (!g || g->magic != GRAPH_MAGIC) emu_fatal("cudaGraphDestroy: %p is not a live graph", (void *)g);
    g->magic = 0;
    hold(g->nodes, -1);
    g->nodes.clear();
    return cudaSuccess;
}

}  // extern "C"
