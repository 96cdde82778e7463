// pipeline_schedule.h: the pure parts of 1F1B pipeline parallelism (pipeline.h): each stage's ordered operations
// for a step's micro-batches (pp_schedule), how many micro-batches' activations a stage holds, the ideal bubble,
// and the split of the layers among stages that balances their FLOPs (pp_split). No model, no messages:
// test/test_pipeline.c checks them alone, and --dry-run and the autotuner plan with them.
#ifndef PIPELINE_SCHEDULE_H
#define PIPELINE_SCHEDULE_H

#include <math.h>
#include "../base/utils.h"
#include "../arch/family.h"  // the model_* FLOP counts of any family

typedef enum { PP_RECV_ACT, PP_FWD, PP_SEND_ACT, PP_RECV_GRAD, PP_BWD, PP_SEND_GRAD } PPOpKind;
static const char *const PP_OP_NAMES[] __attribute__((unused)) = {"recv-act", "fwd", "send-act", "recv-grad", "bwd", "send-grad"};

typedef struct {
    PPOpKind kind;
    int micro;
} PPOp;

// The ordered operations of `stage` (0-based) of `stages` for `micro` micro-batches; ops needs room
// for 6 * micro entries. Returns how many were written.
static int pp_schedule(int stage, int stages, int micro, PPOp *ops) {
    int n = 0, last = stages - 1;
    int warmup = stages - stage - 1 < micro ? stages - stage - 1 : micro;
    int f = 0, b = 0;
#define PP_FWD_OPS(i) do { if (stage > 0) ops[n++] = (PPOp){PP_RECV_ACT, i}; ops[n++] = (PPOp){PP_FWD, i}; \
                           if (stage < last) ops[n++] = (PPOp){PP_SEND_ACT, i}; } while (0)
#define PP_BWD_OPS(i) do { if (stage < last) ops[n++] = (PPOp){PP_RECV_GRAD, i}; ops[n++] = (PPOp){PP_BWD, i}; \
                           if (stage > 0) ops[n++] = (PPOp){PP_SEND_GRAD, i}; } while (0)
    for (; f < warmup; f++) PP_FWD_OPS(f);
    while (f < micro) {
        PP_FWD_OPS(f);
        f++;
        PP_BWD_OPS(b);
        b++;
    }
    for (; b < micro; b++) PP_BWD_OPS(b);
#undef PP_FWD_OPS
#undef PP_BWD_OPS
    return n;
}

// The end of the model stage s of `stages` runs, as its config's ends (arch.h's ARCH_END_ bits: the outer tensors it
// holds): the first stage the input end, the last the output end; 0 (every outer tensor, as one process) for a
// single stage, and for a middle stage, which holds no outer unit at all (plan_stage's holds_unit).
static int pp_stage_ends(int s, int stages) {
    if (stages <= 1 || (s > 0 && s < stages - 1)) return 0;
    return s == 0 ? ARCH_END_INPUT : ARCH_END_OUTPUT;
}

// Micro-batches whose activations a stage holds at once under its schedule.
static int pp_max_in_flight(int stage, int stages, int micro) {
    return stages - stage < micro ? stages - stage : micro;
}

// The 1F1B bubble: the idle fraction of every stage in an ideal pipeline.
static double pp_bubble_formula(int stages, int micro) { return (double)(stages - 1) / (micro + stages - 1); }

// Splits L layers into `stages` contiguous ranges [first[s], first[s+1]) minimising the largest
// stage's cost: a layer costs its matmul and attention FLOPs per token; the last stage also pays for
// the classifier (the first stage's embedding lookup is free). Returns the imbalance: the largest
// stage cost over the mean.
static double pp_split(const ModelConfig *c, int T, int stages, int *first) {
    int L = c->num_layers;
    double layer = model_layer_forward_flops(c, T), head = model_head_forward_flops(c);  // the family's table
    // best[s][l]: the smallest possible largest cost when stages s.. take layers l..L-1
    double *best = (double *)mallocCheck((size_t)(stages + 1) * (L + 1) * sizeof(double));
    int *cut = (int *)mallocCheck((size_t)(stages + 1) * (L + 1) * sizeof(int));
#define BEST(s, l) best[(size_t)(s) * (L + 1) + (l)]
#define CUT(s, l) cut[(size_t)(s) * (L + 1) + (l)]
    for (int l = 0; l <= L; l++) BEST(stages - 1, l) = l < L ? (L - l) * layer + head : INFINITY;
    for (int s = stages - 2; s >= 0; s--)
        for (int l = 0; l <= L; l++) {
            BEST(s, l) = INFINITY;
            for (int e = l + 1; e <= L; e++) {  // stage s takes [l, e), at least one layer
                double here = (e - l) * layer, rest = BEST(s + 1, e);
                double worst = here > rest ? here : rest;
                if (worst < BEST(s, l)) { BEST(s, l) = worst; CUT(s, l) = e; }
            }
        }
    int l = 0;
    for (int s = 0; s < stages; s++) { first[s] = l; if (s < stages - 1) l = CUT(s, l); }
    first[stages] = L;
    double worst = BEST(0, 0), total = L * layer + head;
#undef BEST
#undef CUT
    free(best);
    free(cut);
    return worst / (total / stages);
}

#endif
