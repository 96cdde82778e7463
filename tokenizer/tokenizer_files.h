/*
The tokenizer's file formats, on top of tokenizer.h (the Tokenizer and its rank table): reading OpenAI's
encoder.json + vocab.bpe into an encoding Tokenizer (tokenizer_init_bpe, with every
check on the two files), and llm.c's tokenizer .bin file (tokenizer_write_bin, and
tokenizer_init_bin, which loads for decoding only). Bad files are fatal() errors
naming the file (and line, for vocab.bpe).
*/
#ifndef TOKENIZER_FILES_H
#define TOKENIZER_FILES_H

#include "../tokenizer.h"

// Reads a whole regular file into memory (NUL-terminated for the parsers' convenience).
// Directories are rejected explicitly: on Linux fopen() of a directory succeeds and only
// the later read fails, which gives a confusing message.
TOK_FN unsigned char *tok_read_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { fatal("%s: cannot open: %s", path, strerror(errno)); }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) { fatal("%s: cannot stat: %s", path, strerror(errno)); }
    if (S_ISDIR(st.st_mode)) { fatal("%s: is a directory, expected a file", path); }
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 16;
    size_t len = 0;
    unsigned char *buf = (unsigned char *)mallocCheck(cap);
    for (;;) {
        if (len + 1 >= cap) { cap *= 2; buf = (unsigned char *)reallocCheck(buf, cap); }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) { break; }
    }
    if (ferror(f)) { fatal("%s: read error: %s", path, strerror(errno)); }
    fclose(f);
    buf[len] = 0;
    *out_len = len;
    return buf;
}

// ----------------------------------------------------------------------------
// loading encoder.json + vocab.bpe

// GPT-2's bytes_to_unicode(): every byte gets a printable code point so that
// tokens can be stored as text. Printable Latin-1 bytes map to themselves, the
// remaining 68 bytes map to U+0100..U+0143 in increasing byte order. We only need
// the inverse: cp_to_byte[cp] for cp < TOK_ALPHABET_END, -1 if cp is not used.
#define TOK_ALPHABET_END (256 + 68)

TOK_FN void tok_unicode_to_bytes(int cp_to_byte[TOK_ALPHABET_END]) {
    int n = 0;
    for (int cp = 0; cp < TOK_ALPHABET_END; cp++) { cp_to_byte[cp] = -1; }
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_to_byte[printable ? b : 256 + n++] = b;
    }
}

// Decodes one UTF-8 code point of text s[*i..n) (used for the token strings in the
// two vocabulary files, which must be well-formed). Returns -1 on malformed input.
TOK_FN int64_t tok_utf8_decode(const unsigned char *s, size_t n, size_t *i) {
    int len;
    tok_char_at(s, n, *i, &len);
    unsigned c = s[*i];
    if (len == 1) {
        if (c >= 0x80) { return -1; }
        (*i)++;
        return c;
    }
    uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (int k = 1; k < len; k++) { cp = (cp << 6) | (s[*i + k] & 0x3F); }
    *i += (size_t)len;
    return cp;
}

typedef struct {
    const char *path;
    const unsigned char *s;
    size_t n, i;
} TokJson;

static void tok_json_fail(TokJson *j, const char *what) __attribute__((noreturn, unused));
static void tok_json_fail(TokJson *j, const char *what) {
    size_t line = 1;
    for (size_t k = 0; k < j->i && k < j->n; k++) { line += j->s[k] == '\n'; }
    fatal("%s: invalid encoder JSON at byte %zu (line %zu): %s", j->path, j->i, line, what);
}

TOK_FN void tok_json_ws(TokJson *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r')) { j->i++; }
}

TOK_FN uint32_t tok_json_hex4(TokJson *j) {
    if (j->n - j->i < 4) { tok_json_fail(j, "truncated \\u escape"); }
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = j->s[j->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') { v |= c - '0'; }
        else if (c >= 'a' && c <= 'f') { v |= c - 'a' + 10; }
        else if (c >= 'A' && c <= 'F') { v |= c - 'A' + 10; }
        else { tok_json_fail(j, "bad hex digit in \\u escape"); }
    }
    return v;
}

// Parses a JSON string (j->i at the opening quote) and stores its code points in
// cps (capacity cap). Returns the number of code points.
TOK_FN size_t tok_json_string(TokJson *j, uint32_t *cps, size_t cap) {
    if (j->i >= j->n || j->s[j->i] != '"') { tok_json_fail(j, "expected '\"'"); }
    j->i++;
    size_t count = 0;
    for (;;) {
        if (j->i >= j->n) { tok_json_fail(j, "unterminated string"); }
        unsigned c = j->s[j->i];
        uint32_t cp;
        if (c == '"') { j->i++; break; }
        if (c < 0x20) { tok_json_fail(j, "control character in string"); }
        if (c == '\\') {
            if (j->i + 1 >= j->n) { tok_json_fail(j, "unterminated escape"); }
            unsigned e = j->s[j->i + 1];
            j->i += 2;
            switch (e) {
                case '"': cp = '"'; break;
                case '\\': cp = '\\'; break;
                case '/': cp = '/'; break;
                case 'b': cp = '\b'; break;
                case 'f': cp = '\f'; break;
                case 'n': cp = '\n'; break;
                case 'r': cp = '\r'; break;
                case 't': cp = '\t'; break;
                case 'u':
                    cp = tok_json_hex4(j);
                    if (cp >= 0xD800 && cp <= 0xDBFF) { // high surrogate: needs a low one
                        if (j->n - j->i < 6 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u') {
                            tok_json_fail(j, "high surrogate without a following \\u low surrogate");
                        }
                        j->i += 2;
                        uint32_t lo = tok_json_hex4(j);
                        if (lo < 0xDC00 || lo > 0xDFFF) { tok_json_fail(j, "invalid low surrogate"); }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        tok_json_fail(j, "unpaired low surrogate");
                    }
                    break;
                default: tok_json_fail(j, "unknown escape");
            }
        } else {
            int64_t v = tok_utf8_decode(j->s, j->n, &j->i);
            if (v < 0) { tok_json_fail(j, "invalid UTF-8 in string"); }
            cp = (uint32_t)v;
        }
        if (count >= cap) { tok_json_fail(j, "token string too long"); }
        cps[count++] = cp;
    }
    return count;
}

// Converts a token string of the GPT-2 byte alphabet to raw bytes. Returns the
// byte count, or -1 if some code point is outside the alphabet.
TOK_FN int tok_cps_to_bytes(const int cp_to_byte[TOK_ALPHABET_END], const uint32_t *cps, size_t n, unsigned char *out) {
    for (size_t k = 0; k < n; k++) {
        int b = cps[k] < TOK_ALPHABET_END ? cp_to_byte[cps[k]] : -1;
        if (b < 0) { return -1; }
        out[k] = (unsigned char)b;
    }
    return (int)n;
}

#define TOK_MAX_TOKEN_STR 1024

// Scratch shared by the two vocabulary files' parsers: the GPT-2 byte alphabet's
// inverse, and room for one token string as code points and as bytes.
typedef struct {
    int cp_to_byte[TOK_ALPHABET_END];
    uint32_t *cps;        // TOK_MAX_TOKEN_STR code points
    unsigned char *bytes; // TOK_MAX_TOKEN_STR bytes
} TokBpeScratch;

// encoder.json as read, before any check on the ids: (id, bytes) pairs in file order,
// the bytes of entry k at arena[offs[k] .. offs[k + 1]).
typedef struct {
    size_t count;
    int64_t *ids;
    uint32_t *offs;
    unsigned char *arena;
    size_t arena_len;
    int eot; // entry index of "<|endoftext|>", -1 if there is none
} TokEncoderEntries;

// encoder.json: {"token string": id, ...}. Collects the pairs in file order; the ids
// are checked to be dense by tok_lay_out_tokens.
TOK_FN void tok_read_encoder_json(TokEncoderEntries *e, const char *path, TokBpeScratch *s) {
    size_t json_len;
    unsigned char *json = tok_read_file(path, &json_len);
    TokJson j = {path, json, json_len, 0};
    // first pass collects (id, bytes) in file order; ids are checked to be dense later
    size_t cap = 1 << 16, count = 0;
    int64_t *ids = (int64_t *)mallocCheck(cap * sizeof(int64_t));
    uint32_t *offs = (uint32_t *)mallocCheck((cap + 1) * sizeof(uint32_t));
    size_t arena_cap = 1 << 20, arena_len = 0;
    unsigned char *arena = (unsigned char *)mallocCheck(arena_cap);
    int eot = -1;
    tok_json_ws(&j);
    if (j.i >= j.n || j.s[j.i] != '{') { tok_json_fail(&j, "expected '{' (is this GPT-2's encoder.json?)"); }
    j.i++;
    tok_json_ws(&j);
    if (j.i < j.n && j.s[j.i] == '}') { tok_json_fail(&j, "empty vocabulary"); }
    for (;;) {
        tok_json_ws(&j);
        size_t key_at = j.i;
        size_t ncp = tok_json_string(&j, s->cps, TOK_MAX_TOKEN_STR);
        int is_eot = ncp == 13;
        const char *eot_str = "<|endoftext|>";
        for (size_t k = 0; is_eot && k < ncp; k++) { is_eot = s->cps[k] == (uint32_t)eot_str[k]; }
        int nb = tok_cps_to_bytes(s->cp_to_byte, s->cps, ncp, s->bytes);
        if (nb < 0) { j.i = key_at; tok_json_fail(&j, "token string has a character outside GPT-2's byte alphabet"); }
        if (nb == 0) { j.i = key_at; tok_json_fail(&j, "empty token string"); }
        tok_json_ws(&j);
        if (j.i >= j.n || j.s[j.i] != ':') { tok_json_fail(&j, "expected ':'"); }
        j.i++;
        tok_json_ws(&j);
        int64_t id = 0;
        size_t digits = 0;
        while (j.i < j.n && j.s[j.i] >= '0' && j.s[j.i] <= '9' && digits < 10) { id = id * 10 + (j.s[j.i++] - '0'); digits++; }
        if (digits == 0 || (j.i < j.n && j.s[j.i] >= '0' && j.s[j.i] <= '9')) { tok_json_fail(&j, "expected a token id (non-negative integer < 10^10)"); }
        if (count == cap) {
            cap *= 2;
            ids = (int64_t *)reallocCheck(ids, cap * sizeof(int64_t));
            offs = (uint32_t *)reallocCheck(offs, (cap + 1) * sizeof(uint32_t));
        }
        if (arena_len + (size_t)nb > arena_cap) { arena_cap *= 2; arena = (unsigned char *)reallocCheck(arena, arena_cap); }
        ids[count] = id;
        offs[count] = (uint32_t)arena_len;
        memcpy(arena + arena_len, s->bytes, (size_t)nb);
        arena_len += (size_t)nb;
        if (is_eot) { eot = (int)count; } // index for now, turned into an id by tok_lay_out_tokens
        count++;
        tok_json_ws(&j);
        if (j.i < j.n && j.s[j.i] == ',') { j.i++; continue; }
        if (j.i < j.n && j.s[j.i] == '}') { j.i++; break; }
        tok_json_fail(&j, "expected ',' or '}'");
    }
    tok_json_ws(&j);
    if (j.i != j.n) { tok_json_fail(&j, "trailing data after the JSON object"); }
    offs[count] = (uint32_t)arena_len;
    free(json);
    e->count = count;
    e->ids = ids;
    e->offs = offs;
    e->arena = arena;
    e->arena_len = arena_len;
    e->eot = eot;
}

// Checks that encoder.json's ids are exactly 0..count-1 with an "<|endoftext|>", lays the
// token bytes out in id order in t (freeing e's arrays), checks that ids 0..255 are the
// 256 single bytes, and builds the rank table.
TOK_FN void tok_lay_out_tokens(Tokenizer *t, TokEncoderEntries *e, const char *encoder_json_path) {
    // ids must be exactly 0..count-1
    size_t count = e->count;
    const int64_t *ids = e->ids;
    const uint32_t *offs = e->offs;
    if (count > (1u << 24)) { fatal("%s: %zu tokens, too many", encoder_json_path, count); }
    int vocab = (int)count;
    int32_t *index_of = (int32_t *)mallocCheck((size_t)vocab * sizeof(int32_t));
    for (int k = 0; k < vocab; k++) { index_of[k] = -1; }
    for (size_t k = 0; k < count; k++) {
        if (ids[k] >= vocab) { fatal("%s: token id %lld is out of range for a vocabulary of %d tokens (ids must be 0..%d)", encoder_json_path, (long long)ids[k], vocab, vocab - 1); }
        if (index_of[ids[k]] >= 0) { fatal("%s: token id %lld appears twice", encoder_json_path, (long long)ids[k]); }
        index_of[ids[k]] = (int32_t)k;
    }
    if (e->eot < 0) { fatal("%s: no \"<|endoftext|>\" token (is this GPT-2's encoder.json?)", encoder_json_path); }
    t->vocab_size = vocab;
    t->eot_token = (int)ids[e->eot];
    // lay out token bytes in id order
    t->token_off = (uint32_t *)mallocCheck(((size_t)vocab + 1) * sizeof(uint32_t));
    t->token_bytes = (unsigned char *)mallocCheck(e->arena_len);
    uint32_t off = 0;
    for (int id = 0; id < vocab; id++) {
        int32_t k = index_of[id];
        uint32_t len = offs[k + 1] - offs[k];
        t->token_off[id] = off;
        memcpy(t->token_bytes + off, e->arena + offs[k], len);
        off += len;
    }
    t->token_off[vocab] = off;
    free(index_of);
    free(e->ids);
    free(e->offs);
    free(e->arena);

    // tiktoken's ranks: the 256 single bytes, then one token per merge, in order,
    // and each rank must equal the id in encoder.json (tiktoken asserts the same).
    int seen[256] = {0};
    for (int id = 0; id < 256 && id < vocab; id++) {
        int len;
        const unsigned char *b = tokenizer_token_bytes(t, id, &len);
        if (len != 1 || seen[b[0]]) { fatal("%s: token id %d should be one of the 256 single-byte tokens", encoder_json_path, id); }
        seen[b[0]] = 1;
    }
    tok_build_rank_table(t);
}

// vocab.bpe: "#version: 0.2" then one merge "a b" per line. Checks each merge against
// tiktoken's ranks: merge k must make exactly token id 256 + k (tiktoken asserts the same).
// Returns the number of merges.
TOK_FN int tok_check_merges(Tokenizer *t, const char *merges_path, const char *encoder_json_path, TokBpeScratch *s) {
    size_t mlen;
    unsigned char *m = tok_read_file(merges_path, &mlen);
    size_t i = 0, line = 1;
    if (mlen >= 1 && m[0] == '#') { // the version comment
        while (i < mlen && m[i] != '\n') { i++; }
        if (i < mlen) { i++; }
        line++;
    }
    int nmerges = 0;
    while (i < mlen) {
        size_t eol = i;
        while (eol < mlen && m[eol] != '\n') { eol++; }
        size_t end = eol;
        if (end > i && m[end - 1] == '\r') { end--; }
        if (end == i) { // only allowed as trailing empty lines
            for (size_t k = eol; k < mlen; k++) {
                if (m[k] != '\n' && m[k] != '\r') { fatal("%s:%zu: empty line in the middle of the merges", merges_path, line); }
            }
            break;
        }
        size_t sp = i;
        while (sp < end && m[sp] != ' ') { sp++; }
        if (sp == i || sp + 1 >= end) { fatal("%s:%zu: expected a merge \"a b\"", merges_path, line); }
        int nb = 0;
        for (int part = 0; part < 2; part++) {
            size_t a = part == 0 ? i : sp + 1, b = part == 0 ? sp : end;
            size_t k = a;
            while (k < b) {
                if (m[k] == ' ') { fatal("%s:%zu: expected exactly two symbols per merge", merges_path, line); }
                int64_t cp = tok_utf8_decode(m, b, &k);
                int byte = cp < 0 || cp >= TOK_ALPHABET_END ? -1 : s->cp_to_byte[cp];
                if (byte < 0) { fatal("%s:%zu: bad character (invalid UTF-8 or outside GPT-2's byte alphabet)", merges_path, line); }
                if (nb >= TOK_MAX_TOKEN_STR) { fatal("%s:%zu: merge too long", merges_path, line); }
                s->bytes[nb++] = (unsigned char)byte;
            }
        }
        int expect = 256 + nmerges;
        uint32_t got = tok_rank(t, s->bytes, (size_t)nb);
        if (got == TOK_RANK_NONE || (int)got != expect) {
            fatal("%s:%zu: merge result should be token id %d in %s, but is %s%d (files from different tokenizers?)",
                     merges_path, line, expect, encoder_json_path, got == TOK_RANK_NONE ? "not a token " : "id ",
                     got == TOK_RANK_NONE ? -1 : (int)got);
        }
        nmerges++;
        line++;
        i = eol + 1;
    }
    free(m);
    return nmerges;
}

TOK_FN void tokenizer_init_bpe(Tokenizer *t, const char *encoder_json_path, const char *merges_path) {
    memset(t, 0, sizeof(*t));
    TokBpeScratch s;
    tok_unicode_to_bytes(s.cp_to_byte);
    s.cps = (uint32_t *)mallocCheck(TOK_MAX_TOKEN_STR * sizeof(uint32_t));
    s.bytes = (unsigned char *)mallocCheck(TOK_MAX_TOKEN_STR);
    TokEncoderEntries e;
    tok_read_encoder_json(&e, encoder_json_path, &s);
    tok_lay_out_tokens(t, &e, encoder_json_path);
    int nmerges = tok_check_merges(t, merges_path, encoder_json_path, &s);
    free(s.cps);
    free(s.bytes);
    int vocab = t->vocab_size;
    if (256 + nmerges + 1 != vocab || t->eot_token != vocab - 1) {
        fatal("%s has %d merges but %s has %d tokens; expected 256 byte tokens + one per merge + <|endoftext|> last",
                 merges_path, nmerges, encoder_json_path, vocab);
    }
    t->can_encode = 1;
}

// ----------------------------------------------------------------------------
// llm.c tokenizer .bin file

// whether llm.c's .bin can hold t: every token 1..255 bytes (a tokenizer.json's added token may not be)
TOK_FN int tokenizer_bin_fits(Tokenizer *t) {
    for (int id = 0; id < t->vocab_size; id++) {
        int len;
        tokenizer_token_bytes(t, id, &len);
        if (len < 1 || len > 255) { return 0; }
    }
    return t->eot_token >= 0;
}

TOK_FN void tokenizer_write_bin(Tokenizer *t, const char *path) {
    // the format stores lengths in a uint8 and has no room for empty tokens
    for (int id = 0; id < t->vocab_size; id++) {
        int len;
        tokenizer_token_bytes(t, id, &len);
        if (len < 1 || len > 255) { fatal("%s: token %d is %d bytes long; the llm.c format allows 1..255", path, id, len); }
    }
    // write to a temporary name and rename, so a crash never leaves half a file at path
    size_t plen = strlen(path);
    char *tmp = (char *)mallocCheck(plen + 5);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) { fatal("%s: cannot create: %s", tmp, strerror(errno)); }
    uint32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = TOKENIZER_MAGIC;
    header[1] = TOKENIZER_VERSION;
    header[2] = (uint32_t)t->vocab_size;
    header[3] = (uint32_t)t->eot_token;
    int ok = fwrite(header, sizeof(uint32_t), 256, f) == 256;
    for (int id = 0; ok && id < t->vocab_size; id++) {
        int len;
        const unsigned char *b = tokenizer_token_bytes(t, id, &len);
        unsigned char len8 = (unsigned char)len;
        ok = fwrite(&len8, 1, 1, f) == 1 && fwrite(b, 1, (size_t)len, f) == (size_t)len;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (fclose(f) != 0 && ok) { ok = 0; err = errno; }
    if (!ok) { remove(tmp); fatal("%s: write failed: %s", tmp, strerror(err)); }
    if (rename(tmp, path) != 0) { err = errno; remove(tmp); fatal("%s: cannot rename to %s: %s", tmp, path, strerror(err)); }
    free(tmp);
}

TOK_FN void tokenizer_init_bin(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof(*t));
    size_t n;
    unsigned char *buf = tok_read_file(path, &n);
    if (n < 1024) { fatal("%s: file is %zu bytes, too small for the 1024-byte header (not an llm.c tokenizer file?)", path, n); }
    uint32_t header[256];
    memcpy(header, buf, sizeof(header)); // the files are little-endian, as are the hosts we run on
    if (header[0] != TOKENIZER_MAGIC) { fatal("%s: bad magic %u, expected %d (not an llm.c tokenizer file?)", path, header[0], TOKENIZER_MAGIC); }
    uint32_t version = header[1];
    uint32_t vocab = header[2];
    if (version != 1 && version != 2) { fatal("%s: unsupported version %u, expected 1 or 2", path, version); }
    if (vocab == 0 || vocab > (1u << 24)) { fatal("%s: implausible vocab size %u", path, vocab); }
    if (version == 1) {
        // version 1 did not store the EOT id; llm.c assumes GPT-2's
        if (vocab != 50257) { fatal("%s: version 1 file with vocab size %u; only GPT-2 (50257) is supported for version 1", path, vocab); }
        t->eot_token = 50256;
    } else {
        if (header[3] >= vocab) { fatal("%s: EOT token id %u out of range for vocab size %u", path, header[3], vocab); }
        t->eot_token = (int)header[3];
    }
    t->vocab_size = (int)vocab;
    t->token_off = (uint32_t *)mallocCheck(((size_t)vocab + 1) * sizeof(uint32_t));
    t->token_bytes = (unsigned char *)mallocCheck(n - 1024);
    size_t pos = 1024, off = 0;
    for (uint32_t id = 0; id < vocab; id++) {
        if (pos >= n) { fatal("%s: truncated: file ends at token %u of %u", path, id, vocab); }
        size_t len = buf[pos++];
        if (len == 0) { fatal("%s: token %u has length 0", path, id); }
        if (n - pos < len) { fatal("%s: truncated: file ends inside token %u of %u", path, id, vocab); }
        t->token_off[id] = (uint32_t)off;
        memcpy(t->token_bytes + off, buf + pos, len);
        off += len;
        pos += len;
    }
    t->token_off[vocab] = (uint32_t)off;
    if (pos != n) { fatal("%s: %zu unexpected bytes after the last token (vocab size %u)", path, n - pos, vocab); }
    free(buf);
    t->can_encode = 0;
}

#endif // TOKENIZER_FILES_H
