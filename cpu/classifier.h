// cpu/classifier.h: the softmax cross-entropy of the logits fused with its gradient.
#ifndef CPU_CLASSIFIER_H
#define CPU_CLASSIFIER_H

#include <math.h>


// Softmax and cross-entropy over the first V of Vp logit columns, fused with the gradient: each row
// of logits is replaced by dloss/dlogits = (softmax - onehot(target)) * dloss, so no probability
// tensor is ever stored. Padded columns get zero gradient.
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
        float sum = 0.0f;
        for (int v = 0; v < V; v++) { row[v] = expf(row[v] - maxv); sum += row[v]; }
        losses[i] = logf(sum) + maxv - ly;
        float scale = dloss / sum;
        for (int v = 0; v < V; v++) row[v] *= scale;
        row[y] -= dloss;
        for (int v = V; v < Vp; v++) row[v] = 0.0f;
    }
}

#endif
