// cpu/muon_host.h: Muon's arithmetic in fp32 on host memory (muon.h's formulas): the momentum and the step
// element-wise, Newton-Schulz through the CPU build's gemm. The CPU build's backend_muon_* (cpu/muon.h) are these,
// and so are the CUDA build's on the host tier (--offload, cuda/muon.cuh), where the host runs the update.
#ifndef CPU_MUON_HOST_H
#define CPU_MUON_HOST_H

#include <math.h>
#include "gemm.h"
#include "../backend/backend.h"  // MUON_NS_A, _B, _C

static void muon_momentum_host(float *b, float *u, const float *g, size_t n, float mu, float scale, int nesterov) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * scale;
        float bi = mu * b[i] + (1.0f - mu) * gi;
        b[i] = bi;
        u[i] = nesterov ? (1.0f - mu) * gi + mu * bi : bi;
    }
}

static void muon_apply_host(float *p, const float *o, size_t n, float decay, float step) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) p[i] = p[i] * decay - step * o[i];
}

// X (m x n, m <= n: x itself, or x^T when x has more rows than columns) / max(|x|_F, 1e-7); then per step
// A = X X^T, G = b A + c A A, X = a X + G X; written back (transposed back).
static void muon_orthogonalize_host(float *x, int rows, int cols, int steps, float *work) {
    int tr = rows > cols, m = tr ? cols : rows, n = tr ? rows : cols;
    float *X = work, *Y = X + (size_t)m * n, *A = Y + (size_t)m * n, *G = A + (size_t)m * m;
    double ss = 0.0;
    for (size_t i = 0; i < (size_t)rows * cols; i++) ss += (double)x[i] * x[i];
    float norm = (float)sqrt(ss);
    if (norm < 1e-7f) norm = 1e-7f;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) X[(size_t)i * n + j] = (tr ? x[(size_t)j * cols + i] : x[(size_t)i * cols + j]) / norm;
    for (int s = 0; s < steps; s++) {
        gemm(m, m, n, X, n, 1, X, 1, n, A, m, 1, 0);  // A = X X^T
        gemm(m, m, m, A, m, 1, A, m, 1, G, m, 1, 0);  // A A
        for (size_t i = 0; i < (size_t)m * m; i++) G[i] = MUON_NS_B * A[i] + MUON_NS_C * G[i];
        gemm(m, n, m, G, m, 1, X, n, 1, Y, n, 1, 0);  // G X
        for (size_t i = 0; i < (size_t)m * n; i++) Y[i] = MUON_NS_A * X[i] + Y[i];
        float *t = X; X = Y; Y = t;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            if (tr) x[(size_t)j * cols + i] = X[(size_t)i * n + j];
            else x[(size_t)i * cols + j] = X[(size_t)i * n + j];
        }
}

#endif
