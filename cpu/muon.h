// cpu/muon.h: Muon's arithmetic for the CPU build (backend.h's backend_muon_*): cpu/muon_host.h's, in fp32 on the
// build's memory, which is host memory, so the host tier (--offload) runs the same code.
#ifndef CPU_MUON_H
#define CPU_MUON_H

#include "muon_host.h"
#include "../backend/backend.h"

static int backend_has_muon(void) { return 1; }

static void backend_muon_momentum(float *b, float *u, const float *g, size_t n, float mu, float scale, int nesterov, int host) {
    (void)host;
    muon_momentum_host(b, u, g, n, mu, scale, nesterov);
}

static void backend_muon_apply(float *p, const float *o, size_t n, float decay, float step, int host) {
    (void)host;
    muon_apply_host(p, o, n, decay, step);
}

static void backend_muon_orthogonalize(float *x, int rows, int cols, int steps, float *work, int host) {
    (void)host;
    muon_orthogonalize_host(x, rows, cols, steps, work);
}

#endif
