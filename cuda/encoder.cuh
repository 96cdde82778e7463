// cuda/encoder.cuh: the token and position embedding of the CUDA build (train_gpt.cu, called by model.h):
// encoder_forward adds wte and wpe rows, encoder_backward adds the output gradient into both tables in the
// CPU build's order. wpe and dwpe NULL: no position table (the Llama family, backend.h): out = wte[token]. Shapes as
// in cpu/: B batch, T time, C channels.
#ifndef CUDA_ENCODER_CUH
#define CUDA_ENCODER_CUH

#include <limits.h>
#include "common.cuh"

// V consecutive channels a thread (16 bytes where C and the pointers allow).
template <typename T, int V>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (idx >= (long)B * Tn * C) return;
    int c = idx % C, bt = idx / C, t = bt % Tn;
    const XVec<T, V> w = *reinterpret_cast<const XVec<T, V> *>(wte + (long)inp[bt] * C + c);
    if (!wpe) {  // no position table (the Llama family: RoPE in attention instead): out = wte[token]
        *reinterpret_cast<XVec<T, V> *>(out + idx) = w;
        return;
    }
    const XVec<T, V> p = *reinterpret_cast<const XVec<T, V> *>(wpe + (long)t * C + c);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(to_f(w.v[k]) + to_f(p.v[k]));
    *reinterpret_cast<XVec<T, V> *>(out + idx) = o;
}

static void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C) {
    long n = (long)B * T * C;
    WITH_X(with_vec_width<xt>(C % vec16<xt>() == 0 && aligned16(out, wte) && (!wpe || aligned16(wpe)), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(n / V, 256), 256, 0, main_stream, encoder_forward_kernel<xt, V>)((xt *)out, inp, (const xt *)wte, (const xt *)wpe, B, T, C);
    }));
    launchCheck();
}

// dwte: one block per distinct token, its threads over channels, adding that token's positions in
// increasing order (the CPU build's order). The positions are grouped by token on the device: links_kernel
// gives each position the next position holding the same token (or -1) and marks the first one; the wte
// kernel then has one block per first position walk its chain.
__global__ void encoder_links_kernel(int *next, int *first, const int *tokens, int BT) {
    __shared__ int tile[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int mine = i < BT ? tokens[i] : -1;
    int nx = -1, is_first = 1;
    for (int base = 0; base < BT; base += 256) {
        __syncthreads();  // the previous tile is read by every thread
        if (base + (int)threadIdx.x < BT) tile[threadIdx.x] = tokens[base + threadIdx.x];
        __syncthreads();
        const int n = BT - base < 256 ? BT - base : 256;
        for (int k = 0; k < n; k++) {
            if (tile[k] != mine) continue;
            const int j = base + k;
            if (j < i) is_first = 0;
            else if (j > i && nx < 0) nx = j;
        }
    }
    if (i < BT) { next[i] = nx; first[i] = is_first; }
}

// The rows v0 .. v0 + vn - 1 of dwte (--tp's vocabulary shard, cuda/vocab.cuh; 0 and INT_MAX: all of them): a token
// of another rank's rows adds nothing.
template <typename T>
__global__ void encoder_backward_wte_kernel(float *dwte, const T *dout, const int *tokens, const int *next,
                                            const int *first, int C, int v0, int vn) {
    const int i = blockIdx.x, id = tokens[i] - v0;
    if (!first[i] || id < 0 || id >= vn) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = dwte[(long)id * C + c];
        for (int j = i; j >= 0; j = next[j]) s += to_f(dout[(long)j * C + c]);
        dwte[(long)id * C + c] = s;
    }
}

template <typename T>
__global__ void encoder_backward_wpe_kernel(float *dwpe, const T *dout, int B, int Tn, int C) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)Tn * C) return;
    int c = idx % C, t = idx / C;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += to_f(dout[((long)b * Tn + t) * C + c]);
    dwpe[idx] += s;
}

// The token table's part: the links, then one block per distinct token.
static void encoder_backward_wte(float *dwte, const floatX *dout, const int *inp, int BT, int C, int v0, int vn) {
    static int *links = NULL, cap = 0;  // next and first, BT each; grows once, at the first step
    if (BT > cap) {
        if (links) cudaCheck(cudaFree(links));
        cudaCheck(cudaMalloc(&links, (size_t)2 * BT * sizeof(int)));
        cap = BT;
    }
    LAUNCH(ceil_div(BT, 256), 256, 0, main_stream, encoder_links_kernel)(links, links + BT, inp, BT);
    launchCheck();
    WITH_X(LAUNCH(BT, 256, 0, main_stream, encoder_backward_wte_kernel<xt>)(dwte, (const xt *)dout, inp, links, links + BT,
                                                                           C, v0, vn));
    launchCheck();
}

// encoder_backward of the rows v0 .. v0 + vn - 1 of wte (encoder_backward_vocab's shard; encoder_backward's all). dwte
// NULL: the position table's part alone (a pipeline's input end, where the output end adds a tied token table's).
static void encoder_backward_rows(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C,
                                  int v0, int vn) {
    if (dwte) encoder_backward_wte(dwte, dout, inp, B * T, C, v0, vn);
    if (!dwpe) return;  // no position table
    WITH_X(LAUNCH(ceil_div((long)T * C, 256), 256, 0, main_stream, encoder_backward_wpe_kernel<xt>)(dwpe, (const xt *)dout,
                                                                                          B, T, C));
    launchCheck();
}

static void encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C) {
    encoder_backward_rows(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX);
}

#endif  // CUDA_ENCODER_CUH
