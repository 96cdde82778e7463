// dev/cuda/emu/emu_threads.cpp: the threads of the block that runs, on fibers: the fiber switch, the passes that
// run them up to their next barrier in the order TRAIN_GPT_EMU_ORDER picks, __syncthreads, the warp collectives
// (__syncwarp, shuffles, votes) with the checks a GPU would fail on, atomics, __threadfence and __nanosleep. Which
// block runs, and when a block that waits on another runs again, is emu_blocks.cpp's (see emu.h for the model).
// Compiled without instrumentation: only the device code's own accesses reach the race detector.
#include "emu.h"
#include "emu_internal.h"

#include <algorithm>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// ----------------------------------------------------------------------------------------------------------------
// The launch in progress, and the threads of the block that runs.

static const char *coll_name[] = {"__syncwarp", "__shfl_sync", "a warp vote"};

Launch *g_launch = NULL;
std::vector<Thread *> g_threads;  // fiber i runs thread i of the block
Thread *g_cur = NULL;             // the thread whose fiber runs, NULL on the scheduler's stack
static void *g_sched_sp = NULL;
unsigned char *g_dyn_smem = NULL;  // the block's dynamic shared memory (the device maximum, reused)
unsigned long long g_progress = 0;  // counts what a waiting block can be waiting for (see run_kernel)
static std::vector<Thread *> g_all_fibers;  // every fiber made (the stack-overflow handler looks at all)
int g_in_kernel = 0;

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
    // one more page above the stack for the fiber's colour (below), so that it still has g_stack_bytes
    char *m = (char *)mmap(NULL, g_stack_bytes + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
    if (m == MAP_FAILED) emu_fatal("cannot map a %zu-byte fiber stack", g_stack_bytes);
    mprotect(m, page, PROT_NONE);
    t->stack_lo = m + page;
    t->stack_hi = m + 2 * page + g_stack_bytes;
    // The first switch into the fiber "returns" into fiber_main with the stack aligned as after a call
    // (rsp + 8 a multiple of 16), so the compiler's aligned spills of vector registers land aligned. Each fiber's top
    // sits a different number of cache lines below its page's end (its colour): with every top at the same offset in
    // its page, the lanes' frames competed for the same few sets of the L1 cache at each switch (4% of an attention
    // check's time, issue 52)
    uint64_t *top = (uint64_t *)(((uintptr_t)t->stack_hi & ~(uintptr_t)63) - (g_all_fibers.size() % 61) * 64);
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
static std::vector<int> g_pass;
std::vector<int> g_next;
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
// Running a block: its threads pass after pass, until every thread has exited or the block waits on another.

// Warp collectives in progress: per warp, the groups of lanes that have arrived at one (a group completes when
// every lane of its mask has arrived), and the lanes that have exited.
std::vector<Group> g_groups[32];
unsigned g_exited[32];

void describe_waits(char *buf, size_t n) {
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
int run_block(int start) {
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

// ----------------------------------------------------------------------------------------------------------------
// Barriers.

Thread *current(const char *what) {
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

// memcpy of a shuffled value (1 to 16 bytes) at a size the compiler sees: a shuffle is mostly the emulator's own
// work, and a call to the C library's memcpy per lane was a tenth of an attention check's time
static inline void copy_small(void *dst, const void *src, int size) {
    switch (size) {
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 2: memcpy(dst, src, 2); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, (size_t)size);
    }
}

void emu_shfl(int mode, unsigned mask, const void *val, void *out, int size, int arg, int width, const char *file,
              int line) {
    Thread *t = current("__shfl_sync");
    if (width < 1 || width > 32 || (width & (width - 1)))
        emu_fatal("__shfl_sync width %d is not a power of two in 1..32", width);
    copy_small(t->val, val, size);
    t->mode = mode;
    t->arg = arg;
    t->width = width;
    t->size = size;
    warp_collective(t, C_SHFL, mask, file, line);
    copy_small(out, t->res, size);
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
            memcpy(u->res, lanes[src]->val, sizeof(u->res));  // whole buffers: a fixed size copies inline (emu_shfl reads size)
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

