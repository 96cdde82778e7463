// adamw.h: the AdamW optimizer (--optimizer adamw) behind optimizer.h's boundary: its args (AdamWOpts, from the
// flags), its state (m and v, a float per parameter each: state arrays 0 and 1, slice-shaped), its step on the host
// tiers (backend_adamw_host, run by run: weight decay differs between a unit's tensors) and on the device (one
// backend_adamw_run over every unit's slices, made once). The arithmetic is the backend's (cpu/adamw_host.h,
// cuda/adamw.cuh). Muon (muon.h) leaves the tensors it does not take to an AdamW of its own: the helpers below.
#ifndef ADAMW_H
#define ADAMW_H

#include "optimizer.h"
#include "optim_args.h"  // AdamWOpts

typedef struct {
    AdamWOpts args;
    int group;                   // which of OptStep's learning rates is AdamW's
    const unsigned char *skip;   // per run of the layout: 1 where another optimizer steps it (NULL: none)
    void *plan;                  // the device store's table (backend_adamw_plan)
} AdamW;

static AdamWArgs adamw_kernel_args(const AdamW *a, const OptStep *s) {
    return (AdamWArgs){s->lr[a->group], a->args.beta1, a->args.beta2, a->args.eps, a->args.weight_decay, s->grad_scale, s->t};
}

// The device table: every run of every unit's slice that AdamW steps (the runs differ in weight decay). convert: the
// working copies are made in the same pass (stage 0, where a rank updates whole units), seeded as model.h would
// seed the unit; returns whether they are.
static int adamw_make_plan(AdamW *a, const Optimizer *o, const OptPiece *units, int convert) {
    const OptLayout *l = &o->lay;
    AdamWSegment *segs = (AdamWSegment *)callocCheck(l->nruns > 0 ? l->nruns : 1, sizeof(AdamWSegment));
    int n = 0;
    for (int u = 0; u < l->nu; u++) {
        const OptPiece *pc = &units[u];
        if (pc->n == 0) continue;
        floatX *w = convert ? model_working_copy(l->model, u) : NULL;
        if (convert && backend_weights_need_copy() && !w) convert = 0;
        for (int i = 0; i < l->nruns; i++) {
            size_t x, y;
            if (!run_overlap(&l->runs[i], u, pc->lo, pc->n, &x, &y) || (a->skip && a->skip[i])) continue;
            // the working copy at x, its rounding keyed where every outer tensor is held (full_off): one process's key
            const ParamRun *run = &l->runs[i];
            segs[n++] = (AdamWSegment){pc->p + (x - pc->lo), pc->g + (x - pc->lo), opt_state_at(o, pc, 0, x),
                                       opt_state_at(o, pc, 1, x), y - x, run->decayed,
                                       w ? (void *)x_at(w, x) : NULL, x - run->unit_off + run->full_off, u};
        }
    }
    if (!convert) for (int i = 0; i < n; i++) segs[i].w = NULL;
    a->plan = backend_adamw_plan(segs, n);
    free(segs);
    return convert;
}

// AdamW on the host tier over piece pc, run by run (the runs another optimizer takes skipped).
static void adamw_piece_runs(const AdamW *a, const Optimizer *o, const OptPiece *pc, const OptStep *s) {
    AdamWArgs args = adamw_kernel_args(a, s);
    for (int i = 0; i < o->lay.nruns; i++) {
        const ParamRun *run = &o->lay.runs[i];
        size_t x, y;
        if (!run_overlap(run, pc->u, pc->lo, pc->n, &x, &y) || (a->skip && a->skip[i])) continue;
        backend_adamw_host(pc->p + (x - pc->lo), pc->g + (x - pc->lo), opt_state_at(o, pc, 0, x), opt_state_at(o, pc, 1, x),
                           y - x, run->decayed, &args);
    }
}

// This rank's slices' floats for a stage (per unit, the slice's padded room), for the plan.
static size_t opt_plan_slices(int stage, int world, const size_t *usize, int nu) {
    size_t slices = 0;
    for (int u = 0; u < nu; u++) {
        size_t sh = comm_shard_size(usize[u], world);
        slices += stage == 0 ? sh * world : sh;
    }
    return slices;
}

// ---- AdamW alone: every tensor, group 0
static void adamw_open(Optimizer *o) { (void)o; }
static int adamw_passes(const Optimizer *o, int u) { (void)o, (void)u; return 1; }
static void adamw_piece(Optimizer *o, int pass, const OptPiece *pc, const OptStep *s) {
    (void)pass;
    adamw_piece_runs((const AdamW *)o->self, o, pc, s);
}
static void adamw_between(Optimizer *o, int pass, int u, const OptStep *s) { (void)o, (void)pass, (void)u, (void)s; }
static void adamw_device_plan(Optimizer *o, const OptPiece *units) {
    o->fused = adamw_make_plan((AdamW *)o->self, o, units, o->lay.stage == 0);
}
static void adamw_device_begin(Optimizer *o, const OptStep *s, int verdict) {
    AdamW *a = (AdamW *)o->self;
    AdamWArgs args = adamw_kernel_args(a, s);
    backend_adamw_run(a->plan, &args, verdict);
}
static void adamw_device_unit(Optimizer *o, const OptPiece *pc, const OptStep *s) { (void)o, (void)pc, (void)s; }
static size_t adamw_plan(const ModelConfig *c, int stage, int world, const size_t *usize, int streamed) {
    return streamed ? 0 : 2 * opt_plan_slices(stage, world, usize, model_num_units(c));  // m and v
}
static void adamw_close(Optimizer *o) {
    AdamW *a = (AdamW *)o->self;
    backend_adamw_plan_free(a->plan);
    free(a);
    o->self = NULL;
}

static const OptimizerOps ADAMW_OPS = {"adamw", adamw_open, opt_room_slice, opt_index_slice, opt_kept_all, adamw_passes,
                                       adamw_piece, adamw_between, adamw_device_plan, adamw_device_begin, adamw_device_unit,
                                       adamw_plan, adamw_close, 1};

// An AdamW optimizer with these args and peak learning rate.
static void adamw_create(Optimizer *o, AdamWOpts args, float lr) {
    memset(o, 0, sizeof(*o));
    AdamW *a = (AdamW *)callocCheck(1, sizeof(AdamW));
    a->args = args;
    o->ops = &ADAMW_OPS;
    o->self = a;
    o->groups = 1;
    o->peak[0] = lr;
}

#endif // ADAMW_H
