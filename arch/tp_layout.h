// tp_layout.h: how tensor parallelism (--tp N, Megatron's split) cuts the parameters, as pure functions of a
// family's table (arch.h) and the config's numbers; tensor_parallel.h runs the split, the communication and the
// gradient sums on top of it. Each tensor's row of the table says, in its tp column (arch.h's TP_ values; with the
// pack column's pieces, arch_param_pieces), which of its dimensions TP divides:
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

#include "model_config.h"  // the table's roles and pieces (arch.h), ModelConfig

// Which dimension TP divides of each tensor, and how its gradient completes, are the table's columns (ArchParam's
// tp and tp_grad, arch.h): everything below, the model's collectives (tensor_parallel.h) and Muon's matrices read
// them there, so changing one tensor's split is one cell of its family's table.
static int tp_split_of(const ArchParam *p) { return p->tp; }

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

// The rank's slice as a model of the same table: every dimension a present row's tp column divides (its rows for
// TP_ROWS and TP_VOCAB, its columns for TP_COLS) cut by that dimension's rule: the vocabulary evenly (the valid rows
// those of this rank's range), q/k/v by heads (attention then runs the rank's own heads), attention's output by query
// heads, any other evenly; the rest (channels, head size, positions) whole.
static void tp_local_shape(const Arch *a, ArchShape *s, const TpDims *t) {
    if (t->n <= 1) return;
    int cut[NUM_DIMS] = {0};
    for (int k = 0; k < a->num_params; k++) {
        const ArchParam *p = &a->params[k];
        if (!arch_present(p, s) || tp_split_of(p) == TP_NONE) continue;
        cut[tp_split_of(p) == TP_COLS ? p->cols : p->rows] = 1;
    }
    size_t n = (size_t)t->n, hd = s->dim[DIM_HD], NHl = (size_t)tp_local_heads(t), KVl = (size_t)tp_local_kv_heads(t);
    s->sliced = 1;  // a replicated tensor keeps the whole dims, whichever a split one shares with it (arch_tensor_size)
    memcpy(s->whole, s->dim, sizeof(s->whole));
    for (int d = 0; d < NUM_DIMS; d++) {
        if (!cut[d]) continue;
        if (d == DIM_VP || d == DIM_V) {
            size_t Vpl = s->dim[DIM_VP] / n, v0 = (size_t)t->r * Vpl, V = s->dim[DIM_V];
            s->dim[DIM_V] = V <= v0 ? 0 : V - v0 < Vpl ? V - v0 : Vpl;
            s->dim[DIM_VP] = Vpl;
        } else if (d == DIM_QKV) {
            s->dim[DIM_QKV] = (NHl + 2 * KVl) * hd;
            if (s->dim[DIM_QKHEADS]) s->dim[DIM_QKHEADS] = NHl + KVl;
            s->num_heads = (int)NHl;
            s->num_kv_heads = (int)KVl;
            s->attn_flop_width /= n;
        } else if (d == DIM_ATT) {
            s->dim[DIM_ATT] = NHl * hd;
        } else {
            s->dim[d] /= n;
        }
    }
}

// The kinds of piece a split dimension is cut into: query heads, key/value heads, or an even split.
enum { TP_PIECE_Q, TP_PIECE_KV, TP_PIECE_EVEN };

// A piece of `size` (in the whole tensor's split dimension): the rank's part of it (where it starts inside the piece,
// its length); *replicas: ranks that hold the same part (key/value heads when N > KV).
static void tp_piece(const TpDims *t, int kind, size_t size, size_t hd, size_t *at, size_t *len, int *replicas) {
    *replicas = 1;
    if (kind == TP_PIECE_Q) {
        *len = (size_t)tp_local_heads(t) * hd;
        *at = (size_t)t->r * *len;
    } else if (kind == TP_PIECE_KV) {
        *len = (size_t)tp_local_kv_heads(t) * hd;
        *replicas = tp_kv_replicas(t);
        *at = (size_t)(t->r / *replicas) * *len;  // the key/value head(s) of this rank's query heads
    } else {
        *len = size / (size_t)t->n;
        *at = (size_t)t->r * *len;
    }
}

// Tensor k's split dimension as pieces (sizes and kinds, in order), from the table's tp and pack columns: a row split
// takes the fused tensor's pieces (arch_param_pieces: q | k | v by heads, up | gate), a column split attention's
// output width by query heads or any other width evenly, the vocabulary one even piece. Returns the count (0: not split).
static int tp_split_pieces(const Arch *a, const ArchShape *whole, int k, size_t *size, int *kind) {
    const ArchParam *p = &a->params[k];
    int split = tp_split_of(p);
    if (split == TP_NONE) return 0;
    if (split == TP_COLS) {
        size[0] = whole->dim[p->cols];
        kind[0] = p->cols == DIM_ATT ? TP_PIECE_Q : TP_PIECE_EVEN;
        return 1;
    }
    ArchPiece pc[ARCH_MAX_PIECES];
    int np = arch_param_pieces(a, whole, k, pc);
    for (int q = 0; q < np; q++) {
        size[q] = pc[q].rows;
        kind[q] = p->pack == PACK_QKV ? (q == 0 ? TP_PIECE_Q : TP_PIECE_KV) : TP_PIECE_EVEN;
    }
    return np;
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
// whole model's file order (flat); a column split makes one run per row; an end stage's outer unit (whole->ends)
// only the tensors it holds, each with its offset where all are held (full_off). seq_parallel: replicated tensors'
// gradients are parts (sequence shards) and are summed over the group. Returns the count; runs and info may be
// NULL (to count).
static int tp_param_runs(const Arch *a, const ArchShape *whole, const TpDims *t, int seq_parallel, ParamRun *runs,
                         TpRunInfo *info) {
    size_t toff[ARCH_MAX_PARAMS], off = 0;
    for (int k = 0; k < a->num_params; k++) { toff[k] = off; off += arch_tensor_size(&a->params[k], whole); }
    int n = 0, L = whole->num_layers;
    for (int u = 0; u <= L; u++) {
        size_t uoff = 0, full = 0;  // full: the offset where every outer tensor is held (ParamRun's full_off)
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            if (p->per_layer != (u > 0) || arch_tensor_size(p, whole) == 0) continue;
            int held = arch_param_held(p, whole);  // an end stage's outer unit: the tensors its end uses
            size_t per = arch_tensor_size(p, whole) / (p->per_layer ? L : 1);
            size_t base = toff[k] + (p->per_layer ? (size_t)(u - 1) * per : 0);
            size_t rows = whole->dim[p->rows], cols = whole->dim[p->cols];
            size_t psize[ARCH_MAX_PIECES];
            int pkind[ARCH_MAX_PIECES], split = t->n > 1 ? tp_split_of(p) : TP_NONE;
            int np = split == TP_NONE ? 1 : tp_split_pieces(a, whole, k, psize, pkind);
            if (split == TP_NONE) { psize[0] = per; pkind[0] = TP_PIECE_EVEN; }
            // each piece of the split dimension; a column split repeats them for every row
            int reps = split == TP_COLS ? (int)rows : 1;
            for (int i = 0; i < reps; i++) {
                size_t start = 0;  // where the piece starts in the whole split dimension
                for (int q = 0; q < np; q++) {
                    size_t at = 0, len = psize[q], flat, cnt;
                    int replicas = 1;
                    if (split != TP_NONE) tp_piece(t, pkind[q], psize[q], whole->dim[DIM_HD], &at, &len, &replicas);
                    if (split == TP_NONE) { flat = base; cnt = per; }
                    else if (split == TP_COLS) { flat = base + (size_t)i * cols + start + at; cnt = len; }
                    else { flat = base + (start + at) * cols; cnt = len * cols; }
                    start += psize[q];
                    if (!held) { full += cnt; continue; }
                    if (runs) runs[n] = (ParamRun){flat, cnt, u, uoff, p->decayed, arch_param_ends(p, whole), full};
                    if (info) {
                        int partial = split == TP_NONE && t->n > 1 && (seq_parallel || p->tp_grad == TP_GRAD_PART);
                        int shared = replicas > 1 && p->tp_grad == TP_GRAD_REPLICAS;
                        info[n].sync = shared ? TP_SYNC_KV : partial ? TP_SYNC_ALL : TP_SYNC_NONE;
                        info[n].counted = split != TP_NONE ? t->r % replicas == 0 : t->r == 0;
                    }
                    uoff += cnt;
                    full += cnt;
                    n++;
                }
            }
        }
    }
    return n;
}

// A config's TP degree and rank with its heads, and its shape: the whole model's, or with tp_size > 1 its TP
// rank's slice (every size, unit and run derived from a config comes through here).
static TpDims model_tp_dims(const ModelConfig *c) {
    TpDims t = {c->tp_size > 1 ? c->tp_size : 1, c->tp_rank, c->num_heads, c->num_kv_heads};
    return t;
}
static ArchShape model_shape(const ModelConfig *c) {
    ArchShape s = model_whole_shape(c);
    TpDims t = model_tp_dims(c);
    if (t.n > 1 && !c->family) internal_fault("a TP config without a family (not filled by a family's descriptor or file)");
    if (t.n > 1) tp_local_shape(c->family->arch, &s, &t);
    return s;
}
// Query and key/value heads this config's attention runs (a TP rank's own).
static int model_heads(const ModelConfig *c) { return model_shape(c).num_heads; }
static int model_kv_heads(const ModelConfig *c) { return model_shape(c).num_kv_heads; }

#endif
