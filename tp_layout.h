// tp_layout.h: how tensor parallelism (--tp N, Megatron's split) cuts the parameters, as pure functions of a
// family's table (arch.h) and the config's numbers; tensor_parallel.h runs the split, the communication and the
// gradient sums on top of it. Each tensor says which of its dimensions TP divides:
//   rows        column-parallel matmuls (q/k/v, the MLP's first matmul) and their biases: each rank its rows;
//   columns     row-parallel matmuls (attention's output, the MLP's second matmul): each rank its columns;
//   vocabulary  the embedding and the head: each rank Vp / N rows;
//   none        the rest (norm gains and biases, row-parallel biases, GPT-2's positions): replicated.
// A fused tensor splits piece by piece: q | k | v by heads (the key/value heads split when N divides KV; when N
// exceeds KV each key/value head is held whole by the N / KV ranks whose query heads use it), up | gate evenly, so
// SwiGLU stays local. A rank holds its slice as a smaller model of the same table (tp_local_shape: the same
// tensors, in the same order, with divided dimensions), so units, activations, the plan and the kernels' widths
// derive as they do for one process; the runs (ParamRun) of that smaller model map each contiguous piece of it to
// its place in the WHOLE model's file order, so loading slices, checkpoints write whole files, and the optimizer
// state moves between layouts through the same file order.
#ifndef TP_LAYOUT_H
#define TP_LAYOUT_H

#include "arch.h"

enum { TP_NONE, TP_ROWS, TP_COLS, TP_VOCAB };
// A piece's kind: the query heads, the key/value heads, or an even split of a DIM_ symbol's size.
enum { TP_PIECE_Q = NUM_DIMS, TP_PIECE_KV };
// How a replicated tensor's gradient is formed on a rank: whole (computed from the replicated stream, equal on
// every rank: nothing to sum), or a part (applied per head to the rank's own heads, so the ranks' parts add up).
enum { TP_GRAD_WHOLE, TP_GRAD_PARTIAL };

typedef struct {
    const char *name;  // the table's name (either family's)
    int split;         // TP_ROWS, TP_COLS, TP_VOCAB (TP_NONE: not listed)
    int npieces;
    int piece[3];      // along the split dimension, in order: TP_PIECE_Q, TP_PIECE_KV or a DIM_ symbol
} TpSplit;

// The split of every tensor that TP divides; a tensor not listed is replicated.
static const TpSplit TP_SPLITS[] = {
    {"wte", TP_VOCAB, 1, {DIM_VP}},
    {"lm_head", TP_VOCAB, 1, {DIM_VP}},
    {"qkvw", TP_ROWS, 3, {TP_PIECE_Q, TP_PIECE_KV, TP_PIECE_KV}},
    {"qkvb", TP_ROWS, 3, {TP_PIECE_Q, TP_PIECE_KV, TP_PIECE_KV}},
    {"wqkv", TP_ROWS, 3, {TP_PIECE_Q, TP_PIECE_KV, TP_PIECE_KV}},
    {"bqkv", TP_ROWS, 3, {TP_PIECE_Q, TP_PIECE_KV, TP_PIECE_KV}},
    {"attprojw", TP_COLS, 1, {TP_PIECE_Q}},
    {"wo", TP_COLS, 1, {TP_PIECE_Q}},
    {"fcw", TP_ROWS, 1, {DIM_FC}},
    {"fcb", TP_ROWS, 1, {DIM_FC}},
    {"wfc", TP_ROWS, 2, {DIM_HID, DIM_HID}},  // up | gate, each split alike
    {"fcprojw", TP_COLS, 1, {DIM_HID}},
    {"wproj", TP_COLS, 1, {DIM_HID}},
};
// Replicated tensors whose gradient is a part on each rank (applied head by head: QK-norm's gains).
static const char *const TP_PARTIAL_GRADS[] = {"q_norm", "k_norm"};

static const TpSplit *tp_split_of(const char *name) {
    for (size_t i = 0; i < sizeof(TP_SPLITS) / sizeof(TP_SPLITS[0]); i++)
        if (strcmp(TP_SPLITS[i].name, name) == 0) return &TP_SPLITS[i];
    return NULL;
}
static int tp_grad_kind(const char *name) {
    for (size_t i = 0; i < sizeof(TP_PARTIAL_GRADS) / sizeof(TP_PARTIAL_GRADS[0]); i++)
        if (strcmp(TP_PARTIAL_GRADS[i], name) == 0) return TP_GRAD_PARTIAL;
    return TP_GRAD_WHOLE;
}

// The degree and this rank's place, with the heads: what every split is computed from.
typedef struct {
    int n, r;      // degree, rank in the TP group
    int NH, KV;    // whole query and key/value heads (KV = NH for multi-head attention)
} TpDims;

static int tp_local_heads(const TpDims *t) { return t->NH / t->n; }
static int tp_local_kv_heads(const TpDims *t) { return t->n <= t->KV ? t->KV / t->n : 1; }
// Ranks holding each key/value head (1 when the heads split; N / KV when N exceeds KV).
static int tp_kv_replicas(const TpDims *t) { return t->n <= t->KV ? 1 : t->n / t->KV; }

// The first thing that makes N unable to split this model, in words naming --tp and the numbers; NULL if none.
static const char *tp_shape_error(const ArchShape *s, const TpDims *t, char *msg, size_t len) {
    int n = t->n;
    if (n == 1) return NULL;
    if (t->NH % n != 0) { snprintf(msg, len, "--tp %d does not divide the model's %d query heads", n, t->NH); return msg; }
    if (n <= t->KV ? t->KV % n != 0 : n % t->KV != 0) {
        snprintf(msg, len, "--tp %d and the model's %d key/value heads: N must divide them, or be a multiple of them (each "
                 "key/value head then held by N / KV ranks)", n, t->KV);
        return msg;
    }
    if (s->dim[DIM_HID] % n != 0) {
        snprintf(msg, len, "--tp %d does not divide the MLP's hidden size %zu", n, s->dim[DIM_HID]);
        return msg;
    }
    if (s->dim[DIM_FC] % n != 0) { snprintf(msg, len, "--tp %d does not divide the MLP's %zu rows", n, s->dim[DIM_FC]); return msg; }
    if (s->dim[DIM_VP] % n != 0) {
        snprintf(msg, len, "--tp %d does not divide the padded vocabulary's %zu rows", n, s->dim[DIM_VP]);
        return msg;
    }
    return NULL;
}

// The rank's slice as a model of the same table: the split dimensions divided (the vocabulary's valid rows those of
// this rank's range), channels, head size and positions whole.
static void tp_local_shape(ArchShape *s, const TpDims *t) {
    if (t->n <= 1) return;
    size_t n = (size_t)t->n, hd = s->dim[DIM_HD], NHl = (size_t)tp_local_heads(t), KVl = (size_t)tp_local_kv_heads(t);
    size_t Vpl = s->dim[DIM_VP] / n, v0 = (size_t)t->r * Vpl, V = s->dim[DIM_V];
    s->dim[DIM_V] = V <= v0 ? 0 : V - v0 < Vpl ? V - v0 : Vpl;
    s->dim[DIM_VP] = Vpl;
    s->dim[DIM_QKV] = (NHl + 2 * KVl) * hd;
    s->dim[DIM_ATT] = NHl * hd;
    s->dim[DIM_FC] /= n;
    s->dim[DIM_HID] /= n;
    if (s->dim[DIM_QKHEADS]) s->dim[DIM_QKHEADS] = NHl + KVl;
    s->attn_flop_width /= n;
}

// Piece p of a split (in the whole tensor's split dimension): where it starts in the whole, and the rank's part
// of it (start inside the piece, length); *replicas: ranks that hold the same part (key/value heads when N > KV).
static void tp_piece(const ArchShape *whole, const TpDims *t, int kind, size_t *size, size_t *at, size_t *len, int *replicas) {
    size_t hd = whole->dim[DIM_HD];
    *replicas = 1;
    if (kind == TP_PIECE_Q) {
        *size = (size_t)t->NH * hd;
        *len = (size_t)tp_local_heads(t) * hd;
        *at = (size_t)t->r * *len;
    } else if (kind == TP_PIECE_KV) {
        *size = (size_t)t->KV * hd;
        *len = (size_t)tp_local_kv_heads(t) * hd;
        *replicas = tp_kv_replicas(t);
        *at = (size_t)(t->r / *replicas) * *len;  // the key/value head(s) of this rank's query heads
    } else {
        *size = whole->dim[kind];
        *len = *size / (size_t)t->n;
        *at = (size_t)t->r * *len;
    }
}

// What a run of the local model is, besides where it goes: how its gradient is completed across the TP group
// and whether this rank counts it (the gradient norm, the checkpoint) or a replica elsewhere does.
enum { TP_SYNC_NONE, TP_SYNC_ALL, TP_SYNC_KV };
typedef struct {
    unsigned char sync;     // TP_SYNC_NONE: complete as computed; _ALL: summed over the TP group; _KV: over the
                            // ranks holding the same key/value head
    unsigned char counted;  // this rank's copy is the one counted (replicated tensors: TP rank 0; key/value heads:
                            // the first of their ranks)
} TpRunInfo;

// The local model's runs in unit order (as arch_param_runs), each contiguous both in the local unit and in the
// whole model's file order (flat); a column split makes one run per row. seq_parallel: replicated tensors'
// gradients are parts (sequence shards) and are summed over the group. Returns the count; runs and info may be
// NULL (to count).
static int tp_param_runs(const Arch *a, const ArchShape *whole, const TpDims *t, int seq_parallel, ParamRun *runs,
                         TpRunInfo *info) {
    size_t toff[ARCH_MAX_PARAMS], off = 0;
    for (int k = 0; k < a->num_params; k++) { toff[k] = off; off += arch_tensor_size(&a->params[k], whole); }
    int n = 0, L = whole->num_layers;
    for (int u = 0; u <= L; u++) {
        size_t uoff = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            if (p->per_layer != (u > 0) || arch_tensor_size(p, whole) == 0) continue;
            size_t per = arch_tensor_size(p, whole) / (p->per_layer ? L : 1);
            size_t base = toff[k] + (p->per_layer ? (size_t)(u - 1) * per : 0);
            size_t rows = whole->dim[p->rows], cols = whole->dim[p->cols];
            const TpSplit *sp = t->n > 1 ? tp_split_of(p->name) : NULL;
            // each piece of the split dimension; a column split repeats them for every row
            int reps = sp && sp->split == TP_COLS ? (int)rows : 1, np = sp ? sp->npieces : 1;
            for (int i = 0; i < reps; i++) {
                size_t start = 0;  // where the piece starts in the whole split dimension
                for (int q = 0; q < np; q++) {
                    size_t size, at, len, flat, cnt;
                    int replicas = 1;
                    if (!sp) { size = len = per; at = 0; }
                    else if (sp->split == TP_VOCAB) { size = rows; len = rows / t->n; at = (size_t)t->r * len; }
                    else tp_piece(whole, t, sp->piece[q], &size, &at, &len, &replicas);
                    if (!sp) { flat = base; cnt = per; }
                    else if (sp->split == TP_COLS) { flat = base + (size_t)i * cols + start + at; cnt = len; }
                    else { flat = base + (start + at) * cols; cnt = len * cols; }
                    start += size;
                    if (runs) runs[n] = (ParamRun){flat, cnt, u, uoff, p->decayed};
                    if (info) {
                        int partial = !sp && t->n > 1 && (seq_parallel || tp_grad_kind(p->name) == TP_GRAD_PARTIAL);
                        info[n].sync = replicas > 1 ? TP_SYNC_KV : partial ? TP_SYNC_ALL : TP_SYNC_NONE;
                        info[n].counted = sp ? t->r % replicas == 0 : t->r == 0;
                    }
                    uoff += cnt;
                    n++;
                }
            }
        }
    }
    return n;
}

#endif
