// cuda/matmul.cuh: the CUDA build's matmuls (train_gpt.cu, called by model.h) on cuBLASLt, with the plan
// cache that keeps each distinct call's descriptor, layouts and algorithm. The handle and workspace are made
// by backend_init (cuda/backend.cuh).
#ifndef CUDA_MATMUL_CUH
#define CUDA_MATMUL_CUH

#include <cublasLt.h>
#include "common.cuh"
#include "layernorm.cuh"  // column_sums, for the bias gradient

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

// D (m x n, column-major) = op(A) op(B) + beta D [+ bias per row of D]. A and B are floatX; D is
// floatX, or float when d_float (weight gradients, accumulated with beta = 1). fp32 accumulation.
// A matmul's plan: descriptor, layouts and the heuristic's algorithm, made once per distinct call and
// kept (about a dozen runtime calls and a heuristic query otherwise, every matmul of every micro-batch).
// Everything that decides them is in the key; the bias pointer is the only per-call attribute.
typedef struct {
    int m, n, k, lda, ldb, ldd, trans_a, trans_b, d_float, bias, prec, tf32;
    uint32_t align[3];
} MatmulKey;
typedef struct {
    MatmulKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} MatmulPlan;
static MatmulPlan *matmul_plans = NULL;
static int matmul_nplans = 0, matmul_cap = 0;

static MatmulPlan *matmul_plan(const MatmulKey *key) {
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
    if (key->bias) {  // fused into the epilogue: no separate pass over the output
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, xt, key->trans_a ? key->k : key->m, key->trans_a ? key->m : key->k, key->lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, xt, key->trans_b ? key->n : key->k, key->trans_b ? key->k : key->n, key->ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, dt, key->m, key->n, key->ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    uint32_t al[4] = {key->align[0], key->align[1], key->align[2], key->align[2]};
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // NOT_SUPPORTED is the heuristic's way of saying "no algorithm": report the shape, not a status code
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &heur,
                                                       &found);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0))
        fatal("cuBLASLt has no algorithm for a %dx%dx%d matmul (transa %d, transb %d, precision %d, alignments %u %u %u)",
              key->m, key->n, key->k, key->trans_a, key->trans_b, key->prec, al[0], al[1], al[2]);
    cublasCheck(st);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    p->algo = heur.algo;
    matmul_nplans++;
    return p;
}

// D (m x n, column-major, leading dimension ldd) = op(A) op(B) (+ bias along D's rows) + beta D.
static void cublaslt_matmul(void *d, int d_float, const floatX *a, const floatX *b, const floatX *bias, int m, int n,
                            int k, int lda, int ldb, int ldd, int trans_a, int trans_b, float beta) {
    MatmulKey key;
    memset(&key, 0, sizeof(key));  // the key is compared bytewise, padding included
    key.m = m; key.n = n; key.k = k; key.lda = lda; key.ldb = ldb; key.ldd = ldd;
    key.trans_a = trans_a; key.trans_b = trans_b; key.d_float = d_float; key.bias = bias != NULL;
    key.prec = x_prec; key.tf32 = use_tf32;
    key.align[0] = ptr_alignment(a); key.align[1] = ptr_alignment(b); key.align[2] = ptr_alignment(d);
    MatmulPlan *p = matmul_plan(&key);
    if (bias) cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(cublaslt_handle, p->desc, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld, &p->algo,
                               cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, 0));
}

// Row-major out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias. Column-major, that is
// out^T (OC x N) = W (OC x C, W's rows read as a C x OC column-major matrix, transposed) inp^T.
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C, int OC) {
    cublaslt_matmul(out, 0, weight, inp, bias, OC, N, C, C, C, OC, 1, 0, 0.0f);
}

// dinp = dout @ weight (overwritten), dweight += dout^T @ inp (fp32), dbias += column sums of dout.
static void matmul_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                            const floatX *weight, int N, int C, int OC) {
    cublaslt_matmul(dinp, 0, weight, dout, NULL, C, N, OC, C, OC, C, 0, 0, 0.0f);
    cublaslt_matmul(dweight, 1, inp, dout, NULL, C, OC, N, C, OC, C, 0, 1, 1.0f);
    if (dbias) column_sums(NULL, dbias, dout, NULL, NULL, NULL, N, OC);
}

#endif  // CUDA_MATMUL_CUH
