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

// Pass 1 reads the row once with an online softmax: each thread keeps a running max m and a sum s of
// exp(x - m), rescaled when m grows; the block then combines the (m, s) pairs. Pass 2 writes the gradient.
template <typename T, int V>
__global__ void classifier_kernel(T *logits, float *losses, const int *targets, int Vocab, int Vp, float dloss) {
    typedef XVec<T, V> Vec;
    T *row = logits + (long)blockIdx.x * Vp;
    Vec *rowv = reinterpret_cast<Vec *>(row);
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i * V < Vocab; i += blockDim.x) {
        const Vec x = rowv[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            if (i * V + k >= Vocab) break;
            const float v = to_f(x.v[k]);
            if (v > m) { s *= expf(m - v); m = v; }
            s += expf(v - m);
        }
    }
    const float maxv = block_reduce(m, 1);
    const float sum = block_reduce(m == -INFINITY ? 0.0f : s * expf(m - maxv), 0);
    const float logsum = logf(sum) + maxv;
    const int y = targets[blockIdx.x];
    const float ly = to_f(row[y]);
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) losses[blockIdx.x] = logsum - ly;
    for (int i = threadIdx.x; i < Vp / V; i += blockDim.x) {
        Vec x = rowv[i];
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int v = i * V + k;
            float g = v < Vocab ? expf(to_f(x.v[k]) - logsum) * dloss : 0.0f;
            if (v == y) g -= dloss;
            x.v[k] = from_f<T>(g);
        }
        rowv[i] = x;
    }
}

static void classifier_forward_backward(floatX *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
    WITH_X(with_vec_width<xt>(Vp % vec16<xt>() == 0 && aligned16(logits), [&](auto width) {
        LAUNCH(N, 512, 0, 0, classifier_kernel<xt, decltype(width)::value>)((xt *)logits, losses, targets, V, Vp, dloss);
    }));
    launchCheck();
}

#endif  // CUDA_CLASSIFIER_CUH
