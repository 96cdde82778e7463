// watchdog.h: no silent hangs in a job of several ranks. comm.h marks every collective's entry and
// exit here (watch_enter / watch_leave) and numbers them; a thread watches the time since this rank
// last entered or left one. If a rank waits inside a collective, or runs outside any collective, for
// longer than the timeout (--comm-timeout), it prints where it is (its rank, the collective's number
// and kind, the step, its node) and exits non-zero, which makes mpirun / srun end every rank. A rank
// that stalls outside a collective fires first (its clock started when it left the previous
// collective, before the others entered the next one), so the job's log names the straggler.
// Serves comm.h (the marks) and the trainer (the start, the step number).
#ifndef WATCHDOG_H
#define WATCHDOG_H

#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "../base/utils.h"
#include "../backend/timing.h"

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


static void *watchdog_main(void *arg) {
    Watchdog *w = (Watchdog *)arg;
    for (;;) {
        struct timespec nap = {0, 200 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double waited = wall_seconds() - w->since;
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
    comm_watchdog.since = wall_seconds();
    comm_watchdog.inside = 1;
    timing_push(PH_COMM);  // waiting in a collective is comm time, whatever phase called it
}

static void watch_leave(void) {
    comm_watchdog.since = wall_seconds();
    comm_watchdog.inside = 0;
    timing_pop();
}

// Starts the watchdog for this rank (once; timeout 0 leaves it off).
static void watchdog_start(int rank, double timeout) {
    if (timeout <= 0 || comm_watchdog.running) return;
    comm_watchdog.timeout = timeout;
    comm_watchdog.rank = rank;
    if (gethostname(comm_watchdog.host, sizeof(comm_watchdog.host) - 1) != 0) strcpy(comm_watchdog.host, "?");
    comm_watchdog.since = wall_seconds();
    if (pthread_create(&comm_watchdog.thread, NULL, watchdog_main, &comm_watchdog) != 0) internal_fault("cannot start the watchdog thread");
    pthread_detach(comm_watchdog.thread);
    comm_watchdog.running = 1;
}

// The training step the rank is in, for the watchdog's message.
static void comm_watchdog_step(int step) { comm_watchdog.step = step; }

#endif
