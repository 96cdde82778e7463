// muon.h: the Muon optimizer (--optimizer muon) as torch.optim.Muon defines it, on each matrix inside the blocks
// (q, k and v apart from the fused q/k/v tensor, attention's output, the MLP's matrices: GPT-2's fc and proj, the
// Llama family's up, gate and down apart: the pieces arch.h's table says each tensor packs); AdamW keeps the rest (zero.h skips the runs Muon owns). Per matrix:
//   B = mu B + (1 - mu) g                     (g already scaled by the clipping factor)
//   U = (1 - mu) g + mu B  (Nesterov), else B
//   O = Newton-Schulz(U): transpose when rows > cols, X = U / max(|U|_F, 1e-7), steps x { A = X X^T;
//       X = a X + (b A + c A A) X } with (a, b, c) = (3.4445, -4.7750, 2.0315), transposed back
//   p = p (1 - lr wd); p = p - lr' O, lr' = lr 0.2 sqrt(max(rows, cols)) (match_rms_adamw) or lr sqrt(max(1, rows/cols))
// Its state, two arrays (optimizer.h): array 0 a float per parameter, B at Muon's matrices and its AdamW's first moment
// elsewhere; array 1 its AdamW's second moment, compact in memory (no place at Muon's matrices: muon_index), slice-
// shaped in the swap file's records. The element-wise parts run
// on this rank's slice, the orthogonalisation needs a whole matrix: each unit's U is gathered whole, every rank
// orthogonalises the matrices it is assigned (balanced by Newton-Schulz FLOPs over the ranks), the others' places are
// zeroed, and one reduce-scatter (all-reduce at ZeRO-0) of that sum hands every rank exactly the owners' O for its
// slice. With --tp a rank's unit holds a slice of each matrix (rows or columns, tp_layout.h): the owners are spread
// over TP x data-parallel ranks, and each owner assembles its matrices whole from the TP group's gathered units
// (muon_orthogonalize_tp). The arithmetic is the backend's (backend_muon_*): the CPU build's in fp32 through its gemm.
#ifndef MUON_H
#define MUON_H

#include "adamw.h"  // the AdamW that steps every tensor Muon does not take, and optimizer.h's boundary
#include "optim_args.h"  // MuonOpts: its args (its learning rate is the step's group 1, --muon-lr's schedule)

typedef struct {
    int unit;        // 1 + layer
    size_t off;      // offset inside the unit (rows x cols floats from here, row-major)
    int rows, cols;
    int tensor;      // the table's row (arch.h) it is a piece of
    char name[16];   // its piece's name: "q", "fc", ...
    int owner;       // who orthogonalises it: data-parallel rank x TP degree + TP rank (--tp 1: the data-parallel rank)
    double flops;    // one Newton-Schulz run's (of the whole matrix)
    int wrows, wcols;  // the whole matrix's shape; with --tp this rank's rows x cols are a slice of it
    int split, kind;   // which dimension TP cuts (the table's tp column: TP_NONE, TP_ROWS, TP_COLS) and into what (TP_PIECE_*)
} MuonMatrix;

typedef struct {
    float momentum, lr;        // lr: this step's (muon_set_lr), before the adjustment
    int nesterov, ns_steps;
    MuonLrAdjust lr_adjust;
    MuonMatrix *mats;
    int nmats;
    unsigned char *run_is_muon;  // per ParamRun of zero.h: a whole run Muon owns (AdamW skips it)
    float *ubuf;               // one unit whole: U gathered, then the owners' O
    float *work;               // Newton-Schulz's workspace for the largest matrix
    size_t ubuf_floats, work_floats;
    int host;                  // the buffers are the host tier's (--offload: the host runs Newton-Schulz)
    // --tp: every TP rank's unit (tbuf, N x ubuf_floats, ubuf the rank's own place in it) and one whole matrix (whole)
    TpGroup *tp;
    TpDims td;
    size_t hd;
    float *tbuf, *whole;
    size_t whole_floats;
} Muon;

// Newton-Schulz's FLOPs and workspace for a rows x cols matrix: m = min, n = max; per step X X^T (2 m m n),
// A A (2 m^3), (..) X (2 m m n); X and its next value (m n each), A and b A + c A A (m m each).
static double muon_ns_flops(int rows, int cols, int steps) {
    double m = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
    return steps * (4.0 * m * m * n + 2.0 * m * m * m);
}
static size_t muon_ns_workspace(int rows, int cols) {
    size_t m = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
    return 2 * m * n + 2 * m * m;
}

// Every Muon matrix of the model in unit order (a layer's tensors in file order, a fused tensor's pieces as its table
// row packs them: arch_param_pieces); mats NULL: only the count.
// With --tp (c a TP rank's slice) each is this rank's slice of a whole matrix, whose shape and cut it records.
static int muon_matrices(const ModelConfig *c, int steps, MuonMatrix *mats) {
    const Arch *a = model_arch(c);
    ArchShape s = model_shape(c), ws = model_whole_shape(c);
    TpDims t = model_tp_dims(c);
    int n = 0;
    for (int l = 0; l < c->num_layers; l++) {
        size_t uoff = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            size_t per = arch_tensor_size(p, &s) / s.num_layers;
            if (!p->per_layer || per == 0) continue;
            if (p->matmul != ARCH_NEVER && p->cols != DIM_ONE) {  // a matrix inside the block: each piece its own
                ArchPiece pieces[ARCH_MAX_PIECES], wp[ARCH_MAX_PIECES];
                int cols = (int)s.dim[p->cols], split = t.n > 1 ? tp_split_of(p) : TP_NONE, kinds[ARCH_MAX_PIECES];
                size_t sizes[ARCH_MAX_PIECES];
                arch_param_pieces(a, &ws, k, wp);
                if (split != TP_NONE) tp_split_pieces(a, &ws, k, sizes, kinds);
                for (int j = 0, np = arch_param_pieces(a, &s, k, pieces); j < np; j++, n++) {
                    if (!mats) continue;
                    MuonMatrix *m = &mats[n];
                    memset(m, 0, sizeof(*m));
                    m->unit = 1 + l, m->off = uoff + pieces[j].row * cols, m->rows = (int)pieces[j].rows, m->cols = cols;
                    m->tensor = k;
                    snprintf(m->name, sizeof(m->name), "%s", pieces[j].name);
                    m->wrows = (int)wp[j].rows, m->wcols = (int)ws.dim[p->cols];
                    m->split = split, m->kind = split == TP_ROWS ? kinds[j] : split == TP_COLS ? kinds[0] : TP_PIECE_EVEN;
                    m->flops = muon_ns_flops(m->wrows, m->wcols, steps);
                }
            }
            uoff += per;
        }
    }
    return n;
}

// Owners balanced by FLOPs: largest first (ties in unit order), each to the least loaded rank (ties: the lowest).
static void muon_assign(MuonMatrix *mats, int n, int world) {
    double *load = (double *)callocCheck(world, sizeof(double));
    unsigned char *done = (unsigned char *)callocCheck(n > 0 ? n : 1, 1);
    for (int it = 0; it < n; it++) {
        int best = -1;
        for (int i = 0; i < n; i++) if (!done[i] && (best < 0 || mats[i].flops > mats[best].flops)) best = i;
        int r = 0;
        for (int q = 1; q < world; q++) if (load[q] < load[r]) r = q;
        mats[best].owner = r;
        load[r] += mats[best].flops;
        done[best] = 1;
    }
    free(load); free(done);
}

// Where matrix m overlaps floats [lo, lo + cnt) of its unit: [a, b); 0 where it does not.
static int muon_overlap(const MuonMatrix *m, size_t lo, size_t cnt, size_t *a, size_t *b) {
    size_t end = m->off + (size_t)m->rows * m->cols;
    *a = m->off > lo ? m->off : lo;
    *b = end < lo + cnt ? end : lo + cnt;
    return *a < *b;
}

// The lr adjustment of a rows x cols matrix (the whole matrix's shape, with --tp too).
static double muon_lr_ratio(MuonLrAdjust adj, int rows, int cols) {
    if (adj == MUON_ADJUST_ORIGINAL) return sqrt(rows > cols ? (double)rows / cols : 1.0);
    return 0.2 * sqrt((double)(rows > cols ? rows : cols));
}

// With --tp, Muon's workspace besides one unit: every TP rank's unit (N - 1 more) and one whole matrix, the largest
// held (held: per unit, whether this rank holds it; NULL: all); 0 without --tp.
static size_t muon_tp_floats(const MuonMatrix *m, int n, const ModelConfig *c, const size_t *usize, size_t unit_floats) {
    if (c->tp_size <= 1) return 0;
    size_t w = 0;
    for (int j = 0; j < n; j++)
        if ((!usize || usize[m[j].unit] > 0) && (size_t)m[j].wrows * m[j].wcols > w) w = (size_t)m[j].wrows * m[j].wcols;
    return (size_t)(c->tp_size - 1) * unit_floats + w;
}

// The optimizer for a data-parallel group of `world` ranks holding the units where usize[u] > 0 (a pipeline stage's);
// runs: zero.h's. host: the buffers in the host tier (--offload). unit_floats: the widest held unit, padded. tp: with
// --tp (c a TP rank's slice), the TP group whose ranks hold the other slices of each matrix; NULL without.
static void muon_init(Muon *mu, const MuonOpts *args, const ModelConfig *c, const size_t *usize, const ParamRun *runs,
                      int nruns, int world, size_t unit_floats, int host, TpGroup *tp) {
    memset(mu, 0, sizeof(*mu));
    mu->momentum = args->momentum;
    mu->nesterov = args->nesterov;
    mu->ns_steps = args->ns_steps;
    mu->lr_adjust = args->lr_adjust;
    mu->host = host;
    int all = muon_matrices(c, mu->ns_steps, NULL);
    MuonMatrix *every = (MuonMatrix *)callocCheck(all > 0 ? all : 1, sizeof(MuonMatrix));
    muon_matrices(c, mu->ns_steps, every);
    mu->mats = (MuonMatrix *)callocCheck(all > 0 ? all : 1, sizeof(MuonMatrix));
    for (int i = 0; i < all; i++) if (usize[every[i].unit] > 0) mu->mats[mu->nmats++] = every[i];
    free(every);
    mu->tp = tp && c->tp_size > 1 ? tp : NULL;
    mu->td = model_tp_dims(c);
    mu->hd = model_whole_shape(c).dim[DIM_HD];
    muon_assign(mu->mats, mu->nmats, world * mu->td.n);  // over every rank of the data-parallel x TP group
    mu->run_is_muon = (unsigned char *)callocCheck(nruns > 0 ? nruns : 1, 1);
    for (int i = 0; i < nruns; i++)  // (--tp: a row-parallel slice is a run per row)
        for (int j = 0; j < mu->nmats; j++) {
            size_t a, b;
            if (mu->mats[j].unit == runs[i].unit && muon_overlap(&mu->mats[j], runs[i].unit_off, runs[i].len, &a, &b))
                mu->run_is_muon[i] = 1;
        }
    for (int j = 0; j < mu->nmats; j++) {
        size_t w = muon_ns_workspace(mu->mats[j].wrows, mu->mats[j].wcols);
        if (w > mu->work_floats) mu->work_floats = w;
    }
    if (mu->nmats == 0) return;
    mu->ubuf_floats = unit_floats;
    size_t tpf = muon_tp_floats(mu->mats, mu->nmats, c, usize, unit_floats), n = unit_floats + tpf;
    mu->tbuf = host ? backend_alloc_host_state(n) : backend_alloc_state(n);
    mu->ubuf = mu->tbuf + (mu->tp ? (size_t)mu->td.r * unit_floats : 0);
    if (mu->tp) mu->whole = mu->tbuf + (size_t)mu->td.n * unit_floats, mu->whole_floats = n - (size_t)mu->td.n * unit_floats;
    mu->work = host ? backend_alloc_host_state(mu->work_floats) : backend_alloc_state(mu->work_floats);
}

static void muon_free(Muon *mu) {
    if (mu->tbuf) { if (mu->host) { backend_free_host_state(mu->tbuf); backend_free_host_state(mu->work); }
                    else { backend_free(mu->tbuf); backend_free(mu->work); } }
    free(mu->mats); free(mu->run_is_muon);
    memset(mu, 0, sizeof(*mu));
}

// Bytes of Muon's workspace per rank (the memory plan's): one unit whole and the largest matrix's Newton-Schulz.
static size_t muon_workspace_bytes(const ModelConfig *c, int steps, size_t unit_floats) {
    int n = muon_matrices(c, steps, NULL);
    if (n == 0) return 0;
    MuonMatrix *m = (MuonMatrix *)callocCheck(n, sizeof(MuonMatrix));
    muon_matrices(c, steps, m);
    size_t w = 0;
    for (int i = 0; i < n; i++) if (muon_ns_workspace(m[i].wrows, m[i].wcols) > w) w = muon_ns_workspace(m[i].wrows, m[i].wcols);
    w += muon_tp_floats(m, n, c, NULL, unit_floats);
    free(m);
    return (unit_floats + w) * sizeof(float);
}

// Newton-Schulz FLOPs of one step, all matrices of the model.
static double muon_step_flops(const ModelConfig *c, int steps) {
    int n = muon_matrices(c, steps, NULL);
    if (n == 0) return 0.0;
    MuonMatrix *m = (MuonMatrix *)callocCheck(n, sizeof(MuonMatrix));
    muon_matrices(c, steps, m);
    double f = 0.0;
    for (int i = 0; i < n; i++) f += m[i].flops;
    free(m);
    return f;
}

static void muon_set_lr(Muon *mu, float lr) { mu->lr = lr; }

// Floats of Muon's matrices (of n) that fall in [lo, lo + cnt) of unit u.
static size_t muon_floats_in(const MuonMatrix *mats, int n, int u, size_t lo, size_t cnt) {
    size_t sum = 0;
    for (int j = 0; j < n; j++) {
        if (mats[j].unit != u) continue;
        size_t a = mats[j].off > lo ? mats[j].off : lo, end = mats[j].off + (size_t)mats[j].rows * mats[j].cols;
        size_t b = end < lo + cnt ? end : lo + cnt;
        if (a < b) sum += b - a;
    }
    return sum;
}

// Unit u's Muon matrices [*first, *last] of mu->mats; 0 where it has none.
static int muon_unit_mats(const Muon *mu, int u, int *first, int *last) {
    *first = *last = -1;
    for (int j = 0; j < mu->nmats; j++) if (mu->mats[j].unit == u) { if (*first < 0) *first = j; *last = j; }
    return *first >= 0;
}

// The momentum of floats [lo, lo + n) of unit u (g and mom at lo; g not yet scaled), and U at its place in the
// unit's buffer. The update of a slice is muon_momentum, muon_orthogonalize, muon_apply; the swap file's store
// streams its pieces through the first and the last (zero_store.h).
static void muon_momentum(Muon *mu, int u, size_t lo, size_t n, const float *g, float *mom, float grad_scale) {
    size_t a, b;
    for (int j = 0; j < mu->nmats; j++)
        if (mu->mats[j].unit == u && muon_overlap(&mu->mats[j], lo, n, &a, &b))
            backend_muon_momentum(mom + (a - lo), mu->ubuf + a, g + (a - lo), b - a, mu->momentum, grad_scale, mu->nesterov, mu->host);
}

static void muon_copy(const Muon *mu, float *dst, const float *src, size_t n) {
    if (mu->host) memcpy(dst, src, n * sizeof(float)); else backend_copy(dst, src, n);
}

// --tp: matrix m's slice on TP rank q, at its place in that rank's unit (tbuf), to (to_whole) or from its place in the
// whole matrix: the rows of its heads (column-parallel; a key/value head the N / KV ranks that use it hold alike) or
// the columns (row-parallel).
static void muon_tp_slice(Muon *mu, const MuonMatrix *m, int q, int to_whole) {
    TpDims t = mu->td;
    t.r = q;
    size_t at, len;
    int replicas;
    tp_piece(&t, m->kind, m->split == TP_ROWS ? (size_t)m->wrows : (size_t)m->wcols, mu->hd, &at, &len, &replicas);
    float *slice = mu->tbuf + (size_t)q * mu->ubuf_floats + m->off;
    if (m->split == TP_ROWS) {
        float *w = mu->whole + at * m->wcols;
        muon_copy(mu, to_whole ? w : slice, to_whole ? slice : w, len * m->wcols);
    } else if (m->split == TP_COLS) {  // columns [at, at + len) of each row: a strided block, one copy
        float *w = mu->whole + at;
        const size_t rows = (size_t)m->rows, ws = (size_t)m->wcols;
        if (mu->host) {
            for (size_t i = 0; i < rows; i++)
                memcpy(to_whole ? w + i * ws : slice + i * len, to_whole ? slice + i * len : w + i * ws, len * sizeof(float));
        } else if (to_whole) {
            backend_copy_rows(w, ws, slice, len, rows, len);
        } else {
            backend_copy_rows(slice, len, w, ws, rows, len);
        }
    } else {
        internal_fault("Muon: matrix %s is not cut by --tp", m->name);
    }
}

// --tp: unit u's matrices whole. Every TP rank's unit is gathered (tbuf); each owner assembles its matrices whole,
// orthogonalises them and puts every TP rank's slice of the result in that rank's place; the places of matrices this
// rank does not own are zeroed, so the reduce-scatter hands every TP rank its slices of the owners' O.
static void muon_orthogonalize_tp(Muon *mu, int me, int first, int last) {
    size_t uf = mu->ubuf_floats;
    tp_optim_allgather(mu->tp, mu->tbuf, uf);  // counted with the model's TP traffic
    for (int j = first; j <= last; j++) {
        MuonMatrix *m = &mu->mats[j];
        if (m->owner == me) {
            for (int q = 0; q < mu->td.n; q++) muon_tp_slice(mu, m, q, 1);
            backend_muon_orthogonalize(mu->whole, m->wrows, m->wcols, mu->ns_steps, mu->work, mu->host);
        }
        for (int q = 0; q < mu->td.n; q++) {
            if (m->owner == me) { muon_tp_slice(mu, m, q, 0); continue; }
            float *at = mu->tbuf + (size_t)q * uf + m->off;
            if (mu->host) memset(at, 0, (size_t)m->rows * m->cols * sizeof(float));
            else backend_zero_state(at, (size_t)m->rows * m->cols);
        }
    }
    tp_optim_reduce_scatter(mu->tp, mu->tbuf, uf);
}

// Unit u's U (every rank's slice of it in place: muon_momentum) into the owners' O: gathered whole over the
// data-parallel group (shards of `shard` floats; ZeRO-0: every rank has it whole already), each matrix orthogonalised
// by its owner (with --tp over the TP group too: muon_orthogonalize_tp), the others' places zeroed, and one
// reduce-scatter (all-reduce at ZeRO-0) of that sum hands every rank exactly the owners' O for its slice.
static void muon_orthogonalize(Muon *mu, Comm *comm, int stage, int u, size_t shard) {
    int first, last, W = comm->world, me = comm->rank * mu->td.n + (mu->tp ? mu->td.r : 0);
    if (!muon_unit_mats(mu, u, &first, &last)) return;
    float *U = mu->ubuf;
    if (W > 1 && stage >= 1) comm_allgather(comm, U, shard);  // every matrix of the unit whole on every rank
    if (mu->tp) muon_orthogonalize_tp(mu, me, first, last);
    else
        for (int j = first; j <= last; j++) {
            MuonMatrix *m = &mu->mats[j];
            if (m->owner == me) backend_muon_orthogonalize(U + m->off, m->rows, m->cols, mu->ns_steps, mu->work, mu->host);
            else if (mu->host) memset(U + m->off, 0, (size_t)m->rows * m->cols * sizeof(float));
            else backend_zero_state(U + m->off, (size_t)m->rows * m->cols);
        }
    if (W > 1) {  // x + 0 + ... + 0 is x exactly: every rank gets the owners' O
        if (stage >= 1) comm_reduce_scatter_sum(comm, U, shard);
        else comm_allreduce_sum(comm, U, shard * W);
    }
}

// The step on floats [lo, lo + n) of unit u (p at lo): decay with the unadjusted lr, then the adjusted step along O.
static void muon_apply(Muon *mu, int u, size_t lo, size_t n, float *p, float weight_decay) {
    float decay = (float)(1.0 - (double)mu->lr * weight_decay);
    size_t a, b;
    for (int j = 0; j < mu->nmats; j++) {
        MuonMatrix *m = &mu->mats[j];
        float step = (float)((double)mu->lr * muon_lr_ratio(mu->lr_adjust, m->wrows, m->wcols));
        if (m->unit == u && muon_overlap(m, lo, n, &a, &b)) backend_muon_apply(p + (a - lo), mu->ubuf + a, b - a, decay, step, mu->host);
    }
}

// Unit u's Muon matrices on this rank: its slice is floats [slo, slo + slen) of the unit (the whole unit at ZeRO-0),
// shards of `shard` floats; p, g and mom point at the slice's first float (in the buffers' memory: the host tier's
// where mu->host). stage: ZeRO's (0: every rank holds the whole unit, and the owners' results are all-reduced).
static void muon_update_unit(Muon *mu, Comm *comm, int stage, int u, size_t slo, size_t slen, size_t shard, float *p,
                             const float *g, float *mom, float grad_scale, float weight_decay) {
    int first, last;
    if (!muon_unit_mats(mu, u, &first, &last) || slen == 0) return;
    muon_momentum(mu, u, slo, slen, g, mom, grad_scale);
    muon_orthogonalize(mu, comm, stage, u, shard);
    muon_apply(mu, u, slo, slen, p, weight_decay);
}

// The banner's and the log's words for which tensors each optimizer owns: Muon's matrices of a layer ("q of qkvw,
// k of qkvw, ..., fcprojw") and AdamW's tensors.
static void muon_owner_text(const ModelConfig *c, char *muon, char *adamw, size_t n) {
    const Arch *a = model_arch(c);
    ArchShape s = model_shape(c);
    int count = muon_matrices(c, 1, NULL), per_layer = count / c->num_layers;
    MuonMatrix *m = (MuonMatrix *)callocCheck(count > 0 ? count : 1, sizeof(MuonMatrix));
    muon_matrices(c, 1, m);
    size_t used = 0;
    muon[0] = adamw[0] = '\0';
    for (int j = 0; j < per_layer && used < n; j++) {
        const char *t = a->params[m[j].tensor].name;
        int piece = strcmp(m[j].name, t) != 0;
        used += snprintf(muon + used, n - used, "%s%s%s%s", j ? ", " : "", m[j].name, piece ? " of " : "", piece ? t : "");
    }
    free(m);
    used = 0;
    for (int k = 0, shown = 0; k < a->num_params && used < n; k++) {
        const ArchParam *p = &a->params[k];
        if (!arch_present(p, &s) || (p->per_layer && p->matmul != ARCH_NEVER && p->cols != DIM_ONE)) continue;
        used += snprintf(adamw + used, n - used, "%s%s", shown++ ? ", " : "", p->name);
    }
}

// ---- Muon behind optimizer.h: its matrices, and an AdamW (group 0) for every other tensor
typedef struct {
    Muon mu;
    AdamW adamw;                 // skip: the runs Muon owns
    MuonOpts args;
    size_t *vroom;               // per unit: array 1's room
} MuonOpt;

// The room of unit u's second moments: its slice less Muon's matrices in it, the most over the ranks (so that every
// rank's array, and the plan, have one size). mats: every Muon matrix of the model (muon_matrices).
static size_t muon_v_span(const MuonMatrix *mats, int n, int u, int stage, size_t shard, int world) {
    size_t span = stage == 0 ? shard * world : shard, most = 0;
    for (int r = 0; r < (stage == 0 ? 1 : world); r++) {
        size_t adamw = span - muon_floats_in(mats, n, u, (size_t)r * shard, span);
        if (adamw > most) most = adamw;
    }
    return most;
}

static void muon_open(Optimizer *o) {
    MuonOpt *m = (MuonOpt *)o->self;
    const OptLayout *l = &o->lay;
    muon_init(&m->mu, &m->args, l->config, l->usize, l->runs, l->nruns, l->comm->world, opt_widest_unit(l), l->host, l->tp);
    m->adamw.skip = m->mu.run_is_muon;
    m->vroom = (size_t *)callocCheck(l->nu, sizeof(size_t));
    int n = muon_matrices(l->config, 1, NULL);
    MuonMatrix *mats = (MuonMatrix *)callocCheck(n > 0 ? n : 1, sizeof(MuonMatrix));
    muon_matrices(l->config, 1, mats);
    for (int u = 0; u < l->nu; u++)
        m->vroom[u] = l->streamed ? l->sspan[u] : muon_v_span(mats, n, u, l->stage, l->ushard[u], l->comm->world);
    free(mats);
}
static size_t muon_room(const Optimizer *o, int a, int u) { return a == 0 ? o->lay.sspan[u] : ((const MuonOpt *)o->self)->vroom[u]; }
static size_t muon_index(const Optimizer *o, int a, int u, size_t pos) {
    const Muon *mu = &((const MuonOpt *)o->self)->mu;
    if (a == 0 || o->lay.streamed) return pos;
    return pos - muon_floats_in(mu->mats, mu->nmats, u, o->lay.slo[u], pos);
}
// Array 1 has no place at Muon's matrices (in memory); `until`: where the answer changes, in slice positions.
static int muon_kept(const Optimizer *o, int a, int u, size_t pos, size_t *until) {
    const Muon *mu = &((const MuonOpt *)o->self)->mu;
    size_t slo = o->lay.slo[u], at = slo + pos, next = (size_t)-1;
    *until = o->lay.sspan[u];
    if (a == 0 || o->lay.streamed) return 1;
    for (int j = 0; j < mu->nmats; j++) {
        const MuonMatrix *m = &mu->mats[j];
        size_t end = m->off + (size_t)m->rows * m->cols;
        if (m->unit != u || end <= at) continue;
        if (m->off <= at) { *until = end - slo; return 0; }
        if (m->off < next) next = m->off;
    }
    if (next != (size_t)-1 && next - slo < *until) *until = next - slo;
    return 1;
}
// A unit with Muon's matrices in this rank's slice takes two passes: the momentum of every piece, the matrices made
// whole and orthogonalised (between), then each piece's step, Muon's and AdamW's.
static int muon_passes(const Optimizer *o, int u) {
    int first, last;
    return muon_unit_mats(&((const MuonOpt *)o->self)->mu, u, &first, &last) && o->lay.slen[u] > 0 ? 2 : 1;
}
static void muon_piece(Optimizer *o, int pass, const OptPiece *pc, const OptStep *s) {
    MuonOpt *m = (MuonOpt *)o->self;
    int passes = muon_passes(o, pc->u);
    muon_set_lr(&m->mu, s->lr[1]);
    if (passes == 2 && pass == 0) {
        muon_momentum(&m->mu, pc->u, pc->lo, pc->n, pc->g, opt_state_at(o, pc, 0, pc->lo), s->grad_scale);
        return;
    }
    if (passes == 2) muon_apply(&m->mu, pc->u, pc->lo, pc->n, pc->p, m->adamw.args.weight_decay);
    adamw_piece_runs(&m->adamw, o, pc, s);
}
static void muon_between(Optimizer *o, int pass, int u, const OptStep *s) {
    (void)pass, (void)s;
    muon_orthogonalize(&((MuonOpt *)o->self)->mu, o->lay.comm, o->lay.stage, u, o->lay.ushard[u]);
}
// Muon updates its matrices after AdamW's table, so model.h converts the working copies: none made in the pass.
static void muon_device_plan(Optimizer *o, const OptPiece *units) {
    o->fused = adamw_make_plan(&((MuonOpt *)o->self)->adamw, o, units, 0);
}
static void muon_device_begin(Optimizer *o, const OptStep *s, int verdict) {
    MuonOpt *m = (MuonOpt *)o->self;
    AdamWArgs args = adamw_kernel_args(&m->adamw, s);
    backend_adamw_run(m->adamw.plan, &args, verdict);
}
static void muon_device_unit(Optimizer *o, const OptPiece *pc, const OptStep *s) {
    MuonOpt *m = (MuonOpt *)o->self;
    const OptLayout *l = &o->lay;
    muon_set_lr(&m->mu, s->lr[1]);
    muon_update_unit(&m->mu, l->comm, l->stage, pc->u, pc->lo, pc->n, l->ushard[pc->u], pc->p, pc->g, pc->state[0],
                     s->grad_scale, m->adamw.args.weight_decay);
}
// The plan: array 0 slice-shaped, array 1 without Muon's matrices (in memory), and the workspace: one layer unit
// whole and the largest matrix's Newton-Schulz (with --tp the other TP ranks' units and one whole matrix too).
static size_t muon_plan(const ModelConfig *c, int stage, int world, const size_t *usize, int streamed) {
    int n = muon_matrices(c, 1, NULL), nu = model_num_units(c);
    MuonMatrix *mats = (MuonMatrix *)callocCheck(n > 0 ? n : 1, sizeof(MuonMatrix));
    muon_matrices(c, 1, mats);
    size_t work = 0, widest = 0, v = 0;
    for (int u = 0; u < nu; u++) {
        size_t sh = comm_shard_size(usize[u], world);
        v += muon_v_span(mats, n, u, stage, sh, world);
        if (u > 0 && sh * world > widest) widest = sh * world;
    }
    for (int j = 0; j < n; j++)
        if (usize[mats[j].unit] > 0 && muon_ns_workspace(mats[j].wrows, mats[j].wcols) > work)
            work = muon_ns_workspace(mats[j].wrows, mats[j].wcols);
    size_t tp = muon_tp_floats(mats, n, c, usize, widest);
    free(mats);
    size_t state = streamed ? 0 : opt_plan_slices(stage, world, usize, nu) + v;
    return state + (work > 0 ? widest + tp + work : 0);
}
static void muon_close(Optimizer *o) {
    MuonOpt *m = (MuonOpt *)o->self;
    muon_free(&m->mu);
    backend_adamw_plan_free(m->adamw.plan);
    free(m->vroom);
    free(m);
    o->self = NULL;
}

static const OptimizerOps MUON_OPS = {"muon", muon_open, muon_room, muon_index, muon_kept, muon_passes, muon_piece,
                                      muon_between, muon_device_plan, muon_device_begin, muon_device_unit, muon_plan,
                                      muon_close, 0};

// Muon on the matrices inside the blocks (peak lr muon_lr), AdamW (adamw, peak lr) on the rest.
static void muon_create(Optimizer *o, MuonOpts args, float muon_lr, AdamWOpts adamw, float lr) {
    memset(o, 0, sizeof(*o));
    MuonOpt *m = (MuonOpt *)callocCheck(1, sizeof(MuonOpt));
    m->args = args;
    m->adamw.args = adamw;
    m->adamw.group = 0;
    o->ops = &MUON_OPS;
    o->self = m;
    o->groups = 2;
    o->peak[0] = lr;
    o->peak[1] = muon_lr;
}

#endif
