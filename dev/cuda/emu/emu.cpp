// dev/cuda/emu/emu.cpp: the emulated GPU's runtime, its host side: the configuration (the environment), device
// memory and its checks, the kernel launch call (its checks; the kernel runs when the device's queue gets to it),
// the CUDA runtime's errors, device properties and memory calls, and the per-step counters (see emu.h for the
// model). The rest of the emulated GPU is one job to a file and shares what it needs through emu_internal.h: the
// threads of the block that runs (emu_threads.cpp), a launch's blocks and cp.async (emu_blocks.cpp), the device's
// work queue with streams, events and graphs (emu_queue.cpp), and the race detector (emu_race.cpp).
// Compiled without instrumentation: only the device code's own accesses reach the race detector.
#include "emu.h"
#include "emu_internal.h"

#include <map>
#include <memory>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <vector>

EmuRegs emu_regs;
EmuCounts emu_counts;

// ----------------------------------------------------------------------------------------------------------------
// Errors: the fatal ones (what a GPU would fault on, hang on, or silently get wrong), and the one
// cudaGetLastError returns.

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

static cudaError_t g_last_error = cudaSuccess;
cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}

// ----------------------------------------------------------------------------------------------------------------
// Configuration (environment, read once).

int g_order = ORDER_FORWARD;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
size_t g_stack_bytes = 64 * 1024;
static int g_counts_on = 0;
int g_async = 1;  // TRAIN_GPT_EMU_ASYNC=0: every piece of device work runs when it is issued
int g_side_first = 0;  // TRAIN_GPT_EMU_STREAMS=side-first: other streams run before the default one
int g_race = 0;  // set by __tsan_init: the device code is instrumented
unsigned long long g_resident = 0;  // TRAIN_GPT_EMU_RESIDENT: at most this many blocks live at once (0: no limit)

void configure(void) {
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

uint64_t next_random(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

// ----------------------------------------------------------------------------------------------------------------
// Device memory. Every allocation is filled with 0xff bytes (NaN in fp32, bf16 and fp16).

static std::map<uintptr_t, EmuAlloc> &allocs(void) {  // built on first use: CUDA may be called from constructors
    static std::map<uintptr_t, EmuAlloc> m;
    return m;
}
#define g_allocs allocs()
static size_t g_device_bytes = 0, g_device_peak = 0;
static unsigned long long g_alloc_serial = 0;  // EmuAlloc::id: the allocations made so far
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
// Launching a kernel: the launch's checks, then its run is queued on the stream (run_kernel, emu_blocks.cpp: the
// blocks in turn, each block's threads on fibers).

// cudaFuncAttributeMaxDynamicSharedMemorySize per kernel (built on first use: CUDA may be called from constructors)
static std::map<const void *, int> &max_dyn_smem(void) {
    static std::map<const void *, int> m;
    return m;
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
    emu_node_scan(k->name, args, args_bytes);  // during capture: the memory the node refers to, for its replays
    emu_enqueue(stream, [=]() { run_kernel(k, grid, block, smem, entry, saved->data(), (int)threads); });
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
unsigned long long ops_issued(const EmuCounts &c) {
    return c.launches + c.matmuls + c.copies + c.memsets + c.collectives + c.graphs;
}
int g_step = -1, g_step_open = 0;
void emu_step_begin(int step) {
    g_step = step;
    g_step_open = 1;
    g_step_start = emu_counts;
    g_ops_at_wait = ops_issued(emu_counts);
}
void emu_step_end(int step) {
    g_step_open = 0;
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
// The CUDA runtime API, as far as the trainer and the checks use it: errors, the device and its properties,
// memory. The calls that issue device work or make the host wait for it are emu_queue.cpp's.

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

cudaError_t cudaMalloc(void **p, size_t bytes) {
    configure();
    if (g_capture) return capture_refuse("cudaMalloc", cudaErrorStreamCaptureUnsupported);
    emu_counts.malloc++;
    *p = NULL;
    if (g_device_bytes + bytes > DEVICE_BYTES) return set_error(cudaErrorMemoryAllocation);
    void *m = device_alloc(bytes);
    if (!m) return set_error(cudaErrorMemoryAllocation);
    memset(m, 0xff, bytes);  // NaN in every float type: unwritten memory shows up in the results
    g_allocs[(uintptr_t)m] = EmuAlloc{(uintptr_t)m, bytes, EMU_MEM_DEVICE, ++g_alloc_serial};
    g_device_bytes += bytes;
    if (g_device_bytes > g_device_peak) g_device_peak = g_device_bytes;
    *p = m;
    return cudaSuccess;
}

// cudaFree and cudaFreeAsync; caller: the code that called them (a graph replay that uses the memory names it)
static cudaError_t device_free(void *p, const char *who, const void *caller) {
    if (g_capture) return capture_refuse(who, cudaErrorStreamCaptureUnsupported);
    emu_counts.free++;
    emu_counts.sync++;  // cudaFree waits for the device
    emu_device_flush();
    if (!p) return cudaSuccess;
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != EMU_MEM_DEVICE) {
        fprintf(stderr, "cuda-emu: %s(%p): not a pointer cudaMalloc returned\n", who, p);
        return set_error(cudaErrorInvalidValue);
    }
    emu_graph_freed(it->second, who, caller);
    g_device_bytes -= it->second.size;
    device_release(p, it->second.size);
    g_allocs.erase(it);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { return device_free(p, "cudaFree", __builtin_return_address(0)); }

// Stream-ordered allocation: ordered trivially, everything being synchronous.
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    emu_check_stream("cudaMallocAsync", s);
    return cudaMalloc(p, bytes);
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    emu_check_stream("cudaFreeAsync", s);
    cudaError_t e = device_free(p, "cudaFreeAsync", __builtin_return_address(0));
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
    g_allocs[(uintptr_t)m] = EmuAlloc{(uintptr_t)m, bytes, EMU_MEM_PINNED, ++g_alloc_serial};
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
    emu_graph_freed(it->second, "cudaFreeHost", __builtin_return_address(0));
    g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags) {
    (void)flags;
    g_allocs[(uintptr_t)p] = EmuAlloc{(uintptr_t)p, bytes, EMU_MEM_REGISTERED, ++g_alloc_serial};
    return cudaSuccess;
}
cudaError_t cudaHostUnregister(void *p) {
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != EMU_MEM_REGISTERED) return set_error(cudaErrorInvalidValue);
    emu_graph_freed(it->second, "cudaHostUnregister", __builtin_return_address(0));
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

}  // extern "C"
