// checkpoint.h: a checkpoint written by every ZeRO rank at once (checkpoint_format.h has the files' format):
// ckpt_write_shards puts this rank's shards of the parameters and of AdamW's moments into the model file and
// the state file that rank 0 created, each at its place in llm.c's flat order.
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include "checkpoint_format.h"
#include "../zero.h"

// Writes this rank's share of a checkpoint straight into the two files every rank has open (on a
// shared filesystem): its shard of each unit it holds, of the parameters into the model file and of
// AdamW's moments into the state file, each at its place in llm.c's flat order. Together the ranks
// write every parameter once (at ZeRO-0, where every rank owns everything, they still split the
// writing by shard), and no rank ever holds the whole model. An outer tensor is written by the pipeline
// end that uses it (zero_counts_run), the first where both do.
static void ckpt_write_shards(Zero *z, int fd_model, int fd_state, const char *model_path, const char *state_path,
                              size_t num_params) {
    int r = z->comm->rank;
    size_t maxs = 1;
    for (int u = 0; u < z->nu; u++) if (z->ushard[u] > maxs) maxs = z->ushard[u];
    float *host = (float *)mallocCheck(maxs * sizeof(float));
    for (int u = 0; u < z->nu; u++) {
        if (z->usize[u] == 0) continue;
        size_t lo = (size_t)r * z->ushard[u], cnt = zero_owned(z, u, r);
        if (cnt == 0) continue;
        for (int k = 0; k < 3; k++) {  // ZS_MASTER into the model file; ZS_M, ZS_V into the state file
            zero_read_owned(z, k == 0 ? ZS_MASTER : k == 1 ? ZS_M : ZS_V, u, lo, cnt, host);
            int fd = k == 0 ? fd_model : fd_state;
            const char *path = k == 0 ? model_path : state_path;
            size_t base = 1024 + (k == 2 ? num_params * sizeof(float) : 0);
            for (int i = 0; i < z->nruns; i++) {
                const ParamRun *run = &z->runs[i];
                size_t a, b;
                if (!zero_counts_run(z, run) || !run_overlap(run, u, lo, cnt, &a, &b)) continue;
                size_t bytes = (b - a) * sizeof(float);
                off_t at = (off_t)(base + (run->flat + (a - run->unit_off)) * sizeof(float));
                if (pwrite(fd, host + (a - lo), bytes, at) != (ssize_t)bytes) fatal("%s: write failed: %s", path, strerror(errno));
            }
        }
    }
    free(host);
}

#endif
