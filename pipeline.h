// pipeline.h: 1F1B pipeline parallelism (PipeDream-Flush), written once for every build. The
// model's layers are split among `stages` ranks of a pipeline group; micro-batches flow forward
// through them and their gradients flow back, with activations and gradients passed between
// neighbours by point-to-point messages (comm.h). Like zero.h it only calls the model's pieces and
// comm.h, never touching memory itself.
//
// The schedule is a pure function (pp_schedule). Stage s runs min(stages - s - 1, m) warm-up
// forwards, then alternates one forward and one backward, then drains the remaining backwards, so
// it never holds more than min(stages - s, m) micro-batches' activations. With one stage it is
// plain gradient accumulation. Sends are buffered (they never block) and receives block, which the
// schedule's simulation (test/test_pipeline.c) shows cannot deadlock.
#ifndef PIPELINE_H
#define PIPELINE_H

#include "parallel/comm.h"
#include "dataloader.h"
#include "parallel/pipeline_schedule.h"  // the schedule and the split, pure
#include "zero.h"

// A stage: its layers [first, last), its pipeline group (rank = stage) and its data-parallel Zero.

typedef struct {
    int stages, stage, first, last, slots;
    Comm *group;              // the pipeline group: this data-parallel rank's stages, one rank each
    Zero *z;                  // this stage's data-parallel group and memory
    double wait_s;            // time spent blocked in receives during the last step
} Pipeline;

// What passes between stages: a micro-batch's activations or their gradients, B*T*C values of the
// model's activation type (floatX), moved bit for bit.
static size_t pp_message_count(const Model *m, int B, int T) { return model_stage_count(m, B, T); }
static CommType pp_message_type(void) { return X_BYTES == 2 ? COMM_FLOAT16 : COMM_FLOAT32; }

// Sends are buffered and non-blocking (comm_isend), so the stage moves on at once.
static void pp_send(Pipeline *p, const void *src, size_t n, int peer, int tag) {
    timing_push(PH_COMM);  // the copy out and the hand-off to MPI are the message's cost
    comm_isend(p->group, src, n, pp_message_type(), peer, tag);
    timing_pop();
}

static void pp_wait_sends(Pipeline *p) {
    timing_push(PH_COMM);
    comm_wait_sends(p->group);
    timing_pop();
}

static void pp_recv(Pipeline *p, void *dst, size_t n, int peer, int tag) {
    timing_push(PH_COMM);  // a receive's wait is the pipeline's idle time: comm in the step's breakdown
    double t0 = wall_seconds();
    comm_recv(p->group, dst, n, pp_message_type(), peer, tag);
    p->wait_s += wall_seconds() - t0;
    timing_pop();
}

// Message tags: kind (0 activations, 1 their gradients, 2 a tied embedding's output gradient) and micro-batch, so a
// mismatch is caught by MPI rather than read as data.
enum { PP_MSG_ACT, PP_MSG_GRAD, PP_MSG_TIED, PP_MSG_KINDS };
static int pp_tag(int kind, int micro) { return micro * PP_MSG_KINDS + kind; }

// The forward of this stage's layers for the current slot.
static void pp_stage_forward(Pipeline *p) {
    for (int l = p->first; l < p->last; l++) zero_layer_forward(p->z, l);
}

static void pp_stage_backward(Pipeline *p) {
    for (int l = p->last - 1; l >= p->first; l--) zero_layer_backward(p->z, l);
}

// A micro-batch's forward and backward as CUDA graphs (backend.h), where they are nothing but the device's
// work: one stage holding the whole model (no pipeline messages), ZeRO-0 or 1 (whose collectives come after the
// backward, not inside it), no --offload (host copies), no --profile (events between kernels); --tp where its
// collectives are the device's (--comm nccl: the graph records them in line), not MPI's through host copies. The
// rest run eagerly. The graphs freeze the micro-batch's shape (B, T and its activation slot) and the loss
// gradient's weight dloss (the loss scale): a new one records them again.
static int pp_graphed(const Pipeline *p) {
    return p->stages == 1 && p->z->stage <= 1 && tp_on_device(p->z->tp) && !p->z->offload &&
           !timing.profile;
}
static uint64_t pp_graph_shape(const Model *m) {
    return (uint64_t)m->cur_B << 40 | (uint64_t)m->cur_T << 16 | (uint64_t)m->slot;
}
static uint64_t pp_float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

// The tokens go up and the losses come back outside the graph: the copies' host sides change every time.
static void pp_forward_graphed(Pipeline *p, const int *inputs, const int *targets, int B, int T, float dloss) {
    Model *m = p->z->model;
    model_embed_inputs(m, inputs, B, T);
    model_head_targets(m, targets);
    model_weights_ready(m);
    timing_hold(1);  // --tp's collectives inside: a graph has no marks between its kernels (the forward's time)
    if (!backend_graph_begin(GRAPH_FORWARD, pp_graph_shape(m), pp_float_bits(dloss))) {
        model_embed_run(m);
        pp_stage_forward(p);
        model_head_run(m, 1, dloss);
        backend_graph_end(GRAPH_FORWARD);
    }
    timing_hold(0);
    model_head_losses(m);
}

static void pp_backward_graphed(Pipeline *p) {
    Model *m = p->z->model;
    model_weights_ready(m);
    timing_hold(1);
    if (!backend_graph_begin(GRAPH_BACKWARD, pp_graph_shape(m), 0)) {
        model_head_backward(m);
        pp_stage_backward(p);
        zero_embed_backward(p->z);
        backend_graph_end(GRAPH_BACKWARD);
    }
    timing_hold(0);
}

// A tied embedding (zero_ties_ends: the token table is also the head) gets two parts of its gradient per micro-batch:
// the head's at the output end and the lookup's at the input end. One process adds them into one buffer in the order
// head 0, lookup 0, head 1, lookup 1, ... (each micro-batch's backward runs head to embedding), and float sums depend
// on their order; so the output end adds both, in that order: the input end adds only its own tables (GPT-2's
// positions) and sends the embedding output's gradient of micro-batch i (a stage message, PP_MSG_TIED); the output end
// keeps the micro-batch's ids (it reads every micro-batch), runs backward i + 1 without the head's weight part, sends
// its gradient on, and only then receives lookup i, adds it and the deferred head part (model_head_backward_parts),
// so that its wait overlaps the other stages' backward of i; the last lookup after the schedule. Waiting there
// deadlocks nothing: lookup i needs only backwards of i, which the output end has done. zero_sum_tied then hands the
// sum to the input end.
static int pp_tied(const Pipeline *p) { return p->stages > 1 && zero_ties_ends(p->z); }

static void pp_tied_lookup(Pipeline *p, const int *ids, int i, size_t n, int B, int T) {
    Model *m = p->z->model;
    pp_recv(p, model_stage_grad(m), n, 0, pp_tag(PP_MSG_TIED, i));
    timing_phase(PH_BACKWARD);
    model_embed_backward_tokens(m, ids, B, T);
}

// One optimizer step's micro-batches through the pipeline, accumulating gradients. Each forward
// reads the next micro-batch from `loader` on every stage (the first needs its inputs, the last its
// targets, the others keep their position in step). The last stage's heads queue their losses for
// model_take_loss, which the trainer calls after the step's synchronisation.
static void pp_run_step(Pipeline *p, DataLoader *loader, int micro, int B, int T, float dloss) {
    Model *m = p->z->model;
    size_t n = pp_message_count(m, B, T);
    PPOp *ops = (PPOp *)mallocCheck((size_t)6 * micro * sizeof(PPOp));
    int nops = pp_schedule(p->stage, p->stages, micro, ops);
    int last = p->stages - 1, graphed = pp_graphed(p), tied = pp_tied(p), BT = B * T;
    int *ids = tied && p->stage == last ? (int *)mallocCheck(2 * (size_t)BT * sizeof(int)) : NULL;  // micro-batches i, i - 1
    p->wait_s = 0.0;
    for (int k = 0; k < nops; k++) {
        int i = ops[k].micro;
        model_use_slot(m, i % p->slots);
        switch (ops[k].kind) {
            case PP_RECV_ACT: pp_recv(p, model_stage_input(m, B, T), n, p->stage - 1, pp_tag(PP_MSG_ACT, i)); break;
            case PP_FWD:
                timing_phase(PH_DATA);
                dataloader_next(loader);
                timing_phase(PH_FORWARD);
                model_doc_starts(m, loader->doc_start, B, T);  // every stage: each layer's attention masks by them
                if (graphed) {
                    pp_forward_graphed(p, loader->inputs, loader->targets, B, T, dloss);
                    break;
                }
                if (p->stage == 0) zero_embed_forward(p->z, loader->inputs, B, T);
                if (ids) memcpy(ids + (size_t)(i % 2) * BT, loader->inputs, (size_t)BT * sizeof(int));
                pp_stage_forward(p);
                if (p->stage == last) zero_head_forward(p->z, loader->targets, dloss);
                break;
            case PP_SEND_ACT: pp_send(p, model_stage_output(m), n, p->stage + 1, pp_tag(PP_MSG_ACT, i)); break;
            case PP_RECV_GRAD: pp_recv(p, model_stage_grad(m), n, p->stage + 1, pp_tag(PP_MSG_GRAD, i)); break;
            case PP_BWD:
                timing_phase(PH_BACKWARD);
                if (graphed) {
                    pp_backward_graphed(p);
                    break;
                }
                if (p->stage == last) model_head_backward_parts(m, ids ? HEAD_INPUT : HEAD_INPUT | HEAD_WEIGHTS);
                pp_stage_backward(p);
                if (p->stage == 0) zero_embed_backward_tables(p->z, !tied);
                if (p->stage == 0 && tied) pp_send(p, model_stage_grad(m), n, last, pp_tag(PP_MSG_TIED, i));
                break;
            case PP_SEND_GRAD:
                pp_send(p, model_stage_grad(m), n, p->stage - 1, pp_tag(PP_MSG_GRAD, i));
                if (!ids) break;
                if (i > 0) pp_tied_lookup(p, ids + (size_t)((i - 1) % 2) * BT, i - 1, n, B, T);
                model_head_backward_parts(m, HEAD_WEIGHTS);  // after lookup i - 1, in this micro-batch's slot
                break;
        }
    }
    if (ids) pp_tied_lookup(p, ids + (size_t)((micro - 1) % 2) * BT, micro - 1, n, B, T);
    pp_wait_sends(p);
    free(ops);
    free(ids);
}

// A forward without backward (validation, sampling): the micro-batch goes through every stage in
// turn. The last stage returns the loss (with targets); the others return 0. doc_start: the rows' document starts
// (dataloader.h's, with --doc-mask), or NULL: each row one document (a sample, a multiple-choice item).
static float pp_forward_only_docs(Pipeline *p, const int *inputs, const int *targets, const int *doc_start, int B, int T) {
    Model *m = p->z->model;
    size_t n = pp_message_count(m, B, T);
    int last = p->stages - 1;
    model_use_slot(m, 0);
    model_doc_starts(m, doc_start, B, T);
    if (p->stage == 0) zero_embed_forward(p->z, inputs, B, T);
    else pp_recv(p, model_stage_input(m, B, T), n, p->stage - 1, pp_tag(PP_MSG_ACT, 0));
    pp_stage_forward(p);
    float loss = 0.0f;
    if (p->stage < last) pp_send(p, model_stage_output(m), n, p->stage + 1, pp_tag(PP_MSG_ACT, 0));
    else {
        zero_head_forward(p->z, targets, 0.0f);
        loss = (float)model_take_loss(m);
    }
    pp_wait_sends(p);
    return loss;
}
static float pp_forward_only(Pipeline *p, const int *inputs, const int *targets, int B, int T) {
    return pp_forward_only_docs(p, inputs, targets, NULL, B, T);
}

#endif
