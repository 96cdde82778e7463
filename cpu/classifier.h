// cpu/classifier.h: the softmax cross-entropy of the logits fused with its gradient.
#ifndef CPU_CLASSIFIER_H
#define CPU_CLASSIFIER_H

#include <math.h>

// row[v] = exp(row[v] - m) for v < n, and their sum in double in column order, column skip left out of it (-1:
// none; cpu/vocab.h leaves out the target's). A float running sum would lose the small terms' low bits (below).
static double exp_row_sum(float *row, int n, float m, int skip) {
    double sum = 0.0;
    for (int v = 0; v < n; v++) {
        row[v] = expf(row[v] - m);
        if (v != skip) sum += row[v];
    }
    return sum;
}

// Softmax and cross-entropy over the first V of Vp logit columns, fused with the gradient: each row
// of logits is replaced by dloss/dlogits = (softmax - onehot(target)) * dloss, so no probability
// tensor is ever stored. Padded columns get zero gradient.
// The row's sum of exponentials is accumulated in double, in column order: a trained model's rows are sharp
// (one term near 1, tens of thousands near 1e-5), and a float running sum loses the small terms' low bits at
// every add (4e-4 relative on such a row of 50k, so the loss was off by 1e-4 nats). In double the loss is the
// float64 computation's to a float's rounding, and the order is fixed: the same bits at any thread count.
static void classifier_forward_backward(float *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (long)i * Vp;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (row[v] > maxv) maxv = row[v];
        int y = targets[i];
        float ly = row[y];
        // one exp per logit: keep exp(x - max) in the row, then scale it into the gradient
        const double sum = exp_row_sum(row, V, maxv, -1);
        losses[i] = (float)(log(sum) + ((double)maxv - ly));
        // the target's gradient (p - 1) * dloss in double too: where p is near 1 a float p would cancel to noise
        const double scale = dloss / sum, ey = row[y];
        for (int v = 0; v < V; v++) row[v] = (float)(row[v] * scale);
        row[y] = (float)(ey * scale - dloss);
        for (int v = V; v < Vp; v++) row[v] = 0.0f;
    }
}

#endif
