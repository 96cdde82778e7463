// cuda/comm_nccl.cuh: the CUDA build's device transport for collectives (backend.h's backend_comm_*), NCCL:
// device buffers move directly between GPUs (comm.h's COMM_DEVICE, --comm nccl). NCCL needs MPI to hand out
// its unique id, so a build without MPI has none (backend_comm_id_bytes says 0, and --comm nccl stops).
#ifndef CUDA_COMM_NCCL_CUH
#define CUDA_COMM_NCCL_CUH

#include "common.cuh"
#ifdef USE_MPI
#include <nccl.h>
#endif

#ifdef USE_MPI
struct BackendComm { ncclComm_t nccl; };  // this rank's end of one group

static void nccl_check(ncclResult_t r, const char *file, int line) {
    if (r != ncclSuccess) fatal_at(file, line, "NCCL: %s", ncclGetErrorString(r));
}
#define ncclCheck(r) nccl_check((r), __FILE__, __LINE__)

// NCCL's collectives run on a stream of their own, all of them, in the order the host issues them:
// the same order on every rank, which NCCL needs (two of its kernels on two streams may each wait for
// the other's peers). Events order each one after the compute-stream work that fills its buffer
// (nccl_enter, in every collective) and the compute-stream work that reads it after the collective
// (backend_comm_join: at once for a blocking collective, at comm_wait for a started one, so that
// ZeRO-3's gather of the next layer runs while this one computes). The host never waits for a
// collective (a host-side reader copies the buffer back, which waits); one that another rank never
// joins shows as the step's synchronisation not returning, which the watchdog's "not reached" timer
// catches.
//
// While the compute stream captures a graph (pipeline.h's forward and backward with --tp, whose collectives run
// inside the layers), a collective goes on the compute stream itself, in line: the graph then holds it between the
// kernels that fill and read its buffer, with no second stream to fork into the capture and join back, and it
// runs the same work in the same order as the eager run (the same bits).
static cudaStream_t nccl_stream = NULL;
static cudaEvent_t nccl_ready = NULL, nccl_done = NULL;
static int nccl_in_capture(void) {
    cudaStreamCaptureStatus st;
    cudaCheck(cudaStreamIsCapturing(main_stream, &st));
    return st != cudaStreamCaptureStatusNone;
}
// The stream the next collective runs on, ordered after the compute stream's work so far.
static cudaStream_t nccl_enter(void) {
    if (nccl_in_capture()) return main_stream;
    cudaCheck(cudaEventRecord(nccl_ready, main_stream));
    cudaCheck(cudaStreamWaitEvent(nccl_stream, nccl_ready, 0));
    return nccl_stream;
}

static size_t backend_comm_id_bytes(void) { return sizeof(ncclUniqueId); }
static void backend_comm_id(void *id) { ncclCheck(ncclGetUniqueId((ncclUniqueId *)id)); }
static BackendComm *backend_comm_open(const void *id, int world, int rank) {
    BackendComm *dc = (BackendComm *)mallocCheck(sizeof(BackendComm));
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof(uid));
    ncclCheck(ncclCommInitRank(&dc->nccl, world, uid, rank));
    if (!nccl_stream) {  // not ordered against the default stream: only the events order it
        cudaCheck(cudaStreamCreateWithFlags(&nccl_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&nccl_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&nccl_done, cudaEventDisableTiming));
    }
    return dc;
}
static BackendComm *backend_comm_split(BackendComm *dc, int color, int key) {
    BackendComm *sub = (BackendComm *)mallocCheck(sizeof(BackendComm));
    ncclCheck(ncclCommSplit(dc->nccl, color, key, &sub->nccl, NULL));
    return sub;
}
static void backend_comm_close(BackendComm *dc) {
    ncclCheck(ncclCommDestroy(dc->nccl));
    free(dc);
}
static void backend_comm_allreduce_sum(BackendComm *dc, float *buf, size_t n) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, dc->nccl, st));
}
// In place: this rank's shard receives the sum.
static void backend_comm_reduce_scatter_sum(BackendComm *dc, float *buf, size_t shard, int rank) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclReduceScatter(buf, buf + (size_t)rank * shard, shard, ncclFloat, ncclSum, dc->nccl, st));
}
// In place: this rank's shard is already in position.
static void backend_comm_allgather(BackendComm *dc, float *buf, size_t shard, int rank) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclAllGather(buf + (size_t)rank * shard, buf, shard, ncclFloat, dc->nccl, st));
}
// The same on floatX (--tp's activations), in its type: NCCL sums bf16 and fp16 as such.
static ncclDataType_t nccl_x_type(void) {
    return x_prec == PREC_BF16 ? ncclBfloat16 : x_prec == PREC_FP16 ? ncclHalf : ncclFloat;
}
// its bytes, from the same x_prec (this header stands alone: backend.cuh's X_BYTES comes after it)
static size_t nccl_x_bytes(void) { return x_prec == PREC_FP32 ? 4 : 2; }
static void backend_comm_allreduce_sum_x(BackendComm *dc, floatX *buf, size_t n) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclAllReduce(buf, buf, n, nccl_x_type(), ncclSum, dc->nccl, st));
}
static void backend_comm_reduce_scatter_sum_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclReduceScatter(buf, (char *)buf + (size_t)rank * shard * nccl_x_bytes(), shard, nccl_x_type(), ncclSum, dc->nccl,
                                st));
}
static void backend_comm_allgather_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    cudaStream_t st = nccl_enter();
    ncclCheck(ncclAllGather((char *)buf + (size_t)rank * shard * nccl_x_bytes(), buf, shard, nccl_x_type(), dc->nccl,
                            st));
}
// Everything issued on the NCCL stream so far is done before the compute stream's next work: one event
// serves every collective, the stream being in order.
static void backend_comm_join(void) {
    if (nccl_in_capture()) return;  // it ran in line
    cudaCheck(cudaEventRecord(nccl_done, nccl_stream));
    cudaCheck(cudaStreamWaitEvent(main_stream, nccl_done, 0));
}
#else
// Without MPI: no transport; comm.h asks backend_comm_id_bytes and calls nothing else.
struct BackendComm;
static size_t backend_comm_id_bytes(void) { return 0; }
static void backend_comm_id(void *id) { (void)id; internal_fault("NCCL: this build has no MPI"); }
static BackendComm *backend_comm_open(const void *id, int world, int rank) {
    (void)id; (void)world; (void)rank;
    internal_fault("NCCL: this build has no MPI");
}
static BackendComm *backend_comm_split(BackendComm *dc, int color, int key) {
    (void)dc; (void)color; (void)key;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_close(BackendComm *dc) { (void)dc; }
static void backend_comm_allreduce_sum(BackendComm *dc, float *buf, size_t n) {
    (void)dc; (void)buf; (void)n;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_reduce_scatter_sum(BackendComm *dc, float *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_allgather(BackendComm *dc, float *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_allreduce_sum_x(BackendComm *dc, floatX *buf, size_t n) {
    (void)dc; (void)buf; (void)n;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_reduce_scatter_sum_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_allgather_x(BackendComm *dc, floatX *buf, size_t shard, int rank) {
    (void)dc; (void)buf; (void)shard; (void)rank;
    internal_fault("NCCL: this build has no MPI");
}
static void backend_comm_join(void) {}
#endif

#endif  // CUDA_COMM_NCCL_CUH
