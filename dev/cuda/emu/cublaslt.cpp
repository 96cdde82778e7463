// dev/cuda/emu/cublaslt.cpp: the cuBLASLt calls the trainer makes, on the CPU, to NVIDIA's documented semantics.
// Sources (the facts only; the code is ours):
//   - cublasLt.h of the CUDA toolkit (its comments are the API reference): cublasLtMatmul computes
//     D = alpha * op(A) * op(B) + beta * C; a handle that cublasLtCreate did not return is
//     CUBLAS_STATUS_NOT_INITIALIZED; CUBLASLT_MATRIX_LAYOUT_LD is the stride of a column (CUBLASLT_ORDER_COL, the
//     default) and must be >= ROWS; CUBLASLT_EPILOGUE_BIAS adds a bias vector whose length is D's number of rows,
//     packed, broadcast to all columns, before the final postprocessing; CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
//     defaults to -1: the bias has D's type (exceptions only for integer and fp8 kernels); the MIN_ALIGNMENT
//     preferences (default 256 bytes) exclude algorithms that need more alignment than the buffers have;
//     CUBLAS_COMPUTE_32F_FAST_TF32 "allows down-converting inputs to TF32" (cublas_api.h).
//   - cuBLAS documentation, cublasLtMatmul (https://docs.nvidia.com/cuda/cublas/#cublasltmatmul): the layouts
//     describe A, B, C, D as stored, column-major, and TRANSA/TRANSB say how op(A), op(B) are read from them; C and
//     D must agree in type and shape; when beta is zero C is not read; the supported type combinations for
//     CUBLAS_COMPUTE_32F with scale type CUDA_R_32F are A/B CUDA_R_16BF with C/D CUDA_R_16BF or CUDA_R_32F, A/B
//     CUDA_R_16F with C/D CUDA_R_16F or CUDA_R_32F, and all CUDA_R_32F; CUBLAS_COMPUTE_32F_FAST_TF32 takes CUDA_R_32F
//     throughout. Combinations outside these are refused with CUBLAS_STATUS_NOT_SUPPORTED, as the library does.
//   - PTX ISA, cvt.rna.tf32.f32: TF32 keeps 10 explicit mantissa bits, rounding to nearest, ties away from zero
//     (cuBLAS does not say which rounding its TF32 kernels use; this is the hardware conversion).
//   - cublasLt.h, cublasLtEpilogue_t and the EPILOGUE_AUX attributes: GELU(_AUX)(_BIAS) apply the bias, then GELU,
//     and with _AUX write GELU's input to the aux matrix (D's type, AUX_LD divisible by 8 and >= D's rows); DGELU
//     multiplies the product by GELU's derivative at the aux matrix; BGRADA / BGRADB write the bias gradient: op(A)
//     reduced over k (a vector as long as D has rows) / op(B) reduced over k (as long as D has columns), in D's type.
// Accumulation is in fp32, in a fixed order, so results are deterministic. Anything the emulator does not implement
// (other epilogues, row-major orders, ...) is refused with a message, never computed approximately.
#include "emu.h"
#include "emu_internal.h"
#include <cublasLt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

struct cublasLtContext {
    uint32_t magic;
};
static const uint32_t HANDLE_MAGIC = 0x4c544831, DESC_MAGIC = 0x4c544432, LAYOUT_MAGIC = 0x4c544c33,
                      PREF_MAGIC = 0x4c545034, ALGO_MAGIC = 0x4c544135;

struct Desc {
    uint32_t magic;
    int32_t compute, scale, pointer_mode, transa, transb, transc, bias_type;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_batch_stride;
    void *aux;  // GELU's input: written by GELU_AUX(_BIAS), read by DGELU
    int64_t aux_ld, aux_batch_stride;
    int32_t aux_type;
};
struct Layout {
    uint32_t magic;
    int32_t type, order, batch;
    uint64_t rows, cols;
    int64_t ld, stride;
};
struct Pref {
    uint32_t magic, search;
    uint64_t max_workspace;
    uint32_t align[4];  // A, B, C, D
};
// The one algorithm our heuristic returns: the problem it was chosen for and the alignment it may assume.
struct Algo {
    uint32_t magic;
    int32_t compute, a_type, b_type, d_type;
    uint32_t align[4];
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor fits the opaque type");
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits the opaque type");
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference fits the opaque type");
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t), "algorithm fits the opaque type");

static Desc *D_(cublasLtMatmulDesc_t d) { return d && ((Desc *)d)->magic == DESC_MAGIC ? (Desc *)d : NULL; }
static Layout *L_(cublasLtMatrixLayout_t l) { return l && ((Layout *)l)->magic == LAYOUT_MAGIC ? (Layout *)l : NULL; }
static Pref *P_(cublasLtMatmulPreference_t p) { return p && ((Pref *)p)->magic == PREF_MAGIC ? (Pref *)p : NULL; }
static int live(cublasLtHandle_t h) { return h && h->magic == HANDLE_MAGIC; }

// Why a call is refused, on stderr: the real library only returns the status.
static cublasStatus_t refuse(cublasStatus_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cublasStatus_t refuse(cublasStatus_t st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: cuBLASLt: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (status %d)\n", (int)st);
    va_end(ap);
    return st;
}

static int type_bytes(int t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_16F || t == CUDA_R_16BF ? 2 : 0; }
static const char *type_str(int t) {
    return t == CUDA_R_32F ? "CUDA_R_32F" : t == CUDA_R_16F ? "CUDA_R_16F" : t == CUDA_R_16BF ? "CUDA_R_16BF" : "other";
}

// Attribute values are copied with the size the header documents; any other size is INVALID_VALUE.
template <typename T> static cublasStatus_t set(T *dst, const void *buf, size_t n, const char *what) {
    if (!buf || n != sizeof(T)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %zu bytes given, the attribute has %zu", what, n, sizeof(T));
    memcpy(dst, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasLtContext{HANDLE_MAGIC};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!live(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;  // kept, so that a later use is caught
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    emu_counts.desc++;
    Desc *x = (Desc *)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    x->magic = DESC_MAGIC;
    x->compute = compute;
    x->scale = scale;
    x->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    x->transa = x->transb = x->transc = CUBLAS_OP_N;
    x->bias_type = -1;
    x->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    x->aux_type = -1;
    *d = (cublasLtMatmulDesc_t)x;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    Desc *x = D_(d);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    x->magic = 0;
    free(x);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t n) {
    Desc *x = D_(d);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set(&x->compute, buf, n, "COMPUTE_TYPE");
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set(&x->scale, buf, n, "SCALE_TYPE");
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set(&x->pointer_mode, buf, n, "POINTER_MODE");
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(&x->transa, buf, n, "TRANSA");
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(&x->transb, buf, n, "TRANSB");
    case CUBLASLT_MATMUL_DESC_TRANSC: return set(&x->transc, buf, n, "TRANSC");
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(&x->epilogue, buf, n, "EPILOGUE");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(&x->bias, buf, n, "BIAS_POINTER");
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set(&x->bias_batch_stride, buf, n, "BIAS_BATCH_STRIDE");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(&x->bias_type, buf, n, "BIAS_DATA_TYPE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(&x->aux, buf, n, "EPILOGUE_AUX_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(&x->aux_ld, buf, n, "EPILOGUE_AUX_LD");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return set(&x->aux_batch_stride, buf, n, "EPILOGUE_AUX_BATCH_STRIDE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set(&x->aux_type, buf, n, "EPILOGUE_AUX_DATA_TYPE");
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "matmul descriptor attribute %d is not emulated", (int)attr);
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    emu_counts.desc++;
    Layout *x = (Layout *)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    *x = Layout{LAYOUT_MAGIC, (int32_t)type, CUBLASLT_ORDER_COL, 1, rows, cols, ld, 0};
    *l = (cublasLtMatrixLayout_t)x;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    Layout *x = L_(l);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    x->magic = 0;
    free(x);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t n) {
    Layout *x = L_(l);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
        uint32_t t = (uint32_t)x->type;
        cublasStatus_t st = set(&t, buf, n, "LAYOUT_TYPE");
        x->type = (int32_t)t;
        return st;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set(&x->order, buf, n, "LAYOUT_ORDER");
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return set(&x->rows, buf, n, "LAYOUT_ROWS");
    case CUBLASLT_MATRIX_LAYOUT_COLS: return set(&x->cols, buf, n, "LAYOUT_COLS");
    case CUBLASLT_MATRIX_LAYOUT_LD: return set(&x->ld, buf, n, "LAYOUT_LD");
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(&x->batch, buf, n, "LAYOUT_BATCH_COUNT");
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set(&x->stride, buf, n, "LAYOUT_STRIDED_BATCH_OFFSET");
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "matrix layout attribute %d is not emulated", (int)attr);
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    emu_counts.desc++;
    Pref *x = (Pref *)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    *x = Pref{PREF_MAGIC, CUBLASLT_SEARCH_BEST_FIT, 0, {256, 256, 256, 256}};
    *p = (cublasLtMatmulPreference_t)x;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    Pref *x = P_(p);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    x->magic = 0;
    free(x);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t n) {
    Pref *x = P_(p);
    if (!x) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set(&x->search, buf, n, "PREF_SEARCH_MODE");
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set(&x->max_workspace, buf, n, "PREF_MAX_WORKSPACE_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set(&x->align[0], buf, n, "PREF_MIN_ALIGNMENT_A_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set(&x->align[1], buf, n, "PREF_MIN_ALIGNMENT_B_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set(&x->align[2], buf, n, "PREF_MIN_ALIGNMENT_C_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set(&x->align[3], buf, n, "PREF_MIN_ALIGNMENT_D_BYTES");
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "preference attribute %d is not emulated", (int)attr);
    }
}

}  // extern "C"

// The epilogues emulated (cublasLt.h's cublasLtEpilogue_t), as flags: what each one does after the product.
enum { EPI_BIAS = 1, EPI_GELU = 2, EPI_AUX_OUT = 4, EPI_DGELU = 8, EPI_BGRADA = 16, EPI_BGRADB = 32 };
static int epilogue_flags(uint32_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return 0;
    case CUBLASLT_EPILOGUE_BIAS: return EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU: return EPI_GELU;
    case CUBLASLT_EPILOGUE_GELU_BIAS: return EPI_BIAS | EPI_GELU;
    case CUBLASLT_EPILOGUE_GELU_AUX: return EPI_GELU | EPI_AUX_OUT;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return EPI_BIAS | EPI_GELU | EPI_AUX_OUT;
    case CUBLASLT_EPILOGUE_DGELU: return EPI_DGELU;
    case CUBLASLT_EPILOGUE_BGRADA: return EPI_BGRADA;
    case CUBLASLT_EPILOGUE_BGRADB: return EPI_BGRADB;
    default: return -1;  // the ReLU family, DGELU_BGRAD: not emulated
    }
}

// What cublasLt.h says of the epilogues' extra operands: the bias (or bias gradient) vector has D's type; GELU's
// input matrix (the aux buffer) has D's type and a leading dimension "divisible by 8 and no less than the number
// of rows in the output matrix". Strided batches with an epilogue beyond BIAS are not emulated.
static cublasStatus_t check_epilogue(const char *who, const Desc *d, const Layout *dl) {
    const int f = epilogue_flags(d->epilogue);
    if (f < 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: epilogue %u is not emulated (DEFAULT, BIAS, GELU(_AUX)(_BIAS), DGELU, "
                      "BGRADA, BGRADB are)", who, d->epilogue);
    if ((f & (EPI_BIAS | EPI_BGRADA | EPI_BGRADB)) && d->bias_type != -1 && d->bias_type != dl->type)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: a %s bias (or bias gradient) with a %s D: it must have D's type", who,
                      type_str(d->bias_type), type_str(dl->type));
    if ((f & ~EPI_BIAS) && dl->batch > 1)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: epilogue %u on a strided batch is not emulated", who, d->epilogue);
    if (f & (EPI_AUX_OUT | EPI_DGELU)) {
        if (d->aux_type != -1 && d->aux_type != dl->type)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: a %s GELU input (aux) with a %s D is not emulated", who,
                          type_str(d->aux_type), type_str(dl->type));
        if (d->aux_ld < (int64_t)dl->rows || d->aux_ld % 8 != 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD %lld must be divisible by 8 and "
                          ">= D's %llu rows", who, (long long)d->aux_ld, (unsigned long long)dl->rows);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The problem a descriptor and four layouts describe, checked as the library checks it.
struct Problem {
    int m, n, k, batch;
    const Desc *d;
    const Layout *a, *b, *c, *dl;
};

static cublasStatus_t check_problem(const char *who, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A,
                                    cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t Dd,
                                    Problem *p) {
    const Desc *d = D_(desc);
    const Layout *a = L_(A), *b = L_(B), *c = L_(C ? C : Dd), *dl = L_(Dd);
    if (!d || !a || !b || !c || !dl) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: a descriptor is NULL or destroyed", who);
    const Layout *all[4] = {a, b, c, dl};
    for (int i = 0; i < 4; i++) {
        if (all[i]->order != CUBLASLT_ORDER_COL)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: memory orders other than CUBLASLT_ORDER_COL are not emulated", who);
        if (all[i]->ld < (int64_t)all[i]->rows || all[i]->ld < 1)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: matrix %c has ld %lld < rows %llu", who, "ABCD"[i],
                          (long long)all[i]->ld, (unsigned long long)all[i]->rows);
    }
    if (d->transc != CUBLAS_OP_N) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: TRANSC must be CUBLAS_OP_N", who);
    if ((d->transa != CUBLAS_OP_N && d->transa != CUBLAS_OP_T) || (d->transb != CUBLAS_OP_N && d->transb != CUBLAS_OP_T))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: only CUBLAS_OP_N and CUBLAS_OP_T are emulated", who);
    // shapes: D is m x n; op(A) m x k; op(B) k x n
    uint64_t m = dl->rows, n = dl->cols;
    uint64_t am = d->transa == CUBLAS_OP_N ? a->rows : a->cols, ak = d->transa == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t bk = d->transb == CUBLAS_OP_N ? b->rows : b->cols, bn = d->transb == CUBLAS_OP_N ? b->cols : b->rows;
    if (am != m || bn != n || ak != bk || c->rows != m || c->cols != n)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: shapes disagree: D %llux%llu, C %llux%llu, op(A) %llux%llu, op(B) "
                      "%llux%llu", who, (unsigned long long)m, (unsigned long long)n, (unsigned long long)c->rows,
                      (unsigned long long)c->cols, (unsigned long long)am, (unsigned long long)ak, (unsigned long long)bk,
                      (unsigned long long)bn);
    if (c->type != dl->type) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: C and D must have the same type", who);
    if (a->batch != dl->batch || b->batch != dl->batch || c->batch != dl->batch || dl->batch < 1)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: batch counts disagree", who);
    // type combinations (cuBLAS documentation, cublasLtMatmul, "Datatypes Supported")
    int ok = 0;
    if (d->scale == CUDA_R_32F) {
        if (d->compute == CUBLAS_COMPUTE_32F || d->compute == CUBLAS_COMPUTE_32F_PEDANTIC) {
            if (a->type == CUDA_R_32F && b->type == CUDA_R_32F && dl->type == CUDA_R_32F) ok = 1;
            if (a->type == CUDA_R_16BF && b->type == CUDA_R_16BF && (dl->type == CUDA_R_16BF || dl->type == CUDA_R_32F)) ok = 1;
            if (a->type == CUDA_R_16F && b->type == CUDA_R_16F && (dl->type == CUDA_R_16F || dl->type == CUDA_R_32F)) ok = 1;
        }
        if (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32)
            ok = a->type == CUDA_R_32F && b->type == CUDA_R_32F && dl->type == CUDA_R_32F;
    }
    cublasStatus_t st;
    if (!ok)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: no kernel for compute type %d, scale %s, A %s, B %s, C/D %s", who,
                      d->compute, type_str(d->scale), type_str(a->type), type_str(b->type), type_str(dl->type));
    st = check_epilogue(who, d, dl);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST && d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: pointer mode %d is not emulated", who, d->pointer_mode);
    *p = Problem{(int)m, (int)n, (int)ak, dl->batch, d, a, b, c, dl};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                                         cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                                         cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t Dd,
                                                         cublasLtMatmulPreference_t pref, int requested,
                                                         cublasLtMatmulHeuristicResult_t results[], int *returned) {
    emu_counts.heuristic++;
    if (!live(h)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmulAlgoGetHeuristic: the handle was not created by cublasLtCreate");
    if (returned) *returned = 0;
    if (requested <= 0 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
    Pref *pr = P_(pref);
    if (!pr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: preference is NULL or destroyed");
    Problem p;
    cublasStatus_t st = check_problem("cublasLtMatmulAlgoGetHeuristic", desc, A, B, C, Dd, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    // Our one algorithm accesses each matrix in elements of its type and, like the library's vectorised kernels,
    // may assume up to 16 bytes of alignment, as far as the preferences allow it: a buffer less aligned than the
    // preference said is a caller's error, caught in cublasLtMatmul.
    const Layout *ls[4] = {p.a, p.b, p.c, p.dl};
    Algo al = {ALGO_MAGIC, p.d->compute, p.a->type, p.b->type, p.dl->type, {0, 0, 0, 0}};
    for (int i = 0; i < 4; i++) {
        uint32_t want = pr->align[i] < 16 ? pr->align[i] : 16, eb = (uint32_t)type_bytes(ls[i]->type);
        if (want < eb) {
            // no algorithm reads a matrix in pieces smaller than its elements
            return CUBLAS_STATUS_SUCCESS;  // zero algorithms found
        }
        al.align[i] = want;
    }
    memset(&results[0], 0, sizeof(results[0]));
    memcpy(&results[0].algo, &al, sizeof(al));
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// TF32: 10 explicit mantissa bits, round to nearest with ties away from zero (cvt.rna.tf32.f32).
static float to_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

static float read_elem(const void *base, int type, size_t i) {
    if (type == CUDA_R_32F) return ((const float *)base)[i];
    if (type == CUDA_R_16F) return __half2float(((const __half *)base)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)base)[i]);
}
static void write_elem(void *base, int type, size_t i, float v) {
    if (type == CUDA_R_32F) ((float *)base)[i] = v;
    else if (type == CUDA_R_16F) ((__half *)base)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)base)[i] = __float2bfloat16_rn(v);
}

// GELU, tanh approximation, and its derivative: the formulas of cuda/activations.cuh (cuBLASLt does not document which
// GELU its epilogue computes; a GPU check compares the two, see the README).
static float gelu(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
static float gelu_grad(float x) {
    const float th = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}

// The bytes a column-major matrix spans.
static size_t extent(const Layout *l) {
    return ((size_t)(l->cols - 1) * l->ld + l->rows) * type_bytes(l->type);
}

static void check_buffer(const char *what, const void *p, const Layout *l, uint32_t align, int index) {
    if ((uintptr_t)p % type_bytes(l->type) != 0)
        emu_fatal("cublasLtMatmul: matrix %s at %p is not aligned to its %s elements", what, p, type_str(l->type));
    if ((uintptr_t)p % align != 0)
        emu_fatal("cublasLtMatmul: matrix %s at %p is less than %u-byte aligned, but the algorithm came from a heuristic "
                  "told it could assume that (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES): a GPU may fault or read wrongly",
                  what, p, align, "ABCD"[index]);
    for (int b = 0; b < l->batch; b++)
        emu_require_device("cublasLtMatmul", what, (const char *)p + (size_t)b * l->stride * type_bytes(l->type), extent(l));
}

// BGRADA / BGRADB (cublasLt.h): the bias gradient "based on the input matrix A (B)": op(A) summed over the GEMM's k
// dimension, one value per row of D, or op(B) summed over k, one per column of D; written (not accumulated) to the bias
// pointer in its type. From the operands as stored (TF32 rounding is the multiplier's), eight partial sums over
// k mod 8 added in a fixed order, as the product's.
static void bias_gradient(const Problem &p, int epi, const char *Ab, const char *Bb, int bias_type) {
    const int a_side = epi & EPI_BGRADA, len = a_side ? p.m : p.n, k = p.k;
    const Layout *l = a_side ? p.a : p.b;
    const char *base = a_side ? Ab : Bb;
    // op(A) is m x k: element (i, q) of A stored N at i + q ld, T at q + i ld; op(B) is k x n: (q, j) at q + j ld (N)
    const int strided = a_side ? p.d->transa == CUBLAS_OP_N : p.d->transb == CUBLAS_OP_T;
    for (int i = 0; i < len; i++) {
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int q = 0; q < k; q++) {
            size_t idx = strided ? (size_t)i + (size_t)q * l->ld : (size_t)q + (size_t)i * l->ld;
            s[q % 8] += read_elem(base, l->type, idx);
        }
        write_elem((void *)p.d->bias, bias_type, i, ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
    }
}

// The product itself, on the device's turn: D = alpha op(A) op(B) + beta C, then the epilogue (bias, GELU's input
// kept or its gradient applied, GELU), per batch; the bias gradient first where the epilogue asks for it.
static void run_product(const Problem &p, const void *A, const void *B, const void *Cp, void *D, float a_s, float b_s,
                        int epi, int bias_type) {
    const int use_bias = epi & EPI_BIAS;
    const int m = p.m, n = p.n, k = p.k;
    const int tf32 = p.d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    std::vector<float> ap((size_t)m * k), bp((size_t)n * k);
    for (int bt = 0; bt < p.batch; bt++) {
        const char *Ab = (const char *)A + (size_t)bt * p.a->stride * type_bytes(p.a->type);
        const char *Bb = (const char *)B + (size_t)bt * p.b->stride * type_bytes(p.b->type);
        const char *Cb = (const char *)Cp + (size_t)bt * p.c->stride * type_bytes(p.c->type);
        char *Db = (char *)D + (size_t)bt * p.dl->stride * type_bytes(p.dl->type);
        // op(A) row by row and op(B) column by column, contiguous in k, as floats (TF32-rounded when allowed)
        for (int i = 0; i < m; i++)
            for (int l = 0; l < k; l++) {
                size_t idx = p.d->transa == CUBLAS_OP_N ? (size_t)i + (size_t)l * p.a->ld : (size_t)l + (size_t)i * p.a->ld;
                float v = read_elem(Ab, p.a->type, idx);
                ap[(size_t)i * k + l] = tf32 ? to_tf32(v) : v;
            }
        for (int j = 0; j < n; j++)
            for (int l = 0; l < k; l++) {
                size_t idx = p.d->transb == CUBLAS_OP_N ? (size_t)l + (size_t)j * p.b->ld : (size_t)j + (size_t)l * p.b->ld;
                float v = read_elem(Bb, p.b->type, idx);
                bp[(size_t)j * k + l] = tf32 ? to_tf32(v) : v;
            }
        const char *bias = use_bias ? (const char *)p.d->bias + (size_t)bt * p.d->bias_batch_stride * type_bytes(bias_type) : NULL;
        if (epi & (EPI_BGRADA | EPI_BGRADB)) bias_gradient(p, epi, Ab, Bb, bias_type);
#pragma omp parallel for schedule(static)
        for (int j = 0; j < n; j++) {
            const float *bj = &bp[(size_t)j * k];
            for (int i = 0; i < m; i++) {
                const float *ai = &ap[(size_t)i * k];
                // eight partial sums over k mod 8, added in a fixed order: deterministic
                float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                int l = 0;
                for (; l + 8 <= k; l += 8)
                    for (int q = 0; q < 8; q++) s[q] = fmaf(ai[l + q], bj[l + q], s[q]);
                for (; l < k; l++) s[l % 8] = fmaf(ai[l], bj[l], s[l % 8]);
                float acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
                float v = a_s * acc;
                if (b_s != 0.0f) v += b_s * read_elem(Cb, p.c->type, (size_t)i + (size_t)j * p.c->ld);
                if (bias) v += read_elem(bias, bias_type, i);
                if (epi & (EPI_AUX_OUT | EPI_DGELU)) {
                    const size_t ai = (size_t)i + (size_t)j * p.d->aux_ld;
                    if (epi & EPI_AUX_OUT) write_elem(p.d->aux, p.dl->type, ai, v);  // GELU's input, rounded to D's type
                    else v *= gelu_grad(read_elem(p.d->aux, p.dl->type, ai));
                }
                if (epi & EPI_GELU) v = gelu(v);  // on the fp32 value: D is rounded once, after it
                write_elem(Db, p.dl->type, (size_t)i + (size_t)j * p.dl->ld, v);
            }
        }
    }
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                                         const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                         cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                         cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                         const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                                         cudaStream_t stream) {
    if (!live(h)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul: the handle was not created by cublasLtCreate");
    Problem p;
    cublasStatus_t st = check_problem("cublasLtMatmul", desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    emu_check_stream("cublasLtMatmul", stream);
    if (!alpha || !beta || !A || !B || !D) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: a NULL pointer");
    Algo al = {ALGO_MAGIC, p.d->compute, p.a->type, p.b->type, p.dl->type, {16, 16, 16, 16}};
    if (algo) {
        memcpy(&al, algo, sizeof(al));
        if (al.magic != ALGO_MAGIC)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm is not one the heuristic returned");
        if (al.compute != p.d->compute || al.a_type != p.a->type || al.b_type != p.b->type || al.d_type != p.dl->type)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm was chosen for another problem");
    }
    (void)workspace;
    (void)workspace_bytes;  // ours needs none
    const void *Cp = C ? C : D;
    check_buffer("A", A, p.a, al.align[0], 0);
    check_buffer("B", B, p.b, al.align[1], 1);
    check_buffer("D", D, p.dl, al.align[3], 3);
    float a_s, b_s;
    if (p.d->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
        emu_require_device("cublasLtMatmul", "alpha", alpha, 4);
        emu_require_device("cublasLtMatmul", "beta", beta, 4);
    }
    memcpy(&a_s, alpha, 4);
    memcpy(&b_s, beta, 4);
    if (b_s != 0.0f) check_buffer("C", Cp, p.c, al.align[2], 2);  // beta 0: C is not read (and may hold NaN)
    const int bias_type = p.d->bias_type == -1 ? p.dl->type : p.d->bias_type;
    const int epi = epilogue_flags(p.d->epilogue);
    if (epi & (EPI_BIAS | EPI_BGRADA | EPI_BGRADB)) {
        if (!p.d->bias) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: epilogue %u without a bias pointer", p.d->epilogue);
        // a bias is as long as D has rows; a bias gradient reduces op(A) to D's rows or op(B) to its columns
        const size_t len = (epi & EPI_BGRADB) ? (size_t)p.n : (size_t)p.m;
        for (int b = 0; b < p.batch; b++)
            emu_require_device("cublasLtMatmul", "the bias", (const char *)p.d->bias + (size_t)b * p.d->bias_batch_stride *
                               type_bytes(bias_type), len * type_bytes(bias_type));
    }
    if (epi & (EPI_AUX_OUT | EPI_DGELU)) {
        if (!p.d->aux) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: epilogue %u without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", p.d->epilogue);
        const Layout aux = {LAYOUT_MAGIC, p.dl->type, CUBLASLT_ORDER_COL, 1, p.dl->rows, p.dl->cols, p.d->aux_ld, 0};
        check_buffer("the GELU input (aux)", p.d->aux, &aux, (uint32_t)type_bytes(p.dl->type), 3);
    }
    // the product runs when the device gets to it, from copies of the descriptors as they are now
    const Desc dq = *p.d;
    const Layout la = *p.a, lb = *p.b, lc = *p.c, ld = *p.dl;
    const Problem pq = {p.m, p.n, p.k, p.batch, &dq, &la, &lb, &lc, &ld};
    emu_counts.matmuls++;
    const void *refs[] = {A, B, Cp, D, p.d->bias, p.d->aux, alpha, beta, workspace};
    emu_node_refs("cublasLtMatmul", refs, 9);
    emu_enqueue(stream, [=]() {
        const Problem p = {pq.m, pq.n, pq.k, pq.batch, &dq, &la, &lb, &lc, &ld};
        run_product(p, A, B, Cp, D, a_s, b_s, epi, bias_type);
    });
    return CUBLAS_STATUS_SUCCESS;
}
