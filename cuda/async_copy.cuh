// cuda/async_copy.cuh: asynchronous 16-byte copies from global to shared memory (PTX cp.async, sm_80+), so that
// a kernel can load its next tile while it computes on the current one. A thread issues copies, closes them
// into a group with cp_async_commit, and before anyone reads the destination waits with cp_async_wait<N> (its
// own groups but the newest N have landed) and then a __syncthreads (the other threads' copies are not ordered
// by the wait). On sm_80+ each is one PTX instruction; elsewhere (older devices, nvcc's host pass, any other
// compiler) they are CUDA's own pipeline primitives, which copy at once on devices without cp.async, and which
// an emulator can implement to land the copies only at the wait.
#ifndef CUDA_ASYNC_COPY_CUH
#define CUDA_ASYNC_COPY_CUH

#include <cuda_pipeline_primitives.h>
#include "common.cuh"

// 16 bytes src -> dst (shared), both 16-byte aligned; with full == false nothing is read (src must still be a
// valid address) and dst becomes 16 zero bytes: the zero-filled rows and columns past a tensor's edge.
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, bool full) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(full ? 16 : 0) : "memory");
#else
    __pipeline_memcpy_async(dst, src, 16, full ? 0 : 16);  // the last zfill bytes are zeros, not read
#endif
}

// Closes the copies this thread issued since its last commit into one group.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    __pipeline_commit();
#endif
}

// Waits until at most N of this thread's committed groups (the newest) are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
    __pipeline_wait_prior(N);
#endif
}

#endif  // CUDA_ASYNC_COPY_CUH
