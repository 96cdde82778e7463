// timing_marks.h: the room for a step's marks (timing.h's clock), shared by the two builds' backend_mark. The
// CPU build keeps a time per mark and the CUDA build an event; both grow their array the same way, here.
#ifndef TIMING_MARKS_H
#define TIMING_MARKS_H

#include <stddef.h>
#include "utils.h"  // reallocCheck

// Grows `buf` (*cap elements of elem bytes) so that mark i fits, doubling from 256: a step makes about the same
// marks every time, so after the first step the array stays as it is. Returns the array; *cap is its new
// capacity. The caller initialises the elements from its old capacity up (the CUDA build creates their events).
static void *timing_marks_grow(void *buf, int *cap, int i, size_t elem) {
    int n = *cap ? 2 * *cap : 256;
    while (n <= i) n *= 2;
    buf = reallocCheck(buf, n * elem);
    *cap = n;
    return buf;
}

#endif
