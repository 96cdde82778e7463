// cpu/encoder.h: the token and position embeddings' lookup and its gradient (wpe and dwpe NULL: no position
// table, as the Llama family has none).
#ifndef CPU_ENCODER_H
#define CPU_ENCODER_H

#include <stddef.h>

// Shapes: B batch, T time, C channels, OC output channels, NH heads.

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((long)b * T + t) * C;
            const float *we = wte + (long)inp[b * T + t] * C;
            if (!wpe) {  // no position table (the Llama family: RoPE positions q and k instead)
                for (int i = 0; i < C; i++) o[i] = we[i];
                continue;
            }
            const float *pe = wpe + (long)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

// Serial over tokens: two tokens may share an embedding row, and a fixed order keeps it deterministic. dwte NULL:
// the position table's part alone (a pipeline's input end, where the output end adds a tied token table's: pipeline.h).
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((long)b * T + t) * C;
            if (!dwte) {
                float *dwp = dwpe + (long)t * C;
                for (int i = 0; i < C; i++) dwp[i] += d[i];
                continue;
            }
            float *dwt = dwte + (long)inp[b * T + t] * C;
            if (!dwpe) {
                for (int i = 0; i < C; i++) dwt[i] += d[i];
                continue;
            }
            float *dwp = dwpe + (long)t * C;
            for (int i = 0; i < C; i++) { dwt[i] += d[i]; dwp[i] += d[i]; }
        }
}

#endif
