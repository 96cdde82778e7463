// adafactor.h: the Adafactor optimizer (--optimizer adafactor) as torch.optim.Adafactor defines it, on every tensor,
// behind optimizer.h's boundary. Per tensor at step t (g already scaled by the clipping factor; -g with maximize):
//   rho = min(lr, 1 / sqrt(t)), alpha = max(eps2, RMS(p)) rho      (RMS of the parameters before this step)
//   p = p (1 - lr wd)                                                (the tensors AdamW would decay)
//   w = t^beta2_decay (1 - beta2_t)
//   a matrix (rows x cols): R = R + w (mean_j g^2 - R), C = C + w (mean_i g^2 - C), V = R C^T / max(mean(R), eps1)
//   a vector:               V = V + w (g^2 - V)
//   U = g / sqrt(max(V, eps1^2)), p = p - alpha / max(1, RMS(U) / d) U
// eps1 0 is torch's None: float32's machine epsilon. Its state is R and C (rows + cols floats) for a matrix, V (n)
// for a vector: packed at the start of each tensor's place in the whole model (R then C), which rows + cols <=
// rows cols leaves room for, so a slice keeps the packed floats that fall in it (state array 0, compact:
// adafactor_index) and a checkpoint's m holds them in the parameters' order (v is 0), whatever the layout.
// The sums (row and column means, the RMS of p and of U) need a whole tensor, and a rank holds a slice of each
// unit: each unit's gradient, parameters and state are gathered whole over the data-parallel group (ZeRO 1-3; at
// ZeRO-0 every rank has them already), every rank computes the whole unit in one order, the one process's, and keeps
// its slice. With --tp a rank's unit is itself a slice of the whole model's (its rows or columns of each matrix,
// whole copies of the replicated tensors): the TP group's units are gathered too, every rank assembles the whole
// model's unit from them (af_assemble: each position from the rank that counts it), steps it, and keeps its own
// runs (af_disperse). So every layout steps exactly as one process does on the same gradients.
// The arithmetic is plain C on host memory in fp32 with double sums; the device store copies a unit to the host and
// back, so the CUDA build needs nothing of its own.
#ifndef ADAFACTOR_H
#define ADAFACTOR_H

#include "optimizer.h"
#include "optim_args.h"  // AdafactorOpts

typedef struct { size_t off; int rows, cols; int decayed; } AfTensor;  // cols 1: a vector of rows floats

// Where the packed floats lie in this rank's units, and with --tp where every TP rank's runs lie in the whole model's
// units (af_geometry: the same for open and the plan).
typedef struct {
    int nt, nu;
    AfTensor *t;                 // the WHOLE model's tensors, unit by unit (with --tp a rank holds slices of them)
    int *first;                  // per unit (and one past the last): its first tensor
    int n, nr, me;               // the TP degree (1 without), each rank's runs, this rank's place
    int nk;                      // the packed floats' places in each TP rank's units: local unit coordinates
    size_t *klo, *klen;
    int *kfirst;                 // per TP rank and unit (and one past): its first place, at [q (nu + 1) + u]
    ParamRun *runs;              // n x nr: every TP rank's runs of its local units
    TpRunInfo *info;             //         which of them is the counted copy
    size_t *woff;                //         where each run starts in its whole unit
    size_t whole_wide;           // --tp: the widest whole unit
} AfGeom;

typedef struct {
    AdafactorOpts args;
    AfGeom g;
    size_t *room;                // per unit: array 0's room (the packed floats of the slice, the most over the ranks)
    size_t wide;                 // the widest local unit, padded: the whole-unit buffers' floats (each TP rank's)
    float *TG, *TP, *TS;         // one unit whole (N units with --tp: every TP rank's, in rank order): gradient,
                                 // parameters, packed state (the store's memory)
    float *hG, *hP, *hS;         // the device store's host copies (NULL on the host tiers)
    float *WG, *WP, *WS;         // --tp: one unit of the whole model (host memory)
    TpGroup *tp;
    int r;                       // this rank's place in the TP group (0 without)
} Adafactor;

// Floats a tensor's state packs at its start: R and C for a matrix, V for a vector.
static size_t af_packed(const AfTensor *t) { return t->cols > 1 ? (size_t)t->rows + t->cols : (size_t)t->rows; }

// Every tensor of shape s, unit by unit in the unit's order (the outer unit's tensors, an end stage's own only, then
// each layer's); t NULL: the count. A (1 x n) or (n x 1) tensor is a vector (none in the families' tables).
static int af_tensors(const Arch *a, const ArchShape *s, int nu, AfTensor *t, int *first) {
    int n = 0;
    for (int u = 0; u < nu; u++) {
        if (first) first[u] = n;
        size_t off = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            if (p->per_layer != (u > 0) || !arch_param_held(p, s)) continue;
            size_t sz = arch_tensor_size(p, s) / (p->per_layer ? (size_t)s->num_layers : 1);
            if (sz == 0) continue;
            size_t cols = p->cols == DIM_ONE ? 1 : s->dim[p->cols];
            if (cols < 2 || sz / cols < 2) cols = 1;
            if (t) t[n] = (AfTensor){off, (int)(sz / cols), (int)cols, p->decayed};
            n++;
            off += sz;
        }
    }
    if (first) first[nu] = n;
    return n;
}

// Whole-unit position of a run (flat file offset f in unit u), from the whole model's runs wr (one per tensor and unit).
static size_t af_whole_pos(const ParamRun *wr, int nw, int u, size_t f) {
    for (int i = 0; i < nw; i++)
        if (wr[i].unit == u && wr[i].flat <= f && f < wr[i].flat + wr[i].len) return wr[i].unit_off + (f - wr[i].flat);
    internal_fault("Adafactor: file offset %zu is in no tensor of unit %d", f, u);
    return 0;
}

// TP rank q's places: each of its runs' part of its tensor's packed floats, in unit order, adjacent ones merged.
static void af_places(AfGeom *g, int q) {
    const ParamRun *runs = g->runs + (size_t)q * g->nr;
    const size_t *woff = g->woff + (size_t)q * g->nr;
    int *kfirst = g->kfirst + (size_t)q * (g->nu + 1);
    for (int u = 0, i = 0; u < g->nu; u++) {
        kfirst[u] = g->nk;
        for (; i < g->nr && runs[i].unit == u; i++) {
            size_t w = woff[i], len = runs[i].len;
            for (int k = g->first[u]; k < g->first[u + 1]; k++) {
                const AfTensor *t = &g->t[k];
                size_t lo = t->off > w ? t->off : w, hi = t->off + af_packed(t) < w + len ? t->off + af_packed(t) : w + len;
                if (lo >= hi) continue;
                size_t at = runs[i].unit_off + (lo - w);
                if (g->nk > kfirst[u] && g->klo[g->nk - 1] + g->klen[g->nk - 1] == at) { g->klen[g->nk - 1] += hi - lo; continue; }
                g->klo[g->nk] = at, g->klen[g->nk] = hi - lo, g->nk++;
            }
        }
    }
    kfirst[g->nu] = g->nk;
}

// The geometry of config c (with --tp a TP rank's slice): the whole model's tensors, where their packed floats fall
// in this rank's units (a run of the local model is a piece of a whole tensor; its part of the tensor's first
// rows + cols floats, in the tensor's row-major order, is kept here: so the checkpoint's state is one process's),
// and with --tp every TP rank's runs.
static void af_geometry(const ModelConfig *c, AfGeom *g) {
    memset(g, 0, sizeof(*g));
    const Arch *a = model_arch(c);
    ArchShape ws = model_whole_shape(c);
    TpDims td = model_tp_dims(c), one = td;
    one.n = 1, one.r = 0;
    g->nu = model_num_units(c);
    g->nt = af_tensors(a, &ws, g->nu, NULL, NULL);
    g->t = (AfTensor *)callocCheck(g->nt > 0 ? g->nt : 1, sizeof(AfTensor));
    g->first = (int *)callocCheck(g->nu + 1, sizeof(int));
    af_tensors(a, &ws, g->nu, g->t, g->first);
    int nw = tp_param_runs(a, &ws, &one, 0, NULL, NULL);
    ParamRun *wr = (ParamRun *)callocCheck(nw > 0 ? nw : 1, sizeof(ParamRun));
    tp_param_runs(a, &ws, &one, 0, wr, NULL);
    g->n = td.n;
    g->nr = tp_param_runs(a, &ws, &td, c->seq_parallel, NULL, NULL);
    g->runs = (ParamRun *)callocCheck((size_t)g->n * g->nr, sizeof(ParamRun));
    g->info = (TpRunInfo *)callocCheck((size_t)g->n * g->nr, sizeof(TpRunInfo));
    g->woff = (size_t *)callocCheck((size_t)g->n * g->nr, sizeof(size_t));
    for (int q = 0; q < g->n; q++) {
        TpDims tq = td;
        tq.r = q;
        tp_param_runs(a, &ws, &tq, c->seq_parallel, g->runs + (size_t)q * g->nr, g->info + (size_t)q * g->nr);
    }
    for (size_t i = 0; i < (size_t)g->n * g->nr; i++) g->woff[i] = af_whole_pos(wr, nw, g->runs[i].unit, g->runs[i].flat);
    for (int u = 0; u < g->nu; u++) {
        size_t end = g->first[u + 1] > g->first[u] ? g->t[g->first[u + 1] - 1].off + (size_t)g->t[g->first[u + 1] - 1].rows * g->t[g->first[u + 1] - 1].cols : 0;
        if (end > g->whole_wide) g->whole_wide = end;
    }
    // each TP rank's runs, in unit order: each one's part of its tensor's packed floats (adjacent places merged)
    g->me = td.n > 1 ? td.r : 0;
    g->klo = (size_t *)callocCheck((size_t)g->n * g->nr + 1, sizeof(size_t));
    g->klen = (size_t *)callocCheck((size_t)g->n * g->nr + 1, sizeof(size_t));
    g->kfirst = (int *)callocCheck((size_t)g->n * (g->nu + 1), sizeof(int));
    for (int q = 0; q < g->n; q++) af_places(g, q);
    free(wr);
}

static void af_geometry_free(AfGeom *g) {
    free(g->t); free(g->first); free(g->runs); free(g->info); free(g->woff); free(g->klo); free(g->klen); free(g->kfirst);
    memset(g, 0, sizeof(*g));
}

// Packed floats of TP rank q's places in unit floats [lo, lo + cnt) of its unit u.
static size_t af_packed_in(const AfGeom *g, int q, int u, size_t lo, size_t cnt) {
    const int *kfirst = g->kfirst + (size_t)q * (g->nu + 1);
    size_t sum = 0;
    for (int i = kfirst[u]; i < kfirst[u + 1]; i++) {
        size_t a = g->klo[i] > lo ? g->klo[i] : lo, end = g->klo[i] + g->klen[i], b = end < lo + cnt ? end : lo + cnt;
        if (a < b) sum += b - a;
    }
    return sum;
}

// Array 0's room for unit u on one rank: the most packed floats any rank's slice holds (over the data-parallel
// ranks and the TP ranks, so that every rank's array, and the plan, have one size).
static size_t af_room(const AfGeom *g, int u, int stage, size_t shard, int world) {
    size_t span = stage == 0 ? shard * world : shard, most = 0;
    for (int q = 0; q < g->n; q++)
        for (int r = 0; r < (stage == 0 ? 1 : world); r++) {
            size_t k = af_packed_in(g, q, u, stage == 0 ? 0 : (size_t)r * shard, span);
            if (k > most) most = k;
        }
    return most;
}

static void adafactor_open(Optimizer *o) {
    Adafactor *f = (Adafactor *)o->self;
    const OptLayout *l = &o->lay;
    af_geometry(l->config, &f->g);
    f->tp = l->tp && f->g.n > 1 ? l->tp : NULL;
    f->r = f->tp ? l->config->tp_rank : 0;
    f->room = (size_t *)callocCheck(l->nu, sizeof(size_t));
    for (int u = 0; u < l->nu; u++) {
        if (l->usize[u] == 0) continue;
        f->room[u] = l->streamed ? l->sspan[u] : af_room(&f->g, u, l->stage, l->ushard[u], l->comm->world);
        if (l->ushard[u] * l->comm->world > f->wide) f->wide = l->ushard[u] * l->comm->world;
    }
    size_t n = f->wide * (f->tp ? (size_t)f->g.n : 1);
    float **bufs[] = {&f->TG, &f->TP, &f->TS}, **hbufs[] = {&f->hG, &f->hP, &f->hS}, **wbufs[] = {&f->WG, &f->WP, &f->WS};
    for (int i = 0; i < 3; i++) {
        *bufs[i] = l->host ? backend_alloc_host_state(n) : backend_alloc_state(n);
        if (!l->host) *hbufs[i] = (float *)callocCheck(n, sizeof(float));
        if (f->tp) *wbufs[i] = backend_alloc_host_state(f->g.whole_wide);
    }
}

// This rank's unit in the buffers: with --tp its place among the TP group's.
static float *af_mine(const Adafactor *f, float *buf) { return buf + (size_t)f->r * f->wide; }

static size_t adafactor_room(const Optimizer *o, int a, int u) {
    if (o->lay.streamed) return o->lay.sspan[u];  // the swap file's records: every array slice-shaped
    return a == 0 ? ((const Adafactor *)o->self)->room[u] : 0;
}
static size_t adafactor_index(const Optimizer *o, int a, int u, size_t pos) {
    const Adafactor *f = (const Adafactor *)o->self;
    if (a != 0 || o->lay.streamed) return pos;
    return af_packed_in(&f->g, f->g.me, u, o->lay.slo[u], pos);
}
// In memory array 0 keeps the packed floats and array 1 nothing; `until`: where the answer changes.
static int adafactor_kept(const Optimizer *o, int a, int u, size_t pos, size_t *until) {
    const AfGeom *g = &((const Adafactor *)o->self)->g;
    size_t slo = o->lay.slo[u], at = slo + pos;
    *until = o->lay.sspan[u];
    if (o->lay.streamed) return 1;
    if (a != 0) return 0;
    const int *kfirst = g->kfirst + (size_t)g->me * (g->nu + 1);
    for (int i = kfirst[u]; i < kfirst[u + 1]; i++) {
        if (at >= g->klo[i] + g->klen[i]) continue;
        if (at < g->klo[i]) { *until = g->klo[i] - slo; return 0; }
        *until = g->klo[i] + g->klen[i] - slo;
        return 1;
    }
    return 0;  // past the unit's last place
}
static int adafactor_passes(const Optimizer *o, int u) { (void)o, (void)u; return 2; }

// Piece pc into the whole-unit buffers (in) or its parameters and state back out of them; host: the buffers and
// pc's memory are host memory (else the device's).
static void af_move(Optimizer *o, const OptPiece *pc, int in, int host) {
    Adafactor *f = (Adafactor *)o->self;
    float *G = af_mine(f, f->TG), *S = af_mine(f, f->TS);
    size_t lo = pc->lo, n = pc->n;
    float *P = af_mine(f, f->TP) + lo;
#define AF_COPY(dst, src, k) (host ? (void)memcpy((dst), (src), (k) * sizeof(float)) : backend_copy((dst), (src), (k)))
    if (in) { AF_COPY(G + lo, pc->g, n); AF_COPY(P, pc->p, n); }
    else AF_COPY(pc->p, P, n);
    if (o->lay.streamed) {
        if (in) AF_COPY(S + lo, pc->state[0], n);
        else AF_COPY(pc->state[0], S + lo, n);
    } else {
        size_t slo = o->lay.slo[pc->u];
        for (size_t cur = lo - slo, end = lo - slo + n, until; cur < end; cur = until) {
            int kept = adafactor_kept(o, 0, pc->u, cur, &until);
            if (until > end) until = end;
            if (!kept) continue;
            float *s = pc->state[0] + adafactor_index(o, 0, pc->u, cur);
            if (in) AF_COPY(S + slo + cur, s, until - cur);
            else AF_COPY(s, S + slo + cur, until - cur);
        }
    }
#undef AF_COPY
}

// One tensor's step on host memory: p its parameters, g its gradient, st its packed state.
static void af_tensor_step(const AdafactorOpts *a, const AfTensor *t, float *p, const float *g, float *st, const OptStep *s) {
    size_t rows = (size_t)t->rows, cols = (size_t)t->cols, n = rows * cols;
    float lr = s->lr[0], eps1 = a->eps1 > 0 ? a->eps1 : 1.1920928955078125e-07f;  // torch.finfo(float32).eps
    float sign = a->maximize ? -s->grad_scale : s->grad_scale;
    float w = (float)pow((double)s->t, (double)a->beta2_decay);
    float rho = fminf(lr, (float)(1.0 / sqrt((double)s->t)));
    double pp = 0.0;
    for (size_t i = 0; i < n; i++) pp += (double)p[i] * p[i];
    float alpha = fmaxf(a->eps2, (float)sqrt(pp / n)) * rho;
    if (t->decayed && a->weight_decay != 0.0f) {
        float decay = 1.0f - lr * a->weight_decay;
        for (size_t i = 0; i < n; i++) p[i] *= decay;
    }
    float *R = st, *C = st + rows;
    double mean_r = 0.0;
    if (cols > 1) {
        for (size_t i = 0; i < rows; i++) {
            double sum = 0.0;
            for (size_t j = 0; j < cols; j++) { float x = g[i * cols + j] * sign; sum += (double)x * x; }
            R[i] += w * ((float)(sum / cols) - R[i]);
            mean_r += R[i];
        }
        for (size_t j = 0; j < cols; j++) {
            double sum = 0.0;
            for (size_t i = 0; i < rows; i++) { float x = g[i * cols + j] * sign; sum += (double)x * x; }
            C[j] += w * ((float)(sum / rows) - C[j]);
        }
        mean_r = fmax(mean_r / rows, eps1);
    } else {
        for (size_t i = 0; i < n; i++) { float x = g[i] * sign; R[i] += w * (x * x - R[i]); }
    }
    // U twice: its RMS first, then the step, so nothing of U's size is kept
    double uu = 0.0;
    for (size_t i = 0; i < n; i++) {
        float v = cols > 1 ? (float)((double)R[i / cols] * C[i % cols] / mean_r) : R[i];
        float x = g[i] * sign / sqrtf(fmaxf(v, eps1 * eps1));
        uu += (double)x * x;
    }
    float step = alpha / fmaxf(1.0f, (float)sqrt(uu / n) / a->d);
    for (size_t i = 0; i < n; i++) {
        float v = cols > 1 ? (float)((double)R[i / cols] * C[i % cols] / mean_r) : R[i];
        p[i] -= step * (g[i] * sign / sqrtf(fmaxf(v, eps1 * eps1)));
    }
}

// --tp: unit u of the whole model from every TP rank's unit (T: N units of f->wide floats, host memory): each
// whole position from the rank that counts it (a replica's copy is the same), into W.
static void af_assemble(const Adafactor *f, int u, const float *T, float *W) {
    const AfGeom *g = &f->g;
    for (int q = 0; q < g->n; q++)
        for (int i = 0; i < g->nr; i++) {
            size_t k = (size_t)q * g->nr + i;
            const ParamRun *r = &g->runs[k];
            if (r->unit == u && g->info[k].counted) memcpy(W + g->woff[k], T + (size_t)q * f->wide + r->unit_off, r->len * sizeof(float));
        }
}
// And back: this rank's runs of the whole unit W (its replicas too) into its unit (mine, host memory).
static void af_disperse(const Adafactor *f, int u, const float *W, float *mine) {
    const AfGeom *g = &f->g;
    for (int i = 0; i < g->nr; i++) {
        size_t k = (size_t)f->r * g->nr + i;
        const ParamRun *r = &g->runs[k];
        if (r->unit == u) memcpy(mine + r->unit_off, W + g->woff[k], r->len * sizeof(float));
    }
}

// Unit u whole (gathered over the group unless every rank has it), every tensor stepped in order, on the host. With
// --tp each rank's unit is gathered over the TP group too (counted in its traffic), every rank assembles the whole
// model's unit and steps it as one process does, and keeps its own runs of the result.
static void af_unit_step(Optimizer *o, int u, const OptStep *s, int host) {
    Adafactor *f = (Adafactor *)o->self;
    const OptLayout *l = &o->lay;
    float *mine[3] = {af_mine(f, f->TG), af_mine(f, f->TP), af_mine(f, f->TS)}, *all[3] = {f->TG, f->TP, f->TS};
    float *hall[3] = {f->hG, f->hP, f->hS}, *W[3] = {f->WG, f->WP, f->WS};
    if (l->stage >= 1 && l->comm->world > 1)
        for (int i = 0; i < 3; i++) comm_allgather(l->comm, mine[i], l->ushard[u]);
    size_t n = l->usize[u], N = f->tp ? (size_t)f->g.n : 1;
    if (f->tp) for (int i = 0; i < 3; i++) tp_optim_allgather(f->tp, all[i], f->wide);
    if (!host) for (int i = 0; i < 3; i++) backend_to_host(hall[i], all[i], f->tp ? N * f->wide : n), all[i] = hall[i];
    const AfGeom *g = &f->g;
    float *G = all[0], *P = all[1], *S = all[2];
    if (f->tp) {
        for (int i = 0; i < 3; i++) af_assemble(f, u, all[i], W[i]);
        G = W[0], P = W[1], S = W[2];
    }
    for (int i = g->first[u]; i < g->first[u + 1]; i++) {
        const AfTensor *t = &g->t[i];
        af_tensor_step(&f->args, t, P + t->off, G + t->off, S + t->off, s);
    }
    for (int i = 1; f->tp && i < 3; i++) af_disperse(f, u, W[i], all[i] + (size_t)f->r * f->wide);
    if (!host) for (int i = 1; i < 3; i++) backend_from_host(mine[i], all[i] + (f->tp ? (size_t)f->r * f->wide : 0), n);
}

static void adafactor_piece(Optimizer *o, int pass, const OptPiece *pc, const OptStep *s) {
    (void)s;
    af_move(o, pc, pass == 0, 1);
}
static void adafactor_between(Optimizer *o, int pass, int u, const OptStep *s) { (void)pass; af_unit_step(o, u, s, 1); }
static void adafactor_device_plan(Optimizer *o, const OptPiece *units) { (void)units; o->fused = 0; }
static void adafactor_device_begin(Optimizer *o, const OptStep *s, int verdict) { (void)o, (void)s, (void)verdict; }
// The device store: the slice into the whole-unit buffers (device memory, where the group's transport moves it),
// the unit stepped on the host, the slice back.
static void adafactor_device_unit(Optimizer *o, const OptPiece *pc, const OptStep *s) {
    if (o->lay.usize[pc->u] == 0) return;
    if (pc->n > 0) af_move(o, pc, 1, 0);
    af_unit_step(o, pc->u, s, 0);
    if (pc->n > 0) af_move(o, pc, 0, 0);
}
// The plan: array 0's rooms (rows + cols per matrix, n per vector, as the slices cut them; none streamed) and the
// three whole-unit buffers (with --tp: every TP rank's unit, and three units of the whole model).
static size_t adafactor_plan(const ModelConfig *c, int stage, int world, const size_t *usize, int streamed) {
    AfGeom g;
    af_geometry(c, &g);
    size_t state = 0, wide = 0;
    for (int u = 0; u < g.nu; u++) {
        if (usize[u] == 0) continue;
        size_t sh = comm_shard_size(usize[u], world);
        if (!streamed) state += af_room(&g, u, stage, sh, world);
        if (sh * world > wide) wide = sh * world;
    }
    size_t bufs = g.n > 1 ? 3 * (g.n * wide + g.whole_wide) : 3 * wide;
    af_geometry_free(&g);
    return state + bufs;
}
static void adafactor_close(Optimizer *o) {
    Adafactor *f = (Adafactor *)o->self;
    float *bufs[] = {f->TG, f->TP, f->TS}, *wbufs[] = {f->WG, f->WP, f->WS};
    for (int i = 0; i < 3; i++) {
        if (bufs[i]) { if (o->lay.host) backend_free_host_state(bufs[i]); else backend_free(bufs[i]); }
        if (wbufs[i]) backend_free_host_state(wbufs[i]);
    }
    free(f->hG); free(f->hP); free(f->hS);
    af_geometry_free(&f->g);
    free(f->room);
    free(f);
    o->self = NULL;
}

static const OptimizerOps ADAFACTOR_OPS = {"adafactor", adafactor_open, adafactor_room, adafactor_index, adafactor_kept,
                                           adafactor_passes, adafactor_piece, adafactor_between, adafactor_device_plan,
                                           adafactor_device_begin, adafactor_device_unit, adafactor_plan, adafactor_close, 0};

// Adafactor on every tensor, with these args (its lr the peak of group 0's schedule).
static void adafactor_create(Optimizer *o, AdafactorOpts args) {
    memset(o, 0, sizeof(*o));
    Adafactor *f = (Adafactor *)callocCheck(1, sizeof(Adafactor));
    f->args = args;
    o->ops = &ADAFACTOR_OPS;
    o->self = f;
    o->groups = 1;
    o->peak[0] = args.lr;
}

#endif // ADAFACTOR_H
