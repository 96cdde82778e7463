// cuda/vocab.cuh: tensor parallelism's vocabulary-parallel kernels (backend.h's contract; tensor_parallel.h runs them
// around the TP collectives, which go through comm.h: NCCL on its own stream, or MPI staged): the embedding of a
// rank's rows of the vocabulary, and the cross-entropy over a rank's logit columns in three steps (the row's max,
// its sum of exponentials and target logit, the loss and the gradient). The CPU build's cpu/vocab.h is the
// reference, in its precision: the sums of exponentials in double, the loss's log and the target's gradient too.
#ifndef CUDA_VOCAB_CUH
#define CUDA_VOCAB_CUH

#include "common.cuh"
#include "encoder.cuh"     // encoder_backward_rows
#include "classifier.cuh"  // block_reduce, block_sum_double

static int backend_has_tp(void) { return 1; }

// out = wte[id - v0] (+ wpe[t]) where this rank holds the token's row, else wpe[t] or 0: the TP all-reduce then
// leaves the owner's row (wpe passed by one rank only). V consecutive channels a thread.
template <typename T, int V>
__global__ void encoder_forward_vocab_kernel(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C,
                                             int v0, int vn) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (idx >= (long)B * Tn * C) return;
    int c = idx % C, bt = idx / C, t = bt % Tn, id = inp[bt] - v0;
    XVec<T, V> o;
    if (id >= 0 && id < vn) o = *reinterpret_cast<const XVec<T, V> *>(wte + (long)id * C + c);
    else for (int k = 0; k < V; k++) o.v[k] = from_f<T>(0.0f);
    if (wpe) {
        const XVec<T, V> p = *reinterpret_cast<const XVec<T, V> *>(wpe + (long)t * C + c);
#pragma unroll
        for (int k = 0; k < V; k++) o.v[k] = from_f<T>(to_f(o.v[k]) + to_f(p.v[k]));
    }
    *reinterpret_cast<XVec<T, V> *>(out + idx) = o;
}

static void encoder_forward_vocab(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C,
                                  int v0, int vn) {
    long n = (long)B * T * C;
    WITH_X(with_vec_width<xt>(C % vec16<xt>() == 0 && aligned16(out, wte) && (!wpe || aligned16(wpe)), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(n / V, 256), 256, 0, main_stream, encoder_forward_vocab_kernel<xt, V>)((xt *)out, inp, (const xt *)wte,
                                                                                             (const xt *)wpe, B, T, C, v0, vn);
    }));
    launchCheck();
}

// dwte's rows this rank holds: encoder_backward's kernels (one block per distinct token, adding the token's positions
// in increasing order, the CPU build's order); a token of another rank's rows adds nothing.
static void encoder_backward_vocab(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C,
                                   int v0, int vn) {
    encoder_backward_rows(dwte, dwpe, dout, inp, B, T, C, v0, vn);
}

// The cross-entropy's three steps, one block per row; the sums of exponentials in double through classifier.cuh's
// block_sum_double (a fixed tree order).

// The row's max over the nshards gathered maxima, in shard order (as the CPU build).
__device__ float vocab_row_max(const float *maxes, int nshards, int N, int i) {
    float m = -INFINITY;
    for (int s = 0; s < nshards; s++) m = fmaxf(m, maxes[(long)s * N + i]);
    return m;
}

template <typename T>
__global__ void classifier_vocab_max_kernel(const T *logits, float *rowmax, int Vl, int Vpl) {
    const T *row = logits + (long)blockIdx.x * Vpl;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < Vl; v += blockDim.x) m = fmaxf(m, to_f(row[v]));
    m = block_reduce(m, 1);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

// sums[i]: the row's sum of exp(logit - max) over this rank's valid columns but the target's (each exp in float,
// summed in double, then rounded to the float the all-reduce adds); sums[N + i]: the target's logit where this rank
// holds it, else 0.
// The logits are left as they are: _finish recomputes each exponential (backend.h: the row between the two steps
// is the backend's), which in 16 bits rounds the gradient once, not twice.
template <typename T>
__global__ void classifier_vocab_exp_kernel(const T *logits, float *sums, const float *maxes, int nshards,
                                            const int *targets, int N, int Vl, int Vpl, int v0) {
    const int i = blockIdx.x;
    const T *row = logits + (long)i * Vpl;
    const float m = vocab_row_max(maxes, nshards, N, i);
    const int y = targets[i] - v0;
    double s = 0.0;  // every exponential but the target's (cpu/vocab.h says why)
    for (int v = threadIdx.x; v < Vl; v += blockDim.x) s += v == y ? 0.0f : expf(to_f(row[v]) - m);
    s = block_sum_double(s);
    if (threadIdx.x == 0) {
        sums[i] = (float)s;
        sums[N + i] = y >= 0 && y < Vl ? to_f(row[y]) : 0.0f;
    }
}

// With sums added over the ranks: the loss (every rank the whole vocabulary's) and the row replaced by
// (softmax - onehot(target)) * dloss, 0 in the padding; the log and the target's gradient in double.
template <typename T>
__global__ void classifier_vocab_finish_kernel(T *logits, float *losses, const float *sums, const float *maxes,
                                               int nshards, const int *targets, int N, int Vl, int Vpl, int v0,
                                               float dloss) {
    const int i = blockIdx.x;
    T *row = logits + (long)i * Vpl;
    const float m = vocab_row_max(maxes, nshards, N, i);
    const double sum = (double)sums[i] + expf(sums[N + i] - m), dscale = dloss / sum;  // the target's term remade
    const float scale = (float)dscale;
    const int y = targets[i] - v0;
    if (threadIdx.x == 0) losses[i] = (float)(log(sum) + ((double)m - sums[N + i]));
    for (int v = threadIdx.x; v < Vpl; v += blockDim.x) {
        float g = 0.0f;
        if (v == y) g = (float)(-sums[i] * dscale);  // (p - 1) dloss without the cancellation
        else if (v < Vl) g = expf(to_f(row[v]) - m) * scale;
        row[v] = from_f<T>(g);
    }
}

static void classifier_vocab_max(const floatX *logits, float *rowmax, int N, int Vl, int Vpl) {
    WITH_X(LAUNCH(N, 512, 0, main_stream, classifier_vocab_max_kernel<xt>)((const xt *)logits, rowmax, Vl, Vpl));
    launchCheck();
}
static void classifier_vocab_exp(floatX *logits, float *sums, const float *maxes, int nshards, const int *targets, int N,
                                 int Vl, int Vpl, int v0) {
    WITH_X(LAUNCH(N, 512, 0, main_stream, classifier_vocab_exp_kernel<xt>)((const xt *)logits, sums, maxes, nshards, targets,
                                                                          N, Vl, Vpl, v0));
    launchCheck();
}
static void classifier_vocab_finish(floatX *logits, float *losses, const float *sums, const float *maxes, int nshards,
                                    const int *targets, int N, int Vl, int Vpl, int v0, float dloss) {
    WITH_X(LAUNCH(N, 512, 0, main_stream, classifier_vocab_finish_kernel<xt>)((xt *)logits, losses, sums, maxes, nshards,
                                                                             targets, N, Vl, Vpl, v0, dloss));
    launchCheck();
}

#endif  // CUDA_VOCAB_CUH
