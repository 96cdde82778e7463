// dev/cuda/emu/nccl.cpp: the NCCL calls the trainer makes, carried over MPI between the emulated ranks, so that
// --comm nccl runs with several ranks on one machine (the real NCCL refuses two ranks on one GPU; this one need
// not). Semantics from nccl.h: in-place all-reduce when sendbuff == recvbuff; in-place reduce-scatter when
// recvbuff == sendbuff + rank * recvcount; in-place all-gather when sendbuff == recvbuff + rank * sendcount;
// ncclCommSplit groups ranks by color (NCCL_SPLIT_NOCOLOR: none) ordered by key. Buffers must be device memory.
// A collective is checked when it is issued and runs when the device's queue gets to it (emu_queue.cpp), as NCCL's kernels
// run on the stream; an MPI failure then stops the run. Every blocking MPI call the program makes runs the queue
// first (the MPI_* wrappers at the end, through MPI's profiling interface), so that a rank never waits in MPI for a
// peer while holding back a collective that peer waits in: on a GPU, NCCL goes on without the host.
#include "emu.h"
#include "emu_internal.h"
#ifdef USE_MPI
#include <mpi.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <vector>

struct ncclComm {
    uint32_t magic;
    MPI_Comm mpi;
    int rank, nranks;
};
static const uint32_t COMM_MAGIC = 0x4e43434c;
static ncclResult_t g_last = ncclSuccess;
static char g_last_msg[512] = "";

static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_msg, sizeof(g_last_msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-emu: NCCL: %s\n", g_last_msg);
    g_last = r;
    return r;
}

static int live(ncclComm_t c) { return c && c->magic == COMM_MAGIC; }

// 16-bit floats have no MPI type: sum them in fp32 and round, through a user-defined operation.
static void sum_half(void *in, void *inout, int *len, MPI_Datatype *) {
    for (int i = 0; i < *len; i++)
        ((__half *)inout)[i] = __float2half_rn(__half2float(((__half *)in)[i]) + __half2float(((__half *)inout)[i]));
}
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *) {
    for (int i = 0; i < *len; i++)
        ((__nv_bfloat16 *)inout)[i] = __float2bfloat16_rn(__bfloat162float(((__nv_bfloat16 *)in)[i]) +
                                                          __bfloat162float(((__nv_bfloat16 *)inout)[i]));
}

static int mpi_type(ncclDataType_t t, MPI_Datatype *m, size_t *bytes) {
    switch (t) {
    case ncclFloat32: *m = MPI_FLOAT; *bytes = 4; return 1;
    case ncclFloat64: *m = MPI_DOUBLE; *bytes = 8; return 1;
    case ncclInt32: *m = MPI_INT; *bytes = 4; return 1;
    case ncclUint32: *m = MPI_UNSIGNED; *bytes = 4; return 1;
    case ncclInt64: *m = MPI_INT64_T; *bytes = 8; return 1;
    case ncclUint64: *m = MPI_UINT64_T; *bytes = 8; return 1;
    case ncclInt8: *m = MPI_INT8_T; *bytes = 1; return 1;
    case ncclUint8: *m = MPI_UINT8_T; *bytes = 1; return 1;
    case ncclFloat16: *m = MPI_UINT16_T; *bytes = 2; return 1;
    case ncclBfloat16: *m = MPI_UINT16_T; *bytes = 2; return 1;
    default: return 0;
    }
}

static int mpi_op(ncclRedOp_t op, ncclDataType_t t, MPI_Op *m) {
    if (t == ncclFloat16 || t == ncclBfloat16) {
        static MPI_Op h = MPI_OP_NULL, b = MPI_OP_NULL;
        if (op != ncclSum) return 0;
        if (h == MPI_OP_NULL) { MPI_Op_create(sum_half, 1, &h); MPI_Op_create(sum_bf16, 1, &b); }
        *m = t == ncclFloat16 ? h : b;
        return 1;
    }
    switch (op) {
    case ncclSum: *m = MPI_SUM; return 1;
    case ncclProd: *m = MPI_PROD; return 1;
    case ncclMax: *m = MPI_MAX; return 1;
    case ncclMin: *m = MPI_MIN; return 1;
    default: return 0;
    }
}

// A collective's arguments, checked as NCCL would need them.
static ncclResult_t prepare(const char *who, ncclComm_t c, ncclDataType_t t, cudaStream_t s, MPI_Datatype *m,
                            size_t *bytes) {
    if (!live(c)) return fail(ncclInvalidArgument, "%s: the communicator is NULL or destroyed", who);
    if (!mpi_type(t, m, bytes)) return fail(ncclInvalidArgument, "%s: data type %d is not emulated", who, (int)t);
    emu_check_stream(who, s);
    return ncclSuccess;
}

// Buffers must be device memory, whole.
static void device_buffer(const char *who, const char *what, const void *p, size_t bytes) {
    if (bytes) emu_require_device(who, what, p, bytes);
}

#define MPI_OK(call)                                                                         \
    do {                                                                                     \
        if ((call) != MPI_SUCCESS) return fail(ncclSystemError, "%s failed", #call);         \
    } while (0)
// inside a queued collective: there is no caller left to return an error to
#define MPI_RUN(call)                                                                        \
    do {                                                                                     \
        if ((call) != MPI_SUCCESS) emu_fatal("NCCL (emulated over MPI): %s failed", #call);  \
    } while (0)

static const size_t CHUNK = (size_t)1 << 28;  // MPI counts are int

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unknown result (cuda-emu)";
    }
}
const char *ncclGetLastError(ncclComm_t) { return g_last_msg; }
ncclResult_t ncclGetVersion(int *v) {
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

// The id: a nonce from rank 0's clock and pid, which every rank must then pass to ncclCommInitRank.
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof(*id));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id->internal, sizeof(id->internal), "cuda-emu nccl id %d %ld %ld", (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    return ncclSuccess;
}

// The communicator spans every MPI rank (the trainer brings NCCL up over its whole world, and splits it later).
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    int init = 0, world = 0;
    MPI_Initialized(&init);
    if (!init) return fail(ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL runs over MPI; start the ranks with mpirun");
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (nranks != world)
        return fail(ncclInvalidUsage, "ncclCommInitRank: %d ranks, but the emulation builds communicators over all %d MPI "
                    "ranks (use ncclCommSplit for groups)", nranks, world);
    if (rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    ncclComm *c = new ncclComm{COMM_MAGIC, MPI_COMM_NULL, rank, nranks};
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c->mpi));
    // every rank must have been given the same id (NCCL would hang otherwise)
    ncclUniqueId first = id;
    MPI_OK(MPI_Bcast(&first, sizeof(first), MPI_BYTE, 0, c->mpi));
    int same = memcmp(&first, &id, sizeof(id)) == 0, all = 0;
    MPI_OK(MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, c->mpi));
    if (!all) return fail(ncclInvalidUsage, "ncclCommInitRank: the ranks were given different unique ids");
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
    (void)config;
    if (!live(comm)) return fail(ncclInvalidArgument, "ncclCommSplit: the communicator is NULL or destroyed");
    MPI_Comm m;
    MPI_OK(MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &m));
    if (m == MPI_COMM_NULL) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    ncclComm *c = new ncclComm{COMM_MAGIC, m, 0, 0};
    MPI_Comm_rank(m, &c->rank);
    MPI_Comm_size(m, &c->nranks);
    *newcomm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!live(c)) return fail(ncclInvalidArgument, "ncclCommDestroy: the communicator is NULL or destroyed");
    MPI_Comm_free(&c->mpi);
    c->magic = 0;
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t ncclCommFinalize(ncclComm_t c) { return live(c) ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommCount(const ncclComm_t c, int *n) {
    if (!live(c)) return ncclInvalidArgument;
    *n = c->nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) {
    if (!live(c)) return ncclInvalidArgument;
    *r = c->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) {
    if (!live(c)) return ncclInvalidArgument;
    *d = 0;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
    if (!live(c)) return ncclInvalidArgument;
    *e = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    MPI_Datatype m;
    MPI_Op mo;
    size_t eb;
    ncclResult_t r = prepare("ncclAllReduce", c, t, s, &m, &eb);
    if (r != ncclSuccess) return r;
    if (!mpi_op(op, t, &mo)) return fail(ncclInvalidArgument, "ncclAllReduce: reduction %d on type %d is not emulated", (int)op, (int)t);
    device_buffer("ncclAllReduce", "sendbuff", send, count * eb);
    device_buffer("ncclAllReduce", "recvbuff", recv, count * eb);
    MPI_Comm mc = c->mpi;
    emu_counts.collectives++;
    const void *refs[] = {send, recv};
    emu_node_refs("ncclAllReduce", refs, 2);
    emu_enqueue(s, [=]() {
        for (size_t off = 0; off < count; off += CHUNK) {
            int k = (int)(count - off < CHUNK ? count - off : CHUNK);
            char *rb = (char *)recv + off * eb;
            if (send == recv) MPI_RUN(MPI_Allreduce(MPI_IN_PLACE, rb, k, m, mo, mc));
            else MPI_RUN(MPI_Allreduce((const char *)send + off * eb, rb, k, m, mo, mc));
        }
    });
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
    MPI_Datatype m;
    MPI_Op mo;
    size_t eb;
    ncclResult_t r = prepare("ncclReduceScatter", c, t, s, &m, &eb);
    if (r != ncclSuccess) return r;
    if (!mpi_op(op, t, &mo)) return fail(ncclInvalidArgument, "ncclReduceScatter: reduction %d on type %d is not emulated", (int)op, (int)t);
    device_buffer("ncclReduceScatter", "sendbuff", send, recvcount * c->nranks * eb);
    device_buffer("ncclReduceScatter", "recvbuff", recv, recvcount * eb);
    MPI_Comm mc = c->mpi;
    int nranks = c->nranks;
    emu_counts.collectives++;
    const void *refs[] = {send, recv};
    emu_node_refs("ncclReduceScatter", refs, 2);
    emu_enqueue(s, [=]() {
        // MPI's in-place form keeps the result at the start of the buffer, NCCL's at rank * recvcount: go through a copy
        std::vector<char> tmp(recvcount * eb), piece;
        for (size_t off = 0; off < recvcount; off += CHUNK) {
            size_t k = recvcount - off < CHUNK ? recvcount - off : CHUNK;
            piece.resize(k * nranks * eb);
            for (int q = 0; q < nranks; q++)
                memcpy(&piece[q * k * eb], (const char *)send + ((size_t)q * recvcount + off) * eb, k * eb);
            MPI_RUN(MPI_Reduce_scatter_block(piece.data(), &tmp[off * eb], (int)k, m, mo, mc));
        }
        memcpy(recv, tmp.data(), tmp.size());
    });
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s) {
    MPI_Datatype m;
    size_t eb;
    ncclResult_t r = prepare("ncclAllGather", c, t, s, &m, &eb);
    if (r != ncclSuccess) return r;
    device_buffer("ncclAllGather", "sendbuff", send, sendcount * eb);
    device_buffer("ncclAllGather", "recvbuff", recv, sendcount * c->nranks * eb);
    if (sendcount > CHUNK) return fail(ncclInvalidArgument, "ncclAllGather: counts over 2^28 are not emulated");
    MPI_Comm mc = c->mpi;
    int in_place = send == (const char *)recv + (size_t)c->rank * sendcount * eb;
    emu_counts.collectives++;
    const void *refs[] = {send, recv};
    emu_node_refs("ncclAllGather", refs, 2);
    emu_enqueue(s, [=]() {
        if (in_place) MPI_RUN(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)sendcount, m, mc));
        else MPI_RUN(MPI_Allgather(send, (int)sendcount, m, recv, (int)sendcount, m, mc));
    });
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    MPI_Datatype m;
    size_t eb;
    ncclResult_t r = prepare("ncclBroadcast", c, t, s, &m, &eb);
    if (r != ncclSuccess) return r;
    device_buffer("ncclBroadcast", "recvbuff", recv, count * eb);
    int copy = c->rank == root && send != recv;
    if (copy) device_buffer("ncclBroadcast", "sendbuff", send, count * eb);
    MPI_Comm mc = c->mpi;
    emu_counts.collectives++;
    const void *refs[] = {send, recv};
    emu_node_refs("ncclBroadcast", refs, 2);
    emu_enqueue(s, [=]() {
        if (copy) memcpy(recv, send, count * eb);
        for (size_t off = 0; off < count; off += CHUNK) {
            int k = (int)(count - off < CHUNK ? count - off : CHUNK);
            MPI_RUN(MPI_Bcast((char *)recv + off * eb, k, m, root, mc));
        }
    });
    return ncclSuccess;
}

// Point to point. Inside a group the operations are posted and completed together at ncclGroupEnd, as NCCL
// progresses a group's sends and receives concurrently.
static int g_group = 0;
static std::vector<MPI_Request> g_requests;

static ncclResult_t p2p(int is_send, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    const char *who = is_send ? "ncclSend" : "ncclRecv";
    MPI_Datatype m;
    size_t eb;
    ncclResult_t r = prepare(who, c, t, s, &m, &eb);
    if (r != ncclSuccess) return r;
    device_buffer(who, "the buffer", buf, count * eb);
    if (count > CHUNK) return fail(ncclInvalidArgument, "%s: counts over 2^28 are not emulated", who);
    emu_counts.collectives++;
    emu_device_flush();  // point to point runs at once (the trainer sends through MPI): after the work before it
    MPI_Request q;
    if (is_send) MPI_OK(MPI_Isend(buf, (int)count, m, peer, 7171, c->mpi, &q));
    else MPI_OK(MPI_Irecv(buf, (int)count, m, peer, 7171, c->mpi, &q));
    if (g_group) g_requests.push_back(q);
    else MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    return ncclSuccess;
}
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return p2p(1, (void *)buf, count, t, peer, c, s);
}
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return p2p(0, buf, count, t, peer, c, s);
}
ncclResult_t ncclGroupStart(void) {
    g_group++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    if (g_group == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g_group == 0 && !g_requests.empty()) {
        MPI_OK(MPI_Waitall((int)g_requests.size(), g_requests.data(), MPI_STATUSES_IGNORE));
        g_requests.clear();
    }
    return ncclSuccess;
}

// Blocking MPI calls run the device's queue first (see the top of the file). MPI's profiling interface names every
// function twice, MPI_ and PMPI_: these definitions take the MPI_ names in this program and pass on to PMPI_.
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    emu_device_flush();
    return PMPI_Allreduce(s, r, n, t, o, c);
}
int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    emu_device_flush();
    return PMPI_Reduce_scatter_block(s, r, n, t, o, c);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    emu_device_flush();
    return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    emu_device_flush();
    return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Barrier(MPI_Comm c) {
    emu_device_flush();
    return PMPI_Barrier(c);
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
    emu_device_flush();
    return PMPI_Send(b, n, t, dest, tag, c);
}
int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st) {
    emu_device_flush();
    return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Wait(MPI_Request *q, MPI_Status *st) {
    emu_device_flush();
    return PMPI_Wait(q, st);
}
int MPI_Waitall(int n, MPI_Request *q, MPI_Status *st) {
    emu_device_flush();
    return PMPI_Waitall(n, q, st);
}
int MPI_Finalize(void) {
    emu_device_flush();
    return PMPI_Finalize();
}

}  // extern "C"
#endif
