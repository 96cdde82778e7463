// emu_internal.h: what the emulator's runtime files share. Not for the device code, which sees only emu.h.
// The first part is for all of them, the second for the emulated GPU's own files, one job each:
//   emu.cpp          configuration, device memory, kernel launches, errors and the device's properties, counters
//   emu_threads.cpp  the threads of the block that runs: fibers, barriers, warp collectives, atomics
//   emu_blocks.cpp   a launch's blocks: their order, blocks that wait on other blocks, cp.async
//   emu_queue.cpp    the device's work queue: streams, events, graphs (stream capture), copies and memsets
//   emu_race.cpp     the race detector: its shadow memory and the compiler's ThreadSanitizer hooks
//   cublaslt.cpp, nccl.cpp   cuBLASLt, and NCCL over MPI
#ifndef CUDA_EMU_INTERNAL_H
#define CUDA_EMU_INTERNAL_H
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

// Prints "cuda-emu: " and the message (and, inside a kernel, which kernel, block and thread), then exits 1:
// what a GPU would fault on, hang on, or silently get wrong.
__attribute__((noreturn, format(printf, 1, 2))) void emu_fatal(const char *fmt, ...);

// Memory the emulated device knows: cudaMalloc (device), cudaMallocHost / cudaHostAlloc (pinned), and
// cudaHostRegister (registered).
enum { EMU_MEM_DEVICE, EMU_MEM_PINNED, EMU_MEM_REGISTERED };
struct EmuAlloc {
    uintptr_t base;
    size_t size;
    int kind;
    unsigned long long id;  // its serial number: never reused, so memory freed and allocated again at the same
                            // address is a different allocation (graphs recorded the old one, see emu_node_refs)
};
// The allocation that holds p (p may be its end), or NULL.
const EmuAlloc *emu_find(const void *p);
// Is [p, p + n) inside one device allocation?
int emu_device_range(const void *p, size_t n);
// Exits with a message naming `who` unless [p, p + n) lies inside one device allocation.
void emu_require_device(const char *who, const char *what, const void *p, size_t n);

// Per-step counters (TRAIN_GPT_EMU_COUNTS=1).
struct EmuCounts {
    unsigned long long malloc, free, sync, heuristic, desc, launches, pageable, h2d_bytes, d2h_bytes;
    // ---- the device's operations per step (issue 23): with launches, what the GPU is handed one by one ----
    unsigned long long matmuls, copies, memsets, collectives, graphs, graph_nodes;
};
extern EmuCounts emu_counts;

// The stream argument of a library call: NULL, a special handle, or a live stream.
void emu_check_stream(const char *who, cudaStream_t s);

// The device runs behind the host (emu_queue.cpp): work is queued on its stream in issue order and runs when the
// host waits for it. emu_enqueue queues one piece (or runs it at once with TRAIN_GPT_EMU_ASYNC=0) and returns what
// marks it done; emu_device_flush runs everything queued, as a synchronising call does.
#include <functional>
#include <memory>
std::shared_ptr<int> emu_enqueue(cudaStream_t s, std::function<void()> op);
void emu_device_flush(void);

// Graphs and the memory their nodes refer to (emu_queue.cpp). Before it queues an operation, its caller names it
// and the memory it refers to: emu_node_refs the pointers (copies, memsets, matmuls, collectives), emu_node_scan a
// kernel's argument bytes, every aligned pointer-sized word of them that points into an allocation (a pointer in a
// struct argument included). While a stream captures, the next node recorded keeps the allocations found (by
// EmuAlloc::id), and cudaGraphLaunch stops a replay whose nodes refer to one freed since; outside a capture both
// return at once. emu_graph_freed is told of every free (emu.cpp): `who` freed a, called from code address caller.
void emu_node_refs(const char *what, const void *const *ptrs, int n);
void emu_node_scan(const char *what, const void *args, size_t bytes);
void emu_graph_freed(const EmuAlloc &a, const char *who, const void *caller);
// The trainer's step as emu_step_begin/_end last marked it (emu.cpp), for messages: -1 before the first.
extern int g_step, g_step_open;

// ----------------------------------------------------------------------------------------------------------------
// Between the emulated GPU's own files (emu*.cpp): each part names the file that defines it, where each name's
// definition says what it holds.
#include "emu.h"
#include <map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#endif
extern "C" char __data_start[], _end[];  // the executable's data and bss: static __shared__ variables

// Configuration (emu.cpp): configure reads the environment once; next_random is TRAIN_GPT_EMU_ORDER=random's.
enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };
extern int g_order, g_async, g_side_first, g_race;
extern size_t g_stack_bytes;
extern unsigned long long g_resident;
void configure(void);
uint64_t next_random(void);
// The error cudaGetLastError returns next (emu.cpp): set_error keeps e unless it is cudaSuccess, and returns it.
cudaError_t set_error(cudaError_t e);
// The operations the host has issued (emu.cpp's per-step counters), and how many when it last waited for the
// device (emu_queue.cpp).
unsigned long long ops_issued(const EmuCounts &c);
extern unsigned long long g_ops_at_wait;

static const size_t SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN = 232448;  // an H100's limits per block

// The launch in progress, and the threads of the block that runs (emu_threads.cpp).
enum { T_RUN, T_BAR, T_WARP, T_DONE, T_SPIN };
enum { C_SYNCWARP, C_SHFL, C_VOTE };

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
extern Launch *g_launch;
extern std::vector<Thread *> g_threads;
extern Thread *g_cur;
extern unsigned char *g_dyn_smem;
extern unsigned long long g_progress;
extern int g_in_kernel;

// Warp collectives in progress: per warp, the groups of lanes that have arrived at one (a group completes when
// every lane of its mask has arrived), and the lanes that have exited.
struct Group {
    int kind, mode, width, size, line;
    unsigned mask, arrived;
    const char *file;
};
extern std::vector<Group> g_groups[32];
extern unsigned g_exited[32];
extern std::vector<int> g_next;  // the threads the block's next pass runs
// The thread that calls `what` (a kernel-only call: outside a kernel it is an error).
Thread *current(const char *what);
// Runs the block until it has exited (1) or waits on another block (0); says what each of its threads waits at.
int run_block(int start);
void describe_waits(char *buf, size_t n);

// A launch's blocks, and cp.async (emu_blocks.cpp).
void run_kernel(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, void (*entry)(void *), void *args, int threads);
void cp_async_at_exit(Thread *t);

// Graph capture (emu_queue.cpp): the stream that captures, if any, and a call that CUDA refuses during capture.
extern CUstream_st *g_capture;
cudaError_t capture_refuse(const char *who, cudaError_t e);

// The race detector (emu_race.cpp): per 2-byte granule the last write and the last two reads; barrier intervals
// (epochs) and warp-sync generations; views between blocks; the shadows of shared memory, static __shared__
// variables and the device-memory arena.
struct Rec {
    uint32_t epoch, gen, site;  // epoch 0: no access recorded
    uint16_t actor, flags;
    uint32_t block;             // the actor's block (linear index in the grid)
};
struct Shadow {
    Rec w, r1, r2;
};
typedef std::map<uint32_t, uint32_t> View;
extern uint32_t g_epoch, g_block_base, g_launch_base, g_blk_epoch;
extern std::map<uintptr_t, View> g_sync;
extern View g_blk_vc;
extern std::vector<std::vector<std::pair<uint32_t, unsigned>>> g_warp_log;
extern Shadow *g_smem_shadow, *g_arena_shadow;
extern char *g_arena;
extern size_t g_arena_size, g_arena_used;
void view_join(View &into, const View &from);
void race_new_block(void);
void race_barrier(void);
void race_warp_sync(int warp, unsigned mask);
// One access of n bytes at addr by actor (a thread), from the code at site (see site_of).
void race_access(uintptr_t addr, size_t n, int write, uint16_t actor, uint32_t site);
// A code address as an offset into the executable (what a race report names through addr2line), and the
// "file:line (function)" it is, as far as the executable's symbols tell (emu_race.cpp; only for messages: it runs
// addr2line).
uint32_t site_of(const void *pc);
const char *emu_where(uint32_t site, char *buf, size_t n);
#endif
