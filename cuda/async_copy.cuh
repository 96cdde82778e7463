// cuda/async_copy.cuh: asynchronous 16-byte copies from global to shared memory (PTX cp.async, sm_80+), so that
// a kernel can load its next tile while it computes on the current one. A thread issues copies, closes them
// into a group with cp_async_commit, and before anyone reads the destination waits with cp_async_wait<N> (its
// own groups but the newest N have landed) and then a __syncthreads (the other threads' copies are not ordered
// by the wait). Under the emulator (dev/cuda/emu) the same calls queue the copies and land them only at the
// wait, so a missing wait reads NaN and a missing barrier is a race.
#ifndef CUDA_ASYNC_COPY_CUH
#define CUDA_ASYNC_COPY_CUH

#include "common.cuh"

// 16 bytes src -> dst (shared), both 16-byte aligned; with full == false nothing is read (src must still be a
// valid address) and dst becomes 16 zero bytes: the zero-filled rows and columns past a tensor's edge.
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, bool full) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(full ? 16 : 0) : "memory");
#elif defined(CUDA_EMU)
    emu_cp_async(dst, src, full ? 16 : 0);
#else  // older devices (and nvcc's host pass): a plain copy, complete at once
    *reinterpret_cast<uint4 *>(dst) = full ? *reinterpret_cast<const uint4 *>(src) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

// Closes the copies this thread issued since its last commit into one group.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(CUDA_EMU)
    emu_cp_async_commit();
#endif
}

// Waits until at most N of this thread's committed groups (the newest) are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(CUDA_EMU)
    emu_cp_async_wait(N);
#endif
}

#endif  // CUDA_ASYNC_COPY_CUH
