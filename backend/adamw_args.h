// adamw_args.h: the AdamW kernel's arguments, as the backend's contract takes them (backend.h's backend_adamw_*):
// one step's settings and one tensor's slice of the device table. Plain data at the backend's layer, so the contract
// needs nothing from the optimizers above it (optim/adamw.h fills them from its own args and ZeRO's slices).
#ifndef ADAMW_ARGS_H
#define ADAMW_ARGS_H

#include <stddef.h>

// AdamW's settings for one step (grad_scale is the clipping factor, t the 1-based step).
typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_scale; int t; } AdamWArgs;

// One tensor's slice for backend_adamw_run (backend.h): its parameters, gradient and moments, whether it is
// decayed, and where its working copy goes (the build's floatX, NULL for none) with p[0]'s index in unit `unit` as a
// holder of every outer tensor lays it out (ParamRun's full_off: the rounding's key, the same on every layout).
typedef struct {
    float *p;
    const float *g;
    float *m, *v;
    size_t n;
    int decayed;
    void *w;
    size_t w_index;
    int unit;
} AdamWSegment;

#endif // ADAMW_ARGS_H
