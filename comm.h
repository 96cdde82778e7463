// comm.h: the communication layer, the only one: collectives (all-reduce, reduce-scatter, all-gather,
// broadcast, barrier) and point-to-point messages (a buffered non-blocking send, a receive) that
// zero.h, pipeline.h and the training loop call without knowing how ranks talk or where the buffers
// live. Each communicator fixes its transport when it is made (CommTransport): the CPU build's host
// memory goes straight through MPI; the CUDA build's device memory goes through NCCL (collectives,
// with --comm nccl) or through MPI staged in host buffers that the communicator allocates on first
// use and keeps. A build without MPI is a world of one, where every collective is the identity.
//
// Shards are equal: a buffer of n floats is cut into `world` shards of comm_shard_size(n, world),
// the last one padded, so every collective moves equal counts (as NCCL requires). Every collective
// is marked for the hang watchdog (watchdog.h).
#ifndef COMM_H
#define COMM_H

#include <limits.h>
#include "utils.h"
#include "timing.h"
#include "watchdog.h"
#ifdef USE_MPI
#include <mpi.h>
#endif
// NCCL moves device buffers directly between GPUs; it needs MPI to hand out its unique id.
#if defined(TRAIN_GPT_CUDA) && defined(USE_MPI)
#define USE_NCCL
#include <nccl.h>
#endif
#ifdef TRAIN_GPT_CUDA
#define COMM_DEVICE_MEMORY 1  // the build's buffers (backend memory) are device memory
#else
#define COMM_DEVICE_MEMORY 0
#endif

// How a communicator moves the build's buffers, fixed when it is made (comm_init, comm_split) or
// raised to NCCL once (comm_enable_nccl). Point-to-point messages always go through MPI, staged
// for device memory.
typedef enum { COMM_MPI_HOST, COMM_MPI_STAGED, COMM_NCCL } CommTransport;

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

typedef struct {
    int rank, world;
    int local_rank;    // rank within the node (picks the GPU in the CUDA build)
    int initialized;   // MPI_Init was called by us
    int split;         // a group comm_split made: its MPI (and NCCL) communicator is its own, freed by comm_free_group
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
#ifdef USE_NCCL
    ncclComm_t nccl;
#endif
} Comm;

#ifdef USE_NCCL
static void nccl_check(ncclResult_t r, const char *file, int line) {
    if (r != ncclSuccess) fatal_at(file, line, "NCCL: %s", ncclGetErrorString(r));
}
#define ncclCheck(r) nccl_check((r), __FILE__, __LINE__)
// NCCL's collectives run on a stream of their own, all of them, in the order the host issues them:
// the same order on every rank, which NCCL needs (two of its kernels on two streams may each wait for
// the other's peers). Events order each one after the compute-stream work that fills its buffer
// (nccl_enter) and the compute-stream work that reads it after the collective (nccl_leave, or
// comm_wait for a started one, so that ZeRO-3's gather of the next layer runs while this one computes).
// The host never waits for a collective (a host-side reader copies the buffer back, which waits); one
// that another rank never joins shows as the step's synchronisation not returning, which the
// watchdog's "not reached" timer catches.
static cudaStream_t nccl_stream = NULL;
static cudaEvent_t nccl_ready = NULL, nccl_done = NULL;
static void nccl_cuda_check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) internal_fault("NCCL stream: %s: %s", what, cudaGetErrorString(e));
}
static void nccl_enter(void) {
    nccl_cuda_check(cudaEventRecord(nccl_ready, main_stream), "cudaEventRecord");
    nccl_cuda_check(cudaStreamWaitEvent(nccl_stream, nccl_ready, 0), "cudaStreamWaitEvent");
}
// Everything issued on the NCCL stream so far is done before the compute stream's next work: one event
// serves every collective, the stream being in order.
static void nccl_leave(void) {
    nccl_cuda_check(cudaEventRecord(nccl_done, nccl_stream), "cudaEventRecord");
    nccl_cuda_check(cudaStreamWaitEvent(main_stream, nccl_done, 0), "cudaStreamWaitEvent");
}
#endif

// Host copies of the build's buffers: device memory in the CUDA build (ordered after the compute
// stream's work, as cudaMemcpy on the default stream is), plain memory otherwise.
static void comm_copy_to_host(void *host, const void *buf, size_t bytes) {
#ifdef TRAIN_GPT_CUDA
    if (cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) internal_fault("comm: device-to-host staging failed");
#else
    memcpy(host, buf, bytes);
#endif
}
static void comm_copy_from_host(void *buf, const void *host, size_t bytes) {
#ifdef TRAIN_GPT_CUDA
    if (cudaMemcpy(buf, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) internal_fault("comm: host-to-device staging failed");
#else
    memcpy(buf, host, bytes);
#endif
}

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
    comm_copy_to_host(host, buf, bytes);
    return host;
}
static void *comm_stage(Comm *c, void *buf, size_t bytes) { return comm_stage_in(c, &c->staging, &c->staging_bytes, buf, bytes); }
static void comm_unstage(void *buf, const void *host, size_t bytes) {
    if (host != buf) comm_copy_from_host(buf, host, bytes);
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
    c->transport = COMM_DEVICE_MEMORY ? COMM_MPI_STAGED : COMM_MPI_HOST;
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
    c.transport = COMM_DEVICE_MEMORY ? COMM_MPI_STAGED : COMM_MPI_HOST;
#ifdef USE_MPI
    c.mpi = MPI_COMM_NULL;
#endif
    return c;
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
#ifdef USE_NCCL
        if (c->transport == COMM_NCCL) ncclCheck(ncclCommSplit(c->nccl, color, key, &sub->nccl, NULL));
#endif
    }
#else
    (void)color; (void)key;
#endif
}

// Brings up NCCL over the whole group (the CUDA build, after the device is chosen); sub-groups made
// later by comm_split inherit it.
static void comm_enable_nccl(Comm *c) {
#ifdef USE_NCCL
    if (c->world == 1 || c->transport == COMM_NCCL) return;
    ncclUniqueId id;
    if (c->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, c->mpi));
    ncclCheck(ncclCommInitRank(&c->nccl, c->world, id, c->rank));
    c->transport = COMM_NCCL;
    if (!nccl_stream) {  // not ordered against the default stream: only the events above order them
        nccl_cuda_check(cudaStreamCreateWithFlags(&nccl_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        nccl_cuda_check(cudaEventCreateWithFlags(&nccl_ready, cudaEventDisableTiming), "cudaEventCreate");
        nccl_cuda_check(cudaEventCreateWithFlags(&nccl_done, cudaEventDisableTiming), "cudaEventCreate");
    }
#else
    (void)c;
    fatal("--comm nccl: this build has no NCCL (it needs the CUDA build with MPI)");
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
#ifdef USE_NCCL
        if (sub->transport == COMM_NCCL) ncclCheck(ncclCommDestroy(sub->nccl));
#endif
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

// Sum over ranks, in place.
static void comm_allreduce_sum(Comm *c, float *buf, size_t n) {
    (void)buf; (void)n;
    if (c->world == 1) return;
#ifdef USE_MPI
    watch_enter("all-reduce", n);
#ifdef USE_NCCL
    if (c->transport == COMM_NCCL) {
        nccl_enter();
        ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    float *h = (float *)comm_stage(c, buf, n * sizeof(float));
    COMM_FOR_CHUNKS(off, k, n) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, h + off, (int)k, MPI_FLOAT, MPI_SUM, c->mpi));
    comm_unstage(buf, h, n * sizeof(float));
    watch_leave();
#endif
}

static double comm_allreduce_sum_f64(Comm *c, double x) {
#ifdef USE_MPI
    watch_enter("all-reduce", 1);
    if (c->world > 1) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c->mpi));
    watch_leave();
#else
    (void)c;
#endif
    return x;
}

static int comm_allreduce_max_int(Comm *c, int x) {
#ifdef USE_MPI
    watch_enter("all-reduce", 1);
    if (c->world > 1) mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, c->mpi));
    watch_leave();
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
    watch_enter("reduce-scatter", shard * c->world);
#ifdef USE_NCCL
    if (c->transport == COMM_NCCL) {  // in place: this rank's shard receives the sum
        nccl_enter();
        ncclCheck(ncclReduceScatter(buf, buf + (size_t)c->rank * shard, shard, ncclFloat, ncclSum, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    size_t bytes = shard * c->world * sizeof(float);
    float *h = (float *)comm_stage(c, buf, bytes), *mine = h + (size_t)c->rank * shard;
    COMM_FOR_CHUNKS(off, k, shard) {
        // each chunk is a reduce-scatter over the chunk-th piece of every shard: gather those pieces
        // into a contiguous buffer, so the per-rank layout MPI wants is met
        float *tmp = (float *)comm_reserve(&c->regroup, &c->regroup_bytes, k * c->world * sizeof(float));
        for (int r = 0; r < c->world; r++) memcpy(tmp + (size_t)r * k, h + (size_t)r * shard + off, k * sizeof(float));
        mpiCheck(MPI_Reduce_scatter_block(tmp, mine + off, (int)k, MPI_FLOAT, MPI_SUM, c->mpi));
    }
    comm_unstage(buf, h, bytes);
    watch_leave();
#endif
}

// buf holds world shards of `shard` floats; afterwards every shard holds what its owner rank had.
static void comm_allgather(Comm *c, float *buf, size_t shard) {
    (void)buf; (void)shard;
    if (c->world == 1) return;
#ifdef USE_MPI
    watch_enter("all-gather", shard * c->world);
#ifdef USE_NCCL
    if (c->transport == COMM_NCCL) {  // in place: this rank's shard is already in position
        nccl_enter();
        ncclCheck(ncclAllGather(buf + (size_t)c->rank * shard, buf, shard, ncclFloat, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    size_t bytes = shard * c->world * sizeof(float);
    float *h = (float *)comm_stage(c, buf, bytes);
    if (shard <= COMM_CHUNK) {
        mpiCheck(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, (int)shard, MPI_FLOAT, c->mpi));
    } else {
        for (int r = 0; r < c->world; r++)
            COMM_FOR_CHUNKS(off, k, shard) mpiCheck(MPI_Bcast(h + (size_t)r * shard + off, (int)k, MPI_FLOAT, r, c->mpi));
    }
    comm_unstage(buf, h, bytes);
    watch_leave();
#endif
}

// Every rank's `bytes` bytes at `mine`, in rank order, into `all` (world * bytes); small host buffers only.
static void comm_allgather_bytes(Comm *c, const void *mine, void *all, size_t bytes) {
    if (c->world == 1) { memcpy(all, mine, bytes); return; }
#ifdef USE_MPI
    watch_enter("all-gather", bytes / 4);
    mpiCheck(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi));
    watch_leave();
#endif
}

// Host bytes from rank root to every rank.
static void comm_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    (void)buf; (void)bytes; (void)root;
    if (c->world == 1) return;
#ifdef USE_MPI
    watch_enter("broadcast", bytes / 4);
    COMM_FOR_CHUNKS(off, k, bytes) mpiCheck(MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, c->mpi));
    watch_leave();
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
    int nccl;
} CommRequest;

// Starts an in-place all-gather of `world` shards of `shard` floats (see comm_allgather).
static void comm_allgather_start(Comm *c, float *buf, size_t shard, CommRequest *r) {
    memset(r, 0, sizeof(*r));
    if (c->world == 1) return;
    r->active = 1;
    r->buf = buf;
    r->bytes = shard * c->world * sizeof(float);
#ifdef USE_NCCL
    if (c->transport == COMM_NCCL) {  // on the NCCL stream, beside the compute; comm_wait joins them
        nccl_enter();
        ncclCheck(ncclAllGather(buf + (size_t)c->rank * shard, buf, shard, ncclFloat, c->nccl, nccl_stream));
        r->nccl = 1;
        return;
    }
#endif
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
    watch_enter("all-gather (wait)", r->bytes / sizeof(float));
#ifdef USE_NCCL
    if (r->nccl) nccl_leave();  // the compute stream's next work waits for the gather; the host does not
#endif
#ifdef USE_MPI
    if (!r->nccl) {
        mpiCheck(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
        comm_unstage(r->buf, r->host, r->bytes);
        c->async_busy = 0;
    }
#endif
    watch_leave();
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
    comm_reserve(&s->buf, &s->bytes, bytes);
    comm_copy_to_host(s->buf, buf, bytes);
    mpiCheck(MPI_Isend(s->buf, (int)count, comm_mpi_type(type), peer, tag, c->mpi, &s->req));
#else
    (void)c; (void)buf; (void)count; (void)type; (void)tag;
    internal_fault("a send to rank %d in a build without MPI (pipeline parallelism needs the MPI build)", peer);
#endif
}

static void comm_wait_sends(Comm *c) {
#ifdef USE_MPI
    for (int i = 0; i < c->nsends; i++) mpiCheck(MPI_Wait(&c->sends[i].req, MPI_STATUS_IGNORE));
#endif
    c->nsends = 0;
}

// Receives `count` elements of `type` from rank peer into the build's memory at buf (blocking).
static void comm_recv(Comm *c, void *buf, size_t count, CommType type, int peer, int tag) {
#ifdef USE_MPI
    size_t bytes = count * comm_type_bytes(type);
    watch_enter("recv", bytes / 4);
    if (count > (size_t)INT_MAX) internal_fault("comm: a message of %zu elements is too large for one receive", count);
    void *h = c->transport == COMM_MPI_HOST ? buf : comm_reserve(&c->staging, &c->staging_bytes, bytes);
    mpiCheck(MPI_Recv(h, (int)count, comm_mpi_type(type), peer, tag, c->mpi, MPI_STATUS_IGNORE));  // one message, as sent
    comm_unstage(buf, h, bytes);
    watch_leave();
#else
    (void)c; (void)buf; (void)count; (void)type; (void)tag;
    internal_fault("a receive from rank %d in a build without MPI", peer);
#endif
}

static void comm_barrier(Comm *c) {
#ifdef USE_MPI
    watch_enter("barrier", 0);
    if (c->world > 1) mpiCheck(MPI_Barrier(c->mpi));
    watch_leave();
#else
    (void)c;
#endif
}

#endif
