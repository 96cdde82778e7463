// comm.h: the communication layer. One small interface (all-reduce, reduce-scatter, all-gather,
// broadcast, point-to-point send/recv, barrier) that zero.h, pipeline.h and the training loop call
// without knowing how ranks talk or where the buffers live. The CPU build implements it with MPI on
// host memory; a build without MPI is a world of one, where every collective is the identity.
//
// Shards are equal: a buffer of n floats is cut into `world` shards of comm_shard_size(n, world),
// the last one padded, so every collective moves equal counts (as NCCL requires).
#ifndef COMM_H
#define COMM_H

#include <pthread.h>
#include <time.h>
#include "utils.h"
#include "timing.h"
#ifdef USE_MPI
#include <mpi.h>
#endif
// NCCL moves device buffers directly between GPUs; it needs MPI to hand out its unique id.
#if defined(TRAIN_GPT_CUDA) && defined(USE_MPI)
#define USE_NCCL
#include <nccl.h>
#endif

// The watchdog: no silent hangs. Every collective gets a sequence number; a thread watches the time
// since this rank last entered or left one. If a rank waits inside a collective, or runs outside
// any collective, for longer than the timeout, it prints where it is (its rank, the collective's
// number and kind, the step) and exits non-zero, which makes mpirun / srun end every rank. A rank
// that stalls outside a collective fires first (its clock started when it left the previous
// collective, before the others entered the next one), so the job's log names the straggler.
typedef struct {
    double timeout;                 // seconds; 0 = off
    int rank;
    volatile uint64_t seq;          // collectives entered so far
    volatile int inside;
    const char *volatile op;
    volatile size_t count;
    volatile int step;
    volatile double since;          // monotonic time of the last enter or leave
    int running;
    char host[64];                  // this rank's node, for the messages
    pthread_t thread;
} Watchdog;
static Watchdog comm_watchdog = {0};

// utils.h's one clock, under the name the watchdog and pipeline.h call it by.
static double monotonic_seconds(void) { return wall_seconds(); }

static void *watchdog_main(void *arg) {
    Watchdog *w = (Watchdog *)arg;
    for (;;) {
        struct timespec nap = {0, 200 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double waited = monotonic_seconds() - w->since;
        if (waited <= w->timeout) continue;
        if (w->inside) {
            fprintf(stderr, "watchdog: rank %d has waited %.0f s inside collective #%llu (%s of %zu floats) at step %d on %s; "
                    "another rank never joined it. Aborting the job (--comm-timeout %.0f).\n", w->rank, waited,
                    (unsigned long long)w->seq, w->op, w->count, w->step, w->host, w->timeout);
        } else {
            fprintf(stderr, "watchdog: rank %d has not reached collective #%llu for %.0f s at step %d on %s (the last one it "
                    "finished was #%llu, %s); the other ranks are waiting for it. Aborting the job (--comm-timeout %.0f).\n",
                    w->rank, (unsigned long long)w->seq + 1, waited, w->step, w->host, (unsigned long long)w->seq,
                    w->op ? w->op : "none", w->timeout);
        }
        fflush(stderr);
        // every rank's watchdog fires within a tick of the others; give them time to say where they
        // are before the first exit makes the launcher kill the rest
        double grace = w->timeout < 2.0 ? w->timeout : 2.0;
        struct timespec g = {(time_t)grace, (long)((grace - (time_t)grace) * 1e9)};
        nanosleep(&g, NULL);
        _exit(3);
    }
    return NULL;
}

static void watch_enter(const char *op, size_t count) {
    comm_watchdog.op = op;
    comm_watchdog.count = count;
    comm_watchdog.seq++;
    comm_watchdog.since = monotonic_seconds();
    comm_watchdog.inside = 1;
    timing_push(PH_COMM);  // waiting in a collective is comm time, whatever phase called it
}

static void watch_leave(void) {
    comm_watchdog.since = monotonic_seconds();
    comm_watchdog.inside = 0;
    timing_pop();
}

typedef struct {
    int rank, world;
    int local_rank;    // rank within the node (picks the GPU in the CUDA build)
    int initialized;   // MPI_Init was called by us
#ifdef USE_MPI
    MPI_Comm mpi;      // the group this Comm talks in (the world, or a split of it)
#endif
#ifdef USE_NCCL
    int use_nccl;      // device buffers go through NCCL (else MPI, host-staged)
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
    nccl_cuda_check(cudaEventRecord(nccl_ready, 0), "cudaEventRecord");
    nccl_cuda_check(cudaStreamWaitEvent(nccl_stream, nccl_ready, 0), "cudaStreamWaitEvent");
}
// Everything issued on the NCCL stream so far is done before the compute stream's next work: one event
// serves every collective, the stream being in order.
static void nccl_leave(void) {
    nccl_cuda_check(cudaEventRecord(nccl_done, nccl_stream), "cudaEventRecord");
    nccl_cuda_check(cudaStreamWaitEvent(0, nccl_done, 0), "cudaStreamWaitEvent");
}
#endif

// The CUDA build hands collectives device buffers; MPI here is host-staged (--comm mpi in the issue's
// terms): a device buffer is copied to the host, reduced or moved, and copied back.
#ifdef TRAIN_GPT_CUDA
static int comm_is_device(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) { cudaGetLastError(); return 0; }
    return a.type == cudaMemoryTypeDevice;
}
static void *comm_stage(void *buf, size_t bytes) {
    if (!comm_is_device(buf)) return buf;
    void *host = mallocCheck(bytes);
    if (cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) internal_fault("comm: device-to-host staging failed");
    return host;
}
static void comm_unstage(void *buf, void *host, size_t bytes, int copy_back) {
    if (host == buf) return;
    if (copy_back && cudaMemcpy(buf, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) internal_fault("comm: host-to-device staging failed");
    free(host);
}
#else
static void *comm_stage(void *buf, size_t bytes) { (void)bytes; return buf; }
static void comm_unstage(void *buf, void *host, size_t bytes, int copy_back) { (void)buf; (void)host; (void)bytes; (void)copy_back; }
#endif

static size_t comm_shard_size(size_t n, int world) { return (n + world - 1) / world; }
static size_t comm_padded_size(size_t n, int world) { return comm_shard_size(n, world) * world; }

#ifdef USE_MPI
#define mpiCheck(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; \
    MPI_Error_string(rc_, s_, &l_); internal_fault("MPI error in %s: %s", #call, s_); } } while (0)
// MPI counts are int: move large buffers in pieces
#define COMM_CHUNK ((size_t)1 << 28)
#endif

// Joins the job if launched by mpirun / srun (an MPI environment is present), else a world of one.
static void comm_init(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof(*c));
    c->world = 1;
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

// Starts the watchdog (only a job of several ranks can hang on another rank).
static void comm_watchdog_start(Comm *c, double timeout) {
    if (timeout <= 0 || c->world == 1 || comm_watchdog.running) return;
    comm_watchdog.timeout = timeout;
    comm_watchdog.rank = c->rank;
    if (gethostname(comm_watchdog.host, sizeof(comm_watchdog.host) - 1) != 0) strcpy(comm_watchdog.host, "?");
    comm_watchdog.since = monotonic_seconds();
    if (pthread_create(&comm_watchdog.thread, NULL, watchdog_main, &comm_watchdog) != 0) internal_fault("cannot start the watchdog thread");
    pthread_detach(comm_watchdog.thread);
    comm_watchdog.running = 1;
}

// The training step the rank is in, for the watchdog's message.
static void comm_watchdog_step(int step) { comm_watchdog.step = step; }

// The ranks of c with the same color form a group; within it they are ordered by key.
static void comm_split(Comm *c, int color, int key, Comm *sub) {
    *sub = *c;
    sub->initialized = 0;
    sub->rank = 0;
    sub->world = 1;
#ifdef USE_MPI
    if (c->world > 1) {
        mpiCheck(MPI_Comm_split(c->mpi, color, key, &sub->mpi));
        mpiCheck(MPI_Comm_rank(sub->mpi, &sub->rank));
        mpiCheck(MPI_Comm_size(sub->mpi, &sub->world));
#ifdef USE_NCCL
        sub->use_nccl = 0;
        if (c->use_nccl) {
            ncclCheck(ncclCommSplit(c->nccl, color, key, &sub->nccl, NULL));
            sub->use_nccl = 1;
        }
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
    if (c->world == 1 || c->use_nccl) return;
    ncclUniqueId id;
    if (c->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, c->mpi));
    ncclCheck(ncclCommInitRank(&c->nccl, c->world, id, c->rank));
    c->use_nccl = 1;
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

static void comm_finalize(Comm *c) {
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
    if (c->use_nccl && comm_is_device(buf)) {
        nccl_enter();
        ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    float *h = (float *)comm_stage(buf, n * sizeof(float));
    for (size_t off = 0; off < n; off += COMM_CHUNK) {
        size_t k = n - off < COMM_CHUNK ? n - off : COMM_CHUNK;
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, h + off, (int)k, MPI_FLOAT, MPI_SUM, c->mpi));
    }
    comm_unstage(buf, h, n * sizeof(float), 1);
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
    if (c->use_nccl && comm_is_device(buf)) {  // in place: this rank's shard receives the sum
        nccl_enter();
        ncclCheck(ncclReduceScatter(buf, buf + (size_t)c->rank * shard, shard, ncclFloat, ncclSum, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    float *dev = buf;
    buf = (float *)comm_stage(dev, shard * c->world * sizeof(float));
    float *mine = buf + (size_t)c->rank * shard;
    for (size_t off = 0; off < shard; off += COMM_CHUNK) {
        size_t k = shard - off < COMM_CHUNK ? shard - off : COMM_CHUNK;
        // each chunk is a reduce-scatter over the chunk-th piece of every shard: gather those pieces
        // into a contiguous buffer, so the per-rank layout MPI wants is met
        float *tmp = (float *)mallocCheck(k * c->world * sizeof(float));
        for (int r = 0; r < c->world; r++) memcpy(tmp + (size_t)r * k, buf + (size_t)r * shard + off, k * sizeof(float));
        mpiCheck(MPI_Reduce_scatter_block(tmp, mine + off, (int)k, MPI_FLOAT, MPI_SUM, c->mpi));
        free(tmp);
    }
    comm_unstage(dev, buf, shard * c->world * sizeof(float), 1);
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
    if (c->use_nccl && comm_is_device(buf)) {  // in place: this rank's shard is already in position
        nccl_enter();
        ncclCheck(ncclAllGather(buf + (size_t)c->rank * shard, buf, shard, ncclFloat, c->nccl, nccl_stream));
        nccl_leave();
        watch_leave();
        return;
    }
#endif
    float *dev = buf;
    buf = (float *)comm_stage(dev, shard * c->world * sizeof(float));
    if (shard <= COMM_CHUNK) {
        mpiCheck(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)shard, MPI_FLOAT, c->mpi));
    } else {
        for (int r = 0; r < c->world; r++)
            for (size_t off = 0; off < shard; off += COMM_CHUNK) {
                size_t k = shard - off < COMM_CHUNK ? shard - off : COMM_CHUNK;
                mpiCheck(MPI_Bcast(buf + (size_t)r * shard + off, (int)k, MPI_FLOAT, r, c->mpi));
            }
    }
    comm_unstage(dev, buf, shard * c->world * sizeof(float), 1);
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

static void comm_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    (void)buf; (void)bytes; (void)root;
    if (c->world == 1) return;
#ifdef USE_MPI
    watch_enter("broadcast", bytes / 4);
    for (size_t off = 0; off < bytes; off += COMM_CHUNK) {
        size_t k = bytes - off < COMM_CHUNK ? bytes - off : COMM_CHUNK;
        mpiCheck(MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, c->mpi));
    }
    watch_leave();
#endif
}

// A collective started now and finished by comm_wait, so that compute can run in between (ZeRO-3
// fetches the next layer's weights while this one computes).
typedef struct {
    int active;
    float *buf, *host;      // the caller's buffer, and its host staging copy (device buffers under MPI)
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
    if (c->use_nccl && comm_is_device(buf)) {  // on the NCCL stream, beside the compute; comm_wait joins them
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
    r->host = (float *)comm_stage(buf, r->bytes);
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
        comm_unstage(r->buf, r->host, r->bytes, 1);
    }
#endif
    watch_leave();
    r->active = 0;
}

static void comm_send(Comm *c, const float *buf, size_t n, int peer, int tag) {
    (void)c;
#ifdef USE_MPI
    watch_enter("send", n);
    for (size_t off = 0; off < n; off += COMM_CHUNK) {
        size_t k = n - off < COMM_CHUNK ? n - off : COMM_CHUNK;
        mpiCheck(MPI_Send(buf + off, (int)k, MPI_FLOAT, peer, tag, c->mpi));
    }
    watch_leave();
#else
    (void)buf; (void)n; (void)tag;
    internal_fault("comm_send to rank %d in a build without MPI", peer);
#endif
}

static void comm_recv(Comm *c, float *buf, size_t n, int peer, int tag) {
    (void)c;
#ifdef USE_MPI
    watch_enter("recv", n);
    for (size_t off = 0; off < n; off += COMM_CHUNK) {
        size_t k = n - off < COMM_CHUNK ? n - off : COMM_CHUNK;
        mpiCheck(MPI_Recv(buf + off, (int)k, MPI_FLOAT, peer, tag, c->mpi, MPI_STATUS_IGNORE));
    }
    watch_leave();
#else
    (void)buf; (void)n; (void)tag;
    internal_fault("comm_recv from rank %d in a build without MPI", peer);
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
