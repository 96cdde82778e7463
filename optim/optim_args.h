// optim_args.h: each optimizer's args as plain data, which train/config.h fills from the flags once
// (optimizer_args) and optimizers.h turns into the run's optimizer. Nothing here but values and their names, so
// the command line's contract stands alone; an optimizer's own header (adamw.h, muon.h) does the arithmetic.
#ifndef OPTIM_ARGS_H
#define OPTIM_ARGS_H

#include <stddef.h>

typedef enum { OPTIMIZER_ADAMW, OPTIMIZER_MUON } OptimizerKind;  // --optimizer
static const char *const OPTIMIZER_NAMES[] = {"adamw", "muon", NULL};

// AdamW's own settings (--beta1, --beta2, --eps, --weight-decay); its learning rate is the step's group's.
typedef struct { float beta1, beta2, eps, weight_decay; } AdamWOpts;

typedef enum { MUON_ADJUST_MATCH_RMS_ADAMW, MUON_ADJUST_ORIGINAL } MuonLrAdjust;  // --muon-lr-adjust
static const char *const MUON_LR_ADJUST_NAMES[] = {"match_rms_adamw", "original", NULL};
// Muon's own settings (--muon-momentum, --muon-nesterov, --muon-ns-steps, --muon-lr-adjust); its weight decay is
// its AdamW's (--weight-decay).
typedef struct { float momentum; int nesterov, ns_steps; MuonLrAdjust lr_adjust; } MuonOpts;

// The run's optimizer as the flags say it: which, each group's peak learning rate, and the args of each kind.
typedef struct {
    OptimizerKind kind;
    float lr;          // group 0's peak (every tensor no other group takes)
    float matrix_lr;   // group 1's peak, where the optimizer has one (Muon's matrices)
    AdamWOpts adamw;
    MuonOpts muon;
} OptimizerArgs;

#endif // OPTIM_ARGS_H
