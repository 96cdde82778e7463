// optimizer.h: the boundary between ZeRO (zero.h, zero/) and the optimizers (adamw.h, muon.h): what ZeRO asks of an
// optimizer, so that it runs any of them on every store (device memory, the host tier of --offload, the swap file of
// --offload-device nvme) without naming one. A new optimizer is a header beside this one that fills OptimizerOps,
// and a case in train/config.h that builds its args from the flags.
//
// ZeRO hands an optimizer its layout once (OptLayout: the units, this rank's slice of each, the groups, where the
// state lives), calls open, then asks two things:
//   - the state of a slice: each of its OPT_ARRAYS state arrays keeps room(a, u) floats for unit u's slice; slice
//     position pos sits at index(a, u, pos) of that room, and kept says which positions have a place at all (a
//     checkpoint reads the arrays in the slice's shape, zeros where none is kept). The swap file's records hold
//     arrays of one size, so with the state streamed (lay.streamed) every array is slice-shaped and index is pos.
//   - to step a slice: on the host tiers, passes(u) passes over the pieces of unit u's slice (piece: one piece's
//     arithmetic, through the backend's host calls), with whole-unit work between two passes (between: the
//     collectives of an optimizer that needs whole matrices); on the device, device_begin (the step's one launch,
//     before any unit) and device_unit per unit, where the arrays are.
// Learning rates come in groups (an optimizer that leaves some tensors to another keeps each its own schedule's
// peak): the trainer puts each group's scheduled rate in OptStep.lr.
#ifndef OPTIMIZER_H
#define OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>
#include "../backend/backend.h"
#include "../parallel/comm.h"
#include "../model/model.h"

enum { OPT_ARRAYS = 2, OPT_GROUPS = 2 };

// One step's settings, the same for every optimizer: each group's learning rate after the schedule, the gradients'
// scale (clipping over the loss scale) and the 1-based update count.
typedef struct { float lr[OPT_GROUPS]; float grad_scale; int t; } OptStep;

// ZeRO's layout as an optimizer sees it: filled by zero_init before open, pointing into ZeRO's record.
typedef struct {
    const ModelConfig *config;   // this rank's model (with --tp a TP rank's slice of the whole)
    Model *model;                // its working copies (the device step may write them in its pass)
    int stage, nu;
    Comm *comm;                  // the data-parallel group
    TpGroup *tp;                 // --tp: the TP group whose ranks hold the other slices of each matrix; NULL without
    const size_t *usize, *ushard;                 // per unit: its floats on this rank (0: not held), its shard
    const size_t *slo, *slen, *sspan;             // per unit: this rank's slice: where it starts, floats, padded room
    const ParamRun *runs;        // the units' runs (each tensor's part of a unit), with their weight decay
    int nruns;
    int host;                    // the state lives in the host tier (--offload): the host steps it
    int streamed;                // the state is the swap file's records: every array slice-shaped
} OptLayout;

// A piece of unit u's slice, as a store hands it to the optimizer: floats [lo, lo + n) of the unit (unit
// coordinates, inside this rank's slice). p and g point at lo; state[a] at lo's place where the state is streamed,
// else at the start of unit u's room of array a (opt_state_at finds a position's place either way).
typedef struct {
    int u;
    size_t lo, n;
    float *p;
    const float *g;
    float *state[OPT_ARRAYS];
} OptPiece;

typedef struct Optimizer Optimizer;
typedef struct {
    const char *name;
    void (*open)(Optimizer *o);                                            // o->lay filled: size the state, make buffers
    size_t (*room)(const Optimizer *o, int a, int u);                      // floats of array a for unit u's slice
    size_t (*index)(const Optimizer *o, int a, int u, size_t pos);         // slice position pos's place in that room
    int (*kept)(const Optimizer *o, int a, int u, size_t pos, size_t *until);  // has pos a place (so until `until`)
    int (*passes)(const Optimizer *o, int u);                              // host tiers: passes over unit u's pieces
    void (*piece)(Optimizer *o, int pass, const OptPiece *pc, const OptStep *s);
    void (*between)(Optimizer *o, int pass, int u, const OptStep *s);      // after pass `pass` of unit u: whole-unit work
    void (*device_plan)(Optimizer *o, const OptPiece *units);              // the device store's slices, once (per unit)
    void (*device_begin)(Optimizer *o, const OptStep *s, int verdict);     // the step's launch, before any unit
    void (*device_unit)(Optimizer *o, const OptPiece *pc, const OptStep *s);  // unit u's slice, after device_begin
    // the memory plan: state floats per rank (the arrays' rooms, and workspace), without opening anything; usize per
    // unit as zero_unit_size counts it; streamed: only what is not in the swap file's records
    size_t (*plan)(const ModelConfig *c, int stage, int world, const size_t *usize, int streamed);
    void (*close)(Optimizer *o);
    int device_verdict;  // its device step takes the device's verdict (backend_update_verdict), so it can go at once
} OptimizerOps;

struct Optimizer {
    const OptimizerOps *ops;
    OptLayout lay;
    float peak[OPT_GROUPS];  // each group's peak learning rate, the schedule's (group 0: every tensor no other takes)
    int groups;
    int fused;               // the device step wrote the working copies too (device_plan decides)
    void *self;              // the optimizer's own record (its args, state sizes, buffers)
};

// Where position pos (unit coordinates) of array a sits for piece pc.
static float *opt_state_at(const Optimizer *o, const OptPiece *pc, int a, size_t pos) {
    if (o->lay.streamed) return pc->state[a] + (pos - pc->lo);
    return pc->state[a] + o->ops->index(o, a, pc->u, pos - o->lay.slo[pc->u]);
}

// The slice-shaped state's answers, for optimizers whose arrays keep a float per parameter.
static size_t opt_room_slice(const Optimizer *o, int a, int u) { (void)a; return o->lay.sspan[u]; }
static size_t opt_index_slice(const Optimizer *o, int a, int u, size_t pos) { (void)o, (void)a, (void)u; return pos; }
static int opt_kept_all(const Optimizer *o, int a, int u, size_t pos, size_t *until) {
    (void)a, (void)pos;
    *until = o->lay.sspan[u];
    return 1;
}

// The part [a, b) of a unit-u run that falls in [lo, lo + cnt) of the unit; 0 when none does.
static int run_overlap(const ParamRun *run, int u, size_t lo, size_t cnt, size_t *a, size_t *b) {
    if (run->unit != u) return 0;
    *a = run->unit_off > lo ? run->unit_off : lo;
    *b = run->unit_off + run->len < lo + cnt ? run->unit_off + run->len : lo + cnt;
    return *a < *b;
}

// The widest layer unit padded for the group: the whole-unit buffers' size.
static size_t opt_widest_unit(const OptLayout *l) {
    size_t widest = 0;
    for (int u = 1; u < l->nu; u++) if (l->ushard[u] * l->comm->world > widest) widest = l->ushard[u] * l->comm->world;
    return widest;
}

#endif // OPTIMIZER_H
