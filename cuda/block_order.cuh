// cuda/block_order.cuh: blocks of one launch that take turns on the same memory, in a fixed order, through a counter
// in global memory: a block waits until the counter says every block before it has had its turn (one thread spins
// with acquire loads, then the block's __syncthreads passes that on), takes its turn, and passes it on (__syncthreads,
// then one thread's release: a fence and an atomic increment). The result is then the same in every run; atomics
// whose order the hardware picks are not. Only waits on blocks that a GPU dispatches earlier (a lower linear block
// index) are safe: a GPU does not promise to make a later block resident while an earlier one spins.
// On sm_70+ each is PTX (ld.acquire.gpu, fence.acq_rel.gpu + red.relaxed.gpu); elsewhere (nvcc's host pass, any other
// compiler) they are CUDA's own atomicAdd, __threadfence and __nanosleep, the fence-based form of the same
// release/acquire pair, which an emulator can implement to run the waiting block's others meanwhile.
#ifndef CUDA_BLOCK_ORDER_CUH
#define CUDA_BLOCK_ORDER_CUH

#include "common.cuh"

// One thread: waits until *counter >= target; what the blocks that counted it up had written before their release
// is then visible to this thread (and, after a __syncthreads, to its block).
// A wait lasts at most as long as the launch's earlier blocks take, milliseconds; one that lasts BLOCK_ORDER_LIMIT_NS
// means that a GPU did not make an earlier block progress (the dispatch order above does not hold on it), and would
// hang the run: the block says so and traps, so the host's next check fails with a launch error instead.
#define BLOCK_ORDER_LIMIT_NS 30000000000ull
__device__ __forceinline__ void block_order_wait(int *counter, int target) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    unsigned long long t0 = 0;
    for (unsigned spins = 0;; spins++) {
        int v;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
        if (v >= target) break;
        __nanosleep(64);
        if ((spins & 1023u) == 0) {  // the clock every ~1024 polls: a read of it costs more than a poll
            unsigned long long now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            if (spins == 0) t0 = now;
            else if (now - t0 > BLOCK_ORDER_LIMIT_NS) {
                printf("error: block (%d, %d, %d) of a kernel waited %.0f s for its turn (counter %d, wanted %d): the "
                       "blocks before it made no progress (cuda/block_order.cuh)\n", (int)blockIdx.x, (int)blockIdx.y,
                       (int)blockIdx.z, (double)(now - t0) * 1e-9, v, target);
                __trap();
            }
        }
    }
#else
    while (atomicAdd(counter, 0) < target) __nanosleep(64);
    __threadfence();  // acquire: orders the reads after it after the writes released before the counter's increments
#endif
}

// One thread, after a __syncthreads that follows the block's writes: counts the block's turn done.
__device__ __forceinline__ void block_order_release(int *counter) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], 1;\n" ::"l"(counter) : "memory");
#else
    __threadfence();  // release: the block's writes before the barrier are visible before the increment is
    atomicAdd(counter, 1);
#endif
}

#endif  // CUDA_BLOCK_ORDER_CUH
