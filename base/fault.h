// fault.h: fault injection (TRAIN_GPT_FAULT), the one place that decides when a test's fault strikes.
// It serves the loop (trainer.h: a rank that dies, stalls or is signalled, an overflowing loss) and the
// disk tier (swap.h: a short read, an I/O error, a file system without O_DIRECT), so that tests of what
// happens when things go wrong are deterministic instead of racing a process from outside (polling a
// log, then kill or pkill, which can hit the wrong process). The spec, one fault per run:
//   stall:RANK:STEP[:SECONDS] that rank stops before the gradient reduction of that step, as a rank stuck
//                         in a kernel or on a dead disk would (the watchdog's test); with SECONDS it goes on
//                         after that long (a straggler, which the time breakdown shows as the others' comm)
//   die:RANK:STEP         that rank kills itself with SIGKILL at the start of that step (a node lost)
//   signal:SIG:STEP[:RANK] TERM or USR1 raised on itself at the start of that step, by every rank or one
//                         (preemption, as slurm's scancel --signal delivers it); SEGV: a crash (the
//                         multinode suite's check that a dead rank's core and stack are reported)
//   overflow:S1,S2,...    the loss gradient is infinite at those steps, as an fp16 overflow would make it
//   nvme-short:STEP       (--offload-device nvme) the swap file loses its second half at that step: a short read
//   nvme-eio:STEP         (--offload-device nvme) the swap file's next read at that step fails with EIO
//   nvme-nodirect         (--offload-device nvme) the swap file is opened as if the file system refused O_DIRECT
// Steps are 1-based, as the step line counts them. With no TRAIN_GPT_FAULT nothing here ever fires.
#ifndef FAULT_H
#define FAULT_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "utils.h"

typedef enum { SWAP_FAULT_NONE, SWAP_FAULT_SHORT, SWAP_FAULT_EIO } SwapFault;

typedef struct {
    int stall_rank, stall_step;
    double stall_s;                          // how long the stall lasts (0: for ever)
    int signal_num, signal_step, signal_rank;  // raise signal_num at signal_step (rank -1: every rank)
    int die_rank, die_step;                  // SIGKILL at die_step
    char overflow_steps[256];                // ",S1,S2,...,"
    SwapFault swap_fault;
    int swap_fault_step;
    int swap_no_direct;                      // nvme-nodirect
    // armed at the start of swap_fault_step, taken by swap.h at its next transfer
    int swap_truncate_armed, swap_eio_armed;
} FaultPlan;
static FaultPlan fault_plan = {-1, -1, 0.0, 0, -1, -1, -1, -1, "", SWAP_FAULT_NONE, -1, 0, 0, 0};

// Reads the spec (NULL or "" for none); a spec it does not understand stops the run, naming it.
static void fault_parse(const char *spec) {
    FaultPlan *f = &fault_plan;
    if (!spec || !*spec) return;
    char sig[8] = "";
    int n = 0;
    if (strncmp(spec, "overflow:", 9) == 0) snprintf(f->overflow_steps, sizeof(f->overflow_steps), ",%s,", spec + 9);
    else if (sscanf(spec, "stall:%d:%d%n", &f->stall_rank, &f->stall_step, &n) == 2 && !spec[n]) {}
    else if (sscanf(spec, "stall:%d:%d:%lf%n", &f->stall_rank, &f->stall_step, &f->stall_s, &n) == 3 && !spec[n]) {}
    else if (sscanf(spec, "die:%d:%d%n", &f->die_rank, &f->die_step, &n) == 2 && !spec[n]) {}
    else if (sscanf(spec, "nvme-short:%d%n", &f->swap_fault_step, &n) == 1 && !spec[n]) f->swap_fault = SWAP_FAULT_SHORT;
    else if (sscanf(spec, "nvme-eio:%d%n", &f->swap_fault_step, &n) == 1 && !spec[n]) f->swap_fault = SWAP_FAULT_EIO;
    else if (strcmp(spec, "nvme-nodirect") == 0) f->swap_no_direct = 1;
    else if ((sscanf(spec, "signal:%7[A-Z0-9]:%d%n", sig, &f->signal_step, &n) == 2 && !spec[n]) ||
             (sscanf(spec, "signal:%7[A-Z0-9]:%d:%d%n", sig, &f->signal_step, &f->signal_rank, &n) == 3 && !spec[n])) {
        f->signal_num = strcmp(sig, "TERM") == 0 ? SIGTERM : strcmp(sig, "USR1") == 0 ? SIGUSR1 : strcmp(sig, "SEGV") == 0 ? SIGSEGV : 0;
        if (!f->signal_num) fatal("TRAIN_GPT_FAULT: signal '%s' is not TERM, USR1 or SEGV", sig);
    } else {
        fatal("TRAIN_GPT_FAULT: '%s' is not stall:RANK:STEP[:SECONDS], die:RANK:STEP, signal:TERM|USR1|SEGV:STEP[:RANK] or "
              "overflow:STEP[,STEP...], nvme-short:STEP, nvme-eio:STEP or nvme-nodirect", spec);
    }
}

// The faults that strike at the start of a step: death, a signal, and the disk's faults armed for the
// swap file's next transfer.
static void fault_step_begin(int rank, int step) {
    FaultPlan *f = &fault_plan;
    if (rank == f->die_rank && step == f->die_step) {
        fprintf(stderr, "fault injection: rank %d kills itself at step %d\n", rank, step);
        raise(SIGKILL);
    }
    if (f->swap_fault && step == f->swap_fault_step) {
        if (f->swap_fault == SWAP_FAULT_SHORT) f->swap_truncate_armed = 1;
        else f->swap_eio_armed = 1;
    }
    if (f->signal_num && step == f->signal_step && (f->signal_rank < 0 || f->signal_rank == rank)) {
        fprintf(stderr, "fault injection: rank %d raises SIG%s at step %d\n", rank,
                f->signal_num == SIGTERM ? "TERM" : f->signal_num == SIGUSR1 ? "USR1" : "SEGV", step);
        raise(f->signal_num);
    }
}

// Whether this step's loss gradient is to be infinite.
static int fault_overflow(int step) {
    char name[16];
    snprintf(name, sizeof(name), ",%d,", step);
    return strstr(fault_plan.overflow_steps, name) != NULL;
}

// Before the gradient reduction: the stalling rank stops here (for a while, or for ever).
static void fault_stall(int rank, int step) {
    const FaultPlan *f = &fault_plan;
    if (rank != f->stall_rank || step != f->stall_step) return;
    fprintf(stderr, "fault injection: rank %d stalls at step %d%s\n", rank, f->stall_step, f->stall_s > 0 ? " for a while" : "");
    if (f->stall_s > 0) { struct timespec ts = {(time_t)f->stall_s, (long)((f->stall_s - (time_t)f->stall_s) * 1e9)}; nanosleep(&ts, NULL); }
    else for (;;) pause();
}

// swap.h's questions: is O_DIRECT to be taken as refused; is the file to lose its second half now; is
// this read to fail with EIO (each armed fault is taken once).
static int fault_swap_no_direct(void) { return fault_plan.swap_no_direct; }
static int fault_take_swap_truncate(void) {
    int armed = fault_plan.swap_truncate_armed;
    fault_plan.swap_truncate_armed = 0;
    return armed;
}
static int fault_take_swap_eio(void) {
    int armed = fault_plan.swap_eio_armed;
    fault_plan.swap_eio_armed = 0;
    return armed;
}

#endif
