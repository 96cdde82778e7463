// sample.h: how the loop's samples are drawn and shown. It serves trainer.h's sampling phase (and the
// generation test, test/test_generate.c): a token drawn from the logits with a uniform draw, and a
// token id turned into text by the tokenizer file (llm.c .bin or tokenizer.json), the synthetic corpus's own letters, or as its id.
#ifndef SAMPLE_H
#define SAMPLE_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "../base/utils.h"
#include "../dataloader.h"
#include "../tokenizer/tokenizer_files.h"  // tokenizer_init_bin, and tokenizer.h
#include "../tokenizer/tokenizer_json.h"   // tokenizer_init_json: a Hugging Face tokenizer.json

typedef enum {
    DECODE_IDS,        // no tokenizer known: the ids themselves
    DECODE_TOKENIZER,  // a tokenizer file (--tokenizer, or tokenizer.bin / tokenizer.json beside the train shards)
    DECODE_SYNTHETIC,  // the synthetic corpus's alphabet
} DecoderKind;

typedef struct {
    DecoderKind kind;
    Tokenizer tok;     // DECODE_TOKENIZER only
    char path[4200];   // DECODE_TOKENIZER: the file it was loaded from
    // a byte-level BPE token may end inside a UTF-8 character (its other bytes come with the next token):
    // those bytes wait here until the character is whole, so a terminal never shows half of one
    unsigned char pend[4];
    int npend, need;   // bytes held, and the length of the character they start
} Decoder;

// A JSON file that is not a tokenizer.json (a model's config.json, a tokenizer_config.json) is named as such, with
// what --tokenizer takes, rather than refused by the tokenizer's reader for a field it lacks. Such files are small;
// one over 1 MiB is left to the reader.
static void decoder_refuse_other_json(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size > (1 << 20)) return;
    size_t n;
    unsigned char *text = tok_read_file(path, &n);
    JsonNode root;
    json_parse(&root, path, (char *)text, n);
    const char *what = json_get(&root, "model") ? NULL
                     : json_get(&root, "model_type") || json_get(&root, "architectures") ? "a model's configuration (config.json)"
                     : json_get(&root, "tokenizer_class") || json_get(&root, "added_tokens_decoder")
                         ? "a tokenizer's settings (tokenizer_config.json), not its vocabulary"
                         : "JSON without a \"model\" (the vocabulary and merges of a tokenizer.json)";
    json_free(&root);
    free(text);
    if (what) fatal("--tokenizer %s: not a tokenizer: %s. --tokenizer takes a Hugging Face tokenizer.json (in the model's "
                    "directory beside config.json) or an llm.c tokenizer.bin (./tokenize shards writes one beside its shards)",
                    path, what);
}

// Loads an llm.c tokenizer .bin, or a Hugging Face tokenizer.json (told apart by their first bytes).
static void decoder_load(Decoder *d, const char *path) {
    if (tokenizer_file_is_json(path)) decoder_refuse_other_json(path);
    if (tokenizer_file_is_json(path)) tokenizer_init_json(&d->tok, path); else tokenizer_init_bin(&d->tok, path);
    d->kind = DECODE_TOKENIZER;
    snprintf(d->path, sizeof(d->path), "%s", path);
}

// The tokenizer file ./tokenize writes beside the shards it makes: tokenizer.bin, else tokenizer.json, in the
// directory of `shard`. Returns 1 with its path in out, 0 where there is neither.
static int tokenizer_beside(const char *shard, char *out, size_t n) {
    const char *slash = strrchr(shard, '/');
    int dir = slash ? (int)(slash - shard + 1) : 0;
    snprintf(out, n, "%.*stokenizer.bin", dir, shard);
    if (file_exists(out)) return 1;
    snprintf(out, n, "%.*stokenizer.json", dir, shard);
    return file_exists(out);
}

// The decoder for a run: --tokenizer (tokenizer_path: a .bin or a tokenizer.json), else the synthetic
// corpus's letters, else the tokenizer.bin, or failing that the tokenizer.json, that ./tokenize puts
// beside the shards (first_shard), else ids.
static void decoder_init(Decoder *d, const char *tokenizer_path, int synthetic, const char *first_shard) {
    d->kind = DECODE_IDS;
    d->npend = 0;
    d->path[0] = '\0';
    if (tokenizer_path) {
        struct stat st;
        char inside[4300];
        snprintf(inside, sizeof(inside), "%s/tokenizer.json", tokenizer_path);
        if (stat(tokenizer_path, &st) == 0 && S_ISDIR(st.st_mode))
            fatal("--tokenizer %s: a directory; give the tokenizer file%s%s", tokenizer_path, file_exists(inside) ? ": " : "",
                  file_exists(inside) ? inside : " (a tokenizer.json or an llm.c tokenizer.bin)");
        fclose(fopen_user("--tokenizer", tokenizer_path, "rb"));  // a missing file is named with its flag
        decoder_load(d, tokenizer_path);
    } else if (synthetic) {
        d->kind = DECODE_SYNTHETIC;
    } else {
        char guess[4200];
        if (tokenizer_beside(first_shard, guess, sizeof(guess))) decoder_load(d, guess);
    }
}

static void decoder_free(Decoder *d) {
    if (d->kind == DECODE_TOKENIZER) tokenizer_free(&d->tok);
}

// The vocabulary size of the tokenizer that made the data (the one decoder_init would load for the first
// shard matching train_pattern), for a fresh model's embedding; 0 when there is none.
static int data_vocab_size(const char *tokenizer_path, const char *train_pattern) {
    Decoder d;
    glob_t g;
    char first[4200] = "";
    if (!tokenizer_path && glob(train_pattern, 0, NULL, &g) == 0) {
        if (g.gl_pathc > 0) snprintf(first, sizeof(first), "%s", g.gl_pathv[0]);
        globfree(&g);
    }
    if (!tokenizer_path && !first[0]) return 0;
    decoder_init(&d, tokenizer_path, 0, first);
    int v = d.kind == DECODE_TOKENIZER ? d.tok.vocab_size : 0;
    decoder_free(&d);
    return v;
}

// The token a sample starts from: the end-of-text token when there is a tokenizer, else 0.
static int decoder_first_token(Decoder *d) {
    return d->kind == DECODE_TOKENIZER && tokenizer_eot(&d->tok) >= 0 ? tokenizer_eot(&d->tok) : 0;
}

// The length of the UTF-8 character a lead byte starts (1 for ASCII), or 0 for a byte no character starts with.
static int utf8_lead_length(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

// Bytes to stdout as whole UTF-8 characters: a character's first bytes are held until its last arrives;
// a byte that cannot start or continue one, and a character cut short, print as U+FFFD.
static void decode_put_bytes(Decoder *d, const unsigned char *b, int len) {
    static const char REPLACEMENT[] = "\xEF\xBF\xBD";
    for (int i = 0; i < len; i++) {
        unsigned char c = b[i];
        if (d->npend > 0) {
            if ((c & 0xC0) == 0x80) {
                d->pend[d->npend++] = c;
                if (d->npend == d->need) { fwrite(d->pend, 1, d->npend, stdout); d->npend = 0; }
                continue;
            }
            fputs(REPLACEMENT, stdout);  // cut short by a byte that starts something else
            d->npend = 0;
        }
        int n = utf8_lead_length(c);
        if (n == 1) putchar(c);
        else if (n == 0) fputs(REPLACEMENT, stdout);
        else { d->pend[0] = c; d->npend = 1; d->need = n; }
    }
}

// The end of a sample: a character still incomplete prints as U+FFFD.
static void decode_end(Decoder *d) {
    if (d->npend > 0) fputs("\xEF\xBF\xBD", stdout);
    d->npend = 0;
}

static void decode_print(Decoder *d, int id) {
    if (d->kind == DECODE_TOKENIZER) {
        int len;
        const unsigned char *b = tokenizer_token_bytes(&d->tok, id, &len);
        if (b) decode_put_bytes(d, b, len);
        else { decode_end(d); printf("<%d>", id); }  // a model vocabulary larger than the tokenizer's
    } else if (d->kind == DECODE_SYNTHETIC) {
        putchar(SYNTH_ALPHABET[id % SYNTH_VOCAB]);
    } else {
        printf("%d ", id);
    }
}

// Samples from softmax over the first V logits with a uniform draw u.
static int sample_token(const float *logits, int V, float u) {
    float maxv = -INFINITY;
    for (int i = 0; i < V; i++) if (logits[i] > maxv) maxv = logits[i];
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - maxv);
    double cdf = 0.0, target = u * sum;
    for (int i = 0; i < V; i++) {
        cdf += exp((double)logits[i] - maxv);
        if (target < cdf) return i;
    }
    return V - 1;
}

#endif
