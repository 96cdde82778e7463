// cuda/matmul.cuh: the CUDA build's matmuls (train_gpt.cu, called by model.h) on cuBLASLt, with the plan
// cache that keeps each distinct call's descriptor, layouts and algorithm. The handle and workspace are made
// by backend_init (cuda/backend.cuh).
#ifndef CUDA_MATMUL_CUH
#define CUDA_MATMUL_CUH

#include <cublasLt.h>
#include "common.cuh"
#include "norms.cuh"  // column_sums, for the bias gradient when the epilogue does not make it
#include "activations.cuh"  // the separate kernels, where cuBLASLt has no algorithm for a fused epilogue

static void cublas_check(cublasStatus_t status, const char *file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) fatal_at(file, line, "cuBLASLt: status %d", (int)status);
}
#define cublasCheck(status) cublas_check((status), __FILE__, __LINE__)

static cublasLtHandle_t cublaslt_handle;
static void *cublaslt_workspace = NULL;
static const size_t CUBLASLT_WORKSPACE_BYTES = 32u << 20;
static int use_tf32 = 0;  // fp32 matmuls in TF32 (--tf32), set by backend_set_precision

// The largest power of two (up to 256) that divides a pointer: cuBLASLt must not pick a kernel that
// assumes more alignment than a buffer has.
static uint32_t ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al != 0) al >>= 1;
    return al;
}

static cudaDataType_t x_cuda_type(void) {
    return x_prec == PREC_BF16 ? CUDA_R_16BF : x_prec == PREC_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

// The fusions into cuBLASLt's epilogues, each switchable so that a GPU run can time it both ways (environment,
// read by backend_init; the README's "Matmul epilogues"):
//   TRAIN_GPT_BGRAD=0|1 (1)    bias gradients by the weight-gradient matmul (BGRADB), not column_sums' two kernels
//   TRAIN_GPT_GELU_FUSION=0|1 (0)      GELU in the fc matmul (GELU_AUX_BIAS) and its gradient in the backward (DGELU)
//   TRAIN_GPT_RESIDUAL_FUSION=0|1 (0)  the residual added by the projections' matmuls (beta = 1 onto it)
// The GELU and residual fusions round once where the separate kernels round twice (the fp32 accumulator goes
// through GELU or the add before it becomes bf16), so they change the numbers slightly; model.h asks
// backend_fuses_gelu / backend_fuses_residual which way to go.
static int fuse_bgrad = 1, fuse_gelu = 0, fuse_residual = 0;
static void matmul_read_switches(void) {
    fuse_bgrad = switch_env("TRAIN_GPT_BGRAD", 1);
    fuse_gelu = switch_env("TRAIN_GPT_GELU_FUSION", 0);
    fuse_residual = switch_env("TRAIN_GPT_RESIDUAL_FUSION", 0);
}
static int backend_fuses_gelu(void) { return fuse_gelu; }
static int backend_fuses_residual(void) { return fuse_residual; }

// What a matmul's epilogue does after the product (cublasLtEpilogue_t): the bias added to D's rows; that and GELU,
// GELU's input kept in an aux matrix; D times GELU's derivative at an aux matrix; the bias gradient op(B)'s columns
// summed over k (written, not accumulated).
typedef enum { EPI_NONE, EPI_BIAS, EPI_GELU_AUX_BIAS, EPI_DGELU, EPI_BGRADB } MatmulEpi;
static cublasLtEpilogue_t epi_cublaslt(int e) {
    switch (e) {
    case EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case EPI_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

// D (m x n, column-major) = op(A) op(B) + beta C, then the epilogue. A and B are floatX; C and D are floatX, or
// float when d_float (weight gradients, accumulated with beta = 1 onto D itself). fp32 accumulation.
// A matmul's plan: descriptor, layouts and the heuristic's algorithm, made once per distinct call and
// kept (about a dozen runtime calls and a heuristic query otherwise, every matmul of every micro-batch).
// Everything that decides them is in the key; the bias pointer is the only per-call attribute.
typedef struct {
    int m, n, k, lda, ldb, ldd, trans_a, trans_b, d_float, epi, prec, tf32;
    uint32_t align[6];  // A, B, C, D, the bias (or its gradient), the aux matrix: the heuristic reads the pointers'
} MatmulKey;
typedef struct {
    MatmulKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    int ok;  // 0: no algorithm for this fused epilogue; the caller runs the separate kernels
} MatmulPlan;
static MatmulPlan *matmul_plans = NULL;
static int matmul_nplans = 0, matmul_cap = 0;

// The epilogue of one call and its operands: the bias (EPI_BIAS, EPI_GELU_AUX_BIAS) or the bias gradient's output
// (EPI_BGRADB, OC floats), and GELU's input (written by EPI_GELU_AUX_BIAS, read by EPI_DGELU).
typedef struct {
    int epi;
    const void *bias;
    void *aux;
} Epilogue;
static const Epilogue NO_EPILOGUE = {EPI_NONE, NULL, NULL};

// cublasLt.h: the heuristic "depends on [the bias and aux pointers'] value to determine expected pointer
// alignment", so they are set before it is asked (and every call sets its own).
static void matmul_set_pointers(cublasLtMatmulDesc_t desc, Epilogue e) {
    if (e.bias) cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias, sizeof(e.bias)));
    if (e.aux) cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.aux, sizeof(e.aux)));
}

static MatmulPlan *matmul_plan(const MatmulKey *key, Epilogue e) {
    for (int i = 0; i < matmul_nplans; i++)
        if (memcmp(&matmul_plans[i].key, key, sizeof(*key)) == 0) return &matmul_plans[i];
    if (matmul_nplans == matmul_cap) {
        matmul_cap = matmul_cap ? 2 * matmul_cap : 64;
        matmul_plans = (MatmulPlan *)realloc(matmul_plans, matmul_cap * sizeof(MatmulPlan));
        if (!matmul_plans) fatal("out of host memory for cuBLASLt plans");
    }
    MatmulPlan *p = &matmul_plans[matmul_nplans];
    p->key = *key;
    cublasComputeType_t compute = key->prec == PREC_FP32 && key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t xt = x_cuda_type(), dt = key->d_float ? CUDA_R_32F : xt;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
    cublasOperation_t ta = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (key->epi != EPI_NONE) {  // fused into the epilogue: no separate pass over the output
        cublasLtEpilogue_t epi = epi_cublaslt(key->epi);
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    if (key->epi == EPI_GELU_AUX_BIAS || key->epi == EPI_DGELU) {  // GELU's input: laid out as D
        int64_t aux_ld = key->ldd;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    matmul_set_pointers(p->desc, e);
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, xt, key->trans_a ? key->k : key->m, key->trans_a ? key->m : key->k, key->lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, xt, key->trans_b ? key->n : key->k, key->trans_b ? key->k : key->n, key->ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, dt, key->m, key->n, key->ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    const uint32_t *al = key->align;
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // NOT_SUPPORTED is the heuristic's way of saying "no algorithm": report the shape, not a status code
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &heur,
                                                       &found);
    p->ok = !(st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0));
    if (!p->ok && key->epi > EPI_BIAS) {  // a fusion this cuBLASLt lacks: not an error, the separate kernels do it
        fprintf(stderr, "warning: cuBLASLt has no algorithm for epilogue %d on a %dx%dx%d matmul; running the separate kernels\n",
                (int)epi_cublaslt(key->epi), key->m, key->n, key->k);
        cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
        matmul_nplans++;
        return p;
    }
    if (!p->ok)
        fatal("cuBLASLt has no algorithm for a %dx%dx%d matmul (transa %d, transb %d, precision %d, alignments %u %u %u)",
              key->m, key->n, key->k, key->trans_a, key->trans_b, key->prec, al[0], al[1], al[3]);
    cublasCheck(st);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    p->algo = heur.algo;
    matmul_nplans++;
    return p;
}

// D (m x n, column-major, leading dimension ldd) = alpha op(A) op(B) + beta C, then the epilogue; C (NULL: D) has D's
// layout. Returns 0, doing nothing, where cuBLASLt has no algorithm for the fused epilogue.
static int cublaslt_matmul_scaled(void *d, int d_float, const floatX *a, const floatX *b, const void *c, int m, int n, int k,
                                  int lda, int ldb, int ldd, int trans_a, int trans_b, float alpha, float beta, Epilogue e) {
    if (!c) c = d;
    MatmulKey key;
    memset(&key, 0, sizeof(key));  // the key is compared bytewise, padding included
    key.m = m; key.n = n; key.k = k; key.lda = lda; key.ldb = ldb; key.ldd = ldd;
    key.trans_a = trans_a; key.trans_b = trans_b; key.d_float = d_float; key.epi = e.epi;
    key.prec = x_prec; key.tf32 = use_tf32;
    key.align[0] = ptr_alignment(a); key.align[1] = ptr_alignment(b); key.align[2] = ptr_alignment(c); key.align[3] = ptr_alignment(d);
    key.align[4] = e.bias ? ptr_alignment(e.bias) : 0; key.align[5] = e.aux ? ptr_alignment(e.aux) : 0;
    MatmulPlan *p = matmul_plan(&key, e);
    if (!p->ok) return 0;
    matmul_set_pointers(p->desc, e);
    cublasCheck(cublasLtMatmul(cublaslt_handle, p->desc, &alpha, a, p->la, b, p->lb, &beta, c, p->ld, d, p->ld, &p->algo,
                               cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, main_stream));
    return 1;
}
// The model's products: alpha 1.
static int cublaslt_matmul(void *d, int d_float, const floatX *a, const floatX *b, const void *c, int m, int n, int k,
                           int lda, int ldb, int ldd, int trans_a, int trans_b, float beta, Epilogue e) {
    return cublaslt_matmul_scaled(d, d_float, a, b, c, m, n, k, lda, ldb, ldd, trans_a, trans_b, 1.0f, beta, e);
}

// Row-major out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias. Column-major, that is
// out^T (OC x N) = W (OC x C, W's rows read as a C x OC column-major matrix, transposed) inp^T.
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C, int OC) {
    Epilogue e = {bias ? EPI_BIAS : EPI_NONE, bias, NULL};
    cublaslt_matmul(out, 0, weight, inp, NULL, OC, N, C, C, C, OC, 1, 0, 0.0f, e);
}

// out = gelu(pre), pre = inp @ weight^T + bias, in one matmul: GELU on the fp32 accumulator (rounded once), its
// input kept for the backward's DGELU.
static void matmul_forward_gelu(floatX *out, floatX *pre, const floatX *inp, const floatX *weight, const floatX *bias, int N,
                                int C, int OC) {
    Epilogue e = {EPI_GELU_AUX_BIAS, bias, pre};
    if (cublaslt_matmul(out, 0, weight, inp, NULL, OC, N, C, C, C, OC, 1, 0, 0.0f, e)) return;
    matmul_forward(pre, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre, (long)N * OC);
}

// out = residual + inp @ weight^T + bias, in one matmul (beta = 1 onto the residual, which cuBLASLt adds before the
// bias; rounded once).
static void matmul_forward_residual(floatX *out, const floatX *residual, const floatX *inp, const floatX *weight,
                                    const floatX *bias, int N, int C, int OC) {
    Epilogue e = {bias ? EPI_BIAS : EPI_NONE, bias, NULL};
    cublaslt_matmul(out, 0, weight, inp, residual, OC, N, C, C, C, OC, 1, 0, 1.0f, e);  // BIAS: always has an algorithm
}

__global__ void accumulate_kernel(float *dst, const float *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

// dweight += dout^T @ inp (fp32), and dbias += dout's column sums: BGRADB writes them (op(B) = dout, summed over k =
// the N rows) to scratch, one small kernel adds them (cuBLASLt overwrites, our gradients accumulate over
// micro-batches); or, TRAIN_GPT_BGRAD=0, column_sums.
static void matmul_backward_weight(float *dweight, float *dbias, const floatX *dout, const floatX *inp, int N, int C, int OC) {
    if (dbias && fuse_bgrad) {
        float *bgrad = scratch_get(OC);
        Epilogue e = {EPI_BGRADB, bgrad, NULL};
        if (cublaslt_matmul(dweight, 1, inp, dout, NULL, C, OC, N, C, OC, C, 0, 1, 1.0f, e)) {
            LAUNCH(ceil_div(OC, 256), 256, 0, main_stream, accumulate_kernel)(dbias, bgrad, OC);
            launchCheck();
            return;
        }
    }
    cublaslt_matmul(dweight, 1, inp, dout, NULL, C, OC, N, C, OC, C, 0, 1, 1.0f, NO_EPILOGUE);
    if (dbias) column_sums(NULL, dbias, dout, NULL, NULL, NULL, N, OC);
}

// dinp = dout @ weight (overwritten), dweight += dout^T @ inp (fp32), dbias += column sums of dout. dinp NULL: the
// weight's gradient alone; dweight NULL: the input's alone (no bias gradient either: cpu/matmul.h).
static void matmul_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                            const floatX *weight, int N, int C, int OC) {
    if (dinp) cublaslt_matmul(dinp, 0, weight, dout, NULL, C, N, OC, C, OC, C, 0, 0, 0.0f, NO_EPILOGUE);
    if (dweight) matmul_backward_weight(dweight, dbias, dout, inp, N, C, OC);
}

// matmul_backward of a layer whose input was gelu(pre): dinp = (dout @ weight) * gelu'(pre), the GELU backward in the
// epilogue (DGELU, on the fp32 product: rounded once), so dinp is the gradient of pre.
static void matmul_backward_dgelu(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                                  const floatX *weight, const floatX *pre, int N, int C, int OC) {
    Epilogue e = {EPI_DGELU, NULL, (void *)pre};
    if (!cublaslt_matmul(dinp, 0, weight, dout, NULL, C, N, OC, C, OC, C, 0, 0, 0.0f, e)) {
        cublaslt_matmul(dinp, 0, weight, dout, NULL, C, N, OC, C, OC, C, 0, 0, 0.0f, NO_EPILOGUE);
        gelu_backward(dinp, pre, dinp, (long)N * C);  // in place: each value read before it is written
    }
    matmul_backward_weight(dweight, dbias, dout, inp, N, C, OC);
}

#endif  // CUDA_MATMUL_CUH
