// tensor_parallel.h: tensor parallelism (--tp N, Megatron's split; tp_layout.h says how each tensor is cut) as the
// shared code runs it: the mesh (which rank is which TP rank, data-parallel index and pipeline stage), the TP
// group and the collectives around the block's matmuls, the vocabulary-parallel cross-entropy, and the gradient
// sums and the norm's bookkeeping that replicated tensors need. It calls comm.h and the backend's kernels only.
//
// Per layer and micro-batch (without sequence parallelism): the activations entering attention and the MLP are
// replicated on the TP ranks; q/k/v and the MLP's first matmul are column-parallel (each rank its heads, its
// hidden columns), attention runs on the rank's own heads, and attention's output projection and the MLP's second
// matmul are row-parallel, their partial sums all-reduced (2 all-reduces of B T C forward). Backward mirrors it:
// the gradients entering the two column-parallel matmuls' inputs are partial and are all-reduced before the norms'
// backward (2 more). The embedding (vocabulary-parallel: each rank its rows, others' tokens zero) takes one
// all-reduce; the head's cross-entropy reduces each row's max (gathered), sum of exponentials and target logit,
// and the head's input gradient is all-reduced: the logits are never gathered.
#ifndef TENSOR_PARALLEL_H
#define TENSOR_PARALLEL_H

#include "comm.h"

// The mesh: world = TP x data-parallel x pipeline stages, TP innermost (consecutive ranks, one node), then the
// data-parallel index, then the stage (Megatron's order).
typedef struct {
    int tp, dp, pp;              // the degrees
    int tp_rank, dp_rank, stage;
} TpMesh;

static TpMesh tp_mesh(int rank, int tp, int dp, int pp) {
    TpMesh m = {tp, dp, pp, rank % tp, (rank / tp) % dp, rank / (tp * dp)};
    return m;
}
static int tp_mesh_rank(const TpMesh *m, int tp_rank, int dp_rank, int stage) {
    return tp_rank + m->tp * (dp_rank + m->dp * stage);
}

// The TP collectives' traffic this step, by kind: the bytes of each collective's whole buffer on a rank (an
// all-reduce's n values; an all-gather's or a reduce-scatter's N shards), summed.
enum { TP_ALLREDUCE, TP_ALLGATHER, TP_REDUCE_SCATTER, TP_NUM_KINDS };
static const char *const TP_KIND_NAMES[TP_NUM_KINDS] = {"all_reduce", "all_gather", "reduce_scatter"};

// A rank's TP group. comm: the N ranks of its (data-parallel index, stage); kv: those of them holding the same
// key/value heads (N > KV), whose gradients of those heads are summed.
typedef struct {
    int n, r, sp;
    int decoding;  // one token at a time (generation): every rank runs it whole, so no sequence sharding
    Comm *comm, *kv;
    // where this rank's gradients need completing (TP_SYNC_ALL / _KV), and the ranges it does not count in the
    // gradient norm: per local unit, merged runs (unit, offset, length)
    int nsync, nskip;
    int *sync_unit, *sync_kind;
    size_t *sync_off, *sync_len;
    int *skip_unit;
    size_t *skip_off, *skip_len;
    double bytes[TP_NUM_KINDS];  // since tp_bytes_take
} TpGroup;

// Adds run (u, off, len) to a list, merged with the last entry where it continues it.
static void tp_range_add(int *n, int **unit, size_t **off, size_t **len, int **kind, int u, size_t o, size_t l, int k) {
    int i = *n - 1;
    if (i >= 0 && (*unit)[i] == u && (*off)[i] + (*len)[i] == o && (!kind || (*kind)[i] == k)) { (*len)[i] += l; return; }
    *unit = (int *)reallocCheck(*unit, (*n + 1) * sizeof(int));
    *off = (size_t *)reallocCheck(*off, (*n + 1) * sizeof(size_t));
    *len = (size_t *)reallocCheck(*len, (*n + 1) * sizeof(size_t));
    if (kind) { *kind = (int *)reallocCheck(*kind, (*n + 1) * sizeof(int)); (*kind)[*n] = k; }
    (*unit)[*n] = u; (*off)[*n] = o; (*len)[*n] = l;
    (*n)++;
}

// The group of a TP rank whose local config is c (tp_size > 1), over comm (its TP ranks) and kv.
static void tp_group_init(TpGroup *g, const ModelConfig *c, Comm *comm, Comm *kv) {
    memset(g, 0, sizeof(*g));
    g->n = c->tp_size; g->r = c->tp_rank; g->sp = c->seq_parallel;
    g->comm = comm; g->kv = kv;
    ArchShape s = model_whole_shape(c);
    TpDims t = model_tp_dims(c);
    int n = tp_param_runs(model_arch(c), &s, &t, c->seq_parallel, NULL, NULL);
    ParamRun *runs = (ParamRun *)mallocCheck((size_t)n * sizeof(ParamRun));
    TpRunInfo *info = (TpRunInfo *)mallocCheck((size_t)n * sizeof(TpRunInfo));
    tp_param_runs(model_arch(c), &s, &t, c->seq_parallel, runs, info);
    for (int i = 0; i < n; i++) {
        if (info[i].sync != TP_SYNC_NONE)
            tp_range_add(&g->nsync, &g->sync_unit, &g->sync_off, &g->sync_len, &g->sync_kind, runs[i].unit, runs[i].unit_off,
                         runs[i].len, info[i].sync);
        if (!info[i].counted)
            tp_range_add(&g->nskip, &g->skip_unit, &g->skip_off, &g->skip_len, NULL, runs[i].unit, runs[i].unit_off, runs[i].len, 0);
    }
    free(runs); free(info);
}

static void tp_group_free(TpGroup *g) {
    free(g->sync_unit); free(g->sync_kind); free(g->sync_off); free(g->sync_len);
    free(g->skip_unit); free(g->skip_off); free(g->skip_len);
}

// The collectives the model's passes call, as Megatron's mappings (mappings.py): each a forward and its backward,
// named for what they do forward. model/model.h calls these and no comm_ function; g NULL (no --tp) makes each the
// identity. Buffers are (rows, C) floatX in the build's memory, summed in its type; the bytes each moves are counted
// (tp_bytes_take).
//   copy_to      forward identity;          backward all-reduce     a column-parallel matmul's replicated input
//   reduce_from  forward all-reduce;        backward identity       a row-parallel matmul's partial output
//   gather_from  forward all-gather rows;   backward reduce-scatter --sp: a column-parallel matmul's sharded input
//   scatter_to   forward reduce-scatter;    backward all-gather     --sp: a row-parallel matmul's output, sharded
// Sequence parallelism (--sp): the residual stream, the norms and their saved activations (the table's seq_sharded
// entries) hold B T / N token rows per rank (rank r rows r B T / N ..): the column-parallel input's pair is then
// gather_from's, the row-parallel output's scatter_to's; without it, copy_to's and reduce_from's.

static void tp_allreduce_x(TpGroup *g, floatX *buf, size_t n) {
    timing_push(PH_COMM);
    comm_allreduce_sum_x(g->comm, buf, n);
    timing_pop();
    g->bytes[TP_ALLREDUCE] += (double)n * X_BYTES;
}
// this rank's `n` values (its rows) into full, then every rank's; returns full.
static floatX *tp_gather_rows(TpGroup *g, floatX *full, const floatX *mine, size_t n) {
    floatX *at = (floatX *)((char *)full + (size_t)g->r * n * X_BYTES);
    if (at != mine) backend_copy((float *)at, (const float *)mine, n * X_BYTES / sizeof(float));
    timing_push(PH_COMM);
    comm_allgather_x(g->comm, full, n);
    timing_pop();
    g->bytes[TP_ALLGATHER] += (double)n * g->n * X_BYTES;
    return full;
}
// full holds this rank's partial sums of every row; returns where the sums of its own `n` values are, inside full.
static floatX *tp_scatter_rows(TpGroup *g, floatX *full, size_t n) {
    timing_push(PH_COMM);
    comm_reduce_scatter_sum_x(g->comm, full, n);
    timing_pop();
    g->bytes[TP_REDUCE_SCATTER] += (double)n * g->n * X_BYTES;
    return (floatX *)((char *)full + (size_t)g->r * n * X_BYTES);
}

static const floatX *tp_copy_to_forward(TpGroup *g, const floatX *x) { (void)g; return x; }
static floatX *tp_copy_to_backward(TpGroup *g, floatX *dx, size_t BT, size_t C) {
    if (g) tp_allreduce_x(g, dx, BT * C);
    return dx;
}
static floatX *tp_reduce_from_forward(TpGroup *g, floatX *x, size_t BT, size_t C) { return tp_copy_to_backward(g, x, BT, C); }
static const floatX *tp_reduce_from_backward(TpGroup *g, const floatX *dx) { (void)g; return dx; }
static const floatX *tp_gather_from_forward(TpGroup *g, floatX *full, const floatX *mine, size_t rows, size_t C) {
    return tp_gather_rows(g, full, mine, rows * C);
}
static floatX *tp_gather_from_backward(TpGroup *g, floatX *dfull, size_t rows, size_t C) { return tp_scatter_rows(g, dfull, rows * C); }
static floatX *tp_scatter_to_forward(TpGroup *g, floatX *full, size_t rows, size_t C) { return tp_scatter_rows(g, full, rows * C); }
static const floatX *tp_scatter_to_backward(TpGroup *g, floatX *dfull, const floatX *dmine, size_t rows, size_t C) {
    return tp_gather_rows(g, dfull, dmine, rows * C);
}

// --sp in force for this pass: a TP group with sequence parallelism, outside decoding.
static int tp_sp(const TpGroup *g) { return g && g->sp && !g->decoding; }
// Generation starts (1) or ends (0): one token at a time, which every TP rank runs whole.
static void tp_decoding(TpGroup *g, int on) { if (g) g->decoding = on; }
// Token rows of the residual stream, the norms and their statistics this rank holds of BT.
static int tp_rows(const TpGroup *g, int BT) { return tp_sp(g) ? BT / g->n : BT; }

// A column-parallel matmul's input (the norms' outputs, the head's): forward all BT rows (full: --sp's gather
// buffer), backward the input gradient's parts summed; returns this rank's rows of the sum.
static const floatX *tp_column_input_forward(TpGroup *g, floatX *full, const floatX *mine, int BT, size_t C) {
    if (tp_sp(g)) return tp_gather_from_forward(g, full, mine, (size_t)tp_rows(g, BT), C);
    return tp_copy_to_forward(g, mine);
}
static floatX *tp_column_input_backward(TpGroup *g, floatX *dx, int BT, size_t C) {
    if (tp_sp(g)) return tp_gather_from_backward(g, dx, (size_t)tp_rows(g, BT), C);
    return tp_copy_to_backward(g, dx, (size_t)BT, C);
}
// A row-parallel matmul's output (attention's and the MLP's projections, the vocabulary-parallel embedding): forward
// the ranks' parts summed, returning this rank's rows of the sum (inside part); backward the output gradient as the
// matmul reads it, all BT rows (dfull: --sp's gather buffer).
static floatX *tp_row_output_forward(TpGroup *g, floatX *part, int BT, size_t C) {
    if (tp_sp(g)) return tp_scatter_to_forward(g, part, (size_t)tp_rows(g, BT), C);
    return tp_reduce_from_forward(g, part, (size_t)BT, C);
}
static const floatX *tp_row_output_backward(TpGroup *g, floatX *dfull, const floatX *dmine, int BT, size_t C) {
    if (tp_sp(g)) return tp_scatter_to_backward(g, dfull, dmine, (size_t)tp_rows(g, BT), C);
    return tp_reduce_from_backward(g, dmine);
}
// Where a replicated tensor's gradient goes that is computed from all BT rows: with --sp each rank's gradients of
// replicated tensors are parts summed over the group (tp_sum_grads), so this one is counted by TP rank 0 only (NULL
// elsewhere).
static float *tp_whole_grad(const TpGroup *g, float *grad) { return tp_sp(g) && g->r != 0 ? NULL : grad; }

// A row-parallel projection (IC -> C: each rank its IC columns of weight): this rank's part, without the bias, into
// part (BT rows), the parts summed; returns this rank's rows of the sum (tp_row_bias_residual adds the bias).
static const floatX *tp_row_parallel_forward(TpGroup *g, floatX *part, const floatX *inp, const floatX *weight, int BT,
                                             int IC, int C) {
    matmul_forward(part, inp, weight, NULL, BT, IC, C);
    return tp_row_output_forward(g, part, BT, (size_t)C);
}
// Then onto the residual stream, this rank's rows (with --sp its BT / N): out = res + (sum + bias), the bias added
// once, after the sum (Megatron's RowParallelLinear), by every rank alike; NULL bias: out = res + sum.
static void tp_row_bias_residual(const TpGroup *g, floatX *out, const floatX *res, const floatX *sum, const floatX *bias,
                                 int BT, int C) {
    if (bias) residual_bias_forward(out, res, sum, bias, tp_rows(g, BT), C);
    else residual_forward(out, res, sum, (long)tp_rows(g, BT) * C);
}

// The vocabulary-parallel embedding (each rank rows [r Vpl, (r + 1) Vpl) of wte; others' tokens zero): this rank's
// lookups (the positions added by TP rank 0) into full (B T rows), summed as a row-parallel output; this rank's rows
// of the sum end in out.
static void tp_embedding_forward(TpGroup *g, floatX *out, floatX *full, const int *inputs, const floatX *wte, const floatX *wpe,
                                 int B, int T, int C, int Vpl) {
    floatX *part = tp_sp(g) ? full : out;
    encoder_forward_vocab(part, inputs, wte, g->r == 0 ? wpe : NULL, B, T, C, g->r * Vpl, Vpl);
    const floatX *mine = tp_row_output_forward(g, part, B * T, (size_t)C);
    if (mine != out) backend_copy((float *)out, (const float *)mine, (size_t)tp_rows(g, B * T) * C * X_BYTES / sizeof(float));
}
// Its backward: the output gradient's rows gathered (--sp), this rank's rows of wte accumulated, the positions'
// gradient where tp_whole_grad says.
static void tp_embedding_backward(TpGroup *g, float *dwte, float *dwpe, floatX *dfull, const floatX *dmine, const int *inputs,
                                  int B, int T, int C, int Vpl) {
    const floatX *dout = tp_row_output_backward(g, dfull, dmine, B * T, (size_t)C);
    encoder_backward_vocab(dwte, tp_whole_grad(g, dwpe), dout, inputs, B, T, C, g->r * Vpl, Vpl);
}

// The vocabulary-parallel cross-entropy of this rank's logit columns [v0, v0 + Vpl) (v0 = r Vpl), the first Vl valid: each
// row's max gathered, its sum of exponentials and target logit all-reduced (2 N floats), so every rank has the
// whole vocabulary's losses and its own columns of the gradient. scratch: (n + 2) N floats (tp_scratch_floats).
static size_t tp_scratch_floats(int n, size_t N) { return n > 1 ? ((size_t)n + 2) * N : 0; }
static void tp_classifier(TpGroup *g, floatX *logits, float *losses, const int *targets, int N, int Vl, int Vpl, float dloss,
                          float *scratch) {
    int v0 = g->r * Vpl;
    float *maxes = scratch, *sums = scratch + (size_t)g->n * N;
    classifier_vocab_max(logits, maxes + (size_t)g->r * N, N, Vl, Vpl);
    timing_push(PH_COMM);
    comm_allgather(g->comm, maxes, (size_t)N);
    timing_pop();
    g->bytes[TP_ALLGATHER] += (double)N * g->n * sizeof(float);
    classifier_vocab_exp(logits, sums, maxes, g->n, targets, N, Vl, Vpl, v0);
    timing_push(PH_COMM);
    comm_allreduce_sum(g->comm, sums, 2 * (size_t)N);
    timing_pop();
    g->bytes[TP_ALLREDUCE] += 2.0 * N * sizeof(float);
    classifier_vocab_finish(logits, losses, sums, maxes, g->n, targets, N, Vl, Vpl, v0, dloss);
}

// Unit u's gradient (its whole local unit at grad) completed across the TP group where this rank's is a part: the
// replicated tensors applied head by head (and, with --sp, every replicated tensor) summed over the group, the
// key/value heads that N / KV ranks hold summed over those ranks. Linear, so it may run before or after the
// data-parallel sums, on one micro-batch's gradient or on the step's.
static void tp_sum_grads(TpGroup *g, int u, float *grad) {
    if (!g) return;
    for (int i = 0; i < g->nsync; i++) {
        if (g->sync_unit[i] != u) continue;
        Comm *c = g->sync_kind[i] == TP_SYNC_KV ? g->kv : g->comm;
        timing_push(PH_COMM);
        comm_allreduce_sum(c, grad + g->sync_off[i], g->sync_len[i]);
        timing_pop();
        g->bytes[TP_ALLREDUCE] += (double)g->sync_len[i] * sizeof(float);
    }
}

// The pieces of [lo, lo + n) of unit u that this rank counts in the gradient norm (replicas counted once, by
// their first holder), as (offset, length) pairs into out; returns how many (at most nskip + 1).
static int tp_counted(const TpGroup *g, int u, size_t lo, size_t n, size_t *off, size_t *len) {
    int k = 0;
    size_t at = lo, end = lo + n;
    for (int i = 0; g && i < g->nskip && at < end; i++) {
        if (g->skip_unit[i] != u) continue;
        size_t a = g->skip_off[i], b = a + g->skip_len[i];
        if (b <= at || a >= end) continue;
        if (a > at) { off[k] = at; len[k++] = a - at; }
        at = b;
    }
    if (at < end) { off[k] = at; len[k++] = end - at; }
    return k;
}

// A row of the vocabulary-parallel head's logits for sampling: this rank's Vpl floats (host memory) gathered from
// every rank into all (N Vpl floats, the whole padded vocabulary in rank order).
static void tp_gather_logits(TpGroup *g, const float *mine, float *all, size_t Vpl) {
    comm_allgather_bytes(g->comm, mine, all, Vpl * sizeof(float));
    g->bytes[TP_ALLGATHER] += (double)Vpl * g->n * sizeof(float);
}

// What ZeRO and the optimizers ask of the group (g NULL: no --tp).
// The communicator a split matrix's slices are gathered over, or NULL (ZeRO switches its transport on the host tiers).
static Comm *tp_comm(const TpGroup *g) { return g ? g->comm : NULL; }
// An optimizer's whole-matrix collectives over the group (Muon's and Adafactor's units, float32 in the store's
// memory: N shards of `shard` floats), counted like the model's: the bytes of the whole buffer.
static void tp_optim_allgather(TpGroup *g, float *buf, size_t shard) {
    comm_allgather(g->comm, buf, shard);
    g->bytes[TP_ALLGATHER] += (double)shard * g->n * sizeof(float);
}
static void tp_optim_reduce_scatter(TpGroup *g, float *buf, size_t shard) {
    comm_reduce_scatter_sum(g->comm, buf, shard);
    g->bytes[TP_REDUCE_SCATTER] += (double)shard * g->n * sizeof(float);
}
// The most pieces tp_counted returns for one range (0 without --tp: no split).
static int tp_counted_max(const TpGroup *g) { return g ? g->nskip + 1 : 0; }
// The gradient norm's sum of squares: this rank's counted slices summed over the group (the slices are disjoint).
static double tp_norm_sum(TpGroup *g, double local) {
    if (!g) return local;
    double sum = comm_allreduce_sum_f64(g->comm, local);
    g->bytes[TP_ALLREDUCE] += sizeof(double);
    return sum;
}
// Whether the group's collectives are the device's (a CUDA graph may record them), or there is no group.
static int tp_on_device(const TpGroup *g) { return !g || g->comm->transport == COMM_DEVICE; }

// The traffic since the last call, by kind, and the counters cleared.
static void tp_bytes_take(TpGroup *g, double out[TP_NUM_KINDS]) {
    for (int k = 0; k < TP_NUM_KINDS; k++) { out[k] = g ? g->bytes[k] : 0.0; if (g) g->bytes[k] = 0.0; }
}

#endif
