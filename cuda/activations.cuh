// cuda/activations.cuh: the element-wise kernels of the CUDA build (train_gpt.cu, called by model.h): the MLP's
// activations forward and backward, GELU (tanh approximation), ReLU², SwiGLU and GeGLU, and the residual add (with
// --tp's row-parallel bias).
#ifndef CUDA_ACTIVATIONS_CUH
#define CUDA_ACTIVATIONS_CUH

#include "common.cuh"

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2 / pi)

// The element-wise maps, each a functor of one value (x) or two (x and the output gradient d, or a and b).
struct GeluForward {
    __device__ float operator()(float v) const {
        return 0.5f * v * (1.0f + tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v)));
    }
};
// GELU's derivative at v (cpu/activations.h's gelu_tanh_grad): GELU's backward and GeGLU's gate.
__device__ inline float gelu_tanh_grad(float v) {
    float th = tanhf(GELU_SCALING_FACTOR * (v + 0.044715f * v * v * v));
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * v * v);
}
struct GeluBackward {
    __device__ float operator()(float v, float d) const { return gelu_tanh_grad(v) * d; }
};
// ReLU²: out = relu(x)^2, dinp = 2 relu(x) dout (cpu/activations.h's, in fp32 per element).
struct Relu2Forward {
    __device__ float operator()(float x) const {
        const float r = fmaxf(x, 0.0f);
        return r * r;
    }
};
struct Relu2Backward {
    __device__ float operator()(float x, float d) const { return 2.0f * fmaxf(x, 0.0f) * d; }
};
struct ResidualAdd {
    __device__ float operator()(float a, float b) const { return a + b; }
};

// out = F(a) element-wise, V consecutive values a thread (16 bytes where N and the pointers allow); each value
// through float and rounded once to T.
template <typename T, int V, typename F>
__global__ void elementwise_kernel(T *out, const T *a, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(a + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(F()(to_f(x.v[k])));
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

// out = F(a, b) element-wise, as elementwise_kernel.
template <typename T, int V, typename F>
__global__ void elementwise2_kernel(T *out, const T *a, const T *b, long N) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= N) return;
    const XVec<T, V> x = *reinterpret_cast<const XVec<T, V> *>(a + i), y = *reinterpret_cast<const XVec<T, V> *>(b + i);
    XVec<T, V> o;
#pragma unroll
    for (int k = 0; k < V; k++) o.v[k] = from_f<T>(F()(to_f(x.v[k]), to_f(y.v[k])));
    *reinterpret_cast<XVec<T, V> *>(out + i) = o;
}

template <typename F>
static void elementwise(floatX *out, const floatX *a, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(out, a), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, elementwise_kernel<xt, V, F>)((xt *)out, (const xt *)a, N);
    }));
    launchCheck();
}

template <typename F>
static void elementwise2(floatX *out, const floatX *a, const floatX *b, long N) {
    WITH_X(with_vec_width<xt>(N % vec16<xt>() == 0 && aligned16(out, a, b), [&](auto width) {
        constexpr int V = decltype(width)::value;
        LAUNCH(ceil_div(N / V, 256), 256, 0, main_stream, elementwise2_kernel<xt, V, F>)((xt *)out, (const xt *)a, (const xt *)b, N);
    }));
    launchCheck();
}

static void gelu_forward(floatX *out, const floatX *inp, long N) { elementwise<GeluForward>(out, inp, N); }
static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    elementwise2<GeluBackward>(dinp, inp, dout, N);
}
static void relu2_forward(floatX *out, const floatX *inp, long N) { elementwise<Relu2Forward>(out, inp, N); }
static void relu2_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N) {
    elementwise2<Relu2Backward>(dinp, inp, dout, N);
}
static void residual_forward(floatX *out, const floatX *a, const floatX *b, long N) {
    elementwise2<ResidualAdd>(out, a, b, N);
}

// out = res + (x + bias[column]) (cpu/activations.h's), rounded once.
template <typename T>
__global__ void residual_bias_kernel(T *out, const T *res, const T *x, const T *bias, int N, int C) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)N * C) return;
    out[idx] = from_f<T>(to_f(res[idx]) + (to_f(x[idx]) + to_f(bias[idx % C])));
}
static void residual_bias_forward(floatX *out, const floatX *res, const floatX *x, const floatX *bias, int N, int C) {
    WITH_X(LAUNCH(ceil_div((long)N * C, 256), 256, 0, main_stream, residual_bias_kernel<xt>)((xt *)out, (const xt *)res,
                                                                                           (const xt *)x, (const xt *)bias, N, C));
    launchCheck();
}

// ----------------------------------------------------------------------------
// The gated MLPs over the packed fc output inp (N, 2H) = (up | gate): out (N, H) = act(gate) * up, in one pass;
// the gate a functor (cpu/activations.h's glu_gate and glu_gate_grad, the same arithmetic): value(g) forward,
// grad(g, val, d) the value and the derivative backward.
struct SiluGate {  // SwiGLU (Llama's): silu(g) = g sigmoid(g), silu' = s (1 + g (1 - s)) from one sigmoid s
    __device__ float value(float g) const { return g / (1.0f + expf(-g)); }
    __device__ void grad(float g, float &val, float &d) const {
        const float s = 1.0f / (1.0f + expf(-g));
        val = g * s;
        d = s * (1.0f + g * (1.0f - s));
    }
};
struct GeluTanhGate {  // GeGLU (Gemma's): GELU's tanh approximation
    __device__ float value(float g) const { return GeluForward()(g); }
    __device__ void grad(float g, float &val, float &d) const {
        val = GeluForward()(g);
        d = gelu_tanh_grad(g);
    }
};

template <typename Gate, typename T>
__global__ void glu_forward_kernel(T *out, const T *inp, int N, int H) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)N * H) return;
    const long i = idx / H;
    const int j = (int)(idx % H);
    const T *up = inp + i * 2 * H;
    out[idx] = from_f<T>(Gate().value(to_f(up[H + j])) * to_f(up[j]));
}

// dinp (N, 2H) overwritten: d up = dout act(g), d gate = (dout up) act'(g).
template <typename Gate, typename T>
__global__ void glu_backward_kernel(T *dinp, const T *dout, const T *inp, int N, int H) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)N * H) return;
    const long i = idx / H;
    const int j = (int)(idx % H);
    const T *up = inp + i * 2 * H;
    T *dup = dinp + i * 2 * H;
    const float g = to_f(up[H + j]), u = to_f(up[j]), d = to_f(dout[idx]);
    float val, dg;
    Gate().grad(g, val, dg);
    dup[j] = from_f<T>(d * val);
    dup[H + j] = from_f<T>((d * u) * dg);
}

template <typename Gate>
static void glu_forward(floatX *out, const floatX *inp, int N, int H) {
    WITH_X(LAUNCH(ceil_div((long)N * H, 256), 256, 0, main_stream, glu_forward_kernel<Gate, xt>)((xt *)out, (const xt *)inp, N, H));
    launchCheck();
}

template <typename Gate>
static void glu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H) {
    WITH_X(LAUNCH(ceil_div((long)N * H, 256), 256, 0, main_stream, glu_backward_kernel<Gate, xt>)((xt *)dinp, (const xt *)dout,
                                                                                                (const xt *)inp, N, H));
    launchCheck();
}

static void swiglu_forward(floatX *out, const floatX *inp, int N, int H) { glu_forward<SiluGate>(out, inp, N, H); }
static void swiglu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H) {
    glu_backward<SiluGate>(dinp, dout, inp, N, H);
}
static void geglu_forward(floatX *out, const floatX *inp, int N, int H) { glu_forward<GeluTanhGate>(out, inp, N, H); }
static void geglu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H) {
    glu_backward<GeluTanhGate>(dinp, dout, inp, N, H);
}

#endif  // CUDA_ACTIVATIONS_CUH
