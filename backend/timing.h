// timing.h: where a training step's wall-clock time goes. The step is cut into consecutive
// intervals, each charged to the phase the rank was in (data, forward, backward, comm, optimizer,
// other) and, with --profile, to the model module that ran (embedding, LayerNorm, QKV matmul, ...).
// Nothing is sampled and nothing overlaps: every switch of phase or module ends one interval and
// starts the next, so the parts add up to the step by construction, and the only error left is the
// time between the step's first and last mark and the host's own clock around it.
//
// Each switch records a mark on the build's timeline (backend_mark): the CPU build reads the
// monotonic clock; the CUDA build's kernels are asynchronous, so a host clock would charge a kernel's
// time to whatever the host was doing when it waited, and it records an event on the stream the work
// runs on. The step's end is its one synchronisation (backend_step_sync), after which the intervals
// between consecutive marks are read. Time the stream spends idle while the host works (loading data,
// waiting in MPI with host-staged buffers) falls between two marks too, and is charged to the phase
// the host was in, which is where the step lost it.
//
// comm.h charges every collective and point-to-point message to `comm` (waiting included: a
// straggler, a slow link or a pipeline bubble shows there), and within it to an axis (CommAxis): the
// communicator's role (tensor-parallel, pipeline, data-parallel; comm_set_role) and the call's kind (a
// pipeline send or receive, a data-parallel reduction or gather) say which, so that --timing can tell
// TP's time from the pipeline's waiting. The axes' parts add up to comm as the phases add up to the step.
// pipeline.h and trainer.h set the phases; model.h names the module of each kernel it calls (only with --profile).
#ifndef TIMING_H
#define TIMING_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/utils.h"
#include "backend.h"  // the step's clock: backend_mark, backend_step_sync, backend_mark_ms

typedef enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_COMM, PH_OPTIMIZER, PH_OTHER, NUM_PHASES } Phase;
static const char *const PHASE_NAMES[NUM_PHASES] __attribute__((unused)) = {"data", "forward", "backward", "comm",
                                                                           "optimizer", "other"};

// Rows of the --profile table: the model's modules (what model.h marks around its kernels), then
// what runs outside them, by phase.
typedef enum {
    MOD_NONE, MOD_EMBED, MOD_LAYERNORM, MOD_QKV, MOD_ATTENTION, MOD_ATTPROJ, MOD_RESIDUAL, MOD_MLP_UP, MOD_GELU,
    MOD_MLP_DOWN, MOD_HEAD, ROW_OPTIMIZER, ROW_COMM, ROW_DATA, ROW_OTHER, NUM_ROWS
} ProfileRow;
static const char *const ROW_NAMES[NUM_ROWS] __attribute__((unused)) = {
    "-", "embedding", "layernorm", "qkv matmul", "attention", "projection", "residual", "mlp up", "gelu",
    "mlp down", "head and loss", "optimizer", "collectives", "data", "other"};

// Where comm's time and bytes went: tensor parallelism's collectives; the pipeline's sends (the copy out and the
// hand-off, and waiting for sends to complete) and receives (a receive waits for its neighbour: the bubble); the
// gradients' reductions (data-parallel, and the tied embedding's between the pipeline's ends); ZeRO's and Muon's
// gathers over the data-parallel ranks; and the rest (the world's own collectives, a comm phase outside comm.h).
typedef enum { AX_TP, AX_PIPE_SEND, AX_PIPE_WAIT, AX_DP_REDUCE, AX_GATHER, AX_OTHER, NUM_AXES } CommAxis;
static const char *const AXIS_NAMES[NUM_AXES] __attribute__((unused)) = {"tp", "pipe_send", "pipe_wait", "dp_reduce",
                                                                         "gather", "other"};

#define TIMING_STACK 16
#define TIMING_MAX_MARKS 65536  // marks in one step (backend_mark); more are merged

typedef struct {
    int on;                       // inside a step: switches are recorded
    int held;                     // inside a graph's work (timing_hold): switches are followed, not marked
    int profile;                  // --profile: model.h's module marks count
    int phase, module, axis;      // what the current interval is charged to (axis: within comm)
    int stack[TIMING_STACK], depth;  // phases to return to (nested comm inside forward, ...)
    int mstack[TIMING_STACK];     // and their modules (--tp's collectives inside a module: its matmul after the gather)
    int astack[TIMING_STACK];     // and their axes
    double step_ms[NUM_PHASES];   // the last step's parts
    double comm_ms[NUM_AXES];     // the last step's comm by axis (they add up to step_ms[PH_COMM])
    double comm_bytes[NUM_AXES];  // and the bytes its calls moved (each collective's whole buffer on the rank)
    // --profile, summed over the run's steps
    double row_ms[NUM_ROWS], row_flops[NUM_ROWS];
    long row_calls[NUM_ROWS];
    double profiled_ms;           // the steps' summed wall time, for the share column
    int profiled_steps;
    unsigned short *tags;         // per mark: (axis * NUM_PHASES + phase) * NUM_ROWS + row of the interval it ends
    int ntags, nmarks;            // tags' room, and the marks recorded this step
    const char *const *names;     // the rows' names as the model's family calls its modules (NULL: ROW_NAMES)
} Timing;
static Timing timing;

// A row's name in the table and the log: the model names its own modules (model.h, by family), the rest are these.
static const char *timing_row_name(int k) { return timing.names && timing.names[k] ? timing.names[k] : ROW_NAMES[k]; }

// The profile row an interval belongs to: its module, or by phase what ran outside the model.
static int timing_row(int phase, int module) {
    if (module != MOD_NONE) return module;
    switch (phase) {
        case PH_COMM: return ROW_COMM;
        case PH_OPTIMIZER: return ROW_OPTIMIZER;
        case PH_DATA: return ROW_DATA;
        default: return ROW_OTHER;
    }
}

static void timing_charge_axis(int phase, int module, int axis, double ms) {
    timing.step_ms[phase] += ms;
    if (phase == PH_COMM) timing.comm_ms[axis] += ms;
    if (timing.profile) timing.row_ms[timing_row(phase, module)] += ms;
}
// Time the host measured itself (trainer.h: the collectives after the step's end, an update it ran there).
static void timing_charge(int phase, int module, double ms) { timing_charge_axis(phase, module, AX_OTHER, ms); }

// comm.h: the bytes one call moved on an axis, counted from the step's start (timing_step_begin clears them) until
// the trainer reads them: the host's collectives after the step's end (the loss, the norm's sums) are the step's too.
static void timing_comm_bytes(int axis, double bytes) { timing.comm_bytes[axis] += bytes; }

// Ends the current interval with a mark on the build's timeline, tagged with what the interval was.
static void timing_record(void) {
    Timing *t = &timing;
    if (t->nmarks == TIMING_MAX_MARKS) {  // merge: the newest mark moves forward, its tag is kept
        t->nmarks--;
    }
    if (t->nmarks == t->ntags) {
        int n = t->ntags ? 2 * t->ntags : 256;
        t->tags = (unsigned short *)realloc(t->tags, n * sizeof(unsigned short));
        if (!t->tags) fatal("out of memory for %d timing marks", n);
        t->ntags = n;
    }
    t->tags[t->nmarks] = (unsigned short)((t->axis * NUM_PHASES + t->phase) * NUM_ROWS + t->module);
    backend_mark(t->nmarks);
    t->nmarks++;
}

// The current interval ends here; the next is charged to (phase, module, axis).
static void timing_switch_axis(int phase, int module, int axis) {
    Timing *t = &timing;
    if (phase != PH_COMM) axis = AX_OTHER;
    if (phase == t->phase && module == t->module && axis == t->axis) return;
    if (t->on && !t->held) timing_record();
    t->phase = phase;
    t->module = module;
    t->axis = axis;
}
static void timing_switch(int phase, int module) { timing_switch_axis(phase, module, timing.axis); }

// The phase from here on (trainer.h, pipeline.h). For the profile's calls column, entering the data
// phase is one micro-batch read and entering the optimizer phase one update.
static void timing_phase(int phase) {
    Timing *t = &timing;
    if (t->on && t->profile && phase != t->phase) {
        if (phase == PH_DATA) t->row_calls[ROW_DATA]++;
        if (phase == PH_OPTIMIZER) t->row_calls[ROW_OPTIMIZER]++;
    }
    timing_switch(phase, MOD_NONE);
}

// Enter a phase nested in the current one (a collective inside a layer's forward), and return. Comm entered from
// another phase is charged to AX_OTHER until comm.h names its axis (timing_push_comm); comm nested in comm keeps it.
static void timing_push_axis(int phase, int axis) {
    Timing *t = &timing;
    if (t->depth < TIMING_STACK) { t->stack[t->depth] = t->phase; t->mstack[t->depth] = t->module; t->astack[t->depth] = t->axis; }
    t->depth++;
    if (phase == PH_COMM && t->on && t->profile && t->phase != PH_COMM) t->row_calls[ROW_COMM]++;
    timing_switch_axis(phase, MOD_NONE, axis);
}
static void timing_push(int phase) { timing_push_axis(phase, timing.phase == PH_COMM ? timing.axis : AX_OTHER); }
static void timing_push_comm(int axis) { timing_push_axis(PH_COMM, axis); }
static void timing_pop(void) {
    Timing *t = &timing;
    if (t->depth == 0) return;
    t->depth--;
    if (t->depth < TIMING_STACK) timing_switch_axis(t->stack[t->depth], t->mstack[t->depth], t->astack[t->depth]);
    else timing_switch_axis(PH_OTHER, MOD_NONE, AX_OTHER);
}

// A graph's work (pipeline.h: a micro-batch's forward or backward, --tp's collectives inside it) is charged whole
// to the phase it starts in: a capture may not record the marks' events between its kernels (they would time
// nothing when replayed), so the switches inside it only move the phase and module, back where they began.
static void timing_hold(int on) { timing.held = on; }

// model.h, before each kernel: the module it belongs to and the FLOPs it does (0 for the
// memory-bound elementwise kernels, which the model's FLOP count leaves out too). MOD_NONE after
// the last kernel of a piece.
static void timing_module(int module, double flops) {
    Timing *t = &timing;
    if (!t->profile) return;
    if (module != MOD_NONE && t->on) {
        t->row_calls[module]++;
        t->row_flops[module] += flops;
    }
    timing_switch(t->phase, module);
}

static void timing_step_begin(void) {
    Timing *t = &timing;
    memset(t->step_ms, 0, sizeof(t->step_ms));
    memset(t->comm_ms, 0, sizeof(t->comm_ms));
    memset(t->comm_bytes, 0, sizeof(t->comm_bytes));
    t->phase = PH_OTHER;
    t->module = MOD_NONE;
    t->axis = AX_OTHER;
    t->depth = 0;
    t->on = 1;
    t->nmarks = 0;
    timing_record();  // the step's start
}

// Ends the step: fills timing.step_ms. The step's one synchronisation: the host waits here for the
// step's last kernel (backend_step_sync), so the step's wall time includes it. The step's own wall time, the profile's 100%, is the trainer's to add
// to profiled_ms: it spans the host's collectives after this point too.
static void timing_step_end(void) {
    Timing *t = &timing;
    timing_record();
    backend_step_sync(t->nmarks - 1);
    for (int i = 1; i < t->nmarks; i++) {
        int tag = t->tags[i];
        timing_charge_axis(tag / NUM_ROWS % NUM_PHASES, tag % NUM_ROWS, tag / NUM_ROWS / NUM_PHASES, backend_mark_ms(i));
    }
    t->on = 0;
    t->phase = PH_OTHER;
    t->module = MOD_NONE;
    t->axis = AX_OTHER;
    t->depth = 0;
}

static double timing_sum(const double *ms) {
    double s = 0.0;
    for (int p = 0; p < NUM_PHASES; p++) s += ms[p];
    return s;
}

#endif
