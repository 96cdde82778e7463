// backend_bytes.h: the bytes a build's allocators have handed out, by kind, which both builds count alike: each
// backend's state and scratch allocators add to these, and backend.h's backend_state_allocated and
// backend_scratch_allocated read them (the run reports them beside its memory plan).
#ifndef BACKEND_BYTES_H
#define BACKEND_BYTES_H

#include <stddef.h>

static size_t backend_state_bytes = 0;    // model-state bytes handed out, so a run can report them beside its plan
static size_t backend_scratch_bytes = 0;  // every byte backend_alloc_scratch handed out (activations, workspace)
static size_t backend_state_allocated(void) { return backend_state_bytes; }
static size_t backend_scratch_allocated(void) { return backend_scratch_bytes; }

#endif  // BACKEND_BYTES_H
