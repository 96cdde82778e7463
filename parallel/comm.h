// comm.h: the communication layer, the only one: collectives (all-reduce, reduce-scatter, all-gather,
// broadcast, barrier) and point-to-point messages (a buffered non-blocking send, a receive) that
// zero.h, pipeline.h and the training loop call without knowing how ranks talk or where the buffers
// live. Each communicator fixes its transport when it is made (CommTransport): host memory (the CPU
// build's) goes straight through MPI; device memory (the CUDA build's) goes through the build's device
// transport (collectives, once comm_enable_device raises the group to it: NCCL, backend.h) or through
// MPI staged in host buffers that the communicator allocates on first use and keeps. A build without
// MPI is a world of one, where every collective is the identity. Everything comm.h asks of the build
// (copies, the device transport) goes through backend.h.
//
// Shards are equal: a buffer of n floats is cut into `world` shards of comm_shard_size(n, world),
// the last one padded, so every collective moves equal counts (as NCCL requires). Every collective
// is marked for the hang watchdog (watchdog.h).
#ifndef COMM_H
#define COMM_H

#include <limits.h>
#include "../base/utils.h"
#include "../backend/backend.h"  // the device transport (backend_comm_*) and the copies
#include "../backend/timing.h"
#include "watchdog.h"
#ifdef USE_MPI
#include <mpi.h>
#endif

// How a communicator moves the build's buffers, fixed when it is made (comm_init, comm_split) or
// raised to the device transport once (comm_enable_device). Point-to-point messages always go
// through MPI, staged for device memory.
typedef enum { COMM_MPI_HOST, COMM_MPI_STAGED, COMM_DEVICE } CommTransport;

// What a point-to-point message holds: 4-byte floats, or 16-bit floats (bf16 or fp16 activations)
// moved bit for bit.
typedef enum { COMM_FLOAT32, COMM_FLOAT16 } CommType;
static size_t comm_type_bytes(CommType t) { return t == COMM_FLOAT32 ? 4 : 2; }

// A send begun and not yet waited for, with its host copy of the payload (kept for the next send).
typedef struct {
    void *buf;
    size_t bytes;
#ifdef USE_MPI
    MPI_Request req;
#endif
} CommSend;

// What a communicator's ranks are to each other (trainer.h sets it after comm_split; a split inherits it): --timing
// charges its calls to an axis by it (timing.h's CommAxis, comm_axis below).
typedef enum { COMM_ROLE_WORLD, COMM_ROLE_TP, COMM_ROLE_PIPE, COMM_ROLE_DP, COMM_ROLE_TIED } CommRole;
// What a call does, for its axis: a reduction (all-reduce, reduce-scatter), a gather, a send, a receive, or neither.
typedef enum { COMM_CALL_REDUCE, COMM_CALL_GATHER, COMM_CALL_SEND, COMM_CALL_RECV, COMM_CALL_OTHER } CommCall;

typedef struct {
    int rank, world;
    int role;          // CommRole
    int local_rank;    // rank within the node (picks the GPU in the CUDA build)
    int initialized;   // MPI_Init was called by us
    int split;         // a group comm_split made: its MPI (and device) communicator is its own, freed by comm_free_group
    CommTransport transport;
    // host buffers, each grown to its largest use and kept: staging for device memory under MPI
    // (blocking collectives and receives; the one non-blocking collective in flight), and the
    // reduce-scatter's regrouping of one chunk
    void *staging, *async_staging, *regroup;
    size_t staging_bytes, async_staging_bytes, regroup_bytes;
    int async_busy;
    CommSend *sends;   // buffered sends begun since the last comm_wait_sends
    int nsends, sends_cap;
#ifdef USE_MPI
    MPI_Comm mpi;      // the group this Comm talks in (the world, or a split of it)
#endif
    BackendComm *device;  // this rank's end of the device transport (COMM_DEVICE)
} Comm;

// The transport a communicator starts with: MPI directly on host memory, else staged through host buffers.
static CommTransport comm_mpi_transport(void) { return backend_memory_is_host() ? COMM_MPI_HOST : COMM_MPI_STAGED; }

// A kept host buffer of at least `bytes`.
static void *comm_reserve(void **buf, size_t *have, size_t bytes) {
    if (bytes > *have) {
        free(*buf);
        *buf = mallocCheck(bytes);
        *have = bytes;
    }
    return *buf;
}

// The memory MPI works on for a collective on buf: buf itself under COMM_MPI_HOST, else a copy in
// the kept host buffer *slot; comm_unstage copies the result back.
static void *comm_stage_in(Comm *c, void **slot, size_t *have, void *buf, size_t bytes) {
    if (c->transport == COMM_MPI_HOST) return buf;
    void *host = comm_reserve(slot, have, bytes);
    backend_bytes_to_host(host, buf, bytes);
    return host;
}
static void *comm_stage(Comm *c, void *buf, size_t bytes) { return comm_stage_in(c, &c->staging, &c->staging_bytes, buf, bytes); }
static void comm_unstage(void *buf, const void *host, size_t bytes) {
    if (host != buf) backend_bytes_from_host(buf, host, bytes);
}

static size_t comm_shard_size(size_t n, int world) { return (n + world - 1) / world; }

#ifdef USE_MPI
#define mpiCheck(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; \
    MPI_Error_string(rc_, s_, &l_); internal_fault("MPI error in %s: %s", #call, s_); } } while (0)
// MPI counts are int: large buffers move in pieces of at most COMM_CHUNK elements. COMM_FOR_CHUNKS
// runs its body for each piece [off, off + k) of [0, n).
#define COMM_CHUNK ((size_t)1 << 28)
static size_t comm_chunk(size_t n, size_t off) { return n - off < COMM_CHUNK ? n - off : COMM_CHUNK; }
#define COMM_FOR_CHUNKS(off, k, n) for (size_t off = 0, k = comm_chunk((n), 0); off < (n); off += k, k = comm_chunk((n), off))
static MPI_Datatype comm_mpi_type(CommType t) { return t == COMM_FLOAT32 ? MPI_FLOAT : MPI_UINT16_T; }
#endif

// Joins the job if launched by mpirun / srun (an MPI environment is present), else a world of one.
static void comm_init(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof(*c));
    c->world = 1;
    c->transport = comm_mpi_transport();
#ifdef USE_MPI
    c->mpi = MPI_COMM_NULL;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("SLURM_PROCID")) {
        mpiCheck(MPI_Init(argc, argv));
        c->initialized = 1;
        c->mpi = MPI_COMM_WORLD;
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &c->world));
        MPI_Comm local;
        mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local));
        mpiCheck(MPI_Comm_rank(local, &c->local_rank));
        MPI_Comm_free(&local);
    }
#else
    (void)argc; (void)argv;
    // A build without MPI started by a launcher as one of several ranks would run that many
    // independent copies, each training alone and writing the same files: stop, and say why.
    const char *size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"};
    const char *rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (int i = 0; i < 4; i++) {
        const char *s = getenv(size_vars[i]);
        if (!s || atoi(s) <= 1) continue;
        const char *r = getenv(rank_vars[i]);
        if (!r || atoi(r) == 0) {
            fprintf(stderr, "error: this binary was built without MPI, but a launcher started it as one of %s ranks (%s=%s): "
                    "each copy would train alone and write the same files. Rebuild it with MPI (apt-get install "
                    "libopenmpi-dev openmpi-bin, then make: the Makefile rebuilds when mpicc appears), or run it without "
                    "mpirun/srun\n", s, size_vars[i], s);
        }
        exit(2);
    }
#endif
}

// A world of one that joins no job (tests and tools that drive zero.h or pipeline.h in one process).
static Comm comm_solo(void) {
    Comm c;
    memset(&c, 0, sizeof(c));
    c.world = 1;
    c.transport = comm_mpi_transport();
#ifdef USE_MPI
    c.mpi = MPI_COMM_NULL;
#endif
    return c;
}

static void comm_set_role(Comm *c, CommRole role) { c->role = (int)role; }

// The axis a call on c is charged to: TP's group is TP whatever it does; the pipeline's sends and receives (a receive
// is mostly waiting for the neighbour); the data-parallel group's reductions and gathers apart (ZeRO's and Muon's
// gathers); the tied embedding's sum between the pipeline's ends is a gradient reduction.
static int comm_axis(const Comm *c, CommCall call) {
    switch (c->role) {
        case COMM_ROLE_TP: return AX_TP;
        case COMM_ROLE_PIPE: return call == COMM_CALL_SEND ? AX_PIPE_SEND : call == COMM_CALL_RECV ? AX_PIPE_WAIT : AX_OTHER;
        case COMM_ROLE_DP: return call == COMM_CALL_GATHER ? AX_GATHER : call == COMM_CALL_REDUCE ? AX_DP_REDUCE : AX_OTHER;
        case COMM_ROLE_TIED: return call == COMM_CALL_REDUCE ? AX_DP_REDUCE : AX_OTHER;
        default: return AX_OTHER;
    }
}

// Every call that can wait on another rank: its bytes and time charged to its axis, and the watchdog told.
static void comm_enter(const Comm *c, CommCall call, const char *op, size_t count, double bytes) {
    int axis = comm_axis(c, call);
    timing_comm_bytes(axis, bytes);
    timing_push_comm(axis);
    watch_enter(op, count);
}
static void comm_leave(void) {
    watch_leave();
    timing_pop();
}

// Starts the watchdog (only a job of several ranks can hang on another rank).
static void comm_watchdog_start(Comm *c, double timeout) {
    if (c->world > 1) watchdog_start(c->rank, timeout);
}

// The ranks of c with the same color form a group; within it they are ordered by key. The group
// keeps c's transport and has host buffers of its own.
static void comm_split(Comm *c, int color, int key, Comm *sub) {
    *sub = *c;
    sub->initialized = 0;
    sub->split = 0;
    sub->rank = 0;
    sub->world = 1;
    sub->staging = sub->async_staging = sub->regroup = NULL;
    sub->staging_bytes = sub->async_staging_bytes = sub->regroup_bytes = 0;
    sub->async_busy = 0;
    sub->sends = NULL;
    sub->nsends = sub->sends_cap = 0;
#ifdef USE_MPI
    if (c->world > 1) {
        mpiCheck(MPI_Comm_split(c->mpi, color, key, &sub->mpi));
        sub->split = 1;
        mpiCheck(MPI_Comm_rank(sub->mpi, &sub->rank));
        mpiCheck(MPI_Comm_size(sub->mpi, &sub->world));
        if (c->transport == COMM_DEVICE) sub->device = backend_comm_split(c->device, color, key);
    }
#else
    (void)color; (void)key;
#endif
}

// Brings up the build's device transport over the whole group (after the device is chosen); sub-groups
// made later by comm_split inherit it. Returns 0 where there is none: a build without one (the CPU
// build), or without MPI to hand out its id.
static int comm_enable_device(Comm *c) {
    size_t id_bytes = backend_comm_id_bytes();
#ifdef USE_MPI
    if (id_bytes == 0) return 0;
    if (c->world == 1 || c->transport == COMM_DEVICE) return 1;
    if (id_bytes > (size_t)INT_MAX) internal_fault("comm: a device transport id of %zu bytes", id_bytes);
    void *id = mallocCheck(id_bytes);
    if (c->rank == 0) backend_comm_id(id);
    mpiCheck(MPI_Bcast(id, (int)id_bytes, MPI_BYTE, 0, c->mpi));
    c->device = backend_comm_open(id, c->world, c->rank);
    free(id);
    c->transport = COMM_DEVICE;
    return 1;
#else
    (void)c; (void)id_bytes;
    return 0;
#endif
}

static void comm_free_buffers(Comm *c) {
    free(c->staging); free(c->async_staging); free(c->regroup);
    for (int i = 0; i < c->sends_cap; i++) free(c->sends[i].buf);
    free(c->sends);
    c->staging = c->async_staging = c->regroup = NULL;
    c->sends = NULL;
    c->staging_bytes = c->async_staging_bytes = c->regroup_bytes = 0;
    c->nsends = c->sends_cap = 0;
}

// A group from comm_split: its buffers and communicators (before comm_finalize leaves MPI).
static void comm_free_group(Comm *sub) {
    comm_free_buffers(sub);
#ifdef USE_MPI
    if (sub->split) {
        if (sub->transport == COMM_DEVICE) backend_comm_close(sub->device);
        mpiCheck(MPI_Comm_free(&sub->mpi));
    }
#endif
    sub->split = 0;
}

static void comm_finalize(Comm *c) {
    comm_free_buffers(c);
#ifdef USE_MPI
    if (c->initialized) MPI_Finalize();
#endif
    c->initialized = 0;
}

#ifdef USE_MPI
// The MPI side of the three collectives, on elements of `es` bytes of MPI type t summed by op: the floats' (MPI_FLOAT,
// MPI_SUM) and --tp's 16-bit activations' (comm_x_op), staged through host memory where the buffer is the device's.
static void comm_mpi_allreduce(Comm *c, void *buf, size_t n, size_t es, MPI_Datatype t, MPI_Op op) {
    char *h = (char *)comm_stage(c, buf, n * es);
    COMM_FOR_CHUNKS(off, k, n) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, h + off * es, (int)k, t, op, c->mpi));
    comm_unstage(buf, h, n * es);
}
static void comm_mpi_reduce_scatter(Comm *c, void *buf, size_t shard, size_t es, MPI_Datatype t, MPI_Op op) {
    size_t bytes = shard * c->world * es;
    char *h = (char *)comm_stage(c, buf, bytes), *mine = h + (size_t)c->rank * shard * es;
    COMM_FOR_CHUNKS(off, k, shard) {
        // each chunk is a reduce-scatter over the chunk-th piece of every shard: gather those pieces
        // into a contiguous buffer, so the per-rank layout MPI wants is met
        char *tmp = (char *)comm_reserve(&c->regroup, &c->regroup_bytes, k * c->world * es);
        for (int r = 0; r < c->world; r++) memcpy(tmp + (size_t)r * k * es, h + ((size_t)r * shard + off) * es, k * es);
        mpiCheck(MPI_Reduce_scatter_block(tmp, mine + off * es, (int)k, t, op, c->mpi));
    }
    comm_unstage(buf, h, bytes);
}
static void comm_mpi_allgather(Comm *c, void *buf, size_t shard, size_t es, MPI_Datatype t) {
    size_t bytes = shard * c->world * es;
    char *h = (char *)comm_stage(c, buf, bytes);
    if (shard <= COMM_CHUNK) {
        mpiCheck(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, (int)shard, t, c->mpi));
    } else {
        for (int r = 0; r < c->world; r++)
            COMM_FOR_CHUNKS(off, k, shard)
                mpiCheck(MPI_Bcast(h + ((size_t)r * shard + off) * es, (int)k, t, r, c->mpi));
    }
    comm_unstage(buf, h, bytes);
}
// 16-bit floats have no MPI type or sum: they move as MPI_UINT16_T, summed by an operation of ours that adds each
// pair in fp32 and rounds once to the build's type (backend_x_add_host), the correctly rounded sum NCCL gives.
static void comm_x_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    backend_x_add_host(inout, in, (size_t)*len);
}
static MPI_Op comm_x_op(void) {
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL) mpiCheck(MPI_Op_create(comm_x_sum, 1, &op));
    return op;
}
#endif

// Sum over ranks, in place.
static void comm_allreduce_sum(Comm *c, float *buf, size_t n) {
    (void)buf; (void)n;
    if (c->world == 1) return;
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "all-reduce", n, (double)n * sizeof(float));
    if (c->transport == COMM_DEVICE) {
        backend_comm_allreduce_sum(c->device, buf, n);
        backend_comm_join();
        comm_leave();
        return;
    }
    comm_mpi_allreduce(c, buf, n, sizeof(float), MPI_FLOAT, MPI_SUM);
    comm_leave();
#endif
}

static double comm_allreduce_sum_f64(Comm *c, double x) {
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "all-reduce", 1, c->world > 1 ? sizeof(double) : 0.0);
    if (c->world > 1) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c->mpi));
    comm_leave();
#else
    (void)c;
#endif
    return x;
}

static int comm_allreduce_max_int(Comm *c, int x) {
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "all-reduce", 1, c->world > 1 ? sizeof(int) : 0.0);
    if (c->world > 1) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, c->mpi));
    comm_leave();
#else
    (void)c;
#endif
    return x;
}

// buf holds world equal shards of `shard` floats; afterwards this rank's shard (at buf + rank*shard)
// holds the sum over ranks of that shard. The other shards are left as they were.
static void comm_reduce_scatter_sum(Comm *c, float *buf, size_t shard) {
    (void)buf; (void)shard;
    if (c->world == 1) return;
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "reduce-scatter", shard * c->world, (double)shard * c->world * sizeof(float));
    if (c->transport == COMM_DEVICE) {  // in place: this rank's shard receives the sum
        backend_comm_reduce_scatter_sum(c->device, buf, shard, c->rank);
        backend_comm_join();
        comm_leave();
        return;
    }
    comm_mpi_reduce_scatter(c, buf, shard, sizeof(float), MPI_FLOAT, MPI_SUM);
    comm_leave();
#endif
}

// buf holds world shards of `shard` floats; afterwards every shard holds what its owner rank had.
static void comm_allgather(Comm *c, float *buf, size_t shard) {
    (void)buf; (void)shard;
    if (c->world == 1) return;
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_GATHER, "all-gather", shard * c->world, (double)shard * c->world * sizeof(float));
    if (c->transport == COMM_DEVICE) {  // in place: this rank's shard is already in position
        backend_comm_allgather(c->device, buf, shard, c->rank);
        backend_comm_join();
        comm_leave();
        return;
    }
    comm_mpi_allgather(c, buf, shard, sizeof(float), MPI_FLOAT);
    comm_leave();
#endif
}

// The same three on the build's floatX (--tp's activations, tensor_parallel.h): fp32 as above; 16-bit elements (the
// CUDA build's bf16 and fp16) summed in their type, each pair's sum rounded once: over the device transport as
// NCCL sums them, over MPI by comm_x_op (the same bits for two ranks; for more, the two add in their own orders).
static int comm_x_direct(Comm *c) { return X_BYTES != sizeof(float) && c->world > 1; }
static void comm_allreduce_sum_x(Comm *c, floatX *buf, size_t n) {
    if (!comm_x_direct(c)) { comm_allreduce_sum(c, (float *)buf, n); return; }
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "all-reduce", n, (double)n * X_BYTES);
    if (c->transport == COMM_DEVICE) {
        backend_comm_allreduce_sum_x(c->device, buf, n);
        backend_comm_join();
    } else {
        comm_mpi_allreduce(c, buf, n, X_BYTES, MPI_UINT16_T, comm_x_op());
    }
    comm_leave();
#endif
}
static void comm_reduce_scatter_sum_x(Comm *c, floatX *buf, size_t shard) {
    if (!comm_x_direct(c)) { comm_reduce_scatter_sum(c, (float *)buf, shard); return; }
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_REDUCE, "reduce-scatter", shard * c->world, (double)shard * c->world * X_BYTES);
    if (c->transport == COMM_DEVICE) {
        backend_comm_reduce_scatter_sum_x(c->device, buf, shard, c->rank);
        backend_comm_join();
    } else {
        comm_mpi_reduce_scatter(c, buf, shard, X_BYTES, MPI_UINT16_T, comm_x_op());
    }
    comm_leave();
#endif
}
static void comm_allgather_x(Comm *c, floatX *buf, size_t shard) {
    if (!comm_x_direct(c)) { comm_allgather(c, (float *)buf, shard); return; }
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_GATHER, "all-gather", shard * c->world, (double)shard * c->world * X_BYTES);
    if (c->transport == COMM_DEVICE) {
        backend_comm_allgather_x(c->device, buf, shard, c->rank);
        backend_comm_join();
    } else {
        comm_mpi_allgather(c, buf, shard, X_BYTES, MPI_UINT16_T);
    }
    comm_leave();
#endif
}

// Every rank's `bytes` bytes at `mine`, in rank order, into `all` (world * bytes); small host buffers only.
static void comm_allgather_bytes(Comm *c, const void *mine, void *all, size_t bytes) {
    if (c->world == 1) { memcpy(all, mine, bytes); return; }
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_GATHER, "all-gather", bytes / 4, (double)bytes * c->world);
    mpiCheck(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi));
    comm_leave();
#else
    // a world of several without MPI cannot be; saying so tells the compiler that `all` is always written
    internal_fault("comm: a world of %d ranks in a build without MPI", c->world);
#endif
}

// Host bytes from rank root to every rank.
static void comm_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    (void)buf; (void)bytes; (void)root;
    if (c->world == 1) return;
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_OTHER, "broadcast", bytes / 4, (double)bytes);
    COMM_FOR_CHUNKS(off, k, bytes) mpiCheck(MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, c->mpi));
    comm_leave();
#endif
}

// A collective started now and finished by comm_wait, so that compute can run in between (ZeRO-3
// fetches the next layer's weights while this one computes). One at a time per communicator.
typedef struct {
    int active;
    float *buf, *host;      // the caller's buffer, and what MPI works on (the communicator's async staging, or buf)
    size_t bytes;
#ifdef USE_MPI
    MPI_Request req;
#endif
    int device;             // on the device transport: comm_wait joins it to the compute stream
} CommRequest;

// Starts an in-place all-gather of `world` shards of `shard` floats (see comm_allgather).
static void comm_allgather_start(Comm *c, float *buf, size_t shard, CommRequest *r) {
    memset(r, 0, sizeof(*r));
    if (c->world == 1) return;
    r->active = 1;
    r->buf = buf;
    r->bytes = shard * c->world * sizeof(float);
    if (c->transport == COMM_DEVICE) {  // beside the compute; comm_wait joins them
        backend_comm_allgather(c->device, buf, shard, c->rank);
        r->device = 1;
        return;
    }
#ifdef USE_MPI
    if (shard > COMM_CHUNK) {  // too big for one non-blocking call: do it now
        comm_allgather(c, buf, shard);
        r->active = 0;
        return;
    }
    if (c->async_busy) internal_fault("comm: a second non-blocking collective started before the first was waited for");
    c->async_busy = 1;
    r->host = (float *)comm_stage_in(c, &c->async_staging, &c->async_staging_bytes, buf, r->bytes);
    mpiCheck(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->host, (int)shard, MPI_FLOAT, c->mpi, &r->req));
#endif
}

static void comm_wait(Comm *c, CommRequest *r) {
    (void)c;
    if (!r->active) return;
    comm_enter(c, COMM_CALL_GATHER, "all-gather (wait)", r->bytes / sizeof(float), (double)r->bytes);
    if (r->device) backend_comm_join();  // the compute stream's next work waits for the gather; the host does not
#ifdef USE_MPI
    if (!r->device) {
        mpiCheck(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
        comm_unstage(r->buf, r->host, r->bytes);
        c->async_busy = 0;
    }
#endif
    comm_leave();
    r->active = 0;
}

// A buffered, non-blocking send of `count` elements of `type` from the build's memory to rank peer:
// the payload is copied to a host buffer the communicator keeps, so the caller may reuse buf at
// once (a blocking send between two neighbours that both send would deadlock). comm_wait_sends
// waits for every send begun.
static void comm_isend(Comm *c, const void *buf, size_t count, CommType type, int peer, int tag) {
#ifdef USE_MPI
    if (count > (size_t)INT_MAX) internal_fault("comm: a message of %zu elements is too large for one send", count);
    if (c->nsends == c->sends_cap) {
        int cap = c->sends_cap ? 2 * c->sends_cap : 16;
        c->sends = (CommSend *)reallocCheck(c->sends, cap * sizeof(CommSend));
        memset(c->sends + c->sends_cap, 0, (cap - c->sends_cap) * sizeof(CommSend));
        c->sends_cap = cap;
    }
    CommSend *s = &c->sends[c->nsends++];
    size_t bytes = count * comm_type_bytes(type);
    timing_comm_bytes(comm_axis(c, COMM_CALL_SEND), (double)bytes);
    timing_push_comm(comm_axis(c, COMM_CALL_SEND));  // the copy out and the hand-off to MPI
    comm_reserve(&s->buf, &s->bytes, bytes);
    backend_bytes_to_host(s->buf, buf, bytes);
    mpiCheck(MPI_Isend(s->buf, (int)count, comm_mpi_type(type), peer, tag, c->mpi, &s->req));
    timing_pop();
#else
    (void)c; (void)buf; (void)count; (void)type; (void)tag;
    internal_fault("a send to rank %d in a build without MPI (pipeline parallelism needs the MPI build)", peer);
#endif
}

static void comm_wait_sends(Comm *c) {
#ifdef USE_MPI
    timing_push_comm(comm_axis(c, COMM_CALL_SEND));
    for (int i = 0; i < c->nsends; i++) mpiCheck(MPI_Wait(&c->sends[i].req, MPI_STATUS_IGNORE));
    timing_pop();
#endif
    c->nsends = 0;
}

// Receives `count` elements of `type` from rank peer into the build's memory at buf (blocking).
static void comm_recv(Comm *c, void *buf, size_t count, CommType type, int peer, int tag) {
#ifdef USE_MPI
    size_t bytes = count * comm_type_bytes(type);
    comm_enter(c, COMM_CALL_RECV, "recv", bytes / 4, (double)bytes);
    if (count > (size_t)INT_MAX) internal_fault("comm: a message of %zu elements is too large for one receive", count);
    void *h = c->transport == COMM_MPI_HOST ? buf : comm_reserve(&c->staging, &c->staging_bytes, bytes);
    mpiCheck(MPI_Recv(h, (int)count, comm_mpi_type(type), peer, tag, c->mpi, MPI_STATUS_IGNORE));  // one message, as sent
    comm_unstage(buf, h, bytes);
    comm_leave();
#else
    (void)c; (void)buf; (void)count; (void)type; (void)tag;
    internal_fault("a receive from rank %d in a build without MPI", peer);
#endif
}

static void comm_barrier(Comm *c) {
#ifdef USE_MPI
    comm_enter(c, COMM_CALL_OTHER, "barrier", 0, 0.0);
    if (c->world > 1) mpiCheck(MPI_Barrier(c->mpi));
    comm_leave();
#else
    (void)c;
#endif
}

#endif
