// tokenizer_utf8.h: the pre-tokenizers' view of UTF-8 text: a character's byte length and Unicode class
// (letter, number, white space, other), from the generated tables. Shared by tokenizer.h and tokenizer_nfc.h.
#ifndef TOKENIZER_UTF8_H
#define TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define TOK_FN static __attribute__((unused))  // the tokenizer headers' functions

// ----------------------------------------------------------------------------
// Unicode classification for the pre-tokeniser

#include "tokenizer_tables.h" // TOK_L/TOK_N/TOK_WS, tok_uni_ranges (generated)

TOK_FN int tok_cp_class(uint32_t cp) {
    // binary search for the last range with lo <= cp
    size_t lo = 0, hi = tok_uni_nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_uni_ranges[mid].lo <= cp) { lo = mid + 1; } else { hi = mid; }
    }
    if (lo == 0) { return TOK_OTHER; }
    const TokUniRange *r = &tok_uni_ranges[lo - 1];
    return cp <= r->hi ? (int)r->cls : TOK_OTHER;
}

// Class and byte length of the character starting at s[i] (i < n). Decodes only
// well-formed UTF-8 (Unicode Table 3-7: no overlongs, no surrogates, <= U+10FFFF).
// Anything else is taken one byte at a time as an "other" character: tiktoken never
// sees such input (it encodes Python str), so all we promise there is not to crash
// and to round-trip the bytes exactly.
TOK_FN int tok_char_at(const unsigned char *s, size_t n, size_t i, int *len) {
    unsigned c = s[i];
    if (c < 0x80) {
        *len = 1;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) { return TOK_L; }
        if (c >= '0' && c <= '9') { return TOK_N; }
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) { return TOK_WS; }
        return TOK_OTHER;
    }
    size_t avail = n - i;
    uint32_t cp;
    int need;
    unsigned lo2 = 0x80, hi2 = 0xBF; // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) { need = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3; cp = c & 0x0F;
        if (c == 0xE0) { lo2 = 0xA0; }  // overlong
        if (c == 0xED) { hi2 = 0x9F; }  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4; cp = c & 0x07;
        if (c == 0xF0) { lo2 = 0x90; }  // overlong
        if (c == 0xF4) { hi2 = 0x8F; }  // > U+10FFFF
    } else { *len = 1; return TOK_OTHER; }
    if (avail < (size_t)need || s[i + 1] < lo2 || s[i + 1] > hi2) { *len = 1; return TOK_OTHER; }
    for (int k = 1; k < need; k++) {
        unsigned b = s[i + k];
        if ((b & 0xC0) != 0x80) { *len = 1; return TOK_OTHER; }
        cp = (cp << 6) | (b & 0x3F);
    }
    *len = need;
    return tok_cp_class(cp);
}

#endif
