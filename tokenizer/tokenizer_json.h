/*
Loading a Hugging Face tokenizer.json into tokenizer.h's Tokenizer: tokenizer_init_json().

What it honours exactly, token for token with the `tokenizers` library's
encode(text, add_special_tokens=False):
- model: BPE (byte-level: every vocabulary string in GPT-2's byte alphabet), its "vocab", its
  "merges" as "a b" strings or as [a, b] pairs, "ignore_merges"; a byte with no token is dropped
  ("unk_token" null) or is "unk_token" (one for a run with "fuse_unk"), as the library does;
- added_tokens: found in the text first (leftmost-longest; "normalized": false ones before
  "normalized": true ones), special or not; their "content" is their bytes;
- pre_tokenizer: ByteLevel (its GPT-2 regex), or Sequence [Split(Regex P, Isolated), ByteLevel
  without its regex] where P is GPT-2's, Llama 3's or Qwen 2's pattern, each a hand-written
  pre-tokeniser in tokenizer.h, or Sequence [Digits, ByteLevel with its regex] (SmolLM);
- decoder: ByteLevel (a token's bytes, concatenated).
Everything else is refused by name rather than approximated, naming the file and the field:
WordPiece, Unigram, WordLevel, BPE with byte_fallback, dropout, a subword prefix or suffix, an
unknown split pattern, a normalizer other than NFC (tokenizer_nfc.h), add_prefix_space, a truncation or padding setting, added
tokens with single_word/lstrip/rstrip. The post_processor (the template that add_special_tokens
applies) is not used: tokenize puts its own document separator between documents.

The document separator (t->eot_token) defaults to <|begin_of_text|> when the file has it (Llama
3: before each document), else <|endoftext|> (GPT-2, Qwen 2), else none (-1: the caller must
name one).
*/
#ifndef TOKENIZER_JSON_H
#define TOKENIZER_JSON_H

#include "../base/json.h"
#include "tokenizer_files.h"  // tokenizer.h, and the byte alphabet (TOK_ALPHABET_END, tok_unicode_to_bytes)

static void tj_fail(const char *path, const char *field, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4), unused));
static void tj_fail(const char *path, const char *field, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fatal("%s: %s: %s", path, field, msg);
}

// a string member, or NULL when absent or null; any other type is an error
static const char *tj_str(const char *path, const JsonNode *obj, const char *key, const char *field) {
    const JsonNode *v = json_get(obj, key);
    if (v == NULL || v->type == JSON_NULL) { return NULL; }
    if (v->type != JSON_STRING) { tj_fail(path, field, "expected a string, found %s", json_type_name(v->type)); }
    return v->str;
}

// a boolean member (dflt when absent or null)
static int tj_bool(const char *path, const JsonNode *obj, const char *key, const char *field, int dflt) {
    const JsonNode *v = json_get(obj, key);
    if (v == NULL || v->type == JSON_NULL) { return dflt; }
    if (v->type != JSON_TRUE && v->type != JSON_FALSE) { tj_fail(path, field, "expected true or false, found %s", json_type_name(v->type)); }
    return v->type == JSON_TRUE;
}

static int tj_is(const char *s, const char *want) { return s != NULL && strcmp(s, want) == 0; }

// The split patterns recognised, as the file spells them (after JSON unescaping).
static const struct { const char *pattern; int pretok; const char *name; } TJ_PATTERNS[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", TOK_PRE_GPT2, "GPT-2"},
    {"'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", TOK_PRE_GPT2, "GPT-2 (tiktoken's spelling)"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_PRE_LLAMA3, "Llama 3"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_PRE_QWEN2, "Qwen 2"},
};

// ByteLevel as a pre-tokenizer: add_prefix_space must be off; returns use_regex (default true)
static int tj_bytelevel(const char *path, const JsonNode *b, const char *field) {
    char f[256];
    snprintf(f, sizeof(f), "%s.add_prefix_space", field);
    if (tj_bool(path, b, "add_prefix_space", f, 1)) {
        tj_fail(path, f, "true is not supported (it would put a space before each text); a tokenizer trained with it "
                         "encodes differently without it, so it is refused rather than ignored");
    }
    snprintf(f, sizeof(f), "%s.use_regex", field);
    return tj_bool(path, b, "use_regex", f, 1);
}

// pre_tokenizer -> TOK_PRE_*
static int tj_pre_tokenizer(const char *path, const JsonNode *root) {
    const JsonNode *pt = json_get(root, "pre_tokenizer");
    if (pt == NULL || pt->type == JSON_NULL) { tj_fail(path, "pre_tokenizer", "missing; a byte-level BPE needs ByteLevel"); }
    const char *type = tj_str(path, pt, "type", "pre_tokenizer.type");
    if (tj_is(type, "ByteLevel")) {
        if (!tj_bytelevel(path, pt, "pre_tokenizer")) {
            tj_fail(path, "pre_tokenizer.use_regex", "false with no Split before it is not supported (nothing would split the text)");
        }
        return TOK_PRE_GPT2;
    }
    if (!tj_is(type, "Sequence")) {
        tj_fail(path, "pre_tokenizer.type", "'%s' is not supported (expected ByteLevel, or a Sequence of [Split, ByteLevel], "
                "[Digits, ByteLevel] or [ByteLevel])",
                type ? type : "(none)");
    }
    const JsonNode *seq = json_get(pt, "pretokenizers");
    if (seq == NULL || seq->type != JSON_ARRAY) { tj_fail(path, "pre_tokenizer.pretokenizers", "expected an array"); }
    if (seq->n == 1 && tj_is(tj_str(path, &seq->kids[0], "type", "pre_tokenizer.pretokenizers[0].type"), "ByteLevel")) {
        if (!tj_bytelevel(path, &seq->kids[0], "pre_tokenizer.pretokenizers[0]")) {
            tj_fail(path, "pre_tokenizer.pretokenizers[0].use_regex", "false with no Split before it is not supported");
        }
        return TOK_PRE_GPT2;
    }
    if (seq->n != 2) {
        tj_fail(path, "pre_tokenizer.pretokenizers", "%zu pre-tokenizers; supported are [Split, ByteLevel], [Digits, ByteLevel] and [ByteLevel]", seq->n);
    }
    const JsonNode *sp = &seq->kids[0], *bl = &seq->kids[1];
    const char *t0 = tj_str(path, sp, "type", "pre_tokenizer.pretokenizers[0].type");
    const char *t1 = tj_str(path, bl, "type", "pre_tokenizer.pretokenizers[1].type");
    if (tj_is(t0, "Digits") && tj_is(t1, "ByteLevel")) {  // SmolLM, StarCoder
        if (!tj_bytelevel(path, bl, "pre_tokenizer.pretokenizers[1]")) {
            tj_fail(path, "pre_tokenizer.pretokenizers[1].use_regex", "false after Digits is not supported (expected true)");
        }
        return tj_bool(path, sp, "individual_digits", "pre_tokenizer.pretokenizers[0].individual_digits", 0) ? TOK_PRE_DIGITS1 : TOK_PRE_DIGITSN;
    }
    if (!tj_is(t0, "Split")) { tj_fail(path, "pre_tokenizer.pretokenizers[0].type", "'%s' is not supported (expected Split or Digits)", t0 ? t0 : "(none)"); }
    if (!tj_is(t1, "ByteLevel")) { tj_fail(path, "pre_tokenizer.pretokenizers[1].type", "'%s' is not supported (expected ByteLevel)", t1 ? t1 : "(none)"); }
    if (tj_bytelevel(path, bl, "pre_tokenizer.pretokenizers[1]")) {
        tj_fail(path, "pre_tokenizer.pretokenizers[1].use_regex", "true after a Split is not supported (GPT-2's regex on each split piece)");
    }
    const char *behavior = tj_str(path, sp, "behavior", "pre_tokenizer.pretokenizers[0].behavior");
    if (!tj_is(behavior, "Isolated")) {
        tj_fail(path, "pre_tokenizer.pretokenizers[0].behavior", "'%s' is not supported (expected Isolated)", behavior ? behavior : "(none)");
    }
    if (tj_bool(path, sp, "invert", "pre_tokenizer.pretokenizers[0].invert", 0)) {
        tj_fail(path, "pre_tokenizer.pretokenizers[0].invert", "true is not supported");
    }
    const JsonNode *pat = json_get(sp, "pattern");
    const char *re = tj_str(path, pat, "Regex", "pre_tokenizer.pretokenizers[0].pattern.Regex");
    if (re == NULL) { tj_fail(path, "pre_tokenizer.pretokenizers[0].pattern", "expected {\"Regex\": ...} (a String pattern is not supported)"); }
    for (size_t k = 0; k < sizeof(TJ_PATTERNS) / sizeof(TJ_PATTERNS[0]); k++) {
        if (strcmp(re, TJ_PATTERNS[k].pattern) == 0) { return TJ_PATTERNS[k].pretok; }
    }
    tj_fail(path, "pre_tokenizer.pretokenizers[0].pattern.Regex", "the pattern '%s' is not one this tokenizer implements "
            "(GPT-2's, Llama 3's or Qwen 2's); refused rather than approximated", re);
}

// a vocabulary string of GPT-2's byte alphabet -> bytes (out has room for n); -1 if it is not one
static int tj_alphabet_bytes(const int cp_to_byte[TOK_ALPHABET_END], const char *s, size_t n, unsigned char *out) {
    size_t i = 0;
    int k = 0;
    while (i < n) {
        int64_t cp = tok_utf8_decode((const unsigned char *)s, n, &i);
        int b = cp < 0 || cp >= TOK_ALPHABET_END ? -1 : cp_to_byte[cp];
        if (b < 0) { return -1; }
        out[k++] = (unsigned char)b;
    }
    return k;
}

static uint64_t tj_fnv(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h = (h ^ p[i]) * 1099511628211ULL; }
    return h;
}

static void tj_pair_insert(Tokenizer *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
    uint64_t key = (uint64_t)a << 32 | b;
    uint32_t slot = (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & t->pair_mask;
    while (t->pairs[slot].key != UINT64_MAX && t->pairs[slot].key != key) { slot = (slot + 1) & t->pair_mask; }
    // a repeated pair: the later line wins, as in Hugging Face's map built from the list
    t->pairs[slot].key = key;
    t->pairs[slot].rank = rank;
    t->pairs[slot].id = id;
}

// id of the model-vocabulary token with these bytes, or -1
static int tj_vocab_id(const Tokenizer *t, const unsigned char *p, size_t n) {
    uint32_t r = tok_rank(t, p, n);
    return r == TOK_RANK_NONE ? -1 : (int)r;
}

// The added token whose content is `s`, or -1
static int tj_added_id(const Tokenizer *t, const char *s) {
    size_t l = strlen(s);
    for (int k = 0; k < t->n_added; k++) {
        int id = t->added[k].id;
        if (t->token_off[id + 1] - t->token_off[id] == l && memcmp(t->token_bytes + t->token_off[id], s, l) == 0) { return id; }
    }
    return -1;
}

// Each byte's token. Published byte-level BPEs may lack some (SmolLM's lacks 21: 0xC0, 0xC1 and 0xF5-0xFF, which
// UTF-8 never holds, and control bytes its training data did not): tokenizers' BPE then gives model.unk_token for
// such a byte (one for a run of them with fuse_unk) or, without one, drops it; tokenizer.h does the same.
static void tj_byte_tokens(Tokenizer *t, const char *path, const JsonNode *model, const JsonNode *vocab) {
    int n_missing = 0;
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        t->byte_id[b] = tj_vocab_id(t, &c, 1);
        n_missing += t->byte_id[b] < 0;
    }
    t->unk_id = -1;
    t->fuse_unk = tj_bool(path, model, "fuse_unk", "model.fuse_unk", 0);
    const char *unk = tj_str(path, model, "unk_token", "model.unk_token");
    if (n_missing == 0 || unk == NULL) { return; }
    for (size_t k = 0; k < vocab->n && t->unk_id < 0; k++) {
        if (strcmp(vocab->keys[k], unk) == 0) { t->unk_id = (int)vocab->kids[k].inum; }
    }
    if (t->unk_id < 0) {
        tj_fail(path, "model.unk_token", "'%s' is not in model.vocab, and %d bytes have no token (tokenizers fails on "
                "such a byte)", unk, n_missing);
    }
}

// What an encoder says once when the tokenizer lacks byte tokens: into out (cap bytes) a line naming how many and
// which, and what becomes of such a byte in the text; 0 (and out empty) when every byte has its token. tokenize prints
// it (it encodes); the trainer, which only decodes, does not.
TOK_FN int tokenizer_missing_bytes_note(const Tokenizer *t, const char *path, char *out, size_t cap) {
    char list[256 * 5 + 1] = "";
    int n = 0;
    for (int b = 0; b < 256; b++) {
        if (t->hf && t->byte_id[b] < 0) { snprintf(list + 5 * n++, 6, " 0x%02X", b); }
    }
    out[0] = '\0';
    if (n == 0) { return 0; }
    int ul = 0;
    const unsigned char *u = t->unk_id >= 0 ? tokenizer_token_bytes((Tokenizer *)t, t->unk_id, &ul) : NULL;
    snprintf(out, cap, "%s: %d of the 256 bytes have no token (%s); as tokenizers does, such a byte in the text %s%.*s%s",
             path, n, list + 1, u ? "becomes model.unk_token " : "is dropped (model.unk_token is null)", u ? ul : 0,
             u ? (const char *)u : "", u && t->fuse_unk ? " (one for a run of them: fuse_unk)" : "");
    return n;
}

// The parts that change the text before the model sees it, or the ids after: the normalizer (none or NFC),
// no truncation or padding, the pre-tokeniser, the decoder (ByteLevel).
static void tj_read_text_steps(Tokenizer *t, const char *path, const JsonNode *root) {
    const JsonNode *norm = json_get(root, "normalizer");
    if (norm != NULL && norm->type != JSON_NULL) {
        const char *nt = tj_str(path, norm, "type", "normalizer.type");
        const JsonNode *ns = json_get(norm, "normalizers");
        if (tj_is(nt, "Sequence") && ns && ns->type == JSON_ARRAY && ns->n == 1) {
            nt = tj_str(path, &ns->kids[0], "type", "normalizer.normalizers[0].type");
            ns = NULL;
        }
        if (tj_is(nt, "NFC")) {
            t->nfc = 1;  // Qwen 2's
        } else if (!(tj_is(nt, "Sequence") && ns && ns->type == JSON_ARRAY && ns->n == 0)) {
            tj_fail(path, "normalizer", "'%s' is not supported (the one normalizer implemented is NFC; expected it or null)",
                    nt ? nt : "(no type)");
        }
    }
    const JsonNode *trunc = json_get(root, "truncation"), *pad = json_get(root, "padding");
    if (trunc && trunc->type != JSON_NULL) { tj_fail(path, "truncation", "set; tokenize encodes whole documents (expected null)"); }
    if (pad && pad->type != JSON_NULL) { tj_fail(path, "padding", "set; tokenize does not pad (expected null)"); }
    t->pretok = tj_pre_tokenizer(path, root);
    const JsonNode *dec = json_get(root, "decoder");
    const char *dt = dec && dec->type == JSON_OBJECT ? tj_str(path, dec, "type", "decoder.type") : NULL;
    if (tj_is(dt, "Sequence")) {
        const JsonNode *ds = json_get(dec, "decoders");
        dt = ds && ds->type == JSON_ARRAY && ds->n == 1 ? tj_str(path, &ds->kids[0], "type", "decoder.decoders[0].type") : "Sequence";
    }
    if (!tj_is(dt, "ByteLevel")) { tj_fail(path, "decoder", "'%s' is not supported (expected ByteLevel)", dt ? dt : "null"); }
}

// The model: a byte-level BPE with none of the options tokenize does not implement; its vocabulary and merges.
static void tj_read_model(Tokenizer *t, const char *path, const JsonNode *root, const JsonNode **vocab_out,
                          const JsonNode **merges_out) {
    const JsonNode *model = json_get(root, "model");
    if (model == NULL || model->type != JSON_OBJECT) { tj_fail(path, "model", "missing or not an object"); }
    const char *mt = tj_str(path, model, "type", "model.type");
    if (mt == NULL && json_get(model, "merges") != NULL) { mt = "BPE"; }
    if (!tj_is(mt, "BPE")) {
        tj_fail(path, "model.type", "'%s' is not supported (only byte-level BPE: GPT-2, Llama 3, Qwen 2 and the like)", mt ? mt : "(none)");
    }
    if (tj_bool(path, model, "byte_fallback", "model.byte_fallback", 0)) {
        tj_fail(path, "model.byte_fallback", "true (SentencePiece-style BPE with <0xNN> byte tokens) is not supported; only byte-level BPE");
    }
    const JsonNode *dropout = json_get(model, "dropout");
    if (dropout && dropout->type != JSON_NULL) { tj_fail(path, "model.dropout", "set; BPE dropout is random (expected null)"); }
    const char *csp = tj_str(path, model, "continuing_subword_prefix", "model.continuing_subword_prefix");
    const char *eow = tj_str(path, model, "end_of_word_suffix", "model.end_of_word_suffix");
    if (csp && csp[0]) { tj_fail(path, "model.continuing_subword_prefix", "'%s' is not supported (expected null)", csp); }
    if (eow && eow[0]) { tj_fail(path, "model.end_of_word_suffix", "'%s' is not supported (expected null)", eow); }
    t->ignore_merges = tj_bool(path, model, "ignore_merges", "model.ignore_merges", 0);
    const JsonNode *vocab = json_get(model, "vocab"), *merges = json_get(model, "merges");
    if (vocab == NULL || vocab->type != JSON_OBJECT || vocab->n == 0) { tj_fail(path, "model.vocab", "missing, empty or not an object"); }
    if (merges == NULL || merges->type != JSON_ARRAY) { tj_fail(path, "model.merges", "missing or not an array"); }
    *vocab_out = vocab;
    *merges_out = merges;
}

// The vocabulary's size: one past the largest id of an added token or of model.vocab, each id checked, and
// each added token's options (none is implemented).
static int tj_vocab_size(const char *path, const JsonNode *added, size_t n_added, const JsonNode *vocab) {
    long long max_id = -1;
    char field[256];
    for (size_t k = 0; k < n_added; k++) {
        const JsonNode *a = &added->kids[k];
        snprintf(field, sizeof(field), "added_tokens[%zu]", k);
        const JsonNode *id = json_get(a, "id");
        const JsonNode *content = json_get(a, "content");
        if (id == NULL || id->type != JSON_NUMBER || !id->is_int || id->inum < 0 || id->inum >= (1 << 24)) {
            tj_fail(path, field, "expected an \"id\" in 0..16777215");
        }
        if (content == NULL || content->type != JSON_STRING || content->str_len == 0) { tj_fail(path, field, "expected a non-empty \"content\" string"); }
        const char *opts[] = {"single_word", "lstrip", "rstrip"};
        for (int o = 0; o < 3; o++) {
            char f2[300];
            snprintf(f2, sizeof(f2), "%s.%s", field, opts[o]);
            if (tj_bool(path, a, opts[o], f2, 0)) { tj_fail(path, f2, "true is not supported (expected false)"); }
        }
        if (id->inum > max_id) { max_id = id->inum; }
    }
    for (size_t k = 0; k < vocab->n; k++) {
        const JsonNode *id = &vocab->kids[k];
        if (id->type != JSON_NUMBER || !id->is_int || id->inum < 0 || id->inum >= (1 << 24)) {
            tj_fail(path, "model.vocab", "the token \"%s\" has no id in 0..16777215", vocab->keys[k]);
        }
        if (id->inum > max_id) { max_id = id->inum; }
    }
    return (int)max_id + 1;
}

// Each id's bytes (t->token_off, t->token_bytes): a vocabulary string through the byte alphabet, an added
// token's content; every id from 0 to V-1 has one. Returns, per id, whether BPE can reach it (it is in the
// vocabulary, so in the rank table).
static unsigned char *tj_token_bytes(Tokenizer *t, const char *path, const JsonNode *vocab, const JsonNode *added,
                                     size_t n_added, const int cp_to_byte[TOK_ALPHABET_END]) {
    int V = t->vocab_size;
    char field[256];
    int32_t *src_of = (int32_t *)mallocCheck((size_t)V * sizeof(int32_t));   // vocab member index, or -1
    int32_t *added_of = (int32_t *)mallocCheck((size_t)V * sizeof(int32_t)); // added_tokens index, or -1
    for (int i = 0; i < V; i++) { src_of[i] = -1; added_of[i] = -1; }
    for (size_t k = 0; k < vocab->n; k++) {
        int id = (int)vocab->kids[k].inum;
        if (src_of[id] >= 0) { tj_fail(path, "model.vocab", "the id %d is given to \"%s\" and to \"%s\"", id, vocab->keys[src_of[id]], vocab->keys[k]); }
        src_of[id] = (int32_t)k;
    }
    for (size_t k = 0; k < n_added; k++) {
        int id = (int)json_get(&added->kids[k], "id")->inum;
        if (added_of[id] >= 0) { snprintf(field, sizeof(field), "added_tokens[%zu]", k); tj_fail(path, field, "the id %d is there twice", id); }
        added_of[id] = (int32_t)k;
    }
    size_t total = 0;
    for (int i = 0; i < V; i++) {
        if (src_of[i] < 0 && added_of[i] < 0) {
            tj_fail(path, "model.vocab", "no token has the id %d (the ids of model.vocab and added_tokens must be 0..%d without a gap)", i, V - 1);
        }
        total += src_of[i] >= 0 ? vocab->key_lens[src_of[i]] : json_get(&added->kids[added_of[i]], "content")->str_len;
    }
    t->token_off = (uint32_t *)mallocCheck(((size_t)V + 1) * sizeof(uint32_t));
    t->token_bytes = (unsigned char *)mallocCheck(total + 1);
    unsigned char *in_vocab = (unsigned char *)mallocCheck((size_t)V);
    uint32_t off = 0;
    for (int i = 0; i < V; i++) {
        t->token_off[i] = off;
        in_vocab[i] = 0;
        int nb = -1;
        if (src_of[i] >= 0) {
            nb = tj_alphabet_bytes(cp_to_byte, vocab->keys[src_of[i]], vocab->key_lens[src_of[i]], t->token_bytes + off);
            in_vocab[i] = nb > 0;
        }
        if (added_of[i] >= 0) {
            const JsonNode *c = json_get(&added->kids[added_of[i]], "content");
            if (nb >= 0 && ((size_t)nb != c->str_len || memcmp(t->token_bytes + off, c->str, c->str_len) != 0)) {
                snprintf(field, sizeof(field), "added_tokens[%d]", added_of[i]);
                tj_fail(path, field, "id %d is \"%s\", but model.vocab's token %d is \"%s\", other bytes", i, c->str, i, vocab->keys[src_of[i]]);
            }
            memcpy(t->token_bytes + off, c->str, c->str_len);
            nb = (int)c->str_len;
        }
        if (nb <= 0) {
            tj_fail(path, "model.vocab", "the token \"%s\" (id %d) is %s", vocab->keys[src_of[i]], i,
                    nb == 0 ? "empty" : "not in GPT-2's byte alphabet (is this a byte-level BPE?), and no added token");
        }
        off += (uint32_t)nb;
    }
    t->token_off[V] = off;
    free(src_of);
    free(added_of);
    return in_vocab;
}

// The rank table (bytes -> id) over the ids BPE can reach (added tokens are found before BPE).
static void tj_rank_table(Tokenizer *t, const unsigned char *in_vocab) {
    int V = t->vocab_size;
    uint32_t size = 1;
    while (size < 2u * (uint32_t)V) { size <<= 1; }
    t->rank_mask = size - 1;
    t->rank_table = (int32_t *)mallocCheck(size * sizeof(int32_t));
    memset(t->rank_table, 0xff, size * sizeof(int32_t));
    t->max_token_len = 0;
    for (int id = 0; id < V; id++) {
        if (!in_vocab[id]) { continue; }
        uint32_t o = t->token_off[id], len = t->token_off[id + 1] - o;
        uint32_t slot = (uint32_t)tok_hash(t->token_bytes + o, len) & t->rank_mask;
        while (t->rank_table[slot] >= 0) { slot = (slot + 1) & t->rank_mask; }
        t->rank_table[slot] = id;
        if ((int)len > t->max_token_len) { t->max_token_len = (int)len; }
    }
}

// The merges ("a b" or ["a", "b"]), in rank order: both parts and their join must be vocabulary tokens.
static void tj_read_merges(Tokenizer *t, const char *path, const JsonNode *merges, const int cp_to_byte[TOK_ALPHABET_END]) {
    size_t nm = merges->n;
    char field[256];
    uint32_t psize = 1;
    while (psize < 2u * (uint32_t)nm + 2) { psize <<= 1; }
    t->pair_mask = psize - 1;
    t->pairs = (TokPair *)mallocCheck(psize * sizeof(TokPair));
    memset(t->pairs, 0xff, psize * sizeof(TokPair));
    unsigned char *buf = (unsigned char *)mallocCheck((size_t)t->max_token_len * 2 + 8);
    for (size_t k = 0; k < nm; k++) {
        const JsonNode *m = &merges->kids[k];
        snprintf(field, sizeof(field), "model.merges[%zu]", k);
        const char *part[2];
        size_t plen[2];
        if (m->type == JSON_STRING) {
            const char *sp = (const char *)memchr(m->str, ' ', m->str_len);
            if (sp == NULL || sp == m->str || memchr(sp + 1, ' ', m->str_len - (size_t)(sp + 1 - m->str)) != NULL || sp + 1 == m->str + m->str_len) {
                tj_fail(path, field, "\"%s\" is not a merge \"a b\" (two tokens, one space)", m->str);
            }
            part[0] = m->str; plen[0] = (size_t)(sp - m->str);
            part[1] = sp + 1; plen[1] = m->str_len - plen[0] - 1;
        } else if (m->type == JSON_ARRAY && m->n == 2 && m->kids[0].type == JSON_STRING && m->kids[1].type == JSON_STRING) {
            part[0] = m->kids[0].str; plen[0] = m->kids[0].str_len;
            part[1] = m->kids[1].str; plen[1] = m->kids[1].str_len;
        } else {
            tj_fail(path, field, "expected \"a b\" or [\"a\", \"b\"], found %s", json_type_name(m->type));
        }
        int ids[2];
        size_t at = 0;
        for (int s = 0; s < 2; s++) {
            int nb = plen[s] <= (size_t)t->max_token_len * 2 ? tj_alphabet_bytes(cp_to_byte, part[s], plen[s], buf + at) : -1;
            ids[s] = nb > 0 && (size_t)nb <= (size_t)t->max_token_len ? tj_vocab_id(t, buf + at, (size_t)nb) : -1;
            if (ids[s] < 0) { tj_fail(path, field, "names the token \"%.*s\", which is not in model.vocab", (int)plen[s], part[s]); }
            at += (size_t)nb;
        }
        int res = tj_vocab_id(t, buf, at);
        if (res < 0) {
            tj_fail(path, field, "merges \"%.*s\" and \"%.*s\" into a token that is not in model.vocab", (int)plen[0], part[0],
                    (int)plen[1], part[1]);
        }
        tj_pair_insert(t, (uint32_t)ids[0], (uint32_t)ids[1], (uint32_t)k, (uint32_t)res);
    }
    free(buf);
}

// The added tokens, grouped by first byte for the scan that finds them in the text before BPE.
static void tj_group_added(Tokenizer *t, const char *path, const JsonNode *added, size_t n_added) {
    char field[256];
    t->n_added = (int)n_added;
    t->added = (TokAdded *)mallocCheck((n_added + 1) * sizeof(TokAdded));
    int32_t count[257] = {0};
    for (size_t k = 0; k < n_added; k++) {
        int id = (int)json_get(&added->kids[k], "id")->inum;
        count[t->token_bytes[t->token_off[id]] + 1]++;
    }
    for (int b = 0; b < 256; b++) { count[b + 1] += count[b]; }
    memcpy(t->added_first, count, sizeof(count));
    for (size_t k = 0; k < n_added; k++) {
        const JsonNode *a = &added->kids[k];
        int id = (int)json_get(a, "id")->inum;
        int slot = count[t->token_bytes[t->token_off[id]]]++;
        t->added[slot].id = id;
        snprintf(field, sizeof(field), "added_tokens[%zu].normalized", k);
        t->added[slot].normalized = tj_bool(path, a, "normalized", field, 0);
    }
}

// The file is read in the order a tokenizer applies it (the text's steps, the model, its tokens), each part
// checked before the next is built on it, so the first error names the first field that is wrong.
TOK_FN void tokenizer_init_json(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof(*t));
    size_t flen;
    unsigned char *text = tok_read_file(path, &flen);
    t->fingerprint = tj_fnv(text, flen) | 1;  // never 0, which means GPT-2's files
    JsonNode root;
    json_parse(&root, path, (char *)text, flen);
    if (root.type != JSON_OBJECT) { fatal("%s: expected a JSON object (a Hugging Face tokenizer.json), found %s", path, json_type_name(root.type)); }
    tj_read_text_steps(t, path, &root);
    const JsonNode *vocab, *merges;
    tj_read_model(t, path, &root, &vocab, &merges);
    const JsonNode *added = json_get(&root, "added_tokens");
    size_t n_added = added && added->type == JSON_ARRAY ? added->n : 0;
    if (added && added->type != JSON_ARRAY && added->type != JSON_NULL) { tj_fail(path, "added_tokens", "expected an array"); }
    t->vocab_size = tj_vocab_size(path, added, n_added, vocab);
    int cp_to_byte[TOK_ALPHABET_END];
    tok_unicode_to_bytes(cp_to_byte);
    unsigned char *in_vocab = tj_token_bytes(t, path, vocab, added, n_added, cp_to_byte);
    tj_rank_table(t, in_vocab);
    free(in_vocab);
    tj_byte_tokens(t, path, json_get(&root, "model"), vocab);
    tj_read_merges(t, path, merges, cp_to_byte);
    tj_group_added(t, path, added, n_added);
    int bot = tj_added_id(t, "<|begin_of_text|>"), eot = tj_added_id(t, "<|endoftext|>");
    if (eot < 0) {
        const unsigned char *e = (const unsigned char *)"<|endoftext|>";
        eot = tj_vocab_id(t, e, 13);
    }
    t->eot_token = bot >= 0 ? bot : eot;
    t->hf = 1;
    t->can_encode = 1;
    json_free(&root);
    free(text);
}

// The id of the token whose bytes are exactly s (an added token first, then the vocabulary), or -1.
TOK_FN int tokenizer_find_token(Tokenizer *t, const char *s) {
    if (t->hf) {
        int id = tj_added_id(t, s);
        if (id >= 0) { return id; }
    }
    for (int id = 0; id < t->vocab_size; id++) {
        int len;
        const unsigned char *b = tokenizer_token_bytes(t, id, &len);
        if ((size_t)len == strlen(s) && memcmp(b, s, (size_t)len) == 0) { return id; }
    }
    return -1;
}

// Whether path looks like a tokenizer.json (it begins with '{' then '"' or '}', white space aside)
// rather than llm.c's .bin (whose magic's first byte is not '{').
TOK_FN int tokenizer_file_is_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { return 0; }
    int c, d = EOF;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t') {}
    if (c == '{') { while ((d = fgetc(f)) == ' ' || d == '\n' || d == '\r' || d == '\t') {} }
    fclose(f);
    return c == '{' && (d == '"' || d == '}');
}

#endif // TOKENIZER_JSON_H
