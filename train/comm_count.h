// comm_count.h: one training step's communication on one rank, counted without running it, for the fitting layouts'
// table (tune_list.h). The bytes are those the run's own counters add up (parallel/comm.h's comm_enter and comm_isend
// charge each call to an axis: timing.h's CommAxis, which --timing prints and the log's "comm_bytes" holds): each
// collective's whole buffer on the rank (an all-reduce's n values, an all-gather's or a reduce-scatter's N shards), a
// send's and a receive's message. Every call a step makes is walked here in the order the code makes it, from the
// same sizes (zero_unit_size, comm_shard_size, model_param_runs, tp_group_init's gradient sums, the 1F1B schedule's
// messages), so the figures are counts, not estimates; test_tp_plan.sh holds them to what real runs count.
//
// The rank counted is TP rank 0 and data-parallel rank 0 of a stage (its other TP and data-parallel ranks move the
// same bytes: equal shards, equal slices). A step here is one after an update (ZeRO-3's gathered layers dropped),
// with AdamW: Muon's and Adafactor's own gathers of whole matrices are not walked (the caller says so).
#ifndef COMM_COUNT_H
#define COMM_COUNT_H

#include "plan.h"

// The layout whose step is counted.
typedef struct {
    const ModelConfig *mc;   // the whole model
    int tp, sp, pp, dp, zero, recompute;
    int B, T, A;             // micro-batch, sequence, micro-batches per step per data-parallel rank
    const int *first;        // pp_split's layer split (pp + 1 entries)
    size_t x_bytes;          // the activations' element (target_x_bytes): TP's and the pipeline's messages
    int fuses_gelu;          // the MLP's GELU in the matmul (backend_fuses_gelu): recompute 1-2 gathers its input again
    int verdict;             // the update goes with the device's verdict (zero_update_on_device): the norm's slots gathered
} CommLayout;

// The model as stage s's TP rank 0 holds it: its slice's config, the units it holds and their sizes.
static ModelConfig comm_count_slice(const CommLayout *c) {
    ModelConfig m = *c->mc;
    m.tp_size = c->tp; m.tp_rank = 0; m.seq_parallel = c->tp > 1 && c->sp;
    return m;
}

// TP's bytes of one micro-batch on stage s (tensor_parallel.h's pairs, as model/model.h calls them): per layer forward
// two column inputs (--sp: all-gathers) and two row outputs (reduce-scatters; without --sp all-reduces); backward the
// two row outputs' gradients (--sp: all-gathers), the two column inputs' rows again (--sp) and their gradients
// (reduce-scatters, or all-reduces); recompute 3 runs the forward again, 1-2 the MLP's input gather where GELU is fused.
// The embedding's output is a row output; the head's input a column input, and its cross-entropy gathers each row's
// max and all-reduces its sum of exponentials and target logit (floats).
static double comm_count_tp_micro(const CommLayout *c, int s) {
    double BT = (double)c->B * c->T, btc = BT * c->mc->channels * c->x_bytes;
    int sp = c->sp, layers = c->first[s + 1] - c->first[s];
    double fwd = (sp ? 4 : 2) * btc, bwd = (sp ? 6 : 2) * btc;
    double again = c->recompute >= 3 ? fwd : c->recompute >= 1 && c->fuses_gelu && c->mc->mlp == MLP_GELU && sp ? btc : 0.0;
    double bytes = layers * (fwd + bwd + again);
    if (s == 0) bytes += btc + (sp ? btc : 0.0);
    if (s == c->pp - 1) bytes += (sp ? 2 * btc : 0.0) + btc + (double)c->tp * BT * sizeof(float) + 2 * BT * sizeof(float);
    // a tied embedding's lookup part, added at the output end (pipeline.h): the embedding's gradient rows gathered there too
    if (s == c->pp - 1 && c->pp > 1 && sp && model_ties_ends(c->mc)) bytes += btc;
    return bytes;
}

// TP's gradient sums of the replicated tensors (tp_sum_grads over tp_group_init's list) of the units the stage holds:
// once a step at ZeRO 0-1, every micro-batch at 2-3 (each unit's bucket); a sum over the key/value heads' ranks moves
// nothing where each rank has its own heads (kv_comm of one rank). Then the norm's one double.
static double comm_count_tp_sums(const CommLayout *c, const ModelConfig *slice, const size_t *usize) {
    TpGroup g;
    tp_group_init(&g, slice, NULL, NULL);
    TpDims td = model_tp_dims(slice);
    double bytes = 0.0;
    for (int i = 0; i < g.nsync; i++)
        if (usize[g.sync_unit[i]] && (g.sync_kind[i] != TP_SYNC_KV || tp_kv_replicas(&td) > 1)) bytes += (double)g.sync_len[i] * sizeof(float);
    tp_group_free(&g);
    return bytes * (c->zero >= 2 ? c->A : 1) + sizeof(double);
}

// ZeRO-3's layer gathers in a step of A micro-batches on one stage (pp 1): zero_fetch_layer's two buffers and its
// prefetch walked through each micro-batch's forward (layers up) and backward (down); a prefetch is counted when it is
// waited for, as comm_wait charges it. Returns the gathers.
static int comm_count_z3_gathers(int L, int A) {
    int slot[2] = {-1, -1}, pre = -1, n = 0;
    for (int i = 0; i < A; i++)
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < L; k++) {
                int dir = pass ? -1 : 1, l = pass ? L - 1 - k : k, next = l + dir;
                if (pre == l) { n++; pre = -1; slot[l & 1] = l; }
                if (slot[l & 1] != l) { n++; slot[l & 1] = l; }
                if (next >= 0 && next < L && slot[next & 1] != next && pre < 0) { slot[next & 1] = -1; pre = next; }
            }
    return n + (pre >= 0);  // the update waits for a prefetch still in flight
}

// The data-parallel group's bytes (zero.h): the gradients' reduction (stage 0 all-reduces the whole padded model once
// a step, 1 reduce-scatters each unit once, 2-3 each layer's bucket and the outer unit every micro-batch), the tied
// outer tensors' sum between the pipeline's ends; the gathers: the updated shards (stages 1-2), the outer unit once
// and the layers as walked (stage 3), the norm's sums of squares (a double per rank) and the device's verdict's slots.
static void comm_count_zero(const CommLayout *c, int s, const ModelConfig *slice, const int *holds, const size_t *usize,
                            double bytes[NUM_AXES]) {
    int nu = model_num_units(slice), D = c->dp;
    double whole = 0.0, layers = 0.0, outer = (double)comm_shard_size(usize[0], D) * D * sizeof(float);
    for (int u = 0; u < nu; u++) {
        double w = (double)comm_shard_size(usize[u], D) * D * sizeof(float);
        whole += w;
        if (u > 0) layers += w;
    }
    if (c->pp > 1 && holds[0]) {  // zero_sum_tied: the runs both ends use
        ParamRun *runs = (ParamRun *)mallocCheck(model_max_runs(slice) * sizeof(ParamRun));
        int nr = model_param_runs(slice, runs);
        for (int i = 0; i < nr; i++)
            if (runs[i].unit == 0 && runs[i].ends == ARCH_END_BOTH) bytes[AX_DP_REDUCE] += (double)runs[i].len * sizeof(float);
        free(runs);
    }
    if (D == 1) return;
    if (c->zero <= 1) bytes[AX_DP_REDUCE] += whole;
    else bytes[AX_DP_REDUCE] += c->A * (layers + (s == 0 ? outer : 0.0));
    if (c->zero == 0) return;
    if (c->zero <= 2) bytes[AX_GATHER] += whole;
    else {
        int L = c->first[s + 1] - c->first[s];
        bytes[AX_GATHER] += (holds[0] ? outer : 0.0) + comm_count_z3_gathers(L, c->A) * (layers / (L > 0 ? L : 1));
    }
    bytes[AX_GATHER] += (double)D * sizeof(double) + (c->verdict ? 2.0 * D * sizeof(float) : 0.0);
}

// One step's bytes on stage s's first rank, by axis, into bytes.
static void comm_count_step(const CommLayout *c, int s, double bytes[NUM_AXES]) {
    for (int k = 0; k < NUM_AXES; k++) bytes[k] = 0.0;
    ModelConfig slice = comm_count_slice(c);
    slice.ends = pp_stage_ends(s, c->pp);  // the outer tensors stage s holds (its reductions and gathers move those alone)
    int nu = model_num_units(&slice);
    int *holds = (int *)mallocCheck(nu * sizeof(int));
    size_t *usize = (size_t *)mallocCheck(nu * sizeof(size_t));
    PlanLayout l = {&slice, c->B, c->T, c->recompute, 0, 0, NULL, c->dp, 0, 0, 0, NULL, 0, 0};
    plan_stage(&l, c->first, c->pp, s, c->A, holds);  // the units the stage holds, as the run's plan and zero.h have them
    for (int u = 0; u < nu; u++) usize[u] = zero_unit_size(&slice, u, holds);
    if (c->tp > 1) bytes[AX_TP] = c->A * comm_count_tp_micro(c, s) + comm_count_tp_sums(c, &slice, usize);
    if (c->pp > 1) {  // 1F1B: every micro-batch's activations to the next stage and their gradients back (pipeline.h)
        double msg = (double)(c->tp > 1 && c->sp ? c->B * c->T / c->tp : c->B * c->T) * c->mc->channels * c->x_bytes;
        int links = (s > 0) + (s < c->pp - 1);
        bytes[AX_PIPE_SEND] = bytes[AX_PIPE_WAIT] = (double)c->A * links * msg;
        if (model_ties_ends(c->mc)) {  // a tied embedding: each micro-batch's lookup gradient from the input end to the output end
            if (s == 0) bytes[AX_PIPE_SEND] += c->A * msg;
            if (s == c->pp - 1) bytes[AX_PIPE_WAIT] += c->A * msg;
        }
    }
    comm_count_zero(c, s, &slice, holds, usize, bytes);
    // the step's loss over the world and the norm's sum over the stages, a double each
    bytes[AX_OTHER] = (c->tp * c->dp * c->pp > 1 ? sizeof(double) : 0) + (c->pp > 1 ? sizeof(double) : 0);
    free(holds);
    free(usize);
}

#endif
