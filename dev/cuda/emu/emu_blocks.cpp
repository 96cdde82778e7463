// dev/cuda/emu/emu_blocks.cpp: a launch's blocks: the order they start in (TRAIN_GPT_EMU_ORDER), blocks that wait
// on other blocks (a thread spins in __nanosleep) kept live while the others run, at most TRAIN_GPT_EMU_RESIDENT of
// them, and the deadlock between blocks that no block can end; and the asynchronous copies (cp.async), whose
// per-thread queues a waiting block's context carries. The threads of the block that runs are emu_threads.cpp's
// (see emu.h for the model).
// Compiled without instrumentation: only the device code's own accesses reach the race detector.
#include "emu.h"
#include "emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <utility>
#include <vector>

// ----------------------------------------------------------------------------------------------------------------
// Launching a kernel: blocks one after another, each block's threads on fibers.

// The order in which n threads (or blocks) are visited.
static void make_order(std::vector<int> &v, int n) {
    v.resize(n);
    for (int i = 0; i < n; i++) v[i] = g_order == ORDER_REVERSE ? n - 1 - i : i;
    if (g_order == ORDER_RANDOM)
        for (int i = n - 1; i > 0; i--) std::swap(v[i], v[(int)(next_random() % (uint64_t)(i + 1))]);
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
void run_kernel(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, void (*entry)(void *), void *args, int threads) {
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

void cp_async_at_exit(Thread *t) {
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
