// cuda/common.cuh: what every kernel header of the CUDA build (train_gpt.cu) stands on: the error checks,
// the launch and shared-memory macros that let two compilers build the device code, the run's precision
// (floatX and WITH_X), the 16-byte vectors, the kernels' grow-on-demand scratch and the warp reductions.
//
// Precision is chosen at run time (--precision): activations, their gradients and the weights the
// kernels read are `floatX`, an opaque element that each launcher turns into bf16, fp16 or float
// (WITH_X below); the parameters' master copy, their gradients and AdamW's state are always fp32,
// and every kernel accumulates in fp32. In fp32 the matmuls use fp32 compute (TF32 with --tf32)
// and the run is comparable with the CPU build to fp32 rounding. Every reduction has a fixed order
// (no atomics), so runs are deterministic and resume bit for bit.
//
// Two compilers build these headers: nvcc for the GPU, and g++ with dev/cuda/emu/ (make train_gpt_emu), which
// runs the same device code on the CPU. So the kernels are launched through LAUNCH and declare dynamic shared
// memory through DYNAMIC_SHARED: under nvcc they are `<<<>>>` and `extern __shared__`; the emulator brings its
// own (it runs the kernel on the CPU and names it in every error). The shared headers and the tests ask
// TRAIN_GPT_CUDA, not __CUDACC__, whether they are in the CUDA build.
#ifndef CUDA_COMMON_CUH
#define CUDA_COMMON_CUH

#ifndef TRAIN_GPT_CUDA
#define TRAIN_GPT_CUDA 1
#endif
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include "../base/utils.h"
#include "../arch/gpt2.h"

static void cuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) fatal_at(file, line, "CUDA: %s", cudaGetErrorString(err));
}
#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)

// The stream every kernel, matmul, copy and memset of the build is issued on, created by backend_init: the
// forward and backward are captured from it as CUDA graphs (backend.cuh), which the legacy default stream cannot
// be. NULL (the legacy stream) until then, for the kernel checks that run without backend_init.
static cudaStream_t main_stream = NULL;

// Launch errors surface at the next synchronising call; checking right after each launch names the kernel.
#define launchCheck() cudaCheck(cudaGetLastError())

// LAUNCH(grid, block, smem, stream, kernel)(args...) is kernel<<<grid, block, smem, stream>>>(args...).
#ifndef LAUNCH
#define LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif
// DYNAMIC_SHARED(type, name): the block's dynamic shared memory (the launch's smem bytes) as `type name[]`.
#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

// ----------------------------------------------------------------------------
// Precision. model.h sees floatX as an incomplete type, so only the launchers below can read it.

enum { PREC_FP32, PREC_BF16, PREC_FP16 };
static int x_prec = PREC_FP32;  // fp32 until backend_set_precision: the kernel tests compare with the CPU build
typedef struct floatX_opaque floatX;
typedef __nv_bfloat16 bf16;

// Runs a statement with `xt` naming the run's element type.
#define WITH_X(...)                                                                  \
    do {                                                                             \
        switch (x_prec) {                                                            \
            case PREC_BF16: { typedef bf16 xt; __VA_ARGS__; } break;                  \
            case PREC_FP16: { typedef __half xt; __VA_ARGS__; } break;                \
            default: { typedef float xt; __VA_ARGS__; } break;                        \
        }                                                                            \
    } while (0)

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

// V consecutive values as one aligned load or store: 16 bytes (V = 16 / sizeof(T)) where the row length
// and the base pointer allow it, else V = 1. Each kernel that uses it keeps one summation order per
// output for every V, so the vector width changes speed, not results.
template <typename T, int V>
struct alignas(sizeof(T) * V) XVec { T v[V]; };
template <typename T> constexpr int vec16() { return (int)(16 / sizeof(T)); }
template <typename... P> static inline int aligned16(const P *...p) { return ((((uintptr_t)p & 15) == 0) && ...); }

// Every vectorised launcher picks its width here: f(std::integral_constant<int, vec16<T>()>) when `fits` (the
// length a multiple of the width where the kernel needs that, the pointers aligned), else
// f(std::integral_constant<int, 1>), one value a thread. f launches the kernel for its width V.
template <typename T, typename F>
static inline void with_vec_width(bool fits, F &&f) {
    if (fits) f(std::integral_constant<int, vec16<T>()>{});
    else f(std::integral_constant<int, 1>{});
}

// Scratch that kernels grow on demand: per-chunk column partials, attention's row terms, a row of
// logits in float.
// A graph that recorded the old buffer is stale once it moves: scratch_moves counts the moves.
static float *scratch = NULL;
static size_t scratch_floats = 0;
static unsigned scratch_moves = 0;
static float *scratch_get(size_t n) {
    if (n > scratch_floats) {
        if (scratch) cudaCheck(cudaFree(scratch));
        cudaCheck(cudaMalloc(&scratch, n * sizeof(float)));
        scratch_floats = n;
        scratch_moves++;
    }
    return scratch;
}

// A lever read from the environment at start (TRAIN_GPT_GRAPHS, the matmul fusions, RoPE in attention): unset or
// empty keeps the default, 0 or 1 sets it, anything else is an error naming the variable.
static int switch_env(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    if (strcmp(v, "0") && strcmp(v, "1")) fatal("%s=%s: 0 or 1", name, v);
    return v[0] == '1';
}

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// Sums and maxima over a warp, in a fixed butterfly order.
__device__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
}

__device__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
    return x;
}

#endif  // CUDA_COMMON_CUH
