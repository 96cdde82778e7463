// dev/cuda/kernels.cu: every kernel of ./train_gpt against the CPU build's kernel (cpu/, the
// reference), in each precision, and a benchmark of each at GPT-2 124M's shapes. Built and run by
// `make test-gpu` (check) and `make bench` (bench):
//   make dev/cuda/kernels && ./dev/cuda/kernels check     # PASS/FAIL per kernel and precision
//   ./dev/cuda/kernels check llama                         # only the Llama family's (cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh, GQA)
//   ./dev/cuda/kernels check muon                          # only Muon's (cuda/muon.cuh: momentum, step, Newton-Schulz)
//   ./dev/cuda/kernels check classifier                    # only the classifier on sharp 50k-wide rows
//   ./dev/cuda/kernels check edges                         # the layers' kernels at the shapes of their edges (below)
//                                                          # (--tp's vocabulary-parallel kernels: kernels_vocab.h)
//   ./dev/cuda/kernels bench                               # ms and GB/s or TFLOP/s per kernel, bf16
//                                                          # (fused epilogues and staged classifier beside the unfused)
// Inputs are random; in bf16 and fp16 they are rounded to that precision first, so both sides see
// the same numbers and the difference is the GPU's rounding of outputs and intermediates.
#include "cuda/common.cuh"
#include "cuda/encoder.cuh"
#include "cuda/norms.cuh"
#include "cuda/matmul.cuh"
#include "cuda/attention.cuh"
#include "cuda/activations.cuh"
#include "cuda/classifier.cuh"
#include "cuda/backend.cuh"
#include "cuda/rope.cuh"
#include "cuda/decode.cuh"
#include <omp.h>
#include "cpu/gemm.h"
// The CPU build's kernels and backend (cpu/), the reference. The two builds implement one contract (backend.h),
// so their functions have the same names: the CPU's are put in a namespace of their own and called as
// cpu::matmul_forward beside the CUDA build's matmul_forward. What cpu/ includes (the C library, omp.h, utils.h,
// gpt2.h) is already included above, so only cpu/'s own definitions land in the namespace; the two macros both
// define (GELU_SCALING_FACTOR, NORM_CHUNK) are the same constants, which C++ allows.
namespace cpu {
#include "cpu/encoder.h"
#include "cpu/norms.h"
#include "cpu/matmul.h"
#include "cpu/attention.h"
#include "cpu/activations.h"
#include "cpu/classifier.h"
#include "cpu/backend.h"
}
// The Llama family's CPU reference kernels (check_llama below), in the same namespace (a no-op where train_gpt.c
// already brought them in).
namespace cpu {
#include "cpu/rope.h"
}
// Muon's device arithmetic after them: its host tier is cpu/muon_host.h's, global beside cuda/muon.cuh's and on the
// global gemm (cpu/gemm.h, included before the namespace, so that cpu/matmul.h finds it there too); backend.h, which
// the namespace already holds, is not included again.
#include "cuda/muon.cuh"

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
// cuBLASLt's DGELU epilogue computes GELU's slope its own way (not the CPU build's tanh formula): on the H200
// (2026-11-27) its fp32 output sat 1.02e-5 from the CPU build's and 1.03e-5 from matmul + gelu_backward, over
// tol()'s 1e-5, while every other fp32 kernel stayed under 1.2e-6. The bound is three times that worst, as for every
// tolerance here; bf16 and fp16 keep theirs (their roundings are far larger than the slope's difference).
static double dgelu_bound(double base) { return x_prec == PREC_FP32 ? 3e-5 : base; }

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
    expect("matmul_backward_dgelu dinp (DGELU epilogue)", rel_err(g, dinp, n4), dgelu_bound(tol()));
    float *hW = (float *)mallocCheck((size_t)IC * C * 4);
    from_dev_f(hW, ddW, (size_t)IC * C);
    expect("matmul_backward_dgelu dweight", rel_err(hW, dW, (size_t)IC * C), tol());
    from_dev_f(hW, ddB, C);
    expect("matmul_backward_dgelu dbias", rel_err(hW, dB, C), tol());
    float *scratch_w = to_dev_f(dW, (size_t)IC * C);
    matmul_backward(ddg, scratch_w, NULL, k->ddout, dout, dw2, (int)BT, IC, C);
    gelu_backward(ddinp2, dpre, ddg, (long)n4);
    from_dev_x(g2, ddinp2, n4);
    expect("matmul_backward_dgelu vs matmul + gelu_backward (rounding)", rel_err(g, g2, n4), dgelu_bound(fused_bound()));
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
    attention_forward(datty, lse, dqkv_in, B, T, C, NH, NULL);
    cpu::attention_forward(r1, att, qkv, B, T, C, NH, NULL);
    from_dev_x(g1, datty, n);
    expect("attention_forward (flash)", rel_err(g1, r1, n), tol());
    float *dq = (float *)mallocCheck(BT * OC * 4), *gq = (float *)mallocCheck(BT * OC * 4);
    floatX *ddq = to_dev_x(dq, BT * OC);
    attention_backward(ddq, ddout, dqkv_in, datty, lse, B, T, C, NH, NULL);
    cpu::attention_backward(dq, dout, qkv, r1, att, B, T, C, NH, NULL);
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
    // both sum the row in double (the logits rounded to the precision alike): 1e-6 in every precision (9e-8 seen)
    expect("classifier losses", rel_err(gl, hl, BT), 1e-6);
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

// Sharp rows, as a trained model gives them (not random init's nearly flat ones): GPT-2's padded vocabulary (50,257
// of 50,304 columns), a bulk normal around 0, 20 likely tokens up to `top` nats above it and one above those; the
// target the top token, a likely one or one of the bulk (losses from ~0.003 to ~30). A float running sum of such a
// row's exponentials loses the small terms' low bits at every add (the CPU build's old sum: 5.7e-4 relative).
// Each row's loss and dlogits against long double on the same logits (rounded to the precision first, as the
// device reads them). The loss is float/double arithmetic in every precision (the logits are only read in it):
// within 1e-6 relative of long double's, row by row; dlogits within tol() of the tensor's scale.
static void check_classifier_sharp(void) {
    const int N = 12, V = 50257, Vp = 50304;
    const float dloss = 1.0f / N;
    const size_t nl = (size_t)N * Vp;
    float *h = (float *)mallocCheck(nl * 4), *g = (float *)mallocCheck(nl * 4), *gl = (float *)mallocCheck(N * 4);
    float *ref = (float *)mallocCheck(nl * 4);
    long double *ref_loss = (long double *)mallocCheck(N * sizeof(long double));
    int tok[N], *dtok;
    for (int i = 0; i < N; i++) {
        float *row = h + (size_t)i * Vp;
        const double sd = 1.5 + i % 3, top = 18.0 + 4 * (i % 4);
        for (int v = 0; v < Vp; v++) {
            double u = random_f32(&rng_state) + 1e-9, w = random_f32(&rng_state);
            row[v] = round_x((float)(sd * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * w)));
        }
        int best = (int)(random_u32(&rng_state) % V), likely = best;
        for (int k = 0; k < 20; k++)
            row[likely = (int)(random_u32(&rng_state) % V)] = round_x((float)(top - (i % 2 ? 14.0 : 8.0) + 7.0 * random_f32(&rng_state)));
        row[best] = round_x((float)top);
        tok[i] = i % 3 == 0 ? best : i % 3 == 1 ? likely : (int)(random_u32(&rng_state) % V);
        long double m = -INFINITY, sum = 0.0L;
        for (int v = 0; v < V; v++) m = fmaxl(m, row[v]);
        for (int v = 0; v < V; v++) sum += expl((long double)row[v] - m);
        ref_loss[i] = logl(sum) + m - row[tok[i]];
        for (int v = 0; v < Vp; v++) ref[(size_t)i * Vp + v] = v < V ? (float)(expl((long double)row[v] - m) / sum * dloss) : 0.0f;
        ref[(size_t)i * Vp + tok[i]] = (float)(expl((long double)row[tok[i]] - m) / sum * dloss - dloss);
    }
    cudaCheck(cudaMalloc(&dtok, sizeof(tok)));
    cudaCheck(cudaMemcpy(dtok, tok, sizeof(tok), cudaMemcpyHostToDevice));
    floatX *x = to_dev_x(h, nl);
    float *losses;
    cudaCheck(cudaMalloc(&losses, N * 4));
    classifier_forward_backward(x, losses, dtok, N, V, Vp, dloss);
    from_dev_f(gl, losses, N);
    from_dev_x(g, x, nl);
    double loss_err = 0.0;
    for (int i = 0; i < N; i++) loss_err = fmax(loss_err, (double)(fabsl(gl[i] - ref_loss[i]) / ref_loss[i]));
    expect("classifier losses, sharp 50k rows vs long double", loss_err, 1e-6);
    expect("classifier dlogits, sharp 50k rows vs long double", rel_err(g, ref, nl), tol());
    cudaCheck(cudaFree(x)); cudaCheck(cudaFree(losses)); cudaCheck(cudaFree(dtok));
    free(h); free(g); free(gl); free(ref); free(ref_loss);
}

// ---- the Llama family: cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh and grouped-query attention against cpu/norms.h, cpu/rope.h, cpu/activations.h ----
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

// RoPE's angle tables on the host by the CPU build's rope_table (arch/rope.h's; where arch.h holds it, outside
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
    // GeGLU (--mlp geglu) on the same packed input and output gradient
    geglu_forward(dso, dfc, BT, H);
    cpu::geglu_forward(so, fc, BT, H);
    from_dev_x(sg, dso, n1);
    expect("geglu_forward", rel_err(sg, so, n1), tol());
    floatX *dgi = to_dev_x(fc, n2);
    geglu_backward(dgi, dsd, dfc, BT, H);
    cpu::geglu_backward(so, sd, fc, BT, H);
    from_dev_x(sg, dgi, n2);
    expect("geglu_backward dinp (up | gate)", rel_err(sg, so, n2), tol());
}

// Grouped-query attention (backend.h's attention_gqa_*: cuda/attention.cuh's flash kernels, cuda/decode.cuh's decoder)
// against cpu/attention.h's gqa_attention_*, on a
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
    attention_gqa_forward(dout_x, lse, dqkv_in, B, T, NH, KV, hd, NULL, NULL, NULL);
    cpu::gqa_attention_forward(out, att, qkv, B, T, NH, KV, hd, NULL);
    from_dev_x(g, dout_x, no);
    snprintf(what, sizeof(what), "attention_gqa_forward NH=%d KV=%d hd=%d", NH, KV, hd);
    expect(what, rel_err(g, out, no), tol());
    attention_gqa_backward(ddq, ddout, dqkv_in, dout_x, lse, B, T, NH, KV, hd, NULL, NULL, NULL);
    cpu::gqa_attention_backward(dq, dout, qkv, att, B, T, NH, KV, hd, NULL);
    from_dev_x(g, ddq, nq);
    snprintf(what, sizeof(what), "attention_gqa_backward dqkv NH=%d KV=%d hd=%d", NH, KV, hd);
    expect(what, rel_err(g, dq, nq), tol());
    if (KV == NH) {  // GPT-2's launchers on the same inputs: the same bits
        floatX *o2 = to_dev_x(out, no), *d2 = to_dev_x(dq, nq);
        float *lse2 = zeros_dev_f((size_t)B * NH * T);
        attention_forward(o2, lse2, dqkv_in, B, T, C, NH, NULL);
        attention_backward(d2, ddout, dqkv_in, o2, lse2, B, T, C, NH, NULL);
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
    attention_gqa_decode(dec, (const floatX *)((const char *)dqkv_in + (size_t)t * R * x_bytes), kc, vc, t, NH, KV, hd, NULL);
    cpu::gqa_attention_decode(out, qkv + (size_t)t * R, hk, hv, t, NH, KV, hd, NULL);
    from_dev_x(g, dec, C);
    snprintf(what, sizeof(what), "attention_gqa_decode (kv_cache_store) at t=%d KV=%d", t, KV);
    expect(what, rel_err(g, out, C), tol());
    if (KV == NH && B == 1) {  // GPT-2's decoder reads the qkv rows themselves: the same bits
        floatX *dec2 = to_dev_x(out, C);
        attention_decode(dec2, dqkv_in, t, C, NH, NULL);
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
    cpu::gqa_attention_forward(out, att, rot, B, T, NH, KV, hd, NULL);
    cpu::gqa_attention_backward(dq, dout, rot, att, B, T, NH, KV, hd, NULL);
    cpu::rope_backward(dq, ct, st, B, T, NH, KV, hd);
    // fused: the tables go to attention, qkv stays unrotated
    floatX *dqkv = to_dev_x(qkv, nq), *ddout = to_dev_x(dout, no), *o1 = to_dev_x(out, no), *d1 = to_dev_x(dq, nq);
    float *lse1 = zeros_dev_f((size_t)B * NH * T);
    attention_gqa_forward(o1, lse1, dqkv, B, T, NH, KV, hd, dct, dst, NULL);
    from_dev_x(g, o1, no);
    snprintf(what, sizeof(what), "attention_gqa_forward + RoPE on load NH=%d KV=%d hd=%d T=%d", NH, KV, hd, T);
    expect(what, rel_err(g, out, no), tol());
    attention_gqa_backward(d1, ddout, dqkv, o1, lse1, B, T, NH, KV, hd, dct, dst, NULL);
    from_dev_x(g, d1, nq);
    snprintf(what, sizeof(what), "attention_gqa_backward + RoPE^T on write NH=%d KV=%d hd=%d T=%d", NH, KV, hd, T);
    expect(what, rel_err(g, dq, nq), tol());
    // the separate passes on a copy: the same bits. With RoPE in its loads the 16-bit backward is always the fused
    // kernel (cuda/attention.cuh), so the passes' backward runs that kernel too (the default two-pass one sums dQ
    // in another order)
    floatX *dqkv2 = to_dev_x(qkv, nq), *o2 = to_dev_x(out, no), *d2 = to_dev_x(dq, nq);
    float *lse2 = zeros_dev_f((size_t)B * NH * T);
    rope_forward(dqkv2, dct, dst, B, T, NH, KV, hd);
    attention_gqa_forward(o2, lse2, dqkv2, B, T, NH, KV, hd, NULL, NULL, NULL);
    WITH_X({
        float *ws = zeros_dev_f(attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH, ATT_BWD_FUSED));
        flash_attention_backward((xt *)d2, ws, (const xt *)ddout, (const xt *)dqkv2, (const xt *)o2, lse2, B, T, C, NH,
                                 main_stream, KV, nullptr, nullptr, ATT_BWD_FUSED);
        cudaCheck(cudaFree(ws));
    });
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

// The step's update and the backend's own kernels; the benchmarks (`bench`).
#include "kernels_update.cuh"
#include "kernels_bench.cuh"

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
    if (argc > 2 && strcmp(argv[2], "classifier") == 0) {  // `check classifier`: only the sharp rows' classifier check
        for (int i = 0; i < 3; i++) {
            x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
            check_classifier_sharp();
        }
        printf("%d passed, %d failed\n", passes, fails);
        return fails ? 1 : 0;
    }
    if (argc > 2 && strcmp(argv[2], "muon") == 0) {  // `check muon`: only Muon's (its momentum, step, Newton-Schulz)
        for (int i = 0; i < 3; i++) check_muon(precs[i]);
        printf("%d passed, %d failed\n", passes, fails);
        return fails ? 1 : 0;
    }
    if (argc > 2 && strcmp(argv[2], "llama") == 0) {  // `check llama`: only the Llama family's kernels
        for (int i = 0; i < 3; i++) {
            x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
            check_llama();
        }
        printf("%d passed, %d failed\n", passes, fails);
        return fails ? 1 : 0;
    }
    // `check edges`: what the emulated suite runs again in other thread and block orders, under AddressSanitizer and
    // (with `check muon` and `check classifier`) under the race detector, after the whole check in the forward order.
    // The layers' kernels (check_all's, the Llama family's, --tp's vocabulary kernels, the backend's reductions), each
    // at the shapes that reach its edges: ragged T across tiles, head sizes 32, 48 (padded) and 128, C not a multiple
    // of 64, B*T that no block size divides, LayerNorm's backward past 48 KiB of shared memory; and the update's ragged
    // and misaligned segments (AdamW, the verdict). Left to the whole check: the aligned shapes (the test model's,
    // GPT-2's head size 64 at T = 256, 2048 rows), the sharp 50k rows, Muon and the rounding statistics (256 updates of
    // 4096 elements), whose threads share nothing that an order could change; under the race detector, edges + muon +
    // classifier launch the same 171 kernel instantiations as the whole check (counted 2026-12-07, issue 52).
    if (argc > 2 && strcmp(argv[2], "edges") == 0) {
        for (int i = 0; i < 3; i++) {
            x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
            check_all(2, 100, 128, 4, 500, 512);   // ragged T, hs 32
            check_all(2, 72, 256, 2, 300, 320);    // hs 128, T ragged across two tiles
            check_all(1, 130, 192, 4, 200, 256);   // hs 48 (padded to 64), C not a multiple of 64, B*T odd-sized
            check_all(3, 37, 48, 3, 77, 128);      // hs 16, C not a multiple of 64, B*T = 111 rows
            check_rows(3, 200, 1024);              // LayerNorm's backward over 48 KiB of shared memory
            check_llama();
            check_vocab(2, 40, 64, 70, 32, 3);
            check_vocab(1, 64, 36, 60, 64, 2);
        }
        check_backend();
        for (int i = 0; i < 3; i++) check_multi_adamw(precs[i]);
        check_verdict();
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
        check_classifier_sharp();
        check_llama();
        check_vocab(2, 40, 64, 70, 32, 3);  // --tp 3's vocabulary: two shards of tokens, the third 6 rows of them and padding
        check_vocab(1, 64, 36, 60, 64, 2);  // the second shard all padding; C 36: 16-bit rows not in 16-byte vectors
    }
    check_stochastic_rounding();
    check_backend();
    for (int i = 0; i < 3; i++) check_multi_adamw(precs[i]);
    for (int i = 0; i < 3; i++) check_muon(precs[i]);
    check_verdict();
    check_unbiased_updates();
    check_rounding_per_element();
    printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
