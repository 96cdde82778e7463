// dev/llmc_cuda13.h: force-included by scripts/bench_gpu.sh when it builds llm.c's train_gpt2cu beside ours.
// CUDA 13 changed cudaMemAdvise's last parameter from a device number to a cudaMemLocation; llm.c passes a
// device number (cudaCpuDeviceId), which no longer compiles. This overload takes the old form.
#include <cuda_runtime.h>
#if CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, cudaMemoryAdvise advice, int device) {
    cudaMemLocation where;
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(ptr, bytes, advice, where);
}
#endif
