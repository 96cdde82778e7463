// swap.h: the disk tier of --offload-device nvme (ZeRO-Infinity). One job: a per-run scratch file
// of fixed-size records, read and written through a small ring of aligned host buffers, with the
// I/O asynchronous (io_uring) so that while one record is worked on the next is being read and the
// previous written back. It knows nothing of models or ZeRO: zero.h says how many records there are,
// how many floats each holds per array, and in what order it streams them.
//
// A record is `arrays` arrays of the same length (zero.h: master weights and the optimizer's state arrays), each
// padded to SWAP_ALIGN bytes, so one array or the whole record is one aligned I/O, as O_DIRECT wants.
//
// The file is made with a unique name (pid, rank, a random number) and O_EXCL, sized up front with
// fallocate (a disk too small fails at start, not mid-step), and unlinked at once: the kernel frees
// the space when the process ends however it ends (exit, fatal error, signal, SIGKILL, the OOM
// killer), and two runs on the same directory can never see each other's files.
//
// Without liburing (the Makefile defines HAVE_LIBURING when it finds it) the same calls run as
// plain pread/pwrite, one at a time: correct, but the disk no longer overlaps the update.
#ifndef SWAP_H
#define SWAP_H

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "../base/utils.h"
#include "../base/fault.h"
#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define SWAP_ALIGN 4096  // bytes: the largest logical block size O_DIRECT asks alignment to
#define SWAP_RING 4      // buffers: one being read ahead, one being updated, two being written back

#ifdef HAVE_LIBURING
#define SWAP_IO_NAME "io_uring"
#else
#define SWAP_IO_NAME "pread/pwrite (this build has no liburing: apt-get install liburing-dev, then make)"
#endif

typedef struct {
    int fd;
    char path[4300];
    int direct;                  // opened with O_DIRECT
    int arrays;                  // arrays per record
    int nrec;
    size_t *cap;                 // per record: floats per array (a multiple of SWAP_ALIGN / 4)
    size_t *off;                 // per record: byte offset in the file
    size_t file_bytes, buf_floats;
    float *buf[SWAP_RING];       // each holds one whole record of the largest size
    // the stream (swap_stream_*): records first .. first+n-1, in order, through the ring
    int streaming, s_first, s_n, s_next_read, s_cur, s_holding;
    int busy[SWAP_RING];         // 1: a read into it in flight, 2: a write from it in flight
    int rec_of[SWAP_RING];
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
    // statistics, for the step's log line
    uint64_t bytes_read, bytes_written;
    double wait_s;               // time the caller spent blocked on the disk
} Swap;

static size_t swap_round(size_t bytes) { return (bytes + SWAP_ALIGN - 1) / SWAP_ALIGN * SWAP_ALIGN; }

// Floats per array of a record for `n` floats of state (padded to the alignment).
static size_t swap_cap(size_t n) { return swap_round(n * sizeof(float)) / sizeof(float); }

// Bytes the file and the ring take for records of these sizes (for the memory plan, without opening).
static size_t swap_file_bytes(const size_t *floats, int nrec, int arrays) {
    size_t b = 0;
    for (int i = 0; i < nrec; i++) b += (size_t)arrays * swap_cap(floats[i]) * sizeof(float);
    return b;
}
static size_t swap_ring_bytes(const size_t *floats, int nrec, int arrays) {
    size_t m = 0;
    for (int i = 0; i < nrec; i++) if (swap_cap(floats[i]) > m) m = swap_cap(floats[i]);
    return (size_t)SWAP_RING * arrays * m * sizeof(float);
}

// Free bytes under a directory (for the plan); 0 when it cannot be asked.
static size_t swap_free_bytes(const char *dir) {
    struct statvfs s;
    if (!dir || statvfs(dir, &s) != 0) return 0;
    return (size_t)s.f_bavail * s.f_frsize;
}

static void *swap_alloc_aligned(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, SWAP_ALIGN, bytes > 0 ? bytes : SWAP_ALIGN) != 0) fatal("out of memory allocating %zu bytes for the swap ring", bytes);
    memset(p, 0, bytes);
    return p;
}

// Opens the swap file under `dir` for records of floats[i] floats per array. `note` (may be NULL)
// receives what the user should know about how the file is used (no O_DIRECT here, no io_uring).
static void swap_open(Swap *s, const char *dir, int rank, const size_t *floats, int nrec, int arrays, char *note, size_t note_len) {
    memset(s, 0, sizeof(*s));
    s->arrays = arrays;
    s->nrec = nrec;
    s->cap = (size_t *)mallocCheck(nrec * sizeof(size_t));
    s->off = (size_t *)mallocCheck(nrec * sizeof(size_t));
    size_t maxcap = 0;
    for (int i = 0; i < nrec; i++) {
        s->cap[i] = swap_cap(floats[i]);
        s->off[i] = s->file_bytes;
        s->file_bytes += (size_t)arrays * s->cap[i] * sizeof(float);
        if (s->cap[i] > maxcap) maxcap = s->cap[i];
    }
    s->buf_floats = (size_t)arrays * maxcap;
    if (note && note_len) note[0] = '\0';
    struct stat st;
    if (!dir) internal_fault("swap_open without a directory");
    if (stat(dir, &st) != 0) fatal("--nvme-path %s: cannot use it for the swap file: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) fatal("--nvme-path %s: not a directory (the swap file goes inside it)", dir);
    uint64_t nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(wall_seconds() * 1e9) ^ ((uint64_t)rank << 48);
    nonce ^= nonce >> 29; nonce *= 0xbf58476d1ce4e5b9ull; nonce ^= nonce >> 32;
    snprintf(s->path, sizeof(s->path), "%s/train_gpt.swap.%d.%d.%08x", dir, (int)getpid(), rank, (unsigned)nonce);
    s->direct = 1;
    // fault.h's nvme-nodirect takes O_DIRECT as refused, as on a file system without it (this kernel's
    // tmpfs has it, so the fallback is otherwise out of a test's reach)
    s->fd = fault_swap_no_direct() ? -1 : open(s->path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fault_swap_no_direct()) errno = EINVAL;
    if (s->fd < 0 && errno == EINVAL) {  // the file system has no direct I/O (tmpfs on older kernels, some FUSE file systems)
        s->direct = 0;
        s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (note && note_len) snprintf(note, note_len, "%s does not allow O_DIRECT: buffered I/O through the page cache", dir);
    }
    if (s->fd < 0) fatal("--nvme-path %s: create swap file %s: %s", dir, s->path, strerror(errno));
    // unlinked at once: removed when the process ends, whatever ends it (see the top of this file)
    if (unlink(s->path) != 0) fatal("--nvme-path %s: unlink swap file %s: %s", dir, s->path, strerror(errno));
    // a size limit (ulimit -f) raises SIGXFSZ, which would kill us without a word: let it be EFBIG
    signal(SIGXFSZ, SIG_IGN);
    if (s->file_bytes > 0) {
        int e = posix_fallocate(s->fd, 0, (off_t)s->file_bytes);
        if (e == EOPNOTSUPP || e == EINVAL) e = ftruncate(s->fd, (off_t)s->file_bytes) == 0 ? 0 : errno;
        if (e) fatal("--nvme-path %s: allocate %zu bytes (%.2f GiB) for swap file %s: %s (free there: %.2f GiB)", dir,
                     s->file_bytes, s->file_bytes / 1073741824.0, s->path, strerror(e), swap_free_bytes(dir) / 1073741824.0);
    }
    for (int k = 0; k < SWAP_RING; k++) s->buf[k] = (float *)swap_alloc_aligned(s->buf_floats * sizeof(float));
#ifdef HAVE_LIBURING
    int e = io_uring_queue_init(2 * SWAP_RING, &s->ring, 0);
    if (e < 0) fatal("--offload-device nvme: io_uring_queue_init: %s (a kernel without io_uring, or one that forbids it: "
                     "sysctl kernel.io_uring_disabled)", strerror(-e));
#endif
}

static void swap_close(Swap *s) {
    if (!s->cap) return;
#ifdef HAVE_LIBURING
    io_uring_queue_exit(&s->ring);
#endif
    close(s->fd);
    for (int k = 0; k < SWAP_RING; k++) free(s->buf[k]);
    free(s->cap); free(s->off);
    memset(s, 0, sizeof(*s));
}

static float *swap_array(const Swap *s, float *rec, int r, int a) { return rec + (size_t)a * s->cap[r]; }

// Where record r's arrays [a, a + na) lie in the file.
static size_t swap_at(const Swap *s, int r, int a) { return s->off[r] + (size_t)a * s->cap[r] * sizeof(float); }

// A finished transfer: `got` bytes (or -errno) of `want`, on record r.
static void swap_check(Swap *s, int writing, ssize_t got, size_t want, size_t at, int r) {
    if (!writing && fault_take_swap_eio()) { got = -EIO; fprintf(stderr, "fault injection: the swap file's next read fails with EIO\n"); }
    if (got < 0) fatal("--offload-device nvme: %s %zu bytes at offset %zu of swap file %s (record %d): %s",
                       writing ? "write" : "read", want, at, s->path, r, strerror((int)-got));
    if ((size_t)got != want) fatal("--offload-device nvme: short %s of swap file %s: %zd of %zu bytes at offset %zu (record %d): %s",
                                   writing ? "write" : "read", s->path, got, want, at, r,
                                   writing ? "the disk is full or the file too large" : "the file is shorter than written (truncated?)");
}

// TRAIN_GPT_FAULT=nvme-short:STEP (fault.h arms it at the step's start; taken at the next transfer):
// the file loses its second half, as a file truncated under us would; the next read of a record there
// comes back short.
static void swap_take_fault(Swap *s) {
    if (!fault_take_swap_truncate()) return;
    if (ftruncate(s->fd, (off_t)(s->file_bytes / 2 / SWAP_ALIGN * SWAP_ALIGN)) != 0)
        fatal("fault injection: truncate swap file %s: %s", s->path, strerror(errno));
    fprintf(stderr, "fault injection: swap file %s truncated to half its size\n", s->path);
}

// One transfer, whole, now (with pread/pwrite, looping over partial transfers as they allow).
static void swap_io_sync(Swap *s, int writing, float *buf, size_t bytes, size_t at, int r) {
    double t0 = wall_seconds();
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = writing ? pwrite(s->fd, (char *)buf + done, bytes - done, (off_t)(at + done))
                            : pread(s->fd, (char *)buf + done, bytes - done, (off_t)(at + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { swap_check(s, writing, n < 0 ? -errno : (ssize_t)done, bytes, at, r); break; }
        done += (size_t)n;
    }
    if (!writing) swap_check(s, 0, (ssize_t)done, bytes, at, r);
    if (writing) s->bytes_written += bytes; else s->bytes_read += bytes;
    s->wait_s += wall_seconds() - t0;
}

// Arrays [a, a + na) of record r into (or from) the ring's first buffer, now; returns it. Not while
// a stream runs (it owns the ring).
static float *swap_read(Swap *s, int r, int a, int na) {
    if (s->streaming) internal_fault("swap_read during a stream");
    swap_take_fault(s);
    swap_io_sync(s, 0, s->buf[0], (size_t)na * s->cap[r] * sizeof(float), swap_at(s, r, a), r);
    return s->buf[0];
}
static float *swap_staging(Swap *s) { return s->buf[0]; }  // fill this, then swap_write
static void swap_write(Swap *s, int r, int a, int na) {
    if (s->streaming) internal_fault("swap_write during a stream");
    swap_take_fault(s);
    swap_io_sync(s, 1, s->buf[0], (size_t)na * s->cap[r] * sizeof(float), swap_at(s, r, a), r);
}

// ----------------------------------------------------------------------------
// The stream: records first .. first + n - 1 in order. swap_stream_next hands out the next record
// read in full (waiting for it if it is not in yet) and starts reading the ones after it into the
// free buffers; swap_stream_done queues the current one's write-back; swap_stream_end waits for all.

static void swap_submit(Swap *s, int k, int writing) {
    int r = s->rec_of[k];
    size_t bytes = (size_t)s->arrays * s->cap[r] * sizeof(float), at = s->off[r];
    s->busy[k] = writing ? 2 : 1;
#ifdef HAVE_LIBURING
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe) internal_fault("io_uring: no free submission entry");
    if (writing) io_uring_prep_write(sqe, s->fd, s->buf[k], (unsigned)bytes, at);
    else io_uring_prep_read(sqe, s->fd, s->buf[k], (unsigned)bytes, at);
    io_uring_sqe_set_data(sqe, (void *)(uintptr_t)k);
    int e = io_uring_submit(&s->ring);
    if (e < 0) fatal("--offload-device nvme: io_uring submit for swap file %s: %s", s->path, strerror(-e));
#else
    swap_io_sync(s, writing, s->buf[k], bytes, at, r);
    s->busy[k] = 0;
#endif
}

// Waits for one completion (any) and retires it. A partial transfer (io_uring may return one for
// buffered I/O) is finished synchronously; one that cannot be finished is the error it is.
static void swap_reap(Swap *s) {
#ifdef HAVE_LIBURING
    struct io_uring_cqe *cqe;
    double t0 = wall_seconds();
    int e;
    do e = io_uring_wait_cqe(&s->ring, &cqe); while (e == -EINTR);
    s->wait_s += wall_seconds() - t0;
    if (e < 0) fatal("--offload-device nvme: io_uring wait on swap file %s: %s", s->path, strerror(-e));
    int k = (int)(uintptr_t)io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&s->ring, cqe);
    int r = s->rec_of[k], writing = s->busy[k] == 2;
    size_t bytes = (size_t)s->arrays * s->cap[r] * sizeof(float);
    s->busy[k] = 0;
    if (res > 0 && (size_t)res < bytes) {  // the rest now; its bytes are counted there
        if (writing) s->bytes_written += (size_t)res; else s->bytes_read += (size_t)res;
        swap_io_sync(s, writing, (float *)((char *)s->buf[k] + res), bytes - (size_t)res, s->off[r] + (size_t)res, r);
        return;
    }
    swap_check(s, writing, res, bytes, s->off[r], r);
    if (writing) s->bytes_written += bytes; else s->bytes_read += bytes;
#else
    (void)s;
#endif
}

static int swap_in_flight(const Swap *s) {
    int any = 0;
    for (int k = 0; k < SWAP_RING; k++) any |= s->busy[k];
    return any;
}

// Starts reads of the records ahead into the buffers that are free: record n reuses the buffer of
// record n - SWAP_RING, once that one has been handed out, updated and written back.
static void swap_read_ahead(Swap *s) {
    while (s->s_next_read < s->s_first + s->s_n) {
        int n = s->s_next_read, k = (n - s->s_first) % SWAP_RING;
        if (s->busy[k] || n - SWAP_RING >= s->s_cur + !s->s_holding) return;
        s->rec_of[k] = n;
        s->s_next_read++;
        swap_submit(s, k, 0);
    }
}

static void swap_stream_begin(Swap *s, int first, int n) {
    if (s->streaming) internal_fault("swap_stream_begin: a stream is running");
    swap_take_fault(s);
    s->streaming = 1;
    s->s_first = first; s->s_n = n; s->s_next_read = first; s->s_cur = first - 1; s->s_holding = 0;
    for (int k = 0; k < SWAP_RING; k++) s->rec_of[k] = -1;
    swap_read_ahead(s);
}

// The next record, read in full; its array a is at swap_array(s, rec, r, a).
static float *swap_stream_next(Swap *s, int *r_out) {
    int r = s->s_cur + 1;
    if (s->s_holding || r >= s->s_first + s->s_n) internal_fault("swap_stream_next out of order");
    int k = (r - s->s_first) % SWAP_RING;
    for (;;) {
        swap_read_ahead(s);
        if (s->s_next_read > r && s->rec_of[k] == r && !s->busy[k]) break;
        if (!swap_in_flight(s)) internal_fault("swap stream: record %d neither read nor in flight", r);
        swap_reap(s);
    }
    s->s_cur = r;
    s->s_holding = 1;
    *r_out = r;
    return s->buf[k];
}

// The current record goes back to the file (asynchronously); the next reads can start.
static void swap_stream_done(Swap *s) {
    int k = (s->s_cur - s->s_first) % SWAP_RING;
    s->s_holding = 0;
    swap_submit(s, k, 1);
    swap_read_ahead(s);
}

static void swap_stream_end(Swap *s) {
    while (swap_in_flight(s)) swap_reap(s);
    s->streaming = 0;
}

#endif
