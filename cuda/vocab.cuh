// cuda/vocab.cuh: tensor parallelism's vocabulary-parallel kernels (backend.h). The CUDA build does not run --tp > 1
// yet: backend_has_tp says so and run.h refuses the flag at start, naming the CPU build, so the kernels below are
// never reached; each says so if it is. (The CPU build's cpu/vocab.h is the reference a CUDA version follows.)
#ifndef CUDA_VOCAB_CUH
#define CUDA_VOCAB_CUH

#include "common.cuh"

static int backend_has_tp(void) { return 0; }

#define VOCAB_NOT_BUILT(name) internal_fault("%s: --tp is not in the CUDA build (run.h refuses it at start)", name)
static void encoder_forward_vocab(floatX *, const int *, const floatX *, const floatX *, int, int, int, int, int) {
    VOCAB_NOT_BUILT("encoder_forward_vocab");
}
static void encoder_backward_vocab(float *, float *, const floatX *, const int *, int, int, int, int, int) {
    VOCAB_NOT_BUILT("encoder_backward_vocab");
}
static void classifier_vocab_max(const floatX *, float *, int, int, int) { VOCAB_NOT_BUILT("classifier_vocab_max"); }
static void classifier_vocab_exp(floatX *, float *, const float *, int, const int *, int, int, int, int) {
    VOCAB_NOT_BUILT("classifier_vocab_exp");
}
static void classifier_vocab_finish(floatX *, float *, const float *, const float *, int, const int *, int, int, int, int,
                                    float) {
    VOCAB_NOT_BUILT("classifier_vocab_finish");
}

#endif
