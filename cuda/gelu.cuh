// cuda/gelu.cuh: the element-wise kernels of the CUDA build (train_gpt.cu, called by model.h): the MLP's
// activations forward and backward, GELU (tanh approximation) and ReLU², and the residual add.
#ifndef CUDA_GELU_CUH
#define CUDA_GELU_CUH

#include "common.cuh"

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)
// Element-wise kernels take V consecutive values a thread (16 bytes where N and the pointers allow).
template <typename T, int V>
__global__ void gelu_forward_kernel(T *out, const T *inp, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float v = to_f(x.v[k]);
        o.v[k] = from_f<T>(0.5f * v * (1.0f + tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v))));
    }
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

static void gelu_forward(floatX *out, const floatX *inp, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(out, inp), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, gelu_forward_kernel<xt, V>)((xt *)out, (const xt *)inp, N);
    }));
    launchCheck();
}

template <typename T, int V>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i), d = *reinterpret_cast<const XVec<T, V> *>(dout + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float v = to_f(x.v[k]);
        float th = tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v));
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * v * v);
        o.v[k] = from_f<T>(local * to_f(d.v[k]));
    }
    *reinterpret_cast<XVec<T, V> *>(dinp + i) = o;
}

static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(dinp, inp, dout), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, gelu_backward_kernel<xt, V>)((xt *)dinp, (const xt *)inp, (const xt *)dout, N);
    }));
    launchCheck();
}

// ReLU²: out = relu(x)^2, dinp = 2 relu(x) dout (cpu/gelu.h's, in fp32 per element).
template <typename T, int V>
__global__ void relu2_forward_kernel(T *out, const T *inp, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float r = fmaxf(to_f(x.v[k]), 0.0f);
        o.v[k] = from_f<T>(r * r);
    }
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

static void relu2_forward(floatX *out, const floatX *inp, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(out, inp), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, relu2_forward_kernel<xt, V>)((xt *)out, (const xt *)inp, N);
    }));
    launchCheck();
}

template <typename T, int V>
__global__ void relu2_backward_kernel(T *dinp, const T *inp, const T *dout, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(inp + i), d = *reinterpret_cast<const XVec<T, V> *>(dout + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(2.0f * fmaxf(to_f(x.v[k]), 0.0f) * to_f(d.v[k]));
    *reinterpret_cast<XVec<T, V> *>(dinp + i) = o;
}

static void relu2_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(dinp, inp, dout), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, relu2_backward_kernel<xt, V>)((xt *)dinp, (const xt *)inp, (const xt *)dout, N);
    }));
    launchCheck();
}

template <typename T, int V>
__global__ void residual_forward_kernel(T *out, const T *a, const T *b, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(a + i), y = *reinterpret_cast<const XVec<T, V> *>(b + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(to_f(x.v[k]) + to_f(y.v[k]));
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

static void residual_forward(floatX *out, const floatX *a, const floatX *b, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(out, a, b), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, residual_forward_kernel<xt, V>)((xt *)out, (const xt *)a, (const xt *)b, N);
    }));
    launchCheck();
}

#endif  // CUDA_GELU_CUH
