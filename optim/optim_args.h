// optim_args.h: each optimizer's args as plain data, which train/config.h fills from the flags once
// (optimizer_args) and optimizers.h turns into the run's optimizer. Nothing here but values and their names, so
// the command line's contract stands alone; an optimizer's own header (adamw.h, muon.h) does the arithmetic.
#ifndef OPTIM_ARGS_H
#define OPTIM_ARGS_H

#include <stddef.h>

typedef enum { OPTIMIZER_ADAMW, OPTIMIZER_MUON, OPTIMIZER_ADAFACTOR } OptimizerKind;  // --optimizer
static const char *const OPTIMIZER_NAMES[] = {"adamw", "muon", "adafactor", NULL};

// AdamW's own settings (--beta1, --beta2, --eps, --weight-decay); its learning rate is the step's group's.
typedef struct { float beta1, beta2, eps, weight_decay; } AdamWOpts;

typedef enum { MUON_ADJUST_MATCH_RMS_ADAMW, MUON_ADJUST_ORIGINAL } MuonLrAdjust;  // --muon-lr-adjust
static const char *const MUON_LR_ADJUST_NAMES[] = {"match_rms_adamw", "original", NULL};
// Muon's own settings (--muon-momentum, --muon-nesterov, --muon-ns-steps, --muon-lr-adjust); its weight decay is
// its AdamW's (--weight-decay).
typedef struct { float momentum; int nesterov, ns_steps; MuonLrAdjust lr_adjust; } MuonOpts;

// Adafactor's settings (--adafactor-*), torch.optim.Adafactor's with its defaults: lr 1e-2, beta2_decay -0.8,
// eps (None, 1e-3) (eps1 0: None, float32's machine epsilon), d 1.0, weight_decay 0.0, maximize false.
typedef struct { float lr, beta2_decay, eps1, eps2, d, weight_decay; int maximize; } AdafactorOpts;

// The run's optimizer as the flags say it: which, each group's peak learning rate, and the args of each kind.
typedef struct {
    OptimizerKind kind;
    float lr;          // group 0's peak (every tensor no other group takes)
    float matrix_lr;   // group 1's peak, where the optimizer has one (Muon's matrices)
    AdamWOpts adamw;
    MuonOpts muon;
    AdafactorOpts adafactor;
} OptimizerArgs;

#endif // OPTIM_ARGS_H
