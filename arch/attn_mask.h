// arch/attn_mask.h: which keys a query may see, as data: one description for both builds, every attention kernel
// (forward, backward, decode), the FLOPs count and the memory plan. Attention is always causal; on top of that a
// sliding window and a document mask may each narrow it. For the query at position q of a packed row of T tokens,
// key k is visible when
//     k <= q                                   (causal)
//     and (window == 0 or q - k < window)      (a sliding window of `window` keys, the query's own included)
//     and (doc_start == NULL or k >= doc_start[b * T + q])   (the query's own document: keys from where it starts)
// doc_start is (B, T) ints: for each token, the position in its row where its document starts (0 for the row's first
// document; non-decreasing along a row; doc_start[q] <= q). The window is per layer: a model's pattern (e.g. "every
// k-th layer global") gives each layer its own, 0 where the layer is global.
//
// A tile of queries [q0, q1) and keys [k0, k1) is wholly outside the mask, and a kernel skips it, exactly when
// attn_mask_tile_empty says so; the visible keys of a query are the range [attn_mask_first_key, q], so the work is
// proportional to attn_mask_visible_pairs, which the FLOPs and the profiler count instead of T (T + 1) / 2.
#ifndef ARCH_ATTN_MASK_H
#define ARCH_ATTN_MASK_H

#include <stddef.h>

typedef struct {
    int window;            // 0: no window; else a query sees at most `window` keys, itself and the window - 1 before it
    const int *doc_start;  // NULL: no document mask; else (B, T) as above, in the memory the kernel reads (host or device)
} AttnMask;

// The first key query q of row b sees (its last is q itself): the later of the window's start and its document's.
static inline int attn_mask_first_key(const AttnMask *m, int b, int T, int q) {
    int first = 0;
    if (m->window > 0 && q - m->window + 1 > first) first = q - m->window + 1;
    if (m->doc_start != NULL && m->doc_start[(size_t)b * T + q] > first) first = m->doc_start[(size_t)b * T + q];
    return first;
}

// Whether no query of [q0, q1) sees any key of [k0, k1) in row b (half-open ranges, q0 < q1, k0 < k1): past the
// causal edge (every key after the last query), or before every query's first key. Since a row's first keys never
// decrease with q (doc_start is non-decreasing, the window's start grows with q), the tile's earliest first key is
// its first query's.
static inline int attn_mask_tile_empty(const AttnMask *m, int b, int T, int q0, int q1, int k0, int k1) {
    if (k0 > q1 - 1) return 1;
    return k1 - 1 < attn_mask_first_key(m, b, T, q0);
}

// The (query, key) pairs the mask leaves visible in row b: the attention's work, counted exactly.
static inline long long attn_mask_visible_pairs(const AttnMask *m, int b, int T) {
    long long n = 0;
    for (int q = 0; q < T; q++) n += q - attn_mask_first_key(m, b, T, q) + 1;
    return n;
}

#endif
