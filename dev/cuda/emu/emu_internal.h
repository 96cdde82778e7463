// emu_internal.h: what the emulator's runtime files (emu.cpp, cublaslt.cpp, nccl.cpp) share. Not for the
// device code, which sees only emu.h.
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

// The device runs behind the host (emu.cpp): work is queued on its stream in issue order and runs when the host
// waits for it. emu_enqueue queues one piece (or runs it at once with TRAIN_GPT_EMU_ASYNC=0) and returns what
// marks it done; emu_device_flush runs everything queued, as a synchronising call does.
#include <functional>
#include <memory>
std::shared_ptr<int> emu_enqueue(cudaStream_t s, std::function<void()> op);
void emu_device_flush(void);
#endif
