// dev/cuda/emu/emu.cpp: the emulated GPU's runtime: kernels on fibers, barriers and warp collectives with the
// checks a GPU would fail on, device memory, the device's work queue (it runs behind the host, as a GPU
// does), streams and events, the CUDA runtime calls the trainer makes, the per-step counters, and the race detector's shadow memory (see emu.h for the model).
// Compiled without instrumentation: only the device code's own accesses reach the race detector.
#include "emu.h"
#include "emu_internal.h"

#include <elf.h>
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

EmuRegs emu_regs;
EmuCounts emu_counts;

// ----------------------------------------------------------------------------------------------------------------
// The launch in progress, and the threads of the block that runs.

enum { T_RUN, T_BAR, T_WARP, T_DONE, T_SPIN };
enum { C_SYNCWARP, C_SHFL, C_VOTE };
static const char *coll_name[] = {"__syncwarp", "__shfl_sync", "a warp vote"};

struct Thread {
    void *sp;                 // the fiber's saved stack pointer
    char *stack_lo, *stack_hi;
    uint3 tid;
    int linear, lane, warp, state;
    // what the thread waits at
    const char *file;         // the source line of the barrier or collective it waits at
    int line;
    int kind;                 // C_*
    unsigned mask;
    int mode, arg, width, size;   // shuffles and votes
    unsigned char val[16], res[16];
    int pred;                 // __syncthreads_count/and/or, votes
    // waits on other blocks: the last atomic's address and the value it read (a new value is progress), and for the
    // race detector the thread's view of other blocks (block index -> the newest epoch ordered before it)
    const void *atomic_at;
    unsigned long long atomic_seen;
    std::map<uint32_t, uint32_t> *fence_snap, *observed, *acquired;
};

struct Launch {
    const EmuKernel *k;
    dim3 grid, block;
    size_t smem;
    void (*entry)(void *);
    void *args;
    uint3 bid;
    int nthreads, nwarps;
    uint32_t index;  // the running block's linear index in the grid
};
static Launch *g_launch = NULL;
static std::vector<Thread *> g_threads;  // fiber i runs thread i of the block
static Thread *g_cur = NULL;             // the thread whose fiber runs, NULL on the scheduler's stack
static void *g_sched_sp = NULL;
static unsigned char *g_dyn_smem = NULL;  // the block's dynamic shared memory (the device maximum, reused)
static unsigned long long g_progress = 0;  // counts what a waiting block can be waiting for (see run_kernel)
static std::vector<Thread *> g_all_fibers;  // every fiber made (the stack-overflow handler looks at all)
static const size_t SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN = 232448;  // an H100's limits per block
// cudaFuncAttributeMaxDynamicSharedMemorySize per kernel (built on first use: CUDA may be called from constructors)
static std::map<const void *, int> &max_dyn_smem(void) {
    static std::map<const void *, int> m;
    return m;
}
static int g_in_kernel = 0;

// Names the kernel, block and thread when there is one.
void emu_fatal(const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "cuda-emu: ");
    if (g_launch) {
        fprintf(stderr, "kernel %s, block (%u,%u,%u)", g_launch->k->name, g_launch->bid.x, g_launch->bid.y,
                g_launch->bid.z);
        if (g_cur) fprintf(stderr, ", thread (%u,%u,%u) [warp %d lane %d]", g_cur->tid.x, g_cur->tid.y, g_cur->tid.z,
                           g_cur->warp, g_cur->lane);
        fprintf(stderr, ": ");
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    exit(1);
}

// ----------------------------------------------------------------------------------------------------------------
// Source locations for messages: code addresses through addr2line (the race build has -g).

extern "C" char __executable_start[];
static int exe_is_pie(void) {
    static int pie = -1;
    if (pie < 0) {
        Elf64_Ehdr h;
        FILE *f = fopen("/proc/self/exe", "rb");
        pie = f && fread(&h, sizeof(h), 1, f) == 1 && h.e_type == ET_DYN;
        if (f) fclose(f);
    }
    return pie;
}
static uint32_t site_of(const void *pc) { return (uint32_t)((uintptr_t)pc - (uintptr_t)__executable_start); }
// "function at file:line" for a code address (a return address: the call is just before it)
static const char *where(uint32_t site, char *buf, size_t n) {
    uintptr_t a = (uintptr_t)site - 1 + (exe_is_pie() ? 0 : (uintptr_t)__executable_start);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "addr2line -C -f -s -e /proc/%d/exe 0x%lx 2>/dev/null", (int)getpid(), (unsigned long)a);
    snprintf(buf, n, "code offset 0x%x", site);
    FILE *p = popen(cmd, "r");
    if (!p) return buf;
    char fn[512] = "", loc[512] = "";
    if (fgets(fn, sizeof(fn), p) && fgets(loc, sizeof(loc), p) && loc[0] != '?') {
        fn[strcspn(fn, "\n")] = 0;
        loc[strcspn(loc, " \n")] = 0;  // without " (discriminator N)"
        snprintf(buf, n, "%s (%s)", loc, fn);
    }
    pclose(p);
    return buf;
}


// ----------------------------------------------------------------------------------------------------------------
// Configuration (environment, read once).

enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };
static int g_order = ORDER_FORWARD;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static size_t g_stack_bytes = 64 * 1024;
static int g_counts_on = 0;
static int g_async = 1;  // TRAIN_GPT_EMU_ASYNC=0: every piece of device work runs when it is issued
static int g_side_first = 0;  // TRAIN_GPT_EMU_STREAMS=side-first: other streams run before the default one
static int g_race = 0;  // set by __tsan_init: the device code is instrumented
static unsigned long long g_resident = 0;  // TRAIN_GPT_EMU_RESIDENT: at most this many blocks live at once (0: no limit)

static void configure(void) {
    static int done = 0;
    if (done) return;
    done = 1;
    const char *o = getenv("TRAIN_GPT_EMU_ORDER");
    if (o && *o) {
        if (strcmp(o, "forward") == 0) g_order = ORDER_FORWARD;
        else if (strcmp(o, "reverse") == 0) g_order = ORDER_REVERSE;
        else if (strncmp(o, "random", 6) == 0) {
            g_order = ORDER_RANDOM;
            if (o[6] == ':') g_rng ^= strtoull(o + 7, NULL, 10) * 0xbf58476d1ce4e5b9ull;
        } else {
            fprintf(stderr, "cuda-emu: TRAIN_GPT_EMU_ORDER=%s: expected forward, reverse or random[:SEED]\n", o);
            exit(2);
        }
    }
#if defined(EMU_ASAN)
    g_stack_bytes = 512 * 1024;  // instrumented frames are larger
#endif
    if (g_race) g_stack_bytes = 256 * 1024;
    const char *kb = getenv("TRAIN_GPT_EMU_STACK_KB");
    if (kb && atol(kb) > 0) g_stack_bytes = (size_t)atol(kb) * 1024;
    const char *c = getenv("TRAIN_GPT_EMU_COUNTS");
    g_counts_on = c && strcmp(c, "1") == 0;
    const char *st = getenv("TRAIN_GPT_EMU_STREAMS");
    if (st && *st) {
        if (strcmp(st, "default-first") != 0 && strcmp(st, "side-first") != 0) {
            fprintf(stderr, "cuda-emu: TRAIN_GPT_EMU_STREAMS=%s: expected default-first or side-first\n", st);
            exit(2);
        }
        g_side_first = strcmp(st, "side-first") == 0;
    }
    const char *rs = getenv("TRAIN_GPT_EMU_RESIDENT");
    if (rs && *rs) {
        char *end = NULL;
        g_resident = strtoull(rs, &end, 10);
        if (*end) {
            fprintf(stderr, "cuda-emu: TRAIN_GPT_EMU_RESIDENT=%s: expected a number of blocks (0: no limit)\n", rs);
            exit(2);
        }
    }
    const char *a = getenv("TRAIN_GPT_EMU_ASYNC");
    if (a && *a) {
        if (strcmp(a, "0") != 0 && strcmp(a, "1") != 0) {
            fprintf(stderr, "cuda-emu: TRAIN_GPT_EMU_ASYNC=%s: expected 1 (the device runs behind the host, the default) or 0\n", a);
            exit(2);
        }
        g_async = a[0] == '1';
    }
}

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
struct EmuNode {
    std::function<void()> run;
    cudaEvent_t event;             // an event record: the replay moves the event's record to it
};
static const int GRAPH_MAGIC = 0x47525048, EXEC_MAGIC = 0x47455843;
struct CUgraph_st {
    int magic;
    std::vector<EmuNode> nodes;
    EmuCounts counted;             // what recording the nodes added to the counters, taken out again (see below)
};
struct CUgraphExec_st {
    int magic;
    std::vector<EmuNode> nodes;
    EmuCounts counted;
};
static CUstream_st *g_capture = NULL;  // the stream that captures, if any
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

extern "C" {
static cudaError_t capture_refuse(const char *who, cudaError_t e);  // defined with the runtime's calls below
}

// Queues work on stream s; returns what marks it done (empty when it ran at once, or was recorded into a graph).
std::shared_ptr<int> emu_enqueue(cudaStream_t s, std::function<void()> op) {
    configure();
    CUstream_st *q = stream_of(s);
    if (g_capture) {
        if (q == g_capture) {
            q->capture->nodes.push_back(EmuNode{std::move(op), NULL});
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

static unsigned long long ops_issued(const EmuCounts &c);
static unsigned long long g_ops_at_wait = 0;  // ops_issued when the host last waited for the device
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

static uint64_t next_random(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

// The order in which n threads (or blocks) are visited.
static void make_order(std::vector<int> &v, int n) {
    v.resize(n);
    for (int i = 0; i < n; i++) v[i] = g_order == ORDER_REVERSE ? n - 1 - i : i;
    if (g_order == ORDER_RANDOM)
        for (int i = n - 1; i > 0; i--) std::swap(v[i], v[(int)(next_random() % (uint64_t)(i + 1))]);
}

// ----------------------------------------------------------------------------------------------------------------
// Fibers. emu_switch saves the callee-saved registers, MXCSR and the x87 control word on the current stack, stores
// the stack pointer in *from, and resumes the context whose stack pointer is `to`.

extern "C" void emu_switch(void **from, void *to);
#if defined(__x86_64__)
asm(R"(
    .pushsection .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
    .popsection
)");
#else
#error "dev/cuda/emu: the fiber switch is written for x86-64"
#endif

static void yield(void);
static void thread_exits(Thread *t);

// A fiber runs threads until the process ends: after a thread returns from the kernel, its fiber waits for the
// next thread it is given (of this block or a later one).
__attribute__((noreturn)) static void fiber_main(void) {
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    for (;;) {
        g_launch->entry(g_launch->args);
        thread_exits(g_cur);
        yield();
    }
}

// A fault in a fiber's guard page is a stack overflow: say so (ASan builds report it themselves).
static void on_segv(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    uintptr_t a = (uintptr_t)info->si_addr;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (Thread *t : g_all_fibers)
        if (a >= (uintptr_t)t->stack_lo - page && a < (uintptr_t)t->stack_lo) {
            static const char msg[] = "cuda-emu: a thread overflowed its fiber's stack (TRAIN_GPT_EMU_STACK_KB raises it)\n";
            if (write(2, msg, sizeof(msg) - 1) < 0) {}
            _exit(1);
        }
    signal(sig, SIG_DFL);  // any other fault: the default action, on return
}

static void catch_stack_overflow(void) {
#ifndef EMU_ASAN
    static char alt[64 * 1024];
    stack_t ss = {};
    ss.ss_sp = alt;
    ss.ss_size = sizeof(alt);
    sigaltstack(&ss, NULL);
    struct sigaction sa = {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
#endif
}

static Thread *new_thread(void) {
    if (g_all_fibers.empty()) catch_stack_overflow();
    Thread *t = (Thread *)calloc(1, sizeof(Thread));
    g_all_fibers.push_back(t);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    // one guard page below the stack: an overflow faults instead of writing into the neighbour's stack
    char *m = (char *)mmap(NULL, g_stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
    if (m == MAP_FAILED) emu_fatal("cannot map a %zu-byte fiber stack", g_stack_bytes);
    mprotect(m, page, PROT_NONE);
    t->stack_lo = m + page;
    t->stack_hi = m + page + g_stack_bytes;
    // The first switch into the fiber "returns" into fiber_main with the stack aligned as after a call
    // (rsp + 8 a multiple of 16), so the compiler's aligned spills of vector registers land aligned.
    uint64_t *top = (uint64_t *)((uintptr_t)t->stack_hi & ~(uintptr_t)63);
    uint64_t *sp = top - 9;
    uint32_t csr[2];
    asm volatile("stmxcsr %0" : "=m"(csr[0]));
    asm volatile("fnstcw %0" : "=m"(csr[1]));
    memcpy(&sp[0], csr, 8);
    for (int i = 1; i <= 6; i++) sp[i] = 0;  // r15 r14 r13 r12 rbx rbp
    sp[7] = (uint64_t)(uintptr_t)&fiber_main;
    sp[8] = 0;  // fiber_main's return address: it never returns
    t->sp = sp;
    return t;
}

// The scheduling of a block: a pass runs every runnable thread, in the chosen order, up to its next barrier;
// threads that a completed warp collective releases run in the next pass. Fibers switch straight to the next
// thread of the pass; the scheduler's own stack is used between passes.
static std::vector<int> g_pass, g_next;
static size_t g_pass_at = 0;

static void switch_stacks(void **save, void *to, Thread *target) {
#ifdef EMU_ASAN
    void *fake = NULL;
    if (target) __sanitizer_start_switch_fiber(&fake, target->stack_lo, (size_t)(target->stack_hi - target->stack_lo));
    else __sanitizer_start_switch_fiber(&fake, NULL, 0);  // the scheduler runs on the main stack
    emu_switch(save, to);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    (void)target;
    emu_switch(save, to);
#endif
}

static Thread *next_in_pass(void) {
    while (g_pass_at < g_pass.size()) {
        Thread *t = g_threads[g_pass[g_pass_at++]];
        if (t->state == T_RUN) return t;
    }
    return NULL;
}

// The running thread stops (it waits, or has exited): the next thread of the pass runs, or the scheduler.
static void yield(void) {
    Thread *t = g_cur, *n = next_in_pass();
    g_cur = n;
    if (n) {
        emu_regs.tid = n->tid;
        if (n != t) switch_stacks(&t->sp, n->sp, n);
    } else {
        switch_stacks(&t->sp, g_sched_sp, NULL);
    }
}

// From the scheduler: runs the pass until every thread in it has stopped.
static void run_pass(void) {
    g_pass_at = 0;
    Thread *n = next_in_pass();
    if (!n) return;
    g_cur = n;
    emu_regs.tid = n->tid;
    switch_stacks(&g_sched_sp, n->sp, n);
    g_cur = NULL;
}

// Orders a pass's threads as TRAIN_GPT_EMU_ORDER says.
static void order_pass(std::vector<int> &v) {
    if (g_order == ORDER_FORWARD) {
        if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
    } else if (g_order == ORDER_REVERSE) {
        std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
    }
    else for (int i = (int)v.size() - 1; i > 0; i--) std::swap(v[i], v[(int)(next_random() % (uint64_t)(i + 1))]);
}

// ----------------------------------------------------------------------------------------------------------------
// The race detector's state (used only when the device code is instrumented: g_race). Every shared-memory and
// device-memory access of a kernel is recorded per 2-byte granule: the last write and the last two reads, each as
// (barrier interval, warp-sync generation, code site, actor), the actor being a thread. Two accesses to one granule, at least one a write, by different actors, conflict unless
//   - a __syncthreads of the block lies between them (an older barrier interval), or
//   - both are of one warp and a __syncwarp naming both happened between them (a newer warp-sync generation);
//     a shuffle orders no memory (CUDA promises memory ordering for __syncwarp only), or
//   - (device memory) they are in different launches; accesses of different blocks of one launch always conflict.

struct Rec {
    uint32_t epoch, gen, site;  // epoch 0: no access recorded
    uint16_t actor, flags;
    uint32_t block;             // the actor's block (linear index in the grid)
};
struct Shadow {
    Rec w, r1, r2;
};
// g_epoch numbers barrier intervals across all blocks; g_blk_epoch is the running block's current one
static uint32_t g_epoch = 1, g_gen = 1, g_block_base = 1, g_launch_base = 1, g_blk_epoch = 1;
// Release and acquire between blocks (a __threadfence then an atomic on one side, an atomic then a __threadfence on
// the other): views map a block index to the newest barrier interval of that block whose accesses are ordered
// before. g_sync: per atomic's address, what releases on it published; g_blk_vc: what the running block's threads
// all see (a thread's acquired view joins it at the block's next __syncthreads).
typedef std::map<uint32_t, uint32_t> View;
static std::map<uintptr_t, View> g_sync;
static View g_blk_vc;
static void view_join(View &into, const View &from) {
    for (const auto &e : from) {
        uint32_t &v = into[e.first];
        if (e.second > v) v = e.second;
    }
}
static std::vector<std::vector<std::pair<uint32_t, unsigned>>> g_warp_log;  // per warp: (generation, mask) since
                                                                             // the last __syncthreads
static Shadow *g_smem_shadow = NULL, *g_static_shadow = NULL, *g_arena_shadow = NULL;
static uintptr_t g_static_lo = 0, g_static_hi = 0;  // the executable's data and bss: static __shared__ variables
static char *g_arena = NULL;                         // device memory, when racing (shadowed)
static size_t g_arena_size = 0, g_arena_used = 0;

static void race_new_block(void) {
    g_block_base = g_blk_epoch = ++g_epoch;
    if ((int)g_warp_log.size() < g_launch->nwarps) g_warp_log.resize(g_launch->nwarps);
    for (auto &l : g_warp_log) l.clear();
}
static void race_barrier(void) {
    g_blk_epoch = ++g_epoch;
    for (auto &l : g_warp_log) l.clear();
    for (int i = 0; i < g_launch->nthreads; i++)  // what a thread acquired, every thread sees past the barrier
        if (g_threads[i]->acquired) view_join(g_blk_vc, *g_threads[i]->acquired);
}
static void race_warp_sync(int warp, unsigned mask) {
    if (!g_race) return;
    if ((int)g_warp_log.size() <= warp) g_warp_log.resize(warp + 1);
    g_warp_log[warp].push_back(std::make_pair(++g_gen, mask));
}

// ----------------------------------------------------------------------------------------------------------------
// Device memory. Every allocation is filled with 0xff bytes (NaN in fp32, bf16 and fp16).

static std::map<uintptr_t, EmuAlloc> &allocs(void) {  // built on first use: CUDA may be called from constructors
    static std::map<uintptr_t, EmuAlloc> m;
    return m;
}
#define g_allocs allocs()
static size_t g_device_bytes = 0, g_device_peak = 0;
static const size_t DEVICE_BYTES = 80ull << 30;  // what cudaMemGetInfo reports: an H100's 80 GiB

const EmuAlloc *emu_find(const void *p) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return NULL;
    --it;
    if (a <= it->second.base + it->second.size) return &it->second;
    return NULL;
}

int emu_device_range(const void *p, size_t n) {
    const EmuAlloc *al = emu_find(p);
    return al && al->kind == EMU_MEM_DEVICE && (uintptr_t)p + n <= al->base + al->size;
}

void emu_require_device(const char *who, const char *what, const void *p, size_t n) {
    if (emu_device_range(p, n)) return;
    const EmuAlloc *al = emu_find(p);
    if (!al) emu_fatal("%s: %s [%p, +%zu bytes) is not device memory (no cudaMalloc holds it)", who, what, p, n);
    if (al->kind != EMU_MEM_DEVICE)
        emu_fatal("%s: %s %p is pinned host memory, not device memory", who, what, p);
    emu_fatal("%s: %s [%p, +%zu bytes) runs %zu bytes past the end of its allocation (%p, %zu bytes)", who, what, p, n,
              (size_t)((uintptr_t)p + n - (al->base + al->size)), (void *)al->base, al->size);
}

static void *device_alloc(size_t bytes) {
    void *p = NULL;
    if (g_race) {
        // bump allocation in the shadowed arena; 256 unallocated bytes between allocations catch overruns
        size_t at = (g_arena_used + 255) & ~(size_t)255;
        if (at + bytes + 256 > g_arena_size) return NULL;
        p = g_arena + at;
        g_arena_used = at + bytes + 256;
        Shadow *s = g_arena_shadow + at / 2;
        for (size_t i = 0; i < (bytes + 1) / 2; i++) { memset(&s[i], 0, sizeof(Shadow)); s[i].w.flags = 1; }
    } else if (posix_memalign(&p, 256, bytes > 0 ? bytes : 1) != 0) {
        return NULL;
    }
    return p;
}

static void device_release(void *p, size_t bytes) {
    if (g_race) {
        Shadow *s = g_arena_shadow + ((char *)p - g_arena) / 2;
        memset(s, 0, (bytes + 1) / 2 * sizeof(Shadow));  // unallocated again: a later access is caught
        madvise(p, bytes, MADV_DONTNEED);
    } else {
        free(p);
    }
}

// ----------------------------------------------------------------------------------------------------------------
// Launching a kernel: blocks one after another, each block's threads on fibers.

// Warp collectives in progress: per warp, the groups of lanes that have arrived at one (a group completes when
// every lane of its mask has arrived), and the lanes that have exited.
struct Group {
    int kind, mode, width, size, line;
    unsigned mask, arrived;
    const char *file;
};
static std::vector<Group> g_groups[32];
static unsigned g_exited[32];

static void describe_waits(char *buf, size_t n) {
    // e.g. "threads 0-31 wait at __syncwarp (mask 0xffffffff) at train_gpt.cu:640; threads 32-127 wait at ..."
    size_t len = 0;
    buf[0] = 0;
    int nt = g_launch->nthreads;
    for (int i = 0; i < nt && len < n - 200;) {
        Thread *t = g_threads[i];
        int j = i + 1;
        while (j < nt && g_threads[j]->state == t->state && g_threads[j]->line == t->line &&
               g_threads[j]->file == t->file && g_threads[j]->kind == t->kind && g_threads[j]->mask == t->mask)
            j++;
        char w[600];
        if (t->state == T_DONE) snprintf(w, sizeof(w), "have exited");
        else if (t->state == T_SPIN) snprintf(w, sizeof(w), "spin (__nanosleep) at %s:%d", t->file, t->line);
        else if (t->state == T_BAR) snprintf(w, sizeof(w), "wait at __syncthreads at %s:%d", t->file, t->line);
        else if (t->state == T_WARP) snprintf(w, sizeof(w), "wait at %s (mask 0x%08x) at %s:%d", coll_name[t->kind], t->mask, t->file, t->line);
        else snprintf(w, sizeof(w), "run");
        len += snprintf(buf + len, n - len, "%s threads %d-%d %s", i ? ";" : "", i, j - 1, w);
        i = j;
    }
}

// Runs the block (start: from the beginning; else resumed, its spinning threads run again) until every thread has
// exited (returns 1) or it waits on another block: no thread can run and some spin in __nanosleep (returns 0).
static int run_block(int start) {
    Launch *L = g_launch;
    int n = L->nthreads;
    if (start) {
        while ((int)g_threads.size() < n) g_threads.push_back(new_thread());
        for (int i = 0; i < n; i++) {
            Thread *t = g_threads[i];
            t->linear = i;
            t->tid = make_uint3(i % L->block.x, (i / L->block.x) % L->block.y, i / (L->block.x * L->block.y));
            t->lane = i % 32;
            t->warp = i / 32;
            t->state = T_RUN;
            t->file = NULL;
            t->line = 0;
            t->atomic_at = NULL;
            if (t->fence_snap) { delete t->fence_snap; t->fence_snap = NULL; }
            if (t->observed) { delete t->observed; t->observed = NULL; }
            if (t->acquired) { delete t->acquired; t->acquired = NULL; }
        }
        for (int w = 0; w < L->nwarps; w++) {
            g_groups[w].clear();
            g_exited[w] = 0;
        }
        g_blk_vc.clear();
        if (L->smem) memset(g_dyn_smem, 0xff, L->smem);  // unwritten shared memory reads as NaN
        if (g_race) race_new_block();
        g_next.resize(n);
        for (int i = 0; i < n; i++) g_next[i] = i;
    } else {
        for (int i = 0; i < n; i++)
            if (g_threads[i]->state == T_SPIN) {
                g_threads[i]->state = T_RUN;
                g_next.push_back(i);
            }
    }
    for (;;) {
        while (!g_next.empty()) {
            g_pass.swap(g_next);
            g_next.clear();
            order_pass(g_pass);
            run_pass();
        }
        int done = 0, bar = 0, spin = 0;
        for (int i = 0; i < n; i++) {
            done += g_threads[i]->state == T_DONE;
            bar += g_threads[i]->state == T_BAR;
            spin += g_threads[i]->state == T_SPIN;
        }
        if (done == n) return 1;
        if (spin) return 0;
        char desc[4096];
        if (bar + done == n) {
            Thread *first = NULL;
            for (int i = 0; i < n && !first; i++) if (g_threads[i]->state == T_BAR) first = g_threads[i];
            if (done > 0) {
                describe_waits(desc, sizeof(desc));
                emu_fatal("__syncthreads is not reached by every thread of the block (a GPU would hang or misbehave): %s",
                          desc);
            }
            // every thread waits at the same __syncthreads: release them (with the count of true predicates)
            int count = 0;
            for (int i = 0; i < n; i++) {
                Thread *t = g_threads[i];
                if (t->line != first->line || (t->file != first->file && strcmp(t->file, first->file) != 0)) {
                    describe_waits(desc, sizeof(desc));
                    emu_fatal("the threads of the block wait at different __syncthreads: %s", desc);
                }
                count += t->pred != 0;
            }
            for (int i = 0; i < n; i++) {
                g_threads[i]->state = T_RUN;
                g_threads[i]->pred = count;
                g_next.push_back(i);
            }
            if (g_race) race_barrier();
            g_progress++;
            continue;
        }
        describe_waits(desc, sizeof(desc));
        emu_fatal("deadlock: no thread can go on: %s", desc);
    }
}

const char *emu_kernel_name(const char *pretty) {
    const char *p = strstr(pretty, "K = ");
    if (!p) return pretty;
    p += 4;
    size_t n = strlen(p);
    if (n && p[n - 1] == ']') n--;
    char *s = (char *)malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void emu_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

static cudaError_t g_last_error = cudaSuccess;
static cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}

void emu_check_stream(const char *who, cudaStream_t s);
static void run_kernel(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, void (*entry)(void *), void *args, int threads);

void emu_launch(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void (*entry)(void *),
                void *args, size_t args_bytes, const void *const *pointers, int npointers) {
    configure();
    emu_counts.launches++;
    // what the launch itself would be refused for: cudaGetLastError returns it, as on a GPU; we also say why
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    const char *bad = NULL;
    char why[256];
    if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) bad = "an empty grid or block";
    else if (threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
        snprintf(why, sizeof(why), "a block of %ux%ux%u threads (at most 1024 threads, 1024 x 1024 x 64)", block.x,
                 block.y, block.z);
        bad = why;
    } else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(why, sizeof(why), "a grid of %ux%ux%u blocks (y and z at most 65535)", grid.x, grid.y, grid.z);
        bad = why;
    }
    if (bad) {
        fprintf(stderr, "cuda-emu: kernel %s: launch refused: %s\n", k->name, bad);
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (smem > SMEM_DEFAULT) {
        auto it = max_dyn_smem().find(k->func);
        int allowed = it == max_dyn_smem().end() ? (int)SMEM_DEFAULT : it->second;
        if (smem > (size_t)allowed) {
            fprintf(stderr, "cuda-emu: kernel %s: launch refused: %zu bytes of dynamic shared memory, over the %d the "
                    "kernel may use (above 48 KiB needs cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))\n",
                    k->name, smem, allowed);
            set_error(cudaErrorInvalidValue);
            return;
        }
    }
    emu_check_stream(k->name, stream);
    for (int i = 0; i < npointers; i++) {
        if (!pointers[i]) continue;
        const EmuAlloc *al = emu_find(pointers[i]);
        if (!al) emu_fatal("kernel %s: pointer argument %p is neither device memory nor pinned host memory (a host "
                           "pointer? the GPU would fault on it)", k->name, pointers[i]);
    }
    if (g_launch) emu_fatal("kernel %s launched from inside kernel %s", k->name, g_launch->k->name);
    // the arguments as they are now (the caller's copy is on its stack); the kernel runs when the device gets to it
    std::shared_ptr<std::vector<char>> saved = std::make_shared<std::vector<char>>((const char *)args, (const char *)args + args_bytes);
    emu_enqueue(stream, [=]() { run_kernel(k, grid, block, smem, entry, saved->data(), (int)threads); });
}

// A block's own state while another block runs (blocks that wait on other blocks): BlockCtx, in "Blocks that
// wait" below; ctx_swap exchanges the running block's globals with a context's.
struct BlockCtx;
static BlockCtx *ctx_get(void);
static void ctx_put(BlockCtx *c);
static void ctx_swap(BlockCtx *c);
static void ctx_set(BlockCtx *c, uint3 bid, uint32_t index);
__attribute__((noreturn)) static void blocks_deadlock(std::vector<BlockCtx *> &live, unsigned long long started,
                                                      unsigned long long nblocks);

// Blocks start in the order TRAIN_GPT_EMU_ORDER picks and run one at a time, each until it exits or waits on
// another block (a thread spins in __nanosleep and no thread of the block can run). A block that waits stays live:
// the live blocks are resumed in turn (oldest first) while any of them progresses (a barrier or warp collective
// completes, a thread exits, an atomic changes memory or reads a value its thread had not seen); when a whole turn
// progresses nowhere the next block starts, as a GPU would dispatch it, unless TRAIN_GPT_EMU_RESIDENT blocks are
// live already; with none to start that is a deadlock, an error naming the kernel and every live block's waits.
static void run_kernel(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, void (*entry)(void *), void *args, int threads) {
    Launch L = {k, grid, block, smem, entry, args, make_uint3(0, 0, 0), threads, (threads + 31) / 32, 0};
    g_launch = &L;
    emu_regs.gdim = grid;
    emu_regs.bdim = block;
    if (g_race) {
        g_launch_base = g_epoch + 1;
        g_sync.clear();
    }
    unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
    std::vector<int> border;
    if (g_order != ORDER_FORWARD && nblocks < (1ull << 31)) make_order(border, (int)nblocks);
    g_in_kernel = 1;
    std::vector<BlockCtx *> live;
    unsigned long long started = 0;
    for (;;) {
        int progressed = 0;
        for (size_t j = 0; j < live.size();) {
            BlockCtx *c = live[j];
            const unsigned long long p0 = g_progress;
            ctx_swap(c);
            const int done = run_block(0);
            ctx_swap(c);
            if (done) {
                ctx_put(c);
                live.erase(live.begin() + (long)j);
                progressed = 1;
            } else {
                progressed |= g_progress != p0;
                j++;
            }
        }
        if (progressed) continue;
        if (started == nblocks) {
            if (live.empty()) break;
            blocks_deadlock(live, started, nblocks);
        }
        if (g_resident && live.size() >= g_resident) blocks_deadlock(live, started, nblocks);
        const unsigned long long i = border.empty() ? started : (unsigned long long)border[started];
        started++;
        BlockCtx *c = ctx_get();
        ctx_set(c, make_uint3((unsigned)(i % grid.x), (unsigned)((i / grid.x) % grid.y),
                              (unsigned)(i / ((unsigned long long)grid.x * grid.y))), (uint32_t)i);
        ctx_swap(c);
        const int done = run_block(1);
        ctx_swap(c);
        if (done) ctx_put(c);
        else live.push_back(c);
    }
    g_in_kernel = 0;
    g_launch = NULL;
}

// ----------------------------------------------------------------------------------------------------------------
// Barriers.

static Thread *current(const char *what) {
    if (!g_cur) emu_fatal("%s called outside a kernel", what);
    return g_cur;
}

static int block_barrier(int pred, const char *file, int line) {
    Thread *t = current("__syncthreads");
    t->state = T_BAR;
    t->file = file;
    t->line = line;
    t->pred = pred;
    yield();
    return t->pred;  // the count of threads whose predicate was true
}

void __syncthreads(const char *file, int line) { block_barrier(0, file, line); }
int __syncthreads_count(int pred, const char *file, int line) { return block_barrier(pred != 0, file, line); }
int __syncthreads_and(int pred, const char *file, int line) {
    return block_barrier(pred != 0, file, line) == g_launch->nthreads;
}
int __syncthreads_or(int pred, const char *file, int line) { return block_barrier(pred != 0, file, line) > 0; }

// The lanes of warp w that exist in this block.
static unsigned warp_lanes(int w) {
    int n = g_launch->nthreads - 32 * w;
    return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

static void perform(Thread *t, unsigned mask);

// Warp collectives: the thread joins the group of its warp that waits at the collective (or starts one); the
// last lane of the mask to arrive performs the operation for all of them and makes them runnable.
static void warp_collective(Thread *t, int kind, unsigned mask, const char *file, int line) {
    unsigned exist = warp_lanes(t->warp), me = 1u << t->lane;
    if (!(mask & me))
        emu_fatal("%s at %s:%d with mask 0x%08x, which does not name the calling lane %d", coll_name[kind], file, line,
                  mask, t->lane);
    if (mask & ~exist)
        emu_fatal("%s at %s:%d with mask 0x%08x names lanes that do not exist (this warp has lanes 0x%08x)",
                  coll_name[kind], file, line, mask, exist);
    if (mask & g_exited[t->warp])
        emu_fatal("%s at %s:%d with mask 0x%08x names lane %d, which has exited", coll_name[kind], file, line, mask,
                  __builtin_ctz(mask & g_exited[t->warp]));
    t->kind = kind;
    t->mask = mask;
    t->file = file;
    t->line = line;
    t->state = T_WARP;
    std::vector<Group> &groups = g_groups[t->warp];
    size_t gi = 0;
    for (; gi < groups.size(); gi++) if (groups[gi].mask & me) break;
    if (gi == groups.size()) {
        groups.push_back(Group{kind, t->mode, t->width, t->size, line, mask, 0, file});
    } else {
        Group &g = groups[gi];
        int same = g.kind == kind && g.mask == mask;
        if (same && kind == C_SHFL) same = g.mode == t->mode && g.width == t->width && g.size == t->size;
        if (same && kind == C_VOTE) same = g.mode == t->mode;
        if (!same)
            emu_fatal("lanes of warp %d are at different collectives: lane %d at %s (mask 0x%08x) at %s:%d, lane %d at %s "
                      "(mask 0x%08x) at %s:%d", t->warp, t->lane, coll_name[kind], mask, file, line,
                      __builtin_ctz(g.arrived), coll_name[g.kind], g.mask, g.file, g.line);
    }
    Group &g = groups[gi];
    g.arrived |= me;
    if (g.arrived == mask) {
        perform(t, mask);
        g_progress++;
        Thread **lanes = &g_threads[32 * t->warp];
        for (int l = 0; l < 32; l++)
            if (mask & (1u << l)) {
                lanes[l]->state = T_RUN;
                g_next.push_back(32 * t->warp + l);
            }
        groups.erase(groups.begin() + gi);
    }
    yield();
}

static void cp_async_at_exit(Thread *t);  // "Asynchronous copies" below
// A thread returns from the kernel: no lane may still wait for it, and none of its copies may be in flight.
static void thread_exits(Thread *t) {
    cp_async_at_exit(t);
    t->state = T_DONE;
    g_exited[t->warp] |= 1u << t->lane;
    g_progress++;
    for (const Group &g : g_groups[t->warp])
        if (g.mask & (1u << t->lane))
            emu_fatal("lane %d has exited while lanes 0x%08x of its warp wait for it at %s (mask 0x%08x) at %s:%d", t->lane,
                      g.arrived, coll_name[g.kind], g.mask, g.file, g.line);
}

void __syncwarp(unsigned mask, const char *file, int line) {
    Thread *t = current("__syncwarp");
    warp_collective(t, C_SYNCWARP, mask, file, line);
}

void emu_shfl(int mode, unsigned mask, const void *val, void *out, int size, int arg, int width, const char *file,
              int line) {
    Thread *t = current("__shfl_sync");
    if (width < 1 || width > 32 || (width & (width - 1)))
        emu_fatal("__shfl_sync width %d is not a power of two in 1..32", width);
    memcpy(t->val, val, size);
    t->mode = mode;
    t->arg = arg;
    t->width = width;
    t->size = size;
    warp_collective(t, C_SHFL, mask, file, line);
    memcpy(out, t->res, size);
}

enum { VOTE_BALLOT, VOTE_ALL, VOTE_ANY };
static unsigned vote(int mode, unsigned mask, int pred, const char *file, int line) {
    Thread *t = current("a warp vote");
    t->mode = mode;
    t->pred = pred != 0;
    warp_collective(t, C_VOTE, mask, file, line);
    return t->pred;
}
unsigned __ballot_sync(unsigned mask, int pred, const char *file, int line) {
    return vote(VOTE_BALLOT, mask, pred, file, line);
}
int __all_sync(unsigned mask, int pred, const char *file, int line) { return vote(VOTE_ALL, mask, pred, file, line); }
int __any_sync(unsigned mask, int pred, const char *file, int line) { return vote(VOTE_ANY, mask, pred, file, line); }
unsigned __activemask(void) {
    Thread *t = current("__activemask");
    unsigned m = 0;
    for (int l = 0; l < 32; l++) {
        int i = 32 * t->warp + l;
        if (i < g_launch->nthreads && g_threads[i]->state != T_DONE) m |= 1u << l;
    }
    return m;
}
void __trap(void) { emu_fatal("__trap()"); }
// __threadfence: in the race build, a release for the thread's next atomics (everything its block did before its last
// __syncthreads, what the thread itself acquired, and what the block saw) and an acquire of what its atomics since
// the last fence read. A __threadfence_block orders nothing between blocks.
void __threadfence(void) {
    if (!g_race || !g_in_kernel || !g_cur) return;
    Thread *t = g_cur;
    if (t->observed) {
        if (!t->acquired) t->acquired = new View;
        view_join(*t->acquired, *t->observed);
    }
    if (!t->fence_snap) t->fence_snap = new View;
    View &v = *t->fence_snap;
    v = g_blk_vc;
    if (t->acquired) view_join(v, *t->acquired);
    if (g_blk_epoch > g_block_base) {
        uint32_t &own = v[g_launch->index];
        if (g_blk_epoch - 1 > own) own = g_blk_epoch - 1;
    }
}
void __threadfence_block(void) {}

// A thread spinning on another block yields: the rest of its block runs, and when no thread of the block can, the
// block waits (run_kernel resumes it later).
void __nanosleep(unsigned ns, const char *file, int line) {
    (void)ns;
    Thread *t = current("__nanosleep");
    t->state = T_SPIN;
    t->file = file;
    t->line = line;
    yield();
}

// ----------------------------------------------------------------------------------------------------------------
// Race detection on an access by `actor` (the race build only).

static inline int warp_of(uint16_t actor) { return actor / 32; }
static inline unsigned lanes_of(uint16_t actor) { return 1u << (actor % 32); }

// Does a barrier order the recorded access a before this access by b? space: 0 shared memory, 1 device memory.
static int ordered(const Rec &a, uint16_t b, int space) {
    if (a.epoch < g_launch_base) return 1;  // nothing recorded, or an earlier launch
    if (a.block != g_launch->index) {
        if (space == 0) return 1;  // shared memory: a block that ran before in this block's place
        // device memory: another block's access, ordered only by a release this block (or this thread) acquired
        auto it = g_blk_vc.find(a.block);
        if (it != g_blk_vc.end() && a.epoch <= it->second) return 1;
        if (g_cur && g_cur->acquired) {
            it = g_cur->acquired->find(a.block);
            if (it != g_cur->acquired->end() && a.epoch <= it->second) return 1;
        }
        return 0;
    }
    if (a.epoch < g_blk_epoch) return 1;  // a __syncthreads in between
    if (a.actor == b) return 1;        // program order
    if (warp_of(a.actor) != warp_of(b)) return 0;
    unsigned la = lanes_of(a.actor), lb = lanes_of(b);
    const auto &log = g_warp_log[warp_of(b)];
    for (size_t i = log.size(); i-- > 0;) {
        if (log[i].first <= a.gen) break;
        if ((log[i].second & la) == la && (log[i].second & lb) == lb) return 1;
    }
    return 0;
}

static void actor_desc(uint16_t actor, int same_block, char *buf, size_t n) {
    if (!same_block) snprintf(buf, n, "a thread of another block of this launch");
    else {
        const uint3 &d = g_launch->block;
        snprintf(buf, n, "thread (%u,%u,%u) [warp %d lane %d]", actor % d.x, (actor / d.x) % d.y, actor / (d.x * d.y),
                 actor / 32, actor % 32);
    }
}

__attribute__((noreturn)) static void report_race(const Rec &a, int a_write, uint16_t b, int b_write, uint32_t site,
                                                  int space, const char *region, size_t offset) {
    char ad[128], bd[128], w1[512], w2[512];
    const int other = space == 1 && a.block != g_launch->index;
    actor_desc(a.actor, !other, ad, sizeof(ad));
    actor_desc(b, 1, bd, sizeof(bd));
    emu_fatal("data race on %s (byte %zu): %s %s it at %s, and %s %s it at %s with no %s between",
              region, offset, ad, a_write ? "wrote" : "read", where(a.site, w1, sizeof(w1)), bd, b_write ? "writes" : "reads",
              where(site, w2, sizeof(w2)),
              other ? "kernel boundary or release/acquire pair (blocks of one launch run concurrently)"
              : warp_of(a.actor) == warp_of(b) ? "__syncwarp naming both (or __syncthreads)" : "__syncthreads");
}

static void race_check(Shadow *s, int write, uint16_t actor, uint32_t site, int space, const char *region, size_t off) {
    if (!ordered(s->w, actor, space)) report_race(s->w, 1, actor, write, site, space, region, off);
    if (write) {
        if (!ordered(s->r1, actor, space)) report_race(s->r1, 0, actor, 1, site, space, region, off);
        if (!ordered(s->r2, actor, space)) report_race(s->r2, 0, actor, 1, site, space, region, off);
        uint16_t flags = s->w.flags;
        s->w = Rec{g_blk_epoch, g_gen, site, actor, flags, g_launch->index};
        s->r1.epoch = s->r2.epoch = 0;
        return;
    }
    uint32_t fresh = space == 0 ? g_block_base : g_launch_base;
    if (s->r1.epoch == g_blk_epoch && s->r1.actor == actor && s->r1.block == g_launch->index) {
        s->r1.gen = g_gen;
        s->r1.site = site;
        return;
    }
    if (s->r1.epoch >= fresh &&
        (s->r2.epoch < fresh || warp_of(s->r1.actor) != warp_of(actor) || s->r1.block != g_launch->index))
        s->r2 = s->r1;
    s->r1 = Rec{g_blk_epoch, g_gen, site, actor, 0, g_launch->index};
}

// One access of n bytes at addr by actor (a thread).
static void race_access(uintptr_t addr, size_t n, int write, uint16_t actor, uint32_t site) {
    if (n == 0) return;
    uintptr_t dyn = (uintptr_t)g_dyn_smem;
    if (addr - dyn < SMEM_OPTIN) {
        size_t off = addr - dyn;
        if (off + n > g_launch->smem) {
            char w[512];
            emu_fatal("%s of %zu bytes at byte %zu of dynamic shared memory, beyond the launch's %zu bytes (at %s)",
                      write ? "write" : "read", n, off, g_launch->smem, where(site, w, sizeof(w)));
        }
        for (size_t g = off / 2; g <= (off + n - 1) / 2; g++)
            race_check(&g_smem_shadow[g], write, actor, site, 0, "dynamic shared memory", off);
    } else if (addr - (uintptr_t)g_arena < g_arena_size) {
        size_t off = addr - (uintptr_t)g_arena;
        for (size_t g = off / 2; g <= (off + n - 1) / 2; g++) {
            Shadow *s = &g_arena_shadow[g];
            if (!(s->w.flags & 1)) {
                char w[512];
                emu_fatal("%s of %zu bytes at %p: not allocated device memory (out of bounds, or freed) (at %s)",
                          write ? "write" : "read", n, (void *)addr, where(site, w, sizeof(w)));
            }
            race_check(s, write, actor, site, 1, "device memory", off);
        }
    } else if (addr - g_static_lo < g_static_hi - g_static_lo) {
        if (addr - (uintptr_t)&emu_regs < sizeof(emu_regs)) return;
        size_t off = addr - g_static_lo;
        for (size_t g = off / 2; g <= (off + n - 1) / 2; g++)
            race_check(&g_static_shadow[g], write, actor, site, 0, "a static __shared__ variable", off);
    }
}

// The compiler's ThreadSanitizer instrumentation calls these for every load and store of the device code (the
// build with -fsanitize=thread). We are the runtime: outside kernels, and for the fibers' stacks, they return.
extern "C" char __data_start[], _end[];
extern "C" {
void __tsan_init(void) {
    if (g_race) return;
    g_race = 1;
    g_static_lo = (uintptr_t)__data_start;
    g_static_hi = (uintptr_t)_end;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    auto map = [&](size_t bytes) {
        void *p = mmap(NULL, (bytes + page - 1) / page * page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) { fprintf(stderr, "cuda-emu: cannot map %zu bytes of shadow memory\n", bytes); exit(1); }
        return p;
    };
    g_static_shadow = (Shadow *)map((g_static_hi - g_static_lo) / 2 * sizeof(Shadow) + sizeof(Shadow));
    const char *gb = getenv("TRAIN_GPT_EMU_ARENA_GB");
    g_arena_size = (size_t)(gb ? atof(gb) : 2.0) * (1ull << 30);
    g_arena = (char *)map(g_arena_size);
    g_arena_shadow = (Shadow *)map(g_arena_size / 2 * sizeof(Shadow));
}
#define EMU_HOOK(N)                                                                                          \
    void __tsan_read##N(void *a) {                                                                           \
        if (g_in_kernel && g_cur) race_access((uintptr_t)a, N, 0, g_cur->linear, site_of(__builtin_return_address(0))); \
    }                                                                                                        \
    void __tsan_write##N(void *a) {                                                                          \
        if (g_in_kernel && g_cur) race_access((uintptr_t)a, N, 1, g_cur->linear, site_of(__builtin_return_address(0))); \
    }                                                                                                        \
    void __tsan_unaligned_read##N(void *a) {                                                                 \
        if (g_in_kernel && g_cur) race_access((uintptr_t)a, N, 0, g_cur->linear, site_of(__builtin_return_address(0))); \
    }                                                                                                        \
    void __tsan_unaligned_write##N(void *a) {                                                                \
        if (g_in_kernel && g_cur) race_access((uintptr_t)a, N, 1, g_cur->linear, site_of(__builtin_return_address(0))); \
    }
EMU_HOOK(1)
EMU_HOOK(2)
EMU_HOOK(4)
EMU_HOOK(8)
EMU_HOOK(16)
#undef EMU_HOOK
void __tsan_read_range(void *a, unsigned long n) {
    if (g_in_kernel && g_cur) race_access((uintptr_t)a, n, 0, g_cur->linear, site_of(__builtin_return_address(0)));
}
void __tsan_write_range(void *a, unsigned long n) {
    if (g_in_kernel && g_cur) race_access((uintptr_t)a, n, 1, g_cur->linear, site_of(__builtin_return_address(0)));
}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}
}

// ----------------------------------------------------------------------------------------------------------------
// Performing a warp collective (on the last lane to arrive, for all lanes of the mask).

static void perform(Thread *t, unsigned mask) {
    Thread **lanes = &g_threads[32 * t->warp];
    switch (t->kind) {
    case C_SYNCWARP:
        race_warp_sync(t->warp, mask);
        break;
    case C_SHFL:
        for (int l = 0; l < 32; l++) {
            if (!(mask & (1u << l))) continue;
            Thread *u = lanes[l];
            // PTX shfl.sync: the source lane j, valid within [base, base + width) (bfly: any j <= the segment's
            // last lane, so a lane may read an earlier segment); an invalid j reads the lane's own value
            int w = u->width, base = l & ~(w - 1), b = u->arg & 31, src = l;
            switch (u->mode) {
            case EMU_SHFL_IDX: src = base + (b & (w - 1)); break;
            case EMU_SHFL_UP: src = l - b >= base ? l - b : l; break;
            case EMU_SHFL_DOWN: src = l + b <= base + w - 1 ? l + b : l; break;
            case EMU_SHFL_XOR: src = (l ^ b) <= base + w - 1 ? l ^ b : l; break;
            }
            if (!(mask & (1u << src)))
                emu_fatal("__shfl_sync at %s:%d: lane %d reads lane %d, which the mask 0x%08x does not name (undefined on "
                          "a GPU)", u->file, u->line, l, src, mask);
            memcpy(u->res, lanes[src]->val, u->size);
        }
        break;
    case C_VOTE: {
        unsigned ballot = 0;
        for (int l = 0; l < 32; l++) if ((mask & (1u << l)) && lanes[l]->pred) ballot |= 1u << l;
        for (int l = 0; l < 32; l++) {
            if (!(mask & (1u << l))) continue;
            int m = lanes[l]->mode;
            lanes[l]->pred = m == VOTE_BALLOT ? (int)ballot : m == VOTE_ALL ? ballot == mask : ballot != 0;
        }
        break;
    }
    }
}

// ----------------------------------------------------------------------------------------------------------------
// Atomics (fibers do not preempt: a read-modify-write here is atomic).

// Each atomic notes what a block waiting on memory needs: progress when it changes memory or reads a value its thread
// had not read there before (a spin that sees something new), and in the race build the release and acquire of
// __threadfence above: the atomic reads what releases on its address published, and publishes its thread's release.
template <typename T> static T atomic_rmw(T *p, T n_of(T o, T a, T b), T a, T b) {
    const T o = *p, n = n_of(o, a, b);
    if (memcmp(&o, &n, sizeof(T)) != 0) g_progress++;
    *p = n;
    Thread *t = g_in_kernel ? g_cur : NULL;
    if (t) {
        unsigned long long bits = 0;
        memcpy(&bits, &o, sizeof(T));
        if (t->atomic_at != (const void *)p || t->atomic_seen != bits) g_progress++;
        t->atomic_at = p;
        t->atomic_seen = bits;
        if (g_race) {
            auto it = g_sync.find((uintptr_t)p);
            if (it != g_sync.end()) {
                if (!t->observed) t->observed = new View;
                view_join(*t->observed, it->second);
            }
            if (t->fence_snap) view_join(g_sync[(uintptr_t)p], *t->fence_snap);
        }
    }
    return o;
}
template <typename T> static T op_add(T o, T a, T) { return o + a; }
template <typename T> static T op_max(T o, T a, T) { return a > o ? a : o; }
template <typename T> static T op_min(T o, T a, T) { return a < o ? a : o; }
template <typename T> static T op_exch(T, T a, T) { return a; }
template <typename T> static T op_cas(T o, T c, T v) { return o == c ? v : o; }
float atomicAdd(float *p, float v) { return atomic_rmw<float>(p, op_add<float>, v, 0); }
double atomicAdd(double *p, double v) { return atomic_rmw<double>(p, op_add<double>, v, 0); }
int atomicAdd(int *p, int v) { return atomic_rmw<int>(p, op_add<int>, v, 0); }
unsigned atomicAdd(unsigned *p, unsigned v) { return atomic_rmw<unsigned>(p, op_add<unsigned>, v, 0); }
unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return atomic_rmw<unsigned long long>(p, op_add<unsigned long long>, v, 0);
}
int atomicMax(int *p, int v) { return atomic_rmw<int>(p, op_max<int>, v, 0); }
int atomicMin(int *p, int v) { return atomic_rmw<int>(p, op_min<int>, v, 0); }
int atomicExch(int *p, int v) { return atomic_rmw<int>(p, op_exch<int>, v, 0); }
int atomicCAS(int *p, int c, int v) { return atomic_rmw<int>(p, op_cas<int>, c, v); }
unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) { return atomic_rmw<unsigned>(p, op_cas<unsigned>, c, v); }
unsigned long long atomicCAS(unsigned long long *p, unsigned long long c, unsigned long long v) {
    return atomic_rmw<unsigned long long>(p, op_cas<unsigned long long>, c, v);
}

// ----------------------------------------------------------------------------------------------------------------
// Per-step counters (TRAIN_GPT_EMU_COUNTS=1), between trainer.h's STEP_BEGIN and STEP_END, on stderr:
//   malloc, free   cudaMalloc(Async) and cudaMallocHost/cudaHostAlloc; cudaFree(Async) and cudaFreeHost
//   sync           calls that make the host wait for the device: cudaDeviceSynchronize, cudaStreamSynchronize,
//                  cudaEventSynchronize, cudaFree, cudaMemcpy between host and device, and cudaMemcpyAsync whose
//                  host side is pageable
//   heuristic      cublasLtMatmulAlgoGetHeuristic calls
//   desc           cuBLASLt descriptors created (matmul, matrix layout, preference)
//   launches       kernel launches
//   matmuls        cublasLtMatmul calls
//   copies         cudaMemcpy(Async) calls that involve the device (host-to-host ones are the host's)
//   memsets        cudaMemset(Async) calls
//   collectives    NCCL collectives and point-to-point transfers
//   graphs         cudaGraphLaunch calls (a replayed graph's own work is not counted again: recording it during
//                  capture counts nothing, and a launch counts one operation)
//   nodes          the operations those graph launches replayed (not in ops)
//   ops            launches, matmuls, copies, memsets, collectives and graphs: the operations the host hands the GPU
//                  one by one, each a launch's overhead
//                  and, on one stream, a gap the GPU may idle in
//   after_sync     the operations issued after the host last waited for the device in the step (all of them if
//                  it never did): work the host held back until it had seen a result, the device idle meanwhile
//   pageable       host-device copies whose host side is not pinned (cudaMallocHost / cudaHostRegister)
//   h2d_bytes, d2h_bytes   bytes copied each way

static EmuCounts g_step_start;
static unsigned long long ops_issued(const EmuCounts &c) {
    return c.launches + c.matmuls + c.copies + c.memsets + c.collectives + c.graphs;
}
void emu_step_begin(int step) {
    (void)step;
    g_step_start = emu_counts;
    g_ops_at_wait = ops_issued(emu_counts);
}
void emu_step_end(int step) {
    configure();
    if (!g_counts_on) return;
    EmuCounts d = emu_counts, s = g_step_start;
    unsigned long long mm = d.matmuls - s.matmuls, cp = d.copies - s.copies, ms = d.memsets - s.memsets,
                       co = d.collectives - s.collectives, gr = d.graphs - s.graphs, la = d.launches - s.launches;
    fprintf(stderr, "emu counts step %d: malloc %llu free %llu sync %llu heuristic %llu desc %llu launches %llu matmuls "
            "%llu copies %llu memsets %llu collectives %llu graphs %llu nodes %llu ops %llu after_sync %llu pageable %llu h2d_bytes "
            "%llu d2h_bytes %llu\n", step, d.malloc - s.malloc, d.free - s.free, d.sync - s.sync, d.heuristic - s.heuristic,
            d.desc - s.desc, la, mm, cp, ms, co, gr, d.graph_nodes - s.graph_nodes, la + mm + cp + ms + co + gr, ops_issued(d) - g_ops_at_wait,
            d.pageable - s.pageable, d.h2d_bytes - s.h2d_bytes, d.d2h_bytes - s.d2h_bytes);
}

// ----------------------------------------------------------------------------------------------------------------
// The CUDA runtime API, as far as the trainer and the checks use it. Device work goes through the queue above;
// the calls that make the host wait run the queue first. Streams share the one queue; events pass when the queue
// reaches their record.

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

cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    default: return "cudaError";
    }
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return "unknown error (cuda-emu)";
    }
}

cudaError_t cudaGetDeviceCount(int *n) {
    configure();
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
cudaError_t cudaSetDeviceFlags(unsigned) { return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }

// An sm_90 device with an H100's limits; the name says what it is, so nothing mistakes it for the real card.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d != 0) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "cuda-emu (the CUDA build on the CPU, sm_90 limits)");
    p->totalGlobalMem = DEVICE_BYTES;
    p->sharedMemPerBlock = SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = SMEM_OPTIN;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 << 20;
    p->memoryBusWidth = 5120;
    p->unifiedAddressing = 1;
    p->managedMemory = 1;
    p->concurrentKernels = 1;
    p->canMapHostMemory = 1;
    p->asyncEngineCount = 2;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d) {
    if (d != 0) return set_error(cudaErrorInvalidDevice);
    switch (a) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)SMEM_OPTIN; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)SMEM_DEFAULT; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 233472; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxBlockDimX: *v = 1024; break;
    case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrMaxGridDimX: *v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: *v = 65535; break;
    case cudaDevAttrMaxGridDimZ: *v = 65535; break;
    case cudaDevAttrL2CacheSize: *v = 50 << 20; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; break;
    case cudaDevAttrUnifiedAddressing: *v = 1; break;
    default:
        fprintf(stderr, "cuda-emu: cudaDeviceGetAttribute(%d): not emulated\n", (int)a);
        return set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > SMEM_OPTIN) return set_error(cudaErrorInvalidValue);
        max_dyn_smem()[func] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return set_error(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize(void) {
    if (g_capture) return capture_refuse("cudaDeviceSynchronize", cudaErrorStreamCaptureUnsupported);
    emu_counts.sync++;
    emu_device_flush();
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    configure();
    if (g_capture) return capture_refuse("cudaMalloc", cudaErrorStreamCaptureUnsupported);
    emu_counts.malloc++;
    *p = NULL;
    if (g_device_bytes + bytes > DEVICE_BYTES) return set_error(cudaErrorMemoryAllocation);
    void *m = device_alloc(bytes);
    if (!m) return set_error(cudaErrorMemoryAllocation);
    memset(m, 0xff, bytes);  // NaN in every float type: unwritten memory shows up in the results
    g_allocs[(uintptr_t)m] = EmuAlloc{(uintptr_t)m, bytes, EMU_MEM_DEVICE};
    g_device_bytes += bytes;
    if (g_device_bytes > g_device_peak) g_device_peak = g_device_bytes;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (g_capture) return capture_refuse("cudaFree", cudaErrorStreamCaptureUnsupported);
    emu_counts.free++;
    emu_counts.sync++;  // cudaFree waits for the device
    emu_device_flush();
    if (!p) return cudaSuccess;
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != EMU_MEM_DEVICE) {
        fprintf(stderr, "cuda-emu: cudaFree(%p): not a pointer cudaMalloc returned\n", p);
        return set_error(cudaErrorInvalidValue);
    }
    g_device_bytes -= it->second.size;
    device_release(p, it->second.size);
    g_allocs.erase(it);
    return cudaSuccess;
}

// Stream-ordered allocation: ordered trivially, everything being synchronous.
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    emu_check_stream("cudaMallocAsync", s);
    return cudaMalloc(p, bytes);
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    emu_check_stream("cudaFreeAsync", s);
    cudaError_t e = cudaFree(p);
    emu_counts.sync--;  // unlike cudaFree, the host does not wait
    return e;
}

// What a kernel may use: the device's limits (the emulator has no registers to count).
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *func) {
    memset(a, 0, sizeof(*a));
    auto it = max_dyn_smem().find(func);
    a->maxDynamicSharedSizeBytes = it == max_dyn_smem().end() ? (int)SMEM_DEFAULT : it->second;
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = a->binaryVersion = 90;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem) {
    (void)func;
    if (block <= 0 || block > 1024) return set_error(cudaErrorInvalidValue);
    int by_threads = 2048 / block, by_smem = smem ? (int)(233472 / smem) : 32;
    *n = by_threads < by_smem ? by_threads : by_smem;
    if (*n > 32) *n = 32;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    if (g_capture) return capture_refuse("cudaHostAlloc (cudaMallocHost)", cudaErrorStreamCaptureUnsupported);
    emu_counts.malloc++;
    *p = NULL;
    void *m = NULL;
    if (posix_memalign(&m, 4096, bytes > 0 ? bytes : 1) != 0) return set_error(cudaErrorMemoryAllocation);
    g_allocs[(uintptr_t)m] = EmuAlloc{(uintptr_t)m, bytes, EMU_MEM_PINNED};
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void *p) {
    if (g_capture) return capture_refuse("cudaFreeHost", cudaErrorStreamCaptureUnsupported);
    emu_counts.free++;
    emu_device_flush();  // a queued copy may still use it
    if (!p) return cudaSuccess;
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != EMU_MEM_PINNED) {
        fprintf(stderr, "cuda-emu: cudaFreeHost(%p): not a pointer cudaMallocHost returned\n", p);
        return set_error(cudaErrorInvalidValue);
    }
    g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags) {
    (void)flags;
    g_allocs[(uintptr_t)p] = EmuAlloc{(uintptr_t)p, bytes, EMU_MEM_REGISTERED};
    return cudaSuccess;
}
cudaError_t cudaHostUnregister(void *p) {
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != EMU_MEM_REGISTERED) return set_error(cudaErrorInvalidValue);
    g_allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    *total_b = DEVICE_BYTES;
    *free_b = DEVICE_BYTES - g_device_bytes;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof(*a));
    const EmuAlloc *al = emu_find(p);
    if (!al || (uintptr_t)p == al->base + al->size) {
        a->type = cudaMemoryTypeUnregistered;  // CUDA 11+: plain host memory is not an error
        a->device = -2;
        a->hostPointer = (void *)p;
        return cudaSuccess;
    }
    a->device = 0;
    if (al->kind == EMU_MEM_DEVICE) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeHost;
        a->devicePointer = (void *)p;
        a->hostPointer = (void *)p;
    }
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
        g_capture->capture->nodes.push_back(EmuNode{run, e});
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
    emu_enqueue(s, [=]() { fn(data); });
    return cudaSuccess;
}

static cudaError_t capture_refuse(const char *who, cudaError_t e) {
    fprintf(stderr, "cuda-emu: %s while stream %p captures a graph: CUDA refuses it (%s) and invalidates the capture\n",
            who, (void *)g_capture, cudaGetErrorName(e));
    g_capture->capture_invalid = 1;
    return set_error(e);
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
    s->capture = new CUgraph_st{GRAPH_MAGIC, {}, {}};
    s->capture_invalid = 0;
    g_capture = s;
    g_capture_counts = emu_counts;
    return cudaSuccess;
}

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
    *exec = new CUgraphExec_st{EXEC_MAGIC, g->nodes, g->counted};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    emu_check_stream("cudaGraphLaunch", s);
    if (!exec || exec->magic != EXEC_MAGIC) emu_fatal("cudaGraphLaunch: %p is not a live executable graph", (void *)exec);
    if (g_capture) return capture_refuse("cudaGraphLaunch (the emulator does not nest graphs)", cudaErrorStreamCaptureUnsupported);
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
    exec->nodes.clear();  // kept, so that a later use is caught
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    if (!g || g->magic != GRAPH_MAGIC) emu_fatal("cudaGraphDestroy: %p is not a live graph", (void *)g);
    g->magic = 0;
    g->nodes.clear();
    return cudaSuccess;
}

}  // extern "C"

// ----------------------------------------------------------------------------------------------------------------
// Asynchronous copies (cp.async, see emu.h): each thread's queue of copies issued and not yet landed. A copy's
// group is the number of commits its thread had made when it was issued; a wait lands the copies of every
// committed group but the newest `pending`. The source is read at issue (a kernel's inputs do not change under it),
// the destination is poisoned then and written at the wait.

struct CpAsyncCopy {
    unsigned char *dst;
    unsigned char data[16];
    unsigned group;
};
static std::vector<std::vector<CpAsyncCopy>> g_cp_queue;  // per thread of the block (Thread::linear)
static std::vector<unsigned> g_cp_commits;                // per thread: commits so far in this block

static void cp_async_race(const void *p, size_t n, int write, const Thread *t, uint32_t site) {
    if (g_race && n) race_access((uintptr_t)p, n, write, (uint16_t)t->linear, site);
}

void emu_cp_async(void *dst_smem, const void *src, int size, int zfill, const char *file, int line) {
    Thread *t = current("cp.async");
    if (size != 16) emu_fatal("cp.async at %s:%d: a %d-byte copy; the emulator models 16-byte copies (cp.async.cg) only", file, line, size);
    if (zfill < 0 || zfill > size) emu_fatal("cp.async at %s:%d: zero fill of %d bytes in a %d-byte copy", file, line, zfill, size);
    const int src_bytes = size - zfill;
    const uint32_t site = site_of(__builtin_return_address(0));
    const uintptr_t d = (uintptr_t)dst_smem, dyn = (uintptr_t)g_dyn_smem;
    const int in_dyn = d - dyn < g_launch->smem && d + 16 <= dyn + g_launch->smem;
    const int in_static = d >= (uintptr_t)__data_start && d + 16 <= (uintptr_t)_end;
    if (!in_dyn && !in_static)
        emu_fatal("cp.async at %s:%d: destination %p is not 16 bytes of this block's shared memory", file, line, dst_smem);
    if (d % 16 || (src_bytes && (uintptr_t)src % 16))
        emu_fatal("cp.async at %s:%d: %p <- %p is not 16-byte aligned (misaligned address on a GPU)", file, line, dst_smem, src);
    if (src_bytes) emu_require_device("cp.async", "source", src, (size_t)src_bytes);
    if ((int)g_cp_queue.size() <= t->linear) {
        g_cp_queue.resize(t->linear + 1);
        g_cp_commits.resize(t->linear + 1, 0);
    }
    CpAsyncCopy c;
    c.dst = (unsigned char *)dst_smem;
    c.group = g_cp_commits[t->linear];
    memset(c.data, 0, sizeof(c.data));  // the bytes past src_bytes are zero-filled
    cp_async_race(src, (size_t)src_bytes, 0, t, site);
    if (src_bytes) memcpy(c.data, src, (size_t)src_bytes);
    cp_async_race(dst_smem, 16, 1, t, site);
    memset(dst_smem, 0xff, 16);  // in flight: undefined until the wait, NaN here
    g_cp_queue[t->linear].push_back(c);
}

void emu_cp_async_commit(const char *file, int line) {
    (void)file, (void)line;
    Thread *t = current("cp.async.commit_group");
    if ((int)g_cp_commits.size() <= t->linear) {
        g_cp_queue.resize(t->linear + 1);
        g_cp_commits.resize(t->linear + 1, 0);
    }
    g_cp_commits[t->linear]++;
}

void emu_cp_async_wait(int pending, const char *file, int line) {
    Thread *t = current("cp.async.wait_group");
    if (pending < 0) emu_fatal("cp.async.wait_group %d at %s:%d", pending, file, line);
    if ((int)g_cp_queue.size() <= t->linear) return;
    const uint32_t site = site_of(__builtin_return_address(0));
    std::vector<CpAsyncCopy> &q = g_cp_queue[t->linear];
    const unsigned commits = g_cp_commits[t->linear];
    size_t kept = 0;
    for (size_t i = 0; i < q.size(); i++) {
        if (q[i].group + (unsigned)pending < commits) {  // committed, and older than the newest `pending` groups
            cp_async_race(q[i].dst, 16, 1, t, site);
            memcpy(q[i].dst, q[i].data, 16);
        } else q[kept++] = q[i];
    }
    q.resize(kept);
}

static void cp_async_at_exit(Thread *t) {
    if ((int)g_cp_queue.size() <= t->linear) return;
    std::vector<CpAsyncCopy> &q = g_cp_queue[t->linear];
    const unsigned commits = g_cp_commits[t->linear];
    g_cp_commits[t->linear] = 0;
    if (q.empty()) return;
    const int uncommitted = q.back().group == commits;
    const size_t n = q.size();
    q.clear();
    emu_fatal("the thread exits with %zu cp.async cop%s in flight (%s): a cp.async.wait_group must land them before "
              "the kernel ends", n, n == 1 ? "y" : "ies", uncommitted ? "some never committed" : "committed, never waited for");
}

// ----------------------------------------------------------------------------------------------------------------
// Blocks that wait: a live block's state while others run. ctx_swap exchanges it with the globals of "the block
// that runs" (its fibers, warp collectives, shared memory and its shadow, barrier intervals, cp.async queues, what it
// acquired), so the rest of the emulator sees one block at a time as before. Contexts are kept for reuse.

struct BlockCtx {
    std::vector<Thread *> threads;
    std::vector<Group> groups[32];
    unsigned exited[32];
    std::vector<int> next;
    unsigned char *smem;
    Shadow *smem_shadow;
    uint32_t block_base, blk_epoch;
    std::vector<std::vector<std::pair<uint32_t, unsigned>>> warp_log;
    std::vector<std::vector<CpAsyncCopy>> cp_queue;
    std::vector<unsigned> cp_commits;
    View vc;
    uint3 bid;
    uint32_t index;
};
static std::vector<BlockCtx *> g_ctx_pool;

static BlockCtx *ctx_get(void) {
    if (!g_ctx_pool.empty()) {
        BlockCtx *c = g_ctx_pool.back();
        g_ctx_pool.pop_back();
        return c;
    }
    BlockCtx *c = new BlockCtx();
    memset(c->exited, 0, sizeof(c->exited));
    void *p = NULL;
    if (posix_memalign(&p, 1024, SMEM_OPTIN) != 0) emu_fatal("out of memory");
    c->smem = (unsigned char *)p;
    c->smem_shadow = NULL;
    if (g_race) {
        size_t bytes = SMEM_OPTIN / 2 * sizeof(Shadow);
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) emu_fatal("cannot map %zu bytes of shadow memory", bytes);
        c->smem_shadow = (Shadow *)m;
    }
    c->block_base = c->blk_epoch = 1;
    return c;
}
static void ctx_put(BlockCtx *c) { g_ctx_pool.push_back(c); }
static void ctx_set(BlockCtx *c, uint3 bid, uint32_t index) {
    c->bid = bid;
    c->index = index;
}
static void ctx_swap(BlockCtx *c) {
    std::swap(g_threads, c->threads);
    for (int w = 0; w < 32; w++) {
        std::swap(g_groups[w], c->groups[w]);
        std::swap(g_exited[w], c->exited[w]);
    }
    std::swap(g_next, c->next);
    std::swap(g_dyn_smem, c->smem);
    std::swap(g_smem_shadow, c->smem_shadow);
    std::swap(g_block_base, c->block_base);
    std::swap(g_blk_epoch, c->blk_epoch);
    std::swap(g_warp_log, c->warp_log);
    std::swap(g_cp_queue, c->cp_queue);
    std::swap(g_cp_commits, c->cp_commits);
    std::swap(g_blk_vc, c->vc);
    g_launch->bid = c->bid;
    g_launch->index = c->index;
    emu_regs.bid = c->bid;
    emu_regs.dynamic_smem = g_launch->smem ? g_dyn_smem : NULL;
}

static void blocks_deadlock(std::vector<BlockCtx *> &live, unsigned long long started, unsigned long long nblocks) {
    static char msg[16384];
    size_t len = 0;
    for (size_t j = 0; j < live.size() && len < sizeof(msg) - 4400; j++) {
        char desc[4096];
        ctx_swap(live[j]);
        describe_waits(desc, sizeof(desc));
        ctx_swap(live[j]);
        len += snprintf(msg + len, sizeof(msg) - len, "%sblock (%u,%u,%u):%s", j ? "; " : "", live[j]->bid.x,
                        live[j]->bid.y, live[j]->bid.z, desc);
    }
    g_cur = NULL;
    char why[200];
    if (started == nblocks) snprintf(why, sizeof(why), "all %llu blocks of the grid have started", nblocks);
    else snprintf(why, sizeof(why), "%llu of %llu blocks have started and TRAIN_GPT_EMU_RESIDENT=%llu are live", started,
                  nblocks, g_resident);
    emu_fatal("deadlock between blocks: %zu live block%s wait%s on each other or on blocks that cannot start (%s), and "
              "none can go on (a GPU would hang): %s", live.size(), live.size() == 1 ? "" : "s",
              live.size() == 1 ? "s" : "", why, msg);
}
