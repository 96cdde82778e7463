// cpu/vocab.h: tensor parallelism's vocabulary-parallel kernels (backend.h's contract; tensor_parallel.h runs them
// around the TP collectives): the embedding of a rank's rows of the vocabulary, and the cross-entropy over a rank's
// logit columns in three steps (the row's max, the exponentials and their sum, the loss and the gradient). Each
// rank's sum of exponentials is accumulated in double and the log in double: a trained model's rows are sharp (one
// term near 1, thousands near 1e-5), and a float running sum loses the small terms' low bits at every add. The sum
// the TP all-reduce adds (in float) leaves out the target's term, which every rank remakes from the target's logit:
// the target's gradient (p - 1) dloss is then -(that sum / the whole) dloss, with no cancellation where p is near 1
// (p - 1 from a sum rounded to float would be off by 1e-7 / (1 - p) relative).
#ifndef CPU_VOCAB_H
#define CPU_VOCAB_H

#include <math.h>
#include <stddef.h>
#include "classifier.h"  // exp_row_sum

static int backend_has_tp(void) { return 1; }

static void encoder_forward_vocab(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C, int v0,
                                  int vn) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((long)b * T + t) * C;
            int id = inp[b * T + t] - v0;
            const float *we = id >= 0 && id < vn ? wte + (long)id * C : NULL;
            const float *pe = wpe ? wpe + (long)t * C : NULL;
            for (int i = 0; i < C; i++) o[i] = (we ? we[i] : 0.0f) + (pe ? pe[i] : 0.0f);
        }
}

// Serial over tokens, as encoder_backward: two tokens may share a row.
static void encoder_backward_vocab(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C, int v0,
                                   int vn) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((long)b * T + t) * C;
            int id = inp[b * T + t] - v0;
            if (dwte && id >= 0 && id < vn) {  // dwte NULL: positions alone (encoder_backward)
                float *dwt = dwte + (long)id * C;
                for (int i = 0; i < C; i++) dwt[i] += d[i];
            }
            if (dwpe) {
                float *dwp = dwpe + (long)t * C;
                for (int i = 0; i < C; i++) dwp[i] += d[i];
            }
        }
}

static void classifier_vocab_max(const float *logits, float *rowmax, int N, int Vl, int Vpl) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *row = logits + (long)i * Vpl;
        float m = -INFINITY;
        for (int v = 0; v < Vl; v++) if (row[v] > m) m = row[v];
        rowmax[i] = m;
    }
}

static float vocab_row_max(const float *maxes, int nshards, int N, int i) {
    float m = -INFINITY;
    for (int s = 0; s < nshards; s++) if (maxes[(long)s * N + i] > m) m = maxes[(long)s * N + i];
    return m;
}

static void classifier_vocab_exp(float *logits, float *sums, const float *maxes, int nshards, const int *targets, int N, int Vl,
                                 int Vpl, int v0) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (long)i * Vpl;
        float m = vocab_row_max(maxes, nshards, N, i);
        int y = targets[i] - v0;
        sums[N + i] = y >= 0 && y < Vl ? row[y] : 0.0f;
        sums[i] = (float)exp_row_sum(row, Vl, m, y);  // every exponential but the target's
    }
}

static void classifier_vocab_finish(float *logits, float *losses, const float *sums, const float *maxes, int nshards,
                                    const int *targets, int N, int Vl, int Vpl, int v0, float dloss) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (long)i * Vpl;
        float m = vocab_row_max(maxes, nshards, N, i);
        const double sum = (double)sums[i] + expf(sums[N + i] - m);  // the target's exponential, as its owner made it
        losses[i] = (float)(log(sum) + ((double)m - sums[N + i]));
        const double scale = dloss / sum;
        int y = targets[i] - v0;
        for (int v = 0; v < Vl; v++) row[v] = (float)(row[v] * scale);
        if (y >= 0 && y < Vl) row[y] = (float)(-sums[i] * scale);  // (p - 1) dloss = -(the others' share) dloss
        for (int v = Vl; v < Vpl; v++) row[v] = 0.0f;
    }
}

#endif
