// dev/cuda/kernels.cu: every kernel of ./train_gpt against the CPU build's kernel (cpu/, the
// reference), in each precision, and a benchmark of each at GPT-2 124M's shapes. Built and run by
// `make test-gpu` (check) and `make bench` (bench):
//   make dev/cuda/kernels && ./dev/cuda/kernels check     # PASS/FAIL per kernel and precision
//   ./dev/cuda/kernels check llama                         # only the Llama family's (cuda/llama.cuh, GQA)
//                                                          # (--tp's vocabulary-parallel kernels: kernels_vocab.h)
//   ./dev/cuda/kernels bench                               # ms and GB/s or TFLOP/s per kernel, bf16
//                                                          # (fused epilogues and staged classifier beside the unfused)
// Inputs are random; in bf16 and fp16 they are rounded to that precision first, so both sides see
// the same numbers and the difference is the GPU's rounding of outputs and intermediates.
#include "cuda/common.cuh"
#include "cuda/encoder.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/attention.cuh"
#include "cuda/gelu.cuh"
#include "cuda/classifier.cuh"
#include "cuda/backend.cuh"
#include "cuda/llama.cuh"
#include "cuda/decode.cuh"
#include <omp.h>
// The CPU build's kernels and backend (cpu/), the reference. The two builds implement one contract (backend.h),
// so their functions have the same names: the CPU's are put in a namespace of their own and called as
// cpu::matmul_forward beside the CUDA build's matmul_forward. What cpu/ includes (the C library, omp.h, utils.h,
// gpt2.h) is already included above, so only cpu/'s own definitions land in the namespace; the two macros both
// define (GELU_SCALING_FACTOR, NORM_CHUNK) are the same constants, which C++ allows.
namespace cpu {
#include "cpu/encoder.h"
#include "cpu/layernorm.h"
#include "cpu/matmul.h"
#include "cpu/attention.h"
#include "cpu/gelu.h"
#include "cpu/classifier.h"
#include "cpu/backend.h"
}
// The Llama family's CPU reference kernels (check_llama below), in the same namespace (a no-op where train_gpt.c
// already brought them in).
namespace cpu {
#include "cpu/llama.h"
}

static uint64_t rng_state = 42;
static float frand(void) { return random_f32(&rng_state) * 2.0f - 1.0f; }
static int fails = 0, passes = 0;

// Host float <-> device floatX of the current precision.
static float round_x(float x) {
    if (x_prec == PREC_BF16) return __bfloat162float(__float2bfloat16(x));
    if (x_prec == PREC_FP16) return __half2float(__float2half(x));
    return x;
}
static floatX *to_dev_x(const float *h, size_t n) {
    void *d;
    cudaCheck(cudaMalloc(&d, n * x_bytes + 16));
    if (x_prec == PREC_FP32) { cudaCheck(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice)); return (floatX *)d; }
    uint16_t *tmp = (uint16_t *)mallocCheck(n * 2);
    for (size_t i = 0; i < n; i++) {
        if (x_prec == PREC_BF16) { bf16 b = __float2bfloat16(h[i]); memcpy(&tmp[i], &b, 2); }
        else { __half b = __float2half(h[i]); memcpy(&tmp[i], &b, 2); }
    }
    cudaCheck(cudaMemcpy(d, tmp, n * 2, cudaMemcpyHostToDevice));
    free(tmp);
    return (floatX *)d;
}
static void from_dev_x(float *h, const floatX *d, size_t n) {
    if (x_prec == PREC_FP32) { cudaCheck(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost)); return; }
    uint16_t *tmp = (uint16_t *)mallocCheck(n * 2);
    cudaCheck(cudaMemcpy(tmp, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        if (x_prec == PREC_BF16) { bf16 b; memcpy((void *)&b, &tmp[i], 2); h[i] = __bfloat162float(b); }
        else { __half b; memcpy((void *)&b, &tmp[i], 2); h[i] = __half2float(b); }
    }
    free(tmp);
}
static float *to_dev_f(const float *h, size_t n) {
    float *d;
    cudaCheck(cudaMalloc(&d, n * 4 + 16));
    cudaCheck(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    return d;
}
static void from_dev_f(float *h, const float *d, size_t n) { cudaCheck(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost)); }
static float *rand_host(size_t n, float scale) {
    float *h = (float *)mallocCheck(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = round_x(frand() * scale);
    return h;
}

// max |a - b| / max |b|: errors relative to the tensor's scale, as test_gpt2.c measures them
static double rel_err(const float *a, const float *b, size_t n) {
    double worst = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) { worst = fmax(worst, fabs((double)a[i] - b[i])); scale = fmax(scale, fabs((double)b[i])); }
    return worst / scale;
}
static const char *prec_name(void) { return x_prec == PREC_BF16 ? "bf16" : x_prec == PREC_FP16 ? "fp16" : "fp32"; }
// Tolerances, about three times the worst error an H100 showed over all kernels and shapes
// (2026-11-22: fp32 5.9e-7, bf16 3.5e-3, fp16 4.3e-4). bf16 keeps 8 mantissa bits (2^-9 ~ 2e-3 a
// rounding), fp16 11 bits (~2.5e-4), and a kernel's output carries a few chained roundings; a looser
// bound lets real bugs through (at 3e-2, bf16 passed with a barrier missing from attention's dQ).
static double tol(void) { return x_prec == PREC_BF16 ? 1e-2 : x_prec == PREC_FP16 ? 1.5e-3 : 1e-5; }
static void expect(const char *what, double err, double limit) {
    int ok = err <= limit && err == err;
    printf("%s %-5s %-44s max error %.2e (limit %.1e)\n", ok ? "PASS" : "FAIL", prec_name(), what, err, limit);
    ok ? passes++ : fails++;
}

// What the checks of one shape share: its sizes, the tokens, and the tensors that later
// checks reuse (the encoder's upstream gradient; layernorm's input, which is also the matmul's
// input, and its host scratch). Nothing is freed: the program exits after a few shapes.
typedef struct {
    int B, T, C, NH, V, Vp;
    size_t BT, n;                 // B * T rows, n = BT * C
    int *tok, *dtok;              // host and device tokens
    float *dout; floatX *ddout;   // upstream gradient (n), from check_encoder
    float *h1; floatX *x1;        // layernorm's input (n), from check_layernorm
    float *r1, *g1;               // host scratch of n floats, from check_layernorm
} KernelCase;

static void check_encoder(KernelCase *k) {
    int B = k->B, T = k->T, C = k->C, Vp = k->Vp; size_t BT = k->BT; int *tok = k->tok, *dtok = k->dtok;
    // encoder forward and backward
    float *wte = rand_host((size_t)Vp * C, 1.0f), *wpe = rand_host((size_t)T * C, 1.0f);
    floatX *dwte_x = to_dev_x(wte, (size_t)Vp * C), *dwpe_x = to_dev_x(wpe, (size_t)T * C);
    size_t n = BT * C;
    float *r1 = (float *)mallocCheck(n * 4), *g1 = (float *)mallocCheck(n * 4);
    floatX *x1 = to_dev_x(r1, n);
    encoder_forward(x1, dtok, dwte_x, dwpe_x, B, T, C);
    from_dev_x(g1, x1, n);
    cpu::encoder_forward(r1, tok, wte, wpe, B, T, C);
    expect("encoder_forward", rel_err(g1, r1, n), tol());
    k->dout = rand_host(n, 1.0f);
    float *gw = (float *)callocCheck((size_t)Vp * C, 4), *gp = (float *)callocCheck((size_t)T * C, 4);
    k->ddout = to_dev_x(k->dout, n);
    float *dgw = to_dev_f(gw, (size_t)Vp * C), *dgp = to_dev_f(gp, (size_t)T * C);
    encoder_backward(dgw, dgp, k->ddout, dtok, B, T, C);
    cpu::encoder_backward(gw, gp, k->dout, tok, B, T, C);
    float *back = (float *)mallocCheck((size_t)Vp * C * 4);
    from_dev_f(back, dgw, (size_t)Vp * C);
    expect("encoder_backward dwte", rel_err(back, gw, (size_t)Vp * C), 1e-5);  // fp32 sums of the same inputs, same order
    from_dev_f(back, dgp, (size_t)T * C);
    expect("encoder_backward dwpe", rel_err(back, gp, (size_t)T * C), 1e-5);
}

static void check_layernorm(KernelCase *k) {
    int C = k->C; size_t BT = k->BT, n = k->n;
    // layernorm forward and backward
    float *h1 = k->h1 = rand_host(n, 2.0f), *h2 = rand_host(C, 1.0f), *h3 = rand_host(C, 1.0f);
    floatX *x1 = k->x1 = to_dev_x(h1, n), *x2 = to_dev_x(h2, C), *x3 = to_dev_x(h3, C);
    floatX *xo = to_dev_x(h1, n);
    float *mean, *rstd, *hm = (float *)mallocCheck(BT * 4), *hr = (float *)mallocCheck(BT * 4);
    cudaCheck(cudaMalloc(&mean, BT * 4)); cudaCheck(cudaMalloc(&rstd, BT * 4));
    layernorm_forward(xo, mean, rstd, x1, x2, x3, (int)BT, C);
    float *r1 = k->r1 = (float *)mallocCheck(n * 4), *g1 = k->g1 = (float *)mallocCheck(n * 4);
    cpu::layernorm_forward(r1, hm, hr, h1, h2, h3, (int)BT, C);
    from_dev_x(g1, xo, n);
    expect("layernorm_forward", rel_err(g1, r1, n), tol());
    float *dw = (float *)callocCheck(C, 4), *db = (float *)callocCheck(C, 4), *di = rand_host(n, 1.0f);
    float *ddw = to_dev_f(dw, C), *ddb = to_dev_f(db, C);
    floatX *ddi = to_dev_x(di, n);
    layernorm_backward(ddi, ddw, ddb, k->ddout, x1, x2, mean, rstd, (int)BT, C);
    cpu::layernorm_backward(di, dw, db, k->dout, h1, h2, hm, hr, (int)BT, C);
    from_dev_x(g1, ddi, n);
    expect("layernorm_backward dinp (accumulated)", rel_err(g1, di, n), tol());
    float *hb = (float *)mallocCheck(C * 4);
    from_dev_f(hb, ddw, C);
    expect("layernorm_backward dweight", rel_err(hb, dw, C), tol());
    from_dev_f(hb, ddb, C);
    expect("layernorm_backward dbias", rel_err(hb, db, C), tol());
}

static void check_matmul(KernelCase *k) {
    int C = k->C; size_t BT = k->BT, n = k->n; float *h1 = k->h1, *g1 = k->g1; floatX *x1 = k->x1;
    // matmul forward and backward, with bias (the qkv shape)
    int OC = 3 * C;
    float *w = rand_host((size_t)OC * C, 0.1f), *bias = rand_host(OC, 0.1f);
    floatX *dw_x = to_dev_x(w, (size_t)OC * C), *db_x = to_dev_x(bias, OC), *dout3;
    float *o = (float *)mallocCheck(BT * OC * 4), *go = (float *)mallocCheck(BT * OC * 4);
    floatX *dox = to_dev_x(o, BT * OC);
    matmul_forward(dox, x1, dw_x, db_x, (int)BT, C, OC);
    cpu::matmul_forward(o, h1, w, bias, (int)BT, C, OC);
    from_dev_x(go, dox, BT * OC);
    expect("matmul_forward (+ bias epilogue)", rel_err(go, o, BT * OC), tol());
    // the bias gradient starts nonzero: it must be added to (cuBLASLt's BGRADB overwrites its output)
    float *dO = rand_host(BT * OC, 0.1f), *dinp = (float *)mallocCheck(n * 4), *dW = (float *)callocCheck((size_t)OC * C, 4),
          *dB = rand_host(OC, 1.0f), *dB0 = (float *)mallocCheck(OC * 4);
    memcpy(dB0, dB, OC * 4);
    dout3 = to_dev_x(dO, BT * OC);
    floatX *ddinp = to_dev_x(dinp, n);
    float *ddW = to_dev_f(dW, (size_t)OC * C), *ddB = to_dev_f(dB, OC), *ddB2 = to_dev_f(dB, OC);
    matmul_backward(ddinp, ddW, ddB, dout3, x1, dw_x, (int)BT, C, OC);
    cpu::matmul_backward(dinp, dW, dB, dO, h1, w, (int)BT, C, OC);
    from_dev_x(g1, ddinp, n);
    expect("matmul_backward dinp", rel_err(g1, dinp, n), tol());
    float *hW = (float *)mallocCheck((size_t)OC * C * 4);
    from_dev_f(hW, ddW, (size_t)OC * C);
    expect("matmul_backward dweight (fp32 out)", rel_err(hW, dW, (size_t)OC * C), tol());
    float *hB = (float *)mallocCheck(OC * 4);
    from_dev_f(hB, ddB, OC);
    expect(fuse_bgrad ? "matmul_backward dbias (BGRADB epilogue, added)" : "matmul_backward dbias (column_sums)",
           rel_err(hB, dB, OC), tol());
    // and the other way (TRAIN_GPT_BGRAD), onto the same starting gradient
    fuse_bgrad = !fuse_bgrad;
    matmul_backward(ddinp, ddW, ddB2, dout3, x1, dw_x, (int)BT, C, OC);
    from_dev_f(hB, ddB2, OC);
    expect(fuse_bgrad ? "matmul_backward dbias (BGRADB epilogue, added)" : "matmul_backward dbias (column_sums)",
           rel_err(hB, dB, OC), tol());
    fuse_bgrad = !fuse_bgrad;
    free(dB0);
}

// How far a fused epilogue may move off the two kernels it replaces, relative to the tensor's scale: the fused
// path rounds the fp32 result once, the separate one rounds the matmul's output to floatX first and its own
// output again. Each rounding is at most half an ulp of floatX (2^-8 relative in bf16, 2^-11 in fp16, 2^-24 in
// fp32), and GELU's slope is under 1.13, so |fused - separate| <= (1.13 + 1 + 1) / 2 ulp of the largest value:
// 1.6 ulp, taken as 2 (2^-6 in bf16, 2^-9 in fp16). fp32's difference is the order of the sums (a GPU may pick
// another algorithm for another epilogue): its kernel tolerance. Measured on the emulator (2026-11-24, every
// shape): bf16 7.1e-3, fp16 9.2e-4, fp32 1.3e-7; the fused paths against the CPU build are as close as the
// separate ones (bf16 3.2e-3 vs 3.3e-3).
static double fused_bound(void) {
    return x_prec == PREC_BF16 ? 2 * 0x1p-7 : x_prec == PREC_FP16 ? 2 * 0x1p-10 : 1e-5;
}

// The matmuls with GELU or the residual in cuBLASLt's epilogue (TRAIN_GPT_GELU_FUSION, TRAIN_GPT_RESIDUAL_FUSION)
// against the CPU build's two kernels (cpu/matmul.h's matmul_forward_gelu, ... are them), at the fc, fc projection
// and attention projection shapes; and against the CUDA build's own two kernels, within fused_bound().
static void check_matmul_fused(KernelCase *k) {
    int C = k->C, IC = 4 * C; size_t BT = k->BT, n = k->n, n4 = BT * IC; float *h1 = k->h1; floatX *x1 = k->x1;
    float *w = rand_host((size_t)IC * C, 0.1f), *bias = rand_host(IC, 0.1f), *w2 = rand_host((size_t)IC * C, 0.1f);
    floatX *dw = to_dev_x(w, (size_t)IC * C), *db = to_dev_x(bias, IC), *dw2 = to_dev_x(w2, (size_t)IC * C);
    float *pre = (float *)mallocCheck(n4 * 4), *out = (float *)mallocCheck(n4 * 4), *g = (float *)mallocCheck(n4 * 4),
          *g2 = (float *)mallocCheck(n4 * 4);
    floatX *dpre = to_dev_x(pre, n4), *dout = to_dev_x(out, n4), *dpre2 = to_dev_x(pre, n4), *dout2 = to_dev_x(out, n4);
    matmul_forward_gelu(dout, dpre, x1, dw, db, (int)BT, C, IC);
    cpu::matmul_forward_gelu(out, pre, h1, w, bias, (int)BT, C, IC);
    from_dev_x(g, dpre, n4);
    expect("matmul_forward_gelu: GELU's input (aux)", rel_err(g, pre, n4), tol());
    from_dev_x(g, dout, n4);
    expect("matmul_forward_gelu (GELU_AUX_BIAS epilogue)", rel_err(g, out, n4), tol());
    matmul_forward(dpre2, x1, dw, db, (int)BT, C, IC);
    gelu_forward(dout2, dpre2, (long)n4);
    from_dev_x(g2, dout2, n4);
    expect("matmul_forward_gelu vs matmul + gelu (rounding)", rel_err(g, g2, n4), fused_bound());
    // the fc projection's backward through GELU: inp = the GELU output above, dout the upstream gradient
    float *dinp = (float *)mallocCheck(n4 * 4), *dW = rand_host((size_t)IC * C, 1.0f), *dB = rand_host(C, 1.0f);
    float *ddW = to_dev_f(dW, (size_t)IC * C), *ddB = to_dev_f(dB, C);
    floatX *ddinp = to_dev_x(dinp, n4), *ddinp2 = to_dev_x(dinp, n4), *ddg = to_dev_x(dinp, n4);
    matmul_backward_dgelu(ddinp, ddW, ddB, k->ddout, dout, dw2, dpre, (int)BT, IC, C);
    cpu::matmul_backward_dgelu(dinp, dW, dB, k->dout, out, w2, pre, (int)BT, IC, C);
    from_dev_x(g, ddinp, n4);
    expect("matmul_backward_dgelu dinp (DGELU epilogue)", rel_err(g, dinp, n4), tol());
    float *hW = (float *)mallocCheck((size_t)IC * C * 4);
    from_dev_f(hW, ddW, (size_t)IC * C);
    expect("matmul_backward_dgelu dweight", rel_err(hW, dW, (size_t)IC * C), tol());
    from_dev_f(hW, ddB, C);
    expect("matmul_backward_dgelu dbias", rel_err(hW, dB, C), tol());
    float *scratch_w = to_dev_f(dW, (size_t)IC * C);
    matmul_backward(ddg, scratch_w, NULL, k->ddout, dout, dw2, (int)BT, IC, C);
    gelu_backward(ddinp2, dpre, ddg, (long)n4);
    from_dev_x(g2, ddinp2, n4);
    expect("matmul_backward_dgelu vs matmul + gelu_backward (rounding)", rel_err(g, g2, n4), fused_bound());
    // the attention projection and the residual: out = res + inp @ w^T + b
    float *res = rand_host(n, 1.0f), *o = (float *)mallocCheck(n * 4);
    floatX *dres = to_dev_x(res, n), *dox = to_dev_x(o, n), *dox2 = to_dev_x(o, n), *dproj = to_dev_x(o, n);
    matmul_forward_residual(dox, dres, x1, dw, db, (int)BT, C, C);
    cpu::matmul_forward_residual(o, res, h1, w, bias, (int)BT, C, C);
    from_dev_x(g, dox, n);
    expect("matmul_forward_residual (beta = 1 onto the residual)", rel_err(g, o, n), tol());
    matmul_forward(dproj, x1, dw, db, (int)BT, C, C);
    residual_forward(dox2, dres, dproj, (long)n);
    from_dev_x(g2, dox2, n);
    expect("matmul_forward_residual vs matmul + residual (rounding)", rel_err(g, g2, n), fused_bound());
}

static void check_attention(KernelCase *k) {
    int B = k->B, T = k->T, C = k->C, NH = k->NH, OC = 3 * C; size_t BT = k->BT, n = k->n;
    float *h1 = k->h1, *r1 = k->r1, *g1 = k->g1, *dout = k->dout; floatX *ddout = k->ddout;
    // attention forward and backward (qkv from the matmul's shape)
    float *qkv = rand_host(BT * OC, 1.0f), *att = (float *)mallocCheck((size_t)B * NH * T * T * 4);
    floatX *dqkv_in = to_dev_x(qkv, BT * OC), *datty = to_dev_x(h1, n);
    float *lse;
    cudaCheck(cudaMalloc(&lse, (size_t)B * NH * T * 4));
    attention_forward(datty, lse, dqkv_in, B, T, C, NH);
    cpu::attention_forward(r1, att, qkv, B, T, C, NH);
    from_dev_x(g1, datty, n);
    expect("attention_forward (flash)", rel_err(g1, r1, n), tol());
    float *dq = (float *)mallocCheck(BT * OC * 4), *gq = (float *)mallocCheck(BT * OC * 4);
    floatX *ddq = to_dev_x(dq, BT * OC);
    attention_backward(ddq, ddout, dqkv_in, datty, lse, B, T, C, NH);
    cpu::attention_backward(dq, dout, qkv, r1, att, B, T, C, NH);
    from_dev_x(gq, ddq, BT * OC);
    expect("attention_backward dqkv (flash)", rel_err(gq, dq, BT * OC), tol());
}

static void check_gelu_residual(KernelCase *k) {
    size_t BT = k->BT; int C = k->C; float *h1, *h2, *r1, *g1; floatX *x1, *x2, *x3;
    // gelu, residual
    size_t n4 = BT * 4 * C;
    h1 = rand_host(n4, 3.0f); r1 = (float *)mallocCheck(n4 * 4); g1 = (float *)mallocCheck(n4 * 4);
    x1 = to_dev_x(h1, n4); x2 = to_dev_x(h1, n4);
    gelu_forward(x2, x1, n4);
    cpu::gelu_forward(r1, h1, n4);
    from_dev_x(g1, x2, n4);
    expect("gelu_forward", rel_err(g1, r1, n4), tol());
    h2 = rand_host(n4, 1.0f); x3 = to_dev_x(h2, n4);
    gelu_backward(x2, x1, x3, n4);
    cpu::gelu_backward(r1, h1, h2, n4);
    from_dev_x(g1, x2, n4);
    expect("gelu_backward", rel_err(g1, r1, n4), tol());
    relu2_forward(x2, x1, n4);  // ReLU² (--mlp relu2): the same elementwise shape
    cpu::relu2_forward(r1, h1, n4);
    from_dev_x(g1, x2, n4);
    expect("relu2_forward", rel_err(g1, r1, n4), tol());
    relu2_backward(x2, x1, x3, n4);
    cpu::relu2_backward(r1, h1, h2, n4);
    from_dev_x(g1, x2, n4);
    expect("relu2_backward", rel_err(g1, r1, n4), tol());
    residual_forward(x2, x1, x3, n4);
    cpu::residual_forward(r1, h1, h2, n4);
    from_dev_x(g1, x2, n4);
    expect("residual_forward", rel_err(g1, r1, n4), tol());
}

static void check_classifier(KernelCase *k) {
    int V = k->V, Vp = k->Vp; size_t BT = k->BT; int *tok = k->tok, *dtok = k->dtok; float *h1, *g1; floatX *x1;
    // classifier: losses and dlogits in place
    size_t nl = BT * Vp;
    h1 = rand_host(nl, 4.0f); x1 = to_dev_x(h1, nl);
    float *losses, *hl = (float *)mallocCheck(BT * 4), *gl = (float *)mallocCheck(BT * 4);
    cudaCheck(cudaMalloc(&losses, BT * 4));
    classifier_forward_backward(x1, losses, dtok, (int)BT, V, Vp, 1.0f / BT);
    cpu::classifier_forward_backward(h1, hl, tok, (int)BT, V, Vp, 1.0f / BT);
    from_dev_f(gl, losses, BT);
    expect("classifier losses", rel_err(gl, hl, BT), x_prec == PREC_FP32 ? 1e-5 : 1e-3);
    g1 = (float *)mallocCheck(nl * 4);
    from_dev_x(g1, x1, nl);
    expect("classifier dlogits (in place)", rel_err(g1, h1, nl), tol());
    // the row staged in shared memory or read twice from global memory (TRAIN_GPT_CLASSIFIER_STAGED): the same bits
    float *h2 = rand_host(nl, 4.0f), *g2 = (float *)mallocCheck(nl * 4), *gl2 = (float *)mallocCheck(BT * 4);
    floatX *xa = to_dev_x(h2, nl), *xb = to_dev_x(h2, nl);
    classifier_staged = 1;
    classifier_forward_backward(xa, losses, dtok, (int)BT, V, Vp, 1.0f / BT);
    from_dev_f(gl, losses, BT);
    classifier_staged = 0;
    classifier_forward_backward(xb, losses, dtok, (int)BT, V, Vp, 1.0f / BT);
    from_dev_f(gl2, losses, BT);
    classifier_staged = 1;
    from_dev_x(g1, xa, nl);
    from_dev_x(g2, xb, nl);
    expect("classifier staged in shared memory vs not (bits)", fmax(rel_err(g1, g2, nl), rel_err(gl, gl2, BT)), 0.0);
}

// ---- the Llama family: cuda/llama.cuh and grouped-query attention against cpu/llama.h ----
// Kept apart from the GPT-2 checks above. Inputs rounded to the precision first, as above; tolerances tol().

static float *zeros_dev_f(size_t n) { float *d; cudaCheck(cudaMalloc(&d, n * 4 + 16)); cudaCheck(cudaMemset(d, 0, n * 4)); return d; }

// RMSNorm (the residual stream's norm) forward and backward at N rows of C; dinp and dweight start nonzero: the
// backward adds into both.
static void check_rmsnorm(int N, int C) {
    size_t n = (size_t)N * C;
    float *x = rand_host(n, 2.0f), *w = rand_host(C, 1.0f), *out = (float *)mallocCheck(n * 4), *g = (float *)mallocCheck(n * 4);
    float *rs = (float *)mallocCheck(N * 4), *grs = (float *)mallocCheck(N * 4);
    floatX *dx = to_dev_x(x, n), *dw = to_dev_x(w, C), *dout_x = to_dev_x(x, n);
    float *drs = zeros_dev_f(N);
    rmsnorm_forward(dout_x, drs, dx, dw, N, C, 1e-5f);
    cpu::rmsnorm_forward(out, rs, x, w, N, C, 1e-5f);
    from_dev_x(g, dout_x, n);
    expect("rmsnorm_forward", rel_err(g, out, n), tol());
    from_dev_f(grs, drs, N);
    expect("rmsnorm_forward rstd", rel_err(grs, rs, N), 1e-5);  // fp32 statistics of the same inputs
    float *d = rand_host(n, 1.0f), *di = rand_host(n, 1.0f), *dW = rand_host(C, 1.0f);
    floatX *dd = to_dev_x(d, n), *ddi = to_dev_x(di, n);
    float *ddW = to_dev_f(dW, C);
    rmsnorm_backward(ddi, ddW, dd, dx, dw, drs, N, C);
    cpu::rmsnorm_backward(di, dW, d, x, w, rs, N, C);
    from_dev_x(g, ddi, n);
    expect("rmsnorm_backward dinp (accumulated)", rel_err(g, di, n), tol());
    float *hw = (float *)mallocCheck(C * 4);
    from_dev_f(hw, ddW, C);
    expect("rmsnorm_backward dweight (added)", rel_err(hw, dW, C), tol());
}

// RoPE's angle tables on the host by the CPU build's rope_table (cpu/llama.h's here; where arch.h holds it, outside
// namespace cpu: the using-directive finds either), with Llama 3.1's scaling and an original_max_pos small enough
// that the checks' positions cross all three bands.
static void host_rope_table(float *cos_t, float *sin_t, int maxT, int hd) {
    using namespace cpu;
    RopeParams p = {1, 500000.0f, 8.0f, 1.0f, 4.0f, 16};
    rope_table(cos_t, sin_t, maxT, hd, &p);
}

// QK-norm and RoPE on a packed qkv of BT = B T rows, (NH + 2 KV) hd wide; SwiGLU at H hidden units.
static void check_llama_elementwise(int B, int T, int NH, int KV, int hd, int H) {
    const int BT = B * T, nk = NH + KV;
    const size_t n = (size_t)BT * (NH + 2 * KV) * hd, nr = (size_t)BT * nk;
    float *x = rand_host(n, 2.0f), *qw = rand_host(hd, 1.0f), *kw = rand_host(hd, 1.0f);
    float *out = (float *)mallocCheck(n * 4), *g = (float *)mallocCheck(n * 4), *rs = (float *)mallocCheck(nr * 4);
    floatX *dx = to_dev_x(x, n), *dqw = to_dev_x(qw, hd), *dkw = to_dev_x(kw, hd), *dout_x = to_dev_x(x, n);
    float *drs = zeros_dev_f(nr);
    qknorm_forward(dout_x, drs, dx, dqw, dkw, BT, NH, KV, hd, 1e-6f);
    cpu::qknorm_forward(out, rs, x, qw, kw, BT, NH, KV, hd, 1e-6f);
    from_dev_x(g, dout_x, n);
    expect("qknorm_forward", rel_err(g, out, n), tol());
    float *d = rand_host(n, 1.0f), *di = (float *)mallocCheck(n * 4), *dq = rand_host(hd, 1.0f), *dk = rand_host(hd, 1.0f);
    floatX *dd = to_dev_x(d, n), *ddi = to_dev_x(x, n);  // dinp starts as something else: it is overwritten
    float *ddq = to_dev_f(dq, hd), *ddk = to_dev_f(dk, hd);
    qknorm_backward(ddi, ddq, ddk, dd, dx, dqw, dkw, drs, BT, NH, KV, hd);
    cpu::qknorm_backward(di, dq, dk, d, x, qw, kw, rs, BT, NH, KV, hd);
    from_dev_x(g, ddi, n);
    expect("qknorm_backward dinp", rel_err(g, di, n), tol());
    float *hw = (float *)mallocCheck(hd * 4);
    from_dev_f(hw, ddq, hd);
    expect("qknorm_backward dq_w (added)", rel_err(hw, dq, hd), tol());
    from_dev_f(hw, ddk, hd);
    expect("qknorm_backward dk_w (added)", rel_err(hw, dk, hd), tol());
    // RoPE with Llama 3.1's scaling (original_max_pos small enough that T crosses all three bands), in place
    {
        const size_t nt = (size_t)T * (hd / 2);
        float *ct = (float *)mallocCheck(nt * 4), *st = (float *)mallocCheck(nt * 4);
        host_rope_table(ct, st, T, hd);
        float *dct = to_dev_f(ct, nt), *dst = to_dev_f(st, nt);
        floatX *dq2 = to_dev_x(x, n);
        memcpy(out, x, n * 4);
        rope_forward(dq2, dct, dst, B, T, NH, KV, hd);
        cpu::rope_forward(out, ct, st, B, T, NH, KV, hd);
        from_dev_x(g, dq2, n);
        expect("rope_forward (llama3 scaling, in place)", rel_err(g, out, n), tol());
        floatX *dd2 = to_dev_x(d, n);
        memcpy(out, d, n * 4);
        rope_backward(dd2, dct, dst, B, T, NH, KV, hd);
        cpu::rope_backward(out, ct, st, B, T, NH, KV, hd);
        from_dev_x(g, dd2, n);
        expect("rope_backward (in place)", rel_err(g, out, n), tol());
        // QK-norm and RoPE fused (one pass) against the CPU build's two kernels in turn
        floatX *dfo = to_dev_x(x, n);
        qknorm_rope_forward(dfo, drs, dx, dqw, dkw, dct, dst, B, T, NH, KV, hd, 1e-6f);
        cpu::qknorm_forward(out, rs, x, qw, kw, BT, NH, KV, hd, 1e-6f);
        cpu::rope_forward(out, ct, st, B, T, NH, KV, hd);
        from_dev_x(g, dfo, n);
        expect("qknorm_rope_forward (fused) vs qknorm, rope", rel_err(g, out, n), tol());
        float *dq3 = rand_host(hd, 1.0f), *dk3 = rand_host(hd, 1.0f), *dr = (float *)mallocCheck(n * 4);
        float *ddq3 = to_dev_f(dq3, hd), *ddk3 = to_dev_f(dk3, hd);
        floatX *dfi = to_dev_x(x, n);
        qknorm_rope_backward(dfi, ddq3, ddk3, dd, dx, dqw, dkw, drs, dct, dst, B, T, NH, KV, hd);
        memcpy(dr, d, n * 4);
        cpu::rope_backward(dr, ct, st, B, T, NH, KV, hd);
        cpu::qknorm_backward(out, dq3, dk3, dr, x, qw, kw, rs, BT, NH, KV, hd);
        from_dev_x(g, dfi, n);
        expect("qknorm_rope_backward dinp (fused)", rel_err(g, out, n), tol());
        from_dev_f(hw, ddq3, hd);
        expect("qknorm_rope_backward dq_w (added)", rel_err(hw, dq3, hd), tol());
        from_dev_f(hw, ddk3, hd);
        expect("qknorm_rope_backward dk_w (added)", rel_err(hw, dk3, hd), tol());
    }
    // SwiGLU on the packed (up | gate) fc output
    const size_t n2 = (size_t)BT * 2 * H, n1 = (size_t)BT * H;
    float *fc = rand_host(n2, 3.0f), *so = (float *)mallocCheck(n2 * 4), *sg = (float *)mallocCheck(n2 * 4);
    floatX *dfc = to_dev_x(fc, n2), *dso = to_dev_x(fc, n1);
    swiglu_forward(dso, dfc, BT, H);
    cpu::swiglu_forward(so, fc, BT, H);
    from_dev_x(sg, dso, n1);
    expect("swiglu_forward", rel_err(sg, so, n1), tol());
    float *sd = rand_host(n1, 1.0f);
    floatX *dsd = to_dev_x(sd, n1), *dsi = to_dev_x(fc, n2);
    swiglu_backward(dsi, dsd, dfc, BT, H);
    cpu::swiglu_backward(so, sd, fc, BT, H);
    from_dev_x(sg, dsi, n2);
    expect("swiglu_backward dinp (up | gate)", rel_err(sg, so, n2), tol());
}

// Grouped-query attention (backend.h's attention_gqa_*: cuda/attention.cuh's flash kernels, cuda/decode.cuh's decoder)
// against cpu/llama.h's gqa_attention_*, on a
// packed qkv of NH query, KV key and KV value heads of hd. With KV = NH the same calls must give GPT-2's attention's
// bits (attention_forward, attention_backward: one block runs both families).
static bool same_bits(const floatX *a, const floatX *b, size_t n) {
    void *ha = mallocCheck(n * x_bytes), *hb = mallocCheck(n * x_bytes);
    cudaCheck(cudaMemcpy(ha, a, n * x_bytes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hb, b, n * x_bytes, cudaMemcpyDeviceToHost));
    bool same = memcmp(ha, hb, n * x_bytes) == 0;
    free(ha); free(hb);
    return same;
}

static void check_gqa(int B, int T, int NH, int KV, int hd) {
    const int R = (NH + 2 * KV) * hd, C = NH * hd;
    const size_t BT = (size_t)B * T, nq = BT * R, no = BT * C;
    char what[96];
    float *qkv = rand_host(nq, 1.0f), *dout = rand_host(no, 1.0f);
    float *out = (float *)mallocCheck(no * 4), *att = (float *)mallocCheck((size_t)B * NH * T * T * 4);  // the CPU build keeps the softmax
    float *g = (float *)mallocCheck(nq * 4), *dq = (float *)mallocCheck(nq * 4);
    floatX *dqkv_in = to_dev_x(qkv, nq), *ddout = to_dev_x(dout, no), *dout_x = to_dev_x(out, no), *ddq = to_dev_x(dq, nq);
    float *lse = zeros_dev_f((size_t)B * NH * T);
    attention_gqa_forward(dout_x, lse, dqkv_in, B, T, NH, KV, hd, NULL, NULL);
    cpu::gqa_attention_forward(out, att, qkv, B, T, NH, KV, hd);
    from_dev_x(g, dout_x, no);
    snprintf(what, sizeof(what), "attention_gqa_forward NH=%d KV=%d hd=%d", NH, KV, hd);
    expect(what, rel_err(g, out, no), tol());
    attention_gqa_backward(ddq, ddout, dqkv_in, dout_x, lse, B, T, NH, KV, hd, NULL, NULL);
    cpu::gqa_attention_backward(dq, dout, qkv, att, B, T, NH, KV, hd);
    from_dev_x(g, ddq, nq);
    snprintf(what, sizeof(what), "attention_gqa_backward dqkv NH=%d KV=%d hd=%d", NH, KV, hd);
    expect(what, rel_err(g, dq, nq), tol());
    if (KV == NH) {  // GPT-2's launchers on the same inputs: the same bits
        floatX *o2 = to_dev_x(out, no), *d2 = to_dev_x(dq, nq);
        float *lse2 = zeros_dev_f((size_t)B * NH * T);
        attention_forward(o2, lse2, dqkv_in, B, T, C, NH);
        attention_backward(d2, ddout, dqkv_in, o2, lse2, B, T, C, NH);
        expect("attention_gqa_* with KV = NH vs attention_* (bits differ)", (double)(!same_bits(o2, dout_x, no) + !same_bits(d2, ddq, nq)), 0.0);
    }
    // the decoder: batch row 0's rows 0..t stored in the key/value cache, then the new token's attention
    const int t = T - 1;
    const size_t kvd = (size_t)KV * hd;
    floatX *kc = to_dev_x(qkv, (size_t)T * kvd), *vc = to_dev_x(qkv, (size_t)T * kvd), *dec = to_dev_x(out, C);
    float *hk = (float *)mallocCheck((size_t)T * kvd * 4), *hv = (float *)mallocCheck((size_t)T * kvd * 4);
    for (int r = 0; r <= t; r++) {
        kv_cache_store(kc, vc, (const floatX *)((const char *)dqkv_in + (size_t)r * R * x_bytes), r, NH, KV, hd);
        cpu::kv_cache_store(hk, hv, qkv + (size_t)r * R, r, NH, KV, hd);
    }
    attention_gqa_decode(dec, (const floatX *)((const char *)dqkv_in + (size_t)t * R * x_bytes), kc, vc, t, NH, KV, hd);
    cpu::gqa_attention_decode(out, qkv + (size_t)t * R, hk, hv, t, NH, KV, hd);
    from_dev_x(g, dec, C);
    snprintf(what, sizeof(what), "attention_gqa_decode (kv_cache_store) at t=%d KV=%d", t, KV);
    expect(what, rel_err(g, out, C), tol());
    if (KV == NH && B == 1) {  // GPT-2's decoder reads the qkv rows themselves: the same bits
        floatX *dec2 = to_dev_x(out, C);
        attention_decode(dec2, dqkv_in, t, C, NH);
        expect("attention_gqa_decode with KV = NH vs attention_decode (bits differ)", (double)!same_bits(dec, dec2, C), 0.0);
    }
}

// RoPE in the attention kernels' loads (backend_fuses_rope: model.h's Llama family without QK-norm): qkv holds q and k
// unrotated, attention_gqa_forward/backward get the angle tables. Against the CPU build's rope_forward followed by its
// attention (and its attention backward followed by rope_backward), and, bit for bit, against this build's separate
// pass (rope_forward in place, attention without tables; attention backward, then rope_backward in place): rotating
// on load computes the same fp32 value from the same stored one and rounds it once, so the two must agree exactly.
static void check_gqa_rope(int B, int T, int NH, int KV, int hd) {
    const int R = (NH + 2 * KV) * hd, C = NH * hd;
    const size_t BT = (size_t)B * T, nq = BT * R, no = BT * C, nt = (size_t)T * (hd / 2);
    char what[128];
    float *qkv = rand_host(nq, 1.0f), *dout = rand_host(no, 1.0f), *ct = (float *)mallocCheck(nt * 4),
          *st = (float *)mallocCheck(nt * 4);
    host_rope_table(ct, st, T, hd);
    float *dct = to_dev_f(ct, nt), *dst = to_dev_f(st, nt);
    float *rot = (float *)mallocCheck(nq * 4), *out = (float *)mallocCheck(no * 4), *g = (float *)mallocCheck(nq * 4);
    float *att = (float *)mallocCheck((size_t)B * NH * T * T * 4), *dq = (float *)mallocCheck(nq * 4);
    memcpy(rot, qkv, nq * 4);  // the CPU build: RoPE's pass, then attention
    cpu::rope_forward(rot, ct, st, B, T, NH, KV, hd);
    cpu::gqa_attention_forward(out, att, rot, B, T, NH, KV, hd);
    cpu::gqa_attention_backward(dq, dout, rot, att, B, T, NH, KV, hd);
    cpu::rope_backward(dq, ct, st, B, T, NH, KV, hd);
    // fused: the tables go to attention, qkv stays unrotated
    floatX *dqkv = to_dev_x(qkv, nq), *ddout = to_dev_x(dout, no), *o1 = to_dev_x(out, no), *d1 = to_dev_x(dq, nq);
    float *lse1 = zeros_dev_f((size_t)B * NH * T);
    attention_gqa_forward(o1, lse1, dqkv, B, T, NH, KV, hd, dct, dst);
    from_dev_x(g, o1, no);
    snprintf(what, sizeof(what), "attention_gqa_forward + RoPE on load NH=%d KV=%d hd=%d T=%d", NH, KV, hd, T);
    expect(what, rel_err(g, out, no), tol());
    attention_gqa_backward(d1, ddout, dqkv, o1, lse1, B, T, NH, KV, hd, dct, dst);
    from_dev_x(g, d1, nq);
    snprintf(what, sizeof(what), "attention_gqa_backward + RoPE^T on write NH=%d KV=%d hd=%d T=%d", NH, KV, hd, T);
    expect(what, rel_err(g, dq, nq), tol());
    // the separate passes on a copy: the same bits
    floatX *dqkv2 = to_dev_x(qkv, nq), *o2 = to_dev_x(out, no), *d2 = to_dev_x(dq, nq);
    float *lse2 = zeros_dev_f((size_t)B * NH * T);
    rope_forward(dqkv2, dct, dst, B, T, NH, KV, hd);
    attention_gqa_forward(o2, lse2, dqkv2, B, T, NH, KV, hd, NULL, NULL);
    attention_gqa_backward(d2, ddout, dqkv2, o2, lse2, B, T, NH, KV, hd, NULL, NULL);
    rope_backward(d2, dct, dst, B, T, NH, KV, hd);
    snprintf(what, sizeof(what), "RoPE on load vs rope_forward/backward passes NH=%d KV=%d hd=%d (bits differ)", NH, KV, hd);
    expect(what, (double)(!same_bits(o1, o2, no) + !same_bits(d1, d2, nq)), 0.0);
    // the input is read only: q and k stay unrotated in qkv (the saved activation the backward reads)
    floatX *dqkv3 = to_dev_x(qkv, nq);
    expect("attention_gqa_* with RoPE tables left qkv as it was", (double)!same_bits(dqkv, dqkv3, nq), 0.0);
}

// The encoder without a position table (backend.h: the Llama family calls it with wpe = dwpe = NULL): out is the token's
// wte row (bits), and dwte the same sums as with a table (the CPU build's, with a scratch dwpe).
static void check_encoder_no_wpe(int B, int T, int C, int Vp) {
    const size_t BT = (size_t)B * T, n = BT * C;
    int *tok = (int *)mallocCheck(BT * sizeof(int)), *dtok;
    for (size_t i = 0; i < BT; i++) tok[i] = (int)(random_u32(&rng_state) % Vp);
    cudaCheck(cudaMalloc(&dtok, BT * sizeof(int)));
    cudaCheck(cudaMemcpy(dtok, tok, BT * sizeof(int), cudaMemcpyHostToDevice));
    float *wte = rand_host((size_t)Vp * C, 1.0f), *g = (float *)mallocCheck(n * 4);
    floatX *dwte = to_dev_x(wte, (size_t)Vp * C), *out = to_dev_x(g, n);
    encoder_forward(out, dtok, dwte, NULL, B, T, C);
    from_dev_x(g, out, n);
    double diff = 0.0;
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)g[i] - wte[(size_t)tok[i / C] * C + i % C]));
    expect("encoder_forward without wpe: the wte rows (bits)", diff, 0.0);
    float *d = rand_host(n, 1.0f), *gw = (float *)callocCheck((size_t)Vp * C, 4), *gp = (float *)callocCheck((size_t)T * C, 4);
    floatX *dd = to_dev_x(d, n);
    float *dgw = to_dev_f(gw, (size_t)Vp * C), *back = (float *)mallocCheck((size_t)Vp * C * 4);
    encoder_backward(dgw, NULL, dd, dtok, B, T, C);
    cpu::encoder_backward(gw, gp, d, tok, B, T, C);
    from_dev_f(back, dgw, (size_t)Vp * C);
    expect("encoder_backward without dwpe: dwte", rel_err(back, gw, (size_t)Vp * C), 1e-5);
}

static void check_llama(void) {
    check_rmsnorm(128, 64);     // the test model's width, vectors of 16 bytes
    check_rmsnorm(111, 48);     // 111 rows: the chunks of rows ragged
    check_rmsnorm(70, 36);      // one value a thread (36 % 8 != 0)
    check_rmsnorm(130, 1600);   // over 48 KiB of shared memory in the backward, two rows to some chunks
    check_llama_elementwise(2, 64, 4, 1, 16, 96);   // MQA, hd 16
    check_llama_elementwise(2, 37, 6, 2, 32, 80);   // GQA 3:1, ragged T
    check_llama_elementwise(1, 50, 4, 4, 10, 33);   // KV = NH, hd 10 (odd half), H odd
    check_encoder_no_wpe(2, 37, 64, 128);
    check_gqa(2, 64, 4, 1, 16);    // multi-query
    check_gqa(1, 100, 8, 2, 32);   // 4:1, ragged T over two tiles
    check_gqa(1, 70, 4, 4, 16);    // KV = NH: GPT-2's bits
    check_gqa_rope(1, 100, 8, 2, 32);  // RoPE in attention's loads: 4:1, ragged T over two tiles
    check_gqa_rope(2, 70, 4, 4, 16);   // 1:1 (multi-head), B = 2
    check_gqa_rope(1, 150, 4, 1, 48);  // 4:1, hd 48 (runs padded to 64), T past the 16-bit forward's 128-row tile
}

#include "dev/cuda/kernels_vocab.h"  // --tp's vocabulary-parallel kernels: check_vocab

static void check_all(int B, int T, int C, int NH, int V, int Vp) {
    KernelCase k = {};
    k.B = B; k.T = T; k.C = C; k.NH = NH; k.V = V; k.Vp = Vp;
    k.BT = (size_t)B * T; k.n = k.BT * C;
    k.tok = (int *)mallocCheck(k.BT * sizeof(int));
    for (size_t i = 0; i < k.BT; i++) k.tok[i] = (int)(random_u32(&rng_state) % V);
    cudaCheck(cudaMalloc(&k.dtok, k.BT * sizeof(int)));
    cudaCheck(cudaMemcpy(k.dtok, k.tok, k.BT * sizeof(int), cudaMemcpyHostToDevice));
    check_encoder(&k);
    check_layernorm(&k);
    check_matmul(&k);
    check_matmul_fused(&k);
    check_attention(&k);
    check_gelu_residual(&k);
    check_classifier(&k);
    cudaCheck(cudaDeviceSynchronize());
}

// The encoder and LayerNorm alone, at shapes the whole-model cases do not reach (more rows, wider rows).
static void check_rows(int B, int T, int C) {
    KernelCase k = {};
    k.B = B; k.T = T; k.C = C; k.NH = 1; k.V = 50; k.Vp = 256;  // check_encoder reads dwpe back through a Vp x C buffer: Vp >= T
    k.BT = (size_t)B * T; k.n = k.BT * C;
    k.tok = (int *)mallocCheck(k.BT * sizeof(int));
    for (size_t i = 0; i < k.BT; i++) k.tok[i] = (int)(random_u32(&rng_state) % k.V);
    cudaCheck(cudaMalloc(&k.dtok, k.BT * sizeof(int)));
    cudaCheck(cudaMemcpy(k.dtok, k.tok, k.BT * sizeof(int), cudaMemcpyHostToDevice));
    check_encoder(&k);
    check_layernorm(&k);
    cudaCheck(cudaDeviceSynchronize());
}

// bf16 stochastic rounding keeps the mean: 4096 draws of a value between two bf16 neighbours
static void check_stochastic_rounding(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096;
    float *h = (float *)mallocCheck(n * 4), *back = (float *)mallocCheck(n * 4);
    float v = 1.0f + 0.3f * 0.0078125f;  // 30% of the way from 1 to the next bf16 (1 + 2^-7)
    for (size_t i = 0; i < n; i++) h[i] = v;
    float *d = to_dev_f(h, n);
    floatX *x;
    cudaCheck(cudaMalloc(&x, n * 2));
    double mean = 0.0;
    int distinct_ok = 1;
    for (int seed = 0; seed < 16; seed++) {
        backend_weights_from_master(x, d, n, mix_seed(seed));
        from_dev_x(back, x, n);
        for (size_t i = 0; i < n; i++) {
            mean += back[i];
            if (back[i] != 1.0f && back[i] != 1.0078125f) distinct_ok = 0;
        }
    }
    mean /= 16.0 * n;
    double err = fabs(mean - v) / (v - 1.0);
    printf("%s bf16  stochastic rounding: only the two neighbours, mean %.7f vs %.7f (%.1f%% of the gap)\n",
           distinct_ok && err < 0.02 ? "PASS" : "FAIL", mean, v, 100 * err);
    distinct_ok && err < 0.02 ? passes++ : fails++;
    x_prec = PREC_FP32; x_bytes = 4;
}

// The backend's kernels that the model's kernels do not cover, against the CPU build's: the gradient norm's sum of
// squares (the same 64K chunks, each summed in double in another order: 64K roundings of 2^-53 bound the relative
// difference by ~1e-11; 1e-10), the gradient add (the same fp32 formula; AdamW: check_multi_adamw), and the conversions: fp16 working weights (round to nearest: exact) and a row of logits
// back to float in each precision (exact).
static void check_backend(void) {
    x_prec = PREC_FP32; x_bytes = 4;
    const size_t n = 3 * 65536 + 1234;  // three whole chunks and a ragged fourth
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n);
    // three buffers in one call (whole chunks and ragged ones), each against the CPU build's sum
    const float *xs[3] = {dg, dg + 1000, dg + 65536}, *hx[3] = {g, g + 1000, g + 65536};
    const size_t ns[3] = {n, 70000, 65536};
    double gs[3], cs[3], worst_ss = 0.0;
    backend_sum_squares_start(xs, ns, 3);
    backend_sum_squares_finish(gs, 3);
    cpu::backend_sum_squares_start(hx, ns, 3);
    cpu::backend_sum_squares_finish(cs, 3);
    for (int i = 0; i < 3; i++) worst_ss = fmax(worst_ss, fabs(gs[i] - cs[i]) / cs[i]);
    expect("backend_sum_squares_start/finish (gradient norm)", worst_ss, 1e-10);
    float *back = (float *)mallocCheck(n * 4);
    backend_add(dp, dg, n);
    cpu::backend_add(p, g, n);
    from_dev_f(back, dp, n);
    expect("backend_add", rel_err(back, p, n), 1e-6);
    x_prec = PREC_FP16; x_bytes = 2;
    floatX *w;
    cudaCheck(cudaMalloc(&w, n * 2));
    backend_weights_from_master(w, dg, n, 0);
    from_dev_x(back, w, n);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(back[i] - __half2float(__float2half_rn(g[i]))));
    expect("fp16 working weights (round to nearest)", worst, 0.0);
    const int precs[3] = {PREC_FP32, PREC_BF16, PREC_FP16};
    for (int i = 0; i < 3; i++) {
        x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
        const int Vp = 1000;
        float *row = rand_host(Vp, 4.0f);
        floatX *drow = to_dev_x(row, Vp);
        const float *got = backend_logits_row(drow, Vp);
        expect("backend_logits_row (a row of logits to the host)", rel_err(got, row, Vp), 0.0);
    }
    x_prec = PREC_FP32; x_bytes = 4;
}

// The step's update in one launch (backend_adamw_plan/run) against the CPU build's, over three segments of one
// unit: 16-byte aligned and decayed, misaligned (the one-by-one path), ragged; the working copy written beside it
// is the one backend_weights_from_master makes from the updated master at the unit's seed, bit for bit.
static void check_multi_adamw(int prec) {
    x_prec = prec; x_bytes = prec == PREC_FP32 ? 4 : 2;
    const size_t n = 70001;
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f), *m = rand_host(n, 0.1f), *v = rand_host(n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n), *dm = to_dev_f(m, n), *dv = to_dev_f(v, n);
    floatX *w = NULL, *ref = NULL;
    if (prec != PREC_FP32) { cudaCheck(cudaMalloc(&w, n * 2)); cudaCheck(cudaMalloc(&ref, n * 2)); }
    const size_t lo[3] = {0, 4097, 40000}, cnt[3] = {4097, 35903, 30001};  // the second starts misaligned
    AdamWSegment segs[3], hsegs[3];
    for (int k = 0; k < 3; k++) {
        size_t a = lo[k];
        segs[k] = (AdamWSegment){dp + a, dg + a, dm + a, dv + a, cnt[k], k != 1, w ? (void *)((char *)w + a * 2) : NULL, a, 5};
        hsegs[k] = (AdamWSegment){p + a, g + a, m + a, v + a, cnt[k], k != 1, NULL, a, 5};
    }
    void *plan = backend_adamw_plan(segs, 3), *hplan = cpu::backend_adamw_plan(hsegs, 3);
    AdamWArgs args = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 7};
    backend_adamw_run(plan, &args, 0);
    cpu::backend_adamw_run(hplan, &args, 0);
    float *back = (float *)mallocCheck(n * 4), *back2 = (float *)mallocCheck(n * 4);
    char what[96];
    from_dev_f(back, dp, n);
    snprintf(what, sizeof(what), "backend_adamw_run (3 segments, one launch, %s) parameters", prec_name());
    expect(what, rel_err(back, p, n), 1e-6);
    from_dev_f(back, dm, n);
    expect("backend_adamw_run first moments", rel_err(back, m, n), 1e-6);
    from_dev_f(back, dv, n);
    expect("backend_adamw_run second moments", rel_err(back, v, n), 1e-6);
    if (w) {
        backend_weights_from_master(ref, dp, n, mix_seed(7ull * 1000003u + 5));  // model.h's seed of unit 5 at version 7
        from_dev_x(back, w, n);
        from_dev_x(back2, ref, n);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(back[i] - back2[i]));
        snprintf(what, sizeof(what), "backend_adamw_run's %s working copy vs backend_weights_from_master (bits)", prec_name());
        expect(what, worst, 0.0);
        cudaCheck(cudaFree(w)); cudaCheck(cudaFree(ref));
    }
    backend_adamw_plan_free(plan);
    cpu::backend_adamw_plan_free(hplan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    free(g); free(p); free(m); free(v); free(back); free(back2);
    x_prec = PREC_FP32; x_bytes = 4;
}

// The device's verdict (backend_norm_local, backend_update_verdict) against the host's arithmetic on the CPU build's
// sums: the scale bit for bit with clipping and without, with one rank's sum and two ranks' (the same sum twice, in
// slots 0 and 1), and a non-finite gradient skips the update (the parameters keep their bits).
static void check_verdict(void) {
    x_prec = PREC_FP32; x_bytes = 4;
    const size_t n = 2 * 65536 + 77;
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f), *z = (float *)callocCheck(n, 4);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    const float *xs[2] = {dg, dg + 100}, *hx[2] = {g, g + 100};
    const size_t ns[2] = {n, n - 100};
    double cs[2];
    cpu::backend_sum_squares_start(hx, ns, 2);
    cpu::backend_sum_squares_finish(cs, 2);
    const float loss_scale = 1024.0f, clips[2] = {0.0f, 1e-3f};
    float *slots;
    cudaCheck(cudaMalloc(&slots, 4 * sizeof(float)));
    for (int k = 0; k < 4; k++) {
        int ranks = 1 + k / 2;
        backend_sum_squares_start(xs, ns, 2);
        backend_norm_local(slots);
        if (ranks == 2) backend_norm_local(slots + 2);
        backend_update_verdict(slots, ranks, loss_scale, clips[k % 2]);
        AdamWVerdict got;
        cudaCheck(cudaMemcpy(&got, verdict_d, sizeof(got), cudaMemcpyDeviceToHost));
        double local = cs[0] + cs[1], sum = ranks == 2 ? 0.0 + local + local : local;  // zero.h's order
        float norm = (float)sqrt(sum) / loss_scale;  // trainer.h's arithmetic
        float clip = clips[k % 2], want = (clip > 0.0f && norm > clip ? clip / (norm + 1e-6f) : 1.0f) / loss_scale;
        int ok = got.scale == want && !got.skip;
        printf("%s backend_update_verdict (%d rank%s, clip %g): scale %.9g vs the host's %.9g, skip %d\n", ok ? "PASS" : "FAIL",
               ranks, ranks == 1 ? "" : "s", clip, got.scale, want, got.skip);
        ok ? passes++ : fails++;
    }
    g[12345] = INFINITY;
    cudaCheck(cudaMemcpy(dg, g, n * 4, cudaMemcpyHostToDevice));
    backend_sum_squares_start(xs, ns, 2);
    backend_norm_local(slots);
    backend_update_verdict(slots, 1, loss_scale, 1.0f);
    AdamWSegment seg = {dp, dg, dm, dv, n, 1, NULL, 0, 0};
    void *plan = backend_adamw_plan(&seg, 1);
    AdamWArgs args = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 123.0f, 1};
    backend_adamw_run(plan, &args, 1);
    float *back = (float *)mallocCheck(n * 4);
    from_dev_f(back, dp, n);
    size_t changed = 0;  // bits, not a relative error: a NaN would pass that
    for (size_t i = 0; i < n; i++) changed += memcmp(&back[i], &p[i], 4) != 0;
    expect("a non-finite gradient: the update skips itself on the device (parameters changed)", (double)changed, 0.0);
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    cudaCheck(cudaFree(slots));
    free(g); free(p); free(z); free(back);
}

// The bf16 working copy stays an unbiased rounding of the fp32 master over many small updates: 4096 equal
// parameters, 64 AdamW updates of about 1e-4 each (an eightieth of bf16's gap at 1): after every update the
// copies' mean must lie within 4 standard errors of the master's (their spread over the 4096 is the standard
// error's estimate). Round to nearest puts every copy on the same side, a whole bias with no spread: it fails.
static void check_unbiased_updates(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096;
    const int K = 64;
    float *h = (float *)mallocCheck(n * 4), *z = (float *)callocCheck(n, 4), *back = (float *)mallocCheck(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = 1.0f + 0.3f * 0.0078125f;
    float *dp = to_dev_f(h, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    float *dg = to_dev_f(h, n);  // a constant gradient: every update moves the master down by about lr
    floatX *w;
    cudaCheck(cudaMalloc(&w, n * 2));
    AdamWSegment seg = {dp, dg, dm, dv, n, 0, w, 0, 3};
    void *plan = backend_adamw_plan(&seg, 1);
    int outside = 0;
    double worst = 0.0;
    for (int t = 1; t <= K; t++) {
        AdamWArgs args = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, t};
        backend_adamw_run(plan, &args, 0);
        from_dev_f(h, dp, n);
        from_dev_x(back, w, n);
        double mw = 0.0, mp = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++) { mw += back[i]; mp += h[i]; }
        mw /= n; mp /= n;
        for (size_t i = 0; i < n; i++) { double d = back[i] - h[i] - (mw - mp); var += d * d; }
        double se = sqrt(var / (n - 1) / n), zsc = se > 0 ? fabs(mw - mp) / se : (mw == mp ? 0.0 : INFINITY);
        worst = fmax(worst, zsc);
        if (zsc > 4.0) outside++;
    }
    int ok = outside == 0;
    printf("%s bf16 working copy over %d small updates: its mean within 4 standard errors of the master's after every "
           "update (worst %.2f)\n", ok ? "PASS" : "FAIL", K, worst);
    ok ? passes++ : fails++;
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv)); cudaCheck(cudaFree(w));
    free(h); free(z); free(back);
    x_prec = PREC_FP32; x_bytes = 4;
}

// Stochastic rounding per element (issue 35): a fresh draw at every version for every element, not only a mean
// that is right over the elements (check_unbiased_updates: a draw fixed per element, the same at every update,
// passes that). The step's update as zero.h runs it, one plan over two segments of unit 4 (16-byte aligned, and
// misaligned: the one-by-one path), args.t the update count 1, 2, .., K as trainer.h advances it, over n parameters
// of random sign and size in [0.5, 4), each moved by the same small update at every step (a constant gradient, so
// Adam's step is lr: 256 x 4e-6 is an eighth of bf16's gap at 1, and an element's place between its two bf16
// neighbours hardly moves, as in late training); beside it, the copy model.h makes at stages 1-3, on load and on
// resume (backend_weights_from_master at model.h's seed of the unit at that version). The error of a working
// weight, e = (|w| - |p|) / (the gap between p's two bf16 neighbours), in ulps (the draw carries into the magnitude,
// so a bias shows in |w| whatever the sign; a signed error cancels between the signs): with 16 fresh uniform bits a
// draw, w is one of the two neighbours and e has mean 0 exactly, lies in an interval of width 1, and the draws are
// independent.
// Hoeffding: a mean of N such draws is beyond eps with probability <= 2 exp(-2 N eps^2); the bounds below put
// 2 N eps^2 >= 18.8, so each (element, version, overall) misses with probability <= 1.3e-8 and all 2 x 4353 of them
// together with < 3e-5 (the inputs are fixed, so the verdict is too):
//   per element, over K = 256 versions:        eps 0.2 ulp   (2 K eps^2 = 20.5; its standard error <= 1/32)
//   per version, over the n = 4096 elements:   eps 0.05 ulp  (20.5)
//   overall, over the n K = 2^20 draws:        eps 0.003 ulp (18.9)
// A draw fixed per element (the seed not depending on the version) leaves each element's bias at whichever of -f
// and 1 - f its draw picked (f its place between the neighbours): up to a whole ulp. The same bits for every
// element shift a version's mean over elements by u - 1/2 (u that version's draw); truncation is -f everywhere.
static void check_rounding_per_element(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096, split = 2049;  // the second segment starts misaligned
    const int K = 256, unit = 4;
    uint64_t rng = 35;
    float *p = (float *)mallocCheck(n * 4), *g = (float *)mallocCheck(n * 4), *z = (float *)callocCheck(n, 4);
    for (size_t i = 0; i < n; i++) {
        float sign = random_f32(&rng) < 0.5f ? -1.0f : 1.0f;
        p[i] = sign * exp2f(-1.0f + 3.0f * random_f32(&rng));         // |p| in [0.5, 4)
        g[i] = (random_f32(&rng) < 0.5f ? -1.0f : 1.0f) * (0.5f + random_f32(&rng));
    }
    float *dp = to_dev_f(p, n), *dg = to_dev_f(g, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    floatX *w[2];
    for (int k = 0; k < 2; k++) cudaCheck(cudaMalloc(&w[k], n * 2 + 16));
    AdamWSegment segs[2] = {{dp, dg, dm, dv, split, 0, (void *)w[0], 0, unit},
                            {dp + split, dg + split, dm + split, dv + split, n - split, 0, (void *)((bf16 *)w[0] + split), split, unit}};
    void *plan = backend_adamw_plan(segs, 2);
    double *sum_el = (double *)callocCheck(2 * n, sizeof(double)), worst_ver[2] = {0.0, 0.0}, total[2] = {0.0, 0.0};
    size_t off_grid[2] = {0, 0};
    float *back = (float *)mallocCheck(n * 4);
    for (int t = 1; t <= K; t++) {
        AdamWArgs args = {4e-6f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, t};
        backend_adamw_run(plan, &args, 0);
        backend_weights_from_master(w[1], dp, n, mix_seed((uint64_t)t * 1000003u + unit));  // model.h's seed
        from_dev_f(p, dp, n);
        for (int k = 0; k < 2; k++) {
            from_dev_x(back, w[k], n);
            double ver = 0.0;
            for (size_t i = 0; i < n; i++) {
                uint32_t bits;
                memcpy(&bits, &p[i], 4);
                uint32_t lo_bits = bits & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
                float lo, hi;
                memcpy(&lo, &lo_bits, 4);
                memcpy(&hi, &hi_bits, 4);
                if (back[i] != lo && back[i] != hi) off_grid[k]++;
                double e = (fabs((double)back[i]) - fabs((double)p[i])) / fabs((double)hi - lo);  // up in magnitude: > 0
                sum_el[k * n + i] += e;
                ver += e;
            }
            worst_ver[k] = fmax(worst_ver[k], fabs(ver / n));
            total[k] += ver;
        }
    }
    const char *path[2] = {"backend_adamw_run (fused)", "backend_weights_from_master"};
    for (int k = 0; k < 2; k++) {
        double worst_el = 0.0, ms = 0.0;
        for (size_t i = 0; i < n; i++) {
            double me = sum_el[k * n + i] / K;
            worst_el = fmax(worst_el, fabs(me));
            ms += me * me;
        }
        double overall = total[k] / ((double)n * K);
        int ok = worst_el <= 0.2 && off_grid[k] == 0;
        printf("%s bf16 %s, %d versions: each element's mean within 0.2 ulp of its master's: worst %.4f ulp, rms %.4f ulp "
               "(%zu draws not a neighbour)\n", ok ? "PASS" : "FAIL", path[k], K, worst_el, sqrt(ms / n), off_grid[k]);
        ok ? passes++ : fails++;
        ok = worst_ver[k] <= 0.05;
        printf("%s bf16 %s: each version's mean over %zu elements within 0.05 ulp: worst %.4f ulp\n", ok ? "PASS" : "FAIL",
               path[k], n, worst_ver[k]);
        ok ? passes++ : fails++;
        ok = fabs(overall) <= 0.003;
        printf("%s bf16 %s: the mean over all %zu draws within 0.003 ulp: %+.5f ulp\n", ok ? "PASS" : "FAIL", path[k],
               n * K, overall);
        ok ? passes++ : fails++;
    }
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    cudaCheck(cudaFree(w[0])); cudaCheck(cudaFree(w[1]));
    free(p); free(g); free(z); free(back); free(sum_el);
    x_prec = PREC_FP32; x_bytes = 4;
}

// ms per call of fn, after 3 warm-up calls, over 20
template <typename F>
static float time_ms(F fn) {
    for (int i = 0; i < 3; i++) fn();
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a)); cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    for (int i = 0; i < 20; i++) fn();
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaEventSynchronize(b));
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    return ms / 20;
}

// The epilogue fusions (TRAIN_GPT_GELU_FUSION, TRAIN_GPT_RESIDUAL_FUSION) against the kernels they replace, at
// GPT-2 124M's shapes: the fc matmul and GELU, the fc projection's backward and GELU's, the attention projection
// and the residual add. a, b2, c2: BT x 4C; w: 4C x C; bias: 4C; wf, bf: fp32 gradients of those sizes.
static void bench_fusions(int B, int T, int C, floatX *a, floatX *b2, floatX *c2, floatX *w, floatX *bias, float *wf, float *bf) {
    const int BT = B * T;
    const double fl = 2.0 * BT * C * 4 * C, flp = 2.0 * BT * C * C;
    float ms = time_ms([&] { matmul_forward(c2, b2, w, bias, BT, C, 4 * C); gelu_forward(a, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fc + gelu_forward (2 kernels)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { matmul_forward_gelu(a, c2, b2, w, bias, BT, C, 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fc, GELU_AUX_BIAS epilogue", ms, fl / (ms * 1e9));
    ms = time_ms([&] { matmul_backward(c2, wf, bf, a, b2, w, BT, 4 * C, C); gelu_backward(c2, b2, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fcproj backward + gelu_backward", ms, 2 * fl / (ms * 1e9));
    ms = time_ms([&] { matmul_backward_dgelu(c2, wf, bf, a, b2, w, b2, BT, 4 * C, C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fcproj backward, DGELU epilogue", ms, 2 * fl / (ms * 1e9));
    ms = time_ms([&] { matmul_forward(c2, b2, w, bias, BT, C, C); residual_forward(a, b2, c2, (long)BT * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attproj + residual_forward", ms, flp / (ms * 1e9));
    ms = time_ms([&] { matmul_forward_residual(a, b2, c2, w, bias, BT, C, C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attproj, residual as C (beta 1)", ms, flp / (ms * 1e9));
}

static void bench(int B, int T, int C, int NH, int Vp) {
    size_t BT = (size_t)B * T;
    printf("kernel benchmark, %s, B=%d T=%d C=%d NH=%d Vp=%d%s\n", prec_name(), B, T, C, NH, Vp, C == 768 ? " (GPT-2 124M's shapes)" : "");
    size_t big = BT * Vp;
    float *h = rand_host(BT * 4 * C, 1.0f);
    floatX *a = to_dev_x(h, BT * 4 * C), *b2 = to_dev_x(h, BT * 4 * C), *c2 = to_dev_x(h, BT * 4 * C);
    floatX *w = to_dev_x(h, (size_t)4 * C * C), *bias = to_dev_x(h, 4 * C);
    float *wf = to_dev_f(h, (size_t)4 * C * C), *bf = to_dev_f(h, 4 * C), *mean, *rstd, *lse, *losses;
    cudaCheck(cudaMalloc(&mean, BT * 4)); cudaCheck(cudaMalloc(&rstd, BT * 4));
    cudaCheck(cudaMalloc(&lse, (size_t)B * NH * T * 4)); cudaCheck(cudaMalloc(&losses, BT * 4));
    floatX *logits;
    cudaCheck(cudaMalloc(&logits, big * x_bytes));
    cudaCheck(cudaMemset(logits, 0, big * x_bytes));
    int *tok;
    cudaCheck(cudaMalloc(&tok, BT * 4));
    cudaCheck(cudaMemset(tok, 0, BT * 4));
    double xb = (double)x_bytes, fl;
    float ms;
#define GBS(bytes) ((bytes) / (ms * 1e6))
    ms = time_ms([&] { layernorm_forward(a, mean, rstd, b2, w, bias, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "layernorm_forward", ms, GBS(2 * BT * C * xb));
    ms = time_ms([&] { layernorm_backward(a, bf, bf, b2, c2, w, mean, rstd, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "layernorm_backward", ms, GBS(4 * BT * C * xb));
    fl = 2.0 * BT * C * 4 * C;
    ms = time_ms([&] { matmul_forward(a, b2, w, bias, (int)BT, C, 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "matmul_forward fc (C -> 4C)", ms, fl / (ms * 1e9));
    for (int f = 1; f >= 0; f--) {  // the bias gradient in the matmul's epilogue or by column_sums (TRAIN_GPT_BGRAD)
        fuse_bgrad = f;
        ms = time_ms([&] { matmul_backward(c2, wf, bf, a, b2, w, (int)BT, C, 4 * C); });
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", f ? "matmul_backward fc (dbias BGRADB)" : "matmul_backward fc (column_sums)", ms,
               2 * fl / (ms * 1e9));
    }
    fuse_bgrad = 1;
    bench_fusions(B, T, C, a, b2, c2, w, bias, wf, bf);
    fl = 4.0 * B * NH * (double)T * T * (C / NH) / 2;
    ms = time_ms([&] { attention_forward(a, lse, b2, B, T, C, NH); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_forward (flash)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_backward(c2, a, b2, a, lse, B, T, C, NH); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_backward (flash)", ms, 2.5 * fl / (ms * 1e9));
    ms = time_ms([&] { gelu_forward(a, b2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "gelu_forward", ms, GBS(2 * BT * 4 * C * xb));
    ms = time_ms([&] { gelu_backward(a, b2, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "gelu_backward", ms, GBS(3 * BT * 4 * C * xb));
    ms = time_ms([&] { residual_forward(a, b2, c2, (long)BT * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "residual_forward", ms, GBS(3 * BT * C * xb));
    // staged: the row read once from global memory and written once; not: read twice (the bandwidth column counts
    // the bytes each moves)
    for (int st = 1; st >= 0; st--) {
        classifier_staged = st;
        ms = time_ms([&] { classifier_forward_backward(logits, losses, tok, (int)BT, Vp - 47, Vp, 1.0f); });
        printf("  %-34s %8.3f ms  %7.0f GB/s\n", st ? "classifier (row in shared memory)" : "classifier (row read twice)", ms,
               GBS((st ? 2 : 3) * big * xb));
    }
    classifier_staged = 1;
    fl = 2.0 * BT * C * Vp;
    floatX *wte;  // (Vp, C): larger than the 4C x C weight above
    cudaCheck(cudaMalloc(&wte, (size_t)Vp * C * x_bytes));
    cudaCheck(cudaMemset(wte, 0, (size_t)Vp * C * x_bytes));
    ms = time_ms([&] { matmul_forward(logits, b2, wte, NULL, (int)BT, C, Vp); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "matmul_forward lm head (C -> Vp)", ms, fl / (ms * 1e9));
    cudaCheck(cudaDeviceSynchronize());
}

// The Llama family's kernels at a d12-width shape (C = NH hd, KV key/value heads, H SwiGLU's hidden width), in the
// run's precision: ms and GB/s (the bytes each must move) or TFLOP/s (attention, causal).
static void bench_llama(int B, int T, int NH, int KV, int hd, int H) {
    const size_t BT = (size_t)B * T;
    const int C = NH * hd, R = (NH + 2 * KV) * hd;
    printf("Llama kernels, %s, B=%d T=%d C=%d NH=%d KV=%d hd=%d H=%d\n", prec_name(), B, T, C, NH, KV, hd, H);
    const size_t big = BT * (size_t)(2 * H > R ? 2 * H : R);
    float *h = rand_host(big, 1.0f);
    floatX *a = to_dev_x(h, big), *b = to_dev_x(h, big), *c = to_dev_x(h, big), *w = to_dev_x(h, C);
    float *rstd = zeros_dev_f(BT * (NH + KV)), *dw = zeros_dev_f(C), *dw2 = zeros_dev_f(hd), *lse = zeros_dev_f(BT * NH);
    float *ct = (float *)mallocCheck((size_t)T * hd / 2 * 4), *st = (float *)mallocCheck((size_t)T * hd / 2 * 4);
    host_rope_table(ct, st, T, hd);
    float *dct = to_dev_f(ct, (size_t)T * hd / 2), *dst = to_dev_f(st, (size_t)T * hd / 2);
    const double xb = (double)x_bytes;
    float ms;
#define GBS(bytes) ((bytes) / (ms * 1e6))
    ms = time_ms([&] { rmsnorm_forward(a, rstd, b, w, (int)BT, C, 1e-5f); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rmsnorm_forward", ms, GBS(2 * BT * C * xb));
    ms = time_ms([&] { rmsnorm_backward(a, dw, b, c, w, rstd, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rmsnorm_backward", ms, GBS(4 * BT * C * xb));
    ms = time_ms([&] { qknorm_forward(a, rstd, b, w, w, (int)BT, NH, KV, hd, 1e-6f); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_forward", ms, GBS(2 * BT * R * xb));
    ms = time_ms([&] { qknorm_backward(a, dw2, dw2, b, c, w, w, rstd, (int)BT, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_backward", ms, GBS(3 * BT * R * xb));
    ms = time_ms([&] { rope_forward(a, dct, dst, B, T, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rope_forward (in place, q and k)", ms, GBS(2 * BT * (NH + KV) * hd * xb));
    ms = time_ms([&] { qknorm_rope_forward(a, rstd, b, w, w, dct, dst, B, T, NH, KV, hd, 1e-6f); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_rope_forward (one pass)", ms, GBS(2 * BT * R * xb));
    ms = time_ms([&] { qknorm_rope_backward(a, dw2, dw2, b, c, w, w, rstd, dct, dst, B, T, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_rope_backward (one pass)", ms, GBS(3 * BT * R * xb));
    ms = time_ms([&] { swiglu_forward(a, b, (int)BT, H); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "swiglu_forward", ms, GBS(3 * BT * H * xb));
    ms = time_ms([&] { swiglu_backward(a, c, b, (int)BT, H); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "swiglu_backward", ms, GBS(5 * BT * H * xb));
    // the block's four matmuls at their Llama shapes (no bias), forward and backward (dinp and the fp32 dweight):
    // beside GPT-2's fc rows above, where a Llama step's time goes
    float *hw = rand_host((size_t)2 * H * C, 1.0f);
    floatX *wm = to_dev_x(hw, (size_t)2 * H * C);
    float *wmf = zeros_dev_f((size_t)2 * H * C);
    const struct { const char *name; int in, out; } mms[] = {
        {"wqkv C->(NH+2KV)hd", C, R}, {"wo NHhd->C", C, C}, {"wfc C->2H up|gate", C, 2 * H}, {"wproj H->C", H, C}};
    for (const auto &m : mms) {
        const double mfl = 2.0 * BT * m.in * m.out;
        char what[64];
        ms = time_ms([&] { matmul_forward(c, b, wm, NULL, (int)BT, m.in, m.out); });
        snprintf(what, sizeof(what), "matmul_forward %s", m.name);
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", what, ms, mfl / (ms * 1e9));
        ms = time_ms([&] { matmul_backward(a, wmf, NULL, c, b, wm, (int)BT, m.in, m.out); });
        snprintf(what, sizeof(what), "matmul_backward %s", m.name);
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", what, ms, 2 * mfl / (ms * 1e9));
    }
    const double fl = 4.0 * B * NH * (double)T * T * hd / 2;
    ms = time_ms([&] { attention_gqa_forward(a, lse, b, B, T, NH, KV, hd, NULL, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_forward (flash)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_gqa_backward(c, a, b, a, lse, B, T, NH, KV, hd, NULL, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_backward (flash)", ms, 2.5 * fl / (ms * 1e9));
    // RoPE in the kernels' loads (model.h without QK-norm) against the lines above plus the two rope passes
    ms = time_ms([&] { attention_gqa_forward(a, lse, b, B, T, NH, KV, hd, dct, dst); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_fwd + RoPE in loads", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_gqa_backward(c, a, b, a, lse, B, T, NH, KV, hd, dct, dst); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_bwd + RoPE in loads", ms, 2.5 * fl / (ms * 1e9));
    ms = time_ms([&] { rope_backward(a, dct, dst, B, T, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rope_backward (in place, dq and dk)", ms, GBS(2 * BT * (NH + KV) * hd * xb));
#undef GBS
    cudaCheck(cudaDeviceSynchronize());
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "check";
    backend_init(0);
    if (strcmp(mode, "bench") == 0) {
        x_prec = PREC_BF16; x_bytes = 2;
        // `bench tiny`: the same calls at the test model's shapes, so the emulator can run them (plumbing only)
        if (argc > 2 && strcmp(argv[2], "tiny") == 0) { bench(1, 64, 64, 4, 128); bench_llama(1, 64, 4, 1, 16, 96); }
        else { bench(8, 1024, 768, 12, 50304); bench_llama(8, 1024, 12, 3, 64, 2048); }
        return 0;
    }
    const int precs[3] = {PREC_FP32, PREC_BF16, PREC_FP16};
    if (argc > 2 && strcmp(argv[2], "llama") == 0) {  // `check llama`: only the Llama family's kernels
        for (int i = 0; i < 3; i++) {
            x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
            check_llama();
        }
        printf("%d passed, %d failed\n", passes, fails);
        return fails ? 1 : 0;
    }
    for (int i = 0; i < 3; i++) {
        x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
        check_all(2, 64, 64, 4, 101, 128);     // the test model's shapes (hs 16)
        check_all(2, 100, 128, 4, 500, 512);   // ragged T, hs 32
        check_all(1, 256, 768, 12, 1000, 1024); // GPT-2's head size 64
        check_all(2, 72, 256, 2, 300, 320);     // hs 128, T ragged across two tiles
        check_all(1, 130, 192, 4, 200, 256);    // hs 48 (runs padded to 64), C not a multiple of 64, B*T odd-sized
        check_all(3, 37, 48, 3, 77, 128);       // hs 16, C not a multiple of 64, B*T = 111 rows (no block size divides it)
        check_rows(8, 256, 64);    // 2048 rows: several rows per warp of LayerNorm's backward chunks (64 x 8 warps)
        check_rows(3, 200, 1024);  // C = 1024: LayerNorm's backward over 48 KiB of shared memory
        check_llama();
        check_vocab(2, 40, 64, 70, 32, 3);  // --tp 3's vocabulary: two shards of tokens, the third 6 rows of them and padding
        check_vocab(1, 64, 36, 60, 64, 2);  // the second shard all padding; C 36: 16-bit rows not in 16-byte vectors
    }
    check_stochastic_rounding();
    check_backend();
    for (int i = 0; i < 3; i++) check_multi_adamw(precs[i]);
    check_verdict();
    check_unbiased_updates();
    check_rounding_per_element();
    printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
