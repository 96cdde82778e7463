// cuda/llama_stub.cuh: the Llama family's kernels of backend.h, as stubs. The CUDA build refuses a Llama-family
// model at start ("the CUDA build does not run the Llama family yet: use train_gpt_cpu", run.h), so none of these
// is reached; they exist so that the shared model.h, which calls them for that family, compiles. cuda/llama.cuh
// (the CUDA kernels, a separate issue) replaces this file in train_gpt.cu's includes.
#ifndef CUDA_LLAMA_STUB_CUH
#define CUDA_LLAMA_STUB_CUH
#include "common.cuh"

static void llama_unreachable(const char *what) {
    internal_fault("%s: the CUDA build has no Llama-family kernels yet (the model should have been refused at start)", what);
}
static void rmsnorm_forward(floatX *, float *, const floatX *, const floatX *, int, int, float) { llama_unreachable("rmsnorm_forward"); }
static void rmsnorm_backward(floatX *, float *, const floatX *, const floatX *, const floatX *, const float *, int, int) {
    llama_unreachable("rmsnorm_backward");
}
static void qknorm_forward(floatX *, float *, const floatX *, const floatX *, const floatX *, int, int, int, int, float) {
    llama_unreachable("qknorm_forward");
}
static void qknorm_backward(floatX *, float *, float *, const floatX *, const floatX *, const floatX *, const floatX *,
                            const float *, int, int, int, int) {
    llama_unreachable("qknorm_backward");
}
static void rope_forward(floatX *, const float *, const float *, int, int, int, int, int) { llama_unreachable("rope_forward"); }
static void rope_backward(floatX *, const float *, const float *, int, int, int, int, int) { llama_unreachable("rope_backward"); }
static void swiglu_forward(floatX *, const floatX *, int, int) { llama_unreachable("swiglu_forward"); }
static void swiglu_backward(floatX *, const floatX *, const floatX *, int, int) { llama_unreachable("swiglu_backward"); }
static void attention_gqa_forward(floatX *, float *, const floatX *, int, int, int, int, int) {
    llama_unreachable("attention_gqa_forward");
}
static void attention_gqa_backward(floatX *, const floatX *, const floatX *, const floatX *, const float *, int, int, int,
                                   int, int) {
    llama_unreachable("attention_gqa_backward");
}
static void attention_gqa_decode(floatX *, const floatX *, const floatX *, const floatX *, int, int, int, int) {
    llama_unreachable("attention_gqa_decode");
}

#endif
