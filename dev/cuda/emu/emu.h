// dev/cuda/emu/emu.h: CUDA on the CPU. g++ compiles train_gpt.cu (and the dev checks, and test_gpt2.c) with
// `-include dev/cuda/emu/emu.h`; the device code is unmodified and runs on an emulated GPU, function for function:
//   - each thread of a block is a fiber (its own stack), so __syncthreads, __syncwarp, the shuffles and the votes
//     really block: a barrier releases when every thread it names has arrived, and a thread that can
//     never arrive (it exited, or waits at another collective) is an error that names the kernel, not a hang;
//   - blocks start in the order TRAIN_GPT_EMU_ORDER picks (forward, reverse, random[:SEED]) and run one after
//     another, except that a block whose threads spin on another block (__nanosleep) waits while the others run:
//     blocks are then live together (at most TRAIN_GPT_EMU_RESIDENT, unlimited by default), and a wait that no
//     block can end is a deadlock error; inside a block the threads run in the order TRAIN_GPT_EMU_ORDER picks
//     up to their next barrier, so a result that depends on the order is a race;
//   - cudaMalloc'd memory and each block's dynamic shared memory start as 0xff bytes (NaN in fp32, bf16 and
//     fp16), so a read of anything not written shows up in the results;
//   - the runtime (emu.cpp, with emu_threads.cpp, emu_blocks.cpp, emu_queue.cpp and emu_race.cpp: see
//     emu_internal.h for which does what), cuBLASLt (cublaslt.cpp) and NCCL over MPI (nccl.cpp) implement what
//     the trainer calls against NVIDIA's own headers, which declare them; the toolkit's cuda_bf16.h and
//     cuda_fp16.h are used as they are (they work in host code).
// Built with -fsanitize=thread (make dev/cuda/kernels_emu_race), the compiler reports every memory access of the
// device code to our own hooks in emu_race.cpp (no ThreadSanitizer runtime is linked): they keep shadow memory for
// shared and device memory and stop at the first pair of accesses from different threads that no barrier orders.
// See the README's "The CUDA build on the CPU" for what this proves and what only a GPU can.
#ifndef CUDA_EMU_H
#define CUDA_EMU_H
#define CUDA_EMU 1

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- what the device code sees ----

// The registers of the running thread, set by the scheduler at every switch. Read-only copies, as on a GPU.
struct EmuRegs {
    uint3 tid, bid;
    dim3 bdim, gdim;
    unsigned char *dynamic_smem;
};
extern EmuRegs emu_regs;
static const uint3 &threadIdx = emu_regs.tid;
static const uint3 &blockIdx = emu_regs.bid;
static const dim3 &blockDim = emu_regs.bdim;
static const dim3 &gridDim = emu_regs.gdim;
static const int warpSize = 32;

// Static __shared__ variables are function statics: one copy, used by one block at a time (blocks run one after
// another; a kernel whose blocks wait on each other must use dynamic shared memory only, which each live block has
// its own of); a block finds what the previous one left, as undefined as on a GPU (the race build finds them among the
// executable's data and checks every access). The launch's dynamic shared memory comes through DYNAMIC_SHARED
// (train_gpt.cu); `extern __shared__` written directly becomes `extern static`, which does not compile.
#undef __shared__
#define __shared__ static
#define DYNAMIC_SHARED(type, name) type *const name = reinterpret_cast<type *>(emu_regs.dynamic_smem)
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

// Barriers and warp collectives (emu_threads.cpp). Each blocks the calling fiber until every thread it names arrives.
// The defaulted file and line are the caller's source position (GCC evaluates __builtin_FILE/LINE at the call):
// threads at the same barrier are at the same source line even where the compiler has duplicated the call.
#define EMU_AT const char *file = __builtin_FILE(), int line = __builtin_LINE()
void __syncthreads(EMU_AT);
int __syncthreads_count(int pred, EMU_AT);
int __syncthreads_and(int pred, EMU_AT);
int __syncthreads_or(int pred, EMU_AT);
void __syncwarp(unsigned mask = 0xffffffffu, EMU_AT);
unsigned __ballot_sync(unsigned mask, int pred, EMU_AT);
int __all_sync(unsigned mask, int pred, EMU_AT);
int __any_sync(unsigned mask, int pred, EMU_AT);
unsigned __activemask(void);
__attribute__((noreturn)) void __trap(void);

enum { EMU_SHFL_IDX, EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_XOR };
// One shuffle: this lane's `size` bytes at val, the result at out.
void emu_shfl(int mode, unsigned mask, const void *val, void *out, int size, int arg, int width, const char *file,
              int line);

#define EMU_SHFL(NAME, MODE)                                                                                \
    template <typename T>                                                                                   \
    static inline T NAME(unsigned mask, T var, int arg, int width = 32, EMU_AT) {                           \
        static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16, #NAME ": unsupported type"); \
        T r;                                                                                                \
        emu_shfl(MODE, mask, &var, &r, (int)sizeof(T), arg, width, file, line);                            \
        return r;                                                                                           \
    }
EMU_SHFL(__shfl_sync, EMU_SHFL_IDX)
EMU_SHFL(__shfl_up_sync, EMU_SHFL_UP)
EMU_SHFL(__shfl_down_sync, EMU_SHFL_DOWN)
EMU_SHFL(__shfl_xor_sync, EMU_SHFL_XOR)
#undef EMU_SHFL

// Atomics: fibers never preempt each other, so a plain read-modify-write in the runtime is atomic.
float atomicAdd(float *p, float v);
double atomicAdd(double *p, double v);
int atomicAdd(int *p, int v);
unsigned atomicAdd(unsigned *p, unsigned v);
unsigned long long atomicAdd(unsigned long long *p, unsigned long long v);
int atomicMax(int *p, int v);
int atomicMin(int *p, int v);
int atomicExch(int *p, int v);
int atomicCAS(int *p, int cmp, int v);
unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v);
unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v);
void __threadfence(void);
void __threadfence_block(void);
// A thread that spins on memory another block writes sleeps here: the emulator runs other threads and blocks (blocks
// then run concurrently), and a wait no block can end is a deadlock error naming the kernel.
void __nanosleep(unsigned ns, EMU_AT);

// Device math and bit intrinsics that the toolkit declares only for nvcc. The fast-math variants compute the
// exact function: the emulator checks function, not the hardware's approximations.
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// glibc's math.h already declares these names (its internal aliases), so they are macros here
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanhf(x) tanhf(x)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
static inline int __float_as_int(float x) { int u; memcpy(&u, &x, 4); return u; }
static inline float __int_as_float(int u) { float x; memcpy(&x, &u, 4); return x; }
static inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
static inline double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int __clzll(unsigned long long x) { return x ? __builtin_clzll(x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

// cuda_runtime.h has the kernel-pointer forms of these only for nvcc
template <typename... P> static inline cudaError_t cudaFuncSetAttribute(void (*f)(P...), cudaFuncAttribute a, int v) {
    return cudaFuncSetAttribute((const void *)f, a, v);
}
template <typename... P> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, void (*f)(P...)) {
    return cudaFuncGetAttributes(a, (const void *)f);
}
template <typename... P>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void (*f)(P...), int block, size_t smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, (const void *)f, block, smem);
}

// ---- asynchronous copies (cp.async; the emulator's section for them, emu_blocks.cpp's "Asynchronous copies") ----
// The device code (cuda/async_copy.cuh) issues cp.async through CUDA's pipeline primitives
// (cuda_pipeline_primitives.h, kept out here), as nvcc does where it does not emit the PTX itself. A copy is
// queued on the issuing thread: at issue its 16 destination bytes become 0xff (NaN) and the source is read; they
// land only when that thread's __pipeline_wait_prior leaves at most `prior` newer committed groups outstanding,
// so a read before the wait sees NaN. The race detector sees the destination written by the issuing thread at
// issue and again at the wait (other threads need a __syncthreads after the wait). A thread that exits with
// copies not waited for is an error naming the kernel. Only 16-byte copies (cp.async.cg) are modelled.
void emu_cp_async(void *dst_smem, const void *src, int size, int zfill, EMU_AT);
void emu_cp_async_commit(EMU_AT);
void emu_cp_async_wait(int pending, EMU_AT);
#define _CUDA_PIPELINE_PRIMITIVES_H_
__attribute__((always_inline)) static inline void __pipeline_memcpy_async(void *dst_shared, const void *src_global,
                                                                           size_t size_and_align, size_t zfill = 0,
                                                                           EMU_AT) {
    emu_cp_async(dst_shared, src_global, (int)size_and_align, (int)zfill, file, line);
}
__attribute__((always_inline)) static inline void __pipeline_commit(EMU_AT) { emu_cp_async_commit(file, line); }
__attribute__((always_inline)) static inline void __pipeline_wait_prior(size_t prior, EMU_AT) {
    emu_cp_async_wait((int)prior, file, line);
}

// ---- launches ----

// What a launch hands the runtime; the kernel runs as entry(args) on every thread's fiber.
struct EmuKernel {
    const char *name;  // the instantiation, e.g. "attn_fwd_kernel<__nv_bfloat16, 64>"
    const void *func;  // the key of cudaFuncSetAttribute
};
void emu_launch(const EmuKernel *k, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void (*entry)(void *),
                void *args, size_t args_bytes, const void *const *pointers, int npointers);
void emu_copy(void *dst, const void *src, size_t n);  // uninstrumented memcpy (see the race build)
const char *emu_kernel_name(const char *pretty);

// The kernel's name as g++ spells the template argument: "... [with auto K = attn_fwd_kernel<float, 64>]".
template <auto K> static const char *emu_name_of() {
    static const char *name = emu_kernel_name(__PRETTY_FUNCTION__);
    return name;
}

template <auto K> struct EmuLaunch {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <typename... P> struct Args {
        std::tuple<std::decay_t<P>...> values;
        // on each thread's fiber: a copy of the arguments on its own stack, then the kernel
        static void entry(void *a) {
            std::tuple<std::decay_t<P>...> mine;
            emu_copy(&mine, &static_cast<Args *>(a)->values, sizeof(mine));
            std::apply(K, mine);
        }
    };
    template <typename... P, typename... A> void run(void (*)(P...), A &&...a) {
        static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
        // the arguments convert to the parameters' types as in a call
        Args<P...> args{std::tuple<std::decay_t<P>...>(std::forward<A>(a)...)};
        // every pointer argument must be device memory (or pinned host memory): checked at the launch
        const void *ptrs[sizeof...(P) + 1];
        int n = 0;
        std::apply([&](const auto &...v) { ((collect(ptrs, n, v)), ...); }, args.values);
        static const EmuKernel k = {emu_name_of<K>(), (const void *)K};
        emu_launch(&k, grid, block, smem, stream, &Args<P...>::entry, &args, sizeof(args), ptrs, n);
    }
    template <typename V> static void collect(const void **ptrs, int &n, const V &v) {
        if constexpr (std::is_pointer<V>::value) ptrs[n++] = (const void *)v;
    }
    template <typename... A> void operator()(A &&...a) { run(K, std::forward<A>(a)...); }
};
#define LAUNCH(grid, block, smem, stream, ...) \
    EmuLaunch<__VA_ARGS__>{dim3(grid), dim3(block), (size_t)(smem), (cudaStream_t)(stream)}

// Per-step counters (TRAIN_GPT_EMU_COUNTS=1): trainer.h marks the steps.
void emu_step_begin(int step);
void emu_step_end(int step);
#define STEP_BEGIN(step) emu_step_begin(step)
#define STEP_END(step) emu_step_end(step)

#endif
