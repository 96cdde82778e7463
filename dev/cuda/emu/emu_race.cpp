// dev/cuda/emu/emu_race.cpp: the race detector (the build with -fsanitize=thread, see emu.h): its shadow memory
// for shared memory, static __shared__ variables and device memory, the checks on each access that stop at the
// first pair of accesses no barrier orders, the report that names both places in the source, and the hooks the
// compiler's ThreadSanitizer instrumentation calls (no ThreadSanitizer runtime is linked).
// Compiled without instrumentation: only the device code's own accesses reach the race detector.
#include "emu.h"
#include "emu_internal.h"

#include <elf.h>
#include <map>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

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
uint32_t site_of(const void *pc) { return (uint32_t)((uintptr_t)pc - (uintptr_t)__executable_start); }
// "file:line (function)" for a code address (a return address: the call is just before it); without debug
// information (the plain build) "function (code offset ...)", as far as the symbols go
const char *emu_where(uint32_t site, char *buf, size_t n) {
    uintptr_t a = (uintptr_t)site - 1 + (exe_is_pie() ? 0 : (uintptr_t)__executable_start);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "addr2line -C -f -s -e /proc/%d/exe 0x%lx 2>/dev/null", (int)getpid(), (unsigned long)a);
    snprintf(buf, n, "code offset 0x%x", site);
    FILE *p = popen(cmd, "r");
    if (!p) return buf;
    char fn[512] = "", loc[512] = "";
    if (fgets(fn, sizeof(fn), p) && fgets(loc, sizeof(loc), p) && loc[0] != '?' && !strstr(loc, ":?")) {
        fn[strcspn(fn, "\n")] = 0;
        loc[strcspn(loc, " \n")] = 0;  // without " (discriminator N)"
        snprintf(buf, n, "%s (%s)", loc, fn);
    } else if (fn[0] && fn[0] != '?') {
        fn[strcspn(fn, "\n")] = 0;
        snprintf(buf, n, "%s (code offset 0x%x)", fn, site);
    }
    pclose(p);
    return buf;
}

// ----------------------------------------------------------------------------------------------------------------
// The race detector's state (used only when the device code is instrumented: g_race). Every shared-memory and
// device-memory access of a kernel is recorded per 2-byte granule: the last write and the last two reads, each as
// (barrier interval, warp-sync generation, code site, actor), the actor being a thread. Two accesses to one granule, at least one a write, by different actors, conflict unless
//   - a __syncthreads of the block lies between them (an older barrier interval), or
//   - both are of one warp and a __syncwarp naming both happened between them (a newer warp-sync generation);
//     a shuffle orders no memory (CUDA promises memory ordering for __syncwarp only), or
//   - (device memory) they are in different launches; accesses of different blocks of one launch always conflict.

// g_epoch numbers barrier intervals across all blocks; g_blk_epoch is the running block's current one
uint32_t g_epoch = 1, g_block_base = 1, g_launch_base = 1, g_blk_epoch = 1;
static uint32_t g_gen = 1;
// Release and acquire between blocks (a __threadfence then an atomic on one side, an atomic then a __threadfence on
// the other): views map a block index to the newest barrier interval of that block whose accesses are ordered
// before. g_sync: per atomic's address, what releases on it published; g_blk_vc: what the running block's threads
// all see (a thread's acquired view joins it at the block's next __syncthreads).
std::map<uintptr_t, View> g_sync;
View g_blk_vc;
void view_join(View &into, const View &from) {
    for (const auto &e : from) {
        uint32_t &v = into[e.first];
        if (e.second > v) v = e.second;
    }
}
std::vector<std::vector<std::pair<uint32_t, unsigned>>> g_warp_log;  // per warp: (generation, mask) since
                                                                      // the last __syncthreads
Shadow *g_smem_shadow = NULL, *g_arena_shadow = NULL;
static Shadow *g_static_shadow = NULL;
static uintptr_t g_static_lo = 0, g_static_hi = 0;  // the executable's data and bss: static __shared__ variables
char *g_arena = NULL;                                // device memory, when racing (shadowed)
size_t g_arena_size = 0, g_arena_used = 0;

void race_new_block(void) {
    g_block_base = g_blk_epoch = ++g_epoch;
    if ((int)g_warp_log.size() < g_launch->nwarps) g_warp_log.resize(g_launch->nwarps);
    for (auto &l : g_warp_log) l.clear();
}
void race_barrier(void) {
    g_blk_epoch = ++g_epoch;
    for (auto &l : g_warp_log) l.clear();
    for (int i = 0; i < g_launch->nthreads; i++)  // what a thread acquired, every thread sees past the barrier
        if (g_threads[i]->acquired) view_join(g_blk_vc, *g_threads[i]->acquired);
}
void race_warp_sync(int warp, unsigned mask) {
    if (!g_race) return;
    if ((int)g_warp_log.size() <= warp) g_warp_log.resize(warp + 1);
    g_warp_log[warp].push_back(std::make_pair(++g_gen, mask));
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
              region, offset, ad, a_write ? "wrote" : "read", emu_where(a.site, w1, sizeof(w1)), bd, b_write ? "writes" : "reads",
              emu_where(site, w2, sizeof(w2)),
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
void race_access(uintptr_t addr, size_t n, int write, uint16_t actor, uint32_t site) {
    if (n == 0) return;
    uintptr_t dyn = (uintptr_t)g_dyn_smem;
    if (addr - dyn < SMEM_OPTIN) {
        size_t off = addr - dyn;
        if (off + n > g_launch->smem) {
            char w[512];
            emu_fatal("%s of %zu bytes at byte %zu of dynamic shared memory, beyond the launch's %zu bytes (at %s)",
                      write ? "write" : "read", n, off, g_launch->smem, emu_where(site, w, sizeof(w)));
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
                          write ? "write" : "read", n, (void *)addr, emu_where(site, w, sizeof(w)));
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
