/*
GPT-2 tokenizer, and Hugging Face byte-level BPE tokenizers, header-only, in the style of llm.c.

Three ways to load it:
- tokenizer_init_bpe(): from OpenAI's published encoder.json + vocab.bpe. This can
  encode and decode. Encoding reproduces tiktoken's "gpt2" encoding (encode_ordinary):
  the same pre-tokenisation regex (implemented by hand below, no regex library) and
  the same byte-pair merge order.
- tokenizer_init_bin(): from llm.c's tokenizer .bin file (version 1 or 2). Decoding
  only; this is what the trainer uses to print samples.
- tokenizer_init_json() (tokenizer_json.h): from a Hugging Face tokenizer.json whose model is
  byte-level BPE (GPT-2, Llama 3, Qwen 2, SmolLM...). Encoding reproduces the `tokenizers`
  library's encode(text, add_special_tokens=False): its added tokens found first, its NFC
  normalizer (tokenizer_nfc.h), its pre-tokenizer (GPT-2's pattern, Llama 3's, Qwen 2's, or
  Digits then GPT-2's, each hand-written below), and its merges by pair rank (tok_bpe_hf).
  What it cannot honour exactly it refuses by name. See docs/tokenizer.md.

tokenizer_write_bin() writes the llm.c .bin file (version 2). The three are in tokenizer_files.h,
which includes this header; include it where files are read or written.

Errors in the input (missing/corrupt files) and out of memory print the cause, naming
the file, and exit(1), through utils.h's fatal(); an internal fault (internal_fault())
also prints the source location.

The Unicode tables (letters, numbers, white space) live in tokenizer_tables.h, generated
by dev/gen_unicode_tables.py; the file formats (encoder.json + vocab.bpe, the .bin) in
tokenizer_files.h. Both are included here; callers include only tokenizer.h.

Known differences from tiktoken:
- Unicode version: the tables come from the generating Python's unicodedata
  (see TOK_UNICODE_VERSION); tiktoken's Rust regex crate may know a newer version.
  Characters assigned since then count as "other" here. That can only change ids
  where a merge spans such a character and its neighbour; fuzzing with ~14k such
  characters found no case with GPT-2's vocabulary.
- Invalid UTF-8 (which tiktoken cannot receive) is split into single "other" bytes.
- "<|endoftext|>" in the text is ordinary text (tiktoken's encode_ordinary); the EOT
  id is only produced by callers that insert it explicitly. (A tokenizer.json's added tokens
  in the text are their ids, as the `tokenizers` library makes them.)

Everything is `static` (plus __attribute__((unused)) so that a translation unit
using only part of the API compiles without -Wunused-function warnings) and
written so it also compiles as C++ (explicit casts on malloc), in case a .cu
trainer includes it.
*/
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include "utils.h"  // errors: fatal (bad input, in the user's words), internal_fault; mallocCheck, reallocCheck

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2

#include "tokenizer_utf8.h"    // tok_cp_class, tok_char_at: UTF-8 characters and their classes
#include "tokenizer_nfc.h"     // NFC, for a tokenizer.json whose normalizer is NFC

// End (exclusive) of the run of characters of class `cls` starting at i.
// If last_start is non-NULL it receives the offset of the run's last character.
TOK_FN size_t tok_run_end(const unsigned char *s, size_t n, size_t i, int cls, size_t *last_start) {
    size_t last = i;
    while (i < n) {
        int len;
        if (tok_char_at(s, n, i, &len) != cls) { break; }
        last = i;
        i += (size_t)len;
    }
    if (last_start) { *last_start = last; }
    return i;
}

// End of the pre-token that starts at i (i < n). Implements, with the same
// leftmost-first alternation semantics as tiktoken's (fancy-)regex,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
TOK_FN size_t tok_pretoken_end(const unsigned char *s, size_t n, size_t i) {
    // 's 't 're 've 'm 'll 'd (case-sensitive, as in GPT-2)
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') { return i + 2; }
        if (i + 2 < n) {
            unsigned char c2 = s[i + 2];
            if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l')) { return i + 3; }
        }
    }
    int len0;
    int cls0 = tok_char_at(s, n, i, &len0);
    // " ?X+" for X in letters / numbers / other: an ASCII space glues onto a
    // following non-space run. A space followed by white space is handled below.
    if (s[i] == ' ' && i + 1 < n) {
        int len1;
        int cls1 = tok_char_at(s, n, i + 1, &len1);
        if (cls1 != TOK_WS) { return tok_run_end(s, n, i + 1, cls1, NULL); }
    }
    if (cls0 != TOK_WS) { return tok_run_end(s, n, i, cls0, NULL); }
    // \s+(?!\S): the whole white-space run if it reaches the end of the text;
    // otherwise give back its last character, so that e.g. "   x" becomes "  ", " x".
    size_t last;
    size_t end = tok_run_end(s, n, i, TOK_WS, &last);
    if (end == n) { return end; }
    if (last > i) { return last; }
    // \s+ : a single white-space character followed by a non-space (e.g. "\nx")
    return end;
}

// The pre-tokenisers of tokenizer.json files (tokenizer_json.h recognises which from the file's
// Split pattern). TOK_PRE_GPT2 is the one above.
// TOK_PRE_DIGITS1 / TOK_PRE_DIGITSN: Sequence [Digits(individual_digits true / false), ByteLevel with
// GPT-2's regex] (SmolLM, StarCoder): each number character (Rust's char::is_numeric, i.e. \p{N}) is a
// piece of its own / each run of them is one, and GPT-2's pattern splits the text between.
enum { TOK_PRE_GPT2 = 0, TOK_PRE_LLAMA3 = 1, TOK_PRE_QWEN2 = 2, TOK_PRE_DIGITS1 = 3, TOK_PRE_DIGITSN = 4 };

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i] == '\'': its end, or 0. Case-insensitive by Unicode's simple
// case folding, as Oniguruma (the `tokenizers` library's regex engine) matches it: the only non-ASCII
// letter that folds onto one of these is U+017F LATIN SMALL LETTER LONG S, onto 's' (a test checks it).
TOK_FN size_t tok_contraction_ci(const unsigned char *s, size_t n, size_t i) {
    if (i + 1 >= n) { return 0; }
    unsigned c = s[i + 1] | 0x20;  // ASCII letters to lower case (others are compared exactly below)
    if (s[i + 1] >= 'A' && s[i + 1] <= 'z' && (c == 's' || c == 't' || c == 'm' || c == 'd')) { return i + 2; }
    if (i + 2 < n && s[i + 1] == 0xC5 && s[i + 2] == 0xBF) { return i + 3; }  // 'ſ
    if (i + 2 < n && s[i + 1] >= 'A' && s[i + 1] <= 'z' && s[i + 2] >= 'A' && s[i + 2] <= 'z') {
        unsigned c2 = s[i + 2] | 0x20;
        if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l')) { return i + 3; }
    }
    return 0;
}

// End of the pre-token at i for Llama 3's pattern (max_digits 3)
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and for Qwen 2's (max_digits 1: \p{N} alone in place of \p{N}{1,3}), with the same
// leftmost-first alternation as the regex engine.
TOK_FN size_t tok_pretoken_end_llama3(const unsigned char *s, size_t n, size_t i, int max_digits) {
    if (s[i] == '\'') {
        size_t k = tok_contraction_ci(s, n, i);
        if (k) { return k; }
    }
    int len0;
    int cls0 = tok_char_at(s, n, i, &len0);
    // [^\r\n\p{L}\p{N}]?\p{L}+ : a letter run, with one character before it that is neither a
    // line break, a letter nor a number (a space, other white space, punctuation, a symbol)
    if (cls0 == TOK_L) { return tok_run_end(s, n, i, TOK_L, NULL); }
    if (cls0 != TOK_N && s[i] != '\r' && s[i] != '\n' && i + (size_t)len0 < n) {
        int len1;
        if (tok_char_at(s, n, i + (size_t)len0, &len1) == TOK_L) { return tok_run_end(s, n, i + (size_t)len0, TOK_L, NULL); }
    }
    // \p{N}{1,max_digits}
    if (cls0 == TOK_N) {
        size_t j = i;
        for (int k = 0; k < max_digits && j < n; k++) {
            int l;
            if (tok_char_at(s, n, j, &l) != TOK_N) { break; }
            j += (size_t)l;
        }
        return j;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n) {
        int l;
        if (tok_char_at(s, n, i + 1, &l) == TOK_OTHER) { j = i + 1; }
    }
    if (j > i || cls0 == TOK_OTHER) {
        j = tok_run_end(s, n, j, TOK_OTHER, NULL);
        while (j < n && (s[j] == '\r' || s[j] == '\n')) { j++; }
        return j;
    }
    // white space. \s*[\r\n]+ : \s* backtracks from the run's end to its last line break, and
    // [\r\n]+ then takes that one (what follows it in the run is no line break)
    size_t last;
    size_t end = tok_run_end(s, n, i, TOK_WS, &last);
    for (size_t k = end; k > i; k--) {
        if (s[k - 1] == '\r' || s[k - 1] == '\n') { return k; }
    }
    // \s+(?!\S) and \s+, as in GPT-2's
    if (end == n) { return end; }
    if (last > i) { return last; }
    return end;
}

// ----------------------------------------------------------------------------
// hashing

TOK_FN uint64_t tok_hash(const unsigned char *p, size_t len) {
    // FNV-1a, 64 bit: pieces are short, so a simple byte-wise hash is fine
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) { h = (h ^ p[i]) * 1099511628211ULL; }
    return h ^ (h >> 29);
}

// Per pre-token BPE cache entry: key bytes and resulting ids live in two arenas.
typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len;  // into cache_keys
    uint32_t ids_off, ids_n;    // into cache_ids
    int used;
} TokCacheEntry;

typedef struct { uint32_t rank; uint32_t pos; } TokHeapItem;

// tokenizer.json: one merge, keyed by the pair of ids it joins
typedef struct { uint64_t key; uint32_t rank, id; } TokPair;  // key = left << 32 | right; key ~0: empty

// tokenizer.json: an added token, found in the text as it is (its bytes at off in token_bytes)
typedef struct { int id; int normalized; } TokAdded;

// ----------------------------------------------------------------------------
// the Tokenizer

typedef struct {
    int vocab_size;
    int eot_token;
    // raw bytes of token i are token_bytes[token_off[i] .. token_off[i+1])
    unsigned char *token_bytes;
    uint32_t *token_off;
    int can_encode;     // 1 after tokenizer_init_bpe, 0 after tokenizer_init_bin
    int max_token_len;  // longest mergeable token, in bytes
    // open-addressing hash set of mergeable token ids keyed by their bytes. In
    // tiktoken's GPT-2 ranks a token's rank is its id, so this is bytes -> rank.
    int32_t *rank_table;
    uint32_t rank_mask;
    // cache: pre-token bytes -> token ids (most words repeat a lot)
    TokCacheEntry *cache;
    uint32_t cache_mask, cache_count;
    unsigned char *cache_keys;
    size_t cache_keys_len, cache_keys_cap;
    int *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
    // scratch for the byte-pair merge, grown as needed
    uint32_t *bpe_next, *bpe_prev, *bpe_rank;
    TokHeapItem *bpe_heap;
    size_t bpe_cap;
    // --- a tokenizer.json (tokenizer_json.h); all zero for GPT-2's two files ---
    int hf;              // merges by the rank of the pair of ids (Hugging Face's BPE), not of the bytes
    int pretok;          // TOK_PRE_*
    int ignore_merges;   // a pre-token that is a whole vocabulary token is taken as it is
    int byte_id[256];    // the token of each single byte; -1 where the vocabulary has none (published files lack some)
    int unk_id;          // model.unk_token's id for such a byte, or -1: the byte is dropped (tokenizers' BPE)
    int fuse_unk;        // a run of such bytes gives one unk_id
    TokPair *pairs;      // open-addressing (left, right) -> (merge rank, merged id)
    uint32_t pair_mask;
    TokAdded *added;     // added tokens matched in the text before pre-tokenising
    int n_added;
    int32_t added_first[257]; // added tokens sorted by first byte: added[added_first[b] .. added_first[b+1])
    uint64_t fingerprint;// a hash of what decides the ids beyond the vocabulary's bytes (0 for GPT-2's files)
    uint32_t *bpe_sym;   // scratch: each part's token id (hf)
    int nfc;             // the normalizer is NFC (tokenizer_nfc.h)
} Tokenizer;

#define TOK_RANK_NONE UINT32_MAX
// Cache limits (overridable with -D, e.g. tiny values to exercise the flush path in tests).
// The cache is bounded so that encoding an endless stream does not grow memory forever.
#ifndef TOK_CACHE_SLOTS
#define TOK_CACHE_SLOTS (1u << 16)          // initial slots (power of 2); grows up to TOK_CACHE_MAX_SLOTS
#endif
#ifndef TOK_CACHE_MAX_SLOTS
#define TOK_CACHE_MAX_SLOTS (1u << 21)
#endif
#ifndef TOK_CACHE_MAX_KEY
#define TOK_CACHE_MAX_KEY 256               // longer pre-tokens are not cached
#endif
#ifndef TOK_CACHE_MAX_BYTES
#define TOK_CACHE_MAX_BYTES (64u << 20)     // arenas beyond this -> cache is flushed
#endif

TOK_FN int tokenizer_eot(Tokenizer *t) { return t->eot_token; }

TOK_FN const unsigned char *tokenizer_token_bytes(Tokenizer *t, int id, int *len) {
    if (id < 0 || id >= t->vocab_size || t->token_off == NULL) { *len = 0; return NULL; }
    *len = (int)(t->token_off[id + 1] - t->token_off[id]);
    return t->token_bytes + t->token_off[id];
}

// rank (== id) of the mergeable token with exactly these bytes, or TOK_RANK_NONE
TOK_FN uint32_t tok_rank(const Tokenizer *t, const unsigned char *p, size_t len) {
    if (len > (size_t)t->max_token_len) { return TOK_RANK_NONE; }
    uint32_t slot = (uint32_t)tok_hash(p, len) & t->rank_mask;
    for (;;) {
        int32_t id = t->rank_table[slot];
        if (id < 0) { return TOK_RANK_NONE; }
        uint32_t off = t->token_off[id];
        if (t->token_off[id + 1] - off == len && memcmp(t->token_bytes + off, p, len) == 0) {
            return (uint32_t)id;
        }
        slot = (slot + 1) & t->rank_mask;
    }
}

TOK_FN void tok_build_rank_table(Tokenizer *t) {
    uint32_t size = 1;
    while (size < 2u * (uint32_t)t->vocab_size) { size <<= 1; }
    t->rank_mask = size - 1;
    t->rank_table = (int32_t *)mallocCheck(size * sizeof(int32_t));
    memset(t->rank_table, 0xff, size * sizeof(int32_t)); // all -1
    t->max_token_len = 0;
    for (int id = 0; id < t->vocab_size; id++) {
        if (id == t->eot_token) { continue; } // special tokens never come out of BPE
        uint32_t off = t->token_off[id], len = t->token_off[id + 1] - off;
        uint32_t slot = (uint32_t)tok_hash(t->token_bytes + off, len) & t->rank_mask;
        while (t->rank_table[slot] >= 0) { slot = (slot + 1) & t->rank_mask; }
        t->rank_table[slot] = id;
        if ((int)len > t->max_token_len) { t->max_token_len = (int)len; }
    }
}

// ----------------------------------------------------------------------------
// byte-pair merge (tiktoken semantics)

// heap ordered by (rank, position): the lowest rank wins, ties go to the leftmost pair
TOK_FN int tok_heap_less(TokHeapItem a, TokHeapItem b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

TOK_FN void tok_heap_push(TokHeapItem *h, size_t *n, TokHeapItem it) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!tok_heap_less(it, h[parent])) { break; }
        h[i] = h[parent];
        i = parent;
    }
    h[i] = it;
}

TOK_FN TokHeapItem tok_heap_pop(TokHeapItem *h, size_t *n) {
    TokHeapItem top = h[0];
    TokHeapItem last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) { break; }
        if (c + 1 < *n && tok_heap_less(h[c + 1], h[c])) { c++; }
        if (!tok_heap_less(h[c], last)) { break; }
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) { h[i] = last; }
    return top;
}

// Splits piece (len >= 2, not itself a token) into tokens, appending the ids to
// out (which must have room for len ids); returns how many were appended.
// Same result as tiktoken's _byte_pair_merge: repeatedly merge the adjacent pair
// of parts whose concatenated bytes have the lowest rank, leftmost on ties. tiktoken
// rescans all parts per merge (O(n^2)); a heap with lazy deletion gives the same
// merge order in O(n log n), which matters for long runs of spaces or punctuation.
TOK_FN void tok_bpe_reserve(Tokenizer *t, size_t len) {
    if (len + 1 > t->bpe_cap) {
        size_t cap = t->bpe_cap ? t->bpe_cap : 64;
        while (cap < len + 1) { cap *= 2; }
        t->bpe_next = (uint32_t *)reallocCheck(t->bpe_next, cap * sizeof(uint32_t));
        t->bpe_prev = (uint32_t *)reallocCheck(t->bpe_prev, cap * sizeof(uint32_t));
        t->bpe_rank = (uint32_t *)reallocCheck(t->bpe_rank, cap * sizeof(uint32_t));
        t->bpe_sym = (uint32_t *)reallocCheck(t->bpe_sym, cap * sizeof(uint32_t));
        // each merge pushes at most 2 items, on top of the initial len-1
        t->bpe_heap = (TokHeapItem *)reallocCheck(t->bpe_heap, 3 * cap * sizeof(TokHeapItem));
        t->bpe_cap = cap;
    }
}

TOK_FN size_t tok_bpe(Tokenizer *t, const unsigned char *piece, size_t len, int *out) {
    tok_bpe_reserve(t, len);
    // parts are identified by their start offset; next[p] is the start of the following part
    uint32_t *next = t->bpe_next, *prev = t->bpe_prev, *rank = t->bpe_rank;
    TokHeapItem *heap = t->bpe_heap;
    size_t nheap = 0;
    uint32_t n = (uint32_t)len;
    for (uint32_t p = 0; p < n; p++) {
        next[p] = p + 1;
        prev[p] = p == 0 ? UINT32_MAX : p - 1;
        rank[p] = p + 1 < n ? tok_rank(t, piece + p, 2) : TOK_RANK_NONE;
        if (rank[p] != TOK_RANK_NONE) { TokHeapItem it = {rank[p], p}; tok_heap_push(heap, &nheap, it); }
    }
    while (nheap > 0) {
        TokHeapItem it = tok_heap_pop(heap, &nheap);
        uint32_t p = it.pos;
        // stale entry? (part p was merged away, or its pair changed since the push;
        // dead parts are marked with rank NONE). A rank identifies the bytes, so an
        // equal rank at the same position means the same pair.
        if (rank[p] != it.rank) { continue; }
        uint32_t q = next[p];         // merge part q into part p
        next[p] = next[q];
        if (next[q] < n) { prev[next[q]] = p; }
        rank[q] = TOK_RANK_NONE;
        // new pair (p, next): bytes p .. end of the part after p
        if (next[p] < n) {
            rank[p] = tok_rank(t, piece + p, next[next[p]] - p);
            if (rank[p] != TOK_RANK_NONE) { TokHeapItem a = {rank[p], p}; tok_heap_push(heap, &nheap, a); }
        } else {
            rank[p] = TOK_RANK_NONE;
        }
        // new pair (prev, p)
        if (prev[p] != UINT32_MAX) {
            uint32_t pp = prev[p];
            rank[pp] = tok_rank(t, piece + pp, next[p] - pp);
            if (rank[pp] != TOK_RANK_NONE) { TokHeapItem b = {rank[pp], pp}; tok_heap_push(heap, &nheap, b); }
        }
    }
    size_t count = 0;
    for (uint32_t p = 0; p < n; p = next[p]) {
        uint32_t id = tok_rank(t, piece + p, next[p] - p);
        if (id == TOK_RANK_NONE) { internal_fault("BPE produced a part that is not a token"); }
        out[count++] = (int)id;
    }
    return count;
}

// tokenizer.json's merges: the merge rank of the pair (a, b) and *id the token it makes, or TOK_RANK_NONE
TOK_FN uint32_t tok_pair(const Tokenizer *t, uint32_t a, uint32_t b, uint32_t *id) {
    uint64_t key = (uint64_t)a << 32 | b;
    uint32_t slot = (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & t->pair_mask;
    for (;;) {
        const TokPair *p = &t->pairs[slot];
        if (p->key == UINT64_MAX) { return TOK_RANK_NONE; }
        if (p->key == key) { *id = p->id; return p->rank; }
        slot = (slot + 1) & t->pair_mask;
    }
}

// Hugging Face's BPE (its Word::merge_all without dropout): start from the piece's single
// bytes, then repeatedly merge the adjacent pair of parts that comes first in the merges list,
// leftmost on ties. Unlike tiktoken's rule (the concatenation's rank), only a listed pair of
// ids merges: the two agree on files whose merges are consistent, but a tokenizer.json need
// not be. Same heap with lazy deletion as tok_bpe; a rank names one pair, so an equal rank at
// the same position is the same pair.
TOK_FN size_t tok_bpe_hf(Tokenizer *t, const unsigned char *piece, size_t len, int *out) {
    tok_bpe_reserve(t, len);
    uint32_t *next = t->bpe_next, *prev = t->bpe_prev, *rank = t->bpe_rank, *sym = t->bpe_sym;
    TokHeapItem *heap = t->bpe_heap;
    size_t nheap = 0;
    // a byte with no token (byte_id -1) is dropped, so its neighbours may merge across it, or is unk_id (one
    // for a run with fuse_unk): tokenizers' BPE::merge_word, where byte-level BPE has each byte a character
    uint32_t n = 0, id = 0;
    int after_unk = 0;
    for (size_t k = 0; k < len; k++) {
        int b = t->byte_id[piece[k]];
        if (b < 0) {
            if (t->unk_id < 0 || (t->fuse_unk && after_unk)) { continue; }
            b = t->unk_id;
            after_unk = 1;
        } else {
            after_unk = 0;
        }
        sym[n++] = (uint32_t)b;
    }
    for (uint32_t p = 0; p < n; p++) {
        next[p] = p + 1;
        prev[p] = p == 0 ? UINT32_MAX : p - 1;
    }
    for (uint32_t p = 0; p < n; p++) {
        rank[p] = p + 1 < n ? tok_pair(t, sym[p], sym[p + 1], &id) : TOK_RANK_NONE;
        if (rank[p] != TOK_RANK_NONE) { TokHeapItem it = {rank[p], p}; tok_heap_push(heap, &nheap, it); }
    }
    while (nheap > 0) {
        TokHeapItem it = tok_heap_pop(heap, &nheap);
        uint32_t p = it.pos;
        if (rank[p] != it.rank) { continue; }  // stale
        uint32_t q = next[p];
        if (tok_pair(t, sym[p], sym[q], &id) != it.rank) { internal_fault("BPE merge table changed under a merge"); }
        sym[p] = id;
        next[p] = next[q];
        if (next[q] < n) { prev[next[q]] = p; }
        rank[q] = TOK_RANK_NONE;
        rank[p] = next[p] < n ? tok_pair(t, sym[p], sym[next[p]], &id) : TOK_RANK_NONE;
        if (rank[p] != TOK_RANK_NONE) { TokHeapItem a = {rank[p], p}; tok_heap_push(heap, &nheap, a); }
        if (prev[p] != UINT32_MAX) {
            uint32_t pp = prev[p];
            rank[pp] = tok_pair(t, sym[pp], sym[p], &id);
            if (rank[pp] != TOK_RANK_NONE) { TokHeapItem b = {rank[pp], pp}; tok_heap_push(heap, &nheap, b); }
        }
    }
    size_t count = 0;
    for (uint32_t p = 0; p < n; p = next[p]) { out[count++] = (int)sym[p]; }
    return count;
}

// ----------------------------------------------------------------------------
// the per-pre-token cache

TOK_FN void tok_cache_reset(Tokenizer *t, uint32_t slots) {
    free(t->cache);
    t->cache = (TokCacheEntry *)mallocCheck(slots * sizeof(TokCacheEntry));
    memset(t->cache, 0, slots * sizeof(TokCacheEntry));
    t->cache_mask = slots - 1;
    t->cache_count = 0;
    t->cache_keys_len = 0;
    t->cache_ids_len = 0;
}

TOK_FN TokCacheEntry *tok_cache_find(Tokenizer *t, const unsigned char *p, size_t len, uint64_t h) {
    uint32_t slot = (uint32_t)h & t->cache_mask;
    for (;;) {
        TokCacheEntry *e = &t->cache[slot];
        if (!e->used) { return e; }
        if (e->hash == h && e->key_len == len && memcmp(t->cache_keys + e->key_off, p, len) == 0) { return e; }
        slot = (slot + 1) & t->cache_mask;
    }
}

TOK_FN void tok_cache_insert(Tokenizer *t, const unsigned char *p, size_t len, uint64_t h,
                             const int *ids, size_t nids) {
    if (len > TOK_CACHE_MAX_KEY) { return; }
    if ((size_t)(t->cache_count + 1) * 2 > (size_t)t->cache_mask + 1) {
        // keep the load factor <= 1/2: grow while allowed, else start over (a bounded
        // cache on huge inputs; cheap to refill since frequent words come back at once)
        uint32_t slots = t->cache_mask + 1;
        if (slots < TOK_CACHE_MAX_SLOTS) {
            TokCacheEntry *old = t->cache;
            uint32_t old_slots = slots;
            slots *= 2;
            t->cache = (TokCacheEntry *)mallocCheck(slots * sizeof(TokCacheEntry));
            memset(t->cache, 0, slots * sizeof(TokCacheEntry));
            t->cache_mask = slots - 1;
            for (uint32_t i = 0; i < old_slots; i++) {
                if (!old[i].used) { continue; }
                uint32_t s = (uint32_t)old[i].hash & t->cache_mask;
                while (t->cache[s].used) { s = (s + 1) & t->cache_mask; }
                t->cache[s] = old[i];
            }
            free(old);
        } else {
            tok_cache_reset(t, slots);
        }
    }
    if (t->cache_keys_len + len > TOK_CACHE_MAX_BYTES || t->cache_ids_len + nids > TOK_CACHE_MAX_BYTES / sizeof(int)) {
        tok_cache_reset(t, t->cache_mask + 1);
    }
    if (t->cache_keys_len + len > t->cache_keys_cap) {
        size_t cap = t->cache_keys_cap ? t->cache_keys_cap : 1 << 16;
        while (cap < t->cache_keys_len + len) { cap *= 2; }
        t->cache_keys = (unsigned char *)reallocCheck(t->cache_keys, cap);
        t->cache_keys_cap = cap;
    }
    if (t->cache_ids_len + nids > t->cache_ids_cap) {
        size_t cap = t->cache_ids_cap ? t->cache_ids_cap : 1 << 14;
        while (cap < t->cache_ids_len + nids) { cap *= 2; }
        t->cache_ids = (int *)reallocCheck(t->cache_ids, cap * sizeof(int));
        t->cache_ids_cap = cap;
    }
    TokCacheEntry *e = tok_cache_find(t, p, len, h);
    if (e->used) { return; } // already present
    e->used = 1;
    e->hash = h;
    e->key_off = (uint32_t)t->cache_keys_len;
    e->key_len = (uint32_t)len;
    e->ids_off = (uint32_t)t->cache_ids_len;
    e->ids_n = (uint32_t)nids;
    memcpy(t->cache_keys + t->cache_keys_len, p, len);
    t->cache_keys_len += len;
    memcpy(t->cache_ids + t->cache_ids_len, ids, nids * sizeof(int));
    t->cache_ids_len += nids;
    t->cache_count++;
}


// ----------------------------------------------------------------------------
// encoding

// Appends the ids of text (no added token in it) to *ids (n used of cap).
TOK_FN void tok_encode_plain(Tokenizer *t, const unsigned char *text, size_t len, int **ids_p, size_t *n_p, size_t *cap_p) {
    int *ids = *ids_p;
    size_t n = *n_p, cap = *cap_p;
    int whole_ok = !t->hf || t->ignore_merges;  // tiktoken's rank rule always ends at a whole-piece token
    int digits = t->pretok == TOK_PRE_DIGITS1 || t->pretok == TOK_PRE_DIGITSN;
    size_t seg_end = 0;  // digits: the end of the current segment (a number piece, or the text up to the next one)
    size_t i = 0;
    while (i < len) {
        size_t j;
        if (digits) {
            if (i >= seg_end) {
                int l, cls = tok_char_at(text, len, i, &l);
                seg_end = i;
                if (cls == TOK_N) {
                    do { seg_end += (size_t)l; } while (t->pretok == TOK_PRE_DIGITSN && seg_end < len
                                                         && tok_char_at(text, len, seg_end, &l) == TOK_N);
                } else {
                    while (seg_end < len && tok_char_at(text, len, seg_end, &l) != TOK_N) { seg_end += (size_t)l; }
                }
            }
            j = tok_pretoken_end(text, seg_end, i);  // GPT-2's pattern within the segment
        } else {
            j = t->pretok == TOK_PRE_GPT2 ? tok_pretoken_end(text, len, i)
                : tok_pretoken_end_llama3(text, len, i, t->pretok == TOK_PRE_LLAMA3 ? 3 : 1);
        }
        const unsigned char *piece = text + i;
        size_t plen = j - i;
        if (n + plen > cap) {
            while (n + plen > cap) { cap *= 2; }
            ids = (int *)reallocCheck(ids, cap * sizeof(int));
        }
        uint32_t r = whole_ok ? tok_rank(t, piece, plen) : TOK_RANK_NONE;
        if (r != TOK_RANK_NONE) {
            ids[n++] = (int)r;  // the whole piece is a token (common case)
        } else if (plen == 1 && t->hf && t->byte_id[piece[0]] >= 0) {
            ids[n++] = t->byte_id[piece[0]];
        } else {
            uint64_t h = tok_hash(piece, plen);
            TokCacheEntry *e = plen <= TOK_CACHE_MAX_KEY ? tok_cache_find(t, piece, plen, h) : NULL;
            if (e && e->used) {
                memcpy(ids + n, t->cache_ids + e->ids_off, e->ids_n * sizeof(int));
                n += e->ids_n;
            } else {
                size_t k = t->hf ? tok_bpe_hf(t, piece, plen, ids + n) : tok_bpe(t, piece, plen, ids + n);
                tok_cache_insert(t, piece, plen, h, ids + n, k);
                n += k;
            }
        }
        i = j;
    }
    *ids_p = ids;
    *n_p = n;
    *cap_p = cap;
}

// The longest added token of the given class (normalized 0 or 1) at text[i], or -1.
TOK_FN int tok_added_at(const Tokenizer *t, const unsigned char *text, size_t len, size_t i, int normalized) {
    int best = -1;
    uint32_t best_len = 0;
    for (int32_t k = t->added_first[text[i]]; k < t->added_first[text[i] + 1]; k++) {
        if (t->added[k].normalized != normalized) { continue; }
        int id = t->added[k].id;
        uint32_t off = t->token_off[id], l = t->token_off[id + 1] - off;
        if (l > best_len && l <= len - i && memcmp(text + i, t->token_bytes + off, l) == 0) { best = k; best_len = l; }
    }
    return best;
}

TOK_FN void tok_encode_added(Tokenizer *t, const unsigned char *text, size_t len, int normalized, int **ids,
                             size_t *n, size_t *cap);

// Text outside the "normalized": false added tokens: normalized (NFC, when the tokenizer says so),
// then the "normalized": true added tokens found in it, then the rest pre-tokenised and merged.
TOK_FN void tok_encode_normalized(Tokenizer *t, const unsigned char *text, size_t len, int **ids, size_t *n, size_t *cap) {
    unsigned char *norm = NULL;
    if (t->nfc && tok_nfc_needed(text, len)) { text = norm = tok_nfc(text, len, &len); }
    if (t->n_added > 0) { tok_encode_added(t, text, len, 1, ids, n, cap); }
    else { tok_encode_plain(t, text, len, ids, n, cap); }
    free(norm);
}

// Hugging Face's AddedVocabulary: the added tokens are found in the text first, leftmost-longest,
// in two passes: those with "normalized": false in the raw text, then those with "normalized":
// true in what is between, after normalizing it. The rest is pre-tokenised and merged.
TOK_FN void tok_encode_added(Tokenizer *t, const unsigned char *text, size_t len, int normalized, int **ids,
                             size_t *n, size_t *cap) {
    size_t start = 0, i = 0;
    while (i < len) {
        int k = tok_added_at(t, text, len, i, normalized);
        if (k < 0) { i++; continue; }
        if (i > start) {
            if (normalized == 0) { tok_encode_normalized(t, text + start, i - start, ids, n, cap); }
            else { tok_encode_plain(t, text + start, i - start, ids, n, cap); }
        }
        int id = t->added[k].id;
        if (*n + 1 > *cap) { *cap *= 2; *ids = (int *)reallocCheck(*ids, *cap * sizeof(int)); }
        (*ids)[(*n)++] = id;
        i += t->token_off[id + 1] - t->token_off[id];
        start = i;
    }
    if (len > start) {
        if (normalized == 0) { tok_encode_normalized(t, text + start, len - start, ids, n, cap); }
        else { tok_encode_plain(t, text + start, len - start, ids, n, cap); }
    }
}

// Encodes text. With GPT-2's two files it is tiktoken's encode_ordinary: the string
// "<|endoftext|>" in the input is NOT turned into the EOT token. With a tokenizer.json it is
// Hugging Face's encode(text, add_special_tokens=False): added tokens (special ones included)
// in the text become their ids, and no template is applied. On success returns 0 and sets
// *out_ids to a malloc'd array of *out_n ids (caller frees). Returns -1 (with a message) if t
// was loaded from a .bin, which cannot encode.
TOK_FN int tokenizer_encode(Tokenizer *t, const unsigned char *text, size_t len, int **out_ids, size_t *out_n) {
    *out_ids = NULL;
    *out_n = 0;
    if (!t->can_encode) {
        fprintf(stderr, "Error: tokenizer_encode: this tokenizer was loaded from an llm.c .bin file, "
                        "which can only decode; load encoder.json + vocab.bpe with tokenizer_init_bpe\n");
        return -1;
    }
    if (t->cache == NULL) { tok_cache_reset(t, TOK_CACHE_SLOTS); }
    // a token always covers >= 1 byte, so len ids is an upper bound; start smaller
    // and grow, to not reserve 4x the input for typical text (~4 bytes per token)
    size_t cap = len / 2 + 16, n = 0;
    int *ids = (int *)mallocCheck(cap * sizeof(int));
    if (t->n_added > 0) { tok_encode_added(t, text, len, 0, &ids, &n, &cap); }
    else if (t->nfc) { tok_encode_normalized(t, text, len, &ids, &n, &cap); }
    else { tok_encode_plain(t, text, len, &ids, &n, &cap); }
    *out_ids = ids;
    *out_n = n;
    return 0;
}

TOK_FN void tokenizer_free(Tokenizer *t) {
    free(t->token_bytes);
    free(t->token_off);
    free(t->rank_table);
    free(t->cache);
    free(t->cache_keys);
    free(t->cache_ids);
    free(t->bpe_next);
    free(t->bpe_prev);
    free(t->bpe_rank);
    free(t->bpe_heap);
    free(t->bpe_sym);
    free(t->pairs);
    free(t->added);
    memset(t, 0, sizeof(*t));
}

// A second encoder for another thread: it shares src's tables (read-only once loaded)
// and has its own cache and scratch. Release it with tokenizer_free_shared, not tokenizer_free.
TOK_FN void tokenizer_share(Tokenizer *dst, const Tokenizer *src) {
    memset(dst, 0, sizeof(*dst));
    dst->vocab_size = src->vocab_size;
    dst->eot_token = src->eot_token;
    dst->token_bytes = src->token_bytes;
    dst->token_off = src->token_off;
    dst->can_encode = src->can_encode;
    dst->max_token_len = src->max_token_len;
    dst->rank_table = src->rank_table;
    dst->rank_mask = src->rank_mask;
    dst->hf = src->hf;
    dst->pretok = src->pretok;
    dst->ignore_merges = src->ignore_merges;
    memcpy(dst->byte_id, src->byte_id, sizeof(dst->byte_id));
    dst->unk_id = src->unk_id;
    dst->fuse_unk = src->fuse_unk;
    dst->pairs = src->pairs;
    dst->pair_mask = src->pair_mask;
    dst->added = src->added;
    dst->n_added = src->n_added;
    memcpy(dst->added_first, src->added_first, sizeof(dst->added_first));
    dst->fingerprint = src->fingerprint;
    dst->nfc = src->nfc;
}

TOK_FN void tokenizer_free_shared(Tokenizer *t) {
    t->token_bytes = NULL;
    t->token_off = NULL;
    t->rank_table = NULL;
    t->pairs = NULL;
    t->added = NULL;
    tokenizer_free(t);
}

#endif // TOKENIZER_H
