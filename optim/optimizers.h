// optimizers.h: every optimizer the trainer can run, by --optimizer's kind: the one place that names them all.
// optimizer_create makes the run's from its args (train/config.h's optimizer_args); optimizer_ops gives a kind's
// table alone, for the memory plan. A new optimizer is its header, its args in optim_args.h and a case here.
#ifndef OPTIMIZERS_H
#define OPTIMIZERS_H

#include "optim_args.h"
#include "adamw.h"
#include "muon.h"
#include "adafactor.h"

static void optimizer_create(Optimizer *o, const OptimizerArgs *a) {
    switch (a->kind) {
    case OPTIMIZER_ADAMW: adamw_create(o, a->adamw, a->lr); return;
    case OPTIMIZER_MUON: muon_create(o, a->muon, a->matrix_lr, a->adamw, a->lr); return;
    case OPTIMIZER_ADAFACTOR: adafactor_create(o, a->adafactor); return;
    }
    internal_fault("optimizer kind %d has no optimizer", (int)a->kind);
}

static const OptimizerOps *optimizer_ops(OptimizerKind kind) {
    switch (kind) {
    case OPTIMIZER_ADAMW: return &ADAMW_OPS;
    case OPTIMIZER_MUON: return &MUON_OPS;
    case OPTIMIZER_ADAFACTOR: return &ADAFACTOR_OPS;
    }
    internal_fault("optimizer kind %d has no optimizer", (int)kind);
    return NULL;
}

#endif // OPTIMIZERS_H
