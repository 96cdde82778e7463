// cuda/classifier.cuh: the fused classifier of the CUDA build (train_gpt.cu, called by model.h): softmax,
// cross-entropy loss and the logits' gradient in one kernel per row.
#ifndef CUDA_CLASSIFIER_CUH
#define CUDA_CLASSIFIER_CUH

#include "common.cuh"

// One block per row: softmax over the first V columns, the row's loss, and the row replaced by
// dloss/dlogits in the same pass (no probability tensor). Block reductions in a fixed tree order.
__device__ float block_reduce(float x, int is_max) {
    __shared__ float shared[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = is_max ? warp_max(x) : warp_sum(x);
    __syncthreads();
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < nwarps ? shared[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(x) : warp_sum(x);
}

// The block's sum in double, in the same fixed tree order (the row's sum of exponentials: see below).
__device__ double block_sum_double(double x) {
    __shared__ double shared_d[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    __syncthreads();
    if (lane == 0) shared_d[warp] = x;
    __syncthreads();
    x = lane < nwarps ? shared_d[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
}

// Pass 1 reads the row once with an online softmax: each thread keeps a running max m and a sum s of
// exp(x - m), rescaled when m grows; the block then combines the (m, s) pairs. Pass 2 writes the gradient.
// The sums are in double (each exp in float): a trained model's rows are sharp (one term near 1, tens of
// thousands near 1e-5), and a float sum loses the small terms' low bits at every add (1.6e-4 relative on the loss
// of such a 50k row in fp32; dev/cuda/kernels.cu checks 1e-6 against long double). The log and the target's
// gradient (p - 1) * dloss, which cancels where p is near 1, are in double too; as the CPU build (cpu/classifier.h).
// STAGED: pass 1 also keeps the row in shared memory (Vp values: 100 KB in bf16 at GPT-2's 50304), and pass 2
// reads it there instead of from global memory a second time. Each thread reads back only the vectors it
// stored itself (the same i), so no barrier is needed, and the arithmetic is the same: the same bits.
template <typename T, int V, bool STAGED>
__global__ void classifier_kernel(T *logits, float *losses, const int *targets, int Vocab, int Vp, float dloss) {
    typedef XVec<T, V> Vec;
    T *row = logits + (long)blockIdx.x * Vp;
    Vec *rowv = reinterpret_cast<Vec *>(row);
    DYNAMIC_SHARED(unsigned char, classifier_smem);  // bytes: nvcc refuses one extern __shared__ name of several types
    Vec *staged = reinterpret_cast<Vec *>(classifier_smem);
    float m = -INFINITY;
    double s = 0.0;
    for (int i = threadIdx.x; i * V < Vocab; i += blockDim.x) {
        const Vec x = rowv[i];
        if (STAGED) staged[i] = x;
#pragma unroll
        for (int k = 0; k < V; k++) {
            if (i * V + k >= Vocab) break;
            const float v = to_f(x.v[k]);
            if (v > m) { s *= expf(m - v); m = v; }
            s += expf(v - m);
        }
    }
    const float maxv = block_reduce(m, 1);
    const double sum = block_sum_double(m == -INFINITY ? 0.0 : s * expf(m - maxv));
    const int y = targets[blockIdx.x];
    const float ly = to_f(row[y]);
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) losses[blockIdx.x] = (float)(log(sum) + ((double)maxv - ly));
    const double dscale = dloss / sum;
    const float scale = (float)dscale;
    for (int i = threadIdx.x; i < Vp / V; i += blockDim.x) {
        Vec x;
        if (!STAGED) x = rowv[i];
        else if (i * V < Vocab) x = staged[i];  // past the vocabulary every gradient is 0, whatever the logit
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int v = i * V + k;
            const float e = v < Vocab ? expf(to_f(x.v[k]) - maxv) : 0.0f;
            const float g = v == y ? (float)(e * dscale - dloss) : e * scale;
            x.v[k] = from_f<T>(g);
        }
        rowv[i] = x;
    }
}

// TRAIN_GPT_CLASSIFIER_STAGED=0|1 (1): the row staged in shared memory where the device has room for it (an H100:
// 227 KB a block; fp32 at Vp = 50304 needs 197 KB). Whether the saved read beats the lower occupancy (two 100 KB
// blocks an SM) is for a GPU to say: `./dev/cuda/kernels bench` times both.
static int classifier_staged = -1;
static void classifier_forward_backward(floatX *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
    if (classifier_staged < 0) {
        const char *e = getenv("TRAIN_GPT_CLASSIFIER_STAGED");
        classifier_staged = !(e && strcmp(e, "0") == 0);
    }
    static int optin = -1;
    if (optin < 0) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    WITH_X(with_vec_width<xt>(Vp % vec16<xt>() == 0 && aligned16(logits), [&](auto width) {
        constexpr int W = decltype(width)::value;
        const size_t bytes = (size_t)Vp * sizeof(xt);
        if (classifier_staged && bytes <= (size_t)optin) {
            cudaCheck(cudaFuncSetAttribute(classifier_kernel<xt, W, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
            LAUNCH(N, 512, bytes, main_stream, classifier_kernel<xt, W, true>)((xt *)logits, losses, targets, V, Vp, dloss);
        } else {
            LAUNCH(N, 512, 0, main_stream, classifier_kernel<xt, W, false>)((xt *)logits, losses, targets, V, Vp, dloss);
        }
    }));
    launchCheck();
}

#endif  // CUDA_CLASSIFIER_CUH
