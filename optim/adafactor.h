// adafactor.h: the Adafactor optimizer (--optimizer adafactor) as torch.optim.Adafactor defines it, on every tensor,
// behind optimizer.h's boundary. Per tensor at step t (g already scaled by the clipping factor; -g with maximize):
//   rho = min(lr, 1 / sqrt(t)), alpha = max(eps2, RMS(p)) rho      (RMS of the parameters before this step)
//   p = p (1 - lr wd)                                                (the tensors AdamW would decay)
//   w = t^beta2_decay (1 - beta2_t)
//   a matrix (rows x cols): R = R + w (mean_j g^2 - R), C = C + w (mean_i g^2 - C), V = R C^T / max(mean(R), eps1)
//   a vector:               V = V + w (g^2 - V)
//   U = g / sqrt(max(V, eps1^2)), p = p - alpha / max(1, RMS(U) / d) U
// eps1 0 is torch's None: float32's machine epsilon. Its state is R and C (rows + cols floats) for a matrix, V (n)
// for a vector: packed at the start of each tensor's place in the unit (R then C), which rows + cols <= rows cols
// leaves room for, so a slice keeps the packed floats that fall in it (state array 0, compact: adafactor_index) and a
// checkpoint's m holds them in the parameters' order (v is 0).
// The sums (row and column means, the RMS of p and of U) need a whole tensor, and a rank holds a slice of each
// unit: each unit's gradient, parameters and state are gathered whole over the data-parallel group (ZeRO 1-3; at
// ZeRO-0 every rank has them already), every rank computes the whole unit in one order, the one process's, and keeps
// its slice. So every layout steps exactly as one process does on the same gradients. --tp is refused (config.h): a
// TP rank holds a slice of each matrix, which would need the TP group's slices assembled too.
// The arithmetic is plain C on host memory in fp32 with double sums; the device store copies a unit to the host and
// back, so the CUDA build needs nothing of its own.
#ifndef ADAFACTOR_H
#define ADAFACTOR_H

#include "optimizer.h"
#include "optim_args.h"  // AdafactorOpts

typedef struct { size_t off; int rows, cols; int decayed; } AfTensor;  // cols 1: a vector of rows floats

typedef struct {
    AdafactorOpts args;
    AfTensor *t;
    int *first;                  // per unit (and one past the last): its first tensor
    size_t *room;                // per unit: array 0's room (the packed floats of the slice, the most over the ranks)
    size_t wide;                 // the widest unit, padded: the whole-unit buffers' floats
    float *G, *P, *S;            // one unit whole: gradient, parameters, packed state (the store's memory)
    float *hG, *hP, *hS;         // the device store's host copies (NULL on the host tiers)
} Adafactor;

// Floats a tensor's state packs at its start: R and C for a matrix, V for a vector.
static size_t af_packed(const AfTensor *t) { return t->cols > 1 ? (size_t)t->rows + t->cols : (size_t)t->rows; }

// Every tensor of the model, unit by unit in the unit's order (the outer unit's tensors, an end stage's own only, then
// each layer's); t NULL: the count. A (1 x n) or (n x 1) tensor is a vector (none in the families' tables).
static int adafactor_tensors(const ModelConfig *c, AfTensor *t, int *first) {
    const Arch *a = model_arch(c);
    ArchShape s = model_shape(c);
    int n = 0, nu = model_num_units(c);
    for (int u = 0; u < nu; u++) {
        if (first) first[u] = n;
        size_t off = 0;
        for (int k = 0; k < a->num_params; k++) {
            const ArchParam *p = &a->params[k];
            if (p->per_layer != (u > 0) || !arch_param_held(p, &s)) continue;
            size_t sz = arch_tensor_size(p, &s) / (p->per_layer ? (size_t)s.num_layers : 1);
            if (sz == 0) continue;
            size_t cols = p->cols == DIM_ONE ? 1 : s.dim[p->cols];
            if (cols < 2 || sz / cols < 2) cols = 1;
            if (t) t[n] = (AfTensor){off, (int)(sz / cols), (int)cols, p->decayed};
            n++;
            off += sz;
        }
    }
    if (first) first[nu] = n;
    return n;
}

// Packed floats of unit u's tensors [t0, t1) in unit floats [lo, lo + cnt).
static size_t af_packed_in(const AfTensor *t, int t0, int t1, size_t lo, size_t cnt) {
    size_t sum = 0;
    for (int i = t0; i < t1; i++) {
        size_t a = t[i].off > lo ? t[i].off : lo, end = t[i].off + af_packed(&t[i]), b = end < lo + cnt ? end : lo + cnt;
        if (a < b) sum += b - a;
    }
    return sum;
}

// Array 0's room for a unit of `usize` floats on one rank: the most packed floats any rank's slice holds.
static size_t af_room(const AfTensor *t, int t0, int t1, int stage, size_t shard, int world) {
    size_t span = stage == 0 ? shard * world : shard, most = 0;
    for (int r = 0; r < (stage == 0 ? 1 : world); r++) {
        size_t k = af_packed_in(t, t0, t1, stage == 0 ? 0 : (size_t)r * shard, span);
        if (k > most) most = k;
    }
    return most;
}

static void adafactor_open(Optimizer *o) {
    Adafactor *f = (Adafactor *)o->self;
    const OptLayout *l = &o->lay;
    int n = adafactor_tensors(l->config, NULL, NULL);
    f->t = (AfTensor *)callocCheck(n > 0 ? n : 1, sizeof(AfTensor));
    f->first = (int *)callocCheck(l->nu + 1, sizeof(int));
    adafactor_tensors(l->config, f->t, f->first);
    f->room = (size_t *)callocCheck(l->nu, sizeof(size_t));
    for (int u = 0; u < l->nu; u++) {
        if (l->usize[u] == 0) continue;
        f->room[u] = l->streamed ? l->sspan[u] : af_room(f->t, f->first[u], f->first[u + 1], l->stage, l->ushard[u], l->comm->world);
        if (l->ushard[u] * l->comm->world > f->wide) f->wide = l->ushard[u] * l->comm->world;
    }
    float **bufs[] = {&f->G, &f->P, &f->S};
    for (int i = 0; i < 3; i++) *bufs[i] = l->host ? backend_alloc_host_state(f->wide) : backend_alloc_state(f->wide);
    if (!l->host) {
        f->hG = (float *)callocCheck(f->wide, sizeof(float));
        f->hP = (float *)callocCheck(f->wide, sizeof(float));
        f->hS = (float *)callocCheck(f->wide, sizeof(float));
    }
}

static size_t adafactor_room(const Optimizer *o, int a, int u) {
    if (o->lay.streamed) return o->lay.sspan[u];  // the swap file's records: every array slice-shaped
    return a == 0 ? ((const Adafactor *)o->self)->room[u] : 0;
}
static size_t adafactor_index(const Optimizer *o, int a, int u, size_t pos) {
    const Adafactor *f = (const Adafactor *)o->self;
    if (a != 0 || o->lay.streamed) return pos;
    return af_packed_in(f->t, f->first[u], f->first[u + 1], o->lay.slo[u], pos);
}
// In memory array 0 keeps the packed floats and array 1 nothing; `until`: where the answer changes.
static int adafactor_kept(const Optimizer *o, int a, int u, size_t pos, size_t *until) {
    const Adafactor *f = (const Adafactor *)o->self;
    size_t slo = o->lay.slo[u], at = slo + pos;
    *until = o->lay.sspan[u];
    if (o->lay.streamed) return 1;
    if (a != 0) return 0;
    for (int i = f->first[u]; i < f->first[u + 1]; i++) {
        size_t end = f->t[i].off + f->t[i].rows * (size_t)f->t[i].cols, packed = f->t[i].off + af_packed(&f->t[i]);
        if (at >= end) continue;
        if (at < f->t[i].off) { *until = f->t[i].off - slo; return 0; }  // (tensors are adjacent: not reached)
        if (at < packed) { *until = packed - slo; return 1; }
        *until = end - slo;
        return 0;
    }
    return 0;  // the padding past the unit's last tensor
}
static int adafactor_passes(const Optimizer *o, int u) { (void)o, (void)u; return 2; }

// Piece pc into the whole-unit buffers (in) or its parameters and state back out of them; host: the buffers and
// pc's memory are host memory (else the device's).
static void af_move(Optimizer *o, const OptPiece *pc, int in, int host) {
    Adafactor *f = (Adafactor *)o->self;
    size_t lo = pc->lo, n = pc->n;
    float *P = f->P + lo;
#define AF_COPY(dst, src, k) (host ? (void)memcpy((dst), (src), (k) * sizeof(float)) : backend_copy((dst), (src), (k)))
    if (in) { AF_COPY(f->G + lo, pc->g, n); AF_COPY(P, pc->p, n); }
    else AF_COPY(pc->p, P, n);
    if (o->lay.streamed) {
        if (in) AF_COPY(f->S + lo, pc->state[0], n);
        else AF_COPY(pc->state[0], f->S + lo, n);
    } else {
        size_t slo = o->lay.slo[pc->u];
        for (size_t cur = lo - slo, end = lo - slo + n, until; cur < end; cur = until) {
            int kept = adafactor_kept(o, 0, pc->u, cur, &until);
            if (until > end) until = end;
            if (!kept) continue;
            float *s = pc->state[0] + adafactor_index(o, 0, pc->u, cur);
            if (in) AF_COPY(f->S + slo + cur, s, until - cur);
            else AF_COPY(s, f->S + slo + cur, until - cur);
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

// Unit u whole (gathered over the group unless every rank has it), every tensor stepped in order, on the host.
static void af_unit_step(Optimizer *o, int u, const OptStep *s, int host) {
    Adafactor *f = (Adafactor *)o->self;
    const OptLayout *l = &o->lay;
    if (l->stage >= 1 && l->comm->world > 1) {
        comm_allgather(l->comm, f->G, l->ushard[u]);
        comm_allgather(l->comm, f->P, l->ushard[u]);
        comm_allgather(l->comm, f->S, l->ushard[u]);
    }
    float *G = f->G, *P = f->P, *S = f->S;
    size_t n = l->usize[u];
    if (!host) {
        backend_to_host(f->hG, f->G, n); backend_to_host(f->hP, f->P, n); backend_to_host(f->hS, f->S, n);
        G = f->hG, P = f->hP, S = f->hS;
    }
    for (int i = f->first[u]; i < f->first[u + 1]; i++) {
        const AfTensor *t = &f->t[i];
        af_tensor_step(&f->args, t, P + t->off, G + t->off, S + t->off, s);
    }
    if (!host) { backend_from_host(f->P, P, n); backend_from_host(f->S, S, n); }
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
// three whole-unit buffers.
static size_t adafactor_plan(const ModelConfig *c, int stage, int world, const size_t *usize, int streamed) {
    int nu = model_num_units(c), n = adafactor_tensors(c, NULL, NULL);
    AfTensor *t = (AfTensor *)callocCheck(n > 0 ? n : 1, sizeof(AfTensor));
    int *first = (int *)callocCheck(nu + 1, sizeof(int));
    adafactor_tensors(c, t, first);
    size_t state = 0, wide = 0;
    for (int u = 0; u < nu; u++) {
        if (usize[u] == 0) continue;
        size_t sh = comm_shard_size(usize[u], world);
        if (!streamed) state += af_room(t, first[u], first[u + 1], stage, sh, world);
        if (sh * world > wide) wide = sh * world;
    }
    free(t); free(first);
    return state + 3 * wide;
}
static void adafactor_close(Optimizer *o) {
    Adafactor *f = (Adafactor *)o->self;
    float *bufs[] = {f->G, f->P, f->S};
    for (int i = 0; i < 3; i++)
        if (bufs[i]) { if (o->lay.host) backend_free_host_state(bufs[i]); else backend_free(bufs[i]); }
    free(f->hG); free(f->hP); free(f->hS);
    free(f->t); free(f->first); free(f->room);
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
